//! The upstream crate's one error type.

use crate::shares::ShareExhausted;
use corkboard_board::ValidationError;
use thiserror::Error;

/// What registering, sealing or reaching an upstream can fail with. No
/// variant ever carries a credential.
#[derive(Debug, Clone, Error)]
pub enum UpstreamError {
    /// A registration field was refused.
    #[error("{0}")]
    Invalid(#[from] ValidationError),
    /// The sealing key is missing, unusable, or does not open a credential.
    #[error("upstream key: {0}")]
    Key(String),
    /// The upstream could not be reached or did not answer usably in time.
    /// The text names the upstream and why, and says it is retryable.
    #[error("{0}")]
    Unavailable(String),
    /// The upstream's answer (one JSON body, one SSE event) was larger than
    /// the bound (`upstream_max_answer_bytes`); it was not read further.
    /// Retrying does not help; the text names the upstream and the bound.
    #[error("{0}")]
    TooLarge(String),
    /// The upstream answered the request with a JSON-RPC error. The
    /// message is the upstream's (bounded); it goes to the agent, never
    /// into logs.
    #[error("upstream {upstream} refused the request (JSON-RPC {code}): {message}")]
    Rpc {
        upstream: String,
        code: i64,
        message: String,
    },
    /// A table the relay shares (here: upstream sessions) has no room in
    /// the caller's run's, tenant's or process's share; nothing was sent.
    #[error("{0}")]
    ShareExhausted(ShareExhausted),
}

impl corkboard_board::ErrorCode for UpstreamError {
    fn error_code(&self) -> corkboard_board::Code {
        use corkboard_board::Code;
        match self {
            Self::Invalid(_) => Code::InvalidRequest,
            // A key that cannot seal or open is the server's problem; its
            // text names no secret.
            Self::Key(_) => Code::Internal,
            Self::Unavailable(_) | Self::TooLarge(_) | Self::Rpc { .. } => Code::Unavailable,
            Self::ShareExhausted(_) => Code::RateLimited,
        }
    }

    fn invalid_field(&self) -> Option<ValidationError> {
        match self {
            Self::Invalid(invalid) => Some(invalid.clone()),
            _ => None,
        }
    }
}
