//! Max and average pooling.

use super::linalg::window_table;
use super::num::Num;
use super::numeric_only;
use crate::ir::{Data, PoolAttrs, PoolKind, Tensor, TensorType};

pub(super) fn pool(a: &PoolAttrs, x: &Tensor, ty: &TensorType) -> Data {
    match x.data() {
        Data::F32(v) => Data::F32(pool_typed(a, x.shape(), v, &ty.shape)),
        Data::F64(v) => Data::F64(pool_typed(a, x.shape(), v, &ty.shape)),
        _ => numeric_only(ty.dtype),
    }
}

/// Pools every `[n, c]` plane. Padding never wins a max; an average divides by
/// [`PoolAttrs::average_divisors`].
fn pool_typed<T: Num>(a: &PoolAttrs, xs: &[usize], x: &[T], os: &[usize]) -> Vec<T> {
    let (sp_in, sp_out) = (&xs[2..], &os[2..]);
    let s_in: usize = sp_in.iter().product();
    let (kp, p): (usize, usize) = (a.kernel.iter().product(), sp_out.iter().product());
    let table = window_table(sp_in, &a.kernel, sp_out, &a.strides, &a.dilations, &a.pads);
    // Divisors of an average, per output position.
    let divisors: Vec<f64> = match a.kind {
        PoolKind::Max => Vec::new(),
        PoolKind::Avg { .. } => a
            .average_divisors(sp_in, sp_out)
            .into_iter()
            .map(|c| c as f64)
            .collect(),
    };
    let planes = xs[0] * xs[1];
    let mut out = Vec::with_capacity(planes * p);
    for plane in x.chunks(s_in).take(planes) {
        for pos in 0..p {
            let window = (0..kp)
                .map(|k| table[k * p + pos])
                .filter(|&o| o != usize::MAX)
                .map(|o| plane[o]);
            out.push(match a.kind {
                PoolKind::Max => window.fold(T::LOWEST, T::max),
                PoolKind::Avg { .. } => T::from_f64(window.map(T::to_f64).sum::<f64>() / divisors[pos]),
            });
        }
    }
    out
}
