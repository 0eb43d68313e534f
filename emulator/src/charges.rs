//! What runtime-c's DMA helpers (`swflow_slave.h`: `swflow_dma_box`, the guarded reads'
//! `swflow_dma_box_padded` and `swflow_pad_box`) charge the calling CPE, as operation counts.
//! The JIT's mirrors of those helpers charge the same (`swflow_codegen`'s `cost` tests them
//! against the header), and the scheduler's estimate counts them.

use crate::timing::Ops;

/// What runtime-c's `swflow_dma_box` charges (see `swflow_slave.h`): once per call, for each
/// of the box's dimensions (its four set-up loops).
pub const DMA_BOX_SETUP_OPS: Ops = Ops {
    load: 4,
    store: 2,
    integer: 8,
    branch: 4,
    ..Ops::ZERO
};

/// Per transfer, for each dimension (the transfer's offset and the next index).
pub const DMA_BOX_PER_DIM_OPS: Ops = Ops {
    load: 3,
    integer: 4,
    branch: 1,
    ..Ops::ZERO
};

/// Per transfer, once (the call and its descriptor).
pub const DMA_BOX_TRANSFER_OPS: Ops = Ops {
    load: 2,
    store: 6,
    integer: 12,
    branch: 6,
    ..Ops::ZERO
};

/// What runtime-c's `swflow_clip` charges, for each dimension of a guarded read's box (the
/// clipped box); `swflow_dma_box_padded` and `swflow_pad_box` both call it.
pub const DMA_PAD_SETUP_OPS: Ops = Ops {
    load: 3,
    store: 3,
    integer: 10,
    branch: 4,
    ..Ops::ZERO
};

/// `swflow_clip_packed`, for each dimension (whether the rows come packed).
pub const DMA_PACK_CHECK_OPS: Ops = Ops {
    load: 3,
    integer: 4,
    branch: 3,
    ..Ops::ZERO
};

/// `swflow_pad_box` with packed rows: once, per dimension (pitches, the plane count and the
/// last plane's index).
pub const DMA_SPREAD_SETUP_OPS: Ops = Ops {
    load: 3,
    store: 2,
    integer: 4,
    branch: 2,
    ..Ops::ZERO
};

/// `swflow_clip_first`, per dimension (the place of a packed box's first element).
pub const DMA_PACK_FIRST_OPS: Ops = Ops {
    load: 2,
    integer: 4,
    branch: 1,
    ..Ops::ZERO
};

/// Per plane of moved rows (the rows of one index of every dimension but the last two), per
/// dimension (its first row's place and the next plane's index).
pub const DMA_SPREAD_PLANE_OPS: Ops = Ops {
    load: 3,
    store: 1,
    integer: 4,
    branch: 2,
    ..Ops::ZERO
};

/// Per row of a packed box (the loop's control, both places from the row after, and whether
/// the row moves: all but the very first do).
pub const DMA_SPREAD_ROW_OPS: Ops = Ops {
    integer: 5,
    branch: 2,
    ..Ops::ZERO
};

/// Per moved vector of f32 elements (`swflow_move_up` on a machine with vectors): an
/// unaligned load and store (`simd_loadu`, `simd_storeu`: two LDM accesses
/// and a merge each), the loop's control and the two addresses.
pub const DMA_MOVE_VECTOR_OPS: Ops = Ops {
    load: 2,
    store: 2,
    fp: 2,
    integer: 4,
    branch: 1,
    ..Ops::ZERO
};

/// Once per moved row of f32 elements that is at least a vector but not whole vectors
/// (`swflow_move_up` on a machine with vectors): its first vector's unaligned load, kept until
/// the other vectors have moved, and store, the test and its addresses.
pub const DMA_MOVE_HEAD_OPS: Ops = Ops {
    load: 2,
    store: 2,
    fp: 2,
    integer: 2,
    branch: 1,
    ..Ops::ZERO
};

/// Once per moved row of f32 elements shorter than a vector whose padding before and after it
/// takes the vector's other lanes (`swflow_move_up` on a machine with vectors): its one
/// unaligned load and store, the test, how far the vector starts before the row, and its
/// addresses.
pub const DMA_MOVE_SHORT_OPS: Ops = Ops {
    load: 2,
    store: 2,
    fp: 2,
    integer: 4,
    branch: 2,
    ..Ops::ZERO
};

/// Per element of a row moved one element at a time (`swflow_move_up`: rows shorter than a
/// vector whose padding cannot take its other lanes, and every row on a machine without
/// vectors).
pub const DMA_MOVE_OPS: Ops = Ops {
    load: 1,
    store: 1,
    integer: 2,
    branch: 1,
    ..Ops::ZERO
};

/// `swflow_pad_box` for a box that misses its tensor, per dimension (the box's size).
pub const DMA_PAD_EMPTY_OPS: Ops = Ops {
    load: 1,
    integer: 2,
    branch: 1,
    ..Ops::ZERO
};

/// `swflow_pad_box`, per dimension of a box that meets its tensor (the dimension's pitch, and
/// whether anything of it lies outside still).
pub const DMA_PAD_DEEP_OPS: Ops = Ops {
    load: 2,
    integer: 4,
    branch: 2,
    ..Ops::ZERO
};

/// `swflow_pad_outside`, per call (the range's end and both runs' places and lengths).
pub const DMA_PAD_SLAB_OPS: Ops = Ops {
    load: 5,
    integer: 8,
    branch: 2,
    ..Ops::ZERO
};

/// `swflow_pad_outside`, per index of the clipped range it walks (its place and the loop's
/// control).
pub const DMA_PAD_STEP_OPS: Ops = Ops {
    integer: 2,
    branch: 1,
    ..Ops::ZERO
};

/// `swflow_pad_run`, per run (its test).
pub const DMA_PAD_RUN_OPS: Ops = Ops {
    integer: 2,
    branch: 1,
    ..Ops::ZERO
};

/// `swflow_pad_run` in vectors, once per run (the pad value's broadcast load).
pub const DMA_PAD_SPLAT_OPS: Ops = Ops { load: 1, ..Ops::ZERO };

/// `swflow_pad_run` in vectors, per vector (an unaligned store, `simd_storeu`: two LDM
/// accesses and a merge; the loop's control and the address).
pub const DMA_PAD_VECTOR_OPS: Ops = Ops {
    store: 2,
    fp: 1,
    integer: 2,
    branch: 1,
    ..Ops::ZERO
};

/// Per element set to the pad value (`swflow_pad_row`).
pub const DMA_PAD_FILL_OPS: Ops = Ops {
    store: 1,
    integer: 2,
    branch: 1,
    ..Ops::ZERO
};

/// Once per clipped box, for each dimension (its four set-up loops).
pub const DMA_CLIP_SETUP_OPS: Ops = Ops {
    load: 5,
    store: 3,
    integer: 10,
    branch: 4,
    ..Ops::ZERO
};

/// Per transfer of a clipped box, for each dimension (both offsets and the next index); each
/// transfer also costs [`DMA_BOX_TRANSFER_OPS`].
pub const DMA_CLIP_PER_DIM_OPS: Ops = Ops {
    load: 6,
    integer: 8,
    branch: 1,
    ..Ops::ZERO
};
