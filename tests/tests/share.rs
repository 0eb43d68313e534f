//! Buffers shared along the mesh (register communication on SW26010, remote LDM access on
//! SW26010-Pro): a read buffer that every CPE of a mesh row or column needs tile for tile is
//! fetched by one of them and broadcast; on SW26010-Pro, one that every CPE needs is fetched
//! by CPE 0 and broadcast along the first row, then down the columns.
//! The results are those of the same schedule without sharing, bit for bit, through the C and
//! the JIT; the DMA is the line owners' only, as the walk of the schedule counts it; the C
//! type-checks against the SDK; a double buffer's owner fetches the next box before
//! broadcasting this one where the broadcast holds the line (SW26010-Pro); and a buffer that
//! a line does not all need cannot be shared.
//! A padded window's box shared along a line is fetched in slices by every CPE of the line,
//! a box shared across the mesh by the first row's CPEs, and one that the CPEs finish (a
//! prologue's main box) by every CPE of the mesh, with the results of the owner fetching it
//! whole.

use swflow_frontend::interp;
use swflow_frontend::ir::{ConvAttrs, DType, Graph, Op, Output, Tensor, TensorType};
use swflow_frontend::tolerance::{compare, Comparison};
use swflow_scheduler::exec::cpe::{kernel_stats, run_program};
use swflow_scheduler::loops::{parse_kernel, print_kernel, Program};
use swflow_scheduler::schedule::partition::Partition;
use swflow_scheduler::schedule::prologue::prologue;
use swflow_scheduler::schedule::share::{segment_lengths, split_dim, split_unit, spread, MeshLine};
use swflow_scheduler::schedule::{planned, split_by, verify_schedule};
use swflow_scheduler::target::Target;
use swflow_tests::{run_both_engines, seeded_inputs};

const M: usize = 96;
const K: usize = 200;
const N: usize = 128;

/// `c[96, 128] = a[96, 200] x b[200, 128]`.
fn matmul() -> Graph {
    matmul_over(K)
}

/// `c[96, 128] = a[96, inner] x b[inner, 128]`.
fn matmul_over(inner: usize) -> Graph {
    let mut g = Graph::new("share");
    let ty = |shape: Vec<usize>| TensorType::new(DType::F32, shape).unwrap();
    let a = g.add_input("a", ty(vec![M, inner]));
    let b = g.add_input("b", ty(vec![inner, N]));
    let c = g.add_node("c", Op::MatMul, vec![a, b], None).unwrap();
    g.outputs.push(Output {
        name: "c".into(),
        node: c,
    });
    g
}

/// The program of `g` (lowered: one kernel) with its kernel split by `grid` over (m, n), its
/// tiles sized for it and its buffers shared where the mesh allows (none without `share`).
fn with_grid(g: &Graph, target: &Target, grid: Vec<usize>, share: bool) -> Program {
    let mut p = swflow_scheduler::lower::lower(g).unwrap();
    let k = &p.kernels[0];
    assert_eq!((k.loops[0].extent, k.loops[1].extent), (M, N));
    let sizes: Vec<usize> = grid.iter().zip([M, N]).map(|(&g, e)| e.div_ceil(g)).collect();
    let part = Partition {
        loops: vec![0, 1],
        points: M * N,
        chunk: sizes.iter().product(),
        grid,
    };
    let mut s = split_by(k, &p, &part, target).unwrap();
    if !share {
        s.buffers.iter_mut().for_each(|b| {
            b.shared = None;
            b.posted = false;
        });
    }
    verify_schedule(k, &p, &s, target).unwrap();
    p.kernels[0].schedule = Some(s);
    p
}

/// [`with_grid`]'s program with `tiles` instead of the scheduler's, planned for them
/// (ordered, placed and shared).
fn with_tiles(g: &Graph, target: &Target, grid: Vec<usize>, tiles: Vec<usize>) -> Program {
    let mut p = with_grid(g, target, grid, true);
    let k = &p.kernels[0];
    let s = k.schedule.as_ref().unwrap();
    let part = Partition {
        loops: s.partition.clone(),
        points: s.partition_points,
        chunk: s.chunk,
        grid: s.grid.clone(),
    };
    let s = planned(k, &p, &part, tiles, target);
    p.kernels[0].schedule = Some(s);
    p
}

/// Outputs and the per-kernel report of the C build and of the JIT (see
/// [`run_both_engines`]).
fn run_both(p: &Program, g: &Graph, inputs: &[Tensor], target: &Target, label: &str) -> (Tensor, serde_json::Value) {
    let both = run_both_engines(p, g, inputs, target, "share", label);
    (both.output, both.row)
}

/// On both targets, an 8 x 8 grid shares `b` (which does not use m) along the columns and `a`
/// (which does not use n) along the rows, a 4 x 16 grid `a` along the rows only. A 1 x 64
/// grid, where every CPE needs all of `a`, shares it across the mesh on SW26010-Pro (along
/// the rows on SW26010, whose register communication does not share across the mesh). Either
/// way the outputs equal the unshared schedule's bit for bit (and the interpreter's within
/// tolerance), only the owners fetch the shared tiles (an eighth of the unshared schedule's
/// gets of them, a 64th across the mesh), and every other CPE receives each block once, from
/// its line's sender.
#[test]
fn shared_tiles_give_the_unshared_results_with_an_eighth_of_their_transfers() {
    let g = matmul();
    let inputs = seeded_inputs(&g, 5);
    let want = interp::run(&g, &inputs).unwrap();
    let mut ordered = std::collections::BTreeSet::new();
    for target in [Target::sw26010(), Target::sw26010pro()] {
        let across = match target.timing.regcomm_latency_cycles {
            None => MeshLine::Mesh,
            Some(_) => MeshLine::Row,
        };
        // Per case, the grid and each shared buffer (by access: `c`, `a`, `b`) with its line.
        let cases = [
            (vec![8, 8], vec![(2, MeshLine::Column), (1, MeshLine::Row)]),
            (vec![4, 16], vec![(1, MeshLine::Row)]),
            (vec![1, 64], vec![(1, across)]),
        ];
        for (grid, sharing) in cases {
            let label = format!("{}-{}x{}", target.name, grid[0], grid[1]);
            let p = with_grid(&g, &target, grid.clone(), true);
            let k = &p.kernels[0];
            let s = k.schedule.as_ref().unwrap();
            let lines: Vec<Option<MeshLine>> = s.buffers.iter().map(|b| b.shared).collect();
            let mut expected = vec![None; lines.len()];
            for &(i, line) in &sharing {
                expected[i] = Some(line);
            }
            assert_eq!(lines, expected, "{label}");
            let text = print_kernel(k, &p);
            for &(_, line) in &sharing {
                assert!(text.contains(&format!("shared {}", line.name())), "{text}");
            }
            assert_eq!(parse_kernel(&text, &p).unwrap().schedule, k.schedule, "{label}");

            let (executed, _) = run_program(&p, &inputs, &target).unwrap();
            compare(&executed[0], &want[0], Comparison::Tolerance).unwrap_or_else(|m| panic!("{label}: {}", m.message));
            let (out, row) = run_both(&p, &g, &inputs, &target, &label);
            let plain = with_grid(&g, &target, grid, false);
            let (plain_out, plain_row) = run_both(&plain, &g, &inputs, &target, &format!("{label}-plain"));
            compare(&out, &plain_out, Comparison::Exact).unwrap_or_else(|m| panic!("{label}: {}", m.message));
            compare(&out, &want[0], Comparison::Tolerance).unwrap_or_else(|m| panic!("{label}: {}", m.message));

            // The shared buffer's gets: each CPE's in the plain schedule, the owners' here.
            let walked = |p: &Program, only: usize| {
                let mut q = p.clone();
                let s = q.kernels[0].schedule.as_mut().unwrap();
                for (i, b) in s.buffers.iter_mut().enumerate() {
                    if i != only && i != 0 {
                        b.residence = swflow_scheduler::schedule::Residence::Direct;
                    }
                }
                let k = &q.kernels[0];
                kernel_stats(&q, k, k.schedule.as_ref().unwrap(), &target).traffic
            };
            for &(shared, line) in &sharing {
                let (mine, theirs) = (walked(&p, shared), walked(&plain, shared));
                let fetchers = match line {
                    MeshLine::Mesh => 1,
                    _ => 8,
                };
                assert_eq!(64 / fetchers * mine.get_bytes, theirs.get_bytes, "{label}");
            }
            let count = |row: &serde_json::Value, key: &str| row[key].as_u64().unwrap();
            let sends = count(&row, "reg_puts");
            assert!(sends > 0, "{label}: {row}");
            assert_eq!(count(&row, "reg_gets"), 7 * sends, "{label}");
            assert_eq!(
                (count(&plain_row, "reg_puts"), count(&plain_row, "reg_gets")),
                (0, 0),
                "{label}"
            );
            assert!(count(&row, "get_bytes") < count(&plain_row, "get_bytes"), "{label}");

            // A double buffer's owner issues its next box's get before broadcasting this one
            // where the broadcast is a collective call that holds the line (remote LDM
            // access), after it with register communication (seen where one buffer is
            // shared, so that the first send is its own).
            let [(shared, _)] = sharing[..] else {
                continue;
            };
            if s.buffers[shared].double {
                let mut collective = p.clone();
                collective.kernels[0].schedule.as_mut().unwrap().buffers[shared].posted = false;
                let generated = swflow_codegen::generate(&collective, &target, "").unwrap();
                let (_, source) = generated
                    .files
                    .iter()
                    .find(|(path, _)| path.starts_with("slave/"))
                    .unwrap();
                let source = String::from_utf8_lossy(source);
                // The product's accesses in order: its target, then its factors.
                let name = ["c", "a", "b"][shared];
                let get = source.find(&format!("ldm->{name}[1 - {name}_h]")).expect(&label);
                let send = source.find("SWFLOW_SHARE_SEND(").expect(&label);
                assert_eq!(get < send, target.timing.regcomm_latency_cycles.is_none(), "{label}");
                ordered.insert(target.name.clone());
            }
        }
    }
    assert_eq!(
        ordered.len(),
        2,
        "a double-buffered shared buffer on each target: {ordered:?}"
    );
}

/// A target whose CPEs cannot broadcast along the mesh (SW26010-Pro without its remote LDM
/// access) shares nothing.
#[test]
fn nothing_is_shared_without_a_way_to_broadcast() {
    let mut target = Target::sw26010pro();
    target.timing.rma_latency_cycles = None;
    target.timing.rma_bytes_per_cycle = None;
    let p = with_grid(&matmul(), &target, vec![8, 8], true);
    let s = p.kernels[0].schedule.as_ref().unwrap();
    assert!(s.buffers.iter().all(|b| b.shared.is_none()));
}

/// The check's error on the matrix product's schedule (an 8 x 8 grid on SW26010, `a` shared
/// along the rows and `b` along the columns) with its text changed by `edit`.
fn refused(edit: impl Fn(&str) -> String) -> String {
    let g = matmul();
    let target = Target::sw26010();
    let p = with_grid(&g, &target, vec![8, 8], true);
    let text = print_kernel(&p.kernels[0], &p);
    let edited = edit(&text);
    assert_ne!(edited, text);
    let parsed = parse_kernel(&edited, &p).unwrap();
    verify_schedule(&parsed, &p, parsed.schedule.as_ref().unwrap(), &target).unwrap_err()
}

/// A buffer the CPEs of a line do not all need (`a` uses m, which varies along a column) is
/// refused when shared along that line by hand, naming the buffer.
#[test]
fn a_buffer_a_line_does_not_all_need_cannot_be_shared() {
    let err = refused(|text| {
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with("ldm a:"))
            .unwrap_or_else(|| panic!("{text}"));
        text.replace(line, &line.replace("shared along rows", "shared along columns"))
    });
    assert!(err.contains("'a' cannot be shared along columns"), "{err}");
}

/// `y = x * w`, a 3 x 3 convolution padded by one of `x[1, 64, 14, 14]` by `w[64, 64, 3, 3]`.
fn padded_conv() -> Graph {
    let mut g = Graph::new("padded");
    let ty = |shape: Vec<usize>| TensorType::new(DType::F32, shape).unwrap();
    let x = g.add_input("x", ty(vec![1, 64, 14, 14]));
    let w = g.add_input("w", ty(vec![64, 64, 3, 3]));
    let attrs = ConvAttrs {
        strides: vec![1, 1],
        dilations: vec![1, 1],
        pads: vec![1; 4],
        groups: 1,
    };
    let y = g.add_node("y", Op::Conv(attrs), vec![x, w], None).unwrap();
    g.outputs.push(Output {
        name: "y".into(),
        node: y,
    });
    g
}

/// The padded convolution's program with its kernel split by output channels and rows on a
/// 32 x 2 grid (two channels and seven rows a CPE), so that the CPEs of a mesh column need
/// the same input boxes; tiles and buffers as the scheduler sizes them.
fn padded_conv_on_columns(g: &Graph, target: &Target) -> Program {
    let mut p = swflow_scheduler::lower::lower(g).unwrap();
    let k = &p.kernels[0];
    let part = Partition {
        loops: vec![1, 2],
        points: 64 * 14,
        chunk: 2 * 7,
        grid: vec![32, 2],
    };
    let s = split_by(k, &p, &part, target).unwrap();
    p.kernels[0].schedule = Some(s);
    p
}

/// Runs `p`, whose buffer `i` is fetched in slices, and the same program with the line's owner
/// fetching whole boxes, through the C and the JIT: the outputs are equal bit for bit (and
/// to `want` within tolerance), the same bytes come through the queue in more transfers.
/// Returns both per-kernel reports, sliced first.
fn against_whole_boxes(
    p: &Program,
    i: usize,
    g: &Graph,
    inputs: &[Tensor],
    want: &Tensor,
    target: &Target,
    label: &str,
) -> (serde_json::Value, serde_json::Value) {
    let mut whole = p.clone();
    whole.kernels[0].schedule.as_mut().unwrap().buffers[i].split = false;
    let ws = whole.kernels[0].schedule.as_ref().unwrap();
    verify_schedule(&whole.kernels[0], &whole, ws, target).unwrap();
    let (out, row) = run_both(p, g, inputs, target, &format!("{label}-slices"));
    let (whole_out, whole_row) = run_both(&whole, g, inputs, target, &format!("{label}-whole"));
    compare(&out, &whole_out, Comparison::Exact).unwrap_or_else(|m| panic!("{label}: {}", m.message));
    compare(&out, want, Comparison::Tolerance).unwrap_or_else(|m| panic!("{label}: {}", m.message));
    let count = |row: &serde_json::Value, key: &str| row[key].as_u64().unwrap();
    assert_eq!(count(&row, "get_bytes"), count(&whole_row, "get_bytes"), "{label}");
    assert!(
        count(&row, "gets") > count(&whole_row, "gets"),
        "{label}: {row} {whole_row}"
    );
    (row, whole_row)
}

/// A padded window's box shared along a line (under the schedule of
/// [`padded_conv_on_columns`]) is split on both targets: each CPE of the line fetches and
/// finishes a slice of its channels, and the line broadcasts the slices in turn.
/// The schedule says so in text and reads back; the outputs equal those of the same schedule
/// with the line's owner fetching whole boxes, bit for bit, through the C and the JIT (and
/// the interpreter's within tolerance); the DMA is what the walk counts with every CPE
/// fetching its slice; the same bytes come through the queue in more transfers; and each
/// tile's box takes a broadcast from each CPE with a slice (the box's channels one by one, as
/// each channel's rows of 16 floats fill whole registers), received by the seven others.
#[test]
fn split_boxes_give_the_owners_results_with_every_cpe_fetching_a_slice() {
    let g = padded_conv();
    let inputs = seeded_inputs(&g, 9);
    let want = interp::run(&g, &inputs).unwrap();
    for target in [Target::sw26010(), Target::sw26010pro()] {
        let label = target.name.clone();
        let p = padded_conv_on_columns(&g, &target);
        let k = &p.kernels[0];
        let s = k.schedule.as_ref().unwrap();
        let split: Vec<usize> = (0..s.buffers.len()).filter(|&i| s.buffers[i].split).collect();
        assert_eq!(split.len(), 1, "{label}: {}", print_kernel(k, &p));
        let i = split[0];
        assert_eq!(split_dim(k, s, i), Some(1), "{label}");
        let text = print_kernel(k, &p);
        assert!(text.contains(" in slices"), "{text}");
        assert_eq!(parse_kernel(&text, &p).unwrap().schedule, k.schedule, "{label}");

        let (row, whole_row) = against_whole_boxes(&p, i, &g, &inputs, &want[0], &target, &label);
        let count = |row: &serde_json::Value, key: &str| row[key].as_u64().unwrap();
        // Every box spans the tile's channels, each a plane of whole registers (its rows of
        // 16 floats): a slice per channel, at most one per CPE of the line.
        assert_eq!(
            split_unit(k, &p, s, i, &segment_lengths(k, s, target.cpes)),
            Some(1),
            "{label}"
        );
        let slices = s.buffers[i].dims[1].min(8) as u64;
        assert!(slices > 1, "{label}");
        let sends = count(&row, "reg_puts");
        assert_eq!(sends, slices * count(&whole_row, "reg_puts"), "{label}");
        assert_eq!(count(&row, "reg_gets"), 7 * sends, "{label}");
    }
}

/// A buffer shared along a line that is neither a guarded read's nor a prologue's main one
/// (which its CPEs finish or rewrite slice by slice) cannot be split: the check names it.
#[test]
fn a_line_splits_only_boxes_its_cpes_finish() {
    let err = refused(|text| text.replace("shared along columns", "shared along columns in slices"));
    assert!(err.contains("'b' cannot be fetched in slices"), "{err}");
}

/// On SW26010-Pro a box shared across the mesh may be split too: the first row's CPEs each
/// fetch a slice, send it down their column, and every row then passes its slices along.
/// Under a 1 x 64 grid of the matrix product (`a` shared across the mesh, in boxes of 24 rows
/// by a tile of its columns) the outputs equal those of CPE 0 fetching whole boxes, bit for
/// bit, through the C and the JIT (and the interpreter's within tolerance); the same bytes
/// come through the queue in more transfers, as the walk counts them; and each tile's box
/// takes, per slice, one broadcast down a column and one along each row where the whole box
/// takes one along the first row and one down each column, each received by the seven other
/// CPEs of its line. Slices start a whole number of 32-byte registers into the box, so they
/// hold whole units of the fewest rows that fill whole registers in every box: of 200 columns
/// in tiles of 40, one row (40 floats, 5 registers), so every CPE of the first row has a
/// slice of 3 rows; in tiles of 50, 4 rows (25 registers), so 6 slices; of 203 columns in
/// tiles of 64, whose last tile is 11 columns, 8 rows, a register's worth: 3 slices.
#[test]
fn split_boxes_across_the_mesh_give_the_owners_results() {
    let target = Target::sw26010pro();
    for (inner, columns, unit, slices) in [(K, 40, 1, 8), (K, 50, 4, 6), (203, 64, 8, 3)] {
        let g = matmul_over(inner);
        let inputs = seeded_inputs(&g, 13);
        let want = interp::run(&g, &inputs).unwrap();
        let label = format!("{inner} columns in tiles of {columns}");
        let mut p = with_tiles(&g, &target, vec![1, 64], vec![24, 2, columns]);
        let i = 1;
        let s = p.kernels[0].schedule.as_mut().unwrap();
        assert_eq!(s.buffers[i].shared, Some(MeshLine::Mesh), "{label}");
        s.buffers[i].split = true;
        let k = &p.kernels[0];
        let s = k.schedule.as_ref().unwrap();
        verify_schedule(k, &p, s, &target).unwrap();
        assert_eq!(split_dim(k, s, i), Some(0), "{label}");
        assert_eq!(
            split_unit(k, &p, s, i, &segment_lengths(k, s, target.cpes)),
            Some(unit),
            "{label}"
        );
        let text = print_kernel(k, &p);
        assert!(text.contains("shared across the mesh in slices"), "{text}");
        assert_eq!(parse_kernel(&text, &p).unwrap().schedule, k.schedule, "{label}");

        let (row, whole_row) = against_whole_boxes(
            &p,
            i,
            &g,
            &inputs,
            &want[0],
            &target,
            &format!("mesh-{inner}-{columns}"),
        );
        let count = |row: &serde_json::Value, key: &str| row[key].as_u64().unwrap();
        let walked = kernel_stats(&p, k, s, &target).traffic;
        assert_eq!(
            (walked.gets, walked.get_bytes),
            (count(&row, "gets") as usize, count(&row, "get_bytes") as usize),
            "{label}"
        );
        let sends = count(&row, "reg_puts");
        assert_eq!(sends, slices * count(&whole_row, "reg_puts"), "{label}");
        assert_eq!(count(&row, "reg_gets"), 7 * sends, "{label}");
    }
}

/// `relu(x * s + b)` into a 1x1 convolution of `x[1, 20, 14, 14]` to 64 channels: a
/// prologue that the CPEs apply to the boxes of `x` they fetch.
fn normalised_conv() -> Graph {
    swflow_frontend::ir::parse(
        r#"graph "normalised_conv" {
  %x: f32[1,20,14,14] = input
  %s: f32[1,20,1,1] = input
  %b: f32[20,1,1] = input
  %w: f32[64,20,1,1] = input
  %xs: f32[1,20,14,14] = mul(%x, %s)
  %xb: f32[1,20,14,14] = add(%xs, %b)
  %r: f32[1,20,14,14] = relu(%xb)
  %y: f32[1,64,14,14] = conv(%r, %w) {strides=[1,1], dilations=[1,1], pads=[0,0,0,0], groups=1}
  output "y" = %y
}"#,
    )
    .unwrap()
}

/// On SW26010-Pro a box shared across the mesh that its CPEs finish (here a prologue's main
/// box) is *spread*: every CPE of the mesh fetches a slice and applies the prologue to it, the
/// rows pass their slices along and then every row's slices go down the columns, so that no
/// row finishes the box alone. Under a 64 x 1 grid of the normalised convolution (one output
/// channel and every row a CPE, the whole input shared across the mesh in boxes of 10
/// channels of 14 x 14, whose slices hold two channels each to fill whole 32-byte registers:
/// 5 of the 64 CPEs fetch one, spread over five rows of the mesh), the outputs equal those of
/// CPE 0 fetching and finishing whole boxes, bit for bit, through the C and the JIT (and the
/// interpreter's within tolerance); the walk counts the same gets as the emulator; the
/// prologue runs once per element of each box as before; and each box takes a broadcast along
/// its row from each CPE with a slice (5) and one down every column from each row with one (5
/// rows, 8 columns each), where the whole box takes one along the first row and one down each
/// column (9), as do the prologue's two parameters, shared across the mesh whole.
#[test]
fn spread_boxes_give_the_owners_results_with_every_cpe_finishing_a_slice() {
    let target = Target::sw26010pro();
    let g = normalised_conv();
    let inputs = seeded_inputs(&g, 17);
    let want = interp::run(&g, &inputs).unwrap();
    let mut p = swflow_scheduler::pipeline::compile(&g, &target).unwrap();
    assert_eq!(p.kernels.len(), 1);
    let k = &p.kernels[0];
    let all = swflow_scheduler::schedule::accesses(k);
    let i = prologue(k)
        .and_then(|pr| pr.main_window(&all))
        .expect("a prologue's main box");
    let (m, o0) = (1, 2);
    assert_eq!((k.loops[m].extent, k.loops[o0].extent), (64, 14));
    let part = Partition {
        loops: vec![m, o0],
        points: 64 * 14,
        chunk: 14,
        grid: vec![64, 1],
    };
    let mut tiles = split_by(k, &p, &part, &target).unwrap().tiles;
    tiles[k.loops.iter().position(|l| l.name == "c").expect("the reduction loop")] = 10;
    let mut s = planned(k, &p, &part, tiles, &target);
    assert_eq!(s.buffers[i].shared, Some(MeshLine::Mesh), "{}", s.describe(k, &p));
    s.buffers[i].split = true;
    verify_schedule(k, &p, &s, &target).unwrap();
    assert!(spread(k, &s, i));
    assert_eq!(s.buffers[i].dims[1], 10, "{}", s.describe(k, &p));
    assert_eq!(split_unit(k, &p, &s, i, &segment_lengths(k, &s, target.cpes)), Some(2));
    p.kernels[0].schedule = Some(s);
    let k = &p.kernels[0];
    let s = k.schedule.as_ref().unwrap();
    let text = print_kernel(k, &p);
    assert!(text.contains("shared across the mesh in slices"), "{text}");
    assert_eq!(parse_kernel(&text, &p).unwrap().schedule, k.schedule);

    let (row, whole_row) = against_whole_boxes(&p, i, &g, &inputs, &want[0], &target, "spread");
    let count = |row: &serde_json::Value, key: &str| row[key].as_u64().unwrap();
    let walked = kernel_stats(&p, k, s, &target).traffic;
    assert_eq!(
        (walked.gets, walked.get_bytes),
        (count(&row, "gets") as usize, count(&row, "get_bytes") as usize)
    );
    assert_eq!(count(&row, "flops"), count(&whole_row, "flops"));
    // Two tiles of the reduction, each a box of `x` and of each parameter.
    let tiles = 2;
    assert_eq!(count(&whole_row, "reg_puts"), 3 * 9 * tiles);
    assert_eq!(count(&row, "reg_puts"), (2 * 9 + 5 + 5 * 8) * tiles);
    assert_eq!(count(&row, "reg_gets"), 7 * count(&row, "reg_puts"));
}

/// `y = conv(x, w)` in 4 groups: `x[1, 72, 8, 8]`, `w[72, 18, 1, 1]`, 18 channels a group.
fn grouped_conv() -> Graph {
    swflow_frontend::ir::parse(
        r#"graph "grouped_conv" {
  %x: f32[1,72,8,8] = input
  %w: f32[72,18,1,1] = input
  %y: f32[1,72,8,8] = conv(%x, %w) {strides=[1,1], dilations=[1,1], pads=[0,0,0,0], groups=4}
  output "y" = %y
}"#,
    )
    .unwrap()
}

/// On both targets a grid of the 4 groups by 16 parts of a group's 18 output channels (two
/// parts of 2 channels and fourteen of 1, as even as they go) puts each group on two whole
/// mesh rows, whose CPEs share the group's input along their row though their blocks differ
/// in length: no tile loop of the channels encloses the input's transfers, so every CPE of a
/// row receives each of its boxes once. The outputs equal those of the same schedule unshared
/// bit for bit through the C and the JIT (and the interpreter's within tolerance), the walk
/// counts the emulator's gets, and the rows' owners alone fetch the input: the other 56 CPEs'
/// 18 x 8 x 8 floats each come off the unshared schedule's bytes.
#[test]
fn rows_of_uneven_blocks_share_what_every_block_reads_alike() {
    let g = grouped_conv();
    let inputs = seeded_inputs(&g, 19);
    let want = interp::run(&g, &inputs).unwrap();
    for target in [Target::sw26010(), Target::sw26010pro()] {
        let label = target.name.clone();
        let mut p = swflow_scheduler::pipeline::compile(&g, &target).unwrap();
        assert_eq!(p.kernels.len(), 1);
        let k = &p.kernels[0];
        let loop_of = |name: &str| k.loops.iter().position(|l| l.name == name).unwrap();
        let (groups, m) = (loop_of("g"), loop_of("m"));
        assert_eq!((k.loops[groups].extent, k.loops[m].extent), (4, 18));
        let part = Partition {
            loops: vec![groups, m],
            points: 72,
            chunk: 2,
            grid: vec![4, 16],
        };
        let s = split_by(k, &p, &part, &target).unwrap();
        verify_schedule(k, &p, &s, &target).unwrap();
        let all = swflow_scheduler::schedule::accesses(k);
        let x = (0..all.len())
            .find(|&i| p.tensor(k.operands[all[i].operand]).name == "x")
            .unwrap();
        assert_eq!(
            s.buffers[x].shared,
            Some(MeshLine::Row),
            "{label}: {}",
            s.describe(k, &p)
        );
        assert!(!s.order[..s.buffers[x].depth].contains(&m), "{label}");
        let lengths: Vec<usize> = (0..64).map(|cpe| s.segments(cpe, &k.extents())[0].len[m]).collect();
        assert!(lengths.contains(&1) && lengths.contains(&2), "{label}: {lengths:?}");
        p.kernels[0].schedule = Some(s);
        let mut unshared = p.clone();
        for b in &mut unshared.kernels[0].schedule.as_mut().unwrap().buffers {
            b.shared = None;
            b.split = false;
            b.posted = false;
        }
        let k = &p.kernels[0];
        let s = k.schedule.as_ref().unwrap();
        let text = print_kernel(k, &p);
        assert_eq!(parse_kernel(&text, &p).unwrap().schedule, k.schedule, "{label}");

        let (out, row) = run_both(&p, &g, &inputs, &target, &format!("uneven-rows-{label}"));
        let (alone, alone_row) = run_both(&unshared, &g, &inputs, &target, &format!("uneven-alone-{label}"));
        compare(&out, &alone, Comparison::Exact).unwrap_or_else(|m| panic!("{label}: {}", m.message));
        compare(&out, &want[0], Comparison::Tolerance).unwrap_or_else(|m| panic!("{label}: {}", m.message));
        let count = |row: &serde_json::Value, key: &str| row[key].as_u64().unwrap() as usize;
        let walked = kernel_stats(&p, k, s, &target).traffic;
        assert_eq!(
            (walked.gets, walked.get_bytes),
            (count(&row, "gets"), count(&row, "get_bytes")),
            "{label}"
        );
        assert_eq!(
            count(&alone_row, "get_bytes") - count(&row, "get_bytes"),
            56 * 18 * 8 * 8 * 4,
            "{label}"
        );
    }
}

/// On SW26010-Pro a shared double buffer may be posted: each box broadcast a tile ahead, into
/// a third half, by remote-LDM broadcasts that only their senders call. For a box shared
/// along columns (8 x 8 grid), along rows (4 x 16), across the mesh whole and in slices
/// (1 x 64), and a padded window's box split along columns, the posted schedule reads back
/// from its text, and its outputs equal those of the same schedule with collective broadcasts
/// bit for bit through the C (type-checked against the SDK mirror) and the JIT, with the same
/// gets, the same blocks sent and received, and its C posts, syncs and never calls a
/// collective broadcast.
#[test]
fn posted_boxes_give_the_collective_results() {
    let target = Target::sw26010pro();
    let product = matmul();
    let conv = padded_conv();
    // The product on `grid` with `tiles` (the reduction's in several tiles, so that the
    // shared factor is double-buffered), its buffer `i` split or not.
    let pinned = |grid: Vec<usize>, tiles: Vec<usize>, i: usize, split: bool| {
        let mut p = with_tiles(&product, &target, grid, tiles);
        p.kernels[0].schedule.as_mut().unwrap().buffers[i].split = split;
        p
    };
    // Across the mesh, tiles of 32 rows of `a`: its box has four slices.
    let cases = [
        ("columns", &product, pinned(vec![8, 8], vec![12, 16, 40], 2, false), 2),
        ("rows", &product, pinned(vec![4, 16], vec![24, 8, 40], 1, false), 1),
        ("mesh", &product, pinned(vec![1, 64], vec![32, 2, 40], 1, false), 1),
        (
            "mesh-slices",
            &product,
            pinned(vec![1, 64], vec![32, 2, 40], 1, true),
            1,
        ),
        ("padded-slices", &conv, padded_conv_on_columns(&conv, &target), 1),
    ];
    for (label, g, p, i) in cases {
        let inputs = seeded_inputs(g, 17);
        let want = interp::run(g, &inputs).unwrap();
        let with = |posted: bool| {
            let mut q = p.clone();
            let s = q.kernels[0].schedule.as_mut().unwrap();
            assert!(
                s.buffers[i].shared.is_some() && s.buffers[i].double,
                "{label}: {}",
                print_kernel(&p.kernels[0], &p)
            );
            s.buffers[i].posted = posted;
            let k = &q.kernels[0];
            verify_schedule(k, &q, k.schedule.as_ref().unwrap(), &target).unwrap_or_else(|e| panic!("{label}: {e}"));
            q
        };
        let (posted, collective) = (with(true), with(false));
        let k = &posted.kernels[0];
        let text = print_kernel(k, &posted);
        assert!(text.contains(", posted"), "{text}");
        assert_eq!(parse_kernel(&text, &posted).unwrap().schedule, k.schedule, "{label}");

        let both = run_both_engines(&posted, g, &inputs, &target, "share", &format!("{label}-posted"));
        let (out, row) = (both.output.clone(), both.row.clone());
        let (plain_out, plain_row) = run_both(&collective, g, &inputs, &target, &format!("{label}-collective"));
        compare(&out, &plain_out, Comparison::Exact).unwrap_or_else(|m| panic!("{label}: {}", m.message));
        compare(&out, &want[0], Comparison::Tolerance).unwrap_or_else(|m| panic!("{label}: {}", m.message));
        let count = |row: &serde_json::Value, key: &str| row[key].as_u64().unwrap();
        for key in ["gets", "get_bytes", "reg_puts", "reg_gets"] {
            assert_eq!(count(&row, key), count(&plain_row, key), "{label}: {key}");
        }
        assert!(count(&row, "reg_puts") > 0, "{label}");
        let source = both.kernel_source();
        for call in ["SWFLOW_SHARE_POST(", "SWFLOW_SHARE_WAIT(", "SWFLOW_SYNC_"] {
            assert!(source.contains(call), "{label}: no {call}");
        }
        assert!(!source.contains("SWFLOW_SHARE_SEND("), "{label}");
    }
}
