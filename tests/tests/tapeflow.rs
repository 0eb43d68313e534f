//! The Tapeflow benchmarks (`scripts/tapeflow/models.py`, written by
//! `scripts/setup-tapeflow.sh`) as gradient programs, with the values they store rather than
//! recompute chosen by modelled time on each target (as `--recompute timed` does): on both
//! targets, the JIT gives the same loss and gradients bit for bit with the tape moved per
//! tensor, in records and streamed, and they agree with the graph interpreter within the
//! whole-model tolerance, as does the rule's program that recomputes every cheap value.

use anyhow::{bail, Result};
use swflow_codegen::saved::choose_stored;
use swflow_frontend::onnx::{ImportOptions, Loss, ModelFile};
use swflow_frontend::tolerance::{compare, Comparison};
use swflow_frontend::training::gradient_program_of;
use swflow_scheduler::pipeline::Options;
use swflow_scheduler::tape::{TapeMode, TapeOptions};
use swflow_scheduler::target::Target;
use swflow_tests::{seeded_inputs, with_tape, workspace_root};

const MODELS: [&str; 8] = [
    "logsum",
    "matd",
    "nn",
    "lenet5",
    "mttkrp",
    "gravity",
    "pathfinder",
    "massspring",
];

/// Checks one model; returns how many tensors its programs store as tape records and how
/// many they stream.
fn check(name: &str) -> Result<(usize, usize)> {
    let dir = workspace_root().join(".cache/tapeflow");
    if !dir.join("STAMP").exists() {
        bail!(
            "no Tapeflow models in {}: run scripts/setup-tapeflow.sh first",
            dir.display()
        );
    }
    let file = ModelFile::read(&dir.join(name).join("model.onnx"))?;
    let program = gradient_program_of(&file, &ImportOptions::default(), &Loss::Output("loss".into()), &[])?;
    let g = &program.graph;
    // Parameters take their initial values; data inputs are pseudo-random.
    let inputs: Vec<_> = g
        .inputs()
        .zip(seeded_inputs(g, 5))
        .map(|(id, random)| program.parameters.get(&g.node(id).name).cloned().unwrap_or(random))
        .collect();
    let want = swflow_frontend::interp::run(g, &inputs)?;
    let (mut records, mut streams) = (0, 0);
    for target in [Target::sw26010(), Target::sw26010pro()] {
        let rule = with_tape(g, &target, TapeMode::Stream)?;
        let run = swflow_codegen::jit::compile(&rule, &target)?.run(&rule, &target, &inputs)?;
        for ((o, got), w) in g.outputs.iter().zip(&run.outputs).zip(&want) {
            compare(got, w, Comparison::Model).map_err(|m| {
                anyhow::anyhow!(
                    "{name} on {} (--recompute rule): {}: {}",
                    target.name,
                    o.name,
                    m.message
                )
            })?;
        }
        let mut runs = Vec::new();
        let options = Options {
            tape: TapeOptions::for_gradient(g, TapeMode::Stream),
            ..Options::default()
        };
        let (timed, _) = choose_stored(&program, &target, &options)?;
        for mode in [TapeMode::PerTensor, TapeMode::Regions, TapeMode::Stream] {
            let p = with_tape(&timed.graph, &target, mode)?;
            records += p.tape.as_ref().map_or(0, |t| t.records.len());
            streams += p.tape.as_ref().map_or(0, |t| t.streams.len());
            let run = swflow_codegen::jit::compile(&p, &target)?.run(&p, &target, &inputs)?;
            for ((o, got), w) in g.outputs.iter().zip(&run.outputs).zip(&want) {
                compare(got, w, Comparison::Model).map_err(|m| {
                    anyhow::anyhow!("{name} on {} ({}): {}: {}", target.name, mode.name(), o.name, m.message)
                })?;
            }
            runs.push(run.outputs);
        }
        for run in &runs[1..] {
            for ((o, a), b) in g.outputs.iter().zip(&runs[0]).zip(run) {
                compare(a, b, Comparison::Exact).map_err(|m| {
                    anyhow::anyhow!("{name} on {}: {}: the modes differ: {}", target.name, o.name, m.message)
                })?;
            }
        }
    }
    Ok((records, streams))
}

#[test]
fn gradients_agree_with_the_interpreter_and_across_tape_modes() {
    let mut failures = Vec::new();
    let (mut records, mut streams) = (0, 0);
    for m in MODELS {
        match check(m) {
            Ok((r, s)) => {
                records += r;
                streams += s;
            }
            Err(e) => failures.push(format!("{e:#}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(records > 0, "no model stores tape records: the modes were not compared");
    assert!(streams > 0, "no model streams tape: the modes were not compared");
}
