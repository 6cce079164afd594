//! The gateway's client of one upstream MCP server over Streamable HTTP.
//!
//! It speaks the upstream's era, whatever the agent speaks: it first asks
//! `server/discover` as 2026-07-28 (stateless, `_meta` and mirrored
//! headers on every request); an upstream that does not answer that gets
//! a 2025 `initialize` and a session the gateway owns. When the upstream
//! forgets that session (404, or 400 from servers that answer an unknown
//! session so), the client opens a new one and sends the request again,
//! once, so no half-alive session is ever kept. Agents'
//! legacy sessions are the gateway's own signed ids and never name the
//! upstream's, so any replica continues an agent's session: it has (or
//! opens) its own session with the upstream.
//!
//! Every request carries the credential header and is bounded by the
//! caller's deadline, from connecting to the last byte. An SSE answer is
//! read event by event: progress and log notifications are skipped, and a
//! request the upstream sends the client on that stream goes to
//! [`crate::seam`]: relayed to the agent of the call when it can answer
//! it, refused at once otherwise, never left hanging.
//!
//! Sessions with a 2025 upstream are per run: each run gets sessions of
//! its own (one per distinct set of capabilities it declared,
//! [`AgentCapabilities::to_bits`]), so whatever an upstream keeps per
//! session (roots, log level, subscriptions, a server's own per-session
//! state) never passes from one run to another although they share the
//! tenant's credential. Tool lists are fetched in the tenant's own
//! sessions (no run). The sessions of every upstream of the process live
//! in one [`SharedTable`] with per-tenant and per-run shares; one idle
//! for [`SESSION_IDLE`] is dropped when a share is full.
//!
//! The client capabilities the gateway declares are the agent's (never
//! more), and a 2026-07-28 upstream gets them in each request's `_meta`.
//! Each call's response stream is its own: requests relayed on it are
//! tracked by it, and when it fails or ends without the result the agent
//! is told (`notifications/cancelled` for each), without touching the
//! requests of any other stream.
//! Errors name the upstream and the HTTP status or transport failure,
//! never the credential, the arguments or the upstream's error text in
//! logs.

use crate::error::UpstreamError;
use crate::hub::UpstreamOptions;
use crate::seal::Credential;
use crate::seam::{self, Decision, Relay};
use crate::shares::{Holder, SharedTable};
use corkboard_board::{Upstream, UpstreamName};
use corkboard_mcp::relay::AgentCapabilities;
use corkboard_mcp::{Revision, RpcError, meta_key};
use reqwest::header::{HeaderName, HeaderValue};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The 2025 revision the gateway asks for in `initialize`.
const LEGACY: Revision = Revision::LATEST_LEGACY;
const MODERN: Revision = Revision::V2026_07_28;

/// How the gateway talks to one upstream, once negotiated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Era {
    /// 2026-07-28: stateless, every request self-describing.
    Modern,
    /// A 2025 session the gateway opened (`session` absent when the
    /// upstream keeps none), at the revision the upstream chose.
    Legacy {
        session: Option<String>,
        version: String,
    },
}

impl Era {
    /// The revision label for diagnostics.
    pub fn label(&self) -> &str {
        match self {
            Self::Modern => MODERN.as_str(),
            Self::Legacy { version, .. } => version,
        }
    }
}

/// What an upstream speaks, once asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Speaks {
    Modern,
    Legacy,
}

/// Where one session is kept: which client (upstream), for which run
/// (none: the tenant's tool listing) and declared capability set.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct SessionKey {
    client: u64,
    run: Option<String>,
    caps: u8,
}

/// One session with a 2025 upstream, or its place while it is opened.
#[derive(Debug)]
pub(crate) struct Session {
    /// `None` while `initialize` runs.
    era: Option<Era>,
    last_used: Instant,
}

/// How long a session goes unused before it may be dropped to make room
/// in a full share (its run opens a new one when it calls again).
pub const SESSION_IDLE: Duration = Duration::from_secs(60);

impl Session {
    fn spent(&self) -> bool {
        self.era.is_some() && self.last_used.elapsed() >= SESSION_IDLE
    }
}

/// Every upstream session of this process (see the module docs).
pub(crate) type Sessions = SharedTable<SessionKey, Session>;

/// Gives every client its key in [`Sessions`].
static CLIENT_IDS: AtomicU64 = AtomicU64::new(1);

/// A session's place taken in [`Sessions`] while it is opened; given back
/// unless the session opened (a failure, a cancelled request, a
/// 2026-07-28 upstream).
struct Opening<'a> {
    sessions: &'a Sessions,
    key: Option<SessionKey>,
}

impl Drop for Opening<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            self.sessions.take(&key);
        }
    }
}

/// What one exchange ended with.
enum Answer {
    /// The JSON-RPC `result`, the bytes the upstream sent (relayed members
    /// of it, such as `inputRequests`, go on to the agent unchanged).
    Result(Box<RawValue>),
    /// The upstream answered the request with a JSON-RPC error.
    Error { code: i64, message: String },
    /// The legacy session is gone (HTTP 404): open another.
    SessionGone,
}

/// A JSON-RPC request the gateway sends an upstream.
#[derive(serde::Serialize)]
struct Body<'a> {
    jsonrpc: &'static str,
    id: u64,
    method: &'a str,
    params: Params<'a>,
}

/// A request's params: an object the gateway builds, and a 2026-07-28
/// retry's `inputResponses` as the agent wrote them (a `Value` would
/// reorder and reformat them).
#[derive(serde::Serialize, Clone)]
struct Params<'a> {
    #[serde(flatten)]
    object: Value,
    #[serde(rename = "inputResponses", skip_serializing_if = "Option::is_none")]
    input_responses: Option<&'a RawValue>,
    /// `Mcp-Param-*` headers of a 2026-07-28 `tools/call` (not in the
    /// body).
    #[serde(skip)]
    headers: Vec<(String, String)>,
}

/// The `result` of a JSON-RPC response, unparsed.
#[derive(Deserialize)]
struct RawResponse {
    result: Box<RawValue>,
}

/// A client of one upstream; see the module docs. Shared by every request
/// of the tenant's runs on this replica; its sessions are per run.
pub struct UpstreamClient {
    name: UpstreamName,
    tenant: String,
    /// This client's sessions' key in [`Sessions`].
    id: u64,
    /// Parsed once by the egress policy ([`corkboard_egress`]), literal
    /// addresses already judged; every request goes to this URL.
    url: reqwest::Url,
    header: HeaderName,
    credential: HeaderValue,
    http: reqwest::Client,
    /// Most bytes of one JSON answer or one SSE event.
    max_answer_bytes: usize,
    /// What the upstream speaks (`None`: not asked yet).
    speaks: std::sync::Mutex<Option<Speaks>>,
    /// Held while a session is opened, so one request of a run opens it
    /// and the others use it.
    opening: tokio::sync::Mutex<()>,
    sessions: Arc<Sessions>,
    ids: AtomicU64,
}

impl Drop for UpstreamClient {
    fn drop(&mut self) {
        // A replaced or removed upstream's sessions are never used again.
        let id = self.id;
        self.sessions.drop_where(|key| key.client == id);
    }
}

impl std::fmt::Debug for UpstreamClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamClient")
            .field("name", &self.name)
            .field("url", &self.url.as_str())
            .finish_non_exhaustive()
    }
}

impl UpstreamClient {
    /// A client of `upstream`, sending `credential` in its header. Its URL
    /// must pass `options.egress` (a literal address is judged here; a name
    /// when `http`, built by that policy, resolves it); every answer is read
    /// up to `options.max_answer_bytes`; its sessions are kept in
    /// `sessions`.
    pub(crate) fn new(
        http: reqwest::Client,
        options: &UpstreamOptions,
        upstream: &Upstream,
        credential: &Credential,
        sessions: Arc<Sessions>,
    ) -> Result<Self, UpstreamError> {
        let invalid = |field: &'static str, why: &str| {
            UpstreamError::Invalid(corkboard_board::ValidationError::new(field, why.to_owned()))
        };
        let header = HeaderName::from_bytes(upstream.header.as_str().as_bytes())
            .map_err(|_| invalid("header", "not a valid HTTP header name"))?;
        let mut value = HeaderValue::from_str(credential.expose())
            .map_err(|_| invalid("credential", "not a valid HTTP header value"))?;
        // Kept out of reqwest's and hyper's debug output.
        value.set_sensitive(true);
        let url = options
            .egress
            .check_url(upstream.url.as_str())
            .map_err(|e| {
                UpstreamError::Unavailable(format!("upstream {} unavailable: {e}", upstream.name))
            })?;
        Ok(Self {
            name: upstream.name.clone(),
            tenant: upstream.tenant.to_string(),
            id: CLIENT_IDS.fetch_add(1, Ordering::Relaxed),
            url,
            header,
            credential: value,
            http,
            max_answer_bytes: options.max_answer_bytes,
            speaks: std::sync::Mutex::new(None),
            opening: tokio::sync::Mutex::new(()),
            sessions,
            ids: AtomicU64::new(1),
        })
    }

    pub fn name(&self) -> &UpstreamName {
        &self.name
    }

    /// Every tool the upstream lists (following `nextCursor`, at most
    /// `max_pages` pages), as the upstream wrote them, in the tenant's
    /// session that declares `caps` (servers list tools by the capabilities
    /// their client declared; nothing is relayed in a listing, so a request
    /// the upstream sends there is refused at once).
    pub async fn list_tools(
        &self,
        deadline: Duration,
        max_pages: usize,
        caps: AgentCapabilities,
    ) -> Result<Vec<Value>, UpstreamError> {
        let work = async {
            let mut tools = Vec::new();
            let mut cursor: Option<String> = None;
            for _ in 0..max_pages {
                let params = match &cursor {
                    Some(c) => json!({ "cursor": c }),
                    None => json!({}),
                };
                let result = self
                    .request_declaring(None, caps, "tools/list", None, params, None)
                    .await?;
                let page = result
                    .get("tools")
                    .and_then(Value::as_array)
                    .ok_or_else(|| self.unavailable("its tools/list result has no tools array"))?;
                tools.extend(page.iter().cloned());
                match result.get("nextCursor").and_then(Value::as_str) {
                    Some(next) if !next.is_empty() => cursor = Some(next.to_owned()),
                    _ => return Ok(tools),
                }
            }
            Ok(tools)
        };
        tokio::time::timeout(deadline, work)
            .await
            .unwrap_or_else(|_| Err(self.timed_out(deadline)))
    }

    /// Calls `tool` for `run` with the agent's argument bytes, passed on
    /// unchanged; returns the upstream's `tools/call` result. With a
    /// `relay`, the upstream's requests to the client on the call's stream
    /// go to the agent (see [`crate::seam`]).
    pub async fn call_tool(
        &self,
        run: &str,
        tool: &str,
        arguments: &[u8],
        deadline: Duration,
        relay: Option<&Relay<'_>>,
    ) -> Result<Value, UpstreamError> {
        let arguments: Value = serde_json::from_slice(arguments)
            .map_err(|_| self.unavailable("the arguments are not JSON"))?;
        let params = json!({ "name": tool, "arguments": arguments });
        let caps = relay.map(|r| r.peer.capabilities()).unwrap_or_default();
        tokio::time::timeout(
            deadline,
            self.request_declaring(Some(run), caps, "tools/call", Some(tool), params, relay),
        )
        .await
        .unwrap_or_else(|_| Err(self.timed_out(deadline)))
    }

    /// A 2026-07-28 call for `run` on behalf of an agent that declared `caps` (they
    /// go in the request's `_meta`), optionally a retry answering the
    /// upstream's `input_required` with the agent's checked `inputResponses`
    /// and the upstream's own `requestState`. Returns the result as the
    /// upstream wrote it, `input_required` included; `None` when the
    /// upstream does not speak 2026-07-28 (then [`Self::call_tool`]).
    #[expect(
        clippy::too_many_arguments,
        reason = "one call's parts, each borrowed from the caller"
    )]
    pub async fn call_tool_modern(
        &self,
        run: &str,
        tool: &str,
        arguments: &[u8],
        input_schema: &Value,
        deadline: Duration,
        caps: AgentCapabilities,
        retry: Option<(&RawValue, Option<String>)>,
    ) -> Option<Result<Box<RawValue>, UpstreamError>> {
        let work = async {
            // Asked in the session a 2025 upstream's call then uses.
            if self.negotiated(Some(run), caps).await? != Era::Modern {
                return Ok(None);
            }
            let arguments: Value = serde_json::from_slice(arguments)
                .map_err(|_| self.unavailable("the arguments are not JSON"))?;
            let mut params = json!({ "name": tool, "arguments": arguments });
            let mut responses = None;
            if let Some((answered, state)) = retry {
                // The agent's checked answers go on as the bytes it sent.
                responses = Some(answered);
                if let Some(state) = state {
                    params["requestState"] = Value::String(state);
                }
            }
            // Arguments the tool's schema marks with `x-mcp-header` are
            // mirrored as `Mcp-Param-*` headers, as 2026-07-28 asks.
            let headers =
                corkboard_mcp::param_headers::param_headers(input_schema, &params["arguments"]);
            let sent = Params {
                object: params,
                input_responses: responses,
                headers,
            };
            self.request_raw(Some(run), caps, "tools/call", Some(tool), sent, None)
                .await
                .map(Some)
        };
        match tokio::time::timeout(deadline, work).await {
            Ok(Ok(None)) => None,
            Ok(Ok(Some(result))) => Some(Ok(result)),
            Ok(Err(e)) => Some(Err(e)),
            Err(_) => Some(Err(self.timed_out(deadline))),
        }
    }

    /// One request in the negotiated era, in `run`'s session declaring
    /// `caps` (no run: the tenant's); a forgotten session is renewed and
    /// the request sent again, once.
    async fn request_declaring(
        &self,
        run: Option<&str>,
        caps: AgentCapabilities,
        method: &str,
        tool: Option<&str>,
        params: Value,
        relay: Option<&Relay<'_>>,
    ) -> Result<Value, UpstreamError> {
        let params = Params {
            object: params,
            input_responses: None,
            headers: Vec::new(),
        };
        let raw = self
            .request_raw(run, caps, method, tool, params, relay)
            .await?;
        serde_json::from_str(raw.get()).map_err(|_| self.unavailable("its answer is not JSON"))
    }

    /// [`Self::request_declaring`] answering the result as the upstream
    /// wrote it.
    async fn request_raw(
        &self,
        run: Option<&str>,
        caps: AgentCapabilities,
        method: &str,
        tool: Option<&str>,
        params: Params<'_>,
        relay: Option<&Relay<'_>>,
    ) -> Result<Box<RawValue>, UpstreamError> {
        let mut era = self.negotiated(run, caps).await?;
        for attempt in 0..2 {
            match self
                .exchange(&era, caps, method, tool, params.clone(), relay)
                .await?
            {
                Answer::Result(result) => return Ok(result),
                Answer::Error { code, message } => {
                    return Err(UpstreamError::Rpc {
                        upstream: self.name.to_string(),
                        code,
                        message,
                    });
                }
                Answer::SessionGone if attempt == 0 => {
                    tracing::info!(upstream = %self.name, "upstream session expired; opening a new one");
                    era = self.renew(run, &era, caps).await?;
                }
                Answer::SessionGone => break,
            }
        }
        Err(self.unavailable(
            "it refused the request in a session it had just opened (HTTP 400 or 404 twice)",
        ))
    }

    /// The session table's key of `run` (none: the tenant's listing)
    /// declaring `caps` with this upstream.
    fn session_key(&self, run: Option<&str>, caps: AgentCapabilities) -> SessionKey {
        SessionKey {
            client: self.id,
            run: run.map(str::to_owned),
            caps: caps.to_bits(),
        }
    }

    /// The era of `run` (none: the tenant's listing) declaring `caps`:
    /// stateless for a 2026-07-28 upstream, else the run's session,
    /// opened first if needed (refused when a share of the session table
    /// is full).
    async fn negotiated(
        &self,
        run: Option<&str>,
        caps: AgentCapabilities,
    ) -> Result<Era, UpstreamError> {
        let key = self.session_key(run, caps);
        if let Some(era) = self.known(&key) {
            return Ok(era);
        }
        let _one_at_a_time = self.opening.lock().await;
        if let Some(era) = self.known(&key) {
            return Ok(era);
        }
        self.open(key, caps).await
    }

    /// The era of `key` if it is known: stateless, or its open session
    /// (marked used).
    fn known(&self, key: &SessionKey) -> Option<Era> {
        if self.speaks() == Some(Speaks::Modern) {
            return Some(Era::Modern);
        }
        self.sessions
            .with(key, |session| {
                session.last_used = Instant::now();
                session.era.clone()
            })
            .flatten()
    }

    fn speaks(&self) -> Option<Speaks> {
        *self.speaks.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Opens the session `key` (asking the upstream's era first when it is
    /// not known), its place taken in the table before anything is sent.
    /// Called with `opening` held.
    async fn open(&self, key: SessionKey, caps: AgentCapabilities) -> Result<Era, UpstreamError> {
        let holder = Holder {
            tenant: self.tenant.clone(),
            run: key.run.clone(),
        };
        let placeholder = Session {
            era: None,
            last_used: Instant::now(),
        };
        self.sessions
            .insert(&holder, key.clone(), placeholder, Session::spent)
            .map_err(UpstreamError::ShareExhausted)?;
        let mut opening = Opening {
            sessions: &self.sessions,
            key: Some(key),
        };
        let era = match self.speaks() {
            Some(Speaks::Legacy) => self.legacy_initialize(caps).await?,
            _ => self.negotiate(caps).await?,
        };
        let speaks = if era == Era::Modern {
            Speaks::Modern
        } else {
            Speaks::Legacy
        };
        *self.speaks.lock().unwrap_or_else(|p| p.into_inner()) = Some(speaks);
        if speaks == Speaks::Legacy
            && let Some(key) = opening.key.take()
        {
            self.sessions.with(&key, |session| {
                session.era = Some(era.clone());
                session.last_used = Instant::now();
            });
        }
        Ok(era)
    }

    /// Replaces `run`'s session `stale` with a new one, unless another
    /// request already did.
    async fn renew(
        &self,
        run: Option<&str>,
        stale: &Era,
        caps: AgentCapabilities,
    ) -> Result<Era, UpstreamError> {
        let key = self.session_key(run, caps);
        let _one_at_a_time = self.opening.lock().await;
        if let Some(era) = self.known(&key)
            && era != *stale
        {
            return Ok(era);
        }
        self.sessions.take(&key);
        self.open(key, caps).await
    }

    async fn negotiate(&self, caps: AgentCapabilities) -> Result<Era, UpstreamError> {
        match self
            .exchange(
                &Era::Modern,
                caps,
                "server/discover",
                None,
                Params {
                    object: json!({}),
                    input_responses: None,
                    headers: Vec::new(),
                },
                None,
            )
            .await?
        {
            Answer::Result(result)
                if serde_json::from_str::<Value>(result.get())
                    .unwrap_or(Value::Null)
                    .get("supportedVersions")
                    .and_then(Value::as_array)
                    .is_some_and(|v| v.iter().any(|v| v == MODERN.as_str())) =>
            {
                tracing::info!(upstream = %self.name, era = MODERN.as_str(), "upstream era negotiated");
                Ok(Era::Modern)
            }
            _ => self.legacy_initialize(caps).await,
        }
    }

    async fn legacy_initialize(&self, caps: AgentCapabilities) -> Result<Era, UpstreamError> {
        let id = self.ids.fetch_add(1, Ordering::Relaxed);
        let body = json!({
            "jsonrpc": "2.0",
            "id": id,
            "method": "initialize",
            "params": {
                "protocolVersion": LEGACY.as_str(),
                // What the agents of this session declared, never more.
                "capabilities": caps.declared_to(LEGACY),
                "clientInfo": client_info(),
            }
        });
        let response = self
            .post(body.to_string(), None, None, None, "initialize")
            .send()
            .await
            .map_err(|e| self.transport(&e))?;
        let status = response.status().as_u16();
        if status != 200 {
            return Err(self.status(status, "initialize"));
        }
        let session = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let probe = Era::Legacy {
            session: session.clone(),
            version: LEGACY.as_str().to_owned(),
        };
        let result = match self.read_answer(response, id, &probe, None).await? {
            Answer::Result(result) => serde_json::from_str::<Value>(result.get())
                .map_err(|_| self.unavailable("its initialize result is not JSON"))?,
            Answer::Error { code, .. } => {
                return Err(self.unavailable(&format!("it refused initialize (JSON-RPC {code})")));
            }
            Answer::SessionGone => return Err(self.status(404, "initialize")),
        };
        let version = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .filter(|v| Revision::parse(v).is_some_and(|r| !r.is_modern()))
            .ok_or_else(|| {
                self.unavailable(
                    "its initialize result names no protocol revision the gateway speaks",
                )
            })?
            .to_owned();
        let era = Era::Legacy { session, version };
        let initialized = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
        let sent = self
            .post(
                initialized.to_string(),
                Some(&era),
                None,
                None,
                "notifications/initialized",
            )
            .send()
            .await
            .map_err(|e| self.transport(&e))?;
        if !sent.status().is_success() {
            return Err(self.status(sent.status().as_u16(), "notifications/initialized"));
        }
        tracing::info!(upstream = %self.name, era = era.label(), "upstream era negotiated");
        Ok(era)
    }

    /// Sends one request in `era` and reads its answer.
    async fn exchange(
        &self,
        era: &Era,
        caps: AgentCapabilities,
        method: &str,
        tool: Option<&str>,
        mut params: Params<'_>,
        relay: Option<&Relay<'_>>,
    ) -> Result<Answer, UpstreamError> {
        let id = self.ids.fetch_add(1, Ordering::Relaxed);
        let param_headers = std::mem::take(&mut params.headers);
        if *era == Era::Modern
            && let Some(object) = params.object.as_object_mut()
        {
            object.insert(
                "_meta".into(),
                json!({
                    meta_key::PROTOCOL_VERSION: MODERN.as_str(),
                    meta_key::CLIENT_CAPABILITIES: caps.declared_to(MODERN),
                    meta_key::CLIENT_INFO: client_info(),
                }),
            );
        }
        let body = Body {
            jsonrpc: "2.0",
            id,
            method,
            params,
        };
        let Ok(body) = serde_json::to_string(&body) else {
            return Err(self.unavailable("the request could not be written"));
        };
        let mut request = self.post(body, Some(era), Some(method), tool, method);
        if *era == Era::Modern {
            for (name, value) in param_headers {
                request = request.header(name, value);
            }
        }
        let mut response = request.send().await.map_err(|e| self.transport(&e))?;
        let status = response.status().as_u16();
        let legacy_session = matches!(
            era,
            Era::Legacy {
                session: Some(_),
                ..
            }
        );
        // 404 is how the spec says a session is gone; some servers (the
        // reference server-everything among them) answer an unknown
        // session with 400. Either way one new session and one retry:
        // the refused request did not run.
        if matches!(status, 400 | 404) && legacy_session {
            return Ok(Answer::SessionGone);
        }
        if status != 200 {
            if *era == Era::Modern && method == "server/discover" {
                // Not a 2026-07-28 server: try a 2025 session instead.
                return Ok(Answer::Error {
                    code: 0,
                    message: String::new(),
                });
            }
            // A 2026-07-28 server answers protocol refusals (a capability
            // the client did not declare: -32021; a bad header: -32020)
            // with HTTP 400 and a JSON-RPC error: that is its answer, and
            // no retry changes it, so it is relayed as the 2025 path
            // relays one, not reported as an outage.
            if *era == Era::Modern
                && (400..500).contains(&status)
                && !matches!(status, 401 | 403)
                && let Some(answer) = self.error_body(&mut response, id).await
            {
                return Ok(answer);
            }
            return Err(self.status(status, method));
        }
        self.read_answer(response, id, era, relay).await
    }

    /// Delivers the agent's checked answer (`body`, a JSON-RPC response
    /// under the upstream's own id) in the gateway's session `session`
    /// with the upstream, at `version`.
    pub async fn deliver(
        &self,
        session: Option<&str>,
        version: &str,
        body: Vec<u8>,
    ) -> Result<(), UpstreamError> {
        let era = Era::Legacy {
            session: session.map(str::to_owned),
            version: version.to_owned(),
        };
        let post = self
            .http
            .post(self.url.clone())
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header(self.header.clone(), self.credential.clone())
            .header("mcp-protocol-version", version);
        let post = match &era {
            Era::Legacy {
                session: Some(session),
                ..
            } => post.header("mcp-session-id", session.as_str()),
            _ => post,
        };
        let sent = tokio::time::timeout(seam::ANSWER_TIMEOUT, post.body(body).send()).await;
        match sent {
            Ok(Ok(response)) if response.status().is_success() => Ok(()),
            Ok(Ok(response)) => Err(self.status(response.status().as_u16(), "the relayed answer")),
            Ok(Err(e)) => Err(self.transport(&e)),
            Err(_) => Err(self.timed_out(seam::ANSWER_TIMEOUT)),
        }
    }

    fn post(
        &self,
        body: impl Into<reqwest::Body>,
        era: Option<&Era>,
        method: Option<&str>,
        tool: Option<&str>,
        _what: &str,
    ) -> reqwest::RequestBuilder {
        let mut request = self
            .http
            .post(self.url.clone())
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header(self.header.clone(), self.credential.clone())
            .body(body);
        match era {
            Some(Era::Modern) => {
                request = request.header("mcp-protocol-version", MODERN.as_str());
                if let Some(method) = method {
                    request = request.header("mcp-method", method);
                }
                if let Some(tool) = tool {
                    request = request.header("mcp-name", tool);
                }
            }
            Some(Era::Legacy { session, version }) => {
                request = request.header("mcp-protocol-version", version.as_str());
                if let Some(session) = session {
                    request = request.header("mcp-session-id", session.as_str());
                }
            }
            None => {}
        }
        request
    }

    /// Reads a JSON or SSE answer until the response to `id` arrives.
    /// Requests the upstream sends on an SSE answer are decided by
    /// [`seam::decide`]; those relayed to the agent belong to this stream,
    /// and if it fails or ends before the response the agent is told they
    /// are cancelled.
    async fn read_answer(
        &self,
        response: reqwest::Response,
        id: u64,
        era: &Era,
        relay: Option<&Relay<'_>>,
    ) -> Result<Answer, UpstreamError> {
        let mut relayed: Vec<String> = Vec::new();
        let mut abandoned = Abandoned {
            upstream: self.name.clone(),
            replies: Vec::new(),
        };
        let answer = self
            .read_stream(response, id, era, relay, &mut relayed, &mut abandoned)
            .await;
        if answer.is_ok() {
            // The upstream finished the call: whatever it asked was
            // answered or no longer matters to it.
            abandoned.replies.clear();
        }
        if answer.is_err()
            && let Some(relay) = relay
        {
            for relayed_id in relayed {
                let cancelled = json!({
                    "jsonrpc": "2.0",
                    "method": "notifications/cancelled",
                    "params": {
                        "requestId": relayed_id,
                        "reason": format!("upstream {}'s response stream for this call failed", self.name),
                    }
                });
                // Bounded by the peer's send timeout; a gone agent needs
                // no telling.
                if relay
                    .peer
                    .send(cancelled.to_string().into_bytes())
                    .await
                    .is_err()
                {
                    break;
                }
            }
        }
        answer
    }

    async fn read_stream(
        &self,
        mut response: reqwest::Response,
        id: u64,
        era: &Era,
        relay: Option<&Relay<'_>>,
        relayed: &mut Vec<String>,
        abandoned: &mut Abandoned,
    ) -> Result<Answer, UpstreamError> {
        let event_stream = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !event_stream {
            let body = self.read_body(&mut response).await?;
            let message: Value = serde_json::from_slice(&body)
                .map_err(|_| self.unavailable("its answer is not JSON"))?;
            return self
                .answer_of(&message, &body, id)
                .ok_or_else(|| self.unavailable("its answer is not the response to the request"));
        }
        let mut buffer: Vec<u8> = Vec::new();
        // Where the search for an event's end resumes: bytes before it
        // were searched already (a terminator is at most 4 bytes, so the
        // last 3 are searched again), which keeps a long event linear.
        let mut searched = 0;
        loop {
            let chunk = response.chunk().await.map_err(|e| self.transport(&e))?;
            let ended = chunk.is_none();
            if let Some(chunk) = chunk {
                buffer.extend_from_slice(&chunk);
            }
            // Complete events end with a blank line; at the end of the body
            // whatever is left is the last event.
            while let Some(end) = event_end(&buffer[searched..])
                .map(|end| end + searched)
                .or(ended.then_some(buffer.len()).filter(|&n| n > 0))
            {
                if end > self.max_answer_bytes {
                    return Err(self.too_large());
                }
                searched = 0;
                let event: Vec<u8> = buffer.drain(..end).collect();
                for payload in corkboard_mcp::client::data_payloads(&event) {
                    let Ok(message) = serde_json::from_slice::<Value>(&payload) else {
                        continue;
                    };
                    if let Some(answer) = self.answer_of(&message, &payload, id) {
                        return Ok(answer);
                    }
                    if message.get("method").is_some() && message.get("id").is_some() {
                        self.server_request(era, relay, relayed, abandoned, &payload)
                            .await;
                    }
                    // Notifications (progress, logging) are not relayed.
                }
            }
            if ended {
                return Err(self.unavailable("its event stream ended without the response"));
            }
            // An event still incomplete past the bound is never read whole.
            if buffer.len() > self.max_answer_bytes {
                return Err(self.too_large());
            }
            searched = buffer.len().saturating_sub(3);
        }
    }

    /// The answer in `message` (parsed from `payload`) when it is the
    /// response to `id`.
    fn answer_of(&self, message: &Value, payload: &[u8], id: u64) -> Option<Answer> {
        if message.get("method").is_some() || message.get("id") != Some(&json!(id)) {
            return None;
        }
        if message.get("result").is_some() {
            // The result's own bytes: already parsed once, so this cannot
            // fail.
            let raw: RawResponse = serde_json::from_slice(payload).ok()?;
            return Some(Answer::Result(raw.result));
        }
        let error = message.get("error")?;
        Some(Answer::Error {
            code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
            message: error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("")
                .chars()
                .take(512)
                .collect(),
        })
    }

    /// The JSON-RPC error to `id` in a refused request's JSON body (read
    /// within the answer bound), if that is what it holds.
    async fn error_body(&self, response: &mut reqwest::Response, id: u64) -> Option<Answer> {
        let json = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        if !json {
            return None;
        }
        let body = self.read_body(response).await.ok()?;
        let message: Value = serde_json::from_slice(&body).ok()?;
        match self.answer_of(&message, &body, id) {
            Some(answer @ Answer::Error { .. }) => Some(answer),
            _ => None,
        }
    }

    /// A request the upstream sent on a response stream: relayed to the
    /// agent, or answered at once in the background (the stream goes on
    /// being read either way).
    async fn server_request(
        &self,
        era: &Era,
        relay: Option<&Relay<'_>>,
        relayed: &mut Vec<String>,
        abandoned: &mut Abandoned,
        payload: &[u8],
    ) {
        let (revision, session) = match era {
            Era::Modern => (MODERN, None),
            Era::Legacy { session, version } => (
                Revision::parse(version).unwrap_or(LEGACY),
                session.as_deref(),
            ),
        };
        let reply = match seam::decide(&self.name, revision, session, relay, relayed.len(), payload)
        {
            Decision::Reply(reply) => reply,
            Decision::Relay {
                message,
                relayed_id,
            } => {
                let Some(relay) = relay else { return };
                match relay.peer.send(message).await {
                    Ok(()) => {
                        relayed.push(relayed_id);
                        let ended = RpcError::internal(
                            "Internal error: the call this request belongs to ended before the agent answered (the agent's stream closed, the run ended, or this stream failed)",
                        );
                        if let Some(id) = seam::request_id(payload) {
                            let reply = seam::error_reply(&id, &ended);
                            abandoned.replies.push(self.post(
                                reply,
                                Some(era),
                                None,
                                None,
                                "response",
                            ));
                        }
                        return;
                    }
                    Err(why) => {
                        tracing::info!(upstream = %self.name, run = relay.run, outcome = "agent_unreachable", "relay request failed");
                        seam::unreachable_reply(payload, &why)
                    }
                }
            }
        };
        self.reply_in_background(era, reply);
    }

    /// Sends `reply` to the upstream in the background.
    fn reply_in_background(&self, era: &Era, reply: Vec<u8>) {
        let post = self.post(reply, Some(era), None, None, "response");
        let name = self.name.clone();
        tokio::spawn(async move {
            let sent = tokio::time::timeout(seam::ANSWER_TIMEOUT, post.send()).await;
            if !matches!(sent, Ok(Ok(ref r)) if r.status().is_success()) {
                tracing::warn!(upstream = %name, "could not deliver the refusal of an upstream's request to the client");
            }
        });
    }

    /// A JSON answer's body, read up to [`Self::max_answer_bytes`] (a
    /// declared length over it is refused before reading).
    async fn read_body(&self, response: &mut reqwest::Response) -> Result<Vec<u8>, UpstreamError> {
        let limit = self.max_answer_bytes;
        if response.content_length().is_some_and(|n| n > limit as u64) {
            return Err(self.too_large());
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| self.transport(&e))? {
            if body.len() + chunk.len() > limit {
                return Err(self.too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    /// An answer over the bound: logged (never its content), and the
    /// caller's correlated error.
    fn too_large(&self) -> UpstreamError {
        let limit = self.max_answer_bytes;
        tracing::warn!(upstream = %self.name, limit_bytes = limit, outcome = "answer_too_large", "upstream answer too large; not read further");
        UpstreamError::TooLarge(format!(
            "upstream {} answer too large: more than {limit} bytes in one answer (upstream_max_answer_bytes); not relayed",
            self.name
        ))
    }

    fn unavailable(&self, why: &str) -> UpstreamError {
        UpstreamError::Unavailable(format!("upstream {} unavailable: {why}", self.name))
    }

    fn status(&self, status: u16, what: &str) -> UpstreamError {
        let why = match status {
            401 | 403 => format!(
                "it refused the gateway's credential for {what} (HTTP {status}); the tenant's admin must update it"
            ),
            _ => format!("it answered {what} with HTTP {status}"),
        };
        self.unavailable(&why)
    }

    fn transport(&self, err: &reqwest::Error) -> UpstreamError {
        // reqwest's Display names the URL but never headers.
        let why = if let Some(refusal) = corkboard_egress::refusal_in(err) {
            tracing::warn!(upstream = %self.name, rule = refusal.rule().as_str(), "upstream connection refused by the egress policy");
            refusal.to_string()
        } else if err.is_connect() {
            "it refused or dropped the connection".to_owned()
        } else if err.is_timeout() {
            "it did not answer in time".to_owned()
        } else {
            let kind = if err.is_body() || err.is_decode() {
                "its answer broke off"
            } else {
                "the HTTP exchange failed"
            };
            kind.to_owned()
        };
        self.unavailable(&why)
    }

    fn timed_out(&self, deadline: Duration) -> UpstreamError {
        self.unavailable(&format!("no answer within {} ms", deadline.as_millis()))
    }
}

/// The error replies owed to the upstream for requests relayed on one of
/// its streams, sent (in the background) if that stream ends without the
/// call's result: it failed, or the call was dropped (the agent's stream
/// closed, the run ended). Per stream, so a replacement stream's requests
/// are never touched.
struct Abandoned {
    upstream: UpstreamName,
    replies: Vec<reqwest::RequestBuilder>,
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        if self.replies.is_empty() {
            return;
        }
        let replies = std::mem::take(&mut self.replies);
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        tracing::info!(upstream = %self.upstream, count = replies.len(), outcome = "abandoned", "relay requests completed with errors: their call ended");
        runtime.spawn(async move {
            for reply in replies {
                let _ = tokio::time::timeout(seam::ANSWER_TIMEOUT, reply.send()).await;
            }
        });
    }
}

/// Where the first complete SSE event in `buffer` ends (after its blank line).
fn event_end(buffer: &[u8]) -> Option<usize> {
    let lf = buffer.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    let crlf = buffer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| i + 4);
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn client_info() -> Value {
    json!({ "name": "corkboard-gateway", "version": env!("CARGO_PKG_VERSION") })
}

#[cfg(test)]
mod tests {
    use super::*;

    use corkboard_board::{HeaderName, SealedCredential, TenantId, Timestamp, UpstreamUrl};
    use corkboard_egress::EgressPolicy;
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn upstream(url: &str) -> Upstream {
        Upstream {
            tenant: TenantId::parse("acme").unwrap(),
            name: UpstreamName::parse("big").unwrap(),
            url: UpstreamUrl::parse(url).unwrap(),
            header: HeaderName::parse("X-Key").unwrap(),
            credential: SealedCredential::from_bytes(vec![2; 40]),
            created_at: Timestamp::now(),
            created_by: "admin".into(),
            trust_first_listing: false,
        }
    }

    fn sessions() -> Arc<Sessions> {
        Arc::new(SharedTable::new(
            crate::shares::Table::Sessions,
            crate::shares::ShareLimits::of(16, 25, 6),
        ))
    }

    fn options(max_answer_bytes: usize) -> UpstreamOptions {
        UpstreamOptions {
            egress: Arc::new(EgressPolicy::from_entries(&["127.0.0.1"]).unwrap()),
            max_answer_bytes,
            ..UpstreamOptions::default()
        }
    }

    /// A loopback upstream answering every request with `head` and then
    /// `filler` bytes for ever (until the client stops reading).
    async fn endless(content_type: &'static str, head: &'static str) -> u16 {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 16 * 1024];
                    let _ = stream.read(&mut buf).await;
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nConnection: close\r\n\r\n{head}"
                    );
                    if stream.write_all(answer.as_bytes()).await.is_err() {
                        return;
                    }
                    let filler = vec![b' '; 16 * 1024];
                    while stream.write_all(&filler).await.is_ok() {}
                });
            }
        });
        port
    }

    #[actix_rt::test(system = "corkboard_testkit::MultiThread")]
    async fn answers_over_the_bound_are_not_read_further() {
        for (kind, head) in [
            (
                "application/json",
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tools\":[",
            ),
            (
                "text/event-stream",
                "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{",
            ),
        ] {
            let port = endless(kind, head).await;
            let options = options(64 * 1024);
            let http = options.egress.client_builder().build().unwrap();
            let client = UpstreamClient::new(
                http,
                &options,
                &upstream(&format!("http://127.0.0.1:{port}/mcp")),
                &Credential::parse("k".into()).unwrap(),
                sessions(),
            )
            .unwrap();
            let err = client
                .list_tools(Duration::from_secs(20), 1, AgentCapabilities::default())
                .await
                .unwrap_err();
            assert!(matches!(err, UpstreamError::TooLarge(_)), "{kind}: {err}");
            assert!(
                err.to_string()
                    .contains("upstream big answer too large: more than 65536 bytes"),
                "{err}"
            );
        }
    }

    #[test]
    fn a_literal_internal_address_gets_no_client_and_says_which_rule() {
        let strict = UpstreamOptions::default();
        let http = strict.egress.client_builder().build().unwrap();
        for (url, rule) in [
            ("http://127.0.0.1:9/mcp", "127.0.0.1 is loopback"),
            ("http://2130706433:9/mcp", "127.0.0.1 is loopback"),
            (
                "http://169.254.169.254/",
                "169.254.169.254 is a cloud metadata address",
            ),
            (
                "http://[::ffff:10.0.0.1]/",
                "::ffff:10.0.0.1 is a private address",
            ),
        ] {
            let err = UpstreamClient::new(
                http.clone(),
                &strict,
                &upstream(url),
                &Credential::parse("k".into()).unwrap(),
                sessions(),
            )
            .unwrap_err()
            .to_string();
            assert!(
                err.contains(&format!("egress refused: {rule}")),
                "{url}: {err}"
            );
        }
    }

    #[test]
    fn events_end_at_blank_lines() {
        assert_eq!(event_end(b"data: x\n\ndata: y"), Some(9));
        assert_eq!(event_end(b"data: x\r\n\r\n"), Some(11));
        assert_eq!(event_end(b"data: x\n"), None);
    }
}
