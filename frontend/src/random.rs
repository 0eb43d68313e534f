//! Deterministic pseudo-random tensors, for runs without given inputs.
//!
//! The generator is specified exactly so that other runtimes (the generated C programs) can
//! reproduce it: SplitMix64 seeded with `seed + 0x9E3779B97F4A7C15 * (input_index + 1)`;
//! each element takes the next 64-bit output `r` and maps it to
//! - f32: `(r >> 40) as f32 / 2^24`, uniform in [0, 1);
//! - f64: `(r >> 11) as f64 / 2^53`, uniform in [0, 1);
//! - i64: `(r >> 33) % 10`, in 0..10;
//! - bool: `r >> 63 == 1`.

use crate::ir::{DType, Data, Tensor, TensorType};

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GOLDEN);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// A tensor of type `ty` filled as described in the module documentation.
pub fn random_tensor(ty: &TensorType, seed: u64, input_index: usize) -> Tensor {
    let mut rng = SplitMix64(seed.wrapping_add(GOLDEN.wrapping_mul(input_index as u64 + 1)));
    let n = ty.numel();
    let data = match ty.dtype {
        DType::F32 => Data::F32(
            (0..n)
                .map(|_| (rng.next() >> 40) as f32 / (1u64 << 24) as f32)
                .collect(),
        ),
        DType::F64 => Data::F64(
            (0..n)
                .map(|_| (rng.next() >> 11) as f64 / (1u64 << 53) as f64)
                .collect(),
        ),
        DType::I64 => Data::I64((0..n).map(|_| ((rng.next() >> 33) % 10) as i64).collect()),
        DType::Bool => Data::Bool((0..n).map(|_| rng.next() >> 63 == 1).collect()),
    };
    Tensor::new(ty.shape.clone(), data).expect("the element count matches the type")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Published SplitMix64 outputs for seed 1234567 (from the reference C implementation).
    #[test]
    fn splitmix64_matches_reference_sequence() {
        let mut r = SplitMix64(1234567);
        let got: Vec<u64> = (0..3).map(|_| r.next()).collect();
        assert_eq!(got, [6457827717110365317, 3203168211198807973, 9817491932198370423]);
    }

    #[test]
    fn f32_values_are_in_unit_interval_and_seed_dependent() {
        let ty = TensorType::new(DType::F32, vec![1000]).unwrap();
        let a = random_tensor(&ty, 0, 0).to_f64_vec();
        let b = random_tensor(&ty, 1, 0).to_f64_vec();
        assert!(a.iter().all(|&x| (0.0..1.0).contains(&x)));
        assert_ne!(a, b);
        assert_eq!(a, random_tensor(&ty, 0, 0).to_f64_vec());
    }
}
