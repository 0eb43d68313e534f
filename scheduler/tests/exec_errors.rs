//! The scheduled executor catches broken schedules and kernels: a DMA past an LDM buffer, a
//! DMA outside its tensor, buffers larger than the LDM. Each error names the kernel and CPE.

use swflow_frontend::ir::{DType, Graph, Op, Output, TensorType};
use swflow_frontend::random::random_tensor;
use swflow_scheduler::exec::{cpe::run_program, ExecError};
use swflow_scheduler::loops::{Index, Program};
use swflow_scheduler::lower::lower;
use swflow_scheduler::schedule::schedule_program;
use swflow_scheduler::target::Target;

fn scheduled_matmul() -> (Program, Vec<swflow_frontend::ir::Tensor>) {
    let mut g = Graph::new("mm");
    let a = g.add_input("a", TensorType::new(DType::F32, vec![128, 300]).unwrap());
    let b = g.add_input("b", TensorType::new(DType::F32, vec![300, 200]).unwrap());
    let c = g.add_node("c", Op::MatMul, vec![a, b], None).unwrap();
    g.outputs.push(Output {
        name: "c".into(),
        node: c,
    });
    let mut p = lower(&g).unwrap();
    schedule_program(&mut p, &Target::sw26010()).unwrap();
    let inputs = g
        .inputs()
        .enumerate()
        .map(|(i, id)| random_tensor(&g.node(id).ty, 1, i))
        .collect();
    (p, inputs)
}

fn error_of(p: &Program, inputs: &[swflow_frontend::ir::Tensor]) -> (String, Option<usize>, String) {
    match run_program(p, inputs, &Target::sw26010()) {
        Err(ExecError::Kernel { kernel, cpe, reason }) => (kernel, cpe, reason),
        other => panic!("expected a kernel error, got {other:?}"),
    }
}

#[test]
fn correct_schedule_runs() {
    let (p, inputs) = scheduled_matmul();
    run_program(&p, &inputs, &Target::sw26010()).unwrap();
}

#[test]
fn dma_past_an_ldm_buffer_is_caught() {
    let (mut p, inputs) = scheduled_matmul();
    let s = p.kernels[0].schedule.as_mut().unwrap();
    // Shrink the buffer of `b`: its next DMA no longer fits.
    let last = s.buffers[2].dims.len() - 1;
    s.buffers[2].dims[last] -= 1;
    let (kernel, cpe, reason) = error_of(&p, &inputs);
    assert_eq!((kernel.as_str(), cpe), ("c", Some(0)));
    assert!(reason.contains("past its LDM buffer"), "{reason}");
}

#[test]
fn dma_outside_its_tensor_is_caught() {
    let (mut p, inputs) = scheduled_matmul();
    // Shift a's column subscript by one: the last tile of the last CPE reads past the row.
    let k = &mut p.kernels[0];
    let Some(a) = k.stmt.value_accesses_mut().into_iter().find(|a| a.operand == 1) else {
        panic!("a is read")
    };
    let Index::Affine(x) = &mut a.index[1] else {
        panic!("affine")
    };
    x.offset += 1;
    let (kernel, cpe, reason) = error_of(&p, &inputs);
    assert_eq!(kernel, "c");
    assert!(cpe.is_some());
    assert!(reason.contains("outside tensor"), "{reason}");
}

#[test]
fn buffers_larger_than_the_ldm_are_caught() {
    let (mut p, inputs) = scheduled_matmul();
    let s = p.kernels[0].schedule.as_mut().unwrap();
    s.buffers[2].dims = vec![300, 200];
    let (kernel, cpe, reason) = error_of(&p, &inputs);
    assert_eq!((kernel.as_str(), cpe), ("c", Some(0)));
    assert!(reason.contains("LDM bytes"), "{reason}");
}

#[test]
fn schedules_the_executor_cannot_walk_are_refused() {
    let mut g = Graph::new("gather");
    let d = g.add_input("d", TensorType::new(DType::F32, vec![5, 3]).unwrap());
    let i = g.add_input("i", TensorType::new(DType::I64, vec![4]).unwrap());
    let y = g.add_node("y", Op::Gather { axis: 0 }, vec![d, i], None).unwrap();
    g.outputs.push(Output {
        name: "y".into(),
        node: y,
    });
    let mut p = lower(&g).unwrap();
    schedule_program(&mut p, &Target::sw26010()).unwrap();
    let inputs: Vec<_> = g
        .inputs()
        .enumerate()
        .map(|(n, id)| random_tensor(&g.node(id).ty, 1, n))
        .collect();
    // The gathered access cannot live in a buffer; the tile count cannot be zero.
    let mut bad = p.clone();
    let s = bad.kernels[0].schedule.as_mut().unwrap();
    s.buffers[1].residence = swflow_scheduler::schedule::Residence::Buffer;
    s.buffers[1].dims = vec![1, 3];
    let (kernel, cpe, reason) = error_of(&bad, &inputs);
    assert_eq!((kernel.as_str(), cpe), ("y", None));
    assert!(
        reason.contains("cannot") || reason.contains("does not match"),
        "{reason}"
    );
    let mut bad = p.clone();
    bad.kernels[0].schedule.as_mut().unwrap().tiles[0] = 0;
    assert!(matches!(
        run_program(&bad, &inputs, &Target::sw26010()),
        Err(ExecError::Kernel { cpe: None, .. })
    ));
}
