//! The prologue of a product's factor ([`swflow_scheduler::schedule::prologue`]): every box
//! of its main access that this CPE fetches (its slice, for a split shared box) becomes the
//! prologue's value of it, in place, once the get is complete and before the box is shared.
//!
//! The box's dimensions up to the last one a parameter follows ([`BoxForm::last`]) are walked
//! one index at a time, each parameter and constant broadcast at it; the dimensions after it
//! are one contiguous run of the box, computed in vectors and the elements left one by one:
//! ```text
//! for each index of the outer dimensions:
//!   broadcast each parameter at it, and each constant
//!   for the run's whole vectors: load, compute, store (unaligned)
//!   for the run's last elements: the scalar operations, one by one
//! ```
//! Each lane computes what the scalar operation computes (a ReLU as a maximum with zero, as
//! the lane-wise code does), so the box holds the same bits as an evaluation of the factor at
//! every product would read.

use std::borrow::Cow;

use swflow_emulator::timing::Ops;
use swflow_frontend::ir::DType;
use swflow_scheduler::loops::{Access, Affine, Expr, Index, Kernel, Scalar};
use swflow_scheduler::schedule::prologue::{box_form, BoxForm, Prologue};
use swflow_scheduler::schedule::{keep_index, window_of};

use super::lanewise::{add_nodes, vector_op, vector_unary, Node};
use super::vector::{VBROADCAST, VLOAD, VSTORE};
use super::{charge, Gen};
use crate::cost::{self, int, LOOP};
use crate::cpe::{Array, Func, Half, Int, Local, Place, Stmt, VReg, Value, Var, VarDecl};

/// The code's variables for a kernel's prologue: the expression's nodes (loads by
/// [`Gen::all`] index), the node of its value, a vector register per node, the lanes, an
/// index per outer dimension of the box, and the run's start, the current vector's first
/// element and the end of the run's whole vectors.
pub(super) struct Vars {
    nodes: Vec<Node>,
    root: usize,
    regs: Vec<VReg>,
    lanes: usize,
    pos: Vec<Var>,
    base: Var,
    at: Var,
    end: Var,
}

/// The variables of prologue `pr` of kernel `k` (main access `main` of `all`) with `lanes`
/// f32 lanes, declared in `f` with names from `prefix`.
pub(super) fn declare(
    k: &Kernel,
    pr: &Prologue,
    all: &[Cow<'_, Access>],
    main: usize,
    lanes: usize,
    f: &mut Func,
    prefix: &str,
) -> Option<Vars> {
    let mut nodes = Vec::new();
    let root = add_nodes(pr.expr, all, &mut nodes)?;
    let displaced = nodes
        .iter()
        .any(|n| matches!(n, Node::Load { access, load: Some(_), .. } if *access == main));
    if displaced {
        return None;
    }
    let mut var = |name: String| {
        f.vars.push(VarDecl { name, init: None });
        Var(f.vars.len() as u32 - 1)
    };
    let outer = box_form(pr, k)?.last + 1;
    let pos: Vec<Var> = (0..outer).map(|d| var(format!("{prefix}d{d}"))).collect();
    let (base, at, end) = (
        var(format!("{prefix}base")),
        var(format!("{prefix}at")),
        var(format!("{prefix}end")),
    );
    f.decl_lines
        .push(pos.iter().chain([&base, &at, &end]).map(|&v| Local::Var(v)).collect());
    let regs = (0..nodes.len())
        .map(|n| {
            f.vregs.push(format!("{prefix}{n}"));
            VReg(f.vregs.len() as u32 - 1)
        })
        .collect();
    Some(Vars {
        nodes,
        root,
        regs,
        lanes,
        pos,
        base,
        at,
        end,
    })
}

impl Gen<'_> {
    /// Whether access `i` is read only by the prologue's parameters, so not by the compute
    /// loops (which read the main access's rewritten box in the prologue's place).
    pub(super) fn prologue_only(&self, i: usize) -> bool {
        let Some((pr, main)) = &self.prologue else { return false };
        let mut elsewhere = i == 0 || i == *main || keep_index(self.k) == Some(i);
        let mut visit = |e: &Expr| {
            e.visit(&mut |x| {
                if let Expr::Load(a) = x {
                    elsewhere |= window_of(&self.all, a).is_some_and(|w| w.0 == i);
                }
            })
        };
        match &self.k.stmt.value {
            Expr::Binary(_, a, b) => {
                for f in [a, b] {
                    if !std::ptr::eq(&**f, pr.expr) {
                        visit(f);
                    }
                }
            }
            other => visit(other),
        }
        if let Some(e) = &self.k.stmt.epilogue {
            visit(e);
        }
        !elsewhere
    }

    /// The prologue of access `i`'s box just fetched into `half` (box row `row`), when `i` is
    /// the prologue's main access: on the whole box, or on this CPE's slice of a split box.
    pub(super) fn prologue_box(&self, i: usize, half: &Half, row: &Option<Int>) -> Vec<Stmt> {
        let (Some((pr, main)), Some(v)) = (&self.prologue, &self.prologue_vars) else {
            return Vec::new();
        };
        if *main != i {
            return Vec::new();
        }
        let form = box_form(pr, self.k).expect("a prologue has a box form");
        let b = self.buf_vars(i);
        let (start, extent, offset, has) = match &b.slice {
            Some(sv) => (
                sv.start,
                sv.extent,
                self.slice_offset(i, sv, row),
                Some(self.has_slice(sv, row)),
            ),
            None => (b.start, b.extent, Int::Const(0), None),
        };
        let at = |arr, d: usize| Int::Elem(arr, row.iter().cloned().chain([Int::Const(d as i64)]).collect());
        let rank = self.rank(i);
        let outer = form.last + 1;
        let inner = Int::product((outer..rank).map(|d| at(extent, d)).collect());
        let points = Int::product((0..outer).map(|d| at(extent, d)).collect());
        // Without a vector unit every element goes one by one.
        let vectors = v.lanes > 1;
        let lanes = v.lanes as i64;
        let (whole, left) = match vectors {
            true => (inner.clone() / Int::Const(lanes), inner.clone() % Int::Const(lanes)),
            false => (Int::Const(0), inner.clone()),
        };
        let elem = |index: Int| Place::Ldm {
            buf: b.buf,
            half: half.clone(),
            index,
        };
        // Per index of the outer dimensions: the run's start, the parameters and constants.
        let mut per_point = Vec::new();
        let mut point_ops = LOOP + int(4 + 2 * outer as u32);
        let run = (0..outer).fold(Int::Const(0), |acc, d| acc * at(extent, d) + Int::Var(v.pos[d]));
        per_point.push(Stmt::Set(v.base, offset + run * inner.clone()));
        let mut scalars: Vec<Option<Value>> = vec![None; v.nodes.len()];
        for (n, node) in v.nodes.iter().enumerate() {
            match node {
                Node::Load { access, load, .. } if *access != i => {
                    let load = load.clone().unwrap_or_else(|| self.all[*access].clone().into_owned());
                    let (place, ops) = self.parameter(&form, pr.main, *access, &load, start, row, &v.pos);
                    scalars[n] = Some(Value::Load(place.clone()));
                    if vectors {
                        point_ops += ops + VBROADCAST;
                        per_point.push(Stmt::VLoad {
                            reg: v.regs[n],
                            place,
                            broadcast: true,
                            aligned: false,
                        });
                    }
                }
                Node::Const(c) => {
                    scalars[n] = Some(Value::Const(Scalar::F32(*c)));
                    if vectors {
                        point_ops += VBROADCAST;
                        per_point.push(Stmt::VSplat {
                            reg: v.regs[n],
                            value: *c,
                        });
                    }
                }
                _ => {}
            }
        }
        // The run's whole vectors.
        let mut vector = Vec::new();
        let mut vector_ops = LOOP + VLOAD + VSTORE;
        for (n, node) in v.nodes.iter().enumerate() {
            match *node {
                Node::Load { access, .. } if access == i => vector.push(Stmt::VLoad {
                    reg: v.regs[n],
                    place: elem(Int::Var(v.at)),
                    broadcast: false,
                    aligned: false,
                }),
                Node::Unary(op, a) => {
                    vector_ops += vector_unary(op, lanes as u32);
                    vector.push(Stmt::VUnary {
                        op,
                        dst: v.regs[n],
                        a: v.regs[a],
                    });
                }
                Node::Binary(op, a, b) => {
                    vector_ops += vector_op(op, lanes as u32);
                    vector.push(Stmt::VBinary {
                        op,
                        dst: v.regs[n],
                        a: v.regs[a],
                        b: v.regs[b],
                    });
                }
                _ => {}
            }
        }
        vector.push(Stmt::VStore {
            reg: v.regs[v.root],
            place: elem(Int::Var(v.at)),
            aligned: false,
        });
        // The elements left, one by one.
        let mut scalar_ops = LOOP + Ops { store: 1, ..int(1) };
        for (n, node) in v.nodes.iter().enumerate() {
            scalars[n] = Some(match *node {
                Node::Load { access, .. } if access == i => {
                    scalar_ops += Ops { load: 1, ..Ops::ZERO };
                    Value::Load(elem(Int::Var(v.at)))
                }
                Node::Load { .. } => {
                    scalar_ops += Ops { load: 1, ..Ops::ZERO };
                    scalars[n].clone().expect("a parameter's place is set")
                }
                Node::Const(_) => scalars[n].clone().expect("a constant is set"),
                Node::Unary(op, a) => {
                    scalar_ops += cost::unary(op, DType::F32);
                    Value::Unary(op, DType::F32, Box::new(scalars[a].clone().expect("an operand before")))
                }
                Node::Binary(op, a, b) => {
                    scalar_ops += cost::binary(op, DType::F32);
                    let operand = |x: usize| Box::new(scalars[x].clone().expect("an operand before"));
                    Value::Binary(op, DType::F32, operand(a), operand(b))
                }
            });
        }
        let scalar = Stmt::Store {
            place: elem(Int::Var(v.at)),
            value: scalars[v.root].clone().expect("the value is set"),
        };
        let vectors_end = Int::Var(v.base) + whole.clone() * Int::Const(lanes);
        if vectors {
            per_point.push(Stmt::Set(v.end, vectors_end.clone() - Int::Const(lanes - 1)));
            per_point.push(Stmt::For {
                var: v.at,
                from: Int::Var(v.base),
                to: Int::Var(v.end),
                step: Int::Const(lanes),
                body: vector,
            });
        }
        per_point.push(Stmt::For {
            var: v.at,
            from: vectors_end,
            to: Int::Var(v.base) + inner,
            step: Int::Const(1),
            body: vec![scalar],
        });
        let mut out = vec![Stmt::Comment(format!(
            "The prologue of '{}', once on each element of the box.",
            super::comment(self.tensor_name(i))
        ))];
        charge(&mut out, point_ops, points.clone());
        charge(&mut out, vector_ops, points.clone() * whole);
        charge(&mut out, scalar_ops, points * left);
        out.extend((0..outer).rev().fold(per_point, |body, d| {
            vec![Stmt::For {
                var: v.pos[d],
                from: Int::Const(0),
                to: at(extent, d),
                step: Int::Const(1),
                body,
            }]
        }));
        match has {
            None => out,
            Some(cond) => vec![Stmt::If {
                cond,
                then: out,
                otherwise: Vec::new(),
            }],
        }
    }

    /// The element of parameter load `a` (in the window of access `p`) at the outer indices
    /// `pos` of the main access `main`'s box that starts at `start` (box row `row`), and its
    /// operations: the parameter follows one of the main access's dimensions (or none), at the
    /// same loops, so its index there is the main one's less the main subscript's offset plus
    /// its own.
    #[allow(clippy::too_many_arguments)]
    fn parameter(
        &self,
        form: &BoxForm,
        main: &Access,
        p: usize,
        a: &Access,
        start: Array,
        row: &Option<Int>,
        pos: &[Var],
    ) -> (Place, Ops) {
        let v = self.buf_vars(p);
        let prow: Vec<Int> = v.half.map(Int::Var).into_iter().collect();
        let half = match v.half {
            Some(h) => Half::At(Int::Var(h)),
            None => Half::Single,
        };
        let at = |arr, r: &[Int], d: usize| Int::Elem(arr, r.iter().cloned().chain([Int::Const(d as i64)]).collect());
        let offset = |a: &Access, d: usize| match &a.index[d] {
            Index::Affine(Affine { offset, .. }) => *offset,
            Index::Gathered { .. } => unreachable!("a prologue's loads are affine"),
        };
        let along = form.params.iter().find(|(x, _)| *x == a).and_then(|(_, along)| *along);
        // A parameter that follows no dimension lies at its displacement in its window.
        let Some((pd, md)) = along else {
            let (_, shift) = window_of(&self.all, a).expect("a load lies in a window");
            let index = (0..shift.len()).fold(Int::Const(0), |acc, d| {
                acc * at(v.extent, &prow, d) + Int::Const(shift[d] as i64)
            });
            let place = Place::Ldm {
                buf: v.buf,
                half,
                index,
            };
            return (place, int(2 * shift.len() as u32));
        };
        let rowv: Vec<Int> = row.iter().cloned().collect();
        let coordinate =
            at(start, &rowv, md) + Int::Var(pos[md]) - Int::Const(offset(main, md)) + Int::Const(offset(a, pd));
        let stride = Int::product((pd + 1..self.rank(p)).map(|d| at(v.extent, &prow, d)).collect());
        let index = (coordinate - at(v.start, &prow, pd)) * stride;
        (
            Place::Ldm {
                buf: v.buf,
                half,
                index,
            },
            int(6),
        )
    }
}
