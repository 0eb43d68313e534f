//! The reference graph interpreter.
//!
//! It evaluates a graph node by node with straightforward kernels; every later stage of the
//! compiler is checked against its results. Kernels favour obvious correctness, with two
//! concessions to speed: convolutions go through im2col and a blocked matrix product, and
//! matrix products split their rows over the machine's cores. Neither changes the order in
//! which any output element is accumulated, so results do not depend on the thread count.

mod elementwise;
mod index;
mod linalg;
mod movement;
mod num;
mod pool;
mod reduce;

use crate::ir::{DType, Graph, Op, Tensor, TensorType};

/// Evaluation failure, naming the node.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvalError {
    #[error("graph expects {expected} inputs, {given} were given")]
    InputCount { expected: usize, given: usize },
    #[error("input '{name}' must be {expected}, got {given}")]
    InputType {
        name: String,
        expected: TensorType,
        given: TensorType,
    },
    #[error("node '{node}' ({op}): {reason}")]
    Node { node: String, op: String, reason: String },
}

pub use elementwise::columns;
pub use num::Num;

/// Runs `g` on `inputs` (in graph-input order) and returns the outputs in order.
pub fn run(g: &Graph, inputs: &[Tensor]) -> Result<Vec<Tensor>, EvalError> {
    let input_ids: Vec<_> = g.inputs().collect();
    if input_ids.len() != inputs.len() {
        return Err(EvalError::InputCount {
            expected: input_ids.len(),
            given: inputs.len(),
        });
    }
    let mut values: Vec<Option<std::sync::Arc<Tensor>>> = vec![None; g.nodes().len()];
    for (&id, t) in input_ids.iter().zip(inputs) {
        let node = g.node(id);
        if t.ty() != node.ty {
            return Err(EvalError::InputType {
                name: node.name.clone(),
                expected: node.ty.clone(),
                given: t.ty(),
            });
        }
        values[id.index()] = Some(std::sync::Arc::new(t.clone()));
    }
    let mut uses = g.use_counts();
    for id in g.ids() {
        let node = g.node(id);
        let value = match &node.op {
            Op::Input => continue,
            Op::Const(t) => t.clone(),
            op => {
                let args: Vec<&Tensor> = node
                    .inputs
                    .iter()
                    .map(|i| {
                        values[i.index()]
                            .as_deref()
                            .expect("operands are evaluated before their users")
                    })
                    .collect();
                let out = eval_op(op, &args, &node.ty).map_err(|reason| EvalError::Node {
                    node: node.name.clone(),
                    op: op.name().to_string(),
                    reason,
                })?;
                std::sync::Arc::new(out)
            }
        };
        values[id.index()] = Some(value);
        for i in &node.inputs {
            uses[i.index()] -= 1;
            if uses[i.index()] == 0 {
                values[i.index()] = None;
            }
        }
    }
    Ok(g.outputs
        .iter()
        .map(|o| {
            values[o.node.index()]
                .as_deref()
                .expect("outputs are evaluated")
                .clone()
        })
        .collect())
}

/// Evaluates one op on operand values. `ty` is the result type the graph inferred for it.
/// Errors are data-dependent failures (an index out of range, integer division by zero).
pub fn eval_op(op: &Op, args: &[&Tensor], ty: &TensorType) -> Result<Tensor, String> {
    let data = match op {
        Op::Input => return Err("inputs have no value of their own".into()),
        Op::Const(t) => return Ok((**t).clone()),
        Op::Unary(u) => elementwise::unary(*u, args[0].data()),
        Op::Binary(b) => elementwise::binary(*b, args[0], args[1], &ty.shape)?,
        Op::Select => elementwise::select(args[0], args[1], args[2], &ty.shape),
        Op::Cast { to } => elementwise::cast(args[0].data(), *to),
        Op::MatMul => linalg::matmul(args[0], args[1], ty),
        Op::Conv(c) => linalg::conv(c, args[0], args[1], ty),
        Op::ConvTranspose { conv, .. } => linalg::conv_transpose(conv, args[0], args[1], ty),
        Op::Pool(p) => pool::pool(p, args[0], ty),
        Op::Reduce { kind, axes } => reduce::reduce(*kind, axes, args[0]),
        Op::Reshape { .. } => args[0].data().clone(),
        Op::Broadcast { shape } => movement::broadcast(args[0], shape),
        Op::Transpose { perm } => movement::transpose(args[0], perm),
        Op::Slice { starts, steps, sizes } => movement::slice(args[0], starts, steps, sizes),
        Op::Concat { axis } => movement::concat(args, *axis),
        Op::Pad { pads, value } => movement::pad(args[0], pads, *value, &ty.shape),
        Op::Gather { axis } => movement::gather(args[0], args[1], *axis)?,
    };
    debug_assert_eq!(data.dtype(), ty.dtype, "{} produced the wrong element type", op.name());
    Tensor::new(ty.shape.clone(), data).map_err(|e| e.0)
}

/// Applies `$body` to the typed vector of any [`Data`] (bound as `$v`), rewrapping the
/// result in the same variant: for kernels that only move elements.
macro_rules! map_data {
    ($data:expr, $v:ident => $body:expr) => {
        match $data {
            Data::F32($v) => Data::F32($body),
            Data::F64($v) => Data::F64($body),
            Data::I64($v) => Data::I64($body),
            Data::Bool($v) => Data::Bool($body),
        }
    };
}
pub(crate) use map_data;

/// `dtype` of a tensor must be numeric for an op; the type checker guarantees it.
pub(crate) fn numeric_only(dtype: DType) -> ! {
    unreachable!("the type checker admits only numeric operands here, got {dtype}")
}
