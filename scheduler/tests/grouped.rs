//! A grouped convolution writes output channel `co * g + m`: two loops in one subscript. In
//! tiles of one group that subscript takes one loop's points only, so a tile's box of the
//! output is written whole and is not read before it is computed.

use swflow_frontend::interp;
use swflow_frontend::ir::parse;
use swflow_frontend::random::random_tensor;
use swflow_frontend::tolerance::{compare, Comparison};
use swflow_scheduler::exec::cpe::run_program;
use swflow_scheduler::loops::Kernel;
use swflow_scheduler::lower::lower;
use swflow_scheduler::pipeline::compile;
use swflow_scheduler::schedule::reorder::access_traffic;
use swflow_scheduler::target::Target;

const GROUPED: &str = r#"graph "grouped" {
  %x: f32[1,32,14,28] = input
  %w: f32[32,8,1,1] = input
  %y: f32[1,32,14,28] = conv(%x, %w) {strides=[1,1], dilations=[1,1], pads=[0,0,0,0], groups=4}
  output "y" = %y
}"#;

/// The loop named `name` of kernel `k`.
fn loop_named(k: &Kernel, name: &str) -> usize {
    k.loops
        .iter()
        .position(|l| l.name == name)
        .expect("a loop of that name")
}

#[test]
fn a_grouped_convolution_writes_whole_boxes_in_tiles_of_one_group() {
    let g = parse(GROUPED).unwrap();
    let p = lower(&g).unwrap();
    let k = &p.kernels[0];
    let (gl, ml) = (loop_named(k, "g"), loop_named(k, "m"));
    let whole: Vec<usize> = k.loops.iter().map(|l| l.extent).collect();
    let tiles = |groups: usize, channels: usize| {
        let mut t = whole.clone();
        (t[gl], t[ml]) = (groups, channels);
        t
    };
    // One group a tile: channels `8*g + m` for the tile's `m`, every one of them written.
    assert!(k.target_is_dense(&tiles(1, 8)));
    assert!(k.target_is_dense(&tiles(1, 3)));
    // Two groups of three channels each: the box spans 11 channels and the tile writes 6.
    assert!(!k.target_is_dense(&tiles(2, 3)));
    // A box written in part is read first, at every visit; one written whole never is.
    let ranges = whole.clone();
    let order = vec![gl];
    let target_gets = |t: &[usize]| access_traffic(k, &p, t, &ranges, &order)[0].gets;
    assert_eq!(target_gets(&tiles(1, 8)), 0);
    assert_eq!(target_gets(&tiles(2, 3)), 2);
}

/// Scheduled, the convolution computes what the interpreter does on both targets, without
/// reading its output.
#[test]
fn a_scheduled_grouped_convolution_matches_the_interpreter() {
    let g = parse(GROUPED).unwrap();
    for target in [Target::sw26010(), Target::sw26010pro()] {
        let p = compile(&g, &target).unwrap();
        let k = &p.kernels[0];
        let s = k.schedule.as_ref().unwrap();
        assert!(k.target_is_dense(&s.tiles), "{}: tiles {:?}", target.name, s.tiles);
        let inputs: Vec<_> = p
            .inputs
            .iter()
            .enumerate()
            .map(|(i, &t)| random_tensor(&p.tensor(t).ty, 7, i))
            .collect();
        let want = interp::run(&g, &inputs).unwrap();
        let (got, _) = run_program(&p, &inputs, &target).unwrap();
        compare(&got[0], &want[0], Comparison::Tolerance).unwrap();
    }
}
