//! Tensors with data: constants in the graph and values in the interpreter.

use super::{DType, ShapeError, TensorType};

/// Row-major element storage, one variant per [`DType`].
#[derive(Clone, Debug)]
pub enum Data {
    F32(Vec<f32>),
    F64(Vec<f64>),
    I64(Vec<i64>),
    Bool(Vec<bool>),
}

impl Data {
    pub fn dtype(&self) -> DType {
        match self {
            Data::F32(_) => DType::F32,
            Data::F64(_) => DType::F64,
            Data::I64(_) => DType::I64,
            Data::Bool(_) => DType::Bool,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Data::F32(v) => v.len(),
            Data::F64(v) => v.len(),
            Data::I64(v) => v.len(),
            Data::Bool(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `n` zeros (or `false`) of `dtype`.
    pub fn zeros(dtype: DType, n: usize) -> Data {
        match dtype {
            DType::F32 => Data::F32(vec![0.0; n]),
            DType::F64 => Data::F64(vec![0.0; n]),
            DType::I64 => Data::I64(vec![0; n]),
            DType::Bool => Data::Bool(vec![false; n]),
        }
    }
}

impl From<Vec<f32>> for Data {
    fn from(v: Vec<f32>) -> Data {
        Data::F32(v)
    }
}
impl From<Vec<f64>> for Data {
    fn from(v: Vec<f64>) -> Data {
        Data::F64(v)
    }
}
impl From<Vec<i64>> for Data {
    fn from(v: Vec<i64>) -> Data {
        Data::I64(v)
    }
}

/// A tensor: a shape and row-major data whose length is the shape's element count.
#[derive(Clone, Debug)]
pub struct Tensor {
    shape: Vec<usize>,
    data: Data,
}

/// Tensors are equal when they hold the same bits ([`Tensor::bit_eq`]): the equality of graph
/// constants, under which two constants are interchangeable.
impl PartialEq for Tensor {
    fn eq(&self, other: &Tensor) -> bool {
        self.bit_eq(other)
    }
}

impl Tensor {
    /// Pairs a shape with data, checking that the element count matches.
    pub fn new(shape: Vec<usize>, data: Data) -> Result<Tensor, ShapeError> {
        let n = super::types::checked_numel(&shape)?;
        if n != data.len() {
            return Err(ShapeError::new(format!(
                "shape {} needs {n} elements but {} were given",
                super::ShapeDisplay(&shape),
                data.len()
            )));
        }
        Ok(Tensor { shape, data })
    }

    pub fn zeros(ty: &TensorType) -> Tensor {
        Tensor {
            shape: ty.shape.clone(),
            data: Data::zeros(ty.dtype, ty.numel()),
        }
    }

    pub fn scalar_f32(v: f32) -> Tensor {
        Tensor {
            shape: Vec::new(),
            data: Data::F32(vec![v]),
        }
    }

    pub fn from_f32(shape: Vec<usize>, v: Vec<f32>) -> Result<Tensor, ShapeError> {
        Tensor::new(shape, Data::F32(v))
    }

    pub fn from_i64(shape: Vec<usize>, v: Vec<i64>) -> Result<Tensor, ShapeError> {
        Tensor::new(shape, Data::I64(v))
    }

    /// A rank-1 i64 tensor, the usual form of a shape computation result.
    pub fn i64_vector(v: Vec<i64>) -> Tensor {
        Tensor {
            shape: vec![v.len()],
            data: Data::I64(v),
        }
    }

    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    pub fn dtype(&self) -> DType {
        self.data.dtype()
    }

    pub fn ty(&self) -> TensorType {
        TensorType {
            dtype: self.dtype(),
            shape: self.shape.clone(),
        }
    }

    pub fn numel(&self) -> usize {
        self.data.len()
    }

    pub fn data(&self) -> &Data {
        &self.data
    }

    /// Same data under another shape with the same element count.
    pub fn reshaped(self, shape: Vec<usize>) -> Result<Tensor, ShapeError> {
        Tensor::new(shape, self.data)
    }

    /// Every element converted to `i64` (floats truncate toward zero, `true` is 1).
    /// Used to read constant shape operands such as Reshape's target shape.
    pub fn to_i64_vec(&self) -> Vec<i64> {
        match &self.data {
            Data::F32(v) => v.iter().map(|&x| x as i64).collect(),
            Data::F64(v) => v.iter().map(|&x| x as i64).collect(),
            Data::I64(v) => v.clone(),
            Data::Bool(v) => v.iter().map(|&x| x as i64).collect(),
        }
    }

    /// Every element converted to `f64` (`true` is 1).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        match &self.data {
            Data::F32(v) => v.iter().map(|&x| x as f64).collect(),
            Data::F64(v) => v.clone(),
            Data::I64(v) => v.iter().map(|&x| x as f64).collect(),
            Data::Bool(v) => v.iter().map(|&x| x as u8 as f64).collect(),
        }
    }

    /// True when both tensors have the same dtype, shape and bit patterns (so NaN equals an
    /// identical NaN and 0.0 differs from -0.0): the equality used for exact round trips.
    pub fn bit_eq(&self, other: &Tensor) -> bool {
        if self.shape != other.shape {
            return false;
        }
        match (&self.data, &other.data) {
            (Data::F32(a), Data::F32(b)) => a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits()),
            (Data::F64(a), Data::F64(b)) => a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits()),
            (Data::I64(a), Data::I64(b)) => a == b,
            (Data::Bool(a), Data::Bool(b)) => a == b,
            _ => false,
        }
    }

    /// True when every element equals the first one (and there is at least one element).
    pub fn is_splat(&self) -> bool {
        fn all_same<T: Copy>(v: &[T], eq: impl Fn(T, T) -> bool) -> bool {
            v.first().is_some_and(|&f| v.iter().all(|&x| eq(x, f)))
        }
        match &self.data {
            Data::F32(v) => all_same(v, |a, b| a.to_bits() == b.to_bits()),
            Data::F64(v) => all_same(v, |a, b| a.to_bits() == b.to_bits()),
            Data::I64(v) => all_same(v, |a, b| a == b),
            Data::Bool(v) => all_same(v, |a, b| a == b),
        }
    }
}
