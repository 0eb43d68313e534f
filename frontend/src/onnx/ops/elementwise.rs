//! Elementwise ONNX ops.

use super::{table, Cx};
use crate::ir::{BinaryOp, DType, NodeId, Op, UnaryOp};

pub(super) fn arith(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let op = match cx.op_type() {
        "Add" => BinaryOp::Add,
        "Sub" => BinaryOp::Sub,
        "Mul" => BinaryOp::Mul,
        _ => BinaryOp::Div,
    };
    let (a, b) = (cx.input(0)?, cx.input(1)?);
    Ok(vec![cx.binary(op, a, b)?])
}

/// `Mod`: with `fmod` the remainder takes the dividend's sign (C's `fmod`); without it the
/// divisor's (Python's `%`), which is the truncated remainder plus the divisor where the two
/// signs differ.
pub(super) fn modulo(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let (a, b) = (cx.input(0)?, cx.input(1)?);
    let fmod = cx.attrs.flag("fmod", false)?;
    let r = cx.binary(BinaryOp::Rem, a, b)?;
    if fmod {
        return Ok(vec![r]);
    }
    let r_neg = cx.with_scalar(BinaryOp::Less, r, 0.0)?;
    let r_pos = cx.with_scalar(BinaryOp::Greater, r, 0.0)?;
    let b_neg = cx.with_scalar(BinaryOp::Less, b, 0.0)?;
    let b_pos = cx.with_scalar(BinaryOp::Greater, b, 0.0)?;
    let no = cx.scalar(DType::Bool, 0.0);
    let pos_differs = cx.select(r_pos, b_neg, no)?;
    let differs = cx.select(r_neg, b_pos, pos_differs)?;
    let shifted = cx.binary(BinaryOp::Add, r, b)?;
    Ok(vec![cx.select(differs, shifted, r)?])
}

/// `Pow` allows different base and exponent types; the result has the base's type.
pub(super) fn pow(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let (x, y) = (cx.input(0)?, cx.input(1)?);
    let (tx, ty) = (cx.ty(x).dtype, cx.ty(y).dtype);
    let out = if tx == ty || tx.is_float() {
        let y = cx.cast(y, tx)?;
        cx.binary(BinaryOp::Pow, x, y)?
    } else {
        // Integer base with a float exponent: compute in f64, truncate back.
        let (xf, yf) = (cx.cast(x, DType::F64)?, cx.cast(y, DType::F64)?);
        let p = cx.binary(BinaryOp::Pow, xf, yf)?;
        cx.cast(p, tx)?
    };
    Ok(vec![out])
}

pub(super) fn unary(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let u = match cx.op_type() {
        "Sqrt" => UnaryOp::Sqrt,
        "Exp" => UnaryOp::Exp,
        "Log" => UnaryOp::Log,
        "Neg" => UnaryOp::Neg,
        "Abs" => UnaryOp::Abs,
        "Reciprocal" => UnaryOp::Recip,
        "Erf" => UnaryOp::Erf,
        "Relu" => UnaryOp::Relu,
        "Sigmoid" => UnaryOp::Sigmoid,
        "Sin" => UnaryOp::Sin,
        "Cos" => UnaryOp::Cos,
        "Not" => UnaryOp::Not,
        _ => UnaryOp::Tanh,
    };
    let x = cx.input(0)?;
    Ok(vec![cx.unary(u, x)?])
}

/// `max(x, 0) + slope * min(x, 0)`, the reference formula of LeakyRelu and PRelu.
fn leaky(cx: &mut Cx, x: NodeId, slope: NodeId) -> Result<NodeId, String> {
    let pos = cx.unary(UnaryOp::Relu, x)?;
    let neg = cx.with_scalar(BinaryOp::Min, x, 0.0)?;
    let scaled = cx.binary(BinaryOp::Mul, neg, slope)?;
    cx.binary(BinaryOp::Add, pos, scaled)
}

pub(super) fn leaky_relu(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let x = cx.input(0)?;
    let alpha = cx.attrs.float("alpha", 0.01)?;
    let slope = cx.scalar(cx.ty(x).dtype, alpha as f64);
    Ok(vec![leaky(cx, x, slope)?])
}

pub(super) fn prelu(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let (x, slope) = (cx.input(0)?, cx.input(1)?);
    let out = leaky(cx, x, slope)?;
    if cx.ty(out).shape != cx.ty(x).shape {
        return Err("slope must broadcast to the input's shape".into());
    }
    Ok(vec![out])
}

pub(super) fn gelu(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let x = cx.input(0)?;
    let inner = match cx.attrs.string("approximate", "none")?.as_str() {
        // 0.5 * x * (1 + erf(x / sqrt(2)))
        "none" => {
            let s = cx.with_scalar(BinaryOp::Mul, x, std::f64::consts::FRAC_1_SQRT_2)?;
            cx.unary(UnaryOp::Erf, s)?
        }
        // 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
        "tanh" => {
            let x3 = cx.with_scalar(BinaryOp::Pow, x, 3.0)?;
            let c = cx.with_scalar(BinaryOp::Mul, x3, 0.044715)?;
            let sum = cx.binary(BinaryOp::Add, x, c)?;
            let s = cx.with_scalar(BinaryOp::Mul, sum, (2.0 / std::f64::consts::PI).sqrt())?;
            cx.unary(UnaryOp::Tanh, s)?
        }
        other => return Err(format!("approximate='{other}' is not supported (none or tanh)")),
    };
    let one_plus = cx.with_scalar(BinaryOp::Add, inner, 1.0)?;
    let half_x = cx.with_scalar(BinaryOp::Mul, x, 0.5)?;
    Ok(vec![cx.binary(BinaryOp::Mul, half_x, one_plus)?])
}

/// `min(max(x, lo), hi)`; bounds are attributes before opset 11 and optional inputs after.
pub(super) fn clip(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let x = cx.input(0)?;
    let (lo, hi) = if cx.opset < 11 {
        let lo = cx.attrs.float_opt("min")?.map(|v| cx.scalar(cx.ty(x).dtype, v as f64));
        let hi = cx.attrs.float_opt("max")?.map(|v| cx.scalar(cx.ty(x).dtype, v as f64));
        (lo, hi)
    } else {
        (cx.opt_input(1)?, cx.opt_input(2)?)
    };
    let mut y = x;
    if let Some(lo) = lo {
        y = cx.binary(BinaryOp::Max, y, lo)?;
    }
    if let Some(hi) = hi {
        y = cx.binary(BinaryOp::Min, y, hi)?;
    }
    if cx.ty(y).shape != cx.ty(x).shape {
        return Err("min and max must be scalars".into());
    }
    Ok(vec![y])
}

/// `Sum`, and `Mean` as the sum divided by the operand count.
pub(super) fn sum(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let mut acc = cx.input(0)?;
    for i in 1..cx.n_inputs() {
        let next = cx.input(i)?;
        acc = cx.binary(BinaryOp::Add, acc, next)?;
    }
    if cx.op_type() == "Mean" {
        acc = cx.with_scalar(BinaryOp::Div, acc, cx.n_inputs() as f64)?;
    }
    Ok(vec![acc])
}

/// Elementwise max or min of any number of broadcasting operands.
pub(super) fn variadic_extreme(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let op = if cx.op_type() == "Max" {
        BinaryOp::Max
    } else {
        BinaryOp::Min
    };
    let mut acc = cx.input(0)?;
    for i in 1..cx.n_inputs() {
        let next = cx.input(i)?;
        acc = cx.binary(op, acc, next)?;
    }
    Ok(vec![acc])
}

/// Comparisons. `LessOrEqual` is `less or equal` rather than `not greater`, so that NaN
/// compares false as the definition requires.
pub(super) fn compare(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let (a, b) = (cx.input(0)?, cx.input(1)?);
    let op = match cx.op_type() {
        "Less" | "LessOrEqual" => BinaryOp::Less,
        "Greater" | "GreaterOrEqual" => BinaryOp::Greater,
        _ => BinaryOp::Equal,
    };
    let strict = cx.binary(op, a, b)?;
    if !cx.op_type().ends_with("OrEqual") {
        return Ok(vec![strict]);
    }
    let eq = cx.binary(BinaryOp::Equal, a, b)?;
    let yes = cx.scalar(DType::Bool, 1.0);
    Ok(vec![cx.select(strict, yes, eq)?])
}

/// `And` is `a ? b : false` and `Or` is `a ? true : b`, both broadcasting.
pub(super) fn logic(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let (a, b) = (cx.input(0)?, cx.input(1)?);
    for v in [a, b] {
        if cx.ty(v).dtype != DType::Bool {
            return Err(format!("operands must be bool, got {}", cx.ty(v)));
        }
    }
    let y = if cx.op_type() == "And" {
        let no = cx.scalar(DType::Bool, 0.0);
        cx.select(a, b, no)?
    } else {
        let yes = cx.scalar(DType::Bool, 1.0);
        cx.select(a, yes, b)?
    };
    Ok(vec![y])
}

pub(super) fn select(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let (c, a, b) = (cx.input(0)?, cx.input(1)?, cx.input(2)?);
    Ok(vec![cx.op(Op::Select, &[c, a, b])?])
}

/// Cast to the element type of the second operand.
pub(super) fn cast_like(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let (x, like) = (cx.input(0)?, cx.input(1)?);
    let to = cx.ty(like).dtype;
    Ok(vec![cx.cast(x, to)?])
}

pub(super) fn cast(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let x = cx.input(0)?;
    let to = cx.attrs.int_opt("to")?.ok_or("attribute 'to' is required")?;
    let to = crate::onnx::dtype_from_onnx(to as i32)?;
    Ok(vec![cx.cast(x, to)?])
}

pub(super) fn identity(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    Ok(vec![cx.input(0)?])
}

/// Dropout: in inference mode, or training mode with ratio 0, the identity, with an all-true
/// mask when the mask is asked for; in training mode, the kept elements (see
/// [`dropout_mask`]) scaled by `1 / (1 - ratio)`.
pub(super) fn dropout(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let x = cx.input(0)?;
    let shape = cx.shape(x);
    let mut mask = None;
    if cx.opset >= 12 {
        let first = |t: Option<std::sync::Arc<crate::ir::Tensor>>| t.and_then(|t| t.to_f64_vec().first().copied());
        let training = first(cx.const_input(2)?).is_some_and(|t| t != 0.0);
        let ratio = first(cx.const_input(1)?).unwrap_or(0.5);
        if training && ratio != 0.0 {
            mask = Some(dropout_mask(cx, &shape, ratio)?);
        }
    }
    let wants_mask = cx.node.output.len() > 1 && !cx.node.output[1].is_empty();
    let Some((keep, scale)) = mask else {
        let mut outs = vec![x];
        if wants_mask {
            let t = cx.scalar(DType::Bool, 1.0);
            outs.push(cx.op(Op::Broadcast { shape }, &[t])?);
        }
        return Ok(outs);
    };
    let zero = cx.scalar(cx.ty(x).dtype, 0.0);
    let kept = cx.select(keep, x, zero)?;
    let y = cx.with_scalar(BinaryOp::Mul, kept, scale)?;
    Ok(if wants_mask { vec![y, keep] } else { vec![y] })
}

/// The mask of training-mode dropout with drop probability `ratio`, and the scale of the
/// kept elements, `1 / (1 - ratio)`. With [`crate::onnx::ImportOptions::dropout_noise`], the
/// elements whose noise input is at least `ratio` are kept. Otherwise the mask is the ONNX
/// reference's: element `k` is kept when the `k`-th of `numpy.random.uniform(0, 1, n)` after
/// `numpy.random.seed(seed)` is at least `ratio`; a node without a `seed` takes seed 0, so a
/// compiled model is deterministic.
fn dropout_mask(cx: &mut Cx, shape: &[usize], ratio: f64) -> Result<(NodeId, f64), String> {
    if !(0.0..1.0).contains(&ratio) {
        return Err(format!("ratio {ratio} is not in [0, 1)"));
    }
    if cx.b.dropout_noise {
        let name =
            cx.b.unused_name(&format!("{}{}", crate::onnx::DROPOUT_NOISE, cx.node.output[0]));
        let ty = crate::ir::TensorType::new(DType::F32, shape.to_vec()).map_err(|e| e.0)?;
        let noise = cx.b.input(&name, ty);
        let ratio_value = cx.scalar(DType::F32, ratio);
        let dropped = cx.op(Op::Binary(BinaryOp::Less), &[noise, ratio_value])?;
        let keep = cx.op(Op::Unary(crate::ir::UnaryOp::Not), &[dropped])?;
        return Ok((keep, 1.0 / (1.0 - ratio)));
    }
    let seed = cx.attrs.int("seed", 0)?;
    let seed = u32::try_from(seed).map_err(|_| format!("seed {seed} is not in 0 to 2^32 - 1"))?;
    let n = crate::ir::checked_numel(shape).map_err(|e| e.0)?;
    table(Some(n), "the dropout mask")?;
    let keep: Vec<bool> = crate::random::numpy_uniform(seed, n)
        .iter()
        .map(|&u| u >= ratio)
        .collect();
    Ok((cx.bool_const(shape.to_vec(), keep)?, 1.0 / (1.0 - ratio)))
}
