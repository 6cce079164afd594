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
use crate::record::Record;
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

/// The titles a `create_issue` load files its issues under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Titles {
    /// One title throughout (the suite's main load, so its figures compare
    /// across runs): every open issue shares every word of the next
    /// create's title, so the similar look-up finds its twenty among the
    /// first twenty it reads, its cheapest case.
    #[default]
    One,
    /// [`DISTINCT_TITLES`] titles in turn (more than a 5 s run at full
    /// speed files), four words each from a vocabulary of 120, as a board
    /// of different issues has: each word is in about one title in thirty.
    Distinct,
}

named!(Titles { One => "one", Distinct => "distinct" });

impl Titles {
    /// What a load of `tool` files under: the titles option is for
    /// creates; other tools send their one request.
    pub fn for_tool(self, tool: Tool) -> Self {
        if tool == Tool::CreateIssue {
            self
        } else {
            Self::One
        }
    }

    /// `record`, saying its titles when they are not the suite's one
    /// title (the report shows such a point apart: another board's
    /// figures).
    pub fn label(self, record: Record) -> Record {
        match self {
            Self::One => record,
            titles => record.label("titles", titles),
        }
    }
}

/// How many different titles [`Titles::Distinct`] cycles through.
pub const DISTINCT_TITLES: usize = 65_536;

/// The words of [`Titles::Distinct`]'s titles.
#[rustfmt::skip]
const TITLE_WORDS: [&str; 120] = [
    "login", "export", "search", "upload", "checkout", "invoice", "profile", "sync", "report",
    "billing", "webhook", "cache", "session", "token", "queue", "worker", "index", "schema",
    "migration", "backup", "restore", "metrics", "alert", "dashboard", "chart", "filter", "sort",
    "page", "modal", "button", "form", "input", "validation", "email", "notification", "push",
    "mobile", "desktop", "browser", "cookie", "header", "footer", "sidebar", "menu", "theme",
    "font", "icon", "image", "video", "audio", "stream", "buffer", "timeout", "retry", "proxy",
    "gateway", "router", "balancer", "cluster", "node", "pod", "container", "volume", "disk",
    "memory", "cpu", "thread", "lock", "mutex", "deadlock", "race", "leak", "crash", "panic",
    "error", "warning", "log", "trace", "span", "tenant", "user", "admin", "role", "permission",
    "grant", "audit", "policy", "budget", "limit", "quota", "rate", "burst", "window", "cursor",
    "offset", "batch", "bulk", "import", "csv", "json", "yaml", "config", "secret", "key",
    "certificate", "tls", "dns", "socket", "port", "listener", "handler", "middleware", "plugin",
    "extension", "script", "build", "release", "deploy", "cron", "scheduler",
];

/// The `i`th title of [`Titles::Distinct`]: four different words drawn
/// from a hash of `i` (SplitMix64's mixing), so titles rarely repeat and
/// consecutive ones share no more words than any two.
pub fn distinct_title(i: usize) -> String {
    let n = TITLE_WORDS.len() as u64;
    let mut bits = mix(i as u64);
    let mut words: Vec<&str> = Vec::with_capacity(4);
    while words.len() < 4 {
        if bits < n {
            bits = mix(bits ^ i as u64);
        }
        let word = TITLE_WORDS[(bits % n) as usize];
        bits /= n;
        if !words.contains(&word) {
            words.push(word);
        }
    }
    words.join(" ")
}

/// SplitMix64's finaliser: `x` mixed so every bit of it moves about half
/// of the result's.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
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
    /// No tool: the cheapest request the endpoint answers itself,
    /// `server/discover` (2026-07-28 has no `ping`) or, in a 2025 session,
    /// `ping`. Its load is the floor under every call through that
    /// endpoint (HTTP, the caller's authentication and rate limit, the
    /// envelope's checks, the request log), so a tool's cost per request
    /// less this one's is what the tool itself costs.
    NoTool,
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
            Self::NoTool => "no_tool",
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
            Self::ListIssues | Self::BoardStats | Self::NoTool => Ok(json!({})),
            Self::CreateIssue => Ok(create_arguments("bench: load test issue")),
            Self::UpstreamAdd | Self::DirectAdd => Ok(json!({ "a": 20, "b": 22 })),
        }
    }
}

/// `create_issue`'s arguments for an issue titled `title`.
pub fn create_arguments(title: &str) -> Value {
    json!({
        "title": title,
        "body": "Created by corkboard-bench to measure create_issue.",
        "labels": ["bench"],
        "priority": "low",
    })
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
            "no_tool" => Ok(Self::NoTool),
            other => Err(format!(
                "unknown tool {other:?} (get_issue, list_issues, create_issue, claim_issue, \
                 board_stats, bench__add, add or no_tool)"
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

/// The stateless (2026-07-28) `tools/call` for `tool` (for
/// [`Tool::NoTool`], `server/discover`).
pub fn stateless_call(token: &str, tool: Tool, arguments: &Value) -> Result<PreparedCall> {
    if tool == Tool::NoTool {
        return stateless_request(token, "server/discover");
    }
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
    let headers = base_headers(token)?
        .set("mcp-protocol-version", MODERN_VERSION)?
        .set("mcp-method", "tools/call")?
        .set("mcp-name", name)?;
    Ok(PreparedCall {
        headers: headers.into_map(),
        body: call_body(name, arguments, capabilities)?,
    })
}

/// The body of a stateless `tools/call` of `name` (its headers name the
/// tool, not the arguments, so calls of one tool share them).
pub fn call_body(name: &str, arguments: &Value, capabilities: &Value) -> Result<Bytes> {
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
    Ok(Bytes::from(serde_json::to_vec(&body)?))
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
/// initialized notification) and returns the `tools/call` (for
/// [`Tool::NoTool`], the `ping`) to repeat in it.
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
    let call = if tool == Tool::NoTool {
        json!({ "jsonrpc": "2.0", "id": 1, "method": "ping" })
    } else {
        json!({
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": { "name": tool.name(), "arguments": arguments }
        })
    };
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

/// [`classify`] for a request of `tool`: a tool's answer says `isError`,
/// the others' ([`Tool::NoTool`]) are results without it.
pub fn classify_for(tool: Tool, reply: &Reply) -> Verdict {
    match classify(reply) {
        Verdict::Unexpected if tool == Tool::NoTool && contains(&reply.body, b"\"result\":") => {
            Verdict::Ok
        }
        verdict => verdict,
    }
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
    use std::collections::{BTreeMap, BTreeSet};

    #[test]
    fn distinct_titles_are_four_different_words_mostly_of_different_issues() {
        let titles: Vec<String> = (0..DISTINCT_TITLES).map(distinct_title).collect();
        let mut per_word: BTreeMap<&str, usize> = BTreeMap::new();
        for title in &titles {
            let words: BTreeSet<&str> = title.split(' ').collect();
            assert_eq!(words.len(), 4, "{title}");
            for word in words {
                *per_word.entry(word).or_default() += 1;
            }
        }
        let unique: BTreeSet<&String> = titles.iter().collect();
        assert!(
            unique.len() > DISTINCT_TITLES * 99 / 100,
            "{}",
            unique.len()
        );
        // No word in more than one title in twenty: far from the one-title
        // load, where every word is in every title.
        let most = per_word.values().max().copied().unwrap_or(0);
        assert!(most < DISTINCT_TITLES / 20, "{most}");
        assert_eq!(Titles::from_str("distinct"), Ok(Titles::Distinct));
        assert_eq!(Titles::default().to_string(), "one");
    }

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

    #[test]
    fn a_no_tool_load_sends_server_discover_not_a_tool_call() {
        let tool: Tool = "no_tool".parse().unwrap();
        assert_eq!(tool, Tool::NoTool);
        let call = stateless_call("cbr_x", tool, &tool.arguments(None).unwrap()).unwrap();
        assert_eq!(call.headers["mcp-method"], "server/discover");
        assert!(!call.headers.contains_key("mcp-name"));
        let body: Value = serde_json::from_slice(&call.body).unwrap();
        assert_eq!(body["method"], "server/discover");
        assert!(body["params"].get("name").is_none());
        // A result is a no-tool request's success; an error is not.
        let reply = |status: u16, body: &str| Reply {
            status: hyper::StatusCode::from_u16(status).unwrap(),
            headers: Default::default(),
            body: Bytes::from(body.to_owned()),
        };
        let discovered = reply(
            200,
            r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete"}}"#,
        );
        assert_eq!(classify_for(tool, &discovered), Verdict::Ok);
        assert_eq!(
            classify_for(Tool::GetIssue, &discovered),
            Verdict::Unexpected
        );
        let unknown = reply(
            404,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"m"}}"#,
        );
        assert_eq!(classify_for(tool, &unknown), Verdict::Status(404));
    }
}
