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
