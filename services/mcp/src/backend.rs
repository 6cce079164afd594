//! What a product implements to be served over MCP.

use crate::peer::Peer;
use crate::wire::RpcError;
use async_trait::async_trait;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::sync::Arc;

/// Who the server says it is (`serverInfo`). `version` is mandatory: strict
/// clients reject an `initialize` result without it.
#[derive(Debug, Clone)]
pub struct ServerIdentity {
    pub name: String,
    pub version: String,
    pub title: Option<String>,
    pub instructions: Option<String>,
}

/// One tool as the backend defines it. Schemas are JSON Schema objects; the
/// transport renders them per negotiated revision (e.g. no `outputSchema`
/// before 2025-06-18) and caches the rendering.
#[derive(Debug, Clone)]
pub struct ToolDef {
    /// 1-128 characters of `[A-Za-z0-9_.-]`.
    pub name: String,
    pub title: Option<String>,
    pub description: String,
    /// Always an object schema (`"type": "object"`).
    pub input_schema: Value,
    pub output_schema: Option<Value>,
    /// `readOnlyHint`, `destructiveHint`, `idempotentHint`, `openWorldHint`.
    pub annotations: Option<Value>,
    /// Where the tool's results come from, and so whether a release build
    /// checks each one against `output_schema`.
    pub results: ResultOrigin,
}

/// Where a tool's results come from. The engine checks every
/// `structuredContent` against the tool's `outputSchema` before sending
/// it, except, in release builds, the results this process builds itself
/// from typed values: their shapes are fixed by the code and proven by
/// the test suite, which runs debug builds, where every result is still
/// checked. A malformed result is then a defect the tests catch, not
/// input to distrust at run time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultOrigin {
    /// Built by this process from typed values (the board's own tools).
    Typed,
    /// Relayed from elsewhere (an upstream server): checked on every call.
    Relayed,
}

impl ResultOrigin {
    /// Whether a result of this origin is checked against its schema in
    /// this build.
    pub(crate) fn checked_at_run_time(self) -> bool {
        self == Self::Relayed || cfg!(debug_assertions)
    }
}

/// An immutable list of tools plus the transport's cached renderings of
/// it and its compiled schemas.
#[derive(Debug)]
pub struct ToolSet {
    tools: Vec<ToolDef>,
    /// Rendered `tools` arrays, filled lazily by the transport on first
    /// use, one per [`crate::Revision`] (indexed by position in
    /// `Revision::ALL`). A list that fails validation is never cached.
    pub(crate) rendered: [std::sync::OnceLock<Arc<serde_json::value::RawValue>>; 4],
    /// Each tool's input and output schema compiled on first use, so a
    /// call validates without compiling (sets are shared and cached by
    /// the backends).
    compiled: Box<[[std::sync::OnceLock<CompiledSchema>; 2]]>,
    /// Whether each tool's input schema marks an argument with
    /// `x-mcp-header`, found once here: a call to a tool without one has
    /// no `Mcp-Param-*` header to check, and walking its schema on every
    /// call showed in the hot path's profile.
    mirrors_headers: Box<[bool]>,
}

/// A schema compiled, or why it cannot be used.
type CompiledSchema = Result<crate::validate::Compiled, crate::validate::Violation>;

impl ToolSet {
    pub fn new(tools: Vec<ToolDef>) -> Self {
        let compiled = tools.iter().map(|_| Default::default()).collect();
        let mirrors_headers = tools
            .iter()
            .map(|t| crate::param_headers::declares_any(&t.input_schema))
            .collect();
        Self {
            tools,
            rendered: Default::default(),
            compiled,
            mirrors_headers,
        }
    }

    /// Whether the tool at `index` has arguments mirrored as
    /// `Mcp-Param-*` headers (see [`crate::param_headers`]).
    pub(crate) fn mirrors_headers(&self, index: usize) -> bool {
        self.mirrors_headers.get(index).copied().unwrap_or(true)
    }

    pub fn tools(&self) -> &[ToolDef] {
        &self.tools
    }

    pub fn get(&self, name: &str) -> Option<&ToolDef> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// Where the tool `name` is in [`Self::tools`].
    pub(crate) fn position(&self, name: &str) -> Option<usize> {
        self.tools.iter().position(|t| t.name == name)
    }

    /// Checks a call's arguments against the input schema of the tool at
    /// `index`.
    pub(crate) fn check_input(
        &self,
        index: usize,
        value: &Value,
    ) -> Result<(), crate::validate::Violation> {
        let schema = &self.tools[index].input_schema;
        self.compiled_at(index, 0, schema)?.check(schema, value)
    }

    /// Checks structured content against the output schema of the tool
    /// at `index` (which must have one).
    pub(crate) fn check_output(
        &self,
        index: usize,
        value: &Value,
    ) -> Result<(), crate::validate::Violation> {
        let Some(schema) = &self.tools[index].output_schema else {
            return Ok(());
        };
        self.compiled_at(index, 1, schema)?.check(schema, value)
    }

    /// Checks `value` against the output schema of the tool called
    /// `name`, as the engine does before sending a result: for tests that
    /// prove a typed tool's every shape (release builds skip the check for
    /// [`ResultOrigin::Typed`] tools). The error names the path and the
    /// problem.
    pub fn check_result(&self, name: &str, value: &Value) -> Result<(), String> {
        let index = self
            .tools
            .iter()
            .position(|t| t.name == name)
            .ok_or_else(|| format!("no tool {name:?} in this set"))?;
        self.check_output(index, value)
            .map_err(|violation| violation.to_string())
    }

    fn compiled_at(
        &self,
        index: usize,
        which: usize,
        schema: &Value,
    ) -> Result<&crate::validate::Compiled, crate::validate::Violation> {
        self.compiled[index][which]
            .get_or_init(|| crate::validate::compile(schema))
            .as_ref()
            .map_err(Clone::clone)
    }
}

/// The authenticated caller of a request, as the backend resolved it.
pub trait Principal: Clone + Send + Sync + 'static {
    /// Stable id legacy sessions are bound to (e.g. the grant id): a session
    /// id minted for one principal is refused for any other.
    fn session_binding(&self) -> &str;
}

/// Why a request's credentials were refused. The transport maps these to
/// HTTP statuses (401 missing, 403 refused, 503 unavailable) and, on stdio,
/// to a JSON-RPC error on the first request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthRejection {
    /// No `Authorization: Bearer` credential at all.
    Missing,
    /// A credential was presented and refused: unknown, expired, revoked,
    /// or for another run. The message says which, without echoing it.
    Refused(String),
    /// The credential could not be checked right now (registry down); retryable.
    Unavailable(String),
}

/// A `tools/call` as the backend sees it, after protocol validation.
#[derive(Debug)]
pub struct ToolCall<'a> {
    pub name: &'a str,
    /// The `arguments` object (empty when the client sent none).
    pub arguments: &'a Map<String, Value>,
    /// The exact bytes of `arguments` as received (`{}` when the client
    /// sent none), for hashing in audit records without re-serialising or
    /// logging them.
    pub raw_arguments: &'a [u8],
    /// The agent: in a 2025 session what it declared in `initialize`, and
    /// (over HTTP, when [`ToolBackend::may_relay`] said so) its response
    /// stream for requests sent before the result; in 2026-07-28 what the
    /// request's `_meta` declares (no stream).
    pub peer: Option<&'a Peer>,
    /// 2026-07-28 only: a retry's `inputResponses` (as received) and
    /// `requestState` (a JSON string, as received), answering an
    /// `input_required` result ([`RelayAnswer::InputRequired`]).
    pub input_responses: Option<&'a RawValue>,
    pub request_state: Option<&'a RawValue>,
    /// 2025 sessions only: the request's `_meta.progressToken` (as
    /// received), when the agent asked for progress notifications; a
    /// backend sends `notifications/progress` on [`Self::peer`]'s stream
    /// only then.
    pub progress_token: Option<&'a RawValue>,
}

/// A JSON-RPC response the agent sent (answering a request a backend sent
/// it through [`Peer::send`]): exactly one of `result` and `error`, as
/// received.
#[derive(Debug, Clone, Copy)]
pub struct ClientResponse<'a> {
    pub id: &'a RawValue,
    pub result: Option<&'a RawValue>,
    pub error: Option<&'a RawValue>,
}

/// Why the protocol layer refused a `tools/call` before it reached
/// [`ToolBackend::call_tool`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalKind {
    /// The tool is not in this caller's [`ToolBackend::tools`].
    NotListed,
    /// The arguments violate the tool's `inputSchema`.
    InvalidArguments,
    /// 2026-07-28: the `Mcp-Param-*` headers do not mirror the arguments
    /// the tool's `inputSchema` marks with `x-mcp-header`.
    HeaderMismatch,
}

/// A `tools/call` the protocol layer refused, for backends that account
/// for every call (audit trails).
#[derive(Debug)]
pub struct RefusedCall<'a> {
    pub name: &'a str,
    pub raw_arguments: &'a [u8],
    pub kind: RefusalKind,
}

/// A tool's structured result, serialised at most once: a backend that
/// counts the answer's bytes (the board's result budget) and the renderer
/// that sends them read the same string, instead of each walking the
/// value (the second serialisation was 2-5% of `get_issue`'s instructions
/// in a release build, a third in a debug build).
/// The value cannot be changed once wrapped (it is read through `Deref`),
/// so the string stays its own. Shared, not copied, when cloned: an answer
/// kept to be given again (the board's recent `get_issue` answers) costs
/// its clone a count.
#[derive(Debug, Clone)]
pub struct StructuredContent(std::sync::Arc<Serialised>);

#[derive(Debug)]
struct Serialised {
    value: Value,
    json: std::sync::OnceLock<String>,
}

impl StructuredContent {
    pub fn new(value: Value) -> Self {
        Self(std::sync::Arc::new(Serialised {
            value,
            json: std::sync::OnceLock::new(),
        }))
    }

    /// The value as compact JSON, serialised on first use straight into
    /// bytes: `Value`'s `Display` (`to_string`) goes through the
    /// formatter a few bytes at a time and cost about twice as much in a
    /// release build.
    pub fn json(&self) -> &str {
        self.0.json.get_or_init(|| {
            serde_json::to_string(&self.0.value)
                .expect("a serde_json::Value has string keys and always serialises")
        })
    }

    /// The value: moved out when this is its only holder, copied otherwise.
    pub fn into_value(self) -> Value {
        match std::sync::Arc::try_unwrap(self.0) {
            Ok(own) => own.value,
            Err(shared) => shared.value.clone(),
        }
    }
}

impl From<Value> for StructuredContent {
    fn from(value: Value) -> Self {
        Self::new(value)
    }
}

/// The JSON as written ([`StructuredContent::json`]).
impl std::fmt::Display for StructuredContent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.json())
    }
}

impl std::ops::Deref for StructuredContent {
    type Target = Value;

    fn deref(&self) -> &Value {
        &self.0.value
    }
}

/// A result's text block: the text, and its form as a JSON string (quoted
/// and escaped), made on first use. Shared, not copied, when cloned, like
/// [`StructuredContent`]: an answer kept to be given again (the board's
/// recent `get_issue` answers and `list_issues` pages) is escaped once,
/// not on every call (the escaping was about 3% of a kept `get_issue`'s
/// instructions, more for a page). Reads as a `str`; empty text holds
/// nothing.
#[derive(Clone, Default)]
pub struct TextContent(Option<std::sync::Arc<Text>>);

struct Text {
    text: String,
    json: std::sync::OnceLock<String>,
}

impl TextContent {
    pub fn new(text: String) -> Self {
        if text.is_empty() {
            return Self(None);
        }
        Self(Some(std::sync::Arc::new(Text {
            text,
            json: std::sync::OnceLock::new(),
        })))
    }

    pub fn as_str(&self) -> &str {
        self.0.as_ref().map_or("", |text| text.text.as_str())
    }

    /// The text as a JSON string, quotes included, made on first use.
    pub fn json(&self) -> &str {
        match &self.0 {
            None => "\"\"",
            Some(text) => text.json.get_or_init(|| {
                serde_json::to_string(&text.text).expect("a string always serialises")
            }),
        }
    }

    /// The text: moved out when this is its only holder, copied otherwise.
    pub fn into_string(self) -> String {
        match self.0.map(std::sync::Arc::try_unwrap) {
            None => String::new(),
            Some(Ok(own)) => own.text,
            Some(Err(shared)) => shared.text.clone(),
        }
    }
}

impl std::ops::Deref for TextContent {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl std::fmt::Display for TextContent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Debug for TextContent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl From<String> for TextContent {
    fn from(text: String) -> Self {
        Self::new(text)
    }
}

impl From<&str> for TextContent {
    fn from(text: &str) -> Self {
        Self::new(text.to_owned())
    }
}

impl PartialEq<&str> for TextContent {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for TextContent {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other.as_str()
    }
}

/// A tool's answer. `is_error` marks a tool execution error (bad
/// arguments, conflict, unavailable board): the agent sees it and can act.
#[derive(Debug, Clone)]
pub struct ToolOutput {
    /// Present exactly when the tool declares an `outputSchema` and
    /// `is_error` is false, and then conforming to it. From 2025-06-18 on
    /// any other combination is answered with `-32603` (logged), never
    /// sent; 2025-03-26 has no structured content and ignores it.
    pub structured: Option<StructuredContent>,
    /// Human/model-readable text, sent as the one text block. When empty,
    /// the structured JSON is sent as the text block instead.
    pub text: TextContent,
    pub is_error: bool,
    /// Not a tool result: the call needs the agent's input first, or was
    /// refused as a request (see [`RelayAnswer`]). `None` for every
    /// ordinary result.
    pub relay: Option<RelayAnswer>,
    /// When not empty, the result's content blocks in order, sent instead
    /// of the one text block made of `text`: an upstream's result relayed
    /// with its image, audio, embedded resource and `resource_link`
    /// blocks (`text` then holds its text blocks joined, for the
    /// backend's own reading). Each block is checked before it leaves
    /// (`validate::result`); a `resource_link` goes to a 2025-03-26 agent,
    /// whose revision has none, as a text block naming the link.
    pub content: Vec<Value>,
}

/// What a call that relays an upstream's input requests answers instead
/// of a tool result.
#[derive(Debug, Clone)]
pub enum RelayAnswer {
    /// 2026-07-28: `{"resultType":"input_required", "inputRequests",
    /// "requestState"}`; the requests as checked (exact bytes), the state
    /// sealed by the backend. In a 2025 session this is an internal error.
    InputRequired {
        input_requests: Box<RawValue>,
        request_state: String,
    },
    /// The request itself is refused (a forged or expired `requestState`,
    /// refused `inputResponses`): this JSON-RPC error is the answer.
    Refused(RpcError),
}

/// A product served over MCP. Who the caller is comes from outside: the
/// embedder resolves the principal (see [`Authenticate`] for backends that
/// resolve bearer credentials themselves) and hands it to the engine.
#[async_trait]
pub trait ToolBackend: Send + Sync + 'static {
    type Principal: Principal;

    fn identity(&self) -> &ServerIdentity;

    /// The tools this principal may see, in a stable order. Cheap: return a
    /// shared set built once (its wire rendering is cached inside), never
    /// rebuild per request.
    fn tools(&self, principal: &Self::Principal) -> Arc<ToolSet>;

    /// Runs one tool. Unknown tool names never reach here (the transport
    /// answers them from [`Self::tools`]), and `arguments` already passed
    /// the tool's `inputSchema` (the subset the validator implements:
    /// `type`, `enum`, `const`, `properties`, `required`,
    /// `additionalProperties`, string lengths, numeric bounds, `items`,
    /// `minItems`/`maxItems`, `uniqueItems`). A panic here is answered
    /// with `-32603`.
    async fn call_tool(&self, principal: &Self::Principal, call: ToolCall<'_>) -> ToolOutput;

    /// Told about every `tools/call` the protocol layer refused itself, so
    /// the backend can audit it. For [`RefusalKind::NotListed`], a returned
    /// message replaces the generic "unknown tool" text (e.g. to name the
    /// missing permission). Must not block.
    fn call_refused(&self, _principal: &Self::Principal, _call: RefusedCall<'_>) -> Option<String> {
        None
    }
    /// Asked before each request of a JSON-RPC batch after the first: the
    /// transport admitted the batch as one request, so a backend that
    /// meters requests (a run's rate limit) or can end mid-batch (a revoked
    /// run) charges and checks the others here. An error answers that
    /// element, correlated with its id, instead of running it. Default:
    /// every element is admitted.
    async fn admit_batch_element(&self, _principal: &Self::Principal) -> Result<(), RpcError> {
        Ok(())
    }

    /// Whether this principal's tool calls may send the agent requests
    /// before their result (an upstream relay): only then does the HTTP
    /// transport run a 2025 session's request so that its response can
    /// become an event stream. Default: never.
    fn may_relay(&self, _principal: &Self::Principal) -> bool {
        false
    }

    /// Whether this principal's tool calls may be held (a call waiting for
    /// a person's approval) and send progress notifications while held:
    /// then, like [`Self::may_relay`], a 2025 session's `tools/call` runs
    /// so that its response can become an event stream. Default: never.
    fn may_hold(&self, _principal: &Self::Principal) -> bool {
        false
    }

    /// A response the agent sent in its 2025 session. An error is
    /// answered to the agent (HTTP 400 with the JSON-RPC error, id null:
    /// a response has no reply of its own). Default: accepted and
    /// dropped (this server sends no requests).
    async fn client_response(
        &self,
        _principal: &Self::Principal,
        _peer: &Peer,
        _response: ClientResponse<'_>,
    ) -> Result<(), RpcError> {
        Ok(())
    }
}

/// A backend that resolves bearer credentials into its principals itself
/// (the studio endpoint, stdio). A run gateway resolves them before the
/// endpoint sees the request, so its backend does not implement this.
#[async_trait]
pub trait Authenticate: ToolBackend {
    /// Resolves the bearer credential (`None` when absent). Called for
    /// every HTTP request (revocation takes effect at once) and once at
    /// start-up on stdio.
    async fn authenticate(&self, bearer: Option<&str>) -> Result<Self::Principal, AuthRejection>;

    /// Admits a request of an authenticated principal (its rate limit);
    /// a refusal is answered as is, correlated with the request's id.
    /// Called over HTTP after [`Self::authenticate`]. Default: admitted.
    async fn admit(&self, _principal: &Self::Principal) -> Result<(), crate::Refusal> {
        Ok(())
    }
}
