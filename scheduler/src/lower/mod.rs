//! Lowering of a graph to loop IR: one or more kernels per primitive op, following a fusion
//! plan ([`swflow_frontend::fuse`]).
//!
//! Reshapes become views (no kernel). Padding is read in place: a convolution or pooling
//! with padding reads its input through a guarded access, whose points outside the input read
//! the pad value, and a `pad` node is one guarded copy (which fusion turns into its readers'
//! index expressions). A strided transposed convolution becomes one kernel per residue of its
//! output positions modulo the stride, each taking only the taps that reach it (see
//! `nn::conv_transpose`). Average pooling is a windowed sum
//! followed by a division by a constant divisor.
//!
//! A node the plan joins into its consumers gets no kernel: its single kernel becomes an
//! [`inline::Template`], and every kernel that reads its tensor computes the template there
//! instead ([`inline`]). A reduction the plan gives an epilogue keeps its last kernel waiting
//! until the kernel of the epilogue node is made, then takes that kernel's value as its
//! epilogue and writes that node's tensor (keeping its own value too when the plan says so). Tensors no kernel touches are dropped at the end.

mod elementwise;
mod inline;
mod nn;

pub(crate) use inline::drop_untouched;

pub(crate) use inline::compact_operands;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use swflow_frontend::fuse::{unfused, Decision, Plan};
use swflow_frontend::ir::{Graph, NodeId, Op, Tensor, TensorType};

use crate::loops::{
    Access, Affine, Expr, Index, Kernel, Loop, LoopKind, Program, Reduction, Scalar, Stmt, TensorId, TensorInfo,
    TensorKind,
};

/// A graph node that cannot be lowered.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("node '{node}' ({op}): {reason}")]
pub struct LowerError {
    pub node: String,
    pub op: String,
    pub reason: String,
}

/// Lowers a verified graph, one kernel (or a few) per primitive.
pub fn lower(g: &Graph) -> Result<Program, LowerError> {
    lower_fused(g, &unfused(g))
}

/// Lowers a verified graph, joining the nodes `plan` joins into their consumers' kernels.
pub fn lower_fused(g: &Graph, plan: &Plan) -> Result<Program, LowerError> {
    let mut cx = Lowering {
        p: Program {
            name: g.name.clone(),
            tensors: Vec::new(),
            kernels: Vec::new(),
            inputs: Vec::new(),
            index_extents: swflow_frontend::random::index_extents(g),
            outputs: Vec::new(),
            updates: Vec::new(),
            tape: None,
        },
        of: HashMap::new(),
        node_names: g.nodes().iter().map(|n| n.name.clone()).collect(),
        tensor_names: HashSet::new(),
        kernel_names: HashSet::new(),
        templates: HashMap::new(),
        pending: HashMap::new(),
    };
    for id in g.ids() {
        let n = g.node(id);
        let kind = match &n.op {
            Op::Input => TensorKind::Input,
            Op::Const(t) => TensorKind::Const(t.clone()),
            Op::Reshape { .. } => TensorKind::View(cx.p.storage(cx.of[&n.inputs[0]])),
            _ => TensorKind::Temp,
        };
        let t = cx.add_tensor(n.name.clone(), n.ty.clone(), kind, true);
        cx.of.insert(id, t);
        if matches!(n.op, Op::Input) {
            cx.p.inputs.push(t);
        }
        if !matches!(n.op, Op::Input | Op::Const(_) | Op::Reshape { .. }) && n.ty.numel() > 0 {
            let node = NodeCx {
                g,
                id,
                out: t,
                joined: plan.is_joined(id),
                epilogue: matches!(plan.decision(id), Decision::Epilogue { .. }),
                keep: matches!(plan.decision(id), Decision::Epilogue { keep: true, .. }),
            };
            let fail = |reason| LowerError {
                node: n.name.clone(),
                op: n.op.name().into(),
                reason,
            };
            cx.lower_node(&node).map_err(fail)?;
            if node.joined && !cx.templates.contains_key(&t) {
                return Err(fail("a node joined into its consumers must lower to one kernel".into()));
            }
            if node.epilogue && !cx.pending.contains_key(&t) {
                return Err(fail(
                    "a reduction with an epilogue must end in a kernel writing its result".into(),
                ));
            }
        }
    }
    if let Some(w) = cx.pending.values().next() {
        return Err(LowerError {
            node: w.node.clone(),
            op: w.kernel.op.clone(),
            reason: "the node meant to be this reduction's epilogue reads it nowhere".into(),
        });
    }
    cx.p.outputs = g.outputs.iter().map(|o| (o.name.clone(), cx.of[&o.node])).collect();
    inline::drop_untouched(&mut cx.p);
    Ok(cx.p)
}

struct Lowering {
    p: Program,
    of: HashMap<NodeId, TensorId>,
    /// Every graph node's name: helper tensors and kernels (`<node>.<suffix>`) must not take
    /// one, even of a node lowered later.
    node_names: HashSet<String>,
    tensor_names: HashSet<String>,
    kernel_names: HashSet<String>,
    /// The values of joined nodes, by their (never stored) tensors.
    templates: HashMap<TensorId, inline::Template>,
    /// Reduction kernels waiting for the kernel that becomes their epilogue, by the tensor
    /// they would write.
    pending: HashMap<TensorId, Waiting>,
}

/// A reduction kernel waiting for its epilogue.
struct Waiting {
    kernel: Kernel,
    /// Its kernel name, and whether that is its node's own name.
    name: String,
    own: bool,
    /// The graph node it computes.
    node: String,
    /// It keeps its reduced value beside the epilogue's result.
    keep: bool,
}

/// `name` if `own` says it is the caller's own or it is neither taken nor reserved, else
/// `name#2`, `name#3`, ...; records the result as taken.
fn unique(taken: &mut HashSet<String>, reserved: &HashSet<String>, name: String, own: bool) -> String {
    let free = |c: &String, taken: &HashSet<String>| !taken.contains(c) && (own && *c == name || !reserved.contains(c));
    let mut candidate = name.clone();
    let mut k = 2;
    while !free(&candidate, taken) {
        candidate = format!("{name}#{k}");
        k += 1;
    }
    taken.insert(candidate.clone());
    candidate
}

/// The node being lowered.
struct NodeCx<'a> {
    g: &'a Graph,
    id: NodeId,
    out: TensorId,
    /// The plan joins it into its consumers: its kernel becomes a template.
    joined: bool,
    /// The plan gives it an epilogue: its kernel waits for the kernel of the epilogue.
    epilogue: bool,
    /// With its epilogue, the kernel also keeps the node's own value.
    keep: bool,
}

impl NodeCx<'_> {
    fn node(&self) -> &swflow_frontend::ir::Node {
        self.g.node(self.id)
    }

    fn input_ty(&self, i: usize) -> &TensorType {
        &self.g.node(self.node().inputs[i]).ty
    }
}

fn par(name: impl Into<String>, extent: usize) -> Loop {
    Loop {
        name: name.into(),
        extent,
        kind: LoopKind::Parallel,
    }
}

fn red(name: impl Into<String>, extent: usize) -> Loop {
    Loop {
        name: name.into(),
        extent,
        kind: LoopKind::Reduce,
    }
}

/// Subscripts that read a tensor of shape `from` broadcast (numpy rules) to the loops
/// `0..to.len()` that range over shape `to`.
fn broadcast_index(from: &[usize], to: &[usize]) -> Vec<Affine> {
    let lead = to.len() - from.len();
    (0..from.len())
        .map(|j| {
            if from[j] == 1 && to[lead + j] != 1 {
                Affine::constant(0)
            } else {
                Affine::var(lead + j)
            }
        })
        .collect()
}

/// One parallel loop per dimension of `shape`, named `d0, d1, ...`.
fn dims(shape: &[usize]) -> Vec<Loop> {
    shape
        .iter()
        .enumerate()
        .map(|(i, &e)| par(format!("d{i}"), e))
        .collect()
}

fn vars(n: usize) -> Vec<Affine> {
    (0..n).map(Affine::var).collect()
}

/// A load of `index` from operand `operand` (a tensor of `shape`), guarded with `value` when
/// some subscript leaves the tensor over the loops' ranges: padding read in place.
pub(super) fn load_padded(operand: usize, index: Vec<Affine>, loops: &[Loop], shape: &[usize], value: Scalar) -> Expr {
    let extents: Vec<usize> = loops.iter().map(|l| l.extent).collect();
    let leaves = index.iter().zip(shape).any(|(x, &dim)| {
        let (lo, hi) = x.range(&extents);
        lo < 0 || hi >= dim as i64
    });
    let Expr::Load(mut a) = Expr::load(operand, index) else {
        unreachable!("Expr::load makes a load")
    };
    a.pad = leaves.then_some(value);
    Expr::Load(a)
}

fn target(index: Vec<Affine>) -> Access {
    Access::new(0, index.into_iter().map(Index::Affine).collect())
}

impl Lowering {
    /// Adds a tensor; `own` when it is the tensor of the graph node of that name.
    fn add_tensor(&mut self, name: String, ty: TensorType, kind: TensorKind, own: bool) -> TensorId {
        let name = unique(&mut self.tensor_names, &self.node_names, name, own);
        self.p.tensors.push(TensorInfo { name, ty, kind });
        TensorId(self.p.tensors.len() as u32 - 1)
    }

    fn input(&self, n: &NodeCx, i: usize) -> TensorId {
        self.of[&n.node().inputs[i]]
    }

    /// A helper tensor of the node being lowered, named `<node>.<suffix>`.
    fn temp(&mut self, n: &NodeCx, suffix: &str, ty: TensorType) -> TensorId {
        self.add_tensor(format!("{}.{suffix}", n.node().name), ty, TensorKind::Temp, false)
    }

    fn constant(&mut self, n: &NodeCx, suffix: &str, t: Tensor) -> TensorId {
        self.add_tensor(
            format!("{}.{suffix}", n.node().name),
            t.ty(),
            TensorKind::Const(Arc::new(t)),
            false,
        )
    }

    /// Appends a kernel, with the templates of joined producers expanded in its value (or,
    /// for a joined node, records it as the node's template); `suffix` distinguishes helper
    /// kernels of one node.
    #[allow(clippy::too_many_arguments)]
    fn kernel(
        &mut self,
        n: &NodeCx,
        suffix: &str,
        loops: Vec<Loop>,
        operands: Vec<TensorId>,
        target: Access,
        value: Expr,
        reduce: Option<Reduction>,
    ) -> Result<(), String> {
        self.finished_kernel(n, suffix, loops, operands, target, value, reduce, None)
    }

    /// [`Lowering::kernel`] of a reduction whose target takes `epilogue` of each reduced value
    /// (`acc`) once every point has folded into it (with nothing to fold, of the initial
    /// value).
    #[allow(clippy::too_many_arguments)]
    fn finished_kernel(
        &mut self,
        n: &NodeCx,
        suffix: &str,
        loops: Vec<Loop>,
        operands: Vec<TensorId>,
        target: Access,
        value: Expr,
        reduce: Option<Reduction>,
        epilogue: Option<Expr>,
    ) -> Result<(), String> {
        let node = n.node();
        if loops.iter().any(|l| l.kind == LoopKind::Parallel && l.extent == 0) {
            return Ok(()); // Nothing to write.
        }
        let (loops, value, reduce, epilogue) = match reduce {
            // Nothing to fold: every target element is the reduction's initial value (after
            // the epilogue).
            Some(r) if loops.iter().any(|l| l.extent == 0) => {
                let value = match epilogue {
                    Some(mut e) => {
                        inline::replace_acc(&mut e, &Expr::Const(r.init));
                        e
                    }
                    None => Expr::Const(r.init),
                };
                let loops = loops.into_iter().filter(|l| l.kind == LoopKind::Parallel).collect();
                (loops, value, None, None)
            }
            _ => (loops, value, reduce, epilogue),
        };
        let base = if suffix.is_empty() {
            node.name.clone()
        } else {
            format!("{}.{suffix}", node.name)
        };
        let mut k = Kernel {
            name: String::new(),
            op: node.op.name().to_string(),
            origin: node.origin.clone(),
            fused: Vec::new(),
            loops,
            operands,
            stmt: Stmt {
                target,
                value,
                reduce,
                epilogue,
                keep: None,
            },
            schedule: None,
        };
        inline::expand(&mut k, &self.templates)?;
        if n.joined {
            let template = inline::Template::of(k, node.name.clone())?;
            if self.templates.insert(n.out, template).is_some() {
                return Err("a node joined into its consumers must lower to one kernel".into());
            }
            return Ok(());
        }
        let own = suffix.is_empty();
        if n.epilogue && k.operands[0] == n.out {
            let waiting = Waiting {
                kernel: k,
                name: base,
                own,
                node: node.name.clone(),
                keep: n.keep,
            };
            if self.pending.insert(n.out, waiting).is_some() {
                return Err("a reduction with an epilogue must end in one kernel writing its result".into());
            }
            return Ok(());
        }
        let reduction = k
            .operands
            .iter()
            .skip(1)
            .copied()
            .find(|t| self.pending.contains_key(t));
        let (mut k, base, own) = match reduction {
            // A reduction that came out empty writes a constant, and has nothing to keep
            // beside an epilogue: it keeps a kernel of its own.
            Some(t) if self.pending[&t].keep && self.pending[&t].kernel.stmt.reduce.is_none() => {
                let mut w = self.pending.remove(&t).expect("found above");
                w.kernel.name = unique(&mut self.kernel_names, &self.node_names, w.name, w.own);
                self.p.kernels.push(w.kernel);
                (k, base, own)
            }
            Some(t) => {
                let w = self.pending.remove(&t).expect("found above");
                (
                    inline::attach_epilogue(w.kernel, k, node.name.clone(), w.keep)?,
                    w.name,
                    w.own,
                )
            }
            None => (k, base, own),
        };
        k.name = unique(&mut self.kernel_names, &self.node_names, base, own);
        self.p.kernels.push(k);
        Ok(())
    }

    fn lower_node(&mut self, n: &NodeCx) -> Result<(), String> {
        match &n.node().op {
            Op::Unary(_) | Op::Binary(_) | Op::Select | Op::Cast { .. } | Op::Broadcast { .. } => {
                elementwise::lower(self, n)
            }
            Op::Transpose { perm } => elementwise::transpose(self, n, perm),
            Op::Slice { starts, steps, .. } => elementwise::slice(self, n, starts, steps),
            Op::Pad { pads, value } => elementwise::pad(self, n, pads, *value),
            Op::Concat { axis } => elementwise::concat(self, n, *axis),
            Op::Gather { axis } => elementwise::gather(self, n, *axis),
            Op::Reduce { kind, axes } => elementwise::reduce(self, n, *kind, axes),
            Op::MatMul => nn::matmul(self, n),
            Op::Conv(c) => nn::conv(self, n, c),
            Op::ConvTranspose { conv, output_padding } => nn::conv_transpose(self, n, conv, output_padding),
            Op::Pool(p) => nn::pool(self, n, p),
            Op::Input | Op::Const(_) | Op::Reshape { .. } => {
                unreachable!("handled without kernels")
            }
        }
    }
}
