//! A schedule's modelled time, estimated from its loops and transfers before any code
//! exists, so the scheduler can compare partitions and tiles.
//!
//! The estimate follows the emulator's timing model (`emulator/src/timing.rs`, with the
//! target's `[timing]` parameters) where the schedule alone shows the work:
//! - every transfer occupies the core group's one DMA queue for the per-block cost of each
//!   contiguous block of its box, plus the memory lines those blocks touch over the
//!   bandwidth (a block of `b` bytes of `e`-byte elements at a random element alignment
//!   touches `1 + (b - e) / line` lines on average);
//! - a CPE waits a get's latency for every get of a single buffer (a double buffer's get is
//!   issued a tile ahead, and its latency is taken as hidden), and, as the CPEs walk their
//!   tiles in step, for the queue to serve every CPE's gets into single buffers: the queue
//!   time of those gets adds to the CPEs' own time instead of overlapping it;
//! - an access served directly costs a `gload` or `gstore` at every point of the nest, a
//!   read one at each of its loads in the statement;
//! - a buffer shared along a mesh line ([`super::share`]) is fetched by the line's owner only
//!   (its queue time and stalls counted once per line), and every CPE of the line waits for
//!   each tile's broadcast (`Timing::broadcast_cycles`) and, with register communication,
//!   spends two P1 instructions per register moving it;
//! - compute is one instruction per point of the nest, vectorised along the target's
//!   innermost loop when the target has vectors, and the cycles of the statement's slow
//!   operators (library calls, divisions, square roots: [`super::slow`]) at every point they
//!   run, which vectors do not shorten: a lower bound that still sees how partitioning and
//!   tiling fill the lanes and balance the CPEs.
//!
//! The kernel takes the longer of the DMA queue's total occupancy and the busiest CPE's own
//! time with the stalls on single-buffered gets.

use crate::loops::{Access, Index, Kernel, LoopKind, Program};
use crate::target::Target;

use super::reorder::access_traffic;
use super::share::REGISTER_BYTES;
use super::sizing::{buffer_dims, is_direct};
use super::slow;
use super::Schedule;

/// Estimated cycles of a schedule.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    /// Cycles the core group's DMA queue is busy with the kernel's transfers.
    pub queue: f64,
    /// Cycles of the busiest CPE: compute, get latencies and direct accesses.
    pub cpe: f64,
    /// Cycles the queue spends on gets into single buffers, which every CPE waits for.
    pub stalled: f64,
}

impl Estimate {
    pub fn cycles(&self) -> f64 {
        self.queue.max(self.cpe + self.stalled)
    }
}

/// Contiguous blocks of a box of `dims` (clipped to the tensor) in a tensor of `shape`, and
/// the elements of one block.
fn blocks(dims: &[usize], shape: &[usize]) -> (usize, usize) {
    let clipped: Vec<usize> = dims.iter().zip(shape).map(|(&d, &s)| d.min(s)).collect();
    let total: usize = clipped.iter().product();
    let mut block = 1;
    for i in (0..clipped.len()).rev() {
        block *= clipped[i];
        if clipped[i] != shape[i] {
            break;
        }
    }
    (total / block.max(1), block)
}

/// One segment's parts of the estimate.
#[derive(Clone, Copy, Default)]
struct Segment {
    /// Queue cycles of the transfers this CPE issues for itself, and of the gets into single
    /// buffers among them.
    queue: f64,
    stalled: f64,
    /// The same for shared buffers, issued by the line's owner only, and the latency every
    /// CPE of the line waits for single-buffered ones.
    shared_queue: f64,
    shared_stall: f64,
    shared_wait: f64,
    /// The CPE's own cycles: compute, get latencies, direct accesses, broadcasts.
    own: f64,
}

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

/// The estimate of kernel `k` under schedule `s` (its buffers planned).
pub fn estimate(k: &Kernel, p: &Program, s: &Schedule, target: &Target) -> Estimate {
    let (tiles, order) = (&s.tiles[..], &s.order[..]);
    let t = &target.timing;
    let d = &t.dma;
    let line = d.line_bytes as f64;
    let all = super::accesses(k);
    let extents: Vec<usize> = k.loops.iter().map(|l| l.extent).collect();
    let lanes = lanes_loop(k).filter(|_| target.f32_vector_lanes > 1);
    // Cycles of one visit of each access (queue occupancy of one get and of one put) and its
    // bytes, and the points per element of the nest a direct access costs.
    let transfer = |i: usize, tiles: &[usize]| -> (f64, f64, usize) {
        let a = &all[i];
        let ty = &p.tensor(k.operands[a.operand]).ty;
        let dims = buffer_dims(a, tiles).unwrap_or_default();
        let (n, block) = blocks(&dims, &ty.shape);
        let e = ty.dtype.size_bytes() as f64;
        let lines = 1.0 + (block as f64 * e - e) / line;
        let moved = lines * line;
        (
            n as f64 * (d.get_block_cycles + moved / d.get_bytes_per_cycle),
            n as f64 * (d.put_block_cycles + moved / d.put_bytes_per_cycle),
            n * block * ty.dtype.size_bytes(),
        )
    };
    let direct: Vec<usize> = (0..all.len())
        .filter(|&i| {
            let a = &all[i];
            let ty = &p.tensor(k.operands[a.operand]).ty;
            is_direct(a, buffer_dims(a, tiles).as_deref(), &ty.shape)
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
    let mut memo: Vec<(Vec<usize>, Segment)> = Vec::new();
    let (mut queue, mut stalled) = (0.0, 0.0);
    let mut busiest: f64 = 0.0;
    for cpe in 0..target.cpes {
        let mut own = 0.0;
        let owner = s.buffers.iter().any(|b| b.shared.is_some_and(|l| l.is_owner(cpe)));
        for seg in s.segments(cpe, &extents) {
            let known = memo.iter().position(|m| m.0 == seg.len);
            let at = known.unwrap_or_else(|| {
                let ranges = &seg.len;
                let seg_tiles: Vec<usize> = tiles.iter().zip(ranges).map(|(&t, &r)| t.min(r)).collect();
                let mut e = Segment::default();
                let mut waited = 0;
                for a in access_traffic(k, p, &seg_tiles, ranges, order) {
                    let (get, put, box_bytes) = transfer(a.access, &seg_tiles);
                    let b = s.buffers.get(a.access);
                    let (q, w) = (a.gets as f64 * get + a.puts as f64 * put, a.gets as f64 * get);
                    let double = b.is_some_and(|b| b.double);
                    match b.and_then(|b| b.shared) {
                        Some(_) => {
                            // The line's owner fetches; every CPE of the line then waits for
                            // the broadcast and, by register communication, moves each tile's
                            // registers (a load or a get, and a put or a store, on P1).
                            e.shared_queue += q;
                            if !double {
                                e.shared_stall += w;
                                e.shared_wait += a.gets as f64 * d.get_latency_cycles;
                            }
                            let bytes = box_bytes.next_multiple_of(REGISTER_BYTES);
                            let moved = match t.regcomm_latency_cycles {
                                Some(_) => 2.0 * (bytes / REGISTER_BYTES) as f64,
                                None => 0.0,
                            };
                            e.own += a.gets as f64 * (moved + t.broadcast_cycles(bytes as u64));
                        }
                        None => {
                            e.queue += q;
                            if !double {
                                waited += a.gets;
                                e.stalled += w;
                            }
                        }
                    }
                }
                let points: f64 = ranges.iter().map(|&r| r as f64).product();
                let per_point = lanes.map_or(1.0, |l| {
                    let t = seg_tiles[l];
                    t.div_ceil(target.f32_vector_lanes) as f64 / t as f64
                });
                let reduce_points: f64 = (0..k.loops.len())
                    .filter(|&l| k.loops[l].kind == LoopKind::Reduce)
                    .map(|l| ranges[l] as f64)
                    .product();
                // The epilogue runs once per point of the parallel loops.
                let slow = value_slow + epilogue_slow / reduce_points.max(1.0);
                e.own += points * (per_point + slow + direct_cycles) + waited as f64 * d.get_latency_cycles;
                memo.push((seg.len.clone(), e));
                memo.len() - 1
            });
            let e = &memo[at].1;
            queue += e.queue;
            stalled += e.stalled;
            own += e.own;
            if owner {
                // The owner's share: its gets for the line. Every CPE of the line waits for
                // them, so the latency of single-buffered ones counts for all.
                queue += e.shared_queue;
                stalled += e.shared_stall;
            }
            own += e.shared_wait;
        }
        busiest = busiest.max(own);
    }
    Estimate {
        queue,
        cpe: busiest,
        stalled,
    }
}

#[cfg(test)]
mod tests {
    use super::blocks;

    #[test]
    fn blocks_merge_whole_inner_dimensions() {
        assert_eq!(blocks(&[4, 8], &[16, 8]), (1, 32));
        assert_eq!(blocks(&[4, 5], &[16, 8]), (4, 5));
        assert_eq!(blocks(&[1, 3, 8, 8], &[2, 3, 8, 8]), (1, 192));
        // A padded box is clipped to the tensor.
        assert_eq!(blocks(&[10, 10], &[8, 8]), (1, 64));
    }
}
