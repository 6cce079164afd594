//! The gateway: the table of runs on this runner, registering and revoking
//! them, and the listeners their requests arrive on.

use crate::actor::{
    ActorSettings, Census, Drain, DrainReport, Renewed, RunActor, RunHandle, RunHost, RunSpec,
    RunState,
};
use crate::backend::GatewayBackend;
use crate::binding::{Binding, BindingCell};
use crate::bridge::Bridge;
use crate::config::{GatewayConfig, ListenerMode, host_of_ip};
use crate::dedicated::{RunConn, ServiceSettings, WorkerPool};
use crate::error::GatewayError;
use crate::registration::Registration;
use crate::shared::{self, Activate};
use crate::stop::StopReason;
use actix::{Arbiter, ArbiterHandle};
use corkboard_board::{Grant, GrantEvent, GrantId, RunId, TenantId, Timestamp};
use corkboard_grants::RunKey;
use corkboard_grants::limiter::RateLimiter;
use corkboard_grants::{
    GrantRequest, GrantService, RegistryError, Renewal, TokenHash, TokenRegistry,
};
use corkboard_mcp::{McpEndpoint, McpSettings};
use corkboard_telemetry::ConnectionCap;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;
use tokio::sync::{oneshot, watch};

/// Longest a stop waits for the run's own port to close after its drain.
const PORT_CLOSE_BOUND: Duration = Duration::from_secs(2);

/// What a gateway serves runs with.
pub struct GatewayParts {
    /// Issues and revokes the runs' grants.
    pub grants: GrantService,
    /// Store, registry and audit the runs' requests are served with.
    pub binding: Binding,
    pub limiter: Arc<dyn RateLimiter>,
    /// Where run actors live; by default a new arbiter (thread) of their own.
    pub actor_arbiter: Option<ArbiterHandle>,
    /// Ended legacy sessions, shared with the other replicas (in-process
    /// when `None`).
    pub session_ends: Option<Arc<dyn corkboard_mcp::SessionEnds>>,
    /// Where the run listeners' HTTP requests are counted (spans are
    /// recorded either way).
    pub metrics: Option<corkboard_telemetry::Metrics>,
}

impl std::fmt::Debug for GatewayParts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayParts").finish_non_exhaustive()
    }
}

/// A run as `/v1/runs` lists it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunInfo {
    pub tenant: TenantId,
    pub run: RunId,
    pub grant_id: GrantId,
    pub mcp_url: Option<String>,
    pub expires_at: Timestamp,
    pub in_flight: u32,
    pub draining: bool,
    /// Requests admitted on this runner so far.
    pub admitted: u64,
    /// Requests refused by the rate limit on this runner so far.
    pub rate_limited: u64,
    /// Activated here by a request (shared mode) rather than registered here.
    pub activated: bool,
}

/// What revoking a run did.
#[derive(Debug, Clone)]
pub struct RevokeReport {
    /// Grants revoked now (already revoked ones are not repeated).
    pub revoked: Vec<GrantId>,
    /// How the local actor drained, if the run was active on this runner.
    pub drained: Option<DrainReport>,
}

/// Live counts, for leak checks and diagnostics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct GatewayStats {
    pub runs: usize,
    pub actors: usize,
    pub listeners: usize,
    pub connections: usize,
}

struct RunEntry {
    generation: u64,
    run: RunHandle,
    grant: GrantId,
    expires_at: Timestamp,
    mcp_url: Option<String>,
    activated: bool,
}

enum Slot {
    /// Being registered: the key is taken, nothing serves it yet.
    Reserved(u64),
    Live(RunEntry),
}

impl Slot {
    fn generation(&self) -> u64 {
        match self {
            Self::Reserved(generation) => *generation,
            Self::Live(entry) => entry.generation,
        }
    }
}

pub(crate) struct Inner {
    pub config: GatewayConfig,
    pub metrics: Option<corkboard_telemetry::Metrics>,
    /// The request path's share: endpoint, binding, rate limiter.
    pub bridge: Arc<Bridge>,
    pub census: Arc<Census>,
    grants: GrantService,
    actor_settings: Arc<ActorSettings>,
    runs: Mutex<HashMap<RunKey, Slot>>,
    generation: AtomicU64,
    actor_arbiter: ArbiterHandle,
    own_arbiter: Mutex<Option<Arbiter>>,
    pool: OnceLock<WorkerPool>,
    closing: AtomicBool,
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<RunKey, Slot>> {
        // Every critical section is a map lookup, insert or removal.
        self.runs
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn next_generation(&self) -> u64 {
        self.generation.fetch_add(1, Ordering::Relaxed)
    }

    /// The run `key`, if it is active here.
    pub(crate) fn live(&self, key: &RunKey) -> Option<RunHandle> {
        match self.lock().get(key) {
            Some(Slot::Live(entry)) => Some(entry.run.clone()),
            _ => None,
        }
    }

    fn spawn_actor(
        self: &Arc<Self>,
        key: &RunKey,
        generation: u64,
        expires_at: Timestamp,
        token_hash: TokenHash,
    ) -> (RunHandle, watch::Receiver<bool>) {
        let (stop_tx, stop_rx) = watch::channel(false);
        let state = Arc::new(RunState::new(key.clone()));
        let host: Weak<dyn RunHost> = Arc::downgrade(self) as Weak<Self>;
        let actor = RunActor::new(
            RunSpec {
                generation,
                expires_at,
                token_hash,
                stop: stop_tx,
                state: state.clone(),
            },
            self.bridge.limiter.clone(),
            self.census.clone(),
            self.actor_settings.clone(),
            host,
        );
        let addr = actor.launch(&self.actor_arbiter);
        (
            RunHandle {
                addr: Arc::new(addr),
                state,
            },
            stop_rx,
        )
    }

    /// Shared mode: the actor for a run whose grant the request's token
    /// resolved to, started here if no actor serves it yet (or only one
    /// that is winding down, e.g. after idling). Any runner pod can so
    /// serve any run; the registry is the shared truth.
    pub(crate) fn activate(
        self: &Arc<Self>,
        key: &RunKey,
        grant: &Grant,
        token_hash: TokenHash,
    ) -> Result<RunHandle, GatewayError> {
        if self.closing.load(Ordering::Relaxed) {
            return Err(GatewayError::ShuttingDown);
        }
        let mut runs = self.lock();
        if let Some(Slot::Live(entry)) = runs.get(key)
            && !entry.run.state.is_draining()
        {
            return Ok(entry.run.clone());
        }
        let generation = self.next_generation();
        let (run, _stop) = self.spawn_actor(key, generation, grant.expires_at, token_hash);
        runs.insert(
            key.clone(),
            Slot::Live(RunEntry {
                generation,
                run: run.clone(),
                grant: grant.id.clone(),
                expires_at: grant.expires_at,
                mcp_url: None,
                activated: true,
            }),
        );
        tracing::info!(tenant = %key.tenant, run = %key.run, "run activated");
        Ok(run)
    }
}

impl RunHost for Inner {
    fn registry(&self) -> Arc<dyn TokenRegistry> {
        self.bridge.binding.load().registry().clone()
    }

    /// Forgets the run, unless a newer actor for it has taken its place
    /// meanwhile.
    fn run_stopped(&self, key: &RunKey, generation: u64) {
        let mut runs = self.lock();
        if runs
            .get(key)
            .is_some_and(|slot| slot.generation() == generation)
        {
            runs.remove(key);
        }
    }
}

/// The runs of one runner, each with its actor and listener.
///
/// Cheap to clone. Must be started inside an actix `System` (it starts
/// arbiters); see [`Gateway::start`].
#[derive(Clone)]
pub struct Gateway {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("mode", &self.inner.config.mode)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl Gateway {
    /// Starts the gateway: its actor arbiter and, in dedicated mode, the
    /// worker threads that serve the per-run ports.
    pub fn start(config: GatewayConfig, parts: GatewayParts) -> Result<Self, GatewayError> {
        if actix::System::try_current().is_none() {
            return Err(GatewayError::Worker(
                "the gateway must be started inside an actix System".to_owned(),
            ));
        }
        let (actor_arbiter, own_arbiter) = match parts.actor_arbiter {
            Some(handle) => (handle, None),
            None => {
                let arbiter = Arbiter::new();
                (arbiter.handle(), Some(arbiter))
            }
        };
        let mut mcp = McpSettings::new(config.session_key.clone());
        mcp.allowed_hosts = config.endpoint_hosts();
        mcp.allowed_origins = config.allowed_origins.clone();
        mcp.max_body_bytes = config.max_body_bytes;
        mcp.body_timeout = config.body_timeout;
        mcp.max_batch_len = config.max_batch_len;
        mcp.max_batch_response_bytes = config.max_batch_response_bytes;
        mcp.metrics = parts.metrics.clone();
        // The bridge logs every request once ("gateway request"), refusals
        // before the endpoint included.
        mcp.log_exchanges = false;
        let backend = Arc::new(GatewayBackend::new());
        let endpoint = match &parts.session_ends {
            Some(ends) => McpEndpoint::with_session_ends(backend, mcp, ends.clone()),
            None => McpEndpoint::new(backend, mcp),
        };
        let actor_settings = Arc::new(ActorSettings {
            drain_timeout: config.drain_timeout,
            cancel_grace: config.cancel_grace,
            idle_timeout: matches!(config.mode, ListenerMode::Shared { .. })
                .then_some(config.idle_timeout),
            revalidate_interval: (!config.revalidate_interval.is_zero())
                .then_some(config.revalidate_interval),
            lookup_timeout: config.store_timeout,
        });
        let dedicated = matches!(config.mode, ListenerMode::Dedicated { .. });
        let workers = config.workers.max(1);
        let serving = ServiceSettings {
            metrics: parts.metrics.clone(),
            keep_alive: config.keep_alive,
            header_timeout: config.header_timeout,
        };
        let inner = Arc::new(Inner {
            config,
            metrics: parts.metrics,
            bridge: Arc::new(Bridge {
                endpoint,
                binding: BindingCell::new(parts.binding),
                limiter: parts.limiter,
            }),
            census: Arc::new(Census::default()),
            grants: parts.grants,
            actor_settings,
            runs: Mutex::new(HashMap::new()),
            generation: AtomicU64::new(1),
            actor_arbiter,
            own_arbiter: Mutex::new(own_arbiter),
            pool: OnceLock::new(),
            closing: AtomicBool::new(false),
        });
        if dedicated {
            let pool = WorkerPool::start(
                workers,
                Arc::downgrade(&inner.bridge),
                inner.census.clone(),
                serving,
            );
            let _ = inner.pool.set(pool);
        }
        Ok(Self { inner })
    }

    pub fn config(&self) -> &GatewayConfig {
        &self.inner.config
    }

    /// Replaces the store/registry/audit binding of every run atomically:
    /// requests in flight finish on the binding they started with.
    pub fn rebind(&self, binding: Binding) {
        self.inner.bridge.binding.swap(binding);
    }

    /// The binding new requests are served with.
    pub fn binding(&self) -> Arc<Binding> {
        self.inner.bridge.binding.load()
    }

    /// Issues the run's grant, starts its actor (and, in dedicated mode, its
    /// listener) and returns everything the agent needs.
    pub async fn register(&self, request: GrantRequest) -> Result<Registration, GatewayError> {
        if self.inner.closing.load(Ordering::Relaxed) {
            return Err(GatewayError::ShuttingDown);
        }
        let key = RunKey::new(request.tenant.clone(), request.run.clone());
        let generation = self.inner.next_generation();
        {
            let mut runs = self.inner.lock();
            if runs.contains_key(&key) {
                return Err(GatewayError::RunActive {
                    tenant: key.tenant,
                    run: key.run,
                });
            }
            // Counted under the same lock that reserves the slot, so racing
            // registrations cannot pass the limit together.
            let max = self.inner.config.live_runs_per_tenant_max;
            if runs.keys().filter(|k| k.tenant == key.tenant).count() >= max {
                return Err(GatewayError::RunLimit {
                    tenant: key.tenant,
                    max,
                });
            }
            runs.insert(key.clone(), Slot::Reserved(generation));
        }
        let result = self.register_reserved(&key, generation, request).await;
        if result.is_err() {
            let mut runs = self.inner.lock();
            if matches!(runs.get(&key), Some(Slot::Reserved(g)) if *g == generation) {
                runs.remove(&key);
            }
        }
        result
    }

    async fn register_reserved(
        &self,
        key: &RunKey,
        generation: u64,
        request: GrantRequest,
    ) -> Result<Registration, GatewayError> {
        let inner = &self.inner;
        // Bind before issuing, so a port that cannot be had leaves no grant.
        let (listener, mcp_url) = match &inner.config.mode {
            ListenerMode::Dedicated { bind, advertise } => {
                let addr = SocketAddr::new(*bind, 0);
                // The backlog matches the port's connection cap.
                let listener =
                    corkboard_telemetry::conn::bind(addr, inner.config.max_connections_per_run)
                        .map_err(|source| GatewayError::Bind { addr, source })?;
                let port = listener
                    .local_addr()
                    .map_err(|source| GatewayError::Bind { addr, source })?
                    .port();
                let host = if advertise.contains(':') && !advertise.starts_with('[') {
                    host_of_ip(advertise.parse().unwrap_or(*bind))
                } else {
                    advertise.clone()
                };
                (Some(listener), format!("http://{host}:{port}/mcp"))
            }
            ListenerMode::Shared { base_url } => (
                None,
                format!("{}/runs/{}/mcp", base_url.trim_end_matches('/'), key.run),
            ),
        };
        let issued = inner.grants.issue(request).await?;
        let (run, stop) = inner.spawn_actor(
            key,
            generation,
            issued.grant.expires_at,
            issued.token.hash(),
        );
        if let (Some(listener), Some(pool)) = (listener, inner.pool.get()) {
            run.state.listening.send_replace(true);
            let conn = Arc::new(RunConn {
                run: run.clone(),
                stop,
                cap: ConnectionCap::new(
                    "gateway_run",
                    inner.config.max_connections_per_run,
                    inner.metrics.clone(),
                )
                .with_sources(inner.config.sources.clone())
                .with_next_head_deadline(inner.config.keep_alive, inner.config.header_timeout),
            });
            if let Err(err) = pool.listen(listener, conn) {
                run.addr.do_send(Drain {
                    reason: StopReason::Shutdown,
                    done: None,
                });
                let _ = inner
                    .grants
                    .revoke(&issued.grant.id, "system:listener-failed")
                    .await;
                return Err(err);
            }
        }
        {
            let mut runs = inner.lock();
            if matches!(runs.get(key), Some(Slot::Reserved(g)) if *g == generation) {
                runs.insert(
                    key.clone(),
                    Slot::Live(RunEntry {
                        generation,
                        run,
                        grant: issued.grant.id.clone(),
                        expires_at: issued.grant.expires_at,
                        mcp_url: Some(mcp_url.clone()),
                        activated: false,
                    }),
                );
            } else {
                // Either the actor stopped already (a grant that expired at
                // once), or, in shared mode, a request activated the run
                // meanwhile and that actor serves it: this one is surplus.
                run.addr.do_send(Drain {
                    reason: StopReason::Shutdown,
                    done: None,
                });
            }
        }
        tracing::info!(
            tenant = %key.tenant,
            run = %key.run,
            grant = %issued.grant.id,
            mcp_url = %mcp_url,
            expires_at = %issued.grant.expires_at,
            "run registered"
        );
        Ok(Registration {
            grant: issued.grant,
            token: issued.token,
            mcp_url,
        })
    }

    /// Revokes every grant of the run (ledger, then registry: every replica
    /// refuses the token within a second), then drains the local actor:
    /// in-flight requests get `drain_timeout` to finish, the rest answer
    /// "run ended", and the actor and its listener stop.
    ///
    /// The actor is stopped even when revocation fails (the error is
    /// returned so the caller can retry the revocation).
    pub async fn revoke(
        &self,
        tenant: &TenantId,
        run: &RunId,
        by: &str,
    ) -> Result<RevokeReport, GatewayError> {
        let key = RunKey::new(tenant.clone(), run.clone());
        let revoked = self.inner.grants.revoke_run(tenant, run, by).await;
        let drained = self.stop_run(&key, StopReason::Revoked).await;
        let revoked = match revoked {
            // An actor without a grant in the ledger still was the run.
            Err(RegistryError::RunNotFound { .. }) if drained.is_some() => Vec::new(),
            other => other?,
        };
        tracing::info!(
            tenant = %tenant,
            run = %run,
            grants = revoked.len(),
            local = drained.is_some(),
            "run revoked"
        );
        Ok(RevokeReport {
            revoked: revoked.into_iter().map(|e| e.grant.id).collect(),
            drained,
        })
    }

    /// The lifetime of a run's grant: what it asked for, capped by its
    /// tenant's own `run_ttl` (see [`GrantService::run_ttl`]).
    pub async fn run_ttl(
        &self,
        tenant: &TenantId,
        asked: Option<Duration>,
        default: Duration,
    ) -> Result<Duration, GatewayError> {
        Ok(self.inner.grants.run_ttl(tenant, asked, default).await?)
    }

    /// The budgets of a run's grant: what it asked for within its tenant's
    /// (or the operator's) `run_budgets` (see [`GrantService::run_budgets`]).
    pub async fn run_budgets(
        &self,
        tenant: &TenantId,
        asked: &corkboard_board::Budgets,
    ) -> Result<corkboard_board::Budgets, GatewayError> {
        Ok(self.inner.grants.run_budgets(tenant, asked).await?)
    }

    /// Keeps a run alive: every live grant of the run (from the ledger, so
    /// any runner can answer) expires `ttl` from now, capped at its
    /// maximum lifetime, with the same token; the local actor, if any,
    /// moves its expiry too. A run with only revoked grants is refused
    /// ([`RegistryError::RenewRevoked`]), one whose grants expired too
    /// ([`RegistryError::RenewExpired`]).
    pub async fn renew(
        &self,
        tenant: &TenantId,
        run: &RunId,
        ttl: Duration,
    ) -> Result<Vec<GrantEvent>, GatewayError> {
        let grants = &self.inner.grants;
        let ttl = grants.run_ttl(tenant, Some(ttl), ttl).await?;
        let recorded = grants
            .ledger()
            .list_grants(tenant, Some(run), None, corkboard_board::limits::PAGE_MAX)
            .await
            .map_err(RegistryError::from)?;
        let Some(first) = recorded.first() else {
            return Err(RegistryError::RunNotFound {
                tenant: tenant.clone(),
                run: run.clone(),
            }
            .into());
        };
        let first = first.grant.id.clone();
        let mut renewed = Vec::new();
        let mut refusal = None;
        for event in recorded.iter().filter(|e| e.revoked_at.is_none()) {
            match grants.renew(&event.grant.id, Renewal::KeepAlive(ttl)).await {
                Ok(event) => renewed.push(event),
                Err(err @ (RegistryError::RenewExpired(_) | RegistryError::RenewRevoked(_))) => {
                    refusal.get_or_insert(err);
                }
                Err(err) => return Err(err.into()),
            }
        }
        let Some(latest) = renewed.iter().map(|e| e.grant.expires_at).max() else {
            return Err(refusal.unwrap_or(RegistryError::RenewRevoked(first)).into());
        };
        let key = RunKey::new(tenant.clone(), run.clone());
        let mut runs = self.inner.lock();
        if let Some(Slot::Live(entry)) = runs.get_mut(&key) {
            entry.expires_at = entry.expires_at.max(latest);
            entry.run.addr.do_send(Renewed { expires_at: latest });
        }
        Ok(renewed)
    }

    /// Drains and stops the local actor of a run without revoking anything.
    pub async fn stop_run(&self, key: &RunKey, reason: StopReason) -> Option<DrainReport> {
        let run = self.inner.live(key)?;
        let (done, report) = oneshot::channel();
        // `do_send` skips the mailbox bound: stopping never queues behind
        // the requests it is about to refuse.
        run.addr.do_send(Drain {
            reason,
            done: Some(done),
        });
        let bound = self.inner.config.drain_timeout
            + self.inner.config.cancel_grace
            + Duration::from_secs(2);
        let report = tokio::time::timeout(bound, report).await.ok()?.ok()?;
        // The accept loop closes the port on its worker thread once it sees
        // the stop; a revoke that returns must find it closed.
        let mut listening = run.state.listening.subscribe();
        let closed = tokio::time::timeout(PORT_CLOSE_BOUND, listening.wait_for(|open| !*open));
        if closed.await.is_err() {
            tracing::warn!(tenant = %key.tenant, run = %key.run, "the run's port did not close in time");
        }
        Some(report)
    }

    /// Active runs, optionally of one tenant, sorted by tenant and run.
    pub fn runs(&self, tenant: Option<&TenantId>) -> Vec<RunInfo> {
        let mut runs: Vec<RunInfo> = self
            .inner
            .lock()
            .iter()
            .filter(|(key, _)| tenant.is_none_or(|t| &key.tenant == t))
            .filter_map(|(key, slot)| match slot {
                Slot::Live(entry) => Some(RunInfo {
                    tenant: key.tenant.clone(),
                    run: key.run.clone(),
                    grant_id: entry.grant.clone(),
                    mcp_url: entry.mcp_url.clone(),
                    expires_at: entry.expires_at,
                    in_flight: entry.run.state.in_flight(),
                    draining: entry.run.state.is_draining(),
                    admitted: entry.run.state.admitted(),
                    rate_limited: entry.run.state.rate_limited(),
                    activated: entry.activated,
                }),
                Slot::Reserved(_) => None,
            })
            .collect();
        runs.sort_by(|a, b| (&a.tenant, &a.run).cmp(&(&b.tenant, &b.run)));
        runs
    }

    pub fn stats(&self) -> GatewayStats {
        let census = &self.inner.census;
        GatewayStats {
            runs: self.inner.lock().len(),
            actors: census.actors.load(Ordering::Relaxed),
            listeners: census.listeners.load(Ordering::Relaxed),
            connections: census.connections.load(Ordering::Relaxed),
        }
    }

    /// Drains every run (without revoking: their grants stay valid for
    /// another replica, or until they expire) and stops the gateway's
    /// threads. New registrations are refused from the start.
    pub async fn shutdown(&self) {
        self.inner.closing.store(true, Ordering::Relaxed);
        let keys: Vec<RunKey> = self.inner.lock().keys().cloned().collect();
        let drains = keys
            .iter()
            .map(|key| self.stop_run(key, StopReason::Shutdown));
        futures_util::future::join_all(drains).await;
        // Listeners and connections end once their actor stopped; give them
        // a moment before their threads go away.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        while self.stats().listeners + self.stats().connections > 0
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if let Some(pool) = self.inner.pool.get() {
            pool.stop();
        }
        if let Some(arbiter) = self
            .inner
            .own_arbiter
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take()
        {
            arbiter.stop();
        }
    }

    /// Mounts the shared-mode route `/runs/{run}/mcp`.
    pub fn configure_shared(&self, cfg: &mut actix_web::web::ServiceConfig) {
        shared::configure(cfg, self.inner.bridge.clone(), Arc::new(self.clone()));
    }
}

impl Activate for Gateway {
    fn activate(
        &self,
        key: &RunKey,
        grant: &Grant,
        token_hash: TokenHash,
    ) -> Result<RunHandle, GatewayError> {
        self.inner.activate(key, grant, token_hash)
    }
}
