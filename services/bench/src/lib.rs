//! Corkboard's benchmark suite.
//!
//! - [`load`]: a closed-loop MCP load generator over Streamable HTTP in
//!   both eras (legacy sessions, 2026-07-28 stateless), HDR latencies.
//! - [`ceiling`]: an actix-web server answering a fixed JSON-RPC result
//!   under the same server settings, the yardstick every throughput figure
//!   is divided by (the machine is shared; ratios hold where absolute
//!   numbers drift).
//! - [`scenario`]: one command per scenario, starting the real binaries.
//! - [`plot`]: PNG plots of the cost curves.
//! - [`report`]: renders the collected records as `docs/numbers.md`.
//!
//! Only loopback targets are accepted: this suite never loads another
//! machine.

#![forbid(unsafe_code)]

pub mod ceiling;
pub mod cli;
pub mod client;
pub mod error;
pub mod load;
pub mod mcp;
pub mod plot;
pub mod procs;
pub mod record;
pub mod report;
pub mod scenario;
pub mod setup;

pub use error::{BenchError, Result};
