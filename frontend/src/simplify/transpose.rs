//! Transposes of matrix products. `transpose(a @ b)` over the last two axes becomes
//! `transpose(b) @ transpose(a)` when the product has no other use, and a transpose of a
//! transpose becomes one transpose (or none). A weight gradient `(x^T gy)^T` then needs no
//! kernel of its own to turn its result around: the operands' transposes are read through the
//! product's index expressions. Every output element sums the same products in the same
//! order, so values are unchanged, bit for bit.

use super::Rebuild;
use crate::ir::{Graph, NodeId, Op};

/// The graph with transposed products turned into products of transposes.
pub fn transpose_products(g: &Graph) -> Graph {
    let users = g.users();
    let outputs: Vec<NodeId> = g.outputs.iter().map(|o| o.node).collect();
    let mut r = Rebuild::new(g);
    for id in g.ids() {
        let node = g.node(id);
        let new = match &node.op {
            Op::Transpose { perm } => {
                let x = node.inputs[0];
                let inner = g.node(x);
                let product_operands_are_matrices = inner.op == Op::MatMul
                    && inner.inputs.iter().all(|&i| g.node(i).ty.rank() >= 2)
                    && users[x.index()].len() == 1
                    && !outputs.contains(&x);
                if swaps_last_two(perm) && product_operands_are_matrices {
                    let (a, b) = (r.map[inner.inputs[0].index()], r.map[inner.inputs[1].index()]);
                    let (bt, at) = (swapped(&mut r, b, id), swapped(&mut r, a, id));
                    r.replace(id, Op::MatMul, vec![bt, at])
                } else if let Op::Transpose { perm: first } = &inner.op {
                    let composed: Vec<usize> = perm.iter().map(|&p| first[p]).collect();
                    let z = r.map[inner.inputs[0].index()];
                    if composed.iter().enumerate().all(|(i, &p)| i == p) && !outputs.contains(&id) {
                        z
                    } else {
                        r.replace(id, Op::Transpose { perm: composed }, vec![z])
                    }
                } else {
                    r.copy(id)
                }
            }
            _ => r.copy(id),
        };
        r.map.push(new);
    }
    r.finish()
}

/// Whether `perm` swaps the last two axes and keeps the others.
fn swaps_last_two(perm: &[usize]) -> bool {
    let n = perm.len();
    n >= 2 && perm[..n - 2].iter().enumerate().all(|(i, &p)| i == p) && perm[n - 2] == n - 1 && perm[n - 1] == n - 2
}

/// New node `v` with its last two axes swapped: the operand of a transpose that swaps them,
/// or a new such transpose, named after and from the origin of old node `like`.
fn swapped(r: &mut Rebuild, v: NodeId, like: NodeId) -> NodeId {
    let node = r.new.node(v);
    if let Op::Transpose { perm } = &node.op {
        if swaps_last_two(perm) {
            return node.inputs[0];
        }
    }
    let n = node.ty.rank();
    let mut perm: Vec<usize> = (0..n).collect();
    perm.swap(n - 2, n - 1);
    let name = r.fresh(&format!("{}.operand", r.old.node(like).name));
    let origin = r.old.node(like).origin.clone();
    r.new
        .add_node(name, Op::Transpose { perm }, vec![v], origin)
        .expect("a tensor of rank two or more transposes")
}
