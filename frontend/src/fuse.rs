//! Operator fusion: which primitives share a kernel.
//!
//! Every op has a [`Pattern`], the part it can play in a fused kernel. One table, [`RULES`],
//! says which producer patterns join which consumer patterns, and how. [`plan`] walks a graph
//! in order and decides for every node whether it gets kernels of its own or is joined into
//! its consumers; lowering follows the plan. A joined node is never materialised in main
//! memory: each consumer computes its value where it needs it.
//!
//! A node is inlined only when every one of its uses is a consumer the table admits and it is
//! not a graph output. A node with several uses is computed once per use, so it is inlined
//! only when that moves fewer bytes than storing it once and reading it back per use (see
//! [`Plan::sources`]).
//!
//! An elementwise producer joins a contraction only as its prologue ([`prologue_fits`]): a
//! function of one element of one tensor and of small parameters, which the contraction's
//! code applies once to each element of that tensor's boxes in LDM rather than at every
//! product that reads it.
//!
//! Then, a reduction (a contraction or a reduce) takes an elementwise consumer as its
//! epilogue when the reduced values flow into that consumer, unchanged in shape and type,
//! through inlined elementwise nodes used once each: the consumer's computation runs on the
//! reduced values while they are still in LDM. The reduction's own result is not stored,
//! unless it is an output or other nodes read it or the inlined nodes between, all after the
//! consumer: then the kernel keeps it, storing it beside the consumer's tensor (a
//! pre-activation that the backward pass reads, for example), and those nodes read it there.

use std::fmt::Write;

use crate::ir::{BinaryOp, Graph, NodeId, Op, UnaryOp};

/// The part an op can play in a fused kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// Elementwise arithmetic: unary and binary functions, select, casts.
    Elementwise,
    /// Data movement whose every read is an affine function of the written position:
    /// broadcast, transpose, slice.
    Movement,
    /// Reduction over axes.
    Reduce,
    /// Windowed maximum or average.
    Pool,
    /// Convolutions and matrix products.
    Contraction,
    /// Everything else: inputs, constants, reshapes (views of their operand), concatenation,
    /// gathers. They are never joined into another kernel, and nothing is joined into them.
    Opaque,
}

impl Pattern {
    pub fn of(op: &Op) -> Pattern {
        match op {
            Op::Unary(_) | Op::Binary(_) | Op::Select | Op::Cast { .. } => Pattern::Elementwise,
            Op::Broadcast { .. } | Op::Transpose { .. } | Op::Slice { .. } | Op::Pad { .. } => Pattern::Movement,
            Op::Reduce { .. } => Pattern::Reduce,
            Op::Pool(_) => Pattern::Pool,
            Op::Conv(_) | Op::ConvTranspose { .. } | Op::MatMul => Pattern::Contraction,
            Op::Input | Op::Const(_) | Op::Reshape { .. } | Op::Concat { .. } | Op::Gather { .. } => Pattern::Opaque,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Pattern::Elementwise => "elementwise",
            Pattern::Movement => "movement",
            Pattern::Reduce => "reduce",
            Pattern::Pool => "pool",
            Pattern::Contraction => "contraction",
            Pattern::Opaque => "opaque",
        }
    }
}

/// How a producer joins a consumer's kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Join {
    /// The producer's value is computed inside the consumer's statement, at the consumer's
    /// subscripts composed with the producer's own.
    Inline,
    /// The consumer's computation becomes the producer's epilogue: it runs on each reduced
    /// element once the reduction is complete, and writes the consumer's tensor.
    Epilogue,
}

/// One line of the fusion table.
#[derive(Clone, Copy, Debug)]
pub struct Rule {
    pub name: &'static str,
    pub producer: Pattern,
    /// Consumer patterns the producer joins.
    pub consumers: &'static [Pattern],
    pub join: Join,
}

use Pattern::*;

/// The fusion rules. A producer joins a consumer by the first rule that matches both patterns;
/// it is joined into its consumers when a rule admits each of them.
///
/// An elementwise producer joins a contraction only as its *prologue* ([`prologue_fits`]): a
/// convolution or matrix product reads each operand element many times, and would compute the
/// producer again every time, so the producer must be a function of one element of one
/// tensor (and of small per-position parameters, such as a batch normalisation's scale and
/// shift), which the code applies once to each element of that tensor's LDM box before the
/// products read it. For the same reason a producer whose value holds a CPE for many cycles
/// per element (a library routine such as `exp` or `pow`, a division, a square root) is not
/// joined into a pooling whose windows overlap (a local response normalisation before a 3x3
/// stride-2 max pool would compute its square roots and division 2.25 times per element).
pub const RULES: &[Rule] = &[
    Rule {
        name: "elementwise-chain",
        producer: Elementwise,
        consumers: &[Elementwise, Movement],
        join: Join::Inline,
    },
    Rule {
        name: "reduction-producer",
        producer: Elementwise,
        consumers: &[Reduce],
        join: Join::Inline,
    },
    Rule {
        name: "pool-producer",
        producer: Elementwise,
        consumers: &[Pool],
        join: Join::Inline,
    },
    Rule {
        name: "contraction-prologue",
        producer: Elementwise,
        consumers: &[Contraction],
        join: Join::Inline,
    },
    Rule {
        name: "movement-as-index",
        producer: Movement,
        consumers: &[Elementwise, Movement, Reduce, Pool, Contraction],
        join: Join::Inline,
    },
    Rule {
        name: "contraction-epilogue",
        producer: Contraction,
        consumers: &[Elementwise],
        join: Join::Epilogue,
    },
    Rule {
        name: "reduction-epilogue",
        producer: Reduce,
        consumers: &[Elementwise],
        join: Join::Epilogue,
    },
];

/// The rule (index into [`RULES`]) by which a producer of pattern `producer` joins a consumer
/// of pattern `consumer` in the way `join`, if any.
pub fn rule(producer: Pattern, consumer: Pattern, join: Join) -> Option<usize> {
    RULES
        .iter()
        .position(|r| r.producer == producer && r.consumers.contains(&consumer) && r.join == join)
}

/// What happens to one node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// The node gets kernels of its own (or none, for inputs, constants and views).
    Own,
    /// The node is inlined into each of its consumers, by the rule for its pattern and the
    /// consumer's.
    Joined,
    /// The node is a reduction whose kernel takes the computation of elementwise node `into`
    /// (and of the inlined nodes between them) as its epilogue, and writes `into`'s tensor;
    /// with `keep`, it also stores its own value, which other nodes read.
    Epilogue { into: NodeId, keep: bool },
}

/// The fusion decisions for one graph.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// One decision per node, by node index.
    pub decisions: Vec<Decision>,
    /// The pattern each node plays as a producer: its op's, except that data movement of a
    /// value computed by joined elementwise producers is elementwise itself.
    pub patterns: Vec<Pattern>,
    /// The stored tensors a consumer reads to compute the node's value where it needs it, with
    /// the bytes it reads of each: the node itself when it is stored, else its operands'
    /// sources, each tensor once however many of the joined nodes read it (a kernel reads a
    /// tensor into one LDM buffer, which a window's shifted reads share), and for data
    /// movement at most the node's own size, since it reads only the part it moves.
    pub sources: Vec<Vec<(NodeId, usize)>>,
}

impl Plan {
    pub fn decision(&self, id: NodeId) -> Decision {
        self.decisions[id.index()]
    }

    pub fn is_joined(&self, id: NodeId) -> bool {
        self.decision(id) == Decision::Joined
    }
}

/// A plan that joins nothing: one group per node.
pub fn unfused(g: &Graph) -> Plan {
    let n = g.nodes().len();
    Plan {
        decisions: vec![Decision::Own; n],
        patterns: g.nodes().iter().map(|n| Pattern::of(&n.op)).collect(),
        sources: g.ids().map(|id| vec![(id, g.node(id).ty.size_bytes())]).collect(),
    }
}

/// Decides, in graph order, which nodes join their consumers.
pub fn plan(g: &Graph) -> Plan {
    let (consumers, outputs) = (g.users(), g.output_mask());
    let mut plan = unfused(g);
    // Per node, of its value computed where it is needed: whether it takes slow operators,
    // and whether it reads a pad's guarded positions.
    let mut slow = vec![false; g.nodes().len()];
    let mut guarded = vec![false; g.nodes().len()];
    // Per node: its value, computed where it is needed, takes only arithmetic with a vector
    // form (see `prologue_fits`), through data movement.
    let mut vector_form = vec![false; g.nodes().len()];
    for id in g.ids() {
        let node = g.node(id);
        let i = id.index();
        let own = Pattern::of(&node.op);
        let joined_elementwise = node
            .inputs
            .iter()
            .any(|&x| plan.is_joined(x) && plan.patterns[x.index()] == Elementwise);
        if own == Movement && joined_elementwise {
            plan.patterns[i] = Elementwise;
        }
        let size = node.ty.size_bytes();
        let cap = if own == Movement { size } else { usize::MAX };
        let sources = joined_sources(node.inputs.iter().map(|x| &plan.sources[x.index()]), cap);
        let reads: usize = sources.iter().map(|&(_, bytes)| bytes).sum();
        let uses = &consumers[i];
        if outputs[i] || uses.is_empty() || node.ty.numel() == 0 {
            continue;
        }
        slow[i] = is_slow(&node.op) || node.inputs.iter().any(|&x| plan.is_joined(x) && slow[x.index()]);
        guarded[i] =
            matches!(node.op, Op::Pad { .. }) || node.inputs.iter().any(|&x| plan.is_joined(x) && guarded[x.index()]);
        vector_form[i] = has_vector_form(&node.op)
            && node
                .inputs
                .iter()
                .all(|&x| !plan.is_joined(x) || vector_form[x.index()]);
        let joins = |c: NodeId| {
            let consumer = g.node(c);
            let padded = consumer
                .inputs
                .iter()
                .enumerate()
                .any(|(j, &x)| x == id && consumer.op.reads_padded(j));
            let recomputed = slow[i] && overlapping_windows(&consumer.op);
            let prologue = plan.patterns[i] != Elementwise
                || Pattern::of(&consumer.op) != Contraction
                || (uses.len() == 1 && !slow[i] && !guarded[i] && vector_form[i] && prologue_fits(g, id, c, &sources));
            !padded
                && !recomputed
                && prologue
                && rule(plan.patterns[i], Pattern::of(&consumer.op), Join::Inline).is_some()
        };
        if !uses.iter().all(|&c| joins(c)) {
            continue;
        }
        // Stored: written once, read once per use. Joined: its operands read once per use.
        let k = uses.len();
        if (k - 1) * reads > (k + 1) * size {
            continue;
        }
        plan.decisions[i] = Decision::Joined;
        plan.sources[i] = sources;
    }
    let mut taken = vec![false; g.nodes().len()];
    for id in g.ids() {
        let node = g.node(id);
        let reduction = rule(plan.patterns[id.index()], Elementwise, Join::Epilogue).is_some();
        if !reduction || node.ty.numel() == 0 {
            continue;
        }
        if let Some((into, keep)) = epilogue_of(g, &plan, &consumers, &outputs, id) {
            if !taken[into.index()] && g.node(into).ty == node.ty {
                taken[into.index()] = true;
                plan.decisions[id.index()] = Decision::Epilogue { into, keep };
            }
        }
    }
    plan
}

/// The sources of a node computed from operands with sources `operands`: each stored tensor
/// once, at the most bytes any operand reads of it, and at most `cap` bytes.
fn joined_sources<'a>(operands: impl Iterator<Item = &'a Vec<(NodeId, usize)>>, cap: usize) -> Vec<(NodeId, usize)> {
    let mut sources: Vec<(NodeId, usize)> = Vec::new();
    for &(tensor, bytes) in operands.flatten() {
        let bytes = bytes.min(cap);
        match sources.iter_mut().find(|(t, _)| *t == tensor) {
            Some((_, b)) => *b = (*b).max(bytes),
            None => sources.push((tensor, bytes)),
        }
    }
    sources
}

/// Whether elementwise node `id`, whose value is computed from the stored tensors `sources`
/// (with the bytes read of each), can be contraction `consumer`'s prologue: an f32 value read
/// as one factor of the products (a matrix product's operand, or a 1x1 convolution's input
/// without groups), each of whose elements is a function of one element of a tensor of its
/// own size and of parameters at most an eighth of its size together (so that computing it
/// once per element of the tensor's box costs little beside the products), when that tensor
/// is no reduction's value (which takes the computation as its epilogue). The caller also
/// asks that the value take no slow operators, reads no pad's guarded positions, and has a
/// vector form ([`has_vector_form`]).
fn prologue_fits(g: &Graph, id: NodeId, consumer: NodeId, sources: &[(NodeId, usize)]) -> bool {
    let node = g.node(id);
    let c = g.node(consumer);
    let size = node.ty.size_bytes();
    let slots: Vec<usize> = (0..c.inputs.len()).filter(|&j| c.inputs[j] == id).collect();
    let factor = match (&c.op, slots.as_slice()) {
        (Op::MatMul, [_]) => true,
        (Op::Conv(a), [0]) => a.groups == 1 && g.node(c.inputs[1]).ty.shape.iter().skip(2).all(|&k| k == 1),
        _ => false,
    };
    let whole: Vec<NodeId> = sources
        .iter()
        .filter(|&&(_, bytes)| bytes >= size)
        .map(|s| s.0)
        .collect();
    let parameters: usize = sources
        .iter()
        .filter(|&&(_, bytes)| bytes < size)
        .map(|&(_, b)| b)
        .sum();
    // A reduction's value takes such a computation as its epilogue instead, on each reduced
    // element once, while it is still in LDM.
    let reduced = |x: NodeId| matches!(Pattern::of(&g.node(x).op), Contraction | Reduce);
    factor
        && node.ty.dtype == crate::ir::DType::F32
        && matches!(node.op, Op::Unary(_) | Op::Binary(_))
        && matches!(whole[..], [x] if !reduced(x))
        && 8 * parameters <= size
}

/// Whether `op` computes its value by arithmetic that the CPEs' vector code has (`+ - * /`,
/// maximum, minimum, ReLU, square root), or moves data through index expressions (not a
/// pad's guarded reads).
fn has_vector_form(op: &Op) -> bool {
    match op {
        Op::Unary(u) => matches!(u, UnaryOp::Relu | UnaryOp::Sqrt),
        Op::Binary(b) => matches!(
            b,
            BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Max | BinaryOp::Min
        ),
        Op::Broadcast { .. } | Op::Transpose { .. } | Op::Slice { .. } => true,
        _ => false,
    }
}

/// Whether elementwise `op` holds a CPE for many cycles per element: a library routine (`exp`,
/// `log`, `pow`, ...), a division or a square root takes tens to hundreds of cycles on a CPE,
/// against one for arithmetic (the scheduler's `schedule::slow` counts the same operators).
fn is_slow(op: &Op) -> bool {
    match op {
        Op::Unary(u) => u.calls_library() || matches!(u, UnaryOp::Sqrt | UnaryOp::Recip | UnaryOp::Sigmoid),
        Op::Binary(b) => b.calls_library() || *b == BinaryOp::Div,
        _ => false,
    }
}

/// Whether `op` is a pooling whose windows overlap (a window spans more than a stride along
/// some axis), so that an inlined producer would be computed again for every window that
/// reads its element.
fn overlapping_windows(op: &Op) -> bool {
    match op {
        Op::Pool(a) => a
            .kernel
            .iter()
            .zip(&a.strides)
            .zip(&a.dilations)
            .any(|((&k, &s), &d)| k.saturating_sub(1) * d + 1 > s),
        _ => false,
    }
}

/// The epilogue of reduction `id`, if it can take one: following uses from `id` through
/// inlined elementwise nodes of `id`'s shape (at each step the first use that qualifies), the
/// first elementwise node with a kernel of its own, and whether the kernel must also keep
/// `id`'s value. Every step reads the previous node once, so the reduced value enters the
/// epilogue once, at the element being finished. The other uses of the nodes along the way
/// must all come after the epilogue node (they read the kept value, or compute an inlined
/// node again from it, once the kernel has run); `id` is kept when there are any, or when it
/// is an output.
fn epilogue_of(
    g: &Graph,
    plan: &Plan,
    consumers: &[Vec<NodeId>],
    outputs: &[bool],
    id: NodeId,
) -> Option<(NodeId, bool)> {
    let shape = &g.node(id).ty.shape;
    let continues = |at: NodeId, next: NodeId| {
        let n = g.node(next);
        let reads = n.inputs.iter().filter(|&&x| x == at).count();
        let elementwise = Pattern::of(&n.op) == Elementwise && plan.patterns[next.index()] == Elementwise;
        reads == 1 && elementwise && &n.ty.shape == shape
    };
    let mut path = vec![id];
    let mut at = id;
    let into = loop {
        let next = *consumers[at.index()].iter().find(|&&c| continues(at, c))?;
        path.push(next);
        if plan.decision(next) == Decision::Own {
            break next;
        }
        at = next;
    };
    let mut keep = outputs[id.index()];
    for w in path.windows(2) {
        for &u in &consumers[w[0].index()] {
            if u != w[1] {
                if u.index() <= into.index() {
                    return None;
                }
                keep = true;
            }
        }
    }
    Some((into, keep))
}

/// The plan as text: one line per kernel-owning node that something joined, naming the joined
/// nodes (in graph order) and the rules that joined each to its consumers in the group.
pub fn print_plan(g: &Graph, plan: &Plan) -> String {
    let consumers = g.users();
    let mut members: Vec<Vec<NodeId>> = vec![Vec::new(); g.nodes().len()];
    // Every joined node belongs to the groups of the owned nodes that consume it, through
    // chains of joined nodes.
    for id in g.ids().collect::<Vec<_>>().into_iter().rev() {
        if plan.decision(id) != Decision::Own {
            continue;
        }
        let mut stack = vec![id];
        let mut seen = vec![false; g.nodes().len()];
        while let Some(x) = stack.pop() {
            for &i in &g.node(x).inputs {
                let member =
                    plan.is_joined(i) || matches!(plan.decision(i), Decision::Epilogue { into, .. } if into == id);
                if member && !seen[i.index()] {
                    seen[i.index()] = true;
                    members[id.index()].push(i);
                    stack.push(i);
                }
            }
        }
        members[id.index()].sort_unstable();
    }
    let mut s = String::new();
    for id in g.ids() {
        let m = &members[id.index()];
        if m.is_empty() {
            continue;
        }
        let node = g.node(id);
        let _ = write!(s, "{} {}", crate::ir::value_name(&node.name), node.op.name());
        for &j in m {
            let mut rules: Vec<&str> = Vec::new();
            for &c in &consumers[j.index()] {
                if c != id && !m.contains(&c) {
                    continue;
                }
                let join = match plan.decision(j) {
                    Decision::Epilogue { .. } => Join::Epilogue,
                    _ => Join::Inline,
                };
                let r = rule(plan.patterns[j.index()], Pattern::of(&g.node(c).op), join).expect("joined by a rule");
                if !rules.contains(&RULES[r].name) {
                    rules.push(RULES[r].name);
                }
            }
            let jn = g.node(j);
            let _ = write!(
                s,
                " <- {} {} ({})",
                crate::ir::value_name(&jn.name),
                jn.op.name(),
                rules.join(", ")
            );
        }
        s.push('\n');
    }
    s
}
