//! swflow emulator: a functional and timed model of one core group (MPE, 64 CPEs with LDM,
//! DMA engine, barriers) that runs what the compiler emits.
//!
//! Not implemented yet; the crate exists so the workspace has its final shape.
