//! Copies elided: the light models whose concatenations and channel shuffles lose their copy
//! kernels compute the same bits with them and without them, and their copies are gone where
//! the rules allow; so do concatenations along the first and the last axis and a channel
//! shuffle, through every engine.
//!
//! The loop-IR reference executor runs both programs, unscheduled, so a difference can only
//! come from the rewriting itself. The scheduled engines run the elided light models in the
//! conformance suites (`conformance_scheduled`, `conformance_jit`, `conformance_c`).

use swflow_codegen::jit;
use swflow_frontend::fuse::plan;
use swflow_frontend::interp;
use swflow_frontend::ir::{parse, Graph};
use swflow_frontend::simplify::simplify;
use swflow_frontend::tolerance::{compare, Comparison};
use swflow_scheduler::elide::elide_copies;
use swflow_scheduler::exec::run_reference;
use swflow_scheduler::loops::verify_program;
use swflow_scheduler::lower::lower_fused;
use swflow_scheduler::target::Target;
use swflow_tests::{cbuild, conformance_dir, seeded_inputs, OnnxCase};

/// Elides the copies of `g`'s fused loop IR; checks both programs verify and agree bit for
/// bit on `inputs`; returns the copies removed and the concatenation and transpose kernels
/// left.
fn elide(name: &str, g: &Graph, inputs: &[swflow_frontend::ir::Tensor]) -> (usize, Vec<String>) {
    let copies = lower_fused(g, &plan(g)).unwrap();
    let mut elided = copies.clone();
    let removed = elide_copies(&mut elided, &Target::sw26010());
    verify_program(&elided).unwrap();
    let want = run_reference(&copies, inputs).unwrap();
    let got = run_reference(&elided, inputs).unwrap();
    assert_eq!(got.len(), want.len());
    for (k, (got, want)) in got.iter().zip(&want).enumerate() {
        if let Err(m) = compare(got, want, Comparison::Exact) {
            panic!("{name}, output {k}: {}", m.message);
        }
    }
    let left = elided
        .kernels
        .iter()
        .filter(|k| k.op == "concat" || k.op == "transpose")
        .map(|k| k.name.clone())
        .collect();
    (removed, left)
}

/// [`elide`] on a light model, simplified as the pipeline simplifies it.
fn elide_light(name: &str) -> (usize, Vec<String>) {
    let case = OnnxCase::new(conformance_dir().unwrap().join("light").join(name));
    let g = simplify(&case.import().unwrap());
    let inputs = case.inputs_for(&g).unwrap();
    elide(name, &g, &inputs)
}

/// Concatenations along the last axis (rows of different lengths, read back by a padded
/// convolution) and along the first (batches, read by a pool), each operand computed by a
/// kernel of its own.
const AXES: &str = r#"graph "axes" {
  %x: f32[2,3,5,6] = input
  %w: f32[4,3,3,3] = input
  %a: f32[2,3,5,6] = relu(%x)
  %b: f32[2,3,5,2] = max_pool(%x) {kernel=[1,3], strides=[1,3], dilations=[1,1], pads=[0,0,0,0], ceil_mode=false}
  %ab: f32[2,3,5,8] = concat(%a, %b) {axis=3}
  %c: f32[2,4,5,8] = conv(%ab, %w) {strides=[1,1], dilations=[1,1], pads=[1,1,1,1], groups=1}
  %t: f32[2,3,5,6] = tanh(%x)
  %s: f32[2,3,5,6] = sigmoid(%x)
  %ts: f32[4,3,5,6] = concat(%t, %s) {axis=0}
  %p: f32[4,3,4,5] = avg_pool(%ts) {kernel=[2,2], strides=[1,1], dilations=[1,1], pads=[0,0,0,0], ceil_mode=false, count_include_pad=true}
  output "c" = %c
  output "p" = %p
}"#;

/// Both concatenations of [`AXES`] lose their copies; the JIT and the generated C compute
/// what the interpreter does, on both targets.
#[test]
fn first_and_last_axes() {
    let g = parse(AXES).unwrap();
    let inputs = seeded_inputs(&g, 7);
    let (removed, left) = elide("axes", &g, &inputs);
    assert_eq!(removed, 4);
    assert!(left.is_empty(), "copies left: {left:?}");
    on_every_engine("axes", &g, &inputs, "concat");
}

/// Compiles `g` for both targets, where no kernel of op `gone` is left; the JIT computes what
/// the interpreter does on `inputs`, and the generated C what the JIT does.
fn on_every_engine(name: &str, g: &Graph, inputs: &[swflow_frontend::ir::Tensor], gone: &str) {
    let want = interp::run(g, inputs).unwrap();
    for target in [Target::sw26010(), Target::sw26010pro()] {
        let p = swflow_scheduler::pipeline::compile(g, &target).unwrap();
        assert!(p.kernels.iter().all(|k| k.op != gone), "{}", target.name);
        let jitted = jit::compile(&p, &target).unwrap().run(&p, &target, inputs).unwrap();
        let dir = cbuild::scratch(&format!("elide-{}", target.name), name);
        cbuild::generate(&p, &target, &dir).unwrap();
        cbuild::make(&dir, &[]).unwrap();
        let built = cbuild::run_model(&dir, g, inputs, &[]).unwrap();
        for (k, ((j, c), w)) in jitted.outputs.iter().zip(&built).zip(&want).enumerate() {
            compare(j, w, Comparison::Tolerance)
                .unwrap_or_else(|m| panic!("{}: JIT output {k}: {}", target.name, m.message));
            compare(c, j, Comparison::Exact).unwrap_or_else(|m| panic!("{}: C output {k}: {}", target.name, m.message));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// A channel shuffle after a grouped convolution (4 groups of 4 channels reshaped to 4 x 4,
/// transposed and reshaped back), read by a padded depthwise convolution, which no transpose
/// joins as an index.
const SHUFFLE: &str = r#"graph "shuffle" {
  %x: f32[1,16,6,10] = input
  %w: f32[16,4,1,1] = input
  %wd: f32[16,1,3,3] = input
  %c: f32[1,16,6,10] = conv(%x, %w) {strides=[1,1], dilations=[1,1], pads=[0,0,0,0], groups=4}
  %v: f32[1,4,4,6,10] = reshape(%c) {shape=[1,4,4,6,10]}
  %t: f32[1,4,4,6,10] = transpose(%v) {perm=[0,2,1,3,4]}
  %u: f32[1,16,6,10] = reshape(%t) {shape=[1,16,6,10]}
  %d: f32[1,16,6,10] = conv(%u, %wd) {strides=[1,1], dilations=[1,1], pads=[1,1,1,1], groups=16}
  output "d" = %d
}"#;

/// The shuffle's copy goes: the grouped convolution writes channel `4*m + g` of the shuffled
/// tensor; the JIT and the generated C compute what the interpreter does, on both targets.
#[test]
fn a_channel_shuffle_is_written_in_place() {
    let g = parse(SHUFFLE).unwrap();
    let inputs = seeded_inputs(&g, 5);
    let (removed, left) = elide("shuffle", &g, &inputs);
    assert_eq!(removed, 1);
    assert!(left.is_empty(), "copies left: {left:?}");
    on_every_engine("shuffle", &g, &inputs, "transpose");
}

/// Every one of light ShuffleNet's 16 units shuffles its channels after its first grouped
/// convolution, and each of its 3 downsampling units concatenates two branches: the 6 copies
/// into concatenations go, and the transposes of the first 13 units. The last stage's 3 units
/// shuffle planes of 7 x 7 pixels, whose puts, one 196-byte block each, would take SW26010's
/// DMA queue longer than the copies.
#[test]
fn shufflenet_units_write_their_shuffled_channels() {
    let (removed, left) = elide_light("shufflenet");
    assert_eq!(removed, 19);
    assert_eq!(left, ["r167", "r179", "r191"]);
}

#[test]
fn densenet_blocks_write_their_last_concatenation() {
    let (removed, left) = elide_light("densenet121");
    assert_eq!(removed, 116);
    assert!(left.is_empty(), "copies left: {left:?}");
}

#[test]
fn inception_branches_write_their_concatenation() {
    let (removed, left) = elide_light("inception_v1");
    assert_eq!(removed, 36);
    assert!(left.is_empty(), "copies left: {left:?}");
}

/// Two branches of inception_v2 end in a convolution that keeps its reduced value for a later
/// reader; a kept value must have the target's type, so those two copies stay.
#[test]
fn kept_values_keep_their_copies() {
    let (removed, left) = elide_light("inception_v2");
    assert_eq!(removed, 36);
    assert_eq!(left, ["r73.part0", "r124.part0"]);
}

#[test]
fn squeezenet_expands_write_their_concatenation() {
    let (removed, left) = elide_light("squeezenet");
    assert_eq!(removed, 16);
    assert!(left.is_empty(), "copies left: {left:?}");
}

/// The two ResNet blocks whose projected shortcut joins their last convolution (the others'
/// filled weights would move more bytes than they save) read a concatenation of the branch
/// and the shortcut's input, which their producers write.
#[test]
fn resnet_shortcuts_write_their_concatenation() {
    let (removed, left) = elide_light("resnet50");
    assert_eq!(removed, 4);
    assert!(left.is_empty(), "copies left: {left:?}");
}
