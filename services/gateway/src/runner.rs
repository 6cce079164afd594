//! The runner role assembled from the control plane's [`AppState`]: what
//! `corkboard runner` runs, and what `corkboard serve` mounts in-process.

use crate::binding::Binding;
use crate::config::{GatewayConfig, ListenerMode};
use crate::error::GatewayError;
use crate::gateway::{Gateway, GatewayParts};
use crate::limiter::{LocalRateLimiter, RateLimit, RateLimiter, RedisRateLimiter};
use actix_web::dev::ServerHandle;
use actix_web::{App, HttpResponse, HttpServer, web};
use corkboard_board::IssueStore;
use corkboard_mcp::SessionKey;
use corkboard_server::AppState;
use corkboard_server::settings::{GatewayMode, RegistryKind, Settings};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Bound on one rate-limit call to Redis.
const LIMITER_TIMEOUT: Duration = Duration::from_secs(1);

/// A running runner: the gateway and, in shared mode, the HTTP server of
/// the shared gateway port. Audit records go to the state's audit writer,
/// which its owner closes.
pub struct Runner {
    gateway: Gateway,
    shared: Option<(ServerHandle, SocketAddr)>,
}

impl std::fmt::Debug for Runner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner")
            .field("gateway", &self.gateway)
            .field("shared", &self.shared.as_ref().map(|(_, addr)| addr))
            .finish_non_exhaustive()
    }
}

/// The gateway configuration `settings` describe. `shared_addr` is the
/// bound shared port (port 0 resolved), for the default base URL.
pub fn gateway_config(
    settings: &Settings,
    session_key: SessionKey,
    shared_addr: Option<SocketAddr>,
) -> GatewayConfig {
    let mut config = match settings.gateway_mode {
        GatewayMode::Dedicated => GatewayConfig::dedicated(
            settings.gateway_bind,
            settings.gateway_advertise.clone(),
            session_key,
        ),
        GatewayMode::Shared => {
            let listen = shared_addr.unwrap_or(settings.gateway_listen);
            // Without a public URL: the advertised host (a sandbox cannot
            // use `0.0.0.0`) on the bound port.
            let host = match &settings.gateway_advertise {
                Some(host) => host.clone(),
                None if listen.ip().is_unspecified() => "127.0.0.1".to_owned(),
                None => crate::config::host_of_ip(listen.ip()),
            };
            let base_url = settings
                .gateway_public_url
                .clone()
                .unwrap_or_else(|| format!("http://{host}:{}", listen.port()));
            GatewayConfig::new(ListenerMode::Shared { base_url }, session_key)
        }
    };
    config.rate_limit = RateLimit {
        per_second: settings.rate_limit_per_second,
        burst: settings.rate_limit_burst,
    };
    config.max_body_bytes = settings.max_body_bytes;
    config.store_timeout = Duration::from_millis(settings.store_timeout_ms);
    config.allowed_hosts = settings.allowed_hosts.clone();
    config.allowed_origins = settings.allowed_origins.clone();
    config
}

/// The per-run rate limiter `settings` call for: in Redis when the registry
/// is (runner pods share the budget), in memory otherwise.
pub fn rate_limiter(
    settings: &Settings,
    limit: RateLimit,
) -> Result<Arc<dyn RateLimiter>, GatewayError> {
    match settings.registry {
        RegistryKind::Memory => Ok(Arc::new(LocalRateLimiter::new(limit))),
        RegistryKind::Redis => {
            let urls: Vec<String> = settings.redis_urls();
            Ok(Arc::new(RedisRateLimiter::new(
                limit,
                &urls,
                &settings.redis_key_prefix,
                LIMITER_TIMEOUT,
            )?))
        }
    }
}

/// Counts every refusal of the run's rate limiter in the process metrics.
struct CountingLimiter {
    inner: Arc<dyn RateLimiter>,
    metrics: corkboard_telemetry::Metrics,
}

#[async_trait::async_trait]
impl RateLimiter for CountingLimiter {
    async fn acquire(&self, run: &crate::key::RunKey) -> Result<(), crate::limiter::RateLimited> {
        let result = self.inner.acquire(run).await;
        if result.is_err() {
            self.metrics.rate_limited();
        }
        result
    }

    fn forget(&self, run: &crate::key::RunKey) {
        self.inner.forget(run);
    }
}

impl Runner {
    /// Starts the gateway over `state` (its store, grants, registry and
    /// session key) and, in shared mode, the shared gateway port. Must run
    /// inside an actix `System`.
    pub async fn start(state: &AppState) -> Result<Self, GatewayError> {
        let settings = &state.settings;
        let session_key =
            SessionKey::new(state.session_key.to_vec()).map_err(|e| GatewayError::Config {
                key: "session_key_file",
                reason: e.to_string(),
            })?;
        let shared_listener = match settings.gateway_mode {
            GatewayMode::Shared => {
                let addr = settings.gateway_listen;
                let listener = std::net::TcpListener::bind(addr)
                    .map_err(|source| GatewayError::Bind { addr, source })?;
                let bound = listener
                    .local_addr()
                    .map_err(|source| GatewayError::Bind { addr, source })?;
                Some((listener, bound))
            }
            GatewayMode::Dedicated => None,
        };
        let config = gateway_config(settings, session_key, shared_listener.as_ref().map(|l| l.1));
        let store: Arc<dyn IssueStore> = state.store.clone();
        let binding = Binding::new(
            store,
            state.grants.registry().clone(),
            state.tool_audit.clone(),
            config.store_timeout,
        )
        .with_metrics(state.metrics.clone());
        let limiter: Arc<dyn RateLimiter> = Arc::new(CountingLimiter {
            inner: rate_limiter(settings, config.rate_limit)?,
            metrics: state.metrics.clone(),
        });
        let gateway = Gateway::start(
            config,
            GatewayParts {
                grants: state.grants.clone(),
                binding,
                limiter,
                actor_arbiter: None,
                session_ends: Some(state.session_ends.clone()),
                metrics: Some(state.metrics.clone()),
            },
        )?;
        // Active runs, as the process's gauge (read once a second).
        let observed = gateway.clone();
        let metrics = state.metrics.clone();
        actix_rt::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                let runs = i64::try_from(observed.stats().runs).unwrap_or(i64::MAX);
                metrics.active_runs().set(runs);
            }
        });
        let shared = match shared_listener {
            Some((listener, bound)) => {
                let routes = gateway.clone();
                let metrics = state.metrics.clone();
                let server = HttpServer::new(move || {
                    let routes = routes.clone();
                    App::new()
                        .wrap(corkboard_telemetry::HttpTelemetry::new(metrics.clone()))
                        .configure(move |cfg| routes.configure_shared(cfg))
                        .default_service(web::to(|| async {
                            HttpResponse::NotFound()
                                .content_type("application/json")
                                .body(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32054,"message":"Not Found: run endpoints are /runs/{run}/mcp"}}"#)
                        }))
                })
                .tcp_nodelay(true)
                .h1_allow_half_closed(false)
                .disable_signals()
                .shutdown_timeout(5)
                .listen(listener)
                .map_err(|source| GatewayError::Bind {
                    addr: bound,
                    source,
                })?
                .run();
                let handle = server.handle();
                actix_rt::spawn(async move {
                    if let Err(err) = server.await {
                        tracing::error!(error = %err, "shared gateway server failed");
                    }
                });
                tracing::info!(address = %bound, "shared gateway listening");
                Some((handle, bound))
            }
            None => None,
        };
        Ok(Self { gateway, shared })
    }

    pub fn gateway(&self) -> &Gateway {
        &self.gateway
    }

    /// The shared gateway port, in shared mode.
    pub fn shared_addr(&self) -> Option<SocketAddr> {
        self.shared.as_ref().map(|(_, addr)| *addr)
    }

    /// Something `HttpServer::new`'s factory can clone into every worker
    /// to mount the register API.
    pub fn api(&self) -> RunnerApi {
        RunnerApi {
            gateway: self.gateway.clone(),
        }
    }

    /// Drains every run and stops the shared port.
    pub async fn shutdown(self) {
        self.gateway.shutdown().await;
        if let Some((handle, _)) = self.shared {
            handle.stop(true).await;
        }
    }
}

/// The register API, mountable in any app.
#[derive(Debug, Clone)]
pub struct RunnerApi {
    gateway: Gateway,
}

impl RunnerApi {
    /// Mounts `/v1/runs`; see [`crate::api`]. Mount it before
    /// `corkboard_server::routes`.
    pub fn configure(&self, cfg: &mut web::ServiceConfig) {
        crate::api::configure(cfg, self.gateway.clone());
    }
}
