//! Elementwise ops, data movement and reductions.

use swflow_frontend::ir::{DType, Op, ReduceKind};

use super::{broadcast_index, dims, load_padded, par, red, target, vars, Lowering, NodeCx};
use crate::loops::{Access, Affine, Expr, Index, Reduction, Scalar, TensorId};

/// `out[d..] = f(operands broadcast to out)`.
pub(super) fn lower(cx: &mut Lowering, n: &NodeCx) -> Result<(), String> {
    let node = n.node();
    let out_shape = node.ty.shape.clone();
    let mut operands = vec![n.out];
    let mut loads = Vec::new();
    for i in 0..node.inputs.len() {
        operands.push(cx.input(n, i));
        loads.push(Expr::load(i + 1, broadcast_index(&n.input_ty(i).shape, &out_shape)));
    }
    let mut loads = loads.into_iter();
    let mut next = || loads.next().expect("one load per operand");
    let value = match &node.op {
        Op::Unary(u) => Expr::Unary(*u, Box::new(next())),
        Op::Binary(b) => {
            let a = next();
            Expr::binary(*b, a, next())
        }
        Op::Select => {
            let (c, a) = (next(), next());
            Expr::Select(Box::new(c), Box::new(a), Box::new(next()))
        }
        Op::Cast { to } => Expr::Cast(*to, Box::new(next())),
        Op::Broadcast { .. } => next(),
        op => unreachable!("{} is not elementwise", op.name()),
    };
    cx.kernel(
        n,
        "",
        dims(&out_shape),
        operands,
        target(vars(out_shape.len())),
        value,
        None,
    )?;
    Ok(())
}

/// A kernel writing `value` to every element of `t` (helper kernel `<node>.<suffix>`).
pub(super) fn fill(cx: &mut Lowering, n: &NodeCx, suffix: &str, t: TensorId, value: Scalar) -> Result<(), String> {
    let shape = cx.p.tensor(t).ty.shape.clone();
    cx.kernel(
        n,
        suffix,
        dims(&shape),
        vec![t],
        target(vars(shape.len())),
        Expr::Const(value),
        None,
    )
}

pub(super) fn transpose(cx: &mut Lowering, n: &NodeCx, perm: &[usize]) -> Result<(), String> {
    let mut index = vec![Affine::constant(0); perm.len()];
    for (i, &p) in perm.iter().enumerate() {
        index[p] = Affine::var(i);
    }
    copy_from(cx, n, Expr::load(1, index))
}

pub(super) fn slice(cx: &mut Lowering, n: &NodeCx, starts: &[usize], steps: &[i64]) -> Result<(), String> {
    let index = (0..starts.len())
        .map(|i| Affine::constant(starts[i] as i64).plus(i, steps[i]))
        .collect();
    copy_from(cx, n, Expr::load(1, index))
}

/// `out[d..] = x[d - before..] else value`: one guarded copy.
pub(super) fn pad(cx: &mut Lowering, n: &NodeCx, pads: &[usize], value: f64) -> Result<(), String> {
    let index = (0..pads.len() / 2)
        .map(|i| Affine::var(i).add_offset(-(pads[i] as i64)))
        .collect();
    let value = Scalar::of(n.node().ty.dtype, value);
    let loops = dims(&n.node().ty.shape);
    let load = load_padded(1, index, &loops, &n.input_ty(0).shape, value);
    copy_from(cx, n, load)
}

/// `out[d..] = load` over the output's dimensions, `load` reading operand 1.
fn copy_from(cx: &mut Lowering, n: &NodeCx, load: Expr) -> Result<(), String> {
    let shape = n.node().ty.shape.clone();
    let x = cx.input(n, 0);
    cx.kernel(
        n,
        "",
        dims(&shape),
        vec![n.out, x],
        target(vars(shape.len())),
        load,
        None,
    )
}

/// One copy kernel per operand into its range of the output.
pub(super) fn concat(cx: &mut Lowering, n: &NodeCx, axis: usize) -> Result<(), String> {
    let mut offset = 0;
    for i in 0..n.node().inputs.len() {
        let shape = n.input_ty(i).shape.clone();
        if shape.iter().product::<usize>() > 0 {
            let mut out_index = vars(shape.len());
            out_index[axis] = Affine::var(axis).add_offset(offset as i64);
            let x = cx.input(n, i);
            cx.kernel(
                n,
                &format!("part{i}"),
                dims(&shape),
                vec![n.out, x],
                target(out_index),
                Expr::load(1, vars(shape.len())),
                None,
            )?;
        }
        offset += shape[axis];
    }
    Ok(())
}

/// `out[pre.., j.., post..] = data[pre.., indices[j..], post..]`.
pub(super) fn gather(cx: &mut Lowering, n: &NodeCx, axis: usize) -> Result<(), String> {
    let shape = n.node().ty.shape.clone();
    let (data_ty, idx_rank) = (n.input_ty(0).clone(), n.input_ty(1).rank());
    let positions = Access::new(
        2,
        (axis..axis + idx_rank).map(|l| Index::Affine(Affine::var(l))).collect(),
    );
    let mut index: Vec<Index> = (0..axis).map(|l| Index::Affine(Affine::var(l))).collect();
    index.push(Index::Gathered {
        access: Box::new(positions),
        extent: data_ty.shape[axis],
    });
    index.extend((axis + idx_rank..shape.len()).map(|l| Index::Affine(Affine::var(l))));
    let (data, idx) = (cx.input(n, 0), cx.input(n, 1));
    cx.kernel(
        n,
        "",
        dims(&shape),
        vec![n.out, data, idx],
        target(vars(shape.len())),
        Expr::Load(Access::new(1, index)),
        None,
    )?;
    Ok(())
}

/// The identity of a reduction for `dtype`.
pub(super) fn reduce_init(kind: ReduceKind, dtype: DType) -> Scalar {
    match kind {
        ReduceKind::Sum => Scalar::of(dtype, 0.0),
        ReduceKind::Max => Scalar::of(dtype, f64::NEG_INFINITY),
        ReduceKind::Min => Scalar::of(dtype, f64::INFINITY),
        ReduceKind::Prod => Scalar::of(dtype, 1.0),
    }
}

/// Parallel loops over the kept dimensions, reduction loops over `axes`.
pub(super) fn reduce(cx: &mut Lowering, n: &NodeCx, kind: ReduceKind, axes: &[usize]) -> Result<(), String> {
    let shape = n.input_ty(0).shape.clone();
    let dtype = n.node().ty.dtype;
    let init = reduce_init(kind, dtype);
    if axes.iter().any(|&a| shape[a] == 0) {
        // Nothing to fold: every element is the identity.
        super::elementwise::fill(cx, n, "", n.out, init)?;
        return Ok(());
    }
    let mut loops = Vec::new();
    let mut x_index = vec![Affine::constant(0); shape.len()];
    let mut out_index = vec![Affine::constant(0); shape.len()];
    for (d, &e) in shape.iter().enumerate().filter(|(d, _)| !axes.contains(d)) {
        x_index[d] = Affine::var(loops.len());
        out_index[d] = Affine::var(loops.len());
        loops.push(par(format!("d{d}"), e));
    }
    for &a in axes {
        x_index[a] = Affine::var(loops.len());
        loops.push(red(format!("r{a}"), shape[a]));
    }
    let x = cx.input(n, 0);
    cx.kernel(
        n,
        "",
        loops,
        vec![n.out, x],
        target(out_index),
        Expr::load(1, x_index),
        Some(Reduction { kind, init }),
    )?;
    Ok(())
}
