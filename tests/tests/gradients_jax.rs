//! Gradients against `jax.grad`: the training models of `scripts/training/models.py` (an MLP,
//! LeNet, a residual block with batch normalization, a depthwise-separable block and a
//! transformer block) are imported with their loss, differentiated with respect to every
//! parameter, and run through the graph interpreter, the scheduled loop-IR executor, the JIT
//! and the generated C. The loss and every gradient must match jax's, computed in float64
//! from an independent JAX definition of each model, within the project's whole-model
//! tolerance (`Comparison::Model`). Each run prints the worst relative error per model and
//! engine: `max |swflow - jax| / max |jax|` over the elements of a tensor, the worst tensor.
//! The JIT and the C runs take every way of moving the tape (`--tape`), which must give the
//! same gradients bit for bit (the JIT on both targets, the C in CI on one per model, both
//! with `-- --ignored`). The JIT also runs the program that stores every value the
//! saved-value rule recomputes (`--recompute`), in every mode.

use std::collections::HashMap;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use swflow_frontend::ir::Tensor;
use swflow_frontend::npy;
use swflow_frontend::onnx::{ImportOptions, Loss, ModelFile};
use swflow_frontend::tolerance::{compare, Comparison};
use swflow_frontend::training::{gradient_program_of, GradProgram};
use swflow_scheduler::loops::Program;
use swflow_scheduler::tape::TapeMode;
use swflow_scheduler::target::Target;
use swflow_tests::cbuild;
use swflow_tests::{as_f32, ci_on_pro, training_dir, with_tape};

struct Case {
    name: String,
    program: GradProgram,
    inputs: Vec<Tensor>,
    /// The loss, then one gradient per tensor of `program.wrt` (float64).
    reference: Vec<Tensor>,
}

fn read_json(path: &PathBuf) -> Result<serde_json::Value> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(serde_json::from_str(&text)?)
}

fn load(dir: PathBuf) -> Result<Case> {
    let spec = read_json(&dir.join("case.json"))?;
    let loss = match spec["loss"].as_str() {
        Some("mse") => Loss::Mse,
        Some("cross-entropy") => Loss::CrossEntropy,
        other => bail!("unknown loss {other:?}"),
    };
    let file = ModelFile::read(&dir.join("model.onnx"))?;
    let program = gradient_program_of(&file, &ImportOptions::default(), &loss, &[])?;
    let mut given: HashMap<String, Tensor> = program.parameters.clone();
    for (name, path) in spec["inputs"].as_object().context("case.json has no inputs")? {
        given.insert(name.clone(), npy::read(&dir.join(path.as_str().unwrap_or_default()))?);
    }
    let (labels, _) = program.labels.clone().context("the loss takes labels")?;
    given.insert(labels, npy::read(&dir.join("labels.npy"))?);
    let g = &program.graph;
    let inputs = g
        .inputs()
        .map(|id| {
            given
                .remove(&g.node(id).name)
                .with_context(|| format!("no value for input '{}'", g.node(id).name))
        })
        .collect::<Result<Vec<_>>>()?;
    let index = read_json(&dir.join("reference/gradients.json"))?;
    let mut reference = vec![npy::read(&dir.join("reference/loss.npy"))?];
    for name in &program.wrt {
        let file = index[name]
            .as_str()
            .with_context(|| format!("jax gives no gradient for '{name}'"))?;
        reference.push(npy::read(&dir.join("reference").join(file))?);
    }
    let wanted = index.as_object().map_or(0, |m| m.len());
    if wanted != program.wrt.len() {
        bail!("jax differentiates {wanted} parameters, swflow {}", program.wrt.len());
    }
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    Ok(Case {
        name,
        program,
        inputs,
        reference,
    })
}

fn cases() -> Vec<Case> {
    let root = training_dir().unwrap();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("case.json").exists())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 5, "training models missing in {}", root.display());
    dirs.into_iter().map(|d| load(d).unwrap()).collect()
}

/// Checks `got` against the case's reference; returns the worst relative error.
fn check(case: &Case, engine: &str, got: &[Tensor]) -> f64 {
    assert_eq!(got.len(), case.reference.len(), "{}: {engine}", case.name);
    let names = std::iter::once("loss".to_string()).chain(case.program.wrt.iter().map(|w| format!("grad/{w}")));
    let mut worst: f64 = 0.0;
    for ((name, a), b) in names.zip(got).zip(&case.reference) {
        let want = b.to_f64_vec();
        compare(a, &as_f32(b), Comparison::Model)
            .unwrap_or_else(|m| panic!("{} through {engine}: {name}: {}", case.name, m.message));
        let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        assert!(scale > 0.0, "{}: {name} is zero in the reference", case.name);
        let err = a
            .to_f64_vec()
            .iter()
            .zip(&want)
            .fold(0.0f64, |m, (x, y)| m.max((x - y).abs()));
        worst = worst.max(err / scale);
    }
    println!("{:>20}  {engine:<28} worst relative error {worst:.2e}", case.name);
    worst
}

const MODES: [TapeMode; 3] = [TapeMode::PerTensor, TapeMode::Regions, TapeMode::Stream];

/// The case's gradient program scheduled for `target` with its tape moved by `mode`.
fn scheduled(case: &Case, target: &Target, mode: TapeMode) -> Program {
    with_tape(&case.program.graph, target, mode).unwrap()
}

/// Asserts that every run's outputs equal the first run's bit for bit; `runs` are named.
fn all_the_same(case: &Case, engine: &str, runs: &[(String, Vec<Tensor>)]) {
    let (first, want) = &runs[0];
    for (name, run) in &runs[1..] {
        for (a, b) in run.iter().zip(want) {
            compare(a, b, Comparison::Exact).unwrap_or_else(|m| {
                panic!(
                    "{} through {engine}: {name} differs from {first}: {}",
                    case.name, m.message
                )
            });
        }
    }
}

#[test]
fn graph_interpreter_and_loop_executor_match_jax() {
    for case in cases() {
        let g = &case.program.graph;
        check(&case, "graph", &swflow_frontend::interp::run(g, &case.inputs).unwrap());
        for target in [Target::sw26010(), Target::sw26010pro()] {
            let p = swflow_scheduler::pipeline::compile(g, &target).unwrap();
            let (got, _) = swflow_scheduler::exec::cpe::run_program(&p, &case.inputs, &target).unwrap();
            check(&case, &format!("loops ({})", target.name), &got);
        }
    }
}

#[test]
fn jit_matches_jax_bit_identically_from_run_to_run_in_every_tape_mode_and_recompute_choice() {
    let (mut records, mut streams, mut stored) = (0, 0, 0);
    for case in cases() {
        // The rule's program, and the one storing every value the rule recomputes.
        let all_stored = case.program.storing_all();
        stored += all_stored.stored.len();
        let programs = [("rule", &case.program), ("all stored", &all_stored)];
        for (target, (choice, program)) in [Target::sw26010(), Target::sw26010pro()]
            .into_iter()
            .flat_map(|t| programs.map(|p| (t.clone(), p)))
        {
            let mut runs = Vec::new();
            for mode in MODES {
                let p = with_tape(&program.graph, &target, mode).unwrap();
                records += p.tape.as_ref().map_or(0, |t| t.records.len());
                streams += p.tape.as_ref().map_or(0, |t| t.streams.len());
                let jit = swflow_codegen::jit::compile(&p, &target).unwrap();
                let name = format!("--tape {}", mode.name());
                let first = jit.run(&p, &target, &case.inputs).unwrap();
                check(
                    &case,
                    &format!("jit ({}, --recompute {choice}, {name})", target.name),
                    &first.outputs,
                );
                let second = jit.run(&p, &target, &case.inputs).unwrap();
                for (a, b) in first.outputs.iter().zip(&second.outputs) {
                    compare(a, b, Comparison::Exact).expect("gradients are identical from run to run");
                }
                runs.push((name, first.outputs));
            }
            all_the_same(&case, &format!("jit ({}, --recompute {choice})", target.name), &runs);
        }
    }
    assert!(records > 0, "no model stores tape records: the modes were not compared");
    assert!(streams > 0, "no model streams tape: the modes were not compared");
    assert!(
        stored > 0,
        "no model has a value to store: the choices were not compared"
    );
}

/// Each model's program in the three tape modes, built as C and run on `targets(model)`:
/// each agrees with jax, and the three agree bit for bit.
fn generated_c(targets: impl Fn(&str) -> Vec<Target>) {
    for case in cases() {
        for target in targets(&case.name) {
            let mut runs = Vec::new();
            for mode in MODES {
                let dir = cbuild::scratch(
                    "gradients-jax",
                    &format!("{}-{}-{}", case.name, target.name, mode.name()),
                );
                cbuild::generate(&scheduled(&case, &target, mode), &target, &dir).unwrap();
                cbuild::make_reusing_runtime(&dir).unwrap();
                let got = cbuild::run_model(&dir, &case.program.graph, &case.inputs, &[]).unwrap();
                check(&case, &format!("C ({}, {})", target.name, mode.name()), &got);
                std::fs::remove_dir_all(&dir).unwrap();
                runs.push((format!("--tape {}", mode.name()), got));
            }
            all_the_same(&case, &format!("C ({})", target.name), &runs);
        }
    }
}

/// In C each model builds for one target, chosen by a hash of its name ([`ci_on_pro`]): a
/// build per model and mode takes seconds, and the JIT runs every model on both targets.
#[test]
fn generated_c_matches_jax() {
    generated_c(|name| match ci_on_pro(name) {
        true => vec![Target::sw26010pro()],
        false => vec![Target::sw26010()],
    });
}

/// Every model in C on both targets.
#[test]
#[ignore]
fn generated_c_matches_jax_on_both_targets() {
    generated_c(|_| vec![Target::sw26010(), Target::sw26010pro()]);
}
