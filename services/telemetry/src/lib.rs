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
    AUDIT_LOSS_REASONS, AUDIT_LOSS_TENANTS_MAX, LISTENERS, Metrics, MetricsConfig, metrics_handler,
};
