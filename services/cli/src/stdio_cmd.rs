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
//!   Tool calls ask the same approval gate as HTTP; a call that must wait
//!   for a person answers at once with its handle (a stdio client cannot
//!   be held), collected later with `collect_approval`.
//! - **bridge** (`--server URL` / `CORKBOARD_SERVER`): relays each line to
//!   the server's Streamable HTTP endpoint with the token as a bearer
//!   credential and the headers HTTP needs (session id and protocol version
//!   for 2025 sessions, `MCP-Protocol-Version`/`Mcp-Method`/`Mcp-Name` for
//!   2026-07-28), and writes the answer back as one line. HTTP refusals
//!   become the JSON-RPC errors they carry, with the request's id. The
//!   client is `corkboard_mcp::client`; this file only configures it.

use crate::cli::ConfigArgs;
use crate::compose::{open_registry, open_store};
use anyhow::{Context as _, Result, bail};
use async_trait::async_trait;
use clap::{Args, Subcommand};
use corkboard_board::IssueStore;
use corkboard_config::Settings;
use corkboard_grants::ResolvedGrant;
use corkboard_grants::RunToken;
use corkboard_mcp::client::{ClientOptions, Credential, StreamableHttpClient, relay_stdio};
use corkboard_mcp::{
    AuthRejection, Authenticate, Engine, Principal, Refusal, ServerIdentity, StdioOptions,
    ToolBackend, ToolCall, ToolOutput, ToolSet, serve_stdio,
};
use corkboard_server::audit::AuditWriter;
use corkboard_tools::{ApprovalGate, BoardTools};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufRead, AsyncWrite, BufReader};

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
    #[command(after_help = "\
Examples:
  CORKBOARD_TOKEN=cbr_... corkboard mcp stdio
  CORKBOARD_TOKEN=cbr_... corkboard mcp stdio --server http://127.0.0.1:4891")]
    Stdio(StdioArgs),
}

#[derive(Debug, Args)]
pub struct StdioArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Relay to a running corkboard's MCP endpoint (base URL such as
    /// http://127.0.0.1:4891, or a full MCP URL ending in /mcp) instead of opening
    /// the data dir.
    #[arg(long, env = "CORKBOARD_SERVER", value_name = "URL")]
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
            Some(url) => {
                let options = StdioOptions {
                    max_line_bytes: settings.max_body_bytes,
                };
                serve_bridge(url, token, options, stdin, stdout).await
            }
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
    let mut stop = crate::signals::StopSignals::catch()?;
    // The board `serve` made, never a new empty one.
    crate::datadir::require_board(settings)?;
    let store = open_store(settings).await?;
    let registry = open_registry(settings, &store).await?;
    let audit = AuditWriter::spawn(store.clone());
    let issues: Arc<dyn IssueStore> = store.clone();
    let ledger: Arc<dyn corkboard_board::GrantLedger> = store.clone();
    let budgets = crate::compose::budget_counter(settings, ledger.clone())?;
    // What the run gateways recorded: whether this grant's run called an
    // upstream tool, for the level of its writes here.
    let upstream_calls = crate::compose::upstream_calls(settings, ledger.clone())?;
    // The same gate as HTTP: a call a policy covers waits for a person. A
    // stdio client cannot be held for one, so it gets the pending answer
    // at once and collects the outcome with the collect tool.
    let approvals = Arc::new(ApprovalGate::new(
        ledger,
        audit.clone(),
        Duration::from_millis(settings.store_timeout_ms),
    ));
    let tools = BoardTools::new(issues, registry, audit.clone())
        .with_approvals(approvals)
        .with_store_timeout(Duration::from_millis(settings.store_timeout_ms))
        .with_result_budget(settings.max_result_bytes)
        .with_claim_lease(Duration::from_millis(settings.claim_lease_ms))
        .with_budgets(budgets)
        .with_upstream_calls(upstream_calls);
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
        _ = stop.next() => {
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
impl Authenticate for StdioBoard {
    async fn authenticate(&self, bearer: Option<&str>) -> Result<StdioGrant, AuthRejection> {
        let grant = self.tools.authenticate(bearer).await?;
        // `BoardTools` accepted it, so it has the token's shape.
        let token = bearer
            .and_then(RunToken::from_presented)
            .ok_or_else(|| AuthRejection::Refused("run token malformed".to_owned()))?;
        Ok(StdioGrant { token, grant })
    }
}

#[async_trait]
impl ToolBackend for StdioBoard {
    type Principal = StdioGrant;

    fn identity(&self) -> &ServerIdentity {
        self.tools.identity()
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
                    text: refusal_text(&rejection).into(),
                    is_error: true,
                    relay: None,
                    content: Vec::new(),
                }
            }
        }
    }
}

/// How a tool call reports a token that stopped resolving mid-session.
fn refusal_text(rejection: &AuthRejection) -> String {
    Refusal::credential_tool_text(rejection)
}

// ---------------------------------------------------------------------------
// Bridge mode

/// How a request's error begins when the server cannot be reached: the
/// words of the board's honest degradation, as local mode uses them.
const UNREACHABLE: &str = "board unavailable: cannot reach the corkboard server";

/// Relays stdio to the server's MCP endpoint through `corkboard_mcp`'s
/// Streamable HTTP client; see the module docs.
async fn serve_bridge(
    url: String,
    token: Option<String>,
    options: StdioOptions,
    input: impl AsyncBufRead + Unpin,
    output: impl AsyncWrite + Unpin,
) -> Result<()> {
    let mut stop = crate::signals::StopSignals::catch()?;
    let credential = match token {
        Some(token) => Credential::Bearer(token),
        None => {
            tracing::warn!(
                transport = "stdio",
                mode = "bridge",
                "{TOKEN_ENV} is not set; every request will be refused"
            );
            // Same answer as local mode; the server is not bothered.
            Credential::Missing(NO_TOKEN.to_owned())
        }
    };
    let mut client = StreamableHttpClient::new(ClientOptions {
        url,
        credential,
        unreachable: UNREACHABLE.to_owned(),
    })
    .context("HTTP client")?;
    tracing::info!(transport = "stdio", mode = "bridge", url = %client.url(), "relaying MCP from stdio");
    relay_stdio(&mut client, options, input, output, async move {
        stop.next().await;
    })
    .await
    .context("stdio transport")
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
    fn refusal_texts_say_what_happened() {
        let text = refusal_text(&AuthRejection::Refused("run token revoked".into()));
        assert!(text.starts_with("Forbidden: run token revoked"), "{text}");
        let text = refusal_text(&AuthRejection::Unavailable("registry down".into()));
        assert!(text.starts_with("board unavailable:"), "{text}");
    }
}
