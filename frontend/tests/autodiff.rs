//! Every gradient rule against central finite differences, in f64.
//!
//! Each case is a small graph whose inputs are f64. The loss is `sum(w * y)` for the case's
//! result `y` and a random constant `w`, so every element of `y` carries a different weight.
//! The gradient the backward pass computes for every input element must match
//! `(loss(x + h) - loss(x - h)) / 2h` with `h = 1e-6`: central differences are exact to
//! `O(h^2)` (about 1e-12 here) plus rounding of about 1e-16 / h = 1e-10, so a relative error
//! above 1e-6 is a wrong rule, not noise. Inputs are drawn away from kinks (ties, zeros of
//! `abs` and `relu`, the integer multiples where `rem` jumps) by construction of their ranges
//! or with probability one.

use std::sync::Arc;

use swflow_frontend::autodiff::gradients;
use swflow_frontend::interp;
use swflow_frontend::ir::{
    BinaryOp, ConvAttrs, DType, Data, Graph, NodeId, Op, Output, PoolAttrs, PoolKind, ReduceKind, Tensor, TensorType,
    UnaryOp,
};
use swflow_frontend::random::random_tensor;

const H: f64 = 1e-6;
const TOLERANCE: f64 = 1e-6;

/// Values of an input: uniform in `lo..hi`.
#[derive(Clone, Copy)]
struct Range(f64, f64);

const ANY: Range = Range(-2.0, 2.0);
const POSITIVE: Range = Range(0.5, 2.0);

fn input(g: &mut Graph, name: &str, shape: &[usize]) -> NodeId {
    g.add_input(name, TensorType::new(DType::F64, shape.to_vec()).unwrap())
}

fn node(g: &mut Graph, op: Op, inputs: &[NodeId]) -> NodeId {
    let name = format!("n{}", g.nodes().len());
    g.add_node(name, op, inputs.to_vec(), None).unwrap()
}

fn values(t: &Tensor) -> Vec<f64> {
    match t.data() {
        Data::F64(v) => v.clone(),
        _ => panic!("f64 expected"),
    }
}

/// The worst relative error of the gradients of `sum(w * y)` with respect to every input of
/// `g`, against central differences; `ranges[i]` gives input `i`'s values.
fn worst_error(mut g: Graph, y: NodeId, ranges: &[Range], seed: u64) -> f64 {
    let ids: Vec<NodeId> = g.inputs().collect();
    let inputs: Vec<Tensor> = ids
        .iter()
        .enumerate()
        .map(|(i, &id)| {
            let Range(lo, hi) = ranges[i];
            let t = random_tensor(&g.node(id).ty, seed, i);
            let v: Vec<f64> = values(&t).iter().map(|u| lo + (hi - lo) * u).collect();
            Tensor::new(t.shape().to_vec(), Data::F64(v)).unwrap()
        })
        .collect();
    let yty = g.node(y).ty.clone();
    let w = g.add_const("w", Arc::new(random_tensor(&yty, seed + 7, 99)));
    let p = node(&mut g, Op::Binary(BinaryOp::Mul), &[y, w]);
    let loss = node(
        &mut g,
        Op::Reduce {
            kind: ReduceKind::Sum,
            axes: (0..yty.rank()).collect(),
        },
        &[p],
    );
    g.outputs.push(Output {
        name: "loss".into(),
        node: loss,
    });
    let grad = gradients(&g, loss, &ids).unwrap();
    let mut gg = grad.graph.clone();
    for (i, &d) in grad.grads.iter().enumerate() {
        gg.outputs.push(Output {
            name: format!("d{i}"),
            node: d,
        });
    }
    swflow_frontend::ir::verify(&gg).unwrap();
    let out = interp::run(&gg, &inputs).unwrap();
    let loss_at = |inputs: &[Tensor]| values(&interp::run(&g, inputs).unwrap()[0])[0];
    let mut worst = 0.0f64;
    for i in 0..inputs.len() {
        let ad = values(&out[1 + i]);
        for j in 0..inputs[i].numel() {
            let shifted = |delta: f64| {
                let mut v = values(&inputs[i]);
                v[j] += delta;
                let mut xs = inputs.clone();
                xs[i] = Tensor::new(inputs[i].shape().to_vec(), Data::F64(v)).unwrap();
                loss_at(&xs)
            };
            let fd = (shifted(H) - shifted(-H)) / (2.0 * H);
            let err = (ad[j] - fd).abs() / fd.abs().max(1.0);
            assert!(
                err.is_finite(),
                "input {i} element {j}: gradient {} against {fd}",
                ad[j]
            );
            worst = worst.max(err);
        }
    }
    worst
}

/// Runs `cases` (a name, a graph with its result, and the ranges of its inputs) and checks
/// each against finite differences; prints the count and the worst error.
fn run(rule: &str, cases: Vec<(Graph, NodeId, Vec<Range>)>) {
    let n = cases.len();
    let mut worst = 0.0f64;
    for (k, (g, y, ranges)) in cases.into_iter().enumerate() {
        let e = worst_error(g, y, &ranges, k as u64);
        assert!(e <= TOLERANCE, "{rule}, case {k}: relative error {e:e}");
        worst = worst.max(e);
    }
    println!("{rule}: {n} cases, worst relative error {worst:.2e}");
}

/// `op` applied to fresh inputs of `shapes`.
fn case(op: Op, shapes: &[&[usize]], ranges: &[Range]) -> (Graph, NodeId, Vec<Range>) {
    let mut g = Graph::new("case");
    let xs: Vec<NodeId> = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| input(&mut g, &format!("x{i}"), s))
        .collect();
    let y = node(&mut g, op, &xs);
    (g, y, ranges.to_vec())
}

/// Convolution attributes: strides, dilations, pads (all begins, then all ends), groups.
fn conv(strides: &[usize], dilations: &[usize], pads: &[usize], groups: usize) -> ConvAttrs {
    ConvAttrs {
        strides: strides.to_vec(),
        dilations: dilations.to_vec(),
        pads: pads.to_vec(),
        groups,
    }
}

/// Pooling attributes: kernel, strides, dilations, pads (begins, then ends), ceil mode.
fn pool(
    kind: PoolKind,
    kernel: &[usize],
    strides: &[usize],
    dilations: &[usize],
    pads: &[usize],
    ceil: bool,
) -> PoolAttrs {
    PoolAttrs {
        kind,
        kernel: kernel.to_vec(),
        strides: strides.to_vec(),
        dilations: dilations.to_vec(),
        pads: pads.to_vec(),
        ceil_mode: ceil,
    }
}

#[test]
fn unary_rules() {
    for u in UnaryOp::ALL {
        if u == UnaryOp::Not {
            continue;
        }
        let range = match u {
            UnaryOp::Sqrt | UnaryOp::Log | UnaryOp::Recip => POSITIVE,
            _ => ANY,
        };
        let cases = [&[7][..], &[2, 3, 5], &[]]
            .iter()
            .map(|s| case(Op::Unary(u), &[s], &[range]))
            .collect();
        run(&format!("{u:?}"), cases);
    }
}

#[test]
fn binary_rules_with_broadcasting() {
    let shapes: [(&[usize], &[usize]); 4] = [
        (&[2, 3], &[2, 3]),
        (&[3, 1, 4], &[2, 4]),
        (&[4], &[2, 3, 4]),
        (&[2, 1], &[]),
    ];
    for op in BinaryOp::ALL {
        if matches!(op, BinaryOp::Less | BinaryOp::Greater | BinaryOp::Equal) {
            continue;
        }
        let ranges = match op {
            BinaryOp::Div | BinaryOp::Rem => [ANY, POSITIVE],
            BinaryOp::Pow => [POSITIVE, ANY],
            _ => [ANY, ANY],
        };
        let cases = shapes
            .iter()
            .map(|(a, b)| case(Op::Binary(op), &[a, b], &ranges))
            .collect();
        run(&format!("{op:?}"), cases);
    }
}

#[test]
fn select_rule() {
    let mut cases = Vec::new();
    for (a, b) in [(&[2, 3][..], &[2, 3][..]), (&[3][..], &[2, 1][..])] {
        let mut g = Graph::new("select");
        let x = input(&mut g, "x", &[2, 3]);
        let p = input(&mut g, "p", a);
        let q = input(&mut g, "q", b);
        let zero = g.add_const("zero", Arc::new(Tensor::new(Vec::new(), Data::F64(vec![1.0])).unwrap()));
        let c = node(&mut g, Op::Binary(BinaryOp::Greater), &[x, zero]);
        let y = node(&mut g, Op::Select, &[c, p, q]);
        cases.push((g, y, vec![ANY, ANY, ANY]));
    }
    run("select", cases);
}

#[test]
fn matmul_rule() {
    let shapes: [(&[usize], &[usize]); 3] = [(&[3, 4], &[4, 2]), (&[2, 1, 3], &[2, 3, 5]), (&[1, 1], &[1, 6])];
    let cases = shapes
        .iter()
        .map(|(a, b)| case(Op::MatMul, &[a, b], &[ANY, ANY]))
        .collect();
    run("matmul", cases);
}

#[test]
fn reduction_rules() {
    for kind in [ReduceKind::Sum, ReduceKind::Max, ReduceKind::Min, ReduceKind::Prod] {
        let cases = [vec![0], vec![1], vec![0, 2], vec![0, 1, 2]]
            .into_iter()
            .map(|axes| case(Op::Reduce { kind, axes }, &[&[3, 4, 5]], &[ANY]))
            .collect();
        run(kind.name(), cases);
    }
}

#[test]
fn movement_rules() {
    run(
        "reshape",
        vec![case(Op::Reshape { shape: vec![6, 4] }, &[&[2, 3, 4]], &[ANY])],
    );
    run(
        "broadcast",
        vec![
            case(Op::Broadcast { shape: vec![2, 3, 4] }, &[&[3, 1]], &[ANY]),
            case(Op::Broadcast { shape: vec![5, 2] }, &[&[]], &[ANY]),
        ],
    );
    run(
        "transpose",
        vec![case(Op::Transpose { perm: vec![2, 0, 1] }, &[&[2, 3, 4]], &[ANY])],
    );
    let slices = [
        (vec![1, 0], vec![1, 1], vec![2, 4]),
        (vec![3, 5], vec![-1, -2], vec![3, 3]),
        (vec![0, 1], vec![2, 3], vec![2, 2]),
    ];
    run(
        "slice",
        slices
            .into_iter()
            .map(|(starts, steps, sizes)| case(Op::Slice { starts, steps, sizes }, &[&[4, 6]], &[ANY]))
            .collect(),
    );
    run(
        "pad",
        vec![
            case(
                Op::Pad {
                    pads: vec![1, 0, 2, 3],
                    value: 0.5,
                },
                &[&[2, 3]],
                &[ANY],
            ),
            case(
                Op::Pad {
                    pads: vec![0, 2, 0, 0, 1, 1],
                    value: -1.0,
                },
                &[&[1, 2, 3]],
                &[ANY],
            ),
        ],
    );
    run(
        "concat",
        vec![
            case(Op::Concat { axis: 1 }, &[&[2, 1], &[2, 3], &[2, 2]], &[ANY, ANY, ANY]),
            case(Op::Concat { axis: 0 }, &[&[1, 3], &[2, 3]], &[ANY, ANY]),
        ],
    );
}

#[test]
fn fan_out_gradients_are_summed() {
    // y = x * x + exp(x) uses x three times; its gradient is 2x + exp(x).
    let mut g = Graph::new("fan_out");
    let x = input(&mut g, "x", &[5]);
    let xx = node(&mut g, Op::Binary(BinaryOp::Mul), &[x, x]);
    let e = node(&mut g, Op::Unary(UnaryOp::Exp), &[x]);
    let y = node(&mut g, Op::Binary(BinaryOp::Add), &[xx, e]);
    run("fan-out", vec![(g, y, vec![ANY])]);
}

#[test]
fn frozen_operands_get_no_gradient_nodes() {
    // Differentiating a convolution with respect to its weight only builds no transposed
    // convolution (the input's gradient).
    let mut g = Graph::new("frozen");
    let x = input(&mut g, "x", &[1, 2, 5, 5]);
    let w = input(&mut g, "w", &[3, 2, 3, 3]);
    let y = node(&mut g, Op::Conv(conv(&[1, 1], &[1, 1], &[1; 4], 1)), &[x, w]);
    let s = node(
        &mut g,
        Op::Reduce {
            kind: ReduceKind::Sum,
            axes: vec![0, 1, 2, 3],
        },
        &[y],
    );
    let grad = gradients(&g, s, &[w]).unwrap();
    let ops: Vec<&str> = grad.graph.nodes()[g.nodes().len()..]
        .iter()
        .map(|n| n.op.name())
        .collect();
    assert!(!ops.contains(&"conv_transpose"), "{ops:?}");
    assert!(ops.contains(&"conv"), "{ops:?}");
    swflow_frontend::ir::verify(&grad.graph).unwrap();
}

#[test]
fn inactive_nodes_get_no_gradient_work() {
    // The loss depends on `x` only through a comparison: no gradient flows, and the result
    // is a zero constant.
    let mut g = Graph::new("inactive");
    let x = input(&mut g, "x", &[3]);
    let z = input(&mut g, "z", &[3]);
    let c = node(&mut g, Op::Binary(BinaryOp::Greater), &[x, z]);
    let f = node(&mut g, Op::Cast { to: DType::F64 }, &[c]);
    let s = node(
        &mut g,
        Op::Reduce {
            kind: ReduceKind::Sum,
            axes: vec![0],
        },
        &[f],
    );
    let before = g.nodes().len();
    let grad = gradients(&g, s, &[x]).unwrap();
    let added = &grad.graph.nodes()[before..];
    // Only the zero result: the seed feeds nothing that reaches a gradient.
    assert_eq!(added.len(), 1, "{added:?}");
    assert!(matches!(&grad.graph.node(grad.grads[0]).op, Op::Const(t) if values(t) == vec![0.0; 3]));
}

#[test]
fn gather_rule() {
    // Repeated and negative positions, along the first, a middle and the last axis, with
    // positions of rank 0, 1 and 2.
    let cases: Vec<(&[usize], usize, Tensor)> = vec![
        (&[5], 0, Tensor::i64_vector(vec![0, 3, 3, -1, 0])),
        (&[2, 4, 3], 1, Tensor::from_i64(vec![2, 2], vec![1, -4, 1, 3]).unwrap()),
        (&[3, 4], 1, Tensor::from_i64(Vec::new(), vec![2]).unwrap()),
    ];
    let cases = cases
        .into_iter()
        .map(|(shape, axis, positions)| {
            let mut g = Graph::new("gather");
            let x = input(&mut g, "x", shape);
            let i = g.add_const("i", Arc::new(positions));
            let y = node(&mut g, Op::Gather { axis }, &[x, i]);
            (g, y, vec![ANY])
        })
        .collect();
    run("gather", cases);
}

#[test]
fn products_with_zeros() {
    // The gradient of a product is the product of the other elements, zeros included.
    let cases: [(&[f64], &[f64]); 4] = [
        (&[2.0, 4.0], &[4.0, 2.0]),
        (&[2.0, 0.0, 3.0], &[0.0, 6.0, 0.0]),
        (&[0.0, 0.0, 3.0], &[0.0, 0.0, 0.0]),
        (&[0.0], &[1.0]),
    ];
    for (x, want) in cases {
        let mut g = Graph::new("prod");
        let v = Tensor::new(vec![x.len()], Data::F64(x.to_vec())).unwrap();
        let x = g.add_const("x", Arc::new(v));
        let y = node(
            &mut g,
            Op::Reduce {
                kind: ReduceKind::Prod,
                axes: vec![0],
            },
            &[x],
        );
        let grad = gradients(&g, y, &[x]).unwrap();
        let mut gg = grad.graph;
        gg.outputs.push(Output {
            name: "dx".into(),
            node: grad.grads[0],
        });
        assert_eq!(values(&interp::run(&gg, &[]).unwrap()[0]), want);
    }
}

#[test]
fn errors_name_the_node() {
    // An integer loss cannot be differentiated.
    let mut g = Graph::new("int");
    let x = g.add_input("x", TensorType::new(DType::I64, vec![3]).unwrap());
    let e = gradients(&g, x, &[x]).unwrap_err();
    assert_eq!((e.node.as_str(), e.op.as_str()), ("x", "input"));
    assert!(e.reason.contains("not a floating-point tensor"), "{e}");
}

#[test]
fn max_pool_ties_go_to_the_first_maximum() {
    // Overlapping 2x2 windows with stride 1 over [[1, 1, 0], [1, 0, 1]]: each window's
    // gradient goes to its first element equal to the maximum, as in JAX.
    let mut g = Graph::new("ties");
    let x = g.add_const(
        "x",
        Arc::new(Tensor::new(vec![1, 1, 2, 3], Data::F64(vec![1.0, 1.0, 0.0, 1.0, 0.0, 1.0])).unwrap()),
    );
    let y = node(
        &mut g,
        Op::Pool(pool(PoolKind::Max, &[2, 2], &[1, 1], &[1, 1], &[0; 4], false)),
        &[x],
    );
    let s = node(
        &mut g,
        Op::Reduce {
            kind: ReduceKind::Sum,
            axes: vec![0, 1, 2, 3],
        },
        &[y],
    );
    let grad = gradients(&g, s, &[x]).unwrap();
    let mut gg = grad.graph;
    gg.outputs.push(Output {
        name: "dx".into(),
        node: grad.grads[0],
    });
    let dx = values(&interp::run(&gg, &[]).unwrap()[0]);
    // Window 0 covers (0,0), (0,1), (1,0), (1,1): its first maximum is (0,0). Window 1 covers
    // (0,1), (0,2), (1,1), (1,2): its first maximum is (0,1).
    assert_eq!(dx, vec![1.0, 1.0, 0.0, 0.0, 0.0, 0.0]);
}

#[test]
fn conv_rule() {
    // Strides, dilations, asymmetric padding, groups, depthwise, 1-D and 3-D.
    let two = [ANY, ANY];
    run(
        "conv",
        vec![
            case(
                Op::Conv(conv(&[1, 1], &[1, 1], &[0; 4], 1)),
                &[&[1, 2, 5, 5], &[3, 2, 3, 3]],
                &two,
            ),
            case(
                Op::Conv(conv(&[2, 1], &[1, 2], &[1, 0, 2, 1], 1)),
                &[&[2, 2, 6, 7], &[3, 2, 3, 2]],
                &two,
            ),
            case(
                Op::Conv(conv(&[2, 2], &[1, 1], &[1; 4], 2)),
                &[&[1, 4, 7, 6], &[6, 2, 3, 3]],
                &two,
            ),
            case(
                Op::Conv(conv(&[1, 2], &[2, 1], &[2, 1, 0, 1], 3)),
                &[&[2, 3, 5, 5], &[3, 1, 3, 3]],
                &two,
            ),
            case(Op::Conv(conv(&[3], &[2], &[1, 2], 1)), &[&[2, 2, 9], &[2, 2, 2]], &two),
            case(
                Op::Conv(conv(&[1, 2, 1], &[1, 1, 2], &[0, 1, 0, 1, 0, 1], 1)),
                &[&[1, 2, 4, 3, 4], &[2, 2, 2, 2, 2]],
                &two,
            ),
        ],
    );
}

#[test]
fn conv_transpose_rule() {
    // Strides, dilations, padding, output padding, groups, 1-D.
    let two = [ANY, ANY];
    let transposed = |conv: ConvAttrs, output_padding: &[usize]| Op::ConvTranspose {
        conv,
        output_padding: output_padding.to_vec(),
    };
    run(
        "conv_transpose",
        vec![
            case(
                transposed(conv(&[1, 1], &[1, 1], &[0; 4], 1), &[0, 0]),
                &[&[1, 2, 3, 3], &[2, 3, 3, 3]],
                &two,
            ),
            case(
                transposed(conv(&[2, 3], &[1, 2], &[1, 0, 0, 1], 1), &[1, 2]),
                &[&[2, 2, 3, 4], &[2, 2, 3, 2]],
                &two,
            ),
            case(
                transposed(conv(&[2, 1], &[2, 1], &[1, 1, 0, 1], 2), &[1, 0]),
                &[&[1, 4, 3, 3], &[4, 1, 2, 3]],
                &two,
            ),
            case(
                transposed(conv(&[2], &[1], &[1, 1], 1), &[1]),
                &[&[2, 2, 4], &[2, 3, 3]],
                &two,
            ),
        ],
    );
}

#[test]
fn avg_pool_rule() {
    // Padding, dilation, ceil mode, count_include_pad, 1-D.
    let avg = |include: bool| PoolKind::Avg {
        count_include_pad: include,
    };
    let p = |attrs: PoolAttrs, x: &[usize]| case(Op::Pool(attrs), &[x], &[ANY]);
    run(
        "avg_pool",
        vec![
            p(
                pool(avg(false), &[2, 2], &[2, 2], &[1, 1], &[0; 4], false),
                &[1, 2, 6, 6],
            ),
            p(
                pool(avg(true), &[3, 2], &[2, 1], &[1, 2], &[1, 0, 1, 1], false),
                &[2, 3, 7, 5],
            ),
            p(
                pool(avg(false), &[3, 3], &[2, 2], &[1, 1], &[1; 4], true),
                &[1, 2, 7, 7],
            ),
            p(
                pool(avg(true), &[2, 3], &[3, 2], &[2, 1], &[0, 1, 1, 0], true),
                &[1, 1, 6, 5],
            ),
            p(pool(avg(false), &[4], &[3], &[1], &[2, 1], true), &[2, 2, 9]),
            p(
                pool(avg(true), &[2, 2], &[3, 4], &[1, 1], &[1, 0, 0, 1], false),
                &[1, 2, 8, 9],
            ),
        ],
    );
}

#[test]
fn max_pool_rule() {
    // Overlapping windows, gaps between windows, padding, dilation, ceil mode, 1-D.
    let p = |attrs: PoolAttrs, x: &[usize]| case(Op::Pool(attrs), &[x], &[ANY]);
    let max = PoolKind::Max;
    run(
        "max_pool",
        vec![
            p(pool(max, &[2, 2], &[2, 2], &[1, 1], &[0; 4], false), &[1, 2, 6, 6]),
            p(
                pool(max, &[2, 3], &[3, 4], &[1, 1], &[0, 1, 1, 0], false),
                &[1, 2, 8, 9],
            ),
            p(pool(max, &[3, 3], &[2, 1], &[1, 1], &[1; 4], false), &[2, 2, 7, 5]),
            p(pool(max, &[3, 2], &[2, 2], &[2, 1], &[1, 0, 0, 1], true), &[1, 3, 7, 6]),
            p(pool(max, &[4], &[3], &[1], &[2, 1], true), &[2, 2, 9]),
        ],
    );
}

/// A cast between float types passes the gradient back in its operand's type:
/// `sum(sin(cast<f64>(x)))` for an f32 `x` has the gradient `cos(x)`, in f32. (Finite
/// differences run in f64, where a float cast is the identity, so this rule is checked here.)
#[test]
fn cast_rule_passes_the_gradient_back_in_the_operand_type() {
    let mut g = Graph::new("cast");
    let x = g.add_input("x", TensorType::new(DType::F32, vec![5]).unwrap());
    let wide = node(&mut g, Op::Cast { to: DType::F64 }, &[x]);
    let s = node(&mut g, Op::Unary(UnaryOp::Sin), &[wide]);
    let sum = Op::Reduce {
        kind: ReduceKind::Sum,
        axes: vec![0],
    };
    let loss = node(&mut g, sum, &[s]);
    g.outputs.push(Output {
        name: "loss".into(),
        node: loss,
    });
    let grad = gradients(&g, loss, &[x]).unwrap();
    let mut gg = grad.graph.clone();
    gg.outputs.push(Output {
        name: "dx".into(),
        node: grad.grads[0],
    });
    let points = [-1.5f32, -0.25, 0.0, 0.75, 2.0];
    let out = interp::run(&gg, &[Tensor::from_f32(vec![5], points.to_vec()).unwrap()]).unwrap();
    let want: Vec<f32> = points.iter().map(|&v| (v as f64).cos() as f32).collect();
    assert_eq!(out[1].dtype(), DType::F32);
    assert!(out[1].bit_eq(&Tensor::from_f32(vec![5], want).unwrap()), "{:?}", out[1]);
}
