//! Evaluation of a statement over a box of loop points, a column at a time.
//!
//! The box's innermost loops (up to [`COLUMN`] points) form a column; every access gets an
//! offset pattern for the column (cached, since every full tile of a kernel has the same
//! ones), and each point of the remaining outer loops only shifts a base offset. Values are
//! computed with the graph interpreter's elementwise functions, so both interpreters share one
//! definition of every scalar operation. Reductions fold values into their target element in
//! loop order. Multiply-accumulate and copy statements, which carry almost all the work of
//! real models, run directly on storage without intermediate columns.

use std::collections::HashMap;
use std::rc::Rc;

use swflow_frontend::interp::{columns, Num};
use swflow_frontend::ir::{BinaryOp, DType, Data, ReduceKind, UnaryOp};

use crate::loops::{Access, Expr, Index, Scalar};

/// Points per column (at least the innermost loop, whatever its extent).
const COLUMN: usize = 16384;

/// Where an access reads or writes, in some memory: the element offset of the box origin and
/// the offset step per loop of the kernel.
pub(crate) struct Place<'a> {
    pub data: &'a Data,
    pub base: isize,
    pub strides: Vec<isize>,
    /// Gathered subscripts: the place of the positions, the stride of that dimension, its
    /// extent.
    pub gathers: Vec<(Place<'a>, isize, usize)>,
}

/// Resolves an access to a place; called once per access per box.
pub(crate) trait Locate<'a> {
    fn place(&self, access: &Access) -> Result<Place<'a>, String>;
}

/// Offsets of a column's points relative to the column origin, with their extremes.
pub(crate) struct Pattern {
    offsets: Vec<isize>,
    min: isize,
    max: isize,
}

/// Column patterns already built, keyed by the steps and extents of the column loops.
#[derive(Default)]
pub(crate) struct PatternCache {
    map: HashMap<(Vec<isize>, Vec<usize>), Rc<Pattern>>,
}

impl PatternCache {
    /// The pattern of a place, or `None` when it does not move within the column.
    fn get(&mut self, strides: &[isize], col: &Column) -> Option<Rc<Pattern>> {
        let steps: Vec<isize> = col.loops.iter().map(|&l| strides[l]).collect();
        if steps.iter().all(|&s| s == 0) {
            return None;
        }
        let key = (steps, col.extents.clone());
        if let Some(p) = self.map.get(&key) {
            return Some(p.clone());
        }
        let mut offsets = vec![0isize];
        for (&step, &e) in key.0.iter().zip(&col.extents) {
            offsets = offsets
                .iter()
                .flat_map(|&p| (0..e as isize).map(move |i| p + i * step))
                .collect();
        }
        let (min, max) = (
            offsets.iter().copied().min().unwrap_or(0),
            offsets.iter().copied().max().unwrap_or(0),
        );
        let p = Rc::new(Pattern { offsets, min, max });
        self.map.insert(key, p.clone());
        Some(p)
    }
}

/// The loops that form the column, their extents and its length.
struct Column {
    loops: Vec<usize>,
    extents: Vec<usize>,
    len: usize,
}

/// A place with its column pattern.
struct Load<'a> {
    data: &'a Data,
    base: isize,
    strides: Vec<isize>,
    pattern: Option<Rc<Pattern>>,
    gathers: Vec<(Load<'a>, isize, usize)>,
}

impl<'a> Load<'a> {
    fn new(place: Place<'a>, col: &Column, cache: &mut PatternCache) -> Load<'a> {
        let pattern = cache.get(&place.strides, col);
        let gathers = place
            .gathers
            .into_iter()
            .map(|(p, stride, extent)| (Load::new(p, col, cache), stride, extent))
            .collect();
        Load {
            data: place.data,
            base: place.base,
            strides: place.strides,
            pattern,
            gathers,
        }
    }

    /// Base offset at an outer point.
    fn base_at(&self, point: &[usize]) -> isize {
        self.base + outer_offset(&self.strides, point)
    }

    /// Checks that every offset of the column from `base` lies in `0..len`.
    fn check(&self, base: isize) -> Result<(), String> {
        let (lo, hi) = self
            .pattern
            .as_ref()
            .map_or((base, base), |p| (base + p.min, base + p.max));
        let len = self.data.len() as isize;
        if lo < 0 || hi >= len {
            return Err(format!(
                "access at elements {lo}..={hi} outside its storage of {len} elements"
            ));
        }
        Ok(())
    }

    /// Offset of column point `j`.
    fn at(&self, base: isize, j: usize) -> usize {
        (match &self.pattern {
            Some(p) => base + p.offsets[j],
            None => base,
        }) as usize
    }

    fn values(&self, point: &[usize], col: &Column) -> Result<Data, String> {
        let base = self.base_at(point);
        if self.gathers.is_empty() {
            self.check(base)?;
            let n = if self.pattern.is_some() { col.len } else { 1 };
            return Ok(pick(self.data, (0..n).map(|j| self.at(base, j))));
        }
        let mut offsets: Vec<isize> = (0..col.len).map(|j| self.at(base, j) as isize).collect();
        for (positions, dim_stride, extent) in &self.gathers {
            let Data::I64(pos) = positions.values(point, col)? else {
                unreachable!("the verifier requires i64 positions")
            };
            for (j, o) in offsets.iter_mut().enumerate() {
                let p = pos[j.min(pos.len() - 1)];
                let q = if p < 0 { p + *extent as i64 } else { p };
                if q < 0 || q >= *extent as i64 {
                    return Err(format!("gathered index {p} out of range for extent {extent}"));
                }
                *o += q as isize * dim_stride;
            }
        }
        let len = self.data.len() as isize;
        if let Some(&bad) = offsets.iter().find(|&&o| o < 0 || o >= len) {
            return Err(format!("access at element {bad} outside its storage of {len} elements"));
        }
        Ok(pick(self.data, offsets.into_iter().map(|o| o as usize)))
    }
}

fn pick(data: &Data, offsets: impl Iterator<Item = usize>) -> Data {
    match data {
        Data::F32(v) => Data::F32(offsets.map(|o| v[o]).collect()),
        Data::F64(v) => Data::F64(offsets.map(|o| v[o]).collect()),
        Data::I64(v) => Data::I64(offsets.map(|o| v[o]).collect()),
        Data::Bool(v) => Data::Bool(offsets.map(|o| v[o]).collect()),
    }
}

pub(crate) fn scalar_data(s: Scalar) -> Data {
    match s {
        Scalar::F32(v) => Data::F32(vec![v]),
        Scalar::F64(v) => Data::F64(vec![v]),
        Scalar::I64(v) => Data::I64(vec![v]),
        Scalar::Bool(v) => Data::Bool(vec![v]),
    }
}

fn outer_offset(strides: &[isize], point: &[usize]) -> isize {
    strides.iter().zip(point).map(|(&s, &p)| s * p as isize).sum()
}

enum Node<'a> {
    Load(Load<'a>),
    Const(Data),
    Unary(UnaryOp, Box<Node<'a>>),
    Binary(BinaryOp, Box<Node<'a>>, Box<Node<'a>>),
    Select(Box<Node<'a>>, Box<Node<'a>>, Box<Node<'a>>),
    Cast(DType, Box<Node<'a>>),
    /// The target column's current values.
    Acc,
}

impl Node<'_> {
    /// The column's values; `acc` is the target column, for [`Node::Acc`].
    fn eval(&self, point: &[usize], col: &Column, acc: &Data) -> Result<Data, String> {
        let go = |n: &Node| n.eval(point, col, acc);
        Ok(match self {
            Node::Load(l) => l.values(point, col)?,
            Node::Const(d) => d.clone(),
            Node::Acc => acc.clone(),
            Node::Unary(u, a) => columns::unary(*u, &go(a)?),
            Node::Binary(b, x, y) => columns::binary(*b, &go(x)?, &go(y)?)?,
            Node::Select(c, a, b) => columns::select(&go(c)?, &go(a)?, &go(b)?),
            Node::Cast(d, a) => columns::cast(&go(a)?, *d),
        })
    }
}

fn build<'a>(e: &Expr, loc: &impl Locate<'a>, col: &Column, cache: &mut PatternCache) -> Result<Node<'a>, String> {
    let sub = |e: &Expr, cache: &mut PatternCache| build(e, loc, col, cache).map(Box::new);
    Ok(match e {
        Expr::Load(a) => Node::Load(Load::new(loc.place(a)?, col, cache)),
        Expr::Const(s) => Node::Const(scalar_data(*s)),
        Expr::Acc => Node::Acc,
        Expr::Unary(u, a) => Node::Unary(*u, sub(a, cache)?),
        Expr::Binary(b, x, y) => Node::Binary(*b, sub(x, cache)?, sub(y, cache)?),
        Expr::Select(c, a, b) => Node::Select(sub(c, cache)?, sub(a, cache)?, sub(b, cache)?),
        Expr::Cast(d, a) => Node::Cast(*d, sub(a, cache)?),
    })
}

/// The target of a box: storage, origin offset and per-loop steps.
pub(crate) struct Target<'t> {
    pub data: &'t mut Data,
    pub base: isize,
    pub strides: Vec<isize>,
}

impl Target<'_> {
    /// The same target, borrowed for one more evaluation.
    pub fn reborrow(&mut self) -> Target<'_> {
        Target {
            data: &mut *self.data,
            base: self.base,
            strides: self.strides.clone(),
        }
    }
}

/// Evaluates `value` (an expression of kernel `k`'s statement) at every point of the box
/// `0 <= loop < extents[loop]` (in loop order) with accesses resolved by `loc`, writing it
/// into `target`, or folding it with `kind`. Reduction targets must already hold their
/// initial or partial values; [`Expr::Acc`] reads the target element's current value.
pub(crate) fn eval_box<'a>(
    value: &Expr,
    kind: Option<ReduceKind>,
    extents: &[usize],
    loc: &impl Locate<'a>,
    target: Target<'_>,
    cache: &mut PatternCache,
) -> Result<(), String> {
    if extents.contains(&0) {
        return Ok(());
    }
    // Column loops: innermost ones while the product stays within COLUMN.
    let mut loops = Vec::new();
    let mut len = 1;
    for l in (0..extents.len()).rev() {
        if loops.is_empty() || len * extents[l] <= COLUMN {
            len *= extents[l];
            loops.insert(0, l);
        } else {
            break;
        }
    }
    let col = Column {
        extents: loops.iter().map(|&l| extents[l]).collect(),
        loops,
        len,
    };
    let outer: Vec<usize> = (0..extents.len()).filter(|l| !col.loops.contains(l)).collect();
    let reads_acc = {
        let mut found = false;
        value.visit(&mut |e| found |= matches!(e, Expr::Acc));
        found
    };
    // A sum of a product folds each point with one fused multiply-add (see `Stmt`).
    let fused = kind == Some(ReduceKind::Sum)
        && !reads_acc
        && matches!(value, Expr::Binary(BinaryOp::Mul, ..))
        && matches!(target.data, Data::F32(_) | Data::F64(_));
    let value = build(value, loc, &col, cache)?;
    let store = Load {
        data: &Data::F32(Vec::new()),
        base: target.base,
        strides: target.strides.clone(),
        pattern: cache.get(&target.strides, &col),
        gathers: Vec::new(),
    };
    let fast = Fast::recognise(&value, kind);
    let no_acc = Data::F32(Vec::new());
    let outer_points: usize = outer.iter().map(|&l| extents[l]).product();
    let mut point = vec![0usize; extents.len()];
    for _ in 0..outer_points {
        let tbase = store.base_at(&point);
        let (lo, hi) = store
            .pattern
            .as_ref()
            .map_or((tbase, tbase), |p| (tbase + p.min, tbase + p.max));
        if lo < 0 || hi >= target.data.len() as isize {
            return Err(format!(
                "write at elements {lo}..={hi} outside its storage of {} elements",
                target.data.len()
            ));
        }
        match &fast {
            Some(f) => f.run(target.data, &store, tbase, &point, col.len)?,
            None if fused => {
                let Node::Binary(_, x, y) = &value else {
                    unreachable!("a fused fold's value is a product")
                };
                let (x, y) = (x.eval(&point, &col, &no_acc)?, y.eval(&point, &col, &no_acc)?);
                fold_fused(target.data, &store, tbase, col.len, &x, &y)?;
            }
            None => {
                let column;
                let acc = if reads_acc {
                    let n = if store.pattern.is_some() { col.len } else { 1 };
                    column = pick(target.data, (0..n).map(|j| store.at(tbase, j)));
                    &column
                } else {
                    &no_acc
                };
                let v = value.eval(&point, &col, acc)?;
                fold_into(kind, target.data, &store, tbase, col.len, &v)?;
            }
        }
        for &l in outer.iter().rev() {
            point[l] += 1;
            if point[l] < extents[l] {
                break;
            }
            point[l] = 0;
        }
    }
    Ok(())
}

/// Adds the products of columns `x` and `y` (length 1 repeats) to the target's column points,
/// each rounded once (a fused multiply-add), in order.
fn fold_fused(t: &mut Data, store: &Load, tbase: isize, n: usize, x: &Data, y: &Data) -> Result<(), String> {
    macro_rules! fma {
        ($t:expr, $x:expr, $y:expr) => {{
            for j in 0..n {
                let slot = &mut $t[store.at(tbase, j)];
                *slot = $x[j.min($x.len() - 1)].mul_add($y[j.min($y.len() - 1)], *slot);
            }
        }};
    }
    match (t, x, y) {
        (Data::F32(t), Data::F32(x), Data::F32(y)) => fma!(t, x, y),
        (Data::F64(t), Data::F64(x), Data::F64(y)) => fma!(t, x, y),
        _ => return Err("value and target types differ".into()),
    }
    Ok(())
}

/// Folds column `v` (length 1 repeats) into the target's column points, in order.
fn fold_into(
    kind: Option<ReduceKind>,
    t: &mut Data,
    store: &Load,
    tbase: isize,
    n: usize,
    v: &Data,
) -> Result<(), String> {
    fn fold<T: Num>(kind: Option<ReduceKind>, t: &mut [T], store: &Load, tbase: isize, n: usize, v: &[T]) {
        for j in 0..n {
            let x = v[j.min(v.len() - 1)];
            let slot = &mut t[store.at(tbase, j)];
            *slot = match kind {
                None => x,
                Some(ReduceKind::Sum) => slot.add(x),
                Some(ReduceKind::Max) => slot.max(x),
                Some(ReduceKind::Min) => slot.min(x),
                Some(ReduceKind::Prod) => slot.mul(x),
            };
        }
    }
    match (t, v) {
        (Data::F32(t), Data::F32(v)) => fold(kind, t, store, tbase, n, v),
        (Data::F64(t), Data::F64(v)) => fold(kind, t, store, tbase, n, v),
        (Data::I64(t), Data::I64(v)) => fold(kind, t, store, tbase, n, v),
        (Data::Bool(t), Data::Bool(v)) if kind.is_none() => {
            for j in 0..n {
                t[store.at(tbase, j)] = v[j.min(v.len() - 1)];
            }
        }
        _ => return Err("value and target types differ".into()),
    }
    Ok(())
}

/// Statement shapes evaluated directly on storage.
enum Fast<'n, 'a> {
    /// `target sum= a * b` on f32 or f64, one fused multiply-add a point.
    Mac(&'n Load<'a>, &'n Load<'a>),
    /// `target = a`.
    Copy(&'n Load<'a>),
}

impl<'n, 'a> Fast<'n, 'a> {
    fn recognise(value: &'n Node<'a>, kind: Option<ReduceKind>) -> Option<Fast<'n, 'a>> {
        let plain = |n: &'n Node<'a>| match n {
            Node::Load(l) if l.gathers.is_empty() => Some(l),
            _ => None,
        };
        match (value, kind) {
            (Node::Binary(BinaryOp::Mul, x, y), Some(ReduceKind::Sum)) => {
                let (a, b) = (plain(x)?, plain(y)?);
                matches!(
                    (a.data, b.data),
                    (Data::F32(_), Data::F32(_)) | (Data::F64(_), Data::F64(_))
                )
                .then_some(Fast::Mac(a, b))
            }
            (n, None) => plain(n).map(Fast::Copy),
            _ => None,
        }
    }

    fn run(&self, t: &mut Data, store: &Load, tbase: isize, point: &[usize], n: usize) -> Result<(), String> {
        macro_rules! mac {
            ($t:expr, $x:expr, $y:expr, $a:expr, $b:expr) => {{
                let (t, x, y, a, b) = ($t, $x, $y, $a, $b);
                let (ba, bb) = (a.base_at(point), b.base_at(point));
                a.check(ba)?;
                b.check(bb)?;
                if store.pattern.is_none() {
                    let slot = tbase as usize;
                    let mut acc = t[slot];
                    for j in 0..n {
                        acc = x[a.at(ba, j)].mul_add(y[b.at(bb, j)], acc);
                    }
                    t[slot] = acc;
                } else {
                    for j in 0..n {
                        let slot = &mut t[store.at(tbase, j)];
                        *slot = x[a.at(ba, j)].mul_add(y[b.at(bb, j)], *slot);
                    }
                }
            }};
        }
        match self {
            Fast::Mac(a, b) => match (t, a.data, b.data) {
                (Data::F32(t), Data::F32(x), Data::F32(y)) => mac!(t, x, y, a, b),
                (Data::F64(t), Data::F64(x), Data::F64(y)) => mac!(t, x, y, a, b),
                _ => return Err("value and target types differ".into()),
            },
            Fast::Copy(a) => {
                let ba = a.base_at(point);
                a.check(ba)?;
                macro_rules! copy {
                    ($t:expr, $x:expr) => {{
                        for j in 0..n {
                            $t[store.at(tbase, j)] = $x[a.at(ba, j)];
                        }
                    }};
                }
                match (t, a.data) {
                    (Data::F32(t), Data::F32(x)) => copy!(t, x),
                    (Data::F64(t), Data::F64(x)) => copy!(t, x),
                    (Data::I64(t), Data::I64(x)) => copy!(t, x),
                    (Data::Bool(t), Data::Bool(x)) => copy!(t, x),
                    _ => return Err("value and target types differ".into()),
                }
            }
        }
        Ok(())
    }
}

/// Places of a statement's accesses in row-major tensors, for a box at `origin` (values of
/// the kernel's loops at the box's first point).
pub(crate) fn affine_place<'a>(
    a: &Access,
    data: &'a Data,
    shape: &[usize],
    origin: &[usize],
    n_loops: usize,
    inner: &dyn Fn(&Access) -> Result<Place<'a>, String>,
) -> Result<Place<'a>, String> {
    let row = swflow_frontend::ir::strides(shape);
    let mut base = 0isize;
    let mut strides = vec![0isize; n_loops];
    let mut gathers = Vec::new();
    for (d, i) in a.index.iter().enumerate() {
        match i {
            Index::Affine(x) => {
                base += x.eval(origin) as isize * row[d] as isize;
                for &(l, c) in &x.terms {
                    strides[l] += c as isize * row[d] as isize;
                }
            }
            Index::Gathered { access, extent } => gathers.push((inner(access)?, row[d] as isize, *extent)),
        }
    }
    Ok(Place {
        data,
        base,
        strides,
        gathers,
    })
}
