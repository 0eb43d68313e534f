//! Options shared by verbs that read a model.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use swflow_frontend::ir::{Graph, Tensor};
use swflow_frontend::onnx::{ImportOptions, ModelFile};
use swflow_scheduler::loops::Program;
use swflow_scheduler::pipeline::{Fuse, Options};
use swflow_scheduler::tape::{TapeMode, TapeOptions};
use swflow_scheduler::target::Target;

#[derive(clap::Args, Debug)]
pub struct ModelArgs {
    /// The ONNX model file.
    pub model: PathBuf,
    /// Value of a symbolic input dimension, e.g. `--dim N=1` (repeatable).
    #[arg(long = "dim", value_name = "NAME=N")]
    pub dims: Vec<String>,
    /// Freeze a graph input to the contents of a .npy file at compile time, for models that
    /// pass shapes or axes as inputs (repeatable).
    #[arg(long = "const", value_name = "NAME=FILE.npy")]
    pub constants: Vec<String>,
}

/// Options of the compilation pipeline, for verbs that lower and schedule a model.
#[derive(clap::Args, Debug)]
pub struct PipelineArgs {
    /// Graph-level optimisation before lowering: `default` simplifies the graph (constant
    /// folding, common subexpressions, per-channel scales and shifts folded into convolution
    /// and matrix-product weights), then fuses primitives into shared kernels by the rules of
    /// the fusion table; `simplify` simplifies only, one kernel per primitive; `none` lowers
    /// every primitive of the graph as imported to its own kernel. The graph engine always
    /// runs the graph as imported.
    #[arg(long, default_value = "default", value_parser = ["none", "simplify", "default"])]
    pub fuse: String,
    /// How a gradient program's tape (the forward values its backward pass reads) travels,
    /// with --grad or --train: `per-tensor` reads every saved tensor back in each backward
    /// kernel's own tiling; `regions` stores a value only the backward needs as per-CPE
    /// records moved whole, when every backward kernel reading it can take the partition and
    /// tiles of the kernel that wrote it (each then does); `stream` moves such a value, when
    /// one backward kernel reads it, through a tape arena in LDM in layers that the reader
    /// pops in reverse order [default: stream]
    #[arg(long, value_parser = ["per-tensor", "regions", "stream"])]
    pub tape: Option<String>,
    /// The most bytes of each CPE's LDM a stream's tape arena takes in `--tape stream` (taken
    /// from the LDM of the kernels that stream; a stream takes what one CPE's share needs, up
    /// to this) [default: an eighth of the target's LDM]
    #[arg(long, value_name = "BYTES")]
    pub tape_arena: Option<usize>,
    /// Which cheap forward values a gradient program recomputes in its backward pass, with
    /// --grad or --train: `rule` recomputes every elementwise value it reads from values kept
    /// anyway; `timed` stores each of those, largest first, when the program is then modelled
    /// faster on the target (measured with the JIT on the timed emulator, on the parameters'
    /// initial values) [default: timed]
    #[arg(long, value_parser = ["rule", "timed"])]
    pub recompute: Option<String>,
    /// How each value that only the backward pass reads travels, with --tape regions or
    /// stream: `rule` moves each as far as the mode can (streamed, else in records, else
    /// whole); `timed` holds one to a plainer way (in records rather than streamed, or whole,
    /// read in each backward kernel's own tiling as --tape per-tensor reads it) when the
    /// kernels that write and read it are modelled faster so and the whole program is too
    /// (measured as --recompute timed measures) [default: timed]
    #[arg(long, value_parser = ["rule", "timed"])]
    pub tape_travel: Option<String>,
    /// Choose every kernel's schedule by modelled time: run the kernel alone, compiled by the
    /// JIT, on the timed emulator under at most N schedules (the scheduler's choice, the best
    /// of every other partition, those that leave CPEs idle included, then tiles halved,
    /// doubled or grown whole one loop at a time from the fastest) and keep the fastest. With
    /// --grad or --train, the kernels whose schedules the tape plan fixes (those writing a
    /// value stored as records or streamed, and the backward kernels that mirror them) keep
    /// them
    #[arg(long, value_name = "N")]
    pub tune: Option<usize>,
}

impl PipelineArgs {
    /// Whether `--recompute` asks for the timed choice.
    pub fn recompute_timed(&self) -> bool {
        self.recompute.as_deref() != Some("rule")
    }

    /// Whether `--tape-travel` asks for the timed choice.
    pub fn travel_timed(&self) -> bool {
        self.tape_travel.as_deref() != Some("rule")
    }

    /// The pipeline options for `g`, a gradient or training program (whose first output is
    /// the loss) when `gradient`.
    pub fn options(&self, g: &Graph, gradient: bool) -> Result<Options> {
        let fuse = match self.fuse.as_str() {
            "none" => Fuse::None,
            "simplify" => Fuse::Simplify,
            _ => Fuse::Default,
        };
        if self.tune == Some(0) {
            bail!("--tune needs at least one schedule to measure per kernel");
        }
        if !gradient && self.recompute.is_some() {
            bail!("--recompute applies with --grad or --train");
        }
        if !gradient && self.tape_travel.is_some() {
            bail!("--tape-travel applies with --grad or --train");
        }
        let tape = match (gradient, self.tape.as_deref()) {
            (false, Some(_)) => bail!("--tape applies with --grad or --train"),
            (false, None) if self.tape_arena.is_some() => bail!("--tape-arena applies with --grad or --train"),
            (false, None) => None,
            (true, mode) => {
                let mode = mode.map_or(Some(TapeMode::default()), TapeMode::parse);
                let mode = mode.context("the tape mode is one of those listed")?;
                if self.tape_arena.is_some() && mode != TapeMode::Stream {
                    bail!("--tape-arena applies with --tape stream");
                }
                if self.tape_travel.is_some() && mode == TapeMode::PerTensor {
                    bail!("--tape-travel applies with --tape regions or stream");
                }
                if self.tape_arena == Some(0) {
                    bail!("--tape-arena must be a positive number of bytes");
                }
                let options = TapeOptions::for_gradient(g, mode).context("a gradient program has a loss output")?;
                Some(TapeOptions {
                    arena_bytes: self.tape_arena,
                    ..options
                })
            }
        };
        Ok(Options { fuse, tape })
    }

    /// Tunes the schedules of `p` (compiled with [`PipelineArgs::options`]) for `target` when
    /// `--tune` asks for it, logging what changed; returns what it did.
    pub fn tune(&self, p: &mut Program, target: &Target) -> Result<Option<Tuning>> {
        let Some(budget) = self.tune else { return Ok(None) };
        let start = Instant::now();
        let tuned = swflow_codegen::tune::tune(p, target, budget)?;
        let seconds = |cycles: Option<f64>| cycles.map(|c| c / target.clock_hz);
        let functions = swflow_codegen::kernel_function_names(p);
        let kernels: Vec<TunedKernel> = tuned
            .iter()
            .zip(functions)
            .map(|(t, kernel)| TunedKernel {
                kernel,
                measured: t.measured,
                before_seconds: seconds(t.before),
                after_seconds: seconds(t.after),
            })
            .collect();
        for k in &kernels {
            tracing::debug!(
                "tuned {}: {} schedules measured, {:?} -> {:?} s",
                k.kernel,
                k.measured,
                k.before_seconds,
                k.after_seconds
            );
        }
        let sum = |f: fn(&TunedKernel) -> Option<f64>| kernels.iter().filter_map(f).sum::<f64>();
        let tuning = Tuning {
            budget,
            seconds: start.elapsed().as_secs_f64(),
            changed: tuned.iter().filter(|t| t.changed()).count(),
            before_seconds: sum(|k| k.before_seconds),
            after_seconds: sum(|k| k.after_seconds),
            kernels,
        };
        tracing::info!("{}", tuning.summary());
        Ok(Some(tuning))
    }
}

/// What `--tune` did: the kernels' modelled seconds, each measured alone, under the
/// scheduler's schedule and under the one kept.
#[derive(serde::Serialize, Debug)]
pub struct Tuning {
    /// Schedules measured per kernel, at most.
    pub budget: usize,
    /// Wall-clock seconds tuning took.
    pub seconds: f64,
    /// Kernels whose schedule changed.
    pub changed: usize,
    /// Sums over the kernels measured.
    pub before_seconds: f64,
    pub after_seconds: f64,
    pub kernels: Vec<TunedKernel>,
}

/// One kernel's tuning; its modelled seconds are `None` when its schedule could not be
/// measured, or when a gradient program's tape plan fixes it (then none was measured): it
/// keeps the scheduler's.
#[derive(serde::Serialize, Debug)]
pub struct TunedKernel {
    /// The kernel's function name, as the emulator's reports name it.
    pub kernel: String,
    pub measured: usize,
    pub before_seconds: Option<f64>,
    pub after_seconds: Option<f64>,
}

impl Tuning {
    /// One line: what changed and how long it took.
    pub fn summary(&self) -> String {
        format!(
            "tuned {} kernels in {:.1} s ({} schedules each at most): {} changed; measured alone, {:.6} -> {:.6} s",
            self.kernels.len(),
            self.seconds,
            self.budget,
            self.changed,
            self.before_seconds,
            self.after_seconds
        )
    }
}

/// Splits `NAME=VALUE`.
pub fn split_assignment<'a>(text: &'a str, what: &str) -> Result<(&'a str, &'a str)> {
    match text.split_once('=') {
        Some((n, v)) if !n.is_empty() && !v.is_empty() => Ok((n, v)),
        _ => bail!("{what} '{text}' must have the form NAME=VALUE"),
    }
}

impl ModelArgs {
    pub fn options(&self) -> Result<ImportOptions> {
        let mut opts = ImportOptions::default();
        for d in &self.dims {
            let (name, value) = split_assignment(d, "--dim")?;
            let v = value
                .parse()
                .with_context(|| format!("--dim {name}: '{value}' is not a non-negative integer"))?;
            opts.dims.insert(name.to_string(), v);
        }
        for c in &self.constants {
            let (name, path) = split_assignment(c, "--const")?;
            opts.constants
                .insert(name.to_string(), swflow_frontend::npy::read(path.as_ref())?);
        }
        Ok(opts)
    }

    /// Reads and imports the model.
    pub fn load(&self) -> Result<(ModelFile, Graph)> {
        self.load_with(HashMap::new())
    }

    /// Reads and imports the model, knowing the values of some inputs: those an op needs
    /// statically (shapes, axes, ...) are frozen to them.
    pub fn load_with(&self, values: HashMap<String, Tensor>) -> Result<(ModelFile, Graph)> {
        let start = Instant::now();
        let file = ModelFile::read(&self.model)?;
        let opts = ImportOptions {
            values,
            ..self.options()?
        };
        let graph = file.import(&opts)?;
        tracing::info!(
            "imported {} into {} primitive nodes in {:.2?}",
            self.model.display(),
            graph.nodes().len(),
            start.elapsed()
        );
        Ok((file, graph))
    }
}
