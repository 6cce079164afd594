//! Every refusal the gateway itself words: a [`Refusal`] (status, JSON-RPC
//! code, outcome label, Retry-After) that the request path correlates with
//! the request's JSON-RPC id when it answers (see `bridge`). The
//! endpoint's own refusals (transport checks, credentials, body limits)
//! come from `corkboard_mcp` unchanged.
//!
//! Only [`crate::stop`] below it: the request path, the batch gate and
//! the shared route all use these, and none of them is imported here.

use crate::stop::StopReason;
use actix_web::http::StatusCode;
use corkboard_grants::RunKey;
use corkboard_grants::limiter::RateLimited;
use corkboard_mcp::{Refusal, code};

/// The message for a valid token presented at another run's gateway.
pub(crate) const OTHER_RUN: &str = "this run token belongs to another run: each run's gateway accepts only the token issued for that run";

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

/// The refusal of a request over its run's rate limit.
pub(crate) fn rate_limited(run: &RunKey, limited: RateLimited) -> Refusal {
    Refusal::rate_limited(format_args!("run {}", run.run), limited.retry_after)
}

/// The refusal of a token for another run than the port's or the path's.
pub(crate) fn other_run() -> Refusal {
    Refusal::new(
        StatusCode::FORBIDDEN,
        code::INVALID_REQUEST,
        format!("Forbidden: {OTHER_RUN}"),
    )
}

/// The refusal of a path that serves nothing (`what` says what is served
/// instead).
pub(crate) fn not_found(what: &str) -> Refusal {
    Refusal::new(
        StatusCode::NOT_FOUND,
        code::NOT_FOUND,
        format!("Not Found: {what}"),
    )
    .outcome("not_found")
}
