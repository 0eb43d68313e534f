//! Modelled time of one launch.
//!
//! While a kernel runs, each CPE thread only records what it does ([`Log`]): stretches of
//! compute, direct main-memory accesses, DMA issues, waits and barriers. At the join the logs
//! are replayed together in modelled-time order: the CPE with the earliest clock takes its
//! next step (ties go to the lower CPE id), so transfers reach the one DMA queue of the core
//! group in the order of their modelled issue times, whatever order the threads really ran
//! in. The same program and inputs therefore give bit-identical cycles.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::mesh::{Line, MESH_SIDE};
use crate::timing::Timing;

/// One thing a CPE did, in program order.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Event {
    /// Cycles of computation.
    Compute(f64),
    /// Cycles of direct main-memory accesses (gload/gstore latency).
    Direct(f64),
    /// A transfer issued on reply counter `reply`: `blocks` contiguous blocks that touch
    /// `lines` memory lines in all; `tape` when it carries gradient tape.
    Dma {
        put: bool,
        blocks: u64,
        lines: u64,
        reply: usize,
        tape: bool,
    },
    /// A wait for every transfer issued on `reply` and not yet waited for.
    Wait { reply: usize },
    /// A barrier across the launch's CPEs.
    Barrier,
    /// A register-communication put, or a block broadcast, of `bytes` along `line` to the
    /// CPEs of the bit set `to`.
    Send { line: Line, to: u64, bytes: u64 },
    /// A register-communication get along `line`: it waits for the oldest message there.
    /// With `posted`, the arrival of a posted block ([`Event::Post`]), even where broadcasts
    /// are otherwise collectives.
    Receive { line: Line, posted: bool },
    /// A remote-LDM broadcast of `bytes` along `line` to the CPEs of the bit set `to` that
    /// only its sender calls: it waits for the line to be free and moves on.
    Post { line: Line, to: u64, bytes: u64 },
    /// A sync of the CPEs of this CPE's row or column.
    LineSync { line: Line },
}

/// A CPE's events during one launch; consecutive stretches of the same kind merge.
#[derive(Debug, Default)]
pub(crate) struct Log {
    pub events: Vec<Event>,
}

impl Log {
    pub fn compute(&mut self, cycles: f64) {
        match self.events.last_mut() {
            Some(Event::Compute(c)) => *c += cycles,
            _ => self.events.push(Event::Compute(cycles)),
        }
    }

    pub fn direct(&mut self, cycles: f64) {
        match self.events.last_mut() {
            Some(Event::Direct(c)) => *c += cycles,
            _ => self.events.push(Event::Direct(cycles)),
        }
    }

    pub fn push(&mut self, e: Event) {
        self.events.push(e);
    }
}

/// What a CPE's time went to during a launch.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CpeTime {
    pub compute: f64,
    pub dma_wait: f64,
    pub direct: f64,
    /// Waiting at barriers and for register messages, and from the CPE's return to the
    /// slowest CPE's.
    pub idle: f64,
}

/// Something to draw on a timeline, in cycles since the launch started.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Span {
    /// CPE `cpe` computed.
    Compute { cpe: usize, start: f64, cycles: f64 },
    /// CPE `cpe` waited for its transfers.
    DmaWait { cpe: usize, start: f64, cycles: f64 },
    /// CPE `cpe` accessed main memory directly.
    Direct { cpe: usize, start: f64, cycles: f64 },
    /// CPE `cpe` waited at a barrier for the other CPEs.
    Barrier { cpe: usize, start: f64, cycles: f64 },
    /// CPE `cpe` waited for a register message.
    Receive { cpe: usize, start: f64, cycles: f64 },
    /// The DMA queue served a transfer of CPE `cpe` (of gradient tape when `tape`).
    Transfer {
        cpe: usize,
        put: bool,
        tape: bool,
        start: f64,
        cycles: f64,
    },
}

/// The modelled time of one launch.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LaunchTime {
    /// From the first CPE's start to the last CPE's return.
    pub span: f64,
    /// Per CPE, by id.
    pub cpes: Vec<CpeTime>,
    /// Cycles the DMA queue was serving transfers.
    pub queue_busy: f64,
    /// The part of `queue_busy` spent on transfers of gradient tape.
    pub tape_queue: f64,
    /// The part of `queue_busy` spent on the transfers' per-block costs (one per contiguous
    /// block), rather than on moving their lines.
    pub block_queue: f64,
}

/// A clock value ordered for the heap (earliest first, then the lower CPE id).
#[derive(Clone, Copy, PartialEq)]
struct Next(f64, usize);

impl Eq for Next {}

impl PartialOrd for Next {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Next {
    fn cmp(&self, other: &Self) -> Ordering {
        other.0.total_cmp(&self.0).then(other.1.cmp(&self.1))
    }
}

struct CpeState {
    clock: f64,
    pos: usize,
    /// Transfers not yet waited for: (reply counter, completion time).
    outstanding: Vec<(usize, f64)>,
    time: CpeTime,
}

/// A block broadcast by remote LDM access under way: a collective call of its root and of
/// the receivers `to` (a bit set), which all leave it together, once the last of them has
/// called and the block has moved.
struct Collective {
    line: Line,
    bytes: u64,
    /// The receivers that have not called yet.
    missing: u64,
    /// Who has called, with the clock it called at.
    arrived: Vec<(usize, f64)>,
}

impl Collective {
    /// When the call ends: the block's broadcast time after the last call.
    fn done(&self, t: &Timing) -> f64 {
        self.arrived.iter().map(|a| a.1).fold(0.0, f64::max) + t.broadcast_cycles(self.bytes)
    }
}

/// Releases every CPE of a complete collective at cycle `done`, each having waited since its
/// call (idle, traced as a receive), at its next event.
fn release(
    c: &Collective,
    done: f64,
    logs: &[Log],
    states: &mut [CpeState],
    heap: &mut BinaryHeap<Next>,
    emit: &mut dyn FnMut(Span),
) {
    for &(cpe, clock) in &c.arrived {
        let s = &mut states[cpe];
        let waited = done - clock;
        if waited > 0.0 {
            s.time.idle += waited;
            emit(Span::Receive {
                cpe,
                start: clock,
                cycles: waited,
            });
        }
        s.clock = done;
        s.pos += 1;
        if s.pos < logs[cpe].events.len() {
            heap.push(Next(done, cpe));
        }
    }
}

/// Releases every CPE waiting at a complete sync (with its clock) at cycle `done`, as a
/// barrier does.
fn release_sync(
    waiting: &[(usize, f64)],
    done: f64,
    logs: &[Log],
    states: &mut [CpeState],
    heap: &mut BinaryHeap<Next>,
    emit: &mut dyn FnMut(Span),
) {
    for &(c, clock) in waiting {
        let s = &mut states[c];
        s.time.idle += done - clock;
        emit(Span::Barrier {
            cpe: c,
            start: clock,
            cycles: done - clock,
        });
        s.clock = done;
        s.pos += 1;
        if s.pos < logs[c].events.len() {
            heap.push(Next(done, c));
        }
    }
}

/// Replays the logs of one launch (indexed by CPE id), all CPEs starting at cycle 0; `trace`
/// receives every interval when given. The logs must come from a run that completed: every
/// CPE reaches every barrier and line sync, and every broadcast's receivers call for it.
///
/// With register communication a send costs its sender nothing here (the code charges each
/// register it moves) and a receive waits for the oldest message of its line. Without it, a
/// block broadcast is remote LDM access's collective call (`CRTS_rma_row_bcast_coll`): the
/// line synchronises, the root broadcasts, and every CPE of it, the root too, waits until the
/// block has arrived; so the call ends for all of them [`Timing::broadcast_cycles`] after the
/// last of them made it. A posted broadcast (`CRTS_rma_row_ibcast`) costs its sender nothing
/// either: each row and each column carries one block at a time, in the order they are
/// posted, and a block arrives [`Timing::posted_cycles`] after the line took it up; its
/// receivers wait for it as for a register. A line sync releases the CPEs of the row or
/// column a barrier's cycles after the last of them arrived.
pub(crate) fn replay(logs: &[Log], t: &Timing, mut trace: Option<&mut dyn FnMut(Span)>) -> LaunchTime {
    let mut states: Vec<CpeState> = logs
        .iter()
        .map(|_| CpeState {
            clock: 0.0,
            pos: 0,
            outstanding: Vec::new(),
            time: CpeTime::default(),
        })
        .collect();
    let mut heap: BinaryHeap<Next> = (0..logs.len())
        .filter(|&i| !logs[i].events.is_empty())
        .map(|i| Next(0.0, i))
        .collect();
    let mut queue_free = 0.0f64;
    let mut queue_busy = 0.0;
    let mut tape_queue = 0.0;
    let mut block_queue = 0.0;
    let mut at_barrier: Vec<usize> = Vec::new();
    // Per CPE, the arrival times of the register messages and posted blocks not yet taken
    // (row, column), and the line of a receive it waits at with none there, with its clock
    // and whether it waits for a posted block.
    let mut inbox: Vec<[std::collections::VecDeque<f64>; 2]> = logs.iter().map(|_| Default::default()).collect();
    let mut parked: Vec<Option<(Line, f64, bool)>> = vec![None; logs.len()];
    // Without register communication, broadcasts are collectives; those some receiver has
    // not called yet, oldest first.
    let collectives = t.regcomm_latency_cycles.is_none();
    let mut pending: Vec<Collective> = Vec::new();
    // Per line (row, column) and index of it: when it is free to carry the next posted
    // block, and the CPEs waiting at its sync with their clocks.
    let mut line_free = [[0.0f64; MESH_SIDE]; 2];
    let mut at_sync: [[Vec<(usize, f64)>; MESH_SIDE]; 2] = Default::default();
    let mut emit = |s: Span| {
        if let Some(f) = trace.as_mut() {
            f(s)
        }
    };
    while let Some(Next(_, i)) = heap.pop() {
        let s = &mut states[i];
        let start = s.clock;
        match logs[i].events[s.pos] {
            Event::Compute(c) => {
                s.clock += c;
                s.time.compute += c;
                emit(Span::Compute {
                    cpe: i,
                    start,
                    cycles: c,
                });
            }
            Event::Direct(c) => {
                s.clock += c;
                s.time.direct += c;
                emit(Span::Direct {
                    cpe: i,
                    start,
                    cycles: c,
                });
            }
            Event::Dma {
                put,
                blocks,
                lines,
                reply,
                tape,
            } => {
                let d = &t.dma;
                let (block, rate, latency) = if put {
                    (d.put_block_cycles, d.put_bytes_per_cycle, d.put_latency_cycles)
                } else {
                    (d.get_block_cycles, d.get_bytes_per_cycle, d.get_latency_cycles)
                };
                let per_block = blocks as f64 * block;
                let service = per_block + (lines * d.line_bytes) as f64 / rate;
                let begin = queue_free.max(s.clock);
                queue_free = begin + service;
                queue_busy += service;
                block_queue += per_block;
                if tape {
                    tape_queue += service;
                }
                s.outstanding.push((reply, queue_free + latency));
                emit(Span::Transfer {
                    cpe: i,
                    put,
                    tape,
                    start: begin,
                    cycles: service,
                });
            }
            Event::Wait { reply } => {
                let mut done = s.clock;
                s.outstanding.retain(|&(r, at)| {
                    if r == reply {
                        done = done.max(at);
                    }
                    r != reply
                });
                let waited = done - s.clock;
                if waited > 0.0 {
                    s.time.dma_wait += waited;
                    emit(Span::DmaWait {
                        cpe: i,
                        start,
                        cycles: waited,
                    });
                }
                s.clock = done;
            }
            Event::Send { line, to, bytes } if collectives => {
                let mut c = Collective {
                    line,
                    bytes,
                    missing: to,
                    arrived: vec![(i, s.clock)],
                };
                // Receivers already at their call join it.
                for r in (0..logs.len()).filter(|&r| to >> r & 1 == 1) {
                    if let Some((_, clock, _)) = parked[r].filter(|p| p.0 == line && !p.2) {
                        parked[r] = None;
                        c.missing &= !(1 << r);
                        c.arrived.push((r, clock));
                    }
                }
                match c.missing {
                    0 => release(&c, c.done(t), logs, &mut states, &mut heap, &mut emit),
                    _ => pending.push(c),
                }
                continue;
            }
            Event::Post { line, to, bytes } => {
                let which = line.which(i);
                let start = line_free[line as usize][which].max(s.clock);
                let (carried, arrival) = t.posted_cycles(bytes);
                line_free[line as usize][which] = start + carried;
                for c in (0..logs.len()).filter(|&c| to >> c & 1 == 1) {
                    inbox[c][line as usize].push_back(start + arrival);
                    if let Some((_, clock, _)) = parked[c].filter(|p| p.0 == line && p.2) {
                        parked[c] = None;
                        heap.push(Next(clock, c));
                    }
                }
            }
            Event::LineSync { line } => {
                let which = line.which(i);
                let waiting = &mut at_sync[line as usize][which];
                waiting.push((i, s.clock));
                if waiting.len() == MESH_SIDE {
                    let done = waiting.iter().map(|w| w.1).fold(0.0, f64::max) + t.barrier_cycles;
                    let waiting = std::mem::take(waiting);
                    release_sync(&waiting, done, logs, &mut states, &mut heap, &mut emit);
                }
                continue;
            }
            Event::Receive { line, posted: false } if collectives => {
                let clock = s.clock;
                match pending.iter().position(|c| c.line == line && c.missing >> i & 1 == 1) {
                    Some(at) => {
                        pending[at].missing &= !(1 << i);
                        pending[at].arrived.push((i, clock));
                        if pending[at].missing == 0 {
                            let c = pending.remove(at);
                            release(&c, c.done(t), logs, &mut states, &mut heap, &mut emit);
                        }
                    }
                    // Taken up by the broadcast when its root calls.
                    None => parked[i] = Some((line, clock, false)),
                }
                continue;
            }
            Event::Send { line, to, bytes } => {
                let arrival = s.clock + t.broadcast_cycles(bytes);
                for c in (0..logs.len()).filter(|&c| to >> c & 1 == 1) {
                    inbox[c][line as usize].push_back(arrival);
                    if let Some((_, clock, _)) = parked[c].filter(|p| p.0 == line) {
                        parked[c] = None;
                        heap.push(Next(clock, c));
                    }
                }
            }
            Event::Receive { line, posted } => {
                let Some(arrival) = inbox[i][line as usize].pop_front() else {
                    // Taken up again by the put that delivers its message.
                    parked[i] = Some((line, s.clock, posted));
                    continue;
                };
                let waited = arrival - s.clock;
                if waited > 0.0 {
                    s.time.idle += waited;
                    emit(Span::Receive {
                        cpe: i,
                        start: s.clock,
                        cycles: waited,
                    });
                    s.clock = arrival;
                }
            }
            Event::Barrier => {
                s.pos += 1;
                at_barrier.push(i);
                if at_barrier.len() == logs.len() {
                    let release = at_barrier.iter().map(|&c| states[c].clock).fold(0.0, f64::max) + t.barrier_cycles;
                    for &c in &at_barrier {
                        let s = &mut states[c];
                        let waited = release - s.clock;
                        s.time.idle += waited;
                        emit(Span::Barrier {
                            cpe: c,
                            start: s.clock,
                            cycles: waited,
                        });
                        s.clock = release;
                        if s.pos < logs[c].events.len() {
                            heap.push(Next(s.clock, c));
                        }
                    }
                    at_barrier.clear();
                }
                continue;
            }
        }
        s.pos += 1;
        if s.pos < logs[i].events.len() {
            heap.push(Next(s.clock, i));
        }
    }
    let span = states.iter().map(|s| s.clock).fold(0.0, f64::max);
    let cpes = states
        .iter()
        .map(|s| CpeTime {
            idle: s.time.idle + (span - s.clock),
            ..s.time
        })
        .collect();
    LaunchTime {
        span,
        cpes,
        queue_busy,
        tape_queue,
        block_queue,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_timing as timing;

    fn log(events: &[Event]) -> Log {
        Log {
            events: events.to_vec(),
        }
    }

    /// A get of one 128-byte line: 10 + 128 cycles in the queue, then 100 of latency.
    const GET: Event = Event::Dma {
        put: false,
        blocks: 1,
        lines: 1,
        reply: 0,
        tape: false,
    };

    #[test]
    fn compute_after_an_issue_overlaps_the_transfer() {
        let t = timing();
        let serial = replay(
            &[log(&[GET, Event::Wait { reply: 0 }, Event::Compute(200.0)])],
            &t,
            None,
        );
        assert_eq!(serial.span, 238.0 + 200.0);
        assert_eq!(serial.cpes[0].dma_wait, 238.0);
        let overlapped = replay(
            &[log(&[GET, Event::Compute(200.0), Event::Wait { reply: 0 }])],
            &t,
            None,
        );
        assert_eq!(overlapped.span, 238.0);
        assert_eq!(overlapped.cpes[0].dma_wait, 38.0);
        assert_eq!(overlapped.queue_busy, 138.0);
    }

    #[test]
    fn the_queue_serves_cpes_in_issue_order() {
        let t = timing();
        // Both issue at cycle 0; CPE 0 goes first, CPE 1's transfer waits for the queue.
        let both = [
            log(&[GET, Event::Wait { reply: 0 }]),
            log(&[GET, Event::Wait { reply: 0 }]),
        ];
        let r = replay(&both, &t, None);
        assert_eq!(r.cpes[0].dma_wait, 238.0);
        assert_eq!(r.cpes[1].dma_wait, 138.0 + 238.0);
        assert_eq!(r.cpes[0].idle, 138.0);
        // A CPE that issues later goes later, whatever its id.
        let late_first = [
            log(&[Event::Compute(50.0), GET, Event::Wait { reply: 0 }]),
            log(&[GET, Event::Wait { reply: 0 }]),
        ];
        let r = replay(&late_first, &t, None);
        assert_eq!(r.span, 138.0 + 138.0 + 100.0);
        assert_eq!(r.cpes[1].dma_wait, 238.0);
    }

    #[test]
    fn a_wait_covers_only_its_own_reply_counter() {
        let t = timing();
        let other = Event::Dma {
            put: true,
            blocks: 2,
            lines: 2,
            reply: 1,
            tape: false,
        };
        let r = replay(&[log(&[GET, other, Event::Wait { reply: 0 }])], &t, None);
        assert_eq!(r.span, 238.0);
    }

    #[test]
    fn per_block_costs_are_summed_apart() {
        let mut t = timing();
        t.dma.put_block_cycles = 25.0;
        let put = Event::Dma {
            put: true,
            blocks: 3,
            lines: 4,
            reply: 1,
            tape: false,
        };
        let r = replay(&[log(&[GET, put, Event::Wait { reply: 1 }])], &t, None);
        // The get's block (10 cycles) and the put's three (25 each), besides 5 lines of 128.
        assert_eq!(r.block_queue, 10.0 + 3.0 * 25.0);
        assert_eq!(r.queue_busy, r.block_queue + 5.0 * 128.0);
    }

    #[test]
    fn tape_transfers_take_the_queue_as_data_and_are_summed_apart() {
        let t = timing();
        let put = |tape| Event::Dma {
            put: true,
            blocks: 2,
            lines: 3,
            reply: 1,
            tape,
        };
        let tape_get = Event::Dma {
            put: false,
            blocks: 1,
            lines: 1,
            reply: 0,
            tape: true,
        };
        let logs = |get, put| {
            [
                log(&[GET, get, put, Event::Wait { reply: 0 }, Event::Wait { reply: 1 }]),
                log(&[get, Event::Compute(40.0), Event::Wait { reply: 0 }]),
            ]
        };
        let data = replay(&logs(GET, put(false)), &t, None);
        let mut spans = Vec::new();
        let mixed = replay(&logs(tape_get, put(true)), &t, Some(&mut |s| spans.push(s)));
        assert_eq!((mixed.span, &mixed.cpes), (data.span, &data.cpes));
        assert_eq!(mixed.queue_busy, data.queue_busy);
        assert_eq!(data.tape_queue, 0.0);
        // Two one-line tape gets (10 + 128 cycles each) and the put (2 * 10 + 3 * 128).
        assert_eq!(mixed.tape_queue, 2.0 * 138.0 + 404.0);
        assert_eq!(mixed.queue_busy, 3.0 * 138.0 + 404.0);
        let tape_spans = spans
            .iter()
            .filter(|s| matches!(s, Span::Transfer { tape: true, .. }))
            .count();
        assert_eq!(tape_spans, 3);
    }

    #[test]
    fn a_broadcast_by_remote_ldm_access_holds_its_whole_line() {
        // CPE 0 broadcasts 320 bytes along its row to CPEs 1 and 2; CPE 2 calls last.
        let logs = [
            log(&[
                Event::Compute(50.0),
                Event::Send {
                    line: Line::Row,
                    to: 0b110,
                    bytes: 320,
                },
                Event::Compute(1.0),
            ]),
            log(&[
                Event::Receive {
                    line: Line::Row,
                    posted: false,
                },
                Event::Compute(1.0),
            ]),
            log(&[
                Event::Compute(200.0),
                Event::Receive {
                    line: Line::Row,
                    posted: false,
                },
                Event::Compute(1.0),
            ]),
        ];
        // By register communication the put costs its sender nothing and the message
        // arrives 14 cycles after it.
        let r = replay(&logs, &timing(), None);
        assert_eq!(r.span, 201.0);
        assert_eq!(r.cpes[1].idle, 64.0 + (201.0 - 65.0));
        // By remote LDM access, a collective: all leave 100 cycles of latency and 320 bytes at
        // 32 a cycle after CPE 2's call, the root too.
        let mut t = timing();
        t.regcomm_latency_cycles = None;
        t.rma_latency_cycles = Some(100.0);
        t.rma_bytes_per_cycle = Some(32.0);
        let mut spans = Vec::new();
        let r = replay(&logs, &t, Some(&mut |s| spans.push(s)));
        assert_eq!(r.span, 200.0 + 110.0 + 1.0);
        assert_eq!(r.cpes[0].idle, 260.0);
        assert_eq!(r.cpes[1].idle, 310.0);
        assert_eq!(r.cpes[2].idle, 110.0);
        assert!(spans.contains(&Span::Receive {
            cpe: 0,
            start: 50.0,
            cycles: 260.0
        }));
        // Receivers that call before the root wait for it.
        let early = [
            log(&[Event::Compute(300.0), logs[0].events[1]]),
            log(&[Event::Receive {
                line: Line::Row,
                posted: false,
            }]),
            log(&[Event::Receive {
                line: Line::Row,
                posted: false,
            }]),
        ];
        let r = replay(&early, &t, None);
        assert_eq!(r.span, 410.0);
        assert_eq!(r.cpes[0].idle, 110.0);
        assert_eq!(r.cpes[2].idle, 410.0);
    }

    #[test]
    fn posted_blocks_queue_on_their_line_and_arrive_without_holding_it() {
        let mut t = timing();
        t.regcomm_latency_cycles = None;
        t.rma_latency_cycles = Some(100.0);
        t.rma_bytes_per_cycle = Some(32.0);
        let post = Event::Post {
            line: Line::Row,
            to: 0b110,
            bytes: 320,
        };
        let receive = Event::Receive {
            line: Line::Row,
            posted: true,
        };
        // CPE 0 posts twice at cycle 50: the row carries the first for 10 cycles, then the
        // second; each arrives 100 - 2 * 5 cycles after it was carried. The sender goes on.
        let logs = [
            log(&[Event::Compute(50.0), post, post, Event::Compute(1.0)]),
            log(&[receive, receive, Event::Compute(1.0)]),
            log(&[Event::Compute(200.0), receive, receive, Event::Compute(1.0)]),
        ];
        let r = replay(&logs, &t, None);
        assert_eq!(r.span, 201.0);
        assert_eq!(r.cpes[0].idle, 201.0 - 51.0);
        assert_eq!(r.cpes[1].idle, 160.0 + (201.0 - 161.0));
        assert_eq!(r.cpes[2].idle, 0.0);
    }

    #[test]
    fn a_line_sync_releases_its_line_after_its_last_arrival() {
        let t = timing();
        // Rows 0 and 1 of the mesh: row 0's CPEs arrive at 0, 10, ..., 70; row 1's at 500.
        let logs: Vec<Log> = (0..16)
            .map(|c| {
                let arrive = if c < 8 { 10.0 * c as f64 } else { 500.0 };
                log(&[
                    Event::Compute(arrive),
                    Event::LineSync { line: Line::Row },
                    Event::Compute(1.0),
                ])
            })
            .collect();
        let r = replay(&logs, &t, None);
        assert_eq!(r.span, 506.0);
        // Row 0 leaves at 70 + 5, row 1 at 505.
        assert_eq!(r.cpes[0].idle, 75.0 + (506.0 - 76.0));
        assert_eq!(r.cpes[7].idle, 5.0 + (506.0 - 76.0));
        assert_eq!(r.cpes[8].idle, 5.0);
    }

    #[test]
    fn a_barrier_releases_everyone_after_the_last_arrival() {
        let t = timing();
        let logs = [
            log(&[Event::Compute(10.0), Event::Barrier, Event::Compute(1.0)]),
            log(&[Event::Compute(300.0), Event::Barrier, Event::Compute(1.0)]),
        ];
        let mut spans = Vec::new();
        let r = replay(&logs, &t, Some(&mut |s| spans.push(s)));
        assert_eq!(r.span, 306.0);
        assert_eq!(r.cpes[0].idle, 295.0);
        assert_eq!(r.cpes[1].idle, 5.0);
        assert!(spans.contains(&Span::Barrier {
            cpe: 0,
            start: 10.0,
            cycles: 295.0
        }));
    }
}
