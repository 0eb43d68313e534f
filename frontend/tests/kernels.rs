//! The interpreter's fast kernels (blocked, threaded matrix products; im2col convolution;
//! col2im transposed convolution; table-driven pooling) against naive loops written straight
//! from the definitions, on random shapes including odd and degenerate sizes.

use proptest::prelude::*;
use swflow_frontend::interp::eval_op;
use swflow_frontend::ir::{infer::infer, ConvAttrs, Op, PoolAttrs, PoolKind, Tensor};
use swflow_frontend::tolerance::{compare, Comparison};

fn tensor(shape: &[usize], seed: u64) -> Tensor {
    let n: usize = shape.iter().product();
    // Small integers scaled by 1/8 make every product and sum exact in f32, so the fast and
    // naive kernels must agree bit for bit regardless of summation order.
    let v = (0..n as u64)
        .map(|i| ((i.wrapping_mul(2654435761).wrapping_add(seed * 97)) % 17) as f32 / 8.0 - 1.0)
        .collect();
    Tensor::from_f32(shape.to_vec(), v).unwrap()
}

fn run(op: &Op, args: &[&Tensor]) -> Tensor {
    let types: Vec<_> = args.iter().map(|t| t.ty()).collect();
    let ty = infer(op, &types.iter().collect::<Vec<_>>()).unwrap();
    eval_op(op, args, &ty).unwrap()
}

fn f32s(t: &Tensor) -> Vec<f32> {
    t.to_f64_vec().into_iter().map(|x| x as f32).collect()
}

/// Direct 2-D convolution from the definition.
fn naive_conv(x: &Tensor, w: &Tensor, c: &ConvAttrs, out_shape: &[usize]) -> Vec<f32> {
    let (xs, ws) = (x.shape(), w.shape());
    let (xv, wv) = (f32s(x), f32s(w));
    let (cin, m, cg) = (xs[1], ws[0], ws[1]);
    let mg = m / c.groups;
    let mut out = vec![0f32; out_shape.iter().product()];
    for n in 0..xs[0] {
        for oc in 0..m {
            let g = oc / mg;
            for oh in 0..out_shape[2] {
                for ow in 0..out_shape[3] {
                    let mut acc = 0f32;
                    for ic in 0..cg {
                        for kh in 0..ws[2] {
                            for kw in 0..ws[3] {
                                let ih = (oh * c.strides[0] + kh * c.dilations[0]) as isize - c.pads[0] as isize;
                                let iw = (ow * c.strides[1] + kw * c.dilations[1]) as isize - c.pads[1] as isize;
                                if ih < 0 || iw < 0 || ih >= xs[2] as isize || iw >= xs[3] as isize {
                                    continue;
                                }
                                let xi = ((n * cin + g * cg + ic) * xs[2] + ih as usize) * xs[3] + iw as usize;
                                let wi = ((oc * cg + ic) * ws[2] + kh) * ws[3] + kw;
                                acc += xv[xi] * wv[wi];
                            }
                        }
                    }
                    out[((n * m + oc) * out_shape[2] + oh) * out_shape[3] + ow] = acc;
                }
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn matmul_matches_triple_loop(b in 1usize..3, m in prop::sample::select(vec![1usize, 3, 50, 70]), k in prop::sample::select(vec![1usize, 3, 130, 257]), n in prop::sample::select(vec![1usize, 3, 50, 300])) {
        let (a, w) = (tensor(&[b, m, k], 1), tensor(&[b, k, n], 2));
        let got = f32s(&run(&Op::MatMul, &[&a, &w]));
        let (av, wv) = (f32s(&a), f32s(&w));
        let mut want = vec![0f32; b * m * n];
        for bi in 0..b { for i in 0..m { for j in 0..n {
            let mut acc = 0f32;
            for kk in 0..k { acc += av[(bi * m + i) * k + kk] * wv[(bi * k + kk) * n + j]; }
            want[(bi * m + i) * n + j] = acc;
        }}}
        prop_assert_eq!(got, want);
    }

    #[test]
    fn conv_matches_direct_loops(
        n in 1usize..3, groups in 1usize..4, cg in 1usize..4, mg in 1usize..4,
        h in 1usize..12, w in 1usize..12, kh in 1usize..4, kw in 1usize..4,
        sh in 1usize..4, sw in 1usize..4, dh in 1usize..3, dw in 1usize..3,
        pads in prop::collection::vec(0usize..3, 4),
    ) {
        let c = ConvAttrs { strides: vec![sh, sw], dilations: vec![dh, dw], pads: pads.clone(), groups };
        let op = Op::Conv(c.clone());
        let (x, wt) = (tensor(&[n, groups * cg, h, w], 3), tensor(&[groups * mg, cg, kh, kw], 4));
        let types = [x.ty(), wt.ty()];
        // Skip shapes whose kernel does not fit the padded input.
        let Ok(ty) = infer(&op, &[&types[0], &types[1]]) else { return Ok(()) };
        let got = f32s(&run(&op, &[&x, &wt]));
        prop_assert_eq!(got, naive_conv(&x, &wt, &c, &ty.shape));
    }

    #[test]
    fn conv_transpose_is_the_adjoint_of_conv(
        groups in 1usize..3, cg in 1usize..3, mg in 1usize..3, h in 1usize..8, w in 1usize..8,
        k in 1usize..4, s in 1usize..3, d in 1usize..3, p in 0usize..2,
    ) {
        // <conv(x, w), y> == <x, conv_transpose(y, w)> for the same weight and attributes.
        let c = ConvAttrs { strides: vec![s, s], dilations: vec![d, d], pads: vec![p; 4], groups };
        let (x, wt) = (tensor(&[1, groups * cg, h, w], 5), tensor(&[groups * mg, cg, k, k], 6));
        let types = [x.ty(), wt.ty()];
        let Ok(yt) = infer(&Op::Conv(c.clone()), &[&types[0], &types[1]]) else { return Ok(()) };
        // Output padding so that the transposed convolution restores x's extent.
        let op_pad: Vec<usize> = (0..2).map(|i| {
            let full = (yt.shape[2 + i] - 1) * s + d * (k - 1) + 1;
            (x.shape()[2 + i] + 2 * p) - full
        }).collect();
        let y = tensor(&yt.shape, 7);
        let cx = run(&Op::Conv(c.clone()), &[&x, &wt]);
        let ct = run(&Op::ConvTranspose { conv: c, output_padding: op_pad }, &[&y, &wt]);
        prop_assert_eq!(ct.shape(), x.shape());
        let dot = |a: &Tensor, b: &Tensor| a.to_f64_vec().iter().zip(b.to_f64_vec()).map(|(p, q)| p * q).sum::<f64>();
        prop_assert_eq!(dot(&cx, &y), dot(&x, &ct));
    }

    #[test]
    fn pooling_matches_window_loops(
        h in 1usize..10, w in 1usize..10, kh in 1usize..4, kw in 1usize..4, s in 1usize..3,
        p in 0usize..2, ceil_mode in any::<bool>(), avg in any::<bool>(), include in any::<bool>(),
    ) {
        let kind = if avg { PoolKind::Avg { count_include_pad: include } } else { PoolKind::Max };
        let attrs = PoolAttrs { kind, kernel: vec![kh, kw], strides: vec![s, s], dilations: vec![1, 1], pads: vec![p; 4], ceil_mode };
        let x = tensor(&[1, 2, h, w], 8);
        let op = Op::Pool(attrs);
        let Ok(ty) = infer(&op, &[&x.ty()]) else { return Ok(()) };
        let got = run(&op, &[&x]);
        let xv = f32s(&x);
        let mut want = Vec::new();
        for c in 0..2 { for oh in 0..ty.shape[2] { for ow in 0..ty.shape[3] {
            // Window positions inside the input, and inside the input with its explicit
            // padding (what a ceil-mode window adds past the end padding counts for nothing).
            let (mut vals, mut padded) = (Vec::new(), 0);
            for a in 0..kh { for b in 0..kw {
                let (ih, iw) = ((oh * s + a) as isize - p as isize, (ow * s + b) as isize - p as isize);
                if ih >= 0 && iw >= 0 && (ih as usize) < h && (iw as usize) < w {
                    vals.push(xv[(c * h + ih as usize) * w + iw as usize]);
                }
                if ih < (h + p) as isize && iw < (w + p) as isize {
                    padded += 1;
                }
            }}
            want.push(match kind {
                PoolKind::Max => vals.iter().copied().fold(f32::NEG_INFINITY, f32::max),
                PoolKind::Avg { count_include_pad } => {
                    let divisor = if count_include_pad { padded as f32 } else { vals.len() as f32 };
                    vals.iter().sum::<f32>() / divisor
                }
            });
        }}}
        let want = Tensor::from_f32(ty.shape.clone(), want).unwrap();
        prop_assert!(compare(&got, &want, Comparison::Tolerance).is_ok());
    }
}
