//! Options shared by verbs that differentiate a model (`--grad`); the gradient program itself
//! is `swflow_frontend::training`.

use std::collections::HashMap;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use swflow_frontend::ir::{Graph, Tensor};
use swflow_frontend::npy;
use swflow_frontend::onnx::{ImportOptions, Loss, ModelFile};
use swflow_frontend::training::optim::{training_step, Optimizer, Settings, TrainingStep};
use swflow_frontend::training::{check_classes, gradient_program_of, GradProgram};

use super::model::ModelArgs;
use super::saved::{decide, Choices, Timing};

#[derive(clap::Args, Debug)]
pub struct GradArgs {
    /// Differentiate the model: compute a loss and its gradient with respect to the
    /// parameters (see --loss, --wrt).
    #[arg(long)]
    pub grad: bool,
    /// The loss on the model's first output: `mse` (mean squared difference from --labels,
    /// same type), `cross-entropy` (softmax cross-entropy of logits [N, C] against int64 class
    /// indices [N] in --labels, mean over N) or `sum` (of all elements).
    #[arg(long, value_parser = ["mse", "cross-entropy", "sum"])]
    pub loss: Option<String>,
    /// The model computes its own loss: this value (summed if not a scalar).
    #[arg(long, value_name = "NAME", conflicts_with = "loss")]
    pub loss_output: Option<String>,
    /// The labels of `--loss mse` or `cross-entropy` (.npy).
    #[arg(long, value_name = "FILE.npy")]
    pub labels: Option<PathBuf>,
    /// A tensor to differentiate with respect to: an initializer or a graph input
    /// (repeatable). Default: every float initializer that feeds arithmetic, except batch
    /// normalization's running mean and variance.
    #[arg(long, value_name = "NAME")]
    pub wrt: Vec<String>,
}

impl GradArgs {
    /// The loss the options ask for.
    pub fn loss(&self) -> Result<Loss> {
        Ok(match (self.loss.as_deref(), &self.loss_output) {
            (_, Some(name)) => Loss::Output(name.clone()),
            (Some("mse"), None) => Loss::Mse,
            (Some("cross-entropy"), None) => Loss::CrossEntropy,
            (Some("sum"), None) => Loss::Sum,
            _ => bail!("a gradient needs a loss: --loss mse|cross-entropy|sum, or --loss-output NAME"),
        })
    }

    /// Imports the model as a gradient program; `given` holds the values of inputs known now
    /// (those an op needs statically are frozen to them). With `timing`, the values it stores
    /// rather than recomputes (`--recompute`) and how its tape-only values travel (`--tape-travel`)
    /// are chosen there; otherwise by the rules.
    pub fn prepare(
        &self,
        model: &ModelArgs,
        given: HashMap<String, Tensor>,
        timing: Option<Timing>,
    ) -> Result<(ModelFile, GradProgram, Choices)> {
        self.prepare_for(model, given, false, timing)
    }

    /// [`GradArgs::prepare`]; for a training step (`train`) the program also carries the
    /// running statistics of batch normalisation in training mode, and training-mode dropout
    /// draws fresh noise every step (a gradient alone uses the ONNX reference's fixed mask).
    pub fn prepare_for(
        &self,
        model: &ModelArgs,
        given: HashMap<String, Tensor>,
        train: bool,
        timing: Option<Timing>,
    ) -> Result<(ModelFile, GradProgram, Choices)> {
        let file = ModelFile::read(&model.model)?;
        let opts = ImportOptions {
            values: given,
            dropout_noise: train,
            ..model.options()?
        };
        let p = gradient_program_of(&file, &opts, &self.loss()?, &self.wrt)?;
        let p = if train { p } else { p.without_buffers() };
        for name in &p.frozen {
            tracing::info!("initializer '{name}' is used statically: no gradient");
        }
        let (p, choices) = match timing {
            Some(at) => decide(p, at)?,
            None => (p, Choices::default()),
        };
        Ok((file, p, choices))
    }

    /// The graph a verb that compiles without values works on: the model as imported, or
    /// with `--grad` its gradient program (forward, backward, loss and gradients as outputs),
    /// with the timed choices (stored values, values kept whole) made at `timing`.
    pub fn graph(&self, model: &ModelArgs, timing: Timing) -> Result<(Graph, Choices)> {
        if !self.grad {
            self.unused()?;
            return Ok((model.load()?.1, Choices::default()));
        }
        let (_, p, choices) = self.prepare(model, HashMap::new(), Some(timing))?;
        Ok((p.graph, choices))
    }

    /// Refuses the loss options where neither --grad nor --train uses them.
    pub fn unused(&self) -> Result<()> {
        if self.loss.is_some() || self.loss_output.is_some() || self.labels.is_some() || !self.wrt.is_empty() {
            bail!("--loss, --loss-output, --labels and --wrt apply with --grad or --train");
        }
        Ok(())
    }

    /// Reads `--labels` for the program's labels input and checks it: the type the loss needs
    /// and, for cross-entropy, class indices within the logits' classes.
    pub fn read_labels(&self, p: &GradProgram) -> Result<Option<(String, Tensor)>> {
        let Some((name, want)) = &p.labels else {
            if let Some(path) = &self.labels {
                bail!("--labels {}: the loss takes no labels", path.display());
            }
            return Ok(None);
        };
        let path = self.labels.as_deref().with_context(|| {
            format!(
                "--loss {} needs --labels FILE.npy",
                self.loss.as_deref().unwrap_or_default()
            )
        })?;
        let t = npy::read(path)?;
        if t.ty() != *want {
            bail!(
                "--labels {}: the loss needs {want}, but the file holds {}",
                path.display(),
                t.ty()
            );
        }
        if let Some(classes) = p.classes {
            check_classes(&t, classes).map_err(|e| anyhow::anyhow!("--labels {}: {e}", path.display()))?;
        }
        Ok(Some((name.clone(), t)))
    }
}

#[derive(clap::Args, Debug)]
pub struct TrainArgs {
    /// Build a training step: forward, backward and the optimizer's update of every parameter
    /// (needs a loss, --optimizer and --lr).
    #[arg(long)]
    pub train: bool,
    /// The optimizer, with PyTorch's update rules and defaults: `sgd`, `momentum` (SGD with
    /// momentum 0.9), `adam`, `adamw` (weight decay 0.01).
    #[arg(long, value_parser = ["sgd", "momentum", "adam", "adamw"])]
    pub optimizer: Option<String>,
    /// The learning rate.
    #[arg(long)]
    pub lr: Option<f64>,
    /// SGD's momentum.
    #[arg(long)]
    pub momentum: Option<f64>,
    /// Nesterov momentum (SGD).
    #[arg(long)]
    pub nesterov: bool,
    /// Weight decay: added to the gradient (sgd, momentum, adam), or decoupled (adamw).
    #[arg(long)]
    pub weight_decay: Option<f64>,
    /// Adam's first-moment decay (default 0.9).
    #[arg(long)]
    pub beta1: Option<f64>,
    /// Adam's second-moment decay (default 0.999).
    #[arg(long)]
    pub beta2: Option<f64>,
    /// Adam's epsilon (default 1e-8).
    #[arg(long)]
    pub eps: Option<f64>,
}

impl TrainArgs {
    /// The optimizer the options ask for.
    pub fn optimizer(&self) -> Result<Optimizer> {
        let name = self
            .optimizer
            .as_deref()
            .context("--train needs --optimizer sgd|momentum|adam|adamw")?;
        let lr = self.lr.context("--train needs a learning rate: --lr F")?;
        let settings = Settings {
            lr,
            momentum: self.momentum,
            nesterov: self.nesterov,
            weight_decay: self.weight_decay,
            beta1: self.beta1,
            beta2: self.beta2,
            eps: self.eps,
        };
        Optimizer::new(name, &settings).map_err(|e| anyhow::anyhow!("--optimizer {name}: {e}"))
    }

    /// Refuses the optimizer options without --train.
    pub fn unused(&self) -> Result<()> {
        let sgd = self.optimizer.is_some() || self.lr.is_some() || self.momentum.is_some() || self.nesterov;
        let adam = self.weight_decay.is_some() || self.beta1.is_some() || self.beta2.is_some() || self.eps.is_some();
        if sgd || adam {
            bail!("--optimizer, --lr and the optimizer's settings apply with --train");
        }
        Ok(())
    }

    /// The model's training step, with its gradient program (its stored values chosen at
    /// `timing`, as its tape-only values kept whole), the measurements behind those choices,
    /// and its optimizer.
    pub fn step(&self, model: &ModelArgs, grad: &GradArgs, timing: Timing) -> Result<Step> {
        let optimizer = self.optimizer()?;
        let (_, program, choices) = grad.prepare_for(model, HashMap::new(), true, Some(timing))?;
        let step = training_step(&program, &optimizer).map_err(|e| anyhow::anyhow!(e))?;
        Ok(Step {
            step,
            program,
            optimizer,
            choices,
        })
    }
}

/// A model's training step, as [`TrainArgs::step`] makes it.
pub struct Step {
    pub step: TrainingStep,
    pub program: GradProgram,
    pub optimizer: Optimizer,
    pub choices: Choices,
}

/// The graph a verb that compiles without values works on: the model, its gradient program
/// (`--grad`) or its training step (`--train`), with the gradient program's timed choices
/// (made at `timing`) and their measurements.
pub fn graph(model: &ModelArgs, grad: &GradArgs, train: &TrainArgs, timing: Timing) -> Result<(Graph, Choices)> {
    if train.train {
        let step = train.step(model, grad, timing)?;
        return Ok((step.step.graph, step.choices));
    }
    train.unused()?;
    grad.graph(model, timing)
}
