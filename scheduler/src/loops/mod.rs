//! The loop IR: a model as a sequence of kernels over main-memory tensors.
//!
//! A [`Kernel`] is one loop nest: an iteration domain of named loops with extents, and one
//! statement whose accesses index tensors with affine expressions of the loop variables. A
//! statement either assigns its value to the target element or, with a [`Reduction`], folds
//! the values of all points that share a target element into it (starting from the
//! reduction's initial value). Loops are `parallel` (the target index depends on them) or
//! `reduce` (it does not). Every access of a verified kernel is in bounds for every point of
//! the domain, and distinct points of the parallel loops write distinct target elements.
//!
//! After scheduling, a kernel also carries a [`crate::schedule::Schedule`]: how its loops are
//! split over the compute cores, tiled into LDM buffers, ordered, and where DMA happens.

mod parse;
mod print;
mod verify;

use std::borrow::Cow;
use std::sync::Arc;

use swflow_frontend::ir::{BinaryOp, DType, ReduceKind, Tensor, TensorType, UnaryOp};

pub use parse::{parse_kernel, LoopParseError};
pub use print::{print_kernel, print_program, quoted_name};
pub use verify::{verify_kernel, verify_program, LoopVerifyError};

use crate::schedule::Schedule;

/// Index of a tensor in [`Program::tensors`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TensorId(pub u32);

impl TensorId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Where a tensor's storage comes from.
#[derive(Clone, Debug)]
pub enum TensorKind {
    /// A runtime input of the model.
    Input,
    /// A constant, stored with the model.
    Const(Arc<Tensor>),
    /// Computed by kernels.
    Temp,
    /// The same elements as another tensor, under another shape (a reshape).
    View(TensorId),
}

#[derive(Clone, Debug)]
pub struct TensorInfo {
    pub name: String,
    pub ty: TensorType,
    pub kind: TensorKind,
}

/// A whole model in loop IR: kernels run in order.
#[derive(Clone, Debug)]
pub struct Program {
    pub name: String,
    pub tensors: Vec<TensorInfo>,
    pub kernels: Vec<Kernel>,
    /// Runtime inputs in the graph's input order.
    pub inputs: Vec<TensorId>,
    /// Per runtime input, in `inputs` order: the least extent of the axes its values index in
    /// the graph the program was lowered from (`swflow_frontend::random::index_extents`), or
    /// `None`; the generated program draws pseudo-random inputs within it, as `swflow run`
    /// does from the graph.
    pub index_extents: Vec<Option<usize>>,
    pub outputs: Vec<(String, TensorId)>,
    /// `(input, output)` pairs where the output is the input's next value (a parameter and
    /// its update in a training step). The memory plan stores the two in one place when that
    /// is safe (see [`crate::memplan`]), so the step updates the input in place.
    pub updates: Vec<(TensorId, TensorId)>,
    /// For a gradient program scheduled with tape options: its tape.
    pub tape: Option<crate::tape::TapePlan>,
}

impl Program {
    /// Declares updates by name: each `(input, output)` names a graph input and a graph output
    /// of the same type.
    pub fn set_updates(&mut self, pairs: &[(String, String)]) -> Result<(), String> {
        let mut updates = Vec::with_capacity(pairs.len());
        for (input, output) in pairs {
            let i = self
                .inputs
                .iter()
                .copied()
                .find(|&t| self.tensor(t).name == *input)
                .ok_or_else(|| format!("'{input}' is not an input of the program"))?;
            let o = self
                .outputs
                .iter()
                .find(|(n, _)| n == output)
                .map(|&(_, t)| t)
                .ok_or_else(|| format!("'{output}' is not an output of the program"))?;
            if self.tensor(i).ty != self.tensor(o).ty {
                return Err(format!("'{output}' is not of the type of '{input}'"));
            }
            updates.push((i, o));
        }
        self.updates = updates;
        Ok(())
    }

    pub fn tensor(&self, id: TensorId) -> &TensorInfo {
        &self.tensors[id.index()]
    }

    /// The tensor whose storage `id` uses (itself unless it is a view).
    pub fn storage(&self, mut id: TensorId) -> TensorId {
        while let TensorKind::View(of) = self.tensor(id).kind {
            id = of;
        }
        id
    }

    /// The least extent of the axes that kernels gather along at positions read from `id`'s
    /// storage (itself or a view of it), or `None` when no gather reads positions there: for
    /// programs made of kernels rather than lowered from a graph (a kernel measured alone),
    /// whose inputs have no [`Program::index_extents`] from a graph.
    pub fn index_extent(&self, id: TensorId) -> Option<usize> {
        let storage = self.storage(id);
        let mut least: Option<usize> = None;
        for k in &self.kernels {
            for a in k.stmt.read_accesses() {
                for i in &a.index {
                    if let Index::Gathered { access, extent } = i {
                        if self.storage(k.operands[access.operand]) == storage {
                            least = Some(least.map_or(*extent, |l| l.min(*extent)));
                        }
                    }
                }
            }
        }
        least
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoopKind {
    Parallel,
    Reduce,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loop {
    pub name: String,
    pub extent: usize,
    pub kind: LoopKind,
}

/// `offset + Σ coef * loop`, terms sorted by loop with non-zero coefficients.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Affine {
    pub terms: Vec<(usize, i64)>,
    pub offset: i64,
}

impl Affine {
    pub fn constant(offset: i64) -> Affine {
        Affine {
            terms: Vec::new(),
            offset,
        }
    }

    /// The loop variable `l`.
    pub fn var(l: usize) -> Affine {
        Affine {
            terms: vec![(l, 1)],
            offset: 0,
        }
    }

    /// `self + coef * l`.
    pub fn plus(mut self, l: usize, coef: i64) -> Affine {
        if coef != 0 {
            match self.terms.iter_mut().find(|(v, _)| *v == l) {
                Some(t) => t.1 += coef,
                None => self.terms.push((l, coef)),
            }
            self.terms.retain(|t| t.1 != 0);
            self.terms.sort_unstable();
        }
        self
    }

    pub fn add_offset(mut self, c: i64) -> Affine {
        self.offset += c;
        self
    }

    /// `self` with every loop `l` replaced by `args[l]`: an affine function of another
    /// kernel's loops, when `self` indexes the loops of a producer whose point `l` the
    /// consumer reads at `args`.
    pub fn compose(&self, args: &[Affine]) -> Affine {
        let mut out = Affine::constant(self.offset);
        for &(l, c) in &self.terms {
            out.offset += c * args[l].offset;
            for &(m, d) in &args[l].terms {
                out = out.plus(m, c * d);
            }
        }
        out
    }

    /// Value at a point.
    pub fn eval(&self, point: &[usize]) -> i64 {
        self.offset + self.terms.iter().map(|&(l, c)| c * point[l] as i64).sum::<i64>()
    }

    /// Smallest and largest value over the box `0 <= loop < extents[loop]`.
    pub fn range(&self, extents: &[usize]) -> (i64, i64) {
        let (mut lo, mut hi) = (self.offset, self.offset);
        for &(l, c) in &self.terms {
            let span = c * (extents[l].max(1) as i64 - 1);
            if span < 0 {
                lo += span;
            } else {
                hi += span;
            }
        }
        (lo, hi)
    }
}

/// One subscript of an access.
#[derive(Clone, Debug, PartialEq)]
pub enum Index {
    Affine(Affine),
    /// A position read from another tensor (gather): the loaded i64, counted from the end
    /// when negative, must lie in `0..extent`.
    Gathered {
        access: Box<Access>,
        extent: usize,
    },
}

/// A tensor element: operand slot of the kernel and one subscript per dimension.
#[derive(Clone, Debug, PartialEq)]
pub struct Access {
    pub operand: usize,
    pub index: Vec<Index>,
    /// A guarded read (padding): its subscripts, all affine, may leave the tensor, and a
    /// point whose subscripts do reads this value instead. `None`: every subscript stays in
    /// bounds.
    pub pad: Option<Scalar>,
    /// Per dimension, how many elements past its subscript the access also spans: the window
    /// of loads that differ by constants ([`Stmt::windows`]). Empty for every load of a
    /// statement; only a window has a spread.
    pub spread: Vec<usize>,
}

impl Access {
    pub fn new(operand: usize, index: Vec<Index>) -> Access {
        Access {
            operand,
            index,
            pad: None,
            spread: Vec::new(),
        }
    }

    /// Whether some affine subscript moves along loop `l` (a gathered one is not counted).
    pub fn uses_loop(&self, l: usize) -> bool {
        self.index
            .iter()
            .any(|x| matches!(x, Index::Affine(x) if x.terms.iter().any(|&(m, c)| m == l && c != 0)))
    }

    /// The extra extent of dimension `d` ([`Access::spread`]).
    pub fn spread(&self, d: usize) -> usize {
        self.spread.get(d).copied().unwrap_or(0)
    }

    /// Whether the box this read spans over a tile takes the whole of dimension `d` (of
    /// `shape_d` elements) instead of its span there: the subscript strides (its largest
    /// coefficient `c` is at least 2, every coefficient positive: `2*o0` for a subsampling,
    /// `2*o0 + k0` for a pooling window), the tiles `tiles` of its loops are whole, and the
    /// span leaves fewer than `c` elements of the dimension out. Those elements are never
    /// read; with them the box's rows run on into the next ones, so that each channel's plane
    /// moves as one block instead of a row at a time. The box is then the same for every
    /// tile, and holds what any part of those loops reads (a chunk of a partition that runs
    /// along one of them may take part of it).
    pub fn spans_dimension(&self, d: usize, tiles: &[usize], extents: &[usize], shape_d: usize) -> bool {
        let Index::Affine(x) = &self.index[d] else { return false };
        let stride = x.terms.iter().map(|t| t.1).max().unwrap_or(0);
        let whole = x.terms.iter().all(|&(l, c)| c > 0 && tiles[l] == extents[l]);
        if self.pad.is_some() || stride < 2 || !whole || x.offset < 0 {
            return false;
        }
        let span = x
            .terms
            .iter()
            .map(|&(l, c)| c as usize * (extents[l] - 1))
            .sum::<usize>()
            + 1
            + self.spread(d);
        (span < shape_d && shape_d - span < stride as usize) && x.offset as usize + span <= shape_d
    }

    /// When this access is the window holding load `a` ([`Stmt::windows`]): per dimension,
    /// how far `a`'s subscript lies past the window's (from 0 to the spread).
    pub fn displacement(&self, a: &Access) -> Option<Vec<usize>> {
        if self.operand != a.operand || self.pad != a.pad || self.index.len() != a.index.len() {
            return None;
        }
        if self.spread.is_empty() {
            return (self.index == a.index).then(|| vec![0; a.index.len()]);
        }
        self.index
            .iter()
            .zip(&a.index)
            .enumerate()
            .map(|(d, pair)| match pair {
                (Index::Affine(w), Index::Affine(x)) if w.terms == x.terms => {
                    let past = x.offset - w.offset;
                    (0..=self.spread(d) as i64).contains(&past).then_some(past as usize)
                }
                _ => None,
            })
            .collect()
    }

    /// The smallest box of a tensor of `shape` holding every element the access touches over
    /// the domain `0 <= loop < extents[loop]`: per dimension, the first and last index. A
    /// gathered subscript may touch its whole dimension; a guarded one, the part inside.
    pub fn footprint(&self, extents: &[usize], shape: &[usize]) -> Vec<(i64, i64)> {
        self.index
            .iter()
            .zip(shape)
            .enumerate()
            .map(|(d, (i, &e))| match i {
                Index::Affine(s) => {
                    let (lo, hi) = s.range(extents);
                    let hi = hi + self.spread(d) as i64;
                    (lo.max(0), hi.min(e as i64 - 1))
                }
                Index::Gathered { .. } => (0, e as i64 - 1),
            })
            .collect()
    }
}

/// Whether `a` and `b` load one operand, with the same padding, at affine subscripts that
/// differ only in their constants.
fn differ_by_constants(a: &Access, b: &Access) -> bool {
    a.operand == b.operand
        && a.pad == b.pad
        && a.index.len() == b.index.len()
        && a.index.iter().zip(&b.index).all(|pair| match pair {
            (Index::Affine(x), Index::Affine(y)) => x.terms == y.terms,
            _ => false,
        })
}

/// A constant scalar.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    F32(f32),
    F64(f64),
    I64(i64),
    Bool(bool),
}

impl Scalar {
    pub fn dtype(self) -> DType {
        match self {
            Scalar::F32(_) => DType::F32,
            Scalar::F64(_) => DType::F64,
            Scalar::I64(_) => DType::I64,
            Scalar::Bool(_) => DType::Bool,
        }
    }

    /// `v` converted to `dtype` (the identity of a reduction, a padding value).
    pub fn of(dtype: DType, v: f64) -> Scalar {
        match dtype {
            DType::F32 => Scalar::F32(v as f32),
            DType::F64 => Scalar::F64(v),
            DType::I64 => Scalar::I64(if v == f64::INFINITY {
                i64::MAX
            } else if v == f64::NEG_INFINITY {
                i64::MIN
            } else {
                v as i64
            }),
            DType::Bool => Scalar::Bool(v != 0.0),
        }
    }
}

/// The scalar computation of a statement.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    Load(Access),
    Const(Scalar),
    Unary(UnaryOp, Box<Expr>),
    Binary(BinaryOp, Box<Expr>, Box<Expr>),
    Select(Box<Expr>, Box<Expr>, Box<Expr>),
    Cast(DType, Box<Expr>),
    /// In a reduction's epilogue: the target element's reduced value.
    Acc,
}

impl Expr {
    pub fn load(operand: usize, index: Vec<Affine>) -> Expr {
        Expr::Load(Access::new(operand, index.into_iter().map(Index::Affine).collect()))
    }

    pub fn binary(op: BinaryOp, a: Expr, b: Expr) -> Expr {
        Expr::Binary(op, Box::new(a), Box::new(b))
    }

    /// Every access in the expression, outermost first, with the accesses that gathered
    /// subscripts read positions from (at any depth).
    pub fn accesses(&self) -> Vec<&Access> {
        fn with_positions<'a>(a: &'a Access, out: &mut Vec<&'a Access>) {
            out.push(a);
            for i in &a.index {
                if let Index::Gathered { access, .. } = i {
                    with_positions(access, out);
                }
            }
        }
        let mut out = Vec::new();
        self.visit(&mut |e| {
            if let Expr::Load(a) = e {
                with_positions(a, &mut out);
            }
        });
        out
    }

    /// Calls `f` on every subexpression, innermost first, and last on the expression itself;
    /// `f` may replace the expression it is given (its replacement is not visited).
    pub fn rewrite(&mut self, f: &mut impl FnMut(&mut Expr)) {
        match self {
            Expr::Load(_) | Expr::Const(_) | Expr::Acc => {}
            Expr::Unary(_, a) | Expr::Cast(_, a) => a.rewrite(f),
            Expr::Binary(_, a, b) => {
                a.rewrite(f);
                b.rewrite(f);
            }
            Expr::Select(c, a, b) => {
                c.rewrite(f);
                a.rewrite(f);
                b.rewrite(f);
            }
        }
        f(self);
    }

    /// Calls `f` on the expression and every subexpression, outermost first.
    pub fn visit<'a>(&'a self, f: &mut impl FnMut(&'a Expr)) {
        f(self);
        match self {
            Expr::Load(_) | Expr::Const(_) | Expr::Acc => {}
            Expr::Unary(_, a) | Expr::Cast(_, a) => a.visit(f),
            Expr::Binary(_, a, b) => {
                a.visit(f);
                b.visit(f);
            }
            Expr::Select(c, a, b) => {
                c.visit(f);
                a.visit(f);
                b.visit(f);
            }
        }
    }
}

/// Folds the values of all points that write the same element, from `init`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Reduction {
    pub kind: ReduceKind,
    pub init: Scalar,
}

/// `target = value`, or `target = fold(target, value)` with a reduction. A reduction may have
/// an epilogue: once every point that folds into a target element has, the element becomes
/// the epilogue's value, in which [`Expr::Acc`] is the reduced value and every load's
/// subscripts use parallel loops only. A reduction with an epilogue may also keep the reduced
/// value itself: `keep` stores it, before the epilogue replaces it, into another tensor of the
/// target's type at the target's subscripts (a value both the epilogue's consumer and later
/// kernels read, such as a pre-activation the backward pass needs). A float sum of a product
/// folds each point with one fused multiply-add (`target = a * b + target`, rounded once), as
/// the CPEs' vector code does.
#[derive(Clone, Debug, PartialEq)]
pub struct Stmt {
    /// Affine subscripts only.
    pub target: Access,
    pub value: Expr,
    pub reduce: Option<Reduction>,
    pub epilogue: Option<Expr>,
    /// The reduced value's second home: the target's subscripts on another operand.
    pub keep: Option<Access>,
}

impl Stmt {
    /// Every distinct access of the value, then of the epilogue, in the order
    /// [`Expr::accesses`] lists them. Loads of the same operand at the same subscripts (an
    /// inlined value used twice, a window compared with its maximum at every offset) are one
    /// access: they read one element per point, so the schedule gives them one buffer and one
    /// transfer, and the engines find a load's buffer by the access it equals.
    pub fn read_accesses(&self) -> Vec<&Access> {
        let mut v: Vec<&Access> = Vec::new();
        let all = self.value.accesses().into_iter();
        for a in all.chain(self.epilogue.iter().flat_map(|e| e.accesses())) {
            if !v.contains(&a) {
                v.push(a);
            }
        }
        v
    }

    /// The buffers the read accesses need: [`Stmt::read_accesses`], with the loads of one
    /// operand whose subscripts differ only by constants (a pooling window's taps, a stencil's
    /// neighbours) merged into one *window*: the access at the smallest offsets, spanning
    /// ([`Access::spread`]) to the largest. Such loads read one box between them, so the
    /// schedule gives them one buffer and one transfer per box, and each load finds its
    /// element at a constant displacement ([`Access::displacement`]). A window forms only
    /// where its loads use at least half of its positions along every dimension; a load
    /// without siblings is its own window, as it is.
    pub fn windows(&self) -> Vec<Cow<'_, Access>> {
        let reads = self.read_accesses();
        let mut taken = vec![false; reads.len()];
        let mut out = Vec::new();
        for i in 0..reads.len() {
            if taken[i] {
                continue;
            }
            taken[i] = true;
            let mut siblings = vec![i];
            siblings.extend((i + 1..reads.len()).filter(|&j| !taken[j] && differ_by_constants(reads[i], reads[j])));
            if siblings.len() < 2 {
                out.push(Cow::Borrowed(reads[i]));
                continue;
            }
            let offsets = |d: usize| -> Vec<i64> {
                let mut v: Vec<i64> = siblings
                    .iter()
                    .map(|&j| match &reads[j].index[d] {
                        Index::Affine(x) => x.offset,
                        Index::Gathered { .. } => unreachable!("siblings have affine subscripts"),
                    })
                    .collect();
                v.sort_unstable();
                v.dedup();
                v
            };
            let dense = (0..reads[i].index.len()).all(|d| {
                let o = offsets(d);
                let span = (o[o.len() - 1] - o[0] + 1) as usize;
                2 * o.len() >= span
            });
            if !dense {
                out.push(Cow::Borrowed(reads[i]));
                continue;
            }
            let mut window = reads[i].clone();
            window.spread = vec![0; window.index.len()];
            for d in 0..window.index.len() {
                let o = offsets(d);
                if let Index::Affine(x) = &mut window.index[d] {
                    x.offset = o[0];
                }
                window.spread[d] = (o[o.len() - 1] - o[0]) as usize;
            }
            siblings.iter().for_each(|&j| taken[j] = true);
            out.push(Cow::Owned(window));
        }
        out
    }

    /// The loads of the value and the epilogue (not gathered positions), mutably, for passes
    /// and tests that rewrite subscripts.
    pub fn value_accesses_mut(&mut self) -> Vec<&mut Access> {
        fn walk<'e>(e: &'e mut Expr, out: &mut Vec<&'e mut Access>) {
            match e {
                Expr::Load(a) => out.push(a),
                Expr::Const(_) | Expr::Acc => {}
                Expr::Unary(_, a) | Expr::Cast(_, a) => walk(a, out),
                Expr::Binary(_, a, b) => {
                    walk(a, out);
                    walk(b, out);
                }
                Expr::Select(c, a, b) => {
                    walk(c, out);
                    walk(a, out);
                    walk(b, out);
                }
            }
        }
        let mut out = Vec::new();
        walk(&mut self.value, &mut out);
        if let Some(e) = &mut self.epilogue {
            walk(e, &mut out);
        }
        out
    }
}

/// One loop nest.
#[derive(Clone, Debug)]
pub struct Kernel {
    /// Unique within the program.
    pub name: String,
    /// The primitive ops it computes, joined by `+` in the order they are computed (one op
    /// unless producers were fused into it), and the model node its own op came from.
    pub op: String,
    pub origin: Option<String>,
    /// Graph nodes fused into the kernel besides its own: their values are computed inside
    /// its statement and never stored.
    pub fused: Vec<String>,
    pub loops: Vec<Loop>,
    /// Tensor of each operand slot; slot 0 is the target.
    pub operands: Vec<TensorId>,
    pub stmt: Stmt,
    pub schedule: Option<Schedule>,
}

/// Whether two footprints (see [`Access::footprint`]) share an element.
pub fn footprints_overlap(a: &[(i64, i64)], b: &[(i64, i64)]) -> bool {
    a.iter().zip(b).all(|(&(al, ah), &(bl, bh))| al <= bh && bl <= ah)
}

/// Elements in a footprint.
pub fn footprint_elements(f: &[(i64, i64)]) -> usize {
    f.iter().map(|&(lo, hi)| (hi - lo + 1).max(0) as usize).product()
}

impl Kernel {
    /// Whether the kernel's read `a` may read an element of the storage its target writes:
    /// `a` reads the target's storage, through a view of it or at subscripts whose footprint
    /// meets the target's.
    pub fn reads_target(&self, p: &Program, a: &Access) -> bool {
        let (t, target) = (self.operands[a.operand], self.operands[0]);
        if p.storage(t) != p.storage(target) {
            return false;
        }
        let extents = self.extents();
        let shape = &p.tensor(t).ty.shape;
        t != target
            || footprints_overlap(
                &a.footprint(&extents, shape),
                &self.stmt.target.footprint(&extents, shape),
            )
    }

    /// Whether writing the target's whole tile box writes every element of it, for tiles of
    /// `tiles[l]` points along each loop `l` (a CPE's part of a partition loop holds no more
    /// points than its tile), so the box need not be read first: in each target subscript at
    /// most one loop takes more than one point in a tile, with step ±1. A grouped
    /// convolution's output channel `34*g + m` is dense in tiles of one group.
    pub fn target_is_dense(&self, tiles: &[usize]) -> bool {
        self.stmt.target.index.iter().all(|i| match i {
            Index::Affine(x) => {
                let mut varying = x.terms.iter().filter(|t| tiles[t.0] > 1);
                varying.clone().count() <= 1 && varying.all(|t| t.1.abs() == 1)
            }
            Index::Gathered { .. } => false,
        })
    }

    /// The least main-memory traffic the kernel can have: the footprint of its target (and of
    /// its kept value) written once, and every tensor it reads read once over the smallest box
    /// holding all its reads' footprints (an overestimate when the reads leave holes in it).
    pub fn compulsory_bytes(&self, p: &Program) -> usize {
        let extents = self.extents();
        let bytes = |t: TensorId, f: &[(i64, i64)]| footprint_elements(f) * p.tensor(t).ty.dtype.size_bytes();
        let footprint = |a: &Access| a.footprint(&extents, &p.tensor(self.operands[a.operand]).ty.shape);
        let written: usize = [Some(&self.stmt.target), self.stmt.keep.as_ref()]
            .into_iter()
            .flatten()
            .map(|a| bytes(self.operands[a.operand], &footprint(a)))
            .sum();
        let mut read: Vec<(TensorId, Vec<(i64, i64)>)> = Vec::new();
        for a in self.stmt.read_accesses() {
            let (t, f) = (self.operands[a.operand], footprint(a));
            match read.iter_mut().find(|(u, _)| *u == t) {
                Some((_, b)) => {
                    for (d, &(lo, hi)) in b.iter_mut().zip(&f) {
                        *d = (d.0.min(lo), d.1.max(hi));
                    }
                }
                None => read.push((t, f)),
            }
        }
        written + read.iter().map(|(t, f)| bytes(*t, f)).sum::<usize>()
    }

    pub fn extents(&self) -> Vec<usize> {
        self.loops.iter().map(|l| l.extent).collect()
    }

    /// Points in the iteration domain.
    pub fn points(&self) -> usize {
        self.loops.iter().map(|l| l.extent).product()
    }
}
