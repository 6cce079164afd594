//! The runner: one actix actor per agent run, and the gateways agents
//! reach their board through.
//!
//! Registering a run ([`Gateway::register`]; over HTTP, `POST /v1/runs`)
//! issues its grant, starts its [`actor`] and its listener, and hands
//! back the endpoint, the token and a ready-to-use MCP client
//! configuration ([`Registration`]). Two listener modes
//! ([`ListenerMode`]): a dedicated port per run on a gateway-reachable
//! address (local containers), or routes `/runs/{run}/mcp` on one shared
//! port (Kubernetes, where any runner pod activates any run from the shared
//! registry). Revoking ([`Gateway::revoke`]) revokes the grant, drains
//! in-flight requests for a bounded time and stops the actor and its
//! listener; expiry does the same by itself.
//!
//! Every request is routed to its run with a correlated answer guaranteed
//! (the bridge: one body read, one credential resolution, the parsed
//! request handed to the MCP engine), pinned to its run and served by the
//! run's [`RunBackend`] ([`backend`]), with one atomically replaceable
//! binding ([`binding`]) and a per-run rate limit (`corkboard_grants::limiter`, shared with the
//! studio endpoint).
//!
//! The modules form a DAG, listed in dependency order: each imports only
//! the modules named after its arrow, all above it (the test
//! `module_graph_is_this_list` reads the sources and holds this list to
//! that).
//!
//! - `error`: `GatewayError` (a leaf).
//! - `registration`: what registering hands back (a leaf).
//! - [`config`]: `GatewayConfig` → registration.
//! - `stop`: `StopReason` (a leaf).
//! - `refusals`: every refusal the gateway words → stop.
//! - [`boardless`]: the store of a run without a board (a leaf).
//! - [`binding`]: `RunBackend` (**API boundary**), `Binding` → boardless.
//! - [`actor`]: the run's actor, its shared state and admission; it
//!   reports to the gateway through the `RunHost` trait → stop.
//! - [`backend`]: `GatewayBackend`, `RunPrincipal` → actor, binding,
//!   refusals.
//! - `bridge`: the request path (`Bridge`: endpoint, binding, limiter) →
//!   actor, backend, binding, refusals.
//! - `dedicated`: the per-run ports' worker pool → actor, bridge, error.
//! - `shared`: `/runs/{run}/mcp`, activating runs through the `Activate`
//!   trait → actor, bridge, error, refusals.
//! - `gateway`: `Gateway`, the table of runs (implements `RunHost` and
//!   `Activate`) → actor, backend, binding, bridge, config, dedicated,
//!   error, registration, shared, stop.
//! - [`api`]: `/v1/runs` → gateway.
//! - [`runner`]: `Runner` → api, binding, config, error, gateway.
//!
//! In detail: The runner: one actix actor per run (`actor`: drain on
//! revoke/expiry/idleness, revalidation; requests admitted on their own thread
//! through the run's shared atomics, not the actor), the request path
//! (`bridge`: the studio endpoint's phases, one credential resolution that must
//! match the run, one body read, `McpEndpoint::exchange` with a
//! `RunPrincipal`), tool calls routed to the binding's `RunBackend` (**API
//! boundary**: the board's tools) or a grant's `UpstreamView` (`backend`), the
//! per-run rate limit, dedicated ports on a small shared worker pool and
//! shared-port `/runs/{run}/mcp` routes with virtual-actor activation, the
//! register API (`/v1/runs`); every refusal a `Refusal` from `refusals`
//! correlated to the request's JSON-RPC id. `Runner::start` takes a typed
//! `GatewayConfig` and its parts. The module graph is a DAG, listed in `lib.rs`
//! and checked by its test.

#![forbid(unsafe_code)]

pub mod actor;
pub mod api;
pub mod backend;
pub mod binding;
pub mod boardless;
mod bridge;
pub mod config;
mod dedicated;
mod error;
mod gateway;
mod refusals;
mod registration;
pub mod runner;
mod shared;
mod stop;

pub use actor::DrainReport;
pub use backend::{GatewayBackend, RunPrincipal};
pub use binding::{Binding, BindingCell, RunBackend};
pub use boardless::{BOARDLESS_MESSAGE, BoardlessStore, MemoryLedger};
pub use config::{GatewayConfig, ListenerMode};
pub use corkboard_grants::RunKey;
pub use corkboard_grants::limiter::{
    LocalRateLimiter, RateLimit, RateLimited, RateLimiter, RedisRateLimiter,
};
pub use error::GatewayError;
pub use gateway::{Gateway, GatewayParts, GatewayStats, RevokeReport, RunInfo};
pub use registration::Registration;
pub use runner::{Runner, RunnerApi, RunnerParts};
pub use stop::StopReason;

#[cfg(test)]
mod tests {
    /// Every module's source, by module name.
    const SOURCES: &[(&str, &str)] = &[
        ("actor", include_str!("actor.rs")),
        ("api", include_str!("api.rs")),
        ("backend", include_str!("backend.rs")),
        ("binding", include_str!("binding.rs")),
        ("boardless", include_str!("boardless.rs")),
        ("bridge", include_str!("bridge.rs")),
        ("config", include_str!("config.rs")),
        ("dedicated", include_str!("dedicated.rs")),
        ("error", include_str!("error.rs")),
        ("gateway", include_str!("gateway.rs")),
        ("refusals", include_str!("refusals.rs")),
        ("registration", include_str!("registration.rs")),
        ("runner", include_str!("runner.rs")),
        ("shared", include_str!("shared.rs")),
        ("stop", include_str!("stop.rs")),
    ];

    /// The modules a source names as `crate::<module>` outside comments.
    fn imports(source: &str) -> std::collections::BTreeSet<String> {
        let mut found = std::collections::BTreeSet::new();
        for line in source.lines() {
            let code = line.split("//").next().unwrap_or_default();
            for (at, _) in code.match_indices("crate::") {
                let name: String = code[at + "crate::".len()..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                found.insert(name);
            }
        }
        found
    }

    /// The module list of the crate docs, in its order: each module and
    /// the modules after its arrow (an entry goes on over indented lines).
    fn documented() -> Vec<(String, Vec<String>)> {
        let joined = include_str!("lib.rs")
            .lines()
            .filter_map(|line| line.strip_prefix("//!"))
            .fold(String::new(), |mut all, line| {
                if !line.starts_with("   ") {
                    all.push('\n');
                }
                all.push(' ');
                all.push_str(line.trim());
                all
            });
        joined
            .lines()
            .filter_map(|line| line.strip_prefix(" - "))
            .filter_map(|entry| {
                let name = entry.split('`').nth(1)?.to_owned();
                let deps = entry
                    .split_once('→')
                    .map(|(_, deps)| {
                        deps.split(',')
                            .map(|dep| dep.trim().trim_end_matches('.').to_owned())
                            .collect()
                    })
                    .unwrap_or_default();
                Some((name, deps))
            })
            .collect()
    }

    #[test]
    fn module_graph_is_this_list() {
        let list = documented();
        let names: Vec<&str> = list.iter().map(|(name, _)| name.as_str()).collect();
        let mut sources: Vec<&str> = SOURCES.iter().map(|(name, _)| *name).collect();
        let mut listed = names.clone();
        sources.sort_unstable();
        listed.sort_unstable();
        assert_eq!(listed, sources, "every module listed once");
        for (at, (name, deps)) in list.iter().enumerate() {
            let source = SOURCES
                .iter()
                .find(|(module, _)| module == name)
                .map(|(_, source)| *source)
                .unwrap_or_default();
            let mut used: Vec<String> = imports(source)
                .into_iter()
                .filter(|used| used != name)
                .collect();
            let mut deps = deps.clone();
            used.sort_unstable();
            deps.sort_unstable();
            assert_eq!(used, deps, "the imports of `{name}`");
            for dep in &deps {
                assert!(
                    names[..at].contains(&dep.as_str()),
                    "`{name}` imports `{dep}`, which is not above it"
                );
            }
        }
    }
}
