//! The class of a box DMA, from the CPE program to the emulator: the C printer brackets a
//! tape box with `SWFLOW_DMA_CLASS` and prints data boxes as before, and the JIT sets the
//! class the same way, so the tape counters see exactly the marked transfers.

use swflow_codegen::cpe::{self, DmaClass, Fields, Func, Stmt};
use swflow_codegen::jit::{self, JitError, JitRun};
use swflow_codegen::kernel_function_names;
use swflow_emulator::KernelCounters;
use swflow_frontend::ir::{BinaryOp, DType, Graph, Op, Output, Tensor, TensorType};
use swflow_frontend::random::random_tensor;
use swflow_scheduler::loops::Program;
use swflow_scheduler::target::Target;

/// `z = x + w` on f32[256, 1024]: one kernel, two box gets and a box put per tile.
fn add() -> Graph {
    let mut g = Graph::new("add");
    let ty = TensorType::new(DType::F32, vec![256, 1024]).unwrap();
    let x = g.add_input("x", ty.clone());
    let w = g.add_input("w", ty);
    let z = g.add_node("z", Op::Binary(BinaryOp::Add), vec![x, w], None).unwrap();
    g.outputs.push(Output {
        name: "z".into(),
        node: z,
    });
    g
}

fn inputs(g: &Graph) -> Vec<Tensor> {
    g.inputs()
        .enumerate()
        .map(|(i, id)| random_tensor(&g.node(id).ty, 3, i))
        .collect()
}

/// Gives every box get of `body` (and of the lists nested in it) class `class`; returns how
/// many there are.
fn mark_gets(body: &mut [Stmt], class: DmaClass) -> usize {
    let mut n = 0;
    for s in body {
        match s {
            Stmt::Dma(d) if !d.put => {
                d.class = class;
                n += 1;
            }
            Stmt::For { body, .. } => n += mark_gets(body, class),
            Stmt::If { then, otherwise, .. } => n += mark_gets(then, class) + mark_gets(otherwise, class),
            _ => {}
        }
    }
    n
}

fn scheduled(g: &Graph, target: &Target) -> Program {
    swflow_scheduler::pipeline::compile(g, target).unwrap()
}

/// The run of `p` through the JIT with every box get of class `class`.
fn run(g: &Graph, p: &Program, target: &Target, class: DmaClass) -> Result<JitRun, JitError> {
    let mut marked = 0;
    let program = jit::compile_edited(p, target, &mut |_, f: &mut Func| {
        marked += mark_gets(&mut f.body, class)
    })?;
    assert!(marked > 0, "the program has box gets");
    program.run(p, target, &inputs(g))
}

#[test]
fn a_tape_class_set_in_the_program_reaches_the_counters_and_nothing_else_changes() {
    let g = add();
    let target = Target::sw26010();
    let p = scheduled(&g, &target);
    let data = run(&g, &p, &target, DmaClass::Data).unwrap();
    let tape = run(&g, &p, &target, DmaClass::Tape).unwrap();
    assert_eq!(data.outputs, tape.outputs);
    assert_eq!(data.modelled_seconds, tape.modelled_seconds);
    assert_eq!(
        data.stats.keys().collect::<Vec<_>>(),
        tape.stats.keys().collect::<Vec<_>>()
    );
    for (k, t) in &tape.stats {
        let d = &data.stats[k];
        let c = &t.counters;
        assert!(c.gets > 0, "{k}");
        assert_eq!(
            (c.tape_gets, c.tape_get_bytes, c.tape_puts, c.tape_put_bytes),
            (c.gets, c.get_bytes, 0, 0),
            "{k}: every tensor get and nothing else is tape"
        );
        let untaped = KernelCounters {
            tape_gets: 0,
            tape_get_bytes: 0,
            ..c.clone()
        };
        assert_eq!(untaped, d.counters, "{k}");
        assert_eq!(d.counters.tape_gets + d.counters.tape_puts, 0, "{k}");
        let mut time = t.time.clone();
        assert!(
            time.tape_queue_cycles > 0.0 && time.tape_queue_cycles < time.queue_busy_cycles,
            "{k}: the gets take part of the queue's time: {time:?}"
        );
        time.tape_queue_cycles = 0.0;
        assert_eq!(time, d.time, "{k}");
    }
    let total = &tape.report.total;
    assert_eq!(total.counters.tape_get_bytes, 2 * 256 * 1024 * 4);
    assert!(total.time.as_ref().unwrap().tape_seconds > 0.0);
}

#[test]
fn streamed_gets_with_nothing_pushed_are_caught_naming_kernel_and_cpe() {
    let g = add();
    let target = Target::sw26010();
    let p = scheduled(&g, &target);
    let err = run(&g, &p, &target, DmaClass::TapeStream)
        .err()
        .expect("nothing was pushed");
    let JitError::Run(v) = &err else { panic!("{err}") };
    assert_eq!(v.kernel, kernel_function_names(&p)[0]);
    assert_eq!(v.cpes, [0]);
    assert!(v.message.starts_with("tape stream get of "), "{err}");
    assert!(v.message.ends_with("pops no layer: none is outstanding"), "{err}");
}

#[test]
fn a_tape_box_prints_between_class_lines_and_data_boxes_print_as_before() {
    let g = add();
    let target = Target::sw26010();
    let p = scheduled(&g, &target);
    let k = &p.kernels[0];
    let name = &kernel_function_names(&p)[0];
    let build = || cpe::build(&p, k, Fields::of(&p, k), &target).unwrap();
    let data = cpe::print_body(&build(), name);
    assert!(!data.contains("SWFLOW_DMA_CLASS"), "{data}");
    let mut f = build();
    let gets = mark_gets(&mut f.body, DmaClass::Tape);
    let tape = cpe::print_body(&f, name);
    let lines: Vec<&str> = tape.lines().map(str::trim).collect();
    let sets: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i] == "SWFLOW_DMA_CLASS(SWFLOW_DMA_TAPE);")
        .collect();
    assert_eq!(sets.len(), gets, "{tape}");
    for i in sets {
        assert!(lines[i + 1].contains("+= swflow_dma_box(0, "), "{}", lines[i + 1]);
        assert_eq!(lines[i + 2], "SWFLOW_DMA_CLASS(SWFLOW_DMA_DATA);");
    }
    let without: String = tape
        .lines()
        .filter(|l| !l.contains("SWFLOW_DMA_CLASS"))
        .flat_map(|l| [l, "\n"])
        .collect();
    assert_eq!(without, data, "only the class lines are new");
    let mut f = build();
    mark_gets(&mut f.body, DmaClass::TapeStream);
    assert!(cpe::print_body(&f, name).contains("SWFLOW_DMA_CLASS(SWFLOW_DMA_TAPE_STREAM);"));
}
