//! Transposes of matrix products. `transpose(a @ b)` over the last two axes becomes
//! `transpose(b) @ transpose(a)` when the product has no other use, and a transpose of a
//! transpose becomes one transpose (or none). A weight gradient `(x^T gy)^T` then needs no
//! kernel of its own to turn its result around: the operands' transposes are read through the
//! product's index expressions. Every output element sums the same products in the same
//! order, so values are unchanged, bit for bit.
//!
//! A reduction of an elementwise value that a product also reads transposed reduces the
//! transposed copy instead ([`reductions_read_transposes`]). The backward pass of a
//! convolution or matrix product with a bias makes this shape: the bias gradient reduces the
//! masked output gradient `g`, and the weight gradient reads `transpose(g)`. Fusion computes
//! an elementwise value inside each of its consumers and never inside a product, so the
//! transpose is stored for the product, and the reduction would otherwise compute `g` again
//! from its operands: it reads one stored tensor instead of two, and a value the forward pass
//! kept for `g` (a pre-activation) gets one backward reader fewer.

use std::collections::HashMap;

use super::Rebuild;
use crate::fuse::Pattern;
use crate::ir::infer::infer;
use crate::ir::{Graph, Node, NodeId, Op};

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

/// The graph with each reduction of an elementwise value that a product also reads through a
/// transpose made to reduce that transpose, as the module documentation describes. The
/// reduction folds over the same axes in the same order (its `axes` follow the permutation),
/// and its result is seen in its old shape, so values are unchanged, bit for bit.
pub fn reductions_read_transposes(g: &Graph) -> Graph {
    let users = g.users();
    let mut r = Rebuild::new(g);
    // Transposes built ahead of their turn, for a reduction before them: old node to new.
    let mut early: HashMap<NodeId, NodeId> = HashMap::new();
    for id in g.ids() {
        if let Some(&new) = early.get(&id) {
            r.map.push(new);
            continue;
        }
        let node = g.node(id);
        let new = match (&node.op, transposed_sibling(g, &users, id)) {
            (Op::Reduce { kind, axes }, Some((t, inverse))) => {
                let t = *early.entry(t).or_insert_with(|| r.copy(t));
                let op = Op::Reduce {
                    kind: *kind,
                    axes: axes.iter().map(|&a| inverse[a]).collect(),
                };
                let ty = infer(&op, &[&r.new.node(t).ty]).expect("a reduction over a permutation of its axes");
                let reshaped = ty != node.ty;
                let name = if reshaped {
                    r.fresh(&format!("{}.transposed", node.name))
                } else {
                    node.name.clone()
                };
                let reduced = r.new.push_unchecked(Node {
                    name,
                    op,
                    inputs: vec![t],
                    ty,
                    origin: node.origin.clone(),
                    recomputed: node.recomputed,
                });
                if reshaped {
                    r.replace(
                        id,
                        Op::Reshape {
                            shape: node.ty.shape.clone(),
                        },
                        vec![reduced],
                    )
                } else {
                    reduced
                }
            }
            _ => r.copy(id),
        };
        r.map.push(new);
    }
    r.finish()
}

/// For reduction `id` of an elementwise value `x` that no product reads directly: a transpose
/// of `x` that a product reads, with its inverse permutation (operand axis to result axis),
/// when the axes `id` keeps stay in the same order through it (so its result, reduced over
/// the mapped axes, holds the same elements in the same order).
fn transposed_sibling(g: &Graph, users: &[Vec<NodeId>], id: NodeId) -> Option<(NodeId, Vec<usize>)> {
    let Op::Reduce { axes, .. } = &g.node(id).op else {
        return None;
    };
    let x = g.node(id).inputs[0];
    let contraction = |n: NodeId| Pattern::of(&g.node(n).op) == Pattern::Contraction;
    if Pattern::of(&g.node(x).op) != Pattern::Elementwise || users[x.index()].iter().any(|&u| contraction(u)) {
        return None;
    }
    users[x.index()].iter().find_map(|&t| {
        let Op::Transpose { perm } = &g.node(t).op else {
            return None;
        };
        if !users[t.index()].iter().any(|&u| contraction(u)) {
            return None;
        }
        let mut inverse = vec![0; perm.len()];
        for (i, &p) in perm.iter().enumerate() {
            inverse[p] = i;
        }
        let kept: Vec<usize> = (0..perm.len())
            .filter(|a| !axes.contains(a))
            .map(|a| inverse[a])
            .collect();
        kept.windows(2).all(|w| w[0] < w[1]).then_some((t, inverse))
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp;
    use crate::ir::{parse, Data, Tensor};

    /// Runs `g` on inputs whose sums depend on their order (magnitudes from 1e-3 to 1e5),
    /// and gives every output's bits.
    fn bits(g: &Graph) -> Vec<Vec<u32>> {
        let inputs: Vec<Tensor> = g
            .inputs()
            .map(|id| {
                let ty = &g.node(id).ty;
                let v = (0..ty.numel())
                    .map(|i| (i as f32 * 0.37).sin() * 10f32.powi((i % 9) as i32 - 3))
                    .collect();
                Tensor::from_f32(ty.shape.clone(), v).unwrap()
            })
            .collect();
        interp::run(g, &inputs)
            .unwrap()
            .iter()
            .map(|t| match t.data() {
                Data::F32(v) => v.iter().map(|x| x.to_bits()).collect(),
                other => panic!("an f32 output, not {other:?}"),
            })
            .collect()
    }

    #[test]
    fn a_reduction_of_a_transposed_sibling_gives_the_same_bits() {
        let g = parse(
            "graph \"bias\" {
              %x: f32[2,3,5,7] = input
              %dy: f32[2,3,5,7] = input
              %w: f32[3,5,7,2] = input
              %g: f32[2,3,5,7] = mul(%x, %dy)
              %db: f32[1,3,1,1] = reduce_sum(%g) {axes=[3,0,2]}
              %gt: f32[3,5,2,7] = transpose(%g) {perm=[1,2,0,3]}
              %dw: f32[3,5,2,2] = matmul(%gt, %w)
              output \"db\" = %db
              output \"dw\" = %dw
            }",
        )
        .unwrap();
        crate::ir::verify(&g).unwrap();
        let out = reductions_read_transposes(&g);
        crate::ir::verify(&out).unwrap();
        let db = out.outputs[0].node;
        assert!(
            matches!(out.node(db).op, Op::Reshape { .. }),
            "the bias gradient is a view of the new reduction"
        );
        let reduced = out.node(out.node(db).inputs[0]);
        let kind = crate::ir::ReduceKind::Sum;
        assert_eq!(
            reduced.op,
            Op::Reduce {
                kind,
                axes: vec![3, 2, 1]
            }
        );
        assert_eq!(out.node(reduced.inputs[0]).name, "gt");
        assert_eq!(bits(&out), bits(&g));
    }
}
