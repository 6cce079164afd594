//! The runner role assembled from its parts: what `corkboard runner` runs,
//! and what `corkboard serve` mounts in-process. Which store, registry and
//! rate limiter the parts are is the binary's decision (its composition
//! root, `services/cli/src/compose.rs`); the runner takes them typed.

use crate::binding::Binding;
use crate::config::{GatewayConfig, ListenerMode};
use crate::error::GatewayError;
use crate::gateway::{Gateway, GatewayParts};
use actix_web::dev::ServerHandle;
use actix_web::http::StatusCode;
use actix_web::{App, HttpServer, web};
use corkboard_board::AuditSink;
use corkboard_board::IssueStore;
use corkboard_grants::GrantService;
use corkboard_grants::limiter::RateLimiter;
use corkboard_mcp::{Refusal, SessionEnds, code};
use corkboard_telemetry::Metrics;
use corkboard_telemetry::conn::{self, ConnectionCap, ConnectionGate};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// What a [`Runner`] serves its runs with.
pub struct RunnerParts {
    /// The board the runs' tools read and write.
    pub store: Arc<dyn IssueStore>,
    /// Issues and revokes the runs' grants; its registry resolves tokens.
    pub grants: GrantService,
    /// Where tool calls are accounted (audit records, live board events).
    pub tool_audit: Arc<dyn AuditSink>,
    pub metrics: Metrics,
    /// Ended legacy sessions, shared with the other replicas.
    pub session_ends: Arc<dyn SessionEnds>,
    /// The per-run rate limiter (refusals are counted in `metrics`).
    pub limiter: Arc<dyn RateLimiter>,
    /// Shared mode: the shared gateway port, bound by the caller so that
    /// port 0 is resolved before the configuration's base URL is written.
    pub shared_listener: Option<std::net::TcpListener>,
    /// The tenants' upstream MCP servers (none: runs see the board alone).
    pub upstreams: Option<Arc<corkboard_upstream::Upstreams>>,
    /// Which calls wait for a person's approval (none: no call does).
    pub approvals: Option<Arc<corkboard_tools::ApprovalGate>>,
    /// Which grants' runs called upstream tools (none: a grant that may
    /// call one writes at the lowest level).
    pub upstream_calls: Option<Arc<corkboard_grants::UpstreamCalls>>,
}

impl std::fmt::Debug for RunnerParts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunnerParts")
            .field("shared_listener", &self.shared_listener)
            .finish_non_exhaustive()
    }
}

/// A running runner: the gateway and, in shared mode, the HTTP server of
/// the shared gateway port. Audit records go to the parts' audit sink,
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

/// Counts every refusal of the run's rate limiter in the process metrics.
struct CountingLimiter {
    inner: Arc<dyn RateLimiter>,
    metrics: Metrics,
}

#[async_trait::async_trait]
impl RateLimiter for CountingLimiter {
    async fn acquire(
        &self,
        run: &corkboard_grants::RunKey,
    ) -> Result<(), corkboard_grants::limiter::RateLimited> {
        let result = self.inner.acquire(run).await;
        if result.is_err() {
            self.metrics.rate_limited();
        }
        result
    }

    fn forget(&self, run: &corkboard_grants::RunKey) {
        self.inner.forget(run);
    }
}

impl Runner {
    /// Starts the gateway of `config` over `parts` and, in shared mode,
    /// the HTTP server of the shared gateway port. Must run inside an actix
    /// `System`.
    pub async fn start(config: GatewayConfig, parts: RunnerParts) -> Result<Self, GatewayError> {
        let RunnerParts {
            store,
            grants,
            tool_audit,
            metrics,
            session_ends,
            limiter,
            shared_listener,
            upstreams,
            approvals,
            upstream_calls,
        } = parts;
        let shared_listener = match (&config.mode, shared_listener) {
            (ListenerMode::Shared { .. }, Some(listener)) => {
                let bound = listener.local_addr().map_err(|e| GatewayError::Config {
                    key: "gateway_listen",
                    reason: e.to_string(),
                })?;
                Some((listener, bound))
            }
            (ListenerMode::Dedicated { .. }, None) => None,
            (ListenerMode::Shared { .. }, None) => {
                return Err(GatewayError::Config {
                    key: "gateway_listen",
                    reason: "shared mode needs the bound shared gateway port".into(),
                });
            }
            (ListenerMode::Dedicated { .. }, Some(_)) => {
                return Err(GatewayError::Config {
                    key: "gateway_mode",
                    reason: "dedicated mode serves no shared gateway port".into(),
                });
            }
        };
        let binding = Binding::new(
            store,
            grants.registry().clone(),
            tool_audit,
            config.store_timeout,
        )
        .with_result_budget(config.max_result_bytes)
        .with_claim_lease(config.claim_lease)
        .with_metrics(metrics.clone())
        .with_budgets(grants.budgets().clone())
        .with_secret_policies(Arc::new(corkboard_tools::SecretPolicies::new(
            grants.ledger().clone(),
            config.store_timeout,
        )));
        let binding = match upstreams {
            Some(upstreams) => binding.with_upstreams(upstreams),
            None => binding,
        };
        let binding = match approvals {
            Some(gate) => binding.with_approvals(gate),
            None => binding,
        };
        let binding = match upstream_calls {
            Some(calls) => binding.with_upstream_calls(calls),
            None => binding,
        };
        let limiter: Arc<dyn RateLimiter> = Arc::new(CountingLimiter {
            inner: limiter,
            metrics: metrics.clone(),
        });
        let port_shutdown = config.port_shutdown.as_secs().max(1);
        let (max_connections, header_timeout, keep_alive, sources) = (
            config.max_connections,
            config.header_timeout,
            config.keep_alive,
            config.sources.clone(),
        );
        let gateway = Gateway::start(
            config,
            GatewayParts {
                grants,
                binding,
                limiter,
                actor_arbiter: None,
                session_ends: Some(session_ends),
                metrics: Some(metrics.clone()),
            },
        )?;
        // Active runs, as the process's gauge (read once a second).
        let observed = gateway.clone();
        let gauge = metrics.clone();
        actix_rt::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                let runs = i64::try_from(observed.stats().runs).unwrap_or(i64::MAX);
                gauge.active_runs().set(runs);
            }
        });
        let shared = match shared_listener {
            Some((listener, bound)) => {
                let routes = gateway.clone();
                let cap =
                    ConnectionCap::new("gateway_shared", max_connections, Some(metrics.clone()))
                        .with_sources(sources)
                        .with_next_head_deadline(keep_alive, header_timeout);
                let workers = conn::http_workers();
                let on_connect = cap.clone();
                let server = HttpServer::new(move || {
                    let routes = routes.clone();
                    App::new()
                        .wrap(ConnectionGate)
                        .wrap(corkboard_telemetry::HttpTelemetry::new(metrics.clone()))
                        .configure(move |cfg| routes.configure_shared(cfg))
                        .default_service(web::to(|| async {
                            Refusal::new(
                                StatusCode::NOT_FOUND,
                                code::NOT_FOUND,
                                "Not Found: run endpoints are /runs/{run}/mcp",
                            )
                            .response(None)
                        }))
                })
                .tcp_nodelay(true)
                .h1_allow_half_closed(false)
                .workers(workers)
                .max_connections(cap.per_worker(workers))
                .client_request_timeout(header_timeout)
                .keep_alive(keep_alive)
                .on_connect(move |io, extensions| on_connect.on_connect(io, extensions))
                .disable_signals()
                .shutdown_timeout(port_shutdown)
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
    /// Mounts `/v1/runs`; see [`crate::api`]. Mount it before the control
    /// plane's routes, and register a `web::Data<dyn AdminAuthenticator>`
    /// (`corkboard_api`) in the app: it decides who may call.
    pub fn configure(&self, cfg: &mut web::ServiceConfig) {
        crate::api::configure(cfg, self.gateway.clone());
    }
}
