//! Backward passes run like any program: the gradient graph of a small network, compiled for
//! both targets, gives the interpreter's gradients through the scheduled loop-IR executor,
//! the JIT and the generated C, within the project tolerance, bit-identically from run to run,
//! and with every CPE writing its own ranges (the emulator's race check runs on every
//! kernel of the JIT and C runs).

use std::sync::Arc;

use swflow_codegen::jit;
use swflow_frontend::autodiff::gradients;
use swflow_frontend::interp;
use swflow_frontend::ir::{
    BinaryOp, ConvAttrs, DType, Graph, NodeId, Op, Output, PoolAttrs, PoolKind, ReduceKind, TensorType, UnaryOp,
};
use swflow_frontend::random::random_tensor;
use swflow_frontend::tolerance::{compare, Comparison};
use swflow_scheduler::exec::cpe::run_program;
use swflow_scheduler::target::Target;
use swflow_tests::cbuild::{compile, make, run_model, scratch};
use swflow_tests::seeded_inputs;

fn node(g: &mut Graph, name: &str, op: Op, inputs: &[NodeId]) -> NodeId {
    g.add_node(name, op, inputs.to_vec(), None).unwrap()
}

fn weight(g: &mut Graph, name: &str, shape: &[usize], seed: u64) -> NodeId {
    let ty = TensorType::new(DType::F32, shape.to_vec()).unwrap();
    let t = random_tensor(&ty, seed, 0);
    // Centred and scaled, so activations neither vanish nor saturate.
    let v: Vec<f32> = match t.data() {
        swflow_frontend::ir::Data::F32(v) => v.iter().map(|x| (x - 0.5) * 0.6).collect(),
        _ => unreachable!(),
    };
    let t = swflow_frontend::ir::Tensor::from_f32(shape.to_vec(), v).unwrap();
    g.add_const(name, Arc::new(t))
}

/// A small convolutional classifier and its squared-error loss, differentiated with respect
/// to every weight; the outputs are the loss and the gradients.
fn training_graph() -> Graph {
    let mut g = Graph::new("small_cnn");
    let x = g.add_input("x", TensorType::new(DType::F32, vec![2, 2, 8, 8]).unwrap());
    let target = g.add_input("target", TensorType::new(DType::F32, vec![2, 10]).unwrap());
    let w1 = weight(&mut g, "w1", &[4, 2, 3, 3], 1);
    let b1 = weight(&mut g, "b1", &[4, 1, 1], 2);
    let w2 = weight(&mut g, "w2", &[4, 2, 3, 3], 3);
    let w3 = weight(&mut g, "w3", &[64, 10], 4);
    let b3 = weight(&mut g, "b3", &[10], 5);
    let conv = |pads: usize, stride: usize, groups: usize| ConvAttrs {
        strides: vec![stride; 2],
        dilations: vec![1, 1],
        pads: vec![pads; 4],
        groups,
    };
    let c1 = node(&mut g, "c1", Op::Conv(conv(1, 1, 1)), &[x, w1]);
    let a1 = node(&mut g, "a1", Op::Binary(BinaryOp::Add), &[c1, b1]);
    let r1 = node(&mut g, "r1", Op::Unary(UnaryOp::Relu), &[a1]);
    let max = PoolAttrs {
        kind: PoolKind::Max,
        kernel: vec![3, 3],
        strides: vec![2, 2],
        dilations: vec![1, 1],
        pads: vec![1, 1, 1, 1],
        ceil_mode: false,
    };
    let m1 = node(&mut g, "m1", Op::Pool(max), &[r1]);
    let c2 = node(&mut g, "c2", Op::Conv(conv(1, 1, 2)), &[m1, w2]);
    let t2 = node(&mut g, "t2", Op::Unary(UnaryOp::Tanh), &[c2]);
    let pool = PoolAttrs {
        kind: PoolKind::Avg {
            count_include_pad: false,
        },
        kernel: vec![2, 2],
        strides: vec![1, 1],
        dilations: vec![1, 1],
        pads: vec![0, 0, 1, 1],
        ceil_mode: false,
    };
    let p2 = node(&mut g, "p2", Op::Pool(pool), &[t2]);
    let f = node(&mut g, "f", Op::Reshape { shape: vec![2, 64] }, &[p2]);
    let m = node(&mut g, "m", Op::MatMul, &[f, w3]);
    let y = node(&mut g, "y", Op::Binary(BinaryOp::Add), &[m, b3]);
    let d = node(&mut g, "d", Op::Binary(BinaryOp::Sub), &[y, target]);
    let sq = node(&mut g, "sq", Op::Binary(BinaryOp::Mul), &[d, d]);
    let loss = node(
        &mut g,
        "loss",
        Op::Reduce {
            kind: ReduceKind::Sum,
            axes: vec![0, 1],
        },
        &[sq],
    );
    let wrt = [w1, b1, w2, w3, b3];
    let grad = gradients(&g, loss, &wrt).unwrap();
    let mut out = grad.graph;
    out.outputs = vec![Output {
        name: "loss".into(),
        node: loss,
    }];
    for (&w, &gw) in wrt.iter().zip(&grad.grads) {
        let name = format!("grad_{}", out.node(w).name);
        out.outputs.push(Output { name, node: gw });
    }
    out
}

#[test]
fn gradients_agree_through_every_engine() {
    let g = training_graph();
    swflow_frontend::ir::verify(&g).unwrap();
    let inputs = seeded_inputs(&g, 3);
    let want = interp::run(&g, &inputs).unwrap();
    let check = |engine: &str, target: &Target, got: &[swflow_frontend::ir::Tensor]| {
        for ((o, a), b) in g.outputs.iter().zip(got).zip(&want) {
            compare(a, b, Comparison::Tolerance)
                .unwrap_or_else(|m| panic!("{} through {engine} on {}: {}", o.name, target.name, m.message));
        }
    };
    for target in [Target::sw26010(), Target::sw26010pro()] {
        let p = swflow_scheduler::pipeline::compile(&g, &target).unwrap();
        let (loops, _) = run_program(&p, &inputs, &target).unwrap();
        check("the loop-IR executor", &target, &loops);
        let compiled = jit::compile(&p, &target).unwrap();
        let first = compiled.run(&p, &target, &inputs).unwrap();
        check("the JIT", &target, &first.outputs);
        let second = compiled.run(&p, &target, &inputs).unwrap();
        for (a, b) in first.outputs.iter().zip(&second.outputs) {
            compare(a, b, Comparison::Exact).expect("gradients are identical from run to run");
        }
    }
    let target = Target::sw26010();
    let dir = scratch("gradients", "small_cnn");
    compile(&g, &target, &dir).unwrap();
    make(&dir, &[]).unwrap();
    let c = run_model(&dir, &g, &inputs, &[]).unwrap();
    check("the generated C", &target, &c);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_network_gradients_are_not_trivial() {
    // Every weight's gradient has non-zero elements: the comparison above is not of zeros.
    let g = training_graph();
    let got = interp::run(&g, &seeded_inputs(&g, 3)).unwrap();
    for (o, t) in g.outputs.iter().zip(&got).skip(1) {
        let nonzero = t.to_f64_vec().iter().filter(|v| v.abs() > 1e-6).count();
        assert!(
            nonzero * 2 > t.numel(),
            "{}: {nonzero} of {} elements non-zero",
            o.name,
            t.numel()
        );
    }
}
