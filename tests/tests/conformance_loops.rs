//! ONNX conformance through lowering: every manifest test and the light models, lowered to
//! verified loop IR and run kernel by kernel on main memory, must match the expected outputs.

use swflow_tests::{run_light_models, run_manifest};

#[test]
fn node_tests_through_unscheduled_loops() {
    let (passed, failures) = run_manifest(|c| c.run_loops_reference()).unwrap();
    println!(
        "conformance (unscheduled loop IR): {passed} passed, {} failed",
        failures.len()
    );
    assert!(failures.is_empty(), "failing node tests:\n{}", failures.join("\n"));
}

/// Slow (minutes): the scheduled suite covers the light models in CI; run with `--ignored`.
#[test]
#[ignore]
fn light_models_through_unscheduled_loops() {
    let failures = run_light_models("unscheduled loop IR", |c| {
        c.run_loops_reference().map(|()| String::new())
    })
    .unwrap();
    assert!(failures.is_empty(), "failing light models:\n{}", failures.join("\n"));
}
