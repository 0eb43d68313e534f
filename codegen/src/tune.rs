//! Schedules chosen by modelled time: each kernel runs alone, compiled by the JIT, on the
//! timed emulator, under a few candidate schedules, and keeps the fastest.
//!
//! The scheduler ranks schedules by an estimate made before any code exists
//! ([`swflow_scheduler::schedule::estimate`]); it counts the vector blocks' steps and the
//! spreading of padded rows, but not every instruction of the emitted code (index arithmetic,
//! loop control, the accumulators' loads and stores) nor the stall on each put from a single
//! buffer, so it stays near a lower bound and cannot tell apart schedules that differ there.
//! Tuning asks the judge instead, as autotuners do. For each kernel:
//! 1. the schedule the scheduler chose is measured first;
//! 2. then the best schedule of every other partition ([`partition::candidates`], and
//!    [`partition::sparse`], which leave CPEs idle and which the scheduler does not rank;
//!    tiles sized as the scheduler sizes them), in the order of their estimates;
//! 3. then, from the fastest so far, schedules that halve or double one tile loop's tile, or
//!    grow it to the loop's whole range, climbing while one is faster.
//!
//! A measurement compiles a program of the kernel alone ([`alone`]): the tensors it reads
//! become inputs, filled with the same pseudo-random values every time (positions within the
//! axes the kernel gathers along, [`Program::index_extent`]), and the tensors it writes its
//! outputs. It stops at `budget` measurements per kernel, and skips schedules
//! whose estimate is twice the fastest time measured or more. A kernel keeps its
//! schedule when it is the fastest (ties keep the earlier), and when no other candidate can
//! be measured (a run that stops on its pseudo-random inputs counts as not measured).
//!
//! A kernel's modelled time does not depend on the kernels around it (each launch starts
//! with an idle DMA queue and its own LDM), so the time measured alone is its time in the
//! program. Tuning only picks among schedules that verify; what the program computes does
//! not change.

use swflow_frontend::ir::Tensor;
use swflow_frontend::random::random_input;
use swflow_scheduler::loops::{Kernel, Program, TensorId, TensorKind};
use swflow_scheduler::schedule::{self, estimate, partition, Schedule};
use swflow_scheduler::target::Target;

use crate::jit;

/// How many times the fastest modelled time so far a schedule's estimate may be and still
/// be measured. The estimate stays near a lower bound, and comes within a few per cent
/// of the modelled time where DMA bounds a kernel; a schedule estimated at twice the fastest
/// cannot win, and such schedules (scalar fallbacks, tiles of one point) are the slowest to
/// emulate.
const OUT_OF_REACH: f64 = 2.0;

/// What tuning did to one kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct Tuned {
    pub kernel: String,
    /// Schedules measured.
    pub measured: usize,
    /// Modelled cycles of the kernel (spawn, slowest CPE and join) under the scheduler's
    /// choice and under the one kept; `None` when the scheduler's choice could not be
    /// measured (the kernel keeps it).
    pub before: Option<f64>,
    pub after: Option<f64>,
}

impl Tuned {
    /// Whether the kernel now has another schedule.
    pub fn changed(&self) -> bool {
        matches!((self.before, self.after), (Some(b), Some(a)) if a < b)
    }
}

/// Why a program cannot be tuned.
#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    #[error("tuning needs at least one measurement per kernel")]
    NoBudget,
}

/// Tunes every kernel of `p` (scheduled for `target`) with at most `budget` measurements
/// each, replacing its schedule by the fastest measured; returns what it did, kernel by
/// kernel. The kernels whose schedules a gradient program's tape plan fixes ([`fixed_by_tape`])
/// keep them, unmeasured.
pub fn tune(p: &mut Program, target: &Target, budget: usize) -> Result<Vec<Tuned>, TuneError> {
    if budget == 0 {
        return Err(TuneError::NoBudget);
    }
    let fixed = fixed_by_tape(p);
    let mut out = Vec::with_capacity(p.kernels.len());
    for (ki, fixed) in fixed.into_iter().enumerate() {
        if fixed {
            out.push(Tuned {
                kernel: p.kernels[ki].name.clone(),
                measured: 0,
                before: None,
                after: None,
            });
            continue;
        }
        let (tuned, best) = tune_kernel(p, ki, target, budget);
        if let Some(s) = best {
            p.kernels[ki].schedule = Some(s);
        }
        out.push(tuned);
    }
    Ok(out)
}

/// Per kernel of `p`, whether its tape plan fixes its schedule: the producer of every value
/// stored as records or streamed (the records' layout and the stream's layers follow its
/// boxes) and every reader that mirrors a producer (it takes the producer's partition and
/// tiles). Every other kernel may take any schedule: tiling never changes the order in which
/// a reduction folds, so the program computes the same bits.
pub fn fixed_by_tape(p: &Program) -> Vec<bool> {
    let mut fixed = vec![false; p.kernels.len()];
    if let Some(plan) = &p.tape {
        let producers = plan.records.iter().map(|r| r.producer);
        let streams = plan.streams.iter().flat_map(|x| [x.producer, x.reader]);
        let readers = plan.mirrored.iter().map(|m| m.reader);
        for k in producers.chain(streams).chain(readers) {
            fixed[k] = true;
        }
    }
    fixed
}

/// Tunes kernel `ki`: what it did, and the new schedule if one is faster.
fn tune_kernel(p: &Program, ki: usize, target: &Target, budget: usize) -> (Tuned, Option<Schedule>) {
    let k = &p.kernels[ki];
    let mut tuned = Tuned {
        kernel: k.name.clone(),
        measured: 0,
        before: None,
        after: None,
    };
    let Some(current) = k.schedule.clone() else {
        return (tuned, None);
    };
    let alone = alone(p, ki);
    let inputs: Vec<Tensor> = alone
        .inputs
        .iter()
        .enumerate()
        .map(|(i, &id)| random_input(&alone.tensor(id).ty, 0, i, alone.index_extents[i]))
        .collect();
    let mut seen: Vec<Schedule> = Vec::new();
    // A schedule is measured once, and not at all when its estimate, which is near a lower
    // bound of its modelled time, is out of reach of the fastest so far.
    let mut measure = |s: &Schedule, tuned: &mut Tuned, fastest: f64| -> Option<f64> {
        if tuned.measured >= budget || seen.contains(s) {
            return None;
        }
        let e = estimate::estimate(k, p, s, target);
        if e.cycles() > OUT_OF_REACH * fastest {
            return None;
        }
        seen.push(s.clone());
        tuned.measured += 1;
        let mut q = alone.clone();
        q.kernels[0].schedule = Some(s.clone());
        let program = jit::compile(&q, target).ok()?;
        let run = program.run(&q, target, &inputs).ok()?;
        let cycles = run.stats.values().next().map(|s| s.time.modelled_cycles)?;
        tracing::trace!(
            "{}: {cycles:.0} cycles (estimated {:.0}: queue {:.0}, CPE {:.0}, stalled {:.0}) under\n{}",
            k.name,
            e.cycles(),
            e.queue,
            e.cpe,
            e.stalled,
            s.describe(k, p).trim_end()
        );
        Some(cycles)
    };
    let Some(first) = measure(&current, &mut tuned, f64::INFINITY) else {
        return (tuned, None);
    };
    tuned.before = Some(first);
    let mut best_time = first;
    let mut best: Option<Schedule> = None;
    let mut candidates = partition::candidates(k, target);
    for part in partition::sparse(k, target) {
        if !candidates.contains(&part) {
            candidates.push(part);
        }
    }
    // The best schedule of every other partition, by estimate.
    let mut others: Vec<(f64, Schedule)> = candidates
        .iter()
        .filter_map(|part| {
            let s = schedule::split_by(k, p, part, target).ok()?;
            schedule::verify_schedule(k, p, &s, target).ok()?;
            Some((estimate::estimate(k, p, &s, target).cycles(), s))
        })
        .collect();
    others.sort_by(|a, b| a.0.total_cmp(&b.0));
    for (_, s) in others {
        if let Some(t) = measure(&s, &mut tuned, best_time) {
            if t < best_time {
                best_time = t;
                best = Some(s);
            }
        }
    }
    // Climb from the fastest, one tile at a time.
    let mut here = best.clone().unwrap_or_else(|| current.clone());
    let part = candidates
        .into_iter()
        .find(|c| c.loops == here.partition && c.grid == here.grid && c.chunk == here.chunk);
    if let Some(part) = part {
        'climb: while tuned.measured < budget {
            for s in neighbours(k, p, &part, &here, target) {
                if let Some(t) = measure(&s, &mut tuned, best_time) {
                    if t < best_time {
                        best_time = t;
                        best = Some(s.clone());
                        here = s;
                        continue 'climb;
                    }
                }
            }
            break;
        }
    }
    tuned.after = Some(best_time);
    (tuned, best)
}

/// The schedules of partition `part` whose tiles differ from `s`'s in one loop, halved,
/// doubled (within the loop's range) or grown to the loop's whole range, that verify.
fn neighbours(k: &Kernel, p: &Program, part: &partition::Partition, s: &Schedule, target: &Target) -> Vec<Schedule> {
    let mut out = Vec::new();
    for l in 0..k.loops.len() {
        let t = s.tiles[l];
        let mut nexts = vec![t / 2, (t * 2).min(s.ranges[l]), s.ranges[l]];
        nexts.dedup();
        for next in nexts {
            if next == 0 || next == t {
                continue;
            }
            let mut tiles = s.tiles.clone();
            tiles[l] = next;
            let n = schedule::planned(k, p, part, tiles, target);
            if schedule::verify_schedule(k, p, &n, target).is_ok() {
                out.push(n);
            }
        }
    }
    out
}

/// The program of kernel `ki` of `p` alone, with only the tensors it uses: every tensor it
/// reads that a kernel of `p` computes becomes an input, and every tensor it writes an output.
pub fn alone(p: &Program, ki: usize) -> Program {
    let mut k = p.kernels[ki].clone();
    // The tensors it uses, views with what they view, in `p`'s order.
    let mut used: Vec<TensorId> = Vec::new();
    for &t in &k.operands {
        let mut id = t;
        loop {
            if !used.contains(&id) {
                used.push(id);
            }
            match p.tensor(id).kind {
                TensorKind::View(of) => id = of,
                _ => break,
            }
        }
    }
    used.sort_by_key(|t| t.index());
    let new = |t: TensorId| TensorId(used.iter().position(|&u| u == t).expect("a used tensor") as u32);
    let written: Vec<TensorId> = schedule::accesses(&k)
        .iter()
        .enumerate()
        .filter(|&(i, _)| schedule::is_written(&k, i))
        .map(|(_, a)| p.storage(k.operands[a.operand]))
        .collect();
    let mut inputs = Vec::new();
    let tensors = used
        .iter()
        .map(|&t| {
            let mut info = p.tensor(t).clone();
            info.kind = match info.kind {
                TensorKind::View(of) => TensorKind::View(new(of)),
                TensorKind::Temp | TensorKind::Input if !written.contains(&t) => {
                    inputs.push(new(t));
                    TensorKind::Input
                }
                kind => kind,
            };
            info
        })
        .collect();
    for t in &mut k.operands {
        *t = new(*t);
    }
    let mut alone = Program {
        name: format!("{} ({})", p.name, k.name),
        tensors,
        outputs: written.iter().map(|&w| (p.tensor(w).name.clone(), new(w))).collect(),
        kernels: vec![k],
        inputs,
        index_extents: Vec::new(),
        updates: Vec::new(),
        tape: None,
    };
    alone.index_extents = alone.inputs.iter().map(|&t| alone.index_extent(t)).collect();
    alone
}
