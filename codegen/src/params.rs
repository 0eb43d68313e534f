//! The parameter file: every constant of the program, loaded into the arena at start-up.
//!
//! Layout (integers little-endian): the magic `SWFLOWPB`, a u32 version (1), a u32 record
//! count, a u64 payload size, the u64 FNV-1a hash of the payload, then the payload: each
//! record's bytes in order. The generated main knows each record's size and arena offset and
//! `swflow_load_params` (runtime-c) checks every header field before copying.

use swflow_frontend::ir::{Data, Tensor};

pub const MAGIC: &[u8; 8] = b"SWFLOWPB";
pub const VERSION: u32 = 1;

/// A constant's elements as stored in memory (little-endian; bools as one byte 0 or 1).
pub fn tensor_bytes(t: &Tensor) -> Vec<u8> {
    let mut out = vec![0; byte_len(t)];
    write_tensor_bytes(t, &mut out);
    out
}

/// The bytes of `t`'s elements in memory.
pub fn byte_len(t: &Tensor) -> usize {
    t.ty().numel() * t.ty().dtype.size_bytes()
}

/// Writes `t`'s elements into `out` as [`tensor_bytes`] lays them out; `out` holds exactly
/// [`byte_len`] bytes.
pub fn write_tensor_bytes(t: &Tensor, out: &mut [u8]) {
    assert_eq!(out.len(), byte_len(t), "room for exactly the tensor");
    fn put<const N: usize, T: Copy>(out: &mut [u8], v: &[T], bytes: fn(T) -> [u8; N]) {
        for (chunk, &x) in out.chunks_exact_mut(N).zip(v) {
            chunk.copy_from_slice(&bytes(x));
        }
    }
    match t.data() {
        Data::F32(v) => put(out, v, f32::to_le_bytes),
        Data::F64(v) => put(out, v, f64::to_le_bytes),
        Data::I64(v) => put(out, v, i64::to_le_bytes),
        Data::Bool(v) => put(out, v, |b| [u8::from(b)]),
    }
}

/// FNV-1a, 64 bits.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The file holding `records` (name, arena offset, bytes) in order.
pub fn encode(records: &[(String, usize, Vec<u8>)]) -> Vec<u8> {
    let payload: Vec<u8> = records.iter().flat_map(|r| r.2.iter().copied()).collect();
    let mut out = Vec::with_capacity(32 + payload.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&(records.len() as u32).to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&fnv1a(&payload).to_le_bytes());
    out.extend_from_slice(&payload);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_matches_published_values() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn header_fields() {
        let f = encode(&[("w".into(), 0, vec![1, 2, 3])]);
        assert_eq!(&f[..8], MAGIC);
        assert_eq!(u32::from_le_bytes(f[8..12].try_into().unwrap()), 1);
        assert_eq!(u32::from_le_bytes(f[12..16].try_into().unwrap()), 1);
        assert_eq!(u64::from_le_bytes(f[16..24].try_into().unwrap()), 3);
        assert_eq!(&f[32..], &[1, 2, 3]);
    }
}
