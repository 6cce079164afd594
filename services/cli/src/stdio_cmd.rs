//! `corkboard mcp stdio`: the board's MCP tools over stdin/stdout for a
//! local agent that starts `corkboard` as its MCP server process.
//!
//! The stdio transport is newline-delimited JSON-RPC: one message per line
//! in, one per line out. Stdout carries protocol messages and nothing else
//! (logs go to stderr), so that a client never reads a log line as a
//! message. Both protocol eras are served as the specification defines them
//! for stdio: a 2025 client's `initialize` opens the process-long session,
//! and a 2026-07-28 request carries its revision in `params._meta`.
//!
//! The grant comes from `CORKBOARD_TOKEN` only, never from an argument: the
//! tenant of every board operation is the token's, as on HTTP. Two modes,
//! chosen by configuration:
//!
//! - **local** (default): opens the data dir's board store and token
//!   registry directly and serves through the same engine, validator and
//!   `BoardTools` as the HTTP endpoint. The SQLite store is safe with other
//!   processes (a `corkboard serve`, other stdio processes) writing the
//!   same file. The token is resolved once at start (a refusal answers
//!   every request with the reason) and again on every tool call, so a
//!   grant revoked while the process runs stops working at its next call.
//! - **bridge** (`--server URL` / `CORKBOARD_SERVER`): relays each line to
//!   the server's Streamable HTTP endpoint with the token as a bearer
//!   credential and the headers HTTP needs (session id and protocol version
//!   for 2025 sessions, `MCP-Protocol-Version`/`Mcp-Method`/`Mcp-Name` for
//!   2026-07-28), and writes the answer back as one line. HTTP refusals
//!   become the JSON-RPC errors they carry, with the request's id.

use crate::cli::ConfigArgs;
use crate::compose::{open_registry, open_store};
use anyhow::{Context as _, Result, bail};
use async_trait::async_trait;
use base64::Engine as _;
use clap::{Args, Subcommand};
use corkboard_board::IssueStore;
use corkboard_config::Settings;
use corkboard_grants::RunToken;
use corkboard_mcp::{
    AuthRejection, Engine, Line, Principal, ServerIdentity, StdioOptions, ToolBackend, ToolCall,
    ToolOutput, ToolSet, meta_key, read_line, serve_stdio,
};
use corkboard_server::audit::AuditWriter;
use corkboard_tools::{BoardTools, ResolvedGrant};
use serde_json::{Value, json};
use std::io;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufRead, AsyncWrite, AsyncWriteExt, BufReader};

/// Where the run token comes from (never a flag: command lines are visible
/// to other users of the machine).
pub const TOKEN_ENV: &str = "CORKBOARD_TOKEN";

/// What a request gets when no token was configured. Local and bridge mode
/// say the same thing.
const NO_TOKEN: &str =
    "no run token: set CORKBOARD_TOKEN to the token `corkboard grant create` printed for this run";

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Serve the board's MCP tools on stdin/stdout (newline-delimited JSON-RPC) for a
    /// local agent; the grant comes from CORKBOARD_TOKEN.
    Stdio(StdioArgs),
}

#[derive(Debug, Args)]
pub struct StdioArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Relay to a running corkboard's MCP endpoint (base URL such as
    /// http://127.0.0.1:4891, or a full MCP URL ending in /mcp) instead of opening
    /// the data dir.
    #[arg(long, env = "CORKBOARD_SERVER")]
    pub server: Option<String>,
}

pub fn run(cmd: McpCommand) -> Result<ExitCode> {
    match cmd {
        McpCommand::Stdio(args) => stdio(args),
    }
}

fn stdio(args: StdioArgs) -> Result<ExitCode> {
    let settings = args.config.load()?;
    crate::logging::init(settings.log_format);
    let token = token_from_env();
    let bridge_url = args.server.as_deref().map(mcp_url).transpose()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let served = runtime.block_on(async move {
        let stdin = BufReader::new(tokio::io::stdin());
        let stdout = tokio::io::stdout();
        match bridge_url {
            Some(url) => serve_bridge(&settings, url, token, stdin, stdout).await,
            None => serve_local(&settings, token, stdin, stdout).await,
        }
    });
    // A signal can end serving while a blocking read of stdin is still
    // pending; waiting for it would hang until the client writes again.
    runtime.shutdown_background();
    served.map(|()| ExitCode::SUCCESS)
}

/// The token from the environment; blank counts as absent.
fn token_from_env() -> Option<String> {
    std::env::var(TOKEN_ENV)
        .ok()
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty())
}

/// The MCP endpoint for `--server`: a base URL gets `/mcp`; a URL already
/// naming an MCP path (`/mcp`, `/runs/{run}/mcp`) is used as given.
fn mcp_url(server: &str) -> Result<String> {
    let trimmed = server.trim().trim_end_matches('/');
    let Some(rest) = trimmed.strip_prefix("http://") else {
        if trimmed.starts_with("https://") {
            bail!(
                "--server: https is not supported by this build (no TLS client); use http:// on a trusted network or a local TLS-terminating proxy"
            );
        }
        bail!("--server: expected an http:// URL, got {trimmed:?}");
    };
    if rest.is_empty() || rest.starts_with('/') {
        bail!("--server: no host in {trimmed:?}");
    }
    Ok(if trimmed.ends_with("/mcp") {
        trimmed.to_owned()
    } else {
        format!("{trimmed}/mcp")
    })
}

/// Resolves when the process is asked to stop (SIGTERM, SIGINT).
async fn stop_requested() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) {
            (Ok(mut term), Ok(mut int)) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                }
            }
            _ => std::future::pending::<()>().await,
        }
    }
    #[cfg(not(unix))]
    {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

// ---------------------------------------------------------------------------
// Local mode

async fn serve_local<R, W>(
    settings: &Settings,
    token: Option<String>,
    input: R,
    output: W,
) -> Result<()>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let store = open_store(settings).await?;
    let registry = open_registry(settings, &store).await?;
    let audit = AuditWriter::spawn(store.clone());
    let issues: Arc<dyn IssueStore> = store.clone();
    let tools = BoardTools::new(issues, registry, audit.clone())
        .with_store_timeout(Duration::from_millis(settings.store_timeout_ms));
    let backend = Arc::new(StdioBoard { tools });
    let principal = backend.start(token.as_deref()).await;
    match &principal {
        Ok(p) => {
            let grant = p.grant.grant();
            tracing::info!(
                transport = "stdio",
                mode = "local",
                data_dir = %settings.data_dir.display(),
                tenant = %grant.tenant,
                run = %grant.run,
                grant = %grant.id,
                "serving MCP on stdio"
            );
        }
        Err(rejection) => tracing::warn!(
            transport = "stdio",
            mode = "local",
            reason = ?rejection,
            "the run token was refused; every request will be answered with the reason"
        ),
    }
    let engine = Engine::new(backend);
    let options = StdioOptions {
        max_line_bytes: settings.max_body_bytes,
    };
    let served = tokio::select! {
        served = serve_stdio(&engine, principal, options, input, output) => served.map_err(anyhow::Error::from),
        () = stop_requested() => {
            tracing::info!("stop requested; ending the stdio session");
            Ok(())
        }
    };
    // Every tool call so far left a queued record: write them before exit.
    audit.close().await;
    tracing::info!(
        audit_written = audit.written(),
        audit_lost = audit.lost(),
        "stdio session ended"
    );
    served.context("stdio transport")
}

/// The principal of a stdio process: the grant its token resolved to at
/// start, and the token itself, to resolve it again on every tool call.
#[derive(Debug, Clone)]
pub struct StdioGrant {
    /// Redacted in `Debug`; never logged.
    token: RunToken,
    grant: ResolvedGrant,
}

impl Principal for StdioGrant {
    fn session_binding(&self) -> &str {
        self.grant.session_binding()
    }
}

/// [`BoardTools`] for a process that lives as long as its agent: over HTTP
/// every request presents the token again, here the process is the
/// session, so tool calls re-resolve the token to notice a revocation or
/// expiry that happened after start.
#[derive(Debug)]
pub struct StdioBoard {
    tools: BoardTools,
}

impl StdioBoard {
    /// Resolves the configured token once, at start.
    async fn start(&self, token: Option<&str>) -> Result<StdioGrant, AuthRejection> {
        let Some(token) = token else {
            return Err(AuthRejection::Refused(NO_TOKEN.to_owned()));
        };
        self.authenticate(Some(token)).await
    }
}

#[async_trait]
impl ToolBackend for StdioBoard {
    type Principal = StdioGrant;

    fn identity(&self) -> &ServerIdentity {
        self.tools.identity()
    }

    async fn authenticate(&self, bearer: Option<&str>) -> Result<StdioGrant, AuthRejection> {
        let grant = self.tools.authenticate(bearer).await?;
        // `BoardTools` accepted it, so it has the token's shape.
        let token = bearer
            .and_then(RunToken::from_presented)
            .ok_or_else(|| AuthRejection::Refused("run token malformed".to_owned()))?;
        Ok(StdioGrant { token, grant })
    }

    fn tools(&self, principal: &StdioGrant) -> Arc<ToolSet> {
        self.tools.tools(&principal.grant)
    }

    async fn call_tool(&self, principal: &StdioGrant, call: ToolCall<'_>) -> ToolOutput {
        match self
            .tools
            .authenticate(Some(principal.token.expose()))
            .await
        {
            Ok(current) => self.tools.call_tool(&current, call).await,
            Err(rejection) => {
                let grant = principal.grant.grant();
                tracing::warn!(
                    transport = "stdio",
                    tenant = %grant.tenant,
                    run = %grant.run,
                    grant = %grant.id,
                    reason = ?rejection,
                    "tool call refused: the run token no longer resolves"
                );
                ToolOutput {
                    structured: None,
                    text: refusal_text(&rejection),
                    is_error: true,
                }
            }
        }
    }
}

/// How a tool call reports a token that stopped resolving mid-session, in
/// the words the HTTP transport uses for the same refusal.
fn refusal_text(rejection: &AuthRejection) -> String {
    match rejection {
        AuthRejection::Missing => format!("Unauthorized: {NO_TOKEN}"),
        AuthRejection::Refused(message) => format!(
            "Forbidden: {message}; this run may no longer use the board (ask for a new grant)"
        ),
        AuthRejection::Unavailable(message) => {
            format!("board unavailable: {message}; retry in a few seconds")
        }
    }
}

// ---------------------------------------------------------------------------
// Bridge mode

/// JSON-RPC error codes the bridge produces itself.
const INVALID_REQUEST: i64 = -32600;
const INTERNAL_ERROR: i64 = -32603;

/// How long one HTTP exchange with the server may take. Tool calls are
/// bounded on the server (store timeout), so this only catches a server
/// that stopped answering.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(60);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

async fn serve_bridge<R, W>(
    settings: &Settings,
    url: String,
    token: Option<String>,
    mut input: R,
    mut output: W,
) -> Result<()>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let http = reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .timeout(EXCHANGE_TIMEOUT)
        .build()
        .context("HTTP client")?;
    if token.is_none() {
        tracing::warn!(
            transport = "stdio",
            mode = "bridge",
            "{TOKEN_ENV} is not set; every request will be refused"
        );
    }
    tracing::info!(transport = "stdio", mode = "bridge", url = %url, "relaying MCP from stdio");
    let mut bridge = Bridge {
        http,
        url,
        token,
        session: None,
    };
    let max = settings.max_body_bytes;
    let mut line = Vec::new();
    // One listener for the whole session: a signal that arrives while a
    // message is being relayed must not be lost.
    let stop = stop_requested();
    tokio::pin!(stop);
    let served: io::Result<()> = async {
        loop {
            let kind = tokio::select! {
                read = read_line(&mut input, &mut line, max) => read?,
                () = &mut stop => {
                    tracing::info!("stop requested; ending the stdio session");
                    return Ok(());
                }
            };
            let replies = match kind {
                Line::Eof => return Ok(()),
                Line::TooLong => vec![error_line(
                    &Value::Null,
                    INVALID_REQUEST,
                    &format!("Invalid Request: message exceeds {max} bytes"),
                )],
                Line::Message => {
                    let text = line.strip_suffix(b"\r").unwrap_or(&line);
                    if text.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    tokio::select! {
                        replies = bridge.relay(text) => replies,
                        () = &mut stop => {
                            tracing::info!("stop requested; ending the stdio session");
                            return Ok(());
                        }
                    }
                }
            };
            for reply in replies {
                if !write_line(&mut output, &reply).await? {
                    tracing::info!("stdout closed; ending the stdio session");
                    return Ok(());
                }
            }
        }
    }
    .await;
    bridge.end_session().await;
    served.context("stdio transport")
}

/// A legacy (2025) session the bridge holds on the client's behalf.
#[derive(Debug, Clone)]
struct LegacySession {
    id: Option<String>,
    /// The negotiated revision, sent as `MCP-Protocol-Version`.
    version: Option<String>,
    /// The client's `initialize`, replayed if the server forgets the
    /// session (expired or ended): on stdio the session is the process.
    initialize: Vec<u8>,
}

struct Bridge {
    http: reqwest::Client,
    url: String,
    token: Option<String>,
    session: Option<LegacySession>,
}

/// What the bridge needs to know about one incoming line.
#[derive(Debug, Default)]
struct Shape {
    /// The request id; `None` for notifications, responses and lines that
    /// are not a single JSON-RPC request.
    id: Option<Value>,
    method: Option<String>,
    /// `params._meta` protocol version: a 2026-07-28 (stateless) message.
    modern_version: Option<String>,
    /// `params.name` of a `tools/call`.
    tool_name: Option<String>,
    /// A well-formed notification or response: never answered.
    unanswered: bool,
}

impl Shape {
    fn of(text: &[u8]) -> Self {
        let Ok(Value::Object(message)) = serde_json::from_slice::<Value>(text) else {
            return Self::default();
        };
        let method = message
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let params = message.get("params");
        let modern_version = params
            .and_then(|p| p.get("_meta"))
            .and_then(|m| m.get(meta_key::PROTOCOL_VERSION))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let tool_name = (method.as_deref() == Some("tools/call"))
            .then(|| params.and_then(|p| p.get("name")).and_then(Value::as_str))
            .flatten()
            .map(str::to_owned);
        let id = message.get("id").cloned();
        let unanswered = match (&id, &method) {
            (None, Some(_)) => true,
            (Some(_), None) => message.contains_key("result") || message.contains_key("error"),
            _ => false,
        };
        Self {
            id: id.filter(|_| method.is_some()),
            method,
            modern_version,
            tool_name,
            unanswered,
        }
    }

    fn is_initialize(&self) -> bool {
        self.method.as_deref() == Some("initialize") && self.modern_version.is_none()
    }
}

/// One HTTP answer, read whole.
struct Answer {
    status: u16,
    session_id: Option<String>,
    event_stream: bool,
    body: Vec<u8>,
}

impl Bridge {
    /// Relays one line; returns the lines to write back.
    async fn relay(&mut self, text: &[u8]) -> Vec<Vec<u8>> {
        let started = Instant::now();
        let shape = Shape::of(text);
        let (status, replies) = self.exchange(text, &shape).await;
        tracing::info!(
            transport = "stdio-bridge",
            method = method_label(shape.method.as_deref()),
            tool = shape
                .tool_name
                .as_deref()
                .filter(|n| is_tool_name(n))
                .unwrap_or(""),
            revision = shape
                .modern_version
                .as_deref()
                .or_else(|| self.session.as_ref().and_then(|s| s.version.as_deref()))
                .filter(|v| is_revision(v))
                .unwrap_or(""),
            status,
            latency_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
            "mcp relay"
        );
        replies
    }

    /// Relays one message; returns the HTTP status (0 when the server was
    /// not asked or not reached) and the lines to write back.
    async fn exchange(&mut self, text: &[u8], shape: &Shape) -> (u16, Vec<Vec<u8>>) {
        if self.token.is_none() {
            // Same answer as local mode; the server is not bothered.
            let replies = match (&shape.id, shape.unanswered) {
                (_, true) => Vec::new(),
                (Some(id), false) => vec![error_line(
                    id,
                    INVALID_REQUEST,
                    &format!("Forbidden: {NO_TOKEN}"),
                )],
                (None, false) => vec![error_line(
                    &Value::Null,
                    INVALID_REQUEST,
                    &format!("Forbidden: {NO_TOKEN}"),
                )],
            };
            return (0, replies);
        }
        let mut answer = match self.post(text, shape).await {
            Ok(answer) => answer,
            Err(err) => return (0, self.unreachable(shape, &err)),
        };
        if shape.is_initialize() {
            self.remember_session(text, &answer);
        } else if answer.status == 404
            && shape.modern_version.is_none()
            && self.session.is_some()
            && self.renew_session().await
        {
            // The server forgot the session (expired after its TTL, or
            // ended): the stdio client cannot see HTTP sessions, so the
            // bridge opened a new one and sends the message again.
            answer = match self.post(text, shape).await {
                Ok(answer) => answer,
                Err(err) => return (0, self.unreachable(shape, &err)),
            };
        }
        (answer.status, self.replies(shape, answer))
    }

    async fn post(&self, body: &[u8], shape: &Shape) -> Result<Answer, reqwest::Error> {
        let mut request = self
            .http
            .post(&self.url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .body(body.to_vec());
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(version) = &shape.modern_version {
            // 2026-07-28: the headers mirror the body; no session.
            request = request.header("MCP-Protocol-Version", header_text(version));
            if let Some(method) = &shape.method {
                request = request.header("Mcp-Method", header_text(method));
            }
            if let Some(name) = &shape.tool_name {
                request = request.header("Mcp-Name", header_text(name));
            }
        } else if !shape.is_initialize()
            && let Some(session) = &self.session
        {
            if let Some(id) = &session.id {
                request = request.header("Mcp-Session-Id", id.as_str());
            }
            if let Some(version) = &session.version {
                request = request.header("MCP-Protocol-Version", version.as_str());
            }
        }
        let response = request.send().await?;
        let status = response.status().as_u16();
        let session_id = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let event_stream = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.trim_start().starts_with("text/event-stream"));
        let body = response.bytes().await?.to_vec();
        Ok(Answer {
            status,
            session_id,
            event_stream,
            body,
        })
    }

    /// Keeps what a successful `initialize` established.
    fn remember_session(&mut self, initialize: &[u8], answer: &Answer) {
        if !(200..300).contains(&answer.status) {
            return;
        }
        let version = messages(answer)
            .iter()
            .filter_map(|m| serde_json::from_slice::<Value>(m).ok())
            .find_map(|m| {
                m.get("result")
                    .and_then(|r| r.get("protocolVersion"))
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            });
        if version.is_none() {
            return;
        }
        self.session = Some(LegacySession {
            id: answer.session_id.clone(),
            version,
            initialize: initialize.to_vec(),
        });
    }

    /// Opens a new session with the client's original `initialize`.
    async fn renew_session(&mut self) -> bool {
        let Some(old) = self.session.take() else {
            return false;
        };
        let init = Shape::of(&old.initialize);
        let renewed = match self.post(&old.initialize, &init).await {
            Ok(answer) => {
                self.remember_session(&old.initialize, &answer);
                self.session.is_some()
            }
            Err(err) => {
                tracing::warn!(error = %err, "could not renew the MCP session");
                false
            }
        };
        if !renewed {
            self.session = Some(old);
            return false;
        }
        let initialized = br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        if let Err(err) = self.post(initialized, &Shape::of(initialized)).await {
            tracing::warn!(error = %err, "could not confirm the renewed MCP session");
        }
        tracing::info!("the server no longer knew the MCP session; opened a new one");
        true
    }

    /// Ends the legacy session on the server (the client is gone).
    async fn end_session(&mut self) {
        let Some(LegacySession { id: Some(id), .. }) = self.session.take() else {
            return;
        };
        let mut request = self
            .http
            .delete(&self.url)
            .timeout(Duration::from_secs(2))
            .header("Mcp-Session-Id", id);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Err(err) = request.send().await {
            tracing::debug!(error = %err, "could not end the MCP session");
        }
    }

    /// The error a request gets when the server cannot be reached.
    fn unreachable(&self, shape: &Shape, err: &reqwest::Error) -> Vec<Vec<u8>> {
        let why = if err.is_timeout() {
            format!("no answer within {}s", EXCHANGE_TIMEOUT.as_secs())
        } else {
            err.to_string()
        };
        tracing::warn!(url = %self.url, error = %why, "MCP server unreachable");
        match &shape.id {
            Some(id) if !shape.unanswered => vec![error_line(
                id,
                INTERNAL_ERROR,
                &format!(
                    "board unavailable: cannot reach the corkboard server at {} ({why}); retry in a few seconds",
                    self.url
                ),
            )],
            _ => Vec::new(),
        }
    }

    /// Turns an HTTP answer into the lines the stdio client gets.
    fn replies(&self, shape: &Shape, answer: Answer) -> Vec<Vec<u8>> {
        let status = answer.status;
        let bodies = messages(&answer);
        if shape.unanswered {
            // A notification or response gets nothing back, unless the
            // validator found the message itself malformed (400), which
            // the local transport answers too. Other refusals (revoked
            // token, forgotten session) are only logged.
            if status == 400 {
                return bodies.into_iter().map(one_line).collect();
            }
            if !(200..300).contains(&status) {
                tracing::warn!(status, "the server refused a notification");
            }
            return Vec::new();
        }
        if bodies.is_empty() {
            return match &shape.id {
                Some(id) => vec![error_line(
                    id,
                    INTERNAL_ERROR,
                    &format!(
                        "Internal error: the MCP server answered HTTP {status} without a JSON-RPC response"
                    ),
                )],
                None => Vec::new(),
            };
        }
        bodies
            .into_iter()
            .map(|body| match serde_json::from_slice::<Value>(&body) {
                Ok(message) => with_request_id(message, shape.id.as_ref())
                    .map_or(body, |fixed| fixed.to_string().into_bytes()),
                Err(_) => {
                    let id = shape.id.clone().unwrap_or(Value::Null);
                    error_line(
                        &id,
                        INTERNAL_ERROR,
                        &format!("Internal error: the MCP server answered HTTP {status} with a body that is not JSON-RPC"),
                    )
                }
            })
            .map(one_line)
            .collect()
    }
}

/// A method name for the logs: known methods as they are, anything else
/// (client text) as `other`.
fn method_label(method: Option<&str>) -> &'static str {
    match method {
        None => "none",
        Some("initialize") => "initialize",
        Some("ping") => "ping",
        Some("tools/list") => "tools/list",
        Some("tools/call") => "tools/call",
        Some("server/discover") => "server/discover",
        Some("logging/setLevel") => "logging/setLevel",
        Some("notifications/initialized") => "notifications/initialized",
        Some("notifications/cancelled") => "notifications/cancelled",
        Some(m) if m.starts_with("notifications/") => "notifications/other",
        Some(_) => "other",
    }
}

/// A well-formed tool name (1-128 of `[A-Za-z0-9_.-]`), safe to log.
fn is_tool_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// A `YYYY-MM-DD` revision string, safe to log.
fn is_revision(version: &str) -> bool {
    version.len() == 10
        && version.bytes().enumerate().all(|(i, b)| {
            if i == 4 || i == 7 {
                b == b'-'
            } else {
                b.is_ascii_digit()
            }
        })
}

/// The JSON-RPC messages in an HTTP answer: the JSON body, or the `data`
/// of each server-sent event.
fn messages(answer: &Answer) -> Vec<Vec<u8>> {
    if answer.event_stream {
        return sse_data(&answer.body);
    }
    if answer.body.iter().all(u8::is_ascii_whitespace) {
        return Vec::new();
    }
    vec![answer.body.clone()]
}

/// The `data` payloads of a complete `text/event-stream` body.
fn sse_data(body: &[u8]) -> Vec<Vec<u8>> {
    let mut events = Vec::new();
    let mut data: Option<Vec<u8>> = None;
    for raw in body.split(|&b| b == b'\n') {
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        if line.is_empty() {
            if let Some(event) = data.take()
                && !event.iter().all(u8::is_ascii_whitespace)
            {
                events.push(event);
            }
            continue;
        }
        if let Some(value) = line.strip_prefix(b"data:") {
            let value = value.strip_prefix(b" ").unwrap_or(value);
            let event = data.get_or_insert_with(Vec::new);
            if !event.is_empty() {
                event.push(b'\n');
            }
            event.extend_from_slice(value);
        }
    }
    if let Some(event) = data
        && !event.iter().all(u8::is_ascii_whitespace)
    {
        events.push(event);
    }
    events
}

/// A refusal the server could not tie to a request (id null) gets the
/// request's id, so that the client can match it. `None`: leave as is.
fn with_request_id(mut message: Value, request_id: Option<&Value>) -> Option<Value> {
    // Only a valid id (string or number) may be echoed.
    let id = request_id.filter(|id| id.is_string() || id.is_number())?;
    let object = message.as_object_mut()?;
    if object.contains_key("error") && object.get("id").is_none_or(Value::is_null) {
        object.insert("id".to_owned(), id.clone());
        return Some(message);
    }
    None
}

/// Makes a JSON text one line. Raw line breaks can only be whitespace
/// between tokens in valid JSON (inside strings they are escaped), so
/// replacing them with spaces keeps the value and frames it for stdio.
fn one_line(mut body: Vec<u8>) -> Vec<u8> {
    for byte in &mut body {
        if *byte == b'\n' || *byte == b'\r' {
            *byte = b' ';
        }
    }
    body
}

fn error_line(id: &Value, code: i64, message: &str) -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
        .to_string()
        .into_bytes()
}

/// A header value for text taken from the body: as is when it is plain
/// visible ASCII, else in the `=?base64?…?=` form the 2026-07-28
/// transport defines (the server decodes it for `Mcp-Name`, and refuses a
/// mismatch for the others, which is what a client sending such a value
/// deserves).
fn header_text(value: &str) -> String {
    let plain = !value.is_empty()
        && value.bytes().all(|b| (0x20..0x7f).contains(&b))
        && !value.starts_with(' ')
        && !value.ends_with(' ');
    if plain {
        value.to_owned()
    } else {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(value)
        )
    }
}

/// Writes one message line. `Ok(false)`: the reader went away (broken
/// pipe), which ends the session without an error.
async fn write_line<W: AsyncWrite + Unpin>(output: &mut W, message: &[u8]) -> io::Result<bool> {
    let mut framed = Vec::with_capacity(message.len() + 1);
    framed.extend_from_slice(message);
    framed.push(b'\n');
    let written = match output.write_all(&framed).await {
        Ok(()) => output.flush().await,
        Err(e) => Err(e),
    };
    match written {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_urls_name_the_mcp_endpoint() {
        assert_eq!(
            mcp_url("http://127.0.0.1:4891").ok().as_deref(),
            Some("http://127.0.0.1:4891/mcp")
        );
        assert_eq!(
            mcp_url("http://h:1/").ok().as_deref(),
            Some("http://h:1/mcp")
        );
        assert_eq!(
            mcp_url("http://h:1/runs/r1/mcp").ok().as_deref(),
            Some("http://h:1/runs/r1/mcp")
        );
        assert!(mcp_url("https://h").is_err());
        assert!(mcp_url("h:1").is_err());
        assert!(mcp_url("http://").is_err());
    }

    #[test]
    fn shapes_tell_requests_from_notifications_and_eras_apart() {
        let s = Shape::of(
            br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"list_issues","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
        );
        assert_eq!(s.id, Some(json!(7)));
        assert_eq!(s.modern_version.as_deref(), Some("2026-07-28"));
        assert_eq!(s.tool_name.as_deref(), Some("list_issues"));
        assert!(!s.unanswered && !s.is_initialize());

        let s = Shape::of(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        assert!(s.unanswered && s.id.is_none());
        let s = Shape::of(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
        assert!(s.unanswered && s.id.is_none());
        let s = Shape::of(br#"{"jsonrpc":"2.0","id":"a","method":"initialize","params":{}}"#);
        assert!(s.is_initialize() && s.id == Some(json!("a")));
        for garbage in [&b"{nope"[..], b"42", b"[]", br#"{"id":1}"#] {
            let s = Shape::of(garbage);
            assert!(s.id.is_none() && !s.unanswered, "{garbage:?}");
        }
    }

    #[test]
    fn event_streams_yield_each_data_payload() {
        let body = b"event: message\ndata: {\"a\":1}\n\n: comment\ndata: {\"b\":\ndata: 2}\r\n\r\n";
        assert_eq!(
            sse_data(body),
            vec![b"{\"a\":1}".to_vec(), b"{\"b\":\n2}".to_vec()]
        );
        assert!(sse_data(b"event: ping\n\n").is_empty());
    }

    #[test]
    fn refusals_get_the_request_id_and_bodies_become_one_line() {
        let refusal = json!({"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"x"}});
        let fixed = with_request_id(refusal, Some(&json!(5)));
        assert_eq!(fixed.map(|m| m["id"].clone()), Some(json!(5)));
        let result = json!({"jsonrpc":"2.0","id":5,"result":{}});
        assert!(with_request_id(result, Some(&json!(5))).is_none());
        let pretty = b"{\n  \"a\": \"x\\ny\"\r\n}".to_vec();
        let line = one_line(pretty);
        assert!(!line.contains(&b'\n'));
        assert_eq!(
            serde_json::from_slice::<Value>(&line).ok(),
            Some(json!({"a": "x\ny"}))
        );
    }

    #[test]
    fn header_values_fall_back_to_base64() {
        assert_eq!(header_text("create_issue"), "create_issue");
        assert_eq!(header_text("é"), "=?base64?w6k=?=");
        assert_eq!(header_text(" x"), "=?base64?IHg=?=");
    }

    #[test]
    fn refusal_texts_say_what_happened() {
        let text = refusal_text(&AuthRejection::Refused("run token revoked".into()));
        assert!(text.starts_with("Forbidden: run token revoked"), "{text}");
        let text = refusal_text(&AuthRejection::Unavailable("registry down".into()));
        assert!(text.starts_with("board unavailable:"), "{text}");
    }
}
