//! The graph IR: a DAG of single-output primitive ops with static types.
//!
//! A [`Graph`] stores its nodes in topological order; a node's operands always come earlier.
//! [`NodeId`] names a node and, since every node produces exactly one value, that value too.
//! Runtime inputs are [`Op::Input`] nodes (in graph-input order) and constants are
//! [`Op::Const`] nodes. The text form ([`print`] and [`parse`]) round-trips exactly.

pub mod cost;
mod dtype;
mod graph;
pub mod infer;
mod op;
mod parse;
mod print;
mod tensor;
mod types;
mod verify;

pub use dtype::DType;
pub use graph::{Graph, Node, NodeId, Output};
pub use op::{BinaryOp, ConvAttrs, Op, PoolAttrs, PoolKind, ReduceKind, UnaryOp};
pub use parse::{parse, ParseError};
pub use print::{print, print_with, value_name, PrintOptions};
pub use tensor::{Data, Tensor};
pub use types::{checked_numel, strides, ShapeDisplay, TensorType, MAX_TENSOR_ELEMENTS};
pub use verify::{verify, VerifyError};

/// An operand or result type that an op does not accept, or a shape that cannot exist.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ShapeError(pub String);

impl ShapeError {
    pub fn new(msg: impl Into<String>) -> ShapeError {
        ShapeError(msg.into())
    }
}
