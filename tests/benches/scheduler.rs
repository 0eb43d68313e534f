//! Scheduler figures on the light models: scheduling time, DMA traffic against compulsory
//! traffic, DMA transfer count and mean size, memory-plan peak against the naive sum, and
//! (with `--run`) the time to execute the scheduled kernels on the modelled CPEs.
//!
//! `cargo bench -p swflow-tests --bench scheduler -- [--target sw26010|sw26010pro] [--run] [MODEL...]`

use std::time::Instant;

use swflow_scheduler::exec::cpe::{kernel_stats, run_program};
use swflow_scheduler::loops::TensorKind;
use swflow_scheduler::target::Target;
use swflow_scheduler::{lower::lower, memplan, schedule::schedule_program};
use swflow_tests::{conformance_dir, OnnxCase};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let target_name = args
        .iter()
        .position(|a| a == "--target")
        .map(|i| args[i + 1].clone())
        .unwrap_or_else(|| "sw26010".into());
    let run = args.iter().any(|a| a == "--run");
    let mut models: Vec<String> = args
        .iter()
        .filter(|a| !a.starts_with("--") && **a != target_name)
        .cloned()
        .collect();
    if models.is_empty() {
        models = vec!["resnet50".into(), "vgg19".into()];
    }
    let target = Target::resolve(&target_name).expect("known target");
    let dir = conformance_dir().expect("conformance data").join("light");
    for name in models {
        let case = OnnxCase::new(dir.join(&name));
        let g = case.import().unwrap();
        let mut p = lower(&g).unwrap();
        let times: Vec<f64> = (0..5)
            .map(|_| {
                let mut q = p.clone();
                let t = Instant::now();
                schedule_program(&mut q, &target).unwrap();
                t.elapsed().as_secs_f64()
            })
            .collect();
        let mut sorted = times.clone();
        sorted.sort_by(f64::total_cmp);
        schedule_program(&mut p, &target).unwrap();
        let stats: Vec<_> = p
            .kernels
            .iter()
            .map(|k| kernel_stats(&p, k, k.schedule.as_ref().unwrap(), &target))
            .collect();
        let (gets, puts) = (
            stats.iter().map(|s| s.traffic.gets).sum::<usize>(),
            stats.iter().map(|s| s.traffic.puts).sum::<usize>(),
        );
        let bytes: usize = stats.iter().map(|s| s.traffic.get_bytes + s.traffic.put_bytes).sum();
        let direct: usize = stats.iter().map(|s| s.traffic.direct_elements).sum();
        // Compulsory: every kernel reads each operand once and writes its target once.
        let compulsory: usize = p
            .kernels
            .iter()
            .map(|k| {
                let mut ts: Vec<_> = k.operands.iter().map(|&t| p.storage(t)).collect();
                ts.sort();
                ts.dedup();
                ts.iter().map(|&t| p.tensor(t).ty.size_bytes()).sum::<usize>()
            })
            .sum();
        let plan = memplan::plan(&p, &target);
        memplan::check(&p, &plan).unwrap();
        let weights: usize = p
            .tensors
            .iter()
            .filter(|t| matches!(t.kind, TensorKind::Const(_)))
            .map(|t| t.ty.size_bytes())
            .sum();
        println!("light_{name} on {}: {} kernels", target.name, p.kernels.len());
        println!("  scheduling time       {:.2} ms (median of 5)", sorted[2] * 1e3);
        println!(
            "  DMA bytes             {:.1} MB ({:.2}x the compulsory {:.1} MB)",
            bytes as f64 / 1e6,
            bytes as f64 / compulsory as f64,
            compulsory as f64 / 1e6
        );
        println!(
            "  DMA transfers         {} ({} gets, {} puts), mean {:.0} bytes",
            gets + puts,
            gets,
            puts,
            bytes as f64 / (gets + puts) as f64
        );
        println!("  direct accesses       {direct} elements");
        println!(
            "  memory plan           {:.1} MB peak vs {:.1} MB naive ({:.1} MB of constants)",
            plan.arena_bytes as f64 / 1e6,
            plan.naive_bytes as f64 / 1e6,
            weights as f64 / 1e6
        );
        if run {
            let t = Instant::now();
            let (out, _) = run_program(&p, &case.inputs().unwrap(), &target).unwrap();
            case.check(&out).unwrap();
            println!(
                "  scheduled execution   {:.2} s on the modelled CPEs, outputs match",
                t.elapsed().as_secs_f64()
            );
        }
    }
}
