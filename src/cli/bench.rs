//! `swflow bench`: compile a model, run it on the timed emulator and report where the modelled
//! time goes, kernel by kernel, beside the scheduler's own DMA estimate, and how much of the
//! DMA carried gradient tape. The JIT runs the scheduled kernels in-process (the default);
//! `--engine c` builds the generated C with its Makefile and runs that. Both report the same
//! counters and modelled time.

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde::Serialize;
use serde_json::Value;
use swflow_frontend::ir::Graph;
use swflow_frontend::random;
use swflow_scheduler::schedule::estimate::{estimate, launch_cycles};
use swflow_scheduler::target::Target;

use super::compile::{emulator_lib, makefile_path};
use super::grad::{self, GradArgs, TrainArgs};
use super::model::{ModelArgs, PipelineArgs, Tuning};
use super::roofline;
use super::saved::{print_choices, RecomputeReport, Timing, TravelReport};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub pipeline: PipelineArgs,
    /// Target: sw26010, sw26010pro, or a target description file (.toml).
    #[arg(long, default_value = "sw26010")]
    pub target: String,
    /// How to run: `jit` compiles the scheduled kernels in-process with Cranelift; `c`
    /// generates the C folder, builds it with `make` and runs the program.
    #[arg(long, default_value = "jit", value_parser = ["jit", "c"])]
    pub engine: String,
    /// With `--engine c`: keep the compiled folder here (default: a temporary folder, removed
    /// afterwards).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Print a machine-readable JSON report instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Write a Chrome trace of the modelled run (opens in Perfetto).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Draw the kernels on a roofline, as SVG.
    #[arg(long, value_name = "FILE.svg")]
    pub roofline: Option<PathBuf>,
    /// Seed of the pseudo-random inputs.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// With `--engine c`: parallel jobs of `make` (default: the machine's cores).
    #[arg(short, long)]
    pub jobs: Option<usize>,
    #[command(flatten)]
    pub grad: GradArgs,
    #[command(flatten)]
    pub train: TrainArgs,
}

/// One kernel: what the emulator reported, and where it came from.
#[derive(Serialize, Clone, Debug)]
pub struct KernelRow {
    pub kernel: String,
    /// The kernel's primitive op, and the model node it came from.
    pub op: String,
    pub node: Option<String>,
    /// The scheduler's estimate of the time the DMA queue serves the kernel's transfers
    /// (`Estimate::queue`, the per-block costs included); the emulator's `dma_queue_seconds`
    /// judges it.
    pub scheduler_dma_estimate_seconds: f64,
    /// The scheduler's estimate of the kernel's whole time, by which it chose the schedule
    /// (`schedule::estimate`: compute, transfers and their overlap), with the kernel's launch
    /// and last put latency; the emulator's `modelled_seconds` judges it.
    pub scheduler_estimate_seconds: f64,
    /// The least main-memory traffic of the kernel: its result written once and each tensor
    /// it reads read once.
    pub compulsory_bytes: usize,
    /// The emulator's statistics of the kernel (`SWFLOW_STATS`' fields).
    #[serde(flatten)]
    pub stats: serde_json::Map<String, Value>,
}

#[derive(Serialize, Debug)]
struct Report {
    model: String,
    target: String,
    engine: String,
    peak_gflops: f64,
    total_modelled_seconds: f64,
    total: Value,
    tape: Tape,
    /// For a gradient program with `--recompute timed`: the values it stores rather than
    /// recomputes, and the modelled times behind that choice.
    recompute: Option<RecomputeReport>,
    /// For a gradient program with `--tape-travel timed`: how its tape-only values travel, and
    /// the modelled times behind that choice.
    tape_travel: Option<TravelReport>,
    /// With `--tune`: what tuning did, kernel by kernel.
    tune: Option<Tuning>,
    kernels: Vec<KernelRow>,
    /// Compiling the kernels (JIT) or building the folder with `make` (C).
    build_seconds: f64,
    run_seconds: f64,
}

/// The DMA of all kernels that carried gradient tape (both tape classes).
#[derive(Serialize, Debug)]
struct Tape {
    bytes: u64,
    transfers: u64,
    /// `bytes / transfers`, 0 without transfers.
    mean_transfer_bytes: f64,
    /// Modelled seconds the DMA queue spent serving them.
    modelled_seconds: f64,
}

impl Tape {
    /// The tape totals of the emulator's statistics (its `total` row).
    fn of(total: &Value) -> Result<Tape> {
        let field = |key: &str| total.get(key).with_context(|| format!("the statistics have no {key}"));
        let count = |key: &str| field(key)?.as_u64().with_context(|| format!("{key} is no count"));
        let bytes = count("tape_get_bytes")? + count("tape_put_bytes")?;
        let transfers = count("tape_gets")? + count("tape_puts")?;
        Ok(Tape {
            bytes,
            transfers,
            mean_transfer_bytes: if transfers > 0 {
                bytes as f64 / transfers as f64
            } else {
                0.0
            },
            modelled_seconds: field("tape_seconds")?.as_f64().context("tape_seconds is no number")?,
        })
    }
}

/// What one engine's run gave: the emulator's statistics (as `SWFLOW_STATS` writes them) and
/// the wall times.
struct Measured {
    stats: Value,
    build_seconds: f64,
    run_seconds: f64,
}

/// A folder removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn run(args: Args) -> Result<()> {
    let target = Target::resolve(&args.target)?;
    let timing = Timing {
        target: &target,
        pipeline: &args.pipeline,
    };
    let (g, choices) = grad::graph(&args.model, &args.grad, &args.train, timing)?;
    if args.engine == "jit" && (args.output.is_some() || args.jobs.is_some()) {
        bail!("--output and --jobs apply to --engine c");
    }
    let options = choices.apply(args.pipeline.options(&g, args.grad.grad || args.train.train)?);
    let mut p = swflow_scheduler::pipeline::compile_with(&g, &target, options)?;
    let tune = args.pipeline.tune(&mut p, &target)?;
    let Measured {
        stats,
        build_seconds,
        run_seconds,
    } = match args.engine.as_str() {
        "c" => run_c(&args, &p, &target)?,
        _ => run_jit(&args, &g, &p, &target)?,
    };
    let functions = swflow_codegen::kernel_function_names(&p);
    let by_name: std::collections::HashMap<&str, &serde_json::Map<String, Value>> = stats["kernels"]
        .as_array()
        .context("the statistics list no kernels")?
        .iter()
        .filter_map(|k| Some((k["kernel"].as_str()?, k.as_object()?)))
        .collect();
    let mut kernels = Vec::new();
    for (k, func) in p.kernels.iter().zip(&functions) {
        let Some(s) = by_name.get(func.as_str()) else {
            bail!("the emulator did not report kernel {func}")
        };
        let schedule = k.schedule.as_ref().context("unscheduled kernel")?;
        let estimated = estimate(k, &p, schedule, &target);
        let mut stats = (*s).clone();
        stats.remove("kernel");
        kernels.push(KernelRow {
            kernel: func.clone(),
            op: k.op.clone(),
            node: k.origin.clone(),
            scheduler_dma_estimate_seconds: estimated.queue / target.clock_hz,
            scheduler_estimate_seconds: (estimated.cycles() + launch_cycles(&target)) / target.clock_hz,
            compulsory_bytes: k.compulsory_bytes(&p),
            stats,
        });
    }
    let report = Report {
        model: g.name.clone(),
        target: target.name.clone(),
        engine: args.engine.clone(),
        peak_gflops: target.peak_flops() / 1e9,
        total_modelled_seconds: stats["total_modelled_seconds"]
            .as_f64()
            .context("the statistics have no modelled time")?,
        total: stats["total"].clone(),
        tape: Tape::of(&stats["total"])?,
        recompute: choices.recompute.clone(),
        tape_travel: choices.travel.clone(),
        tune,
        kernels,
        build_seconds,
        run_seconds,
    };
    if let Some(svg) = &args.roofline {
        let points: Vec<roofline::Point> = report.kernels.iter().filter_map(roofline::Point::from_row).collect();
        let text = roofline::draw(&format!("{} on {}", report.model, report.target), &target, &points);
        std::fs::write(svg, text).with_context(|| format!("writing {}", svg.display()))?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(&report);
    }
    Ok(())
}

/// Generates the C folder, builds it and runs it with `SWFLOW_STATS`.
fn run_c(args: &Args, p: &swflow_scheduler::loops::Program, target: &Target) -> Result<Measured> {
    let lib = emulator_lib(None)?;
    let (dir, _cleanup) = match &args.output {
        Some(d) => (d.clone(), None),
        None => {
            let d = std::env::temp_dir().join(format!("swflow-bench-{}", std::process::id()));
            (d.clone(), Some(TempDir(d)))
        }
    };
    let out = swflow_codegen::generate(p, target, makefile_path(&lib)?)?;
    if dir.exists() && args.output.is_none() {
        std::fs::remove_dir_all(&dir)?;
    }
    out.write_to(&dir)
        .with_context(|| format!("writing {}", dir.display()))?;
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let start = Instant::now();
    checked(
        Command::new("make")
            .arg("-C")
            .arg(&dir)
            .args(["-s", &format!("-j{jobs}")]),
        "make",
    )?;
    let build_seconds = start.elapsed().as_secs_f64();
    let stats_file = std::path::absolute(dir.join("stats.json"))?;
    let mut run = Command::new(std::path::absolute(dir.join("model"))?);
    run.current_dir(&dir)
        .args(["--seed", &args.seed.to_string()])
        .env("SWFLOW_STATS", &stats_file)
        .env_remove("SWFLOW_TIMING");
    match &args.trace {
        Some(t) => run.env("SWFLOW_TRACE", std::path::absolute(t)?),
        None => run.env_remove("SWFLOW_TRACE"),
    };
    let start = Instant::now();
    checked(&mut run, "the built model")?;
    let run_seconds = start.elapsed().as_secs_f64();
    let stats = serde_json::from_str(
        &std::fs::read_to_string(&stats_file).with_context(|| format!("reading {}", stats_file.display()))?,
    )
    .context("the emulator's statistics")?;
    Ok(Measured {
        stats,
        build_seconds,
        run_seconds,
    })
}

/// Compiles the kernels with the JIT and runs them on inputs made as the built program makes
/// them (`--seed`).
fn run_jit(args: &Args, g: &Graph, p: &swflow_scheduler::loops::Program, target: &Target) -> Result<Measured> {
    let inputs = random::random_inputs(g, args.seed);
    let start = Instant::now();
    let program = swflow_codegen::jit::compile(p, target)?;
    let build_seconds = start.elapsed().as_secs_f64();
    let start = Instant::now();
    let run = program.run_traced(p, target, &inputs, args.trace.as_deref())?;
    let run_seconds = start.elapsed().as_secs_f64();
    Ok(Measured {
        stats: serde_json::to_value(&run.report)?,
        build_seconds,
        run_seconds,
    })
}

/// Runs `cmd`; a failure is an error carrying its output.
fn checked(cmd: &mut Command, what: &str) -> Result<()> {
    let out = cmd.output().with_context(|| format!("running {what}"))?;
    if !out.status.success() {
        bail!(
            "{what} failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

fn num(s: &serde_json::Map<String, Value>, key: &str) -> f64 {
    s.get(key).and_then(Value::as_f64).unwrap_or(0.0)
}

/// The kernels, slowest first, then the totals.
fn print_table(r: &Report) {
    let mut rows: Vec<&KernelRow> = r.kernels.iter().collect();
    rows.sort_by(|a, b| num(&b.stats, "modelled_seconds").total_cmp(&num(&a.stats, "modelled_seconds")));
    let width = rows.iter().map(|k| k.kernel.len()).max().unwrap_or(6).max(6);
    let opw = rows.iter().map(|k| k.op.len()).max().unwrap_or(2).max(2);
    println!(
        "{} on {} ({}): modelled {:.6} s, {:.3} GFLOPS of {:.1} peak; built in {:.1} s, ran in {:.1} s",
        r.model,
        r.target,
        r.engine,
        r.total_modelled_seconds,
        num(r.total.as_object().unwrap_or(&Default::default()), "gflops"),
        r.peak_gflops,
        r.build_seconds,
        r.run_seconds
    );
    if r.tape.transfers > 0 {
        println!(
            "tape: {} bytes in {} transfers ({:.1} bytes each), modelled {:.6} s of the DMA queue",
            r.tape.bytes, r.tape.transfers, r.tape.mean_transfer_bytes, r.tape.modelled_seconds
        );
    }
    print_choices(&r.recompute, &r.tape_travel);
    if let Some(t) = &r.tune {
        println!("{}", t.summary());
    }
    println!(
        "{:<width$}  {:<opw$}  {:>11}  {:>6}  {:>8}  {:>8}  {:>8}  {:>7}  {:>7}  {:>7}  {:>7}  {:>8}  {:>8}  {:>13}  {:>9}",
        "kernel",
        "op",
        "modelled ms",
        "share",
        "GFLOPS",
        "DMA GB/s",
        "DMA blks",
        "compute",
        "wait",
        "idle",
        "bound",
        "roofline",
        "queue ms",
        "sched. DMA ms",
        "sched. ms"
    );
    let total = r.total_modelled_seconds.max(f64::MIN_POSITIVE);
    let pct = |v: f64| format!("{:.1}%", 100.0 * v);
    for k in rows {
        let s = &k.stats;
        println!(
            "{:<width$}  {:<opw$}  {:>11.4}  {:>6}  {:>8.3}  {:>8.3}  {:>8}  {:>7}  {:>7}  {:>7}  {:>7}  {:>8}  {:>8.4}  {:>13.4}  {:>9.4}",
            k.kernel,
            k.op,
            1e3 * num(s, "modelled_seconds"),
            pct(num(s, "modelled_seconds") / total),
            num(s, "gflops"),
            num(s, "dma_gbps"),
            pct(num(s, "dma_block_seconds") / num(s, "modelled_seconds").max(f64::MIN_POSITIVE)),
            pct(num(s, "compute")),
            pct(num(s, "dma_wait") + num(s, "direct")),
            pct(num(s, "idle")),
            s.get("bound").and_then(Value::as_str).unwrap_or("-"),
            pct(num(s, "roofline_fraction")),
            1e3 * num(s, "dma_queue_seconds"),
            1e3 * k.scheduler_dma_estimate_seconds,
            1e3 * k.scheduler_estimate_seconds
        );
    }
}
