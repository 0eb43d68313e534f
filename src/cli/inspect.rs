//! `swflow inspect`: what a model contains.

use std::collections::{BTreeMap, HashMap};

use anyhow::Result;
use serde::Serialize;
use swflow_frontend::ir::{cost, print_with, PrintOptions};

use super::grad::GradArgs;
use super::model::ModelArgs;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Print a machine-readable JSON summary instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also print an intermediate form: `graph` is the imported graph IR in its text form
    /// (constants with more than 16 elements elided).
    #[arg(long, value_name = "FORM", value_parser = ["graph"])]
    pub emit: Option<String>,
    /// With --grad, also report the gradient program: what the backward pass keeps from the
    /// forward (the tape) against the forward's own memory.
    #[command(flatten)]
    pub grad: GradArgs,
}

/// The gradient program's saved-value plan, in bytes.
#[derive(Serialize)]
struct Gradient {
    /// Tensors differentiated with respect to.
    wrt: usize,
    /// Primitive nodes of the whole step (forward, recomputation, backward).
    primitives: usize,
    /// Forward values the backward reads from memory.
    tape_bytes: usize,
    /// Forward values the backward computes again instead.
    recomputed_bytes: usize,
    /// Every value the forward computes.
    forward_intermediate_bytes: usize,
    /// The forward's peak of simultaneously live computed values, in graph order.
    forward_peak_bytes: usize,
}

#[derive(Serialize)]
struct Value {
    name: String,
    dtype: String,
    shape: Vec<usize>,
}

#[derive(Serialize)]
struct Summary {
    model: String,
    inputs: Vec<Value>,
    outputs: Vec<Value>,
    /// ONNX op type -> node count in the model.
    onnx_ops: BTreeMap<String, usize>,
    /// Primitive op -> node count in the imported graph.
    primitive_ops: BTreeMap<String, usize>,
    parameters: u64,
    flops: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    gradient: Option<Gradient>,
}

pub fn run(args: Args) -> Result<()> {
    let (file, g) = args.model.load()?;
    let value = |name: &str, id| {
        let ty = &g.node(id).ty;
        Value {
            name: name.to_string(),
            dtype: ty.dtype.to_string(),
            shape: ty.shape.clone(),
        }
    };
    let mut primitive_ops = BTreeMap::new();
    for n in g.nodes() {
        *primitive_ops.entry(n.op.name().to_string()).or_insert(0) += 1;
    }
    let summary = Summary {
        model: args.model.model.display().to_string(),
        inputs: g.inputs().map(|id| value(&g.node(id).name, id)).collect(),
        outputs: g.outputs.iter().map(|o| value(&o.name, o.node)).collect(),
        onnx_ops: file.op_histogram(),
        primitive_ops,
        parameters: cost::parameter_count(&g),
        flops: cost::graph_flops(&g),
        gradient: None,
    };
    let summary = Summary {
        gradient: match args.grad.grad {
            true => {
                let (_, p, _) = args.grad.prepare(&args.model, HashMap::new(), None)?;
                Some(Gradient {
                    wrt: p.wrt.len(),
                    primitives: p.graph.nodes().len(),
                    tape_bytes: p.tape.tape_bytes,
                    recomputed_bytes: p.tape.recomputed_bytes,
                    forward_intermediate_bytes: p.tape.forward_intermediate_bytes,
                    forward_peak_bytes: p.tape.forward_peak_bytes,
                })
            }
            false => None,
        },
        ..summary
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print_text(&summary);
    }
    if args.emit.as_deref() == Some("graph") {
        print!(
            "{}",
            print_with(
                &g,
                PrintOptions {
                    elide_constants_above: Some(16)
                }
            )
        );
    }
    Ok(())
}

fn print_text(s: &Summary) {
    let shape = |v: &Value| {
        format!(
            "{}[{}]",
            v.dtype,
            v.shape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(",")
        )
    };
    println!("model       {}", s.model);
    for v in &s.inputs {
        println!("input       {:<32} {}", v.name, shape(v));
    }
    for v in &s.outputs {
        println!("output      {:<32} {}", v.name, shape(v));
    }
    println!("parameters  {}", s.parameters);
    println!("flops       {} ({:.3} GFLOP)", s.flops, s.flops as f64 / 1e9);
    println!("onnx ops    {}", s.onnx_ops.values().sum::<usize>());
    for (op, n) in &s.onnx_ops {
        println!("  {op:<24} {n:>6}");
    }
    println!("primitives  {}", s.primitive_ops.values().sum::<usize>());
    for (op, n) in &s.primitive_ops {
        println!("  {op:<24} {n:>6}");
    }
    if let Some(g) = &s.gradient {
        println!("gradient    {} tensors, {} primitives in the step", g.wrt, g.primitives);
        println!(
            "  tape                     {:>12} bytes kept from the forward",
            g.tape_bytes
        );
        println!(
            "  recomputed               {:>12} bytes computed again in the backward",
            g.recomputed_bytes
        );
        println!("  forward values           {:>12} bytes", g.forward_intermediate_bytes);
        println!("  forward peak             {:>12} bytes", g.forward_peak_bytes);
        println!(
            "  tape / forward peak      {:>12.2}",
            g.tape_bytes as f64 / g.forward_peak_bytes.max(1) as f64
        );
    }
}
