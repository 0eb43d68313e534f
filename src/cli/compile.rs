//! `swflow compile`: a model to a folder of C sources, parameters and a Makefile.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use swflow_codegen::{GradientLayout, TrainingSpec};
use swflow_scheduler::target::Target;

use super::grad::{GradArgs, Step, TrainArgs};
use super::model::{ModelArgs, PipelineArgs};
use super::saved::Timing;

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
    /// With --grad the program computes the loss and gradients and writes them as `run --grad`
    /// does (`./model --input NAME=x.npy --input labels=y.npy --output DIR`).
    #[command(flatten)]
    pub grad: GradArgs,
    /// With --train the program trains: `./model --input NAME=data.npy --labels labels.npy
    /// --epochs E --output DIR` (see its --help).
    #[command(flatten)]
    pub train: TrainArgs,
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
    if args.grad.grad && args.train.train {
        bail!("--grad and --train are exclusive: --train builds a training program, --grad one gradient");
    }
    let lib = emulator_lib(args.emulator_lib.clone())?;
    let lib_text = makefile_path(&lib)?;
    let start = Instant::now();
    let timing = Timing {
        target: &target,
        pipeline: &args.pipeline,
    };
    let (g, p, out) = if args.train.train {
        let Step {
            step,
            program,
            optimizer,
            choices,
        } = args.train.step(&args.model, &args.grad, timing)?;
        let options = choices.apply(args.pipeline.options(&step.graph, true)?);
        let mut p = swflow_scheduler::pipeline::compile_with(&step.graph, &target, options)?;
        p.set_updates(&step.updates()).map_err(|e| anyhow::anyhow!(e))?;
        args.pipeline.tune(&mut p, &target)?;
        let spec = TrainingSpec::new(&step, &program, &optimizer).map_err(|e| anyhow::anyhow!(e))?;
        let in_place = swflow_scheduler::memplan::plan(&p, &target).in_place.len();
        println!(
            "training step: {} parameters, {} optimizer state tensors; {in_place} of their {} updates in place",
            step.params.len(),
            step.state.len(),
            p.updates.len()
        );
        let out = swflow_codegen::generate_training(&p, &target, lib_text, &spec)?;
        (step.graph, p, out)
    } else if args.grad.grad {
        args.train.unused()?;
        let (_, program, choices) = args
            .grad
            .prepare(&args.model, std::collections::HashMap::new(), Some(timing))?;
        let options = choices.apply(args.pipeline.options(&program.graph, true)?);
        let mut p = swflow_scheduler::pipeline::compile_with(&program.graph, &target, options)?;
        args.pipeline.tune(&mut p, &target)?;
        let names = swflow_frontend::npy::output_file_names(program.wrt.iter().map(String::as_str));
        let mut index = serde_json::Map::new();
        let mut files = vec!["loss.npy".to_string()];
        for (name, file) in program.wrt.iter().zip(&names) {
            files.push(format!("grad/{file}"));
            index.insert(name.clone(), format!("grad/{file}").into());
        }
        let layout = GradientLayout {
            files,
            index: serde_json::to_string_pretty(&index)? + "\n",
            params: {
                // By name: the folder must not depend on the map's order.
                let mut params: Vec<_> = program
                    .parameters
                    .iter()
                    .map(|(n, v)| (n.clone(), std::sync::Arc::new(v.clone())))
                    .collect();
                params.sort_by(|a, b| a.0.cmp(&b.0));
                params
            },
        };
        let out = swflow_codegen::generate_gradient(&p, &target, lib_text, &layout)?;
        (program.graph, p, out)
    } else {
        args.grad.unused()?;
        args.train.unused()?;
        let (_, g) = args.model.load()?;
        let options = args.pipeline.options(&g, false)?;
        let mut p = swflow_scheduler::pipeline::compile_with(&g, &target, options)?;
        args.pipeline.tune(&mut p, &target)?;
        let out = swflow_codegen::generate(&p, &target, lib_text)?;
        (g, p, out)
    };
    let elapsed = start.elapsed();
    out.write_to(&args.output)
        .with_context(|| format!("writing {}", args.output.display()))?;
    println!(
        "{}: {} kernels for {}, {} files, {} bytes of C in {} (schedule and codegen {:.1} ms)",
        g.name,
        p.kernels.len(),
        target.name,
        out.files.len(),
        out.source_bytes(),
        args.output.display(),
        elapsed.as_secs_f64() * 1e3,
    );
    Ok(())
}
