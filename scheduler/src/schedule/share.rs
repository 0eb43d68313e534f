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
//!   no part);
//! - so with an 8 x 8 grid both hold, each for its own buffers: a matrix product `a x b` split
//!   over the rows and columns of its result shares `a` along the rows and `b` along the
//!   columns, as the fastest public SW26010 matrix products do (a buffer that uses neither
//!   loop is shared along the columns);
//! - when every CPE has a block and a buffer's access uses neither loop that has several
//!   parts, it is the same on every CPE: the whole mesh shares it (where CPEs broadcast by
//!   remote LDM access: see `mesh_wide`). CPE 0 fetches it and broadcasts it along the
//!   first row, whose CPEs broadcast it down their columns: the core group moves it through
//!   the DMA queue once instead of eight times, for a second broadcast.
//!
//! The CPEs of a line must also walk their tiles in step, sending and receiving the same
//! buffers in the same order: where the loop that varies along the line has uneven parts
//! ([`super::partition::block`]), so that its CPEs walk different numbers of its tiles, only
//! a buffer whose transfers no tile loop of it encloses is shared.
//! A shared buffer holds a whole number of registers per tile (its size rounded up to 32
//! bytes), since register communication moves whole registers (remote LDM access takes the
//! same sizes).
//!
//! A guarded read's box must be finished after its get (its packed rows moved apart and
//! padded: runtime-c's `swflow_pad_box`), which costs its fetcher about a cycle per element.
//! Where the line's owner did that alone, the other seven CPEs waited for it. So a padded
//! box shared along a row or a column is *split* ([`split_dim`]): each CPE of the line
//! fetches and finishes one slice of its outermost dimension longer than one ([`slice`]),
//! and the line then broadcasts the slices in turn, each from the CPE that fetched it: the
//! same bytes through the DMA queue and over the line, an eighth of the finishing per CPE,
//! and eight broadcasts' latencies instead of one. But a line's box is then complete only
//! when its last slice has come through the queue, which serves the CPEs' gets in the order
//! they are issued, every line's slices in turn: where the queue, not the finishing, holds
//! the lines up, whole boxes fetched by their owners arrive line after line and the first
//! lines start computing sooner. So a box is split only where finishing it takes longer
//! than its get occupies the queue ([`finishing_outweighs_get`]). On light ResNet-50 on
//! SW26010-Pro, splitting every padded shared box made a strided convolution whose queue is
//! busy 95 % of its time 8 % slower (its boxes' rows lie whole in the tensor: finishing them
//! only sets the rows outside it).
//!
//! A box shared across the mesh, guarded or not, may be split as well, where the estimate
//! finds it faster: its whole broadcasts move the box along the first row and then down every
//! column, each holding its line for the whole box, while the first row's CPEs can each fetch
//! one slice (by their column) and send it down their column, all columns at once, after
//! which every row passes its slices along in turn, as a split line does. The box then
//! crosses the lines once and its largest slice more, for a broadcast's latency per slice.
//! But where the CPEs apply a prologue to the box, the first row would do it alone while the
//! other rows waited: such a box is *spread* ([`spread`]):
//! cut into one slice per CPE of the mesh, each fetched and finished by its CPE, every row
//! passes its slices along in turn, and then each row's slices (contiguous in the box) go
//! down every column in turn. The box crosses the lines as often, for twice the broadcasts'
//! latencies, and every CPE finishes a 64th of it (light DenseNet-121's normalised 1x1
//! convolution from 480 channels on 28 x 28 on SW26010-Pro: 143.1 -> 126.4 us).
//!
//! Where the CPEs broadcast by remote LDM access, a shared double buffer may instead be
//! *posted* ([`may_post`]): its broadcasts are ones that only their senders call, made a tile
//! ahead into a third half while the line computes, after a sync of the line (across the mesh,
//! of all the CPEs) so that no CPE still reads the half they land in. Its fetchers get each box
//! two tiles ahead. A tile then waits for the sync and, across the mesh, for the first stage
//! of the next box's broadcast (the whole box along the first row, or the largest slice down
//! the columns), instead of holding every line for each of the tile's collective broadcasts;
//! the third half takes LDM that the tiles may need. Once a partition's tiles are chosen
//! (with collective broadcasts), the scheduler posts where the third half fits and its
//! estimate finds it faster, and it ranks partitions by their collective estimates: it
//! chooses no partition for the sake of posting. The third half leads the tile search to
//! smaller tiles, which the estimate rates too well whatever the broadcast (light
//! ResNet-50's 3 x 3 convolutions on SW26010-Pro, posted in tiles of one input channel, were
//! estimated 1.5 % faster than collective in sixteen and ran 14 % slower; light
//! Inception-v2's 3 x 3 convolution on 56 x 56, posted under another partition, 8 %). But
//! with the partition chosen, the tiles are sought again from the collective ones with every
//! tiling posted where that is estimated faster, and kept where the estimate finds them
//! faster (`schedule::retiled_for_posting`): light ResNet-50's 1x1 convolutions then take more
//! tiles of output rows and post their input across the mesh, and the nine light models on
//! SW26010-Pro ran 0.73 % faster together (ResNet-50 2.9 %), though the same misjudgement
//! remains for some kernels (its 1x1 convolution from 256 channels to 128 on 56 x 56,
//! posted in tiles of eight rows, was estimated 0.7 % faster and ran 14 % slower).

use crate::loops::{Index, Kernel, Program};
use crate::target::Target;

use super::estimate::{estimate, finishing_outweighs_get};
use super::partition::block_sizes;
use super::sizing::box_dims;
use super::{accesses, is_written, Residence, Schedule};

/// The dimension along which the CPEs of its line fetch shared buffer `i` of `s` in slices
/// (see the module comment), if they do ([`super::Buffer::split`]).
pub fn split_dim(k: &Kernel, s: &Schedule, i: usize) -> Option<usize> {
    s.buffers
        .get(i)
        .is_some_and(|b| b.split)
        .then(|| may_split(k, s, i))
        .flatten()
}

/// The dimension along which the CPEs of its line may fetch buffer `i` of `s` in slices: a
/// guarded read's buffer or a prologue's main one (each CPE finishes its slice) shared along
/// a row or a column, or any buffer shared across the mesh, whose outermost dimension longer
/// than one (every one before it is one) is not its last and holds at least two slice units
/// of a whole tile's box ([`slice_unit`]; a shorter last tile's may be coarser, and a
/// buffer's boxes are sliced in the coarsest, [`split_unit`]: a box of one unit takes one
/// slice).
pub fn may_split(k: &Kernel, s: &Schedule, i: usize) -> Option<usize> {
    let b = s.buffers.get(i)?;
    if !(b.shared? == MeshLine::Mesh || finished(k, i)) {
        return None;
    }
    let d = b.dims.iter().position(|&n| n > 1)?;
    let unit = slice_unit(b.elem_bytes, b.dims.get(d + 1..)?.iter().product())?;
    (d + 1 < b.dims.len() && b.dims[d] >= 2 * unit).then_some(d)
}

/// Whether the CPEs finish access `i`'s boxes after their gets: a guarded read's (padding
/// them) or a prologue's main one (applying the prologue).
fn finished(k: &Kernel, i: usize) -> bool {
    let Some(a) = accesses(k).get(i).cloned() else {
        return false;
    };
    a.pad.is_some() || is_prologue_main(k, &a)
}

fn is_prologue_main(k: &Kernel, a: &crate::loops::Access) -> bool {
    super::prologue::prologue(k).is_some_and(|pr| *pr.main == *a)
}

/// Whether split buffer `i` of `s` is *spread*: a prologue's main box shared across the mesh,
/// which every CPE of the mesh fetches a slice of and applies the prologue to, not only the
/// first row's (see the module comment). A guarded read's box, which its fetchers finish in
/// about a cycle per element, is not: spread, light VGG-19's 3 x 3 convolutions on SW26010-Pro
/// took partitions that shared their input across the mesh, estimated faster than the
/// columns' posted slices they had and measured up to 5 % slower.
pub fn spread(k: &Kernel, s: &Schedule, i: usize) -> bool {
    split_dim(k, s, i).is_some()
        && s.buffers[i].shared == Some(MeshLine::Mesh)
        && accesses(k).get(i).is_some_and(|a| is_prologue_main(k, a))
}

/// How many slices a split buffer cuts each box into ([`slice`]): one per CPE of the mesh
/// where it is [`spread`], else one per CPE of a line.
pub fn slice_count(spread: bool) -> usize {
    match spread {
        true => MESH_SIDE * MESH_SIDE,
        false => MESH_SIDE,
    }
}

/// The slice that CPE `cpe` fetches of a split buffer shared along `line`, if any, as an
/// index of [`slice`]: where the buffer is [`spread`], the CPE's own index; else its position
/// along its line, and across the mesh only the first row's CPEs fetch, each its column's
/// slice.
pub fn fetched_slice(line: MeshLine, spread: bool, cpe: usize) -> Option<usize> {
    match (spread, line) {
        (true, _) => Some(cpe),
        (false, MeshLine::Mesh) => (cpe / MESH_SIDE == 0).then_some(cpe % MESH_SIDE),
        (false, line) => Some(line.position(cpe)),
    }
}

/// The distinct loop lengths of the segments of `s`'s CPEs on a mesh of `cpes` (see
/// [`Schedule::segments`]), for [`split_unit`].
pub fn segment_lengths(k: &Kernel, s: &Schedule, cpes: usize) -> Vec<Vec<usize>> {
    let extents: Vec<usize> = k.loops.iter().map(|l| l.extent).collect();
    let mut lengths: Vec<Vec<usize>> = Vec::new();
    for cpe in 0..cpes {
        for seg in s.segments(cpe, &extents) {
            if !lengths.contains(&seg.len) {
                lengths.push(seg.len);
            }
        }
    }
    lengths
}

/// Indices per slice unit of split buffer `i` of `s`, whose CPEs' segments have `lengths`
/// ([`segment_lengths`]): one unit for all its boxes, the least common multiple of their
/// [`slice_unit`]s. A box's plane (its extents after the split dimension) depends on the
/// tiles of the loops its subscripts use there, which are whole but at the end of a segment,
/// so every combination of those loops' tiles (each whole, or as short as the end of some
/// segment leaves it) is taken. A register's worth of indices, a unit for any plane, where a
/// subscript there is gathered. The code generator, the tile walk and the estimate all slice
/// by it.
pub fn split_unit(k: &Kernel, p: &Program, s: &Schedule, i: usize, lengths: &[Vec<usize>]) -> Option<usize> {
    let d = split_dim(k, s, i)?;
    let elem = s.buffers[i].elem_bytes;
    let any = slice_unit(elem, 1)?;
    let a = accesses(k).get(i)?.clone();
    let mut loops: Vec<usize> = Vec::new();
    for x in &a.index[d + 1..] {
        let Index::Affine(x) = x else { return Some(any) };
        for &(l, _) in &x.terms {
            if !loops.contains(&l) {
                loops.push(l);
            }
        }
    }
    // Per loop of the plane, every tile it takes somewhere.
    let mut taken: Vec<Vec<usize>> = loops.iter().map(|&l| vec![s.tiles[l]]).collect();
    for len in lengths {
        for (j, &l) in loops.iter().enumerate() {
            let last = len[l] % s.tiles[l];
            if last > 0 && !taken[j].contains(&last) {
                taken[j].push(last);
            }
        }
    }
    let mut unit = 1;
    let mut tiles = s.tiles.clone();
    let combinations: usize = taken.iter().map(Vec::len).product();
    for mut c in 0..combinations {
        for (j, &l) in loops.iter().enumerate() {
            tiles[l] = taken[j][c % taken[j].len()];
            c /= taken[j].len();
        }
        let plane = match box_dims(k, p, i, &a, &tiles) {
            Some(dims) => dims[d + 1..].iter().product(),
            None => return Some(any),
        };
        let u = slice_unit(elem, plane)?;
        unit = unit * u / gcd(unit, u);
    }
    Some(unit)
}

/// Indices of a split dimension per slice unit, for a box with `plane` elements per index
/// (those of the dimensions after it, in the box as it lies packed in its buffer): the fewest
/// whose elements fill whole registers, so that every slice starts a whole number of
/// registers into the box. A register's worth of indices when `plane` is odd, one index when
/// `plane` fills whole registers itself (a channel of 28 x 28 floats); a buffer's boxes are
/// sliced in one unit ([`split_unit`]). None for elements that do not divide a register.
pub fn slice_unit(elem_bytes: usize, plane: usize) -> Option<usize> {
    let per_register = (elem_bytes > 0 && REGISTER_BYTES % elem_bytes == 0).then(|| REGISTER_BYTES / elem_bytes)?;
    Some(per_register / gcd(per_register, plane))
}

fn gcd(a: usize, b: usize) -> usize {
    match b {
        0 => a,
        _ => gcd(b, a % b),
    }
}

/// The range `lo..hi` of a split dimension of `extent` indices (in this box) of slice
/// `position` of `parts` ([`slice_count`]): whole units of `unit` indices, as evenly as they
/// go, the last slice ending at the box's end. Some slices are empty when there are fewer
/// units than parts.
pub fn slice(extent: usize, unit: usize, position: usize, parts: usize) -> (usize, usize) {
    let units = extent.div_ceil(unit);
    let at = |p: usize| (unit * (p * units / parts)).min(extent);
    (at(position), at(position + 1))
}

/// CPEs in a row or column of the mesh.
pub const MESH_SIDE: usize = 8;
/// Bytes of one register: what one broadcast moves.
pub const REGISTER_BYTES: usize = 32;

/// The line of the mesh along which a buffer is shared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MeshLine {
    Row,
    Column,
    /// The whole mesh: along the first row, then down every column.
    Mesh,
}

impl MeshLine {
    /// As the schedule text names it: shared along rows, along columns, or across the mesh.
    pub fn name(self) -> &'static str {
        match self {
            MeshLine::Row => "along rows",
            MeshLine::Column => "along columns",
            MeshLine::Mesh => "across the mesh",
        }
    }

    /// As the C runtime names a broadcast's line (`SWFLOW_REG_SEND`'s line: 0 row, 1
    /// column). A broadcast across the mesh runs as one along a row, then along columns.
    pub fn code(self) -> i32 {
        match self {
            MeshLine::Row => 0,
            MeshLine::Column => 1,
            MeshLine::Mesh => unreachable!("a broadcast across the mesh runs along a row, then along columns"),
        }
    }

    /// Whether CPE `cpe` is the one that fetches: index 0 of its line, or CPE 0 of the mesh.
    pub fn is_owner(self, cpe: usize) -> bool {
        match self {
            MeshLine::Row => cpe % MESH_SIDE == 0,
            MeshLine::Column => cpe / MESH_SIDE == 0,
            MeshLine::Mesh => cpe == 0,
        }
    }

    /// The position of CPE `cpe` along this line (a row or a column): its column in a row,
    /// its row in a column. The owner is at 0. Across the mesh, its column: the slice of a
    /// split buffer it holds after the first stage, which it sends along its row.
    pub fn position(self, cpe: usize) -> usize {
        match self {
            MeshLine::Row | MeshLine::Mesh => cpe % MESH_SIDE,
            MeshLine::Column => cpe / MESH_SIDE,
        }
    }

    /// Broadcasts one tile takes before every CPE holds it.
    pub fn stages(self) -> usize {
        match self {
            MeshLine::Mesh => 2,
            _ => 1,
        }
    }
}

/// The lines along which the mesh can share a read buffer, each with the partition loop
/// `varying` along it, which the buffer must not use, and whether that loop's parts are all
/// as long ([`super::partition::even`]): none when the target or the partition does not
/// allow it, both the columns and the rows with an 8 x 8 grid (see the module comment).
fn lines_without(k: &Kernel, s: &Schedule, target: &Target) -> Vec<(MeshLine, usize, bool)> {
    if !target.timing.broadcasts() || target.cpes != MESH_SIDE * MESH_SIDE || s.grid.len() != 2 {
        return Vec::new();
    }
    let (gx, gy) = (s.grid[0], s.grid[1]);
    let even = |j: usize| super::partition::even(s.grid[j], k.loops[s.partition[j]].extent);
    let mut out = Vec::new();
    if MESH_SIDE % gy == 0 && gx * gy == target.cpes {
        out.push((MeshLine::Column, s.partition[0], even(0)));
    }
    if gy % MESH_SIDE == 0 {
        out.push((MeshLine::Row, s.partition[1], even(1)));
    }
    out
}

/// The loops the grid cuts, when every CPE has a block of it, each as large along every one
/// of them (see the module comment): then a buffer that uses none of those loops is the same
/// on every CPE, and the CPEs walk its tiles in step. Only where the CPEs broadcast by remote
/// LDM access: with register communication the first row's CPEs would move every register
/// of each tile twice, and on the nine light models the schedules this leads the estimate to
/// ran slower than sharing along lines (2.4 % on their sum).
fn mesh_wide(k: &Kernel, s: &Schedule, target: &Target) -> Option<Vec<usize>> {
    let rma = target.timing.regcomm_latency_cycles.is_none() && target.timing.broadcasts();
    if !rma || target.cpes != MESH_SIDE * MESH_SIDE || s.grid.len() != 2 {
        return None;
    }
    let extents: Vec<usize> = s.partition.iter().map(|&l| k.loops[l].extent).collect();
    let sizes = block_sizes(&s.grid, &extents);
    let cut: Vec<usize> = (0..2).filter(|&j| s.grid[j] > 1).collect();
    let even = cut.iter().all(|&j| s.grid[j] * sizes[j] == extents[j]);
    (s.grid[0] * s.grid[1] == target.cpes && even).then(|| cut.iter().map(|&j| s.partition[j]).collect())
}

/// Per access of `k` (in [`accesses`] order), the lines its buffer may be shared along, the
/// widest first: read buffers that use no loop varying along the line. Where that loop's
/// parts are uneven, the CPEs of the line walk different numbers of its tiles, so only a
/// buffer whose transfers no tile loop of it encloses is shared: each CPE of the line visits
/// it as often, in the same order (light ShuffleNet's grouped 1x1 convolutions, on grids of 4
/// groups by 16 parts of 34 channels, share each group's input along two mesh rows).
fn lines(k: &Kernel, s: &Schedule, target: &Target) -> Vec<Vec<MeshLine>> {
    let line = lines_without(k, s, target);
    let mesh = mesh_wide(k, s, target);
    accesses(k)
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let uses = |varying: usize| {
                a.index.iter().any(|x| match x {
                    Index::Affine(x) => x.terms.iter().any(|&(l, c)| l == varying && c != 0),
                    Index::Gathered { .. } => true,
                })
            };
            let read = !is_written(k, i) && s.buffers.get(i).is_some_and(|b| b.residence == Residence::Buffer);
            if !read {
                return Vec::new();
            }
            let mut out = Vec::new();
            if mesh.as_ref().is_some_and(|cut| !cut.iter().any(|&l| uses(l))) {
                out.push(MeshLine::Mesh);
            }
            let depth = s.buffers.get(i).map_or(0, |b| b.depth);
            let walked_alike = |varying: usize| !s.order.iter().take(depth).any(|&l| l == varying);
            out.extend(
                line.iter()
                    .filter(|&&(_, varying, even)| !uses(varying) && (even || walked_alike(varying)))
                    .map(|&(l, _, _)| l),
            );
            out
        })
        .collect()
}

/// Whether the CPEs of `target` broadcast by remote LDM access, so that shared buffers may be
/// posted (see the module comment).
pub fn posts(target: &Target) -> bool {
    target.timing.regcomm_latency_cycles.is_none() && target.timing.rma_latency_cycles.is_some()
}

/// Whether buffer `i` of `s` may be posted: a shared double buffer on a target that
/// [`posts`], whose lines carry no other buffer shared at every tile (one placed at depth 0
/// is broadcast once, before any tile posts). A posted buffer's next box is posted before
/// this tile's broadcasts of the others go along the same lines: a 1x1 convolution with a
/// prologue that posted its per-channel scales beside its input shared along the same columns
/// (collective, whole or in slices) stopped on the emulator, its CPEs waiting for a receive
/// or a line sync that no other CPE of the column would match. No light model's kernel on
/// SW26010-Pro posted a buffer beside another one shared along its lines at every tile.
pub fn may_post(s: &Schedule, target: &Target, i: usize) -> bool {
    let Some(line) = s.buffers.get(i).filter(|b| b.double).and_then(|b| b.shared) else {
        return false;
    };
    let crosses = |other: MeshLine| other == line || other == MeshLine::Mesh || line == MeshLine::Mesh;
    let alone = s
        .buffers
        .iter()
        .enumerate()
        .all(|(j, b)| j == i || b.depth == 0 || !b.shared.is_some_and(crosses));
    posts(target) && alone
}

/// Whether access `i`'s buffer may be shared along `line`.
pub fn may_share(k: &Kernel, s: &Schedule, target: &Target, i: usize, line: MeshLine) -> bool {
    lines(k, s, target).get(i).is_some_and(|l| l.contains(&line))
}

/// Shares the buffers of `s` that the mesh allows, each while the rounding of its tiles to
/// whole registers still fits the LDM: along the widest line each may take (see
/// [`may_share`]), or along rows and columns only, whichever the estimate finds faster
/// (a broadcast across the mesh takes two stages, and the schedule with the queue's time
/// spread over eight fetchers may run faster).
pub fn share_buffers(k: &Kernel, p: &Program, s: &mut Schedule, target: &Target) {
    let budget = target.ldm_budget();
    let allowed = lines(k, s, target);
    let shared = |across: bool| {
        let mut t = s.clone();
        for (i, lines) in allowed.iter().enumerate() {
            t.buffers[i].shared = lines.iter().copied().find(|&l| across || l != MeshLine::Mesh);
            if t.ldm_bytes(k, target) > budget {
                t.buffers[i].shared = None;
            }
        }
        t
    };
    let widest = shared(true);
    let lines_only = shared(false);
    *s = if widest == lines_only
        || estimate(k, p, &widest, target).cycles() <= estimate(k, p, &lines_only, target).cycles()
    {
        widest
    } else {
        lines_only
    };
    let all = accesses(k);
    let main = super::prologue::prologue(k).and_then(|pr| pr.main_window(&all));
    for i in 0..s.buffers.len() {
        // A guarded read's slices along a line pay where finishing its box outweighs a get;
        // the others where the estimate finds them faster.
        let compared = s.buffers[i].shared == Some(MeshLine::Mesh) || main == Some(i);
        let split = may_split(k, s, i).is_some()
            && match compared {
                true => {
                    let mut split = s.clone();
                    split.buffers[i].split = true;
                    estimate(k, p, &split, target).cycles() < estimate(k, p, s, target).cycles()
                }
                false => finishing_outweighs_get(k, p, s, i, target),
            };
        s.buffers[i].split = split;
    }
}

/// Posts the shared buffers of `s` that may be posted ([`may_post`]) where the third half
/// fits the LDM and the estimate finds the schedule faster so, each in turn.
pub fn post_buffers(k: &Kernel, p: &Program, s: &mut Schedule, target: &Target) {
    let budget = target.ldm_budget();
    // A prologue kernel posts nothing: a posted box goes out a tile ahead, before the
    // parameters its prologue needs have arrived.
    if super::prologue::prologue(k).is_some() {
        return;
    }
    for i in 0..s.buffers.len() {
        if !may_post(s, target, i) {
            continue;
        }
        let mut posted = s.clone();
        posted.buffers[i].posted = true;
        if posted.ldm_bytes(k, target) <= budget
            && estimate(k, p, &posted, target).cycles() < estimate(k, p, s, target).cycles()
        {
            *s = posted;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{slice, MESH_SIDE};

    /// The slices of `extent` indices in units of `unit`, in line order.
    fn slices(extent: usize, unit: usize) -> Vec<(usize, usize)> {
        (0..MESH_SIDE).map(|p| slice(extent, unit, p, MESH_SIDE)).collect()
    }

    #[test]
    fn slices_cover_the_box_in_whole_units() {
        for extent in 1..300 {
            for unit in [1, 4, 8, 32] {
                let s = slices(extent, unit);
                assert_eq!(s[0].0, 0);
                assert_eq!(s[MESH_SIDE - 1].1, extent);
                for w in s.windows(2) {
                    assert_eq!(w[0].1, w[1].0, "{extent} in units of {unit}: {s:?}");
                }
                for &(lo, hi) in &s {
                    assert!(lo <= hi && lo % unit == 0, "{extent} in units of {unit}: {s:?}");
                }
            }
        }
    }

    #[test]
    fn units_spread_as_evenly_as_they_go() {
        assert_eq!(
            slices(128, 8),
            (0..8).map(|p| (16 * p, 16 * p + 16)).collect::<Vec<_>>()
        );
        // Three units: three CPEs fetch, the last slice short.
        assert_eq!(
            slices(20, 8),
            vec![(0, 0), (0, 0), (0, 8), (8, 8), (8, 8), (8, 16), (16, 16), (16, 20)]
        );
    }
}
