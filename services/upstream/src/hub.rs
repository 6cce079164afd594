//! The upstreams of every tenant this process serves, and each grant's
//! view of their tools.
//!
//! A tenant's registrations are read from the board store and kept for
//! [`UpstreamOptions::registry_ttl`]; each upstream gets one
//! [`UpstreamClient`] (its era, its runs' sessions) and a cached tool list,
//! refreshed after [`UpstreamOptions::tools_ttl`], retried no sooner than
//! [`UpstreamOptions::retry_after_failure`] after a failure. A new URL,
//! header or credential makes a new client: a request keeps the one it
//! started with, so rebinding is atomic per request.
//!
//! Each upstream tool is offered as `<upstream>__<tool>` after its
//! definition passed the one validator
//! ([`corkboard_mcp::check_tool_definition`]); one that fails is dropped
//! and logged with the reason, never sent. An upstream whose list cannot
//! be fetched and that has never been listed shows one tool,
//! `<upstream>__unavailable`, whose description and calls say why, so the
//! agent is told rather than left to guess at a missing tool; one listed
//! before keeps its last list and its calls answer "unavailable".
//!
//! A listed tool is offered only under the definition a tenant admin
//! approved ([`crate::pins`]): a new or changed one is pending, left out
//! of the list and refused when called, naming how to approve it.

use crate::client::{Sessions, UpstreamClient};
use crate::conn::{Conn, Listed, Route, ToolsState, lock};
use crate::error::UpstreamError;
use crate::pins::{Pinning, Pins, ToolChanged};
use crate::seal::CredentialKey;
use crate::seam;
use crate::shares::{
    DEFAULT_RUN_SHARE_PCT, DEFAULT_TENANT_SHARE_PCT, ShareLimits, SharedTable, Table,
};
use crate::view::{self, CallEnv, UpstreamView};
use crate::waiting::Waiting;
use corkboard_board::AuditSink;
use corkboard_board::{
    Capabilities, DefinitionHash, TenantId, Timestamp, ToolSighting, Upstream, UpstreamName,
    UpstreamStore,
};
use corkboard_grants::{MemoryUsedOnce, ResolvedGrant, UpstreamCalls, UsedOnce};
use corkboard_mcp::relay::AgentCapabilities;
use corkboard_mcp::relay::seal::RelaySealer;
use corkboard_mcp::{
    ClientResponse, Peer, RefusedCall, ResultOrigin, RpcError, ToolCall, ToolDef, ToolOutput,
    ToolSet,
};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The separator between an upstream's name and its tool's.
pub const SEPARATOR: &str = "__";
/// The name of the stand-in tool of an upstream that could not be listed.
pub const UNAVAILABLE_TOOL: &str = "unavailable";

/// The default of [`UpstreamOptions::max_answer_bytes`]: 4 MiB.
pub const DEFAULT_MAX_ANSWER_BYTES: usize = 4 * 1024 * 1024;
/// The default process total of calls held for 2026-07-28 agents.
pub const DEFAULT_HELD_CALLS_MAX: usize = 1024;
/// The default process total of relayed requests awaiting answers here.
pub const DEFAULT_PENDING_REQUESTS_MAX: usize = 4096;
/// The default process total of sessions with 2025 upstreams.
pub const DEFAULT_SESSIONS_MAX: usize = 4096;

/// The shares of the relay's shared tables (see [`crate::shares`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelayShares {
    /// Calls held for 2026-07-28 agents between rounds.
    pub held_calls: ShareLimits,
    /// Requests relayed to 2025 agents whose answers calls wait for here.
    pub pending_requests: ShareLimits,
    /// Sessions with 2025 upstreams (per run, upstream and capability set).
    pub sessions: ShareLimits,
}

impl RelayShares {
    /// Each table's total, a tenant at most `tenant_pct` % of each and a
    /// run at most `run_pct` %.
    pub fn of(
        held_calls: usize,
        pending_requests: usize,
        sessions: usize,
        tenant_pct: u8,
        run_pct: u8,
    ) -> Self {
        Self {
            held_calls: ShareLimits::of(held_calls, tenant_pct, run_pct),
            pending_requests: ShareLimits::of(pending_requests, tenant_pct, run_pct),
            sessions: ShareLimits::of(sessions, tenant_pct, run_pct),
        }
    }
}

impl Default for RelayShares {
    fn default() -> Self {
        Self::of(
            DEFAULT_HELD_CALLS_MAX,
            DEFAULT_PENDING_REQUESTS_MAX,
            DEFAULT_SESSIONS_MAX,
            DEFAULT_TENANT_SHARE_PCT,
            DEFAULT_RUN_SHARE_PCT,
        )
    }
}

/// The bounds of everything the gateway does with upstreams.
#[derive(Debug, Clone)]
pub struct UpstreamOptions {
    /// Connecting to an upstream.
    pub connect_timeout: Duration,
    /// Listing an upstream's tools (every page, negotiation included).
    pub list_timeout: Duration,
    /// One tool call, from sending it to the last byte of its answer.
    pub call_timeout: Duration,
    /// How long a fetched tool list is used before it is fetched again.
    pub tools_ttl: Duration,
    /// How long after a failed listing the next attempt is made.
    pub retry_after_failure: Duration,
    /// How long a tenant's registrations are used before they are re-read.
    pub registry_ttl: Duration,
    /// Most `tools/list` pages read from one upstream.
    pub max_pages: usize,
    /// Most tools offered from one upstream (the rest dropped, logged).
    pub max_tools: usize,
    /// One tool call that relays requests to the agent (sampling,
    /// elicitation, roots: a person may be answering), from sending it to
    /// the last byte of its answer. Used instead of `call_timeout` when the
    /// agent can answer relayed requests.
    pub relay_call_timeout: Duration,
    /// Which addresses upstreams may be reached at (`egress_allow`).
    pub egress: Arc<corkboard_egress::EgressPolicy>,
    /// Most bytes of one answer read from an upstream: a JSON body, or one
    /// event of an event stream (`upstream_max_answer_bytes`). A larger one
    /// is not read further and the caller gets "upstream answer too large".
    pub max_answer_bytes: usize,
    /// The process totals and per-tenant and per-run shares of the
    /// relay's tables (`upstream_*_max`, `upstream_*_share_pct`).
    pub shares: RelayShares,
}

impl Default for UpstreamOptions {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(2),
            list_timeout: Duration::from_secs(5),
            call_timeout: Duration::from_secs(30),
            tools_ttl: Duration::from_secs(60),
            retry_after_failure: Duration::from_secs(5),
            registry_ttl: Duration::from_secs(5),
            max_pages: 10,
            max_tools: 256,
            relay_call_timeout: Duration::from_secs(300),
            egress: Arc::default(),
            max_answer_bytes: DEFAULT_MAX_ANSWER_BYTES,
            shares: RelayShares::default(),
        }
    }
}

/// What a view is built from: one upstream's list or failure and its
/// approved definitions, stamped.
struct Snapshot {
    listed: Option<Arc<Listed>>,
    failure: Option<String>,
    generation: u64,
    approved: Arc<HashMap<String, DefinitionHash>>,
    pins_generation: u64,
}

#[derive(Debug)]
struct TenantState {
    loaded: Instant,
    conns: Vec<Arc<Conn>>,
}

/// The upstreams of every tenant this process serves; see the module docs.
pub struct Upstreams {
    store: Arc<dyn UpstreamStore>,
    key: Arc<CredentialKey>,
    http: reqwest::Client,
    audit: Arc<dyn AuditSink>,
    options: UpstreamOptions,
    /// Seals the ids of requests relayed to agents (none: nothing is
    /// relayed, requests to the client are refused at once).
    relay: Option<RelaySealer>,
    /// Relayed requests' answers and held calls waiting in this process
    /// (see [`crate::waiting`]).
    waiting: Waiting,
    /// Every upstream session of this process (see [`crate::client`]).
    sessions: Arc<Sessions>,
    /// Where sealed states and relayed answers are recorded as used, so
    /// each is acted on once (shared by the replicas when it is Redis).
    used: Arc<dyn UsedOnce>,
    tenants: Mutex<HashMap<TenantId, Arc<TenantState>>>,
    /// By tenant, capabilities and budgets (which the board's tool
    /// descriptions mention).
    views: Mutex<HashMap<ViewKey, Arc<UpstreamView>>>,
    serials: AtomicU64,
    /// Told of each tool this process finds newly pending.
    tool_changed: Option<ToolChanged>,
    /// Each tenant's choice for credentials in upstream arguments.
    secrets: Arc<corkboard_tools::SecretPolicies>,
    /// Where a grant is marked before its run's first upstream call (the
    /// level its board writes get from then on).
    calls: Arc<UpstreamCalls>,
}

impl std::fmt::Debug for Upstreams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstreams")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// Most cached views (grant capability sets × tenants) before the cache
/// is emptied and rebuilt on demand.
const VIEWS_MAX: usize = 4096;

impl Upstreams {
    pub fn new(
        store: Arc<dyn UpstreamStore>,
        key: Arc<CredentialKey>,
        audit: Arc<dyn AuditSink>,
        options: UpstreamOptions,
    ) -> Result<Self, UpstreamError> {
        // Connects only where the egress policy allows (checked on the
        // resolved address), follows no redirect (it could carry the
        // credential header to another host).
        let http = options
            .egress
            .client_builder()
            .connect_timeout(options.connect_timeout)
            .build()
            .map_err(|e| UpstreamError::Unavailable(format!("HTTP client: {e}")))?;
        let shares = options.shares;
        Ok(Self {
            store,
            key,
            http,
            audit,
            options,
            relay: None,
            waiting: Waiting::new(shares.held_calls, shares.pending_requests),
            sessions: Arc::new(SharedTable::new(Table::Sessions, shares.sessions)),
            used: Arc::new(MemoryUsedOnce::default()),
            tenants: Mutex::new(HashMap::new()),
            views: Mutex::new(HashMap::new()),
            serials: AtomicU64::new(1),
            tool_changed: None,
            secrets: Arc::default(),
            calls: Arc::new(UpstreamCalls::new(
                Arc::new(MemoryUsedOnce::default()),
                corkboard_grants::DEFAULT_MAX_LIFETIME,
            )),
        })
    }

    /// Reads each tenant's choice for credentials in upstream arguments
    /// (refuse or redact) from `policies` (without: refused).
    pub fn with_secret_policies(mut self, policies: Arc<corkboard_tools::SecretPolicies>) -> Self {
        self.secrets = policies;
        self
    }

    /// Tells `changed` of every tool this process finds newly pending
    /// (new, or changed since it was approved): the live board's hint.
    /// Webhooks get `upstream.tool_changed` from the store either way.
    pub fn with_tool_changes(mut self, changed: ToolChanged) -> Self {
        self.tool_changed = Some(changed);
        self
    }

    /// What pinning needs of this hub.
    fn pinning(&self) -> Pinning<'_> {
        Pinning {
            store: self.store.as_ref(),
            timeout: self.options.list_timeout,
            ttl: self.options.registry_ttl,
            retry: self.options.retry_after_failure,
            changed: self.tool_changed.as_ref(),
        }
    }

    /// Relays upstreams' requests to the client to agents that can answer
    /// them, under ids sealed by `sealer` (share its key between replicas:
    /// any replica takes an answer).
    pub fn with_relay(mut self, sealer: RelaySealer) -> Self {
        self.relay = Some(sealer);
        self
    }

    /// Marks grants whose runs call upstream tools in `calls` (the one
    /// the board tools read, over the shared used-once record), instead of
    /// this process's memory.
    pub fn with_upstream_calls(mut self, calls: Arc<UpstreamCalls>) -> Self {
        self.calls = calls;
        self
    }

    /// Records used sealed states and relayed answers in `used` (share it
    /// between replicas: Redis when the registry is), instead of this
    /// process's memory.
    pub fn with_used_once(mut self, used: Arc<dyn UsedOnce>) -> Self {
        self.used = used;
        self
    }

    /// What the gateway declares when it lists an upstream's tools: with
    /// a relay, sampling and form elicitation (so servers that list tools
    /// by their client's capabilities list the tools that ask; an agent
    /// that declared neither is refused at once when it calls one); roots
    /// are left out, because servers ask for roots when a session starts,
    /// outside any call, where there is no agent to ask.
    fn listing_capabilities(&self) -> AgentCapabilities {
        if self.relay.is_some() {
            AgentCapabilities {
                sampling: true,
                elicitation_form: true,
                ..AgentCapabilities::default()
            }
        } else {
            AgentCapabilities::default()
        }
    }

    /// Whether requests to the client are relayed at all.
    pub fn relays(&self) -> bool {
        self.relay.is_some()
    }

    /// Takes the agent's `response` to a relayed request (see
    /// [`crate::seam`]): checked and delivered to its upstream under the
    /// upstream's own id. An error is the agent's answer (`-32602` when its
    /// id or its answer was refused; the upstream then got a correlated
    /// error instead).
    pub async fn deliver(
        &self,
        grant: &ResolvedGrant,
        peer: &Peer,
        response: ClientResponse<'_>,
    ) -> Result<(), RpcError> {
        let Some(sealer) = &self.relay else {
            return Ok(());
        };
        let g = grant.grant();
        let Some(delivery) = seam::answer(
            sealer,
            g.tenant.as_str(),
            g.run.as_str(),
            g.id.as_str(),
            peer,
            response,
        )?
        else {
            return Ok(());
        };
        if let Some((relayed_id, answer)) = delivery.held {
            if !self.waiting.answer(&relayed_id, answer) {
                tracing::info!(upstream = %delivery.upstream, run = %g.run, tenant = %g.tenant, outcome = "not_held", "relay answer");
                return Err(delivery.refused.unwrap_or_else(|| RpcError::invalid_params(
                    "Invalid params: this answer reached a gateway replica that does not hold the call waiting for it (or the call already ended); make the tool call again",
                )));
            }
            return match delivery.refused {
                Some(refused) => Err(refused),
                None => Ok(()),
            };
        }
        // Delivered to the upstream's session at most once, on any replica
        // (the held answers above are single-use by being taken out).
        seam::use_once(
            self.used.as_ref(),
            seam::USED_RELAYED_ID,
            &delivery.nonce,
            delivery.expires_at,
            "response id",
            (g.tenant.as_str(), g.run.as_str()),
        )
        .await?;
        let state = self.tenant(&g.tenant).await;
        let Some(conn) = state
            .conns
            .iter()
            .find(|c| c.record.name.as_str() == delivery.upstream)
        else {
            return Err(RpcError::invalid_params(format!(
                "Invalid params: upstream {} is no longer registered; its request cannot be answered",
                delivery.upstream
            )));
        };
        let client = conn.client.as_ref().map_err(|why| {
            RpcError::internal(format!(
                "Internal error: upstream {} unavailable: {why}",
                delivery.upstream
            ))
        })?;
        let delivered = client
            .deliver(
                delivery.session.as_deref(),
                &delivery.revision,
                delivery.body,
            )
            .await;
        if let Some(refused) = delivery.refused {
            return Err(refused);
        }
        delivered.map_err(|e| {
            tracing::info!(upstream = %delivery.upstream, run = %g.run, tenant = %g.tenant, outcome = "undelivered", "relay answer");
            RpcError::internal(format!("Internal error: {e}; the answer was not delivered"))
        })
    }

    /// Runs an upstream tool of `view`; `None` when `call` is not one (a
    /// board tool). Audited and logged once (see [`crate::view`]).
    pub async fn call(
        &self,
        view: &UpstreamView,
        grant: &ResolvedGrant,
        call: &ToolCall<'_>,
    ) -> Option<ToolOutput> {
        let (route, def) = view.route(call.name)?;
        let started = Instant::now();
        let at = Timestamp::now();
        let (upstream, hash, (output, outcome)) = match route {
            Route::Tool { conn, tool, hash } => (
                &conn.record.name,
                Some(hash),
                // Marked before anything is sent: from the answer on, the
                // run's board writes count as external.
                match self.calls.mark(grant.grant()).await {
                    Ok(()) => self.screened_call(conn, tool, def, grant, call).await,
                    Err(err) => view::unmarked(&conn.record.name, &err.to_string()),
                },
            ),
            Route::Unavailable { conn } => (
                &conn.record.name,
                None,
                view::relisted(&conn.record.name, self.relist(conn).await),
            ),
        };
        view::record_call(
            self.audit.as_ref(),
            upstream,
            grant,
            call,
            at,
            started.elapsed(),
            outcome,
            hash,
        );
        Some(output)
    }

    /// Calls `tool` with its arguments screened for credentials first: as
    /// the tenant's settings say, refused (nothing sent) or redacted (the
    /// call goes on with `[redacted <kind>]` in their place, audited
    /// `secret_redacted`).
    async fn screened_call(
        &self,
        conn: &Arc<Conn>,
        tool: &str,
        def: &ToolDef,
        grant: &ResolvedGrant,
        call: &ToolCall<'_>,
    ) -> (ToolOutput, corkboard_board::AuditOutcome) {
        let tenant = &grant.grant().tenant;
        match corkboard_tools::screen_arguments(&self.secrets, tenant, call.raw_arguments).await {
            Ok(None) => view::call_tool(&self.call_env(), conn, tool, def, grant, call).await,
            Err(kinds) => view::secret_refused(&conn.record.name, &kinds),
            Ok(Some((bytes, _))) => {
                let Ok(Value::Object(arguments)) = serde_json::from_slice::<Value>(&bytes) else {
                    return view::secret_refused(&conn.record.name, "unreadable after redaction");
                };
                let redacted = ToolCall {
                    name: call.name,
                    arguments: &arguments,
                    raw_arguments: &bytes,
                    peer: call.peer,
                    input_responses: call.input_responses,
                    request_state: call.request_state,
                    progress_token: call.progress_token,
                };
                let (output, outcome) =
                    view::call_tool(&self.call_env(), conn, tool, def, grant, &redacted).await;
                match outcome {
                    corkboard_board::AuditOutcome::Ok => {
                        (output, corkboard_board::AuditOutcome::SecretRedacted)
                    }
                    other => (output, other),
                }
            }
        }
    }

    /// Audits a call the protocol layer refused when it names one of
    /// `view`'s upstream tools (listed, or listed but outside the grant)
    /// and says why (the inner message); `None` leaves it to the board.
    pub fn refused(
        &self,
        view: &UpstreamView,
        grant: &ResolvedGrant,
        call: &RefusedCall<'_>,
    ) -> Option<Option<String>> {
        view.refused(self.audit.as_ref(), grant, call)
    }

    /// What a call needs of these upstreams.
    fn call_env(&self) -> CallEnv<'_> {
        CallEnv {
            call_timeout: self.options.call_timeout,
            relay_call_timeout: self.options.relay_call_timeout,
            relay: self.relay.as_ref(),
            waiting: &self.waiting,
            used: self.used.as_ref(),
            listed_with: self.listing_capabilities(),
        }
    }

    /// The upstream tools `grant` may see and call, with the board's tools
    /// for its capabilities in front; `None` when the grant names no
    /// upstream (its requests are the board's alone).
    pub async fn view(&self, grant: &ResolvedGrant) -> Option<Arc<UpstreamView>> {
        let caps = &grant.grant().capabilities;
        caps.upstream_patterns().next()?;
        let tenant = &grant.grant().tenant;
        let state = self.tenant(tenant).await;
        let allowed: Vec<Arc<Conn>> = state
            .conns
            .iter()
            .filter(|conn| {
                caps.upstream_patterns()
                    .any(|p| p.upstream() == &conn.record.name)
            })
            .cloned()
            .collect();
        if allowed.is_empty() {
            return None;
        }
        let mut snapshots = Vec::with_capacity(allowed.len());
        for conn in &allowed {
            snapshots.push(self.tools_of(conn).await);
        }
        let stamp: Vec<(u64, u64, u64)> = allowed
            .iter()
            .zip(&snapshots)
            .map(|(conn, snap)| (conn.serial, snap.generation, snap.pins_generation))
            .collect();
        let cache_key = (tenant.clone(), caps.clone(), grant.grant().budgets.clone());
        if let Some(view) = lock(&self.views).get(&cache_key)
            && view.stamp == stamp
        {
            return Some(view.clone());
        }
        let view = Arc::new(build_view(grant.grant(), &allowed, &snapshots, stamp));
        let mut views = lock(&self.views);
        if views.len() >= VIEWS_MAX {
            views.clear();
        }
        views.insert(cache_key, view.clone());
        Some(view)
    }

    /// The tenant's registrations, re-read once they are older than the TTL.
    async fn tenant(&self, tenant: &TenantId) -> Arc<TenantState> {
        let cached = lock(&self.tenants).get(tenant).cloned();
        if let Some(state) = &cached
            && state.loaded.elapsed() < self.options.registry_ttl
        {
            return state.clone();
        }
        let read =
            tokio::time::timeout(self.options.list_timeout, self.store.list_upstreams(tenant))
                .await;
        let records = match read {
            Ok(Ok(records)) => records,
            Ok(Err(err)) => {
                tracing::warn!(%tenant, error = %err, "could not read the tenant's upstreams; using the last known");
                return self.keep(tenant, cached);
            }
            Err(_) => {
                tracing::warn!(%tenant, "reading the tenant's upstreams timed out; using the last known");
                return self.keep(tenant, cached);
            }
        };
        let previous: Vec<Arc<Conn>> = cached.map(|s| s.conns.clone()).unwrap_or_default();
        let conns = records
            .into_iter()
            .map(|record| {
                // Same URL, header and sealed credential: keep the client
                // (its session and tool list); anything else is a new one.
                previous
                    .iter()
                    .find(|c| c.record == record)
                    .cloned()
                    .unwrap_or_else(|| Arc::new(self.connect(record)))
            })
            .collect();
        let state = Arc::new(TenantState {
            loaded: Instant::now(),
            conns,
        });
        lock(&self.tenants).insert(tenant.clone(), state.clone());
        state
    }

    /// The last known state (or none), retried after the failure delay.
    fn keep(&self, tenant: &TenantId, cached: Option<Arc<TenantState>>) -> Arc<TenantState> {
        let retry_in = self.options.retry_after_failure;
        let loaded = Instant::now()
            .checked_sub(self.options.registry_ttl.saturating_sub(retry_in))
            .unwrap_or_else(Instant::now);
        let state = Arc::new(TenantState {
            loaded,
            conns: cached.map(|s| s.conns.clone()).unwrap_or_default(),
        });
        lock(&self.tenants).insert(tenant.clone(), state.clone());
        state
    }

    fn connect(&self, record: Upstream) -> Conn {
        let client = self
            .key
            .open(
                &record.tenant,
                &record.name,
                &record.header,
                &record.url,
                &record.credential,
            )
            .and_then(|credential| {
                UpstreamClient::new(
                    self.http.clone(),
                    &self.options,
                    &record,
                    &credential,
                    self.sessions.clone(),
                )
            })
            .map_err(|e| e.to_string());
        if let Err(why) = &client {
            tracing::warn!(upstream = %record.name, tenant = %record.tenant, reason = %why, "upstream cannot be used");
        }
        Conn {
            record,
            client,
            tools: Mutex::new(ToolsState::default()),
            pins: Mutex::new(Pins::default()),
            fetching: tokio::sync::Mutex::new(()),
            serial: self.serials.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// `conn`'s tools (cached, or fetched within the list timeout) and
    /// their approved definitions (re-read once older than the registry
    /// TTL; recorded after each fetch).
    async fn tools_of(&self, conn: &Conn) -> Snapshot {
        let fetched = self.listing_of(conn).await;
        if !fetched {
            self.pinning()
                .refresh(&conn.pins, &conn.record.tenant, &conn.record.name)
                .await;
        }
        let (approved, pins_generation) = {
            let pins = lock(&conn.pins);
            (pins.approved(self.options.registry_ttl).0, pins.generation)
        };
        let state = lock(&conn.tools);
        Snapshot {
            listed: state.listed.clone(),
            failure: state.failure.clone(),
            generation: state.generation,
            approved,
            pins_generation,
        }
    }

    /// Fetches `conn`'s tools unless the cached list is fresh; whether it
    /// fetched them (and so recorded their pins).
    async fn listing_of(&self, conn: &Conn) -> bool {
        if self.fresh(conn) {
            return false;
        }
        // One fetch per upstream at a time; the others wait for it (within
        // the same bound) and read what it found.
        let _fetching = conn.fetching.lock().await;
        if self.fresh(conn) {
            return false;
        }
        let fetched = match &conn.client {
            Ok(client) => client
                .list_tools(
                    self.options.list_timeout,
                    self.options.max_pages,
                    self.listing_capabilities(),
                )
                .await
                .map_err(|e| e.to_string()),
            Err(why) => Err(why.clone()),
        };
        let sightings = {
            let mut state = lock(&conn.tools);
            state.checked = Some(Instant::now());
            state.generation += 1;
            match fetched {
                Ok(tools) => {
                    let (listed, sightings) = self.admit_tools(&conn.record.name, tools);
                    state.listed = Some(Arc::new(listed));
                    state.failure = None;
                    Some(sightings)
                }
                Err(why) => {
                    tracing::warn!(upstream = %conn.record.name, tenant = %conn.record.tenant, reason = %why, "upstream tools could not be listed");
                    state.failure = Some(why);
                    None
                }
            }
        };
        match sightings {
            Some(sightings) => {
                self.pinning()
                    .observe(
                        &conn.pins,
                        &conn.record.tenant,
                        &conn.record.name,
                        &sightings,
                        conn.record.trust_first_listing,
                    )
                    .await;
                true
            }
            None => false,
        }
    }

    fn fresh(&self, conn: &Conn) -> bool {
        let state = lock(&conn.tools);
        let Some(checked) = state.checked else {
            return false;
        };
        let ttl = if state.failure.is_some() {
            self.options.retry_after_failure
        } else {
            self.options.tools_ttl
        };
        checked.elapsed() < ttl
    }

    /// The upstream's tools that pass the validator, renamed, with the
    /// sightings of their pinned definitions; the rest dropped and logged
    /// (by name only when the name itself is valid).
    fn admit_tools(
        &self,
        upstream: &UpstreamName,
        tools: Vec<Value>,
    ) -> (Listed, Vec<ToolSighting>) {
        let mut admitted: Vec<(ToolDef, String, DefinitionHash)> = Vec::new();
        let mut sightings = Vec::new();
        let mut dropped = 0usize;
        for tool in tools {
            match tool_def(upstream, &tool) {
                Ok(_) if admitted.len() >= self.options.max_tools => dropped += 1,
                Ok((def, original)) => {
                    if admitted.iter().any(|(d, _, _)| d.name == def.name) {
                        tracing::warn!(%upstream, tool = %def.name, "upstream lists a tool twice; the second is dropped");
                        continue;
                    }
                    let Some(sighting) = ToolSighting::of(&tool) else {
                        dropped += 1;
                        tracing::warn!(%upstream, tool = %def.name, max = corkboard_board::TOOL_DEFINITION_MAX, "upstream tool dropped: its definition is too long to pin");
                        continue;
                    };
                    admitted.push((def, original, sighting.hash.clone()));
                    sightings.push(sighting);
                }
                Err(reason) => {
                    dropped += 1;
                    tracing::warn!(%upstream, %reason, "upstream tool dropped: its definition failed validation");
                }
            }
        }
        if dropped > 0 {
            tracing::warn!(%upstream, dropped, max = self.options.max_tools, "upstream tools dropped (invalid, or over the limit)");
        }
        (Listed { tools: admitted }, sightings)
    }
}

/// An upstream tool as the agent sees it, checked by the one validator.
/// The error names the tool only when its name is a valid tool name.
fn tool_def(upstream: &UpstreamName, tool: &Value) -> Result<(ToolDef, String), String> {
    let original = tool
        .get("name")
        .and_then(Value::as_str)
        .ok_or("a tool without a string name")?;
    // Offered cleaned (invisible characters, escapes, HTML comments
    // stripped): a tool description is text every run reads. The pin
    // hashes the definition as listed.
    let text = |key: &str| {
        tool.get(key)
            .and_then(Value::as_str)
            .map(|t| corkboard_board::clean_text(t).0)
    };
    let def = ToolDef {
        name: format!("{upstream}{SEPARATOR}{original}"),
        title: text("title"),
        description: text("description").unwrap_or_default(),
        input_schema: tool.get("inputSchema").cloned().unwrap_or(Value::Null),
        output_schema: tool.get("outputSchema").cloned(),
        annotations: tool.get("annotations").cloned(),
        results: ResultOrigin::Relayed,
    };
    corkboard_mcp::check_tool_definition(&def).map_err(|problem| {
        if original
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
            && original.len() <= 128
        {
            problem
        } else {
            "a tool whose name is not 1-128 characters of [A-Za-z0-9_.-]".to_owned()
        }
    })?;
    Ok((def, original.to_owned()))
}

/// What a cached view is for.
type ViewKey = (TenantId, Capabilities, corkboard_board::Budgets);

/// The board's tools for `grant` (its budgets in their descriptions), then
/// each allowed upstream's.
fn build_view(
    grant: &corkboard_board::Grant,
    conns: &[Arc<Conn>],
    snapshots: &[Snapshot],
    stamp: Vec<(u64, u64, u64)>,
) -> UpstreamView {
    let caps = &grant.capabilities;
    let board = corkboard_tools::grant_tool_set(grant);
    let mut defs: Vec<ToolDef> = board.tools().to_vec();
    let mut routes = HashMap::new();
    let mut denied = HashMap::new();
    let mut pending = HashMap::new();
    for (conn, snapshot) in conns.iter().zip(snapshots) {
        let name = &conn.record.name;
        match (&snapshot.listed, &snapshot.failure) {
            (Some(listed), _) => {
                for (def, original, hash) in &listed.tools {
                    let approved = snapshot.approved.get(original) == Some(hash);
                    if caps.allows_upstream(name, original) && !approved {
                        pending.insert(
                            def.name.clone(),
                            format!(
                                "tool {} is pending: upstream {name} lists it with a definition no tenant admin has approved yet (a new tool, or one whose description, schemas or annotations changed since it was approved), so it is not offered to runs; a tenant admin can review and approve it (corkboard upstream tools {name}, then corkboard upstream approve {name} {original})",
                                def.name
                            ),
                        );
                    } else if caps.allows_upstream(name, original) {
                        routes.insert(
                            def.name.clone(),
                            Route::Tool {
                                conn: conn.clone(),
                                tool: original.clone(),
                                hash: hash.clone(),
                            },
                        );
                        defs.push(def.clone());
                    } else {
                        denied.insert(def.name.clone(), format!("upstream:{name}:{original}"));
                    }
                }
            }
            (None, failure) => {
                let why = failure.as_deref().unwrap_or("not listed yet");
                let def = ToolDef {
                    name: format!("{name}{SEPARATOR}{UNAVAILABLE_TOOL}"),
                    title: None,
                    description: format!(
                        "Upstream {name} could not be listed, so its tools are missing from this list: {why}. Call this tool to check again; its tools appear in tools/list once it answers."
                    ),
                    input_schema: serde_json::json!({ "type": "object" }),
                    output_schema: None,
                    annotations: Some(serde_json::json!({ "readOnlyHint": true })),
                    results: ResultOrigin::Relayed,
                };
                routes.insert(def.name.clone(), Route::Unavailable { conn: conn.clone() });
                defs.push(def);
            }
        }
    }
    UpstreamView {
        tools: Arc::new(ToolSet::new(defs)),
        routes,
        denied,
        pending,
        stamp,
    }
}

impl Upstreams {
    /// Lists `conn`'s tools again now (a call to its stand-in tool).
    async fn relist(&self, conn: &Conn) -> Result<usize, String> {
        lock(&conn.tools).checked = None;
        let snapshot = self.tools_of(conn).await;
        match (snapshot.failure, snapshot.listed) {
            (Some(why), _) => Err(why),
            (None, Some(listed)) => Ok(listed.tools.len()),
            (None, None) => Err("not listed".into()),
        }
    }
}

/// A call held for a person's approval takes a place in the relay's
/// held-calls table, with the same per-tenant and per-run shares.
impl corkboard_tools::HoldShares for Upstreams {
    fn hold(
        &self,
        tenant: &corkboard_board::TenantId,
        run: &corkboard_board::RunId,
    ) -> Result<corkboard_tools::HoldPermit, String> {
        let holder = crate::shares::Holder::run(tenant.as_str(), run.as_str());
        self.waiting
            .hold_for_approval(&holder)
            .map(corkboard_tools::HoldPermit::new)
            .map_err(|full| full.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn upstream_tools_are_renamed_and_checked() {
        let up = UpstreamName::parse("github").unwrap();
        let (def, original) = tool_def(
            &up,
            &json!({ "name": "issue_read", "description": "Reads", "inputSchema": { "type": "object" } }),
        )
        .unwrap();
        assert_eq!(def.name, "github__issue_read");
        assert_eq!(original, "issue_read");
        let bad = tool_def(
            &up,
            &json!({ "name": "x", "inputSchema": { "type": "object", "properties": { "n": { "type": "int" } } } }),
        );
        assert!(bad.unwrap_err().contains("github__x"));
        let no_schema = tool_def(&up, &json!({ "name": "y" }));
        assert!(no_schema.is_err());
        let bad_name = tool_def(
            &up,
            &json!({ "name": "has space secret", "inputSchema": { "type": "object" } }),
        );
        assert_eq!(
            bad_name.unwrap_err(),
            "a tool whose name is not 1-128 characters of [A-Za-z0-9_.-]",
            "a name that is not a tool name is not logged"
        );
    }
}
