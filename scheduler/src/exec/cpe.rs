//! Scheduled execution: every CPE runs its chunk of partition points with explicit LDM
//! buffers filled and drained by DMA, as the schedule says.
//!
//! LDM buffers hold one tile of an access, packed (row-major over the tile's actual extents,
//! so edge tiles are contiguous too). A DMA copies the box a subscript spans over the tile
//! between main memory and the buffer; it is counted as one transfer per contiguous-or-strided
//! run (runs contiguous in both memories are merged; one level of striding is one strided
//! DMA). Every DMA is checked against the buffer's capacity and the tensor's bounds, and every
//! LDM access against the buffer: a violation is an error naming the kernel and the CPE.

use std::borrow::Cow;

use swflow_frontend::ir::{strides, Data, Tensor};

use super::eval::{affine_place, Locate, PatternCache, Place, Target};
use super::walk::{self, count, target_read_first, walk, Event, Moves, Traffic};
use super::{eval_statement, fill, get_clipped, ExecError, Memory};
use crate::loops::{Access, Index, Kernel, Program};
use crate::schedule::clip::Clipped;
use crate::schedule::share::{segment_lengths, split_unit};
use crate::schedule::{accesses, keep_index, window_of, Residence, Schedule};
use crate::target::Target as Machine;

/// What one kernel does on the core group.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KernelStats {
    pub kernel: String,
    /// DMA operations and bytes, and direct main-memory accesses, over all CPEs.
    pub traffic: Traffic,
    /// Planned LDM bytes per CPE (buffers and reply counters).
    pub ldm_bytes: usize,
    /// Mean over max partition points per CPE.
    pub balance: f64,
    /// Points of the iteration domain.
    pub points: usize,
}

/// The statistics of a scheduled kernel, from its tile walk (without running it). A box of a
/// tensor stored as tape records (see [`crate::tape`]) moves in one transfer, and a streamed
/// tensor moves in layers.
pub fn kernel_stats(p: &Program, k: &Kernel, s: &Schedule, machine: &Machine) -> KernelStats {
    let all = accesses(k);
    let shapes = walk::shapes(p, k);
    let at = p.kernels.iter().position(|x| x.name == k.name);
    let moves: Vec<Moves> = (0..all.len())
        .map(|i| match (&p.tape, at) {
            (Some(plan), Some(at)) => match (plan.stream_of(p, at, i), plan.record_of(p, at, i)) {
                (Some(x), _) => Moves::Layers {
                    half: x.half,
                    first: x.index == 0,
                },
                (None, Some(_)) => Moves::Records,
                (None, None) => Moves::Boxes,
            },
            _ => Moves::Boxes,
        })
        .collect();
    let lengths = segment_lengths(k, s, machine.cpes);
    let units: Vec<Option<usize>> = (0..s.buffers.len()).map(|i| split_unit(k, p, s, i, &lengths)).collect();
    KernelStats {
        kernel: k.name.clone(),
        traffic: count(k, &shapes, &moves, &units, s, machine.cpes),
        ldm_bytes: s.ldm_bytes(k, machine),
        balance: s.balance(machine.cpes),
        points: k.points(),
    }
}

/// Row-major offsets in a tensor of `shape` of the elements of a box, in box order.
fn box_offsets(shape: &[usize], start: &[i64], extent: &[usize]) -> Vec<usize> {
    let row = strides(shape);
    let mut offsets = vec![0usize];
    for d in 0..extent.len() {
        let (s, r) = (start[d] as usize * row[d], row[d]);
        offsets = offsets
            .iter()
            .flat_map(|&o| (0..extent[d]).map(move |i| o + s + i * r))
            .collect();
    }
    offsets
}

/// DMA get: the box of a main-memory tensor into the front of a packed buffer.
fn get_box(main: &Data, shape: &[usize], start: &[i64], extent: &[usize], buf: &mut Data) {
    let offsets = box_offsets(shape, start, extent);
    match (main, buf) {
        (Data::F32(m), Data::F32(b)) => offsets.iter().zip(b.iter_mut()).for_each(|(&o, x)| *x = m[o]),
        (Data::F64(m), Data::F64(b)) => offsets.iter().zip(b.iter_mut()).for_each(|(&o, x)| *x = m[o]),
        (Data::I64(m), Data::I64(b)) => offsets.iter().zip(b.iter_mut()).for_each(|(&o, x)| *x = m[o]),
        (Data::Bool(m), Data::Bool(b)) => offsets.iter().zip(b.iter_mut()).for_each(|(&o, x)| *x = m[o]),
        _ => unreachable!("buffers have their tensor's type"),
    }
}

/// DMA put: the front of a packed buffer into the box of a main-memory tensor.
fn put_box(main: &mut Data, shape: &[usize], start: &[i64], extent: &[usize], buf: &Data) {
    let offsets = box_offsets(shape, start, extent);
    match (main, buf) {
        (Data::F32(m), Data::F32(b)) => offsets.iter().zip(b).for_each(|(&o, &x)| m[o] = x),
        (Data::F64(m), Data::F64(b)) => offsets.iter().zip(b).for_each(|(&o, &x)| m[o] = x),
        (Data::I64(m), Data::I64(b)) => offsets.iter().zip(b).for_each(|(&o, &x)| m[o] = x),
        (Data::Bool(m), Data::Bool(b)) => offsets.iter().zip(b).for_each(|(&o, &x)| m[o] = x),
        _ => unreachable!("buffers have their tensor's type"),
    }
}

/// A buffer with the start and extent of the box it holds.
type HeldBox<'a> = (&'a Data, Vec<i64>, Vec<usize>);

/// One tile's view of the accesses: LDM buffers for buffered ones, main memory for direct.
struct TileView<'a> {
    p: &'a Program,
    k: &'a Kernel,
    mem: &'a Memory,
    origin: &'a [usize],
    /// Per access (in `accesses` order): the buffer and the box it holds, when buffered.
    boxes: Vec<Option<HeldBox<'a>>>,
    /// The kernel's [`accesses`], to find the window holding a load.
    order: &'a [Cow<'a, Access>],
}

impl<'a> Locate<'a> for TileView<'a> {
    fn place(&self, a: &Access) -> Result<Place<'a>, String> {
        let (slot, _) = window_of(self.order, a).ok_or("unplanned access")?;
        match &self.boxes[slot] {
            Some((data, start, extent)) => {
                let (base, strides) = box_place(a, self.origin, start, extent, self.k.loops.len());
                Ok(Place {
                    data,
                    base,
                    strides,
                    gathers: Vec::new(),
                })
            }
            None => {
                let t = self.k.operands[a.operand];
                let data = self.mem.read(self.p, self.k, a)?;
                affine_place(
                    a,
                    data,
                    &self.p.tensor(t).ty.shape,
                    self.origin,
                    self.k.loops.len(),
                    &|inner| self.place(inner),
                )
            }
        }
    }
}

/// Runs one scheduled kernel on all CPEs.
pub fn run_kernel(p: &Program, k: &Kernel, mem: &mut Memory, machine: &Machine) -> Result<KernelStats, ExecError> {
    let s = k.schedule.as_ref().ok_or_else(|| ExecError::Kernel {
        kernel: k.name.clone(),
        cpe: None,
        reason: "not scheduled".into(),
    })?;
    // The executor judges schedules by what they do; it only refuses ones it cannot walk.
    let n = k.loops.len();
    let walkable = s.tiles.len() == n
        && s.ranges.len() == n
        && !s.tiles.contains(&0)
        && s.buffers.len() == accesses(k).len()
        && s.partition.iter().chain(&s.order).all(|&l| l < n)
        && accesses(k)
            .iter()
            .zip(&s.buffers)
            .all(|(a, b)| b.residence == Residence::Direct || a.index.iter().all(|i| matches!(i, Index::Affine(_))));
    if !walkable {
        let reason = "schedule does not match the kernel's loops and accesses".to_string();
        return Err(ExecError::Kernel {
            kernel: k.name.clone(),
            cpe: None,
            reason,
        });
    }
    let target_id = k.operands[0];
    let mut target = mem.take_target(p, k);
    let keep_id = k.stmt.keep.as_ref().map(|a| k.operands[a.operand]);
    let mut kept = keep_id.map(|t| mem.take(p, t));
    let stats = kernel_stats(p, k, s, machine);
    let mut result = Ok(());
    for cpe in 0..machine.cpes {
        let written = Written {
            target: &mut target,
            kept: kept.as_mut(),
        };
        result = run_cpe(p, k, s, mem, written, machine, cpe).map_err(|reason| ExecError::Kernel {
            kernel: k.name.clone(),
            cpe: Some(cpe),
            reason,
        });
        if result.is_err() {
            break;
        }
    }
    mem.put(p, target_id, target);
    if let (Some(t), Some(d)) = (keep_id, kept) {
        mem.put(p, t, d);
    }
    result.map(|()| stats)
}

/// The main-memory storage a kernel writes: its target's, and its kept value's if it keeps
/// one.
struct Written<'d> {
    target: &'d mut Data,
    kept: Option<&'d mut Data>,
}

/// Place of a buffered access in its packed box, for a tile at `origin`.
fn box_place(a: &Access, origin: &[usize], start: &[i64], extent: &[usize], n_loops: usize) -> (isize, Vec<isize>) {
    let bstride = strides(extent);
    let mut base = 0isize;
    let mut st = vec![0isize; n_loops];
    for (d, i) in a.index.iter().enumerate() {
        let Index::Affine(x) = i else {
            unreachable!("gathered accesses are direct")
        };
        base += (x.eval(origin) - start[d]) as isize * bstride[d] as isize;
        for &(l, c) in &x.terms {
            st[l] += c as isize * bstride[d] as isize;
        }
    }
    (base, st)
}

#[allow(clippy::too_many_arguments)]
fn run_cpe(
    p: &Program,
    k: &Kernel,
    s: &Schedule,
    mem: &Memory,
    written: Written<'_>,
    machine: &Machine,
    cpe: usize,
) -> Result<(), String> {
    let Written { target, mut kept } = written;
    let keep = keep_index(k);
    let all = accesses(k);
    let shapes: Vec<&[usize]> = all
        .iter()
        .map(|a| p.tensor(k.operands[a.operand]).ty.shape.as_slice())
        .collect();
    let used: usize = s.buffers.iter().map(|b| b.ldm_bytes()).sum();
    if used > machine.ldm_budget() {
        return Err(format!(
            "buffers need {used} LDM bytes, {} available",
            machine.ldm_budget()
        ));
    }
    let mut ldm: Vec<Option<Data>> = s
        .buffers
        .iter()
        .zip(&all)
        .map(|(b, a)| {
            (b.residence == Residence::Buffer)
                .then(|| Data::zeros(p.tensor(k.operands[a.operand]).ty.dtype, b.elements()))
        })
        .collect();
    let dense = k.target_is_dense(&s.tiles);
    let mut held: Vec<Option<(Vec<i64>, Vec<usize>)>> = vec![None; all.len()];
    let mut cache = PatternCache::default();
    walk(k, &walk::shapes(p, k), s, cpe, &mut |e| {
        match e {
            Event::Fill {
                access: i,
                start,
                extent,
                first_visit,
            } => {
                let elems: usize = extent.iter().product();
                if elems > s.buffers[i].elements() {
                    return Err(format!(
                        "DMA of {elems} elements past its LDM buffer of {}",
                        s.buffers[i].elements()
                    ));
                }
                // A guarded read's box may leave its tensor: then it is padded, and the part
                // inside comes in.
                let clipped = all[i]
                    .pad
                    .and_then(|v| Some((v, Clipped::of(shapes[i], start, extent)?)));
                let outside = start
                    .iter()
                    .zip(extent)
                    .zip(shapes[i])
                    .any(|((&s0, &e), &dim)| s0 < 0 || s0 as usize + e > dim);
                if outside && clipped.is_none() {
                    return Err(format!("DMA box {start:?}+{extent:?} outside tensor {:?}", shapes[i]));
                }
                let buf = ldm[i].as_mut().expect("buffered accesses have LDM");
                if Some(i) == keep {
                    // Written by the epilogue before it is put: nothing to bring in.
                } else if i > 0 {
                    let src = mem.read(p, k, &all[i])?;
                    match clipped {
                        Some((pad, c)) => {
                            fill(buf, elems, pad);
                            get_clipped(src, shapes[i], &c, extent, buf);
                        }
                        None => get_box(src, shapes[i], start, extent, buf),
                    }
                } else if target_read_first(k, &s.tiles, first_visit) {
                    get_box(target, shapes[0], start, extent, buf);
                } else if let Some(r) = k.stmt.reduce {
                    // Dense and visited for the first time: every element starts from init.
                    fill(buf, elems, r.init);
                }
                held[i] = Some((start.to_vec(), extent.to_vec()));
            }
            Event::WriteBack { access, start, extent } => {
                let main = match kept.as_deref_mut() {
                    Some(d) if access > 0 => d,
                    _ => &mut *target,
                };
                let buf = ldm[access].as_ref().expect("written-back accesses are buffered");
                put_box(main, shapes[access], start, extent, buf);
            }
            Event::Compute {
                origin,
                extent,
                first_visit,
                last_visit,
            } => {
                let mut tbuf = ldm[0].take();
                let mut kbuf = keep.and_then(|i| ldm[i].take());
                let boxes = ldm
                    .iter()
                    .zip(&held)
                    .enumerate()
                    .map(|(i, (buf, h))| match (buf, h) {
                        (Some(d), Some((st, ex))) if i > 0 && Some(i) != keep => Some((d, st.clone(), ex.clone())),
                        _ => None,
                    })
                    .collect();
                let view = TileView {
                    p,
                    k,
                    mem,
                    origin,
                    boxes,
                    order: &all,
                };
                let buffered = tbuf.is_some() && held[0].is_some();
                let (data, base, strides): (&mut Data, isize, Vec<isize>) = match (&mut tbuf, &held[0]) {
                    (Some(buf), Some((st, ex))) => {
                        let (base, strides) = box_place(&k.stmt.target, origin, st, ex, k.loops.len());
                        (buf, base, strides)
                    }
                    _ => {
                        let (base, strides) = {
                            let place =
                                affine_place(&k.stmt.target, target, shapes[0], origin, k.loops.len(), &|_| {
                                    Err("gathered target".into())
                                })?;
                            (place.base, place.strides)
                        };
                        (&mut *target, base, strides)
                    }
                };
                // The kept value's place: its buffer, or main memory when the target's is.
                let keep_target = match (keep, &mut kbuf, kept.as_deref_mut()) {
                    (Some(i), Some(buf), _) => {
                        let (st, ex) = held[i].as_ref().expect("the kept box is claimed with the target's");
                        let (base, strides) = box_place(&k.stmt.target, origin, st, ex, k.loops.len());
                        Some(Target {
                            data: buf,
                            base,
                            strides,
                        })
                    }
                    (Some(_), None, Some(d)) => Some(Target {
                        data: d,
                        base,
                        strides: strides.clone(),
                    }),
                    _ => None,
                };
                // A buffered dense target was filled with the initial value; otherwise the
                // elements this tile folds into start from it here, on their first visit.
                let init = first_visit && !(buffered && dense);
                let target = Target { data, base, strides };
                let result = eval_statement(k, extent, init, last_visit, &view, target, keep_target, &mut cache);
                drop(view);
                ldm[0] = tbuf;
                if let Some(i) = keep {
                    ldm[i] = kbuf;
                }
                result?;
            }
        }
        Ok(())
    })
}

/// Runs every kernel of a scheduled program; returns the outputs and per-kernel statistics.
pub fn run_program(
    p: &Program,
    inputs: &[Tensor],
    machine: &Machine,
) -> Result<(Vec<Tensor>, Vec<KernelStats>), ExecError> {
    let mut mem = Memory::new(p, inputs)?;
    let mut stats = Vec::new();
    for k in &p.kernels {
        stats.push(run_kernel(p, k, &mut mem, machine)?);
    }
    Ok((mem.outputs(p), stats))
}
