//! Graph construction during import: unique names, ONNX value bindings, constant folding.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::interp::eval_op;
use crate::ir::{infer::infer, Graph, NodeId, Op, Output, Tensor, TensorType};

/// Results of ops on constants are computed at import time when they have at most this many
/// elements. Shape computations are tiny; weights derived from constants (folded batch-norm
/// scales) are small; anything larger stays an op, so a model cannot make the importer
/// allocate a huge tensor.
pub(super) const FOLD_LIMIT: usize = 1 << 16;

pub(super) struct Builder {
    graph: Graph,
    /// ONNX value name -> node holding it.
    values: HashMap<String, NodeId>,
    /// ONNX value names that exist in the model but that swflow does not compute, with why.
    missing: HashMap<String, String>,
    /// Node names in use or reserved for the model's own value names.
    names: HashSet<String>,
    origin: Option<String>,
    prefix: String,
    counter: usize,
    /// Graph inputs an operand that had to be constant was computed from, when import stops
    /// on such an operand.
    pub wanted: Vec<String>,
    /// Training-mode dropout draws its mask from a noise input ([`super::ImportOptions::dropout_noise`]).
    pub dropout_noise: bool,
}

impl Builder {
    pub fn new(name: &str, reserved: HashSet<String>) -> Builder {
        Builder {
            graph: Graph::new(name),
            values: HashMap::new(),
            missing: HashMap::new(),
            names: reserved,
            origin: None,
            prefix: String::new(),
            counter: 0,
            wanted: Vec::new(),
            dropout_noise: false,
        }
    }

    /// Starts expanding one model node: generated names derive from `prefix`, and new nodes
    /// record `origin`.
    pub fn begin(&mut self, origin: String, prefix: String) {
        self.origin = Some(origin);
        self.prefix = prefix;
        self.counter = 0;
    }

    /// Number of nodes so far; ids at or above a mark were created after it.
    pub fn mark(&self) -> usize {
        self.graph.nodes().len()
    }

    fn fresh(&mut self) -> String {
        loop {
            let name = format!("{}/{}", self.prefix, self.counter);
            self.counter += 1;
            if self.names.insert(name.clone()) {
                return name;
            }
        }
    }

    /// `base`, or `base_1`, `base_2`, ... if taken, reserved for a value the importer adds.
    pub fn unused_name(&mut self, base: &str) -> String {
        let mut name = base.to_string();
        let mut k = 1;
        while !self.names.insert(name.clone()) {
            name = format!("{base}_{k}");
            k += 1;
        }
        name
    }

    /// Binds an ONNX value name to a node.
    pub fn bind(&mut self, name: &str, id: NodeId) {
        self.values.insert(name.to_string(), id);
    }

    pub fn is_bound(&self, name: &str) -> bool {
        self.values.contains_key(name)
    }

    /// Records that `name` is produced by the model but not computed by swflow.
    pub fn mark_missing(&mut self, name: &str, reason: String) {
        self.missing.insert(name.to_string(), reason);
    }

    pub fn lookup(&self, name: &str) -> Option<NodeId> {
        self.values.get(name).copied()
    }

    /// The node holding ONNX value `name`, or why there is none.
    pub fn resolve(&self, name: &str) -> Result<NodeId, String> {
        if let Some(id) = self.lookup(name) {
            return Ok(id);
        }
        match self.missing.get(name) {
            Some(why) => Err(format!("value '{name}' is not available: {why}")),
            None => Err(format!(
                "value '{name}' is not defined by any initializer, input or earlier node"
            )),
        }
    }

    /// Gives a node created for the current model node its final (model) name.
    pub fn rename(&mut self, id: NodeId, name: &str) {
        let old = self.graph.node(id).name.clone();
        self.names.remove(&old);
        self.names.insert(name.to_string());
        self.graph.set_name(id, name.to_string());
    }

    pub fn input(&mut self, name: &str, ty: TensorType) -> NodeId {
        self.names.insert(name.to_string());
        self.graph.add_input(name, ty)
    }

    pub fn constant_named(&mut self, name: &str, t: Tensor) -> NodeId {
        self.names.insert(name.to_string());
        self.graph.add_const(name, Arc::new(t))
    }

    /// A new constant of the current model node.
    pub fn constant(&mut self, t: Tensor) -> NodeId {
        let name = self.fresh();
        let id = self.graph.add_const(name, Arc::new(t));
        self.graph.set_origin(id, self.origin.clone());
        id
    }

    pub fn ty(&self, id: NodeId) -> &TensorType {
        &self.graph.node(id).ty
    }

    /// The value of a constant node.
    pub fn const_value(&self, id: NodeId) -> Option<&Arc<Tensor>> {
        match &self.graph.node(id).op {
            Op::Const(t) => Some(t),
            _ => None,
        }
    }

    /// Names of the graph inputs `id` is computed from, in graph order.
    pub fn feeding_inputs(&self, id: NodeId) -> Vec<String> {
        let mut reached = vec![false; id.index() + 1];
        reached[id.index()] = true;
        let mut names = Vec::new();
        for k in (0..=id.index()).rev() {
            if !reached[k] {
                continue;
            }
            let node = &self.graph.nodes()[k];
            if matches!(node.op, Op::Input) {
                names.push(node.name.clone());
            }
            for i in &node.inputs {
                reached[i.index()] = true;
            }
        }
        names.reverse();
        names
    }

    /// Appends `op(inputs)`; when every operand is constant and the result is small, computes
    /// it now and appends a constant instead.
    pub fn op(&mut self, op: Op, inputs: &[NodeId]) -> Result<NodeId, String> {
        let types: Vec<&TensorType> = inputs.iter().map(|&i| self.ty(i)).collect();
        let ty = infer(&op, &types).map_err(|e| e.0)?;
        let consts: Option<Vec<&Tensor>> = inputs.iter().map(|&i| self.const_value(i).map(|t| &**t)).collect();
        if let Some(args) = consts.filter(|_| ty.numel() <= FOLD_LIMIT) {
            let value = eval_op(&op, &args, &ty)?;
            return Ok(self.constant(value));
        }
        let name = self.fresh();
        self.graph
            .add_node(name, op, inputs.to_vec(), self.origin.clone())
            .map_err(|e| e.0)
    }

    pub fn finish(mut self, outputs: Vec<Output>) -> Graph {
        self.graph.outputs = outputs;
        self.graph
    }
}
