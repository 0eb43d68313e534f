//! Copies elided: a kernel that only copies the whole of one tensor into a slice of another
//! (one operand of a concatenation) is removed. The kernels that wrote the copied tensor
//! write the slice instead, and the kernels that read it read the slice.
//!
//! A copy is `out[i + o] = x[i]` over every element of `x`, with a constant offset `o` per
//! dimension. Removing it is exact: every element of the slice holds, from when it is written
//! on, the value the copy would have given it, so every engine computes the same bits. It is
//! done when
//! - `x` is a computed tensor that no view shares and that is not a program output, an
//!   update's input or output, nor a kept reduced value (see [`crate::loops::Stmt::keep`]);
//! - `out` is not an update's output;
//! - every kernel that writes `x` comes before the copy and keeps no reduced value (which
//!   must have the target's type and subscripts);
//! - no kernel other than `x`'s writers touches the slice from the first of them until the
//!   copy, and none writes it after the copy;
//! - every access to `x` can move: on the dimensions where `x` and `out` differ its subscripts
//!   are affine, and a guarded read (padding) stays inside `x` along them, since outside it it
//!   would now read other elements of `out` instead of the padding value.
//!
//! Copies are taken in program order, so chains compose. A DenseNet block concatenates each
//! layer's output with the concatenation before it; every layer of the block then writes its
//! channels of the block's last concatenation, and no channel is copied.

use crate::loops::{footprints_overlap, Access, Affine, Expr, Index, Kernel, LoopKind, Program, TensorId, TensorKind};
use crate::lower::drop_untouched;
use crate::schedule::is_written;

/// Removes every copy that can be removed, and the tensors no kernel touches any more;
/// returns how many copies were removed.
pub fn elide_copies(p: &mut Program) -> usize {
    let mut removed = 0;
    let mut at = 0;
    while at < p.kernels.len() {
        match copy_of(p, at) {
            Some(c) if can_elide(p, at, &c) => {
                p.kernels.remove(at);
                for k in &mut p.kernels {
                    retarget(k, &c);
                }
                removed += 1;
            }
            _ => at += 1,
        }
    }
    if removed > 0 {
        drop_untouched(p);
    }
    removed
}

/// A kernel that copies all of `x` to `out` at `offset`.
struct Copy {
    x: TensorId,
    out: TensorId,
    offset: Vec<i64>,
}

/// Whether kernel `at` is a copy: parallel loops over `x`'s shape, `out[i + o] = x[i]`.
fn copy_of(p: &Program, at: usize) -> Option<Copy> {
    let k = &p.kernels[at];
    let s = &k.stmt;
    if s.reduce.is_some() || s.epilogue.is_some() || s.keep.is_some() || k.operands.len() != 2 {
        return None;
    }
    let (out, x) = (k.operands[0], k.operands[1]);
    let (xt, ot) = (&p.tensor(x).ty, &p.tensor(out).ty);
    let rank = xt.rank();
    let plain = |l: usize, a: &Affine| a.terms == [(l, 1)];
    let Expr::Load(read) = &s.value else { return None };
    let read_is_plain = read.operand == 1
        && read.pad.is_none()
        && read.index.len() == rank
        && read
            .index
            .iter()
            .enumerate()
            .all(|(l, i)| matches!(i, Index::Affine(a) if plain(l, a) && a.offset == 0));
    if !read_is_plain
        || ot.rank() != rank
        || xt.dtype != ot.dtype
        || k.loops.iter().map(|l| l.extent).ne(xt.shape.iter().copied())
        || k.loops.iter().any(|l| l.kind != LoopKind::Parallel)
    {
        return None;
    }
    let offset = s
        .target
        .index
        .iter()
        .enumerate()
        .map(|(l, i)| match i {
            Index::Affine(a) if plain(l, a) => Some(a.offset),
            _ => None,
        })
        .collect::<Option<Vec<i64>>>()?;
    Some(Copy { x, out, offset })
}

/// Whether the copy at `at` can go, on the conditions of the module's doc.
fn can_elide(p: &Program, at: usize, c: &Copy) -> bool {
    let (x, out) = (c.x, c.out);
    let updated = p.updates.iter().any(|&(i, o)| i == x || o == x || o == out);
    let shared = p
        .tensors
        .iter()
        .any(|t| matches!(t.kind, TensorKind::View(of) if of == x));
    let output = p.outputs.iter().any(|&(_, t)| p.storage(t) == x);
    let kept = p
        .kernels
        .iter()
        .any(|k| k.stmt.keep.as_ref().is_some_and(|a| k.operands[a.operand] == x));
    if !matches!(p.tensor(x).kind, TensorKind::Temp) || p.storage(out) != out || updated || shared || output || kept {
        return false;
    }
    let writers: Vec<usize> = (0..p.kernels.len())
        .filter(|&w| p.kernels[w].operands[0] == x)
        .collect();
    let Some(&first) = writers.first() else { return false };
    if writers.iter().any(|&w| w > at || p.kernels[w].stmt.keep.is_some()) {
        return false;
    }
    let slice: Vec<(i64, i64)> = p
        .tensor(x)
        .ty
        .shape
        .iter()
        .zip(&c.offset)
        .map(|(&e, &o)| (o, o + e as i64 - 1))
        .collect();
    let untouched = |k: &Kernel, writes_only: bool| {
        let accesses = crate::schedule::accesses(k);
        let extents = k.extents();
        accesses
            .iter()
            .enumerate()
            .filter(|&(i, _)| !writes_only || is_written(k, i))
            .all(|(_, a)| {
                let t = k.operands[a.operand];
                p.storage(t) != out
                    || (t == out && !footprints_overlap(&a.footprint(&extents, &p.tensor(out).ty.shape), &slice))
            })
    };
    let before = (first..at)
        .filter(|w| !writers.contains(w))
        .all(|w| untouched(&p.kernels[w], false));
    let after = p.kernels[at + 1..].iter().all(|k| untouched(k, true));
    let movable = p.kernels.iter().enumerate().filter(|&(w, _)| w != at).all(|(_, k)| {
        crate::schedule::accesses(k)
            .into_iter()
            .filter(|a| k.operands[a.operand] == x)
            .all(|a| can_move(&a, k, p, c))
    });
    before && after && movable
}

/// Whether `a`, an access to `x`, stays exact when it reads or writes `out` at the offset.
fn can_move(a: &Access, k: &Kernel, p: &Program, c: &Copy) -> bool {
    let (xs, os) = (&p.tensor(c.x).ty.shape, &p.tensor(c.out).ty.shape);
    let extents = k.extents();
    (0..xs.len())
        .filter(|&d| xs[d] != os[d] || c.offset[d] != 0)
        .all(|d| match &a.index[d] {
            Index::Affine(s) => {
                let (lo, hi) = s.range(&extents);
                a.pad.is_none() || (lo >= 0 && hi < xs[d] as i64)
            }
            Index::Gathered { .. } => false,
        })
}

/// Makes `k`'s accesses to `x` access `out` at the copy's offset.
fn retarget(k: &mut Kernel, c: &Copy) {
    let slots: Vec<usize> = (0..k.operands.len()).filter(|&s| k.operands[s] == c.x).collect();
    if slots.is_empty() {
        return;
    }
    for &s in &slots {
        k.operands[s] = c.out;
    }
    let shift = |a: &mut Access| shift_access(a, &slots, &c.offset);
    shift(&mut k.stmt.target);
    if let Some(a) = &mut k.stmt.keep {
        shift(a);
    }
    k.stmt.value.rewrite(&mut |e| {
        if let Expr::Load(a) = e {
            shift(a);
        }
    });
    if let Some(e) = &mut k.stmt.epilogue {
        e.rewrite(&mut |e| {
            if let Expr::Load(a) = e {
                shift(a);
            }
        });
    }
}

/// Adds the offset to the subscripts of `a` when it names one of `slots`, and does the same
/// inside the accesses its gathered subscripts read.
fn shift_access(a: &mut Access, slots: &[usize], offset: &[i64]) {
    let moved = slots.contains(&a.operand);
    for (d, i) in a.index.iter_mut().enumerate() {
        match i {
            Index::Affine(s) if moved => *s = std::mem::take(s).add_offset(offset[d]),
            Index::Affine(_) => {}
            Index::Gathered { access, .. } => shift_access(access, slots, offset),
        }
    }
}
