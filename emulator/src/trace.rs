//! Chrome trace JSON (opened by Perfetto and chrome://tracing) of the modelled time.
//!
//! One process, the core group; one track per CPE, holding each launch with the kernel's name
//! and inside it the CPE's compute, DMA waits, direct accesses and barrier waits; one track
//! for the DMA queue with every transfer of data it served; and beside it, from the first
//! transfer of gradient tape on, a "tape DMA" track with the tape transfers the same queue
//! served. Times are modelled microseconds since the program started the core group. Events
//! are written as launches are joined, so the trace of a long run never sits in memory.

use std::fs::File;
use std::io::{BufWriter, Write};

use crate::replay::{LaunchTime, Span};

/// A trace being written to a file.
pub struct TraceWriter {
    out: BufWriter<File>,
    clock_hz: f64,
    queue_track: usize,
    /// The tape track's id, and whether it has been named (at its first transfer).
    tape_track: usize,
    tape_named: bool,
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
            tape_track: cpes + 1,
            tape_named: false,
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
            if matches!(s, Span::Transfer { tape: true, .. }) && !self.tape_named {
                self.tape_named = true;
                self.meta("thread_name", self.tape_track, "tape DMA")?;
                self.sort_index(self.tape_track, self.tape_track)?;
            }
            let (label, tid, at, cycles) = match *s {
                Span::Compute { cpe, start, cycles } => ("\"compute\"", cpe, start, cycles),
                Span::DmaWait { cpe, start, cycles } => ("\"DMA wait\"", cpe, start, cycles),
                Span::Direct { cpe, start, cycles } => ("\"direct access\"", cpe, start, cycles),
                Span::Barrier { cpe, start, cycles } => ("\"barrier\"", cpe, start, cycles),
                Span::Receive { cpe, start, cycles } => ("\"register receive\"", cpe, start, cycles),
                Span::Transfer {
                    put,
                    tape,
                    start,
                    cycles,
                    ..
                } => {
                    let track = if tape { self.tape_track } else { self.queue_track };
                    (if put { "\"put\"" } else { "\"get\"" }, track, start, cycles)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn transfer(tape: bool, start: f64) -> Span {
        Span::Transfer {
            cpe: 0,
            put: false,
            tape,
            start,
            cycles: 10.0,
        }
    }

    /// What a trace shows: its named tracks as (track, name), and its complete events other
    /// than launches as (name, track).
    struct Shown {
        tracks: Vec<(u64, String)>,
        spans: Vec<(String, u64)>,
    }

    /// The trace of `launches` (each a list of spans) on two CPEs.
    fn trace(name: &str, launches: &[Vec<Span>]) -> Shown {
        let path = std::env::temp_dir().join(format!("swflow-trace-{}-{name}.json", std::process::id()));
        let mut w = TraceWriter::create(path.to_str().unwrap(), 2, 1e9).unwrap();
        let time = LaunchTime {
            span: 100.0,
            cpes: vec![Default::default(); 2],
            ..Default::default()
        };
        for spans in launches {
            w.launch("k", 0.0, &time, spans).unwrap();
        }
        w.finish().unwrap();
        let events: Vec<serde_json::Value> = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        std::fs::remove_file(&path).unwrap();
        let tracks = events
            .iter()
            .filter(|e| e["name"] == "thread_name")
            .map(|e| {
                (
                    e["tid"].as_u64().unwrap(),
                    e["args"]["name"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        let spans = events
            .iter()
            .filter(|e| e["ph"] == "X" && e["name"] != "k")
            .map(|e| (e["name"].as_str().unwrap().to_string(), e["tid"].as_u64().unwrap()))
            .collect();
        Shown { tracks, spans }
    }

    #[test]
    fn tape_transfers_have_a_track_of_their_own_once_there_are_any() {
        let Shown { tracks, .. } = trace("data", &[vec![transfer(false, 0.0)]]);
        assert_eq!(tracks.last().unwrap(), &(2, "DMA queue".to_string()));
        assert_eq!(tracks.len(), 3);
        let Shown { tracks, spans } = trace(
            "tape",
            &[
                vec![transfer(false, 0.0), transfer(true, 10.0)],
                vec![transfer(true, 0.0)],
            ],
        );
        assert_eq!(
            &tracks[2..],
            [(2, "DMA queue".to_string()), (3, "tape DMA".to_string())]
        );
        assert_eq!(
            spans,
            [("get".to_string(), 2), ("get".to_string(), 3), ("get".to_string(), 3)]
        );
    }
}
