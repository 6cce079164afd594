//! MCP as the load generator speaks it: the two eras' request shapes and a
//! cheap classification of answers.
//!
//! Legacy (2025-11-25): `initialize` once per connection, then
//! `notifications/initialized`, then every `tools/call` carries the
//! `Mcp-Session-Id` and `MCP-Protocol-Version` headers. Stateless
//! (2026-07-28): no handshake; every request carries `_meta` with the
//! protocol version and client capabilities, plus the `MCP-Protocol-Version`,
//! `Mcp-Method` and `Mcp-Name` headers. Bodies are built once per
//! connection and reused (`Bytes` clones share one buffer), so the
//! generator spends its cycles on the wire, not on JSON.

use crate::client::{Connection, Headers, Reply};
use crate::error::{BenchError, Result};
use bytes::Bytes;
use hyper::Method;
use hyper::header::HeaderMap;
use serde_json::{Value, json};
use std::fmt;
use std::str::FromStr;

pub const LEGACY_VERSION: &str = "2025-11-25";
pub const MODERN_VERSION: &str = "2026-07-28";
const ACCEPT: &str = "application/json, text/event-stream";

/// Which protocol era the generator speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Era {
    Legacy,
    Stateless,
}

impl fmt::Display for Era {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Legacy => "legacy",
            Self::Stateless => "stateless",
        })
    }
}

impl FromStr for Era {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "legacy" => Ok(Self::Legacy),
            "stateless" | "modern" => Ok(Self::Stateless),
            other => Err(format!("unknown era {other:?} (legacy or stateless)")),
        }
    }
}

/// The tools the suite drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tool {
    GetIssue,
    /// The default `list_issues` (no filter, the first page of 50).
    ListIssues,
    CreateIssue,
    ClaimIssue,
    /// The benchmark upstream's `add`, through a run's gateway.
    UpstreamAdd,
    /// The same `add`, called on the upstream directly.
    DirectAdd,
    /// `board_stats`: the board's counts (how large the board a point ran
    /// on was).
    BoardStats,
}

impl Tool {
    pub fn name(self) -> &'static str {
        match self {
            Self::GetIssue => "get_issue",
            Self::ListIssues => "list_issues",
            Self::CreateIssue => "create_issue",
            Self::ClaimIssue => "claim_issue",
            Self::UpstreamAdd => "bench__add",
            Self::DirectAdd => "add",
            Self::BoardStats => "board_stats",
        }
    }

    /// The arguments of one call. `issue` is the id `get_issue` reads.
    pub fn arguments(self, issue: Option<&str>) -> Result<Value> {
        match self {
            Self::GetIssue => {
                let id = issue.ok_or_else(|| {
                    BenchError::Usage("get_issue needs an issue id (--issue-id)".into())
                })?;
                Ok(json!({ "id": id }))
            }
            Self::ClaimIssue => {
                let id = issue
                    .ok_or_else(|| BenchError::Usage("claim_issue needs an issue id".into()))?;
                Ok(json!({ "id": id }))
            }
            // The default list: no filter, the first page.
            Self::ListIssues | Self::BoardStats => Ok(json!({})),
            Self::CreateIssue => Ok(json!({
                "title": "bench: load test issue",
                "body": "Created by corkboard-bench to measure create_issue.",
                "labels": ["bench"],
                "priority": "low",
            })),
            Self::UpstreamAdd | Self::DirectAdd => Ok(json!({ "a": 20, "b": 22 })),
        }
    }
}

impl fmt::Display for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Tool {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "get_issue" => Ok(Self::GetIssue),
            "list_issues" => Ok(Self::ListIssues),
            "create_issue" => Ok(Self::CreateIssue),
            "claim_issue" => Ok(Self::ClaimIssue),
            "bench__add" => Ok(Self::UpstreamAdd),
            "add" => Ok(Self::DirectAdd),
            "board_stats" => Ok(Self::BoardStats),
            other => Err(format!(
                "unknown tool {other:?} (get_issue, list_issues, create_issue, claim_issue, \
                 board_stats, bench__add or add)"
            )),
        }
    }
}

/// A prepared `tools/call`: the exact headers and body every request of
/// one connection sends.
#[derive(Debug, Clone)]
pub struct PreparedCall {
    pub headers: HeaderMap,
    pub body: Bytes,
}

fn base_headers(token: &str) -> Result<Headers> {
    Headers::json()?.set("accept", ACCEPT)?.bearer(token)
}

/// The stateless (2026-07-28) `tools/call` for `tool`.
pub fn stateless_call(token: &str, tool: Tool, arguments: &Value) -> Result<PreparedCall> {
    stateless_named_call(token, tool.name(), arguments)
}

/// The stateless `tools/call` of any board tool by name (setup and
/// scenarios that measure answers rather than load).
pub fn stateless_named_call(token: &str, name: &str, arguments: &Value) -> Result<PreparedCall> {
    stateless_call_declaring(token, name, arguments, &json!({}))
}

/// [`stateless_named_call`] from an agent declaring `capabilities` (e.g.
/// `{"sampling": {}}`: an upstream's requests may then be relayed to it).
pub fn stateless_call_declaring(
    token: &str,
    name: &str,
    arguments: &Value,
    capabilities: &Value,
) -> Result<PreparedCall> {
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {
            "name": name, "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
                "io.modelcontextprotocol/clientCapabilities": capabilities,
            }
        }
    });
    let headers = base_headers(token)?
        .set("mcp-protocol-version", MODERN_VERSION)?
        .set("mcp-method", "tools/call")?
        .set("mcp-name", name)?;
    Ok(PreparedCall {
        headers: headers.into_map(),
        body: Bytes::from(serde_json::to_vec(&body)?),
    })
}

/// A stateless request other than `tools/call` (e.g. `tools/list`).
pub fn stateless_request(token: &str, method: &str) -> Result<PreparedCall> {
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": method,
        "params": { "_meta": {
            "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
            "io.modelcontextprotocol/clientCapabilities": {},
        }}
    });
    let headers = base_headers(token)?
        .set("mcp-protocol-version", MODERN_VERSION)?
        .set("mcp-method", method)?;
    Ok(PreparedCall {
        headers: headers.into_map(),
        body: Bytes::from(serde_json::to_vec(&body)?),
    })
}

/// Opens a legacy session on `connection` (initialize, then the
/// initialized notification) and returns the `tools/call` to repeat in it.
pub async fn legacy_session(
    connection: &mut Connection,
    path: &str,
    token: &str,
    tool: Tool,
    arguments: &Value,
) -> Result<PreparedCall> {
    legacy_session_at(connection, path, token, tool, arguments, LEGACY_VERSION).await
}

/// [`legacy_session`] at `revision` (JSON-RPC batches need 2025-03-26).
pub async fn legacy_session_at(
    connection: &mut Connection,
    path: &str,
    token: &str,
    tool: Tool,
    arguments: &Value,
    revision: &str,
) -> Result<PreparedCall> {
    let init = json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {
            "protocolVersion": revision,
            "capabilities": {},
            "clientInfo": { "name": "corkboard-bench", "version": env!("CARGO_PKG_VERSION") },
        }
    });
    let reply = connection
        .send(
            Method::POST,
            path,
            &base_headers(token)?.into_map(),
            Bytes::from(serde_json::to_vec(&init)?),
        )
        .await?;
    if !reply.status.is_success() {
        return Err(BenchError::protocol(
            "initialize",
            format!("HTTP {}: {}", reply.status, reply.text()),
        ));
    }
    let session = reply
        .header("mcp-session-id")
        .ok_or_else(|| {
            BenchError::protocol("initialize", "the answer carries no Mcp-Session-Id header")
        })?
        .to_owned();
    let headers = base_headers(token)?
        .set("mcp-session-id", &session)?
        .set("mcp-protocol-version", revision)?;
    let initialized = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
    let reply = connection
        .send(
            Method::POST,
            path,
            &headers.clone().into_map(),
            Bytes::from(serde_json::to_vec(&initialized)?),
        )
        .await?;
    if reply.status.as_u16() != 202 {
        return Err(BenchError::protocol(
            "notifications/initialized",
            format!("expected 202, got HTTP {}: {}", reply.status, reply.text()),
        ));
    }
    let call = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": { "name": tool.name(), "arguments": arguments }
    });
    Ok(PreparedCall {
        headers: headers.into_map(),
        body: Bytes::from(serde_json::to_vec(&call)?),
    })
}

/// What one answer was, as cheaply as it can be told: a substring scan of
/// the compact JSON the server writes, no parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// HTTP 200 with a result whose `isError` is false.
    Ok,
    /// A non-200 HTTP status.
    Status(u16),
    /// A JSON-RPC error with this code.
    RpcError(i64),
    /// A tool execution error (`isError: true`).
    ToolError,
    /// 200 with a body that is none of the above.
    Unexpected,
}

impl Verdict {
    /// Short stable label for reports (`http_429`, `rpc_-32602`, ...).
    pub fn label(self) -> String {
        match self {
            Self::Ok => "ok".into(),
            Self::Status(code) => format!("http_{code}"),
            Self::RpcError(code) => format!("rpc_{code}"),
            Self::ToolError => "tool_error".into(),
            Self::Unexpected => "unexpected_body".into(),
        }
    }
}

pub fn classify(reply: &Reply) -> Verdict {
    classify_parts(reply.status.as_u16(), &reply.body)
}

pub fn classify_parts(status: u16, body: &[u8]) -> Verdict {
    if let Some(code) = rpc_error_code(body) {
        return if status == 200 {
            Verdict::RpcError(code)
        } else {
            Verdict::Status(status)
        };
    }
    if status != 200 {
        return Verdict::Status(status);
    }
    if contains(body, b"\"isError\":false") {
        Verdict::Ok
    } else if contains(body, b"\"isError\":true") {
        Verdict::ToolError
    } else {
        Verdict::Unexpected
    }
}

/// The code of a top-level JSON-RPC error (`{"jsonrpc":"2.0","id":..,"error":{"code":N`).
fn rpc_error_code(body: &[u8]) -> Option<i64> {
    let at = find(body, b"\"error\":{")?;
    // A result never carries an `error` object before its `result`; the
    // key only appears at the top level of an error response.
    if find(&body[..at], b"\"result\"").is_some() {
        return None;
    }
    let rest = &body[at..];
    let code_at = find(rest, b"\"code\":")? + b"\"code\":".len();
    let digits: String = rest[code_at..]
        .iter()
        .take_while(|b| b.is_ascii_digit() || **b == b'-')
        .map(|b| char::from(*b))
        .collect();
    digits.parse().ok()
}

/// Where `needle` first occurs. Every answer of a load is searched two or
/// three times: searched byte by byte, a `get_issue` answer cost the
/// generator about 1.6 µs more and a 50-issue list page most of its CPU,
/// CPU the server under test then lacked (`services/bench/FINDINGS.md`).
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(haystack, needle)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    find(haystack, needle).is_some()
}

/// The `structuredContent` of a successful `tools/call` answer (setup only).
pub fn structured(reply: &Reply) -> Result<Value> {
    let value = reply.json().map_err(|e| {
        BenchError::protocol(
            "tools/call",
            format!("{e}: HTTP {}: {}", reply.status, reply.text()),
        )
    })?;
    if classify(reply) != Verdict::Ok {
        return Err(BenchError::protocol(
            "tools/call",
            format!("HTTP {}: {}", reply.status, reply.text()),
        ));
    }
    Ok(value["result"]["structuredContent"].clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts() {
        let ok = br#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"{\"isError\":true}"}],"isError":false}}"#;
        assert_eq!(classify_parts(200, ok), Verdict::Ok);
        let tool = br#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":true}}"#;
        assert_eq!(classify_parts(200, tool), Verdict::ToolError);
        let rpc = br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"x"}}"#;
        assert_eq!(classify_parts(200, rpc), Verdict::RpcError(-32602));
        assert_eq!(classify_parts(400, rpc), Verdict::Status(400));
        assert_eq!(classify_parts(403, b""), Verdict::Status(403));
        assert_eq!(classify_parts(200, b"{}"), Verdict::Unexpected);
        assert_eq!(Verdict::RpcError(-32602).label(), "rpc_-32602");
    }

    #[test]
    fn a_result_mentioning_error_is_not_an_error() {
        let body = br#"{"jsonrpc":"2.0","id":1,"result":{"structuredContent":{"error":{"code":1}},"isError":false}}"#;
        assert_eq!(classify_parts(200, body), Verdict::Ok);
    }

    #[test]
    fn stateless_calls_mirror_the_body_in_headers() {
        let call = stateless_call("cbr_x", Tool::CreateIssue, &json!({"title": "t"})).unwrap();
        assert_eq!(call.headers["mcp-method"], "tools/call");
        assert_eq!(call.headers["mcp-name"], "create_issue");
        assert_eq!(call.headers["mcp-protocol-version"], MODERN_VERSION);
        let body: Value = serde_json::from_slice(&call.body).unwrap();
        assert_eq!(
            body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
            MODERN_VERSION
        );
    }
}
