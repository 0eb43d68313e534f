//! ONNX conformance through generated C: manifest tests and the nine light models are
//! compiled for a target, built with their Makefile against runtime-c and the emulator,
//! type-checked against the SDK of its machine (`make check-sunway` or `make check-sunway-pro`), run
//! on the stored inputs, and compared with the graph interpreter within the project tolerance.
//!
//! CI builds the core node tests, each on one of the two targets: every manifest test except
//! the `_expanded` variants (the same op written as its ONNX function body) and the
//! `legacy_opset*` copies (the same test converted to an older opset). Those two kinds test
//! the importer, which the interpreter, loop-IR and scheduled suites run in full; in C they
//! add hundreds of builds of kernels the core tests already build. A test's target is fixed
//! by a hash of its name ([`ci_on_pro`]), so each target builds about half of them; the C of
//! the two targets differs in the vector type and the API, which both halves exercise, and
//! the JIT suite runs every test on both. The light models are split the same way, except
//! the three whose builds take longest (densenet121's 300 kernels, inception_v2, vgg19), which
//! the JIT suite runs in CI. The whole manifest and every light model run on both targets with
//! `cargo test --release -p swflow-tests --test conformance_c -- --ignored`.

use swflow_scheduler::target::Target;
use swflow_tests::cbuild::scratch;
use swflow_tests::{ci_on_pro, run_light_models_where, run_manifest_where};

/// The tests CI builds in C (see the module comment).
fn core(name: &str) -> bool {
    !name.ends_with("_expanded") && !name.starts_with("legacy_opset")
}

/// The light models CI builds in C (see the module comment).
fn quick(name: &str) -> bool {
    !["densenet121", "inception_v2", "vgg19"].contains(&name)
}

fn node_tests(target: Target, keep: fn(&str) -> bool) {
    let (passed, failures) = run_manifest_where(keep, |c| {
        let name = c.dir.file_name().unwrap().to_string_lossy().to_string();
        let dir = scratch(&target.name, &name);
        c.run_c(&target, &dir)?;
        std::fs::remove_dir_all(&dir)?;
        Ok(())
    })
    .unwrap();
    println!(
        "C conformance ({}): {passed} passed, {} failed",
        target.name,
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "failing node tests in C on {}:\n{}",
        target.name,
        failures.join("\n")
    );
}

#[test]
fn node_tests_sw26010() {
    node_tests(Target::sw26010(), |name| core(name) && !ci_on_pro(name));
}

#[test]
fn node_tests_sw26010pro() {
    node_tests(Target::sw26010pro(), |name| core(name) && ci_on_pro(name));
}

#[test]
#[ignore]
fn all_node_tests_sw26010() {
    node_tests(Target::sw26010(), |_| true);
}

#[test]
#[ignore]
fn all_node_tests_sw26010pro() {
    node_tests(Target::sw26010pro(), |_| true);
}

fn light_models(target: Target, keep: impl Fn(&str) -> bool) {
    let label = format!("C, {}", target.name);
    let failures = run_light_models_where(&label, keep, |c| {
        let name = c.dir.file_name().unwrap().to_string_lossy().to_string();
        let dir = scratch(&target.name, &name);
        c.run_c(&target, &dir)?;
        std::fs::remove_dir_all(&dir)?;
        Ok(String::new())
    })
    .unwrap();
    assert!(
        failures.is_empty(),
        "failing light models in C:\n{}",
        failures.join("\n")
    );
}

#[test]
fn light_models_sw26010() {
    light_models(Target::sw26010(), |name| quick(name) && !ci_on_pro(name));
}

#[test]
fn light_models_sw26010pro() {
    light_models(Target::sw26010pro(), |name| quick(name) && ci_on_pro(name));
}

#[test]
#[ignore]
fn all_light_models_sw26010() {
    light_models(Target::sw26010(), |_| true);
}

#[test]
#[ignore]
fn all_light_models_sw26010pro() {
    light_models(Target::sw26010pro(), |_| true);
}
