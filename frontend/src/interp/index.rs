//! Index arithmetic shared by the kernels.

use crate::ir::strides;

/// Yields the element offsets of a strided view, in row-major order of `shape`.
///
/// Offset of multi-index `i` is `base + Σ i[d] * strides[d]`; strides may be zero
/// (broadcasting) or negative (reversed slices).
pub(crate) struct Strided {
    shape: Vec<usize>,
    strides: Vec<isize>,
    idx: Vec<usize>,
    offset: isize,
    remaining: usize,
}

impl Strided {
    pub(crate) fn new(shape: &[usize], strides: Vec<isize>, base: isize) -> Strided {
        Strided {
            shape: shape.to_vec(),
            idx: vec![0; shape.len()],
            strides,
            offset: base,
            remaining: shape.iter().product(),
        }
    }
}

impl Iterator for Strided {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let cur = self.offset as usize;
        for d in (0..self.shape.len()).rev() {
            self.idx[d] += 1;
            self.offset += self.strides[d];
            if self.idx[d] < self.shape[d] {
                break;
            }
            self.offset -= self.strides[d] * self.shape[d] as isize;
            self.idx[d] = 0;
        }
        Some(cur)
    }
}

/// Strides that read a tensor of shape `from` as if it had been broadcast to `to`
/// (zero along broadcast dimensions).
pub(crate) fn broadcast_strides(from: &[usize], to: &[usize]) -> Vec<isize> {
    let s = strides(from);
    let lead = to.len() - from.len();
    (0..to.len())
        .map(|d| {
            if d < lead || from[d - lead] == 1 {
                0
            } else {
                s[d - lead] as isize
            }
        })
        .collect()
}

/// Offsets into a tensor of shape `from` for each element of its broadcast to `to`.
pub(crate) fn broadcast_iter(from: &[usize], to: &[usize]) -> Strided {
    Strided::new(to, broadcast_strides(from, to), 0)
}

/// Reads `src` (shape `from`) broadcast to `to`.
pub(crate) fn broadcast_to<T: Copy>(src: &[T], from: &[usize], to: &[usize]) -> Vec<T> {
    if from == to {
        return src.to_vec();
    }
    if src.len() == 1 {
        return vec![src[0]; to.iter().product()];
    }
    broadcast_iter(from, to).map(|i| src[i]).collect()
}
