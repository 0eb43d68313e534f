//! Chrome trace JSON (opened by Perfetto and chrome://tracing) of the modelled time.
//!
//! One process, the core group; one track per CPE, holding each launch with the kernel's name
//! and inside it the CPE's compute, DMA waits, direct accesses and barrier waits; and one
//! track for the DMA queue with every transfer it served. Times are modelled microseconds
//! since the program started the core group. Events are written as launches are joined, so
//! the trace of a long run never sits in memory.

use std::fs::File;
use std::io::{BufWriter, Write};

use crate::replay::{LaunchTime, Span};

/// A trace being written to a file.
pub struct TraceWriter {
    out: BufWriter<File>,
    clock_hz: f64,
    queue_track: usize,
    /// Whether an event has been written (every later one is preceded by a comma).
    started: bool,
}

impl TraceWriter {
    /// Starts a trace of a core group of `cpes` CPEs at `clock_hz`.
    pub fn create(path: &str, cpes: usize, clock_hz: f64) -> std::io::Result<TraceWriter> {
        let mut w = TraceWriter {
            out: BufWriter::new(File::create(path)?),
            clock_hz,
            queue_track: cpes,
            started: false,
        };
        w.out.write_all(b"[")?;
        w.meta("process_name", 0, "core group")?;
        for c in 0..cpes {
            w.meta("thread_name", c, &format!("CPE {c}"))?;
            w.sort_index(c, c)?;
        }
        w.meta("thread_name", cpes, "DMA queue")?;
        w.sort_index(cpes, cpes)?;
        Ok(w)
    }

    /// Writes one event (a JSON object).
    fn event(&mut self, json: std::fmt::Arguments) -> std::io::Result<()> {
        self.out.write_all(if self.started { b",\n" } else { b"\n" })?;
        self.started = true;
        self.out.write_fmt(json)
    }

    fn meta(&mut self, what: &str, tid: usize, name: &str) -> std::io::Result<()> {
        let name = serde_json::to_string(name).map_err(std::io::Error::other)?;
        self.event(format_args!(
            "{{\"name\":\"{what}\",\"ph\":\"M\",\"pid\":0,\"tid\":{tid},\"args\":{{\"name\":{name}}}}}"
        ))
    }

    fn sort_index(&mut self, tid: usize, index: usize) -> std::io::Result<()> {
        self.event(format_args!(
            "{{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":0,\"tid\":{tid},\"args\":{{\"sort_index\":{index}}}}}"
        ))
    }

    fn us(&self, cycles: f64) -> f64 {
        cycles / self.clock_hz * 1e6
    }

    fn span(&mut self, name: &str, tid: usize, start: f64, cycles: f64) -> std::io::Result<()> {
        let (ts, dur) = (self.us(start), self.us(cycles));
        self.event(format_args!(
            "{{\"name\":{name},\"ph\":\"X\",\"pid\":0,\"tid\":{tid},\"ts\":{ts:.4},\"dur\":{dur:.4}}}"
        ))
    }

    /// Writes one launch of `kernel` whose CPEs started at host cycle `start`.
    pub fn launch(&mut self, kernel: &str, start: f64, time: &LaunchTime, spans: &[Span]) -> std::io::Result<()> {
        let name = serde_json::to_string(kernel).map_err(std::io::Error::other)?;
        for c in 0..time.cpes.len() {
            self.span(&name, c, start, time.span)?;
        }
        for s in spans {
            let (label, tid, at, cycles) = match *s {
                Span::Compute { cpe, start, cycles } => ("\"compute\"", cpe, start, cycles),
                Span::DmaWait { cpe, start, cycles } => ("\"DMA wait\"", cpe, start, cycles),
                Span::Direct { cpe, start, cycles } => ("\"direct access\"", cpe, start, cycles),
                Span::Barrier { cpe, start, cycles } => ("\"barrier\"", cpe, start, cycles),
                Span::Transfer { put, start, cycles, .. } => {
                    (if put { "\"put\"" } else { "\"get\"" }, self.queue_track, start, cycles)
                }
            };
            if cycles > 0.0 {
                self.span(label, tid, start + at, cycles)?;
            }
        }
        Ok(())
    }

    /// Ends the JSON array and flushes the file.
    pub fn finish(&mut self) -> std::io::Result<()> {
        self.out.write_all(b"\n]\n")?;
        self.out.flush()
    }
}
