//! Split reductions: per-CPE partials combined in a second kernel.
//!
//! A reduction with fewer target elements than CPEs (a bias gradient, batch normalisation's
//! scale and shift gradients) leaves most CPEs idle, since a CPE owns whole target elements.
//! One with a few target elements per CPE over a long reduction (a small convolution's weight
//! gradient) keeps them busy, but each CPE fetches nearly all of the operands. [`split_reductions`] cuts such a kernel in two:
//! 1. `partials[p, target..] fold= value` with a reduce loop `r` of extent `E` split as
//!    `r = p*(E/P) + e`, `p` a new outermost parallel loop of extent `P`: each CPE folds its
//!    part of the reduction into a partial of its own, written to main memory (never a race:
//!    distinct `(p, target)` points are distinct elements);
//! 2. `target[..] fold= partials[q, target..]` over `q` in order, with the original epilogue.
//!
//! The order of the floating-point operations is fixed by the program, not by the run, so
//! results are bit-identical from run to run. A kernel with fewer target elements than CPEs
//! is split only when the CPE time it saves is more than one more launch (the target's spawn
//! and join cycles). The saving counts
//! per point a cycle per operation of its statement, and a division, a square root or a
//! library routine (`exp`, `pow`, ...) at the target's cycles for it, but no less than the
//! latency of a floating-point fold: before the split each CPE owns one target element, so
//! its points fold into one accumulator, one after another. After it, the points a CPE folds
//! are counted one after another too. So the saving is a lower bound, against the cost. One
//! with more is split as [`plan_by_estimate`] finds it pays, by the scheduler's estimate of
//! the kernels each way.
//!
//! After scheduling, [`split_refetching`] splits the same way a reduction with more target
//! elements per CPE whose schedule fetches its operands many times over.

use std::collections::{HashMap, HashSet};

use crate::loops::{Access, Affine, Expr, Index, Kernel, Loop, LoopKind, Program, Stmt, TensorInfo, TensorKind};
use crate::target::Target;
use swflow_emulator::timing::Timing;
use swflow_frontend::ir::{BinaryOp, UnaryOp};

use super::estimate::launch_cycles;
use super::ScheduleError;

/// Splits every reduction of `p` that [`plan`] finds worth it, in place; the second kernel
/// keeps the original's name and target, the first is named `<name>.partials`.
pub fn split_reductions(p: &mut Program, target: &Target) {
    let mut names: HashSet<String> = p.kernels.iter().map(|k| k.name.clone()).collect();
    let mut kernels = Vec::with_capacity(p.kernels.len());
    for k in std::mem::take(&mut p.kernels) {
        match plan(&k, target).or_else(|| plan_by_estimate(p, &k, target)) {
            Some(split) => {
                let (first, second) = apply(p, &mut names, k, split);
                kernels.push(first);
                kernels.push(second);
            }
            None => kernels.push(k),
        }
    }
    p.kernels = kernels;
}

/// How one reduction is split: reduce loop `loop_` into `parts` parts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Split {
    pub loop_: usize,
    pub parts: usize,
}

/// The product of the extents of `k`'s loops of `kind`.
fn extents(k: &Kernel, kind: LoopKind) -> usize {
    k.loops.iter().filter(|l| l.kind == kind).map(|l| l.extent).product()
}

/// The split of kernel `k` for `target`, if any pays.
pub fn plan(k: &Kernel, target: &Target) -> Option<Split> {
    let reduce = k.stmt.reduce?;
    let outputs = extents(k, LoopKind::Parallel);
    if outputs == 0 || outputs >= target.cpes {
        return None;
    }
    let wanted = target.cpes.div_ceil(outputs);
    let reduced = extents(k, LoopKind::Reduce);
    // Per reduce loop, the smallest divisor of its extent that reaches `wanted` (the extent
    // itself when it is smaller); the loop using the most CPEs, the outermost among equals.
    let (loop_, parts) = k
        .loops
        .iter()
        .enumerate()
        .filter(|(_, l)| l.kind == LoopKind::Reduce && l.extent >= 2)
        .map(|(i, l)| {
            let parts = (wanted.min(l.extent)..=l.extent)
                .find(|d| l.extent % d == 0)
                .unwrap_or(l.extent);
            (i, parts)
        })
        .max_by_key(|&(i, parts)| (parts.min(wanted), std::cmp::Reverse(i)))?;
    let before = outputs.div_ceil(target.cpes) * reduced;
    let after = (outputs * parts).div_ceil(target.cpes) * (reduced / parts) + parts;
    let fold = if reduce.init.dtype().is_float() {
        target.timing.fp_latency_cycles
    } else {
        1.0
    };
    let saved = before.saturating_sub(after) as f64 * cycles(&k.stmt, &target.timing).max(fold);
    (saved > target.timing.spawn_cycles + target.timing.join_cycles).then_some(Split { loop_, parts })
}

/// The most target elements per CPE of a reduction [`plan_by_estimate`] considers. With so
/// few, each CPE fetches nearly all of the operands that the target's elements share, and a
/// split cuts the traffic by about its number of parts. With more, a CPE's compute is already
/// its share of the whole, and the estimate, whose compute stays near a lower bound,
/// overrates what a split saves: light AlexNet's last matrix-vector product (16 elements per
/// CPE) split in 8 was modelled faster on SW26010 but slower on SW26010-Pro.
const FEW_PER_CPE: usize = 4;

/// The fraction of a kernel's estimated cycles its split must stay under, the extra launch
/// included. The estimate's compute stays near a lower bound and it counts a split's small
/// partial transfers least well, so a split must save a clear share. Since the estimate
/// counts the lines a block touches where its boxes may start (not at any element), 0.8
/// declined 47 splits of the nine light models that the emulator times faster (light
/// Inception-v1's 1x1 convolution from 480 channels to 96 on 13 x 13 points: 114.4 -> 93.3
/// us on SW26010); 0.9 takes them, and none that is slower.
const SPLIT_MARGIN: f64 = 0.9;

/// The split of reduction `k` (of program `p`, whose tensors it reads) with at least as many
/// target elements as CPEs but few per CPE ([`FEW_PER_CPE`]), if one pays by the scheduler's
/// estimate: each CPE of such a kernel folds its few target elements over the whole
/// reduction, so every CPE fetches nearly all of the operands (a small convolution's weight
/// gradient's activations and output gradients, say). Split, each CPE fetches its part of
/// the reduction only. Every reduce loop is tried in every number of parts that divides it
/// (up to the CPEs), each kernel scheduled as the scheduler schedules it; the best split is
/// taken when its two kernels' estimates and the second kernel's fixed costs stay under
/// [`SPLIT_MARGIN`] of the kernel's own estimate.
fn plan_by_estimate(p: &Program, k: &Kernel, target: &Target) -> Option<Split> {
    k.stmt.reduce?;
    let outputs = extents(k, LoopKind::Parallel);
    if outputs < target.cpes || outputs.div_ceil(target.cpes) > FEW_PER_CPE {
        return None;
    }
    let s = super::schedule_kernel(k, p, target).ok()?;
    let whole = super::estimate::estimate(k, p, &s, target).cycles();
    let mut scratch = p.clone();
    let tensors = scratch.tensors.len();
    let mut best: Option<(f64, Split)> = None;
    for (loop_, l) in k.loops.iter().enumerate() {
        if l.kind != LoopKind::Reduce {
            continue;
        }
        for parts in (2..=l.extent.min(target.cpes)).filter(|d| l.extent % d == 0) {
            let split = Split { loop_, parts };
            let total = split_cycles(&mut scratch, k, split, f64::INFINITY, target);
            scratch.tensors.truncate(tensors);
            if let Some(t) = total.filter(|&t| best.is_none_or(|(b, _)| t < b)) {
                best = Some((t, split));
            }
        }
    }
    let (cycles, split) = best?;
    (cycles < SPLIT_MARGIN * whole).then_some(split)
}

/// Splits, after scheduling, the reductions whose transfers bound them beyond what they must
/// move ([`may_pay`]), when a split pays by the estimate as [`plan_by_estimate`] judges one:
/// each kernel of the split scheduled as the scheduler schedules it, the pair with the second
/// kernel's fixed costs under [`SPLIT_MARGIN`] of the kernel's estimate. Every reduce loop is
/// tried in the powers of two that divide it, from two up while each estimates faster than
/// the one before and while the split's transfers alone (the operands read once, the
/// partials written and read back: [`partial_cycles`]) stay under the margin. The kernels of
/// a split are scheduled; the others keep their schedules. Kernels alike but for their names
/// and tensors' names (a DenseNet block's layers, a ShuffleNet stage's units) are judged
/// once.
pub fn split_refetching(p: &mut Program, target: &Target) -> Result<(), ScheduleError> {
    let mut names: HashSet<String> = p.kernels.iter().map(|k| k.name.clone()).collect();
    let mut judged: HashMap<String, Option<Split>> = HashMap::new();
    let mut kernels = Vec::with_capacity(p.kernels.len());
    for k in std::mem::take(&mut p.kernels) {
        let split = *judged
            .entry(likeness(p, &k))
            .or_insert_with(|| refetching_split(p, &k, target));
        match split {
            Some(split) => {
                let (mut first, mut second) = apply(p, &mut names, k, split);
                first.schedule = Some(super::schedule_kernel(&first, p, target)?);
                second.schedule = Some(super::schedule_kernel(&second, p, target)?);
                kernels.push(first);
                kernels.push(second);
            }
            None => kernels.push(k),
        }
    }
    p.kernels = kernels;
    Ok(())
}

/// What decides a split of scheduled kernel `k` of `p`, as text: its loops, statement and
/// schedule, and each operand's type and kind, with the first operand slot that names the
/// same tensor (a kernel that reads the tensor it writes differs from one that does not).
fn likeness(p: &Program, k: &Kernel) -> String {
    let operands: Vec<_> = k
        .operands
        .iter()
        .map(|&t| {
            let first = k.operands.iter().position(|&u| u == t);
            (&p.tensor(t).ty, &p.tensor(t).kind, first)
        })
        .collect();
    format!("{:?} {:?} {:?} {:?}", k.loops, k.stmt, k.schedule, operands)
}

/// The split [`split_refetching`] makes of scheduled kernel `k`, if any.
fn refetching_split(p: &Program, k: &Kernel, target: &Target) -> Option<Split> {
    k.stmt.reduce?;
    let whole = super::estimate::estimate(k, p, k.schedule.as_ref()?, target);
    let d = &target.timing.dma;
    let reads: f64 = k.operands[1..]
        .iter()
        .collect::<HashSet<_>>()
        .into_iter()
        .map(|&t| p.tensor(t).ty.size_bytes() as f64 / d.get_bytes_per_cycle)
        .sum();
    let outputs = extents(k, LoopKind::Parallel);
    let write = (outputs * p.tensor(k.operands[0]).ty.dtype.size_bytes()) as f64 / d.put_bytes_per_cycle;
    let launch = launch_cycles(target);
    if outputs < target.cpes || !may_pay(&whole, reads + write, partial_cycles(k, p, 2, target) + launch) {
        return None;
    }
    let whole = whole.cycles();
    let mut scratch = p.clone();
    let tensors = scratch.tensors.len();
    let mut best: Option<(f64, Split)> = None;
    for (loop_, l) in k.loops.iter().enumerate().filter(|(_, l)| l.kind == LoopKind::Reduce) {
        let powers = std::iter::successors(Some(2), |&n| Some(n * 2));
        let mut before = whole;
        for parts in powers.take_while(|&n| n <= l.extent.min(target.cpes) && l.extent % n == 0) {
            if reads + partial_cycles(k, p, parts, target) + launch >= SPLIT_MARGIN * whole {
                break;
            }
            let split = Split { loop_, parts };
            let total = split_cycles(&mut scratch, k, split, before, target);
            scratch.tensors.truncate(tensors);
            match total {
                Some(t) if t < before => before = t,
                _ => break,
            }
            if best.is_none_or(|(b, _)| before < b) {
                best = Some((before, split));
            }
        }
    }
    let (cycles, split) = best?;
    (cycles < SPLIT_MARGIN * whole).then_some(split)
}

/// Whether a split may pay for a kernel estimated at `whole`, whose compulsory transfers
/// (each operand read once, the target written once) take `compulsory` queue cycles, when the
/// cheapest split adds `added` (two parts' partials written and read back, and a launch):
/// its transfers bound it (the queue busier than its CPEs), and the queue spends more beyond
/// the compulsory transfers than the split adds. Such a kernel's CPEs fetch the operands
/// that their target elements share again and again (a 1x1 convolution with few output
/// channels over a small image reads its input once per CPE), or move them in blocks that
/// touch more DMA lines than they fill (a matrix-vector product split by its 1000 columns
/// reads 16 of them, 64 bytes touching a line and a quarter on average, from every row); a
/// split reads them about once, each CPE whole rows. Any other kernel is spared from being
/// scheduled split for nothing.
fn may_pay(whole: &super::estimate::Estimate, compulsory: f64, added: f64) -> bool {
    whole.queue >= whole.cpe && whole.queue - compulsory > added
}

/// The queue cycles a split of `k` in `parts` parts spends at least on its partials, which
/// the first kernel writes and the second reads back.
fn partial_cycles(k: &Kernel, p: &Program, parts: usize, target: &Target) -> f64 {
    let d = &target.timing.dma;
    let element = p.tensor(k.operands[0]).ty.dtype.size_bytes();
    let bytes = (parts * extents(k, LoopKind::Parallel) * element) as f64;
    bytes / d.put_bytes_per_cycle + bytes / d.get_bytes_per_cycle
}

/// The estimated cycles of `split` of `k`, its kernels applied to `scratch` (whose new
/// tensors the caller drops) and scheduled as the scheduler schedules them, with the second
/// kernel's fixed costs; `None` when a kernel cannot be scheduled, or when the first kernel
/// alone takes `beyond` cycles or more (the second is not scheduled then).
fn split_cycles(scratch: &mut Program, k: &Kernel, split: Split, beyond: f64, target: &Target) -> Option<f64> {
    let (first, second) = apply(scratch, &mut HashSet::new(), k.clone(), split);
    let cycles = |k: &Kernel, p: &Program| -> Option<f64> {
        let s = super::schedule_kernel(k, p, target).ok()?;
        Some(super::estimate::estimate(k, p, &s, target).cycles())
    };
    let first = cycles(&first, scratch)? + launch_cycles(target);
    if first >= beyond {
        return None;
    }
    Some(first + cycles(&second, scratch)?)
}

/// Cycles per point of the statement, at least: one per operation and for the fold, and a
/// division's, a square root's or a library call's cycles for those.
fn cycles(s: &Stmt, t: &Timing) -> f64 {
    let mut n = 1.0;
    s.value.visit(&mut |e| {
        n += match e {
            Expr::Unary(UnaryOp::Sqrt, _) => t.sqrt_cycles,
            Expr::Unary(UnaryOp::Recip, _) | Expr::Binary(BinaryOp::Div, ..) => t.div_cycles,
            Expr::Unary(u, _) if u.calls_library() => t.call_cycles,
            Expr::Binary(b, ..) if b.calls_library() => t.call_cycles,
            Expr::Unary(..) | Expr::Binary(..) | Expr::Select(..) | Expr::Cast(..) => 1.0,
            Expr::Load(_) | Expr::Const(_) | Expr::Acc => 0.0,
        };
    });
    n
}

fn apply(p: &mut Program, names: &mut HashSet<String>, k: Kernel, split: Split) -> (Kernel, Kernel) {
    let Split { loop_: r, parts } = split;
    let reduce = k.stmt.reduce.expect("only reductions are split");
    let target_tensor = k.operands[0];
    let ty = &p.tensor(target_tensor).ty;
    let partial_ty = swflow_frontend::ir::TensorType::new(ty.dtype, [vec![parts], ty.shape.clone()].concat())
        .expect("a target's shape times the parts stays within the element bound of its reduction");
    let partials = add_temp(p, format!("{}.partials", p.tensor(target_tensor).name), partial_ty);

    // First kernel: loop 0 is the part, old loop l is l + 1, and old loop r is
    // `part * (E/P) + e` with `e` in its place.
    let per_part = k.loops[r].extent / parts;
    let mut loops = vec![Loop {
        name: unique_loop(&k.loops, "part"),
        extent: parts,
        kind: LoopKind::Parallel,
    }];
    loops.extend(k.loops.iter().cloned());
    loops[r + 1].extent = per_part;
    let args: Vec<Affine> = (0..k.loops.len())
        .map(|l| {
            let moved = Affine::var(l + 1);
            if l == r {
                moved.plus(0, per_part as i64)
            } else {
                moved
            }
        })
        .collect();
    let mut value = k.stmt.value.clone();
    remap_expr(&mut value, &args);
    let mut target = k.stmt.target.clone();
    remap_access(&mut target, &args);
    target.index.insert(0, Index::Affine(Affine::var(0)));
    let mut operands = k.operands.clone();
    operands[0] = partials;
    let first = Kernel {
        name: unique_kernel(names, &format!("{}.partials", k.name)),
        op: k.op.clone(),
        origin: k.origin.clone(),
        fused: k.fused.clone(),
        loops,
        operands,
        stmt: Stmt {
            target,
            value,
            reduce: Some(reduce),
            epilogue: None,
            keep: None,
        },
        schedule: None,
    };

    // Second kernel: the parallel loops in their order, then the part `q`, reduced.
    let kept: Vec<usize> = (0..k.loops.len())
        .filter(|&l| k.loops[l].kind == LoopKind::Parallel)
        .collect();
    let mut loops: Vec<Loop> = kept.iter().map(|&l| k.loops[l].clone()).collect();
    loops.push(Loop {
        name: unique_loop(&k.loops, "part"),
        extent: parts,
        kind: LoopKind::Reduce,
    });
    let q = loops.len() - 1;
    // Reduce loops appear in neither the target nor the epilogue; any affine stands for them.
    let args: Vec<Affine> = (0..k.loops.len())
        .map(|l| match kept.iter().position(|&m| m == l) {
            Some(i) => Affine::var(i),
            None => Affine::constant(0),
        })
        .collect();
    let mut target = k.stmt.target.clone();
    remap_access(&mut target, &args);
    let mut read = target.clone();
    read.operand = k.operands.len();
    read.index.insert(0, Index::Affine(Affine::var(q)));
    let mut epilogue = k.stmt.epilogue.clone();
    if let Some(e) = &mut epilogue {
        remap_expr(e, &args);
    }
    let mut keep = k.stmt.keep.clone();
    if let Some(a) = &mut keep {
        remap_access(a, &args);
    }
    let mut operands = k.operands.clone();
    operands.push(partials);
    let mut second = Kernel {
        name: k.name,
        op: k.op,
        origin: k.origin,
        fused: k.fused,
        loops,
        operands,
        stmt: Stmt {
            target,
            value: Expr::Load(read),
            reduce: Some(reduce),
            epilogue,
            keep,
        },
        schedule: None,
    };
    crate::lower::compact_operands(&mut second);
    (first, second)
}

fn add_temp(p: &mut Program, name: String, ty: swflow_frontend::ir::TensorType) -> crate::loops::TensorId {
    let mut candidate = name.clone();
    let mut n = 2;
    while p.tensors.iter().any(|t| t.name == candidate) {
        candidate = format!("{name}#{n}");
        n += 1;
    }
    p.tensors.push(TensorInfo {
        name: candidate,
        ty,
        kind: TensorKind::Temp,
    });
    crate::loops::TensorId(p.tensors.len() as u32 - 1)
}

/// `name`, or `name#2`, `name#3`, ... if a kernel has it already; recorded in `names`.
fn unique_kernel(names: &mut HashSet<String>, name: &str) -> String {
    let mut candidate = name.to_string();
    let mut n = 2;
    while names.contains(&candidate) {
        candidate = format!("{name}#{n}");
        n += 1;
    }
    names.insert(candidate.clone());
    candidate
}

/// `name`, or `name2`, `name3`, ... if a loop of `loops` has it already.
pub(super) fn unique_loop(loops: &[Loop], name: &str) -> String {
    let mut candidate = name.to_string();
    let mut n = 2;
    while loops.iter().any(|l| l.name == candidate) {
        candidate = format!("{name}{n}");
        n += 1;
    }
    candidate
}

/// `a` with every loop `l` of its subscripts replaced by `args[l]`.
pub(super) fn remap_access(a: &mut Access, args: &[Affine]) {
    for i in &mut a.index {
        match i {
            Index::Affine(x) => *x = x.compose(args),
            Index::Gathered { access, .. } => remap_access(access, args),
        }
    }
}

fn remap_expr(e: &mut Expr, args: &[Affine]) {
    e.rewrite(&mut |e| {
        if let Expr::Load(a) = e {
            remap_access(a, args);
        }
    });
}
