//! Reductions (ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2,
//! ReduceLogSumExp, ReduceSumSquare) and ArgMax/ArgMin.

use super::{axis, table, Cx};
use crate::ir::{BinaryOp, DType, NodeId, ReduceKind, UnaryOp};

/// Axes come from an attribute before the opset in which they became an input (13 for
/// ReduceSum, 18 for the others). No axes means all axes, or nothing when
/// `noop_with_empty_axes` is set.
pub(super) fn reduce(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let x = cx.input(0)?;
    let rank = cx.rank(x);
    let axes_as_input = cx.opset >= if cx.op_type() == "ReduceSum" { 13 } else { 18 };
    let axes = if axes_as_input {
        cx.const_ints(1)?
    } else {
        cx.attrs.ints("axes")?
    };
    let keepdims = cx.attrs.flag("keepdims", true)?;
    let axes: Vec<usize> = match axes {
        Some(a) if !a.is_empty() => {
            let mut v = a.iter().map(|&a| axis(a, rank)).collect::<Result<Vec<_>, _>>()?;
            v.sort_unstable();
            v.dedup();
            v
        }
        _ if axes_as_input && cx.attrs.flag("noop_with_empty_axes", false)? => return Ok(vec![x]),
        _ => (0..rank).collect(),
    };
    let y = reduce_by(cx, x, axes.clone())?;
    if keepdims {
        return Ok(vec![y]);
    }
    let kept: Vec<usize> = cx
        .shape(x)
        .iter()
        .enumerate()
        .filter(|(i, _)| !axes.contains(i))
        .map(|(_, &d)| d)
        .collect();
    Ok(vec![cx.reshape(y, kept)?])
}

/// The node's reduction of `x` over `axes`, keeping them as extent-1 dimensions.
fn reduce_by(cx: &mut Cx, x: NodeId, axes: Vec<usize>) -> Result<NodeId, String> {
    let dtype = cx.ty(x).dtype;
    Ok(match cx.op_type() {
        // On bool, max is "any" and min is "all": reduce 0/1 integers and convert back.
        "ReduceMax" | "ReduceMin" if dtype == DType::Bool => {
            let kind = if cx.op_type() == "ReduceMax" {
                ReduceKind::Max
            } else {
                ReduceKind::Min
            };
            // Compared with 0 rather than cast: the identities (i64 extremes) of an empty
            // slice must give false for "any" and true for "all".
            let ints = cx.cast(x, DType::I64)?;
            let m = cx.reduce(kind, ints, axes)?;
            cx.with_scalar(BinaryOp::Greater, m, 0.0)?
        }
        "ReduceSum" => cx.reduce(ReduceKind::Sum, x, axes)?,
        "ReduceMax" => cx.reduce(ReduceKind::Max, x, axes)?,
        "ReduceMin" => cx.reduce(ReduceKind::Min, x, axes)?,
        "ReduceProd" => cx.reduce(ReduceKind::Prod, x, axes)?,
        "ReduceL1" => {
            let a = cx.unary(UnaryOp::Abs, x)?;
            cx.reduce(ReduceKind::Sum, a, axes)?
        }
        "ReduceSumSquare" => {
            let sq = cx.binary(BinaryOp::Mul, x, x)?;
            cx.reduce(ReduceKind::Sum, sq, axes)?
        }
        "ReduceL2" => {
            // Integer inputs: the root is taken in f64 and truncated back.
            let xf = if dtype.is_float() { x } else { cx.cast(x, DType::F64)? };
            let sq = cx.binary(BinaryOp::Mul, xf, xf)?;
            let s = cx.reduce(ReduceKind::Sum, sq, axes)?;
            let r = cx.unary(UnaryOp::Sqrt, s)?;
            cx.cast(r, dtype)?
        }
        "ReduceLogSumExp" => log_sum_exp(cx, x, axes)?,
        _ => cx.mean(x, axes)?,
    })
}

/// `log(sum(exp(x)))`, computed as `m + log(sum(exp(x - m)))` with `m` the maximum where it
/// is finite (0 elsewhere), so large inputs do not overflow and empty or infinite slices give
/// what the direct formula gives. Integer inputs are computed in f64 and truncated back.
fn log_sum_exp(cx: &mut Cx, x: NodeId, axes: Vec<usize>) -> Result<NodeId, String> {
    let dtype = cx.ty(x).dtype;
    let xf = if dtype.is_float() { x } else { cx.cast(x, DType::F64)? };
    let fdt = cx.ty(xf).dtype;
    let m = cx.reduce(ReduceKind::Max, xf, axes.clone())?;
    let abs = cx.unary(UnaryOp::Abs, m)?;
    let finite = cx.with_scalar(BinaryOp::Less, abs, f64::INFINITY)?;
    let zero = cx.scalar(fdt, 0.0);
    let shift = cx.select(finite, m, zero)?;
    let d = cx.binary(BinaryOp::Sub, xf, shift)?;
    let e = cx.unary(UnaryOp::Exp, d)?;
    let s = cx.reduce(ReduceKind::Sum, e, axes)?;
    let l = cx.unary(UnaryOp::Log, s)?;
    let y = cx.binary(BinaryOp::Add, l, shift)?;
    cx.cast(y, dtype)
}

/// ArgMax/ArgMin along one axis: the extreme value `m`, then the least (or, with
/// `select_last_index`, the greatest) position whose element equals `m`.
pub(super) fn arg_extreme(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let x = cx.input(0)?;
    let shape = cx.shape(x);
    let a = axis(cx.attrs.int("axis", 0)?, shape.len())?;
    let keepdims = cx.attrs.flag("keepdims", true)?;
    let last = cx.opset >= 12 && cx.attrs.flag("select_last_index", false)?;
    let n = shape[a];
    if n == 0 {
        return Err(format!("axis {a} of {} is empty", cx.ty(x)));
    }
    let kind = if cx.op_type() == "ArgMax" {
        ReduceKind::Max
    } else {
        ReduceKind::Min
    };
    let xv = if cx.ty(x).dtype == DType::Bool {
        cx.cast(x, DType::I64)?
    } else {
        x
    };
    let m = cx.reduce(kind, xv, vec![a])?;
    let hit = cx.binary(BinaryOp::Equal, xv, m)?;
    table(Some(n), "the positions")?;
    let mut pos_shape = vec![1; shape.len()];
    pos_shape[a] = n;
    let positions = cx.i64_const(pos_shape, (0..n as i64).collect())?;
    let (miss, pick) = if last {
        (-1, ReduceKind::Max)
    } else {
        (n as i64, ReduceKind::Min)
    };
    let miss = cx.scalar(DType::I64, miss as f64);
    let candidates = cx.select(hit, positions, miss)?;
    let y = cx.reduce(pick, candidates, vec![a])?;
    if keepdims {
        return Ok(vec![y]);
    }
    let mut kept = shape;
    kept.remove(a);
    Ok(vec![cx.reshape(y, kept)?])
}
