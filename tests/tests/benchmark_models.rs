//! The benchmark models of the swTVM evaluation (ResNet-18/50, VGG-16, MobileNet, ShuffleNet,
//! YOLOv3, the DCGAN generator, BERT-base), built by `scripts/setup-models.sh` with seeded
//! weights: each imports, schedules for both targets, and through generated C built with its
//! Makefile and run on the emulator matches onnxruntime (see `Comparison::Model`).
//!
//! CI runs a subset that keeps it fast; the ignored `all_models_*` tests schedule every model
//! at every batch size for both targets, and build and run every model at batch sizes 1, 2, 4
//! and 8 on sw26010 and at batch 1 on sw26010pro:
//! `bash scripts/setup-models.sh && cargo test --release -p swflow-tests --test benchmark_models -- --ignored --nocapture`.

use swflow_frontend::onnx::{import_file, ImportOptions};
use swflow_scheduler::target::Target;
use swflow_tests::benchmarks::{model_dir, run_model, MODELS};

/// Runs each `(model, batch, target)`; prints one report line per run and fails with every
/// failure.
fn run_all(cases: &[(&str, usize, Target)]) {
    let mut failures = Vec::new();
    for (model, batch, target) in cases {
        match run_model(model, *batch, target) {
            Ok(report) => println!("{report}"),
            Err(e) => failures.push(format!("{model} b{batch} {}: {e:#}", target.name)),
        }
    }
    assert!(
        failures.is_empty(),
        "failing benchmark models:\n{}",
        failures.join("\n")
    );
}

/// Every model at every batch size imports and schedules for both targets (no build).
fn schedules_everywhere(models: &[&str]) {
    for model in models {
        let dir = model_dir(model).unwrap();
        for batch in [1, 2, 4, 8] {
            let mut opts = ImportOptions::default();
            opts.dims.insert("N".into(), batch);
            let g = import_file(&dir.join("model.onnx"), &opts).unwrap();
            for target in [Target::sw26010(), Target::sw26010pro()] {
                let p = swflow_scheduler::pipeline::compile(&g, &target)
                    .unwrap_or_else(|e| panic!("{model} b{batch} on {}: {e}", target.name));
                assert!(!p.kernels.is_empty());
            }
        }
    }
}

/// The models CI builds (see `scripts/test.sh`): small enough to build and run in a minute or
/// two, and between them convolutions, depthwise and grouped convolutions, channel shuffles,
/// transposed convolutions and pooling.
const CI_MODELS: [&str; 3] = ["dcgan", "mobilenet", "shufflenet"];

#[test]
fn ci_models_match_onnxruntime() {
    schedules_everywhere(&CI_MODELS);
    run_all(&[
        ("dcgan", 1, Target::sw26010()),
        ("dcgan", 2, Target::sw26010pro()),
        ("mobilenet", 1, Target::sw26010pro()),
        ("shufflenet", 1, Target::sw26010()),
    ]);
}

/// Every model at `batches` on `targets`.
fn all_models(batches: &[usize], targets: &[Target]) {
    let mut cases = Vec::new();
    for model in MODELS {
        for &batch in batches {
            for target in targets {
                cases.push((model, batch, target.clone()));
            }
        }
    }
    run_all(&cases);
}

#[test]
#[ignore]
fn all_models_schedule_for_both_targets() {
    schedules_everywhere(&MODELS);
}

#[test]
#[ignore]
fn all_models_batch_1() {
    all_models(&[1], &[Target::sw26010(), Target::sw26010pro()]);
}

#[test]
#[ignore]
fn all_models_batch_8() {
    all_models(&[8], &[Target::sw26010()]);
}

#[test]
#[ignore]
fn all_models_batches_2_and_4() {
    all_models(&[2, 4], &[Target::sw26010()]);
}
