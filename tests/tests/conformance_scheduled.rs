//! ONNX conformance through the scheduler: every manifest test and the nine light models,
//! scheduled for a built-in target and run on the modelled CPEs (per-CPE LDM buffers and
//! DMA), must match the expected outputs with the project tolerance.
//!
//! CI runs every manifest test on both targets and each light model on one, chosen by a hash
//! of its name ([`ci_on_pro`]): this executor interprets every CPE's loops, and the large
//! convolutions take minutes (the JIT suite runs every light model on both targets). All
//! light models on both targets: `cargo test --release -p swflow-tests --test
//! conformance_scheduled -- --ignored`.

use swflow_scheduler::target::Target;
use swflow_tests::{ci_on_pro, run_light_models_where, run_manifest};

fn node_tests(target: Target) {
    let (passed, failures) = run_manifest(|c| c.run_scheduled(&target).map(drop)).unwrap();
    println!(
        "conformance ({}): {passed} passed, {} failed",
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

fn light_models(target: Target, keep: impl Fn(&str) -> bool) {
    let failures = run_light_models_where(&target.name, keep, |c| {
        let stats = c.run_scheduled(&target)?;
        let bytes: usize = stats.iter().map(|s| s.traffic.get_bytes + s.traffic.put_bytes).sum();
        Ok(format!(
            ", {} kernels, {:.1} MB of DMA",
            stats.len(),
            bytes as f64 / 1e6
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
    light_models(Target::sw26010(), |name| !ci_on_pro(name));
}

#[test]
fn light_models_sw26010pro() {
    light_models(Target::sw26010pro(), ci_on_pro);
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
