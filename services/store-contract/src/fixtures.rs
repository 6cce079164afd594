//! Small builders for the values the cases store, and assertions on errors.

use corkboard_board::{
    ArgumentsHash, AuditOutcome, AuditRecord, Author, Body, Capabilities, CommentBody, Grant,
    GrantId, IdempotencyKey, IssueId, IssuePatch, IssueState, Label, Labels, NewComment, NewIssue,
    Priority, RunId, StoreError, TenantId, Timestamp, Title,
};
use std::fmt::Debug;

/// A tenant no other case (or earlier run against a shared store) uses.
pub fn tenant(tag: &str) -> TenantId {
    let suffix = ulid::Ulid::new().to_string().to_ascii_lowercase();
    TenantId::parse(format!("{tag}-{suffix}")).expect("a valid tenant id")
}

pub fn run(name: &str) -> RunId {
    RunId::parse(name).expect("a valid run id")
}

/// Run `run_name` as a claimant: a fresh grant of an hour, an agent's
/// level, the lease given (`None`: the store's default).
pub fn claimant(run_name: &str, lease: Option<std::time::Duration>) -> corkboard_board::Claimant {
    corkboard_board::Claimant {
        run: run(run_name),
        grant: GrantId::generate(),
        expires_at: Timestamp::now().plus_millis(3_600_000),
        lease,
        integrity: corkboard_board::Integrity::Agent,
    }
}

pub fn author(run_name: &str) -> Author {
    Author {
        kind: corkboard_board::AuthorKind::Run,
        run: run(run_name),
        grant: None,
        integrity: corkboard_board::Integrity::Agent,
    }
}

pub fn title(text: &str) -> Title {
    Title::parse(text).expect("a valid title")
}

pub fn labels(values: &[&str]) -> Labels {
    Labels::parse(values.iter().copied()).expect("valid labels")
}

pub fn label(value: &str) -> Label {
    Label::parse(value).expect("a valid label")
}

pub fn key(value: &str) -> IdempotencyKey {
    IdempotencyKey::parse(value).expect("a valid idempotency key")
}

pub fn new_issue(text: &str) -> NewIssue {
    NewIssue::new(title(text))
}

/// A request with every field set away from its default.
/// Files `new` on `t` as run `run-a`, and gives its id.
pub async fn create_as_run_a<S: corkboard_board::BoardStore + ?Sized>(
    store: &S,
    t: &TenantId,
    new: NewIssue,
) -> IssueId {
    store
        .create_issue(t, &author("run-a"), new, None)
        .await
        .expect("create")
        .issue
        .id
}

pub fn full_issue(text: &str) -> NewIssue {
    NewIssue {
        title: title(text),
        body: Body::parse("Steps:\n1. run it\n2. ✨ watch it fail").expect("a valid body"),
        state: IssueState::Todo,
        labels: labels(&["bug", "area:api"]),
        priority: Priority::High,
        ..NewIssue::new(title(text))
    }
}

pub fn comment(issue: &IssueId, text: &str) -> NewComment {
    NewComment {
        issue: issue.clone(),
        body: CommentBody::parse(text).expect("a valid comment body"),
    }
}

pub fn title_patch(text: &str) -> IssuePatch {
    IssuePatch {
        title: Some(title(text)),
        ..IssuePatch::default()
    }
}

/// A patch that moves an issue to `state` and changes nothing else.
pub fn state_patch(state: IssueState) -> IssuePatch {
    IssuePatch {
        state: Some(state),
        ..IssuePatch::default()
    }
}

/// A random 64-hex-digit string, shaped like a SHA-256 token hash.
pub fn token_hash() -> String {
    format!(
        "{:032x}{:032x}",
        u128::from(ulid::Ulid::new()),
        u128::from(ulid::Ulid::new())
    )
}

/// A grant of every capability, created at `created_at`, expiring `ttl_ms` later.
pub fn grant(tenant: &TenantId, run_name: &str, created_at: Timestamp, ttl_ms: i64) -> Grant {
    Grant {
        id: GrantId::generate(),
        tenant: tenant.clone(),
        run: run(run_name),
        capabilities: Capabilities::parse_csv("issues:read,issues:create")
            .expect("valid capabilities"),
        created_at,
        expires_at: created_at.plus_millis(ttl_ms),
        created_by: "contract-admin".to_owned(),
        budgets: Default::default(),
        min_integrity: None,
    }
}

pub fn audit_record(
    tenant: &TenantId,
    run_name: &str,
    at_millis: i64,
    issue: Option<&IssueId>,
) -> AuditRecord {
    AuditRecord {
        at: Timestamp::from_millis(at_millis),
        tenant: tenant.clone(),
        run: run(run_name),
        grant: GrantId::generate(),
        tool: "update_issue".to_owned(),
        outcome: AuditOutcome::ToolError,
        latency_micros: 1234,
        arguments_hash: ArgumentsHash::of(at_millis.to_string().as_bytes()),
        definition_hash: None,
        issue: issue.cloned(),
    }
}

#[track_caller]
pub fn assert_not_found<T: Debug>(result: Result<T, StoreError>, what: &str) {
    match result {
        Err(StoreError::NotFound { .. }) => {}
        other => panic!("{what}: expected NotFound, got {other:?}"),
    }
}

#[track_caller]
pub fn assert_invalid<T: Debug>(result: Result<T, StoreError>, field: &str, what: &str) {
    match result {
        Err(StoreError::Invalid(err)) if err.field == field => {}
        other => panic!("{what}: expected Invalid({field}), got {other:?}"),
    }
}

/// Ids sorted newest first, the order every list returns.
pub fn newest_first(mut ids: Vec<IssueId>) -> Vec<IssueId> {
    ids.sort_by(|a, b| b.cmp(a));
    ids
}
