//! Reductions. Float sums accumulate in f64 and round once, so the result does not depend on
//! summation order beyond f64 rounding.

use super::index::Strided;
use super::num::Num;
use super::numeric_only;
use crate::ir::{strides, Data, ReduceKind, Tensor};

pub(super) fn reduce(kind: ReduceKind, axes: &[usize], x: &Tensor) -> Data {
    let shape = x.shape();
    let out_shape: Vec<usize> = (0..shape.len())
        .map(|d| if axes.contains(&d) { 1 } else { shape[d] })
        .collect();
    let os = strides(&out_shape);
    // Output offset of each input element, in input order.
    let to_out: Vec<isize> = (0..shape.len())
        .map(|d| if axes.contains(&d) { 0 } else { os[d] as isize })
        .collect();
    let n_out: usize = out_shape.iter().product();
    let targets = || Strided::new(shape, to_out.clone(), 0);

    fn fold<T: Num, A: Copy>(
        v: &[T],
        n: usize,
        targets: Strided,
        init: A,
        step: impl Fn(A, T) -> A,
        fin: impl Fn(A) -> T,
    ) -> Vec<T> {
        let mut acc = vec![init; n];
        for (&x, o) in v.iter().zip(targets) {
            acc[o] = step(acc[o], x);
        }
        acc.into_iter().map(fin).collect()
    }
    fn extreme<T: Num>(kind: ReduceKind, v: &[T], n: usize, targets: Strided) -> Vec<T> {
        match kind {
            ReduceKind::Max => fold(v, n, targets, T::LOWEST, T::max, |a| a),
            ReduceKind::Min => fold(v, n, targets, T::HIGHEST, T::min, |a| a),
            ReduceKind::Sum | ReduceKind::Prod => unreachable!("sums and products are handled per type"),
        }
    }
    match (kind, x.data()) {
        (ReduceKind::Sum, Data::F32(v)) => {
            Data::F32(fold(v, n_out, targets(), 0f64, |a, x| a + x as f64, |a| a as f32))
        }
        (ReduceKind::Sum, Data::F64(v)) => Data::F64(fold(v, n_out, targets(), 0f64, |a, x| a + x, |a| a)),
        (ReduceKind::Sum, Data::I64(v)) => Data::I64(fold(v, n_out, targets(), 0i64, i64::wrapping_add, |a| a)),
        (ReduceKind::Prod, Data::F32(v)) => {
            Data::F32(fold(v, n_out, targets(), 1f64, |a, x| a * x as f64, |a| a as f32))
        }
        (ReduceKind::Prod, Data::F64(v)) => Data::F64(fold(v, n_out, targets(), 1f64, |a, x| a * x, |a| a)),
        (ReduceKind::Prod, Data::I64(v)) => Data::I64(fold(v, n_out, targets(), 1i64, i64::wrapping_mul, |a| a)),
        (_, Data::F32(v)) => Data::F32(extreme(kind, v, n_out, targets())),
        (_, Data::F64(v)) => Data::F64(extreme(kind, v, n_out, targets())),
        (_, Data::I64(v)) => Data::I64(extreme(kind, v, n_out, targets())),
        (_, Data::Bool(_)) => numeric_only(x.dtype()),
    }
}
