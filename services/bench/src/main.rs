//! `corkboard-bench`: see the library docs and `scripts/bench`.

#![forbid(unsafe_code)]

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = corkboard_bench::cli::Cli::parse();
    match corkboard_bench::cli::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::from(2)
        }
    }
}
