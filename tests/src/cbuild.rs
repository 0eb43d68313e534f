//! Building and running generated C: `swflow compile`'s library path, `make`, and the built
//! program on .npy files, as a user would run them.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use swflow_frontend::ir::{Graph, Tensor};
use swflow_frontend::npy;
use swflow_scheduler::target::Target;

use crate::workspace_root;

/// The emulator library `cargo build --release` makes beside the `swflow` binary, as the
/// suites link it: a copy without debug information (`strip -g`), made once per build of the
/// library, which links in about half the time (the original where `strip` is missing).
pub fn emulator_lib() -> Result<PathBuf> {
    use std::hash::{Hash, Hasher};
    let lib = workspace_root().join("target/release/libswflow_emulator.a");
    let meta = std::fs::metadata(&lib)
        .with_context(|| format!("{} is missing: run cargo build --release first", lib.display()))?;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (meta.len(), meta.modified()?).hash(&mut h);
    let stripped = workspace_root()
        .join(".cache/c/emulator-lib")
        .join(format!("{:016x}", h.finish()))
        .join("libswflow_emulator.a");
    if stripped.is_file() {
        return Ok(stripped);
    }
    let folder = stripped.parent().context("library folder")?;
    std::fs::create_dir_all(folder)?;
    // A name of this call's own: suites and their threads may make copies at once.
    static COPIES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let copy = COPIES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let partial = folder.join(format!("partial-{}-{copy}.a", std::process::id()));
    std::fs::copy(&lib, &partial)?;
    match Command::new("strip").arg("-g").arg(&partial).status() {
        Ok(status) if status.success() => {
            // Another suite may have made the same copy meanwhile: either will do.
            std::fs::rename(&partial, &stripped)?;
            Ok(stripped)
        }
        _ => {
            std::fs::remove_file(&partial)?;
            Ok(lib)
        }
    }
}

/// A scratch folder for generated programs, under the git-ignored cache.
pub fn scratch(kind: &str, name: &str) -> PathBuf {
    workspace_root().join(".cache/c").join(kind).join(name)
}

/// Lowers, schedules and generates `g` for `target` into `dir` (emptied first).
pub fn compile(g: &Graph, target: &Target, dir: &Path) -> Result<swflow_codegen::Generated> {
    let p = swflow_scheduler::pipeline::compile(g, target)?;
    generate(&p, target, dir)
}

/// Generates scheduled program `p` for `target` into `dir` (emptied first).
pub fn generate(
    p: &swflow_scheduler::loops::Program,
    target: &Target,
    dir: &Path,
) -> Result<swflow_codegen::Generated> {
    let lib = emulator_lib()?;
    let out = swflow_codegen::generate(p, target, lib.to_str().context("library path")?)?;
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    out.write_to(dir)?;
    Ok(out)
}

/// The runtime's objects, which are the same in every folder built with the same runtime
/// sources, machine header and Makefile flags.
const RUNTIME_OBJECTS: [&str; 3] = [
    "build/emulator/runtime/src/swflow_host.o",
    "build/emulator/runtime/src/swflow_train.o",
    "build/emulator/runtime/emulator/emulator.o",
];

/// A key for the runtime objects of folder `dir`: every file of its `runtime/` copy, the
/// machine header and the Makefile's compiler, flag and API lines.
fn runtime_objects_key(dir: &Path) -> Result<String> {
    use std::hash::{Hash, Hasher};
    let mut files = vec![dir.join("include/swflow_machine.h")];
    let mut folders = vec![dir.join("runtime")];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder)? {
            let path = entry?.path();
            if path.is_dir() {
                folders.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files.sort();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for f in &files {
        f.strip_prefix(dir)?.hash(&mut h);
        std::fs::read(f)?.hash(&mut h);
    }
    let makefile = std::fs::read_to_string(dir.join("Makefile"))?;
    for line in makefile.lines() {
        if ["CC ", "CFLAGS ", "API ", "EMU_INCLUDES ", "INCLUDES "]
            .iter()
            .any(|p| line.starts_with(p))
        {
            line.hash(&mut h);
        }
    }
    Ok(format!("{:016x}", h.finish()))
}

/// Builds folder `dir` with `make`, as [`make`] with no arguments does, but compiles the
/// runtime's sources (identical across folders, and most of the compile time of a small
/// model) once per key and reuses their objects: suites that build hundreds of folders spend
/// their time on the generated code.
pub fn make_reusing_runtime(dir: &Path) -> Result<()> {
    let cached = workspace_root()
        .join(".cache/c/runtime-objects")
        .join(runtime_objects_key(dir)?);
    if cached.is_dir() {
        for object in RUNTIME_OBJECTS {
            let to = dir.join(object);
            std::fs::create_dir_all(to.parent().context("object folder")?)?;
            // A fresh copy is newer than the sources just written, so make keeps it.
            std::fs::copy(cached.join(object), &to)?;
        }
    }
    make(dir, &[])?;
    if !cached.is_dir() {
        let partial = cached.with_extension(format!("{}.tmp", std::process::id()));
        for object in RUNTIME_OBJECTS {
            let to = partial.join(object);
            std::fs::create_dir_all(to.parent().context("cache folder")?)?;
            std::fs::copy(dir.join(object), &to)?;
        }
        // Another suite may have stored the same key meanwhile: either copy will do.
        if std::fs::rename(&partial, &cached).is_err() {
            std::fs::remove_dir_all(&partial)?;
        }
    }
    Ok(())
}

/// The Makefile target that type-checks a folder generated for `target` against its
/// machine's SDK prototypes (the CPE code's vector types belong to one machine).
pub fn sdk_check(target: &swflow_scheduler::target::Target) -> &'static str {
    match target.api {
        swflow_scheduler::target::Api::Crts => "check-sunway-pro",
        swflow_scheduler::target::Api::Athread => "check-sunway",
    }
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

/// Runs the built `dir/model` on the inputs it makes itself (seed 0) with `SWFLOW_STATS`, and
/// returns the emulator's report.
pub fn run_with_stats(dir: &Path) -> Result<serde_json::Value> {
    let stats = dir.join("stats.json");
    let out = Command::new(dir.join("model"))
        .env("SWFLOW_STATS", &stats)
        .output()
        .context("running the built model")?;
    if !out.status.success() {
        bail!(
            "model exited with {}:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(serde_json::from_str(&std::fs::read_to_string(&stats)?)?)
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
