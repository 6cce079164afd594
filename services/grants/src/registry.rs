//! The token registry trait.

use crate::error::RegistryError;
use crate::token::TokenHash;
use async_trait::async_trait;
use corkboard_board::{Grant, GrantId, RunId, TenantId};

/// Resolves token hashes to grants. Shared by every replica when backed by
/// Redis; a revocation must reach every replica's `resolve` within a second.
#[async_trait]
pub trait TokenRegistry: Send + Sync + 'static {
    /// Makes `hash` resolve to `grant` until the grant expires.
    async fn register(&self, grant: &Grant, hash: &TokenHash) -> Result<(), RegistryError>;

    /// The live grant behind `hash`. Fails closed: an unreachable backend is
    /// [`RegistryError::Unavailable`], never a stale success past the
    /// backend's grace window.
    async fn resolve(&self, hash: &TokenHash) -> Result<Grant, RegistryError>;

    /// Removes one grant everywhere. `Ok(false)` if it was not registered.
    async fn revoke(&self, grant: &GrantId) -> Result<bool, RegistryError>;

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
