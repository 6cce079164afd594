//! Observability for every Corkboard process: one place that installs the
//! `tracing` subscriber (text or JSON logs, OpenTelemetry export over
//! OTLP/HTTP when an endpoint is configured), the actix-web middleware that
//! gives each HTTP request a span, a request id and metrics, the MCP request
//! span helper, the Prometheus [`Metrics`] registry behind `/metrics`, and
//! the per-listener connection count and cap ([`ConnectionCap`]).
//!
//! What must never leave a process through this crate: tool arguments, run
//! tokens, JWTs. Nothing here reads request bodies or credential headers, and
//! every label or span field that comes from client input is mapped onto a
//! fixed vocabulary (known method and tool names, or `other`).
//!
//! In detail: Logs (text/JSON, buffered and written by their own thread,
//! warnings at once), OpenTelemetry traces over OTLP/HTTP with W3C propagation,
//! the `HttpTelemetry` middleware, the `mcp.request` span fields, Prometheus
//! `Metrics` with bounded labels, and every listener's connection accounting
//! (`conn.rs`: `ConnectionCap` counting open connections, each source's share
//! of them (`conn/source.rs`: IPv6 by /64, trusted proxies' forwarded headers)
//! and the shedding of unauthenticated ones near the cap (`conn/book.rs`), the
//! `ConnectionGate` middleware answering those over 503, `bind` with a backlog
//! matching the cap, the header and keep-alive deadlines' defaults).

#![forbid(unsafe_code)]

mod buffered;
mod config;
pub mod conn;
mod error;
pub mod http;
mod init;
mod logs;
pub mod mcp;
pub mod metrics;
mod otlp;

pub use config::{LOG_FILTER_ENV, LOG_FORMAT_ENV, LogFormat, OTLP_ENDPOINT_ENV, TelemetryConfig};
pub use conn::{ConnSlot, ConnectionCap, ConnectionGate};
pub use error::TelemetryError;
pub use http::{HttpTelemetry, RequestId};
pub use init::{TelemetryBuilder, TelemetryGuard, init, init_with_exporter};
pub use mcp::mcp_span;
pub use metrics::{
    AUDIT_LOSS_REASONS, AUDIT_LOSS_TENANTS_MAX, LISTENERS, Metrics, MetricsConfig, REFUSAL_REASONS,
    metrics_handler,
};
