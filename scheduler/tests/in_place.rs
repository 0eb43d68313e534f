//! Updates stored in their input's place: only when the writing kernel reads the input at the
//! element it writes (for a reduction, in its epilogue only) and no later kernel reads the
//! input.

use swflow_frontend::ir::{BinaryOp, DType, Graph, Op, Output, TensorType, UnaryOp};
use swflow_scheduler::memplan::{check, plan};
use swflow_scheduler::pipeline::{compile_with, Fuse, Options};
use swflow_scheduler::target::Target;

/// `w' = w * 2`, with a reader `r(w)` of the old value after it, and an output `w + x`;
/// returns the number of updates stored in place.
fn in_place(reader: Option<Op>) -> usize {
    let mut g = Graph::new("update");
    let ty = TensorType::new(DType::F32, vec![8, 16]).unwrap();
    let w = g.add_input("w", ty.clone());
    let x = g.add_input("x", ty);
    let sum = g.add_node("sum", Op::Binary(BinaryOp::Add), vec![w, x], None).unwrap();
    let two = g.add_node("two", Op::Binary(BinaryOp::Add), vec![w, w], None).unwrap();
    g.outputs = vec![
        Output {
            name: "sum".into(),
            node: sum,
        },
        Output {
            name: "w_new".into(),
            node: two,
        },
    ];
    if let Some(op) = reader {
        let late = g.add_node("late", op, vec![w], None).unwrap();
        g.outputs.push(Output {
            name: "late".into(),
            node: late,
        });
    }
    in_place_updates(&g, Fuse::None, None)
}

/// Compiles `g` with `fuse` (into `kernels` kernels, when given), declares `w_new` the update
/// of `w`, checks the memory plan and returns the number of updates it stores in place.
fn in_place_updates(g: &Graph, fuse: Fuse, kernels: Option<usize>) -> usize {
    let target = Target::sw26010();
    let mut p = compile_with(g, &target, Options { fuse, tape: None }).unwrap();
    if let Some(n) = kernels {
        assert_eq!(p.kernels.len(), n);
    }
    p.set_updates(&[("w".into(), "w_new".into())]).unwrap();
    let m = plan(&p, &target);
    check(&p, &m).unwrap();
    m.in_place.len()
}

#[test]
fn an_elementwise_update_read_by_no_later_kernel_is_in_place() {
    assert_eq!(in_place(None), 1);
}

#[test]
fn an_update_whose_input_is_read_later_is_not_in_place() {
    assert_eq!(in_place(Some(Op::Unary(UnaryOp::Relu))), 0);
    assert_eq!(in_place(Some(Op::Transpose { perm: vec![1, 0] })), 0);
}

#[test]
fn an_update_that_reads_its_input_elsewhere_is_not_in_place() {
    let mut g = Graph::new("transposed");
    let ty = TensorType::new(DType::F32, vec![8, 8]).unwrap();
    let w = g.add_input("w", ty);
    let t = g
        .add_node("t", Op::Transpose { perm: vec![1, 0] }, vec![w], None)
        .unwrap();
    let new = g
        .add_node("w_new", Op::Binary(BinaryOp::Add), vec![w, t], None)
        .unwrap();
    g.outputs = vec![Output {
        name: "w_new".into(),
        node: new,
    }];
    assert_eq!(in_place_updates(&g, Fuse::Default, None), 0);
}

/// `w' = w + a @ b`, the sum a matrix product's epilogue; with `reads_w_in_product`,
/// `w' = w + w @ b`. Returns the number of updates stored in place.
fn product_update(reads_w_in_product: bool) -> usize {
    let mut g = Graph::new("product");
    let ty = TensorType::new(DType::F32, vec![16, 16]).unwrap();
    let w = g.add_input("w", ty.clone());
    let a = g.add_input("a", ty.clone());
    let b = g.add_input("b", ty);
    let left = if reads_w_in_product { w } else { a };
    let ab = g.add_node("ab", Op::MatMul, vec![left, b], None).unwrap();
    let new = g
        .add_node("w_new", Op::Binary(BinaryOp::Add), vec![ab, w], None)
        .unwrap();
    g.outputs = vec![Output {
        name: "w_new".into(),
        node: new,
    }];
    // One kernel: the sum is the product's epilogue.
    in_place_updates(&g, Fuse::Default, Some(1))
}

#[test]
fn a_reduction_reading_its_input_only_in_the_epilogue_updates_in_place() {
    assert_eq!(product_update(false), 1);
    assert_eq!(product_update(true), 0);
}
