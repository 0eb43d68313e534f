//! `--recompute`: which forward values a gradient program stores rather than recomputes.
//! `rule` keeps the saved-value rule's plan (every cheap elementwise value recomputed);
//! `timed`, the default, chooses by modelled time on the verb's target, with its pipeline
//! options but the default tape mode (`swflow_codegen::saved`).

use anyhow::Result;
use serde::Serialize;
use swflow_codegen::jit::JitError;
use swflow_codegen::saved::{choose_stored, TimedError};
use swflow_frontend::autodiff::tape::{Choice, Storable};
use swflow_frontend::training::GradProgram;
use swflow_scheduler::tape::TapeMode;
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
pub fn print_recompute(c: &RecomputeReport) {
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

/// `p` with the values `--recompute` chooses stored, and the measurements behind the choice
/// (none with `rule`, or when nothing could be stored).
pub fn decide(p: GradProgram, at: Timing) -> Result<(GradProgram, Option<RecomputeReport>)> {
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
        // The program is sound; only the values it was timed on make it stop (an index out of
        // range, say), so the rule's plan stands.
        Err(TimedError::Jit(JitError::Run(v))) => {
            tracing::warn!(
                "--recompute timed: the gradient program stopped on the values it is timed on, so every cheap value is recomputed: {v}"
            );
            return Ok((p, None));
        }
        Err(e) => {
            return Err(
                anyhow::Error::new(e).context("choosing the values the gradient program stores (--recompute timed)")
            )
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
