//! The one validator: every incoming message and every outgoing result
//! passes through here, and each check knows the negotiated revision.
//!
//! Requests are refused with a typed JSON-RPC error before anything runs;
//! results that would leave malformed are reported to the engine, which
//! turns them into `-32603` instead of sending them. Nothing is filled in:
//! a missing field is an error naming the field, never a default.
//!
//! One job per file, in the order a message meets them: [`envelope`]
//! (JSON-RPC parsing and the envelope), [`headers`] (the HTTP headers MCP
//! reads), [`meta`] (the 2026-07-28 `_meta` envelope), [`params`] (methods
//! and their params), [`schema`] (JSON Schema for tool arguments and
//! results) and [`result`] (what leaves). The rest of the
//! crate calls them through the re-exports below, as `validate::…`.

mod envelope;
mod headers;
mod meta;
mod params;
mod result;
mod schema;

use serde_json::value::RawValue;

pub(crate) use envelope::{Incoming, Message, envelope, parse, parse_element};
pub(crate) use headers::legacy_protocol_header;
pub use headers::{HeaderSlot, RequestHeaders};
pub(crate) use meta::{modern_envelope, modern_meta};
pub(crate) use params::{Call, decode_arguments, params_head, request};
pub use result::check_tool_definition;
pub(crate) use result::{identity, tool_definitions, tool_name, tool_output};
pub(crate) use schema::{Compiled, Violation, compile, schema};

/// A JSON string member's value; `None` for any other JSON.
fn as_str(raw: &RawValue) -> Option<String> {
    if !raw.get().starts_with('"') {
        return None;
    }
    serde_json::from_str::<String>(raw.get()).ok()
}
