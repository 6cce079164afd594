//! What an answer shows of an issue: the summary `list_issues` returns by
//! default, the fields a caller adds by name (`fields`, `include_body`,
//! `include_comments`), and the window of comments an issue answer
//! carries (the latest ones, with a cursor to the older ones).
//!
//! A summary's own fields are taken from the issue ([`SummaryFields`]);
//! what a caller adds by name, and every whole-issue answer, is taken
//! from the issue's JSON by field name: a field the domain gains later
//! is selectable by `fields` as soon as its name is listed below, with no
//! other code. `get_issue` reads its comment window from
//! the store ([`corkboard_board::CommentWindow`]), so the issue comes here
//! with only those comments and their counts; writes and lists still
//! return whole issues, cut here to the newest comments.

use crate::error::ToolsError;
use crate::provenance;
use corkboard_board::{
    Claim, CommentCounts, CommentFacts, CommentId, Integrity, Issue, IssueId, IssueState, Labels,
    Priority, RunId, Timestamp, Title,
};
use serde::Serialize;
use serde_json::{Map, Value};

/// Characters of the body a summary shows as `excerpt`.
pub const EXCERPT_CHARS: usize = 160;

/// Comments an issue answer carries when the caller does not say.
pub const COMMENTS_DEFAULT: usize = 10;

/// Names `list_issues`' `fields` accepts (besides the summary's own),
/// each a field of the issue JSON, shown when the issue has it. `body`
/// replaces the excerpt; `comments` adds every comment (as
/// `include_comments` with the largest count).
pub const SELECTABLE_FIELDS: [&str; 10] = [
    "body",
    "comments",
    "created_at",
    "author",
    "tenant",
    "parent",
    "duplicate_of",
    "blocked_by",
    "close_reason",
    "claim",
];

/// What a list shows of each issue beyond the summary.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub(crate) struct ListView {
    /// Extra fields by name, each one of [`SELECTABLE_FIELDS`].
    pub fields: Vec<String>,
    /// The whole body instead of the excerpt.
    pub body: bool,
    /// The latest this many comments of each issue.
    pub comments: Option<usize>,
}

impl ListView {
    /// Whether the view shows comments (`include_comments`, or `fields`
    /// naming them); a page for any other view is read with its comments
    /// counted, not read ([`corkboard_board::PageComments::Counted`]).
    pub(crate) fn needs_comments(&self) -> bool {
        self.comments.is_some() || self.fields.iter().any(|f| f == "comments")
    }
}

/// The fields every summary has, taken from the issue itself. A page is
/// built from these, not from each issue's whole JSON cut down: that
/// round trip (every field, every comment, then all but eleven dropped)
/// was most of the cost of a list page that is not kept. Each field
/// serialises as it does in the issue's JSON (the same types); a field
/// the domain gains later is in a summary once it is added here, and
/// selectable by name once it is in [`SELECTABLE_FIELDS`].
#[derive(Serialize)]
struct SummaryFields<'a> {
    id: &'a IssueId,
    title: &'a Title,
    state: IssueState,
    labels: &'a Labels,
    priority: Priority,
    /// Null when unclaimed, as in the issue's JSON.
    claim: &'a Option<Claim>,
    updated_at: Timestamp,
    version: u64,
    author_run: &'a RunId,
    /// Every comment of the issue, shown or not, as `get_issue` and
    /// `search_issues` count (the output schema's meaning).
    comment_count: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    comments_withheld: Option<usize>,
}

/// The summary of `issue` that `view` asks for, for a run with `floor`
/// (refused when the issue is below it); `counts` are its comments
/// counted against that floor (by the store when the page was read
/// without them, [`ListView::needs_comments`]).
pub(crate) fn summary(
    issue: &Issue,
    counts: CommentCounts,
    floor: Option<Integrity>,
    view: &ListView,
) -> Result<Value, ToolsError> {
    provenance::check(issue, floor)?;
    let fields = SummaryFields {
        id: &issue.id,
        title: &issue.title,
        state: issue.state,
        labels: &issue.labels,
        priority: issue.priority,
        claim: &issue.claim,
        updated_at: issue.updated_at,
        version: issue.version,
        author_run: &issue.author.run,
        comment_count: counts.total,
        comments_withheld: Some(counts.total - counts.at_floor).filter(|&n| n > 0),
    };
    let Value::Object(mut out) =
        serde_json::to_value(&fields).map_err(|err| ToolsError::Internal {
            detail: format!("summary not serialisable: {err}"),
        })?
    else {
        return Err(ToolsError::Internal {
            detail: "a summary serialised as something other than an object".to_owned(),
        });
    };
    provenance::label(&mut out, issue.integrity);
    let body = issue.body.as_str();
    if view.body || view.fields.iter().any(|f| f == "body") {
        out.insert("body".to_owned(), Value::String(body.to_owned()));
    } else {
        let (excerpt, cut) = excerpt(body, EXCERPT_CHARS);
        out.insert("excerpt".to_owned(), Value::String(excerpt));
        if cut {
            out.insert("excerpt_cut".to_owned(), Value::Bool(true));
        }
    }
    let comments = match view.comments {
        _ if view.fields.iter().any(|f| f == "comments") => Some(usize::MAX),
        limit => limit,
    };
    let named = view.fields.iter().any(|f| f != "body" && f != "comments");
    if !named && comments.is_none() {
        return Ok(Value::Object(out));
    }
    // Fields by name and comments: from the issue's JSON as a run with
    // `floor` is shown it (comments below the floor left out, the rest
    // labelled).
    let Value::Object(mut full) = provenance::issue_json(issue, floor, false)? else {
        return Ok(Value::Object(out));
    };
    for name in &view.fields {
        if name != "body"
            && name != "comments"
            && let Some(value) = full.remove(name.as_str())
        {
            out.insert(name.clone(), value);
        }
    }
    if let Some(limit) = comments {
        let comments = match full.remove("comments") {
            Some(Value::Array(comments)) => comments,
            _ => Vec::new(),
        };
        put_latest(&mut out, comments, limit);
    }
    Ok(Value::Object(out))
}

/// A whole issue (its JSON, as a write returns it) with only its newest
/// [`COMMENTS_DEFAULT`] comments, and how many there are:
/// `comment_count`, `older_comments` and `comments_cursor` (null when no
/// older comment is left out).
pub(crate) fn whole_issue(issue: Value) -> Value {
    let Value::Object(mut full) = issue else {
        return issue;
    };
    let comments = match full.remove("comments") {
        Some(Value::Array(comments)) => comments,
        Some(other) => {
            full.insert("comments".to_owned(), other);
            return Value::Object(full);
        }
        None => return Value::Object(full),
    };
    // Every comment of the issue, shown or not, as `get_issue` counts.
    let withheld = full
        .get("comments_withheld")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    full.insert(
        "comment_count".to_owned(),
        Value::from(comments.len() as u64 + withheld),
    );
    put_latest(&mut full, comments, COMMENTS_DEFAULT);
    Value::Object(full)
}

/// An issue read through a comment window (its JSON holds only the
/// window's comments, `facts` counts them all), shaped as
/// [`whole_issue`] shapes a whole one. A `before` that is no comment of
/// the issue is refused.
pub(crate) fn windowed_issue(
    issue: Value,
    facts: &CommentFacts,
    before: Option<&CommentId>,
) -> Result<Value, ToolsError> {
    if !facts.before_found
        && let Some(before) = before
    {
        return Err(ToolsError::InvalidArgument {
            field: "comments_before".to_owned(),
            reason: format!(
                "this issue has no comment {before}; pass the comments_cursor of an earlier \
                 get_issue answer for this issue, unchanged"
            ),
        });
    }
    let Value::Object(mut full) = issue else {
        return Ok(issue);
    };
    if !matches!(full.get("comments"), Some(Value::Array(_))) {
        return Ok(Value::Object(full));
    }
    full.insert("comment_count".to_owned(), Value::from(facts.total));
    set_older(&mut full, facts.older);
    Ok(Value::Object(full))
}

/// Starts the issue's `body` at byte `offset` (get_issue's `body_offset`,
/// read from an earlier answer's `body_truncated.next_offset`), recorded
/// as `body_offset`; 0 leaves it whole.
pub(crate) fn skip_body(issue: &mut Value, offset: usize) -> Result<(), ToolsError> {
    if offset == 0 {
        return Ok(());
    }
    let Some(Value::String(body)) = issue.get_mut("body") else {
        return Ok(());
    };
    if offset > body.len() || !body.is_char_boundary(offset) {
        return Err(ToolsError::InvalidArgument {
            field: "body_offset".to_owned(),
            reason: format!(
                "{offset} is not a place in this body of {} bytes; pass the next_offset of an \
                 earlier answer's body_truncated, unchanged",
                body.len()
            ),
        });
    }
    body.drain(..offset);
    if let Value::Object(map) = issue {
        map.insert("body_offset".to_owned(), Value::from(offset));
    }
    Ok(())
}

/// Puts the newest `limit` of `comments` into `out`, with
/// `older_comments` and `comments_cursor`.
fn put_latest(out: &mut Map<String, Value>, mut comments: Vec<Value>, limit: usize) {
    let start = comments.len().saturating_sub(limit);
    comments.drain(..start);
    out.insert("comments".to_owned(), Value::Array(comments));
    set_older(out, start);
}

/// Records that the `older` comments before those in `out["comments"]`
/// are left out: `older_comments` and the cursor that reads them.
pub(crate) fn set_older(out: &mut Map<String, Value>, older: usize) {
    let cursor = match out.get("comments").and_then(Value::as_array) {
        Some(shown) if older > 0 => shown
            .first()
            .and_then(|c| c.get("id"))
            .cloned()
            .unwrap_or(Value::Null),
        _ => Value::Null,
    };
    out.insert("older_comments".to_owned(), Value::from(older));
    out.insert("comments_cursor".to_owned(), cursor);
}

/// The start of `text` as one line of at most `max` characters (runs of
/// whitespace become one space), cut at a word boundary when one is near;
/// `…` ends a cut excerpt, and the flag says whether it was cut.
pub(crate) fn excerpt(text: &str, max: usize) -> (String, bool) {
    // Normalised only as far as it can matter: `max` characters and one more.
    let mut whole = String::new();
    let mut chars = 0;
    for word in text.split_whitespace() {
        if chars > max {
            break;
        }
        if !whole.is_empty() {
            whole.push(' ');
            chars += 1;
        }
        whole.push_str(word);
        chars += word.chars().count();
    }
    if chars <= max {
        return (whole, false);
    }
    // One character of `max` is the `…`.
    let room = max.saturating_sub(1);
    let end = whole
        .char_indices()
        .nth(room)
        .map_or(whole.len(), |(i, _)| i);
    let mut head = &whole[..end];
    if let Some(space) = head.rfind(' ')
        && head[..space].chars().count() >= room / 2
    {
        head = &head[..space];
    }
    (format!("{}…", head.trim_end()), true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use corkboard_board::{Author, Body, Comment, CommentBody, GrantId, NewIssue, TenantId};
    use serde_json::json;

    /// An issue written by a run at `level`, with comments by runs at
    /// `comment_levels` (`c0`, `c1`, ...).
    fn issue(body: &str, level: Integrity, comment_levels: &[Integrity]) -> Issue {
        let mut new = NewIssue::new(Title::parse("Flaky test").unwrap());
        new.body = Body::parse(body).unwrap();
        new.labels = Labels::parse(vec!["bug".to_owned()]).unwrap();
        new.priority = Priority::High;
        let author = Author::run(RunId::parse("run-1").unwrap(), None, level);
        let mut issue = new.into_issue(
            TenantId::parse("acme").unwrap(),
            author,
            Timestamp::from_millis(1_000),
        );
        for (i, &level) in comment_levels.iter().enumerate() {
            issue.comments.push(Comment {
                id: CommentId::generate(),
                body: CommentBody::parse(format!("c{i}")).unwrap(),
                author: Author::run(RunId::parse("run-2").unwrap(), None, level),
                created_at: Timestamp::from_millis(2_000),
            });
        }
        issue
    }

    /// The bodies of the comments an answer shows, in order.
    fn comment_bodies(answer: &Value) -> Vec<&str> {
        answer["comments"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["body"].as_str().unwrap())
            .collect()
    }

    /// [`summary`] of an issue read with its comments.
    fn summary_of(
        issue: &Issue,
        floor: Option<Integrity>,
        view: &ListView,
    ) -> Result<Value, ToolsError> {
        summary(
            issue,
            CommentCounts::of(&issue.comments, floor),
            floor,
            view,
        )
    }

    fn keys(value: &Value) -> Vec<&str> {
        value
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect()
    }

    #[test]
    fn a_summary_has_the_documented_fields_and_an_excerpt() {
        let long = "word ".repeat(100);
        let read = issue(&long, Integrity::Agent, &[Integrity::Agent; 3]);
        let s = summary_of(&read, None, &ListView::default()).unwrap();
        // The keys in order (serde_json's map is sorted).
        assert_eq!(
            keys(&s),
            [
                "_meta",
                "author_run",
                "claim",
                "comment_count",
                "excerpt",
                "excerpt_cut",
                "id",
                "labels",
                "priority",
                "state",
                "title",
                "updated_at",
                "version"
            ]
        );
        // Each field as the issue's own JSON has it.
        let whole = serde_json::to_value(&read).unwrap();
        for name in [
            "id",
            "title",
            "state",
            "labels",
            "priority",
            "claim",
            "updated_at",
            "version",
        ] {
            assert_eq!(s[name], whole[name], "{name}");
        }
        assert_eq!(s["_meta"][provenance::INTEGRITY_META], "agent");
        assert_eq!(s["author_run"], "run-1");
        assert_eq!(s["comment_count"], 3);
        let excerpt = s["excerpt"].as_str().unwrap();
        assert!(excerpt.chars().count() <= EXCERPT_CHARS, "{excerpt}");
        assert!(excerpt.ends_with("word…"), "{excerpt}");
        // A short body is whole and not marked.
        let s = summary_of(
            &issue("short body", Integrity::Agent, &[]),
            None,
            &ListView::default(),
        )
        .unwrap();
        assert_eq!(s["excerpt"], "short body");
        assert!(s.get("excerpt_cut").is_none());
    }

    #[test]
    fn a_summary_counts_every_comment_and_those_withheld() {
        let read = issue(
            "b",
            Integrity::Agent,
            &[Integrity::Person, Integrity::External, Integrity::Agent],
        );
        let floor = Some(Integrity::Agent);
        let s = summary_of(&read, floor, &ListView::default()).unwrap();
        assert_eq!(s["comment_count"], 3);
        assert_eq!(s["comments_withheld"], 1);
        // A whole issue counts the same.
        let whole = whole_issue(provenance::issue_json(&read, floor, true).unwrap());
        assert_eq!(whole["comment_count"], 3);
        assert_eq!(whole["comments_withheld"], 1);
        assert_eq!(comment_bodies(&whole), ["c0", "c2"]);
        // Asked for, the comments shown are those at or above the floor,
        // labelled.
        let view = ListView {
            comments: Some(10),
            ..ListView::default()
        };
        let s = summary_of(&read, floor, &view).unwrap();
        assert_eq!(comment_bodies(&s), ["c0", "c2"]);
        assert_eq!(
            s["comments"][1]["_meta"][provenance::INTEGRITY_META],
            "agent"
        );
        assert_eq!(s["older_comments"], 0);
        // No floor: all counted, none withheld.
        let s = summary_of(&read, None, &ListView::default()).unwrap();
        assert_eq!(s["comment_count"], 3);
        assert!(s.get("comments_withheld").is_none());
        // An issue below the floor is refused.
        let low = issue("b", Integrity::External, &[]);
        assert!(matches!(
            summary_of(&low, floor, &ListView::default()),
            Err(ToolsError::Withheld { .. })
        ));
    }

    #[test]
    fn fields_by_name_appear_when_the_issue_has_them() {
        let mut read = issue("b", Integrity::Agent, &[Integrity::Agent; 12]);
        read.claim = Some(Claim {
            run: RunId::parse("run-2").unwrap(),
            grant: GrantId::generate(),
            claimed_at: Timestamp::from_millis(3_000),
            expires_at: Timestamp::from_millis(4_000),
        });
        read.parent = Some(IssueId::generate());
        let view = ListView {
            fields: vec!["created_at".into(), "parent".into(), "close_reason".into()],
            body: true,
            comments: Some(2),
        };
        let s = summary_of(&read, None, &view).unwrap();
        assert_eq!(s["claim"]["run"], "run-2", "claim is in every summary");
        assert_eq!(s["parent"], read.parent.as_ref().unwrap().as_str());
        assert_eq!(
            s["created_at"],
            serde_json::to_value(read.created_at).unwrap()
        );
        assert_eq!(
            s["close_reason"],
            Value::Null,
            "null in the issue, null here"
        );
        assert_eq!(s["body"], "b");
        assert!(s.get("excerpt").is_none());
        assert_eq!(comment_bodies(&s), ["c10", "c11"]);
        assert_eq!(s["older_comments"], 10);
        assert_eq!(s["comments_cursor"], read.comments[10].id.as_str());
        assert_eq!(s["comment_count"], 12);
        assert!(s.get("tenant").is_none() && s.get("author").is_none());
        // `fields: ["comments"]` is every comment; `body` by name the body.
        let view = ListView {
            fields: vec!["comments".into(), "body".into()],
            ..ListView::default()
        };
        let s = summary_of(&read, None, &view).unwrap();
        assert_eq!(s["comments"].as_array().unwrap().len(), 12);
        assert_eq!(s["body"], "b");
    }

    fn issue_json(comments: usize, body: &str) -> Value {
        json!({
            "id": "iss_01JD3Z9Q4X8M2N6P7R5S1T0V9W",
            "tenant": "acme",
            "title": "Flaky test",
            "body": body,
            "state": "todo",
            "labels": ["bug"],
            "priority": "high",
            "author": { "run": "run-1", "grant": "gr_1" },
            "created_at": "2026-11-30T00:00:00Z",
            "updated_at": "2026-11-30T00:00:01Z",
            "version": 3,
            "comments": (0..comments)
                .map(|i| json!({ "id": format!("cmt_{i}"), "body": format!("c{i}") }))
                .collect::<Vec<_>>(),
        })
    }

    #[test]
    fn a_whole_issue_shows_its_newest_comments_with_a_cursor() {
        let answer = whole_issue(issue_json(30, "b"));
        assert_eq!(answer["comment_count"], 30);
        let ids: Vec<&str> = answer["comments"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["id"].as_str().unwrap())
            .collect();
        let newest: Vec<String> = (20..30).map(|i| format!("cmt_{i}")).collect();
        assert_eq!(ids, newest);
        assert_eq!(answer["older_comments"], 20);
        assert_eq!(answer["comments_cursor"], "cmt_20");
        let few = whole_issue(issue_json(3, "b"));
        assert_eq!(few["older_comments"], 0);
        assert_eq!(few["comments_cursor"], Value::Null);
    }

    #[test]
    fn a_windowed_issue_takes_its_counts_from_the_store() {
        // The store read comments 5..8 of 12: 5 older ones are left out.
        let mut read = issue_json(12, "b");
        read["comments"] = Value::Array(read["comments"].as_array().unwrap()[5..8].to_vec());
        let facts = CommentFacts {
            total: 12,
            older: 5,
            over_bytes: 0,
            before_found: true,
        };
        let before = CommentId::generate();
        let answer = windowed_issue(read.clone(), &facts, Some(&before)).unwrap();
        assert_eq!(answer["comment_count"], 12);
        assert_eq!(answer["older_comments"], 5);
        assert_eq!(answer["comments_cursor"], "cmt_5");
        assert_eq!(answer["comments"].as_array().unwrap().len(), 3);
        let unknown = CommentFacts::unknown_before(12);
        match windowed_issue(read, &unknown, Some(&before)) {
            Err(ToolsError::InvalidArgument { field, reason }) => {
                assert_eq!(field, "comments_before");
                assert_eq!(
                    reason,
                    format!(
                        "this issue has no comment {before}; pass the comments_cursor of an \
                         earlier get_issue answer for this issue, unchanged"
                    )
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn excerpts_cut_on_word_and_char_boundaries() {
        assert_eq!(excerpt("a  b\n\nc", 10), ("a b c".into(), false));
        assert_eq!(
            excerpt("alpha beta gamma", 12),
            ("alpha beta…".into(), true)
        );
        let (cut, was_cut) = excerpt(&"é".repeat(50), 10);
        assert!(was_cut);
        assert_eq!(cut, format!("{}…", "é".repeat(9)));
        assert_eq!(cut.chars().count(), 10);
        assert_eq!(excerpt("", 10), (String::new(), false));
    }
}
