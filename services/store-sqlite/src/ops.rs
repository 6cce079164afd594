//! The SQL of every operation, on a plain connection. Reads run on a pooled
//! read connection (see [`crate::readers`] for their transactions); writes
//! run on the writer's connection inside its group transaction (see
//! [`crate::writer`]), each in its own savepoint.

use crate::codec::{
    AUDIT_COLUMNS, COMMENT_COLUMNS, GRANT_COLUMNS, ISSUE_COLUMN_COUNT, ISSUE_COLUMNS,
    audit_from_row, comment_from_row, comment_from_row_at, grant_from_row, issue_from_row,
    join_labels, to_sql_u64,
};
use crate::error::OpError;
use crate::query::{self, json_array};
use corkboard_board::{
    AuditQuery, AuditRecord, Author, Comment, CommentAdded, CommentId, Created, Grant, GrantEvent,
    GrantId, IdempotencyKey, Issue, IssueId, IssuePatch, ListQuery, NewComment, NewIssue, Page,
    RunId, StoreError, TenantId, Timestamp, Upstream, UpstreamName, ValidationError, limits,
};
use rusqlite::{Connection, OptionalExtension, params, params_from_iter};
use std::collections::HashMap;
use std::sync::LazyLock;

// ---------------------------------------------------------------- reads

// The statements of the point reads, built once: they run on every request,
// and their text is the statement cache's key.
/// An issue and its comments in one statement (so one read snapshot, with
/// no explicit transaction): the issue's columns on every row, then a
/// comment's, or NULLs for an issue without comments.
static ISSUE_WITH_COMMENTS: LazyLock<String> = LazyLock::new(|| {
    let qualified = |alias: &str, columns: &str| {
        columns
            .split(',')
            .map(|c| format!("{alias}.{}", c.trim()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "SELECT {}, {} FROM issues i LEFT JOIN comments c \
         ON c.tenant = i.tenant AND c.issue_id = i.id \
         WHERE i.tenant = ?1 AND i.id = ?2 ORDER BY c.seq",
        qualified("i", ISSUE_COLUMNS),
        qualified("c", COMMENT_COLUMNS)
    )
});
static GRANT_BY_ID: LazyLock<String> =
    LazyLock::new(|| format!("SELECT {GRANT_COLUMNS} FROM grants WHERE id = ?1"));
static GRANT_BY_TOKEN_HASH: LazyLock<String> =
    LazyLock::new(|| format!("SELECT {GRANT_COLUMNS} FROM grants WHERE token_hash = ?1"));

fn issue_not_found(id: &IssueId) -> OpError {
    OpError::Store(StoreError::not_found(format!("issue {id}")))
}

fn grant_not_found(id: &GrantId) -> OpError {
    OpError::Store(StoreError::not_found(format!("grant {id}")))
}

/// The issue with its comments, or `None` (unknown here, or another tenant's).
pub(crate) fn load_issue(
    conn: &Connection,
    tenant: &TenantId,
    id: &IssueId,
) -> Result<Option<Issue>, OpError> {
    let mut stmt = conn.prepare_cached(&ISSUE_WITH_COMMENTS)?;
    let mut rows = stmt.query(params![tenant.as_str(), id.as_str()])?;
    let mut issue: Option<Issue> = None;
    while let Some(row) = rows.next()? {
        let issue = match &mut issue {
            Some(issue) => issue,
            None => issue.insert(issue_from_row(tenant, row)?),
        };
        // The comment's id is NULL when the issue has no comments.
        if row.get_ref(ISSUE_COLUMN_COUNT + 1)? != rusqlite::types::ValueRef::Null {
            issue
                .comments
                .push(comment_from_row_at(row, ISSUE_COLUMN_COUNT)?.1);
        }
    }
    Ok(issue)
}

pub(crate) fn get_issue(
    conn: &Connection,
    tenant: &TenantId,
    id: &IssueId,
) -> Result<Issue, OpError> {
    load_issue(conn, tenant, id)?.ok_or_else(|| issue_not_found(id))
}

pub(crate) fn list_issues(
    conn: &Connection,
    tenant: &TenantId,
    query: &ListQuery,
) -> Result<Page, OpError> {
    let sql = query::list_issues(tenant, query);
    let mut stmt = conn.prepare_cached(&sql.text)?;
    let mut rows = stmt.query(params_from_iter(sql.params.iter()))?;
    let limit = query.limit as usize;
    let mut issues = Vec::with_capacity(limit.min(64) + 1);
    while let Some(row) = rows.next()? {
        issues.push(issue_from_row(tenant, row)?);
    }
    let next_cursor = if issues.len() > limit {
        issues.truncate(limit);
        issues.last().map(|i| i.id.clone())
    } else {
        None
    };
    attach_comments(conn, tenant, &mut issues)?;
    Ok(Page {
        issues,
        next_cursor,
    })
}

/// Fills in the comments of a page of issues with one query.
fn attach_comments(
    conn: &Connection,
    tenant: &TenantId,
    issues: &mut [Issue],
) -> Result<(), OpError> {
    if issues.is_empty() {
        return Ok(());
    }
    let position: HashMap<String, usize> = issues
        .iter()
        .enumerate()
        .map(|(i, issue)| (issue.id.as_str().to_owned(), i))
        .collect();
    let ids = json_array(issues.iter().map(|i| i.id.as_str()));
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {COMMENT_COLUMNS} FROM comments \
         WHERE tenant = ?1 AND issue_id IN (SELECT value FROM json_each(?2)) ORDER BY seq"
    ))?;
    let mut rows = stmt.query(params![tenant.as_str(), ids])?;
    while let Some(row) = rows.next()? {
        let (issue_id, comment) = comment_from_row(row)?;
        if let Some(&i) = position.get(&issue_id) {
            issues[i].comments.push(comment);
        }
    }
    Ok(())
}

pub(crate) fn load_grant(conn: &Connection, id: &GrantId) -> Result<Option<GrantEvent>, OpError> {
    let mut stmt = conn.prepare_cached(&GRANT_BY_ID)?;
    let mut rows = stmt.query(params![id.as_str()])?;
    match rows.next()? {
        Some(row) => Ok(Some(grant_from_row(row)?)),
        None => Ok(None),
    }
}

pub(crate) fn get_grant(conn: &Connection, id: &GrantId) -> Result<GrantEvent, OpError> {
    load_grant(conn, id)?.ok_or_else(|| grant_not_found(id))
}

pub(crate) fn grant_by_token_hash(
    conn: &Connection,
    token_hash: &str,
) -> Result<Option<GrantEvent>, OpError> {
    let mut stmt = conn.prepare_cached(&GRANT_BY_TOKEN_HASH)?;
    let mut rows = stmt.query(params![token_hash])?;
    match rows.next()? {
        Some(row) => Ok(Some(grant_from_row(row)?)),
        None => Ok(None),
    }
}

pub(crate) fn list_grants(
    conn: &Connection,
    tenant: &TenantId,
    run: Option<&RunId>,
    cursor: Option<&GrantId>,
    limit: u32,
) -> Result<Vec<GrantEvent>, OpError> {
    // One statement text per filter combination, so the run index is usable.
    let mut text = format!("SELECT {GRANT_COLUMNS} FROM grants WHERE tenant = ?");
    let mut args: Vec<&str> = vec![tenant.as_str()];
    if let Some(run) = run {
        text.push_str(" AND run = ?");
        args.push(run.as_str());
    }
    if let Some(cursor) = cursor {
        text.push_str(" AND id < ?");
        args.push(cursor.as_str());
    }
    text.push_str(" ORDER BY id DESC LIMIT ?");
    let mut stmt = conn.prepare_cached(&text)?;
    let mut index = 0;
    for arg in &args {
        index += 1;
        stmt.raw_bind_parameter(index, arg)?;
    }
    stmt.raw_bind_parameter(index + 1, i64::from(limit))?;
    let mut rows = stmt.raw_query();
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.push(grant_from_row(row)?);
    }
    Ok(out)
}

pub(crate) fn active_grants(conn: &Connection, now: Timestamp) -> Result<Vec<GrantEvent>, OpError> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {GRANT_COLUMNS} FROM grants \
         WHERE revoked_at IS NULL AND expires_at > ?1 ORDER BY id"
    ))?;
    let mut rows = stmt.query(params![now.as_millis()])?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.push(grant_from_row(row)?);
    }
    Ok(out)
}

pub(crate) fn revoked_grants(
    conn: &Connection,
    now: Timestamp,
) -> Result<Vec<GrantEvent>, OpError> {
    // No index: it runs when a registry is (re)verified, not per request.
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {GRANT_COLUMNS} FROM grants \
         WHERE revoked_at IS NOT NULL AND expires_at > ?1 ORDER BY id"
    ))?;
    let mut rows = stmt.query(params![now.as_millis()])?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.push(grant_from_row(row)?);
    }
    Ok(out)
}

pub(crate) fn list_audit(
    conn: &Connection,
    tenant: &TenantId,
    query: &AuditQuery,
) -> Result<Vec<AuditRecord>, OpError> {
    let mut text = format!("SELECT {AUDIT_COLUMNS} FROM audit WHERE tenant = ?");
    let mut args: Vec<&str> = vec![tenant.as_str()];
    if let Some(run) = &query.run {
        text.push_str(" AND run = ?");
        args.push(run.as_str());
    }
    if let Some(issue) = &query.issue {
        text.push_str(" AND issue_id = ?");
        args.push(issue.as_str());
    }
    text.push_str(" ORDER BY at DESC, seq DESC LIMIT ?");
    let mut stmt = conn.prepare_cached(&text)?;
    let mut index = 0;
    for arg in &args {
        index += 1;
        stmt.raw_bind_parameter(index, arg)?;
    }
    stmt.raw_bind_parameter(index + 1, i64::from(query.limit))?;
    let mut rows = stmt.raw_query();
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.push(audit_from_row(row)?);
    }
    Ok(out)
}

// ---------------------------------------------------------------- writes

/// One write, as queued for the writer thread. Owned and re-runnable: when a
/// whole group has to be retried (the file was busy), each op runs again
/// from scratch, so ids and timestamps are made during execution.
#[derive(Debug)]
pub(crate) enum WriteOp {
    CreateIssue {
        tenant: TenantId,
        author: Author,
        new: NewIssue,
        key: Option<IdempotencyKey>,
        fingerprint: String,
    },
    UpdateIssue {
        tenant: TenantId,
        id: IssueId,
        patch: IssuePatch,
        expected_version: Option<u64>,
    },
    AddComment {
        tenant: TenantId,
        author: Author,
        comment: NewComment,
        key: Option<IdempotencyKey>,
        fingerprint: String,
    },
    RecordGrant {
        grant: Grant,
        token_hash: String,
    },
    RecordRevocation {
        id: GrantId,
        by: String,
        at: Timestamp,
    },
    AppendAudit {
        records: Vec<AuditRecord>,
    },
    PutUpstream {
        upstream: Upstream,
    },
    DeleteUpstream {
        tenant: TenantId,
        name: UpstreamName,
    },
}

impl WriteOp {
    /// The operation's name, for diagnostics (never its content).
    /// Audit records: written durably, but they need not wait for their
    /// own fsync (see the writer's group durability).
    pub(crate) fn is_audit(&self) -> bool {
        matches!(self, Self::AppendAudit { .. })
    }

    pub(crate) fn name(&self) -> &'static str {
        match self {
            Self::CreateIssue { .. } => "create_issue",
            Self::UpdateIssue { .. } => "update_issue",
            Self::AddComment { .. } => "add_comment",
            Self::RecordGrant { .. } => "record_grant",
            Self::RecordRevocation { .. } => "record_revocation",
            Self::AppendAudit { .. } => "append_audit",
            Self::PutUpstream { .. } => "put_upstream",
            Self::DeleteUpstream { .. } => "delete_upstream",
        }
    }
}

/// What a write answers.
#[derive(Debug)]
pub(crate) enum WriteOutput {
    Created(Created),
    Updated(Issue),
    Commented(CommentAdded),
    Recorded,
    Revoked(GrantEvent),
    Appended,
}

pub(crate) fn execute(conn: &Connection, op: &WriteOp) -> Result<WriteOutput, OpError> {
    match op {
        WriteOp::CreateIssue {
            tenant,
            author,
            new,
            key,
            fingerprint,
        } => create_issue(conn, tenant, author, new, key.as_ref(), fingerprint)
            .map(WriteOutput::Created),
        WriteOp::UpdateIssue {
            tenant,
            id,
            patch,
            expected_version,
        } => update_issue(conn, tenant, id, patch, *expected_version).map(WriteOutput::Updated),
        WriteOp::AddComment {
            tenant,
            author,
            comment,
            key,
            fingerprint,
        } => add_comment(conn, tenant, author, comment, key.as_ref(), fingerprint)
            .map(WriteOutput::Commented),
        WriteOp::RecordGrant { grant, token_hash } => {
            record_grant(conn, grant, token_hash).map(|()| WriteOutput::Recorded)
        }
        WriteOp::RecordRevocation { id, by, at } => {
            record_revocation(conn, id, by, *at).map(WriteOutput::Revoked)
        }
        WriteOp::AppendAudit { records } => {
            append_audit(conn, records).map(|()| WriteOutput::Appended)
        }
        WriteOp::PutUpstream { upstream } => {
            crate::upstreams::put_upstream(conn, upstream).map(|()| WriteOutput::Recorded)
        }
        WriteOp::DeleteUpstream { tenant, name } => {
            crate::upstreams::delete_upstream(conn, tenant, name).map(|()| WriteOutput::Recorded)
        }
    }
}

/// What an idempotency key points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyKind {
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

struct KeyRecord {
    fingerprint: String,
    issue_id: String,
    comment_id: Option<String>,
}

fn find_key(
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

#[allow(clippy::too_many_arguments)]
fn remember_key(
    conn: &Connection,
    tenant: &TenantId,
    run: &RunId,
    key: &IdempotencyKey,
    kind: KeyKind,
    fingerprint: &str,
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
        key.as_str(),
        kind.as_str(),
        fingerprint,
        issue.as_str(),
        comment.map(CommentId::as_str),
        now.as_millis(),
    ])?;
    Ok(())
}

/// A key found with another request's fingerprint, or pointing at a row
/// that is gone.
fn replayed_issue_id(record: &KeyRecord, fingerprint: &str) -> Result<IssueId, OpError> {
    if record.fingerprint != fingerprint {
        return Err(OpError::Store(StoreError::IdempotencyConflict));
    }
    IssueId::parse(record.issue_id.as_str()).map_err(|e| {
        OpError::Store(StoreError::Internal(format!(
            "idempotency record points at an invalid issue id: {e}"
        )))
    })
}

fn insert_labels(conn: &Connection, issue: &Issue) -> Result<(), OpError> {
    if issue.labels.is_empty() {
        return Ok(());
    }
    let mut stmt = conn
        .prepare_cached("INSERT INTO issue_labels (tenant, issue_id, label) VALUES (?1, ?2, ?3)")?;
    for label in issue.labels.iter() {
        stmt.execute(params![
            issue.tenant.as_str(),
            issue.id.as_str(),
            label.as_str()
        ])?;
    }
    Ok(())
}

fn create_issue(
    conn: &Connection,
    tenant: &TenantId,
    author: &Author,
    new: &NewIssue,
    key: Option<&IdempotencyKey>,
    fingerprint: &str,
) -> Result<Created, OpError> {
    if let Some(key) = key
        && let Some(record) = find_key(conn, tenant, &author.run, key, KeyKind::Issue)?
    {
        let id = replayed_issue_id(&record, fingerprint)?;
        // The current issue, not a snapshot: the caller retried and wants
        // to see where the issue stands now.
        let issue = get_issue(conn, tenant, &id)?;
        return Ok(Created {
            issue,
            replayed: true,
        });
    }
    let now = Timestamp::now();
    let issue = new.clone().into_issue(tenant.clone(), author.clone(), now);
    let mut stmt = conn.prepare_cached(
        "INSERT INTO issues (tenant, id, title, title_lower, body, state, priority, labels, \
         author_run, author_grant, created_at, updated_at, version) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
    )?;
    stmt.execute(params![
        tenant.as_str(),
        issue.id.as_str(),
        issue.title.as_str(),
        issue.title.as_str().to_lowercase(),
        issue.body.as_str(),
        issue.state.as_str(),
        issue.priority.as_str(),
        join_labels(&issue.labels),
        issue.author.run.as_str(),
        issue.author.grant.as_ref().map(GrantId::as_str),
        issue.created_at.as_millis(),
        issue.updated_at.as_millis(),
        to_sql_u64(issue.version),
    ])?;
    insert_labels(conn, &issue)?;
    if let Some(key) = key {
        remember_key(
            conn,
            tenant,
            &author.run,
            key,
            KeyKind::Issue,
            fingerprint,
            &issue.id,
            None,
            now,
        )?;
    }
    Ok(Created {
        issue,
        replayed: false,
    })
}

fn update_issue(
    conn: &Connection,
    tenant: &TenantId,
    id: &IssueId,
    patch: &IssuePatch,
    expected_version: Option<u64>,
) -> Result<Issue, OpError> {
    // Read-modify-write under the group's write lock: nobody else (no other
    // connection, no other process) can change the row in between.
    let mut issue = get_issue(conn, tenant, id)?;
    if let Some(expected) = expected_version
        && expected != issue.version
    {
        return Err(OpError::Store(StoreError::VersionConflict {
            expected,
            actual: issue.version,
        }));
    }
    let previous_version = issue.version;
    let labels_changed = patch.labels.as_ref().is_some_and(|l| *l != issue.labels);
    // Never move updated_at backwards, even if another process's clock is ahead.
    let now = Timestamp::now().max(issue.updated_at);
    patch.clone().apply_to(&mut issue, now);
    let mut stmt = conn.prepare_cached(
        "UPDATE issues SET title = ?1, title_lower = ?2, body = ?3, state = ?4, priority = ?5, \
         labels = ?6, updated_at = ?7, version = ?8 \
         WHERE tenant = ?9 AND id = ?10 AND version = ?11",
    )?;
    let changed = stmt.execute(params![
        issue.title.as_str(),
        issue.title.as_str().to_lowercase(),
        issue.body.as_str(),
        issue.state.as_str(),
        issue.priority.as_str(),
        join_labels(&issue.labels),
        issue.updated_at.as_millis(),
        to_sql_u64(issue.version),
        tenant.as_str(),
        id.as_str(),
        to_sql_u64(previous_version),
    ])?;
    if changed != 1 {
        return Err(OpError::Store(StoreError::Internal(format!(
            "issue {id} changed under the write lock"
        ))));
    }
    if labels_changed {
        let mut stmt =
            conn.prepare_cached("DELETE FROM issue_labels WHERE tenant = ?1 AND issue_id = ?2")?;
        stmt.execute(params![tenant.as_str(), id.as_str()])?;
        insert_labels(conn, &issue)?;
    }
    Ok(issue)
}

fn add_comment(
    conn: &Connection,
    tenant: &TenantId,
    author: &Author,
    new: &NewComment,
    key: Option<&IdempotencyKey>,
    fingerprint: &str,
) -> Result<CommentAdded, OpError> {
    if let Some(key) = key
        && let Some(record) = find_key(conn, tenant, &author.run, key, KeyKind::Comment)?
    {
        let issue_id = replayed_issue_id(&record, fingerprint)?;
        let issue = get_issue(conn, tenant, &issue_id)?;
        let comment = issue
            .comments
            .iter()
            .find(|c| Some(c.id.as_str()) == record.comment_id.as_deref())
            .cloned()
            .ok_or_else(|| {
                OpError::Store(StoreError::Internal(format!(
                    "the comment remembered for this idempotency key is missing from issue {issue_id}"
                )))
            })?;
        return Ok(CommentAdded {
            issue,
            comment,
            replayed: true,
        });
    }
    // The count and the insert run in the writer's one transaction, so
    // racing comments cannot pass the limit together.
    let mut count =
        conn.prepare_cached("SELECT COUNT(*) FROM comments WHERE tenant = ?1 AND issue_id = ?2")?;
    let existing: i64 = count.query_row(params![tenant.as_str(), new.issue.as_str()], |row| {
        row.get(0)
    })?;
    if usize::try_from(existing).unwrap_or(usize::MAX) >= limits::COMMENTS_MAX {
        return Err(OpError::Store(StoreError::CommentLimit {
            issue: new.issue.clone(),
            max: limits::COMMENTS_MAX,
        }));
    }
    let now = Timestamp::now();
    let mut bump = conn.prepare_cached(
        "UPDATE issues SET version = version + 1, updated_at = max(updated_at, ?1) \
         WHERE tenant = ?2 AND id = ?3",
    )?;
    if bump.execute(params![
        now.as_millis(),
        tenant.as_str(),
        new.issue.as_str()
    ])? == 0
    {
        return Err(issue_not_found(&new.issue));
    }
    let comment = Comment {
        id: CommentId::generate(),
        body: new.body.clone(),
        author: author.clone(),
        created_at: now,
    };
    let mut insert = conn.prepare_cached(
        "INSERT INTO comments (tenant, issue_id, id, body, author_run, author_grant, created_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?;
    insert.execute(params![
        tenant.as_str(),
        new.issue.as_str(),
        comment.id.as_str(),
        comment.body.as_str(),
        comment.author.run.as_str(),
        comment.author.grant.as_ref().map(GrantId::as_str),
        now.as_millis(),
    ])?;
    if let Some(key) = key {
        remember_key(
            conn,
            tenant,
            &author.run,
            key,
            KeyKind::Comment,
            fingerprint,
            &new.issue,
            Some(&comment.id),
            now,
        )?;
    }
    let issue = get_issue(conn, tenant, &new.issue)?;
    Ok(CommentAdded {
        issue,
        comment,
        replayed: false,
    })
}

fn record_grant(conn: &Connection, grant: &Grant, token_hash: &str) -> Result<(), OpError> {
    if let Some(existing) = load_grant(conn, &grant.id)? {
        // A retry of the same record (after an ambiguous failure) is fine;
        // anything else under the same id is a caller bug.
        if existing.grant == *grant && existing.token_hash == token_hash {
            return Ok(());
        }
        return Err(OpError::Store(StoreError::Invalid(ValidationError::new(
            "grant_id",
            "a different grant is already recorded under this id",
        ))));
    }
    if grant_by_token_hash(conn, token_hash)?.is_some() {
        return Err(OpError::Store(StoreError::Invalid(ValidationError::new(
            "token_hash",
            "this token is already recorded for another grant",
        ))));
    }
    let mut stmt = conn.prepare_cached(
        "INSERT INTO grants (id, tenant, run, capabilities, created_at, expires_at, created_by, \
         token_hash, revoked_at, revoked_by) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, NULL, NULL)",
    )?;
    stmt.execute(params![
        grant.id.as_str(),
        grant.tenant.as_str(),
        grant.run.as_str(),
        grant.capabilities.to_csv(),
        grant.created_at.as_millis(),
        grant.expires_at.as_millis(),
        grant.created_by,
        token_hash,
    ])?;
    Ok(())
}

fn record_revocation(
    conn: &Connection,
    id: &GrantId,
    by: &str,
    at: Timestamp,
) -> Result<GrantEvent, OpError> {
    // First revocation wins: a later one matches no row and changes nothing.
    let mut stmt = conn.prepare_cached(
        "UPDATE grants SET revoked_at = ?1, revoked_by = ?2 WHERE id = ?3 AND revoked_at IS NULL",
    )?;
    stmt.execute(params![at.as_millis(), by, id.as_str()])?;
    get_grant(conn, id)
}

fn append_audit(conn: &Connection, records: &[AuditRecord]) -> Result<(), OpError> {
    let mut stmt = conn.prepare_cached(
        "INSERT INTO audit (at, tenant, run, grant_id, tool, outcome, latency_micros, \
         arguments_hash, issue_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )?;
    for record in records {
        stmt.execute(params![
            record.at.as_millis(),
            record.tenant.as_str(),
            record.run.as_str(),
            record.grant.as_str(),
            record.tool,
            record.outcome.as_str(),
            to_sql_u64(record.latency_micros),
            record.arguments_hash.as_str(),
            record.issue.as_ref().map(IssueId::as_str),
        ])?;
    }
    Ok(())
}
