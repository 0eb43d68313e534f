//! ONNX import: decodes a `ModelProto`, checks the opset, turns initializers into constants and
//! graph inputs into typed inputs, and expands each ONNX node into primitives (see [`ops`]).
//!
//! Shape inference happens as nodes are created ([`crate::ir::Graph::add_node`]) and
//! computations on constants are folded on the way ([`builder::Builder`]), so shape
//! subgraphs (`Shape`, `Gather`, `Concat`, `Unsqueeze`, `ConstantOfShape`, ...) disappear.
//! Models are untrusted input: every failure is an [`ImportError`] naming the file and, where
//! one is involved, the node, its op type and the reason.

mod attrs;
mod builder;
mod loss;
mod ops;
pub mod proto;
mod tensor;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use prost::Message;

use crate::ir::{verify, DType, Graph, Output, Tensor, TensorType};
use builder::Builder;
pub use loss::{running_statistics, trainable_initializers, LABELS, LOSS};
pub use tensor::{dtype_from_onnx, tensor_from_proto};

/// Decodes a serialized `TensorProto` (the `.pb` files of ONNX test data) into its name and
/// value.
pub fn decode_tensor(bytes: &[u8]) -> Result<(String, Tensor), String> {
    let proto = proto::TensorProto::decode(bytes).map_err(|e| format!("not a valid TensorProto: {e}"))?;
    Ok((proto.name().to_string(), tensor_from_proto(&proto, None)?))
}

/// Lowest and highest `ai.onnx` opset versions the importer accepts. The highest is the newest
/// opset the `onnx` release of the conformance suite defines. Within the range, each op's
/// handler states the earliest version of the op it implements (see `ops`).
pub const OPSET_RANGE: std::ops::RangeInclusive<i64> = 1..=28;

/// An import failure: the file and what went wrong.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {kind}")]
pub struct ImportError {
    pub file: String,
    pub kind: ImportErrorKind,
}

#[derive(Debug, thiserror::Error)]
pub enum ImportErrorKind {
    #[error("cannot read the model: {0}")]
    Io(std::io::Error),
    #[error("not a valid ONNX model: {0}")]
    Decode(prost::DecodeError),
    #[error("the model has no graph")]
    NoGraph,
    #[error("the model imports no ai.onnx opset")]
    NoOpset,
    #[error("opset {version} of ai.onnx is not supported (supported: {} to {})", OPSET_RANGE.start(), OPSET_RANGE.end())]
    Opset { version: i64 },
    #[error("version {version} of domain {domain} is not supported (supported: {})", PREVIEW_TRAINING.1)]
    Domain { domain: String, version: i64 },
    #[error("node '{node}' ({op}): {reason}")]
    Node { node: String, op: String, reason: String },
    #[error("initializer '{name}': {reason}")]
    Initializer { name: String, reason: String },
    #[error("input '{name}': {reason}")]
    Input { name: String, reason: String },
    #[error("output '{name}': {reason}")]
    Output { name: String, reason: String },
    #[error("imported graph fails verification: {0}")]
    Verify(#[from] crate::ir::VerifyError),
}

/// Choices the model itself cannot make.
#[derive(Clone, Debug, Default)]
pub struct ImportOptions {
    /// Values for symbolic input dimensions (`dim_param`), e.g. `N -> 1`.
    pub dims: HashMap<String, usize>,
    /// Graph inputs fixed to a value at compile time: each becomes a constant and is no
    /// longer an input. For models that pass shapes or axes as inputs.
    pub constants: HashMap<String, Tensor>,
    /// Values of graph inputs known at import time (as in `swflow run` or a test's data set).
    /// An input whose value an op needs statically (a shape, axes, starts, repeats, scales)
    /// is frozen from here, as if given in `constants`; every other input stays an input.
    /// [`frozen_inputs`] tells which were frozen.
    pub values: HashMap<String, Tensor>,
    /// Initializers imported as graph inputs (typed by their value) instead of constants: the
    /// parameters of a training step or a gradient. Import neither folds nor freezes them,
    /// except those an op needs statically (a shape, a pad value), which stay constants:
    /// [`frozen_inputs`] does not list them, and the graph simply has no input of their name.
    /// [`trainable_initializers`] gives the usual choice.
    pub parameters: HashSet<String>,
    /// A loss to attach to the model: the imported graph's first output is then this loss,
    /// followed by the model's outputs.
    pub loss: Option<Loss>,
    /// Training-mode dropout draws its mask from a new graph input of uniform noise in
    /// `[0, 1)` (f32, the shape of the dropped tensor), named [`DROPOUT_NOISE`] followed by
    /// the node's first output, and keeps the elements whose noise is at least the ratio: a
    /// training program fills it with fresh noise every step ([`crate::random::dropout_noise`]).
    /// Otherwise the mask is the ONNX reference's, a constant drawn from the node's seed.
    pub dropout_noise: bool,
}

/// The start of the names of the noise inputs of [`ImportOptions::dropout_noise`].
pub const DROPOUT_NOISE: &str = "dropout_noise/";

/// A loss attached to a model at import, on its first output (the prediction), against a
/// new graph input holding the labels ([`LABELS`], unless the model uses that name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Loss {
    /// The mean of the squared differences from labels of the prediction's type.
    Mse,
    /// ONNX `SoftmaxCrossEntropyLoss` with mean reduction: logits `[N, C, d..]` against int64
    /// class indices `[N, d..]`.
    CrossEntropy,
    /// The sum of the prediction's elements; no labels.
    Sum,
    /// The model computes its loss: the output of this name, summed if it is not a scalar.
    Output(String),
}

/// The graph inputs of the model that `graph` was imported from and that import froze to
/// constants: those the model declares that are not inputs of `graph` and not initializers.
pub fn frozen_inputs(model: &proto::ModelProto, graph: &Graph) -> Vec<String> {
    let Some(g) = model.graph.as_ref() else {
        return Vec::new();
    };
    let inits: HashSet<&str> = g.initializer.iter().map(|t| t.name()).collect();
    let live: HashSet<&str> = graph.inputs().map(|id| graph.node(id).name.as_str()).collect();
    g.input
        .iter()
        .map(|v| v.name())
        .filter(|n| !inits.contains(n) && !live.contains(n))
        .map(str::to_string)
        .collect()
}

/// A decoded model file, ready to import.
pub struct ModelFile {
    /// The path as given, for messages.
    pub file: String,
    /// The folder external data may be read from.
    pub dir: PathBuf,
    pub proto: proto::ModelProto,
}

impl ModelFile {
    /// Reads and decodes the model at `path`.
    pub fn read(path: &Path) -> Result<ModelFile, ImportError> {
        let file = path.display().to_string();
        let wrap = |kind| ImportError {
            file: file.clone(),
            kind,
        };
        let bytes = std::fs::read(path).map_err(|e| wrap(ImportErrorKind::Io(e)))?;
        let proto = proto::ModelProto::decode(bytes.as_slice()).map_err(|e| wrap(ImportErrorKind::Decode(e)))?;
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Ok(ModelFile { file, dir, proto })
    }

    /// Imports the model into the graph IR.
    pub fn import(&self, opts: &ImportOptions) -> Result<Graph, ImportError> {
        import_model(&self.proto, Some(&self.dir), opts).map_err(|kind| ImportError {
            file: self.file.clone(),
            kind,
        })
    }

    /// How many nodes of each ONNX op type the main graph has, by op type.
    pub fn op_histogram(&self) -> std::collections::BTreeMap<String, usize> {
        let mut h = std::collections::BTreeMap::new();
        for n in self.proto.graph.iter().flat_map(|g| &g.node) {
            *h.entry(n.op_type().to_string()).or_insert(0) += 1;
        }
        h
    }
}

/// Imports the model at `path`. External data files are looked up beside it.
pub fn import_file(path: &Path, opts: &ImportOptions) -> Result<Graph, ImportError> {
    ModelFile::read(path)?.import(opts)
}

/// Imports a serialized model. `file` names it in errors; `dir` is the folder external data
/// may be read from (none: external data is an error).
pub fn import_bytes(bytes: &[u8], file: &str, dir: Option<&Path>, opts: &ImportOptions) -> Result<Graph, ImportError> {
    let wrap = |kind| ImportError {
        file: file.to_string(),
        kind,
    };
    let model = proto::ModelProto::decode(bytes).map_err(|e| wrap(ImportErrorKind::Decode(e)))?;
    import_model(&model, dir, opts).map_err(wrap)
}

/// The domain of the optimizers swflow imports (`Adagrad`, `Momentum`, `Adam`) and the one
/// version of it that exists.
pub const PREVIEW_TRAINING: (&str, i64) = ("ai.onnx.preview.training", 1);

/// The ai.onnx opset a model imports. A model without one is accepted when none of its nodes
/// is of that domain (the optimizer node tests import only [`PREVIEW_TRAINING`]); it reads
/// as the newest opset.
pub fn model_opset(model: &proto::ModelProto) -> Result<i64, ImportErrorKind> {
    let version = |domain: &[&str]| {
        model
            .opset_import
            .iter()
            .find(|o| domain.contains(&o.domain()))
            .map(|o| o.version())
    };
    if let Some(v) = version(&[PREVIEW_TRAINING.0]).filter(|&v| v != PREVIEW_TRAINING.1) {
        return Err(ImportErrorKind::Domain {
            domain: PREVIEW_TRAINING.0.into(),
            version: v,
        });
    }
    let Some(version) = version(&["", "ai.onnx"]) else {
        let nodes = model.graph.iter().flat_map(|g| &g.node);
        if nodes.clone().any(|n| matches!(n.domain(), "" | "ai.onnx")) {
            return Err(ImportErrorKind::NoOpset);
        }
        return Ok(*OPSET_RANGE.end());
    };
    if !OPSET_RANGE.contains(&version) {
        return Err(ImportErrorKind::Opset { version });
    }
    Ok(version)
}

/// Imports the model, freezing inputs from `opts.values` where an op needs their values: each
/// attempt that stops on such an input freezes it and starts again, so at most one attempt
/// per graph input is made.
fn import_model(model: &proto::ModelProto, dir: Option<&Path>, opts: &ImportOptions) -> Result<Graph, ImportErrorKind> {
    let mut opts = opts.clone();
    // A parameter an op needs statically is frozen to its initializer's value.
    for init in model.graph.iter().flat_map(|g| &g.initializer) {
        let name = init.name();
        if opts.parameters.contains(name) && !opts.values.contains_key(name) {
            let value = tensor_from_proto(init, dir).map_err(|reason| ImportErrorKind::Initializer {
                name: name.to_string(),
                reason,
            })?;
            opts.values.insert(name.to_string(), value);
        }
    }
    loop {
        let mut wanted = Vec::new();
        let err = match import_once(model, dir, &opts, &mut wanted) {
            Ok(g) => return Ok(g),
            Err(e) => e,
        };
        let freezable = !wanted.is_empty()
            && wanted
                .iter()
                .all(|n| opts.values.contains_key(n) && !opts.constants.contains_key(n));
        if !freezable {
            return Err(err);
        }
        for name in wanted {
            let value = opts.values[&name].clone();
            opts.constants.insert(name, value);
        }
    }
}

/// One import attempt. When a node stops on an operand that had to be constant, `wanted`
/// receives the graph inputs that operand is computed from.
fn import_once(
    model: &proto::ModelProto,
    dir: Option<&Path>,
    opts: &ImportOptions,
    wanted: &mut Vec<String>,
) -> Result<Graph, ImportErrorKind> {
    let opset = model_opset(model)?;
    let graph = model.graph.as_ref().ok_or(ImportErrorKind::NoGraph)?;
    let dir: Option<PathBuf> = dir.map(Path::to_path_buf);

    // Every name the model uses is reserved up front, so generated names never collide.
    let mut reserved: HashSet<String> = HashSet::new();
    reserved.extend(graph.initializer.iter().map(|t| t.name().to_string()));
    reserved.extend(graph.input.iter().map(|v| v.name().to_string()));
    for n in &graph.node {
        reserved.extend(n.output.iter().cloned());
    }
    let mut b = Builder::new(graph.name(), reserved);
    b.dropout_noise = opts.dropout_noise;

    for init in &graph.initializer {
        let name = init.name().to_string();
        let t = tensor_from_proto(init, dir.as_deref()).map_err(|reason| ImportErrorKind::Initializer {
            name: name.clone(),
            reason,
        })?;
        let id = if opts.parameters.contains(&name) && !opts.constants.contains_key(&name) {
            b.input(&name, t.ty())
        } else {
            b.constant_named(&name, t)
        };
        b.bind(&name, id);
    }
    for input in &graph.input {
        let name = input.name();
        if b.lookup(name).is_some() {
            // IR version 3 lists initializers among the inputs; the initializer wins.
            continue;
        }
        let ty = input_type(input, opts).map_err(|reason| ImportErrorKind::Input {
            name: name.to_string(),
            reason,
        })?;
        let id = match opts.constants.get(name) {
            Some(value) if value.ty() != ty => {
                let reason = format!("declared {ty} but the value given to freeze it is {}", value.ty());
                return Err(ImportErrorKind::Input {
                    name: name.to_string(),
                    reason,
                });
            }
            Some(value) => b.constant_named(name, value.clone()),
            None => b.input(name, ty),
        };
        b.bind(name, id);
    }
    for (index, node) in graph.node.iter().enumerate() {
        ops::import_node(&mut b, node, index, opset).inspect_err(|_| {
            *wanted = std::mem::take(&mut b.wanted);
        })?;
    }
    let mut outputs = Vec::new();
    for out in &graph.output {
        let name = out.name().to_string();
        let node = b.resolve(&name).map_err(|reason| ImportErrorKind::Output {
            name: name.clone(),
            reason,
        })?;
        outputs.push(Output { name, node });
    }
    if let Some(l) = &opts.loss {
        let loss = loss::attach(&mut b, l, &outputs, opset)?;
        outputs.insert(0, loss);
    }
    let mut g = b.finish(outputs);
    g.prune();
    verify(&g)?;
    Ok(g)
}

/// The static type of a graph input; symbolic dimensions come from `opts.dims`.
fn input_type(v: &proto::ValueInfoProto, opts: &ImportOptions) -> Result<TensorType, String> {
    use proto::type_proto::Value;
    let Some(Value::TensorType(t)) = v.r#type.as_ref().and_then(|t| t.value.as_ref()) else {
        return Err("only tensor inputs are supported".into());
    };
    let dtype: DType = dtype_from_onnx(t.elem_type())?;
    let shape = t
        .shape
        .as_ref()
        .ok_or("the input has no shape; swflow needs static shapes")?;
    let mut dims = Vec::new();
    for d in &shape.dim {
        use proto::tensor_shape_proto::dimension::Value as D;
        dims.push(match &d.value {
            Some(D::DimValue(v)) if *v >= 0 => *v as usize,
            Some(D::DimValue(v)) => return Err(format!("negative dimension {v}")),
            Some(D::DimParam(p)) => *opts
                .dims
                .get(p)
                .ok_or_else(|| format!("dimension '{p}' is symbolic; give it a value with --dim {p}=N"))?,
            None => return Err("a dimension has neither a value nor a name; swflow needs static shapes".into()),
        });
    }
    TensorType::new(dtype, dims).map_err(|e| e.0)
}
