//! Round trips of the graph text form and of `.npy`, and their parsers under mutated input.

use std::sync::Arc;

use proptest::prelude::*;
use swflow_frontend::ir::{
    parse, print, verify, BinaryOp, DType, Data, Graph, NodeId, Op, Output, ReduceKind, Tensor, TensorType, UnaryOp,
};
use swflow_frontend::npy;

/// A random, valid graph: inputs and constants, then a chain of ops whose operands are picked
/// from what exists. `names` supplies value names (including awkward ones).
fn random_graph(choices: &[u8], names: &[String]) -> Graph {
    let mut g = Graph::new("random graph \"q\"");
    let mut name_at = 0;
    let mut next_name = || {
        name_at += 1;
        format!("{}#{name_at}", names[name_at % names.len()])
    };
    let x = g.add_input(next_name(), TensorType::new(DType::F32, vec![2, 3]).unwrap());
    let c = g.add_const(
        next_name(),
        Arc::new(Tensor::from_f32(vec![3], vec![0.5, -0.0, f32::NAN]).unwrap()),
    );
    let i = g.add_const(next_name(), Arc::new(Tensor::i64_vector(vec![2, -1, 0])));
    let mut values: Vec<NodeId> = vec![x, c];
    for (k, &choice) in choices.iter().enumerate() {
        let a = values[k % values.len()];
        let b = values[(k * 7 + 3) % values.len()];
        let op = match choice % 10 {
            0 => Op::Unary(UnaryOp::ALL[k % 11]),
            1 => Op::Binary(BinaryOp::ALL[k % 7]),
            2 => Op::Reduce {
                kind: [ReduceKind::Sum, ReduceKind::Max, ReduceKind::Min][k % 3],
                axes: vec![g.node(a).ty.rank().saturating_sub(1)],
            },
            3 => Op::Transpose {
                perm: (0..g.node(a).ty.rank()).rev().collect(),
            },
            4 => Op::Reshape {
                shape: vec![g.node(a).ty.numel()],
            },
            5 => Op::Cast { to: DType::F64 },
            6 => Op::Gather { axis: 0 },
            7 => Op::Concat { axis: 0 },
            8 => Op::Pad {
                pads: (0..2 * g.node(a).ty.rank()).map(|d| d % 3).collect(),
                value: [0.0, -1.5, f64::NEG_INFINITY][k % 3],
            },
            _ => Op::Slice {
                starts: vec![0; g.node(a).ty.rank()],
                steps: vec![1; g.node(a).ty.rank()],
                sizes: g.node(a).ty.shape.clone(),
            },
        };
        let operands = match &op {
            Op::Binary(_) | Op::Concat { .. } => vec![a, b],
            Op::Gather { .. } => vec![a, i],
            _ => vec![a],
        };
        if let Ok(id) = g.add_node(next_name(), op, operands, (k % 2 == 0).then(|| format!("origin {k}"))) {
            if g.node(id).ty.dtype == DType::F32 {
                values.push(id);
            }
        }
    }
    let last = *values.last().unwrap();
    g.outputs.push(Output {
        name: "out\tput".into(),
        node: last,
    });
    g
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn graph_text_round_trips(choices in prop::collection::vec(any::<u8>(), 0..40), names in prop::collection::vec("[a-z_./%\" \\n\\\\é-]{1,6}", 1..5)) {
        let g = random_graph(&choices, &names);
        verify(&g).unwrap();
        let text = print(&g);
        let back = parse(&text).unwrap();
        verify(&back).unwrap();
        prop_assert_eq!(print(&back), text);
    }

    #[test]
    fn graph_parser_rejects_mutated_text_without_panicking(choices in prop::collection::vec(any::<u8>(), 0..20), cuts in prop::collection::vec((any::<usize>(), any::<char>()), 1..4)) {
        let mut text: Vec<char> = print(&random_graph(&choices, &["v".to_string()])).chars().collect();
        for (at, c) in cuts {
            let at = at % text.len();
            text[at] = c;
        }
        let text: String = text.into_iter().collect();
        if let Ok(g) = parse(&text) {
            let _ = verify(&g);
        }
    }

    #[test]
    fn npy_round_trips(shape in prop::collection::vec(0usize..5, 0..4), seed in any::<u64>(), kind in 0u8..4) {
        let n: usize = shape.iter().product();
        let data = match kind {
            0 => Data::F32((0..n).map(|i| f32::from_bits((seed as u32).wrapping_mul(i as u32 + 1))).collect()),
            1 => Data::F64((0..n).map(|i| f64::from_bits(seed.wrapping_mul(i as u64 + 1))).collect()),
            2 => Data::I64((0..n).map(|i| seed.wrapping_mul(i as u64 + 1) as i64).collect()),
            _ => Data::Bool((0..n).map(|i| (seed >> (i % 64)) & 1 == 1).collect()),
        };
        let t = Tensor::new(shape, data).unwrap();
        let back = npy::decode(&npy::encode(&t)).unwrap();
        prop_assert!(back.bit_eq(&t) && back.dtype() == t.dtype());
    }

    #[test]
    fn npy_decoder_rejects_mutated_bytes_without_panicking(at in prop::collection::vec((any::<usize>(), any::<u8>()), 1..6), cut in any::<usize>()) {
        let t = Tensor::from_f32(vec![2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        let mut bytes = npy::encode(&t);
        for (i, v) in at {
            let i = i % bytes.len();
            bytes[i] = v;
        }
        bytes.truncate(cut % (bytes.len() + 1));
        let _ = npy::decode(&bytes);
    }
}

/// A file written by numpy itself (`np.save` of `np.arange(6, dtype=np.float32).reshape(2, 3)`).
#[test]
fn npy_reads_numpy_output() {
    let mut bytes = b"\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }".to_vec();
    bytes.resize(10 + 0x76 - 1, b' ');
    bytes.push(b'\n');
    for v in 0..6 {
        bytes.extend_from_slice(&(v as f32).to_le_bytes());
    }
    let t = npy::decode(&bytes).unwrap();
    assert_eq!(t.shape(), &[2, 3]);
    assert_eq!(t.to_f64_vec(), vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    assert_eq!(npy::encode(&t), bytes, "swflow writes the same bytes numpy does");
}
