//! DMA placement: each access's buffer, where its transfers happen, and double buffering.
//!
//! A buffer's transfers sit just inside the deepest tile loop (in the chosen order) that its
//! subscripts use: there, every loop it depends on has a fixed tile, and the loops further in
//! that it does not depend on reuse the same tile. Its start is the smallest value of each
//! subscript over the tile and its size the subscript's span, which also covers subscripts of
//! several loops such as `oh*stride + kh`. Gets of read-only buffers that are refilled inside
//! a tile loop are double-buffered while the LDM has room, so the next tile's transfer can
//! overlap this tile's compute; then the target, where its boxes allow it
//! ([`super::target_may_double`]), so that a tile's put overlaps the next tile's compute.

use crate::loops::{Access, Index, Kernel, Program};
use crate::target::Target;

use super::sizing::{box_dims, is_direct};
use super::{accesses, Buffer, Residence, Schedule};

/// Number of tile loops (outermost first in `order`) that must enclose an access's transfers:
/// just inside the deepest one its subscripts (gathered positions included) use.
pub fn depth(a: &Access, order: &[usize]) -> usize {
    let used = used_loops(&a.index);
    order.iter().rposition(|l| used.contains(l)).map_or(0, |d| d + 1)
}

fn used_loops(index: &[Index]) -> Vec<usize> {
    let mut out = Vec::new();
    for i in index {
        match i {
            Index::Affine(x) => out.extend(x.terms.iter().map(|t| t.0)),
            Index::Gathered { access, .. } => out.extend(used_loops(&access.index)),
        }
    }
    out
}

pub fn plan_buffers(k: &Kernel, p: &Program, s: &Schedule, target: &Target) -> Vec<Buffer> {
    let mut buffers: Vec<Buffer> = accesses(k)
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let ty = &p.tensor(k.operands[a.operand]).ty;
            let dims = box_dims(k, p, i, a, &s.tiles);
            let residence = if is_direct(a, dims.as_deref(), &ty.shape) {
                Residence::Direct
            } else {
                Residence::Buffer
            };
            let depth = depth(a, &s.order);
            Buffer {
                dims: if residence == Residence::Buffer {
                    dims.unwrap_or_default()
                } else {
                    Vec::new()
                },
                elem_bytes: ty.dtype.size_bytes(),
                residence,
                depth: if residence == Residence::Buffer { depth } else { 0 },
                double: false,
                shared: None,
                split: false,
                posted: false,
                room: 0,
            }
        })
        .collect();
    super::keep_room(k, &mut buffers);
    let budget = target.ldm_budget();
    let mut s2 = s.clone();
    // The read buffers first, then the target.
    for i in (1..buffers.len()).chain(0..1) {
        if buffers[i].residence != Residence::Buffer || !super::may_double(k, i, &buffers[i], &s.tiles, &s.order) {
            continue;
        }
        buffers[i].double = true;
        s2.buffers = buffers.clone();
        if s2.ldm_bytes(k, target) > budget {
            buffers[i].double = false;
        }
    }
    buffers
}
