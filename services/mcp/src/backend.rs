//! What a product implements to be served over MCP.

use async_trait::async_trait;
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
}

/// An immutable list of tools plus the transport's cached renderings of it.
#[derive(Debug)]
pub struct ToolSet {
    tools: Vec<ToolDef>,
    /// Rendered `tools` arrays, filled lazily by the transport, one per
    /// rendering flavour (see the transport for the index meaning).
    pub(crate) rendered: [std::sync::OnceLock<Arc<serde_json::value::RawValue>>; 4],
}

impl ToolSet {
    pub fn new(tools: Vec<ToolDef>) -> Self {
        Self {
            tools,
            rendered: Default::default(),
        }
    }

    pub fn tools(&self) -> &[ToolDef] {
        &self.tools
    }

    pub fn get(&self, name: &str) -> Option<&ToolDef> {
        self.tools.iter().find(|t| t.name == name)
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
    /// The exact bytes of `arguments` as received, for hashing in audit
    /// records without re-serialising or logging them.
    pub raw_arguments: &'a [u8],
}

/// A tool's answer. `is_error` marks a tool execution error (bad
/// arguments, conflict, unavailable board): the agent sees it and can act.
#[derive(Debug, Clone)]
pub struct ToolOutput {
    /// Conforms to the tool's `outputSchema` when `is_error` is false.
    pub structured: Option<Value>,
    /// Human/model-readable text; from 2025-06-18 on, the structured JSON is
    /// also sent as a text block when this is empty.
    pub text: String,
    pub is_error: bool,
}

/// A product served over MCP.
#[async_trait]
pub trait ToolBackend: Send + Sync + 'static {
    type Principal: Principal;

    fn identity(&self) -> &ServerIdentity;

    /// Resolves the bearer credential (`None` when absent).
    async fn authenticate(&self, bearer: Option<&str>) -> Result<Self::Principal, AuthRejection>;

    /// The tools this principal may see, in a stable order. Cheap: return a
    /// shared set built once (its wire rendering is cached inside), never
    /// rebuild per request.
    fn tools(&self, principal: &Self::Principal) -> Arc<ToolSet>;

    /// Runs one tool. Unknown tool names never reach here (the transport
    /// answers them from [`Self::tools`]).
    async fn call_tool(&self, principal: &Self::Principal, call: ToolCall<'_>) -> ToolOutput;
}
