//! Register communication and barriers on a running machine: what arrives where, its modelled
//! time, and the violations that stand for hangs and lost messages on the hardware.

use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::machine::{Machine, Violation};
use crate::mesh::{Line, BROADCAST};
use crate::timing::{Ops, Spec};
use crate::{cpe, test_timing};

/// One value per CPE, written by a test kernel.
type Results = [AtomicU64; 64];

fn results() -> Box<Results> {
    Box::new(std::array::from_fn(|_| AtomicU64::new(u64::MAX)))
}

/// Runs `body` as the kernel of the calling CPE, recording its violation.
fn on_cpe(arg: *mut c_void, body: impl FnOnce(usize, &Results) -> Result<(), Violation>) {
    // SAFETY: every launch of these kernels passes a live `Results`.
    let out = unsafe { &*(arg as *const Results) };
    if let Err(v) = body(cpe::cpe_id().expect("on a CPE"), out) {
        cpe::record(v).expect("on a CPE");
    }
}

fn put(line: Line, dst: u32, value: u64) -> Result<(), Violation> {
    cpe::reg_put(line, dst, &value.to_le_bytes())
}

fn get(line: Line) -> Result<u64, Violation> {
    let mut b = [0; 8];
    cpe::reg_get(line, &mut b)?;
    Ok(u64::from_le_bytes(b))
}

fn a(r: usize, k: usize) -> u64 {
    (100 * r + k) as u64
}

fn b(k: usize, c: usize) -> u64 {
    (1000 + 10 * k + c) as u64
}

/// SUMMA on the mesh: at step k, column k broadcasts its `a` along the rows and row k its
/// `b` along the columns; every CPE sums the products it receives.
extern "C" fn summa(arg: *mut c_void) {
    on_cpe(arg, |id, out| {
        let (r, c) = (id / 8, id % 8);
        let mut sum = 0;
        for k in 0..8 {
            let x = if c == k {
                put(Line::Row, BROADCAST, a(r, k))?;
                a(r, k)
            } else {
                get(Line::Row)?
            };
            let y = if r == k {
                put(Line::Column, BROADCAST, b(k, c))?;
                b(k, c)
            } else {
                get(Line::Column)?
            };
            sum += x * y;
        }
        out[id].store(sum, Ordering::SeqCst);
        Ok(())
    });
}

fn timed() -> Spec {
    Spec {
        clock_hz: 1e9,
        flops_per_cycle: 8.0,
        timing: test_timing(),
    }
}

#[test]
fn summa_broadcasts_reach_every_cpe_of_the_line_in_step_order() {
    let m = Machine::new(64, 1024, Some(timed()));
    let out = results();
    m.spawn("summa", summa, &*out as *const Results as *mut c_void, 0);
    m.try_join().expect("no violation");
    for id in 0..64 {
        let (r, c) = (id / 8, id % 8);
        let want: u64 = (0..8).map(|k| a(r, k) * b(k, c)).sum();
        assert_eq!(out[id].load(Ordering::SeqCst), want, "CPE {id}");
    }
    let counters = &m.stats()["summa"].counters;
    // Per step, one put and seven gets in every row and every column.
    assert_eq!((counters.reg_puts, counters.reg_gets), (2 * 8 * 8, 2 * 8 * 8 * 7));
}

/// Each CPE sends its id to its right neighbour in the row and its lower one in the column,
/// and keeps what it receives from the left and from above.
extern "C" fn neighbours(arg: *mut c_void) {
    on_cpe(arg, |id, out| {
        let (r, c) = (id / 8, id % 8);
        put(Line::Row, ((c + 1) % 8) as u32, id as u64)?;
        put(Line::Column, ((r + 1) % 8) as u32, id as u64)?;
        let left = get(Line::Row)?;
        let above = get(Line::Column)?;
        out[id].store(left * 1000 + above, Ordering::SeqCst);
        Ok(())
    });
}

#[test]
fn point_to_point_messages_reach_one_index_of_the_line() {
    let m = Machine::new(64, 1024, None);
    let out = results();
    m.spawn("neighbours", neighbours, &*out as *const Results as *mut c_void, 0);
    m.try_join().expect("no violation");
    for id in 0..64 {
        let (r, c) = (id / 8, id % 8);
        let left = r * 8 + (c + 7) % 8;
        let above = (r + 7) % 8 * 8 + c;
        assert_eq!(out[id].load(Ordering::SeqCst), (left * 1000 + above) as u64, "CPE {id}");
    }
}

/// CPE 0 computes 100 cycles and sends to CPE 1, which receives at once, then computes 10.
extern "C" fn relay(arg: *mut c_void) {
    on_cpe(arg, |id, _| {
        let fp = |n| Ops { fp: n, ..Ops::ZERO };
        match id {
            0 => {
                cpe::charge(&fp(100), 1)?;
                put(Line::Row, 1, 7)
            }
            1 => {
                get(Line::Row)?;
                cpe::charge(&fp(10), 1)
            }
            _ => Ok(()),
        }
    });
}

#[test]
fn a_receive_waits_for_the_put_and_its_latency() {
    let m = Machine::new(64, 1024, Some(timed()));
    let out = results();
    m.spawn("relay", relay, &*out as *const Results as *mut c_void, 0);
    m.try_join().expect("no violation");
    let t = &m.stats()["relay"].time;
    // CPE 1 receives at 100 + 14 and computes 10 more.
    assert_eq!(t.span_cycles, 124.0);
    assert_eq!(t.compute_cycles, 110.0);
    // CPE 1 waited 114; CPE 0 idles 24 after its return, the 62 others the whole span.
    assert_eq!(t.idle_cycles, 114.0 + 24.0 + 62.0 * 124.0);
}

/// The violation of a launch of `kernel` on `m`.
fn violation(m: &Machine, kernel: extern "C" fn(*mut c_void)) -> Violation {
    let out = results();
    m.spawn("k", kernel, &*out as *const Results as *mut c_void, 0);
    m.try_join().expect_err("a violation")
}

extern "C" fn unmatched(arg: *mut c_void) {
    on_cpe(arg, |id, _| match id {
        9 => get(Line::Column).map(|_| ()),
        _ => Ok(()),
    });
}

extern "C" fn unmatched_with_barrier(arg: *mut c_void) {
    on_cpe(arg, |id, _| match id {
        12 => get(Line::Row).map(|_| ()),
        _ => cpe::barrier(),
    });
}

#[test]
fn a_receive_no_put_matches_names_the_kernel_and_cpe_instead_of_hanging() {
    let m = Machine::new(64, 1024, None);
    let v = violation(&m, unmatched);
    assert_eq!((v.kernel.as_str(), v.cpes.as_slice()), ("k", &[9][..]));
    assert_eq!(
        v.message,
        "getc waits for a message that no CPE of its column will send: every CPE of the launch \
         waits or has returned (1 in a receive, 0 at a barrier, 63 returned)"
    );
    let v = violation(&m, unmatched_with_barrier);
    assert_eq!(v.cpes, [12]);
    assert!(
        v.message.contains("(1 in a receive, 63 at a barrier, 0 returned)"),
        "{}",
        v.message
    );
    // The machine goes on: the next launch runs.
    let out = results();
    m.spawn("summa", summa, &*out as *const Results as *mut c_void, 0);
    m.try_join().expect("no violation");
}

extern "C" fn lost(arg: *mut c_void) {
    on_cpe(arg, |id, _| match id {
        0 => put(Line::Row, 3, 1),
        _ => Ok(()),
    });
}

extern "C" fn skips_barrier(arg: *mut c_void) {
    on_cpe(arg, |id, _| match id {
        3 => Ok(()),
        _ => cpe::barrier(),
    });
}

#[test]
fn a_message_never_received_and_a_barrier_missed_are_violations() {
    let m = Machine::new(64, 1024, None);
    let v = violation(&m, lost);
    assert_eq!(v.cpes, [3]);
    assert_eq!(
        v.message,
        "returns with 1 message(s) in its row buffer never taken by getr (the first put by CPE 0)"
    );
    let v = violation(&m, skips_barrier);
    assert!(
        v.message
            .starts_with("waits at a barrier that not every CPE will reach")
            && v.message.ends_with("(0 in a receive, 63 at a barrier, 1 returned)"),
        "{}",
        v.message
    );
}

extern "C" fn bad_puts(arg: *mut c_void) {
    on_cpe(arg, |id, _| match id {
        // Its own index in the row.
        2 => put(Line::Row, 2, 0),
        // No such index.
        3 => put(Line::Column, 11, 0),
        // Wider than a register.
        4 => cpe::reg_put(Line::Row, BROADCAST, &[0; 33]),
        _ => Ok(()),
    });
}

extern "C" fn narrow_get(arg: *mut c_void) {
    on_cpe(arg, |id, _| match id {
        0 => put(Line::Row, 1, 5),
        1 => cpe::reg_get(Line::Row, &mut [0; 4]),
        _ => Ok(()),
    });
}

#[test]
fn bad_destinations_and_sizes_are_violations() {
    let m = Machine::new(64, 1024, None);
    let v = violation(&m, bad_puts);
    assert_eq!(v.cpes, [2]);
    assert!(v.message.contains("its own place in its row"), "{}", v.message);
    let v = violation(&m, narrow_get);
    assert_eq!(
        (v.cpes.as_slice(), v.message.as_str()),
        (&[1][..], "getr takes 4 bytes from a message of 8 bytes that CPE 0 put")
    );
}

#[test]
fn register_communication_needs_the_mesh_threads_and_a_machine_that_has_it() {
    let v = violation(&Machine::pooled(64, 1024, None, 2), lost);
    assert!(v.message.contains("needs a thread per CPE"), "{}", v.message);
    let v = violation(&Machine::new(16, 1024, None), lost);
    assert!(
        v.message
            .contains("needs the 8 x 8 mesh of 64 CPEs; this machine has 16"),
        "{}",
        v.message
    );
    let mut pro = timed();
    pro.timing.regcomm_latency_cycles = None;
    let v = violation(&Machine::new(64, 1024, Some(pro)), lost);
    assert!(v.message.contains("has no register communication"), "{}", v.message);
}

/// CPE 8 (row 1, column 0) broadcasts a block of 320 bytes along its row at cycle 0; the
/// others of the row receive it.
extern "C" fn block_row(arg: *mut c_void) {
    on_cpe(arg, |id, out| {
        let ldm = crate::native::swflow_native_ldm(320) as usize;
        cpe::declare_ldm(ldm, 320, "block")?;
        match (id / 8, id % 8) {
            (1, 0) => {
                // SAFETY: the 320 bytes are this CPE's LDM area.
                unsafe { std::ptr::write_bytes(ldm as *mut u8, 7, 320) };
                cpe::reg_send_block(Line::Row, ldm, 320)
            }
            (1, _) => {
                cpe::reg_recv_block(Line::Row, ldm, 320)?;
                // SAFETY: as above.
                let got = unsafe { std::slice::from_raw_parts(ldm as *const u8, 320) };
                out[id].store(got.iter().map(|&b| b as u64).sum(), Ordering::SeqCst);
                Ok(())
            }
            _ => Ok(()),
        }
    });
}

#[test]
fn a_block_broadcast_by_remote_ldm_access_arrives_after_its_latency_and_bytes() {
    let mut rma = timed();
    rma.timing.regcomm_latency_cycles = None;
    rma.timing.rma_latency_cycles = Some(100.0);
    rma.timing.rma_bytes_per_cycle = Some(32.0);
    let m = Machine::new(64, 1024, Some(rma));
    let out = results();
    m.spawn("block", block_row, &*out as *const Results as *mut c_void, 0);
    m.try_join().expect("no violation");
    for id in 9..16 {
        assert_eq!(out[id].load(Ordering::SeqCst), 7 * 320, "CPE {id}");
    }
    // 100 cycles of latency and 320 bytes at 32 a cycle.
    assert_eq!(m.stats()["block"].time.span_cycles, 110.0);
    // A single register's put needs register communication.
    let mut rma = timed();
    rma.timing.regcomm_latency_cycles = None;
    rma.timing.rma_latency_cycles = Some(100.0);
    rma.timing.rma_bytes_per_cycle = Some(32.0);
    let v = violation(&Machine::new(64, 1024, Some(rma)), lost);
    assert!(v.message.contains("has no register communication"), "{}", v.message);
}

fn rma() -> Spec {
    let mut rma = timed();
    rma.timing.regcomm_latency_cycles = None;
    rma.timing.rma_latency_cycles = Some(100.0);
    rma.timing.rma_bytes_per_cycle = Some(32.0);
    rma
}

/// The LDM of a posting kernel: a 320-byte block and its reply words (row's, column's) after it.
fn posting_ldm() -> Result<(usize, usize), Violation> {
    let ldm = crate::native::swflow_native_ldm(336) as usize;
    cpe::declare_ldm(ldm, 320, "block")?;
    cpe::declare_ldm(ldm + 320, 16, "reply")?;
    // SAFETY: the words are this CPE's LDM area.
    unsafe { std::ptr::write_bytes((ldm + 320) as *mut u8, 0, 16) };
    Ok((ldm, ldm + 320))
}

/// CPE 8 (row 1, column 0) posts a block of 320 bytes along its row, twice, with the row
/// synced before the second post (whose bytes differ); the others of the row wait for each
/// and record its bytes' sum, the second one after computing for 500 cycles.
extern "C" fn posted_row(arg: *mut c_void) {
    on_cpe(arg, |id, out| {
        let (ldm, reply) = posting_ldm()?;
        if id / 8 != 1 {
            return Ok(());
        }
        let sum = || {
            // SAFETY: the 320 bytes are this CPE's LDM area.
            let got = unsafe { std::slice::from_raw_parts(ldm as *const u8, 320) };
            got.iter().map(|&b| b as u64).sum::<u64>()
        };
        for (round, byte) in [(1, 7u8), (2, 9u8)] {
            if round == 2 {
                cpe::sync_line(Line::Row)?;
            }
            if id == 8 {
                // SAFETY: as above.
                unsafe { std::ptr::write_bytes(ldm as *mut u8, byte, 320) };
                cpe::rma_post(Line::Row, ldm, 320, reply)?;
            }
            if round == 2 {
                cpe::charge(
                    &Ops {
                        fp: 500,
                        ..Ops::default()
                    },
                    1,
                )?;
            }
            cpe::rma_wait(Line::Row, reply, round)?;
            if id != 8 {
                let before = out[id].load(Ordering::SeqCst);
                out[id].store(if round == 1 { sum() } else { before * 1000 + sum() }, Ordering::SeqCst);
            }
        }
        Ok(())
    });
}

#[test]
fn a_posted_block_lands_in_place_and_arrives_while_its_receivers_compute() {
    let m = Machine::new(64, 1024, Some(rma()));
    let out = results();
    m.spawn("posted", posted_row, &*out as *const Results as *mut c_void, 0);
    m.try_join().expect("no violation");
    for id in 9..16 {
        assert_eq!(out[id].load(Ordering::SeqCst), 7 * 320 * 1000 + 9 * 320, "CPE {id}");
    }
    let stats = &m.stats()["posted"];
    // Each post: the line takes 320 / 32 cycles and then the 100 - 2 * 5 of the collective's
    // latency without its two syncs. The first arrives at 100; the row syncs (5 cycles), and
    // the second arrives while the receivers compute their 500.
    assert_eq!(stats.time.span_cycles, 100.0 + 5.0 + 500.0);
    assert_eq!((stats.counters.reg_puts, stats.counters.reg_gets), (2, 14));
}

/// Every CPE of row 1 waits for a post that CPE 8 never makes.
extern "C" fn unposted(arg: *mut c_void) {
    on_cpe(arg, |id, _| {
        let (_, reply) = posting_ldm()?;
        match id / 8 {
            1 if id != 8 => cpe::rma_wait(Line::Row, reply, 1),
            _ => Ok(()),
        }
    });
}

/// CPE 9 syncs its row; the row's other CPEs return.
extern "C" fn lone_sync(arg: *mut c_void) {
    on_cpe(arg, |id, _| match id {
        9 => cpe::sync_line(Line::Row),
        _ => Ok(()),
    });
}

/// CPE 8 posts along its row on a machine with register communication only.
extern "C" fn post_without_rma(arg: *mut c_void) {
    on_cpe(arg, |id, _| {
        let (ldm, reply) = posting_ldm()?;
        match id {
            8 => cpe::rma_post(Line::Row, ldm, 320, reply),
            _ => Ok(()),
        }
    });
}

#[test]
fn posts_and_syncs_that_would_hang_are_violations() {
    let v = violation(&Machine::new(64, 1024, Some(rma())), unposted);
    assert!(
        v.message
            .contains("waits for a message that no CPE of its row will send"),
        "{}",
        v.message
    );
    let v = violation(&Machine::new(64, 1024, Some(rma())), lone_sync);
    assert!(
        v.message
            .contains("waits at a row sync that not every CPE of its row will reach"),
        "{}",
        v.message
    );
    assert_eq!(v.cpes, vec![9]);
    let v = violation(&Machine::new(64, 1024, Some(timed())), post_without_rma);
    assert!(v.message.contains("has no remote LDM access"), "{}", v.message);
}
