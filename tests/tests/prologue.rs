//! An elementwise producer joined into a contraction as its prologue (a batch normalisation
//! and a ReLU before a 1x1 convolution; a shift and a ReLU before a matrix product): one
//! kernel, which applies the prologue to each box of the main tensor it fetches, once per
//! element and not at every product, and gives the interpreter's results within tolerance,
//! the same bit for bit through the C (type-checked against the SDK) and the JIT.

use swflow_frontend::interp;
use swflow_frontend::ir::{parse, Graph};
use swflow_frontend::tolerance::{compare, Comparison};
use swflow_scheduler::loops::print_kernel;
use swflow_scheduler::schedule::prologue::prologue;
use swflow_scheduler::schedule::verify_schedule;
use swflow_scheduler::target::Target;
use swflow_tests::{run_both_engines, seeded_inputs};

/// `relu(x * s + b)` into a 1x1 convolution of `m` output channels, on `c` channels of
/// `h x h`.
fn normalised_conv(c: usize, h: usize, m: usize) -> Graph {
    parse(&format!(
        r#"graph "normalised_conv" {{
  %x: f32[1,{c},{h},{h}] = input
  %s: f32[1,{c},1,1] = input
  %b: f32[{c},1,1] = input
  %w: f32[{m},{c},1,1] = input
  %xs: f32[1,{c},{h},{h}] = mul(%x, %s)
  %xb: f32[1,{c},{h},{h}] = add(%xs, %b)
  %r: f32[1,{c},{h},{h}] = relu(%xb)
  %y: f32[1,{m},{h},{h}] = conv(%r, %w) {{strides=[1,1], dilations=[1,1], pads=[0,0,0,0], groups=1}}
  output "y" = %y
}}"#
    ))
    .unwrap()
}

/// `relu(a - q) x w` with `a: [rows, k]`, `q: [k]` (a parameter along the last dimension:
/// runs of one element) and `w: [k, n]`.
fn shifted_product(rows: usize, k: usize, n: usize) -> Graph {
    parse(&format!(
        r#"graph "shifted_product" {{
  %a: f32[{rows},{k}] = input
  %q: f32[{k}] = input
  %w: f32[{k},{n}] = input
  %d: f32[{rows},{k}] = sub(%a, %q)
  %r: f32[{rows},{k}] = relu(%d)
  %y: f32[{rows},{n}] = matmul(%r, %w)
  output "y" = %y
}}"#
    ))
    .unwrap()
}

#[test]
fn prologues_run_once_per_fetched_element() {
    // (label, graph, elements of the main tensor, products per element, prologue flops per
    // element)
    let cases = [
        ("conv-56", normalised_conv(32, 56, 64), 32 * 56 * 56, 64, 3),
        ("conv-7", normalised_conv(96, 7, 128), 96 * 7 * 7, 128, 3),
        ("matmul", shifted_product(256, 96, 80), 256 * 96, 80, 2),
    ];
    for target in [Target::sw26010(), Target::sw26010pro()] {
        for (label, g, elements, reuse, flops_each) in &cases {
            let label = format!("{label}-{}", target.name);
            let p = swflow_scheduler::pipeline::compile(g, &target).unwrap();
            assert_eq!(
                p.kernels.len(),
                1,
                "{label}: {:?}",
                p.kernels.iter().map(|k| &k.op).collect::<Vec<_>>()
            );
            let k = &p.kernels[0];
            assert!(prologue(k).is_some(), "{label}: {}", k.op);
            let inputs = seeded_inputs(g, 5);
            let want = interp::run(g, &inputs).unwrap();
            let both = run_both_engines(&p, g, &inputs, &target, "prologue", &label);
            compare(&both.output, &want[0], Comparison::Tolerance).unwrap_or_else(|m| panic!("{label}: {}", m.message));
            // The kernel's flops: two per product, and the prologue's per element each time a
            // box of it is fetched: at least once, and far fewer times than it is read.
            let products = 2 * elements * reuse;
            let flops = both.row["flops"].as_u64().unwrap() as usize;
            let prologue_flops = flops - products;
            let applied = prologue_flops / flops_each;
            assert_eq!(applied * flops_each, prologue_flops, "{label}");
            assert!(
                applied >= *elements && applied * 4 <= elements * reuse,
                "{label}: the prologue ran on {applied} elements of {elements}, each read {reuse} times"
            );
            assert!(both.kernel_source().contains("The prologue of"), "{label}");
        }
    }
}

/// On SW26010-Pro a buffer may not be posted along a line that another buffer shares at every
/// tile (its next box would be posted before this tile's broadcast of the other): the verifier
/// names the buffer and the reason. A normalised 1x1 convolution shares its per-channel
/// parameters along the columns that share its input.
#[test]
fn posting_beside_a_box_shared_at_every_tile_is_refused() {
    let target = Target::sw26010pro();
    let g = normalised_conv(160, 56, 128);
    let p = swflow_scheduler::pipeline::compile(&g, &target).unwrap();
    let k = &p.kernels[0];
    let s = k.schedule.as_ref().unwrap();
    let all = swflow_scheduler::schedule::accesses(k);
    let name = |i: usize| p.tensor(k.operands[all[i].operand]).name.clone();
    let line = |i: usize| s.buffers[i].shared.filter(|_| s.buffers[i].depth > 0);
    // A parameter shared along the same line as the input, at every tile.
    let (i, j) = (0..all.len())
        .flat_map(|i| (0..all.len()).map(move |j| (i, j)))
        .find(|&(i, j)| i != j && s.buffers[i].double && line(i).is_some() && line(i) == line(j))
        .unwrap_or_else(|| {
            panic!(
                "two buffers shared along one line at every tile:\n{}",
                print_kernel(k, &p)
            )
        });
    let mut posted = s.clone();
    posted.buffers[i].posted = true;
    let err = verify_schedule(k, &p, &posted, &target).unwrap_err().to_string();
    assert!(
        err.contains(&format!("'{}' cannot be posted", name(i)))
            && err.contains("no other buffer shares at every tile"),
        "{err} (beside '{}')",
        name(j)
    );
}

/// A prologue rewrites each box of its main access as it arrives, with the parameters' boxes
/// of the same tile: a parameter placed deeper than the main buffer (filled later in the
/// tile walk) is refused by the verifier.
#[test]
fn parameters_fill_no_deeper_than_the_main_box() {
    let target = Target::sw26010();
    let g = normalised_conv(32, 56, 64);
    let p = swflow_scheduler::pipeline::compile(&g, &target).unwrap();
    let k = &p.kernels[0];
    let s = k.schedule.as_ref().unwrap();
    let all = swflow_scheduler::schedule::accesses(k);
    let pr = prologue(k).unwrap();
    let main = pr.main_window(&all).unwrap();
    let parameter = pr
        .parameter_windows(&all)
        .into_iter()
        .find(|&i| s.buffers[i].depth == s.buffers[main].depth && !s.buffers[i].double)
        .unwrap_or_else(|| panic!("a parameter beside the main box:\n{}", print_kernel(k, &p)));
    assert!(s.buffers[main].depth < s.order.len(), "{}", print_kernel(k, &p));
    let mut deeper = s.clone();
    deeper.buffers[parameter].depth += 1;
    let err = verify_schedule(k, &p, &deeper, &target).unwrap_err().to_string();
    assert!(err.contains("no deeper than the prologue's main buffer"), "{err}");
}
