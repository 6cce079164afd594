//! `corkboard serve` and `corkboard server`: build the app, bind, run until
//! SIGINT/SIGTERM, then drain in-flight requests.

use crate::cli::RoleArgs;
use crate::compose::SecretPolicy;
use actix_web::{App, HttpServer, web};
use anyhow::{Context, Result};
use corkboard_server::AppState;
use corkboard_telemetry::HttpTelemetry;
use corkboard_telemetry::conn::{self, ConnectionCap, ConnectionGate};
use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Embedded defaults; secrets are created on first start.
    Serve,
    /// Cluster role; secrets must be provided.
    Server,
}

pub fn run(args: RoleArgs, role: Role) -> Result<ExitCode> {
    let started = Instant::now();
    let settings = args.load()?;
    if args.check_config {
        return check_config(&settings, role == Role::Server);
    }
    let service = match role {
        Role::Serve => "corkboard-serve",
        Role::Server => "corkboard-server",
    };
    let telemetry = crate::logging::init_telemetry(&settings, service)?;
    let policy = match role {
        Role::Serve => SecretPolicy::CreateIfMissing,
        Role::Server => SecretPolicy::MustExist,
    };
    let sources = crate::compose::connection_sources(&settings)?;
    // One `serve` per data dir: a second one would share the board but
    // overwrite the first's record, and clients would reach whichever
    // started last. Held until the process ends.
    let held = match role {
        Role::Serve => Some(crate::datadir::ServeLock::acquire(&settings.data_dir)?),
        Role::Server => None,
    };
    let board_flags = board_flags(&args.config, &settings);
    let mut settings = settings;
    // Bind before building the state, so that port 0 resolves to the real
    // port in every URL the server hands out.
    // With a backlog matching the connection cap.
    let listener = conn::bind(settings.listen, settings.max_connections)
        .with_context(|| format!("listen: cannot bind {}", settings.listen))?;
    let bound = listener.local_addr()?;
    settings.listen = bound;
    actix_web::rt::System::new().block_on(async move {
        // Caught before the announcement below (see `StopSignals`).
        let stop = crate::signals::StopSignals::catch()?;
        let state = crate::compose::app_state(settings, policy).await?;
        // One webhook delivery worker per server process (leases keep
        // replicas from sending the same delivery).
        let deliveries = corkboard_server::webhooks::DeliveryWorker::spawn(
            state.store.clone(),
            (*state.webhook_hosts).clone(),
            state.upstream_key.clone(),
            corkboard_server::webhooks::DeliveryLimits::from_settings(&state.settings),
            Some(state.web.events()),
        )
        .context("webhooks: cannot build the delivery client")?;
        // ---- runner (corkboard-gateway, issue 10): `serve` hosts the
        // register API (/v1/runs) and dedicated-port run gateways
        // in-process. Its routes go before `corkboard_server::routes`,
        // whose /v1 scope answers 404 for paths it does not know.
        let runner = match role {
            Role::Serve => Some(
                crate::compose::start_runner(&state)
                    .await
                    .context("starting the runner")?,
            ),
            Role::Server => None,
        };
        let runner_api = runner.as_ref().map(corkboard_gateway::Runner::api);
        // ---- end runner
        let data = web::Data::new(state.clone());
        // Who may call the register API mounted beside the admin API: the
        // same admins (bearer JWT or web session).
        let authenticator = state.authenticator();
        let metrics = state.metrics.clone();
        let settings = &state.settings;
        let cap = ConnectionCap::new("server", settings.max_connections, Some(metrics.clone()))
            .with_sources(sources)
            .with_next_head_deadline(
                Duration::from_millis(settings.keep_alive_ms),
                Duration::from_millis(settings.header_timeout_ms),
            );
        let workers = conn::http_workers();
        let on_connect = cap.clone();
        let metrics_server = metrics_listener(&state)?;
        let separate_metrics = metrics_server.is_some();
        // Nagle off: a response written in more than one chunk must not
        // wait for the client's delayed ACK (a 40 ms p50 under load).
        let server = HttpServer::new(move || {
            let runner_api = runner_api.clone();
            App::new()
                .wrap(ConnectionGate)
                .wrap(
                    HttpTelemetry::new(metrics.clone())
                        .without_spans_for(["/healthz", "/readyz", "/metrics"]),
                )
                .app_data(data.clone())
                .app_data(authenticator.clone())
                .configure(move |cfg| {
                    if let Some(api) = &runner_api {
                        api.configure(cfg); // runner (see above)
                    }
                })
                .configure(move |cfg| {
                    if separate_metrics {
                        corkboard_server::routes_without_metrics(cfg);
                    } else {
                        corkboard_server::routes(cfg);
                    }
                })
        })
        .tcp_nodelay(true)
        .workers(workers)
        .max_connections(cap.per_worker(workers))
        .client_request_timeout(Duration::from_millis(settings.header_timeout_ms))
        .keep_alive(Duration::from_millis(settings.keep_alive_ms))
        .on_connect(move |io, extensions| on_connect.on_connect(io, extensions))
        .listen(listener)
        .context("listen: cannot serve on the bound socket")?
        .shutdown_timeout(crate::signals::ShutdownPlan::of(settings).http.as_secs())
        .disable_signals()
        .run();
        // Our own signal handling: end the web board's live streams first,
        // or open pages would hold the graceful stop for its whole timeout.
        let web = state.web.clone();
        crate::signals::stop_server_on_signal(stop, server.handle(), move || web.close());
        if let Some(held) = &held {
            // Local CLI commands (`grant create`) read this to print URLs
            // that reach this process, and a second `serve` to name it.
            held.publish(&state.public_url())?;
        }
        announce(&state, role, bound, started, &board_flags);
        if let Some((_, addr)) = &metrics_server {
            announce_metrics(*addr);
        }
        server.await.context("HTTP server failed")?;
        if let Some((handle, _)) = metrics_server {
            handle.stop(true).await;
        }
        deliveries.stop();
        if let Some(runner) = runner {
            runner.shutdown().await; // runner: drain its runs
        }
        // In-flight requests are drained; write the audit records they left.
        state.audit.close().await;
        tracing::info!(
            audit_written = state.audit.written(),
            audit_lost = state.audit.lost(),
            "stopped"
        );
        if let Err(err) = telemetry.shutdown().await {
            tracing::warn!(error = %err, "trace export did not finish flushing");
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// `/metrics` on its own listener when `metrics_listen` asks for it (off
/// the API's port: an Ingress or a sandbox reaching the API never reaches
/// metrics, whose labels name tenants). Runs until its handle stops it.
pub fn metrics_listener(
    state: &AppState,
) -> Result<Option<(actix_web::dev::ServerHandle, std::net::SocketAddr)>> {
    let Some(addr) = state.settings.metrics_listen else {
        return Ok(None);
    };
    let listener = std::net::TcpListener::bind(addr)
        .with_context(|| format!("metrics_listen: cannot bind {addr}"))?;
    let bound = listener.local_addr()?;
    let data = web::Data::new(state.clone());
    let server = HttpServer::new(move || {
        App::new()
            .app_data(data.clone())
            .configure(corkboard_server::metrics_route)
    })
    .workers(1)
    .disable_signals()
    .shutdown_timeout(1)
    .listen(listener)
    .context("metrics_listen: cannot serve on the bound socket")?
    .run();
    let handle = server.handle();
    actix_web::rt::spawn(server);
    Ok(Some((handle, bound)))
}

/// The line that says where metrics are, after the first one.
pub fn announce_metrics(addr: std::net::SocketAddr) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "metrics on http://{addr}/metrics");
    let _ = out.flush();
}

/// `--check-config`: prints the effective configuration (secrets redacted)
/// and, for cluster roles, checks that the secret files it names can be
/// read, so a bad Secret mount fails here rather than at start-up.
pub fn check_config(settings: &corkboard_config::Settings, cluster_role: bool) -> Result<ExitCode> {
    crate::compose::connection_sources(settings)?;
    if cluster_role {
        crate::compose::admin_verifier(settings, SecretPolicy::MustExist)?;
        crate::compose::session_keys(settings, SecretPolicy::MustExist)?;
        crate::compose::upstream_key(settings, SecretPolicy::MustExist)?;
        crate::compose::install_redis_tls(settings)?;
    }
    write!(std::io::stdout(), "{}", settings.to_redacted_toml())?;
    Ok(ExitCode::SUCCESS)
}

/// The `CORKBOARD_*` settings that choose the board, its registry or the
/// admin key: given through the environment, a command printed in the
/// banner works only with the same environment, and the banner says so.
const BOARD_ENV: &[&str] = &[
    "CORKBOARD_STORE",
    "CORKBOARD_MONGODB_URI",
    "CORKBOARD_MONGODB_DATABASE",
    "CORKBOARD_REGISTRY",
    "CORKBOARD_REDIS_URL",
    "CORKBOARD_JWT_SECRET_FILE",
    "CORKBOARD_JWT_ALGORITHM",
];

/// The flags that make a client command open this process's board: the
/// configuration file and the data dir, both absolute.
fn board_flags(config: &crate::cli::ConfigArgs, settings: &corkboard_config::Settings) -> String {
    let mut flags = String::new();
    if let Some(file) = &config.config {
        let file = std::path::absolute(file).unwrap_or_else(|_| file.clone());
        flags.push_str(&format!(
            "--config {} ",
            shell_word(&file.display().to_string())
        ));
    }
    flags.push_str(&format!(
        "--data-dir {}",
        shell_word(&settings.data_dir.display().to_string())
    ));
    flags
}

/// `word` as one shell word: quoted when it holds anything but the
/// characters paths usually have.
fn shell_word(word: &str) -> String {
    let plain = word
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@%".contains(c));
    if plain && !word.is_empty() {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// What the banner says the board and the registry are.
fn backends(settings: &corkboard_config::Settings) -> (String, &'static str) {
    let store = match settings.store {
        corkboard_config::StoreKind::Sqlite => format!(
            "SQLite, {}",
            settings
                .data_dir
                .join(corkboard_store_sqlite::FILE_NAME)
                .display()
        ),
        corkboard_config::StoreKind::Mongodb => {
            format!("MongoDB, database {}", settings.mongodb_database)
        }
    };
    let registry = match settings.registry {
        corkboard_config::RegistryKind::Memory => "in-process (reads the board's grant ledger)",
        corkboard_config::RegistryKind::Redis => "Redis (shared by every replica)",
    };
    (store, registry)
}

/// Start-up lines on stdout: scripts and tests read the first one.
fn announce(
    state: &AppState,
    role: Role,
    bound: std::net::SocketAddr,
    started: Instant,
    board_flags: &str,
) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "listening on http://{bound}");
    if role == Role::Serve {
        let settings = &state.settings;
        let url = state.public_url();
        if bound.ip().is_unspecified() && settings.public_url.is_none() {
            let _ = writeln!(
                out,
                "serving on every address; links below say {url}: set --public-url to the address other machines use"
            );
        }
        let link = state.web.create_signin_link(&url);
        let _ = writeln!(
            out,
            "sign in: {link}   (one-time link to the web board, valid 15 minutes)"
        );
        let (store, registry) = backends(settings);
        let _ = writeln!(out, "data dir: {}", settings.data_dir.display());
        let _ = writeln!(out, "board: {store}");
        let _ = writeln!(out, "token registry: {registry}");
        let _ = writeln!(
            out,
            "admin credential: signing secret at {}; mint a token with `corkboard admin token {board_flags} --role platform-admin`",
            settings.jwt_secret_path().display()
        );
        let _ = writeln!(
            out,
            "hand an agent its board: `corkboard grant create {board_flags} --tenant <tenant> --run <run> --caps issues:read,issues:create`"
        );
        let from_env: Vec<&str> = BOARD_ENV
            .iter()
            .copied()
            .filter(|name| std::env::var_os(name).is_some())
            .collect();
        if !from_env.is_empty() {
            let _ = writeln!(
                out,
                "(these commands need the same {} in their environment)",
                from_env.join(", ")
            );
        }
    }
    let _ = out.flush();
    tracing::info!(
        address = %bound,
        startup_ms = started.elapsed().as_millis() as u64,
        "ready"
    );
}
