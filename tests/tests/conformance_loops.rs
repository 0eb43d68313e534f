//! ONNX conformance through lowering: every manifest test and the light models, lowered to
//! verified loop IR and run kernel by kernel on main memory, must match the expected outputs.

use swflow_tests::{conformance_dir, read_list, workspace_root, OnnxCase};

#[test]
fn node_tests_through_unscheduled_loops() {
    let dir = conformance_dir().unwrap().join("node");
    let names = read_list(&workspace_root().join("tests/conformance/manifest.txt")).unwrap();
    let mut failures = Vec::new();
    for (name, options) in &names {
        if let Err(e) = OnnxCase::new(dir.join(name), options).and_then(|c| c.run_loops_reference()) {
            failures.push(format!("{name}: {e:#}"));
        }
    }
    println!(
        "conformance (unscheduled loop IR): {} passed, {} failed",
        names.len() - failures.len(),
        failures.len()
    );
    assert!(failures.is_empty(), "failing node tests:\n{}", failures.join("\n"));
}

/// Slow (minutes): the scheduled suite covers the light models in CI; run with `--ignored`.
#[test]
#[ignore]
fn light_models_through_unscheduled_loops() {
    let dir = conformance_dir().unwrap().join("light");
    let mut failures = Vec::new();
    for name in swflow_tests::LIGHT_MODELS {
        let case = OnnxCase {
            dir: dir.join(name),
            frozen: Vec::new(),
        };
        let start = std::time::Instant::now();
        match case.run_loops_reference() {
            Ok(()) => println!("light_{name} (unscheduled loop IR): ok in {:.2?}", start.elapsed()),
            Err(e) => failures.push(format!("light_{name}: {e:#}")),
        }
    }
    assert!(failures.is_empty(), "failing light models:\n{}", failures.join("\n"));
}
