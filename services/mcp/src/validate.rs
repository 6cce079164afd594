//! The one validator: every incoming message and every outgoing result
//! passes through here, and each check knows the negotiated revision.
//!
//! Requests are refused with a typed JSON-RPC error before anything runs;
//! results that would leave malformed are reported to the engine, which
//! turns them into `-32603` instead of sending them. Nothing is filled in:
//! a missing field is an error naming the field, never a default.

use std::collections::HashSet;
use std::fmt;

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::backend::{ServerIdentity, ToolDef, ToolOutput};
use crate::revision::Revision;
use crate::wire::{Envelope, MetaHead, ParamsHead, RpcError, meta_key};

/// A whole incoming body: one message or (2025-03-26 only) a batch.
#[derive(Debug)]
pub(crate) enum Incoming<'a> {
    Single(Envelope<'a>),
    Batch(Vec<&'a RawValue>),
}

/// Parses a body once. Syntax errors are `-32700`; valid JSON that is not
/// a message object (or array of them) is `-32600`.
pub(crate) fn parse(bytes: &[u8]) -> Result<Incoming<'_>, RpcError> {
    match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
        None => Err(RpcError::parse("Parse error: the body is empty")),
        Some(b'[') => serde_json::from_slice::<Vec<&RawValue>>(bytes)
            .map(Incoming::Batch)
            .map_err(body_error),
        Some(b'{') => serde_json::from_slice::<Envelope<'_>>(bytes)
            .map(Incoming::Single)
            .map_err(body_error),
        Some(_) => match serde_json::from_slice::<&RawValue>(bytes) {
            Ok(_) => Err(RpcError::invalid_request(
                "Invalid Request: a JSON-RPC message must be a JSON object",
            )),
            Err(e) => Err(body_error(e)),
        },
    }
}

/// Parses one element of a batch.
pub(crate) fn parse_element(raw: &RawValue) -> Result<Envelope<'_>, RpcError> {
    if !raw.get().starts_with('{') {
        return Err(RpcError::invalid_request(
            "Invalid Request: each batch element must be a JSON-RPC message object",
        ));
    }
    serde_json::from_str::<Envelope<'_>>(raw.get()).map_err(body_error)
}

fn body_error(e: serde_json::Error) -> RpcError {
    match e.classify() {
        serde_json::error::Category::Data => {
            RpcError::invalid_request(format!("Invalid Request: {e}"))
        }
        _ => RpcError::parse(format!("Parse error: {e}")),
    }
}

/// One message after envelope validation.
#[derive(Debug)]
pub(crate) enum Message<'a> {
    Request {
        id: &'a RawValue,
        method: String,
        params: Option<&'a RawValue>,
    },
    Notification {
        method: String,
        params: Option<&'a RawValue>,
    },
    Response,
}

/// An envelope refusal, with the id when it was readable.
#[derive(Debug)]
pub(crate) struct Refusal<'a> {
    pub id: Option<&'a RawValue>,
    pub error: RpcError,
}

/// True when `raw` is a JSON string or an integer literal: the only ids
/// MCP allows (no null, no fractions, no exponents).
fn is_valid_id(raw: &RawValue) -> bool {
    let text = raw.get();
    if text.starts_with('"') {
        return true;
    }
    let digits = text.strip_prefix('-').unwrap_or(text);
    !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'))
}

fn as_str(raw: &RawValue) -> Option<String> {
    if !raw.get().starts_with('"') {
        return None;
    }
    serde_json::from_str::<String>(raw.get()).ok()
}

/// Checks the JSON-RPC 2.0 envelope and tells requests, notifications and
/// responses apart.
pub(crate) fn envelope<'a>(env: &Envelope<'a>) -> Result<Message<'a>, Refusal<'a>> {
    let id = env.id.filter(|raw| is_valid_id(raw));
    let refuse = |message: &str| Refusal {
        id,
        error: RpcError::invalid_request(format!("Invalid Request: {message}")),
    };
    match env.jsonrpc.map(|raw| raw.get()) {
        Some("\"2.0\"") => {}
        Some(_) => return Err(refuse("`jsonrpc` must be the string \"2.0\"")),
        None => return Err(refuse("`jsonrpc` is required and must be \"2.0\"")),
    }
    if let Some(raw_id) = env.id
        && !is_valid_id(raw_id)
    {
        return Err(refuse("`id` must be a string or an integer (not null)"));
    }
    match env.method {
        Some(raw_method) => {
            let Some(method) = as_str(raw_method) else {
                return Err(refuse("`method` must be a string"));
            };
            if env.result.is_some() || env.error.is_some() {
                return Err(refuse(
                    "a message cannot carry `method` together with `result` or `error`",
                ));
            }
            Ok(match id {
                Some(id) => Message::Request {
                    id,
                    method,
                    params: env.params,
                },
                None => Message::Notification {
                    method,
                    params: env.params,
                },
            })
        }
        None => match (env.id, env.result.is_some(), env.error.is_some()) {
            (Some(_), true, false) | (Some(_), false, true) => Ok(Message::Response),
            (None, _, _) => Err(refuse("`method` is required")),
            _ => Err(refuse(
                "a response must carry exactly one of `result` and `error`",
            )),
        },
    }
}

/// Reads the members of `params` the served methods use.
pub(crate) fn params_head(params: Option<&RawValue>) -> Result<ParamsHead<'_>, RpcError> {
    let Some(raw) = params else {
        return Ok(ParamsHead::default());
    };
    if !raw.get().starts_with('{') {
        return Err(RpcError::invalid_params(
            "Invalid params: `params` must be an object",
        ));
    }
    serde_json::from_str::<ParamsHead<'_>>(raw.get())
        .map_err(|e| RpcError::invalid_params(format!("Invalid params: {e}")))
}

/// True when the request names a protocol version in its `_meta` (the
/// marker of a 2026-07-28 stateless request). Only presence matters here;
/// [`modern_envelope`] validates the value.
pub(crate) fn has_meta_protocol_version(head: &ParamsHead<'_>) -> bool {
    head.meta
        .filter(|raw| raw.get().starts_with('{'))
        .and_then(|raw| serde_json::from_str::<MetaHead<'_>>(raw.get()).ok())
        .is_some_and(|meta| meta.protocol_version.is_some())
}

/// One HTTP request header relevant to MCP validation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum HeaderSlot {
    #[default]
    Absent,
    Present(String),
    /// Repeated, or not visible ASCII.
    Malformed,
}

impl HeaderSlot {
    fn describe(&self) -> &'static str {
        match self {
            HeaderSlot::Absent => "missing",
            HeaderSlot::Present(_) => "present",
            HeaderSlot::Malformed => "malformed (repeated or not visible ASCII)",
        }
    }
}

/// The HTTP headers MCP mirrors from the body. `None` on stdio.
#[derive(Debug, Clone, Default)]
pub struct RequestHeaders {
    pub protocol_version: HeaderSlot,
    pub method: HeaderSlot,
    pub name: HeaderSlot,
}

/// Validates the 2026-07-28 per-request envelope (and, over HTTP, the
/// mirrored headers) and returns the request's revision.
pub(crate) fn modern_envelope(
    method: &str,
    head: &ParamsHead<'_>,
    headers: Option<&RequestHeaders>,
) -> Result<Revision, RpcError> {
    let pv_key = meta_key::PROTOCOL_VERSION;
    let caps_key = meta_key::CLIENT_CAPABILITIES;
    let Some(raw_meta) = head.meta else {
        return Err(RpcError::invalid_params(format!(
            "Invalid params: `params._meta` is required and must carry \"{pv_key}\" and \"{caps_key}\""
        )));
    };
    if !raw_meta.get().starts_with('{') {
        return Err(RpcError::invalid_params(
            "Invalid params: `params._meta` must be an object",
        ));
    }
    let meta: MetaHead<'_> = serde_json::from_str(raw_meta.get())
        .map_err(|e| RpcError::invalid_params(format!("Invalid params: `params._meta`: {e}")))?;
    let missing: Vec<&str> = [
        (meta.protocol_version.is_none(), pv_key),
        (meta.client_capabilities.is_none(), caps_key),
    ]
    .into_iter()
    .filter_map(|(absent, key)| absent.then_some(key))
    .collect();
    if !missing.is_empty() {
        return Err(RpcError::invalid_params(format!(
            "Invalid params: `params._meta` is missing the required key(s): {}",
            missing.join(", ")
        )));
    }
    let version = meta.protocol_version.and_then(as_str);

    if let Some(headers) = headers {
        // Header rung before the version rung: a client that disagrees with
        // itself is told so, rather than told its version is unsupported.
        match (&headers.protocol_version, &version) {
            (HeaderSlot::Present(h), Some(v)) if h == v => {}
            (HeaderSlot::Present(_), _) => {
                return Err(RpcError::header_mismatch(
                    "Header mismatch: MCP-Protocol-Version does not match params._meta[\"io.modelcontextprotocol/protocolVersion\"]",
                ));
            }
            (slot, _) => {
                return Err(RpcError::header_mismatch(format!(
                    "Header mismatch: the MCP-Protocol-Version header is {}; it must equal params._meta[\"io.modelcontextprotocol/protocolVersion\"]",
                    slot.describe()
                )));
            }
        }
        match &headers.method {
            HeaderSlot::Present(h) if h == method => {}
            HeaderSlot::Present(_) => {
                return Err(RpcError::header_mismatch(
                    "Header mismatch: the Mcp-Method header does not match the body's `method`",
                ));
            }
            slot => {
                return Err(RpcError::header_mismatch(format!(
                    "Header mismatch: the Mcp-Method header is {}; it must equal the body's `method`",
                    slot.describe()
                )));
            }
        }
        if method == "tools/call"
            && let Some(body_name) = head.name.and_then(as_str)
        {
            match &headers.name {
                HeaderSlot::Present(h) if decode_header_value(h).as_deref() == Some(&body_name) => {
                }
                HeaderSlot::Present(_) => {
                    return Err(RpcError::header_mismatch(
                        "Header mismatch: the Mcp-Name header does not match `params.name`",
                    ));
                }
                slot => {
                    return Err(RpcError::header_mismatch(format!(
                        "Header mismatch: the Mcp-Name header is {}; tools/call requires it to equal `params.name`",
                        slot.describe()
                    )));
                }
            }
        }
    }

    let Some(version) = version else {
        return Err(RpcError::invalid_params(format!(
            "Invalid params: params._meta[\"{pv_key}\"] must be a string"
        )));
    };
    let revision = match Revision::parse(&version) {
        Some(rev) if rev.is_modern() => rev,
        _ => {
            let supported: Vec<&str> = Revision::MODERN.iter().map(|r| r.as_str()).collect();
            return Err(RpcError::new(
                crate::code::UNSUPPORTED_PROTOCOL_VERSION,
                format!(
                    "Unsupported protocol version: this server serves {} per request (legacy revisions only through `initialize`)",
                    supported.join(", ")
                ),
            )
            .with_data(serde_json::json!({ "supported": supported, "requested": version })));
        }
    };
    if meta
        .client_capabilities
        .is_some_and(|raw| !raw.get().starts_with('{'))
    {
        return Err(RpcError::invalid_params(format!(
            "Invalid params: params._meta[\"{caps_key}\"] must be an object"
        )));
    }
    if let Some(info) = meta.client_info {
        implementation(info).map_err(|problem| {
            RpcError::invalid_params(format!(
                "Invalid params: params._meta[\"{}\"] {problem}",
                meta_key::CLIENT_INFO
            ))
        })?;
    }
    Ok(revision)
}

/// Decodes the `=?base64?...?=` sentinel form of `Mcp-Name`.
fn decode_header_value(value: &str) -> Option<String> {
    use base64::Engine as _;
    match value
        .strip_prefix("=?base64?")
        .and_then(|rest| rest.strip_suffix("?="))
    {
        Some(encoded) => base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok()),
        None => Some(value.to_owned()),
    }
}

/// Checks an `Implementation` object (`clientInfo`): string `name` and
/// `version` are required.
fn implementation(raw: &RawValue) -> Result<(), String> {
    let Ok(Value::Object(map)) = serde_json::from_str::<Value>(raw.get()) else {
        return Err("must be an object with string `name` and `version`".into());
    };
    for key in ["name", "version"] {
        if !map.get(key).is_some_and(Value::is_string) {
            return Err(format!("needs a string `{key}`"));
        }
    }
    Ok(())
}

/// Checks the `MCP-Protocol-Version` header of a request in a legacy
/// session. Absent means "the session's revision" (2025-06-18 transports
/// spec); present, it must name a served legacy revision, else 400. The
/// spec refuses only invalid or unsupported values, and real clients (the
/// official conformance suite among them) send a different supported
/// revision than the negotiated one, so a mismatch is accepted and the
/// session's negotiated revision governs the response.
pub(crate) fn legacy_protocol_header(
    headers: Option<&RequestHeaders>,
    session: Revision,
) -> Result<(), RpcError> {
    let Some(headers) = headers else {
        return Ok(());
    };
    match &headers.protocol_version {
        HeaderSlot::Absent => Ok(()),
        HeaderSlot::Malformed => Err(RpcError::invalid_request(
            "Bad Request: the MCP-Protocol-Version header is malformed (repeated or not visible ASCII)",
        )),
        HeaderSlot::Present(value) => match Revision::parse(value) {
            Some(rev) if !rev.is_modern() => Ok(()),
            Some(_) => Err(RpcError::invalid_request(format!(
                "Bad Request: MCP-Protocol-Version {value} is stateless; this request is in a {session} session (send params._meta to use {value})"
            ))),
            None => Err(RpcError::invalid_request(format!(
                "Bad Request: unsupported MCP-Protocol-Version header; this session speaks {session}"
            ))),
        },
    }
}

/// A request after method and params validation.
#[derive(Debug)]
pub(crate) enum Call<'a> {
    Initialize {
        requested: String,
    },
    Ping,
    SetLevel,
    List,
    Tool {
        name: String,
        arguments: Option<&'a RawValue>,
    },
    Discover,
}

const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// Validates a request's method and params for `revision`.
pub(crate) fn request<'a>(
    revision: Revision,
    method: &str,
    head: &ParamsHead<'a>,
) -> Result<Call<'a>, RpcError> {
    if !revision.is_modern()
        && let Some(meta) = head.meta
        && !meta.get().starts_with('{')
    {
        return Err(RpcError::invalid_params(
            "Invalid params: `params._meta` must be an object",
        ));
    }
    match method {
        "initialize" if !revision.is_modern() => initialize(head),
        "ping" if revision.has_ping_and_set_level() => Ok(Call::Ping),
        "logging/setLevel" if revision.has_ping_and_set_level() => {
            match head.level.and_then(as_str) {
                Some(level) if LOG_LEVELS.contains(&level.as_str()) => Ok(Call::SetLevel),
                _ => Err(RpcError::invalid_params(format!(
                    "Invalid params: `params.level` is required and must be one of: {}",
                    LOG_LEVELS.join(", ")
                ))),
            }
        }
        "server/discover" if revision.is_modern() => Ok(Call::Discover),
        "tools/list" => match head.cursor {
            None => Ok(Call::List),
            Some(_) => Err(RpcError::invalid_params(
                "Invalid params: `params.cursor` is not a cursor this server issued (tools/list is not paginated)",
            )),
        },
        "tools/call" => {
            let Some(name) = head.name.and_then(as_str) else {
                return Err(RpcError::invalid_params(
                    "Invalid params: `params.name` is required and must be a string (the tool to call)",
                ));
            };
            if let Some(args) = head.arguments
                && !args.get().starts_with('{')
            {
                return Err(RpcError::invalid_params(
                    "Invalid params: `params.arguments` must be an object",
                ));
            }
            Ok(Call::Tool {
                name,
                arguments: head.arguments,
            })
        }
        _ => Err(RpcError::method_not_found(format!(
            "Method not found: this server does not serve that method in revision {revision}"
        ))),
    }
}

fn initialize<'a>(head: &ParamsHead<'a>) -> Result<Call<'a>, RpcError> {
    let Some(requested) = head.protocol_version.and_then(as_str) else {
        return Err(RpcError::invalid_params(
            "Invalid params: `params.protocolVersion` is required and must be a string",
        ));
    };
    if !head
        .capabilities
        .is_some_and(|raw| raw.get().starts_with('{'))
    {
        return Err(RpcError::invalid_params(
            "Invalid params: `params.capabilities` is required and must be an object",
        ));
    }
    let Some(info) = head.client_info else {
        return Err(RpcError::invalid_params(
            "Invalid params: `params.clientInfo` is required (an object with string `name` and `version`)",
        ));
    };
    implementation(info).map_err(|problem| {
        RpcError::invalid_params(format!("Invalid params: `params.clientInfo` {problem}"))
    })?;
    Ok(Call::Initialize { requested })
}

/// Decodes `arguments` (absent means an empty object) exactly once.
pub(crate) fn decode_arguments(raw: Option<&RawValue>) -> Result<Map<String, Value>, RpcError> {
    match raw {
        None => Ok(Map::new()),
        Some(raw) => serde_json::from_str::<Map<String, Value>>(raw.get()).map_err(|e| {
            RpcError::invalid_params(format!("Invalid params: `params.arguments`: {e}"))
        }),
    }
}

/// Why a value does not match a schema: where, and what to fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Violation {
    pub path: String,
    pub problem: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.problem)
        } else {
            write!(f, "`{}` {}", self.path, self.problem)
        }
    }
}

/// Deeper schemas are not used by any tool; the limit only guards against
/// a pathological self-made schema.
const MAX_SCHEMA_DEPTH: usize = 32;

/// Validates `value` against the JSON Schema subset the tools use: `type`,
/// `enum`, `const`, `properties`, `required`, `additionalProperties`,
/// `minLength`/`maxLength`, `minimum`/`maximum` (and the exclusive forms),
/// `items`, `minItems`/`maxItems`, `uniqueItems`. Other keywords are
/// annotations here and do not constrain.
pub(crate) fn schema(schema: &Value, value: &Value) -> Result<(), Violation> {
    let mut path = String::new();
    check(schema, value, &mut path, 0)
}

fn violation(path: &str, problem: impl Into<String>) -> Violation {
    Violation {
        path: path.to_owned(),
        problem: problem.into(),
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn has_type(value: &Value, ty: &str) -> bool {
    match ty {
        "integer" => matches!(value, Value::Number(n) if n.is_i64() || n.is_u64()),
        "number" => value.is_number(),
        other => type_name(value) == other,
    }
}

fn check(schema: &Value, value: &Value, path: &mut String, depth: usize) -> Result<(), Violation> {
    let rules = match schema {
        Value::Bool(true) => return Ok(()),
        Value::Bool(false) => return Err(violation(path, "is not allowed")),
        Value::Object(rules) => rules,
        _ => return Ok(()),
    };
    if depth > MAX_SCHEMA_DEPTH {
        return Err(violation(
            path,
            "is nested deeper than this server validates",
        ));
    }
    match rules.get("type") {
        Some(Value::String(ty)) if !has_type(value, ty) => {
            return Err(violation(
                path,
                format!("must be {} {ty}, got {}", article(ty), type_name(value)),
            ));
        }
        Some(Value::Array(types)) => {
            let names: Vec<&str> = types.iter().filter_map(Value::as_str).collect();
            if !names.iter().any(|ty| has_type(value, ty)) {
                return Err(violation(
                    path,
                    format!(
                        "must be one of the types {}, got {}",
                        names.join(", "),
                        type_name(value)
                    ),
                ));
            }
        }
        _ => {}
    }
    if let Some(Value::Array(allowed)) = rules.get("enum")
        && !allowed.contains(value)
    {
        let listed: Vec<String> = allowed.iter().map(Value::to_string).collect();
        return Err(violation(
            path,
            format!("must be one of: {}", listed.join(", ")),
        ));
    }
    if let Some(expected) = rules.get("const")
        && expected != value
    {
        return Err(violation(path, format!("must be exactly {expected}")));
    }
    match value {
        Value::String(text) => check_string(rules, text, path)?,
        Value::Number(number) => check_number(rules, number, path)?,
        Value::Array(items) => check_array(rules, items, path, depth)?,
        Value::Object(members) => check_object(rules, members, path, depth)?,
        _ => {}
    }
    Ok(())
}

fn article(ty: &str) -> &'static str {
    match ty.as_bytes().first() {
        Some(b'a' | b'e' | b'i' | b'o' | b'u') => "an",
        _ => "a",
    }
}

fn limit(rules: &Map<String, Value>, key: &str) -> Option<u64> {
    rules.get(key).and_then(Value::as_u64)
}

fn check_string(rules: &Map<String, Value>, text: &str, path: &str) -> Result<(), Violation> {
    let min = limit(rules, "minLength");
    let max = limit(rules, "maxLength");
    if min.is_none() && max.is_none() {
        return Ok(());
    }
    let len = text.chars().count() as u64;
    if let Some(min) = min.filter(|min| len < *min) {
        return Err(violation(
            path,
            format!("must be at least {min} characters long, got {len}"),
        ));
    }
    if let Some(max) = max.filter(|max| len > *max) {
        return Err(violation(
            path,
            format!("must be at most {max} characters long, got {len}"),
        ));
    }
    Ok(())
}

fn check_number(
    rules: &Map<String, Value>,
    number: &serde_json::Number,
    path: &str,
) -> Result<(), Violation> {
    let Some(n) = number.as_f64() else {
        return Ok(());
    };
    let bound = |key: &str| rules.get(key).and_then(Value::as_f64);
    if let Some(min) = bound("minimum").filter(|min| n < *min) {
        return Err(violation(
            path,
            format!("must be at least {min}, got {number}"),
        ));
    }
    if let Some(max) = bound("maximum").filter(|max| n > *max) {
        return Err(violation(
            path,
            format!("must be at most {max}, got {number}"),
        ));
    }
    if let Some(min) = bound("exclusiveMinimum").filter(|min| n <= *min) {
        return Err(violation(
            path,
            format!("must be greater than {min}, got {number}"),
        ));
    }
    if let Some(max) = bound("exclusiveMaximum").filter(|max| n >= *max) {
        return Err(violation(
            path,
            format!("must be less than {max}, got {number}"),
        ));
    }
    Ok(())
}

fn check_array(
    rules: &Map<String, Value>,
    items: &[Value],
    path: &mut String,
    depth: usize,
) -> Result<(), Violation> {
    let len = items.len() as u64;
    if let Some(min) = limit(rules, "minItems").filter(|min| len < *min) {
        return Err(violation(
            path,
            format!("must have at least {min} items, got {len}"),
        ));
    }
    if let Some(max) = limit(rules, "maxItems").filter(|max| len > *max) {
        return Err(violation(
            path,
            format!("must have at most {max} items, got {len}"),
        ));
    }
    if rules.get("uniqueItems") == Some(&Value::Bool(true)) {
        // Canonical text (maps serialize with sorted keys) makes this linear
        // instead of quadratic on large arrays.
        let mut seen = HashSet::with_capacity(items.len());
        for item in items {
            if !seen.insert(item.to_string()) {
                return Err(violation(
                    path,
                    format!("must not repeat items ({item} appears twice)"),
                ));
            }
        }
    }
    if let Some(item_schema) = rules.get("items") {
        let base = path.len();
        for (index, item) in items.iter().enumerate() {
            path.push_str(&format!("[{index}]"));
            check(item_schema, item, path, depth + 1)?;
            path.truncate(base);
        }
    }
    Ok(())
}

fn check_object(
    rules: &Map<String, Value>,
    members: &Map<String, Value>,
    path: &mut String,
    depth: usize,
) -> Result<(), Violation> {
    let properties = rules.get("properties").and_then(Value::as_object);
    let base = path.len();
    let push = |path: &mut String, key: &str| {
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(key);
    };
    if let Some(Value::Array(required)) = rules.get("required") {
        for key in required.iter().filter_map(Value::as_str) {
            if !members.contains_key(key) {
                push(path, key);
                return Err(violation(path, "is required but missing"));
            }
        }
    }
    for (key, member) in members {
        match properties.and_then(|props| props.get(key)) {
            Some(member_schema) => {
                push(path, key);
                check(member_schema, member, path, depth + 1)?;
                path.truncate(base);
            }
            None => match rules.get("additionalProperties") {
                Some(Value::Bool(false)) => {
                    let allowed: Vec<&str> = properties
                        .map(|props| props.keys().map(String::as_str).collect())
                        .unwrap_or_default();
                    push(path, key);
                    let problem = if allowed.is_empty() {
                        "is not accepted (this takes no arguments)".to_owned()
                    } else {
                        format!("is not accepted (allowed: {})", allowed.join(", "))
                    };
                    return Err(violation(path, problem));
                }
                Some(extra @ Value::Object(_)) => {
                    push(path, key);
                    check(extra, member, path, depth + 1)?;
                    path.truncate(base);
                }
                _ => {}
            },
        }
    }
    Ok(())
}

/// Tool names: 1-128 characters of `[A-Za-z0-9_.-]` (2025-11-25 tools spec;
/// applied to every revision, since clients drop lists with bad names).
pub(crate) fn tool_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// Checks a tool list before it is rendered for `revision`. One bad tool
/// makes clients drop the whole list, so any defect fails the list.
pub(crate) fn tool_definitions(revision: Revision, tools: &[ToolDef]) -> Result<(), String> {
    let mut names = HashSet::with_capacity(tools.len());
    for tool in tools {
        if !tool_name(&tool.name) {
            return Err(format!(
                "tool name {:?} is not 1-128 characters of [A-Za-z0-9_.-]",
                tool.name
            ));
        }
        if !names.insert(tool.name.as_str()) {
            return Err(format!("tool name {:?} appears twice", tool.name));
        }
        let is_object_schema = |schema: &Value| {
            schema.is_object() && schema.get("type") == Some(&Value::String("object".into()))
        };
        if !is_object_schema(&tool.input_schema) {
            return Err(format!(
                "tool {:?}: inputSchema must be an object schema (\"type\": \"object\")",
                tool.name
            ));
        }
        if let Some(output) = &tool.output_schema
            && revision.has_structured_output()
        {
            let ok = if revision.output_schema_must_be_object() {
                is_object_schema(output)
            } else {
                output.is_object()
            };
            if !ok {
                return Err(format!(
                    "tool {:?}: outputSchema is not valid for revision {revision}",
                    tool.name
                ));
            }
        }
        if tool.annotations.as_ref().is_some_and(|a| !a.is_object()) {
            return Err(format!(
                "tool {:?}: annotations must be an object",
                tool.name
            ));
        }
    }
    Ok(())
}

/// Checks the server identity: clients reject `serverInfo` without a
/// string `name` and `version`.
pub(crate) fn identity(identity: &ServerIdentity) -> Result<(), String> {
    if identity.name.trim().is_empty() {
        return Err("serverInfo.name is empty".into());
    }
    if identity.version.trim().is_empty() {
        return Err("serverInfo.version is empty".into());
    }
    Ok(())
}

/// Checks a tool's output against its definition: from 2025-06-18 on,
/// `structuredContent` is present exactly when the tool declares an
/// `outputSchema` and the call succeeded, and then it must conform.
pub(crate) fn tool_output(
    revision: Revision,
    tool: &ToolDef,
    output: &ToolOutput,
) -> Result<(), String> {
    if !revision.has_structured_output() {
        return Ok(());
    }
    match (&tool.output_schema, &output.structured, output.is_error) {
        (_, Some(_), true) => Err(format!(
            "tool {:?} returned structured content with an error result",
            tool.name
        )),
        (_, None, true) => Ok(()),
        (Some(output_schema), Some(structured), false) => schema(output_schema, structured)
            .map_err(|v| {
                // Only the path: the value is tool output (board data) and
                // this message is logged.
                format!(
                    "tool {:?} returned structured content not matching its outputSchema at `{}`",
                    tool.name, v.path
                )
            }),
        (Some(_), None, false) => Err(format!(
            "tool {:?} declares an outputSchema but returned no structured content",
            tool.name
        )),
        (None, Some(_), false) => Err(format!(
            "tool {:?} returned structured content but declares no outputSchema",
            tool.name
        )),
        (None, None, false) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ids() {
        let raw =
            |s: &str| serde_json::from_str::<Box<RawValue>>(s).unwrap_or_else(|_| panic!("{s}"));
        for good in ["1", "0", "-7", "\"x\"", "12345678901234567890123"] {
            assert!(is_valid_id(&raw(good)), "{good}");
        }
        for bad in ["null", "1.5", "1e3", "-0.0", "true", "{}", "[]"] {
            assert!(!is_valid_id(&raw(bad)), "{bad}");
        }
    }

    #[test]
    fn schema_subset() {
        let s = json!({
            "type": "object",
            "properties": {
                "title": {"type": "string", "minLength": 1, "maxLength": 5},
                "n": {"type": "integer", "minimum": 1, "maximum": 3},
                "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "maxItems": 2, "uniqueItems": true},
                "inner": {"type": "object", "properties": {"x": {"type": "boolean"}}, "additionalProperties": false}
            },
            "required": ["title"],
            "additionalProperties": false
        });
        assert!(
            schema(
                &s,
                &json!({"title": "ok", "n": 2, "tags": ["a"], "inner": {"x": true}})
            )
            .is_ok()
        );
        let err = |v: Value| {
            schema(&s, &v)
                .err()
                .map(|v| v.to_string())
                .unwrap_or_default()
        };
        assert_eq!(err(json!({})), "`title` is required but missing");
        assert!(err(json!({"title": ""})).contains("at least 1"));
        assert!(err(json!({"title": "toolong"})).contains("at most 5"));
        assert!(err(json!({"title": "a", "n": 1.0})).starts_with("`n` must be an integer"));
        assert!(err(json!({"title": "a", "n": 4})).contains("at most 3"));
        assert!(err(json!({"title": "a", "tags": ["c"]})).starts_with("`tags[0]` must be one of"));
        assert!(err(json!({"title": "a", "tags": ["a", "a"]})).contains("repeat"));
        assert!(err(json!({"title": "a", "tags": ["a", "b", "a"]})).contains("at most 2"));
        assert!(
            err(json!({"title": "a", "inner": {"y": 1}})).starts_with("`inner.y` is not accepted")
        );
        assert!(err(json!({"title": "a", "zzz": 1})).contains("allowed: inner, n, tags, title"));
    }

    #[test]
    fn names() {
        assert!(tool_name("create_issue"));
        assert!(tool_name("a.b-c_9"));
        assert!(!tool_name(""));
        assert!(!tool_name("has space"));
        assert!(!tool_name(&"x".repeat(129)));
    }
}
