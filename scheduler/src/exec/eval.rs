//! Evaluation of a statement over a box of loop points, a column at a time.
//!
//! The box's innermost loops (up to [`COLUMN`] points) form a column; every access gets an
//! offset pattern for the column once, and each point of the remaining outer loops only
//! shifts a base offset. Values are computed with the graph interpreter's elementwise
//! functions, so both interpreters share one definition of every scalar operation.
//! Reductions fold values into their target element in loop order.

use swflow_frontend::interp::columns;
use swflow_frontend::ir::{DType, Data, ReduceKind};

use crate::loops::{Access, Expr, Index, Kernel, Scalar};

/// Points per column (at least the innermost loop, whatever its extent).
const COLUMN: usize = 16384;

/// Where an access reads or writes, in some memory: the element offset of the box origin,
/// the offset step per loop of the kernel, and the valid length of the storage.
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

enum Node<'a> {
    Load(Place<'a>, Vec<isize>),
    Const(Data),
    Unary(swflow_frontend::ir::UnaryOp, Box<Node<'a>>),
    Binary(swflow_frontend::ir::BinaryOp, Box<Node<'a>>, Box<Node<'a>>),
    Select(Box<Node<'a>>, Box<Node<'a>>, Box<Node<'a>>),
    Cast(DType, Box<Node<'a>>),
}

pub(crate) fn scalar_data(s: Scalar) -> Data {
    match s {
        Scalar::F32(v) => Data::F32(vec![v]),
        Scalar::F64(v) => Data::F64(vec![v]),
        Scalar::I64(v) => Data::I64(vec![v]),
        Scalar::Bool(v) => Data::Bool(vec![v]),
    }
}

/// Offsets of the column's points relative to the column origin for a place, or `None` when
/// the place does not move within the column.
fn pattern(strides: &[isize], col_loops: &[usize], col_extents: &[usize]) -> Option<Vec<isize>> {
    if col_loops.iter().all(|&l| strides[l] == 0) {
        return None;
    }
    let mut pat = vec![0isize];
    for (&l, &e) in col_loops.iter().zip(col_extents) {
        let step = strides[l];
        pat = pat
            .iter()
            .flat_map(|&p| (0..e as isize).map(move |i| p + i * step))
            .collect();
    }
    Some(pat)
}

fn pick(data: &Data, offsets: &[isize]) -> Result<Data, String> {
    let len = data.len() as isize;
    if let Some(&bad) = offsets.iter().find(|&&o| o < 0 || o >= len) {
        return Err(format!(
            "access at element {bad} outside its storage of {len} elements"
        ));
    }
    Ok(match data {
        Data::F32(v) => Data::F32(offsets.iter().map(|&o| v[o as usize]).collect()),
        Data::F64(v) => Data::F64(offsets.iter().map(|&o| v[o as usize]).collect()),
        Data::I64(v) => Data::I64(offsets.iter().map(|&o| v[o as usize]).collect()),
        Data::Bool(v) => Data::Bool(offsets.iter().map(|&o| v[o as usize]).collect()),
    })
}

impl Node<'_> {
    fn eval(&self, point: &[usize], col: &[usize], ext: &[usize]) -> Result<Data, String> {
        Ok(match self {
            Node::Load(place, pat) => {
                let base = place.base + outer_offset(&place.strides, point);
                let mut offsets: Vec<isize> = if pat.is_empty() {
                    vec![base]
                } else {
                    pat.iter().map(|&p| base + p).collect()
                };
                for (positions, dim_stride, extent) in &place.gathers {
                    let ppat = pattern(&positions.strides, col, ext).unwrap_or_default();
                    let pos = Node::Load(
                        Place {
                            data: positions.data,
                            base: positions.base,
                            strides: positions.strides.clone(),
                            gathers: Vec::new(),
                        },
                        ppat,
                    )
                    .eval(point, col, ext)?;
                    let Data::I64(pos) = pos else {
                        unreachable!("the verifier requires i64 positions")
                    };
                    if offsets.len() == 1 && pos.len() > 1 {
                        offsets = vec![offsets[0]; pos.len()];
                    }
                    for (j, o) in offsets.iter_mut().enumerate() {
                        let p = pos[j.min(pos.len() - 1)];
                        let q = if p < 0 { p + *extent as i64 } else { p };
                        if q < 0 || q >= *extent as i64 {
                            return Err(format!(
                                "gathered index {p} out of range for extent {extent}"
                            ));
                        }
                        *o += q as isize * dim_stride;
                    }
                }
                pick(place.data, &offsets)?
            }
            Node::Const(d) => d.clone(),
            Node::Unary(u, a) => columns::unary(*u, &a.eval(point, col, ext)?),
            Node::Binary(b, x, y) => {
                columns::binary(*b, &x.eval(point, col, ext)?, &y.eval(point, col, ext)?)?
            }
            Node::Select(c, a, b) => columns::select(
                &c.eval(point, col, ext)?,
                &a.eval(point, col, ext)?,
                &b.eval(point, col, ext)?,
            ),
            Node::Cast(d, a) => columns::cast(&a.eval(point, col, ext)?, *d),
        })
    }
}

fn outer_offset(strides: &[isize], point: &[usize]) -> isize {
    strides
        .iter()
        .zip(point)
        .map(|(&s, &p)| s * p as isize)
        .sum()
}

fn build<'a>(
    e: &Expr,
    loc: &impl Locate<'a>,
    col: &[usize],
    ext: &[usize],
) -> Result<Node<'a>, String> {
    Ok(match e {
        Expr::Load(a) => {
            let place = loc.place(a)?;
            let pat = pattern(&place.strides, col, ext).unwrap_or_default();
            Node::Load(place, pat)
        }
        Expr::Const(s) => Node::Const(scalar_data(*s)),
        Expr::Unary(u, a) => Node::Unary(*u, Box::new(build(a, loc, col, ext)?)),
        Expr::Binary(b, x, y) => Node::Binary(
            *b,
            Box::new(build(x, loc, col, ext)?),
            Box::new(build(y, loc, col, ext)?),
        ),
        Expr::Select(c, a, b) => Node::Select(
            Box::new(build(c, loc, col, ext)?),
            Box::new(build(a, loc, col, ext)?),
            Box::new(build(b, loc, col, ext)?),
        ),
        Expr::Cast(d, a) => Node::Cast(*d, Box::new(build(a, loc, col, ext)?)),
    })
}

/// Folds `v` into `t` at `offsets` in order (`v` of length 1 repeats).
fn fold_into(
    kind: Option<ReduceKind>,
    t: &mut Data,
    offsets: &[isize],
    v: &Data,
) -> Result<(), String> {
    let len = t.len() as isize;
    if let Some(&bad) = offsets.iter().find(|&&o| o < 0 || o >= len) {
        return Err(format!(
            "write at element {bad} outside its storage of {len} elements"
        ));
    }
    macro_rules! go {
        ($t:expr, $v:expr, $sum:expr, $max:expr, $min:expr) => {{
            let (t, v) = ($t, $v);
            for (j, &o) in offsets.iter().enumerate() {
                let x = v[j.min(v.len() - 1)];
                let slot = &mut t[o as usize];
                *slot = match kind {
                    None => x,
                    Some(ReduceKind::Sum) => $sum(*slot, x),
                    Some(ReduceKind::Max) => $max(*slot, x),
                    Some(ReduceKind::Min) => $min(*slot, x),
                };
            }
        }};
    }
    fn fmax<F: PartialOrd + Copy>(a: F, b: F, nan: fn(F) -> bool) -> F {
        if nan(a) {
            a
        } else if nan(b) || b > a {
            b
        } else {
            a
        }
    }
    fn fmin<F: PartialOrd + Copy>(a: F, b: F, nan: fn(F) -> bool) -> F {
        if nan(a) {
            a
        } else if nan(b) || b < a {
            b
        } else {
            a
        }
    }
    match (t, v) {
        (Data::F32(t), Data::F32(v)) => go!(
            t,
            v,
            |a: f32, b| a + b,
            |a, b| fmax(a, b, f32::is_nan),
            |a, b| fmin(a, b, f32::is_nan)
        ),
        (Data::F64(t), Data::F64(v)) => go!(
            t,
            v,
            |a: f64, b| a + b,
            |a, b| fmax(a, b, f64::is_nan),
            |a, b| fmin(a, b, f64::is_nan)
        ),
        (Data::I64(t), Data::I64(v)) => go!(
            t,
            v,
            i64::wrapping_add,
            |a: i64, b| a.max(b),
            |a: i64, b| a.min(b)
        ),
        (Data::Bool(t), Data::Bool(v)) if kind.is_none() => go!(t, v, |a, _| a, |a, _| a, |a, _| a),
        _ => return Err("value and target types differ".into()),
    }
    Ok(())
}

/// The target of a box: storage, origin offset and per-loop steps.
pub(crate) struct Target<'t> {
    pub data: &'t mut Data,
    pub base: isize,
    pub strides: Vec<isize>,
}

/// Evaluates `k`'s statement at every point of the box `0 <= loop < extents[loop]` (in loop
/// order) with accesses resolved by `loc`, writing or folding into `target`. Reduction
/// targets must already hold their initial or partial values.
pub(crate) fn eval_box<'a>(
    k: &Kernel,
    extents: &[usize],
    loc: &impl Locate<'a>,
    target: Target<'_>,
) -> Result<(), String> {
    if extents.contains(&0) {
        return Ok(());
    }
    // Column loops: innermost ones while the product stays within COLUMN.
    let mut col = Vec::new();
    let mut n = 1;
    for l in (0..extents.len()).rev() {
        if col.is_empty() || n * extents[l] <= COLUMN {
            n *= extents[l];
            col.insert(0, l);
        } else {
            break;
        }
    }
    let col_ext: Vec<usize> = col.iter().map(|&l| extents[l]).collect();
    let outer: Vec<usize> = (0..extents.len()).filter(|l| !col.contains(l)).collect();
    let value = build(&k.stmt.value, loc, &col, &col_ext)?;
    let tpat = pattern(&target.strides, &col, &col_ext).unwrap_or_else(|| vec![0]);
    let kind = k.stmt.reduce.map(|r| r.kind);
    let mut point = vec![0usize; extents.len()];
    let outer_points: usize = outer.iter().map(|&l| extents[l]).product();
    if let Some(fast) = Fast::recognise(&value, kind) {
        for _ in 0..outer_points {
            let tbase = target.base + outer_offset(&target.strides, &point);
            fast.run(target.data, tbase, &tpat, n, &point)?;
            advance(&mut point, &outer, extents);
        }
        return Ok(());
    }
    for _ in 0..outer_points {
        let v = value.eval(&point, &col, &col_ext)?;
        let tbase = target.base + outer_offset(&target.strides, &point);
        let offsets: Vec<isize> = if tpat.len() == 1 && n > 1 {
            vec![tbase; n]
        } else {
            tpat.iter().map(|&p| tbase + p).collect()
        };
        let v = if v.len() == 1 && n > 1 {
            broadcast(&v, n)
        } else {
            v
        };
        fold_into(kind, target.data, &offsets, &v)?;
        advance(&mut point, &outer, extents);
    }
    Ok(())
}

/// Steps the outer loops of a box to the next point.
fn advance(point: &mut [usize], outer: &[usize], extents: &[usize]) {
    for &l in outer.iter().rev() {
        point[l] += 1;
        if point[l] < extents[l] {
            break;
        }
        point[l] = 0;
    }
}

/// Statement shapes evaluated directly on storage, without intermediate columns: they cover
/// almost all the work of real models (multiply-accumulate, copies).
enum Fast<'n, 'a> {
    /// `target sum= a * b` on f32 or f64.
    Mac(&'n Place<'a>, &'n [isize], &'n Place<'a>, &'n [isize]),
    /// `target = a`.
    Copy(&'n Place<'a>, &'n [isize]),
}

impl<'n, 'a> Fast<'n, 'a> {
    fn recognise(value: &'n Node<'a>, kind: Option<ReduceKind>) -> Option<Fast<'n, 'a>> {
        let plain = |n: &'n Node<'a>| match n {
            Node::Load(p, pat) if p.gathers.is_empty() => Some((p, pat.as_slice())),
            _ => None,
        };
        match (value, kind) {
            (Node::Binary(swflow_frontend::ir::BinaryOp::Mul, x, y), Some(ReduceKind::Sum)) => {
                let ((a, pa), (b, pb)) = (plain(x)?, plain(y)?);
                matches!(
                    (a.data, b.data),
                    (Data::F32(_), Data::F32(_)) | (Data::F64(_), Data::F64(_))
                )
                .then_some(Fast::Mac(a, pa, b, pb))
            }
            (n, None) => plain(n).map(|(a, pa)| Fast::Copy(a, pa)),
            _ => None,
        }
    }

    fn run(
        &self,
        t: &mut Data,
        tbase: isize,
        tpat: &[isize],
        n: usize,
        point: &[usize],
    ) -> Result<(), String> {
        // Offsets of point j of the column; an empty pattern means the place does not move.
        fn at(base: isize, pat: &[isize], j: usize) -> isize {
            if pat.is_empty() {
                base
            } else {
                base + pat[j]
            }
        }
        fn check(len: usize, base: isize, pat: &[isize], n: usize) -> Result<(), String> {
            let (lo, hi) = if pat.is_empty() {
                (base, base)
            } else {
                (
                    base + pat.iter().min().copied().unwrap_or(0),
                    base + pat.iter().max().copied().unwrap_or(0),
                )
            };
            if lo < 0 || hi >= len as isize || (n > 1 && pat.len() > 1 && pat.len() != n) {
                return Err(format!(
                    "access at elements {lo}..={hi} outside its storage of {len} elements"
                ));
            }
            Ok(())
        }
        let tpat: &[isize] = if tpat.len() == 1 && n > 1 { &[] } else { tpat };
        check(t.len(), tbase, tpat, n)?;
        macro_rules! mac {
            ($t:expr, $a:expr, $b:expr, $ba:expr, $pa:expr, $bb:expr, $pb:expr) => {{
                let (t, a, b) = ($t, $a, $b);
                check(a.len(), $ba, $pa, n)?;
                check(b.len(), $bb, $pb, n)?;
                if tpat.is_empty() {
                    let mut acc = t[tbase as usize];
                    for j in 0..n {
                        acc += a[at($ba, $pa, j) as usize] * b[at($bb, $pb, j) as usize];
                    }
                    t[tbase as usize] = acc;
                } else {
                    for j in 0..n {
                        t[at(tbase, tpat, j) as usize] +=
                            a[at($ba, $pa, j) as usize] * b[at($bb, $pb, j) as usize];
                    }
                }
            }};
        }
        match self {
            Fast::Mac(a, pa, b, pb) => {
                let (ba, bb) = (
                    a.base + outer_offset(&a.strides, point),
                    b.base + outer_offset(&b.strides, point),
                );
                match (t, a.data, b.data) {
                    (Data::F32(t), Data::F32(x), Data::F32(y)) => mac!(t, x, y, ba, pa, bb, pb),
                    (Data::F64(t), Data::F64(x), Data::F64(y)) => mac!(t, x, y, ba, pa, bb, pb),
                    _ => return Err("value and target types differ".into()),
                }
            }
            Fast::Copy(a, pa) => {
                let ba = a.base + outer_offset(&a.strides, point);
                check(a.data.len(), ba, pa, n)?;
                macro_rules! copy {
                    ($t:expr, $x:expr) => {{
                        for j in 0..n {
                            $t[at(tbase, tpat, j) as usize] = $x[at(ba, pa, j) as usize];
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

fn broadcast(v: &Data, n: usize) -> Data {
    match v {
        Data::F32(x) => Data::F32(vec![x[0]; n]),
        Data::F64(x) => Data::F64(vec![x[0]; n]),
        Data::I64(x) => Data::I64(vec![x[0]; n]),
        Data::Bool(x) => Data::Bool(vec![x[0]; n]),
    }
}

/// Places of a statement's accesses in row-major tensors, for a box at `origin` (values of
/// the kernel's loops at the box's first point): used by the reference executor and for
/// main-memory addresses.
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
            Index::Gathered { access, extent } => {
                gathers.push((inner(access)?, row[d] as isize, *extent))
            }
        }
    }
    Ok(Place {
        data,
        base,
        strides,
        gathers,
    })
}
