//! `swflow run`: evaluate a model with the reference graph interpreter, the loop-IR
//! executor, or the JIT.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use swflow_frontend::ir::{Graph, Tensor};
use swflow_frontend::onnx::frozen_inputs;
use swflow_frontend::{interp, npy, random};
use swflow_scheduler::loops::Program;
use swflow_scheduler::target::Target;

use super::grad::GradArgs;
use super::model::{split_assignment, ModelArgs, PipelineArgs};
use super::saved::{Choices, Timing};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub pipeline: PipelineArgs,
    /// An input value, `NAME=FILE.npy` (repeatable). Inputs not given are filled with
    /// deterministic pseudo-random values (see --seed).
    #[arg(long = "input", value_name = "NAME=FILE.npy")]
    pub inputs: Vec<String>,
    /// Folder to write one `.npy` file per model output into (created if missing).
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// Seed for inputs that are not given.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// How to run: `graph` evaluates the graph IR with the reference interpreter; `loops`
    /// lowers and schedules for `--target` and runs the kernels on the modelled CPEs with
    /// their LDM buffers and DMA; `jit` compiles the scheduled kernels with Cranelift and
    /// runs them on the emulator, reporting its counters and modelled time with `-v`.
    #[arg(long, default_value = "graph", value_parser = ["graph", "loops", "jit"])]
    pub engine: String,
    /// Target for `--engine loops` and `jit`: sw26010, sw26010pro, or a target description
    /// (.toml).
    #[arg(long, default_value = "sw26010")]
    pub target: String,
    #[command(flatten)]
    pub grad: GradArgs,
}

pub fn run(args: Args) -> Result<()> {
    let mut given: HashMap<String, Tensor> = HashMap::new();
    for spec in &args.inputs {
        let (name, path) = split_assignment(spec, "--input")?;
        if given.insert(name.to_string(), npy::read(path.as_ref())?).is_some() {
            bail!("--input {name} is given twice");
        }
    }
    if args.grad.grad {
        return run_gradient(&args, given);
    }
    let (file, g) = args.model.load_with(given.clone())?;
    for name in frozen_inputs(&file.proto, &g) {
        if given.remove(&name).is_some() {
            tracing::info!("input '{name}' is needed statically: frozen to the value given");
        }
    }
    let inputs = input_values(&g, given, args.seed)?;
    let outputs = execute(&args, &g, &inputs, None)?;
    if let Some(dir) = &args.output {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let files = npy::output_file_names(g.outputs.iter().map(|o| o.name.as_str()));
    for ((o, t), file) in g.outputs.iter().zip(&outputs).zip(&files) {
        report(&o.name, t, args.output.as_ref().map(|d| d.join(file)))?;
    }
    Ok(())
}

/// `run --grad`: the loss and its gradients, written as `DIR/loss.npy`, `DIR/grad/*.npy` and
/// `DIR/gradients.json` (tensor name -> file relative to DIR).
fn run_gradient(args: &Args, mut given: HashMap<String, Tensor>) -> Result<()> {
    let target = Target::resolve(&args.target)?;
    // The graph engine runs the gradient program the rule gives: it has no target to time.
    let timing = (args.engine != "graph").then_some(Timing {
        target: &target,
        pipeline: &args.pipeline,
    });
    let (file, p, choices) = args.grad.prepare(&args.model, given.clone(), timing)?;
    for name in frozen_inputs(&file.proto, &p.graph) {
        if given.remove(&name).is_some() {
            tracing::info!("input '{name}' is needed statically: frozen to the value given");
        }
    }
    if let Some((name, labels)) = args.grad.read_labels(&p)? {
        if given.insert(name.clone(), labels).is_some() {
            bail!("the labels input '{name}' is given both by --input and --labels");
        }
    }
    for (name, value) in p.parameters {
        given.entry(name).or_insert(value);
    }
    let inputs = input_values(&p.graph, given, args.seed)?;
    let outputs = execute(args, &p.graph, &inputs, Some(&choices))?;
    let dir = args.output.as_ref();
    if let Some(dir) = dir {
        std::fs::create_dir_all(dir.join("grad")).with_context(|| format!("creating {}/grad", dir.display()))?;
    }
    report("loss", &outputs[0], dir.map(|d| d.join("loss.npy")))?;
    let files = npy::output_file_names(p.wrt.iter().map(String::as_str));
    let mut index = serde_json::Map::new();
    for ((name, t), file) in p.wrt.iter().zip(&outputs[1..]).zip(&files) {
        let relative = format!("grad/{file}");
        report(&format!("grad/{name}"), t, dir.map(|d| d.join(&relative)))?;
        index.insert(name.clone(), relative.into());
    }
    if let Some(dir) = dir {
        let path = dir.join("gradients.json");
        let text = serde_json::to_string_pretty(&index)? + "\n";
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// One value per graph input: given (and then of the declared type), or pseudo-random.
fn input_values(g: &Graph, mut given: HashMap<String, Tensor>, seed: u64) -> Result<Vec<Tensor>> {
    let mut inputs = Vec::new();
    let extents = random::index_extents(g);
    for (index, id) in g.inputs().enumerate() {
        let node = g.node(id);
        inputs.push(match given.remove(&node.name) {
            Some(t) if t.ty() != node.ty => bail!(
                "input '{}' must be {}, but the file holds {}",
                node.name,
                node.ty,
                t.ty()
            ),
            Some(t) => t,
            None => {
                tracing::info!(
                    "input '{}' not given: pseudo-random {} with seed {seed}",
                    node.name,
                    node.ty,
                );
                random::random_input(&node.ty, seed, index, extents[index])
            }
        });
    }
    if let Some(name) = given.keys().next() {
        let known: Vec<&str> = g.inputs().map(|id| g.node(id).name.as_str()).collect();
        bail!("the model has no input '{name}' (inputs: {})", known.join(", "));
    }
    Ok(inputs)
}

/// Runs `g` (a gradient program, with its timed choices, when `gradient` is given) on the
/// engine the options choose: the scheduled engines lower, schedule (and tune) it for
/// `--target` first.
fn execute(args: &Args, g: &Graph, inputs: &[Tensor], gradient: Option<&Choices>) -> Result<Vec<Tensor>> {
    let options = args.pipeline.options(g, gradient.is_some())?;
    let options = match gradient {
        Some(choices) => choices.apply(options),
        None => options,
    };
    if args.engine == "graph" {
        let p = &args.pipeline;
        if p.tape.is_some()
            || p.tape_arena.is_some()
            || p.recompute.is_some()
            || p.tape_travel.is_some()
            || p.tune.is_some()
        {
            bail!("--tape, --tape-arena, --recompute, --tape-travel and --tune apply with --engine loops or jit: the graph engine runs the graph as imported");
        }
        let start = Instant::now();
        let outputs = interp::run(g, inputs)?;
        tracing::info!("graph interpreter ran in {:.2?}", start.elapsed());
        return Ok(outputs);
    }
    let target = Target::resolve(&args.target)?;
    let mut p = swflow_scheduler::pipeline::compile_with(g, &target, options)?;
    args.pipeline.tune(&mut p, &target)?;
    match args.engine.as_str() {
        "loops" => run_loops(&p, inputs, &target),
        _ => run_jit(&p, inputs, &target),
    }
}

/// Prints a value's summary and writes it to `path`, if any.
fn report(name: &str, t: &Tensor, path: Option<PathBuf>) -> Result<()> {
    let stats = summary(t);
    match path {
        Some(path) => {
            npy::write(&path, t)?;
            println!("{name}  {}  {stats}  -> {}", t.ty(), path.display());
        }
        None => println!("{name}  {}  {stats}", t.ty()),
    }
    Ok(())
}

/// Runs the scheduled program `p` on the modelled CPEs of `target`.
fn run_loops(p: &Program, inputs: &[Tensor], target: &Target) -> Result<Vec<Tensor>> {
    let start = Instant::now();
    let (outputs, stats) = swflow_scheduler::exec::cpe::run_program(p, inputs, target)?;
    let dma: usize = stats.iter().map(|s| s.traffic.get_bytes + s.traffic.put_bytes).sum();
    tracing::info!(
        "{} kernels ran on the modelled {} CPEs in {:.2?}, {:.1} MB of DMA",
        stats.len(),
        target.name,
        start.elapsed(),
        dma as f64 / 1e6
    );
    Ok(outputs)
}

/// Compiles the kernels of the scheduled program `p` with Cranelift and runs them on the
/// emulator of `target`.
fn run_jit(p: &Program, inputs: &[Tensor], target: &Target) -> Result<Vec<Tensor>> {
    let start = Instant::now();
    let program = swflow_codegen::jit::compile(p, target)?;
    let compiled = start.elapsed();
    let start = Instant::now();
    let run = program.run(p, target, inputs)?;
    tracing::info!(
        "{} kernels compiled in {compiled:.2?} and ran on the emulated {} in {:.2?}: {:.6} s modelled",
        p.kernels.len(),
        target.name,
        start.elapsed(),
        run.modelled_seconds
    );
    Ok(run.outputs)
}

/// `min`, `max` and `mean` of a tensor's elements.
fn summary(t: &Tensor) -> String {
    let v = t.to_f64_vec();
    if v.is_empty() {
        return "(empty)".into();
    }
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    format!("min {min:.6} max {max:.6} mean {mean:.6}")
}
