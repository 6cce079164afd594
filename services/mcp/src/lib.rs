//! The Model Context Protocol, board-agnostic: JSON-RPC and MCP wire types,
//! revision negotiation for both eras (2025 session-based, 2026-07-28
//! stateless), the one validator every request and result passes, signed
//! self-contained legacy sessions, the relay validator and sealing for
//! server-to-client requests a gateway carries from upstream servers
//! ([`relay`]), and the Streamable HTTP and stdio transports. A product
//! plugs in through [`ToolBackend`].
//!
//! Embedders serving HTTP should enable `TCP_NODELAY`
//! (`HttpServer::tcp_nodelay(true)`): actix-web keeps the OS default
//! (Nagle on). Responses here are written as one buffer, but keep-alive
//! connections still meet delayed ACKs without it.
//!
//! In detail: MCP, board-agnostic (uses `telemetry` only for span fields,
//! counters and the method-label table): wire types, revisions (2025-03-26,
//! 2025-06-18, 2025-11-25, 2026-07-28), the one validator (`validate/`:
//! envelope, headers, `_meta`, params, the JSON Schema subset, results), the
//! relay validator (`relay/`: server-to-client requests an upstream sends
//! through a gateway and the agent's answers, checked for both sides' revisions
//! and the agent's declared capabilities; the sealed 2026-07-28 `requestState`
//! and the signed ids of requests relayed to 2025 agents), signed
//! self-contained legacy sessions, the one registry of JSON-RPC codes (`code`:
//! `ErrorCode` and every code we emit), the one writer of JSON-RPC error
//! responses (`error_response`; `telemetry`'s connection-gate 503, below `mcp`,
//! is checked against it), the one refusal type (`Refusal`: status, code,
//! outcome label, Retry-After; the one wording of a rejected credential), the
//! Streamable HTTP endpoint (`McpEndpoint`, in phases: `precheck`, `read_body`,
//! `exchange` with a resolved principal, `observe`; a 2025 session's
//! `tools/call` whose backend `may_relay` runs in its own task so its response
//! can become an event stream: the backend sends through the call's `Peer`, and
//! the agent's answers come back through `ToolBackend::client_response`), the
//! stdio transport, and the client side (`client/`: the Streamable HTTP client
//! and the stdio bridge relay). **API boundary:** products plug in through
//! `ToolBackend` (and `Authenticate` when they resolve bearer credentials
//! themselves).

#![forbid(unsafe_code)]

mod backend;
pub mod client;
pub mod code;
mod engine;
mod error;
mod http;
pub mod method;
pub mod param_headers;
mod peek;
mod peer;
mod refusal;
pub mod relay;
mod render;
mod revision;
mod session;
mod stdio;
mod validate;
mod wire;

pub use backend::{
    AuthRejection, Authenticate, ClientResponse, Principal, RefusalKind, RefusedCall, RelayAnswer,
    ResultOrigin, ServerIdentity, StructuredContent, TextContent, ToolBackend, ToolCall, ToolDef,
    ToolOutput, ToolSet,
};
pub use code::ErrorCode;
pub use engine::{Context, Engine, Outcome, SessionState, Summary};
pub use error::McpError;
pub use http::{Admitted, Exchange, McpEndpoint, McpSettings, bearer_token};
pub use peek::{RequestHead, peek};
pub use peer::{Peer, PeerError};
pub use refusal::{Refusal, Transport};
pub use revision::Revision;
pub use session::{
    MemorySessionEnds, SessionClaims, SessionCodec, SessionEnds, SessionKey, SessionNonce,
    SessionRejection,
};
pub use stdio::{Line, StdioOptions, read_line, serve_stdio};
pub use validate::{HeaderSlot, RequestHeaders, check_tool_definition};
pub use wire::{RpcError, error_response, meta_key};
