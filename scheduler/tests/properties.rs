//! Property tests: for random shapes (drawn from 1, 3, 50, 783, 4096 and small values) and
//! attributes, every kernel's schedule fits the LDM of both targets, and running the scheduled
//! kernels on the modelled CPEs gives the graph interpreter's result within the project
//! tolerance, with one kernel per primitive and with the primitives fused as the fusion plan
//! says (never more kernels than unfused).

use proptest::prelude::*;
use swflow_frontend::fuse::plan;
use swflow_frontend::interp;
use swflow_frontend::ir::{
    BinaryOp, ConvAttrs, DType, Graph, NodeId, Op, Output, PoolAttrs, PoolKind, ReduceKind, TensorType, UnaryOp,
};
use swflow_frontend::random::random_tensor;
use swflow_frontend::tolerance::{compare, Comparison};
use swflow_scheduler::exec::cpe::run_program;
use swflow_scheduler::loops::{verify_program, LoopKind};
use swflow_scheduler::lower::{lower, lower_fused};
use swflow_scheduler::schedule::schedule_program;
use swflow_scheduler::schedule::split::split_reductions;
use swflow_scheduler::target::Target;

const SIZES: [usize; 5] = [1, 3, 50, 783, 4096];

fn input(g: &mut Graph, name: &str, shape: Vec<usize>) -> NodeId {
    g.add_input(name, TensorType::new(DType::F32, shape).unwrap())
}

/// Schedules `g` for both targets, unfused and fused, and compares the CPE execution with the
/// interpreter. Reductions are split first, as the pipeline splits them: left whole, a
/// reduction the pipeline spreads over the CPEs' partials folds every term into one f32
/// accumulator on one CPE, whose rounding over 163840 terms (the sum of a sigmoid's 20 x 4 x
/// 2048 values) was 0.2 %, past the tolerance's 1e-3.
fn check(g: Graph) -> Result<(), TestCaseError> {
    let inputs: Vec<_> = g
        .inputs()
        .enumerate()
        .map(|(i, id)| random_tensor(&g.node(id).ty, 11, i))
        .collect();
    let want = interp::run(&g, &inputs).unwrap();
    let unfused = lower(&g).unwrap();
    let fused = lower_fused(&g, &plan(&g)).unwrap();
    prop_assert!(fused.kernels.len() <= unfused.kernels.len());
    for (target, mut p) in [
        (Target::sw26010(), unfused.clone()),
        (Target::sw26010pro(), unfused),
        (Target::sw26010(), fused.clone()),
        (Target::sw26010pro(), fused),
    ] {
        verify_program(&p).unwrap();
        split_reductions(&mut p, &target);
        verify_program(&p).unwrap();
        schedule_program(&mut p, &target).unwrap();
        for k in &p.kernels {
            let s = k.schedule.as_ref().unwrap();
            prop_assert!(
                s.ldm_bytes(k, &target) <= target.ldm_bytes - target.stack_reserve_bytes,
                "{} does not fit",
                k.name
            );
        }
        let (got, _) = run_program(&p, &inputs, &target).unwrap();
        for (a, b) in got.iter().zip(&want) {
            if let Err(m) = compare(a, b, Comparison::Tolerance) {
                return Err(TestCaseError::fail(format!(
                    "{} ({} kernels): {}",
                    target.name,
                    p.kernels.len(),
                    m.message
                )));
            }
        }
    }
    Ok(())
}

fn output(mut g: Graph, id: NodeId) -> Graph {
    g.outputs.push(Output {
        name: "y".into(),
        node: id,
    });
    g
}

/// A batch that alone fills the partition leaves the group and channel loops to tiling, so a
/// target tile spans channels of several groups that it only partly writes.
#[test]
fn grouped_conv_with_a_batch_filling_the_partition() {
    let mut g = Graph::new("grouped");
    let x = input(&mut g, "x", vec![64, 2 * 96, 3, 3]);
    let w = input(&mut g, "w", vec![2 * 300, 96, 1, 1]);
    let attrs = ConvAttrs {
        strides: vec![1, 1],
        dilations: vec![1, 1],
        pads: vec![0; 4],
        groups: 2,
    };
    let y = g.add_node("y", Op::Conv(attrs), vec![x, w], None).unwrap();
    check(output(g, y)).unwrap();
}

/// A product over an empty inner dimension is all zeros, and a convolution over no channels
/// is too: their reductions have nothing to fold.
#[test]
fn empty_reductions_give_initial_values() {
    let mut g = Graph::new("empty");
    let a = input(&mut g, "a", vec![2, 0]);
    let b = input(&mut g, "b", vec![0, 3]);
    let y = g.add_node("y", Op::MatMul, vec![a, b], None).unwrap();
    check(output(g, y)).unwrap();
}

/// A reduction split into several tiles applies its epilogue once, after the last: a matrix
/// product with a long inner dimension, whose schedule splits it, then a shift and a scale
/// (which, applied to a partial sum, would change the result).
#[test]
fn epilogue_after_a_split_reduction() {
    let mut g = Graph::new("split");
    let a = input(&mut g, "a", vec![64, 8192]);
    let b = input(&mut g, "b", vec![8192, 256]);
    let c = input(&mut g, "c", vec![256]);
    let mm = g.add_node("mm", Op::MatMul, vec![a, b], None).unwrap();
    let y = g.add_node("y", Op::Binary(BinaryOp::Sub), vec![mm, c], None).unwrap();
    let z = g.add_node("z", Op::Binary(BinaryOp::Mul), vec![y, c], None).unwrap();
    let g = output(g, z);
    let mut p = lower_fused(&g, &plan(&g)).unwrap();
    schedule_program(&mut p, &Target::sw26010()).unwrap();
    let [k] = p.kernels.as_slice() else {
        panic!("one fused kernel")
    };
    let s = k.schedule.as_ref().unwrap();
    assert!(k.stmt.epilogue.is_some());
    assert!(
        s.order.iter().any(|&l| k.loops[l].kind == LoopKind::Reduce),
        "the reduction is split: {s:?}"
    );
    check(g).unwrap();
}

/// `relu(a @ b - c)` for `a: [m, k]`, `b: [k, n]`, `c: [n]`; with `keep`, the product is an
/// output too.
fn product_shift_relu(m: usize, k: usize, n: usize, keep: bool) -> Graph {
    let mut g = Graph::new("product_shift_relu");
    let a = input(&mut g, "a", vec![m, k]);
    let b = input(&mut g, "b", vec![k, n]);
    let c = input(&mut g, "c", vec![n]);
    let mm = g.add_node("mm", Op::MatMul, vec![a, b], None).unwrap();
    let y = g.add_node("y", Op::Binary(BinaryOp::Sub), vec![mm, c], None).unwrap();
    let z = g.add_node("z", Op::Unary(UnaryOp::Relu), vec![y], None).unwrap();
    let mut g = output(g, z);
    if keep {
        g.outputs.push(Output {
            name: "mm".into(),
            node: mm,
        });
    }
    g
}

/// A reduction whose value is an output besides its epilogue's keeps it, also when its
/// reduction is split into tiles (`text.rs` pins a schedule that revisits the target).
#[test]
fn kept_value_after_a_split_reduction() {
    let g = product_shift_relu(64, 8192, 256, true);
    let mut p = lower_fused(&g, &plan(&g)).unwrap();
    schedule_program(&mut p, &Target::sw26010()).unwrap();
    let [k] = p.kernels.as_slice() else {
        panic!("one kernel: the product with its epilogue, keeping the product")
    };
    let s = k.schedule.as_ref().unwrap();
    assert!(k.stmt.keep.is_some(), "the product keeps its value");
    assert!(
        s.order.iter().any(|&l| k.loops[l].kind == LoopKind::Reduce),
        "the reduction is split: {s:?}"
    );
    check(g).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn matmul(m in prop::sample::select(SIZES.to_vec()), k in prop::sample::select(SIZES.to_vec()), n in prop::sample::select(SIZES.to_vec()), batch in 1usize..3) {
        prop_assume!(batch * m * k * n <= 20_000_000 && m * k <= 4_000_000 && k * n <= 4_000_000);
        let mut g = Graph::new("matmul");
        let a = input(&mut g, "a", vec![batch, m, k]);
        let b = input(&mut g, "b", vec![batch, k, n]);
        let y = g.add_node("y", Op::MatMul, vec![a, b], None).unwrap();
        check(output(g, y))?;
    }

    #[test]
    fn conv(n in prop::sample::select(vec![1usize, 2, 64]), groups in 1usize..4, cg in prop::sample::select(vec![1usize, 3, 8]), mg in prop::sample::select(vec![1usize, 3, 16]),
            h in prop::sample::select(vec![1usize, 3, 17, 50]), w in prop::sample::select(vec![1usize, 3, 50, 783]),
            kh in 1usize..4, kw in 1usize..4, s in 1usize..3, d in 1usize..3, pads in prop::collection::vec(0usize..3, 4), depthwise in any::<bool>()) {
        let (cg, mg) = if depthwise { (1, 1) } else { (cg, mg) };
        let mut g = Graph::new("conv");
        let x = input(&mut g, "x", vec![n, groups * cg, h, w]);
        let wt = input(&mut g, "w", vec![groups * mg, cg, kh, kw]);
        let attrs = ConvAttrs { strides: vec![s, s], dilations: vec![d, d], pads, groups };
        let Ok(y) = g.add_node("y", Op::Conv(attrs), vec![x, wt], None) else { return Ok(()) };
        prop_assume!(g.node(y).ty.numel() * cg * kh * kw <= 20_000_000);
        check(output(g, y))?;
    }

    #[test]
    fn conv_transpose(cg in 1usize..4, mg in 1usize..4, groups in 1usize..3, h in 1usize..9, w in 1usize..9, k in 1usize..4, s in 1usize..3, d in 1usize..3, p in 0usize..2, op in 0usize..2) {
        let mut g = Graph::new("conv_transpose");
        let x = input(&mut g, "x", vec![1, groups * cg, h, w]);
        let wt = input(&mut g, "w", vec![groups * cg, mg, k, k]);
        let attrs = ConvAttrs { strides: vec![s, s], dilations: vec![d, d], pads: vec![p; 4], groups };
        let Ok(y) = g.add_node("y", Op::ConvTranspose { conv: attrs, output_padding: vec![op.min(s - 1); 2] }, vec![x, wt], None) else { return Ok(()) };
        check(output(g, y))?;
    }

    #[test]
    fn pooling(c in prop::sample::select(vec![1usize, 3, 50]), h in prop::sample::select(vec![1usize, 3, 50]), w in prop::sample::select(SIZES.to_vec()),
               k in 1usize..4, s in 1usize..3, p in 0usize..2, ceil_mode in any::<bool>(), avg in any::<bool>(), include in any::<bool>()) {
        let kind = if avg { PoolKind::Avg { count_include_pad: include } } else { PoolKind::Max };
        let p = p.min(k - 1);
        let attrs = PoolAttrs { kind, kernel: vec![k, k], strides: vec![s, s], dilations: vec![1, 1], pads: vec![p; 4], ceil_mode };
        let mut g = Graph::new("pool");
        let x = input(&mut g, "x", vec![1, c, h, w]);
        let Ok(y) = g.add_node("y", Op::Pool(attrs), vec![x], None) else { return Ok(()) };
        check(output(g, y))?;
    }

    #[test]
    fn elementwise_broadcasting(a in prop::sample::select(SIZES.to_vec()), b in prop::sample::select(SIZES.to_vec()), c in prop::sample::select(vec![1usize, 3, 50]), op in 0usize..4, un in 0usize..4) {
        prop_assume!(a * b * c <= 4_000_000);
        let mut g = Graph::new("elementwise");
        let x = input(&mut g, "x", vec![a, 1, c]);
        let z = input(&mut g, "z", vec![b, 1]);
        let bin = [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Max][op];
        let s = g.add_node("s", Op::Binary(bin), vec![x, z], None).unwrap();
        let u = [UnaryOp::Relu, UnaryOp::Tanh, UnaryOp::Sigmoid, UnaryOp::Abs][un];
        let y = g.add_node("y", Op::Unary(u), vec![s], None).unwrap();
        check(output(g, y))?;
    }

    #[test]
    fn reductions(a in prop::sample::select(SIZES.to_vec()), b in prop::sample::select(SIZES.to_vec()), c in prop::sample::select(vec![1usize, 3, 50]), axes in prop::sample::subsequence(vec![0usize, 1, 2], 1..=3), kind in 0usize..3) {
        prop_assume!(a * b * c <= 4_000_000);
        let mut g = Graph::new("reduce");
        let x = input(&mut g, "x", vec![a, b, c]);
        let kind = [ReduceKind::Sum, ReduceKind::Max, ReduceKind::Min][kind];
        let y = g.add_node("y", Op::Reduce { kind, axes }, vec![x], None).unwrap();
        check(output(g, y))?;
    }

    #[test]
    fn fused_softmax(a in prop::sample::select(SIZES.to_vec()), b in prop::sample::select(SIZES.to_vec()), c in prop::sample::select(vec![1usize, 3, 50]), axis in 0usize..3) {
        prop_assume!(a * b * c <= 4_000_000);
        let mut g = Graph::new("softmax");
        let x = input(&mut g, "x", vec![a, b, c]);
        let m = g.add_node("m", Op::Reduce { kind: ReduceKind::Max, axes: vec![axis] }, vec![x], None).unwrap();
        let s = g.add_node("s", Op::Binary(BinaryOp::Sub), vec![x, m], None).unwrap();
        let e = g.add_node("e", Op::Unary(UnaryOp::Exp), vec![s], None).unwrap();
        let t = g.add_node("t", Op::Reduce { kind: ReduceKind::Sum, axes: vec![axis] }, vec![e], None).unwrap();
        let y = g.add_node("y", Op::Binary(BinaryOp::Div), vec![e, t], None).unwrap();
        check(output(g, y))?;
    }

    #[test]
    fn fused_pool_producers(c in prop::sample::select(vec![1usize, 3, 50]), h in prop::sample::select(vec![1usize, 3, 50]), w in prop::sample::select(SIZES.to_vec()),
                            k in 1usize..4, s in 1usize..3, p in 0usize..2, avg in any::<bool>(), un in 0usize..4) {
        let kind = if avg { PoolKind::Avg { count_include_pad: false } } else { PoolKind::Max };
        let p = p.min(k - 1);
        let attrs = PoolAttrs { kind, kernel: vec![k, k], strides: vec![s, s], dilations: vec![1, 1], pads: vec![p; 4], ceil_mode: false };
        let mut g = Graph::new("pool_producers");
        let x = input(&mut g, "x", vec![1, c, h, w]);
        let b = input(&mut g, "b", vec![c, 1, 1]);
        let a = g.add_node("a", Op::Binary(BinaryOp::Add), vec![x, b], None).unwrap();
        let u = [UnaryOp::Relu, UnaryOp::Tanh, UnaryOp::Sigmoid, UnaryOp::Abs][un];
        let r = g.add_node("r", Op::Unary(u), vec![a], None).unwrap();
        let Ok(y) = g.add_node("y", Op::Pool(attrs), vec![r], None) else { return Ok(()) };
        check(output(g, y))?;
    }

    #[test]
    fn fused_padding(c in prop::sample::select(vec![1usize, 3, 20]), h in prop::sample::select(vec![1usize, 3, 50]), w in prop::sample::select(SIZES.to_vec()),
                     pads in prop::collection::vec(0usize..3, 4), k in 1usize..4, p in 0usize..2, value in prop::sample::select(vec![0.0, -1.5, f64::NEG_INFINITY])) {
        prop_assume!(c * h * w <= 1_000_000);
        let p = p.min(k - 1);
        let mut g = Graph::new("padding");
        let x = input(&mut g, "x", vec![1, c, h, w]);
        let wt = input(&mut g, "w", vec![2, c, k, k]);
        let full = |p: &[usize]| vec![0, 0, p[0], p[1], 0, 0, p[2], p[3]];
        // Read in place by a convolution without padding of its own, by an elementwise op,
        // and under a padded max pool.
        let z = g.add_node("z", Op::Pad { pads: full(&pads), value: 0.0 }, vec![x], None).unwrap();
        let conv = ConvAttrs { strides: vec![1, 1], dilations: vec![1, 1], pads: vec![p; 4], groups: 1 };
        let Ok(cz) = g.add_node("cz", Op::Conv(conv), vec![z, wt], None) else { return Ok(()) };
        prop_assume!(g.node(cz).ty.numel() > 0 && g.node(cz).ty.numel() * c * k * k <= 20_000_000);
        let q = g.add_node("q", Op::Pad { pads: full(&[pads[3], pads[2], pads[1], pads[0]]), value }, vec![x], None).unwrap();
        let s = g.add_node("s", Op::Unary(UnaryOp::Sigmoid), vec![q], None).unwrap();
        let pool = PoolAttrs { kind: PoolKind::Max, kernel: vec![k, k], strides: vec![1, 2], dilations: vec![1, 1], pads: vec![p; 4], ceil_mode: false };
        let Ok(m) = g.add_node("m", Op::Pool(pool), vec![s], None) else { return Ok(()) };
        let sm = g.add_node("sm", Op::Reduce { kind: ReduceKind::Sum, axes: vec![1, 2, 3] }, vec![m], None).unwrap();
        let sc = g.add_node("sc", Op::Reduce { kind: ReduceKind::Sum, axes: vec![1, 2, 3] }, vec![cz], None).unwrap();
        let y = g.add_node("y", Op::Binary(BinaryOp::Add), vec![sm, sc], None).unwrap();
        check(output(g, y))?;
    }

    #[test]
    fn fused_movement(m in prop::sample::select(SIZES.to_vec()), k in prop::sample::select(SIZES.to_vec()), n in prop::sample::select(vec![1usize, 3, 50]), from in 0usize..3) {
        prop_assume!(m * k * n <= 20_000_000 && m * k <= 4_000_000);
        let mut g = Graph::new("movement");
        let a = input(&mut g, "a", vec![k + from, m]);
        let b = input(&mut g, "b", vec![n, k]);
        let c = input(&mut g, "c", vec![n + from]);
        let at = g.add_node("at", Op::Transpose { perm: vec![1, 0] }, vec![a], None).unwrap();
        let ats = g.add_node("ats", Op::Slice { starts: vec![0, from], steps: vec![1, 1], sizes: vec![m, k] }, vec![at], None).unwrap();
        let bt = g.add_node("bt", Op::Transpose { perm: vec![1, 0] }, vec![b], None).unwrap();
        let mm = g.add_node("mm", Op::MatMul, vec![ats, bt], None).unwrap();
        let cs = g.add_node("cs", Op::Slice { starts: vec![n + from - 1], steps: vec![-1], sizes: vec![n] }, vec![c], None).unwrap();
        let cb = g.add_node("cb", Op::Broadcast { shape: vec![m, n] }, vec![cs], None).unwrap();
        let y = g.add_node("y", Op::Binary(BinaryOp::Add), vec![mm, cb], None).unwrap();
        check(output(g, y))?;
    }

    #[test]
    fn fused_epilogues(n in prop::sample::select(vec![1usize, 2]), c in prop::sample::select(vec![1usize, 3, 8]), m in prop::sample::select(vec![1usize, 3, 16]),
                       h in prop::sample::select(vec![1usize, 3, 17]), w in prop::sample::select(vec![1usize, 3, 50, 783]), k in 1usize..4, p in 0usize..2, un in 0usize..4) {
        let p = p.min(k - 1);
        let mut g = Graph::new("epilogues");
        let x = input(&mut g, "x", vec![n, c, h, w]);
        let wt = input(&mut g, "w", vec![m, c, k, k]);
        let b = input(&mut g, "b", vec![m, 1, 1]);
        let attrs = ConvAttrs { strides: vec![1, 1], dilations: vec![1, 1], pads: vec![p; 4], groups: 1 };
        let Ok(y) = g.add_node("y", Op::Conv(attrs), vec![x, wt], None) else { return Ok(()) };
        prop_assume!(g.node(y).ty.numel() > 0 && g.node(y).ty.numel() * c * k * k <= 20_000_000);
        let shape = g.node(y).ty.shape.clone();
        let r = input(&mut g, "r", shape.clone());
        let yb = g.add_node("yb", Op::Binary(BinaryOp::Add), vec![y, b], None).unwrap();
        let u = [UnaryOp::Relu, UnaryOp::Tanh, UnaryOp::Sigmoid, UnaryOp::Abs][un];
        let a = g.add_node("a", Op::Unary(u), vec![yb], None).unwrap();
        let t = g.add_node("t", Op::Binary(BinaryOp::Add), vec![a, r], None).unwrap();
        let s = g.add_node("s", Op::Reduce { kind: ReduceKind::Sum, axes: vec![3] }, vec![t], None).unwrap();
        let q = g.add_node("q", Op::Unary(UnaryOp::Neg), vec![s], None).unwrap();
        check(output(g, q))?;
    }

    /// With `keep`, the product's own value is an output too: its kernel keeps it.
    #[test]
    fn fused_matmul_epilogue(m in prop::sample::select(SIZES.to_vec()), k in prop::sample::select(SIZES.to_vec()), n in prop::sample::select(SIZES.to_vec()), keep in proptest::bool::ANY) {
        prop_assume!(m * k * n <= 20_000_000 && m * k <= 4_000_000 && k * n <= 4_000_000 && m * n <= 4_000_000);
        check(product_shift_relu(m, k, n, keep))?;
    }
}
