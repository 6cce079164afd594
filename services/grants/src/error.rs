//! Why a token could not be resolved or a grant not changed.

use corkboard_board::{StoreError, TenantId, ValidationError};
use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RegistryError {
    #[error("unknown token")]
    UnknownToken,
    #[error("token expired")]
    Expired,
    #[error("token revoked")]
    Revoked,
    #[error("grant not found")]
    GrantNotFound,
    /// The tenant already holds `max` live grants; nothing was issued.
    #[error(
        "tenant {tenant} already holds {max} live grants, its limit \
         (live_grants_per_tenant_max); revoke grants it no longer needs"
    )]
    GrantLimit { tenant: TenantId, max: usize },
    /// The registry backend cannot be reached; fail closed.
    #[error("token registry unavailable: {0}")]
    Unavailable(String),
    #[error("{0}")]
    Invalid(#[from] ValidationError),
    #[error(transparent)]
    Store(#[from] StoreError),
}
