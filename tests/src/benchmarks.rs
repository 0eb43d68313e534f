//! The benchmark models of the swTVM evaluation (`scripts/models/build.py`, built into
//! `.cache/models` by `scripts/setup-models.sh`): each model at a batch size, imported,
//! compiled to C for a target, built, run on the emulator and compared with onnxruntime's
//! outputs.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use swflow_frontend::ir::Tensor;
use swflow_frontend::onnx::{import_file, ImportOptions};
use swflow_frontend::tolerance::{compare, Comparison};
use swflow_scheduler::target::Target;

use crate::{cbuild, read_tensors, workspace_root};

/// The eight models, as `scripts/models/build.py` names them.
pub const MODELS: [&str; 8] = [
    "resnet18",
    "resnet50",
    "vgg16",
    "mobilenet",
    "shufflenet",
    "yolov3",
    "dcgan",
    "bert_base",
];

/// The folder of one built model; an error tells how to build it.
pub fn model_dir(model: &str) -> Result<PathBuf> {
    let dir = workspace_root().join(".cache/models").join(model);
    if !dir.join("STAMP").exists() {
        bail!("benchmark model {model} is not built: run bash scripts/setup-models.sh {model}");
    }
    Ok(dir)
}

/// What one model at one batch size took, and how close it came to onnxruntime.
#[derive(Debug)]
pub struct Report {
    pub model: String,
    pub batch: usize,
    pub target: String,
    pub kernels: usize,
    pub import_s: f64,
    pub compile_s: f64,
    pub make_s: f64,
    pub run_s: f64,
    /// Bytes of generated C (host, slave and include).
    pub source_bytes: usize,
    /// Largest `|swflow - onnxruntime|` over all outputs, and that difference relative to the
    /// output's largest magnitude.
    pub max_abs_diff: f64,
    pub max_scaled_diff: f64,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(
            f,
            "{} b{} {}: {} kernels, import {:.2} s, compile {:.2} s, make {:.1} s, run {:.1} s, \
             {:.2} MB of C, max |diff| {:.2e} ({:.2e} of the output scale)",
            self.model,
            self.batch,
            self.target,
            self.kernels,
            self.import_s,
            self.compile_s,
            self.make_s,
            self.run_s,
            self.source_bytes as f64 / 1e6,
            self.max_abs_diff,
            self.max_scaled_diff
        )
    }
}

/// Imports `model` at `batch`, compiles it for `target`, builds it with `make` and runs it on
/// the stored inputs; every output must match onnxruntime's within [`Comparison::Model`].
pub fn run_model(model: &str, batch: usize, target: &Target) -> Result<Report> {
    let dir = model_dir(model)?;
    let data = dir.join(format!("batch_{batch}"));
    let start = Instant::now();
    let mut opts = ImportOptions::default();
    opts.dims.insert("N".into(), batch);
    let g = import_file(&dir.join("model.onnx"), &opts)?;
    let import_s = start.elapsed().as_secs_f64();
    let inputs: Vec<Tensor> = read_tensors(&data, "input")?.into_iter().map(|(_, t)| t).collect();
    let expected: Vec<Tensor> = read_tensors(&data, "output")?.into_iter().map(|(_, t)| t).collect();
    let out_dir = cbuild::scratch(&target.name, &format!("{model}_b{batch}"));
    let start = Instant::now();
    let generated = cbuild::compile(&g, target, &out_dir)?;
    let compile_s = start.elapsed().as_secs_f64();
    let start = Instant::now();
    cbuild::make(&out_dir, &[])?;
    let make_s = start.elapsed().as_secs_f64();
    let start = Instant::now();
    let outputs = cbuild::run_model(&out_dir, &g, &inputs, &[])?;
    let run_s = start.elapsed().as_secs_f64();
    if outputs.len() != expected.len() {
        bail!("{} outputs, onnxruntime gives {}", outputs.len(), expected.len());
    }
    let (mut max_abs_diff, mut max_scaled_diff) = (0.0f64, 0.0f64);
    for (k, (got, want)) in outputs.iter().zip(&expected).enumerate() {
        compare(got, want, Comparison::Model).map_err(|m| anyhow::anyhow!("output {k}: {}", m.message))?;
        let (a, e) = (got.to_f64_vec(), want.to_f64_vec());
        let scale = e.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let diff = a.iter().zip(&e).fold(0.0f64, |m, (x, y)| m.max((x - y).abs()));
        max_abs_diff = max_abs_diff.max(diff);
        if scale > 0.0 {
            max_scaled_diff = max_scaled_diff.max(diff / scale);
        }
    }
    std::fs::remove_dir_all(&out_dir).with_context(|| format!("removing {}", out_dir.display()))?;
    Ok(Report {
        model: model.to_string(),
        batch,
        target: target.name.clone(),
        kernels: generated
            .files
            .keys()
            .filter(|f| f.starts_with("slave/") && f.ends_with("_slave.c"))
            .count(),
        import_s,
        compile_s,
        make_s,
        run_s,
        source_bytes: generated.source_bytes(),
        max_abs_diff,
        max_scaled_diff,
    })
}
