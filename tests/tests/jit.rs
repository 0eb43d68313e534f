//! The Cranelift JIT against the generated C: the same numbers bit for bit, the same emulator
//! counters and modelled cycles, broken kernels caught with the kernel and CPE named, and mutated loop IR
//! that is an error, never a crash.

use serde_json::Value;
use swflow_codegen::cpe::{Func, Int, Stmt};
use swflow_codegen::jit::{self, JitError};
use swflow_frontend::interp;
use swflow_frontend::ir::{BinaryOp, DType, Graph, Op, Output, PoolAttrs, PoolKind, Tensor, TensorType, UnaryOp};
use swflow_frontend::tolerance::{compare, Comparison};
use swflow_scheduler::exec::cpe::kernel_stats;
use swflow_scheduler::loops::{LoopKind, Program};
use swflow_scheduler::schedule::dma::plan_buffers;
use swflow_scheduler::schedule::{verify_schedule, LDM_BUFFER_ALIGN};
use swflow_scheduler::target::Target;
use swflow_tests::cbuild::{compile, emulator_lib, make, run_model, run_with_stats, scratch};
use swflow_tests::{assert_walked_traffic, each_body, lenet, seeded_inputs};

fn inputs_of(g: &Graph) -> Vec<Tensor> {
    seeded_inputs(g, 7)
}

fn scheduled(g: &Graph, target: &Target) -> Program {
    swflow_scheduler::pipeline::compile(g, target).unwrap()
}

/// Runs `g` through the JIT on both targets on `inputs`: every output must equal the
/// interpreter's bit for bit (`what` names the case in a failure).
fn jit_is_exact(g: &Graph, inputs: &[Tensor], what: &str) {
    let want = interp::run(g, inputs).unwrap();
    for target in [Target::sw26010(), Target::sw26010pro()] {
        let p = scheduled(g, &target);
        let run = jit::compile(&p, &target).unwrap().run(&p, &target, inputs).unwrap();
        assert_eq!(run.outputs.len(), want.len(), "{what} on {}", target.name);
        for (got, want) in run.outputs.iter().zip(&want) {
            compare(got, want, Comparison::Exact)
                .unwrap_or_else(|m| panic!("{what} on {}: {}", target.name, m.message));
        }
    }
}

/// The C build of `g` run on `inputs`: its outputs, and the emulator's report of its run on
/// the inputs the program makes itself (seed 0), as JSON.
fn c_run(g: &Graph, target: &Target, name: &str, inputs: &[Tensor]) -> (Vec<Tensor>, Value) {
    let dir = scratch("jit", name);
    compile(g, target, &dir).unwrap();
    make(&dir, &[]).unwrap();
    let report = run_with_stats(&dir).unwrap();
    let outputs = run_model(&dir, g, inputs, &[]).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    (outputs, report)
}

#[test]
fn lenet_matches_the_interpreter_on_both_targets() {
    let g = lenet();
    let inputs = inputs_of(&g);
    let want = interp::run(&g, &inputs).unwrap();
    for target in [Target::sw26010(), Target::sw26010pro()] {
        let p = scheduled(&g, &target);
        let run = jit::compile(&p, &target).unwrap().run(&p, &target, &inputs).unwrap();
        for (a, b) in run.outputs.iter().zip(&want) {
            compare(a, b, Comparison::Tolerance).unwrap_or_else(|m| panic!("{}: {}", target.name, m.message));
        }
    }
}

/// Transposes copy values, so the JIT's (4 × 4 blocks in registers, rows and columns left
/// over point by point) equal the interpreter's bit for bit, on shapes with and without
/// remainders.
#[test]
fn transposes_are_exact() {
    // Each CPE's rows are those of the target's first dimensions: these give it several
    // blocks of four, and odd ones give remainders.
    let cases: [(&[usize], &[usize]); 5] = [
        (&[256, 1024], &[1, 0]),
        (&[67, 1031], &[1, 0]),
        (&[5, 7, 9], &[2, 0, 1]),
        (&[3, 50, 2051], &[0, 2, 1]),
        (&[2, 9, 6, 1013], &[0, 3, 1, 2]),
    ];
    for (shape, perm) in cases {
        let mut g = Graph::new("transpose");
        let x = g.add_input("x", TensorType::new(DType::F32, shape.to_vec()).unwrap());
        let y = g
            .add_node("y", Op::Transpose { perm: perm.to_vec() }, vec![x], None)
            .unwrap();
        g.outputs.push(Output {
            name: "y".into(),
            node: y,
        });
        jit_is_exact(&g, &inputs_of(&g), &format!("{shape:?} by {perm:?}"));
    }
}

/// Padding read in place: every kind of guarded get (a box inside the tensor, rows whole in
/// LDM, rows cut short and packed, rows shorter than a vector that move as one into padding
/// that takes its other lanes, a box that misses the tensor) gives the interpreter's copy bit
/// for bit, and a padded max pool its maximum.
#[test]
fn padding_is_exact() {
    let cases: [(&[usize], &[usize], f64); 6] = [
        (&[67, 1031], &[1, 2, 3, 4], 0.0),
        (&[2, 8, 40, 5], &[0, 0, 1, 1, 0, 0, 2, 3], 0.5),
        (&[256, 1024], &[0, 1, 0, 1], -1.5),
        (&[5, 7, 9], &[0, 1, 1, 2, 0, 3], f64::NEG_INFINITY),
        (&[3, 50, 2051], &[1, 0, 0, 0, 2, 0], 2.0),
        (&[2, 9, 6, 13], &[0, 0, 4, 4, 0, 1, 5, 3], 0.25),
    ];
    for (shape, pads, value) in cases {
        let mut g = Graph::new("pad");
        let x = g.add_input("x", TensorType::new(DType::F32, shape.to_vec()).unwrap());
        let y = g
            .add_node(
                "y",
                Op::Pad {
                    pads: pads.to_vec(),
                    value,
                },
                vec![x],
                None,
            )
            .unwrap();
        let outputs = if shape.len() == 4 {
            let attrs = PoolAttrs {
                kind: PoolKind::Max,
                kernel: vec![3, 3],
                strides: vec![2, 1],
                dilations: vec![1, 1],
                pads: vec![1, 2, 2, 1],
                ceil_mode: true,
            };
            vec![y, g.add_node("m", Op::Pool(attrs), vec![x], None).unwrap()]
        } else {
            vec![y]
        };
        for (i, &node) in outputs.iter().enumerate() {
            g.outputs.push(Output {
                name: format!("y{i}"),
                node,
            });
        }
        jit_is_exact(&g, &inputs_of(&g), &format!("{shape:?} padded {pads:?}"));
    }
}

/// Runs `g` through the C path and the JIT on both targets, on the inputs the C program makes
/// itself (seed 0): the outputs must be bit-identical, and every kernel's counters and
/// modelled time equal.
fn counters_and_cycles_equal(g: &Graph, name: &str) {
    for target in [Target::sw26010(), Target::sw26010pro()] {
        let inputs = seeded_inputs(g, 0);
        let (c_outputs, c) = c_run(g, &target, &format!("{name}-{}", target.name), &inputs);
        let p = scheduled(g, &target);
        let run = jit::compile(&p, &target).unwrap().run(&p, &target, &inputs).unwrap();
        for (a, b) in run.outputs.iter().zip(&c_outputs) {
            compare(a, b, Comparison::Exact).unwrap_or_else(|m| panic!("{name} on {}: {}", target.name, m.message));
        }
        let j = serde_json::to_value(&run.report).unwrap();
        assert_eq!(
            j["kernels"], c["kernels"],
            "{name} on {}: per-kernel counters and time",
            target.name
        );
        assert_eq!(j["total"], c["total"], "{name} on {}", target.name);
        assert!(j["total_modelled_seconds"].as_f64().unwrap() > 0.0);
    }
}

/// A matrix product whose kernel takes a shift and ReLU as its epilogue and keeps the
/// product, an output too, through the C path and the JIT, with the schedule's reduction tile
/// loop moved outside the target's so that every target box is revisited with partial sums:
/// the kept value leaves once per box, complete (256 columns: with 128, the scheduler would
/// split the product into per-CPE partials). Outputs are bit-identical between the two
/// paths and within tolerance of the interpreter; the emulator's counters equal the walk's.
#[test]
fn a_kept_value_through_c_and_the_jit() {
    let mut g = Graph::new("keep");
    let ty = |shape: Vec<usize>| TensorType::new(DType::F32, shape).unwrap();
    let a = g.add_input("a", ty(vec![64, 8192]));
    let b = g.add_input("b", ty(vec![8192, 256]));
    let c = g.add_input("c", ty(vec![256]));
    let mm = g.add_node("mm", Op::MatMul, vec![a, b], None).unwrap();
    let y = g.add_node("y", Op::Binary(BinaryOp::Sub), vec![mm, c], None).unwrap();
    let z = g.add_node("z", Op::Unary(UnaryOp::Relu), vec![y], None).unwrap();
    g.outputs = vec![
        Output {
            name: "z".into(),
            node: z,
        },
        Output {
            name: "mm".into(),
            node: mm,
        },
    ];
    let inputs = inputs_of(&g);
    let want = interp::run(&g, &inputs).unwrap();
    for target in [Target::sw26010(), Target::sw26010pro()] {
        let mut p = scheduled(&g, &target);
        let [k] = p.kernels.as_slice() else {
            panic!("one kernel keeps the product")
        };
        assert!(k.stmt.keep.is_some());
        // Rows split over the CPEs, and tiles of 32 columns inside the tiles of the reduction.
        let part = swflow_scheduler::schedule::partition::partition(k, &target);
        let mut s = swflow_scheduler::schedule::split_by(k, &p, &part, &target).unwrap();
        let r = k.loops.iter().position(|l| l.kind == LoopKind::Reduce).unwrap();
        let n = k.loops.iter().position(|l| l.name == "n").unwrap();
        assert!(s.order.contains(&r), "{s:?}");
        s.tiles[n] = 32;
        s.order = vec![r, n];
        s.buffers = plan_buffers(k, &p, &s, &target);
        verify_schedule(k, &p, &s, &target).unwrap();
        let walked = kernel_stats(&p, k, &s, &target).traffic;
        p.kernels[0].schedule = Some(s);

        let dir = scratch("jit", &format!("keep-{}", target.name));
        let lib = emulator_lib().unwrap();
        let generated = swflow_codegen::generate(&p, &target, lib.to_str().unwrap()).unwrap();
        if dir.exists() {
            std::fs::remove_dir_all(&dir).unwrap();
        }
        generated.write_to(&dir).unwrap();
        make(&dir, &[]).unwrap();
        let c_outputs = run_model(&dir, &g, &inputs, &[]).unwrap();
        let c_stats = run_with_stats(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let run = jit::compile(&p, &target).unwrap().run(&p, &target, &inputs).unwrap();
        for ((j, c), w) in run.outputs.iter().zip(&c_outputs).zip(&want) {
            compare(j, c, Comparison::Exact).unwrap_or_else(|m| panic!("{}: {}", target.name, m.message));
            compare(j, w, Comparison::Tolerance).unwrap_or_else(|m| panic!("{}: {}", target.name, m.message));
        }
        let j = serde_json::to_value(&run.report).unwrap();
        assert_eq!(j["kernels"], c_stats["kernels"], "{}", target.name);
        assert_walked_traffic(&j["kernels"][0], &walked, &target.name);
    }
}

#[test]
fn lenet_counters_and_cycles_equal_the_c_path() {
    counters_and_cycles_equal(&lenet(), "lenet");
}

#[test]
fn light_resnet50_counters_and_cycles_equal_the_c_path() {
    let case = swflow_tests::OnnxCase::new(swflow_tests::conformance_dir().unwrap().join("light/resnet50"));
    counters_and_cycles_equal(&case.import().unwrap(), "light_resnet50");
}

/// Rows shorter than a vector whose padding after them cannot take the vector's other lanes,
/// but whose padding before and after them can (2 elements padded to 4 on SW26010, 5 padded
/// to 8 on the Pro), move as one vector that starts in the padding before the row: through
/// the C path and the JIT, the padded copies are the interpreter's bit for bit, and every
/// kernel's counters and modelled time are equal.
#[test]
fn short_rows_move_into_the_padding_on_both_sides() {
    for (width, pads) in [(2, [1, 1]), (5, [2, 1])] {
        let mut g = Graph::new("short");
        let x = g.add_input("x", TensorType::new(DType::F32, vec![96, 7, width]).unwrap());
        let y = g
            .add_node(
                "y",
                Op::Pad {
                    pads: vec![0, 0, pads[0], 0, 0, pads[1]],
                    value: 0.5,
                },
                vec![x],
                None,
            )
            .unwrap();
        g.outputs.push(Output {
            name: "y".into(),
            node: y,
        });
        jit_is_exact(&g, &seeded_inputs(&g, 0), &format!("{width} wide"));
        counters_and_cycles_equal(&g, &format!("short-{width}"));
    }
}

/// Runs lenet on sw26010 through the JIT with `edit` applied to kernel `kernel`'s CPE
/// program; returns the run's error.
fn broken(kernel: &str, edit: impl Fn(&mut Func)) -> JitError {
    let g = lenet();
    let target = Target::sw26010();
    let p = scheduled(&g, &target);
    let mut edited = false;
    let program = jit::compile_edited(&p, &target, &mut |name, f| {
        if name == kernel {
            edit(f);
            edited = true;
        }
    })
    .unwrap();
    assert!(edited, "no kernel {kernel}");
    match program.run(&p, &target, &inputs_of(&g)) {
        Ok(_) => panic!("the broken {kernel} ran"),
        Err(e) => {
            println!("{e}");
            e
        }
    }
}

#[test]
fn dma_past_an_ldm_buffer_is_caught() {
    // The first fully connected layer's partial products declare their weight buffer (each
    // half, when it is double) shorter than the tile a DMA fills it with: by the alignment's
    // elements, more than the padding after the tile.
    let p = scheduled(&lenet(), &Target::sw26010());
    let k = p.kernels.iter().find(|k| k.name == "g1/1.partials").unwrap();
    let s = k.schedule.as_ref().unwrap();
    let weights = swflow_scheduler::schedule::accesses(k)
        .iter()
        .position(|a| p.tensor(k.operands[a.operand]).name == "g1/0")
        .unwrap();
    let tile: usize = s.buffers[weights].dims.iter().product();
    let err = broken("k_g1_1_partials", |f| {
        let b = f.bufs.iter_mut().find(|b| b.name == "g1_0").unwrap();
        assert!(b.elements >= tile);
        b.elements = tile - LDM_BUFFER_ALIGN / 4;
    })
    .to_string();
    assert!(err.starts_with("kernel 'k_g1_1_partials' on CPE "), "{err}");
    assert!(err.contains("past its end"), "{err}");
    assert!(err.contains("LDM buffer 'g1_0'"), "{err}");
}

#[test]
fn two_cpes_writing_one_range_is_caught() {
    // Every CPE computes the first CPE's chunk and writes it back.
    let err = broken("k_g1_1", |f| {
        let first = f.vars.iter().position(|v| v.name == "first").unwrap();
        for s in &mut f.body {
            if let Stmt::Set(v, e) = s {
                if v.0 as usize == first {
                    *e = Int::Const(0);
                }
            }
        }
    })
    .to_string();
    assert!(err.starts_with("kernel 'k_g1_1' on CPEs 0 and "), "{err}");
    assert!(err.contains("both write arena bytes"), "{err}");
}

#[test]
fn a_transfer_never_waited_for_is_caught() {
    let err = broken("k_g1_1", |f| {
        each_body(&mut f.body, &mut |body| {
            body.retain(|s| !matches!(s, Stmt::Wait { reply: 1, .. }))
        })
    })
    .to_string();
    assert!(err.starts_with("kernel 'k_g1_1' on CPE "), "{err}");
    assert!(err.contains("never waited for"), "{err}");
}

#[test]
fn an_ldm_access_outside_its_buffer_is_caught() {
    // The compute loop indexes one element past the tile: the DMA is fine, the access is not.
    let err = broken("k_g1_1", |f| {
        each_body(&mut f.body, &mut |body| {
            for s in body {
                if let Stmt::Store {
                    place: swflow_codegen::cpe::Place::Ldm { index, .. },
                    ..
                } = s
                {
                    *index = index.clone() + Int::Const(1 << 20);
                }
            }
        })
    })
    .to_string();
    assert!(err.starts_with("kernel 'k_g1_1' on CPE "), "{err}");
    assert!(err.contains("outside LDM buffer"), "{err}");
}

/// A small deterministic generator (splitmix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    /// A nearby value of `v`: off by one, doubled, halved, zero, or random.
    fn near(&mut self, v: i64) -> i64 {
        match self.below(6) {
            0 => v + 1,
            1 => v - 1,
            2 => v * 2,
            3 => v / 2,
            4 => 0,
            _ => self.below(100) as i64 - 20,
        }
    }
}

/// One random change to one kernel of `p`: its loops, subscripts, operands or schedule.
fn mutate(p: &mut Program, rng: &mut Rng) {
    use swflow_scheduler::loops::Index;
    use swflow_scheduler::schedule::Residence;
    let n_tensors = p.tensors.len();
    let ki = rng.below(p.kernels.len());
    let k = &mut p.kernels[ki];
    let nl = k.loops.len();
    let s = k.schedule.as_mut().expect("scheduled");
    let near = |rng: &mut Rng, v: usize| rng.near(v as i64).max(0) as usize;
    match rng.below(12) {
        0 if nl > 0 => {
            let l = rng.below(nl);
            k.loops[l].extent = near(rng, k.loops[l].extent);
        }
        1 | 2 => {
            let mut accesses = k.stmt.value_accesses_mut();
            if accesses.is_empty() {
                return;
            }
            let a = rng.below(accesses.len());
            let access = &mut accesses[a];
            if access.index.is_empty() {
                return;
            }
            let d = rng.below(access.index.len());
            if let Index::Affine(x) = &mut access.index[d] {
                match x.terms.len() {
                    0 => x.offset = rng.near(x.offset),
                    t if rng.below(2) == 0 => {
                        let term = rng.below(t);
                        x.terms[term].1 = rng.near(x.terms[term].1);
                    }
                    _ => x.offset = rng.near(x.offset),
                }
            }
        }
        3 => {
            let o = rng.below(k.operands.len());
            k.operands[o] = swflow_scheduler::loops::TensorId(rng.below(n_tensors) as u32);
        }
        4 if nl > 0 => {
            let l = rng.below(nl);
            s.tiles[l] = near(rng, s.tiles[l]);
        }
        5 if !s.order.is_empty() => {
            let a = rng.below(s.order.len());
            let b = rng.below(s.order.len());
            s.order.swap(a, b);
        }
        6 => s.chunk = near(rng, s.chunk),
        7 => s.partition_points = near(rng, s.partition_points),
        8 | 9 => {
            let b = rng.below(s.buffers.len());
            let buf = &mut s.buffers[b];
            match rng.below(4) {
                0 if !buf.dims.is_empty() => {
                    let d = rng.below(buf.dims.len());
                    buf.dims[d] = near(rng, buf.dims[d]);
                }
                1 => buf.depth = near(rng, buf.depth),
                2 => buf.double = !buf.double,
                _ => {
                    buf.residence = match buf.residence {
                        Residence::Buffer => Residence::Direct,
                        Residence::Direct => Residence::Buffer,
                    }
                }
            }
        }
        10 if nl > 0 => {
            let l = rng.below(nl);
            s.ranges[l] = near(rng, s.ranges[l]);
        }
        _ if !s.partition.is_empty() => {
            let i = rng.below(s.partition.len());
            s.partition[i] = rng.below(nl.max(1));
        }
        _ => {}
    }
}

/// Mutates `count` copies of lenet's scheduled program (one to three changes each) and runs
/// each through the JIT: every one must end in a verifier error, a compile error, a run error
/// or a result, and the process must live. Returns (rejected, failed at run, ran).
fn mutation_run(count: usize, seed: u64) -> (usize, usize, usize) {
    let g = lenet();
    let inputs = inputs_of(&g);
    let (mut rejected, mut failed, mut ran) = (0, 0, 0);
    let mut rng = Rng(seed);
    for target in [Target::sw26010(), Target::sw26010pro()] {
        let original = scheduled(&g, &target);
        for _ in 0..count / 2 {
            let mut p = original.clone();
            for _ in 0..1 + rng.below(3) {
                mutate(&mut p, &mut rng);
            }
            match jit::compile(&p, &target) {
                Err(_) => rejected += 1,
                Ok(program) => match program.run(&p, &target, &inputs) {
                    Err(_) => failed += 1,
                    Ok(_) => ran += 1,
                },
            }
        }
    }
    println!("{count} mutated programs: {rejected} rejected before running, {failed} stopped while running, {ran} ran to the end");
    (rejected, failed, ran)
}

#[test]
fn mutated_loop_ir_never_crashes() {
    let (rejected, failed, ran) = mutation_run(200, 1);
    assert_eq!(rejected + failed + ran, 200);
    // The mutations reach both the verifier and the running machine.
    assert!(
        rejected > 0 && ran > 0,
        "{rejected} rejected, {failed} failed, {ran} ran"
    );
}

/// The long sweep: `cargo test --release -p swflow-tests --test jit -- --ignored --nocapture`.
#[test]
#[ignore]
fn many_mutated_loop_ir_programs_never_crash() {
    let (rejected, failed, ran) = mutation_run(5000, 2);
    assert_eq!(rejected + failed + ran, 5000);
}
