//! Register-blocked reductions: point nests that fold f32 values into an LDM target
//! (convolutions, matrix products, pooling, reductions) keep a block of target elements in
//! registers across the reduction loops, instead of loading and storing the target at every
//! point.
//!
//! The nest's loops split into the target's loops (those its index moves along) and the
//! reduction loops (the others). A block spans up to [`ROWS`] points of one target loop, the
//! *rows*, chosen so that loads which do not move along it are shared by the rows, and up to
//! [`WIDTH`] points of the loop along which the target is contiguous, four to a vector; the
//! target loops' remainders run in blocks of one row, one vector, or one scalar. The
//! reduction loops run innermost, in their order: each target element takes the same values
//! in the same order as in the C, so the results are equal bit for bit.
//!
//! That needs every point of the target loops to reach its own element. The code checks it
//! when it enters the nest, from the target's steps and the loops' trip counts, and runs the
//! plain nest when it does not hold.

use std::collections::HashMap;

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, InstBuilder, Type, Value as Val};
use cranelift_frontend::Variable;
use swflow_frontend::ir::{DType, ReduceKind};

use super::{extreme_op, lane_wise, ldm_places, vector_flags, Lower, Strided, I64, LANES};
use crate::cpe::{Func, Int, Place, Stmt, Value, Var};

/// Rows of a block.
const ROWS: i64 = 4;
/// Vectors per row of a block.
const VECTORS: i64 = 2;
/// Target elements per row of a block.
const WIDTH: i64 = VECTORS * LANES;
/// Reduction loops of at most this many points, innermost, are unrolled.
const UNROLL: i64 = 4;

/// How a nest's loops are walked in blocks.
pub(super) struct Plan<'f> {
    kind: ReduceKind,
    value: &'f Value,
    /// The target's place among the nest's strided places.
    target: usize,
    /// The level the target is contiguous along.
    lanes: usize,
    /// The level whose points make a block's rows, when one is worth it.
    rows: Option<usize>,
    /// The other target levels, in nest order.
    outer: Vec<usize>,
    /// The reduction levels, in nest order.
    reduce: Vec<usize>,
    /// Each level's trip count, where the program fixes it.
    trips: Vec<Option<i64>>,
}

/// The variables a program only ever sets to one constant, with that constant.
pub(super) fn constant_vars(f: &Func) -> HashMap<Var, i64> {
    fn walk(body: &[Stmt], seen: &mut HashMap<Var, Option<i64>>) {
        for s in body {
            match s {
                Stmt::Set(v, e) => {
                    let c = match e {
                        Int::Const(c) => Some(*c),
                        _ => None,
                    };
                    let entry = seen.entry(*v).or_insert(c);
                    if *entry != c {
                        *entry = None;
                    }
                }
                Stmt::For { var, body, .. } => {
                    seen.insert(*var, None);
                    walk(body, seen);
                }
                Stmt::Dma(d) => {
                    seen.insert(d.issued, None);
                }
                Stmt::If { then, otherwise, .. } => {
                    walk(then, seen);
                    walk(otherwise, seen);
                }
                _ => {}
            }
        }
    }
    let mut seen = HashMap::new();
    walk(&f.body, &mut seen);
    seen.into_iter()
        .filter_map(|(v, c)| {
            let c = c?;
            f.var(v).init.is_none_or(|i| i == c).then_some((v, c))
        })
        .collect()
}

/// The value of `e` where the program fixes it (constants and constant variables).
fn fixed(e: &Int, consts: &HashMap<Var, i64>) -> Option<i64> {
    match e {
        Int::Const(c) => Some(*c),
        Int::Var(v) => consts.get(v).copied(),
        Int::Add(a, b) => fixed(a, consts)?.checked_add(fixed(b, consts)?),
        Int::Sub(a, b) => fixed(a, consts)?.checked_sub(fixed(b, consts)?),
        Int::Mul(a, b) => fixed(a, consts)?.checked_mul(fixed(b, consts)?),
        _ => None,
    }
}

/// The shape of a block's row: vectors of four lanes, or one scalar.
#[derive(Clone, Copy)]
enum Lanes {
    Vectors(i64),
    Scalar,
}

impl Lanes {
    fn vectors(self) -> i64 {
        match self {
            Lanes::Vectors(n) => n,
            Lanes::Scalar => 1,
        }
    }

    fn ty(self) -> Type {
        match self {
            Lanes::Vectors(_) => types::F32X4,
            Lanes::Scalar => types::F32,
        }
    }
}

impl<'f> Lower<'f, '_> {
    /// The blocked walk of a nest (`bounds` its loops' bounds, `strided` its LDM places), when
    /// its body is one f32 sum, maximum or minimum into an LDM target that is contiguous along
    /// one of its loops, of a lane-wise value of strided loads from other buffers.
    pub(super) fn block_plan(
        &self,
        bounds: &[(&Int, &Int)],
        body: &'f [Stmt],
        strided: &[Strided],
    ) -> Option<Plan<'f>> {
        let [Stmt::Fold {
            kind,
            dtype: DType::F32,
            place,
            value,
        }] = body
        else {
            return None;
        };
        if !matches!(kind, ReduceKind::Sum | ReduceKind::Max | ReduceKind::Min) {
            return None;
        }
        let Place::Ldm { buf: target_buf, .. } = place else {
            return None;
        };
        let target = strided.iter().position(|s| std::ptr::eq(s.place, place))?;
        let mut loads = Vec::new();
        ldm_places(value, &mut loads);
        let strided_of = |p: &Place| strided.iter().find(|s| std::ptr::eq(s.place, p));
        for p in &loads {
            let Place::Ldm { buf, .. } = p else {
                unreachable!("LDM places")
            };
            if buf == target_buf || strided_of(p).is_none() {
                return None;
            }
        }
        let t = &strided[target];
        let lanes = (0..t.slopes.len()).rev().find(|&i| t.slopes[i] == Some(1))?;
        let slope = |p: &Place| strided_of(p).filter(|s| s.f32).and_then(|s| s.slopes[lanes]);
        // Every load is strided, so `lane_wise` also rules out loads from main memory.
        if !t.f32 || !lane_wise(value, &slope) || count_loads(value) != loads.len() {
            return None;
        }
        let (reduce, outer): (Vec<usize>, Vec<usize>) = (0..t.slopes.len())
            .filter(|&i| i != lanes)
            .partition(|&i| t.slopes[i] == Some(0));
        if reduce.is_empty() {
            return None;
        }
        let trips: Vec<Option<i64>> = bounds
            .iter()
            .map(|(from, to)| Some(fixed(to, &self.consts)? - fixed(from, &self.consts)?))
            .collect();
        // The rows: the target level along which most loads stay put, innermost on a tie,
        // among those that may have a block's rows.
        let still = |i: usize| {
            loads
                .iter()
                .filter(|p| strided_of(p).is_some_and(|s| s.slopes[i] == Some(0)))
                .count()
        };
        let rows = outer
            .iter()
            .copied()
            .filter(|&i| trips[i].is_none_or(|n| n >= ROWS))
            .max_by_key(|&i| (still(i), i));
        Some(Plan {
            kind: *kind,
            value,
            target,
            lanes,
            rows,
            outer,
            reduce,
            trips,
        })
    }

    /// Runs the nest blocked when its target points are distinct, else as `plain` emits it.
    /// `from` and `to` are the levels' bounds; every strided place's first address is set.
    pub(super) fn blocked(
        &mut self,
        plan: &Plan<'f>,
        from: &[Val],
        to: &[Val],
        strided: &[Strided],
        plain: &mut dyn FnMut(&mut Self),
    ) {
        let distinct = self.distinct_targets(plan, from, to, strided);
        let (fast, slow, join) = (self.b.create_block(), self.b.create_block(), self.b.create_block());
        self.b.ins().brif(distinct, fast, &[], slow, &[]);
        self.b.switch_to_block(slow);
        plain(self);
        self.b.ins().jump(join, &[]);
        self.b.switch_to_block(fast);
        let walk = Walk {
            plan,
            from,
            to,
            steps: (0..from.len())
                .map(|i| strided.iter().map(|s| s.step[i]).collect())
                .collect(),
            slopes: strided
                .iter()
                .map(|s| s.slopes[plan.lanes].unwrap_or(0) * s.elem_bytes)
                .collect(),
            places: strided.iter().map(|s| s.place).collect(),
            moves_along_rows: strided
                .iter()
                .map(|s| plan.rows.is_some_and(|r| s.slopes[r] != Some(0)))
                .collect(),
        };
        let addrs: Vec<Val> = strided.iter().map(|s| self.b.use_var(s.addr[0])).collect();
        self.outer_level(&walk, 0, 1, addrs);
        self.b.ins().jump(join, &[]);
        self.b.switch_to_block(join);
    }

    /// Whether no two points of the target's levels reach the same element: ordered by the
    /// size of their steps, each level's step exceeds the span of those before it.
    fn distinct_targets(&mut self, plan: &Plan<'f>, from: &[Val], to: &[Val], strided: &[Strided]) -> Val {
        let t = &strided[plan.target];
        let levels: Vec<usize> = plan.outer.iter().copied().chain([plan.lanes]).collect();
        let (mut step, mut span) = (Vec::new(), Vec::new());
        for &i in &levels {
            let a = self.b.ins().iabs(t.step[i]);
            let trip = self.b.ins().isub(to[i], from[i]);
            let last = self.b.ins().iadd_imm_s(trip, -1);
            span.push(self.b.ins().imul(a, last));
            step.push(a);
        }
        let mut all = self.b.ins().iconst(types::I8, 1);
        let zero = self.b.ins().iconst(I64, 0);
        for i in 0..levels.len() {
            let mut before = zero;
            for j in 0..levels.len() {
                if i == j {
                    continue;
                }
                let cc = if j < i {
                    IntCC::UnsignedLessThanOrEqual
                } else {
                    IntCC::UnsignedLessThan
                };
                let earlier = self.b.ins().icmp(cc, step[j], step[i]);
                let add = self.b.ins().select(earlier, span[j], zero);
                before = self.b.ins().iadd(before, add);
            }
            let ok = self.b.ins().icmp(IntCC::UnsignedGreaterThan, step[i], before);
            all = self.b.ins().band(all, ok);
        }
        all
    }

    /// Target level `k` of the walk's outer levels (then the lanes' level) with `rows` rows a
    /// block, from the addresses `addrs`.
    fn outer_level(&mut self, w: &Walk<'_, 'f>, k: usize, rows: i64, addrs: Vec<Val>) {
        let Some(&level) = w.plan.outer.get(k) else {
            let at = w.from[w.plan.lanes];
            let (at, addrs) = self.walk(w, w.plan.lanes, at, WIDTH, addrs, &mut |l, a| {
                l.block(w, rows, Lanes::Vectors(VECTORS), a)
            });
            let (at, addrs) = self.walk(w, w.plan.lanes, at, LANES, addrs, &mut |l, a| {
                l.block(w, rows, Lanes::Vectors(1), a)
            });
            self.walk(w, w.plan.lanes, at, 1, addrs, &mut |l, a| {
                l.block(w, rows, Lanes::Scalar, a)
            });
            return;
        };
        let at = w.from[level];
        if w.plan.rows == Some(level) {
            let (at, addrs) = self.walk(w, level, at, ROWS, addrs, &mut |l, a| l.outer_level(w, k + 1, ROWS, a));
            self.walk(w, level, at, 1, addrs, &mut |l, a| l.outer_level(w, k + 1, 1, a));
        } else {
            self.walk(w, level, at, 1, addrs, &mut |l, a| l.outer_level(w, k + 1, rows, a));
        }
    }

    /// `for (i = at; i + points <= to; i += points) body(addresses)` along `level`; returns
    /// where it stopped and the addresses there.
    fn walk(
        &mut self,
        w: &Walk<'_, 'f>,
        level: usize,
        at: Val,
        points: i64,
        addrs: Vec<Val>,
        body: &mut dyn FnMut(&mut Self, Vec<Val>),
    ) -> (Val, Vec<Val>) {
        let steps: Vec<Val> = w.steps[level]
            .iter()
            .map(|&s| self.b.ins().imul_imm_s(s, points))
            .collect();
        let i = self.b.declare_var(I64);
        self.b.def_var(i, at);
        let vars: Vec<_> = addrs
            .iter()
            .map(|&a| {
                let v = self.b.declare_var(I64);
                self.b.def_var(v, a);
                v
            })
            .collect();
        let (head, inner, after) = (self.b.create_block(), self.b.create_block(), self.b.create_block());
        self.b.ins().jump(head, &[]);
        self.b.switch_to_block(head);
        let now = self.b.use_var(i);
        let end = self.b.ins().iadd_imm_s(now, points);
        let go = self.b.ins().icmp(IntCC::SignedLessThanOrEqual, end, w.to[level]);
        self.b.ins().brif(go, inner, &[], after, &[]);
        self.b.switch_to_block(inner);
        let here = vars.iter().map(|&v| self.b.use_var(v)).collect();
        body(self, here);
        let now = self.b.use_var(i);
        let next = self.b.ins().iadd_imm_s(now, points);
        self.b.def_var(i, next);
        for (&v, &s) in vars.iter().zip(&steps) {
            let a = self.b.use_var(v);
            let next = self.b.ins().iadd(a, s);
            self.b.def_var(v, next);
        }
        self.b.ins().jump(head, &[]);
        self.b.switch_to_block(after);
        let at = self.b.use_var(i);
        (at, vars.iter().map(|&v| self.b.use_var(v)).collect())
    }

    /// One block at `addrs`: loads its target elements, folds every point of the reduction
    /// levels into them, and stores them.
    fn block(&mut self, w: &Walk<'_, 'f>, rows: i64, lanes: Lanes, addrs: Vec<Val>) {
        let t = w.plan.target;
        let mut accs = Vec::new();
        for row in 0..rows {
            for vector in 0..lanes.vectors() {
                let at = self.row_addr(w, &addrs, t, row);
                let acc = self.b.declare_var(lanes.ty());
                let x = self.b.ins().load(lanes.ty(), vector_flags(), at, (16 * vector) as i32);
                self.b.def_var(acc, x);
                accs.push(acc);
            }
        }
        self.reduce_level(w, 0, rows, lanes, &accs, addrs.clone());
        let mut accs = accs.iter();
        for row in 0..rows {
            for vector in 0..lanes.vectors() {
                let at = self.row_addr(w, &addrs, t, row);
                let acc = self.b.use_var(*accs.next().expect("one accumulator per vector"));
                self.b.ins().store(vector_flags(), acc, at, (16 * vector) as i32);
            }
        }
    }

    /// Place `p`'s address in row `row` of a block at `addrs`.
    fn row_addr(&mut self, w: &Walk<'_, 'f>, addrs: &[Val], p: usize, row: i64) -> Val {
        match (row, w.plan.rows) {
            (0, _) | (_, None) => addrs[p],
            (row, Some(level)) => {
                let off = self.b.ins().imul_imm_s(w.steps[level][p], row);
                self.b.ins().iadd(addrs[p], off)
            }
        }
    }

    /// Reduction level `k` (then the fold itself) of a block.
    fn reduce_level(
        &mut self,
        w: &Walk<'_, 'f>,
        k: usize,
        rows: i64,
        lanes: Lanes,
        accs: &[Variable],
        addrs: Vec<Val>,
    ) {
        let Some(&level) = w.plan.reduce.get(k) else {
            self.fold_block(w, rows, lanes, accs, &addrs);
            return;
        };
        match w.plan.trips[level] {
            Some(1) => self.reduce_level(w, k + 1, rows, lanes, accs, addrs),
            Some(n) if n <= UNROLL && k + 1 == w.plan.reduce.len() => {
                for i in 0..n.max(0) {
                    let at: Vec<Val> = addrs
                        .iter()
                        .zip(&w.steps[level])
                        .map(|(&a, &s)| {
                            let off = self.b.ins().imul_imm_s(s, i);
                            self.b.ins().iadd(a, off)
                        })
                        .collect();
                    self.fold_block(w, rows, lanes, accs, &at);
                }
            }
            _ => {
                let at = w.from[level];
                self.walk(w, level, at, 1, addrs, &mut |l, a| {
                    l.reduce_level(w, k + 1, rows, lanes, accs, a)
                });
            }
        }
    }

    /// Folds the value at one reduction point into every accumulator of a block. A load that
    /// does not move along the rows or the lanes is made once for all that share it.
    fn fold_block(&mut self, w: &Walk<'_, 'f>, rows: i64, lanes: Lanes, accs: &[Variable], addrs: &[Val]) {
        let mut loaded: HashMap<(usize, i64, i64), Val> = HashMap::new();
        let mut accs = accs.iter();
        for row in 0..rows {
            for vector in 0..lanes.vectors() {
                let mut load = |l: &mut Self, p: &Place| {
                    let i = w
                        .places
                        .iter()
                        .position(|&q| std::ptr::eq(q, p))
                        .expect("a strided place");
                    let key = (
                        i,
                        if w.moves_along_rows[i] { row } else { 0 },
                        if w.slopes[i] != 0 { vector } else { 0 },
                    );
                    if let Some(&x) = loaded.get(&key) {
                        return x;
                    }
                    let at = l.row_addr(w, addrs, i, key.1);
                    let x = match lanes {
                        Lanes::Vectors(_) => l.lanes_load(at, w.slopes[i] * LANES * vector, w.slopes[i]),
                        Lanes::Scalar => l.b.ins().load(types::F32, vector_flags(), at, 0),
                    };
                    loaded.insert(key, x);
                    x
                };
                let vector_lanes = matches!(lanes, Lanes::Vectors(_));
                let acc = *accs.next().expect("one accumulator per vector");
                let old = self.b.use_var(acc);
                let new = match (w.plan.kind, vector_lanes) {
                    (ReduceKind::Sum, _) => self.lane_sum(old, w.plan.value, vector_lanes, &mut load),
                    (kind, true) => {
                        let x = self.lane_value(w.plan.value, vector_lanes, &mut load);
                        self.vector_extreme(extreme_op(kind), old, x)
                    }
                    (kind, false) => {
                        let x = self.lane_value(w.plan.value, vector_lanes, &mut load);
                        self.binary(extreme_op(kind), DType::F32, old, x)
                    }
                };
                self.b.def_var(acc, new);
            }
        }
    }
}

/// The loads of `v`, counted.
fn count_loads(v: &Value) -> usize {
    match v {
        Value::Load(_) => 1,
        Value::Const(_) | Value::Index(_) => 0,
        Value::Unary(_, _, a) | Value::Cast(_, _, a) => count_loads(a),
        Value::Binary(_, _, a, b) => count_loads(a) + count_loads(b),
        Value::Select(c, a, b) => count_loads(c) + count_loads(a) + count_loads(b),
    }
}

/// What the blocked walk of one nest needs at every level.
struct Walk<'p, 'f> {
    plan: &'p Plan<'f>,
    from: &'p [Val],
    to: &'p [Val],
    /// Each level's address step of each strided place, bytes.
    steps: Vec<Vec<Val>>,
    /// Each strided place's address step along the lanes' level, bytes.
    slopes: Vec<i64>,
    places: Vec<*const Place>,
    /// Whether each strided place moves along the rows' level (unless known not to).
    moves_along_rows: Vec<bool>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpe::{Array, BoxDma, Buf, DmaClass, Field, Half, VarDecl};

    fn var(name: &str, init: Option<i64>) -> VarDecl {
        VarDecl {
            name: name.into(),
            init,
        }
    }

    #[test]
    fn constant_vars_are_those_only_ever_set_to_one_constant() {
        let (a, b, c, d, e) = (Var(0), Var(1), Var(2), Var(3), Var(4));
        let f = Func {
            vars: vec![
                var("a", None),
                var("b", Some(0)),
                var("c", None),
                var("d", Some(0)),
                var("e", Some(1)),
            ],
            arrays: Vec::new(),
            decl_lines: Vec::new(),
            bufs: Vec::new(),
            fields: Vec::new(),
            replies: 1,
            lanes: 1,
            vregs: Vec::new(),
            body: vec![
                Stmt::Set(a, Int::Const(3)),
                Stmt::If {
                    cond: crate::cpe::Cond::Lt(Int::Var(a), Int::Const(4)),
                    then: vec![Stmt::Set(a, Int::Const(3)), Stmt::Set(b, Int::Const(2))],
                    otherwise: Vec::new(),
                },
                Stmt::For {
                    var: c,
                    from: Int::Const(0),
                    to: Int::Const(4),
                    step: Int::Const(1),
                    body: vec![Stmt::Set(e, Int::Const(1) + Int::Var(c))],
                },
                Stmt::Dma(BoxDma {
                    put: false,
                    padded: false,
                    buf: Buf(0),
                    half: Half::Single,
                    field: Field(0),
                    shape: Array(0),
                    start: Array(0),
                    extent: Array(0),
                    row: None,
                    offset: None,
                    issued: d,
                    reply: 0,
                    class: DmaClass::Data,
                }),
            ],
        };
        // b starts at 0 but is set to 2; c is a loop variable; d counts transfers; e is
        // computed.
        assert_eq!(constant_vars(&f), HashMap::from([(a, 3)]));
    }
}
