//! Packed constants: a constant's elements reordered at compile time so that every box its
//! kernel fetches is one contiguous block.
//!
//! A box of a row-major tensor is one block when every dimension after the first one it spans
//! more than one element of is whole. A weight tile cut along an inner dimension is not: the
//! `8 x 8` tile of a `[512, 128]` matrix of a 1x1 convolution is eight blocks of 32 bytes, and
//! every block moves the DMA lines it touches, so the tile moves four times its bytes. Real
//! GEMM libraries pack such operands once; a constant's layout is free to choose, since the
//! compiler writes its bytes.
//!
//! [`pack_constants`] runs after scheduling. For a constant read by one access of one kernel
//! (no view of it, not an output), each inner dimension its box cuts, subscripted by a loop
//! `l` alone whose tile `t` divides its extent and which the partition does not split, is
//! split: `l` becomes an outer loop `l_o` (extent `extent / t`, tile 1) and an inner loop
//! `l` (extent `t`, whole), `l = t * l_o + l` in every subscript, and the constant's outer
//! parts move in front of its dimensions: `W[m, c]` with `c`'s tile 8 becomes `W[c_o, m, c]` of
//! shape `[16, 512, 8]`, whose boxes `[1, m-tile, 8]` are contiguous. The new loops walk the
//! same points in the same order (the outer part in the split loop's place among the tile
//! loops, the inner within the tile), so every reduction folds in the same order and the
//! kernel computes the same bits. The kernel is planned again with the same partition and
//! tiles ([`super::planned`]), and the packing is kept when the scheduler's estimate of the
//! new schedule is lower (its boxes touch fewer DMA lines). Packing does not enter the choice
//! of partition and tiles: counted there, its small savings tipped the estimate's ranking of
//! close schedules towards ones slower in the emulator.

use std::sync::Arc;

use swflow_frontend::ir::{Data, Tensor};

use super::split::{remap_access, unique_loop};
use super::{accesses, estimate::estimate, partition::Partition, planned, verify_schedule, Residence, Schedule};
use crate::loops::{Access, Affine, Expr, Index, Kernel, Loop, Program, TensorId, TensorInfo, TensorKind};
use crate::target::Target;

/// Packs the constants of every scheduled kernel of `p` where that lowers the kernel's
/// estimate (see the module documentation). A gradient program's kernels are left as they
/// are: their tape plan depends on their loops.
pub fn pack_constants(p: &mut Program, target: &Target) {
    if p.tape.is_some() {
        return;
    }
    for ki in 0..p.kernels.len() {
        // One constant at a time: each packing plans the kernel again.
        while let Some((kernel, id, packed)) = next_packing(p, ki, target) {
            p.kernels[ki] = kernel;
            p.tensors[id.index()] = packed;
        }
    }
}

/// The first constant of kernel `ki` whose packing lowers the kernel's estimate: the new
/// kernel, the constant and the packed constant in its place.
fn next_packing(p: &Program, ki: usize, target: &Target) -> Option<(Kernel, TensorId, TensorInfo)> {
    let k = &p.kernels[ki];
    let s = k.schedule.as_ref()?;
    let before = estimate(k, p, s, target).cycles();
    (1..k.operands.len()).find_map(|slot| {
        let plan = plan(p, k, s, slot)?;
        let (kernel, scratch) = apply(p, k, &plan, target)?;
        let after = estimate(&kernel, &scratch, kernel.schedule.as_ref()?, target).cycles();
        let id = k.operands[slot];
        (after < before).then(|| (kernel, id, scratch.tensors[id.index()].clone()))
    })
}

/// How one constant operand is packed.
#[derive(Clone, Debug, PartialEq)]
struct Plan {
    slot: usize,
    /// The loop subscripting each dimension of the constant (`None`: a constant subscript 0
    /// of a dimension of one element).
    dims: Vec<Option<usize>>,
    /// The dimensions split, outermost first, with their tiles.
    split: Vec<(usize, usize)>,
}

/// The packing of operand `slot` of kernel `k` of `p` under schedule `s`, if it is a constant
/// that can be packed and its boxes are not already contiguous.
fn plan(p: &Program, k: &Kernel, s: &Schedule, slot: usize) -> Option<Plan> {
    let id = k.operands[slot];
    let TensorKind::Const(_) = p.tensor(id).kind else {
        return None;
    };
    let all = accesses(k);
    let mut mine = all.iter().enumerate().filter(|(_, a)| a.operand == slot);
    let (i, a) = mine.next()?;
    if mine.next().is_some() || s.buffers[i].residence != Residence::Buffer || a.pad.is_some() {
        return None;
    }
    if a.spread.iter().any(|&x| x != 0) || reads_positions(k, slot) {
        return None;
    }
    let shape = &p.tensor(id).ty.shape;
    let mut dims = Vec::with_capacity(shape.len());
    for (d, index) in a.index.iter().enumerate() {
        let Index::Affine(x) = index else { return None };
        match (&x.terms[..], x.offset) {
            ([], 0) if shape[d] == 1 => dims.push(None),
            ([(l, 1)], 0) if k.loops[*l].extent == shape[d] && !dims.contains(&Some(*l)) => dims.push(Some(*l)),
            _ => return None,
        }
    }
    let extent = |d: usize| dims[d].map_or(1, |l| s.tiles[l]);
    let lead = (0..shape.len()).find(|&d| extent(d) > 1)?;
    let cut: Vec<usize> = (lead + 1..shape.len()).filter(|&d| extent(d) < shape[d]).collect();
    if cut.is_empty() {
        return None;
    }
    let mut split = Vec::new();
    for d in cut {
        let l = dims[d]?;
        let t = s.tiles[l];
        if s.partition.contains(&l) || shape[d] % t != 0 {
            return None;
        }
        split.push((d, t));
    }
    // Last, as the dearest: no other reader of its elements.
    let used = p.kernels.iter().flat_map(|k| &k.operands).filter(|&&t| t == id).count();
    let viewed = p
        .tensors
        .iter()
        .any(|t| matches!(t.kind, TensorKind::View(of) if of == id));
    let output = p.outputs.iter().any(|&(_, t)| t == id);
    if used != 1 || viewed || output {
        return None;
    }
    Some(Plan { slot, dims, split })
}

/// Whether a gathered subscript of kernel `k` reads its positions from operand `slot`.
fn reads_positions(k: &Kernel, slot: usize) -> bool {
    fn reads(a: &Access, slot: usize) -> bool {
        a.index.iter().any(|i| match i {
            Index::Gathered { access, .. } => access.operand == slot || reads(access, slot),
            Index::Affine(_) => false,
        })
    }
    let loads = k
        .stmt
        .value
        .accesses()
        .into_iter()
        .chain(k.stmt.epilogue.iter().flat_map(|e| e.accesses()));
    loads.into_iter().any(|a| reads(a, slot))
}

/// The kernel with the plan's loops split and the constant's access packed, planned again with
/// its partition and tiles; and `p` with the constant packed (renamed `NAME.packed`).
fn apply(p: &Program, k: &Kernel, plan: &Plan, target: &Target) -> Option<(Kernel, Program)> {
    let s = k.schedule.as_ref()?;
    let split_loop = |l: usize| {
        plan.split
            .iter()
            .find(|&&(d, _)| plan.dims[d] == Some(l))
            .map(|&(_, t)| t)
    };
    // Old loop `l` becomes `t * outer + inner` when split, else itself at its new place.
    let mut loops: Vec<Loop> = Vec::new();
    let mut args: Vec<Affine> = Vec::new();
    let mut place: Vec<usize> = Vec::new();
    let mut tiles: Vec<usize> = Vec::new();
    let mut outer_of: Vec<Option<usize>> = Vec::new();
    for (l, lp) in k.loops.iter().enumerate() {
        match split_loop(l) {
            Some(t) => {
                let outer = loops.len();
                loops.push(Loop {
                    name: unique_loop(&k.loops, &format!("{}_o", lp.name)),
                    extent: lp.extent / t,
                    kind: lp.kind,
                });
                loops.push(Loop {
                    extent: t,
                    ..lp.clone()
                });
                tiles.extend([1, t]);
                args.push(Affine::var(outer + 1).plus(outer, t as i64));
                place.push(outer + 1);
                outer_of.push(Some(outer));
            }
            None => {
                args.push(Affine::var(loops.len()));
                place.push(loops.len());
                outer_of.push(None);
                loops.push(lp.clone());
                tiles.push(s.tiles[l]);
            }
        }
    }
    let mut n = k.clone();
    n.loops = loops;
    n.schedule = None;
    remap_access(&mut n.stmt.target, &args);
    if let Some(a) = &mut n.stmt.keep {
        remap_access(a, &args);
    }
    // The constant's subscripts: its outer parts first, then its dimensions, a split one
    // by its inner loop.
    let packed_index: Vec<Index> = plan
        .split
        .iter()
        .map(|&(d, _)| Affine::var(outer_of[plan.dims[d].expect("a split dimension has a loop")].expect("split")))
        .chain(plan.dims.iter().map(|d| match d {
            Some(l) => Affine::var(place[*l]),
            None => Affine::constant(0),
        }))
        .map(Index::Affine)
        .collect();
    let slot = plan.slot;
    let mut rewrite = |e: &mut Expr| {
        if let Expr::Load(a) = e {
            if a.operand == slot {
                a.index = packed_index.clone();
            } else {
                remap_access(a, &args);
            }
        }
    };
    n.stmt.value.rewrite(&mut rewrite);
    if let Some(e) = &mut n.stmt.epilogue {
        e.rewrite(&mut rewrite);
    }
    let part = Partition {
        loops: s.partition.iter().map(|&l| place[l]).collect(),
        points: s.partition_points,
        chunk: s.chunk,
        grid: s.grid.clone(),
    };
    let TensorKind::Const(value) = &p.tensor(k.operands[slot]).kind else {
        return None;
    };
    let packed = pack(value, &plan.split)?;
    let mut scratch = p.clone();
    let info = &mut scratch.tensors[k.operands[slot].index()];
    info.ty.shape = packed.shape().to_vec();
    info.name = format!("{}.packed", info.name);
    info.kind = TensorKind::Const(Arc::new(packed));
    let planned = planned(&n, &scratch, &part, tiles, target);
    verify_schedule(&n, &scratch, &planned, target).ok()?;
    n.schedule = Some(planned);
    Some((n, scratch))
}

/// `value` with each dimension `d` of `split` cut in parts of `t` elements and the parts'
/// index moved in front, in `split`'s order: element `[.., t * o + i, ..]` of `value` is
/// element `[o.., .., i, ..]` of the result.
fn pack(value: &Tensor, split: &[(usize, usize)]) -> Option<Tensor> {
    let shape = value.shape();
    let mut strides = vec![1usize; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1];
    }
    // The result's dimensions as (extent, stride in `value`).
    let mut dims: Vec<(usize, usize)> = split.iter().map(|&(d, t)| (shape[d] / t, strides[d] * t)).collect();
    for (d, (&e, &st)) in shape.iter().zip(&strides).enumerate() {
        let e = split.iter().find(|&&(s, _)| s == d).map_or(e, |&(_, t)| t);
        dims.push((e, st));
    }
    let mut order = Vec::with_capacity(value.numel());
    let mut at = vec![0usize; dims.len()];
    for _ in 0..value.numel() {
        order.push(at.iter().zip(&dims).map(|(&i, &(_, st))| i * st).sum::<usize>());
        for j in (0..dims.len()).rev() {
            at[j] += 1;
            if at[j] < dims[j].0 {
                break;
            }
            at[j] = 0;
        }
    }
    fn gather<T: Copy>(v: &[T], order: &[usize]) -> Vec<T> {
        order.iter().map(|&i| v[i]).collect()
    }
    let data = match value.data() {
        Data::F32(v) => Data::F32(gather(v, &order)),
        Data::F64(v) => Data::F64(gather(v, &order)),
        Data::I64(v) => Data::I64(gather(v, &order)),
        Data::Bool(v) => Data::Bool(gather(v, &order)),
    };
    Tensor::new(dims.iter().map(|&(e, _)| e).collect(), data).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_moves_the_parts_of_a_split_dimension_in_front() {
        // w[2, 4] = [[0, 1, 2, 3], [4, 5, 6, 7]], its columns cut in parts of 2: the part
        // first, so w[r, 2 * o + i] lands at [o, r, i].
        let w = Tensor::from_f32(vec![2, 4], (0..8).map(|v| v as f32).collect()).unwrap();
        let packed = pack(&w, &[(1, 2)]).unwrap();
        assert_eq!(packed.shape(), [2, 2, 2]);
        let Data::F32(v) = packed.data() else { panic!("f32") };
        assert_eq!(v, &[0.0, 1.0, 4.0, 5.0, 2.0, 3.0, 6.0, 7.0]);
    }

    #[test]
    fn two_split_dimensions_go_in_front_in_their_order() {
        // w[2, 2, 4] cut along dimension 1 by 1 and dimension 2 by 2.
        let w = Tensor::from_i64(vec![2, 2, 4], (0..16).collect()).unwrap();
        let packed = pack(&w, &[(1, 1), (2, 2)]).unwrap();
        assert_eq!(packed.shape(), [2, 2, 2, 1, 2]);
        let Data::I64(v) = packed.data() else { panic!("i64") };
        // [o1, o2, a, 0, i] is w[a, o1, 2 * o2 + i].
        let want: Vec<i64> = (0..2)
            .flat_map(|o1| {
                (0..2).flat_map(move |o2| (0..2).flat_map(move |a| (0..2).map(move |i| a * 8 + o1 * 4 + 2 * o2 + i)))
            })
            .collect();
        assert_eq!(v, &want);
    }
}
