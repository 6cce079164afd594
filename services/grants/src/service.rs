//! Issuing and revoking grants: the ledger first (durable), then the registry.

use crate::error::RegistryError;
use crate::registry::TokenRegistry;
use crate::token::RunToken;
use corkboard_board::{
    Capabilities, Grant, GrantEvent, GrantId, GrantLedger, RunId, TenantId, Timestamp,
};
use std::sync::Arc;
use std::time::Duration;

/// Longest lifetime a grant may be given.
pub const MAX_TTL: Duration = Duration::from_secs(30 * 24 * 3600);

/// What to grant.
#[derive(Debug, Clone)]
pub struct GrantRequest {
    pub tenant: TenantId,
    pub run: RunId,
    pub capabilities: Capabilities,
    pub ttl: Duration,
    pub created_by: String,
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
}

impl std::fmt::Debug for GrantService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrantService").finish_non_exhaustive()
    }
}

impl GrantService {
    /// Live grants one tenant may hold unless configured otherwise.
    pub const DEFAULT_LIVE_GRANTS_MAX: usize = 1_000;

    pub fn new(ledger: Arc<dyn GrantLedger>, registry: Arc<dyn TokenRegistry>) -> Self {
        Self {
            ledger,
            registry,
            live_grants_max: Self::DEFAULT_LIVE_GRANTS_MAX,
        }
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

    /// Revokes one grant: ledger first, so the revocation survives a
    /// registry outage and a rebuilt registry never resurrects it.
    pub async fn revoke(&self, id: &GrantId, by: &str) -> Result<GrantEvent, RegistryError> {
        let event = self
            .ledger
            .record_revocation(id, by, Timestamp::now())
            .await?;
        // By token hash: the registry may have lost the grant's other keys.
        match crate::token::TokenHash::from_hex(&event.token_hash) {
            Some(hash) => self.registry.revoke_hash(id, &hash).await?,
            None => self.registry.revoke(id).await?,
        };
        Ok(event)
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

    /// Revokes every grant of a run.
    pub async fn revoke_run(
        &self,
        tenant: &TenantId,
        run: &RunId,
        by: &str,
    ) -> Result<Vec<GrantEvent>, RegistryError> {
        let now = Timestamp::now();
        let mut revoked = Vec::new();
        let mut cursor: Option<GrantId> = None;
        loop {
            let page = self
                .ledger
                .list_grants(tenant, Some(run), cursor.as_ref(), 200)
                .await?;
            let last = page.last().map(|e| e.grant.id.clone());
            for event in page {
                if event.revoked_at.is_none() {
                    revoked.push(
                        self.ledger
                            .record_revocation(&event.grant.id, by, now)
                            .await?,
                    );
                }
            }
            match last {
                Some(id) => cursor = Some(id),
                None => break,
            }
        }
        self.registry.revoke_run(tenant, run).await?;
        Ok(revoked)
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
