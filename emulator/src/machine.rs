//! The core group: CPE threads, launches, and their joins (race check, timing, totals).
//!
//! A [`Machine`] lives for the whole program, and a launch runs one kernel function on all its
//! CPEs, which the host then joins. Made with [`Machine::new`] (C programs), each CPE is an OS
//! thread of its own, created once; made with [`Machine::pooled`] (compiled kernels, which
//! never meet at barriers), the CPEs are tasks that a few pool threads, and the host while it
//! joins, take in turn and run to their end. State a CPE needs while it runs a kernel (its
//! identity, declared LDM buffers, transfers in flight, the main memory it wrote) is
//! thread-local to the thread running it; what a CPE does with it is in [`crate::cpe`].
//!
//! With a machine description ([`Spec`]) the machine also keeps modelled time: each CPE logs
//! what it does while it runs, and the join replays the logs ([`crate::replay`]) to find the
//! launch's cycles; the host's clock advances by the spawn cost, the slowest CPE and the join
//! cost.

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::cpe::{Block, Cpe};
use crate::mesh::Mesh;
use crate::race::find_race;
use crate::replay::{self, LaunchTime, Log, Span};
use crate::tape::TapeStack;
use crate::timing::Spec;

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
    /// The gets and puts above that carried gradient tape (either tape class), and their
    /// bytes.
    pub tape_gets: usize,
    pub tape_puts: usize,
    pub tape_get_bytes: usize,
    pub tape_put_bytes: usize,
    /// Register-communication puts and gets (a broadcast is one put).
    pub reg_puts: usize,
    pub reg_gets: usize,
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
    /// The part of `queue_busy_cycles` spent serving transfers of gradient tape.
    pub tape_queue_cycles: f64,
    /// The part of `queue_busy_cycles` spent on the transfers' per-block costs.
    pub block_queue_cycles: f64,
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
        self.tape_queue_cycles += o.tape_queue_cycles;
        self.block_queue_cycles += o.block_queue_cycles;
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
        self.tape_gets += o.tape_gets;
        self.tape_puts += o.tape_puts;
        self.tape_get_bytes += o.tape_get_bytes;
        self.tape_put_bytes += o.tape_put_bytes;
        self.reg_puts += o.reg_puts;
        self.reg_gets += o.reg_gets;
    }
}

/// What the running launch looks like to its CPEs.
pub(crate) struct Launch {
    pub kernel: String,
    func: KernelFn,
    pub arg: usize,
    pub arg_bytes: usize,
    /// Every CPE runs on a thread of its own, so CPEs may wait for each other (barriers,
    /// register communication).
    pub threaded: bool,
}

/// What a finished CPE hands back to the launch.
pub(crate) struct CpeResult {
    pub id: usize,
    pub writes: Vec<(usize, usize)>,
    pub counters: KernelCounters,
    pub log: Log,
    /// What stopped it, when it recorded a violation instead of stopping the program.
    pub violation: Option<Violation>,
}

#[derive(Default)]
struct Control {
    generation: u64,
    launch: Option<Arc<Launch>>,
    /// CPEs of the launch a pool thread has taken.
    taken: usize,
    running: usize,
    results: Vec<CpeResult>,
    /// Threads started for one launch of a pooled machine ([`Machine::spawn_threaded`]).
    launch_threads: Vec<std::thread::JoinHandle<()>>,
    shutdown: bool,
}

/// State shared by the host and the CPE threads.
pub(crate) struct Shared {
    cpes: usize,
    pub ldm_bytes: usize,
    pub regions: Mutex<Vec<Block>>,
    control: Mutex<Control>,
    wake: Condvar,
    done: Condvar,
    /// Register communication and barriers of the running launch.
    pub mesh: Mesh,
    /// Whether each CPE has a thread of its own (else a pool of threads, and the host while
    /// it joins, run them as tasks).
    pub thread_per_cpe: bool,
    /// CPEs of the running launch no thread has taken yet, and CPEs still running: mirrors of
    /// the control block's counts that threads poll for a moment before they sleep.
    untaken: AtomicUsize,
    running: AtomicUsize,
    /// Each CPE's LDM area for kernels compiled into this process, made at its first use.
    ldm_areas: Vec<Mutex<Option<Box<[u128]>>>>,
    /// Each CPE's layers of streamed tape still outstanding, kept from launch to launch.
    tape: Vec<Mutex<TapeStack>>,
    /// The machine description when time is modelled.
    pub spec: Option<Spec>,
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

/// Held by the thread that is stopping the program.
static STOPPING: Mutex<()> = Mutex::new(());

/// Prints `error: {message}` and ends the program with exit code 1 (the C side cannot
/// unwind). Only the first thread to fail prints: CPEs that fail at the same moment wait for
/// the exit instead of adding lines, possibly cut short, to its one message.
pub(crate) fn exit_with(message: &str) -> ! {
    let _only = STOPPING.lock().unwrap_or_else(|e| e.into_inner());
    eprintln!("error: {message}");
    std::process::exit(1)
}

/// Stops the program with a violation.
fn fatal(v: &Violation) -> ! {
    exit_with(&v.to_string())
}

impl Machine {
    /// Starts `cpes` CPE threads, each with `ldm_bytes` of LDM; time is modelled when `spec`
    /// describes the machine.
    pub fn new(cpes: usize, ldm_bytes: usize, spec: Option<Spec>) -> Machine {
        Machine::start(cpes, ldm_bytes, spec, None)
    }

    /// A machine whose `cpes` CPEs run as tasks on `threads` threads and on the host's while
    /// it joins a launch: each CPE's kernel runs to its end on one of them, so kernels may not
    /// meet at barriers. Launches cost far less than with a thread per CPE when CPEs outnumber
    /// cores; `threads` is best one less than the cores.
    pub fn pooled(cpes: usize, ldm_bytes: usize, spec: Option<Spec>, threads: usize) -> Machine {
        Machine::start(cpes, ldm_bytes, spec, Some(threads.max(1)))
    }

    fn start(cpes: usize, ldm_bytes: usize, spec: Option<Spec>, pool: Option<usize>) -> Machine {
        let shared = Arc::new(Shared {
            cpes,
            ldm_bytes,
            regions: Mutex::new(Vec::new()),
            control: Mutex::new(Control::default()),
            wake: Condvar::new(),
            done: Condvar::new(),
            mesh: Mesh::new(cpes),
            thread_per_cpe: pool.is_none(),
            untaken: AtomicUsize::new(0),
            running: AtomicUsize::new(0),
            ldm_areas: (0..cpes).map(|_| Mutex::new(None)).collect(),
            tape: (0..cpes).map(|_| Mutex::new(TapeStack::default())).collect(),
            spec,
            clock: Mutex::new(HostClock::default()),
            stats: Mutex::new(BTreeMap::new()),
        });
        let threads = match pool {
            None => (0..cpes).map(|id| (format!("cpe{id}"), Some(id))).collect::<Vec<_>>(),
            Some(n) => (0..n).map(|i| (format!("cpes{i}"), None)).collect(),
        };
        let threads = threads
            .into_iter()
            .map(|(name, id)| {
                let s = shared.clone();
                std::thread::Builder::new()
                    .name(name)
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
        self.start_launch(kernel, func, arg, arg_bytes, self.shared.thread_per_cpe);
    }

    /// [`Machine::spawn`] for a kernel whose CPEs wait for each other (register communication,
    /// barriers): on a pooled machine, this launch runs each CPE on a thread started for it.
    pub fn spawn_threaded(&self, kernel: &str, func: KernelFn, arg: *mut c_void, arg_bytes: usize) {
        self.start_launch(kernel, func, arg, arg_bytes, true);
    }

    fn start_launch(&self, kernel: &str, func: KernelFn, arg: *mut c_void, arg_bytes: usize, threaded: bool) {
        self.join();
        let launch = Arc::new(Launch {
            kernel: kernel.to_string(),
            func,
            arg: arg as usize,
            arg_bytes,
            threaded,
        });
        let own_threads = threaded && !self.shared.thread_per_cpe;
        let mut c = self.shared.control.lock().expect("control");
        c.launch = Some(launch.clone());
        c.generation += 1;
        // A launch on threads of its own leaves no task to the pool.
        c.taken = if own_threads { self.shared.cpes } else { 0 };
        c.running = self.shared.cpes;
        c.results.clear();
        self.shared.mesh.start(kernel);
        let untaken = if own_threads { 0 } else { self.shared.cpes };
        self.shared.untaken.store(untaken, Ordering::Release);
        self.shared.running.store(self.shared.cpes, Ordering::Release);
        if own_threads {
            c.launch_threads = (0..self.shared.cpes)
                .map(|id| {
                    let (s, l) = (self.shared.clone(), launch.clone());
                    std::thread::Builder::new()
                        .name(format!("cpe{id}"))
                        .spawn(move || run_cpe(id, &l, &s))
                        .expect("the OS refused to start a CPE thread")
                })
                .collect();
        }
        self.shared.wake.notify_all();
    }

    /// Waits for the running launch (if any), checks it for races, times it, and adds its
    /// counters and time to the kernel's totals. A violation stops the program.
    pub fn join(&self) {
        if let Err(v) = self.try_join() {
            fatal(&v);
        }
    }

    /// [`Machine::join`], returning the launch's violation instead of stopping: the one its
    /// lowest-numbered failing CPE recorded, else a race. A failed launch adds nothing to the
    /// totals.
    pub fn try_join(&self) -> Result<(), Violation> {
        if !self.shared.thread_per_cpe {
            while let Some((id, launch)) = self.shared.take_task() {
                run_cpe(id, &launch, &self.shared);
            }
            poll(|| self.shared.running.load(Ordering::Acquire) == 0);
        }
        let (launch, mut results, threads) = {
            let mut c = self.shared.control.lock().expect("control");
            while c.running > 0 {
                c = self.shared.done.wait(c).expect("control");
            }
            let Some(launch) = c.launch.take() else { return Ok(()) };
            (
                launch,
                std::mem::take(&mut c.results),
                std::mem::take(&mut c.launch_threads),
            )
        };
        for t in threads {
            let _ = t.join();
        }
        results.sort_by_key(|r| r.id);
        if let Some(v) = results.iter_mut().find_map(|r| r.violation.take()) {
            return Err(v);
        }
        if let Some(v) = self.shared.mesh.leftovers() {
            return Err(v);
        }
        let regions = self.shared.regions.lock().expect("region list").clone();
        if let Some(v) = find_race(&launch.kernel, &results, &regions) {
            return Err(v);
        }
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
        Ok(())
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
            tape_queue_cycles: launch.tape_queue,
            block_queue_cycles: launch.block_queue,
            dma_bound_cycles: get_bytes as f64 / t.dma.get_bytes_per_cycle
                + put_bytes as f64 / t.dma.put_bytes_per_cycle,
        }
    }

    /// Per-kernel totals so far, by kernel name.
    pub fn stats(&self) -> BTreeMap<String, KernelStats> {
        self.shared.stats.lock().expect("stats").clone()
    }

    /// How many layers of streamed tape each CPE has outstanding (pushed and not yet popped),
    /// by CPE id.
    pub fn tape_depths(&self) -> Vec<usize> {
        self.shared
            .tape
            .iter()
            .map(|t| t.lock().expect("tape stack").depth())
            .collect()
    }

    /// Forgets every CPE's outstanding layers of streamed tape, for a program whose training
    /// step leaves tape behind on purpose; called between launches (after a join).
    pub fn reset_tape(&self) {
        for t in &self.shared.tape {
            t.lock().expect("tape stack").clear();
        }
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

impl Shared {
    /// CPE `id`'s layers of streamed tape.
    pub(crate) fn tape_stack(&self, id: usize) -> std::sync::MutexGuard<'_, TapeStack> {
        self.tape[id].lock().expect("tape stack")
    }

    /// CPE `id`'s LDM area (`ldm_bytes` long, 16-byte aligned; its contents stay from kernel
    /// to kernel, as in the hardware's LDM).
    pub(crate) fn ldm_area(&self, id: usize) -> *mut u8 {
        let mut area = self.ldm_areas[id].lock().expect("LDM area");
        let units = self.ldm_bytes.div_ceil(16).max(1);
        area.get_or_insert_with(|| vec![0u128; units].into_boxed_slice())
            .as_mut_ptr()
            .cast()
    }

    /// The next CPE for a thread to run, with its launch; `None` at shutdown. A thread of its
    /// own (`fixed`) runs its CPE once per launch (`seen` is the last launch it ran); a pool
    /// thread takes any CPE of the running launch not yet taken, polling for a moment before
    /// it sleeps.
    fn next_task(&self, fixed: Option<usize>, seen: &mut u64) -> Option<(usize, Arc<Launch>)> {
        if fixed.is_none() {
            poll(|| self.untaken.load(Ordering::Acquire) > 0);
        }
        let mut c = self.control.lock().expect("control");
        loop {
            if c.shutdown {
                return None;
            }
            match (fixed, c.launch.clone()) {
                (Some(id), Some(launch)) if c.generation != *seen => {
                    *seen = c.generation;
                    return Some((id, launch));
                }
                (None, Some(launch)) if c.taken < self.cpes => return Some(self.take(&mut c, launch)),
                _ => c = self.wake.wait(c).expect("control"),
            }
        }
    }

    /// A CPE of the running launch no thread has taken yet, if any.
    fn take_task(&self) -> Option<(usize, Arc<Launch>)> {
        let mut c = self.control.lock().expect("control");
        let launch = c.launch.clone().filter(|_| c.taken < self.cpes)?;
        Some(self.take(&mut c, launch))
    }

    fn take(&self, c: &mut Control, launch: Arc<Launch>) -> (usize, Arc<Launch>) {
        c.taken += 1;
        self.untaken.store(self.cpes - c.taken, Ordering::Release);
        (c.taken - 1, launch)
    }
}

/// Spins until `ready` holds or [`POLL_FOR`] has passed: a launch's CPEs and its join follow
/// each other closely, and waking a sleeping thread takes longer than that.
fn poll(ready: impl Fn() -> bool) {
    let start = Instant::now();
    while !ready() && start.elapsed() < POLL_FOR {
        std::hint::spin_loop();
    }
}

/// How long [`poll`] spins.
const POLL_FOR: Duration = Duration::from_micros(50);

/// A thread that runs CPE `fixed`, or any CPE when it is one of a pool.
fn cpe_thread(fixed: Option<usize>, shared: Arc<Shared>) {
    let mut seen = 0u64;
    while let Some((id, launch)) = shared.next_task(fixed, &mut seen) {
        run_cpe(id, &launch, &shared);
    }
}

/// Runs CPE `id`'s kernel of `launch` on the calling thread and hands its result to the
/// launch.
fn run_cpe(id: usize, launch: &Arc<Launch>, shared: &Arc<Shared>) {
    Cpe::enter(id, launch.clone(), shared.clone());
    (launch.func)(launch.arg as *mut c_void);
    shared.mesh.returned(id);
    let cpe = Cpe::leave();
    let mut c = shared.control.lock().expect("control");
    c.results.push(CpeResult {
        id: cpe.id,
        writes: cpe.writes,
        counters: cpe.counters,
        log: cpe.log,
        violation: cpe.violation,
    });
    c.running -= 1;
    shared.running.store(c.running, Ordering::Release);
    if c.running == 0 {
        shared.done.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;
    use crate::{cpe, native};

    static RAN: AtomicU64 = AtomicU64::new(0);

    extern "C" fn mark(_: *mut c_void) {
        let id = cpe::cpe_id().expect("on a CPE");
        RAN.fetch_or(1 << id, Ordering::SeqCst);
    }

    #[test]
    fn a_pool_runs_every_cpe_once_per_launch() {
        let m = Machine::pooled(64, 1024, None, 3);
        for _ in 0..3 {
            RAN.store(0, Ordering::SeqCst);
            m.spawn("mark", mark, std::ptr::null_mut(), 0);
            m.try_join().expect("no violation");
            assert_eq!(RAN.load(Ordering::SeqCst), u64::MAX);
        }
        assert_eq!(m.stats()["mark"].counters.launches, 3);
    }

    extern "C" fn meet(_: *mut c_void) {
        if let Err(v) = cpe::barrier() {
            cpe::record(v).expect("on a CPE");
        }
    }

    #[test]
    fn a_barrier_on_a_pool_is_a_violation_naming_the_cpe() {
        let m = Machine::pooled(4, 1024, None, 2);
        m.spawn("meet", meet, std::ptr::null_mut(), 0);
        let v = m.try_join().expect_err("a pool cannot meet at barriers");
        assert_eq!((v.kernel.as_str(), v.cpes.as_slice()), ("meet", &[0][..]));
        assert!(v.message.contains("barrier"), "{}", v.message);
    }

    extern "C" fn keep_id(_: *mut c_void) {
        let area = native::swflow_native_ldm(8).cast::<u64>();
        // SAFETY: the CPE's LDM area is at least 8 bytes and 16-byte aligned.
        unsafe { *area = cpe::cpe_id().expect("on a CPE") as u64 + 100 };
    }

    extern "C" fn check_id(_: *mut c_void) {
        let area = native::swflow_native_ldm(8).cast::<u64>();
        let id = cpe::cpe_id().expect("on a CPE") as u64;
        // SAFETY: as in `keep_id`.
        let kept = unsafe { *area };
        if kept != id + 100 {
            cpe::record(cpe::fail(&format!("found {kept} in its LDM"))).expect("on a CPE");
        }
    }

    #[test]
    fn each_cpe_keeps_its_ldm_from_launch_to_launch_on_a_pool() {
        let m = Machine::pooled(16, 1024, None, 3);
        m.spawn("keep", keep_id, std::ptr::null_mut(), 0);
        m.try_join().expect("no violation");
        m.spawn("check", check_id, std::ptr::null_mut(), 0);
        m.try_join().expect("every CPE finds its own value");
    }
}
