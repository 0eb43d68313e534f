//! `swflow compare`: check a result against a reference with the project tolerance.

use std::path::PathBuf;

use anyhow::{bail, Result};
use swflow_frontend::npy;
use swflow_frontend::tolerance::{compare, Comparison, ATOL, MODEL_ATOL_SCALE, RTOL};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The result to check (.npy).
    pub actual: PathBuf,
    /// The reference (.npy).
    pub expected: PathBuf,
    /// Require bit-identical elements instead of the f32 tolerance.
    #[arg(long, conflicts_with = "model")]
    pub exact: bool,
    /// Use the whole-model tolerance (absolute part scaled by the reference's largest
    /// magnitude), for outputs of deep models against another runtime.
    #[arg(long)]
    pub model: bool,
}

pub fn run(args: Args) -> Result<()> {
    let (a, e) = (npy::read(&args.actual)?, npy::read(&args.expected)?);
    let how = match (args.exact, args.model) {
        (true, _) => Comparison::Exact,
        (_, true) => Comparison::Model,
        _ => Comparison::Tolerance,
    };
    if let Err(m) = compare(&a, &e, how) {
        bail!(
            "{} does not match {}: {}",
            args.actual.display(),
            args.expected.display(),
            m.message
        );
    }
    let max_abs = a
        .to_f64_vec()
        .iter()
        .zip(e.to_f64_vec())
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max);
    match how {
        Comparison::Exact => println!("match: {} elements bit-identical", a.numel()),
        Comparison::Tolerance => println!(
            "match: {} elements, max |difference| {max_abs:.3e} (rtol {RTOL}, atol {ATOL})",
            a.numel()
        ),
        Comparison::Model => println!(
            "match: {} elements, max |difference| {max_abs:.3e} (rtol {RTOL}, atol {MODEL_ATOL_SCALE} of the largest magnitude)",
            a.numel()
        ),
    }
    Ok(())
}
