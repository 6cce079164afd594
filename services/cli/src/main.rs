//! `corkboard`: the one binary of every role.
//!
//! Process concerns live here (argument parsing, logging set-up, listeners,
//! signals, exit codes) and so does composition ([`compose`]: which store,
//! registry and secrets the configuration selects); what the HTTP surface
//! means lives in `corkboard-server` and `corkboard-gateway`.
//!
//! In detail: The `corkboard` binary: argument parsing, listeners, signals,
//! exit codes (`exit.rs`); `serve`, `server`, `runner`, `run`, `grant`, `issue`,
//! `admin`, `mcp stdio`, `completions`, `man`. The composition root (`compose.rs`): which store, registry, secrets,
//! session store and rate limiter a configuration selects, handed as parts to
//! `AppState::new` and `Runner::start`. Its test targets are the black-box
//! tests in the top-level `tests/` (`tests/codemap.rs` checks this table
//! against the manifests).

#![forbid(unsafe_code)]

mod admin_cmd;
mod approval_cmd;
mod cli;
mod compose;
mod datadir;
mod exit;
mod grant_cmd;
mod issue_cmd;
mod logging;
mod run_cmd;
mod run_renew;
mod runner_cmd;
mod serve_cmd;
mod signals;
mod stdio_cmd;
mod upstream_cmd;
mod webhook_cmd;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    // Spans and metrics name the board's tools: the vocabulary comes from
    // the tool table, handed to telemetry here, once, before any role runs.
    corkboard_telemetry::mcp::set_known_tools(corkboard_tools::BoardTool::names());
    let cli = cli::Cli::parse();
    match cli::dispatch(cli) {
        Ok(code) => code,
        Err(err) => {
            // `{:#}` prints the whole context chain on one line.
            eprintln!("error: {err:#}");
            exit::classify(&err).exit_code()
        }
    }
}
