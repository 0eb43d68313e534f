//! The row lane-wise vector code runs along (`swflow_codegen`'s lane-wise nests: elementwise
//! maps, pooling, reductions along other axes, epilogues), as code generation writes it and
//! as the estimate charges it.
//!
//! The lanes are the loop of the target's last subscript. When the loops of the subscripts
//! before it lay their points out one after the other in every buffer the nest touches, the
//! lanes run through them as well, as one row: a tile of 16 channels of 7 x 7 pixels is one
//! row of 784 elements rather than 112 rows of 7, too short for a vector of 8.

use crate::loops::{Access, Expr, Index, Kernel, LoopKind};

use super::blocking::extent_values;
use super::{accesses, window_of, Schedule};

/// Vectors of a lane-wise block (a fold or a map without register blocking), at most:
/// enough independent folds to cover the latency of a maximum's three dependent instructions
/// (compare, select, select) on SW26010's four lanes.
pub const LANEWISE_VECTORS: usize = 8;

/// The loops a lane-wise nest of kernel `k` under schedule `s` runs through as one row,
/// outermost first and ending with `lanes_loop` (the target's last subscript): the longest
/// run of parallel loops that are the target's last subscripts, each alone with coefficient
/// 1 and with tiles of known lengths ([`extent_values`]), such that every access the nest
/// touches (`touched`, positions in [`accesses`]; the target always) either holds none of
/// them, or holds them in its last subscripts the same way (and no window spreads along
/// them) while its buffer's box spans, along each of them but the first, exactly the tile
/// (the loop is not tiled, or is tiled outside the buffer's transfers). Then the row's
/// points are contiguous in every buffer holding them, at the offset of the row's first
/// point, and the points of the other loops stay put.
pub fn run(k: &Kernel, s: &Schedule, lanes_loop: usize, touched: &[usize]) -> Vec<usize> {
    let all = accesses(k);
    let target = &k.stmt.target.index;
    let mut run = vec![lanes_loop];
    for sub in target[..target.len().saturating_sub(1)].iter().rev() {
        let Some(l) = single(sub) else { break };
        if k.loops[l].kind != LoopKind::Parallel || run.contains(&l) || extent_values(k, s, l).is_none() {
            break;
        }
        let mut longer = vec![l];
        longer.extend(&run);
        let touches = |i: usize| i == 0 || touched.contains(&i);
        if !all
            .iter()
            .enumerate()
            .all(|(i, a)| !touches(i) || holds_run(a, &longer, s, i))
        {
            break;
        }
        run = longer;
    }
    run
}

/// Whether a vector of kernel `k`'s lane-wise code may run on past the end of a row of its
/// target into the elements after it (which later rows store again, or the buffers' room:
/// see [`super::keep_room`]): the target's subscripts but the last are constants or single
/// loops in nest order, so that the nest visits its rows in the order its buffer holds them,
/// and every access moves along the lanes loop (the target's last subscript) by one element
/// of its last subscript or not at all, so that a vector's lanes past the row stay within a
/// vector of it.
pub fn may_run_past_rows(k: &Kernel) -> bool {
    let target = &k.stmt.target.index;
    let Some(lanes_loop) = target.last().and_then(single) else {
        return false;
    };
    let mut last = None;
    for x in &target[..target.len() - 1] {
        let Index::Affine(x) = x else { return false };
        match x.terms[..] {
            [] => {}
            [(l, 1)] if last.is_none_or(|m| m < l) => last = Some(l),
            _ => return false,
        }
    }
    accesses(k).iter().all(|a| {
        let n = a.index.len();
        a.index.iter().enumerate().all(|(d, x)| {
            let Index::Affine(x) = x else { return false };
            let c: i64 = x.terms.iter().filter(|t| t.0 == lanes_loop).map(|t| t.1).sum();
            c == 0 || (c == 1 && d + 1 == n)
        })
    })
}

/// The positions in [`accesses`] of the windows holding the loads of `e`, an expression of
/// kernel `k`'s statement (its value or its epilogue).
pub fn reads(k: &Kernel, e: &Expr) -> Vec<usize> {
    let all = accesses(k);
    e.accesses()
        .into_iter()
        .filter_map(|a| window_of(&all, a).map(|w| w.0))
        .collect()
}

/// The lengths a row along the loops of `run` takes over every tile of every CPE, in
/// increasing order, or `None` when a loop's tiles have lengths not known before the code
/// runs (see [`extent_values`]).
pub fn row_lengths(k: &Kernel, s: &Schedule, run: &[usize]) -> Option<Vec<usize>> {
    let mut lengths = vec![1];
    for &l in run {
        let values = extent_values(k, s, l)?;
        lengths = lengths
            .iter()
            .flat_map(|&n| values.iter().map(move |&v| n * v))
            .collect();
        lengths.sort_unstable();
        lengths.dedup();
    }
    Some(lengths)
}

/// The loop of a subscript that is that loop alone, with coefficient 1 and no offset.
fn single(x: &Index) -> Option<usize> {
    match x {
        Index::Affine(x) if x.offset == 0 && x.terms.len() == 1 && x.terms[0].1 == 1 => Some(x.terms[0].0),
        _ => None,
    }
}

/// Whether access `a` (the `i`-th of [`accesses`]) holds none of the loops of `run`, or holds
/// them as its last subscripts, contiguously in its buffer.
fn holds_run(a: &Access, run: &[usize], s: &Schedule, i: usize) -> bool {
    let holds = |x: &Index, l: usize| match x {
        Index::Affine(x) => x.terms.iter().any(|t| t.0 == l),
        Index::Gathered { .. } => true,
    };
    if !a.index.iter().any(|x| run.iter().any(|&l| holds(x, l))) {
        return true;
    }
    let Some(before) = a.index.len().checked_sub(run.len()) else {
        return false;
    };
    let whole_tile = |l: usize| match (s.order.iter().position(|&o| o == l), s.buffers.get(i)) {
        (None, _) => true,
        (Some(at), Some(b)) => at < b.depth,
        (Some(_), None) => false,
    };
    a.index[..before].iter().all(|x| run.iter().all(|&l| !holds(x, l)))
        && run.iter().enumerate().all(|(j, &l)| {
            single(&a.index[before + j]) == Some(l) && a.spread(before + j) == 0 && (j == 0 || whole_tile(l))
        })
}
