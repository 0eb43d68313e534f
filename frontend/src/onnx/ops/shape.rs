//! Shape and data-movement ONNX ops, constants, and shape computations.

use super::{axis, Cx};
use crate::ir::{checked_numel, DType, NodeId, Op, Tensor};
use crate::onnx::tensor_from_proto;

/// Reshape: `0` copies the input extent (unless `allowzero`), `-1` takes what remains.
pub(super) fn reshape(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let x = cx.input(0)?;
    let spec = cx.const_ints(1)?.ok_or("the target shape is required")?;
    let allow_zero = cx.opset >= 14 && cx.attrs.flag("allowzero", false)?;
    let input = cx.shape(x);
    let mut shape = Vec::with_capacity(spec.len());
    let mut infer_at = None;
    for (i, &d) in spec.iter().enumerate() {
        shape.push(match d {
            -1 if infer_at.is_none() => {
                infer_at = Some(i);
                1
            }
            -1 => return Err("at most one dimension may be -1".into()),
            0 if !allow_zero => *input
                .get(i)
                .ok_or_else(|| format!("dimension {i} is 0 but the input has rank {}", input.len()))?,
            d if d >= 0 => d as usize,
            d => return Err(format!("invalid dimension {d} in target shape")),
        });
    }
    let total = checked_numel(&input).map_err(|e| e.0)?;
    if let Some(i) = infer_at {
        let known = checked_numel(&shape).map_err(|e| e.0)?;
        if known == 0 || total % known != 0 {
            return Err(format!("cannot infer dimension {i}: {total} elements into {spec:?}"));
        }
        shape[i] = total / known;
    }
    Ok(vec![cx.op(Op::Reshape { shape }, &[x])?])
}

pub(super) fn flatten(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let x = cx.input(0)?;
    let s = cx.shape(x);
    let a = cx.attrs.int("axis", 1)?;
    let a = if a == s.len() as i64 {
        s.len()
    } else {
        axis(a, s.len())?
    };
    let shape = vec![s[..a].iter().product(), s[a..].iter().product()];
    Ok(vec![cx.op(Op::Reshape { shape }, &[x])?])
}

pub(super) fn transpose(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let x = cx.input(0)?;
    let rank = cx.rank(x);
    let perm = match cx.attrs.ints("perm")? {
        Some(p) => p.iter().map(|&a| axis(a, rank)).collect::<Result<Vec<_>, _>>()?,
        None => (0..rank).rev().collect(),
    };
    Ok(vec![cx.op(Op::Transpose { perm }, &[x])?])
}

pub(super) fn concat(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let inputs = (0..cx.n_inputs()).map(|i| cx.input(i)).collect::<Result<Vec<_>, _>>()?;
    let first = *inputs.first().ok_or("at least one input is required")?;
    let a = axis(
        cx.attrs.int_opt("axis")?.ok_or("attribute 'axis' is required")?,
        cx.rank(first),
    )?;
    if inputs.len() == 1 {
        return Ok(inputs);
    }
    Ok(vec![cx.op(Op::Concat { axis: a }, &inputs)?])
}

/// Split into consecutive slices along `axis`: sizes from the `split` attribute (before 13)
/// or input, else equal parts (`num_outputs` from 18 on, else one per output).
pub(super) fn split(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let x = cx.input(0)?;
    let shape = cx.shape(x);
    let a = axis(cx.attrs.int("axis", 0)?, shape.len())?;
    let dim = shape[a];
    let given = if cx.opset < 13 {
        cx.attrs.ints("split")?
    } else {
        cx.const_ints(1)?
    };
    let sizes: Vec<usize> = match given {
        Some(s) => s
            .iter()
            .map(|&v| usize::try_from(v).map_err(|_| format!("negative split size {v}")))
            .collect::<Result<_, _>>()?,
        None => {
            let parts = match cx.attrs.int_opt("num_outputs")? {
                Some(n) if cx.opset >= 18 => usize::try_from(n)
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or("num_outputs must be positive")?,
                _ => cx.node.output.len(),
            };
            if parts != cx.node.output.len() {
                return Err(format!(
                    "num_outputs is {parts} but the node has {} outputs",
                    cx.node.output.len()
                ));
            }
            let each = dim.div_ceil(parts);
            if cx.attrs.has("num_outputs") {
                (0..parts).map(|i| each.min(dim.saturating_sub(i * each))).collect()
            } else if dim % parts != 0 {
                return Err(format!("extent {dim} does not split into {parts} equal parts"));
            } else {
                vec![dim / parts; parts]
            }
        }
    };
    if sizes.iter().sum::<usize>() != dim || sizes.len() != cx.node.output.len() {
        return Err(format!(
            "split sizes {sizes:?} do not cover extent {dim} with {} outputs",
            cx.node.output.len()
        ));
    }
    let mut outs = Vec::new();
    let mut start = 0;
    for size in sizes {
        let mut starts = vec![0; shape.len()];
        let mut sizes = shape.clone();
        starts[a] = if size == 0 { 0 } else { start };
        sizes[a] = size;
        outs.push(cx.op(
            Op::Slice {
                starts,
                steps: vec![1; shape.len()],
                sizes,
            },
            &[x],
        )?);
        start += size;
    }
    Ok(outs)
}

/// Slice with ONNX clamping: negative positions count from the end, then starts and ends
/// are clamped to the valid range for the step's direction.
pub(super) fn slice(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let x = cx.input(0)?;
    let shape = cx.shape(x);
    let rank = shape.len();
    let (starts, ends, axes, steps) = if cx.opset < 10 {
        (
            cx.attrs.ints("starts")?,
            cx.attrs.ints("ends")?,
            cx.attrs.ints("axes")?,
            None,
        )
    } else {
        (
            cx.const_ints(1)?,
            cx.const_ints(2)?,
            cx.const_ints(3)?,
            cx.const_ints(4)?,
        )
    };
    let (starts, ends) = (starts.ok_or("starts are required")?, ends.ok_or("ends are required")?);
    let axes = axes.unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = steps.unwrap_or_else(|| vec![1; starts.len()]);
    if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
        return Err("starts, ends, axes and steps must have the same length".into());
    }
    let mut out_starts = vec![0usize; rank];
    let mut out_steps = vec![1i64; rank];
    let mut out_sizes = shape.clone();
    let mut seen = vec![false; rank];
    for i in 0..starts.len() {
        let a = axis(axes[i], rank)?;
        if std::mem::replace(&mut seen[a], true) {
            return Err(format!("axis {a} is sliced twice"));
        }
        let (dim, step) = (shape[a] as i64, steps[i]);
        if step == 0 {
            return Err("steps must be non-zero".into());
        }
        let norm = |v: i64| if v < 0 { v.saturating_add(dim) } else { v };
        let (s, e) = if step > 0 {
            (norm(starts[i]).clamp(0, dim), norm(ends[i]).clamp(0, dim))
        } else {
            (norm(starts[i]).clamp(0, dim - 1), norm(ends[i]).clamp(-1, dim - 1))
        };
        let (span, stride) = if step > 0 {
            ((e - s).max(0) as u64, step.unsigned_abs())
        } else {
            ((s - e).max(0) as u64, step.unsigned_abs())
        };
        let size = span.div_ceil(stride);
        out_starts[a] = if size == 0 { 0 } else { s as usize };
        out_steps[a] = step;
        out_sizes[a] = size as usize;
    }
    Ok(vec![cx.op(
        Op::Slice {
            starts: out_starts,
            steps: out_steps,
            sizes: out_sizes,
        },
        &[x],
    )?])
}

fn axes_operand(cx: &mut Cx) -> Result<Option<Vec<i64>>, String> {
    if cx.opset < 13 {
        cx.attrs.ints("axes")
    } else {
        cx.const_ints(1)
    }
}

pub(super) fn squeeze(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let x = cx.input(0)?;
    let shape = cx.shape(x);
    let drop: Vec<usize> = match axes_operand(cx)? {
        Some(a) => a.iter().map(|&a| axis(a, shape.len())).collect::<Result<_, _>>()?,
        None => (0..shape.len()).filter(|&i| shape[i] == 1).collect(),
    };
    if let Some(&bad) = drop.iter().find(|&&a| shape[a] != 1) {
        return Err(format!("cannot squeeze axis {bad} of extent {}", shape[bad]));
    }
    let kept = shape
        .iter()
        .enumerate()
        .filter(|(i, _)| !drop.contains(i))
        .map(|(_, &d)| d)
        .collect();
    Ok(vec![cx.reshape(x, kept)?])
}

pub(super) fn unsqueeze(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let x = cx.input(0)?;
    let shape = cx.shape(x);
    let axes = axes_operand(cx)?.ok_or("axes are required")?;
    let rank = shape.len() + axes.len();
    let mut new_axes = axes.iter().map(|&a| axis(a, rank)).collect::<Result<Vec<_>, _>>()?;
    new_axes.sort_unstable();
    if new_axes.windows(2).any(|w| w[0] == w[1]) {
        return Err(format!("repeated axis in {axes:?}"));
    }
    let mut rest = shape.into_iter();
    let out = (0..rank)
        .map(|i| {
            if new_axes.contains(&i) {
                1
            } else {
                rest.next().unwrap_or(1)
            }
        })
        .collect();
    Ok(vec![cx.reshape(x, out)?])
}

pub(super) fn gather(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let (data, idx) = (cx.input(0)?, cx.input(1)?);
    let a = axis(cx.attrs.int("axis", 0)?, cx.rank(data))?;
    let idx = cx.cast(idx, DType::I64)?;
    Ok(vec![cx.op(Op::Gather { axis: a }, &[data, idx])?])
}

pub(super) fn constant(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let a = &cx.attrs;
    let t = if let Some(t) = a.tensor("value")? {
        tensor_from_proto(t, None)?
    } else if let Some(v) = a.float_opt("value_float")? {
        Tensor::scalar_f32(v)
    } else if let Some(v) = a.floats("value_floats")? {
        Tensor::from_f32(vec![v.len()], v).map_err(|e| e.0)?
    } else if let Some(v) = a.int_opt("value_int")? {
        Tensor::from_i64(Vec::new(), vec![v]).map_err(|e| e.0)?
    } else if let Some(v) = a.ints("value_ints")? {
        Tensor::i64_vector(v)
    } else {
        return Err("only value, value_float(s) and value_int(s) constants are supported".into());
    };
    Ok(vec![cx.b.constant(t)])
}

/// A tensor of the given shape filled with `value` (default f32 zero), as a broadcast of the
/// scalar so that large fills are not materialised at import.
pub(super) fn constant_of_shape(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let dims = cx.const_ints(0)?.ok_or("the shape input is required")?;
    let shape = dims
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| format!("negative dimension {d}")))
        .collect::<Result<Vec<_>, _>>()?;
    checked_numel(&shape).map_err(|e| e.0)?;
    let value = match cx.attrs.tensor("value")? {
        Some(t) => {
            let t = tensor_from_proto(t, None)?;
            if t.numel() != 1 {
                return Err("value must hold exactly one element".into());
            }
            t.reshaped(Vec::new()).map_err(|e| e.0)?
        }
        None => Tensor::scalar_f32(0.0),
    };
    let v = cx.b.constant(value);
    if shape.is_empty() {
        return Ok(vec![v]);
    }
    Ok(vec![cx.op(Op::Broadcast { shape }, &[v])?])
}

/// The input's element count as an i64 scalar.
pub(super) fn size(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let x = cx.input(0)?;
    let n = cx.ty(x).numel() as i64;
    Ok(vec![cx
        .b
        .constant(Tensor::from_i64(Vec::new(), vec![n]).map_err(|e| e.0)?)])
}

/// The input's shape as an i64 vector; opset 15 adds a `[start, end)` window.
pub(super) fn shape(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let x = cx.input(0)?;
    let dims: Vec<i64> = cx.shape(x).iter().map(|&d| d as i64).collect();
    let r = dims.len() as i64;
    let clamp = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
    let start = clamp(cx.attrs.int("start", 0)?);
    let end = clamp(cx.attrs.int("end", r)?);
    let window = if start < end {
        dims[start..end].to_vec()
    } else {
        Vec::new()
    };
    Ok(vec![cx.b.constant(Tensor::i64_vector(window))])
}
