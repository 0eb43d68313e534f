//! Reverse-mode automatic differentiation, graph to graph.
//!
//! [`gradients`] extends a graph with the nodes that compute the gradient of a loss with
//! respect to chosen nodes. It walks the graph backwards once, from the loss to the nodes it
//! differentiates with respect to, and applies each node's gradient rule (`rules.rs`), which
//! emits ordinary primitives: the backward pass lowers, schedules and runs like the forward.
//!
//! Only *active* nodes take part (activity analysis): float nodes that depend on a node of
//! `wrt` and that the loss depends on. Labels, integer tensors, shape computations and frozen
//! parameters cost no gradient work: a rule may build a contribution for an inactive operand
//! (a convolution's input gradient when only its weight is wanted), but every backward node
//! that no gradient needs is dropped at the end. A node with several consumers gets the sum of their
//! contributions, added in reverse graph order, so the order of additions is fixed and
//! gradients are identical from run to run.

mod rules;
pub mod tape;

use crate::ir::{DType, Graph, NodeId, Output, Tensor, TensorType};

pub(crate) use rules::Builder;

/// A graph that cannot be differentiated, naming the node, its op and the reason.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("node '{node}' ({op}): {reason}")]
pub struct GradError {
    pub node: String,
    pub op: String,
    pub reason: String,
}

/// A graph extended with a backward pass.
#[derive(Clone, Debug)]
pub struct Gradients {
    /// The original nodes (same ids), then the nodes of the backward pass.
    pub graph: Graph,
    /// The gradient of the loss with respect to each node of `wrt`, in order: a node of the
    /// same type (a constant zero when the loss does not depend on it).
    pub grads: Vec<NodeId>,
}

/// Whether values of this type carry gradients.
fn is_float(d: DType) -> bool {
    matches!(d, DType::F32 | DType::F64)
}

/// The gradient of the sum of the elements of `loss` with respect to each node of `wrt`.
///
/// Every node of `wrt` and the loss must be floating-point. The result graph keeps every
/// original node under its id and adds the backward pass after them; its outputs are the
/// original graph's.
pub fn gradients(g: &Graph, loss: NodeId, wrt: &[NodeId]) -> Result<Gradients, GradError> {
    let fail = |id: NodeId, reason: String| GradError {
        node: g.node(id).name.clone(),
        op: g.node(id).op.name().to_string(),
        reason,
    };
    for &id in wrt.iter().chain([&loss]) {
        if !is_float(g.node(id).ty.dtype) {
            return Err(fail(
                id,
                format!("is {}, not a floating-point tensor", g.node(id).ty.dtype),
            ));
        }
    }
    let active = activity(g, loss, wrt);
    let mut b = Builder::new(g.clone());
    let mut grad: Vec<Option<NodeId>> = vec![None; g.nodes().len()];
    let loss_ty = g.node(loss).ty.clone();
    b.set_origin(&g.node(loss).name);
    let one = b.scalar(loss_ty.dtype, 1.0);
    grad[loss.index()] = Some(b.broadcast(one, &loss_ty.shape).map_err(|r| fail(loss, r))?);
    for id in g.ids().rev() {
        let (Some(gy), true) = (grad[id.index()], active[id.index()]) else {
            continue;
        };
        let node = g.node(id);
        if node.inputs.iter().all(|x| !active[x.index()]) {
            continue;
        }
        b.set_origin(&node.name);
        let contributions = rules::rule(&mut b, g, id, gy).map_err(|r| fail(id, r))?;
        for (&x, gx) in node.inputs.iter().zip(contributions) {
            let Some(gx) = gx.filter(|_| active[x.index()]) else {
                continue;
            };
            grad[x.index()] = Some(match grad[x.index()] {
                None => gx,
                Some(acc) => b.add(acc, gx).map_err(|r| fail(id, r))?,
            });
        }
    }
    let mut grads = Vec::with_capacity(wrt.len());
    for &w in wrt {
        let gw = match grad[w.index()] {
            Some(gw) => gw,
            None => {
                let ty: &TensorType = &g.node(w).ty;
                b.constant(Tensor::zeros(ty))
            }
        };
        grads.push(gw);
    }
    let graph = without_dead_backward(b.finish(), g.nodes().len(), &mut grads);
    Ok(Gradients { graph, grads })
}

/// A gradient program: see [`gradient_program`].
#[derive(Clone, Debug)]
pub struct GradientProgram {
    /// Outputs: the loss, then one gradient per node differentiated with respect to.
    pub graph: Graph,
    /// What the backward pass keeps from the forward pass, in bytes, against the forward's own
    /// memory.
    pub tape: tape::TapeSummary,
    /// The values this program recomputes that it could store instead
    /// ([`tape::storable`]); their ids are those of the graph differentiated.
    pub storable: Vec<tape::Storable>,
    /// The values it stores although they could be recomputed.
    pub stored: Vec<NodeId>,
    /// What it was made from.
    pub source: Differentiated,
}

/// A graph with its backward pass, before the saved-value plan is applied: what a
/// [`GradientProgram`] is made from, again, when other values are stored.
#[derive(Clone, Debug)]
pub struct Differentiated {
    graph: Graph,
    /// The first node of the backward pass.
    first: usize,
    /// The program's outputs: their names and nodes.
    outputs: Vec<(String, NodeId)>,
}

impl Differentiated {
    /// The gradient program that keeps the values of `stored` (ids of
    /// [`GradientProgram::storable`]) instead of recomputing them, and recomputes every other
    /// storable value.
    pub fn program(&self, stored: &[NodeId]) -> GradientProgram {
        let plan = tape::plan_storing(&self.graph, self.first, stored);
        let mut roots: Vec<NodeId> = self.outputs.iter().map(|(_, id)| *id).collect();
        let mut graph = tape::apply(&self.graph, self.first, &plan, &mut roots);
        graph.outputs = self
            .outputs
            .iter()
            .zip(roots)
            .map(|((name, _), node)| Output {
                name: name.clone(),
                node,
            })
            .collect();
        graph.prune();
        GradientProgram {
            graph,
            tape: tape::summary(&self.graph, self.first, &plan),
            storable: tape::storable(&self.graph, self.first, &tape::plan(&self.graph, self.first)),
            stored: stored.to_vec(),
            source: self.clone(),
        }
    }

    /// The same, with the program's first `n` outputs only.
    pub fn with_outputs(&self, n: usize) -> Differentiated {
        let mut d = self.clone();
        d.outputs.truncate(n);
        d
    }
}

impl GradientProgram {
    /// The same program with every storable value stored: what the backward reads comes
    /// from memory wherever it can.
    pub fn storing_all(&self) -> GradientProgram {
        let all: Vec<NodeId> = self.storable.iter().map(|s| s.id).collect();
        self.source.program(&all)
    }
}

/// The gradient program of a graph whose first output is a loss: its outputs are the loss,
/// then the gradient of the loss with respect to each node of `wrt`, named
/// `grad/<node name>`, then the outputs of `g` numbered in `carry` (values a training step
/// also updates, such as running statistics). Forward values the backward reads are kept or
/// recomputed by the saved-value plan ([`tape::plan`]); nodes that no output needs are
/// dropped.
pub fn gradient_program(g: &Graph, wrt: &[NodeId], carry: &[usize]) -> Result<GradientProgram, GradError> {
    let Some(loss) = g.outputs.first() else {
        return Err(GradError {
            node: g.name.clone(),
            op: "graph".into(),
            reason: "a gradient program needs a loss output, and the graph has no output".into(),
        });
    };
    let r = gradients(g, loss.node, wrt)?;
    let outputs = std::iter::once((loss.name.clone(), loss.node))
        .chain(
            wrt.iter()
                .zip(&r.grads)
                .map(|(&w, &gw)| (format!("grad/{}", g.node(w).name), gw)),
        )
        .chain(carry.iter().map(|&k| (g.outputs[k].name.clone(), g.outputs[k].node)))
        .collect();
    let source = Differentiated {
        graph: r.graph,
        first: g.nodes().len(),
        outputs,
    };
    Ok(source.program(&[]))
}

/// `g` without the nodes from `first` on that no node of `roots` needs (a rule builds every
/// operand's contribution; those of inactive operands are dropped here), the roots renumbered.
fn without_dead_backward(g: Graph, first: usize, roots: &mut [NodeId]) -> Graph {
    let n = g.nodes().len();
    let mut live = vec![false; n];
    for r in roots.iter() {
        live[r.index()] = true;
    }
    for id in g.ids().rev().take_while(|id| id.index() >= first) {
        if live[id.index()] {
            for x in &g.node(id).inputs {
                live[x.index()] = true;
            }
        }
    }
    let mut out = Graph::new(g.name.clone());
    out.outputs = g.outputs.clone();
    let mut renumbered: Vec<Option<NodeId>> = vec![None; n];
    for id in g.ids() {
        if id.index() >= first && !live[id.index()] {
            continue;
        }
        let mut node = g.node(id).clone();
        for x in &mut node.inputs {
            *x = renumbered[x.index()].expect("operands come first and are live");
        }
        renumbered[id.index()] = Some(out.push_unchecked(node));
    }
    for r in roots.iter_mut() {
        *r = renumbered[r.index()].expect("roots are live");
    }
    out
}

/// Per node, whether it is active: floating-point, reachable forward from `wrt` and backward
/// from `loss`.
fn activity(g: &Graph, loss: NodeId, wrt: &[NodeId]) -> Vec<bool> {
    let n = g.nodes().len();
    let mut varied = vec![false; n];
    for id in g.ids() {
        let node = g.node(id);
        varied[id.index()] =
            is_float(node.ty.dtype) && (wrt.contains(&id) || node.inputs.iter().any(|x| varied[x.index()]));
    }
    let mut useful = vec![false; n];
    useful[loss.index()] = true;
    for id in g.ids().rev() {
        if useful[id.index()] {
            for x in &g.node(id).inputs {
                useful[x.index()] = true;
            }
        }
    }
    (0..n).map(|i| varied[i] && useful[i]).collect()
}
