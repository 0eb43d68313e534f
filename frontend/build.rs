//! Compiles `proto/onnx.proto` into Rust types with protox (no protoc binary needed).

fn main() {
    println!("cargo:rerun-if-changed=proto/onnx.proto");
    let descriptors = protox::compile(["onnx.proto"], ["proto"]).expect("proto/onnx.proto compiles");
    prost_build::Config::new()
        .compile_fds(descriptors)
        .expect("prost generates the ONNX types");
}
