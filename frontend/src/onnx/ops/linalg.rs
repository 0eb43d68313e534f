//! Gemm and MatMul.

use super::Cx;
use crate::ir::{infer::broadcast_shapes, BinaryOp, NodeId, Op};

/// `alpha * A' x B' + beta * C` with optional transposes; A and B are matrices.
pub(super) fn gemm(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let (mut a, mut b) = (cx.input(0)?, cx.input(1)?);
    if cx.rank(a) != 2 || cx.rank(b) != 2 {
        return Err(format!("A and B must be matrices, got {} and {}", cx.ty(a), cx.ty(b)));
    }
    if cx.attrs.flag("transA", false)? {
        a = cx.op(Op::Transpose { perm: vec![1, 0] }, &[a])?;
    }
    if cx.attrs.flag("transB", false)? {
        b = cx.op(Op::Transpose { perm: vec![1, 0] }, &[b])?;
    }
    let mut y = cx.op(Op::MatMul, &[a, b])?;
    let alpha = cx.attrs.float("alpha", 1.0)?;
    if alpha != 1.0 {
        y = cx.with_scalar(BinaryOp::Mul, y, alpha as f64)?;
    }
    if let Some(mut c) = cx.opt_input(2)? {
        let beta = cx.attrs.float("beta", 1.0)?;
        if beta != 1.0 {
            c = cx.with_scalar(BinaryOp::Mul, c, beta as f64)?;
        }
        let shape = cx.shape(y);
        y = cx.binary(BinaryOp::Add, y, c)?;
        if cx.shape(y) != shape {
            return Err("C must broadcast to the shape of A x B".into());
        }
    }
    Ok(vec![y])
}

/// numpy `matmul`: 1-D operands gain a unit dimension (removed again from the result), batch
/// dimensions broadcast. A right operand without batch dimensions is applied to the
/// flattened rows of the left one instead of being broadcast.
pub(super) fn matmul(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let (a, b) = (cx.input(0)?, cx.input(1)?);
    let (mut sa, mut sb) = (cx.shape(a), cx.shape(b));
    if sa.is_empty() || sb.is_empty() {
        return Err("operands must have at least one dimension".into());
    }
    let (a_vec, b_vec) = (sa.len() == 1, sb.len() == 1);
    if a_vec {
        sa.insert(0, 1);
    }
    if b_vec {
        sb.push(1);
    }
    let (ra, rb) = (sa.len(), sb.len());
    let (m, k, n) = (sa[ra - 2], sa[ra - 1], sb[rb - 1]);
    if sb[rb - 2] != k {
        return Err(format!("inner dimensions differ: {} x {}", cx.ty(a), cx.ty(b)));
    }
    let batch = broadcast_shapes(&sa[..ra - 2], &sb[..rb - 2]).map_err(|e| e.0)?;
    let y = if rb == 2 {
        let rows = sa[..ra - 1].iter().product();
        let a2 = cx.reshape(a, vec![rows, k])?;
        let b2 = cx.reshape(b, vec![k, n])?;
        cx.op(Op::MatMul, &[a2, b2])?
    } else {
        let full = |mut s: Vec<usize>, r: usize, c: usize| {
            s.extend([r, c]);
            s
        };
        let a3 = cx.reshape(a, sa.clone())?;
        let a3 = broadcast_to(cx, a3, full(batch.clone(), m, k))?;
        let b3 = cx.reshape(b, sb.clone())?;
        let b3 = broadcast_to(cx, b3, full(batch.clone(), k, n))?;
        cx.op(Op::MatMul, &[a3, b3])?
    };
    let mut out = batch;
    if !a_vec {
        out.push(m);
    }
    if !b_vec {
        out.push(n);
    }
    Ok(vec![cx.reshape(y, out)?])
}

fn broadcast_to(cx: &mut Cx, x: NodeId, shape: Vec<usize>) -> Result<NodeId, String> {
    if cx.shape(x) == shape {
        return Ok(x);
    }
    cx.op(Op::Broadcast { shape }, &[x])
}
