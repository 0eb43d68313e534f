//! Verbs of the `swflow` command line.

mod bench;
mod compare;
mod compile;
mod grad;
mod inspect;
mod model;
mod roofline;
mod run;
mod saved;
mod schedule;

use clap::{Parser, Subcommand};

/// swflow: an ahead-of-time deep-learning compiler for Sunway-style many-core processors.
#[derive(Parser, Debug)]
#[command(name = "swflow", version, about, propagate_version = true)]
pub struct Cli {
    /// Log progress and timings to stderr (-v info, -vv debug, -vvv every schedule tuning measures).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Show a model's inputs, outputs, op histogram, parameter count and FLOP estimate.
    Inspect(inspect::Args),
    /// Run a model with the reference graph interpreter, reading and writing .npy files.
    Run(run::Args),
    /// Lower a model to loop nests, schedule them for a target and report LDM and DMA use.
    Schedule(schedule::Args),
    /// Compile a model to a folder of host and CPE C sources with a Makefile.
    Compile(compile::Args),
    /// Check a .npy result against a reference .npy with the project's f32 tolerance.
    Compare(compare::Args),
    /// Compile, build and run a model on the timed emulator; report modelled time per kernel.
    Bench(bench::Args),
}

pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Inspect(a) => inspect::run(a),
        Command::Run(a) => run::run(a),
        Command::Compare(a) => compare::run(a),
        Command::Schedule(a) => schedule::run(a),
        Command::Compile(a) => compile::run(a),
        Command::Bench(a) => bench::run(a),
    }
}

/// Routes `tracing` events to stderr at a level chosen by the number of `-v` flags.
pub fn init_logging(verbose: u8) {
    let level = match verbose {
        0 => tracing::Level::WARN,
        1 => tracing::Level::INFO,
        2 => tracing::Level::DEBUG,
        _ => tracing::Level::TRACE,
    };
    tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        .with_target(false)
        .init();
}
