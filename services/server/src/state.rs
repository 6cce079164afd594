//! Everything a request handler needs, assembled from the parts the
//! binary composes (`services/cli/src/compose.rs` decides which store,
//! registry, secrets and session store a configuration selects).

use crate::audit::AuditWriter;
use corkboard_api::{AdminAuthenticator, ApiError};
use corkboard_board::AuditSink;
use corkboard_board::BoardStore;
use corkboard_config::{ConfigError, Settings};
use corkboard_grants::{AdminPrincipal, AdminVerifier, GrantService, IssuedGrant, TokenRegistry};
use corkboard_mcp::{McpEndpoint, McpSettings, SessionEnds};
use corkboard_telemetry::Metrics;
use corkboard_tools::{ApprovalGate, BoardTools};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;

/// Why the application could not start, naming the setting to fix.
#[derive(Debug, Error)]
pub enum StartError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("store: {0}")]
    Store(String),
    #[error("registry: {0}")]
    Registry(String),
    #[error("{key}: {reason}")]
    Setting { key: &'static str, reason: String },
}

/// What [`AppState::new`] is built from: the backends and secrets the
/// configuration selected, opened by the binary.
pub struct AppParts {
    pub settings: Settings,
    pub metrics: Metrics,
    /// The board store (the binary wraps it in
    /// [`MeteredStore`](crate::metered::MeteredStore)).
    pub store: Arc<dyn BoardStore>,
    /// Resolves run tokens; reads through `store`'s ledger.
    pub registry: Arc<dyn TokenRegistry>,
    pub admin: AdminVerifier,
    /// Signs web board cookies (the newest key; every listed key verifies).
    pub session_key: corkboard_mcp::SessionKey,
    pub web: crate::web::WebState,
    pub session_ends: Arc<dyn SessionEnds>,
    /// The studio endpoint's settings (origins, hosts, body limit, key).
    pub mcp: McpSettings,
    /// Meters the studio endpoint's requests per run (none: unmetered).
    pub rate_limiter: Option<Arc<dyn corkboard_grants::RateLimiter>>,
    /// Counts per-run write budgets (none: in `store`'s ledger).
    pub budgets: Option<Arc<dyn corkboard_grants::BudgetCounter>>,
    /// The operator's default budgets of runs' grants (`run_budgets`,
    /// parsed by the caller so a bad value is refused naming its key).
    pub run_budgets: corkboard_board::Budgets,
    /// Which grants' runs called upstream tools (marked by the runner's
    /// gateways, read for the level of every run's board writes).
    pub upstream_calls: Arc<corkboard_grants::UpstreamCalls>,
}

impl std::fmt::Debug for AppParts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppParts").finish_non_exhaustive()
    }
}

/// Shared application state (cheap to clone: everything is behind `Arc`).
#[derive(Clone)]
pub struct AppState {
    pub settings: Arc<Settings>,
    pub store: Arc<dyn BoardStore>,
    pub grants: GrantService,
    pub admin: Arc<AdminVerifier>,
    /// Signs web board cookies (the newest key; every listed key verifies).
    pub session_key: corkboard_mcp::SessionKey,
    /// Batches audit records of tool calls into the store.
    pub audit: Arc<AuditWriter>,
    /// The studio MCP endpoint (`/mcp`): the board tools for any valid grant.
    pub mcp: McpEndpoint<BoardTools>,
    /// This process's Prometheus metrics (`/metrics`).
    pub metrics: Metrics,
    /// The web board: sign-in, sessions, live events.
    pub web: crate::web::WebState,
    /// Ended legacy MCP sessions: in Redis when the registry is (so a
    /// DELETE on one replica ends the session on all), in memory otherwise.
    pub session_ends: Arc<dyn SessionEnds>,
    /// Where tool calls are accounted: the audit writer, and the live
    /// board events derived from it. Every MCP endpoint (studio, run
    /// gateways) passes this to its tools.
    pub tool_audit: Arc<dyn AuditSink>,
    /// Which calls wait for a person's approval: the one gate of this
    /// process, asked by the studio endpoint's tools and the run gateways.
    pub approvals: Arc<ApprovalGate>,
    /// Which grants' runs called upstream tools: the run gateways mark
    /// them, every board endpoint of this process reads them for the level
    /// of a run's writes.
    pub upstream_calls: Arc<corkboard_grants::UpstreamCalls>,
    /// Seals upstream MCP servers' credentials (none: upstreams are off,
    /// their API answers 503).
    pub upstream_key: Option<Arc<corkboard_upstream::CredentialKey>>,
    /// Where connections made for tenants may go (`egress_allow`): checked
    /// when upstreams are registered; the runner's upstream clients use
    /// the same policy.
    pub egress: Arc<corkboard_egress::EgressPolicy>,
    /// Where webhook endpoints may point: `egress` with
    /// `webhook_allowed_hosts`.
    pub webhook_hosts: Arc<crate::webhooks::HostPolicy>,
    /// When the datastores last answered `/readyz` (a blip is tolerated).
    pub readiness: Arc<crate::health::Readiness>,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState").finish_non_exhaustive()
    }
}

impl AppState {
    /// Assembles the state from its parts: the grant service over the
    /// registry, the batching audit writer, the live-event sink every MCP
    /// endpoint accounts its tool calls to, and the studio endpoint.
    pub fn new(parts: AppParts) -> Self {
        let AppParts {
            settings,
            metrics,
            store,
            registry,
            admin,
            session_key,
            web,
            session_ends,
            mcp: mut mcp_settings,
            rate_limiter,
            budgets,
            run_budgets,
            upstream_calls,
        } = parts;
        let ledger: Arc<dyn corkboard_board::GrantLedger> = store.clone();
        let grants = GrantService::new(ledger.clone(), registry)
            .with_live_grants_max(settings.live_grants_per_tenant_max)
            .with_max_lifetime(std::time::Duration::from_secs(
                settings.grant_max_lifetime_secs,
            ));
        let grants = grants.with_run_budgets(run_budgets);
        let grants = match budgets {
            Some(counter) => grants.with_budgets(counter),
            None => grants,
        };
        let audit = AuditWriter::spawn_with_metrics(store.clone(), Some(metrics.clone()));
        let tool_audit: Arc<dyn AuditSink> = Arc::new(crate::web::EventPublishingSink::new(
            audit.clone(),
            web.events(),
        ));
        // Held calls have the relay's held-call shares (the relay's own
        // table once the runner has upstreams: `compose`).
        let held = corkboard_upstream::shares::ShareLimits::of(
            settings.upstream_held_calls_max,
            settings.upstream_tenant_share_pct,
            settings.upstream_run_share_pct,
        );
        let approvals = Arc::new(
            ApprovalGate::new(
                ledger,
                tool_audit.clone(),
                Duration::from_millis(settings.store_timeout_ms),
            )
            .with_events(Arc::new(web.clone()))
            .with_hold(
                Duration::from_millis(settings.approval_hold_ms),
                Arc::new(corkboard_tools::LocalHolds::new(
                    held.total,
                    held.per_tenant,
                    held.per_run,
                )),
            ),
        );
        let issues: Arc<dyn corkboard_board::IssueStore> = store.clone();
        let tools = BoardTools::new(issues, grants.registry().clone(), tool_audit.clone())
            .with_approvals(approvals.clone())
            .with_store_timeout(Duration::from_millis(settings.store_timeout_ms))
            .with_result_budget(settings.max_result_bytes)
            .with_claim_lease(Duration::from_millis(settings.claim_lease_ms))
            .with_metrics(metrics.clone())
            .with_budgets(grants.budgets().clone())
            .with_upstream_calls(upstream_calls.clone())
            .with_secret_policies(Arc::new(corkboard_tools::SecretPolicies::new(
                grants.ledger().clone(),
                Duration::from_millis(settings.store_timeout_ms),
            )));
        let tools = match rate_limiter {
            Some(limiter) => tools.with_rate_limiter(limiter),
            None => tools,
        };
        mcp_settings.metrics = Some(metrics.clone());
        let mcp =
            McpEndpoint::with_session_ends(Arc::new(tools), mcp_settings, session_ends.clone());
        Self {
            settings: Arc::new(settings),
            store,
            grants,
            admin: Arc::new(admin),
            session_key,
            audit,
            mcp,
            metrics,
            web,
            tool_audit,
            approvals,
            upstream_calls,
            session_ends,
            upstream_key: None,
            egress: Arc::default(),
            webhook_hosts: Arc::default(),
            readiness: Arc::default(),
        }
    }

    /// How long a claim lasts without a write by its holder (the same lease
    /// the board tools give, `claim_lease_ms`).
    pub fn claim_lease(&self) -> Duration {
        Duration::from_millis(self.settings.claim_lease_ms)
    }

    /// `grant`'s run as a claimant: this board's lease, and the level the
    /// run writes at now (as the board tools would record it).
    pub async fn claimant(&self, grant: &corkboard_board::Grant) -> corkboard_board::Claimant {
        let integrity =
            corkboard_grants::UpstreamCalls::writer_integrity(Some(&self.upstream_calls), grant)
                .await;
        corkboard_board::Claimant::of(grant, self.claim_lease(), integrity)
    }

    /// The egress policy, and the webhook host policy built on it (the
    /// defaults refuse every internal address and open nothing).
    pub fn with_egress(
        mut self,
        egress: Arc<corkboard_egress::EgressPolicy>,
        webhook_hosts: crate::webhooks::HostPolicy,
    ) -> Self {
        self.egress = egress;
        self.webhook_hosts = Arc::new(webhook_hosts);
        self
    }

    /// Turns the upstream API on, sealing credentials with `key`.
    pub fn with_upstream_key(mut self, key: Arc<corkboard_upstream::CredentialKey>) -> Self {
        self.upstream_key = Some(key);
        self
    }

    /// The admin authenticator for `web::Data<dyn AdminAuthenticator>`, so
    /// that routes mounted beside this app's (the runner's `/v1/runs`)
    /// accept what the admin API accepts: a bearer admin JWT or the web
    /// board's session cookie.
    pub fn authenticator(&self) -> actix_web::web::Data<dyn AdminAuthenticator> {
        actix_web::web::Data::from(Arc::new(self.clone()) as Arc<dyn AdminAuthenticator>)
    }

    /// Base URL of this server as clients reach it.
    pub fn public_url(&self) -> String {
        self.settings.advertised_url()
    }

    /// The MCP URL a grant's run uses: the shared runner gateway route when
    /// one is configured, the studio endpoint otherwise.
    pub fn mcp_url_for(&self, grant: &corkboard_board::Grant) -> String {
        match &self.settings.gateway_public_url {
            Some(base) => format!("{}/runs/{}/mcp", base.trim_end_matches('/'), grant.run),
            None => format!("{}/mcp", self.public_url()),
        }
    }

    /// The one response that carries a token.
    pub fn issued_grant_json(&self, issued: &IssuedGrant) -> serde_json::Value {
        let url = self.mcp_url_for(&issued.grant);
        json!({
            "grant": issued.grant,
            "token": issued.token.expose(),
            "mcp_url": url,
            "mcp_config": corkboard_grants::mcp_client_config(&url, &issued.token),
        })
    }
}

impl AdminAuthenticator for AppState {
    fn authenticate(&self, req: &actix_web::HttpRequest) -> Result<AdminPrincipal, ApiError> {
        crate::web::authenticate(req, self)
    }
}
