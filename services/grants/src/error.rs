//! Why a token could not be resolved or a grant not changed.

use corkboard_board::{GrantId, RunId, StoreError, TenantId, Timestamp, ValidationError};
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
    /// A revocation or renewal of a run found no grant of it at all (a
    /// misspelt run, or the wrong tenant): nothing was changed.
    #[error("no grant of run {run} in tenant {tenant}: nothing was changed")]
    RunNotFound { tenant: TenantId, run: RunId },
    /// The tenant already holds `max` live grants; nothing was issued.
    #[error(
        "tenant {tenant} already holds {max} live grants, its limit \
         (live_grants_per_tenant_max); revoke grants it no longer needs"
    )]
    GrantLimit { tenant: TenantId, max: usize },
    /// A revoked grant cannot be renewed.
    #[error("grant {0} is revoked; a revoked grant cannot be renewed (issue a new one)")]
    RenewRevoked(GrantId),
    /// An expired grant cannot be renewed.
    #[error("grant {0} has expired; an expired grant cannot be renewed (issue a new one)")]
    RenewExpired(GrantId),
    /// The renewal would take the grant past its maximum lifetime,
    /// counted from its creation; nothing was changed.
    #[error(
        "grant {grant} may live at most {max_secs}s from its creation, until {limit} \
         (grant_max_lifetime_secs or the tenant's grant_max_lifetime); renew it to at most that"
    )]
    LifetimeLimit {
        grant: GrantId,
        max_secs: u64,
        limit: Timestamp,
    },
    /// The ledger's answer to a renewal was lost: it may or may not hold
    /// `expires_at`. Renewing to exactly `expires_at` is safe either way.
    #[error(
        "the renewal of grant {grant} until {expires_at} may or may not have been recorded \
         ({reason}); renew it with expires_at={expires_at}, which is safe either way \
         (extend_by would extend it a second time if the first one landed)"
    )]
    RenewalInDoubt {
        grant: GrantId,
        expires_at: Timestamp,
        reason: String,
    },
    /// The ledger holds the new expiry but the token registry could not be
    /// told: until it is, replicas may refuse the token after its previous
    /// expiry.
    #[error(
        "grant {grant} is renewed until {expires_at} in the ledger, but the token registry \
         could not be told ({reason}), so the token may be refused after its previous expiry; \
         renew it again with expires_at={expires_at}, which changes nothing else \
         (extend_by would extend it a second time)"
    )]
    RenewalNotPropagated {
        grant: GrantId,
        expires_at: Timestamp,
        reason: String,
    },
    /// The registry backend cannot be reached; fail closed.
    #[error("token registry unavailable: {0}")]
    Unavailable(String),
    #[error("{0}")]
    Invalid(#[from] ValidationError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl corkboard_board::ErrorCode for RegistryError {
    fn error_code(&self) -> corkboard_board::Code {
        use corkboard_board::Code;
        match self {
            Self::GrantNotFound | Self::RunNotFound { .. } => Code::NotFound,
            Self::GrantLimit { .. } => Code::GrantLimit,
            Self::RenewRevoked(_) => Code::GrantRevoked,
            Self::LifetimeLimit { .. } => Code::LifetimeLimit,
            Self::RenewExpired(_) => Code::GrantExpired,
            Self::Unavailable(_)
            | Self::RenewalInDoubt { .. }
            | Self::RenewalNotPropagated { .. } => Code::Unavailable,
            Self::Invalid(_) => Code::InvalidRequest,
            Self::Store(store) => store.error_code(),
            Self::UnknownToken | Self::Expired | Self::Revoked => Code::Unauthenticated,
        }
    }

    fn invalid_field(&self) -> Option<ValidationError> {
        match self {
            Self::Invalid(invalid) => Some(invalid.clone()),
            Self::Store(store) => store.invalid_field(),
            _ => None,
        }
    }
}
