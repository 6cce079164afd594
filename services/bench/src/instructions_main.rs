//! `corkboard-instructions`: the CI guard on instructions per request
//! (see `corkboard_bench::instructions`).
//!
//! `check` runs this same program's `measure` under callgrind and compares
//! the counts with the baseline (`--update` rewrites it); `measure` is the
//! harness itself, meaningful only under callgrind.

#![forbid(unsafe_code)]

use clap::{Parser, Subcommand};
use corkboard_bench::instructions::{self, CALLS, check::CheckOptions};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(
    name = "corkboard-instructions",
    about = "Instructions per request of the hot paths under callgrind, against the baseline in the repository."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Measure under callgrind and compare with the baseline (fails past
    /// its tolerance), or rewrite it with --update.
    Check {
        #[arg(long, default_value = "services/bench/callgrind-baseline.json")]
        baseline: PathBuf,
        /// Write the measured counts as the baseline (commit it with the
        /// change that costs more, saying why).
        #[arg(long)]
        update: bool,
        #[arg(long, default_value = "valgrind")]
        valgrind: PathBuf,
        #[arg(long, default_value_t = CALLS)]
        calls: u32,
    },
    /// The harness (run by `check` under callgrind).
    #[command(hide = true)]
    Measure {
        #[arg(long, default_value_t = CALLS)]
        calls: u32,
    },
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Check {
            baseline,
            update,
            valgrind,
            calls,
        } => instructions::check::check(&CheckOptions {
            update,
            valgrind,
            calls,
            ..CheckOptions::new(baseline)
        }),
        Command::Measure { calls } => instructions::harness::run(calls),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}
