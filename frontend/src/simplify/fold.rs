//! Constant folding.
//!
//! - An op whose operands are all constants becomes a constant, when its result has at most
//!   [`FOLD_LIMIT`] elements or no more elements than its largest operand (so folding never
//!   makes the program larger than the constants it already holds).
//! - An elementwise or data-movement op whose operands are all uniform values (a constant whose
//!   elements are all equal, or a broadcast of one) gives a uniform value: the op computed once
//!   on the single elements, broadcast to the result's shape. A transpose of a filled weight
//!   tensor costs nothing at run time then.
//!
//! Ops whose evaluation fails (an index out of range) stay, to fail at run time as before.

use std::sync::Arc;

use super::Rebuild;
use crate::interp::eval_op;
use crate::ir::{Data, Graph, NodeId, Op, Tensor, TensorType};

/// Results of ops on constants are computed when they have at most this many elements (or no
/// more than their largest constant operand).
pub const FOLD_LIMIT: usize = 1 << 16;

/// What is known of a node's value at compile time.
enum Known {
    /// Its whole value.
    Const(Arc<Tensor>),
    /// One element that every element of the value equals.
    Splat(Tensor),
}

/// The graph with its constant subexpressions folded (see the module's description).
pub fn fold_constants(g: &Graph) -> Graph {
    let mut r = Rebuild::new(g);
    for id in g.ids() {
        let folded = fold(&r, id).map(|value| match value {
            Known::Const(t) => r.replace(id, Op::Const(t), Vec::new()),
            Known::Splat(one) => {
                let node = g.node(id);
                let one = one.reshaped(vec![1; node.ty.shape.len()]).expect("one element");
                let value = r.constant(&format!("{}.value", node.name), one, id);
                r.replace(
                    id,
                    Op::Broadcast {
                        shape: node.ty.shape.clone(),
                    },
                    vec![value],
                )
            }
        });
        let new = match folded {
            Some(new) => new,
            None => r.copy(id),
        };
        r.map.push(new);
    }
    r.finish()
}

/// What old node `id` folds to, if anything, given its operands' replacements.
fn fold(r: &Rebuild<'_>, id: NodeId) -> Option<Known> {
    let node = r.old.node(id);
    if matches!(node.op, Op::Input | Op::Const(_)) {
        return None;
    }
    let operands: Vec<Known> = r
        .operands(id)
        .into_iter()
        .map(|i| known(&r.new, i))
        .collect::<Option<_>>()?;
    let numel = node.ty.numel();
    let consts: Option<Vec<&Tensor>> = operands
        .iter()
        .map(|k| match k {
            Known::Const(t) => Some(&**t),
            Known::Splat(_) => None,
        })
        .collect();
    if let Some(consts) = consts {
        let largest = consts.iter().map(|t| t.numel()).max().unwrap_or(0);
        if numel <= FOLD_LIMIT.max(largest) {
            return eval_op(&node.op, &consts, &node.ty)
                .ok()
                .map(|t| Known::Const(Arc::new(t)));
        }
    }
    if matches!((&node.op, &operands[..]), (Op::Broadcast { .. }, [Known::Const(_)])) {
        // Already a uniform value's cheapest form.
        return None;
    }
    let ones: Vec<Tensor> = operands
        .iter()
        .map(|k| match k {
            Known::Const(t) => t.is_splat().then(|| first(t)),
            Known::Splat(one) => Some(one.clone()),
        })
        .collect::<Option<_>>()?;
    splat(&node.op, &ones, &node.ty).map(Known::Splat)
}

/// What is known of new node `id`'s value.
fn known(g: &Graph, id: NodeId) -> Option<Known> {
    let node = g.node(id);
    match &node.op {
        Op::Const(t) => Some(Known::Const(t.clone())),
        Op::Broadcast { .. } => match &g.node(node.inputs[0]).op {
            Op::Const(t) if t.is_splat() => Some(Known::Splat(first(t))),
            _ => None,
        },
        _ => None,
    }
}

/// The single element of an op on uniform operands whose single elements are `ones` (each of
/// shape `[]`), when the op keeps values uniform.
fn splat(op: &Op, ones: &[Tensor], ty: &TensorType) -> Option<Tensor> {
    let scalar = TensorType::new(ty.dtype, Vec::new()).ok()?;
    match op {
        Op::Unary(_) | Op::Binary(_) | Op::Select | Op::Cast { .. } => {
            let args: Vec<&Tensor> = ones.iter().collect();
            eval_op(op, &args, &scalar).ok()
        }
        Op::Reshape { .. } | Op::Broadcast { .. } | Op::Transpose { .. } | Op::Slice { .. } => Some(ones[0].clone()),
        Op::Concat { .. } => ones.iter().all(|t| t.bit_eq(&ones[0])).then(|| ones[0].clone()),
        _ => None,
    }
}

/// The first element of `t`, as a tensor of shape `[]`.
fn first(t: &Tensor) -> Tensor {
    let data = match t.data() {
        Data::F32(v) => Data::F32(vec![v[0]]),
        Data::F64(v) => Data::F64(vec![v[0]]),
        Data::I64(v) => Data::I64(vec![v[0]]),
        Data::Bool(v) => Data::Bool(vec![v[0]]),
    };
    Tensor::new(Vec::new(), data).expect("one element")
}
