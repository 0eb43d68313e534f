//! Loop reordering (after swTVM's Algorithm 2): the order of the tile loops that needs the
//! fewest DMA transfers.
//!
//! Constraints:
//! 1. the partition loops stay outermost (they are not reordered);
//! 2. within-tile loops stay innermost, in the kernel's original order;
//! 3. a split loop's tile index encloses its within-tile index;
//! 4. only loops with more than one tile are ordered.
//!
//! An access's transfers sit just inside the deepest tile loop its subscripts use, so they
//! happen once per iteration of the loops enclosing that depth. A target whose tile is left
//! while a reduction loop outside it is still running is written back and later read again
//! (its first visit starts from the reduction's initial value instead). Ties go to fewer
//! bytes, then to the original loop order.

use crate::loops::{Kernel, LoopKind, Program};

use super::sizing::{box_dims, is_direct};

/// DMA traffic of one order, per partition point.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Traffic {
    pub transfers: usize,
    pub bytes: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Choice {
    pub order: Vec<usize>,
    pub traffic: Traffic,
    /// Every order considered, with its traffic.
    pub candidates: Vec<(Vec<usize>, Traffic)>,
}

/// Transfers of one buffered access per partition segment under an order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AccessTraffic {
    /// Index in [`super::accesses`].
    pub access: usize,
    pub gets: usize,
    pub puts: usize,
    /// Bytes of its buffer's box (the largest tile's).
    pub box_bytes: usize,
}

/// The transfers of every buffered access for `order` (accesses served directly have none).
pub fn access_traffic(
    k: &Kernel,
    p: &Program,
    tiles: &[usize],
    ranges: &[usize],
    order: &[usize],
) -> Vec<AccessTraffic> {
    let count = |l: usize| ranges[l].div_ceil(tiles[l]);
    let mut out = Vec::new();
    for (i, a) in super::accesses(k).iter().enumerate() {
        let ty = &p.tensor(k.operands[a.operand]).ty;
        let dims = box_dims(k, p, i, a, tiles);
        if is_direct(a, dims.as_deref(), &ty.shape) {
            continue;
        }
        let box_bytes = dims.map_or(0, |d| d.iter().product::<usize>()) * ty.dtype.size_bytes();
        let depth = super::dma::depth(a, order);
        let visits: usize = order[..depth].iter().map(|&l| count(l)).product();
        // Targets are written back on every visit, and read first when the kernel writes
        // their box only in part or a revisited reduction tile holds partial sums (see
        // `exec::walk::target_read_first`).
        // The kept reduced value is written once per box, when its reduction is complete.
        let reductions: usize = order[..depth]
            .iter()
            .filter(|&&l| k.loops[l].kind == LoopKind::Reduce)
            .map(|&l| count(l))
            .product();
        let (gets, puts) = if super::keep_index(k) == Some(i) {
            (0, visits / reductions)
        } else if i == 0 {
            let reads = match (k.target_is_dense(tiles), k.stmt.reduce.is_some()) {
                (false, _) => visits,
                (true, true) => visits - visits / reductions,
                (true, false) => 0,
            };
            (reads, visits)
        } else {
            (visits, 0)
        };
        out.push(AccessTraffic {
            access: i,
            gets,
            puts,
            box_bytes,
        });
    }
    out
}

/// DMA transfers (gets and puts) and bytes for `order`.
pub fn traffic(k: &Kernel, p: &Program, tiles: &[usize], ranges: &[usize], order: &[usize]) -> Traffic {
    let mut t = Traffic { transfers: 0, bytes: 0 };
    for a in access_traffic(k, p, tiles, ranges, order) {
        t.transfers += a.gets + a.puts;
        t.bytes += (a.gets + a.puts) * a.box_bytes;
    }
    t
}

/// Visits every permutation of `items` (Heap's algorithm).
fn permutations(items: &mut Vec<usize>, k: usize, f: &mut impl FnMut(&[usize])) {
    if k <= 1 {
        f(items);
        return;
    }
    for i in 0..k {
        permutations(items, k - 1, f);
        let j = if k % 2 == 0 { i } else { 0 };
        items.swap(j, k - 1);
    }
}

/// Loops this many or fewer are ordered exhaustively; more are placed greedily, outermost
/// first.
const EXHAUSTIVE: usize = 6;

/// `ranges[l]` is how many values of loop `l` one CPE walks in one go (see
/// [`super::partition::Partition::range`]).
pub fn best_order(k: &Kernel, p: &Program, tiles: &[usize], ranges: &[usize]) -> Choice {
    let outer: Vec<usize> = (0..k.loops.len()).filter(|&l| ranges[l] > tiles[l]).collect();
    let key = |o: &[usize], t: &Traffic| (t.clone(), o.to_vec());
    let mut candidates = Vec::new();
    if outer.len() <= EXHAUSTIVE {
        let mut items = outer.clone();
        let n = items.len();
        permutations(&mut items, n, &mut |o| {
            candidates.push((o.to_vec(), traffic(k, p, tiles, ranges, o)))
        });
    } else {
        // Greedy: fix positions from the outside in, completing each candidate with the
        // remaining loops in their original order.
        let mut fixed = Vec::new();
        let mut rest = outer.clone();
        while !rest.is_empty() {
            let (best, _) = rest
                .iter()
                .map(|&l| {
                    let mut o = fixed.clone();
                    o.push(l);
                    o.extend(rest.iter().filter(|&&r| r != l));
                    let t = traffic(k, p, tiles, ranges, &o);
                    candidates.push((o.clone(), t.clone()));
                    (l, key(&o, &t))
                })
                .min_by(|a, b| a.1.cmp(&b.1))
                .expect("rest is not empty");
            fixed.push(best);
            rest.retain(|&r| r != best);
        }
    }
    candidates.sort_by_key(|a| key(&a.0, &a.1));
    let (order, traffic) = candidates
        .first()
        .cloned()
        .unwrap_or((Vec::new(), Traffic { transfers: 0, bytes: 0 }));
    Choice {
        order,
        traffic,
        candidates,
    }
}
