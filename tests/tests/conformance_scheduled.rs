//! ONNX conformance through the scheduler: every manifest test and the nine light models,
//! scheduled for each built-in target and run on the modelled CPEs (per-CPE LDM buffers and
//! DMA), must match the expected outputs with the project tolerance.

use swflow_scheduler::target::Target;
use swflow_tests::{conformance_dir, read_list, workspace_root, OnnxCase, LIGHT_MODELS};

fn node_tests(target: Target) {
    let dir = conformance_dir().unwrap().join("node");
    let names = read_list(&workspace_root().join("tests/conformance/manifest.txt")).unwrap();
    let mut failures = Vec::new();
    for (name, options) in &names {
        if let Err(e) = OnnxCase::new(dir.join(name), options).and_then(|c| c.run_scheduled(&target)) {
            failures.push(format!("{name}: {e:#}"));
        }
    }
    println!(
        "conformance ({}): {} passed, {} failed",
        target.name,
        names.len() - failures.len(),
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
    let dir = conformance_dir().unwrap().join("light");
    let mut failures = Vec::new();
    for name in LIGHT_MODELS {
        let case = OnnxCase {
            dir: dir.join(name),
            frozen: Vec::new(),
        };
        let start = std::time::Instant::now();
        match case.run_scheduled(&target) {
            Ok(stats) => {
                let bytes: usize = stats.iter().map(|s| s.traffic.get_bytes + s.traffic.put_bytes).sum();
                println!(
                    "light_{name} ({}): ok in {:.2?}, {} kernels, {:.1} MB of DMA",
                    target.name,
                    start.elapsed(),
                    stats.len(),
                    bytes as f64 / 1e6
                );
            }
            Err(e) => failures.push(format!("light_{name}: {e:#}")),
        }
    }
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
