//! Elementwise operations on a product's reshaped result, moved before the reshape. ONNX
//! import makes a matrix product of a batch of rows (`[1, 16, 768] x [768, 768]`) a product of
//! matrices between two reshapes, so the bias that follows the product adds to a reshape of
//! it, and fusion, which gives a product an elementwise epilogue only when the product's
//! result flows into it directly, would leave the addition a kernel of its own.
//!
//! `op(reshape(p), c)` (either operand order), where `p` is a convolution or a matrix
//! product, the reshape has no other use, and `c` broadcasts along trailing axes that `p` and
//! the reshape both have with the same extents, becomes `reshape(op(p, c))`. Row-major
//! elements keep their coordinates on those trailing axes through the reshape, so each
//! element takes the same operation on the same operands: values are unchanged, bit for bit.

use super::Rebuild;
use crate::fuse::Pattern;
use crate::ir::infer::infer;
use crate::ir::{Graph, Node, NodeId, Op};

/// The graph with elementwise operations on reshaped products moved before the reshapes, as
/// the module documentation describes.
pub fn ops_before_reshapes(g: &Graph) -> Graph {
    let users = g.users();
    let outputs: Vec<NodeId> = g.outputs.iter().map(|o| o.node).collect();
    let mut r = Rebuild::new(g);
    for id in g.ids() {
        let node = g.node(id);
        let reshaped = match node.op {
            Op::Binary(_) => node
                .inputs
                .iter()
                .position(|&i| reshapes_a_product(g, i) && users[i.index()].len() == 1 && !outputs.contains(&i)),
            _ => None,
        };
        let new = match reshaped {
            Some(side) if broadcasts_along_shared_axes(g, id, side) => {
                let product = g.node(node.inputs[side]).inputs[0];
                let mut inputs = r.operands(id);
                inputs[side] = r.map[product.index()];
                let types: Vec<_> = inputs.iter().map(|&i| &r.new.node(i).ty).collect();
                let ty = infer(&node.op, &types).expect("the operand broadcasts into the product's shape");
                let before = Node {
                    name: r.fresh(&format!("{}.before_reshape", node.name)),
                    op: node.op.clone(),
                    inputs,
                    ty,
                    origin: node.origin.clone(),
                    recomputed: node.recomputed,
                };
                let before = r.new.push_unchecked(before);
                let shape = node.ty.shape.clone();
                r.replace(id, Op::Reshape { shape }, vec![before])
            }
            _ => r.copy(id),
        };
        r.map.push(new);
    }
    r.finish()
}

/// Whether `id` is a reshape of a convolution's or matrix product's result.
fn reshapes_a_product(g: &Graph, id: NodeId) -> bool {
    let node = g.node(id);
    matches!(node.op, Op::Reshape { .. }) && Pattern::of(&g.node(node.inputs[0]).op) == Pattern::Contraction
}

/// Whether binary node `id`, whose operand `side` is a reshape, has the reshape's shape, and
/// its other operand spans no more axes than the product and the reshape share at their ends.
fn broadcasts_along_shared_axes(g: &Graph, id: NodeId, side: usize) -> bool {
    let node = g.node(id);
    let reshape = g.node(node.inputs[side]);
    let (outer, inner) = (&reshape.ty.shape, &g.node(reshape.inputs[0]).ty.shape);
    let other = &g.node(node.inputs[1 - side]).ty.shape;
    let shared = outer
        .iter()
        .rev()
        .zip(inner.iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    node.ty.shape == *outer && other.len() <= shared
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp;
    use crate::ir::parse;
    use crate::random::random_tensor;

    /// A bias after a reshaped matrix product moves before the reshape, and the values stay
    /// the same bit for bit; one that varies along an axis the reshape changes stays.
    #[test]
    fn a_bias_moves_before_the_reshape_of_a_product() {
        let g = parse(
            r#"graph "dense" {
  %x: f32[6,4] = input
  %w: f32[4,8] = input
  %b: f32[8] = input
  %c: f32[2,1,1] = input
  %p: f32[6,8] = matmul(%x, %w)
  %r: f32[2,3,8] = reshape(%p) {shape=[2,3,8]}
  %y: f32[2,3,8] = add(%b, %r)
  %q: f32[6,8] = matmul(%x, %w)
  %s: f32[2,3,8] = reshape(%q) {shape=[2,3,8]}
  %z: f32[2,3,8] = mul(%s, %c)
  output "y" = %y
  output "z" = %z
}"#,
        )
        .unwrap();
        let moved = ops_before_reshapes(&g);
        let op_of = |name: &str| {
            let n = moved.nodes().iter().find(|n| n.name == name).unwrap();
            (
                n.op.clone(),
                n.inputs.iter().map(|&i| moved.node(i).name.clone()).collect::<Vec<_>>(),
            )
        };
        assert_eq!(
            op_of("y"),
            (
                Op::Reshape { shape: vec![2, 3, 8] },
                vec!["y.before_reshape".to_string()]
            )
        );
        assert_eq!(op_of("y.before_reshape").1, ["b", "p"]);
        assert_eq!(op_of("z").1, ["s", "c"]);
        let inputs: Vec<_> = g
            .inputs()
            .enumerate()
            .map(|(i, id)| random_tensor(&g.node(id).ty, 3, i))
            .collect();
        let (want, got) = (interp::run(&g, &inputs).unwrap(), interp::run(&moved, &inputs).unwrap());
        for (a, b) in want.iter().zip(&got) {
            assert!(a.bit_eq(b));
        }
    }
}
