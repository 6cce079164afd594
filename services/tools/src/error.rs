//! Why a tool call failed. Every variant becomes a tool execution error
//! (`isError: true`) whose text is [`ToolsError`]'s `Display`: written for
//! the model that made the call, naming what to fix or whether to retry.

use corkboard_board::{
    AuditOutcome, BudgetKind, Capability, Integrity, IssueId, IssueState, RunId, StoreError,
    Timestamp, ValidationError,
};
use std::time::Duration;
use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ToolsError {
    /// The transport only forwards names it listed, so this means the tool
    /// set and the dispatcher disagree.
    #[error("unknown tool {0:?}; call tools/list to see the board's tools")]
    UnknownTool(String),

    #[error(
        "{tool} needs the {missing} capability, which this run's grant does not have \
         (the grant allows: {allowed}); ask whoever started the run for a grant with {missing}"
    )]
    Denied {
        tool: &'static str,
        missing: Capability,
        allowed: String,
    },

    /// The run's grant allows no more writes of this kind: not retryable,
    /// whatever the agent does.
    #[error(
        "this run may {}; {} (budget {kind} exhausted; not retryable: nothing was written, \
         and no further {kind} call of this run will be accepted)",
        .kind.allowance(*.limit),
        .kind.spent(*.limit)
    )]
    BudgetExhausted { kind: BudgetKind, limit: u32 },

    #[error("invalid argument `{field}`: {reason}")]
    InvalidArgument { field: String, reason: String },

    /// A credential in a board write, under the tenant's `refuse` policy.
    /// Names the kind, never the text.
    #[error(
        "invalid argument `{field}`: it holds a credential ({kinds}); nothing was written. \
         This board refuses credentials: remove it (refer to where it is kept instead)"
    )]
    SecretRefused { field: String, kinds: String },

    #[error(
        "update_issue needs at least one of title, body, state, labels, priority, parent, \
         duplicate_of, blocked_by or close_reason to change; nothing was written"
    )]
    NothingToUpdate,

    #[error(
        "issue {0} not found on this board; quote issue ids exactly as create_issue or \
         list_issues returned them (iss_ followed by 26 characters)"
    )]
    IssueNotFound(IssueId),

    /// The issue is below the floor of the run's grant: not shown to the
    /// run, and not changed by it.
    #[error(
        "issue {issue} is withheld from this run: it was written or edited at integrity \
         {level}, below this run's floor ({floor}, set by its grant). Nothing was written; \
         leave it to a run or person the board trusts more"
    )]
    Withheld {
        issue: IssueId,
        level: Integrity,
        floor: Integrity,
    },

    /// A store `NotFound` about something other than the issue named in the call.
    #[error("{0} not found")]
    NotFound(String),

    #[error(
        "version conflict on issue {id}: you sent expected_version={expected} but the issue is \
         now at version {actual} because it changed after you read it; nothing was written. \
         Re-read the issue with get_issue and retry with expected_version={actual} if your \
         change still applies"
    )]
    VersionConflict {
        id: IssueId,
        expected: u64,
        actual: u64,
    },

    #[error(
        "idempotency_key was already used by this run for a different request; nothing was \
         written. Resend the original arguments unchanged to get the original result, or use \
         a new key for a new request"
    )]
    IdempotencyConflict,

    #[error(
        "issue {issue} has reached its limit of {max} comments; nothing was written. \
         Open a new issue to continue the discussion"
    )]
    CommentLimit { issue: IssueId, max: usize },

    /// Another run holds the issue: not retryable, pick other work.
    #[error(
        "issue {issue} is claimed by run {run} since {since}; nothing was written. Another \
         agent is working on it: do not work on it too. Pick another issue (list_issues with \
         unclaimed=true); it comes back to the pool when that run releases it, closes it or ends"
    )]
    Claimed {
        issue: IssueId,
        run: RunId,
        since: Timestamp,
    },

    #[error("issue {issue} is not claimed by anyone, so there is nothing to release")]
    NotClaimed { issue: IssueId },

    #[error(
        "issue {issue} is {state}: only an open issue can be claimed. Reopen it with \
         update_issue first if the work is not finished"
    )]
    NotClaimable { issue: IssueId, state: IssueState },

    #[error(
        "invalid argument `{field}`: issue {id} not found on this board; nothing was \
         written. Quote ids exactly as list_issues or create_issue returned them"
    )]
    UnknownRelated { field: &'static str, id: IssueId },

    #[error(
        "invalid argument `parent`: making {parent} the parent of {issue} would form a cycle \
         ({parent} is already below {issue}); nothing was written"
    )]
    RelationCycle { issue: IssueId, parent: IssueId },

    #[error("board unavailable: {reason} (retryable; try again in a few seconds)")]
    Unavailable { reason: String },

    /// A write reached the board and no answer came back.
    #[error(
        "board unavailable: {reason}. The write may or may not have been applied (retryable \
         with care): repeat create_issue or add_comment only with the same idempotency_key \
         (a replay returns the original; without a key a retry may create a duplicate), \
         re-read with get_issue before repeating an update, and list your claims \
         (list_issues with claimed_by set to your run) before claiming again"
    )]
    OutcomeUnknown { reason: String },

    /// A search (or filtered list) ran past its deadline and was stopped:
    /// narrowing it helps, repeating it as it is does not.
    #[error(
        "search took too long and was stopped after {limit_ms} ms (the board is fine; this \
         query is too costly). Narrow it: more or rarer words, fewer prefix terms (word*), or \
         filters such as states or labels"
    )]
    QueryTooSlow { limit_ms: u64 },

    /// The tenant's share of concurrent searches is taken (by its runs
    /// together): retryable shortly.
    #[error(
        "too many searches for this tenant: at most {max} run at once and {ms_per_second} ms of \
         search time a second across all of its runs (retryable; retry in a few seconds, one \
         search at a time, with narrower queries)"
    )]
    TenantBusy { max: usize, ms_per_second: u64 },

    /// This run has no board at all: waiting will not help, so the text
    /// must not invite a retry loop.
    #[error("board unavailable in this run: {reason}")]
    NoBoard { reason: String },

    #[error(
        "board unavailable: the board did not answer within {}s (retryable; try again in a \
         few seconds). A write may or may not have been applied: re-read before repeating an \
         update, repeat create_issue or add_comment only with the same idempotency_key, and \
         list your claims (list_issues with claimed_by set to your run) before claiming again",
        .after.as_secs_f64()
    )]
    Timeout { after: Duration },

    /// A call that awaits, was refused or already used its person's
    /// approval (the gate's words: what happened and what to do).
    #[error("{0}")]
    Approval(String),

    /// The detail goes to the operator's log, not to the agent.
    #[error("internal board error; the operator's logs have the details")]
    Internal { detail: String },
}

impl ToolsError {
    /// The outcome recorded in the audit trail.
    pub fn outcome(&self) -> AuditOutcome {
        match self {
            // Both are the grant refusing the call.
            Self::Denied { .. }
            | Self::BudgetExhausted { .. }
            | Self::Approval(_)
            | Self::Withheld { .. } => AuditOutcome::Denied,
            Self::Unavailable { .. }
            | Self::OutcomeUnknown { .. }
            | Self::Timeout { .. }
            | Self::NoBoard { .. } => AuditOutcome::Unavailable,
            Self::TenantBusy { .. } => AuditOutcome::RateLimited,
            Self::SecretRefused { .. } => AuditOutcome::SecretRefused,
            Self::UnknownTool(_)
            | Self::InvalidArgument { .. }
            | Self::NothingToUpdate
            | Self::IssueNotFound(_)
            | Self::NotFound(_)
            | Self::VersionConflict { .. }
            | Self::IdempotencyConflict
            | Self::CommentLimit { .. }
            | Self::Claimed { .. }
            | Self::NotClaimed { .. }
            | Self::NotClaimable { .. }
            | Self::UnknownRelated { .. }
            | Self::RelationCycle { .. }
            | Self::QueryTooSlow { .. }
            | Self::Internal { .. } => AuditOutcome::ToolError,
        }
    }

    /// Whether the write this error answers certainly did not happen, so a
    /// budget reservation taken for it is given back. Kept when the outcome
    /// is unknown (the error text says how to retry safely, and a retry
    /// under the same idempotency key gives its reservation back as a
    /// replay).
    pub fn wrote_nothing(&self) -> bool {
        !matches!(
            self,
            Self::OutcomeUnknown { .. } | Self::Timeout { .. } | Self::Internal { .. }
        )
    }

    /// Maps a store answer, given the issue the call was about (if any) so
    /// messages can name it.
    pub fn from_store(err: StoreError, issue: Option<&IssueId>) -> Self {
        match (err, issue) {
            (StoreError::NotFound { .. }, Some(id)) => Self::IssueNotFound(id.clone()),
            (StoreError::NotFound { what }, None) => Self::NotFound(what),
            (StoreError::VersionConflict { expected, actual }, Some(id)) => Self::VersionConflict {
                id: id.clone(),
                expected,
                actual,
            },
            (StoreError::VersionConflict { expected, actual }, None) => Self::Internal {
                detail: format!(
                    "version conflict (expected {expected}, actual {actual}) without an issue"
                ),
            },
            (StoreError::IdempotencyConflict, _) => Self::IdempotencyConflict,
            (StoreError::Invalid(err), _) => err.into(),
            (StoreError::CommentLimit { issue, max }, _) => Self::CommentLimit { issue, max },
            (StoreError::Claimed { issue, run, since }, _) => Self::Claimed { issue, run, since },
            (StoreError::NotClaimed { issue }, _) => Self::NotClaimed { issue },
            (StoreError::NotClaimable { issue, state }, _) => Self::NotClaimable { issue, state },
            (StoreError::UnknownRelated { field, id }, _) => Self::UnknownRelated { field, id },
            (StoreError::RelationCycle { issue, parent }, _) => {
                Self::RelationCycle { issue, parent }
            }
            (
                StoreError::Unavailable {
                    reason,
                    maybe_applied: false,
                },
                _,
            ) => Self::Unavailable { reason },
            (
                StoreError::Unavailable {
                    reason,
                    maybe_applied: true,
                },
                _,
            ) => Self::OutcomeUnknown { reason },
            (StoreError::QueryTooSlow { limit_ms }, _) => Self::QueryTooSlow { limit_ms },
            (StoreError::TenantBusy { max, ms_per_second }, _) => {
                Self::TenantBusy { max, ms_per_second }
            }
            (StoreError::NotConfigured { reason }, _) => Self::NoBoard { reason },
            (StoreError::Internal(detail), _) => Self::Internal { detail },
        }
    }
}

impl From<ValidationError> for ToolsError {
    fn from(err: ValidationError) -> Self {
        Self::InvalidArgument {
            field: err.field.to_owned(),
            reason: err.reason,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflict_text_tells_how_to_recover() {
        let id = IssueId::generate();
        let err = ToolsError::from_store(
            StoreError::VersionConflict {
                expected: 2,
                actual: 5,
            },
            Some(&id),
        );
        let text = err.to_string();
        assert!(text.contains(id.as_str()), "{text}");
        assert!(text.contains("expected_version=2"), "{text}");
        assert!(text.contains("retry with expected_version=5"), "{text}");
        assert!(text.contains("get_issue"), "{text}");
        assert_eq!(err.outcome(), AuditOutcome::ToolError);
    }

    #[test]
    fn unavailability_is_retryable_and_audited_as_such() {
        let err = ToolsError::from_store(StoreError::unavailable("disk full"), None);
        assert_eq!(err.outcome(), AuditOutcome::Unavailable);
        assert!(err.to_string().starts_with("board unavailable: disk full"));
        assert!(err.to_string().contains("retryable"));
        let timeout = ToolsError::Timeout {
            after: Duration::from_millis(1500),
        };
        assert!(timeout.to_string().contains("within 1.5s"), "{timeout}");
        assert_eq!(timeout.outcome(), AuditOutcome::Unavailable);
    }

    #[test]
    fn a_write_of_unknown_outcome_says_how_to_retry_safely() {
        let err = ToolsError::from_store(StoreError::outcome_unknown("connection reset"), None);
        assert_eq!(err.outcome(), AuditOutcome::Unavailable);
        let text = err.to_string();
        assert!(
            text.starts_with("board unavailable: connection reset"),
            "{text}"
        );
        assert!(text.contains("may or may not have been applied"), "{text}");
        assert!(text.contains("same idempotency_key"), "{text}");
        let known = ToolsError::from_store(StoreError::unavailable("refused"), None);
        assert!(!known.to_string().contains("may or may not"), "{known}");
    }

    #[test]
    fn comment_limit_names_the_issue_and_the_limit() {
        let id = IssueId::generate();
        let err = ToolsError::from_store(
            StoreError::CommentLimit {
                issue: id.clone(),
                max: 500,
            },
            Some(&id),
        );
        let text = err.to_string();
        assert!(
            text.starts_with(&format!("issue {id} has reached its limit of 500 comments")),
            "{text}"
        );
        assert_eq!(err.outcome(), AuditOutcome::ToolError);
    }

    #[test]
    fn a_claimed_issue_names_the_run_and_is_not_retryable() {
        let id = IssueId::generate();
        let err = ToolsError::from_store(
            StoreError::Claimed {
                issue: id.clone(),
                run: RunId::parse("run-7").unwrap(),
                since: Timestamp::from_millis(0),
            },
            Some(&id),
        );
        let text = err.to_string();
        assert!(text.contains("claimed by run run-7 since 1970"), "{text}");
        assert!(!text.contains("retryable"), "{text}");
        assert_eq!(err.outcome(), AuditOutcome::ToolError);
    }

    #[test]
    fn an_exhausted_budget_names_it_and_is_not_retryable() {
        let err = ToolsError::BudgetExhausted {
            kind: BudgetKind::CreateIssue,
            limit: 3,
        };
        let text = err.to_string();
        assert!(
            text.starts_with("this run may create at most 3 issues; 3 created (budget create_issue exhausted; not retryable"),
            "{text}"
        );
        assert_eq!(err.outcome(), AuditOutcome::Denied);
        assert!(err.wrote_nothing());
        assert!(
            !ToolsError::Timeout {
                after: Duration::from_secs(1)
            }
            .wrote_nothing()
        );
        assert!(ToolsError::IdempotencyConflict.wrote_nothing());
    }

    #[test]
    fn a_slow_search_says_narrow_it_and_a_busy_tenant_says_retry() {
        let slow = ToolsError::from_store(StoreError::QueryTooSlow { limit_ms: 2000 }, None);
        let text = slow.to_string();
        assert!(
            text.starts_with("search took too long") && text.contains("2000 ms"),
            "{text}"
        );
        assert!(
            text.contains("Narrow it") && !text.contains("retryable"),
            "{text}"
        );
        assert_eq!(slow.outcome(), AuditOutcome::ToolError);
        let busy = ToolsError::from_store(
            StoreError::TenantBusy {
                max: 2,
                ms_per_second: 250,
            },
            None,
        );
        let text = busy.to_string();
        assert!(
            text.starts_with("too many searches for this tenant")
                && text.contains("at most 2")
                && text.contains("250 ms of search time a second"),
            "{text}"
        );
        assert!(text.contains("retryable"), "{text}");
        assert_eq!(busy.outcome(), AuditOutcome::RateLimited);
        assert!(slow.wrote_nothing() && busy.wrote_nothing());
    }

    #[test]
    fn internal_details_stay_out_of_the_agent_text() {
        let err = ToolsError::from_store(StoreError::Internal("SQLITE_CORRUPT".into()), None);
        assert!(!err.to_string().contains("SQLITE"));
    }
}
