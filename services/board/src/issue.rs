//! Issues and comments, the commands that change them, and list queries.

use crate::error::ValidationError;
use crate::ids::{CommentId, GrantId, IssueId, RunId, TenantId};
use crate::integrity::Integrity;
use crate::relations::{BlockedBy, Claim, ClaimFilter, CloseReason};
use crate::timestamp::Timestamp;
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeSet;
use std::fmt;

/// Validation limits, in one place so schemas and error messages agree.
pub mod limits {
    /// Maximum title length, in characters.
    pub const TITLE_MAX_CHARS: usize = 200;
    /// Maximum issue or comment body length, in bytes (UTF-8).
    pub const BODY_MAX_BYTES: usize = 64 * 1024;
    /// Maximum number of labels on one issue.
    pub const LABELS_MAX: usize = 20;
    /// Maximum label length, in characters.
    pub const LABEL_MAX_CHARS: usize = 50;
    /// Largest page a list may ask for.
    pub const PAGE_MAX: u32 = 200;
    /// Page size when the caller does not choose one.
    pub const PAGE_DEFAULT: u32 = 50;
    /// Maximum length of the free-text filter, in characters.
    pub const TEXT_FILTER_MAX_CHARS: usize = 200;
    /// Maximum number of comments on one issue. Every read returns them
    /// all, so an unbounded thread would make each `get_issue` unbounded
    /// too: 500 comments of at most 64 KiB keep an issue under 32 MiB.
    pub const COMMENTS_MAX: usize = 500;
    /// Comment bytes (bodies) one page of issues carries at most, its
    /// first issue's whatever their size: a list or search page whose
    /// issues' comments would pass it ends early, its cursor (or offset)
    /// right after the last issue it holds, so nothing is skipped. Without
    /// it, a page of 200 issues of 500 comments of 64 KiB would read 6 GiB.
    pub const PAGE_COMMENT_BYTES_MAX: usize = 4 * 1024 * 1024;
    /// Maximum length of a search query, in characters.
    pub const SEARCH_QUERY_MAX_CHARS: usize = 200;
    /// Most distinct terms one search query may have: each is one more
    /// index lookup (and, on MongoDB, one more condition).
    pub const SEARCH_TERMS_MAX: usize = 16;
    /// Hits per search answer when the caller does not choose.
    pub const SEARCH_LIMIT_DEFAULT: u32 = 10;
    /// Largest number of hits one search answer may ask for.
    pub const SEARCH_LIMIT_MAX: u32 = 50;
    /// How deep a search may page: `offset + limit` is at most this. Ranked
    /// results deeper than this are a sign the query should be narrower.
    pub const SEARCH_DEPTH_MAX: u32 = 1000;
    /// Most similar issues `similar_open_issues` answers with.
    pub const SIMILAR_LIMIT_MAX: u32 = 10;
    /// Candidates a store reads for `similar_open_issues` among the open
    /// issues whose titles hold every word of the new title (newest
    /// first): where near duplicates are.
    pub const SIMILAR_ALL_CANDIDATES: u32 = 20;
    /// Candidates a store reads among the open issues whose titles share
    /// any word with it (newest first), unless the every-word candidates
    /// already settle the answer (`SimilarRanking::settled`). Both
    /// bounds keep the look-up every create makes independent of the
    /// board's size: ranking every title that shares a word made each
    /// create cost linear in the board (362 creates/s on a board of
    /// identical titles), and each candidate read is one more issue read
    /// and scored (`rank_similar`) on the request's worker, so they stay
    /// small: four times the five a create answer shows.
    pub const SIMILAR_ANY_CANDIDATES: u32 = 20;
}

/// Where an issue stands. The order is the board's column order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IssueState {
    Inbox,
    Triage,
    Todo,
    InProgress,
    Blocked,
    Done,
    Closed,
}

impl IssueState {
    pub const ALL: [IssueState; 7] = [
        Self::Inbox,
        Self::Triage,
        Self::Todo,
        Self::InProgress,
        Self::Blocked,
        Self::Done,
        Self::Closed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Inbox => "inbox",
            Self::Triage => "triage",
            Self::Todo => "todo",
            Self::InProgress => "in_progress",
            Self::Blocked => "blocked",
            Self::Done => "done",
            Self::Closed => "closed",
        }
    }

    pub fn parse(text: &str) -> Result<Self, ValidationError> {
        Self::ALL
            .into_iter()
            .find(|s| s.as_str() == text)
            .ok_or_else(|| {
                ValidationError::new(
                    "state",
                    format!(
                        "unknown state {text:?}; expected one of {}",
                        Self::names().join(", ")
                    ),
                )
            })
    }

    pub fn names() -> Vec<&'static str> {
        Self::ALL.iter().map(|s| s.as_str()).collect()
    }
}

impl fmt::Display for IssueState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How urgent an issue is. `none` means nobody has said.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Priority {
    #[default]
    None,
    Low,
    Medium,
    High,
    Urgent,
}

impl Priority {
    pub const ALL: [Priority; 5] = [
        Self::None,
        Self::Low,
        Self::Medium,
        Self::High,
        Self::Urgent,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
            Self::Urgent => "urgent",
        }
    }

    pub fn parse(text: &str) -> Result<Self, ValidationError> {
        Self::ALL
            .into_iter()
            .find(|p| p.as_str() == text)
            .ok_or_else(|| {
                ValidationError::new(
                    "priority",
                    format!(
                        "unknown priority {text:?}; expected one of none, low, medium, high, urgent"
                    ),
                )
            })
    }
}

macro_rules! text_newtype {
    ($(#[$doc:meta])* $name:ident, $field:literal, $check:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            pub fn parse(value: impl Into<String>) -> Result<Self, ValidationError> {
                let value: String = value.into();
                let check: fn(&str) -> Result<(), String> = $check;
                check(&value).map_err(|reason| ValidationError::new($field, reason))?;
                Ok(Self(value))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }

            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                Self::parse(String::deserialize(deserializer)?).map_err(serde::de::Error::custom)
            }
        }
    };
}

fn check_body(value: &str) -> Result<(), String> {
    if value.len() > limits::BODY_MAX_BYTES {
        return Err(format!("must be at most {} bytes", limits::BODY_MAX_BYTES));
    }
    if value.contains('\0') {
        return Err("must not contain NUL characters".into());
    }
    Ok(())
}

text_newtype!(
    /// An issue title: 1-200 characters, not blank, on one line.
    Title, "title", |v| {
        if v.trim().is_empty() {
            return Err("must not be empty".into());
        }
        if v.chars().count() > limits::TITLE_MAX_CHARS {
            return Err(format!("must be at most {} characters", limits::TITLE_MAX_CHARS));
        }
        if v.chars().any(char::is_control) {
            return Err("must be a single line without control characters".into());
        }
        Ok(())
    }
);
text_newtype!(
    /// An issue body (Markdown, shown as text): up to 64 KiB, may be empty.
    #[derive(Default)]
    Body, "body", check_body
);
text_newtype!(
    /// A comment body: 1 byte to 64 KiB.
    CommentBody, "body", |v| {
        if v.trim().is_empty() {
            return Err("must not be empty".into());
        }
        check_body(v)
    }
);
text_newtype!(
    /// A label: 1-50 of lowercase letters, digits, `-`, `_`, `.`, `:` and `/`.
    Label, "labels", |v| {
        if v.is_empty() || v.chars().count() > limits::LABEL_MAX_CHARS {
            return Err(format!("each label must be 1 to {} characters", limits::LABEL_MAX_CHARS));
        }
        if !v.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-_.:/".contains(c)) {
            return Err(format!(
                "label {v:?} may contain only lowercase letters, digits and - _ . : /"
            ));
        }
        Ok(())
    }
);

/// A set of at most 20 distinct labels, kept sorted so equal sets compare equal.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct Labels(Vec<Label>);

impl Labels {
    pub fn parse<I, S>(values: I) -> Result<Self, ValidationError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let set = values
            .into_iter()
            .map(|v| Label::parse(v).map(|l| l.0))
            .collect::<Result<BTreeSet<String>, _>>()?;
        if set.len() > limits::LABELS_MAX {
            return Err(ValidationError::new(
                "labels",
                format!("at most {} labels are allowed", limits::LABELS_MAX),
            ));
        }
        Ok(Self(set.into_iter().map(Label).collect()))
    }

    pub fn iter(&self) -> impl Iterator<Item = &Label> {
        self.0.iter()
    }

    pub fn contains(&self, label: &Label) -> bool {
        self.0.binary_search_by(|l| l.0.cmp(&label.0)).is_ok()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn to_strings(&self) -> Vec<String> {
        self.0.iter().map(|l| l.0.clone()).collect()
    }
}

impl<'de> Deserialize<'de> for Labels {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Self::parse(Vec::<String>::deserialize(deserializer)?).map_err(serde::de::Error::custom)
    }
}

/// What kind of principal wrote something. Rows written before kinds
/// existed read as [`AuthorKind::Run`]: every write then came from a run or
/// was indistinguishable from one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthorKind {
    /// An agent run, under its grant.
    #[default]
    Run,
    /// A person signed in to the web board.
    Person,
    /// A caller of the admin API with an admin JWT (a script, an orchestrator).
    Admin,
}

impl AuthorKind {
    pub const ALL: [AuthorKind; 3] = [Self::Run, Self::Person, Self::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Run => "run",
            Self::Person => "person",
            Self::Admin => "admin",
        }
    }

    /// Parses a stored kind; unknown text is a [`ValidationError`].
    pub fn parse(value: &str) -> Result<Self, ValidationError> {
        Self::ALL
            .into_iter()
            .find(|k| k.as_str() == value)
            .ok_or_else(|| ValidationError::new("author.kind", "expected run, person or admin"))
    }

    pub fn names() -> Vec<&'static str> {
        Self::ALL.iter().map(|k| k.as_str()).collect()
    }
}

/// Who wrote something: what kind of principal, its name, and the grant it
/// acted under (runs only). A run is named by its run id; a person or an
/// admin-API caller by their admin subject, made safe as a [`RunId`]
/// ([`Author::principal`]), with no grant.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "StoredAuthor")]
pub struct Author {
    pub kind: AuthorKind,
    pub run: RunId,
    pub grant: Option<GrantId>,
    /// The writer's level when it wrote ([`Integrity`]).
    pub integrity: Integrity,
}

/// An author as stored: rows from before kinds existed were runs, rows
/// from before levels existed read as [`Integrity::unrecorded`].
#[derive(Deserialize)]
struct StoredAuthor {
    #[serde(default)]
    kind: AuthorKind,
    run: RunId,
    grant: Option<GrantId>,
    #[serde(default)]
    integrity: Option<Integrity>,
}

impl From<StoredAuthor> for Author {
    fn from(stored: StoredAuthor) -> Self {
        Self {
            kind: stored.kind,
            run: stored.run,
            grant: stored.grant,
            integrity: stored
                .integrity
                .unwrap_or_else(|| Integrity::unrecorded(stored.kind)),
        }
    }
}

impl Author {
    /// A run acting under `grant`, writing at `integrity`
    /// ([`Integrity::of_writer`]).
    pub fn run(run: RunId, grant: Option<GrantId>, integrity: Integrity) -> Self {
        Self {
            kind: AuthorKind::Run,
            run,
            grant,
            integrity,
        }
    }

    /// A person (web board) or admin-API caller named by their admin
    /// subject. A subject holds any text, a run name only
    /// `[A-Za-z0-9._-]`: every other character becomes `_`, a leading
    /// separator gets a `p` in front, and the name is cut at 128 characters.
    /// The kind keeps a person apart from a run of the same name.
    pub fn principal(kind: AuthorKind, subject: &str) -> Self {
        let mut name: String = subject
            .trim()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        if !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
            name.insert(0, 'p');
        }
        name.truncate(128);
        Self {
            kind,
            // Cannot fail: only allowed characters, starting with one that
            // may lead, 1 to 128 of them.
            run: RunId::parse(name).expect("only run-name characters, 1 to 128 of them"),
            grant: None,
            integrity: Integrity::of_writer(kind, false),
        }
    }

    /// Whether a person or an admin caller wrote it rather than a run.
    pub fn is_person(&self) -> bool {
        self.kind != AuthorKind::Run
    }
}

/// A comment on an issue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Comment {
    pub id: CommentId,
    pub body: CommentBody,
    pub author: Author,
    pub created_at: Timestamp,
}

/// An issue as stored, with its comments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Issue {
    pub id: IssueId,
    pub tenant: TenantId,
    pub title: Title,
    pub body: Body,
    pub state: IssueState,
    pub labels: Labels,
    pub priority: Priority,
    pub author: Author,
    /// The lowest level of its author and everyone who edited it since
    /// (comments have their own: their author's).
    #[serde(default)]
    pub integrity: Integrity,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// Starts at 1 and grows by one with every change (comments included).
    pub version: u64,
    pub comments: Vec<Comment>,
    /// The issue this one is a sub-issue of.
    #[serde(default)]
    pub parent: Option<IssueId>,
    /// The original this issue duplicates.
    #[serde(default)]
    pub duplicate_of: Option<IssueId>,
    /// Issues that must be finished before this one.
    #[serde(default)]
    pub blocked_by: BlockedBy,
    /// Why it was finished: set exactly when the state is terminal
    /// (`done`, `closed`).
    #[serde(default)]
    pub close_reason: Option<CloseReason>,
    /// The run working on it, if any (an ended claim reads as none).
    #[serde(default)]
    pub claim: Option<Claim>,
}

/// A request to create an issue. Fields the caller did not send take the
/// domain's documented defaults (state `inbox`, priority `none`, no labels).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NewIssue {
    pub title: Title,
    pub body: Body,
    pub state: IssueState,
    pub labels: Labels,
    pub priority: Priority,
    // The relations are left out of the fingerprint when unset, so a
    // request without them hashes as it did before they existed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<IssueId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duplicate_of: Option<IssueId>,
    #[serde(skip_serializing_if = "BlockedBy::is_empty")]
    pub blocked_by: BlockedBy,
    /// Only with a terminal state; defaults to `completed` there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub close_reason: Option<CloseReason>,
}

impl NewIssue {
    pub fn new(title: Title) -> Self {
        Self {
            title,
            body: Body::default(),
            state: IssueState::Inbox,
            labels: Labels::default(),
            priority: Priority::None,
            parent: None,
            duplicate_of: None,
            blocked_by: BlockedBy::default(),
            close_reason: None,
        }
    }

    /// Every issue id this request relates to, with the field naming it:
    /// what a store checks exists in the caller's tenant.
    pub fn related(&self) -> Vec<(&'static str, &IssueId)> {
        related(
            self.parent.as_ref(),
            self.duplicate_of.as_ref(),
            Some(&self.blocked_by),
        )
    }

    /// Checks what needs no store (the lifecycle, a bare `duplicate`).
    pub fn validate(&self) -> Result<(), ValidationError> {
        let reason = close_reason_for(self.state, None, self.close_reason)?;
        if reason == Some(CloseReason::Duplicate) && self.duplicate_of.is_none() {
            return Err(ValidationError::new(
                "close_reason",
                "duplicate needs duplicate_of: the id of the original issue",
            ));
        }
        Ok(())
    }

    /// A stable digest of the request, used to tell an idempotent replay
    /// (same key, same request) from a conflicting one (same key, other request).
    pub fn fingerprint(&self) -> String {
        fingerprint(&self)
    }

    /// Builds the issue this request creates.
    pub fn into_issue(self, tenant: TenantId, author: Author, now: Timestamp) -> Issue {
        Issue {
            id: IssueId::generate(),
            tenant,
            title: self.title,
            body: self.body,
            state: self.state,
            labels: self.labels,
            priority: self.priority,
            integrity: author.integrity,
            author,
            created_at: now,
            updated_at: now,
            version: 1,
            comments: Vec::new(),
            close_reason: close_reason_for(self.state, None, self.close_reason)
                .ok()
                .flatten(),
            parent: self.parent,
            duplicate_of: self.duplicate_of,
            blocked_by: self.blocked_by,
            claim: None,
        }
    }
}

fn related<'a>(
    parent: Option<&'a IssueId>,
    duplicate_of: Option<&'a IssueId>,
    blocked_by: Option<&'a BlockedBy>,
) -> Vec<(&'static str, &'a IssueId)> {
    let mut out = Vec::new();
    out.extend(parent.map(|id| ("parent", id)));
    out.extend(duplicate_of.map(|id| ("duplicate_of", id)));
    out.extend(
        blocked_by
            .into_iter()
            .flat_map(|b| b.iter().map(|id| ("blocked_by", id))),
    );
    out
}

/// The lifecycle rule, once: an issue in a terminal state (`done`,
/// `closed`) has a close reason (the one asked for, else the one it had,
/// else `completed`); an issue in an open state has none, and asking for
/// one there is refused, so a reason is never silently dropped.
fn close_reason_for(
    state: IssueState,
    current: Option<CloseReason>,
    asked: Option<CloseReason>,
) -> Result<Option<CloseReason>, ValidationError> {
    if state.is_terminal() {
        return Ok(Some(asked.or(current).unwrap_or(CloseReason::Completed)));
    }
    match asked {
        Some(_) => Err(ValidationError::new(
            "close_reason",
            format!(
                "only a done or closed issue has a close reason; this one is {state}: set state too"
            ),
        )),
        None => Ok(None),
    }
}

/// A request to add a comment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NewComment {
    pub issue: IssueId,
    pub body: CommentBody,
}

impl NewComment {
    pub fn fingerprint(&self) -> String {
        fingerprint(&self)
    }
}

fn fingerprint<T: Serialize>(value: &T) -> String {
    // serde_json keeps struct field order, so equal requests hash equally.
    let bytes = serde_json::to_vec(value).unwrap_or_default();
    crate::digest::sha256_hex(&bytes)
}

/// A partial update; `None` fields stay as they are. For the relations
/// `parent` and `duplicate_of`, `Some(None)` clears them; `blocked_by`
/// replaces the whole set (empty clears it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct IssuePatch {
    pub title: Option<Title>,
    pub body: Option<Body>,
    pub state: Option<IssueState>,
    pub labels: Option<Labels>,
    pub priority: Option<Priority>,
    pub parent: Option<Option<IssueId>>,
    pub duplicate_of: Option<Option<IssueId>>,
    pub blocked_by: Option<BlockedBy>,
    /// With a terminal `state` (or on an issue already in one).
    pub close_reason: Option<CloseReason>,
    /// Who makes the change, as the issue's history records it (not a
    /// field of the issue; `None`: recorded as run `unknown`).
    #[serde(skip)]
    pub actor: Option<Author>,
}

impl IssuePatch {
    /// Who the history records as making this change.
    pub fn actor(&self) -> Author {
        self.actor.clone().unwrap_or_else(|| {
            Author::run(
                RunId::parse("unknown").expect("a valid run id"),
                None,
                Integrity::External,
            )
        })
    }

    pub fn is_empty(&self) -> bool {
        self.title.is_none()
            && self.body.is_none()
            && self.state.is_none()
            && self.labels.is_none()
            && self.priority.is_none()
            && self.parent.is_none()
            && self.duplicate_of.is_none()
            && self.blocked_by.is_none()
            && self.close_reason.is_none()
    }

    /// Every issue id this patch sets, with the field naming it: what a
    /// store checks exists in the caller's tenant.
    pub fn related(&self) -> Vec<(&'static str, &IssueId)> {
        related(
            self.parent.as_ref().and_then(Option::as_ref),
            self.duplicate_of.as_ref().and_then(Option::as_ref),
            self.blocked_by.as_ref(),
        )
    }

    /// The parent this patch sets (not clears), whose chain a store walks.
    pub fn new_parent(&self) -> Option<&IssueId> {
        self.parent.as_ref().and_then(Option::as_ref)
    }

    /// Applies the patch, bumping version and `updated_at`, with the
    /// lifecycle rules: entering a terminal state sets a close reason
    /// (default `completed`) and ends the claim; reopening clears the
    /// reason. Refused, with `issue` unchanged, when the result breaks a
    /// rule that needs no store (self-relations, a reason on an open
    /// issue, `duplicate` without `duplicate_of`).
    pub fn apply_to(self, issue: &mut Issue, now: Timestamp) -> Result<(), ValidationError> {
        let mut next = issue.clone();
        self.apply_fields(&mut next);
        next.close_reason = close_reason_for(next.state, issue.close_reason, self.close_reason)?;
        if next.state.is_terminal() {
            next.claim = None;
        }
        crate::relations::check_relations(Some(&issue.id), &next)?;
        next.integrity = issue.integrity.lowered_by(self.actor().integrity);
        next.version += 1;
        next.updated_at = now;
        *issue = next;
        Ok(())
    }

    fn apply_fields(&self, issue: &mut Issue) {
        let this = self.clone();
        if let Some(parent) = this.parent {
            issue.parent = parent;
        }
        if let Some(duplicate_of) = this.duplicate_of {
            issue.duplicate_of = duplicate_of;
        }
        if let Some(blocked_by) = this.blocked_by {
            issue.blocked_by = blocked_by;
        }
        if let Some(title) = this.title {
            issue.title = title;
        }
        if let Some(body) = this.body {
            issue.body = body;
        }
        if let Some(state) = this.state {
            issue.state = state;
        }
        if let Some(labels) = this.labels {
            issue.labels = labels;
        }
        if let Some(priority) = this.priority {
            issue.priority = priority;
        }
    }
}

/// Which labels a listed issue must carry.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum LabelFilter {
    #[default]
    None,
    /// Every one of these labels.
    All(Vec<Label>),
    /// At least one of these labels.
    Any(Vec<Label>),
}

impl LabelFilter {
    pub fn matches(&self, labels: &Labels) -> bool {
        match self {
            Self::None => true,
            Self::All(wanted) => wanted.iter().all(|l| labels.contains(l)),
            Self::Any(wanted) => wanted.iter().any(|l| labels.contains(l)),
        }
    }
}

/// A list request. Issues come newest first; `cursor` is the last id of the
/// previous page, so a page never repeats or skips an issue that existed when
/// the first page was read, however many are created meanwhile.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ListQuery {
    pub states: Vec<IssueState>,
    pub labels: LabelFilter,
    /// Case-insensitive substring of the title.
    pub text: Option<String>,
    pub author_run: Option<RunId>,
    /// Issues of any of these priorities; empty: every priority.
    pub priorities: Vec<Priority>,
    /// Issues changed (or created) at or after this instant.
    pub updated_since: Option<Timestamp>,
    pub limit: u32,
    pub cursor: Option<IssueId>,
    /// Sub-issues of this issue only.
    pub parent: Option<IssueId>,
    /// Claimed, unclaimed, or claimed by one run (ended claims count as none).
    pub claim: ClaimFilter,
    /// Ready work only: open, unclaimed (or its claim ended) and every
    /// `blocked_by` issue done or closed, best first (most urgent, then
    /// oldest: [`crate::ready_order`]) instead of newest first. The cursor
    /// is still the last id of the previous page.
    pub ready: bool,
    /// Issues at this level or higher only (the caller's grant's floor,
    /// [`crate::Grant::min_integrity`]; never from the caller's input).
    pub min_integrity: Option<Integrity>,
    /// What the page holds of each issue's comments.
    pub comments: PageComments,
}

/// What a page holds of its issues' comments.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum PageComments {
    /// Every comment of each issue (the page ends before the comments
    /// pass [`limits::PAGE_COMMENT_BYTES_MAX`]).
    #[default]
    All,
    /// None: each issue's comments are left empty and counted instead
    /// ([`Page::counted`]), for a page that shows how many there are but
    /// not what they say. A store that counts them without reading them
    /// (SQLite) lets no comment bound the page; one that reads them to
    /// count them (MongoDB) still ends it at the bound.
    Counted,
}

/// How many comments an issue has, and how many of them are at or above
/// a page's floor ([`ListQuery::min_integrity`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CommentCounts {
    pub total: usize,
    pub at_floor: usize,
}

impl CommentCounts {
    /// Counts `comments` against `floor`.
    pub fn of(comments: &[Comment], floor: Option<Integrity>) -> Self {
        let mut counts = Self::default();
        for comment in comments {
            counts.add(comment.author.integrity, floor);
        }
        counts
    }

    /// Counts one more comment, at `level`.
    pub fn add(&mut self, level: Integrity, floor: Option<Integrity>) {
        self.total += 1;
        if level.meets(floor) {
            self.at_floor += 1;
        }
    }
}

impl Default for ListQuery {
    fn default() -> Self {
        Self {
            states: Vec::new(),
            labels: LabelFilter::None,
            text: None,
            author_run: None,
            priorities: Vec::new(),
            updated_since: None,
            limit: limits::PAGE_DEFAULT,
            cursor: None,
            parent: None,
            claim: ClaimFilter::Any,
            ready: false,
            min_integrity: None,
            comments: PageComments::All,
        }
    }
}

impl ListQuery {
    /// Checks the limits a caller may have got wrong.
    pub fn validate(&self) -> Result<(), ValidationError> {
        if self.limit == 0 || self.limit > limits::PAGE_MAX {
            return Err(ValidationError::new(
                "limit",
                format!("must be between 1 and {}", limits::PAGE_MAX),
            ));
        }
        if self.ready && !matches!(self.claim, ClaimFilter::Any | ClaimFilter::Unclaimed) {
            return Err(ValidationError::new(
                "ready",
                "ready work is unclaimed: drop the claim filter (claimed_by, stale) or ready",
            ));
        }
        if let Some(text) = &self.text
            && text.chars().count() > limits::TEXT_FILTER_MAX_CHARS
        {
            return Err(ValidationError::new(
                "text",
                format!(
                    "must be at most {} characters",
                    limits::TEXT_FILTER_MAX_CHARS
                ),
            ));
        }
        Ok(())
    }

    /// Whether `issue` passes every filter (the cursor and limit aside).
    /// Stores that cannot express a filter natively use this, and the
    /// contract tests use it as the reference. For `ready` it checks what
    /// the issue itself says (open, unclaimed); whether its blockers are
    /// finished needs theirs ([`crate::is_ready`]).
    pub fn matches(&self, issue: &Issue) -> bool {
        (!self.ready || (!issue.state.is_terminal() && issue.claim.is_none()))
            && issue.integrity.meets(self.min_integrity)
            && (self.states.is_empty() || self.states.contains(&issue.state))
            && self.labels.matches(&issue.labels)
            && self
                .author_run
                .as_ref()
                .is_none_or(|run| &issue.author.run == run)
            && self
                .parent
                .as_ref()
                .is_none_or(|p| issue.parent.as_ref() == Some(p))
            && self.claim.matches(issue.claim.as_ref())
            && (self.priorities.is_empty() || self.priorities.contains(&issue.priority))
            && self
                .updated_since
                .is_none_or(|since| issue.updated_at >= since)
            && self.text.as_ref().is_none_or(|text| {
                issue
                    .title
                    .as_str()
                    .to_lowercase()
                    .contains(&text.to_lowercase())
            })
    }
}

/// The comment bytes a page of issues has taken so far, against
/// [`limits::PAGE_COMMENT_BYTES_MAX`] (a store counts each comment, or
/// each issue's, as it reads them).
#[derive(Debug, Default)]
pub struct PageCommentBytes {
    bytes: usize,
    held: bool,
}

impl PageCommentBytes {
    /// Counts `bytes` more; false once the page's comments are past the
    /// bound, whichever issues they belong to (a read of a whole page
    /// stops there).
    pub fn take(&mut self, bytes: usize) -> bool {
        self.bytes = self.bytes.saturating_add(bytes);
        self.bytes <= limits::PAGE_COMMENT_BYTES_MAX
    }

    /// Counts the bodies of `issue`'s comments ([`Self::take`]).
    pub fn take_issue(&mut self, issue: &Issue) -> bool {
        self.take(comment_bytes(issue))
    }

    /// Whether the page holds its next issue, whose comments' bodies are
    /// `bytes`: its first issue whatever their size, a later one while
    /// the page's comments stay within the bound. The page ends before
    /// the first issue it does not hold.
    pub fn hold(&mut self, bytes: usize) -> bool {
        let first = !self.held;
        self.held = true;
        self.take(bytes) || first
    }

    /// [`Self::hold`] for `issue`, its comments read.
    pub fn hold_issue(&mut self, issue: &Issue) -> bool {
        self.hold(comment_bytes(issue))
    }
}

/// The bytes of `issue`'s comment bodies (what a page's bound counts).
fn comment_bytes(issue: &Issue) -> usize {
    issue.comments.iter().map(|c| c.body.as_str().len()).sum()
}

/// One page of a list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Page {
    pub issues: Vec<Issue>,
    /// Pass back as `cursor` for the next page; absent on the last page.
    pub next_cursor: Option<IssueId>,
    /// With [`PageComments::Counted`]: each issue's comments counted, in
    /// the order of `issues` (whose comments are then empty).
    #[serde(skip)]
    pub counted: Option<Vec<CommentCounts>>,
}

impl Page {
    /// The page of `issues` as a store read them: up to `limit` and one
    /// more that says more follow, or fewer when the read was `cut` short
    /// ([`PageCommentBytes`]). Either way, when more follow the cursor is
    /// the last issue the page holds.
    pub fn read(mut issues: Vec<Issue>, limit: usize, cut: bool) -> Self {
        let more = cut || issues.len() > limit;
        issues.truncate(limit);
        let next_cursor = if more {
            issues.last().map(|i| i.id.clone())
        } else {
            None
        };
        Self {
            issues,
            next_cursor,
            counted: None,
        }
    }

    /// A page of no issues, the last.
    pub fn empty() -> Self {
        Self::read(Vec::new(), 0, false)
    }

    /// What `query` asks of the page's comments, for a store that read
    /// them all: with [`PageComments::Counted`], each issue's are counted
    /// against the query's floor and left out.
    pub fn comments_as(mut self, query: &ListQuery) -> Self {
        if query.comments == PageComments::Counted {
            let counted = self
                .issues
                .iter_mut()
                .map(|issue| {
                    let counts = CommentCounts::of(&issue.comments, query.min_integrity);
                    issue.comments = Vec::new();
                    counts
                })
                .collect();
            self.counted = Some(counted);
        }
        self
    }
}

/// The answer to an idempotent create.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Created {
    pub issue: Issue,
    /// True when this was a replay of an earlier request with the same key.
    pub replayed: bool,
}

/// The answer to an idempotent comment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CommentAdded {
    pub issue: Issue,
    pub comment: Comment,
    pub replayed: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_holds_its_first_issue_whatever_its_comments_and_later_ones_within_the_bound() {
        let max = limits::PAGE_COMMENT_BYTES_MAX;
        let mut page = PageCommentBytes::default();
        assert!(page.hold(max + 1), "the first issue is always held");
        assert!(!page.hold(0), "past the bound, nothing more");
        let mut page = PageCommentBytes::default();
        assert!(page.hold(max / 2));
        assert!(page.hold(max / 2), "exactly the bound fits");
        assert!(!page.hold(1));
        let mut read = PageCommentBytes::default();
        assert!(!read.take(max + 1), "a whole read stops past the bound");
    }

    #[test]
    fn a_page_s_cursor_is_its_last_issue_when_more_follow() {
        let issues: Vec<Issue> = (0..4)
            .map(|n| {
                NewIssue::new(Title::parse(format!("issue {n}")).unwrap()).into_issue(
                    TenantId::parse("t").unwrap(),
                    Author::principal(AuthorKind::Run, "r"),
                    Timestamp::from_millis(n),
                )
            })
            .collect();
        let ids = |page: &Page| page.issues.iter().map(|i| i.id.clone()).collect::<Vec<_>>();
        // The look-ahead issue says more follow and is not on the page.
        let page = Page::read(issues.clone(), 3, false);
        assert_eq!(ids(&page), ids(&Page::read(issues[..3].to_vec(), 3, true)));
        assert_eq!(page.next_cursor, Some(issues[2].id.clone()));
        // The last page.
        let page = Page::read(issues[..3].to_vec(), 3, false);
        assert_eq!((page.issues.len(), page.next_cursor), (3, None));
        // Cut short: more follow after its last issue.
        let page = Page::read(issues[..2].to_vec(), 3, true);
        assert_eq!(page.next_cursor, Some(issues[1].id.clone()));
    }

    #[test]
    fn people_are_named_safely_and_old_rows_read_as_runs() {
        let person = Author::principal(AuthorKind::Person, "alice@example.com");
        assert_eq!(person.run.as_str(), "alice_example.com");
        assert_eq!(person.grant, None);
        assert!(person.is_person());
        assert_eq!(
            Author::principal(AuthorKind::Admin, "-ci bot").run.as_str(),
            "p-ci_bot"
        );
        assert_eq!(Author::principal(AuthorKind::Person, "").run.as_str(), "p");
        let long = Author::principal(AuthorKind::Person, &"é".repeat(300));
        assert_eq!(long.run.as_str().len(), 128);
        let old: Author = serde_json::from_str(r#"{"run":"r1","grant":null}"#).unwrap();
        assert_eq!(old.kind, AuthorKind::Run);
        assert!(!old.is_person());
        let json = serde_json::to_value(&person).unwrap();
        assert_eq!(json["kind"], "person");
        for kind in AuthorKind::ALL {
            assert_eq!(AuthorKind::parse(kind.as_str()).unwrap(), kind);
        }
        assert!(AuthorKind::parse("robot").is_err());
    }

    #[test]
    fn titles_are_single_non_blank_lines_within_limits() {
        Title::parse("Fix the build").unwrap();
        assert!(Title::parse("  ").is_err());
        assert!(Title::parse("a\nb").is_err());
        assert!(Title::parse("x".repeat(limits::TITLE_MAX_CHARS + 1)).is_err());
        Title::parse("é".repeat(limits::TITLE_MAX_CHARS)).unwrap();
    }

    #[test]
    fn labels_are_deduplicated_sorted_and_bounded() {
        let labels = Labels::parse(["bug", "api", "bug"]).unwrap();
        assert_eq!(labels.to_strings(), ["api", "bug"]);
        assert!(Labels::parse(["Bug"]).is_err());
        assert!(Labels::parse((0..21).map(|i| format!("l{i}"))).is_err());
        let err = Labels::parse(["x".repeat(51)]).unwrap_err();
        assert_eq!(err.field, "labels");
    }

    #[test]
    fn states_parse_by_wire_name() {
        for state in IssueState::ALL {
            assert_eq!(IssueState::parse(state.as_str()).unwrap(), state);
            let json = serde_json::to_string(&state).unwrap();
            assert_eq!(json, format!("\"{}\"", state.as_str()));
        }
        let err = IssueState::parse("doing").unwrap_err();
        assert!(err.reason.contains("in_progress"), "{err}");
    }

    #[test]
    fn fingerprints_tell_requests_apart() {
        let a = NewIssue::new(Title::parse("a").unwrap());
        let mut b = a.clone();
        assert_eq!(a.fingerprint(), b.fingerprint());
        b.priority = Priority::High;
        assert_ne!(a.fingerprint(), b.fingerprint());
    }

    #[test]
    fn patch_bumps_version() {
        let author = Author {
            kind: crate::AuthorKind::Run,
            run: RunId::parse("r").unwrap(),
            grant: None,
            integrity: crate::Integrity::Agent,
        };
        let mut issue = NewIssue::new(Title::parse("a").unwrap()).into_issue(
            TenantId::parse("t").unwrap(),
            author,
            Timestamp::from_millis(1),
        );
        IssuePatch {
            state: Some(IssueState::Done),
            ..Default::default()
        }
        .apply_to(&mut issue, Timestamp::from_millis(2))
        .unwrap();
        assert_eq!(issue.version, 2);
        assert_eq!(issue.state, IssueState::Done);
        assert_eq!(issue.updated_at, Timestamp::from_millis(2));
        assert_eq!(issue.close_reason, Some(CloseReason::Completed));
    }

    #[test]
    fn closing_carries_a_reason_and_reopening_clears_it() {
        let author = Author {
            kind: crate::AuthorKind::Run,
            run: RunId::parse("r").unwrap(),
            grant: None,
            integrity: crate::Integrity::Agent,
        };
        let mut issue = NewIssue::new(Title::parse("a").unwrap()).into_issue(
            TenantId::parse("t").unwrap(),
            author,
            Timestamp::from_millis(1),
        );
        let patch = |f: fn(&mut IssuePatch)| {
            let mut p = IssuePatch::default();
            f(&mut p);
            p
        };
        // A reason on an open issue is refused and changes nothing.
        let err = patch(|p| p.close_reason = Some(CloseReason::NotPlanned))
            .apply_to(&mut issue, Timestamp::from_millis(2))
            .unwrap_err();
        assert_eq!(err.field, "close_reason");
        assert_eq!(issue.version, 1);
        // Duplicate needs the original.
        let err = patch(|p| {
            p.state = Some(IssueState::Closed);
            p.close_reason = Some(CloseReason::Duplicate);
        })
        .apply_to(&mut issue, Timestamp::from_millis(2))
        .unwrap_err();
        assert_eq!(err.field, "close_reason");
        let original = IssueId::generate();
        let mut close = patch(|p| {
            p.state = Some(IssueState::Closed);
            p.close_reason = Some(CloseReason::Duplicate);
        });
        close.duplicate_of = Some(Some(original.clone()));
        close
            .apply_to(&mut issue, Timestamp::from_millis(3))
            .unwrap();
        assert_eq!(issue.close_reason, Some(CloseReason::Duplicate));
        assert_eq!(issue.duplicate_of, Some(original));
        // Changing a closed issue's labels keeps its reason.
        patch(|p| p.priority = Some(Priority::Low))
            .apply_to(&mut issue, Timestamp::from_millis(4))
            .unwrap();
        assert_eq!(issue.close_reason, Some(CloseReason::Duplicate));
        patch(|p| p.state = Some(IssueState::Todo))
            .apply_to(&mut issue, Timestamp::from_millis(5))
            .unwrap();
        assert_eq!(issue.close_reason, None);
        assert_eq!(issue.version, 4);
        // Self-relations are refused.
        let own = IssuePatch {
            parent: Some(Some(issue.id.clone())),
            ..IssuePatch::default()
        };
        assert_eq!(
            own.apply_to(&mut issue, Timestamp::from_millis(6))
                .unwrap_err()
                .field,
            "parent"
        );
    }

    #[test]
    fn list_query_filters() {
        let author = Author {
            kind: crate::AuthorKind::Run,
            run: RunId::parse("r1").unwrap(),
            grant: None,
            integrity: crate::Integrity::Agent,
        };
        let mut new = NewIssue::new(Title::parse("Flaky Test").unwrap());
        new.labels = Labels::parse(["ci", "bug"]).unwrap();
        let issue = new.into_issue(TenantId::parse("t").unwrap(), author, Timestamp::now());
        let label = |s: &str| Label::parse(s).unwrap();
        let q = |f: fn(&mut ListQuery)| {
            let mut q = ListQuery::default();
            f(&mut q);
            q
        };
        assert!(q(|q| q.text = Some("flaky".into())).matches(&issue));
        assert!(!q(|q| q.text = Some("nope".into())).matches(&issue));
        assert!(q(|q| q.states = vec![IssueState::Inbox]).matches(&issue));
        assert!(q(|q| q.priorities = vec![Priority::None, Priority::High]).matches(&issue));
        assert!(!q(|q| q.priorities = vec![Priority::High]).matches(&issue));
        let since = |at| ListQuery {
            updated_since: Some(at),
            ..Default::default()
        };
        assert!(since(issue.updated_at).matches(&issue));
        assert!(!since(issue.updated_at.plus_millis(1)).matches(&issue));
        assert!(!q(|q| q.states = vec![IssueState::Done]).matches(&issue));
        let mut all = ListQuery {
            labels: LabelFilter::All(vec![label("ci"), label("bug")]),
            ..Default::default()
        };
        assert!(all.matches(&issue));
        all.labels = LabelFilter::All(vec![label("ci"), label("ui")]);
        assert!(!all.matches(&issue));
        all.labels = LabelFilter::Any(vec![label("ui"), label("ci")]);
        assert!(all.matches(&issue));
        assert!(q(|q| q.limit = 0).validate().is_err());
        assert!(q(|q| q.limit = limits::PAGE_MAX + 1).validate().is_err());
    }
}
