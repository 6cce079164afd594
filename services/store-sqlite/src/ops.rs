//! The SQL of every operation, on a plain connection. Reads run on a pooled
//! read connection (see [`crate::readers`] for their transactions); writes
//! run on the writer's connection inside its group transaction (see
//! [`crate::writer`]), each in its own savepoint.

use crate::codec::{
    AUDIT_COLUMNS, COMMENT_COLUMNS, GRANT_COLUMNS, ISSUE_COLUMN_COUNT, ISSUE_COLUMNS,
    audit_from_row, comment_from_row, comment_from_row_at, grant_from_row, issue_from_row,
    join_ids, join_labels, qualified, to_sql_u64,
};
use crate::error::OpError;
use crate::query::{self, json_array};
use crate::readers::snapshot;
use crate::search_writes;
use corkboard_board::{
    AuditEntry, AuditQuery, AuditRecord, Author, BudgetKind, ClaimCheck, Claimant, Comment,
    CommentAdded, CommentFacts, CommentId, CommentWindow, CreateOutcome, Created, Grant,
    GrantEvent, GrantId, IdempotencyKey, Issue, IssueId, IssuePatch, IssueState, IssueView,
    ListQuery, NewComment, NewIssue, Page, ParentChain, RunId, SearchPage, SearchQuery,
    SimilarIssue, SimilarRanking, StoreError, TenantId, Timestamp, Title, Upstream, UpstreamName,
    ValidationError, check_release, is_open, limits, normalized, relation_limits, term_set,
};
use rusqlite::{Connection, OptionalExtension, params, params_from_iter};
use std::collections::{BTreeSet, HashMap};
use std::sync::LazyLock;

// ---------------------------------------------------------------- reads

// The statements of the point reads, built once: they run on every request,
// and their text is the statement cache's key.
/// An issue and its comments in one statement (so one read snapshot, with
/// no explicit transaction): the issue's columns on every row, then a
/// comment's, or NULLs for an issue without comments.
static ISSUE_WITH_COMMENTS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {}, {} FROM issues i LEFT JOIN comments c \
         ON c.tenant = i.tenant AND c.issue_id = i.id \
         WHERE i.tenant = ?1 AND i.id = ?2 ORDER BY c.seq",
        qualified("i", ISSUE_COLUMNS),
        qualified("c", COMMENT_COLUMNS)
    )
});
/// An issue's own row, without its comments (read as a window, see
/// [`comment_window`]).
static ISSUE_ONLY: LazyLock<String> =
    LazyLock::new(|| format!("SELECT {ISSUE_COLUMNS} FROM issues WHERE tenant = ?1 AND id = ?2"));
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

/// The issue and the relations others hold to it, in one snapshot, with
/// only the comments of `window`: the comments are counted and the window
/// read newest first with a LIMIT on the `comments_by_issue` index, and
/// stepping stops once the window's byte bound is exceeded, so no comment
/// outside it is read.
pub(crate) fn get_issue_view(
    conn: &Connection,
    tenant: &TenantId,
    id: &IssueId,
    window: &CommentWindow,
) -> Result<IssueView, OpError> {
    snapshot(conn, |conn| {
        let mut issue = conn
            .prepare_cached(&ISSUE_ONLY)?
            .query_row(params![tenant.as_str(), id.as_str()], |row| {
                Ok(issue_from_row(tenant, row))
            })
            .optional()?
            .ok_or_else(|| issue_not_found(id))??;
        let (comments, facts) = comment_window(conn, tenant, id, window)?;
        issue.comments = comments;
        // One more than shown, so the view knows whether there are more.
        let fetch = (relation_limits::INVERSE_MAX + 1) as i64;
        let ids = |sql: &str| -> Result<Vec<IssueId>, OpError> {
            let mut stmt = conn.prepare_cached(sql)?;
            let mut rows = stmt.query(params![tenant.as_str(), id.as_str(), fetch])?;
            let mut out = Vec::new();
            while let Some(row) = rows.next()? {
                let text: String = row.get(0)?;
                out.push(IssueId::parse(text).map_err(|e| {
                    OpError::Store(StoreError::Internal(format!(
                        "a stored relation of issue {id} is invalid: {e}"
                    )))
                })?);
            }
            Ok(out)
        };
        let children = ids(
            "SELECT id FROM issues WHERE tenant = ?1 AND parent = ?2 ORDER BY id DESC LIMIT ?3",
        )?;
        let blocks = ids(
            "SELECT issue_id FROM issue_blocked_by WHERE tenant = ?1 AND blocker_id = ?2 \
             ORDER BY issue_id DESC LIMIT ?3",
        )?;
        Ok(IssueView::new(issue, facts, children, blocks))
    })
}

/// The comments of `window` on issue `id` (oldest first) and their facts,
/// inside the caller's snapshot. Comments are ordered by `seq`, the order
/// they were added in.
fn comment_window(
    conn: &Connection,
    tenant: &TenantId,
    id: &IssueId,
    window: &CommentWindow,
) -> Result<(Vec<Comment>, CommentFacts), OpError> {
    let count = |below: i64| -> Result<usize, OpError> {
        let n: i64 = conn
            .prepare_cached(
                "SELECT count(*) FROM comments WHERE tenant = ?1 AND issue_id = ?2 AND seq < ?3",
            )?
            .query_row(params![tenant.as_str(), id.as_str(), below], |row| {
                row.get(0)
            })?;
        Ok(n as usize)
    };
    let total = count(i64::MAX)?;
    let below = match window.before_id() {
        None => i64::MAX,
        Some(before) => {
            let seq: Option<i64> = conn
                .prepare_cached(
                    "SELECT seq FROM comments WHERE tenant = ?1 AND id = ?2 AND issue_id = ?3",
                )?
                .query_row(
                    params![tenant.as_str(), before.as_str(), id.as_str()],
                    |row| row.get(0),
                )
                .optional()?;
            match seq {
                Some(seq) => seq,
                None => return Ok((Vec::new(), CommentFacts::unknown_before(total))),
            }
        }
    };
    let end = if below == i64::MAX {
        total
    } else {
        count(below)?
    };
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {COMMENT_COLUMNS} FROM comments \
         WHERE tenant = ?1 AND issue_id = ?2 AND seq < ?3 ORDER BY seq DESC LIMIT ?4"
    ))?;
    let mut rows = stmt.query(params![
        tenant.as_str(),
        id.as_str(),
        below,
        window.limit() as i64
    ])?;
    let (mut comments, mut bytes) = (Vec::new(), 0);
    // Checked before stepping: a row past the bound is never read.
    while window.takes_more(comments.len(), bytes) {
        let Some(row) = rows.next()? else { break };
        let comment = comment_from_row(row)?.1;
        bytes += comment.body.as_str().len();
        comments.push(comment);
    }
    comments.reverse();
    let facts = CommentFacts::new(window, total, end, comments.len());
    Ok((comments, facts))
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

/// One page of ranked hits (bm25 order, see [`query::search_issues`]),
/// with their comments and snippets. SQLite ranks every match, so the page
/// is never partial.
pub(crate) fn search_issues(
    conn: &Connection,
    tenant: &TenantId,
    query: &SearchQuery,
) -> Result<SearchPage, OpError> {
    let sql = query::search_issues(tenant, query);
    let mut stmt = conn.prepare_cached(&sql.text)?;
    let mut rows = stmt.query(params_from_iter(sql.params.iter()))?;
    let limit = query.limit as usize;
    let mut issues = Vec::with_capacity(limit + 1);
    let mut ranks = Vec::with_capacity(limit + 1);
    while let Some(row) = rows.next()? {
        issues.push(issue_from_row(tenant, row)?);
        ranks.push(row.get::<_, f64>(ISSUE_COLUMN_COUNT)?);
    }
    let next_offset = (issues.len() > limit).then(|| query.offset + query.limit);
    issues.truncate(limit);
    attach_comments(conn, tenant, &mut issues)?;
    let hits = issues
        .into_iter()
        .zip(ranks)
        // bm25 is lower-is-better and negative; hits say higher-is-better.
        .map(|(issue, rank)| query.text.hit(issue, -rank))
        .collect();
    Ok(SearchPage {
        hits,
        next_offset,
        partial: false,
    })
}

/// The open issues most like `title` (see [`query::SimilarLookup`] for
/// the candidates, `SimilarRanking` for the choice).
pub(crate) fn similar_open_issues(
    conn: &Connection,
    tenant: &TenantId,
    title: &Title,
    limit: u32,
) -> Result<Vec<SimilarIssue>, OpError> {
    let mut ranking = SimilarRanking::new(title.as_str());
    let words = ranking.words();
    if words.is_empty() {
        return Ok(Vec::new());
    }
    let lookup = query::SimilarLookup::new(tenant, words);
    let counts = {
        let sql = lookup.word_counts();
        let mut stmt = conn.prepare_cached(&sql.text)?;
        let rows = stmt.query_map(params_from_iter(sql.params.iter()), |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?))
        })?;
        rows.collect::<Result<Vec<_>, _>>()?
    };
    // A word no open title holds leaves nothing holding every word.
    if counts.len() == words.len()
        && let Some((rarest, _)) = counts.iter().min_by_key(|(word, n)| (*n, word.clone()))
    {
        let sql = lookup.all_words(rarest);
        read_similar(conn, &sql, limits::SIMILAR_ALL_CANDIDATES, &mut ranking)?;
    }
    if !counts.is_empty() && !ranking.settled(limit) {
        let sql = lookup.any_word();
        read_similar(conn, &sql, u32::MAX, &mut ranking)?;
    }
    Ok(ranking.finish(limit))
}

/// Offers the rows of one candidate statement of `similar_open_issues`
/// to `ranking`, until `every_word` of them held every word of the title
/// (the others are scored too: they share its rarest word).
fn read_similar(
    conn: &Connection,
    sql: &query::Sql,
    every_word: u32,
    ranking: &mut SimilarRanking,
) -> Result<(), OpError> {
    let mut stmt = conn.prepare_cached(&sql.text)?;
    let mut rows = stmt.query(params_from_iter(sql.params.iter()))?;
    let mut held = 0;
    while held < every_word
        && let Some(row) = rows.next()?
    {
        let id: String = row.get(0)?;
        let candidate: String = row.get(1)?;
        let state: String = row.get(2)?;
        let corrupt = |e: ValidationError| {
            OpError::Store(StoreError::Internal(format!(
                "stored issue {id} is invalid: {e}"
            )))
        };
        if ranking.offer(
            IssueId::parse(id.as_str()).map_err(corrupt)?,
            Title::parse(candidate).map_err(corrupt)?,
            IssueState::parse(&state).map_err(corrupt)?,
            Timestamp::from_millis(row.get(3)?),
        ) {
            held += 1;
        }
    }
    Ok(())
}

/// Keeps `open_title_words` and `open_title_word_counts` in step with one
/// issue, in the write's transaction: they hold the words of its title
/// while it is open and none once it is done or closed. `before` and
/// `after` are its title and state around the write (`None`: no issue
/// before, i.e. a create). Only the words that changed are touched.
fn index_open_title(
    conn: &Connection,
    tenant: &TenantId,
    id: &IssueId,
    before: Option<(&Title, IssueState)>,
    after: (&Title, IssueState),
) -> Result<(), OpError> {
    let words = |side: Option<(&Title, IssueState)>| match side {
        Some((title, state)) if is_open(state) => term_set(title.as_str()),
        _ => BTreeSet::new(),
    };
    let (old, new) = (words(before), words(Some(after)));
    if old == new {
        return Ok(());
    }
    let mut remove = conn.prepare_cached(
        "DELETE FROM open_title_words WHERE tenant = ?1 AND word = ?2 AND issue_id = ?3",
    )?;
    // Run in this order, exactly one of the two applies: the last title
    // holding the word takes its count row with it, any other lowers it
    // (lowering first would let the delete take a count just lowered to 1).
    let mut forget = conn.prepare_cached(
        "DELETE FROM open_title_word_counts WHERE tenant = ?1 AND word = ?2 AND open_titles = 1",
    )?;
    let mut lower = conn.prepare_cached(
        "UPDATE open_title_word_counts SET open_titles = open_titles - 1 \
         WHERE tenant = ?1 AND word = ?2 AND open_titles > 1",
    )?;
    for word in old.difference(&new) {
        remove.execute(params![tenant.as_str(), word, id.as_str()])?;
        forget.execute(params![tenant.as_str(), word])?;
        lower.execute(params![tenant.as_str(), word])?;
    }
    let mut add = conn.prepare_cached(
        "INSERT INTO open_title_words (tenant, word, issue_id) VALUES (?1, ?2, ?3)",
    )?;
    let mut count = conn.prepare_cached(
        "INSERT INTO open_title_word_counts (tenant, word, open_titles) VALUES (?1, ?2, 1) \
         ON CONFLICT (tenant, word) DO UPDATE SET open_titles = open_titles + 1",
    )?;
    for word in new.difference(&old) {
        add.execute(params![tenant.as_str(), word, id.as_str()])?;
        count.execute(params![tenant.as_str(), word])?;
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
        /// Write nothing when an open issue is a near match (checked in
        /// the same transaction as the insert).
        unless_similar: bool,
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
    ClaimIssue {
        tenant: TenantId,
        id: IssueId,
        claimant: Claimant,
        expected_version: Option<u64>,
    },
    ReleaseIssue {
        tenant: TenantId,
        id: IssueId,
        run: RunId,
        expected_version: Option<u64>,
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
    RecordExpiry {
        id: GrantId,
        expires_at: Timestamp,
        now: Timestamp,
    },
    SetGrantPolicy {
        tenant: TenantId,
        policy: corkboard_board::GrantPolicy,
    },
    ReserveBudget {
        id: GrantId,
        kind: BudgetKind,
        limit: u32,
    },
    ReleaseBudget {
        id: GrantId,
        kind: BudgetKind,
    },
    CreateWebhook {
        tenant: TenantId,
        new: corkboard_board::NewWebhook,
        at: Timestamp,
    },
    DeleteWebhook {
        tenant: TenantId,
        id: corkboard_board::WebhookId,
    },
    ClaimDeliveries {
        now: Timestamp,
        lease: std::time::Duration,
        limit: u32,
    },
    RecordAttempt {
        id: corkboard_board::DeliveryId,
        outcome: corkboard_board::AttemptOutcome,
    },
    AppendAudit {
        entries: Vec<AuditEntry>,
    },
    PutUpstream {
        upstream: Upstream,
    },
    DeleteUpstream {
        tenant: TenantId,
        name: UpstreamName,
    },
    /// Bench-only bulk seeding ([`crate::SqliteStore::seed_issues`]): each
    /// item is exactly a [`WriteOp::CreateIssue`] (no key, no similarity
    /// check) followed by an optional [`WriteOp::AddComment`], executed
    /// through [`execute`] as those ops are, in one transaction.
    SeedIssues {
        tenant: TenantId,
        author: Author,
        items: Vec<(NewIssue, Option<corkboard_board::CommentBody>)>,
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
            Self::ClaimIssue { .. } => "claim_issue",
            Self::ReleaseIssue { .. } => "release_issue",
            Self::RecordGrant { .. } => "record_grant",
            Self::RecordRevocation { .. } => "record_revocation",
            Self::RecordExpiry { .. } => "record_expiry",
            Self::SetGrantPolicy { .. } => "set_grant_policy",
            Self::ReserveBudget { .. } => "reserve_budget",
            Self::ReleaseBudget { .. } => "release_budget",
            Self::CreateWebhook { .. } => "create_webhook",
            Self::DeleteWebhook { .. } => "delete_webhook",
            Self::ClaimDeliveries { .. } => "claim_deliveries",
            Self::RecordAttempt { .. } => "record_attempt",
            Self::AppendAudit { .. } => "append_audit",
            Self::PutUpstream { .. } => "put_upstream",
            Self::DeleteUpstream { .. } => "delete_upstream",
            Self::SeedIssues { .. } => "seed_issues",
        }
    }
}

/// What a write answers.
#[derive(Debug)]
pub(crate) enum WriteOutput {
    Created(Created),
    /// `unless_similar` found near matches; nothing was written.
    Refused(Vec<SimilarIssue>),
    Updated(Issue),
    Commented(CommentAdded),
    Recorded,
    Revoked(GrantEvent),
    Renewed(GrantEvent),
    /// Whether a budget reservation took.
    Reserved(bool),
    Webhook(corkboard_board::Webhook),
    Claimed(Vec<corkboard_board::ClaimedDelivery>),
    Appended,
    /// The issues [`WriteOp::SeedIssues`] created, in order.
    Seeded(Vec<IssueId>),
}

pub(crate) fn execute(conn: &Connection, op: &WriteOp) -> Result<WriteOutput, OpError> {
    // The webhook outbox rows a write causes go in with it (webhooks.rs).
    let before = crate::webhooks::before(conn, op)?;
    let output = execute_op(conn, op)?;
    crate::webhooks::after(conn, op, before, &output)?;
    Ok(output)
}

fn execute_op(conn: &Connection, op: &WriteOp) -> Result<WriteOutput, OpError> {
    match op {
        WriteOp::SeedIssues {
            tenant,
            author,
            items,
        } => {
            let mut ids = Vec::with_capacity(items.len());
            for (new, comment) in items {
                let create = WriteOp::CreateIssue {
                    tenant: tenant.clone(),
                    author: author.clone(),
                    fingerprint: new.fingerprint(),
                    new: new.clone(),
                    key: None,
                    unless_similar: false,
                };
                let WriteOutput::Created(created) = execute(conn, &create)? else {
                    unreachable!("create_issue without unless_similar answers Created")
                };
                if let Some(body) = comment {
                    let comment = NewComment {
                        issue: created.issue.id.clone(),
                        body: body.clone(),
                    };
                    execute(
                        conn,
                        &WriteOp::AddComment {
                            tenant: tenant.clone(),
                            author: author.clone(),
                            fingerprint: comment.fingerprint(),
                            comment,
                            key: None,
                        },
                    )?;
                }
                ids.push(created.issue.id);
            }
            Ok(WriteOutput::Seeded(ids))
        }
        WriteOp::CreateIssue {
            tenant,
            author,
            new,
            key,
            fingerprint,
            unless_similar,
        } => create_issue(
            conn,
            tenant,
            author,
            new,
            key.as_ref(),
            fingerprint,
            *unless_similar,
        )
        .map(|outcome| match outcome {
            CreateOutcome::Created(created) => WriteOutput::Created(created),
            CreateOutcome::Refused(similar) => WriteOutput::Refused(similar),
        }),
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
        WriteOp::ClaimIssue {
            tenant,
            id,
            claimant,
            expected_version,
        } => claim_issue(conn, tenant, id, claimant, *expected_version).map(WriteOutput::Updated),
        WriteOp::ReleaseIssue {
            tenant,
            id,
            run,
            expected_version,
        } => release_issue(conn, tenant, id, run, *expected_version).map(WriteOutput::Updated),
        WriteOp::RecordGrant { grant, token_hash } => {
            record_grant(conn, grant, token_hash).map(|()| WriteOutput::Recorded)
        }
        WriteOp::RecordRevocation { id, by, at } => {
            record_revocation(conn, id, by, *at).map(WriteOutput::Revoked)
        }
        WriteOp::RecordExpiry {
            id,
            expires_at,
            now,
        } => record_expiry(conn, id, *expires_at, *now).map(WriteOutput::Renewed),
        WriteOp::SetGrantPolicy { tenant, policy } => {
            crate::policy::store_policy(conn, tenant, policy).map(|()| WriteOutput::Recorded)
        }
        WriteOp::ReserveBudget { id, kind, limit } => {
            reserve_budget(conn, id, *kind, *limit).map(WriteOutput::Reserved)
        }
        WriteOp::ReleaseBudget { id, kind } => {
            release_budget(conn, id, *kind).map(|()| WriteOutput::Recorded)
        }
        WriteOp::CreateWebhook { tenant, new, at } => {
            crate::webhooks::create_webhook(conn, tenant, new, *at).map(WriteOutput::Webhook)
        }
        WriteOp::DeleteWebhook { tenant, id } => {
            crate::webhooks::delete_webhook(conn, tenant, id).map(|()| WriteOutput::Recorded)
        }
        WriteOp::ClaimDeliveries { now, lease, limit } => {
            crate::webhooks::claim_deliveries(conn, *now, *lease, *limit).map(WriteOutput::Claimed)
        }
        WriteOp::RecordAttempt { id, outcome } => {
            crate::webhooks::record_attempt(conn, id, outcome).map(|()| WriteOutput::Recorded)
        }
        WriteOp::AppendAudit { entries } => {
            append_audit(conn, entries).map(|()| WriteOutput::Appended)
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

/// Whether `id` exists in `tenant`, and its parent: one primary-key read.
fn parent_of(
    conn: &Connection,
    tenant: &TenantId,
    id: &IssueId,
) -> Result<Option<Option<IssueId>>, OpError> {
    let mut stmt =
        conn.prepare_cached("SELECT parent FROM issues WHERE tenant = ?1 AND id = ?2")?;
    let found: Option<Option<String>> = stmt
        .query_row(params![tenant.as_str(), id.as_str()], |row| row.get(0))
        .optional()?;
    Ok(found.map(|parent| parent.and_then(|p| IssueId::parse(p).ok())))
}

/// Refuses relations to issues that do not exist in `tenant` (an issue of
/// another tenant is not found either: the lookup is by tenant and id) and
/// a parent whose chain would hold `child` (a cycle) or be too deep.
/// Runs inside the write, under the write lock.
fn check_relations(
    conn: &Connection,
    tenant: &TenantId,
    child: Option<&IssueId>,
    related: &[(&'static str, &IssueId)],
    parent: Option<&IssueId>,
) -> Result<(), OpError> {
    for (field, id) in related {
        if parent_of(conn, tenant, id)?.is_none() {
            return Err(OpError::Store(StoreError::UnknownRelated {
                field,
                id: (*id).clone(),
            }));
        }
    }
    if let Some(parent) = parent {
        let mut chain = ParentChain::new(child, parent)?;
        while let Some(ancestor) = chain.pending().cloned() {
            chain.step(parent_of(conn, tenant, &ancestor)?)?;
        }
    }
    Ok(())
}

/// Rewrites the rows the inverse relation `blocks` reads.
fn write_blocked_by(conn: &Connection, issue: &Issue, replace: bool) -> Result<(), OpError> {
    if replace {
        let mut stmt = conn
            .prepare_cached("DELETE FROM issue_blocked_by WHERE tenant = ?1 AND issue_id = ?2")?;
        stmt.execute(params![issue.tenant.as_str(), issue.id.as_str()])?;
    }
    let mut stmt = conn.prepare_cached(
        "INSERT INTO issue_blocked_by (tenant, issue_id, blocker_id) VALUES (?1, ?2, ?3)",
    )?;
    for blocker in issue.blocked_by.iter() {
        stmt.execute(params![
            issue.tenant.as_str(),
            issue.id.as_str(),
            blocker.as_str()
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
    unless_similar: bool,
) -> Result<CreateOutcome, OpError> {
    if let Some(key) = key
        && let Some(record) = find_key(conn, tenant, &author.run, key, KeyKind::Issue)?
    {
        let id = replayed_issue_id(&record, fingerprint)?;
        // The current issue, not a snapshot: the caller retried and wants
        // to see where the issue stands now.
        let issue = get_issue(conn, tenant, &id)?;
        return Ok(CreateOutcome::Created(Created {
            issue,
            replayed: true,
        }));
    }
    if unless_similar {
        // On the writer, inside the group's write transaction: no other
        // create (from any process) can land between this check and the
        // insert below.
        let near: Vec<SimilarIssue> =
            similar_open_issues(conn, tenant, &new.title, limits::SIMILAR_LIMIT_MAX)?
                .into_iter()
                .filter(SimilarIssue::is_near)
                .collect();
        if !near.is_empty() {
            return Ok(CreateOutcome::Refused(near));
        }
    }
    new.validate()?;
    check_relations(conn, tenant, None, &new.related(), new.parent.as_ref())?;
    let now = Timestamp::now();
    let issue = new.clone().into_issue(tenant.clone(), author.clone(), now);
    // The index row is written with the group's others (search_writes.rs).
    let search_rowid = search_writes::stage_new(
        conn,
        tenant.as_str(),
        issue.id.as_str(),
        &normalized(issue.title.as_str()),
        &normalized(issue.body.as_str()),
    )?;
    let mut stmt = conn.prepare_cached(
        "INSERT INTO issues (tenant, id, title, title_lower, body, state, priority, labels, \
         author_run, author_grant, created_at, updated_at, version, parent, duplicate_of, \
         blocked_by, close_reason, search_rowid) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)",
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
        issue.parent.as_ref().map(IssueId::as_str),
        issue.duplicate_of.as_ref().map(IssueId::as_str),
        join_ids(&issue.blocked_by),
        issue.close_reason.map(|r| r.as_str()),
        search_rowid,
    ])?;
    insert_labels(conn, &issue)?;
    write_blocked_by(conn, &issue, false)?;
    index_open_title(conn, tenant, &issue.id, None, (&issue.title, issue.state))?;
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
    Ok(CreateOutcome::Created(Created {
        issue,
        replayed: false,
    }))
}

/// The issue's row in `issue_search`.
fn search_rowid(conn: &Connection, tenant: &TenantId, id: &IssueId) -> Result<i64, OpError> {
    let mut stmt =
        conn.prepare_cached("SELECT search_rowid FROM issues WHERE tenant = ?1 AND id = ?2")?;
    let rowid: Option<i64> = stmt
        .query_row(params![tenant.as_str(), id.as_str()], |row| row.get(0))
        .optional()?
        .flatten();
    rowid.ok_or_else(|| {
        OpError::Store(StoreError::Internal(format!(
            "issue {id} has no search row"
        )))
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
    let (previous_title, previous_state) = (issue.title.clone(), issue.state);
    let labels_changed = patch.labels.as_ref().is_some_and(|l| *l != issue.labels);
    let blocked_by_changed = patch
        .blocked_by
        .as_ref()
        .is_some_and(|b| *b != issue.blocked_by);
    // Never move updated_at backwards, even if another process's clock is ahead.
    let now = Timestamp::now().max(issue.updated_at);
    patch.clone().apply_to(&mut issue, now)?;
    check_relations(conn, tenant, Some(id), &patch.related(), patch.new_parent())?;
    let claim = issue.claim.as_ref();
    let mut stmt = conn.prepare_cached(
        "UPDATE issues SET title = ?1, title_lower = ?2, body = ?3, state = ?4, priority = ?5, \
         labels = ?6, updated_at = ?7, version = ?8, parent = ?12, duplicate_of = ?13, \
         blocked_by = ?14, close_reason = ?15, claim_run = ?16, claim_grant = ?17, \
         claimed_at = ?18, claim_expires_at = ?19 \
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
        issue.parent.as_ref().map(IssueId::as_str),
        issue.duplicate_of.as_ref().map(IssueId::as_str),
        join_ids(&issue.blocked_by),
        issue.close_reason.map(|r| r.as_str()),
        claim.map(|c| c.run.as_str()),
        claim.map(|c| c.grant.as_str()),
        claim.map(|c| c.claimed_at.as_millis()),
        claim.map(|c| c.expires_at.as_millis()),
    ])?;
    if changed != 1 {
        return Err(OpError::Store(StoreError::Internal(format!(
            "issue {id} changed under the write lock"
        ))));
    }
    if patch.title.is_some() || patch.body.is_some() {
        let rowid = search_rowid(conn, tenant, id)?;
        search_writes::stage_text(
            conn,
            rowid,
            &normalized(issue.title.as_str()),
            &normalized(issue.body.as_str()),
        )?;
    }
    index_open_title(
        conn,
        tenant,
        id,
        Some((&previous_title, previous_state)),
        (&issue.title, issue.state),
    )?;
    if labels_changed {
        let mut stmt =
            conn.prepare_cached("DELETE FROM issue_labels WHERE tenant = ?1 AND issue_id = ?2")?;
        stmt.execute(params![tenant.as_str(), id.as_str()])?;
        insert_labels(conn, &issue)?;
    }
    if blocked_by_changed {
        write_blocked_by(conn, &issue, true)?;
    }
    Ok(issue)
}

/// One conditional statement decides a claim: it matches only an open
/// issue with no live claim (none, an expired one, or the same run's under
/// another grant) at the expected version. Claims of revoked grants were
/// cleared with the revocation, in its transaction. When it matches
/// nothing, the row says why ([`ClaimCheck`]).
fn claim_issue(
    conn: &Connection,
    tenant: &TenantId,
    id: &IssueId,
    claimant: &Claimant,
    expected_version: Option<u64>,
) -> Result<Issue, OpError> {
    let now = Timestamp::now();
    let mut stmt = conn.prepare_cached(
        "UPDATE issues SET claim_run = ?1, claim_grant = ?2, claimed_at = ?3, \
         claim_expires_at = ?4, version = version + 1, updated_at = max(updated_at, ?3) \
         WHERE tenant = ?5 AND id = ?6 AND state NOT IN ('done', 'closed') \
         AND (claim_run IS NULL OR claim_expires_at <= ?3 OR (claim_run = ?1 AND claim_grant <> ?2)) \
         AND (?7 IS NULL OR version = ?7) AND ?4 > ?3",
    )?;
    let changed = stmt.execute(params![
        claimant.run.as_str(),
        claimant.grant.as_str(),
        now.as_millis(),
        claimant.expires_at.as_millis(),
        tenant.as_str(),
        id.as_str(),
        expected_version.map(to_sql_u64),
    ])?;
    let issue = get_issue(conn, tenant, id)?;
    if changed == 1 {
        return Ok(issue);
    }
    match ClaimCheck::of(&issue, claimant, expected_version) {
        ClaimCheck::Own => Ok(issue),
        ClaimCheck::Refused(err) => Err(OpError::Store(err)),
        // Only a claimant whose grant has already expired gets here.
        ClaimCheck::Free => Err(OpError::Store(StoreError::Invalid(ValidationError::new(
            "grant",
            "the grant of this run has expired; a claim needs a live grant",
        )))),
    }
}

/// Ends `run`'s live claim, in one conditional statement.
fn release_issue(
    conn: &Connection,
    tenant: &TenantId,
    id: &IssueId,
    run: &RunId,
    expected_version: Option<u64>,
) -> Result<Issue, OpError> {
    let now = Timestamp::now();
    let mut stmt = conn.prepare_cached(
        "UPDATE issues SET claim_run = NULL, claim_grant = NULL, claimed_at = NULL, \
         claim_expires_at = NULL, version = version + 1, updated_at = max(updated_at, ?1) \
         WHERE tenant = ?2 AND id = ?3 AND claim_run = ?4 AND claim_expires_at > ?1 \
         AND (?5 IS NULL OR version = ?5)",
    )?;
    let changed = stmt.execute(params![
        now.as_millis(),
        tenant.as_str(),
        id.as_str(),
        run.as_str(),
        expected_version.map(to_sql_u64),
    ])?;
    let issue = get_issue(conn, tenant, id)?;
    if changed == 1 {
        return Ok(issue);
    }
    check_release(&issue, run, expected_version).map_err(OpError::Store)?;
    Err(OpError::Store(StoreError::Internal(format!(
        "releasing issue {id} matched nothing although the run holds it"
    ))))
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
    let rowid = search_rowid(conn, tenant, &new.issue)?;
    search_writes::stage_comment(conn, rowid, &normalized(comment.body.as_str()))?;
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
         token_hash, revoked_at, revoked_by, budgets) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, NULL, NULL, ?9)",
    )?;
    let budgets = serde_json::to_string(&grant.budgets)
        .map_err(|e| OpError::Store(StoreError::Internal(format!("cannot encode: {e}"))))?;
    stmt.execute(params![
        grant.id.as_str(),
        grant.tenant.as_str(),
        grant.run.as_str(),
        grant.capabilities.to_csv(),
        grant.created_at.as_millis(),
        grant.expires_at.as_millis(),
        grant.created_by,
        token_hash,
        budgets,
    ])?;
    Ok(())
}

/// One conditional upsert: a first reservation inserts the row at 1 (when
/// the limit allows any), later ones add one only while below the limit.
/// `changes()` says whether it took.
fn reserve_budget(
    conn: &Connection,
    id: &GrantId,
    kind: BudgetKind,
    limit: u32,
) -> Result<bool, OpError> {
    if limit == 0 {
        return Ok(false);
    }
    let mut stmt = conn.prepare_cached(
        "INSERT INTO grant_budget_use (grant_id, kind, used) VALUES (?1, ?2, 1) \
         ON CONFLICT (grant_id, kind) DO UPDATE SET used = used + 1 WHERE used < ?3",
    )?;
    let changed = stmt.execute(params![id.as_str(), kind.as_str(), i64::from(limit)])?;
    Ok(changed == 1)
}

fn release_budget(conn: &Connection, id: &GrantId, kind: BudgetKind) -> Result<(), OpError> {
    let mut stmt = conn.prepare_cached(
        "UPDATE grant_budget_use SET used = used - 1 WHERE grant_id = ?1 AND kind = ?2 AND used > 0",
    )?;
    stmt.execute(params![id.as_str(), kind.as_str()])?;
    Ok(())
}

pub(crate) fn budget_used(
    conn: &Connection,
    id: &GrantId,
) -> Result<std::collections::BTreeMap<BudgetKind, u32>, OpError> {
    let mut stmt =
        conn.prepare_cached("SELECT kind, used FROM grant_budget_use WHERE grant_id = ?1")?;
    let mut rows = stmt.query(params![id.as_str()])?;
    let mut out = std::collections::BTreeMap::new();
    while let Some(row) = rows.next()? {
        let kind = BudgetKind::parse(&row.get::<_, String>(0)?).map_err(|e| {
            OpError::Store(StoreError::Internal(format!(
                "stored budget of grant {id} is invalid: {e}"
            )))
        })?;
        let used: i64 = row.get(1)?;
        out.insert(kind, u32::try_from(used).unwrap_or(u32::MAX));
    }
    Ok(out)
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
    // The grant's claims end with it, in the same transaction: the issues
    // go back to the pool (a change, so their versions grow).
    let mut clear = conn.prepare_cached(
        "UPDATE issues SET claim_run = NULL, claim_grant = NULL, claimed_at = NULL, \
         claim_expires_at = NULL, version = version + 1, updated_at = max(updated_at, ?1) \
         WHERE claim_grant = ?2",
    )?;
    clear.execute(params![at.as_millis(), id.as_str()])?;
    get_grant(conn, id)
}

fn record_expiry(
    conn: &Connection,
    id: &GrantId,
    expires_at: Timestamp,
    now: Timestamp,
) -> Result<GrantEvent, OpError> {
    // Live at `now` in the same statement: a revoked or expired grant
    // matches no row and stays as it is.
    let mut stmt = conn.prepare_cached(
        "UPDATE grants SET expires_at = ?1 WHERE id = ?2 AND revoked_at IS NULL AND expires_at > ?3",
    )?;
    stmt.execute(params![
        expires_at.as_millis(),
        id.as_str(),
        now.as_millis()
    ])?;
    get_grant(conn, id)
}

/// An entry whose id is already stored was written by an earlier attempt
/// whose answer was lost: it is skipped, not stored twice.
fn append_audit(conn: &Connection, entries: &[AuditEntry]) -> Result<(), OpError> {
    let mut stmt = conn.prepare_cached(
        "INSERT INTO audit (at, tenant, run, grant_id, tool, outcome, latency_micros, \
         arguments_hash, issue_id, record_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) \
         ON CONFLICT (record_id) DO NOTHING",
    )?;
    for AuditEntry { id, record } in entries {
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
            id.as_str(),
        ])?;
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::schema;
    use std::collections::BTreeMap;

    /// What `open_title_words` and `open_title_word_counts` must hold,
    /// computed from `issues` by the domain's rules, next to what they
    /// hold: (tenant, word, issue) rows and (tenant, word, count) rows.
    #[allow(clippy::type_complexity)]
    pub(crate) fn open_title_index(
        conn: &Connection,
    ) -> (
        (Vec<(String, String, String)>, Vec<(String, String, i64)>),
        (Vec<(String, String, String)>, Vec<(String, String, i64)>),
    ) {
        let mut expected_words = BTreeSet::new();
        let mut stmt = conn
            .prepare("SELECT tenant, id, title, state FROM issues")
            .unwrap();
        let mut rows = stmt.query([]).unwrap();
        while let Some(row) = rows.next().unwrap() {
            let (tenant, id, title, state): (String, String, String, String) = (
                row.get(0).unwrap(),
                row.get(1).unwrap(),
                row.get(2).unwrap(),
                row.get(3).unwrap(),
            );
            if is_open(IssueState::parse(&state).unwrap()) {
                for word in term_set(&title) {
                    expected_words.insert((tenant.clone(), word, id.clone()));
                }
            }
        }
        let mut expected_counts: BTreeMap<(String, String), i64> = BTreeMap::new();
        for (tenant, word, _) in &expected_words {
            *expected_counts
                .entry((tenant.clone(), word.clone()))
                .or_default() += 1;
        }
        let words = triples(
            conn,
            "SELECT tenant, word, issue_id FROM open_title_words ORDER BY 1, 2, 3",
        );
        let counts = triples(
            conn,
            "SELECT tenant, word, open_titles FROM open_title_word_counts ORDER BY 1, 2",
        );
        (
            (
                expected_words.into_iter().collect(),
                expected_counts
                    .into_iter()
                    .map(|((t, w), n)| (t, w, n))
                    .collect(),
            ),
            (words, counts),
        )
    }

    /// Every row of a three-column query.
    fn triples<A, B, C>(conn: &Connection, sql: &str) -> Vec<(A, B, C)>
    where
        A: rusqlite::types::FromSql,
        B: rusqlite::types::FromSql,
        C: rusqlite::types::FromSql,
    {
        conn.prepare(sql)
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap()
    }

    fn author() -> Author {
        Author {
            run: RunId::parse("r").unwrap(),
            grant: None,
        }
    }

    fn create(conn: &Connection, tenant: &TenantId, title: &str) -> IssueId {
        let new = NewIssue::new(Title::parse(title).unwrap());
        match create_issue(
            conn,
            tenant,
            &author(),
            &new,
            None,
            &new.fingerprint(),
            false,
        ) {
            Ok(CreateOutcome::Created(created)) => created.issue.id,
            other => panic!("{other:?}"),
        }
    }

    fn patch(conn: &Connection, tenant: &TenantId, id: &IssueId, patch: IssuePatch) {
        update_issue(conn, tenant, id, &patch, None).unwrap();
    }

    #[test]
    fn the_open_title_index_follows_creates_retitles_closes_and_reopens() {
        let dir = tempfile::tempdir().unwrap();
        let conn = schema::open_writer(&dir.path().join("i.sqlite3"), &Default::default()).unwrap();
        let (a, b) = (
            TenantId::parse("acme").unwrap(),
            TenantId::parse("beta").unwrap(),
        );
        let login = create(&conn, &a, "Login fails, login!");
        let other = create(&conn, &a, "Login page slow");
        create(&conn, &b, "Login fails");
        let check = |when: &str| {
            let (expected, actual) = open_title_index(&conn);
            assert_eq!(actual, expected, "{when}");
        };
        check("after the creates");
        let retitle = |text: &str| IssuePatch {
            title: Some(Title::parse(text).unwrap()),
            ..Default::default()
        };
        let state = |state: IssueState| IssuePatch {
            state: Some(state),
            ..Default::default()
        };
        let priority = IssuePatch {
            priority: Some(corkboard_board::Priority::High),
            ..Default::default()
        };
        for (id, change, when) in [
            (&login, retitle("Signup fails"), "after a retitle"),
            (&other, state(IssueState::Done), "after a close"),
            (
                &other,
                retitle("Login page fast"),
                "after retitling a closed issue",
            ),
            (&other, state(IssueState::Todo), "after a reopen"),
            (
                &other,
                priority,
                "after a change that leaves the title alone",
            ),
        ] {
            patch(&conn, &a, id, change);
            check(when);
        }
        let (_, (words, counts)) = open_title_index(&conn);
        assert!(words.contains(&("acme".into(), "fast".into(), other.to_string())));
        assert!(counts.contains(&("acme".into(), "fails".into(), 1)));
        assert!(counts.contains(&("beta".into(), "fails".into(), 1)));
        // The check can fail: a row the rules do not explain is found.
        conn.execute(
            "INSERT INTO open_title_words VALUES ('acme', 'stray', 'iss_x')",
            [],
        )
        .unwrap();
        let (expected, actual) = open_title_index(&conn);
        assert_ne!(actual, expected);
    }
}
