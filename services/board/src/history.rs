//! What changed on an issue, write by write: each write that changes an
//! issue records one [`Change`] (who, when, the version it made, and each
//! field before and after; labels and blockers as added and removed), in
//! the write's own transaction (SQLite) or document update (MongoDB), so
//! the history never says more or less than what happened. An issue's
//! history pages newest first by version; a run's history is what that
//! run did across the board.

use crate::ids::{CommentId, IssueId, RunId};
use crate::integrity::Integrity;
use crate::issue::{Author, Issue};
use crate::relations::Claim;
use crate::timestamp::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeSet;

/// Limits of histories, in one place so schemas and stores agree.
pub mod history_limits {
    /// Changes one page of an issue's or a run's history holds at most.
    pub const HISTORY_PAGE_MAX: u32 = 100;
    /// Changes `get_issue` shows when asked for history without a number.
    pub const HISTORY_DEFAULT: u32 = 10;
    /// Changes an issue keeps (MongoDB keeps them in the issue's document;
    /// SQLite keeps as many): the oldest go first. Bounds an issue's
    /// document like `COMMENTS_MAX` does.
    pub const HISTORY_KEPT: usize = 200;
}

/// What kind of write a change was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    Created,
    Updated,
    Commented,
    Claimed,
    Released,
    /// The claim ended without a release (lease lapsed, grant expired).
    ClaimExpired,
    /// The claim ended with the revocation of its grant.
    ClaimRevoked,
}

impl ChangeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Updated => "updated",
            Self::Commented => "commented",
            Self::Claimed => "claimed",
            Self::Released => "released",
            Self::ClaimExpired => "claim_expired",
            Self::ClaimRevoked => "claim_revoked",
        }
    }
}

/// One field's change: a scalar's value `before` and `after` (a null
/// side, none, is left out), or what a set field (labels, blocked_by,
/// comments) gained and lost.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldChange {
    pub field: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub added: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<String>,
}

impl FieldChange {
    fn scalar(field: &str, before: Value, after: Value) -> Self {
        Self {
            field: field.to_owned(),
            before: Some(before),
            after: Some(after),
            added: Vec::new(),
            removed: Vec::new(),
        }
    }

    fn set(field: &str, before: BTreeSet<String>, after: BTreeSet<String>) -> Self {
        Self {
            field: field.to_owned(),
            before: None,
            after: None,
            added: after.difference(&before).cloned().collect(),
            removed: before.difference(&after).cloned().collect(),
        }
    }
}

/// One write's record on one issue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    pub issue: IssueId,
    /// The version the write made (unique per issue: every change makes one).
    pub version: u64,
    pub at: Timestamp,
    /// Who wrote: the run (and grant) or the person, as the write's author.
    pub by: Author,
    pub kind: ChangeKind,
    pub fields: Vec<FieldChange>,
}

impl Change {
    /// The change `after` records against `before` (`None`: a creation,
    /// listing every field set away from its default), by `by`.
    pub fn of(kind: ChangeKind, before: Option<&Issue>, after: &Issue, by: &Author) -> Self {
        let fields = match before {
            Some(before) => diff(before, after),
            None => created_fields(after),
        };
        Self {
            issue: after.id.clone(),
            version: after.version,
            at: after.updated_at,
            by: by.clone(),
            kind,
            fields,
        }
    }

    /// A comment added to `issue` (as it is after the comment).
    pub fn commented(issue: &Issue, comment: &CommentId, by: &Author) -> Self {
        Self {
            issue: issue.id.clone(),
            version: issue.version,
            at: issue.updated_at,
            by: by.clone(),
            kind: ChangeKind::Commented,
            fields: vec![FieldChange {
                field: "comments".to_owned(),
                before: None,
                after: None,
                added: vec![comment.as_str().to_owned()],
                removed: Vec::new(),
            }],
        }
    }

    /// A claim taken, renewed away or ended: `before` and `after` are the
    /// claims (`None`: none), `version` the version the write made.
    pub fn claim(
        kind: ChangeKind,
        issue: &IssueId,
        version: u64,
        at: Timestamp,
        by: &Author,
        before: Option<&Claim>,
        after: Option<&Claim>,
    ) -> Self {
        Self {
            issue: issue.clone(),
            version,
            at,
            by: by.clone(),
            kind,
            fields: vec![FieldChange::scalar("claim", json!(before), json!(after))],
        }
    }
}

/// The author a change made by `run` under no known grant is recorded as
/// (a release, an expiry noticed by the system). It carries no text of
/// the run's, only the claim's end, so it is recorded at
/// [`Integrity::Agent`]: a floor of `agent` still shows it.
pub fn run_author(run: &RunId) -> Author {
    Author::run(run.clone(), None, Integrity::Agent)
}

/// How much of a body a change keeps of each side, in characters.
pub const BODY_EXCERPT_CHARS: usize = 200;

/// The start of `text`, at most [`BODY_EXCERPT_CHARS`] characters (with
/// `…` when cut).
fn excerpt(text: &str) -> String {
    match text.char_indices().nth(BODY_EXCERPT_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

fn ids<'a>(items: impl Iterator<Item = &'a str>) -> BTreeSet<String> {
    items.map(str::to_owned).collect()
}

/// Every field that differs between `before` and `after` (comments,
/// version and timestamps aside: they are the change itself).
pub fn diff(before: &Issue, after: &Issue) -> Vec<FieldChange> {
    let mut out = Vec::new();
    let mut scalar = |field: &str, a: Value, b: Value| {
        if a != b {
            out.push(FieldChange::scalar(field, a, b));
        }
    };
    scalar("title", json!(before.title), json!(after.title));
    // A body is up to 64 KiB: its change keeps the start of each side.
    scalar(
        "body",
        json!(excerpt(before.body.as_str())),
        json!(excerpt(after.body.as_str())),
    );
    scalar("state", json!(before.state), json!(after.state));
    scalar("priority", json!(before.priority), json!(after.priority));
    scalar("parent", json!(before.parent), json!(after.parent));
    scalar(
        "duplicate_of",
        json!(before.duplicate_of),
        json!(after.duplicate_of),
    );
    scalar(
        "close_reason",
        json!(before.close_reason),
        json!(after.close_reason),
    );
    scalar("claim", json!(before.claim), json!(after.claim));
    let labels = |i: &Issue| ids(i.labels.iter().map(|l| l.as_str()));
    if labels(before) != labels(after) {
        out.push(FieldChange::set("labels", labels(before), labels(after)));
    }
    let blockers = |i: &Issue| ids(i.blocked_by.iter().map(IssueId::as_str));
    if blockers(before) != blockers(after) {
        out.push(FieldChange::set(
            "blocked_by",
            blockers(before),
            blockers(after),
        ));
    }
    out
}

/// The fields a new issue sets (title always; the rest when not default).
fn created_fields(issue: &Issue) -> Vec<FieldChange> {
    let blank = crate::issue::NewIssue::new(issue.title.clone()).into_issue(
        issue.tenant.clone(),
        issue.author.clone(),
        issue.created_at,
    );
    let mut fields = vec![FieldChange::scalar(
        "title",
        Value::Null,
        json!(issue.title),
    )];
    fields.extend(diff(&blank, issue));
    fields
}

/// One page of a history, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HistoryPage {
    pub changes: Vec<Change>,
    /// Pass back as the `before` of the next page (an issue's: a version;
    /// a run's: an instant in Unix milliseconds); absent on the last page.
    pub next_before: Option<i64>,
}

impl HistoryPage {
    /// A page from up to `limit + 1` changes, newest first, read by a
    /// store (one more than shown, to know whether more are left).
    pub fn cut(mut changes: Vec<Change>, limit: u32, key: impl Fn(&Change) -> i64) -> Self {
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        let next_before = if changes.len() > limit {
            changes.truncate(limit);
            changes.last().map(key)
        } else {
            None
        };
        Self {
            changes,
            next_before,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{GrantId, TenantId};
    use crate::issue::{IssuePatch, IssueState, Labels, NewIssue, Priority, Title};

    fn author() -> Author {
        Author::run(
            RunId::parse("r").unwrap(),
            Some(GrantId::generate()),
            Integrity::Agent,
        )
    }

    #[test]
    fn a_change_lists_scalars_before_and_after_and_sets_added_and_removed() {
        let mut new = NewIssue::new(Title::parse("a").unwrap());
        new.labels = Labels::parse(["x", "y"]).unwrap();
        let before = new.into_issue(
            TenantId::parse("t").unwrap(),
            author(),
            Timestamp::from_millis(1),
        );
        let created = Change::of(ChangeKind::Created, None, &before, &author());
        let names: Vec<&str> = created.fields.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(names, ["title", "labels"]);
        let mut after = before.clone();
        IssuePatch {
            state: Some(IssueState::Done),
            priority: Some(Priority::High),
            labels: Some(Labels::parse(["y", "z"]).unwrap()),
            ..IssuePatch::default()
        }
        .apply_to(&mut after, Timestamp::from_millis(2))
        .unwrap();
        let change = Change::of(ChangeKind::Updated, Some(&before), &after, &author());
        assert_eq!(change.version, 2);
        let state = change.fields.iter().find(|f| f.field == "state").unwrap();
        assert_eq!(state.before, Some(json!("inbox")));
        assert_eq!(state.after, Some(json!("done")));
        let reason = change
            .fields
            .iter()
            .find(|f| f.field == "close_reason")
            .unwrap();
        assert_eq!(reason.after, Some(json!("completed")));
        let labels = change.fields.iter().find(|f| f.field == "labels").unwrap();
        assert_eq!(
            (labels.added.clone(), labels.removed.clone()),
            (vec!["z".to_owned()], vec!["x".to_owned()])
        );
        assert!(change.fields.iter().all(|f| f.field != "title"));
    }
}
