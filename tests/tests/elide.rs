//! Copies elided: the light models whose concatenations lose their copy kernels compute the
//! same bits with them and without them, and their copies are gone where the rules allow.
//!
//! The loop-IR reference executor runs both programs, unscheduled, so a difference can only
//! come from the rewriting itself. The scheduled engines run the elided programs in the
//! conformance suites (`conformance_scheduled`, `conformance_jit`, `conformance_c`).

use swflow_frontend::fuse::plan;
use swflow_frontend::simplify::simplify;
use swflow_frontend::tolerance::{compare, Comparison};
use swflow_scheduler::elide::elide_copies;
use swflow_scheduler::exec::run_reference;
use swflow_scheduler::loops::verify_program;
use swflow_scheduler::lower::lower_fused;
use swflow_tests::{conformance_dir, OnnxCase};

/// Elides the copies of a light model's fused loop IR; checks both programs verify and agree
/// bit for bit; returns the copies removed and the concatenation kernels left.
fn elide_light(name: &str) -> (usize, Vec<String>) {
    let case = OnnxCase::new(conformance_dir().unwrap().join("light").join(name));
    let g = simplify(&case.import().unwrap());
    let copies = lower_fused(&g, &plan(&g)).unwrap();
    let mut elided = copies.clone();
    let removed = elide_copies(&mut elided);
    verify_program(&elided).unwrap();
    let inputs = case.inputs_for(&g).unwrap();
    let want = run_reference(&copies, &inputs).unwrap();
    let got = run_reference(&elided, &inputs).unwrap();
    assert_eq!(got.len(), want.len());
    for (k, (got, want)) in got.iter().zip(&want).enumerate() {
        if let Err(m) = compare(got, want, Comparison::Exact) {
            panic!("{name}, output {k}: {}", m.message);
        }
    }
    let left = elided
        .kernels
        .iter()
        .filter(|k| k.op == "concat")
        .map(|k| k.name.clone())
        .collect();
    (removed, left)
}

#[test]
fn densenet_blocks_write_their_last_concatenation() {
    let (removed, left) = elide_light("densenet121");
    assert_eq!(removed, 116);
    assert!(left.is_empty(), "copies left: {left:?}");
}

#[test]
fn inception_branches_write_their_concatenation() {
    let (removed, left) = elide_light("inception_v1");
    assert_eq!(removed, 36);
    assert!(left.is_empty(), "copies left: {left:?}");
}

/// Two branches of inception_v2 end in a convolution that keeps its reduced value for a later
/// reader; a kept value must have the target's type, so those two copies stay.
#[test]
fn kept_values_keep_their_copies() {
    let (removed, left) = elide_light("inception_v2");
    assert_eq!(removed, 36);
    assert_eq!(left, ["r73.part0", "r124.part0"]);
}

#[test]
fn squeezenet_expands_write_their_concatenation() {
    let (removed, left) = elide_light("squeezenet");
    assert_eq!(removed, 16);
    assert!(left.is_empty(), "copies left: {left:?}");
}
