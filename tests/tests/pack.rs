//! Packed constants: a 1x1 convolution whose weight tiles are cut along the input channels
//! has its weights reordered so that each tile is one block, its channel loop split in two.
//! The packed program gives the bits of the unpacked one (the same folds in the same order),
//! through the C and the JIT, which agree on every counter; both equal the interpreter within
//! tolerance; and the C type-checks against the SDK.

use std::sync::Arc;

use swflow_frontend::interp;
use swflow_frontend::ir::{ConvAttrs, DType, Graph, Op, Output, TensorType, UnaryOp};
use swflow_frontend::random::random_tensor;
use swflow_frontend::tolerance::{compare, Comparison};
use swflow_scheduler::loops::{Program, TensorKind};
use swflow_scheduler::schedule::pack::pack_constants;
use swflow_scheduler::schedule::partition::Partition;
use swflow_scheduler::schedule::{planned, verify_schedule};
use swflow_scheduler::target::Target;
use swflow_tests::{run_both_engines, seeded_inputs};

/// `z = relu(conv(x, w))`: a 1x1 convolution of `x[1, 16, 16, 16]` by the constant
/// `w[64, 16, 1, 1]` (seeded, not a splat).
fn conv() -> Graph {
    let mut g = Graph::new("pack");
    let ty = |shape: Vec<usize>| TensorType::new(DType::F32, shape).unwrap();
    let x = g.add_input("x", ty(vec![1, 16, 16, 16]));
    let w = g.add_const("w", Arc::new(random_tensor(&ty(vec![64, 16, 1, 1]), 7, 0)));
    let attrs = ConvAttrs {
        strides: vec![1, 1],
        dilations: vec![1, 1],
        pads: vec![0; 4],
        groups: 1,
    };
    let y = g.add_node("y", Op::Conv(attrs), vec![x, w], None).unwrap();
    let z = g.add_node("z", Op::Unary(UnaryOp::Relu), vec![y], None).unwrap();
    g.outputs.push(Output {
        name: "z".into(),
        node: z,
    });
    g
}

/// The program of `g` with its kernel on a 16 x 4 grid of output channels and rows, in tiles
/// of 4 channels, 4 rows and 8 of the 16 input channels: each weight tile is 4 blocks of 8.
fn scheduled(g: &Graph, target: &Target) -> Program {
    let mut p = swflow_scheduler::pipeline::compile(g, target).unwrap();
    assert_eq!(p.kernels.len(), 1, "{}", swflow_scheduler::loops::print_program(&p));
    let k = &p.kernels[0];
    let names: Vec<&str> = k.loops.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(
        names,
        ["n", "m", "o0", "o1", "c", "k0", "k1"],
        "the pipeline did not pack it"
    );
    let loop_of = |name: &str| names.iter().position(|&l| l == name).unwrap();
    let part = Partition {
        loops: vec![loop_of("m"), loop_of("o0")],
        points: 64 * 16,
        chunk: 4 * 4,
        grid: vec![16, 4],
    };
    let mut tiles = k.schedule.as_ref().unwrap().tiles.clone();
    for (name, t) in [("m", 4), ("o0", 4), ("o1", 16), ("c", 8)] {
        tiles[loop_of(name)] = t;
    }
    let s = planned(k, &p, &part, tiles, target);
    verify_schedule(k, &p, &s, target).unwrap();
    p.kernels[0].schedule = Some(s);
    p
}

#[test]
fn packed_weights_give_the_unpacked_bits_through_both_engines() {
    let g = conv();
    let inputs = seeded_inputs(&g, 5);
    let want = interp::run(&g, &inputs).unwrap();
    for target in [Target::sw26010(), Target::sw26010pro()] {
        let label = target.name.clone();
        let plain = scheduled(&g, &target);
        let mut packed = plain.clone();
        pack_constants(&mut packed, &target);
        let k = &packed.kernels[0];
        let names: Vec<&str> = k.loops.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["n", "m", "o0", "o1", "c_o", "c", "k0", "k1"], "{label}");
        let w = packed.tensor(k.operands[2]);
        assert_eq!(w.name, "w.packed", "{label}");
        assert_eq!(w.ty.shape, [2, 64, 8, 1, 1], "{label}");
        assert!(matches!(w.kind, TensorKind::Const(_)), "{label}");
        let s = k.schedule.as_ref().unwrap();
        assert_eq!(s.tiles, [1, 4, 4, 16, 1, 8, 1, 1], "{label}");
        let before = run_both_engines(&plain, &g, &inputs, &target, "pack-plain", &label);
        let after = run_both_engines(&packed, &g, &inputs, &target, "pack", &label);
        assert!(
            after.output.bit_eq(&before.output),
            "{label}: packing changed the results"
        );
        compare(&after.output, &want[0], Comparison::Tolerance).unwrap_or_else(|m| panic!("{label}: {}", m.message));
        // The same bytes move, in fewer blocks.
        for key in ["get_bytes", "put_bytes", "flops"] {
            assert_eq!(after.row[key], before.row[key], "{label}: {key}");
        }
    }
}
