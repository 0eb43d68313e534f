//! ONNX conformance through the graph interpreter: every node test named in
//! `tests/conformance/manifest.txt` and the nine light models must reproduce their expected
//! outputs within the project tolerance.

use std::collections::{BTreeMap, BTreeSet};

use swflow_tests::{conformance_dir, read_list, run_light_models, run_manifest, workspace_root};

/// Element types the manifest must cover for every listed op.
const COVERED_TYPES: [&str; 3] = ["FLOAT", "INT64", "BOOL"];

/// `(test name, options)` per manifest line.
fn manifest() -> Vec<(String, String)> {
    read_list(&workspace_root().join("tests/conformance/manifest.txt")).expect("manifest is readable")
}

#[test]
fn node_tests_in_manifest_pass() {
    let (passed, failures) = run_manifest(|c| c.run_interpreter()).unwrap();
    println!(
        "conformance (graph interpreter): {passed} passed, {} failed",
        failures.len()
    );
    assert!(failures.is_empty(), "failing node tests:\n{}", failures.join("\n"));
}

/// Every node test of a listed op whose tensors are f32/i64/bool is either in the manifest or
/// excluded with a stated reason, and the manifest names only existing tests.
#[test]
fn manifest_covers_listed_ops() {
    let root = workspace_root().join("tests/conformance");
    let ops: BTreeSet<String> = read_list(&root.join("ops.txt"))
        .unwrap()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    let excluded: BTreeMap<String, String> = read_list(&root.join("excluded.txt")).unwrap().into_iter().collect();
    let index = std::fs::read_to_string(conformance_dir().unwrap().join("node/index.tsv")).unwrap();
    let mut of_listed = 0;
    let mut eligible = BTreeSet::new();
    let mut all = BTreeSet::new();
    for line in index.lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<&str> = line.split('\t').collect();
        all.insert(f[0].to_string());
        if !ops.contains(f[1]) {
            continue;
        }
        of_listed += 1;
        if f[3].split(',').all(|t| COVERED_TYPES.contains(&t)) {
            eligible.insert(f[0].to_string());
        }
    }
    let manifest: BTreeSet<String> = manifest().into_iter().map(|(n, _)| n).collect();
    for (name, reason) in &excluded {
        assert!(!reason.is_empty(), "excluded test {name} needs a reason");
        assert!(!manifest.contains(name), "{name} is both in the manifest and excluded");
    }
    let unknown: Vec<_> = manifest.iter().filter(|n| !all.contains(*n)).collect();
    assert!(
        unknown.is_empty(),
        "manifest names tests that do not exist: {unknown:?}"
    );
    let uncovered: Vec<_> = eligible
        .iter()
        .filter(|n| !manifest.contains(*n) && !excluded.contains_key(*n))
        .collect();
    // onnxruntime's verdicts on the same tests, recorded when the data was generated.
    let runtime = std::fs::read_to_string(conformance_dir().unwrap().join("node/onnxruntime.tsv")).unwrap();
    let ort_passes = runtime
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('\t'))
        .filter(|(name, verdict)| eligible.contains(*name) && *verdict == "pass")
        .count();
    let eligible_in_manifest = eligible.iter().filter(|n| manifest.contains(*n)).count();
    println!(
        "node tests: {} in the suite, {} of listed ops, {} of those with f32/i64/bool tensors; \
         manifest {} ({} of the eligible ones), excluded {}; onnxruntime passes {} of the eligible ones",
        all.len(),
        of_listed,
        eligible.len(),
        manifest.len(),
        eligible_in_manifest,
        excluded.len(),
        ort_passes
    );
    assert!(
        uncovered.is_empty(),
        "eligible tests neither in the manifest nor excluded: {uncovered:?}"
    );
}

#[test]
fn light_models_reproduce_expected_outputs() {
    let failures = run_light_models("graph interpreter", |c| c.run_interpreter().map(|()| String::new())).unwrap();
    assert!(failures.is_empty(), "failing light models:\n{}", failures.join("\n"));
}
