//! Expansion of ONNX nodes into primitives, dispatched by op type and opset.
//!
//! Each handler receives a [`Cx`] for one node and returns the nodes holding the ONNX node's
//! outputs, in order. Outputs it does not return (optional ones such as MaxPool's indices)
//! are recorded as unavailable; a later use of one is an error naming it.

mod activation;
mod attention;
mod einsum;
mod elementwise;
mod linalg;
mod loss;
mod movement;
mod nn;
mod norm;
mod reduce;
mod resize;
mod shape;
mod training;

use std::sync::Arc;

use super::attrs::Attrs;
use super::builder::Builder;
use super::proto::NodeProto;
use super::ImportErrorKind;
use crate::ir::{BinaryOp, DType, Data, NodeId, Op, ReduceKind, Tensor, TensorType, UnaryOp};

/// Largest constant table (index tables, masks, weights) an expansion builds at import, in
/// elements. Tables grow with the model's shapes, and a model is untrusted input: a table
/// past this size is refused by name before anything is allocated.
const TABLE_LIMIT: usize = 1 << 24;

/// Checks that a table of `n` elements (`None`: the count overflowed) may be built.
pub(super) fn table(n: Option<usize>, what: &str) -> Result<(), String> {
    match n {
        Some(n) if n <= TABLE_LIMIT => Ok(()),
        _ => Err(format!(
            "{what} would need a constant table of more than {TABLE_LIMIT} elements"
        )),
    }
}

/// What a handler sees of the node it expands.
pub(super) struct Cx<'a> {
    pub b: &'a mut Builder,
    pub node: &'a NodeProto,
    pub attrs: Attrs<'a>,
    pub opset: i64,
}

type Handler = fn(&mut Cx) -> Result<Vec<NodeId>, String>;

/// Opset from which swflow's expansion of most ops holds: earlier versions of them differ in
/// meaning (legacy `broadcast` attributes, attribute forms of later inputs, ...).
const EARLIEST: i64 = 7;

/// The handler for an op type, if swflow supports it, with the earliest opset whose version
/// of the op the handler implements. A model declaring an older opset selects an older
/// version of the op, which is refused by name rather than misread.
fn handler(op_type: &str) -> Option<(i64, Handler)> {
    let h: Handler = match op_type {
        "Add" | "Sub" | "Mul" | "Div" => elementwise::arith,
        "Pow" => elementwise::pow,
        "Mod" => elementwise::modulo,
        "Sqrt" | "Exp" | "Log" | "Neg" | "Abs" | "Reciprocal" | "Erf" | "Relu" | "Sigmoid" | "Tanh" | "Sin" | "Cos"
        | "Not" => elementwise::unary,
        "Elu" | "Selu" => activation::elu,
        "Softplus" => activation::softplus,
        "Mish" => activation::mish,
        "HardSigmoid" => activation::hard_sigmoid,
        "HardSwish" => activation::hard_swish,
        "And" | "Or" => elementwise::logic,
        "LeakyRelu" => elementwise::leaky_relu,
        "PRelu" => elementwise::prelu,
        "Gelu" => elementwise::gelu,
        "Clip" => elementwise::clip,
        "Sum" | "Mean" => elementwise::sum,
        "Max" | "Min" => elementwise::variadic_extreme,
        "Less" | "Greater" | "Equal" | "LessOrEqual" | "GreaterOrEqual" => elementwise::compare,
        "Where" => elementwise::select,
        "CastLike" => elementwise::cast_like,
        "Size" => shape::size,
        "Cast" => elementwise::cast,
        "Identity" => elementwise::identity,
        "Dropout" => elementwise::dropout,
        "Gemm" => linalg::gemm,
        "MatMul" => linalg::matmul,
        "Conv" => nn::conv,
        "ConvTranspose" => nn::conv_transpose,
        "MaxPool" | "AveragePool" => nn::pool,
        "GlobalAveragePool" | "GlobalMaxPool" => nn::global_pool,
        "BatchNormalization" => nn::batch_norm,
        "LayerNormalization" => nn::layer_norm,
        "LRN" => nn::lrn,
        "Softmax" | "LogSoftmax" => nn::softmax,
        "ReduceSum" | "ReduceMean" | "ReduceMax" | "ReduceMin" | "ReduceProd" | "ReduceL1" | "ReduceL2"
        | "ReduceLogSumExp" | "ReduceSumSquare" => reduce::reduce,
        "ArgMax" | "ArgMin" => reduce::arg_extreme,
        "InstanceNormalization" => norm::instance_norm,
        "GroupNormalization" => norm::group_norm,
        "RMSNormalization" => norm::rms_norm,
        "Expand" => movement::expand,
        "Tile" => movement::tile,
        "Range" => movement::range,
        "DepthToSpace" => movement::depth_to_space,
        "SpaceToDepth" => movement::space_to_depth,
        "GatherElements" => movement::gather_elements,
        "Trilu" => movement::trilu,
        "CumSum" => movement::cumsum,
        "Pad" => movement::pad,
        "Resize" | "Upsample" => resize::resize,
        "Attention" => attention::attention,
        "Einsum" => einsum::einsum,
        "Reshape" => shape::reshape,
        "Flatten" => shape::flatten,
        "Transpose" => shape::transpose,
        "Concat" => shape::concat,
        "Split" => shape::split,
        "Slice" => shape::slice,
        "Squeeze" => shape::squeeze,
        "Unsqueeze" => shape::unsqueeze,
        "Gather" => shape::gather,
        "Constant" => shape::constant,
        "ConstantOfShape" => shape::constant_of_shape,
        "Shape" => shape::shape,
        "NegativeLogLikelihoodLoss" => loss::negative_log_likelihood,
        "SoftmaxCrossEntropyLoss" => loss::softmax_cross_entropy,
        _ => return None,
    };
    // Version 1 of these means what every later version means.
    let since = match op_type {
        "GlobalAveragePool" | "GlobalMaxPool" | "Not" => 1,
        "NegativeLogLikelihoodLoss" | "SoftmaxCrossEntropyLoss" => 12,
        _ => EARLIEST,
    };
    Some((since, h))
}

/// The handler for an op of the `ai.onnx.preview.training` domain, if swflow supports it.
fn preview_training_handler(op_type: &str) -> Option<Handler> {
    Some(match op_type {
        "Adagrad" => training::adagrad,
        "Momentum" => training::momentum,
        "Adam" => training::adam,
        _ => return None,
    })
}

/// Expands model node number `index` into primitives and binds its outputs.
pub(super) fn import_node(b: &mut Builder, node: &NodeProto, index: usize, opset: i64) -> Result<(), ImportErrorKind> {
    let op_type = node.op_type().to_string();
    let label = if node.name().is_empty() {
        format!("{op_type}#{index}")
    } else {
        node.name().to_string()
    };
    let fail = |reason: String| ImportErrorKind::Node {
        node: label.clone(),
        op: op_type.clone(),
        reason,
    };
    let (since, handler) = match node.domain() {
        "" | "ai.onnx" => handler(&op_type).ok_or_else(|| fail("operator not supported".into()))?,
        d if d == super::PREVIEW_TRAINING.0 => (
            1,
            preview_training_handler(&op_type).ok_or_else(|| fail(format!("operator not supported in domain {d}")))?,
        ),
        d => return Err(fail(format!("operator domain '{d}' is not supported"))),
    };
    if opset < since {
        return Err(fail(format!(
            "opset {opset} selects a version of {op_type} older than opset {since}, which swflow does not implement"
        )));
    }
    let prefix = node
        .output
        .iter()
        .find(|o| !o.is_empty())
        .cloned()
        .unwrap_or_else(|| label.clone());
    for out in node.output.iter().filter(|o| !o.is_empty()) {
        if b.is_bound(out) {
            return Err(fail(format!("output '{out}' is defined twice")));
        }
    }
    b.begin(label.clone(), prefix);
    let mark = b.mark();
    let mut cx = Cx {
        b,
        node,
        attrs: Attrs::new(node),
        opset,
    };
    let results = handler(&mut cx).map_err(fail)?;
    for (k, name) in node.output.iter().enumerate() {
        if name.is_empty() {
            continue;
        }
        match results.get(k) {
            Some(&id) => {
                let fresh = id.index() >= mark && cx.b.lookup(name).is_none() && !results[..k].contains(&id);
                if fresh {
                    cx.b.rename(id, name);
                }
                cx.b.bind(name, id);
            }
            None => {
                cx.b.mark_missing(name, format!("output {k} of {op_type} node '{label}' is not supported"))
            }
        }
    }
    Ok(())
}

/// Resolves a possibly negative axis against `rank`.
pub(super) fn axis(a: i64, rank: usize) -> Result<usize, String> {
    let r = rank as i64;
    let v = if a < 0 { a + r } else { a };
    if (0..r).contains(&v) {
        Ok(v as usize)
    } else {
        Err(format!("axis {a} out of range for rank {rank}"))
    }
}

impl Cx<'_> {
    pub fn op_type(&self) -> &str {
        self.node.op_type()
    }

    /// Operand `i`, which must be present.
    pub fn input(&self, i: usize) -> Result<NodeId, String> {
        self.opt_input(i)?.ok_or_else(|| format!("input {i} is required"))
    }

    /// Operand `i`, or `None` when absent or given as an empty name.
    pub fn opt_input(&self, i: usize) -> Result<Option<NodeId>, String> {
        match self.node.input.get(i) {
            None => Ok(None),
            Some(name) if name.is_empty() => Ok(None),
            Some(name) => self.b.resolve(name).map(Some),
        }
    }

    pub fn n_inputs(&self) -> usize {
        self.node.input.len()
    }

    /// The value of operand `i`, which must be a constant (after folding).
    pub fn const_input(&mut self, i: usize) -> Result<Option<Arc<Tensor>>, String> {
        let Some(id) = self.opt_input(i)? else {
            return Ok(None);
        };
        if let Some(t) = self.b.const_value(id) {
            return Ok(Some(t.clone()));
        }
        let feeding = self.b.feeding_inputs(id);
        let mut reason = format!(
            "input {i} ('{}') must be a constant for swflow to know shapes statically",
            self.node.input[i]
        );
        if !feeding.is_empty() {
            let names: Vec<String> = feeding.iter().map(|n| format!("'{n}'")).collect();
            let flags: Vec<String> = feeding.iter().map(|n| format!("--const {n}=FILE.npy")).collect();
            reason += &format!(
                "; it is computed from graph input {}: freeze it with {}",
                names.join(", "),
                flags.join(" ")
            );
        }
        self.b.wanted = feeding;
        Err(reason)
    }

    /// Operand `i` as a list of i64 (axes, shapes, pads), when present.
    pub fn const_ints(&mut self, i: usize) -> Result<Option<Vec<i64>>, String> {
        Ok(self.const_input(i)?.map(|t| t.to_i64_vec()))
    }

    pub fn ty(&self, id: NodeId) -> &TensorType {
        self.b.ty(id)
    }

    pub fn rank(&self, id: NodeId) -> usize {
        self.ty(id).rank()
    }

    pub fn shape(&self, id: NodeId) -> Vec<usize> {
        self.ty(id).shape.clone()
    }

    pub fn op(&mut self, op: Op, inputs: &[NodeId]) -> Result<NodeId, String> {
        self.b.op(op, inputs)
    }

    pub fn unary(&mut self, u: UnaryOp, x: NodeId) -> Result<NodeId, String> {
        self.op(Op::Unary(u), &[x])
    }

    pub fn binary(&mut self, op: BinaryOp, x: NodeId, y: NodeId) -> Result<NodeId, String> {
        self.op(Op::Binary(op), &[x, y])
    }

    /// A scalar constant of `dtype` holding `v`.
    pub fn scalar(&mut self, dtype: DType, v: f64) -> NodeId {
        let data = match dtype {
            DType::F32 => Data::F32(vec![v as f32]),
            DType::F64 => Data::F64(vec![v]),
            DType::I64 => Data::I64(vec![v as i64]),
            DType::Bool => Data::Bool(vec![v != 0.0]),
        };
        self.b
            .constant(Tensor::new(Vec::new(), data).expect("a scalar has one element"))
    }

    /// `x op v` with `v` a scalar of `x`'s type.
    pub fn with_scalar(&mut self, op: BinaryOp, x: NodeId, v: f64) -> Result<NodeId, String> {
        let s = self.scalar(self.ty(x).dtype, v);
        self.binary(op, x, s)
    }

    pub fn reshape(&mut self, x: NodeId, shape: Vec<usize>) -> Result<NodeId, String> {
        if self.ty(x).shape == shape {
            return Ok(x);
        }
        self.op(Op::Reshape { shape }, &[x])
    }

    pub fn reduce(&mut self, kind: ReduceKind, x: NodeId, axes: Vec<usize>) -> Result<NodeId, String> {
        self.op(Op::Reduce { kind, axes }, &[x])
    }

    /// Mean over `axes`, keeping them as extent-1 dimensions.
    pub fn mean(&mut self, x: NodeId, axes: Vec<usize>) -> Result<NodeId, String> {
        let n: usize = axes.iter().map(|&a| self.ty(x).shape[a]).product();
        let s = self.reduce(ReduceKind::Sum, x, axes)?;
        self.with_scalar(BinaryOp::Div, s, n as f64)
    }

    /// A constant holding `t`.
    pub fn constant(&mut self, t: Tensor) -> NodeId {
        self.b.constant(t)
    }

    /// An i64 constant of `shape` holding `values`.
    pub fn i64_const(&mut self, shape: Vec<usize>, values: Vec<i64>) -> Result<NodeId, String> {
        let t = Tensor::new(shape, Data::I64(values)).map_err(|e| e.0)?;
        Ok(self.b.constant(t))
    }

    /// A bool constant of `shape` holding `values`.
    pub fn bool_const(&mut self, shape: Vec<usize>, values: Vec<bool>) -> Result<NodeId, String> {
        let t = Tensor::new(shape, Data::Bool(values)).map_err(|e| e.0)?;
        Ok(self.b.constant(t))
    }

    /// `cond ? a : b` with broadcasting.
    pub fn select(&mut self, cond: NodeId, a: NodeId, b: NodeId) -> Result<NodeId, String> {
        self.op(Op::Select, &[cond, a, b])
    }

    pub fn transpose(&mut self, x: NodeId, perm: Vec<usize>) -> Result<NodeId, String> {
        if perm.iter().enumerate().all(|(i, &p)| i == p) {
            return Ok(x);
        }
        self.op(Op::Transpose { perm }, &[x])
    }

    pub fn broadcast(&mut self, x: NodeId, shape: Vec<usize>) -> Result<NodeId, String> {
        if self.ty(x).shape == shape {
            return Ok(x);
        }
        self.op(Op::Broadcast { shape }, &[x])
    }

    /// Graph-level `x[start..start + len]` along `axis`.
    pub fn slice_axis(&mut self, x: NodeId, axis: usize, start: usize, len: usize) -> Result<NodeId, String> {
        let mut sizes = self.shape(x);
        if start == 0 && sizes[axis] == len {
            return Ok(x);
        }
        let mut starts = vec![0; sizes.len()];
        starts[axis] = start;
        sizes[axis] = len;
        let steps = vec![1; sizes.len()];
        self.op(Op::Slice { starts, steps, sizes }, &[x])
    }

    pub fn cast(&mut self, x: NodeId, to: DType) -> Result<NodeId, String> {
        if self.ty(x).dtype == to {
            return Ok(x);
        }
        self.op(Op::Cast { to }, &[x])
    }
}
