//! A gradient program's stored values chosen by its modelled time.
//!
//! The saved-value rule (`swflow_frontend::autodiff::tape`) recomputes in the backward pass
//! every cheap elementwise value it reads. Whether storing one instead is faster depends on
//! the kernels each choice gives, so [`choose_stored`] measures: each candidate program is
//! compiled by the pipeline, its kernels by the JIT, and it runs on the timed emulator on
//! pseudo-random inputs (seed 0; the modelled time does not depend on the values), and
//! [`tape::choose`] decides from those times. A stored value and its recomputation are the
//! same operations on the same operands, but the kernels around them differ, and a reduction
//! split into per-CPE partials in one program and not in the other folds in another order: the
//! gradients of two choices agree within the whole-model tolerance, not always bit for bit.

use swflow_frontend::autodiff::tape::{self, Choice};
use swflow_frontend::ir::Graph;
use swflow_frontend::random::random_tensor;
use swflow_frontend::training::GradProgram;
use swflow_scheduler::pipeline::{compile_with, Options, PipelineError};
use swflow_scheduler::target::Target;

use crate::jit::{self, JitError};

/// Why a candidate program could not be measured.
#[derive(Debug, thiserror::Error)]
pub enum TimedError {
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    #[error(transparent)]
    Jit(#[from] JitError),
}

/// The modelled seconds of one run of gradient program `g`, compiled for `target` with
/// `options`, on the pseudo-random inputs of seed 0.
pub fn modelled_seconds(g: &Graph, target: &Target, options: &Options) -> Result<f64, TimedError> {
    let p = compile_with(g, target, options.clone())?;
    let inputs: Vec<_> = g
        .inputs()
        .enumerate()
        .map(|(i, id)| random_tensor(&g.node(id).ty, 0, i))
        .collect();
    let program = jit::compile(&p, target)?;
    Ok(program.run(&p, target, &inputs)?.modelled_seconds)
}

/// `p` with the storable values stored that [`tape::choose`] picks by modelled time on
/// `target` (the pipeline run with `options`), and the measurements behind the choice.
pub fn choose_stored(p: &GradProgram, target: &Target, options: &Options) -> Result<(GradProgram, Choice), TimedError> {
    let choice = tape::choose(&p.storable, |stored| {
        modelled_seconds(&p.with_stored(stored).graph, target, options)
    })?;
    Ok((p.with_stored(&choice.stored), choice))
}
