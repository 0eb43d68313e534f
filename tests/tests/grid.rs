//! Block partitions: a grid of parts of two parallel loops, one block per CPE, runs the same
//! through the loop-IR executor, the generated C and the JIT, with uneven parts and CPEs
//! left without one.

use swflow_frontend::interp;
use swflow_frontend::ir::{DType, Graph, Op, Output, TensorType};
use swflow_frontend::tolerance::{compare, Comparison};
use swflow_scheduler::exec::cpe::{kernel_stats, run_program};
use swflow_scheduler::loops::{parse_kernel, print_kernel, Program};
use swflow_scheduler::schedule::partition::Partition;
use swflow_scheduler::schedule::{split_by, verify_schedule};
use swflow_scheduler::target::Target;
use swflow_tests::{run_both_engines, seeded_inputs};

/// `c[96, 120] = a[96, 200] x b[200, 120]`.
fn matmul() -> Graph {
    let mut g = Graph::new("grid");
    let ty = |shape: Vec<usize>| TensorType::new(DType::F32, shape).unwrap();
    let a = g.add_input("a", ty(vec![96, 200]));
    let b = g.add_input("b", ty(vec![200, 120]));
    let c = g.add_node("c", Op::MatMul, vec![a, b], None).unwrap();
    g.outputs.push(Output {
        name: "c".into(),
        node: c,
    });
    g
}

/// The program of `g` with its one kernel split by `grid` over its two parallel loops.
fn with_grid(g: &Graph, target: &Target, grid: Vec<usize>) -> Program {
    let mut p = swflow_scheduler::pipeline::compile(g, target).unwrap();
    let k = &p.kernels[0];
    let (m, n) = (0, 1);
    assert_eq!((k.loops[m].extent, k.loops[n].extent), (96, 120));
    let sizes: Vec<usize> = grid.iter().zip([96usize, 120]).map(|(&g, e)| e.div_ceil(g)).collect();
    let part = Partition {
        loops: vec![m, n],
        points: 96 * 120,
        chunk: sizes.iter().product(),
        grid,
    };
    let s = split_by(k, &p, &part, target).unwrap();
    verify_schedule(k, &p, &s, target).unwrap();
    p.kernels[0].schedule = Some(s);
    p
}

/// 7 x 9 blocks, their parts as even as they go (13 or 14 rows by 13 or 14 columns), so 63
/// CPEs work and one has no block: the executor, the C and the JIT agree with the
/// interpreter, the C and the JIT bit for bit with equal counters, and their transfers are
/// those of the tile walk.
#[test]
fn a_ragged_grid_through_every_engine() {
    let g = matmul();
    let inputs = seeded_inputs(&g, 11);
    let want = interp::run(&g, &inputs).unwrap();
    for target in [Target::sw26010(), Target::sw26010pro()] {
        let p = with_grid(&g, &target, vec![7, 9]);
        let k = &p.kernels[0];
        let s = k.schedule.as_ref().unwrap();
        assert_eq!((s.ranges[0], s.ranges[1]), (14, 14), "{}", target.name);
        let (executed, _) = run_program(&p, &inputs, &target).unwrap();
        compare(&executed[0], &want[0], Comparison::Tolerance)
            .unwrap_or_else(|m| panic!("{}: {}", target.name, m.message));

        let both = run_both_engines(&p, &g, &inputs, &target, "grid", &format!("ragged-{}", target.name));
        compare(&both.output, &want[0], Comparison::Tolerance)
            .unwrap_or_else(|m| panic!("{}: {}", target.name, m.message));
        let walked = kernel_stats(&p, k, s, &target).traffic;
        // Each element of the result is written once, by the CPE whose block holds it.
        assert_eq!(walked.put_bytes, 96 * 120 * 4, "{}", target.name);
    }
}

/// A grid prints and parses back; a grid with no parts, a missing loop's parts or more
/// blocks than CPEs is refused, naming the grid, and text with such a grid is
/// an error, not a crash.
#[test]
fn grids_print_parse_and_verify() {
    let g = matmul();
    let target = Target::sw26010();
    let p = with_grid(&g, &target, vec![8, 8]);
    let k = &p.kernels[0];
    let text = print_kernel(k, &p);
    assert!(text.contains("grid 8x8,"), "{text}");
    let parsed = parse_kernel(&text, &p).unwrap();
    assert_eq!(parsed.schedule, k.schedule);
    let huge = usize::MAX / 2;
    for (grid, why) in [
        (vec![16, 9], "more blocks than CPEs"),
        (vec![0, 8], "no parts"),
        (vec![8], "one loop's parts missing"),
        (vec![huge, huge], "more blocks than any count"),
    ] {
        let mut s = k.schedule.clone().unwrap();
        s.grid = grid;
        let err = verify_schedule(k, &p, &s, &target).expect_err(why);
        assert!(err.contains("grid"), "{why}: {err}");
        let parts: Vec<String> = s.grid.iter().map(|g| g.to_string()).collect();
        let edited = text.replace("grid 8x8,", &format!("grid {},", parts.join("x")));
        let parsed = parse_kernel(&edited, &p).unwrap();
        let err = verify_schedule(&parsed, &p, parsed.schedule.as_ref().unwrap(), &target).expect_err(why);
        assert!(err.contains("grid"), "{why} (parsed): {err}");
    }
}
