//! The `swflow` binary end to end: help, the main job on the example model, and clean
//! failures (exit code 1, a message on stderr, never a panic).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use swflow_frontend::npy;
use swflow_frontend::tolerance::{compare, Comparison};

fn swflow(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_swflow"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("the binary runs")
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A test's own folder under the system's temporary one, removed when the test ends, passed
/// or failed.
struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scratch(name: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("swflow-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}

/// `t` (a float64 reference) as f32.
fn as_f32(t: swflow_frontend::ir::Tensor) -> swflow_frontend::ir::Tensor {
    let ty = swflow_frontend::ir::TensorType::new(swflow_frontend::ir::DType::F32, t.shape().to_vec()).unwrap();
    let cast = swflow_frontend::ir::Op::Cast { to: ty.dtype };
    swflow_frontend::interp::eval_op(&cast, &[&t], &ty).unwrap()
}

/// Asserts a clean failure whose message mentions every part.
fn assert_fails(out: &Output, parts: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {err}");
    assert!(!err.contains("panicked"), "panic: {err}");
    for p in parts {
        assert!(err.contains(p), "stderr {err:?} does not mention {p:?}");
    }
}

#[test]
fn every_verb_has_help() {
    for verb in [
        &["--help"][..],
        &["inspect", "--help"],
        &["run", "--help"],
        &["compare", "--help"],
        &["schedule", "--help"],
        &["compile", "--help"],
    ] {
        let out = swflow(verb);
        assert!(out.status.success(), "{verb:?}");
        assert!(String::from_utf8_lossy(&out.stdout).contains("Usage: swflow"));
    }
}

/// The main job: compile, `make`, run the built program; the emulator library comes from
/// beside the binary, as `cargo build --release` leaves it.
#[test]
fn compile_make_run_reproduces_reference_output() {
    let dir = scratch("compile");
    let out_dir = dir.join("out");
    let out = swflow(&["compile", "examples/lenet/model.onnx", "-o", out_dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("kernels for sw26010"));
    for file in [
        "Makefile",
        "params.bin",
        "host/main.c",
        "include/swflow_ldm.h",
        "runtime/src/swflow_host.c",
    ] {
        assert!(out_dir.join(file).is_file(), "{file} is missing");
    }
    let lib = PathBuf::from(env!("CARGO_BIN_EXE_swflow")).with_file_name("libswflow_emulator.a");
    assert!(
        lib.is_file(),
        "cargo build --release makes {} beside swflow",
        lib.display()
    );
    let make = Command::new("make")
        .arg("-C")
        .arg(&out_dir)
        .args(["-s", "-j2"])
        .output()
        .unwrap();
    assert!(make.status.success(), "{}", String::from_utf8_lossy(&make.stderr));
    let result = dir.join("result");
    let run = Command::new(out_dir.join("model"))
        .args([
            "--input",
            &format!("input={}", root().join("examples/lenet/input.npy").display()),
        ])
        .arg("--output")
        .arg(&result)
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let got = npy::read(&result.join("prob.npy")).unwrap();
    let want = npy::read(&root().join("examples/lenet/expected_prob.npy")).unwrap();
    compare(&got, &want, Comparison::Tolerance).unwrap();
    assert_fails(
        &swflow(&[
            "compile",
            "examples/lenet/model.onnx",
            "-o",
            out_dir.to_str().unwrap(),
            "--target",
            "sw9",
        ]),
        &["sw9"],
    );
}

#[test]
fn run_example_reproduces_reference_output() {
    let dir = scratch("run");
    let out = swflow(&[
        "run",
        "examples/lenet/model.onnx",
        "--input",
        "input=examples/lenet/input.npy",
        "--output",
        dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let got = npy::read(&dir.join("prob.npy")).unwrap();
    let want = npy::read(&root().join("examples/lenet/expected_prob.npy")).unwrap();
    compare(&got, &want, Comparison::Tolerance).unwrap();
    let cmp = swflow(&[
        "compare",
        dir.join("prob.npy").to_str().unwrap(),
        "examples/lenet/expected_prob.npy",
    ]);
    assert!(cmp.status.success());
}

#[test]
fn loops_engine_reproduces_reference_output_on_both_targets() {
    for target in ["sw26010", "sw26010pro"] {
        let dir = scratch(&format!("loops-{target}"));
        let out = swflow(&[
            "run",
            "examples/lenet/model.onnx",
            "--input",
            "input=examples/lenet/input.npy",
            "--engine",
            "loops",
            "--target",
            target,
            "-o",
            dir.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let got = npy::read(&dir.join("prob.npy")).unwrap();
        let want = npy::read(&root().join("examples/lenet/expected_prob.npy")).unwrap();
        compare(&got, &want, Comparison::Tolerance).unwrap();
    }
    assert_fails(
        &swflow(&[
            "run",
            "examples/lenet/model.onnx",
            "--engine",
            "loops",
            "--target",
            "sw9",
        ]),
        &["unknown target 'sw9'"],
    );
}

#[test]
fn schedule_reports_every_kernel() {
    let out = swflow(&[
        "schedule",
        "examples/lenet/model.onnx",
        "--target",
        "sw26010pro",
        "--json",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["target"], "sw26010pro");
    let kernels = v["kernels"].as_array().unwrap();
    assert!(kernels.iter().any(|k| k["op"] == "conv"));
    assert!(kernels.iter().all(|k| k["ldm_bytes"].as_u64().unwrap() <= 256 * 1024));
    let text = swflow(&["schedule", "examples/lenet/model.onnx", "--emit", "loops"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("kernel c1/0 = conv @\"conv1\""), "{text}");
    // Its six output channels by 28 rows split over the CPEs, whichever way the estimate
    // prefers.
    let partition = text
        .lines()
        .skip_while(|l| !l.starts_with("kernel c1/0 "))
        .find(|l| l.trim_start().starts_with("partition ["));
    assert!(partition.is_some_and(|l| l.contains(" 168 points")), "{text}");
}

#[test]
fn run_without_inputs_is_deterministic() {
    let (a, b) = (scratch("seed-a"), scratch("seed-b"));
    for d in [&a, &b] {
        assert!(swflow(&[
            "run",
            "examples/lenet/model.onnx",
            "--seed",
            "3",
            "-o",
            d.to_str().unwrap()
        ])
        .status
        .success());
    }
    let (x, y) = (
        npy::read(&a.join("prob.npy")).unwrap(),
        npy::read(&b.join("prob.npy")).unwrap(),
    );
    assert!(x.bit_eq(&y));
}

#[test]
fn inspect_reports_parameters_and_json() {
    let out = swflow(&["inspect", "examples/lenet/model.onnx"]);
    let text = String::from_utf8_lossy(&out.stdout);
    // 6*25+6 + 16*150+16 + 400*120+120 + 120*84+84 + 84*10+10, counted by hand.
    assert!(text.contains("parameters  61706"), "{text}");
    assert!(text.contains("Conv") && text.contains("conv"));
    let out = swflow(&["inspect", "examples/lenet/model.onnx", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["inputs"][0]["shape"], serde_json::json!([1, 1, 28, 28]));
    assert_eq!(v["outputs"][0]["name"], "prob");
    assert_eq!(v["onnx_ops"]["Gemm"], 3);
    assert_eq!(v["parameters"], 61706);
}

#[test]
fn inspect_emits_the_graph_ir() {
    let out = swflow(&["inspect", "examples/lenet/model.onnx", "--emit", "graph"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("graph \"lenet\" {"));
    assert!(
        text.contains("conv(%input, %conv1.w) {strides=[1,1], dilations=[1,1], pads=[2,2,2,2], groups=1} @\"conv1\"")
    );
}

#[test]
fn bad_invocations_fail_cleanly() {
    let dir = scratch("bad");
    let garbage = dir.join("garbage.onnx");
    std::fs::write(&garbage, b"definitely not onnx").unwrap();
    assert_fails(
        &swflow(&["inspect", garbage.to_str().unwrap()]),
        &["garbage.onnx", "not a valid ONNX model"],
    );
    assert_fails(
        &swflow(&["run", "missing.onnx"]),
        &["missing.onnx", "cannot read the model"],
    );
    assert_fails(
        &swflow(&["run", "examples/lenet/model.onnx", "--input", "input=nope.npy"]),
        &["nope.npy"],
    );
    assert_fails(
        &swflow(&[
            "run",
            "examples/lenet/model.onnx",
            "--input",
            "input=examples/lenet/expected_prob.npy",
        ]),
        &["input 'input' must be f32[1,1,28,28]", "f32[1,10]"],
    );
    assert_fails(
        &swflow(&[
            "run",
            "examples/lenet/model.onnx",
            "--input",
            "image=examples/lenet/input.npy",
        ]),
        &["no input 'image'"],
    );
    assert_fails(
        &swflow(&["run", "examples/lenet/model.onnx", "--input", "input"]),
        &["NAME=VALUE"],
    );
    assert_fails(&swflow(&["run", "--no-such-flag"]), &["--no-such-flag"]);
    assert_fails(
        &swflow(&[
            "compare",
            "examples/lenet/input.npy",
            "examples/lenet/expected_prob.npy",
        ]),
        &["does not match"],
    );
}

/// A model that takes its target shape as a graph input: `run` freezes the shape from the
/// value it is given; `compile`, which has no values, names the input and the `--const` it
/// needs, and accepts it.
#[test]
fn shape_inputs_are_frozen_from_given_values() {
    let case = root().join(".cache/conformance/node/test_reshape_reordered_all_dims");
    assert!(
        case.exists(),
        "no conformance data in {}: run scripts/setup-conformance.sh first",
        case.display()
    );
    let dir = scratch("frozen");
    let read = |name: &str| {
        let bytes = std::fs::read(case.join("test_data_set_0").join(name)).unwrap();
        swflow_frontend::onnx::decode_tensor(&bytes).unwrap().1
    };
    let (data, shape) = (dir.join("data.npy"), dir.join("shape.npy"));
    npy::write(&data, &read("input_0.pb")).unwrap();
    npy::write(&shape, &read("input_1.pb")).unwrap();
    let model = case.join("model.onnx");
    let model = model.to_str().unwrap();
    let result = dir.join("result");
    let out = swflow(&[
        "run",
        model,
        "--input",
        &format!("data={}", data.display()),
        "--input",
        &format!("shape={}", shape.display()),
        "--output",
        result.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let got = npy::read(&result.join("reshaped.npy")).unwrap();
    compare(&got, &read("output_0.pb"), Comparison::Exact).unwrap();

    let c_dir = dir.join("c");
    let out = swflow(&["compile", model, "-o", c_dir.to_str().unwrap()]);
    assert_fails(&out, &["Reshape", "'shape'", "--const shape=FILE.npy"]);
    let out = swflow(&[
        "compile",
        model,
        "-o",
        c_dir.to_str().unwrap(),
        "--const",
        &format!("shape={}", shape.display()),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// `run --grad` writes the loss, one file per gradient and the index naming them; the
/// gradients are jax's (`scripts/training/models.py`), through the graph and JIT engines.
#[test]
fn run_grad_writes_loss_gradients_and_index() {
    let case = root().join(".cache/training/mlp");
    assert!(
        case.exists(),
        "no training models in {}: run scripts/setup-training.sh first",
        case.display()
    );
    let dir = scratch("grad");
    for engine in ["graph", "jit"] {
        let out_dir = dir.join(engine);
        let out = swflow(&[
            "run",
            case.join("model.onnx").to_str().unwrap(),
            "--input",
            &format!("x={}", case.join("x.npy").display()),
            "--grad",
            "--loss",
            "cross-entropy",
            "--labels",
            case.join("labels.npy").to_str().unwrap(),
            "--engine",
            engine,
            "-o",
            out_dir.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let read_index = |d: &std::path::Path| -> serde_json::Map<String, serde_json::Value> {
            serde_json::from_str(&std::fs::read_to_string(d.join("gradients.json")).unwrap()).unwrap()
        };
        let (got, want) = (read_index(&out_dir), read_index(&case.join("reference")));
        assert_eq!(
            got.keys().collect::<Vec<_>>(),
            want.keys().collect::<Vec<_>>(),
            "the default gradients are those of every parameter"
        );
        let pairs = std::iter::once(("loss.npy".to_string(), "loss.npy".to_string())).chain(
            got.iter()
                .map(|(k, v)| (v.as_str().unwrap().to_string(), want[k].as_str().unwrap().to_string())),
        );
        for (mine, theirs) in pairs {
            let a = npy::read(&out_dir.join(&mine)).unwrap();
            let b = as_f32(npy::read(&case.join("reference").join(&theirs)).unwrap());
            compare(&a, &b, Comparison::Model).unwrap_or_else(|m| panic!("{engine}: {mine}: {}", m.message));
        }
    }
}

/// Bad labels, losses that do not fit the model and unknown tensors are clean failures.
#[test]
fn run_grad_rejects_bad_input_cleanly() {
    let dir = scratch("grad-bad");
    let write = |name: &str, t: swflow_frontend::ir::Tensor| {
        let path = dir.join(name);
        npy::write(&path, &t).unwrap();
        path.to_str().unwrap().to_string()
    };
    let i64s =
        |v: Vec<i64>| swflow_frontend::ir::Tensor::new(vec![v.len()], swflow_frontend::ir::Data::I64(v)).unwrap();
    let out_of_range = write("out_of_range.npy", i64s(vec![10]));
    let wrong_shape = write("wrong_shape.npy", i64s(vec![1, 2]));
    let floats = write(
        "floats.npy",
        swflow_frontend::ir::Tensor::from_f32(vec![1], vec![3.0]).unwrap(),
    );
    let grad = |extra: &[&str]| {
        let mut args = vec!["run", "examples/lenet/model.onnx", "--grad"];
        args.extend_from_slice(extra);
        swflow(&args)
    };
    let ce = ["--loss", "cross-entropy", "--labels"];
    assert_fails(
        &grad(&[&ce[..], &[out_of_range.as_str()]].concat()),
        &["out_of_range.npy", "class 10", "10 classes"],
    );
    assert_fails(
        &grad(&[&ce[..], &[wrong_shape.as_str()]].concat()),
        &["wrong_shape.npy", "needs i64[1]", "i64[2]"],
    );
    assert_fails(
        &grad(&[&ce[..], &[floats.as_str()]].concat()),
        &["needs i64[1]", "f32[1]"],
    );
    assert_fails(&grad(&["--loss", "cross-entropy"]), &["needs --labels"]);
    assert_fails(&grad(&["--loss", "sum", "--labels", &floats]), &["takes no labels"]);
    assert_fails(&grad(&[]), &["needs a loss"]);
    assert_fails(
        &grad(&["--loss", "sum", "--wrt", "nope"]),
        &["--wrt nope", "no initializer or input"],
    );
    assert_fails(&grad(&["--loss-output", "nope"]), &["'nope'", "not defined"]);
    let sum = dir.join("sum");
    let out = grad(&["--loss", "sum", "--wrt", "input", "-o", sum.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let index = std::fs::read_to_string(sum.join("gradients.json")).unwrap();
    assert!(index.contains("\"input\": \"grad/input.npy\""), "{index}");
}

/// `inspect --grad` reports the saved-value plan: a tape smaller than all forward values
/// together, and some values recomputed instead of kept.
#[test]
fn inspect_grad_reports_the_tape() {
    let model = root().join(".cache/training/mlp/model.onnx");
    let out = swflow(&[
        "inspect",
        model.to_str().unwrap(),
        "--grad",
        "--loss",
        "cross-entropy",
        "--json",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let g = &report["gradient"];
    let bytes = |k: &str| g[k].as_u64().unwrap_or_else(|| panic!("no {k} in {g}"));
    assert_eq!(bytes("wrt"), 6);
    assert!(bytes("tape_bytes") > 0);
    assert!(bytes("recomputed_bytes") > 0);
    assert!(bytes("tape_bytes") + bytes("recomputed_bytes") <= bytes("forward_intermediate_bytes"));
    assert!(bytes("forward_peak_bytes") <= bytes("forward_intermediate_bytes"));
}

/// `--tape` chooses how a gradient program's tape travels: `schedule --grad --json` reports
/// the plan in every mode (`stream` when none is given), every mode stores the same values
/// rather than recomputing them, and the option is refused where nothing takes it, as is
/// `--tape-arena` outside `stream`.
#[test]
fn the_tape_mode_is_reported_and_refused_where_unused() {
    let model = "examples/lenet/model.onnx";
    let mut choices = Vec::new();
    for mode in ["per-tensor", "regions", "stream", "default"] {
        let mut args = vec!["schedule", model, "--grad", "--loss", "sum", "--json"];
        if mode != "default" {
            args.extend(["--tape", mode]);
        }
        if mode != "per-tensor" {
            // Each tape-only value as far as the mode moves it (the timed choice is tested
            // below).
            args.extend(["--tape-travel", "rule"]);
        }
        let out = swflow(&args);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let tape = &report["tape"];
        assert_eq!(tape["mode"], if mode == "default" { "stream" } else { mode }, "{tape}");
        let n = |k: &str| tape[k].as_u64().unwrap_or_else(|| panic!("no {k} in {tape}"));
        assert!(n("forward_kernels") > 0 && n("backward_kernels") > 0, "{tape}");
        assert!(n("saved_bytes") >= n("tape_only_bytes"), "{tape}");
        assert_eq!(
            n("tape_only_bytes"),
            n("record_bytes") + n("streamed_bytes") + n("fell_back_bytes"),
            "{tape}"
        );
        // LeNet's dense pre-activations stream in `stream` mode, in records in `regions`.
        let streaming = matches!(mode, "stream" | "default");
        assert_eq!(n("streamed_bytes") > 0, streaming, "{tape}");
        assert_eq!(n("record_bytes") > 0, mode == "regions", "{tape}");
        assert_eq!(n("tape_arena_bytes") > 0, streaming, "{tape}");
        let arenas = report["kernels"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|k| k["tape_arena_bytes"] != 0)
            .count();
        assert_eq!(arenas > 0, streaming, "{report}");
        choices.push(report["recompute"]["stored"].clone());
    }
    // The values stored rather than recomputed are chosen alike in every mode.
    assert!(choices[0].is_array(), "{choices:?}");
    assert!(choices.iter().all(|c| *c == choices[0]), "{choices:?}");
    let small = [
        "schedule",
        model,
        "--grad",
        "--loss",
        "sum",
        "--json",
        "--tape-arena",
        "4096",
        "--tape-travel",
        "rule",
    ];
    let out = swflow(&small);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let arena = report["tape"]["tape_arena_bytes"].as_u64().unwrap();
    assert!(arena > 0 && arena <= 4096, "{report}");
    assert_fails(
        &swflow(&[
            "schedule",
            model,
            "--grad",
            "--loss",
            "sum",
            "--tape",
            "regions",
            "--tape-arena",
            "4096",
        ]),
        &["--tape-arena applies with --tape stream"],
    );
    assert_fails(
        &swflow(&["schedule", model, "--tape-arena", "4096"]),
        &["--tape-arena applies with --grad or --train"],
    );
    assert_fails(
        &swflow(&["schedule", model, "--tape", "regions"]),
        &["--tape applies with --grad or --train"],
    );
    assert_fails(
        &swflow(&["run", model, "--grad", "--loss", "sum", "--tape", "regions"]),
        &["--tape, --tape-arena, --recompute, --tape-travel and --tune apply with --engine loops or jit"],
    );
}

/// `--recompute` chooses which cheap forward values a gradient program stores rather than
/// recomputes: `timed` (the default) reports, in `schedule --json`, both modelled times of
/// each decision, stores a value where that is faster and recomputes it where that is, and
/// the time it settles on is the one `bench` models for the program it compiles (the sum loss
/// reads no labels, so no time depends on input values here; the tape travels as the mode
/// plans it, so that nothing is chosen after the stored values); `rule` reports nothing; the
/// option is refused where nothing takes it.
#[test]
fn the_recompute_choice_is_reported_and_refused_where_unused() {
    let model = "examples/lenet/model.onnx";
    let grad = ["--grad", "--loss", "sum", "--json", "--tape-travel", "rule"];
    let out = swflow(&[&["schedule", model][..], &grad].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = &report["recompute"];
    let secs = |v: &serde_json::Value, k: &str| v[k].as_f64().unwrap_or_else(|| panic!("no {k} in {v}"));
    let decisions = c["decisions"]
        .as_array()
        .unwrap_or_else(|| panic!("no decisions in {report}"));
    assert!(!decisions.is_empty(), "{c}");
    let stored = c["stored"].as_array().unwrap();
    for d in decisions {
        let (recompute, store) = (secs(d, "recompute_seconds"), secs(d, "store_seconds"));
        assert!(recompute > 0.0 && store > 0.0, "{d}");
        if store != recompute {
            assert_eq!(d["stored"], store < recompute, "{d}");
        }
        assert_eq!(stored.contains(&d["value"]), d["stored"] == true, "{c}");
    }
    let chosen = secs(c, "chosen_seconds");
    assert!(
        chosen <= secs(c, "rule_seconds") && chosen <= secs(c, "all_stored_seconds"),
        "{c}"
    );
    let out = swflow(&[&["bench", model][..], &grad].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let bench: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(secs(&bench, "total_modelled_seconds"), chosen, "{}", bench["recompute"]);
    let out = swflow(&[&["schedule", model, "--recompute", "rule"][..], &grad].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(report["recompute"].is_null(), "{}", report["recompute"]);
    assert_fails(
        &swflow(&["schedule", model, "--recompute", "rule"]),
        &["--recompute applies with --grad or --train"],
    );
    assert_fails(
        &swflow(&["run", model, "--grad", "--loss", "sum", "--recompute", "timed"]),
        &["--tape, --tape-arena, --recompute, --tape-travel and --tune apply with --engine loops or jit"],
    );
}

/// `--tape-travel` chooses how each tape-only value travels. `timed` (the default) reports, in
/// `schedule --json`, the modelled time of each value's kernels in each way a measured program
/// moves it, and the program it keeps is no slower than the mode's own plan, than no value
/// streamed, or than every value whole; `bench` models that time for the program it compiles.
/// The tape report agrees with the ways reported, and the gradients are those of the mode's
/// own plan bit for bit. `rule` reports nothing; the option is refused where nothing takes it.
#[test]
fn the_tape_travel_choice_is_reported_and_refused_where_unused() {
    let model = "examples/lenet/model.onnx";
    let grad = ["--grad", "--loss", "sum"];
    let secs = |v: &serde_json::Value, k: &str| v[k].as_f64().unwrap_or_else(|| panic!("no {k} in {v}"));
    for target in ["sw26010", "sw26010pro"] {
        let out = swflow(&[&["schedule", model, "--json", "--target", target][..], &grad].concat());
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let t = &report["tape_travel"];
        let chosen = secs(t, "chosen_seconds");
        for k in ["planned_seconds", "records_seconds", "whole_seconds"] {
            assert!(chosen <= secs(t, k), "{t}");
        }
        let decisions = t["decisions"]
            .as_array()
            .unwrap_or_else(|| panic!("no decisions in {t}"));
        assert!(!decisions.is_empty(), "{t}");
        let mut bytes = std::collections::HashMap::new();
        for d in decisions {
            assert!(secs(d, "whole_seconds") > 0.0, "{d}");
            assert!(
                d["stream_seconds"].is_number() || d["records_seconds"].is_number(),
                "{d}"
            );
            let way = d["travel"].as_str().unwrap();
            *bytes.entry(way.to_string()).or_insert(0) += d["bytes"].as_u64().unwrap();
            if let Some(held) = t["held"].get(d["value"].as_str().unwrap()) {
                assert_ne!(held, "stream", "{t}");
            }
        }
        let tape = &report["tape"];
        assert_eq!(
            tape["streamed_bytes"],
            bytes.get("stream").copied().unwrap_or(0),
            "{t}\n{tape}"
        );
        let out = swflow(&[&["bench", model, "--json", "--target", target][..], &grad].concat());
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let bench: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            secs(&bench, "total_modelled_seconds"),
            chosen,
            "{}",
            bench["tape_travel"]
        );
    }
    let dir = scratch("tape_travel");
    let mut runs = Vec::new();
    for travel in ["rule", "timed"] {
        let out_dir = dir.join(travel);
        let out = swflow(
            &[
                &["run", model, "--engine", "jit", "--tape-travel", travel, "-o"][..],
                &[out_dir.to_str().unwrap()],
                &grad,
            ]
            .concat(),
        );
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let index: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out_dir.join("gradients.json")).unwrap()).unwrap();
        let mut files: Vec<String> = index
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_str().unwrap().to_string())
            .collect();
        files.push("loss.npy".into());
        files.sort();
        runs.push(
            files
                .iter()
                .map(|f| std::fs::read(out_dir.join(f)).unwrap())
                .collect::<Vec<_>>(),
        );
    }
    assert!(
        runs[0] == runs[1],
        "the gradients differ between --tape-travel rule and timed"
    );
    let out = swflow(&[&["schedule", model, "--json", "--tape-travel", "rule"][..], &grad].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(report["tape_travel"].is_null(), "{}", report["tape_travel"]);
    assert_fails(
        &swflow(&["schedule", model, "--tape-travel", "rule"]),
        &["--tape-travel applies with --grad or --train"],
    );
    assert_fails(
        &swflow(
            &[
                &["schedule", model, "--tape", "per-tensor", "--tape-travel", "timed"][..],
                &grad,
            ]
            .concat(),
        ),
        &["--tape-travel applies with --tape regions or stream"],
    );
    assert_fails(
        &swflow(&[&["run", model, "--tape-travel", "timed"][..], &grad].concat()),
        &["--tape, --tape-arena, --recompute, --tape-travel and --tune apply with --engine loops or jit"],
    );
}

/// A gradient program that stops on the values `--recompute timed` times it on (here an
/// embedding of 3 rows read at indices computed from pseudo-random ones, twice their value,
/// which fall outside it) keeps the rule's plan: it compiles, with a warning that says why.
#[test]
fn a_program_that_cannot_be_timed_keeps_the_rule() {
    use swflow_tests::model::{f32_tensor, value_info, ModelBuilder, FLOAT, INT64};
    let table: Vec<f32> = (0..12).map(|i| i as f32 / 12.0 - 0.25).collect();
    let mut b = ModelBuilder::new(17)
        .input("idx", INT64, &[5])
        .init(f32_tensor("W", &[3, 4], &table))
        .node("twice", "Add", &["idx", "idx"], &["at"], vec![])
        .node("gather", "Gather", &["W", "at"], &["g"], vec![])
        .node("relu", "Relu", &["g"], &["r"], vec![])
        .node("square", "Mul", &["r", "r"], &["y"], vec![]);
    b.model
        .graph
        .as_mut()
        .unwrap()
        .output
        .push(value_info("y", FLOAT, &[5, 4]));
    let dir = scratch("untimed");
    let model = dir.join("embedding.onnx");
    std::fs::write(&model, b.bytes()).unwrap();
    let out = swflow(&["schedule", model.to_str().unwrap(), "--grad", "--loss", "sum", "--json"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("--recompute timed") && err.contains("gather index out of range"),
        "{err}"
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(report["recompute"].is_null(), "{}", report["recompute"]);
}

/// `compile --grad` builds a program whose run writes what `run --grad` writes, with the
/// parameters' initial values in its parameter file; its gradients are jax's.
#[test]
fn compile_grad_program_writes_loss_gradients_and_index() {
    let case = root().join(".cache/training/mlp");
    let dir = scratch("compile-grad");
    let folder = dir.join("c");
    let out = swflow(&[
        "compile",
        case.join("model.onnx").to_str().unwrap(),
        "--grad",
        "--loss",
        "cross-entropy",
        "-o",
        folder.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let make = Command::new("make")
        .arg("-C")
        .arg(&folder)
        .args(["-s", "-j2"])
        .output()
        .unwrap();
    assert!(make.status.success(), "{}", String::from_utf8_lossy(&make.stderr));
    let results = dir.join("results");
    let run = Command::new(folder.join("model"))
        .arg("--input")
        .arg(format!("x={}", case.join("x.npy").display()))
        .arg("--input")
        .arg(format!("labels={}", case.join("labels.npy").display()))
        .arg("--output")
        .arg(&results)
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let index: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(results.join("gradients.json")).unwrap()).unwrap();
    let want: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(case.join("reference/gradients.json")).unwrap()).unwrap();
    assert_eq!(index.keys().collect::<Vec<_>>(), want.keys().collect::<Vec<_>>());
    let pairs = std::iter::once(("loss.npy", "loss.npy")).chain(
        index
            .iter()
            .map(|(k, v)| (v.as_str().unwrap(), want[k].as_str().unwrap())),
    );
    for (mine, theirs) in pairs {
        let a = npy::read(&results.join(mine)).unwrap();
        let b = as_f32(npy::read(&case.join("reference").join(theirs)).unwrap());
        compare(&a, &b, Comparison::Model).unwrap_or_else(|m| panic!("{mine}: {}", m.message));
    }
}

/// A loss that does not fit the model, and training without an optimizer, are clean failures.
#[test]
fn losses_that_do_not_fit_and_incomplete_training_options_fail_cleanly() {
    let node = |name: &str| root().join(".cache/conformance/node").join(name).join("model.onnx");
    let (argmax, exp) = (node("test_argmax_default_axis_example"), node("test_exp_example"));
    assert!(
        argmax.exists(),
        "no conformance data: run scripts/setup-conformance.sh first"
    );
    assert_fails(
        &swflow(&["run", argmax.to_str().unwrap(), "--grad", "--loss", "sum"]),
        &["output 'result'", "floating-point prediction", "i64"],
    );
    assert_fails(
        &swflow(&["run", exp.to_str().unwrap(), "--grad", "--loss", "cross-entropy"]),
        &["output 'y'", "logits [N, C, ...]", "f32[3]"],
    );
    let lenet = "examples/lenet/model.onnx";
    let dir = scratch("train-bad");
    let out = dir.to_str().unwrap();
    assert_fails(
        &swflow(&["compile", lenet, "--train", "--loss", "sum", "--lr", "0.1", "-o", out]),
        &["--train needs --optimizer"],
    );
    assert_fails(
        &swflow(&[
            "compile",
            lenet,
            "--train",
            "--loss",
            "sum",
            "--optimizer",
            "sgd",
            "-o",
            out,
        ]),
        &["--lr"],
    );
    assert_fails(
        &swflow(&[
            "compile",
            lenet,
            "--train",
            "--loss",
            "sum",
            "--optimizer",
            "adam",
            "--lr",
            "0.1",
            "--momentum",
            "0.9",
            "-o",
            out,
        ]),
        &["momentum and nesterov apply to sgd and momentum, not adam"],
    );
    assert_fails(
        &swflow(&["compile", lenet, "--loss", "sum", "-o", out]),
        &["apply with --grad or --train"],
    );
    assert_fails(
        &swflow(&["compile", lenet, "--optimizer", "sgd", "-o", out]),
        &["apply with --train"],
    );
}

/// `--tune N` measures each kernel under at most N schedules and keeps the fastest: the
/// program `bench` models is then never slower than the scheduler's, each kernel takes the
/// time tuning measured for it alone, and the report says so kernel by kernel, for a gradient
/// program too; it is refused where it cannot apply.
#[test]
fn tuning_is_never_slower_and_refused_where_it_cannot_apply() {
    let model = "examples/lenet/model.onnx";
    let bench = |extra: &[&str]| -> serde_json::Value {
        let out = swflow(&[&["bench", model, "--json"][..], extra].concat());
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let (untuned, tuned) = (bench(&[]), bench(&["--tune", "4"]));
    assert!(untuned["tune"].is_null(), "{}", untuned["tune"]);
    let total = |r: &serde_json::Value| r["total_modelled_seconds"].as_f64().unwrap();
    assert!(total(&tuned) <= total(&untuned), "tuned {tuned}, untuned {untuned}");
    let t = &tuned["tune"];
    assert_eq!(t["budget"], 4, "{t}");
    let kernels = t["kernels"].as_array().unwrap();
    let rows = tuned["kernels"].as_array().unwrap();
    assert_eq!(kernels.len(), rows.len(), "{t}");
    for (k, row) in kernels.iter().zip(rows) {
        assert_eq!(k["kernel"], row["kernel"], "{t}");
        let n = k["measured"].as_u64().unwrap();
        assert!((1..=4).contains(&n), "{k}");
        let (before, after) = (
            k["before_seconds"].as_f64().unwrap(),
            k["after_seconds"].as_f64().unwrap(),
        );
        assert!(after <= before, "{k}");
        let modelled = row["modelled_seconds"].as_f64().unwrap();
        assert!(
            (modelled - after).abs() <= 1e-12 * after,
            "{k} against {modelled} s in the program"
        );
    }
    // A gradient program is tuned around its tape: the kernels its plan fixes are not
    // measured (here the values kept for the backward travel as records, as
    // `--tape-travel timed` chooses for this model), the others are.
    let grad = ["--grad", "--loss", "sum"];
    let (untuned, tuned) = (bench(&grad), bench(&[&grad[..], &["--tune", "2"]].concat()));
    assert!(total(&tuned) <= total(&untuned), "tuned {tuned}, untuned {untuned}");
    let measured: Vec<u64> = tuned["tune"]["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["measured"].as_u64().unwrap())
        .collect();
    assert!(
        measured.contains(&0) && measured.iter().any(|&n| n > 0),
        "{}",
        tuned["tune"]
    );
    assert_fails(
        &swflow(&["schedule", model, "--tune", "0"]),
        &["--tune needs at least one schedule"],
    );
    assert_fails(
        &swflow(&["run", model, "--tune", "4"]),
        &["--tune apply with --engine loops or jit"],
    );
}
