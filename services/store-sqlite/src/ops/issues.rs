//! Issues (`issues`, `issue_labels`, `issue_blocked_by`): the point and
//! list reads, and the writes that make or change one (create, update,
//! the bench-only bulk seed), with their relation checks. Each write keeps
//! the open-title word index and the staged full-text index in step
//! ([`super::search`]) and queues its webhook events in the same op (undone with it).

use super::comments::{AddComment, comment_window};
use super::history;
use super::keys::{KeyKind, KeyedRequest, find_key, remember_key, replayed_issue_id};
use super::search::{index_open_title, search_rowid, similar_open_issues};
use super::{WriteOp, webhooks};
use crate::codec::{
    COMMENT_COLUMNS, ISSUE_COLUMN_COUNT, ISSUE_COLUMNS, comment_from_row, comment_from_row_at,
    corrupt, issue_from_row, join_ids, join_labels, qualified, stored_level, to_sql_u64,
};
use crate::error::OpError;
use crate::query::{self, json_array};
use crate::readers::snapshot;
use crate::search_writes;
use corkboard_board::{
    Author, AuthorKind, Change, ChangeKind, CommentBody, CommentCounts, CommentFacts,
    CommentWindow, CreateOutcome, Created, GrantId, IdempotencyKey, Integrity, Issue, IssueId,
    IssuePatch, IssueView, ListQuery, NewComment, NewIssue, Page, PageCommentBytes, PageComments,
    ParentChain, SimilarIssue, StoreError, TenantId, Timestamp, ViewSince, limits, normalized,
    relation_limits,
};
use rusqlite::{Connection, OptionalExtension, params, params_from_iter};
use std::collections::HashMap;
use std::sync::LazyLock;

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

/// An issue (`?1`, `?2`) with, after its columns, its number of comments
/// and the newest `?3` ids of its children and of the issues it blocks,
/// each joined by commas (issue ids hold none; in no promised order: the
/// reader sorts them), each from its covering index.
static ISSUE_VIEW: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {ISSUE_COLUMNS}, \
         (SELECT count(*) FROM comments c WHERE c.tenant = ?1 AND c.issue_id = ?2), \
         (SELECT group_concat(p.id) FROM (SELECT id FROM issues \
          WHERE tenant = ?1 AND parent = ?2 ORDER BY id DESC LIMIT ?3) p), \
         (SELECT group_concat(b.issue_id) FROM (SELECT issue_id \
          FROM issue_blocked_by WHERE tenant = ?1 AND blocker_id = ?2 \
          ORDER BY issue_id DESC LIMIT ?3) b) \
         FROM issues WHERE tenant = ?1 AND id = ?2"
    )
});

/// The issue without its comments (what a change is recorded against).
pub(crate) fn issue_row(
    conn: &Connection,
    tenant: &TenantId,
    id: &IssueId,
) -> Result<Issue, OpError> {
    conn.prepare_cached(&ISSUE_ONLY)?
        .query_row(params![tenant.as_str(), id.as_str()], |row| {
            Ok(issue_from_row(tenant, row))
        })
        .optional()?
        .ok_or_else(|| issue_not_found(id))?
}

pub(crate) fn issue_not_found(id: &IssueId) -> OpError {
    OpError::Store(StoreError::not_found(format!("issue {id}")))
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
///
/// The issue, its number of comments and both inverse relations come from
/// one statement ([`ISSUE_VIEW`]), which is a snapshot by itself: an issue
/// without comments (most of them) costs the view that one statement. With
/// comments to read, the statement is read again with the window in one
/// transaction, so that the count and the window agree.
pub(crate) fn get_issue_view(
    conn: &Connection,
    tenant: &TenantId,
    id: &IssueId,
    window: &CommentWindow,
) -> Result<IssueView, OpError> {
    let alone = issue_view_row(conn, tenant, id)?;
    if alone.comments == 0 && window.before_id().is_none() {
        let facts = CommentFacts::new(window, 0, 0, 0);
        return Ok(IssueView::new(
            alone.issue,
            facts,
            alone.children,
            alone.blocks,
        ));
    }
    snapshot(conn, |conn| {
        let ViewRow {
            mut issue,
            comments,
            children,
            blocks,
        } = issue_view_row(conn, tenant, id)?;
        let (comments, facts) = comment_window(conn, tenant, id, window, comments)?;
        issue.comments = comments;
        Ok(IssueView::new(issue, facts, children, blocks))
    })
}

/// The tenant's epoch (`tenant_epoch`, migration 22): moved in the same
/// transaction by every change of one of its issues or comments, whichever
/// op, migration or process made it; 0 before its first.
pub(crate) fn tenant_epoch(conn: &Connection, tenant: &TenantId) -> Result<u64, OpError> {
    let epoch: Option<i64> = conn
        .prepare_cached("SELECT n FROM tenant_epoch WHERE tenant = ?1")?
        .query_row([tenant.as_str()], |row| row.get(0))
        .optional()?;
    Ok(epoch.map_or(0, |n| u64::try_from(n).unwrap_or(0)))
}

/// [`get_issue_view`] unless the tenant's epoch ([`tenant_epoch`]) is
/// still `seen`. The epoch is read before the view, in the same snapshot:
/// a view read after a write carries at most the epoch before it, so a
/// later reader finds the epoch moved and reads again, never a view older
/// than what it could have read itself.
pub(crate) fn get_issue_view_since(
    conn: &Connection,
    tenant: &TenantId,
    id: &IssueId,
    window: &CommentWindow,
    seen: Option<u64>,
) -> Result<ViewSince, OpError> {
    let epoch = tenant_epoch(conn, tenant)?;
    if seen == Some(epoch) {
        return Ok(ViewSince::Unchanged);
    }
    let view = get_issue_view(conn, tenant, id, window)?;
    Ok(ViewSince::Read {
        view: Box::new(view),
        epoch: Some(epoch),
    })
}

/// What [`ISSUE_VIEW`] reads besides the comment window.
struct ViewRow {
    issue: Issue,
    comments: usize,
    children: Vec<IssueId>,
    blocks: Vec<IssueId>,
}

fn issue_view_row(conn: &Connection, tenant: &TenantId, id: &IssueId) -> Result<ViewRow, OpError> {
    // One more than shown of each inverse relation, so the view knows
    // whether there are more.
    let fetch = (relation_limits::INVERSE_MAX + 1) as i64;
    let row = conn
        .prepare_cached(&ISSUE_VIEW)?
        .query_row(params![tenant.as_str(), id.as_str(), fetch], |row| {
            let ids = |column: usize| row.get::<_, Option<String>>(column);
            Ok((
                issue_from_row(tenant, row),
                row.get::<_, i64>(ISSUE_COLUMN_COUNT)?,
                ids(ISSUE_COLUMN_COUNT + 1)?,
                ids(ISSUE_COLUMN_COUNT + 2)?,
            ))
        })
        .optional()?
        .ok_or_else(|| issue_not_found(id))?;
    let (issue, comments, children, blocks) = row;
    // Newest first (ids sort by creation).
    let ids = |joined: Option<String>| -> Result<Vec<IssueId>, OpError> {
        let mut ids = joined
            .iter()
            .flat_map(|joined| joined.split(','))
            .map(|text| {
                IssueId::parse(text).map_err(|e| {
                    OpError::Store(StoreError::Internal(format!(
                        "a stored relation of issue {id} is invalid: {e}"
                    )))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        ids.sort_unstable_by(|a, b| b.cmp(a));
        Ok(ids)
    };
    Ok(ViewRow {
        issue: issue?,
        comments: usize::try_from(comments).unwrap_or(0),
        children: ids(children)?,
        blocks: ids(blocks)?,
    })
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
    // The look-ahead issue is not filled in: it only says more follow.
    let more = issues.len() > limit;
    issues.truncate(limit);
    match query.comments {
        PageComments::All => {
            let cut = attach_comments(conn, tenant, &mut issues)?;
            Ok(Page::read(issues, limit, more || cut))
        }
        PageComments::Counted => {
            let counted = count_comments(conn, tenant, &issues, query.min_integrity)?;
            let mut page = Page::read(issues, limit, more);
            page.counted = Some(counted);
            Ok(page)
        }
    }
}

/// Each comment of the issues in `?2` (a JSON array of ids): its author's
/// kind and level, what a count needs, from the index alone.
const COUNT_COMMENTS: &str = "SELECT issue_id, author_kind, author_integrity FROM comments \
     INDEXED BY comments_by_issue \
     WHERE tenant = ?1 AND issue_id IN (SELECT value FROM json_each(?2))";

/// Each of `issues`' comments counted against `floor`, in their order,
/// from the index alone (migration 27): no comment row, no body. A page
/// of 50 issues with ten comments each read and decoded 500 bodies to
/// show none (services/bench/FINDINGS.md).
fn count_comments(
    conn: &Connection,
    tenant: &TenantId,
    issues: &[Issue],
    floor: Option<Integrity>,
) -> Result<Vec<CommentCounts>, OpError> {
    let mut counted = vec![CommentCounts::default(); issues.len()];
    if issues.is_empty() {
        return Ok(counted);
    }
    let position: HashMap<&str, usize> = issues
        .iter()
        .enumerate()
        .map(|(i, issue)| (issue.id.as_str(), i))
        .collect();
    let ids = json_array(issues.iter().map(|i| i.id.as_str()));
    let mut stmt = conn.prepare_cached(COUNT_COMMENTS)?;
    let mut rows = stmt.query(params![tenant.as_str(), ids])?;
    while let Some(row) = rows.next()? {
        let text = |at: usize| -> Result<&str, rusqlite::Error> { Ok(row.get_ref(at)?.as_str()?) };
        let issue_id = text(0)?;
        let kind =
            AuthorKind::parse(text(1)?).map_err(|e| corrupt("comment of issue", issue_id, e))?;
        if let Some(&i) = position.get(issue_id) {
            counted[i].add(stored_level(kind, row.get(2)?), floor);
        }
    }
    Ok(counted)
}

/// Fills in the comments of a page of issues, within
/// [`corkboard_board::limits::PAGE_COMMENT_BYTES_MAX`]: one query for the
/// whole page while its comments stay within the bound (every page but a
/// few). Past it, what was read is dropped, each issue's comment bytes
/// are counted by SQLite, and the page holds its issues up to the first
/// that would pass the bound ([`PageCommentBytes::hold`]); only those
/// are filled. A cut page answers `true`, and its caller continues it
/// after its last issue. So a page never holds much more than the bound
/// in comments, nor reads much more to find out.
pub(crate) fn attach_comments(
    conn: &Connection,
    tenant: &TenantId,
    issues: &mut Vec<Issue>,
) -> Result<bool, OpError> {
    if fill_comments(conn, tenant, issues, true)? {
        return Ok(false);
    }
    let bytes = comment_bytes(conn, tenant, issues)?;
    let mut taken = PageCommentBytes::default();
    let held = issues
        .iter()
        .position(|issue| !taken.hold(bytes.get(issue.id.as_str()).copied().unwrap_or(0)))
        .unwrap_or(issues.len());
    let cut = held < issues.len();
    issues.truncate(held);
    for issue in issues.iter_mut() {
        issue.comments.clear();
    }
    fill_comments(conn, tenant, issues, false)?;
    Ok(cut)
}

/// Fills in `issues`' comments with one query. `bounded`: stops, with
/// `false` and some comments filled, once the page's comments pass the
/// bound in all, whichever issues they belong to.
fn fill_comments(
    conn: &Connection,
    tenant: &TenantId,
    issues: &mut [Issue],
    bounded: bool,
) -> Result<bool, OpError> {
    if issues.is_empty() {
        return Ok(true);
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
    let mut taken = PageCommentBytes::default();
    while let Some(row) = rows.next()? {
        let (issue_id, comment) = comment_from_row(row)?;
        if !taken.take(comment.body.as_str().len()) && bounded {
            return Ok(false);
        }
        if let Some(&i) = position.get(&issue_id) {
            issues[i].comments.push(comment);
        }
    }
    Ok(true)
}

/// The bytes of each of `issues`' comment bodies in all, by issue id
/// (what [`PageCommentBytes::hold_issue`] counts), without reading them.
fn comment_bytes(
    conn: &Connection,
    tenant: &TenantId,
    issues: &[Issue],
) -> Result<HashMap<String, usize>, OpError> {
    let ids = json_array(issues.iter().map(|i| i.id.as_str()));
    let mut stmt = conn.prepare_cached(
        "SELECT issue_id, sum(length(CAST(body AS BLOB))) FROM comments \
         WHERE tenant = ?1 AND issue_id IN (SELECT value FROM json_each(?2)) GROUP BY issue_id",
    )?;
    let mut rows = stmt.query(params![tenant.as_str(), ids])?;
    let mut bytes = HashMap::with_capacity(issues.len());
    while let Some(row) = rows.next()? {
        let total: i64 = row.get(1)?;
        bytes.insert(row.get(0)?, usize::try_from(total).unwrap_or(usize::MAX));
    }
    Ok(bytes)
}

// ---------------------------------------------------------------- writes

/// Creates an issue, or finds the one a retry under the same key created.
#[derive(Debug)]
pub(crate) struct CreateIssue {
    pub tenant: TenantId,
    pub author: Author,
    pub new: NewIssue,
    pub key: Option<KeyedRequest>,
}

impl CreateIssue {
    pub(crate) fn new(
        tenant: &TenantId,
        author: &Author,
        new: NewIssue,
        key: Option<&IdempotencyKey>,
    ) -> Self {
        Self {
            tenant: tenant.clone(),
            author: author.clone(),
            key: KeyedRequest::new(key, || new.fingerprint()),
            new,
        }
    }

    /// The issue a create already made under this key (a retry).
    fn replayed(&self, conn: &Connection) -> Result<Option<Created>, OpError> {
        let Some(keyed) = &self.key else {
            return Ok(None);
        };
        let Some(record) = find_key(
            conn,
            &self.tenant,
            &self.author.run,
            &keyed.key,
            KeyKind::Issue,
        )?
        else {
            return Ok(None);
        };
        let id = replayed_issue_id(&record, &keyed.fingerprint)?;
        // The current issue, not a snapshot: the caller retried and wants
        // to see where the issue stands now.
        let issue = get_issue(conn, &self.tenant, &id)?;
        Ok(Some(Created {
            issue,
            replayed: true,
        }))
    }

    /// The create proper, once no earlier one under the key was found:
    /// the new issue, its index rows, its key and its webhook event.
    fn create(&self, conn: &Connection) -> Result<Created, OpError> {
        let created = insert_issue(
            conn,
            &self.tenant,
            &self.author,
            &self.new,
            self.key.as_ref(),
        )?;
        webhooks::issue_created(conn, &self.tenant, &created.issue)?;
        history::record(
            conn,
            &self.tenant,
            &Change::of(ChangeKind::Created, None, &created.issue, &self.author),
        )?;
        Ok(created)
    }
}

impl WriteOp for CreateIssue {
    type Output = Created;
    const NAME: &'static str = "create_issue";

    fn run(&self, conn: &Connection) -> Result<Created, OpError> {
        match self.replayed(conn)? {
            Some(replayed) => Ok(replayed),
            None => self.create(conn),
        }
    }
}

/// [`CreateIssue`], but writing nothing when an open issue is a near
/// match (checked in the same transaction as the insert).
#[derive(Debug)]
pub(crate) struct CreateIssueUnlessSimilar(pub CreateIssue);

impl WriteOp for CreateIssueUnlessSimilar {
    type Output = CreateOutcome;
    const NAME: &'static str = "create_issue";

    fn run(&self, conn: &Connection) -> Result<CreateOutcome, OpError> {
        let Self(create) = self;
        if let Some(replayed) = create.replayed(conn)? {
            return Ok(CreateOutcome::Created(replayed));
        }
        // On the writer, inside the group's write transaction: no other
        // create (from any process) can land between this check and the
        // insert.
        let near: Vec<SimilarIssue> = similar_open_issues(
            conn,
            &create.tenant,
            &create.new.title,
            limits::SIMILAR_LIMIT_MAX,
        )?
        .into_iter()
        .filter(SimilarIssue::is_near)
        .collect();
        if !near.is_empty() {
            return Ok(CreateOutcome::Refused(near));
        }
        create.create(conn).map(CreateOutcome::Created)
    }
}

/// Changes an issue by a patch, at an expected version if given.
#[derive(Debug)]
pub(crate) struct UpdateIssue {
    pub tenant: TenantId,
    pub id: IssueId,
    pub patch: IssuePatch,
    pub expected_version: Option<u64>,
}

impl WriteOp for UpdateIssue {
    type Output = Issue;
    const NAME: &'static str = "update_issue";

    fn run(&self, conn: &Connection) -> Result<Issue, OpError> {
        let Self {
            tenant,
            id,
            patch,
            expected_version,
        } = self;
        // Read first, for the history (and the webhooks: a close or not).
        let before = issue_row(conn, tenant, id)?;
        let issue = update_issue(conn, tenant, id, patch, *expected_version)?;
        let change = Change::of(ChangeKind::Updated, Some(&before), &issue, &patch.actor());
        webhooks::issue_updated(conn, tenant, Some(before), &issue)?;
        history::record(conn, tenant, &change)?;
        Ok(issue)
    }
}

/// Bench-only bulk seeding ([`crate::SqliteStore::seed_issues`]): each
/// item is exactly a [`CreateIssue`] (no key, no similarity check)
/// followed by an optional [`AddComment`], run as those ops are, in one
/// transaction. Answers the issues created, in order.
#[derive(Debug)]
pub(crate) struct SeedIssues {
    pub tenant: TenantId,
    pub author: Author,
    pub items: Vec<(NewIssue, Option<CommentBody>)>,
}

impl WriteOp for SeedIssues {
    type Output = Vec<IssueId>;
    const NAME: &'static str = "seed_issues";

    fn run(&self, conn: &Connection) -> Result<Vec<IssueId>, OpError> {
        let Self {
            tenant,
            author,
            items,
        } = self;
        let mut ids = Vec::with_capacity(items.len());
        for (new, comment) in items {
            let created = CreateIssue::new(tenant, author, new.clone(), None).run(conn)?;
            if let Some(body) = comment {
                let comment = NewComment {
                    issue: created.issue.id.clone(),
                    body: body.clone(),
                };
                AddComment::new(tenant, author, comment, None).run(conn)?;
            }
            ids.push(created.issue.id);
        }
        Ok(ids)
    }
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

/// Writes a new issue: validated, its relations checked, its rows and
/// index entries written, its key remembered.
fn insert_issue(
    conn: &Connection,
    tenant: &TenantId,
    author: &Author,
    new: &NewIssue,
    key: Option<&KeyedRequest>,
) -> Result<Created, OpError> {
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
         blocked_by, close_reason, search_rowid, author_kind, author_integrity, integrity) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, \
         ?19, ?20, ?21)",
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
        issue.author.kind.as_str(),
        issue.author.integrity.rank(),
        issue.integrity.rank(),
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

pub(crate) fn update_issue(
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
         claimed_at = ?18, claim_expires_at = ?19, integrity = ?20 \
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
        issue.integrity.rank(),
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
            tenant.as_str(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema;

    /// A page's comments are counted from the index alone: no comment
    /// row is read (their bodies sit before the columns counted).
    #[test]
    fn a_page_counts_its_comments_from_the_index_alone() {
        let dir = tempfile::tempdir().unwrap();
        let conn = schema::open_writer(&dir.path().join("s.sqlite3"), &Default::default()).unwrap();
        let plan =
            crate::query::query_plan(&conn, COUNT_COMMENTS, params!["t", "[\"iss_1\"]"]).join("\n");
        assert!(
            plan.contains(
                "SEARCH comments USING COVERING INDEX comments_by_issue (tenant=? AND issue_id=?)"
            ),
            "{plan}"
        );
        assert!(!plan.contains("SCAN comments"), "{plan}");
    }

    /// The view's one statement reads the issue by its key and the
    /// comment count and both inverse relations each from its index,
    /// without scanning.
    #[test]
    fn the_issue_view_is_one_statement_of_index_searches() {
        let dir = tempfile::tempdir().unwrap();
        let conn = schema::open_writer(&dir.path().join("s.sqlite3"), &Default::default()).unwrap();
        let plan =
            crate::query::query_plan(&conn, &ISSUE_VIEW, params!["t", "iss_1", 11]).join("\n");
        assert!(
            plan.contains(
                "SEARCH issues USING COVERING INDEX issues_by_parent (tenant=? AND parent=?)"
            ),
            "{plan}"
        );
        assert!(
            plan.contains(
                "SEARCH issue_blocked_by USING COVERING INDEX issue_blocked_by_blocker (tenant=? AND blocker_id=?)"
            ),
            "{plan}"
        );
        assert!(
            plan.contains(
                "SEARCH c USING COVERING INDEX comments_by_issue (tenant=? AND issue_id=?)"
            ),
            "{plan}"
        );
        assert!(
            plan.contains("SEARCH issues USING PRIMARY KEY (tenant=? AND id=?)"),
            "{plan}"
        );
        assert!(!plan.contains("SCAN issues"), "{plan}");
        assert!(!plan.contains("SCAN c"), "{plan}");
    }
}
