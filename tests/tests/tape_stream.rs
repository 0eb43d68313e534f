//! Streamed tape through the generated C and the JIT: the gradient of multi-layer perceptrons
//! whose hidden products keep their pre-activations for the backward pass alone, so that each
//! pre-activation streams through the tape arena from the forward kernel to the one backward
//! kernel that reads it. Small arenas cut it into many layers per CPE, which the reader pops
//! walking its boxes backwards; the emulator checks that every CPE's layers come back in the
//! reverse order they went out (a violation stops the run).

use swflow_frontend::autodiff::gradient_program;
use swflow_frontend::interp;
use swflow_frontend::ir::{BinaryOp, DType, Graph, Op, Output, ReduceKind, TensorType, UnaryOp};
use swflow_frontend::tolerance::{compare, Comparison};
use swflow_scheduler::exec::cpe::kernel_stats;
use swflow_scheduler::loops::{LoopKind, Program};
use swflow_scheduler::pipeline::{compile_with, Fuse, Options};
use swflow_scheduler::tape::{Stream, TapeMode, TapeOptions};
use swflow_scheduler::target::Target;
use swflow_tests::cbuild::{emulator_lib, make, run_model, run_with_stats, scratch};
use swflow_tests::{seeded_inputs, with_tape};

/// A multi-layer perceptron on `dims[0]` inputs of a batch of `batch`, with ReLU after every
/// hidden layer of `dims[1..]` and one output, summed: the loss, and its gradients with
/// respect to every weight and bias. Each hidden layer's product keeps its pre-activation for
/// the backward pass alone: every ReLU output is stored, so that the pre-activation's one
/// backward reader is the kernel of its ReLU's gradient.
fn mlp(batch: usize, dims: &[usize]) -> Graph {
    let mut g = Graph::new("mlp");
    let ty = |shape: Vec<usize>| TensorType::new(DType::F32, shape).unwrap();
    let mut h = g.add_input("x", ty(vec![batch, dims[0]]));
    let mut wrt = Vec::new();
    let widths: Vec<usize> = dims.iter().copied().chain([1]).collect();
    for (i, pair) in widths.windows(2).enumerate() {
        let w = g.add_input(format!("w{i}"), ty(vec![pair[0], pair[1]]));
        let b = g.add_input(format!("b{i}"), ty(vec![pair[1]]));
        wrt.extend([w, b]);
        let mm = g.add_node(format!("mm{i}"), Op::MatMul, vec![h, w], None).unwrap();
        h = g
            .add_node(format!("add{i}"), Op::Binary(BinaryOp::Add), vec![mm, b], None)
            .unwrap();
        if i + 2 < widths.len() {
            h = g
                .add_node(format!("relu{i}"), Op::Unary(UnaryOp::Relu), vec![h], None)
                .unwrap();
        }
    }
    let sum = Op::Reduce {
        kind: ReduceKind::Sum,
        axes: vec![0, 1],
    };
    let loss = g.add_node("loss", sum, vec![h], None).unwrap();
    g.outputs.push(Output {
        name: "loss".into(),
        node: loss,
    });
    gradient_program(&g, &wrt, &[]).unwrap().storing_all().graph
}

/// A network of one hidden layer of 160 on 200 inputs, batch 96.
fn two_layers() -> Graph {
    mlp(96, &[200, 160])
}

fn streamed(g: &Graph, target: &Target, arena_bytes: usize) -> Program {
    let tape = TapeOptions {
        loss: "loss".into(),
        mode: TapeMode::Stream,
        arena_bytes: Some(arena_bytes),
        travel: Default::default(),
    };
    let options = Options {
        fuse: Fuse::Default,
        tape: Some(tape),
    };
    compile_with(g, target, options).unwrap()
}

/// Checks that the emulator's gets, puts, their bytes and the direct accesses of every
/// streaming kernel in `report` (a run's JSON report) are those the walk counts.
fn counts_are_the_walks(p: &Program, target: &Target, report: &serde_json::Value, what: &str) {
    let plan = p.tape.as_ref().unwrap();
    let names = swflow_codegen::kernel_function_names(p);
    for k in plan.streams.iter().flat_map(|x| [x.producer, x.reader]) {
        let kernel = &p.kernels[k];
        let walked = kernel_stats(p, kernel, kernel.schedule.as_ref().unwrap(), target).traffic;
        let row = report["kernels"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["kernel"] == names[k].as_str())
            .unwrap_or_else(|| panic!("{what}: no counters of {}", names[k]));
        let count = |key: &str| row[key].as_u64().unwrap() as usize;
        assert_eq!(
            (
                count("gets"),
                count("puts"),
                count("get_bytes"),
                count("put_bytes"),
                count("direct_reads") + count("direct_writes")
            ),
            (
                walked.gets,
                walked.puts,
                walked.get_bytes,
                walked.put_bytes,
                walked.direct_elements
            ),
            "{what}: {}",
            kernel.name
        );
    }
}

#[test]
fn a_stream_of_many_layers_through_c_and_the_jit() {
    let g = two_layers();
    let inputs = seeded_inputs(&g, 3);
    let want = interp::run(&g, &inputs).unwrap();
    let lib = emulator_lib().unwrap();
    for target in [Target::sw26010(), Target::sw26010pro()] {
        let p = with_tape(&g, &target, TapeMode::PerTensor).unwrap();
        let per_tensor = swflow_codegen::jit::compile(&p, &target)
            .unwrap()
            .run(&p, &target, &inputs)
            .unwrap();
        for arena in [256, 1024] {
            let what = format!("{} with an arena of {arena} B", target.name);
            let p = streamed(&g, &target, arena);
            let plan = p.tape.as_ref().unwrap();
            let [x] = plan.streams.as_slice() else {
                panic!("{what}: one tensor streams: {}", plan.describe(&p))
            };
            let layers = *x.layers.iter().max().unwrap();
            assert!(layers > 1, "{what}: {layers} layer per CPE");
            let reader = p.kernels[x.reader].schedule.as_ref().unwrap();
            assert!(!reader.order.is_empty(), "{what}: the reader walks several tiles");

            let run = swflow_codegen::jit::compile(&p, &target)
                .unwrap()
                .run(&p, &target, &inputs)
                .unwrap();
            for ((o, got), (base, w)) in g
                .outputs
                .iter()
                .zip(&run.outputs)
                .zip(per_tensor.outputs.iter().zip(&want))
            {
                compare(got, base, Comparison::Exact).unwrap_or_else(|m| panic!("{what}: {}: {}", o.name, m.message));
                compare(got, w, Comparison::Model).unwrap_or_else(|m| panic!("{what}: {}: {}", o.name, m.message));
            }

            let dir = scratch("tape-stream", &format!("{}-{arena}", target.name));
            if dir.exists() {
                std::fs::remove_dir_all(&dir).unwrap();
            }
            swflow_codegen::generate(&p, &target, lib.to_str().unwrap())
                .unwrap()
                .write_to(&dir)
                .unwrap();
            make(&dir, &[]).unwrap();
            let c_outputs = run_model(&dir, &g, &inputs, &[]).unwrap();
            let c_stats = run_with_stats(&dir).unwrap();
            std::fs::remove_dir_all(&dir).unwrap();
            for ((o, c), j) in g.outputs.iter().zip(&c_outputs).zip(&run.outputs) {
                compare(c, j, Comparison::Exact).unwrap_or_else(|m| panic!("{what}: C {}: {}", o.name, m.message));
            }
            let j = serde_json::to_value(&run.report).unwrap();
            assert_eq!(j["kernels"], c_stats["kernels"], "{what}: per-kernel counters");

            // The streaming kernels' transfers and direct accesses are those the walk counts:
            // one transfer per layer, and the stack's entries.
            counts_are_the_walks(&p, &target, &j, &what);
            let pushed = x.layers.iter().sum::<usize>();
            let tape_puts: u64 = j["kernels"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["tape_puts"].as_u64().unwrap())
                .sum();
            assert!(
                tape_puts as usize >= pushed,
                "{what}: {tape_puts} tape puts, {pushed} layers"
            );
        }
    }
}

/// The arena comes out of the streaming kernels' LDM: their buffers and the arena fit the
/// target together. A stream's arena is what it needs, up to the limit given: halves that hold
/// a CPE's whole share. A limit too small for one element of a box is refused for streaming,
/// with records taking its place where they can, and so is a stream that would need the
/// whole LDM.
#[test]
fn the_arena_is_taken_from_the_streaming_kernels_ldm() {
    let g = two_layers();
    for target in [Target::sw26010(), Target::sw26010pro()] {
        let limit = 8192;
        let p = streamed(&g, &target, limit);
        let plan = p.tape.as_ref().unwrap();
        let [x] = plan.streams.as_slice() else {
            panic!("one tensor streams")
        };
        assert!(x.arena_bytes <= limit);
        for k in [x.producer, x.reader] {
            let kernel = &p.kernels[k];
            let ldm = kernel.schedule.as_ref().unwrap().ldm_bytes(kernel, &target);
            let arena = plan.arena_of(k);
            assert!(
                ldm + arena <= target.ldm_budget(),
                "{}: {ldm} B of buffers beside a {arena} B arena",
                kernel.name
            );
        }
        let p = streamed(&g, &target, 4);
        let plan = p.tape.as_ref().unwrap();
        assert!(plan.streams.is_empty(), "{}", plan.describe(&p));
        assert_eq!(plan.records.len(), 1, "{}", plan.describe(&p));
        assert!(
            plan.describe(&p)
                .contains("not streamed: the arena cannot hold one box"),
            "{}",
            plan.describe(&p)
        );
        // A limit as large as the LDM: the stream takes halves of one CPE's share of the
        // 96x160 product (the most that a CPE's blocks of it hold under its producer's
        // schedule), in one layer.
        let p = streamed(&g, &target, target.ldm_bytes);
        let plan = p.tape.as_ref().unwrap();
        let [x] = plan.streams.as_slice() else {
            panic!("one tensor streams: {}", plan.describe(&p))
        };
        let producer = &p.kernels[x.producer];
        let schedule = producer.schedule.as_ref().unwrap();
        let most = (0..target.cpes)
            .map(|cpe| {
                let segments = schedule.segments(cpe, &producer.extents());
                let points = |len: &[usize]| -> usize {
                    (0..len.len())
                        .filter(|&l| producer.loops[l].kind == LoopKind::Parallel)
                        .map(|l| len[l])
                        .product()
                };
                segments.iter().map(|seg| points(&seg.len)).sum::<usize>()
            })
            .max()
            .unwrap();
        let share = x.elements.iter().max().unwrap() * 4;
        assert_eq!(share, 4 * most, "{share} bytes per CPE");
        assert!(share < 96 * 160 * 4 / 8, "{share} bytes per CPE");
        assert_eq!(
            x.arena_bytes,
            2 * share.next_multiple_of(swflow_scheduler::schedule::LDM_BUFFER_ALIGN)
        );
        assert_eq!(x.layers.iter().max(), Some(&1));
        // A product whose share of one CPE would need the whole LDM does not stream.
        let large = mlp(target.ldm_bytes / 4, &[200, 160]);
        let p = streamed(&large, &target, target.ldm_bytes);
        let plan = p.tape.as_ref().unwrap();
        assert!(plan.streams.is_empty(), "{}", plan.describe(&p));
        assert!(
            plan.describe(&p).contains("the arena takes all"),
            "{}",
            plan.describe(&p)
        );
    }
}

/// Networks of random sizes, with arenas from a few elements to many layers' worth: the JIT's
/// loss and gradients are those of the per-tensor tape, bit for bit, whatever streams (the
/// emulator checks every stack), and the streaming kernels' counters are the walk's. Nested
/// streams (one per hidden layer) occur, and so do producers split into a grid of blocks,
/// whose readers walk their block's tiles backwards.
#[test]
fn random_networks_stream_bit_identically() {
    let mut state = 0x5eed_u64;
    let mut next = |n: usize| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) as usize % n
    };
    let (mut layered, mut nested, mut grids) = (0, 0, 0);
    for case in 0..16u64 {
        let target = if case % 2 == 0 {
            Target::sw26010()
        } else {
            Target::sw26010pro()
        };
        let batch = 1 + next(48);
        let dims: Vec<usize> = (0..2 + next(2)).map(|_| 4 + next(120)).collect();
        let arena = [64, 128, 512, 2048, 8192][next(5)];
        let what = format!(
            "case {case}: batch {batch}, layers {dims:?}, arena {arena} B on {}",
            target.name
        );
        let g = mlp(batch, &dims);
        let inputs = seeded_inputs(&g, case);
        let p = with_tape(&g, &target, TapeMode::PerTensor).unwrap();
        let want = swflow_codegen::jit::compile(&p, &target)
            .unwrap()
            .run(&p, &target, &inputs)
            .unwrap();
        let p = streamed(&g, &target, arena);
        let plan = p.tape.as_ref().unwrap();
        layered += usize::from(plan.streams.iter().any(|x| x.layers.iter().any(|&n| n > 1)));
        nested += usize::from(plan.streams.len() > 1);
        let grid = |x: &Stream| !p.kernels[x.producer].schedule.as_ref().unwrap().grid.is_empty();
        grids += usize::from(plan.streams.iter().any(grid));
        let got = swflow_codegen::jit::compile(&p, &target)
            .unwrap()
            .run(&p, &target, &inputs)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        for ((o, a), b) in g.outputs.iter().zip(&got.outputs).zip(&want.outputs) {
            compare(a, b, Comparison::Exact).unwrap_or_else(|m| panic!("{what}: {}: {}", o.name, m.message));
        }
        counts_are_the_walks(&p, &target, &serde_json::to_value(&got.report).unwrap(), &what);
    }
    assert!(
        layered > 0 && nested > 0 && grids > 0,
        "{layered} cases with several layers, {nested} with nested streams, {grids} with a producer split into a grid"
    );
}
