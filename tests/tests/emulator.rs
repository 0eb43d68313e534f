//! Hand-written C programs (`tests/emulator/*.c`) on runtime-c and the emulator: the athread
//! and CRTS interfaces (identities, strided DMA, barriers, running reply counters, the
//! asynchrony of DMA), register communication, DMA classes and the stack check of streamed tape, and the STREAM
//! calibration of the timing model against the DMA bandwidth measured on an SW26010 core
//! group.

use std::path::PathBuf;
use std::process::Command;

use swflow_scheduler::target::Target;
use swflow_tests::cbuild::{emulator_lib, scratch};
use swflow_tests::workspace_root;

/// Builds `tests/emulator/<program>.c` for the emulator with `target`'s machine header, runs
/// it and returns its standard output; panics when the build or the run fails.
fn build_and_run(program: &str, target: &Target) -> String {
    let (dir, exe) = build(program, target);
    let run = Command::new(&exe).output().unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    assert!(run.status.success(), "{stdout}{}", String::from_utf8_lossy(&run.stderr));
    std::fs::remove_dir_all(&dir).unwrap();
    stdout
}

/// Builds `tests/emulator/<program>.c` for the emulator with `target`'s machine header in a
/// scratch folder; returns the folder and the executable. Panics when the build fails.
fn build(program: &str, target: &Target) -> (PathBuf, PathBuf) {
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
    (dir, exe)
}

#[test]
fn athread_interface() {
    assert_eq!(build_and_run("athread_api", &Target::sw26010()), "ok\n");
}

/// `tests/emulator/regcomm.c`: SUMMA with row and column broadcasts gives the exact product;
/// a receive no put matches and a message never received each stop the program with one
/// message naming the kernel and the CPE. The register-communication lines type-check
/// against the SW26010 SDK's headers.
#[test]
fn register_communication() {
    let (dir, exe) = build("regcomm", &Target::sw26010());
    let run = |mode: Option<&str>| {
        Command::new(&exe)
            .args(mode)
            .env_remove("SWFLOW_STATS")
            .output()
            .unwrap()
    };
    let ok = run(None);
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    assert_eq!(String::from_utf8_lossy(&ok.stdout), "ok\n");
    for (mode, message) in [
        (
            "unmatched",
            "error: kernel 'unmatched' on CPE 9: getc waits for a message that no CPE of its column will send: \
             every CPE of the launch waits or has returned (1 in a receive, 0 at a barrier, 63 returned)\n",
        ),
        (
            "lost",
            "error: kernel 'lost' on CPE 3: returns with 1 message(s) in its row buffer never taken by getr \
             (the first put by CPE 0)\n",
        ),
    ] {
        let out = run(Some(mode));
        assert_eq!(out.status.code(), Some(1), "{mode}");
        assert_eq!(String::from_utf8_lossy(&out.stderr), message, "{mode}");
    }
    let check = dir.join("regcomm_sdk.c");
    std::fs::write(
        &check,
        "#include <slave.h>\n#include <simd.h>\nfloatv4 pass(floatv4 v);\nfloatv4 pass(floatv4 v)\n{\n\
         simd_putr(v, 8);\n    simd_putc(v, 0);\n    v = simd_getr(v);\n    return simd_getc(v);\n}\n",
    )
    .unwrap();
    let out = Command::new("gcc")
        .args(["-std=c99", "-fsyntax-only", "-Wall", "-Wextra", "-Werror"])
        .arg(format!(
            "-I{}",
            workspace_root().join("runtime-c/sdk/sw26010").display()
        ))
        .arg(&check)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn crts_interface() {
    assert_eq!(build_and_run("crts_api", &Target::sw26010pro()), "ok\n");
}

/// `tests/emulator/tape_class.c` sets DMA classes with `SWFLOW_DMA_CLASS`, as generated code
/// does: its tape transfers are counted apart and in the totals, streamed tape popped in
/// reverse order passes, and popping the first layer first, or popping after the host reset
/// the tape, stops the program naming the kernel, the CPE and the layer expected. The class
/// lines type-check against both SDKs' headers, where they are nothing.
#[test]
fn dma_classes_from_c_reach_the_tape_counters_and_the_stack_check() {
    let (dir, exe) = build("tape_class", &Target::sw26010());
    let run = |mode: &str, stats: Option<&PathBuf>| {
        let mut cmd = Command::new(&exe);
        cmd.arg(mode).env_remove("SWFLOW_TIMING").env_remove("SWFLOW_TRACE");
        match stats {
            Some(s) => cmd.env("SWFLOW_STATS", s),
            None => cmd.env_remove("SWFLOW_STATS"),
        };
        cmd.output().unwrap()
    };
    let stats_file = dir.join("stats.json");
    let ok = run("", Some(&stats_file));
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    assert_eq!(String::from_utf8_lossy(&ok.stdout), "ok\n");
    let stats: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&stats_file).unwrap()).unwrap();
    let kernel = |name: &str| {
        stats["kernels"]
            .as_array()
            .unwrap()
            .iter()
            .find(|k| k["kernel"] == name)
            .unwrap_or_else(|| panic!("no kernel {name} in {stats}"))
            .clone()
    };
    let count = |row: &serde_json::Value, keys: &[&str]| -> Vec<u64> {
        keys.iter()
            .map(|k| row[k].as_u64().unwrap_or_else(|| panic!("{k}")))
            .collect()
    };
    // Per CPE: layers of 1024 and 512 bytes and a record of 256.
    let (transfers, bytes) = (64 * 3, 64 * 1792);
    let fwd = kernel("fwd");
    assert_eq!(
        count(&fwd, &["puts", "put_bytes", "tape_puts", "tape_put_bytes", "tape_gets"]),
        [transfers, bytes, transfers, bytes, 0]
    );
    let bwd = kernel("bwd");
    assert_eq!(
        count(&bwd, &["gets", "get_bytes", "tape_gets", "tape_get_bytes"]),
        [transfers, bytes, transfers, bytes]
    );
    assert_eq!(count(&bwd, &["puts", "put_bytes", "tape_puts"]), [64, bytes, 0]);
    assert!(bwd["tape_seconds"].as_f64().unwrap() > 0.0);
    assert_eq!(
        count(&stats["total"], &["tape_gets", "tape_puts"]),
        [transfers, transfers]
    );
    let wrong = run("wrong-order", None);
    assert_eq!(wrong.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&wrong.stderr),
        "error: kernel 'bwd' on CPE 5: tape stream get of 1024 bytes at offset 7680 of tape is not the \
         last pushed layer (512 bytes at offset 8704 of tape, pushed by kernel 'fwd')\n"
    );
    // Every CPE finds nothing to pop; the first to report stops the program, alone.
    let reset = run("reset", None);
    assert_eq!(reset.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&reset.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert!(
        matches!(lines.as_slice(), [l] if l.starts_with("error: kernel 'bwd' on CPE ")
            && l.contains(": tape stream get of 512 bytes at offset ")
            && l.ends_with(" of tape pops no layer: none is outstanding")),
        "{stderr}"
    );
    let root = workspace_root();
    let check = dir.join("classes.c");
    std::fs::write(
        &check,
        "#ifdef SWFLOW_CRTS\n#include <crts.h>\n#else\n#include <slave.h>\n#endif\n#include \"swflow_slave.h\"\n\
         void classes(void);\nvoid classes(void)\n{\n    SWFLOW_DMA_CLASS(SWFLOW_DMA_TAPE_STREAM);\n\
         SWFLOW_DMA_CLASS(SWFLOW_DMA_TAPE);\n    SWFLOW_DMA_CLASS(SWFLOW_DMA_DATA);\n}\n",
    )
    .unwrap();
    for (target, api) in [(Target::sw26010(), None), (Target::sw26010pro(), Some("-DSWFLOW_CRTS"))] {
        let sdk = &target.name;
        let machine = dir.join(sdk);
        std::fs::create_dir_all(&machine).unwrap();
        std::fs::write(
            machine.join("swflow_machine.h"),
            swflow_codegen::machine_header(&target),
        )
        .unwrap();
        let out = Command::new("gcc")
            .args(["-std=c99", "-fsyntax-only", "-Wall", "-Wextra", "-Werror"])
            .args(api)
            .arg(format!("-I{}", machine.display()))
            .arg(format!("-I{}", root.join("runtime-c/include").display()))
            .arg(format!("-I{}", root.join("runtime-c/sdk").join(sdk).display()))
            .arg(&check)
            .output()
            .unwrap();
        assert!(out.status.success(), "{sdk}: {}", String::from_utf8_lossy(&out.stderr));
    }
    std::fs::remove_dir_all(&dir).unwrap();
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
