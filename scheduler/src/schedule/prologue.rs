//! Prologues: an elementwise function of one factor of a sum of products, applied once to each
//! element of that factor's LDM box instead of at every product that reads it.
//!
//! Fusion joins an elementwise producer into a contraction when the producer's value is a
//! function of one tensor element and of per-channel parameters (a batch normalisation and a
//! ReLU before a 1x1 convolution: `relu(x[n, c, h, w] * s[c] + b[c])`), read once by the
//! contraction at positions that are each one element of that tensor. A convolution reads
//! each element of its input once per output channel, so the inlined value, evaluated where
//! the product reads it, would be computed again for every output channel. Instead the code
//! computes it once per element of each box of the *main* tensor (`x`) that a CPE fetches, in
//! place, after the box's get and before the box is broadcast to the CPEs that share it
//! (each CPE of a line its own slice of a split box); the products then read the box as a
//! plain factor (vector code included: [`super::blocking::product_factors`] names the main
//! access as the factor). The parameters' boxes of the same tile arrive first.
//!
//! ```text
//! for each box of the main access this CPE fetches (or its slice):
//!   wait for the get
//!   for each index of the box's dimensions up to the parameters' (see [`BoxForm`]):
//!     broadcast each parameter at that index
//!     for the contiguous run of the dimensions after it, in vectors:
//!       main[..] = prologue(main[..], parameters)
//!   broadcast the box to the line, if shared
//! the products, reading main[..]
//! ```
//!
//! The engines that evaluate the statement as written (the interpreter of loops, the
//! schedule's executors) compute the inlined value at every product, with the same
//! operations on the same operands: the results are the same bit for bit.

use std::borrow::Cow;

use swflow_emulator::timing::Ops;
use swflow_frontend::ir::{BinaryOp, ReduceKind, UnaryOp};

use crate::loops::{Access, Affine, Expr, Index, Kernel, Scalar};
use crate::target::Target;

use super::window_of;

/// The prologue of a kernel's product: which factor of `value = a * b` it is (0 for `a`), the
/// factor's expression, and the main access (the one tensor element the expression is a
/// function of).
#[derive(Clone, Copy, Debug)]
pub struct Prologue<'k> {
    pub factor: usize,
    pub expr: &'k Expr,
    pub main: &'k Access,
}

impl Prologue<'_> {
    /// The position among `all` (the kernel's [`super::accesses`]) of the main access.
    pub fn main_window(&self, all: &[Cow<'_, Access>]) -> Option<usize> {
        all.iter().position(|a| **a == *self.main)
    }

    /// The positions among `all` of the windows the parameters are read from, each once, the
    /// main access's left out.
    pub fn parameter_windows(&self, all: &[Cow<'_, Access>]) -> Vec<usize> {
        let main = self.main_window(all);
        let mut out: Vec<usize> = Vec::new();
        for w in self
            .expr
            .accesses()
            .into_iter()
            .filter_map(|a| window_of(all, a).map(|w| w.0))
        {
            if Some(w) != main && !out.contains(&w) {
                out.push(w);
            }
        }
        out
    }
}

/// The prologue of kernel `k`, when its statement folds by a sum `a * b` where one factor is
/// a load and the other an expression of loads (no reduced value) in which one load, the
/// main access, reads a tensor that nothing else in the statement reads, at subscripts that
/// each move along one or more loops none of the others use, and reach a distinct element at
/// every point of those loops ([`injective`]), and every other load reads a tensor other than
/// the main one at subscripts that use only the main access's loops, in a form code
/// generation writes ([`box_form`]).
pub fn prologue(k: &Kernel) -> Option<Prologue<'_>> {
    if k.stmt.reduce?.kind != ReduceKind::Sum {
        return None;
    }
    let Expr::Binary(BinaryOp::Mul, a, b) = &k.stmt.value else {
        return None;
    };
    let (factor, expr, other) = match (&**a, &**b) {
        (Expr::Load(_), Expr::Load(_)) => return None,
        (e, Expr::Load(o)) => (0, e, o),
        (Expr::Load(o), e) => (1, e, o),
        _ => return None,
    };
    let mut reduced = false;
    expr.visit(&mut |e| reduced |= matches!(e, Expr::Acc));
    let loads = expr.accesses();
    if reduced
        || loads
            .iter()
            .any(|a| a.index.iter().any(|i| !matches!(i, Index::Affine(_))))
    {
        return None;
    }
    let loops_of = |a: &Access| -> Vec<usize> {
        let mut v: Vec<usize> = affine(a)
            .flat_map(|x| x.terms.iter().filter(|t| t.1 != 0).map(|t| t.0))
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    let main = *loads.iter().max_by_key(|a| loops_of(a).len())?;
    let tensor = |a: &Access| k.operands[a.operand];
    let main_loops = loops_of(main);
    let params_fit = loads
        .iter()
        .filter(|a| **a != main)
        .all(|a| tensor(a) != tensor(main) && loops_of(a).iter().all(|l| main_loops.contains(l)));
    // Nothing else reads the main tensor: its box is rewritten in place.
    let elsewhere = std::iter::once(other)
        .chain(k.stmt.epilogue.iter().flat_map(|e| e.accesses()))
        .chain(std::iter::once(&k.stmt.target))
        .chain(k.stmt.keep.iter())
        .any(|a| tensor(a) == tensor(main));
    let extents: Vec<usize> = k.loops.iter().map(|l| l.extent).collect();
    let p = Prologue { factor, expr, main };
    (params_fit && !elsewhere && main.pad.is_none() && injective(main, &extents) && box_form(&p, k).is_some())
        .then_some(p)
}

/// How code generation walks a box of a prologue's main access: the dimensions up to `last`
/// one index at a time, with every parameter broadcast at it, and the dimensions after it as
/// one contiguous run in vectors.
#[derive(Clone, Debug, PartialEq)]
pub struct BoxForm<'k> {
    pub last: usize,
    /// Per parameter load (every load but the main one): the dimension of the parameter that
    /// follows a dimension of the main access (`None` for a scalar), with that dimension.
    pub params: Vec<(&'k Access, Option<(usize, usize)>)>,
}

/// The box form of prologue `p` of kernel `k`, when it has one: each parameter's subscripts
/// are constant but at most one, which equals (in its loops and coefficients) a subscript of
/// the main access that walks its dimension densely (from coefficient 1, each loop stepping past the range of the
/// ones before: every index of the box is a point's, so every parameter index it reaches is
/// in the parameter's box); and the expression takes only operators with a vector form
/// (`+ - * /`, maximum, minimum, ReLU, square root, f32 constants).
pub fn box_form<'k>(p: &Prologue<'k>, k: &Kernel) -> Option<BoxForm<'k>> {
    let extents: Vec<usize> = k.loops.iter().map(|l| l.extent).collect();
    let moving = |x: &Affine| moving_terms(x, &extents);
    let dense = |x: &Affine| {
        let t = moving(x);
        let mut step = 1;
        t.iter().all(|&(l, c)| {
            let ok = c == step;
            step = c * extents[l] as i64;
            ok
        })
    };
    let main: Vec<&Affine> = affine(p.main).collect();
    let mut params = Vec::new();
    for a in p.expr.accesses() {
        if a == p.main {
            continue;
        }
        let subs: Vec<&Affine> = affine(a).collect();
        let followed: Vec<usize> = (0..subs.len()).filter(|&d| !moving(subs[d]).is_empty()).collect();
        let along = match followed[..] {
            [] => None,
            [d] => {
                let md = main.iter().position(|m| moving(m) == moving(subs[d]))?;
                if !dense(main[md]) {
                    return None;
                }
                Some((d, md))
            }
            _ => return None,
        };
        params.push((a, along));
    }
    let mut vector_form = true;
    p.expr.visit(&mut |e| {
        vector_form &= match e {
            Expr::Load(_) | Expr::Const(Scalar::F32(_)) => true,
            Expr::Unary(op, _) => matches!(op, UnaryOp::Relu | UnaryOp::Sqrt),
            Expr::Binary(op, ..) => matches!(
                op,
                BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Max | BinaryOp::Min
            ),
            _ => false,
        }
    });
    let last = params
        .iter()
        .filter_map(|(_, along)| along.map(|a| a.1))
        .max()
        .unwrap_or(0);
    vector_form.then_some(BoxForm { last, params })
}

/// Cycles a CPE takes to apply prologue `p` of kernel `k` to one element of a
/// box of its main access, as code generation writes it (`swflow_codegen`'s prologue): per
/// vector of the contiguous runs, its unaligned load and store (two LDM accesses and a merge
/// each), one P0 instruction per operator (four for a maximum, minimum or ReLU: two compares
/// and two selects), a division or square root per lane, and the loop's step, over the lanes;
/// where the runs are single elements, the scalar code's operations per element.
pub fn element_cycles(p: &Prologue, k: &Kernel, target: &Target) -> f64 {
    // A parameter along the last dimension leaves runs of one element, each computed alone:
    // its loads, its operators (a maximum's NaN tests and branches), its store and loop.
    let runs = box_form(p, k).is_some_and(|f| f.last + 1 < p.main.index.len());
    let lanes = match runs {
        true => target.f32_vector_lanes.max(1),
        false => 1,
    };
    if lanes == 1 {
        let mut ops = Ops {
            store: 1,
            branch: 1,
            integer: 2,
            ..Ops::ZERO
        };
        p.expr.visit(&mut |e| match e {
            Expr::Load(_) => ops.load += 1,
            Expr::Unary(UnaryOp::Relu, _) | Expr::Binary(BinaryOp::Max | BinaryOp::Min, ..) => {
                ops.fp += 3;
                ops.branch += 3;
            }
            Expr::Unary(UnaryOp::Sqrt, _) => ops.sqrt += 1,
            Expr::Binary(BinaryOp::Div, ..) => ops.div += 1,
            Expr::Binary(..) => ops.fp += 1,
            _ => {}
        });
        return target.timing.cycles(&ops);
    }
    let mut ops = Ops {
        load: 2,
        store: 2,
        fp: 2,
        integer: 1,
        branch: 1,
        ..Ops::ZERO
    };
    p.expr.visit(&mut |e| match e {
        Expr::Unary(UnaryOp::Sqrt, _) => ops.sqrt += lanes as u32,
        Expr::Binary(BinaryOp::Div, ..) => ops.div += lanes as u32,
        Expr::Unary(UnaryOp::Relu, _) | Expr::Binary(BinaryOp::Max | BinaryOp::Min, ..) => ops.fp += 4,
        Expr::Binary(..) => ops.fp += 1,
        _ => {}
    });
    target.timing.cycles(&ops) / lanes as f64
}

/// The affine subscripts of `a` (all of them, for the accesses [`prologue`] takes).
fn affine(a: &Access) -> impl Iterator<Item = &Affine> {
    a.index.iter().filter_map(|i| match i {
        Index::Affine(x) => Some(x),
        Index::Gathered { .. } => None,
    })
}

/// The terms of subscript `x` whose loops (of `extents` points) take more than one point, by
/// increasing coefficient (then loop).
fn moving_terms(x: &Affine, extents: &[usize]) -> Vec<(usize, i64)> {
    let mut t: Vec<(usize, i64)> = x
        .terms
        .iter()
        .copied()
        .filter(|t| t.1 != 0 && extents[t.0] > 1)
        .collect();
    t.sort_unstable_by_key(|t| (t.1, t.0));
    t
}

/// Whether access `a` reaches a distinct element at every point of its loops (of `extents`
/// points): no loop of more than one point appears in two subscripts, and within each
/// subscript the loops of more than one point, by increasing positive coefficient, each step
/// past the whole range of the ones before (`8*c_o + c` with `c` of 8 points; not a window's
/// `o0 + k0`).
pub fn injective(a: &Access, extents: &[usize]) -> bool {
    let mut seen = Vec::new();
    affine(a).all(|x| {
        let terms = moving_terms(x, extents);
        let mut reach = 0;
        terms.iter().all(|&(l, c)| {
            let fresh = !seen.contains(&l);
            seen.push(l);
            let steps_past = c > reach;
            reach += c * (extents[l] as i64 - 1);
            fresh && steps_past
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn injective_subscripts_reach_each_element_once() {
        let at = |terms: Vec<Vec<(usize, i64)>>| {
            Access::new(
                1,
                terms
                    .into_iter()
                    .map(|t| Index::Affine(Affine { terms: t, offset: 0 }))
                    .collect(),
            )
        };
        let extents = [12, 8, 56, 3];
        assert!(injective(&at(vec![vec![(0, 8), (1, 1)], vec![(2, 1)]]), &extents));
        assert!(injective(&at(vec![vec![(2, 2)]]), &extents));
        assert!(!injective(&at(vec![vec![(2, 1), (3, 1)]]), &extents));
        assert!(!injective(&at(vec![vec![(0, 4), (1, 1)]]), &extents));
        assert!(!injective(&at(vec![vec![(2, 1)], vec![(2, 1)]]), &extents));
    }
}
