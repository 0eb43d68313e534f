//! The graph container.

use std::sync::Arc;

use super::{infer::infer, Op, ShapeError, Tensor, TensorType};

/// Index of a node in [`Graph::nodes`]; also names the node's (single) result value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

impl NodeId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// One primitive op application.
#[derive(Clone, Debug)]
pub struct Node {
    /// Name of the node's result; unique within the graph. For inputs, the input's name.
    pub name: String,
    pub op: Op,
    pub inputs: Vec<NodeId>,
    /// Result type.
    pub ty: TensorType,
    /// The model node this primitive was expanded from (its name, or its op type and index
    /// when unnamed), for error messages and comments in generated code.
    pub origin: Option<String>,
    /// A forward value computed again for the backward pass (see
    /// [`crate::autodiff::tape`]). Common-subexpression elimination never merges it with a
    /// node that is not itself recomputed: that would keep the forward value after all.
    pub recomputed: bool,
}

/// A named graph output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Output {
    pub name: String,
    pub node: NodeId,
}

/// A DAG of primitive ops in topological order.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    pub name: String,
    nodes: Vec<Node>,
    pub outputs: Vec<Output>,
}

impl Graph {
    pub fn new(name: impl Into<String>) -> Graph {
        Graph {
            name: name.into(),
            nodes: Vec::new(),
            outputs: Vec::new(),
        }
    }

    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.index()]
    }

    pub fn ids(&self) -> impl DoubleEndedIterator<Item = NodeId> {
        (0..self.nodes.len() as u32).map(NodeId)
    }

    /// The runtime inputs, in order.
    pub fn inputs(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.ids().filter(|&id| matches!(self.node(id).op, Op::Input))
    }

    /// Appends a runtime input of type `ty`.
    pub fn add_input(&mut self, name: impl Into<String>, ty: TensorType) -> NodeId {
        self.push_unchecked(Node {
            name: name.into(),
            op: Op::Input,
            inputs: Vec::new(),
            ty,
            origin: None,
            recomputed: false,
        })
    }

    /// Appends a constant.
    pub fn add_const(&mut self, name: impl Into<String>, value: Arc<Tensor>) -> NodeId {
        let ty = value.ty();
        self.push_unchecked(Node {
            name: name.into(),
            op: Op::Const(value),
            inputs: Vec::new(),
            ty,
            origin: None,
            recomputed: false,
        })
    }

    /// Appends `op(inputs)`, inferring its type. Operands must already be in the graph.
    pub fn add_node(
        &mut self,
        name: impl Into<String>,
        op: Op,
        inputs: Vec<NodeId>,
        origin: Option<String>,
    ) -> Result<NodeId, ShapeError> {
        let types: Vec<&TensorType> = inputs.iter().map(|&i| &self.node(i).ty).collect();
        let ty = infer(&op, &types)?;
        Ok(self.push_unchecked(Node {
            name: name.into(),
            op,
            inputs,
            ty,
            origin,
            recomputed: false,
        }))
    }

    /// Appends a node as given, without inferring or checking its type (the parser uses this
    /// and relies on the verifier).
    pub fn push_unchecked(&mut self, node: Node) -> NodeId {
        self.nodes.push(node);
        NodeId(self.nodes.len() as u32 - 1)
    }

    /// Renames a node; the caller keeps names unique (the verifier checks).
    pub fn set_name(&mut self, id: NodeId, name: String) {
        self.nodes[id.index()].name = name;
    }

    pub fn set_origin(&mut self, id: NodeId, origin: Option<String>) {
        self.nodes[id.index()].origin = origin;
    }

    /// For each node, the nodes that use it as an operand, once per use, in graph order.
    pub fn users(&self) -> Vec<Vec<NodeId>> {
        let mut users = vec![Vec::new(); self.nodes.len()];
        for (i, n) in self.nodes.iter().enumerate() {
            for x in &n.inputs {
                users[x.index()].push(NodeId(i as u32));
            }
        }
        users
    }

    /// For each node, whether it is a graph output.
    pub fn output_mask(&self) -> Vec<bool> {
        let mut outputs = vec![false; self.nodes.len()];
        for o in &self.outputs {
            outputs[o.node.index()] = true;
        }
        outputs
    }

    /// For each node, how many times it is used as an operand or graph output.
    pub fn use_counts(&self) -> Vec<usize> {
        let mut uses = vec![0; self.nodes.len()];
        for n in &self.nodes {
            for i in &n.inputs {
                uses[i.index()] += 1;
            }
        }
        for o in &self.outputs {
            uses[o.node.index()] += 1;
        }
        uses
    }

    /// Removes nodes that no output depends on (inputs are always kept), renumbering the
    /// rest in order.
    pub fn prune(&mut self) {
        let mut live = vec![false; self.nodes.len()];
        for o in &self.outputs {
            live[o.node.index()] = true;
        }
        for i in (0..self.nodes.len()).rev() {
            if matches!(self.nodes[i].op, Op::Input) {
                live[i] = true;
            }
            if live[i] {
                for inp in &self.nodes[i].inputs {
                    live[inp.index()] = true;
                }
            }
        }
        let mut remap = vec![NodeId(u32::MAX); self.nodes.len()];
        let old = std::mem::take(&mut self.nodes);
        for (i, mut n) in old.into_iter().enumerate() {
            if live[i] {
                n.inputs.iter_mut().for_each(|x| *x = remap[x.index()]);
                remap[i] = NodeId(self.nodes.len() as u32);
                self.nodes.push(n);
            }
        }
        self.outputs.iter_mut().for_each(|o| o.node = remap[o.node.index()]);
    }
}
