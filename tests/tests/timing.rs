//! The emulator's timing model on generated programs: the operations generated code reports
//! are the ones it executes, double buffering shows in the modelled time, modelled time is
//! deterministic, and the trace and the `bench` verb report it.

use std::path::Path;
use std::process::Command;

use serde_json::Value;
use swflow_frontend::ir::{DType, Graph, Op, Output, TensorType};
use swflow_scheduler::loops::Program;
use swflow_scheduler::schedule::Schedule;
use swflow_scheduler::target::Target;
use swflow_tests::cbuild::{emulator_lib, make_reusing_runtime, scratch};
use swflow_tests::workspace_root;

/// `C[m, 2048] = A[m, 512] x B[512, 2048]`; with m = 64, the matrix product of swTVM's
/// examples.
fn matmul(m: usize) -> Graph {
    let mut g = Graph::new("matmul");
    let a = g.add_input("A", TensorType::new(DType::F32, vec![m, 512]).unwrap());
    let b = g.add_input("B", TensorType::new(DType::F32, vec![512, 2048]).unwrap());
    let c = g.add_node("C", Op::MatMul, vec![a, b], None).unwrap();
    g.outputs.push(Output {
        name: "C".into(),
        node: c,
    });
    g
}

/// Points of the product `matmul(m)`.
fn points(m: usize) -> u64 {
    (m * 512 * 2048) as u64
}

/// Generates, builds and runs `p` in `dir` with pseudo-random inputs; returns the emulator's
/// statistics and the output file's bytes.
fn build_and_run(p: &Program, target: &Target, dir: &Path, env: &[(&str, &str)]) -> (Value, Vec<u8>) {
    let lib = emulator_lib().unwrap();
    let out = swflow_codegen::generate(p, target, lib.to_str().unwrap()).unwrap();
    if dir.exists() {
        std::fs::remove_dir_all(dir).unwrap();
    }
    out.write_to(dir).unwrap();
    make_reusing_runtime(dir).unwrap();
    let stats = dir.join("stats.json");
    let run = Command::new(dir.join("model"))
        .args(["--seed", "7", "--output"])
        .arg(dir.join("out"))
        .env("SWFLOW_STATS", &stats)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let output = std::fs::read_dir(dir.join("out"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let stats: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    (stats, std::fs::read(output).unwrap())
}

fn kernel<'a>(stats: &'a Value, name: &str) -> &'a Value {
    stats["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["kernel"] == name)
        .unwrap_or_else(|| panic!("no kernel {name} in {stats}"))
}

/// Statistics of the kernel of `p` (its only one) built from `p` as is and with the buffers
/// of the accesses `single` (all when `None`) single; asserts both compute the same numbers
/// and exactly `flops`.
fn with_and_without_double_buffering(
    p: &Program,
    target: &Target,
    flops: u64,
    label: &str,
    single: Option<usize>,
) -> (Value, Value) {
    let mut undoubled = p.clone();
    for (i, b) in undoubled.kernels[0]
        .schedule
        .as_mut()
        .unwrap()
        .buffers
        .iter_mut()
        .enumerate()
    {
        if single.is_none_or(|s| s == i) {
            b.double = false;
            b.posted = false;
        }
    }
    let single = undoubled;
    let (with, out_with) = build_and_run(p, target, &scratch("timing", &format!("{label}-double")), &[]);
    let (without, out_without) = build_and_run(&single, target, &scratch("timing", &format!("{label}-single")), &[]);
    assert_eq!(out_with, out_without, "double buffering changes no number");
    let name = format!("k_{}", p.kernels[0].name);
    let (a, b) = (kernel(&with, &name).clone(), kernel(&without, &name).clone());
    for k in [&a, &b] {
        assert_eq!(k["flops"], flops);
    }
    let (ta, tb) = (
        a["modelled_cycles"].as_f64().unwrap(),
        b["modelled_cycles"].as_f64().unwrap(),
    );
    println!(
        "{label} on {}: {ta:.0} cycles double-buffered, {tb:.0} without ({:+.1}%); DMA wait {:.1}% against {:.1}%",
        target.name,
        100.0 * (tb / ta - 1.0),
        100.0 * a["dma_wait"].as_f64().unwrap(),
        100.0 * b["dma_wait"].as_f64().unwrap()
    );
    (a, b)
}

/// Double buffering shows in the modelled time. In `C[256, 2048] = A[256, 512] x B[512,
/// 2048]` with four rows per CPE and tiles pinned to 4x64x64, B's 16 KiB tiles are
/// double-buffered: the gets of the next tile overlap the compute of this one, so the kernel
/// waits less for DMA and runs faster than the same schedule with single buffers. The gain is
/// what the waits were: on a target without vectors, the scalar compute of a tile (16384
/// multiply-adds, each waiting for the one before into the same element) takes longer than
/// the 64 CPEs' gets of it take the DMA queue (each CPE's rows of vector code would not hide
/// them).
///
/// The scheduler's own schedules of the 64-row product are printed for comparison.
#[test]
fn double_buffering_overlaps_dma_with_compute() {
    for target in [Target::sw26010(), Target::sw26010pro()] {
        let p = swflow_scheduler::pipeline::compile(&matmul(64), &target).unwrap();
        with_and_without_double_buffering(&p, &target, 2 * points(64), "scheduler's tiles, 64 rows", None);
    }
    let target = Target {
        f32_vector_lanes: 1,
        ..Target::sw26010()
    };
    let mut p = swflow_scheduler::pipeline::compile(&matmul(256), &target).unwrap();
    let k = p.kernels[0].clone();
    let mut s = k.schedule.clone().unwrap();
    // Rows of the product split over the CPEs, four each.
    let part = swflow_scheduler::schedule::partition::partition(&k, &target);
    s.ranges = (0..k.loops.len()).map(|l| part.range(&k, l)).collect();
    (s.partition, s.partition_points, s.chunk, s.grid) = (part.loops, part.points, part.chunk, part.grid);
    for (l, tile) in [("m", 4), ("n", 64), ("k", 64)] {
        let i = k.loops.iter().position(|x| x.name == l).unwrap();
        s.tiles[i] = tile;
    }
    s.order = swflow_scheduler::schedule::reorder::best_order(&k, &p, &s.tiles, &s.ranges).order;
    s.buffers = swflow_scheduler::schedule::dma::plan_buffers(&k, &p, &s, &target);
    swflow_scheduler::schedule::verify_schedule(&k, &p, &s, &target).unwrap();
    assert!(
        s.buffers[2].double && s.buffers[2].dims == [64, 64],
        "B's tile is double-buffered: {s:?}"
    );
    p.kernels[0].schedule = Some(s);
    let (a, b) = with_and_without_double_buffering(&p, &target, 2 * points(256), "4x64x64 tiles, 256 rows", None);
    assert!(a["dma_wait"].as_f64() < b["dma_wait"].as_f64());
    let (ta, tb) = (
        a["modelled_cycles"].as_f64().unwrap(),
        b["modelled_cycles"].as_f64().unwrap(),
    );
    assert!(ta < tb, "double buffering saves time here: {ta} against {tb}");
}

/// A 3x3 convolution of 8 channels into 16 over a 256x64 map, on a target without vectors:
/// enough compute per output row that a row's put can hide behind the next row's.
const CONV: &str = r#"graph "conv" {
  %x: f32[1,8,256,64] = input
  %w: f32[16,8,3,3] = input
  %y: f32[1,16,256,64] = conv(%x, %w) {strides=[1,1], dilations=[1,1], pads=[1,1,1,1], groups=1}
  output "y" = %y
}"#;

/// [`CONV`] compiled for `base` without vectors, and a schedule of its kernel with the
/// scheduler's partition, `tiles` (by loop name; each at most its range), the tile loops in
/// `order` (by name; the best order when empty), its buffers planned and verified.
fn conv_tiled(base: Target, tiles: &[(&str, usize)], order: &[&str]) -> (Target, Program, Schedule) {
    let target = Target {
        f32_vector_lanes: 1,
        ..base
    };
    let g = swflow_frontend::ir::parse(CONV).unwrap();
    let p = swflow_scheduler::pipeline::compile(&g, &target).unwrap();
    let k = &p.kernels[0];
    let mut s = k.schedule.clone().unwrap();
    for &(l, tile) in tiles {
        let i = conv_loop(&p, l);
        s.tiles[i] = tile.min(s.ranges[i]);
    }
    s.order = match order.is_empty() {
        true => swflow_scheduler::schedule::reorder::best_order(k, &p, &s.tiles, &s.ranges).order,
        false => order.iter().map(|l| conv_loop(&p, l)).collect(),
    };
    s.buffers = swflow_scheduler::schedule::dma::plan_buffers(k, &p, &s, &target);
    swflow_scheduler::schedule::verify_schedule(k, &p, &s, &target).unwrap();
    (target, p, s)
}

/// The position of the loop named `name` in the kernel of [`CONV`] compiled as `p`.
fn conv_loop(p: &Program, name: &str) -> usize {
    p.kernels[0].loops.iter().position(|x| x.name == name).unwrap()
}

/// A double-buffered target leaves each tile's put in flight while the next tile computes.
/// With the convolution [`CONV`] cut into tiles of one output row, every CPE puts several
/// rows; with the target double-buffered it waits for each put only before writing its half
/// again, and at the end. The numbers are the same, the transfers too, and the kernel waits
/// less and ends sooner. A target whose boxes a reduction tile loop around them revisits
/// may not be double-buffered: a later get of the box could overtake the put in flight.
#[test]
fn a_double_buffered_target_puts_while_the_next_tile_computes() {
    for base in [Target::sw26010(), Target::sw26010pro()] {
        let (target, mut p, s) = conv_tiled(base, &[("m", 16), ("o0", 1), ("o1", 64), ("c", 8)], &[]);
        let k = p.kernels[0].clone();
        let at = |l: &str| conv_loop(&p, l);
        assert!(
            s.buffers[0].double && s.buffers[0].depth > 0,
            "the output's tile is double-buffered: {s:?}"
        );

        let mut revisited = s.clone();
        revisited.tiles[at("c")] = 4;
        revisited.order = vec![at("c"), at("o0")];
        revisited.buffers = swflow_scheduler::schedule::dma::plan_buffers(&k, &p, &revisited, &target);
        assert!(!revisited.buffers[0].double);
        revisited.buffers[0].double = true;
        let refused = swflow_scheduler::schedule::verify_schedule(&k, &p, &revisited, &target).unwrap_err();
        assert!(refused.contains("never revisited"), "{refused}");

        p.kernels[0].schedule = Some(s);
        let flops = 2 * 16 * 256 * 64 * 8 * 9;
        let (a, b) = with_and_without_double_buffering(&p, &target, flops, "rows of the output", Some(0));
        assert_eq!(a["puts"], b["puts"]);
        assert_eq!(a["put_bytes"], b["put_bytes"]);
        assert!(a["dma_wait"].as_f64() < b["dma_wait"].as_f64());
        let (ta, tb) = (
            a["modelled_cycles"].as_f64().unwrap(),
            b["modelled_cycles"].as_f64().unwrap(),
        );
        assert!(ta < tb, "the puts overlap compute: {ta} against {tb}");
    }
}

/// A double buffer inside two tile loops prefetches across the outer one: the box of the
/// outer loop's next tile is fetched while the inner loop's last tile computes, so a CPE
/// waits for a get at its first tile only. With the convolution [`CONV`] in tiles of two
/// output rows (the outer loop, each tile's put at its end) and four input channels (the
/// inner loop), on a target without vectors (compute far longer than any CPE's gets), each
/// CPE waits for its input and weights before its first compute and never again before its
/// last, where a get issued at each outer tile's start would wait (behind the puts of the
/// tile before) every time.
#[test]
fn a_double_buffer_prefetches_across_the_outer_tile_loops() {
    for base in [Target::sw26010(), Target::sw26010pro()] {
        let tiles = [("m", 16), ("o0", 2), ("o1", 64), ("c", 4)];
        let (target, mut p, s) = conv_tiled(base, &tiles, &["o0", "c"]);
        let outer_tiles = s.ranges[conv_loop(&p, "o0")] / 2;
        assert!(outer_tiles >= 2, "several outer tiles per CPE: {s:?}");
        for b in &s.buffers[1..] {
            assert!(
                b.double && b.depth == 2,
                "input and weights double-buffered inside both loops: {s:?}"
            );
        }
        p.kernels[0].schedule = Some(s);
        let dir = scratch("timing", &format!("prefetch-across-{}", target.name));
        let trace = dir.with_extension("json");
        build_and_run(&p, &target, &dir, &[("SWFLOW_TRACE", trace.to_str().unwrap())]);
        let events: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
        std::fs::remove_file(trace).unwrap();
        for cpe in 0..target.cpes as u64 {
            let on = |name: &str| -> Vec<(f64, f64)> {
                events
                    .iter()
                    .filter(|e| e["ph"] == "X" && e["tid"] == cpe && e["name"] == name)
                    .map(|e| (e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap()))
                    .collect()
            };
            // The tiles' computes are the long ones: from the first tile's on, no wait until
            // the last (the final puts' drain comes after it).
            let computes = on("compute");
            let longest = computes.iter().map(|c| c.1).fold(0.0, f64::max);
            let first = computes
                .iter()
                .filter(|c| c.1 > longest / 2.0)
                .map(|c| c.0)
                .fold(f64::INFINITY, f64::min);
            let last = computes.iter().map(|c| c.0).fold(0.0, f64::max);
            let waits = on("DMA wait");
            let between = waits.iter().filter(|w| w.1 > 0.0 && w.0 > first && w.0 < last).count();
            assert_eq!(
                between, 0,
                "CPE {cpe} on {} waits for DMA {between} times between its first tile's compute and its last \
                 ({outer_tiles} outer tiles)",
                target.name
            );
        }
    }
}

/// A single buffer's next box is fetched as soon as the tile before has computed, before that
/// tile's puts: the DMA queue serves a CPE's transfers in the order they are issued, so a get
/// issued at the start of the next tile would wait for the puts. With the convolution
/// [`CONV`] in tiles of two output rows, its input and output single-buffered, the input's
/// get for the next tile comes before the output's put in the tile loop's body (after the
/// first tile's, issued at the loop's start), and the numbers are those of the double-buffered
/// schedule.
#[test]
fn a_single_buffer_fetches_its_next_box_before_the_tiles_puts() {
    for base in [Target::sw26010(), Target::sw26010pro()] {
        let (target, mut p, s) = conv_tiled(base, &[("m", 16), ("o0", 2), ("o1", 64), ("c", 8)], &["o0"]);
        let mut single = s.clone();
        for b in &mut single.buffers {
            b.double = false;
        }
        let x = 1 + single.buffers[1..]
            .iter()
            .position(|b| b.depth == 1)
            .expect("a read buffer filled at each output tile");
        p.kernels[0].schedule = Some(s);
        let mut p_single = p.clone();
        p_single.kernels[0].schedule = Some(single);

        let dir = scratch("timing", &format!("early-gets-{}", target.name));
        let (_, single_out) = build_and_run(&p_single, &target, &dir, &[]);
        let source = std::fs::read_to_string(dir.join(format!("slave/k_{}_slave.c", p.kernels[0].name))).unwrap();
        let access = &swflow_scheduler::schedule::accesses(&p.kernels[0])[x];
        let operand = &p.tensor(p.kernels[0].operands[access.operand]).name;
        // Its gets, guarded (the convolution's padding) or not.
        let get = format!("ldm->{operand}, (char *)para.{operand},");
        let gets: Vec<usize> = source.match_indices(&get).map(|(at, _)| at).collect();
        let put = source.find("swflow_dma_box(1, ").expect("the output's put");
        assert!(
            gets.len() >= 2 && gets[0] < put && gets[1] < put,
            "{}: the first get at the loop's start, the next before the put: {gets:?}, put at {put}",
            target.name
        );
        assert!(source.contains("once the tile before has computed"));

        let (_, double_out) = build_and_run(&p, &target, &scratch("timing", "early-gets-double"), &[]);
        assert_eq!(single_out, double_out, "{}: the same numbers", target.name);
    }
}

/// Two runs of the same program give byte-identical statistics, whatever order the CPE
/// threads ran in; the untimed run computes the same numbers and reports no time.
#[test]
fn modelled_time_is_deterministic() {
    let target = Target::sw26010pro();
    let g =
        swflow_frontend::onnx::import_file(&workspace_root().join("examples/lenet/model.onnx"), &Default::default())
            .unwrap();
    let p = swflow_scheduler::pipeline::compile(&g, &target).unwrap();
    let dir = scratch("timing", "lenet");
    let (first, out) = build_and_run(&p, &target, &dir, &[]);
    let runs: Vec<String> = (0..2)
        .map(|i| {
            let stats = dir.join(format!("again{i}.json"));
            let run = Command::new(dir.join("model"))
                .args(["--seed", "7"])
                .env("SWFLOW_STATS", &stats)
                .output()
                .unwrap();
            assert!(run.status.success());
            std::fs::read_to_string(&stats).unwrap()
        })
        .collect();
    assert_eq!(runs[0], runs[1]);
    assert_eq!(serde_json::from_str::<Value>(&runs[0]).unwrap(), first);
    assert!(first["total_modelled_seconds"].as_f64().unwrap() > 0.0);
    let (untimed, untimed_out) = build_and_run(&p, &target, &dir, &[("SWFLOW_TIMING", "off")]);
    assert_eq!(out, untimed_out);
    assert!(untimed.get("total_modelled_seconds").is_none());
    assert!(untimed["kernels"][0].get("modelled_cycles").is_none());
}

/// `SWFLOW_TRACE` writes a Chrome trace: a JSON array with a named track per CPE and one for
/// the DMA queue, complete events on them, and per launch the kernel on every CPE track.
#[test]
fn trace_is_chrome_json_with_a_track_per_cpe_and_the_dma_queue() {
    let target = Target::sw26010();
    let g =
        swflow_frontend::onnx::import_file(&workspace_root().join("examples/lenet/model.onnx"), &Default::default())
            .unwrap();
    let p = swflow_scheduler::pipeline::compile(&g, &target).unwrap();
    let dir = scratch("timing", "trace");
    let trace = dir.with_extension("json");
    let (stats, _) = build_and_run(&p, &target, &dir, &[("SWFLOW_TRACE", trace.to_str().unwrap())]);
    let events: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    let names: Vec<&str> = events
        .iter()
        .filter(|e| e["name"] == "thread_name")
        .map(|e| e["args"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 65);
    assert_eq!(names[0], "CPE 0");
    assert_eq!(names[64], "DMA queue");
    let spans: Vec<&Value> = events.iter().filter(|e| e["ph"] == "X").collect();
    let on = |tid: u64, name: &str| spans.iter().filter(|e| e["tid"] == tid && e["name"] == name).count();
    assert!(on(64, "get") > 0 && on(64, "put") > 0);
    assert!(on(0, "compute") > 0);
    let kernels = stats["kernels"].as_array().unwrap();
    let launches: u64 = kernels.iter().map(|k| k["launches"].as_u64().unwrap()).sum();
    assert_eq!(
        on(0, kernels[0]["kernel"].as_str().unwrap()) as u64,
        kernels[0]["launches"].as_u64().unwrap()
    );
    let launch_spans = spans
        .iter()
        .filter(|e| kernels.iter().any(|k| k["kernel"] == e["name"]))
        .count();
    assert_eq!(launch_spans as u64, 64 * launches);
    // The last launch ends at the total modelled time.
    let end = spans
        .iter()
        .map(|e| e["ts"].as_f64().unwrap() + e["dur"].as_f64().unwrap())
        .fold(0.0, f64::max);
    let total_us = stats["total_modelled_seconds"].as_f64().unwrap() * 1e6;
    assert!(
        end <= total_us && end > 0.9 * total_us,
        "trace ends at {end} us of {total_us}"
    );
    std::fs::remove_file(trace).unwrap();
}

/// `swflow bench` builds and runs a model and reports every kernel with its op, source node,
/// modelled time, the DMA queue's time (and its per-block part) and the scheduler's
/// estimates; the kernels' times add up to the total, and
/// the roofline is an SVG with a disc per kernel that does floating-point work over DMA.
#[test]
fn bench_reports_every_kernel_and_draws_a_roofline() {
    let root = workspace_root();
    let svg = scratch("timing", "roofline.svg");
    std::fs::create_dir_all(svg.parent().unwrap()).unwrap();
    let out = Command::new(root.join("target/release/swflow"))
        .args(["bench", "examples/lenet/model.onnx", "--json", "--roofline"])
        .arg(&svg)
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let kernels = r["kernels"].as_array().unwrap();
    let scheduled = swflow_scheduler::pipeline::compile(&swflow_tests::lenet(), &Target::sw26010()).unwrap();
    assert_eq!(kernels.len(), scheduled.kernels.len());
    for (row, k) in kernels.iter().zip(&scheduled.kernels) {
        assert_eq!(row["op"].as_str().unwrap(), k.op);
    }
    let sum: f64 = kernels.iter().map(|k| k["modelled_seconds"].as_f64().unwrap()).sum();
    let total = r["total_modelled_seconds"].as_f64().unwrap();
    assert!((sum - total).abs() <= 1e-9 * total, "{sum} against {total}");
    for k in kernels {
        assert!(k["op"].as_str().is_some_and(|s| !s.is_empty()));
        assert!(k["scheduler_dma_estimate_seconds"].as_f64().unwrap() >= 0.0);
        assert!(k["scheduler_estimate_seconds"].as_f64().unwrap() > 0.0);
        assert!(["compute", "dma", "latency"].contains(&k["bound"].as_str().unwrap()));
        let f = k["roofline_fraction"].as_f64().unwrap();
        assert!(f > 0.0 && f <= 1.0, "{k}");
        // The queue serves within the kernel's span; its per-block costs are part of it.
        let (queue, blocks) = (
            k["dma_queue_seconds"].as_f64().unwrap(),
            k["dma_block_seconds"].as_f64().unwrap(),
        );
        assert!(
            0.0 <= blocks && blocks <= queue && queue <= k["modelled_seconds"].as_f64().unwrap(),
            "{k}"
        );
    }
    // Every put costs SW26010's queue a per-block cost.
    assert!(r["total"]["dma_block_seconds"].as_f64().unwrap() > 0.0);
    assert!(kernels.iter().any(|k| k["node"] == "conv1"));
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg") && text.trim_end().ends_with("</svg>"));
    let drawn = kernels
        .iter()
        .filter(|k| k["flops"].as_u64().unwrap() > 0 && k["dma_bytes"].as_u64().unwrap() > 0)
        .count();
    assert_eq!(
        text.matches("<circle").count(),
        drawn + 3,
        "a disc per kernel and three in the legend"
    );
}

/// `swflow bench` runs the JIT by default and the built C with `--engine c`: both report the
/// same kernels with the same counters, tape traffic (none in inference) and modelled time,
/// and the JIT writes a trace too.
#[test]
fn bench_engines_report_the_same_kernels() {
    let root = workspace_root();
    let trace = scratch("timing", "bench-jit-trace.json");
    std::fs::create_dir_all(trace.parent().unwrap()).unwrap();
    let bench = |engine: &str, extra: &[&std::ffi::OsStr]| -> Value {
        let out = Command::new(root.join("target/release/swflow"))
            .args([
                "bench",
                "examples/lenet/model.onnx",
                "--json",
                "--target",
                "sw26010pro",
                "--engine",
                engine,
            ])
            .args(extra)
            .current_dir(&root)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let jit = bench("jit", &["--trace".as_ref(), trace.as_os_str()]);
    let c = bench("c", &[]);
    assert_eq!(jit["engine"], "jit");
    assert_eq!(jit["kernels"], c["kernels"]);
    assert_eq!(jit["total"], c["total"]);
    assert_eq!(jit["total_modelled_seconds"], c["total_modelled_seconds"]);
    assert_eq!(jit["tape"], c["tape"]);
    assert_eq!(
        jit["tape"],
        serde_json::json!({"bytes": 0, "transfers": 0, "mean_transfer_bytes": 0.0, "modelled_seconds": 0.0})
    );
    let events: Value = serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    assert!(
        events.as_array().is_some_and(|e| e.len() > 100),
        "a trace of every launch"
    );
    std::fs::remove_file(trace).unwrap();
}
