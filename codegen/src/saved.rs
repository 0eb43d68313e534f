//! A gradient program's stored values chosen by its modelled time.
//!
//! The saved-value rule (`swflow_frontend::autodiff::tape`) recomputes in the backward pass
//! every cheap elementwise value it reads. Whether storing one instead is faster depends on
//! the kernels each choice gives, so [`choose_stored`] measures: each candidate program is
//! compiled by the pipeline, its kernels by the JIT, and it runs on the timed emulator on the
//! parameters' initial values, class indices within the loss's classes as labels, and other
//! inputs pseudo-random (seed 0, indices within the tables they index; the values matter only
//! where indices decide which elements a gather reads directly, as a cross-entropy's labels
//! do), and [`tape::choose`] decides from those times.
//!
//! A stored value and its recomputation are the same operations on the same operands, but the
//! kernels around them differ, and a reduction split into per-CPE partials in one program and
//! not in the other folds in another order: the gradients of two choices agree within the
//! whole-model tolerance, not always bit for bit.

use swflow_frontend::autodiff::tape::{self, Choice};
use swflow_frontend::ir::{Data, Graph, Tensor};
use swflow_frontend::random;
use swflow_frontend::training::GradProgram;
use swflow_scheduler::pipeline::{compile_with, Options, PipelineError};
use swflow_scheduler::target::Target;

use swflow_scheduler::loops::Program;

use crate::jit::{self, JitError, JitRun};

/// Why a candidate program could not be measured.
#[derive(Debug, thiserror::Error)]
pub enum TimedError {
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    #[error(transparent)]
    Jit(#[from] JitError),
}

/// Values for the inputs of `g`, a graph of gradient program `p`: each parameter's initial
/// value, labels within the loss's classes, and pseudo-random values of seed 0 for the rest.
fn inputs(p: &GradProgram, g: &Graph) -> Vec<Tensor> {
    let extents = random::index_extents(g);
    g.inputs()
        .enumerate()
        .map(|(i, id)| {
            let node = g.node(id);
            if let Some(value) = p.parameters.get(&node.name) {
                return value.clone();
            }
            let random = random::random_input(&node.ty, 0, i, extents[i]);
            match (&p.labels, p.classes) {
                (Some((labels, _)), Some(classes)) if *labels == node.name => {
                    let indices = random.to_i64_vec().iter().map(|c| c % classes as i64).collect();
                    Tensor::new(node.ty.shape.clone(), Data::I64(indices)).expect("the labels' shape")
                }
                _ => random,
            }
        })
        .collect()
}

/// `g`, a graph of gradient program `p`, compiled for `target` with `options`, and one run of
/// it on the timed emulator on the values of [`inputs`].
pub(crate) fn measure(
    p: &GradProgram,
    g: &Graph,
    target: &Target,
    options: &Options,
) -> Result<(Program, JitRun), TimedError> {
    let compiled = compile_with(g, target, options.clone())?;
    let run = jit::compile(&compiled, target)?.run(&compiled, target, &inputs(p, g))?;
    Ok((compiled, run))
}

/// The modelled seconds of one run of `g`, a graph of gradient program `p`, compiled for
/// `target` with `options`, on the values of [`inputs`].
pub fn modelled_seconds(p: &GradProgram, g: &Graph, target: &Target, options: &Options) -> Result<f64, TimedError> {
    Ok(measure(p, g, target, options)?.1.modelled_seconds)
}

/// `p` with the storable values stored that [`tape::choose`] picks by modelled time on
/// `target` (the pipeline run with `options`), and the measurements behind the choice.
pub fn choose_stored(p: &GradProgram, target: &Target, options: &Options) -> Result<(GradProgram, Choice), TimedError> {
    let choice = tape::choose(&p.storable, |stored| {
        modelled_seconds(p, &p.with_stored(stored).graph, target, options)
    })?;
    Ok((p.with_stored(&choice.stored), choice))
}
