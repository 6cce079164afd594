//! Provenance in answers: the grant's integrity floor applied to what its
//! run is shown, and every shown entry labelled with its level.
//!
//! The levels and their rules are the domain's
//! ([`corkboard_board::Integrity`]). The stores leave issues below the
//! floor out of lists, searches, ready work and `claim_next`
//! (`ListQuery::min_integrity`, from the grant, never from input); what
//! comes back inside an issue is filtered here: comments below the floor
//! are left out and counted (`comments_withheld`), so are history changes
//! (`history_withheld`); similar-issue hints and a search snippet taken
//! from a withheld comment are left out. An issue itself below the floor is refused to
//! the run ([`ToolsError::Withheld`]), for reads and for writes (checked
//! before anything is written).
//!
//! Labels: each issue, comment and change a tool answers (not the
//! similar-issue hints, which only point at issues) carries
//! `_meta: {"dev.corkboard/integrity": <level>}` (for an issue its own
//! level, the lowest of its author's and its editors'), beside the author
//! (`kind`, `run`, `grant`, `integrity`) it already names.

use crate::error::ToolsError;
use corkboard_board::{Change, Comment, Integrity, Issue, SearchHit, SimilarIssue};
use serde::Serialize;
use serde_json::{Map, Value, json};

/// The `_meta` key of an entry's level.
pub const INTEGRITY_META: &str = "dev.corkboard/integrity";

/// Refuses `issue` to a run whose grant sets `floor` above its level.
pub(crate) fn check(issue: &Issue, floor: Option<Integrity>) -> Result<(), ToolsError> {
    match floor {
        Some(floor) if !issue.integrity.meets(Some(floor)) => Err(ToolsError::Withheld {
            issue: issue.id.clone(),
            level: issue.integrity,
            floor,
        }),
        _ => Ok(()),
    }
}

fn meta(level: Integrity) -> Value {
    json!({ INTEGRITY_META: level.as_str() })
}

/// Puts `level` into `entry`'s `_meta`.
pub(crate) fn label(entry: &mut Map<String, Value>, level: Integrity) {
    entry.insert("_meta".to_owned(), meta(level));
}

/// `issue` as the JSON a run with `floor` is shown: refused when the issue
/// is below it (`checked`; a write's own answer is not, the run made it),
/// its comments below it left out and counted in `comments_withheld`, and
/// the issue and each comment labelled.
pub(crate) fn issue_json(
    issue: &Issue,
    floor: Option<Integrity>,
    checked: bool,
) -> Result<Value, ToolsError> {
    shown_json(issue, issue, floor, checked)
}

/// [`issue_json`] of a read that carries `issue` with more (an
/// `IssueView`: its sub-issues and the issues it blocks).
pub(crate) fn shown_json<T: Serialize>(
    read: &T,
    issue: &Issue,
    floor: Option<Integrity>,
    checked: bool,
) -> Result<Value, ToolsError> {
    if checked {
        check(issue, floor)?;
    }
    let mut value = serde_json::to_value(read).map_err(|err| ToolsError::Internal {
        detail: format!("issue not serialisable: {err}"),
    })?;
    let Value::Object(map) = &mut value else {
        return Ok(value);
    };
    // The level goes to `_meta`, where every entry has it.
    map.remove("integrity");
    label(map, issue.integrity);
    if let Some(Value::Array(comments)) = map.get_mut("comments") {
        let before = comments.len();
        let mut levels = issue.comments.iter().map(|c| c.author.integrity);
        comments.retain_mut(|comment| {
            let level = levels.next().unwrap_or(Integrity::External);
            if !level.meets(floor) {
                return false;
            }
            if let Value::Object(comment) = comment {
                label(comment, level);
            }
            true
        });
        let withheld = before - comments.len();
        if withheld > 0 {
            map.insert("comments_withheld".to_owned(), Value::from(withheld));
        }
    }
    Ok(value)
}

/// A comment the run wrote, labelled.
pub(crate) fn comment_json(comment: &Comment) -> Result<Value, ToolsError> {
    let mut value = serde_json::to_value(comment).map_err(|err| ToolsError::Internal {
        detail: format!("comment not serialisable: {err}"),
    })?;
    if let Value::Object(map) = &mut value {
        label(map, comment.author.integrity);
    }
    Ok(value)
}

/// The changes a run with `floor` is shown, labelled, and how many were
/// left out.
pub(crate) fn changes_json(
    changes: &[Change],
    floor: Option<Integrity>,
) -> Result<(Value, usize), ToolsError> {
    let mut shown = Vec::with_capacity(changes.len());
    for change in changes.iter().filter(|c| c.by.integrity.meets(floor)) {
        let mut value = serde_json::to_value(change).map_err(|err| ToolsError::Internal {
            detail: format!("change not serialisable: {err}"),
        })?;
        if let Value::Object(map) = &mut value {
            label(map, change.by.integrity);
        }
        shown.push(value);
    }
    let withheld = changes.len() - shown.len();
    Ok((Value::Array(shown), withheld))
}

/// The similar-issue hints a run with `floor` is shown.
pub(crate) fn visible_similar(
    similar: &[SimilarIssue],
    floor: Option<Integrity>,
) -> Vec<&SimilarIssue> {
    similar
        .iter()
        .filter(|s| s.integrity.meets(floor))
        .collect()
}

/// Whether a run with `floor` may be shown `hit`'s snippet: a snippet of
/// a comment only when that comment is at or above the floor.
pub(crate) fn snippet_shown(hit: &SearchHit, floor: Option<Integrity>) -> bool {
    match (&hit.comment, floor) {
        (_, None) | (None, _) => true,
        (Some(id), Some(_)) => hit
            .issue
            .comments
            .iter()
            .find(|c| &c.id == id)
            .is_some_and(|c| c.author.integrity.meets(floor)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corkboard_board::{
        Author, AuthorKind, CommentBody, CommentId, NewIssue, RunId, TenantId, Timestamp, Title,
    };

    fn issue(level: Integrity, comment_levels: &[Integrity]) -> Issue {
        let author = Author::run(RunId::parse("writer").unwrap(), None, level);
        let mut issue = NewIssue::new(Title::parse("t").unwrap()).into_issue(
            TenantId::parse("acme").unwrap(),
            author,
            Timestamp::from_millis(1),
        );
        for &level in comment_levels {
            issue.comments.push(Comment {
                id: CommentId::generate(),
                body: CommentBody::parse(format!("by {level}")).unwrap(),
                author: Author {
                    kind: AuthorKind::Run,
                    run: RunId::parse("c").unwrap(),
                    grant: None,
                    integrity: level,
                },
                created_at: Timestamp::from_millis(2),
            });
        }
        issue
    }

    #[test]
    fn an_issue_below_the_floor_is_refused_unless_it_is_the_runs_own_answer() {
        let external = issue(Integrity::External, &[]);
        let err = issue_json(&external, Some(Integrity::Agent), true).unwrap_err();
        assert!(matches!(err, ToolsError::Withheld { .. }));
        assert!(err.to_string().contains("below this run's floor (agent"));
        assert!(issue_json(&external, Some(Integrity::Agent), false).is_ok());
        assert!(issue_json(&external, None, true).is_ok());
    }

    #[test]
    fn comments_below_the_floor_are_left_out_counted_and_the_rest_labelled() {
        let read = issue(
            Integrity::Agent,
            &[Integrity::Person, Integrity::External, Integrity::Agent],
        );
        let value = issue_json(&read, Some(Integrity::Agent), true).unwrap();
        assert_eq!(value["_meta"][INTEGRITY_META], "agent");
        assert!(value.get("integrity").is_none());
        let comments = value["comments"].as_array().unwrap();
        assert_eq!(comments.len(), 2);
        assert_eq!(comments[0]["_meta"][INTEGRITY_META], "person");
        assert_eq!(comments[1]["_meta"][INTEGRITY_META], "agent");
        assert_eq!(value["comments_withheld"], 1);
        // No floor: everything, nothing counted.
        let all = issue_json(&read, None, true).unwrap();
        assert_eq!(all["comments"].as_array().unwrap().len(), 3);
        assert!(all.get("comments_withheld").is_none());
    }

    #[test]
    fn history_hints_and_snippets_below_the_floor_are_left_out() {
        let read = issue(Integrity::Person, &[Integrity::External, Integrity::Agent]);
        let by = |level| Author::run(RunId::parse("w").unwrap(), None, level);
        let changes: Vec<Change> = [Integrity::External, Integrity::Person]
            .into_iter()
            .map(|level| {
                Change::of(
                    corkboard_board::ChangeKind::Updated,
                    None,
                    &read,
                    &by(level),
                )
            })
            .collect();
        let (shown, withheld) = changes_json(&changes, Some(Integrity::Agent)).unwrap();
        assert_eq!(withheld, 1);
        assert_eq!(shown.as_array().unwrap().len(), 1);
        assert_eq!(shown[0]["_meta"][INTEGRITY_META], "person");
        assert_eq!(changes_json(&changes, None).unwrap().1, 0);

        let hint = |level| SimilarIssue {
            id: read.id.clone(),
            title: read.title.clone(),
            state: read.state,
            updated_at: read.updated_at,
            score: 1.0,
            integrity: level,
        };
        let hints = [hint(Integrity::External), hint(Integrity::Agent)];
        assert_eq!(visible_similar(&hints, Some(Integrity::Agent)).len(), 1);
        assert_eq!(visible_similar(&hints, None).len(), 2);

        let hit = |comment: &Comment| SearchHit {
            issue: read.clone(),
            score: 1.0,
            field: corkboard_board::MatchField::Comment,
            comment: Some(comment.id.clone()),
            snippet: "by".to_owned(),
        };
        let (external, agent) = (&read.comments[0], &read.comments[1]);
        assert!(!snippet_shown(&hit(external), Some(Integrity::Agent)));
        assert!(snippet_shown(&hit(agent), Some(Integrity::Agent)));
        assert!(snippet_shown(&hit(external), None));
    }
}
