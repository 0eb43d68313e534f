//! Sums of convolutions joined into one convolution.
//!
//! `conv(x1, w1) + conv(x2, w2)` over one output is `conv(concat(x1, x2), concat(w1, w2))`,
//! the inputs concatenated along their channels and the weights along their input channels
//! (one of the substitutions TASO verifies). A ResNet block that projects its shortcut ends
//! so: its last convolution and the projection are summed before the ReLU. Joined, the
//! projection's result (as large as the block's output) is neither written by its kernel nor
//! read back by the other's; with the scheduler's copy elision the concatenation costs
//! nothing, the kernels that produce its operands writing straight into its slices.
//!
//! - Each term may carry a per-channel affine chain after its convolution (biases, a batch
//!   normalisation its weights did not absorb), composed as [`super::affine`] composes them:
//!   `a[m] * conv + b[m]`. Its scale goes into the term's weights; the shifts of both terms
//!   add into one bias after the joined convolution.
//! - Both convolutions have one group and the same kernel extents, and either the same
//!   strides, dilations and pads over inputs of the same spatial extents, or 1x1 kernels
//!   without padding: then a term at stride `s` reads its input subsampled (a slice of every
//!   `s`-th row and column), as a 1x1 convolution at stride `s` is one at stride 1 of that.
//!   Two terms on the same input with the same geometry add their weights instead.
//! - Every node of a term is used once, by the next, and is not a graph output, so no value
//!   anything else reads disappears.
//! - The weights are known at compile time: a constant, or a broadcast of one value (a filled
//!   weight tensor, which a kernel reads as one scalar). The joined weights are one constant,
//!   so a term of the second kind makes its weights a tensor that kernels move; the terms are
//!   joined only when those bytes are fewer than the two passes over the output they save.
//!
//! Values change by rounding only (the sum over both inputs' channels is one reduction, the
//! weights are scaled in f64 and rounded to f32 once): results agree with the separate
//! convolutions within the project tolerance, not bit for bit.

use std::collections::HashMap;

use super::affine::compose;
use super::Rebuild;
use crate::ir::{BinaryOp, ConvAttrs, DType, Graph, NodeId, Op, Tensor};

/// A term of a sum: a convolution and the affine chain after it.
struct Term {
    conv: NodeId,
    /// The chain's composition, per output channel: the term is `a[m] * conv + b[m]`.
    a: Vec<f64>,
    b: Vec<f64>,
    /// The weights' values, and whether they are a constant tensor already.
    weights: Vec<f64>,
    materialised: bool,
}

/// Two terms to join, and the geometry of the joined convolution.
struct Join {
    terms: [Term; 2],
    /// The strides each term's input is subsampled by (all 1 when it is read as it is).
    subsample: [Vec<usize>; 2],
    attrs: ConvAttrs,
    /// Whether both terms read the same input: their weights add instead of concatenating.
    same_input: bool,
}

/// The weights of convolution `conv` when they are known at compile time, with whether they
/// are a constant tensor (rather than a broadcast of one value).
fn known_weights(g: &Graph, conv: NodeId) -> Option<(Vec<f64>, bool)> {
    let w = g.node(g.node(conv).inputs[1]);
    match &w.op {
        Op::Const(t) => Some((t.to_f64_vec(), true)),
        Op::Broadcast { .. } => match &g.node(w.inputs[0]).op {
            Op::Const(one) if one.numel() == 1 => Some((vec![one.to_f64_vec()[0]; w.ty.numel()], false)),
            _ => None,
        },
        _ => None,
    }
}

/// The term that ends at node `end`: a convolution with one group and known f32 weights,
/// followed by per-channel affine steps, each node used once by the next and not an output.
fn term(g: &Graph, users: &[Vec<NodeId>], outputs: &[bool], end: NodeId) -> Option<Term> {
    let ty = &g.node(end).ty;
    let mut steps = Vec::new();
    let mut at = end;
    loop {
        let node = g.node(at);
        if users[at.index()].len() != 1 || outputs[at.index()] || node.ty != *ty {
            return None;
        }
        match &node.op {
            Op::Conv(attrs) if attrs.groups == 1 && ty.dtype == DType::F32 => break,
            Op::Binary(_) => {
                let [x, y] = node.inputs[..] else { return None };
                let konst = |n: NodeId| matches!(g.node(n).op, Op::Const(_));
                steps.push(at);
                at = match (konst(x), konst(y)) {
                    (false, true) => x,
                    (true, false) => y,
                    _ => return None,
                };
            }
            _ => return None,
        }
    }
    let conv = at;
    let (weights, materialised) = known_weights(g, conv)?;
    let channels = ty.shape[1];
    let (mut a, mut b) = (vec![1.0; channels], vec![0.0; channels]);
    let mut from = conv;
    for &step in steps.iter().rev() {
        compose(g, step, from, 1, &mut a, &mut b)?;
        from = step;
    }
    Some(Term {
        conv,
        a,
        b,
        weights,
        materialised,
    })
}

/// The strides a 1x1 convolution without padding subsamples its input by, when it is one.
fn pointwise_strides(attrs: &ConvAttrs, kernel: &[usize]) -> Option<Vec<usize>> {
    (kernel.iter().all(|&k| k == 1) && attrs.pads.iter().all(|&p| p == 0)).then(|| attrs.strides.clone())
}

/// The join of the two terms of sum `sum`, when they can be joined and that moves fewer bytes.
fn join(g: &Graph, users: &[Vec<NodeId>], outputs: &[bool], sum: NodeId) -> Option<Join> {
    let node = g.node(sum);
    let (Op::Binary(BinaryOp::Add), [p, q]) = (&node.op, &node.inputs[..]) else {
        return None;
    };
    if p == q {
        return None;
    }
    let terms = [term(g, users, outputs, *p)?, term(g, users, outputs, *q)?];
    let conv = |t: &Term| {
        let n = g.node(t.conv);
        let Op::Conv(attrs) = &n.op else {
            unreachable!("a term starts at a convolution")
        };
        let (x, w) = (&g.node(n.inputs[0]).ty.shape, &g.node(n.inputs[1]).ty.shape);
        (n.inputs[0], attrs, x[2..].to_vec(), w[2..].to_vec())
    };
    let [(x1, a1, s1, k1), (x2, a2, s2, k2)] = [conv(&terms[0]), conv(&terms[1])];
    if k1 != k2 {
        return None;
    }
    let ones = vec![1; k1.len()];
    let (subsample, attrs) = if a1 == a2 && s1 == s2 {
        ([ones.clone(), ones], a1.clone())
    } else {
        let strides = [pointwise_strides(a1, &k1)?, pointwise_strides(a2, &k2)?];
        let attrs = ConvAttrs {
            strides: ones.clone(),
            dilations: ones,
            pads: vec![0; 2 * k1.len()],
            groups: 1,
        };
        (strides, attrs)
    };
    let added: usize = terms.iter().filter(|t| !t.materialised).map(|t| t.weights.len()).sum();
    if added >= 2 * node.ty.numel() {
        return None;
    }
    Some(Join {
        terms,
        subsample,
        attrs,
        same_input: x1 == x2 && a1 == a2,
    })
}

/// The joined weights, `[M, C1 + C2, K..]` (or `[M, C, K..]` summed, on one input): each
/// term's weights times its output channel's scale, in f64, rounded once.
fn joined_weights(j: &Join, m: usize) -> Vec<f32> {
    let blocks: Vec<Vec<f64>> = j
        .terms
        .iter()
        .map(|t| {
            let block = t.weights.len() / m;
            t.weights.iter().enumerate().map(|(k, w)| w * t.a[k / block]).collect()
        })
        .collect();
    if j.same_input {
        return blocks[0].iter().zip(&blocks[1]).map(|(x, y)| (x + y) as f32).collect();
    }
    let (b1, b2) = (blocks[0].len() / m, blocks[1].len() / m);
    (0..m)
        .flat_map(|o| {
            blocks[0][o * b1..(o + 1) * b1]
                .iter()
                .chain(&blocks[1][o * b2..(o + 1) * b2])
        })
        .map(|&w| w as f32)
        .collect()
}

/// Appends the joined convolution in place of old node `at` (the later of the two
/// convolutions), under its name; returns the new node.
fn emit(r: &mut Rebuild<'_>, j: &Join, at: NodeId) -> NodeId {
    let g = r.old;
    let ty = g.node(at).ty.clone();
    let m = ty.shape[1];
    let mut inputs = Vec::new();
    for (t, strides) in j.terms.iter().zip(&j.subsample) {
        let x = g.node(t.conv).inputs[0];
        let mut input = r.map[x.index()];
        if strides.iter().any(|&s| s != 1) {
            let xt = &g.node(x).ty.shape;
            let steps = [vec![1, 1], strides.iter().map(|&s| s as i64).collect()].concat();
            let sizes = [xt[..2].to_vec(), ty.shape[2..].to_vec()].concat();
            let op = Op::Slice {
                starts: vec![0; xt.len()],
                steps,
                sizes,
            };
            let name = r.fresh(&format!("{}.subsampled", g.node(x).name));
            let origin = g.node(t.conv).origin.clone();
            input = r
                .new
                .add_node(name, op, vec![input], origin)
                .expect("a slice within its operand");
        }
        inputs.push(input);
    }
    let x = if j.same_input {
        inputs[0]
    } else {
        let name = r.fresh(&format!("{}.inputs", g.node(at).name));
        let origin = g.node(at).origin.clone();
        r.new
            .add_node(name, Op::Concat { axis: 1 }, inputs, origin)
            .expect("inputs alike but for their channels")
    };
    let channels = r.new.node(x).ty.shape[1];
    let shape = [vec![m, channels], g.node(g.node(at).inputs[1]).ty.shape[2..].to_vec()].concat();
    let w = Tensor::from_f32(shape, joined_weights(j, m)).expect("the joined weights' shape");
    let w = r.constant(&format!("{}.joined", g.node(g.node(at).inputs[1]).name), w, at);
    r.replace(at, Op::Conv(j.attrs.clone()), vec![x, w])
}

/// The graph with every sum of two convolutions that can be joined joined (see the module's
/// description).
pub fn join_convolution_sums(g: &Graph) -> Graph {
    let (users, outputs) = (g.users(), g.output_mask());
    // The later convolution of each join, and each join's sum, with the join.
    let mut at_conv: HashMap<NodeId, usize> = HashMap::new();
    let mut at_sum: HashMap<NodeId, usize> = HashMap::new();
    let mut joins = Vec::new();
    for id in g.ids() {
        if let Some(j) = join(g, &users, &outputs, id) {
            at_conv.insert(j.terms[0].conv.max(j.terms[1].conv), joins.len());
            at_sum.insert(id, joins.len());
            joins.push(j);
        }
    }
    let mut r = Rebuild::new(g);
    let mut convs: HashMap<usize, NodeId> = HashMap::new();
    for id in g.ids() {
        let new = if let Some(&k) = at_conv.get(&id) {
            let conv = emit(&mut r, &joins[k], id);
            convs.insert(k, conv);
            conv
        } else if let Some(&k) = at_sum.get(&id) {
            // Both terms' nodes were copied on the joined convolution's way; the sum replaces
            // their last nodes, so they are dropped with the unused.
            let conv = convs[&k];
            let [t1, t2] = &joins[k].terms;
            let b: Vec<f64> = t1.b.iter().zip(&t2.b).map(|(x, y)| x + y).collect();
            if b.iter().all(|&b| b == 0.0) {
                conv
            } else {
                let shape = g
                    .node(id)
                    .ty
                    .shape
                    .iter()
                    .enumerate()
                    .map(|(d, &e)| if d == 1 { e } else { 1 })
                    .collect();
                let bias = Tensor::from_f32(shape, b.iter().map(|&b| b as f32).collect()).expect("one per channel");
                let bias = r.constant(&format!("{}.bias", g.node(id).name), bias, id);
                r.replace(id, Op::Binary(BinaryOp::Add), vec![conv, bias])
            }
        } else {
            r.copy(id)
        };
        r.map.push(new);
    }
    r.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp;
    use crate::ir::{parse, verify};
    use crate::tolerance::{compare, Comparison};

    /// Runs `g` on inputs of mixed signs and magnitudes.
    fn outputs(g: &Graph) -> Vec<Tensor> {
        let inputs: Vec<Tensor> = g
            .inputs()
            .map(|id| {
                let ty = &g.node(id).ty;
                let v = (0..ty.numel())
                    .map(|i| (i as f32 * 0.37).sin() * (1.0 + (i % 5) as f32))
                    .collect();
                Tensor::from_f32(ty.shape.clone(), v).unwrap()
            })
            .collect();
        interp::run(g, &inputs).unwrap()
    }

    /// The ops of `g`'s nodes other than inputs and constants, by name.
    fn ops(g: &Graph) -> Vec<&'static str> {
        g.nodes()
            .iter()
            .filter(|n| !matches!(n.op, Op::Input | Op::Const(_) | Op::Broadcast { .. }))
            .map(|n| n.op.name())
            .collect()
    }

    /// Joins the sums of `text`'s graph; checks the result verifies and computes what the
    /// graph did, within the project tolerance.
    fn joined(text: &str) -> Graph {
        let g = parse(text).unwrap();
        verify(&g).unwrap();
        let out = join_convolution_sums(&g);
        verify(&out).unwrap();
        for (k, (got, want)) in outputs(&out).iter().zip(&outputs(&g)).enumerate() {
            compare(got, want, Comparison::Tolerance).unwrap_or_else(|m| panic!("output {k}: {}", m.message));
        }
        out
    }

    /// A block's last convolution with its bias, and a projected shortcut at stride 2 whose
    /// filled weights a batch normalisation scales: one convolution of the branch and the
    /// subsampled input, then one bias.
    #[test]
    fn a_projected_shortcut_joins_the_last_convolution() {
        let g = joined(
            "graph \"block\" {
              %x: f32[1,3,6,6] = input
              %wa: f32[4,3,3,3] = input
              %a: f32[1,4,3,3] = conv(%x, %wa) {strides=[2,2], dilations=[1,1], pads=[1,1,1,1], groups=1}
              %r: f32[1,4,3,3] = relu(%a)
              %wc: f32[5,4,1,1] = const [1.0, -2.0, 3.0, 0.5, 4.0, 1.5, -1.0, 2.0, 0.25, 3.0, -0.5, 1.0, 2.0, 2.5, -3.0, 0.75, 1.0, 1.0, -1.0, 0.5]
              %c: f32[1,5,3,3] = conv(%r, %wc) {strides=[1,1], dilations=[1,1], pads=[0,0,0,0], groups=1}
              %bc: f32[1,5,1,1] = const [1.0, 2.0, 3.0, -1.0, 0.5]
              %cb: f32[1,5,3,3] = add(%c, %bc)
              %half: f32[] = const [0.5]
              %wp: f32[5,3,1,1] = broadcast(%half) {shape=[5,3,1,1]}
              %p: f32[1,5,3,3] = conv(%x, %wp) {strides=[2,2], dilations=[1,1], pads=[0,0,0,0], groups=1}
              %s: f32[1,5,1,1] = const [2.0, -1.0, 4.0, 0.5, 1.0]
              %ps: f32[1,5,3,3] = mul(%p, %s)
              %t: f32[1,5,1,1] = const [0.5, 0.25, -3.0, 1.0, 0.0]
              %pt: f32[1,5,3,3] = sub(%t, %ps)
              %sum: f32[1,5,3,3] = add(%cb, %pt)
              %y: f32[1,5,3,3] = relu(%sum)
              output \"y\" = %y
            }",
        );
        assert_eq!(ops(&g), ["conv", "relu", "slice", "concat", "conv", "add", "relu"]);
    }

    /// Two convolutions of one input with the same geometry add their weights.
    #[test]
    fn terms_on_one_input_add_their_weights() {
        let g = joined(
            "graph \"one_input\" {
              %x: f32[2,2,5,5] = input
              %w1: f32[3,2,3,3] = const splat 0.5
              %c1: f32[2,3,3,3] = conv(%x, %w1) {strides=[1,1], dilations=[1,1], pads=[0,0,0,0], groups=1}
              %w2: f32[3,2,3,3] = const splat -0.25
              %c2: f32[2,3,3,3] = conv(%x, %w2) {strides=[1,1], dilations=[1,1], pads=[0,0,0,0], groups=1}
              %sum: f32[2,3,3,3] = add(%c1, %c2)
              output \"sum\" = %sum
            }",
        );
        assert_eq!(ops(&g), ["conv"]);
        let conv = g.node(g.outputs[0].node);
        let Op::Const(w) = &g.node(conv.inputs[1]).op else {
            panic!("constant weights")
        };
        assert!(w.is_splat() && w.to_f64_vec()[0] == 0.25, "{w:?}");
    }

    /// Filled weights that joining would make a tensor are joined only when they are fewer
    /// elements than two passes over the output.
    #[test]
    fn filled_weights_join_when_they_move_fewer_bytes() {
        let block = |spatial: usize| {
            format!(
                "graph \"fill\" {{
                  %x: f32[1,16,{spatial},{spatial}] = input
                  %z: f32[1,16,{spatial},{spatial}] = input
                  %one: f32[] = const [1.0]
                  %wx: f32[32,16,1,1] = broadcast(%one) {{shape=[32,16,1,1]}}
                  %cx: f32[1,32,{spatial},{spatial}] = conv(%x, %wx) {{strides=[1,1], dilations=[1,1], pads=[0,0,0,0], groups=1}}
                  %wz: f32[32,16,1,1] = broadcast(%one) {{shape=[32,16,1,1]}}
                  %cz: f32[1,32,{spatial},{spatial}] = conv(%z, %wz) {{strides=[1,1], dilations=[1,1], pads=[0,0,0,0], groups=1}}
                  %sum: f32[1,32,{spatial},{spatial}] = add(%cx, %cz)
                  output \"sum\" = %sum
                }}"
            )
        };
        // Twice 512 weights against twice 32 * 4 * 4 outputs: as many, kept apart.
        assert_eq!(ops(&joined(&block(4))), ["conv", "conv", "add"]);
        // Against twice 32 * 5 * 5: joined.
        assert_eq!(ops(&joined(&block(5))), ["concat", "conv"]);
    }
}
