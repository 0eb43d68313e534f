//! The optimizers of the `ai.onnx.preview.training` domain: `Adagrad`, `Momentum` and `Adam`.
//!
//! Each takes a learning rate `R` and a step count `T` (scalars), then `n` tensors to
//! optimize, their `n` gradients and their `n` accumulators of each kind, and returns the `n`
//! updated tensors followed by the `n` updated accumulators of each kind. The update is the
//! operator's definition, elementwise, with `T` a runtime value: a branch on `T > 0` is a
//! select.

use super::Cx;
use crate::ir::{BinaryOp, DType, NodeId, UnaryOp};

/// The operands of an optimizer node with `kinds` accumulators per tensor: `R`, `T`, and the
/// groups `[X, G, accumulators..]`, each `n` long.
struct Operands {
    r: NodeId,
    t: NodeId,
    groups: Vec<Vec<NodeId>>,
}

fn operands(cx: &mut Cx, kinds: usize) -> Result<Operands, String> {
    let per = 2 + kinds;
    let rest = cx.n_inputs().saturating_sub(2);
    if rest == 0 || rest % per != 0 {
        return Err(format!(
            "takes R, T and {per} groups of as many tensors, not {} operands",
            cx.n_inputs()
        ));
    }
    let n = rest / per;
    let r = cx.input(0)?;
    let t = cx.input(1)?;
    if cx.ty(r).numel() != 1 || cx.ty(t).numel() != 1 || cx.ty(t).dtype != DType::I64 {
        return Err(format!(
            "R {} and T {} must be a scalar and an int64 scalar",
            cx.ty(r),
            cx.ty(t)
        ));
    }
    let mut groups = Vec::with_capacity(per);
    for k in 0..per {
        groups.push((0..n).map(|i| cx.input(2 + k * n + i)).collect::<Result<Vec<_>, _>>()?);
    }
    for i in 0..n {
        let x = groups[0][i];
        for group in &groups[1..] {
            if cx.ty(group[i]) != cx.ty(x) {
                return Err(format!(
                    "operand {} does not match tensor {}",
                    cx.ty(group[i]),
                    cx.ty(x)
                ));
            }
        }
    }
    let dtype = cx.ty(groups[0][0]).dtype;
    let r = cx.reshape(r, Vec::new())?;
    let r = cx.cast(r, dtype)?;
    let t = cx.reshape(t, Vec::new())?;
    Ok(Operands { r, t, groups })
}

/// `c * x`.
fn times(cx: &mut Cx, c: f64, x: NodeId) -> Result<NodeId, String> {
    cx.with_scalar(BinaryOp::Mul, x, c)
}

/// `norm_coefficient * x + g`: the gradient of the loss plus an L2 penalty.
fn regularized(cx: &mut Cx, x: NodeId, g: NodeId) -> Result<NodeId, String> {
    let c = cx.attrs.float("norm_coefficient", 0.0)? as f64;
    let cx_ = times(cx, c, x)?;
    cx.binary(BinaryOp::Add, cx_, g)
}

/// `Adagrad(R, T, X.., G.., H..) -> X_new.., H_new..`.
pub(super) fn adagrad(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let o = operands(cx, 1)?;
    let decay = cx.attrs.float("decay_factor", 0.0)? as f64;
    let eps = cx.attrs.float("epsilon", 1e-6)? as f64;
    let dtype = cx.ty(o.groups[0][0]).dtype;
    // r = R / (1 + T * decay_factor)
    let t = cx.cast(o.t, dtype)?;
    let td = times(cx, decay, t)?;
    let denom = cx.with_scalar(BinaryOp::Add, td, 1.0)?;
    let r = cx.binary(BinaryOp::Div, o.r, denom)?;
    let (mut xs, mut hs) = (Vec::new(), Vec::new());
    for i in 0..o.groups[0].len() {
        let (x, g, h) = (o.groups[0][i], o.groups[1][i], o.groups[2][i]);
        let g = regularized(cx, x, g)?;
        let g2 = cx.binary(BinaryOp::Mul, g, g)?;
        let h_new = cx.binary(BinaryOp::Add, h, g2)?;
        let root = cx.unary(UnaryOp::Sqrt, h_new)?;
        let scale = cx.with_scalar(BinaryOp::Add, root, eps)?;
        let step = cx.binary(BinaryOp::Mul, r, g)?;
        let step = cx.binary(BinaryOp::Div, step, scale)?;
        xs.push(cx.binary(BinaryOp::Sub, x, step)?);
        hs.push(h_new);
    }
    Ok([xs, hs].concat())
}

/// `Momentum(R, T, X.., G.., V..) -> X_new.., V_new..`, standard or Nesterov.
pub(super) fn momentum(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let o = operands(cx, 1)?;
    let alpha = cx.attrs.float("alpha", 0.0)? as f64;
    let beta = cx.attrs.float("beta", 0.0)? as f64;
    let nesterov = match cx.attrs.string("mode", "standard")?.as_str() {
        "standard" => false,
        "nesterov" => true,
        other => return Err(format!("mode '{other}' is not standard or nesterov")),
    };
    let dtype = cx.ty(o.groups[0][0]).dtype;
    // The gradient's coefficient is 1 at the first step (T = 0), beta after.
    let started = cx.with_scalar(BinaryOp::Greater, o.t, 0.0)?;
    let (b, one) = (cx.scalar(dtype, beta), cx.scalar(dtype, 1.0));
    let beta = cx.select(started, b, one)?;
    let (mut xs, mut vs) = (Vec::new(), Vec::new());
    for i in 0..o.groups[0].len() {
        let (x, g, v) = (o.groups[0][i], o.groups[1][i], o.groups[2][i]);
        let g = regularized(cx, x, g)?;
        let av = times(cx, alpha, v)?;
        let bg = cx.binary(BinaryOp::Mul, beta, g)?;
        let v_new = cx.binary(BinaryOp::Add, av, bg)?;
        let direction = if nesterov {
            let av_new = times(cx, alpha, v_new)?;
            cx.binary(BinaryOp::Add, g, av_new)?
        } else {
            v_new
        };
        let step = cx.binary(BinaryOp::Mul, o.r, direction)?;
        xs.push(cx.binary(BinaryOp::Sub, x, step)?);
        vs.push(v_new);
    }
    Ok([xs, vs].concat())
}

/// `Adam(R, T, X.., G.., V.., H..) -> X_new.., V_new.., H_new..`.
pub(super) fn adam(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let o = operands(cx, 2)?;
    let alpha = cx.attrs.float("alpha", 0.9)? as f64;
    let beta = cx.attrs.float("beta", 0.999)? as f64;
    let eps = cx.attrs.float("epsilon", 1e-6)? as f64;
    let post = cx.attrs.float("norm_coefficient_post", 0.0)? as f64;
    let dtype = cx.ty(o.groups[0][0]).dtype;
    // From the first step on (T > 0) the rate corrects the bias of both moments:
    // R * sqrt(1 - beta^T) / (1 - alpha^T).
    let started = cx.with_scalar(BinaryOp::Greater, o.t, 0.0)?;
    let t = cx.cast(o.t, dtype)?;
    let power = |cx: &mut Cx, base: f64| -> Result<NodeId, String> {
        let b = cx.scalar(dtype, base);
        let p = cx.binary(BinaryOp::Pow, b, t)?;
        let one = cx.scalar(dtype, 1.0);
        cx.binary(BinaryOp::Sub, one, p)
    };
    let (bt, at) = (power(cx, beta)?, power(cx, alpha)?);
    let root = cx.unary(UnaryOp::Sqrt, bt)?;
    let corrected = cx.binary(BinaryOp::Mul, o.r, root)?;
    let corrected = cx.binary(BinaryOp::Div, corrected, at)?;
    let r = cx.select(started, corrected, o.r)?;
    let (mut xs, mut vs, mut hs) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..o.groups[0].len() {
        let (x, g, v, h) = (o.groups[0][i], o.groups[1][i], o.groups[2][i], o.groups[3][i]);
        let g = regularized(cx, x, g)?;
        let av = times(cx, alpha, v)?;
        let ag = times(cx, 1.0 - alpha, g)?;
        let v_new = cx.binary(BinaryOp::Add, av, ag)?;
        let g2 = cx.binary(BinaryOp::Mul, g, g)?;
        let bh = times(cx, beta, h)?;
        let bg = times(cx, 1.0 - beta, g2)?;
        let h_new = cx.binary(BinaryOp::Add, bh, bg)?;
        let root = cx.unary(UnaryOp::Sqrt, h_new)?;
        let scale = cx.with_scalar(BinaryOp::Add, root, eps)?;
        let ratio = cx.binary(BinaryOp::Div, v_new, scale)?;
        let step = cx.binary(BinaryOp::Mul, r, ratio)?;
        let x_new = cx.binary(BinaryOp::Sub, x, step)?;
        xs.push(if post != 0.0 {
            times(cx, 1.0 - post, x_new)?
        } else {
            x_new
        });
        vs.push(v_new);
        hs.push(h_new);
    }
    Ok([xs, vs, hs].concat())
}
