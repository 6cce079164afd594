//! The MongoDB store's integration tests: the store contract and
//! MongoDB-specific behaviour against a real `secantusd-rs`.
//!
//! One test binary per tests folder: each file of this folder is a module
//! here (`tests/codemap.rs` fails when one is not), so the crate and its
//! dependencies are linked into one executable instead of one per file.
//! Tests that rely on process-wide state (a global log subscriber, the
//! process's own resource counts, a re-exec of the binary) still get a
//! process of their own: the suite runs under cargo-nextest, which starts
//! every test in its own process (`.config/nextest.toml`).

mod common;

mod contract;
mod crash;
mod isolation;
mod load;
mod outage;
mod plans;
mod queue;
mod reads;
mod search_backfill;
mod seed;
mod startup;
