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
//!
//! Whole deep models compared with an independent runtime (the benchmark models against
//! onnxruntime) use [`Comparison::Model`]: the absolute part scales with the output's largest
//! magnitude, `MODEL_ATOL_SCALE * max|expected|`. Elements near zero at the end of long chains
//! of reductions carry errors set by the size of the terms that cancelled, not by their own
//! size; onnxruntime disagrees with itself (default graph optimisations against none) by up to
//! 1.2e-4 on ResNet-50 and YOLOv3 outputs of magnitude about 5, that is 2.4e-5 of the scale,
//! and fails `ATOL`/`RTOL` on 1 to 1.7 % of their elements (`scripts/models/build.py --noise`).
//! A scale of 1e-4 leaves a factor of about 4 over that floor, while a semantic error still
//! shows at the 1e-2 level.

use crate::ir::Tensor;

/// Relative tolerance for f32/f64 comparisons.
pub const RTOL: f64 = 1e-3;
/// Absolute tolerance for f32/f64 comparisons.
pub const ATOL: f64 = 1e-7;
/// Absolute tolerance of [`Comparison::Model`], as a fraction of the largest expected magnitude.
pub const MODEL_ATOL_SCALE: f64 = 1e-4;

/// How two tensors are compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Comparison {
    /// Floats within [`RTOL`]/[`ATOL`]; other types exactly.
    Tolerance,
    /// Every element bit-identical.
    Exact,
    /// Whole-model outputs against another runtime: [`RTOL`], and an absolute tolerance of
    /// [`MODEL_ATOL_SCALE`] times the largest expected magnitude.
    Model,
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
    let atol = match how {
        Comparison::Model => {
            let scale = e.iter().filter(|v| v.is_finite()).fold(0.0f64, |m, v| m.max(v.abs()));
            (MODEL_ATOL_SCALE * scale).max(ATOL)
        }
        _ => ATOL,
    };
    let mut worst: Option<(usize, f64)> = None;
    for (i, (&x, &y)) in a.iter().zip(&e).enumerate() {
        let ok = (x.is_nan() && y.is_nan()) || x == y || (x - y).abs() <= atol + RTOL * y.abs();
        if !ok {
            let excess = (x - y).abs() / (atol + RTOL * y.abs());
            if worst.is_none_or(|(_, w)| excess > w || excess.is_nan()) {
                worst = Some((i, excess));
            }
        }
    }
    match worst {
        None => Ok(()),
        Some((i, _)) => Err(Mismatch {
            message: format!(
                "element {i}: got {} expected {} (rtol {RTOL}, atol {atol:e})",
                a[i], e[i]
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(v: &[f32]) -> Tensor {
        Tensor::from_f32(vec![v.len()], v.to_vec()).unwrap()
    }

    #[test]
    fn model_tolerance_scales_with_the_largest_magnitude() {
        let expected = t(&[10.0, 0.0, -2.0]);
        // Largest magnitude 10: absolute tolerance 1e-3.
        assert!(compare(&t(&[10.0, 5e-4, -2.0]), &expected, Comparison::Model).is_ok());
        assert!(compare(&t(&[10.0, 2e-3, -2.0]), &expected, Comparison::Model).is_err());
        assert!(compare(&t(&[10.0, 5e-4, -2.0]), &expected, Comparison::Tolerance).is_err());
        // The relative part still applies: 1e-3 of 10 plus 1e-3, 0.011 in all.
        assert!(compare(&t(&[10.009, 0.0, -2.0]), &expected, Comparison::Model).is_ok());
        assert!(compare(&t(&[10.02, 0.0, -2.0]), &expected, Comparison::Model).is_err());
    }
}
