//! Matrix products, convolutions and pooling.

use swflow_frontend::ir::{ConvAttrs, PoolAttrs, PoolKind, ReduceKind, Tensor, TensorType};

use super::elementwise::{fill, reduce_init};
use super::{load_padded, par, red, target, vars, Lowering, NodeCx};
use crate::loops::{Affine, Expr, Reduction, Scalar, TensorId};
use swflow_frontend::ir::BinaryOp;

/// `out[b.., m, n] sum= a[b.., m, k] * w[b.., k, n]`.
pub(super) fn matmul(cx: &mut Lowering, n: &NodeCx) -> Result<(), String> {
    let out = n.node().ty.shape.clone();
    let r = out.len();
    let k = n.input_ty(0).shape[r - 1];
    let mut loops: Vec<_> = (0..r - 2).map(|i| par(format!("b{i}"), out[i])).collect();
    loops.extend([par("m", out[r - 2]), par("n", out[r - 1]), red("k", k)]);
    let (bm, bn, bk) = (r - 2, r - 1, r);
    let batch: Vec<Affine> = vars(r - 2);
    let a_index = [batch.clone(), vec![Affine::var(bm), Affine::var(bk)]].concat();
    let w_index = [batch, vec![Affine::var(bk), Affine::var(bn)]].concat();
    let value = Expr::binary(BinaryOp::Mul, Expr::load(1, a_index), Expr::load(2, w_index));
    let (a, w) = (cx.input(n, 0), cx.input(n, 1));
    let init = reduce_init(ReduceKind::Sum, n.node().ty.dtype);
    cx.kernel(
        n,
        "",
        loops,
        vec![n.out, a, w],
        target(vars(r)),
        value,
        Some(Reduction {
            kind: ReduceKind::Sum,
            init,
        }),
    )?;
    Ok(())
}

/// Places `x` (`[N, C, S..]`) into a new tensor whose spatial dimension `i` has
/// `front[i]` elements of `value` before the data, `back[i]` after, and `stride[i] - 1` between
/// consecutive elements; negative `front`/`back` crop. (Padding alone needs no copy: readers
/// guard their loads; spreading does, as its positions are not affine in the reader's loops.)
fn spread(
    cx: &mut Lowering,
    n: &NodeCx,
    x: TensorId,
    front: &[i64],
    back: &[i64],
    stride: &[usize],
    value: Scalar,
) -> Result<TensorId, String> {
    let suffix = "spread";
    let ty = cx.p.tensor(x).ty.clone();
    let sp = &ty.shape[2..];
    let mut shape = ty.shape[..2].to_vec();
    for i in 0..sp.len() {
        let len = (sp[i] as i64 - 1) * stride[i] as i64 + 1 + front[i] + back[i];
        shape.push(usize::try_from(len).map_err(|_| "padding crops away the whole input")?);
    }
    let padded = cx.temp(n, suffix, TensorType::new(ty.dtype, shape.clone()).map_err(|e| e.0)?);
    fill(cx, n, &format!("{suffix}.fill"), padded, value)?;
    // Input positions i whose place front + i*stride falls inside the padded extent.
    let mut loops = vec![par("n", ty.shape[0]), par("c", ty.shape[1])];
    let mut src = vars(2);
    let mut dst = vars(2);
    for i in 0..sp.len() {
        let (s, f, len) = (stride[i] as i64, front[i], shape[2 + i] as i64);
        let lo = if f < 0 { (-f + s - 1) / s } else { 0 };
        let hi = (sp[i] as i64 - 1).min((len - 1 - f).div_euclid(s));
        if hi < lo {
            return Ok(padded);
        }
        loops.push(par(format!("s{i}"), (hi - lo + 1) as usize));
        src.push(Affine::var(2 + i).add_offset(lo));
        dst.push(Affine::constant(f + lo * s).plus(2 + i, s));
    }
    cx.kernel(n, suffix, loops, vec![padded, x], target(dst), Expr::load(1, src), None)?;
    Ok(padded)
}

/// `out[n, g*Mg + m, o..] sum= x[n, g*Cg + c, o*s + k*d - front] * w[g*Mg + m, c, k..]`, where
/// `x` reads zero outside itself (its padding).
#[allow(clippy::too_many_arguments)]
fn conv_kernel(
    cx: &mut Lowering,
    n: &NodeCx,
    x: TensorId,
    front: &[i64],
    w: TensorId,
    strides: &[usize],
    dilations: &[usize],
    groups: usize,
) -> Result<(), String> {
    let out = n.node().ty.shape.clone();
    let ws = cx.p.tensor(w).ty.shape.clone();
    let nd = out.len() - 2;
    let (mg, cg) = (out[1] / groups, ws[1]);
    let mut loops = vec![par("n", out[0])];
    let g = (groups > 1).then(|| {
        loops.push(par("g", groups));
        loops.len() - 1
    });
    loops.push(par("m", mg));
    let m = loops.len() - 1;
    let o0 = loops.len();
    loops.extend((0..nd).map(|i| par(format!("o{i}"), out[2 + i])));
    loops.push(red("c", cg));
    let c = loops.len() - 1;
    let k0 = loops.len();
    loops.extend((0..nd).map(|i| red(format!("k{i}"), ws[2 + i])));
    let grouped = |base: usize, per: usize| match g {
        Some(g) => Affine::var(base).plus(g, per as i64),
        None => Affine::var(base),
    };
    let out_channel = grouped(m, mg);
    let mut out_index = vec![Affine::var(0), out_channel.clone()];
    out_index.extend((0..nd).map(|i| Affine::var(o0 + i)));
    let mut x_index = vec![Affine::var(0), grouped(c, cg)];
    x_index.extend((0..nd).map(|i| {
        Affine::constant(-front[i])
            .plus(o0 + i, strides[i] as i64)
            .plus(k0 + i, dilations[i] as i64)
    }));
    let mut w_index = vec![out_channel, Affine::var(c)];
    w_index.extend((0..nd).map(|i| Affine::var(k0 + i)));
    let x_ty = cx.p.tensor(x).ty.clone();
    let zero = Scalar::of(x_ty.dtype, 0.0);
    let xs = load_padded(1, x_index, &loops, &x_ty.shape, zero);
    let value = Expr::binary(BinaryOp::Mul, xs, Expr::load(2, w_index));
    let init = reduce_init(ReduceKind::Sum, n.node().ty.dtype);
    cx.kernel(
        n,
        "",
        loops,
        vec![n.out, x, w],
        target(out_index),
        value,
        Some(Reduction {
            kind: ReduceKind::Sum,
            init,
        }),
    )
}

fn split_pads(pads: &[usize]) -> (Vec<i64>, Vec<i64>) {
    let nd = pads.len() / 2;
    (
        pads[..nd].iter().map(|&p| p as i64).collect(),
        pads[nd..].iter().map(|&p| p as i64).collect(),
    )
}

pub(super) fn conv(cx: &mut Lowering, n: &NodeCx, c: &ConvAttrs) -> Result<(), String> {
    let (x, w) = (cx.input(n, 0), cx.input(n, 1));
    let (front, _) = split_pads(&c.pads);
    conv_kernel(cx, n, x, &front, w, &c.strides, &c.dilations, c.groups)
}

/// A transposed convolution is a stride-1 convolution of the input spread out by the stride
/// (zeros between elements) and padded by `d*(K-1) - pad` on each side (plus output padding
/// at the end), with the weight flipped along every kernel axis and its channel roles swapped.
pub(super) fn conv_transpose(
    cx: &mut Lowering,
    n: &NodeCx,
    c: &ConvAttrs,
    output_padding: &[usize],
) -> Result<(), String> {
    let (x, w) = (cx.input(n, 0), cx.input(n, 1));
    let wt = cx.p.tensor(w).ty.clone();
    let out = n.node().ty.shape.clone();
    let nd = out.len() - 2;
    let groups = c.groups;
    let (cg, mg) = (wt.shape[0] / groups, wt.shape[1]);
    // w2[g*Mg + m, ci, k] = w[g*Cg + ci, m, K-1-k]
    let mut shape = vec![out[1], cg];
    shape.extend_from_slice(&wt.shape[2..]);
    let w2 = cx.temp(n, "weight", TensorType::new(wt.dtype, shape).map_err(|e| e.0)?);
    let mut loops = Vec::new();
    let g = (groups > 1).then(|| {
        loops.push(par("g", groups));
        0
    });
    let m = loops.len();
    loops.extend([par("m", mg), par("ci", cg)]);
    let ci = m + 1;
    loops.extend((0..nd).map(|i| par(format!("k{i}"), wt.shape[2 + i])));
    let grouped = |base: usize, per: usize| match g {
        Some(g) => Affine::var(base).plus(g, per as i64),
        None => Affine::var(base),
    };
    let mut dst = vec![grouped(m, mg), Affine::var(ci)];
    dst.extend((0..nd).map(|i| Affine::var(ci + 1 + i)));
    let mut src = vec![grouped(ci, cg), Affine::var(m)];
    src.extend((0..nd).map(|i| Affine::constant(wt.shape[2 + i] as i64 - 1).plus(ci + 1 + i, -1)));
    cx.kernel(n, "weight", loops, vec![w2, w], target(dst), Expr::load(1, src), None)?;

    let (pb, pe) = split_pads(&c.pads);
    let span = |i: usize| (c.dilations[i] * (wt.shape[2 + i] - 1)) as i64;
    let front: Vec<i64> = (0..nd).map(|i| span(i) - pb[i]).collect();
    let back: Vec<i64> = (0..nd).map(|i| span(i) - pe[i] + output_padding[i] as i64).collect();
    let ones = vec![1; nd];
    if c.strides.iter().all(|&s| s == 1) {
        return conv_kernel(cx, n, x, &front, w2, &ones, &c.dilations, groups);
    }
    let zero = Scalar::of(n.node().ty.dtype, 0.0);
    let xd = spread(cx, n, x, &front, &back, &c.strides, zero)?;
    conv_kernel(cx, n, xd, &vec![0; nd], w2, &ones, &c.dilations, groups)
}

/// Windowed max or sum over the input, whose padding reads as a value that never wins (the
/// lowest value for max, zero for sums), then for averages a division by the number of
/// counted positions.
pub(super) fn pool(cx: &mut Lowering, n: &NodeCx, p: &PoolAttrs) -> Result<(), String> {
    let x = cx.input(n, 0);
    let in_shape = n.input_ty(0).shape.clone();
    let out = n.node().ty.shape.clone();
    let dtype = n.node().ty.dtype;
    let nd = out.len() - 2;
    let (pb, _) = split_pads(&p.pads);
    let (kind, pad_value) = match p.kind {
        PoolKind::Max => (ReduceKind::Max, f64::NEG_INFINITY),
        PoolKind::Avg { .. } => (ReduceKind::Sum, 0.0),
    };
    let mut loops = vec![par("n", out[0]), par("c", out[1])];
    loops.extend((0..nd).map(|i| par(format!("o{i}"), out[2 + i])));
    loops.extend((0..nd).map(|i| red(format!("k{i}"), p.kernel[i])));
    let mut x_index = vars(2);
    x_index.extend((0..nd).map(|i| {
        Affine::constant(-pb[i])
            .plus(2 + i, p.strides[i] as i64)
            .plus(2 + nd + i, p.dilations[i] as i64)
    }));
    let xs = load_padded(1, x_index, &loops, &in_shape, Scalar::of(dtype, pad_value));
    let reduction = Some(Reduction {
        kind,
        init: reduce_init(kind, dtype),
    });
    let PoolKind::Avg { .. } = p.kind else {
        cx.kernel(n, "", loops, vec![n.out, x], target(vars(2 + nd)), xs, reduction)?;
        return Ok(());
    };
    let sum = cx.temp(n, "sum", n.node().ty.clone());
    cx.kernel(n, "sum", loops, vec![sum, x], target(vars(2 + nd)), xs, reduction)?;
    let counts = p.average_divisors(&in_shape[2..], &out[2..]);
    let (divisor, operands) = if counts.iter().all(|&c| c == counts[0]) {
        (Expr::Const(Scalar::of(dtype, counts[0] as f64)), vec![n.out, sum])
    } else {
        let t = match dtype {
            swflow_frontend::ir::DType::F64 => Tensor::new(
                out[2..].to_vec(),
                swflow_frontend::ir::Data::F64(counts.iter().map(|&c| c as f64).collect()),
            ),
            _ => Tensor::from_f32(out[2..].to_vec(), counts.iter().map(|&c| c as f32).collect()),
        }
        .map_err(|e| e.0)?;
        let count = cx.constant(n, "count", t);
        (
            Expr::load(2, (2..2 + nd).map(Affine::var).collect()),
            vec![n.out, sum, count],
        )
    };
    let value = Expr::binary(BinaryOp::Div, Expr::load(1, vars(2 + nd)), divisor);
    cx.kernel(
        n,
        "",
        (0..2 + nd).map(|i| par(format!("d{i}"), out[i])).collect(),
        operands,
        target(vars(2 + nd)),
        value,
        None,
    )?;
    Ok(())
}
