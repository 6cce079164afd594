//! The transport-agnostic core: one message (or batch) in, one outcome
//! out. HTTP and stdio differ only in how they build the [`Context`] and
//! what they do with the [`Outcome`].
//!
//! Era selection (one endpoint serves both): `initialize` opens a legacy
//! session; a request naming its protocol version in `_meta` is served
//! statelessly as 2026-07-28; otherwise a presented session decides, and
//! without one a modern `MCP-Protocol-Version` header or `server/discover`
//! selects the modern era, anything else is a legacy request that lacks
//! its session.

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use futures_util::FutureExt;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::backend::{
    ClientResponse, RefusalKind, RefusedCall, RelayAnswer, ToolBackend, ToolCall, ToolOutput,
};
use crate::code::{self, ErrorCode};
use crate::method::method_label as label;
use crate::peer::Peer;
use crate::relay::AgentCapabilities;
use crate::render;
use crate::revision::Revision;
use crate::session::SessionRejection;
use crate::validate::{self, Call, HeaderSlot, Incoming, Message, RequestHeaders};
use crate::wire::{self, ParamsHead, ResultJson, RpcError};

/// The legacy session a message arrives in, as the transport found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionState {
    /// No session presented (HTTP: no `Mcp-Session-Id`; stdio: no
    /// `initialize` yet).
    Missing,
    Active(Revision),
    Rejected(SessionRejection),
}

/// Everything about a message that is not in its bytes.
#[derive(Debug)]
pub struct Context<'a, P> {
    pub principal: &'a P,
    pub session: SessionState,
    /// HTTP request headers MCP mirrors from the body; `None` on stdio.
    pub headers: Option<&'a RequestHeaders>,
    /// The agent of an active 2025 session (see [`Peer`]); `None`
    /// otherwise.
    pub peer: Option<&'a Peer>,
}

/// What the transport should send back.
#[derive(Debug)]
pub struct Outcome {
    /// HTTP status (stdio ignores it).
    pub status: u16,
    /// The JSON-RPC response (or batch of them); `None` means "accepted,
    /// nothing to say" (HTTP 202).
    pub body: Option<Bytes>,
    /// An `initialize` succeeded: the transport starts a session at this
    /// revision, for an agent that declared these capabilities.
    pub started: Option<(Revision, AgentCapabilities)>,
    pub summary: Summary,
}

/// What the request log records: never arguments, tokens or client text.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// A known method name, or `other`.
    pub method: &'static str,
    /// Only names of tools that exist for the caller.
    pub tool: Option<String>,
    pub revision: Option<Revision>,
    /// `ok`, `tool_error`, `error` or `accepted`; `stream` for a call
    /// answered as an event stream, until it ends.
    pub outcome: &'static str,
    pub code: Option<ErrorCode>,
    /// A streamed call's final summary, set when its stream ends (after
    /// the last event was produced), for a request log written then.
    pub settled: Option<std::sync::Arc<std::sync::OnceLock<Summary>>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Era {
    Legacy,
    Modern,
}

/// HTTP status for a JSON-RPC error. Modern-era statuses follow the
/// 2026-07-28 transport (400 for malformed, 404 for unknown methods);
/// legacy errors on well-formed requests travel with 200, as the 2025
/// SDK servers do.
fn status_for(era: Era, error_code: ErrorCode) -> u16 {
    match (era, error_code) {
        (_, code::PARSE_ERROR | code::INVALID_REQUEST) => 400,
        (
            Era::Modern,
            code::INVALID_PARAMS | code::HEADER_MISMATCH | code::UNSUPPORTED_PROTOCOL_VERSION,
        ) => 400,
        (Era::Modern, code::METHOD_NOT_FOUND) => 404,
        _ => 200,
    }
}

fn missing_session() -> RpcError {
    RpcError::invalid_request(
        "Bad Request: no session: send `initialize` first (over HTTP, then send the Mcp-Session-Id it returned), or name the protocol version in params._meta (2026-07-28)",
    )
}

fn session_not_found(reason: SessionRejection) -> RpcError {
    let why = match reason {
        SessionRejection::Malformed | SessionRejection::Forged => "unknown",
        SessionRejection::Expired => "expired",
        SessionRejection::Ended => "ended",
    };
    RpcError::invalid_request(format!(
        "Session not found: this Mcp-Session-Id is {why}; send `initialize` to start a new session"
    ))
}

/// A handler's answer to one request.
type Answer = Result<ResultJson, RpcError>;

/// One processed message, before it becomes an [`Outcome`].
struct Step<'a> {
    status: u16,
    /// `None`: accepted without a response.
    reply: Option<(Option<&'a RawValue>, Answer)>,
    started: Option<(Revision, AgentCapabilities)>,
}

impl<'a> Step<'a> {
    fn accepted() -> Self {
        Self {
            status: 202,
            reply: None,
            started: None,
        }
    }

    fn error(status: u16, id: Option<&'a RawValue>, error: RpcError) -> Self {
        Self {
            status,
            reply: Some((id, Err(error))),
            started: None,
        }
    }

    fn answer(era: Era, id: &'a RawValue, answer: Answer) -> Self {
        let status = match &answer {
            Ok(_) => 200,
            Err(e) => status_for(era, e.code),
        };
        Self {
            status,
            reply: Some((Some(id), answer)),
            started: None,
        }
    }
}

/// The protocol core shared by every transport.
pub struct Engine<B: ToolBackend> {
    backend: Arc<B>,
    list_ttl_ms: u64,
    /// Most elements one batch may have; a longer batch is refused whole.
    max_batch_len: usize,
    /// Once a batch's response holds this many bytes, its remaining
    /// requests are answered [`code::RESPONSE_BUDGET`] without running.
    max_batch_response_bytes: usize,
    /// The `server/discover` result per revision, rendered at the first
    /// call: it is the same for every caller (`cacheScope` "public") and
    /// carries the server's instructions, a couple of kilobytes built and
    /// escaped again on every call otherwise.
    discovered: [OnceLock<ResultJson>; Revision::ALL.len()],
}

impl<B: ToolBackend> std::fmt::Debug for Engine<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("list_ttl_ms", &self.list_ttl_ms)
            .finish_non_exhaustive()
    }
}

impl<B: ToolBackend> Engine<B> {
    /// Default freshness hint for 2026-07-28 list results.
    pub const DEFAULT_LIST_TTL: Duration = Duration::from_secs(60);

    pub fn new(backend: Arc<B>) -> Self {
        Self {
            backend,
            list_ttl_ms: Self::DEFAULT_LIST_TTL.as_millis() as u64,
            max_batch_len: crate::McpSettings::DEFAULT_MAX_BATCH_LEN,
            max_batch_response_bytes: crate::McpSettings::DEFAULT_MAX_BATCH_RESPONSE_BYTES,
            discovered: Default::default(),
        }
    }

    /// Bounds the work of one batch: at most `max_len` elements, and no
    /// further element run once the response holds `max_response_bytes`
    /// (so a response is at most that plus one element's answer).
    pub fn with_batch_limits(mut self, max_len: usize, max_response_bytes: usize) -> Self {
        self.max_batch_len = max_len.max(1);
        self.max_batch_response_bytes = max_response_bytes.max(1);
        self
    }

    /// Sets the `ttlMs` hint on 2026-07-28 `tools/list` and
    /// `server/discover` results.
    pub fn with_list_ttl(mut self, ttl: Duration) -> Self {
        self.list_ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        self
    }

    pub fn backend(&self) -> &Arc<B> {
        &self.backend
    }

    /// Handles one transport message: a single JSON-RPC message or a batch.
    pub async fn handle_message(&self, ctx: &Context<'_, B::Principal>, bytes: &[u8]) -> Outcome {
        let mut summary = Summary::default();
        let outcome = match validate::parse(bytes) {
            Err(error) => single(Step::error(400, None, error), &mut summary),
            Ok(Incoming::Single(env)) => {
                let step = self.single(ctx, &env, &mut summary).await;
                single(step, &mut summary)
            }
            Ok(Incoming::Batch(elements)) => self.batch(ctx, &elements, &mut summary).await,
        };
        Outcome { summary, ..outcome }
    }

    async fn single<'a>(
        &self,
        ctx: &Context<'_, B::Principal>,
        env: &wire::Envelope<'a>,
        summary: &mut Summary,
    ) -> Step<'a> {
        let message = match validate::envelope(env) {
            Ok(message) => message,
            Err(refusal) => return Step::error(400, refusal.id, refusal.error),
        };
        match message {
            Message::Response { id, result, error } => {
                summary.method = "response";
                self.response(ctx, ClientResponse { id, result, error })
                    .await
            }
            Message::Notification { method, params } => {
                self.notification(ctx, &method, params, summary)
            }
            Message::Request { id, method, params } => {
                self.request(ctx, id, &method, params, summary).await
            }
        }
    }

    /// Clients answering server requests (relayed ones, sent through a
    /// [`Peer`]): accepted (202) inside a session once the backend took
    /// them; a refused one is answered 400 with its error.
    async fn response<'a>(
        &self,
        ctx: &Context<'_, B::Principal>,
        response: ClientResponse<'_>,
    ) -> Step<'a> {
        match ctx.session {
            SessionState::Active(_) => {
                let Some(peer) = ctx.peer else {
                    return Step::accepted();
                };
                let answered =
                    AssertUnwindSafe(self.backend.client_response(ctx.principal, peer, response))
                        .catch_unwind()
                        .await
                        .unwrap_or_else(|_| {
                            tracing::error!("client_response panicked; answering -32603");
                            Err(RpcError::internal("Internal error"))
                        });
                match answered {
                    Ok(()) => Step::accepted(),
                    Err(error) => Step::error(400, None, error),
                }
            }
            SessionState::Missing => Step::error(400, None, missing_session()),
            SessionState::Rejected(reason) => Step::error(404, None, session_not_found(reason)),
        }
    }

    fn notification<'a>(
        &self,
        ctx: &Context<'_, B::Principal>,
        method: &str,
        params: Option<&'a RawValue>,
        summary: &mut Summary,
    ) -> Step<'a> {
        summary.method = label(method);
        if !method.starts_with("notifications/") {
            // Running a request method whose answer nobody will read would
            // silently drop its outcome; refuse instead.
            return Step::error(
                400,
                None,
                RpcError::invalid_request(
                    "Invalid Request: only notifications/* methods may be sent without an `id`",
                ),
            );
        }
        let modern_meta = validate::params_head(params)
            .ok()
            .and_then(|head| validate::modern_meta(&head));
        match era(method, modern_meta.is_some(), ctx) {
            Era::Modern => Step::accepted(),
            Era::Legacy => match ctx.session {
                SessionState::Active(revision) => {
                    summary.revision = Some(revision);
                    match validate::legacy_protocol_header(ctx.headers, revision) {
                        Ok(()) => Step::accepted(),
                        Err(error) => Step::error(400, None, error),
                    }
                }
                SessionState::Missing => Step::error(400, None, missing_session()),
                SessionState::Rejected(reason) => Step::error(404, None, session_not_found(reason)),
            },
        }
    }

    async fn request<'a>(
        &self,
        ctx: &Context<'_, B::Principal>,
        id: &'a RawValue,
        method: &str,
        params: Option<&'a RawValue>,
        summary: &mut Summary,
    ) -> Step<'a> {
        summary.method = label(method);
        let head = validate::params_head(params);
        let modern_meta = head.as_ref().ok().and_then(validate::modern_meta);
        let era = era(method, modern_meta.is_some(), ctx);
        if era == Era::Modern {
            let head = match head {
                Ok(head) => head,
                Err(error) => return Step::answer(era, id, Err(error)),
            };
            let (revision, meta) =
                match validate::modern_envelope(method, &head, modern_meta, ctx.headers) {
                    Ok(envelope) => envelope,
                    Err(error) => return Step::answer(era, id, Err(error)),
                };
            summary.revision = Some(revision);
            let answer = match validate::request(revision, method, &head) {
                Ok(mut call) => {
                    if let Call::Tool { declared, .. } = &mut call {
                        *declared = meta.client_capabilities;
                    }
                    self.execute(ctx, revision, call, summary).await
                }
                Err(error) => Err(error),
            };
            return Step::answer(era, id, answer);
        }

        if method == "initialize" {
            let answer =
                head.and_then(|head| validate::request(Revision::LATEST_LEGACY, method, &head));
            return match answer {
                Ok(Call::Initialize {
                    requested,
                    capabilities,
                }) => {
                    let revision = Revision::negotiate_legacy(&requested);
                    summary.revision = Some(revision);
                    let answer = self.initialize(revision);
                    let ok = answer.is_ok();
                    let mut step = Step::answer(era, id, answer);
                    if ok {
                        step.started = Some((
                            revision,
                            AgentCapabilities::from_raw(revision, capabilities),
                        ));
                    }
                    step
                }
                Ok(_) => Step::answer(era, id, Err(RpcError::internal("Internal error"))),
                Err(error) => Step::answer(era, id, Err(error)),
            };
        }

        let revision = match ctx.session {
            SessionState::Active(revision) => revision,
            SessionState::Missing => return Step::error(400, Some(id), missing_session()),
            SessionState::Rejected(reason) => {
                return Step::error(404, Some(id), session_not_found(reason));
            }
        };
        summary.revision = Some(revision);
        if let Err(error) = validate::legacy_protocol_header(ctx.headers, revision) {
            return Step::error(400, Some(id), error);
        }
        let answer = self.legacy_call(ctx, revision, method, head, summary).await;
        Step::answer(era, id, answer)
    }

    async fn legacy_call(
        &self,
        ctx: &Context<'_, B::Principal>,
        revision: Revision,
        method: &str,
        head: Result<ParamsHead<'_>, RpcError>,
        summary: &mut Summary,
    ) -> Answer {
        let head = head?;
        match validate::request(revision, method, &head)? {
            Call::Initialize { .. } => Err(RpcError::invalid_request(
                "Invalid Request: `initialize` must be sent on its own, not inside a batch",
            )),
            call => self.execute(ctx, revision, call, summary).await,
        }
    }

    async fn batch(
        &self,
        ctx: &Context<'_, B::Principal>,
        elements: &[&RawValue],
        summary: &mut Summary,
    ) -> Outcome {
        summary.method = "batch";
        let refuse = |status: u16, error: RpcError, summary: &mut Summary| {
            single(Step::error(status, None, error), summary)
        };
        let revision = match ctx.session {
            SessionState::Active(revision) if revision.allows_batches() => revision,
            SessionState::Active(revision) => {
                return refuse(
                    400,
                    RpcError::invalid_request(format!(
                        "Invalid Request: JSON-RPC batches were removed after 2025-03-26; this session speaks {revision}"
                    )),
                    summary,
                );
            }
            SessionState::Missing => {
                return refuse(
                    400,
                    RpcError::invalid_request(
                        "Invalid Request: JSON-RPC batches are only accepted inside a 2025-03-26 session",
                    ),
                    summary,
                );
            }
            SessionState::Rejected(reason) => {
                return refuse(404, session_not_found(reason), summary);
            }
        };
        summary.revision = Some(revision);
        if elements.is_empty() {
            return refuse(
                400,
                RpcError::invalid_request("Invalid Request: empty batch"),
                summary,
            );
        }
        if elements.len() > self.max_batch_len {
            return refuse(
                400,
                RpcError::invalid_request(format!(
                    "Invalid Request: this batch has {} elements; at most {} are accepted in one batch (send the rest in further batches or singly); nothing was executed",
                    elements.len(),
                    self.max_batch_len
                )),
                summary,
            );
        }
        if let Err(error) = validate::legacy_protocol_header(ctx.headers, revision) {
            return refuse(400, error, summary);
        }
        let mut out = Vec::new();
        let mut element_summary = Summary::default();
        // The transport admitted the batch as one request: that covers its
        // first request; each further one is admitted by the backend.
        let mut admitted_first = false;
        for raw in elements {
            let reply = match validate::parse_element(raw) {
                Err(error) => Some((None, Err(error))),
                Ok(env) => match validate::envelope(&env) {
                    Err(refusal) => Some((refusal.id, Err(refusal.error))),
                    // Batches are 2025-03-26 only, where the gateway
                    // relays nothing to the agent: accepted, dropped.
                    Ok(Message::Response { .. }) => None,
                    Ok(Message::Notification { method, .. }) => {
                        (!method.starts_with("notifications/")).then(|| {
                            (
                                None,
                                Err(RpcError::invalid_request(
                                    "Invalid Request: only notifications/* methods may be sent without an `id`",
                                )),
                            )
                        })
                    }
                    Ok(Message::Request { id, method, params }) => {
                        let head = validate::params_head(params);
                        let answer = if method == "initialize" {
                            Err(RpcError::invalid_request(
                                "Invalid Request: `initialize` must not be part of a batch",
                            ))
                        } else if out.len() >= self.max_batch_response_bytes {
                            Err(RpcError::new(
                                code::RESPONSE_BUDGET,
                                format!(
                                    "Response budget reached: this batch's response already holds {} bytes (budget {}), so this request was not executed; retry it singly",
                                    out.len(),
                                    self.max_batch_response_bytes
                                ),
                            ))
                        } else if let Err(error) = self.admit_element(ctx, &mut admitted_first).await {
                            Err(error)
                        } else {
                            self.legacy_call(ctx, revision, &method, head, &mut element_summary).await
                        };
                        Some((Some(id), answer))
                    }
                },
            };
            if let Some((id, answer)) = reply {
                out.push(if out.is_empty() { b'[' } else { b',' });
                write_reply(&mut out, id, answer);
            }
        }
        summary.outcome = "ok";
        if out.is_empty() {
            summary.outcome = "accepted";
            return Outcome {
                status: 202,
                body: None,
                started: None,
                summary: Summary::default(),
            };
        }
        out.push(b']');
        Outcome {
            status: 200,
            body: Some(Bytes::from(out)),
            started: None,
            summary: Summary::default(),
        }
    }

    /// Admits one request of a batch: the first is covered by the batch's
    /// own admission, the others ask the backend.
    async fn admit_element(
        &self,
        ctx: &Context<'_, B::Principal>,
        admitted_first: &mut bool,
    ) -> Result<(), RpcError> {
        if !*admitted_first {
            *admitted_first = true;
            return Ok(());
        }
        self.backend.admit_batch_element(ctx.principal).await
    }

    fn initialize(&self, revision: Revision) -> Answer {
        let identity = self.backend.identity();
        validate::identity(identity).map_err(|problem| malformed_result("initialize", &problem))?;
        Ok(render::initialize(revision, identity))
    }

    async fn execute(
        &self,
        ctx: &Context<'_, B::Principal>,
        revision: Revision,
        call: Call<'_>,
        summary: &mut Summary,
    ) -> Answer {
        let identity = self.backend.identity();
        if revision.has_result_type() {
            // Every modern result carries serverInfo in its `_meta`.
            validate::identity(identity)
                .map_err(|problem| malformed_result("result _meta", &problem))?;
        }
        match call {
            Call::Initialize { .. } => self.initialize(revision),
            Call::Ping | Call::SetLevel => Ok(render::empty(revision, identity)),
            Call::Discover => {
                let slot = &self.discovered[revision.index()];
                if let Some(rendered) = slot.get() {
                    return Ok(rendered.clone());
                }
                validate::identity(identity)
                    .map_err(|problem| malformed_result("server/discover", &problem))?;
                let rendered = render::discover(revision, identity, self.list_ttl_ms);
                Ok(slot.get_or_init(|| rendered).clone())
            }
            Call::List => {
                let set = self.backend.tools(ctx.principal);
                let tools = render::tools_array(revision, &set)
                    .map_err(|problem| malformed_result("tools/list", &problem))?;
                Ok(render::tools_list(
                    revision,
                    identity,
                    &tools,
                    self.list_ttl_ms,
                ))
            }
            Call::Tool {
                name,
                arguments,
                meta,
                declared,
                input_responses,
                request_state,
            } => {
                let retry = Retry {
                    meta,
                    declared,
                    input_responses,
                    request_state,
                };
                self.call_tool(ctx, revision, &name, arguments, retry, summary)
                    .await
            }
        }
    }

    async fn call_tool(
        &self,
        ctx: &Context<'_, B::Principal>,
        revision: Revision,
        name: &str,
        raw_arguments: Option<&RawValue>,
        retry: Retry<'_>,
        summary: &mut Summary,
    ) -> Answer {
        let set = self.backend.tools(ctx.principal);
        let raw_bytes = raw_arguments.map_or(b"{}".as_slice(), |raw| raw.get().as_bytes());
        let Some(index) = set.position(name) else {
            let refused = RefusedCall {
                name,
                raw_arguments: raw_bytes,
                kind: RefusalKind::NotListed,
            };
            let message = match self.backend.call_refused(ctx.principal, refused) {
                Some(reason) => format!("Invalid params: {reason}"),
                None => format!(
                    "Invalid params: unknown tool {}: it is not one of this caller's tools (see tools/list)",
                    wire::json_string(name)
                ),
            };
            return Err(RpcError::invalid_params(message));
        };
        let tool = &set.tools()[index];
        summary.tool = Some(tool.name.clone());
        let arguments = Value::Object(validate::decode_arguments(raw_arguments)?);
        if let Err(violation) = set.check_input(index, &arguments) {
            self.backend.call_refused(
                ctx.principal,
                RefusedCall {
                    name: &tool.name,
                    raw_arguments: raw_bytes,
                    kind: RefusalKind::InvalidArguments,
                },
            );
            let message = format!(
                "Invalid arguments for tool `{}`: {violation}. Fix the arguments and call the tool again.",
                tool.name
            );
            if !revision.argument_errors_are_tool_errors() {
                return Err(RpcError::invalid_params(format!(
                    "Invalid params: {message}"
                )));
            }
            summary.outcome = "tool_error";
            let output = ToolOutput {
                structured: None,
                text: message.into(),
                is_error: true,
                relay: None,
                content: Vec::new(),
            };
            return Ok(render::call_result(
                revision,
                self.backend.identity(),
                &output,
            ));
        }
        // 2026-07-28 over HTTP: an intermediary may have routed on the
        // `Mcp-Param-*` headers, so they must say what the body says.
        if revision.is_modern()
            && set.mirrors_headers(index)
            && let Some(headers) = ctx.headers
            && let Err(mismatch) =
                crate::param_headers::check(&tool.input_schema, &arguments, &headers.params)
        {
            self.backend.call_refused(
                ctx.principal,
                RefusedCall {
                    name: &tool.name,
                    raw_arguments: raw_bytes,
                    kind: RefusalKind::HeaderMismatch,
                },
            );
            return Err(RpcError::header_mismatch(format!(
                "Header mismatch: {mismatch} (tool `{}`)",
                tool.name
            )));
        }
        let Value::Object(arguments) = arguments else {
            return Err(RpcError::internal("Internal error"));
        };
        // A 2026-07-28 agent declares its capabilities per request.
        let modern = revision.is_modern();
        let modern_peer = modern.then(|| {
            let declared = retry
                .declared
                .map(|caps| AgentCapabilities::from_raw(revision, caps))
                .unwrap_or_default();
            Peer::without_stream(revision, declared)
        });
        let call = ToolCall {
            name: &tool.name,
            arguments: &arguments,
            raw_arguments: raw_bytes,
            peer: modern_peer.as_ref().or(ctx.peer),
            input_responses: retry.input_responses.filter(|_| modern),
            request_state: retry.request_state.filter(|_| modern),
            progress_token: if modern {
                None
            } else {
                retry
                    .meta
                    .and_then(|meta| {
                        serde_json::from_str::<wire::ProgressMeta<'_>>(meta.get()).ok()
                    })
                    .and_then(|meta| meta.progress_token)
            },
        };
        let output = match AssertUnwindSafe(self.backend.call_tool(ctx.principal, call))
            .catch_unwind()
            .await
        {
            Ok(output) => output,
            Err(_) => {
                tracing::error!(tool = %tool.name, "tool panicked; answering -32603");
                return Err(RpcError::internal(
                    "Internal error: the tool failed unexpectedly; the call may not have taken effect",
                ));
            }
        };
        match &output.relay {
            None => {}
            Some(RelayAnswer::Refused(error)) => return Err(error.clone()),
            Some(RelayAnswer::InputRequired {
                input_requests,
                request_state,
            }) => {
                if !modern {
                    return Err(malformed_result(
                        "tools/call",
                        "input_required outside 2026-07-28",
                    ));
                }
                summary.outcome = "input_required";
                return Ok(render::input_required(
                    revision,
                    self.backend.identity(),
                    input_requests,
                    request_state,
                ));
            }
        }
        if let Err(problem) = validate::tool_output(revision, &set, index, &output) {
            return Err(malformed_result("tools/call", &problem));
        }
        summary.outcome = if output.is_error { "tool_error" } else { "ok" };
        Ok(render::call_result(
            revision,
            self.backend.identity(),
            &output,
        ))
    }
}

/// What a 2026-07-28 `tools/call` carries besides its name and arguments.
#[derive(Debug, Clone, Copy, Default)]
struct Retry<'a> {
    meta: Option<&'a RawValue>,
    /// The capabilities a 2026-07-28 request declares.
    declared: Option<&'a RawValue>,
    input_responses: Option<&'a RawValue>,
    request_state: Option<&'a RawValue>,
}

/// Logs a result that failed its checks and returns the `-32603` sent in
/// its place.
fn malformed_result(what: &str, problem: &str) -> RpcError {
    tracing::error!(
        result = what,
        problem,
        "refusing to send a malformed result"
    );
    RpcError::internal("Internal error: the server produced an invalid result; it was not sent")
}

/// `names_version`: the request's `_meta` names a protocol version.
fn era(method: &str, names_version: bool, ctx: &Context<'_, impl Sized>) -> Era {
    if method == "initialize" {
        return Era::Legacy;
    }
    if names_version {
        return Era::Modern;
    }
    if ctx.session != SessionState::Missing {
        return Era::Legacy;
    }
    if let Some(HeaderSlot::Present(version)) = ctx.headers.map(|h| &h.protocol_version)
        && Revision::parse(version).is_none_or(Revision::is_modern)
    {
        return Era::Modern;
    }
    if method == "server/discover" {
        return Era::Modern;
    }
    Era::Legacy
}

fn write_reply(out: &mut Vec<u8>, id: Option<&RawValue>, answer: Answer) {
    match (id, answer) {
        (Some(id), Ok(result)) => wire::write_result(out, id, &result),
        (id, Ok(_)) => wire::write_error(out, id, &RpcError::internal("Internal error")),
        (id, Err(error)) => wire::write_error(out, id, &error),
    }
}

fn single(step: Step<'_>, summary: &mut Summary) -> Outcome {
    let Step {
        status,
        reply,
        started,
    } = step;
    let body = reply.map(|(id, answer)| {
        match &answer {
            Err(error) => {
                summary.outcome = "error";
                summary.code = Some(error.code);
            }
            Ok(_) if summary.outcome.is_empty() => summary.outcome = "ok",
            Ok(_) => {}
        }
        match (id, answer) {
            // Written into the room the result was written after.
            (Some(id), Ok(result)) => result.into_response(id),
            (id, answer) => {
                let mut out = Vec::with_capacity(128);
                write_reply(&mut out, id, answer);
                Bytes::from(out)
            }
        }
    });
    if body.is_none() {
        summary.outcome = "accepted";
    }
    Outcome {
        status,
        body,
        started,
        summary: Summary::default(),
    }
}

/// Emits the one info-level event per exchange.
pub(crate) fn log_exchange(
    transport: &'static str,
    summary: &Summary,
    status: u16,
    elapsed: Duration,
) {
    tracing::info!(
        transport,
        method = summary.method,
        tool = summary.tool.as_deref().unwrap_or(""),
        revision = summary.revision.map_or("", Revision::as_str),
        outcome = summary.outcome,
        code = summary.code.map(ErrorCode::get),
        status,
        latency_us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX),
        "mcp exchange"
    );
}
