//! Common subexpression elimination: a node with the same op, attributes, result type and
//! operands as an earlier one (constants: the same bits) is replaced by it. Inputs are never
//! merged, and a recomputed forward value ([`crate::ir::Node::recomputed`]) only with another:
//! the saved-value plan recomputes it so that the forward value need not be kept. Every op is a
//! pure function of its operands, so this changes no value.

use std::collections::HashMap;

use super::Rebuild;
use crate::ir::{Graph, NodeId, Op, TensorType};

/// The graph with each common subexpression computed once.
pub fn eliminate(g: &Graph) -> Graph {
    let mut r = Rebuild::new(g);
    // Candidates by op name, operands and type; their ops are compared in full.
    let mut seen: HashMap<(&'static str, Vec<NodeId>, TensorType, bool), Vec<NodeId>> = HashMap::new();
    for id in g.ids() {
        let node = g.node(id);
        if matches!(node.op, Op::Input) {
            let new = r.copy(id);
            r.map.push(new);
            continue;
        }
        let key = (node.op.name(), r.operands(id), node.ty.clone(), node.recomputed);
        let earlier = seen
            .get(&key)
            .and_then(|ids| ids.iter().copied().find(|&e| r.new.node(e).op == node.op));
        let new = match earlier {
            Some(e) => e,
            None => {
                let new = r.copy(id);
                seen.entry(key).or_default().push(new);
                new
            }
        };
        r.map.push(new);
    }
    r.finish()
}
