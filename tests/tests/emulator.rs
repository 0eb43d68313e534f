//! The athread and CRTS interfaces of runtime-c on the emulator, driven by hand-written C
//! programs (`tests/emulator/*.c`) that check identities, strided DMA, barriers, running reply
//! counters and the asynchrony of DMA.

use std::process::Command;

use swflow_tests::cbuild::{emulator_lib, scratch};
use swflow_tests::workspace_root;

fn build_and_run(program: &str) {
    let root = workspace_root();
    let dir = scratch("emulator", program);
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join(program);
    let build = Command::new("gcc")
        .args(["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-DSWFLOW_EMULATOR"])
        .args(["-DSWFLOW_CPES=64", "-DSWFLOW_LDM_BYTES=61440"])
        .arg(format!("-I{}", root.join("runtime-c/emulator").display()))
        .arg(root.join(format!("tests/emulator/{program}.c")))
        .arg(root.join("runtime-c/emulator/emulator.c"))
        .arg(emulator_lib().unwrap())
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&exe)
        .output()
        .unwrap();
    assert!(build.status.success(), "{}", String::from_utf8_lossy(&build.stderr));
    let run = Command::new(&exe).output().unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success() && stdout == "ok\n",
        "{stdout}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn athread_interface() {
    build_and_run("athread_api");
}

#[test]
fn crts_interface() {
    build_and_run("crts_api");
}
