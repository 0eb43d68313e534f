//! Neural-network ONNX ops: convolutions, pooling, normalizations, softmax.

use super::{axis, Cx};
use crate::ir::{BinaryOp, ConvAttrs, NodeId, Op, PoolAttrs, PoolKind, ReduceKind, UnaryOp};

/// Explicit begin/end pads from `auto_pad` and `pads`.
///
/// `SAME_UPPER`/`SAME_LOWER` choose the padding that makes the output extent
/// `ceil(input / stride)`, putting the odd element at the end or the beginning.
fn resolve_pads(
    cx: &Cx,
    input: &[usize],
    kernel: &[usize],
    strides: &[usize],
    dilations: &[usize],
) -> Result<Vec<usize>, String> {
    let nd = input.len();
    match cx.attrs.string("auto_pad", "NOTSET")?.as_str() {
        "NOTSET" => cx.attrs.spatial("pads", 2 * nd, 0),
        "VALID" => Ok(vec![0; 2 * nd]),
        mode @ ("SAME_UPPER" | "SAME_LOWER") => {
            let mut pads = vec![0; 2 * nd];
            for i in 0..nd {
                let out = input[i].div_ceil(strides[i]);
                let window = dilations[i] * (kernel[i].max(1) - 1) + 1;
                let total = ((out.max(1) - 1) * strides[i] + window).saturating_sub(input[i]);
                let small = total / 2;
                (pads[i], pads[nd + i]) = if mode == "SAME_UPPER" {
                    (small, total - small)
                } else {
                    (total - small, small)
                };
            }
            Ok(pads)
        }
        other => Err(format!("auto_pad='{other}' is not supported")),
    }
}

/// Kernel extents: the `kernel_shape` attribute if present (checked against the weight),
/// else the weight's spatial dimensions.
fn kernel_shape(cx: &Cx, weight_spatial: &[usize]) -> Result<Vec<usize>, String> {
    let k = cx.attrs.spatial("kernel_shape", weight_spatial.len(), 0)?;
    if cx.attrs.has("kernel_shape") && k != weight_spatial {
        return Err(format!(
            "kernel_shape {k:?} disagrees with the weight's kernel {weight_spatial:?}"
        ));
    }
    Ok(weight_spatial.to_vec())
}

/// `y + b` with `b[M]` broadcast along dimension 1 of `y`.
fn add_channel_bias(cx: &mut Cx, y: NodeId, bias: Option<NodeId>) -> Result<NodeId, String> {
    let Some(b) = bias else { return Ok(y) };
    let m = cx.shape(y)[1];
    if cx.shape(b) != [m] {
        return Err(format!("bias {} must have {m} elements", cx.ty(b)));
    }
    let mut shape = vec![1; cx.rank(y)];
    shape[1] = m;
    let b = cx.reshape(b, shape)?;
    cx.binary(BinaryOp::Add, y, b)
}

fn spatial_input(cx: &Cx, x: NodeId) -> Result<Vec<usize>, String> {
    let s = cx.shape(x);
    if s.len() < 3 {
        return Err(format!(
            "input {} must have a batch, a channel and at least one spatial dimension",
            cx.ty(x)
        ));
    }
    Ok(s[2..].to_vec())
}

/// Operands and window attributes common to Conv and ConvTranspose.
struct Window {
    x: NodeId,
    w: NodeId,
    /// Spatial extents of the input.
    input: Vec<usize>,
    kernel: Vec<usize>,
    strides: Vec<usize>,
    dilations: Vec<usize>,
    groups: usize,
}

fn conv_window(cx: &Cx) -> Result<Window, String> {
    let (x, w) = (cx.input(0)?, cx.input(1)?);
    let input = spatial_input(cx, x)?;
    let nd = input.len();
    if cx.rank(w) != nd + 2 {
        return Err(format!("weight {} does not match input {}", cx.ty(w), cx.ty(x)));
    }
    Ok(Window {
        x,
        w,
        kernel: kernel_shape(cx, &cx.shape(w)[2..])?,
        strides: cx.attrs.spatial("strides", nd, 1)?,
        dilations: cx.attrs.spatial("dilations", nd, 1)?,
        groups: usize::try_from(cx.attrs.int("group", 1)?).map_err(|_| "group must be positive")?,
        input,
    })
}

pub(super) fn conv(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let Window {
        x,
        w,
        input,
        kernel,
        strides,
        dilations,
        groups,
    } = conv_window(cx)?;
    let pads = resolve_pads(cx, &input, &kernel, &strides, &dilations)?;
    let y = cx.op(
        Op::Conv(ConvAttrs {
            strides,
            dilations,
            pads,
            groups,
        }),
        &[x, w],
    )?;
    let bias = cx.opt_input(2)?;
    Ok(vec![add_channel_bias(cx, y, bias)?])
}

pub(super) fn conv_transpose(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let Window {
        x,
        w,
        input,
        kernel,
        strides,
        dilations,
        groups,
    } = conv_window(cx)?;
    let nd = input.len();
    let mut output_padding = cx.attrs.spatial("output_padding", nd, 0)?;
    let auto_pad = cx.attrs.string("auto_pad", "NOTSET")?;
    // The output extent is explicit (output_shape) or, with SAME padding, input * stride.
    let target: Option<Vec<usize>> = match cx.attrs.ints("output_shape")? {
        Some(s) => {
            let s = if s.len() == nd + 2 { s[2..].to_vec() } else { s };
            if s.len() != nd || s.iter().any(|&v| v <= 0) {
                return Err(format!("output_shape {s:?} must give {nd} positive extents"));
            }
            Some(s.iter().map(|&v| v as usize).collect())
        }
        None if auto_pad.starts_with("SAME") => Some(input.iter().zip(&strides).map(|(i, s)| i * s).collect()),
        None => None,
    };
    let pads = match (&target, auto_pad.as_str()) {
        (Some(target), _) => {
            let mut pads = vec![0; 2 * nd];
            for i in 0..nd {
                let full = strides[i] * (input[i] - 1) + output_padding[i] + dilations[i] * (kernel[i] - 1) + 1;
                if target[i] > full {
                    // A larger requested extent than the stride pattern covers: extra zeros at the end.
                    output_padding[i] += target[i] - full;
                    continue;
                }
                let total = full - target[i];
                let (begin, end) = if auto_pad == "SAME_UPPER" {
                    (total / 2, total - total / 2)
                } else {
                    (total - total / 2, total / 2)
                };
                (pads[i], pads[nd + i]) = (begin, end);
            }
            pads
        }
        (None, "NOTSET") => cx.attrs.spatial("pads", 2 * nd, 0)?,
        (None, "VALID") => vec![0; 2 * nd],
        (None, other) => return Err(format!("auto_pad='{other}' is not supported")),
    };
    let attrs = ConvAttrs {
        strides,
        dilations,
        pads,
        groups,
    };
    let y = cx.op(
        Op::ConvTranspose {
            conv: attrs,
            output_padding,
        },
        &[x, w],
    )?;
    let bias = cx.opt_input(2)?;
    Ok(vec![add_channel_bias(cx, y, bias)?])
}

pub(super) fn pool(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let x = cx.input(0)?;
    let input = spatial_input(cx, x)?;
    let nd = input.len();
    let kernel = cx.attrs.spatial("kernel_shape", nd, 0)?;
    if !cx.attrs.has("kernel_shape") || kernel.contains(&0) {
        return Err("attribute 'kernel_shape' is required and must be positive".into());
    }
    let strides = cx.attrs.spatial("strides", nd, 1)?;
    let dilations = cx.attrs.spatial("dilations", nd, 1)?;
    let pads = resolve_pads(cx, &input, &kernel, &strides, &dilations)?;
    let ceil_mode = cx.attrs.flag("ceil_mode", false)?;
    let kind = if cx.op_type() == "MaxPool" {
        if cx.attrs.int("storage_order", 0)? != 0 && cx.node.output.len() > 1 {
            return Err("storage_order is only meaningful for the indices output, which is not supported".into());
        }
        PoolKind::Max
    } else {
        PoolKind::Avg {
            count_include_pad: cx.attrs.flag("count_include_pad", false)?,
        }
    };
    Ok(vec![cx.op(
        Op::Pool(PoolAttrs {
            kind,
            kernel,
            strides,
            dilations,
            pads,
            ceil_mode,
        }),
        &[x],
    )?])
}

pub(super) fn global_pool(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let x = cx.input(0)?;
    let nd = spatial_input(cx, x)?.len();
    let axes: Vec<usize> = (2..2 + nd).collect();
    Ok(vec![if cx.op_type() == "GlobalMaxPool" {
        cx.reduce(ReduceKind::Max, x, axes)?
    } else {
        cx.mean(x, axes)?
    }])
}

/// `(x - mean) / sqrt(var + eps) * scale + bias` per channel (dimension 1). Inference mode
/// uses the given statistics; training mode (opset 14+) uses the batch's and also returns the
/// updated running statistics.
pub(super) fn batch_norm(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let x = cx.input(0)?;
    let [scale, bias, mean, var] = [cx.input(1)?, cx.input(2)?, cx.input(3)?, cx.input(4)?];
    let eps = cx.attrs.float("epsilon", 1e-5)? as f64;
    if cx.opset < 9 && cx.attrs.int("spatial", 1)? != 1 {
        return Err("spatial=0 is not supported".into());
    }
    let rank = cx.rank(x);
    if rank < 2 {
        return Err(format!("input {} needs a channel dimension", cx.ty(x)));
    }
    let c = cx.shape(x)[1];
    let mut param_shape = vec![1; rank];
    param_shape[1] = c;
    let mut params = Vec::new();
    for p in [scale, bias, mean, var] {
        if cx.shape(p) != [c] {
            return Err(format!("parameter {} must have {c} elements", cx.ty(p)));
        }
        params.push(cx.reshape(p, param_shape.clone())?);
    }
    let (scale, bias, mean, var) = (params[0], params[1], params[2], params[3]);
    let training = cx.opset >= 14 && cx.attrs.flag("training_mode", false)?;
    if !training {
        // Folded form: x * s + (bias - mean * s) with s = scale / sqrt(var + eps).
        let v = cx.with_scalar(BinaryOp::Add, var, eps)?;
        let sd = cx.unary(UnaryOp::Sqrt, v)?;
        let s = cx.binary(BinaryOp::Div, scale, sd)?;
        let ms = cx.binary(BinaryOp::Mul, mean, s)?;
        let t = cx.binary(BinaryOp::Sub, bias, ms)?;
        let xs = cx.binary(BinaryOp::Mul, x, s)?;
        return Ok(vec![cx.binary(BinaryOp::Add, xs, t)?]);
    }
    let momentum = cx.attrs.float("momentum", 0.9)? as f64;
    let axes: Vec<usize> = (0..rank).filter(|&a| a != 1).collect();
    let batch_mean = cx.mean(x, axes.clone())?;
    let d = cx.binary(BinaryOp::Sub, x, batch_mean)?;
    let d2 = cx.binary(BinaryOp::Mul, d, d)?;
    let batch_var = cx.mean(d2, axes)?;
    let v = cx.with_scalar(BinaryOp::Add, batch_var, eps)?;
    let sd = cx.unary(UnaryOp::Sqrt, v)?;
    let norm = cx.binary(BinaryOp::Div, d, sd)?;
    let scaled = cx.binary(BinaryOp::Mul, norm, scale)?;
    let y = cx.binary(BinaryOp::Add, scaled, bias)?;
    let mut running = Vec::new();
    for (old, new) in [(mean, batch_mean), (var, batch_var)] {
        let a = cx.with_scalar(BinaryOp::Mul, old, momentum)?;
        let b = cx.with_scalar(BinaryOp::Mul, new, 1.0 - momentum)?;
        let sum = cx.binary(BinaryOp::Add, a, b)?;
        running.push(cx.reshape(sum, vec![c])?);
    }
    Ok(vec![y, running[0], running[1]])
}

/// Normalizes over dimensions `axis..`; also returns the mean and the inverse standard
/// deviation (reduced dimensions kept with extent 1).
pub(super) fn layer_norm(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let x = cx.input(0)?;
    let scale = cx.input(1)?;
    let rank = cx.rank(x);
    let first = axis(cx.attrs.int("axis", -1)?, rank)?;
    let eps = cx.attrs.float("epsilon", 1e-5)? as f64;
    let axes: Vec<usize> = (first..rank).collect();
    let mean = cx.mean(x, axes.clone())?;
    let d = cx.binary(BinaryOp::Sub, x, mean)?;
    let d2 = cx.binary(BinaryOp::Mul, d, d)?;
    let var = cx.mean(d2, axes)?;
    let v = cx.with_scalar(BinaryOp::Add, var, eps)?;
    let sd = cx.unary(UnaryOp::Sqrt, v)?;
    let inv = cx.unary(UnaryOp::Recip, sd)?;
    let norm = cx.binary(BinaryOp::Mul, d, inv)?;
    let mut y = cx.binary(BinaryOp::Mul, norm, scale)?;
    if let Some(b) = cx.opt_input(2)? {
        y = cx.binary(BinaryOp::Add, y, b)?;
    }
    if cx.shape(y) != cx.shape(x) {
        return Err("scale and bias must broadcast to the input's shape".into());
    }
    Ok(vec![y, mean, inv])
}

/// `x / (bias + alpha/size * Σ x²)^beta`, the sum over a window of `size` channels centred
/// on each channel, zeros past the first and the last. `x`, padded with those zeros along the
/// channels (whose squares are the zeros the sum takes), is read in `size` slices shifted one
/// channel apart, each squared and summed in channel order: one kernel reads each channel's
/// window of `x` and computes the squares and their sum, with no pass of its own for the
/// squares and no division by `size` (which an average pool would do before the scaling by
/// `alpha`: `alpha/size` is one constant, as in the operator's definition).
pub(super) fn lrn(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let x = cx.input(0)?;
    let shape = cx.shape(x);
    if shape.len() < 3 {
        return Err(format!("input {} must be [N, C, spatial..]", cx.ty(x)));
    }
    let size = usize::try_from(cx.attrs.int_opt("size")?.ok_or("attribute 'size' is required")?)
        .ok()
        .filter(|&s| s > 0)
        .ok_or("size must be positive")?;
    let alpha = cx.attrs.float("alpha", 1e-4)? as f64;
    let beta = cx.attrs.float("beta", 0.75)? as f64;
    let bias = cx.attrs.float("bias", 1.0)? as f64;
    let rank = shape.len();
    let mut pads = vec![0; 2 * rank];
    pads[1] = (size - 1) / 2;
    pads[rank + 1] = size / 2;
    let padded = match pads.iter().any(|&p| p > 0) {
        true => cx.op(Op::Pad { pads, value: 0.0 }, &[x])?,
        false => x,
    };
    let square = |cx: &mut Cx, k: usize| -> Result<NodeId, String> {
        let tap = cx.slice_axis(padded, 1, k, shape[1])?;
        cx.binary(BinaryOp::Mul, tap, tap)
    };
    let mut sum = square(cx, 0)?;
    for k in 1..size {
        let next = square(cx, k)?;
        sum = cx.binary(BinaryOp::Add, sum, next)?;
    }
    let scaled = cx.with_scalar(BinaryOp::Mul, sum, alpha / size as f64)?;
    let base = cx.with_scalar(BinaryOp::Add, scaled, bias)?;
    // The usual beta of 0.75 by square roots: `x / base^0.75 = x * sqrt(sqrt(base)) / base`
    // costs two square roots and a division where pow costs a library call and a division,
    // and agrees with it to a few ulp where the base is finite and not negative, as a sum of
    // squares scaled and shifted by a non-negative alpha and bias is unless the squares
    // overflow (then pow gives 0 and this NaN).
    if beta == 0.75 && alpha >= 0.0 && bias >= 0.0 {
        let root = cx.unary(UnaryOp::Sqrt, base)?;
        let fourth = cx.unary(UnaryOp::Sqrt, root)?;
        let scaled_x = cx.binary(BinaryOp::Mul, x, fourth)?;
        return Ok(vec![cx.binary(BinaryOp::Div, scaled_x, base)?]);
    }
    let denom = cx.with_scalar(BinaryOp::Pow, base, beta)?;
    Ok(vec![cx.binary(BinaryOp::Div, x, denom)?])
}

/// Softmax and LogSoftmax. Before opset 13 the input is viewed as a matrix
/// `[prod(dims[..axis]), prod(dims[axis..])]` (axis defaults to 1); from 13 on the function
/// applies along one axis (default -1).
pub(super) fn softmax(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let x = cx.input(0)?;
    let shape = cx.shape(x);
    let legacy = cx.opset < 13;
    let a = axis(cx.attrs.int("axis", if legacy { 1 } else { -1 })?, shape.len().max(1))?;
    let (v, ax) = if legacy {
        let rows = shape[..a].iter().product();
        (cx.reshape(x, vec![rows, shape[a..].iter().product()])?, 1)
    } else {
        (x, a)
    };
    let log = cx.op_type() == "LogSoftmax";
    let y = softmax_along(cx, v, ax, log)?;
    Ok(vec![cx.reshape(y, shape)?])
}

/// Softmax of `v` along axis `ax` (its logarithm when `log`), shifted by the maximum so that
/// `exp` cannot overflow.
pub(super) fn softmax_along(cx: &mut Cx, v: NodeId, ax: usize, log: bool) -> Result<NodeId, String> {
    let max = cx.reduce(ReduceKind::Max, v, vec![ax])?;
    let d = cx.binary(BinaryOp::Sub, v, max)?;
    let e = cx.unary(UnaryOp::Exp, d)?;
    let s = cx.reduce(ReduceKind::Sum, e, vec![ax])?;
    if log {
        let l = cx.unary(UnaryOp::Log, s)?;
        cx.binary(BinaryOp::Sub, d, l)
    } else {
        cx.binary(BinaryOp::Div, e, s)
    }
}
