//! Streamed tape: a tape-only tensor, kept by its producer, that leaves the producer and
//! returns to its one reader through a tape arena in LDM, in layers, on a per-CPE stack in
//! main memory.
//!
//! Each CPE of the producer writes its boxes of the tensor straight into the current half of
//! its arena, one after another. When the next box would not fit, the half is one *layer*:
//! it leaves in one contiguous `TapeStream` put to the end of this CPE's tape, its descriptor
//! is pushed on this CPE's stack, and the other half takes the next boxes while the put
//! completes. The reader walks the producer's boxes in reverse (it mirrors the producer's
//! partition and tiles, [`super::mirror`], and runs its segments and the tile loops around
//! the tensor's box backwards), so it pops the layers in reverse order: each comes back in
//! one get while the layer after it is computed on, and each box is read in place.
//!
//! The tape of a program is two tensors shared by its streams ([`StreamTape`]): the values,
//! `share` elements per CPE, and the stack, `slots` 64-bit integers per CPE. CPE `c`'s stack
//! starts at slot `c * slots`:
//! ```text
//! [0]                   layers outstanding
//! [1]                   the end of this CPE's tape (an element offset into the values)
//! [2 + s]               the first layer of stream s (in producer order)
//! [2 + S + 2 j ..]      layer j: its element offset in the values, its length in elements
//! ```
//! (A layer's place in the arena needs no entry: each reader fills the halves in turn.)
//! The first stream's producer starts each CPE's stack empty. Streams must nest (a stream
//! produced later is read earlier), so every reader finds its layers on top.

use crate::loops::{Index, Kernel, LoopKind, Program, TensorId};
use crate::schedule::dma::plan_buffers;
use crate::schedule::reorder::best_order;
use crate::schedule::sizing::halve;
use crate::schedule::{accesses, is_written, keep_index, schedule_kernel, verify_schedule, Residence, Schedule};
use crate::target::Target;

use super::{mirror_schedule, MirrorError, Saved};

/// The arena size when none is given: an eighth of the LDM (8 KiB on SW26010, 32 KiB on
/// SW26010-Pro), which leaves most of the scratchpad to the working buffers; the sweep in
/// `scripts/tape-table.sh` shows how layers and time change with it.
pub fn default_arena_bytes(target: &Target) -> usize {
    target.ldm_bytes / 8
}

/// The arena of a stream whose producer writes at most `share` elements (of `elem_bytes`
/// each) per CPE, given at most `limit` bytes: halves that hold a CPE's whole share (so it
/// leaves in one layer), in whole LDM buffer alignments, or `limit` when that is smaller. A
/// smaller arena leaves the rest of the LDM to the producer's and reader's working buffers.
pub fn arena_for(share: usize, elem_bytes: usize, limit: usize) -> usize {
    let half = (share.max(1) * elem_bytes).next_multiple_of(crate::schedule::LDM_BUFFER_ALIGN);
    limit.min(2 * half)
}

/// A tape-only tensor streamed from its producer to its reader.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stream {
    pub tensor: TensorId,
    pub producer: usize,
    pub reader: usize,
    /// Its place among the program's streams, in producer order.
    pub index: usize,
    /// Bytes of the arena its producer and reader keep in each CPE's LDM ([`arena_for`]).
    pub arena_bytes: usize,
    /// Elements of one half of the arena: a layer holds at most this many.
    pub half: usize,
    /// Per CPE: the elements it pushes.
    pub elements: Vec<usize>,
    /// Per CPE: the layers it pushes.
    pub layers: Vec<usize>,
}

/// The two tensors holding a program's streamed tape (see the module documentation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamTape {
    /// The values: `share` elements per CPE.
    pub values: TensorId,
    /// The stacks: `slots` 64-bit integers per CPE.
    pub stack: TensorId,
    pub share: usize,
    pub slots: usize,
    /// Streams sharing it.
    pub streams: usize,
}

impl StreamTape {
    /// Slot of CPE-relative stack entry: stream `s`'s first layer.
    pub fn base_slot(s: usize) -> usize {
        2 + s
    }

    /// Slot of the first of layer `j`'s two entries.
    pub fn layer_slot(&self, j: usize) -> usize {
        2 + self.streams + 2 * j
    }
}

/// Why a tape-only tensor is not streamed (it is then stored as records).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    #[error("it has {0} backward readers, and a stream is popped once")]
    Readers(usize),
    #[error("only f32 tensors with dimensions stream")]
    DType,
    #[error("its producer or reader already streams another tensor or takes part in records")]
    KernelTaken,
    #[error("its producer and reader do not nest with those of '{0}', so the stacks would not pop in order")]
    NotLifo(String),
    #[error("the arena cannot hold one box: {0}")]
    BoxTooLarge(String),
    #[error("the producer does not fit beside the arena: {0}")]
    Producer(String),
    #[error("the reader cannot mirror the producer beside the arena: {0}")]
    Mirror(MirrorError),
    #[error("the reader reduces over a tile loop it would walk backwards")]
    ReversedReduction,
    #[error("it is its producer's result, and only a kept value streams")]
    NotKept,
    #[error("kept in records: the step was measured faster so")]
    KeptInRecords,
}

/// The access of kernel `k` that writes `tensor`.
pub(super) fn written_access(p: &Program, k: &Kernel, tensor: TensorId) -> Option<usize> {
    let all = accesses(k);
    (0..all.len()).find(|&i| is_written(k, i) && p.storage(k.operands[all[i].operand]) == tensor)
}

/// The access of kernel `k` that reads `tensor`.
pub(super) fn read_access(p: &Program, k: &Kernel, tensor: TensorId) -> Option<usize> {
    let all = accesses(k);
    (0..all.len()).find(|&i| !is_written(k, i) && p.storage(k.operands[all[i].operand]) == tensor)
}

/// `target` with `arena_bytes` of each CPE's LDM kept for the arena.
pub fn beside_arena(target: &Target, arena_bytes: usize) -> Target {
    Target {
        stack_reserve_bytes: target.stack_reserve_bytes + arena_bytes,
        ..target.clone()
    }
}

/// The schedules of the producer and the reader of saved tensor `s` (tape-only, one reader,
/// kept by its producer) when it streams through an arena of `arena_bytes`: the producer
/// scheduled beside the arena with boxes of the tensor no larger than half of it, the reader
/// mirroring it without double buffers (it walks backwards, so no tile has a next one to
/// prefetch in the forward sense). Both schedules still count the tensor's box buffer, which
/// the arena replaces: they are conservative by that box, at most half the arena.
pub fn stream_schedules(
    p: &mut Program,
    s: &Saved,
    target: &Target,
    arena_bytes: usize,
) -> Result<(Schedule, Schedule), StreamError> {
    let &[reader] = s.readers.as_slice() else {
        return Err(StreamError::Readers(s.readers.len()));
    };
    let ty = &p.tensor(s.tensor).ty;
    let dtype = ty.dtype;
    if dtype != swflow_frontend::ir::DType::F32 || ty.shape.is_empty() {
        return Err(StreamError::DType);
    }
    let half = arena_bytes / 2 / dtype.size_bytes();
    if arena_bytes >= target.ldm_budget() {
        return Err(StreamError::Producer(format!(
            "the arena takes all {} bytes of LDM the buffers may use",
            target.ldm_budget()
        )));
    }
    let beside = beside_arena(target, arena_bytes);
    let f = &p.kernels[s.producer];
    let fi = written_access(p, f, s.tensor).ok_or(StreamError::Mirror(MirrorError::ProducerLayout))?;
    // A forward kernel's result is what the forward pass reads; a result only the backward
    // reads does not arise from gradient programs, so only kept values stream.
    if keep_index(f) != Some(fi) {
        return Err(StreamError::NotKept);
    }
    let mut fs = schedule_kernel(f, p, &beside).map_err(|e| StreamError::Producer(e.reason))?;
    // Halve the largest tile of the tensor's box until the box fits half the arena.
    let box_loops: Vec<usize> = accesses(f)[fi]
        .index
        .iter()
        .flat_map(|x| match x {
            Index::Affine(x) => x.terms.iter().map(|&(l, _)| l).collect(),
            Index::Gathered { .. } => Vec::new(),
        })
        .collect();
    while fs.buffers[fi].residence == Residence::Buffer && fs.buffers[fi].elements() > half {
        let Some(&l) = box_loops
            .iter()
            .filter(|&&l| fs.tiles[l] > 1)
            .max_by_key(|&&l| (fs.tiles[l], l))
        else {
            return Err(StreamError::BoxTooLarge(format!(
                "{} elements with every tile at 1, {half} in half the arena",
                fs.buffers[fi].elements()
            )));
        };
        fs.tiles[l] = halve(fs.tiles[l]);
        fs.order = best_order(f, p, &fs.tiles, &fs.ranges).order;
        fs.buffers = plan_buffers(f, p, &fs, &beside);
    }
    if fs.buffers[fi].residence != Residence::Buffer {
        return Err(StreamError::BoxTooLarge(format!(
            "the producer keeps no LDM buffer of it with tiles for {half} elements"
        )));
    }
    verify_schedule(f, p, &fs, &beside).map_err(StreamError::Producer)?;
    let old = p.kernels[s.producer].schedule.replace(fs.clone());
    let mirrored = mirror_schedule(p, s.producer, s.tensor, reader, &beside);
    p.kernels[s.producer].schedule = old;
    let mut rs = mirrored.map_err(StreamError::Mirror)?;
    let b = &p.kernels[reader];
    let bi = read_access(p, b, s.tensor).ok_or(StreamError::Mirror(MirrorError::ReaderLayout))?;
    let depth = rs.buffers[bi].depth;
    if rs.order[..depth].iter().any(|&l| b.loops[l].kind == LoopKind::Reduce) {
        return Err(StreamError::ReversedReduction);
    }
    for buffer in &mut rs.buffers {
        buffer.double = false;
        buffer.posted = false;
    }
    verify_schedule(b, p, &rs, &beside).map_err(|e| StreamError::Mirror(MirrorError::DoesNotFit(e)))?;
    Ok((fs, rs))
}

/// Per CPE, the elements and the layers that kernel `producer` pushes of `tensor` with
/// arena halves of `half` elements: a layer ends when the next box would not fit.
pub fn layers(p: &Program, producer: usize, tensor: TensorId, half: usize, cpes: usize) -> (Vec<usize>, Vec<usize>) {
    let k = &p.kernels[producer];
    let s = k.schedule.as_ref().expect("a streaming producer is scheduled");
    let i = written_access(p, k, tensor).expect("the producer writes its tensor");
    (0..cpes)
        .map(|cpe| {
            let mut layering = Layering::new(half);
            let walked = crate::exec::walk::walk(k, &crate::exec::walk::shapes(p, k), s, cpe, &mut |e| {
                if let crate::exec::walk::Event::WriteBack { access, extent, .. } = e {
                    if access == i {
                        layering.add(extent.iter().product());
                    }
                }
                Ok(())
            });
            walked.expect("counting callbacks never fail");
            (layering.elements, layering.layers())
        })
        .unzip()
}

/// Boxes cut into layers of at most `half` elements: a layer ends when the next box would not
/// fit (the rule of the generated code).
#[derive(Clone, Copy, Debug)]
pub struct Layering {
    half: usize,
    /// Elements of the layer being filled.
    fill: usize,
    /// Layers complete.
    full: usize,
    /// Elements of every box so far.
    pub elements: usize,
}

impl Layering {
    pub fn new(half: usize) -> Layering {
        Layering {
            half,
            fill: 0,
            full: 0,
            elements: 0,
        }
    }

    /// Adds a box of `n` elements.
    pub fn add(&mut self, n: usize) {
        if self.fill + n > self.half {
            self.full += 1;
            self.fill = 0;
        }
        self.fill += n;
        self.elements += n;
    }

    /// Layers, the last one included.
    pub fn layers(&self) -> usize {
        self.full + usize::from(self.fill > 0)
    }
}

/// Whether a stream from kernel `producer` to kernel `reader` nests with one from `p2` to
/// `r2`: one lies inside the other, or they do not overlap.
pub fn nests(producer: usize, reader: usize, p2: usize, r2: usize) -> bool {
    let inside = |a: (usize, usize), b: (usize, usize)| b.0 < a.0 && a.1 < b.1;
    inside((producer, reader), (p2, r2)) || inside((p2, r2), (producer, reader)) || reader < p2 || r2 < producer
}

#[cfg(test)]
mod tests {
    use super::nests;

    #[test]
    fn streams_nest_when_the_later_producer_has_the_earlier_reader() {
        assert!(nests(2, 7, 1, 9));
        assert!(nests(1, 9, 2, 7));
        assert!(nests(1, 3, 4, 6));
        assert!(nests(4, 6, 1, 3));
        // The second stream pushed would be popped second: its layers are not on top.
        assert!(!nests(1, 7, 2, 9));
        assert!(!nests(2, 9, 1, 7));
    }
}
