//! The scheduler's pipeline: one straight-line function naming each pass.
//!
//! `SWFLOW_DUMP=<pass>` (or `all`) prints the graph or program after that pass to stderr;
//! passes are `simplify` (the graph), `fuse` (the fusion plan: which nodes each kernel holds),
//! `lower`, `split` (reductions cut into per-CPE partials and their sum), `elide` (copies into
//! a concatenation's slices removed, with the default fusion and no tape), `schedule` (every
//! kernel scheduled, then, without a tape, the reductions whose schedules refetch their
//! operands split as `split` splits) and, for a gradient program with tape options, `tape`
//! (the saved tensors and the mirrored readers).
//! The loop-IR verifier runs after lowering and every schedule is verified as it is made.

use swflow_frontend::fuse::{plan, print_plan, unfused};
use swflow_frontend::ir::{print, Graph};
use swflow_frontend::simplify::simplify;

use crate::elide::elide_copies;
use crate::loops::{print_program, verify_program, LoopVerifyError, Program};
use crate::lower::{lower, lower_fused, LowerError};
use crate::schedule::pack::pack_constants;
use crate::schedule::split::{split_reductions, split_refetching};
use crate::schedule::{schedule_program, ScheduleError};
use crate::tape::{plan_tape, TapeOptions};
use crate::target::Target;

#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error(transparent)]
    Lower(#[from] LowerError),
    #[error("internal error: lowering produced invalid loop IR: {0}")]
    Verify(#[from] LoopVerifyError),
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    #[error("the gradient tape: {0}")]
    Tape(String),
}

/// How much of the graph-level optimisation runs before lowering.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Fuse {
    /// The graph as imported: one kernel per primitive.
    None,
    /// The graph simplified ([`simplify`]), then one kernel per primitive.
    Simplify,
    /// The graph simplified ([`simplify`]), then primitives fused into shared kernels by the
    /// rules of [`swflow_frontend::fuse::RULES`].
    #[default]
    Default,
}

/// The pipeline's options.
#[derive(Clone, Debug, Default)]
pub struct Options {
    pub fuse: Fuse,
    /// For a gradient program: how its tape travels.
    pub tape: Option<TapeOptions>,
}

fn dumping(pass: &str) -> bool {
    std::env::var("SWFLOW_DUMP").is_ok_and(|v| v == pass || v == "all")
}

fn dump(pass: &str, p: &Program) {
    if dumping(pass) {
        eprintln!("=== after {pass} ===\n{}", print_program(p));
    }
}

/// Lowers a graph to loop IR and schedules every kernel for `target`, with the default
/// options.
pub fn compile(g: &Graph, target: &Target) -> Result<Program, PipelineError> {
    compile_with(g, target, Options::default())
}

/// Lowers a graph to loop IR and schedules every kernel for `target`.
pub fn compile_with(g: &Graph, target: &Target, options: Options) -> Result<Program, PipelineError> {
    let mut p = match options.fuse {
        Fuse::None => lower(g)?,
        Fuse::Simplify | Fuse::Default => {
            let g = simplify(g);
            if dumping("simplify") {
                eprintln!("=== after simplify ===\n{}", print(&g));
            }
            let plan = match options.fuse {
                Fuse::Simplify => unfused(&g),
                _ => plan(&g),
            };
            if dumping("fuse") {
                eprintln!("=== after fuse ===\n{}", print_plan(&g, &plan));
            }
            lower_fused(&g, &plan)?
        }
    };
    verify_program(&p)?;
    dump("lower", &p);
    split_reductions(&mut p, target);
    verify_program(&p)?;
    dump("split", &p);
    if options.fuse == Fuse::Default && options.tape.is_none() {
        elide_copies(&mut p, target);
        verify_program(&p)?;
        dump("elide", &p);
    }
    schedule_program(&mut p, target)?;
    if options.tape.is_none() {
        split_refetching(&mut p, target)?;
        pack_constants(&mut p, target);
    }
    dump("schedule", &p);
    if let Some(t) = &options.tape {
        let plan = plan_tape(&mut p, target, t).map_err(PipelineError::Tape)?;
        if dumping("tape") {
            eprintln!("=== after tape ===\n{}", plan.describe(&p));
        }
        p.tape = Some(plan);
    }
    Ok(p)
}
