//! Loads of the same operand at the same subscripts are one access: the schedule gives them
//! one LDM buffer, and each box of the operand moves once.

use swflow_frontend::ir::{BinaryOp, DType, Graph, Op, Output, TensorType};
use swflow_frontend::random::random_tensor;
use swflow_scheduler::exec::cpe::run_program;
use swflow_scheduler::exec::run_reference;
use swflow_scheduler::pipeline::compile;
use swflow_scheduler::target::Target;

/// `x * x + x`, one fused kernel whose value loads `x` three times.
fn square_plus() -> Graph {
    let mut g = Graph::new("square_plus");
    let x = g.add_input("x", TensorType::new(DType::F32, vec![64, 96]).unwrap());
    let m = g.add_node("m", Op::Binary(BinaryOp::Mul), vec![x, x], None).unwrap();
    let y = g.add_node("y", Op::Binary(BinaryOp::Add), vec![m, x], None).unwrap();
    g.outputs.push(Output {
        name: "y".into(),
        node: y,
    });
    g
}

#[test]
fn a_value_loaded_three_times_moves_once() {
    let target = Target::sw26010();
    let p = compile(&square_plus(), &target).unwrap();
    let [k] = p.kernels.as_slice() else {
        panic!("one kernel, not {}", p.kernels.len())
    };
    assert_eq!(k.stmt.value.accesses().len(), 3, "the value loads x three times");
    assert_eq!(k.stmt.read_accesses().len(), 1);
    assert_eq!(
        k.schedule.as_ref().unwrap().buffers.len(),
        2,
        "the target's buffer and x's"
    );
    let inputs = vec![random_tensor(&p.tensor(p.inputs[0]).ty, 3, 0)];
    let (outputs, stats) = run_program(&p, &inputs, &target).unwrap();
    assert_eq!(
        stats[0].traffic.get_bytes,
        64 * 96 * 4,
        "every element of x is fetched once"
    );
    let reference = run_reference(&p, &inputs).unwrap();
    assert!(outputs[0].bit_eq(&reference[0]));
}
