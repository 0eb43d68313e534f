//! Graph simplification, the passes before fusion. Each takes a graph and returns an
//! equivalent one; [`simplify`] runs them in order:
//!
//! 1. [`fold`]: constant folding. Ops whose operands are all constant are computed, and ops on
//!    uniform (splat) values give splats, however large, as a broadcast of one element.
//! 2. [`cse`]: common subexpressions. Two nodes of the same op on the same operands become one.
//! 3. [`reshape`]: an elementwise operation on a reshaped product's result (a batch of rows'
//!    bias) moves before the reshape, where fusion makes it the product's epilogue.
//! 4. [`affine`]: per-channel scales and shifts (inference batch normalisation, biases, constant
//!    scales) after a convolution or a matrix product fold into its weights and one bias.
//! 5. [`sums`]: the sum of two convolutions over one output (a ResNet block's last
//!    convolution and its projected shortcut) becomes one convolution of their inputs'
//!    concatenation.
//! 6. [`transpose`]: a transposed matrix product becomes a product of transposes, and two
//!    transposes in a row one; then a reduction of an elementwise value that a product reads
//!    transposed reduces the transposed copy, which fusion stores anyway.
//!
//! Graph outputs keep their names, and a node that survives keeps its name and origin, so
//! errors and generated code still point at the model. Folding rounds differently from the
//! unfolded graph (the weights are scaled once, in f64, then rounded to f32): results agree
//! with the original's within the project tolerance, not bit for bit.

pub mod affine;
pub mod cse;
pub mod fold;
pub mod reshape;
pub mod sums;
pub mod transpose;

use std::collections::HashSet;
use std::sync::Arc;

use crate::ir::{Graph, Node, NodeId, Op, Tensor};

/// Runs the simplification passes in order and removes the nodes no output needs.
pub fn simplify(g: &Graph) -> Graph {
    let g = fold::fold_constants(g);
    let g = cse::eliminate(&g);
    let g = reshape::ops_before_reshapes(&g);
    let g = affine::fold_into_weights(&g);
    let g = sums::join_convolution_sums(&g);
    let g = transpose::transpose_products(&g);
    transpose::reductions_read_transposes(&g)
}

/// A new graph made while walking an old one in order: `map` gives each old node's
/// replacement in the new graph.
struct Rebuild<'g> {
    old: &'g Graph,
    new: Graph,
    map: Vec<NodeId>,
    names: HashSet<String>,
}

impl<'g> Rebuild<'g> {
    fn new(old: &'g Graph) -> Rebuild<'g> {
        Rebuild {
            old,
            new: Graph::new(old.name.clone()),
            map: Vec::with_capacity(old.nodes().len()),
            names: old.nodes().iter().map(|n| n.name.clone()).collect(),
        }
    }

    /// The operands of old node `id`, as nodes of the new graph.
    fn operands(&self, id: NodeId) -> Vec<NodeId> {
        self.old.node(id).inputs.iter().map(|i| self.map[i.index()]).collect()
    }

    /// Old node `id` as it is, on its operands' replacements.
    fn copy(&mut self, id: NodeId) -> NodeId {
        let mut node = self.old.node(id).clone();
        node.inputs = self.operands(id);
        self.new.push_unchecked(node)
    }

    /// A name no node of either graph has, derived from `base`.
    fn fresh(&mut self, base: &str) -> String {
        let mut name = base.to_string();
        let mut k = 1;
        while !self.names.insert(name.clone()) {
            name = format!("{base}.{k}");
            k += 1;
        }
        name
    }

    /// A constant named after `base`, with old node `like`'s origin.
    fn constant(&mut self, base: &str, value: Tensor, like: NodeId) -> NodeId {
        let name = self.fresh(base);
        let id = self.new.add_const(name, Arc::new(value));
        self.new.set_origin(id, self.old.node(like).origin.clone());
        id
    }

    /// Appends `op(inputs)` in place of old node `like`: its name, origin and recomputed mark, and the type
    /// inference gives (which the callers keep equal to the old node's).
    fn replace(&mut self, like: NodeId, op: Op, inputs: Vec<NodeId>) -> NodeId {
        let old = self.old.node(like);
        let node = Node {
            name: old.name.clone(),
            op,
            inputs,
            ty: old.ty.clone(),
            origin: old.origin.clone(),
            recomputed: old.recomputed,
        };
        self.new.push_unchecked(node)
    }

    /// The new graph, with the old outputs' replacements as its outputs and the nodes no
    /// output needs removed.
    fn finish(mut self) -> Graph {
        self.new.outputs = self.old.outputs.clone();
        for o in &mut self.new.outputs {
            o.node = self.map[o.node.index()];
        }
        self.new.prune();
        self.new
    }
}
