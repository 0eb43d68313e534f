//! Matrix products, convolutions and pooling.

use swflow_frontend::ir::{ConvAttrs, DType, Data, PoolAttrs, PoolKind, ReduceKind, Tensor, TensorType};

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

/// One spatial axis of a convolution-like kernel: output `o` in `0..outputs` is written at
/// `target.0 + target.1*o`; its tap `j` in `0..taps` reads the input at
/// `input.0 + input.1*o + input.2*j` (zero outside the input) and the weight at
/// `weight.0 + weight.1*j`.
#[derive(Clone, Copy, Debug)]
struct ConvAxis {
    outputs: usize,
    taps: usize,
    target: (i64, i64),
    input: (i64, i64, i64),
    weight: (i64, i64),
}

impl ConvAxis {
    /// An axis of a convolution: input `o*stride + k*dilation - front`.
    fn direct(outputs: usize, taps: usize, front: i64, stride: usize, dilation: usize) -> ConvAxis {
        ConvAxis {
            outputs,
            taps,
            target: (0, 1),
            input: (-front, stride as i64, dilation as i64),
            weight: (0, 1),
        }
    }

    /// The outputs `h = stride*q + residue` of an axis of a transposed convolution, and the
    /// taps that reach them. Input `i` at tap `k` reaches `h = i*stride + k*dilation - front`,
    /// so `h` takes exactly the taps with `k*dilation ≡ residue + front (mod stride)`: an
    /// arithmetic sequence `k0 + step*j` (`step = stride / gcd(stride, dilation)`), reading
    /// input `q + (residue + front - k0*dilation)/stride - j*dilation/gcd`. None of the taps
    /// reads a zero between spread-out inputs.
    fn transposed(outputs: usize, taps: usize, front: i64, stride: usize, dilation: usize, residue: usize) -> ConvAxis {
        let (s, d, r) = (stride as i64, dilation as i64, residue as i64);
        let gcd = gcd(s, d);
        let step = s / gcd;
        let first = (0..step).find(|&k| (k * d - r - front).rem_euclid(s) == 0);
        let taps = match first {
            Some(k0) if (k0 as usize) < taps => (taps - 1 - k0 as usize) / step as usize + 1,
            _ => 0,
        };
        let k0 = first.unwrap_or(0);
        ConvAxis {
            outputs: if residue < outputs {
                (outputs - 1 - residue) / stride + 1
            } else {
                0
            },
            taps,
            target: (r, s),
            input: ((r + front - k0 * d).div_euclid(s), 1, -(d / gcd)),
            weight: (k0, step),
        }
    }
}

fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// How a weight is laid out, with `Cg` input and `Mg` output channels per group: a
/// convolution's `[G*Mg, Cg, K..]`, a transposed convolution's `[G*Cg, Mg, K..]`, or
/// `[K.., G*Mg, Cg]` (taps first), which a transposed convolution's weight is rearranged to
/// when its kernels would read it in runs of one tap (see [`conv_transpose`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    OutIn,
    InOut,
    TapsOutIn,
}

/// How a convolution's product reads the input along its last spatial axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LastAxis {
    /// As the input lies, at `input(o, j)`.
    Direct,
    /// As [`windows`] lays it out, at `[.., j, o]`.
    Windows,
    /// As [`phases`] lays it out, at `[.., p, o + a]` for tap `j = stride*a + p`: the tap loop
    /// becomes two, `a` over `ceil(taps / stride)` and `p` over the stride, and the taps past
    /// the last read the weight's zero padding.
    Phases,
}

/// `out[n, g*Mg + m, target(o)..] sum= x[n, g*Cg + c, input(o, j)..] * w[channels, weight(j)..]`
/// over `c` and the taps `j`, per [`ConvAxis`], with the last axis's input read as `last` says.
#[allow(clippy::too_many_arguments)]
fn conv_kernel(
    cx: &mut Lowering,
    n: &NodeCx,
    suffix: &str,
    x: TensorId,
    w: TensorId,
    layout: Layout,
    groups: usize,
    axes: &[ConvAxis],
    last: LastAxis,
) -> Result<(), String> {
    let out = n.node().ty.shape.clone();
    let ws = cx.p.tensor(w).ty.shape.clone();
    let mg = out[1] / groups;
    let cg = match layout {
        Layout::OutIn => ws[1],
        Layout::InOut => ws[0] / groups,
        Layout::TapsOutIn => ws[ws.len() - 1],
    };
    let mut loops = vec![par("n", out[0])];
    let g = (groups > 1).then(|| {
        loops.push(par("g", groups));
        loops.len() - 1
    });
    loops.push(par("m", mg));
    let m = loops.len() - 1;
    let o0 = loops.len();
    loops.extend(axes.iter().enumerate().map(|(i, a)| par(format!("o{i}"), a.outputs)));
    loops.push(red("c", cg));
    let c = loops.len() - 1;
    // The tap loops, one per axis (`tap[i]` is axis `i`'s); with phases, the last axis's
    // phase loop comes just before its tap loop, so that the innermost loop walks the taps of
    // one phase.
    let (l, stride) = (axes.len() - 1, axes[axes.len() - 1].input.1);
    let mut tap = Vec::with_capacity(axes.len());
    for (i, a) in axes.iter().enumerate() {
        let taps = match last {
            LastAxis::Phases if i == l => {
                loops.push(red(format!("p{i}"), stride as usize));
                a.taps.div_ceil(stride as usize)
            }
            _ => a.taps,
        };
        tap.push(loops.len());
        loops.push(red(format!("k{i}"), taps));
    }
    // The phase loop, where there is one.
    let p = tap[l] - 1;
    let grouped = |base: usize, per: usize| match g {
        Some(g) => Affine::var(base).plus(g, per as i64),
        None => Affine::var(base),
    };
    let out_channel = grouped(m, mg);
    let mut out_index = vec![Affine::var(0), out_channel.clone()];
    out_index.extend(
        axes.iter()
            .enumerate()
            .map(|(i, a)| Affine::constant(a.target.0).plus(o0 + i, a.target.1)),
    );
    let mut x_index = vec![Affine::var(0), grouped(c, cg)];
    let read = if last == LastAxis::Direct { axes.len() } else { l };
    x_index.extend(axes[..read].iter().enumerate().map(|(i, a)| {
        Affine::constant(a.input.0)
            .plus(o0 + i, a.input.1)
            .plus(tap[i], a.input.2)
    }));
    match last {
        LastAxis::Direct => {}
        LastAxis::Windows => x_index.extend([Affine::var(tap[l]), Affine::var(o0 + l)]),
        LastAxis::Phases => x_index.extend([Affine::var(p), Affine::var(o0 + l).plus(tap[l], 1)]),
    }
    let taps = axes.iter().enumerate().map(|(i, a)| match last {
        LastAxis::Phases if i == l => Affine::constant(a.weight.0)
            .plus(tap[i], a.weight.1 * stride)
            .plus(p, a.weight.1),
        _ => Affine::constant(a.weight.0).plus(tap[i], a.weight.1),
    });
    let w_index: Vec<Affine> = match layout {
        Layout::OutIn => [out_channel, Affine::var(c)].into_iter().chain(taps).collect(),
        Layout::InOut => [grouped(c, cg), Affine::var(m)].into_iter().chain(taps).collect(),
        Layout::TapsOutIn => taps.chain([out_channel, Affine::var(c)]).collect(),
    };
    let x_ty = cx.p.tensor(x).ty.clone();
    let zero = Scalar::of(x_ty.dtype, 0.0);
    let xs = load_padded(1, x_index, &loops, &x_ty.shape, zero);
    let w_ty = cx.p.tensor(w).ty.clone();
    let ws = load_padded(2, w_index, &loops, &w_ty.shape, Scalar::of(w_ty.dtype, 0.0));
    let value = Expr::binary(BinaryOp::Mul, xs, ws);
    let init = reduce_init(ReduceKind::Sum, n.node().ty.dtype);
    cx.kernel(
        n,
        suffix,
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
    let (out, ws) = (n.node().ty.shape.clone(), cx.p.tensor(w).ty.shape.clone());
    let axes: Vec<ConvAxis> = (0..out.len() - 2)
        .map(|i| ConvAxis::direct(out[2 + i], ws[2 + i], front[i], c.strides[i], c.dilations[i]))
        .collect();
    if axes.iter().all(|a| a.taps == 1) && axes.iter().any(|a| a.input.1 > 1) {
        let xs = subsampled(cx, n, x, &axes)?;
        let unit: Vec<ConvAxis> = axes.iter().map(|a| ConvAxis::direct(a.outputs, 1, 0, 1, 1)).collect();
        return conv_kernel(cx, n, "", xs, w, Layout::OutIn, c.groups, &unit, LastAxis::Direct);
    }
    let last = axes.last().expect("a convolution has a spatial axis");
    let stride = last.input.1 as usize;
    // A joined weight is computed where it is read, so its taps cannot run on into padding.
    let pads_weight = last.taps % stride != 0 && cx.templates.contains_key(&w);
    if stride > 1 && last.input.2 == 1 && last.taps > PHASES_PER_STRIDE * stride && !pads_weight {
        let xp = phases(cx, n, x, last)?;
        return conv_kernel(cx, n, "", xp, w, Layout::OutIn, c.groups, &axes, LastAxis::Phases);
    }
    if stride > 1 && last.taps <= WINDOWS_PER_STRIDE * stride {
        let xw = windows(cx, n, x, last)?;
        return conv_kernel(cx, n, "", xw, w, Layout::OutIn, c.groups, &axes, LastAxis::Windows);
    }
    conv_kernel(cx, n, "", x, w, Layout::OutIn, c.groups, &axes, LastAxis::Direct)
}

/// The input of a strided convolution with one tap on every axis, at the points it reads:
/// `subsampled[n, c, o..] = x[n, c, input(o, 0)..]` (zero outside `x`), which the product
/// then reads as a convolution with stride 1, whose rows of outputs follow each other in
/// its tiles.
fn subsampled(cx: &mut Lowering, n: &NodeCx, x: TensorId, axes: &[ConvAxis]) -> Result<TensorId, String> {
    let xt = cx.p.tensor(x).ty.clone();
    let shape = [xt.shape[..2].to_vec(), axes.iter().map(|a| a.outputs).collect()].concat();
    let copy = cx.temp(n, "subsampled", TensorType::new(xt.dtype, shape).map_err(|e| e.0)?);
    let mut loops = vec![par("n", xt.shape[0]), par("c", xt.shape[1])];
    loops.extend(axes.iter().enumerate().map(|(i, a)| par(format!("o{i}"), a.outputs)));
    let mut src = vars(2);
    src.extend(
        axes.iter()
            .enumerate()
            .map(|(i, a)| Affine::constant(a.input.0).plus(2 + i, a.input.1)),
    );
    let zero = Scalar::of(xt.dtype, 0.0);
    let value = load_padded(1, src, &loops, &xt.shape, zero);
    let rank = loops.len();
    cx.kernel(n, "subsampled", loops, vec![copy, x], target(vars(rank)), value, None)?;
    Ok(copy)
}

/// Largest ratio of taps to stride along the last axis for which a strided convolution reads
/// its input through [`windows`] (the copy holds `taps / stride` times the input).
const WINDOWS_PER_STRIDE: usize = 4;

/// Ratio of taps to stride along the last axis above which a strided convolution (of
/// dilation 1 there) reads its input through [`phases`] instead of [`windows`].
/// - The phases copy is about as large as the input, and a tile of several output rows
///   reads each input row once, where the windows repeat it `taps / stride` times: a 7x7
///   stride-2 convolution's windows are 3.5 times its input.
/// - The price: the taps' loads are unaligned, and a tap count that the stride does not
///   divide is rounded up to a multiple of it, with the weight's zero padding as the extra
///   taps (one in eight for 7 taps at stride 2, one in four for 3 at stride 2).
/// - Measured on the light models, phases cost less modelled time than windows in sum on both
///   targets from 3x3 at stride 2 up. At a ratio of 1 or less the windows are no larger
///   than the input.
const PHASES_PER_STRIDE: usize = 1;

/// The input of a convolution strided along its last axis, `axis`, copied so that the
/// product moves by one element along that axis's outputs, the axis vector code runs along:
/// `windows[n, c, i.., j, o] = x[n, c, i.., input(o, j)]`, zero outside `x`, for every tap
/// `j` and output `o` of the last axis (the other axes keep the input's extent).
fn windows(cx: &mut Lowering, n: &NodeCx, x: TensorId, axis: &ConvAxis) -> Result<TensorId, String> {
    let (input, stride, dilation) = axis.input;
    last_axis_copy(cx, n, x, "windows", [("j", axis.taps), ("o", axis.outputs)], |j, o| {
        Affine::constant(input).plus(o, stride).plus(j, dilation)
    })
}

/// The input of a convolution strided along its last axis, `axis` (of dilation 1), split by
/// position modulo the stride `s`:
/// `phases[n, c, i.., p, q] = x[n, c, i.., input(0, 0) + s*q + p]`, zero outside `x`, for every
/// phase `p < s` and the `q` that the outputs' taps reach. Tap `j = s*a + p` of output `o` is
/// then `phases[.., p, o + a]`: the product moves by one element along the outputs, and the
/// copy is about as large as the input, where [`windows`] holds `taps / s` times it.
fn phases(cx: &mut Lowering, n: &NodeCx, x: TensorId, axis: &ConvAxis) -> Result<TensorId, String> {
    let (input, s, _) = axis.input;
    let reach = axis.outputs + axis.taps.div_ceil(s as usize) - 1;
    last_axis_copy(cx, n, x, "phases", [("p", s as usize), ("q", reach)], |p, q| {
        Affine::constant(input).plus(q, s).plus(p, 1)
    })
}

/// A copy of `x`, the kernel `<node>.<suffix>`, whose last axis becomes two, `axes` (name and
/// extent each): `copy[.., u, v] = x[.., last(u, v)]`, zero outside `x`, where `last` takes the
/// loop indices of `u` and `v` to the input's position along its last axis.
fn last_axis_copy(
    cx: &mut Lowering,
    n: &NodeCx,
    x: TensorId,
    suffix: &str,
    axes: [(&str, usize); 2],
    last: impl FnOnce(usize, usize) -> Affine,
) -> Result<TensorId, String> {
    let xt = cx.p.tensor(x).ty.clone();
    let rank = xt.shape.len();
    let shape = [xt.shape[..rank - 1].to_vec(), axes.iter().map(|a| a.1).collect()].concat();
    let copy = cx.temp(n, suffix, TensorType::new(xt.dtype, shape).map_err(|e| e.0)?);
    let mut loops: Vec<_> = xt.shape[..rank - 1]
        .iter()
        .enumerate()
        .map(|(i, &e)| par(format!("i{i}"), e))
        .collect();
    loops.extend(axes.iter().map(|&(name, extent)| par(name, extent)));
    let mut src = vars(rank - 1);
    src.push(last(rank - 1, rank));
    let zero = Scalar::of(xt.dtype, 0.0);
    let value = load_padded(1, src, &loops, &xt.shape, zero);
    cx.kernel(n, suffix, loops, vec![copy, x], target(vars(rank + 1)), value, None)?;
    Ok(copy)
}

/// A transposed convolution reads its weight as stored, unless a kernel would take a single
/// tap along the last axis (a strided one, or a kernel of extent 1 there): then each CPE would
/// read it one element at a time, and it is first rearranged to [`Layout::TapsOutIn`]. Its
/// outputs are split by their residue modulo the stride, one kernel per residue tuple, so that
/// every output takes only the taps that reach it from an input (see
/// [`ConvAxis::transposed`]): no multiplication by a zero. With stride 1 that is a single
/// kernel.
///
/// A strided one whose result takes an epilogue must end in one kernel: it becomes a stride-1
/// convolution, with the weight read flipped, of the input spread out by the stride (zeros
/// between elements) and padded by `d*(K-1) - pad` on each side (plus output padding at the
/// end).
pub(super) fn conv_transpose(
    cx: &mut Lowering,
    n: &NodeCx,
    c: &ConvAttrs,
    output_padding: &[usize],
) -> Result<(), String> {
    let (x, stored) = (cx.input(n, 0), cx.input(n, 1));
    let out = n.node().ty.shape.clone();
    let nd = out.len() - 2;
    let taps = cx.p.tensor(stored).ty.shape[2..].to_vec();
    let (pb, pe) = split_pads(&c.pads);
    let strided = c.strides.iter().any(|&s| s > 1);
    let (w, layout) = if strided || taps[nd - 1] == 1 {
        (taps_first(cx, n, c.groups)?, Layout::TapsOutIn)
    } else {
        (stored, Layout::InOut)
    };
    if !strided || !n.epilogue {
        let residues: usize = c.strides.iter().product();
        for flat in 0..residues {
            let mut rest = flat;
            let mut residue = vec![0; nd];
            for i in (0..nd).rev() {
                residue[i] = rest % c.strides[i];
                rest /= c.strides[i];
            }
            let axes: Vec<ConvAxis> = (0..nd)
                .map(|i| ConvAxis::transposed(out[2 + i], taps[i], pb[i], c.strides[i], c.dilations[i], residue[i]))
                .collect();
            let suffix = if strided {
                let r: Vec<String> = residue.iter().map(|r| r.to_string()).collect();
                format!("residue{}", r.join("_"))
            } else {
                String::new()
            };
            conv_kernel(cx, n, &suffix, x, w, layout, c.groups, &axes, LastAxis::Direct)?;
        }
        return Ok(());
    }
    let span = |i: usize| (c.dilations[i] * (taps[i] - 1)) as i64;
    let front: Vec<i64> = (0..nd).map(|i| span(i) - pb[i]).collect();
    let back: Vec<i64> = (0..nd).map(|i| span(i) - pe[i] + output_padding[i] as i64).collect();
    let zero = Scalar::of(n.node().ty.dtype, 0.0);
    let xd = spread(cx, n, x, &front, &back, &c.strides, zero)?;
    let axes: Vec<ConvAxis> = (0..nd)
        .map(|i| ConvAxis {
            outputs: out[2 + i],
            taps: taps[i],
            target: (0, 1),
            input: (0, 1, c.dilations[i] as i64),
            weight: (taps[i] as i64 - 1, -1),
        })
        .collect();
    conv_kernel(cx, n, "", xd, w, layout, c.groups, &axes, LastAxis::Direct)
}

/// The transposed convolution's weight `[G*Cg, Mg, K..]` rearranged to `[K.., G*Mg, Cg]`.
fn taps_first(cx: &mut Lowering, n: &NodeCx, groups: usize) -> Result<TensorId, String> {
    let w = cx.input(n, 1);
    let wt = cx.p.tensor(w).ty.clone();
    let nd = wt.shape.len() - 2;
    let (cg, mg) = (wt.shape[0] / groups, wt.shape[1]);
    let shape = [wt.shape[2..].to_vec(), vec![groups * mg, cg]].concat();
    let rearranged = cx.temp(n, "weight", TensorType::new(wt.dtype, shape).map_err(|e| e.0)?);
    let mut loops: Vec<_> = (0..nd).map(|i| par(format!("k{i}"), wt.shape[2 + i])).collect();
    let g = (groups > 1).then(|| {
        loops.push(par("g", groups));
        nd
    });
    loops.extend([par("m", mg), par("c", cg)]);
    let (m, c) = (loops.len() - 2, loops.len() - 1);
    let grouped = |base: usize, per: usize| match g {
        Some(g) => Affine::var(base).plus(g, per as i64),
        None => Affine::var(base),
    };
    let dst = [vars(nd), vec![grouped(m, mg), Affine::var(c)]].concat();
    let src = [vec![grouped(c, cg), Affine::var(m)], vars(nd)].concat();
    cx.kernel(
        n,
        "weight",
        loops,
        vec![rearranged, w],
        target(dst),
        Expr::load(1, src),
        None,
    )?;
    Ok(rearranged)
}

/// Windowed max or sum over the input, whose padding reads as a value that never wins (the
/// lowest value for max, zero for sums), then for averages a product with the reciprocal of
/// the number of counted positions ([`PoolAttrs::average_reciprocals`], rounded at compile
/// time: a CPE divides one lane at a time and does not pipeline it, while it multiplies whole
/// vectors in its pipeline), as the sum's epilogue: one kernel either way.
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
    let reciprocals = p.average_reciprocals(&in_shape[2..], &out[2..], dtype);
    let (reciprocal, operands) = if reciprocals.iter().all(|&r| r == reciprocals[0]) {
        (Expr::Const(Scalar::of(dtype, reciprocals[0])), vec![n.out, x])
    } else {
        let shape = out[2..].to_vec();
        let t = match dtype {
            DType::F64 => Tensor::new(shape, Data::F64(reciprocals)),
            _ => Tensor::from_f32(shape, reciprocals.iter().map(|&r| r as f32).collect()),
        }
        .map_err(|e| e.0)?;
        let reciprocal = cx.constant(n, "reciprocal", t);
        (
            Expr::load(2, (2..2 + nd).map(Affine::var).collect()),
            vec![n.out, x, reciprocal],
        )
    };
    let average = Expr::binary(BinaryOp::Mul, Expr::Acc, reciprocal);
    cx.finished_kernel(
        n,
        "",
        loops,
        operands,
        target(vars(2 + nd)),
        xs,
        reduction,
        Some(average),
    )
}
