//! The C ABI that `runtime-c` builds the athread and CRTS interfaces on.
//!
//! All functions act on one process-wide machine created by [`swflow_emu_init`]. Pointers
//! are plain addresses to the emulator: it never dereferences main memory or LDM except to
//! perform a checked DMA. Bad arguments are violations: the program stops with a message
//! naming the kernel and CPE.

use std::ffi::{c_char, c_int, c_long, c_void, CStr};
use std::sync::{Mutex, OnceLock};

use crate::machine::{self, Direction, KernelFn, Machine};
use crate::report;

static MACHINE: OnceLock<Machine> = OnceLock::new();

/// Main-memory regions registered before the machine starts (the arena is allocated and
/// loaded before `athread_init`).
static EARLY_REGIONS: Mutex<Vec<(usize, usize, String)>> = Mutex::new(Vec::new());

fn machine() -> &'static Machine {
    match MACHINE.get() {
        Some(m) => m,
        None => {
            eprintln!("error: the core group is used before athread_init (or CRTS_init)");
            std::process::exit(1)
        }
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
        let me = machine::cpe_id().map_or(String::new(), |c| format!(" (CPE {c})"));
        eprintln!("error: {what} is negative ({v}){me}");
        std::process::exit(1)
    })
}

/// Starts the core group: `cpes` CPEs with `ldm_bytes` of LDM each. A second call with the
/// same sizes does nothing; returns 0, or -1 when the sizes differ from the first call.
#[no_mangle]
pub extern "C" fn swflow_emu_init(cpes: c_int, ldm_bytes: c_long) -> c_int {
    let cpes = size(cpes as c_long, "the CPE count").max(1);
    let ldm = size(ldm_bytes, "the LDM size");
    let m = MACHINE.get_or_init(|| {
        let m = Machine::new(cpes, ldm);
        for (base, bytes, name) in EARLY_REGIONS.lock().expect("region list").drain(..) {
            m.add_region(base, bytes, &name);
        }
        m
    });
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

/// Joins, then prints the per-kernel counters when `SWFLOW_STATS` asks for them.
#[no_mangle]
pub extern "C" fn swflow_emu_halt() {
    let m = machine();
    m.join();
    if let Ok(how) = std::env::var("SWFLOW_STATS") {
        if let Err(e) = report::write(m, &how) {
            eprintln!("error: writing emulator statistics to {how}: {e}");
        }
    }
}

/// The calling CPE's id (0-based), or -1 on the host.
#[no_mangle]
pub extern "C" fn swflow_emu_cpe_id() -> c_int {
    machine::cpe_id().map_or(-1, |c| c as c_int)
}

/// Declares an LDM buffer of the running kernel on the calling CPE.
///
/// # Safety
/// `name` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn swflow_emu_ldm_buffer(base: *const c_void, bytes: usize, name: *const c_char) {
    machine::declare_ldm(base as usize, bytes, &text(name, "(unnamed)"));
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
    machine::dma(
        dir,
        main as usize,
        ldm as usize,
        size(len, "a DMA length"),
        reply as usize,
        size(stride, "a DMA stride"),
        size(bsize, "a DMA block size"),
    );
}

/// Checks a direct main-memory access (a write when `write` is non-zero) and returns `addr`.
#[no_mangle]
pub extern "C" fn swflow_emu_direct(addr: *mut c_void, bytes: usize, write: c_int) -> *mut c_void {
    machine::direct(addr as usize, bytes, write != 0);
    addr
}

/// Completes the calling CPE's transfers on `reply`; the counter must then be `n` (at least
/// `n` unless `exact`).
#[no_mangle]
pub extern "C" fn swflow_emu_wait(reply: *const c_void, n: c_long, exact: c_int) {
    // `long` is 64 bits here but not on every C platform.
    #[allow(clippy::useless_conversion)]
    let n = i64::from(n);
    machine::wait(reply as usize, n, exact != 0);
}

/// Barrier across all CPEs of the launch.
#[no_mangle]
pub extern "C" fn swflow_emu_barrier() {
    machine::barrier();
}

/// Stops the program with a failure the running kernel detected.
///
/// # Safety
/// `message` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn swflow_emu_fail(message: *const c_char) {
    machine::fail(&text(message, "kernel failure"));
}
