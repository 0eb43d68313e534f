//! Generated C beyond conformance: hostile names, deterministic output, the emulator catching
//! broken kernels, its DMA counters against the scheduler's, and the built program's errors.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use anyhow::Result;
use swflow_frontend::interp;
use swflow_frontend::ir::{parse, Graph, Tensor};
use swflow_frontend::onnx::{import_bytes, import_file, ImportOptions};
use swflow_frontend::random::random_tensor;
use swflow_frontend::tolerance::{compare, Comparison};
use swflow_scheduler::exec::cpe::kernel_stats;
use swflow_scheduler::schedule::LDM_BUFFER_ALIGN;
use swflow_scheduler::target::Target;
use swflow_tests::cbuild::{compile, make, run_model, run_with_stats, scratch, sdk_check};
use swflow_tests::model::{f32_tensor, ModelBuilder, FLOAT};
use swflow_tests::{conformance_dir, lenet, seeded_inputs};

fn inputs_of(g: &Graph) -> Vec<Tensor> {
    seeded_inputs(g, 7)
}

/// Builds `g` in `dir`, runs it and compares every output with the graph interpreter.
fn build_run_compare(g: &Graph, target: &Target, dir: &Path) -> Result<()> {
    compile(g, target, dir)?;
    make(dir, &[])?;
    make(dir, &[sdk_check(target)])?;
    let inputs = inputs_of(g);
    let got = run_model(dir, g, &inputs, &[])?;
    let want = interp::run(g, &inputs)?;
    assert_eq!(got.len(), want.len());
    for (a, b) in got.iter().zip(&want) {
        compare(a, b, Comparison::Tolerance).map_err(|m| anyhow::anyhow!(m.message))?;
    }
    Ok(())
}

/// Every sequence that C comments, string and character literals and the preprocessor treat
/// specially, ending in a line continuation: quotes, comment openers and closers, newlines,
/// carriage returns, form feeds, vertical tabs, backslashes before a newline, trigraphs,
/// digraphs, directives, universal character names, non-ASCII UTF-8 (U+2028 among it) and
/// characters outside C's basic set. No NUL and no `=` (so no `??=`), so that
/// `--input NAME=x.npy` can name it; other names hold those.
const C_SPECIAL: &str = "in\"put' */ /* // \\\n \\\r\n \r \x0c\x0b ??/ ??' ??( ??) ??! ??< ??> ??- \
    %: %:%: <: :> <% %> # ## #include <stdio.h> #define X 1 #error x \\u0041 \\U0001F600 \
    中文 \u{2028} é $ @ ` \\";

#[test]
fn hostile_names_build_and_run() {
    // Kernels, tensors, parameter fields and comments from names holding C_SPECIAL, NUL,
    // comment markers at either end, C keywords, reserved and macro-like names, names that
    // collide once sanitised (`a.b`, `a/b`, `a b`), that differ in case only (`x`, `X`), and
    // that equal another kernel's derived names (`x_para`, `x_fits_ldm`, `x_run`).
    let opener = "*/ #include <stdio.h> /*";
    let weight = "w\0*/ ??= \\";
    let out1 = "out\"*/\nput\0??=??/\\";
    let out2 = "a?b??/";
    let mut m = ModelBuilder::new(13)
        .input(C_SPECIAL, FLOAT, &[2, 3])
        .input("double", FLOAT, &[3])
        .init(f32_tensor(weight, &[2, 3], &[1.0, -2.0, 3.0, -4.0, 5.0, -6.0]))
        .init(f32_tensor("a/b", &[3], &[0.5, 1.5, -2.5]))
        .node(opener, "Add", &[C_SPECIAL, weight], &[opener], vec![])
        .node("for\n(;;) \\", "Relu", &[opener], &["a.b"], vec![])
        .node("__thread_local", "Mul", &["a.b", "a/b"], &["a b"], vec![])
        .node("NAN", "Sigmoid", &["a b"], &[out1], vec![])
        .node("?", "Neg", &["a.b"], &[out2], vec![])
        .node("x = ??=", "Add", &["a b", "double"], &["x"], vec![])
        .node("x_para", "Abs", &["x"], &["x_para"], vec![])
        .node("x_fits_ldm", "Neg", &["x_para"], &["x_fits_ldm"], vec![])
        .node("x_run", "Relu", &["x_fits_ldm"], &["x_run"], vec![])
        .node("X", "Neg", &["x_run"], &["X"], vec![])
        .node(C_SPECIAL, "Abs", &["X"], &["int"], vec![])
        .node("", "Neg", &["int"], &["NAN"], vec![])
        .node("while", "Relu", &["NAN"], &["__thread_local"], vec![])
        .node("main", "Neg", &["__thread_local"], &["中文\u{2028}"], vec![])
        .output(out1)
        .output(out2)
        .output("中文\u{2028}");
    m.model.graph.as_mut().unwrap().name = Some(format!("/{C_SPECIAL}\0*"));
    let g = import_bytes(&m.bytes(), "hostile.onnx", None, &ImportOptions::default()).unwrap();
    assert!(g.nodes().iter().any(|n| n.origin.as_deref() == Some(opener)));
    for target in [Target::sw26010(), Target::sw26010pro()] {
        let dir = scratch("names", &target.name);
        build_run_compare(&g, &target, &dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// A built program given no inputs draws them as `swflow run` does, ids within the tables
/// they index: an embedding of 3 rows read at ids and one of 2 rows read at a reshape of
/// them both run, and the gathered rows equal the interpreter's bit for bit.
#[test]
fn a_built_program_draws_ids_within_its_tables() {
    use swflow_tests::model::INT64;
    let three: Vec<f32> = (0..12).map(|i| i as f32 * 0.25 - 1.0).collect();
    let two: Vec<f32> = (0..8).map(|i| 3.0 - i as f32).collect();
    let m = ModelBuilder::new(17)
        .input("ids", INT64, &[4, 6])
        .init(f32_tensor("three", &[3, 4], &three))
        .init(f32_tensor("two", &[2, 4], &two))
        .init(swflow_tests::model::i64_tensor("flat", &[1], &[24]))
        .node("g3", "Gather", &["three", "ids"], &["rows3"], vec![])
        .node("reshape", "Reshape", &["ids", "flat"], &["ids_flat"], vec![])
        .node("g2", "Gather", &["two", "ids_flat"], &["rows2"], vec![])
        .output("rows3")
        .output("rows2");
    let g = import_bytes(&m.bytes(), "embeddings.onnx", None, &ImportOptions::default()).unwrap();
    assert_eq!(swflow_frontend::random::index_extents(&g), [Some(2)]);
    let target = Target::sw26010();
    let dir = scratch("ids", &target.name);
    compile(&g, &target, &dir).unwrap();
    make(&dir, &[]).unwrap();
    let got = run_model(&dir, &g, &[], &["--seed", "5"]).unwrap();
    let want = interp::run(&g, &swflow_tests::seeded_inputs(&g, 5)).unwrap();
    for (a, b) in got.iter().zip(&want) {
        assert!(a.bit_eq(b), "{a:?} != {b:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Strided convolutions whose inputs are read split into phases (7x7 at stride 2, 11x11 at
/// stride 4 with uneven padding, one-dimensional, three-dimensional at stride 3, grouped), with
/// weights that differ from tap to tap, as the generated C runs them on both targets.
#[test]
fn phase_split_convolutions_build_and_run() {
    let g = parse(
        r#"graph "phases" {
  %x: f32[1,3,37,45] = input
  %w: f32[6,3,7,7] = input
  %y: f32[1,6,19,23] = conv(%x, %w) {strides=[2,2], dilations=[1,1], pads=[3,3,3,3], groups=1}
  %v: f32[1,2,47,51] = input
  %u: f32[4,2,11,11] = input
  %z: f32[1,4,10,11] = conv(%v, %u) {strides=[4,4], dilations=[1,1], pads=[2,1,2,2], groups=1}
  %s: f32[2,3,41] = input
  %t: f32[4,3,5] = input
  %st: f32[2,4,20] = conv(%s, %t) {strides=[2], dilations=[1], pads=[2,1], groups=1}
  %d: f32[1,2,9,11,13] = input
  %e: f32[3,2,3,3,5] = input
  %de: f32[1,3,4,5,5] = conv(%d, %e) {strides=[2,2,3], dilations=[1,1,1], pads=[0,0,1,0,0,2], groups=1}
  %g: f32[1,4,10,21] = input
  %h: f32[4,1,3,7] = input
  %gh: f32[1,4,8,6] = conv(%g, %h) {strides=[1,3], dilations=[1,1], pads=[0,0,0,0], groups=4}
  output "y" = %y
  output "z" = %z
  output "st" = %st
  output "de" = %de
  output "gh" = %gh
}"#,
    )
    .unwrap();
    for target in [Target::sw26010(), Target::sw26010pro()] {
        let dir = scratch("phases", &target.name);
        build_run_compare(&g, &target, &dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

fn folder_bytes(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().to_string_lossy().to_string();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

#[test]
fn two_compiles_give_identical_folders() {
    let squeezenet = conformance_dir().unwrap().join("light/squeezenet/model.onnx");
    let models = [
        ("lenet", lenet()),
        (
            "squeezenet",
            import_file(&squeezenet, &ImportOptions::default()).unwrap(),
        ),
    ];
    for (name, g) in &models {
        for target in [Target::sw26010(), Target::sw26010pro()] {
            let a = scratch("identical", &format!("{name}-{}-a", target.name));
            let b = scratch("identical", &format!("{name}-{}-b", target.name));
            compile(g, &target, &a).unwrap();
            compile(g, &target, &b).unwrap();
            let (fa, fb) = (folder_bytes(&a), folder_bytes(&b));
            assert!(fa.len() > 10);
            assert_eq!(fa.keys().collect::<Vec<_>>(), fb.keys().collect::<Vec<_>>());
            for (path, bytes) in &fa {
                assert!(bytes == &fb[path], "{name}: {path} differs between two compiles");
            }
            std::fs::remove_dir_all(&a).unwrap();
            std::fs::remove_dir_all(&b).unwrap();
        }
    }
}

/// Builds lenet for sw26010 after `edit` rewrites one generated slave file, runs it, and
/// returns its exit status and stderr.
fn run_broken(name: &str, kernel_file: &str, edit: impl Fn(&str) -> String) -> (i32, String) {
    let g = lenet();
    let dir = scratch("broken", name);
    compile(&g, &Target::sw26010(), &dir).unwrap();
    let path = dir.join("slave").join(kernel_file);
    let text = std::fs::read_to_string(&path).unwrap();
    let edited = edit(&text);
    assert_ne!(text, edited, "the edit must change {kernel_file}");
    std::fs::write(&path, edited).unwrap();
    make(&dir, &[]).unwrap();
    let out = Command::new(dir.join("model")).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[test]
fn dma_past_an_ldm_buffer_is_caught() {
    // The first fully connected layer's partial products declare their output buffer (one
    // tile, put once) shorter than the DMA that empties it: by the alignment's bytes, more
    // than the padding after the tile (less than the alignment).
    let (code, err) = run_broken("overrun", "k_g1_1_partials_slave.c", |t| {
        t.replace(
            "SWFLOW_LDM_BUFFER(ldm->r3_partials, sizeof ldm->r3_partials,",
            &format!("SWFLOW_LDM_BUFFER(ldm->r3_partials, sizeof ldm->r3_partials - {LDM_BUFFER_ALIGN},"),
        )
    });
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("error: kernel 'k_g1_1_partials' on CPE "), "{err}");
    assert!(err.contains("DMA put of 160 bytes"), "{err}");
    assert!(err.contains("past its end"), "{err}");
    assert!(err.contains("LDM buffer 'r3_partials'"), "{err}");
}

#[test]
fn two_cpes_writing_one_range_is_caught() {
    // Every CPE computes the first CPE's chunk and writes it back.
    let (code, err) = run_broken("race", "k_g1_1_slave.c", |t| {
        t.replace("first = cpe * 2;", "first = 0 * cpe;")
    });
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("error: kernel 'k_g1_1' on CPEs 0 and "), "{err}");
    assert!(err.contains("both write arena bytes"), "{err}");
}

#[test]
fn a_transfer_never_waited_for_is_caught() {
    let (code, err) = run_broken("unwaited", "k_g1_1_slave.c", |t| {
        t.replace("SWFLOW_DMA_WAIT(ldm->reply[1], r3_issued);", "")
    });
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("error: kernel 'k_g1_1' on CPE "), "{err}");
    assert!(err.contains("never waited for"), "{err}");
}

/// Runs the program built from `g` in `dir` and checks its DMA counters against the counts
/// of the scheduler's tile walk (`exec::walk::count`), kernel by kernel summed.
fn dma_counts_equal_the_schedule(g: &Graph, target: &Target, dir: &Path) {
    let report = run_with_stats(dir).unwrap();
    let kernels = report["kernels"].as_array().unwrap();
    let sum = |key: &str| -> usize { kernels.iter().map(|k| k[key].as_u64().unwrap() as usize).sum() };
    let p = swflow_scheduler::pipeline::compile(g, target).unwrap();
    let (mut gets, mut puts, mut get_bytes, mut put_bytes) = (0, 0, 0, 0);
    for k in &p.kernels {
        let s = kernel_stats(&p, k, k.schedule.as_ref().unwrap(), target);
        gets += s.traffic.gets;
        puts += s.traffic.puts;
        get_bytes += s.traffic.get_bytes;
        put_bytes += s.traffic.put_bytes;
    }
    assert_eq!(
        (sum("gets"), sum("puts"), sum("get_bytes"), sum("put_bytes")),
        (gets, puts, get_bytes, put_bytes),
        "{}",
        target.name
    );
    assert_eq!(sum("launches"), p.kernels.len());
    assert_eq!(sum("arg_gets"), p.kernels.len() * target.cpes);
}

#[test]
fn emulator_dma_counts_equal_the_schedule() {
    let g = lenet();
    for target in [Target::sw26010(), Target::sw26010pro()] {
        let dir = scratch("counts", &target.name);
        compile(&g, &target, &dir).unwrap();
        make(&dir, &[]).unwrap();
        dma_counts_equal_the_schedule(&g, &target, &dir);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// Strided reads whose tiles are their whole loops (a 1 x 1 convolution's subsampling at
/// stride 2, slices at steps 2 and 3, one of them starting one element in, a 3 x 3 max pool at
/// stride 2) take their whole dimensions when their spans leave less than a stride out, so
/// that each channel's plane moves as one block; a slice that leaves more out reads its
/// span. The generated C gives
/// the interpreter's values on both targets, and the emulator counts the transfers the tile
/// walk counts.
#[test]
fn strided_reads_move_whole_planes() {
    let g = parse(
        r#"graph "strided" {
  %x: f32[1,128,28,26] = input
  %w: f32[16,128,1,1] = input
  %y: f32[1,16,14,13] = conv(%x, %w) {strides=[2,2], dilations=[1,1], pads=[0,0,0,0], groups=1}
  %s: f32[1,128,14,9] = slice(%x) {starts=[0,0,0,0], steps=[1,1,2,3], sizes=[1,128,14,9]}
  %t: f32[1,128,14,9] = slice(%x) {starts=[0,0,1,1], steps=[1,1,2,3], sizes=[1,128,14,9]}
  %u: f32[1,128,13,8] = slice(%x) {starts=[0,0,0,0], steps=[1,1,2,3], sizes=[1,128,13,8]}
  %m: f32[1,128,13,12] = max_pool(%x) {kernel=[3,3], strides=[2,2], dilations=[1,1], pads=[0,0,0,0], ceil_mode=false}
  output "y" = %y
  output "s" = %s
  output "t" = %t
  output "u" = %u
  output "m" = %m
}"#,
    )
    .unwrap();
    for target in [Target::sw26010(), Target::sw26010pro()] {
        let p = swflow_scheduler::pipeline::compile(&g, &target).unwrap();
        // Per kernel reading x: the last two dimensions of its buffer of x.
        let planes: Vec<(String, Vec<usize>)> = p
            .kernels
            .iter()
            .filter_map(|k| {
                let all = swflow_scheduler::schedule::accesses(k);
                let i = (1..all.len()).find(|&i| p.tensor(k.operands[all[i].operand]).name == "x")?;
                let dims = &k.schedule.as_ref().unwrap().buffers[i].dims;
                Some((k.name.clone(), dims[dims.len().saturating_sub(2)..].to_vec()))
            })
            .collect();
        let whole = planes.iter().filter(|(_, d)| *d == [28, 26]).count();
        assert_eq!(whole, 4, "{}: {planes:?}", target.name);
        assert!(
            planes.iter().any(|(_, d)| *d == [25, 22]),
            "{}: {planes:?}",
            target.name
        );
        let dir = scratch("strided", &target.name);
        build_run_compare(&g, &target, &dir).unwrap();
        dma_counts_equal_the_schedule(&g, &target, &dir);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn built_program_reports_bad_inputs() {
    let g = lenet();
    let dir = scratch("inputs", "lenet");
    compile(&g, &Target::sw26010(), &dir).unwrap();
    make(&dir, &[]).unwrap();
    let wrong_shape = dir.join("wrong_shape.npy");
    let ty = swflow_frontend::ir::TensorType::new(swflow_frontend::ir::DType::F32, vec![1, 28, 28]).unwrap();
    swflow_frontend::npy::write(&wrong_shape, &random_tensor(&ty, 0, 0)).unwrap();
    let wrong_type = dir.join("wrong_type.npy");
    let ty = swflow_frontend::ir::TensorType::new(swflow_frontend::ir::DType::F64, vec![1, 1, 28, 28]).unwrap();
    swflow_frontend::npy::write(&wrong_type, &random_tensor(&ty, 0, 0)).unwrap();
    let garbage = dir.join("garbage.npy");
    std::fs::write(&garbage, b"not a numpy file").unwrap();
    let cases = [
        (format!("input={}", dir.join("missing.npy").display()), "missing.npy"),
        (format!("input={}", wrong_shape.display()), "expected f32[1x1x28x28]"),
        (format!("input={}", wrong_type.display()), "holds f64[1x1x28x28]"),
        (format!("input={}", garbage.display()), "garbage.npy"),
        (format!("nosuch={}", garbage.display()), "nosuch"),
    ];
    for (arg, needle) in cases {
        let out = Command::new(dir.join("model"))
            .args(["--input", &arg])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{arg}: {err}");
        assert!(err.starts_with("error: ") && err.contains(needle), "{arg}: {err}");
    }
    // --repeat runs the computation again on the same inputs, with the same results.
    let got = run_model(&dir, &g, &inputs_of(&g), &["--repeat", "2"]).unwrap();
    let want = interp::run(&g, &inputs_of(&g)).unwrap();
    compare(&got[0], &want[0], Comparison::Tolerance).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Lenet with the target of kernel `g1/1` (a matrix product with a bias and ReLU epilogue)
/// read and written directly in main memory instead of through an LDM buffer, built in `dir`
/// (with `edit` applied to that kernel's slave file).
fn lenet_with_direct_target(dir: &Path, edit: impl Fn(&str) -> String) {
    let target = Target::sw26010();
    let mut p = swflow_scheduler::pipeline::compile(&lenet(), &target).unwrap();
    let k = p.kernels.iter_mut().find(|k| k.name == "g1/1").unwrap();
    assert!(k.stmt.epilogue.is_some());
    let s = k.schedule.as_mut().unwrap();
    s.buffers[0].residence = swflow_scheduler::schedule::Residence::Direct;
    s.buffers[0].dims.clear();
    let lib = swflow_tests::cbuild::emulator_lib().unwrap();
    let out = swflow_codegen::generate(&p, &target, lib.to_str().unwrap()).unwrap();
    if dir.exists() {
        std::fs::remove_dir_all(dir).unwrap();
    }
    out.write_to(dir).unwrap();
    let path = dir.join("slave/k_g1_1_slave.c");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.contains("SWFLOW_GSTORE(float, para.r3, "),
        "the target is written directly"
    );
    std::fs::write(&path, edit(&text)).unwrap();
    make(dir, &[]).unwrap();
}

#[test]
fn direct_target_writes_are_computed_and_race_checked() {
    let g = lenet();
    let dir = scratch("direct", "lenet");
    lenet_with_direct_target(&dir, |t| t.to_string());
    let inputs = inputs_of(&g);
    let got = run_model(&dir, &g, &inputs, &[]).unwrap();
    compare(&got[0], &interp::run(&g, &inputs).unwrap()[0], Comparison::Tolerance).unwrap();

    lenet_with_direct_target(&dir, |t| t.replace("first = cpe * 2;", "first = 0 * cpe;"));
    let out = Command::new(dir.join("model")).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("error: kernel 'k_g1_1' on CPEs 0 and "), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
