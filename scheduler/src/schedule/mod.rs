//! Scheduling: how each kernel runs on the compute cores of a core group.
//!
//! The passes run in this order for every kernel, each writing part of its [`Schedule`]:
//! 1. [`partition`]: parallel loops (fused until there are at least as many iterations as
//!    CPEs) are split into equal contiguous chunks, one per CPE, so distinct CPEs write
//!    disjoint parts of the target. A CPE walks its chunk in segments that stay within one
//!    value of the outer partition loops; the innermost partition loop is tiled within a
//!    segment like any other loop. Or a grid cuts two parallel loops into parts, and each CPE
//!    takes one block, a segment within which both loops are tiled. Every candidate partition
//!    goes through the passes below, and the one with the shortest [`estimate`] is kept.
//! 2. [`sizing`] (swTVM Algorithm 1): tile sizes of the other loops, so that the LDM buffers
//!    of all accesses fit the target's LDM, then improved one tile at a time while the
//!    estimate falls.
//! 3. [`reorder`] (swTVM Algorithm 2): the order of the tile loops that needs the fewest DMA
//!    transfers.
//! 4. [`dma`]: where each buffer's transfers happen, whether it is read directly instead, and
//!    which gets are double-buffered; then [`share`]: which read buffers one CPE of a mesh
//!    line fetches and broadcasts to the others.
//!
//! The loop nest a scheduled kernel runs on each CPE:
//! ```text
//! for segment in chunk(cpe):               # outer partition loops fixed, innermost a range
//!                                          # (with a grid: the CPE's block, one segment)
//!   for t0 in tiles(order[0]):             # tile loops, outermost first
//!     [DMA of buffers placed at depth 1]
//!     for t1 in tiles(order[1]):
//!       [DMA of buffers placed at depth 2]
//!       ...
//!         for every point of the tile:     # all loops within their current tile
//!           statement on LDM buffers
//!       [puts of output buffers at depth 2]
//!     [puts of output buffers at depth 1]
//! ```

pub mod blocking;
pub mod clip;
pub mod dma;
pub mod estimate;
pub mod lanewise;
pub mod pack;
pub mod partition;
pub mod prologue;
pub mod reorder;
pub mod share;
pub mod sizing;
pub mod slow;
pub mod split;

use std::borrow::Cow;
use std::fmt::Write;

use swflow_frontend::ir::DType;

use crate::loops::{Access, Index, Kernel, Program};
use crate::target::Target;

/// A kernel that cannot be scheduled for a target.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("kernel '{kernel}': {reason}")]
pub struct ScheduleError {
    pub kernel: String,
    pub reason: String,
}

/// Alignment in bytes of every LDM buffer, and of each half of a double buffer, in the
/// generated code (the C structs and the JIT's layout): one vector in memory on either target
/// (a `floatv8` is 32 bytes, a `floatv4` 16), so that a vector whose first element's index in
/// a buffer is a multiple of the lanes may use the aligned loads and stores.
pub const LDM_BUFFER_ALIGN: usize = 32;

/// The most f32 lanes a target's vectors hold (`Target::f32_vector_lanes` is 1, 4 or 8).
pub const MAX_F32_LANES: usize = 8;

/// Bytes of one field of a kernel's parameter struct (a pointer to one of its tensors). Every
/// CPE copies the struct into its LDM before it starts.
pub const PARAM_FIELD_BYTES: usize = 8;

/// LDM bytes a kernel takes besides its buffers: its parameter struct (one field per distinct
/// tensor) and `counters` reply counters for its buffers (one per buffered access, two for a
/// double-buffered target) plus one for the struct's own get, each rounded up to
/// [`LDM_BUFFER_ALIGN`] as a C struct with aligned members is.
pub fn ldm_overhead(k: &Kernel, counters: usize, target: &Target) -> usize {
    let mut tensors = k.operands.clone();
    tensors.sort_unstable();
    tensors.dedup();
    (tensors.len() * PARAM_FIELD_BYTES).next_multiple_of(LDM_BUFFER_ALIGN)
        + ((counters + 1) * target.dma.reply_bytes).next_multiple_of(LDM_BUFFER_ALIGN)
}

/// How an access is served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Residence {
    /// Copied into an LDM buffer by DMA.
    Buffer,
    /// Read or written in main memory element by element (gathers, and tiles whose innermost
    /// dimension would be a single element).
    Direct,
}

/// The LDM buffer of one access.
#[derive(Clone, Debug, PartialEq)]
pub struct Buffer {
    /// Extent of each dimension of the tile it holds (the largest tile; edge tiles are
    /// smaller and stored packed).
    pub dims: Vec<usize>,
    /// Element size in bytes.
    pub elem_bytes: usize,
    pub residence: Residence,
    /// Number of tile loops (outermost first, in `Schedule::order`) around its transfers.
    pub depth: usize,
    /// A second buffer lets the next tile's get overlap this tile's compute.
    pub double: bool,
    /// Fetched by one CPE of each mesh line and broadcast to the others ([`share`]).
    pub shared: Option<share::MeshLine>,
    /// Shared, and fetched in slices by every CPE of its line, which broadcast them in turn
    /// ([`share::split_dim`]).
    pub split: bool,
    /// Shared and double, and broadcast a tile ahead by posted remote-LDM broadcasts into a
    /// third half ([`share::may_post`]).
    pub posted: bool,
    /// Elements kept after the tile for vector code to read past a short row ([`keep_room`]).
    pub room: usize,
}

/// Sets the room ([`Buffer::room`]) each LDM buffer of kernel `k` keeps after its tile: the
/// widest vector's lanes but one for the f32 target and factors of a sum of products, and for
/// every f32 buffer of another kernel whose target's tile rows are shorter than the widest
/// vector, where lane-wise vectors may run past them ([`lanewise::may_run_past_rows`]), so
/// that a vector from any of their elements stays inside the buffer (vector code
/// over a row shorter than a vector reads and writes lanes past the row, and discards them or
/// stores them again); none for other buffers, whose code reads no further than their tiles.
pub fn keep_room(k: &Kernel, buffers: &mut [Buffer]) {
    let boxes: Vec<Option<(&[usize], usize)>> = buffers
        .iter()
        .map(|b| (b.residence == Residence::Buffer).then_some((&b.dims[..], b.elem_bytes)))
        .collect();
    let rooms = RoomRule::new(k).rooms(&boxes);
    for (b, room) in buffers.iter_mut().zip(rooms) {
        b.room = room;
    }
}

/// What decides the room of [`keep_room`] for a kernel's buffers, found once per kernel:
/// buffer sizing counts the room too, at every tiling it tries, so that the tiles it finds
/// fit with it.
pub struct RoomRule {
    /// The factors of its sum of products, if it is one.
    product: Option<(usize, usize)>,
    /// Its lane-wise vectors may run past the target's rows.
    past_rows: bool,
}

impl RoomRule {
    pub fn new(k: &Kernel) -> RoomRule {
        let product = blocking::product_factors(k);
        RoomRule {
            product,
            past_rows: product.is_none() && lanewise::may_run_past_rows(k),
        }
    }

    /// The room of each access, given the dimensions and element bytes of each one's LDM
    /// buffer (`None` for an access served directly), in [`accesses`] order.
    pub fn rooms(&self, boxes: &[Option<(&[usize], usize)>]) -> Vec<usize> {
        let target_row = boxes.first().copied().flatten().and_then(|(dims, _)| dims.last());
        let short_rows = self.past_rows && target_row.is_some_and(|&w| w < MAX_F32_LANES);
        boxes
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let operand = short_rows || self.product.is_some_and(|(fa, fb)| [0, fa, fb].contains(&i));
                let f32_buffer = b.is_some_and(|(_, bytes)| bytes == DType::F32.size_bytes());
                match operand && f32_buffer {
                    true => MAX_F32_LANES - 1,
                    false => 0,
                }
            })
            .collect()
    }
}

impl Buffer {
    pub fn elements(&self) -> usize {
        self.dims.iter().product()
    }

    /// Elements one tile's space holds: its elements and its [`Buffer::room`], rounded up to
    /// whole registers when the buffer is shared (the broadcast moves whole registers) and to
    /// [`LDM_BUFFER_ALIGN`] bytes when it is double (so that its second half starts aligned).
    pub fn capacity(&self) -> usize {
        let elements = self.elements() + self.room;
        let unit = match (self.shared, self.double) {
            (Some(_), _) => LDM_BUFFER_ALIGN.max(share::REGISTER_BYTES),
            (None, true) => LDM_BUFFER_ALIGN,
            (None, false) => return elements,
        };
        (elements * self.elem_bytes).next_multiple_of(unit) / self.elem_bytes.max(1)
    }

    /// Tiles' spaces it holds: three when double and posted, two when double, else one.
    pub fn halves(&self) -> usize {
        match (self.double, self.posted) {
            (true, true) => 3,
            (true, false) => 2,
            (false, _) => 1,
        }
    }

    /// LDM bytes it takes, aligned as generated code places it (none when accessed directly).
    pub fn ldm_bytes(&self) -> usize {
        match self.residence {
            Residence::Direct => 0,
            Residence::Buffer => (self.capacity() * self.elem_bytes * self.halves()).next_multiple_of(LDM_BUFFER_ALIGN),
        }
    }
}

/// The schedule of one kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct Schedule {
    /// Loops split over the CPEs (fused, outermost first).
    pub partition: Vec<usize>,
    /// Iterations of the fused partition loops.
    pub partition_points: usize,
    /// Partition points per CPE (the last CPEs may get fewer, or none); with a grid, the
    /// points of one block.
    pub chunk: usize,
    /// Parts of each partition loop for a block partition (see [`partition`]); empty when
    /// CPEs take contiguous chunks of the fused partition loops.
    pub grid: Vec<usize>,
    /// How many values of each loop one CPE walks in one go: the extent, or for partition
    /// loops the chunk (innermost) or 1 (outer ones).
    pub ranges: Vec<usize>,
    /// Tile size of every loop.
    pub tiles: Vec<usize>,
    /// Loops with more than one tile, outermost first.
    pub order: Vec<usize>,
    /// One buffer per access, in [`accesses`] order (the target first).
    pub buffers: Vec<Buffer>,
}

impl Schedule {
    /// LDM bytes of kernel `k` under this schedule: its buffers and [`ldm_overhead`].
    pub fn ldm_bytes(&self, k: &Kernel, target: &Target) -> usize {
        let buffered = self.buffers.iter().filter(|b| b.residence == Residence::Buffer).count();
        let halves = usize::from(self.buffers.first().is_some_and(|b| b.double));
        self.buffers.iter().map(Buffer::ldm_bytes).sum::<usize>() + ldm_overhead(k, buffered + halves, target)
    }

    /// Mean over max work per CPE (1.0 is perfect balance).
    pub fn balance(&self, cpes: usize) -> f64 {
        self.partition_points as f64 / (cpes * self.chunk) as f64
    }

    /// The segments CPE `cpe` walks (see [`partition::segments`]) in a kernel of `extents`.
    pub fn segments(&self, cpe: usize, extents: &[usize]) -> Vec<partition::Segment> {
        partition::segments(
            cpe,
            self.chunk,
            self.partition_points,
            &self.partition,
            &self.grid,
            extents,
        )
    }

    /// Text lines describing the schedule, for the kernel printer.
    pub fn describe(&self, k: &Kernel, p: &Program) -> String {
        let names = |ls: &[usize]| {
            ls.iter()
                .map(|&l| k.loops[l].name.clone())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut s = String::new();
        let grid = match self.grid.is_empty() {
            true => String::new(),
            false => {
                let parts: Vec<String> = self.grid.iter().map(|g| g.to_string()).collect();
                format!(" grid {},", parts.join("x"))
            }
        };
        let _ = writeln!(
            s,
            "  partition [{}] {} points,{grid} {} per CPE",
            names(&self.partition),
            self.partition_points,
            self.chunk
        );
        let tiles: Vec<String> = k
            .loops
            .iter()
            .zip(&self.tiles)
            .map(|(l, t)| format!("{}:{t}", l.name))
            .collect();
        let _ = writeln!(s, "  tiles {}", tiles.join(", "));
        let _ = writeln!(s, "  order [{}]", names(&self.order));
        for (a, b) in accesses(k).iter().zip(&self.buffers) {
            let tensor = crate::loops::quoted_name(&p.tensor(k.operands[a.operand]).name);
            let dims = if b.dims.is_empty() {
                "scalar".to_string()
            } else {
                b.dims.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("x")
            };
            let how = match b.residence {
                Residence::Direct => "direct".to_string(),
                Residence::Buffer => format!(
                    "buffer {dims} at depth {}{}{}{}{}",
                    b.depth,
                    if b.double { ", double" } else { "" },
                    b.shared.map_or(String::new(), |l| format!(", shared {}", l.name())),
                    if b.split { " in slices" } else { "" },
                    if b.posted { ", posted" } else { "" }
                ),
            };
            let _ = writeln!(s, "  ldm {tensor}: {how}");
        }
        s
    }
}

/// The accesses a schedule plans for, in order: the target, then the windows of the value's
/// and the epilogue's loads (positions of gathers included, [`crate::loops::Stmt::windows`]),
/// then the kept reduced value if the kernel keeps it. A load is served by the one window
/// that holds it ([`window_of`]).
pub fn accesses(k: &Kernel) -> Vec<Cow<'_, Access>> {
    let mut v = vec![Cow::Borrowed(&k.stmt.target)];
    v.extend(k.stmt.windows());
    v.extend(k.stmt.keep.as_ref().map(Cow::Borrowed));
    v
}

/// The position in `all` ([`accesses`]) of the window holding load `a`, and `a`'s
/// displacement in it.
pub fn window_of(all: &[Cow<'_, Access>], a: &Access) -> Option<(usize, Vec<usize>)> {
    all.iter()
        .enumerate()
        .find_map(|(i, w)| w.displacement(a).map(|d| (i, d)))
}

/// Index in [`accesses`] of the kept reduced value, if the kernel keeps it.
pub fn keep_index(k: &Kernel) -> Option<usize> {
    k.stmt.keep.as_ref().map(|_| 1 + k.stmt.windows().len())
}

/// Whether access `i` of [`accesses`] is one the kernel writes: the target or the kept value.
pub fn is_written(k: &Kernel, i: usize) -> bool {
    i == 0 || keep_index(k) == Some(i)
}

/// Whether buffer `b` of access `i` may be double-buffered with tiles `tiles` under the tile
/// loop `order`: a read buffer inside a tile loop, or the target as [`target_may_double`] says.
pub fn may_double(k: &Kernel, i: usize, b: &Buffer, tiles: &[usize], order: &[usize]) -> bool {
    match i {
        0 => target_may_double(k, b, tiles, order),
        _ => !is_written(k, i) && b.depth > 0,
    }
}

/// Whether the target's buffer `b` may be double-buffered with tiles `tiles` under the tile
/// loop `order`, so that a tile's put overlaps the next tile's compute: it lies inside a tile
/// loop, the kernel writes every element of each box ([`Kernel::target_is_dense`]), and every loop around its transfers is one of the
/// target's subscripts. Then no box is visited twice, and no put can be in flight while a
/// later tile reads or writes the same elements in main memory.
pub fn target_may_double(k: &Kernel, b: &Buffer, tiles: &[usize], order: &[usize]) -> bool {
    let used = |l: usize| {
        k.stmt
            .target
            .index
            .iter()
            .any(|x| matches!(x, Index::Affine(x) if x.terms.iter().any(|t| t.0 == l)))
    };
    b.residence == Residence::Buffer
        && b.depth > 0
        && k.target_is_dense(tiles)
        && order[..b.depth.min(order.len())].iter().all(|&l| used(l))
}

/// Schedules every kernel of the program for `target`.
pub fn schedule_program(p: &mut Program, target: &Target) -> Result<(), ScheduleError> {
    for i in 0..p.kernels.len() {
        let s = schedule_kernel(&p.kernels[i], p, target)?;
        p.kernels[i].schedule = Some(s);
    }
    Ok(())
}

/// Runs the passes on one kernel, for every partition of [`partition::candidates`], and
/// keeps the schedule with the shortest [`estimate`] (the first such) with collective
/// broadcasts: posting a buffer ([`share::post_buffers`]) does not rank partitions (see
/// [`share`]), but the chosen partition's tiles are then sought again with it
/// ([`retiled_for_posting`]).
pub fn schedule_kernel(k: &Kernel, p: &Program, target: &Target) -> Result<Schedule, ScheduleError> {
    schedule_among(k, p, partition::candidates(k, target), target)
}

/// [`schedule_kernel`] among the `candidates` partitions only (the first of which is tried
/// first).
pub fn schedule_among(
    k: &Kernel,
    p: &Program,
    candidates: Vec<partition::Partition>,
    target: &Target,
) -> Result<Schedule, ScheduleError> {
    let fail = |reason: String| ScheduleError {
        kernel: k.name.clone(),
        reason,
    };
    let mut best: Option<(f64, Schedule)> = None;
    let mut first_error = None;
    for part in candidates {
        let s = match split_by(k, p, &part, target) {
            Ok(s) => s,
            Err(e) => {
                first_error.get_or_insert(e);
                continue;
            }
        };
        let mut collective = s.clone();
        collective.buffers.iter_mut().for_each(|b| b.posted = false);
        let cycles = estimate::estimate(k, p, &collective, target).cycles();
        if best.as_ref().is_none_or(|b| cycles < b.0) {
            best = Some((cycles, s));
        }
    }
    let Some((_, s)) = best else {
        return Err(fail(first_error.unwrap_or_else(|| "no partition of its loops".into())));
    };
    let s = retiled_for_posting(k, p, s, target);
    verify_schedule(k, p, &s, target).map_err(fail)?;
    Ok(s)
}

/// Schedule `s` of `k`, or, on a target that posts broadcasts ([`share::posts`]), the one
/// its partition gives with tiles found again by [`sizing::descend`] from its own, with
/// every tiling planned as it would run, posted where that is estimated faster
/// ([`planned`]), when that schedule is estimated faster. Partitions and their first tiles
/// are chosen with collective broadcasts (see [`share`]); with its partition chosen, a
/// kernel whose shared boxes could travel a tile ahead takes the tiles that let them (on
/// light ResNet-50, SW26010-Pro: its 1x1 convolutions in more tiles of output rows, posted
/// across the mesh; 8.708 -> 8.455 ms).
fn retiled_for_posting(k: &Kernel, p: &Program, s: Schedule, target: &Target) -> Schedule {
    if !share::posts(target) {
        return s;
    }
    let part = partition::Partition {
        loops: s.partition.clone(),
        points: s.partition_points,
        chunk: s.chunk,
        grid: s.grid.clone(),
    };
    let tiles = sizing::descend(k, p, &part, s.tiles.clone(), target, planned);
    let posted = planned(k, p, &part, tiles, target);
    match estimate::estimate(k, p, &posted, target).cycles() < estimate::estimate(k, p, &s, target).cycles() {
        true => posted,
        false => s,
    }
}

/// The schedule of `k` split by `part`: tiles sized by [`sizing::size_buffers`] and then
/// [`sizing::improve`], ordered and placed by [`planned`]. An error says why no tiles fit.
pub fn split_by(k: &Kernel, p: &Program, part: &partition::Partition, target: &Target) -> Result<Schedule, String> {
    let sized = sizing::size_buffers(k, p, part, target)?;
    let tiles = sizing::improve(k, p, part, sized.tiles, target);
    Ok(planned(k, p, part, tiles, target))
}

/// The schedule of `k` split by `part` with `tiles`: the best order of its tile loops, and its
/// buffers placed and shared along the mesh where they can be ([`share`]), with collective
/// broadcasts only.
pub fn shared(k: &Kernel, p: &Program, part: &partition::Partition, tiles: Vec<usize>, target: &Target) -> Schedule {
    let ranges: Vec<usize> = (0..k.loops.len()).map(|l| part.range(k, l)).collect();
    let order = reorder::best_order(k, p, &tiles, &ranges).order;
    let mut s = Schedule {
        ranges,
        partition: part.loops.clone(),
        partition_points: part.points,
        chunk: part.chunk,
        grid: part.grid.clone(),
        tiles,
        order,
        buffers: Vec::new(),
    };
    s.buffers = dma::plan_buffers(k, p, &s, target);
    share::share_buffers(k, p, &mut s, target);
    s
}

/// The schedule of `k` split by `part` with `tiles`: [`shared`]'s, with its shared buffers
/// posted where that fits and the estimate finds it faster ([`share::post_buffers`]).
pub fn planned(k: &Kernel, p: &Program, part: &partition::Partition, tiles: Vec<usize>, target: &Target) -> Schedule {
    let mut s = shared(k, p, part, tiles, target);
    share::post_buffers(k, p, &mut s, target);
    s
}

/// Checks a schedule against its kernel and target: the partition splits parallel loops into
/// the stated chunks, tiles fit their ranges, the order holds exactly the loops with several
/// tiles, every buffer holds the span of its access over a tile and is refilled inside every
/// tile loop it depends on, only read buffers inside a tile loop are double-buffered, and
/// everything fits the LDM. Schedules written by hand or parsed
/// from text go through the same check.
pub fn verify_schedule(k: &Kernel, p: &Program, s: &Schedule, target: &Target) -> Result<(), String> {
    let n = k.loops.len();
    let distinct = s
        .partition
        .iter()
        .enumerate()
        .all(|(i, l)| !s.partition[..i].contains(l));
    if !distinct
        || s.partition
            .iter()
            .any(|&l| l >= n || k.loops[l].kind != crate::loops::LoopKind::Parallel)
    {
        return Err("partition loops must be distinct parallel loops of the kernel".into());
    }
    let points: usize = s.partition.iter().map(|&l| k.loops[l].extent).product();
    let extents: Vec<usize> = s.partition.iter().map(|&l| k.loops[l].extent).collect();
    let chunk = match s.grid.is_empty() {
        true => points.div_ceil(target.cpes),
        false => {
            let blocks = s.grid.iter().try_fold(1usize, |a, &g| a.checked_mul(g));
            if s.grid.len() != s.partition.len()
                || blocks.is_none_or(|b| b > target.cpes)
                || !partition::covers(&s.grid, &extents)
            {
                return Err(format!(
                    "grid {:?} must give each partition loop parts that are none empty, in at most {} blocks",
                    s.grid, target.cpes
                ));
            }
            partition::block_sizes(&s.grid, &extents).iter().product()
        }
    };
    if points != s.partition_points || s.chunk != chunk {
        return Err(format!(
            "partition of {points} points in chunks of {chunk} does not match the stated {} in chunks of {}",
            s.partition_points, s.chunk
        ));
    }
    let ranges_ok = s.ranges.len() == n
        && (0..n).all(|l| s.ranges[l] == partition::range(&s.partition, &s.grid, s.chunk, l, k.loops[l].extent));
    if !ranges_ok {
        return Err("every loop's range must be what the partition gives it".into());
    }
    if s.tiles.len() != n || s.ranges.len() != n || (0..n).any(|l| s.tiles[l] == 0 || s.tiles[l] > s.ranges[l]) {
        return Err("every loop needs a tile between 1 and its range".into());
    }
    let mut expected: Vec<usize> = (0..n).filter(|&l| s.ranges[l] > s.tiles[l]).collect();
    let mut order = s.order.clone();
    expected.sort_unstable();
    order.sort_unstable();
    if order != expected {
        return Err("the order must hold exactly the loops with more than one tile".into());
    }
    let all = accesses(k);
    if s.buffers.len() != all.len() {
        return Err(format!("{} buffers for {} accesses", s.buffers.len(), all.len()));
    }
    // A prologue's main access, and the windows its parameters are read from.
    let prologue = prologue::prologue(k).map(|pr| (pr.main_window(&all), pr.parameter_windows(&all)));
    for (i, (a, b)) in all.iter().zip(&s.buffers).enumerate() {
        let tensor = &p.tensor(k.operands[a.operand]).name;
        if b.double && b.residence == Residence::Buffer && !may_double(k, i, b, &s.tiles, &s.order) {
            return Err(format!(
                "buffer of '{tensor}' is double-buffered, which only a read buffer inside a tile loop, \
                 or a target whose boxes are written whole and never revisited, can be"
            ));
        }
        let Some(span) = sizing::box_dims(k, p, i, a, &s.tiles) else {
            if b.residence != Residence::Direct {
                return Err(format!("gathered access to '{tensor}' must be direct"));
            }
            continue;
        };
        if b.residence == Residence::Direct {
            continue;
        }
        if b.dims.len() != span.len() || b.dims.iter().zip(&span).any(|(d, s)| d < s) {
            return Err(format!(
                "buffer of '{tensor}' ({:?}) is smaller than its tile span {span:?}",
                b.dims
            ));
        }
        if let Some(line) = b.shared.filter(|&l| !share::may_share(k, s, target, i, l)) {
            return Err(format!(
                "buffer of '{tensor}' cannot be shared {}: every CPE that receives it must need the same tiles",
                line.name()
            ));
        }
        if b.split && share::split_dim(k, s, i).is_none() {
            return Err(format!(
                "buffer of '{tensor}' cannot be fetched in slices: only a guarded read's or a prologue's main buffer shared along rows or columns, or a buffer shared across the mesh, can, whose outermost dimension longer than one is not its last and holds two units of slices"
            ));
        }
        if b.posted && !share::may_post(s, target, i) {
            return Err(format!(
                "buffer of '{tensor}' cannot be posted: only a shared double buffer can, on a target whose CPEs broadcast by remote LDM access, along lines that no other buffer shares at every tile"
            ));
        }
        if b.posted && prologue.is_some() {
            return Err(format!(
                "buffer of '{tensor}' cannot be posted: the kernel's prologue needs the tile's parameters before its main box is shared"
            ));
        }
        // A prologue rewrites each main box as it arrives, with the parameters' boxes of the
        // same tile, which must be in LDM by then.
        if let Some((Some(main), params)) = &prologue {
            if params.contains(&i) && b.depth > s.buffers[*main].depth {
                return Err(format!(
                    "buffer of '{tensor}' at depth {} must be filled no deeper than the prologue's main buffer (depth {})",
                    b.depth, s.buffers[*main].depth
                ));
            }
        }
        let needed = dma::depth(a, &s.order);
        if b.depth < needed || b.depth > s.order.len() {
            return Err(format!(
                "buffer of '{tensor}' at depth {} must be refilled at depth {needed}",
                b.depth
            ));
        }
    }
    if let Some(i) = keep_index(k) {
        if s.buffers[i].residence != s.buffers[0].residence {
            return Err("the kept value must be placed as the target is: both buffered, or both direct".into());
        }
    }
    let budget = target.ldm_budget();
    if s.ldm_bytes(k, target) > budget {
        return Err(format!(
            "needs {} LDM bytes, {budget} available",
            s.ldm_bytes(k, target)
        ));
    }
    Ok(())
}
