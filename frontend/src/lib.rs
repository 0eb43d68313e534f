//! swflow frontend: the graph IR, ONNX import, shape inference, graph simplification (constant
//! folding, common subexpressions, scales folded into weights), the fusion plan, reverse-mode
//! differentiation ([`autodiff::gradients`]) and the reference graph interpreter.
//!
//! The graph IR ([`ir::Graph`]) is a topologically ordered list of single-output nodes over a
//! small set of primitive ops ([`ir::Op`]). The ONNX importer ([`onnx::import_file`]) expands
//! every ONNX node into primitives, so later passes (fusion, autodiff, lowering) only ever see
//! primitives. The interpreter ([`interp::run`]) gives every graph an executable meaning and is
//! the reference that all later stages are compared against.

pub mod autodiff;
pub mod fuse;
pub mod interp;
pub mod ir;
pub mod npy;
pub mod onnx;
pub mod random;
pub mod simplify;
pub mod tolerance;
pub mod training;
