//! LDM buffer sizing (after swTVM's Algorithm 1).
//!
//! Iterators are classified as *num* iterators (the outer partition loops: one value at a
//! time, tile 1), *size* iterators (loops that index the target, including the innermost
//! partition loop, whose range is a CPE's chunk) and *comp* iterators (reduction loops). Size
//! and comp iterators are buffer iterators. Each starts with a tile of
//! `min(range, START_TILE)`; while the buffers of all accesses exceed the LDM budget the
//! largest tile is halved; then tiles grow greedily: at each step every buffer iterator's
//! doubled tile is tried, the one needing the least LDM is taken (ties: size iterators, then
//! inner loops), and growth stops at the first step whose best candidate does not fit.
//! Tiles are their starting value, a power of two below it, or a loop's full range.
//!
//! A buffer holds, for each dimension, the span of its subscript over the tile:
//! `Σ |coef| * (tile - 1) + 1` (so `oh*stride + kh` spans `(T_oh-1)*stride + T_kh`); a
//! strided read whose tiles are its whole loops takes the whole dimension when its span leaves
//! less than a stride of it out ([`Access::spans_dimension`]), so that its rows join into one
//! contiguous block ([`box_dims`]). A buffer whose innermost dimension (ignoring dimensions of
//! extent 1 in the tensor) would be a single element is not allocated: the access goes to
//! main memory directly.

use std::collections::HashMap;

use crate::loops::{Access, Index, Kernel, LoopKind, Program};
use crate::target::Target;

use super::partition::Partition;
use super::RoomRule;

/// First tile of a buffer iterator (an algorithm constant, not a hardware number).
pub const START_TILE: usize = 64;

/// One sizing step: the tiles tried, the LDM bytes they need, and whether they were kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub tiles: Vec<usize>,
    pub bytes: usize,
    pub accepted: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sized {
    pub tiles: Vec<usize>,
    pub steps: Vec<Step>,
}

/// Per-dimension span of an access over a tile (a window's spread included), or `None` for
/// gathered accesses.
pub fn buffer_dims(a: &Access, tiles: &[usize]) -> Option<Vec<usize>> {
    a.index
        .iter()
        .enumerate()
        .map(|(d, i)| match i {
            Index::Affine(x) => Some(
                x.terms
                    .iter()
                    .map(|&(l, c)| c.unsigned_abs() as usize * (tiles[l] - 1))
                    .sum::<usize>()
                    + 1
                    + a.spread(d),
            ),
            Index::Gathered { .. } => None,
        })
        .collect()
}

/// Per-dimension extent of the box access `a` (the `i`-th of [`super::accesses`]) of kernel
/// `k` moves over a tile: its span ([`buffer_dims`]), or for a strided read whose tiles are
/// its whole loops, the whole dimension ([`Access::spans_dimension`]); `None` for gathered
/// accesses.
pub fn box_dims(k: &Kernel, p: &Program, i: usize, a: &Access, tiles: &[usize]) -> Option<Vec<usize>> {
    let mut dims = buffer_dims(a, tiles)?;
    if !super::is_written(k, i) {
        let shape = &p.tensor(k.operands[a.operand]).ty.shape;
        let extents = k.extents();
        for (d, e) in dims.iter_mut().enumerate() {
            if a.spans_dimension(d, tiles, &extents, shape[d]) {
                *e = shape[d];
            }
        }
    }
    Some(dims)
}

/// Whether access `a`, with these buffer dimensions, is served directly from main memory:
/// gathers, and tiles whose innermost dimension would be one element. A guarded read always
/// has a buffer, which holds its padding.
pub fn is_direct(a: &Access, dims: Option<&[usize]>, shape: &[usize]) -> bool {
    let Some(dims) = dims else { return true };
    if a.pad.is_some() {
        return false;
    }
    let keep = shape.iter().rposition(|&e| e != 1).map_or(0, |i| i + 1);
    dims[..keep].last().is_some_and(|&d| d == 1) && dims.iter().product::<usize>() > 1
}

/// LDM bytes all buffered accesses need with `tiles`, each buffer with its room for vectors
/// (by `rule`, [`RoomRule::new`] of `k`) and aligned as generated code places it: what their
/// single buffers take in the planned schedule.
pub fn usage(k: &Kernel, p: &Program, rule: &RoomRule, tiles: &[usize]) -> usize {
    // Per access: its box's dimensions and element bytes when it is buffered.
    let boxes: Vec<Option<(Vec<usize>, usize)>> = super::accesses(k)
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let ty = &p.tensor(k.operands[a.operand]).ty;
            let dims = box_dims(k, p, i, a, tiles);
            match is_direct(a, dims.as_deref(), &ty.shape) {
                true => None,
                false => dims.map(|d| (d, ty.dtype.size_bytes())),
            }
        })
        .collect();
    let views: Vec<Option<(&[usize], usize)>> = boxes
        .iter()
        .map(|b| b.as_ref().map(|(d, bytes)| (&d[..], *bytes)))
        .collect();
    boxes
        .iter()
        .zip(rule.rooms(&views))
        .map(|(b, room)| {
            b.as_ref().map_or(0, |(d, bytes)| {
                ((d.iter().product::<usize>() + room) * bytes).next_multiple_of(super::LDM_BUFFER_ALIGN)
            })
        })
        .sum()
}

pub(crate) fn halve(t: usize) -> usize {
    if t.is_power_of_two() {
        t / 2
    } else {
        1 << (usize::BITS - 1 - t.leading_zeros())
    }
}

fn grow(t: usize, extent: usize) -> usize {
    if 2 * t >= extent {
        extent
    } else {
        2 * t
    }
}

pub fn size_buffers(k: &Kernel, p: &Program, part: &Partition, target: &Target) -> Result<Sized, String> {
    let n_access = super::accesses(k).len();
    let budget = target
        .ldm_budget()
        .saturating_sub(super::ldm_overhead(k, n_access, target));
    let range = |l: usize| part.range(k, l);
    let rule = RoomRule::new(k);
    let buffer_iters: Vec<usize> = (0..k.loops.len()).filter(|&l| range(l) > 1).collect();
    let size_iter = |l: usize| k.loops[l].kind == LoopKind::Parallel;
    let mut tiles = vec![1; k.loops.len()];
    for &l in &buffer_iters {
        tiles[l] = range(l).min(START_TILE);
    }
    let mut steps = Vec::new();
    let mut bytes = usage(k, p, &rule, &tiles);
    steps.push(Step {
        tiles: tiles.clone(),
        bytes,
        accepted: bytes <= budget,
    });
    while bytes > budget {
        let Some(&l) = buffer_iters
            .iter()
            .filter(|&&l| tiles[l] > 1)
            .max_by_key(|&&l| (tiles[l], l))
        else {
            return Err(format!(
                "needs {bytes} LDM bytes with every tile at 1, {budget} available"
            ));
        };
        tiles[l] = halve(tiles[l]);
        bytes = usage(k, p, &rule, &tiles);
        steps.push(Step {
            tiles: tiles.clone(),
            bytes,
            accepted: bytes <= budget,
        });
    }
    loop {
        let best = buffer_iters
            .iter()
            .filter(|&&l| tiles[l] < range(l))
            .map(|&l| {
                let mut t = tiles.clone();
                t[l] = grow(t[l], range(l));
                let b = usage(k, p, &rule, &t);
                // Smallest usage, then size iterators, then inner loops.
                ((b, !size_iter(l), std::cmp::Reverse(l)), t)
            })
            .min_by(|a, b| a.0.cmp(&b.0));
        let Some(((b, _, _), t)) = best else { break };
        let accepted = b <= budget;
        steps.push(Step {
            tiles: t.clone(),
            bytes: b,
            accepted,
        });
        if !accepted {
            break;
        }
        tiles = t;
    }
    Ok(Sized { tiles, steps })
}

/// Moves of [`improve`] at most (a bound; each move must shorten the estimate).
const MOVES: usize = 64;

/// Tiles near `tiles` (which fit) with a shorter [`super::estimate`], by descent over two
/// neighbourhoods, the near one first: each step takes the best move of the near
/// neighbourhood that still fits and shortens the estimate of the schedule it gives (the best
/// order of its tile loops, its buffers placed and double-buffered where the LDM has room,
/// and shared with collective broadcasts: [`super::shared`]),
/// and only when none does, the best of the far one. Near: a tile doubled (or grown to its
/// range), grown to its whole range at once (a range that is not a power of two may be
/// reached only through a ragged tiling estimated slower than both), or halved, or one tile
/// halved and another grown (which trades LDM between loops: a tile's rows grown whole, so
/// that its transfers become one contiguous block, for fewer rows). Far: one tile grown and
/// another halved twice or more (the LDM freed then double-buffers the grown rows). Taking
/// the near moves first keeps the descent from being led by a far move into a worse end.
pub fn improve(k: &Kernel, p: &Program, part: &Partition, tiles: Vec<usize>, target: &Target) -> Vec<usize> {
    descend(k, p, part, tiles, target, super::shared)
}

/// [`improve`]'s descent from `tiles`, each tiling's schedule given by `plan`.
pub fn descend(
    k: &Kernel,
    p: &Program,
    part: &Partition,
    mut tiles: Vec<usize>,
    target: &Target,
    plan: fn(&Kernel, &Program, &Partition, Vec<usize>, &Target) -> super::Schedule,
) -> Vec<usize> {
    let n_access = super::accesses(k).len();
    let budget = target
        .ldm_budget()
        .saturating_sub(super::ldm_overhead(k, n_access, target));
    let ranges: Vec<usize> = (0..k.loops.len()).map(|l| part.range(k, l)).collect();
    let rule = RoomRule::new(k);
    let loops: Vec<usize> = (0..k.loops.len()).filter(|&l| ranges[l] > 1).collect();
    // Neighbourhoods of successive moves overlap: each tiling is planned and estimated once.
    let mut known: HashMap<Vec<usize>, f64> = HashMap::new();
    let mut cycles = |t: &[usize]| {
        *known.entry(t.to_vec()).or_insert_with(|| {
            let s = plan(k, p, part, t.to_vec(), target);
            super::estimate::estimate(k, p, &s, target).cycles()
        })
    };
    let mut now = cycles(&tiles);
    for _ in 0..MOVES {
        let (mut near, mut far) = (Vec::new(), Vec::new());
        for &l in &loops {
            let mut t = tiles.clone();
            t[l] = grow(tiles[l], ranges[l]);
            near.push(t);
            if grow(tiles[l], ranges[l]) < ranges[l] {
                let mut t = tiles.clone();
                t[l] = ranges[l];
                near.push(t);
            }
            let mut t = tiles.clone();
            t[l] = halve(tiles[l]).max(1);
            near.push(t);
            for &m in loops.iter().filter(|&&m| m != l) {
                let mut t = tiles.clone();
                t[m] = grow(tiles[m], ranges[m]);
                t[l] = halve(t[l]).max(1);
                near.push(t.clone());
                while t[l] > 1 {
                    t[l] = halve(t[l]);
                    far.push(t.clone());
                }
            }
        }
        let mut best_of = |moves: Vec<Vec<usize>>| {
            let mut best: Option<(f64, Vec<usize>)> = None;
            for t in moves {
                if t == tiles || usage(k, p, &rule, &t) > budget {
                    continue;
                }
                let c = cycles(&t);
                if c < now && best.as_ref().is_none_or(|b| c < b.0) {
                    best = Some((c, t));
                }
            }
            best
        };
        let Some((c, t)) = best_of(near).or_else(|| best_of(far)) else {
            break;
        };
        now = c;
        tiles = t;
    }
    tiles
}
