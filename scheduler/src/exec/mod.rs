//! Executing loop IR.
//!
//! [`run_reference`] runs every kernel over its whole domain directly on main memory: the
//! meaning of unscheduled loop IR. Scheduled execution, with per-CPE LDM buffers and DMA, is in
//! [`cpe`].

pub mod cpe;
mod eval;
pub mod walk;

use swflow_frontend::ir::{Data, Tensor};

use crate::loops::{Access, Expr, Index, Kernel, LoopKind, Program, TensorKind};
use crate::schedule::clip::Clipped;
use eval::{affine_place, eval_box, scalar_data, Locate, PatternCache, Place, Target};

/// A failure while executing loop IR, naming the kernel and, for scheduled execution, the CPE.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ExecError {
    #[error("program expects {expected} inputs, {given} were given")]
    Inputs { expected: usize, given: usize },
    #[error("input '{name}' must be {expected}, got {given}")]
    InputType {
        name: String,
        expected: String,
        given: String,
    },
    #[error("kernel '{kernel}'{}: {reason}", cpe.map(|c| format!(" on CPE {c}")).unwrap_or_default())]
    Kernel {
        kernel: String,
        cpe: Option<usize>,
        reason: String,
    },
}

/// Main memory: one data vector per tensor that owns storage (views share their source's).
pub struct Memory {
    storage: Vec<Option<Data>>,
}

impl Memory {
    /// Inputs and constants loaded, computed tensors zeroed.
    pub fn new(p: &Program, inputs: &[Tensor]) -> Result<Memory, ExecError> {
        if inputs.len() != p.inputs.len() {
            return Err(ExecError::Inputs {
                expected: p.inputs.len(),
                given: inputs.len(),
            });
        }
        let mut storage: Vec<Option<Data>> = vec![None; p.tensors.len()];
        for (i, t) in p.tensors.iter().enumerate() {
            storage[i] = match &t.kind {
                TensorKind::Const(c) => Some(c.data().clone()),
                TensorKind::Temp => Some(Data::zeros(t.ty.dtype, t.ty.numel())),
                TensorKind::Input | TensorKind::View(_) => None,
            };
        }
        for (&id, t) in p.inputs.iter().zip(inputs) {
            let info = p.tensor(id);
            if t.ty() != info.ty {
                return Err(ExecError::InputType {
                    name: info.name.clone(),
                    expected: info.ty.to_string(),
                    given: t.ty().to_string(),
                });
            }
            storage[id.index()] = Some(t.data().clone());
        }
        Ok(Memory { storage })
    }

    pub fn data(&self, p: &Program, t: crate::loops::TensorId) -> &Data {
        self.storage[p.storage(t).index()]
            .as_ref()
            .expect("every storage tensor is allocated")
    }

    /// The value of tensor `t` (under its own shape).
    pub fn tensor(&self, p: &Program, t: crate::loops::TensorId) -> Tensor {
        Tensor::new(p.tensor(t).ty.shape.clone(), self.data(p, t).clone()).expect("storage matches the tensor's size")
    }

    /// The storage operand `a` of kernel `k` reads; an error while it is taken out (as the
    /// tensor a kernel keeps its reduced value in, which it must not read).
    pub(crate) fn read(&self, p: &Program, k: &Kernel, a: &Access) -> Result<&Data, String> {
        let t = k.operands[a.operand];
        self.storage[p.storage(t).index()]
            .as_ref()
            .ok_or_else(|| "the value reads the tensor the kernel keeps its reduced value in".to_string())
    }

    /// The storage of `k`'s target, to write while the kernel reads main memory: taken out,
    /// or copied when the kernel also reads other elements of it (which the kernel does not
    /// write, so the copy's reads see their values).
    pub(crate) fn take_target(&mut self, p: &Program, k: &Kernel) -> Data {
        let t = k.operands[0];
        let reads_it = k
            .stmt
            .read_accesses()
            .iter()
            .any(|a| p.storage(k.operands[a.operand]) == p.storage(t));
        if reads_it {
            self.data(p, t).clone()
        } else {
            self.take(p, t)
        }
    }

    /// Takes the storage of `t` out to write it while other tensors are read.
    pub(crate) fn take(&mut self, p: &Program, t: crate::loops::TensorId) -> Data {
        self.storage[p.storage(t).index()]
            .take()
            .expect("a kernel's target is allocated")
    }

    pub(crate) fn put(&mut self, p: &Program, t: crate::loops::TensorId, d: Data) {
        self.storage[p.storage(t).index()] = Some(d);
    }

    /// The program's outputs.
    pub fn outputs(&self, p: &Program) -> Vec<Tensor> {
        p.outputs.iter().map(|(_, t)| self.tensor(p, *t)).collect()
    }
}

/// A guarded read's clipped box copied to its place in the packed box `extent`, row by row
/// (what the transfers and moves of [`Clipped`] achieve, done directly).
pub(crate) fn get_clipped(main: &Data, shape: &[usize], c: &Clipped, extent: &[usize], buf: &mut Data) {
    let Some(last) = shape.len().checked_sub(1) else { return };
    if c.is_empty() {
        return;
    }
    let (mpitch, lpitch) = (
        swflow_frontend::ir::strides(shape),
        swflow_frontend::ir::strides(extent),
    );
    let width = c.extent[last];
    let rows: usize = c.extent[..last].iter().product();
    let mut index = vec![0usize; last];
    for _ in 0..rows {
        let m: usize = (0..=last)
            .map(|j| (c.lo[j] + index.get(j).copied().unwrap_or(0)) * mpitch[j])
            .sum();
        let l: usize = (0..=last)
            .map(|j| (c.at[j] + index.get(j).copied().unwrap_or(0)) * lpitch[j])
            .sum();
        match (main, &mut *buf) {
            (Data::F32(x), Data::F32(y)) => y[l..l + width].copy_from_slice(&x[m..m + width]),
            (Data::F64(x), Data::F64(y)) => y[l..l + width].copy_from_slice(&x[m..m + width]),
            (Data::I64(x), Data::I64(y)) => y[l..l + width].copy_from_slice(&x[m..m + width]),
            (Data::Bool(x), Data::Bool(y)) => y[l..l + width].copy_from_slice(&x[m..m + width]),
            _ => unreachable!("buffers have their tensor's type"),
        }
        for j in (0..last).rev() {
            index[j] += 1;
            if index[j] < c.extent[j] {
                break;
            }
            index[j] = 0;
        }
    }
}

/// Sets the first `n` elements of `buf` to `v`.
pub(crate) fn fill(buf: &mut Data, n: usize, v: crate::loops::Scalar) {
    match (buf, scalar_data(v)) {
        (Data::F32(b), Data::F32(x)) => b[..n].fill(x[0]),
        (Data::F64(b), Data::F64(x)) => b[..n].fill(x[0]),
        (Data::I64(b), Data::I64(x)) => b[..n].fill(x[0]),
        (Data::Bool(b), Data::Bool(x)) => b[..n].fill(x[0]),
        _ => unreachable!("fill values have the buffer's type"),
    }
}

/// A guarded read over a whole kernel domain: the box it spans, padded where it leaves its
/// tensor, and the access re-based into that box.
struct PaddedCopy {
    access: Access,
    rebased: Access,
    extent: Vec<usize>,
    data: Data,
}

impl PaddedCopy {
    /// The copy for guarded read `a` of kernel `k`, or `None` when it stays inside its tensor.
    fn of(p: &Program, k: &Kernel, mem: &Memory, a: &Access) -> Result<Option<PaddedCopy>, String> {
        let Some(pad) = a.pad else { return Ok(None) };
        let t = k.operands[a.operand];
        let shape = &p.tensor(t).ty.shape;
        let origin = vec![0; k.loops.len()];
        let (start, extent) = walk::span(a, &origin, &k.extents());
        let Some(c) = Clipped::of(shape, &start, &extent) else {
            return Ok(None);
        };
        let src = mem.read(p, k, a)?;
        let n = extent.iter().product();
        let mut data = Data::zeros(pad.dtype(), n);
        fill(&mut data, n, pad);
        get_clipped(src, shape, &c, &extent, &mut data);
        let mut rebased = a.clone();
        rebased.pad = None;
        for (i, s0) in rebased.index.iter_mut().zip(&start) {
            if let Index::Affine(x) = i {
                x.offset -= s0;
            }
        }
        Ok(Some(PaddedCopy {
            access: a.clone(),
            rebased,
            extent,
            data,
        }))
    }
}

/// Main-memory places for a kernel's accesses, at box origin `origin`; guarded reads that
/// leave their tensor read their padded copies.
struct MainMemory<'a> {
    p: &'a Program,
    k: &'a Kernel,
    mem: &'a Memory,
    padded: &'a [PaddedCopy],
    origin: Vec<usize>,
}

impl<'a> Locate<'a> for MainMemory<'a> {
    fn place(&self, a: &Access) -> Result<Place<'a>, String> {
        if let Some(c) = self.padded.iter().find(|c| c.access == *a) {
            return affine_place(
                &c.rebased,
                &c.data,
                &c.extent,
                &self.origin,
                self.k.loops.len(),
                &|_| Err("guarded reads have affine subscripts".into()),
            );
        }
        let t = self.k.operands[a.operand];
        let data = self.mem.read(self.p, self.k, a)?;
        let shape = &self.p.tensor(t).ty.shape;
        affine_place(a, data, shape, &self.origin, self.k.loops.len(), &|inner| {
            self.place(inner)
        })
    }
}

/// Evaluates kernel `k`'s statement over the box `0 <= loop < extents[loop]` into `target`:
/// first, when `init`, the reduction's initial value into the box's target elements; then the
/// value, folded by the reduction if there is one; then, when `finish`, the reduced values
/// copied into `keep` (the place of the kept value, for a kernel that keeps it) and the
/// epilogue on the box's target elements.
#[allow(clippy::too_many_arguments)]
pub(crate) fn eval_statement<'a>(
    k: &Kernel,
    extents: &[usize],
    init: bool,
    finish: bool,
    loc: &impl Locate<'a>,
    mut target: Target<'_>,
    keep: Option<Target<'_>>,
    cache: &mut PatternCache,
) -> Result<(), String> {
    let collapsed = collapse_reductions(k, extents);
    if let Some(r) = k.stmt.reduce.filter(|_| init) {
        eval_box(&Expr::Const(r.init), None, &collapsed, loc, target.reborrow(), cache)?;
    }
    let kind = k.stmt.reduce.map(|r| r.kind);
    eval_box(&k.stmt.value, kind, extents, loc, target.reborrow(), cache)?;
    if !finish {
        return Ok(());
    }
    if let Some(keep) = keep {
        copy_box(&collapsed, &target, keep);
    }
    match &k.stmt.epilogue {
        Some(e) => eval_box(e, None, &collapsed, loc, target, cache),
        None => Ok(()),
    }
}

/// Copies the element of `from` at every point of the box `0 <= loop < extents[loop]` to the
/// same point of `to` (both of one type).
fn copy_box(extents: &[usize], from: &Target<'_>, to: Target<'_>) {
    if extents.contains(&0) {
        return;
    }
    let offset = |t: &Target<'_>, point: &[usize]| -> usize {
        let o = t.base
            + point
                .iter()
                .zip(&t.strides)
                .map(|(&i, &s)| i as isize * s)
                .sum::<isize>();
        usize::try_from(o).expect("box places lie in their storage")
    };
    let mut point = vec![0usize; extents.len()];
    loop {
        let (i, j) = (offset(from, &point), offset(&to, &point));
        match (&*from.data, &mut *to.data) {
            (Data::F32(a), Data::F32(b)) => b[j] = a[i],
            (Data::F64(a), Data::F64(b)) => b[j] = a[i],
            (Data::I64(a), Data::I64(b)) => b[j] = a[i],
            (Data::Bool(a), Data::Bool(b)) => b[j] = a[i],
            _ => unreachable!("a kept value has the target's type"),
        }
        let mut d = extents.len();
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            point[d] += 1;
            if point[d] < extents[d] {
                break;
            }
            point[d] = 0;
        }
    }
}

/// Box extents with every reduction loop collapsed to one point.
fn collapse_reductions(k: &Kernel, extents: &[usize]) -> Vec<usize> {
    extents
        .iter()
        .zip(&k.loops)
        .map(|(&e, l)| if l.kind == LoopKind::Reduce { 1 } else { e })
        .collect()
}

/// Runs one kernel over its whole domain on main memory.
pub fn run_kernel_reference(p: &Program, k: &Kernel, mem: &mut Memory) -> Result<(), ExecError> {
    let fail = |reason: String| ExecError::Kernel {
        kernel: k.name.clone(),
        cpe: None,
        reason,
    };
    let target_id = k.operands[0];
    let mut target = mem.take_target(p, k);
    let keep_id = k.stmt.keep.as_ref().map(|a| k.operands[a.operand]);
    let mut kept = keep_id.map(|t| mem.take(p, t));
    let origin = vec![0; k.loops.len()];
    let shape = p.tensor(target_id).ty.shape.clone();
    let result = (|| {
        let tplace = affine_place(&k.stmt.target, &target, &shape, &origin, k.loops.len(), &|_| {
            Err("gathered target".into())
        })?;
        let (base, strides) = (tplace.base, tplace.strides);
        let mut cache = PatternCache::default();
        let mut padded = Vec::new();
        for a in k.stmt.read_accesses() {
            if !padded.iter().any(|c: &PaddedCopy| c.access == *a) {
                padded.extend(PaddedCopy::of(p, k, mem, a)?);
            }
        }
        let loc = MainMemory {
            p,
            k,
            mem,
            padded: &padded,
            origin: origin.clone(),
        };
        let target = Target {
            data: &mut target,
            base,
            strides: strides.clone(),
        };
        // The kept value has the target's subscripts and shape: the same place.
        let keep = kept.as_mut().map(|data| Target { data, base, strides });
        eval_statement(k, &k.extents(), true, true, &loc, target, keep, &mut cache)
    })();
    mem.put(p, target_id, target);
    if let (Some(t), Some(d)) = (keep_id, kept) {
        mem.put(p, t, d);
    }
    result.map_err(fail)
}

/// Runs the whole program without schedules and returns its outputs.
pub fn run_reference(p: &Program, inputs: &[Tensor]) -> Result<Vec<Tensor>, ExecError> {
    let mut mem = Memory::new(p, inputs)?;
    for k in &p.kernels {
        run_kernel_reference(p, k, &mut mem)?;
    }
    Ok(mem.outputs(p))
}
