//! The rows lane-wise vector code runs along (`schedule::lanewise::run`): through the loops
//! before the lanes loop where every buffer the nest touches lays their points out one after
//! the other, and no further.

use swflow_frontend::ir::parse;
use swflow_scheduler::loops::{Index, Kernel, Program};
use swflow_scheduler::pipeline::compile;
use swflow_scheduler::schedule::lanewise::{reads, row_lengths, run};
use swflow_scheduler::target::Target;

const MODEL: &str = r#"graph "rows" {
  %x: f32[1,64,7,7] = input
  %s: f32[1,64,1,1] = input
  %t: f32[1,64,1,1] = input
  %m: f32[1,64,7,7] = mul(%x, %s)
  %a: f32[1,64,7,7] = add(%m, %t)
  %r: f32[1,64,7,7] = relu(%a)
  %q: f32[1,8,17,33] = input
  %p: f32[1,8,15,31] = max_pool(%q) {kernel=[3,3], strides=[1,1], dilations=[1,1], pads=[0,0,0,0], ceil_mode=false}
  %cx: f32[1,4,6,22] = input
  %cw: f32[6,4,3,3] = input
  %cb: f32[1,6,1,1] = input
  %cy: f32[1,6,6,22] = conv(%cx, %cw) {strides=[1,1], dilations=[1,1], pads=[1,1,1,1], groups=1}
  %ca: f32[1,6,6,22] = add(%cy, %cb)
  %cr: f32[1,6,6,22] = relu(%ca)
  output "r" = %r
  output "p" = %p
  output "cr" = %cr
}"#;

fn program() -> Program {
    compile(&parse(MODEL).unwrap(), &Target::sw26010pro()).unwrap()
}

fn kernel<'p>(p: &'p Program, op: &str) -> &'p Kernel {
    p.kernels.iter().find(|k| k.op == op).unwrap_or_else(|| {
        panic!(
            "no {op} kernel among {:?}",
            p.kernels.iter().map(|k| &k.op).collect::<Vec<_>>()
        )
    })
}

/// The names of the loops of `k`'s row along the target's last subscript, for the nest
/// touching `touched`.
fn row(k: &Kernel, touched: &[usize]) -> Vec<String> {
    let s = k.schedule.as_ref().unwrap();
    let Some(Index::Affine(last)) = k.stmt.target.index.last() else {
        panic!("an affine last subscript")
    };
    let lanes = last.terms[0].0;
    run(k, s, lanes, touched)
        .into_iter()
        .map(|l| k.loops[l].name.clone())
        .collect()
}

/// A normalisation's per-channel scale and shift hold the channel but not the pixels: the
/// row runs through a channel's rows and columns and stops at the channel. With 64 channels
/// each CPE takes whole channels, so every row is 7 x 7 = 49 points long.
#[test]
fn a_map_runs_through_the_pixels_of_a_channel() {
    let p = program();
    let k = kernel(&p, "mul+add+relu");
    let names: Vec<String> = k.loops.iter().map(|l| l.name.clone()).collect();
    let got = row(k, &reads(k, &k.stmt.value));
    assert_eq!(got, names[2..4].to_vec(), "{names:?}");
    let s = k.schedule.as_ref().unwrap();
    let loops: Vec<usize> = got.iter().map(|n| names.iter().position(|m| m == n).unwrap()).collect();
    assert_eq!(row_lengths(k, s, &loops), Some(vec![49]));
}

/// A window spreads along the pool's rows and columns: its row is the lanes loop alone.
#[test]
fn a_window_keeps_the_row_to_the_lanes_loop() {
    let p = program();
    let k = kernel(&p, "max_pool");
    assert_eq!(row(k, &reads(k, &k.stmt.value)).len(), 1);
}

/// A convolution's input is a window over the output's pixels, so its sum of products runs
/// along the columns alone; its epilogue touches the sum and the bias only, and runs through
/// the tile's rows and columns.
#[test]
fn an_epilogue_runs_through_what_it_touches() {
    let p = program();
    let k = kernel(&p, "conv+add+relu");
    assert_eq!(row(k, &reads(k, &k.stmt.value)).len(), 1);
    let epilogue = k.stmt.epilogue.as_ref().expect("the bias and ReLU are an epilogue");
    let got = row(k, &reads(k, epilogue));
    assert!(got.len() >= 2, "{got:?}");
}
