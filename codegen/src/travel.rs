//! How each tape-only tensor of a gradient program travels, chosen by modelled time.
//!
//! In `regions` and `stream` mode the backward kernels that read a tape-only tensor mirror its
//! producer (`swflow_scheduler::tape`): they take its partition and tiles, so that each CPE
//! reads back exactly the boxes it wrote, in fewer and larger transfers. That fixes the
//! reader's tiling, and some readers run slower in it than in their own (a matrix product's
//! input gradient given its producer's grid of 2 x 30 rather than its own chunks of columns).
//! A stream also constrains its producer, and pays for its stack.
//!
//! [`choose_travel`] measures, as [`crate::saved`] measures its candidates (the pipeline, the
//! JIT, the timed emulator, the same input values), the program:
//! 1. as the mode plans it;
//! 2. in `stream` mode, with no tensor streamed (every tape-only tensor held to
//!    [`Travel::Records`]), which is how `regions` plans it;
//! 3. with every tape-only tensor whole, which is how `per-tensor` plans it.
//!
//! For each tensor that one of them streams or stores in records, the kernels that write and
//! read it are timed in each program, and it is held to the way whose kernels take the least
//! modelled time together (the mode's own way on a tie). The kernels of one tensor seldom
//! change with the choice for another, but they can (a reader left free by one tensor may
//! mirror another; two tensors may share a producer), so that program is measured too. Of the
//! three programs above and this one, the fastest is kept, the mode's own plan on a tie.
//!
//! Tiling never changes the order in which a reduction folds its values, so every choice gives
//! the same gradients bit for bit.

use std::collections::BTreeMap;

use swflow_emulator::KernelStats;
use swflow_frontend::ir::Graph;
use swflow_frontend::training::GradProgram;
use swflow_scheduler::loops::Program;
use swflow_scheduler::pipeline::Options;
use swflow_scheduler::tape::{TapeMode, TapePlan, Travel};
use swflow_scheduler::target::Target;

use crate::saved::{measure, TimedError};

/// The ways [`choose_travel`] holds tensors to, and its measurements.
#[derive(Clone, Debug, PartialEq)]
pub struct TravelChoice {
    /// What `TapeOptions::travel` takes: empty when the mode's own plan is kept.
    pub travel: BTreeMap<String, Travel>,
    /// One per tape-only tensor that a measured program streams or stores in records, in the
    /// order of their producers.
    pub decisions: Vec<TravelDecision>,
    /// Modelled seconds of the program as the mode plans it, with nothing streamed (in
    /// `stream` mode), with every tape-only tensor whole, and of the one kept.
    pub planned_seconds: f64,
    pub records_seconds: Option<f64>,
    pub whole_seconds: f64,
    pub chosen_seconds: f64,
}

/// The measurements behind one tensor's way.
#[derive(Clone, Debug, PartialEq)]
pub struct TravelDecision {
    pub tensor: String,
    pub bytes: usize,
    /// The kernels that write and read it, by function name.
    pub kernels: Vec<String>,
    /// The modelled seconds of those kernels together, where it streams, where it is in
    /// records, and where it is whole (none where no measured program moves it so).
    pub stream_seconds: Option<f64>,
    pub records_seconds: Option<f64>,
    pub whole_seconds: f64,
    /// How it travels in the program kept.
    pub travel: Travel,
}

/// One measured program: its tape plan's ways, its kernels' modelled cycles by kernel index,
/// and its modelled seconds.
struct Measured {
    plan: TapePlan,
    cycles: Vec<f64>,
    seconds: f64,
}

impl Measured {
    fn seconds_of(&self, kernels: &[usize], target: &Target) -> f64 {
        kernels.iter().map(|&k| self.cycles[k]).sum::<f64>() / target.clock_hz
    }
}

fn kernel_cycles(p: &Program, stats: &BTreeMap<String, KernelStats>) -> Vec<f64> {
    crate::kernel_function_names(p)
        .iter()
        .map(|name| stats.get(name).map_or(0.0, |s| s.time.modelled_cycles))
        .collect()
}

/// How the tape-only tensors of `g`, a graph of gradient program `p` compiled for `target`
/// with `options`, travel fastest (see the module documentation); none without tape options,
/// in `per-tensor` mode, or when the mode mirrors no reader. `options.tape.travel` must be
/// empty.
pub fn choose_travel(
    p: &GradProgram,
    g: &Graph,
    target: &Target,
    options: &Options,
) -> Result<Option<TravelChoice>, TimedError> {
    let Some(tape) = options.tape.as_ref().filter(|t| t.mode != TapeMode::PerTensor) else {
        return Ok(None);
    };
    assert!(tape.travel.is_empty(), "the choice starts from the mode's own plan");
    let run = |travel: &BTreeMap<String, Travel>| -> Result<(Program, Measured), TimedError> {
        let mut o = options.clone();
        o.tape.as_mut().expect("tape options").travel = travel.clone();
        let (program, run) = measure(p, g, target, &o)?;
        let measured = Measured {
            plan: program.tape.clone().expect("a tape plan"),
            cycles: kernel_cycles(&program, &run.stats),
            seconds: run.modelled_seconds,
        };
        Ok((program, measured))
    };
    let (program, planned) = run(&BTreeMap::new())?;
    if planned.plan.mirrored.is_empty() {
        return Ok(None);
    }
    let tape_only: Vec<_> = planned.plan.saved.iter().filter(|s| s.tape_only).collect();
    let every = |way: Travel| -> BTreeMap<String, Travel> {
        tape_only
            .iter()
            .map(|s| (program.tensor(s.tensor).name.clone(), way))
            .collect()
    };
    let records = match tape.mode {
        TapeMode::Stream => Some(run(&every(Travel::Records))?.1),
        _ => None,
    };
    let whole = run(&every(Travel::Whole))?.1;
    let names = crate::kernel_function_names(&program);
    let mut decisions = Vec::new();
    let mut decided = Vec::new();
    let mut held = BTreeMap::new();
    for s in &tape_only {
        let kernels: Vec<usize> = std::iter::once(s.producer).chain(s.readers.iter().copied()).collect();
        let time_where =
            |m: &Measured, way: Travel| (m.plan.travel_of(s.tensor) == way).then(|| m.seconds_of(&kernels, target));
        let stream_seconds = time_where(&planned, Travel::Stream);
        let records_seconds = time_where(&planned, Travel::Records)
            .or_else(|| records.as_ref().and_then(|r| time_where(r, Travel::Records)));
        if stream_seconds.is_none() && records_seconds.is_none() {
            continue;
        }
        let whole_seconds = whole.seconds_of(&kernels, target);
        // The mode's own way first, so that a tie keeps it.
        let best = [
            (Travel::Stream, stream_seconds),
            (Travel::Records, records_seconds),
            (Travel::Whole, Some(whole_seconds)),
        ]
        .into_iter()
        .filter_map(|(way, t)| Some((way, t?)))
        .reduce(|a, b| if b.1 < a.1 { b } else { a })
        .expect("whole is always measured");
        let name = program.tensor(s.tensor).name.clone();
        if best.0 < planned.plan.travel_of(s.tensor) {
            held.insert(name.clone(), best.0);
        }
        decided.push(s.tensor);
        decisions.push(TravelDecision {
            tensor: name,
            bytes: s.bytes,
            kernels: kernels.iter().map(|&k| names[k].clone()).collect(),
            stream_seconds,
            records_seconds,
            whole_seconds,
            // Set below, from the program kept.
            travel: Travel::Whole,
        });
    }
    // The candidates, the mode's own plan first so that a tie keeps it.
    let mut candidates = vec![(BTreeMap::new(), planned.seconds, planned.plan.clone())];
    if !held.is_empty() {
        let chosen = run(&held)?.1;
        candidates.push((held, chosen.seconds, chosen.plan));
    }
    if let Some(r) = &records {
        candidates.push((every(Travel::Records), r.seconds, r.plan.clone()));
    }
    candidates.push((every(Travel::Whole), whole.seconds, whole.plan.clone()));
    let (travel, chosen_seconds, plan) = candidates
        .into_iter()
        .reduce(|a, b| if b.1 < a.1 { b } else { a })
        .expect("the planned program is a candidate");
    for (d, &t) in decisions.iter_mut().zip(&decided) {
        d.travel = plan.travel_of(t);
    }
    Ok(Some(TravelChoice {
        travel,
        decisions,
        planned_seconds: planned.seconds,
        records_seconds: records.map(|r| r.seconds),
        whole_seconds: whole.seconds,
        chosen_seconds,
    }))
}
