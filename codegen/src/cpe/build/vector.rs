//! Register-blocked vector code for a sum of products on LDM tiles (matrix products,
//! convolutions): `t[..] += a[..] * b[..]` in f32.
//!
//! One parallel loop, the *lanes*, moves the target and the factors that move along it by one
//! element (a factor that does not move along it is broadcast); another parallel loop may give
//! a block several *rows* that share the factors not moving along it. When the loop outside
//! the lanes loop moves every factor along the lanes by a whole tile row, and the lanes loop's
//! tiles are shorter than 16 points or end in a partly filled vector that this fills
//! better, the lanes run through both loops as one longer row (*coalesced*): the target's and
//! the factors' rows follow one another in their boxes, so each block's indices are those of
//! the row group's first point plus its position. The other parallel loops run outside, and
//! the reduction loops innermost, in their order (a loop of one point per tile, a 1 x 1
//! window's or a packed constant's outer part, is set once, not run; an innermost loop whose
//! tiles all have the same few points, a 3 x 3 window's row, is written out step by step,
//! without loop control). A block's row spans some of the whole vectors of a tile's row, and
//! a block takes up to 16 rows within 24 accumulators and the registers, enough independent multiply-adds to cover the latency of
//! each accumulator's previous one: the shape that takes the fewest cycles per multiply-add
//! (fewer vectors and more rows merge fewer unaligned loads per multiply-add), which the
//! scheduler finds ([`Blocking`]) and its estimate charges:
//! ```text
//! for outer points:
//!   for row blocks of R rows, then single rows:
//!     for lane blocks of V vectors, then one block of the whole vectors left (fewer than V),
//!     then a tail vector; a row shorter than a vector runs one head or tail vector where its
//!     other lanes stay inside every buffer, else single lanes:
//!       load the block's target elements into accumulators (R x V registers)
//!       for every reduction point (in nest order):
//!         load the factors' vectors (simd_load where they start aligned, see
//!         `swflow_scheduler::schedule::blocking::aligned`;
//!         else simd_loadu) or broadcast elements (simd_loade)
//!         acc[i][j] = simd_vmas(a, b, acc[i][j])   for every row i and vector j
//!       store the accumulators (a tail or a head only the lanes of its row that no vector
//!       stored)
//! ```
//! Each target element therefore takes the same fused multiply-adds, in the same order, as
//! in the scalar nest ([`super::super::Stmt::Fold`]), so the results are equal bit for bit.
//! Each factor walks the reduction loops with an index per row it moves along, bumped by its
//! stride at every step, so a step costs a load per vector, a multiply-add per accumulator,
//! and an add per index. In a written-out window row, a factor that moves along it by a
//! constant (a convolution's input and weights along the window's columns) loads every step
//! at a displacement from the same index instead, which costs nothing (see `cost`).

use swflow_emulator::timing::Ops;
use swflow_frontend::ir::{BinaryOp, DType, ReduceKind};
use swflow_scheduler::loops::{Index, Kernel, Program};
use swflow_scheduler::schedule::blocking::{blocking, extent_values, Blocking};
use swflow_scheduler::schedule::Schedule;
use swflow_scheduler::target::Target;

use super::{charge, Gen};
use crate::cost::{self, int, LOOP};
use crate::cpe::{Cond, Func, Half, Int, Local, Place, Stmt, VReg, Value, Var, VarDecl};

/// How a kernel's compute nest runs as vector blocks: its [`Blocking`], and what the code
/// writes out for the tiles that occur.
pub(super) struct Plan {
    shape: Blocking,
    /// Rows shorter than a vector may run as one vector (see [`Width::Head`]): the lanes are
    /// not coalesced, and the target's buffer and every buffer of a factor moving along the
    /// lanes hold a vector (C compilers reject code that stores one into a shorter buffer,
    /// even where it never runs).
    short_vectors: bool,
    /// The parts of the nest that run (found last, from the rest of the plan).
    parts: Parts,
    /// The blocks start from indices set once per point of the outer loops ([`Vars::base`]):
    /// with a coalesced loop, or when a tile's row holds two blocks or more, or its rows two
    /// row groups or more, or when the innermost outer loop runs (see [`Plan::hoist`]), where
    /// that saves each block computing its subscripts.
    bases: bool,
    /// The innermost outer loop, when some tile takes several of its points: the bases at its
    /// first point are computed once per point of the loops outside it ([`Vars::hoisted`]),
    /// and each of its points takes them from there and moves them on by the loop's stride,
    /// instead of computing every subscript again. With it, per base (the target's, then each
    /// factor's), whether its access moves along the loop.
    hoist: Option<(usize, [bool; 3])>,
}

impl Plan {
    /// Whether some row runs a block of the whole vectors left after its full blocks (see
    /// `lane_loops`): with several vectors a block, when some row leaves some.
    fn leftover_block(&self) -> bool {
        self.shape.vectors > 1 && self.parts.left.iter().any(|&r| r > 0)
    }
}

/// The plan for kernel `k` under schedule `s` for `target`, when its compute nest is a sum of
/// products that [`blocking`] blocks. `buffered` and `streamed` tell, per access, whether it
/// is in an LDM buffer and whether that buffer is a tape arena.
pub(super) fn plan(
    p: &Program,
    k: &Kernel,
    s: &Schedule,
    target: &Target,
    buffered: &[bool],
    streamed: &[bool],
) -> Option<Plan> {
    let lanes = target.f32_vector_lanes;
    let shape = blocking(p, k, s, lanes, target.timing.fp_latency_cycles, buffered, streamed)?;
    let holds = |i: usize| s.buffers[i].elements() >= lanes;
    let short_vectors =
        shape.coalesced.is_none() && holds(0) && shape.factors.iter().all(|f| !f.along_lanes || holds(f.access));
    let vectors = shape.vectors;
    let all = swflow_scheduler::schedule::accesses(k);
    let based = [0, shape.factors[0].access, shape.factors[1].access];
    let hoist = shape
        .outer
        .last()
        .copied()
        .filter(|&l| extent_values(k, s, l).is_none_or(|ns| ns.iter().any(|&n| n > 1)))
        .map(|l| (l, based.map(|i| all[i].uses_loop(l))));
    let bases = shape.coalesced.is_some()
        || s.tiles[shape.lanes_loop] >= 2 * vectors * lanes
        || shape.rows_loop.is_some_and(|l| s.tiles[l] > shape.rows)
        || hoist.is_some();
    let mut plan = Plan {
        shape,
        short_vectors,
        parts: Parts::every(vectors),
        bases,
        hoist,
    };
    plan.parts = parts(k, s, &plan);
    // Without short rows no block reads past a row, and no reach is kept.
    plan.short_vectors &= plan.parts.short;
    // Rows that all run single lanes are the scalar nest's.
    if !plan.parts.long && !plan.short_vectors {
        return None;
    }
    Some(plan)
}

/// Which parts of plan `p`'s nest run under schedule `s` of kernel `k`, from the values the
/// rows loop's and the lanes' extents take.
fn parts(k: &Kernel, s: &Schedule, p: &Plan) -> Parts {
    let values = |l: usize| extent_values(k, s, l);
    let (row_blocks, single_rows) = match p.shape.rows_loop.map(values) {
        None => (false, true),
        Some(None) => (true, true),
        Some(Some(ns)) => (
            ns.iter().any(|&n| n >= p.shape.rows),
            ns.iter().any(|&n| n % p.shape.rows != 0),
        ),
    };
    let lanes = match p.shape.coalesced {
        Some(outer) => values(outer).zip(values(p.shape.lanes_loop)).map(|(a, b)| {
            let mut products: Vec<usize> = a.iter().flat_map(|x| b.iter().map(move |y| x * y)).collect();
            products.sort_unstable();
            products.dedup();
            products
        }),
        None => values(p.shape.lanes_loop),
    };
    let span = p.shape.vectors * p.shape.lanes;
    let Some(ns) = lanes else {
        return Parts {
            row_blocks,
            single_rows,
            ..Parts::every(p.shape.vectors)
        };
    };
    let long: Vec<usize> = ns.iter().copied().filter(|&n| n >= p.shape.lanes).collect();
    let mut left: Vec<usize> = ns.iter().map(|&n| n % span / p.shape.lanes).collect();
    left.sort_unstable();
    left.dedup();
    Parts {
        row_blocks,
        single_rows,
        lane_blocks: ns.iter().any(|&n| n >= span),
        left,
        short: long.len() < ns.len(),
        long: !long.is_empty(),
        tail: long.iter().any(|&n| n % p.shape.lanes != 0),
        tail_always: !long.is_empty() && long.iter().all(|&n| n % p.shape.lanes != 0),
    }
}

/// The variables and registers of a plan's code.
pub(super) struct Vars {
    plan: Plan,
    /// With a coalesced loop: the position along the lanes of both loops together.
    flat: Option<Var>,
    /// Where the plan has bases ([`Plan::bases`]): the index, at the lanes variable's start
    /// and the reduction loops' origins, of the target's first row and of each factor's first
    /// stream in the current row group, less that start for those moving along the lanes;
    /// set once per point of the outer loops, at the rows loop's origin (from
    /// [`Vars::hoisted`] with a hoisted loop), and advanced by each row group's rows. A
    /// block's indices are these plus the lanes variable (a factor's that does not move along
    /// the lanes, its base): the target and the moving factors take one element per point of
    /// the lanes loop, and with a coalesced loop the rows of their boxes are as long as the
    /// lanes loop's tile.
    base: Option<[Var; 3]>,
    /// Where the plan hoists the bases ([`Plan::hoist`]): the bases at the hoisted loop's
    /// current point (at the rows loop's origin), and per base the elements from one point of
    /// that loop to the next, for those whose access moves along it.
    hoisted: Option<([Var; 3], [Option<Var>; 3])>,
    /// The lanes loops' bounds, the same in every row group and set once per tile
    /// ([`LaneBounds`]).
    bounds: LaneBounds,
    /// Index of each row's first target element in a block.
    target: Vec<Var>,
    /// Target elements from one row to the next.
    target_row: Option<Var>,
    /// Per factor: elements from one row to the next (when it moves along the rows), and per
    /// reduction loop, from one point to the next.
    row_stride: [Option<Var>; 2],
    step: [Vec<Var>; 2],
    /// Per factor moving along the lanes: the least and the greatest of its index's moves
    /// over the reduction points of a block (`lo <= 0 <= hi`), which say whether a vector
    /// over a row shorter than a vector stays in its buffer.
    reach: [Option<(Var, Var)>; 2],
    /// Per factor, per stream (row): its index at the block's start and inside each reduction
    /// loop.
    walk: [Vec<Vec<Var>>; 2],
    /// Accumulators `[row][vector]`, and per factor per stream its loaded vectors.
    acc: Vec<Vec<VReg>>,
    loaded: [Vec<Vec<VReg>>; 2],
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
        let flat = plan.shape.coalesced.map(|_| var(f, format!("{prefix}lane")));
        let base = plan
            .bases
            .then(|| ["t", "a", "b"].map(|name| var(f, format!("{prefix}{name}_base"))));
        let hoisted = plan.hoist.map(|(_, moves)| {
            let at = ["t", "a", "b"].map(|name| var(f, format!("{prefix}{name}_outer")));
            let mut stride = [None; 3];
            for (i, name) in ["t", "a", "b"].into_iter().enumerate() {
                stride[i] = moves[i].then(|| var(f, format!("{prefix}{name}_outer_step")));
            }
            (at, stride)
        });
        let bounds = LaneBounds::declare(&plan, f, &mut var, prefix);
        let target = (0..plan.shape.rows).map(|i| var(f, format!("{prefix}t{i}"))).collect();
        let target_row = plan.shape.rows_loop.map(|_| var(f, format!("{prefix}t_row")));
        let mut row_stride = [None, None];
        let mut step = [Vec::new(), Vec::new()];
        let mut reach = [None, None];
        let mut walk = [Vec::new(), Vec::new()];
        for (x, fac) in plan.shape.factors.iter().enumerate() {
            let name = ["a", "b"][x];
            row_stride[x] = fac.along_rows.then(|| var(f, format!("{prefix}{name}_row")));
            if fac.along_lanes && plan.short_vectors {
                reach[x] = Some((
                    var(f, format!("{prefix}{name}_lo")),
                    var(f, format!("{prefix}{name}_hi")),
                ));
            }
            // A factor whose written-out steps load at displacements has no stride variable
            // and no index for the innermost loop.
            let levels = plan.shape.reduce.len() - usize::from(fac.tap_stride.is_some());
            step[x] = (0..levels).map(|j| var(f, format!("{prefix}{name}_step{j}"))).collect();
            walk[x] = (0..fac.streams(plan.shape.rows))
                .map(|i| (0..=levels).map(|j| var(f, format!("{prefix}{name}{i}_{j}"))).collect())
                .collect();
        }
        f.decl_lines.push(line);
        let reg = |f: &mut Func, name: String| {
            f.vregs.push(name);
            VReg(f.vregs.len() as u32 - 1)
        };
        let acc = (0..plan.shape.rows)
            .map(|i| {
                (0..plan.shape.vectors)
                    .map(|j| reg(f, format!("{prefix}acc{i}_{j}")))
                    .collect()
            })
            .collect();
        let mut loaded = [Vec::new(), Vec::new()];
        for (x, fac) in plan.shape.factors.iter().enumerate() {
            let per_stream = if fac.along_lanes { plan.shape.vectors } else { 1 };
            loaded[x] = (0..fac.streams(plan.shape.rows))
                .map(|i| {
                    (0..per_stream)
                        .map(|j| reg(f, format!("{prefix}{}{i}_{j}", ["va", "vb"][x])))
                        .collect()
                })
                .collect();
        }
        Vars {
            plan,
            flat,
            base,
            hoisted,
            bounds,
            target,
            target_row,
            row_stride,
            step,
            reach,
            walk,
            acc,
            loaded,
        }
    }
}

/// The bounds of a row group's lanes loops that depend only on the lanes' range, each where
/// the code uses it: the end of the full blocks (a multiple of the blocks' span from the
/// start), the whole vectors left after them, and the end of the whole vectors (where a tail
/// may or may not follow).
struct LaneBounds {
    blocks_end: Option<Var>,
    left: Option<Var>,
    vectors_end: Option<Var>,
}

impl LaneBounds {
    /// The bounds plan `p`'s code uses, declared by `var`.
    fn declare(p: &Plan, f: &mut Func, var: &mut impl FnMut(&mut Func, String) -> Var, prefix: &str) -> LaneBounds {
        let counts = p.parts.left.iter().filter(|&&r| r > 0).count();
        let several = p.leftover_block();
        let tested = several && (p.parts.left.contains(&0) || counts > 1);
        let mut declare = |used: bool, name: &str| used.then(|| var(f, format!("{prefix}{name}")));
        LaneBounds {
            blocks_end: declare(p.parts.lane_blocks || several, "blocks_end"),
            left: declare(tested, "left"),
            vectors_end: declare(p.parts.tail && !p.parts.tail_always, "vectors_end"),
        }
    }
}

/// What a block computes across its lanes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Width {
    Vectors(usize),
    /// One vector ending at the lanes loop's last point, after the vectors: it recomputes
    /// the lanes the vectors already hold and stores only the others (the remainder of the
    /// extent by the lanes), so that every factor load stays among the tile's points. Over a
    /// row shorter than a vector, its first lanes read points before the row (inside the
    /// buffers).
    Tail,
    /// One vector from the first point of a row shorter than a vector: it stores that row's
    /// lanes, and its other lanes read points after the row (inside the buffers).
    Head,
    Lane,
}

/// Which parts of the vector nest run for some tile of some CPE: the code of the others is
/// not written (every part runs where the extents are not known when generating: see
/// [`extent_values`]).
struct Parts {
    /// Groups of a full block's rows; single rows after them.
    row_blocks: bool,
    single_rows: bool,
    /// Blocks of a row's full vectors.
    lane_blocks: bool,
    /// The counts of whole vectors left after a row's full blocks that occur (0 among them
    /// when some row leaves none).
    left: Vec<usize>,
    /// Rows shorter than a vector; rows of a vector or more.
    short: bool,
    long: bool,
    /// Rows of a vector or more that end in a tail: some of them; all of them.
    tail: bool,
    tail_always: bool,
}

impl Parts {
    /// Every part, for blocks of `vectors` vectors.
    fn every(vectors: usize) -> Parts {
        Parts {
            row_blocks: true,
            single_rows: true,
            lane_blocks: true,
            left: (0..vectors).collect(),
            short: true,
            long: true,
            tail: true,
            tail_always: false,
        }
    }
}

/// An unaligned vector load (`simd_loadu`). No public source gives its cost on a CPE: it is
/// charged as two LDM loads and a merge on P0, as the pair of aligned accesses it is built
/// from (an assumption).
pub(super) const VLOAD: Ops = Ops {
    load: 2,
    fp: 1,
    ..Ops::ZERO
};
/// An unaligned vector store (`simd_storeu`): two LDM stores and a merge (an assumption, as
/// [`VLOAD`]).
pub(super) const VSTORE: Ops = Ops {
    store: 2,
    fp: 1,
    ..Ops::ZERO
};
/// A load of one element into every lane (`simd_loade`): one LDM load.
pub(super) const VBROADCAST: Ops = Ops { load: 1, ..Ops::ZERO };
/// An aligned vector load (`simd_load`): one LDM load, one a cycle on P1 (timing.md: one
/// 32-byte vector load per cycle on P1).
pub(super) const VLOAD_ALIGNED: Ops = Ops { load: 1, ..Ops::ZERO };
/// An aligned vector store (`simd_store`): one LDM store.
pub(super) const VSTORE_ALIGNED: Ops = Ops { store: 1, ..Ops::ZERO };

/// A vector load, aligned or not.
fn vload(aligned: bool) -> Ops {
    if aligned {
        VLOAD_ALIGNED
    } else {
        VLOAD
    }
}

/// A vector store, aligned or not.
fn vstore(aligned: bool) -> Ops {
    if aligned {
        VSTORE_ALIGNED
    } else {
        VSTORE
    }
}

impl Gen<'_> {
    /// The vector code of the compute nest, with its charges.
    pub(super) fn vector_nest(&self, out: &mut Vec<Stmt>, v: &Vars) {
        let p = &v.plan;
        let lanes = match p.shape.coalesced {
            Some(l) => format!(
                "{} and {} as one row",
                self.loop_names[l], self.loop_names[p.shape.lanes_loop]
            ),
            None => self.loop_names[p.shape.lanes_loop].clone(),
        };
        out.push(Stmt::Comment(format!(
            "In blocks of {} row(s) ({}) by {} vector(s) of {} lanes ({lanes}).",
            p.shape.rows,
            p.shape
                .rows_loop
                .map_or("-".to_string(), |l| self.loop_names[l].clone()),
            p.shape.vectors,
            p.shape.lanes,
        )));
        // Strides, once per tile.
        let mut setup = Vec::new();
        let mut ops = Ops::default();
        if let (Some(rv), Some(l)) = (v.target_row, p.shape.rows_loop) {
            let (e, o) = self.stride(0, l);
            setup.push(Stmt::Set(rv, e));
            ops += o;
        }
        if let (Some((_, stride)), Some((lo, _))) = (&v.hoisted, p.hoist) {
            let accesses = [0, p.shape.factors[0].access, p.shape.factors[1].access];
            for (&var, access) in stride.iter().zip(accesses) {
                if let Some(var) = var {
                    let (e, o) = self.stride(access, lo);
                    setup.push(Stmt::Set(var, e));
                    ops += o;
                }
            }
        }
        for (x, fac) in p.shape.factors.iter().enumerate() {
            if let (Some(rv), Some(l)) = (v.row_stride[x], p.shape.rows_loop) {
                let (e, o) = self.stride(fac.access, l);
                setup.push(Stmt::Set(rv, e));
                ops += o;
            }
            for (j, &l) in p.shape.reduce.iter().enumerate().take(v.step[x].len()) {
                let (e, o) = self.stride(fac.access, l);
                setup.push(Stmt::Set(v.step[x][j], e));
                ops += o;
            }
            if let Some((lo, hi)) = v.reach[x] {
                // Each reduction loop moves the index by `step * (extent - 1)` from its first
                // point to its last: the negative moves add to `lo`, the others to `hi`.
                let stride = |j: usize| match v.step[x].get(j) {
                    Some(&s) => Int::Var(s),
                    None => Int::Const(
                        fac.tap_stride
                            .expect("a factor without a stride variable has a constant one")
                            as i64,
                    ),
                };
                let moves: Vec<Int> = p
                    .shape
                    .reduce
                    .iter()
                    .enumerate()
                    .map(|(j, &l)| stride(j) * (self.extent(l) - Int::Const(1)))
                    .collect();
                let back = |m: &Int| Int::min(m.clone(), Int::Const(0));
                setup.push(Stmt::Set(lo, Int::sum(moves.iter().map(back).collect())));
                setup.push(Stmt::Set(
                    hi,
                    Int::sum(moves.iter().map(|m| m.clone() - back(m)).collect()),
                ));
                // Per loop: the move (a subtract and a multiply), its minimum (a compare and a
                // select) and what adds it to each sum (three).
                ops += int(7 * p.shape.reduce.len() as u32);
            }
        }
        // The lanes loops' bounds: a divide, a multiply and an add for each end, a remainder and
        // a divide for the vectors left, and the lanes' extent (a multiply of two extents with a
        // coalesced loop) in each.
        let (_, o, n) = self.lane_range(v);
        let multiple = |m: usize| o.clone() + n.clone() / Int::Const(m as i64) * Int::Const(m as i64);
        let span = p.shape.vectors * p.shape.lanes;
        let extent = u32::from(p.shape.coalesced.is_some());
        let b = &v.bounds;
        for (var, value, cost) in [
            (b.blocks_end, multiple(span), 3),
            (
                b.left,
                n.clone() % Int::Const(span as i64) / Int::Const(p.shape.lanes as i64),
                2,
            ),
            (b.vectors_end, multiple(p.shape.lanes), 3),
        ] {
            if let Some(var) = var {
                setup.push(Stmt::Set(var, value));
                ops += int(cost + extent);
            }
        }
        super::charge_once(out, ops);
        out.extend(setup);
        let parts = &p.parts;
        self.charge_blocks(out, v, parts);
        let lanes = |rows: usize| self.lane_loops(v, rows, parts);
        let rows_loops = match p.shape.rows_loop {
            Some(l) => {
                let (o, n) = (self.origin(l), self.extent(l));
                let full = match parts.row_blocks {
                    true => o.clone() + n.clone() / Int::Const(p.shape.rows as i64) * Int::Const(p.shape.rows as i64),
                    false => o.clone(),
                };
                let mut loops = Vec::new();
                if parts.row_blocks {
                    loops.push(Stmt::For {
                        var: self.point[l],
                        from: o,
                        to: full.clone(),
                        step: Int::Const(p.shape.rows as i64),
                        body: lanes(p.shape.rows),
                    });
                }
                if parts.single_rows {
                    loops.push(Stmt::For {
                        var: self.point[l],
                        from: full,
                        to: self.origin(l) + n,
                        step: Int::Const(1),
                        body: lanes(1),
                    });
                }
                loops
            }
            None => lanes(1),
        };
        match (v.base, v.hoisted, p.hoist) {
            (Some(base), Some((at, stride)), Some((lo, _))) => {
                // Each point of the hoisted loop starts its row groups from the bases there,
                // then moves them to its next point.
                let mut body: Vec<Stmt> = (0..3).map(|i| Stmt::Set(base[i], Int::Var(at[i]))).collect();
                body.extend(rows_loops);
                for (&at, step) in at.iter().zip(stride) {
                    if let Some(step) = step {
                        body.push(Stmt::Set(at, Int::Var(at) + Int::Var(step)));
                    }
                }
                let mut run = vec![Stmt::Set(self.point[lo], self.origin(lo))];
                run.extend(self.block_bases(v, at));
                run.extend(self.point_loops(&[lo], body));
                let outside = &p.shape.outer[..p.shape.outer.len() - 1];
                out.extend(self.point_loops(outside, run));
            }
            (Some(base), _, _) => {
                let mut rowed = self.block_bases(v, base);
                rowed.extend(rows_loops);
                out.extend(self.point_loops(&p.shape.outer, rowed));
            }
            (None, _, _) => out.extend(self.point_loops(&p.shape.outer, rows_loops)),
        }
    }

    /// Elements of access `i`'s buffer from one point of loop `l` to the next, and the
    /// operations that compute it.
    pub(super) fn stride(&self, i: usize, l: usize) -> (Int, Ops) {
        let v = self.buf_vars(i);
        let row: Vec<Int> = v.half.map(Int::Var).into_iter().collect();
        let extent = |d: usize| Int::Elem(v.extent, row.iter().cloned().chain([Int::Const(d as i64)]).collect());
        let rank = self.all[i].index.len();
        let mut terms = Vec::new();
        let mut ops = Ops::default();
        for (d, x) in self.all[i].index.iter().enumerate() {
            let Index::Affine(x) = x else {
                unreachable!("planned accesses have affine subscripts")
            };
            let c: i64 = x.terms.iter().filter(|t| t.0 == l).map(|t| t.1).sum();
            if c == 0 {
                continue;
            }
            let mut factors: Vec<Int> = (d + 1..rank).map(extent).collect();
            if c != 1 {
                factors.push(Int::Const(c));
            }
            ops += int(factors.len().saturating_sub(1) as u32);
            terms.push(Int::product(factors));
        }
        ops += int(terms.len().saturating_sub(1) as u32 + 1);
        (Int::sum(terms), ops)
    }

    /// The lanes loops of a block row group: full blocks, single vectors, single lanes (the
    /// parts that run: see [`Parts`]).
    fn lane_loops(&self, v: &Vars, rows: usize, parts: &Parts) -> Vec<Stmt> {
        let p = &v.plan;
        let (var, o, n) = self.lane_range(v);
        let bound = |b: Option<Var>| Int::Var(b.expect("a bound the code uses is set"));
        let span = p.shape.vectors * p.shape.lanes;
        let mut out = Vec::new();
        if parts.lane_blocks {
            out.push(Stmt::For {
                var,
                from: o.clone(),
                to: bound(v.bounds.blocks_end),
                step: Int::Const(span as i64),
                body: self.block(v, rows, Width::Vectors(p.shape.vectors)),
            });
        }
        // The whole vectors after the full blocks, as one block of as many vectors: a test
        // per count that occurs, most vectors first, the last untested when every row leaves
        // some.
        if p.shape.vectors > 1 {
            let counts: Vec<usize> = parts.left.iter().rev().copied().filter(|&r| r > 0).collect();
            let none = parts.left.contains(&0);
            let tests = |t: usize| int(t as u32) + cost::branch(t as u32);
            let mut otherwise = Vec::new();
            if none {
                super::charge_once(&mut otherwise, tests(counts.len()));
            }
            for (k, &r) in counts.iter().enumerate().rev() {
                let untested = !none && k + 1 == counts.len();
                let mut then = Vec::new();
                super::charge_once(&mut then, tests(if untested { k } else { k + 1 }));
                let width = Width::Vectors(r);
                self.charge_width(&mut then, v, rows, width, Int::Const(1), Int::Const(0), false);
                then.push(Stmt::Set(var, bound(v.bounds.blocks_end)));
                then.extend(self.block(v, rows, width));
                otherwise = match untested {
                    true => then,
                    false => vec![Stmt::If {
                        cond: Cond::Eq(bound(v.bounds.left), Int::Const(r as i64)),
                        then,
                        otherwise,
                    }],
                };
            }
            out.extend(otherwise);
        }
        // The rest: a tail vector when the extent holds a whole vector, else single lanes.
        let lanes = Int::Const(p.shape.lanes as i64);
        let mut tail = Vec::new();
        if parts.tail {
            let mut block = vec![Stmt::Set(var, o.clone() + n.clone() - lanes.clone())];
            block.extend(self.block(v, rows, Width::Tail));
            tail = match parts.tail_always {
                true => block,
                false => vec![Stmt::If {
                    cond: Cond::Lt(bound(v.bounds.vectors_end), o + n.clone()),
                    then: block,
                    otherwise: Vec::new(),
                }],
            };
        }
        match (parts.short, parts.long) {
            (true, true) => out.push(Stmt::If {
                cond: Cond::Lt(n, lanes),
                then: self.short_row(v, rows),
                otherwise: tail,
            }),
            (true, false) => out.extend(self.short_row(v, rows)),
            (false, _) => out.extend(tail),
        }
        out.extend(self.advance_bases(v, rows));
        out
    }

    /// The bases of the row group after one of `rows` rows: the target's and those of the
    /// factors that move along the rows, each `rows` row strides on.
    fn advance_bases(&self, v: &Vars, rows: usize) -> Vec<Stmt> {
        let p = &v.plan;
        let (Some(base), Some(target_row)) = (v.base, v.target_row) else {
            return Vec::new();
        };
        let by = |row: Var| match rows {
            1 => Int::Var(row),
            _ => Int::Var(row) * Int::Const(rows as i64),
        };
        let mut out = vec![Stmt::Set(base[0], Int::Var(base[0]) + by(target_row))];
        for (x, _) in p.shape.factors.iter().enumerate().filter(|(_, f)| f.along_rows) {
            let row = v.row_stride[x].expect("a factor along the rows has a row stride");
            out.push(Stmt::Set(base[x + 1], Int::Var(base[x + 1]) + by(row)));
        }
        out
    }

    /// The operations of [`Self::advance_bases`] after a row group of `rows` rows: an add per
    /// base, and a multiply with several rows.
    fn advance_ops(&self, v: &Vars, rows: usize) -> Ops {
        let p = &v.plan;
        if v.base.is_none() || v.target_row.is_none() {
            return Ops::default();
        }
        let bases = 1 + p.shape.factors.iter().filter(|f| f.along_rows).count() as u32;
        int(bases * if rows == 1 { 1 } else { 2 })
    }

    /// A block over a row shorter than a vector, with its charges: a head vector when its
    /// lanes after the row stay inside every buffer, else a tail vector when its lanes before
    /// the row do, else single lanes (a coalesced row, or one in a buffer shorter than a
    /// vector, always runs single lanes).
    fn short_row(&self, v: &Vars, rows: usize) -> Vec<Stmt> {
        let p = &v.plan;
        let (var, o, n) = self.lane_range(v);
        let mut lanes = Vec::new();
        self.charge_width(&mut lanes, v, rows, Width::Lane, n.clone(), n.clone(), false);
        // The row holds fewer lanes than a vector; bounding the loop by that as well (a
        // compare and a select, once) keeps C compilers from deriving, from the tests that
        // no vector fits, accesses past the buffers in iterations that never run.
        super::charge_once(&mut lanes, int(2));
        lanes.push(Stmt::For {
            var,
            from: o.clone(),
            to: o.clone() + Int::min(n.clone(), Int::Const(p.shape.lanes as i64 - 1)),
            step: Int::Const(1),
            body: self.block(v, rows, Width::Lane),
        });
        if !p.short_vectors {
            return lanes;
        }
        let width = Int::Const(p.shape.lanes as i64);
        let attempt = |out: &mut Vec<Stmt>, start: Int| {
            out.push(Stmt::Set(var, start));
            out.extend(self.block_indices(v, rows));
            let cond = self.fits(v, rows);
            let Cond::All(terms) = &cond else {
                unreachable!("the fit is a conjunction")
            };
            // The start and the block's indices; per test an add or two and a compare.
            let tests: u32 = terms.len() as u32;
            let ops = self.index_ops(v, rows) + int(2 + 3 * tests) + cost::branch(tests);
            super::charge_once(out, ops);
            cond
        };
        let mut tail = Vec::new();
        let tail_fits = attempt(&mut tail, o.clone() + n.clone() - width);
        let mut tail_block = Vec::new();
        self.charge_width(&mut tail_block, v, rows, Width::Tail, Int::Const(1), n.clone(), true);
        tail_block.extend(self.block_body(v, rows, Width::Tail));
        tail.push(Stmt::If {
            cond: tail_fits,
            then: tail_block,
            otherwise: lanes,
        });
        let mut out = Vec::new();
        let head_fits = attempt(&mut out, o);
        let mut head_block = Vec::new();
        self.charge_width(&mut head_block, v, rows, Width::Head, Int::Const(1), n, true);
        head_block.extend(self.block_body(v, rows, Width::Head));
        out.push(Stmt::If {
            cond: head_fits,
            then: head_block,
            otherwise: tail,
        });
        out
    }

    /// Whether a vector from the block's indices (a head, or a tail over a short row) stays
    /// inside the target's and every factor's buffer: at every row, over all reduction points,
    /// its first lane at or above 0 and its last below the buffer's elements. By construction a
    /// head can only run past the end and a tail before the start (a head starts at its row's
    /// first point, a tail ends at its last), but both ends are checked: a C compiler that
    /// cannot see this may refuse the accesses they guard (GCC's `-Warray-bounds` on a small
    /// buffer).
    fn fits(&self, v: &Vars, rows: usize) -> Cond {
        let p = &v.plan;
        let last = Int::Const(p.shape.lanes as i64 - 1);
        let inside = |i: usize, first: Int, end: Int| {
            [
                Cond::Lt(Int::Const(-1), first),
                Cond::Lt(end + last.clone(), Int::Const(self.s.buffers[i].capacity() as i64)),
            ]
        };
        let mut terms: Vec<Cond> = v.target[..rows]
            .iter()
            .flat_map(|&t| inside(0, Int::Var(t), Int::Var(t)))
            .collect();
        for (x, fac) in p.shape.factors.iter().enumerate() {
            let Some((lo, hi)) = v.reach[x] else { continue };
            for i in 0..fac.streams(rows) {
                let at = Int::Var(v.walk[x][i][0]);
                terms.extend(inside(fac.access, at.clone() + Int::Var(lo), at + Int::Var(hi)));
            }
        }
        Cond::All(terms)
    }

    /// One block: `rows` rows from the rows loop's point, `width` lanes from the lanes loop's.
    fn block(&self, v: &Vars, rows: usize, width: Width) -> Vec<Stmt> {
        let mut out = self.block_indices(v, rows);
        out.extend(self.block_body(v, rows, width));
        out
    }

    /// A block's start: the index of every row's first target element and of every factor
    /// stream's first element, from the row group's bases ([`Vars::base`]) and the block's
    /// place along the lanes, or else from the subscripts with the reduction loops at their
    /// origins.
    fn block_indices(&self, v: &Vars, rows: usize) -> Vec<Stmt> {
        let p = &v.plan;
        let mut out = Vec::new();
        let lane = self.lane_range(v).0;
        match v.base {
            Some(base) => out.push(Stmt::Set(v.target[0], Int::Var(base[0]) + Int::Var(lane))),
            None => {
                for &l in p.shape.reduce.iter().chain(&p.shape.fixed) {
                    out.push(Stmt::Set(self.point[l], self.origin(l)));
                }
                out.push(Stmt::Set(v.target[0], ldm_index(&self.access_ref(0).0)));
            }
        }
        for i in 1..rows {
            let row = v.target_row.expect("several rows have a row stride");
            out.push(Stmt::Set(v.target[i], Int::Var(v.target[i - 1]) + Int::Var(row)));
        }
        for (x, fac) in p.shape.factors.iter().enumerate() {
            let first = match v.base {
                Some(base) if fac.along_lanes => Int::Var(base[x + 1]) + Int::Var(lane),
                Some(base) => Int::Var(base[x + 1]),
                None => ldm_index(&self.access_ref(fac.access).0),
            };
            out.push(Stmt::Set(v.walk[x][0][0], first));
            for i in 1..fac.streams(rows) {
                let row = v.row_stride[x].expect("a factor along the rows has a row stride");
                out.push(Stmt::Set(
                    v.walk[x][i][0],
                    Int::Var(v.walk[x][i - 1][0]) + Int::Var(row),
                ));
            }
        }
        out
    }

    /// The indices [`Self::block_indices`] starts from, set in `base` at each point of the
    /// outer loops before the rows loop (or, with a hoisted loop, at its first point: see
    /// [`Plan::hoist`]): with the rows loop, the lanes loop (and a coalesced loop) and the
    /// reduction loops at their origins, the target's and each factor's index there, less the
    /// lanes variable's start for those that move along the lanes (a coalesced row's position
    /// starts at 0), so that a block's first index is one add away ([`Self::advance_bases`]
    /// moves them to each next row group).
    fn block_bases(&self, v: &Vars, base: [Var; 3]) -> Vec<Stmt> {
        let p = &v.plan;
        let mut out = Vec::new();
        for &l in p
            .shape
            .rows_loop
            .iter()
            .chain(&p.shape.coalesced)
            .chain([&p.shape.lanes_loop])
            .chain(&p.shape.reduce)
            .chain(&p.shape.fixed)
        {
            out.push(Stmt::Set(self.point[l], self.origin(l)));
        }
        // The lanes variable's start: the lanes loop's origin, or 0 with a coalesced loop.
        let start = p.shape.coalesced.is_none().then(|| self.origin(p.shape.lanes_loop));
        let less_start = |index: Int| match &start {
            Some(o) => index - o.clone(),
            None => index,
        };
        out.push(Stmt::Set(base[0], less_start(ldm_index(&self.access_ref(0).0))));
        for (x, fac) in p.shape.factors.iter().enumerate() {
            let index = ldm_index(&self.access_ref(fac.access).0);
            let index = match fac.along_lanes {
                true => less_start(index),
                false => index,
            };
            out.push(Stmt::Set(base[x + 1], index));
        }
        out
    }

    /// The operations of [`Self::block_bases`].
    fn base_ops(&self, v: &Vars) -> Ops {
        let p = &v.plan;
        let points = p.shape.rows_loop.iter().count()
            + p.shape.coalesced.iter().count()
            + 1
            + p.shape.reduce.len()
            + p.shape.fixed.len();
        let mut ops = int(points as u32) + self.access_ref(0).1;
        for fac in &p.shape.factors {
            ops += self.access_ref(fac.access).1;
        }
        // The lanes loop's start taken from the indices that move along it.
        if p.shape.coalesced.is_none() {
            ops += int(1 + p.shape.factors.iter().filter(|f| f.along_lanes).count() as u32);
        }
        ops
    }

    /// A block after [`Self::block_indices`]: its accumulators loaded, its reduction walk and
    /// its accumulators stored.
    fn block_body(&self, v: &Vars, rows: usize, width: Width) -> Vec<Stmt> {
        let p = &v.plan;
        let mut out = Vec::new();
        let vectors = match width {
            Width::Vectors(n) => n,
            Width::Tail | Width::Head => 1,
            Width::Lane => 0,
        };
        let whole = matches!(width, Width::Vectors(_));
        for i in 0..rows {
            for j in 0..vectors {
                out.push(Stmt::VLoad {
                    reg: v.acc[i][j],
                    place: self.at(0, v.target[i], j * p.shape.lanes),
                    broadcast: false,
                    aligned: whole && p.shape.target_aligned,
                });
            }
        }
        out.extend(self.walk(v, rows, width, 0));
        for i in 0..rows {
            if matches!(width, Width::Tail | Width::Head) {
                // A tail keeps its last lanes, a head its first.
                let (first, count, index) = match width {
                    Width::Tail => {
                        let kept = self.tail_lanes(v);
                        let first = Int::Const(p.shape.lanes as i64) - kept.clone();
                        (first.clone(), kept, Int::Var(v.target[i]) + first)
                    }
                    _ => (Int::Const(0), self.lane_range(v).2, Int::Var(v.target[i])),
                };
                let Place::Ldm { buf, half, .. } = self.at(0, v.target[i], 0) else {
                    unreachable!("planned accesses are in LDM")
                };
                out.push(Stmt::VStoreLanes {
                    reg: v.acc[i][0],
                    place: Place::Ldm { buf, half, index },
                    first,
                    count,
                });
                continue;
            }
            for j in 0..vectors {
                out.push(Stmt::VStore {
                    reg: v.acc[i][j],
                    place: self.at(0, v.target[i], j * p.shape.lanes),
                    aligned: whole && p.shape.target_aligned,
                });
            }
        }
        out
    }

    /// Reduction loop `level` (then the step itself) of a block.
    fn walk(&self, v: &Vars, rows: usize, width: Width, level: usize) -> Vec<Stmt> {
        let p = &v.plan;
        if level == p.shape.reduce.len() {
            return self.step(v, rows, width, None);
        }
        let unrolled = p.shape.unrolled.filter(|_| level + 1 == p.shape.reduce.len());
        // Indices the level walks with: a factor whose written-out steps load at
        // displacements keeps the level's own.
        let streams = |x: usize| {
            let walks = !(unrolled.is_some() && p.shape.factors[x].tap_stride.is_some());
            0..if walks { p.shape.factors[x].streams(rows) } else { 0 }
        };
        let mut out = Vec::new();
        for x in 0..2 {
            for i in streams(x) {
                out.push(Stmt::Set(v.walk[x][i][level + 1], Int::Var(v.walk[x][i][level])));
            }
        }
        let bump = |body: &mut Vec<Stmt>| {
            for x in 0..2 {
                for i in streams(x) {
                    let w = v.walk[x][i][level + 1];
                    body.push(Stmt::Set(w, Int::Var(w) + Int::Var(v.step[x][level])));
                }
            }
        };
        if let Some(n) = unrolled {
            // The steps one after the other, the other factors' indices bumped between them.
            for step in 0..n {
                if step > 0 {
                    bump(&mut out);
                }
                out.extend(self.step(v, rows, width, Some(step)));
            }
            return out;
        }
        let mut body = self.walk(v, rows, width, level + 1);
        bump(&mut body);
        match p.shape.outer_unrolled.filter(|_| level + 2 == p.shape.reduce.len()) {
            // Written out too: each point's steps, then its indices' bumps, in turn.
            Some(m) => {
                for _ in 0..m {
                    out.extend(body.iter().cloned());
                }
            }
            None => out.extend(self.point_loops(&[p.shape.reduce[level]], body)),
        }
        out
    }

    /// One reduction point of a block: step `tap` of the written-out innermost loop, if it is
    /// one.
    fn step(&self, v: &Vars, rows: usize, width: Width, tap: Option<usize>) -> Vec<Stmt> {
        let p = &v.plan;
        let depth = p.shape.reduce.len();
        let stream = |x: usize, row: usize| if p.shape.factors[x].along_rows { row } else { 0 };
        // Factor `x`'s element `offset` after its place at this step, for stream `i`.
        let place = |x: usize, i: usize, offset: usize| {
            let fac = &p.shape.factors[x];
            match (tap, fac.tap_stride) {
                (Some(step), Some(c)) => self.at(fac.access, v.walk[x][i][depth - 1], step * c + offset),
                _ => self.at(fac.access, v.walk[x][i][depth], offset),
            }
        };
        let mut out = Vec::new();
        match width {
            Width::Vectors(_) | Width::Tail | Width::Head => {
                let vectors = if let Width::Vectors(n) = width { n } else { 1 };
                for (x, fac) in p.shape.factors.iter().enumerate() {
                    for i in 0..fac.streams(rows) {
                        let n = if fac.along_lanes { vectors } else { 1 };
                        for j in 0..n {
                            out.push(Stmt::VLoad {
                                reg: v.loaded[x][i][j],
                                place: place(x, i, j * p.shape.lanes),
                                broadcast: !fac.along_lanes,
                                aligned: fac.aligned && matches!(width, Width::Vectors(_)),
                            });
                        }
                    }
                }
                for i in 0..rows {
                    for j in 0..vectors {
                        let reg =
                            |x: usize| v.loaded[x][stream(x, i)][if p.shape.factors[x].along_lanes { j } else { 0 }];
                        out.push(Stmt::VFma {
                            acc: v.acc[i][j],
                            a: reg(0),
                            b: reg(1),
                        });
                    }
                }
            }
            Width::Lane => {
                for i in 0..rows {
                    let load = |x: usize| Box::new(Value::Load(place(x, stream(x, i), 0)));
                    out.push(Stmt::Fold {
                        kind: ReduceKind::Sum,
                        dtype: DType::F32,
                        place: self.at(0, v.target[i], 0),
                        value: Value::Binary(BinaryOp::Mul, DType::F32, load(0), load(1)),
                    });
                }
            }
        }
        out
    }

    /// Element `offset` after index `at` of access `i`'s buffer.
    fn at(&self, i: usize, at: Var, offset: usize) -> Place {
        let index = match offset {
            0 => Int::Var(at),
            n => Int::Var(at) + Int::Const(n as i64),
        };
        Place::Ldm {
            buf: self.buf_vars(i).buf,
            half: if self.double(i) { Half::Current } else { Half::Single },
            index,
        }
    }

    /// The variable the lanes loops count with, its start and the points they run through:
    /// the lanes loop's own, or with a coalesced loop a position over both from 0.
    fn lane_range(&self, v: &Vars) -> (Var, Int, Int) {
        let l = v.plan.shape.lanes_loop;
        match (v.plan.shape.coalesced, v.flat) {
            (Some(outer), Some(flat)) => (flat, Int::Const(0), self.extent(outer) * self.extent(l)),
            _ => (self.point[l], self.origin(l), self.extent(l)),
        }
    }

    /// Lanes a tail block stores: the lanes' extent modulo the lanes.
    fn tail_lanes(&self, v: &Vars) -> Int {
        self.lane_range(v).2 % Int::Const(v.plan.shape.lanes as i64)
    }

    /// Charges every block of the nest, its loops and its steps.
    fn charge_blocks(&self, out: &mut Vec<Stmt>, v: &Vars, parts: &Parts) {
        let p = &v.plan;
        let outer_points = Int::product(p.shape.outer.iter().map(|&l| self.extent(l)).collect());
        // The outer loops' control, as the scalar nest charges it.
        for j in 0..p.shape.outer.len() {
            let iterations = Int::product(p.shape.outer[..=j].iter().map(|&l| self.extent(l)).collect());
            charge(out, LOOP + int(1), iterations);
        }
        let div = |a: Int, b: usize| a / Int::Const(b as i64);
        let rem = |a: Int, b: usize| a % Int::Const(b as i64);
        // Row groups per outer point: full blocks, then single rows.
        let groups: Vec<(usize, Int)> = match p.shape.rows_loop {
            Some(l) => {
                let (full, single) = (div(self.extent(l), p.shape.rows), rem(self.extent(l), p.shape.rows));
                // The row loops that run: each iteration's control, and once their bounds
                // and starts (a multiple of the block, by shifts, its start and a compare; the
                // loop of single rows an end and a compare more).
                charge(out, LOOP, outer_points.clone() * (full.clone() + single.clone()));
                let bounds = match (parts.row_blocks, parts.single_rows) {
                    (true, true) => 9,
                    (true, false) => 5,
                    _ => 3,
                };
                charge(out, int(bounds), outer_points.clone());
                let mut groups = Vec::new();
                if parts.row_blocks {
                    groups.push((p.shape.rows, full));
                }
                if parts.single_rows {
                    groups.push((1, single));
                }
                groups
            }
            None => vec![(1, Int::Const(1))],
        };
        match (v.base, &v.hoisted, p.hoist) {
            (Some(_), Some((_, stride)), Some(_)) => {
                // The bases once per run of the hoisted loop (its first point set first), and
                // at each of its points, their copies and the moves of those that move.
                let outside = &p.shape.outer[..p.shape.outer.len() - 1];
                let runs = Int::product(outside.iter().map(|&l| self.extent(l)).collect());
                charge(out, self.base_ops(v) + int(1), runs);
                let moves = stride.iter().flatten().count() as u32;
                charge(out, int(3 + moves), outer_points.clone());
            }
            (Some(_), _, _) => charge(out, self.base_ops(v), outer_points.clone()),
            (None, _, _) => {}
        }
        let n = self.lane_range(v).2;
        let span = p.shape.vectors * p.shape.lanes;
        // The block of the whole vectors after the full blocks charges itself (`lane_loops`).
        let mut widths = vec![(Width::Vectors(p.shape.vectors), div(n.clone(), span))];
        // A whole vector or more: a tail block if lanes remain. Fewer: a block chosen where it
        // runs, which charges itself (`short_row`).
        let whole = Int::min(div(n.clone(), p.shape.lanes), Int::Const(1));
        let remainder = rem(n.clone(), p.shape.lanes);
        widths.push((Width::Tail, whole.clone() * Int::min(remainder.clone(), Int::Const(1))));
        for (rows, groups) in groups {
            let calls = outer_points.clone() * groups;
            // The lanes loops' starts (the full blocks' loop, the block of the vectors left
            // after it) and the end of the lanes for the tail's test, and the test for a whole
            // vector (where rows of both kinds occur), once per row group (their other bounds
            // are set once per tile); the test for a remainder after it (where it can go
            // either way); each iteration's control is charged with its block. With a coalesced
            // loop, the lanes' extent each of those two tests reads is a multiply.
            let several = p.leftover_block();
            let tail_test = u32::from(parts.tail && !parts.tail_always);
            let short_test = u32::from(parts.short && parts.long);
            let extent = u32::from(p.shape.coalesced.is_some()) * (tail_test + short_test);
            let bounds = u32::from(parts.lane_blocks) + u32::from(several) + tail_test + extent;
            charge(
                out,
                int(bounds + short_test) + cost::branch(short_test) + self.advance_ops(v, rows),
                calls.clone(),
            );
            if parts.tail && !parts.tail_always {
                charge(out, int(2) + cost::branch(1), calls.clone() * whole.clone());
            }
            for (width, count) in &widths {
                let blocks = calls.clone() * count.clone();
                self.charge_width(out, v, rows, *width, blocks, remainder.clone(), false);
            }
        }
    }

    /// Charges `blocks` blocks of `rows` rows and `width`, their reduction loops and their
    /// steps; a tail or a head stores `kept` lanes a row. `started`: the blocks come after an
    /// attempt that set and charged their start and indices (see `short_row`).
    #[allow(clippy::too_many_arguments)]
    fn charge_width(
        &self,
        out: &mut Vec<Stmt>,
        v: &Vars,
        rows: usize,
        width: Width,
        blocks: Int,
        kept: Int,
        started: bool,
    ) {
        let p = &v.plan;
        let points = Int::product(p.shape.reduce.iter().map(|&l| self.extent(l)).collect());
        let own = self.block_ops(v, rows, width, started);
        if matches!(width, Width::Tail | Width::Head) {
            // A tail's start unless set already, and per row the stored lanes' place, first
            // lane and count, and one copy per lane.
            let start = if started { 0 } else { 2 };
            charge(out, int(start + 3 * rows as u32), blocks.clone());
            let copy = Ops {
                load: 1,
                store: 1,
                ..LOOP
            };
            charge(out, copy * rows as u32, blocks.clone() * kept.clone());
            // The multiply-adds of the stored lanes: the others were counted with the blocks
            // that store them.
            let flops = Ops {
                flops: 2 * rows as u32,
                ..Ops::ZERO
            };
            charge(out, flops, blocks.clone() * points.clone() * kept);
        }
        // The reduction loops' control: every level's iterations. The innermost loop's body
        // is straight-line code (its steps, written out or not, its indices' bumps and its
        // control), so it is charged as one stretch: its integer work issues beside the
        // multiply-adds.
        let streams: u32 = p.shape.factors.iter().map(|f| f.streams(rows) as u32).sum();
        let bumped = bumped_streams(p, rows);
        let levels = p.shape.reduce.len();
        let step = self.step_ops(v, rows, width);
        let iterations = |j: usize| Int::product(p.shape.reduce[..j].iter().map(|&l| self.extent(l)).collect());
        // The levels run as loops, and the steps (with their bumps) the innermost one's body
        // holds; a written-out level outside the innermost repeats, per point, the copies of
        // the innermost's indices, its steps and its own indices' bumps.
        let (written, body) = match (p.shape.unrolled, p.shape.outer_unrolled) {
            (Some(n), outer) => {
                let steps = step * n as u32 + int(bumped * (n as u32 - 1));
                match outer {
                    Some(m) => (2, (int(bumped) + steps + int(streams)) * m as u32),
                    None => (1, steps),
                }
            }
            (None, _) => (0, step),
        };
        let loops = levels - written;
        if loops > 0 {
            charge(out, own, blocks.clone());
        }
        for j in 0..loops {
            // The inner level's start and its indices' copies (no start for one written out,
            // and, written out innermost, no copies of the indices its steps load at
            // displacements from).
            let inner = match j + 1 < levels {
                true if j + 1 == loops && written == 1 => int(bumped),
                true if j + 1 == loops && written == 2 => int(streams),
                true => int(1 + streams),
                false => Ops::default(),
            };
            let own = LOOP + int(streams) + inner;
            match j + 1 == loops {
                true => charge(out, own + body, blocks.clone() * iterations(j + 1)),
                false => charge(out, own, blocks.clone() * iterations(j + 1)),
            }
        }
        if loops == 0 {
            // Steps written out with no loop around them: each block runs them once, in the
            // same straight-line code as its accumulators' loads and stores.
            charge(out, own + body, blocks);
        }
    }

    /// A block's start ([`Self::block_indices`]): its subscripts and stream indices.
    fn index_ops(&self, v: &Vars, rows: usize) -> Ops {
        let p = &v.plan;
        // From the bases, each first index is an add (a move for a factor not along the lanes).
        let first = |i: usize| match v.base {
            Some(_) => int(1),
            None => self.access_ref(i).1,
        };
        let mut ops = first(0) + int(rows as u32);
        if v.base.is_none() {
            ops += int((p.shape.reduce.len() + p.shape.fixed.len()) as u32);
        }
        for fac in &p.shape.factors {
            ops += first(fac.access) + int(fac.streams(rows) as u32);
        }
        ops
    }

    /// A block's own operations: its lanes loop's iteration and setting its indices (unless
    /// `started`: set and charged before), loading and storing its accumulators, entering its
    /// reduction walk.
    fn block_ops(&self, v: &Vars, rows: usize, width: Width, started: bool) -> Ops {
        let p = &v.plan;
        let r = rows as u32;
        let mut ops = match started {
            true => Ops::default(),
            false => LOOP + self.index_ops(v, rows),
        };
        match width {
            Width::Vectors(n) => {
                let n = n as u32;
                // The accumulators' loads and stores (each vector but a row's first at a
                // displacement: see `cost`).
                ops += (vload(p.shape.target_aligned) + vstore(p.shape.target_aligned)) * (r * n);
            }
            // One accumulator per row, loaded, and stored whole to the local array.
            Width::Tail | Width::Head => ops += (VLOAD + VSTORE) * r,
            Width::Lane => {}
        }
        // The outermost reduction level's index copies and its loop's start (none when its
        // steps are written out, and then, innermost, copies only of the indices bumped
        // between them).
        let streams = p.shape.factors.iter().map(|f| f.streams(rows) as u32).sum();
        let (copies, start) = match (p.shape.written_steps(), p.shape.reduce.len()) {
            (Some(_), 1) => (bumped_streams(p, rows), 0),
            (Some(_), _) => (streams, 0),
            (None, _) => (streams, 1),
        };
        ops + int(copies + start)
    }

    /// One reduction point of a block: its loads and its multiply-adds (the innermost loop's
    /// control and index bumps are charged with the loop).
    fn step_ops(&self, v: &Vars, rows: usize, width: Width) -> Ops {
        let p = &v.plan;
        let r = rows as u32;
        let mut ops = Ops {
            carried: 1,
            ..Ops::default()
        };
        match width {
            Width::Vectors(_) | Width::Tail | Width::Head => {
                let n = if let Width::Vectors(n) = width { n as u32 } else { 1 };
                for fac in &p.shape.factors {
                    let s = fac.streams(rows) as u32;
                    let aligned = fac.aligned && matches!(width, Width::Vectors(_));
                    ops += match fac.along_lanes {
                        true => vload(aligned) * (s * n),
                        false => VBROADCAST * s,
                    };
                }
                ops += cost::fma(p.shape.lanes as u32, false) * (r * n);
                if matches!(width, Width::Tail | Width::Head) {
                    // Counted by the lanes it keeps (see `charge_width`).
                    ops.flops = 0;
                }
            }
            Width::Lane => {
                // Per row: both factors' loads, the target's load and store, one fused
                // multiply-add.
                let row = Ops {
                    load: 3,
                    store: 1,
                    ..cost::fma(1, false)
                };
                ops += row * r;
            }
        }
        ops
    }
}

/// The element index of an LDM place.
/// Indices of plan `p`'s factors, in a block of `rows` rows, that the written-out steps of its
/// innermost reduction loop bump between them (all of them when its steps are not written
/// out).
fn bumped_streams(p: &Plan, rows: usize) -> u32 {
    p.shape
        .factors
        .iter()
        .filter(|f| p.shape.unrolled.is_none() || f.tap_stride.is_none())
        .map(|f| f.streams(rows) as u32)
        .sum()
}

fn ldm_index(p: &Place) -> Int {
    match p {
        Place::Ldm { index, .. } => index.clone(),
        Place::Main { .. } => unreachable!("planned accesses are in LDM"),
    }
}
