//! Building and running generated C: `swflow compile`'s library path, `make`, and the built
//! program on .npy files, as a user would run them.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use swflow_frontend::ir::{Graph, Tensor};
use swflow_frontend::npy;
use swflow_scheduler::target::Target;

use crate::workspace_root;

/// The emulator library `cargo build --release` makes beside the `swflow` binary.
pub fn emulator_lib() -> Result<PathBuf> {
    let lib = workspace_root().join("target/release/libswflow_emulator.a");
    if !lib.is_file() {
        bail!("{} is missing: run cargo build --release first", lib.display());
    }
    Ok(lib)
}

/// A scratch folder for generated programs, under the git-ignored cache.
pub fn scratch(kind: &str, name: &str) -> PathBuf {
    workspace_root().join(".cache/c").join(kind).join(name)
}

/// Lowers, schedules and generates `g` for `target` into `dir` (emptied first).
pub fn compile(g: &Graph, target: &Target, dir: &Path) -> Result<swflow_codegen::Generated> {
    let p = swflow_scheduler::pipeline::compile(g, target)?;
    let lib = emulator_lib()?;
    let out = swflow_codegen::generate(&p, target, lib.to_str().context("library path")?)?;
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    out.write_to(dir)?;
    Ok(out)
}

/// Runs `make` with `args` in `dir`; a failure carries make's output.
pub fn make(dir: &Path, args: &[&str]) -> Result<()> {
    let out = Command::new("make")
        .arg("-C")
        .arg(dir)
        .args(["-s", "-j2"])
        .args(args)
        .output()
        .context("running make")?;
    if !out.status.success() {
        bail!(
            "make {} failed:\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// Runs the built `dir/model` on `inputs` (one per graph input, in order) and reads back one
/// output per graph output.
pub fn run_model(dir: &Path, g: &Graph, inputs: &[Tensor], extra: &[&str]) -> Result<Vec<Tensor>> {
    let in_dir = dir.join("inputs");
    let out_dir = dir.join("outputs");
    std::fs::create_dir_all(&in_dir)?;
    let mut cmd = Command::new(dir.join("model"));
    for (i, (id, t)) in g.inputs().zip(inputs).enumerate() {
        let path = in_dir.join(format!("{i}.npy"));
        npy::write(&path, t)?;
        cmd.arg("--input")
            .arg(format!("{}={}", g.node(id).name, path.display()));
    }
    cmd.arg("--output").arg(&out_dir).args(extra);
    let out = cmd.output().context("running the built model")?;
    if !out.status.success() {
        bail!(
            "model exited with {}:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    npy::output_file_names(g.outputs.iter().map(|o| o.name.as_str()))
        .iter()
        .map(|f| Ok(npy::read(&out_dir.join(f))?))
        .collect()
}
