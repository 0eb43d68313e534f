//! Reductions with fewer outputs than CPEs are cut into per-CPE partials and their sum, when
//! that pays for the second launch, and so are reductions with a few outputs per CPE over a
//! long reduction, and, after scheduling, those whose schedules refetch their operands, when
//! the scheduler's estimate says so; the result equals the interpreter's, exactly where the
//! fold is exact (max), and is the same from run to run.

use swflow_frontend::interp;
use swflow_frontend::ir::{BinaryOp, ConvAttrs, DType, Graph, Op, Output, ReduceKind, TensorType};
use swflow_frontend::random::random_tensor;
use swflow_frontend::tolerance::{compare, Comparison};
use swflow_scheduler::exec::cpe::run_program;
use swflow_scheduler::pipeline::{compile_with, Fuse, Options};
use swflow_scheduler::target::Target;

/// `reduce(x, axes 0, 2, 3) * 2` over `x: [n, 4, h, h]`: per-channel, like a bias gradient.
fn per_channel(kind: ReduceKind, n: usize, h: usize) -> Graph {
    let mut g = Graph::new("per_channel");
    let x = g.add_input("x", TensorType::new(DType::F32, vec![n, 4, h, h]).unwrap());
    let reduce = Op::Reduce {
        kind,
        axes: vec![0, 2, 3],
    };
    let r = g.add_node("r", reduce, vec![x], None).unwrap();
    let two = g.add_const(
        "two",
        std::sync::Arc::new(swflow_frontend::ir::Tensor::from_f32(vec![], vec![2.0]).unwrap()),
    );
    let y = g.add_node("y", Op::Binary(BinaryOp::Mul), vec![r, two], None).unwrap();
    g.outputs.push(Output {
        name: "y".into(),
        node: y,
    });
    g
}

/// Kernel names of the compiled graph, and its outputs against the interpreter's.
fn check(g: &Graph, how: Comparison) -> Vec<String> {
    let target = Target::sw26010();
    let p = compile_with(
        g,
        &target,
        Options {
            fuse: Fuse::Default,
            tape: None,
        },
    )
    .unwrap();
    let inputs: Vec<_> = p
        .inputs
        .iter()
        .enumerate()
        .map(|(i, &t)| random_tensor(&p.tensor(t).ty, 3, i))
        .collect();
    let want = interp::run(g, &inputs).unwrap();
    let (got, _) = run_program(&p, &inputs, &target).unwrap();
    compare(&got[0], &want[0], how).unwrap();
    let (again, _) = run_program(&p, &inputs, &target).unwrap();
    assert!(
        again[0].bit_eq(&got[0]),
        "a split reduction must give the same bits every run"
    );
    p.kernels.iter().map(|k| k.name.clone()).collect()
}

#[test]
fn a_large_reduction_onto_few_outputs_is_split() {
    let names = check(&per_channel(ReduceKind::Sum, 8, 32), Comparison::Tolerance);
    assert_eq!(
        names,
        ["r.partials", "r"],
        "the product by two stays the second kernel's epilogue"
    );
    let names = check(&per_channel(ReduceKind::Max, 8, 32), Comparison::Exact);
    assert_eq!(names, ["r.partials", "r"]);
}

#[test]
fn a_small_reduction_is_not_split() {
    let names = check(&per_channel(ReduceKind::Sum, 2, 4), Comparison::Tolerance);
    assert_eq!(names, ["r"]);
}

/// `reduce_sum(f(x))` over `n` elements, `f` an exponential or nothing.
fn one_sum(n: usize, exp: bool) -> Graph {
    let mut g = Graph::new("one_sum");
    let mut x = g.add_input("x", TensorType::new(DType::F32, vec![n]).unwrap());
    if exp {
        x = g
            .add_node("e", Op::Unary(swflow_frontend::ir::UnaryOp::Exp), vec![x], None)
            .unwrap();
    }
    let reduce = Op::Reduce {
        kind: ReduceKind::Sum,
        axes: vec![0],
    };
    let r = g.add_node("r", reduce, vec![x], None).unwrap();
    g.outputs.push(Output {
        name: "r".into(),
        node: r,
    });
    g
}

/// A softmax's denominator sums an exponential, a library call per element: one CPE would
/// take about as many calls as elements, so it is split; the plain sum of as many elements,
/// a fold's latency per element, saves less than the second launch costs.
#[test]
fn library_calls_count_at_their_cycles() {
    assert_eq!(check(&one_sum(400, true), Comparison::Tolerance), ["r.partials", "r"]);
    assert_eq!(check(&one_sum(400, false), Comparison::Tolerance), ["r"]);
}

/// One accumulator folds its points one after another, each waiting for the last: a plain
/// sum long enough that this latency exceeds a second launch is split.
#[test]
fn a_long_plain_sum_is_split_for_its_fold_latency() {
    assert_eq!(check(&one_sum(4000, false), Comparison::Tolerance), ["r.partials", "r"]);
}

/// `y = conv(x, w)` of inputs of shapes `x` and `w`, at stride 1 without padding.
fn conv(name: &str, x: Vec<usize>, w: Vec<usize>) -> Graph {
    let mut g = Graph::new(name);
    let ty = |shape: Vec<usize>| TensorType::new(DType::F32, shape).unwrap();
    let x = g.add_input("x", ty(x));
    let w = g.add_input("w", ty(w));
    let attrs = ConvAttrs {
        strides: vec![1, 1],
        dilations: vec![1, 1],
        pads: vec![0; 4],
        groups: 1,
    };
    let y = g.add_node("y", Op::Conv(attrs), vec![x, w], None).unwrap();
    g.outputs.push(Output {
        name: "y".into(),
        node: y,
    });
    g
}

/// `conv(x, w)` of `x: [1, 4, 32, 32]` with `w: [co, 4, 28, 28]`: `co x 5 x 5` outputs, each
/// over 4 x 28 x 28 points, like a small convolution's weight gradient (whose window is the
/// output gradient).
fn wide_window(co: usize) -> Graph {
    conv("wide_window", vec![1, 4, 32, 32], vec![co, 4, 28, 28])
}

/// With 150 outputs, about 2 per CPE, every CPE would fetch nearly all of `x` and its rows of
/// `w`: split, each fetches its part of the reduction. With 25 outputs per CPE, it is not
/// considered.
#[test]
fn a_few_outputs_per_cpe_over_a_long_reduction_are_split_by_the_estimate() {
    assert_eq!(check(&wide_window(6), Comparison::Tolerance), ["y.partials", "y"]);
    assert_eq!(check(&wide_window(64), Comparison::Tolerance), ["y"]);
}

/// A 1x1 convolution of `x: [1, c, h, h]` to `co` channels.
fn pointwise(c: usize, co: usize, h: usize) -> Graph {
    conv("pointwise", vec![1, c, h, h], vec![co, c, 1, 1])
}

/// Light Inception-v1's last `5x5_reduce`, 832 channels to 48 over 6 x 6 points (27 outputs
/// per CPE): its schedule reads every channel's six-element rows as blocks of their own, or
/// the whole input once per CPE, so it is split after scheduling. The same channels over
/// 28 x 28 points read rows long enough, and are not.
#[test]
fn a_narrow_convolution_of_a_small_image_is_split_after_scheduling() {
    assert_eq!(
        check(&pointwise(832, 48, 6), Comparison::Tolerance),
        ["y.partials", "y"]
    );
    assert_eq!(check(&pointwise(832, 48, 28), Comparison::Tolerance), ["y"]);
}

/// `y = x w` of `x: [1, k]` and `w: [k, n]`: a classifier's last layer at batch 1.
fn matrix_vector(k: usize, n: usize) -> Graph {
    let mut g = Graph::new("matrix_vector");
    let ty = |shape: Vec<usize>| TensorType::new(DType::F32, shape).unwrap();
    let x = g.add_input("x", ty(vec![1, k]));
    let w = g.add_input("w", ty(vec![k, n]));
    let y = g.add_node("y", Op::MatMul, vec![x, w], None).unwrap();
    g.outputs.push(Output {
        name: "y".into(),
        node: y,
    });
    g
}

/// Split by its 1000 columns, 16 per CPE, a matrix-vector product reads 64 bytes of every
/// 4000-byte row of `w`, which touch a line and a quarter on average: its queue is busy well
/// beyond its compulsory transfers, so it is split, each CPE reading whole rows. With 4096
/// columns each CPE reads 256 bytes of a row, two whole lines, and it is not.
#[test]
fn a_matrix_vector_product_reading_parts_of_lines_is_split_after_scheduling() {
    assert_eq!(
        check(&matrix_vector(2048, 1000), Comparison::Tolerance),
        ["y.partials", "y"]
    );
    assert_eq!(check(&matrix_vector(2048, 4096), Comparison::Tolerance), ["y"]);
}
