//! Client transports: this crate speaking MCP to another server, for an
//! agent that cannot reach it itself. Today one: Streamable HTTP
//! ([`StreamableHttpClient`]), with [`relay_stdio`] putting it behind a
//! stdio agent (`corkboard mcp stdio --server`).
//!
//! The HTTP client is `reqwest` (workspace settings: no default features,
//! so HTTP/1.1 without TLS). It adds nothing to the build: `corkboard-
//! telemetry`, which this crate depends on, already builds it for OTLP,
//! and the gateway and CLI use it. actix-web's `awc` would need an actix
//! system on the caller's thread, and raw `hyper` would mean writing the
//! connection pool and timeouts reqwest has. Without TLS an `https://`
//! endpoint cannot be reached; callers refuse it up front.

mod shape;
mod sse;
mod stdio_relay;
mod streamable_http;

pub use sse::data_payloads;
pub use stdio_relay::relay_stdio;
pub use streamable_http::{ClientOptions, Credential, StreamableHttpClient};
