//! Matrix products and convolutions.

use super::num::Num;
use super::numeric_only;
use crate::ir::{strides, ConvAttrs, Data, Tensor, TensorType};

/// `c += a x b` for row-major `a[m,k]`, `b[k,n]`, `c[m,n]`.
///
/// Blocked over columns and depth for cache reuse, rows split over threads. Each `c[i,j]`
/// accumulates `a[i,kk]*b[kk,j]` in increasing `kk`, whatever the blocking and thread count.
pub(crate) fn gemm<T: Num>(m: usize, k: usize, n: usize, a: &[T], b: &[T], c: &mut [T]) {
    if m == 0 || n == 0 {
        return;
    }
    let threads = if m * n * k >= 1 << 18 {
        std::thread::available_parallelism().map_or(1, |t| t.get()).min(m)
    } else {
        1
    };
    let rows = m.div_ceil(threads);
    if threads == 1 {
        return gemm_rows(rows.min(m), k, n, a, b, c);
    }
    std::thread::scope(|s| {
        for (t, chunk) in c.chunks_mut(rows * n).enumerate() {
            let a = &a[t * rows * k..];
            s.spawn(move || gemm_rows(chunk.len() / n, k, n, a, b, chunk));
        }
    });
}

fn gemm_rows<T: Num>(m: usize, k: usize, n: usize, a: &[T], b: &[T], c: &mut [T]) {
    const NB: usize = 256;
    const KB: usize = 128;
    for j0 in (0..n).step_by(NB) {
        let j1 = (j0 + NB).min(n);
        for k0 in (0..k).step_by(KB) {
            let k1 = (k0 + KB).min(k);
            for i in 0..m {
                let crow = &mut c[i * n + j0..i * n + j1];
                for kk in k0..k1 {
                    let av = a[i * k + kk];
                    let brow = &b[kk * n + j0..kk * n + j1];
                    for (cv, &bv) in crow.iter_mut().zip(brow) {
                        *cv = cv.add(av.mul(bv));
                    }
                }
            }
        }
    }
}

pub(super) fn matmul(a: &Tensor, b: &Tensor, ty: &TensorType) -> Data {
    let r = a.shape().len();
    let (m, k, n) = (a.shape()[r - 2], a.shape()[r - 1], b.shape()[r - 1]);
    let batch: usize = a.shape()[..r - 2].iter().product();
    fn run<T: Num>(batch: usize, m: usize, k: usize, n: usize, a: &[T], b: &[T]) -> Vec<T> {
        let mut c = vec![T::ZERO; batch * m * n];
        for i in 0..batch {
            gemm(
                m,
                k,
                n,
                &a[i * m * k..],
                &b[i * k * n..],
                &mut c[i * m * n..(i + 1) * m * n],
            );
        }
        c
    }
    match (a.data(), b.data()) {
        (Data::F32(x), Data::F32(y)) => Data::F32(run(batch, m, k, n, x, y)),
        (Data::F64(x), Data::F64(y)) => Data::F64(run(batch, m, k, n, x, y)),
        (Data::I64(x), Data::I64(y)) => Data::I64(run(batch, m, k, n, x, y)),
        _ => numeric_only(ty.dtype),
    }
}

/// Marks a window position that falls into padding.
const PAD: usize = usize::MAX;

/// For every (kernel position, output position) pair, in that row-major order, the offset
/// within one input plane that the window reads, or [`PAD`].
///
/// Input coordinate along dim `i`: `out_i*stride_i + k_i*dilation_i - pad_begin_i`.
pub(super) fn window_table(
    input: &[usize],
    kernel: &[usize],
    output: &[usize],
    strides_: &[usize],
    dilations: &[usize],
    pads: &[usize],
) -> Vec<usize> {
    let nd = input.len();
    let in_strides = strides(input);
    let kp: usize = kernel.iter().product();
    let p: usize = output.iter().product();
    let mut table = Vec::with_capacity(kp * p);
    let mut kidx = vec![0; nd];
    for _ in 0..kp {
        let mut oidx = vec![0; nd];
        for _ in 0..p {
            let mut off = 0;
            for i in 0..nd {
                let c = (oidx[i] * strides_[i] + kidx[i] * dilations[i]) as isize - pads[i] as isize;
                if c < 0 || c >= input[i] as isize {
                    off = PAD;
                    break;
                }
                off += c as usize * in_strides[i];
            }
            table.push(off);
            bump(&mut oidx, output);
        }
        bump(&mut kidx, kernel);
    }
    table
}

/// Advances a row-major multi-index; wraps to zero after the last one.
pub(super) fn bump(idx: &mut [usize], shape: &[usize]) {
    for d in (0..idx.len()).rev() {
        idx[d] += 1;
        if idx[d] < shape[d] {
            return;
        }
        idx[d] = 0;
    }
}

pub(super) fn conv(c: &ConvAttrs, x: &Tensor, w: &Tensor, ty: &TensorType) -> Data {
    match (x.data(), w.data()) {
        (Data::F32(xv), Data::F32(wv)) => Data::F32(conv_typed(c, x.shape(), xv, w.shape(), wv, &ty.shape)),
        (Data::F64(xv), Data::F64(wv)) => Data::F64(conv_typed(c, x.shape(), xv, w.shape(), wv, &ty.shape)),
        _ => numeric_only(ty.dtype),
    }
}

/// Convolution as one matrix product per (batch, group): `W[Mg, Cg*Kp] x col[Cg*Kp, P]`,
/// where `col` is the im2col expansion of the input (skipped for pointwise kernels).
fn conv_typed<T: Num>(c: &ConvAttrs, xs: &[usize], x: &[T], ws: &[usize], w: &[T], os: &[usize]) -> Vec<T> {
    let (n, cin, m) = (xs[0], xs[1], ws[0]);
    let (cg, mg) = (cin / c.groups, m / c.groups);
    let (sp_in, k_sp, sp_out) = (&xs[2..], &ws[2..], &os[2..]);
    let (s_in, kp, p): (usize, usize, usize) = (sp_in.iter().product(), k_sp.iter().product(), sp_out.iter().product());
    let pointwise = kp == 1 && c.strides.iter().all(|&s| s == 1) && c.pads.iter().all(|&p| p == 0);
    let table = if pointwise {
        Vec::new()
    } else {
        window_table(sp_in, k_sp, sp_out, &c.strides, &c.dilations, &c.pads)
    };
    let mut out = vec![T::ZERO; n * m * p];
    let mut col = vec![T::ZERO; if pointwise { 0 } else { cg * kp * p }];
    for b in 0..n {
        for g in 0..c.groups {
            let xg = &x[(b * cin + g * cg) * s_in..(b * cin + (g + 1) * cg) * s_in];
            if !pointwise {
                for ch in 0..cg {
                    let plane = &xg[ch * s_in..(ch + 1) * s_in];
                    for (dst, &off) in col[ch * kp * p..(ch + 1) * kp * p].iter_mut().zip(&table) {
                        *dst = if off == PAD { T::ZERO } else { plane[off] };
                    }
                }
            }
            let rhs = if pointwise { xg } else { &col[..] };
            let wg = &w[g * mg * cg * kp..(g + 1) * mg * cg * kp];
            let og = &mut out[(b * m + g * mg) * p..(b * m + (g + 1) * mg) * p];
            gemm(mg, cg * kp, p, wg, rhs, og);
        }
    }
    out
}

pub(super) fn conv_transpose(c: &ConvAttrs, x: &Tensor, w: &Tensor, ty: &TensorType) -> Data {
    match (x.data(), w.data()) {
        (Data::F32(xv), Data::F32(wv)) => Data::F32(conv_transpose_typed(c, x.shape(), xv, w.shape(), wv, &ty.shape)),
        (Data::F64(xv), Data::F64(wv)) => Data::F64(conv_transpose_typed(c, x.shape(), xv, w.shape(), wv, &ty.shape)),
        _ => numeric_only(ty.dtype),
    }
}

/// Transposed convolution: per (batch, group), `col[Mg*Kp, S] = Wgᵀ x X[Cg, S]`, then each
/// column entry is added into the output position it maps to (col2im).
fn conv_transpose_typed<T: Num>(c: &ConvAttrs, xs: &[usize], x: &[T], ws: &[usize], w: &[T], os: &[usize]) -> Vec<T> {
    let (n, cin) = (xs[0], xs[1]);
    let (cg, mg, m) = (cin / c.groups, ws[1], os[1]);
    let (sp_in, k_sp, sp_out) = (&xs[2..], &ws[2..], &os[2..]);
    let (s_in, kp, p): (usize, usize, usize) = (sp_in.iter().product(), k_sp.iter().product(), sp_out.iter().product());
    // Output offset for each (kernel position, input position); the roles of input and
    // output swap compared with a convolution.
    let nd = sp_in.len();
    let out_strides = strides(sp_out);
    let mut table = Vec::with_capacity(kp * s_in);
    let mut kidx = vec![0; nd];
    for _ in 0..kp {
        let mut iidx = vec![0; nd];
        for _ in 0..s_in {
            let mut off = 0;
            for i in 0..nd {
                let o = (iidx[i] * c.strides[i] + kidx[i] * c.dilations[i]) as isize - c.pads[i] as isize;
                if o < 0 || o >= sp_out[i] as isize {
                    off = PAD;
                    break;
                }
                off += o as usize * out_strides[i];
            }
            table.push(off);
            bump(&mut iidx, sp_in);
        }
        bump(&mut kidx, k_sp);
    }
    let mut out = vec![T::ZERO; n * m * p];
    let mut col = vec![T::ZERO; mg * kp * s_in];
    for g in 0..c.groups {
        // Wgᵀ: [Mg*Kp, Cg] from w[g*Cg + ci, m, k].
        let wg = &w[g * cg * mg * kp..(g + 1) * cg * mg * kp];
        let mut wt = vec![T::ZERO; mg * kp * cg];
        for ci in 0..cg {
            for r in 0..mg * kp {
                wt[r * cg + ci] = wg[ci * mg * kp + r];
            }
        }
        for b in 0..n {
            let xg = &x[(b * cin + g * cg) * s_in..(b * cin + (g + 1) * cg) * s_in];
            col.iter_mut().for_each(|v| *v = T::ZERO);
            gemm(mg * kp, cg, s_in, &wt, xg, &mut col);
            for mi in 0..mg {
                let plane = &mut out[(b * m + g * mg + mi) * p..(b * m + g * mg + mi + 1) * p];
                for (&off, &v) in table.iter().zip(&col[mi * kp * s_in..(mi + 1) * kp * s_in]) {
                    if off != PAD {
                        plane[off] = plane[off].add(v);
                    }
                }
            }
        }
    }
    out
}
