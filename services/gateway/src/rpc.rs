//! JSON-RPC at the gateway's edge: what a request asks for (its id, method
//! and tool, read from the body once), refusals correlated with that id, and
//! the outcome of an answered request for the request log.

use corkboard_mcp::RpcError;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::borrow::Cow;

/// Error codes the gateway answers with (JSON-RPC's server-error range).
pub mod code {
    /// The run was revoked, expired or stopped: this gateway no longer
    /// serves it. Not retryable with the same token.
    pub const RUN_ENDED: i64 = -32051;
    /// The run's request budget is spent for now; retry after
    /// `error.data.retry_after_ms`.
    pub const RATE_LIMITED: i64 = -32052;
    // -32053 ("gateway busy", a full actor mailbox) is retired: admission
    // no longer goes through the actor. Not to be reused.
    /// Nothing is served at this path.
    pub const NOT_FOUND: i64 = -32054;
}

/// What the request log and the refusals need to know about a request.
#[derive(Debug, Default)]
pub(crate) struct RequestHead {
    /// The request's id when the body is one request with a valid id.
    pub id: Option<Box<RawValue>>,
    /// A known method name, or `other` (never client text).
    pub method: &'static str,
    /// Only names of board tools (never client text).
    pub tool: Option<&'static str>,
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    method: Option<&'a RawValue>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct ParamsName<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
}

/// Reads the id, method and tool of a single JSON-RPC message. Anything
/// else (a batch, malformed JSON, an id of the wrong type) yields no id:
/// refusals then carry `"id": null`, as JSON-RPC prescribes.
pub(crate) fn peek(body: &[u8]) -> RequestHead {
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    // Checked first: serde would read a struct out of an array, too.
    let envelope = match first {
        Some(b'{') => serde_json::from_slice::<Envelope<'_>>(body).ok(),
        _ => None,
    };
    let Some(envelope) = envelope else {
        return RequestHead {
            method: if first == Some(&b'[') {
                "batch"
            } else {
                "invalid"
            },
            ..RequestHead::default()
        };
    };
    let id = envelope.id.filter(|id| valid_id(id.get())).and_then(|id| {
        // A copy: the body itself moves on to the MCP endpoint.
        RawValue::from_string(id.get().to_owned()).ok()
    });
    let method_name = envelope
        .method
        .and_then(|m| serde_json::from_str::<Cow<'_, str>>(m.get()).ok());
    let method = method_name.as_deref().map_or("none", label);
    let tool = if method == "tools/call" {
        envelope
            .params
            .and_then(|p| serde_json::from_str::<ParamsName<'_>>(p.get()).ok())
            .and_then(|p| p.name)
            .map(|name| corkboard_tools::BoardTool::from_name(&name).map_or("other", |t| t.name()))
    } else {
        None
    };
    RequestHead { id, method, tool }
}

/// JSON-RPC ids are strings or numbers.
fn valid_id(text: &str) -> bool {
    matches!(text.as_bytes().first(), Some(b'"' | b'-' | b'0'..=b'9'))
}

fn label(method: &str) -> &'static str {
    match method {
        "initialize" => "initialize",
        "ping" => "ping",
        "tools/list" => "tools/list",
        "tools/call" => "tools/call",
        "server/discover" => "server/discover",
        "logging/setLevel" => "logging/setLevel",
        "notifications/initialized" => "notifications/initialized",
        "notifications/cancelled" => "notifications/cancelled",
        m if m.starts_with("notifications/") => "notifications/other",
        _ => "other",
    }
}

/// `{"jsonrpc":"2.0","id":<id or null>,"error":{...}}`.
pub(crate) fn error_body(id: Option<&RawValue>, error: &RpcError) -> Vec<u8> {
    #[derive(Serialize)]
    struct Reply<'a> {
        jsonrpc: &'static str,
        id: Option<&'a RawValue>,
        error: &'a RpcError,
    }
    serde_json::to_vec(&Reply {
        jsonrpc: "2.0",
        id,
        error,
    })
    // Serializing a code, a string and a JSON value cannot fail; keep the
    // answer well-formed even if that ever changed.
    .unwrap_or_else(|_| {
        br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"internal error"}}"#
            .to_vec()
    })
}

/// How an answered request ended, for the request log: `ok`,
/// `tool_error`, `error`, `accepted`, `refused`, `unavailable`, `batch`.
pub(crate) fn outcome_of(status: u16, body: &[u8]) -> &'static str {
    match status {
        202 => return "accepted",
        401 | 403 => return "refused",
        503 => return "unavailable",
        _ => {}
    }
    #[derive(Deserialize)]
    struct Reply<'a> {
        #[serde(borrow, default)]
        error: Option<&'a RawValue>,
        #[serde(borrow, default)]
        result: Option<&'a RawValue>,
    }
    #[derive(Deserialize)]
    struct ResultHead {
        #[serde(rename = "isError", default)]
        is_error: bool,
    }
    let json = sse_data(body).unwrap_or(body);
    match serde_json::from_slice::<Reply<'_>>(json) {
        Ok(Reply { error: Some(_), .. }) => "error",
        Ok(Reply {
            result: Some(result),
            ..
        }) => match serde_json::from_str::<ResultHead>(result.get()) {
            Ok(ResultHead { is_error: true }) => "tool_error",
            _ => "ok",
        },
        Ok(_) => "ok",
        Err(_) if json.first() == Some(&b'[') => "batch",
        Err(_) => "error",
    }
}

/// The JSON of a one-event SSE body (`event: message\ndata: {...}\n\n`).
fn sse_data(body: &[u8]) -> Option<&[u8]> {
    const DATA: &[u8] = b"data: ";
    if !body.starts_with(b"event:") && !body.starts_with(DATA) {
        return None;
    }
    let start = body.windows(DATA.len()).position(|w| w == DATA)? + DATA.len();
    let rest = &body[start..];
    let end = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
    Some(&rest[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peeks_id_method_and_board_tool_only() {
        let head = peek(
            br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"create_issue","arguments":{"title":"secret"}}}"#,
        );
        assert_eq!(head.id.as_deref().map(RawValue::get), Some("7"));
        assert_eq!(head.method, "tools/call");
        assert_eq!(head.tool, Some("create_issue"));

        let head = peek(
            br#"{"jsonrpc":"2.0","id":"a\"b","method":"tools/call","params":{"name":"rm -rf"}}"#,
        );
        assert_eq!(head.id.as_deref().map(RawValue::get), Some(r#""a\"b""#));
        assert_eq!(
            head.tool,
            Some("other"),
            "client text never reaches the log"
        );

        let head = peek(br#"{"jsonrpc":"2.0","id":{"x":1},"method":"weird/thing"}"#);
        assert!(head.id.is_none(), "an object is not a JSON-RPC id");
        assert_eq!(head.method, "other");

        assert_eq!(peek(b"[{}]").method, "batch");
        assert_eq!(peek(b"nonsense").method, "invalid");
        assert!(peek(br#"{"id":null,"method":"ping"}"#).id.is_none());
    }

    #[test]
    fn error_bodies_carry_the_id() {
        let id = RawValue::from_string("\"req-1\"".into()).unwrap();
        let body = error_body(Some(&id), &RpcError::new(code::RUN_ENDED, "gone"));
        let value: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(value["id"], "req-1");
        assert_eq!(value["error"]["code"], code::RUN_ENDED);
        let body = error_body(None, &RpcError::new(code::RATE_LIMITED, "slow down"));
        let value: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert!(value["id"].is_null());
    }

    #[test]
    fn outcomes() {
        assert_eq!(
            outcome_of(
                200,
                br#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":true}}"#
            ),
            "tool_error"
        );
        assert_eq!(
            outcome_of(200, br#"{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}"#),
            "ok"
        );
        assert_eq!(outcome_of(200, b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"isError\":false}}\n\n"), "ok");
        assert_eq!(
            outcome_of(
                400,
                br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"x"}}"#
            ),
            "error"
        );
        assert_eq!(outcome_of(202, b""), "accepted");
        assert_eq!(outcome_of(403, b""), "refused");
    }
}
