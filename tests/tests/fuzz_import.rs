//! Mutation fuzzing of the ONNX importer and the interpreter on what it accepts.
//!
//! Real model bytes (the example model and a sample of conformance models) are mutated at the
//! byte level (flips, overwrites, truncation, splices) and at the protobuf level (dimensions,
//! attribute values, op types, operand names, opsets set to hostile values). Every mutant must
//! import or fail with an error; whatever imports and is small enough is also run. The test
//! fails on any panic. It runs a fixed number of mutants, stopping early when its time budget
//! is spent, and prints how many it tried.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use prost::Message;
use swflow_frontend::interp;
use swflow_frontend::ir::{cost, Graph};
use swflow_frontend::onnx::proto::ModelProto;
use swflow_frontend::onnx::{import_bytes, ImportOptions};
use swflow_frontend::random::random_tensor;
use swflow_tests::{conformance_dir, read_list, workspace_root};

const MUTANTS: usize = 200_000;
const BUDGET: Duration = Duration::from_secs(90);
/// Mutants that import are run when their work and memory are at most these.
const RUN_FLOPS: u64 = 50_000_000;
const RUN_ELEMENTS: usize = 4_000_000;

/// xorshift64*, deterministic.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const HOSTILE_INTS: [i64; 12] = [0, 1, -1, 2, 3, 7, -7, 64, 1 << 20, 1 << 40, i64::MAX, i64::MIN];
const OP_TYPES: [&str; 16] = [
    "Conv",
    "Gemm",
    "Reshape",
    "Slice",
    "Gather",
    "Concat",
    "Split",
    "Softmax",
    "MaxPool",
    "AveragePool",
    "Transpose",
    "Unsqueeze",
    "ReduceSum",
    "ConvTranspose",
    "LRN",
    "Foo",
];

fn corpus() -> Vec<Vec<u8>> {
    let mut models = vec![std::fs::read(workspace_root().join("examples/lenet/model.onnx")).unwrap()];
    let dir = conformance_dir().unwrap();
    let manifest = read_list(&workspace_root().join("tests/conformance/manifest.txt")).unwrap();
    for (name, _) in manifest.iter().step_by(4) {
        models.push(std::fs::read(dir.join("node").join(name).join("model.onnx")).unwrap());
    }
    models.push(std::fs::read(dir.join("light/squeezenet/model.onnx")).unwrap());
    models
}

fn mutate_bytes(rng: &mut Rng, mut b: Vec<u8>) -> Vec<u8> {
    for _ in 0..1 + rng.below(4) {
        if b.is_empty() {
            break;
        }
        let at = rng.below(b.len());
        match rng.below(5) {
            0 => b[at] ^= 1 << rng.below(8),
            1 => b[at] = rng.next() as u8,
            2 => b.truncate(at),
            3 => {
                let len = rng.below(16).min(b.len() - at);
                let chunk = b[at..at + len].to_vec();
                let to = rng.below(b.len());
                b.splice(to..to, chunk);
            }
            _ => {
                let end = (at + rng.below(8)).min(b.len());
                b.drain(at..end);
            }
        }
    }
    b
}

fn mutate_proto(rng: &mut Rng, bytes: &[u8]) -> Vec<u8> {
    let Ok(mut m) = ModelProto::decode(bytes) else {
        return bytes.to_vec();
    };
    let hostile = |rng: &mut Rng| HOSTILE_INTS[rng.below(HOSTILE_INTS.len())];
    let Some(g) = m.graph.as_mut() else {
        return bytes.to_vec();
    };
    for _ in 0..1 + rng.below(3) {
        match rng.below(7) {
            0 if !g.initializer.is_empty() => {
                let i = rng.below(g.initializer.len());
                let t = &mut g.initializer[i];
                if t.dims.is_empty() {
                    t.dims.push(hostile(rng));
                } else {
                    let d = rng.below(t.dims.len());
                    t.dims[d] = hostile(rng);
                }
            }
            1 if !g.node.is_empty() => {
                let n = rng.below(g.node.len());
                if let Some(a) = g.node[n].attribute.first_mut() {
                    a.i = Some(hostile(rng));
                    if !a.ints.is_empty() {
                        let k = rng.below(a.ints.len());
                        a.ints[k] = hostile(rng);
                    }
                }
            }
            2 if !g.node.is_empty() => {
                let n = rng.below(g.node.len());
                g.node[n].op_type = Some(OP_TYPES[rng.below(OP_TYPES.len())].to_string());
            }
            3 if !g.node.is_empty() => {
                let n = rng.below(g.node.len());
                let node = &mut g.node[n];
                if !node.input.is_empty() {
                    let k = rng.below(node.input.len());
                    node.input[k] = if rng.below(2) == 0 {
                        String::new()
                    } else {
                        node.output.first().cloned().unwrap_or_default()
                    };
                }
            }
            4 => {
                if let Some(o) = m.opset_import.first_mut() {
                    o.version = Some(hostile(rng));
                }
                break;
            }
            5 if !g.input.is_empty() => {
                use swflow_frontend::onnx::proto::{tensor_shape_proto::dimension::Value, type_proto};
                let i = rng.below(g.input.len());
                if let Some(type_proto::Value::TensorType(t)) =
                    g.input[i].r#type.as_mut().and_then(|t| t.value.as_mut())
                {
                    if let Some(dim) = t.shape.as_mut().and_then(|s| s.dim.first_mut()) {
                        dim.value = Some(Value::DimValue(hostile(rng)));
                    }
                }
            }
            _ if !g.node.is_empty() => {
                let n = rng.below(g.node.len());
                if let Some(a) = g.node[n].attribute.first_mut().and_then(|a| a.t.as_mut()) {
                    a.raw_data = Some(vec![0xAB; rng.below(12)]);
                }
            }
            _ => {}
        }
    }
    m.encode_to_vec()
}

fn small_enough(g: &Graph) -> bool {
    cost::graph_flops(g) <= RUN_FLOPS && g.nodes().iter().map(|n| n.ty.numel()).sum::<usize>() <= RUN_ELEMENTS
}

#[test]
fn mutated_models_never_panic() {
    let corpus = corpus();
    let mut rng = Rng(0x5EED_1234_ABCD_0001);
    let (mut imported, mut ran, mut tried) = (0, 0, 0);
    let mut panics = Vec::new();
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let start = Instant::now();
    while tried < MUTANTS && start.elapsed() < BUDGET {
        let seed = &corpus[rng.below(corpus.len())];
        let bytes = if rng.below(2) == 0 {
            mutate_bytes(&mut rng, seed.clone())
        } else {
            mutate_proto(&mut rng, seed)
        };
        tried += 1;
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let Ok(g) = import_bytes(&bytes, "mutant.onnx", None, &ImportOptions::default()) else {
                return (false, false);
            };
            if !small_enough(&g) {
                return (true, false);
            }
            let inputs: Vec<_> = g
                .inputs()
                .enumerate()
                .map(|(i, id)| random_tensor(&g.node(id).ty, 7, i))
                .collect();
            let _ = interp::run(&g, &inputs);
            (true, true)
        }));
        match outcome {
            Ok((i, r)) => {
                imported += i as usize;
                ran += r as usize;
            }
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                if panics.len() < 10 {
                    let path = std::env::temp_dir().join(format!("swflow-panic-{}.onnx", panics.len()));
                    let _ = std::fs::write(&path, &bytes);
                    panics.push(format!("{msg} (mutant saved to {})", path.display()));
                } else {
                    panics.push(msg);
                }
            }
        }
    }
    std::panic::set_hook(previous);
    println!(
        "fuzz: {tried} mutants from {} models in {:.1?}: {imported} imported, {ran} ran, {} panics",
        corpus.len(),
        start.elapsed(),
        panics.len()
    );
    assert!(
        panics.is_empty(),
        "{} panics, first ones:\n{}",
        panics.len(),
        panics.iter().take(10).cloned().collect::<Vec<_>>().join("\n")
    );
}
