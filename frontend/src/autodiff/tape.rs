//! The saved-value plan: which forward values the backward pass reads, and for each whether
//! it is kept from the forward (the tape) or recomputed in the backward.
//!
//! A forward value some backward node reads must otherwise stay in memory from its forward
//! producer until its last backward use. A value is recomputed instead when that costs only
//! elementwise work on values that stay available anyway: its op is elementwise or a view
//! ([`recomputable_op`]), and each operand is an input, a constant, a kept value or itself
//! recomputed. ReLU masks, biased and scaled values and elementwise activation chains fall in
//! this class; anything with a reduction (convolutions, matrix products, normalisation
//! statistics) is kept. The recomputation is a copy of the forward node placed after the
//! forward pass, which the backward reads instead, so the forward value dies at its last
//! forward use and fusion can inline the copy into the backward kernel that reads it.

use crate::ir::{Graph, NodeId, Op};

/// What the backward pass needs from the forward pass.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SavedPlan {
    /// Forward values the backward reads from memory: the tape.
    pub kept: Vec<NodeId>,
    /// Forward values the backward computes again from kept ones (with the elementwise
    /// chains they are computed from), in graph order.
    pub recomputed: Vec<NodeId>,
}

/// The sizes behind a [`SavedPlan`], in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TapeSummary {
    /// Bytes of the kept values.
    pub tape_bytes: usize,
    /// Bytes of the values the backward computes again.
    pub recomputed_bytes: usize,
    /// Bytes of every value the forward computes (not inputs or constants).
    pub forward_intermediate_bytes: usize,
    /// The forward pass's peak of simultaneously live computed values, evaluated in graph
    /// order: each value lives from its node to its last forward reader, or to the end when it
    /// is an output.
    pub forward_peak_bytes: usize,
}

/// Whether `op` is cheap enough to recompute: elementwise, or a broadcast or reshape (a
/// view of its operand).
fn recomputable_op(op: &Op) -> bool {
    matches!(
        op,
        Op::Unary(_) | Op::Binary(_) | Op::Select | Op::Cast { .. } | Op::Broadcast { .. } | Op::Reshape { .. }
    )
}

fn is_leaf(op: &Op) -> bool {
    matches!(op, Op::Input | Op::Const(_))
}

/// The plan for `g`, whose nodes before `first_backward` are the forward pass.
pub fn plan(g: &Graph, first_backward: usize) -> SavedPlan {
    let n = g.nodes().len();
    let mut read_by_backward = vec![false; n];
    for id in g.ids().skip(first_backward) {
        for x in &g.node(id).inputs {
            if x.index() < first_backward {
                read_by_backward[x.index()] = true;
            }
        }
    }
    // Decided from the last forward node back: a value's decision may lean on its operands
    // being recomputed, and each operand's own decision then checks its operands in turn.
    let mut recompute = vec![false; n];
    for i in (0..first_backward).rev() {
        let node = &g.nodes()[i];
        if !read_by_backward[i] || is_leaf(&node.op) || !recomputable_op(&node.op) {
            continue;
        }
        let mut chain = Vec::new();
        if available(g, NodeId(i as u32), &read_by_backward, &recompute, &mut chain, 0) {
            for c in chain {
                recompute[c.index()] = true;
            }
        }
    }
    let mut plan = SavedPlan::default();
    for i in 0..first_backward {
        let id = NodeId(i as u32);
        if recompute[i] {
            plan.recomputed.push(id);
        } else if read_by_backward[i] && !is_leaf(&g.nodes()[i].op) {
            plan.kept.push(id);
        }
    }
    plan
}

/// The longest elementwise chain recomputed for one value.
const MAX_CHAIN: usize = 8;

/// Whether `id` can be recomputed from values available after the forward pass, collecting
/// into `chain` the nodes that would be recomputed with it.
fn available(
    g: &Graph,
    id: NodeId,
    read_by_backward: &[bool],
    recompute: &[bool],
    chain: &mut Vec<NodeId>,
    depth: usize,
) -> bool {
    let node = g.node(id);
    if !recomputable_op(&node.op) || depth >= MAX_CHAIN {
        return false;
    }
    chain.push(id);
    node.inputs.iter().all(|&x| {
        let op = &g.node(x).op;
        // A value the backward reads is available whether it ends up kept or recomputed.
        is_leaf(op)
            || read_by_backward[x.index()]
            || recompute[x.index()]
            || chain.contains(&x)
            || available(g, x, read_by_backward, recompute, chain, depth + 1)
    })
}

/// `g` with the plan applied: a copy of every recomputed value is placed after the forward
/// pass, and the backward nodes read the copies. Node ids of the forward pass are unchanged;
/// `roots` (ids of `g`) are renumbered to the result's.
pub fn apply(g: &Graph, first_backward: usize, plan: &SavedPlan, roots: &mut [NodeId]) -> Graph {
    let mut out = Graph::new(g.name.clone());
    out.outputs = g.outputs.clone();
    let mut map: Vec<NodeId> = Vec::with_capacity(g.nodes().len());
    for id in g.ids().take(first_backward) {
        map.push(out.push_unchecked(g.node(id).clone()));
    }
    // Backward readers see the copy of a recomputed value; the copies read each other.
    let mut backward_map = map.clone();
    for &id in &plan.recomputed {
        let mut node = g.node(id).clone();
        node.inputs = node.inputs.iter().map(|x| backward_map[x.index()]).collect();
        node.origin = Some(format!("recomputed {}", node.name));
        node.name = format!("recompute/{}", node.name);
        backward_map[id.index()] = out.push_unchecked(node);
    }
    for id in g.ids().skip(first_backward) {
        let mut node = g.node(id).clone();
        node.inputs = node.inputs.iter().map(|x| backward_map[x.index()]).collect();
        backward_map.push(out.push_unchecked(node));
    }
    for o in &mut out.outputs {
        o.node = backward_map[o.node.index()];
    }
    for r in roots.iter_mut() {
        *r = backward_map[r.index()];
    }
    out
}

/// The sizes of `plan`'s values, and the forward pass's own memory.
pub fn summary(g: &Graph, first_backward: usize, plan: &SavedPlan) -> TapeSummary {
    let bytes = |id: &NodeId| g.node(*id).ty.size_bytes();
    let computed = |i: usize| !is_leaf(&g.nodes()[i].op);
    let mut last_use: Vec<usize> = (0..first_backward).collect();
    for id in g.ids().take(first_backward) {
        for x in &g.node(id).inputs {
            last_use[x.index()] = last_use[x.index()].max(id.index());
        }
    }
    for o in &g.outputs {
        if o.node.index() < first_backward {
            last_use[o.node.index()] = first_backward;
        }
    }
    let mut live = 0usize;
    let mut peak = 0usize;
    let mut dying: Vec<Vec<usize>> = vec![Vec::new(); first_backward + 1];
    for i in (0..first_backward).filter(|&i| computed(i)) {
        dying[last_use[i]].push(i);
    }
    for (i, dead) in dying.iter().take(first_backward).enumerate() {
        if computed(i) {
            live += g.nodes()[i].ty.size_bytes();
            peak = peak.max(live);
        }
        for &d in dead {
            live -= g.nodes()[d].ty.size_bytes();
        }
    }
    TapeSummary {
        tape_bytes: plan.kept.iter().map(bytes).sum(),
        recomputed_bytes: plan.recomputed.iter().map(bytes).sum(),
        forward_intermediate_bytes: (0..first_backward)
            .filter(|&i| computed(i))
            .map(|i| g.nodes()[i].ty.size_bytes())
            .sum(),
        forward_peak_bytes: peak,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::autodiff::gradients;
    use crate::ir::{BinaryOp, DType, ReduceKind, TensorType, UnaryOp};

    /// `loss = sum(tanh(h)^2)` with `h = x ⊙ w` (elementwise) or `x · w` (a matrix product),
    /// differentiated with respect to `w`; returns the graph, the id of `tanh(h)` and the
    /// number of forward nodes.
    fn network(elementwise: bool) -> (Graph, NodeId, usize) {
        let mut g = Graph::new("net");
        let ty = TensorType::new(DType::F32, vec![4, 4]).unwrap();
        let x = g.add_input("x", ty.clone());
        let w = g.add_input("w", ty);
        let op = if elementwise {
            Op::Binary(BinaryOp::Mul)
        } else {
            Op::MatMul
        };
        let h = g.add_node("h", op, vec![x, w], None).unwrap();
        let t = g.add_node("t", Op::Unary(UnaryOp::Tanh), vec![h], None).unwrap();
        let sq = g.add_node("sq", Op::Binary(BinaryOp::Mul), vec![t, t], None).unwrap();
        let reduce = Op::Reduce {
            kind: ReduceKind::Sum,
            axes: vec![0, 1],
        };
        let loss = g.add_node("loss", reduce, vec![sq], None).unwrap();
        let first = g.nodes().len();
        (gradients(&g, loss, &[w]).unwrap().graph, t, first)
    }

    #[test]
    fn a_value_computed_by_a_reduction_is_kept() {
        let (g, t, first) = network(false);
        let plan = plan(&g, first);
        assert_eq!(plan.kept, [t]);
        assert!(plan.recomputed.is_empty());
        let s = summary(&g, first, &plan);
        assert_eq!(s.tape_bytes, 64);
        assert_eq!(s.recomputed_bytes, 0);
        // h, t, sq (64 bytes each) and the scalar loss.
        assert_eq!(s.forward_intermediate_bytes, 3 * 64 + 4);
        // h and t live together when t is computed; so do t and sq.
        assert_eq!(s.forward_peak_bytes, 128);
    }

    #[test]
    fn an_elementwise_chain_on_inputs_is_recomputed() {
        let (g, t, first) = network(true);
        let plan = plan(&g, first);
        assert!(plan.kept.is_empty(), "kept {:?}", plan.kept);
        assert_eq!(plan.recomputed, [NodeId(t.0 - 1), t]);
        let mut roots = [g.outputs.first().map_or(t, |o| o.node)];
        let applied = apply(&g, first, &plan, &mut roots);
        // h and t are copied after the forward pass, and no backward node reads the
        // originals any more.
        let copies: Vec<&str> = applied.nodes()[first..first + 2]
            .iter()
            .map(|n| n.name.as_str())
            .collect();
        assert_eq!(copies, ["recompute/h", "recompute/t"]);
        let h = NodeId(t.0 - 1);
        for n in &applied.nodes()[first + 2..] {
            assert!(
                !n.inputs.contains(&h) && !n.inputs.contains(&t),
                "{} reads a forward value",
                n.name
            );
        }
    }
}
