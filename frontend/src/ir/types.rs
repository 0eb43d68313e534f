//! Tensor types: an element type and a static shape.

use std::fmt;

use super::{DType, ShapeError};

/// Upper bound on the number of elements of any tensor the IR accepts (2^32, i.e. 16 GiB of
/// f32). Types are checked against it when they are created, before anything is allocated, so
/// a model that declares an absurd shape is rejected instead of exhausting memory.
pub const MAX_TENSOR_ELEMENTS: usize = 1 << 32;

/// Static type of a value: element type and shape (row-major, outermost dimension first).
/// A rank-0 shape is a scalar with one element.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorType {
    pub dtype: DType,
    pub shape: Vec<usize>,
}

impl TensorType {
    /// Creates a type, rejecting shapes that [`checked_numel`] rejects.
    pub fn new(dtype: DType, shape: Vec<usize>) -> Result<TensorType, ShapeError> {
        checked_numel(&shape)?;
        Ok(TensorType { dtype, shape })
    }

    pub fn scalar(dtype: DType) -> TensorType {
        TensorType {
            dtype,
            shape: Vec::new(),
        }
    }

    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Number of elements (1 for a scalar).
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    pub fn size_bytes(&self) -> usize {
        self.numel() * self.dtype.size_bytes()
    }
}

/// Element count of `shape`, or an error when its extents multiply beyond
/// [`MAX_TENSOR_ELEMENTS`]. Zero extents count as one in that product, so a shape with no
/// elements cannot hide an absurd extent that strides and partial products would overflow on.
pub fn checked_numel(shape: &[usize]) -> Result<usize, ShapeError> {
    let mut n: usize = 1;
    for &d in shape {
        n = n
            .checked_mul(d.max(1))
            .filter(|&n| n <= MAX_TENSOR_ELEMENTS)
            .ok_or_else(|| {
                let what = if shape.contains(&0) {
                    "has extents whose product is"
                } else {
                    "has"
                };
                ShapeError::new(format!(
                    "shape {} {what} more than {MAX_TENSOR_ELEMENTS} elements",
                    ShapeDisplay(shape)
                ))
            })?;
    }
    Ok(if shape.contains(&0) { 0 } else { n })
}

/// Row-major strides (in elements) of a shape.
pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// Displays a shape as `[1,3,224,224]`.
pub struct ShapeDisplay<'a>(pub &'a [usize]);

impl fmt::Display for ShapeDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

impl fmt::Display for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.dtype, ShapeDisplay(&self.shape))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_shape_cannot_hide_an_absurd_extent() {
        assert_eq!(checked_numel(&[0, 2, 8]).unwrap(), 0);
        assert_eq!(checked_numel(&[3, 4]).unwrap(), 12);
        let err = checked_numel(&[0, 2, usize::MAX / 2, 8]).unwrap_err();
        assert!(err.0.contains("extents whose product"), "{}", err.0);
        assert!(checked_numel(&[1 << 20, 1 << 13]).is_err());
    }
}
