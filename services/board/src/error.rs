//! The domain's errors: field validation and store outcomes.

use crate::{IssueId, IssueState, RunId, Timestamp};
use serde::Serialize;
use thiserror::Error;

/// A value that failed validation, naming the field and what to fix.
#[derive(Debug, Clone, PartialEq, Eq, Error, Serialize)]
#[error("{field}: {reason}")]
pub struct ValidationError {
    pub field: &'static str,
    pub reason: String,
}

impl ValidationError {
    pub fn new(field: &'static str, reason: impl Into<String>) -> Self {
        Self {
            field,
            reason: reason.into(),
        }
    }
}

/// Everything a store operation can answer besides success.
///
/// `Unavailable` and `TenantBusy` are the retryable variants: the store
/// could not be reached or did not answer in time, or the tenant's share
/// of expensive reads was taken. The operation did not happen, unless
/// `maybe_applied` says a write was handed to the store and no answer came
/// back: then it may or may not have been applied, a caller must not say
/// "not applied", and a retry is safe only when it is idempotent (an
/// idempotency key, an expected version).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum StoreError {
    #[error("{what} not found")]
    NotFound { what: String },
    #[error("version conflict: expected version {expected}, the issue is at version {actual}")]
    VersionConflict { expected: u64, actual: u64 },
    #[error("idempotency key was already used with a different request")]
    IdempotencyConflict,
    #[error("{0}")]
    Invalid(#[from] ValidationError),
    /// The issue already has [`limits::COMMENTS_MAX`](crate::issue::limits::COMMENTS_MAX)
    /// comments; nothing was written. Not retryable.
    #[error("issue {issue} has reached its limit of {max} comments")]
    CommentLimit { issue: IssueId, max: usize },
    /// Another run holds the issue. Not retryable: pick other work, or
    /// wait for that run to release it.
    #[error("issue {issue} is claimed by run {run} since {since}")]
    Claimed {
        issue: IssueId,
        run: RunId,
        since: Timestamp,
    },
    /// A release of an issue nobody holds.
    #[error("issue {issue} is not claimed")]
    NotClaimed { issue: IssueId },
    /// Only open issues can be claimed.
    #[error("issue {issue} is {state}: only an open issue can be claimed")]
    NotClaimable { issue: IssueId, state: IssueState },
    /// A relation names an issue that does not exist on the caller's board
    /// (another tenant's issue reads exactly like a missing one).
    #[error("{field}: issue {id} not found on this board")]
    UnknownRelated { field: &'static str, id: IssueId },
    /// Setting `parent` would make an issue its own ancestor.
    #[error("parent: making {parent} the parent of {issue} would form a cycle")]
    RelationCycle { issue: IssueId, parent: IssueId },
    #[error(
        "board unavailable: {reason}{}",
        if *maybe_applied { "; the write may or may not have been applied" } else { "" }
    )]
    Unavailable { reason: String, maybe_applied: bool },
    /// An expensive read (a search, a filtered list) ran past its deadline
    /// and was stopped where it ran (`crate::reads`). Not retryable as it
    /// is: the same query would take as long again; a narrower one may not.
    #[error(
        "search took too long (stopped after {limit_ms} ms): narrow the query (rarer words, \
         fewer prefix terms, more filters)"
    )]
    QueryTooSlow { limit_ms: u64 },
    /// The tenant already runs its whole share of expensive reads and none
    /// came free in time, or its reads used their time share
    /// (`crate::reads`). Retryable once one has answered.
    #[error(
        "too many searches for this tenant (at most {max} at once and {ms_per_second} ms of \
         search time a second); retry shortly"
    )]
    TenantBusy { max: usize, ms_per_second: u64 },
    /// No board store exists behind this caller at all (a run started
    /// without one). Not retryable: nothing will change by waiting.
    #[error("no board store is configured: {reason}")]
    NotConfigured { reason: String },
    #[error("store error: {0}")]
    Internal(String),
}

impl StoreError {
    pub fn not_found(what: impl Into<String>) -> Self {
        Self::NotFound { what: what.into() }
    }

    /// The store could not do it; nothing was applied.
    pub fn unavailable(reason: impl Into<String>) -> Self {
        Self::Unavailable {
            reason: reason.into(),
            maybe_applied: false,
        }
    }

    /// A write reached the store and no answer came back (the connection
    /// broke, or the answer did not come in time).
    pub fn outcome_unknown(reason: impl Into<String>) -> Self {
        Self::Unavailable {
            reason: reason.into(),
            maybe_applied: true,
        }
    }

    /// Whether the same call may succeed if retried (unchanged; for a write
    /// that `maybe_applied`, only if it is idempotent).
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Unavailable { .. } | Self::TenantBusy { .. })
    }

    /// The error of a write that failed after its first step committed
    /// (an idempotency key claimed, say): something of it is stored, and a
    /// retry with the same key completes it, so "nothing was applied" would
    /// be false. An `Unavailable` becomes `maybe_applied`; others stay.
    pub fn after_commit_point(self) -> Self {
        match self {
            Self::Unavailable { reason, .. } => Self::outcome_unknown(reason),
            other => other,
        }
    }

    /// Whether a write that failed with this error may still have taken
    /// effect (`maybe_applied`): its outcome is unknown.
    pub fn may_have_been_applied(&self) -> bool {
        matches!(
            self,
            Self::Unavailable {
                maybe_applied: true,
                ..
            }
        )
    }

    /// The error a read gets where a write would be `maybe_applied`: a read
    /// changes nothing, so its outcome is never in doubt.
    pub fn for_read(self) -> Self {
        match self {
            Self::Unavailable { reason, .. } => Self::unavailable(reason),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn after_a_commit_point_nothing_is_reported_as_not_applied() {
        assert!(!StoreError::unavailable("no server").may_have_been_applied());
        assert!(!StoreError::IdempotencyConflict.may_have_been_applied());
        let err = StoreError::unavailable("no server").after_commit_point();
        assert!(err.may_have_been_applied());
        assert!(
            matches!(&err, StoreError::Unavailable { maybe_applied: true, reason } if reason == "no server"),
            "{err:?}"
        );
        let err = StoreError::outcome_unknown("cut").after_commit_point();
        assert!(matches!(
            err,
            StoreError::Unavailable {
                maybe_applied: true,
                ..
            }
        ));
        // Refusals are not outages: they stay what they are.
        let err = StoreError::IdempotencyConflict.after_commit_point();
        assert!(matches!(err, StoreError::IdempotencyConflict));
        // And a read never reports a write's doubt.
        let err = StoreError::outcome_unknown("cut")
            .after_commit_point()
            .for_read();
        assert!(matches!(
            err,
            StoreError::Unavailable {
                maybe_applied: false,
                ..
            }
        ));
    }
}
