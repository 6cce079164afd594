//! Streamable HTTP on actix-web: one endpoint serving both eras.
//!
//! Check order, cheapest and least revealing first: Host and Origin
//! (DNS-rebinding protection), HTTP method, content negotiation, a bounded
//! body read, authentication, the legacy session id, then the engine. Every
//! refusal carries a JSON-RPC error body (id null, or the request's id when
//! the body was readable).

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderMap, HeaderName, HeaderValue};
use actix_web::{HttpRequest, HttpResponse, web};
use bytes::{Bytes, BytesMut};
use futures_util::{FutureExt, StreamExt};
use serde_json::value::RawValue;
use std::panic::AssertUnwindSafe;

use crate::backend::{AuthRejection, Authenticate, Principal, ToolBackend};
use crate::code::{self, ErrorCode};
use crate::engine::{Context, Engine, Outcome, SessionState, Summary, log_exchange};
use crate::peer::{self, Peer};
use crate::refusal::{Refusal, Transport};
use crate::relay::AgentCapabilities;
use crate::revision::Revision;
use crate::session::{
    MemorySessionEnds, SessionCodec, SessionEnds, SessionKey, SessionRejection, now_secs,
};
use crate::validate::{self, HeaderSlot, Incoming, RequestHeaders};
use corkboard_telemetry::mcp as telemetry;
use tracing::Instrument;

// Looked up by `HeaderName`: a lookup by `&str` makes an owned name first,
// an allocation per header read for names that are not standard.
static MCP_SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
static MCP_PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
static MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
static MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");

/// Endpoint settings.
#[derive(Debug, Clone)]
pub struct McpSettings {
    /// Route used by [`McpEndpoint::configure`].
    pub path: String,
    /// Browser origins allowed to call besides loopback ones (exact
    /// `scheme://host[:port]`). A request with any other `Origin` is
    /// refused (403); requests without `Origin` (non-browser clients) pass.
    pub allowed_origins: Vec<String>,
    /// Hosts accepted in the `Host` header besides loopback (`localhost`,
    /// `127.0.0.0/8`, `[::1]`). An entry with a port matches only that
    /// port.
    pub allowed_hosts: Vec<String>,
    /// Accept any `Host` (deployments behind an ingress that owns this).
    pub allow_any_host: bool,
    pub max_body_bytes: usize,
    /// Longest time the body of a request may take to arrive (408 after).
    pub body_timeout: Duration,
    /// Most elements of one JSON-RPC batch (2025-03-26 sessions); a longer
    /// batch is refused whole with `-32600`.
    pub max_batch_len: usize,
    /// Once a batch's response holds this many bytes, its remaining
    /// requests are not run and answered `-32055` (retry them singly).
    pub max_batch_response_bytes: usize,
    pub session_key: SessionKey,
    pub session_ttl: Duration,
    /// `ttlMs` hint on 2026-07-28 list results.
    pub list_ttl: Duration,
    /// Where request counts and latencies go (none: not counted).
    pub metrics: Option<corkboard_telemetry::Metrics>,
    /// Emit the info-level "mcp exchange" event per request. Off where the
    /// caller logs each request once itself (a run's gateway), so a request
    /// costs one log line, not two.
    pub log_exchanges: bool,
    /// How long a message for the agent (a relayed request) waits for
    /// room on its response stream before the send fails (see [`Peer`]).
    pub peer_send_timeout: Duration,
}

impl McpSettings {
    pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;
    pub const DEFAULT_MAX_BATCH_LEN: usize = 32;
    pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(10);
    pub const DEFAULT_MAX_BATCH_RESPONSE_BYTES: usize = 4 * 1024 * 1024;
    pub const DEFAULT_SESSION_TTL: Duration = Duration::from_secs(12 * 60 * 60);

    pub fn new(session_key: SessionKey) -> Self {
        Self {
            path: "/mcp".into(),
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            allow_any_host: false,
            max_body_bytes: Self::DEFAULT_MAX_BODY_BYTES,
            body_timeout: Self::DEFAULT_BODY_TIMEOUT,
            max_batch_len: Self::DEFAULT_MAX_BATCH_LEN,
            max_batch_response_bytes: Self::DEFAULT_MAX_BATCH_RESPONSE_BYTES,
            session_key,
            session_ttl: Self::DEFAULT_SESSION_TTL,
            list_ttl: Duration::from_secs(60),
            metrics: None,
            log_exchanges: true,
            peer_send_timeout: Peer::DEFAULT_SEND_TIMEOUT,
        }
    }
}

struct Inner<B: ToolBackend> {
    engine: Engine<B>,
    settings: McpSettings,
    codec: SessionCodec,
    ends: Arc<dyn SessionEnds>,
}

/// An MCP endpoint any actix route can delegate to.
pub struct McpEndpoint<B: ToolBackend> {
    inner: Arc<Inner<B>>,
}

impl<B: ToolBackend> Clone for McpEndpoint<B> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<B: ToolBackend> std::fmt::Debug for McpEndpoint<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpEndpoint")
            .field("settings", &self.inner.settings)
            .finish_non_exhaustive()
    }
}

fn bad(status: StatusCode, message: impl Into<String>) -> Refusal {
    Refusal::invalid_request(status, message)
}

/// What a request asks of the endpoint, found from its method and
/// headers before its body is read or its credential checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admitted {
    kind: Admission,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Admission {
    /// A JSON-RPC message; answer as SSE when the client prefers it.
    Post { prefers_sse: bool },
    /// End a legacy session.
    Delete,
}

impl Admitted {
    /// Whether the request carries a JSON-RPC body to read.
    pub fn has_body(self) -> bool {
        matches!(self.kind, Admission::Post { .. })
    }
}

/// One answered HTTP exchange: the response and what the request log and
/// metrics record about it.
#[derive(Debug)]
pub struct Exchange {
    pub response: HttpResponse,
    pub summary: Summary,
}

impl Exchange {
    fn refused(refusal: &Refusal, id: Option<&RawValue>) -> Self {
        Self {
            response: refusal.response(id),
            summary: refusal_summary(refusal),
        }
    }

    pub fn status(&self) -> u16 {
        self.response.status().as_u16()
    }
}

/// What the request log records about a refusal (the studio endpoint
/// counts every refusal as `error`, as it always has).
fn refusal_summary(refusal: &Refusal) -> Summary {
    Summary {
        outcome: "error",
        code: Some(refusal.error.code),
        ..Summary::default()
    }
}

impl<B: ToolBackend> McpEndpoint<B> {
    /// An endpoint whose ended sessions are remembered in this process.
    pub fn new(backend: Arc<B>, settings: McpSettings) -> Self {
        Self::with_session_ends(backend, settings, Arc::new(MemorySessionEnds::default()))
    }

    /// An endpoint remembering ended sessions in `ends` (share one store
    /// between replicas so DELETE takes effect everywhere).
    pub fn with_session_ends(
        backend: Arc<B>,
        settings: McpSettings,
        ends: Arc<dyn SessionEnds>,
    ) -> Self {
        let engine = Engine::new(backend)
            .with_list_ttl(settings.list_ttl)
            .with_batch_limits(settings.max_batch_len, settings.max_batch_response_bytes);
        let codec = SessionCodec::new(settings.session_key.clone(), settings.session_ttl);
        Self {
            inner: Arc::new(Inner {
                engine,
                settings,
                codec,
                ends,
            }),
        }
    }

    pub fn engine(&self) -> &Engine<B> {
        &self.inner.engine
    }

    pub fn settings(&self) -> &McpSettings {
        &self.inner.settings
    }

    /// Serves one HTTP request on the MCP endpoint, resolving its bearer
    /// credential with the backend: the studio endpoint's whole pipeline.
    pub async fn handle(&self, req: HttpRequest, body: web::Payload) -> HttpResponse
    where
        B: Authenticate,
    {
        let started = Instant::now();
        // The backend records tenant/run/grant into this span once it has
        // resolved the caller; nothing from the request body goes in.
        let span = telemetry::mcp_span_open();
        let exchange = self
            .authenticate_and_exchange(&req, body)
            .instrument(span.clone())
            .await;
        self.observe(&span, &exchange, started.elapsed());
        exchange.response
    }

    async fn authenticate_and_exchange(&self, req: &HttpRequest, body: web::Payload) -> Exchange
    where
        B: Authenticate,
    {
        let admitted = match self.precheck(req) {
            Ok(admitted) => admitted,
            Err(refusal) => {
                let mut exchange = Exchange::refused(&refusal, None);
                if req.method() == actix_web::http::Method::DELETE {
                    exchange.summary.method = "session/delete";
                }
                return exchange;
            }
        };
        // The credential is in the headers: check it before reading up to
        // `max_body_bytes` of body, so a caller without a valid token costs
        // no body buffer and cannot hold one open. Its refusal therefore
        // carries no request id (`null`).
        let backend = self.inner.engine.backend();
        let result = AssertUnwindSafe(backend.authenticate(bearer_token(req.headers())))
            .catch_unwind()
            .await
            .unwrap_or_else(|_| {
                tracing::error!("authenticate panicked; refusing the request");
                Err(AuthRejection::Unavailable(
                    "the credential check failed".into(),
                ))
            });
        let principal = match result {
            Ok(principal) => {
                // Its connection is not shed near the listener's cap.
                corkboard_telemetry::conn::mark_authenticated(req);
                principal
            }
            Err(rejection) => {
                let refusal = Refusal::credential(&rejection, Transport::Http);
                return Exchange::refused(&refusal, None);
            }
        };
        let bytes = if admitted.has_body() {
            match self.read_body(req, body).await {
                Ok(bytes) => bytes,
                Err(refusal) => return Exchange::refused(&refusal, None),
            }
        } else {
            Bytes::new()
        };
        match backend.admit(&principal).await {
            Ok(()) => self.exchange(req, admitted, &bytes, &principal).await,
            Err(refusal) => Exchange::refused(&refusal, request_id(&bytes)),
        }
    }

    /// Records a finished exchange: the `mcp.request` span's fields, the
    /// endpoint's metrics, and (when configured) its log line.
    pub fn observe(&self, span: &tracing::Span, exchange: &Exchange, elapsed: Duration) {
        let summary = &exchange.summary;
        telemetry::record_request(span, summary.method, summary.tool.as_deref());
        telemetry::record_outcome(
            span,
            summary.outcome,
            summary.code.map(ErrorCode::get),
            elapsed,
        );
        if let Some(metrics) = &self.inner.settings.metrics {
            metrics.mcp_request(
                summary.method,
                summary.tool.as_deref(),
                summary.outcome,
                elapsed,
            );
        }
        if self.inner.settings.log_exchanges {
            span.in_scope(|| log_exchange("http", summary, exchange.status(), elapsed));
        }
    }

    /// The checks that need neither the body nor a credential, cheapest
    /// and least revealing first: Host and Origin (DNS-rebinding
    /// protection), the HTTP method, content negotiation (POST) or the
    /// session header (DELETE).
    pub fn precheck(&self, req: &HttpRequest) -> Result<Admitted, Refusal> {
        self.check_host_and_origin(req)?;
        let headers = req.headers();
        match *req.method() {
            actix_web::http::Method::POST => {
                if !is_json_content_type(headers) {
                    return Err(bad(
                        StatusCode::UNSUPPORTED_MEDIA_TYPE,
                        "Unsupported Media Type: the body must be `Content-Type: application/json`",
                    ));
                }
                let accept = Accept::parse(headers);
                if !(accept.json && accept.sse) {
                    return Err(bad(
                        StatusCode::NOT_ACCEPTABLE,
                        "Not Acceptable: the Accept header must list both application/json and text/event-stream",
                    ));
                }
                Ok(Admitted {
                    kind: Admission::Post {
                        prefers_sse: accept.prefers_sse,
                    },
                })
            }
            actix_web::http::Method::DELETE => {
                if header_slot(headers, &MCP_SESSION_ID) == HeaderSlot::Absent {
                    let modern = matches!(
                        header_slot(headers, &MCP_PROTOCOL_VERSION),
                        HeaderSlot::Present(v) if Revision::parse(&v).is_some_and(Revision::is_modern)
                    );
                    return Err(if modern {
                        bad(
                            StatusCode::METHOD_NOT_ALLOWED,
                            "Method Not Allowed: 2026-07-28 has no sessions to delete",
                        )
                        .allow("POST")
                    } else {
                        bad(
                            StatusCode::BAD_REQUEST,
                            "Bad Request: DELETE ends a session and needs its Mcp-Session-Id header",
                        )
                    });
                }
                Ok(Admitted {
                    kind: Admission::Delete,
                })
            }
            _ => Err(bad(
                StatusCode::METHOD_NOT_ALLOWED,
                "Method Not Allowed: send JSON-RPC messages with POST (DELETE ends a 2025 session); this server offers no GET stream",
            )
            .allow("POST, DELETE")),
        }
    }

    /// Reads at most `max_body_bytes`, refusing early on a larger
    /// `Content-Length` and while streaming otherwise.
    pub async fn read_body(
        &self,
        req: &HttpRequest,
        payload: web::Payload,
    ) -> Result<Bytes, Refusal> {
        let settings = &self.inner.settings;
        let deadline = settings.body_timeout;
        tokio::time::timeout(
            deadline,
            read_body(req.headers(), payload, settings.max_body_bytes),
        )
        .await
        .unwrap_or_else(|_elapsed| {
            Err(bad(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "Request Timeout: the body did not arrive within {}s; send it in one go",
                    deadline.as_secs_f64()
                ),
            ))
        })
    }

    /// Serves a request whose transport checks passed ([`Self::precheck`]),
    /// whose body was read ([`Self::read_body`]) and whose caller was
    /// resolved: the entry point of embedders that resolve credentials
    /// themselves (a run's gateway).
    pub async fn exchange(
        &self,
        req: &HttpRequest,
        admitted: Admitted,
        body: &[u8],
        principal: &B::Principal,
    ) -> Exchange {
        match admitted.kind {
            Admission::Post { prefers_sse } => self.post(req, prefers_sse, body, principal).await,
            Admission::Delete => self.delete(req, principal).await,
        }
    }

    fn check_host_and_origin(&self, req: &HttpRequest) -> Result<(), Refusal> {
        let settings = &self.inner.settings;
        if !settings.allow_any_host {
            let host = req
                .headers()
                .get(header::HOST)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
                .or_else(|| req.uri().authority().map(|a| a.as_str().to_owned()));
            let allowed = host
                .as_deref()
                .is_some_and(|host| host_allowed(host, &settings.allowed_hosts));
            if !allowed {
                return Err(bad(
                    StatusCode::FORBIDDEN,
                    "Forbidden: this Host is not served here (DNS-rebinding protection)",
                ));
            }
        }
        for origin in req.headers().get_all(header::ORIGIN) {
            let allowed = origin
                .to_str()
                .is_ok_and(|origin| origin_allowed(origin, &settings.allowed_origins));
            if !allowed {
                return Err(bad(
                    StatusCode::FORBIDDEN,
                    "Forbidden: this Origin is not allowed (DNS-rebinding protection)",
                ));
            }
        }
        Ok(())
    }

    /// The session a request arrives in, and (when active) the
    /// capabilities its agent declared.
    async fn session_state(
        &self,
        headers: &HeaderMap,
        principal: &B::Principal,
    ) -> Result<(SessionState, AgentCapabilities), Refusal> {
        let none = AgentCapabilities::default();
        match header_slot(headers, &MCP_SESSION_ID) {
            HeaderSlot::Absent => Ok((SessionState::Missing, none)),
            HeaderSlot::Malformed => {
                Ok((SessionState::Rejected(SessionRejection::Malformed), none))
            }
            HeaderSlot::Present(id) => {
                match self
                    .inner
                    .codec
                    .open(&id, principal.session_binding(), now_secs())
                {
                    Err(rejection) => Ok((SessionState::Rejected(rejection), none)),
                    Ok(claims) => match self.inner.ends.is_ended(&claims.nonce).await {
                        Ok(true) => Ok((SessionState::Rejected(SessionRejection::Ended), none)),
                        Ok(false) => {
                            Ok((SessionState::Active(claims.revision), claims.capabilities))
                        }
                        Err(e) => {
                            tracing::error!(error = %e, "session-end store unavailable");
                            Err(Refusal::new(
                                StatusCode::SERVICE_UNAVAILABLE,
                                code::INTERNAL_ERROR,
                                "Service Unavailable: session state cannot be checked; retry shortly",
                            )
                            .outcome("unavailable"))
                        }
                    },
                }
            }
        }
    }

    async fn post(
        &self,
        req: &HttpRequest,
        prefers_sse: bool,
        bytes: &[u8],
        principal: &B::Principal,
    ) -> Exchange {
        let headers = req.headers();
        let (session, capabilities) = match self.session_state(headers, principal).await {
            Ok(session) => session,
            Err(refusal) => return Exchange::refused(&refusal, request_id(bytes)),
        };
        let request_headers = RequestHeaders {
            protocol_version: header_slot(headers, &MCP_PROTOCOL_VERSION),
            method: header_slot(headers, &MCP_METHOD),
            name: header_slot(headers, &MCP_NAME),
            params: param_header_slots(headers),
        };
        if let SessionState::Active(revision) = session
            && ((capabilities.any() && self.inner.engine.backend().may_relay(principal))
                || self.inner.engine.backend().may_hold(principal))
            && crate::peek::peek(bytes, |_| "other").method == "tools/call"
        {
            return self
                .post_streaming(
                    prefers_sse,
                    bytes,
                    principal,
                    request_headers,
                    (revision, capabilities),
                )
                .await;
        }
        let peer = match session {
            SessionState::Active(revision) => Some(Peer::without_stream(revision, capabilities)),
            _ => None,
        };
        let ctx = Context {
            principal,
            session,
            headers: Some(&request_headers),
            peer: peer.as_ref(),
        };
        let outcome = self.inner.engine.handle_message(&ctx, bytes).await;
        self.respond(outcome, prefers_sse, bytes, principal)
    }

    /// A 2025 session's `tools/call` that may send the agent requests
    /// first (an upstream relay): served in its own task, so that its
    /// response can become an event stream. When the call ends before
    /// sending anything, it is answered exactly as [`Self::post`] would;
    /// once a message for the agent comes first, the response is a `200`
    /// event stream carrying each message, then the call's result. The
    /// stream closing (the agent went away) makes further sends fail at
    /// once ([`crate::PeerError::Gone`]).
    async fn post_streaming(
        &self,
        prefers_sse: bool,
        bytes: &[u8],
        principal: &B::Principal,
        request_headers: RequestHeaders,
        (revision, capabilities): (Revision, AgentCapabilities),
    ) -> Exchange {
        let (outbox, mut inbox) = tokio::sync::mpsc::channel(peer::OUTBOX);
        let peer = Peer::with_stream(
            revision,
            capabilities,
            outbox,
            self.inner.settings.peer_send_timeout,
        );
        let endpoint = self.clone();
        let owned_principal = principal.clone();
        let body = bytes.to_vec();
        let mut task = tokio::spawn(
            async move {
                let ctx = Context {
                    principal: &owned_principal,
                    session: SessionState::Active(revision),
                    headers: Some(&request_headers),
                    peer: Some(&peer),
                };
                endpoint.inner.engine.handle_message(&ctx, &body).await
            }
            .in_current_span(),
        );
        let first = tokio::select! {
            biased;
            joined = &mut task => {
                return match joined {
                    Ok(outcome) => self.respond(outcome, prefers_sse, bytes, principal),
                    Err(_) => Exchange::refused(&task_failed(), request_id(bytes)),
                };
            }
            first = inbox.recv() => first,
        };
        let Some(first) = first else {
            // The call dropped its stream without sending: its outcome
            // is all there is.
            return match task.await {
                Ok(outcome) => self.respond(outcome, prefers_sse, bytes, principal),
                Err(_) => Exchange::refused(&task_failed(), request_id(bytes)),
            };
        };
        let id = request_id(bytes).map(|id| id.get().to_owned());
        let state = Streaming {
            first: Some(first),
            inbox,
            task: Some(task),
            outcome: None,
            id,
            ended: false,
            settled: std::sync::Arc::default(),
        };
        let settled = state.settled.clone();
        let events = futures_util::stream::unfold(state, |mut st| async move {
            if st.ended {
                return None;
            }
            if let Some(message) = st.first.take() {
                return Some((Ok::<_, actix_web::Error>(sse_event(&message)), st));
            }
            if let Some(task) = st.task.as_mut() {
                let joined = tokio::select! {
                    biased;
                    Some(message) = st.inbox.recv() => {
                        return Some((Ok(sse_event(&message)), st));
                    }
                    outcome = task => outcome,
                };
                st.task = None;
                st.outcome = Some(joined);
            }
            // Whatever was queued before the call ended goes first.
            if let Ok(message) = st.inbox.try_recv() {
                return Some((Ok(sse_event(&message)), st));
            }
            st.ended = true;
            let body = match st.outcome.take() {
                Some(Ok(Outcome {
                    body: Some(body),
                    summary,
                    ..
                })) => {
                    let _ = st.settled.set(summary);
                    body
                }
                _ => {
                    let _ = st.settled.set(Summary {
                        method: "tools/call",
                        outcome: "error",
                        code: Some(task_failed().error.code),
                        ..Summary::default()
                    });
                    let mut out = Vec::new();
                    let id = st
                        .id
                        .as_deref()
                        .and_then(|id| RawValue::from_string(id.to_owned()).ok());
                    crate::wire::write_error(&mut out, id.as_deref(), &task_failed().error);
                    Bytes::from(out)
                }
            };
            Some((Ok(sse_event(&body)), st))
        });
        let response = HttpResponse::Ok()
            .insert_header((header::CONTENT_TYPE, "text/event-stream"))
            .insert_header((header::CACHE_CONTROL, "no-cache"))
            .insert_header((HeaderName::from_static("x-accel-buffering"), "no"))
            .streaming(events);
        Exchange {
            response,
            summary: Summary {
                method: "tools/call",
                revision: Some(revision),
                // Its result is known only once the stream ends.
                outcome: "stream",
                settled: Some(settled),
                ..Summary::default()
            },
        }
    }

    /// The HTTP response to an engine outcome.
    fn respond(
        &self,
        outcome: Outcome,
        prefers_sse: bool,
        bytes: &[u8],
        principal: &B::Principal,
    ) -> Exchange {
        let summary = outcome.summary;
        let status =
            StatusCode::from_u16(outcome.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut builder = HttpResponse::build(status);
        if let Some((revision, capabilities)) = outcome.started {
            match self.start_session(revision, capabilities, principal) {
                Some(value) => {
                    builder.insert_header((MCP_SESSION_ID.clone(), value));
                }
                None => {
                    let refusal = Refusal::new(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        code::INTERNAL_ERROR,
                        "Internal error: could not start a session",
                    );
                    return Exchange::refused(&refusal, request_id(bytes));
                }
            }
        }
        let response = match outcome.body {
            None => builder.finish(),
            Some(body) if status == StatusCode::OK && prefers_sse => {
                // One event carrying the whole response, written as a
                // single buffer: no chunked trickle for Nagle to delay.
                builder
                    .insert_header((header::CONTENT_TYPE, "text/event-stream"))
                    .insert_header((header::CACHE_CONTROL, "no-cache"))
                    .insert_header((HeaderName::from_static("x-accel-buffering"), "no"))
                    .body(sse_event(&body))
            }
            Some(body) => builder
                .insert_header((header::CONTENT_TYPE, "application/json"))
                .body(body),
        };
        Exchange { response, summary }
    }

    fn start_session(
        &self,
        revision: Revision,
        capabilities: AgentCapabilities,
        principal: &B::Principal,
    ) -> Option<HeaderValue> {
        let id = self.inner.codec.mint(
            revision,
            capabilities,
            principal.session_binding(),
            now_secs(),
        )?;
        if let Some(metrics) = &self.inner.settings.metrics {
            metrics.legacy_session_started();
        }
        HeaderValue::from_str(&id).ok()
    }

    async fn delete(&self, req: &HttpRequest, principal: &B::Principal) -> Exchange {
        let mut exchange = self.end_session(req, principal).await;
        exchange.summary.method = "session/delete";
        exchange
    }

    async fn end_session(&self, req: &HttpRequest, principal: &B::Principal) -> Exchange {
        let not_found =
            |message: &str| Exchange::refused(&bad(StatusCode::NOT_FOUND, message), None);
        let HeaderSlot::Present(id) = header_slot(req.headers(), &MCP_SESSION_ID) else {
            return not_found("Session not found: this Mcp-Session-Id is unknown");
        };
        let claims = match self
            .inner
            .codec
            .open(&id, principal.session_binding(), now_secs())
        {
            Ok(claims) => claims,
            Err(_) => {
                return not_found(
                    "Session not found: this Mcp-Session-Id is unknown, expired or already ended",
                );
            }
        };
        let ended = match self.inner.ends.is_ended(&claims.nonce).await {
            Ok(true) => return not_found("Session not found: this session already ended"),
            Ok(false) => self.inner.ends.end(claims.nonce, claims.expires_at).await,
            Err(e) => Err(e),
        };
        let mut exchange = match ended {
            Ok(()) => {
                if let Some(metrics) = &self.inner.settings.metrics {
                    metrics.legacy_session_ended();
                }
                Exchange {
                    response: HttpResponse::Ok().finish(),
                    summary: Summary {
                        outcome: "ok",
                        ..Summary::default()
                    },
                }
            }
            Err(e) => {
                tracing::error!(error = %e, "session-end store unavailable");
                let refusal = Refusal::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    code::INTERNAL_ERROR,
                    "Service Unavailable: the session could not be ended; retry shortly",
                )
                .outcome("unavailable")
                .retry_after(Refusal::DEFAULT_RETRY_AFTER);
                Exchange::refused(&refusal, None)
            }
        };
        exchange.summary.revision = Some(claims.revision);
        exchange
    }
}

impl<B: Authenticate> McpEndpoint<B> {
    /// Routes every HTTP method on `settings.path` to this endpoint.
    pub fn configure(&self, cfg: &mut web::ServiceConfig) {
        let path = self.inner.settings.path.clone();
        self.configure_at(cfg, &path);
    }

    /// Routes every HTTP method on `path` to this endpoint.
    pub fn configure_at(&self, cfg: &mut web::ServiceConfig, path: &str) {
        let endpoint = self.clone();
        cfg.route(
            path,
            web::route().to(move |req: HttpRequest, body: web::Payload| {
                let endpoint = endpoint.clone();
                async move { endpoint.handle(req, body).await }
            }),
        );
    }
}

/// The state of a streamed response (see `post_streaming`).
struct Streaming {
    first: Option<Vec<u8>>,
    inbox: tokio::sync::mpsc::Receiver<Vec<u8>>,
    task: Option<tokio::task::JoinHandle<Outcome>>,
    outcome: Option<Result<Outcome, tokio::task::JoinError>>,
    /// The request's id, for the error that ends a failed call's stream.
    id: Option<String>,
    ended: bool,
    /// The call's own summary, once it ended.
    settled: std::sync::Arc<std::sync::OnceLock<Summary>>,
}

/// The stream is dropped when its response is (the agent went away, or
/// the embedder cut it off): the call behind it stops, so an upstream
/// waiting on it sees its stream close instead of a call nobody reads.
impl Drop for Streaming {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// One SSE event carrying one JSON-RPC message, as a single buffer.
fn sse_event(message: &[u8]) -> Bytes {
    let mut event = Vec::with_capacity(message.len() + 24);
    event.extend_from_slice(b"event: message\ndata: ");
    event.extend_from_slice(message);
    event.extend_from_slice(b"\n\n");
    Bytes::from(event)
}

/// A call served in its own task that failed (panicked) before answering.
fn task_failed() -> Refusal {
    Refusal::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        code::INTERNAL_ERROR,
        "Internal error: the call failed unexpectedly; it may not have taken effect",
    )
}

/// The request's id, if the body is a single well-formed message (for
/// refusals that happen after the body was read).
fn request_id(bytes: &[u8]) -> Option<&RawValue> {
    match validate::parse(bytes) {
        Ok(Incoming::Single(env)) => match validate::envelope(&env) {
            Ok(validate::Message::Request { id, .. }) => Some(id),
            Ok(_) => None,
            Err(refusal) => refusal.id,
        },
        _ => None,
    }
}

/// The request's `Mcp-Param-*` headers, each once by name (a repeated or
/// non-ASCII one as `None`), at most [`MAX_PARAM_HEADERS`] of them.
fn param_header_slots(headers: &HeaderMap) -> Vec<(String, Option<String>)> {
    let mut out: Vec<(String, Option<String>)> = Vec::new();
    for key in headers.keys() {
        let name = key.as_str();
        let is_param = name.len() > crate::param_headers::PARAM_HEADER_PREFIX.len()
            && name.as_bytes()[..crate::param_headers::PARAM_HEADER_PREFIX.len()]
                .eq_ignore_ascii_case(crate::param_headers::PARAM_HEADER_PREFIX.as_bytes());
        if !is_param || out.iter().any(|(n, _)| n == name) {
            continue;
        }
        if out.len() == MAX_PARAM_HEADERS {
            break;
        }
        let value = match header_slot(headers, key) {
            HeaderSlot::Present(value) => Some(value),
            _ => None,
        };
        out.push((name.to_owned(), value));
    }
    out
}

/// More `Mcp-Param-*` headers than this are not read (a tool marks a few
/// arguments; the request's header block is bounded anyway).
const MAX_PARAM_HEADERS: usize = 64;

fn header_slot(headers: &HeaderMap, name: &HeaderName) -> HeaderSlot {
    let mut values = headers.get_all(name);
    let Some(first) = values.next() else {
        return HeaderSlot::Absent;
    };
    if values.next().is_some() {
        return HeaderSlot::Malformed;
    }
    match first.to_str() {
        Ok(text)
            if text
                .bytes()
                .all(|b| (0x20..=0x7e).contains(&b) || b == b'\t') =>
        {
            HeaderSlot::Present(text.trim().to_owned())
        }
        _ => HeaderSlot::Malformed,
    }
}

/// The `Authorization: Bearer` credential of a request, if it has a
/// non-empty one. Every HTTP surface reads credentials through this.
pub fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

fn is_json_content_type(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

/// What the client's `Accept` allows, with RFC 9110 wildcards and
/// `q=0` exclusions.
#[derive(Debug, Default)]
struct Accept {
    json: bool,
    sse: bool,
    /// SSE listed explicitly with higher preference (weight, then order)
    /// than JSON.
    prefers_sse: bool,
}

impl Accept {
    fn parse(headers: &HeaderMap) -> Self {
        let mut accept = Accept::default();
        let mut json_rank: Option<(f32, usize)> = None;
        let mut sse_rank: Option<(f32, usize)> = None;
        let mut position = 0usize;
        for value in headers.get_all(header::ACCEPT) {
            let Ok(value) = value.to_str() else { continue };
            for range in value.split(',') {
                position += 1;
                let mut parts = range.split(';');
                // Compared without case, in place: no lower-cased copy of
                // each range on every request.
                let media = parts.next().unwrap_or("").trim();
                // Parameter names are case-insensitive (RFC 9110): `q=` or `Q=`.
                let q = parts
                    .filter_map(|p| {
                        let p = p.trim();
                        p.get(..2)
                            .filter(|name| name.eq_ignore_ascii_case("q="))
                            .map(|_| &p[2..])
                    })
                    .find_map(|q| q.trim().parse::<f32>().ok())
                    .unwrap_or(1.0);
                if q <= 0.0 {
                    continue;
                }
                let is = |name: &str| media.eq_ignore_ascii_case(name);
                if is("application/json") {
                    accept.json = true;
                    json_rank.get_or_insert((q, position));
                } else if is("text/event-stream") {
                    accept.sse = true;
                    sse_rank.get_or_insert((q, position));
                } else if is("application/*") {
                    accept.json = true;
                } else if is("text/*") {
                    accept.sse = true;
                } else if is("*/*") {
                    accept.json = true;
                    accept.sse = true;
                }
            }
        }
        accept.prefers_sse = match (sse_rank, json_rank) {
            (Some(_), None) => true,
            (Some((sq, sp)), Some((jq, jp))) => sq > jq || (sq == jq && sp < jp),
            _ => false,
        };
        accept
    }
}

/// Reads at most `limit` bytes, refusing early on a larger
/// `Content-Length` and while streaming otherwise.
async fn read_body(
    headers: &HeaderMap,
    mut payload: web::Payload,
    limit: usize,
) -> Result<Bytes, Refusal> {
    let too_large = || {
        bad(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("Payload Too Large: messages are limited to {limit} bytes"),
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|len| len > limit as u64) {
        return Err(too_large());
    }
    let mut buf = BytesMut::with_capacity(declared.map_or(0, |len| len as usize).min(limit));
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|_| {
            bad(
                StatusCode::BAD_REQUEST,
                "Bad Request: the body could not be read",
            )
        })?;
        if buf.len() + chunk.len() > limit {
            return Err(too_large());
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf.freeze())
}

/// `Origin` check: loopback origins (a page served by this machine, as the
/// conformance suite's DNS-rebinding scenario sends) and listed origins.
fn origin_allowed(origin: &str, allowed: &[String]) -> bool {
    let origin = origin.trim().trim_end_matches('/');
    if allowed.iter().any(|entry| {
        entry
            .trim()
            .trim_end_matches('/')
            .eq_ignore_ascii_case(origin)
    }) {
        return true;
    }
    let Some((scheme, host)) = origin.split_once("://") else {
        return false;
    };
    matches!(scheme.to_ascii_lowercase().as_str(), "http" | "https")
        && !host.contains(['/', '@'])
        && host_allowed(host, &[])
}

/// `Host` check: loopback names always, listed hosts (with or without a
/// port) as configured.
fn host_allowed(host: &str, allowed: &[String]) -> bool {
    let host = host.trim().to_ascii_lowercase();
    let name = if host.starts_with('[') {
        host.split_once(']')
            .map_or(host.as_str(), |(name, _)| name)
            .trim_start_matches('[')
    } else {
        host.rsplit_once(':').map_or(host.as_str(), |(name, port)| {
            if port.bytes().all(|b| b.is_ascii_digit()) {
                name
            } else {
                host.as_str()
            }
        })
    };
    let loopback = name == "localhost"
        || name == "::1"
        || name
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback());
    loopback
        || allowed.iter().any(|entry| {
            let entry = entry.trim().to_ascii_lowercase();
            entry == host
                || entry == name
                || entry.trim_start_matches('[').trim_end_matches(']') == name
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(values: &[&str]) -> Accept {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(
                header::ACCEPT,
                header::HeaderValue::from_str(value).unwrap(),
            );
        }
        Accept::parse(&headers)
    }

    #[test]
    fn accept_ranges_in_any_case_with_weights_and_order() {
        let both = accept(&["Application/JSON, TEXT/Event-Stream"]);
        assert!(both.json && both.sse && !both.prefers_sse, "{both:?}");
        let sse_first = accept(&["text/event-stream", "application/json"]);
        assert!(sse_first.prefers_sse, "{sse_first:?}");
        let excluded = accept(&["application/json;Q=0, text/event-stream"]);
        assert!(!excluded.json && excluded.sse, "{excluded:?}");
        let weighted = accept(&["application/json;q=0.5, text/event-stream;Q=0.9"]);
        assert!(weighted.prefers_sse, "{weighted:?}");
        let equal = accept(&["application/json;q=0.5, text/event-stream;q=0.5"]);
        assert!(!equal.prefers_sse, "the first of equal weights: {equal:?}");
        let refused = accept(&["application/json;q=0, TEXT/*"]);
        assert!(!refused.json && refused.sse, "{refused:?}");
        let any = accept(&["*/*"]);
        assert!(any.json && any.sse && !any.prefers_sse, "{any:?}");
        let neither = accept(&["image/png"]);
        assert!(!neither.json && !neither.sse, "{neither:?}");
    }

    #[test]
    fn origins() {
        let extra = vec!["https://board.example.com".to_owned()];
        for ok in [
            "http://localhost:8932",
            "http://127.0.0.1",
            "https://[::1]:3000",
            "https://board.example.com/",
        ] {
            assert!(origin_allowed(ok, &extra), "{ok}");
        }
        for no in [
            "http://evil.example.com",
            "null",
            "http://localhost.evil.com",
            "file://localhost",
            "http://user@evil.com",
            "http://evil.com/localhost",
            "",
        ] {
            assert!(!origin_allowed(no, &extra), "{no}");
        }
    }

    #[test]
    fn hosts() {
        let extra = vec!["host.docker.internal".to_owned(), "gw.svc:8080".to_owned()];
        for ok in [
            "localhost",
            "localhost:3000",
            "127.0.0.1:1",
            "127.9.9.9",
            "[::1]:8080",
            "[::1]",
            "host.docker.internal:5",
            "gw.svc:8080",
        ] {
            assert!(host_allowed(ok, &extra), "{ok}");
        }
        for no in [
            "evil.example.com",
            "evil.example.com:80",
            "gw.svc:9090",
            "10.0.0.1",
            "localhost.evil.com",
            "",
        ] {
            assert!(!host_allowed(no, &extra), "{no}");
        }
    }
}
