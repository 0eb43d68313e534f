//! Optimizers: one training step as a graph, with PyTorch's update rules.
//!
//! [`training_step`] extends a gradient program (outputs: the loss, then one gradient per
//! parameter) with the update of every parameter. Optimizer state (momentum buffers, Adam's
//! moments) enters as graph inputs that start at zero, and leaves as outputs; so do the new
//! parameters. Quantities that change with the step number (Adam's bias corrections) are
//! scalar inputs that the caller computes in double precision for each step
//! ([`Optimizer::schedule`]), as PyTorch computes them in Python floats.

use crate::autodiff::Builder;
use crate::ir::{BinaryOp, DType, Graph, NodeId, Op, Output, Tensor, TensorType, UnaryOp};

/// An optimizer with its hyperparameters; defaults as in PyTorch.
#[derive(Clone, Debug, PartialEq)]
pub enum Optimizer {
    /// `torch.optim.SGD`: with `momentum > 0` a velocity buffer per parameter (the first step's
    /// buffer is the gradient; dampening is 0), Nesterov's variant on request, and L2 weight
    /// decay added to the gradient.
    Sgd {
        lr: f64,
        momentum: f64,
        nesterov: bool,
        weight_decay: f64,
    },
    /// `torch.optim.Adam` (L2 weight decay added to the gradient) or, with `decoupled`,
    /// `torch.optim.AdamW` (the parameter shrinks by `lr * weight_decay` before the update).
    Adam {
        lr: f64,
        beta1: f64,
        beta2: f64,
        eps: f64,
        weight_decay: f64,
        decoupled: bool,
    },
}

/// A scalar input whose value changes with the step number `t` (from 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheduled {
    /// Adam's step size `lr / (1 - beta1^t)`.
    AdamStepSize,
    /// `sqrt(1 - beta2^t)`, which divides the square root of Adam's second moment.
    AdamBias2Sqrt,
}

/// One training step: see [`training_step`].
#[derive(Clone, Debug)]
pub struct TrainingStep {
    /// Outputs: the loss, the new value of each parameter (in `params` order), of each state
    /// tensor (in `state` order), then of each running statistic (in `buffers` order).
    pub graph: Graph,
    /// The graph inputs that are parameters.
    pub params: Vec<String>,
    /// The graph inputs that are optimizer state, zero before the first step.
    pub state: Vec<String>,
    /// The graph inputs that are running statistics (batch normalisation in training mode),
    /// starting at their initializers.
    pub buffers: Vec<String>,
    /// The graph inputs whose values depend on the step number.
    pub scheduled: Vec<(String, Scheduled)>,
    /// The noise inputs of training-mode dropout: stream `k` of
    /// [`crate::random::dropout_noise`], fresh every step.
    pub noise: Vec<String>,
}

/// Settings of an optimizer as a user gives them; those left out take PyTorch's defaults.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Settings {
    pub lr: f64,
    pub momentum: Option<f64>,
    pub nesterov: bool,
    pub weight_decay: Option<f64>,
    pub beta1: Option<f64>,
    pub beta2: Option<f64>,
    pub eps: Option<f64>,
}

impl Optimizer {
    /// The optimizer called `name` (`sgd`, `momentum`, `adam`, `adamw`) with `settings`:
    /// `momentum` is SGD with momentum 0.9 unless given; `adamw` decays weights by 0.01 unless
    /// given. Settings that do not apply to the optimizer are an error.
    pub fn new(name: &str, s: &Settings) -> Result<Optimizer, String> {
        if !(s.lr.is_finite() && s.lr > 0.0) {
            return Err(format!("learning rate {} is not a positive number", s.lr));
        }
        let sgd_only = s.momentum.is_some() || s.nesterov;
        let adam_only = s.beta1.is_some() || s.beta2.is_some() || s.eps.is_some();
        let wd = |default: f64| s.weight_decay.unwrap_or(default);
        let opt = match name {
            "sgd" | "momentum" if adam_only => {
                return Err(format!("beta1, beta2 and eps apply to adam and adamw, not {name}"))
            }
            "adam" | "adamw" if sgd_only => {
                return Err(format!("momentum and nesterov apply to sgd and momentum, not {name}"))
            }
            "sgd" | "momentum" => {
                let momentum = s.momentum.unwrap_or(if name == "momentum" { 0.9 } else { 0.0 });
                if s.nesterov && momentum <= 0.0 {
                    return Err("Nesterov momentum needs a momentum above 0".into());
                }
                Optimizer::Sgd {
                    lr: s.lr,
                    momentum,
                    nesterov: s.nesterov,
                    weight_decay: wd(0.0),
                }
            }
            "adam" | "adamw" => Optimizer::Adam {
                lr: s.lr,
                beta1: s.beta1.unwrap_or(0.9),
                beta2: s.beta2.unwrap_or(0.999),
                eps: s.eps.unwrap_or(1e-8),
                weight_decay: wd(if name == "adamw" { 1e-2 } else { 0.0 }),
                decoupled: name == "adamw",
            },
            other => return Err(format!("unknown optimizer '{other}' (sgd, momentum, adam, adamw)")),
        };
        Ok(opt)
    }

    /// The values of the scheduled inputs `kinds` at step `t` (from 1), computed in double
    /// precision.
    pub fn schedule(&self, kinds: &[Scheduled], t: u64) -> Vec<f64> {
        let t = t as f64;
        kinds
            .iter()
            .map(|k| match (k, self) {
                (Scheduled::AdamStepSize, Optimizer::Adam { lr, beta1, .. }) => lr / (1.0 - beta1.powf(t)),
                (Scheduled::AdamBias2Sqrt, Optimizer::Adam { beta2, .. }) => (1.0 - beta2.powf(t)).sqrt(),
                _ => f64::NAN,
            })
            .collect()
    }
}

/// `x + c * y` for a constant `c`.
fn axpy(b: &mut Builder, x: NodeId, c: f64, y: NodeId) -> Result<NodeId, String> {
    let cy = b.scale(y, c)?;
    b.add(x, cy)
}

/// Extends a gradient program (outputs: loss, the gradient of each parameter, the next value
/// of each running statistic) with one step of `optimizer`.
pub fn training_step(program: &super::GradProgram, optimizer: &Optimizer) -> Result<TrainingStep, String> {
    let (g, params) = (&program.graph, &program.wrt);
    let expected = 1 + params.len() + program.buffers.len();
    if g.outputs.len() != expected {
        return Err(format!(
            "the gradient program of {} parameters and {} running statistics has {} outputs, not {expected}",
            params.len(),
            program.buffers.len(),
            g.outputs.len()
        ));
    }
    let mut e = Builder::named(g.clone(), "opt", "optimizer");
    let input = |g: &Graph, name: &str| g.inputs().find(|&id| g.node(id).name == name);
    let mut state = Vec::new();
    let mut scheduled = Vec::new();
    let mut new_params = Vec::new();
    let mut new_state = Vec::new();
    let mut add_state = |e: &mut Builder, param: &str, kind: &str, ty: &TensorType| -> NodeId {
        let name = format!("opt/{param}/{kind}");
        state.push(name.clone());
        e.input(name, ty.clone())
    };
    let adam_scalars = match optimizer {
        Optimizer::Adam { .. } => {
            let dtype = g.node(g.outputs[0].node).ty.dtype;
            let ty = TensorType::new(dtype, Vec::new()).expect("a scalar type");
            let mut ids = Vec::new();
            for (name, kind) in [
                ("opt/step_size", Scheduled::AdamStepSize),
                ("opt/bias_correction2_sqrt", Scheduled::AdamBias2Sqrt),
            ] {
                if input(e.graph(), name).is_some() {
                    return Err(format!("the model already has an input named '{name}'"));
                }
                ids.push(e.input(name.to_string(), ty.clone()));
                scheduled.push((name.to_string(), kind));
            }
            Some((ids[0], ids[1]))
        }
        Optimizer::Sgd { .. } => None,
    };
    for (k, name) in params.iter().enumerate() {
        let p = input(e.graph(), name).ok_or_else(|| format!("'{name}' is not an input of the gradient program"))?;
        let grad = g.outputs[k + 1].node;
        let ty = e.graph().node(p).ty.clone();
        match *optimizer {
            Optimizer::Sgd {
                lr,
                momentum,
                nesterov,
                weight_decay,
            } => {
                let mut d = grad;
                if weight_decay != 0.0 {
                    d = axpy(&mut e, d, weight_decay, p)?;
                }
                if momentum != 0.0 {
                    let buf = add_state(&mut e, name, "momentum", &ty);
                    let buf_new = axpy(&mut e, d, momentum, buf)?;
                    new_state.push(buf_new);
                    d = if nesterov {
                        axpy(&mut e, d, momentum, buf_new)?
                    } else {
                        buf_new
                    };
                }
                new_params.push(axpy(&mut e, p, -lr, d)?);
            }
            Optimizer::Adam {
                lr,
                beta1,
                beta2,
                eps,
                weight_decay,
                decoupled,
            } => {
                let (step_size, bias2_sqrt) = adam_scalars.expect("made above for Adam");
                let mut p0 = p;
                let mut d = grad;
                if weight_decay != 0.0 {
                    if decoupled {
                        p0 = e.scale(p, 1.0 - lr * weight_decay)?;
                    } else {
                        d = axpy(&mut e, d, weight_decay, p)?;
                    }
                }
                let m = add_state(&mut e, name, "exp_avg", &ty);
                let v = add_state(&mut e, name, "exp_avg_sq", &ty);
                // m' = m + (1 - beta1) (d - m), PyTorch's lerp.
                let dm = e.binary(BinaryOp::Sub, d, m)?;
                let m_new = axpy(&mut e, m, 1.0 - beta1, dm)?;
                // v' = beta2 v + (1 - beta2) d d
                let dd = e.binary(BinaryOp::Mul, d, d)?;
                let bv = e.scale(v, beta2)?;
                let v_new = axpy(&mut e, bv, 1.0 - beta2, dd)?;
                // p' = p - step_size m' / (sqrt(v') / sqrt(1 - beta2^t) + eps)
                let root = e.op(Op::Unary(UnaryOp::Sqrt), &[v_new])?;
                let corrected = e.binary(BinaryOp::Div, root, bias2_sqrt)?;
                let eps = e.scalar(ty.dtype, eps);
                let denom = e.binary(BinaryOp::Add, corrected, eps)?;
                let ratio = e.binary(BinaryOp::Div, m_new, denom)?;
                let step = e.binary(BinaryOp::Mul, step_size, ratio)?;
                new_params.push(e.binary(BinaryOp::Sub, p0, step)?);
                new_state.push(m_new);
                new_state.push(v_new);
            }
        }
    }
    let mut graph = e.finish();
    let loss = g.outputs[0].clone();
    let running = &g.outputs[1 + params.len()..];
    graph.outputs = std::iter::once(loss)
        .chain(params.iter().zip(&new_params).map(|(n, &id)| Output {
            name: n.clone(),
            node: id,
        }))
        .chain(state.iter().zip(&new_state).map(|(n, &id)| Output {
            name: n.clone(),
            node: id,
        }))
        .chain(running.iter().cloned())
        .collect();
    graph.prune();
    Ok(TrainingStep {
        graph,
        params: params.to_vec(),
        state,
        buffers: program.buffers.iter().map(|(b, _)| b.clone()).collect(),
        scheduled,
        noise: program.noise.clone(),
    })
}

/// What a training loop carries from one step to the next.
#[derive(Clone, Debug)]
pub struct Carried {
    /// Parameter values, in [`TrainingStep::params`] order.
    pub params: Vec<Tensor>,
    /// Optimizer state, in [`TrainingStep::state`] order.
    pub state: Vec<Tensor>,
    /// Running statistics, in [`TrainingStep::buffers`] order.
    pub buffers: Vec<Tensor>,
    /// Steps taken so far.
    pub steps: u64,
    /// The seed of the dropout noise (0 unless set).
    pub seed: u64,
}

impl TrainingStep {
    /// The values before the first step: parameters and running statistics from `params` by
    /// name, the optimizer state zero.
    pub fn start(&self, params: &std::collections::HashMap<String, Tensor>) -> Result<Carried, String> {
        let named = |names: &[String]| {
            names
                .iter()
                .map(|n| params.get(n).cloned().ok_or_else(|| format!("no value for '{n}'")))
                .collect::<Result<Vec<_>, _>>()
        };
        let type_of = |name: &str| {
            let id = self
                .graph
                .inputs()
                .find(|&id| self.graph.node(id).name == name)
                .expect("state is an input");
            self.graph.node(id).ty.clone()
        };
        Ok(Carried {
            params: named(&self.params)?,
            state: self.state.iter().map(|n| Tensor::zeros(&type_of(n))).collect(),
            buffers: named(&self.buffers)?,
            steps: 0,
            seed: 0,
        })
    }

    /// The inputs of the next step, in graph order: `data` by name (the batch and its labels),
    /// then what `carried` holds, the scheduled scalars of `optimizer`, and the step's dropout
    /// noise.
    pub fn inputs(
        &self,
        carried: &Carried,
        optimizer: &Optimizer,
        data: &std::collections::HashMap<String, Tensor>,
    ) -> Result<Vec<Tensor>, String> {
        let kinds: Vec<Scheduled> = self.scheduled.iter().map(|(_, k)| *k).collect();
        let values = optimizer.schedule(&kinds, carried.steps + 1);
        self.graph
            .inputs()
            .map(|id| {
                let node = self.graph.node(id);
                let name = node.name.as_str();
                if let Some(k) = self.params.iter().position(|n| n == name) {
                    return Ok(carried.params[k].clone());
                }
                if let Some(k) = self.state.iter().position(|n| n == name) {
                    return Ok(carried.state[k].clone());
                }
                if let Some(k) = self.buffers.iter().position(|n| n == name) {
                    return Ok(carried.buffers[k].clone());
                }
                if let Some(k) = self.noise.iter().position(|n| n == name) {
                    return Ok(crate::random::dropout_noise(
                        carried.seed,
                        carried.steps,
                        k,
                        &node.ty.shape,
                    ));
                }
                if let Some(k) = self.scheduled.iter().position(|(n, _)| n == name) {
                    let data = match node.ty.dtype {
                        DType::F64 => crate::ir::Data::F64(vec![values[k]]),
                        _ => crate::ir::Data::F32(vec![values[k] as f32]),
                    };
                    return Tensor::new(Vec::new(), data).map_err(|e| e.0);
                }
                data.get(name)
                    .cloned()
                    .ok_or_else(|| format!("no value for input '{name}'"))
            })
            .collect()
    }

    /// The `(input, output)` name pairs of the values a step replaces: each parameter, state
    /// tensor and running statistic with its new value.
    pub fn updates(&self) -> Vec<(String, String)> {
        self.params
            .iter()
            .chain(&self.state)
            .chain(&self.buffers)
            .zip(&self.graph.outputs[1..])
            .map(|(name, o)| (name.clone(), o.name.clone()))
            .collect()
    }

    /// Takes the outputs of a step: the new parameters and state replace the carried ones;
    /// returns the step's loss.
    pub fn finish(&self, carried: &mut Carried, mut outputs: Vec<Tensor>) -> Tensor {
        let buffers = outputs.split_off(1 + self.params.len() + self.state.len());
        let state = outputs.split_off(1 + self.params.len());
        let params = outputs.split_off(1);
        carried.params = params;
        carried.state = state;
        carried.buffers = buffers;
        carried.steps += 1;
        outputs.pop().expect("the loss is the first output")
    }
}
