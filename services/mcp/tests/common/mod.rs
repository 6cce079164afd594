//! A toy backend and request helpers shared by the integration tests.

#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use actix_web::http::Method;
use actix_web::{App, test};
use async_trait::async_trait;
use corkboard_mcp::{
    AuthRejection, Authenticate, ErrorCode, McpEndpoint, McpSettings, Principal, ResultOrigin,
    ServerIdentity, SessionKey, ToolBackend, ToolCall, ToolDef, ToolOutput, ToolSet,
};
use corkboard_testkit::mcp;
pub use corkboard_testkit::mcp::{
    META_CLIENT_CAPABILITIES as CAPS_KEY, META_PROTOCOL_VERSION as PV_KEY, MODERN,
};
use serde_json::{Value, json};

pub const HOST: &str = "127.0.0.1:8080";

#[derive(Debug, Clone)]
pub struct ToyPrincipal {
    pub grant: String,
    pub limited: bool,
}

impl Principal for ToyPrincipal {
    fn session_binding(&self) -> &str {
        &self.grant
    }
}

/// Tools: `echo` (structured output), `add` (integers, text only),
/// `fail` (tool execution error), `bad_output` (structured content without
/// an outputSchema), `boom` (panics). The `limited` principal sees `echo`
/// only.
pub struct Toy {
    pub identity: ServerIdentity,
    pub full: Arc<ToolSet>,
    pub limited: Arc<ToolSet>,
    pub calls: AtomicUsize,
}

pub fn echo_tool() -> ToolDef {
    ToolDef {
        name: "echo".into(),
        title: Some("Echo".into()),
        description: "Echoes text back.".into(),
        input_schema: json!({
            "type": "object",
            "properties": {"text": {"type": "string", "minLength": 1, "maxLength": 20}},
            "required": ["text"],
            "additionalProperties": false
        }),
        output_schema: Some(json!({
            "type": "object",
            "properties": {"echo": {"type": "string"}},
            "required": ["echo"]
        })),
        annotations: Some(json!({"readOnlyHint": true})),
        results: ResultOrigin::Relayed,
    }
}

fn simple_tool(name: &str, input_schema: Value) -> ToolDef {
    ToolDef {
        name: name.into(),
        title: None,
        description: format!("The {name} tool."),
        input_schema,
        output_schema: None,
        annotations: None,
        results: ResultOrigin::Relayed,
    }
}

pub fn no_args() -> Value {
    json!({"type": "object", "additionalProperties": false})
}

pub fn toy_tools() -> Vec<ToolDef> {
    vec![
        echo_tool(),
        simple_tool(
            "add",
            json!({
                "type": "object",
                "properties": {
                    "a": {"type": "integer", "minimum": -100, "maximum": 100},
                    "b": {"type": "integer"}
                },
                "required": ["a", "b"],
                "additionalProperties": false
            }),
        ),
        simple_tool("fail", no_args()),
        simple_tool("bad_output", no_args()),
        simple_tool("boom", no_args()),
    ]
}

pub fn identity() -> ServerIdentity {
    ServerIdentity {
        name: "toy".into(),
        version: "1.2.3".into(),
        title: Some("Toy server".into()),
        instructions: Some("Use echo.".into()),
    }
}

impl Toy {
    pub fn new() -> Arc<Self> {
        Self::with(identity(), toy_tools())
    }

    pub fn with(identity: ServerIdentity, tools: Vec<ToolDef>) -> Arc<Self> {
        Arc::new(Self {
            identity,
            full: Arc::new(ToolSet::new(tools)),
            limited: Arc::new(ToolSet::new(vec![echo_tool()])),
            calls: AtomicUsize::new(0),
        })
    }

    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Authenticate for Toy {
    async fn authenticate(&self, bearer: Option<&str>) -> Result<ToyPrincipal, AuthRejection> {
        let principal = |grant: &str, limited| ToyPrincipal {
            grant: grant.into(),
            limited,
        };
        match bearer {
            None => Err(AuthRejection::Missing),
            Some("token-a") => Ok(principal("grant-a", false)),
            Some("token-b") => Ok(principal("grant-b", false)),
            Some("limited") => Ok(principal("grant-l", true)),
            Some("down") => Err(AuthRejection::Unavailable(
                "token registry unreachable".into(),
            )),
            Some(_) => Err(AuthRejection::Refused(
                "unknown or revoked run token".into(),
            )),
        }
    }
}

#[async_trait]
impl ToolBackend for Toy {
    type Principal = ToyPrincipal;

    fn identity(&self) -> &ServerIdentity {
        &self.identity
    }

    fn tools(&self, principal: &ToyPrincipal) -> Arc<ToolSet> {
        if principal.limited {
            Arc::clone(&self.limited)
        } else {
            Arc::clone(&self.full)
        }
    }

    async fn call_tool(&self, _principal: &ToyPrincipal, call: ToolCall<'_>) -> ToolOutput {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let text_arg = call
            .arguments
            .get("text")
            .and_then(Value::as_str)
            .unwrap_or_default();
        match call.name {
            "echo" => ToolOutput {
                structured: Some(json!({"echo": text_arg}).into()),
                text: Default::default(),
                is_error: false,
                relay: None,
                content: Vec::new(),
            },
            "add" => {
                let n = |k: &str| {
                    call.arguments
                        .get(k)
                        .and_then(Value::as_i64)
                        .unwrap_or_default()
                };
                ToolOutput {
                    structured: None,
                    text: (n("a") + n("b")).to_string().into(),
                    is_error: false,
                    relay: None,
                    content: Vec::new(),
                }
            }
            "fail" => ToolOutput {
                structured: None,
                text: "board unavailable: try again".into(),
                is_error: true,
                relay: None,
                content: Vec::new(),
            },
            "bad_output" => ToolOutput {
                structured: Some(json!({}).into()),
                text: "x".into(),
                is_error: false,
                relay: None,
                content: Vec::new(),
            },
            "boom" => panic!("the toy tool exploded"),
            other => ToolOutput {
                structured: None,
                text: format!("no such tool {other}").into(),
                is_error: true,
                relay: None,
                content: Vec::new(),
            },
        }
    }
}

pub fn key(byte: u8) -> SessionKey {
    SessionKey::new(vec![byte; 32]).unwrap_or_else(|e| panic!("key: {e}"))
}

pub fn settings(key_byte: u8) -> McpSettings {
    let mut settings = McpSettings::new(key(key_byte));
    settings.allowed_origins = vec!["http://localhost:5173".into()];
    settings.allowed_hosts = vec!["gateway.internal".into()];
    settings
}

pub fn endpoint(backend: Arc<Toy>) -> McpEndpoint<Toy> {
    McpEndpoint::new(backend, settings(1))
}

/// An HTTP request description; `None` values remove a default header.
#[derive(Debug, Clone)]
pub struct Req {
    pub method: Method,
    pub headers: Vec<(String, Option<String>)>,
    pub body: Vec<u8>,
}

impl Req {
    pub fn post(body: impl Into<Vec<u8>>) -> Self {
        Self {
            method: Method::POST,
            headers: vec![
                ("host".into(), Some(HOST.into())),
                ("content-type".into(), Some("application/json".into())),
                ("accept".into(), Some(mcp::ACCEPT.into())),
                ("authorization".into(), Some("Bearer token-a".into())),
            ],
            body: body.into(),
        }
    }

    pub fn json(value: &Value) -> Self {
        Self::post(value.to_string())
    }

    pub fn method(mut self, method: Method) -> Self {
        self.method = method;
        self
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        let name = name.to_ascii_lowercase();
        self.headers.retain(|(n, _)| *n != name);
        self.headers.push((name, Some(value.into())));
        self
    }

    pub fn without(mut self, name: &str) -> Self {
        let name = name.to_ascii_lowercase();
        self.headers.retain(|(n, _)| *n != name);
        self
    }

    /// Adds the 2026-07-28 mirrored headers for `body`.
    pub fn modern_headers(self, body: &Value) -> Self {
        let mut req = self.header("mcp-protocol-version", MODERN);
        if let Some(method) = body["method"].as_str() {
            req = req.header("mcp-method", method);
        }
        if let Some(name) = body["params"]["name"].as_str() {
            req = req.header("mcp-name", name);
        }
        req
    }

    pub fn session(self, id: &str, revision: &str) -> Self {
        self.header("mcp-session-id", id)
            .header("mcp-protocol-version", revision)
    }
}

#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: actix_web::http::header::HeaderMap,
    pub raw: Vec<u8>,
    pub json: Value,
}

impl Reply {
    pub fn code(&self) -> Option<ErrorCode> {
        self.json["error"]["code"].as_i64().map(ErrorCode)
    }

    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    }

    pub fn content_type(&self) -> String {
        self.header("content-type").unwrap_or_default()
    }
}

pub fn to_test_request(req: &Req) -> test::TestRequest {
    let mut builder = test::TestRequest::default()
        .method(req.method.clone())
        .uri("/mcp")
        .set_payload(req.body.clone());
    for (name, value) in &req.headers {
        if let Some(value) = value {
            builder = builder.insert_header((name.as_str(), value.as_str()));
        }
    }
    builder
}

pub async fn read_reply(resp: actix_web::dev::ServiceResponse) -> Reply {
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let raw = test::read_body(resp).await.to_vec();
    let json = parse_body(&headers, &raw);
    Reply {
        status,
        headers,
        raw,
        json,
    }
}

/// JSON bodies as-is; SSE bodies as the `data` of their single event.
pub fn parse_body(headers: &actix_web::http::header::HeaderMap, raw: &[u8]) -> Value {
    let text = String::from_utf8_lossy(raw);
    let is_sse = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("text/event-stream"));
    let payload = if is_sse {
        text.lines()
            .filter_map(|line| line.strip_prefix("data: "))
            .collect::<Vec<_>>()
            .join("")
    } else {
        text.into_owned()
    };
    serde_json::from_str(&payload).unwrap_or(Value::Null)
}

pub async fn call(ep: &McpEndpoint<Toy>, req: &Req) -> Reply {
    let app = test::init_service(App::new().configure(|cfg| ep.configure(cfg))).await;
    let resp = test::call_service(&app, to_test_request(req).to_request()).await;
    read_reply(resp).await
}

pub fn initialize_body(version: &str) -> Value {
    mcp::initialize(0, version, json!({}), ("test", "0.1"))
}

/// Runs `initialize` for `version`; returns the session id.
pub async fn open_session(ep: &McpEndpoint<Toy>, version: &str, token: &str) -> String {
    let reply = call(
        ep,
        &Req::json(&initialize_body(version)).header("authorization", &format!("Bearer {token}")),
    )
    .await;
    assert_eq!(reply.status, 200, "initialize: {}", reply.json);
    reply
        .header("mcp-session-id")
        .unwrap_or_else(|| panic!("no session id in {:?}", reply.headers))
}

pub fn request(id: Value, method: &str, params: Value) -> Value {
    mcp::request(id, method, params)
}

/// A 2026-07-28 request body with the full `_meta` envelope.
pub fn modern(id: Value, method: &str, mut params: Value) -> Value {
    if !params.is_object() {
        params = json!({});
    }
    params["_meta"] = json!({
        PV_KEY: MODERN,
        CAPS_KEY: {},
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "0.1"}
    });
    request(id, method, params)
}

pub const GENEROUS: Duration = Duration::from_secs(30);
