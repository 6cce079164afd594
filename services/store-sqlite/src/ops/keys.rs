//! Idempotency keys (`idempotency_keys`): what a run's retried create or
//! comment finds instead of writing twice. Read and written inside the
//! write that uses the key, under the group's write lock, so two retries
//! racing each other (from any process) cannot both write.

use crate::error::OpError;
use corkboard_board::{CommentId, IdempotencyKey, IssueId, RunId, StoreError, TenantId, Timestamp};
use rusqlite::{Connection, OptionalExtension, params};

/// What an idempotency key points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyKind {
    Issue,
    Comment,
}

impl KeyKind {
    fn as_str(self) -> &'static str {
        match self {
            Self::Issue => "issue",
            Self::Comment => "comment",
        }
    }
}

/// A write's idempotency key with the fingerprint of its request (the
/// key's record keeps it, and a retry must bring the same). Made only for
/// a keyed write: the fingerprint serialises and hashes the whole request
/// (about 16,000 instructions a create), which a write without a key never
/// reads.
#[derive(Debug)]
pub(crate) struct KeyedRequest {
    pub key: IdempotencyKey,
    pub fingerprint: String,
}

impl KeyedRequest {
    /// `key` with the request's fingerprint, or `None` (and no fingerprint
    /// made) without one.
    pub(crate) fn new(
        key: Option<&IdempotencyKey>,
        fingerprint: impl FnOnce() -> String,
    ) -> Option<Self> {
        key.map(|key| Self {
            key: key.clone(),
            fingerprint: fingerprint(),
        })
    }
}

/// A key's stored record.
pub(crate) struct KeyRecord {
    fingerprint: String,
    issue_id: String,
    /// The comment a comment's key points at.
    pub(crate) comment_id: Option<String>,
}

/// The record of `run`'s `key` of this kind, if it was used.
pub(crate) fn find_key(
    conn: &Connection,
    tenant: &TenantId,
    run: &RunId,
    key: &IdempotencyKey,
    kind: KeyKind,
) -> Result<Option<KeyRecord>, OpError> {
    let mut stmt = conn.prepare_cached(
        "SELECT fingerprint, issue_id, comment_id FROM idempotency_keys \
         WHERE tenant = ?1 AND run = ?2 AND key = ?3 AND kind = ?4",
    )?;
    Ok(stmt
        .query_row(
            params![tenant.as_str(), run.as_str(), key.as_str(), kind.as_str()],
            |row| {
                Ok(KeyRecord {
                    fingerprint: row.get(0)?,
                    issue_id: row.get(1)?,
                    comment_id: row.get(2)?,
                })
            },
        )
        .optional()?)
}

/// Whether `run` used `key` for a create (or, with `comment`, a comment).
pub(crate) fn idempotency_key_used(
    conn: &Connection,
    tenant: &TenantId,
    run: &RunId,
    key: &IdempotencyKey,
    comment: bool,
) -> Result<bool, OpError> {
    let kind = if comment {
        KeyKind::Comment
    } else {
        KeyKind::Issue
    };
    Ok(find_key(conn, tenant, run, key, kind)?.is_some())
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn remember_key(
    conn: &Connection,
    tenant: &TenantId,
    run: &RunId,
    keyed: &KeyedRequest,
    kind: KeyKind,
    issue: &IssueId,
    comment: Option<&CommentId>,
    now: Timestamp,
) -> Result<(), OpError> {
    let mut stmt = conn.prepare_cached(
        "INSERT INTO idempotency_keys \
         (tenant, run, key, kind, fingerprint, issue_id, comment_id, created_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?;
    stmt.execute(params![
        tenant.as_str(),
        run.as_str(),
        keyed.key.as_str(),
        kind.as_str(),
        keyed.fingerprint,
        issue.as_str(),
        comment.map(CommentId::as_str),
        now.as_millis(),
    ])?;
    Ok(())
}

/// A key found with another request's fingerprint, or pointing at a row
/// that is gone.
pub(crate) fn replayed_issue_id(record: &KeyRecord, fingerprint: &str) -> Result<IssueId, OpError> {
    if record.fingerprint != fingerprint {
        return Err(OpError::Store(StoreError::IdempotencyConflict));
    }
    IssueId::parse(record.issue_id.as_str()).map_err(|e| {
        OpError::Store(StoreError::Internal(format!(
            "idempotency record points at an invalid issue id: {e}"
        )))
    })
}
