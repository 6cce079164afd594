//! The one refusal type: a request answered with an error before (or
//! instead of) the engine running it.
//!
//! Every transport renders refusals through [`Refusal`]: the studio
//! endpoint, the run gateways (run ended, rate limited, wrong run), stdio
//! (a credential refused at start) and the stdio bridge. A refusal knows
//! its HTTP status, its JSON-RPC error (code from [`crate::code`]), the
//! outcome label the request log records, and whether and when a retry
//! helps; how a credential rejection is worded lives here and nowhere else.

use std::time::Duration;

use actix_web::HttpResponse;
use actix_web::http::StatusCode;
use actix_web::http::header;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::backend::AuthRejection;
use crate::code::{self, ErrorCode};
use crate::wire::{self, RpcError};

/// Which transport a credential rejection is worded for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Streamable HTTP: the token travels on every request.
    Http,
    /// stdio: the token comes from the process environment.
    Stdio,
}

/// A request refused with a correlated JSON-RPC error.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub status: StatusCode,
    pub error: RpcError,
    /// The request log's outcome label (`refused`, `unavailable`,
    /// `run_ended`, `rate_limited`, `error`, ...).
    pub outcome: &'static str,
    /// Sent as `Retry-After` (whole seconds, rounded up): the refusal is
    /// transient.
    pub retry_after: Option<Duration>,
    /// Sent as `Allow` (405 answers).
    pub allow: Option<&'static str>,
    /// Send `WWW-Authenticate: Bearer` (401 answers).
    pub www_authenticate: bool,
}

impl Refusal {
    /// How long a client should wait before retrying a transient refusal
    /// (credentials that cannot be checked right now) unless configured
    /// otherwise.
    pub const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(2);

    pub fn new(status: StatusCode, code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            status,
            error: RpcError::new(code, message),
            outcome: "refused",
            retry_after: None,
            allow: None,
            www_authenticate: false,
        }
    }

    /// A transport-level refusal (`-32600`) with `status`.
    pub fn invalid_request(status: StatusCode, message: impl Into<String>) -> Self {
        Self::new(status, code::INVALID_REQUEST, message).outcome("error")
    }

    pub fn outcome(mut self, outcome: &'static str) -> Self {
        self.outcome = outcome;
        self
    }

    pub fn retry_after(mut self, after: Duration) -> Self {
        self.retry_after = Some(after);
        self
    }

    pub fn allow(mut self, methods: &'static str) -> Self {
        self.allow = Some(methods);
        self
    }

    pub fn with_data(mut self, data: Value) -> Self {
        self.error = self.error.with_data(data);
        self
    }

    /// The one wording of a request over its rate limit: HTTP 429 with
    /// `Retry-After` and `-32052`, retryable after `retry_after`.
    /// `subject` names whose budget is spent (`run build-7`).
    pub fn rate_limited(subject: impl std::fmt::Display, retry_after: Duration) -> Self {
        let retry_ms = u64::try_from(retry_after.as_millis()).unwrap_or(u64::MAX);
        Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            code::RATE_LIMITED,
            format!(
                "Too Many Requests: {subject} is over its rate limit; retry in {retry_ms} ms (retryable)"
            ),
        )
        .outcome("rate_limited")
        .retry_after(retry_after)
        .with_data(serde_json::json!({ "retryable": true, "retry_after_ms": retry_ms }))
    }

    /// The one wording of a full share of a table the relay shares:
    /// HTTP 429 and `-32056`, naming the table, whose share is full
    /// (`share`: `run`, `tenant` or `process`; `holder` names it) and its
    /// limit (`setting` says which setting sets it). Retryable once some of
    /// the holder's entries go; nothing reached the upstream.
    pub fn share_exhausted(
        table: &str,
        share: &'static str,
        holder: impl std::fmt::Display,
        limit: usize,
        setting: &str,
    ) -> Self {
        Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            code::SHARE_EXHAUSTED,
            format!(
                "Too Many Requests: {holder} already holds {limit} {table}, its share ({share} share; {setting}); retry once some of its calls end (retryable)"
            ),
        )
        .outcome("share_exhausted")
        .with_data(serde_json::json!({
            "retryable": true,
            "table": table,
            "share": share,
            "limit": limit,
        }))
    }

    /// The one wording of a rejected credential, per transport.
    pub fn credential(rejection: &AuthRejection, transport: Transport) -> Self {
        match (rejection, transport) {
            (AuthRejection::Missing, Transport::Http) => {
                let mut refusal = Self::new(
                    StatusCode::UNAUTHORIZED,
                    code::INVALID_REQUEST,
                    "Unauthorized: send the run token as `Authorization: Bearer <token>`",
                );
                refusal.www_authenticate = true;
                refusal
            }
            (AuthRejection::Missing, Transport::Stdio) => Self::new(
                StatusCode::UNAUTHORIZED,
                code::INVALID_REQUEST,
                "Unauthorized: no credential was configured for this MCP server (set CORKBOARD_TOKEN to the run token)",
            ),
            (AuthRejection::Refused(message), _) => Self::new(
                StatusCode::FORBIDDEN,
                code::INVALID_REQUEST,
                format!("Forbidden: {message}"),
            ),
            (AuthRejection::Unavailable(message), _) => Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                code::INTERNAL_ERROR,
                format!("Service Unavailable: {message}; retry shortly"),
            )
            .outcome("unavailable")
            .retry_after(Self::DEFAULT_RETRY_AFTER),
        }
    }

    /// How a credential that stopped resolving mid-session reads as a tool
    /// error (stdio, where the process is the session and a tool call is
    /// what fails): the same reasons, and whether waiting helps.
    pub fn credential_tool_text(rejection: &AuthRejection) -> String {
        match rejection {
            AuthRejection::Missing => Self::credential(rejection, Transport::Stdio).error.message,
            AuthRejection::Refused(message) => format!(
                "Forbidden: {message}; this run may no longer use the board (ask for a new grant)"
            ),
            AuthRejection::Unavailable(message) => {
                format!("board unavailable: {message}; retry in a few seconds")
            }
        }
    }

    /// The JSON-RPC error response, correlated with `id` (`null` when the
    /// request's id is unknown).
    pub fn body(&self, id: Option<&RawValue>) -> Vec<u8> {
        wire::error_response(id, &self.error)
    }

    /// The HTTP response.
    pub fn response(&self, id: Option<&RawValue>) -> HttpResponse {
        let mut builder = HttpResponse::build(self.status);
        builder.insert_header((header::CONTENT_TYPE, "application/json"));
        if let Some(after) = self.retry_after {
            // Whole seconds, rounded up: `Retry-After: 0` invites a storm.
            let secs = after.as_millis().div_ceil(1000).max(1);
            builder.insert_header((header::RETRY_AFTER, secs.to_string()));
        }
        if let Some(allow) = self.allow {
            builder.insert_header((header::ALLOW, allow));
        }
        if self.www_authenticate {
            builder.insert_header((header::WWW_AUTHENTICATE, "Bearer"));
        }
        builder.body(self.body(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_rejections_have_one_wording() {
        let missing = Refusal::credential(&AuthRejection::Missing, Transport::Http);
        assert_eq!(missing.status, StatusCode::UNAUTHORIZED);
        assert!(missing.www_authenticate);
        let refused = Refusal::credential(
            &AuthRejection::Refused("run token revoked".into()),
            Transport::Http,
        );
        assert_eq!(refused.error.message, "Forbidden: run token revoked");
        assert_eq!(refused.outcome, "refused");
        let down = Refusal::credential(
            &AuthRejection::Unavailable("token registry unavailable".into()),
            Transport::Stdio,
        );
        assert_eq!(down.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(down.error.code, code::INTERNAL_ERROR);
        assert_eq!(down.retry_after, Some(Refusal::DEFAULT_RETRY_AFTER));
    }

    #[test]
    fn a_full_share_names_its_table_share_and_limit() {
        let refusal = Refusal::share_exhausted(
            "held calls",
            "tenant",
            "tenant acme",
            2,
            "upstream_tenant_share_pct",
        );
        assert!(refusal.error.code == code::SHARE_EXHAUSTED);
        assert_eq!(refusal.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(
            refusal.error.message,
            "Too Many Requests: tenant acme already holds 2 held calls, its share (tenant share; upstream_tenant_share_pct); retry once some of its calls end (retryable)"
        );
        let body: Value = serde_json::from_slice(&refusal.body(None)).unwrap();
        assert_eq!(body["error"]["data"]["share"], "tenant");
        assert_eq!(body["error"]["data"]["table"], "held calls");
        assert_eq!(body["error"]["data"]["limit"], 2);
    }

    #[test]
    fn responses_carry_the_id_and_headers() {
        let id = RawValue::from_string("\"req-1\"".into()).unwrap();
        let refusal = Refusal::new(StatusCode::TOO_MANY_REQUESTS, code::RATE_LIMITED, "slow")
            .retry_after(Duration::from_millis(1200));
        let response = refusal.response(Some(&id));
        assert_eq!(response.headers().get(header::RETRY_AFTER).unwrap(), "2");
        let value: Value = serde_json::from_slice(&refusal.body(Some(&id))).unwrap();
        assert_eq!(value["id"], "req-1");
        assert!(value["error"]["code"] == code::RATE_LIMITED);
        let value: Value = serde_json::from_slice(&refusal.body(None)).unwrap();
        assert!(value["id"].is_null());
    }
}
