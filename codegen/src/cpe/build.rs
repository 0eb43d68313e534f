//! A scheduled kernel as a CPE program.
//!
//! The program walks the schedule exactly as the loop-IR executor does (`exec::walk`):
//! ```text
//! for each segment of this CPE's chunk of partition points (with a grid: its one block):
//!   fill buffers placed at depth 0
//!   for t0 in tiles(order[0]):            # tile loops, outermost first
//!     fill buffers placed at depth 1      # gets wait at once, or were prefetched
//!     ...
//!       compute every point of the tile on LDM buffers (and direct accesses)
//!     write the target back if it is placed at depth 1 (and the kept value, when complete)
//!   write the target back if it is placed at depth 0
//! ```
//! LDM buffers hold packed boxes (row-major over the box's actual extents), so a load of
//! access `a` at subscripts `s` reads `a[((s0 - a_start[0]) * a_extent[1] + ...)]`.
//!
//! Every stretch of code is charged with the operations of the C that [`super::print`]
//! writes for it (see [`crate::cost`]).

use std::borrow::Cow;

use swflow_emulator::timing::Ops;
use swflow_frontend::ir::{strides, BinaryOp, DType, ReduceKind};
use swflow_scheduler::loops::{Access, Affine, Expr, Index, Kernel, LoopKind, Program, Scalar, TensorId};
use swflow_scheduler::schedule::partition;
use swflow_scheduler::schedule::prologue::Prologue;
use swflow_scheduler::schedule::share::{
    segment_lengths, slice_count, split_dim, split_unit, spread, MeshLine, MESH_SIDE, REGISTER_BYTES,
};
use swflow_scheduler::schedule::{accesses, is_written, keep_index, window_of, Residence, Schedule};
use swflow_scheduler::target::Target;

use super::{
    Array, ArrayDecl, BoxDma, BoxPad, Buf, BufDecl, Cond, Field, FieldDecl, Func, Half, Int, Local, Place, Stmt, VReg,
    Value, Var, VarDecl,
};
use crate::cost::{self, branch, int, LOOP};
use crate::names::{comment, Names};
use crate::CodegenError;
use post::PostVars;
use vector::{VBROADCAST, VSTORE};

mod indices;
mod lanewise;
mod post;
mod prologue;
mod vector;

/// Vectors a dense reduction target's fill stores per iteration.
const FILL_VECTORS: usize = 4;

/// Fixed identifiers of a kernel body that loop names must not take.
const BODY_LOCALS: &[&str] = &[
    "ldm", "para", "arg", "cpe", "first", "last", "f", "seg_lo", "seg_len", "e",
];

/// The parameter struct of a kernel: one field per tensor, in operand order (the target
/// first); slots naming one tensor share it.
pub struct Fields {
    /// The tensor of each field.
    pub tensors: Vec<TensorId>,
    pub decls: Vec<FieldDecl>,
    /// The field of each operand slot.
    pub of_operand: Vec<Field>,
}

impl Fields {
    pub fn of(p: &Program, k: &Kernel) -> Fields {
        let mut tensors = k.operands.clone();
        let mut seen = std::collections::BTreeSet::new();
        tensors.retain(|id| seen.insert(*id));
        let mut names = Names::default();
        let decls = tensors
            .iter()
            .map(|&id| FieldDecl {
                name: names.fresh(&p.tensor(id).name, "t_"),
                dtype: p.tensor(id).ty.dtype,
            })
            .collect();
        let of_operand = k
            .operands
            .iter()
            .map(|id| Field(tensors.iter().position(|t| t == id).expect("every operand has a field") as u32))
            .collect();
        Fields {
            tensors,
            decls,
            of_operand,
        }
    }
}

/// Variables of one access's LDM buffer.
struct BufVars {
    buf: Buf,
    start: Array,
    /// When some subscript has a constant term: per dimension, the box start less that term,
    /// set once per tile, so the compute's LDM index adds no constant per point.
    origin: Option<Array>,
    extent: Array,
    shape: Array,
    issued: Var,
    /// The current half, for double buffers.
    half: Option<Var>,
    /// For a double-buffered target: the reply counter and issued count of its half 1. Half 0
    /// uses the access's own; each half's put is waited for only before the half is written
    /// again.
    second: Option<(usize, Var)>,
    /// For a tensor stored as records: the one-dimensional box of its next record.
    record: Option<RecordVars>,
    /// For a streamed tensor: the arena's state (`buf` is then the arena).
    stream: Option<StreamVars>,
    /// For a split shared buffer: this CPE's slice of each box.
    slice: Option<SliceVars>,
    /// For a posted shared buffer: its broadcasts' counters and the tiles ahead.
    post: Option<PostVars>,
}

/// The slice of a split shared buffer's box that this CPE fetches and finishes
/// (`swflow_scheduler::schedule::share::split_dim`): some of the box's indices along
/// dimension `dim`, in whole units of `unit` indices, one of `share::slice_count` slices.
/// Then the line broadcasts the slices in rounds, one per CPE of it, each giving the range
/// `lo..hi` of that CPE's slice; a spread buffer's (`share::spread`) go along the rows and
/// then down the columns.
struct SliceVars {
    dim: usize,
    unit: i64,
    spread: bool,
    /// The slice as a box (per half, for a double buffer).
    start: Array,
    extent: Array,
    round: Var,
    lo: Var,
    hi: Var,
}

/// The state of a streamed tensor's arena in its producer (which pushes layers) or its
/// reader (which pops them); see `swflow_scheduler::tape::stream` for the stack's layout.
struct StreamVars {
    push: bool,
    /// The stream's index (the program's first stream's producer starts the stacks empty).
    index: usize,
    /// Elements of one arena half.
    half: i64,
    /// Elements of one CPE's share of the tape.
    share: i64,
    values: Field,
    stack: Field,
    /// Stack entries per CPE, and the entry of layer 0.
    slots: i64,
    layer_slot: i64,
    /// Every entry lies in `0..bound` (checked as it is read).
    bound: usize,
    /// The values as one dimension, and the layer's place and length in them.
    shape: Array,
    layer: Array,
    layer_n: Array,
    /// The half being filled or read, and the place of the next box in it.
    h: Var,
    pos: Var,
    /// Layers outstanding on this CPE's stack, and the end of its tape.
    layers: Var,
    top: Var,
    /// A reader's first layer, and the half, length and place in the tape of the layer it
    /// fetches next (the length and place start at zero, which no pop reads before a fetch
    /// sets them, so that C compilers see them set on every path).
    base: Option<Var>,
    next_h: Option<Var>,
    next_n: Option<Var>,
    next_top: Option<Var>,
}

/// The record transfers of an access to a tensor stored as records: the storage as one
/// dimension, the record's start and length, and the start of this CPE's next record.
struct RecordVars {
    shape: Array,
    start: Array,
    extent: Array,
    next: Var,
    /// Elements of one CPE's share: CPE `c`'s records start at `c * per_cpe`.
    per_cpe: i64,
}

struct Gen<'a> {
    p: &'a Program,
    k: &'a Kernel,
    s: &'a Schedule,
    all: Vec<Cow<'a, Access>>,
    field: Vec<Field>,
    /// Per access: its buffer's variables when it is buffered.
    bufs: Vec<Option<BufVars>>,
    /// Reply counter index per access (buffered ones); counter 0 is the parameter struct's.
    reply: Vec<usize>,
    /// Per loop: the point variable (and its name), the tile origin and the tile extent.
    point: Vec<Var>,
    loop_names: Vec<String>,
    origin: Vec<Var>,
    extent: Vec<Var>,
    first: Var,
    last: Var,
    f: Var,
    seg_lo: Option<Var>,
    seg_len: Var,
    e: Option<Var>,
    /// The vector register a dense f32 reduction target's fill stores, and its lanes, when
    /// the target's buffer holds a block of [`FILL_VECTORS`] vectors.
    fill: Option<(VReg, usize)>,
    /// Position in `order` of each loop, if it has several tiles.
    pos: Vec<Option<usize>>,
    /// Per access: its transfers carry the gradient tape.
    tape: Vec<bool>,
    /// Per access: the mesh line its buffer is shared along (fetched by the line's owner and
    /// broadcast to the others), if any.
    shared: Vec<Option<MeshLine>>,
    /// The code moves a broadcast's registers itself (register communication), rather than a
    /// remote LDM access moving the block.
    by_registers: bool,
    /// A reader of a streamed tensor walks the boxes of it in reverse: the counters of its
    /// backward loops, the segments' and, per loop around the box, its tiles'.
    seg_r: Option<Var>,
    tile_r: Vec<Option<Var>>,
    /// The compute nest's vector code, when it has one: register-blocked sums of products,
    /// or else lane-wise maps and folds.
    vector: Option<vector::Vars>,
    lanewise: Option<lanewise::Vars>,
    /// The epilogue's lane-wise vector code, when it has one.
    epilogue: Option<lanewise::Vars>,
    /// Without vector code, the scalar nest's indices walked through its loops.
    indices: Option<indices::Indices>,
    /// While set, [`Self::load_ref`] gives the places [`Self::indices`] keeps at their
    /// variables (set only while the scalar nest's statement is built).
    kept_active: std::cell::Cell<bool>,
    /// The prologue of one factor of the product ([`prologue`]), applied to the box of its
    /// main access (this index) in place: every other evaluation of the factor loads it.
    prologue: Option<(Prologue<'a>, usize)>,
    prologue_vars: Option<prologue::Vars>,
    /// Per loop of a grid partition: the variables holding the start and the length of this
    /// CPE's block along it.
    block: Vec<Option<(Var, Var)>>,
    /// For a double-buffered target whose puts are staggered (see [`stagger_loop`]): whether
    /// the box of the tile before is still to be put.
    put_pending: Option<Var>,
}

/// The CPE program of scheduled kernel `k` whose parameter struct has `fields`, for `target`'s
/// CPEs: vector code for its f32 lanes (none with one lane), and broadcasts of shared buffers
/// by its mechanism.
pub fn build(p: &Program, k: &Kernel, fields: Fields, target: &Target) -> Result<Func, CodegenError> {
    let lanes = target.f32_vector_lanes;
    let s = k.schedule.as_ref().ok_or_else(|| CodegenError::Internal {
        kernel: k.name.clone(),
        reason: "kernel is not scheduled".into(),
    })?;
    let all = accesses(k);
    for a in &all {
        if p.tensor(k.operands[a.operand]).ty.shape.len() > 16 {
            return Err(CodegenError::Unsupported {
                kernel: k.name.clone(),
                reason: "tensors of more than 16 dimensions".into(),
            });
        }
    }
    let mut f = Func {
        vars: Vec::new(),
        arrays: Vec::new(),
        decl_lines: Vec::new(),
        bufs: Vec::new(),
        fields: fields.decls,
        replies: 1,
        lanes,
        vregs: Vec::new(),
        body: Vec::new(),
    };
    let mut scope = Names::default();
    for l in BODY_LOCALS {
        scope.claim(l);
    }
    let var = |f: &mut Func, name: String, init: Option<i64>| {
        f.vars.push(VarDecl { name, init });
        Var(f.vars.len() as u32 - 1)
    };
    let first = var(&mut f, "first".into(), None);
    let last = var(&mut f, "last".into(), None);
    let fv = var(&mut f, "f".into(), None);
    let seg_lo = (!s.partition.is_empty()).then(|| var(&mut f, "seg_lo".into(), None));
    let seg_len = var(&mut f, "seg_len".into(), None);
    let mut line: Vec<Local> = [first, last, fv]
        .into_iter()
        .chain(seg_lo)
        .chain([seg_len])
        .map(Local::Var)
        .collect();
    // A grid's block has no chunk to walk: its start and length along each partition loop
    // take the chunk's variables' place (`f` stays: the parameter struct's fetch counts with
    // it).
    let mut block = vec![None; k.loops.len()];
    if !s.grid.is_empty() {
        line = vec![Local::Var(fv)];
        for &l in &s.partition {
            let lo = var(&mut f, scope.fresh(&format!("{}_lo", k.loops[l].name), "l_"), None);
            let len = var(&mut f, scope.fresh(&format!("{}_len", k.loops[l].name), "l_"), None);
            line.extend([Local::Var(lo), Local::Var(len)]);
            block[l] = Some((lo, len));
        }
    }
    f.decl_lines.push(std::mem::take(&mut line));
    let (mut point, mut origin, mut extent) = (Vec::new(), Vec::new(), Vec::new());
    let mut loop_names = Vec::new();
    for l in &k.loops {
        let name = scope.fresh(&l.name, "l_");
        loop_names.push(name.clone());
        let v = var(&mut f, name.clone(), None);
        let o = var(&mut f, format!("{name}_0"), None);
        let n = var(&mut f, format!("{name}_n"), None);
        f.decl_lines.push(vec![Local::Var(v), Local::Var(o), Local::Var(n)]);
        point.push(v);
        origin.push(o);
        extent.push(n);
    }
    let index = p.kernels.iter().position(|x| x.name == k.name);
    let tape: Vec<bool> = (0..all.len())
        .map(|i| match (&p.tape, index) {
            (Some(plan), Some(at)) => plan.carries(p, at, i),
            _ => false,
        })
        .collect();
    let records: Vec<Option<(i64, i64)>> = (0..all.len())
        .map(|i| match (&p.tape, index) {
            (Some(plan), Some(at)) => plan.record_of(p, at, i).map(|r| (r.per_cpe as i64, r.elements as i64)),
            _ => None,
        })
        .collect();
    let streams: Vec<Option<&swflow_scheduler::tape::Stream>> = (0..all.len())
        .map(|i| match (&p.tape, index) {
            (Some(plan), Some(at)) => plan.stream_of(p, at, i),
            _ => None,
        })
        .collect();
    let stream_tape = p.tape.as_ref().and_then(|t| t.stream_tape.as_ref());
    // Boxes only: records and streams keep their own transfers.
    let shared: Vec<Option<MeshLine>> = (0..all.len())
        .map(|i| {
            s.buffers[i]
                .shared
                .filter(|_| records[i].is_none() && streams[i].is_none())
        })
        .collect();
    let operand_field = |t: TensorId| {
        let at = k
            .operands
            .iter()
            .position(|&x| x == t)
            .expect("a streaming kernel has the tape's tensors");
        fields.of_operand[at]
    };
    let mut buf_scope = Names::default();
    let mut reply = vec![0; all.len()];
    let mut bufs = Vec::new();
    let mut fill_loop = false;
    for (i, a) in all.iter().enumerate() {
        let b = &s.buffers[i];
        if b.residence != Residence::Buffer {
            bufs.push(None);
            continue;
        }
        let info = p.tensor(k.operands[a.operand]);
        let name = buf_scope.fresh(&info.name, "t_");
        let dims: Vec<String> = b.dims.iter().map(|d| d.to_string()).collect();
        let tile = if dims.is_empty() {
            "scalar".into()
        } else {
            dims.join("x")
        };
        let double = match b.halves() {
            3 => ", three halves (posted a tile ahead)",
            2 => ", double-buffered",
            _ => "",
        };
        f.bufs.push(match streams[i] {
            Some(x) => BufDecl {
                name: buf_scope.fresh(&format!("{}_arena", info.name), "t_"),
                dtype: info.ty.dtype,
                elements: x.half,
                halves: 2,
                note: format!(
                    "'{}': tape arena, two halves of {} elements (tiles up to {tile})",
                    comment(&info.name),
                    x.half
                ),
            },
            None => BufDecl {
                name: name.clone(),
                dtype: info.ty.dtype,
                elements: b.capacity(),
                halves: b.halves(),
                note: format!(
                    "'{}': tile {tile}{double}{}",
                    comment(&info.name),
                    shared[i].map_or(String::new(), |l| format!(", shared along the mesh's {}", l.name()))
                ),
            },
        });
        let buf = Buf(f.bufs.len() as u32 - 1);
        reply[i] = f.replies;
        f.replies += 1;
        let rank = info.ty.shape.len().max(1);
        let box_dims = if b.double { vec![b.halves(), rank] } else { vec![rank] };
        let array = |f: &mut Func, name: String, dims: Vec<usize>, values: Option<Vec<i64>>| {
            f.arrays.push(ArrayDecl { name, dims, values });
            Array(f.arrays.len() as u32 - 1)
        };
        let start = array(&mut f, format!("{name}_start"), box_dims.clone(), None);
        let offsets = a
            .index
            .iter()
            .any(|x| matches!(x, Index::Affine(x) if x.offset != 0 && !x.terms.is_empty()));
        let origin = offsets.then(|| array(&mut f, format!("{name}_org"), box_dims.clone(), None));
        let ext = array(&mut f, format!("{name}_extent"), box_dims, None);
        let issued = var(&mut f, format!("{name}_issued"), Some(0));
        f.decl_lines.push(
            [Local::Array(start)]
                .into_iter()
                .chain(origin.map(Local::Array))
                .chain([Local::Array(ext), Local::Var(issued)])
                .collect(),
        );
        let half = b.double.then(|| {
            let h = var(&mut f, format!("{name}_h"), Some(0));
            f.decl_lines.push(vec![Local::Var(h)]);
            h
        });
        let second = (i == 0 && b.double).then(|| {
            let issued = var(&mut f, format!("{name}_issued1"), Some(0));
            f.decl_lines.push(vec![Local::Var(issued)]);
            f.replies += 1;
            (f.replies - 1, issued)
        });
        let shape: Vec<i64> = if info.ty.shape.is_empty() {
            vec![1]
        } else {
            info.ty.shape.iter().map(|&d| d as i64).collect()
        };
        // A tensor stored as records moves only whole records: its storage is one dimension.
        // A streamed tensor moves only whole layers of the tape.
        let tape_elements = stream_tape.map(|t| p.tensor(t.values).ty.numel() as i64);
        let shape = match (records[i], streams[i], tape_elements) {
            (_, Some(_), Some(total)) => array(&mut f, format!("{name}_tape"), vec![1], Some(vec![total])),
            (Some((_, elements)), _, _) => array(&mut f, format!("{name}_records"), vec![1], Some(vec![elements])),
            _ => array(&mut f, format!("{name}_shape"), vec![rank], Some(shape)),
        };
        f.decl_lines.push(vec![Local::Array(shape)]);
        let record = records[i].map(|(per_cpe, _)| {
            let start = array(&mut f, format!("{name}_rec"), vec![1], None);
            let extent = array(&mut f, format!("{name}_rec_n"), vec![1], None);
            let next = var(&mut f, format!("{name}_next"), None);
            f.decl_lines
                .push(vec![Local::Array(start), Local::Array(extent), Local::Var(next)]);
            RecordVars {
                shape,
                start,
                extent,
                next,
                per_cpe,
            }
        });
        let stream = streams[i].map(|x| {
            let tape = stream_tape.expect("a program with streams has a streamed tape");
            let total = p.tensor(tape.values).ty.numel() as i64;
            let layer = array(&mut f, format!("{name}_layer"), vec![1], None);
            let layer_n = array(&mut f, format!("{name}_layer_n"), vec![1], None);
            let push = is_written(k, i);
            let mut vars = |suffix: &str| var(&mut f, format!("{name}_{suffix}"), None);
            let (h, pos, layers, top) = (vars("h"), vars("pos"), vars("layers"), vars("top"));
            let reader = |vars: &mut dyn FnMut(&str) -> Var, suffix: &str| (!push).then(|| vars(suffix));
            let base = reader(&mut vars, "base");
            let next_h = reader(&mut vars, "next_h");
            let mut zeroed = |suffix: &str| (!push).then(|| var(&mut f, format!("{name}_{suffix}"), Some(0)));
            let (next_n, next_top) = (zeroed("next_n"), zeroed("next_top"));
            let mut line = vec![Local::Array(layer), Local::Array(layer_n)];
            line.extend(
                [h, pos, layers, top]
                    .into_iter()
                    .chain(base)
                    .chain(next_h)
                    .chain(next_n)
                    .chain(next_top)
                    .map(Local::Var),
            );
            f.decl_lines.push(line);
            StreamVars {
                push,
                index: x.index,
                half: x.half as i64,
                share: tape.share as i64,
                values: operand_field(tape.values),
                stack: operand_field(tape.stack),
                slots: tape.slots as i64,
                layer_slot: tape.layer_slot(0) as i64,
                bound: total as usize + 1,
                shape,
                layer,
                layer_n,
                h,
                pos,
                layers,
                top,
                base,
                next_h,
                next_n,
                next_top,
            }
        });
        let slice = split_dim(k, s, i).filter(|_| shared[i].is_some()).map(|dim| {
            let unit = split_unit(k, p, s, i, &segment_lengths(k, s, target.cpes))
                .expect("a split buffer has a slice unit") as i64;
            let dims = if b.double { vec![b.halves(), rank] } else { vec![rank] };
            let start = array(&mut f, format!("{name}_slice"), dims.clone(), None);
            let extent = array(&mut f, format!("{name}_slice_n"), dims, None);
            let round = var(&mut f, format!("{name}_round"), None);
            let lo = var(&mut f, format!("{name}_lo"), None);
            let hi = var(&mut f, format!("{name}_hi"), None);
            // A posted buffer's slices go out at once, in no rounds.
            let rounds = (b.halves() != 3).then_some(round);
            f.decl_lines.push(
                [Local::Array(start), Local::Array(extent)]
                    .into_iter()
                    .chain(rounds.into_iter().chain([lo, hi]).map(Local::Var))
                    .collect(),
            );
            SliceVars {
                dim,
                unit,
                spread: spread(k, s, i),
                start,
                extent,
                round,
                lo,
                hi,
            }
        });
        fill_loop |= i == 0 && k.stmt.reduce.is_some() && k.target_is_dense(&s.tiles);
        bufs.push(Some(BufVars {
            buf,
            start,
            origin,
            extent: ext,
            shape,
            issued,
            half,
            second,
            record,
            stream,
            slice,
            post: None,
        }));
    }
    // A reader of a streamed tensor walks the boxes of it backwards: its segments (a grid's
    // block is one), and the tile loops around the box.
    let reversed = (0..all.len())
        .filter(|&i| streams[i].is_some() && !is_written(k, i))
        .map(|i| s.buffers[i].depth)
        .max();
    let seg_r = reversed
        .filter(|_| !s.partition.is_empty() && s.grid.is_empty())
        .map(|_| var(&mut f, "seg_r".into(), None));
    let mut tile_r = vec![None; k.loops.len()];
    for &l in &s.order[..reversed.unwrap_or(0)] {
        tile_r[l] = Some(var(&mut f, format!("{}_r", loop_names[l]), None));
    }
    let counters: Vec<Local> = seg_r
        .into_iter()
        .chain(tile_r.iter().flatten().copied())
        .map(Local::Var)
        .collect();
    if !counters.is_empty() {
        f.decl_lines.push(counters);
    }
    for (i, v) in bufs.iter_mut().enumerate() {
        let posted = s.buffers[i].posted && s.buffers[i].double;
        if let (Some(v), Some(line)) = (v.as_mut(), shared[i].filter(|_| posted)) {
            v.post = Some(post::declare(&mut f, v, line, chain_of(s, s.buffers[i].depth, &tile_r)));
        }
    }
    let deferred = bufs[0]
        .as_ref()
        .is_some_and(|v| v.second.is_some() && v.record.is_none() && v.stream.is_none())
        && stagger_loop(k, s, s.buffers[0].depth, &tile_r).is_some();
    let put_pending = deferred.then(|| {
        let name = scope.fresh(&format!("{}_pending", f.bufs[0].name), "l_");
        let v = var(&mut f, name, Some(0));
        f.decl_lines.push(vec![Local::Var(v)]);
        v
    });
    let e = fill_loop.then(|| {
        let e = var(&mut f, "e".into(), None);
        f.decl_lines.push(vec![Local::Var(e)]);
        e
    });
    // A fill in vectors, when the target's buffer holds a block of them (and is no tape
    // arena, whose boxes lie side by side).
    let vector_fill = fill_loop
        && lanes > 1
        && streams[0].is_none()
        && matches!(k.stmt.reduce.map(|r| r.init), Some(Scalar::F32(_)))
        && s.buffers[0].elements() >= FILL_VECTORS * lanes;
    let fill = vector_fill.then(|| {
        f.vregs.push(scope.fresh("vx_fill", "v_"));
        (VReg(f.vregs.len() as u32 - 1), lanes)
    });
    let mut pos = vec![None; k.loops.len()];
    for (i, &l) in s.order.iter().enumerate() {
        pos[l] = Some(i);
    }
    let buffered: Vec<bool> = bufs.iter().map(Option::is_some).collect();
    let streamed: Vec<bool> = streams.iter().map(Option::is_some).collect();
    // A prologue rewrites its main access's box, which must be this CPE's own box in LDM;
    // read directly from main memory, the factor is evaluated where it is read.
    let found = swflow_scheduler::schedule::prologue::prologue(k);
    let lanewise_allowed = found.is_none();
    let prologue = match found {
        None => None,
        Some(pr) => {
            let main = pr.main_window(&all).expect("the main access has a window");
            let in_ldm = |i: usize| buffered[i] && records[i].is_none() && streams[i].is_none();
            let f32 = p.tensor(k.operands[pr.main.operand]).ty.dtype == DType::F32;
            match (
                buffered[main],
                pr.parameter_windows(&all).into_iter().all(in_ldm) && in_ldm(main) && f32,
            ) {
                // Read directly, the factor is evaluated where the products read it.
                (false, _) => None,
                (true, true) => Some((pr, main)),
                (true, false) => {
                    return Err(CodegenError::Unsupported {
                        kernel: k.name.clone(),
                        reason: "a prologue whose operands are not all f32 boxes of their own in LDM".into(),
                    })
                }
            }
        }
    };
    let vector = vector::plan(p, k, s, target, &buffered, &streamed).map(|plan| {
        let prefix = scope.fresh("vx", "v_");
        vector::Vars::declare(plan, &mut f, &format!("{prefix}_"))
    });
    let lanewise = match vector {
        // Lane-wise vector code would evaluate a prologue at every product.
        Some(_) => None,
        None if !lanewise_allowed => None,
        None => lanewise::plan(p, k, s, lanes, &buffered).map(|plan| {
            let prefix = scope.fresh("vx", "v_");
            lanewise::Vars::declare(plan, &mut f, &format!("{prefix}_"))
        }),
    };
    let epilogue = lanewise::plan_epilogue(p, k, s, lanes, &buffered).map(|plan| {
        let prefix = scope.fresh("vx", "v_");
        lanewise::Vars::declare(plan, &mut f, &format!("{prefix}_"))
    });
    let indices = match (&vector, &lanewise, &prologue) {
        (None, None, None) => {
            let in_ldm: Vec<bool> = (0..all.len()).map(|i| buffered[i] && !streamed[i]).collect();
            let prefix = scope.fresh("ix", "v_");
            indices::plan(k, s, &all, &in_ldm, &mut f, &format!("{prefix}_"))
        }
        _ => None,
    };
    let prologue_vars = match &prologue {
        None => None,
        Some((pr, main)) => {
            let prefix = scope.fresh("pro", "v_");
            let vars = prologue::declare(k, pr, &all, *main, lanes, &mut f, &format!("{prefix}_"));
            Some(vars.ok_or_else(|| CodegenError::Internal {
                kernel: k.name.clone(),
                reason: "the prologue has no box form, or its main access is displaced in its window".into(),
            })?)
        }
    };
    let g = Gen {
        vector,
        lanewise,
        epilogue,
        indices,
        kept_active: std::cell::Cell::new(false),
        prologue,
        prologue_vars,
        block,
        seg_r,
        tile_r,
        tape,
        shared,
        by_registers: target.timing.regcomm_latency_cycles.is_some(),
        p,
        k,
        s,
        all,
        field: fields.of_operand,
        bufs,
        reply,
        point,
        loop_names,
        origin,
        extent,
        first,
        last,
        f: fv,
        seg_lo,
        seg_len,
        e,
        fill,
        pos,
        put_pending,
    };
    f.body = g.body(f.fields.len(), f.replies);
    Ok(f)
}

/// The tile loop, and its number of tiles, inside the tiles at `depth` (those of
/// `order[depth - 1]`) over which the CPEs stagger the transfers of the double buffers placed
/// at `depth`: the next loop of the order, when it is no partition loop (it runs over the
/// whole loop) and both run forwards (`tile_r`: the backward tile counters), in two tiles or
/// more.
///
/// The CPEs of a mesh line that share a buffer walk their tiles in step, and the others
/// mostly do too. A double buffer placed at `depth` moves a box once per tile there (the next
/// box's get, or the put of the box just computed), so the 64 CPEs' transfers would reach the
/// DMA queue together, and the queue, serving transfers in the order they are issued, would
/// hold every get of the loop inside behind them: the boxes shared along a line, which all
/// its CPEs wait for, most of all. CPE `c` issues its transfer at the tile `c mod n` of the
/// `n` tiles of the loop inside instead, so that the queue takes an even share of them at
/// each. On light ResNet-50's 1 x 1 convolution from 64 to 256 channels with its residual
/// sum, whose prefetched residual and puts of results came in bursts between the boxes of the
/// input broadcast across the mesh, SW26010-Pro's modelled time fell by 11 %.
fn stagger_loop(k: &Kernel, s: &Schedule, depth: usize, tile_r: &[Option<Var>]) -> Option<(usize, i64)> {
    let l = *s.order.get(depth)?;
    let outer = *s.order.get(depth.checked_sub(1)?)?;
    let whole = !s.partition.contains(&l);
    let forwards = tile_r[l].is_none() && tile_r[outer].is_none();
    let tiles = k.loops[l].extent.div_ceil(s.tiles[l]) as i64;
    (whole && forwards && tiles >= 2).then_some((l, tiles))
}

/// The tile loops a double buffer filled at `depth` prefetches along, innermost first (see
/// [`Gen::prefetch_chain`]), with `tile_r` the backward tile counters.
fn chain_of(s: &Schedule, depth: usize, tile_r: &[Option<Var>]) -> Vec<usize> {
    let inner = s.order[depth - 1];
    let mut chain = vec![inner];
    if tile_r[inner].is_none() {
        chain.extend(s.order[..depth - 1].iter().rev().take_while(|&&l| tile_r[l].is_none()));
    }
    chain
}

/// This CPE's position along its mesh `line`, a row or a column; across the mesh, its column
/// (`MeshLine::position`).
fn position(line: MeshLine) -> Int {
    let side = Int::Const(MESH_SIDE as i64);
    match line {
        MeshLine::Row | MeshLine::Mesh => Int::Cpe % side,
        MeshLine::Column => Int::Cpe / side,
    }
}

/// Whether this CPE is the owner of its mesh `line` (index 0 of it), which fetches the line's
/// shared buffers.
fn owner(line: MeshLine) -> Cond {
    let side = Int::Const(MESH_SIDE as i64);
    match line {
        MeshLine::Row => Cond::Eq(Int::Cpe % side, Int::Const(0)),
        MeshLine::Column => Cond::Eq(Int::Cpe / side, Int::Const(0)),
        MeshLine::Mesh => Cond::Eq(Int::Cpe, Int::Const(0)),
    }
}

/// The test of [`Gen::at_first_tiles`] on `chain`: a comparison and a branch per loop.
fn first_tiles_test(chain: &[usize]) -> Ops {
    int(chain.len() as u32) + branch(chain.len() as u32)
}

/// Waits for every transfer issued on reply counter `counter` (its index and the variable
/// counting its transfers).
fn wait_on(counter: (usize, Var)) -> Stmt {
    Stmt::Wait {
        reply: counter.0,
        count: Int::Var(counter.1),
    }
}

/// Charges one execution of `ops`, when there is anything to charge.
fn charge_once(out: &mut Vec<Stmt>, ops: Ops) {
    charge(out, ops, Int::Const(1));
}

/// Charges `count` executions of `ops`, when there is anything to charge.
fn charge(out: &mut Vec<Stmt>, ops: Ops, count: Int) {
    if ops != Ops::default() {
        out.push(Stmt::Charge { ops, count });
    }
}

impl Gen<'_> {
    fn dtype(&self, i: usize) -> DType {
        self.p.tensor(self.k.operands[self.all[i].operand]).ty.dtype
    }

    fn shape(&self, i: usize) -> &[usize] {
        &self.p.tensor(self.k.operands[self.all[i].operand]).ty.shape
    }

    fn tensor_name(&self, i: usize) -> &str {
        &self.p.tensor(self.k.operands[self.all[i].operand]).name
    }

    fn field(&self, i: usize) -> Field {
        self.field[self.all[i].operand]
    }

    fn vars(&self, i: usize) -> Option<&BufVars> {
        self.bufs[i].as_ref()
    }

    fn buffered(&self, i: usize) -> bool {
        self.bufs[i].is_some()
    }

    fn buf_vars(&self, i: usize) -> &BufVars {
        self.bufs[i].as_ref().expect("a buffered access")
    }

    fn double(&self, i: usize) -> bool {
        self.buffered(i) && self.s.buffers[i].double
    }

    fn rank(&self, i: usize) -> usize {
        self.shape(i).len().max(1)
    }

    fn origin(&self, l: usize) -> Int {
        Int::Var(self.origin[l])
    }

    fn extent(&self, l: usize) -> Int {
        Int::Var(self.extent[l])
    }

    /// Whether `l` is the innermost loop of a chunked partition, whose segment bounds it.
    fn is_inner_partition(&self, l: usize) -> bool {
        self.s.grid.is_empty() && self.s.partition.last() == Some(&l)
    }

    /// Bounds of tile loop `l` within the segment (or the grid's block).
    fn bounds(&self, l: usize) -> (Int, Int) {
        if let Some((lo, len)) = self.block[l] {
            return (Int::Var(lo), Int::Var(lo) + Int::Var(len));
        }
        match self.seg_lo {
            Some(lo) if self.is_inner_partition(l) => (Int::Var(lo), Int::Var(lo) + Int::Var(self.seg_len)),
            _ => (Int::Const(0), Int::Const(self.k.loops[l].extent as i64)),
        }
    }

    /// Whether no reduction tile loop among `order[..depth]` has moved, or `None` when there
    /// is none.
    fn first_visit(&self, depth: usize) -> Option<Cond> {
        let conds: Vec<Cond> = self.s.order[..depth]
            .iter()
            .filter(|&&l| self.k.loops[l].kind == LoopKind::Reduce)
            .map(|&l| Cond::Eq(self.origin(l), Int::Const(0)))
            .collect();
        (!conds.is_empty()).then_some(Cond::All(conds))
    }

    fn body(&self, fields: usize, replies: usize) -> Vec<Stmt> {
        let s = self.s;
        let mut out = Vec::new();
        let fields = fields as u32;
        let prologue = LOOP * replies as u32
            + Ops {
                store: replies as u32 + fields,
                load: fields,
                ..int(4)
            };
        charge_once(&mut out, prologue);
        out.push(Stmt::FetchParams);
        for v in self.bufs.iter().flatten() {
            if let Some(r) = &v.record {
                out.push(Stmt::Comment(
                    "This CPE's records start after those of the CPEs before it.".into(),
                ));
                charge_once(&mut out, int(1));
                out.push(Stmt::Set(r.next, Int::Cpe * Int::Const(r.per_cpe)));
            }
        }
        self.posted_start(&mut out);
        for i in 0..self.all.len() {
            self.stream_start(&mut out, i);
        }
        match s.grid.is_empty() {
            true => self.chunks(&mut out),
            false => self.grid_block(&mut out),
        }
        for i in 0..self.all.len() {
            self.stream_end(&mut out, i);
        }
        self.target_drained(&mut out);
        out
    }

    /// This CPE's chunk of the fused partition points, walked in segments.
    fn chunks(&self, out: &mut Vec<Stmt>) {
        let k = self.k;
        let s = self.s;
        let points = s.partition_points as i64;
        out.push(Stmt::Comment(format!(
            "This CPE's chunk of the {points} points of the partition loops ({}).",
            comment(
                &s.partition
                    .iter()
                    .map(|&l| k.loops[l].name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        )));
        let chunk = Int::Const(s.chunk as i64);
        out.push(Stmt::Set(self.first, Int::Cpe * chunk.clone()));
        let next = Int::Var(self.first) + chunk;
        out.push(Stmt::Set(self.last, Int::min(next, Int::Const(points))));
        let mut seg = Vec::new();
        let extents = k.extents();
        // Each partition loop's origin is a quotient and a remainder (one when it is the
        // innermost), done in software; then the segment's length.
        let divisions = (2 * s.partition.len()).saturating_sub(1) as u32;
        let segment = LOOP
            + Ops {
                div: divisions,
                branch: 1,
                ..int(5)
            };
        charge_once(&mut seg, segment);
        let mut inner_product = 1i64;
        let f = Int::Var(self.f);
        for (j, &l) in s.partition.iter().enumerate().rev() {
            let ext = extents[l] as i64;
            let value = if inner_product == 1 {
                f.clone() % Int::Const(ext)
            } else {
                f.clone() / Int::Const(inner_product) % Int::Const(ext)
            };
            if j + 1 == s.partition.len() {
                let lo = self.seg_lo.expect("a partition has a segment start");
                seg.push(Stmt::Set(lo, value));
                let left = Int::Var(self.last) - f.clone();
                let room = Int::Const(ext) - Int::Var(lo);
                seg.push(Stmt::Set(self.seg_len, Int::min(left, room)));
            } else {
                seg.push(Stmt::Set(self.origin[l], value));
                seg.push(Stmt::Set(self.extent[l], Int::Const(1)));
            }
            inner_product *= ext;
        }
        if s.partition.is_empty() {
            seg.push(Stmt::Set(self.seg_len, Int::Const(1)));
        }
        for (l, &ext) in extents.iter().enumerate() {
            if self.pos[l].is_some() || (s.partition.contains(&l) && !self.is_inner_partition(l)) {
                continue;
            }
            match self.seg_lo {
                Some(lo) if self.is_inner_partition(l) => {
                    seg.push(Stmt::Set(self.origin[l], Int::Var(lo)));
                    seg.push(Stmt::Set(self.extent[l], Int::Var(self.seg_len)));
                }
                _ => {
                    seg.push(Stmt::Set(self.origin[l], Int::Const(0)));
                    seg.push(Stmt::Set(self.extent[l], Int::Const(ext as i64)));
                }
            }
        }
        self.fills(&mut seg, 0);
        self.level(&mut seg, 0);
        self.write_back(&mut seg, 0);
        match self.seg_r {
            None => out.push(Stmt::For {
                var: self.f,
                from: Int::Var(self.first),
                to: Int::Var(self.last),
                step: Int::Var(self.seg_len),
                body: seg,
            }),
            Some(r) => {
                // Backwards: each segment ends where the one after it begins, and begins at
                // the start of its row of the innermost partition loop, or at `first`.
                out.push(Stmt::Comment("The segments, last first.".into()));
                let ext = Int::Const(extents[*s.partition.last().expect("a partition")] as i64);
                let end = Int::Var(self.last) - Int::Var(r);
                let row = (end - Int::Const(1)) / ext.clone() * ext;
                let mut body = Vec::new();
                // The loop's bound and the clamp's compare, with the row start.
                charge_once(&mut body, int(2) + branch(1));
                charged(&mut body, vec![Stmt::Set(self.f, row)]);
                body.push(Stmt::If {
                    cond: Cond::Lt(Int::Var(self.f), Int::Var(self.first)),
                    then: vec![Stmt::Set(self.f, Int::Var(self.first))],
                    otherwise: Vec::new(),
                });
                body.extend(seg);
                out.push(Stmt::For {
                    var: r,
                    from: Int::Const(0),
                    to: Int::Var(self.last) - Int::Var(self.first),
                    step: Int::Var(self.seg_len),
                    body,
                });
            }
        }
    }

    /// This CPE's block of a grid partition: each partition loop's part is a digit of the
    /// CPE's id in the grid's mixed radix (the last loop's fastest); CPEs past the grid's
    /// blocks have none.
    fn grid_block(&self, out: &mut Vec<Stmt>) {
        let k = self.k;
        let s = self.s;
        let names: Vec<&str> = s.partition.iter().map(|&l| k.loops[l].name.as_str()).collect();
        let parts: Vec<String> = s.grid.iter().map(|g| g.to_string()).collect();
        out.push(Stmt::Comment(format!(
            "This CPE's block of the partition loops ({}), in a grid of {} blocks.",
            comment(&names.join(", ")),
            parts.join(" x ")
        )));
        let extents = k.extents();
        let part_extents: Vec<usize> = s.partition.iter().map(|&l| extents[l]).collect();
        let sizes = partition::block_sizes(&s.grid, &part_extents);
        let mut body = Vec::new();
        // Per loop its part (a quotient and a remainder, one for the last, in software), its
        // start (a multiply) and its length (a subtract and a minimum); where its parts are
        // uneven, its start and the next part's (a multiply and a division each, in software)
        // and their difference.
        let d = s.partition.len() as u32;
        let uneven = (0..s.grid.len())
            .filter(|&j| !partition::even(s.grid[j], part_extents[j]))
            .count() as u32;
        charge_once(
            &mut body,
            Ops {
                div: 2 * d - 1 + 2 * uneven,
                ..int(4 * d)
            },
        );
        let mut inner = 1i64;
        for (j, &l) in s.partition.iter().enumerate().rev() {
            let g = Int::Const(s.grid[j] as i64);
            let part = match inner {
                1 => Int::Cpe % g.clone(),
                _ => Int::Cpe / Int::Const(inner) % g.clone(),
            };
            let (lo, len) = self.block[l].expect("a grid's loops have a block");
            let extent = Int::Const(extents[l] as i64);
            match partition::even(s.grid[j], part_extents[j]) {
                true => {
                    let size = Int::Const(sizes[j] as i64);
                    body.push(Stmt::Set(lo, part * size.clone()));
                    body.push(Stmt::Set(len, Int::min(size, extent - Int::Var(lo))));
                }
                false => {
                    // As `partition::block` cuts it.
                    let next = (part.clone() + Int::Const(1)) * extent.clone() / g.clone();
                    body.push(Stmt::Set(lo, part * extent / g));
                    body.push(Stmt::Set(len, next - Int::Var(lo)));
                }
            }
            inner *= s.grid[j] as i64;
        }
        for (l, &ext) in extents.iter().enumerate().filter(|&(l, _)| self.pos[l].is_none()) {
            let (o, n) = match self.block[l] {
                Some((lo, len)) => (Int::Var(lo), Int::Var(len)),
                None => (Int::Const(0), Int::Const(ext as i64)),
            };
            body.push(Stmt::Set(self.origin[l], o));
            body.push(Stmt::Set(self.extent[l], n));
        }
        self.fills(&mut body, 0);
        self.level(&mut body, 0);
        self.write_back(&mut body, 0);
        charge_once(out, int(1) + branch(1));
        out.push(Stmt::If {
            cond: Cond::Lt(Int::Cpe, Int::Const(inner)),
            then: body,
            otherwise: Vec::new(),
        });
    }
}

impl Gen<'_> {
    /// Tile loop at position `pos` of the order, and everything inside it.
    fn level(&self, out: &mut Vec<Stmt>, pos: usize) {
        if pos == self.s.order.len() {
            self.compute(out);
            return;
        }
        let l = self.s.order[pos];
        let t = Int::Const(self.s.tiles[l] as i64);
        let (lo, hi) = self.bounds(l);
        let o = self.origin(l);
        let mut body = Vec::new();
        body.push(Stmt::Set(self.extent[l], Int::min(hi.clone() - o, t.clone())));
        // The loop's control and the line above (twice the bound when it is the segment's or
        // the block's).
        let bound = u32::from(self.is_inner_partition(l) || self.block[l].is_some());
        charge_once(&mut body, LOOP + int(3 + 2 * bound) + branch(1));
        self.fills(&mut body, pos + 1);
        self.staggered_transfers(&mut body, pos);
        self.level(&mut body, pos + 1);
        self.early_gets(&mut body, pos + 1);
        self.write_back(&mut body, pos + 1);
        for i in 0..self.all.len() {
            if self.double(i) && self.s.buffers[i].depth == pos + 1 {
                let h = self.buf_vars(i).half.expect("a double buffer has a half");
                let next = match self.buf_vars(i).post {
                    Some(_) => (Int::Var(h) + Int::Const(1)) % Int::Const(3),
                    None => Int::Const(1) - Int::Var(h),
                };
                body.push(Stmt::Set(h, next));
            }
        }
        match self.tile_r[l] {
            None => out.push(Stmt::For {
                var: self.origin[l],
                from: lo,
                to: hi,
                step: t,
                body,
            }),
            Some(r) => {
                // Backwards: from the last tile's origin down to `lo`.
                let last = lo.clone() + (hi.clone() - lo.clone() - Int::Const(1)) / t.clone() * t.clone();
                let mut tile = Vec::new();
                // The loop's bound, and the origin.
                charge_once(&mut tile, int_ops(&(hi.clone() - lo.clone())));
                charged(&mut tile, vec![Stmt::Set(self.origin[l], last - Int::Var(r))]);
                tile.extend(body);
                out.push(Stmt::For {
                    var: r,
                    from: Int::Const(0),
                    to: hi - lo,
                    step: t,
                    body: tile,
                });
            }
        }
    }

    /// Statements setting row `row` of access `i`'s box arrays to the box it spans over the
    /// tile, with loop `l`'s origin and extent given by `at`; and their operations.
    fn box_lines(&self, out: &mut Vec<Stmt>, i: usize, row: Option<Int>, at: &dyn Fn(usize) -> (Int, Int)) -> Ops {
        let v = self.buf_vars(i);
        let index = |d: usize| -> Vec<Int> { row.iter().cloned().chain([Int::Const(d as i64)]).collect() };
        let stores = Ops {
            store: 2,
            ..Ops::default()
        };
        if self.shape(i).is_empty() {
            out.push(Stmt::SetElem(v.start, index(0), Int::Const(0)));
            out.push(Stmt::SetElem(v.extent, index(0), Int::Const(1)));
            return stores;
        }
        let mut ops = Ops::default();
        for (d, idx) in self.all[i].index.iter().enumerate() {
            let Index::Affine(x) = idx else {
                unreachable!("buffered accesses have affine subscripts")
            };
            // A strided read whose tiles are its whole loops takes the whole dimension.
            let whole = !is_written(self.k, i)
                && self.all[i].spans_dimension(d, &self.s.tiles, &self.k.extents(), self.shape(i)[d]);
            ops += stores;
            let (lo, span) = match whole {
                true => (Int::Const(0), Int::Const(self.shape(i)[d] as i64)),
                false => self.span_of(x, i, d, at, &mut ops),
            };
            out.push(Stmt::SetElem(v.start, index(d), lo));
            if let Some(org) = v.origin {
                out.push(Stmt::SetElem(
                    org,
                    index(d),
                    Int::Elem(v.start, index(d)) - Int::Const(x.offset),
                ));
                ops += int(1)
                    + Ops {
                        store: 1,
                        ..Ops::default()
                    };
            }
            out.push(Stmt::SetElem(v.extent, index(d), span));
        }
        ops
    }

    /// The first index and the extent along dimension `d` (subscript `x`) of the box access
    /// `i` spans over the tile, with loop `l`'s origin and extent given by `at`; adds the
    /// operations that compute them to `ops`.
    fn span_of(&self, x: &Affine, i: usize, d: usize, at: &dyn Fn(usize) -> (Int, Int), ops: &mut Ops) -> (Int, Int) {
        let mut lo: Vec<(i64, Int)> = Vec::new();
        let mut span: Vec<(i64, Int)> = Vec::new();
        for &(l, c) in &x.terms {
            let (o, n) = at(l);
            lo.push((c, o));
            let last = n - Int::Const(1);
            if c < 0 {
                lo.push((c, last.clone()));
                *ops += int(1);
            }
            span.push((c.abs(), last));
        }
        *ops += int(linear_ops(&lo, x.offset));
        let lo = linear(lo, x.offset);
        // One loop with a unit step spans exactly that loop's tile; a window spreads
        // past it.
        let spread = self.all[i].spread(d) as i64;
        let span = match x.terms.as_slice() {
            [(l, c)] if c.abs() == 1 && spread == 0 => at(*l).1,
            [(l, c)] if c.abs() == 1 => {
                *ops += int(1);
                at(*l).1 + Int::Const(spread)
            }
            _ => {
                *ops += int(span.len() as u32 + linear_ops(&span, 1 + spread));
                linear(span, 1 + spread)
            }
        };
        (lo, span)
    }

    /// The box DMA of access `i` (`put` for a write-back) with its box in row `row`. A box of a
    /// tensor stored as records moves, packed, to or from the next record of this CPE instead.
    fn dma(&self, i: usize, put: bool, half: Half, row: Option<Int>) -> Vec<Stmt> {
        self.dma_on(i, put, half, row, (self.reply[i], self.buf_vars(i).issued))
    }

    /// [`Self::dma`] on the reply counter `counter` (its index, and the variable counting the
    /// transfers issued on it).
    fn dma_on(&self, i: usize, put: bool, half: Half, row: Option<Int>, counter: (usize, Var)) -> Vec<Stmt> {
        let v = self.buf_vars(i);
        let (reply, issued) = counter;
        let class = if self.tape[i] {
            super::DmaClass::Tape
        } else {
            super::DmaClass::Data
        };
        let Some(r) = &v.record else {
            return vec![Stmt::Dma(BoxDma {
                put,
                padded: !put && self.all[i].pad.is_some(),
                buf: v.buf,
                half,
                field: self.field(i),
                shape: v.shape,
                start: v.start,
                extent: v.extent,
                row,
                offset: None,
                issued,
                reply,
                class,
            })];
        };
        let rank = self.rank(i);
        let dim = |d: usize| Int::Elem(v.extent, row.iter().cloned().chain([Int::Const(d as i64)]).collect());
        let elements = Int::product((0..rank).map(dim).collect());
        let first = || vec![Int::Const(0)];
        let mut out = Vec::new();
        // The box's size, the record's place and the move to the next record.
        let ops = Ops {
            store: 2,
            ..int(rank as u32 + 1)
        };
        charge_once(&mut out, ops);
        out.push(Stmt::SetElem(r.start, first(), Int::Var(r.next)));
        out.push(Stmt::SetElem(r.extent, first(), elements));
        out.push(Stmt::Dma(BoxDma {
            put,
            padded: false,
            buf: v.buf,
            half,
            field: self.field(i),
            shape: r.shape,
            start: r.start,
            extent: r.extent,
            row: None,
            offset: None,
            issued,
            reply,
            class,
        }));
        out.push(Stmt::Set(r.next, Int::Var(r.next) + Int::Elem(r.extent, first())));
        out
    }

    /// For a guarded read, finishing its box (in half `half`, box row `row`) after its get.
    /// A split buffer's CPE finishes only its slice, when it has one.
    fn pad(&self, i: usize, half: Half, row: Option<Int>) -> Vec<Stmt> {
        let v = self.buf_vars(i);
        let Some(pad) = self.all[i].pad else {
            return Vec::new();
        };
        let Some(sv) = &v.slice else {
            return vec![Stmt::Pad(BoxPad {
                buf: v.buf,
                half,
                shape: v.shape,
                start: v.start,
                extent: v.extent,
                row,
                offset: None,
                pad,
            })];
        };
        let offset = Some(self.slice_offset(i, sv, &row));
        let mut out = Vec::new();
        // The test and the slice's place.
        charge_once(&mut out, int(4) + branch(1));
        out.push(Stmt::If {
            cond: self.has_slice(sv, &row),
            then: vec![Stmt::Pad(BoxPad {
                buf: v.buf,
                half,
                shape: v.shape,
                start: sv.start,
                extent: sv.extent,
                row,
                offset,
                pad,
            })],
            otherwise: Vec::new(),
        });
        out
    }

    fn wait(&self, i: usize) -> Stmt {
        wait_on((self.reply[i], self.buf_vars(i).issued))
    }

    /// `make(counter)` on the reply counter of the double-buffered target's current half.
    fn on_target_half(&self, out: &mut Vec<Stmt>, make: impl Fn((usize, Var)) -> Vec<Stmt>) {
        let v = self.buf_vars(0);
        let (h, second) = (
            v.half.expect("a double buffer has a half"),
            v.second.expect("a double target has two counters"),
        );
        charge_once(out, int(1) + branch(1));
        out.push(Stmt::If {
            cond: Cond::Eq(Int::Var(h), Int::Const(0)),
            then: make((self.reply[0], v.issued)),
            otherwise: make(second),
        });
    }

    /// At the kernel's end: both halves' puts of a double-buffered target are complete.
    fn target_drained(&self, out: &mut Vec<Stmt>) {
        let Some(second) = self.vars(0).and_then(|v| v.second) else {
            return;
        };
        if let Some(pending) = self.put_pending {
            out.push(Stmt::Comment("The last tile's deferred put.".into()));
            charge_once(out, int(1) + branch(1));
            out.push(Stmt::If {
                cond: Cond::Eq(Int::Var(pending), Int::Const(1)),
                then: self.put_before(),
                otherwise: Vec::new(),
            });
        }
        out.push(Stmt::Comment("Both halves of the target have left.".into()));
        out.push(self.wait(0));
        out.push(wait_on(second));
    }

    fn stream(&self, i: usize) -> Option<&StreamVars> {
        self.bufs[i].as_ref().and_then(|v| v.stream.as_ref())
    }

    /// This CPE's stack entry `slot`.
    fn stack_place(&self, st: &StreamVars, slot: Int, write: bool) -> Place {
        Place::Main {
            field: st.stack,
            index: Int::Cpe * Int::Const(st.slots) + slot,
            write,
        }
    }

    fn stack_read(&self, st: &StreamVars, slot: Int) -> Int {
        Int::Gather(Box::new(Value::Load(self.stack_place(st, slot, false))), st.bound)
    }

    fn stack_write(&self, st: &StreamVars, slot: Int, value: Int) -> Stmt {
        Stmt::Store {
            place: self.stack_place(st, slot, true),
            value: Value::Index(value),
        }
    }

    /// Stack entry `field` (0 place, 1 length) of layer `layer`.
    fn layer_slot(&self, st: &StreamVars, layer: Int, field: i64) -> Int {
        Int::Const(st.layer_slot + field) + Int::Const(2) * layer
    }

    /// Elements of access `i`'s current box.
    fn box_elements(&self, i: usize) -> Int {
        let v = self.buf_vars(i);
        Int::product(
            (0..self.rank(i))
                .map(|d| Int::Elem(v.extent, vec![Int::Const(d as i64)]))
                .collect(),
        )
    }

    /// Before the walk: a producer finds the end of this CPE's tape and records where its
    /// layers begin; a reader finds its layers and fetches the last.
    fn stream_start(&self, out: &mut Vec<Stmt>, i: usize) {
        let Some(st) = self.stream(i) else { return };
        let tensor = comment(self.tensor_name(i));
        let layers = Int::Var(st.layers);
        let mut stmts = vec![Stmt::Set(st.pos, Int::Const(0)), Stmt::Set(st.h, Int::Const(0))];
        if st.push {
            out.push(Stmt::Comment(format!(
                "'{tensor}' streams out: its layers go to the end of this CPE's tape."
            )));
            if st.index == 0 {
                stmts.push(Stmt::Set(st.layers, Int::Const(0)));
                stmts.push(Stmt::Set(st.top, Int::Cpe * Int::Const(st.share)));
            } else {
                stmts.push(Stmt::Set(st.layers, self.stack_read(st, Int::Const(0))));
                stmts.push(Stmt::Set(st.top, self.stack_read(st, Int::Const(1))));
            }
            let base = Int::Const(swflow_scheduler::tape::StreamTape::base_slot(st.index) as i64);
            stmts.push(self.stack_write(st, base, layers));
            charged(out, stmts);
            return;
        }
        out.push(Stmt::Comment(format!(
            "'{tensor}' streams back in: this CPE's layers of it, last first."
        )));
        let base = st.base.expect("a reader has its first layer");
        let slot = Int::Const(swflow_scheduler::tape::StreamTape::base_slot(st.index) as i64);
        stmts.push(Stmt::Set(st.layers, self.stack_read(st, Int::Const(0))));
        stmts.push(Stmt::Set(st.top, self.stack_read(st, Int::Const(1))));
        stmts.push(Stmt::Set(base, self.stack_read(st, slot)));
        stmts.push(Stmt::Set(st.next_h.expect("a reader has a next half"), Int::Const(0)));
        charged(out, stmts);
        let fetch = self.fetch(i, layers - Int::Const(1), Int::Const(0));
        charge_once(out, int(1) + branch(1));
        out.push(Stmt::If {
            cond: Cond::Lt(Int::Var(base), Int::Var(st.layers)),
            then: fetch,
            otherwise: Vec::new(),
        });
    }

    /// After the walk: a producer pushes its last layer and waits for its puts; both leave
    /// the stack's size and the tape's end for the next stream.
    fn stream_end(&self, out: &mut Vec<Stmt>, i: usize) {
        let Some(st) = self.stream(i) else { return };
        let v = self.buf_vars(i);
        if st.push {
            charge_once(out, int(1) + branch(1));
            out.push(Stmt::If {
                cond: Cond::Lt(Int::Const(0), Int::Var(st.pos)),
                then: self.flush(i),
                otherwise: Vec::new(),
            });
        }
        let stmts = vec![
            Stmt::Wait {
                reply: self.reply[i],
                count: Int::Var(v.issued),
            },
            self.stack_write(st, Int::Const(0), Int::Var(st.layers)),
            self.stack_write(st, Int::Const(1), Int::Var(st.top)),
        ];
        charged(out, stmts);
    }

    /// A producer's push of the current half as a layer: once the other half's put is
    /// complete (its half is filled next), one put to the end of this CPE's tape and its
    /// entries on the stack.
    fn flush(&self, i: usize) -> Vec<Stmt> {
        let st = self.stream(i).expect("a streamed access");
        let v = self.buf_vars(i);
        let (pos, h, layers, top) = (Int::Var(st.pos), Int::Var(st.h), Int::Var(st.layers), Int::Var(st.top));
        let mut out = Vec::new();
        charged(
            &mut out,
            vec![
                Stmt::Wait {
                    reply: self.reply[i],
                    count: Int::Var(v.issued),
                },
                Stmt::SetElem(st.layer, vec![Int::Const(0)], top.clone()),
                Stmt::SetElem(st.layer_n, vec![Int::Const(0)], pos.clone()),
                self.layer_dma(i, true, h.clone()),
                self.stack_write(st, self.layer_slot(st, layers.clone(), 0), top.clone()),
                self.stack_write(st, self.layer_slot(st, layers.clone(), 1), pos.clone()),
                Stmt::Set(st.layers, layers + Int::Const(1)),
                Stmt::Set(st.top, top + pos),
                Stmt::Set(st.pos, Int::Const(0)),
                Stmt::Set(st.h, Int::Const(1) - h),
            ],
        );
        out
    }

    /// The transfer of the layer its arrays describe, between arena half `half` and the tape.
    fn layer_dma(&self, i: usize, put: bool, half: Int) -> Stmt {
        let st = self.stream(i).expect("a streamed access");
        let v = self.buf_vars(i);
        Stmt::Dma(BoxDma {
            put,
            padded: false,
            buf: v.buf,
            half: Half::At(half),
            field: st.values,
            shape: st.shape,
            start: st.layer,
            extent: st.layer_n,
            row: None,
            offset: None,
            issued: v.issued,
            reply: self.reply[i],
            class: super::DmaClass::TapeStream,
        })
    }

    /// A reader's get of layer `layer` into half `half`.
    fn fetch(&self, i: usize, layer: Int, half: Int) -> Vec<Stmt> {
        let st = self.stream(i).expect("a streamed access");
        let next_n = st.next_n.expect("a reader has a next length");
        let next_top = st.next_top.expect("a reader has a next place");
        let mut out = Vec::new();
        charged(
            &mut out,
            vec![
                Stmt::Set(next_n, self.stack_read(st, self.layer_slot(st, layer.clone(), 1))),
                Stmt::Set(next_top, self.stack_read(st, self.layer_slot(st, layer, 0))),
                Stmt::SetElem(st.layer, vec![Int::Const(0)], Int::Var(next_top)),
                Stmt::SetElem(st.layer_n, vec![Int::Const(0)], Int::Var(next_n)),
                self.layer_dma(i, false, half),
            ],
        );
        out
    }

    /// At the start of a box of a streamed tensor: a producer pushes the current half when
    /// the box does not fit in it; a reader pops the next layer when the current one is used
    /// up, then steps back over the box.
    fn stream_box(&self, out: &mut Vec<Stmt>, i: usize) {
        let st = self.stream(i).expect("a streamed access");
        let n = self.box_elements(i);
        let pos = Int::Var(st.pos);
        if st.push {
            charge_once(out, int_ops(&n) + int(2) + branch(1));
            out.push(Stmt::If {
                cond: Cond::Lt(Int::Const(st.half), pos + n),
                then: self.flush(i),
                otherwise: Vec::new(),
            });
            return;
        }
        let v = self.buf_vars(i);
        let (base, next_h) = (
            st.base.expect("a reader has its first layer"),
            st.next_h.expect("a reader has a next half"),
        );
        let mut pop = Vec::new();
        charged(
            &mut pop,
            vec![
                Stmt::Set(st.layers, Int::Var(st.layers) - Int::Const(1)),
                Stmt::Wait {
                    reply: self.reply[i],
                    count: Int::Var(v.issued),
                },
                Stmt::Set(st.h, Int::Var(next_h)),
                Stmt::Set(st.pos, Int::Var(st.next_n.expect("a reader has a next length"))),
                Stmt::Set(st.top, Int::Var(st.next_top.expect("a reader has a next place"))),
            ],
        );
        let mut prefetch = Vec::new();
        charged(&mut prefetch, vec![Stmt::Set(next_h, Int::Const(1) - Int::Var(st.h))]);
        prefetch.extend(self.fetch(i, Int::Var(st.layers) - Int::Const(1), Int::Var(next_h)));
        charge_once(&mut pop, int(1) + branch(1));
        pop.push(Stmt::If {
            cond: Cond::Lt(Int::Var(base), Int::Var(st.layers)),
            then: prefetch,
            otherwise: Vec::new(),
        });
        charge_once(out, int(1) + branch(1));
        out.push(Stmt::If {
            cond: Cond::Eq(pos.clone(), Int::Const(0)),
            then: pop,
            otherwise: Vec::new(),
        });
        charged(out, vec![Stmt::Set(st.pos, pos - n)]);
    }

    /// After a producer's box of a streamed tensor is complete: the next box follows it.
    fn stream_advance(&self, out: &mut Vec<Stmt>, i: usize) {
        let st = self.stream(i).expect("a streamed access");
        charged(out, vec![Stmt::Set(st.pos, Int::Var(st.pos) + self.box_elements(i))]);
    }

    /// Fills of the buffers placed at `depth`.
    fn fills(&self, out: &mut Vec<Stmt>, depth: usize) {
        let here = |l: usize| (self.origin(l), self.extent(l));
        // The gets of the single buffers and the first gets of the double buffers are all
        // issued first, so that their latencies overlap, and then waited for (padded,
        // broadcast) one by one, each double buffer's followed by its prefetch.
        let mut arrivals = Vec::new();
        // A prologue's main box arrives after its parameters' (see `prologue_box`).
        let mut last = Vec::new();
        let main = self.prologue.as_ref().map(|(_, m)| *m);
        for i in 0..self.all.len() {
            let arrivals = match main == Some(i) {
                true => &mut last,
                false => &mut arrivals,
            };
            if !self.buffered(i) || self.s.buffers[i].depth != depth {
                continue;
            }
            let tensor = comment(self.tensor_name(i));
            if i == 0 {
                self.fill_target(out, depth, &here);
            } else if keep_index(self.k) == Some(i) {
                // Written by the epilogue, never read: only its box.
                out.push(Stmt::Comment(format!("'{tensor}' (kept reduced value)")));
                let ops = self.box_lines(out, i, None, &here);
                charge_once(out, ops);
                if self.stream(i).is_some() {
                    self.stream_box(out, i);
                }
            } else if self.stream(i).is_some() {
                out.push(Stmt::Comment(format!("'{tensor}': the box before, in the arena.")));
                let ops = self.box_lines(out, i, None, &here);
                charge_once(out, ops);
                self.stream_box(out, i);
            } else if self.buf_vars(i).post.is_some() {
                self.posted_fill(out, arrivals, i, &here);
            } else if self.double(i) {
                let h = self.buf_vars(i).half.expect("a double buffer has a half");
                let chain = self.prefetch_chain(depth);
                let names: Vec<&str> = chain.iter().map(|&l| self.loop_names[l].as_str()).collect();
                out.push(Stmt::Comment(format!(
                    "'{tensor}': double-buffered over the tiles of {}.",
                    names.join(" within ")
                )));
                let mut first = vec![Stmt::Set(h, Int::Const(0))];
                let ops = self.box_lines(&mut first, i, Some(Int::Const(0)), &here);
                charge_once(&mut first, ops);
                first.extend(self.get_box(i, Half::At(Int::Const(0)), Some(Int::Const(0))));
                charge_once(out, first_tiles_test(&chain));
                out.push(Stmt::If {
                    cond: self.at_first_tiles(&chain),
                    then: first,
                    otherwise: Vec::new(),
                });
                let next = match self.staggered(i) {
                    None => self.prefetch_next(i, &chain, &here),
                    Some(_) => Vec::new(),
                };
                arrivals.extend(self.arrive(i, Half::At(Int::Var(h)), Some(Int::Var(h)), next));
            } else if let Some(chain) = self.early_chain(i) {
                let names: Vec<&str> = chain.iter().map(|&l| self.loop_names[l].as_str()).collect();
                out.push(Stmt::Comment(format!(
                    "'{tensor}': each box after the first is fetched once the tile before has computed, over the tiles of {}.",
                    names.join(" within ")
                )));
                // The box is set at every tile, its get issued here at the first tile only.
                // After the tile before, the arrays already hold this box, but set only on
                // some paths, which the C compiler takes for maybe uninitialized.
                let ops = self.box_lines(out, i, None, &here);
                charge_once(out, ops + first_tiles_test(&chain));
                out.push(Stmt::If {
                    cond: self.at_first_tiles(&chain),
                    then: self.get_box(i, Half::Single, None),
                    otherwise: Vec::new(),
                });
                arrivals.extend(self.arrive(i, Half::Single, None, Vec::new()));
            } else {
                out.push(Stmt::Comment(format!("'{tensor}'")));
                let ops = self.box_lines(out, i, None, &here);
                charge_once(out, ops);
                out.extend(self.get_box(i, Half::Single, None));
                arrivals.extend(self.arrive(i, Half::Single, None, Vec::new()));
            }
        }
        out.extend(arrivals);
        out.extend(last);
    }

    /// For a double buffer read by this CPE alone from boxes of the tensor (not shared,
    /// records or a stream): the loop its prefetches are staggered over, and its tiles (see
    /// [`stagger_loop`]).
    fn staggered(&self, i: usize) -> Option<(usize, i64)> {
        let v = self.bufs[i].as_ref()?;
        let own = i != 0 && self.shared[i].is_none() && v.record.is_none() && v.stream.is_none();
        if !own || v.half.is_none() || keep_index(self.k) == Some(i) {
            return None;
        }
        stagger_loop(self.k, self.s, self.s.buffers[i].depth, &self.tile_r)
    }

    /// Whether tile loop `l`, of `tiles` tiles, is at this CPE's tile of a staggered transfer.
    fn at_stagger(&self, l: usize, tiles: i64) -> Cond {
        let t = Int::Const(self.s.tiles[l] as i64);
        Cond::Eq(self.origin(l), Int::Cpe % Int::Const(tiles) * t)
    }

    /// Inside a tile of the loop at `pos` of the order, at this CPE's tile of it (see
    /// [`stagger_loop`]): the staggered prefetches of the double buffers placed at depth
    /// `pos`, and the deferred put of the target's box of the tile before.
    fn staggered_transfers(&self, out: &mut Vec<Stmt>, pos: usize) {
        let here = |l: usize| (self.origin(l), self.extent(l));
        if let (Some(pending), true) = (self.put_pending, self.s.buffers[0].depth == pos) {
            let (l, tiles) = stagger_loop(self.k, self.s, pos, &self.tile_r).expect("a deferred put is staggered");
            let mut put = self.put_before();
            put.push(Stmt::Set(pending, Int::Const(0)));
            charge_once(out, int(4) + branch(1));
            out.push(Stmt::If {
                cond: Cond::All(vec![
                    self.at_stagger(l, tiles),
                    Cond::Eq(Int::Var(pending), Int::Const(1)),
                ]),
                then: put,
                otherwise: Vec::new(),
            });
        }
        for i in 0..self.all.len() {
            if self.s.buffers[i].depth != pos {
                continue;
            }
            let Some((l, tiles)) = self.staggered(i) else { continue };
            charge_once(out, int(3) + branch(1));
            out.push(Stmt::If {
                cond: self.at_stagger(l, tiles),
                then: self.prefetch_next(i, &self.prefetch_chain(pos), &here),
                otherwise: Vec::new(),
            });
        }
    }

    /// The tile loops a double buffer filled at `depth` prefetches along, innermost first: the
    /// loop at `depth` and the loops around it, out to the first that runs backwards (a
    /// stream's reader) or the outermost. The buffer's boxes follow one another over all of
    /// them, so only the first box of the segment is fetched and waited for at once, and the
    /// box of an outer loop's next tile arrives while this one's last tile computes (before
    /// that tile's puts, which would otherwise queue ahead of it).
    fn prefetch_chain(&self, depth: usize) -> Vec<usize> {
        chain_of(self.s, depth, &self.tile_r)
    }

    /// The get of access `i`'s box on the tile after this one along `chain` (see
    /// [`Gen::prefetch_chain`]) into the other half: the next tile of the innermost loop that
    /// has one, the loops inside it back at their first tiles. None after the last tile.
    fn prefetch_next(&self, i: usize, chain: &[usize], here: &dyn Fn(usize) -> (Int, Int)) -> Vec<Stmt> {
        let h = self.buf_vars(i).half.expect("a double buffer has a half");
        let other = Int::Const(1) - Int::Var(h);
        self.fetch_next(i, chain, here, Half::At(other.clone()), Some(other))
    }

    /// The get of access `i`'s box on the tile after this one along `chain` (see
    /// [`Gen::prefetch_chain`]) into `half`, its box in row `row`: the next tile of the
    /// innermost loop that has one, the loops inside it back at their first tiles. None after
    /// the last tile.
    fn fetch_next(
        &self,
        i: usize,
        chain: &[usize],
        here: &dyn Fn(usize) -> (Int, Int),
        half: Half,
        row: Option<Int>,
    ) -> Vec<Stmt> {
        let first = |m: usize| {
            let (lo, hi) = self.bounds(m);
            (lo.clone(), Int::min(hi - lo, Int::Const(self.s.tiles[m] as i64)))
        };
        let mut out = Vec::new();
        for (j, &l) in chain.iter().enumerate().rev() {
            let (_, hi) = self.bounds(l);
            let t = Int::Const(self.s.tiles[l] as i64);
            let next = self.origin(l) + t.clone();
            let next_n = Int::min(hi.clone() - next.clone(), t);
            let at = |m: usize| {
                if m == l {
                    (next.clone(), next_n.clone())
                } else if chain[..j].contains(&m) {
                    first(m)
                } else {
                    here(m)
                }
            };
            let mut then = Vec::new();
            let ops = self.box_lines(&mut then, i, row.clone(), &at);
            // The tests that led here, and the first tiles of the loops inside.
            let tests = (int(3) + branch(1)) * (j as u32 + 1) + int(2) * j as u32;
            charge_once(&mut then, ops + tests);
            then.extend(self.get_box(i, half.clone(), row.clone()));
            out = vec![Stmt::If {
                cond: Cond::Lt(next, hi),
                then,
                otherwise: out,
            }];
        }
        out
    }

    /// Whether the loops of `chain` are at their first tiles.
    fn at_first_tiles(&self, chain: &[usize]) -> Cond {
        Cond::All(
            chain
                .iter()
                .map(|&l| Cond::Eq(self.origin(l), self.bounds(l).0))
                .collect(),
        )
    }

    /// For a single buffer read at a depth inside a tile loop that runs forwards (not the
    /// target, a kept value or a stream), the loops its boxes follow one another along (see
    /// [`Gen::prefetch_chain`]). Each box after the first is fetched at the end of the tile
    /// before, once that tile has computed and before its puts, rather than at the start of
    /// its own tile: the DMA queue serves a CPE's transfers in the order they are issued, and
    /// a get issued after the puts of the tile before waits for every CPE's puts.
    fn early_chain(&self, i: usize) -> Option<Vec<usize>> {
        let depth = self.s.buffers[i].depth;
        let plain = i != 0 && keep_index(self.k) != Some(i) && self.stream(i).is_none() && !self.double(i);
        (plain && self.buffered(i) && depth > 0 && self.tile_r[self.s.order[depth - 1]].is_none())
            .then(|| self.prefetch_chain(depth))
    }

    /// At the end of a tile at `depth`, once it has computed: the gets of the next boxes of
    /// the single buffers placed there that [`Gen::early_chain`] fetches early.
    fn early_gets(&self, out: &mut Vec<Stmt>, depth: usize) {
        let here = |l: usize| (self.origin(l), self.extent(l));
        for i in 0..self.all.len() {
            if !self.buffered(i) || self.s.buffers[i].depth != depth {
                continue;
            }
            if let Some(chain) = self.early_chain(i) {
                out.extend(self.fetch_next(i, &chain, &here, Half::Single, None));
            }
        }
    }

    /// The get of access `i`'s box (in `half`, box row `row`), whose arrays are set: for a
    /// shared buffer, on the owner of its mesh line only, with the test's cost; for a split
    /// one, this CPE's slice of it, on every CPE of the line.
    fn get_box(&self, i: usize, half: Half, row: Option<Int>) -> Vec<Stmt> {
        let stmts = self.dma(i, false, half, row.clone());
        let Some(line) = self.shared[i] else { return stmts };
        let mut out = Vec::new();
        if let Some(sv) = &self.buf_vars(i).slice {
            let fetched = match sv.spread {
                true => Int::Cpe,
                false => position(line),
            };
            let (lo, hi) = self.slice_range(i, sv, &row, fetched);
            let v = self.buf_vars(i);
            let mut bounds = Vec::new();
            for d in 0..self.rank(i) {
                let at: Vec<Int> = row.iter().cloned().chain([Int::Const(d as i64)]).collect();
                let (start, extent) = (Int::Elem(v.start, at.clone()), Int::Elem(v.extent, at.clone()));
                let (start, extent) = match d == sv.dim {
                    true => (start + lo.clone(), hi.clone() - lo.clone()),
                    false => (start, extent),
                };
                bounds.push(Stmt::SetElem(sv.start, at.clone(), start));
                bounds.push(Stmt::SetElem(sv.extent, at, extent));
            }
            // Per dimension, the slice's start and extent from the box's; the slice's bounds
            // (the units, a multiplication, two divisions and a minimum each), the test and
            // the slice's place.
            let ops = Ops {
                load: 2,
                store: 2,
                ..int(2)
            };
            charge(&mut bounds, ops, Int::Const(self.rank(i) as i64));
            charge_once(&mut bounds, int(17) + branch(1));
            match line {
                // Across the mesh only the first row fetches, unless the buffer is spread:
                // the others' slices are empty.
                MeshLine::Mesh if !sv.spread => {
                    let at: Vec<Int> = row.iter().cloned().chain([Int::Const(sv.dim as i64)]).collect();
                    let mut empty = vec![Stmt::SetElem(sv.extent, at, Int::Const(0))];
                    // The empty extent's store and the test of the slice below.
                    charge_once(
                        &mut empty,
                        Ops {
                            store: 1,
                            ..int(1) + branch(1)
                        },
                    );
                    charge_once(&mut out, int(1) + branch(1));
                    out.push(Stmt::If {
                        cond: owner(MeshLine::Column),
                        then: bounds,
                        otherwise: empty,
                    });
                }
                _ => out.extend(bounds),
            }
            let offset = Some(self.slice_offset(i, sv, &row));
            let sliced = stmts
                .into_iter()
                .map(|st| match st {
                    Stmt::Dma(d) => Stmt::Dma(BoxDma {
                        start: sv.start,
                        extent: sv.extent,
                        offset: offset.clone(),
                        ..d
                    }),
                    other => other,
                })
                .collect();
            out.push(Stmt::If {
                cond: self.has_slice(sv, &row),
                then: sliced,
                otherwise: Vec::new(),
            });
            return out;
        }
        charge_once(&mut out, int(1) + branch(1));
        out.push(Stmt::If {
            cond: owner(line),
            then: stmts,
            otherwise: Vec::new(),
        });
        out
    }

    /// The indices `lo..hi` of the split dimension of access `i`'s box (in box row `row`)
    /// in slice `position` (fetched by the CPE at that position of its line, or of the mesh
    /// where the buffer is spread), as `share::slice` computes them.
    fn slice_range(&self, i: usize, sv: &SliceVars, row: &Option<Int>, position: Int) -> (Int, Int) {
        self.slices_range(i, sv, row, position.clone(), position)
    }

    /// The indices of the split dimension of access `i`'s box (in box row `row`) in the
    /// slices `first..=last` together: from the first's start to the last's end.
    fn slices_range(&self, i: usize, sv: &SliceVars, row: &Option<Int>, first: Int, last: Int) -> (Int, Int) {
        let at: Vec<Int> = row.iter().cloned().chain([Int::Const(sv.dim as i64)]).collect();
        let extent = Int::Elem(self.buf_vars(i).extent, at);
        let unit = Int::Const(sv.unit);
        let units = (extent.clone() + Int::Const(sv.unit - 1)) / unit.clone();
        let parts = Int::Const(slice_count(sv.spread) as i64);
        let bound = |p: Int| Int::min(unit.clone() * (p * units.clone() / parts.clone()), extent.clone());
        (bound(first), bound(last + Int::Const(1)))
    }

    /// Whether this CPE has a slice of the box in box row `row` (set by [`Gen::get_box`]).
    fn has_slice(&self, sv: &SliceVars, row: &Option<Int>) -> Cond {
        let at: Vec<Int> = row.iter().cloned().chain([Int::Const(sv.dim as i64)]).collect();
        Cond::Lt(Int::Const(0), Int::Elem(sv.extent, at))
    }

    /// Where this CPE's slice of access `i`'s box in box row `row` lies in the buffer, in
    /// elements.
    fn slice_offset(&self, i: usize, sv: &SliceVars, row: &Option<Int>) -> Int {
        let at: Vec<Int> = row.iter().cloned().chain([Int::Const(sv.dim as i64)]).collect();
        let lo = Int::Elem(sv.start, at.clone()) - Int::Elem(self.buf_vars(i).start, at);
        lo * self.plane(i, sv, row)
    }

    /// Elements of access `i`'s box (in box row `row`) per index of its split dimension.
    fn plane(&self, i: usize, sv: &SliceVars, row: &Option<Int>) -> Int {
        let v = self.buf_vars(i);
        Int::product(
            (sv.dim + 1..self.rank(i))
                .map(|d| Int::Elem(v.extent, row.iter().cloned().chain([Int::Const(d as i64)]).collect()))
                .collect(),
        )
    }

    /// Whole registers for `elements` of access `i`'s type: their bytes rounded up to 32.
    fn registers(&self, i: usize, elements: Int) -> Int {
        let reg = REGISTER_BYTES as i64;
        (elements * Int::Const(self.dtype(i).size_bytes() as i64) + Int::Const(reg - 1)) / Int::Const(reg)
    }

    /// A broadcast of `registers` registers of access `i`'s buffer (in `half`, from `offset`
    /// elements into it) along `line` from the CPE at `root` of it, sent or received, with
    /// its cost: by register communication, a load and a put (or a get and a store) per
    /// register and the loop's control; by remote LDM access, the collective call.
    #[allow(clippy::too_many_arguments)]
    fn broadcast(
        &self,
        i: usize,
        line: MeshLine,
        send: bool,
        root: Int,
        half: &Half,
        offset: Option<Int>,
        registers: Int,
    ) -> Vec<Stmt> {
        let mut out = vec![Stmt::Broadcast {
            line,
            send,
            root,
            buf: self.buf_vars(i).buf,
            half: half.clone(),
            offset,
            bytes: registers.clone() * Int::Const(REGISTER_BYTES as i64),
        }];
        match self.by_registers {
            true => charge(
                &mut out,
                Ops {
                    load: 1,
                    store: 1,
                    ..LOOP
                },
                registers,
            ),
            // Its two reply counters reset, its two synchronisations, the remote access and
            // the wait for its counter.
            false => charge_once(
                &mut out,
                Ops {
                    store: 2,
                    load: 1,
                    ..int(6) + branch(3)
                },
            ),
        }
        out
    }

    /// What makes access `i`'s box (in `half`, box row `row`) complete: its DMA's wait and
    /// padding, `next` (a double buffer's get of its next box, into the other half), and for a
    /// shared buffer its broadcast. The line's owner waits and pads, and sends the box's
    /// registers, the others receive them; across the mesh, CPE 0 sends along the first row,
    /// then the first row's CPEs send down their columns. Each CPE of a split buffer's line
    /// waits for and pads its slice, then the line broadcasts the slices in turn, each from
    /// the CPE that fetched it. Where a broadcast is a collective call that holds the whole
    /// line (remote LDM access), `next` comes before it, so that the next box's get is in
    /// flight meanwhile (light ResNet-50's 1x1 convolution from 256 to 64 channels on
    /// SW26010-Pro, its input shared across the mesh: 227.1 -> 183.1 us). With register
    /// communication the sender moves the registers itself and nobody waits on it: `next`
    /// comes after the broadcast, keeping the order in which the DMA queue sees the transfers
    /// (before it, the nine light models took 0.12 % longer on SW26010).
    fn arrive(&self, i: usize, half: Half, row: Option<Int>, next: Vec<Stmt>) -> Vec<Stmt> {
        let mut arrived = vec![self.wait(i)];
        arrived.extend(self.pad(i, half.clone(), row.clone()));
        arrived.extend(self.prologue_box(i, &half, &row));
        let Some(line) = self.shared[i] else {
            arrived.extend(next);
            return arrived;
        };
        let (next, after) = match self.by_registers {
            true => (Vec::new(), next),
            false => (next, Vec::new()),
        };
        let v = self.buf_vars(i);
        if let Some(sv) = &v.slice {
            // The slices `first..=last` (their range in `lo..hi`), sent along `line` by the
            // CPE at `root` of it where `sends`, else received, when not empty.
            let slice_broadcast = |first: Int, last: Int, line: MeshLine, root: Int, sends: Cond| {
                let (lo, hi) = self.slices_range(i, sv, &row, first, last);
                let mut out = vec![Stmt::Set(sv.lo, lo), Stmt::Set(sv.hi, hi)];
                let (lo, hi) = (Int::Var(sv.lo), Int::Var(sv.hi));
                let plane = self.plane(i, sv, &row);
                let registers = self.registers(i, (hi.clone() - lo.clone()) * plane.clone());
                let offset = Some(lo.clone() * plane);
                // The slice and the tests.
                charge_once(&mut out, int(14) + branch(2));
                out.push(Stmt::If {
                    cond: Cond::Lt(lo, hi),
                    then: vec![Stmt::If {
                        cond: sends,
                        then: self.broadcast(i, line, true, root.clone(), &half, offset.clone(), registers.clone()),
                        otherwise: self.broadcast(i, line, false, root, &half, offset, registers),
                    }],
                    otherwise: Vec::new(),
                });
                out
            };
            arrived.extend(next);
            let side = Int::Const(MESH_SIDE as i64);
            let round = Int::Var(sv.round);
            let in_turn = |line: MeshLine| Cond::Eq(position(line), round.clone());
            let rounds = match (sv.spread, line) {
                // Every row passes its CPEs' slices along, in turn; then the rows' slices go
                // down every column, a row's in each turn.
                (true, _) => {
                    let row_start = Int::Cpe / side.clone() * side.clone();
                    let first = round.clone() * side.clone();
                    vec![
                        slice_broadcast(
                            row_start.clone() + round.clone(),
                            row_start + round.clone(),
                            MeshLine::Row,
                            round.clone(),
                            in_turn(MeshLine::Row),
                        ),
                        slice_broadcast(
                            first.clone(),
                            first + side - Int::Const(1),
                            MeshLine::Column,
                            round.clone(),
                            in_turn(MeshLine::Column),
                        ),
                    ]
                }
                // Across the mesh, the first row's CPEs first send their slices down their
                // columns; then every row passes its slices along, as a line does.
                (false, MeshLine::Mesh) => {
                    let column = position(MeshLine::Mesh);
                    arrived.extend(slice_broadcast(
                        column.clone(),
                        column,
                        MeshLine::Column,
                        Int::Const(0),
                        owner(MeshLine::Column),
                    ));
                    let line = MeshLine::Row;
                    vec![slice_broadcast(
                        round.clone(),
                        round.clone(),
                        line,
                        round.clone(),
                        in_turn(line),
                    )]
                }
                (false, line) => vec![slice_broadcast(
                    round.clone(),
                    round.clone(),
                    line,
                    round.clone(),
                    in_turn(line),
                )],
            };
            for body in rounds {
                arrived.push(Stmt::For {
                    var: sv.round,
                    from: Int::Const(0),
                    to: Int::Const(MESH_SIDE as i64),
                    step: Int::Const(1),
                    body,
                });
            }
            arrived.extend(after);
            return arrived;
        }
        let elements = Int::product(
            (0..self.rank(i))
                .map(|d| Int::Elem(v.extent, row.iter().cloned().chain([Int::Const(d as i64)]).collect()))
                .collect(),
        );
        let registers = self.registers(i, elements);
        let broadcast =
            |line: MeshLine, send: bool| self.broadcast(i, line, send, Int::Const(0), &half, None, registers.clone());
        let stage = |out: &mut Vec<Stmt>, line: MeshLine, then: Vec<Stmt>, otherwise: Vec<Stmt>| {
            charge_once(out, int(4) + branch(1));
            out.push(Stmt::If {
                cond: owner(line),
                then,
                otherwise,
            });
        };
        // The owner sends what it waited for, at once where nothing comes between.
        let mut out = Vec::new();
        let mut then = match self.by_registers {
            true => arrived,
            false => {
                stage(&mut out, line, arrived, Vec::new());
                out.extend(next);
                Vec::new()
            }
        };
        if line == MeshLine::Mesh {
            then.extend(broadcast(MeshLine::Row, true));
            // The first row's other CPEs (the columns' owners) receive along it.
            let mut first_row = Vec::new();
            stage(
                &mut first_row,
                MeshLine::Column,
                broadcast(MeshLine::Row, false),
                Vec::new(),
            );
            stage(&mut out, MeshLine::Mesh, then, first_row);
            stage(
                &mut out,
                MeshLine::Column,
                broadcast(MeshLine::Column, true),
                broadcast(MeshLine::Column, false),
            );
            out.extend(after);
            return out;
        }
        then.extend(broadcast(line, true));
        stage(&mut out, line, then, broadcast(line, false));
        out.extend(after);
        out
    }

    /// The target's box: read first where the kernel writes it in part or revisits partial
    /// sums, set to the reduction's initial value on a dense first visit.
    fn fill_target(&self, out: &mut Vec<Stmt>, depth: usize, here: &dyn Fn(usize) -> (Int, Int)) {
        let k = self.k;
        let v = self.buf_vars(0);
        out.push(Stmt::Comment(format!("'{}' (target)", comment(self.tensor_name(0)))));
        let half = match v.half {
            Some(h) => {
                out.push(Stmt::Comment(
                    "Its half is free once the put from it two tiles ago is complete.".into(),
                ));
                self.on_target_half(out, |c| vec![wait_on(c)]);
                Half::At(Int::Var(h))
            }
            None => Half::Single,
        };
        let ops = self.box_lines(out, 0, v.half.map(Int::Var), here);
        charge_once(out, ops);
        // A target read first or revisited is never double-buffered (`target_may_double`).
        let get_and_wait = |out: &mut Vec<Stmt>| {
            out.extend(self.dma(0, false, Half::Single, None));
            out.push(self.wait(0));
        };
        if !k.target_is_dense(&self.s.tiles) {
            get_and_wait(out);
            return;
        }
        let Some(r) = k.stmt.reduce else { return };
        let row: Vec<Int> = v.half.map(Int::Var).into_iter().collect();
        let elems = Int::product(
            (0..self.rank(0))
                .map(|d| Int::Elem(v.extent, row.iter().cloned().chain([Int::Const(d as i64)]).collect()))
                .collect(),
        );
        let e = self.e.expect("a dense reduction target has a fill loop");
        let at = |index: Int| Place::Ldm {
            buf: v.buf,
            half: half.clone(),
            index,
        };
        let init = |out: &mut Vec<Stmt>| {
            // With vectors: blocks of FILL_VECTORS vectors, each after the first at a
            // displacement, over the whole blocks of the largest tile's box (a smaller
            // tile's box fills the rest of that space too, which it leaves unused; bounds
            // known before the code runs, which a C compiler can check against the buffer),
            // then single elements up to the box's end.
            let mut from = Int::Const(0);
            let mut singles = Some(elems.clone());
            if let (Some((reg, lanes)), Scalar::F32(value)) = (self.fill, r.init) {
                let span = FILL_VECTORS * lanes;
                let largest = self.s.buffers[0].elements();
                let whole = (largest / span * span) as i64;
                charge_once(out, VBROADCAST + int(1));
                out.push(Stmt::VSplat { reg, value });
                charge(
                    out,
                    VSTORE * FILL_VECTORS as u32 + LOOP,
                    Int::Const(whole / span as i64),
                );
                let body = (0..FILL_VECTORS)
                    .map(|j| Stmt::VStore {
                        reg,
                        place: at(match j {
                            0 => Int::Var(e),
                            _ => Int::Var(e) + Int::Const((j * lanes) as i64),
                        }),
                        aligned: false,
                    })
                    .collect();
                out.push(Stmt::For {
                    var: e,
                    from: Int::Const(0),
                    to: Int::Const(whole),
                    step: Int::Const(span as i64),
                    body,
                });
                from = Int::Const(whole);
                // Single elements only past the blocks, where the largest box reaches.
                singles = (largest as i64 > whole).then(|| {
                    charge_once(out, int(3));
                    let past = elems.clone() - Int::Const(whole);
                    past.clone() - Int::min(past, Int::Const(0))
                });
            }
            if let Some(singles) = singles {
                let single = Ops {
                    store: 1,
                    ..int(1) + LOOP
                };
                charge(out, single, singles);
                out.push(Stmt::For {
                    var: e,
                    from,
                    to: elems.clone(),
                    step: Int::Const(1),
                    body: vec![Stmt::Store {
                        place: at(Int::Var(e)),
                        value: Value::Const(r.init),
                    }],
                });
            }
        };
        match self.first_visit(depth) {
            None => init(out),
            Some(cond) => {
                let (mut then, mut otherwise) = (Vec::new(), Vec::new());
                init(&mut then);
                get_and_wait(&mut otherwise);
                out.push(Stmt::If { cond, then, otherwise });
            }
        }
    }

    /// The put of the target's box of the tile before this one, from the other half (a
    /// double-buffered target whose puts are deferred: see [`stagger_loop`]).
    fn put_before(&self) -> Vec<Stmt> {
        let v = self.buf_vars(0);
        let (h, second) = (
            v.half.expect("a deferred put is double-buffered"),
            v.second.expect("a double target has two counters"),
        );
        let put = |half: i64, counter: (usize, Var)| {
            self.dma_on(0, true, Half::At(Int::Const(half)), Some(Int::Const(half)), counter)
        };
        let mut out = Vec::new();
        charge_once(&mut out, int(1) + branch(1));
        out.push(Stmt::If {
            cond: Cond::Eq(Int::Var(h), Int::Const(0)),
            then: put(1, second),
            otherwise: put(0, (self.reply[0], v.issued)),
        });
        out
    }

    fn write_back(&self, out: &mut Vec<Stmt>, depth: usize) {
        if !self.buffered(0) || self.s.buffers[0].depth != depth {
            return;
        }
        if let Some(pending) = self.put_pending {
            // Deferred to this CPE's tile of the loop inside the next tile, or the end.
            out.push(Stmt::Set(pending, Int::Const(1)));
        } else {
            self.put_now(out);
        }
        self.keep_back(out, depth);
    }

    /// The put of the target's box of this tile.
    fn put_now(&self, out: &mut Vec<Stmt>) {
        match self.buf_vars(0).half {
            // Left in flight: the half is waited for before it is written again.
            Some(h) => self.on_target_half(out, |c| {
                self.dma_on(0, true, Half::At(Int::Var(h)), Some(Int::Var(h)), c)
            }),
            None => {
                out.extend(self.dma(0, true, Half::Single, None));
                out.push(self.wait(0));
            }
        }
    }

    /// At the end of a tile at `depth` where the target's buffer is placed: the put of the
    /// kept reduced value, once its reduction is complete.
    fn keep_back(&self, out: &mut Vec<Stmt>, depth: usize) {
        let Some(i) = keep_index(self.k) else { return };
        // The kept value leaves once its box's reduction is complete: when every reduction
        // tile loop around its transfers is at its last tile.
        let mut put = Vec::new();
        if self.stream(i).is_some() {
            self.stream_advance(&mut put, i);
        } else {
            put = self.dma(i, true, Half::Single, None);
            put.push(self.wait(i));
        }
        self.at_last_tiles(out, &self.s.order[..depth], put);
    }

    /// `body`, run only when every reduction loop among `loops` is at its last tile (always,
    /// when there is none).
    fn at_last_tiles(&self, out: &mut Vec<Stmt>, loops: &[usize], body: Vec<Stmt>) {
        let last = self.last_tiles(loops);
        if last.is_empty() {
            out.extend(body);
            return;
        }
        charge_once(out, int(2 * last.len() as u32) + branch(1));
        out.push(Stmt::If {
            cond: Cond::All(last),
            then: body,
            otherwise: Vec::new(),
        });
    }

    /// For each reduction loop among `loops`: its current tile is its last.
    fn last_tiles(&self, loops: &[usize]) -> Vec<Cond> {
        let k = self.k;
        loops
            .iter()
            .filter(|&&l| k.loops[l].kind == LoopKind::Reduce)
            .map(|&l| Cond::Eq(self.origin(l) + self.extent(l), Int::Const(k.loops[l].extent as i64)))
            .collect()
    }

    fn compute(&self, out: &mut Vec<Stmt>) {
        let k = self.k;
        let origin = match &k.origin {
            Some(node) => format!(" from node '{}'", comment(node)),
            None => String::new(),
        };
        out.push(Stmt::Comment(format!(
            "{}{origin}: every point of the tile.",
            comment(&k.op)
        )));
        // The current half of each double-buffered tile the compute reads, chosen once per
        // tile.
        for i in (0..self.all.len()).filter(|&i| self.double(i) && !self.prologue_only(i)) {
            let v = self.buf_vars(i);
            out.push(Stmt::SelectHalf {
                buf: v.buf,
                var: v.half.expect("a double buffer has a half"),
                write: i == 0,
            });
            charge_once(out, int(1));
        }
        if let Some(r) = k.stmt.reduce {
            let (target, target_ops) = self.access_ref(0);
            let buffered = u32::from(self.buffered(0));
            if !(self.buffered(0) && k.target_is_dense(&self.s.tiles)) {
                let parallel: Vec<usize> = (0..k.loops.len())
                    .filter(|&l| k.loops[l].kind == LoopKind::Parallel)
                    .collect();
                let store = Ops {
                    store: buffered,
                    ..target_ops
                };
                let mut init = Vec::new();
                self.charge_nest(&mut init, &parallel, store);
                let mut inner: Vec<Stmt> = (0..k.loops.len())
                    .filter(|l| !parallel.contains(l))
                    .map(|l| Stmt::Set(self.point[l], self.origin(l)))
                    .collect();
                inner.push(Stmt::Store {
                    place: target.clone(),
                    value: Value::Const(r.init),
                });
                init.extend(self.point_loops(&parallel, inner));
                match self.first_visit(self.s.order.len()) {
                    Some(cond) => out.push(Stmt::If {
                        cond,
                        then: init,
                        otherwise: Vec::new(),
                    }),
                    None => out.extend(init),
                }
            }
        }
        match (&self.vector, &self.lanewise, &self.indices) {
            (Some(v), _, _) => self.vector_nest(out, v),
            (None, Some(v), _) => {
                let (statement, ops) = self.statement();
                self.lanewise_nest(out, v, vec![statement], ops);
            }
            (None, None, Some(x)) => self.kept_nest(out, x),
            (None, None, None) => {
                let (statement, ops) = self.statement();
                let all: Vec<usize> = (0..k.loops.len()).collect();
                self.charge_nest(out, &all, ops);
                out.extend(self.point_loops(&all, vec![statement]));
            }
        }
        if let Some(e) = &k.stmt.epilogue {
            self.epilogue(out, e);
        }
    }

    /// The statement at one point of the compute nest, and its operations: a fold into the
    /// target, or a store to it.
    fn statement(&self) -> (Stmt, Ops) {
        let k = self.k;
        let (target, target_ops) = self.access_ref(0);
        let buffered = u32::from(self.buffered(0));
        let (value, _, value_ops) = self.value(&k.stmt.value);
        match k.stmt.reduce {
            Some(r) => {
                let carried = k.loops.last().is_some_and(|l| l.kind == LoopKind::Reduce);
                let (fold, value_ops) = match self.factors(r.kind, &k.stmt.value) {
                    // One fused multiply-add in place of the product and the sum.
                    Some(factor_ops) => (cost::fma(1, carried), factor_ops),
                    None => (cost::fold(r.kind, self.dtype(0), carried), value_ops),
                };
                let update = Ops {
                    load: buffered,
                    store: buffered,
                    ..fold
                };
                let fold = Stmt::Fold {
                    kind: r.kind,
                    dtype: self.dtype(0),
                    place: target,
                    value,
                };
                (fold, value_ops + target_ops + update)
            }
            None => {
                let store = Ops {
                    store: buffered,
                    ..Ops::default()
                };
                (Stmt::Store { place: target, value }, value_ops + target_ops + store)
            }
        }
    }

    /// The scalar compute nest with the indices `x` keeps (see [`indices`]), with its
    /// charges.
    fn kept_nest(&self, out: &mut Vec<Stmt>, x: &indices::Indices) {
        let k = self.k;
        let n = k.loops.len();
        // Once per tile: the strides, and each kept place's index with every loop at its
        // origin, as its subscripts give it.
        let mut once = int(n as u32);
        for &(i, l, var) in &x.strides {
            let (e, o) = self.stride(i, l);
            out.push(Stmt::Set(var, e));
            once += o;
        }
        for l in 0..n {
            out.push(Stmt::Set(self.point[l], self.origin(l)));
        }
        for (i, shift, a, walk) in &x.kept {
            let (place, o) = self.load_ref(*i, a, shift);
            let Place::Ldm { index, .. } = place else {
                unreachable!("kept places are in LDM")
            };
            out.push(Stmt::Set(walk[0], index));
            once += o;
        }
        charge_once(out, once);
        self.kept_active.set(true);
        let (statement, ops) = self.statement();
        self.kept_active.set(false);
        // From the innermost loop out: each loop's body, then its places' bumps; a loop
        // inside another starts its places' indices from the other's.
        let extents: Vec<Int> = (0..n).map(|j| self.extent(j)).collect();
        let copies = x.kept.len() as u32;
        let mut body = vec![statement];
        for l in (0..n).rev() {
            if l + 1 < n {
                let mut start: Vec<Stmt> = x.kept.iter().map(|w| Stmt::Set(w.3[l + 1], Int::Var(w.3[l]))).collect();
                start.extend(self.point_loops(&[l + 1], body));
                body = start;
            }
            let mut bumps = 0;
            for (i, _, _, walk) in &x.kept {
                if let Some(stride) = x.stride(*i, l) {
                    body.push(Stmt::Set(walk[l], Int::Var(walk[l]) + Int::Var(stride)));
                    bumps += 1;
                }
            }
            // Per iteration of the loop: its control and bumps, and the statement (innermost)
            // or the start of the loop inside with its copies.
            let own = match l + 1 < n {
                true => int(1 + copies),
                false => ops,
            };
            charge(out, own + int(bumps) + LOOP, Int::product(extents[..=l].to_vec()));
        }
        out.extend(self.point_loops(&[0], body));
    }

    /// After the tile of the last reduction tiles: every target element of the tile becomes
    /// the epilogue's value of it (in place, `acc` read from where the element is).
    fn epilogue(&self, out: &mut Vec<Stmt>, e: &Expr) {
        let k = self.k;
        let parallel: Vec<usize> = (0..k.loops.len())
            .filter(|&l| k.loops[l].kind == LoopKind::Parallel)
            .collect();
        let (target, target_ops) = self.access_ref(0);
        let (value, _, value_ops) = self.value(e);
        let store = Ops {
            store: u32::from(self.buffered(0)),
            ..Ops::default()
        };
        let mut ops = value_ops + target_ops + store;
        let mut stmts = Vec::new();
        if let Some(i) = keep_index(k) {
            // The reduced value, kept before the epilogue replaces it.
            let (kept, kept_ops) = self.access_ref(i);
            let (reduced, _, reduced_ops) = self.expr(&Expr::Acc);
            let store = Ops {
                store: u32::from(self.buffered(i)),
                ..Ops::default()
            };
            ops += kept_ops + reduced_ops + store;
            stmts.push(Stmt::Store {
                place: kept,
                value: reduced,
            });
        }
        stmts.push(Stmt::Store { place: target, value });
        let mut body = vec![Stmt::Comment("The epilogue, on the reduced values.".into())];
        match &self.epilogue {
            Some(v) => self.lanewise_nest(&mut body, v, stmts, ops),
            None => {
                self.charge_nest(&mut body, &parallel, ops);
                body.extend(self.point_loops(&parallel, stmts));
            }
        }
        self.at_last_tiles(out, &self.s.order, body);
    }

    /// Charges a nest of point loops over `loops` (outermost first) whose innermost body does
    /// `body`: the body and its loop control once per point, and the control of every outer
    /// loop (with the start of the loop inside it) once per its own iteration.
    fn charge_nest(&self, out: &mut Vec<Stmt>, loops: &[usize], body: Ops) {
        let extents: Vec<Int> = loops.iter().map(|&l| self.extent(l)).collect();
        let points = Int::product(extents.clone());
        charge(out, body + LOOP * u32::from(!loops.is_empty()), points);
        if loops.len() > 1 {
            let outer = (1..loops.len()).map(|j| Int::product(extents[..j].to_vec())).collect();
            charge(out, LOOP + int(1), Int::sum(outer));
        }
    }

    /// Point loops over `loops` (outermost first) around `inner`.
    fn point_loops(&self, loops: &[usize], inner: Vec<Stmt>) -> Vec<Stmt> {
        loops.iter().rev().fold(inner, |body, &l| {
            vec![Stmt::For {
                var: self.point[l],
                from: self.origin(l),
                to: self.origin(l) + self.extent(l),
                step: Int::Const(1),
                body,
            }]
        })
    }

    fn affine(&self, x: &Affine) -> Int {
        let terms: Vec<(i64, Int)> = x.terms.iter().map(|&(l, c)| (c, Int::Var(self.point[l]))).collect();
        linear(terms, x.offset)
    }

    /// Access `i`'s element, in an LDM buffer or in main memory directly, and the operations
    /// of its subscript and address (not of the access itself).
    fn access_ref(&self, i: usize) -> (Place, Ops) {
        self.load_ref(i, &self.all[i], &vec![0; self.all[i].index.len()])
    }

    /// The element of load `a`, which access `i` holds at displacement `shift` (a window's
    /// load, [`swflow_scheduler::loops::Stmt::windows`]), and the operations of its subscript
    /// and address.
    pub(super) fn load_ref(&self, i: usize, a: &Access, shift: &[usize]) -> (Place, Ops) {
        if let Some(v) = self.vars(i) {
            let half = if self.double(i) { Half::Current } else { Half::Single };
            let kept = self.indices.as_ref().filter(|_| self.kept_active.get());
            if let Some(var) = kept.and_then(|x| x.kept(i, shift)) {
                let place = Place::Ldm {
                    buf: v.buf,
                    half,
                    index: Int::Var(var),
                };
                return (place, Ops::default());
            }
            if self.shape(i).is_empty() {
                let place = Place::Ldm {
                    buf: v.buf,
                    half,
                    index: Int::Const(0),
                };
                return (place, Ops::default());
            }
            let row: Vec<Int> = v.half.map(Int::Var).into_iter().collect();
            let at = |arr: Array, d: usize| Int::Elem(arr, row.iter().cloned().chain([Int::Const(d as i64)]).collect());
            let mut ops = int(1);
            let mut idx = None;
            for (d, x) in a.index.iter().enumerate() {
                let Index::Affine(x) = x else {
                    unreachable!("buffered accesses have affine subscripts")
                };
                let term = match v.origin {
                    Some(org) if shift[d] != 0 => {
                        let free = Affine { offset: 0, ..x.clone() };
                        ops += cost::affine(&free) + int(1);
                        self.affine(&free) - at(org, d) + Int::Const(shift[d] as i64)
                    }
                    Some(org) => {
                        let free = Affine { offset: 0, ..x.clone() };
                        ops += cost::affine(&free);
                        self.affine(&free) - at(org, d)
                    }
                    None => {
                        ops += cost::affine(x);
                        self.affine(x) - at(v.start, d)
                    }
                };
                ops += int(1);
                idx = Some(match idx {
                    None => term,
                    Some(idx) => {
                        ops += int(2);
                        idx * at(v.extent, d) + term
                    }
                });
            }
            let idx = idx.unwrap_or(Int::Const(0));
            let place = match &v.stream {
                // A box of a streamed tensor lies in the arena's current half, at `pos`: the
                // half's row and `pos` add to the index.
                Some(st) => {
                    ops += int(3);
                    Place::Ldm {
                        buf: v.buf,
                        half: Half::At(Int::Var(st.h)),
                        index: Int::Var(st.pos) + idx,
                    }
                }
                None => Place::Ldm {
                    buf: v.buf,
                    half,
                    index: idx,
                },
            };
            (place, ops)
        } else {
            let st = strides(self.shape(i));
            let mut ops = int(1 + a.index.len().saturating_sub(1) as u32);
            let terms: Vec<Int> = a
                .index
                .iter()
                .zip(&st)
                .map(|(x, &stride)| {
                    let sub = match x {
                        Index::Affine(x) => {
                            ops += cost::affine(x);
                            self.affine(x)
                        }
                        Index::Gathered { access, extent } => {
                            let (pos, _, pos_ops) = self.load(access);
                            // The helper's two range checks and its wrap of negative positions.
                            ops += pos_ops + int(3) + branch(2);
                            Int::Gather(Box::new(pos), *extent)
                        }
                    };
                    if stride == 1 {
                        sub
                    } else {
                        ops += int(1);
                        sub * Int::Const(stride as i64)
                    }
                })
                .collect();
            let place = Place::Main {
                field: self.field(i),
                index: Int::sum(terms),
                write: is_written(self.k, i),
            };
            (place, ops)
        }
    }

    /// A load of `a`: its value, its type, and its operations (an LDM load when buffered).
    fn load(&self, a: &Access) -> (Value, DType, Ops) {
        let (i, shift) = window_of(&self.all, a).expect("every load is in one of the kernel's windows");
        let (place, ops) = self.load_ref(i, a, &shift);
        let load = Ops {
            load: u32::from(self.buffered(i)),
            ..Ops::default()
        };
        (Value::Load(place), self.dtype(i), ops + load)
    }

    /// When folding `value` is one fused multiply-add ([`super::fused_product`]), the
    /// operations that evaluate its two factors.
    fn factors(&self, kind: ReduceKind, value: &Expr) -> Option<Ops> {
        let Expr::Binary(BinaryOp::Mul, a, b) = value else {
            return None;
        };
        let (product, d, _) = self.expr(value);
        super::fused_product(kind, self.dtype(0), &product)?;
        let ((_, da, oa), (_, db, ob)) = (self.expr(a), self.expr(b));
        let flops = self.distinct_flops(&[a, b]);
        (da == d && db == d).then_some(Ops { flops, ..oa + ob })
    }

    /// [`Self::expr`] of a statement's value, its flops counting each distinct subexpression
    /// once: the computation's, which the lane-wise vector code performs once however often
    /// the value repeats it (an inlined window sum read by a square root and by a division),
    /// while the scalar code, evaluating the tree as written, issues every repeat.
    fn value(&self, e: &Expr) -> (Value, DType, Ops) {
        let (value, d, ops) = self.expr(e);
        let flops = self.distinct_flops(&[e]);
        (value, d, Ops { flops, ..ops })
    }

    /// Flops of the operators of the expressions `roots`, each distinct subexpression once.
    fn distinct_flops<'e>(&self, roots: &[&'e Expr]) -> u32 {
        let mut seen: Vec<&'e Expr> = Vec::new();
        let mut stack = roots.to_vec();
        let mut flops = 0;
        while let Some(e) = stack.pop() {
            let prologue = self.prologue.as_ref().is_some_and(|(pr, _)| std::ptr::eq(e, pr.expr));
            if seen.contains(&e) || prologue {
                continue;
            }
            seen.push(e);
            let dtype = |a: &Expr| self.expr(a).1;
            flops += match e {
                Expr::Unary(op, a) => cost::unary(*op, dtype(a)).flops,
                Expr::Binary(op, a, _) => cost::binary(*op, dtype(a)).flops,
                Expr::Cast(to, a) => cost::cast(dtype(a), *to).flops,
                Expr::Load(_) | Expr::Acc | Expr::Const(_) | Expr::Select(..) => 0,
            };
            match e {
                Expr::Unary(_, a) | Expr::Cast(_, a) => stack.push(a),
                Expr::Binary(_, a, b) => stack.extend([&**a, &**b]),
                Expr::Select(c, a, b) => stack.extend([&**c, &**a, &**b]),
                Expr::Load(_) | Expr::Acc | Expr::Const(_) => {}
            }
        }
        flops
    }

    /// An expression's value, its type, and the operations that evaluate it. The prologue's
    /// factor is a load of its main access, whose box the prologue has rewritten.
    fn expr(&self, e: &Expr) -> (Value, DType, Ops) {
        match &self.prologue {
            Some((pr, _)) if std::ptr::eq(e, pr.expr) => self.load(pr.main),
            _ => self.expr_node(e),
        }
    }

    /// [`Self::expr`] of an expression's own operator (a prologue's factor included).
    fn expr_node(&self, e: &Expr) -> (Value, DType, Ops) {
        match e {
            Expr::Load(a) => self.load(a),
            Expr::Acc => {
                let (place, ops) = self.access_ref(0);
                let load = Ops {
                    load: u32::from(self.buffered(0)),
                    ..Ops::default()
                };
                (Value::Load(place), self.dtype(0), ops + load)
            }
            Expr::Const(c) => (Value::Const(*c), c.dtype(), Ops::default()),
            Expr::Unary(op, a) => {
                let (a, d, o) = self.expr(a);
                (Value::Unary(*op, d, Box::new(a)), d, o + cost::unary(*op, d))
            }
            Expr::Binary(op, a, b) => {
                let (a, d, oa) = self.expr(a);
                let (b, _, ob) = self.expr(b);
                let out = if op.is_comparison() { DType::Bool } else { d };
                let v = Value::Binary(*op, d, Box::new(a), Box::new(b));
                (v, out, oa + ob + cost::binary(*op, d))
            }
            Expr::Select(c, a, b) => {
                let (c, _, oc) = self.expr(c);
                let (a, d, oa) = self.expr(a);
                let (b, _, ob) = self.expr(b);
                let v = Value::Select(Box::new(c), Box::new(a), Box::new(b));
                (v, d, oc + oa + ob + branch(1))
            }
            Expr::Cast(to, a) => {
                let (a, from, o) = self.expr(a);
                (Value::Cast(from, *to, Box::new(a)), *to, o + cost::cast(from, *to))
            }
        }
    }
}

/// Operators of [`linear`]'s C: a multiply per coefficient other than ±1, an add or subtract
/// between terms and for a nonzero constant.
fn linear_ops(terms: &[(i64, Int)], k: i64) -> u32 {
    let muls = terms.iter().filter(|(c, _)| c.abs() != 1).count();
    let adds = terms.len().saturating_sub(1) + usize::from(k != 0 && !terms.is_empty());
    (muls + adds) as u32
}

/// `Σ c * e + k`, without unit coefficients or zero terms.
fn linear(terms: Vec<(i64, Int)>, k: i64) -> Int {
    let mut acc: Option<Int> = None;
    for (c, e) in terms {
        acc = Some(match acc {
            // The first term carries its sign.
            None if c == 1 => e,
            None => Int::Const(c) * e,
            Some(a) => {
                let mag = if c.abs() == 1 { e } else { Int::Const(c.abs()) * e };
                if c < 0 {
                    a - mag
                } else {
                    a + mag
                }
            }
        });
    }
    match acc {
        None => Int::Const(k),
        Some(a) if k < 0 => a - Int::Const(-k),
        Some(a) if k > 0 => a + Int::Const(k),
        Some(a) => a,
    }
}

/// Integer operators of `e` as the C evaluates it (a minimum is a compare and a select; a
/// gathered position adds its helper's range checks).
fn int_ops(e: &Int) -> Ops {
    match e {
        Int::Const(_) | Int::Var(_) | Int::Cpe => Ops::default(),
        Int::Elem(_, index) => index.iter().map(int_ops).fold(Ops::default(), |a, b| a + b),
        Int::Add(a, b) | Int::Sub(a, b) | Int::Mul(a, b) => int_ops(a) + int_ops(b) + int(1),
        Int::Div(a, b) | Int::Rem(a, b) => {
            int_ops(a)
                + int_ops(b)
                + Ops {
                    div: 1,
                    ..Ops::default()
                }
        }
        Int::Min(a, b) => int_ops(a) + int_ops(b) + int(2),
        Int::Gather(v, _) => value_int_ops(v) + int(3) + branch(2),
    }
}

/// Integer operators of the subscripts in `v` (its loads are charged where they happen: a
/// direct access by the emulator).
fn value_int_ops(v: &Value) -> Ops {
    match v {
        Value::Load(Place::Ldm { index, .. } | Place::Main { index, .. }) => int_ops(index),
        Value::Index(e) => int_ops(e),
        Value::Const(_) => Ops::default(),
        Value::Unary(_, _, a) | Value::Cast(_, _, a) => value_int_ops(a),
        Value::Binary(_, _, a, b) => value_int_ops(a) + value_int_ops(b),
        Value::Select(c, a, b) => value_int_ops(c) + value_int_ops(a) + value_int_ops(b),
    }
}

/// Appends straight-line `stmts` (assignments, stack entries, waits, DMA) after a charge of
/// their integer work and local stores.
fn charged(out: &mut Vec<Stmt>, stmts: Vec<Stmt>) {
    let mut ops = Ops::default();
    for st in &stmts {
        ops += match st {
            Stmt::Set(_, e) => int_ops(e),
            Stmt::SetElem(_, index, e) => {
                index.iter().map(int_ops).fold(int_ops(e), |a, b| a + b)
                    + Ops {
                        store: 1,
                        ..Ops::default()
                    }
            }
            Stmt::Store { place, value } => value_int_ops(&Value::Load(place.clone())) + value_int_ops(value),
            Stmt::Wait { count, .. } => int_ops(count),
            Stmt::Dma(_) | Stmt::Comment(_) => Ops::default(),
            other => unreachable!("not a straight-line statement: {other:?}"),
        };
    }
    charge_once(out, ops);
    out.extend(stmts);
}
