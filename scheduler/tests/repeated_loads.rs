//! Loads that read one box between them share it: loads of the same operand at the same
//! subscripts are one access, and loads whose subscripts differ only by constants (a
//! pooling window's taps, a stencil's neighbours) form one window. Either way the schedule
//! gives them one LDM buffer, and each box of the operand moves once.

use swflow_frontend::ir::{parse, BinaryOp, DType, Graph, Op, Output, TensorType};
use swflow_frontend::random::random_tensor;
use swflow_scheduler::exec::cpe::run_program;
use swflow_scheduler::exec::run_reference;
use swflow_scheduler::loops::Program;
use swflow_scheduler::pipeline::compile;
use swflow_scheduler::schedule::estimate::estimate;
use swflow_scheduler::schedule::{partition, planned, Residence};
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
    assert_fetched_once(&p, &target, 64 * 96 * 4);
}

/// The one kernel of `p`, reading input `x` into one buffer, fetches `bytes` of it (each
/// element it reads once) and computes the reference's result bit for bit.
fn assert_fetched_once(p: &Program, target: &Target, bytes: usize) {
    assert_eq!(
        p.kernels[0].schedule.as_ref().unwrap().buffers.len(),
        2,
        "the target's buffer and x's"
    );
    let inputs = vec![random_tensor(&p.tensor(p.inputs[0]).ty, 3, 0)];
    let (outputs, stats) = run_program(p, &inputs, target).unwrap();
    assert_eq!(
        stats[0].traffic.get_bytes, bytes,
        "every element of x read is fetched once"
    );
    let reference = run_reference(p, &inputs).unwrap();
    assert!(outputs[0].bit_eq(&reference[0]));
}

/// `max(x[:, 0::2], x[:, 1::2])`: a pooling window's two taps along rows of 130 (the last two
/// elements unread).
const PAIRS: &str = r#"graph "pairs" {
  %x: f32[8,130] = input
  %a: f32[8,64] = slice(%x) {starts=[0,0], steps=[1,2], sizes=[8,64]}
  %b: f32[8,64] = slice(%x) {starts=[0,1], steps=[1,2], sizes=[8,64]}
  %y: f32[8,64] = max(%a, %b)
  output "y" = %y
}"#;

#[test]
fn taps_at_constant_offsets_share_one_window() {
    let target = Target::sw26010();
    let p = compile(&parse(PAIRS).unwrap(), &target).unwrap();
    let [k] = p.kernels.as_slice() else {
        panic!("one kernel, not {}", p.kernels.len())
    };
    assert_eq!(k.stmt.read_accesses().len(), 2, "two taps");
    let windows = k.stmt.windows();
    assert_eq!(windows.len(), 1, "{windows:?}");
    assert_eq!(windows[0].spread, [0, 1]);
    for a in k.stmt.read_accesses() {
        assert!(windows[0].displacement(a).is_some(), "{a:?} lies in {:?}", windows[0]);
    }
    assert_fetched_once(&p, &target, 8 * 128 * 4);
}

/// Taps 2 apart share a window (they use two of its three columns); taps 4 apart would use
/// two of five, and keep their own buffers.
#[test]
fn a_window_forms_only_where_its_taps_use_half_of_it() {
    let taps = |apart: usize| {
        let text = format!(
            r#"graph "taps" {{
  %x: f32[8,70] = input
  %a: f32[8,60] = slice(%x) {{starts=[0,0], steps=[1,1], sizes=[8,60]}}
  %b: f32[8,60] = slice(%x) {{starts=[0,{apart}], steps=[1,1], sizes=[8,60]}}
  %y: f32[8,60] = add(%a, %b)
  output "y" = %y
}}"#
        );
        let target = Target::sw26010();
        let p = compile(&parse(&text).unwrap(), &target).unwrap();
        let inputs = vec![random_tensor(&p.tensor(p.inputs[0]).ty, 5, 0)];
        let (outputs, _) = run_program(&p, &inputs, &target).unwrap();
        assert!(outputs[0].bit_eq(&run_reference(&p, &inputs).unwrap()[0]));
        let spreads: Vec<Vec<usize>> = p.kernels[0]
            .stmt
            .windows()
            .into_iter()
            .map(|w| w.spread.clone())
            .collect();
        spreads
    };
    assert_eq!(taps(2), [vec![0, 2]]);
    assert_eq!(taps(4), [Vec::<usize>::new(), Vec::new()]);
}

/// Served directly from main memory, a value the statement loads three times costs three
/// `gload`s a point in the estimate, as the code loads it at each use: two more a point than
/// a value loaded once, under the same schedule.
#[test]
fn a_direct_read_is_estimated_at_each_of_its_loads() {
    let target = Target::sw26010();
    let relu = parse(
        r#"graph "relu" {
  %x: f32[64,96] = input
  %y: f32[64,96] = relu(%x)
  output "y" = %y
}"#,
    )
    .unwrap();
    let cpe_cycles = |g: &Graph| {
        let p = compile(g, &target).unwrap();
        let k = &p.kernels[0];
        // Two columns a CPE, walked one at a time: every access is served directly.
        let part = partition::Partition {
            loops: vec![1],
            points: 96,
            chunk: 2,
            grid: Vec::new(),
        };
        let s = planned(k, &p, &part, vec![64, 1], &target);
        assert!(s.buffers.iter().all(|b| b.residence == Residence::Direct), "{s:?}");
        estimate(k, &p, &s, &target).cpe
    };
    let per_cpe_points = (64 * 2) as f64;
    let extra = cpe_cycles(&square_plus()) - cpe_cycles(&relu);
    assert_eq!(extra, 2.0 * per_cpe_points * target.timing.gload_cycles);
}
