//! The tape of a gradient program: which kernels are forward, which tensors are saved and
//! which only the backward reads, and backward kernels mirroring the kernels that wrote what
//! they read, with the same gradients bit for bit in every mode.

use swflow_frontend::autodiff::gradient_program;
use swflow_frontend::ir::{BinaryOp, ConvAttrs, DType, Graph, Op, Output, ReduceKind, TensorType, UnaryOp};
use swflow_frontend::random::random_tensor;
use swflow_scheduler::exec::cpe::run_program;
use swflow_scheduler::loops::Program;
use swflow_scheduler::pipeline::{compile_with, Fuse, Options};
use swflow_scheduler::tape::{MirrorError, Pass, StreamError, TapeMode, TapeOptions, Travel};
use swflow_scheduler::target::Target;

/// `sum(relu(x @ w1 + b) @ w2)` and its gradients with respect to `w1`, `b` and `w2`, with
/// the ReLU's output stored rather than recomputed.
fn two_layers() -> Graph {
    let mut g = Graph::new("two_layers");
    let ty = |shape: Vec<usize>| TensorType::new(DType::F32, shape).unwrap();
    let x = g.add_input("x", ty(vec![96, 200]));
    let w1 = g.add_input("w1", ty(vec![200, 160]));
    let b = g.add_input("b", ty(vec![160]));
    let w2 = g.add_input("w2", ty(vec![160, 10]));
    let h = g.add_node("h", Op::MatMul, vec![x, w1], None).unwrap();
    let hb = g.add_node("hb", Op::Binary(BinaryOp::Add), vec![h, b], None).unwrap();
    let r = g.add_node("r", Op::Unary(UnaryOp::Relu), vec![hb], None).unwrap();
    let y = g.add_node("y", Op::MatMul, vec![r, w2], None).unwrap();
    let sum = Op::Reduce {
        kind: ReduceKind::Sum,
        axes: vec![0, 1],
    };
    let loss = g.add_node("loss", sum, vec![y], None).unwrap();
    g.outputs.push(Output {
        name: "loss".into(),
        node: loss,
    });
    gradient_program(&g, &[w1, b, w2], &[]).unwrap().storing_all().graph
}

fn compile(g: &Graph, mode: TapeMode) -> Program {
    compile_holding(g, mode, &[])
}

/// [`compile`], with tape-only tensors held to the ways of `travel`.
fn compile_holding(g: &Graph, mode: TapeMode, travel: &[(&str, Travel)]) -> Program {
    let tape = TapeOptions {
        loss: "loss".into(),
        mode,
        arena_bytes: None,
        travel: travel.iter().map(|&(n, t)| (n.to_string(), t)).collect(),
    };
    let options = Options {
        fuse: Fuse::Default,
        tape: Some(tape),
    };
    compile_with(g, &Target::sw26010(), options).unwrap()
}

#[test]
fn the_kept_pre_activation_is_tape_only_and_its_reader_mirrors_its_producer() {
    let g = two_layers();
    let p = compile(&g, TapeMode::Regions);
    let plan = p.tape.as_ref().unwrap();
    let name = |k: usize| p.kernels[k].name.as_str();
    // The forward pass is the first product (with its bias and ReLU, keeping the product),
    // the second product and the loss (split in two); everything after is backward.
    let forward: Vec<&str> = (0..p.kernels.len())
        .filter(|&k| plan.passes[k] == Pass::Forward)
        .map(name)
        .collect();
    assert_eq!(forward, ["h", "y", "loss.partials", "loss"]);
    let h = &p.kernels[0];
    assert!(h.stmt.keep.is_some(), "the first product keeps its value");
    // Saved: the ReLU output (read by the second product) and the product itself, which only
    // the backward reads.
    let saved: Vec<(&str, bool)> = plan
        .saved
        .iter()
        .map(|s| (p.tensor(s.tensor).name.as_str(), s.tape_only))
        .collect();
    assert_eq!(saved, [("r", false), ("h", true)]);
    let [m] = plan.mirrored.as_slice() else {
        panic!("one mirrored reader: {}", plan.describe(&p))
    };
    assert_eq!((name(m.producer), p.tensor(m.tensor).name.as_str()), ("h", "h"));
    // The reader takes the producer's partition and tiles on the tensor's dimensions.
    let (fs, bs) = (
        h.schedule.as_ref().unwrap(),
        p.kernels[m.reader].schedule.as_ref().unwrap(),
    );
    assert_eq!((fs.partition_points, fs.chunk), (bs.partition_points, bs.chunk));
    let dims = |k: &swflow_scheduler::loops::Kernel, s: &swflow_scheduler::schedule::Schedule| -> Vec<usize> {
        s.partition.iter().map(|&l| k.loops[l].extent).collect()
    };
    assert_eq!(dims(h, fs), dims(&p.kernels[m.reader], bs));
    let tiles = |k: &swflow_scheduler::loops::Kernel, s: &swflow_scheduler::schedule::Schedule| -> Vec<usize> {
        k.loops
            .iter()
            .zip(&s.tiles)
            .filter(|(l, _)| l.kind == swflow_scheduler::loops::LoopKind::Parallel)
            .map(|(_, &t)| t)
            .collect()
    };
    assert_eq!(tiles(h, fs), tiles(&p.kernels[m.reader], bs));
    // The product is stored as records; the analysis does not depend on the mode.
    let records: Vec<&str> = plan.records.iter().map(|r| p.tensor(r.tensor).name.as_str()).collect();
    assert_eq!(records, ["h"]);
    let per_tensor = compile(&g, TapeMode::PerTensor);
    let other = per_tensor.tape.as_ref().unwrap();
    assert_eq!((&other.passes, &other.saved), (&plan.passes, &plan.saved));
}

/// Runs gradient program `g` in every tape mode on the same inputs (random with `seed`) and
/// checks that every output has the same bits in each.
fn assert_bit_identical_in_every_mode(g: &Graph, seed: u64) {
    let target = Target::sw26010();
    let mut results = Vec::new();
    for mode in [TapeMode::PerTensor, TapeMode::Regions, TapeMode::Stream] {
        let p = compile(g, mode);
        let inputs: Vec<_> = p
            .inputs
            .iter()
            .enumerate()
            .map(|(i, &t)| random_tensor(&p.tensor(t).ty, seed, i))
            .collect();
        results.push(run_program(&p, &inputs, &target).unwrap().0);
    }
    for other in &results[1..] {
        for (a, b) in other.iter().zip(&results[0]) {
            assert!(a.bit_eq(b));
        }
    }
}

#[test]
fn gradients_are_bit_identical_in_every_mode() {
    assert_bit_identical_in_every_mode(&two_layers(), 9);
}

/// In `stream` mode the kept product streams: each CPE's layers hold what it writes, the
/// streamed tape's tensors are operands of the producer and the reader, and the memory plan
/// gives them storage instead of the product.
#[test]
fn the_kept_pre_activation_streams_through_the_arena() {
    let g = two_layers();
    let target = Target::sw26010();
    let p = compile(&g, TapeMode::Stream);
    let plan = p.tape.as_ref().unwrap();
    let [x] = plan.streams.as_slice() else {
        panic!("one stream: {}", plan.describe(&p))
    };
    assert_eq!(p.tensor(x.tensor).name, "h");
    assert!(plan.records.is_empty(), "{}", plan.describe(&p));
    assert_eq!(x.elements.iter().sum::<usize>(), 96 * 160);
    assert!(x.arena_bytes <= plan.arena_bytes);
    assert_eq!(x.half, x.arena_bytes / 2 / 4);
    for (c, (&n, &layers)) in x.elements.iter().zip(&x.layers).enumerate() {
        assert!(
            layers * x.half >= n && (n == 0) == (layers == 0),
            "CPE {c}: {n} elements in {layers} layers"
        );
    }
    let tape = plan.stream_tape.as_ref().unwrap();
    for k in [x.producer, x.reader] {
        assert!(p.kernels[k].operands.ends_with(&[tape.values, tape.stack]));
    }
    assert_eq!(plan.arena_of(x.producer), x.arena_bytes);
    assert_eq!(p.tensor(tape.values).ty.numel(), tape.share * target.cpes);
    assert_eq!(tape.share, *x.elements.iter().max().unwrap());
    assert_eq!(tape.slots, 2 + 1 + 2 * x.layers.iter().max().unwrap());
    assert_eq!(plan.storage_bytes(&p, x.tensor), 0);
    let memory = swflow_scheduler::memplan::plan(&p, &target);
    swflow_scheduler::memplan::check(&p, &memory).unwrap();
    assert!(memory.bytes[tape.values.index()] >= tape.share * target.cpes * 4);
}

/// A tape-only tensor held to records is not streamed, and one held whole is neither streamed
/// nor recorded: its reader keeps the schedule it has in `per-tensor` mode. The gradients
/// keep their bits.
#[test]
fn a_tensor_held_to_a_plainer_way_travels_so() {
    let g = two_layers();
    let target = Target::sw26010();
    let streamed = compile(&g, TapeMode::Stream);
    let reader = streamed.tape.as_ref().unwrap().streams[0].reader;
    let records = compile_holding(&g, TapeMode::Stream, &[("h", Travel::Records)]);
    let plan = records.tape.as_ref().unwrap();
    let h = plan.saved.iter().find(|s| s.tape_only).unwrap().tensor;
    assert_eq!(records.tensor(h).name, "h");
    assert_eq!(plan.travel_of(h), Travel::Records, "{}", plan.describe(&records));
    assert!(plan.streams.is_empty() && plan.stream_tape.is_none());
    assert_eq!(plan.not_streamed, [(h, StreamError::KeptInRecords)]);
    let whole = compile_holding(
        &g,
        TapeMode::Stream,
        &[("h", Travel::Whole), ("no such tensor", Travel::Whole)],
    );
    let plan = whole.tape.as_ref().unwrap();
    assert_eq!(plan.travel_of(h), Travel::Whole, "{}", plan.describe(&whole));
    assert!(plan.mirrored.is_empty() && plan.records.is_empty());
    assert_eq!(plan.fell_back.len(), 1);
    assert_eq!(
        (plan.fell_back[0].reader, &plan.fell_back[0].reason),
        (reader, &MirrorError::KeptWhole)
    );
    let per_tensor = compile(&g, TapeMode::PerTensor);
    assert_eq!(whole.kernels[reader].schedule, per_tensor.kernels[reader].schedule);
    // A held tensor keeps the mode's way where the mode goes no further: `regions` with
    // records allowed stores it as records.
    let regions = compile_holding(&g, TapeMode::Regions, &[("h", Travel::Records)]);
    assert_eq!(regions.tape.as_ref().unwrap().travel_of(h), Travel::Records);
    let inputs: Vec<_> = streamed
        .inputs
        .iter()
        .enumerate()
        .map(|(i, &t)| random_tensor(&streamed.tensor(t).ty, 4, i))
        .collect();
    let expected = run_program(&streamed, &inputs, &target).unwrap().0;
    for p in [&records, &whole] {
        for (a, b) in run_program(p, &inputs, &target).unwrap().0.iter().zip(&expected) {
            assert!(a.bit_eq(b));
        }
    }
}

/// `sum(conv(relu(conv(x, w) + b), v))` and its gradients with respect to `w` and `b`, with
/// the ReLU's output stored rather than recomputed.
fn conv_layer() -> Graph {
    let mut g = Graph::new("conv_layer");
    let ty = |shape: Vec<usize>| TensorType::new(DType::F32, shape).unwrap();
    let x = g.add_input("x", ty(vec![4, 3, 12, 12]));
    let w = g.add_input("w", ty(vec![8, 3, 3, 3]));
    let b = g.add_input("b", ty(vec![8, 1, 1]));
    let attrs = ConvAttrs {
        strides: vec![1, 1],
        dilations: vec![1, 1],
        pads: vec![0; 4],
        groups: 1,
    };
    let c = g.add_node("c", Op::Conv(attrs.clone()), vec![x, w], None).unwrap();
    let cb = g.add_node("cb", Op::Binary(BinaryOp::Add), vec![c, b], None).unwrap();
    let r = g.add_node("r", Op::Unary(UnaryOp::Relu), vec![cb], None).unwrap();
    let v = g.add_input("v", ty(vec![2, 8, 3, 3]));
    let y = g.add_node("y", Op::Conv(attrs), vec![r, v], None).unwrap();
    let sum = Op::Reduce {
        kind: ReduceKind::Sum,
        axes: vec![0, 1, 2, 3],
    };
    let loss = g.add_node("loss", sum, vec![y], None).unwrap();
    g.outputs.push(Output {
        name: "loss".into(),
        node: loss,
    });
    gradient_program(&g, &[w, b], &[]).unwrap().storing_all().graph
}

/// The bias gradient reduces the transposed gradient the weight gradient reads, so the
/// convolution's kept pre-activation has one backward reader, which mirrors the convolution
/// and pops it from the streamed tape; every mode gives the same bits.
#[test]
fn a_convolutions_kept_pre_activation_has_one_reader_and_streams() {
    let g = conv_layer();
    let p = compile(&g, TapeMode::Stream);
    let plan = p.tape.as_ref().unwrap();
    let [x] = plan.streams.as_slice() else {
        panic!("one stream: {}", plan.describe(&p))
    };
    assert_eq!(p.tensor(x.tensor).name, "c");
    let s = plan.saved.iter().find(|s| s.tensor == x.tensor).unwrap();
    assert_eq!(s.readers, [x.reader]);
    // The reader stores the masked gradient transposed, and the bias gradient reduces that.
    let reader = &p.kernels[x.reader];
    let masked = reader.operands[0];
    let reduces_it = p
        .kernels
        .iter()
        .any(|k| k.stmt.reduce.is_some() && k.stmt.read_accesses().iter().any(|a| k.operands[a.operand] == masked));
    assert!(reduces_it, "a reduction reads {}", p.tensor(masked).name);
    assert_bit_identical_in_every_mode(&g, 5);
}

#[test]
fn a_loss_that_is_not_an_output_is_an_error() {
    let g = two_layers();
    let options = Options {
        fuse: Fuse::Default,
        tape: Some(TapeOptions {
            loss: "nothing".into(),
            mode: TapeMode::Regions,
            arena_bytes: None,
            travel: Default::default(),
        }),
    };
    let e = compile_with(&g, &Target::sw26010(), options).unwrap_err();
    assert_eq!(
        e.to_string(),
        "the gradient tape: the loss 'nothing' is not an output of the program"
    );
}
