//! Attention (opsets 23 to 25): scaled dot-product attention over heads, expanded into
//! matrix products, a masked softmax and the data movement around them, following the
//! definition's reference computation step by step.
//!
//! The additive bias combines, in this order, the attention mask (a bool mask becomes 0 where
//! true and -inf where false; a mask shorter than the key sequence is padded with -inf), the
//! bottom-right causal mask, the sliding window (opset 25) and the padding given by
//! `nonpad_kv_seqlen` (opset 24). A query row whose bias is -inf everywhere attends nothing:
//! its probabilities, and so its output, are zero.

use super::{table, Cx};
use crate::ir::{BinaryOp, DType, NodeId, Op, ReduceKind, UnaryOp};

/// `[B, S, H*D]` viewed as `[B, H, S, D]`.
fn split_heads(cx: &mut Cx, x: NodeId, heads: usize, what: &str) -> Result<NodeId, String> {
    let s = cx.shape(x);
    if heads == 0 || s[2] % heads != 0 {
        return Err(format!("{what} {} does not split into {heads} heads", cx.ty(x)));
    }
    let v = cx.reshape(x, vec![s[0], s[1], heads, s[2] / heads])?;
    cx.transpose(v, vec![0, 2, 1, 3])
}

/// Each of the `h` heads of `x[B, h, S, D]` repeated `r` times in place: `[h0, h0, h1, h1..]`.
fn repeat_heads(cx: &mut Cx, x: NodeId, r: usize) -> Result<NodeId, String> {
    if r == 1 {
        return Ok(x);
    }
    let [b, h, s, d] = cx.shape(x)[..] else {
        return Err("heads must be rank 4".into());
    };
    let v = cx.reshape(x, vec![b, h, 1, s, d])?;
    let w = cx.broadcast(v, vec![b, h, r, s, d])?;
    cx.reshape(w, vec![b, h * r, s, d])
}

/// 0 where `allowed`, -inf elsewhere, in `dtype`.
fn bias_of(cx: &mut Cx, allowed: NodeId, dtype: DType) -> Result<NodeId, String> {
    let zero = cx.scalar(dtype, 0.0);
    let neg = cx.scalar(dtype, f64::NEG_INFINITY);
    cx.select(allowed, zero, neg)
}

/// `a + b`, or `b` alone when there is no `a` yet.
fn add_to(cx: &mut Cx, a: Option<NodeId>, b: NodeId) -> Result<NodeId, String> {
    match a {
        Some(a) => cx.binary(BinaryOp::Add, a, b),
        None => Ok(b),
    }
}

/// Query positions relative to key positions, `(i + offset) - j`, as i64 `[q, kv]` or, with a
/// per-batch offset `[B]`, `[B, 1, q, kv]`.
fn diagonal_distance(cx: &mut Cx, q: usize, kv: usize, offset: Offset) -> Result<NodeId, String> {
    table(Some(q.max(kv)), "the positions")?;
    let i = cx.i64_const(vec![q, 1], (0..q as i64).collect())?;
    let j = cx.i64_const(vec![1, kv], (0..kv as i64).collect())?;
    let shifted = match offset {
        Offset::Fixed(o) => cx.with_scalar(BinaryOp::Add, i, o as f64)?,
        Offset::PerBatch(o) => {
            let b = cx.shape(o)[0];
            let o = cx.reshape(o, vec![b, 1, 1, 1])?;
            cx.binary(BinaryOp::Add, i, o)?
        }
    };
    cx.binary(BinaryOp::Sub, shifted, j)
}

/// The number of keys preceding the query block: fixed (the past length, or 0) or, for an
/// external cache, `nonpad_kv_seqlen[b] - q` per batch.
#[derive(Clone, Copy)]
enum Offset {
    Fixed(i64),
    PerBatch(NodeId),
}

pub(super) fn attention(cx: &mut Cx) -> Result<Vec<NodeId>, String> {
    let (q_in, k_in, v_in) = (cx.input(0)?, cx.input(1)?, cx.input(2)?);
    let mask = cx.opt_input(3)?;
    let (past_k, past_v) = (cx.opt_input(4)?, cx.opt_input(5)?);
    let nonpad = if cx.opset >= 24 { cx.opt_input(6)? } else { None };
    let dtype = cx.ty(q_in).dtype;
    if !dtype.is_float() {
        return Err(format!("Q {} must be floating point", cx.ty(q_in)));
    }
    let rank = cx.rank(q_in);
    if cx.rank(k_in) != rank || cx.rank(v_in) != rank || !(rank == 3 || rank == 4) {
        return Err("Q, K and V must all be 3-D or all 4-D".into());
    }
    if past_k.is_some() != past_v.is_some() {
        return Err("past_key and past_value must be given together".into());
    }
    if nonpad.is_some() && past_k.is_some() {
        return Err("nonpad_kv_seqlen cannot be combined with past_key and past_value".into());
    }
    let q_heads_attr = cx.attrs.int_opt("q_num_heads")?;
    let kv_heads_attr = cx.attrs.int_opt("kv_num_heads")?;
    let (q, k, v) = if rank == 3 {
        let (Some(hq), Some(hk)) = (q_heads_attr, kv_heads_attr) else {
            return Err("3-D inputs need q_num_heads and kv_num_heads".into());
        };
        let (hq, hk) = (hq.max(0) as usize, hk.max(0) as usize);
        (
            split_heads(cx, q_in, hq, "Q")?,
            split_heads(cx, k_in, hk, "K")?,
            split_heads(cx, v_in, hk, "V")?,
        )
    } else {
        if cx.opset >= 25 && (q_heads_attr.is_some() || kv_heads_attr.is_some()) {
            return Err("q_num_heads and kv_num_heads must not be given for 4-D inputs".into());
        }
        (q_in, k_in, v_in)
    };
    let (qs, ks, vs) = (cx.shape(q), cx.shape(k), cx.shape(v));
    let (batch, hq, q_len, head) = (qs[0], qs[1], qs[2], qs[3]);
    if ks[0] != batch || vs[0] != batch || ks[3] != head || ks[1] != vs[1] || ks[2] != vs[2] {
        return Err(format!(
            "Q {}, K {} and V {} do not match",
            cx.ty(q),
            cx.ty(k),
            cx.ty(v)
        ));
    }

    // Scale both operands by the square root of the scale, in the operand type.
    let scale = match cx.attrs.float_opt("scale")? {
        Some(s) => s as f64,
        None => 1.0 / (head as f64).sqrt(),
    };
    let root = cx.scalar(DType::F64, scale.sqrt());
    let root = cx.cast(root, dtype)?;

    // The key and value caches.
    let (k, v) = match (past_k, past_v) {
        (Some(pk), Some(pv)) => (
            cx.op(Op::Concat { axis: 2 }, &[pk, k])?,
            cx.op(Op::Concat { axis: 2 }, &[pv, v])?,
        ),
        _ => (k, v),
    };
    let (present_k, present_v) = (k, v);
    let kv_len = cx.shape(k)[2];
    let past_len = past_k.map_or(0, |pk| cx.shape(pk)[2]);

    // The additive bias.
    let mut bias = None;
    if let Some(m) = mask {
        let mut m = m;
        let ms = cx.shape(m);
        let last = *ms.last().ok_or("attn_mask must have at least one dimension")?;
        if last < kv_len {
            let mut pad_shape = ms.clone();
            *pad_shape.last_mut().expect("non-empty") = kv_len - last;
            let fill = if cx.ty(m).dtype == DType::Bool {
                cx.scalar(DType::Bool, 0.0)
            } else {
                cx.scalar(cx.ty(m).dtype, f64::NEG_INFINITY)
            };
            let fill = cx.broadcast(fill, pad_shape)?;
            m = cx.op(Op::Concat { axis: ms.len() - 1 }, &[m, fill])?;
        }
        m = if cx.ty(m).dtype == DType::Bool {
            bias_of(cx, m, dtype)?
        } else {
            cx.cast(m, dtype)?
        };
        bias = Some(m);
    }
    let offset = match nonpad {
        Some(n) => {
            let n = cx.cast(n, DType::I64)?;
            if cx.shape(n) != [batch] {
                return Err(format!("nonpad_kv_seqlen {} must have {batch} elements", cx.ty(n)));
            }
            Offset::PerBatch(cx.with_scalar(BinaryOp::Sub, n, q_len as f64)?)
        }
        None => Offset::Fixed(past_len as i64),
    };
    if cx.attrs.flag("is_causal", false)? {
        let d = diagonal_distance(cx, q_len, kv_len, offset)?;
        let allowed = cx.with_scalar(BinaryOp::Greater, d, -1.0)?;
        let causal = bias_of(cx, allowed, dtype)?;
        bias = Some(add_to(cx, bias, causal)?);
    }
    if cx.opset >= 25 {
        let left = cx.attrs.int("left_window_size", -1)?;
        let right = cx.attrs.int("right_window_size", -1)?;
        if left < -1 || right < -1 {
            return Err("window sizes must be -1 or non-negative".into());
        }
        if left >= 0 || right >= 0 {
            let d = diagonal_distance(cx, q_len, kv_len, offset)?;
            let yes = cx.scalar(DType::Bool, 1.0);
            let mut allowed = cx.broadcast(yes, cx.shape(d))?;
            if left >= 0 {
                // (i + offset) - j <= left
                let within = cx.with_scalar(BinaryOp::Less, d, left as f64 + 1.0)?;
                let no = cx.scalar(DType::Bool, 0.0);
                allowed = cx.select(allowed, within, no)?;
            }
            if right >= 0 {
                // j - (i + offset) <= right
                let within = cx.with_scalar(BinaryOp::Greater, d, -(right as f64) - 1.0)?;
                let no = cx.scalar(DType::Bool, 0.0);
                allowed = cx.select(allowed, within, no)?;
            }
            let window = bias_of(cx, allowed, dtype)?;
            let base = match bias {
                Some(b) => b,
                None => cx.scalar(dtype, 0.0),
            };
            bias = Some(cx.binary(BinaryOp::Add, base, window)?);
        }
    }
    if let Some(n) = nonpad {
        let n = cx.cast(n, DType::I64)?;
        let n = cx.reshape(n, vec![batch, 1, 1, 1])?;
        let j = cx.i64_const(vec![kv_len], (0..kv_len as i64).collect())?;
        let valid = cx.binary(BinaryOp::Less, j, n)?;
        let padding = bias_of(cx, valid, dtype)?;
        bias = Some(add_to(cx, bias, padding)?);
    }

    // Grouped-query attention repeats each key/value head for its group of query heads.
    let hk = cx.shape(k)[1];
    let (k, v) = if hq != hk {
        if hk == 0 || hq % hk != 0 {
            return Err(format!("{hq} query heads do not group over {hk} key/value heads"));
        }
        (repeat_heads(cx, k, hq / hk)?, repeat_heads(cx, v, hq / hk)?)
    } else {
        (k, v)
    };

    let qs = cx.binary(BinaryOp::Mul, q, root)?;
    let ks = cx.binary(BinaryOp::Mul, k, root)?;
    let kt = cx.transpose(ks, vec![0, 1, 3, 2])?;
    let mut qk = cx.op(Op::MatMul, &[qs, kt])?;
    if let Some(cap) = cx.attrs.float_opt("softcap")?.filter(|&c| c > 0.0) {
        let y = cx.with_scalar(BinaryOp::Div, qk, cap as f64)?;
        let t = cx.unary(UnaryOp::Tanh, y)?;
        qk = cx.with_scalar(BinaryOp::Mul, t, cap as f64)?;
    }
    let with_bias = match bias {
        Some(b) => cx.binary(BinaryOp::Add, qk, b)?,
        None => qk,
    };
    let mode = cx.attrs.int("qk_matmul_output_mode", 0)?;
    let precision = match cx.attrs.int_opt("softmax_precision")? {
        Some(p) => crate::onnx::dtype_from_onnx(p as i32)?,
        None => dtype,
    };
    let logits = cx.cast(with_bias, precision)?;
    let mut p = masked_softmax(cx, logits)?;
    if let Some(b) = bias {
        let worst = cx.reduce(ReduceKind::Max, b, vec![cx.rank(b) - 1])?;
        let dead = cx.with_scalar(BinaryOp::Equal, worst, f64::NEG_INFINITY)?;
        let zero = cx.scalar(precision, 0.0);
        p = cx.select(dead, zero, p)?;
    }
    let p = cx.cast(p, dtype)?;
    let qk_out = match mode {
        0 | 1 => qk,
        2 => with_bias,
        3 => p,
        other => return Err(format!("qk_matmul_output_mode {other} is not defined")),
    };
    let mut y = cx.op(Op::MatMul, &[p, v])?;
    if rank == 3 {
        let t = cx.transpose(y, vec![0, 2, 1, 3])?;
        let dv = cx.shape(v)[3];
        y = cx.reshape(t, vec![batch, q_len, hq * dv])?;
    }
    Ok(vec![y, present_k, present_v, qk_out])
}

/// Softmax over the last axis that gives zeros, not NaN, for a row that is -inf everywhere.
fn masked_softmax(cx: &mut Cx, x: NodeId) -> Result<NodeId, String> {
    let last = cx.rank(x) - 1;
    let dtype = cx.ty(x).dtype;
    let m = cx.reduce(ReduceKind::Max, x, vec![last])?;
    let dead = cx.with_scalar(BinaryOp::Equal, m, f64::NEG_INFINITY)?;
    let zero = cx.scalar(dtype, 0.0);
    let safe = cx.select(dead, zero, m)?;
    let d = cx.binary(BinaryOp::Sub, x, safe)?;
    let e = cx.unary(UnaryOp::Exp, d)?;
    let s = cx.reduce(ReduceKind::Sum, e, vec![last])?;
    let empty = cx.with_scalar(BinaryOp::Equal, s, 0.0)?;
    let one = cx.scalar(dtype, 1.0);
    let s = cx.select(empty, one, s)?;
    cx.binary(BinaryOp::Div, e, s)
}
