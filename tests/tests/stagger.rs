//! Staggered transfers: where a double buffer's tiles hold a tile loop of two tiles or more,
//! CPE `c` prefetches the next box of a read buffer it fetches alone, and puts the
//! double-buffered target's box of the tile before, at that loop's tile `c mod n` (the last
//! tile's put at the kernel's end). A 1x1 convolution with a residual sum, its residual and
//! result double-buffered over the row tiles around the channel tiles, gives the
//! interpreter's results through the C and the JIT, which agree bit for bit and on every
//! counter; its DMA is what the walk counts; and the C type-checks against the SDK.

use swflow_frontend::interp;
use swflow_frontend::ir::{BinaryOp, ConvAttrs, DType, Graph, Op, Output, TensorType, UnaryOp};
use swflow_frontend::tolerance::{compare, Comparison};
use swflow_scheduler::loops::Program;
use swflow_scheduler::schedule::partition::Partition;
use swflow_scheduler::schedule::{planned, verify_schedule};
use swflow_scheduler::target::Target;
use swflow_tests::{run_both_engines, seeded_inputs};

/// `z = relu(conv(x, w) + r)`: a 1x1 convolution of `x[1, 32, 16, 16]` by `w[128, 32, 1, 1]`,
/// plus `r[1, 128, 16, 16]`.
fn residual_conv() -> Graph {
    let mut g = Graph::new("stagger");
    let ty = |shape: Vec<usize>| TensorType::new(DType::F32, shape).unwrap();
    let x = g.add_input("x", ty(vec![1, 32, 16, 16]));
    let w = g.add_input("w", ty(vec![128, 32, 1, 1]));
    let r = g.add_input("r", ty(vec![1, 128, 16, 16]));
    let attrs = ConvAttrs {
        strides: vec![1, 1],
        dilations: vec![1, 1],
        pads: vec![0; 4],
        groups: 1,
    };
    let y = g.add_node("y", Op::Conv(attrs), vec![x, w], None).unwrap();
    let s = g.add_node("s", Op::Binary(BinaryOp::Add), vec![y, r], None).unwrap();
    let z = g.add_node("z", Op::Unary(UnaryOp::Relu), vec![s], None).unwrap();
    g.outputs.push(Output {
        name: "z".into(),
        node: z,
    });
    g
}

/// The program of `g` with its one fused kernel on a 64 x 1 grid of output channels and rows,
/// two channels a CPE, in row tiles of 4 (four tiles) each reducing over channel tiles of 8
/// (four tiles), placed by the scheduler: the result and the residual double-buffered over the
/// row tiles, around the channel tiles.
fn scheduled(g: &Graph, target: &Target) -> Program {
    let mut p = swflow_scheduler::pipeline::compile(g, target).unwrap();
    assert_eq!(p.kernels.len(), 1, "{}", swflow_scheduler::loops::print_program(&p));
    let k = &p.kernels[0];
    let loop_of = |name: &str| k.loops.iter().position(|l| l.name == name).unwrap();
    let part = Partition {
        loops: vec![loop_of("m"), loop_of("o0")],
        points: 128 * 16,
        chunk: 2 * 16,
        grid: vec![64, 1],
    };
    let mut tiles = k.schedule.as_ref().unwrap().tiles.clone();
    for (name, t) in [("m", 2), ("o0", 4), ("o1", 16), ("c", 8)] {
        tiles[loop_of(name)] = t;
    }
    let s = planned(k, &p, &part, tiles, target);
    verify_schedule(k, &p, &s, target).unwrap();
    let text = s.describe(k, &p);
    assert_eq!(s.order, [loop_of("o0"), loop_of("c")], "{text}");
    // The result and the residual: accesses 0 and 3 (z, then x, w and r).
    for (i, b) in s.buffers.iter().enumerate().filter(|(i, _)| [0, 3].contains(i)) {
        assert!(b.double && b.depth == 1 && b.shared.is_none(), "{i}: {text}");
    }
    p.kernels[0].schedule = Some(s);
    p
}

#[test]
fn staggered_transfers_give_the_interpreters_results_through_both_engines() {
    let g = residual_conv();
    let inputs = seeded_inputs(&g, 3);
    let want = interp::run(&g, &inputs).unwrap();
    for target in [Target::sw26010(), Target::sw26010pro()] {
        let label = target.name.clone();
        let p = scheduled(&g, &target);
        let both = run_both_engines(&p, &g, &inputs, &target, "stagger", &label);
        compare(&both.output, &want[0], Comparison::Tolerance).unwrap_or_else(|m| panic!("{label}: {}", m.message));
        let slave = both
            .generated
            .files
            .iter()
            .find(|(path, _)| path.starts_with("slave/k_"))
            .map(|(_, bytes)| String::from_utf8_lossy(bytes).into_owned())
            .unwrap();
        // The residual's prefetch and the result's deferred put, each at the channel tile
        // `cpe % 4` of four.
        assert_eq!(slave.matches("cpe % 4 * 8").count(), 2, "{label}:\n{slave}");
    }
}
