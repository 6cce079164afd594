//! Domain values to and from BSON documents.
//!
//! Documents are built and read by hand rather than through serde: the
//! stored shape (dates as BSON dates, versions as 64-bit integers, the
//! lower-cased title beside the title) is the schema other tools and
//! indexes see, so it is written down here once, not derived from Rust
//! types that may change for other reasons. Stored values are parsed back
//! through the domain's constructors, so a document damaged outside this
//! store surfaces as an error naming it instead of an invalid value
//! travelling on.

use crate::error::corrupt;
use corkboard_board::{
    ArgumentsHash, AuditOutcome, AuditRecord, Author, AuthorKind, BlockedBy, Body, Capabilities,
    Claim, CloseReason, Comment, CommentBody, CommentId, DefinitionHash, Grant, GrantEvent,
    GrantId, Integrity, Issue, IssueId, IssueState, Labels, Priority, RunId, StoreError, TenantId,
    Timestamp, Title,
};
use mongodb::Cursor;
use mongodb::bson::{Bson, DateTime, Document, doc};

/// Field names shared by the codec, the queries and the indexes.
pub(crate) mod field {
    pub const ID: &str = "_id";
    pub const TENANT: &str = "tenant";
    pub const TITLE: &str = "title";
    /// Rust's Unicode lower-casing of the title, so the text filter is a
    /// case-sensitive match that agrees with `ListQuery::matches` exactly.
    pub const TITLE_LOWER: &str = "title_lower";
    pub const BODY: &str = "body";
    pub const STATE: &str = "state";
    pub const LABELS: &str = "labels";
    pub const PRIORITY: &str = "priority";
    /// `Priority::urgency` of the priority (0 urgent .. 4 none), written
    /// with it: the ready order's first key.
    pub const URGENCY: &str = "urgency";
    pub const AUTHOR: &str = "author";
    pub const AUTHOR_RUN: &str = "author.run";
    /// The issue's level (`Integrity::rank`): the lowest of its author's
    /// and every editor's (`issue_integrity`).
    pub const INTEGRITY: &str = "integrity";
    pub const CREATED_AT: &str = "created_at";
    pub const UPDATED_AT: &str = "updated_at";
    pub const VERSION: &str = "version";
    pub const COMMENTS: &str = "comments";
    pub const COMMENT_IDS: &str = "comments.id";
    pub const PARENT: &str = "parent";
    pub const DUPLICATE_OF: &str = "duplicate_of";
    pub const BLOCKED_BY: &str = "blocked_by";
    /// How many of `blocked_by` are open issues, as last counted (0: none,
    /// so the issue can be ready work): the ready index's third key, so the
    /// ready list and `claim_next` need no look-up of blockers. Kept by
    /// `MongoStore::settle_blockers` (`blockers.rs`) after every write that
    /// changes `blocked_by` or moves an issue in or out of the terminal
    /// states; a new `blocked_by` is written counted all open, so it holds
    /// the issue back until recounted.
    pub const OPEN_BLOCKERS: &str = "open_blockers";
    /// Bumped by every recount of `open_blockers`, which is conditional on
    /// the value it read (of two racing recounts the later reader wins),
    /// and by every write that changes `blocked_by` (a recount that read
    /// the old blockers does not land).
    pub const BLOCKERS_SEQ: &str = "blockers_seq";
    /// Set (a fresh token) in the same update as a change that needs the
    /// counts of this issue and of the issues it blocks recounted, cleared
    /// once they are: what is left set after a crash is recounted by the
    /// claim sweeper (`MongoStore::settle_pending`).
    pub const RECOUNT: &str = "recount";
    pub const CLOSE_REASON: &str = "close_reason";
    /// `{run, grant, claimed_at, expires_at}` or null.
    pub const CLAIM: &str = "claim";
    pub const CLAIM_RUN: &str = "claim.run";
    pub const CLAIM_GRANT: &str = "claim.grant";
    pub const CLAIMED_AT: &str = "claim.claimed_at";
    pub const CLAIM_EXPIRES_AT: &str = "claim.expires_at";
    /// The distinct words (`corkboard_board::term_set`) of the title, the
    /// body and all comments, each its own multikey-indexed array: a title
    /// or body change replaces its array in the same update, a comment
    /// adds its words to the third with `$addToSet`, so no write needs to
    /// read the others first. Search finds candidates through them.
    pub const TERMS_TITLE: &str = "terms_title";
    pub const TERMS_BODY: &str = "terms_body";
    pub const TERMS_COMMENTS: &str = "terms_comments";
    /// The issue's newest changes, oldest first (`change_doc`).
    pub const HISTORY: &str = "history";
    /// Webhook events a write staged on the issue and whose deliveries are
    /// not yet known to be queued (`crate::staged`).
    pub const STAGED: &str = "staged_events";
    pub const STAGED_AT: &str = "staged_events.at";
    pub const STAGED_NAME: &str = "staged_events.name";
    /// The author run of each change, for a run's history.
    pub const HISTORY_RUN: &str = "history.by.run";
    /// The three, in ranking order (title, body, comments).
    pub const TERMS: [&str; 3] = [TERMS_TITLE, TERMS_BODY, TERMS_COMMENTS];
    /// The fields of an issue document that are no part of the issue: its
    /// search words (each of its distinct words, its comments' included)
    /// and its history (its newest changes, with excerpts). Together they
    /// can outweigh the issue many times, so every read that builds an
    /// issue leaves them on the server ([`super::issue_projection`]).
    pub const NOT_READ: [&str; 4] = [TERMS_TITLE, TERMS_BODY, TERMS_COMMENTS, HISTORY];
}

/// The projection of every read that builds an issue
/// ([`issue_from_doc`]): all of the document but [`field::NOT_READ`].
pub(crate) fn issue_projection() -> Document {
    field::NOT_READ
        .iter()
        .map(|name| ((*name).to_owned(), Bson::Int32(0)))
        .collect()
}

/// The distinct words of `text` as a BSON array.
pub(crate) fn terms_bson(text: &str) -> Bson {
    Bson::Array(
        corkboard_board::term_set(text)
            .into_iter()
            .map(Bson::String)
            .collect(),
    )
}

/// The words of every comment of `issue` together.
fn comment_terms_bson(issue: &Issue) -> Bson {
    let words: std::collections::BTreeSet<String> = issue
        .comments
        .iter()
        .flat_map(|c| corkboard_board::tokens(c.body.as_str()))
        .collect();
    Bson::Array(words.into_iter().map(Bson::String).collect())
}

/// The per-field word arrays of a document (missing arrays read as empty).
pub(crate) fn issue_terms(doc: &Document) -> corkboard_board::IssueTerms {
    let words = |name: &str| {
        doc.get_array(name)
            .map(|items| {
                items
                    .iter()
                    .filter_map(|b| b.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    corkboard_board::IssueTerms {
        title: words(field::TERMS_TITLE),
        body: words(field::TERMS_BODY),
        comments: words(field::TERMS_COMMENTS),
    }
}

pub(crate) fn date(t: Timestamp) -> DateTime {
    DateTime::from_millis(t.as_millis())
}

/// The `_id` strings a cursor yields (a find projected to `_id`); a
/// document whose `_id` is not a string is skipped.
pub(crate) async fn ids(mut cursor: Cursor<Document>) -> mongodb::error::Result<Vec<String>> {
    let mut ids = Vec::new();
    while cursor.advance().await? {
        if let Ok(id) = cursor.current().get_str(field::ID) {
            ids.push(id.to_owned());
        }
    }
    Ok(ids)
}

/// A BSON date as the domain's time (the inverse of [`date`]).
pub(crate) fn timestamp(d: &DateTime) -> Timestamp {
    Timestamp::from_millis(d.timestamp_millis())
}

/// BSON has no unsigned integers; versions and latencies never get near
/// the limit, and saturating keeps a corrupt value from wrapping.
pub(crate) fn to_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn from_i64(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

fn labels_bson(labels: &Labels) -> Bson {
    Bson::Array(labels.iter().map(|l| Bson::from(l.as_str())).collect())
}

fn author_doc(author: &Author) -> Document {
    doc! {
        "kind": author.kind.as_str(),
        "run": author.run.as_str(),
        "grant": author.grant.as_ref().map(|g| g.as_str()),
        "integrity": author.integrity.rank(),
    }
}

pub(crate) fn claim_bson(claim: Option<&Claim>) -> Bson {
    match claim {
        None => Bson::Null,
        Some(c) => Bson::Document(doc! {
            "run": c.run.as_str(),
            "grant": c.grant.as_str(),
            "claimed_at": date(c.claimed_at),
            "expires_at": date(c.expires_at),
        }),
    }
}

fn ids_bson(ids: &BlockedBy) -> Bson {
    Bson::Array(ids.iter().map(|id| Bson::from(id.as_str())).collect())
}

/// The `$set` of a whole-issue update: every field a change may touch
/// (all but the id, tenant, author, creation time, version, comments).
pub(crate) fn issue_set(issue: &Issue) -> Document {
    doc! {
        field::TITLE: issue.title.as_str(),
        field::TITLE_LOWER: issue.title.as_str().to_lowercase(),
        field::BODY: issue.body.as_str(),
        field::STATE: issue.state.as_str(),
        field::LABELS: labels_bson(&issue.labels),
        field::PRIORITY: issue.priority.as_str(),
        field::URGENCY: issue.priority.urgency(),
        field::PARENT: issue.parent.as_ref().map(|p| p.as_str()),
        field::DUPLICATE_OF: issue.duplicate_of.as_ref().map(|p| p.as_str()),
        field::BLOCKED_BY: ids_bson(&issue.blocked_by),
        field::CLOSE_REASON: issue.close_reason.map(|r| r.as_str()),
        field::CLAIM: claim_bson(issue.claim.as_ref()),
        field::INTEGRITY: issue.integrity.rank(),
    }
}

pub(crate) fn issue_doc(issue: &Issue) -> Document {
    let mut doc = doc! {
        field::PARENT: issue.parent.as_ref().map(|p| p.as_str()),
        field::DUPLICATE_OF: issue.duplicate_of.as_ref().map(|p| p.as_str()),
        field::BLOCKED_BY: ids_bson(&issue.blocked_by),
        field::CLOSE_REASON: issue.close_reason.map(|r| r.as_str()),
        field::CLAIM: claim_bson(issue.claim.as_ref()),
        field::ID: issue.id.as_str(),
        field::TENANT: issue.tenant.as_str(),
        field::TITLE: issue.title.as_str(),
        field::TITLE_LOWER: issue.title.as_str().to_lowercase(),
        field::BODY: issue.body.as_str(),
        field::STATE: issue.state.as_str(),
        field::LABELS: labels_bson(&issue.labels),
        field::PRIORITY: issue.priority.as_str(),
        field::URGENCY: issue.priority.urgency(),
        field::AUTHOR: author_doc(&issue.author),
        field::INTEGRITY: issue.integrity.rank(),
        field::CREATED_AT: date(issue.created_at),
        field::UPDATED_AT: date(issue.updated_at),
        field::VERSION: to_i64(issue.version),
        field::COMMENTS: issue.comments.iter().map(comment_doc).collect::<Vec<_>>(),
        field::TERMS_TITLE: terms_bson(issue.title.as_str()),
        field::TERMS_BODY: terms_bson(issue.body.as_str()),
        field::TERMS_COMMENTS: comment_terms_bson(issue),
    };
    doc.extend(blockers_set(issue));
    doc
}

/// The `open_blockers` of an issue as written, before it is recounted:
/// every blocker counted open, so no write makes an issue ready before its
/// blockers were read; with blockers, the mark that has them recounted.
pub(crate) fn blockers_set(issue: &Issue) -> Document {
    let open = i64::try_from(issue.blocked_by.len()).unwrap_or(i64::MAX);
    let mut set = doc! { field::OPEN_BLOCKERS: open };
    if open > 0 {
        set.insert(field::RECOUNT, recount_token());
    }
    set
}

/// A fresh [`field::RECOUNT`] mark.
pub(crate) fn recount_token() -> String {
    CommentId::generate().into_string()
}

/// A new issue's document, its history holding its creation.
pub(crate) fn created_doc(issue: &Issue) -> Document {
    let mut doc = issue_doc(issue);
    let created = corkboard_board::Change::of(
        corkboard_board::ChangeKind::Created,
        None,
        issue,
        &issue.author,
    );
    doc.insert(field::HISTORY, vec![change_doc(&created)]);
    doc
}

pub(crate) fn comment_doc(comment: &Comment) -> Document {
    doc! {
        "id": comment.id.as_str(),
        "body": comment.body.as_str(),
        "author": author_doc(&comment.author),
        "created_at": date(comment.created_at),
    }
}

/// The `$set` part of an update: every field the patch changes.
pub(crate) fn patch_set(patch: &corkboard_board::IssuePatch) -> Document {
    let mut set = Document::new();
    if let Some(title) = &patch.title {
        set.insert(field::TITLE, title.as_str());
        set.insert(field::TITLE_LOWER, title.as_str().to_lowercase());
        set.insert(field::TERMS_TITLE, terms_bson(title.as_str()));
    }
    if let Some(body) = &patch.body {
        set.insert(field::BODY, body.as_str());
        set.insert(field::TERMS_BODY, terms_bson(body.as_str()));
    }
    if let Some(state) = patch.state {
        set.insert(field::STATE, state.as_str());
    }
    if let Some(labels) = &patch.labels {
        set.insert(field::LABELS, labels_bson(labels));
    }
    if let Some(priority) = patch.priority {
        set.insert(field::PRIORITY, priority.as_str());
        set.insert(field::URGENCY, priority.urgency());
    }
    set
}

/// One change as an entry of the issue's `history` array: its instant,
/// author (as every author is stored) and kind, and its field changes as
/// JSON text. Its version is not stored: every write that makes a version
/// pushes exactly one entry in the same update, so the version of the
/// entry `i` of `n` is the document's version minus `n - 1 - i`.
pub(crate) fn change_doc(change: &corkboard_board::Change) -> Document {
    doc! {
        "at": date(change.at),
        "by": author_doc(&change.by),
        "kind": change.kind.as_str(),
        "fields": serde_json::to_string(&change.fields).unwrap_or_else(|_| "[]".to_owned()),
    }
}

/// The `$push` of one change onto `history`, keeping the newest
/// `HISTORY_KEPT`.
pub(crate) fn history_push(change: &corkboard_board::Change) -> Document {
    let kept = i64::try_from(corkboard_board::history_limits::HISTORY_KEPT).unwrap_or(i64::MAX);
    doc! { field::HISTORY: { "$each": [change_doc(change)], "$slice": -kept } }
}

/// The update of a write that sets an issue's claim to `claim` (none:
/// clears it) and records `change`: a new version, `updated_at` at least
/// the change's instant, the change pushed onto the history. Every claim
/// write (claim, claim_next, hand-over, release, expiry, revocation) is
/// this one update.
pub(crate) fn claim_write(claim: Option<&Claim>, change: &corkboard_board::Change) -> Document {
    doc! {
        "$set": { field::CLAIM: claim_bson(claim) },
        "$inc": { field::VERSION: 1_i64 },
        "$max": { field::UPDATED_AT: date(change.at) },
        "$push": history_push(change),
    }
}

/// The [`claim_write`] of a new claim `claim` of issue `id` by `by`,
/// taking over `before` (none: the issue was free): what `claim_issue`,
/// `claim_next` and a hand-over write.
pub(crate) fn new_claim_write(
    id: &IssueId,
    claim: &Claim,
    by: &Author,
    before: Option<&Claim>,
) -> Document {
    let change = corkboard_board::Change::claim(
        corkboard_board::ChangeKind::Claimed,
        id,
        0,
        claim.claimed_at,
        by,
        before,
        Some(claim),
    );
    claim_write(Some(claim), &change)
}

/// The changes of an issue document (its `_id`, `version` and `history`),
/// oldest first, with their versions.
pub(crate) fn changes_of(doc: &Document) -> Result<Vec<corkboard_board::Change>, StoreError> {
    use corkboard_board::{Change, ChangeKind, FieldChange};
    let r = Reader::new("issue", doc, field::ID);
    let issue = r.parse(IssueId::parse(r.str(field::ID)?))?;
    let version = from_i64(r.int(field::VERSION)?);
    let Ok(entries) = doc.get_array(field::HISTORY) else {
        return Ok(Vec::new());
    };
    let n = entries.len() as u64;
    let mut out = Vec::with_capacity(entries.len());
    for (i, entry) in entries.iter().enumerate() {
        let Bson::Document(entry) = entry else {
            return Err(r.fail("a history entry is not a document"));
        };
        let at = match entry.get("at") {
            Some(Bson::DateTime(at)) => timestamp(at),
            _ => return Err(r.fail("a history entry has no date")),
        };
        let by = match entry.get("by") {
            Some(Bson::Document(by)) => r.author(by)?,
            _ => return Err(r.fail("a history entry has no author")),
        };
        let kind = entry.get_str("kind").unwrap_or_default();
        let kind = [
            ChangeKind::Created,
            ChangeKind::Updated,
            ChangeKind::Commented,
            ChangeKind::Claimed,
            ChangeKind::Released,
            ChangeKind::ClaimExpired,
            ChangeKind::ClaimRevoked,
        ]
        .into_iter()
        .find(|k| k.as_str() == kind)
        .ok_or_else(|| r.fail(format!("unknown history kind {kind:?}")))?;
        let fields: Vec<FieldChange> =
            serde_json::from_str(entry.get_str("fields").unwrap_or("[]"))
                .map_err(|e| r.fail(format!("history fields: {e}")))?;
        out.push(Change {
            issue: issue.clone(),
            version: version.saturating_sub(n - 1 - i as u64),
            at,
            by,
            kind,
            fields,
        });
    }
    Ok(out)
}

/// Reads fields of one stored document, naming it in every error.
struct Reader<'a> {
    what: &'static str,
    id: String,
    doc: &'a Document,
}

impl<'a> Reader<'a> {
    fn new(what: &'static str, doc: &'a Document, id_field: &str) -> Self {
        let id = doc
            .get_str(id_field)
            .map(str::to_owned)
            .unwrap_or_else(|_| format!("{:?}", doc.get(id_field)));
        Self { what, id, doc }
    }

    fn fail(&self, why: impl std::fmt::Display) -> StoreError {
        corrupt(self.what, &self.id, why)
    }

    fn str(&self, key: &str) -> Result<&'a str, StoreError> {
        self.doc
            .get_str(key)
            .map_err(|_| self.fail(format!("field {key} is missing or not a string")))
    }

    fn opt_str(&self, key: &str) -> Result<Option<&'a str>, StoreError> {
        match self.doc.get(key) {
            None | Some(Bson::Null) => Ok(None),
            Some(Bson::String(s)) => Ok(Some(s.as_str())),
            Some(_) => Err(self.fail(format!("field {key} is not a string"))),
        }
    }

    fn date(&self, key: &str) -> Result<Timestamp, StoreError> {
        self.doc
            .get_datetime(key)
            .map(timestamp)
            .map_err(|_| self.fail(format!("field {key} is missing or not a date")))
    }

    fn opt_date(&self, key: &str) -> Result<Option<Timestamp>, StoreError> {
        match self.doc.get(key) {
            None | Some(Bson::Null) => Ok(None),
            Some(Bson::DateTime(d)) => Ok(Some(timestamp(d))),
            Some(_) => Err(self.fail(format!("field {key} is not a date"))),
        }
    }

    fn int(&self, key: &str) -> Result<i64, StoreError> {
        match self.doc.get(key) {
            Some(Bson::Int64(v)) => Ok(*v),
            Some(Bson::Int32(v)) => Ok(i64::from(*v)),
            _ => Err(self.fail(format!("field {key} is missing or not an integer"))),
        }
    }

    fn strings(&self, key: &str) -> Result<Vec<&'a str>, StoreError> {
        let array = self
            .doc
            .get_array(key)
            .map_err(|_| self.fail(format!("field {key} is missing or not an array")))?;
        array
            .iter()
            .map(|v| {
                v.as_str()
                    .ok_or_else(|| self.fail(format!("field {key} holds a non-string")))
            })
            .collect()
    }

    fn sub(&self, key: &str) -> Result<&'a Document, StoreError> {
        self.doc
            .get_document(key)
            .map_err(|_| self.fail(format!("field {key} is missing or not a document")))
    }

    fn parse<T, E: std::fmt::Display>(&self, value: Result<T, E>) -> Result<T, StoreError> {
        value.map_err(|e| self.fail(e))
    }

    fn author(&self, doc: &Document) -> Result<Author, StoreError> {
        let run = doc
            .get_str("run")
            .map_err(|_| self.fail("author.run is missing"))?;
        let grant = match doc.get("grant") {
            None | Some(Bson::Null) => None,
            Some(Bson::String(g)) => Some(self.parse(GrantId::parse(g.as_str()))?),
            Some(_) => return Err(self.fail("author.grant is not a string")),
        };
        // Absent in documents written before kinds existed: those were runs.
        let kind = match doc.get("kind") {
            None | Some(Bson::Null) => AuthorKind::Run,
            Some(Bson::String(k)) => self.parse(AuthorKind::parse(k))?,
            Some(_) => return Err(self.fail("author.kind is not a string")),
        };
        let integrity = match doc.get("integrity") {
            None | Some(Bson::Null) => Integrity::unrecorded(kind),
            Some(Bson::Int64(rank)) => Integrity::from_rank(*rank),
            Some(Bson::Int32(rank)) => Integrity::from_rank(i64::from(*rank)),
            Some(_) => return Err(self.fail("author.integrity is not an integer")),
        };
        Ok(Author {
            kind,
            run: self.parse(RunId::parse(run))?,
            grant,
            integrity,
        })
    }
}

impl Reader<'_> {
    fn opt_id(&self, key: &str) -> Result<Option<IssueId>, StoreError> {
        self.opt_str(key)?
            .map(|id| self.parse(IssueId::parse(id)))
            .transpose()
    }

    /// A stored claim, raw (an ended one too).
    fn claim(&self) -> Result<Option<Claim>, StoreError> {
        let claim = match self.doc.get(field::CLAIM) {
            None | Some(Bson::Null) => return Ok(None),
            Some(Bson::Document(c)) => c,
            Some(_) => return Err(self.fail("field claim is not a document")),
        };
        let inner = Reader {
            what: self.what,
            id: self.id.clone(),
            doc: claim,
        };
        Ok(Some(Claim {
            run: inner.parse(RunId::parse(inner.str("run")?))?,
            grant: inner.parse(GrantId::parse(inner.str("grant")?))?,
            claimed_at: inner.date("claimed_at")?,
            expires_at: inner.date("expires_at")?,
        }))
    }
}

/// The claim stored on an issue document as it is, ended or not: what a
/// takeover of a revoked grant's claim matches on.
pub(crate) fn raw_claim(doc: &Document) -> Result<Option<Claim>, StoreError> {
    Reader::new("issue", doc, field::ID).claim()
}

/// An issue document of `tenant`'s collection. A document naming another
/// tenant is refused: it would mean a document was copied between tenants'
/// collections, and showing it would break tenant pinning. Documents
/// written before relations existed read with none; a finished one without
/// a close reason reads as `completed`. An ended claim reads as none.
pub(crate) fn issue_from_doc(tenant: &TenantId, doc: &Document) -> Result<Issue, StoreError> {
    let r = Reader::new("issue", doc, field::ID);
    let stored_tenant = r.str(field::TENANT)?;
    if stored_tenant != tenant.as_str() {
        return Err(r.fail("it belongs to another tenant"));
    }
    let comments = match doc.get(field::COMMENTS) {
        None | Some(Bson::Null) => Vec::new(),
        Some(Bson::Array(items)) => items
            .iter()
            .map(|item| match item {
                Bson::Document(c) => comment_from_doc(c),
                _ => Err(r.fail("a comment is not a document")),
            })
            .collect::<Result<Vec<_>, _>>()?,
        Some(_) => return Err(r.fail("field comments is not an array")),
    };
    let state = r.parse(IssueState::parse(r.str(field::STATE)?))?;
    let close_reason = match r.opt_str(field::CLOSE_REASON)? {
        Some(reason) => Some(r.parse(CloseReason::parse(reason))?),
        None if state.is_terminal() => Some(CloseReason::Completed),
        None => None,
    };
    let blocked_by = match doc.get(field::BLOCKED_BY) {
        None | Some(Bson::Null) => BlockedBy::default(),
        Some(_) => r.parse(BlockedBy::parse(
            r.strings(field::BLOCKED_BY)?
                .into_iter()
                .map(IssueId::parse)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| r.fail(e))?,
        ))?,
    };
    let author = r.author(r.sub(field::AUTHOR)?)?;
    let integrity = issue_integrity(doc);
    Ok(Issue {
        parent: r.opt_id(field::PARENT)?,
        duplicate_of: r.opt_id(field::DUPLICATE_OF)?,
        blocked_by,
        close_reason,
        claim: r.claim()?.and_then(|c| c.live_at(Timestamp::now())),
        id: r.parse(IssueId::parse(r.str(field::ID)?))?,
        tenant: tenant.clone(),
        title: r.parse(Title::parse(r.str(field::TITLE)?))?,
        body: r.parse(Body::parse(r.str(field::BODY)?))?,
        state,
        labels: r.parse(Labels::parse(r.strings(field::LABELS)?))?,
        priority: r.parse(Priority::parse(r.str(field::PRIORITY)?))?,
        author,
        integrity,
        created_at: r.date(field::CREATED_AT)?,
        updated_at: r.date(field::UPDATED_AT)?,
        version: from_i64(r.int(field::VERSION)?),
        comments,
    })
}

/// An issue document's level. One from before levels were stored has
/// none and reads as the lowest, whoever wrote it: a floor's `$gte`
/// filter does not match a missing field, and what a run is shown must be
/// what it reads (documents are not rewritten on upgrade).
pub(crate) fn issue_integrity(doc: &Document) -> Integrity {
    match doc.get(field::INTEGRITY) {
        Some(Bson::Int64(rank)) => Integrity::from_rank(*rank),
        Some(Bson::Int32(rank)) => Integrity::from_rank(i64::from(*rank)),
        _ => Integrity::External,
    }
}

/// A comment, embedded in an issue or kept in an idempotency record.
pub(crate) fn comment_from_doc(doc: &Document) -> Result<Comment, StoreError> {
    let r = Reader::new("comment", doc, "id");
    Ok(Comment {
        id: r.parse(CommentId::parse(r.str("id")?))?,
        body: r.parse(CommentBody::parse(r.str("body")?))?,
        author: r.author(r.sub("author")?)?,
        created_at: r.date("created_at")?,
    })
}

pub(crate) mod grant_field {
    pub const TOKEN_HASH: &str = "token_hash";
    pub const RUN: &str = "run";
    pub const EXPIRES_AT: &str = "expires_at";
    pub const REVOKED_AT: &str = "revoked_at";
    pub const REVOKED_BY: &str = "revoked_by";
    /// The limits, `{create_issue: 3, ...}` (absent on older grants).
    pub const BUDGETS: &str = "budgets";
    pub const MIN_INTEGRITY: &str = "min_integrity";
    /// Writes taken per kind, `{create_issue: 1, ...}`: starts at 0 for
    /// every budgeted kind and only changes by `$inc` under a `$lt` filter.
    pub const BUDGET_USED: &str = "budget_used";
}

/// The document field counting `kind`'s writes taken.
pub(crate) fn budget_used_field(kind: corkboard_board::BudgetKind) -> String {
    format!("{}.{}", grant_field::BUDGET_USED, kind.as_str())
}

pub(crate) fn grant_doc(grant: &Grant, token_hash: &str) -> Document {
    doc! {
        field::ID: grant.id.as_str(),
        field::TENANT: grant.tenant.as_str(),
        grant_field::RUN: grant.run.as_str(),
        "capabilities": grant.capabilities.names(),
        field::CREATED_AT: date(grant.created_at),
        grant_field::EXPIRES_AT: date(grant.expires_at),
        "created_by": grant.created_by.as_str(),
        grant_field::TOKEN_HASH: token_hash,
        grant_field::REVOKED_AT: Bson::Null,
        grant_field::REVOKED_BY: Bson::Null,
        grant_field::BUDGETS: grant
            .budgets
            .iter()
            .map(|(kind, limit)| (kind.as_str().to_owned(), Bson::Int64(i64::from(limit))))
            .collect::<Document>(),
        grant_field::MIN_INTEGRITY: grant.min_integrity.map(|level| level.as_str()),
        grant_field::BUDGET_USED: grant
            .budgets
            .iter()
            .map(|(kind, _)| (kind.as_str().to_owned(), Bson::Int64(0)))
            .collect::<Document>(),
    }
}

/// Per kind, an integer of a budget sub-document (`budgets`, `budget_used`).
pub(crate) fn budget_counts(
    doc: &Document,
    key: &str,
) -> Result<Vec<(corkboard_board::BudgetKind, u32)>, StoreError> {
    let id = doc.get_str(field::ID).unwrap_or("?");
    let Ok(sub) = doc.get_document(key) else {
        return Ok(Vec::new());
    };
    sub.iter()
        .map(|(name, value)| {
            let kind =
                corkboard_board::BudgetKind::parse(name).map_err(|e| corrupt("grant", id, e))?;
            let n = match value {
                Bson::Int64(v) => *v,
                Bson::Int32(v) => i64::from(*v),
                _ => {
                    return Err(corrupt(
                        "grant",
                        id,
                        format!("{key}.{name} is not an integer"),
                    ));
                }
            };
            Ok((kind, u32::try_from(n.max(0)).unwrap_or(u32::MAX)))
        })
        .collect()
}

pub(crate) fn grant_from_doc(doc: &Document) -> Result<GrantEvent, StoreError> {
    let r = Reader::new("grant", doc, field::ID);
    Ok(GrantEvent {
        grant: Grant {
            id: r.parse(GrantId::parse(r.str(field::ID)?))?,
            tenant: r.parse(TenantId::parse(r.str(field::TENANT)?))?,
            run: r.parse(RunId::parse(r.str(grant_field::RUN)?))?,
            capabilities: r.parse(Capabilities::parse_list(r.strings("capabilities")?))?,
            created_at: r.date(field::CREATED_AT)?,
            expires_at: r.date(grant_field::EXPIRES_AT)?,
            created_by: r.str("created_by")?.to_owned(),
            budgets: budget_counts(doc, grant_field::BUDGETS)?
                .into_iter()
                .try_fold(corkboard_board::Budgets::new(), |acc, (kind, limit)| {
                    acc.with(kind, limit)
                })
                .map_err(|e| r.fail(e))?,
            min_integrity: r
                .opt_str(grant_field::MIN_INTEGRITY)?
                .map(|level| Integrity::parse("min_integrity", level))
                .transpose()
                .map_err(|e| r.fail(e))?,
        },
        token_hash: r.str(grant_field::TOKEN_HASH)?.to_owned(),
        revoked_at: r.opt_date(grant_field::REVOKED_AT)?,
        revoked_by: r.opt_str(grant_field::REVOKED_BY)?.map(str::to_owned),
    })
}

pub(crate) mod audit_field {
    pub const AT: &str = "at";
    pub const RUN: &str = "run";
    pub const ISSUE: &str = "issue";
}

pub(crate) fn audit_doc(record: &AuditRecord) -> Document {
    doc! {
        audit_field::AT: date(record.at),
        field::TENANT: record.tenant.as_str(),
        audit_field::RUN: record.run.as_str(),
        "grant": record.grant.as_str(),
        "tool": record.tool.as_str(),
        "outcome": record.outcome.as_str(),
        "latency_micros": to_i64(record.latency_micros),
        "arguments_hash": record.arguments_hash.as_str(),
        audit_field::ISSUE: record.issue.as_ref().map(|i| i.as_str()),
        "definition_hash": record.definition_hash.as_ref().map(|h| h.as_str()),
    }
}

fn outcome_from_str(text: &str) -> Option<AuditOutcome> {
    AuditOutcome::parse(text)
}

pub(crate) fn audit_from_doc(doc: &Document) -> Result<AuditRecord, StoreError> {
    let r = Reader::new("audit record", doc, field::ID);
    let outcome = r.str("outcome")?;
    Ok(AuditRecord {
        at: r.date(audit_field::AT)?,
        tenant: r.parse(TenantId::parse(r.str(field::TENANT)?))?,
        run: r.parse(RunId::parse(r.str(audit_field::RUN)?))?,
        grant: r.parse(GrantId::parse(r.str("grant")?))?,
        tool: r.str("tool")?.to_owned(),
        outcome: outcome_from_str(outcome)
            .ok_or_else(|| r.fail(format!("unknown outcome {outcome:?}")))?,
        latency_micros: from_i64(r.int("latency_micros")?),
        arguments_hash: ArgumentsHash::from_hex(r.str("arguments_hash")?.to_owned()),
        definition_hash: r
            .opt_str("definition_hash")?
            .map(|h| DefinitionHash::from_stored(h.to_owned())),
        issue: r
            .opt_str(audit_field::ISSUE)?
            .map(IssueId::parse)
            .transpose()
            .map_err(|e| r.fail(e))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use corkboard_board::{IssuePatch, NewIssue};

    fn tenant() -> TenantId {
        TenantId::parse("acme").unwrap()
    }

    fn sample_issue() -> Issue {
        let mut new = NewIssue::new(Title::parse("Straße is FLAKY").unwrap());
        new.labels = Labels::parse(["ci", "bug"]).unwrap();
        new.priority = Priority::High;
        let author = Author {
            kind: corkboard_board::AuthorKind::Run,
            run: RunId::parse("run-1").unwrap(),
            grant: Some(GrantId::generate()),
            integrity: corkboard_board::Integrity::Agent,
        };
        let mut issue = new.into_issue(
            tenant(),
            author.clone(),
            Timestamp::from_millis(1_700_000_000_123),
        );
        issue.comments.push(Comment {
            id: CommentId::generate(),
            body: CommentBody::parse("seen twice").unwrap(),
            author: Author {
                kind: corkboard_board::AuthorKind::Run,
                run: author.run,
                grant: None,
                integrity: corkboard_board::Integrity::Agent,
            },
            created_at: Timestamp::from_millis(1_700_000_000_999),
        });
        issue
    }

    #[test]
    fn issues_round_trip_and_keep_a_lower_cased_title() {
        let issue = sample_issue();
        let doc = issue_doc(&issue);
        assert_eq!(doc.get_str(field::TITLE_LOWER).unwrap(), "straße is flaky");
        assert_eq!(issue_from_doc(&tenant(), &doc).unwrap(), issue);
    }

    #[test]
    fn an_issue_of_another_tenant_is_refused() {
        let doc = issue_doc(&sample_issue());
        let other = TenantId::parse("other").unwrap();
        let err = issue_from_doc(&other, &doc).unwrap_err();
        assert!(
            matches!(err, StoreError::Internal(ref m) if m.contains("another tenant")),
            "{err}"
        );
    }

    #[test]
    fn damaged_documents_name_the_document_and_field() {
        let mut doc = issue_doc(&sample_issue());
        doc.insert(field::STATE, "sideways");
        let err = issue_from_doc(&tenant(), &doc).unwrap_err().to_string();
        assert!(err.contains("iss_") && err.contains("sideways"), "{err}");
        doc.insert(field::STATE, "todo");
        doc.remove(field::VERSION);
        let err = issue_from_doc(&tenant(), &doc).unwrap_err().to_string();
        assert!(err.contains("version"), "{err}");
    }

    #[test]
    fn patches_set_only_what_they_change_and_keep_the_lower_title_in_step() {
        let patch = IssuePatch {
            title: Some(Title::parse("New TITLE").unwrap()),
            state: Some(IssueState::Done),
            ..IssuePatch::default()
        };
        let set = patch_set(&patch);
        // Title, its lower-cased copy, its search words, and the state.
        assert_eq!(set.len(), 4);
        assert_eq!(set.get_str(field::TITLE_LOWER).unwrap(), "new title");
        assert_eq!(
            set.get_array(field::TERMS_TITLE).unwrap(),
            &vec![Bson::from("new"), Bson::from("title")]
        );
        assert!(patch_set(&IssuePatch::default()).is_empty());
    }

    #[test]
    fn grants_round_trip_with_and_without_revocation() {
        let grant = Grant {
            id: GrantId::generate(),
            tenant: tenant(),
            run: RunId::parse("r1").unwrap(),
            capabilities: Capabilities::parse_csv("issues:read,comments:write").unwrap(),
            created_at: Timestamp::from_millis(1),
            expires_at: Timestamp::from_millis(2),
            created_by: "admin".into(),
            budgets: corkboard_board::Budgets::parse_csv("create_issue=3").unwrap(),
            min_integrity: None,
        };
        let mut doc = grant_doc(&grant, "abc");
        let event = grant_from_doc(&doc).unwrap();
        assert_eq!(event.grant, grant);
        assert_eq!(event.token_hash, "abc");
        assert_eq!(event.revoked_at, None);
        doc.insert(grant_field::REVOKED_AT, date(Timestamp::from_millis(5)));
        doc.insert(grant_field::REVOKED_BY, "ops");
        let event = grant_from_doc(&doc).unwrap();
        assert_eq!(event.revoked_at, Some(Timestamp::from_millis(5)));
        assert_eq!(event.revoked_by.as_deref(), Some("ops"));
    }

    #[test]
    fn audit_records_round_trip() {
        for issue in [None, Some(IssueId::generate())] {
            let record = AuditRecord {
                at: Timestamp::from_millis(42),
                tenant: tenant(),
                run: RunId::parse("r1").unwrap(),
                grant: GrantId::generate(),
                tool: "create_issue".into(),
                outcome: AuditOutcome::RateLimited,
                latency_micros: 1234,
                arguments_hash: ArgumentsHash::of(b"{}"),
                definition_hash: None,
                issue,
            };
            assert_eq!(audit_from_doc(&audit_doc(&record)).unwrap(), record);
        }
    }

    #[test]
    fn unsigned_values_saturate_instead_of_wrapping() {
        assert_eq!(to_i64(u64::MAX), i64::MAX);
        assert_eq!(from_i64(-1), 0);
    }
}
