//! The MCP requests tests send, built once: JSON-RPC bodies (`initialize`,
//! `tools/call`, `tools/list`, 2026-07-28 `_meta`) and the Streamable HTTP
//! headers a client sets (`Accept`, `MCP-Protocol-Version`, the mirrored
//! `Mcp-Method` and `Mcp-Name`). Every tests folder builds its requests
//! here, so a change of the protocol is one edit, not one per folder.
//!
//! Bodies are `serde_json::Value`s and headers `(name, value)` pairs, so
//! the same builders serve reqwest clients and actix-web test requests.

use serde_json::{Value, json};

/// The stateless revision: every request carries its revision in `_meta`
/// and its method (and tool) in mirrored headers.
pub const MODERN: &str = "2026-07-28";

/// What every Streamable HTTP POST accepts: a JSON answer or an event
/// stream.
pub const ACCEPT: &str = "application/json, text/event-stream";
/// The revision header (every request after `initialize`, and every
/// 2026-07-28 request).
pub const PROTOCOL_VERSION: &str = "MCP-Protocol-Version";
/// The 2026-07-28 header mirroring the body's `method`.
pub const METHOD: &str = "Mcp-Method";
/// The 2026-07-28 header mirroring a `tools/call`'s tool name.
pub const NAME: &str = "Mcp-Name";
/// The header naming a 2025 session.
pub const SESSION_ID: &str = "Mcp-Session-Id";

/// The `_meta` key of a 2026-07-28 request's revision.
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// The `_meta` key of a 2026-07-28 request's client capabilities.
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";

/// A JSON-RPC request.
pub fn request(id: impl Into<Value>, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id.into(), "method": method, "params": params})
}

/// A JSON-RPC request without `params`.
pub fn bare_request(id: impl Into<Value>, method: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id.into(), "method": method})
}

/// A 2025 `initialize` for `version`, with the client's capabilities and
/// `(name, version)` as its `clientInfo`.
pub fn initialize(
    id: impl Into<Value>,
    version: &str,
    capabilities: Value,
    client: (&str, &str),
) -> Value {
    request(
        id,
        "initialize",
        json!({
            "protocolVersion": version,
            "capabilities": capabilities,
            "clientInfo": {"name": client.0, "version": client.1},
        }),
    )
}

/// A `tools/call` of `tool` (2025: no `_meta`).
pub fn tools_call(id: impl Into<Value>, tool: &str, arguments: Value) -> Value {
    request(
        id,
        "tools/call",
        json!({"name": tool, "arguments": arguments}),
    )
}

/// The `_meta` of a 2026-07-28 request: its revision and no client
/// capabilities.
pub fn modern_meta() -> Value {
    json!({META_PROTOCOL_VERSION: MODERN, META_CLIENT_CAPABILITIES: {}})
}

/// A 2026-07-28 `tools/call` of `tool`.
pub fn modern_tools_call(id: impl Into<Value>, tool: &str, arguments: Value) -> Value {
    request(
        id,
        "tools/call",
        json!({"name": tool, "arguments": arguments, "_meta": modern_meta()}),
    )
}

/// A 2026-07-28 `tools/list`.
pub fn modern_tools_list(id: impl Into<Value>) -> Value {
    request(id, "tools/list", json!({"_meta": modern_meta()}))
}

/// The headers of a 2026-07-28 POST of `method` (and, for `tools/call`,
/// `tool`): `Accept`, the revision and the mirrored method and name.
pub fn modern_headers(method: &str, tool: Option<&str>) -> Vec<(&'static str, String)> {
    let mut headers = vec![
        ("Accept", ACCEPT.to_owned()),
        (PROTOCOL_VERSION, MODERN.to_owned()),
        (METHOD, method.to_owned()),
    ];
    if let Some(tool) = tool {
        headers.push((NAME, tool.to_owned()));
    }
    headers
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_the_wire_shapes() {
        assert_eq!(
            initialize(0, "2025-06-18", json!({"sampling": {}}), ("t", "1")),
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {"sampling": {}},
                "clientInfo": {"name": "t", "version": "1"}}})
        );
        assert_eq!(
            modern_tools_call("a", "create_issue", json!({"title": "x"})),
            json!({"jsonrpc": "2.0", "id": "a", "method": "tools/call", "params": {
                "name": "create_issue", "arguments": {"title": "x"},
                "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                          "io.modelcontextprotocol/clientCapabilities": {}}}})
        );
        assert_eq!(
            bare_request(2, "tools/list"),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        );
        let headers = modern_headers("tools/call", Some("get_issue"));
        assert_eq!(
            headers,
            [
                ("Accept", ACCEPT.to_owned()),
                ("MCP-Protocol-Version", "2026-07-28".to_owned()),
                ("Mcp-Method", "tools/call".to_owned()),
                ("Mcp-Name", "get_issue".to_owned()),
            ]
        );
        assert_eq!(modern_headers("tools/list", None).len(), 3);
    }
}
