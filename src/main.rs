//! The `swflow` command line.

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    restore_sigpipe();
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

/// Lets a closed pipe end the program quietly (`swflow bench model.onnx | head`), as it
/// ends other command-line tools, instead of failing the next write: Rust ignores SIGPIPE by
/// default.
fn restore_sigpipe() {
    #[cfg(unix)]
    // SAFETY: setting a signal's disposition to its default at startup, before any thread
    // exists, has no preconditions.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
