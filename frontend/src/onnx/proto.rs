//! Rust types for `onnx.proto`, generated at build time by prost.
#![allow(clippy::all, missing_docs)]

include!(concat!(env!("OUT_DIR"), "/onnx.rs"));
