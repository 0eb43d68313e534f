//! Per-kernel counters printed at exit: a table on stderr, or JSON into a file.

use std::fmt::Write as _;
use std::io::Write as _;

use crate::machine::{KernelCounters, Machine};

/// Writes the counters: `how` is `1` or `text` for a table on stderr, otherwise a path that
/// receives JSON.
pub fn write(m: &Machine, how: &str) -> std::io::Result<()> {
    let counters = m.counters();
    if how == "1" || how == "text" {
        std::io::stderr().write_all(table(m, &counters).as_bytes())
    } else {
        std::fs::write(how, json(m, &counters))
    }
}

fn table(m: &Machine, counters: &std::collections::BTreeMap<String, KernelCounters>) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "emulator: {} CPEs, {} LDM bytes each, {} kernels",
        m.cpes(),
        m.ldm_bytes(),
        counters.len()
    );
    let width = counters.keys().map(String::len).max().unwrap_or(0).max(6);
    let _ = writeln!(
        s,
        "{:<width$}  {:>8}  {:>10}  {:>14}  {:>10}  {:>14}  {:>9}",
        "kernel", "launches", "gets", "get bytes", "puts", "put bytes", "LDM bytes"
    );
    let mut total = KernelCounters::default();
    for (name, c) in counters {
        let _ = writeln!(
            s,
            "{name:<width$}  {:>8}  {:>10}  {:>14}  {:>10}  {:>14}  {:>9}",
            c.launches, c.gets, c.get_bytes, c.puts, c.put_bytes, c.ldm_high_water
        );
        total.launches += c.launches;
        total.merge(c);
    }
    let _ = writeln!(
        s,
        "{:<width$}  {:>8}  {:>10}  {:>14}  {:>10}  {:>14}  {:>9}",
        "total", total.launches, total.gets, total.get_bytes, total.puts, total.put_bytes, total.ldm_high_water
    );
    s
}

#[derive(serde::Serialize)]
struct Row<'a> {
    kernel: &'a str,
    #[serde(flatten)]
    counters: &'a KernelCounters,
}

fn json(m: &Machine, counters: &std::collections::BTreeMap<String, KernelCounters>) -> String {
    let kernels: Vec<Row> = counters
        .iter()
        .map(|(kernel, counters)| Row { kernel, counters })
        .collect();
    let report = serde_json::json!({"cpes": m.cpes(), "ldm_bytes": m.ldm_bytes(), "kernels": kernels});
    format!("{report}\n")
}
