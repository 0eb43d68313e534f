//! Vector code for lane-wise kernels: every target element takes its own value (an
//! elementwise map) or folds its own values over the reduction loops (pooling, a sum or a
//! maximum along another axis). Sums of products, which register blocking serves better,
//! are [`super::vector`]'s; their epilogues (and any reduction's) run here as maps over the
//! target's tile ([`plan_epilogue`]).
//!
//! The lanes are the loop of the target's last subscript. Every load moves along it by a
//! fixed number of elements in the last dimension of its tile: one (a vector load), none (a
//! broadcast) or more (a strided load, element by element). When the loops before it lay
//! their points out contiguously in every buffer ([`lanewise::run`]), the lanes run through
//! them too, as one row: those loops' points stay at their tile's origin while the lanes
//! loop's point runs on past its own tile, through the whole row's offsets. The nest runs as:
//! ```text
//! constants into registers, and each load's step along each reduction loop, once
//! for outer points (the other parallel loops):
//!   for blocks of V vectors along the row, then one of V/2, ... down to one vector:
//!     a fold: load the block's target vectors into accumulators (or set them to the
//!       fold's initial value, when the nest runs the whole reduction)
//!     each load's index at the block's first lane and the reduction's origin
//!     for every reduction point (in nest order; once for a map):
//!       every vector's value; folded into its accumulator, or stored (a map)
//!       each load's index bumped by its step (as each reduction loop ends, by that loop's)
//!     a fold: store the accumulators
//!   the lanes left, fewer than a vector: one more vector ending at the row's end, over
//!     lanes already stored, when that stores their values again unchanged (a map, or a
//!     fold from its initial value) and the row holds a vector; else the scalar nest
//! ```
//! Every lane computes what the scalar code computes at its point, with the same operations
//! in the same order: the vector maximum and minimum treat NaN as `swflow_max_f32` does, ReLU
//! is the maximum with +0 (equal to it bit for bit, signed zeros and NaN included), and a sum
//! of a product is one fused multiply-add. The results are therefore equal bit for bit.

use std::borrow::Cow;

use swflow_emulator::timing::Ops;
use swflow_frontend::ir::{BinaryOp, DType, ReduceKind, UnaryOp};
use swflow_scheduler::loops::{Access, Expr, Index, Kernel, LoopKind, Program, Scalar};
use swflow_scheduler::schedule::lanewise::{self, LANEWISE_VECTORS};
use swflow_scheduler::schedule::{keep_index, window_of, Schedule};

use super::vector::{VBROADCAST, VLOAD, VSTORE};
use super::{charge, charge_once, Gen};
use crate::cost::{branch, int, LOOP};
use crate::cpe::{Cond, Func, Int, Local, Place, Stmt, VReg, Var, VarDecl};

/// Vector registers a block may hold (as [`super::vector`]'s blocks).
const REGISTERS: usize = 30;

/// One operation of the value, evaluated per vector.
#[derive(Clone, Debug)]
pub(super) enum Node {
    /// A load held by access `access` (in [`Gen::all`] order), whose index moves `stride`
    /// elements per lane: `load`, when it lies at a displacement in a window (see
    /// [`swflow_scheduler::loops::Stmt::windows`]), or the access itself.
    Load {
        access: usize,
        stride: i64,
        load: Option<Access>,
    },
    Const(f32),
    /// `op` of an earlier node: the square root.
    Unary(UnaryOp, usize),
    /// `op` of two earlier nodes.
    Binary(BinaryOp, usize, usize),
}

impl Node {
    /// The same in every vector of a block: held in one register.
    fn shared(&self) -> bool {
        matches!(self, Node::Const(_) | Node::Load { stride: 0, .. })
    }

    /// Whether both nodes compute the same value: the same load, a constant of the same bits
    /// (+0 and -0 differ), or the same operation of the same nodes.
    fn same(&self, other: &Node) -> bool {
        match (self, other) {
            (Node::Load { access: a, load: x, .. }, Node::Load { access: b, load: y, .. }) => a == b && x == y,
            (Node::Const(a), Node::Const(b)) => a.to_bits() == b.to_bits(),
            (Node::Unary(f, a), Node::Unary(g, b)) => f == g && a == b,
            (Node::Binary(f, a, x), Node::Binary(g, b, y)) => f == g && a == b && x == y,
            _ => false,
        }
    }

    /// The nodes whose values this one reads.
    fn operands(&self) -> Vec<usize> {
        match *self {
            Node::Unary(_, a) => vec![a],
            Node::Binary(_, a, b) => vec![a, b],
            Node::Load { .. } | Node::Const(_) => Vec::new(),
        }
    }
}

/// How each lane's value joins its target element.
#[derive(Clone, Copy, Debug)]
enum Fold {
    /// Stored (an elementwise map).
    Store,
    /// `acc = op(acc, value)`: a sum, maximum or minimum.
    Op(BinaryOp),
    /// `acc = a * b + acc`, rounded once, of the two factor nodes.
    Fma(usize, usize),
}

/// How a kernel's compute nest runs as lane-wise vectors.
pub(super) struct Plan {
    lanes_loop: usize,
    /// The loops the lanes run through as well, before the lanes loop, outermost first.
    run: Vec<usize>,
    /// The lengths the row takes, when they are known before the code runs: the blocks and
    /// single lanes that no row needs are not written.
    lengths: Option<Vec<usize>>,
    /// The other parallel loops, in nest order.
    outer: Vec<usize>,
    /// The reduction loops, in nest order.
    reduce: Vec<usize>,
    /// Nodes in evaluation order; with [`Fold::Store`] and [`Fold::Op`] the value is the last.
    nodes: Vec<Node>,
    fold: Fold,
    /// A fold's initial value, when its accumulators start there instead of at the target's
    /// elements: the nest runs every point of the reduction (no reduction loop is cut into
    /// tiles), so each element folds all its values in one block, from the value the
    /// target's box was filled with.
    starts: Option<f32>,
    /// An epilogue's kept reduced value: its access (in [`Gen::all`] order) and the node
    /// that loads the reduced value (`acc`), whose vectors it stores.
    keep: Option<(usize, usize)>,
    /// f32 lanes of a vector register.
    lanes: usize,
    /// Vectors of the widest block.
    vectors: usize,
    /// Whether a vector may run past a row's end ([`lanewise::may_run_past_rows`]), the
    /// target's buffer and those of the loads that move along the lanes keeping room for a
    /// vector past their tiles ([`swflow_scheduler::schedule::keep_room`]). Its lanes past
    /// the row then read elements that stay inside their buffers and write elements of later
    /// rows, whose own values are stored over them later, or the target's room.
    spills: bool,
    /// Set when every row holds the same number of lanes, `n`, not a whole number of
    /// vectors, and the row's `m` vectors fit one block, which stores lanes of the row more
    /// than once or past its end (only where that stores their values again unchanged: see
    /// [`Plan::restores`]): `(n, m)`. Each row then runs as that one block. A row longer than
    /// a vector ends with a vector at its end, over lanes the one before it stores too; one
    /// shorter, but longer than half a vector, runs one vector from its start past its end,
    /// where the plan [`spills`](Plan::spills) and has no division or square root (charged
    /// per lane, for the lanes past the row too).
    row_block: Option<(usize, usize)>,
}

impl Plan {
    /// The plan with [`Plan::row_block`] set where it applies; none when every row is
    /// shorter than a vector and runs single lanes.
    fn with_row_block(self) -> Option<Plan> {
        let lanes = self.lanes;
        // A vector past a row's end only where the row fills more than half of it, and no
        // operation charged per lane (a division, a square root) pays for the lanes past it.
        let slow = self
            .nodes
            .iter()
            .any(|n| matches!(n, Node::Unary(UnaryOp::Sqrt, _) | Node::Binary(BinaryOp::Div, ..)));
        let spills = |n: usize| self.spills && 2 * n > lanes && !slow;
        let row_block = match self.lengths.as_deref() {
            Some(&[n]) if n % lanes != 0 && (n > lanes || spills(n)) && self.restores() => {
                let m = n.div_ceil(lanes);
                (m <= LANEWISE_VECTORS && registers(&self.nodes, self.fold, m) <= REGISTERS).then_some((n, m))
            }
            _ => None,
        };
        let short = self.lengths.as_ref().is_some_and(|l| l.iter().all(|&n| n < lanes));
        (!short || row_block.is_some()).then_some(Plan { row_block, ..self })
    }

    /// Vectors of the widest block, [`Plan::row_block`]'s included.
    fn widest(&self) -> usize {
        self.row_block.map_or(self.vectors, |(_, m)| m.max(self.vectors))
    }

    /// Whether some row's length `n` passes `test` (or the lengths are not known).
    fn some_row(&self, test: impl Fn(usize) -> bool) -> bool {
        self.lengths
            .as_ref()
            .is_none_or(|lengths| lengths.iter().any(|&n| test(n)))
    }

    /// Whether storing a lane's value again leaves it as it was: a map, or a fold whose
    /// accumulators start at its initial value, that neither reads its target's elements
    /// (an epilogue's `acc`) nor keeps them.
    fn restores(&self) -> bool {
        (matches!(self.fold, Fold::Store) || self.starts.is_some())
            && self.keep.is_none()
            && !self.nodes.iter().any(|n| matches!(n, Node::Load { access: 0, .. }))
    }
}

/// The plan for kernel `k` under schedule `s` with `lanes` f32 lanes a vector, when its
/// target and every load are f32 tiles in LDM (`buffered`: boxes, records, or a streamed
/// tensor's boxes in its arena), the target's last
/// subscript is a parallel loop that every load moves along by a fixed step in its own last
/// subscript (or not at all), and the value is made of loads, constants, `+ - * /`, maximum,
/// minimum, ReLU and the square root, folded (if at all) by a sum, maximum or minimum.
pub(super) fn plan(p: &Program, k: &Kernel, s: &Schedule, lanes: usize, buffered: &[bool]) -> Option<Plan> {
    if k.stmt.keep.is_some() {
        return None;
    }
    let touched = lanewise::reads(k, &k.stmt.value);
    let (all, f32_tile, lanes_loop, run) = lanes_of(p, k, s, lanes, buffered, &touched)?;
    let mut nodes = Vec::new();
    let fold = match k.stmt.reduce {
        None => {
            add_nodes(&k.stmt.value, &all, &mut nodes)?;
            Fold::Store
        }
        Some(r) => match (r.kind, &k.stmt.value) {
            (ReduceKind::Sum, Expr::Binary(BinaryOp::Mul, a, b)) => {
                let a = add_nodes(a, &all, &mut nodes)?;
                let b = add_nodes(b, &all, &mut nodes)?;
                Fold::Fma(a, b)
            }
            (ReduceKind::Sum | ReduceKind::Max | ReduceKind::Min, value) => {
                add_nodes(value, &all, &mut nodes)?;
                Fold::Op(match r.kind {
                    ReduceKind::Sum => BinaryOp::Add,
                    ReduceKind::Max => BinaryOp::Max,
                    _ => BinaryOp::Min,
                })
            }
            _ => return None,
        },
    };
    let reduce: Vec<usize> = (0..k.loops.len())
        .filter(|&l| k.loops[l].kind == LoopKind::Reduce)
        .collect();
    let starts = match k.stmt.reduce.map(|r| r.init) {
        Some(Scalar::F32(init)) if reduce.iter().all(|&l| s.tiles[l] == k.loops[l].extent) => Some(init),
        _ => None,
    };
    let plan = finish(p, k, s, lanes, &all, &f32_tile, (lanes_loop, run), nodes, fold, reduce)?;
    Plan { starts, ..plan }.with_row_block()
}

/// What both plans need, when the target is a dense f32 tile in LDM: the kernel's accesses,
/// whether each is an f32 tile in LDM (`buffered`), the lanes loop (the target's last
/// subscript, a parallel loop), and the loops before it in the row of a nest touching the
/// accesses `touched` ([`lanewise::run`]), when a tile's row holds a vector or vectors may
/// run past the rows (shorter rows would run single lanes only).
#[allow(clippy::type_complexity)]
fn lanes_of<'k>(
    p: &Program,
    k: &'k Kernel,
    s: &Schedule,
    lanes: usize,
    buffered: &[bool],
    touched: &[usize],
) -> Option<(Vec<Cow<'k, Access>>, Vec<bool>, usize, Vec<usize>)> {
    if lanes < 2 || !k.target_is_dense(&s.tiles) {
        return None;
    }
    let all = swflow_scheduler::schedule::accesses(k);
    let f32_tile: Vec<bool> = (0..all.len())
        .map(|i| buffered[i] && p.tensor(k.operands[all[i].operand]).ty.dtype == DType::F32)
        .collect();
    if !f32_tile[0] {
        return None;
    }
    let lanes_loop = match k.stmt.target.index.last()? {
        Index::Affine(x) if x.terms.len() == 1 && x.terms[0].1 == 1 => x.terms[0].0,
        _ => return None,
    };
    if k.loops[lanes_loop].kind != LoopKind::Parallel {
        return None;
    }
    let mut run = lanewise::run(k, s, lanes_loop, touched);
    // Rows shorter than a vector, of lengths known before the code runs, may run one past
    // their ends (see `Plan::with_row_block`).
    let past_rows =
        lanewise::may_run_past_rows(k) && s.buffers[0].room + 1 >= lanes && lanewise::row_lengths(k, s, &run).is_some();
    if run.iter().map(|&l| s.tiles[l]).product::<usize>() < lanes && !past_rows {
        return None;
    }
    run.pop();
    Some((all, f32_tile, lanes_loop, run))
}

/// The plan for the epilogue of kernel `k` (a reduction's, run on each target element once
/// every point has folded into it: see [`swflow_scheduler::loops::Stmt`]) under schedule `s`,
/// as a lane-wise map over the target's tile that reads each element's reduced value (`acc`)
/// where it is and stores the epilogue's value in its place; on the same conditions as
/// [`plan`]'s maps. A kept reduced value, an f32 tile in LDM at the target's subscripts, is
/// stored from the vectors of `acc` as well.
pub(super) fn plan_epilogue(p: &Program, k: &Kernel, s: &Schedule, lanes: usize, buffered: &[bool]) -> Option<Plan> {
    let epilogue = k.stmt.epilogue.as_ref()?;
    let mut touched = lanewise::reads(k, epilogue);
    touched.extend(keep_index(k));
    let (all, f32_tile, lanes_loop, run) = lanes_of(p, k, s, lanes, buffered, &touched)?;
    let mut nodes = Vec::new();
    add_nodes(epilogue, &all, &mut nodes)?;
    let keep = match keep_index(k) {
        None => None,
        Some(i) => {
            if !f32_tile[i] || lane_stride(&all[i], lanes_loop) != Some(1) {
                return None;
            }
            let acc = |n: &Node| matches!(n, Node::Load { access: 0, .. });
            let node = match nodes.iter().position(acc) {
                Some(n) => n,
                None => {
                    // The value comes first: it must stay the last node.
                    nodes.insert(
                        0,
                        Node::Load {
                            access: 0,
                            stride: 0,
                            load: None,
                        },
                    );
                    for n in &mut nodes[1..] {
                        match n {
                            Node::Binary(_, a, b) => (*a, *b) = (*a + 1, *b + 1),
                            Node::Unary(_, a) => *a += 1,
                            Node::Load { .. } | Node::Const(_) => {}
                        }
                    }
                    0
                }
            };
            Some((i, node))
        }
    };
    let plan = finish(
        p,
        k,
        s,
        lanes,
        &all,
        &f32_tile,
        (lanes_loop, run),
        nodes,
        Fold::Store,
        Vec::new(),
    )?;
    Plan { keep, ..plan }.with_row_block()
}

/// The plan from its nodes along the lanes loop and the loops before it in its row, once each
/// load's step along the lanes is known (a load of what the target writes only as the
/// epilogue's `acc`, access 0), and the widest block that fits the registers.
#[allow(clippy::too_many_arguments)]
fn finish(
    p: &Program,
    k: &Kernel,
    s: &Schedule,
    lanes: usize,
    all: &[Cow<'_, Access>],
    f32_tile: &[bool],
    (lanes_loop, run): (usize, Vec<usize>),
    mut nodes: Vec<Node>,
    fold: Fold,
    reduce: Vec<usize>,
) -> Option<Plan> {
    for node in &mut nodes {
        if let Node::Load { access, stride, .. } = node {
            if !f32_tile[*access] || (*access != 0 && k.reads_target(p, &all[*access])) {
                return None;
            }
            *stride = lane_stride(&all[*access], lanes_loop)?;
        }
    }
    let fits = |v: usize| registers(&nodes, fold, v) <= REGISTERS;
    let row: usize = run.iter().chain([&lanes_loop]).map(|&l| s.tiles[l]).product();
    let widest = (row / lanes).clamp(1, LANEWISE_VECTORS);
    let vectors = (0..=LANEWISE_VECTORS.trailing_zeros())
        .map(|e| 1 << e)
        .filter(|&v| v <= widest && fits(v))
        .max()?;
    let outer = (0..k.loops.len())
        .filter(|&l| k.loops[l].kind == LoopKind::Parallel && l != lanes_loop && !run.contains(&l))
        .collect();
    let lengths = lanewise::row_lengths(k, s, &[&run[..], &[lanes_loop]].concat());
    let roomy = |i: usize| s.buffers[i].room + 1 >= lanes;
    let spills = lanewise::may_run_past_rows(k)
        && roomy(0)
        && nodes.iter().all(|n| match *n {
            Node::Load { access, stride, .. } => stride == 0 || (stride == 1 && roomy(access)),
            _ => true,
        });
    Some(Plan {
        lanes_loop,
        run,
        lengths,
        outer,
        reduce,
        keep: None,
        nodes,
        fold,
        starts: None,
        lanes,
        vectors,
        spills,
        row_block: None,
    })
}

/// Vector registers a block of `v` vectors holds: one per shared node, and each vector the
/// most values of nodes not shared that are live at once as its nodes are evaluated in order
/// (a value from its node until its last use; a fold's factors or value until the fold), and
/// an accumulator.
fn registers(nodes: &[Node], fold: Fold, v: usize) -> usize {
    let shared = nodes.iter().filter(|n| n.shared()).count();
    let end = nodes.len();
    let mut last: Vec<usize> = (0..end).collect();
    for (i, n) in nodes.iter().enumerate() {
        for a in n.operands() {
            last[a] = i;
        }
    }
    match fold {
        Fold::Fma(a, b) => (last[a], last[b]) = (end, end),
        Fold::Store | Fold::Op(_) => last[end - 1] = end,
    }
    let live = (0..end)
        .map(|i| (0..=i).filter(|&j| !nodes[j].shared() && last[j] >= i).count())
        .max()
        .unwrap_or(0);
    shared + v * (live + usize::from(!matches!(fold, Fold::Store)))
}

/// Appends the nodes of `e` (operands first; a node computing the value of one already there
/// is not added again) and returns the index of its value's node, when every operation has a
/// vector form. An epilogue's `acc` is the target's element (access 0).
pub(super) fn add_nodes(e: &Expr, all: &[Cow<'_, Access>], nodes: &mut Vec<Node>) -> Option<usize> {
    let node = match e {
        Expr::Load(a) => {
            let (access, shift) = window_of(all, a)?;
            Node::Load {
                access,
                stride: 0,
                load: shift.iter().any(|&s| s != 0).then(|| a.clone()),
            }
        }
        Expr::Acc => Node::Load {
            access: 0,
            stride: 0,
            load: None,
        },
        Expr::Const(Scalar::F32(c)) => Node::Const(*c),
        Expr::Unary(UnaryOp::Relu, a) => {
            let a = add_nodes(a, all, nodes)?;
            nodes.push(Node::Const(0.0));
            Node::Binary(BinaryOp::Max, a, nodes.len() - 1)
        }
        Expr::Unary(op @ UnaryOp::Sqrt, a) => Node::Unary(*op, add_nodes(a, all, nodes)?),
        Expr::Binary(
            op @ (BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Max | BinaryOp::Min),
            a,
            b,
        ) => {
            let a = add_nodes(a, all, nodes)?;
            let b = add_nodes(b, all, nodes)?;
            Node::Binary(*op, a, b)
        }
        _ => return None,
    };
    if let Some(at) = nodes.iter().position(|n| n.same(&node)) {
        return Some(at);
    }
    nodes.push(node);
    Some(nodes.len() - 1)
}

/// Elements access `a` moves per point of loop `l`: its coefficient in the last subscript,
/// when no other subscript holds `l` (the last dimension of a tile is contiguous in LDM).
fn lane_stride(a: &Access, l: usize) -> Option<i64> {
    let mut stride = 0;
    for (d, x) in a.index.iter().enumerate() {
        let Index::Affine(x) = x else { return None };
        let c: i64 = x.terms.iter().filter(|t| t.0 == l).map(|t| t.1).sum();
        if c != 0 {
            if d + 1 != a.index.len() || c < 0 {
                return None;
            }
            stride = c;
        }
    }
    Some(stride)
}

/// The variables and registers of a plan's code.
pub(super) struct Vars {
    plan: Plan,
    /// The index of the target element at a block's first lane.
    target: Var,
    /// The same for the kept reduced value.
    kept: Option<Var>,
    /// Per load node, its index at a block's first lane, one per reduction loop's level as the
    /// loops walk it (the first at the reduction's origin, the last at the point), and the
    /// elements it moves per point of each reduction loop; none for other nodes.
    walk: Vec<Vec<Var>>,
    step: Vec<Vec<Var>>,
    /// Per node, a register per vector (one for a shared node).
    regs: Vec<Vec<VReg>>,
    acc: Vec<VReg>,
}

impl Vars {
    /// Declares the variables and registers of `plan` in `f`, named after `prefix`.
    pub(super) fn declare(plan: Plan, f: &mut Func, prefix: &str) -> Vars {
        let mut line = Vec::new();
        let mut var = |f: &mut Func, name: String| {
            f.vars.push(VarDecl { name, init: None });
            let v = Var(f.vars.len() as u32 - 1);
            line.push(Local::Var(v));
            v
        };
        let target = var(f, format!("{prefix}t"));
        let kept = plan.keep.map(|_| var(f, format!("{prefix}k")));
        let depth = plan.reduce.len();
        let mut walk = Vec::new();
        let mut step = Vec::new();
        for (n, node) in plan.nodes.iter().enumerate() {
            let load = matches!(node, Node::Load { .. });
            walk.push(match load {
                true => (0..=depth)
                    .map(|level| match level {
                        0 => var(f, format!("{prefix}i{n}")),
                        _ => var(f, format!("{prefix}i{n}_{level}")),
                    })
                    .collect(),
                false => Vec::new(),
            });
            step.push(match load {
                true => (0..depth).map(|j| var(f, format!("{prefix}s{n}_{j}"))).collect(),
                false => Vec::new(),
            });
        }
        f.decl_lines.push(line);
        let mut reg = |name: String| {
            f.vregs.push(name);
            VReg(f.vregs.len() as u32 - 1)
        };
        let regs = plan
            .nodes
            .iter()
            .enumerate()
            .map(|(n, node)| match node.shared() {
                true => vec![reg(format!("{prefix}n{n}"))],
                false => (0..plan.widest()).map(|j| reg(format!("{prefix}n{n}_{j}"))).collect(),
            })
            .collect();
        let acc = match plan.fold {
            Fold::Store => Vec::new(),
            _ => (0..plan.widest()).map(|j| reg(format!("{prefix}acc{j}"))).collect(),
        };
        Vars {
            plan,
            target,
            kept,
            walk,
            step,
            regs,
            acc,
        }
    }

    fn reg(&self, node: usize, vector: usize) -> VReg {
        let regs = &self.regs[node];
        regs[vector.min(regs.len() - 1)]
    }
}

/// A strided load of `lanes` elements (`simd_set_floatv4`/`floatv8` of them). No public source
/// gives its cost: charged as an LDM load and an insert on P0 per lane, and an address add
/// per lane after the first (an assumption).
fn strided_load(lanes: u32) -> Ops {
    Ops {
        load: lanes,
        fp: lanes,
        integer: lanes - 1,
        ..Ops::ZERO
    }
}

/// A vector operation on `lanes` lanes, as `SWFLOW_VMAX`/`SWFLOW_VMIN` and the C operators
/// write it. A division is charged as a division per lane: no public source gives the cost
/// of `simd_vdivs`, and it is not pipelined (an assumption).
pub(super) fn vector_op(op: BinaryOp, lanes: u32) -> Ops {
    let flops = Ops {
        flops: lanes,
        ..Ops::ZERO
    };
    flops
        + match op {
            BinaryOp::Div => Ops {
                div: lanes,
                ..Ops::ZERO
            },
            // Two compares and two selects.
            BinaryOp::Max | BinaryOp::Min => Ops { fp: 4, ..Ops::ZERO },
            _ => Ops { fp: 1, ..Ops::ZERO },
        }
}

/// A vector operation of one operand on `lanes` lanes: the square root (`simd_vsqrts`),
/// charged as a square root per lane, as a division is (see [`vector_op`]).
pub(super) fn vector_unary(op: UnaryOp, lanes: u32) -> Ops {
    match op {
        UnaryOp::Sqrt => Ops {
            sqrt: lanes,
            flops: lanes,
            ..Ops::ZERO
        },
        other => unreachable!("no vector form of {other:?}"),
    }
}

/// Instructions of a fold on the chain from one accumulator value to the next.
fn fold_depth(fold: Fold) -> u32 {
    match fold {
        Fold::Store => 0,
        Fold::Op(BinaryOp::Max | BinaryOp::Min) => 3,
        Fold::Op(_) | Fold::Fma(..) => 1,
    }
}

impl Gen<'_> {
    /// The lane-wise vector code of the compute nest, with its charges; the lanes left after
    /// the vectors run `scalar` (the nest's statements at a point, costing `scalar_ops`).
    pub(super) fn lanewise_nest(&self, out: &mut Vec<Stmt>, v: &Vars, scalar: Vec<Stmt>, scalar_ops: Ops) {
        let p = &v.plan;
        out.push(Stmt::Comment(match p.row_block {
            Some((n, _)) if n < p.lanes => format!(
                "Each row of {n} lanes ({}) in one vector of {}, past the row's end.",
                self.loop_names[p.lanes_loop], p.lanes
            ),
            Some((n, m)) => format!(
                "Each row of {n} lanes ({}) in one block of {m} vectors of {}, the last ending at the row's end.",
                self.loop_names[p.lanes_loop], p.lanes
            ),
            None => format!(
                "In blocks of up to {} vector(s) of {} lanes ({}), then single lanes.",
                p.vectors, p.lanes, self.loop_names[p.lanes_loop]
            ),
        }));
        let mut consts = Vec::new();
        for (n, node) in p.nodes.iter().enumerate() {
            if let Node::Const(c) = node {
                consts.push(Stmt::VSplat {
                    reg: v.reg(n, 0),
                    value: *c,
                });
            }
        }
        charge_once(out, VBROADCAST * consts.len() as u32);
        out.extend(consts);
        // The loads' steps along the reduction loops, once per tile.
        let mut steps = Ops::ZERO;
        for (n, node) in p.nodes.iter().enumerate() {
            if let Node::Load { access, .. } = node {
                for (j, &l) in p.reduce.iter().enumerate() {
                    let (e, ops) = self.stride(*access, l);
                    out.push(Stmt::Set(v.step[n][j], e));
                    steps += ops;
                }
            }
        }
        charge_once(out, steps);
        // The outer loops' control, as the scalar nest charges it.
        for j in 0..p.outer.len() {
            let iterations = Int::product(p.outer[..=j].iter().map(|&l| self.extent(l)).collect());
            charge(out, LOOP + int(1), iterations);
        }
        let lanes = self.lanewise_loops(v, scalar, scalar_ops);
        out.extend(self.point_loops(&p.outer, lanes));
    }

    /// The lanes loops at one outer point: blocks of decreasing width, then single lanes;
    /// along a row through several loops, those before the lanes loop at their origins.
    fn lanewise_loops(&self, v: &Vars, scalar: Vec<Stmt>, scalar_ops: Ops) -> Vec<Stmt> {
        let p = &v.plan;
        let l = p.lanes_loop;
        let o = self.origin(l);
        let n = Int::product(p.run.iter().chain([&l]).map(|&l| self.extent(l)).collect());
        let mut out = Vec::new();
        // Per loop before the lanes: its point, once; and the row's length.
        charge_once(&mut out, int(2 * p.run.len() as u32));
        for &r in &p.run {
            out.push(Stmt::Set(self.point[r], self.origin(r)));
        }
        let lanes = p.lanes;
        if let Some((row, m)) = p.row_block {
            charge_once(&mut out, int(1));
            out.push(Stmt::Set(self.point[l], o));
            let mut offsets: Vec<i64> = (0..m as i64 - 1).map(|j| j * lanes as i64).collect();
            offsets.push((row.max(lanes) - lanes) as i64);
            out.extend(self.counting_lanes(self.lanewise_block(v, &offsets), m * lanes, Int::Const(row as i64)));
            return out;
        }
        // The start of the lanes after the whole multiples of `m` lanes.
        let multiple = |m: usize| o.clone() + n.clone() / Int::Const(m as i64) * Int::Const(m as i64);
        let widths: Vec<usize> = (0..=p.vectors.trailing_zeros()).rev().map(|e| 1 << e).collect();
        // Per width and for the single lanes: the bound, a multiple by shifts, once.
        charge_once(&mut out, int(3 * (widths.len() as u32 + 1)));
        // The widest blocks in a loop; each narrower width runs at most once, after the
        // wider ones (an `if`, which a C compiler drops where the row's length is known and
        // the block cannot run).
        for (w, &width) in widths.iter().enumerate() {
            let span = width * p.lanes;
            let runs = |n: usize| match w {
                0 => n >= span,
                _ => n % (2 * span) >= span,
            };
            if !p.some_row(runs) {
                continue;
            }
            let offsets: Vec<i64> = (0..width as i64).map(|j| j * lanes as i64).collect();
            let body = self.lanewise_block(v, &offsets);
            out.push(match w {
                0 => Stmt::For {
                    var: self.point[l],
                    from: o.clone(),
                    to: multiple(span),
                    step: Int::Const(span as i64),
                    body,
                },
                _ => {
                    let mut then = vec![Stmt::Set(self.point[l], multiple(2 * span))];
                    then.extend(body);
                    Stmt::If {
                        cond: Cond::Lt(multiple(2 * span), multiple(span)),
                        then,
                        otherwise: Vec::new(),
                    }
                }
            });
        }
        let singles = || {
            vec![Stmt::For {
                var: self.point[l],
                from: multiple(lanes),
                to: o.clone() + n.clone(),
                step: Int::Const(1),
                body: self.scalar_lane(&p.reduce, scalar.clone(), scalar_ops),
            }]
        };
        // A map, or a fold from its initial value, stores the lanes left in a row that holds
        // a whole vector as one more vector, the row's last, over lanes already stored: they
        // take the same values again. The other rows with lanes left run them singly.
        let overlaps = p.restores() && p.some_row(|n| n % lanes != 0 && n >= lanes);
        let singly = p.some_row(|n| n % lanes != 0 && (n < lanes || !overlaps));
        if !overlaps {
            if singly {
                out.extend(singles());
            }
            return out;
        }
        let mut last = Vec::new();
        charge_once(&mut last, int(2));
        last.push(Stmt::Set(
            self.point[l],
            o.clone() + n.clone() - Int::Const(lanes as i64),
        ));
        // Its flops count the lanes left only: the others' were counted by their blocks.
        let left = n.clone() - n.clone() / Int::Const(lanes as i64) * Int::Const(lanes as i64);
        last.extend(self.counting_lanes(self.lanewise_block(v, &[0]), lanes, left));
        charge_once(&mut out, int(2) + branch(2));
        out.push(Stmt::If {
            cond: Cond::All(vec![
                Cond::Lt(multiple(lanes), o.clone() + n.clone()),
                Cond::Lt(Int::Const(lanes as i64 - 1), n.clone()),
            ]),
            then: last,
            otherwise: match singly {
                true => singles(),
                false => Vec::new(),
            },
        });
        out
    }

    /// The reduction loops from `level` on around `step`, each load's index walking them: set
    /// from the level before on entering a loop, bumped by its step after each point.
    fn lanewise_walk(&self, v: &Vars, level: usize, step: Vec<Stmt>) -> Vec<Stmt> {
        let p = &v.plan;
        if level == p.reduce.len() {
            return step;
        }
        let walks = || v.walk.iter().zip(&v.step).filter(|(w, _)| !w.is_empty());
        let mut out: Vec<Stmt> = walks()
            .map(|(w, _)| Stmt::Set(w[level + 1], Int::Var(w[level])))
            .collect();
        let mut body = self.lanewise_walk(v, level + 1, step);
        for (w, s) in walks() {
            body.push(Stmt::Set(w[level + 1], Int::Var(w[level + 1]) + Int::Var(s[level])));
        }
        out.extend(self.point_loops(&[p.reduce[level]], body));
        out
    }

    /// The charges of [`Gen::lanewise_walk`]'s index moves: per load, a set on entering each reduction
    /// loop and an add after each of its points.
    fn charge_walks(&self, out: &mut Vec<Stmt>, v: &Vars) {
        let p = &v.plan;
        let loads = v.walk.iter().filter(|w| !w.is_empty()).count() as u32;
        for level in 0..p.reduce.len() {
            let entered = Int::product(p.reduce[..level].iter().map(|&l| self.extent(l)).collect());
            let points = Int::product(p.reduce[..=level].iter().map(|&l| self.extent(l)).collect());
            charge(out, int(loads), entered + points);
        }
    }

    /// `block`, a block of `lanes` lanes of which only `counted` are not stored by another
    /// block too, with its flops charged for those lanes alone.
    fn counting_lanes(&self, mut block: Vec<Stmt>, lanes: usize, counted: Int) -> Vec<Stmt> {
        let mut flops = Vec::new();
        for s in &mut block {
            if let Stmt::Charge { ops, count } = s {
                if ops.flops > 0 {
                    flops.push((std::mem::take(&mut ops.flops), count.clone()));
                }
            }
        }
        for (flops, count) in flops {
            let per_lane = Ops {
                flops: flops / lanes as u32,
                ..Ops::ZERO
            };
            charge(&mut block, per_lane, counted.clone() * count);
        }
        block
    }

    /// One point of the lanes in scalar code: the charges of the lanes loop's control and of
    /// the reduction loops, then those loops around `scalar` (which costs `ops`).
    fn scalar_lane(&self, reduce: &[usize], scalar: Vec<Stmt>, ops: Ops) -> Vec<Stmt> {
        let mut out = Vec::new();
        charge_once(&mut out, LOOP);
        let points = Int::product(reduce.iter().map(|&l| self.extent(l)).collect());
        charge(&mut out, ops + LOOP * u32::from(!reduce.is_empty()), points);
        for j in 1..reduce.len() {
            let iterations = Int::product(reduce[..j].iter().map(|&l| self.extent(l)).collect());
            charge(&mut out, LOOP + int(1), iterations);
        }
        out.extend(self.point_loops(reduce, scalar));
        out
    }

    /// One block of vectors from the lanes loop's point, each at its offset in `offsets` (in
    /// points of the lanes loop), with its charges.
    fn lanewise_block(&self, v: &Vars, offsets: &[i64]) -> Vec<Stmt> {
        let p = &v.plan;
        let width = offsets.len();
        let mut out = Vec::new();
        let (target, target_ops) = self.access_ref(0);
        let Place::Ldm { buf, half, index } = target else {
            unreachable!("planned accesses are in LDM")
        };
        let at = |var: Var, offset: i64| Place::Ldm {
            buf,
            half: half.clone(),
            index: if offset == 0 {
                Int::Var(var)
            } else {
                Int::Var(var) + Int::Const(offset)
            },
        };
        // The target's index, the loop's control, and per vector its load or store (a fold
        // both), each vector but the first at a displacement (see `cost`).
        let folds = !matches!(p.fold, Fold::Store);
        let access = match (folds, p.starts) {
            (false, _) => VSTORE,
            (true, None) => VLOAD + VSTORE,
            (true, Some(_)) => VBROADCAST + VSTORE,
        };
        // Each load's index at the reduction's origin, from the reduction loops' points set
        // there: charged with the target's, once per block of a fold, and with the step of a
        // map, where all of them run as one stretch of code.
        let mut origin = Vec::new();
        let mut origin_ops = int(p.reduce.len() as u32);
        for &l in &p.reduce {
            origin.push(Stmt::Set(self.point[l], self.origin(l)));
        }
        for (n, node) in p.nodes.iter().enumerate() {
            if let Node::Load { access, load, .. } = node {
                let (place, ops) = match load {
                    Some(a) => {
                        let shift = self.all[*access].displacement(a).expect("a window holds its loads");
                        self.load_ref(*access, a, &shift)
                    }
                    None => self.access_ref(*access),
                };
                let Place::Ldm { index, .. } = place else {
                    unreachable!("planned accesses are in LDM")
                };
                origin.push(Stmt::Set(v.walk[n][0], index));
                origin_ops += ops + int(1);
            }
        }
        let (block_origin, step_origin) = match p.reduce.is_empty() {
            true => (Ops::ZERO, origin_ops),
            false => (origin_ops, Ops::ZERO),
        };
        charge_once(
            &mut out,
            target_ops + int(1) + LOOP + access * width as u32 + block_origin,
        );
        out.push(Stmt::Set(v.target, index));
        if let (Some((i, _)), Some(kept)) = (p.keep, v.kept) {
            // Its index, then per vector a store.
            let (place, ops) = self.access_ref(i);
            let Place::Ldm { index, .. } = place else {
                unreachable!("planned accesses are in LDM")
            };
            charge_once(&mut out, ops + int(1) + VSTORE * width as u32);
            out.push(Stmt::Set(kept, index));
        }
        if folds {
            for (j, &offset) in offsets.iter().enumerate() {
                out.push(match p.starts {
                    Some(value) => Stmt::VSplat { reg: v.acc[j], value },
                    None => Stmt::VLoad {
                        reg: v.acc[j],
                        place: at(v.target, offset),
                        broadcast: false,
                        aligned: false,
                    },
                });
            }
        }
        out.extend(origin);
        // The step at one reduction point (the block's only one for a map).
        let mut step = Vec::new();
        let mut step_ops = Ops {
            carried: fold_depth(p.fold),
            ..step_origin
        };
        for (j, &offset) in offsets.iter().enumerate() {
            step_ops += self.lanewise_vector(v, (j, offset), &at, &mut step);
        }
        self.charge_nest(&mut out, &p.reduce, step_ops);
        self.charge_walks(&mut out, v);
        out.extend(self.lanewise_walk(v, 0, step));
        if folds {
            for (j, &offset) in offsets.iter().enumerate() {
                out.push(Stmt::VStore {
                    reg: v.acc[j],
                    place: at(v.target, offset),
                    aligned: false,
                });
            }
        }
        out
    }

    /// Vector `j` of a block, `offset` points of the lanes loop from the block's start, at one
    /// reduction point, appended to `out`: its value's operations, then its fold or store (at
    /// the target's place `at`); returns their operations.
    fn lanewise_vector(
        &self,
        v: &Vars,
        (j, offset): (usize, i64),
        at: &dyn Fn(Var, i64) -> Place,
        out: &mut Vec<Stmt>,
    ) -> Ops {
        let p = &v.plan;
        let mut ops = Ops::ZERO;
        for (n, node) in p.nodes.iter().enumerate() {
            if node.shared() && j > 0 {
                continue;
            }
            let reg = v.reg(n, j);
            match *node {
                Node::Load { access, stride, .. } => {
                    let (place, _) = self.access_ref(access);
                    let Place::Ldm { buf, half, .. } = place else {
                        unreachable!("planned accesses are in LDM")
                    };
                    let index = v.walk[n][p.reduce.len()];
                    let place = Place::Ldm {
                        buf,
                        half,
                        index: match offset * stride {
                            0 => Int::Var(index),
                            shift => Int::Var(index) + Int::Const(shift),
                        },
                    };
                    match stride {
                        0 | 1 => {
                            ops += if stride == 0 { VBROADCAST } else { VLOAD };
                            out.push(Stmt::VLoad {
                                reg,
                                place,
                                broadcast: stride == 0,
                                aligned: false,
                            });
                        }
                        _ => {
                            ops += strided_load(p.lanes as u32);
                            out.push(Stmt::VLoadStrided { reg, place, stride });
                        }
                    }
                }
                Node::Const(_) => {}
                Node::Unary(op, a) => {
                    ops += vector_unary(op, p.lanes as u32);
                    out.push(Stmt::VUnary {
                        op,
                        dst: reg,
                        a: v.reg(a, j),
                    });
                }
                Node::Binary(op, a, b) => {
                    ops += vector_op(op, p.lanes as u32);
                    out.push(Stmt::VBinary {
                        op,
                        dst: reg,
                        a: v.reg(a, j),
                        b: v.reg(b, j),
                    });
                }
            }
        }
        let value = v.reg(p.nodes.len() - 1, j);
        if let (Some((i, acc)), Some(kept)) = (p.keep, v.kept) {
            let (place, _) = self.access_ref(i);
            let Place::Ldm { buf, half, .. } = place else {
                unreachable!("planned accesses are in LDM")
            };
            out.push(Stmt::VStore {
                reg: v.reg(acc, j),
                place: Place::Ldm {
                    buf,
                    half,
                    index: match offset {
                        0 => Int::Var(kept),
                        _ => Int::Var(kept) + Int::Const(offset),
                    },
                },
                aligned: false,
            });
        }
        match p.fold {
            Fold::Store => out.push(Stmt::VStore {
                reg: value,
                place: at(v.target, offset),
                aligned: false,
            }),
            Fold::Op(op) => {
                ops += vector_op(op, p.lanes as u32);
                out.push(Stmt::VBinary {
                    op,
                    dst: v.acc[j],
                    a: v.acc[j],
                    b: value,
                });
            }
            Fold::Fma(a, b) => {
                ops += Ops {
                    fp: 1,
                    flops: 2 * p.lanes as u32,
                    ..Ops::ZERO
                };
                out.push(Stmt::VFma {
                    acc: v.acc[j],
                    a: v.reg(a, j),
                    b: v.reg(b, j),
                });
            }
        }
        ops
    }
}
