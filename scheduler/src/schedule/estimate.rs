//! A schedule's modelled time, estimated from its loops and transfers before any code
//! exists, so the scheduler can compare partitions and tiles.
//!
//! The estimate follows the emulator's timing model (`emulator/src/timing.rs`, with the
//! target's `[timing]` parameters) where the schedule alone shows the work:
//! - every transfer occupies the core group's one DMA queue for the per-block cost of each
//!   contiguous block of its box, plus the memory lines those blocks touch over the
//!   bandwidth: on average over the places the blocks may start, which the subscripts, the
//!   partition and the tiles confine to multiples of some granularity ([`block_granularity`];
//!   every tensor starts on a line), so that a block of `b` bytes at a granularity of `e`
//!   bytes touches `1 + (b - e) / line` lines, and one whose places are all lines apart
//!   `b / line`;
//! - a CPE waits a get's latency for every visit of the single buffers filled at one depth
//!   (their gets are issued together, with the first get of the double buffers there; a
//!   double buffer's later gets are issued a tile ahead, and hide their latency behind one
//!   tile's work: a CPE whose tiles take less waits for the rest, and so does the line of a
//!   shared one that is not posted, for its owner's gets),
//!   and, as the CPEs walk their tiles in step, for the queue to serve every CPE's gets into
//!   single buffers, every CPE's first gets into double buffers (no CPE computes before its
//!   first tile has come, and the queue serves the CPEs in turn), and every CPE's puts from
//!   a single-buffered target (waited for at once): the queue time of those transfers adds
//!   to the CPEs' own time instead of overlapping it;
//! - an access served directly costs a `gload` or `gstore` at every point of the nest, a
//!   read one at each of its loads in the statement;
//! - a buffer shared along a mesh line ([`super::share`]) is fetched by the line's owner only
//!   (its queue time and stalls counted once per line; across the mesh, by CPE 0 only), and
//!   every CPE of the line waits for each tile's broadcast (`Timing::broadcast_cycles`; two
//!   in turn across the mesh) and, with register communication, spends two P1 instructions
//!   per register moving it; a split one's slices are fetched, finished and broadcast by the
//!   line's CPEs in turn (the queue time the same), each CPE finishing its slice (across the
//!   mesh, the first row's CPEs fetch them and send them down the columns at once, the largest
//!   slice's broadcast, and every row then passes them along in turn; a spread one's, one per
//!   CPE of the mesh, go along every row in turn and then down every column, a row's in
//!   each turn);
//! - a sum of products runs in register blocks ([`super::blocking`]): each reduction step of
//!   a block takes the cycles its shape does, over the tiles' rows (a short last tile runs
//!   smaller blocks or single rows; where a grid cuts the rows loop into uneven parts, the
//!   busiest CPE's is the part whose rows take longest), and at every visit of a tile of the
//!   reduction loops each block loads and stores its accumulators and sets its indices;
//! - another floating-point reduction in vectors waits at each reduction point for the
//!   latency of its fold, once per block of vectors along the row of lane-wise vectors
//!   ([`super::lanewise::run`]; the lanes left fold one at a time, or as one more vector
//!   when the nest holds the whole reduction, in the row's only block when they fit one); in
//!   the scalar nest, at every point when the innermost loop reduces;
//! - other compute is one instruction per point of the nest, vectorised along that row when
//!   the target has vectors;
//! - the statement's slow operators (library calls, divisions, square roots:
//!   [`super::slow`]) cost their cycles at every point they run, which vectors do not
//!   shorten;
//! - a guarded read whose boxes the tensor's border cuts along their rows (a window's
//!   padding) spends the CPE's time moving their rows apart and padding them after each get;
//! - the CPEs finish their last tiles together, and then the queue serves every CPE's last
//!   puts, which no compute overlaps.
//!
//! The kernel takes about the longer of the DMA queue's total occupancy and the busiest
//! CPE's own time with the stalls on single-buffered gets and the last puts: their norm
//! ([`Estimate::cycles`]), somewhat longer where the two are close.

use swflow_emulator::charges::{
    DMA_MOVE_HEAD_OPS, DMA_MOVE_OPS, DMA_MOVE_SHORT_OPS, DMA_MOVE_VECTOR_OPS, DMA_PAD_FILL_OPS, DMA_SPREAD_ROW_OPS,
};
use swflow_emulator::timing::Ops;
use swflow_frontend::ir::{ReduceKind, TensorType};

use crate::loops::{Access, Index, Kernel, LoopKind, Program};
use crate::target::Target;

use super::blocking::blocking;
use super::lanewise::{self, LANEWISE_VECTORS};
use super::reorder::access_traffic;
use super::share::{
    segment_lengths, slice, slice_count, split_dim, split_unit, spread, MeshLine, MESH_SIDE, REGISTER_BYTES,
};
use super::sizing::{box_dims, is_direct};
use super::slow;
use super::{Residence, Schedule};

/// Estimated cycles of a schedule.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    /// Cycles the core group's DMA queue is busy with the kernel's transfers.
    pub queue: f64,
    /// Cycles of the busiest CPE: compute, get latencies and direct accesses.
    pub cpe: f64,
    /// Cycles the queue spends on gets into single buffers, on the first gets into double
    /// buffers, on puts from a single-buffered target and on the CPEs' last puts, which every
    /// CPE waits for.
    pub stalled: f64,
    /// Cycles until the queue can have served every CPE's puts: no put is issued before its
    /// CPE has computed its first tile of the target (the busiest CPE's cycles over its
    /// target's tiles), and then the queue takes every put of the core group.
    pub drain: f64,
}

/// The norm [`Estimate::cycles`] combines the queue's time and the CPEs' with.
const OVERLAP_NORM: f64 = 8.0;

impl Estimate {
    /// The kernel's cycles, without its launch ([`launch_cycles`]). The stalls are queue time
    /// the CPEs wait through, so the kernel takes at least the queue's occupancy and at least
    /// the busiest CPE's time with its stalls. The rest of the queue's time (its *free* time)
    /// overlaps the CPEs' work, but not perfectly: the CPEs walk their tiles in step and the
    /// queue serves their transfers in the order issued, so transfers come in bursts (a get
    /// issued a tile ahead waits behind every CPE's puts of the tile before), and the two
    /// overlap least where they are about equal. The imperfect overlap adds what their
    /// [`OVERLAP_NORM`]-norm adds to the larger of the two: nothing where one dominates, and
    /// 2^(1/8) - 1 (9 %) where they are equal. A kernel whose every transfer is waited for
    /// (one tile per CPE) has no free queue time, and takes its CPEs' time with the stalls.
    /// Nor does it end before the queue has [`Estimate::drain`]ed its puts, which start only
    /// once the CPEs have computed their first tiles: where the puts take most of the queue
    /// and the target few tiles, the queue idles through the first.
    /// The norm is fitted to the timed emulator's times of the nine light models'
    /// schedules; the estimate only predicts that judge, and no parameter of the target
    /// changes with it.
    pub fn cycles(&self) -> f64 {
        let (free, cpe) = ((self.queue - self.stalled).max(0.0), self.cpe + self.stalled);
        let larger = free.max(cpe);
        if larger <= 0.0 {
            return 0.0;
        }
        let norm = (free / larger).powf(OVERLAP_NORM) + (cpe / larger).powf(OVERLAP_NORM);
        (self.queue.max(cpe) + larger * (norm.powf(1.0 / OVERLAP_NORM) - 1.0)).max(self.drain)
    }
}

/// What a kernel costs beyond its [`Estimate`], whatever its schedule: its launch, and the
/// latency of its last put, which the kernel waits for before it returns.
pub fn launch_cycles(target: &Target) -> f64 {
    let t = &target.timing;
    t.spawn_cycles + t.join_cycles + t.dma.put_latency_cycles
}

/// Contiguous blocks of a box of `dims` (clipped to the tensor) in a tensor of `shape`, and
/// the elements of one block. A dimension the box `moves` along from tile to tile is taken
/// as cut even where the box is as wide as the tensor: shifted, it is clipped at one edge or
/// the other (a window's columns for one tap of its kernel), so its rows do not run on.
fn blocks(dims: &[usize], shape: &[usize], moves: &[bool]) -> (usize, usize) {
    let clipped: Vec<usize> = dims.iter().zip(shape).map(|(&d, &s)| d.min(s)).collect();
    let total: usize = clipped.iter().product();
    let mut block = 1;
    for i in (0..clipped.len()).rev() {
        block *= clipped[i];
        if clipped[i] != shape[i] || moves[i] {
            break;
        }
    }
    (total / block.max(1), block)
}

/// Lines a block of `bytes` touches on average when it starts at any multiple of `granularity`
/// bytes with the same chance, as far as the line is concerned.
fn lines_moved(bytes: usize, granularity: usize, line: usize) -> f64 {
    let step = gcd(granularity, line).max(1);
    let places = line / step;
    let lines: usize = (0..places).map(|i| (i * step + bytes).div_ceil(line)).sum();
    lines as f64 / places as f64
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The granularity, in elements, of the places in its tensor where the contiguous blocks of
/// access `a`'s boxes (of `dims`, [`blocks`]) start, over the tiles of every CPE's ranges
/// `ranges`: every block starts at a multiple of it (0: every block starts at the tensor's
/// start). A dimension before the block's first contributes its stride where the box spans
/// several of its indices, and its box's start otherwise; the block's first dimension, its
/// box's start; the dimensions inside the block are whole. A box starts along a dimension at
/// the subscript's offset plus each loop's coefficient times that loop's tile starts
/// ([`tile_starts`]). `None` for a guarded read (its boxes are clipped at the border) or a
/// gathered subscript: a block may start at any element.
#[allow(clippy::too_many_arguments)]
fn block_granularity(
    k: &Kernel,
    s: &super::Schedule,
    a: &Access,
    dims: &[usize],
    shape: &[usize],
    moves: &[bool],
    tiles: &[usize],
    ranges: &[usize],
) -> Option<usize> {
    let rank = shape.len();
    if a.pad.is_some() || dims.len() != rank || a.index.len() != rank {
        return None;
    }
    if rank == 0 {
        return Some(0);
    }
    // The block's first dimension, as [`blocks`] finds it.
    let mut first = 0;
    for d in (0..rank).rev() {
        if dims[d].min(shape[d]) != shape[d] || moves[d] {
            first = d;
            break;
        }
    }
    let mut g = 0;
    for d in 0..=first {
        let Index::Affine(x) = &a.index[d] else { return None };
        let stride: usize = shape[d + 1..].iter().product();
        let start = x.terms.iter().fold(x.offset.unsigned_abs() as usize, |acc, &(l, c)| {
            gcd(acc, c.unsigned_abs() as usize * tile_starts(k, s, l, tiles, ranges))
        });
        let whole = dims[d] >= shape[d] && !moves[d];
        let places = match (d < first && dims[d].min(shape[d]) > 1, whole) {
            (true, _) => 1,
            (false, true) => 0,
            (false, false) => start,
        };
        g = gcd(g, places * stride);
    }
    Some(g)
}

/// The granularity of the points where loop `l`'s tiles start, over every CPE's range of it
/// (`ranges[l]` points, in tiles of `tiles[l]`): a multiple of the tile within a range, from
/// the range's start, which the partition sets (0 where every tile starts at the loop's
/// origin).
fn tile_starts(k: &Kernel, s: &super::Schedule, l: usize, tiles: &[usize], ranges: &[usize]) -> usize {
    let extent = k.loops[l].extent;
    let within = if tiles[l] < ranges[l] { tiles[l] } else { 0 };
    let range = match s.partition.iter().position(|&p| p == l) {
        None => 0,
        // A grid's blocks ([`super::partition::block`]).
        Some(j) if !s.grid.is_empty() => {
            (0..s.grid[j]).fold(0, |g, part| gcd(g, super::partition::block(part, s.grid[j], extent).0))
        }
        // A chunk's segments start where the chunks of the fused index fall in the loop.
        Some(j) if j + 1 == s.partition.len() => gcd(s.chunk, extent),
        Some(_) => 1,
    };
    gcd(within, range)
}

/// The lengths of the parts of loop `l` where a grid of `s` cuts it into uneven parts
/// ([`super::partition::block`]); `None` for another loop or even parts.
fn grid_parts(k: &Kernel, s: &super::Schedule, l: usize) -> Option<Vec<usize>> {
    let j = s
        .partition
        .iter()
        .position(|&p| p == l)
        .filter(|_| !s.grid.is_empty())?;
    let (parts, extent) = (s.grid[j], k.loops[l].extent);
    (!super::partition::even(parts, extent)).then(|| super::partition::part_lengths(parts, extent))
}

/// Per dimension of access `a`'s tensor, whether its box moves along it from one tile to the
/// next within a segment of `ranges`: its subscript runs along a loop cut into several tiles.
fn moves(a: &Access, tiles: &[usize], ranges: &[usize]) -> Vec<bool> {
    a.index
        .iter()
        .map(|x| match x {
            Index::Affine(x) => x.terms.iter().any(|&(l, c)| c != 0 && tiles[l] < ranges[l]),
            _ => false,
        })
        .collect()
}

/// One segment's parts of the estimate.
#[derive(Clone, Copy, Default)]
struct Segment {
    /// Queue cycles of the transfers this CPE issues for itself, and of the gets into single
    /// buffers among them.
    queue: f64,
    stalled: f64,
    /// The same for shared buffers, issued by the line's owner only (per line, as
    /// [`LINES`] lists them), and the latency every CPE of the line waits for
    /// single-buffered ones.
    shared_queue: [f64; 3],
    shared_stall: [f64; 3],
    shared_wait: f64,
    /// Queue cycles of the first gets into double buffers, for this CPE and, per line, for
    /// the shared ones its line's owner fetches: the first tile waits for them.
    fill: f64,
    shared_fill: [f64; 3],
    /// The CPE's own cycles: compute, get latencies, direct accesses, broadcasts.
    own: f64,
    /// Cycles its lines carry posted broadcasts to it ([`super::Buffer::posted`]).
    carried: f64,
    /// Queue cycles of the puts of the segment's last tiles, which no compute of the CPE
    /// overlaps when the segment is its last.
    tail: f64,
    /// Queue cycles of all the segment's puts, and the visits of the tiles they put.
    puts: f64,
    put_visits: usize,
}

/// The lines a buffer may be shared along, in the order of [`Segment`]'s arrays.
const LINES: [MeshLine; 3] = [MeshLine::Row, MeshLine::Column, MeshLine::Mesh];

/// The target's innermost subscript, when it is one parallel loop with coefficient 1: the
/// loop vector code runs along.
fn lanes_loop(k: &Kernel) -> Option<usize> {
    match k.stmt.target.index.last()? {
        Index::Affine(x) if x.terms.len() == 1 && x.terms[0].1 == 1 => {
            let l = x.terms[0].0;
            (k.loops[l].kind == LoopKind::Parallel).then_some(l)
        }
        _ => None,
    }
}

/// Cycles per point of a lane-wise fold along a row of `t` points with `lanes` lanes a
/// vector (as code generation runs one without register blocking): blocks of up to
/// [`LANEWISE_VECTORS`] vectors, then halves of that, each block's step taking at least the
/// fold's `latency`. The points left after the whole vectors fold one at a time, unless the
/// fold runs `from_init` (its nest holds the whole reduction) in a row that holds a vector:
/// then they are one more vector ending at the row's end, in the row's only block when the
/// row's vectors fit one. A row shorter than a vector, but longer than half of one, is one
/// vector when the target's buffer has `room` for the lanes past it.
fn lanewise_fold(t: usize, lanes: usize, latency: f64, from_init: bool, room: bool) -> f64 {
    let left = t % lanes;
    let overlaps = from_init && left != 0 && (t > lanes || (room && 2 * t > lanes));
    if overlaps && t.div_ceil(lanes) <= LANEWISE_VECTORS {
        return (t.div_ceil(lanes) as f64).max(latency) / t as f64;
    }
    let mut whole = t / lanes;
    let mut block = whole.clamp(1, LANEWISE_VECTORS);
    block = 1 << block.ilog2();
    let mut cycles = 0.0;
    while whole > 0 {
        if whole >= block {
            cycles += (block as f64).max(latency);
            whole -= block;
        } else {
            block /= 2;
        }
    }
    let rest = match overlaps {
        true => latency.max(1.0),
        false => left as f64 * latency,
    };
    (cycles + rest) / t as f64
}

/// Cycles of finishing a box of `dims` of guarded read `a` (of a tensor of `shape`) after
/// its get, as runtime-c's `swflow_pad_box` and `swflow_move_up` charge it
/// ([`swflow_emulator::charges`]), on average over `across` tiles along the loops of its last
/// subscript. The tensor's border cuts the rows of the boxes of the first and the last of
/// those tiles (of every box when there is one): such a box comes packed, its rows are moved
/// apart, and each row's ends are set to the padding. Boxes cut only at the tensor's other
/// borders (every box when the last subscript, over the loops' `extents`, stays inside the
/// tensor) finish those rows alone, which is not counted.
fn finishing_cycles(
    a: &Access,
    dims: &[usize],
    shape: &[usize],
    extents: &[usize],
    across: usize,
    target: &Target,
) -> f64 {
    let (Some(&width), Some(&inside)) = (dims.last(), shape.last()) else {
        return 0.0;
    };
    if a.pad.is_none() || dims.len() < 2 || width < 2 {
        return 0.0;
    }
    if let Some(Index::Affine(last)) = a.index.last() {
        let (lo, hi) = last.range(extents);
        if lo >= 0 && hi < inside as i64 {
            return 0.0;
        }
    }
    let cut = (2.0 / across.max(1) as f64).min(1.0);
    // A cut row keeps what lies inside the tensor: all of it but one side's padding at least.
    let inside = inside.min(width - 1);
    let rows = dims[..dims.len() - 1].iter().product::<usize>() as f64;
    let cycles = |ops: &Ops| target.timing.cycles(ops);
    let lanes = target.f32_vector_lanes.max(1);
    // Per row moved: its control, and its vectors (the first apart when the row is not whole
    // vectors; a row shorter than a vector as one, as where the padding around it takes the
    // vector's other lanes), or its elements one at a time without vectors.
    let elements = match lanes {
        1 => inside as f64 * cycles(&DMA_MOVE_OPS),
        _ if inside < lanes => cycles(&DMA_MOVE_SHORT_OPS),
        _ => {
            let head = if inside % lanes == 0 {
                0.0
            } else {
                cycles(&DMA_MOVE_HEAD_OPS)
            };
            (inside / lanes) as f64 * cycles(&DMA_MOVE_VECTOR_OPS) + head
        }
    };
    let moved = cycles(&DMA_SPREAD_ROW_OPS) + elements;
    // Per row, once it has moved: its two ends set to the padding, an element at a time.
    let padded = (width - inside) as f64 * cycles(&DMA_PAD_FILL_OPS);
    cut * rows * (moved + padded)
}

/// Whether finishing a box of guarded read `i` under `s` after its get takes the CPE longer
/// than the get occupies the DMA queue (runtime-c's charges, the target's DMA costs), for the
/// schedule's tiles.
pub fn finishing_outweighs_get(k: &Kernel, p: &Program, s: &Schedule, i: usize, target: &Target) -> bool {
    let all = super::accesses(k);
    let a = &all[i];
    let ty = &p.tensor(k.operands[a.operand]).ty;
    let Some(dims) = box_dims(k, p, i, a, &s.tiles) else {
        return false;
    };
    let extents: Vec<usize> = k.loops.iter().map(|l| l.extent).collect();
    let across = tiles_across(a, &s.ranges, &s.tiles);
    let moves = moves(a, &s.tiles, &s.ranges);
    let granularity = block_granularity(k, s, a, &dims, &ty.shape, &moves, &s.tiles, &s.ranges);
    finishing_cycles(a, &dims, &ty.shape, &extents, across, target)
        > box_transfer(&dims, ty, &moves, granularity, target).0
}

/// Tiles along the loops of access `a`'s last subscript over `ranges` (one for a gathered
/// subscript).
fn tiles_across(a: &Access, ranges: &[usize], tiles: &[usize]) -> usize {
    match a.index.last() {
        Some(Index::Affine(last)) => last.terms.iter().map(|&(l, _)| ranges[l].div_ceil(tiles[l])).product(),
        _ => 1,
    }
}

/// Queue cycles of one get and of one put of a box of `dims` of a tensor of type `ty` that
/// `moves` along some dimensions ([`blocks`]), whose blocks start at multiples of
/// `granularity` elements ([`block_granularity`]; `None`: of one element): per contiguous
/// block, its cost and its DMA lines at the bandwidth; and the box's bytes.
fn box_transfer(
    dims: &[usize],
    ty: &TensorType,
    moves: &[bool],
    granularity: Option<usize>,
    target: &Target,
) -> (f64, f64, usize) {
    let d = &target.timing.dma;
    let (n, block) = blocks(dims, &ty.shape, moves);
    let e = ty.dtype.size_bytes();
    // Every tensor starts on a line (the arena's alignment is at least a line on the
    // built-in targets; a smaller one confines the blocks' places no further than it).
    let start = match granularity {
        Some(0) => target.memory_alignment_bytes,
        Some(g) => gcd(g * e, target.memory_alignment_bytes),
        None => gcd(e, target.memory_alignment_bytes),
    };
    let line = d.line_bytes as usize;
    let moved = lines_moved(block * e, start, line) * line as f64;
    (
        n as f64 * (d.get_block_cycles + moved / d.get_bytes_per_cycle),
        n as f64 * (d.put_block_cycles + moved / d.put_bytes_per_cycle),
        n * block * ty.dtype.size_bytes(),
    )
}

/// The estimate of kernel `k` under schedule `s` (its buffers planned).
pub fn estimate(k: &Kernel, p: &Program, s: &Schedule, target: &Target) -> Estimate {
    let (tiles, order) = (&s.tiles[..], &s.order[..]);
    let t = &target.timing;
    let d = &t.dma;
    let all = super::accesses(k);
    let extents: Vec<usize> = k.loops.iter().map(|l| l.extent).collect();
    // The loops lane-wise vectors of the statement run along, as one row.
    let lanes = lanes_loop(k)
        .filter(|_| target.f32_vector_lanes > 1)
        .map(|l| lanewise::run(k, s, l, &lanewise::reads(k, &k.stmt.value)));
    // A floating-point fold waits at every reduction point for its accumulator's last update:
    // in vectors, per block of vectors (a maximum or minimum takes three dependent
    // instructions); in the scalar nest, per point when the innermost loop reduces.
    let float_fold = k.stmt.reduce.filter(|_| p.tensor(k.operands[0]).ty.dtype.is_float());
    let fold_latency = float_fold.map_or(0.0, |r| match r.kind {
        ReduceKind::Max | ReduceKind::Min => 3.0 * t.fp_latency_cycles,
        _ => t.fp_latency_cycles,
    });
    // Its vectors start from the fold's initial value when no reduction loop is cut into
    // tiles.
    let from_init = (0..k.loops.len())
        .filter(|&l| k.loops[l].kind == LoopKind::Reduce)
        .all(|l| tiles[l] == k.loops[l].extent);
    let scalar_fold = match k.loops.last() {
        Some(l) if float_fold.is_some() && l.kind == LoopKind::Reduce => t.fp_latency_cycles,
        _ => 0.0,
    };
    // A sum of products runs in register blocks, whose steps take the cycles of their shape.
    let buffered: Vec<bool> = s.buffers.iter().map(|b| b.residence == Residence::Buffer).collect();
    let blocked = blocking(
        p,
        k,
        s,
        target.f32_vector_lanes,
        t.fp_latency_cycles,
        &buffered,
        &vec![false; buffered.len()],
    );
    // Cycles of one visit of each access (queue occupancy of one get and of one put) and its
    // bytes, and the points per element of the nest a direct access costs.
    let transfer = |i: usize, tiles: &[usize], ranges: &[usize]| -> (f64, f64, usize) {
        let a = &all[i];
        let ty = &p.tensor(k.operands[a.operand]).ty;
        let dims = box_dims(k, p, i, a, tiles).unwrap_or_default();
        let moves = moves(a, tiles, ranges);
        let granularity = block_granularity(k, s, a, &dims, &ty.shape, &moves, tiles, ranges);
        box_transfer(&dims, ty, &moves, granularity, target)
    };
    // Cycles of finishing each box of a guarded read after its get, on average over a
    // segment's tiles.
    let finishing = |i: usize, tiles: &[usize], ranges: &[usize]| -> f64 {
        let a = &all[i];
        let shape = &p.tensor(k.operands[a.operand]).ty.shape;
        let dims = box_dims(k, p, i, a, tiles).unwrap_or_default();
        let across = tiles_across(a, ranges, tiles);
        finishing_cycles(a, &dims, shape, &extents, across, target)
    };
    // The slice units of split buffers (the segments' lengths only where some buffer is split).
    let units: Vec<Option<usize>> = match s.buffers.iter().any(|b| b.split) {
        true => {
            let lengths = segment_lengths(k, s, target.cpes);
            (0..all.len()).map(|i| split_unit(k, p, s, i, &lengths)).collect()
        }
        false => vec![None; all.len()],
    };
    // Per access, whether its buffer is spread across the mesh ([`share::spread`]).
    let spreads: Vec<bool> = (0..all.len()).map(|i| units[i].is_some() && spread(k, s, i)).collect();
    // Per slice of a split buffer's box ([`share::slice`], in the order of the CPEs that
    // fetch them), the box's extent along the dimension it is split along and the slice's
    // indices; none for other accesses.
    let slices = |i: usize, tiles: &[usize]| -> Vec<(usize, usize)> {
        let (Some(d), Some(unit)) = (split_dim(k, s, i), units[i]) else {
            return Vec::new();
        };
        let a = &all[i];
        let extent = box_dims(k, p, i, a, tiles).unwrap_or_default()[d];
        let parts = slice_count(spreads[i]);
        (0..parts)
            .map(|at| {
                let (lo, hi) = slice(extent, unit, at, parts);
                (extent, hi - lo)
            })
            .collect()
    };
    let direct: Vec<usize> = (0..all.len())
        .filter(|&i| {
            let a = &all[i];
            let ty = &p.tensor(k.operands[a.operand]).ty;
            is_direct(a, box_dims(k, p, i, a, tiles).as_deref(), &ty.shape)
        })
        .collect();
    // An access served directly is loaded from main memory at each of its loads in the
    // statement (a window's taps, a value used twice), as the code does.
    let loads: Vec<&Access> = k
        .stmt
        .value
        .accesses()
        .into_iter()
        .chain(k.stmt.epilogue.iter().flat_map(|e| e.accesses()))
        .collect();
    let direct_cycles: f64 = direct
        .iter()
        .map(|&i| {
            if super::is_written(k, i) {
                t.gstore_cycles
            } else {
                let taps = loads.iter().filter(|a| all[i].displacement(a).is_some()).count();
                taps.max(1) as f64 * t.gload_cycles
            }
        })
        .sum();
    let value_slow = slow::of(&k.stmt.value, k, p).cycles(target);
    let epilogue_slow = k
        .stmt
        .epilogue
        .as_ref()
        .map_or(0.0, |e| slow::of(e, k, p).cycles(target));
    // A prologue runs once over each box of its main access, on every CPE that holds it.
    let prologue = super::prologue::prologue(k)
        .and_then(|pr| Some((pr.main_window(&all)?, super::prologue::element_cycles(&pr, k, target))));
    let mut memo: Vec<(Vec<usize>, Segment)> = Vec::new();
    let (mut queue, mut stalled) = (0.0, 0.0);
    let mut busiest: f64 = 0.0;
    // Every CPE's puts, and the busiest CPE's cycles before its first.
    let (mut puts, mut lead): (f64, f64) = (0.0, 0.0);
    for cpe in 0..target.cpes {
        let mut own = 0.0;
        let mut tail = 0.0;
        let mut put_visits = 0;
        let mut first = true;
        for seg in s.segments(cpe, &extents) {
            let known = memo.iter().position(|m| m.0 == seg.len);
            let at = known.unwrap_or_else(|| {
                let ranges = &seg.len;
                let seg_tiles: Vec<usize> = tiles.iter().zip(ranges).map(|(&t, &r)| t.min(r)).collect();
                // The last tile along each loop, which may be an edge tile.
                let last_tiles: Vec<usize> = ranges
                    .iter()
                    .zip(&seg_tiles)
                    .map(|(&r, &t)| r - (r.div_ceil(t) - 1) * t)
                    .collect();
                let mut e = Segment::default();
                let mut waited = 0;
                // The most visits of a double buffer read here: each get after the first is
                // issued a tile ahead.
                let mut prefetched = 0;
                // Per depth, the visits of its single buffers (read boxes), whose gets are
                // issued together and waited for once.
                let mut single_visits = vec![0; order.len() + 1];
                for a in access_traffic(k, p, &seg_tiles, ranges, order) {
                    let (get, put, box_bytes) = transfer(a.access, &seg_tiles, ranges);
                    let slices = slices(a.access, &seg_tiles);
                    // A split buffer's CPEs each finish their slice; the largest takes longest.
                    let finished = match slices.iter().map(|s| s.1).max() {
                        Some(most) => most as f64 / slices.iter().map(|s| s.1).sum::<usize>().max(1) as f64,
                        None => 1.0,
                    };
                    e.own += a.gets as f64 * finishing(a.access, &seg_tiles, ranges) * finished;
                    // The prologue runs on what each CPE fetches, before the line shares it.
                    if let Some((_, per_element)) = prologue.filter(|pr| pr.0 == a.access) {
                        let dims = box_dims(k, p, a.access, &all[a.access], &seg_tiles).unwrap_or_default();
                        let elements = dims.iter().product::<usize>() as f64;
                        e.own += a.gets as f64 * elements * per_element * finished;
                    }
                    if a.puts > 0 {
                        e.tail += transfer(a.access, &last_tiles, ranges).1;
                        e.puts += a.puts as f64 * put;
                        e.put_visits = e.put_visits.max(a.puts);
                    }
                    let b = s.buffers.get(a.access);
                    let (q, w) = (a.gets as f64 * get + a.puts as f64 * put, a.gets as f64 * get);
                    let double = b.is_some_and(|b| b.double);
                    let mut single = |gets: usize| {
                        let at = &mut single_visits[b.map_or(0, |b| b.depth)];
                        *at = (*at).max(gets);
                    };
                    match b.and_then(|b| b.shared) {
                        Some(line) => {
                            // The line's owner fetches; every CPE of the line then waits for
                            // the broadcast and, by register communication, moves each tile's
                            // registers (a load or a get, and a put or a store, on P1), at
                            // each stage of the broadcast.
                            let slot = LINES.iter().position(|&l| l == line).expect("a line");
                            e.shared_queue[slot] += q;
                            // A single buffer's gets are waited for; a double buffer's
                            // first get too, behind every line's first gets.
                            if double {
                                e.shared_fill[slot] += a.gets.min(1) as f64 * get;
                                e.shared_wait += a.gets.min(1) as f64 * d.get_latency_cycles;
                                // The owner gets each later box a tile ahead, as a CPE does
                                // its own (a posted box, two tiles ahead: below).
                                if !b.is_some_and(|b| b.posted) {
                                    prefetched = prefetched.max(a.gets);
                                }
                            } else {
                                e.shared_stall[slot] += w;
                                single(a.gets);
                            }
                            // A split buffer's slices go in turn, each in whole registers.
                            let broadcasts: Vec<usize> = match slices.is_empty() {
                                true => vec![box_bytes],
                                false => slices
                                    .iter()
                                    .filter(|s| s.1 > 0)
                                    .map(|s| box_bytes * s.1 / s.0)
                                    .collect(),
                            };
                            let cycles = |bytes: usize| {
                                let bytes = bytes.next_multiple_of(REGISTER_BYTES);
                                let moved = match t.regcomm_latency_cycles {
                                    Some(_) => 2.0 * (bytes / REGISTER_BYTES) as f64,
                                    None => 0.0,
                                };
                                moved + t.broadcast_cycles(bytes as u64)
                            };
                            if b.is_some_and(|b| b.posted) {
                                // Posted a tile ahead: each refill syncs the line, waits for
                                // the first stage across the mesh (the whole box along the
                                // first row, or the largest slice down the columns), and the
                                // line carries every block meanwhile, while the CPEs compute.
                                let posted =
                                    |bytes: usize| t.posted_cycles(bytes.next_multiple_of(REGISTER_BYTES) as u64);
                                let carried: f64 = broadcasts.iter().map(|&b| posted(b).0).sum();
                                let arrival = broadcasts
                                    .iter()
                                    .map(|&b| posted(b).1 - posted(b).0)
                                    .fold(0.0, f64::max);
                                let first_stage = match line {
                                    MeshLine::Mesh => broadcasts.iter().map(|&b| posted(b).1).fold(0.0, f64::max),
                                    _ => 0.0,
                                };
                                e.own += a.gets as f64 * (t.barrier_cycles + first_stage);
                                e.carried += a.gets as f64 * (carried + arrival);
                                // The first tile waits for the second box's get as well, and
                                // for the whole broadcast of the first.
                                e.shared_fill[slot] += a.gets.min(1) as f64 * get;
                                e.own += a.gets.min(1) as f64 * (carried + arrival);
                                continue;
                            }
                            let each: Vec<f64> = broadcasts.iter().map(|&b| cycles(b)).collect();
                            let turns: f64 = each.iter().sum();
                            let stages = match (line, slices.is_empty()) {
                                // Spread across the mesh, the slices go along every row at
                                // once, in turns (each the longest of its row's), and then
                                // every row's slices down every column, in turns.
                                (MeshLine::Mesh, false) if spreads[a.access] => {
                                    let bytes = |at: usize| box_bytes * slices[at].1 / slices[at].0.max(1);
                                    let along: f64 = (0..MESH_SIDE)
                                        .map(|column| {
                                            (0..MESH_SIDE)
                                                .map(|row| bytes(row * MESH_SIDE + column))
                                                .filter(|&b| b > 0)
                                                .map(cycles)
                                                .fold(0.0, f64::max)
                                        })
                                        .sum();
                                    let down: f64 = (0..MESH_SIDE)
                                        .map(|row| (0..MESH_SIDE).map(|column| bytes(row * MESH_SIDE + column)).sum())
                                        .filter(|&b: &usize| b > 0)
                                        .map(cycles)
                                        .sum();
                                    along + down
                                }
                                // Across the mesh, a split box's slices first go down the
                                // columns at once, then along every row in turn.
                                (MeshLine::Mesh, false) => each.iter().copied().fold(0.0, f64::max) + turns,
                                _ => line.stages() as f64 * turns,
                            };
                            e.own += a.gets as f64 * stages;
                        }
                        None => {
                            e.queue += q;
                            if !double {
                                // A target read first gets and waits on its own. A
                                // single target's puts are waited for at once, each behind
                                // every CPE's (the last ones are the tail, below).
                                match a.access {
                                    0 => {
                                        waited += a.gets;
                                        e.stalled += a.puts.saturating_sub(1) as f64 * put;
                                    }
                                    _ => single(a.gets),
                                }
                                e.stalled += w;
                            } else {
                                // A double buffer's first get is waited for too, issued
                                // with the single buffers' gets at its depth.
                                single(a.gets.min(1));
                                e.fill += a.gets.min(1) as f64 * get;
                                prefetched = prefetched.max(a.gets);
                            }
                        }
                    }
                }
                waited += single_visits.iter().sum::<usize>();
                let points: f64 = ranges.iter().map(|&r| r as f64).product();
                let per_point = match &blocked {
                    Some(b) => {
                        // Over the segment's tiles along the rows loop, the last one short;
                        // where a grid cuts that loop into uneven parts, over the part whose
                        // rows take longest (a shorter part's last tile may run smaller
                        // blocks).
                        let per_vector = b.rows_loop.map_or(b.cycles_per_vector(1), |l| {
                            let tile = seg_tiles[l];
                            let rows = |range: usize| {
                                let (full, rest) = (range / tile, range % tile);
                                let mut rows = full as f64 * tile as f64 * b.cycles_per_vector(tile);
                                if rest > 0 {
                                    rows += rest as f64 * b.cycles_per_vector(rest);
                                }
                                rows
                            };
                            let slowest = grid_parts(k, s, l)
                                .unwrap_or_else(|| vec![ranges[l]])
                                .into_iter()
                                .map(rows)
                                .fold(0.0, f64::max);
                            slowest / ranges[l] as f64
                        });
                        let row = seg_tiles[b.lanes_loop] * b.coalesced.map_or(1, |l| seg_tiles[l]);
                        per_vector * row.div_ceil(b.lanes) as f64 / row as f64
                    }
                    None => match &lanes {
                        Some(run) => {
                            let t = run.iter().map(|&l| seg_tiles[l]).product::<usize>();
                            match fold_latency > 0.0 {
                                true => lanewise_fold(
                                    t,
                                    target.f32_vector_lanes,
                                    fold_latency,
                                    from_init,
                                    s.buffers[0].room + 1 >= target.f32_vector_lanes,
                                ),
                                false => t.div_ceil(target.f32_vector_lanes) as f64 / t as f64,
                            }
                        }
                        None => scalar_fold.max(1.0),
                    },
                };
                let reduce_points: f64 = (0..k.loops.len())
                    .filter(|&l| k.loops[l].kind == LoopKind::Reduce)
                    .map(|l| ranges[l] as f64)
                    .product();
                // The epilogue runs once per point of the parallel loops.
                let slow = value_slow + epilogue_slow / reduce_points.max(1.0);
                // A full block starts and ends its reduction walk at every visit of a tile of
                // the reduction loops: per tile, its rows' blocks along each row's vectors at
                // every point of the other parallel loops.
                let entries = blocked.as_ref().map_or(0.0, |b| {
                    let tiles: f64 = ranges
                        .iter()
                        .zip(&seg_tiles)
                        .map(|(&r, &t)| r.div_ceil(t) as f64)
                        .product();
                    let row = seg_tiles[b.lanes_loop] * b.coalesced.map_or(1, |l| seg_tiles[l]);
                    let rows = b.rows_loop.map_or(1, |l| seg_tiles[l].div_ceil(b.rows));
                    let outer: usize = b.outer.iter().map(|&l| seg_tiles[l]).product();
                    let blocks = outer * rows * row.div_ceil(b.lanes).div_ceil(b.vectors);
                    tiles * blocks as f64 * b.entry_cycles()
                });
                e.own += points * (per_point + slow + direct_cycles) + entries + waited as f64 * d.get_latency_cycles;
                // A get issued a tile ahead hides its latency behind one tile's work only: a
                // CPE whose tiles take less waits for the rest.
                if prefetched > 1 {
                    let exposed = (d.get_latency_cycles - e.own / prefetched as f64).max(0.0);
                    e.own += (prefetched - 1) as f64 * exposed;
                }
                // Posted broadcasts overlap the compute, but a line carries one block at a
                // time: the CPEs wait for what it has not carried by the end of their work.
                e.own = e.own.max(e.carried);
                memo.push((seg.len.clone(), e));
                memo.len() - 1
            });
            let e = &memo[at].1;
            queue += e.queue;
            stalled += e.stalled;
            if first {
                stalled += e.fill;
            }
            own += e.own;
            puts += e.puts;
            put_visits += e.put_visits;
            for (slot, _) in LINES.iter().enumerate().filter(|(_, l)| l.is_owner(cpe)) {
                // The owner's share: its gets for the line. Every CPE of the line waits for
                // them, so the latency of single-buffered ones counts for all.
                queue += e.shared_queue[slot];
                stalled += e.shared_stall[slot];
                if first {
                    stalled += e.shared_fill[slot];
                }
            }
            first = false;
            own += e.shared_wait;
            tail = e.tail;
        }
        // The CPEs finish their compute together, and then the queue serves every CPE's
        // last puts.
        stalled += tail;
        busiest = busiest.max(own);
        if put_visits > 0 {
            lead = lead.max(own / put_visits as f64);
        }
    }
    Estimate {
        queue,
        cpe: busiest,
        stalled,
        drain: lead + puts,
    }
}

#[cfg(test)]
mod tests {
    use super::{blocks, lines_moved, Estimate};

    #[test]
    fn stalls_do_not_overlap_the_cpes() {
        let cycles = |queue, cpe, stalled| {
            Estimate {
                queue,
                cpe,
                stalled,
                drain: 0.0,
            }
            .cycles()
        };
        // Every transfer waited for: the CPEs' time and the stalls, one after the other.
        assert_eq!(cycles(1000.0, 200.0, 1000.0), 1200.0);
        // Nothing waited for, the queue and the CPEs busy alike: they overlap imperfectly.
        let even = cycles(1000.0, 1000.0, 0.0);
        assert!((even - 1000.0 * 2f64.powf(1.0 / 8.0)).abs() < 1e-9, "{even}");
        // One far longer than the other: about the longer.
        assert!(cycles(1000.0, 100.0, 0.0) - 1000.0 < 1e-3);
        // Never less than the queue's occupancy.
        assert!(cycles(1000.0, 100.0, 300.0) >= 1000.0);
    }

    #[test]
    fn blocks_touch_the_lines_their_places_allow() {
        // 64 bytes at any float: the random alignment's 1 + 60/128 lines.
        assert!((lines_moved(64, 4, 128) - (1.0 + 60.0 / 128.0)).abs() < 1e-12);
        // Sixteen floats of rows of 1000 (4000 bytes, 32 past a line): a quarter cross one.
        assert_eq!(lines_moved(64, 32, 128), 1.25);
        // At multiples of their size, or on lines, blocks touch only their own lines.
        assert_eq!(lines_moved(64, 64, 128), 1.0);
        assert_eq!(lines_moved(256, 128, 128), 2.0);
        assert_eq!(lines_moved(256, 1024, 128), 2.0);
        assert_eq!(lines_moved(200, 0, 128), 2.0);
    }

    #[test]
    fn blocks_merge_whole_inner_dimensions() {
        let still = [false; 4];
        assert_eq!(blocks(&[4, 8], &[16, 8], &still), (1, 32));
        assert_eq!(blocks(&[4, 5], &[16, 8], &still), (4, 5));
        assert_eq!(blocks(&[1, 3, 8, 8], &[2, 3, 8, 8], &still), (1, 192));
        // A padded box is clipped to the tensor.
        assert_eq!(blocks(&[10, 10], &[8, 8], &still), (1, 64));
        // A box as wide as the tensor that moves along its rows is cut there.
        assert_eq!(blocks(&[10, 8], &[8, 8], &[false, true]), (8, 8));
    }
}
