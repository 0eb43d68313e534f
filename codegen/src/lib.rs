//! swflow code generation: writes host (MPE) and slave (CPE) C sources, headers, the parameter
//! file and the Makefile for a scheduled model, and lowers loop IR through Cranelift.
//!
//! Not implemented yet; the crate exists so the workspace has its final shape.

pub use swflow_scheduler as scheduler;
