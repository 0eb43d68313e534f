//! `swflow schedule`: lower a model to loop nests and schedule them for a target.

use std::time::Instant;

use anyhow::Result;
use serde::Serialize;
use swflow_scheduler::exec::cpe::kernel_stats;
use swflow_scheduler::loops::print_kernel;
use swflow_scheduler::memplan;
use swflow_scheduler::tape::{Pass, TapePlan};
use swflow_scheduler::target::Target;

use super::grad::{self, GradArgs, TrainArgs};
use super::model::{ModelArgs, PipelineArgs};
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
    /// Also print an intermediate form: `loops` prints every kernel's loop nest and schedule.
    #[arg(long, value_name = "FORM", value_parser = ["loops"])]
    pub emit: Option<String>,
    /// Print a machine-readable JSON report instead of the table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub grad: GradArgs,
    #[command(flatten)]
    pub train: TrainArgs,
}

#[derive(Serialize)]
struct Row {
    kernel: String,
    /// The primitive ops the kernel computes (`add+relu` when producers were fused into it).
    op: String,
    /// The graph nodes fused into the kernel besides its own.
    fused: Vec<String>,
    /// LDM of the working buffers (and reply counters), without the boxes a tape arena
    /// replaces.
    ldm_bytes: usize,
    /// LDM of the tape arena, in a kernel that streams tape.
    tape_arena_bytes: usize,
    dma_transfers: usize,
    dma_bytes: usize,
    direct_elements: usize,
    balance: f64,
}

#[derive(Serialize)]
struct Report {
    target: String,
    kernels: Vec<Row>,
    schedule_seconds: f64,
    arena_bytes: usize,
    naive_bytes: usize,
    /// For a gradient program: its tape (see `swflow_scheduler::tape`).
    tape: Option<TapeReport>,
    /// For a gradient program with `--recompute timed`: the values it stores rather than
    /// recomputes, and the modelled times behind that choice.
    recompute: Option<RecomputeReport>,
    /// For a gradient program with `--tape-travel timed`: how its tape-only values travel, and
    /// the modelled times behind that choice.
    tape_travel: Option<TravelReport>,
}

#[derive(Serialize)]
struct TapeReport {
    mode: &'static str,
    forward_kernels: usize,
    backward_kernels: usize,
    saved_tensors: usize,
    saved_bytes: usize,
    /// Saved tensors only the backward reads.
    tape_only_bytes: usize,
    /// Tape-only tensors stored as records (every reader mirrors its producer).
    record_bytes: usize,
    /// Tape-only tensors streamed through the tape arena.
    streamed_bytes: usize,
    /// Tape-only tensors read in their readers' own tiling: a reader cannot mirror, or the
    /// tensor is held whole.
    fell_back_bytes: usize,
    /// Bytes of the largest tape arena a stream keeps in each CPE's LDM (each kernel's own
    /// is in its line).
    tape_arena_bytes: usize,
    /// The most layers one CPE pushes, over all streams.
    layers_per_cpe: usize,
}

impl TapeReport {
    fn of(plan: &TapePlan) -> TapeReport {
        let forward = plan.passes.iter().filter(|&&x| x == Pass::Forward).count();
        let recorded = |t| plan.records.iter().any(|r| r.tensor == t);
        let streamed = |t| plan.streams.iter().any(|x| x.tensor == t);
        let tape_only = || plan.saved.iter().filter(|s| s.tape_only);
        let cpes = plan.streams.first().map_or(0, |x| x.layers.len());
        TapeReport {
            mode: plan.mode.name(),
            forward_kernels: forward,
            backward_kernels: plan.passes.len() - forward,
            saved_tensors: plan.saved.len(),
            saved_bytes: plan.saved_bytes(),
            tape_only_bytes: plan.tape_only_bytes(),
            record_bytes: tape_only().filter(|s| recorded(s.tensor)).map(|s| s.bytes).sum(),
            streamed_bytes: tape_only().filter(|s| streamed(s.tensor)).map(|s| s.bytes).sum(),
            fell_back_bytes: tape_only()
                .filter(|s| !recorded(s.tensor) && !streamed(s.tensor))
                .map(|s| s.bytes)
                .sum(),
            tape_arena_bytes: plan.streams.iter().map(|x| x.arena_bytes).max().unwrap_or(0),
            layers_per_cpe: (0..cpes)
                .map(|c| plan.streams.iter().map(|x| x.layers[c]).sum::<usize>())
                .max()
                .unwrap_or(0),
        }
    }
}

pub fn run(args: Args) -> Result<()> {
    let target = Target::resolve(&args.target)?;
    let timing = Timing {
        target: &target,
        pipeline: &args.pipeline,
    };
    let (g, choices) = grad::graph(&args.model, &args.grad, &args.train, timing)?;
    let start = Instant::now();
    let options = choices.apply(args.pipeline.options(&g, args.grad.grad || args.train.train)?);
    let mut p = swflow_scheduler::pipeline::compile_with(&g, &target, options)?;
    args.pipeline.tune(&mut p, &target)?;
    let schedule_seconds = start.elapsed().as_secs_f64();
    tracing::info!(
        "scheduled {} kernels for {} in {:.2?}",
        p.kernels.len(),
        target.name,
        start.elapsed()
    );
    let plan = memplan::plan(&p, &target);
    let kernels: Vec<Row> = p
        .kernels
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let s = kernel_stats(&p, k, k.schedule.as_ref().expect("scheduled"), &target);
            Row {
                kernel: k.name.clone(),
                op: k.op.clone(),
                fused: k.fused.clone(),
                ldm_bytes: s.ldm_bytes - p.tape.as_ref().map_or(0, |t| t.replaced_by_arena(&p, i)),
                tape_arena_bytes: p.tape.as_ref().map_or(0, |t| t.arena_of(i)),
                dma_transfers: s.traffic.gets + s.traffic.puts,
                dma_bytes: s.traffic.get_bytes + s.traffic.put_bytes,
                direct_elements: s.traffic.direct_elements,
                balance: s.balance,
            }
        })
        .collect();
    let report = Report {
        target: target.name.clone(),
        kernels,
        schedule_seconds,
        arena_bytes: plan.arena_bytes,
        naive_bytes: plan.naive_bytes,
        tape: p.tape.as_ref().map(TapeReport::of),
        recompute: choices.recompute.clone(),
        tape_travel: choices.travel.clone(),
    };
    if args.emit.as_deref() == Some("loops") {
        for k in &p.kernels {
            print!("{}", print_kernel(k, &p));
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    let opw = report.kernels.iter().map(|r| r.op.len()).max().unwrap_or(0).max(14);
    println!(
        "{:<40} {:<opw$} {:>9} {:>12} {:>14} {:>8}",
        "kernel", "op", "LDM", "DMA ops", "DMA bytes", "balance"
    );
    for r in &report.kernels {
        println!(
            "{:<40} {:<opw$} {:>9} {:>12} {:>14} {:>8.3}",
            r.kernel, r.op, r.ldm_bytes, r.dma_transfers, r.dma_bytes, r.balance
        );
    }
    let total = |f: fn(&Row) -> usize| report.kernels.iter().map(f).sum::<usize>();
    println!(
        "total: {} kernels, {} DMA ops, {:.1} MB DMA, memory plan {:.1} MB (naive {:.1} MB), lowered and scheduled in {:.2} ms",
        report.kernels.len(),
        total(|r| r.dma_transfers),
        total(|r| r.dma_bytes) as f64 / 1e6,
        report.arena_bytes as f64 / 1e6,
        report.naive_bytes as f64 / 1e6,
        report.schedule_seconds * 1e3
    );
    if let Some(t) = &report.tape {
        println!(
            "tape ({}): {} forward and {} backward kernels; {} saved tensors, {} bytes, {} of them tape-only: {} in records, {} streamed (arenas up to {} B, up to {} layers per CPE), {} read in their readers' own tiling",
            t.mode,
            t.forward_kernels,
            t.backward_kernels,
            t.saved_tensors,
            t.saved_bytes,
            t.tape_only_bytes,
            t.record_bytes,
            t.streamed_bytes,
            t.tape_arena_bytes,
            t.layers_per_cpe,
            t.fell_back_bytes
        );
    }
    print_choices(&report.recompute, &report.tape_travel);
    Ok(())
}
