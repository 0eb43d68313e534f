//! Elementwise kernels: unary functions, broadcasting binary ops, select and cast.

use super::index::{broadcast_iter, broadcast_to};
use super::num::{Float, Num};
use super::numeric_only;
use crate::ir::{BinaryOp, DType, Data, Tensor, UnaryOp};

pub(super) fn unary(u: UnaryOp, d: &Data) -> Data {
    fn num<T: Num>(u: UnaryOp, v: &[T]) -> Vec<T> {
        let f: fn(T) -> T = match u {
            UnaryOp::Neg => T::neg,
            UnaryOp::Abs => T::abs,
            UnaryOp::Sign => T::sign,
            UnaryOp::Relu => T::relu,
            _ => unreachable!("{} is not defined on integers", u.name()),
        };
        v.iter().map(|&x| f(x)).collect()
    }
    fn float<T: Float>(u: UnaryOp, v: &[T]) -> Vec<T> {
        let f: fn(T) -> T = match u {
            UnaryOp::Sqrt => T::sqrt,
            UnaryOp::Exp => T::exp,
            UnaryOp::Log => T::ln,
            UnaryOp::Recip => |x| T::ONE.div(x),
            UnaryOp::Erf => T::erf,
            UnaryOp::Tanh => T::tanh,
            UnaryOp::Sin => T::sin,
            UnaryOp::Cos => T::cos,
            UnaryOp::Sigmoid => |x| T::ONE.div(T::ONE.add(x.neg().exp())),
            _ => return num(u, v),
        };
        v.iter().map(|&x| f(x)).collect()
    }
    match d {
        Data::F32(v) => Data::F32(float(u, v)),
        Data::F64(v) => Data::F64(float(u, v)),
        Data::I64(v) => Data::I64(num(u, v)),
        Data::Bool(v) => Data::Bool(v.iter().map(|&x| !x).collect()),
    }
}

/// `f(a[i], b[j])` over the broadcast of `a` and `b` to `out`.
fn zip_broadcast<A: Copy, B: Copy, O>(
    a: &[A],
    ash: &[usize],
    b: &[B],
    bsh: &[usize],
    out: &[usize],
    f: impl Fn(A, B) -> O,
) -> Vec<O> {
    if ash == bsh {
        return a.iter().zip(b).map(|(&x, &y)| f(x, y)).collect();
    }
    if b.len() == 1 && ash == out {
        return a.iter().map(|&x| f(x, b[0])).collect();
    }
    if a.len() == 1 && bsh == out {
        return b.iter().map(|&y| f(a[0], y)).collect();
    }
    broadcast_iter(ash, out)
        .zip(broadcast_iter(bsh, out))
        .map(|(i, j)| f(a[i], b[j]))
        .collect()
}

fn arith<T: Num>(op: BinaryOp, a: &[T], ash: &[usize], b: &[T], bsh: &[usize], out: &[usize]) -> Data
where
    Vec<T>: Into<Data>,
{
    let z = |f: fn(T, T) -> T| zip_broadcast(a, ash, b, bsh, out, f).into();
    let c = |f: fn(&T, &T) -> bool| Data::Bool(zip_broadcast(a, ash, b, bsh, out, |x, y| f(&x, &y)));
    match op {
        BinaryOp::Add => z(T::add),
        BinaryOp::Sub => z(T::sub),
        BinaryOp::Mul => z(T::mul),
        BinaryOp::Div => z(T::div),
        BinaryOp::Rem => z(T::rem),
        BinaryOp::Pow => z(T::pow),
        BinaryOp::Max => z(T::max),
        BinaryOp::Min => z(T::min),
        BinaryOp::Less => c(T::lt),
        BinaryOp::Greater => c(T::gt),
        BinaryOp::Equal => c(T::eq),
    }
}

pub(super) fn binary(op: BinaryOp, a: &Tensor, b: &Tensor, out: &[usize]) -> Result<Data, String> {
    binary_data(op, a.data(), a.shape(), b.data(), b.shape(), out)
}

fn binary_data(op: BinaryOp, a: &Data, ash: &[usize], b: &Data, bsh: &[usize], out: &[usize]) -> Result<Data, String> {
    Ok(match (a, b) {
        (Data::F32(x), Data::F32(y)) => arith(op, x, ash, y, bsh, out),
        (Data::F64(x), Data::F64(y)) => arith(op, x, ash, y, bsh, out),
        (Data::I64(x), Data::I64(y)) => {
            if matches!(op, BinaryOp::Div | BinaryOp::Rem) && y.contains(&0) {
                return Err("integer division by zero".into());
            }
            arith(op, x, ash, y, bsh, out)
        }
        (Data::Bool(x), Data::Bool(y)) if op == BinaryOp::Equal => {
            Data::Bool(zip_broadcast(x, ash, y, bsh, out, |p, q| p == q))
        }
        _ => numeric_only(a.dtype()),
    })
}

pub(super) fn select(cond: &Tensor, a: &Tensor, b: &Tensor, out: &[usize]) -> Data {
    let Data::Bool(c) = cond.data() else {
        unreachable!("select conditions are bool")
    };
    let c = broadcast_to(c, cond.shape(), out);
    fn pick<T: Copy>(c: &[bool], a: &[T], ash: &[usize], b: &[T], bsh: &[usize], out: &[usize]) -> Vec<T> {
        let (a, b) = (broadcast_to(a, ash, out), broadcast_to(b, bsh, out));
        c.iter()
            .zip(a.iter().zip(&b))
            .map(|(&c, (&x, &y))| if c { x } else { y })
            .collect()
    }
    let (ash, bsh) = (a.shape(), b.shape());
    match (a.data(), b.data()) {
        (Data::F32(x), Data::F32(y)) => Data::F32(pick(&c, x, ash, y, bsh, out)),
        (Data::F64(x), Data::F64(y)) => Data::F64(pick(&c, x, ash, y, bsh, out)),
        (Data::I64(x), Data::I64(y)) => Data::I64(pick(&c, x, ash, y, bsh, out)),
        (Data::Bool(x), Data::Bool(y)) => Data::Bool(pick(&c, x, ash, y, bsh, out)),
        _ => unreachable!("select operands share a type"),
    }
}

/// Converts elements: floats to integers truncate toward zero (saturating, NaN to 0),
/// anything to bool tests against zero, bool to numbers gives 0 or 1.
pub(super) fn cast(d: &Data, to: DType) -> Data {
    fn conv<T: Num>(d: &Data) -> Vec<T> {
        match d {
            Data::F32(v) => v.iter().map(|&x| T::from_f64(x as f64)).collect(),
            Data::F64(v) => v.iter().map(|&x| T::from_f64(x)).collect(),
            Data::I64(v) => v.iter().map(|&x| T::from_i64(x)).collect(),
            Data::Bool(v) => v.iter().map(|&x| if x { T::ONE } else { T::ZERO }).collect(),
        }
    }
    match to {
        DType::F32 => match d {
            // Direct conversion: going through f64 would round twice for i64.
            Data::I64(v) => Data::F32(v.iter().map(|&x| x as f32).collect()),
            _ => Data::F32(conv(d)),
        },
        DType::F64 => Data::F64(conv(d)),
        DType::I64 => Data::I64(conv(d)),
        DType::Bool => Data::Bool(match d {
            Data::F32(v) => v.iter().map(|&x| x != 0.0).collect(),
            Data::F64(v) => v.iter().map(|&x| x != 0.0).collect(),
            Data::I64(v) => v.iter().map(|&x| x != 0).collect(),
            Data::Bool(v) => v.clone(),
        }),
    }
}

/// Elementwise operations on flat columns of values, for evaluators that work on vectors of
/// points (the loop-IR interpreter). A column of length 1 stands for that value repeated, so
/// constants need not be materialised; results have the longer operand's length.
pub mod columns {
    use super::super::index::broadcast_to;
    use crate::ir::{BinaryOp, DType, Data, UnaryOp};

    fn len_of(a: &Data, b: &Data) -> usize {
        a.len().max(b.len())
    }

    pub fn unary(u: UnaryOp, a: &Data) -> Data {
        super::unary(u, a)
    }

    pub fn binary(op: BinaryOp, a: &Data, b: &Data) -> Result<Data, String> {
        super::binary_data(op, a, &[a.len()], b, &[b.len()], &[len_of(a, b)])
    }

    pub fn select(c: &Data, a: &Data, b: &Data) -> Data {
        let n = c.len().max(a.len()).max(b.len());
        let Data::Bool(c) = c else {
            unreachable!("select conditions are bool")
        };
        let c = broadcast_to(c, &[c.len()], &[n]);
        fn pick<T: Copy>(c: &[bool], a: &[T], b: &[T], n: usize) -> Vec<T> {
            let (a, b) = (broadcast_to(a, &[a.len()], &[n]), broadcast_to(b, &[b.len()], &[n]));
            c.iter()
                .zip(a.iter().zip(&b))
                .map(|(&c, (&x, &y))| if c { x } else { y })
                .collect()
        }
        match (a, b) {
            (Data::F32(x), Data::F32(y)) => Data::F32(pick(&c, x, y, n)),
            (Data::F64(x), Data::F64(y)) => Data::F64(pick(&c, x, y, n)),
            (Data::I64(x), Data::I64(y)) => Data::I64(pick(&c, x, y, n)),
            (Data::Bool(x), Data::Bool(y)) => Data::Bool(pick(&c, x, y, n)),
            _ => unreachable!("select operands share a type"),
        }
    }

    pub fn cast(a: &Data, to: DType) -> Data {
        super::cast(a, to)
    }
}
