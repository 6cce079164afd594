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
mod registration;
pub mod runner;
mod shared;

pub use actor::{DrainReport, StopReason};
pub use backend::{GatewayBackend, RunBackend, RunPrincipal};
pub use binding::{Binding, BindingCell};
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
