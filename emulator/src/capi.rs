//! The C ABI that `runtime-c` builds the athread and CRTS interfaces on.
//!
//! All functions act on one process-wide machine created by [`swflow_emu_init`]. Pointers
//! are plain addresses to the emulator: it never dereferences main memory or LDM except to
//! perform a checked DMA. Bad arguments are violations: the program stops with a message
//! naming the kernel and CPE.

use std::ffi::{c_char, c_int, c_long, c_void, CStr};
use std::sync::{Mutex, OnceLock};

use crate::cpe;
use crate::machine::{exit_with, Direction, KernelFn, Machine, Violation};
use crate::mesh::Line;
use crate::report;
use crate::tape::DmaClass;
use crate::timing::{Ops, Spec};
use crate::trace::TraceWriter;

static MACHINE: OnceLock<Machine> = OnceLock::new();

/// Main-memory regions registered before the machine starts (the arena is allocated and
/// loaded before `athread_init`).
static EARLY_REGIONS: Mutex<Vec<(usize, usize, String)>> = Mutex::new(Vec::new());

/// The Chrome trace being written, when `SWFLOW_TRACE` names a file.
static TRACE: Mutex<Option<TraceWriter>> = Mutex::new(None);

/// Stops the program with a message (the C side cannot take errors back).
fn die(message: &str) -> ! {
    exit_with(message)
}

/// Stops the program with a violation (the C side cannot take errors back).
fn stop(v: &Violation) -> ! {
    die(&v.to_string())
}

fn machine() -> &'static Machine {
    match MACHINE.get() {
        Some(m) => m,
        None => die("the core group is used before athread_init (or CRTS_init)"),
    }
}

/// A C string argument, or `what` when it is null or not UTF-8.
///
/// # Safety
/// `s` is null or points to a NUL-terminated string.
unsafe fn text(s: *const c_char, what: &str) -> String {
    if s.is_null() {
        return what.to_string();
    }
    CStr::from_ptr(s)
        .to_str()
        .map_or_else(|_| what.to_string(), str::to_string)
}

/// A non-negative size argument of a CPE call.
fn size(v: c_long, what: &str) -> usize {
    usize::try_from(v).unwrap_or_else(|_| {
        let me = cpe::cpe_id().map_or(String::new(), |c| format!(" (CPE {c})"));
        die(&format!("{what} is negative ({v}){me}"))
    })
}

/// Starts the core group: `cpes` CPEs with `ldm_bytes` of LDM each, timed by the machine
/// description `spec` (TOML text: the target's clock, peak and `[timing]` table), or
/// functional only when `spec` is null or the environment sets `SWFLOW_TIMING=off`. With
/// `SWFLOW_TRACE=file.json` a timed machine writes a Chrome trace. A second call with the
/// same sizes does nothing but forget the streamed tape (as [`swflow_emu_tape_reset`]);
/// returns 0, or -1 when the sizes differ from the first call.
///
/// # Safety
/// `spec` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn swflow_emu_init(cpes: c_int, ldm_bytes: c_long, spec: *const c_char) -> c_int {
    let cpes = size(cpes as c_long, "the CPE count").max(1);
    let ldm = size(ldm_bytes, "the LDM size");
    let timed = std::env::var("SWFLOW_TIMING").map_or(true, |v| v != "off");
    let spec = if spec.is_null() || !timed {
        None
    } else {
        let text = CStr::from_ptr(spec)
            .to_str()
            .unwrap_or_else(|_| die("the machine description is not UTF-8"));
        Some(Spec::parse(text).unwrap_or_else(|e| die(&format!("the machine description: {e}"))))
    };
    let m = MACHINE.get_or_init(|| {
        let clock_hz = spec.as_ref().map(|s| s.clock_hz);
        let m = Machine::new(cpes, ldm, spec);
        if let (Some(clock_hz), Ok(path)) = (clock_hz, std::env::var("SWFLOW_TRACE")) {
            let writer = TraceWriter::create(&path, cpes, clock_hz)
                .unwrap_or_else(|e| die(&format!("writing the trace {path}: {e}")));
            *TRACE.lock().expect("trace") = Some(writer);
            m.trace_to(Box::new(move |kernel, start, time, spans| {
                if let Some(w) = TRACE.lock().expect("trace").as_mut() {
                    if let Err(e) = w.launch(kernel, start, time, spans) {
                        die(&format!("writing the trace {path}: {e}"));
                    }
                }
            }));
        }
        for (base, bytes, name) in EARLY_REGIONS.lock().expect("region list").drain(..) {
            m.add_region(base, bytes, &name);
        }
        m
    });
    m.reset_tape();
    if m.cpes() == cpes && m.ldm_bytes() == ldm {
        0
    } else {
        -1
    }
}

/// Registers `bytes` of main memory at `base` that DMA may reach.
///
/// # Safety
/// `name` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn swflow_emu_main_region(base: *const c_void, bytes: usize, name: *const c_char) {
    let name = text(name, "main memory");
    let mut early = EARLY_REGIONS.lock().expect("region list");
    match MACHINE.get() {
        Some(m) => m.add_region(base as usize, bytes, &name),
        None => early.push((base as usize, bytes, name)),
    }
}

/// Starts `func(arg)` on every CPE as kernel `kernel`; the CPEs may DMA `arg_bytes` from `arg`.
///
/// # Safety
/// `kernel` is null or a NUL-terminated string; `func` is a kernel function.
#[no_mangle]
pub unsafe extern "C" fn swflow_emu_spawn(kernel: *const c_char, func: KernelFn, arg: *mut c_void, arg_bytes: usize) {
    machine().spawn(&text(kernel, "(unnamed kernel)"), func, arg, arg_bytes);
}

/// Waits for the running launch and checks it.
#[no_mangle]
pub extern "C" fn swflow_emu_join() {
    machine().join();
}

/// Joins, ends the trace, then prints the per-kernel counters and modelled time when
/// `SWFLOW_STATS` asks for them.
#[no_mangle]
pub extern "C" fn swflow_emu_halt() {
    let m = machine();
    m.join();
    if let Some(mut w) = TRACE.lock().expect("trace").take() {
        if let Err(e) = w.finish() {
            eprintln!("error: writing the trace: {e}");
        }
    }
    if let Ok(how) = std::env::var("SWFLOW_STATS") {
        if let Err(e) = report::write(m, &how) {
            eprintln!("error: writing emulator statistics to {how}: {e}");
        }
    }
}

/// The host's modelled time since the core group started, in seconds (0 when time is not
/// modelled): what a timer around spawn and join reads on the real machine.
#[no_mangle]
pub extern "C" fn swflow_emu_seconds() -> f64 {
    let m = machine();
    m.spec().map_or(0.0, |s| m.now() / s.clock_hz)
}

/// The calling CPE's id (0-based), or -1 on the host.
#[no_mangle]
pub extern "C" fn swflow_emu_cpe_id() -> c_int {
    cpe::cpe_id().map_or(-1, |c| c as c_int)
}

/// Declares an LDM buffer of the running kernel on the calling CPE.
///
/// # Safety
/// `name` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn swflow_emu_ldm_buffer(base: *const c_void, bytes: usize, name: *const c_char) {
    cpe::declare_ldm(base as usize, bytes, &text(name, "(unnamed)")).unwrap_or_else(|v| stop(&v));
}

/// Issues a DMA from the calling CPE: `dir` 0 gets `len` bytes from `main` into `ldm`, 1 puts
/// them from `ldm` to `main`; `bsize`/`stride` as athread (0, 0 for contiguous). Completion
/// increments the `int` at `reply`.
#[no_mangle]
pub extern "C" fn swflow_emu_dma(
    dir: c_int,
    main: *const c_void,
    ldm: *mut c_void,
    len: c_long,
    reply: *mut c_void,
    stride: c_long,
    bsize: c_long,
) {
    let dir = if dir == 0 { Direction::Get } else { Direction::Put };
    cpe::dma(
        dir,
        main as usize,
        ldm as usize,
        size(len, "a DMA length"),
        reply as usize,
        size(stride, "a DMA stride"),
        size(bsize, "a DMA block size"),
    )
    .unwrap_or_else(|v| stop(&v));
}

/// Sets the class of the calling CPE's later DMA: 0 data, 1 tape, 2 streamed tape (see
/// [`DmaClass`]); each launch starts with data. Any other value stops the program.
#[no_mangle]
pub extern "C" fn swflow_emu_dma_class(class: c_int) {
    let set = match DmaClass::from_code(class.into()) {
        Some(c) => cpe::set_class(c),
        None => Err(cpe::fail(&format!("DMA class {class} is none of 0, 1 and 2"))),
    };
    set.unwrap_or_else(|v| stop(&v));
}

/// Joins the running launch, then forgets every CPE's outstanding layers of streamed tape: a
/// host whose training step leaves tape behind on purpose calls it between steps.
#[no_mangle]
pub extern "C" fn swflow_emu_tape_reset() {
    let m = machine();
    m.join();
    m.reset_tape();
}

/// Checks a direct main-memory access (a write when `write` is non-zero) and returns `addr`.
#[no_mangle]
pub extern "C" fn swflow_emu_direct(addr: *mut c_void, bytes: usize, write: c_int) -> *mut c_void {
    cpe::direct(addr as usize, bytes, write != 0).unwrap_or_else(|v| stop(&v));
    addr
}

/// Completes the calling CPE's transfers on `reply`; the counter must then be `n` (at least
/// `n` unless `exact`).
#[no_mangle]
pub extern "C" fn swflow_emu_wait(reply: *const c_void, n: c_long, exact: c_int) {
    // `long` is 64 bits here but not on every C platform.
    #[allow(clippy::useless_conversion)]
    let n = i64::from(n);
    cpe::wait(reply as usize, n, exact != 0).unwrap_or_else(|v| stop(&v));
}

/// Charges the calling CPE for `n` executions of a stretch of code doing `ops` (nothing when
/// `n` is not positive).
///
/// # Safety
/// `ops` points to a `struct swflow_ops`.
#[no_mangle]
pub unsafe extern "C" fn swflow_emu_charge(ops: *const Ops, n: c_long) {
    if n > 0 {
        cpe::charge(&*ops, n as u64).unwrap_or_else(|v| stop(&v));
    }
}

/// Barrier across all CPEs of the launch.
#[no_mangle]
pub extern "C" fn swflow_emu_barrier() {
    cpe::barrier().unwrap_or_else(|v| stop(&v));
}

/// The line of a register-communication call, or the end of the program.
fn line(code: c_int, what: &str) -> Line {
    Line::from_code(code).unwrap_or_else(|| die(&format!("{what}: line {code} is neither 0 (row) nor 1 (column)")))
}

/// Register communication (SW26010): sends the `bytes` at `value` (one register, at most 32
/// bytes) along the calling CPE's row (`line` 0) or column (1) to index `dst` of it, or to
/// every other CPE of it (`dst` 8; only the low four bits count, as on the hardware).
///
/// # Safety
/// `value` points to `bytes` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn swflow_emu_regcomm_put(code: c_int, value: *const c_void, bytes: usize, dst: c_int) {
    let l = line(code, "swflow_emu_regcomm_put");
    let data = std::slice::from_raw_parts(value.cast::<u8>(), bytes);
    cpe::reg_put(l, dst as u32, data).unwrap_or_else(|v| stop(&v));
}

/// Register communication (SW26010): takes the calling CPE's oldest message along its row
/// (`line` 0) or column (1) into the `bytes` at `value`, which must be as many as were put;
/// waits for it. A get that no put will ever match stops the program.
///
/// # Safety
/// `value` points to `bytes` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn swflow_emu_regcomm_get(code: c_int, value: *mut c_void, bytes: usize) {
    let l = line(code, "swflow_emu_regcomm_get");
    let out = std::slice::from_raw_parts_mut(value.cast::<u8>(), bytes);
    cpe::reg_get(l, out).unwrap_or_else(|v| stop(&v));
}

/// Register communication (SW26010): sends the `bytes` of LDM at `ldm` to every other CPE of
/// the calling CPE's row (`line` 0) or column (1) as one block of registers: what the
/// hardware does with a loop of broadcasts of one register each, which every receiver matches
/// with a loop of as many gets. Each receiver takes it whole with
/// [`swflow_emu_regcomm_recv_block`] of as many bytes. The range must lie in one declared LDM
/// buffer.
#[no_mangle]
pub extern "C" fn swflow_emu_regcomm_send_block(code: c_int, ldm: *const c_void, bytes: usize) {
    let l = line(code, "swflow_emu_regcomm_send_block");
    cpe::reg_send_block(l, ldm as usize, bytes).unwrap_or_else(|v| stop(&v));
}

/// Register communication (SW26010): takes a block of `bytes` sent along the calling CPE's row
/// (`line` 0) or column (1) into LDM at `ldm` (in one declared LDM buffer), waiting for it.
#[no_mangle]
pub extern "C" fn swflow_emu_regcomm_recv_block(code: c_int, ldm: *mut c_void, bytes: usize) {
    let l = line(code, "swflow_emu_regcomm_recv_block");
    cpe::reg_recv_block(l, ldm as usize, bytes).unwrap_or_else(|v| stop(&v));
}

/// Remote LDM access (SW26010-Pro): posts the `bytes` of LDM at `ldm` to the same place of
/// every other CPE of the calling CPE's row (`line` 0) or column (1) without waiting
/// (`CRTS_rma_row_ibcast` / `CRTS_rma_col_ibcast` with the same source and destination),
/// and adds one to the reply word at `reply` (an `int` in LDM) for its own copy; each
/// receiver adds one to its word at the same place when the block lands, which
/// [`swflow_emu_rma_wait`] waits for. Both ranges must lie in declared LDM buffers.
#[no_mangle]
pub extern "C" fn swflow_emu_rma_post(code: c_int, ldm: *const c_void, bytes: usize, reply: *mut c_int) {
    let l = line(code, "swflow_emu_rma_post");
    cpe::rma_post(l, ldm as usize, bytes, reply as usize).unwrap_or_else(|v| stop(&v));
}

/// Remote LDM access (SW26010-Pro): waits until the reply word at `reply` holds at least
/// `count` (`CRTS_rma_wait_value`), the blocks posted along the calling CPE's row (`line` 0)
/// or column (1) landing meanwhile. A count that no post will reach stops the program.
#[no_mangle]
pub extern "C" fn swflow_emu_rma_wait(code: c_int, reply: *mut c_int, count: c_long) {
    let l = line(code, "swflow_emu_rma_wait");
    // `long` is 64 bits here but not on every C platform.
    #[allow(clippy::useless_conversion)]
    let count = i64::from(count);
    cpe::rma_wait(l, reply as usize, count).unwrap_or_else(|v| stop(&v));
}

/// Waits until every CPE of the calling CPE's row (`line` 0) or column (1) has arrived
/// (`CRTS_ssync_row` / `CRTS_ssync_col`).
#[no_mangle]
pub extern "C" fn swflow_emu_sync_line(code: c_int) {
    let l = line(code, "swflow_emu_sync_line");
    cpe::sync_line(l).unwrap_or_else(|v| stop(&v));
}

/// Stops the program with a failure the running kernel detected.
///
/// # Safety
/// `message` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn swflow_emu_fail(message: *const c_char) {
    stop(&cpe::fail(&text(message, "kernel failure")));
}
