//! ReduceSum, ReduceMean, ReduceMax.

use super::{axis, Cx};
use crate::ir::{DType, NodeId, ReduceKind};

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
    let y = match (cx.op_type(), cx.ty(x).dtype) {
        // On bool, max is "any": reduce 0/1 integers and convert back.
        ("ReduceMax", DType::Bool) => {
            let ints = cx.cast(x, DType::I64)?;
            let m = cx.reduce(ReduceKind::Max, ints, axes.clone())?;
            cx.cast(m, DType::Bool)?
        }
        ("ReduceSum", _) => cx.reduce(ReduceKind::Sum, x, axes.clone())?,
        ("ReduceMax", _) => cx.reduce(ReduceKind::Max, x, axes.clone())?,
        _ => cx.mean(x, axes.clone())?,
    };
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
