//! One gradient rule per primitive. A rule receives the gradient `gy` of the loss with respect
//! to a node's value and returns, per operand, that operand's contribution (or `None`: no
//! gradient flows there, as into a comparison's result or a selector). Each rule emits
//! primitives only. Where a function has a kink the rules take the value JAX takes: `relu`
//! passes no gradient at 0, `max` and `min` split it evenly between tied operands, and so do
//! `reduce_max` and `reduce_min` between tied elements.

use std::collections::HashSet;
use std::sync::Arc;

use crate::ir::{
    BinaryOp, ConvAttrs, DType, Graph, NodeId, Op, PoolAttrs, PoolKind, ReduceKind, Tensor, TensorType, UnaryOp,
};

/// Appends nodes to a graph under fresh names `<prefix>/N`: the backward pass (`grad/`), and
/// the optimizer's update (`opt/`, see `training::optim`).
pub(crate) struct Builder {
    g: Graph,
    names: HashSet<String>,
    next: usize,
    prefix: &'static str,
    /// The origin of the new nodes: for the backward pass, the node whose rule is emitting.
    origin: String,
}

pub(crate) type Built = Result<NodeId, String>;

impl Builder {
    /// A builder of a backward pass.
    pub(super) fn new(g: Graph) -> Builder {
        Builder::named(g, "grad", "")
    }

    /// A builder whose nodes are named `<prefix>/N` and record `origin`.
    pub(crate) fn named(g: Graph, prefix: &'static str, origin: &str) -> Builder {
        let names = g.nodes().iter().map(|n| n.name.clone()).collect();
        Builder {
            g,
            names,
            next: 0,
            prefix,
            origin: origin.to_string(),
        }
    }

    pub(crate) fn finish(self) -> Graph {
        self.g
    }

    pub(crate) fn graph(&self) -> &Graph {
        &self.g
    }

    /// A new graph input.
    pub(crate) fn input(&mut self, name: String, ty: TensorType) -> NodeId {
        self.names.insert(name.clone());
        self.g.add_input(name, ty)
    }

    /// New nodes come from the rule of `node`.
    pub(super) fn set_origin(&mut self, node: &str) {
        self.origin = format!("gradient of {node}");
    }

    fn fresh(&mut self) -> String {
        loop {
            let name = format!("{}/{}", self.prefix, self.next);
            self.next += 1;
            if self.names.insert(name.clone()) {
                return name;
            }
        }
    }

    fn ty(&self, x: NodeId) -> &TensorType {
        &self.g.node(x).ty
    }

    fn shape(&self, x: NodeId) -> Vec<usize> {
        self.ty(x).shape.clone()
    }

    pub(crate) fn op(&mut self, op: Op, inputs: &[NodeId]) -> Built {
        let name = self.fresh();
        let origin = Some(self.origin.clone());
        self.g.add_node(name, op, inputs.to_vec(), origin).map_err(|e| e.0)
    }

    /// A constant node.
    pub(crate) fn constant(&mut self, t: Tensor) -> NodeId {
        let name = self.fresh();
        self.g.add_const(name, Arc::new(t))
    }

    pub(crate) fn scalar(&mut self, dtype: DType, v: f64) -> NodeId {
        let data = match dtype {
            DType::F64 => crate::ir::Data::F64(vec![v]),
            _ => crate::ir::Data::F32(vec![v as f32]),
        };
        self.constant(Tensor::new(Vec::new(), data).expect("a scalar has one element"))
    }

    fn unary(&mut self, u: UnaryOp, x: NodeId) -> Built {
        self.op(Op::Unary(u), &[x])
    }

    pub(crate) fn binary(&mut self, b: BinaryOp, x: NodeId, y: NodeId) -> Built {
        self.op(Op::Binary(b), &[x, y])
    }

    pub(crate) fn add(&mut self, x: NodeId, y: NodeId) -> Built {
        self.binary(BinaryOp::Add, x, y)
    }

    fn sub(&mut self, x: NodeId, y: NodeId) -> Built {
        self.binary(BinaryOp::Sub, x, y)
    }

    fn mul(&mut self, x: NodeId, y: NodeId) -> Built {
        self.binary(BinaryOp::Mul, x, y)
    }

    fn div(&mut self, x: NodeId, y: NodeId) -> Built {
        self.binary(BinaryOp::Div, x, y)
    }

    fn neg(&mut self, x: NodeId) -> Built {
        self.unary(UnaryOp::Neg, x)
    }

    /// `x` times the constant `c`.
    pub(crate) fn scale(&mut self, x: NodeId, c: f64) -> Built {
        let s = self.scalar(self.ty(x).dtype, c);
        self.mul(x, s)
    }

    /// `cond ? x : 0`, broadcast like `select`.
    fn where_else_zero(&mut self, cond: NodeId, x: NodeId) -> Built {
        let z = self.scalar(self.ty(x).dtype, 0.0);
        self.op(Op::Select, &[cond, x, z])
    }

    /// `cond` as 0 or 1 of type `dtype`.
    fn indicator(&mut self, cond: NodeId, dtype: DType) -> Built {
        self.op(Op::Cast { to: dtype }, &[cond])
    }

    pub(super) fn broadcast(&mut self, x: NodeId, shape: &[usize]) -> Built {
        if self.ty(x).shape == shape {
            return Ok(x);
        }
        self.op(Op::Broadcast { shape: shape.to_vec() }, &[x])
    }

    fn reshape(&mut self, x: NodeId, shape: &[usize]) -> Built {
        if self.ty(x).shape == shape {
            return Ok(x);
        }
        self.op(Op::Reshape { shape: shape.to_vec() }, &[x])
    }

    fn sum(&mut self, x: NodeId, axes: Vec<usize>) -> Built {
        if axes.is_empty() {
            return Ok(x);
        }
        self.op(
            Op::Reduce {
                kind: ReduceKind::Sum,
                axes,
            },
            &[x],
        )
    }

    /// The gradient `gy` of a value that numpy-broadcast operand `x` (of shape `to`) took
    /// part in: summed over the broadcast axes, in `to`'s shape.
    fn unbroadcast(&mut self, gy: NodeId, to: &[usize]) -> Built {
        let from = self.shape(gy);
        let lead = from.len() - to.len();
        let axes: Vec<usize> = (0..from.len())
            .filter(|&i| i < lead || (to[i - lead] == 1 && from[i] != 1))
            .collect();
        let s = self.sum(gy, axes)?;
        self.reshape(s, to)
    }

    /// `x` with its last two axes swapped.
    fn swap_last(&mut self, x: NodeId) -> Built {
        let r = self.ty(x).rank();
        let mut perm: Vec<usize> = (0..r).collect();
        perm.swap(r - 2, r - 1);
        self.op(Op::Transpose { perm }, &[x])
    }
}

/// The contributions of node `id` (of graph `g`, already in `b`) to its operands' gradients,
/// given the gradient `gy` of its value.
pub(super) fn rule(b: &mut Builder, g: &Graph, id: NodeId, gy: NodeId) -> Result<Vec<Option<NodeId>>, String> {
    let node = g.node(id);
    let x = &node.inputs;
    let y = id;
    let dtype = node.ty.dtype;
    Ok(match &node.op {
        Op::Input | Op::Const(_) => Vec::new(),
        Op::Unary(u) => vec![unary(b, *u, x[0], y, gy)?],
        Op::Binary(op) => binary(b, *op, x[0], x[1], y, gy)?,
        Op::Select => {
            let (ta, tb) = (b.shape(x[1]), b.shape(x[2]));
            let ga = b.where_else_zero(x[0], gy)?;
            let not = b.unary(UnaryOp::Not, x[0])?;
            let gb = b.where_else_zero(not, gy)?;
            vec![None, Some(b.unbroadcast(ga, &ta)?), Some(b.unbroadcast(gb, &tb)?)]
        }
        Op::Cast { .. } => {
            let from = b.ty(x[0]).dtype;
            match (super::is_float(from), super::is_float(dtype)) {
                (true, true) => vec![Some(b.op(Op::Cast { to: from }, &[gy])?)],
                _ => vec![None],
            }
        }
        Op::Conv(c) => {
            let gx = conv_input_grad(b, c, x[0], x[1], gy)?;
            let gw = conv_weight_grad(b, c, x[0], x[1], gy)?;
            vec![Some(gx), Some(gw)]
        }
        Op::ConvTranspose { conv, .. } => {
            // The adjoint of the convolution with the same weight and attributes: its input
            // gradient is that convolution of `gy`, and its weight gradient the convolution's
            // weight gradient with the roles of input and output gradient exchanged.
            let gx = b.op(Op::Conv(conv.clone()), &[gy, x[1]])?;
            let gw = conv_weight_grad(b, conv, gy, x[1], x[0])?;
            vec![Some(gx), Some(gw)]
        }
        Op::Pool(
            p @ PoolAttrs {
                kind: PoolKind::Avg { .. },
                ..
            },
        ) => vec![Some(avg_pool_grad(b, p, x[0], gy)?)],
        Op::Pool(p) => vec![Some(max_pool_grad(b, p, x[0], y, gy)?)],
        Op::Gather { axis } => vec![Some(gather_grad(b, *axis, x[0], x[1], gy)?), None],
        Op::MatMul => {
            let bt = b.swap_last(x[1])?;
            let ga = b.op(Op::MatMul, &[gy, bt])?;
            let at = b.swap_last(x[0])?;
            let gb = b.op(Op::MatMul, &[at, gy])?;
            vec![Some(ga), Some(gb)]
        }
        Op::Reduce { kind, axes } => vec![Some(reduce(b, *kind, axes, x[0], y, gy)?)],
        Op::Reshape { .. } => {
            let shape = b.shape(x[0]);
            vec![Some(b.reshape(gy, &shape)?)]
        }
        Op::Broadcast { .. } => {
            let shape = b.shape(x[0]);
            vec![Some(b.unbroadcast(gy, &shape)?)]
        }
        Op::Transpose { perm } => {
            let mut inverse = vec![0; perm.len()];
            for (i, &p) in perm.iter().enumerate() {
                inverse[p] = i;
            }
            vec![Some(b.op(Op::Transpose { perm: inverse }, &[gy])?)]
        }
        Op::Slice { starts, steps, sizes } => vec![Some(unslice(b, x[0], starts, steps, sizes, gy)?)],
        Op::Pad { pads, .. } => {
            let shape = b.shape(x[0]);
            let r = shape.len();
            let slice = Op::Slice {
                starts: pads[..r].to_vec(),
                steps: vec![1; r],
                sizes: shape,
            };
            vec![Some(b.op(slice, &[gy])?)]
        }
        Op::Concat { axis } => {
            let mut at = 0;
            let mut out = Vec::new();
            for &part in x {
                let shape = b.shape(part);
                let mut starts = vec![0; shape.len()];
                starts[*axis] = at;
                at += shape[*axis];
                let r = shape.len();
                out.push(Some(b.op(
                    Op::Slice {
                        starts,
                        steps: vec![1; r],
                        sizes: shape,
                    },
                    &[gy],
                )?));
            }
            out
        }
    })
}

fn unary(b: &mut Builder, u: UnaryOp, x: NodeId, y: NodeId, gy: NodeId) -> Result<Option<NodeId>, String> {
    let d = b.ty(x).dtype;
    let g = match u {
        UnaryOp::Neg => b.neg(gy)?,
        UnaryOp::Abs => {
            let s = b.unary(UnaryOp::Sign, x)?;
            b.mul(gy, s)?
        }
        UnaryOp::Sign | UnaryOp::Not => return Ok(None),
        UnaryOp::Sqrt => {
            let h = b.scale(gy, 0.5)?;
            b.div(h, y)?
        }
        UnaryOp::Exp => b.mul(gy, y)?,
        UnaryOp::Log => b.div(gy, x)?,
        UnaryOp::Recip => {
            let yy = b.mul(y, y)?;
            let t = b.mul(gy, yy)?;
            b.neg(t)?
        }
        UnaryOp::Erf => {
            let xx = b.mul(x, x)?;
            let n = b.neg(xx)?;
            let e = b.unary(UnaryOp::Exp, n)?;
            let t = b.scale(e, std::f64::consts::FRAC_2_SQRT_PI)?;
            b.mul(gy, t)?
        }
        UnaryOp::Tanh => {
            let yy = b.mul(y, y)?;
            let one = b.scalar(d, 1.0);
            let t = b.sub(one, yy)?;
            b.mul(gy, t)?
        }
        UnaryOp::Sigmoid => {
            let one = b.scalar(d, 1.0);
            let c = b.sub(one, y)?;
            let t = b.mul(y, c)?;
            b.mul(gy, t)?
        }
        UnaryOp::Relu => {
            let zero = b.scalar(d, 0.0);
            let pos = b.binary(BinaryOp::Greater, x, zero)?;
            b.where_else_zero(pos, gy)?
        }
        UnaryOp::Sin => {
            let c = b.unary(UnaryOp::Cos, x)?;
            b.mul(gy, c)?
        }
        UnaryOp::Cos => {
            let s = b.unary(UnaryOp::Sin, x)?;
            let t = b.mul(gy, s)?;
            b.neg(t)?
        }
    };
    Ok(Some(g))
}

fn binary(
    b: &mut Builder,
    op: BinaryOp,
    x0: NodeId,
    x1: NodeId,
    y: NodeId,
    gy: NodeId,
) -> Result<Vec<Option<NodeId>>, String> {
    let (t0, t1) = (b.shape(x0), b.shape(x1));
    let d = b.ty(y).dtype;
    let (g0, g1) = match op {
        BinaryOp::Less | BinaryOp::Greater | BinaryOp::Equal => return Ok(vec![None, None]),
        BinaryOp::Add => (gy, gy),
        BinaryOp::Sub => (gy, b.neg(gy)?),
        BinaryOp::Mul => (b.mul(gy, x1)?, b.mul(gy, x0)?),
        BinaryOp::Div => {
            let g0 = b.div(gy, x1)?;
            let q = b.div(y, x1)?;
            let t = b.mul(gy, q)?;
            (g0, b.neg(t)?)
        }
        BinaryOp::Rem => {
            // d/db fmod(a, b) = -trunc(a / b), with trunc(a / b) = (a - fmod(a, b)) / b.
            let whole = b.sub(x0, y)?;
            let q = b.div(whole, x1)?;
            let t = b.mul(gy, q)?;
            (gy, b.neg(t)?)
        }
        BinaryOp::Pow => {
            // As JAX: no gradient into the base where the exponent is 0, and log(a) taken as
            // 0 where a is 0.
            let zero = b.scalar(d, 0.0);
            let one = b.scalar(d, 1.0);
            let bm1 = b.sub(x1, one)?;
            let p = b.binary(BinaryOp::Pow, x0, bm1)?;
            let slope = b.mul(x1, p)?;
            let b_is_zero = b.binary(BinaryOp::Equal, x1, zero)?;
            let b_nonzero = b.unary(UnaryOp::Not, b_is_zero)?;
            let slope = b.where_else_zero(b_nonzero, slope)?;
            let g0 = b.mul(gy, slope)?;
            let a_is_zero = b.binary(BinaryOp::Equal, x0, zero)?;
            let safe = b.op(Op::Select, &[a_is_zero, one, x0])?;
            let log = b.unary(UnaryOp::Log, safe)?;
            let t = b.mul(y, log)?;
            (g0, b.mul(gy, t)?)
        }
        BinaryOp::Max | BinaryOp::Min => {
            // Each operand that equals the result takes the gradient, halved on ties.
            let half = b.scalar(d, 0.5);
            let e0 = b.binary(BinaryOp::Equal, x0, y)?;
            let e1 = b.binary(BinaryOp::Equal, x1, y)?;
            let i0 = b.indicator(e0, d)?;
            let i1 = b.indicator(e1, d)?;
            let both = b.mul(i0, i1)?;
            let tie = b.mul(both, half)?;
            let w0 = b.sub(i0, tie)?;
            let w1 = b.sub(i1, tie)?;
            (b.mul(gy, w0)?, b.mul(gy, w1)?)
        }
    };
    Ok(vec![Some(b.unbroadcast(g0, &t0)?), Some(b.unbroadcast(g1, &t1)?)])
}

fn reduce(b: &mut Builder, kind: ReduceKind, axes: &[usize], x: NodeId, y: NodeId, gy: NodeId) -> Built {
    let shape = b.shape(x);
    match kind {
        ReduceKind::Sum => b.broadcast(gy, &shape),
        ReduceKind::Max | ReduceKind::Min => {
            // Split evenly between the elements equal to the result.
            let d = b.ty(x).dtype;
            let yb = b.broadcast(y, &shape)?;
            let at = b.binary(BinaryOp::Equal, x, yb)?;
            let ind = b.indicator(at, d)?;
            let count = b.sum(ind, axes.to_vec())?;
            let share = b.div(gy, count)?;
            let spread = b.broadcast(share, &shape)?;
            b.mul(spread, ind)
        }
        ReduceKind::Prod => {
            // The product of the other elements: y / x where the group has no zero; where it
            // has exactly one, that element gets the product of the others and the rest 0;
            // with two or more, every element gets 0.
            let d = b.ty(x).dtype;
            let (zero, one) = (b.scalar(d, 0.0), b.scalar(d, 1.0));
            let is_zero = b.binary(BinaryOp::Equal, x, zero)?;
            let nonzero = b.op(Op::Select, &[is_zero, one, x])?;
            let others = b.op(
                Op::Reduce {
                    kind: ReduceKind::Prod,
                    axes: axes.to_vec(),
                },
                &[nonzero],
            )?;
            let ind = b.indicator(is_zero, d)?;
            let zeros = b.sum(ind, axes.to_vec())?;
            let none = b.binary(BinaryOp::Equal, zeros, zero)?;
            let single = b.binary(BinaryOp::Equal, zeros, one)?;
            let others = b.broadcast(others, &shape)?;
            let (none, single) = (b.broadcast(none, &shape)?, b.broadcast(single, &shape)?);
            let without = b.div(others, nonzero)?;
            let the_zero = b.op(Op::Select, &[is_zero, others, zero])?;
            let with_one = b.where_else_zero(single, the_zero)?;
            let slope = b.op(Op::Select, &[none, without, with_one])?;
            let gyb = b.broadcast(gy, &shape)?;
            b.mul(gyb, slope)
        }
    }
}

/// The gradient of a convolution's input: the transposed convolution of `gy` with the same
/// weight and attributes, its output padding chosen to give back the input's extent.
fn conv_input_grad(b: &mut Builder, c: &ConvAttrs, x: NodeId, w: NodeId, gy: NodeId) -> Built {
    let (xs, ws, ys) = (b.shape(x), b.shape(w), b.shape(gy));
    let nd = xs.len() - 2;
    let output_padding = (0..nd)
        .map(|i| {
            let reached = (ys[2 + i] - 1) * c.strides[i] + c.dilations[i] * (ws[2 + i] - 1) + 1;
            xs[2 + i] + c.pads[i] + c.pads[nd + i] - reached
        })
        .collect();
    b.op(
        Op::ConvTranspose {
            conv: c.clone(),
            output_padding,
        },
        &[gy, w],
    )
}

/// The gradient of a convolution's weight: `dw[g*Mg + m, c, k] = sum over n, o of
/// gy[n, g*Mg + m, o] * x[n, g*Cg + c, o*s + k*d - pad]`, itself a grouped convolution with
/// the roles of batch and channels swapped and stride and dilation exchanged: of the input
/// arranged as `[Cg, G*N, S..]` with `gy` arranged as `[G*Mg, N, O..]` for weight, giving
/// `[Cg, G*Mg, K..]` (cut to `K` where the window walk reaches further).
fn conv_weight_grad(b: &mut Builder, c: &ConvAttrs, x: NodeId, w: NodeId, gy: NodeId) -> Built {
    let (xs, ws, ys) = (b.shape(x), b.shape(w), b.shape(gy));
    let nd = xs.len() - 2;
    let (n, groups, cg) = (xs[0], c.groups, ws[1]);
    let spatial = |s: &[usize]| s[2..].to_vec();
    let xr = b.reshape(x, &[vec![n, groups, cg], spatial(&xs)].concat())?;
    let perm: Vec<usize> = [vec![2, 1, 0], (3..3 + nd).collect()].concat();
    let xt = b.op(Op::Transpose { perm }, &[xr])?;
    let input = b.reshape(xt, &[vec![cg, groups * n], spatial(&xs)].concat())?;
    let perm: Vec<usize> = [vec![1, 0], (2..2 + nd).collect()].concat();
    let kernel = b.op(Op::Transpose { perm: perm.clone() }, &[gy])?;
    let mut pads = c.pads[..nd].to_vec();
    pads.extend((0..nd).map(|i| {
        let reach = (ws[2 + i] - 1) * c.dilations[i] + c.strides[i] * (ys[2 + i] - 1) + 1;
        reach.saturating_sub(xs[2 + i] + c.pads[i])
    }));
    let swapped = ConvAttrs {
        strides: c.dilations.clone(),
        dilations: c.strides.clone(),
        pads,
        groups,
    };
    let mut dw = b.op(Op::Conv(swapped), &[input, kernel])?;
    let got = b.shape(dw);
    if got[2..] != ws[2..] {
        let sizes = [got[..2].to_vec(), spatial(&ws)].concat();
        let slice = Op::Slice {
            starts: vec![0; nd + 2],
            steps: vec![1; nd + 2],
            sizes,
        };
        dw = b.op(slice, &[dw])?;
    }
    b.op(Op::Transpose { perm }, &[dw])
}

/// The gradient of an average pool's input: each output's gradient times the reciprocal of
/// its divisor ([`PoolAttrs::average_reciprocals`], as the forward pool's lowering), spread evenly over its window (padding positions dropped), gathered by every input
/// position from the windows that hold it (see [`to_inputs`]).
fn avg_pool_grad(b: &mut Builder, p: &PoolAttrs, x: NodeId, gy: NodeId) -> Built {
    let (xs, ys) = (b.shape(x), b.shape(gy));
    let d = b.ty(x).dtype;
    let reciprocals = p.average_reciprocals(&xs[2..], &ys[2..], d);
    let reciprocals = b.constant(float_tensor(d, ys[2..].to_vec(), reciprocals)?);
    let share = b.mul(gy, reciprocals)?;
    to_inputs(b, p, &xs, &[(share, 0.0)], &mut |b, windows, codes| {
        let held = codes.iter().map(|&c| c >= 0).collect();
        let held = Tensor::new(residue_shape(p), crate::ir::Data::Bool(held)).map_err(|e| e.0)?;
        let held = b.constant(held);
        b.where_else_zero(held, windows[0])
    })
}

/// The gradient of a max pool's input. As in JAX (XLA's select-and-scatter with `>=`), each
/// window's gradient goes to the first of its elements, in row-major window order, that
/// equals the maximum: [`first_max_offsets`] finds it per window, and every input position
/// takes the gradients of the windows that picked it (see [`to_inputs`]).
fn max_pool_grad(b: &mut Builder, p: &PoolAttrs, x: NodeId, y: NodeId, gy: NodeId) -> Built {
    let xs = b.shape(x);
    let d = b.ty(x).dtype;
    let windows: usize = p.kernel.iter().product();
    let first = first_max_offsets(b, p, x, y)?;
    to_inputs(
        b,
        p,
        &xs,
        &[(first, windows as f64), (gy, 0.0)],
        &mut |b, picked, codes| {
            let codes = codes.iter().map(|&c| c as f64).collect();
            let codes = b.constant(float_tensor(d, residue_shape(p), codes)?);
            let hit = b.binary(BinaryOp::Equal, picked[0], codes)?;
            b.where_else_zero(hit, picked[1])
        },
    )
}

/// Owner computes for the input gradient of a pool: every input position gathers the values
/// of the windows that hold it. Along a spatial axis of stride `s`, position `h = s*q + r`
/// lies at offset `k` of window `o = q + m` exactly when `k*dilation = r + pad - s*m`; so per
/// shift `m` the window is an affine function of `q`, and the offset a constant table over
/// the residue `r` (see [`PoolAxis`]).
///
/// `values` are per-window tensors `[N, C, O..]`, each with the value that stands for no
/// window (read where `q + m` leaves the outputs). Per combination of shifts, `term` gets them
/// as `[N, C, Q1, 1, Q2, 1, ..]` (at windows `q + m`) with the window offsets of each residue
/// tuple (row-major, `-1` where the residues take no offset) and gives that combination's
/// contribution `[N, C, Q1, s1, Q2, s2, ..]`. Their sum is seen as `[N, C, Q1*s1, ..]` and
/// cut to the input's shape `xs`. Every step is elementwise or a movement, so the whole
/// gradient fuses into one kernel.
#[allow(clippy::type_complexity)]
fn to_inputs(
    b: &mut Builder,
    p: &PoolAttrs,
    xs: &[usize],
    values: &[(NodeId, f64)],
    term: &mut dyn FnMut(&mut Builder, &[NodeId], &[i64]) -> Built,
) -> Built {
    let ys = b.shape(values[0].0);
    let nd = xs.len() - 2;
    let axes: Vec<PoolAxis> = (0..nd).map(|i| PoolAxis::new(p, i, xs[2 + i], ys[2 + i])).collect();
    // A unit axis after each spatial one (the residue's place), and padding so that every
    // shifted window index stays inside.
    let split: Vec<usize> = [vec![xs[0], xs[1]], ys[2..].iter().flat_map(|&o| [o, 1]).collect()].concat();
    let rank = split.len();
    let mut pads = vec![0; 2 * rank];
    for (i, a) in axes.iter().enumerate() {
        pads[2 + 2 * i] = a.before();
        pads[rank + 2 + 2 * i] = a.after();
    }
    let mut padded = Vec::with_capacity(values.len());
    for &(v, none) in values {
        let v = b.reshape(v, &split)?;
        padded.push(b.op(
            Op::Pad {
                pads: pads.clone(),
                value: none,
            },
            &[v],
        )?);
    }
    let combinations: usize = axes.iter().map(|a| a.shifts.len()).product();
    let mut sum: Option<NodeId> = None;
    for flat in 0..combinations {
        let mut rest = flat;
        let mut shift = vec![0; nd];
        for i in (0..nd).rev() {
            shift[i] = rest % axes[i].shifts.len();
            rest /= axes[i].shifts.len();
        }
        let codes = window_codes(&axes, &p.kernel, &shift);
        if codes.iter().all(|&c| c < 0) {
            continue;
        }
        let mut starts = vec![0; rank];
        for (i, a) in axes.iter().enumerate() {
            starts[2 + 2 * i] = (a.before() as i64 + a.shifts[shift[i]]) as usize;
        }
        let window = Op::Slice {
            starts,
            steps: vec![1; rank],
            sizes: [vec![xs[0], xs[1]], axes.iter().flat_map(|a| [a.quotients, 1]).collect()].concat(),
        };
        let mut shifted = Vec::with_capacity(padded.len());
        for &v in &padded {
            shifted.push(b.op(window.clone(), &[v])?);
        }
        let t = term(b, &shifted, &codes)?;
        sum = Some(match sum {
            None => t,
            Some(s) => b.add(s, t)?,
        });
    }
    // Every offset `k` lies in some residue's table, so some shift has a code.
    let sum = sum.ok_or("a pool with an empty window")?;
    let whole: Vec<usize> = [
        vec![xs[0], xs[1]],
        axes.iter().map(|a| a.quotients * a.stride).collect(),
    ]
    .concat();
    let dx = b.reshape(sum, &whole)?;
    if whole == xs {
        return Ok(dx);
    }
    let crop = Op::Slice {
        starts: vec![0; nd + 2],
        steps: vec![1; nd + 2],
        sizes: xs.to_vec(),
    };
    b.op(crop, &[dx])
}

/// Per window of a max pool, the flat row-major offset of its first element equal to the
/// window's maximum `y`, as a value of `x`'s type (the window count where none is, which only
/// NaN can cause): a chain of selects over the strided slices of `x` padded with -inf that
/// each window offset picks.
fn first_max_offsets(b: &mut Builder, p: &PoolAttrs, x: NodeId, y: NodeId) -> Built {
    let (xs, ys) = (b.shape(x), b.shape(y));
    let nd = xs.len() - 2;
    let d = b.ty(x).dtype;
    let mut pads = vec![0; 2 * (nd + 2)];
    for i in 0..nd {
        let reach = (ys[2 + i] - 1) * p.strides[i] + (p.kernel[i] - 1) * p.dilations[i] + 1;
        pads[2 + i] = p.pads[i];
        pads[nd + 4 + i] = reach.saturating_sub(xs[2 + i] + p.pads[i]);
    }
    let xp = b.op(
        Op::Pad {
            pads,
            value: f64::NEG_INFINITY,
        },
        &[x],
    )?;
    let windows: usize = p.kernel.iter().product();
    let mut first = b.scalar(d, windows as f64);
    for flat in (0..windows).rev() {
        let mut rest = flat;
        let mut starts = vec![0; nd + 2];
        for i in (0..nd).rev() {
            starts[2 + i] = (rest % p.kernel[i]) * p.dilations[i];
            rest /= p.kernel[i];
        }
        let slice = Op::Slice {
            starts,
            steps: [vec![1, 1], p.strides.iter().map(|&s| s as i64).collect()].concat(),
            sizes: ys.clone(),
        };
        let picked = b.op(slice, &[xp])?;
        let at_max = b.binary(BinaryOp::Equal, picked, y)?;
        let offset = b.scalar(d, flat as f64);
        first = b.op(Op::Select, &[at_max, offset, first])?;
    }
    Ok(first)
}

/// One spatial axis of a max pool, seen from the input: position `h = stride*q + r` lies at
/// offset `k` of window `q + m` when `k*dilation = r + pad - stride*m`.
struct PoolAxis {
    stride: usize,
    /// `ceil(input / stride)`: values of `q`.
    quotients: usize,
    /// Output windows along the axis.
    outputs: usize,
    /// The shifts `m` with at least one such `(r, k)`, ascending.
    shifts: Vec<i64>,
    /// Per shift, per residue `r`: the offset `k`, if any.
    offsets: Vec<Vec<Option<usize>>>,
}

impl PoolAxis {
    fn new(p: &PoolAttrs, i: usize, input: usize, outputs: usize) -> PoolAxis {
        let (s, k, dil, pad) = (
            p.strides[i] as i64,
            p.kernel[i] as i64,
            p.dilations[i] as i64,
            p.pads[i] as i64,
        );
        let mut pairs = Vec::new();
        for r in 0..s {
            for k in 0..k {
                let span = r + pad - k * dil;
                if span.rem_euclid(s) == 0 {
                    pairs.push((span.div_euclid(s), r as usize, k as usize));
                }
            }
        }
        let mut shifts: Vec<i64> = pairs.iter().map(|t| t.0).collect();
        shifts.sort_unstable();
        shifts.dedup();
        let mut offsets = vec![vec![None; s as usize]; shifts.len()];
        for (m, r, k) in pairs {
            let at = shifts.binary_search(&m).expect("every shift was collected");
            offsets[at][r] = Some(k);
        }
        PoolAxis {
            stride: s as usize,
            quotients: input.div_ceil(s as usize),
            outputs,
            shifts,
            offsets,
        }
    }

    /// Padding before the window axis so that `q + m` is never negative.
    fn before(&self) -> usize {
        self.shifts.first().map_or(0, |&m| (-m).max(0) as usize)
    }

    /// Padding after it so that `q + m` stays inside.
    fn after(&self) -> usize {
        let reach = self.quotients as i64 + self.shifts.last().copied().unwrap_or(0);
        (reach - self.outputs as i64).max(0) as usize
    }
}

/// The shape `[1, 1, 1, s1, 1, s2, ..]` of a table over the residues of [`to_inputs`].
fn residue_shape(p: &PoolAttrs) -> Vec<usize> {
    [vec![1, 1], p.strides.iter().flat_map(|&s| [1, s]).collect()].concat()
}

/// For one combination of shifts (an index into each axis's `shifts`), per residue tuple in
/// row-major order: the flat window offset a position with those residues lies at in the
/// shifted window, or -1 where some axis has none.
fn window_codes(axes: &[PoolAxis], kernel: &[usize], shift: &[usize]) -> Vec<i64> {
    let residues: usize = axes.iter().map(|a| a.stride).product();
    (0..residues)
        .map(|flat| {
            let mut rest = flat;
            let mut code = 0;
            let mut scale = 1;
            for i in (0..axes.len()).rev() {
                let r = rest % axes[i].stride;
                rest /= axes[i].stride;
                match axes[i].offsets[shift[i]][r] {
                    Some(k) => code += (k * scale) as i64,
                    None => return -1,
                }
                scale *= kernel[i];
            }
            code
        })
        .collect()
}

/// A tensor of floating type `dtype` (f32 unless f64) holding `values`.
fn float_tensor(dtype: DType, shape: Vec<usize>, values: Vec<f64>) -> Result<Tensor, String> {
    let data = match dtype {
        DType::F64 => crate::ir::Data::F64(values),
        _ => crate::ir::Data::F32(values.into_iter().map(|v| v as f32).collect()),
    };
    Tensor::new(shape, data).map_err(|e| e.0)
}

/// The gradient of a gather's data: every gathered element's gradient added into the position
/// it came from. As a product with a one-hot matrix: with the data seen as `[A, J, B]` (`J`
/// the gathered axis) and the `I` positions flattened, `gy` as `[A*B, I]` times
/// `onehot[i, j] = (position i == j)` gives `[A*B, J]`, which is rearranged to the data's
/// shape. Negative positions count from the end, as the gather reads them.
fn gather_grad(b: &mut Builder, axis: usize, data: NodeId, positions: NodeId, gy: NodeId) -> Built {
    let ds = b.shape(data);
    let d = b.ty(data).dtype;
    let (a, j) = (ds[..axis].iter().product::<usize>(), ds[axis]);
    let rest: usize = ds[axis + 1..].iter().product();
    let i = b.ty(positions).numel();
    let flat = b.reshape(positions, &[i, 1])?;
    let zero = b.constant(Tensor::from_i64(Vec::new(), vec![0]).map_err(|e| e.0)?);
    let extent = b.constant(Tensor::from_i64(Vec::new(), vec![j as i64]).map_err(|e| e.0)?);
    let negative = b.binary(BinaryOp::Less, flat, zero)?;
    let wrapped = b.add(flat, extent)?;
    let position = b.op(Op::Select, &[negative, wrapped, flat])?;
    let iota = Tensor::from_i64(vec![1, j], (0..j as i64).collect()).map_err(|e| e.0)?;
    let iota = b.constant(iota);
    let hit = b.binary(BinaryOp::Equal, position, iota)?;
    let onehot = b.indicator(hit, d)?;
    let g3 = b.reshape(gy, &[a, i, rest])?;
    let gt = b.op(Op::Transpose { perm: vec![0, 2, 1] }, &[g3])?;
    let g2 = b.reshape(gt, &[a * rest, i])?;
    let summed = b.op(Op::MatMul, &[g2, onehot])?;
    let s3 = b.reshape(summed, &[a, rest, j])?;
    let st = b.op(Op::Transpose { perm: vec![0, 2, 1] }, &[s3])?;
    b.reshape(st, &ds)
}

/// The gradient of `x` from the gradient `gy` of a slice of it: `gy` placed at the sliced
/// positions, zero elsewhere, one axis at a time (a pad for unit steps; for other steps a
/// gather from `gy` with a zero appended, each position naming its slice element or the
/// zero).
fn unslice(b: &mut Builder, x: NodeId, starts: &[usize], steps: &[i64], sizes: &[usize], gy: NodeId) -> Built {
    let shape = b.shape(x);
    let d = b.ty(x).dtype;
    let mut g = gy;
    for a in 0..shape.len() {
        let (start, step, size, n) = (starts[a] as i64, steps[a], sizes[a], shape[a]);
        if step == 1 {
            if size == n {
                continue;
            }
            let r = shape.len();
            let mut pads = vec![0; 2 * r];
            pads[a] = start as usize;
            pads[r + a] = n - start as usize - size;
            g = b.op(Op::Pad { pads, value: 0.0 }, &[g])?;
            continue;
        }
        let mut zshape = b.shape(g);
        zshape[a] = 1;
        let zero = b.scalar(d, 0.0);
        let zeros = b.broadcast(zero, &zshape)?;
        let with_zero = b.op(Op::Concat { axis: a }, &[g, zeros])?;
        let positions: Vec<i64> = (0..n as i64)
            .map(|i| {
                let k = (i - start) / step;
                let hit = (i - start) % step == 0 && k >= 0 && (k as usize) < size;
                if hit {
                    k
                } else {
                    size as i64
                }
            })
            .collect();
        let index = Tensor::from_i64(vec![n], positions).map_err(|e| e.0)?;
        let index = b.constant(index);
        g = b.op(Op::Gather { axis: a }, &[with_zero, index])?;
    }
    Ok(g)
}
