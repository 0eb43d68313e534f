//! Element types.

use std::fmt;

/// Element type of a tensor.
///
/// `F32` is the compute type; `I64` carries shape arithmetic and indices; `Bool` comes out of
/// comparisons; `F64` is allowed for gradient checks and ONNX models that use doubles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    F32,
    F64,
    I64,
    Bool,
}

impl DType {
    pub const ALL: [DType; 4] = [DType::F32, DType::F64, DType::I64, DType::Bool];

    /// The name used in the text form (`f32`, `f64`, `i64`, `bool`).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::I64 => "i64",
            DType::Bool => "bool",
        }
    }

    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }

    /// Bytes per element in memory (a `bool` takes one byte).
    pub fn size_bytes(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::F64 | DType::I64 => 8,
            DType::Bool => 1,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
