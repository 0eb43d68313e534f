//! The scheduler compares partitions of a kernel by their estimated time and keeps the
//! shortest; the traffic the executor's tile walk counts shows what that buys.

use swflow_frontend::ir::{ConvAttrs, DType, Graph, Op, Output, TensorType};
use swflow_scheduler::exec::cpe::kernel_stats;
use swflow_scheduler::loops::Program;
use swflow_scheduler::lower::lower;
use swflow_scheduler::schedule::{estimate, partition, schedule_kernel, split_by, verify_schedule, Schedule};
use swflow_scheduler::target::Target;

/// `y[1, 64, 56, 56] = conv(x[1, 64, 56, 56], w[64, 64, 3, 3])`, padded by one.
fn conv_program() -> Program {
    let mut g = Graph::new("conv");
    let ty = |shape: Vec<usize>| TensorType::new(DType::F32, shape).unwrap();
    let x = g.add_input("x", ty(vec![1, 64, 56, 56]));
    let w = g.add_input("w", ty(vec![64, 64, 3, 3]));
    let attrs = ConvAttrs {
        strides: vec![1, 1],
        dilations: vec![1, 1],
        pads: vec![1, 1, 1, 1],
        groups: 1,
    };
    let y = g.add_node("y", Op::Conv(attrs), vec![x, w], None).unwrap();
    g.outputs.push(Output {
        name: "y".into(),
        node: y,
    });
    lower(&g).unwrap()
}

/// The schedule the passes give with the leading parallel loops as the partition.
fn leading(p: &Program, target: &Target) -> Schedule {
    let k = &p.kernels[0];
    let s = split_by(k, p, &partition::partition(k, target), target).unwrap();
    verify_schedule(k, p, &s, target).unwrap();
    s
}

fn cycles(p: &Program, s: &Schedule, target: &Target) -> f64 {
    estimate::estimate(&p.kernels[0], p, s, target).cycles()
}

/// Split one output channel per CPE, as the leading loops `[n, m]` would, every CPE reads
/// the whole input. The search splits the output's rows instead: each CPE reads its rows
/// and the weights, less than half the bytes in all.
#[test]
fn a_convolution_is_split_so_that_each_cpe_reads_less() {
    let p = conv_program();
    let k = &p.kernels[0];
    for target in [Target::sw26010(), Target::sw26010pro()] {
        let chosen = schedule_kernel(k, &p, &target).unwrap();
        let first = leading(&p, &target);
        let names = |s: &Schedule| s.partition.iter().map(|&l| k.loops[l].name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&first), ["n", "m"], "{}", target.name);
        assert!(
            !names(&chosen).contains(&"n".to_string()),
            "{}: {:?}",
            target.name,
            names(&chosen)
        );
        assert!(
            cycles(&p, &chosen, &target) < cycles(&p, &first, &target),
            "{}",
            target.name
        );
        let (a, b) = (
            kernel_stats(&p, k, &chosen, &target).traffic,
            kernel_stats(&p, k, &first, &target).traffic,
        );
        assert!(
            2 * (a.get_bytes + a.put_bytes) < b.get_bytes + b.put_bytes,
            "{}: {a:?} against {b:?}",
            target.name
        );
    }
}

/// Every candidate partition reaches the CPE count with distinct parallel loops, the leading
/// one first, and a kernel with fewer parallel points than CPEs has only that one.
#[test]
fn candidates_are_distinct_parallel_loops_that_fill_the_cpes() {
    let p = conv_program();
    let k = &p.kernels[0];
    let target = Target::sw26010();
    let all = partition::candidates(k, &target);
    assert_eq!(all[0], partition::partition(k, &target));
    assert!(all.len() > 1);
    for c in &all {
        let points: usize = c.loops.iter().map(|&l| k.loops[l].extent).product();
        assert_eq!(points, c.points);
        assert!(c.points >= target.cpes);
        let without_last: usize = c.loops[..c.loops.len() - 1]
            .iter()
            .map(|&l| k.loops[l].extent)
            .product();
        assert!(without_last < target.cpes || c == &all[0], "{c:?}");
    }
    let small = Target {
        cpes: 1 << 20,
        mesh: [1 << 10, 1 << 10],
        ..Target::sw26010()
    };
    assert_eq!(partition::candidates(k, &small), [partition::partition(k, &small)]);
}
