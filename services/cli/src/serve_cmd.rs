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
    let settings = args.config.load()?;
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
    let mut settings = settings;
    // Bind before building the state, so that port 0 resolves to the real
    // port in every URL the server hands out.
    // With a backlog matching the connection cap.
    let listener = conn::bind(settings.listen, settings.max_connections)
        .with_context(|| format!("listen: cannot bind {}", settings.listen))?;
    let bound = listener.local_addr()?;
    settings.listen = bound;
    actix_web::rt::System::new().block_on(async move {
        let state = crate::compose::app_state(settings, policy).await?;
        // One webhook delivery worker per server process (leases keep
        // replicas from sending the same delivery).
        let deliveries = corkboard_server::webhooks::DeliveryWorker::spawn(
            state.store.clone(),
            (*state.webhook_hosts).clone(),
            state.upstream_key.clone(),
            corkboard_server::webhooks::DeliveryLimits::from_settings(&state.settings),
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
        let handle = server.handle();
        let web = state.web.clone();
        actix_web::rt::spawn(async move {
            crate::signals::terminated().await;
            tracing::info!("stopping: draining in-flight requests");
            web.close();
            handle.stop(true).await;
        });
        if role == Role::Serve {
            // Local CLI commands (`grant create --data-dir`) read this to
            // print URLs that reach this process.
            // Private like everything in the data dir (0600).
            let _ = corkboard_config::write_private(
                &crate::grant_cmd::served_url_path(&state.settings.data_dir),
                state.public_url().as_bytes(),
            );
        }
        announce(&state, role, bound, started);
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

/// Start-up lines on stdout: scripts and tests read the first one.
fn announce(state: &AppState, role: Role, bound: std::net::SocketAddr, started: Instant) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "listening on http://{bound}");
    if role == Role::Serve {
        let link = state.web.create_signin_link(&state.public_url());
        let _ = writeln!(
            out,
            "sign in: {link}   (one-time link to the web board, valid 15 minutes)"
        );
        let dir = state.settings.data_dir.display();
        let _ = writeln!(out, "data dir: {dir} (board: {dir}/board.sqlite3)");
        let _ = writeln!(
            out,
            "admin credential: signing secret at {}; mint a token with `corkboard admin token --data-dir {dir} --role platform-admin`",
            state.settings.jwt_secret_path().display()
        );
        let _ = writeln!(
            out,
            "hand an agent its board: `corkboard grant create --data-dir {dir} --tenant <tenant> --run <run> --caps issues:read,issues:create`"
        );
    }
    let _ = out.flush();
    tracing::info!(
        address = %bound,
        startup_ms = started.elapsed().as_millis() as u64,
        "ready"
    );
}
