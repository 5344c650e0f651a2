//! The `pfprof` binary: parse the command line, run, map errors to exit codes.

use std::process::ExitCode;

use clap::Parser;

use pfprof::commands::cli::Cli;
use pfprof::error;

/// A broken pipe (`pfprof report | head`) is no error.
fn is_broken_pipe(error: &anyhow::Error) -> bool {
    // serde_json keeps its io error to itself: asked apart.
    error.chain().any(|e| {
        e.downcast_ref::<std::io::Error>().map(std::io::Error::kind)
            == Some(std::io::ErrorKind::BrokenPipe)
            || e.downcast_ref::<serde_json::Error>()
                .and_then(serde_json::Error::io_error_kind)
                == Some(std::io::ErrorKind::BrokenPipe)
    })
}

fn main() -> ExitCode {
    pfprof::sys::map_large_blocks_apart();
    let cli = Cli::parse();
    match pfprof::commands::run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(error) if is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("pfprof: error: {}", error::one_line(&error));
            ExitCode::from(error::exit_code(&error))
        }
    }
}
