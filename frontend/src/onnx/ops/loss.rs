//! Loss ONNX ops: `NegativeLogLikelihoodLoss` and `SoftmaxCrossEntropyLoss`.
//!
//! Both pick, at every position `[n, d..]`, the input's element of class `target[n, d..]`
//! along axis 1. The pick is a one-hot select (`target == class`) summed over the classes, so
//! it is an ordinary elementwise-and-reduce computation for the later passes, and its gradient
//! is a select. A target equal to `ignore_index` picks nothing and weighs 0; so does a target
//! outside the classes, where the ONNX reference would fail.

use super::nn::softmax_along;
use super::Cx;
use crate::ir::{BinaryOp, DType, NodeId, ReduceKind, UnaryOp};

/// How the per-position losses combine into the result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reduction {
    None,
    Sum,
    /// The weighted mean: the sum divided by the sum of the positions' weights (their count
    /// when there are no class weights and no ignored index).
    Mean,
}

impl Reduction {
    fn of(cx: &Cx) -> Result<Reduction, String> {
        match cx.attrs.string("reduction", "mean")?.as_str() {
            "none" => Ok(Reduction::None),
            "sum" => Ok(Reduction::Sum),
            "mean" => Ok(Reduction::Mean),
            other => Err(format!("reduction '{other}' is not one of none, sum, mean")),
        }
    }
}

/// `NegativeLogLikelihoodLoss(input[N, C, d..], target[N, d..], weight[C]?)`.
pub(super) fn negative_log_likelihood(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let x = cx.input(0)?;
    Ok(vec![nll(cx, x)?])
}

/// `SoftmaxCrossEntropyLoss(scores[N, C, d..], labels[N, d..], weights[C]?)`: the negative
/// log-likelihood of the log-softmax of the scores along the classes, and that log-softmax
/// as the optional second result.
pub(super) fn softmax_cross_entropy(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let scores = cx.input(0)?;
    if cx.rank(scores) < 2 {
        return Err(format!("scores {} need a class axis (at least [N, C])", cx.ty(scores)));
    }
    let log_prob = softmax_along(cx, scores, 1, true)?;
    Ok(vec![nll(cx, log_prob)?, log_prob])
}

/// The negative log-likelihood loss of log-probabilities `x` against the node's target
/// (operand 1), class weights (operand 2) and attributes.
fn nll(cx: &mut Cx, x: NodeId) -> Result<NodeId, String> {
    let target = cx.input(1)?;
    let weight = cx.opt_input(2)?;
    let reduction = Reduction::of(cx)?;
    let ignore = cx.attrs.int_opt("ignore_index")?;
    let (xs, ts) = (cx.shape(x), cx.shape(target));
    let dtype = cx.ty(x).dtype;
    if !matches!(dtype, DType::F32 | DType::F64) {
        return Err(format!("input {} is not floating-point", cx.ty(x)));
    }
    let fits = xs.len() >= 2 && ts.len() == xs.len() - 1 && ts[0] == xs[0] && ts[1..] == xs[2..];
    if !fits {
        return Err(format!(
            "target {} does not fit input {} (want [N, d..] for [N, C, d..])",
            cx.ty(target),
            cx.ty(x)
        ));
    }
    if !matches!(cx.ty(target).dtype, DType::I64) {
        return Err(format!("target {} must hold int64 class indices", cx.ty(target)));
    }
    let classes = xs[1];
    if let Some(w) = weight {
        if cx.shape(w) != [classes] || cx.ty(w).dtype != dtype {
            return Err(format!("weight {} must be {dtype}[{classes}]", cx.ty(w)));
        }
    }
    // One-hot over the classes, in the input's layout: [N, C, d..].
    let mut spread = ts.clone();
    spread.insert(1, 1);
    let t = cx.reshape(target, spread)?;
    let mut class_shape = vec![1; xs.len()];
    class_shape[1] = classes;
    let class = cx.i64_const(class_shape.clone(), (0..classes as i64).collect())?;
    let hot = cx.binary(BinaryOp::Equal, t, class)?;
    let zero = cx.scalar(dtype, 0.0);
    let picked = cx.select(hot, x, zero)?;
    let picked = cx.reduce(ReduceKind::Sum, picked, vec![1])?;
    let picked = cx.reshape(picked, ts.clone())?;
    let mut loss = cx.unary(UnaryOp::Neg, picked)?;
    // Per-position weights, when they are not all one.
    let mut weights = None;
    if let Some(w) = weight {
        let w = cx.reshape(w, class_shape)?;
        let w = cx.select(hot, w, zero)?;
        let w = cx.reduce(ReduceKind::Sum, w, vec![1])?;
        let w = cx.reshape(w, ts.clone())?;
        loss = cx.binary(BinaryOp::Mul, loss, w)?;
        weights = Some(w);
    }
    if let Some(ii) = ignore {
        let ii = cx.scalar(DType::I64, ii as f64);
        let ignored = cx.binary(BinaryOp::Equal, target, ii)?;
        loss = cx.select(ignored, zero, loss)?;
        let w = match weights {
            Some(w) => w,
            None => {
                let one = cx.scalar(dtype, 1.0);
                cx.broadcast(one, ts.clone())?
            }
        };
        weights = Some(cx.select(ignored, zero, w)?);
    }
    let all: Vec<usize> = (0..ts.len()).collect();
    let total = |cx: &mut Cx, v: NodeId| -> Result<NodeId, String> {
        let s = cx.reduce(ReduceKind::Sum, v, all.clone())?;
        cx.reshape(s, Vec::new())
    };
    match (reduction, weights) {
        (Reduction::None, _) => Ok(loss),
        (Reduction::Sum, _) => total(cx, loss),
        (Reduction::Mean, Some(w)) => {
            let s = total(cx, loss)?;
            let n = total(cx, w)?;
            cx.binary(BinaryOp::Div, s, n)
        }
        (Reduction::Mean, None) => {
            let s = total(cx, loss)?;
            cx.with_scalar(BinaryOp::Div, s, ts.iter().product::<usize>() as f64)
        }
    }
}
