//! The timing model's parameters and the cycles of straight-line CPE code.
//!
//! Parameters come from the target file (its `[timing]` table and the clock and peak it
//! states), which the generated program hands to the emulator as TOML text when it starts the
//! core group (see [`Spec::parse`]). Each parameter in the built-in target files carries a
//! comment naming its published source, or saying that it is an assumption.
//!
//! Compute time follows from the operations the code executes, reported by the code itself
//! as [`Ops`] per straight-line stretch times the number of executions. A CPE has two
//! in-order pipelines that issue together: P0 takes floating-point and vector arithmetic,
//! P1 takes LDM loads and stores and branches, and integer arithmetic goes to either. A
//! stretch therefore takes the longest of: P0's occupancy (divisions and square roots are not
//! pipelined and hold P0 for their whole latency), P1's instructions, half of all
//! instructions (two issue per cycle), and the latency of its loop-carried dependence (an
//! accumulator updated every iteration waits for the previous update). Calls to library
//! routines (exp, log, ...) add their cost on top.

use std::ops::{Add, AddAssign, Mul};

use serde::{Deserialize, Serialize};

/// What the emulator needs to know about the machine it times.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    /// CPE clock, Hz.
    pub clock_hz: f64,
    /// Peak floating-point operations per cycle of one CPE (for the roofline).
    pub flops_per_cycle: f64,
    pub timing: Timing,
}

/// Cycle costs of one CPE and of the core group's memory system.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Timing {
    /// Cycles from the issue of a floating-point instruction to its result.
    pub fp_latency_cycles: f64,
    /// Cycles a division holds P0 (not pipelined); also integer division, done in software.
    pub div_cycles: f64,
    /// Cycles a square root holds P0 (not pipelined).
    pub sqrt_cycles: f64,
    /// Cycles of one call to a library routine (exp, log, tanh, erf, pow, sin, cos, fmod).
    pub call_cycles: f64,
    /// Cycles of one direct main-memory load (gload) and store (gstore).
    pub gload_cycles: f64,
    pub gstore_cycles: f64,
    /// Cycles from `athread_spawn` until the CPEs run, and from the last CPE's return until
    /// `athread_join` returns.
    pub spawn_cycles: f64,
    pub join_cycles: f64,
    /// Cycles of a barrier across the CPEs once the last one has arrived.
    pub barrier_cycles: f64,
    /// Cycles from a register-communication put until its receivers can take the message;
    /// absent on a machine without register communication. The put and the get themselves
    /// issue on P1 and are charged by the code as a store and a load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regcomm_latency_cycles: Option<f64>,
    /// A broadcast of a block of LDM along a mesh row or column by remote LDM access (on a
    /// machine without register communication): cycles until it reaches the line's LDMs
    /// (its synchronisations of the line included), and bytes per cycle; absent on a machine
    /// without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rma_latency_cycles: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rma_bytes_per_cycle: Option<f64>,
    pub dma: DmaTiming,
}

/// The core group's DMA: one queue that serves every CPE's transfers in the order they were
/// issued. A transfer occupies the queue for a per-block cost per contiguous block plus its
/// bytes, rounded up to whole lines, over the bandwidth; it completes a latency later.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DmaTiming {
    /// Memory transaction size, bytes: every block moves the lines it touches.
    pub line_bytes: u64,
    pub get_block_cycles: f64,
    pub put_block_cycles: f64,
    pub get_bytes_per_cycle: f64,
    pub put_bytes_per_cycle: f64,
    pub get_latency_cycles: f64,
    pub put_latency_cycles: f64,
}

impl Spec {
    /// Parses and checks the TOML text of a machine description.
    pub fn parse(text: &str) -> Result<Spec, String> {
        let s: Spec = toml::from_str(text).map_err(|e| e.to_string())?;
        s.check()?;
        Ok(s)
    }

    /// Every number must be finite; rates positive, costs not negative.
    pub fn check(&self) -> Result<(), String> {
        let t = &self.timing;
        let d = &t.dma;
        let positive = [
            ("clock_hz", self.clock_hz),
            ("flops_per_cycle", self.flops_per_cycle),
            ("timing.dma.get_bytes_per_cycle", d.get_bytes_per_cycle),
            ("timing.dma.put_bytes_per_cycle", d.put_bytes_per_cycle),
        ];
        let costs = [
            ("timing.fp_latency_cycles", t.fp_latency_cycles),
            ("timing.div_cycles", t.div_cycles),
            ("timing.sqrt_cycles", t.sqrt_cycles),
            ("timing.call_cycles", t.call_cycles),
            ("timing.gload_cycles", t.gload_cycles),
            ("timing.gstore_cycles", t.gstore_cycles),
            ("timing.spawn_cycles", t.spawn_cycles),
            ("timing.join_cycles", t.join_cycles),
            ("timing.barrier_cycles", t.barrier_cycles),
            ("timing.dma.get_block_cycles", d.get_block_cycles),
            ("timing.dma.put_block_cycles", d.put_block_cycles),
            ("timing.dma.get_latency_cycles", d.get_latency_cycles),
            ("timing.dma.put_latency_cycles", d.put_latency_cycles),
        ];
        if let Some((name, v)) = positive.iter().find(|(_, v)| !(v.is_finite() && *v > 0.0)) {
            return Err(format!("{name} must be a positive number, not {v}"));
        }
        if let Some(v) = t.regcomm_latency_cycles.filter(|v| !(v.is_finite() && *v >= 0.0)) {
            return Err(format!(
                "timing.regcomm_latency_cycles must be a number of cycles, not {v}"
            ));
        }
        match (t.rma_latency_cycles, t.rma_bytes_per_cycle) {
            (None, None) => {}
            (Some(l), Some(b)) if l.is_finite() && l >= 0.0 && b.is_finite() && b > 0.0 => {}
            (l, b) => {
                return Err(format!(
                    "timing.rma_latency_cycles (cycles) and timing.rma_bytes_per_cycle (positive) go together, not {l:?} and {b:?}"
                ))
            }
        }
        if let Some((name, v)) = costs.iter().find(|(_, v)| !(v.is_finite() && *v >= 0.0)) {
            return Err(format!("{name} must be a number of cycles, not {v}"));
        }
        if d.line_bytes == 0 {
            return Err("timing.dma.line_bytes must be positive".into());
        }
        Ok(())
    }
}

/// The operations of one straight-line stretch of CPE code, by class, as the code that
/// executes it counts them (the C layout of `struct swflow_ops` in `swflow_emu.h`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ops {
    /// Floating-point operations performed (reports only: a vector operation counts each
    /// lane, a fused multiply-add two).
    pub flops: u32,
    /// Pipelined P0 instructions: float and vector add, subtract, multiply, fused
    /// multiply-add, compare, convert.
    pub fp: u32,
    /// Divisions (float, or integer in software) and square roots.
    pub div: u32,
    pub sqrt: u32,
    /// Calls to library routines.
    pub calls: u32,
    /// LDM loads and stores, scalar or vector.
    pub load: u32,
    pub store: u32,
    /// Integer and address arithmetic.
    pub integer: u32,
    /// Branches, taken or not.
    pub branch: u32,
    /// Floating-point instructions on the loop-carried dependence: each execution waits for
    /// the previous one's result.
    pub carried: u32,
}

impl Ops {
    /// No operations (`Ops::default()` for constants).
    pub const ZERO: Ops = Ops {
        flops: 0,
        fp: 0,
        div: 0,
        sqrt: 0,
        calls: 0,
        load: 0,
        store: 0,
        integer: 0,
        branch: 0,
        carried: 0,
    };

    /// Every class with its count, named as the fields of `struct swflow_ops`.
    pub fn fields(&self) -> [(&'static str, u32); 10] {
        [
            ("flops", self.flops),
            ("fp", self.fp),
            ("div", self.div),
            ("sqrt", self.sqrt),
            ("calls", self.calls),
            ("load", self.load),
            ("store", self.store),
            ("integer", self.integer),
            ("branch", self.branch),
            ("carried", self.carried),
        ]
    }

    /// `f` applied class by class to `self` and `o`.
    fn zip(self, o: Ops, f: impl Fn(u32, u32) -> u32) -> Ops {
        Ops {
            flops: f(self.flops, o.flops),
            fp: f(self.fp, o.fp),
            div: f(self.div, o.div),
            sqrt: f(self.sqrt, o.sqrt),
            calls: f(self.calls, o.calls),
            load: f(self.load, o.load),
            store: f(self.store, o.store),
            integer: f(self.integer, o.integer),
            branch: f(self.branch, o.branch),
            carried: f(self.carried, o.carried),
        }
    }
}

/// Both stretches, one after the other.
impl Add for Ops {
    type Output = Ops;
    fn add(self, o: Ops) -> Ops {
        self.zip(o, |a, b| a + b)
    }
}

impl AddAssign for Ops {
    fn add_assign(&mut self, o: Ops) {
        *self = *self + o;
    }
}

/// The stretch `k` times over.
impl Mul<u32> for Ops {
    type Output = Ops;
    fn mul(self, k: u32) -> Ops {
        self.zip(Ops::default(), |a, _| a * k)
    }
}

impl Timing {
    /// Whether the CPEs of a mesh line can broadcast blocks of LDM to each other: by register
    /// communication or by remote LDM access.
    pub fn broadcasts(&self) -> bool {
        self.regcomm_latency_cycles.is_some() || self.rma_latency_cycles.is_some()
    }

    /// Cycles from the start of a broadcast of `bytes` along a mesh line until its receivers
    /// can take them: register communication's latency (the code moves the registers and
    /// charges them), else remote LDM access's latency and the bytes at its bandwidth.
    pub fn broadcast_cycles(&self, bytes: u64) -> f64 {
        match (
            self.regcomm_latency_cycles,
            self.rma_latency_cycles,
            self.rma_bytes_per_cycle,
        ) {
            (Some(l), _, _) => l,
            (None, Some(l), Some(b)) => l + bytes as f64 / b,
            _ => 0.0,
        }
    }

    /// For a posted remote-LDM broadcast of `bytes` (one that only its sender calls), the
    /// cycles its line carries it, and the cycles from when the line takes it up until it has
    /// arrived. The collective call's latency ([`Timing::broadcast_cycles`]) holds two line
    /// syncs of a barrier's cycles each around the transfer, as the SDK's collective calls
    /// sync the line before and after it; a posted broadcast has the rest. (0, 0) without
    /// remote LDM access.
    pub fn posted_cycles(&self, bytes: u64) -> (f64, f64) {
        match (self.rma_latency_cycles, self.rma_bytes_per_cycle) {
            (Some(l), Some(b)) => {
                let carried = bytes as f64 / b;
                (carried, carried + (l - 2.0 * self.barrier_cycles).max(0.0))
            }
            _ => (0.0, 0.0),
        }
    }

    /// Cycles of one execution of `ops` on a CPE.
    pub fn cycles(&self, ops: &Ops) -> f64 {
        let p0 = ops.fp as f64 + ops.div as f64 * self.div_cycles + ops.sqrt as f64 * self.sqrt_cycles;
        let p1 = (ops.load + ops.store + ops.branch) as f64;
        let dual = (p0 + p1 + ops.integer as f64) / 2.0;
        let carried = ops.carried as f64 * self.fp_latency_cycles;
        p0.max(p1).max(dual).max(carried) + ops.calls as f64 * self.call_cycles
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_timing as timing;

    #[test]
    fn two_pipelines_issue_together() {
        let t = timing();
        // Four float instructions and four loads pair up: four cycles.
        let ops = Ops {
            fp: 4,
            load: 4,
            ..Ops::default()
        };
        assert_eq!(t.cycles(&ops), 4.0);
        // Integer work fills the idle slots of either pipeline, then costs half a cycle each.
        let ops = Ops {
            fp: 4,
            integer: 4,
            ..Ops::default()
        };
        assert_eq!(t.cycles(&ops), 4.0);
        let ops = Ops {
            fp: 4,
            integer: 10,
            ..Ops::default()
        };
        assert_eq!(t.cycles(&ops), 7.0);
    }

    #[test]
    fn division_holds_its_pipeline_and_calls_add_up() {
        let t = timing();
        let ops = Ops {
            fp: 1,
            div: 1,
            load: 2,
            calls: 1,
            ..Ops::default()
        };
        assert_eq!(t.cycles(&ops), 31.0 + 100.0);
    }

    #[test]
    fn an_accumulator_waits_for_its_previous_value() {
        let t = timing();
        let ops = Ops {
            fp: 2,
            load: 2,
            integer: 2,
            branch: 1,
            carried: 1,
            ..Ops::default()
        };
        assert_eq!(t.cycles(&ops), 7.0);
    }

    #[test]
    fn bad_parameters_are_named() {
        let mut s = Spec {
            clock_hz: 1.45e9,
            flops_per_cycle: 8.0,
            timing: timing(),
        };
        assert!(s.check().is_ok());
        s.timing.dma.put_bytes_per_cycle = 0.0;
        assert!(s.check().unwrap_err().contains("put_bytes_per_cycle"));
        s.timing.dma.put_bytes_per_cycle = 1.0;
        s.timing.div_cycles = f64::NAN;
        assert!(s.check().unwrap_err().contains("div_cycles"));
    }
}
