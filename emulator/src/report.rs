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
        total.gets += c.gets;
        total.get_bytes += c.get_bytes;
        total.puts += c.puts;
        total.put_bytes += c.put_bytes;
        total.ldm_high_water = total.ldm_high_water.max(c.ldm_high_water);
    }
    let _ = writeln!(
        s,
        "{:<width$}  {:>8}  {:>10}  {:>14}  {:>10}  {:>14}  {:>9}",
        "total", total.launches, total.gets, total.get_bytes, total.puts, total.put_bytes, total.ldm_high_water
    );
    s
}

/// JSON string literal of `s`.
fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn json(m: &Machine, counters: &std::collections::BTreeMap<String, KernelCounters>) -> String {
    let rows: Vec<String> = counters
        .iter()
        .map(|(name, c)| {
            format!(
                "{{\"kernel\":{},\"launches\":{},\"gets\":{},\"get_bytes\":{},\"puts\":{},\"put_bytes\":{},\"arg_gets\":{},\"direct_reads\":{},\"direct_writes\":{},\"ldm_high_water\":{}}}",
                quote(name),
                c.launches,
                c.gets,
                c.get_bytes,
                c.puts,
                c.put_bytes,
                c.arg_gets,
                c.direct_reads,
                c.direct_writes,
                c.ldm_high_water
            )
        })
        .collect();
    format!(
        "{{\"cpes\":{},\"ldm_bytes\":{},\"kernels\":[{}]}}\n",
        m.cpes(),
        m.ldm_bytes(),
        rows.join(",")
    )
}
