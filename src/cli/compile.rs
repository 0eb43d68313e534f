//! `swflow compile`: a model to a folder of C sources, parameters and a Makefile.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use swflow_scheduler::target::Target;

use super::model::{ModelArgs, PipelineArgs};

/// File name of the emulator's static library, which cargo builds next to `swflow`.
const EMULATOR_LIB: &str = "libswflow_emulator.a";

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub pipeline: PipelineArgs,
    /// Output folder (created if missing; files swflow writes are replaced).
    #[arg(short, long)]
    pub output: PathBuf,
    /// Target: sw26010, sw26010pro, or a target description file (.toml).
    #[arg(long, default_value = "sw26010")]
    pub target: String,
    /// The emulator library the default build links. Default: $SWFLOW_EMULATOR_LIB, else
    /// libswflow_emulator.a beside the swflow executable.
    #[arg(long, value_name = "FILE")]
    pub emulator_lib: Option<PathBuf>,
}

/// Where the default build finds the emulator: the option, the environment, or beside the
/// executable (where `cargo build --release` puts both).
pub(super) fn emulator_lib(given: Option<PathBuf>) -> Result<PathBuf> {
    let path = match given.or_else(|| std::env::var_os("SWFLOW_EMULATOR_LIB").map(PathBuf::from)) {
        Some(p) => p,
        None => {
            let exe = std::env::current_exe().context("locating the swflow executable")?;
            exe.parent().unwrap_or(Path::new(".")).join(EMULATOR_LIB)
        }
    };
    if !path.is_file() {
        tracing::warn!(
            "emulator library {} not found: the default build needs it (cargo build --release builds it)",
            path.display()
        );
    }
    Ok(std::path::absolute(&path).unwrap_or(path))
}

/// `lib` as the Makefile's text, when make can read it back.
pub(super) fn makefile_path(lib: &Path) -> Result<&str> {
    lib.to_str()
        .filter(|s| !s.contains([' ', '\n', '$', '#', '\\', '"', '\'']))
        .with_context(|| {
            format!(
                "the emulator library path {} cannot be written in a Makefile",
                lib.display()
            )
        })
}

pub fn run(args: Args) -> Result<()> {
    let target = Target::resolve(&args.target)?;
    let (_, g) = args.model.load()?;
    let lib = emulator_lib(args.emulator_lib)?;
    let lib_text = makefile_path(&lib)?;
    let start = Instant::now();
    let p = swflow_scheduler::pipeline::compile_with(&g, &target, args.pipeline.options())?;
    let scheduled = start.elapsed();
    let out = swflow_codegen::generate(&p, &target, lib_text)?;
    let generated = start.elapsed() - scheduled;
    out.write_to(&args.output)
        .with_context(|| format!("writing {}", args.output.display()))?;
    println!(
        "{}: {} kernels for {}, {} files, {} bytes of C in {} (schedule {:.1} ms, codegen {:.1} ms)",
        g.name,
        p.kernels.len(),
        target.name,
        out.files.len(),
        out.source_bytes(),
        args.output.display(),
        scheduled.as_secs_f64() * 1e3,
        generated.as_secs_f64() * 1e3
    );
    Ok(())
}
