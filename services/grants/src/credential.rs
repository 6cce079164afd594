//! The one credential path: a presented bearer token to the grant it
//! stands for.
//!
//! Every MCP surface resolves run tokens here (the studio endpoint and
//! stdio through [`crate::BoardTools`], the run gateways directly), so a
//! revoked, expired, unknown or malformed token is refused with the same
//! words everywhere, and a registry that cannot answer fails closed within
//! a bound.

use crate::{RegistryError, RunToken, TokenHash, TokenRegistry};
use corkboard_board::{Grant, Timestamp};
pub use corkboard_mcp::bearer_token;
use corkboard_mcp::{AuthRejection, Principal};
use std::sync::Arc;
use std::time::Duration;

/// The principal of an MCP request: the grant its run token resolved to,
/// and the token's hash. Every board operation takes its tenant and author
/// from here.
#[derive(Clone)]
pub struct ResolvedGrant {
    grant: Arc<Grant>,
    token: TokenHash,
}

impl std::fmt::Debug for ResolvedGrant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResolvedGrant")
            .field("grant", &self.grant.id)
            .finish_non_exhaustive()
    }
}

impl ResolvedGrant {
    pub fn new(grant: impl Into<Arc<Grant>>, token: TokenHash) -> Self {
        Self {
            grant: grant.into(),
            token,
        }
    }

    pub fn grant(&self) -> &Grant {
        &self.grant
    }

    /// The hash of the token that resolved to this grant (never the token).
    pub fn token_hash(&self) -> TokenHash {
        self.token
    }
}

impl Principal for ResolvedGrant {
    fn session_binding(&self) -> &str {
        self.grant.id.as_str()
    }
}

/// Resolves `bearer` through `registry`, waiting at most `limit`.
pub async fn resolve_bearer(
    registry: &dyn TokenRegistry,
    bearer: Option<&str>,
    limit: Duration,
) -> Result<ResolvedGrant, AuthRejection> {
    let bearer = bearer.ok_or(AuthRejection::Missing)?;
    let token = RunToken::from_presented(bearer).ok_or_else(|| {
        AuthRejection::Refused(
            "run token malformed: expected the cbr_… token printed when the grant was created or the run registered"
                .to_owned(),
        )
    })?;
    let hash = token.hash();
    let grant = resolve_hash(registry, &hash, limit).await?;
    corkboard_telemetry::mcp::record_principal(
        &tracing::Span::current(),
        grant.tenant.as_str(),
        grant.run.as_str(),
        grant.id.as_str(),
    );
    Ok(ResolvedGrant::new(grant, hash))
}

/// Resolves `grant`'s token again: what a request that runs several calls
/// (a batch) checks between them, so a revocation stops the rest.
pub async fn reresolve(
    registry: &dyn TokenRegistry,
    grant: &ResolvedGrant,
    limit: Duration,
) -> Result<(), AuthRejection> {
    resolve_hash(registry, &grant.token, limit)
        .await
        .map(|_| ())
}

async fn resolve_hash(
    registry: &dyn TokenRegistry,
    hash: &TokenHash,
    limit: Duration,
) -> Result<Arc<Grant>, AuthRejection> {
    let grant = tokio::time::timeout(limit, registry.resolve(hash))
        .await
        .map_err(|_elapsed| {
            AuthRejection::Unavailable(format!(
                "token registry did not answer within {}s",
                limit.as_secs_f64()
            ))
        })?
        .map_err(rejection)?;
    // Registries check expiry too; checking here as well keeps a lagging
    // backend from extending a grant past its end.
    if grant.is_expired_at(Timestamp::now()) {
        return Err(AuthRejection::Refused("run token expired".to_owned()));
    }
    Ok(grant)
}

/// A registry answer as the client hears it.
fn rejection(err: RegistryError) -> AuthRejection {
    match err {
        RegistryError::UnknownToken | RegistryError::GrantNotFound => {
            AuthRejection::Refused("run token unknown".to_owned())
        }
        RegistryError::Expired => AuthRejection::Refused("run token expired".to_owned()),
        RegistryError::Revoked => AuthRejection::Refused("run token revoked".to_owned()),
        RegistryError::Unavailable(reason) => {
            AuthRejection::Unavailable(format!("token registry unavailable: {reason}"))
        }
        // Anything else means the registry could not give a trustworthy
        // answer: fail closed, as retryable.
        other => AuthRejection::Unavailable(format!("token registry unavailable: {other}")),
    }
}
