//! Tiles shared along the mesh: on a target whose CPEs can broadcast along a mesh row or column
//! (register communication on SW26010, remote LDM access on SW26010-Pro), a read buffer whose
//! every tile is the same for all CPEs of a line is fetched by one of them (index 0 of the
//! line) and broadcast to the others, so the line moves it through the DMA queue once instead
//! of eight times.
//!
//! CPE `c` sits at row `c / 8`, column `c % 8` of the 8 x 8 mesh, and with a grid of two
//! partition loops `(x, y)` in `gx x gy` parts takes the block `(c / gy, c % gy)`
//! ([`super::partition`]). So:
//! - when `gy` divides 8 and every CPE has a block, the CPEs of a column share their `y` part
//!   and differ in `x`: a buffer whose access does not use `x` is the same along the column;
//! - when `gy` is a multiple of 8, the CPEs of a row share their `x` part and differ in `y`: a
//!   buffer whose access does not use `y` is the same along the row (rows without blocks take
//!   no part).
//!
//! The CPEs of a line must also walk their tiles in step, sending and receiving the same
//! buffers in the same order: the blocks along the loop that varies are all the same size.
//! A shared buffer holds a whole number of registers per tile (its size rounded up to 32
//! bytes), since register communication moves whole registers (remote LDM access takes the
//! same sizes).

use crate::loops::{Index, Kernel};
use crate::target::Target;

use super::partition::block_sizes;
use super::{accesses, is_written, Residence, Schedule};

/// CPEs in a row or column of the mesh.
pub const MESH_SIDE: usize = 8;
/// Bytes of one register: what one broadcast moves.
pub const REGISTER_BYTES: usize = 32;

/// The line of the mesh along which a buffer is shared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MeshLine {
    Row,
    Column,
}

impl MeshLine {
    /// As the schedule text and the C runtime name it (`SWFLOW_REG_SEND`'s line: 0 row, 1
    /// column).
    pub fn name(self) -> &'static str {
        match self {
            MeshLine::Row => "rows",
            MeshLine::Column => "columns",
        }
    }

    pub fn code(self) -> i32 {
        match self {
            MeshLine::Row => 0,
            MeshLine::Column => 1,
        }
    }

    /// Whether CPE `cpe` is the one of its line that fetches and broadcasts.
    pub fn is_owner(self, cpe: usize) -> bool {
        match self {
            MeshLine::Row => cpe % MESH_SIDE == 0,
            MeshLine::Column => cpe / MESH_SIDE == 0,
        }
    }
}

/// The line along which the mesh can share a read buffer that does not use partition loop
/// `varying`: `None` when the target or the partition does not allow it (see the module
/// comment).
fn line_without(k: &Kernel, s: &Schedule, target: &Target) -> Option<(MeshLine, usize)> {
    if !target.timing.broadcasts() || target.cpes != MESH_SIDE * MESH_SIDE || s.grid.len() != 2 {
        return None;
    }
    let (gx, gy) = (s.grid[0], s.grid[1]);
    let extents: Vec<usize> = s.partition.iter().map(|&l| k.loops[l].extent).collect();
    let sizes = block_sizes(&s.grid, &extents);
    let even = |j: usize| s.grid[j] * sizes[j] == extents[j];
    if MESH_SIDE % gy == 0 && gx * gy == target.cpes && even(0) {
        Some((MeshLine::Column, s.partition[0]))
    } else if gy % MESH_SIDE == 0 && even(1) {
        Some((MeshLine::Row, s.partition[1]))
    } else {
        None
    }
}

/// Per access of `k` (in [`accesses`] order), the line its buffer is shared along, if any:
/// read buffers that do not use the loop varying along the line.
pub fn shared_lines(k: &Kernel, s: &Schedule, target: &Target) -> Vec<Option<MeshLine>> {
    let all = accesses(k);
    let Some((line, varying)) = line_without(k, s, target) else {
        return vec![None; all.len()];
    };
    all.iter()
        .enumerate()
        .map(|(i, a)| {
            let uses = a.index.iter().any(|x| match x {
                Index::Affine(x) => x.terms.iter().any(|&(l, c)| l == varying && c != 0),
                Index::Gathered { .. } => true,
            });
            let read = !is_written(k, i) && s.buffers.get(i).is_some_and(|b| b.residence == Residence::Buffer);
            (read && !uses).then_some(line)
        })
        .collect()
}

/// Shares the buffers of `s` that the mesh allows ([`shared_lines`]), each while the
/// rounding of its tiles to whole registers still fits the LDM.
pub fn share_buffers(k: &Kernel, s: &mut Schedule, target: &Target) {
    let budget = target.ldm_budget();
    for (i, line) in shared_lines(k, s, target).into_iter().enumerate() {
        s.buffers[i].shared = line;
        if s.ldm_bytes(k, target) > budget {
            s.buffers[i].shared = None;
        }
    }
}
