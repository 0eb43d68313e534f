//! The DMA of a guarded read: a box that may leave its tensor.
//!
//! A guarded (padded) access's LDM buffer holds the whole box its subscripts span over a tile,
//! as any buffer does, so the compute reads it without checks. Where the box leaves the
//! tensor, only the part inside, the clipped box, comes by DMA, to its place in the packed
//! buffer; the buffer's other elements are then set to the pad value.
//!
//! Where padding cuts the rows short in the buffer (the innermost axis is clipped) and there
//! is more than one row, every row would be its own short transfer, each moving whole memory
//! lines. Such a clipped box comes *packed* instead: as an ordinary box (contiguous rows and
//! strided transfers wherever main memory allows) from its first element's place in the
//! buffer, and the CPE then moves the rows apart, last row first (each row's place is at or
//! after its packed position, so no row is overwritten before it moves). Finishing the boxes
//! this way (the moves, then the padding) takes 3.4 % of the nine light models' modelled time
//! on SW26010 and 3.9 % on SW26010-Pro, the moves 2.4 %; a transfer per row instead made
//! them 5.5 % and 8.9 % slower, in the transfers' set-up and the memory lines their short
//! rows touch. Otherwise a transfer
//! is a run contiguous in both memories: the innermost dimensions that the clipped box covers
//! in full both in the tensor and in the buffer, and the next one; runs of the next dimension
//! with more than one index join into one strided transfer when they follow each other in the
//! buffer (the DMA engine strides main memory only).
//!
//! runtime-c's `swflow_dma_box_padded` and `swflow_pad_box`, and the JIT's mirrors of them,
//! issue exactly [`Clipped::transfers`] and make [`Clipped::moves`]; a box that does not leave
//! its tensor is moved as an ordinary box.

/// The part of a box inside its tensor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Clipped {
    /// First index of the clipped box in the tensor, per dimension.
    pub lo: Vec<usize>,
    /// First index of the clipped box in the buffer's box, per dimension.
    pub at: Vec<usize>,
    /// Extent of the clipped box; all zero when the box misses the tensor.
    pub extent: Vec<usize>,
    /// Whether the box comes packed (see the module documentation).
    pub packed: bool,
}

/// A move of `len` elements within the buffer, from `from` up to `to`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Move {
    pub from: usize,
    pub to: usize,
    pub len: usize,
}

/// One DMA transfer of a clipped box, in elements: `blocks` runs of `run` elements, from
/// main memory at `main` (runs `main_pitch` apart) to the buffer at `ldm` (runs back to back).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transfer {
    pub main: usize,
    pub ldm: usize,
    pub run: usize,
    pub blocks: usize,
    pub main_pitch: usize,
}

impl Clipped {
    /// The clipped box of the box `start`/`extent` of a tensor of `shape`, or `None` when the
    /// box lies inside the tensor.
    pub fn of(shape: &[usize], start: &[i64], extent: &[usize]) -> Option<Clipped> {
        let mut c = Clipped {
            lo: Vec::new(),
            at: Vec::new(),
            extent: Vec::new(),
            packed: false,
        };
        let mut clipped = false;
        for d in 0..shape.len() {
            let lo = start[d].max(0);
            let hi = (start[d] + extent[d] as i64).min(shape[d] as i64);
            clipped |= lo != start[d] || hi != start[d] + extent[d] as i64;
            c.lo.push(lo as usize);
            c.at.push((lo - start[d]).max(0) as usize);
            c.extent.push((hi - lo).max(0) as usize);
        }
        if c.extent.contains(&0) {
            c.extent.iter_mut().for_each(|e| *e = 0);
        } else {
            let rows: usize = c.extent[..shape.len().saturating_sub(1)].iter().product();
            c.packed = shape.last().is_some() && c.extent.last() != extent.last() && rows > 1;
        }
        clipped.then_some(c)
    }

    pub fn is_empty(&self) -> bool {
        self.extent.iter().product::<usize>() == 0
    }

    /// The transfers that move the clipped box into a packed buffer of extents `box_extent`,
    /// in the order they are issued.
    pub fn transfers(&self, shape: &[usize], box_extent: &[usize]) -> Vec<Transfer> {
        if self.is_empty() {
            return Vec::new();
        }
        let rank = shape.len();
        let (main_pitch, ldm_pitch) = (pitches(shape), pitches(box_extent));
        if self.packed {
            let first = (0..rank).map(|j| self.at[j] * ldm_pitch[j]).sum();
            return box_transfers(shape, &self.lo, &self.extent, first);
        }
        let mut d = rank;
        while d > 0 && self.extent[d - 1] == shape[d - 1] && self.extent[d - 1] == box_extent[d - 1] {
            d -= 1;
        }
        let run_dim = d.saturating_sub(1);
        let run: usize = self.extent[run_dim..].iter().product();
        let strided = (0..run_dim)
            .rev()
            .find(|&j| self.extent[j] > 1)
            .filter(|&j| ldm_pitch[j] == run);
        let blocks = strided.map_or(1, |j| self.extent[j]);
        let mut index = vec![0usize; rank];
        let mut out = Vec::new();
        loop {
            let main = (0..rank).map(|j| (self.lo[j] + index[j]) * main_pitch[j]).sum();
            let ldm = (0..rank).map(|j| (self.at[j] + index[j]) * ldm_pitch[j]).sum();
            out.push(Transfer {
                main,
                ldm,
                run,
                blocks,
                main_pitch: strided.map_or(0, |j| main_pitch[j]),
            });
            if !next(&mut index[..run_dim], &self.extent, strided) {
                return out;
            }
        }
    }

    /// The moves that put packed rows in their places, in the order they happen: from the
    /// last row to the second.
    pub fn moves(&self, box_extent: &[usize]) -> Vec<Move> {
        if !self.packed {
            return Vec::new();
        }
        let last = box_extent.len() - 1;
        let pitch = pitches(box_extent);
        let first: usize = (0..=last).map(|j| self.at[j] * pitch[j]).sum();
        let width = self.extent[last];
        let rows: usize = self.extent[..last].iter().product();
        (1..rows)
            .rev()
            .map(|k| {
                let (mut rest, mut to) = (k, first);
                for j in (0..last).rev() {
                    to += (rest % self.extent[j]) * pitch[j];
                    rest /= self.extent[j];
                }
                Move {
                    from: first + k * width,
                    to,
                    len: width,
                }
            })
            .collect()
    }
}

/// The transfers of runtime-c's `swflow_dma_box` for the box `lo`/`extent` of a tensor of
/// `shape` into a packed buffer from element `dst`.
pub fn box_transfers(shape: &[usize], lo: &[usize], extent: &[usize], dst: usize) -> Vec<Transfer> {
    let rank = shape.len();
    let pitch = pitches(shape);
    let mut d = rank;
    while d > 0 && extent[d - 1] == shape[d - 1] {
        d -= 1;
    }
    let run_dim = d.saturating_sub(1);
    let run: usize = extent[run_dim..].iter().product();
    let strided = (0..run_dim).rev().find(|&j| extent[j] > 1);
    let blocks = strided.map_or(1, |j| extent[j]);
    let mut index = vec![0usize; rank];
    let mut out = Vec::new();
    let mut ldm = dst;
    loop {
        let main = (0..rank).map(|j| (lo[j] + index[j]) * pitch[j]).sum();
        out.push(Transfer {
            main,
            ldm,
            run,
            blocks,
            main_pitch: strided.map_or(0, |j| pitch[j]),
        });
        ldm += run * blocks;
        if !next(&mut index[..run_dim], extent, strided) {
            return out;
        }
    }
}

/// Advances `index` (the dimensions outside the run) to the next transfer's, skipping the
/// strided dimension; false after the last.
fn next(index: &mut [usize], extent: &[usize], strided: Option<usize>) -> bool {
    for j in (0..index.len()).rev() {
        if Some(j) == strided {
            continue;
        }
        index[j] += 1;
        if index[j] < extent[j] {
            return true;
        }
        index[j] = 0;
    }
    false
}

/// Elements between consecutive indices of each dimension of a row-major array.
pub fn pitches(shape: &[usize]) -> Vec<usize> {
    let mut p = vec![1usize; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        p[d] = p[d + 1] * shape[d + 1];
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_box_inside_is_not_clipped() {
        assert_eq!(Clipped::of(&[4, 8], &[0, 2], &[4, 6]), None);
    }

    fn transfer(main: usize, ldm: usize, run: usize) -> Transfer {
        Transfer {
            main,
            ldm,
            run,
            blocks: 1,
            main_pitch: 0,
        }
    }

    #[test]
    fn rows_padded_on_both_ends_come_packed() {
        // A 3x10 box around a 2x8 tensor (one pad element on each side of every row): both
        // rows in one transfer, then the second moves two elements up.
        let c = Clipped::of(&[2, 8], &[-1, -1], &[3, 10]).unwrap();
        assert_eq!(
            (c.lo.clone(), c.at.clone(), c.extent.clone()),
            (vec![0, 0], vec![1, 1], vec![2, 8])
        );
        assert!(c.packed);
        assert_eq!(c.transfers(&[2, 8], &[3, 10]), vec![transfer(0, 11, 16)]);
        assert_eq!(
            c.moves(&[3, 10]),
            vec![Move {
                from: 19,
                to: 21,
                len: 8
            }]
        );
    }

    #[test]
    fn packed_part_rows_come_in_one_strided_transfer() {
        // Rows 0..2 of channels 1..3 of [4, 3, 6], columns 0..4, in a box [2, 2, 5] from
        // column -1: per channel, one strided transfer of two 4-element rows, packed; then
        // the rows move apart (three moves for the four rows).
        let c = Clipped::of(&[4, 3, 6], &[1, 0, -1], &[2, 2, 5]).unwrap();
        assert!(c.packed);
        let strided = |main, ldm| Transfer {
            main,
            ldm,
            run: 4,
            blocks: 2,
            main_pitch: 6,
        };
        assert_eq!(
            c.transfers(&[4, 3, 6], &[2, 2, 5]),
            vec![strided(18, 1), strided(36, 9)]
        );
        let moved: Vec<(usize, usize)> = c.moves(&[2, 2, 5]).iter().map(|m| (m.from, m.to)).collect();
        assert_eq!(moved, vec![(13, 16), (9, 11), (5, 6)]);
    }

    #[test]
    fn rows_whole_in_the_buffer_move_straight_to_their_places() {
        // Rows -1..2 of a [2, 8] tensor, all columns: the box's rows are whole, so the part
        // inside comes in one run to row 1 of the buffer.
        let c = Clipped::of(&[2, 8], &[-1, 0], &[3, 8]).unwrap();
        assert!(!c.packed);
        assert_eq!(c.transfers(&[2, 8], &[3, 8]), vec![transfer(0, 8, 16)]);
        assert!(c.moves(&[3, 8]).is_empty());
    }

    #[test]
    fn whole_rows_clipped_at_the_top_join_into_one_transfer() {
        // Rows -2..3 of a [4, 6] tensor: rows 0..3 come in one contiguous run.
        let c = Clipped::of(&[4, 6], &[-2, 0], &[5, 6]).unwrap();
        assert_eq!(
            c.transfers(&[4, 6], &[5, 6]),
            vec![Transfer {
                main: 0,
                ldm: 12,
                run: 18,
                blocks: 1,
                main_pitch: 0
            }]
        );
    }

    #[test]
    fn runs_that_follow_each_other_in_the_buffer_form_one_strided_transfer() {
        // Channels 0..2 of [3, 4, 5] with the spatial box clipped to full buffer rows: the
        // box [2, 2, 5] from row -1 holds rows 0 of each channel after a pad row.
        let c = Clipped::of(&[3, 4, 5], &[0, -1, 0], &[2, 2, 5]).unwrap();
        assert_eq!(c.extent, vec![2, 1, 5]);
        // Each channel's run (one row of 5) sits at buffer offset 5 and 15: not adjacent.
        let t = c.transfers(&[3, 4, 5], &[2, 2, 5]);
        assert_eq!(t.len(), 2);
        assert_eq!((t[0].ldm, t[1].ldm, t[1].main), (5, 15, 20));
        // With only the outer dimension clipped, the runs are adjacent in the buffer.
        let c = Clipped::of(&[3, 4, 5], &[-1, 0, 0], &[3, 2, 5]).unwrap();
        let t = c.transfers(&[3, 4, 5], &[3, 2, 5]);
        assert_eq!(
            t,
            vec![Transfer {
                main: 0,
                ldm: 10,
                run: 10,
                blocks: 2,
                main_pitch: 20
            }]
        );
    }

    #[test]
    fn a_box_that_misses_the_tensor_moves_nothing() {
        let c = Clipped::of(&[4], &[5], &[3]).unwrap();
        assert!(c.is_empty());
        assert!(c.transfers(&[4], &[3]).is_empty());
    }
}
