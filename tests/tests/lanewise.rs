//! The lane-wise vector code of elementwise maps and of folds that are no sum of products
//! (pooling, reductions along another axis): it computes what the scalar code computes, bit
//! for bit, through the JIT and the generated C, and the operations it is charged with are
//! those it executes.

use swflow_codegen::cpe::{fused_product, Func, Place, Stmt, Value};
use swflow_codegen::jit;
use swflow_frontend::interp;
use swflow_frontend::ir::{parse, BinaryOp, Graph, Tensor, UnaryOp};
use swflow_frontend::tolerance::{compare, Comparison};
use swflow_scheduler::target::Target;
use swflow_tests::cbuild;
use swflow_tests::{charged_fp_as_flops, count_issued_as_flops, each_body, scalar_folds_executed, seeded_inputs};

/// Maps with broadcast operands and constants (a normalisation, ReLU and a square root, a
/// division, a minimum)
/// and folds: a 3x3 stride-2 maximum pool with padding (strided loads), an average pool (a
/// sum, whose epilogue divides it), a 3x3 stride-1 maximum pool with padding over 7 x 7
/// pixels (rows shorter than SW26010-Pro's vectors), an average pool over 13 x 13 pixels that
/// leaves out the padding (its epilogue divides by each pixel's count) and a maximum along a
/// middle axis; and a convolution
/// whose epilogue adds a bias and applies ReLU, and another that also keeps its reduced value
/// for a later reader; a three-point stencil, whose taps share one window of their
/// operand; a grouped convolution, whose output channel `8*g + m` is written whole in tiles of
/// one group, so that its box is not read first and its epilogue runs as vectors; and a
/// local response normalisation, whose sum of squares over a window of
/// channels is read twice (by its square root and by the division) and computed once per
/// vector. The normalisation's rows run on through its 9 x 30 pixels (270 points), which
/// every buffer lays out one after the other; the maps, and the pools (whose nests hold their
/// whole windows, so their vectors start from the fold's initial value), store the lanes
/// left after their vectors as one more vector, the row's last; the epilogues that read
/// their targets leave single lanes after the vectors.
const MODEL: &str = r#"graph "lanewise" {
  %x: f32[2,5,9,30] = input
  %s: f32[5,1,1] = input
  %t: f32[5,1,1] = input
  %m: f32[2,5,9,30] = mul(%x, %s)
  %a: f32[2,5,9,30] = add(%m, %t)
  %r: f32[2,5,9,30] = relu(%a)
  %h: f32[2,5,9,30] = sqrt(%r)
  %q: f32[1,8,17,33] = input
  %p: f32[1,8,9,17] = max_pool(%q) {kernel=[3,3], strides=[2,2], dilations=[1,1], pads=[1,1,1,1], ceil_mode=false}
  %v: f32[1,8,15,31] = avg_pool(%q) {kernel=[3,3], strides=[1,1], dilations=[1,1], pads=[0,0,0,0], ceil_mode=false, count_include_pad=true}
  %gq: f32[1,24,7,7] = input
  %g: f32[1,24,7,7] = max_pool(%gq) {kernel=[3,3], strides=[1,1], dilations=[1,1], pads=[1,1,1,1], ceil_mode=false}
  %wq: f32[1,128,13,13] = input
  %w13: f32[1,128,13,13] = avg_pool(%wq) {kernel=[3,3], strides=[1,1], dilations=[1,1], pads=[1,1,1,1], ceil_mode=false, count_include_pad=false}
  %z: f32[64,6,40] = input
  %y: f32[64,1,40] = reduce_max(%z) {axes=[1]}
  %w: f32[64,6,40] = input
  %d: f32[64,6,40] = div(%z, %w)
  %n: f32[64,6,40] = min(%d, %z)
  %cx: f32[1,4,6,22] = input
  %cw: f32[6,4,3,3] = input
  %cb: f32[1,6,1,1] = input
  %cy: f32[1,6,6,22] = conv(%cx, %cw) {strides=[1,1], dilations=[1,1], pads=[1,1,1,1], groups=1}
  %ca: f32[1,6,6,22] = add(%cy, %cb)
  %cr: f32[1,6,6,22] = relu(%ca)
  %kx: f32[1,4,5,20] = input
  %kw: f32[6,4,3,3] = input
  %kb: f32[1,6,1,1] = input
  %ky: f32[1,6,5,20] = conv(%kx, %kw) {strides=[1,1], dilations=[1,1], pads=[1,1,1,1], groups=1}
  %ka: f32[1,6,5,20] = add(%ky, %kb)
  %kr: f32[1,6,5,20] = relu(%ka)
  %ks: f32[1,6,5,20] = mul(%ka, %ka)
  %u: f32[3,1030] = input
  %u0: f32[3,1028] = slice(%u) {starts=[0,0], steps=[1,1], sizes=[3,1028]}
  %u1: f32[3,1028] = slice(%u) {starts=[0,1], steps=[1,1], sizes=[3,1028]}
  %u2: f32[3,1028] = slice(%u) {starts=[0,2], steps=[1,1], sizes=[3,1028]}
  %us: f32[3,1028] = add(%u0, %u1)
  %ut: f32[3,1028] = max(%us, %u2)
  %lx: f32[1,8,12,40] = input
  %lk: f32[1,1,1,1] = const [1.0]
  %lp: f32[1,10,12,40] = pad(%lx) {pads=[0,1,0,0,0,1,0,0], value=0.0}
  %l0: f32[1,8,12,40] = slice(%lp) {starts=[0,0,0,0], steps=[1,1,1,1], sizes=[1,8,12,40]}
  %l1: f32[1,8,12,40] = slice(%lp) {starts=[0,1,0,0], steps=[1,1,1,1], sizes=[1,8,12,40]}
  %l2: f32[1,8,12,40] = slice(%lp) {starts=[0,2,0,0], steps=[1,1,1,1], sizes=[1,8,12,40]}
  %lm0: f32[1,8,12,40] = mul(%l0, %l0)
  %lm1: f32[1,8,12,40] = mul(%l1, %l1)
  %lm2: f32[1,8,12,40] = mul(%l2, %l2)
  %lm01: f32[1,8,12,40] = add(%lm0, %lm1)
  %lm: f32[1,8,12,40] = add(%lm01, %lm2)
  %ls: f32[1,8,12,40] = add(%lm, %lk)
  %lr: f32[1,8,12,40] = sqrt(%ls)
  %ln: f32[1,8,12,40] = mul(%lx, %lr)
  %lo: f32[1,8,12,40] = div(%ln, %ls)
  %gx: f32[1,32,14,28] = input
  %gw: f32[32,8,1,1] = input
  %gb: f32[1,32,1,1] = input
  %gy: f32[1,32,14,28] = conv(%gx, %gw) {strides=[1,1], dilations=[1,1], pads=[0,0,0,0], groups=4}
  %ga: f32[1,32,14,28] = add(%gy, %gb)
  %gr: f32[1,32,14,28] = relu(%ga)
  output "r" = %h
  output "p" = %p
  output "v" = %v
  output "g" = %g
  output "w13" = %w13
  output "y" = %y
  output "n" = %n
  output "cr" = %cr
  output "kr" = %kr
  output "ks" = %ks
  output "ut" = %ut
  output "lo" = %lo
  output "gr" = %gr
}"#;

fn model() -> Graph {
    parse(MODEL).unwrap()
}

/// A target without vectors: every kernel runs its scalar nest.
fn scalar(target: &Target) -> Target {
    Target {
        f32_vector_lanes: 1,
        ..target.clone()
    }
}

fn lanewise_kernels(f: &Func) -> bool {
    let mut found = false;
    let mut body = f.body.clone();
    each_body(&mut body, &mut |b| {
        found |= b
            .iter()
            .any(|s| matches!(s, Stmt::VBinary { .. } | Stmt::VLoadStrided { .. }));
    });
    found
}

/// Every output of the vector code equals the scalar code's bit for bit, through the JIT
/// and the generated C, with equal counters; and all of them agree with the interpreter
/// within the project tolerance.
#[test]
fn vectors_compute_what_scalars_compute() {
    let g = model();
    let inputs = seeded_inputs(&g, 5);
    let want = interp::run(&g, &inputs).unwrap();
    for target in [Target::sw26010(), Target::sw26010pro()] {
        let p = swflow_scheduler::pipeline::compile(&g, &target).unwrap();
        let spreads: Vec<_> = p
            .kernels
            .iter()
            .flat_map(|k| k.stmt.windows())
            .filter(|w| !w.spread.is_empty())
            .map(|w| w.spread.clone())
            .collect();
        // The stencil's three taps are one window, and so are the normalisation's three
        // channels (read through a pad).
        assert_eq!(spreads, [vec![0, 2], vec![0, 2, 0, 0]]);
        let mut vectorised = 0;
        let jitted = jit::compile_edited(&p, &target, &mut |_, f: &mut Func| {
            vectorised += usize::from(lanewise_kernels(f));
        })
        .unwrap()
        .run(&p, &target, &inputs)
        .unwrap();
        // The normalisation with its ReLU and square root, the maximum pools, the average
        // pool's sum with its division, the reduction, the division with its minimum, the
        // convolutions' epilogues (the grouped one's too), the stencil and the normalisation;
        // on SW26010 also the square of the kept value, which fetches its ten points a CPE
        // into buffers there, and reads them from main memory directly on SW26010-Pro.
        let lanewise = if target.f32_vector_lanes == 4 { 13 } else { 12 };
        assert_eq!(vectorised, lanewise, "{}: lane-wise kernels", target.name);
        let plain = scalar(&target);
        let ps = swflow_scheduler::pipeline::compile(&g, &plain).unwrap();
        let scalar_run = jit::compile(&ps, &plain).unwrap().run(&ps, &plain, &inputs).unwrap();
        for (k, (v, s)) in jitted.outputs.iter().zip(&scalar_run.outputs).enumerate() {
            compare(v, s, Comparison::Exact).unwrap_or_else(|m| panic!("{}: output {k}: {}", target.name, m.message));
        }
        for (got, want) in jitted.outputs.iter().zip(&want) {
            compare(got, want, Comparison::Tolerance).unwrap_or_else(|m| panic!("{}: {}", target.name, m.message));
        }
        let dir = cbuild::scratch(&format!("lanewise-{}", target.name), "model");
        cbuild::generate(&p, &target, &dir).unwrap();
        cbuild::make(&dir, &[]).unwrap();
        cbuild::make(&dir, &[cbuild::sdk_check(&target)]).unwrap();
        let built: Vec<Tensor> = cbuild::run_model(&dir, &g, &inputs, &[]).unwrap();
        for (k, (c, j)) in built.iter().zip(&jitted.outputs).enumerate() {
            compare(c, j, Comparison::Exact).unwrap_or_else(|m| panic!("{}: C output {k}: {}", target.name, m.message));
        }
        let c_report = cbuild::run_with_stats(&dir).unwrap();
        let seeded = jit::compile(&p, &target)
            .unwrap()
            .run(&p, &target, &seeded_inputs(&g, 0))
            .unwrap();
        let jit_report = serde_json::to_value(&seeded.report).unwrap();
        for (c, j) in c_report["kernels"]
            .as_array()
            .unwrap()
            .iter()
            .zip(jit_report["kernels"].as_array().unwrap())
        {
            for field in ["flops", "modelled_cycles", "get_bytes", "put_bytes"] {
                assert_eq!(c[field], j[field], "{}: {} of {}", target.name, field, c["kernel"]);
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// P0 instructions of one execution of a value's operations at a point, as the scalar code
/// writes them (`cost::binary` and `cost::unary` for f32).
fn value_fp(v: &Value) -> u32 {
    match v {
        Value::Load(Place::Ldm { .. } | Place::Main { .. }) | Value::Const(_) | Value::Index(_) => 0,
        Value::Unary(op, _, a) => {
            value_fp(a)
                + match op {
                    UnaryOp::Relu | UnaryOp::Neg | UnaryOp::Abs => 1,
                    UnaryOp::Sqrt => 0,
                    other => panic!("no count for {other:?}"),
                }
        }
        Value::Binary(op, _, a, b) => {
            value_fp(a)
                + value_fp(b)
                + match op {
                    BinaryOp::Max | BinaryOp::Min => 3,
                    BinaryOp::Div => 0,
                    _ => 1,
                }
        }
        Value::Cast(_, _, a) => value_fp(a) + 1,
        Value::Select(c, a, b) => value_fp(c) + value_fp(a) + value_fp(b),
    }
}

/// P0 instructions one execution of a statement issues, as the timing model charges them
/// (an unaligned vector load or store is one merge, an aligned one none, a strided load one
/// insert per lane, a vector maximum two compares and two selects: assumptions of the cost
/// model, which this counts as stated).
fn issued(s: &Stmt, lanes: u32) -> u32 {
    match s {
        Stmt::VFma { .. } | Stmt::VStoreLanes { .. } => 1,
        Stmt::VStore { aligned, .. } => u32::from(!aligned),
        Stmt::VLoad { broadcast, aligned, .. } => u32::from(!broadcast && !aligned),
        Stmt::VLoadStrided { .. } => lanes,
        Stmt::VBinary { op, .. } => match op {
            BinaryOp::Max | BinaryOp::Min => 4,
            BinaryOp::Div => 0,
            _ => 1,
        },
        Stmt::Store { value, .. } => value_fp(value),
        // A sum of a product: one fused multiply-add.
        Stmt::Fold { kind, dtype, value, .. } if fused_product(*kind, *dtype, value).is_some() => 1,
        Stmt::Fold { kind, value, .. } => {
            value_fp(value)
                + match kind {
                    swflow_frontend::ir::ReduceKind::Max | swflow_frontend::ir::ReduceKind::Min => 3,
                    _ => 1,
                }
        }
        _ => 0,
    }
}

/// The charges describe the code: the flops are those of the scalar nest (one per operation
/// at each point, each lane counted once), and the P0 instructions charged in bulk equal
/// those of the statements executed, counted by a program whose charges are replaced by one
/// after every statement that issues any.
#[test]
fn charges_are_the_operations_executed() {
    let g = model();
    let inputs = seeded_inputs(&g, 3);
    for target in [Target::sw26010(), Target::sw26010pro()] {
        let p = swflow_scheduler::pipeline::compile(&g, &target).unwrap();
        let lanes = target.f32_vector_lanes as u32;
        let plain = scalar(&target);
        let flops = |t: &Target| {
            let run = jit::compile(&p, t).unwrap().run(&p, t, &inputs).unwrap();
            serde_json::to_value(&run.report).unwrap()["kernels"]
                .as_array()
                .unwrap()
                .clone()
        };
        for (v, s) in flops(&target).iter().zip(flops(&plain)) {
            assert_eq!(v["flops"], s["flops"], "{}: flops of {}", target.name, v["kernel"]);
        }
        let counted = jit::compile_edited(&p, &target, &mut |_, f: &mut Func| {
            count_issued_as_flops(f, &mut |s| issued(s, lanes))
        })
        .unwrap()
        .run(&p, &target, &inputs)
        .unwrap();
        let charged = jit::compile_edited(&p, &target, &mut |_, f: &mut Func| charged_fp_as_flops(f))
            .unwrap()
            .run(&p, &target, &inputs)
            .unwrap();
        let rows = |r: &jit::JitRun| {
            serde_json::to_value(&r.report).unwrap()["kernels"]
                .as_array()
                .unwrap()
                .clone()
        };
        for (x, y) in rows(&charged).iter().zip(rows(&counted)) {
            assert_eq!(x["kernel"], y["kernel"]);
            assert_eq!(
                x["flops"], y["flops"],
                "{}: P0 instructions of {}",
                target.name, x["kernel"]
            );
        }
    }
}

/// A fold whose nest holds its whole reduction starts its vectors from the fold's initial
/// value, so the lanes left after a row's whole vectors run as one more vector ending at the
/// row's end: the 13-wide average pool's rows (3 vectors and a lane on SW26010, a vector and
/// 5 lanes on SW26010-Pro) fold no lane singly; and a row shorter than a vector runs as one vector
/// on past its end, into the next row's elements (stored again when that row runs) or the
/// buffer's room: the 7-wide maximum pool's rows (two vectors on SW26010, one on
/// SW26010-Pro) fold no lane singly either. Counted by a program that reports, through the
/// flops counter, every scalar fold it executes.
#[test]
fn a_whole_reduction_folds_no_single_lanes() {
    let g = model();
    let inputs = seeded_inputs(&g, 3);
    for target in [Target::sw26010(), Target::sw26010pro()] {
        let p = swflow_scheduler::pipeline::compile(&g, &target).unwrap();
        let folds = scalar_folds_executed(&p, &target, &inputs);
        for name in ["k_w13", "k_g"] {
            let (_, n) = folds.iter().find(|(k, _)| k == name).expect("a reported kernel");
            assert_eq!(*n, 0, "{}: kernel {name}", target.name);
        }
    }
}
