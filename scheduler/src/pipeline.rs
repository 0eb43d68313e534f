//! The scheduler's pipeline: one straight-line function naming each pass.
//!
//! `SWFLOW_DUMP=<pass>` (or `all`) prints the program after that pass to stderr; passes are
//! `lower` and `schedule`. The loop-IR verifier runs after lowering and every schedule is
//! verified as it is made.

use swflow_frontend::ir::Graph;

use crate::loops::{print_program, verify_program, LoopVerifyError, Program};
use crate::lower::{lower, LowerError};
use crate::schedule::{schedule_program, ScheduleError};
use crate::target::Target;

#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error(transparent)]
    Lower(#[from] LowerError),
    #[error("internal error: lowering produced invalid loop IR: {0}")]
    Verify(#[from] LoopVerifyError),
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
}

fn dump(pass: &str, p: &Program) {
    if std::env::var("SWFLOW_DUMP").is_ok_and(|v| v == pass || v == "all") {
        eprintln!("=== after {pass} ===\n{}", print_program(p));
    }
}

/// Lowers a graph to loop IR and schedules every kernel for `target`.
pub fn compile(g: &Graph, target: &Target) -> Result<Program, PipelineError> {
    let mut p = lower(g)?;
    verify_program(&p)?;
    dump("lower", &p);
    schedule_program(&mut p, target)?;
    dump("schedule", &p);
    Ok(p)
}
