//! Main-memory planning: every tensor in one arena, allocated ahead of time, with space
//! reused between tensors whose lifetimes do not overlap.
//!
//! Lifetimes are measured in kernel positions. Inputs and constants live for the whole
//! program; a computed tensor lives from the first kernel that writes it to the last kernel
//! that reads it, or to the end when it is an output. Views share their source's storage
//! (and extend its lifetime). Placement is greedy: larger tensors first, each at the lowest
//! aligned offset that does not overlap any placed tensor with an overlapping lifetime. An
//! update (a training step's new parameter value) takes its input's place when that is safe.

use crate::loops::{LoopKind, Program, TensorId, TensorKind};
use crate::schedule::Residence;
use crate::target::Target;

/// Where every storage tensor lives in the arena.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryPlan {
    /// Byte offset per tensor that owns storage and is used (`None` for views and for
    /// tensors no kernel or output touches).
    pub offsets: Vec<Option<usize>>,
    /// Lifetime per storage tensor: first and last kernel position (inclusive).
    pub lifetimes: Vec<Option<(usize, usize)>>,
    /// Bytes of each tensor's storage: its size, or for a tape tensor stored as records
    /// (see [`crate::tape::Record`]) its records'.
    pub bytes: Vec<usize>,
    /// Size of the arena: the highest end offset after placement (at least the peak of
    /// simultaneously live bytes).
    pub arena_bytes: usize,
    /// Sum of all storage tensors' sizes, what allocating each separately would take.
    pub naive_bytes: usize,
    /// The program's updates stored in their input's place: `(input, output)`.
    pub in_place: Vec<(TensorId, TensorId)>,
}

fn align(n: usize, a: usize) -> usize {
    n.div_ceil(a) * a
}

pub fn plan(p: &Program, target: &Target) -> MemoryPlan {
    let n = p.tensors.len();
    let end = p.kernels.len().max(1) - 1;
    let mut life: Vec<Option<(usize, usize)>> = vec![None; n];
    let touch = |life: &mut Vec<Option<(usize, usize)>>, t: usize, at: usize| {
        life[t] = Some(match life[t] {
            None => (at, at),
            Some((a, b)) => (a.min(at), b.max(at)),
        });
    };
    for (i, t) in p.tensors.iter().enumerate() {
        if matches!(t.kind, TensorKind::Input | TensorKind::Const(_)) {
            life[i] = Some((0, end));
        }
    }
    for (at, k) in p.kernels.iter().enumerate() {
        for &t in &k.operands {
            touch(&mut life, p.storage(t).index(), at);
        }
    }
    for (_, t) in &p.outputs {
        touch(&mut life, p.storage(*t).index(), end);
    }
    let bytes = |i: usize| match &p.tape {
        Some(tape) => tape.storage_bytes(p, TensorId(i as u32)),
        None => p.tensors[i].ty.size_bytes(),
    };
    let size = |i: usize| align(bytes(i).max(1), target.memory_alignment_bytes);
    let storage: Vec<usize> = (0..n)
        .filter(|&i| !matches!(p.tensors[i].kind, TensorKind::View(_)))
        .collect();
    let naive_bytes = storage.iter().map(|&i| size(i)).sum();
    let in_place: Vec<(TensorId, TensorId)> = p
        .updates
        .iter()
        .copied()
        .filter(|&(i, o)| in_place_is_safe(p, i, o))
        .collect();
    let shares: Vec<(usize, usize)> = in_place.iter().map(|(i, o)| (i.index(), o.index())).collect();
    let mut by_size: Vec<usize> = storage
        .iter()
        .copied()
        .filter(|&i| life[i].is_some() && !shares.iter().any(|&(_, o)| o == i))
        .collect();
    by_size.sort_by_key(|&i| (std::cmp::Reverse(size(i)), i));
    let mut offsets: Vec<Option<usize>> = vec![None; n];
    let mut placed: Vec<(usize, usize, (usize, usize))> = Vec::new();
    for i in by_size {
        let (a, b) = life[i].expect("filtered to live tensors");
        let mut busy: Vec<(usize, usize)> = placed
            .iter()
            .filter(|(_, _, (c, d))| *c <= b && a <= *d)
            .map(|&(o, s, _)| (o, o + s))
            .collect();
        busy.sort_unstable();
        let mut offset = 0;
        for (lo, hi) in busy {
            if offset + size(i) <= lo {
                break;
            }
            offset = offset.max(align(hi, target.memory_alignment_bytes));
        }
        offsets[i] = Some(offset);
        placed.push((offset, size(i), (a, b)));
    }
    for &(i, o) in &shares {
        offsets[o] = offsets[i];
    }
    let arena_bytes = placed.iter().map(|&(o, s, _)| o + s).max().unwrap_or(0);
    MemoryPlan {
        offsets,
        lifetimes: life,
        bytes: (0..n).map(bytes).collect(),
        arena_bytes,
        naive_bytes,
        in_place,
    }
}

/// Whether update `output` can be written over `input`: one kernel writes it, reading `input`
/// (itself, not a view of it) only at the element it writes, and no later kernel reads
/// `input`. Each CPE then reads an element of the input before it writes that element's new
/// value, and no other CPE reads it. A reduction qualifies when only its epilogue reads
/// `input` and its schedule never stores partial sums to the target (no reduce loop encloses
/// the target's transfers, and the target has an LDM buffer): the target in main memory is
/// written once, after the epilogue read the input there.
fn in_place_is_safe(p: &Program, input: TensorId, output: TensorId) -> bool {
    let storage = |t: TensorId| p.storage(t);
    if storage(output) != output
        || !matches!(p.tensor(output).kind, TensorKind::Temp)
        || p.outputs.iter().any(|&(_, t)| storage(t) == input)
    {
        return false;
    }
    let writers: Vec<usize> = (0..p.kernels.len())
        .filter(|&k| p.kernels[k].operands[0] == output)
        .collect();
    let [w] = writers[..] else {
        return false;
    };
    let k = &p.kernels[w];
    if k.stmt.reduce.is_some() {
        let Some(s) = &k.schedule else { return false };
        let partial_sums_stored = s.buffers[0].residence != Residence::Buffer
            || s.order[..s.buffers[0].depth]
                .iter()
                .any(|&l| k.loops[l].kind == LoopKind::Reduce);
        let value_reads_input = k
            .stmt
            .value
            .accesses()
            .iter()
            .any(|a| storage(k.operands[a.operand]) == input);
        if partial_sums_stored || value_reads_input {
            return false;
        }
    }
    let reads_input_elementwise = k.stmt.read_accesses().iter().all(|a| {
        let t = k.operands[a.operand];
        storage(t) != input || (t == input && a.index == k.stmt.target.index && a.pad.is_none())
    });
    let read_later = p.kernels[w + 1..]
        .iter()
        .any(|k| k.operands.iter().any(|&t| storage(t) == input));
    reads_input_elementwise && !read_later
}

/// Checks that no two tensors with overlapping lifetimes overlap in the arena, except an
/// update stored in its input's place.
pub fn check(p: &Program, m: &MemoryPlan) -> Result<(), String> {
    let live: Vec<usize> = (0..p.tensors.len()).filter(|&i| m.offsets[i].is_some()).collect();
    let shared = |i: usize, j: usize| {
        m.in_place
            .iter()
            .any(|(a, b)| (a.index(), b.index()) == (i, j) || (a.index(), b.index()) == (j, i))
    };
    for (x, &i) in live.iter().enumerate() {
        for &j in &live[x + 1..] {
            if shared(i, j) {
                continue;
            }
            let (Some((a, b)), Some((c, d))) = (m.lifetimes[i], m.lifetimes[j]) else {
                continue;
            };
            let (Some(oi), Some(oj)) = (m.offsets[i], m.offsets[j]) else {
                continue;
            };
            let (si, sj) = (m.bytes[i], m.bytes[j]);
            if a <= d && c <= b && oi < oj + sj && oj < oi + si {
                return Err(format!(
                    "'{}' and '{}' are live together but overlap in the arena",
                    p.tensors[i].name, p.tensors[j].name
                ));
            }
        }
    }
    Ok(())
}
