//! A model made ready for differentiation: its gradient program.
//!
//! The model is imported with its parameters as graph inputs and a loss attached (see
//! [`onnx::Loss`]), then extended by reverse-mode differentiation
//! ([`autodiff::gradient_program`]): the program's outputs are the loss, then one gradient per
//! tensor differentiated with respect to.

pub mod optim;

use std::collections::{HashMap, HashSet};

use crate::autodiff::tape::{Storable, TapeSummary};
use crate::autodiff::{gradient_program, Differentiated, GradError};
use crate::ir::{DType, Graph, NodeId, Tensor, TensorType};
use crate::onnx::{
    running_statistics, tensor_from_proto, trainable_initializers, ImportError, ImportOptions, Loss, ModelFile,
};

/// Why a model has no gradient program.
#[derive(Debug, thiserror::Error)]
pub enum TrainingError {
    #[error(transparent)]
    Import(#[from] ImportError),
    #[error("{0}")]
    Grad(#[from] GradError),
    #[error("--wrt {name}: {reason}")]
    Wrt { name: String, reason: String },
    #[error("the model has no graph")]
    NoGraph,
    #[error("initializer '{name}': {reason}")]
    Initializer { name: String, reason: String },
}

/// A model's gradient program and the values of its inputs that are not data.
#[derive(Clone, Debug)]
pub struct GradProgram {
    /// Outputs: the loss, then one gradient per name of `wrt`.
    pub graph: Graph,
    /// The tensors differentiated with respect to, in output order.
    pub wrt: Vec<String>,
    /// Values of the graph inputs that are parameters (their initializers), by name.
    pub parameters: HashMap<String, Tensor>,
    /// The graph input holding the labels and its type, if the loss has labels.
    pub labels: Option<(String, TensorType)>,
    /// The number of classes of a cross-entropy loss (axis 1 of the logits).
    pub classes: Option<usize>,
    /// The saved-value plan's sizes: tape against the forward's memory.
    pub tape: TapeSummary,
    /// The values the program recomputes that it could store instead, and those it stores
    /// although they could be recomputed ([`GradProgram::with_stored`]).
    pub storable: Vec<Storable>,
    pub stored: Vec<NodeId>,
    /// The differentiated graph the program is made from.
    pub source: Differentiated,
    /// Running statistics the step updates (batch normalisation in training mode): the input
    /// holding one and the output holding its next value, after the gradients. Their initial
    /// values are among `parameters`.
    pub buffers: Vec<(String, String)>,
    /// Initializers of the default choice that an op needs statically (a shape, a pad value):
    /// constants, without a gradient.
    pub frozen: Vec<String>,
    /// The noise inputs of training-mode dropout, in graph order, when imported with
    /// [`ImportOptions::dropout_noise`]: stream `k` of [`crate::random::dropout_noise`].
    pub noise: Vec<String>,
}

/// Imports `file` as the gradient program of `loss` with respect to the initializers and
/// graph inputs named in `wrt` (empty: every [`trainable_initializers`] name that import
/// leaves an input; an initializer used statically, as a shape, has no gradient). `opts`
/// gives dimensions and known input values as for any import; its parameters and loss are
/// set here.
pub fn gradient_program_of(
    file: &ModelFile,
    opts: &ImportOptions,
    loss: &Loss,
    wrt: &[String],
) -> Result<GradProgram, TrainingError> {
    let (with_statistics, buffers) = running_statistics(&file.proto);
    let renamed;
    let file = match with_statistics {
        Some(proto) => {
            renamed = ModelFile {
                file: file.file.clone(),
                dir: file.dir.clone(),
                proto,
            };
            &renamed
        }
        None => file,
    };
    let proto = file.proto.graph.as_ref().ok_or(TrainingError::NoGraph)?;
    let initializers: HashMap<&str, _> = proto.initializer.iter().map(|t| (t.name(), t)).collect();
    let declared: HashSet<&str> = proto
        .input
        .iter()
        .map(|v| v.name())
        .chain(initializers.keys().copied())
        .collect();
    let default = wrt.is_empty();
    let wanted: Vec<String> = if default {
        trainable_initializers(&file.proto)
    } else {
        wrt.to_vec()
    };
    let parameters: HashSet<String> = wanted
        .iter()
        .chain(buffers.iter().map(|(b, _)| b))
        .filter(|n| initializers.contains_key(n.as_str()))
        .cloned()
        .collect();
    let opts = ImportOptions {
        parameters: parameters.clone(),
        loss: Some(loss.clone()),
        ..opts.clone()
    };
    let g = file.import(&opts)?;
    let input = |name: &str| g.inputs().find(|&id| g.node(id).name == name);
    let fail = |name: &str, reason: String| TrainingError::Wrt {
        name: name.to_string(),
        reason,
    };
    let mut ids: Vec<NodeId> = Vec::new();
    let mut names = Vec::new();
    let mut frozen = Vec::new();
    for name in &wanted {
        let Some(id) = input(name) else {
            if default {
                frozen.push(name.clone());
                continue;
            }
            return Err(fail(
                name,
                if declared.contains(name.as_str()) {
                    "the model uses it statically (as a shape, axes or an attribute), so it has no gradient".into()
                } else {
                    "the model has no initializer or input of that name".into()
                },
            ));
        };
        if !matches!(g.node(id).ty.dtype, DType::F32 | DType::F64) {
            return Err(fail(
                name,
                format!("it is {}, not a floating-point tensor", g.node(id).ty),
            ));
        }
        if ids.contains(&id) {
            return Err(fail(name, "given twice".into()));
        }
        ids.push(id);
        names.push(name.clone());
    }
    let mut values = HashMap::new();
    for name in parameters.iter().filter(|n| input(n).is_some()) {
        let value = tensor_from_proto(initializers[name.as_str()], Some(&file.dir)).map_err(|reason| {
            TrainingError::Initializer {
                name: name.clone(),
                reason,
            }
        })?;
        values.insert(name.clone(), value);
    }
    let added: Vec<&crate::ir::Node> = g
        .inputs()
        .map(|id| g.node(id))
        .filter(|n| !declared.contains(n.name.as_str()))
        .collect();
    let is_noise = |n: &crate::ir::Node| opts.dropout_noise && n.name.starts_with(crate::onnx::DROPOUT_NOISE);
    let noise: Vec<String> = added.iter().filter(|n| is_noise(n)).map(|n| n.name.clone()).collect();
    let labels = added
        .iter()
        .find(|n| !is_noise(n))
        .map(|n| (n.name.clone(), n.ty.clone()));
    let classes = match loss {
        Loss::CrossEntropy => Some(g.node(g.outputs[1].node).ty.shape[1]),
        _ => None,
    };
    // Running statistics the graph still reads as inputs are carried through the step.
    let buffers: Vec<(String, String)> = buffers.into_iter().filter(|(b, _)| input(b).is_some()).collect();
    let carry: Vec<usize> = buffers
        .iter()
        .map(|(_, out)| {
            g.outputs
                .iter()
                .position(|o| o.name == *out)
                .expect("listed as an output")
        })
        .collect();
    let program = gradient_program(&g, &ids, &carry)?;
    Ok(GradProgram {
        graph: program.graph,
        tape: program.tape,
        storable: program.storable,
        stored: program.stored,
        source: program.source,
        wrt: names,
        parameters: values,
        labels,
        classes,
        frozen,
        buffers,
        noise,
    })
}

impl GradProgram {
    /// The program without the running statistics it would carry through a training step:
    /// the loss and the gradients only.
    pub fn without_buffers(mut self) -> GradProgram {
        self.source = self.source.with_outputs(1 + self.wrt.len());
        self.buffers.clear();
        self.with_stored(&self.stored.clone())
    }

    /// The same program with every storable value stored.
    pub fn storing_all(&self) -> GradProgram {
        let all: Vec<NodeId> = self.storable.iter().map(|s| s.id).collect();
        self.with_stored(&all)
    }

    /// The same program with the values of `stored` (ids of [`GradProgram::storable`]) kept
    /// instead of recomputed, and every other storable value recomputed.
    pub fn with_stored(&self, stored: &[NodeId]) -> GradProgram {
        let p = self.source.program(stored);
        GradProgram {
            graph: p.graph,
            tape: p.tape,
            storable: p.storable,
            stored: p.stored,
            source: p.source,
            ..self.clone()
        }
    }
}

/// Checks that every class index of `labels` names one of `classes` classes; the error
/// names the first that does not.
pub fn check_classes(labels: &Tensor, classes: usize) -> Result<(), String> {
    for (k, &c) in labels.to_i64_vec().iter().enumerate() {
        if !(0..classes as i64).contains(&c) {
            return Err(format!(
                "element {k} is class {c}, outside the model's {classes} classes (0 to {})",
                classes as i64 - 1
            ));
        }
    }
    Ok(())
}
