//! Comments (`comments`): the window of them an issue view reads, and
//! adding one (idempotent by key, bounded per issue, indexed for search
//! with the group, announced to webhooks in the same op (undone with it)).

use super::history;
use super::issues::{get_issue, issue_not_found};
use super::keys::{KeyKind, KeyedRequest, find_key, remember_key, replayed_issue_id};
use super::search::search_rowid;
use super::{WriteOp, webhooks};
use crate::codec::{COMMENT_COLUMNS, comment_from_row};
use crate::error::OpError;
use crate::search_writes;
use corkboard_board::{
    Author, Change, Comment, CommentAdded, CommentFacts, CommentId, CommentWindow, GrantId,
    IdempotencyKey, IssueId, NewComment, StoreError, TenantId, Timestamp, limits, normalized,
};
use rusqlite::{Connection, OptionalExtension, params};

/// The comments of `window` on issue `id` (oldest first) and their facts,
/// inside the caller's snapshot. Comments are ordered by `seq`, the order
/// they were added in.
///
/// `total` is the issue's number of comments, counted in the same snapshot
/// (the issue view reads it with the issue).
pub(crate) fn comment_window(
    conn: &Connection,
    tenant: &TenantId,
    id: &IssueId,
    window: &CommentWindow,
    total: usize,
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
    if end == 0 {
        // Nothing before the bound in this snapshot: the window is empty
        // without reading it (an issue without comments, the common case,
        // costs the view one statement less).
        return Ok((Vec::new(), CommentFacts::new(window, total, end, 0)));
    }
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

/// Adds a comment to an issue, or finds the one a retry under the same
/// key added.
#[derive(Debug)]
pub(crate) struct AddComment {
    pub tenant: TenantId,
    pub author: Author,
    pub comment: NewComment,
    pub key: Option<KeyedRequest>,
}

impl AddComment {
    pub(crate) fn new(
        tenant: &TenantId,
        author: &Author,
        comment: NewComment,
        key: Option<&IdempotencyKey>,
    ) -> Self {
        Self {
            tenant: tenant.clone(),
            author: author.clone(),
            key: KeyedRequest::new(key, || comment.fingerprint()),
            comment,
        }
    }
}

impl WriteOp for AddComment {
    type Output = CommentAdded;
    const NAME: &'static str = "add_comment";

    fn run(&self, conn: &Connection) -> Result<CommentAdded, OpError> {
        let Self {
            tenant,
            author,
            comment,
            key,
        } = self;
        let added = add_comment(conn, tenant, author, comment, key.as_ref())?;
        if !added.replayed {
            webhooks::issue_commented(conn, tenant, &added)?;
            history::record(
                conn,
                tenant,
                &Change::commented(&added.issue, &added.comment.id, author),
            )?;
        }
        Ok(added)
    }
}

fn add_comment(
    conn: &Connection,
    tenant: &TenantId,
    author: &Author,
    new: &NewComment,
    key: Option<&KeyedRequest>,
) -> Result<CommentAdded, OpError> {
    if let Some(keyed) = key
        && let Some(record) = find_key(conn, tenant, &author.run, &keyed.key, KeyKind::Comment)?
    {
        let issue_id = replayed_issue_id(&record, &keyed.fingerprint)?;
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
        "INSERT INTO comments (tenant, issue_id, id, body, author_run, author_grant, created_at, \
         author_kind, author_integrity) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )?;
    insert.execute(params![
        tenant.as_str(),
        new.issue.as_str(),
        comment.id.as_str(),
        comment.body.as_str(),
        comment.author.run.as_str(),
        comment.author.grant.as_ref().map(GrantId::as_str),
        now.as_millis(),
        comment.author.kind.as_str(),
        comment.author.integrity.rank(),
    ])?;
    let rowid = search_rowid(conn, tenant, &new.issue)?;
    search_writes::stage_comment(
        conn,
        tenant.as_str(),
        rowid,
        &normalized(comment.body.as_str()),
    )?;
    if let Some(key) = key {
        remember_key(
            conn,
            tenant,
            &author.run,
            key,
            KeyKind::Comment,
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
