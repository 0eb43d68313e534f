//! Static cost figures of a graph: FLOPs per node and parameter counts.

use super::{Graph, NodeId, Op};

/// The product of `factors`, saturating: a model's declared shapes are untrusted, and a
/// count past `u64::MAX` is reported as that.
fn product(factors: impl IntoIterator<Item = u64>) -> u64 {
    factors.into_iter().fold(1, u64::saturating_mul)
}

/// Floating-point operations of one node, counting a multiply-add as two. Elementwise ops
/// and reductions count one per element they produce or consume; data movement counts zero.
pub fn node_flops(g: &Graph, id: NodeId) -> u64 {
    let n = g.node(id);
    let out = n.ty.numel() as u64;
    let input = |i: usize| &g.node(n.inputs[i]).ty;
    match &n.op {
        Op::Input
        | Op::Const(_)
        | Op::Reshape { .. }
        | Op::Broadcast { .. }
        | Op::Transpose { .. }
        | Op::Slice { .. }
        | Op::Pad { .. }
        | Op::Concat { .. }
        | Op::Gather { .. }
        | Op::Cast { .. } => 0,
        Op::Unary(_) | Op::Binary(_) | Op::Select => out,
        Op::MatMul => {
            let a = input(0);
            product([2, out, a.shape[a.rank() - 1] as u64])
        }
        // Each output element reads C/groups * kernel weights.
        Op::Conv(_) => product([2, out, product(input(1).shape[1..].iter().map(|&d| d as u64))]),
        // Each input element scatters into M/groups * kernel outputs.
        Op::ConvTranspose { .. } => product([
            2,
            input(0).numel() as u64,
            product(input(1).shape[1..].iter().map(|&d| d as u64)),
        ]),
        Op::Pool(p) => product([out, product(p.kernel.iter().map(|&k| k as u64))]),
        Op::Reduce { .. } => input(0).numel() as u64,
    }
}

/// Total FLOPs of the nodes that depend on a runtime input (work on constants is done once,
/// ahead of time, and not counted).
pub fn graph_flops(g: &Graph) -> u64 {
    let dynamic = dynamic_nodes(g);
    g.ids()
        .filter(|id| dynamic[id.index()])
        .map(|id| node_flops(g, id))
        .fold(0, u64::saturating_add)
}

/// For each node, whether it depends on a runtime input.
pub fn dynamic_nodes(g: &Graph) -> Vec<bool> {
    let mut dynamic = vec![false; g.nodes().len()];
    for id in g.ids() {
        let n = g.node(id);
        dynamic[id.index()] = matches!(n.op, Op::Input) || n.inputs.iter().any(|i| dynamic[i.index()]);
    }
    dynamic
}

/// Elements of the model's parameters: floating-point values that do not depend on runtime
/// inputs and are read by nodes that do (weights as the computation sees them, after folding).
pub fn parameter_count(g: &Graph) -> u64 {
    let dynamic = dynamic_nodes(g);
    let mut frontier = vec![false; g.nodes().len()];
    for id in g.ids().filter(|id| dynamic[id.index()]) {
        for i in &g.node(id).inputs {
            frontier[i.index()] |= !dynamic[i.index()] && g.node(*i).ty.dtype.is_float();
        }
    }
    g.ids()
        .filter(|id| frontier[id.index()])
        .map(|id| g.node(id).ty.numel() as u64)
        .sum()
}
