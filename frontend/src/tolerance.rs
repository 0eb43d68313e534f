//! The one numerical tolerance used to compare f32 results across stages and references.
//!
//! `|actual - expected| <= ATOL + RTOL * |expected|`, elementwise, with NaN matching NaN and
//! infinities matching exactly.
//!
//! These are the defaults of the ONNX backend test suite (`rtol=1e-3`, `atol=1e-7`), which
//! every conforming runtime is held to. A relative bound of 1e-3 (about 2^-10) admits the
//! rounding differences of reassociated f32 sums (im2col order, blocking, fused multiply-add)
//! over the reduction lengths of real models, while still catching any semantic error such as a
//! wrong padding, stride or broadcast, which changes results at the 1e-2 level or more. Exact
//! operations (copies, layout changes, integer and bool results) are compared with equality
//! instead, see [`Comparison::Exact`].

use crate::ir::Tensor;

/// Relative tolerance for f32/f64 comparisons.
pub const RTOL: f64 = 1e-3;
/// Absolute tolerance for f32/f64 comparisons.
pub const ATOL: f64 = 1e-7;

/// How two tensors are compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Comparison {
    /// Floats within [`RTOL`]/[`ATOL`]; other types exactly.
    Tolerance,
    /// Every element bit-identical.
    Exact,
}

/// The first mismatch found between two tensors.
#[derive(Clone, Debug, PartialEq)]
pub struct Mismatch {
    pub message: String,
}

/// Compares `actual` against `expected`; returns the worst element on failure.
pub fn compare(actual: &Tensor, expected: &Tensor, how: Comparison) -> Result<(), Mismatch> {
    if actual.dtype() != expected.dtype() || actual.shape() != expected.shape() {
        return Err(Mismatch {
            message: format!("type {} differs from expected {}", actual.ty(), expected.ty()),
        });
    }
    if how == Comparison::Exact || !actual.dtype().is_float() {
        return if actual.bit_eq(expected) {
            Ok(())
        } else {
            Err(Mismatch {
                message: "elements differ (exact comparison)".into(),
            })
        };
    }
    let (a, e) = (actual.to_f64_vec(), expected.to_f64_vec());
    let mut worst: Option<(usize, f64)> = None;
    for (i, (&x, &y)) in a.iter().zip(&e).enumerate() {
        let ok = (x.is_nan() && y.is_nan()) || x == y || (x - y).abs() <= ATOL + RTOL * y.abs();
        if !ok {
            let excess = (x - y).abs() / (ATOL + RTOL * y.abs());
            if worst.is_none_or(|(_, w)| excess > w || excess.is_nan()) {
                worst = Some((i, excess));
            }
        }
    }
    match worst {
        None => Ok(()),
        Some((i, _)) => Err(Mismatch {
            message: format!("element {i}: got {} expected {} (rtol {RTOL}, atol {ATOL})", a[i], e[i]),
        }),
    }
}
