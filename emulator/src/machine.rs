//! The core group: CPE threads, launches, LDM buffers, DMA and the checks on them.
//!
//! One [`Machine`] lives for the whole program. Its CPEs are OS threads created once; a
//! launch runs one kernel function on all of them and the host joins it. State a CPE needs
//! while it runs a kernel (its identity, declared LDM buffers, transfers in flight, the main
//! memory it wrote) is thread-local to that CPE's thread.
//!
//! With a machine description ([`Spec`]) the machine also keeps modelled time: each CPE logs
//! what it does while it runs, and the join replays the logs ([`crate::replay`]) to find the
//! launch's cycles; the host's clock advances by the spawn cost, the slowest CPE and the join
//! cost.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::fmt;
use std::sync::{Arc, Barrier, Condvar, Mutex};

use crate::replay::{self, Event, LaunchTime, Log, Span};
use crate::timing::{Ops, Spec};

/// A kernel function as the C side sees it: `void kernel(void *arg)`.
pub type KernelFn = extern "C" fn(*mut c_void);

/// Which way a transfer moves data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Main memory to LDM.
    Get,
    /// LDM to main memory.
    Put,
}

/// Something a kernel did that real hardware would get wrong; it stops the program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub kernel: String,
    /// The CPEs involved (two for a race).
    pub cpes: Vec<usize>,
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.cpes.as_slice() {
            [] => write!(f, "kernel '{}': {}", self.kernel, self.message),
            [c] => write!(f, "kernel '{}' on CPE {c}: {}", self.kernel, self.message),
            cs => {
                let list: Vec<String> = cs.iter().map(|c| c.to_string()).collect();
                write!(
                    f,
                    "kernel '{}' on CPEs {}: {}",
                    self.kernel,
                    list.join(" and "),
                    self.message
                )
            }
        }
    }
}

/// Per-kernel totals over all its launches and CPEs.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct KernelCounters {
    pub launches: usize,
    /// DMA gets and puts of tensor data (one per call; a strided transfer is one).
    pub gets: usize,
    pub puts: usize,
    pub get_bytes: usize,
    pub put_bytes: usize,
    /// Gets of the launch's parameter struct, counted apart from tensor traffic.
    pub arg_gets: usize,
    /// Elements read and written in main memory without DMA.
    pub direct_reads: usize,
    pub direct_writes: usize,
    /// Most LDM bytes any CPE declared in one launch.
    pub ldm_high_water: usize,
    /// Floating-point operations the kernel's code reported.
    pub flops: usize,
}

/// Per-kernel modelled time over all its launches, in CPE cycles. The CPE fields are sums
/// over CPEs and launches; together they make `cpes * span_cycles`.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct KernelTime {
    /// Spawn cost, slowest CPE and join cost, summed over launches.
    pub modelled_cycles: f64,
    /// From the first CPE's start to the last CPE's return, summed over launches.
    pub span_cycles: f64,
    pub compute_cycles: f64,
    pub dma_wait_cycles: f64,
    pub direct_cycles: f64,
    pub idle_cycles: f64,
    /// Cycles the DMA queue was serving this kernel's transfers.
    pub queue_busy_cycles: f64,
    /// Least cycles its DMA could take: its bytes at the queue's bandwidths alone, with no
    /// per-block cost and no partial lines.
    pub dma_bound_cycles: f64,
}

impl KernelTime {
    /// Adds another launch's or kernel's time.
    pub fn add(&mut self, o: &KernelTime) {
        self.modelled_cycles += o.modelled_cycles;
        self.span_cycles += o.span_cycles;
        self.compute_cycles += o.compute_cycles;
        self.dma_wait_cycles += o.dma_wait_cycles;
        self.direct_cycles += o.direct_cycles;
        self.idle_cycles += o.idle_cycles;
        self.queue_busy_cycles += o.queue_busy_cycles;
        self.dma_bound_cycles += o.dma_bound_cycles;
    }
}

/// One kernel's counters and modelled time.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KernelStats {
    pub counters: KernelCounters,
    pub time: KernelTime,
}

impl KernelCounters {
    /// Adds another CPE's or kernel's counts (launches are counted by the caller).
    pub(crate) fn merge(&mut self, o: &KernelCounters) {
        self.gets += o.gets;
        self.puts += o.puts;
        self.get_bytes += o.get_bytes;
        self.put_bytes += o.put_bytes;
        self.arg_gets += o.arg_gets;
        self.direct_reads += o.direct_reads;
        self.direct_writes += o.direct_writes;
        self.ldm_high_water = self.ldm_high_water.max(o.ldm_high_water);
        self.flops += o.flops;
    }
}

/// A named block of memory: a main-memory region or an LDM buffer.
#[derive(Clone, Debug)]
struct Block {
    base: usize,
    bytes: usize,
    name: String,
}

impl Block {
    fn contains(&self, addr: usize) -> bool {
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

/// What the running launch looks like to its CPEs.
struct Launch {
    kernel: String,
    func: KernelFn,
    arg: usize,
    arg_bytes: usize,
}

/// A CPE's state while it runs a kernel.
struct Cpe {
    id: usize,
    launch: Arc<Launch>,
    machine: Arc<Shared>,
    buffers: Vec<Block>,
    pending: Vec<Transfer>,
    writes: Vec<(usize, usize)>,
    counters: KernelCounters,
    log: Log,
}

thread_local! {
    static CPE: RefCell<Option<Cpe>> = const { RefCell::new(None) };
}

/// What a finished CPE hands back to the launch.
struct CpeResult {
    id: usize,
    writes: Vec<(usize, usize)>,
    counters: KernelCounters,
    log: Log,
}

#[derive(Default)]
struct Control {
    generation: u64,
    launch: Option<Arc<Launch>>,
    running: usize,
    results: Vec<CpeResult>,
    shutdown: bool,
}

/// State shared by the host and the CPE threads.
struct Shared {
    cpes: usize,
    ldm_bytes: usize,
    regions: Mutex<Vec<Block>>,
    control: Mutex<Control>,
    wake: Condvar,
    done: Condvar,
    barrier: Barrier,
    /// The machine description when time is modelled.
    spec: Option<Spec>,
    clock: Mutex<HostClock>,
    stats: Mutex<BTreeMap<String, KernelStats>>,
}

/// Receives every launch at its join: the kernel, the host cycle at which its CPEs started,
/// its time, and its spans (cycles since that start).
pub type TraceSink = Box<dyn FnMut(&str, f64, &LaunchTime, &[Span]) + Send>;

/// The host's modelled time, and where launches are traced to.
#[derive(Default)]
struct HostClock {
    cycles: f64,
    trace: Option<TraceSink>,
}

/// The core group.
pub struct Machine {
    shared: Arc<Shared>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

/// Stops the program with a violation (the C side cannot unwind).
fn fatal(v: &Violation) -> ! {
    eprintln!("error: {v}");
    std::process::exit(1)
}

impl Machine {
    /// Starts `cpes` CPE threads, each with `ldm_bytes` of LDM; time is modelled when `spec`
    /// describes the machine.
    pub fn new(cpes: usize, ldm_bytes: usize, spec: Option<Spec>) -> Machine {
        let shared = Arc::new(Shared {
            cpes,
            ldm_bytes,
            regions: Mutex::new(Vec::new()),
            control: Mutex::new(Control::default()),
            wake: Condvar::new(),
            done: Condvar::new(),
            barrier: Barrier::new(cpes),
            spec,
            clock: Mutex::new(HostClock::default()),
            stats: Mutex::new(BTreeMap::new()),
        });
        let threads = (0..cpes)
            .map(|id| {
                let s = shared.clone();
                std::thread::Builder::new()
                    .name(format!("cpe{id}"))
                    .spawn(move || cpe_thread(id, s))
                    .expect("the OS refused to start a CPE thread")
            })
            .collect();
        Machine { shared, threads }
    }

    pub fn cpes(&self) -> usize {
        self.shared.cpes
    }

    pub fn ldm_bytes(&self) -> usize {
        self.shared.ldm_bytes
    }

    /// The machine description, when time is modelled.
    pub fn spec(&self) -> Option<&Spec> {
        self.shared.spec.as_ref()
    }

    /// Modelled host time so far, cycles.
    pub fn now(&self) -> f64 {
        self.shared.clock.lock().expect("clock").cycles
    }

    /// Hands every later launch to `sink` at its join.
    pub fn trace_to(&self, sink: TraceSink) {
        self.shared.clock.lock().expect("clock").trace = Some(sink);
    }

    /// Registers main memory that DMA may reach.
    pub fn add_region(&self, base: usize, bytes: usize, name: &str) {
        self.shared.regions.lock().expect("region list").push(Block {
            base,
            bytes,
            name: name.to_string(),
        });
    }

    /// Starts `func(arg)` on every CPE; `arg` points to `arg_bytes` of main memory the CPEs
    /// may read by DMA. A launch still running is joined first.
    pub fn spawn(&self, kernel: &str, func: KernelFn, arg: *mut c_void, arg_bytes: usize) {
        self.join();
        let mut c = self.shared.control.lock().expect("control");
        c.launch = Some(Arc::new(Launch {
            kernel: kernel.to_string(),
            func,
            arg: arg as usize,
            arg_bytes,
        }));
        c.generation += 1;
        c.running = self.shared.cpes;
        c.results.clear();
        self.shared.wake.notify_all();
    }

    /// Waits for the running launch (if any), checks it for races, times it, and adds its
    /// counters and time to the kernel's totals.
    pub fn join(&self) {
        let (launch, mut results) = {
            let mut c = self.shared.control.lock().expect("control");
            while c.running > 0 {
                c = self.shared.done.wait(c).expect("control");
            }
            let Some(launch) = c.launch.take() else { return };
            (launch, std::mem::take(&mut c.results))
        };
        let regions = self.shared.regions.lock().expect("region list").clone();
        if let Some(v) = find_race(&launch.kernel, &results, &regions) {
            fatal(&v);
        }
        results.sort_by_key(|r| r.id);
        let time = self
            .shared
            .spec
            .as_ref()
            .map(|spec| self.time_launch(&launch.kernel, spec, &mut results));
        let mut stats = self.shared.stats.lock().expect("stats");
        let total = stats.entry(launch.kernel.clone()).or_default();
        total.counters.launches += 1;
        for r in &results {
            total.counters.merge(&r.counters);
        }
        if let Some(t) = time {
            total.time.add(&t);
        }
    }

    /// Replays a finished launch (results by CPE id), advances the host clock over it and
    /// traces it.
    fn time_launch(&self, kernel: &str, spec: &Spec, results: &mut [CpeResult]) -> KernelTime {
        let t = &spec.timing;
        let logs: Vec<Log> = results.iter_mut().map(|r| std::mem::take(&mut r.log)).collect();
        let mut clock = self.shared.clock.lock().expect("clock");
        let start = clock.cycles + t.spawn_cycles;
        let mut spans = Vec::new();
        let launch = if clock.trace.is_some() {
            replay::replay(&logs, t, Some(&mut |s| spans.push(s)))
        } else {
            replay::replay(&logs, t, None)
        };
        clock.cycles = start + launch.span + t.join_cycles;
        if let Some(sink) = clock.trace.as_mut() {
            sink(kernel, start, &launch, &spans);
        }
        let sum = |f: fn(&replay::CpeTime) -> f64| launch.cpes.iter().map(f).sum::<f64>();
        let get_bytes: usize = results.iter().map(|r| r.counters.get_bytes).sum();
        let put_bytes: usize = results.iter().map(|r| r.counters.put_bytes).sum();
        KernelTime {
            modelled_cycles: t.spawn_cycles + launch.span + t.join_cycles,
            span_cycles: launch.span,
            compute_cycles: sum(|c| c.compute),
            dma_wait_cycles: sum(|c| c.dma_wait),
            direct_cycles: sum(|c| c.direct),
            idle_cycles: sum(|c| c.idle),
            queue_busy_cycles: launch.queue_busy,
            dma_bound_cycles: get_bytes as f64 / t.dma.get_bytes_per_cycle
                + put_bytes as f64 / t.dma.put_bytes_per_cycle,
        }
    }

    /// Per-kernel totals so far, by kernel name.
    pub fn stats(&self) -> BTreeMap<String, KernelStats> {
        self.shared.stats.lock().expect("stats").clone()
    }
}

impl Drop for Machine {
    fn drop(&mut self) {
        self.join();
        {
            let mut c = self.shared.control.lock().expect("control");
            c.shutdown = true;
            self.shared.wake.notify_all();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn cpe_thread(id: usize, shared: Arc<Shared>) {
    let mut seen = 0u64;
    loop {
        let launch = {
            let mut c = shared.control.lock().expect("control");
            while c.generation == seen && !c.shutdown {
                c = shared.wake.wait(c).expect("control");
            }
            if c.shutdown {
                return;
            }
            seen = c.generation;
            c.launch.clone().expect("a new generation carries a launch")
        };
        CPE.with(|cell| {
            *cell.borrow_mut() = Some(Cpe {
                id,
                launch: launch.clone(),
                machine: shared.clone(),
                buffers: Vec::new(),
                pending: Vec::new(),
                writes: Vec::new(),
                counters: KernelCounters::default(),
                log: Log::default(),
            })
        });
        (launch.func)(launch.arg as *mut c_void);
        let cpe = CPE
            .with(|cell| cell.borrow_mut().take())
            .expect("the CPE state outlives its kernel");
        if !cpe.pending.is_empty() {
            fatal(&cpe.violation(format!(
                "returns with {} DMA transfer(s) never waited for",
                cpe.pending.len()
            )));
        }
        let mut c = shared.control.lock().expect("control");
        c.results.push(CpeResult {
            id: cpe.id,
            writes: cpe.writes,
            counters: cpe.counters,
            log: cpe.log,
        });
        c.running -= 1;
        if c.running == 0 {
            shared.done.notify_all();
        }
    }
}

impl Cpe {
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
fn with_cpe<R>(what: &str, f: impl FnOnce(&mut Cpe) -> R) -> R {
    CPE.with(|cell| {
        let mut cell = cell.borrow_mut();
        match cell.as_mut() {
            Some(cpe) => f(cpe),
            None => fatal(&Violation {
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

/// Declares an LDM buffer of the running kernel on the calling CPE. Buffers may not overlap
/// and all of them together must fit the LDM.
pub fn declare_ldm(base: usize, bytes: usize, name: &str) {
    with_cpe("LDM declaration", |cpe| {
        if let Some(b) = cpe
            .buffers
            .iter()
            .find(|b| base < b.base.saturating_add(b.bytes) && b.base < base.saturating_add(bytes))
        {
            fatal(&cpe.violation(format!("LDM buffer '{name}' overlaps LDM buffer '{}'", b.name)));
        }
        cpe.buffers.push(Block {
            base,
            bytes,
            name: name.to_string(),
        });
        let total: usize = cpe.buffers.iter().map(|b| b.bytes).sum();
        if total > cpe.machine.ldm_bytes {
            fatal(&cpe.violation(format!(
                "declares {total} bytes of LDM buffers; each CPE has {} bytes",
                cpe.machine.ldm_bytes
            )));
        }
        cpe.counters.ldm_high_water = cpe.counters.ldm_high_water.max(total);
    })
}

/// Issues a DMA: checked now, performed when the CPE waits on `reply`. `stride` and `bsize`
/// follow athread: `bsize` bytes are contiguous, then `stride` bytes of main memory are
/// skipped; `bsize == 0` means one contiguous block.
#[allow(clippy::too_many_arguments)]
pub fn dma(dir: Direction, main: usize, ldm: usize, len: usize, reply: usize, stride: usize, bsize: usize) {
    with_cpe("DMA", |cpe| {
        let what = match dir {
            Direction::Get => "get",
            Direction::Put => "put",
        };
        if len == 0 || (bsize > 0 && len % bsize != 0) {
            fatal(&cpe.violation(format!(
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
        match cpe.buffers.iter().find(|b| b.contains(ldm)) {
            Some(b) if ldm.saturating_add(len) > b.base + b.bytes => fatal(&cpe.violation(format!(
                "DMA {what} of {len} bytes at offset {} of LDM buffer '{}' ({} bytes) runs {} bytes past its end",
                ldm - b.base,
                b.name,
                b.bytes,
                ldm.saturating_add(len) - (b.base + b.bytes)
            ))),
            Some(_) => {}
            None => fatal(&cpe.violation(format!(
                "DMA {what} of {len} bytes to {}, which is in no declared LDM buffer",
                cpe.describe_ldm(ldm)
            ))),
        }
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
            Some(r) => fatal(&cpe.violation(format!(
                "DMA {what} of {len} bytes at offset {} of {} ({} bytes) runs {} bytes past its end",
                main - r.base,
                r.name,
                r.bytes,
                span_end - (r.base + r.bytes)
            ))),
            None => fatal(&cpe.violation(format!(
                "DMA {what} of {len} bytes at main-memory address {main:#x}, outside every allocated region"
            ))),
        }
        drop(regions);
        if let Some(spec) = &cpe.machine.spec {
            let line = spec.timing.dma.line_bytes as usize;
            let lines: usize = t.blocks().map(|(s, e)| (e - 1) / line - s / line + 1).sum();
            cpe.log.push(Event::Dma {
                put: dir == Direction::Put,
                blocks: (len / bsize) as u64,
                lines: lines as u64,
                reply,
            });
        }
        match dir {
            Direction::Get if in_arg => cpe.counters.arg_gets += 1,
            Direction::Get => {
                cpe.counters.gets += 1;
                cpe.counters.get_bytes += len;
            }
            Direction::Put => {
                cpe.counters.puts += 1;
                cpe.counters.put_bytes += len;
            }
        }
        cpe.pending.push(t);
    })
}

/// Checks a direct main-memory access of the calling CPE (an element read or written without
/// DMA): it must lie inside a registered region; a write joins the launch's race check.
pub fn direct(addr: usize, bytes: usize, write: bool) {
    with_cpe("a direct access", |cpe| {
        let regions = cpe.machine.regions.lock().expect("region list");
        let inside = regions
            .iter()
            .any(|r| r.contains(addr) && addr.saturating_add(bytes) <= r.base + r.bytes);
        drop(regions);
        if !inside {
            let what = if write { "write" } else { "read" };
            fatal(&cpe.violation(format!(
                "direct {what} of {bytes} bytes at main-memory address {addr:#x}, outside every allocated region"
            )));
        }
        if let Some(spec) = &cpe.machine.spec {
            let t = &spec.timing;
            cpe.log.direct(if write { t.gstore_cycles } else { t.gload_cycles });
        }
        if write {
            cpe.counters.direct_writes += 1;
            match cpe.writes.last_mut() {
                Some(last) if last.1 == addr => last.1 += bytes,
                _ => cpe.writes.push((addr, addr + bytes)),
            }
        } else {
            cpe.counters.direct_reads += 1;
        }
    })
}

/// Completes the calling CPE's transfers on `reply` (in issue order), each adding one to the
/// counter, then requires the counter to have reached `n` (exactly `n` when `exact`, as a
/// `while (reply != n);` loop needs): otherwise the hardware would wait forever.
pub fn wait(reply: usize, n: i64, exact: bool) {
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
                cpe.writes.extend(t.blocks());
            }
            let counter = reply as *mut i32;
            // SAFETY: `reply` is the address of the counter the kernel named in the transfer; it
            // lives in the CPE's LDM for the whole kernel.
            unsafe { counter.write_volatile(counter.read_volatile().wrapping_add(1)) };
        }
        // SAFETY: as above.
        let value = unsafe { (reply as *const i32).read_volatile() } as i64;
        if value < n || (exact && value != n) {
            fatal(&cpe.violation(format!(
                "waits for its reply counter to reach {n}, but it stops at {value}: the hardware would wait forever"
            )));
        }
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

/// Waits until every CPE of the launch has arrived.
pub fn barrier() {
    let shared = with_cpe("athread_syn", |cpe| {
        if cpe.machine.spec.is_some() {
            cpe.log.push(Event::Barrier);
        }
        cpe.machine.clone()
    });
    shared.barrier.wait();
}

/// Charges the calling CPE for `n` executions of a stretch of code doing `ops`.
pub fn charge(ops: &Ops, n: u64) {
    with_cpe("a compute charge", |cpe| {
        cpe.counters.flops = cpe
            .counters
            .flops
            .saturating_add((ops.flops as u64).saturating_mul(n) as usize);
        if let Some(spec) = &cpe.machine.spec {
            let cycles = spec.timing.cycles(ops) * n as f64;
            cpe.log.compute(cycles);
        }
    })
}

/// Stops the program with a failure the kernel itself detected (an index out of range).
pub fn fail(message: &str) -> ! {
    let v = with_cpe("a kernel failure", |cpe| cpe.violation(message.to_string()));
    fatal(&v)
}

/// The first pair of CPEs whose main-memory writes overlap, as a violation.
fn find_race(kernel: &str, results: &[CpeResult], regions: &[Block]) -> Option<Violation> {
    let mut writes: Vec<(usize, usize, usize)> = results
        .iter()
        .flat_map(|r| r.writes.iter().map(move |&(s, e)| (s, e, r.id)))
        .collect();
    writes.sort_unstable();
    // The furthest-reaching write so far as (end, cpe), and the furthest one of any other CPE.
    let mut best: Option<(usize, usize)> = None;
    let mut second: Option<(usize, usize)> = None;
    for &(s, e, cpe) in &writes {
        let other = match best {
            Some((_, c)) if c == cpe => second,
            b => b,
        };
        if let Some((end, c)) = other.filter(|&(end, _)| s < end) {
            let hi = end.min(e);
            let place = match regions.iter().find(|r| r.contains(s)) {
                Some(r) => format!("{} bytes [{}, {})", r.name, s - r.base, hi - r.base),
                None => format!("main memory [{s:#x}, {hi:#x})"),
            };
            return Some(Violation {
                kernel: kernel.to_string(),
                cpes: vec![c.min(cpe), c.max(cpe)],
                message: format!("both write {place} in one launch"),
            });
        }
        match best {
            Some((be, bc)) if bc == cpe => best = Some((be.max(e), bc)),
            Some((be, _)) if e > be => {
                second = best;
                best = Some((e, cpe));
            }
            Some(_) if second.is_none_or(|(se, _)| e > se) => second = Some((e, cpe)),
            Some(_) => {}
            None => best = Some((e, cpe)),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(id: usize, writes: &[(usize, usize)]) -> CpeResult {
        CpeResult {
            id,
            writes: writes.to_vec(),
            counters: KernelCounters::default(),
            log: Log::default(),
        }
    }

    fn arena() -> Vec<Block> {
        vec![Block {
            base: 1000,
            bytes: 1000,
            name: "arena".into(),
        }]
    }

    #[test]
    fn disjoint_writes_are_no_race() {
        let r = [result(0, &[(1000, 1010), (1010, 1020)]), result(1, &[(1020, 1040)])];
        assert_eq!(find_race("k", &r, &arena()), None);
    }

    #[test]
    fn one_cpe_may_rewrite_its_own_bytes() {
        let r = [result(3, &[(1000, 1100), (1050, 1060)]), result(4, &[(1100, 1200)])];
        assert_eq!(find_race("k", &r, &arena()), None);
    }

    #[test]
    fn overlap_of_two_cpes_is_reported_with_both() {
        let r = [result(0, &[(1000, 1010)]), result(5, &[(1008, 1020)])];
        let v = find_race("relu", &r, &arena()).expect("a race");
        assert_eq!(v.cpes, vec![0, 5]);
        assert_eq!(
            v.to_string(),
            "kernel 'relu' on CPEs 0 and 5: both write arena bytes [8, 10) in one launch"
        );
    }

    #[test]
    fn overlap_hidden_behind_a_longer_write_of_the_same_cpe_is_found() {
        // CPE 1's long write covers CPE 2's, and CPE 1 writes again later: the race is
        // between CPE 2's write and CPE 1's first one.
        let r = [result(1, &[(1000, 1100), (1010, 1020)]), result(2, &[(1005, 1008)])];
        let v = find_race("k", &r, &arena()).expect("a race");
        assert_eq!(v.cpes, vec![1, 2]);
    }

    #[test]
    fn overlap_with_the_second_furthest_cpe_is_found() {
        // CPE 0 reaches furthest; CPE 1 reaches second; a later write of CPE 0 overlaps CPE 1.
        let r = [result(0, &[(1000, 1200), (1050, 1060)]), result(1, &[(1001, 1100)])];
        let v = find_race("k", &r, &arena()).expect("a race");
        assert_eq!(v.cpes, vec![0, 1]);
    }
}
