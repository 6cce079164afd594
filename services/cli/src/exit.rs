//! What `corkboard` exits with, decided once for every command.
//!
//! | code | meaning |
//! | --- | --- |
//! | 0 | success |
//! | 1 | failure (unreachable server, bad configuration, a refused or failed operation) |
//! | 2 | usage: a flag or argument that is missing, malformed or refused as invalid |
//! | 3 | not found: the grant, run, issue, webhook or upstream named does not exist |
//! | 4 | authentication: no admin token, or a token the server rejects or that may not do this |
//!
//! `corkboard run` exits with its agent's status instead (its own failures
//! before the agent starts use these codes). Scripts can tell "fix the
//! command" (2) from "fix the credential" (4) from "it is not there" (3)
//! without parsing messages. A command says which kind its failure is with
//! [`fail`]; errors of our library crates carry a stable [`Code`] and are
//! classified from it, so an unknown grant reads the same locally and
//! through `--server`.

use corkboard_board::{Code, ErrorCode};
use std::process::ExitCode;

/// The kinds of failure, each with its exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Failure = 1,
    Usage = 2,
    NotFound = 3,
    Auth = 4,
}

impl Kind {
    pub fn exit_code(self) -> ExitCode {
        ExitCode::from(self as u8)
    }

    /// The kind of a stable error code (ours, or an API envelope's).
    pub fn of_code(code: Code) -> Self {
        match code {
            Code::NotFound => Self::NotFound,
            Code::Unauthenticated | Code::Forbidden => Self::Auth,
            Code::InvalidRequest
            | Code::BadRequest
            | Code::InvalidBody
            | Code::InvalidQuery
            | Code::InvalidPath => Self::Usage,
            _ => Self::Failure,
        }
    }

    /// The kind of an admin API refusal, by its HTTP status.
    pub fn of_status(status: reqwest::StatusCode) -> Self {
        match status.as_u16() {
            401 | 403 => Self::Auth,
            404 => Self::NotFound,
            400 | 422 => Self::Usage,
            _ => Self::Failure,
        }
    }
}

/// A failure whose kind the command decided.
#[derive(Debug)]
pub struct Failed {
    pub kind: Kind,
    message: String,
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failed {}

/// An error of `kind` saying `message`.
pub fn fail(kind: Kind, message: impl Into<String>) -> anyhow::Error {
    Failed {
        kind,
        message: message.into(),
    }
    .into()
}

/// A usage error (exit 2): a flag or argument the command cannot use.
pub fn usage(message: impl Into<String>) -> anyhow::Error {
    fail(Kind::Usage, message)
}

/// The kind of any error a command returns: the first cause in its chain
/// that knows its kind decides; anything else is a plain failure.
pub fn classify(err: &anyhow::Error) -> Kind {
    for cause in err.chain() {
        if let Some(failed) = cause.downcast_ref::<Failed>() {
            return failed.kind;
        }
        if let Some(code) = code_of(cause) {
            return Kind::of_code(code);
        }
    }
    Kind::Failure
}

fn code_of(cause: &(dyn std::error::Error + 'static)) -> Option<Code> {
    if let Some(e) = cause.downcast_ref::<corkboard_board::ValidationError>() {
        return Some(e.error_code());
    }
    if let Some(e) = cause.downcast_ref::<corkboard_board::StoreError>() {
        return Some(e.error_code());
    }
    if let Some(e) = cause.downcast_ref::<corkboard_grants::RegistryError>() {
        return Some(e.error_code());
    }
    if let Some(e) = cause.downcast_ref::<corkboard_grants::JwtError>() {
        return Some(e.error_code());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn the_first_cause_that_knows_its_kind_decides() {
        let err = Err::<(), _>(corkboard_board::TenantId::parse("Not A Tenant").unwrap_err())
            .context("--tenant")
            .unwrap_err();
        assert_eq!(classify(&err), Kind::Usage);
        let err = Err::<(), _>(fail(Kind::Auth, "no token"))
            .context("grant list")
            .unwrap_err();
        assert_eq!(classify(&err), Kind::Auth);
        assert_eq!(classify(&anyhow::anyhow!("anything else")), Kind::Failure);
        let missing = corkboard_board::StoreError::NotFound {
            what: "issue".into(),
        };
        assert_eq!(classify(&anyhow::Error::new(missing)), Kind::NotFound);
    }

    #[test]
    fn refusals_map_by_status() {
        use reqwest::StatusCode as S;
        assert_eq!(Kind::of_status(S::UNAUTHORIZED), Kind::Auth);
        assert_eq!(Kind::of_status(S::FORBIDDEN), Kind::Auth);
        assert_eq!(Kind::of_status(S::NOT_FOUND), Kind::NotFound);
        assert_eq!(Kind::of_status(S::BAD_REQUEST), Kind::Usage);
        assert_eq!(Kind::of_status(S::CONFLICT), Kind::Failure);
        assert_eq!(Kind::of_status(S::SERVICE_UNAVAILABLE), Kind::Failure);
    }
}
