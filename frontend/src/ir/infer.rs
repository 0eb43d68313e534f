//! Type inference: the result type of a primitive op from its operand types.
//!
//! This is the single definition of what operand types each op accepts; the importer calls it
//! when it creates a node and the verifier calls it again on every node.

use super::{
    types::checked_numel, BinaryOp, ConvAttrs, DType, Op, PoolAttrs, ShapeDisplay, ShapeError, TensorType, UnaryOp,
};

/// Result type of `op` applied to operands of types `inputs`.
pub fn infer(op: &Op, inputs: &[&TensorType]) -> Result<TensorType, ShapeError> {
    if let Some(n) = op.arity() {
        if inputs.len() != n {
            return err(format!("{} takes {n} operands, got {}", op.name(), inputs.len()));
        }
    } else if inputs.is_empty() {
        return err(format!("{} takes at least one operand", op.name()));
    }
    match op {
        Op::Input => err("input nodes carry their own type"),
        Op::Const(t) => Ok(t.ty()),
        Op::Unary(u) => unary(*u, inputs[0]),
        Op::Binary(b) => binary(*b, inputs[0], inputs[1]),
        Op::Select => {
            if inputs[0].dtype != DType::Bool {
                return err(format!("select condition must be bool, got {}", inputs[0]));
            }
            same_dtype(inputs[1], inputs[2])?;
            let s = broadcast_shapes(&inputs[0].shape, &inputs[1].shape)?;
            let s = broadcast_shapes(&s, &inputs[2].shape)?;
            TensorType::new(inputs[1].dtype, s)
        }
        Op::Cast { to } => Ok(TensorType {
            dtype: *to,
            shape: inputs[0].shape.clone(),
        }),
        Op::MatMul => matmul(inputs[0], inputs[1]),
        Op::Conv(c) => conv(c, inputs[0], inputs[1]),
        Op::ConvTranspose {
            conv: c,
            output_padding,
        } => conv_transpose(c, output_padding, inputs[0], inputs[1]),
        Op::Pool(p) => pool(p, inputs[0]),
        Op::Reduce { axes, .. } => {
            let x = inputs[0];
            require_numeric(x)?;
            let mut shape = x.shape.clone();
            let mut seen = vec![false; x.rank()];
            for &a in axes {
                if a >= x.rank() || seen[a] {
                    return err(format!("reduce axes {axes:?} invalid for {x}"));
                }
                seen[a] = true;
                shape[a] = 1;
            }
            Ok(TensorType { dtype: x.dtype, shape })
        }
        Op::Reshape { shape } => {
            let n = checked_numel(shape)?;
            if n != inputs[0].numel() {
                return err(format!("cannot reshape {} to {}", inputs[0], ShapeDisplay(shape)));
            }
            Ok(TensorType {
                dtype: inputs[0].dtype,
                shape: shape.clone(),
            })
        }
        Op::Broadcast { shape } => {
            let b = broadcast_shapes(&inputs[0].shape, shape)?;
            if &b != shape {
                return err(format!("cannot broadcast {} to {}", inputs[0], ShapeDisplay(shape)));
            }
            TensorType::new(inputs[0].dtype, b)
        }
        Op::Transpose { perm } => {
            let x = inputs[0];
            let mut seen = vec![false; x.rank()];
            if perm.len() != x.rank()
                || perm
                    .iter()
                    .any(|&p| p >= x.rank() || std::mem::replace(&mut seen[p], true))
            {
                return err(format!("permutation {perm:?} invalid for {x}"));
            }
            Ok(TensorType {
                dtype: x.dtype,
                shape: perm.iter().map(|&p| x.shape[p]).collect(),
            })
        }
        Op::Slice { starts, steps, sizes } => {
            let x = inputs[0];
            if starts.len() != x.rank() || steps.len() != x.rank() || sizes.len() != x.rank() {
                return err(format!("slice needs one start, step and size per axis of {x}"));
            }
            for i in 0..x.rank() {
                let (start, step, size, dim) = (
                    starts[i] as i128,
                    steps[i] as i128,
                    sizes[i] as i128,
                    x.shape[i] as i128,
                );
                let last = start + (size - 1) * step;
                let ok = step != 0 && (size == 0 || (start < dim && last >= 0 && last < dim));
                if !ok {
                    return err(format!(
                        "slice start {start} step {step} size {size} out of bounds for axis {i} of {x}"
                    ));
                }
            }
            Ok(TensorType {
                dtype: x.dtype,
                shape: sizes.clone(),
            })
        }
        Op::Pad { pads, value } => {
            let x = inputs[0];
            if pads.len() != 2 * x.rank() {
                return err(format!("pad needs a begin and an end per axis of {x}, got {pads:?}"));
            }
            if !exact_in(*value, x.dtype) {
                return err(format!("pad value {value:?} is not exact in {}", x.dtype));
            }
            let r = x.rank();
            Ok(TensorType {
                dtype: x.dtype,
                shape: (0..r).map(|i| x.shape[i] + pads[i] + pads[r + i]).collect(),
            })
        }
        Op::Concat { axis } => {
            let first = inputs[0];
            if *axis >= first.rank() {
                return err(format!("concat axis {axis} out of range for {first}"));
            }
            let mut shape = first.shape.clone();
            shape[*axis] = 0;
            for t in inputs {
                same_dtype(first, t)?;
                let compatible =
                    t.rank() == first.rank() && (0..t.rank()).all(|i| i == *axis || t.shape[i] == first.shape[i]);
                if !compatible {
                    return err(format!("cannot concatenate {t} with {first} along axis {axis}"));
                }
                shape[*axis] += t.shape[*axis];
            }
            TensorType::new(first.dtype, shape)
        }
        Op::Gather { axis } => {
            let (data, idx) = (inputs[0], inputs[1]);
            if *axis >= data.rank() {
                return err(format!("gather axis {axis} out of range for {data}"));
            }
            if idx.dtype != DType::I64 {
                return err(format!("gather indices must be i64, got {idx}"));
            }
            let mut shape = data.shape[..*axis].to_vec();
            shape.extend_from_slice(&idx.shape);
            shape.extend_from_slice(&data.shape[axis + 1..]);
            TensorType::new(data.dtype, shape)
        }
    }
}

/// numpy broadcasting of two shapes (aligned at the innermost dimension).
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Result<Vec<usize>, ShapeError> {
    let rank = a.len().max(b.len());
    let mut out = vec![0; rank];
    for i in 0..rank {
        let da = if i + a.len() >= rank { a[i + a.len() - rank] } else { 1 };
        let db = if i + b.len() >= rank { b[i + b.len() - rank] } else { 1 };
        out[i] = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => {
                return err(format!(
                    "shapes {} and {} do not broadcast",
                    ShapeDisplay(a),
                    ShapeDisplay(b)
                ))
            }
        };
    }
    checked_numel(&out)?;
    Ok(out)
}

/// Whether `v` converts to `dtype` and back unchanged (NaN counts as exact in floats).
pub fn exact_in(v: f64, dtype: DType) -> bool {
    match dtype {
        DType::F64 => true,
        DType::F32 => v.is_nan() || f64::from(v as f32) == v,
        DType::I64 => v.fract() == 0.0 && v.abs() <= (1u64 << 53) as f64,
        DType::Bool => v == 0.0 || v == 1.0,
    }
}

fn err<T>(msg: impl Into<String>) -> Result<T, ShapeError> {
    Err(ShapeError::new(msg))
}

fn same_dtype(a: &TensorType, b: &TensorType) -> Result<(), ShapeError> {
    if a.dtype != b.dtype {
        return err(format!("operand types differ: {a} and {b}"));
    }
    Ok(())
}

fn require_numeric(t: &TensorType) -> Result<(), ShapeError> {
    if t.dtype == DType::Bool {
        return err(format!("expected a numeric tensor, got {t}"));
    }
    Ok(())
}

fn require_float(t: &TensorType) -> Result<(), ShapeError> {
    if !t.dtype.is_float() {
        return err(format!("expected a floating-point tensor, got {t}"));
    }
    Ok(())
}

fn unary(u: UnaryOp, x: &TensorType) -> Result<TensorType, ShapeError> {
    match u {
        UnaryOp::Not => {
            if x.dtype != DType::Bool {
                return err(format!("not takes a bool tensor, got {x}"));
            }
        }
        UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Sign | UnaryOp::Relu => require_numeric(x)?,
        _ => require_float(x)?,
    }
    Ok(x.clone())
}

fn binary(b: BinaryOp, x: &TensorType, y: &TensorType) -> Result<TensorType, ShapeError> {
    same_dtype(x, y)?;
    if b != BinaryOp::Equal {
        require_numeric(x)?;
    }
    let shape = broadcast_shapes(&x.shape, &y.shape)?;
    let dtype = if b.is_comparison() { DType::Bool } else { x.dtype };
    Ok(TensorType { dtype, shape })
}

fn matmul(a: &TensorType, b: &TensorType) -> Result<TensorType, ShapeError> {
    same_dtype(a, b)?;
    require_numeric(a)?;
    let r = a.rank();
    let ok = r >= 2 && b.rank() == r && a.shape[..r - 2] == b.shape[..r - 2] && a.shape[r - 1] == b.shape[r - 2];
    if !ok {
        return err(format!("matmul operands {a} and {b} do not match"));
    }
    let mut shape = a.shape.clone();
    shape[r - 1] = b.shape[r - 1];
    TensorType::new(a.dtype, shape)
}

fn require_nonempty_spatial(x: &TensorType) -> Result<(), ShapeError> {
    if x.shape[2..].contains(&0) {
        return err(format!("spatial dimensions of {x} must be non-empty"));
    }
    Ok(())
}

/// Checks the attribute vector lengths against the number of spatial dimensions.
fn check_window(
    what: &str,
    spatial: usize,
    strides: &[usize],
    dilations: &[usize],
    pads: &[usize],
) -> Result<(), ShapeError> {
    if strides.len() != spatial || dilations.len() != spatial || pads.len() != 2 * spatial {
        return err(format!("{what} attributes do not match {spatial} spatial dimensions"));
    }
    if strides.contains(&0) || dilations.contains(&0) {
        return err(format!("{what} strides and dilations must be positive"));
    }
    Ok(())
}

fn conv(c: &ConvAttrs, x: &TensorType, w: &TensorType) -> Result<TensorType, ShapeError> {
    same_dtype(x, w)?;
    require_float(x)?;
    if x.rank() < 3 || w.rank() != x.rank() {
        return err(format!(
            "conv operands {x} and {w} must be [N,C,spatial..] and [M,C/groups,kernel..]"
        ));
    }
    let spatial = x.rank() - 2;
    require_nonempty_spatial(x)?;
    check_window("conv", spatial, &c.strides, &c.dilations, &c.pads)?;
    let (cin, m) = (x.shape[1], w.shape[0]);
    if c.groups == 0 || cin % c.groups != 0 || m % c.groups != 0 || w.shape[1] * c.groups != cin {
        return err(format!(
            "conv with {} groups: input {x} and weight {w} disagree",
            c.groups
        ));
    }
    let mut shape = vec![x.shape[0], m];
    for i in 0..spatial {
        let padded = x.shape[2 + i] + c.pads[i] + c.pads[spatial + i];
        let window = c.dilations[i] * (w.shape[2 + i].max(1) - 1) + 1;
        if w.shape[2 + i] == 0 || padded < window {
            return err(format!("conv kernel {w} larger than padded input {x}"));
        }
        shape.push((padded - window) / c.strides[i] + 1);
    }
    TensorType::new(x.dtype, shape)
}

fn conv_transpose(
    c: &ConvAttrs,
    output_padding: &[usize],
    x: &TensorType,
    w: &TensorType,
) -> Result<TensorType, ShapeError> {
    same_dtype(x, w)?;
    require_float(x)?;
    if x.rank() < 3 || w.rank() != x.rank() {
        return err(format!(
            "conv_transpose operands {x} and {w} must be [N,C,spatial..] and [C,M/groups,kernel..]"
        ));
    }
    let spatial = x.rank() - 2;
    check_window("conv_transpose", spatial, &c.strides, &c.dilations, &c.pads)?;
    if output_padding.len() != spatial {
        return err("conv_transpose output_padding must have one entry per spatial dimension");
    }
    if c.groups == 0 || x.shape[1] != w.shape[0] || x.shape[1] % c.groups != 0 {
        return err(format!(
            "conv_transpose with {} groups: input {x} and weight {w} disagree",
            c.groups
        ));
    }
    let mut shape = vec![x.shape[0], w.shape[1] * c.groups];
    #[allow(clippy::needless_range_loop)] // i indexes five parallel arrays
    for i in 0..spatial {
        let full = (x.shape[2 + i] as i128 - 1) * c.strides[i] as i128
            + c.dilations[i] as i128 * (w.shape[2 + i] as i128 - 1)
            + output_padding[i] as i128
            + 1;
        let out = full - c.pads[i] as i128 - c.pads[spatial + i] as i128;
        if x.shape[2 + i] == 0 || w.shape[2 + i] == 0 || out <= 0 {
            return err(format!("conv_transpose of {x} with {w} has an empty output"));
        }
        shape.push(out as usize);
    }
    TensorType::new(x.dtype, shape)
}

/// Output extent of one pooled dimension (see [`PoolAttrs`] for the ceil-mode rule).
pub fn pool_extent(
    input: usize,
    kernel: usize,
    stride: usize,
    dilation: usize,
    pad_begin: usize,
    pad_end: usize,
    ceil_mode: bool,
) -> Option<usize> {
    let padded = input + pad_begin + pad_end;
    let window = dilation * (kernel.checked_sub(1)?) + 1;
    if padded < window {
        return None;
    }
    let span = padded - window;
    let mut out = if ceil_mode {
        span.div_ceil(stride) + 1
    } else {
        span / stride + 1
    };
    if ceil_mode && (out - 1) * stride >= input + pad_begin {
        out -= 1;
    }
    Some(out)
}

fn pool(p: &PoolAttrs, x: &TensorType) -> Result<TensorType, ShapeError> {
    require_float(x)?;
    if x.rank() < 3 {
        return err(format!("pooling input {x} must be [N,C,spatial..]"));
    }
    let spatial = x.rank() - 2;
    require_nonempty_spatial(x)?;
    check_window("pool", spatial, &p.strides, &p.dilations, &p.pads)?;
    if p.kernel.len() != spatial {
        return err("pool kernel must have one entry per spatial dimension");
    }
    checked_numel(&p.kernel)?;
    let mut shape = x.shape[..2].to_vec();
    for i in 0..spatial {
        let o = pool_extent(
            x.shape[2 + i],
            p.kernel[i],
            p.strides[i],
            p.dilations[i],
            p.pads[i],
            p.pads[spatial + i],
            p.ceil_mode,
        )
        .ok_or_else(|| ShapeError::new(format!("pool window {:?} larger than padded input {x}", p.kernel)))?;
        shape.push(o);
    }
    TensorType::new(x.dtype, shape)
}
