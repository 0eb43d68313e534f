//! CPE partitioning: split parallel loops over the compute cores (the leading ones, or one of
//! the [`candidates`] the scheduler compares).
//!
//! A partition either fuses its loops into one index cut into equal contiguous chunks, one per
//! CPE (walked in [`segments`] that stay within one row of the innermost loop), or, with a
//! *grid*, cuts each of its loops into parts: CPE `c` takes the block whose part numbers are
//! `c`'s digits in the grid's mixed radix (the last loop's fastest), so that, for a matrix
//! product split by rows and columns, each CPE reads a share of both factors instead of one of
//! them whole. A loop's parts are as even as they go ([`block`]): 34 output channels of a
//! group in 16 parts are two of 3 and fourteen of 2 rather than eleven of 3, one of 1 and four
//! empty, so a grid of 4 groups by 16 parts keeps every CPE busy and puts each group on two
//! whole mesh rows, which can share its input ([`super::share`]).

use crate::loops::{Kernel, LoopKind};
use crate::target::Target;

/// The loops split over the CPEs and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Partition {
    /// Parallel loops, outermost first in the fused index, whose iterations reach the CPE
    /// count (or all of the kernel's, when they do not; or one loop of fewer iterations than
    /// CPEs, in a partition that leaves CPEs idle: see [`sparse`]).
    pub loops: Vec<usize>,
    /// Iterations of the fused loops.
    pub points: usize,
    /// Contiguous iterations per CPE: `ceil(points / cpes)`; with a grid, the points of one
    /// block (the product of [`block_sizes`]).
    pub chunk: usize,
    /// Parts of each partition loop, in the order of `loops`, for a block partition (at most
    /// as many blocks as CPEs, none empty); empty for chunks.
    pub grid: Vec<usize>,
}

/// The leading parallel loops, fused until their iterations reach the CPE count.
pub fn partition(k: &Kernel, target: &Target) -> Partition {
    let mut loops = Vec::new();
    let mut points = 1;
    for (l, lp) in k
        .loops
        .iter()
        .enumerate()
        .filter(|(_, lp)| lp.kind == LoopKind::Parallel)
    {
        if points >= target.cpes {
            break;
        }
        loops.push(l);
        points *= lp.extent;
    }
    Partition {
        loops,
        points,
        chunk: points.div_ceil(target.cpes),
        grid: Vec::new(),
    }
}

/// Partitions worth comparing, the leading one of [`partition`] first: every sequence of
/// up to three distinct parallel loops of more than one iteration whose points reach the CPE
/// count, none of them needed without the last one; then grids of two parallel loops in at
/// most as many blocks as CPEs (see [`grids`]). A kernel with fewer parallel points
/// than CPEs has only the leading one.
pub fn candidates(k: &Kernel, target: &Target) -> Vec<Partition> {
    let first = partition(k, target);
    let mut out = vec![first.clone()];
    if first.points < target.cpes {
        return out;
    }
    let parallel: Vec<usize> = (0..k.loops.len())
        .filter(|&l| k.loops[l].kind == LoopKind::Parallel && k.loops[l].extent > 1)
        .collect();
    let mut stack: Vec<Vec<usize>> = parallel.iter().map(|&l| vec![l]).collect();
    while let Some(loops) = stack.pop() {
        let points: usize = loops.iter().map(|&l| k.loops[l].extent).product();
        if points >= target.cpes {
            let p = Partition {
                loops,
                points,
                chunk: points.div_ceil(target.cpes),
                grid: Vec::new(),
            };
            if !out.contains(&p) {
                out.push(p);
            }
        } else if loops.len() < 3 {
            for &l in parallel.iter().filter(|l| !loops.contains(l)) {
                let mut next = loops.clone();
                next.push(l);
                stack.push(next);
            }
        }
    }
    out[1..].sort_by(|a, b| a.loops.cmp(&b.loops));
    out.extend(grids(k, &parallel, target.cpes));
    out
}

/// Partitions that leave CPEs idle: each parallel loop of more than one but fewer iterations
/// than CPEs, alone, one iteration per CPE. A grouped convolution split by its groups, or a
/// small matrix product by its rows, may run faster so than spread thinly over the whole
/// mesh, with every CPE refetching the factors its few points share. The estimate cannot
/// rank them (its overlap of the DMA queue and the CPEs' work is fitted to kernels that keep
/// every CPE busy, and it overrates a few CPEs' overlap), so the scheduler leaves them to
/// tuning, which measures them (`swflow_codegen::tune`).
pub fn sparse(k: &Kernel, target: &Target) -> Vec<Partition> {
    k.loops
        .iter()
        .enumerate()
        .filter(|(_, lp)| lp.kind == LoopKind::Parallel && lp.extent > 1 && lp.extent < target.cpes)
        .map(|(l, lp)| Partition {
            loops: vec![l],
            points: lp.extent,
            chunk: 1,
            grid: Vec::new(),
        })
        .collect()
}

/// Block partitions of two of the `parallel` loops (in the kernel's order): for every power
/// of two `a` up to the CPE count, the first loop in `a` parts and the second in the CPEs
/// left for each (at most one part per value), and the same with each loop in as few parts
/// as give blocks that long, when the blocks leave at most an eighth of the CPEs idle. One
/// loop may stay whole: such a grid splits the other as a chunked partition would, but lets
/// the CPEs of a mesh line share the tiles that do not depend on it ([`super::share`]). (The
/// estimate's compute stays near a lower bound, so it would undervalue the CPEs that a
/// sparser grid leaves idle.)
fn grids(k: &Kernel, parallel: &[usize], cpes: usize) -> Vec<Partition> {
    // The fewest parts of `extent` values whose blocks are as long as those of `parts` parts.
    let fewest = |parts: usize, extent: usize| extent.div_ceil(extent.div_ceil(parts.clamp(1, extent)));
    let mut out: Vec<Partition> = Vec::new();
    for (i, &x) in parallel.iter().enumerate() {
        for &y in &parallel[i + 1..] {
            let extents = [k.loops[x].extent, k.loops[y].extent];
            for a in (0..).map(|e| 1usize << e).take_while(|&a| a <= cpes) {
                let first = a.min(extents[0]);
                let fewer = fewest(a, extents[0]);
                let grids = [
                    vec![first, (cpes / first).min(extents[1])],
                    vec![fewer, fewest(cpes / fewer, extents[1])],
                ];
                for grid in grids {
                    if 8 * grid.iter().product::<usize>() < 7 * cpes {
                        continue;
                    }
                    let p = Partition {
                        loops: vec![x, y],
                        points: extents.iter().product(),
                        chunk: block_sizes(&grid, &extents).iter().product(),
                        grid,
                    };
                    if !out.contains(&p) {
                        out.push(p);
                    }
                }
            }
        }
    }
    out
}

/// Values of each loop of `extents` in the largest block of a `grid`: `ceil(extent / parts)`.
pub fn block_sizes(grid: &[usize], extents: &[usize]) -> Vec<usize> {
    grid.iter().zip(extents).map(|(&g, &e)| e.div_ceil(g)).collect()
}

/// The first value and the length of part `part` of a loop of `extent` values cut into
/// `parts` parts by a grid: from `floor(part * extent / parts)` to the next part's first, so
/// the parts are as even as they go (none empty when `parts <= extent`, none longer than
/// [`block_sizes`]'s), and all of that length where `parts` divides `extent`.
pub fn block(part: usize, parts: usize, extent: usize) -> (usize, usize) {
    let first = |p: usize| p * extent / parts.max(1);
    (first(part), first(part + 1) - first(part))
}

/// The lengths the parts of [`block`] take, shortest first: `extent / parts`, and one more
/// where `parts` does not divide `extent`.
pub fn part_lengths(parts: usize, extent: usize) -> Vec<usize> {
    let short = extent / parts.max(1);
    match even(parts, extent) {
        true => vec![short],
        false => vec![short, short + 1],
    }
}

/// Whether the parts of a loop of `extent` values cut into `parts` are all as long.
pub fn even(parts: usize, extent: usize) -> bool {
    parts >= 1 && extent % parts == 0
}

/// Whether every part of every loop holds a value: `1 <= parts <= extent`.
pub fn covers(grid: &[usize], extents: &[usize]) -> bool {
    grid.iter().zip(extents).all(|(&g, &e)| g >= 1 && g <= e)
}

impl Partition {
    /// How many consecutive values of loop `l` one CPE may walk (see [`range`]).
    pub fn range(&self, k: &Kernel, l: usize) -> usize {
        range(&self.loops, &self.grid, self.chunk, l, k.loops[l].extent)
    }
}

/// How many consecutive values of loop `l` (of `extent`) one CPE may walk: for a chunked
/// partition the chunk (bounded by the extent) for the innermost partition loop and 1 for the
/// other partition loops; for a grid the block's size along `l`; the extent for loops that
/// are not partitioned.
pub fn range(partition: &[usize], grid: &[usize], chunk: usize, l: usize, extent: usize) -> usize {
    match partition.iter().position(|&p| p == l) {
        // (A grid that does not match the partition is refused by `verify_schedule`; here it
        // only must not fail.)
        Some(i) if !grid.is_empty() => extent.div_ceil(grid.get(i).copied().unwrap_or(1).max(1)),
        Some(i) if i + 1 == partition.len() => chunk.min(extent),
        Some(_) => 1,
        None => extent,
    }
}

/// A box of partition points one CPE walks in one go: for a chunked partition a run of its
/// chunk that stays within one row of the innermost partition loop, for a grid its block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Every loop's first value (0 for the loops outside the partition).
    pub start: Vec<usize>,
    /// How many consecutive values of each loop it covers: of a partition loop, its share
    /// (1 for the outer loops of a chunked partition); of any other loop, its extent.
    pub len: Vec<usize>,
}

/// The segments of CPE `cpe`, in order: of its chunk of the `points` fused points of `loops`
/// or, with a `grid`, its block (none for a CPE past the grid's blocks). `extents` are the
/// kernel's loop extents.
pub fn segments(
    cpe: usize,
    chunk: usize,
    points: usize,
    loops: &[usize],
    grid: &[usize],
    extents: &[usize],
) -> Vec<Segment> {
    if !grid.is_empty() {
        let blocks: usize = grid.iter().product();
        if cpe >= blocks {
            return Vec::new();
        }
        let (mut start, mut len) = (vec![0; extents.len()], extents.to_vec());
        let mut rest = cpe;
        for (j, &l) in loops.iter().enumerate().rev() {
            let part = rest % grid[j];
            rest /= grid[j];
            (start[l], len[l]) = block(part, grid[j], extents[l]);
        }
        return vec![Segment { start, len }];
    }
    let mut out = Vec::new();
    let range = chunk_of(cpe, chunk, points);
    let mut f = range.start;
    while f < range.end {
        let mut start = vec![0; extents.len()];
        decompose(f, loops, extents, &mut start);
        let mut len = extents.to_vec();
        for &l in loops {
            len[l] = 1;
        }
        let inner = match loops.last() {
            Some(&l) => {
                len[l] = (range.end - f).min(extents[l] - start[l]);
                len[l]
            }
            None => 1,
        };
        out.push(Segment { start, len });
        f += inner;
    }
    out
}

/// The partition loops' values at fused index `f` (mixed radix, last loop fastest).
pub fn decompose(f: usize, loops: &[usize], extents: &[usize], out: &mut [usize]) {
    let mut rest = f;
    for &l in loops.iter().rev() {
        out[l] = rest % extents[l];
        rest /= extents[l];
    }
}

/// The fused partition indices CPE `cpe` runs.
pub fn chunk_of(cpe: usize, chunk: usize, points: usize) -> std::ops::Range<usize> {
    (cpe * chunk).min(points)..((cpe + 1) * chunk).min(points)
}
