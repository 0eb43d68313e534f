//! Per-channel affine maps folded into weights.
//!
//! A convolution (channels along axis 1 of its result) or a matrix product (channels along the
//! last axis) with constant weights, followed by a chain of additions, subtractions,
//! multiplications and divisions by constants that vary along the channel axis only (biases,
//! inference batch normalisation, constant scales), computes `a[c] * y + b[c]` of its result
//! `y`. The chain becomes the op with weights scaled by `a` (each output channel's weights
//! times its `a`), then one addition of `b`, when that is anything but the identity.
//!
//! The chain follows nodes used once and that are not graph outputs (the last one may be),
//! so no value that anything else reads disappears. `a` and `b` are composed in f64 and the
//! scaled weights rounded to f32 once.

use super::Rebuild;
use crate::ir::{BinaryOp, DType, Graph, NodeId, Op, Tensor};

/// A node's channel axis when it is a convolution or matrix product with constant f32 weights
/// that [`scaled`] can scale, with the number of channels.
fn channels(g: &Graph, id: NodeId) -> Option<(usize, usize)> {
    let node = g.node(id);
    if node.ty.dtype != DType::F32 {
        return None;
    }
    let weights = g.node(*node.inputs.get(1)?);
    if !matches!(weights.op, Op::Const(_)) {
        return None;
    }
    let shape = &node.ty.shape;
    match node.op {
        Op::Conv(_) => Some((1, shape[1])),
        Op::MatMul if shape.len() == 2 => Some((1, shape[1])),
        _ => None,
    }
}

/// The channel vector of constant `c` broadcast against a result of shape `shape` whose
/// channels lie along `axis`, when `c` varies along that axis only and does not widen the
/// result.
fn per_channel(c: &Tensor, shape: &[usize], axis: usize) -> Option<Vec<f64>> {
    if c.dtype() != DType::F32 || c.shape().len() > shape.len() {
        return None;
    }
    let skip = shape.len() - c.shape().len();
    let mut along = None;
    for (k, &extent) in c.shape().iter().enumerate() {
        match (k + skip == axis, extent) {
            (_, 1) => {}
            (true, e) if e == shape[axis] => along = Some(()),
            _ => return None,
        }
    }
    let values = c.to_f64_vec();
    let n = shape[axis];
    Some(match along {
        Some(()) => values,
        None => vec![values[0]; n],
    })
}

/// One step of a chain: how `a * y + b` changes when node `step` applies its constant to it.
/// `from` is the chain's value among the step's operands.
pub(super) fn compose(g: &Graph, step: NodeId, from: NodeId, axis: usize, a: &mut [f64], b: &mut [f64]) -> Option<()> {
    let node = g.node(step);
    let Op::Binary(op) = node.op else { return None };
    let [x, y] = node.inputs[..] else { return None };
    let (other, chain_first) = match (x == from, y == from) {
        (true, false) => (y, true),
        (false, true) => (x, false),
        _ => return None,
    };
    let Op::Const(c) = &g.node(other).op else { return None };
    let c = per_channel(c, &node.ty.shape, axis)?;
    for k in 0..a.len() {
        match (op, chain_first) {
            (BinaryOp::Add, _) => b[k] += c[k],
            (BinaryOp::Sub, true) => b[k] -= c[k],
            (BinaryOp::Sub, false) => {
                a[k] = -a[k];
                b[k] = c[k] - b[k];
            }
            (BinaryOp::Mul, _) => {
                a[k] *= c[k];
                b[k] *= c[k];
            }
            (BinaryOp::Div, true) => {
                a[k] /= c[k];
                b[k] /= c[k];
            }
            _ => return None,
        }
    }
    Some(())
}

/// A chain after an op: its steps, and the `a` and `b` they compose to.
struct Chain {
    steps: Vec<NodeId>,
    a: Vec<f64>,
    b: Vec<f64>,
}

/// The longest chain of foldable steps after node `op` (see the module's description).
fn chain(g: &Graph, op: NodeId, users: &[Vec<NodeId>], outputs: &[bool]) -> Chain {
    let node = g.node(op);
    let (axis, n) = channels(g, op).expect("a foldable op");
    let mut c = Chain {
        steps: Vec::new(),
        a: vec![1.0; n],
        b: vec![0.0; n],
    };
    let mut at = op;
    while let [next] = users[at.index()][..] {
        if outputs[at.index()] || g.node(next).ty != node.ty {
            break;
        }
        let (mut a, mut b) = (c.a.clone(), c.b.clone());
        if compose(g, next, at, axis, &mut a, &mut b).is_none() {
            break;
        }
        (c.a, c.b) = (a, b);
        c.steps.push(next);
        at = next;
    }
    c
}

/// Weights `w` of op `node` with each output channel's weights multiplied by its `a`.
fn scaled(op: &Op, w: &Tensor, a: &[f64]) -> Tensor {
    let mut values = w.to_f64_vec();
    let n = a.len();
    match op {
        // [M, C/groups, K..]: channel m's weights are the m-th block.
        Op::Conv(_) => {
            let block = values.len() / n;
            for (k, v) in values.iter_mut().enumerate() {
                *v *= a[k / block];
            }
        }
        // [K, N]: channel n's weights are column n.
        _ => {
            for (k, v) in values.iter_mut().enumerate() {
                *v *= a[k % n];
            }
        }
    }
    let values = values.into_iter().map(|v| v as f32).collect();
    Tensor::from_f32(w.shape().to_vec(), values).expect("same shape")
}

/// The chain after node `id` when folding it changes anything: it scales the weights, or
/// turns several steps into one.
fn foldable(g: &Graph, id: NodeId, users: &[Vec<NodeId>], outputs: &[bool]) -> Option<Chain> {
    if channels(g, id).is_none() || users[id.index()].len() != 1 {
        return None;
    }
    let c = chain(g, id, users, outputs);
    let scales = c.a.iter().any(|&a| a != 1.0);
    (c.steps.len() >= 2 || scales).then_some(c)
}

/// Appends op `id` with scaled weights and, unless `b` is zero, the addition of `b`; returns
/// the op's new node, the chain's last step and the node that replaces it.
fn fold(r: &mut Rebuild<'_>, id: NodeId, c: &Chain) -> (NodeId, NodeId, NodeId) {
    let g = r.old;
    let node = g.node(id);
    let weights = g.node(node.inputs[1]);
    let Op::Const(w) = &weights.op else {
        unreachable!("foldable ops have constant weights")
    };
    let x = r.operands(id)[0];
    let w = r.constant(&format!("{}.scaled", weights.name), scaled(&node.op, w, &c.a), id);
    let op = r.replace(id, node.op.clone(), vec![x, w]);
    let last = *c.steps.last().expect("a chain has steps");
    if c.b.iter().all(|&b| b == 0.0) {
        return (op, last, op);
    }
    let (axis, n) = channels(g, id).expect("a foldable op");
    let mut shape = vec![1; node.ty.shape.len()];
    shape[axis] = n;
    let b = Tensor::from_f32(shape, c.b.iter().map(|&b| b as f32).collect()).expect("one per channel");
    let b = r.constant(&format!("{}.bias", g.node(last).name), b, last);
    let result = r.replace(last, Op::Binary(BinaryOp::Add), vec![op, b]);
    (op, last, result)
}

/// The graph with every foldable chain folded into its op's weights.
pub fn fold_into_weights(g: &Graph) -> Graph {
    let (users, outputs) = (g.users(), g.output_mask());
    // Each chain's last step, with the node that replaces it.
    let mut replaced: Vec<Option<NodeId>> = vec![None; g.nodes().len()];
    let mut r = Rebuild::new(g);
    for id in g.ids() {
        let new = match replaced[id.index()] {
            Some(new) => new,
            None => match foldable(g, id, &users, &outputs) {
                Some(c) => {
                    let (op, last, result) = fold(&mut r, id, &c);
                    replaced[last.index()] = Some(result);
                    op
                }
                None => r.copy(id),
            },
        };
        r.map.push(new);
    }
    r.finish()
}
