//! Register blocking of a sum of products on LDM tiles (matrix products, convolutions):
//! `t[..] += a[..] * b[..]` in f32, as code generation writes it in vectors
//! (`swflow_codegen`'s vector code, which documents the nest) and as the estimate charges it.
//!
//! One parallel loop, the *lanes*, moves the target and the factors that move along it by one
//! element (a factor that does not move along it is broadcast); another parallel loop may give
//! a block several *rows* that share the factors not moving along it. When the loop outside
//! the lanes loop moves every factor along the lanes by a whole tile row, the lanes run
//! through both loops as one longer row (*coalesced*): always when the lanes loop's tiles are
//! shorter than [`ROW_LANES`], and when that takes fewer cycles per target element where
//! they are longer (a row of 28 points in vectors of 8 fills its last vector half, seven rows
//! of 28 as one row fill all but the last). A block's row spans some of the whole vectors of
//! a tile's row, and a block takes up to [`ROWS`] rows within [`ACCUMULATORS`] accumulators
//! and the registers: the shape that takes the fewest cycles per multiply-add, each reduction
//! step of a block taking the longest of its multiply-adds with the merges of its unaligned
//! loads (P0), its loads (P1), and a multiply-add's latency.

use swflow_frontend::ir::{BinaryOp, DType, ReduceKind};

use crate::loops::{Access, Expr, Index, Kernel, LoopKind, Program};

use super::{Schedule, LDM_BUFFER_ALIGN};

/// Rows of a block, at most.
pub const ROWS: usize = 16;
/// Target elements below which a tile's rows always run on into the next where they can
/// (four `floatv4` or two `floatv8`).
pub const ROW_LANES: usize = 16;
/// Accumulators of a block, at most: enough independent multiply-adds to cover the
/// floating-point latency between the updates of one accumulator, and few enough to leave
/// registers for a row of factor vectors and a broadcast one ([`REGISTERS`] bounds the sum). A
/// block's row spans up to this many vectors, as its rows and the registers allow: a tile of
/// two rows takes blocks of two rows of several vectors, where blocks of two vectors would wait
/// on that latency. The more rows share a factor's unaligned load, the fewer merges per
/// multiply-add: 8 rows of 3 vectors take 27 P0 slots per 24 multiply-adds, 4 rows of 4 take
/// 20 per 16.
pub const ACCUMULATORS: usize = 24;
/// Most points of an innermost reduction loop written out step by step (a 3 x 3 or 7 x 7
/// window's row).
pub const UNROLL: usize = 8;
/// Most steps written out when the loop outside the innermost is written out too (a 3 x 3
/// window, whole: its rows' steps one after the other, without the rows' loop).
pub const WRITTEN_STEPS: usize = 16;
/// Vector registers a block may hold (of the CPE's 32, `$31` reads as zero and one is left to
/// the compiler: reference/simd.md).
pub const REGISTERS: usize = 30;

/// The shape of a kernel's register blocks.
#[derive(Clone, Debug, PartialEq)]
pub struct Blocking {
    pub lanes_loop: usize,
    /// A parallel loop whose points the lanes run through as well, as one longer row: the
    /// target's subscript before the last, along which every factor that moves along the
    /// lanes moves by a whole row of its tile (and the others not at all).
    pub coalesced: Option<usize>,
    pub rows_loop: Option<usize>,
    /// The other parallel loops, in nest order.
    pub outer: Vec<usize>,
    /// The reduction loops that run, in nest order: those of more than one point per tile.
    pub reduce: Vec<usize>,
    /// The reduction loops of one point per tile: set once per block, not run.
    pub fixed: Vec<usize>,
    /// Points of the innermost reduction loop when every tile has the same few (at most
    /// [`UNROLL`]): its steps are written out one after the other, without loop control.
    pub unrolled: Option<usize>,
    /// Points of the reduction loop outside the innermost when it is written out too (the
    /// innermost is, and every tile has the same few of both, at most [`WRITTEN_STEPS`]
    /// steps together): its points' steps follow one another, each point's indices bumped
    /// between them.
    pub outer_unrolled: Option<usize>,
    pub factors: [Factor; 2],
    /// Every whole vector of the target in a block of whole vectors starts aligned (see
    /// [`aligned`]).
    pub target_aligned: bool,
    /// f32 lanes of a vector register.
    pub lanes: usize,
    /// Vectors per row of a full block.
    pub vectors: usize,
    /// Rows of a full block (1 without a rows loop).
    pub rows: usize,
    /// What one reduction step of the blocks of a tile row costs.
    pub steps: Steps,
    /// P0 and P1 slots of one reduction step of a full block.
    pub step_slots: (f64, f64),
    /// Cycles from a multiply-add's issue to its result.
    pub fp_latency: f64,
}

impl Blocking {
    /// Cycles of one reduction step per vector of a tile of `rows` points along the rows
    /// loop (1 without one): its full blocks, then its single rows, across the whole vectors
    /// of the longest row.
    pub fn cycles_per_vector(&self, rows: usize) -> f64 {
        self.steps.per_vector(rows, self.rows)
    }

    /// Cycles a full block spends around its reduction walk, at each visit of a tile of the
    /// reduction loops: loading its accumulators from the target and storing them back (two
    /// LDM accesses and a merge each where the target's vectors are not aligned), and setting
    /// its indices (the lanes loop's iteration, an index per row, a first index and the
    /// streams of each factor, and the copies the reduction walk starts from), on the two
    /// pipelines as a step's cycles are counted. When the whole walk is written out
    /// ([`Blocking::written_steps`]), the block is one stretch of straight-line code: its own
    /// work issues in the slots its steps leave free, and it costs what the stretch takes
    /// beyond the steps.
    pub fn entry_cycles(&self) -> f64 {
        let accumulators = (self.rows * self.vectors) as f64;
        let (p0, p1) = match self.target_aligned {
            true => (0.0, 2.0 * accumulators),
            false => (2.0 * accumulators, 4.0 * accumulators),
        };
        let streams: usize = self.factors.iter().map(|f| f.streams(self.rows)).sum();
        let integer = (3 + self.rows + self.factors.len() + 2 * streams) as f64;
        // The lanes loop's branch issues on P1 with the accesses.
        let p1 = p1 + 1.0;
        match self.written_steps() {
            Some(n) => {
                let n = n as f64;
                let (s0, s1) = self.step_slots;
                let steps = n * s0.max(s1).max(self.fp_latency);
                let (p0, p1) = (p0 + n * s0, p1 + n * s1);
                let stretch = p0.max(p1).max((p0 + p1 + integer) / 2.0).max(n * self.fp_latency);
                stretch - steps
            }
            None => p0.max(p1).max((p0 + p1 + integer) / 2.0),
        }
    }

    /// The steps of a block's whole reduction walk when every loop of it is written out (one
    /// loop, or two with [`Blocking::outer_unrolled`]): the block is then one stretch of
    /// straight-line code.
    pub fn written_steps(&self) -> Option<usize> {
        match (self.reduce.len(), self.unrolled, self.outer_unrolled) {
            (1, Some(n), None) => Some(n),
            (2, Some(n), Some(m)) => Some(n * m),
            _ => None,
        }
    }
}

/// Cycles of one reduction step across the whole vectors of the longest tile row (blocks of
/// the widest vectors, then one of what is left).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Steps {
    /// Of a full block's rows.
    pub full: f64,
    /// Of a single row.
    pub single: f64,
    /// Whole vectors of the longest row (one when it has fewer points than a vector).
    pub whole: usize,
}

impl Steps {
    /// Per vector, over `t` rows in blocks of `n`.
    fn per_vector(&self, t: usize, n: usize) -> f64 {
        ((t / n) as f64 * self.full + (t % n) as f64 * self.single) / (t * self.whole) as f64
    }
}

/// One factor of the product, as the blocks load it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Factor {
    /// Its access, in [`super::accesses`] order.
    pub access: usize,
    /// Moves along the lanes by one element (else it is the same in every lane).
    pub along_lanes: bool,
    pub along_rows: bool,
    /// Moves along the lanes, and every whole vector of it a block of whole vectors loads
    /// starts aligned (see [`aligned`]).
    pub aligned: bool,
    /// When the innermost reduction loop's steps are written out and the factor's place moves
    /// along it by a constant (that loop only in its last subscript, coefficient `c >= 0`:
    /// `c` elements in its LDM box, or none): `c`. Its steps then load at displacements from
    /// one index, which is never bumped between them.
    pub tap_stride: Option<usize>,
}

impl Factor {
    /// Indices it walks with in a block of `rows` rows: one per row it moves along.
    pub fn streams(&self, rows: usize) -> usize {
        if self.along_rows {
            rows
        } else {
            1
        }
    }

    /// Registers one reduction step loads for a block of `rows` rows and `vectors` vectors.
    pub fn registers(&self, rows: usize, vectors: usize) -> usize {
        self.streams(rows) * if self.along_lanes { vectors } else { 1 }
    }
}

/// The accesses ([`super::accesses`] indices) of the two factors when kernel `k`'s statement
/// is a sum of products of two loads, or of a load and a prologue ([`super::prologue`]), whose
/// factor is its main access: the code applies the prologue to that access's box before the
/// products read it.
pub fn product_factors(k: &Kernel) -> Option<(usize, usize)> {
    if k.stmt.reduce?.kind != ReduceKind::Sum {
        return None;
    }
    let Expr::Binary(BinaryOp::Mul, a, b) = &k.stmt.value else {
        return None;
    };
    let main = super::prologue::prologue(k).map(|p| (p.factor, p.main));
    let factor = |j: usize, e: &'_ Expr| -> Option<Access> {
        match (e, main) {
            (_, Some((f, m))) if f == j => Some(m.clone()),
            (Expr::Load(x), _) => Some(x.clone()),
            _ => None,
        }
    };
    let (a, b) = (&factor(0, a)?, &factor(1, b)?);
    let all = super::accesses(k);
    let position = |x: &Access| all.iter().position(|y| **y == *x);
    Some((position(a)?, position(b)?))
}

/// The blocking of kernel `k` under schedule `s` with `lanes` f32 lanes a vector and a
/// multiply-add latency of `fp_latency` cycles, when its compute nest is a sum of products of
/// two f32 LDM tiles into an f32 LDM tile that every parallel point reaches at its own
/// element, and some of its rows run vectors (see `runs_vectors`). `buffered` and `streamed`
/// tell, per access ([`super::accesses`]), whether it is in an LDM buffer and whether that
/// buffer is a tape arena.
pub fn blocking(
    p: &Program,
    k: &Kernel,
    s: &Schedule,
    lanes: usize,
    fp_latency: f64,
    buffered: &[bool],
    streamed: &[bool],
) -> Option<Blocking> {
    if lanes < 2 {
        return None;
    }
    let all = super::accesses(k);
    let f32_tile = |i: usize| buffered[i] && !streamed[i];
    let (fa, fb) = product_factors(k)?;
    let tensor = |i: usize| k.operands[all[i].operand];
    for i in [0, fa, fb] {
        if !f32_tile(i) || p.tensor(tensor(i)).ty.dtype != DType::F32 {
            return None;
        }
    }
    if [fa, fb].iter().any(|&i| k.reads_target(p, &all[i])) {
        return None;
    }
    // Loops each subscript of an access uses, with their coefficients.
    let affine = |i: usize| -> Option<Vec<Vec<(usize, i64)>>> {
        all[i]
            .index
            .iter()
            .map(|x| match x {
                Index::Affine(x) => Some(x.terms.iter().filter(|t| t.1 != 0).copied().collect()),
                Index::Gathered { .. } => None,
            })
            .collect()
    };
    let (ti, ai, bi) = (affine(0)?, affine(fa)?, affine(fb)?);
    let parallel: Vec<usize> = (0..k.loops.len())
        .filter(|&l| k.loops[l].kind == LoopKind::Parallel)
        .collect();
    let reduce: Vec<usize> = (0..k.loops.len())
        .filter(|&l| k.loops[l].kind == LoopKind::Reduce)
        .collect();
    if reduce.is_empty() {
        return None;
    }
    // Loops of one point per tile (a 1 x 1 convolution's window, the outer part of a split
    // loop) need no loop, unless all are.
    let (mut running, mut fixed): (Vec<usize>, Vec<usize>) =
        reduce.iter().partition(|&&l| k.loops[l].extent > 1 && s.tiles[l] > 1);
    if running.is_empty() {
        (running, fixed) = (reduce.clone(), Vec::new());
    }
    // A loop whose every tile holds all its few points, which the partition does not cut.
    let few = |l: usize| {
        let n = k.loops[l].extent;
        (2..=UNROLL).contains(&n) && s.tiles[l] == n && !s.partition.contains(&l)
    };
    let unrolled = running.last().filter(|&&l| few(l)).map(|&l| k.loops[l].extent);
    let outer_unrolled = unrolled.and_then(|n| {
        let &l = running.iter().rev().nth(1)?;
        let m = k.loops[l].extent;
        (few(l) && n * m <= WRITTEN_STEPS).then_some(m)
    });
    // The most points a tile takes along loop `l` (its size, unless every CPE's block is
    // shorter).
    let longest = |l: usize| {
        extent_values(k, s, l)
            .and_then(|v| v.last().copied())
            .unwrap_or(s.tiles[l])
    };
    // The target: each parallel loop in one subscript, and within a tile one loop per
    // subscript, step ±1 (other loops of the subscript, such as a grouped convolution's group,
    // take one point per tile and only move the tile's origin).
    let uses = |sub: &[Vec<(usize, i64)>], l: usize| sub.iter().filter(|d| d.iter().any(|t| t.0 == l)).count();
    let moving = |d: &Vec<(usize, i64)>| d.iter().filter(|t| longest(t.0) > 1).copied().collect::<Vec<_>>();
    if ti.iter().any(|d| {
        let m = moving(d);
        m.len() > 1 || m.iter().any(|t| t.1.abs() != 1)
    }) {
        return None;
    }
    if parallel.iter().any(|&l| uses(&ti, l) != 1) || reduce.iter().any(|&l| uses(&ti, l) != 0) {
        return None;
    }
    // Moves by one element along `l` (only in the last subscript, coefficient 1), or not at all.
    let lane_step = |sub: &[Vec<(usize, i64)>], l: usize| -> Option<bool> {
        match uses(sub, l) {
            0 => Some(false),
            1 if sub.last().is_some_and(|d| d.contains(&(l, 1))) => Some(true),
            _ => None,
        }
    };
    // The lanes: the innermost parallel loop along which the target moves by one element and
    // each factor by one or none, at least one factor moving.
    let lanes_loop = parallel.iter().rev().copied().find(|&l| {
        lane_step(&ti, l) == Some(true)
            && matches!(
                (lane_step(&ai, l), lane_step(&bi, l)),
                (Some(x), Some(y)) if x || y
            )
    })?;
    // Whether the rows of access `i`'s box (subscripts `sub`) are one tile long: no tile loop
    // of its last subscript's loops runs inside the box's depth.
    let tile_rows = |i: usize, sub: &[Vec<(usize, i64)>]| {
        let inside = &s.order[s.buffers[i].depth.min(s.order.len())..];
        sub.last().is_some_and(|d| d.iter().all(|t| !inside.contains(&t.0)))
    };
    // Rows of the tile may run on into the next: the target's subscript before the last is one
    // loop, and a factor moving along the lanes holds in its last subscript no other loop with
    // a tile of several points (so its tile's rows are as long as the target's) and that loop,
    // with coefficient 1, just before; and the target's and those factors' boxes hold rows of
    // one tile, so that the joined rows follow one another in them.
    let coalescable = (ti.len() >= 2 && tile_rows(0, &ti))
        .then(|| match ti[ti.len() - 2].as_slice() {
            &[(l, 1)] if l != lanes_loop && k.loops[l].kind == LoopKind::Parallel && s.tiles[l] > 1 => Some(l),
            _ => None,
        })
        .flatten()
        .filter(|&outer| {
            [(fa, &ai), (fb, &bi)]
                .iter()
                .all(|&(i, sub)| match lane_step(sub, lanes_loop) {
                    Some(true) => {
                        let n = sub.len();
                        n >= 2
                            && tile_rows(i, sub)
                            && sub[n - 1].iter().all(|&(l, _)| l == lanes_loop || s.tiles[l] == 1)
                            && uses(sub, outer) == 1
                            && sub[n - 2].contains(&(outer, 1))
                    }
                    _ => uses(sub, outer) == 0,
                })
        });
    let tap_stride = |sub: &[Vec<(usize, i64)>]| -> Option<usize> {
        let l = *running.last()?;
        unrolled?;
        let (last, before) = sub.split_last()?;
        if before.iter().any(|d| d.iter().any(|t| t.0 == l)) {
            return None;
        }
        usize::try_from(last.iter().filter(|t| t.0 == l).map(|t| t.1).sum::<i64>()).ok()
    };
    // The best blocks with the lanes running through `coalesced` as well, or not, and their
    // cycles per target element of the longest tile (a row's last vector, partly filled,
    // costs a whole one).
    let search = |coalesced: Option<usize>| -> Option<(Blocking, f64)> {
        // A block's row spans some of the whole vectors of the longest row of a tile (one when
        // it has fewer), within `ACCUMULATORS` and the registers.
        let row_points = longest(lanes_loop) * coalesced.map_or(1, longest);
        let whole = (row_points / lanes).max(1);
        let aligned =
            |access: usize, sub: &[Vec<(usize, i64)>]| aligned(k, s, access, sub, lanes_loop, coalesced, lanes);
        let factor = |access: usize, sub: &[Vec<(usize, i64)>], rows: Option<usize>| {
            let along_lanes = lane_step(sub, lanes_loop) == Some(true);
            Factor {
                access,
                along_lanes,
                along_rows: rows.is_some_and(|l| uses(sub, l) > 0),
                aligned: along_lanes && aligned(access, sub),
                tap_stride: tap_stride(sub),
            }
        };
        // The P0 slots (multiply-adds and the merges of unaligned loads) and P1 slots (loads)
        // of a reduction step of a block of `n` rows and `v` vectors, within the registers.
        let slots = |rows: Option<usize>, n: usize, v: usize| -> Option<(f64, f64)> {
            let (x, y) = (factor(fa, &ai, rows), factor(fb, &bi, rows));
            let regs = x.registers(n, v) + y.registers(n, v);
            if regs + n * v > REGISTERS {
                return None;
            }
            let loads = |f: &Factor| -> (f64, f64) {
                let r = f.registers(n, v) as f64;
                match (f.along_lanes, f.aligned) {
                    (true, false) => (r, 2.0 * r),
                    _ => (0.0, r),
                }
            };
            let ((x0, x1), (y0, y1)) = (loads(&x), loads(&y));
            Some(((n * v) as f64 + x0 + y0, x1 + y1))
        };
        // A step takes the longest of its P0 slots, its P1 slots and the latency of a
        // multiply-add (each accumulator's next one waits for its last).
        let step = |rows: Option<usize>, n: usize, v: usize| -> Option<f64> {
            let (p0, p1) = slots(rows, n, v)?;
            Some(p0.max(p1).max(fp_latency))
        };
        // A step of `n` rows across the longest row: blocks of `v` vectors, then one of the
        // whole vectors left.
        let across = |rows: Option<usize>, n: usize, v: usize| -> Option<f64> {
            let rest = match whole % v {
                0 => 0.0,
                r => step(rows, n, r)?,
            };
            Some((whole / v) as f64 * step(rows, n, v)? + rest)
        };
        // The block: its vectors, and the parallel loop of its rows with their number, that
        // take the fewest cycles per multiply-add over the longest tile: its full blocks, then
        // its single rows. Wider blocks come first, and a narrower one is taken only when
        // faster.
        let mut best: Option<(usize, Option<usize>, usize, Steps, f64)> = None;
        for v in (1..=whole.min(ACCUMULATORS)).rev() {
            let mut consider = |rows_loop: Option<usize>, n: usize, steps: Steps, cost: f64| {
                if best.as_ref().is_none_or(|b| cost < b.4) {
                    best = Some((v, rows_loop, n, steps, cost));
                }
            };
            if let Some(single) = across(None, 1, v) {
                let steps = Steps {
                    full: single,
                    single,
                    whole,
                };
                consider(None, 1, steps, steps.per_vector(1, 1));
            }
            for &l in parallel
                .iter()
                .filter(|&&l| l != lanes_loop && Some(l) != coalesced && longest(l) > 1)
            {
                let t = longest(l);
                let Some(single) = across(Some(l), 1, v) else { continue };
                let most = ROWS.min(ACCUMULATORS / v).min(t);
                for n in (2..=most).rev() {
                    let Some(full) = across(Some(l), n, v) else { continue };
                    let steps = Steps { full, single, whole };
                    consider(Some(l), n, steps, steps.per_vector(t, n));
                }
            }
        }
        let (vectors, rows_loop, rows, steps, per_vector) = best?;
        let step_slots = slots(rows_loop, rows, vectors)?;
        let per_element = per_vector * row_points.div_ceil(lanes) as f64 / row_points as f64;
        let outer = parallel
            .iter()
            .copied()
            .filter(|&l| l != lanes_loop && Some(l) != rows_loop && Some(l) != coalesced)
            .collect();
        let blocks = Blocking {
            lanes_loop,
            coalesced,
            rows_loop,
            outer,
            reduce: running.clone(),
            fixed: fixed.clone(),
            unrolled,
            outer_unrolled,
            factors: [factor(fa, &ai, rows_loop), factor(fb, &bi, rows_loop)],
            target_aligned: aligned(0, &ti),
            lanes,
            vectors,
            rows,
            steps,
            step_slots,
            fp_latency,
        };
        Some((blocks, per_element))
    };
    // Rows shorter than a block's lanes always run on; longer ones do when that takes fewer
    // cycles per element (a row ending in a partly filled vector then fills it from the next).
    let best = match coalescable {
        Some(outer) if s.tiles[lanes_loop] < ROW_LANES => search(Some(outer)).map(|b| b.0),
        Some(outer) => [search(None), search(Some(outer))]
            .into_iter()
            .flatten()
            .reduce(|apart, on| if on.1 < apart.1 { on } else { apart })
            .map(|b| b.0),
        _ => search(None).map(|b| b.0),
    };
    best.filter(|b| runs_vectors(k, s, b))
}

/// Whether the code of blocking `b` of kernel `k` under schedule `s` runs any vector: some
/// row along the lanes (joined with the coalesced loop's, if any) holds a whole vector, or
/// its rows shorter than a vector run as one short vector each, which they do only apart from
/// a coalesced loop and when the target's buffer and those of the factors moving along the
/// lanes hold a vector's elements at least (the vector runs past the row). Otherwise every
/// row runs single lanes: the scalar nest, with its code and its cost.
fn runs_vectors(k: &Kernel, s: &Schedule, b: &Blocking) -> bool {
    let lengths = match b.coalesced {
        Some(outer) => extent_values(k, s, outer)
            .zip(extent_values(k, s, b.lanes_loop))
            .map(|(rows, row)| {
                rows.iter()
                    .flat_map(|&r| row.iter().map(move |&n| r * n))
                    .collect::<Vec<_>>()
            }),
        None => extent_values(k, s, b.lanes_loop),
    };
    let Some(lengths) = lengths else { return true };
    let holds = |i: usize| s.buffers[i].elements() >= b.lanes;
    let short_vectors =
        b.coalesced.is_none() && holds(0) && b.factors.iter().all(|f| !f.along_lanes || holds(f.access));
    lengths.iter().any(|&n| n >= b.lanes) || (short_vectors && lengths.iter().any(|&n| n < b.lanes))
}

/// Whether every whole vector a block of whole vectors loads or stores through access `i` of
/// kernel `k` (with subscripts `sub`: loops and coefficients) under schedule `s` starts at an
/// index, counted from its buffer's half, that is a multiple of the `lanes` (its address is
/// then a multiple of a vector's bytes: each buffer and half starts at a multiple of
/// [`LDM_BUFFER_ALIGN`]). It does when:
/// - the last subscript moves by one along the lanes loop and by no other loop whose tiles have
///   several points: the box's last dimension then spans the lanes loop's tile, and a block's
///   vectors start at the tile's first point and every `lanes` points after it;
/// - every tile's extent along the lanes loop is a multiple of the lanes (so is each
///   dimension's distance between elements but the last's, a product of extents that includes
///   the last's, and no tail vector runs);
/// - or, when the lanes run through the `coalesced` loop as well, every tile's extent along
///   both loops together is (the box's rows of such a tile follow one another, and each
///   joined row then starts at a multiple of the lanes), and the subscript before the last
///   moves by no other loop whose tiles have several points (a window's rows, which would
///   start its vectors a row of the box further, at any multiple of the row's length).
fn aligned(
    k: &Kernel,
    s: &Schedule,
    i: usize,
    sub: &[Vec<(usize, i64)>],
    lanes_loop: usize,
    coalesced: Option<usize>,
    lanes: usize,
) -> bool {
    let vector_bytes = lanes * DType::F32.size_bytes();
    let buffer = &s.buffers[i];
    let moves_only_by = |d: &[(usize, i64)], along: usize| {
        d.contains(&(along, 1)) && d.iter().all(|&(l, _)| l == along || s.tiles[l] == 1)
    };
    let last_moves_by_lanes = sub.last().is_some_and(|d| moves_only_by(d, lanes_loop));
    let rows_move_by_coalesced = coalesced.is_none_or(|c| sub.len() >= 2 && moves_only_by(&sub[sub.len() - 2], c));
    // Tiles along the coalesced loop, where known (else rows of whole vectors suffice).
    let rows = coalesced
        .and_then(|l| extent_values(k, s, l))
        .unwrap_or_else(|| vec![1]);
    let whole_tiles = extent_values(k, s, lanes_loop)
        .is_some_and(|ns| !ns.is_empty() && ns.iter().all(|&n| rows.iter().all(|&r| (n * r) % lanes == 0)));
    // A buffer starts aligned; so does a double buffer's second half.
    let halves_aligned = !buffer.double || (buffer.capacity() * buffer.elem_bytes) % vector_bytes == 0;
    LDM_BUFFER_ALIGN % vector_bytes == 0
        && halves_aligned
        && last_moves_by_lanes
        && rows_move_by_coalesced
        && whole_tiles
}

/// The values a tile's extent along loop `l` takes in kernel `k`'s compute nest under
/// schedule `s`, over every tile of every CPE, in increasing order, or `None` where a chunked
/// partition's segment bounds the loop (segments have any length up to the chunk). Code for
/// the other extents, a tile's tails among them, never runs and is not written.
pub fn extent_values(k: &Kernel, s: &Schedule, l: usize) -> Option<Vec<usize>> {
    let extents = k.extents();
    // The lengths the loop's tiles cover: a grid's blocks, a chunked partition's one point
    // (its innermost loop, a segment), or the whole loop.
    let spans: Vec<usize> = match s.partition.iter().position(|&p| p == l) {
        Some(j) if !s.grid.is_empty() => super::partition::part_lengths(s.grid[j], extents[l])
            .into_iter()
            .filter(|&n| n > 0)
            .collect(),
        Some(j) if j + 1 == s.partition.len() => return None,
        Some(_) => vec![1],
        None => vec![extents[l]],
    };
    let mut values: Vec<usize> = match s.order.contains(&l) {
        false => spans,
        true => {
            let t = s.tiles[l];
            let tails = spans.iter().map(|&n| n % t).filter(|&r| r > 0);
            let full = spans.iter().any(|&n| n >= t).then_some(t);
            full.into_iter().chain(tails).collect()
        }
    };
    values.sort_unstable();
    values.dedup();
    Some(values)
}
