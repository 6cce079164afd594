//! `corkboard runner`: the runner role. Its `listen` port serves the
//! register API (`/v1/runs`) and health checks; runs are served on
//! dedicated per-run ports or on the shared gateway port, as configured
//! (`gateway_mode`). Runs until SIGINT/SIGTERM, then drains every run.

use crate::cli::RoleArgs;
use crate::compose::SecretPolicy;
use actix_web::{App, HttpServer, web};
use anyhow::{Context, Result};
use corkboard_telemetry::HttpTelemetry;
use corkboard_telemetry::conn::{self, ConnectionCap, ConnectionGate};
use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

pub fn run(args: RoleArgs) -> Result<ExitCode> {
    let started = Instant::now();
    let mut settings = args.load()?;
    if args.check_config {
        return crate::serve_cmd::check_config(&settings, true);
    }
    let telemetry = crate::logging::init_telemetry(&settings, "corkboard-runner")?;
    let sources = crate::compose::connection_sources(&settings)?;
    // Bound first, so that port 0 resolves before any URL is handed out.
    // With a backlog matching the connection cap.
    let listener = conn::bind(settings.listen, settings.max_connections)
        .with_context(|| format!("listen: cannot bind {}", settings.listen))?;
    let bound = listener.local_addr()?;
    settings.listen = bound;
    actix_web::rt::System::new().block_on(async move {
        // Caught before the announcement below (see `StopSignals`).
        let stop = crate::signals::StopSignals::catch()?;
        let state = crate::compose::app_state(settings, SecretPolicy::MustExist).await?;
        let runner = crate::compose::start_runner(&state)
            .await
            .context("starting the runner")?;
        let api = runner.api();
        let data = web::Data::new(state.clone());
        // The register API accepts what the server's admin API accepts
        // (bearer JWT, or a web session signed with the shared key).
        let authenticator = state.authenticator();
        let metrics = state.metrics.clone();
        let settings = &state.settings;
        let cap = ConnectionCap::new("runner", settings.max_connections, Some(metrics.clone()))
            .with_sources(sources)
            .with_next_head_deadline(
                Duration::from_millis(settings.keep_alive_ms),
                Duration::from_millis(settings.header_timeout_ms),
            );
        let workers = conn::http_workers();
        let on_connect = cap.clone();
        let metrics_server = crate::serve_cmd::metrics_listener(&state)?;
        let separate_metrics = metrics_server.is_some();
        let server = HttpServer::new(move || {
            let api = api.clone();
            App::new()
                .wrap(ConnectionGate)
                .wrap(
                    HttpTelemetry::new(metrics.clone())
                        .without_spans_for(["/healthz", "/readyz", "/metrics"]),
                )
                .app_data(data.clone())
                .app_data(authenticator.clone())
                .configure(move |cfg| api.configure(cfg))
                .configure(corkboard_server::health::configure)
                .configure(move |cfg| {
                    if !separate_metrics {
                        corkboard_server::metrics_route(cfg);
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
        crate::signals::stop_server_on_signal(stop, server.handle(), || {});
        {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "listening on http://{bound}");
            if let Some(shared) = runner.shared_addr() {
                let _ = writeln!(out, "gateway on http://{shared}");
            }
            let _ = out.flush();
        }
        if let Some((_, addr)) = &metrics_server {
            crate::serve_cmd::announce_metrics(*addr);
        }
        tracing::info!(
            address = %bound,
            startup_ms = started.elapsed().as_millis() as u64,
            "runner ready"
        );
        server.await.context("HTTP server failed")?;
        if let Some((handle, _)) = metrics_server {
            handle.stop(true).await;
        }
        runner.shutdown().await;
        state.audit.close().await;
        tracing::info!("stopped");
        if let Err(err) = telemetry.shutdown().await {
            tracing::warn!(error = %err, "trace export did not finish flushing");
        }
        Ok(ExitCode::SUCCESS)
    })
}
