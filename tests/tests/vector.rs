//! The vector code of sums of products: the operations it is charged with are those it
//! executes, and it computes what the scalar code computes.

use swflow_codegen::cpe::{fused_product, Func, Int, Ops, Stmt};
use swflow_codegen::jit;
use swflow_frontend::interp;
use swflow_frontend::ir::{parse, Graph, Tensor};
use swflow_frontend::tolerance::{compare, Comparison};
use swflow_scheduler::loops::{Kernel, Program};
use swflow_scheduler::schedule::blocking::{blocking, Blocking};
use swflow_scheduler::schedule::{accesses, Residence, Schedule};
use swflow_scheduler::target::Target;
use swflow_tests::{
    charged_fp_as_flops, count_issued_as_flops, run_both_engines, scalar_folds_executed, seeded_inputs,
};

/// Matrix products and convolutions whose kernels do nothing but their sums of products, at
/// sizes that leave partial row blocks, single vectors and tails; the strided 1x1
/// convolution reads a subsampled copy of its input, whose 7-wide rows run as one; the
/// 3x3 convolutions with 3-wide and 7-wide rows have rows shorter than a vector (on
/// SW26010-Pro both, on SW26010 the first); the matrix product with 64 columns and the 1x1
/// convolution with 16-wide rows have rows of whole vectors, which load and store aligned;
/// the grouped convolution writes its channels at the group's offset, which moves only
/// from tile to tile; the 1x1 convolution with 28-wide rows runs its 14 rows as one on
/// SW26010-Pro, where each would end in a half-filled vector; the 7x7 stride-2 and 11x11
/// stride-4 convolutions read their input split into phases, with the weight's zero padding
/// as the taps past the last (one in eight and one in twelve); the 1x1 convolution with 8-wide
/// rows runs them as one, each joined row starting aligned. (The 11x11 convolution has 16
/// output channels: with 5, its schedule would refetch its input, and the scheduler would
/// split it into partials and their sum, which is not a product.)
const MODEL: &str = r#"graph "products" {
  %a: f32[37,45] = input
  %b: f32[45,50] = input
  %ab: f32[37,50] = matmul(%a, %b)
  %x: f32[2,3,13,30] = input
  %w: f32[7,3,3,3] = input
  %y: f32[2,7,13,30] = conv(%x, %w) {strides=[1,1], dilations=[1,1], pads=[1,1,1,1], groups=1}
  %v: f32[1,5,9,19] = input
  %u: f32[6,5,1,1] = input
  %z: f32[1,6,9,19] = conv(%v, %u) {strides=[1,1], dilations=[1,1], pads=[0,0,0,0], groups=1}
  %s: f32[1,32,14,14] = input
  %t: f32[128,32,1,1] = input
  %r: f32[1,128,7,7] = conv(%s, %t) {strides=[2,2], dilations=[1,1], pads=[0,0,0,0], groups=1}
  %h: f32[1,16,12,5] = input
  %hw: f32[64,16,3,3] = input
  %hy: f32[1,64,10,3] = conv(%h, %hw) {strides=[1,1], dilations=[1,1], pads=[0,0,0,0], groups=1}
  %g: f32[1,16,9,9] = input
  %gw: f32[64,16,3,3] = input
  %gy: f32[1,64,7,7] = conv(%g, %gw) {strides=[1,1], dilations=[1,1], pads=[0,0,0,0], groups=1}
  %c: f32[24,40] = input
  %d: f32[40,64] = input
  %cd: f32[24,64] = matmul(%c, %d)
  %e: f32[1,8,6,16] = input
  %ew: f32[12,8,1,1] = input
  %ey: f32[1,12,6,16] = conv(%e, %ew) {strides=[1,1], dilations=[1,1], pads=[0,0,0,0], groups=1}
  %k: f32[1,16,14,28] = input
  %kw: f32[128,16,1,1] = input
  %ky: f32[1,128,14,28] = conv(%k, %kw) {strides=[1,1], dilations=[1,1], pads=[0,0,0,0], groups=1}
  %q: f32[1,8,10,12] = input
  %qw: f32[6,4,3,3] = input
  %qy: f32[1,6,10,12] = conv(%q, %qw) {strides=[1,1], dilations=[1,1], pads=[1,1,1,1], groups=2}
  %i: f32[1,3,37,45] = input
  %iw: f32[9,3,7,7] = input
  %iy: f32[1,9,19,23] = conv(%i, %iw) {strides=[2,2], dilations=[1,1], pads=[3,3,3,3], groups=1}
  %j: f32[1,3,47,51] = input
  %jw: f32[16,3,11,11] = input
  %jy: f32[1,16,10,11] = conv(%j, %jw) {strides=[4,4], dilations=[1,1], pads=[2,1,2,2], groups=1}
  %n: f32[1,8,6,8] = input
  %nw: f32[12,8,1,1] = input
  %ny: f32[1,12,6,8] = conv(%n, %nw) {strides=[1,1], dilations=[1,1], pads=[0,0,0,0], groups=1}
  output "ab" = %ab
  output "cd" = %cd
  output "ey" = %ey
  output "y" = %y
  output "z" = %z
  output "r" = %r
  output "hy" = %hy
  output "gy" = %gy
  output "qy" = %qy
  output "ky" = %ky
  output "iy" = %iy
  output "jy" = %jy
  output "ny" = %ny
}"#;

fn model() -> Graph {
    parse(MODEL).unwrap()
}

/// The P0 instructions one execution of a statement issues, as the timing model charges
/// them: a multiply-add, scalar or vector, is one; an unaligned vector load or store is
/// charged one merge, an aligned one none, a strided load of `lanes` elements an insert per
/// lane (assumptions of the cost model, which this counts as stated).
fn issued(s: &Stmt, lanes: u32) -> u32 {
    match s {
        Stmt::VFma { .. } | Stmt::VStoreLanes { .. } => 1,
        Stmt::VStore { aligned, .. } => u32::from(!aligned),
        Stmt::VLoadStrided { .. } => lanes,
        Stmt::VLoad { broadcast, aligned, .. } => u32::from(!broadcast && !aligned),
        Stmt::Fold { kind, dtype, value, .. } => u32::from(fused_product(*kind, *dtype, value).is_some()),
        _ => 0,
    }
}

/// The kernels of a run's report, as JSON.
fn kernels(report: serde_json::Value) -> Vec<serde_json::Value> {
    report["kernels"].as_array().unwrap().clone()
}

/// The charges of the vectorised products describe the code they run: their flops are two
/// per point of the nest (each multiply-add of the computation once, whether a full vector,
/// a tail vector that recomputes lanes to store the rest, or a single lane does it), and
/// their P0 instructions are those of the statements executed, counted by a program whose
/// charges are replaced by one after every statement that issues one (both reported through
/// the flops counter). The sizes leave partial row blocks, single vectors and tails.
#[test]
fn charges_are_the_operations_executed() {
    let g = model();
    let inputs = seeded_inputs(&g, 3);
    for target in [Target::sw26010(), Target::sw26010pro()] {
        let p = swflow_scheduler::pipeline::compile(&g, &target).unwrap();
        let phases = p.kernels.iter().filter(|k| k.name.ends_with(".phases")).count();
        assert_eq!(phases, 2, "{}: the strided 7x7 and 11x11 inputs are split", target.name);
        let charged = jit::compile(&p, &target).unwrap().run(&p, &target, &inputs).unwrap();
        let rows = kernels(serde_json::to_value(&charged.report).unwrap());
        assert_eq!(rows.len(), p.kernels.len());
        for k in &p.kernels {
            // The report names kernel `x.y` `k_x_y`.
            let name = format!("k_{}", k.name.replace('.', "_"));
            let row = rows
                .iter()
                .find(|r| r["kernel"] == name.as_str())
                .expect("a reported kernel");
            let points: u64 = k.loops.iter().map(|l| l.extent as u64).product();
            // The subsampling copy computes nothing.
            let flops = if k.stmt.reduce.is_some() { 2 * points } else { 0 };
            assert_eq!(row["flops"].as_u64(), Some(flops), "{}: kernel {name}", target.name);
        }
        let mut vector_kernels = 0;
        let mut tails = 0;
        let mut heads = 0;
        let mut coalesced = 0;
        let mut aligned = 0;
        let mut joined_aligned = 0;
        let counted = jit::compile_edited(&p, &target, &mut |_, f: &mut Func| {
            let (mut vector, mut joined, mut aligned_here) = (false, false, false);
            count_issued_as_flops(f, &mut |s| {
                vector |= matches!(s, Stmt::VFma { .. });
                match s {
                    Stmt::VStoreLanes {
                        first: Int::Const(0), ..
                    } => heads += 1,
                    Stmt::VStoreLanes { .. } => tails += 1,
                    _ => {}
                }
                let joins = matches!(s, Stmt::Comment(c) if c.contains("as one row"));
                let aligns = matches!(
                    s,
                    Stmt::VLoad { aligned: true, .. } | Stmt::VStore { aligned: true, .. }
                );
                coalesced += usize::from(joins);
                aligned += usize::from(aligns);
                joined |= joins;
                aligned_here |= aligns;
                issued(s, target.f32_vector_lanes as u32)
            });
            vector_kernels += usize::from(vector);
            joined_aligned += usize::from(joined && aligned_here);
        })
        .unwrap()
        .run(&p, &target, &inputs)
        .unwrap();
        assert_eq!(vector_kernels, 13, "{}: every product runs vector code", target.name);
        assert!(
            aligned > 0,
            "{}: rows of whole vectors load and store aligned",
            target.name
        );
        assert!(
            joined_aligned > 0,
            "{}: rows run as one load and store aligned where each joined row starts aligned",
            target.name
        );
        assert!(tails > 0, "{}: some block is a tail", target.name);
        assert!(heads > 0, "{}: some row shorter than a vector runs a head", target.name);
        // The 7-wide and 8-wide rows run as one; so do the 28-wide rows where they end in a
        // half-filled vector (on SW26010-Pro; on SW26010 they are whole vectors).
        let long_rows = usize::from(28 % target.f32_vector_lanes != 0);
        assert_eq!(coalesced, 2 + long_rows, "{}: rows run as one", target.name);
        let instructions = jit::compile_edited(&p, &target, &mut |_, f: &mut Func| charged_fp_as_flops(f))
            .unwrap()
            .run(&p, &target, &inputs)
            .unwrap();
        let mut issuing = 0;
        for (x, y) in kernels(serde_json::to_value(&instructions.report).unwrap())
            .iter()
            .zip(kernels(serde_json::to_value(&counted.report).unwrap()))
        {
            assert_eq!(x["kernel"], y["kernel"]);
            issuing += usize::from(x["flops"].as_u64().unwrap() > 0);
            assert_eq!(x["flops"], y["flops"], "{}: kernel {}", target.name, x["kernel"]);
        }
        // The products issue P0 instructions, and so do the copies whose rows hold a vector:
        // their vectors are strided loads (`tests/tests/lanewise.rs`). Those are the two
        // phase copies (26- and 13-wide rows), and the subsampling copy on SW26010 (7-wide).
        let copy = usize::from(target.f32_vector_lanes <= 7);
        assert_eq!(issuing, 13 + 2 + copy, "{}", target.name);
        let want = interp::run(&g, &inputs).unwrap();
        for (got, want) in charged.outputs.iter().zip(&want) {
            compare(got, want, Comparison::Tolerance).unwrap_or_else(|m| panic!("{}: {}", target.name, m.message));
        }
    }
}

/// Rows shorter than a vector run as head vectors up to the end of their buffers: an f32
/// buffer has room for a vector past its last element (`Buffer::capacity`), so no block of the
/// products whose rows are all shorter than a vector (the 3-wide rows on both targets, the
/// 7-wide rows on SW26010-Pro) falls back to single lanes, which fold one product at a time.
/// Counted by a program that reports, through the flops counter, every such fold it executes.
#[test]
fn rows_shorter_than_a_vector_run_no_single_lanes() {
    let g = model();
    let inputs = seeded_inputs(&g, 3);
    for target in [Target::sw26010(), Target::sw26010pro()] {
        let p = swflow_scheduler::pipeline::compile(&g, &target).unwrap();
        let folds = scalar_folds_executed(&p, &target, &inputs);
        let short: &[&str] = match target.f32_vector_lanes {
            8 => &["k_hy", "k_gy"],
            _ => &["k_hy"],
        };
        for name in short {
            let (_, n) = folds.iter().find(|(k, _)| k == name).expect("a reported kernel");
            assert_eq!(*n, 0, "{}: kernel {name}", target.name);
        }
    }
}

/// The register blocks the scheduler finds for the first kernel of `p` under `s`, its buffers
/// in LDM as `s` places them and none a tape arena.
fn blocks_of(p: &Program, s: &Schedule, target: &Target) -> Option<Blocking> {
    let k = &p.kernels[0];
    let buffered: Vec<bool> = s.buffers.iter().map(|b| b.residence == Residence::Buffer).collect();
    let streamed = vec![false; accesses(k).len()];
    blocking(
        p,
        k,
        s,
        target.f32_vector_lanes,
        target.timing.fp_latency_cycles,
        &buffered,
        &streamed,
    )
}

/// The index of `k`'s loop named `name`.
fn loop_of(k: &Kernel, name: &str) -> usize {
    k.loops.iter().position(|l| l.name == name).unwrap()
}

/// `g`'s program for `target` with its first kernel's schedule pinned: partitioned a point a
/// CPE along loop `along`, tiled as `tiles` names its loops, its buffers planned and checked;
/// and the register blocks the scheduler finds under that schedule.
fn pinned(g: &Graph, target: &Target, along: &str, tiles: &[(&str, usize)]) -> (Program, Blocking) {
    use swflow_scheduler::schedule::partition::Partition;
    use swflow_scheduler::schedule::{planned, verify_schedule};
    let mut p = swflow_scheduler::pipeline::compile(g, target).unwrap();
    let k = &p.kernels[0];
    let part = Partition {
        loops: vec![loop_of(k, along)],
        points: k.loops[loop_of(k, along)].extent,
        chunk: 1,
        grid: Vec::new(),
    };
    let mut sizes = k.schedule.as_ref().unwrap().tiles.clone();
    for &(name, t) in tiles {
        sizes[loop_of(k, name)] = t;
    }
    let s = planned(k, &p, &part, sizes, target);
    verify_schedule(k, &p, &s, target).unwrap();
    let b = blocks_of(&p, &s, target).unwrap_or_else(|| panic!("{}: no blocks for {tiles:?}", target.name));
    p.kernels[0].schedule = Some(s);
    (p, b)
}

/// Every charge of the code of `p`'s kernels, and the first output of a run of it by the JIT
/// on `inputs`.
fn charges_and_output(p: &Program, target: &Target, inputs: &[Tensor]) -> (Vec<Ops>, Tensor) {
    let mut charges = Vec::new();
    let run = jit::compile_edited(p, target, &mut |_, f: &mut Func| {
        swflow_tests::each_body(&mut f.body, &mut |body| {
            charges.extend(body.iter().filter_map(|s| match s {
                Stmt::Charge { ops, .. } => Some(*ops),
                _ => None,
            }));
        });
    })
    .unwrap()
    .run(p, target, inputs)
    .unwrap();
    (charges, run.outputs[0].clone())
}

/// A 5x1 convolution padded by two rows: the input's box is as wide as the output's 6-wide
/// rows, and the blocks run the lanes through the output's rows joined (24 points a tile,
/// whole vectors on both targets). A window row further
/// down starts its vectors 6 points further into the box, not at a multiple of the lanes, so
/// the input's vectors load unaligned while the output's, in joined rows, stay aligned; the C
/// and the JIT compute the interpreter's result.
#[test]
fn joined_rows_under_a_window_load_unaligned() {
    let g = parse(
        r#"graph "window" {
  %x: f32[1,3,4,6] = input
  %w: f32[8,3,5,1] = input
  %y: f32[1,8,4,6] = conv(%x, %w) {strides=[1,1], dilations=[1,1], pads=[2,0,2,0], groups=1}
  output "y" = %y
}"#,
    )
    .unwrap();
    let inputs = seeded_inputs(&g, 21);
    let want = interp::run(&g, &inputs).unwrap();
    for target in [Target::sw26010(), Target::sw26010pro()] {
        let label = target.name.clone();
        // A channel a CPE, the others idle: each CPE's tiles span whole rows.
        let tiles = [("m", 1), ("o0", 4), ("o1", 6), ("c", 3), ("k0", 5), ("k1", 1)];
        let (p, b) = pinned(&g, &target, "m", &tiles);
        assert_eq!(b.coalesced, Some(loop_of(&p.kernels[0], "o0")), "{label}");
        assert!(b.target_aligned, "{label}");
        assert!(b.factors.iter().all(|f| !f.aligned), "{label}");
        let both = run_both_engines(&p, &g, &inputs, &target, "vector", &format!("window-{label}"));
        compare(&both.output, &want[0], Comparison::Tolerance).unwrap_or_else(|m| panic!("{label}: {}", m.message));
    }
}

/// The scheduler's blocks and the code generator agree on which tiles run vector code: a
/// matrix product tiled one row by four columns on SW26010-Pro (rows shorter than its eight
/// lanes, in buffers of fewer elements than a vector) runs scalar, and the scheduler finds
/// no blocks for it, so its estimate charges the scalar nest; three rows by four columns
/// run as vectors, and it finds blocks.
#[test]
fn blocks_are_found_where_vector_code_runs() {
    use swflow_scheduler::schedule::{planned, verify_schedule};
    let g = parse(
        r#"graph "short_rows" {
  %c: f32[24,40] = input
  %d: f32[40,64] = input
  %cd: f32[24,64] = matmul(%c, %d)
  output "cd" = %cd
}"#,
    )
    .unwrap();
    let target = Target::sw26010pro();
    let p = swflow_scheduler::pipeline::compile(&g, &target).unwrap();
    let k = &p.kernels[0];
    let chosen = k.schedule.as_ref().unwrap();
    let part = swflow_scheduler::schedule::partition::candidates(k, &target)
        .into_iter()
        .find(|c| c.grid == [8, 8])
        .expect("an 8 x 8 grid");
    for (rows, vector) in [(1, false), (3, true)] {
        let tiles: Vec<usize> = k
            .loops
            .iter()
            .zip(&chosen.tiles)
            .map(|(l, &t)| match l.name.as_str() {
                "m" => rows,
                "n" => 4,
                _ => t,
            })
            .collect();
        let s = planned(k, &p, &part, tiles, &target);
        verify_schedule(k, &p, &s, &target).unwrap();
        let b = blocks_of(&p, &s, &target);
        assert_eq!(b.is_some(), vector, "{rows} rows: blocks {b:?}");
        let mut q = p.clone();
        q.kernels[0].schedule = Some(s);
        let mut fmas = 0;
        jit::compile_edited(&q, &target, &mut |_, f: &mut Func| {
            count_issued_as_flops(f, &mut |s| {
                fmas += usize::from(matches!(s, Stmt::VFma { .. }));
                issued(s, target.f32_vector_lanes as u32)
            })
        })
        .unwrap();
        assert_eq!(fmas > 0, vector, "{rows} rows: {fmas} vector multiply-adds written");
    }
}

/// A block whose reduction walk is one loop written out step by step is one stretch of
/// straight-line code (its accumulators' loads, the steps, their stores), and its charge says
/// so: one charge holds the multiply-adds and the accumulators' stores, and the estimate's
/// entry cost is what that stretch takes beyond its steps, less than the same work issued on
/// its own. A block whose steps run in a loop charges its accumulators apart from them.
#[test]
fn a_block_of_written_out_steps_is_one_stretch() {
    let target = Target::sw26010();
    for (c, written_out) in [(8, true), (16, false)] {
        let label = format!("{c} input channels");
        let g = parse(&format!(
            r#"graph "pointwise" {{
  %x: f32[1,{c},14,28] = input
  %w: f32[64,{c},1,1] = input
  %y: f32[1,64,14,28] = conv(%x, %w) {{strides=[1,1], dilations=[1,1], pads=[0,0,0,0], groups=1}}
  output "y" = %y
}}"#
        ))
        .unwrap();
        let inputs = seeded_inputs(&g, 8);
        let want = interp::run(&g, &inputs).unwrap();
        let tiles = [("m", 8), ("o0", 1), ("o1", 28), ("c", c), ("k0", 1), ("k1", 1)];
        let (p, b) = pinned(&g, &target, "o0", &tiles);
        assert_eq!(b.reduce.len(), 1, "{label}");
        assert_eq!(b.unrolled.is_some(), written_out, "{label}");
        let (charges, output) = charges_and_output(&p, &target, &inputs);
        let together = charges.iter().filter(|o| o.flops > 0 && o.store > 0).count();
        assert_eq!(together, usize::from(written_out), "{label}");
        compare(&output, &want[0], Comparison::Tolerance).unwrap_or_else(|m| panic!("{label}: {}", m.message));
        if written_out {
            let alone = Blocking {
                unrolled: None,
                ..b.clone()
            };
            assert!(
                b.entry_cycles() < alone.entry_cycles(),
                "{label}: {} cycles in the stretch, {} alone",
                b.entry_cycles(),
                alone.entry_cycles()
            );
        }
    }
}

/// A 3 x 3 window whose tile holds all of it is written out whole: its rows' steps follow one
/// another without the rows' loop, nine steps in one stretch (flops of nine multiply-adds per
/// accumulator in one charge). With one input channel a tile, that stretch is the block's
/// whole walk, charged with the accumulators' stores; with four, the channels' loop runs
/// around it. Both compute the interpreter's result.
#[test]
fn a_whole_window_is_written_out() {
    let g = parse(
        r#"graph "window" {
  %x: f32[1,4,10,16] = input
  %w: f32[8,4,3,3] = input
  %y: f32[1,8,10,16] = conv(%x, %w) {strides=[1,1], dilations=[1,1], pads=[1,1,1,1], groups=1}
  output "y" = %y
}"#,
    )
    .unwrap();
    let inputs = seeded_inputs(&g, 4);
    let want = interp::run(&g, &inputs).unwrap();
    let target = Target::sw26010();
    for (c, whole_walk) in [(1, true), (4, false)] {
        let label = format!("{c} input channel(s) a tile");
        let tiles = [("m", 8), ("o0", 1), ("o1", 16), ("c", c), ("k0", 3), ("k1", 3)];
        let (p, b) = pinned(&g, &target, "o0", &tiles);
        assert_eq!((b.unrolled, b.outer_unrolled), (Some(3), Some(3)), "{label}");
        assert_eq!(b.written_steps(), whole_walk.then_some(9), "{label}");
        // Nine steps of the block's multiply-adds, each two flops a lane.
        let stretch = (9 * 2 * b.rows * b.vectors * b.lanes) as u32;
        let (charges, output) = charges_and_output(&p, &target, &inputs);
        let nine: Vec<&Ops> = charges.iter().filter(|o| o.flops == stretch).collect();
        assert_eq!(nine.len(), 1, "{label}");
        assert_eq!(nine[0].store > 0, whole_walk, "{label}");
        compare(&output, &want[0], Comparison::Tolerance).unwrap_or_else(|m| panic!("{label}: {}", m.message));
    }
}
