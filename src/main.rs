//! The `swflow` command line.

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = match cli::Cli::try_parse() {
        Ok(args) => args,
        Err(e) => {
            let usage_error = e.use_stderr();
            let _ = e.print();
            return if usage_error {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    cli::init_logging(args.verbose);
    match cli::run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}
