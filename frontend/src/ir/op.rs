//! The primitive ops of the graph IR.
//!
//! The set is deliberately small: every ONNX op expands into these, and every later pass
//! (fusion, autodiff, lowering to loop nests) handles exactly these. Each op produces one value.
//! Operand and result types follow from [`super::infer`].

use std::sync::Arc;

use super::{DType, Tensor};

/// A primitive op with its attributes. Ops are equal when they compute the same function of
/// their operands (constants: the same bits).
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// A runtime input of the graph; the node's name is the input's name.
    Input,
    /// A constant tensor (weights, folded shape computations).
    Const(Arc<Tensor>),
    /// Elementwise function of one operand.
    Unary(UnaryOp),
    /// Elementwise function of two operands with numpy broadcasting. Both operands have the
    /// same dtype; comparisons produce `bool`.
    Binary(BinaryOp),
    /// `select(cond, a, b)`: elementwise `cond ? a : b` with numpy broadcasting of all three.
    Select,
    /// Elementwise conversion to another element type (floats to ints truncate toward zero).
    Cast { to: DType },
    /// `[B.., M, K] x [B.., K, N] -> [B.., M, N]`; both operands have the same rank (at least
    /// 2) and identical batch dimensions.
    MatMul,
    /// Grouped convolution without bias: `x[N, C, S..] * w[M, C/groups, K..] -> [N, M, O..]`.
    Conv(ConvAttrs),
    /// Transposed convolution without bias: `x[N, C, S..] * w[C, M/groups, K..] -> [N, M, O..]`
    /// with `O = (S-1)*stride - pad_begin - pad_end + dilation*(K-1) + output_padding + 1`.
    ConvTranspose {
        conv: ConvAttrs,
        output_padding: Vec<usize>,
    },
    /// Max or average pooling over the spatial dimensions of `x[N, C, S..]`.
    Pool(PoolAttrs),
    /// Reduction over `axes`; reduced dimensions stay in the result with extent 1.
    Reduce { kind: ReduceKind, axes: Vec<usize> },
    /// Same elements, new shape with the same element count.
    Reshape { shape: Vec<usize> },
    /// numpy broadcast of the operand to `shape`.
    Broadcast { shape: Vec<usize> },
    /// Permutes dimensions: result dimension `i` is operand dimension `perm[i]`.
    Transpose { perm: Vec<usize> },
    /// Strided window: along axis `i`, elements `starts[i] + k*steps[i]` for `k < sizes[i]`.
    /// Every index touched is in bounds; steps are non-zero and may be negative.
    Slice {
        starts: Vec<usize>,
        steps: Vec<i64>,
        sizes: Vec<usize>,
    },
    /// Concatenation of all operands along `axis`.
    Concat { axis: usize },
    /// Constant padding: along axis `i`, `pads[i]` elements of `value` before the operand's
    /// and `pads[rank + i]` after them (ONNX order). `value` is exact in the operand's type.
    Pad { pads: Vec<usize>, value: f64 },
    /// `gather(data, indices)` along `axis`; the result shape is
    /// `data[..axis] ++ indices ++ data[axis+1..]`. Indices are i64, negative ones count from
    /// the end, out-of-range ones are an evaluation error.
    Gather { axis: usize },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    Neg,
    Abs,
    Sign,
    Sqrt,
    Exp,
    Log,
    Recip,
    Erf,
    Tanh,
    Sigmoid,
    Relu,
    Not,
    Sin,
    Cos,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    /// Remainder of truncating division: its sign is the dividend's (C's `%` and `fmod`).
    Rem,
    Pow,
    Max,
    Min,
    Less,
    Greater,
    Equal,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceKind {
    Sum,
    Max,
    Min,
    Prod,
}

/// Attributes shared by convolutions. Vectors have one entry per spatial dimension, except
/// `pads`, which holds all begin pads followed by all end pads (ONNX order).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvAttrs {
    pub strides: Vec<usize>,
    pub dilations: Vec<usize>,
    pub pads: Vec<usize>,
    pub groups: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolKind {
    Max,
    /// Average; with `count_include_pad` the divisor counts padding elements too.
    Avg {
        count_include_pad: bool,
    },
}

/// Pooling window description; vectors per spatial dimension, `pads` as in [`ConvAttrs`].
///
/// With `ceil_mode` the output extent rounds up, but a window that would start inside the end
/// padding is dropped. Padding never takes part in a max; an average divides by the number of
/// window positions inside the input, or with `count_include_pad` inside the input and its
/// explicit padding (positions a ceil-mode window adds past the end padding never count, as in
/// the ONNX reference since opset 22's clarification, onnxruntime and PyTorch).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolAttrs {
    pub kind: PoolKind,
    pub kernel: Vec<usize>,
    pub strides: Vec<usize>,
    pub dilations: Vec<usize>,
    pub pads: Vec<usize>,
    pub ceil_mode: bool,
}

impl PoolAttrs {
    /// The divisor of an average pooling at every output position (row-major over the
    /// spatial `output` extents), for spatial `input` extents: see [`PoolAttrs`].
    pub fn average_divisors(&self, input: &[usize], output: &[usize]) -> Vec<usize> {
        let nd = input.len();
        let include_pad = matches!(
            self.kind,
            PoolKind::Avg {
                count_include_pad: true
            }
        );
        let per_dim: Vec<Vec<usize>> = (0..nd)
            .map(|i| {
                let (lo, hi) = if include_pad {
                    (-(self.pads[i] as i64), (input[i] + self.pads[nd + i]) as i64)
                } else {
                    (0, input[i] as i64)
                };
                (0..output[i])
                    .map(|o| {
                        (0..self.kernel[i])
                            .filter(|&k| {
                                let pos = (o * self.strides[i] + k * self.dilations[i]) as i64 - self.pads[i] as i64;
                                (lo..hi).contains(&pos)
                            })
                            .count()
                    })
                    .collect()
            })
            .collect();
        let total: usize = output.iter().product();
        let mut counts = Vec::with_capacity(total);
        let mut idx = vec![0; nd];
        for _ in 0..total {
            counts.push((0..nd).map(|i| per_dim[i][idx[i]]).product());
            for d in (0..nd).rev() {
                idx[d] += 1;
                if idx[d] < output[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
        counts
    }

    /// The reciprocals of [`PoolAttrs::average_divisors`], each rounded once to `dtype` (f64,
    /// or else f32) and held exactly in an f64: what an average multiplies its sum by, since
    /// a CPE divides one lane at a time and does not pipeline it. A power-of-two divisor's
    /// reciprocal gives the quotient exactly; another's a result within about an ulp of it.
    pub fn average_reciprocals(&self, input: &[usize], output: &[usize], dtype: DType) -> Vec<f64> {
        self.average_divisors(input, output)
            .into_iter()
            .map(|c| match dtype {
                DType::F64 => 1.0 / c as f64,
                _ => f64::from(1.0 / c as f32),
            })
            .collect()
    }
}

impl UnaryOp {
    /// Whether a CPE computes it by calling a library routine (tens to hundreds of cycles,
    /// against one for arithmetic). Sigmoid calls `exp`.
    pub fn calls_library(self) -> bool {
        matches!(
            self,
            UnaryOp::Exp | UnaryOp::Log | UnaryOp::Tanh | UnaryOp::Erf | UnaryOp::Sin | UnaryOp::Cos | UnaryOp::Sigmoid
        )
    }

    pub const ALL: [UnaryOp; 14] = [
        UnaryOp::Neg,
        UnaryOp::Abs,
        UnaryOp::Sign,
        UnaryOp::Sqrt,
        UnaryOp::Exp,
        UnaryOp::Log,
        UnaryOp::Recip,
        UnaryOp::Erf,
        UnaryOp::Tanh,
        UnaryOp::Sigmoid,
        UnaryOp::Relu,
        UnaryOp::Not,
        UnaryOp::Sin,
        UnaryOp::Cos,
    ];

    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Abs => "abs",
            UnaryOp::Sign => "sign",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Exp => "exp",
            UnaryOp::Log => "log",
            UnaryOp::Recip => "recip",
            UnaryOp::Erf => "erf",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Sigmoid => "sigmoid",
            UnaryOp::Relu => "relu",
            UnaryOp::Not => "not",
            UnaryOp::Sin => "sin",
            UnaryOp::Cos => "cos",
        }
    }
}

impl BinaryOp {
    /// Whether a CPE computes it on floats by calling a library routine (`pow`, `fmod`).
    pub fn calls_library(self) -> bool {
        matches!(self, BinaryOp::Pow | BinaryOp::Rem)
    }

    pub const ALL: [BinaryOp; 11] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Rem,
        BinaryOp::Pow,
        BinaryOp::Max,
        BinaryOp::Min,
        BinaryOp::Less,
        BinaryOp::Greater,
        BinaryOp::Equal,
    ];

    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Rem => "rem",
            BinaryOp::Pow => "pow",
            BinaryOp::Max => "max",
            BinaryOp::Min => "min",
            BinaryOp::Less => "less",
            BinaryOp::Greater => "greater",
            BinaryOp::Equal => "equal",
        }
    }

    /// Comparisons produce `bool` regardless of the operand type.
    pub fn is_comparison(self) -> bool {
        matches!(self, BinaryOp::Less | BinaryOp::Greater | BinaryOp::Equal)
    }
}

impl ReduceKind {
    pub fn name(self) -> &'static str {
        match self {
            ReduceKind::Sum => "reduce_sum",
            ReduceKind::Max => "reduce_max",
            ReduceKind::Min => "reduce_min",
            ReduceKind::Prod => "reduce_prod",
        }
    }
}

impl Op {
    /// The op's name in the text form (`conv`, `add`, `reduce_sum`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            Op::Input => "input",
            Op::Const(_) => "const",
            Op::Unary(u) => u.name(),
            Op::Binary(b) => b.name(),
            Op::Select => "select",
            Op::Cast { .. } => "cast",
            Op::MatMul => "matmul",
            Op::Conv(_) => "conv",
            Op::ConvTranspose { .. } => "conv_transpose",
            Op::Pool(PoolAttrs {
                kind: PoolKind::Max, ..
            }) => "max_pool",
            Op::Pool(PoolAttrs {
                kind: PoolKind::Avg { .. },
                ..
            }) => "avg_pool",
            Op::Reduce { kind, .. } => kind.name(),
            Op::Reshape { .. } => "reshape",
            Op::Broadcast { .. } => "broadcast",
            Op::Transpose { .. } => "transpose",
            Op::Slice { .. } => "slice",
            Op::Concat { .. } => "concat",
            Op::Pad { .. } => "pad",
            Op::Gather { .. } => "gather",
        }
    }

    /// Whether its lowering reads operand `i` through a guarded access: positions outside the
    /// operand (padding) read a pad value. Such a read takes no inlined producer, whose value
    /// at those positions would not be the pad value.
    pub fn reads_padded(&self, i: usize) -> bool {
        match self {
            Op::Conv(c) => i == 0 && c.pads.iter().any(|&p| p > 0),
            Op::Pool(p) => i == 0 && (p.ceil_mode || p.pads.iter().any(|&p| p > 0)),
            Op::ConvTranspose { .. } | Op::Pad { .. } => i == 0,
            _ => false,
        }
    }

    /// Number of operands the op takes, or `None` for variadic ops (concat: one or more).
    pub fn arity(&self) -> Option<usize> {
        match self {
            Op::Input | Op::Const(_) => Some(0),
            Op::Unary(_)
            | Op::Cast { .. }
            | Op::Pool(_)
            | Op::Reduce { .. }
            | Op::Reshape { .. }
            | Op::Broadcast { .. }
            | Op::Transpose { .. }
            | Op::Slice { .. }
            | Op::Pad { .. } => Some(1),
            Op::Binary(_) | Op::MatMul | Op::Conv(_) | Op::ConvTranspose { .. } | Op::Gather { .. } => Some(2),
            Op::Select => Some(3),
            Op::Concat { .. } => None,
        }
    }
}
