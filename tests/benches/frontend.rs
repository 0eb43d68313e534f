//! Frontend timings on the light models: ONNX import, and a full graph-interpreter run.
//!
//! `cargo bench -p swflow-tests --bench frontend` prints the median of several runs per
//! model. Needs the conformance data (`scripts/setup-conformance.sh`).

use std::time::{Duration, Instant};

use swflow_frontend::interp;
use swflow_frontend::onnx::{import_file, ImportOptions};
use swflow_tests::{conformance_dir, OnnxCase};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let dir = conformance_dir().expect("conformance data").join("light");
    let models = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect::<Vec<_>>();
    let models = if models.is_empty() {
        vec!["resnet50".to_string(), "vgg19".to_string(), "squeezenet".to_string()]
    } else {
        models
    };
    println!("{:<14} {:>12} {:>14}", "model", "import", "interpreter");
    for name in models {
        let path = dir.join(&name).join("model.onnx");
        let import: Vec<Duration> = (0..7)
            .map(|_| {
                let t = Instant::now();
                import_file(&path, &ImportOptions::default()).unwrap();
                t.elapsed()
            })
            .collect();
        let case = OnnxCase::new(dir.join(&name));
        let (g, inputs) = (case.import().unwrap(), case.inputs().unwrap());
        let run: Vec<Duration> = (0..5)
            .map(|_| {
                let t = Instant::now();
                interp::run(&g, &inputs).unwrap();
                t.elapsed()
            })
            .collect();
        println!(
            "{:<14} {:>12.2?} {:>14.2?}",
            format!("light_{name}"),
            median(import),
            median(run)
        );
    }
}
