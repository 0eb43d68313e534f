//! What a CPE does while it runs a kernel: declare LDM buffers, set the class of its DMA,
//! issue and wait for DMA, access main memory directly, charge compute, meet at barriers; and
//! the checks on each.
//!
//! The state of the running kernel on a CPE is thread-local to that CPE's thread. Each
//! operation returns the [`Violation`] it finds; the C ABI stops the program with it, while
//! kernels compiled into this process ([`crate::native`]) record it and return.

use std::cell::RefCell;
use std::sync::Arc;

use crate::machine::{Direction, KernelCounters, Launch, Shared, Violation};
use crate::mesh::{Landing, Line};
use crate::replay::{Event, Log};
use crate::tape::DmaClass;
use crate::timing::Ops;

/// A named block of memory: a main-memory region or an LDM buffer.
#[derive(Clone, Debug)]
pub(crate) struct Block {
    pub base: usize,
    pub bytes: usize,
    pub name: String,
}

impl Block {
    pub fn contains(&self, addr: usize) -> bool {
        addr >= self.base && addr - self.base < self.bytes
    }
}

/// A DMA in flight.
#[derive(Clone, Copy, Debug)]
struct Transfer {
    dir: Direction,
    main: usize,
    ldm: usize,
    len: usize,
    /// Contiguous block length (the whole transfer when not strided).
    bsize: usize,
    /// Gap skipped in main memory between blocks.
    stride: usize,
    reply: usize,
}

impl Transfer {
    /// Main-memory blocks as (start, end) byte addresses.
    fn blocks(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        (0..self.len / self.bsize).map(|i| {
            let start = self.main + i * (self.bsize + self.stride);
            (start, start + self.bsize)
        })
    }
}

/// A CPE's state while it runs a kernel.
pub(crate) struct Cpe {
    pub id: usize,
    pub launch: Arc<Launch>,
    pub machine: Arc<Shared>,
    buffers: Vec<Block>,
    pending: Vec<Transfer>,
    /// The class of the DMA it issues next.
    class: DmaClass,
    /// The main memory it wrote, as `[start, end)` ranges (sorted and joined when it leaves).
    pub writes: Vec<(usize, usize)>,
    pub counters: KernelCounters,
    pub log: Log,
    /// The first violation of a kernel that records violations instead of stopping.
    pub violation: Option<Violation>,
}

thread_local! {
    static CPE: RefCell<Option<Cpe>> = const { RefCell::new(None) };
}

impl Cpe {
    /// Makes the calling thread CPE `id` of `launch`.
    pub fn enter(id: usize, launch: Arc<Launch>, machine: Arc<Shared>) {
        CPE.with(|cell| {
            *cell.borrow_mut() = Some(Cpe {
                id,
                launch,
                machine,
                buffers: Vec::new(),
                pending: Vec::new(),
                class: DmaClass::Data,
                writes: Vec::new(),
                counters: KernelCounters::default(),
                log: Log::default(),
                violation: None,
            })
        });
    }

    /// Ends the calling thread's kernel: its state, with a violation when it returned with
    /// transfers in flight (and none was recorded before).
    pub fn leave() -> Cpe {
        let mut cpe = CPE
            .with(|cell| cell.borrow_mut().take())
            .expect("the CPE state outlives its kernel");
        // In address order, overlapping and touching writes joined: the race check merges
        // the CPEs' lists.
        cpe.writes.sort_unstable();
        cpe.writes.dedup_by(|next, last| {
            let joins = next.0 <= last.1;
            if joins {
                last.1 = last.1.max(next.1);
            }
            joins
        });
        if cpe.violation.is_none() && !cpe.pending.is_empty() {
            cpe.violation = Some(cpe.violation(format!(
                "returns with {} DMA transfer(s) never waited for",
                cpe.pending.len()
            )));
        }
        cpe
    }

    /// Records a write of main memory `[start, end)`, joined to the last one when it
    /// continues it.
    fn note_write(&mut self, start: usize, end: usize) {
        match self.writes.last_mut() {
            Some(last) if last.1 == start => last.1 = end,
            _ => self.writes.push((start, end)),
        }
    }

    fn violation(&self, message: String) -> Violation {
        Violation {
            kernel: self.launch.kernel.clone(),
            cpes: vec![self.id],
            message,
        }
    }

    fn describe_ldm(&self, addr: usize) -> String {
        match self.buffers.iter().find(|b| b.contains(addr)) {
            Some(b) => format!("LDM buffer '{}' at offset {}", b.name, addr - b.base),
            None => format!("LDM address {addr:#x}"),
        }
    }
}

/// Runs `f` on the calling CPE's state; a call from outside a kernel is a violation.
fn with_cpe<R>(what: &str, f: impl FnOnce(&mut Cpe) -> Result<R, Violation>) -> Result<R, Violation> {
    CPE.with(|cell| {
        let mut cell = cell.borrow_mut();
        match cell.as_mut() {
            Some(cpe) => f(cpe),
            None => Err(Violation {
                kernel: "(host)".into(),
                cpes: Vec::new(),
                message: format!("{what} called outside a CPE kernel"),
            }),
        }
    })
}

/// The calling CPE's id, or `None` on the host.
pub fn cpe_id() -> Option<usize> {
    CPE.with(|cell| cell.borrow().as_ref().map(|c| c.id))
}

/// The calling CPE's LDM size in bytes, or `None` on the host.
pub(crate) fn ldm_bytes() -> Option<usize> {
    CPE.with(|cell| cell.borrow().as_ref().map(|c| c.machine.ldm_bytes))
}

/// Records `v` as the calling CPE's violation (the first one stays); on the host, returns it.
pub(crate) fn record(v: Violation) -> Result<(), Violation> {
    CPE.with(|cell| match cell.borrow_mut().as_mut() {
        Some(cpe) => {
            cpe.violation.get_or_insert(v);
            Ok(())
        }
        None => Err(v),
    })
}

/// Declares an LDM buffer of the running kernel on the calling CPE. Buffers may not overlap
/// and all of them together must fit the LDM.
pub fn declare_ldm(base: usize, bytes: usize, name: &str) -> Result<(), Violation> {
    with_cpe("LDM declaration", |cpe| {
        if let Some(b) = cpe
            .buffers
            .iter()
            .find(|b| base < b.base.saturating_add(b.bytes) && b.base < base.saturating_add(bytes))
        {
            return Err(cpe.violation(format!("LDM buffer '{name}' overlaps LDM buffer '{}'", b.name)));
        }
        cpe.buffers.push(Block {
            base,
            bytes,
            name: name.to_string(),
        });
        let total: usize = cpe.buffers.iter().map(|b| b.bytes).sum();
        if total > cpe.machine.ldm_bytes {
            return Err(cpe.violation(format!(
                "declares {total} bytes of LDM buffers; each CPE has {} bytes",
                cpe.machine.ldm_bytes
            )));
        }
        cpe.counters.ldm_high_water = cpe.counters.ldm_high_water.max(total);
        Ok(())
    })
}

/// Sets the class of the calling CPE's later DMA (until the next call, or the end of the
/// launch: every launch starts with [`DmaClass::Data`]).
pub fn set_class(class: DmaClass) -> Result<(), Violation> {
    with_cpe("a DMA class", |cpe| {
        cpe.class = class;
        Ok(())
    })
}

/// `addr` in main memory as a message names it: by its offset in a region when it is in one.
fn describe_main(regions: &[Block], addr: usize) -> String {
    match regions.iter().find(|r| r.contains(addr)) {
        Some(r) => format!("offset {} of {}", addr - r.base, r.name),
        None => format!("main-memory address {addr:#x}"),
    }
}

/// Issues a DMA of the calling CPE's current class: checked now, performed when the CPE waits
/// on `reply`. `stride` and `bsize` follow athread: `bsize` bytes are contiguous, then
/// `stride` bytes of main memory are skipped; `bsize == 0` means one contiguous block.
///
/// Its time counts the 128-byte lines its blocks touch; a get of the launch's parameter
/// struct counts its length in whole lines, as if the struct were line-aligned, since where
/// the linker puts it is no property of the program. Tape transfers are counted in the
/// ordinary totals and again in the tape counters (the parameter struct's get never is). A
/// [`DmaClass::TapeStream`] transfer must be contiguous in main memory, and keeps the CPE's
/// stack of streamed tape (see [`crate::tape`]): a put pushes a layer, a get pops one.
#[allow(clippy::too_many_arguments)]
pub fn dma(
    dir: Direction,
    main: usize,
    ldm: usize,
    len: usize,
    reply: usize,
    stride: usize,
    bsize: usize,
) -> Result<(), Violation> {
    with_cpe("DMA", |cpe| {
        let what = match dir {
            Direction::Get => "get",
            Direction::Put => "put",
        };
        if len == 0 || (bsize > 0 && len % bsize != 0) {
            return Err(cpe.violation(format!(
                "DMA {what} of {len} bytes in blocks of {bsize}: the length must be a positive multiple of the block"
            )));
        }
        let bsize = if bsize == 0 { len } else { bsize };
        let t = Transfer {
            dir,
            main,
            ldm,
            len,
            bsize,
            stride,
            reply,
        };
        check_ldm_range(cpe, &format!("DMA {what}"), ldm, len)?;
        // Saturating: a wild address must end in a message, not an overflow.
        let span_end = main.saturating_add(
            (len / bsize - 1)
                .saturating_mul(bsize.saturating_add(stride))
                .saturating_add(bsize),
        );
        let in_arg = main >= cpe.launch.arg && span_end <= cpe.launch.arg.saturating_add(cpe.launch.arg_bytes);
        let regions = cpe.machine.regions.lock().expect("region list");
        let region = regions.iter().find(|r| r.contains(main));
        match region {
            _ if in_arg && dir == Direction::Get => {}
            Some(r) if span_end <= r.base + r.bytes => {}
            Some(r) => {
                return Err(cpe.violation(format!(
                    "DMA {what} of {len} bytes at offset {} of {} ({} bytes) runs {} bytes past its end",
                    main - r.base,
                    r.name,
                    r.bytes,
                    span_end - (r.base + r.bytes)
                )))
            }
            None => {
                return Err(cpe.violation(format!(
                    "DMA {what} of {len} bytes at main-memory address {main:#x}, outside every allocated region"
                )))
            }
        }
        if cpe.class == DmaClass::TapeStream {
            if bsize != len && stride != 0 {
                return Err(cpe.violation(format!(
                    "tape stream {what} of {len} bytes in blocks of {bsize} with a stride of {stride}: streamed tape moves in one contiguous transfer"
                )));
            }
            let mut stack = cpe.machine.tape_stack(cpe.id);
            let kept = match dir {
                Direction::Put => stack.push(main, len, &cpe.launch.kernel),
                Direction::Get => stack.pop(main, len),
            };
            drop(stack);
            if let Err(e) = kept {
                return Err(cpe.violation(e.message(&|a| describe_main(&regions, a))));
            }
        }
        drop(regions);
        let tape = cpe.class.is_tape();
        if let Some(spec) = &cpe.machine.spec {
            let line = spec.timing.dma.line_bytes as usize;
            let lines: usize = if in_arg {
                len.div_ceil(line)
            } else {
                t.blocks().map(|(s, e)| (e - 1) / line - s / line + 1).sum()
            };
            cpe.log.push(Event::Dma {
                put: dir == Direction::Put,
                blocks: (len / bsize) as u64,
                lines: lines as u64,
                reply,
                tape,
            });
        }
        let c = &mut cpe.counters;
        match dir {
            Direction::Get if in_arg => c.arg_gets += 1,
            Direction::Get => {
                c.gets += 1;
                c.get_bytes += len;
                if tape {
                    c.tape_gets += 1;
                    c.tape_get_bytes += len;
                }
            }
            Direction::Put => {
                c.puts += 1;
                c.put_bytes += len;
                if tape {
                    c.tape_puts += 1;
                    c.tape_put_bytes += len;
                }
            }
        }
        cpe.pending.push(t);
        Ok(())
    })
}

/// Checks a direct main-memory access of the calling CPE (an element read or written without
/// DMA): it must lie inside a registered region; a write joins the launch's race check.
pub fn direct(addr: usize, bytes: usize, write: bool) -> Result<(), Violation> {
    with_cpe("a direct access", |cpe| {
        let regions = cpe.machine.regions.lock().expect("region list");
        let inside = regions
            .iter()
            .any(|r| r.contains(addr) && addr.saturating_add(bytes) <= r.base + r.bytes);
        drop(regions);
        if !inside {
            let what = if write { "write" } else { "read" };
            return Err(cpe.violation(format!(
                "direct {what} of {bytes} bytes at main-memory address {addr:#x}, outside every allocated region"
            )));
        }
        if let Some(spec) = &cpe.machine.spec {
            let t = &spec.timing;
            cpe.log.direct(if write { t.gstore_cycles } else { t.gload_cycles });
        }
        if write {
            cpe.counters.direct_writes += 1;
            cpe.note_write(addr, addr + bytes);
        } else {
            cpe.counters.direct_reads += 1;
        }
        Ok(())
    })
}

/// Completes the calling CPE's transfers on `reply` (in issue order), each adding one to the
/// counter, then requires the counter to have reached `n` (exactly `n` when `exact`, as a
/// `while (reply != n);` loop needs): otherwise the hardware would wait forever.
pub fn wait(reply: usize, n: i64, exact: bool) -> Result<(), Violation> {
    with_cpe("DMA wait", |cpe| {
        let (mine, rest): (Vec<Transfer>, Vec<Transfer>) = cpe.pending.iter().partition(|t| t.reply == reply);
        cpe.pending = rest;
        if cpe.machine.spec.is_some() {
            cpe.log.push(Event::Wait { reply });
        }
        for t in mine {
            // SAFETY: both sides were checked against live blocks when the transfer was issued:
            // the LDM side lies in one declared buffer of this CPE, the main side in a
            // registered region (or the launch's argument); blocks of one transfer do not
            // overlap its LDM side.
            unsafe { perform(&t) };
            if t.dir == Direction::Put {
                for (start, end) in t.blocks() {
                    cpe.note_write(start, end);
                }
            }
            let counter = reply as *mut i32;
            // SAFETY: `reply` is the address of the counter the kernel named in the transfer; it
            // lives in the CPE's LDM for the whole kernel.
            unsafe { counter.write_volatile(counter.read_volatile().wrapping_add(1)) };
        }
        // SAFETY: as above.
        let value = unsafe { (reply as *const i32).read_volatile() } as i64;
        if value < n || (exact && value != n) {
            return Err(cpe.violation(format!(
                "waits for its reply counter to reach {n}, but it stops at {value}: the hardware would wait forever"
            )));
        }
        Ok(())
    })
}

/// Moves the bytes of one transfer.
///
/// # Safety
/// Both memory ranges of `t` must be valid for the access and not overlap.
unsafe fn perform(t: &Transfer) {
    let mut ldm = t.ldm as *mut u8;
    for (start, end) in t.blocks() {
        let main = start as *mut u8;
        let n = end - start;
        match t.dir {
            Direction::Get => std::ptr::copy_nonoverlapping(main, ldm, n),
            Direction::Put => std::ptr::copy_nonoverlapping(ldm, main, n),
        }
        ldm = ldm.add(n);
    }
}

/// Waits until every CPE of the launch has arrived. Only a machine with a thread per CPE
/// can meet at barriers.
pub fn barrier() -> Result<(), Violation> {
    let (shared, id) = meeting("athread_syn", "meets at a barrier", Some(Event::Barrier))?;
    shared.mesh.barrier(id)
}

/// The calling CPE's machine and id for an operation that meets other CPEs (`doing`, as a
/// violation says it), after logging `event` if any: only a launch with a thread per CPE can
/// run them.
fn meeting(what: &str, doing: &str, event: Option<Event>) -> Result<(Arc<Shared>, usize), Violation> {
    with_cpe(what, |cpe| {
        if !cpe.launch.threaded {
            return Err(cpe.violation(format!(
                "{doing}, which needs a thread per CPE; this launch runs its CPEs as tasks"
            )));
        }
        if let (Some(e), Some(_)) = (event, &cpe.machine.spec) {
            cpe.log.push(e);
        }
        Ok((cpe.machine.clone(), cpe.id))
    })
}

/// Register communication needs its latency in a timed machine's description: a target
/// without it (SW26010-Pro) has none. A block broadcast (`block`) may also go by remote LDM
/// access.
fn check_regcomm(cpe: &Cpe, what: &str, block: bool) -> Result<(), Violation> {
    match &cpe.machine.spec {
        Some(spec) if block && !spec.timing.broadcasts() => Err(cpe.violation(format!(
            "uses a block {what}, but this machine has neither register communication nor remote LDM access (its description gives no timing.regcomm_latency_cycles or timing.rma_latency_cycles)"
        ))),
        Some(spec) if !block && spec.timing.regcomm_latency_cycles.is_none() => Err(cpe.violation(format!(
            "uses {what}, but this machine has no register communication (its description gives no timing.regcomm_latency_cycles)"
        ))),
        _ => Ok(()),
    }
}

/// Checks that `[ldm, ldm + bytes)` lies in one declared LDM buffer of the calling CPE, for
/// `what` (a DMA, a block broadcast).
fn check_ldm_range(cpe: &Cpe, what: &str, ldm: usize, bytes: usize) -> Result<(), Violation> {
    match cpe.buffers.iter().find(|b| b.contains(ldm)) {
        Some(b) if ldm.saturating_add(bytes) > b.base + b.bytes => Err(cpe.violation(format!(
            "{what} of {bytes} bytes at offset {} of LDM buffer '{}' ({} bytes) runs {} bytes past its end",
            ldm - b.base,
            b.name,
            b.bytes,
            ldm.saturating_add(bytes) - (b.base + b.bytes)
        ))),
        Some(_) => Ok(()),
        None => Err(cpe.violation(format!(
            "{what} of {bytes} bytes to {}, which is in no declared LDM buffer",
            cpe.describe_ldm(ldm)
        ))),
    }
}

/// The checks every register-communication call takes (`block`: of a block of registers at
/// `ldm`, else of one), then the calling CPE's machine and id, with `event` logged.
fn communicating(
    what: &str,
    block: Option<(usize, usize)>,
    event: Option<Event>,
) -> Result<(Arc<Shared>, usize), Violation> {
    with_cpe(what, |cpe| {
        check_regcomm(cpe, what, block.is_some())?;
        match block {
            Some((ldm, bytes)) => check_ldm_range(cpe, &format!("block {what}"), ldm, bytes),
            None => Ok(()),
        }
    })?;
    meeting(what, &format!("uses {what}"), event)
}

/// Counts a put along `line` that reached the CPEs of the bit set `to`, and logs it.
fn sent(what: &str, line: Line, to: u64, bytes: usize) -> Result<(), Violation> {
    with_cpe(what, |cpe| {
        cpe.counters.reg_puts += 1;
        if cpe.machine.spec.is_some() {
            let bytes = bytes as u64;
            cpe.log.push(Event::Send { line, to, bytes });
        }
        Ok(())
    })
}

/// Takes the calling CPE's oldest message along `line` into `out` and counts it.
fn take(shared: &Shared, id: usize, what: &str, line: Line, out: &mut [u8]) -> Result<(), Violation> {
    shared.mesh.get(id, line, out)?;
    with_cpe(what, |cpe| {
        cpe.counters.reg_gets += 1;
        Ok(())
    })
}

/// Sends `data` (one register, at most 32 bytes) along the calling CPE's row or column to
/// index `dst` of it, or to all its other CPEs ([`crate::mesh::BROADCAST`]).
pub fn reg_put(line: Line, dst: u32, data: &[u8]) -> Result<(), Violation> {
    let what = line.put_name();
    let (shared, id) = communicating(what, None, None)?;
    let to = shared.mesh.put(id, line, dst, data)?;
    sent(what, line, to, data.len())
}

/// Sends the `bytes` of LDM at `ldm` to every other CPE of the calling CPE's row or column as
/// one block of registers, which each of them takes with [`reg_recv_block`] of as many bytes.
pub fn reg_send_block(line: Line, ldm: usize, bytes: usize) -> Result<(), Violation> {
    let what = line.put_name();
    let (shared, id) = communicating(what, Some((ldm, bytes)), None)?;
    // SAFETY: the range lies in one of the CPE's declared LDM buffers.
    let data = unsafe { std::slice::from_raw_parts(ldm as *const u8, bytes) };
    let to = shared.mesh.put_block(id, line, data)?;
    sent(what, line, to, bytes)
}

/// Takes a block of `bytes` sent along the calling CPE's row or column
/// ([`reg_send_block`]) into LDM at `ldm`, waiting for it.
pub fn reg_recv_block(line: Line, ldm: usize, bytes: usize) -> Result<(), Violation> {
    let what = line.get_name();
    let (shared, id) = communicating(what, Some((ldm, bytes)), Some(Event::Receive { line, posted: false }))?;
    // SAFETY: the range lies in one of the CPE's declared LDM buffers, which only this CPE's
    // thread touches.
    let out = unsafe { std::slice::from_raw_parts_mut(ldm as *mut u8, bytes) };
    take(&shared, id, what, line, out)
}

/// Takes the calling CPE's oldest message along its row or column into `out` (as many bytes
/// as were put), waiting for it.
pub fn reg_get(line: Line, out: &mut [u8]) -> Result<(), Violation> {
    let what = line.get_name();
    let (shared, id) = communicating(what, None, Some(Event::Receive { line, posted: false }))?;
    take(&shared, id, what, line, out)
}

/// Remote LDM access's posted broadcasts and line syncs need a machine that has it (when time
/// is modelled: its description gives `timing.rma_latency_cycles`).
fn check_rma(cpe: &Cpe, what: &str) -> Result<(), Violation> {
    match &cpe.machine.spec {
        Some(spec) if spec.timing.rma_latency_cycles.is_none() => Err(cpe.violation(format!(
            "uses {what}, but this machine has no remote LDM access (its description gives no timing.rma_latency_cycles)"
        ))),
        _ => Ok(()),
    }
}

/// Bytes of a reply word (`crts_rply_t`, an int).
const REPLY_BYTES: usize = 4;

impl Cpe {
    /// The declared LDM buffer holding `[ldm, ldm + bytes)`, by its place among the
    /// declarations, and the offset in it.
    fn place_in_ldm(&self, what: &str, ldm: usize, bytes: usize) -> Result<(usize, usize), Violation> {
        check_ldm_range(self, what, ldm, bytes)?;
        let at = self.buffers.iter().position(|b| b.contains(ldm)).expect("checked");
        Ok((at, ldm - self.buffers[at].base))
    }

    /// The reply word at `counter`, which must lie in a declared LDM buffer.
    fn reply_word(&self, what: &str, counter: usize) -> Result<*mut i32, Violation> {
        self.place_in_ldm(&format!("{what}'s reply word"), counter, REPLY_BYTES)?;
        Ok(counter as *mut i32)
    }
}

/// Posts the `bytes` of LDM at `ldm` to the same place of every other CPE of the calling
/// CPE's row or column (remote LDM access's `CRTS_rma_row_ibcast`, which the receivers do not
/// call), and counts its own arrival in the reply word at `counter`, as the SDK's broadcast
/// lands on its sender too (in place here: the sender's block is already there). Each
/// receiver counts the block's arrival in its reply word at the same place when it waits for
/// it ([`rma_wait`]). Both ranges lie in declared LDM buffers.
pub fn rma_post(line: Line, ldm: usize, bytes: usize, counter: usize) -> Result<(), Violation> {
    let what = line.post_name();
    let landing = with_cpe(what, |cpe| {
        check_rma(cpe, what)?;
        let (buffer, offset) = cpe.place_in_ldm(&format!("{what} block"), ldm, bytes)?;
        let word = cpe.reply_word(what, counter)?;
        let (counter_buffer, counter_offset) = cpe.place_in_ldm(what, counter, REPLY_BYTES)?;
        // SAFETY: the word lies in one of the CPE's declared LDM buffers, which only this
        // CPE's thread touches.
        unsafe { *word += 1 };
        Ok(Landing {
            buffer,
            name: cpe.buffers[buffer].name.clone(),
            offset,
            counter: (counter_buffer, counter_offset),
        })
    })?;
    let (shared, id) = meeting(what, &format!("uses {what}"), None)?;
    // SAFETY: the range lies in one of the CPE's declared LDM buffers.
    let data = unsafe { std::slice::from_raw_parts(ldm as *const u8, bytes) };
    let to = shared.mesh.post(id, line, data, landing)?;
    with_cpe(what, |cpe| {
        cpe.counters.reg_puts += 1;
        if cpe.machine.spec.is_some() {
            let bytes = bytes as u64;
            cpe.log.push(Event::Post { line, to, bytes });
        }
        Ok(())
    })
}

/// Waits until the reply word at `counter` holds at least `count` (`CRTS_rma_wait_value`):
/// the blocks posted along the calling CPE's row or column land, oldest first, each counting
/// its arrival in its own reply word, until this one reaches `count`. A count no post will
/// reach stops the launch as a receive that no CPE will send to.
pub fn rma_wait(line: Line, counter: usize, count: i64) -> Result<(), Violation> {
    let what = "rma_wait_value";
    let word = with_cpe(what, |cpe| {
        check_rma(cpe, what)?;
        cpe.reply_word(what, counter)
    })?;
    let (shared, id) = meeting(what, &format!("uses {what}"), None)?;
    // SAFETY (here and below): reply words and landing places lie in the CPE's declared LDM
    // buffers, which only this CPE's thread touches.
    while i64::from(unsafe { *word }) < count {
        with_cpe(what, |cpe| {
            if cpe.machine.spec.is_some() {
                cpe.log.push(Event::Receive { line, posted: true });
            }
            Ok(())
        })?;
        let m = shared.mesh.take(id, line)?;
        with_cpe(what, |cpe| {
            let Some(l) = &m.landing else {
                return Err(cpe.violation(format!(
                    "{what} takes a block of {} bytes that CPE {} sent by {}, not posted",
                    m.bytes.len(),
                    m.from,
                    line.put_name()
                )));
            };
            let place = |buffer: usize, offset: usize, bytes: usize| {
                match cpe.buffers.get(buffer) {
                Some(b) if offset + bytes <= b.bytes => Ok(b.base + offset),
                _ => Err(cpe.violation(format!(
                    "a block posted by CPE {} to LDM buffer '{}' at offset {offset} ({bytes} bytes) has no such place here",
                    m.from, l.name
                ))),
            }
            };
            if cpe.buffers.get(l.buffer).is_none_or(|b| b.name != l.name) {
                return Err(cpe.violation(format!(
                    "a block posted by CPE {} to LDM buffer '{}' lands where this CPE declared {}",
                    m.from,
                    l.name,
                    cpe.buffers
                        .get(l.buffer)
                        .map_or("nothing".to_string(), |b| format!("'{}'", b.name))
                )));
            }
            let at = place(l.buffer, l.offset, m.bytes.len())?;
            let reply = place(l.counter.0, l.counter.1, REPLY_BYTES)?;
            unsafe {
                std::ptr::copy_nonoverlapping(m.bytes.as_ptr(), at as *mut u8, m.bytes.len());
                *(reply as *mut i32) += 1;
            }
            cpe.counters.reg_gets += 1;
            Ok(())
        })?;
    }
    Ok(())
}

/// Waits until every CPE of the calling CPE's row or column has arrived (`CRTS_ssync_row`,
/// `CRTS_ssync_col`).
pub fn sync_line(line: Line) -> Result<(), Violation> {
    let what = line.sync_name();
    let (shared, id) = meeting(what, &format!("meets at {what}"), Some(Event::LineSync { line }))?;
    shared.mesh.sync_line(id, line)
}

/// The calling CPE's LDM area for a kernel compiled into this process, or `None` on the
/// host.
pub(crate) fn ldm_area() -> Option<*mut u8> {
    CPE.with(|cell| cell.borrow().as_ref().map(|c| c.machine.ldm_area(c.id)))
}

/// Charges the calling CPE for `n` executions of a stretch of code doing `ops`.
pub fn charge(ops: &Ops, n: u64) -> Result<(), Violation> {
    with_cpe("a compute charge", |cpe| {
        cpe.counters.flops = cpe
            .counters
            .flops
            .saturating_add((ops.flops as u64).saturating_mul(n) as usize);
        if let Some(spec) = &cpe.machine.spec {
            let cycles = spec.timing.cycles(ops) * n as f64;
            cpe.log.compute(cycles);
        }
        Ok(())
    })
}

/// A failure the kernel itself detected (an index out of range), as a violation of the
/// calling CPE.
pub fn fail(message: &str) -> Violation {
    match with_cpe("a kernel failure", |cpe| Ok(cpe.violation(message.to_string()))) {
        Ok(v) | Err(v) => v,
    }
}
