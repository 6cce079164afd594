//! The crate's one error type.

use corkboard_board::{RunId, TenantId};
use corkboard_grants::RegistryError;
use std::net::SocketAddr;
use thiserror::Error;

/// Why a run could not be registered, revoked or served, or the gateway
/// not started. Request-level refusals never appear here: they are answered
/// on the wire as JSON-RPC errors carrying the request's id.
#[derive(Debug, Error)]
pub enum GatewayError {
    #[error(
        "run {run} of tenant {tenant} is already active on this runner; revoke it (DELETE /v1/runs/{tenant}/{run}) or pick another run id"
    )]
    RunActive { tenant: TenantId, run: RunId },
    #[error(
        "tenant {tenant} already has {max} live runs on this runner, its limit \
         (live_runs_per_tenant_max); revoke runs that are done (DELETE /v1/runs/{tenant}/{{run}})"
    )]
    RunLimit { tenant: TenantId, max: usize },
    #[error("gateway listener: cannot bind {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error("{key}: {reason}")]
    Config { key: &'static str, reason: String },
    #[error("the gateway is shutting down and accepts no new runs")]
    ShuttingDown,
    #[error("gateway worker unavailable: {0}")]
    Worker(String),
    #[error("rate limiter: {0}")]
    Limiter(String),
}

impl From<corkboard_grants::LimiterError> for GatewayError {
    fn from(err: corkboard_grants::LimiterError) -> Self {
        match err {
            corkboard_grants::LimiterError::Runtime(reason) => Self::Limiter(reason),
            corkboard_grants::LimiterError::Config { key, reason } => Self::Config { key, reason },
        }
    }
}

impl corkboard_board::ErrorCode for GatewayError {
    fn error_code(&self) -> corkboard_board::Code {
        use corkboard_board::Code;
        match self {
            Self::RunActive { .. } => Code::RunActive,
            Self::RunLimit { .. } => Code::RunLimit,
            Self::Registry(registry) => registry.error_code(),
            Self::ShuttingDown | Self::Bind { .. } | Self::Worker(_) | Self::Limiter(_) => {
                Code::Unavailable
            }
            Self::Config { .. } => Code::Internal,
        }
    }

    fn invalid_field(&self) -> Option<corkboard_board::ValidationError> {
        match self {
            Self::Registry(registry) => registry.invalid_field(),
            _ => None,
        }
    }
}
