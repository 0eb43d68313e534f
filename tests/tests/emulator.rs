//! Hand-written C programs (`tests/emulator/*.c`) on runtime-c and the emulator: the athread
//! and CRTS interfaces (identities, strided DMA, barriers, running reply counters, the
//! asynchrony of DMA), and the STREAM calibration of the timing model against the DMA
//! bandwidth measured on an SW26010 core group.

use std::path::PathBuf;
use std::process::Command;

use swflow_scheduler::target::Target;
use swflow_tests::cbuild::{emulator_lib, scratch};
use swflow_tests::workspace_root;

/// Builds `tests/emulator/<program>.c` for the emulator with `target`'s machine header, runs
/// it and returns its standard output; panics when the build or the run fails.
fn build_and_run(program: &str, target: &Target) -> String {
    let root = workspace_root();
    let dir = scratch("emulator", program);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("swflow_machine.h"), swflow_codegen::machine_header(target)).unwrap();
    let exe = dir.join(program);
    let include = |p: PathBuf| format!("-I{}", p.display());
    let build = Command::new("gcc")
        .args(["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-DSWFLOW_EMULATOR"])
        .arg(include(dir.clone()))
        .arg(include(root.join("runtime-c/emulator")))
        .arg(include(root.join("runtime-c/include")))
        .arg(root.join(format!("tests/emulator/{program}.c")))
        .arg(root.join("runtime-c/emulator/emulator.c"))
        .arg(emulator_lib().unwrap())
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&exe)
        .output()
        .unwrap();
    assert!(build.status.success(), "{}", String::from_utf8_lossy(&build.stderr));
    let run = Command::new(&exe).output().unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    assert!(run.status.success(), "{stdout}{}", String::from_utf8_lossy(&run.stderr));
    std::fs::remove_dir_all(&dir).unwrap();
    stdout
}

#[test]
fn athread_interface() {
    assert_eq!(build_and_run("athread_api", &Target::sw26010()), "ok\n");
}

#[test]
fn crts_interface() {
    assert_eq!(build_and_run("crts_api", &Target::sw26010pro()), "ok\n");
}

/// Rows of `../shared/reference/dma_stream_sw26010.csv`: block bytes, copy and triad MB/s.
fn measured() -> Vec<(usize, f64, f64)> {
    let path = workspace_root().join("../shared/reference/dma_stream_sw26010.csv");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()))
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[0].parse().unwrap(), f[1].parse().unwrap(), f[2].parse().unwrap())
        })
        .collect()
}

/// `tests/emulator/stream.c` (copy and triad, one blocking get, compute and one blocking put
/// per block, 64 CPEs) on the sw26010 target reproduces every measured row with blocks of
/// 64 bytes or more within ±10 %, in modelled time. Smaller blocks are printed only: they
/// take less than the fitted latencies of a get and a put on the hardware.
#[test]
fn stream_matches_the_measured_dma_bandwidth() {
    let out = build_and_run("stream", &Target::sw26010());
    let modelled: Vec<(usize, f64, f64)> = out
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[0].parse().unwrap(), f[1].parse().unwrap(), f[2].parse().unwrap())
        })
        .collect();
    let measured = measured();
    assert_eq!(
        modelled.len(),
        measured.len(),
        "one modelled row per measured block size:\n{out}"
    );
    println!("block bytes   copy MB/s: measured  modelled  error   triad MB/s: measured  modelled  error");
    let mut worst: f64 = 0.0;
    let mut failures = Vec::new();
    for (&(b, mc, mt), &(mb, c, t)) in measured.iter().zip(&modelled) {
        assert_eq!(b, mb, "block sizes in the same order");
        let (ec, et) = (c / mc - 1.0, t / mt - 1.0);
        println!(
            "{b:>11}  {mc:>19.1}  {c:>8.1}  {:>+5.1}%  {mt:>20.1}  {t:>8.1}  {:>+5.1}%",
            100.0 * ec,
            100.0 * et
        );
        if b >= 64 {
            worst = worst.max(ec.abs()).max(et.abs());
            if ec.abs() > 0.10 || et.abs() > 0.10 {
                failures.push(b);
            }
        }
    }
    println!("largest error from 64-byte blocks up: {:.1}%", 100.0 * worst);
    assert!(failures.is_empty(), "rows outside ±10 %: {failures:?}");
}
