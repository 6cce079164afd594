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
//! - [`instructions`]: the CI guard on instructions per request under
//!   callgrind (`corkboard-instructions check`), against
//!   `callgrind-baseline.json`.
//!
//! Only loopback targets are accepted: this suite never loads another
//! machine.
//!
//! In detail: The benchmark suite: an MCP load generator (both eras, HDR
//! histograms), the ceiling server, and the scenarios behind `scripts/bench`.
//! It drives the binary; only the search, cost-curve, tenants and
//! noisy-neighbour scenarios link the stores, to seed 100,000 issues in a
//! minute instead of an hour of MCP calls (1,000,000 through the bench-only `seed_issues` of SQLite, the same
//! rows many per transaction, and of MongoDB, the same documents many per
//! `insert_many`) and to time the store's calls alone; `corkboard-bench plot`
//! draws their PNGs (plotters).

#![forbid(unsafe_code)]

/// An option type's names, one per variant: `as_str`, `Display` and a
/// `FromStr` that lists the names when it refuses one. Defined before the
/// modules so that each of them can use it.
macro_rules! named {
    ($ty:ident { $($variant:ident => $name:literal),+ $(,)? }) => {
        impl $ty {
            pub fn as_str(self) -> &'static str {
                match self { $(Self::$variant => $name),+ }
            }
        }
        impl ::std::fmt::Display for $ty {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
        impl ::std::str::FromStr for $ty {
            type Err = String;
            fn from_str(s: &str) -> ::std::result::Result<Self, String> {
                match s {
                    $($name => Ok(Self::$variant),)+
                    other => Err(format!(
                        "unknown {} {other:?} (one of: {})",
                        stringify!($ty).to_lowercase(),
                        [$($name),+].join(", ")
                    )),
                }
            }
        }
    };
}

pub mod ceiling;
pub mod cli;
pub mod client;
pub mod error;
pub mod instructions;
pub mod load;
pub mod mcp;
pub mod plot;
pub mod procs;
pub mod record;
pub mod report;
pub mod scenario;
pub mod setup;

pub use error::{BenchError, Result};
