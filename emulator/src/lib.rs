//! swflow emulator: a functional model of one core group (the MPE and its CPEs, each with a
//! private LDM, a DMA engine with reply counters, barriers) that runs what the compiler emits.
//!
//! Generated programs reach it through `runtime-c`, which implements the athread and CRTS
//! interfaces on top of the C ABI in [`capi`]. The emulator is the independent judge of the
//! generated code, so it checks what real hardware would silently get wrong:
//! - every DMA's LDM side must lie inside one LDM buffer the kernel declared, and its
//!   main-memory side inside a registered main-memory region (the arena, the launch's
//!   parameter struct);
//! - DMA is asynchronous: a transfer moves its bytes only when the CPE waits on its reply
//!   counter, so code that uses a buffer before waiting sees stale data, and a kernel that
//!   returns with transfers in flight is an error;
//! - two CPEs writing overlapping main memory in one launch is a race;
//! - waiting for more transfers than were issued would hang the hardware and is an error.
//!
//! Every violation stops the program with one message naming the kernel and the CPE.
//! Per-kernel counters (launches, DMA transfers and bytes, LDM use) are printed at exit when
//! the environment variable `SWFLOW_STATS` is set (`SWFLOW_STATS=json` prints JSON).

pub mod capi;
mod machine;
mod report;

pub use machine::{Direction, KernelCounters, Machine, Violation};
