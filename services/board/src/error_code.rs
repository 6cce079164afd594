//! The error vocabulary every crate shares: each refusal the product's
//! APIs can answer has one stable [`Code`], and the code decides its HTTP
//! status here, once. Each library crate's error type implements
//! [`ErrorCode`] (as meilisearch's do), so the HTTP layer turns any of them
//! into its envelope without knowing the crate it came from. JSON-RPC
//! codes have their own one registry (`corkboard_mcp::code`), since MCP
//! refusals are a protocol's, not an API's.

use crate::error::{StoreError, ValidationError};

/// The stable, machine-readable code of a refusal (`{"error": {"code"}}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Code {
    Unauthenticated,
    Forbidden,
    NotFound,
    VersionConflict,
    IdempotencyConflict,
    CommentLimit,
    Claimed,
    NotClaimed,
    NotClaimable,
    RelationCycle,
    QueryTooSlow,
    GrantLimit,
    GrantRevoked,
    LifetimeLimit,
    GrantExpired,
    RunActive,
    RunLimit,
    /// An approval item that was already decided (409).
    ApprovalDecided,
    /// An approval item past its expiry (410).
    ApprovalExpired,
    InvalidRequest,
    BadRequest,
    /// A request body that is not the JSON the endpoint reads.
    InvalidBody,
    /// A body without the content type the endpoint reads.
    UnsupportedMediaType,
    /// A body over the endpoint's size limit.
    PayloadTooLarge,
    /// Query parameters the endpoint cannot read.
    InvalidQuery,
    /// Path segments the endpoint cannot read.
    InvalidPath,
    RateLimited,
    Unavailable,
    Internal,
}

impl Code {
    /// The code as clients read it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unauthenticated => "unauthenticated",
            Self::Forbidden => "forbidden",
            Self::NotFound => "not_found",
            Self::VersionConflict => "version_conflict",
            Self::IdempotencyConflict => "idempotency_conflict",
            Self::CommentLimit => "comment_limit",
            Self::Claimed => "claimed",
            Self::NotClaimed => "not_claimed",
            Self::NotClaimable => "not_claimable",
            Self::RelationCycle => "relation_cycle",
            Self::QueryTooSlow => "query_too_slow",
            Self::GrantLimit => "grant_limit",
            Self::GrantRevoked => "grant_revoked",
            Self::LifetimeLimit => "lifetime_limit",
            Self::GrantExpired => "grant_expired",
            Self::RunActive => "run_active",
            Self::RunLimit => "run_limit",
            Self::ApprovalDecided => "approval_decided",
            Self::ApprovalExpired => "approval_expired",
            Self::InvalidRequest => "invalid_request",
            Self::BadRequest => "bad_request",
            Self::InvalidBody => "invalid_body",
            Self::UnsupportedMediaType => "unsupported_media_type",
            Self::PayloadTooLarge => "payload_too_large",
            Self::InvalidQuery => "invalid_query",
            Self::InvalidPath => "invalid_path",
            Self::RateLimited => "rate_limited",
            Self::Unavailable => "unavailable",
            Self::Internal => "internal",
        }
    }

    /// The HTTP status every API answers this code with.
    pub fn http_status(self) -> u16 {
        match self {
            Self::Unauthenticated => 401,
            Self::Forbidden => 403,
            Self::NotFound => 404,
            Self::VersionConflict
            | Self::IdempotencyConflict
            | Self::CommentLimit
            | Self::Claimed
            | Self::NotClaimed
            | Self::NotClaimable
            | Self::RelationCycle
            | Self::GrantLimit
            | Self::GrantRevoked
            | Self::LifetimeLimit
            | Self::RunActive
            | Self::RunLimit
            | Self::ApprovalDecided => 409,
            // The thing existed and is gone for good (an expired grant).
            Self::GrantExpired | Self::ApprovalExpired => 410,
            // Well-formed, but too costly as asked: narrowing it is the fix.
            Self::InvalidRequest | Self::QueryTooSlow => 422,
            Self::BadRequest | Self::InvalidBody | Self::InvalidQuery | Self::InvalidPath => 400,
            Self::UnsupportedMediaType => 415,
            Self::PayloadTooLarge => 413,
            Self::RateLimited => 429,
            Self::Unavailable => 503,
            Self::Internal => 500,
        }
    }
}

/// An error that knows its [`Code`]. Implemented by each library crate's
/// error type; the HTTP layer maps any of them the same way.
pub trait ErrorCode: std::fmt::Display {
    fn error_code(&self) -> Code;

    /// The field a refused request got wrong, for errors coded
    /// [`Code::InvalidRequest`] (the envelope's `details`).
    fn invalid_field(&self) -> Option<ValidationError> {
        None
    }
}

impl ErrorCode for ValidationError {
    fn error_code(&self) -> Code {
        Code::InvalidRequest
    }

    fn invalid_field(&self) -> Option<ValidationError> {
        Some(self.clone())
    }
}

impl ErrorCode for StoreError {
    fn error_code(&self) -> Code {
        match self {
            Self::NotFound { .. } => Code::NotFound,
            Self::VersionConflict { .. } => Code::VersionConflict,
            Self::IdempotencyConflict => Code::IdempotencyConflict,
            Self::Invalid(_) | Self::UnknownRelated { .. } => Code::InvalidRequest,
            Self::CommentLimit { .. } => Code::CommentLimit,
            Self::Claimed { .. } => Code::Claimed,
            Self::NotClaimed { .. } => Code::NotClaimed,
            Self::NotClaimable { .. } => Code::NotClaimable,
            Self::RelationCycle { .. } => Code::RelationCycle,
            Self::QueryTooSlow { .. } => Code::QueryTooSlow,
            Self::TenantBusy { .. } => Code::RateLimited,
            Self::Unavailable { .. } | Self::NotConfigured { .. } => Code::Unavailable,
            Self::Internal(_) => Code::Internal,
        }
    }

    fn invalid_field(&self) -> Option<ValidationError> {
        match self {
            Self::Invalid(invalid) => Some(invalid.clone()),
            Self::UnknownRelated { field, .. } => {
                Some(ValidationError::new(field, self.to_string()))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_a_distinct_name_and_an_error_status() {
        let all = [
            Code::Unauthenticated,
            Code::Forbidden,
            Code::NotFound,
            Code::VersionConflict,
            Code::IdempotencyConflict,
            Code::CommentLimit,
            Code::Claimed,
            Code::NotClaimed,
            Code::NotClaimable,
            Code::RelationCycle,
            Code::QueryTooSlow,
            Code::GrantLimit,
            Code::GrantRevoked,
            Code::LifetimeLimit,
            Code::GrantExpired,
            Code::RunActive,
            Code::RunLimit,
            Code::ApprovalDecided,
            Code::ApprovalExpired,
            Code::InvalidRequest,
            Code::BadRequest,
            Code::InvalidBody,
            Code::UnsupportedMediaType,
            Code::PayloadTooLarge,
            Code::InvalidQuery,
            Code::InvalidPath,
            Code::RateLimited,
            Code::Unavailable,
            Code::Internal,
        ];
        let names: std::collections::BTreeSet<_> = all.iter().map(|c| c.as_str()).collect();
        assert_eq!(names.len(), all.len());
        assert!(all.iter().all(|c| (400..600).contains(&c.http_status())));
    }

    #[test]
    fn a_relation_to_a_missing_issue_is_an_invalid_field() {
        let err = StoreError::UnknownRelated {
            field: "parent",
            id: crate::IssueId::generate(),
        };
        assert_eq!(err.error_code(), Code::InvalidRequest);
        let field = err.invalid_field().map(|v| v.field);
        assert_eq!(field, Some("parent"));
    }
}
