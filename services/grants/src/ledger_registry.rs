//! The embedded registry: the durable grant ledger itself, read through.
//!
//! `corkboard serve`, `corkboard grant create --data-dir` and the stdio
//! server are separate processes sharing one data dir. A purely in-memory
//! registry would not see grants created by the others, so the local
//! registry resolves each token hash against the ledger (one indexed read),
//! which also makes a revocation by any process effective immediately.

use crate::error::RegistryError;
use crate::registry::TokenRegistry;
use crate::token::TokenHash;
use async_trait::async_trait;
use corkboard_board::{Grant, GrantId, GrantLedger, RunId, StoreError, TenantId, Timestamp};
use std::sync::Arc;

pub struct LedgerRegistry {
    ledger: Arc<dyn GrantLedger>,
}

impl std::fmt::Debug for LedgerRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LedgerRegistry").finish_non_exhaustive()
    }
}

impl LedgerRegistry {
    pub fn new(ledger: Arc<dyn GrantLedger>) -> Self {
        Self { ledger }
    }
}

fn from_store(err: StoreError) -> RegistryError {
    match err {
        StoreError::Unavailable { reason } => RegistryError::Unavailable(reason),
        other => RegistryError::Store(other),
    }
}

#[async_trait]
impl TokenRegistry for LedgerRegistry {
    async fn register(&self, _grant: &Grant, _hash: &TokenHash) -> Result<(), RegistryError> {
        // The ledger write that precedes registration is the registration.
        Ok(())
    }

    async fn resolve(&self, hash: &TokenHash) -> Result<Grant, RegistryError> {
        let event = self
            .ledger
            .grant_by_token_hash(&hash.to_hex())
            .await
            .map_err(from_store)?
            .ok_or(RegistryError::UnknownToken)?;
        if event.revoked_at.is_some() {
            return Err(RegistryError::Revoked);
        }
        if event.grant.is_expired_at(Timestamp::now()) {
            return Err(RegistryError::Expired);
        }
        Ok(event.grant)
    }

    async fn revoke(&self, _grant: &GrantId) -> Result<bool, RegistryError> {
        // The ledger revocation that precedes this call is the revocation.
        Ok(true)
    }

    async fn revoke_run(
        &self,
        _tenant: &TenantId,
        _run: &RunId,
    ) -> Result<Vec<GrantId>, RegistryError> {
        Ok(Vec::new())
    }

    async fn check(&self) -> Result<(), RegistryError> {
        Ok(())
    }
}

/// A shared registry backed by the durable ledger: a token the shared
/// registry does not know (a Redis restarted empty, a flushed key) is
/// looked up in the ledger and, if its grant is still active, registered
/// again. Errors of the shared registry are passed through unchanged, so an
/// unreachable Redis still fails closed; only a definite "unknown" falls
/// back to the ledger, and the ledger's revocations and expiries win.
pub struct ReadThroughRegistry<R: TokenRegistry> {
    shared: R,
    ledger: LedgerRegistry,
}

impl<R: TokenRegistry> std::fmt::Debug for ReadThroughRegistry<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadThroughRegistry")
            .finish_non_exhaustive()
    }
}

impl<R: TokenRegistry> ReadThroughRegistry<R> {
    pub fn new(shared: R, ledger: Arc<dyn GrantLedger>) -> Self {
        Self {
            shared,
            ledger: LedgerRegistry::new(ledger),
        }
    }

    pub fn shared(&self) -> &R {
        &self.shared
    }
}

#[async_trait]
impl<R: TokenRegistry> TokenRegistry for ReadThroughRegistry<R> {
    async fn register(&self, grant: &Grant, hash: &TokenHash) -> Result<(), RegistryError> {
        self.shared.register(grant, hash).await
    }

    async fn resolve(&self, hash: &TokenHash) -> Result<Grant, RegistryError> {
        match self.shared.resolve(hash).await {
            Err(RegistryError::UnknownToken) => {
                let grant = self.ledger.resolve(hash).await?;
                self.shared.register(&grant, hash).await?;
                // A revocation may have landed between the ledger read and
                // the registration. Revocations write the ledger before the
                // shared registry, so reading the ledger again closes the
                // window: either we see it here, or its deletion comes
                // after our registration.
                if let Err(err) = self.ledger.resolve(hash).await {
                    self.shared.revoke(&grant.id).await?;
                    return Err(err);
                }
                Ok(grant)
            }
            other => other,
        }
    }

    async fn revoke(&self, grant: &GrantId) -> Result<bool, RegistryError> {
        self.shared.revoke(grant).await
    }

    async fn revoke_run(
        &self,
        tenant: &TenantId,
        run: &RunId,
    ) -> Result<Vec<GrantId>, RegistryError> {
        self.shared.revoke_run(tenant, run).await
    }

    async fn check(&self) -> Result<(), RegistryError> {
        self.shared.check().await
    }
}
