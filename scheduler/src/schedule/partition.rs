//! CPE partitioning: split the outermost parallel loops over the compute cores.

use crate::loops::{Kernel, LoopKind};
use crate::target::Target;

/// The loops split over the CPEs and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Partition {
    /// Leading parallel loops, fused until their iterations reach the CPE count (or all of
    /// them are used).
    pub loops: Vec<usize>,
    /// Iterations of the fused loops.
    pub points: usize,
    /// Contiguous iterations per CPE: `ceil(points / cpes)`.
    pub chunk: usize,
}

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
