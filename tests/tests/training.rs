//! Training steps against a reference: the MLP of `scripts/training/models.py` trained for two
//! epochs of four batches by each optimizer (SGD, SGD with momentum and weight decay,
//! Nesterov, Adam with L2 decay, AdamW), one step per batch in file order, through the graph
//! interpreter and the JIT. Each step's loss (before its update) and the final parameters must
//! match jax's float64 run of PyTorch's update rules within the whole-model tolerance. Each run
//! prints the largest relative difference of a step's loss.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use swflow_frontend::ir::{Data, Tensor};
use swflow_frontend::npy;
use swflow_frontend::onnx::{ImportOptions, Loss, ModelFile};
use swflow_frontend::tolerance::{compare, Comparison};
use swflow_frontend::training::optim::{training_step, Carried, Optimizer, Settings, TrainingStep};
use swflow_frontend::training::{gradient_program_of, GradProgram};
use swflow_scheduler::target::Target;
use swflow_tests::{as_f32, training_dir};

/// Rows `[k * rows, (k + 1) * rows)` of `t` along its first axis.
fn batch(t: &Tensor, k: usize, rows: usize) -> Tensor {
    let row: usize = t.shape()[1..].iter().product();
    let mut shape = t.shape().to_vec();
    shape[0] = rows;
    let range = k * rows * row..(k + 1) * rows * row;
    let data = match t.data() {
        Data::F32(v) => Data::F32(v[range].to_vec()),
        Data::I64(v) => Data::I64(v[range].to_vec()),
        other => panic!("unexpected data {other:?}"),
    };
    Tensor::new(shape, data).unwrap()
}

/// Trains `step` from its program's parameters for `epochs` over the batches of `dir`'s
/// `train/x.npy` and `train/labels.npy`, running each step with `run`; returns each step's
/// loss and what the training carries at the end.
fn train_steps(
    step: &TrainingStep,
    program: &GradProgram,
    opt: &Optimizer,
    epochs: u64,
    dir: &Path,
    run: &dyn Fn(&[Tensor]) -> Vec<Tensor>,
) -> (Tensor, Carried) {
    let xs = npy::read(&dir.join("train/x.npy")).unwrap();
    let labels = npy::read(&dir.join("train/labels.npy")).unwrap();
    let (labels_name, labels_ty) = program.labels.clone().unwrap();
    let rows = labels_ty.shape[0];
    let mut carried = step.start(&program.parameters).unwrap();
    let mut losses = Vec::new();
    for _ in 0..epochs {
        for k in 0..labels.shape()[0] / rows {
            let data = HashMap::from([
                ("x".to_string(), batch(&xs, k, rows)),
                (labels_name.clone(), batch(&labels, k, rows)),
            ]);
            let outputs = run(&step.inputs(&carried, opt, &data).unwrap());
            losses.push(step.finish(&mut carried, outputs).to_f64_vec()[0] as f32);
        }
    }
    (Tensor::from_f32(vec![losses.len()], losses).unwrap(), carried)
}

fn optimizer(config: &serde_json::Value) -> Optimizer {
    let f = |k: &str| config[k].as_f64();
    let settings = Settings {
        lr: f("lr").unwrap(),
        momentum: f("momentum"),
        nesterov: config["nesterov"].as_bool().unwrap_or(false),
        weight_decay: f("weight_decay"),
        beta1: f("beta1"),
        beta2: f("beta2"),
        eps: f("eps"),
    };
    Optimizer::new(config["optimizer"].as_str().unwrap(), &settings).unwrap()
}

/// The run described by `config.json` in `reference` on the model of `dir`: its settings,
/// optimizer, gradient program (cross-entropy loss) and training step.
fn prepare(dir: &Path, reference: &Path) -> (serde_json::Value, Optimizer, GradProgram, TrainingStep) {
    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(reference.join("config.json")).unwrap()).unwrap();
    let opt = optimizer(&config);
    let file = ModelFile::read(&dir.join("model.onnx")).unwrap();
    let program = gradient_program_of(&file, &ImportOptions::default(), &Loss::CrossEntropy, &[]).unwrap();
    let step = training_step(&program, &opt).unwrap();
    (config, opt, program, step)
}

/// Runs one step on an engine.
type StepFn<'a> = Box<dyn Fn(&[Tensor]) -> Vec<Tensor> + 'a>;

/// A [`StepFn`] made once per training from the step.
type Runner = StepFn<'static>;

/// Trains with the runner `engine` makes for the step; checks losses and parameters against
/// `reference`.
fn train_and_check(dir: &Path, reference: &Path, engine: &str, make: &dyn Fn(&TrainingStep) -> Runner) -> f64 {
    let (config, opt, program, step) = prepare(dir, reference);
    let run = make(&step);
    let (labels_name, labels_ty) = program.labels.clone().unwrap();
    let rows = labels_ty.shape[0];
    let xs = npy::read(&dir.join("train/x.npy")).unwrap();
    let labels = npy::read(&dir.join("train/labels.npy")).unwrap();
    let batches = labels.shape()[0] / rows;
    let mut carried = step.start(&program.parameters).unwrap();
    let mut losses = Vec::new();
    for _ in 0..config["epochs"].as_u64().unwrap() {
        for k in 0..batches {
            let data = HashMap::from([
                ("x".to_string(), batch(&xs, k, rows)),
                (labels_name.clone(), batch(&labels, k, rows)),
            ]);
            let inputs = step.inputs(&carried, &opt, &data).unwrap();
            let outputs = run(&inputs);
            losses.push(step.finish(&mut carried, outputs).to_f64_vec()[0]);
        }
    }
    let want = npy::read(&reference.join("losses.npy")).unwrap().to_f64_vec();
    assert_eq!(losses.len(), want.len());
    let name = reference.file_name().unwrap().to_string_lossy();
    let mut worst: f64 = 0.0;
    for (k, (a, b)) in losses.iter().zip(&want).enumerate() {
        let (a, b) = (
            Tensor::from_f32(vec![], vec![*a as f32]).unwrap(),
            Tensor::from_f32(vec![], vec![*b as f32]).unwrap(),
        );
        compare(&a, &b, Comparison::Model)
            .unwrap_or_else(|m| panic!("{name} through {engine}: loss of step {k}: {}", m.message));
    }
    for (a, b) in losses.iter().zip(&want) {
        worst = worst.max((a - b).abs() / b.abs());
    }
    for (p, value) in step.params.iter().zip(&carried.params) {
        let want = as_f32(&npy::read(&reference.join("params").join(format!("{p}.npy"))).unwrap());
        compare(value, &want, Comparison::Model)
            .unwrap_or_else(|m| panic!("{name} through {engine}: final {p}: {}", m.message));
    }
    assert!(
        want[0] > want[want.len() - 1],
        "{name}: the reference loss does not fall"
    );
    println!(
        "{name:>10}  {engine:<16} {} steps, loss {:.6} -> {:.6}, largest relative difference {worst:.2e}",
        losses.len(),
        losses[0],
        losses[losses.len() - 1]
    );
    worst
}

fn runs() -> Vec<std::path::PathBuf> {
    let root = training_dir().unwrap().join("mlp/train");
    let mut runs: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("config.json").exists())
        .collect();
    runs.sort();
    assert_eq!(runs.len(), 5, "optimizer runs in {}", root.display());
    runs
}

#[test]
fn every_optimizer_trains_like_pytorch_through_the_interpreter() {
    let dir = training_dir().unwrap().join("mlp");
    for run in runs() {
        train_and_check(&dir, &run, "graph", &|step| {
            let g = step.graph.clone();
            Box::new(move |inputs| swflow_frontend::interp::run(&g, inputs).unwrap())
        });
    }
}

/// Through the JIT, every parameter and state tensor is updated in place in the arena.
#[test]
fn every_optimizer_trains_like_pytorch_through_the_jit_in_place() {
    let dir = training_dir().unwrap().join("mlp");
    let target = Target::sw26010();
    for run in runs() {
        train_and_check(&dir, &run, "jit (sw26010)", &|step| {
            let mut p = swflow_scheduler::pipeline::compile(&step.graph, &target).unwrap();
            p.set_updates(&step.updates()).unwrap();
            let plan = swflow_scheduler::memplan::plan(&p, &target);
            swflow_scheduler::memplan::check(&p, &plan).unwrap();
            assert_eq!(
                plan.in_place.len(),
                step.params.len() + step.state.len(),
                "updates in place"
            );
            let program = swflow_codegen::jit::compile(&p, &target).unwrap();
            let target = target.clone();
            Box::new(move |inputs| program.run(&p, &target, inputs).unwrap().outputs)
        });
    }
}

/// Compiles the MLP's training step with the optimizer of `reference` into a training
/// program under `name`, builds it, and returns its folder.
fn build_training_program(dir: &Path, reference: &Path, name: &str) -> std::path::PathBuf {
    let (_, opt, program, step) = prepare(dir, reference);
    build_step(&step, &program, &opt, name)
}

/// Generates the training program of `step` for sw26010 under `name` and builds it.
fn build_step(step: &TrainingStep, program: &GradProgram, opt: &Optimizer, name: &str) -> std::path::PathBuf {
    let target = Target::sw26010();
    let mut p = swflow_scheduler::pipeline::compile(&step.graph, &target).unwrap();
    p.set_updates(&step.updates()).unwrap();
    let spec = swflow_codegen::TrainingSpec::new(step, program, opt).unwrap();
    let lib = swflow_tests::cbuild::emulator_lib().unwrap();
    let out = swflow_codegen::generate_training(&p, &target, lib.to_str().unwrap(), &spec).unwrap();
    let folder = swflow_tests::cbuild::scratch("training", name);
    if folder.exists() {
        std::fs::remove_dir_all(&folder).unwrap();
    }
    out.write_to(&folder).unwrap();
    swflow_tests::cbuild::make_reusing_runtime(&folder).unwrap();
    folder
}

/// Runs a built training program on `data` (the batches of input `x`, and their labels);
/// returns its output folder.
fn train_c(folder: &Path, data: &(PathBuf, PathBuf), epochs: u32, out: &str, resume: Option<&str>) -> PathBuf {
    let out_dir = folder.join(out);
    let mut cmd = std::process::Command::new(folder.join("model"));
    cmd.arg("--input")
        .arg(format!("x={}", data.0.display()))
        .arg("--labels")
        .arg(&data.1)
        .arg("--epochs")
        .arg(epochs.to_string())
        .arg("--output")
        .arg(&out_dir);
    if let Some(r) = resume {
        cmd.arg("--resume").arg(folder.join(r));
    }
    let result = cmd.output().unwrap();
    assert!(result.status.success(), "{}", String::from_utf8_lossy(&result.stderr));
    out_dir
}

/// The generated training program (the step's kernels on the emulator, the loop in
/// runtime-c) trains like PyTorch with every optimizer, and a run resumed after one epoch
/// ends bit-identical to one of two epochs.
#[test]
fn generated_training_programs_train_like_pytorch_and_resume_exactly() {
    let dir = training_dir().unwrap().join("mlp");
    let data = (dir.join("train/x.npy"), dir.join("train/labels.npy"));
    for run in runs() {
        let name = run.file_name().unwrap().to_string_lossy().into_owned();
        let folder = build_training_program(&dir, &run, &name);
        let out = train_c(&folder, &data, 2, "two_epochs", None);
        let want = npy::read(&run.join("losses.npy")).unwrap().to_f64_vec();
        let got = npy::read(&out.join("losses.npy")).unwrap().to_f64_vec();
        assert_eq!(got.len(), want.len(), "{name}: steps");
        let mut worst: f64 = 0.0;
        for (k, (a, b)) in got.iter().zip(&want).enumerate() {
            let (ta, tb) = (
                Tensor::from_f32(vec![], vec![*a as f32]).unwrap(),
                Tensor::from_f32(vec![], vec![*b as f32]).unwrap(),
            );
            compare(&ta, &tb, Comparison::Model)
                .unwrap_or_else(|m| panic!("{name} through C: loss of step {k}: {}", m.message));
            worst = worst.max((a - b).abs() / b.abs());
        }
        let index: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(&std::fs::read_to_string(out.join("params.json")).unwrap()).unwrap();
        assert_eq!(index.len(), 6, "{name}: parameters written");
        for (p, file) in &index {
            let got = npy::read(&out.join(file.as_str().unwrap())).unwrap();
            let want = as_f32(&npy::read(&run.join("params").join(format!("{p}.npy"))).unwrap());
            compare(&got, &want, Comparison::Model)
                .unwrap_or_else(|m| panic!("{name} through C: final {p}: {}", m.message));
        }
        println!(
            "{name:>10}  C (sw26010)      {} steps, largest relative difference {worst:.2e}",
            got.len()
        );
        train_c(&folder, &data, 1, "first_epoch", None);
        let resumed = train_c(&folder, &data, 1, "resumed", Some("first_epoch"));
        for file in index.values() {
            let a = npy::read(&out.join(file.as_str().unwrap())).unwrap();
            let b = npy::read(&resumed.join(file.as_str().unwrap())).unwrap();
            compare(&b, &a, Comparison::Exact).unwrap_or_else(|m| panic!("{name}: resumed {file}: {}", m.message));
        }
        std::fs::remove_dir_all(&folder).unwrap();
    }
}

/// The digits example (`scripts/training/digits.py`): an MLP trained by the generated program
/// for ten epochs of 48 batches with SGD and momentum follows jax's float64 run of PyTorch's
/// rule step by step, and ends with the same parameters, within the whole-model tolerance.
#[test]
fn digits_trains_through_the_generated_program_like_jax() {
    let dir = training_dir().unwrap().join("digits");
    let reference = dir.join("reference");
    let (config, opt, program, step) = prepare(&dir, &reference);
    let folder = build_step(&step, &program, &opt, "digits");
    let epochs = config["epochs"].as_u64().unwrap() as u32;
    let data = (dir.join("train_x.npy"), dir.join("train_labels.npy"));
    train_c(&folder, &data, epochs, "run", None);
    let got = npy::read(&folder.join("run/losses.npy")).unwrap();
    let want = as_f32(&npy::read(&reference.join("losses.npy")).unwrap());
    compare(&got, &want, Comparison::Model).unwrap_or_else(|m| panic!("digits losses: {}", m.message));
    let (first, last) = (want.to_f64_vec()[0], *want.to_f64_vec().last().unwrap());
    assert!(last < first / 10.0, "jax's loss falls from {first} to {last}");
    for name in &step.params {
        let a = npy::read(&folder.join("run/params").join(format!("{name}.npy"))).unwrap();
        let b = as_f32(&npy::read(&reference.join("params").join(format!("{name}.npy"))).unwrap());
        compare(&a, &b, Comparison::Model).unwrap_or_else(|m| panic!("digits {name}: {}", m.message));
    }
    std::fs::remove_dir_all(&folder).unwrap();
}

/// Batch normalisation in training mode: each step normalises with the batch's statistics and
/// updates the running statistics, which the training carries like parameters; through the
/// interpreter and the generated program, losses, parameters and running statistics follow
/// jax's run.
#[test]
fn batch_norm_in_training_mode_carries_its_running_statistics() {
    let dir = training_dir().unwrap().join("bn_train");
    let run = dir.join("train/sgd");
    let (config, opt, program, step) = prepare(&dir, &run);
    assert_eq!(program.buffers.len(), 2, "running mean and variance");
    let interpret = |inputs: &[Tensor]| swflow_frontend::interp::run(&step.graph, inputs).unwrap();
    let epochs = config["epochs"].as_u64().unwrap();
    let (got_losses, carried) = train_steps(&step, &program, &opt, epochs, &dir, &interpret);
    let want_losses = as_f32(&npy::read(&run.join("losses.npy")).unwrap());
    compare(&got_losses, &want_losses, Comparison::Model).unwrap_or_else(|m| panic!("graph: losses: {}", m.message));
    let want = |name: &str| as_f32(&npy::read(&run.join("params").join(format!("{name}.npy"))).unwrap());
    for (name, value) in step
        .params
        .iter()
        .zip(&carried.params)
        .chain(step.buffers.iter().zip(&carried.buffers))
    {
        compare(value, &want(name), Comparison::Model).unwrap_or_else(|m| panic!("graph: {name}: {}", m.message));
    }
    assert_eq!(step.buffers, ["bn.mean", "bn.var"]);

    let folder = build_step(&step, &program, &opt, "bn_train");
    let data = (dir.join("train/x.npy"), dir.join("train/labels.npy"));
    let results = train_c(&folder, &data, 2, "run", None);
    let got = npy::read(&results.join("losses.npy")).unwrap();
    compare(&got, &want_losses, Comparison::Model).unwrap_or_else(|m| panic!("C: losses: {}", m.message));
    for name in step.params.iter().chain(&step.buffers) {
        let got = npy::read(&results.join("params").join(format!("{name}.npy"))).unwrap();
        compare(&got, &want(name), Comparison::Model).unwrap_or_else(|m| panic!("C: {name}: {}", m.message));
    }
    std::fs::remove_dir_all(&folder).unwrap();
}

/// Dropout in training mode draws a fresh mask every step from the noise generator every
/// engine implements (`random::dropout_noise`, written again in Python for the reference):
/// through the interpreter, the JIT and the generated program, losses and parameters follow
/// jax's run with the same masks, and the generated program's losses equal the JIT's bit for
/// bit.
#[test]
fn dropout_draws_a_fresh_mask_every_step_in_every_engine() {
    let dir = training_dir().unwrap().join("dropout_train");
    let run = dir.join("train/sgd");
    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("config.json")).unwrap()).unwrap();
    let opt = optimizer(&config);
    let file = ModelFile::read(&dir.join("model.onnx")).unwrap();
    let opts = ImportOptions {
        dropout_noise: true,
        ..Default::default()
    };
    let program = gradient_program_of(&file, &opts, &Loss::CrossEntropy, &[]).unwrap();
    assert_eq!(program.noise.len(), 1, "one dropout node, one noise input");
    let step = training_step(&program, &opt).unwrap();
    let shape = [4, 6];
    let (a, b) = (
        swflow_frontend::random::dropout_noise(0, 0, 0, &shape),
        swflow_frontend::random::dropout_noise(0, 1, 0, &shape),
    );
    assert!(!a.bit_eq(&b), "consecutive steps draw different noise");

    let want_losses = as_f32(&npy::read(&run.join("losses.npy")).unwrap());
    let want = |name: &str| as_f32(&npy::read(&run.join("params").join(format!("{name}.npy"))).unwrap());
    let target = Target::sw26010();
    let mut p = swflow_scheduler::pipeline::compile(&step.graph, &target).unwrap();
    p.set_updates(&step.updates()).unwrap();
    let jit = swflow_codegen::jit::compile(&p, &target).unwrap();
    let engines: [(&str, StepFn); 2] = [
        (
            "graph",
            Box::new(|inputs: &[Tensor]| swflow_frontend::interp::run(&step.graph, inputs).unwrap()),
        ),
        (
            "jit",
            Box::new(|inputs: &[Tensor]| jit.run(&p, &target, inputs).unwrap().outputs),
        ),
    ];
    let mut jit_losses = None;
    for (engine, run_step) in engines {
        let epochs = config["epochs"].as_u64().unwrap();
        let (losses, carried) = train_steps(&step, &program, &opt, epochs, &dir, &run_step);
        compare(&losses, &want_losses, Comparison::Model).unwrap_or_else(|m| panic!("{engine}: losses: {}", m.message));
        for (name, value) in step.params.iter().zip(&carried.params) {
            compare(value, &want(name), Comparison::Model)
                .unwrap_or_else(|m| panic!("{engine}: {name}: {}", m.message));
        }
        jit_losses = Some(losses);
    }

    let folder = build_step(&step, &program, &opt, "dropout_train");
    let data = (dir.join("train/x.npy"), dir.join("train/labels.npy"));
    let results = train_c(&folder, &data, 2, "run", None);
    let got = npy::read(&results.join("losses.npy")).unwrap();
    compare(&got, &jit_losses.unwrap(), Comparison::Exact)
        .unwrap_or_else(|m| panic!("C against the JIT: losses: {}", m.message));
    for name in &step.params {
        let got = npy::read(&results.join("params").join(format!("{name}.npy"))).unwrap();
        compare(&got, &want(name), Comparison::Model).unwrap_or_else(|m| panic!("C: {name}: {}", m.message));
    }
    std::fs::remove_dir_all(&folder).unwrap();
}

/// A model whose own output is its scalar loss (`--loss-output` naming an output): the
/// gradient program's loss output takes a fresh name beside the model's, and computes the
/// loss and its gradient.
#[test]
fn a_loss_that_is_already_an_output_gets_its_own_output() {
    use swflow_tests::model::{f32_tensor, i64_tensor, ModelBuilder, FLOAT};
    let model = ModelBuilder::new(17)
        .input("x", FLOAT, &[3])
        .init(f32_tensor("w", &[3], &[0.5, -1.0, 2.0]))
        .init(i64_tensor("scalar", &[0], &[]))
        .node("p", "Mul", &["x", "w"], &["p"], vec![])
        .node("s", "ReduceSum", &["p"], &["s"], vec![])
        .node("loss", "Reshape", &["s", "scalar"], &["loss"], vec![])
        .output("loss");
    let dir = swflow_tests::cbuild::scratch("training", "loss_output");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("model.onnx");
    std::fs::write(&path, model.bytes()).unwrap();
    let file = ModelFile::read(&path).unwrap();
    let loss = Loss::Output("loss".into());
    let program = gradient_program_of(&file, &ImportOptions::default(), &loss, &[]).unwrap();
    let g = &program.graph;
    swflow_frontend::ir::verify(g).unwrap();
    assert_eq!(program.wrt, ["w"]);
    let x = Tensor::from_f32(vec![3], vec![1.0, 2.0, 3.0]).unwrap();
    let inputs: Vec<Tensor> = g
        .inputs()
        .map(|id| match g.node(id).name.as_str() {
            "x" => x.clone(),
            "w" => program.parameters["w"].clone(),
            other => panic!("unexpected input {other}"),
        })
        .collect();
    let out = swflow_frontend::interp::run(g, &inputs).unwrap();
    assert_eq!(out[0].to_f64_vec(), [0.5 - 2.0 + 6.0], "the loss");
    assert!(out[1].bit_eq(&x), "the gradient of sum(x * w) with respect to w is x");
    std::fs::remove_dir_all(&dir).unwrap();
}
