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

#![forbid(unsafe_code)]

mod backend;
pub mod client;
pub mod code;
mod engine;
mod error;
mod http;
pub mod method;
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
    ServerIdentity, ToolBackend, ToolCall, ToolDef, ToolOutput, ToolSet,
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
