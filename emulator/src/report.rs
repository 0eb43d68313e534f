//! Per-kernel counters and modelled time, printed at exit: a table on stderr, or JSON into a
//! file.
//!
//! The derived figures, per kernel:
//! - `modelled_cycles`: spawn, the slowest CPE and join, over all launches; `modelled_seconds`
//!   at the target's clock.
//! - `gflops`, `dma_gbps`: the kernel's floating-point operations and DMA bytes over its
//!   modelled seconds.
//! - `compute`, `dma_wait`, `direct`, `idle`: fractions of its CPEs' time (CPEs times the
//!   slowest CPE's span) spent computing, waiting for DMA, in direct main-memory accesses,
//!   and waiting at barriers or for the slowest CPE.
//! - `bound`: `compute` when computing takes at least as much CPE time as waiting on memory
//!   (DMA and direct accesses); otherwise `dma` when the DMA queue was busy at least half of
//!   the span (the memory system is the limit), else `latency` (CPEs wait for transfers that
//!   leave the memory system mostly idle: too few or too small transfers in flight).
//! - `roofline_fraction`: the larger of the kernel's two lower bounds, its flops at the
//!   CPEs' peak and its DMA bytes at the queue's bandwidths (no per-block cost, no partial
//!   lines), over its modelled cycles: its GFLOPS over the roofline's at its arithmetic
//!   intensity. 1 is on the roofline.
//! - `dma_queue_seconds`: the modelled seconds the DMA queue spent serving the kernel's
//!   transfers; `dma_block_seconds` the part of them spent on the per-block costs (one per
//!   contiguous block of a transfer), the rest moving memory lines. Where the queue bounds a
//!   kernel, its block seconds are what short blocks cost it beyond the roofline.
//! - `tape_seconds`: the modelled seconds the DMA queue spent serving the kernel's transfers
//!   of gradient tape (whose counts and bytes are the `tape_*` counters; both are part of the
//!   DMA figures above too).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;

use serde::Serialize;

use crate::machine::{KernelCounters, KernelStats, KernelTime, Machine};
use crate::timing::Spec;

/// Writes the report: `how` is `1` or `text` for a table on stderr, otherwise a path that
/// receives JSON.
pub fn write(m: &Machine, how: &str) -> std::io::Result<()> {
    let report = Report::new(m.cpes(), m.ldm_bytes(), m.spec(), &m.stats());
    if how == "1" || how == "text" {
        std::io::stderr().write_all(report.table().as_bytes())
    } else {
        let mut text = serde_json::to_string(&report).map_err(std::io::Error::other)?;
        text.push('\n');
        std::fs::write(how, text)
    }
}

/// Modelled time of one kernel, derived from its cycles.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Timed {
    pub modelled_cycles: f64,
    pub modelled_seconds: f64,
    pub gflops: f64,
    pub dma_bytes: usize,
    pub dma_gbps: f64,
    pub compute: f64,
    pub dma_wait: f64,
    pub direct: f64,
    pub idle: f64,
    pub bound: &'static str,
    pub roofline_fraction: f64,
    pub dma_queue_seconds: f64,
    pub dma_block_seconds: f64,
    pub tape_seconds: f64,
}

impl Timed {
    fn new(c: &KernelCounters, t: &KernelTime, cpes: usize, spec: &Spec) -> Timed {
        let seconds = t.modelled_cycles / spec.clock_hz;
        let per_second = |v: f64| if seconds > 0.0 { v / seconds / 1e9 } else { 0.0 };
        let dma_bytes = c.get_bytes + c.put_bytes;
        let cpe_cycles = t.compute_cycles + t.dma_wait_cycles + t.direct_cycles + t.idle_cycles;
        let share = |v: f64| if cpe_cycles > 0.0 { v / cpe_cycles } else { 0.0 };
        let bound = if t.compute_cycles >= t.dma_wait_cycles + t.direct_cycles {
            "compute"
        } else if t.queue_busy_cycles >= 0.5 * t.span_cycles {
            "dma"
        } else {
            "latency"
        };
        let compute_bound = c.flops as f64 / (cpes as f64 * spec.flops_per_cycle);
        let roofline_fraction = if t.modelled_cycles > 0.0 {
            compute_bound.max(t.dma_bound_cycles) / t.modelled_cycles
        } else {
            0.0
        };
        Timed {
            modelled_cycles: t.modelled_cycles,
            modelled_seconds: seconds,
            gflops: per_second(c.flops as f64),
            dma_bytes,
            dma_gbps: per_second(dma_bytes as f64),
            compute: share(t.compute_cycles),
            dma_wait: share(t.dma_wait_cycles),
            direct: share(t.direct_cycles),
            idle: share(t.idle_cycles),
            bound,
            roofline_fraction,
            dma_queue_seconds: t.queue_busy_cycles / spec.clock_hz,
            dma_block_seconds: t.block_queue_cycles / spec.clock_hz,
            tape_seconds: t.tape_queue_cycles / spec.clock_hz,
        }
    }
}

/// One kernel's row.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    pub kernel: String,
    #[serde(flatten)]
    pub counters: KernelCounters,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub time: Option<Timed>,
}

/// Everything the emulator reports at exit.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    pub cpes: usize,
    pub ldm_bytes: usize,
    /// Present when time is modelled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock_hz: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_gflops: Option<f64>,
    pub kernels: Vec<Row>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_modelled_seconds: Option<f64>,
    /// All kernels together, as one row named `total`.
    pub total: Row,
}

impl Report {
    pub fn new(cpes: usize, ldm_bytes: usize, spec: Option<&Spec>, stats: &BTreeMap<String, KernelStats>) -> Report {
        let row = |kernel: &str, s: &KernelStats| Row {
            kernel: kernel.to_string(),
            counters: s.counters.clone(),
            time: spec.map(|spec| Timed::new(&s.counters, &s.time, cpes, spec)),
        };
        let mut total = KernelStats::default();
        for s in stats.values() {
            total.counters.launches += s.counters.launches;
            total.counters.merge(&s.counters);
            total.time.add(&s.time);
        }
        let total = row("total", &total);
        Report {
            cpes,
            ldm_bytes,
            clock_hz: spec.map(|s| s.clock_hz),
            peak_gflops: spec.map(|s| cpes as f64 * s.flops_per_cycle * s.clock_hz / 1e9),
            kernels: stats.iter().map(|(k, s)| row(k, s)).collect(),
            total_modelled_seconds: total.time.as_ref().map(|t| t.modelled_seconds),
            total,
        }
    }

    /// The report as a table: counters, then modelled time when there is any.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "emulator: {} CPEs, {} LDM bytes each, {} kernels",
            self.cpes,
            self.ldm_bytes,
            self.kernels.len()
        );
        let width = self.kernels.iter().map(|r| r.kernel.len()).max().unwrap_or(0).max(6);
        let _ = writeln!(
            s,
            "{:<width$}  {:>8}  {:>10}  {:>14}  {:>10}  {:>14}  {:>9}",
            "kernel", "launches", "gets", "get bytes", "puts", "put bytes", "LDM bytes"
        );
        for r in self.kernels.iter().chain([&self.total]) {
            let c = &r.counters;
            let _ = writeln!(
                s,
                "{:<width$}  {:>8}  {:>10}  {:>14}  {:>10}  {:>14}  {:>9}",
                r.kernel, c.launches, c.gets, c.get_bytes, c.puts, c.put_bytes, c.ldm_high_water
            );
        }
        self.tape_table(&mut s, width);
        if self.total.time.is_none() {
            return s;
        }
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "{:<width$}  {:>12}  {:>8}  {:>8}  {:>8}  {:>8}  {:>8}  {:>8}  {:>7}  {:>8}",
            "kernel", "modelled s", "GFLOPS", "DMA GB/s", "compute", "DMA wait", "direct", "idle", "bound", "roofline"
        );
        for r in self.kernels.iter().chain([&self.total]) {
            if let Some(t) = &r.time {
                let pct = |v: f64| format!("{:.1}%", 100.0 * v);
                let _ = writeln!(
                    s,
                    "{:<width$}  {:>12.6e}  {:>8.3}  {:>8.3}  {:>8}  {:>8}  {:>8}  {:>8}  {:>7}  {:>8}",
                    r.kernel,
                    t.modelled_seconds,
                    t.gflops,
                    t.dma_gbps,
                    pct(t.compute),
                    pct(t.dma_wait),
                    pct(t.direct),
                    pct(t.idle),
                    t.bound,
                    pct(t.roofline_fraction)
                );
            }
        }
        if let Some(total) = self.total_modelled_seconds {
            let _ = writeln!(s, "total modelled time: {total:.6e} s");
        }
        s
    }

    /// The tape traffic of the kernels that have any, and the total, when there is any.
    fn tape_table(&self, s: &mut String, width: usize) {
        let tape = |c: &KernelCounters| c.tape_gets + c.tape_puts > 0;
        if !tape(&self.total.counters) {
            return;
        }
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "{:<width$}  {:>10}  {:>14}  {:>10}  {:>14}  {:>12}",
            "kernel", "tape gets", "tape get bytes", "tape puts", "tape put bytes", "tape queue s"
        );
        for r in self.kernels.iter().chain([&self.total]).filter(|r| tape(&r.counters)) {
            let c = &r.counters;
            let seconds = r
                .time
                .as_ref()
                .map_or("-".to_string(), |t| format!("{:.6e}", t.tape_seconds));
            let _ = writeln!(
                s,
                "{:<width$}  {:>10}  {:>14}  {:>10}  {:>14}  {:>12}",
                r.kernel, c.tape_gets, c.tape_get_bytes, c.tape_puts, c.tape_put_bytes, seconds
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> Spec {
        Spec {
            clock_hz: 1e9,
            flops_per_cycle: 8.0,
            timing: crate::test_timing(),
        }
    }

    fn kernel(tape_gets: usize, tape_queue_cycles: f64) -> KernelStats {
        KernelStats {
            counters: KernelCounters {
                launches: 1,
                gets: 4,
                get_bytes: 4096,
                tape_gets,
                tape_get_bytes: 512 * tape_gets,
                ..KernelCounters::default()
            },
            time: KernelTime {
                modelled_cycles: 5000.0,
                span_cycles: 5000.0,
                queue_busy_cycles: 3000.0,
                tape_queue_cycles,
                block_queue_cycles: 800.0,
                ..KernelTime::default()
            },
        }
    }

    #[test]
    fn rows_and_the_total_carry_the_tape_traffic() {
        let stats = BTreeMap::from([
            ("a".to_string(), kernel(2, 1000.0)),
            ("b".to_string(), kernel(1, 500.0)),
        ]);
        let r = Report::new(2, 4096, Some(&spec()), &stats);
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["kernels"][0]["tape_gets"], 2);
        assert_eq!(json["kernels"][1]["tape_get_bytes"], 512);
        assert_eq!(json["kernels"][0]["tape_seconds"], 1e-6);
        assert_eq!(json["total"]["tape_gets"], 3);
        assert_eq!(json["total"]["tape_get_bytes"], 1536);
        assert_eq!(json["total"]["tape_puts"], 0);
        assert_eq!(json["total"]["tape_seconds"], 1.5e-6);
        assert_eq!(json["total"]["get_bytes"], 8192, "tape bytes are in the totals already");
        let table = r.table();
        assert!(table.contains("tape get bytes"), "{table}");
        assert!(table
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["total", "3", "1536", "0", "0", "1.500000e-6"]));
    }

    #[test]
    fn rows_and_the_total_carry_the_queue_time_and_its_block_costs() {
        let stats = BTreeMap::from([("a".to_string(), kernel(0, 0.0)), ("b".to_string(), kernel(1, 500.0))]);
        let json = serde_json::to_value(Report::new(2, 4096, Some(&spec()), &stats)).unwrap();
        assert_eq!(json["kernels"][0]["dma_queue_seconds"], 3e-6);
        assert_eq!(json["kernels"][0]["dma_block_seconds"], 8e-7);
        assert_eq!(json["total"]["dma_queue_seconds"], 6e-6);
        assert_eq!(json["total"]["dma_block_seconds"], 1.6e-6);
    }

    #[test]
    fn a_table_without_tape_traffic_has_no_tape_lines() {
        let stats = BTreeMap::from([("a".to_string(), kernel(0, 0.0))]);
        let table = Report::new(2, 4096, Some(&spec()), &stats).table();
        assert!(!table.contains("tape"), "{table}");
    }
}
