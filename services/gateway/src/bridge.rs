//! The request path between an HTTP worker and a run's actor.
//!
//! Every request that reaches a run gets exactly one correlated answer
//! (same JSON-RPC id): the MCP endpoint's response, or a typed error when
//! the run is gone or draining ("run ended"), when the run's rate limit is
//! reached, or when the run is stopped while the request is in flight.
//! Admission does not message the run's actor (see [`crate::actor`]), so
//! a busy or stalled actor thread holds up no request. A request whose
//! client disconnects is dropped by the HTTP server; its ticket and log
//! guard release the slot and record the outcome. Nothing waits without a
//! bound.

use crate::actor::{Refused, RunHandle, StopReason};
use crate::backend::RequestScope;
use crate::binding::Binding;
use crate::gateway::Inner;
use crate::key::RunKey;
use crate::rpc::{self, RequestHead, code};
use actix_web::body::{BoxBody, MessageBody};
use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderMap};
use actix_web::{FromRequest, HttpRequest, HttpResponse, web};
use bytes::{Bytes, BytesMut};
use corkboard_board::{Grant, TenantId};
use corkboard_grants::TokenHash;
use corkboard_mcp::RpcError;
use futures_util::StreamExt;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A request whose body has been read.
pub(crate) struct Incoming {
    pub req: HttpRequest,
    pub body: Bytes,
    pub head: RequestHead,
    pub log: RequestLog,
}

/// The one request-log event of a request. Dropped without
/// [`RequestLog::finish`] (the client went away and the HTTP server
/// dropped the handler), it records that instead.
pub(crate) struct RequestLog {
    started: Instant,
    method: &'static str,
    tool: Option<&'static str>,
    tenant: Option<TenantId>,
    run: String,
    done: bool,
}

impl RequestLog {
    fn new(run: String) -> Self {
        Self {
            started: Instant::now(),
            method: "none",
            tool: None,
            tenant: None,
            run,
            done: false,
        }
    }

    pub(crate) fn set_run(&mut self, key: &RunKey) {
        self.tenant = Some(key.tenant.clone());
        self.run = key.run.to_string();
    }

    fn emit(&self, status: u16, outcome: &str) {
        tracing::info!(
            method = self.method,
            tool = self.tool.unwrap_or(""),
            tenant = self.tenant.as_ref().map_or("", TenantId::as_str),
            run = %self.run,
            outcome,
            status,
            latency_us = u64::try_from(self.started.elapsed().as_micros()).unwrap_or(u64::MAX),
            "gateway request"
        );
    }

    pub(crate) fn finish(mut self, status: u16, outcome: &str) {
        self.done = true;
        self.emit(status, outcome);
    }
}

impl Drop for RequestLog {
    fn drop(&mut self) {
        if !self.done {
            self.emit(499, "client_disconnected");
        }
    }
}

/// A refusal with the request's id, logged.
pub(crate) struct Refusal {
    pub status: StatusCode,
    pub error: RpcError,
    pub outcome: &'static str,
    pub retry_after: Option<Duration>,
    pub www_authenticate: bool,
}

impl Refusal {
    pub(crate) fn new(status: StatusCode, code: i64, message: impl Into<String>) -> Self {
        Self {
            status,
            error: RpcError::new(code, message),
            outcome: "refused",
            retry_after: None,
            www_authenticate: false,
        }
    }

    pub(crate) fn outcome(mut self, outcome: &'static str) -> Self {
        self.outcome = outcome;
        self
    }

    pub(crate) fn retry_after(mut self, after: Duration) -> Self {
        self.retry_after = Some(after);
        self
    }

    fn respond(self, id: Option<&serde_json::value::RawValue>, log: RequestLog) -> HttpResponse {
        let mut builder = HttpResponse::build(self.status);
        builder.insert_header((header::CONTENT_TYPE, "application/json"));
        if let Some(after) = self.retry_after {
            // Whole seconds, rounded up: `Retry-After: 0` invites a storm.
            let secs = after.as_millis().div_ceil(1000).max(1);
            builder.insert_header((header::RETRY_AFTER, secs.to_string()));
        }
        if self.www_authenticate {
            builder.insert_header((header::WWW_AUTHENTICATE, "Bearer"));
        }
        log.finish(self.status.as_u16(), self.outcome);
        builder.body(rpc::error_body(id, &self.error))
    }
}

/// "The run ended": its actor is gone, draining, or stopped it.
pub(crate) fn run_ended(run: &RunKey, reason: Option<StopReason>, in_flight: bool) -> Refusal {
    let why = match reason {
        Some(StopReason::Expired) => "expired",
        Some(StopReason::Shutdown) => "stopped (the runner is shutting down)",
        Some(StopReason::Idle) => "stopped on this runner (idle); retry",
        Some(StopReason::Revoked | StopReason::GrantEnded) => "revoked",
        None => "revoked or expired",
    };
    let message = if in_flight {
        format!(
            "Forbidden: run {} was {why} while this request was in flight; it was stopped after the drain period and may or may not have taken effect",
            run.run
        )
    } else {
        format!(
            "Forbidden: run {} was {why}; this gateway no longer serves it",
            run.run
        )
    };
    Refusal::new(StatusCode::FORBIDDEN, code::RUN_ENDED, message).outcome(if in_flight {
        "cancelled"
    } else {
        "run_ended"
    })
}

/// Reads the (bounded) body and what the request asks for. `run` names
/// the run for the log until the request is routed.
pub(crate) async fn read(
    req: HttpRequest,
    mut payload: web::Payload,
    limit: usize,
    run: String,
) -> Result<Incoming, HttpResponse> {
    let mut log = RequestLog::new(run);
    let too_large = || {
        Refusal::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            corkboard_mcp::code::INVALID_REQUEST,
            format!("Payload Too Large: messages are limited to {limit} bytes"),
        )
        .outcome("error")
    };
    let declared = declared_length(req.headers());
    if declared.is_some_and(|len| len > limit as u64) {
        return Err(too_large().respond(None, log));
    }
    let mut body = BytesMut::with_capacity(declared.map_or(0, |len| len as usize).min(limit));
    while let Some(chunk) = payload.next().await {
        let Ok(chunk) = chunk else {
            return Err(Refusal::new(
                StatusCode::BAD_REQUEST,
                corkboard_mcp::code::INVALID_REQUEST,
                "Bad Request: the body could not be read",
            )
            .outcome("error")
            .respond(None, log));
        };
        if body.len() + chunk.len() > limit {
            return Err(too_large().respond(None, log));
        }
        body.extend_from_slice(&chunk);
    }
    let body = body.freeze();
    let head = if body.is_empty() {
        RequestHead {
            method: match *req.method() {
                actix_web::http::Method::DELETE => "session/delete",
                actix_web::http::Method::GET => "get",
                _ => "none",
            },
            ..RequestHead::default()
        }
    } else {
        rpc::peek(&body)
    };
    log.method = head.method;
    log.tool = head.tool;
    Ok(Incoming {
        req,
        body,
        head,
        log,
    })
}

fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
}

/// Answers `incoming` with `refusal`, correlated with its id.
pub(crate) fn refuse(incoming: Incoming, refusal: Refusal) -> HttpResponse {
    refusal.respond(incoming.head.id.as_deref(), incoming.log)
}

/// Admits the request to its run, serves it through the MCP endpoint with
/// one binding snapshot, and answers it.
pub(crate) async fn serve(
    inner: &Inner,
    run: &RunHandle,
    mut incoming: Incoming,
    binding: Option<Arc<Binding>>,
    resolved: Option<(TokenHash, Grant)>,
) -> HttpResponse {
    let key = &run.state.key;
    incoming.log.set_run(key);
    let mut ticket = match inner.admit(run).await {
        Ok(ticket) => ticket,
        Err(Refused::Ended(reason)) => {
            return refuse(incoming, run_ended(key, Some(reason), false));
        }
        Err(Refused::RateLimited(limited)) => {
            let retry_ms = u64::try_from(limited.retry_after.as_millis()).unwrap_or(u64::MAX);
            let mut refusal = Refusal::new(
                StatusCode::TOO_MANY_REQUESTS,
                code::RATE_LIMITED,
                format!(
                    "Too Many Requests: run {} is over its rate limit; retry in {retry_ms} ms (retryable)",
                    key.run
                ),
            )
            .outcome("rate_limited")
            .retry_after(limited.retry_after);
            refusal.error = refusal
                .error
                .with_data(json!({ "retryable": true, "retry_after_ms": retry_ms }));
            return refuse(incoming, refusal);
        }
    };

    let Incoming {
        req,
        body,
        head,
        log,
    } = incoming;
    let mut raw = actix_web::dev::Payload::from(body);
    let payload = match web::Payload::from_request(&req, &mut raw).await {
        Ok(payload) => payload,
        Err(_) => {
            return Refusal::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                corkboard_mcp::code::INTERNAL_ERROR,
                "Internal error: the request body could not be handed on",
            )
            .outcome("error")
            .respond(head.id.as_deref(), log);
        }
    };
    let scope = RequestScope {
        binding: binding.unwrap_or_else(|| inner.binding.load()),
        expected: key.clone(),
        resolved,
    };
    // No span of its own: the endpoint's `mcp.request` span records the
    // tenant, run and grant, and the request's log event names them.
    let endpoint = inner.endpoint.clone();
    let call = scope.run(endpoint.handle(req, payload));
    tokio::pin!(call);
    let response = tokio::select! {
        biased;
        response = &mut call => response,
        () = ticket.cancelled() => {
            return run_ended(key, None, true).respond(head.id.as_deref(), log);
        }
    };
    drop(ticket);
    let status = response.status().as_u16();
    let outcome = response
        .extensions()
        .get::<corkboard_mcp::ExchangeOutcome>()
        .map(|outcome| outcome.0);
    let (response, body) = response.into_parts();
    match body.try_into_bytes() {
        Ok(bytes) => {
            // The endpoint says how the exchange ended; the body is parsed
            // only for what it did not classify (refusals, batches).
            let outcome = match (status, outcome) {
                (200, Some(outcome)) => outcome,
                _ => rpc::outcome_of(status, &bytes),
            };
            log.finish(status, outcome);
            response.set_body(BoxBody::new(bytes))
        }
        Err(body) => {
            log.finish(status, "streamed");
            response.set_body(body)
        }
    }
}

/// A bare JSON-RPC error response for paths that serve nothing.
pub(crate) fn not_found(incoming: Incoming, what: &str) -> HttpResponse {
    refuse(
        incoming,
        Refusal::new(
            StatusCode::NOT_FOUND,
            code::NOT_FOUND,
            format!("Not Found: {what}"),
        )
        .outcome("not_found"),
    )
}

/// Registry rejections as the MCP endpoint words them (401/403/503).
pub(crate) fn auth_refusal(rejection: corkboard_mcp::AuthRejection) -> Refusal {
    use corkboard_mcp::AuthRejection;
    match rejection {
        AuthRejection::Missing => {
            let mut refusal = Refusal::new(
                StatusCode::UNAUTHORIZED,
                corkboard_mcp::code::INVALID_REQUEST,
                "Unauthorized: send the run token as `Authorization: Bearer <token>`",
            );
            refusal.www_authenticate = true;
            refusal
        }
        AuthRejection::Refused(message) => Refusal::new(
            StatusCode::FORBIDDEN,
            corkboard_mcp::code::INVALID_REQUEST,
            format!("Forbidden: {message}"),
        ),
        AuthRejection::Unavailable(message) => Refusal::new(
            StatusCode::SERVICE_UNAVAILABLE,
            corkboard_mcp::code::INTERNAL_ERROR,
            format!("Service Unavailable: {message}; retry shortly"),
        )
        .outcome("unavailable")
        .retry_after(Duration::from_secs(2)),
    }
}
