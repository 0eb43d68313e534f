//! Kernels and their schedules print and parse back exactly, for every kernel of scheduled
//! models; an edited schedule parsed back is what the executor runs.

use swflow_frontend::ir::{BinaryOp, DType, Graph, Op, Output, ReduceKind, TensorType, UnaryOp};
use swflow_frontend::onnx::{import_file, ImportOptions};
use swflow_frontend::random::random_tensor;
use swflow_scheduler::exec::cpe::run_program;
use swflow_scheduler::exec::run_reference;
use swflow_scheduler::loops::{parse_kernel, print_kernel, verify_kernel, Program};
use swflow_scheduler::lower::{lower, lower_fused};
use swflow_scheduler::schedule::{schedule_program, verify_schedule};
use swflow_scheduler::target::Target;

fn lenet() -> Program {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let g = import_file(&root.join("examples/lenet/model.onnx"), &ImportOptions::default()).unwrap();
    lower(&g).unwrap()
}

/// Lenet lowered one kernel per primitive, and simplified and fused (kernels that hold
/// several ops, name fused nodes and have epilogues).
fn lenet_fused() -> Program {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let g = import_file(&root.join("examples/lenet/model.onnx"), &ImportOptions::default()).unwrap();
    let g = swflow_frontend::simplify::simplify(&g);
    lower_fused(&g, &swflow_frontend::fuse::plan(&g)).unwrap()
}

#[test]
fn kernels_round_trip_with_and_without_schedules() {
    let fused = lenet_fused();
    assert!(fused
        .kernels
        .iter()
        .any(|k| k.stmt.epilogue.is_some() && !k.fused.is_empty()));
    for mut p in [lenet(), fused] {
        round_trip(&mut p);
    }
}

fn round_trip(p: &mut Program) {
    for k in &p.kernels {
        let text = print_kernel(k, p);
        let back = parse_kernel(&text, p).unwrap_or_else(|e| panic!("{e}\n{text}"));
        verify_kernel(&back, p).unwrap();
        assert_eq!(print_kernel(&back, p), text);
    }
    schedule_program(p, &Target::sw26010()).unwrap();
    for k in &p.kernels {
        let text = print_kernel(k, p);
        let back = parse_kernel(&text, p).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(print_kernel(&back, p), text);
        let (s, t) = (back.schedule.as_ref().unwrap(), k.schedule.as_ref().unwrap());
        assert_eq!(
            (&s.partition, &s.tiles, &s.order, &s.buffers, &s.ranges),
            (&t.partition, &t.tiles, &t.order, &t.buffers, &t.ranges)
        );
    }
}

#[test]
fn awkward_names_gathers_and_constants_round_trip() {
    let mut g = Graph::new("g");
    let d = g.add_input("data \"x\"-1", TensorType::new(DType::F32, vec![5, 3]).unwrap());
    let i = g.add_input("2idx", TensorType::new(DType::I64, vec![4]).unwrap());
    let y = g.add_node("y", Op::Gather { axis: 0 }, vec![d, i], None).unwrap();
    let z = g
        .add_node(
            "z",
            Op::Slice {
                starts: vec![3, 2],
                steps: vec![-1, -2],
                sizes: vec![2, 2],
            },
            vec![y],
            None,
        )
        .unwrap();
    let sum = Op::Reduce {
        kind: ReduceKind::Sum,
        axes: vec![0, 1],
    };
    let c = g.add_node("c\u{7b}\"", sum, vec![z], None).unwrap();
    let s = g
        .add_node("scalar", Op::Reshape { shape: vec![] }, vec![c], None)
        .unwrap();
    let r = g.add_node("rank0", Op::Unary(UnaryOp::Neg), vec![s], None).unwrap();
    g.outputs.push(Output {
        name: "z".into(),
        node: z,
    });
    g.outputs.push(Output {
        name: "r".into(),
        node: r,
    });
    let mut p = lower(&g).unwrap();
    for scheduled in [false, true] {
        if scheduled {
            schedule_program(&mut p, &Target::sw26010()).unwrap();
        }
        for k in &p.kernels {
            let text = print_kernel(k, &p);
            let back = parse_kernel(&text, &p).unwrap_or_else(|e| panic!("{e}\n{text}"));
            assert_eq!(print_kernel(&back, &p), text);
        }
    }
    assert!(parse_kernel("kernel \"a\\u{zz}\" = x {", &p).is_err());
    assert!(parse_kernel("kernel \"a\\u}\" = x {", &p).is_err());
}

#[test]
fn a_pinned_schedule_is_replayed() {
    let mut p = lenet();
    let target = Target::sw26010();
    schedule_program(&mut p, &target).unwrap();
    let inputs: Vec<_> = p
        .inputs
        .iter()
        .enumerate()
        .map(|(i, &t)| random_tensor(&p.tensor(t).ty, 5, i))
        .collect();
    let (want, _) = run_program(&p, &inputs, &target).unwrap();
    // Pin the first convolution to smaller output tiles by editing its text.
    let at = p
        .kernels
        .iter()
        .position(|k| k.op == "conv" && k.stmt.reduce.is_some())
        .unwrap();
    // From a schedule written out whole, whatever the scheduler chose.
    let printed = print_kernel(&p.kernels[at], &p);
    let head = &printed[..printed.find("  partition").unwrap()];
    let text = format!(
        "{head}  partition [n, m, o0] 168 points, 3 per CPE
  tiles n:1, m:1, o0:3, o1:28, c:1, k0:5, k1:5
  order []
  ldm c1/0: buffer 1x1x3x28 at depth 0
  ldm input: buffer 1x1x7x32 at depth 0
  ldm conv1.w: buffer 1x1x5x5 at depth 0
}}
"
    );
    let pinned = parse_kernel(&text, &p).unwrap_or_else(|e| panic!("{e}\n{text}"));
    verify_schedule(&pinned, &p, pinned.schedule.as_ref().unwrap(), &target).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let retile = text
        .replace("o0:3, o1:28", "o0:3, o1:8")
        .replace("order []", "order [o1]");
    // Without bigger-than-needed buffers refilled per o1 tile the schedule is rejected...
    let stale = parse_kernel(&retile.replace("1x1x3x28 at depth 0", "1x1x3x8 at depth 0"), &p).unwrap();
    let e = verify_schedule(&stale, &p, stale.schedule.as_ref().unwrap(), &target).unwrap_err();
    assert!(e.contains("must be refilled at depth 1"), "{e}");
    // ...and accepted once they move inside the o1 loop.
    let edited = retile
        .replace("1x1x3x28 at depth 0", "1x1x3x8 at depth 1")
        .replace("1x1x7x32 at depth 0", "1x1x7x12 at depth 1");
    let k = parse_kernel(&edited, &p).unwrap_or_else(|e| panic!("{e}\n{edited}"));
    verify_schedule(&k, &p, k.schedule.as_ref().unwrap(), &target).unwrap_or_else(|e| panic!("{e}\n{edited}"));
    assert_eq!(k.schedule.as_ref().unwrap().tiles[3], 8);
    p.kernels[at] = k;
    let (got, _) = run_program(&p, &inputs, &target).unwrap();
    assert!(
        got[0].bit_eq(&want[0])
            || swflow_frontend::tolerance::compare(
                &got[0],
                &want[0],
                swflow_frontend::tolerance::Comparison::Tolerance
            )
            .is_ok()
    );
}

/// A strided read whose box takes whole dimensions ([`Access::spans_dimension`]) under a
/// chunked partition whose chunks (11 points) end and start inside the rows of its innermost
/// loop (7 points, one whole tile): every part of a row reads from the same box, from the
/// dimension's start, and the copy comes out exact.
#[test]
fn whole_dimension_boxes_hold_partial_chunks() {
    let g = swflow_frontend::ir::parse(
        r#"graph "subsample" {
  %x: f32[1,96,14,14] = input
  %s: f32[1,96,7,7] = slice(%x) {starts=[0,0,0,0], steps=[1,1,2,2], sizes=[1,96,7,7]}
  output "s" = %s
}"#,
    )
    .unwrap();
    let mut p = lower(&g).unwrap();
    let target = Target::sw26010();
    schedule_program(&mut p, &target).unwrap();
    let printed = print_kernel(&p.kernels[0], &p);
    let head = &printed[..printed.find("  partition").unwrap()];
    let text = format!(
        "{head}  partition [d1, d2] 672 points, 11 per CPE
  tiles d0:1, d1:1, d2:7, d3:7
  order []
  ldm s: buffer 1x1x7x7 at depth 0
  ldm x: buffer 1x1x14x14 at depth 0
}}
"
    );
    let k = parse_kernel(&text, &p).unwrap_or_else(|e| panic!("{e}\n{text}"));
    verify_schedule(&k, &p, k.schedule.as_ref().unwrap(), &target).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let x = &k.stmt.windows()[0];
    let extents = k.extents();
    let tiles = &k.schedule.as_ref().unwrap().tiles;
    assert!(x.spans_dimension(2, tiles, &extents, 14) && x.spans_dimension(3, tiles, &extents, 14));
    p.kernels[0] = k;
    let inputs = vec![random_tensor(&p.tensor(p.inputs[0]).ty, 3, 0)];
    let (got, _) = run_program(&p, &inputs, &target).unwrap();
    let want = run_reference(&p, &inputs).unwrap();
    assert!(got[0].bit_eq(&want[0]));
}

/// A matrix product with a shift and ReLU as its epilogue that keeps the product itself, with
/// a reduction long enough to be split into tiles.
fn kept_product() -> Program {
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
    lower_fused(&g, &swflow_frontend::fuse::plan(&g)).unwrap()
}

/// With the reduction's tile loop outside the target's, each target box is revisited with
/// partial sums; the kept value still leaves only complete, equal bit for bit to the
/// unscheduled run.
#[test]
fn a_kept_value_survives_a_revisited_reduction() {
    let mut p = kept_product();
    let target = Target::sw26010();
    schedule_program(&mut p, &target).unwrap();
    let [k] = p.kernels.as_slice() else {
        panic!("one kernel keeps the product")
    };
    assert!(k.stmt.keep.is_some());
    // A schedule with a row of the product per CPE, written out so that the edits below do
    // not depend on the scheduler's choice.
    let printed = print_kernel(k, &p);
    let schedule = "  partition [m] 64 points, 1 per CPE
  tiles m:1, n:64, k:128
  order [n, k]
  ldm z: buffer 1x64 at depth 1
  ldm a: buffer 1x128 at depth 2, double
  ldm b: buffer 128x64 at depth 2
  ldm c: buffer 64 at depth 1, double
  ldm mm: buffer 1x64 at depth 1
}
";
    let text = printed[..printed.find("  partition").expect("a scheduled kernel")].to_string() + schedule;
    let pinned = parse_kernel(&text, &p).unwrap_or_else(|e| panic!("{e}\n{text}"));
    verify_schedule(&pinned, &p, pinned.schedule.as_ref().unwrap(), &target).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let swap = [
        ("order [n, k]", "order [k, n]"),
        ("ldm z: buffer 1x64 at depth 1", "ldm z: buffer 1x64 at depth 2"),
        (
            "ldm a: buffer 1x128 at depth 2, double",
            "ldm a: buffer 1x128 at depth 1, double",
        ),
        (
            "ldm c: buffer 64 at depth 1, double",
            "ldm c: buffer 64 at depth 2, double",
        ),
        ("ldm mm: buffer 1x64 at depth 1", "ldm mm: buffer 1x64 at depth 2"),
    ];
    // The kept value must be placed as the target is.
    let direct = text.replace("ldm mm: buffer 1x64 at depth 1", "ldm mm: direct");
    let k = parse_kernel(&direct, &p).unwrap_or_else(|e| panic!("{e}\n{direct}"));
    let e = verify_schedule(&k, &p, k.schedule.as_ref().unwrap(), &target).unwrap_err();
    assert!(e.contains("the kept value must be placed as the target is"), "{e}");
    let mut edited = text.clone();
    for (from, to) in swap {
        assert!(edited.contains(from), "{from}\n{text}");
        edited = edited.replace(from, to);
    }
    let k = parse_kernel(&edited, &p).unwrap_or_else(|e| panic!("{e}\n{edited}"));
    verify_schedule(&k, &p, k.schedule.as_ref().unwrap(), &target).unwrap_or_else(|e| panic!("{e}\n{edited}"));
    p.kernels[0] = k;
    let inputs: Vec<_> = p
        .inputs
        .iter()
        .enumerate()
        .map(|(i, &t)| random_tensor(&p.tensor(t).ty, 5, i))
        .collect();
    let want = run_reference(&p, &inputs).unwrap();
    let (got, stats) = run_program(&p, &inputs, &target).unwrap();
    for (a, b) in got.iter().zip(&want) {
        assert!(a.bit_eq(b));
    }
    // 64 CPEs each put 4 boxes of z per tile of k (64 of them), and 4 of mm once.
    assert_eq!(stats[0].traffic.puts, 64 * (4 * 64 + 4));
}

#[test]
fn malformed_keeps_are_rejected() {
    let p = kept_product();
    let text = print_kernel(&p.kernels[0], &p);
    assert!(text.contains("  keep mm\n"), "{text}");
    let reason = |text: &str| {
        let k = parse_kernel(text, &p).unwrap_or_else(|e| panic!("{e}\n{text}"));
        verify_kernel(&k, &p).unwrap_err().reason
    };
    let no_epilogue: String = text
        .lines()
        .filter(|l| !l.starts_with("  then "))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(reason(&no_epilogue), "keeps its reduced value but has no epilogue");
    assert_eq!(
        reason(&text.replace("  keep mm", "  keep c")),
        "keeps its reduced value in 'c', which is not a computed tensor"
    );
    assert_eq!(
        reason(&text.replace("  keep mm", "  keep z")),
        "keeps its reduced value in 'z', which it also reads or writes"
    );
    assert!(parse_kernel(&text.replace("  keep mm", "  keep nothing"), &p).is_err());
}

#[test]
fn parse_errors_name_the_line() {
    let p = lenet();
    let text = print_kernel(&p.kernels[0], &p).replace("tensors", "tensorz");
    let e = parse_kernel(&text, &p).unwrap_err();
    assert_eq!(e.line, 2);
    assert!(e.msg.contains("expected 'tensors'"));
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

    /// Mutated kernel text (characters replaced, cut short) parses or fails cleanly; whatever
    /// parses can be verified without panicking.
    #[test]
    fn mutated_kernel_text_never_panics(which in 0usize..64, edits in proptest::collection::vec((proptest::prelude::any::<usize>(), proptest::prelude::any::<char>()), 1..4), cut in proptest::prelude::any::<usize>()) {
        let mut p = lenet();
        schedule_program(&mut p, &Target::sw26010()).unwrap();
        let k = &p.kernels[which % p.kernels.len()];
        let mut text: Vec<char> = print_kernel(k, &p).chars().collect();
        for (at, c) in edits {
            let at = at % text.len();
            text[at] = c;
        }
        text.truncate(cut % (text.len() + 1));
        let text: String = text.into_iter().collect();
        if let Ok(back) = parse_kernel(&text, &p) {
            if verify_kernel(&back, &p).is_ok() {
                if let Some(s) = &back.schedule {
                    let _ = verify_schedule(&back, &p, s, &Target::sw26010());
                }
            }
        }
    }
}

#[test]
fn malformed_epilogues_are_rejected() {
    let p = lenet_fused();
    let k = p.kernels.iter().find(|k| k.stmt.epilogue.is_some()).unwrap();
    let text = print_kernel(k, &p);
    let edit_line = |starts: &str, f: &dyn Fn(&str) -> String| -> String {
        text.lines()
            .map(|l| {
                if l.trim_start().starts_with(starts) {
                    f(l)
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    let reason = |text: &str| {
        let k = parse_kernel(text, &p).unwrap_or_else(|e| panic!("{e}\n{text}"));
        verify_kernel(&k, &p).unwrap_err().reason
    };
    let wrong_type = edit_line("then ", &|l| {
        format!("{}cast<f64>({})", "  then ", &l["  then ".len()..])
    });
    assert_eq!(reason(&wrong_type), "epilogue is f64 but the target is f32");
    let target = &p.tensor(k.operands[0]).name;
    let acc_in_value = edit_line(&format!("{target}["), &|l| {
        let (lhs, rhs) = l.split_once("= ").unwrap();
        format!("{lhs}= (acc + {rhs})")
    });
    assert_eq!(reason(&acc_in_value), "'acc' outside an epilogue");
    let no_reduction = edit_line(&format!("{target}["), &|l| {
        let (lhs, rhs) = l.split_once(" sum(0.0)= ").unwrap();
        format!("{lhs} = {rhs}")
    });
    assert_eq!(reason(&no_reduction), "has reduction loops but no reduction");
}

#[test]
fn malformed_guarded_reads_are_rejected() {
    let p = lenet_fused();
    let k = p
        .kernels
        .iter()
        .find(|k| print_kernel(k, &p).contains(" else 0.0]"))
        .unwrap();
    let text = print_kernel(k, &p);
    let reason = |text: &str| {
        let k = parse_kernel(text, &p).unwrap_or_else(|e| panic!("{e}\n{text}"));
        verify_kernel(&k, &p).unwrap_err().reason
    };
    let (x, _) = text.split_once(" else 0.0]").unwrap();
    let x = &x[x.rfind(" (").map_or(0, |i| i + 2)..x.rfind('[').unwrap()];
    assert!(reason(&text.replace(" else 0.0]", " else 0.0f64]")).ends_with("is f32 but pads with a f64 value"));
    // Without its guard, the read leaves the tensor.
    let unguarded = reason(&text.replace(" else 0.0]", "]"));
    assert!(
        unguarded.starts_with(&format!("subscript 2 of '{x}' spans -")),
        "{unguarded}"
    );
}
