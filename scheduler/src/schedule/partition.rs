//! CPE partitioning: split parallel loops over the compute cores (the leading ones, or one of
//! the [`candidates`] the scheduler compares).

use crate::loops::{Kernel, LoopKind};
use crate::target::Target;

/// The loops split over the CPEs and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Partition {
    /// Parallel loops, outermost first in the fused index, whose iterations reach the CPE
    /// count (or all of the kernel's, when they do not).
    pub loops: Vec<usize>,
    /// Iterations of the fused loops.
    pub points: usize,
    /// Contiguous iterations per CPE: `ceil(points / cpes)`.
    pub chunk: usize,
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
    }
}

/// Partitions worth comparing, the leading one of [`partition`] first: every sequence of
/// up to three distinct parallel loops of more than one iteration whose points reach the CPE
/// count, none of them needed without the last one. A kernel with fewer parallel points than
/// CPEs has only the leading one.
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
    out
}

impl Partition {
    /// How many consecutive values of loop `l` one CPE may walk (see [`range`]).
    pub fn range(&self, k: &Kernel, l: usize) -> usize {
        range(&self.loops, self.chunk, l, k.loops[l].extent)
    }
}

/// How many consecutive values of loop `l` (of `extent`) one CPE may walk: the chunk (bounded
/// by the extent) for the innermost partition loop, 1 for the other partition loops, the
/// extent for loops that are not partitioned.
pub fn range(partition: &[usize], chunk: usize, l: usize, extent: usize) -> usize {
    match partition.iter().position(|&p| p == l) {
        Some(i) if i + 1 == partition.len() => chunk.min(extent),
        Some(_) => 1,
        None => extent,
    }
}

/// A run of a CPE's chunk that stays within one row of the innermost partition loop: the
/// partition loops' values at its start, and how many consecutive values of the innermost
/// one it covers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    pub start: Vec<usize>,
    pub len: usize,
}

/// The segments of CPE `cpe`'s chunk, in order. `extents` are the kernel's loop extents;
/// `start` has one entry per loop (non-partition loops are 0).
pub fn segments(cpe: usize, chunk: usize, points: usize, loops: &[usize], extents: &[usize]) -> Vec<Segment> {
    let mut out = Vec::new();
    let range = chunk_of(cpe, chunk, points);
    let mut f = range.start;
    while f < range.end {
        let mut start = vec![0; extents.len()];
        decompose(f, loops, extents, &mut start);
        let len = match loops.last() {
            Some(&l) => (range.end - f).min(extents[l] - start[l]),
            None => 1,
        };
        out.push(Segment { start, len });
        f += len;
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
