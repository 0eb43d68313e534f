//! The mirror constraint: a backward kernel reading a tape-only tensor in its producer's
//! partition and tiling.
//!
//! The producer writes the tensor one loop per dimension, in boxes it visits once each. The
//! reader reads it one loop per dimension too; its loops on the tensor's dimensions take the
//! producer's partition (in the producer's order), tiles and tile order, and its other loops,
//! which must be reduction loops, nest inside with tiles that fit the rest of the LDM. Then
//! CPE `c` of the reader reads the boxes CPE `c` of the producer wrote, in the order it wrote
//! them, each once.

use crate::loops::{Access, Index, Loop, LoopKind, Program, TensorId};
use crate::schedule::dma::plan_buffers;
use crate::schedule::partition::range;
use crate::schedule::sizing::{halve, usage};
use crate::schedule::{accesses, is_written, ldm_overhead, verify_schedule, Residence, RoomRule, Schedule};
use crate::target::Target;

/// Why a reader cannot mirror the producer of a tape-only tensor.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MirrorError {
    #[error("the producer does not write it one loop per dimension, with an LDM buffer")]
    ProducerLayout,
    #[error("the producer revisits its boxes across reduction tiles")]
    ProducerRevisits,
    #[error("the reader does not read it once, one loop per dimension, with an LDM buffer")]
    ReaderLayout,
    #[error("the reader reduces over a dimension the producer partitions")]
    PartitionReduced,
    #[error("the reader's result has dimensions the tensor lacks, so it reads each box more than once")]
    ReaderRepeats,
    #[error("the producer's tiles leave the reader too little LDM: {0}")]
    DoesNotFit(String),
    #[error("the reader already mirrors the producer of a larger tensor")]
    ReaderTaken,
    #[error("another reader cannot mirror the producer, so the tensor stays whole")]
    OtherReader,
    #[error("kept whole: the step was measured faster with its readers in their own tiling")]
    KeptWhole,
}

/// Per dimension, the loop of a subscript that is exactly one loop with coefficient 1 and no
/// offset and that spans the whole dimension (`shape`), if every subscript is, no two share a
/// loop and the access is not guarded: the access covers the tensor, one loop per dimension.
fn unit_loops(a: &Access, loops: &[Loop], shape: &[usize]) -> Option<Vec<usize>> {
    if a.pad.is_some() || !a.spread.is_empty() || a.index.len() != shape.len() {
        return None;
    }
    let mut out = Vec::with_capacity(a.index.len());
    for (i, &dim) in a.index.iter().zip(shape) {
        match i {
            Index::Affine(x) if x.offset == 0 && x.terms.len() == 1 && x.terms[0].1 == 1 => {
                let l = x.terms[0].0;
                if out.contains(&l) || loops[l].extent != dim {
                    return None;
                }
                out.push(l);
            }
            _ => return None,
        }
    }
    Some(out)
}

/// The schedule of kernel `reader` that mirrors kernel `producer` (scheduled) over `tensor`,
/// which `producer` writes and `reader` reads.
pub fn mirror_schedule(
    p: &Program,
    producer: usize,
    tensor: TensorId,
    reader: usize,
    target: &Target,
) -> Result<Schedule, MirrorError> {
    let (f, b) = (&p.kernels[producer], &p.kernels[reader]);
    let fs = f.schedule.as_ref().ok_or(MirrorError::ProducerLayout)?;
    let written = accesses(f);
    let fi = (0..written.len())
        .find(|&i| is_written(f, i) && p.storage(f.operands[written[i].operand]) == tensor)
        .ok_or(MirrorError::ProducerLayout)?;
    let shape = &p.tensor(tensor).ty.shape;
    let f_loops = unit_loops(&written[fi], &f.loops, shape).ok_or(MirrorError::ProducerLayout)?;
    if fs.buffers[fi].residence != Residence::Buffer {
        return Err(MirrorError::ProducerLayout);
    }
    let depth = fs.buffers[fi].depth;
    if fs.order[..depth].iter().any(|&l| f.loops[l].kind == LoopKind::Reduce) {
        return Err(MirrorError::ProducerRevisits);
    }
    let read = accesses(b);
    let mut at = (0..read.len()).filter(|&i| !is_written(b, i) && p.storage(b.operands[read[i].operand]) == tensor);
    let (Some(bi), None) = (at.next(), at.next()) else {
        return Err(MirrorError::ReaderLayout);
    };
    let same_shape = p.tensor(b.operands[read[bi].operand]).ty.shape == *shape;
    let b_loops = unit_loops(&read[bi], &b.loops, shape)
        .filter(|_| same_shape)
        .ok_or(MirrorError::ReaderLayout)?;
    let map = |l: usize| f_loops.iter().position(|&x| x == l).map(|d| b_loops[d]);
    let partition: Vec<usize> = fs
        .partition
        .iter()
        .map(|&l| map(l))
        .collect::<Option<_>>()
        .ok_or(MirrorError::ProducerLayout)?;
    if partition.iter().any(|&l| b.loops[l].kind != LoopKind::Parallel) {
        return Err(MirrorError::PartitionReduced);
    }
    let extras: Vec<usize> = (0..b.loops.len()).filter(|l| !b_loops.contains(l)).collect();
    if extras.iter().any(|&l| b.loops[l].kind == LoopKind::Parallel) {
        return Err(MirrorError::ReaderRepeats);
    }
    let ranges: Vec<usize> = b
        .loops
        .iter()
        .enumerate()
        .map(|(l, lp)| range(&partition, &fs.grid, fs.chunk, l, lp.extent))
        .collect();
    let mut tiles = ranges.clone();
    for (d, &fl) in f_loops.iter().enumerate() {
        tiles[b_loops[d]] = fs.tiles[fl];
    }
    let budget = target.ldm_budget().saturating_sub(ldm_overhead(b, read.len(), target));
    let rule = RoomRule::new(b);
    while usage(b, p, &rule, &tiles) > budget {
        let Some(&l) = extras.iter().filter(|&&l| tiles[l] > 1).max_by_key(|&&l| (tiles[l], l)) else {
            return Err(MirrorError::DoesNotFit(format!(
                "{} LDM bytes with every other tile at 1, {budget} available",
                usage(b, p, &rule, &tiles)
            )));
        };
        tiles[l] = halve(tiles[l]);
    }
    let mut order: Vec<usize> = fs.order[..depth]
        .iter()
        .map(|&l| map(l).expect("parallel loops map"))
        .collect();
    order.extend(extras.iter().copied().filter(|&l| tiles[l] < ranges[l]));
    let mut s = Schedule {
        partition,
        partition_points: fs.partition_points,
        chunk: fs.chunk,
        grid: fs.grid.clone(),
        ranges,
        tiles,
        order,
        buffers: Vec::new(),
    };
    s.buffers = plan_buffers(b, p, &s, target);
    if s.buffers[bi].residence != Residence::Buffer || s.buffers[bi].depth != depth {
        return Err(MirrorError::ReaderLayout);
    }
    verify_schedule(b, p, &s, target).map_err(MirrorError::DoesNotFit)?;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::unit_loops;
    use crate::loops::{Access, Affine, Index, Loop, LoopKind};

    fn access(index: Vec<Affine>) -> Access {
        Access::new(1, index.into_iter().map(Index::Affine).collect())
    }

    #[test]
    fn unit_loops_are_single_loops_without_offsets_over_whole_dimensions() {
        let loops: Vec<Loop> = [4, 5, 6]
            .iter()
            .map(|&extent| Loop {
                name: format!("l{extent}"),
                extent,
                kind: LoopKind::Parallel,
            })
            .collect();
        let unit = |index: Vec<Affine>, shape: &[usize]| unit_loops(&access(index), &loops, shape);
        assert_eq!(unit(vec![Affine::var(2), Affine::var(0)], &[6, 4]), Some(vec![2, 0]));
        assert_eq!(unit(vec![Affine::var(0).add_offset(1)], &[5]), None);
        assert_eq!(unit(vec![Affine::var(0).plus(1, 1)], &[8]), None);
        assert_eq!(unit(vec![Affine::var(0), Affine::var(0)], &[4, 4]), None);
        assert_eq!(unit(vec![Affine::constant(0)], &[1]), None);
        // A loop shorter than its dimension reads a slice.
        assert_eq!(unit(vec![Affine::var(0)], &[8]), None);
    }
}
