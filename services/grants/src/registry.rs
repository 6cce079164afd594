//! The token registry trait.

use crate::error::RegistryError;
use crate::token::TokenHash;
use async_trait::async_trait;
use corkboard_board::{Grant, GrantId, RunId, TenantId};
use std::sync::Arc;

/// Resolves token hashes to grants. Shared by every replica when backed by
/// Redis; a revocation must reach every replica's `resolve` within a second.
#[async_trait]
pub trait TokenRegistry: Send + Sync + 'static {
    /// Makes `hash` resolve to `grant` until the grant expires.
    async fn register(&self, grant: &Grant, hash: &TokenHash) -> Result<(), RegistryError>;

    /// The live grant behind `hash`. Fails closed: an unreachable backend is
    /// [`RegistryError::Unavailable`], never a stale success past the
    /// backend's grace window. Shared, not copied: every request resolves
    /// its token, and a cached grant is handed out as it is held.
    async fn resolve(&self, hash: &TokenHash) -> Result<Arc<Grant>, RegistryError>;

    /// Rewrites the record of a grant that is still registered (a renewal:
    /// its new expiry), so every replica resolves the new copy within the
    /// revocation contract's second. Never registers a grant that is gone:
    /// a revocation racing the renewal wins. `Ok(false)` if `hash` was not
    /// registered (a read-through registry then finds the renewed grant in
    /// the ledger).
    async fn renew(&self, grant: &Grant, hash: &TokenHash) -> Result<bool, RegistryError>;

    /// Removes one grant everywhere. `Ok(false)` if it was not registered.
    async fn revoke(&self, grant: &GrantId) -> Result<bool, RegistryError>;

    /// [`Self::revoke`] with the grant's token hash (the ledger has it), so
    /// the token goes even if the backend lost the grant's other keys.
    async fn revoke_hash(&self, grant: &GrantId, _hash: &TokenHash) -> Result<bool, RegistryError> {
        self.revoke(grant).await
    }

    /// Whether `hash` still resolves in the backend itself (for a revoked
    /// grant: its revocation is not confirmed yet). `false` by default:
    /// registries without a separate backend forget at once.
    async fn still_resolves(&self, _hash: &TokenHash) -> Result<bool, RegistryError> {
        Ok(false)
    }

    /// Removes every grant of a run. Returns the revoked grant ids.
    async fn revoke_run(
        &self,
        tenant: &TenantId,
        run: &RunId,
    ) -> Result<Vec<GrantId>, RegistryError>;

    /// Whether the backend answers (for `/readyz`).
    async fn check(&self) -> Result<(), RegistryError>;

    /// Whether `hash` was recently found unknown everywhere (this registry
    /// and the ledger behind it; see [`Self::remember_unknown`]): a
    /// read-through registry then refuses it without asking either again.
    fn known_unknown(&self, _hash: &TokenHash) -> bool {
        false
    }

    /// Notes that `hash` is unknown everywhere, until a grant for it is
    /// registered or a short while has passed. A no-op by default.
    fn remember_unknown(&self, _hash: &TokenHash) {}
}
