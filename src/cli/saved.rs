//! The timed choices of a gradient program, each measured with the JIT on the timed emulator:
//! - `--recompute`: which forward values it stores rather than recomputes. `rule` keeps the
//!   saved-value rule's plan (every cheap elementwise value recomputed); `timed`, the default,
//!   chooses by modelled time on the verb's target, with its pipeline options but the default
//!   tape mode (`swflow_codegen::saved`).
//! - `--tape-travel`: how each tape-only value travels in `regions` and `stream` mode. `rule`
//!   moves each as far as the mode can (streamed, else in records, else whole); `timed`, the
//!   default, holds each to the way its kernels, and the whole step, are modelled fastest,
//!   with the verb's tape mode (`swflow_codegen::travel`). A training step takes the choice
//!   made on its gradient program, as it takes the stored values.

use std::collections::BTreeMap;

use anyhow::Result;
use serde::Serialize;
use swflow_codegen::jit::JitError;
use swflow_codegen::saved::{choose_stored, TimedError};
use swflow_codegen::travel::{choose_travel, TravelChoice};
use swflow_frontend::autodiff::tape::{Choice, Storable};
use swflow_frontend::training::GradProgram;
use swflow_scheduler::pipeline::Options;
use swflow_scheduler::tape::{TapeMode, Travel};
use swflow_scheduler::target::Target;

use super::model::PipelineArgs;

/// Where a choice is measured: the target and the pipeline's options of the verb.
#[derive(Clone, Copy)]
pub struct Timing<'a> {
    pub target: &'a Target,
    pub pipeline: &'a PipelineArgs,
}

/// A [`Choice`] as reports print it, in seconds of modelled time.
#[derive(Clone, Debug, Serialize)]
pub struct RecomputeReport {
    /// With every storable value recomputed, with every one stored, and with those of
    /// `stored` stored.
    pub rule_seconds: f64,
    pub all_stored_seconds: f64,
    pub chosen_seconds: f64,
    /// How many values could be stored, and those stored, largest first: the values decided
    /// stored, and those beyond `swflow_frontend::autodiff::tape::MAX_DECISIONS` when the
    /// choice started from storing all.
    pub storable: usize,
    pub stored: Vec<String>,
    /// One per value decided, in decision order.
    pub decisions: Vec<DecisionRow>,
}

#[derive(Clone, Debug, Serialize)]
pub struct DecisionRow {
    pub value: String,
    pub bytes: usize,
    pub recompute_seconds: f64,
    pub store_seconds: f64,
    pub stored: bool,
}

impl RecomputeReport {
    fn of(choice: &Choice, storable: &[Storable]) -> RecomputeReport {
        RecomputeReport {
            rule_seconds: choice.rule_cost,
            all_stored_seconds: choice.all_stored_cost,
            chosen_seconds: choice.chosen_cost,
            storable: storable.len(),
            stored: storable
                .iter()
                .filter(|s| choice.stored.contains(&s.id))
                .map(|s| s.name.clone())
                .collect(),
            decisions: choice
                .decisions
                .iter()
                .map(|d| DecisionRow {
                    value: d.value.name.clone(),
                    bytes: d.value.bytes,
                    recompute_seconds: d.recompute_cost,
                    store_seconds: d.store_cost,
                    stored: d.stored,
                })
                .collect(),
        }
    }
}

/// Prints `c` under a report's table (the first few values stored by name).
fn print_recompute(c: &RecomputeReport) {
    const NAMED: usize = 8;
    let mut names = c.stored.iter().take(NAMED).cloned().collect::<Vec<_>>().join(", ");
    if c.stored.len() > NAMED {
        names += &format!(" and {} more", c.stored.len() - NAMED);
    }
    println!(
        "recompute: {} of {} recomputable values stored ({names}); modelled {:.6} s, {:.6} s with every one recomputed, {:.6} s with every one stored",
        c.stored.len(),
        c.storable,
        c.chosen_seconds,
        c.rule_seconds,
        c.all_stored_seconds
    );
}

/// What the timed choices of a gradient program settled on, with their measurements (none
/// for a choice that was not timed).
#[derive(Clone, Debug, Default)]
pub struct Choices {
    pub recompute: Option<RecomputeReport>,
    pub travel: Option<TravelReport>,
}

impl Choices {
    /// `options` with the ways `--tape-travel` holds tape-only tensors to.
    pub fn apply(&self, mut options: Options) -> Options {
        if let (Some(tape), Some(t)) = (&mut options.tape, &self.travel) {
            tape.travel = t.held.clone();
        }
        options
    }
}

/// A [`TravelChoice`] as reports print it, in seconds of modelled time.
#[derive(Clone, Debug, Serialize)]
pub struct TravelReport {
    /// The step as the mode plans it, with nothing streamed (`stream` mode only), with every
    /// tape-only value whole, and as kept.
    pub planned_seconds: f64,
    pub records_seconds: Option<f64>,
    pub whole_seconds: f64,
    pub chosen_seconds: f64,
    /// The values held to a plainer way than the mode's, and that way.
    #[serde(serialize_with = "ways")]
    pub held: BTreeMap<String, Travel>,
    /// One per value a measured program streams or stores in records, in the order of their
    /// producers.
    pub decisions: Vec<TravelRow>,
}

#[derive(Clone, Debug, Serialize)]
pub struct TravelRow {
    pub value: String,
    pub bytes: usize,
    /// The kernels that write and read it, and their modelled seconds together where it
    /// streams, where it is in records and where it is whole.
    pub kernels: Vec<String>,
    pub stream_seconds: Option<f64>,
    pub records_seconds: Option<f64>,
    pub whole_seconds: f64,
    /// How it travels in the program kept.
    #[serde(serialize_with = "way")]
    pub travel: Travel,
}

fn way<S: serde::Serializer>(t: &Travel, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(t.name())
}

fn ways<S: serde::Serializer>(held: &BTreeMap<String, Travel>, s: S) -> Result<S::Ok, S::Error> {
    s.collect_map(held.iter().map(|(name, t)| (name, t.name())))
}

impl TravelReport {
    fn of(c: TravelChoice) -> TravelReport {
        TravelReport {
            planned_seconds: c.planned_seconds,
            records_seconds: c.records_seconds,
            whole_seconds: c.whole_seconds,
            chosen_seconds: c.chosen_seconds,
            held: c.travel,
            decisions: c
                .decisions
                .into_iter()
                .map(|d| TravelRow {
                    value: d.tensor,
                    bytes: d.bytes,
                    kernels: d.kernels,
                    stream_seconds: d.stream_seconds,
                    records_seconds: d.records_seconds,
                    whole_seconds: d.whole_seconds,
                    travel: d.travel,
                })
                .collect(),
        }
    }
}

/// Prints the timed choices' reports under a report's table.
pub fn print_choices(recompute: &Option<RecomputeReport>, travel: &Option<TravelReport>) {
    if let Some(r) = recompute {
        print_recompute(r);
    }
    if let Some(t) = travel {
        let count = |way: Travel| t.decisions.iter().filter(|d| d.travel == way).count();
        let records = match t.records_seconds {
            Some(s) => format!(", {s:.6} s with none streamed"),
            None => String::new(),
        };
        println!(
            "tape travel: of {} values, {} streamed, {} in records, {} whole; modelled {:.6} s, {:.6} s as the mode plans{records}, {:.6} s with every one whole",
            t.decisions.len(),
            count(Travel::Stream),
            count(Travel::Records),
            count(Travel::Whole),
            t.chosen_seconds,
            t.planned_seconds,
            t.whole_seconds
        );
    }
}

/// The measured choice's error as the verb reports it; `None` when the program only stopped on
/// the values it was timed on (an index out of range, say): the program is sound, and the
/// untimed plan stands.
fn timed_error(e: TimedError, what: &str, fallback: &str) -> Option<anyhow::Error> {
    match e {
        TimedError::Jit(JitError::Run(v)) => {
            tracing::warn!("{what}: the gradient program stopped on the values it is timed on, so {fallback}: {v}");
            None
        }
        e => Some(anyhow::Error::new(e).context(format!("choosing {what}"))),
    }
}

/// `p` with the values `--recompute` chooses stored, and what the timed choices settled on.
pub fn decide(p: GradProgram, at: Timing) -> Result<(GradProgram, Choices)> {
    let (p, recompute) = decide_stored(p, at)?;
    let travel = decide_travel(&p, at)?;
    Ok((p, Choices { recompute, travel }))
}

/// `p` with the values `--recompute` chooses stored, and the measurements behind the choice
/// (none with `rule`, or when nothing could be stored).
fn decide_stored(p: GradProgram, at: Timing) -> Result<(GradProgram, Option<RecomputeReport>)> {
    if !at.pipeline.recompute_timed() || p.storable.is_empty() {
        return Ok((p, None));
    }
    // Timed with the default tape mode whatever `--tape` says, so that every mode compiles the
    // same program and gives the same gradients bit for bit.
    let mut options = at.pipeline.options(&p.graph, true)?;
    if let Some(tape) = &mut options.tape {
        tape.mode = TapeMode::default();
    }
    let (chosen, choice) = match choose_stored(&p, at.target, &options) {
        Ok(c) => c,
        Err(e) => {
            let what = "the values the gradient program stores (--recompute timed)";
            return match timed_error(e, what, "every cheap value is recomputed") {
                Some(e) => Err(e),
                None => Ok((p, None)),
            };
        }
    };
    let report = RecomputeReport::of(&choice, &p.storable);
    for d in &report.decisions {
        tracing::info!(
            "recompute or store {} ({} B): {:.3} µs recomputed, {:.3} µs stored: {}",
            d.value,
            d.bytes,
            d.recompute_seconds * 1e6,
            d.store_seconds * 1e6,
            if d.stored { "stored" } else { "recomputed" }
        );
    }
    Ok((chosen, Some(report)))
}

/// How the tape-only values of `p` travel, as `--tape-travel` chooses under the verb's tape
/// mode, with the measurements behind the choice (none with `rule`, in `per-tensor` mode, or
/// when the mode mirrors nothing).
fn decide_travel(p: &GradProgram, at: Timing) -> Result<Option<TravelReport>> {
    if !at.pipeline.travel_timed() {
        return Ok(None);
    }
    let options = at.pipeline.options(&p.graph, true)?;
    let choice = match choose_travel(p, &p.graph, at.target, &options) {
        Ok(c) => c,
        Err(e) => {
            let what = "how the tape-only values travel (--tape-travel timed)";
            return match timed_error(e, what, "each travels as the mode plans") {
                Some(e) => Err(e),
                None => Ok(None),
            };
        }
    };
    let Some(choice) = choice else { return Ok(None) };
    let time = |t: Option<f64>| t.map_or("-".to_string(), |t| format!("{:.3} µs", t * 1e6));
    for d in &choice.decisions {
        tracing::info!(
            "tape travel of {} ({} B; {}): {} streamed, {} in records, {} whole: {}",
            d.tensor,
            d.bytes,
            d.kernels.join(", "),
            time(d.stream_seconds),
            time(d.records_seconds),
            time(Some(d.whole_seconds)),
            d.travel.name()
        );
    }
    Ok(Some(TravelReport::of(choice)))
}
