//! The black-box tests: they spawn the real `corkboard` binary and drive it
//! with real clients. One test target of the cli crate
//! (`corkboard-cli::blackbox`), because cargo finds test targets only in a
//! package's own tests/ directory.
//!
//! One test binary per tests folder: each file of this folder is a module
//! here (`tests/codemap.rs` fails when one is not), so the crate and its
//! dependencies are linked into one executable instead of one per file.
//! Tests that rely on process-wide state (a global log subscriber, the
//! process's own resource counts, a re-exec of the binary) still get a
//! process of their own: the suite runs under cargo-nextest, which starts
//! every test in its own process (`.config/nextest.toml`).

mod support;

mod admin_api;
mod approvals;
mod budgets;
mod clean_text;
mod cli_errors;
mod cluster;
mod codemap;
mod conformance_matrix;
mod conformance_suite;
mod conn_limits;
mod deploy;
mod docs;
mod egress;
mod examples;
mod gateway;
mod kube;
mod mcp_interop;
mod mongo_store;
mod operator_cli;
mod pins;
mod provenance;
mod relay;
mod relay_shares;
mod run;
mod search_isolation;
mod serve;
mod stdio;
mod telemetry;
mod upstream;
mod upstream_limits;
mod web;
mod webhooks;
mod write_only;
