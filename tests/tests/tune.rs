//! Tuned schedules: each kernel measured alone on the timed emulator under a few schedules
//! keeps the fastest. A tuned program computes what the untuned one does, through the JIT
//! and the generated C, and every kernel's modelled time in it is what tuning measured
//! alone, never more than the scheduler's choice; it may leave CPEs idle where that runs
//! faster. In a gradient program, the kernels the tape plan fixes keep their schedules, and
//! the gradients keep their bits.

use swflow_codegen::jit;
use swflow_codegen::kernel_function_names;
use swflow_codegen::tune::{alone, fixed_by_tape, tune, TuneError};
use swflow_frontend::interp;
use swflow_frontend::ir::{parse, Tensor};
use swflow_frontend::tolerance::{compare, Comparison};
use swflow_scheduler::loops::{verify_program, Program, TensorKind};
use swflow_scheduler::tape::TapeMode;
use swflow_scheduler::target::Target;
use swflow_tests::{cbuild, seeded_inputs, with_tape};

/// Convolutions, pools and elementwise maps big enough that their schedules differ in
/// modelled time; one branch reshapes, so a kernel reads a view.
const NET: &str = r#"graph "net" {
  %x: f32[1,16,40,40] = input
  %w1: f32[32,16,3,3] = input
  %w2: f32[64,32,1,1] = input
  %a: f32[1,32,40,40] = conv(%x, %w1) {strides=[1,1], dilations=[1,1], pads=[1,1,1,1], groups=1}
  %r: f32[1,32,40,40] = relu(%a)
  %p: f32[1,32,20,20] = max_pool(%r) {kernel=[2,2], strides=[2,2], dilations=[1,1], pads=[0,0,0,0], ceil_mode=false}
  %c: f32[1,64,20,20] = conv(%p, %w2) {strides=[1,1], dilations=[1,1], pads=[0,0,0,0], groups=1}
  %s: f32[1,64,20,20] = sigmoid(%c)
  %v: f32[64,400] = reshape(%s) {shape=[64,400]}
  %t: f32[64,400] = tanh(%v)
  output "p" = %p
  output "t" = %t
}"#;

/// `p` compiled by the JIT and run on `inputs`.
fn run(p: &Program, target: &Target, inputs: &[Tensor]) -> jit::JitRun {
    jit::compile(p, target).unwrap().run(p, target, inputs).unwrap()
}

#[test]
fn tuned_programs_compute_the_same_in_the_times_measured() {
    let g = parse(NET).unwrap();
    let inputs = seeded_inputs(&g, 11);
    let want = interp::run(&g, &inputs).unwrap();
    for target in [Target::sw26010(), Target::sw26010pro()] {
        let name = &target.name;
        let untuned = swflow_scheduler::pipeline::compile(&g, &target).unwrap();
        let mut p = untuned.clone();
        let tuned = tune(&mut p, &target, 12).unwrap();
        assert_eq!(tuned.len(), p.kernels.len(), "{name}");
        assert!(
            tuned.iter().any(|t| t.changed()),
            "{name}: no kernel changed: {tuned:?}"
        );
        let before = run(&untuned, &target, &inputs);
        let after = run(&p, &target, &inputs);
        let names = kernel_function_names(&p);
        for (t, f) in tuned.iter().zip(&names) {
            assert!(t.measured >= 1 && t.measured <= 12, "{name}: {t:?}");
            let (b, a) = (t.before.unwrap(), t.after.unwrap());
            assert!(a <= b, "{name}: {t:?}");
            assert_eq!(before.stats[f].time.modelled_cycles, b, "{name}: {f} before");
            assert_eq!(after.stats[f].time.modelled_cycles, a, "{name}: {f} after");
        }
        assert!(after.modelled_seconds < before.modelled_seconds, "{name}");
        let dir = cbuild::scratch(&format!("tune-{name}"), "net");
        cbuild::generate(&p, &target, &dir).unwrap();
        cbuild::make(&dir, &[]).unwrap();
        let built = cbuild::run_model(&dir, &g, &inputs, &[]).unwrap();
        for (k, ((j, c), w)) in after.outputs.iter().zip(&built).zip(&want).enumerate() {
            compare(j, w, Comparison::Tolerance).unwrap_or_else(|m| panic!("{name}: JIT output {k}: {}", m.message));
            compare(c, j, Comparison::Exact).unwrap_or_else(|m| panic!("{name}: C output {k}: {}", m.message));
        }
        for (k, (a, b)) in after.outputs.iter().zip(&before.outputs).enumerate() {
            compare(a, b, Comparison::Tolerance).unwrap_or_else(|m| panic!("{name}: output {k}: {}", m.message));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// A kernel alone reads as inputs what other kernels computed, keeps its constants and views,
/// and writes its outputs; nothing else is in its program.
#[test]
fn a_kernel_alone_reads_inputs_and_writes_outputs() {
    let g = parse(NET).unwrap();
    let target = Target::sw26010();
    let p = swflow_scheduler::pipeline::compile(&g, &target).unwrap();
    let tanh = p.kernels.iter().position(|k| k.op == "tanh").unwrap();
    let a = alone(&p, tanh);
    verify_program(&a).unwrap();
    assert_eq!(a.kernels.len(), 1);
    let kinds: Vec<String> = a
        .tensors
        .iter()
        .map(|t| match t.kind {
            TensorKind::Input => format!("{} input", t.name),
            TensorKind::Temp => format!("{} temp", t.name),
            TensorKind::View(of) => format!("{} view of {}", t.name, a.tensor(of).name),
            TensorKind::Const(_) => format!("{} const", t.name),
        })
        .collect();
    assert_eq!(a.inputs.len(), 1, "{kinds:?}");
    assert!(kinds.iter().any(|k| k.contains(" view of ")), "{kinds:?}");
    assert_eq!(a.outputs.len(), 1);
    assert!(matches!(a.tensor(a.outputs[0].1).kind, TensorKind::Temp));
    // The kernel alone runs.
    let x: Vec<_> = a
        .inputs
        .iter()
        .enumerate()
        .map(|(i, &id)| swflow_frontend::random::random_tensor(&a.tensor(id).ty, 3, i))
        .collect();
    let run = run(&a, &target, &x);
    assert_eq!(run.stats.len(), 1);
}

/// The example LeNet's gradient of the sum of its outputs, tuned in `stream` mode with each
/// tape-only value streamed or stored as records: the kernels that write those values and the
/// kernels that mirror them keep their schedules unmeasured, every other kernel is measured
/// and never slower, the program is faster, and its loss and gradients are those of the
/// untuned program bit for bit.
#[test]
fn a_gradient_program_is_tuned_around_its_tape() {
    use swflow_frontend::onnx::{ImportOptions, Loss, ModelFile};
    let path = swflow_tests::workspace_root().join("examples/lenet/model.onnx");
    let file = ModelFile::read(&path).unwrap();
    let program =
        swflow_frontend::training::gradient_program_of(&file, &ImportOptions::default(), &Loss::Sum, &[]).unwrap();
    let g = &program.graph;
    let inputs = seeded_inputs(g, 5);
    for target in [Target::sw26010(), Target::sw26010pro()] {
        let name = &target.name;
        let untuned = with_tape(g, &target, TapeMode::Stream).unwrap();
        let plan = untuned.tape.as_ref().unwrap();
        assert!(
            !plan.streams.is_empty() || !plan.records.is_empty(),
            "{name}: {}",
            plan.describe(&untuned)
        );
        let fixed = fixed_by_tape(&untuned);
        for m in &plan.mirrored {
            assert!(fixed[m.producer] && fixed[m.reader], "{name}");
        }
        let free = fixed.iter().filter(|&&f| !f).count();
        assert!(free > 0 && free < fixed.len(), "{name}: {fixed:?}");
        let mut p = untuned.clone();
        let tuned = tune(&mut p, &target, 4).unwrap();
        for ((t, &f), (a, b)) in tuned.iter().zip(&fixed).zip(p.kernels.iter().zip(&untuned.kernels)) {
            if f {
                assert_eq!((t.measured, t.before, t.after), (0, None, None), "{name}: {t:?}");
                assert_eq!(a.schedule, b.schedule, "{name}: {}", a.name);
            } else {
                assert!(t.measured >= 1, "{name}: {t:?}");
                assert!(t.after.unwrap() <= t.before.unwrap(), "{name}: {t:?}");
            }
        }
        assert!(
            tuned.iter().any(|t| t.changed()),
            "{name}: no kernel changed: {tuned:?}"
        );
        let before = run(&untuned, &target, &inputs);
        let after = run(&p, &target, &inputs);
        assert!(after.modelled_seconds < before.modelled_seconds, "{name}");
        for (k, (a, b)) in after.outputs.iter().zip(&before.outputs).enumerate() {
            compare(a, b, Comparison::Exact).unwrap_or_else(|m| panic!("{name}: output {k}: {}", m.message));
        }
    }
}

/// A matrix product too small for the mesh, as a transformer block's projection of 12 tokens:
/// spread over every CPE, each takes three of its 192 elements, and the queue serves 64 CPEs'
/// short, scattered transfers.
const SMALL: &str = r#"graph "small" {
  %x: f32[12,16] = input
  %w: f32[16,16] = input
  %y: f32[12,16] = matmul(%x, %w)
  output "y" = %y
}"#;

/// Tuning also measures partitions that leave CPEs idle, which the scheduler does not rank
/// (`partition::sparse`): the small product runs faster on fewer CPEs, and computes the same
/// bits as under the scheduler's schedule.
#[test]
fn tuning_measures_partitions_that_leave_cpes_idle() {
    let g = parse(SMALL).unwrap();
    let inputs = seeded_inputs(&g, 3);
    for target in [Target::sw26010(), Target::sw26010pro()] {
        let name = &target.name;
        let untuned = swflow_scheduler::pipeline::compile(&g, &target).unwrap();
        assert_eq!(untuned.kernels.len(), 1, "{name}");
        let points = |p: &Program| p.kernels[0].schedule.as_ref().unwrap().partition_points;
        assert!(points(&untuned) >= target.cpes, "{name}");
        let mut p = untuned.clone();
        let tuned = tune(&mut p, &target, 8).unwrap();
        assert!(points(&p) < target.cpes, "{name}: {:?}", tuned[0]);
        assert!(
            tuned[0].after.unwrap() < tuned[0].before.unwrap(),
            "{name}: {:?}",
            tuned[0]
        );
        let before = run(&untuned, &target, &inputs);
        let after = run(&p, &target, &inputs);
        assert!(after.modelled_seconds < before.modelled_seconds, "{name}");
        compare(&after.outputs[0], &before.outputs[0], Comparison::Exact)
            .unwrap_or_else(|m| panic!("{name}: {}", m.message));
    }
}

#[test]
fn tuning_needs_a_budget() {
    let g = parse(NET).unwrap();
    let target = Target::sw26010();
    let mut p = swflow_scheduler::pipeline::compile(&g, &target).unwrap();
    assert!(matches!(tune(&mut p, &target, 0), Err(TuneError::NoBudget)));
}
