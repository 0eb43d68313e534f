//! Import for training: which initializers are parameters, and the loss attached to a model.
//!
//! A loss is attached as ONNX nodes appended to the model's graph (`Sub`, `Mul`,
//! `ReduceMean`, `ReduceSum`, `SoftmaxCrossEntropyLoss`), expanded by the same handlers as the
//! model's own nodes, so an attached loss means exactly what the ONNX op means.

use std::collections::HashSet;

use super::builder::Builder;
use super::proto::{AttributeProto, ModelProto, NodeProto};
use super::{dtype_from_onnx, ops, ImportErrorKind, Loss};
use crate::ir::{DType, Output, TensorType};

/// Name of the graph input holding the labels of an attached loss (a suffix keeps it
/// distinct from the model's own names).
pub const LABELS: &str = "labels";

/// Name of the output of an attached loss (a suffix keeps it distinct from the model's own
/// names).
pub const LOSS: &str = "loss";

/// Opset the nodes of an attached loss are read in, at least: the first that defines
/// `SoftmaxCrossEntropyLoss` with the axes of `ReduceSum` as an input.
const LOSS_OPSET: i64 = 13;

/// The float initializers that are parameters, in initializer order: those some node reads
/// as an operand other than batch normalization's running mean and variance (state, PyTorch's
/// "buffers") and `Clip`'s bounds (hyperparameters).
pub fn trainable_initializers(model: &ModelProto) -> Vec<String> {
    let Some(g) = model.graph.as_ref() else {
        return Vec::new();
    };
    let mut read: HashSet<&str> = HashSet::new();
    for n in &g.node {
        for (k, name) in n.input.iter().enumerate() {
            let state = matches!((n.op_type(), k), ("BatchNormalization", 3 | 4) | ("Clip", 1 | 2));
            if !state {
                read.insert(name);
            }
        }
    }
    g.initializer
        .iter()
        .filter(|t| matches!(dtype_from_onnx(t.data_type()), Ok(DType::F32 | DType::F64)))
        .filter(|t| read.contains(t.name()))
        .map(|t| t.name().to_string())
        .collect()
}

/// The running statistics a training step updates: for every `BatchNormalization` in
/// training mode (`training_mode=1`, opset 14 on) whose running mean and variance are
/// initializers, `(initializer, value)` pairs naming the updated mean and variance (its outputs
/// 1 and 2). When some node leaves those outputs out, or the graph does not list them among
/// its outputs, the returned model is a copy that names and lists them; otherwise it is `None`.
pub fn running_statistics(model: &ModelProto) -> (Option<ModelProto>, Vec<(String, String)>) {
    let Some(g) = model.graph.as_ref() else {
        return (None, Vec::new());
    };
    if super::model_opset(model).map_or(true, |v| v < 14) {
        return (None, Vec::new());
    }
    let initializers: HashSet<&str> = g.initializer.iter().map(|t| t.name()).collect();
    let training = |n: &NodeProto| {
        n.op_type() == "BatchNormalization"
            && matches!(n.domain(), "" | "ai.onnx")
            && n.attribute.iter().any(|a| a.name() == "training_mode" && a.i() == 1)
            && n.input.len() == 5
            && initializers.contains(n.input[3].as_str())
            && initializers.contains(n.input[4].as_str())
    };
    let mut copy = model.clone();
    let graph = copy.graph.as_mut().expect("checked above");
    let mut pairs = Vec::new();
    let mut changed = false;
    for n in graph.node.iter_mut().filter(|n| training(n)) {
        n.output.resize(3, String::new());
        for k in 1..3 {
            if n.output[k].is_empty() {
                n.output[k] = format!("{}/running_{}", n.input[k + 2], if k == 1 { "mean" } else { "var" });
                changed = true;
            }
            pairs.push((n.input[k + 2].clone(), n.output[k].clone()));
        }
    }
    for (_, value) in &pairs {
        if !graph.output.iter().any(|o| o.name() == value) {
            graph.output.push(super::proto::ValueInfoProto {
                name: Some(value.clone()),
                ..Default::default()
            });
            changed = true;
        }
    }
    (changed.then_some(copy), pairs)
}

/// Appends `loss` on the model's `outputs` and returns the loss output.
pub(super) fn attach(b: &mut Builder, loss: &Loss, outputs: &[Output], opset: i64) -> Result<Output, ImportErrorKind> {
    let opset = opset.max(LOSS_OPSET);
    if let Loss::Output(name) = loss {
        return attach_output(b, name, outputs, opset);
    }
    let Some(prediction) = outputs.first() else {
        return Err(ImportErrorKind::Output {
            name: String::new(),
            reason: "the model has no output to attach a loss to".into(),
        });
    };
    let pred = prediction.name.clone();
    let ty = b.ty(prediction.node).clone();
    let fail = |reason: String| ImportErrorKind::Output {
        name: pred.clone(),
        reason,
    };
    if !matches!(ty.dtype, DType::F32 | DType::F64) {
        return Err(fail(format!("a loss needs a floating-point prediction, not {ty}")));
    }
    let loss_name = b.unused_name(LOSS);
    let labels = |b: &mut Builder, ty: TensorType| {
        let name = b.unused_name(LABELS);
        let id = b.input(&name, ty);
        b.bind(&name, id);
        name
    };
    let nodes = match loss {
        Loss::Sum => vec![node("ReduceSum", &[&pred], &loss_name, vec![keepdims_0()])],
        Loss::Mse => {
            let y = labels(b, ty.clone());
            let (diff, square) = (
                b.unused_name(&format!("{loss_name}/diff")),
                b.unused_name(&format!("{loss_name}/square")),
            );
            vec![
                node("Sub", &[&pred, &y], &diff, Vec::new()),
                node("Mul", &[&diff, &diff], &square, Vec::new()),
                node("ReduceMean", &[&square], &loss_name, vec![keepdims_0()]),
            ]
        }
        Loss::CrossEntropy => {
            if ty.rank() < 2 {
                return Err(fail(format!(
                    "cross-entropy needs logits [N, C, ...] with the classes on axis 1, not {ty}"
                )));
            }
            let mut shape = ty.shape.clone();
            shape.remove(1);
            let t = TensorType::new(DType::I64, shape).map_err(|e| fail(e.0))?;
            let y = labels(b, t);
            vec![node("SoftmaxCrossEntropyLoss", &[&pred, &y], &loss_name, Vec::new())]
        }
        Loss::Output(_) => unreachable!("handled above"),
    };
    let count = b.mark();
    for (k, n) in nodes.iter().enumerate() {
        ops::import_node(b, n, count + k, opset)?;
    }
    let node = b.resolve(&loss_name).map_err(fail)?;
    Ok(Output { name: loss_name, node })
}

/// The model's own loss: value `name`, summed to a scalar when it is not one. The loss output
/// is named `name` unless the model already outputs that value under its name; then it takes
/// a fresh name, since output names are unique.
fn attach_output(b: &mut Builder, name: &str, outputs: &[Output], opset: i64) -> Result<Output, ImportErrorKind> {
    let fail = |reason: String| ImportErrorKind::Output {
        name: name.to_string(),
        reason,
    };
    let id = b.resolve(name).map_err(fail)?;
    let ty = b.ty(id).clone();
    if !matches!(ty.dtype, DType::F32 | DType::F64) {
        return Err(fail(format!("a loss must be floating-point, not {ty}")));
    }
    if ty.rank() == 0 {
        let name = if outputs.iter().any(|o| o.name == name) {
            b.unused_name(LOSS)
        } else {
            name.to_string()
        };
        return Ok(Output { name, node: id });
    }
    let total = b.unused_name(&format!("{name}/sum"));
    let n = node("ReduceSum", &[name], &total, vec![keepdims_0()]);
    ops::import_node(b, &n, b.mark(), opset)?;
    let node = b.resolve(&total).map_err(fail)?;
    Ok(Output { name: total, node })
}

fn node(op: &str, inputs: &[&str], output: &str, attribute: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec![output.to_string()],
        name: Some(output.to_string()),
        op_type: Some(op.to_string()),
        attribute,
        ..Default::default()
    }
}

/// `keepdims = 0`: a reduction over every axis gives a scalar.
fn keepdims_0() -> AttributeProto {
    AttributeProto {
        name: Some("keepdims".into()),
        r#type: Some(super::proto::attribute_proto::AttributeType::Int as i32),
        i: Some(0),
        ..Default::default()
    }
}
