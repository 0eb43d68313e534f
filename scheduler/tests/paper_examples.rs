//! The worked matrix-product example of swTVM's buffer sizing and loop reordering:
//! `C[64, 2048] = A[64, 512] x B[512, 2048]` in f32 on one SW26010 core group.

use swflow_frontend::ir::{DType, Graph, Op, Output, TensorType};
use swflow_scheduler::loops::Program;
use swflow_scheduler::lower::lower;
use swflow_scheduler::schedule::{partition, reorder, schedule_kernel, sizing};
use swflow_scheduler::target::Target;

fn matmul_program() -> Program {
    let mut g = Graph::new("paper");
    let a = g.add_input("A", TensorType::new(DType::F32, vec![64, 512]).unwrap());
    let b = g.add_input("B", TensorType::new(DType::F32, vec![512, 2048]).unwrap());
    let c = g.add_node("C", Op::MatMul, vec![a, b], None).unwrap();
    g.outputs.push(Output {
        name: "C".into(),
        node: c,
    });
    lower(&g).unwrap()
}

#[test]
fn buffer_sizes_follow_algorithm_1() {
    let p = matmul_program();
    let k = &p.kernels[0];
    let names: Vec<&str> = k.loops.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["m", "n", "k"]);
    let target = Target::sw26010();
    let part = partition::partition(k, &target);
    // x (= m) is split over the 64 CPEs: one row each, so its tile is 1.
    assert_eq!((part.loops.clone(), part.points, part.chunk), (vec![0], 64, 1));
    let sized = sizing::size_buffers(k, &p, &part, &target).unwrap();
    let steps: Vec<(Vec<usize>, usize, bool)> = sized
        .steps
        .iter()
        .map(|s| (s.tiles.clone(), s.bytes, s.accepted))
        .collect();
    // Each of the three buffers also keeps 7 floats of room for vectors, 32 bytes aligned.
    assert_eq!(
        steps,
        [
            (vec![1, 64, 64], 16896 + 96, true),    // 16.5 KB: A 1x64, B 64x64, C 1x64
            (vec![1, 128, 64], 33536 + 96, true),   // 32.75 KB: y doubled (ties with k; y indexes C)
            (vec![1, 128, 128], 66560 + 96, false), // 65 KB: the best next step does not fit
        ]
    );
    assert_eq!(sized.tiles, [1, 128, 64]);
}

#[test]
fn loop_order_counts_every_transfer() {
    let p = matmul_program();
    let k = &p.kernels[0];
    let tiles = [1, 128, 64];
    let choice = reorder::best_order(k, &p, &tiles, &[1, 2048, 512]);
    let find = |o: &[usize]| choice.candidates.iter().find(|c| c.0 == o).unwrap().1.transfers;
    // yo first: A 16*8 + B 16*8 + C 16 puts.
    assert_eq!(find(&[1, 2]), 128 + 128 + 16);
    // ko first: A 8 + B 8*16 + C 128 puts and 112 reloads of partial sums.
    assert_eq!(find(&[2, 1]), 8 + 128 + 128 + 112);
    assert_eq!(choice.order, [1, 2]);
}

#[test]
fn whole_schedule_fits_the_ldm() {
    let p = matmul_program();
    for target in [Target::sw26010(), Target::sw26010pro()] {
        let s = schedule_kernel(&p.kernels[0], &p, &target).unwrap();
        assert!(s.ldm_bytes(&p.kernels[0], &target) <= target.ldm_bytes - target.stack_reserve_bytes);
        assert_eq!(s.balance(target.cpes), 1.0);
    }
}
