//! Schedules: how a kernel runs on the compute cores.

use crate::loops::{Kernel, Program};

/// How a kernel's loops map onto the compute cores, LDM buffers and DMA (filled in by the
/// scheduling passes).
#[derive(Clone, Debug, PartialEq)]
pub struct Schedule {}

impl Schedule {
    /// Text lines describing the schedule, for the kernel printer.
    pub fn describe(&self, _k: &Kernel, _p: &Program) -> String {
        String::new()
    }
}
