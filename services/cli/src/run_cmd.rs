//! `corkboard run --tenant T --caps ... -- CMD [ARGS]`: registers a run with
//! its own gateway, runs CMD with the run's endpoint, token and MCP client
//! configuration in its environment, renews the run's grant while CMD lives
//! (`run_renew.rs`), forwards SIGINT/SIGTERM to it, revokes the run when CMD
//! ends however it ends, and exits with CMD's status.
//!
//! In-process (no `--server`): the gateway runs inside this process on the
//! data dir's board. With neither a server nor a usable data dir the agent
//! still gets every tool, each answering that this run has no board.
//! With `--server URL`: the run is registered through that server's or
//! runner's `POST /v1/runs` (admin JWT from `CORKBOARD_ADMIN_TOKEN`).

use crate::cli::ConfigArgs;
use crate::run_renew::{Attempt, KeepAlive};
use crate::signals::{Stop, StopSignals};
use anyhow::{Context, Result, anyhow};
use clap::Args;
use corkboard_board::{Capabilities, GrantLedger, RunId, TenantId, Timestamp};
use corkboard_config::{GatewayMode, Settings};
use corkboard_gateway::{Binding, Gateway, GatewayParts, MemoryLedger, Registration};
use corkboard_grants::{GrantRequest, GrantService, MemoryRegistry, TokenRegistry};
use corkboard_mcp::SessionKey;
use corkboard_server::audit::AuditWriter;
use futures_util::FutureExt;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::Write;
use std::panic::AssertUnwindSafe;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The tenant whose board the run writes to.
    #[arg(long)]
    tenant: String,
    /// Run id [default: run-<ulid>].
    #[arg(long)]
    run: Option<String>,
    /// Comma-separated: issues:read, issues:create, issues:update, comments:write, issues:claim.
    #[arg(long)]
    caps: String,
    /// Lifetime of the run's grant between renewals: renewed every third of
    /// it while CMD lives (same token) and revoked when CMD ends, so a
    /// `corkboard run` killed outright leaves a token that works at most
    /// this much longer [default: the tenant's run_ttl, else 15m].
    #[arg(long)]
    ttl: Option<String>,
    /// What the run may write in total, e.g. `create_issue=3,update_issue=20,
    /// add_comment=10` (any of create_issue, update_issue, add_comment, claim_issue, release_issue); capped per kind by the tenant's
    /// run_budgets (or the operator's), which also fill in kinds not named
    /// [default: the tenant's run_budgets, else unlimited].
    #[arg(long)]
    budgets: Option<String>,
    /// The lowest integrity of what the run is shown: external (anything),
    /// agent (what people and runs that called no upstream tool wrote) or
    /// person (what people wrote) [default: everything].
    #[arg(long)]
    min_integrity: Option<String>,
    /// Register against this server or runner (its `/v1/runs` API) instead of
    /// in-process; the admin JWT comes from CORKBOARD_ADMIN_TOKEN.
    #[arg(long, env = "CORKBOARD_SERVER")]
    server: Option<String>,
    /// Also pass this variable of this process's environment to CMD, which
    /// otherwise gets only the allow-list (PATH, HOME, LANG, ...) and the
    /// run's own variables; repeatable (e.g. `--pass-env ANTHROPIC_API_KEY`).
    /// `CORKBOARD_*` names are refused: they hold the operator's secrets.
    #[arg(long = "pass-env", value_name = "NAME")]
    pass_env: Vec<String>,
    #[command(flatten)]
    config: ConfigArgs,
    /// The command to run, after `--`.
    #[arg(last = true, required = true, num_args = 1..)]
    command: Vec<String>,
}

/// The variables of this process's environment CMD inherits without being
/// asked: what a shell and a locale need, nothing that could hold a secret.
/// Everything else (notably `CORKBOARD_MONGODB_URI`, `CORKBOARD_REDIS_URL`,
/// `CORKBOARD_ADMIN_TOKEN`, cloud and model credentials) stays here unless
/// named with `--pass-env`.
pub const CHILD_ENV_ALLOWED: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TERM", "TZ", "TMPDIR", "SHELL",
];

/// Allowed by prefix as well: the locale categories (`LC_ALL`, `LC_CTYPE`, ...).
const CHILD_ENV_ALLOWED_PREFIX: &str = "LC_";

/// The `--pass-env` names, checked: a valid variable name, and never one of
/// ours, whose values are the operator's secrets (store URIs, admin JWTs).
fn pass_env_names(names: &[String]) -> Result<Vec<String>> {
    names
        .iter()
        .map(|name| {
            let valid = !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                return Err(anyhow!("--pass-env {name:?}: not an environment variable name"));
            }
            if name.to_ascii_uppercase().starts_with("CORKBOARD_") {
                return Err(anyhow!(
                    "--pass-env {name}: CORKBOARD_* variables are never passed to the agent (they hold the operator's store URIs and credentials); the agent gets its own CORKBOARD_MCP_URL, CORKBOARD_TOKEN and CORKBOARD_MCP_CONFIG"
                ));
            }
            Ok(name.clone())
        })
        .collect()
}

/// The part of this process's environment CMD inherits: the allow-list and
/// the names passed with `--pass-env` (those not set here are skipped).
fn inherited_env(pass: &[String]) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    std::env::vars_os()
        .filter(|(name, _)| {
            let Some(name) = name.to_str() else {
                return false;
            };
            CHILD_ENV_ALLOWED.contains(&name)
                || name.starts_with(CHILD_ENV_ALLOWED_PREFIX)
                || pass.iter().any(|p| p == name)
        })
        .collect()
}

/// What the child gets, however the run was registered.
struct Handout {
    mcp_url: String,
    /// `CORKBOARD_MCP_URL`, `CORKBOARD_TOKEN`, `CORKBOARD_MCP_CONFIG_JSON`,
    /// `NO_PROXY`, `no_proxy`.
    env: BTreeMap<String, String>,
    mcp_config: Value,
}

impl Handout {
    fn from_registration(registration: &Registration) -> Self {
        Self {
            mcp_url: registration.mcp_url.clone(),
            env: registration
                .sandbox_env()
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect(),
            mcp_config: registration.mcp_config(),
        }
    }

    fn from_json(body: &Value) -> Result<Self> {
        let env = body["env"]
            .as_object()
            .ok_or_else(|| anyhow!("the server's answer has no `env`"))?
            .iter()
            .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
            .collect();
        Ok(Self {
            mcp_url: body["mcp_url"]
                .as_str()
                .ok_or_else(|| anyhow!("the server's answer has no `mcp_url`"))?
                .to_owned(),
            env,
            mcp_config: body["mcp_config"].clone(),
        })
    }
}

pub fn run(args: RunArgs) -> Result<ExitCode> {
    let tenant = TenantId::parse(args.tenant.clone()).context("--tenant")?;
    let run = match &args.run {
        Some(run) => RunId::parse(run.clone()).context("--run")?,
        None => corkboard_gateway::api::generated_run_id()?,
    };
    let caps = Capabilities::parse_csv(&args.caps).context("--caps")?;
    // Checked before anything is registered: a refused name starts nothing.
    pass_env_names(&args.pass_env)?;
    let asked_ttl = args
        .ttl
        .as_deref()
        .map(corkboard_board::parse_ttl)
        .transpose()
        .context("--ttl")?;
    let budgets = corkboard_board::Budgets::parse_csv(args.budgets.as_deref().unwrap_or(""))
        .context("--budgets")?;
    let min_integrity = args
        .min_integrity
        .as_deref()
        .map(|level| corkboard_board::Integrity::parse("min_integrity", level))
        .transpose()
        .context("--min-integrity")?;
    let settings = args.config.load()?;
    // The gateway's request log would interleave with CMD's own output;
    // it is shown only when asked for.
    if std::env::var_os("CORKBOARD_LOG").is_some() {
        crate::logging::init(settings.log_format);
    }
    let explicit_dir =
        args.config.data_dir.is_some() || std::env::var_os("CORKBOARD_DATA_DIR").is_some();
    let request = GrantRequest {
        tenant,
        run,
        capabilities: caps,
        // In-process: replaced by the tenant-capped lifetime below; remote:
        // the server decides from `args.ttl`.
        ttl: asked_ttl.unwrap_or(DEFAULT_RUN_TTL),
        created_by: "local".to_owned(),
        // Capped by the tenant's run_budgets: below in-process, by the
        // server's register API remotely.
        budgets,
        min_integrity,
    };
    let code = match args.server.clone() {
        Some(server) => {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            runtime.block_on(remote(server, request, &args))?
        }
        None => {
            actix_rt::System::new().block_on(in_process(settings, explicit_dir, request, &args))?
        }
    };
    Ok(ExitCode::from(code))
}

/// The run's grant lifetime between renewals when neither `--ttl` nor the
/// tenant's `run_ttl` says.
const DEFAULT_RUN_TTL: Duration = Duration::from_secs(15 * 60);

/// The grant's lifetime as issued: expiry minus creation, both by the
/// issuer's clock.
fn issued_ttl(created_at: Timestamp, expires_at: Timestamp) -> Duration {
    let millis = expires_at.as_millis() - created_at.as_millis();
    Duration::from_millis(u64::try_from(millis).unwrap_or(0)).max(Duration::from_secs(1))
}

/// The board a local run writes to, or none.
struct LocalBoard {
    grants: GrantService,
    binding: Binding,
    audit: Option<Arc<AuditWriter>>,
}

/// A board that cannot be opened leaves the run boardless (said on
/// stderr); a setting the grants need that does not parse is a
/// configuration error like any other and ends `corkboard run` with it.
async fn local_board(settings: &Settings, explicit_dir: bool) -> Result<LocalBoard> {
    let timeout = Duration::from_millis(settings.store_timeout_ms);
    // Checked whether or not a board opens: a boardless run would quietly
    // run with no budgets at all.
    crate::compose::run_budgets(settings)?;
    let reason = if explicit_dir || settings.data_dir.is_dir() {
        match crate::compose::open_store(settings).await {
            Ok(store) => match crate::compose::open_registry(settings, &store).await {
                Ok(registry) => {
                    let ledger: Arc<dyn GrantLedger> = store.clone();
                    let upstream_calls = crate::compose::upstream_calls(settings, ledger.clone())?;
                    let grants = crate::compose::grant_service(settings, ledger, registry.clone())?;
                    let audit = AuditWriter::spawn(store.clone());
                    let binding = Binding::new(store, registry, audit.clone(), timeout)
                        .with_result_budget(settings.max_result_bytes)
                        .with_claim_lease(Duration::from_millis(settings.claim_lease_ms))
                        .with_budgets(grants.budgets().clone())
                        .with_upstream_calls(upstream_calls);
                    return Ok(LocalBoard {
                        grants,
                        binding,
                        audit: Some(audit),
                    });
                }
                Err(err) => format!("{err}"),
            },
            Err(err) => format!("{err}"),
        }
    } else {
        format!("{} does not exist", settings.data_dir.display())
    };
    eprintln!(
        "corkboard run: no board for this run ({reason}); the agent's board tools will answer \"board unavailable in this run\" (start corkboard serve and pass --server, or pass --data-dir)"
    );
    let ledger: Arc<dyn GrantLedger> = Arc::new(MemoryLedger::new());
    let registry: Arc<dyn TokenRegistry> = Arc::new(MemoryRegistry::new());
    let grants = GrantService::new(ledger, registry.clone());
    Ok(LocalBoard {
        binding: Binding::boardless(registry, Arc::new(corkboard_board::NoopAuditSink), timeout)
            .with_budgets(grants.budgets().clone()),
        grants,
        audit: None,
    })
}

async fn in_process(
    mut settings: Settings,
    explicit_dir: bool,
    mut request: GrantRequest,
    args: &RunArgs,
) -> Result<u8> {
    // Caught from before the run is registered, so a signal arriving
    // meanwhile is passed on to CMD instead of killing this process before
    // it can revoke.
    let mut signals = StopSignals::catch()?;
    // One run needs no shared port: its gateway always has a port of its own.
    settings.gateway_mode = GatewayMode::Dedicated;
    let board = local_board(&settings, explicit_dir).await?;
    let config = crate::compose::gateway_config(&settings, SessionKey::generate(), None);
    let limiter = crate::compose::rate_limiter(&settings, config.rate_limit)?;
    let gateway = Gateway::start(
        config,
        GatewayParts {
            grants: board.grants,
            binding: board.binding,
            limiter,
            actor_arbiter: None,
            session_ends: None,
            metrics: None,
        },
    )?;
    let (tenant, run) = (request.tenant.clone(), request.run.clone());
    let asked = args.ttl.is_some().then_some(request.ttl);
    let registered = match gateway.run_ttl(&tenant, asked, DEFAULT_RUN_TTL).await {
        Ok(ttl) => match gateway.run_budgets(&tenant, &request.budgets).await {
            Ok(budgets) => {
                request.ttl = ttl;
                request.budgets = budgets;
                gateway.register(request).await
            }
            Err(err) => Err(err),
        },
        Err(err) => Err(err),
    };
    let outcome = match registered {
        Ok(registration) => {
            let handout = Handout::from_registration(&registration);
            announce(&tenant, &run, &handout.mcp_url);
            let grant = &registration.grant;
            let keep_alive = KeepAlive::new(
                issued_ttl(grant.created_at, grant.expires_at),
                grant.expires_at,
                |ttl| {
                    let (gateway, tenant, run) = (&gateway, &tenant, &run);
                    async move { renewed_in_process(gateway.renew(tenant, run, ttl).await) }
                },
            );
            // A panic in supervision must not skip the revocation below.
            AssertUnwindSafe(supervise(&handout, args, &mut signals, keep_alive))
                .catch_unwind()
                .await
                .unwrap_or_else(|_| Err(anyhow!("supervising the command failed unexpectedly")))
        }
        Err(err) => Err(anyhow::Error::from(err).context("registering the run")),
    };
    let revoked = gateway.revoke(&tenant, &run, "local").await;
    gateway.shutdown().await;
    if let Some(audit) = board.audit {
        audit.close().await;
    }
    if let Err(err) = revoked {
        eprintln!("corkboard run: revoking run {run} failed: {err}; it expires on its own");
    }
    outcome
}

/// What an in-process renewal came to.
fn renewed_in_process(
    result: Result<Vec<corkboard_board::GrantEvent>, corkboard_gateway::GatewayError>,
) -> Attempt {
    use corkboard_gateway::GatewayError;
    use corkboard_grants::RegistryError;
    match result {
        Ok(events) => match events.iter().map(|e| e.grant.expires_at).max() {
            Some(at) => Attempt::Renewed(at),
            None => Attempt::Refused("the run has no live grant".into()),
        },
        Err(
            err @ GatewayError::Registry(
                RegistryError::RenewRevoked(_)
                | RegistryError::RenewExpired(_)
                | RegistryError::LifetimeLimit { .. }
                | RegistryError::GrantNotFound
                | RegistryError::RunNotFound { .. },
            ),
        ) => Attempt::Refused(err.to_string()),
        Err(err) => Attempt::Failed(err.to_string()),
    }
}

/// What a renewal through a server's register API came to: 4xx refusals
/// are for good (revoked 409, expired 410, ...), except a rate limit.
async fn renewed_remotely(api: &crate::grant_cmd::Remote, path: &str, ttl: Duration) -> Attempt {
    let body = json!({ "ttl": format!("{}s", ttl.as_secs().max(1)) });
    match api
        .call_status(reqwest::Method::PATCH, path, Some(body))
        .await
    {
        Ok((status, value)) if status.is_success() => {
            match value["expires_at"]
                .as_str()
                .and_then(Timestamp::parse_rfc3339)
            {
                Some(at) => Attempt::Renewed(at),
                None => Attempt::Failed("the server's answer has no expires_at".into()),
            }
        }
        Ok((status, value))
            if status.is_client_error() && status != reqwest::StatusCode::TOO_MANY_REQUESTS =>
        {
            Attempt::Refused(crate::grant_cmd::refusal_text(status, &value))
        }
        Ok((status, value)) => Attempt::Failed(crate::grant_cmd::refusal_text(status, &value)),
        Err(err) => Attempt::Failed(format!("{err:#}")),
    }
}

async fn remote(server: String, request: GrantRequest, args: &RunArgs) -> Result<u8> {
    // Caught from before the run is registered, as in `in_process`.
    let mut signals = StopSignals::catch()?;
    // The register API of a server or runner.
    let api = crate::grant_cmd::Remote::new(&server)?;
    let caps: Vec<&str> = request.capabilities.iter().map(|c| c.as_str()).collect();
    let body = api
        .call(
            reqwest::Method::POST,
            "/v1/runs",
            Some(json!({
                "tenant": request.tenant,
                "run": request.run,
                "capabilities": caps,
                "ttl": args.ttl,
                "budgets": request.budgets,
                "min_integrity": request.min_integrity,
            })),
        )
        .await
        .context("registering the run")?;
    let handout = Handout::from_json(&body)?;
    announce(&request.tenant, &request.run, &handout.mcp_url);
    let instant = |field: &str| {
        body[field]
            .as_str()
            .and_then(Timestamp::parse_rfc3339)
            .ok_or_else(|| anyhow!("the server's answer has no `{field}`"))
    };
    let (created_at, expires_at) = (instant("created_at")?, instant("expires_at")?);
    let path = format!("/v1/runs/{}/{}", request.tenant, request.run);
    let keep_alive = KeepAlive::new(issued_ttl(created_at, expires_at), expires_at, |ttl| {
        let (api, path) = (&api, &path);
        async move { renewed_remotely(api, path, ttl).await }
    });
    let outcome = AssertUnwindSafe(supervise(&handout, args, &mut signals, keep_alive))
        .catch_unwind()
        .await
        .unwrap_or_else(|_| Err(anyhow!("supervising the command failed unexpectedly")));
    if let Err(err) = api.call(reqwest::Method::DELETE, &path, None).await {
        eprintln!(
            "corkboard run: revoking run {} failed: {err:#}; it expires on its own",
            request.run
        );
    }
    outcome
}

fn announce(tenant: &TenantId, run: &RunId, url: &str) {
    eprintln!(
        "corkboard run: run {run} on tenant {tenant}, MCP endpoint {url} (revoked when the command ends)"
    );
}

/// Runs the command with the run's environment until it ends, forwarding
/// SIGINT and SIGTERM and renewing the run's grant, and returns the exit
/// code to pass on.
async fn supervise<F, Fut>(
    handout: &Handout,
    args: &RunArgs,
    signals: &mut StopSignals,
    mut keep_alive: KeepAlive<F>,
) -> Result<u8>
where
    F: FnMut(Duration) -> Fut,
    Fut: std::future::Future<Output = Attempt>,
{
    let pass = pass_env_names(&args.pass_env)?;
    let (program, arguments) = args
        .command
        .split_first()
        .ok_or_else(|| anyhow!("no command given after --"))?;
    // Private (0600) and removed when this function returns, however it does.
    let mut config_file = tempfile::Builder::new()
        .prefix("corkboard-mcp-")
        .suffix(".json")
        .tempfile()
        .context("cannot write the MCP client configuration file")?;
    serde_json::to_writer_pretty(&mut config_file, &handout.mcp_config)?;
    config_file.flush()?;

    let mut child = tokio::process::Command::new(program);
    // A clean environment: the operator's holds the store URIs (with their
    // passwords) and the admin JWT, which reach every tenant's data; the
    // agent gets the allow-list, what was passed by name, and its run.
    child
        .env_clear()
        .envs(inherited_env(&pass))
        .args(arguments)
        .envs(&handout.env);
    child.env("CORKBOARD_MCP_CONFIG", config_file.path());
    for name in ["NO_PROXY", "no_proxy"] {
        let ours = handout.env.get(name).cloned().unwrap_or_default();
        let merged = match std::env::var(name) {
            Ok(existing) if !existing.trim().is_empty() && !ours.is_empty() => {
                format!("{existing},{ours}")
            }
            Ok(existing) if ours.is_empty() => existing,
            _ => ours,
        };
        child.env(name, merged);
    }
    let mut child = match child.spawn() {
        Ok(child) => child,
        Err(err) => {
            eprintln!("corkboard run: cannot start {program}: {err}");
            return Ok(match err.kind() {
                std::io::ErrorKind::NotFound => 127,
                _ => 126,
            });
        }
    };
    let pid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .and_then(rustix::process::Pid::from_raw);
    let status = loop {
        tokio::select! {
            status = child.wait() => break status?,
            () = keep_alive.tick() => {}
            stop = signals.next() => forward(pid, match stop {
                Stop::Interrupt => rustix::process::Signal::INT,
                Stop::Terminate => rustix::process::Signal::TERM,
            }),
        }
    };
    use std::os::unix::process::ExitStatusExt;
    Ok(match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code).unwrap_or(1),
        (None, Some(signal)) => u8::try_from(128 + signal).unwrap_or(255),
        (None, None) => 1,
    })
}

fn forward(pid: Option<rustix::process::Pid>, signal: rustix::process::Signal) {
    if let Some(pid) = pid {
        // The child may have exited a moment ago; nothing to do then.
        let _ = rustix::process::kill_process(pid, signal);
    }
}
