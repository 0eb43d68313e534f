//! Malformed and unsupported models give one clear error naming the file, node, op and
//! reason — never a panic, never a huge allocation.

use swflow_frontend::onnx::{import_bytes, import_file, ImportOptions};
use swflow_tests::model::{external_tensor, f32_tensor, i64_tensor, Attr, ModelBuilder, FLOAT, INT64};
use swflow_tests::workspace_root;

fn error_of(bytes: &[u8]) -> String {
    match import_bytes(bytes, "m.onnx", None, &ImportOptions::default()) {
        Ok(_) => panic!("the model imported, an error was expected"),
        Err(e) => e.to_string(),
    }
}

fn assert_mentions(msg: &str, parts: &[&str]) {
    for p in parts {
        assert!(msg.contains(p), "error {msg:?} does not mention {p:?}");
    }
}

fn lenet_bytes() -> Vec<u8> {
    std::fs::read(workspace_root().join("examples/lenet/model.onnx")).unwrap()
}

#[test]
fn truncated_model() {
    let bytes = lenet_bytes();
    let msg = error_of(&bytes[..bytes.len() / 2]);
    assert_mentions(&msg, &["m.onnx", "not a valid ONNX model"]);
}

#[test]
fn garbage_bytes() {
    let msg = error_of(b"\xff\xfe this is not a protobuf message at all \x00\x01");
    assert_mentions(&msg, &["m.onnx", "not a valid ONNX model"]);
}

#[test]
fn unsupported_op() {
    let m = ModelBuilder::new(13)
        .input("x", FLOAT, &[2])
        .node("weird", "Hardmax2000", &["x"], &["y"], vec![])
        .output("y");
    assert_mentions(
        &error_of(&m.bytes()),
        &["m.onnx", "node 'weird'", "(Hardmax2000)", "operator not supported"],
    );
}

#[test]
fn unsupported_opsets() {
    for opset in [0, 29] {
        let m = ModelBuilder::new(opset)
            .input("x", FLOAT, &[2])
            .node("r", "Relu", &["x"], &["y"], vec![])
            .output("y");
        assert_mentions(&error_of(&m.bytes()), &["m.onnx", &format!("opset {opset}"), "1 to 28"]);
    }
}

/// An opset that selects a version of an op older than the one swflow implements names the
/// node, the op and both opsets.
#[test]
fn op_version_older_than_implemented() {
    let m = ModelBuilder::new(5)
        .input("x", FLOAT, &[2])
        .node("r", "Relu", &["x"], &["y"], vec![])
        .output("y");
    assert_mentions(&error_of(&m.bytes()), &["m.onnx", "'r'", "Relu", "opset 5", "opset 7"]);
}

#[test]
fn unsupported_attribute_value() {
    let m = ModelBuilder::new(13)
        .input("x", FLOAT, &[1, 1, 4, 4])
        .init(f32_tensor("w", &[1, 1, 3, 3], &[0.5; 9]))
        .node(
            "c",
            "Conv",
            &["x", "w"],
            &["y"],
            vec![("auto_pad", Attr::Str("DIAGONAL"))],
        )
        .output("y");
    assert_mentions(
        &error_of(&m.bytes()),
        &["node 'c'", "(Conv)", "auto_pad='DIAGONAL' is not supported"],
    );
}

#[test]
fn attribute_of_the_wrong_type() {
    let m = ModelBuilder::new(13)
        .input("x", FLOAT, &[2, 3])
        .node("s", "Softmax", &["x"], &["y"], vec![("axis", Attr::Float(1.0))])
        .output("y");
    assert_mentions(
        &error_of(&m.bytes()),
        &["node 's'", "(Softmax)", "attribute 'axis' must be INT"],
    );
}

#[test]
fn shape_mismatch() {
    let m = ModelBuilder::new(13)
        .input("a", FLOAT, &[2, 3])
        .input("b", FLOAT, &[4])
        .node("add", "Add", &["a", "b"], &["y"], vec![])
        .output("y");
    assert_mentions(
        &error_of(&m.bytes()),
        &["node 'add'", "(Add)", "shapes [2,3] and [4] do not broadcast"],
    );
}

#[test]
fn missing_initializer() {
    let m = ModelBuilder::new(13)
        .input("x", FLOAT, &[1, 1, 4, 4])
        .node("c", "Conv", &["x", "w"], &["y"], vec![])
        .output("y");
    assert_mentions(
        &error_of(&m.bytes()),
        &["node 'c'", "(Conv)", "value 'w' is not defined"],
    );
}

#[test]
fn missing_graph_output() {
    let m = ModelBuilder::new(13)
        .input("x", FLOAT, &[2])
        .node("r", "Relu", &["x"], &["y"], vec![])
        .output("z");
    assert_mentions(&error_of(&m.bytes()), &["output 'z'", "not defined"]);
}

#[test]
fn external_data_cannot_escape_the_model_folder() {
    let dir = std::env::temp_dir().join(format!("swflow-ext-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("model")).unwrap();
    std::fs::write(dir.join("secret.bin"), [0u8; 16]).unwrap();
    std::fs::write(dir.join("model/weights.bin"), 1.5f32.to_le_bytes().repeat(4)).unwrap();
    for location in ["../secret.bin", "/etc/passwd", "sub/../../secret.bin"] {
        let m = ModelBuilder::new(13)
            .input("x", FLOAT, &[4])
            .init(external_tensor("w", &[4], location))
            .node("a", "Add", &["x", "w"], &["y"], vec![])
            .output("y");
        std::fs::write(dir.join("model/m.onnx"), m.bytes()).unwrap();
        let msg = import_file(&dir.join("model/m.onnx"), &ImportOptions::default())
            .unwrap_err()
            .to_string();
        assert_mentions(&msg, &["m.onnx", "initializer 'w'", "escapes the model's folder"]);
    }
    // The same model with its data inside the folder imports.
    let m = ModelBuilder::new(13)
        .input("x", FLOAT, &[4])
        .init(external_tensor("w", &[4], "weights.bin"))
        .node("a", "Add", &["x", "w"], &["y"], vec![])
        .output("y");
    std::fs::write(dir.join("model/m.onnx"), m.bytes()).unwrap();
    import_file(&dir.join("model/m.onnx"), &ImportOptions::default()).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn absurd_input_shape_is_rejected_before_allocation() {
    let m = ModelBuilder::new(13)
        .input("x", FLOAT, &[1_000_000, 1_000_000])
        .node("r", "Relu", &["x"], &["y"], vec![])
        .output("y");
    assert_mentions(&error_of(&m.bytes()), &["input 'x'", "more than 4294967296 elements"]);
}

#[test]
fn absurd_constant_of_shape_is_rejected() {
    let m = ModelBuilder::new(13)
        .init(i64_tensor("shape", &[2], &[1_000_000, 1_000_000]))
        .node("fill", "ConstantOfShape", &["shape"], &["y"], vec![])
        .output("y");
    assert_mentions(
        &error_of(&m.bytes()),
        &["node 'fill'", "(ConstantOfShape)", "more than 4294967296 elements"],
    );
}

#[test]
fn initializer_claiming_more_elements_than_it_holds() {
    let mut t = f32_tensor("w", &[1_000_000_000_000], &[1.0]);
    t.dims = vec![1_000_000_000_000];
    let m = ModelBuilder::new(13)
        .input("x", FLOAT, &[1])
        .init(t)
        .node("a", "Add", &["x", "w"], &["y"], vec![])
        .output("y");
    assert_mentions(
        &error_of(&m.bytes()),
        &["initializer 'w'", "more than 4294967296 elements"],
    );
    let t = f32_tensor("w", &[1000], &[1.0; 10]);
    let m = ModelBuilder::new(13)
        .input("x", FLOAT, &[1])
        .init(t)
        .node("a", "Add", &["x", "w"], &["y"], vec![])
        .output("y");
    assert_mentions(
        &error_of(&m.bytes()),
        &["initializer 'w'", "40 data bytes for 1000 elements"],
    );
}

#[test]
fn shape_operand_that_is_not_constant() {
    let m = ModelBuilder::new(13)
        .input("x", FLOAT, &[2, 3])
        .input("s", INT64, &[2])
        .node("rs", "Reshape", &["x", "s"], &["y"], vec![])
        .output("y");
    assert_mentions(
        &error_of(&m.bytes()),
        &["node 'rs'", "(Reshape)", "input 1 ('s') must be a constant"],
    );
}

#[test]
fn unsupported_element_type() {
    let m = ModelBuilder::new(13)
        .input("x", 10, &[2])
        .node("r", "Relu", &["x"], &["y"], vec![])
        .output("y");
    assert_mentions(
        &error_of(&m.bytes()),
        &["input 'x'", "element type FLOAT16 is not supported"],
    );
}

#[test]
fn unnamed_nodes_are_named_by_op_and_position() {
    let m = ModelBuilder::new(13)
        .input("a", FLOAT, &[2])
        .input("b", FLOAT, &[3])
        .node("", "Mul", &["a", "b"], &["y"], vec![])
        .output("y");
    assert_mentions(&error_of(&m.bytes()), &["node 'Mul#0'", "(Mul)"]);
}

/// Nodes of an unknown domain, default-domain nodes in a model without the default opset, and
/// another version of the training domain are refused by name.
#[test]
fn unsupported_domains_and_missing_opsets() {
    use swflow_frontend::onnx::proto::OperatorSetIdProto;
    let relu = || {
        ModelBuilder::new(13)
            .input("x", FLOAT, &[2])
            .node("n", "Relu", &["x"], &["y"], vec![])
            .output("y")
    };
    let mut m = relu();
    m.model.graph.as_mut().unwrap().node[0].domain = Some("com.example".into());
    assert_mentions(&error_of(&m.bytes()), &["node 'n'", "(Relu)", "domain 'com.example'"]);
    let training = |version| OperatorSetIdProto {
        domain: Some("ai.onnx.preview.training".into()),
        version: Some(version),
    };
    let mut m = relu();
    m.model.opset_import = vec![training(1)];
    assert_mentions(&error_of(&m.bytes()), &["m.onnx", "imports no ai.onnx opset"]);
    let mut m = relu();
    m.model.opset_import.push(training(2));
    assert_mentions(
        &error_of(&m.bytes()),
        &["version 2 of domain ai.onnx.preview.training", "supported: 1"],
    );
}
