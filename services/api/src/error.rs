//! The APIs' one error type and its one mapping to HTTP: every refusal
//! of the admin, board and register APIs leaves as the same JSON envelope
//! `{"error": {"code": "...", "message": "...", "details": ...}}` with a
//! stable machine-readable `code`. Which status a code answers with is
//! decided once, by [`Code::http_status`]; any crate's error that knows its
//! code ([`ErrorCode`]) converts with `?`.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use corkboard_board::{Code, ErrorCode, ValidationError};
use serde_json::{Value, json};
use std::fmt;

/// A refusal of an API request: its code, the message the client reads,
/// and what only the log may see.
#[derive(Debug)]
pub struct ApiError {
    code: Code,
    message: String,
    details: Value,
    /// Internal errors' text: it may name internals, so it goes to the log
    /// and the client reads "internal error".
    log_detail: Option<String>,
    retry_after_secs: Option<u64>,
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ApiError {}

impl ApiError {
    /// A refusal with `code` and `message` (and no details).
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        let message = message.into();
        if code == Code::Internal {
            return Self::internal(message);
        }
        Self {
            code,
            message,
            details: Value::Null,
            log_detail: None,
            retry_after_secs: None,
        }
    }

    pub fn unauthenticated(message: String) -> Self {
        Self::new(Code::Unauthenticated, message)
    }

    pub fn forbidden(message: String) -> Self {
        Self::new(Code::Forbidden, message)
    }

    pub fn not_found(message: String) -> Self {
        Self::new(Code::NotFound, message)
    }

    pub fn bad_request(message: String) -> Self {
        Self::new(Code::BadRequest, message)
    }

    pub fn unavailable(message: String) -> Self {
        Self::new(Code::Unavailable, message)
    }

    /// A failure of ours: `detail` is logged, the client reads
    /// "internal error".
    pub fn internal(detail: String) -> Self {
        Self {
            code: Code::Internal,
            message: "internal error".to_owned(),
            details: Value::Null,
            log_detail: Some(detail),
            retry_after_secs: None,
        }
    }

    /// Too many requests: retry after `retry_after_secs`.
    pub fn rate_limited(retry_after_secs: u64) -> Self {
        Self {
            retry_after_secs: Some(retry_after_secs),
            details: json!({ "retry_after_secs": retry_after_secs }),
            ..Self::new(
                Code::RateLimited,
                format!("too many requests; retry after {retry_after_secs}s"),
            )
        }
    }

    /// The stable code clients can switch on.
    pub fn code(&self) -> &'static str {
        self.code.as_str()
    }

    /// The code as a value.
    pub fn error_code(&self) -> Code {
        self.code
    }
}

/// Any crate's error that knows its code. (`ApiError` itself implements no
/// `ErrorCode`, which is what lets this impl stand beside `From<T> for T`.)
impl<E: ErrorCode> From<E> for ApiError {
    fn from(err: E) -> Self {
        let code = err.error_code();
        if code == Code::Internal {
            return Self::internal(err.to_string());
        }
        match err.invalid_field() {
            Some(invalid) => invalid_request(&invalid),
            None => Self::new(code, err.to_string()),
        }
    }
}

fn invalid_request(invalid: &ValidationError) -> ApiError {
    ApiError {
        details: json!({ "field": invalid.field, "reason": invalid.reason }),
        ..ApiError::new(Code::InvalidRequest, invalid.to_string())
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        StatusCode::from_u16(self.code.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    fn error_response(&self) -> HttpResponse {
        if let Some(detail) = &self.log_detail {
            tracing::error!(error = %detail, "internal error in API request");
        }
        let mut response = HttpResponse::build(self.status_code());
        match self.code {
            Code::Unauthenticated => {
                response.insert_header(("WWW-Authenticate", "Bearer"));
            }
            Code::RateLimited => {
                let secs = self.retry_after_secs.unwrap_or(1);
                response.insert_header(("Retry-After", secs.to_string()));
            }
            Code::Unavailable => {
                response.insert_header(("Retry-After", "1"));
            }
            _ => {}
        }
        response.json(json!({
            "error": { "code": self.code(), "message": self.message, "details": self.details }
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corkboard_board::StoreError;
    use corkboard_grants::RegistryError;

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
                StoreError::QueryTooSlow { limit_ms: 2000 }.into(),
                422,
                "query_too_slow",
            ),
            (
                StoreError::TenantBusy {
                    max: 2,
                    ms_per_second: 250,
                }
                .into(),
                429,
                "rate_limited",
            ),
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

    #[test]
    fn internal_details_stay_out_of_the_message() {
        let err: ApiError = StoreError::Internal("disk /var/x is full".into()).into();
        assert_eq!(err.to_string(), "internal error");
        assert_eq!(err.status_code().as_u16(), 500);
    }
}
