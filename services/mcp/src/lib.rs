//! The Model Context Protocol, board-agnostic: JSON-RPC and MCP wire types,
//! revision negotiation for both eras (2025 session-based, 2026-07-28
//! stateless), the one validator every request and result passes, signed
//! self-contained legacy sessions, and the Streamable HTTP and stdio
//! transports. A product plugs in through [`ToolBackend`].

#![forbid(unsafe_code)]

mod backend;

pub use backend::{
    AuthRejection, Principal, ServerIdentity, ToolBackend, ToolCall, ToolDef, ToolOutput, ToolSet,
};
