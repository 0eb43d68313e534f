//! ONNX conformance through the Cranelift JIT: every manifest test and the nine light models,
//! scheduled for each built-in target, compiled in-process and run on the emulator, must match
//! the expected outputs with the project tolerance.

use swflow_scheduler::target::Target;
use swflow_tests::{run_light_models, run_manifest};

fn node_tests(target: Target) {
    let (passed, failures) = run_manifest(|c| c.run_jit(&target).map(drop)).unwrap();
    println!(
        "conformance through the JIT ({}): {passed} passed, {} failed",
        target.name,
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "failing node tests on {}:\n{}",
        target.name,
        failures.join("\n")
    );
}

fn light_models(target: Target) {
    let failures = run_light_models(&format!("jit, {}", target.name), |c| {
        let t = c.run_jit(&target)?;
        Ok(format!(
            ", {} kernels compiled in {:.2?}, run in {:.2?}, {:.6} s modelled",
            t.kernels, t.compile, t.run, t.modelled_seconds
        ))
    })
    .unwrap();
    assert!(
        failures.is_empty(),
        "failing light models on {}:\n{}",
        target.name,
        failures.join("\n")
    );
}

#[test]
fn node_tests_sw26010() {
    node_tests(Target::sw26010());
}

#[test]
fn node_tests_sw26010pro() {
    node_tests(Target::sw26010pro());
}

#[test]
fn light_models_sw26010() {
    light_models(Target::sw26010());
}

#[test]
fn light_models_sw26010pro() {
    light_models(Target::sw26010pro());
}
