//! Copies elided: a kernel that only copies the whole of one tensor into a slice of another
//! (one operand of a concatenation), or into another tensor in another order of dimensions (a
//! transpose), is removed. The kernels that wrote the copied tensor write the slice or the
//! transposed places instead, and for a slice the kernels that read the tensor read the slice.
//!
//! A copy is `out[i + o] = x[i]` over every element of `x`, with a constant offset `o` per
//! dimension, or more generally `out[d] = x[dims[d]] + o[d]` with a permutation `dims` of the
//! dimensions. Removing it is exact: every element of the slice holds, from when it is written
//! on, the value the copy would have given it, so every engine computes the same bits. A
//! slice's copy is removed when
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
//! A transpose's copy is removed on the same conditions, except that `x` may be a view (a
//! reshape) of a computed tensor that no other view shares, and that nothing but its writers'
//! targets and the copy may touch `x`: each writer's subscripts, taken to `x`'s shape
//! ([`reshape_index`]), then permuted, address its elements' places in `out`; and only where
//! the writers' puts, scattered into shorter runs, take less of the DMA queue than the copy
//! ([`transpose_pays`]). A ShuffleNet unit's channel shuffle (a reshape of 4 groups of 34
//! channels into 4 x 34, a transpose to 34 x 4, and a reshape back) becomes its grouped
//! convolution writing channel `4*m + g`.
//!
//! Copies are taken in program order, so chains compose. A DenseNet block concatenates each
//! layer's output with the concatenation before it; every layer of the block then writes its
//! channels of the block's last concatenation, and no channel is copied.

use crate::loops::{footprints_overlap, Access, Affine, Expr, Index, Kernel, LoopKind, Program, TensorId, TensorKind};
use crate::lower::drop_untouched;
use crate::schedule::is_written;
use crate::target::Target;

/// Removes every copy that can be removed (a transpose only where that pays on `target`), and
/// the tensors no kernel touches any more; returns how many copies were removed.
pub fn elide_copies(p: &mut Program, target: &Target) -> usize {
    let mut removed = 0;
    let mut at = 0;
    while at < p.kernels.len() {
        match copy_of(p, at) {
            Some(c) if c.is_slice(p) && can_elide(p, at, &c) => {
                p.kernels.remove(at);
                for k in &mut p.kernels {
                    retarget(k, &c);
                }
                removed += 1;
            }
            Some(c) if !c.is_slice(p) && can_elide_transpose(p, at, &c) && transpose_pays(p, &c, target) => {
                let base = p.storage(c.x);
                let placed: Vec<(usize, Vec<Affine>)> = (0..at)
                    .filter(|&w| p.storage(p.kernels[w].operands[0]) == base)
                    .filter_map(|w| Some((w, target_in(p, &p.kernels[w], c.x)?)))
                    .collect();
                p.kernels.remove(at);
                for (w, index) in placed {
                    place_target(&mut p.kernels[w], &c, index);
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

/// A kernel that copies all of `x` to `out`: `out[d] = x[dims[d]] + offset[d]`.
struct Copy {
    x: TensorId,
    out: TensorId,
    /// Per dimension of `out`, the dimension of `x` whose subscript it takes.
    dims: Vec<usize>,
    offset: Vec<i64>,
}

impl Copy {
    /// Whether the copy puts `x`, a tensor of its own, into a slice of `out` in the same
    /// order of dimensions.
    fn is_slice(&self, p: &Program) -> bool {
        self.dims.iter().enumerate().all(|(d, &e)| d == e) && p.storage(self.x) == self.x
    }
}

/// Whether kernel `at` is a copy: parallel loops over `x`'s shape, each reading one of `x`'s
/// dimensions and writing one of `out`'s at a constant offset.
fn copy_of(p: &Program, at: usize) -> Option<Copy> {
    let k = &p.kernels[at];
    let s = &k.stmt;
    if s.reduce.is_some() || s.epilogue.is_some() || s.keep.is_some() || k.operands.len() != 2 {
        return None;
    }
    let (out, x) = (k.operands[0], k.operands[1]);
    let (xt, ot) = (&p.tensor(x).ty, &p.tensor(out).ty);
    let rank = xt.rank();
    // The loop a subscript is, alone with coefficient 1, and its offset.
    let single = |i: &Index| match i {
        Index::Affine(a) if a.terms.len() == 1 && a.terms[0].1 == 1 => Some((a.terms[0].0, a.offset)),
        _ => None,
    };
    let Expr::Load(read) = &s.value else { return None };
    let reads: Vec<usize> = read
        .index
        .iter()
        .map(|i| single(i).filter(|&(_, o)| o == 0).map(|(l, _)| l))
        .collect::<Option<_>>()?;
    let mut sorted = reads.clone();
    sorted.sort_unstable();
    if read.operand != 1
        || read.pad.is_some()
        || reads.len() != rank
        || sorted.iter().copied().ne(0..k.loops.len())
        || ot.rank() != rank
        || xt.dtype != ot.dtype
        || reads.iter().zip(&xt.shape).any(|(&l, &e)| k.loops[l].extent != e)
        || k.loops.iter().any(|l| l.kind != LoopKind::Parallel)
    {
        return None;
    }
    let (dims, offset) = s
        .target
        .index
        .iter()
        .map(|i| {
            let (l, o) = single(i)?;
            Some((reads.iter().position(|&r| r == l)?, o))
        })
        .collect::<Option<(Vec<usize>, Vec<i64>)>>()?;
    Some(Copy { x, out, dims, offset })
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
    let movable = p.kernels.iter().enumerate().filter(|&(w, _)| w != at).all(|(_, k)| {
        crate::schedule::accesses(k)
            .into_iter()
            .filter(|a| k.operands[a.operand] == x)
            .all(|a| can_move(&a, k, p, c))
    });
    movable && places_untouched(p, at, c, first, &writers)
}

/// Whether no kernel but `writers` touches the places in `out` that copy `c` (kernel `at`)
/// fills, from the first writer, `first`, until the copy, and none writes them after it.
fn places_untouched(p: &Program, at: usize, c: &Copy, first: usize, writers: &[usize]) -> bool {
    let (xs, out) = (&p.tensor(c.x).ty.shape, c.out);
    let places: Vec<(i64, i64)> = c
        .dims
        .iter()
        .zip(&c.offset)
        .map(|(&e, &o)| (o, o + xs[e] as i64 - 1))
        .collect();
    let untouched = |k: &Kernel, writes_only: bool| {
        let extents = k.extents();
        crate::schedule::accesses(k)
            .iter()
            .enumerate()
            .filter(|&(i, _)| !writes_only || is_written(k, i))
            .all(|(_, a)| {
                let t = k.operands[a.operand];
                p.storage(t) != out
                    || (t == out && !footprints_overlap(&a.footprint(&extents, &p.tensor(out).ty.shape), &places))
            })
    };
    let before = (first..at)
        .filter(|w| !writers.contains(w))
        .all(|w| untouched(&p.kernels[w], false));
    before && p.kernels[at + 1..].iter().all(|k| untouched(k, true))
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

/// Whether the transposing copy at `at` can go, on the conditions of the module's doc.
fn can_elide_transpose(p: &Program, at: usize, c: &Copy) -> bool {
    let (x, out) = (c.x, c.out);
    let base = p.storage(x);
    let other_views = (0..p.tensors.len())
        .map(|t| TensorId(t as u32))
        .filter(|&t| t != x && matches!(p.tensor(t).kind, TensorKind::View(_)) && p.storage(t) == base)
        .count();
    let updated = p
        .updates
        .iter()
        .any(|&(i, o)| p.storage(i) == base || p.storage(o) == base || o == out);
    let output = p.outputs.iter().any(|&(_, t)| p.storage(t) == base);
    if !matches!(p.tensor(base).kind, TensorKind::Temp) || p.storage(out) != out || other_views > 0 || updated || output
    {
        return false;
    }
    let writes_base = |k: &Kernel| p.storage(k.operands[0]) == base;
    let writers: Vec<usize> = (0..p.kernels.len()).filter(|&w| writes_base(&p.kernels[w])).collect();
    let Some(&first) = writers.first() else { return false };
    if writers.iter().any(|&w| w > at || p.kernels[w].stmt.keep.is_some()) {
        return false;
    }
    // Nothing else touches `x`'s elements: each writer only through its target, and each
    // writer's target subscripts take to `x`'s shape.
    let alone = p.kernels.iter().enumerate().all(|(w, k)| {
        let touches = crate::schedule::accesses(k)
            .iter()
            .enumerate()
            .filter(|(_, a)| p.storage(k.operands[a.operand]) == base)
            .map(|(i, _)| i)
            .collect::<Vec<_>>();
        match (w == at, writers.contains(&w)) {
            (true, _) => true,
            (false, true) => touches == [0] && target_in(p, k, x).is_some(),
            (false, false) => touches.is_empty(),
        }
    });
    alone && places_untouched(p, at, c, first, &writers)
}

/// Whether removing the transposing copy `c` takes less of `target`'s DMA queue than keeping
/// it. The copy gets and puts every byte of `x` in a kernel of its own: a launch, a get's and a
/// put's latency and the bytes at the queue's bandwidths. Without it, `x`'s writers put to
/// `out` in runs no longer than `out`'s trailing dimensions that keep `x`'s order (a plane of
/// pixels, for a channel shuffle), each run a block of its own: at most one more put block per
/// run than they took. A shuffle of 7 x 7 planes (196 bytes) would cost SW26010-Pro a put block
/// of 143 cycles per plane, more than copying the planes.
fn transpose_pays(p: &Program, c: &Copy, target: &Target) -> bool {
    let (t, d) = (&target.timing, &target.timing.dma);
    let (xs, os) = (&p.tensor(c.x).ty.shape, &p.tensor(c.out).ty.shape);
    let run: usize = (0..os.len())
        .rev()
        .take_while(|&i| c.dims[i] == i && os[i] == xs[i])
        .map(|i| os[i])
        .product();
    let elements: usize = xs.iter().product();
    let bytes = p.tensor(c.x).ty.size_bytes() as f64;
    let scattered = elements.div_ceil(run.max(1)) as f64 * d.put_block_cycles;
    let copy = t.spawn_cycles
        + d.get_latency_cycles
        + d.put_latency_cycles
        + bytes / d.get_bytes_per_cycle
        + bytes / d.put_bytes_per_cycle;
    scattered <= copy
}

/// The subscripts of kernel `k`'s target taken to the shape of `x`, a view of the target's
/// storage or that storage itself (see [`reshape_index`]).
fn target_in(p: &Program, k: &Kernel, x: TensorId) -> Option<Vec<Affine>> {
    let index: Vec<Affine> = k
        .stmt
        .target
        .index
        .iter()
        .map(|i| match i {
            Index::Affine(a) => Some(a.clone()),
            Index::Gathered { .. } => None,
        })
        .collect::<Option<_>>()?;
    let from = &p.tensor(k.operands[0]).ty.shape;
    reshape_index(&index, from, &p.tensor(x).ty.shape, &k.extents())
}

/// Subscripts into a row-major tensor of shape `to` addressing, at every point of loops of
/// `extents`, the element that `index` addresses in one of shape `from` holding the same
/// elements in the same order (a reshape): the element's offset as an affine function of the
/// loops, written in `to`'s strides, each term in the outermost dimension whose stride
/// divides its coefficient. `None` unless every subscript then stays inside its dimension, so
/// that the subscripts are the offset's only digits in those strides.
pub fn reshape_index(index: &[Affine], from: &[usize], to: &[usize], extents: &[usize]) -> Option<Vec<Affine>> {
    let strides = |shape: &[usize]| -> Vec<i64> {
        let mut s = vec![1i64; shape.len()];
        for d in (0..shape.len().saturating_sub(1)).rev() {
            s[d] = s[d + 1] * shape[d + 1] as i64;
        }
        s
    };
    let (sf, st) = (strides(from), strides(to));
    let mut linear = Affine::default();
    for (a, &s) in index.iter().zip(&sf) {
        linear.offset += a.offset * s;
        for &(l, c) in &a.terms {
            linear = linear.plus(l, c * s);
        }
    }
    if linear.offset < 0 {
        return None;
    }
    let mut out = vec![Affine::default(); to.len()];
    for &(l, c) in &linear.terms {
        let d = st.iter().position(|&s| c % s == 0)?;
        out[d] = std::mem::take(&mut out[d]).plus(l, c / st[d]);
    }
    let mut rest = linear.offset;
    for (a, &s) in out.iter_mut().zip(&st) {
        a.offset = rest / s;
        rest %= s;
    }
    out.iter()
        .zip(to)
        .all(|(a, &n)| {
            let (lo, hi) = a.range(extents);
            lo >= 0 && hi < n as i64
        })
        .then_some(out)
}

/// Makes kernel `k`, a writer of the transposing copy's `x`, write `out` at its elements'
/// places.
fn place_target(k: &mut Kernel, c: &Copy, index: Vec<Affine>) {
    k.operands[0] = c.out;
    k.stmt.target.index = c
        .dims
        .iter()
        .zip(&c.offset)
        .map(|(&e, &o)| Index::Affine(index[e].clone().add_offset(o)))
        .collect();
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

#[cfg(test)]
mod tests {
    use super::*;

    fn affine(terms: &[(usize, i64)], offset: i64) -> Affine {
        Affine {
            terms: terms.to_vec(),
            offset,
        }
    }

    /// A grouped convolution's output channel `34*g + m` over 4 groups of 34 is channel `m`
    /// of group `g` in the shape 4 x 34.
    #[test]
    fn a_split_dimension_takes_each_loop_to_its_digit() {
        let index = [affine(&[], 0), affine(&[(1, 34), (2, 1)], 0), affine(&[(3, 1)], 0)];
        let got = reshape_index(&index, &[1, 136, 28], &[1, 4, 34, 28], &[1, 4, 34, 28]).unwrap();
        assert_eq!(
            got,
            [
                affine(&[], 0),
                affine(&[(1, 1)], 0),
                affine(&[(2, 1)], 0),
                affine(&[(3, 1)], 0)
            ]
        );
    }

    /// Merged dimensions add up their strides, offsets included.
    #[test]
    fn merged_dimensions_keep_their_offsets() {
        let index = [affine(&[(0, 1)], 1), affine(&[(1, 1)], 2)];
        let got = reshape_index(&index, &[4, 5], &[20], &[2, 3]).unwrap();
        assert_eq!(got, [affine(&[(0, 5), (1, 1)], 7)]);
    }

    /// A subscript that would leave its dimension of the new shape has no place there: channel
    /// `m` of 34 running past a group of 30.
    #[test]
    fn a_subscript_past_its_new_dimension_is_refused() {
        let index = [affine(&[(0, 1)], 0)];
        assert_eq!(reshape_index(&index, &[120], &[4, 30], &[34]), None);
        assert!(reshape_index(&index, &[120], &[4, 30], &[30]).is_some());
    }
}
