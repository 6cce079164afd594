//! The APIs' one error type and its one mapping to HTTP: every refusal
//! of the admin, board and register APIs leaves as the same JSON envelope
//! `{"error": {"code": "...", "message": "...", "details": ...}}` with a
//! stable machine-readable `code`.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use corkboard_board::{StoreError, ValidationError};
use corkboard_grants::{JwtError, RegistryError};
use corkboard_upstream::UpstreamError;
use serde_json::json;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ApiError {
    #[error("{0}")]
    Unauthenticated(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{message}")]
    Conflict { code: &'static str, message: String },
    /// The thing existed and is gone for good (an expired grant).
    #[error("{message}")]
    Gone { code: &'static str, message: String },
    #[error("{0}")]
    Invalid(ValidationError),
    #[error("{0}")]
    BadRequest(String),
    #[error("too many requests; retry after {retry_after_secs}s")]
    RateLimited { retry_after_secs: u64 },
    #[error("{0}")]
    Unavailable(String),
    #[error("internal error")]
    Internal(String),
}

impl ApiError {
    /// The stable code clients can switch on.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Unauthenticated(_) => "unauthenticated",
            Self::Forbidden(_) => "forbidden",
            Self::NotFound(_) => "not_found",
            Self::Conflict { code, .. } | Self::Gone { code, .. } => code,
            Self::Invalid(_) => "invalid_request",
            Self::BadRequest(_) => "bad_request",
            Self::RateLimited { .. } => "rate_limited",
            Self::Unavailable(_) => "unavailable",
            Self::Internal(_) => "internal",
        }
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        match self {
            Self::Unauthenticated(_) => StatusCode::UNAUTHORIZED,
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::Conflict { .. } => StatusCode::CONFLICT,
            Self::Gone { .. } => StatusCode::GONE,
            Self::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        let details = match self {
            Self::Invalid(v) => json!({ "field": v.field, "reason": v.reason }),
            Self::RateLimited { retry_after_secs } => {
                json!({ "retry_after_secs": retry_after_secs })
            }
            _ => serde_json::Value::Null,
        };
        if let Self::Internal(detail) = self {
            // The detail may name internals; it goes to the log, not the client.
            tracing::error!(error = %detail, "internal error in API request");
        }
        let mut response = HttpResponse::build(self.status_code());
        match self {
            Self::Unauthenticated(_) => {
                response.insert_header(("WWW-Authenticate", "Bearer"));
            }
            Self::RateLimited { retry_after_secs } => {
                response.insert_header(("Retry-After", retry_after_secs.to_string()));
            }
            Self::Unavailable(_) => {
                response.insert_header(("Retry-After", "1"));
            }
            _ => {}
        }
        response.json(json!({
            "error": { "code": self.code(), "message": self.to_string(), "details": details }
        }))
    }
}

impl From<ValidationError> for ApiError {
    fn from(err: ValidationError) -> Self {
        Self::Invalid(err)
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::NotFound { .. } => Self::NotFound(err.to_string()),
            StoreError::VersionConflict { .. } => Self::Conflict {
                code: "version_conflict",
                message: err.to_string(),
            },
            StoreError::IdempotencyConflict => Self::Conflict {
                code: "idempotency_conflict",
                message: err.to_string(),
            },
            StoreError::Invalid(v) => Self::Invalid(v),
            StoreError::CommentLimit { .. } => Self::Conflict {
                code: "comment_limit",
                message: err.to_string(),
            },
            StoreError::Claimed { .. } => Self::Conflict {
                code: "claimed",
                message: err.to_string(),
            },
            StoreError::NotClaimed { .. } => Self::Conflict {
                code: "not_claimed",
                message: err.to_string(),
            },
            StoreError::NotClaimable { .. } => Self::Conflict {
                code: "not_claimable",
                message: err.to_string(),
            },
            StoreError::RelationCycle { .. } => Self::Conflict {
                code: "relation_cycle",
                message: err.to_string(),
            },
            StoreError::UnknownRelated { field, .. } => {
                Self::Invalid(ValidationError::new(field, err.to_string()))
            }
            StoreError::Unavailable { .. } | StoreError::NotConfigured { .. } => {
                Self::Unavailable(err.to_string())
            }
            StoreError::Internal(detail) => Self::Internal(detail),
        }
    }
}

impl From<UpstreamError> for ApiError {
    fn from(err: UpstreamError) -> Self {
        match err {
            UpstreamError::Invalid(v) => Self::Invalid(v),
            // A key that cannot seal or open is the server's problem; its
            // text names no secret.
            UpstreamError::Key(detail) => Self::Internal(detail),
            UpstreamError::Unavailable(why) | UpstreamError::TooLarge(why) => {
                Self::Unavailable(why)
            }
            UpstreamError::Rpc { .. } => Self::Unavailable(err.to_string()),
        }
    }
}

impl From<RegistryError> for ApiError {
    fn from(err: RegistryError) -> Self {
        match err {
            RegistryError::GrantNotFound => Self::NotFound("grant not found".into()),
            RegistryError::GrantLimit { .. } => Self::Conflict {
                code: "grant_limit",
                message: err.to_string(),
            },
            RegistryError::RenewRevoked(_) => Self::Conflict {
                code: "grant_revoked",
                message: err.to_string(),
            },
            RegistryError::LifetimeLimit { .. } => Self::Conflict {
                code: "lifetime_limit",
                message: err.to_string(),
            },
            RegistryError::RenewExpired(_) => Self::Gone {
                code: "grant_expired",
                message: err.to_string(),
            },
            RegistryError::Unavailable(_) => Self::Unavailable(err.to_string()),
            RegistryError::Invalid(v) => Self::Invalid(v),
            RegistryError::Store(store) => store.into(),
            RegistryError::UnknownToken | RegistryError::Expired | RegistryError::Revoked => {
                Self::Unauthenticated(err.to_string())
            }
        }
    }
}

impl From<JwtError> for ApiError {
    fn from(err: JwtError) -> Self {
        Self::Unauthenticated(err.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_errors_map_to_stable_codes() {
        let cases: Vec<(ApiError, u16, &str)> = vec![
            (StoreError::not_found("issue x").into(), 404, "not_found"),
            (
                StoreError::VersionConflict {
                    expected: 1,
                    actual: 2,
                }
                .into(),
                409,
                "version_conflict",
            ),
            (
                StoreError::IdempotencyConflict.into(),
                409,
                "idempotency_conflict",
            ),
            (StoreError::unavailable("down").into(), 503, "unavailable"),
            (
                ValidationError::new("title", "empty").into(),
                422,
                "invalid_request",
            ),
            (
                RegistryError::Unavailable("x".into()).into(),
                503,
                "unavailable",
            ),
        ];
        for (err, status, code) in cases {
            assert_eq!(err.status_code().as_u16(), status, "{err:?}");
            assert_eq!(err.code(), code);
        }
    }
}
