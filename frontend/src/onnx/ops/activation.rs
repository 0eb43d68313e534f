//! Activation functions defined by a formula of elementwise primitives: Elu, Selu, Softplus,
//! HardSigmoid, HardSwish, Mish. Each follows the formula of the ONNX definition.

use super::Cx;
use crate::ir::{BinaryOp, NodeId, UnaryOp};

/// `alpha * (exp(min(x, 0)) - 1)`: the negative branch of Elu and Selu. Taking the
/// exponential of `min(x, 0)` keeps it from overflowing on the positive side, where the
/// branch is zero.
fn exp_branch(cx: &mut Cx, x: NodeId, alpha: f64) -> Result<NodeId, String> {
    let neg = cx.with_scalar(BinaryOp::Min, x, 0.0)?;
    let e = cx.unary(UnaryOp::Exp, neg)?;
    let em1 = cx.with_scalar(BinaryOp::Sub, e, 1.0)?;
    cx.with_scalar(BinaryOp::Mul, em1, alpha)
}

/// `max(x, 0) + alpha * (exp(min(x, 0)) - 1)`, scaled by `gamma` for Selu.
pub(super) fn elu(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let x = cx.input(0)?;
    let selu = cx.op_type() == "Selu";
    let alpha = if selu {
        cx.attrs.float("alpha", 1.673_263_2)? as f64
    } else {
        cx.attrs.float("alpha", 1.0)? as f64
    };
    let pos = cx.unary(UnaryOp::Relu, x)?;
    let neg = exp_branch(cx, x, alpha)?;
    let y = cx.binary(BinaryOp::Add, pos, neg)?;
    if !selu {
        return Ok(vec![y]);
    }
    let gamma = cx.attrs.float("gamma", 1.050_701)? as f64;
    Ok(vec![cx.with_scalar(BinaryOp::Mul, y, gamma)?])
}

/// `log(exp(x) + 1)`.
fn softplus_of(cx: &mut Cx, x: NodeId) -> Result<NodeId, String> {
    let e = cx.unary(UnaryOp::Exp, x)?;
    let e1 = cx.with_scalar(BinaryOp::Add, e, 1.0)?;
    cx.unary(UnaryOp::Log, e1)
}

pub(super) fn softplus(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let x = cx.input(0)?;
    Ok(vec![softplus_of(cx, x)?])
}

/// `x * tanh(softplus(x))`.
pub(super) fn mish(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let x = cx.input(0)?;
    let sp = softplus_of(cx, x)?;
    let t = cx.unary(UnaryOp::Tanh, sp)?;
    Ok(vec![cx.binary(BinaryOp::Mul, x, t)?])
}

/// `max(0, min(1, alpha * x + beta))`.
fn hard_sigmoid_of(cx: &mut Cx, x: NodeId, alpha: f64, beta: f64) -> Result<NodeId, String> {
    let ax = cx.with_scalar(BinaryOp::Mul, x, alpha)?;
    let lin = cx.with_scalar(BinaryOp::Add, ax, beta)?;
    let hi = cx.with_scalar(BinaryOp::Min, lin, 1.0)?;
    cx.with_scalar(BinaryOp::Max, hi, 0.0)
}

pub(super) fn hard_sigmoid(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let x = cx.input(0)?;
    let alpha = cx.attrs.float("alpha", 0.2)? as f64;
    let beta = cx.attrs.float("beta", 0.5)? as f64;
    Ok(vec![hard_sigmoid_of(cx, x, alpha, beta)?])
}

/// `x * HardSigmoid(x)` with `alpha = 1/6`, `beta = 0.5`.
pub(super) fn hard_swish(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let x = cx.input(0)?;
    let h = hard_sigmoid_of(cx, x, 1.0 / 6.0, 0.5)?;
    Ok(vec![cx.binary(BinaryOp::Mul, x, h)?])
}
