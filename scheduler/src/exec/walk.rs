//! The tile walk of a scheduled kernel on one CPE, as a sequence of events.
//!
//! The executor ([`super::cpe`]) moves data on these events; [`count`] only tallies the DMA
//! they imply, so reports of a schedule's traffic come from the same walk that runs it.

use std::borrow::Cow;

use crate::loops::{Access, Index, Kernel, LoopKind, Program};
use crate::schedule::clip::Clipped;
use crate::schedule::share::{fetched_slice, slice, slice_count, split_dim, spread};
use crate::schedule::{accesses, is_written, keep_index, Residence, Schedule};
use crate::tape::stream::Layering;

/// One step of the walk.
pub enum Event<'w> {
    /// Buffer `access` must hold the box `start`/`extent` (for the target and the kept value:
    /// after the previous box was written back, see [`Event::WriteBack`]; the kept value's
    /// box is only claimed, never read). `first_visit` says that no reduction tile loop has
    /// moved for this target tile yet.
    Fill {
        access: usize,
        start: &'w [i64],
        extent: &'w [usize],
        first_visit: bool,
    },
    /// Compute the tile at `origin` with extents `extent` (every loop's current range).
    /// `last_visit` says that every reduction tile loop is at its last tile: the target
    /// elements of the tile have all their values folded in after it.
    Compute {
        origin: &'w [usize],
        extent: &'w [usize],
        first_visit: bool,
        last_visit: bool,
    },
    /// Write the buffered box of `access` back to main memory: the target's after every
    /// visit, the kept value's after the visit that completed its reduction.
    WriteBack {
        access: usize,
        start: &'w [i64],
        extent: &'w [usize],
    },
}

/// The box an access spans over a tile: start and extent per dimension of its tensor (a
/// window's spread included).
pub fn span(a: &Access, origin: &[usize], extent: &[usize]) -> (Vec<i64>, Vec<usize>) {
    a.index
        .iter()
        .enumerate()
        .map(|(d, i)| match i {
            Index::Affine(x) => {
                let low: i64 = x
                    .terms
                    .iter()
                    .filter(|t| t.1 < 0)
                    .map(|&(l, c)| c * (extent[l] as i64 - 1))
                    .sum();
                let size = x
                    .terms
                    .iter()
                    .map(|&(l, c)| c.unsigned_abs() as usize * (extent[l] - 1))
                    .sum::<usize>()
                    + 1
                    + a.spread(d);
                (x.eval(origin) + low, size)
            }
            Index::Gathered { .. } => unreachable!("gathered accesses are direct"),
        })
        .unzip()
}

/// The shape of the tensor of each access of kernel `k` (in [`accesses`] order).
pub fn shapes(p: &Program, k: &Kernel) -> Vec<Vec<usize>> {
    accesses(k)
        .iter()
        .map(|a| p.tensor(k.operands[a.operand]).ty.shape.clone())
        .collect()
}

/// Walks CPE `cpe`'s partition points and tiles, calling `f` for every event in order. The
/// shape of each access's tensor (in [`accesses`] order) gives a strided read's box that
/// takes whole dimensions ([`Access::spans_dimension`]).
pub fn walk(
    k: &Kernel,
    shapes: &[Vec<usize>],
    s: &Schedule,
    cpe: usize,
    f: &mut impl FnMut(Event) -> Result<(), String>,
) -> Result<(), String> {
    let all = accesses(k);
    let keep = keep_index(k);
    let extents = k.extents();
    let mut origin = vec![0usize; k.loops.len()];
    let mut box_ext = extents.clone();
    for seg in s.segments(cpe, &extents) {
        // Within a segment each loop ranges over [start, start + len), walked in tiles.
        let count = |l: usize| seg.len[l].div_ceil(s.tiles[l]);
        let outer_points: usize = s.order.iter().map(|&l| count(l)).product();
        origin.copy_from_slice(&seg.start);
        for &l in &s.partition {
            box_ext[l] = s.tiles[l].min(seg.len[l]);
        }
        let mut tile = vec![0usize; s.order.len()];
        let mut held_target: Option<(Vec<i64>, Vec<usize>)> = None;
        // Whether the last tile computed completed the held target box's reduction.
        let mut finished = false;
        let mut changed_from = 0;
        for step in 0..outer_points {
            for (pos, &l) in s.order.iter().enumerate() {
                origin[l] = seg.start[l] + tile[pos] * s.tiles[l];
                box_ext[l] = s.tiles[l].min(seg.start[l] + seg.len[l] - origin[l]);
            }
            let first_visit = s
                .order
                .iter()
                .enumerate()
                .all(|(pos, &l)| k.loops[l].kind != LoopKind::Reduce || tile[pos] == 0);
            let last_visit = s
                .order
                .iter()
                .enumerate()
                .all(|(pos, &l)| k.loops[l].kind != LoopKind::Reduce || tile[pos] + 1 == count(l));
            for (i, b) in s.buffers.iter().enumerate() {
                if b.residence != Residence::Buffer || (step > 0 && b.depth <= changed_from) {
                    continue;
                }
                let (mut start, mut ext) = span(&all[i], &origin, &box_ext);
                if !is_written(k, i) {
                    for d in 0..ext.len() {
                        if all[i].spans_dimension(d, &s.tiles, &extents, shapes[i][d]) {
                            (start[d], ext[d]) = (0, shapes[i][d]);
                        }
                    }
                }
                if i == 0 {
                    if let Some((ps, pe)) = held_target.take() {
                        write_back(f, keep.filter(|_| finished), &ps, &pe)?;
                    }
                    held_target = Some((start.clone(), ext.clone()));
                }
                f(Event::Fill {
                    access: i,
                    start: &start,
                    extent: &ext,
                    first_visit,
                })?;
            }
            f(Event::Compute {
                origin: &origin,
                extent: &box_ext,
                first_visit,
                last_visit,
            })?;
            finished = last_visit;
            for pos in (0..s.order.len()).rev() {
                tile[pos] += 1;
                changed_from = pos;
                if tile[pos] < count(s.order[pos]) {
                    break;
                }
                tile[pos] = 0;
            }
        }
        if let Some((ps, pe)) = held_target.take() {
            write_back(f, keep.filter(|_| finished), &ps, &pe)?;
        }
    }
    Ok(())
}

/// The write-back of a target box, and of the kept value's box (the same box) when `keep`
/// names its access.
fn write_back(
    f: &mut impl FnMut(Event) -> Result<(), String>,
    keep: Option<usize>,
    start: &[i64],
    extent: &[usize],
) -> Result<(), String> {
    f(Event::WriteBack {
        access: 0,
        start,
        extent,
    })?;
    match keep {
        Some(access) => f(Event::WriteBack { access, start, extent }),
        None => Ok(()),
    }
}

/// Whether the target's box is read before a tile is computed: a box the kernel writes only
/// in part (the rest must survive the write-back), or partial sums of a revisited reduction
/// tile.
pub fn target_read_first(k: &Kernel, tiles: &[usize], first_visit: bool) -> bool {
    !k.target_is_dense(tiles) || (k.stmt.reduce.is_some() && !first_visit)
}

/// DMA operations needed to move a box of a row-major tensor. The innermost dimensions the
/// box covers fully, plus the next one, form a run contiguous in main memory (and, the buffer
/// being packed, in LDM); one strided DMA moves all the runs of the next dimension (of extent
/// above 1) outside it; each dimension further out multiplies the count.
pub fn dma_ops(shape: &[usize], extent: &[usize]) -> usize {
    let mut d = shape.len();
    while d > 0 && extent[d - 1] == shape[d - 1] {
        d -= 1;
    }
    let levels: Vec<usize> = extent[..d.saturating_sub(1)]
        .iter()
        .copied()
        .filter(|&e| e > 1)
        .collect();
    levels.iter().rev().skip(1).product()
}

/// DMA tallies of one kernel.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    pub gets: usize,
    pub puts: usize,
    pub get_bytes: usize,
    pub put_bytes: usize,
    /// Elements accessed in main memory without DMA.
    pub direct_elements: usize,
}

/// How an access's boxes move (see [`crate::tape`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Moves {
    /// Each box by itself, in the transfers its shape needs.
    Boxes,
    /// Each box in one transfer (a tape tensor stored as records).
    Records,
    /// In layers of up to `half` elements, one transfer each (a streamed tape tensor); the
    /// stack's entries are read and written directly. `first` marks the program's first
    /// stream's producer, which starts the stacks empty instead of reading them.
    Layers { half: usize, first: bool },
}

/// The DMA a scheduled kernel performs on all CPEs, without running it. `shapes` are the
/// tensors' shapes per access, and `moves` says how each access's boxes move.
pub fn count(
    k: &Kernel,
    shapes: &[Vec<usize>],
    moves: &[Moves],
    units: &[Option<usize>],
    s: &Schedule,
    cpes: usize,
) -> Traffic {
    let transfers = |access: usize, extent: &[usize]| match moves[access] {
        Moves::Boxes => dma_ops(&shapes[access], extent),
        Moves::Records => 1,
        Moves::Layers { .. } => 0,
    };
    let mut t = Traffic::default();
    let direct = |i: usize| s.buffers[i].residence == Residence::Direct;
    let direct_reads = (1..s.buffers.len()).filter(|&i| direct(i) && !is_written(k, i)).count();
    let pads: Vec<bool> = accesses(k).iter().map(|a| a.pad.is_some()).collect();
    let splits: Vec<Option<usize>> = (0..s.buffers.len()).map(|i| split_dim(k, s, i)).collect();
    let spreads: Vec<bool> = (0..s.buffers.len()).map(|i| spread(k, s, i)).collect();
    for cpe in 0..cpes {
        // Per streamed access: its layers.
        let mut layers: Vec<Layering> = moves
            .iter()
            .map(|m| match *m {
                Moves::Layers { half, .. } => Layering::new(half),
                _ => Layering::new(0),
            })
            .collect();
        let counted = walk(k, shapes, s, cpe, &mut |e| {
            let mut layer = |access: usize, extent: &[usize]| {
                if let Moves::Layers { .. } = moves[access] {
                    layers[access].add(extent.iter().product());
                }
            };
            match e {
                // A buffer shared along a mesh line is fetched by the line's owner only, or
                // split into slices, one per CPE of the line.
                Event::Fill { access, .. }
                    if moves[access] == Moves::Boxes
                        && splits[access].is_none()
                        && s.buffers[access].shared.is_some_and(|l| !l.is_owner(cpe)) => {}
                Event::Fill {
                    access,
                    start,
                    extent,
                    first_visit,
                } => {
                    let (start, extent) = match (splits[access], s.buffers[access].shared) {
                        (Some(d), Some(line)) if moves[access] == Moves::Boxes => {
                            let unit = units[access].expect("a split buffer has a unit");
                            let Some(at) = fetched_slice(line, spreads[access], cpe) else {
                                // Across the mesh, only the first row fetches, unless spread.
                                return Ok(());
                            };
                            let (lo, hi) = slice(extent[d], unit, at, slice_count(spreads[access]));
                            if lo == hi {
                                // This CPE has no slice of the box.
                                return Ok(());
                            }
                            let (mut start, mut extent) = (start.to_vec(), extent.to_vec());
                            start[d] += lo as i64;
                            extent[d] = hi - lo;
                            (Cow::Owned(start), Cow::Owned(extent))
                        }
                        _ => (Cow::Borrowed(start), Cow::Borrowed(extent)),
                    };
                    let (start, extent) = (&start[..], &extent[..]);
                    let clipped = pads[access]
                        .then(|| Clipped::of(&shapes[access], start, extent))
                        .flatten();
                    if let Some(c) = clipped {
                        t.gets += c.transfers(&shapes[access], extent).len();
                        t.get_bytes += c.extent.iter().product::<usize>() * s.buffers[access].elem_bytes;
                    } else if !is_written(k, access) || (access == 0 && target_read_first(k, &s.tiles, first_visit)) {
                        layer(access, extent);
                        t.gets += transfers(access, extent);
                        t.get_bytes += extent.iter().product::<usize>() * s.buffers[access].elem_bytes;
                    }
                }
                Event::WriteBack { access, extent, .. } => {
                    layer(access, extent);
                    t.puts += transfers(access, extent);
                    t.put_bytes += extent.iter().product::<usize>() * s.buffers[access].elem_bytes;
                }
                Event::Compute { extent, last_visit, .. } => {
                    let points: usize = extent.iter().product();
                    t.direct_elements += points * direct_reads;
                    // The target's elements are written at every point; the kept value's
                    // once, by the epilogue of the last visit.
                    let parallel: usize = extent
                        .iter()
                        .zip(&k.loops)
                        .filter(|(_, l)| l.kind == LoopKind::Parallel)
                        .map(|(&e, _)| e)
                        .product();
                    for i in (0..s.buffers.len()).filter(|&i| direct(i) && is_written(k, i)) {
                        t.direct_elements += if i == 0 {
                            points
                        } else {
                            parallel * usize::from(last_visit)
                        };
                    }
                }
            }
            Ok(())
        });
        counted.expect("counting callbacks never fail");
        for (i, layering) in layers.iter().enumerate() {
            let Moves::Layers { first, .. } = moves[i] else {
                continue;
            };
            let count = layering.layers();
            // The stack's entries: a producer reads the stack's size and end (unless it starts
            // the stacks), writes its first layer, two entries per layer, the size and the
            // end; a reader reads the size, the end and its first layer, two entries per
            // layer, and writes the size and the end.
            t.direct_elements += if is_written(k, i) {
                2 * usize::from(!first) + 3 + 2 * count
            } else {
                3 + 2 * count + 2
            };
            if is_written(k, i) {
                t.puts += count;
            } else {
                t.gets += count;
            }
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::dma_ops;

    #[test]
    fn dma_op_counts() {
        // Whole tensor, or whole rows: one contiguous transfer.
        assert_eq!(dma_ops(&[4, 8], &[4, 8]), 1);
        assert_eq!(dma_ops(&[4, 8], &[2, 8]), 1);
        // Part of each row, several rows: one strided transfer.
        assert_eq!(dma_ops(&[4, 8], &[3, 5]), 1);
        // A 3-D box with partial rows: one strided transfer per outer index.
        assert_eq!(dma_ops(&[1, 256, 56, 56], &[1, 16, 56, 16]), 16);
        // Unit dimensions do not count as levels.
        assert_eq!(dma_ops(&[1, 256, 56, 56], &[1, 1, 56, 16]), 1);
    }
}
