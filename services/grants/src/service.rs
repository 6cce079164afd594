//! Issuing and revoking grants: the ledger first (durable), then the registry.

use crate::budget::{BudgetCounter, LedgerBudgets};
use crate::error::RegistryError;
use crate::registry::TokenRegistry;
use crate::token::RunToken;
use corkboard_board::{
    Budgets, Capabilities, Grant, GrantEvent, GrantId, GrantLedger, GrantStatus, RunId, TenantId,
    Timestamp,
};
use std::sync::Arc;
use std::time::Duration;

/// Longest lifetime a grant may be given.
pub const MAX_TTL: Duration = Duration::from_secs(30 * 24 * 3600);

/// How long a grant may live in all, from its creation, renewals included,
/// unless configured otherwise (`grant_max_lifetime_secs`, or per tenant).
pub const DEFAULT_MAX_LIFETIME: Duration = MAX_TTL;

/// How a renewal moves a grant's expiry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renewal {
    /// To this instant (later than the current expiry).
    Until(Timestamp),
    /// The current expiry plus this much.
    ExtendBy(Duration),
    /// To now plus this much, capped at the maximum lifetime instead of
    /// refused past it: the keep-alive of a run that lives as long as its
    /// process (`corkboard run`). Never shortens the grant.
    KeepAlive(Duration),
}

/// What to grant.
#[derive(Debug, Clone)]
pub struct GrantRequest {
    pub tenant: TenantId,
    pub run: RunId,
    pub capabilities: Capabilities,
    pub ttl: Duration,
    pub created_by: String,
    /// What the run may write in total (empty: unlimited).
    pub budgets: Budgets,
    /// The lowest level of what the run is shown (none: everything).
    pub min_integrity: Option<corkboard_board::Integrity>,
}

/// A freshly issued grant with its token: the only time the token exists
/// outside the client that receives it.
#[derive(Debug, Clone)]
pub struct IssuedGrant {
    pub grant: Grant,
    pub token: RunToken,
}

/// Issues and revokes grants against a ledger and a registry.
#[derive(Clone)]
pub struct GrantService {
    ledger: Arc<dyn GrantLedger>,
    registry: Arc<dyn TokenRegistry>,
    live_grants_max: usize,
    max_lifetime: Duration,
    budgets: Arc<dyn BudgetCounter>,
    /// The operator's default budgets of runs' grants (`run_budgets`).
    run_budgets: Budgets,
}

impl std::fmt::Debug for GrantService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrantService").finish_non_exhaustive()
    }
}

impl GrantService {
    /// Live grants one tenant may hold unless configured otherwise.
    pub const DEFAULT_LIVE_GRANTS_MAX: usize = 1_000;

    /// Budgets are counted in `ledger` unless [`Self::with_budgets`] says
    /// otherwise.
    pub fn new(ledger: Arc<dyn GrantLedger>, registry: Arc<dyn TokenRegistry>) -> Self {
        Self {
            budgets: Arc::new(LedgerBudgets::new(ledger.clone())),
            ledger,
            registry,
            live_grants_max: Self::DEFAULT_LIVE_GRANTS_MAX,
            max_lifetime: DEFAULT_MAX_LIFETIME,
            run_budgets: Budgets::new(),
        }
    }

    /// The operator's default budgets of runs' grants (a tenant's own
    /// `run_budgets` replace them).
    pub fn with_run_budgets(mut self, defaults: Budgets) -> Self {
        self.run_budgets = defaults;
        self
    }

    /// Counts per-run write budgets in `counter` (Redis when the registry
    /// is; the composition root decides).
    pub fn with_budgets(mut self, counter: Arc<dyn BudgetCounter>) -> Self {
        self.budgets = counter;
        self
    }

    /// Where grants' write budgets are counted.
    pub fn budgets(&self) -> &Arc<dyn BudgetCounter> {
        &self.budgets
    }

    /// The operator's default budgets of runs' grants (before any
    /// tenant's own).
    pub fn configured_run_budgets(&self) -> &Budgets {
        &self.run_budgets
    }

    /// The budgets of a run's grant (the register API, `corkboard run`):
    /// what the run asked for within the tenant's `run_budgets`, or the
    /// operator's defaults when the tenant has none. Per kind the smaller
    /// of the two, and a kind only the defaults name gets the default: a
    /// run may ask for less than its tenant allows, and asking for more
    /// gets the default (not a refusal, so an orchestrator's fixed request
    /// keeps working when a tenant tightens its settings).
    pub async fn run_budgets(
        &self,
        tenant: &TenantId,
        asked: &Budgets,
    ) -> Result<Budgets, RegistryError> {
        asked.validate()?;
        let policy = self.ledger.grant_policy(tenant).await?;
        let ceiling = if policy.run_budgets.is_empty() {
            &self.run_budgets
        } else {
            &policy.run_budgets
        };
        Ok(asked.within(ceiling))
    }

    /// Sets how long a grant may live in all, counted from its creation:
    /// renewals past it are refused ([`RegistryError::LifetimeLimit`]) or,
    /// for a keep-alive, capped. A tenant's own shorter setting wins.
    pub fn with_max_lifetime(mut self, max: Duration) -> Self {
        self.max_lifetime = max.max(Duration::from_secs(1));
        self
    }

    /// The maximum lifetime that applies to grants of `tenant`: the
    /// configured one, or the tenant's own setting in the ledger when that
    /// is shorter (a tenant admin may tighten the operator's limit, never
    /// loosen it).
    pub async fn max_lifetime_for(&self, tenant: &TenantId) -> Result<Duration, RegistryError> {
        let policy = self.ledger.grant_policy(tenant).await?;
        Ok(policy.max_lifetime_secs.map_or(self.max_lifetime, |own| {
            Duration::from_secs(own).min(self.max_lifetime)
        }))
    }

    /// The configured maximum lifetime (before any tenant's own).
    pub fn max_lifetime(&self) -> Duration {
        self.max_lifetime
    }

    /// Sets how many live (neither revoked nor expired) grants one tenant
    /// may hold; `issue` refuses the next with [`RegistryError::GrantLimit`].
    pub fn with_live_grants_max(mut self, max: usize) -> Self {
        self.live_grants_max = max.max(1);
        self
    }

    /// Live grants of `tenant` at `now`, from the ledger.
    async fn live_grants(&self, tenant: &TenantId, now: Timestamp) -> Result<usize, RegistryError> {
        Ok(self
            .ledger
            .active_grants(now)
            .await?
            .iter()
            .filter(|event| &event.grant.tenant == tenant)
            .count())
    }

    pub fn registry(&self) -> &Arc<dyn TokenRegistry> {
        &self.registry
    }

    pub fn ledger(&self) -> &Arc<dyn GrantLedger> {
        &self.ledger
    }

    /// Records the grant durably, then registers its token. If registration
    /// fails the grant is recorded as revoked, so no half-issued grant stays
    /// usable or listed as active.
    pub async fn issue(&self, request: GrantRequest) -> Result<IssuedGrant, RegistryError> {
        if request.ttl.is_zero() || request.ttl > MAX_TTL {
            return Err(corkboard_board::ValidationError::new(
                "ttl",
                format!("must be between 1s and {}d", MAX_TTL.as_secs() / 86_400),
            )
            .into());
        }
        request.budgets.validate()?;
        let max = self.max_lifetime_for(&request.tenant).await?;
        if request.ttl > max {
            return Err(corkboard_board::ValidationError::new(
                "ttl",
                format!(
                    "must be at most {}s, the maximum lifetime of tenant {}'s grants \
                     (grant_max_lifetime_secs or the tenant's max_lifetime)",
                    max.as_secs(),
                    request.tenant
                ),
            )
            .into());
        }
        let now = Timestamp::now();
        // Checked before recording, not under a lock: grants issued at the
        // same instant (here or on another replica) may each see room and
        // overshoot the limit by as many as raced, never more.
        if self.live_grants(&request.tenant, now).await? >= self.live_grants_max {
            return Err(RegistryError::GrantLimit {
                tenant: request.tenant,
                max: self.live_grants_max,
            });
        }
        let grant = Grant {
            id: GrantId::generate(),
            tenant: request.tenant,
            run: request.run,
            capabilities: request.capabilities,
            created_at: now,
            expires_at: now.plus_millis(request.ttl.as_millis() as i64),
            created_by: request.created_by,
            budgets: request.budgets,
            min_integrity: request.min_integrity,
        };
        let token = RunToken::generate();
        let hash = token.hash();
        self.ledger.record_grant(&grant, &hash.to_hex()).await?;
        if let Err(err) = self.registry.register(&grant, &hash).await {
            let _ = self
                .ledger
                .record_revocation(&grant.id, "system:registration-failed", Timestamp::now())
                .await;
            return Err(err);
        }
        Ok(IssuedGrant { grant, token })
    }

    /// The lifetime of a run's grant: what the run asked for, capped by the
    /// tenant's own `run_ttl` when it has one (a run may ask for less,
    /// never more); `default` when neither says.
    pub async fn run_ttl(
        &self,
        tenant: &TenantId,
        asked: Option<Duration>,
        default: Duration,
    ) -> Result<Duration, RegistryError> {
        let policy = self.ledger.grant_policy(tenant).await?;
        Ok(
            match (asked, policy.run_ttl_secs.map(Duration::from_secs)) {
                (Some(asked), Some(tenant)) => asked.min(tenant),
                (None, Some(tenant)) => tenant,
                (Some(asked), None) => asked,
                (None, None) => default,
            },
        )
    }

    /// Extends a live grant's expiry without changing its token: the ledger
    /// first (atomically with the check that the grant is live there), then
    /// the registry, whose copies on every replica are replaced within the
    /// revocation contract's second. Revoked grants are refused with
    /// [`RegistryError::RenewRevoked`], expired ones with
    /// [`RegistryError::RenewExpired`], a new expiry past the maximum
    /// lifetime with [`RegistryError::LifetimeLimit`].
    ///
    /// When the outcome is uncertain the error names the expiry meant, and
    /// renewing to exactly that instant is the safe retry: `Until` the
    /// current expiry changes nothing in the ledger and tells the registry
    /// again (so does a keep-alive that would not extend). A ledger write
    /// whose answer was lost is [`RegistryError::RenewalInDoubt`]; a
    /// registry step that failed after the ledger's is
    /// [`RegistryError::RenewalNotPropagated`] (the ledger holds the new
    /// expiry; until the registry hears of it, replicas may refuse the
    /// token after its old one). Retrying `ExtendBy` instead would extend
    /// the grant a second time.
    pub async fn renew(&self, id: &GrantId, how: Renewal) -> Result<GrantEvent, RegistryError> {
        let event = self.ledger.grant(id).await.map_err(|err| match err {
            corkboard_board::StoreError::NotFound { .. } => RegistryError::GrantNotFound,
            other => other.into(),
        })?;
        let now = Timestamp::now();
        match event.status_at(now) {
            GrantStatus::Revoked => return Err(RegistryError::RenewRevoked(id.clone())),
            GrantStatus::Expired => return Err(RegistryError::RenewExpired(id.clone())),
            GrantStatus::Active => {}
        }
        let max = self.max_lifetime_for(&event.grant.tenant).await?;
        let limit = event
            .grant
            .created_at
            .plus_millis(i64::try_from(max.as_millis()).unwrap_or(i64::MAX));
        let current = event.grant.expires_at;
        let wanted = match how {
            Renewal::Until(at) => {
                if at < current {
                    return Err(corkboard_board::ValidationError::new(
                        "expires_at",
                        format!("must not be earlier than the grant's current expiry, {current}"),
                    )
                    .into());
                }
                at
            }
            Renewal::ExtendBy(by) | Renewal::KeepAlive(by) if by.is_zero() => {
                return Err(corkboard_board::ValidationError::new(
                    "extend_by",
                    "must be at least 1s",
                )
                .into());
            }
            Renewal::ExtendBy(by) => current.plus_millis(millis(by)),
            Renewal::KeepAlive(by) => now.plus_millis(millis(by)).min(limit),
        };
        if wanted > limit {
            return Err(RegistryError::LifetimeLimit {
                grant: id.clone(),
                max_secs: max.as_secs(),
                limit,
            });
        }
        if wanted < current {
            // A keep-alive that would not extend (early, or under a
            // shorter lifetime than before): nothing to change.
            return Ok(event);
        }
        if wanted == current {
            // The expiry the ledger already holds: a retry of a renewal
            // whose registry step failed, or a capped keep-alive. The
            // registry is told again, which is all such a retry still needs.
            self.renew_in_registry(&event).await?;
            return Ok(event);
        }
        let renewed = match self.ledger.record_expiry(id, wanted, now).await {
            Ok(renewed) => renewed,
            Err(err) if err.may_have_been_applied() => {
                return Err(RegistryError::RenewalInDoubt {
                    grant: id.clone(),
                    expires_at: wanted,
                    reason: err.to_string(),
                });
            }
            Err(err) => return Err(err.into()),
        };
        if renewed.revoked_at.is_some() {
            return Err(RegistryError::RenewRevoked(id.clone()));
        }
        if renewed.grant.expires_at != wanted {
            return Err(RegistryError::RenewExpired(id.clone()));
        }
        self.renew_in_registry(&renewed).await.map_err(|err| {
            RegistryError::RenewalNotPropagated {
                grant: id.clone(),
                expires_at: wanted,
                reason: err.to_string(),
            }
        })?;
        Ok(renewed)
    }

    /// Gives the registry `event`'s expiry (every replica's copy is
    /// replaced, as for a revocation).
    async fn renew_in_registry(&self, event: &GrantEvent) -> Result<(), RegistryError> {
        if let Some(hash) = crate::token::TokenHash::from_hex(&event.token_hash) {
            self.registry.renew(&event.grant, &hash).await?;
        }
        Ok(())
    }

    /// Revokes one grant: ledger first, so the revocation survives a
    /// registry outage and a rebuilt registry never resurrects it.
    pub async fn revoke(&self, id: &GrantId, by: &str) -> Result<GrantEvent, RegistryError> {
        let event = match self
            .ledger
            .record_revocation(id, by, Timestamp::now())
            .await
        {
            Ok(event) => event,
            Err(err) => {
                if err.may_have_been_applied() {
                    self.stop_resolving(id, None).await;
                }
                return Err(err.into());
            }
        };
        self.revoke_in_registry(id, Some(&event.token_hash)).await?;
        Ok(event)
    }

    /// Stops a grant whose revocation the ledger holds from resolving: by
    /// its token hash where known (the registry may have lost the grant's
    /// other keys), else by its id.
    async fn revoke_in_registry(
        &self,
        id: &GrantId,
        token_hash: Option<&str>,
    ) -> Result<(), RegistryError> {
        match token_hash.and_then(crate::token::TokenHash::from_hex) {
            Some(hash) => self.registry.revoke_hash(id, &hash).await?,
            None => self.registry.revoke(id).await?,
        };
        Ok(())
    }

    /// For a call that fails before its registry step: a grant the ledger
    /// holds revoked, or may hold (its write's answer, or the ending of its
    /// claims, was cut off), stops resolving now, not only once the caller
    /// retries, since a revocation the ledger holds is never undone. Should
    /// one in doubt not have landed, the registry errs on the closed side:
    /// one read through the ledger takes the grant back at its next use,
    /// an in-process one at its next start, and the caller's retry (the
    /// error says to) makes ledger and registry agree. Best effort: the
    /// caller gets the ledger's error.
    async fn stop_resolving(&self, id: &GrantId, token_hash: Option<&str>) {
        if let Err(err) = self.revoke_in_registry(id, token_hash).await {
            tracing::warn!(grant = %id, error = %err, "could not revoke in the registry a grant of a failed revocation");
        }
    }

    /// Whether a revoked grant's token still resolves in the registry's
    /// backend: its revocation is recorded but not yet confirmed there (it
    /// is being retried). An unreachable backend counts as not confirmed.
    pub async fn revocation_pending(&self, event: &GrantEvent) -> bool {
        if event.revoked_at.is_none() || event.grant.is_expired_at(Timestamp::now()) {
            return false;
        }
        match crate::token::TokenHash::from_hex(&event.token_hash) {
            Some(hash) => self.registry.still_resolves(&hash).await.unwrap_or(true),
            None => false,
        }
    }

    /// Revokes every grant of a run; those already revoked are left as
    /// they are. A run without any grant in `tenant` is
    /// [`RegistryError::RunNotFound`], so a misspelt run is never taken
    /// for a revoked one.
    pub async fn revoke_run(
        &self,
        tenant: &TenantId,
        run: &RunId,
        by: &str,
    ) -> Result<Vec<GrantEvent>, RegistryError> {
        let mut revoked = Vec::new();
        if let Err(err) = self
            .record_run_revocations(tenant, run, by, &mut revoked)
            .await
        {
            // The registry's `revoke_run` below is not reached: the grants
            // the ledger revoked so far stop resolving now.
            for done in &revoked {
                self.stop_resolving(&done.grant.id, Some(&done.token_hash))
                    .await;
            }
            return Err(err);
        }
        self.registry.revoke_run(tenant, run).await?;
        Ok(revoked)
    }

    /// The ledger's part of [`Self::revoke_run`]: every live grant of the
    /// run revoked, page by page, each pushed to `revoked` once recorded.
    async fn record_run_revocations(
        &self,
        tenant: &TenantId,
        run: &RunId,
        by: &str,
        revoked: &mut Vec<GrantEvent>,
    ) -> Result<(), RegistryError> {
        let now = Timestamp::now();
        let mut cursor: Option<GrantId> = None;
        loop {
            let page = self
                .ledger
                .list_grants(tenant, Some(run), cursor.as_ref(), 200)
                .await?;
            if cursor.is_none() && page.is_empty() {
                return Err(RegistryError::RunNotFound {
                    tenant: tenant.clone(),
                    run: run.clone(),
                });
            }
            let last = page.last().map(|e| e.grant.id.clone());
            for event in page {
                if event.revoked_at.is_some() {
                    continue;
                }
                match self
                    .ledger
                    .record_revocation(&event.grant.id, by, now)
                    .await
                {
                    Ok(done) => revoked.push(done),
                    Err(err) => {
                        if err.may_have_been_applied() {
                            self.stop_resolving(&event.grant.id, Some(&event.token_hash))
                                .await;
                        }
                        return Err(err.into());
                    }
                }
            }
            match last {
                Some(id) => cursor = Some(id),
                None => return Ok(()),
            }
        }
    }

    /// Re-registers every active grant from the ledger (start-up of an
    /// in-process registry, or repair of a shared one).
    pub async fn rebuild_registry(&self) -> Result<usize, RegistryError> {
        let active = self.ledger.active_grants(Timestamp::now()).await?;
        let mut count = 0;
        for event in active {
            if let Some(hash) = crate::token::TokenHash::from_hex(&event.token_hash) {
                self.registry.register(&event.grant, &hash).await?;
                count += 1;
            }
        }
        Ok(count)
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// The MCP client configuration for a run, in Claude Code's `--mcp-config`
/// format (also understood by other clients that take `mcpServers`).
/// `alwaysLoad` keeps the board tools visible from the first turn, so an
/// agent never works without them and invents issue ids.
pub fn mcp_client_config(url: &str, token: &RunToken) -> serde_json::Value {
    serde_json::json!({
        "mcpServers": {
            "corkboard": {
                "type": "http",
                "url": url,
                "headers": { "Authorization": format!("Bearer {}", token.expose()) },
                "alwaysLoad": true
            }
        }
    })
}
