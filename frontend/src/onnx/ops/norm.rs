//! Normalizations defined as functions in ONNX: InstanceNormalization, GroupNormalization,
//! RMSNormalization. Statistics are means over the normalized axes; the variance is the mean
//! squared deviation, as in the definitions.

use super::{axis, Cx};
use crate::ir::{BinaryOp, NodeId, UnaryOp};

/// `(x - mean) / sqrt(var + eps)` over `axes` of `x`.
fn standardize(cx: &mut Cx, x: NodeId, axes: Vec<usize>, eps: f64) -> Result<NodeId, String> {
    let mean = cx.mean(x, axes.clone())?;
    let d = cx.binary(BinaryOp::Sub, x, mean)?;
    let d2 = cx.binary(BinaryOp::Mul, d, d)?;
    let var = cx.mean(d2, axes)?;
    let v = cx.with_scalar(BinaryOp::Add, var, eps)?;
    let sd = cx.unary(UnaryOp::Sqrt, v)?;
    cx.binary(BinaryOp::Div, d, sd)
}

/// `p[C]` viewed as `[1, C, 1, ..]` for an input of `rank`.
fn per_channel(cx: &mut Cx, p: NodeId, c: usize, rank: usize) -> Result<NodeId, String> {
    if cx.shape(p) != [c] {
        return Err(format!("parameter {} must have {c} elements", cx.ty(p)));
    }
    let mut shape = vec![1; rank];
    shape[1] = c;
    cx.reshape(p, shape)
}

/// Normalizes every `[n, c]` plane over the spatial axes, then scales and shifts per channel.
pub(super) fn instance_norm(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let (x, scale, bias) = (cx.input(0)?, cx.input(1)?, cx.input(2)?);
    let rank = cx.rank(x);
    if rank < 3 {
        return Err(format!("input {} must be [N, C, spatial..]", cx.ty(x)));
    }
    let eps = cx.attrs.float("epsilon", 1e-5)? as f64;
    let c = cx.shape(x)[1];
    let norm = standardize(cx, x, (2..rank).collect(), eps)?;
    let scale = per_channel(cx, scale, c, rank)?;
    let bias = per_channel(cx, bias, c, rank)?;
    let scaled = cx.binary(BinaryOp::Mul, norm, scale)?;
    Ok(vec![cx.binary(BinaryOp::Add, scaled, bias)?])
}

/// Normalizes each group of `C / num_groups` channels of every instance together. Scale and
/// bias are per channel from opset 21; before it they are per group.
pub(super) fn group_norm(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let (x, scale, bias) = (cx.input(0)?, cx.input(1)?, cx.input(2)?);
    let shape = cx.shape(x);
    let rank = shape.len();
    if rank < 2 {
        return Err(format!("input {} must be [N, C, ..]", cx.ty(x)));
    }
    let groups = usize::try_from(
        cx.attrs
            .int_opt("num_groups")?
            .ok_or("attribute 'num_groups' is required")?,
    )
    .ok()
    .filter(|&g| g > 0)
    .ok_or("num_groups must be positive")?;
    let (n, c) = (shape[0], shape[1]);
    if c % groups != 0 {
        return Err(format!("{c} channels do not divide into {groups} groups"));
    }
    let eps = cx.attrs.float("epsilon", 1e-5)? as f64;
    let rest: usize = shape[1..].iter().product::<usize>() / groups.max(1);
    let grouped = cx.reshape(x, vec![n, groups, rest])?;
    let norm = standardize(cx, grouped, vec![2], eps)?;
    let norm = cx.reshape(norm, shape)?;
    let (scale, bias) = if cx.opset >= 21 {
        (scale, bias)
    } else {
        // One value per group, repeated over the group's channels.
        let mut per = Vec::new();
        for p in [scale, bias] {
            if cx.shape(p) != [groups] {
                return Err(format!("parameter {} must have {groups} elements", cx.ty(p)));
            }
            let col = cx.reshape(p, vec![groups, 1])?;
            let wide = cx.broadcast(col, vec![groups, c / groups])?;
            per.push(cx.reshape(wide, vec![c])?);
        }
        (per[0], per[1])
    };
    let scale = per_channel(cx, scale, c, rank)?;
    let bias = per_channel(cx, bias, c, rank)?;
    let scaled = cx.binary(BinaryOp::Mul, norm, scale)?;
    Ok(vec![cx.binary(BinaryOp::Add, scaled, bias)?])
}

/// `x / sqrt(mean(x^2) + eps) * scale`, the mean over the axes from `axis` on.
pub(super) fn rms_norm(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let (x, scale) = (cx.input(0)?, cx.input(1)?);
    let rank = cx.rank(x);
    let first = axis(cx.attrs.int("axis", -1)?, rank)?;
    let eps = cx.attrs.float("epsilon", 1e-5)? as f64;
    let sq = cx.binary(BinaryOp::Mul, x, x)?;
    let ms = cx.mean(sq, (first..rank).collect())?;
    let v = cx.with_scalar(BinaryOp::Add, ms, eps)?;
    let rms = cx.unary(UnaryOp::Sqrt, v)?;
    let norm = cx.binary(BinaryOp::Div, x, rms)?;
    let y = cx.binary(BinaryOp::Mul, norm, scale)?;
    if cx.shape(y) != cx.shape(x) {
        return Err("scale must broadcast to the input's shape".into());
    }
    Ok(vec![y])
}
