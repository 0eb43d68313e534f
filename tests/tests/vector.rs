//! The vector code of sums of products: the operations it is charged with are those it
//! executes, and it computes what the scalar code computes.

use swflow_codegen::cpe::{fused_product, Func, Int, Ops, Stmt};
use swflow_codegen::jit;
use swflow_frontend::interp;
use swflow_frontend::ir::{parse, Graph};
use swflow_frontend::tolerance::{compare, Comparison};
use swflow_scheduler::target::Target;
use swflow_tests::{each_body, seeded_inputs};

/// Matrix products and convolutions whose kernels do nothing but their sums of products, at
/// sizes that leave partial row blocks, single vectors and single lanes.
const MODEL: &str = r#"graph "products" {
  %a: f32[37,45] = input
  %b: f32[45,50] = input
  %ab: f32[37,50] = matmul(%a, %b)
  %x: f32[2,3,13,30] = input
  %w: f32[7,3,3,3] = input
  %y: f32[2,7,13,30] = conv(%x, %w) {strides=[1,1], dilations=[1,1], pads=[1,1,1,1], groups=1}
  %v: f32[1,5,9,19] = input
  %u: f32[6,5,1,1] = input
  %z: f32[1,6,9,19] = conv(%v, %u) {strides=[1,1], dilations=[1,1], pads=[0,0,0,0], groups=1}
  output "ab" = %ab
  output "y" = %y
  output "z" = %z
}"#;

fn model() -> Graph {
    parse(MODEL).unwrap()
}

/// What one execution of a multiply-add statement does in floating point: the flops of its
/// lanes, one P0 instruction.
fn executed(s: &Stmt, lanes: u32) -> Option<Ops> {
    let fp = |flops| Ops {
        fp: 1,
        flops,
        ..Ops::default()
    };
    match s {
        Stmt::VFma { .. } => Some(fp(2 * lanes)),
        Stmt::Fold { kind, dtype, value, .. } if fused_product(*kind, *dtype, value).is_some() => Some(fp(2)),
        _ => None,
    }
}

/// Each kernel's flops as charged, and as counted by a program whose charges are replaced by
/// one charge after every multiply-add statement it executes: the same on both targets, and
/// the kernels really run vector code.
#[test]
fn charged_flops_are_the_multiply_adds_executed() {
    let g = model();
    let inputs = seeded_inputs(&g, 3);
    for target in [Target::sw26010(), Target::sw26010pro()] {
        let p = swflow_scheduler::pipeline::compile(&g, &target).unwrap();
        let mut vector_kernels = 0;
        let counted = jit::compile_edited(&p, &target, &mut |_, f: &mut Func| {
            let lanes = f.lanes as u32;
            let mut vector = false;
            each_body(&mut f.body, &mut |body| {
                let old = std::mem::take(body);
                for s in old {
                    if matches!(s, Stmt::Charge { .. }) {
                        continue;
                    }
                    vector |= matches!(s, Stmt::VFma { .. });
                    let after = executed(&s, lanes);
                    body.push(s);
                    if let Some(ops) = after {
                        body.push(Stmt::Charge {
                            ops,
                            count: Int::Const(1),
                        });
                    }
                }
            });
            vector_kernels += usize::from(vector);
        })
        .unwrap()
        .run(&p, &target, &inputs)
        .unwrap();
        assert_eq!(vector_kernels, 3, "{}: every product runs vector code", target.name);
        let charged = jit::compile(&p, &target).unwrap().run(&p, &target, &inputs).unwrap();
        let (a, b) = (
            serde_json::to_value(&charged.report).unwrap(),
            serde_json::to_value(&counted.report).unwrap(),
        );
        for (x, y) in a["kernels"]
            .as_array()
            .unwrap()
            .iter()
            .zip(b["kernels"].as_array().unwrap())
        {
            assert_eq!(x["kernel"], y["kernel"]);
            assert!(x["flops"].as_u64().unwrap() > 0);
            assert_eq!(x["flops"], y["flops"], "{}: kernel {}", target.name, x["kernel"]);
        }
        let want = interp::run(&g, &inputs).unwrap();
        for (got, want) in charged.outputs.iter().zip(&want) {
            compare(got, want, Comparison::Tolerance).unwrap_or_else(|m| panic!("{}: {}", target.name, m.message));
        }
    }
}
