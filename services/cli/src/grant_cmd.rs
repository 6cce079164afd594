//! `corkboard grant create|list|renew|revoke`, locally (`--data-dir`) or against
//! a server's admin API (`--server URL` with an admin JWT).

use crate::cli::ConfigArgs;
use crate::compose::SecretPolicy;
use crate::exit::{Kind, fail, usage};
use anyhow::{Context, Result, anyhow, bail};
use clap::{Args, Subcommand};
use corkboard_board::{Capabilities, GrantId, RunId, TenantId};
use corkboard_grants::{GrantRequest, Renewal};
use corkboard_server::AppState;
use serde_json::{Value, json};
use std::io::Write;
use std::process::ExitCode;

#[derive(Debug, Subcommand)]
pub enum GrantCommand {
    /// Create a grant and print its token (shown once) and MCP client configuration.
    #[command(after_help = "\
Examples:
  corkboard grant create --tenant acme --run run-1 --caps issues:read,issues:create
  corkboard grant create --tenant acme --run run-1 --caps issues:read --mcp-config > board.json
  corkboard grant create --tenant acme --run run-1 --caps issues:read --budgets create_issue=3 --json
  corkboard grant create --tenant acme --run run-1 --caps issues:read --min-integrity agent
  corkboard grant create --server http://127.0.0.1:4891 --tenant acme --run run-1 --caps issues:read")]
    Create {
        #[command(flatten)]
        target: Target,
        /// The tenant whose board the run may use.
        #[arg(long)]
        tenant: String,
        /// The run the grant is for (1-64 of a-z, A-Z, 0-9, '-', '_', '.').
        #[arg(long)]
        run: String,
        /// Comma-separated: issues:read, issues:create, issues:update, comments:write, issues:claim.
        #[arg(long)]
        caps: String,
        /// Lifetime, e.g. 30m, 1h, 7d.
        #[arg(long, default_value = "1h")]
        ttl: String,
        /// What the run may write in total, e.g. create_issue=3,update_issue=20,add_comment=10
        /// (any of the three) [default: unlimited].
        #[arg(long)]
        budgets: Option<String>,
        /// The lowest integrity of what the run is shown: external (anything),
        /// agent (what people and runs that called no upstream tool wrote) or
        /// person (what people wrote) [default: everything].
        #[arg(long)]
        min_integrity: Option<String>,
        /// Print JSON instead of text.
        #[arg(long, conflicts_with = "mcp_config")]
        json: bool,
        /// Print only the agent's MCP client configuration (JSON, token
        /// included), e.g. `> board.json` for `claude --mcp-config board.json`.
        #[arg(long)]
        mcp_config: bool,
    },
    /// Show one grant, with each budget's limit, used and remaining.
    #[command(after_help = "\
Examples:
  corkboard grant get --tenant acme gr_01J9Z8Q4X2V6K3M5N7P9R1T3W5
  corkboard grant get --tenant acme gr_01J9Z8Q4X2V6K3M5N7P9R1T3W5 --json")]
    Get {
        #[command(flatten)]
        target: Target,
        /// The grant to show.
        grant: String,
        /// Its tenant (required with --server).
        #[arg(long)]
        tenant: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// List the grants of a tenant (tokens are never shown again).
    #[command(after_help = "\
Examples:
  corkboard grant list --tenant acme
  corkboard grant list --tenant acme --run run-1 --json")]
    List {
        #[command(flatten)]
        target: Target,
        /// The tenant whose grants to list.
        #[arg(long)]
        tenant: String,
        /// Only the grants of this run.
        #[arg(long)]
        run: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Extend a live grant's expiry, keeping its token (bounded by the
    /// grant's maximum lifetime from its creation).
    #[command(after_help = "\
Examples:
  corkboard grant renew --tenant acme gr_01J9Z8Q4X2V6K3M5N7P9R1T3W5 --extend-by 30m
  corkboard grant renew --tenant acme gr_01J9Z8Q4X2V6K3M5N7P9R1T3W5 --expires-at 2026-12-01T18:00:00Z")]
    Renew {
        #[command(flatten)]
        target: Target,
        /// The grant to renew.
        grant: String,
        /// Its tenant (required with --server).
        #[arg(long)]
        tenant: Option<String>,
        /// Add this to the current expiry, e.g. 30m, 1h.
        #[arg(
            long,
            conflicts_with = "expires_at",
            required_unless_present = "expires_at"
        )]
        extend_by: Option<String>,
        /// The new expiry, RFC 3339 (e.g. 2026-12-01T18:00:00Z).
        #[arg(long)]
        expires_at: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Revoke one grant, or every grant of a run (`--tenant T --run R`).
    #[command(after_help = "\
Examples:
  corkboard grant revoke --tenant acme gr_01J9Z8Q4X2V6K3M5N7P9R1T3W5
  corkboard grant revoke --tenant acme --run run-1")]
    Revoke {
        #[command(flatten)]
        target: Target,
        /// The grant to revoke.
        grant: Option<String>,
        /// The tenant of the grant or run (required with --run, and with --server).
        #[arg(long)]
        tenant: Option<String>,
        /// Revoke every grant of this run instead of one grant.
        #[arg(long)]
        run: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// Where the board lives: a server's admin API, or the local data dir
/// (the one a running `serve` uses; never a new one).
#[derive(Debug, Args)]
pub struct Target {
    /// Admin API base URL (e.g. http://127.0.0.1:4891); the admin JWT comes from CORKBOARD_ADMIN_TOKEN.
    #[arg(long, env = "CORKBOARD_SERVER", value_name = "URL")]
    pub server: Option<String>,
    #[command(flatten)]
    pub config: ConfigArgs,
}

pub fn run(cmd: GrantCommand) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run_async(cmd))
}

async fn run_async(cmd: GrantCommand) -> Result<ExitCode> {
    match cmd {
        GrantCommand::Create {
            target,
            tenant,
            run,
            caps,
            ttl,
            budgets,
            min_integrity,
            json,
            mcp_config,
        } => {
            let tenant = TenantId::parse(tenant).context("--tenant")?;
            let run = RunId::parse(run).context("--run")?;
            let caps = Capabilities::parse_csv(&caps).context("--caps")?;
            let ttl_parsed = corkboard_board::parse_ttl(&ttl).context("--ttl")?;
            let budgets = corkboard_board::Budgets::parse_csv(budgets.as_deref().unwrap_or(""))
                .context("--budgets")?;
            let min_integrity = min_integrity
                .map(|level| corkboard_board::Integrity::parse("min_integrity", &level))
                .transpose()
                .context("--min-integrity")?;
            let out = match Remote::from_target(&target)? {
                Some(remote) => {
                    let caps: Vec<String> = caps.iter().map(|c| c.as_str().to_owned()).collect();
                    remote
                        .call(
                            reqwest::Method::POST,
                            &format!("/v1/tenants/{tenant}/grants"),
                            Some(json!({
                                "run": run, "capabilities": caps, "ttl": ttl, "budgets": budgets,
                                "min_integrity": min_integrity,
                            })),
                        )
                        .await?
                }
                None => {
                    let state = local_state(&target.config).await?;
                    let issued = state
                        .grants
                        .issue(GrantRequest {
                            tenant,
                            run,
                            capabilities: caps,
                            ttl: ttl_parsed,
                            created_by: "local".into(),
                            budgets,
                            min_integrity,
                        })
                        .await?;
                    state.issued_grant_json(&issued)
                }
            };
            if mcp_config {
                println_json(&out["mcp_config"])?;
                return Ok(ExitCode::SUCCESS);
            }
            print_created(&out, json)
        }
        GrantCommand::List {
            target,
            tenant,
            run,
            json,
        } => {
            let tenant = TenantId::parse(tenant).context("--tenant")?;
            let run = run.map(RunId::parse).transpose().context("--run")?;
            let out = match Remote::from_target(&target)? {
                Some(remote) => {
                    let mut path = format!("/v1/tenants/{tenant}/grants?limit=200");
                    if let Some(run) = &run {
                        path.push_str(&format!("&run={run}"));
                    }
                    remote.call(reqwest::Method::GET, &path, None).await?
                }
                None => {
                    let state = local_state(&target.config).await?;
                    let events = state
                        .store
                        .list_grants(&tenant, run.as_ref(), None, 200)
                        .await?;
                    let mut grants = Vec::with_capacity(events.len());
                    for event in &events {
                        grants.push(local_grant_json(&state, event).await?);
                    }
                    json!({ "grants": grants })
                }
            };
            if json {
                println_json(&out)?;
            } else {
                let mut stdout = std::io::stdout().lock();
                for g in out["grants"].as_array().into_iter().flatten() {
                    writeln!(
                        stdout,
                        "{}  run={}  caps={}  status={}  expires={}",
                        str_of(&g["id"]),
                        str_of(&g["run"]),
                        g["capabilities"]
                            .as_array()
                            .map(|a| a.iter().map(str_of).collect::<Vec<_>>().join(","))
                            .unwrap_or_default(),
                        str_of(&g["status"]),
                        str_of(&g["expires_at"]),
                    )?;
                    if let Some(line) = budgets_line(g) {
                        writeln!(stdout, "  {line}")?;
                    }
                    if let Some(floor) = g["min_integrity"].as_str() {
                        writeln!(stdout, "  min_integrity: {floor}")?;
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        GrantCommand::Get {
            target,
            grant,
            tenant,
            json,
        } => {
            let id = GrantId::parse(grant).context("GRANT_ID")?;
            let out = match Remote::from_target(&target)? {
                Some(remote) => {
                    let tenant =
                        tenant.ok_or_else(|| usage("--tenant is required with --server"))?;
                    let tenant = TenantId::parse(tenant).context("--tenant")?;
                    remote
                        .call(
                            reqwest::Method::GET,
                            &format!("/v1/tenants/{tenant}/grants/{id}"),
                            None,
                        )
                        .await?
                }
                None => {
                    let state = local_state(&target.config).await?;
                    let event = state.store.grant(&id).await?;
                    local_grant_json(&state, &event).await?
                }
            };
            if json {
                println_json(&out)?;
            } else {
                let mut stdout = std::io::stdout().lock();
                writeln!(
                    stdout,
                    "{}  run={}  status={}  expires={}",
                    str_of(&out["id"]),
                    str_of(&out["run"]),
                    str_of(&out["status"]),
                    str_of(&out["expires_at"]),
                )?;
                if let Some(line) = budgets_line(&out) {
                    writeln!(stdout, "  {line}")?;
                }
                if let Some(floor) = out["min_integrity"].as_str() {
                    writeln!(stdout, "  min_integrity: {floor}")?;
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        GrantCommand::Renew {
            target,
            grant,
            tenant,
            extend_by,
            expires_at,
            json,
        } => {
            let id = GrantId::parse(grant).context("GRANT_ID")?;
            let out = match Remote::from_target(&target)? {
                Some(remote) => {
                    let tenant =
                        tenant.ok_or_else(|| usage("--tenant is required with --server"))?;
                    let tenant = TenantId::parse(tenant).context("--tenant")?;
                    let body = match (&extend_by, &expires_at) {
                        (Some(by), _) => json!({ "extend_by": by }),
                        (None, at) => json!({ "expires_at": at }),
                    };
                    remote
                        .call(
                            reqwest::Method::PATCH,
                            &format!("/v1/tenants/{tenant}/grants/{id}"),
                            Some(body),
                        )
                        .await?
                }
                None => {
                    let how = match (extend_by, expires_at) {
                        (Some(by), _) => Renewal::ExtendBy(
                            corkboard_board::parse_ttl(&by).context("--extend-by")?,
                        ),
                        (None, Some(at)) => Renewal::Until(
                            corkboard_board::Timestamp::parse_rfc3339(&at).ok_or_else(|| {
                                usage("--expires-at: expected an RFC 3339 instant")
                            })?,
                        ),
                        (None, None) => return Err(usage("give --extend-by or --expires-at")),
                    };
                    let state = local_state(&target.config).await?;
                    let event = state.grants.renew(&id, how).await?;
                    json!({ "id": event.grant.id, "run": event.grant.run, "expires_at": event.grant.expires_at })
                }
            };
            if json {
                println_json(&out)?;
            } else {
                writeln!(
                    std::io::stdout(),
                    "renewed; expires {}",
                    str_of(&out["expires_at"])
                )?;
            }
            Ok(ExitCode::SUCCESS)
        }
        GrantCommand::Revoke {
            target,
            grant,
            tenant,
            run,
            json,
        } => {
            let out = match (grant, run) {
                (Some(_), Some(_)) => {
                    return Err(usage("give either a GRANT_ID or --run, not both"));
                }
                (None, None) => return Err(usage("give a GRANT_ID, or --tenant T --run R")),
                (Some(grant), None) => {
                    let id = GrantId::parse(grant).context("GRANT_ID")?;
                    match Remote::from_target(&target)? {
                        Some(remote) => {
                            let tenant = tenant
                                .ok_or_else(|| usage("--tenant is required with --server"))?;
                            let tenant = TenantId::parse(tenant).context("--tenant")?;
                            remote
                                .call(
                                    reqwest::Method::DELETE,
                                    &format!("/v1/tenants/{tenant}/grants/{id}"),
                                    None,
                                )
                                .await?
                        }
                        None => {
                            let state = local_state(&target.config).await?;
                            let event = state.grants.revoke(&id, "local").await?;
                            json!({ "id": event.grant.id, "run": event.grant.run, "revoked_at": event.revoked_at })
                        }
                    }
                }
                (None, Some(run)) => {
                    let tenant = tenant.ok_or_else(|| usage("--tenant is required with --run"))?;
                    let tenant = TenantId::parse(tenant).context("--tenant")?;
                    let run = RunId::parse(run).context("--run")?;
                    match Remote::from_target(&target)? {
                        Some(remote) => {
                            remote
                                .call(
                                    reqwest::Method::POST,
                                    &format!("/v1/tenants/{tenant}/runs/{run}/revoke"),
                                    None,
                                )
                                .await?
                        }
                        None => {
                            let state = local_state(&target.config).await?;
                            let events = state.grants.revoke_run(&tenant, &run, "local").await?;
                            json!({ "run": run, "revoked": events.iter().map(|e| json!({"id": e.grant.id})).collect::<Vec<_>>() })
                        }
                    }
                }
            };
            if json {
                println_json(&out)?;
            } else {
                writeln!(std::io::stdout(), "{}", revoked_text(&out))?;
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// What a revocation did, from its answer (one grant's, or a run's list):
/// a run whose grants were all revoked before says so rather than
/// "revoked". (A run without any grant is refused before this.)
fn revoked_text(out: &Value) -> String {
    match out["revoked"].as_array() {
        None => format!("revoked grant {}", str_of(&out["id"])),
        Some(grants) if grants.is_empty() => format!(
            "run {}: every grant of it was already revoked; nothing changed",
            str_of(&out["run"])
        ),
        Some(grants) => format!(
            "revoked {} grant(s) of run {}",
            grants.len(),
            str_of(&out["run"])
        ),
    }
}

/// A grant read from the local data dir, as the admin API shows it.
async fn local_grant_json(
    state: &corkboard_server::AppState,
    e: &corkboard_board::GrantEvent,
) -> Result<Value> {
    Ok(corkboard_server::admin::grant_json_checked(state, e).await)
}

/// `budgets: create_issue 2/3 used (1 left), ...`, for a grant with budgets.
fn budgets_line(grant: &Value) -> Option<String> {
    let budgets = grant["budgets"].as_object()?;
    let parts: Vec<String> = budgets
        .iter()
        .map(|(kind, b)| {
            format!(
                "{kind} {}/{} used ({} left)",
                str_of(&b["used"]),
                str_of(&b["limit"]),
                str_of(&b["remaining"])
            )
        })
        .collect();
    Some(format!("budgets: {}", parts.join(", ")))
}

fn str_of(v: &Value) -> String {
    v.as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| v.to_string())
}

fn println_json(v: &Value) -> Result<()> {
    writeln!(std::io::stdout(), "{}", serde_json::to_string_pretty(v)?)?;
    Ok(())
}

fn print_created(out: &Value, json: bool) -> Result<ExitCode> {
    if json {
        println_json(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    let g = &out["grant"];
    let mut s = std::io::stdout().lock();
    writeln!(s, "grant:    {}", str_of(&g["id"]))?;
    writeln!(s, "tenant:   {}", str_of(&g["tenant"]))?;
    writeln!(s, "run:      {}", str_of(&g["run"]))?;
    writeln!(
        s,
        "caps:     {}",
        g["capabilities"]
            .as_array()
            .map(|a| a.iter().map(str_of).collect::<Vec<_>>().join(","))
            .unwrap_or_default()
    )?;
    writeln!(s, "expires:  {}", str_of(&g["expires_at"]))?;
    writeln!(
        s,
        "token:    {}   (shown once; store it as a secret)",
        str_of(&out["token"])
    )?;
    writeln!(s, "mcp url:  {}", str_of(&out["mcp_url"]))?;
    writeln!(
        s,
        "MCP client configuration (Claude Code: save as a file and pass --mcp-config FILE):"
    )?;
    writeln!(s, "{}", serde_json::to_string_pretty(&out["mcp_config"])?)?;
    Ok(ExitCode::SUCCESS)
}

/// The board of the data dir, as the `serve` running on it sees it: URLs
/// it prints are that server's (its record, trusted only while it runs).
/// A data dir without a board is refused, never made.
pub(crate) async fn local_state(config: &ConfigArgs) -> Result<AppState> {
    let mut settings = config.load()?;
    crate::datadir::require_board(&settings)?;
    if settings.public_url.is_none()
        && let Some(url) = crate::datadir::running_serve(&settings.data_dir).and_then(|h| h.url)
    {
        settings.public_url = Some(url);
    }
    // The board exists (`serve` or an in-process `corkboard run` made it);
    // secrets a board made by `run` lacks are made beside it, as before.
    Ok(crate::compose::app_state(settings, SecretPolicy::CreateIfMissing).await?)
}

/// Extra CA certificates (PEM) that `--server https://...` is verified against.
pub(crate) const SERVER_CA_FILE_ENV: &str = "CORKBOARD_SERVER_CA_FILE";

/// The admin JWT every `--server` command sends.
pub(crate) const ADMIN_TOKEN_ENV: &str = "CORKBOARD_ADMIN_TOKEN";

/// An admin API client.
pub struct Remote {
    base: String,
    token: String,
    client: reqwest::Client,
}

impl Remote {
    pub(crate) fn from_target(target: &Target) -> Result<Option<Self>> {
        target.server.as_deref().map(Self::new).transpose()
    }

    /// A client of the admin API at `base`, with the admin JWT from
    /// `CORKBOARD_ADMIN_TOKEN`. `https://` is verified against the public
    /// roots (rustls, the workspace's one TLS stack) plus the PEM
    /// certificates in `CORKBOARD_SERVER_CA_FILE`, for a private CA.
    pub fn new(base: &str) -> Result<Self> {
        let token = std::env::var(ADMIN_TOKEN_ENV).map_err(|_| {
            fail(
                Kind::Auth,
                "--server needs an admin JWT in CORKBOARD_ADMIN_TOKEN (mint one with `corkboard admin token`)",
            )
        })?;
        let mut client = reqwest::Client::builder().timeout(std::time::Duration::from_secs(30));
        if let Some(path) = std::env::var_os(SERVER_CA_FILE_ENV) {
            let pem = std::fs::read(&path).with_context(|| {
                format!(
                    "{SERVER_CA_FILE_ENV}: cannot read {}",
                    path.to_string_lossy()
                )
            })?;
            let certificates = reqwest::Certificate::from_pem_bundle(&pem).with_context(|| {
                format!(
                    "{SERVER_CA_FILE_ENV}: {} holds no PEM certificate",
                    path.to_string_lossy()
                )
            })?;
            if certificates.is_empty() {
                bail!(
                    "{SERVER_CA_FILE_ENV}: {} holds no PEM certificate",
                    path.to_string_lossy()
                );
            }
            for certificate in certificates {
                client = client.add_root_certificate(certificate);
            }
        }
        Ok(Self {
            base: server_base(base)?,
            token,
            client: client.build()?,
        })
    }

    /// One call; a refusal becomes an error naming the status, the stable
    /// code and the server's message.
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value> {
        let (status, value) = self.call_status(method.clone(), path, body).await?;
        if status.is_success() {
            return Ok(value);
        }
        if value["error"]["code"].is_string() {
            return Err(fail(Kind::of_status(status), refusal_text(status, &value)));
        }
        // Not our envelope: whatever answered is not the corkboard API
        // this command needs.
        Err(self.not_corkboard(&method, path, status).await)
    }

    /// One call, answered with its status and body whatever the status;
    /// a server that cannot be reached, or that answers something other
    /// than JSON, is an error saying what to check.
    pub async fn call_status(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<(reqwest::StatusCode, Value)> {
        let mut request = self
            .client
            .request(method.clone(), format!("{}{}", self.base, path))
            .bearer_auth(&self.token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.map_err(|err| self.unreachable(&err))?;
        let status = response.status();
        let bytes = response
            .bytes()
            .await
            .map_err(|err| self.unreachable(&err))?;
        if bytes.is_empty() {
            return Ok((status, Value::Null));
        }
        match serde_json::from_slice(&bytes) {
            Ok(value) => Ok((status, value)),
            Err(_) => Err(self.not_corkboard(&method, path, status).await),
        }
    }

    /// Why the server could not be reached, in words that say what to check
    /// (never the HTTP library's own texts).
    fn unreachable(&self, err: &reqwest::Error) -> anyhow::Error {
        let base = &self.base;
        if err.is_connect() {
            return anyhow!(
                "no corkboard server answers at {base}: is it running? (check --server: {})",
                root_cause(err)
            );
        }
        if err.is_timeout() {
            return anyhow!("{base} did not answer within 30s: is --server the right address?");
        }
        anyhow!("the connection to {base} failed: {}", root_cause(err))
    }

    /// The error for an answer that is not corkboard's: asks `/healthz`
    /// whether a corkboard process is there at all, so the message says
    /// which of `--server`'s address or role is wrong.
    async fn not_corkboard(
        &self,
        method: &reqwest::Method,
        path: &str,
        status: reqwest::StatusCode,
    ) -> anyhow::Error {
        let base = &self.base;
        let health = self.client.get(format!("{base}/healthz")).send().await;
        let is_corkboard = match health {
            Ok(answer) if answer.status().is_success() => answer
                .json::<Value>()
                .await
                .is_ok_and(|v| v["status"] == "ok" && v["version"].is_string()),
            _ => false,
        };
        if is_corkboard {
            anyhow!(
                "{base} is a corkboard process, but it has no {method} {path} (answered {status}): \
                 is --server the right role? (grants, webhooks and upstreams are the server's; \
                 `corkboard run` also takes a runner)"
            )
        } else {
            anyhow!(
                "{base} does not look like a corkboard server (GET /healthz did not answer as \
                 corkboard does; {method} {path} answered {status}): check --server"
            )
        }
    }
}

/// `--server`, checked: an absolute http(s) URL with a host, without the
/// trailing slash (paths are appended to it).
fn server_base(raw: &str) -> Result<String> {
    let usable = reqwest::Url::parse(raw).ok().filter(|url| {
        matches!(url.scheme(), "http" | "https") && url.host_str().is_some_and(|h| !h.is_empty())
    });
    if usable.is_none() {
        return Err(usage(format!(
            "--server must be an absolute URL such as http://127.0.0.1:8080 (got {raw:?})"
        )));
    }
    Ok(raw.trim_end_matches('/').to_owned())
}

/// The innermost cause of an error (the OS's or TLS's words, e.g.
/// "Connection refused"), without the library's wrappers.
fn root_cause(err: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = err;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

/// How a refusal of the API reads: the status, the stable code and the
/// server's message.
pub fn refusal_text(status: reqwest::StatusCode, value: &Value) -> String {
    let code = str_of(&value["error"]["code"]);
    let message = str_of(&value["error"]["message"]);
    format!("server refused ({status}, {code}): {message}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_url_needs_a_scheme_and_a_host() {
        for bad in [
            "127.0.0.1:8080",
            "localhost:8080",
            "/v1",
            "ftp://host",
            "http://",
        ] {
            let err = server_base(bad).map(|_| ()).unwrap_err().to_string();
            assert!(
                err.contains("--server must be an absolute URL"),
                "{bad}: {err}"
            );
        }
        assert_eq!(
            server_base("http://127.0.0.1:8080/").unwrap(),
            "http://127.0.0.1:8080"
        );
    }
}
