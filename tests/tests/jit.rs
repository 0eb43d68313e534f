//! The Cranelift JIT against the generated C: the same numbers, the same emulator counters and
//! modelled cycles, broken kernels caught with the kernel and CPE named, and mutated loop IR
//! that is an error, never a crash.

use std::process::Command;

use serde_json::Value;
use swflow_codegen::cpe::{Func, Int, Stmt};
use swflow_codegen::jit::{self, JitError};
use swflow_frontend::interp;
use swflow_frontend::ir::{Graph, Tensor};
use swflow_frontend::onnx::{import_file, ImportOptions};
use swflow_frontend::random::random_tensor;
use swflow_frontend::tolerance::{compare, Comparison};
use swflow_scheduler::loops::Program;
use swflow_scheduler::target::Target;
use swflow_tests::cbuild::{compile, make, scratch};
use swflow_tests::workspace_root;

fn lenet() -> Graph {
    import_file(
        &workspace_root().join("examples/lenet/model.onnx"),
        &ImportOptions::default(),
    )
    .unwrap()
}

fn inputs_of(g: &Graph) -> Vec<Tensor> {
    g.inputs()
        .enumerate()
        .map(|(i, id)| random_tensor(&g.node(id).ty, 7, i))
        .collect()
}

fn scheduled(g: &Graph, target: &Target) -> Program {
    swflow_scheduler::pipeline::compile(g, target).unwrap()
}

/// The emulator's report of the C build of `g` run on the inputs the program makes itself
/// (seed 0): its JSON.
fn c_report(g: &Graph, target: &Target, name: &str) -> Value {
    let dir = scratch("jit", name);
    compile(g, target, &dir).unwrap();
    make(&dir, &[]).unwrap();
    let stats = dir.join("stats.json");
    let out = Command::new(dir.join("model"))
        .env("SWFLOW_STATS", &stats)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    report
}

#[test]
fn lenet_matches_the_interpreter_on_both_targets() {
    let g = lenet();
    let inputs = inputs_of(&g);
    let want = interp::run(&g, &inputs).unwrap();
    for target in [Target::sw26010(), Target::sw26010pro()] {
        let p = scheduled(&g, &target);
        let run = jit::compile(&p, &target).unwrap().run(&p, &target, &inputs).unwrap();
        for (a, b) in run.outputs.iter().zip(&want) {
            compare(a, b, Comparison::Tolerance).unwrap_or_else(|m| panic!("{}: {}", target.name, m.message));
        }
    }
}

#[test]
fn lenet_counters_and_cycles_equal_the_c_path() {
    let g = lenet();
    for target in [Target::sw26010(), Target::sw26010pro()] {
        let c = c_report(&g, &target, &format!("lenet-{}", target.name));
        // The C program fills inputs it is not given with seed 0.
        let inputs: Vec<Tensor> = g
            .inputs()
            .enumerate()
            .map(|(i, id)| random_tensor(&g.node(id).ty, 0, i))
            .collect();
        let p = scheduled(&g, &target);
        let run = jit::compile(&p, &target).unwrap().run(&p, &target, &inputs).unwrap();
        let j = serde_json::to_value(&run.report).unwrap();
        assert_eq!(
            j["kernels"], c["kernels"],
            "{}: per-kernel counters and time",
            target.name
        );
        assert_eq!(j["total"], c["total"], "{}", target.name);
        assert!(j["total_modelled_seconds"].as_f64().unwrap() > 0.0);
    }
}

/// Runs lenet on sw26010 through the JIT with `edit` applied to kernel `kernel`'s CPE
/// program; returns the run's error.
fn broken(kernel: &str, edit: impl Fn(&mut Func)) -> JitError {
    let g = lenet();
    let target = Target::sw26010();
    let p = scheduled(&g, &target);
    let mut edited = false;
    let program = jit::compile_edited(&p, &target, &mut |name, f| {
        if name == kernel {
            edit(f);
            edited = true;
        }
    })
    .unwrap();
    assert!(edited, "no kernel {kernel}");
    match program.run(&p, &target, &inputs_of(&g)) {
        Ok(_) => panic!("the broken {kernel} ran"),
        Err(e) => e,
    }
}

#[test]
fn dma_past_an_ldm_buffer_is_caught() {
    // The kernel declares its tile buffer one element shorter than the DMA that fills it.
    let err = broken("k_c1_0", |f| {
        let b = f.bufs.iter_mut().find(|b| b.name == "c1_0_pad").unwrap();
        b.elements -= 1;
    })
    .to_string();
    assert!(err.starts_with("kernel 'k_c1_0' on CPE "), "{err}");
    assert!(err.contains("past its end"), "{err}");
    assert!(err.contains("LDM buffer 'c1_0_pad'"), "{err}");
}

#[test]
fn two_cpes_writing_one_range_is_caught() {
    // Every CPE computes the first CPE's chunk and writes it back.
    let err = broken("k_r1", |f| {
        let first = f.vars.iter().position(|v| v.name == "first").unwrap();
        for s in &mut f.body {
            if let Stmt::Set(v, e) = s {
                if v.0 as usize == first {
                    *e = Int::Const(0);
                }
            }
        }
    })
    .to_string();
    assert!(err.starts_with("kernel 'k_r1' on CPEs 0 and "), "{err}");
    assert!(err.contains("both write arena bytes"), "{err}");
}

#[test]
fn a_transfer_never_waited_for_is_caught() {
    let err = broken("k_r1", |f| {
        fn drop_waits(body: &mut Vec<Stmt>) {
            body.retain(|s| !matches!(s, Stmt::Wait { reply: 1, .. }));
            for s in body {
                match s {
                    Stmt::For { body, .. } => drop_waits(body),
                    Stmt::If { then, otherwise, .. } => {
                        drop_waits(then);
                        drop_waits(otherwise);
                    }
                    _ => {}
                }
            }
        }
        drop_waits(&mut f.body);
    })
    .to_string();
    assert!(err.starts_with("kernel 'k_r1' on CPE "), "{err}");
    assert!(err.contains("never waited for"), "{err}");
}

#[test]
fn an_ldm_access_outside_its_buffer_is_caught() {
    // The compute loop indexes one element past the tile: the DMA is fine, the access is not.
    let err = broken("k_r1", |f| {
        fn shift(body: &mut [Stmt]) {
            for s in body {
                match s {
                    Stmt::Store {
                        place: swflow_codegen::cpe::Place::Ldm { index, .. },
                        ..
                    } => *index = index.clone() + Int::Const(1 << 20),
                    Stmt::For { body, .. } => shift(body),
                    Stmt::If { then, otherwise, .. } => {
                        shift(then);
                        shift(otherwise);
                    }
                    _ => {}
                }
            }
        }
        shift(&mut f.body);
    })
    .to_string();
    assert!(err.starts_with("kernel 'k_r1' on CPE "), "{err}");
    assert!(err.contains("outside LDM buffer"), "{err}");
}
