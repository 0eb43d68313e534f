//! Data-movement ONNX ops expressed through reshapes, broadcasts, transposes, slices,
//! concatenations and gathers: Expand, Tile, DepthToSpace, SpaceToDepth, GatherElements,
//! Trilu, CumSum, Pad, and Range (a constant).

use super::{axis, table, Cx};
use crate::ir::infer::{broadcast_shapes, exact_in};
use crate::ir::{checked_numel, BinaryOp, DType, Data, NodeId, Op, Tensor, TensorType};

/// Operand `i` as non-negative extents (shapes, repeats).
fn extents(cx: &mut Cx, i: usize, what: &str) -> Result<Vec<usize>, String> {
    let v = cx
        .const_ints(i)?
        .ok_or_else(|| format!("the {what} input is required"))?;
    v.iter()
        .map(|&d| usize::try_from(d).map_err(|_| format!("{what} must not be negative, got {d}")))
        .collect()
}

/// Bidirectional broadcast of the input with the given shape.
pub(super) fn expand(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let x = cx.input(0)?;
    let shape = extents(cx, 1, "shape")?;
    let out = broadcast_shapes(&cx.shape(x), &shape).map_err(|e| e.0)?;
    checked_numel(&out).map_err(|e| e.0)?;
    Ok(vec![cx.broadcast(x, out)?])
}

/// `x[d0, d1, ..]` repeated `r0, r1, ..` times: viewed as `[1, d0, 1, d1, ..]`, broadcast to
/// `[r0, d0, r1, d1, ..]` and merged back pairwise.
pub(super) fn tile(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let x = cx.input(0)?;
    let shape = cx.shape(x);
    let repeats = extents(cx, 1, "repeats")?;
    if repeats.len() != shape.len() {
        return Err(format!(
            "{} repeats for an input of rank {}",
            repeats.len(),
            shape.len()
        ));
    }
    let spread: Vec<usize> = shape.iter().flat_map(|&d| [1, d]).collect();
    let wide: Vec<usize> = shape.iter().zip(&repeats).flat_map(|(&d, &r)| [r, d]).collect();
    let out: Vec<usize> = shape.iter().zip(&repeats).map(|(&d, &r)| d * r).collect();
    checked_numel(&wide).map_err(|e| e.0)?;
    let v = cx.reshape(x, spread)?;
    let b = cx.broadcast(v, wide)?;
    Ok(vec![cx.reshape(b, out)?])
}

/// The values `start + k * delta` below `limit` (above it for a negative delta), as a
/// constant: all three operands must be known at import.
pub(super) fn range(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let mut scalar = |i: usize, what: &str| -> Result<std::sync::Arc<Tensor>, String> {
        let t = cx
            .const_input(i)?
            .ok_or_else(|| format!("the {what} input is required"))?;
        if t.numel() != 1 {
            return Err(format!("{what} must be a scalar, got {}", t.ty()));
        }
        Ok(t)
    };
    let (start, limit, delta) = (scalar(0, "start")?, scalar(1, "limit")?, scalar(2, "delta")?);
    let dtype = start.dtype();
    if limit.dtype() != dtype || delta.dtype() != dtype {
        return Err("start, limit and delta must have one type".into());
    }
    let t = match dtype {
        DType::I64 => {
            let (s, l, d) = (start.to_i64_vec()[0], limit.to_i64_vec()[0], delta.to_i64_vec()[0]);
            if d == 0 {
                return Err("delta must not be zero".into());
            }
            let n = (l as i128 - s as i128 + d as i128 - d.signum() as i128) / d as i128;
            let n = range_len(n.max(0) as f64)?;
            table(Some(n), "the range")?;
            Tensor::new(vec![n], Data::I64((0..n as i64).map(|k| s + k * d).collect()))
        }
        DType::F32 | DType::F64 => {
            let (s, l, d) = (start.to_f64_vec()[0], limit.to_f64_vec()[0], delta.to_f64_vec()[0]);
            if d == 0.0 || !d.is_finite() || !s.is_finite() || !l.is_finite() {
                return Err("start, limit and delta must be finite and delta non-zero".into());
            }
            let n = range_len(((l - s) / d).ceil().max(0.0))?;
            table(Some(n), "the range")?;
            let values = (0..n).map(|k| s + k as f64 * d);
            if dtype == DType::F32 {
                // Each element is computed in the operand type, as the definition's loop does.
                let (s, d) = (s as f32, d as f32);
                Tensor::new(vec![n], Data::F32((0..n).map(|k| s + k as f32 * d).collect()))
            } else {
                Tensor::new(vec![n], Data::F64(values.collect()))
            }
        }
        DType::Bool => return Err("Range of bool is not defined".into()),
    }
    .map_err(|e| e.0)?;
    Ok(vec![cx.constant(t)])
}

/// A range length, checked against the tensor size limit before anything is allocated.
fn range_len(n: f64) -> Result<usize, String> {
    if n > crate::ir::MAX_TENSOR_ELEMENTS as f64 {
        return Err(format!("the range has {n} elements, more than swflow allows"));
    }
    Ok(n as usize)
}

/// `[N, C, H, W]` and the block size of DepthToSpace/SpaceToDepth.
fn blocks(cx: &Cx, x: NodeId) -> Result<([usize; 4], usize), String> {
    let s = cx.shape(x);
    let [n, c, h, w] = s[..] else {
        return Err(format!("input {} must be [N, C, H, W]", cx.ty(x)));
    };
    let b = usize::try_from(
        cx.attrs
            .int_opt("blocksize")?
            .ok_or("attribute 'blocksize' is required")?,
    )
    .ok()
    .filter(|&b| b > 0)
    .ok_or("blocksize must be positive")?;
    Ok(([n, c, h, w], b))
}

/// The block mode: `DCR` (depth-column-row, the default) or `CRD`.
fn block_mode(cx: &Cx) -> Result<bool, String> {
    match cx.attrs.string("mode", "DCR")?.as_str() {
        "DCR" => Ok(true),
        "CRD" => Ok(false),
        other => Err(format!("mode '{other}' is not supported (DCR or CRD)")),
    }
}

pub(super) fn depth_to_space(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let x = cx.input(0)?;
    let ([n, c, h, w], b) = blocks(cx, x)?;
    let bb = b.checked_mul(b).filter(|&bb| bb <= c.max(1) && c % bb == 0);
    let Some(bb) = bb else {
        return Err(format!("{c} channels do not split into blocks of {b}x{b}"));
    };
    let d = c / bb;
    let (view, perm) = if block_mode(cx)? {
        (vec![n, b, b, d, h, w], vec![0, 3, 4, 1, 5, 2])
    } else {
        (vec![n, d, b, b, h, w], vec![0, 1, 4, 2, 5, 3])
    };
    let v = cx.reshape(x, view)?;
    let t = cx.transpose(v, perm)?;
    Ok(vec![cx.reshape(t, vec![n, d, h * b, w * b])?])
}

/// Opset 28 adds the `CRD` mode; before it the order is always `DCR`.
pub(super) fn space_to_depth(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let x = cx.input(0)?;
    let ([n, c, h, w], b) = blocks(cx, x)?;
    if h % b != 0 || w % b != 0 {
        return Err(format!("{h}x{w} does not split into blocks of {b}x{b}"));
    }
    let dcr = cx.opset < 28 || block_mode(cx)?;
    let perm = if dcr {
        vec![0, 3, 5, 1, 2, 4]
    } else {
        vec![0, 1, 3, 5, 2, 4]
    };
    let v = cx.reshape(x, vec![n, c, h / b, b, w / b, b])?;
    let t = cx.transpose(v, perm)?;
    Ok(vec![cx.reshape(t, vec![n, c * b * b, h / b, w / b])?])
}

/// `out[i..] = data[i.. with i[axis] replaced by indices[i..]]`: the flat position of every
/// element is `indices * stride[axis]` plus a constant offset from the other coordinates, and
/// one gather from the flattened data reads them all. Negative indices count from the end.
pub(super) fn gather_elements(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let (data, idx) = (cx.input(0)?, cx.input(1)?);
    let ds = cx.shape(data);
    let is = cx.shape(idx);
    let a = axis(cx.attrs.int("axis", 0)?, ds.len())?;
    if is.len() != ds.len() || is.iter().zip(&ds).enumerate().any(|(i, (&x, &d))| i != a && x > d) {
        return Err(format!("indices {} do not fit data {}", cx.ty(idx), cx.ty(data)));
    }
    let idx = cx.cast(idx, DType::I64)?;
    let extent = ds[a] as i64;
    let negative = cx.with_scalar(BinaryOp::Less, idx, 0.0)?;
    let wrapped = cx.with_scalar(BinaryOp::Add, idx, extent as f64)?;
    let idx = cx.select(negative, wrapped, idx)?;
    let strides = crate::ir::strides(&ds);
    let scaled = cx.with_scalar(BinaryOp::Mul, idx, strides[a] as f64)?;
    let count = checked_numel(&is).map_err(|e| e.0)?;
    table(Some(count), "the gather's offsets")?;
    let mut offsets = Vec::with_capacity(count);
    let mut coord = vec![0usize; is.len()];
    for _ in 0..count {
        let off: usize = (0..is.len()).filter(|&i| i != a).map(|i| coord[i] * strides[i]).sum();
        offsets.push(off as i64);
        for d in (0..is.len()).rev() {
            coord[d] += 1;
            if coord[d] < is[d] {
                break;
            }
            coord[d] = 0;
        }
    }
    let offsets = cx.i64_const(is.clone(), offsets)?;
    let flat_idx = cx.binary(BinaryOp::Add, scaled, offsets)?;
    let flat = cx.reshape(data, vec![checked_numel(&ds).map_err(|e| e.0)?])?;
    Ok(vec![cx.op(Op::Gather { axis: 0 }, &[flat, flat_idx])?])
}

/// Upper (`j - i >= k`) or lower (`j - i <= k`) triangle of the last two dimensions, the rest
/// zero.
pub(super) fn trilu(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let x = cx.input(0)?;
    let s = cx.shape(x);
    if s.len() < 2 {
        return Err(format!("input {} needs at least two dimensions", cx.ty(x)));
    }
    let k = match cx.const_ints(1)? {
        Some(v) if v.len() == 1 => v[0],
        Some(v) => return Err(format!("k must be a scalar, got {} values", v.len())),
        None => 0,
    };
    let upper = cx.attrs.flag("upper", true)?;
    let (m, n) = (s[s.len() - 2], s[s.len() - 1]);
    table(m.checked_mul(n), "the triangle mask")?;
    let keep: Vec<bool> = (0..m as i64)
        .flat_map(|i| (0..n as i64).map(move |j| if upper { j - i >= k } else { j - i <= k }))
        .collect();
    let mask = cx.bool_const(vec![m, n], keep)?;
    let zero = cx.scalar(cx.ty(x).dtype, 0.0);
    Ok(vec![cx.select(mask, x, zero)?])
}

/// Cumulative sum along an axis as a product with a 0/1 matrix `T` (`T[k, j] = 1` when
/// element `k` counts towards output `j`), so each output adds its terms in index order, as
/// the sequential definition does. The axis is moved last for the product and back after.
pub(super) fn cumsum(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let x = cx.input(0)?;
    let shape = cx.shape(x);
    let a = match cx.const_ints(1)?.as_deref() {
        Some([a]) => axis(*a, shape.len())?,
        _ => return Err("axis must be a scalar".into()),
    };
    let exclusive = cx.attrs.flag("exclusive", false)?;
    let reverse = cx.attrs.flag("reverse", false)?;
    let dtype = cx.ty(x).dtype;
    if dtype == DType::Bool {
        return Err("CumSum of bool is not defined".into());
    }
    let n = shape[a];
    table(n.checked_mul(n), "the cumulative-sum triangle")?;
    let counts = |k: usize, j: usize| match (reverse, exclusive) {
        (false, false) => k <= j,
        (false, true) => k < j,
        (true, false) => k >= j,
        (true, true) => k > j,
    };
    let ones: Vec<f64> = (0..n)
        .flat_map(|k| (0..n).map(move |j| if counts(k, j) { 1.0 } else { 0.0 }))
        .collect();
    let data = match dtype {
        DType::F32 => Data::F32(ones.iter().map(|&v| v as f32).collect()),
        DType::F64 => Data::F64(ones),
        _ => Data::I64(ones.iter().map(|&v| v as i64).collect()),
    };
    let rank = shape.len();
    let mut perm: Vec<usize> = (0..rank).filter(|&d| d != a).collect();
    perm.push(a);
    let moved = cx.transpose(x, perm.clone())?;
    let moved_shape = cx.shape(moved);
    let rows: usize = moved_shape[..rank - 1].iter().product();
    let flat = cx.reshape(moved, vec![rows, n])?;
    let tri = cx.constant(Tensor::new(vec![n, n], data).map_err(|e| e.0)?);
    let sums = cx.op(Op::MatMul, &[flat, tri])?;
    let sums = cx.reshape(sums, moved_shape)?;
    let mut back = vec![0; rank];
    for (i, &p) in perm.iter().enumerate() {
        back[p] = i;
    }
    Ok(vec![cx.transpose(sums, back)?])
}

/// Pads (begin and end per axis) and the axes they apply to, from the attribute (before
/// opset 11) or the inputs.
fn pad_amounts(cx: &mut Cx, rank: usize) -> Result<Vec<i64>, String> {
    if cx.opset < 11 {
        let pads = cx.attrs.ints("pads")?.ok_or("attribute 'pads' is required")?;
        if pads.len() != 2 * rank {
            return Err(format!("{} pads for rank {rank}", pads.len()));
        }
        return Ok(pads);
    }
    let given = cx.const_ints(1)?.ok_or("the pads input is required")?;
    let axes: Vec<usize> = match cx.opset >= 18 {
        true => match cx.const_ints(3)? {
            Some(a) => a.iter().map(|&a| axis(a, rank)).collect::<Result<_, _>>()?,
            None => (0..rank).collect(),
        },
        false => (0..rank).collect(),
    };
    if given.len() != 2 * axes.len() {
        return Err(format!("{} pads for {} axes", given.len(), axes.len()));
    }
    let mut pads = vec![0; 2 * rank];
    for (i, &a) in axes.iter().enumerate() {
        pads[a] = given[i];
        pads[rank + a] = given[axes.len() + i];
    }
    Ok(pads)
}

/// Constant, reflect, edge or wrap padding. Negative pads crop first (a slice). Positive
/// constant pads are one `pad` node when the value is exact as an f64 (as every value but
/// integers beyond 2^53 is), else they concatenate broadcast fills; the other modes gather
/// every position of the padded axis from its source position in the input.
pub(super) fn pad(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let x = cx.input(0)?;
    let rank = cx.rank(x);
    let pads = pad_amounts(cx, rank)?;
    let mode = cx.attrs.string("mode", "constant")?;
    let dtype = cx.ty(x).dtype;
    let value = if cx.opset < 11 {
        let v = cx.attrs.float("value", 0.0)? as f64;
        Tensor::from_f32(Vec::new(), vec![v as f32]).map_err(|e| e.0)?
    } else {
        match cx.const_input(2)? {
            Some(v) if v.numel() == 1 => (*v).clone().reshaped(Vec::new()).map_err(|e| e.0)?,
            Some(v) => return Err(format!("constant_value must be a scalar, got {}", v.ty())),
            None => Tensor::new(Vec::new(), Data::zeros(dtype, 1)).map_err(|e| e.0)?,
        }
    };
    let exact = (value.dtype() == dtype)
        .then(|| first_as_f64(&value))
        .filter(|&v| exact_in(v, dtype));
    let mut y = x;
    if let ("constant", Some(value)) = (mode.as_str(), exact) {
        let mut grow = vec![0; 2 * rank];
        for a in 0..rank {
            y = crop(cx, y, a, pads[a], pads[rank + a])?;
            grow[a] = pads[a].max(0) as usize;
            grow[rank + a] = pads[rank + a].max(0) as usize;
        }
        if grow.iter().all(|&p| p == 0) {
            return Ok(vec![y]);
        }
        return Ok(vec![cx.op(Op::Pad { pads: grow, value }, &[y])?]);
    }
    let fill = cx.constant(value);
    let fill = cx.cast(fill, dtype)?;
    for a in 0..rank {
        let (before, after) = (pads[a], pads[rank + a]);
        y = crop(cx, y, a, before, after)?;
        let (before, after) = (before.max(0) as usize, after.max(0) as usize);
        if before == 0 && after == 0 {
            continue;
        }
        let n = cx.shape(y)[a];
        y = match mode.as_str() {
            "constant" => {
                let mut parts = Vec::new();
                for len in [before, after] {
                    let mut s = cx.shape(y);
                    s[a] = len;
                    TensorType::new(dtype, s.clone()).map_err(|e| e.0)?;
                    parts.push(cx.broadcast(fill, s)?);
                }
                cx.op(Op::Concat { axis: a }, &[parts[0], y, parts[1]])?
            }
            "reflect" | "edge" | "wrap" => {
                if n == 0 || (mode == "reflect" && n == 1) {
                    return Err(format!("{mode} padding of axis {a} needs more than {n} elements"));
                }
                let total = n + before + after;
                let mut padded = cx.shape(y);
                padded[a] = total;
                TensorType::new(dtype, padded).map_err(|e| e.0)?;
                table(Some(total), "the padding's positions")?;
                let source: Vec<i64> = (0..total as i64)
                    .map(|p| source_index(&mode, p - before as i64, n as i64))
                    .collect();
                let idx = cx.i64_const(vec![total], source)?;
                cx.op(Op::Gather { axis: a }, &[y, idx])?
            }
            other => {
                return Err(format!(
                    "mode '{other}' is not supported (constant, reflect, edge or wrap)"
                ))
            }
        };
    }
    Ok(vec![y])
}

/// `y` with axis `a` cropped by the negative ones of pads `before` and `after`.
fn crop(cx: &mut Cx, y: NodeId, a: usize, before: i64, after: i64) -> Result<NodeId, String> {
    let n = cx.shape(y)[a] as i64;
    let (cut_b, cut_a) = ((-before).max(0), (-after).max(0));
    if cut_b + cut_a > n {
        return Err(format!(
            "pads {before}, {after} crop more than the {n} elements of axis {a}"
        ));
    }
    cx.slice_axis(y, a, cut_b as usize, (n - cut_b - cut_a) as usize)
}

/// The single element of `t` as an f64 (exactly, for every type but large integers).
fn first_as_f64(t: &Tensor) -> f64 {
    match t.data() {
        Data::F32(v) => f64::from(v[0]),
        Data::F64(v) => v[0],
        Data::I64(v) => v[0] as f64,
        Data::Bool(v) => f64::from(u8::from(v[0])),
    }
}

/// The input position that padded position `p` (relative to the first input element) copies,
/// for an axis of `n` elements: mirrored without repeating the edge (`reflect`), clamped
/// (`edge`) or periodic (`wrap`), as numpy's `pad` defines them.
fn source_index(mode: &str, p: i64, n: i64) -> i64 {
    match mode {
        "edge" => p.clamp(0, n - 1),
        "wrap" => p.rem_euclid(n),
        _ => {
            let period = 2 * (n - 1);
            let q = p.rem_euclid(period);
            if q < n {
                q
            } else {
                period - q
            }
        }
    }
}
