//! Why a token could not be resolved or a grant not changed.

use corkboard_board::{StoreError, ValidationError};
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
    /// The registry backend cannot be reached; fail closed.
    #[error("token registry unavailable: {0}")]
    Unavailable(String),
    #[error("{0}")]
    Invalid(#[from] ValidationError),
    #[error(transparent)]
    Store(#[from] StoreError),
}
