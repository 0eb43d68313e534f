//! An average pool's epilogue multiplies each window's sum by the reciprocal of its count,
//! rounded at compile time, instead of dividing by the count: a CPE divides one lane at a time
//! and does not pipeline it. Where every count is a power of two the product is the quotient
//! bit for bit; elsewhere it agrees with the graph interpreter's division within the project
//! tolerance.

use swflow_frontend::interp;
use swflow_frontend::ir::{parse, BinaryOp, Data, Graph, Tensor};
use swflow_frontend::random::random_tensor;
use swflow_frontend::tolerance::{compare, Comparison};
use swflow_scheduler::exec::cpe::run_program;
use swflow_scheduler::loops::{Expr, Program};
use swflow_scheduler::pipeline::compile;
use swflow_scheduler::target::Target;

/// A 2x2 pool at stride 2 (every count 4) and a 3x3 pool whose padding is left out of the
/// counts (4 in the corners, 6 on the edges, 9 inside).
const MODEL: &str = r#"graph "average" {
  %x: f32[1,6,14,18] = input
  %a: f32[1,6,7,9] = avg_pool(%x) {kernel=[2,2], strides=[2,2], dilations=[1,1], pads=[0,0,0,0], ceil_mode=false, count_include_pad=true}
  %b: f32[1,6,14,18] = avg_pool(%x) {kernel=[3,3], strides=[1,1], dilations=[1,1], pads=[1,1,1,1], ceil_mode=false, count_include_pad=false}
  output "a" = %a
  output "b" = %b
}"#;

/// Every binary operation of the kernels' values and epilogues.
fn binary_ops(p: &Program) -> Vec<BinaryOp> {
    let mut ops = Vec::new();
    for k in &p.kernels {
        for e in std::iter::once(&k.stmt.value).chain(&k.stmt.epilogue) {
            e.visit(&mut |e| {
                if let Expr::Binary(op, ..) = e {
                    ops.push(*op);
                }
            });
        }
    }
    ops
}

/// The 2x2 pool at stride 2 of `x` (`[1, 6, 14, 18]`) as f32 division computes it: each
/// window summed in row-major order from zero, then divided by 4.
fn quarter_sums(x: &Tensor) -> Tensor {
    let Data::F32(v) = x.data() else { panic!("f32 input") };
    let mut out = Vec::new();
    for c in 0..6 {
        for i in 0..7 {
            for j in 0..9 {
                let at = |k0: usize, k1: usize| v[(c * 14 + 2 * i + k0) * 18 + 2 * j + k1];
                out.push((0.0 + at(0, 0) + at(0, 1) + at(1, 0) + at(1, 1)) / 4.0);
            }
        }
    }
    Tensor::from_f32(vec![1, 6, 7, 9], out).unwrap()
}

#[test]
fn averages_multiply_by_reciprocals_and_agree_with_division() {
    let g: Graph = parse(MODEL).unwrap();
    let inputs = vec![random_tensor(&g.node(g.inputs().next().unwrap()).ty, 5, 0)];
    let want = interp::run(&g, &inputs).unwrap();
    let quarters = quarter_sums(&inputs[0]);
    for target in [Target::sw26010(), Target::sw26010pro()] {
        let p = compile(&g, &target).unwrap();
        let ops = binary_ops(&p);
        assert!(!ops.contains(&BinaryOp::Div), "{}: {ops:?}", target.name);
        assert_eq!(
            ops.iter().filter(|&&op| op == BinaryOp::Mul).count(),
            2,
            "{}: one product per pool",
            target.name
        );
        let (got, _) = run_program(&p, &inputs, &target).unwrap();
        assert!(
            got[0].bit_eq(&quarters),
            "{}: a count of 4 divides exactly",
            target.name
        );
        for (got, want) in got.iter().zip(&want) {
            compare(got, want, Comparison::Tolerance).unwrap();
        }
    }
}
