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
/// one first: chunks of fused loops none of which is needed without the last, and grids of
/// two loops in at most as many blocks as CPEs, at least seven eighths of them, none empty
/// (one loop may stay whole, in one part).
/// A kernel with fewer parallel points than CPEs has only the leading one.
#[test]
fn candidates_are_distinct_parallel_loops_that_fill_the_cpes() {
    let p = conv_program();
    let k = &p.kernels[0];
    let target = Target::sw26010();
    let all = partition::candidates(k, &target);
    assert_eq!(all[0], partition::partition(k, &target));
    assert!(all.len() > 1);
    let mut grids = Vec::new();
    for c in &all {
        let extents: Vec<usize> = c.loops.iter().map(|&l| k.loops[l].extent).collect();
        assert_eq!(extents.iter().product::<usize>(), c.points);
        assert!(c.points >= target.cpes);
        if !c.grid.is_empty() {
            grids.push((c.loops.clone(), c.grid.clone()));
            let blocks: usize = c.grid.iter().product();
            assert!(blocks <= target.cpes && 8 * blocks >= 7 * target.cpes, "{c:?}");
            assert!(c.loops[0] < c.loops[1], "{c:?}");
            let sizes = partition::block_sizes(&c.grid, &extents);
            assert_eq!(c.chunk, sizes.iter().product::<usize>(), "{c:?}");
            for ((&g, &size), &e) in c.grid.iter().zip(&sizes).zip(&extents) {
                let lengths: Vec<usize> = (0..g).map(|part| partition::block(part, g, e).1).collect();
                assert!(lengths.iter().all(|&n| n > 0), "{c:?}: an empty block");
                assert_eq!(lengths.iter().sum::<usize>(), e, "{c:?}");
                assert_eq!(lengths.iter().max(), Some(&size), "{c:?}");
                let mut distinct = lengths.clone();
                distinct.sort_unstable();
                distinct.dedup();
                assert_eq!(distinct, partition::part_lengths(g, e), "{c:?}");
            }
            continue;
        }
        let without_last: usize = extents[..extents.len() - 1].iter().product();
        assert!(without_last < target.cpes || c == &all[0], "{c:?}");
    }
    // Output channels (64) by rows (56): 8 x 8 blocks; 4 parts of the channels by 16 parts
    // of the rows (as even as they go: eight of 4 rows and eight of 3), or by 14 parts of 4
    // rows, as few as give blocks that long.
    let (m, y) = (1, 2);
    assert_eq!(k.loops[m].name, "m");
    assert_eq!(k.loops[y].name, "o0");
    assert!(grids.contains(&(vec![m, y], vec![8, 8])), "{grids:?}");
    assert!(grids.contains(&(vec![m, y], vec![4, 16])), "{grids:?}");
    assert!(grids.contains(&(vec![m, y], vec![4, 14])), "{grids:?}");
    // Each channel whole to a CPE, its rows whole: a grid of one part along the rows, whose
    // CPEs still share the input along the mesh's columns.
    assert!(grids.contains(&(vec![m, y], vec![64, 1])), "{grids:?}");
    let small = Target {
        cpes: 1 << 20,
        mesh: [1 << 10, 1 << 10],
        ..Target::sw26010()
    };
    assert_eq!(partition::candidates(k, &small), [partition::partition(k, &small)]);
}

/// Sizing counts each buffer's room for vectors read past its rows, so every partition's
/// tiles fit as planned. It once left the room out, and a grouped convolution striding along
/// rows of 783 columns was planned 96 bytes past SW26010's LDM: the model did not compile.
#[test]
fn every_partition_is_sized_to_fit_with_its_room() {
    let g = swflow_frontend::ir::parse(
        r#"graph "strided" {
  %x: f32[64,2,50,783] = input
  %w: f32[2,1,2,1] = input
  %y: f32[64,2,25,393] = conv(%x, %w) {strides=[2,2], dilations=[1,1], pads=[0,1,0,1], groups=2}
  output "y" = %y
}"#,
    )
    .unwrap();
    for target in [Target::sw26010(), Target::sw26010pro()] {
        let p = swflow_scheduler::pipeline::compile(&g, &target).unwrap();
        for k in &p.kernels {
            let (mut planned, mut with_room) = (0, 0);
            for part in partition::candidates(k, &target) {
                let Ok(s) = split_by(k, &p, &part, &target) else {
                    continue;
                };
                verify_schedule(k, &p, &s, &target).unwrap();
                planned += 1;
                with_room += usize::from(s.buffers.iter().any(|b| b.room > 0));
            }
            assert!(planned > 0, "{}: {}", target.name, k.name);
            // The product's vector code keeps room after its buffers.
            assert!(k.name != "y" || with_room > 0, "{}: {}", target.name, k.name);
        }
    }
}
