//! swflow scheduler: lowers graph-IR kernels to loop nests and schedules them for the compute
//! cores of a core group (CPE partitioning, LDM buffer sizing, loop reordering, DMA insertion,
//! tape streaming, main-memory planning).
//!
//! Not implemented yet; the crate exists so the workspace has its final shape.

pub use swflow_frontend as frontend;
