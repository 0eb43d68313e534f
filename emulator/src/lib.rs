//! swflow emulator: a model of one core group (the MPE and its CPEs, each with a private LDM,
//! a DMA engine with reply counters, barriers) that runs what the compiler emits and times it.
//!
//! Generated programs reach it through `runtime-c`, which implements the athread and CRTS
//! interfaces on top of the C ABI in [`capi`]; kernels compiled into this process (the JIT)
//! reach it through the hooks in [`native`]. The emulator is the independent judge of the
//! generated code, so it checks what real hardware would silently get wrong:
//! - every DMA's LDM side must lie inside one LDM buffer the kernel declared, and its
//!   main-memory side inside a registered main-memory region (the arena, the launch's
//!   parameter struct);
//! - DMA is asynchronous: a transfer moves its bytes only when the CPE waits on its reply
//!   counter, so code that uses a buffer before waiting sees stale data, and a kernel that
//!   returns with transfers in flight is an error;
//! - two CPEs writing overlapping main memory in one launch is a race;
//! - waiting for more transfers than were issued would hang the hardware and is an error;
//! - streamed gradient tape must come back in the reverse order it went out ([`DmaClass`]).
//!
//! Every violation is one message naming the kernel and the CPE. It stops a C program; a
//! compiled kernel returns, and the host gets it from [`Machine::try_join`].
//!
//! Time ([`timing`], [`replay`]): given the target's machine description, each CPE's compute
//! (reported by the generated code as operation counts), its DMA through the core group's one
//! queue, its direct accesses and barriers are modelled in cycles, deterministically; the
//! transfers of gradient tape are counted and timed apart too.
//! Per-kernel counters and modelled time are reported at exit when the environment variable
//! `SWFLOW_STATS` is set ([`report`]), and `SWFLOW_TRACE` writes a Chrome trace ([`trace`]).

pub mod capi;
pub mod charges;
mod cpe;
mod machine;
pub mod mesh;
#[cfg(test)]
mod mesh_tests;
pub mod native;
mod race;
pub mod replay;
pub mod report;
mod tape;
#[cfg(test)]
mod tape_tests;
pub mod timing;
pub mod trace;

pub use cpe::cpe_id;
pub use machine::{Direction, KernelCounters, KernelFn, KernelStats, KernelTime, Machine, Violation};
pub use tape::DmaClass;

/// Timing parameters for unit tests: FP latency 7, division and square root 30, a call 100,
/// barrier 5; DMA at one byte per cycle both ways, 10 cycles per block and 100 of latency.
#[cfg(test)]
fn test_timing() -> timing::Timing {
    timing::Timing {
        fp_latency_cycles: 7.0,
        div_cycles: 30.0,
        sqrt_cycles: 30.0,
        call_cycles: 100.0,
        gload_cycles: 200.0,
        gstore_cycles: 200.0,
        spawn_cycles: 0.0,
        join_cycles: 0.0,
        barrier_cycles: 5.0,
        regcomm_latency_cycles: Some(14.0),
        rma_latency_cycles: None,
        rma_bytes_per_cycle: None,
        dma: timing::DmaTiming {
            line_bytes: 128,
            get_block_cycles: 10.0,
            put_block_cycles: 10.0,
            get_bytes_per_cycle: 1.0,
            put_bytes_per_cycle: 1.0,
            get_latency_cycles: 100.0,
            put_latency_cycles: 100.0,
        },
    }
}
