//! `get_issue`: one issue with a window of its comments and the relations
//! other issues hold to it.

use super::Success;
use super::args::{Args, invalid, issue_id};
use super::schema::{
    COMMENT_ID_PATTERN, issue_answer_schema, issue_id_schema, object, with_properties,
};
use crate::error::ToolsError;
use crate::kept_answers::{AnswerKey, Kept, until_a_claim_ends};
use crate::provenance;
use crate::result_budget;
use crate::service::BoardTools;
use crate::view::{self, COMMENTS_DEFAULT};
use corkboard_board::{
    CommentId, CommentWindow, IssueId, Timestamp, ViewSince, history_limits, limits,
};
use corkboard_grants::ResolvedGrant;
use serde_json::{Map, Value, json};

pub(crate) const DESCRIPTION: &str = "Read one issue: every field, with its latest comments \
(10 unless `comments_limit` says otherwise, oldest first) and `comment_count`. When older \
comments exist, `older_comments` counts them and `comments_cursor` is a comment id: call \
get_issue again with comments_before=comments_cursor for the ones before it, until \
comments_cursor is null. `id` is an issue id exactly as create_issue or list_issues returned \
it: iss_ followed by 26 characters, e.g. iss_01JD3Z9Q4X8M2N6P7R5S1T0V9W; never shorten or \
retype it from memory. The result's `version` is the value update_issue's expected_version \
wants. An answer over the result budget (about 8,000 tokens) keeps the newest comments \
(`truncated` counts the older ones left out) and cuts a long body (`body_truncated`: pass its \
next_offset as body_offset for the rest). It also shows the \
relations: `parent`, `duplicate_of`, `blocked_by`, and the inverse ones other issues hold to \
it, `children` (its sub-issues) and `blocks` (issues waiting on it), each listing at most 100 \
(more_children / more_blocks say when there are more); `claim` names the run working on it. \
`history`=N adds its latest N changes (history_before pages back). An unknown id is an error \
that says so.";

pub(crate) const ARGS: [&str; 6] = [
    "id",
    "comments_before",
    "comments_limit",
    "body_offset",
    "history",
    "history_before",
];

/// Which of the issue's changes to add: how many, before which version.
pub(crate) fn parse_history(
    map: &Map<String, Value>,
) -> Result<Option<(u32, Option<u64>)>, ToolsError> {
    let args = Args::new("get_issue", map, &ARGS)?;
    let max = history_limits::HISTORY_PAGE_MAX as usize;
    let count = args.count("history", 0, max)?;
    let before = args.u64("history_before")?;
    Ok(match (count, before) {
        (Some(0), _) => None,
        (None, None) => None,
        (count, before) => Some((
            count.map_or(history_limits::HISTORY_DEFAULT, |n| n as u32),
            before,
        )),
    })
}

pub(crate) fn parse(map: &Map<String, Value>) -> Result<IssueId, ToolsError> {
    let args = Args::new("get_issue", map, &ARGS)?;
    issue_id(&args, "id")
}

/// Which part of an issue get_issue shows: its comment window and where
/// its body starts (`body_offset`, in bytes).
pub(crate) fn parse_view(map: &Map<String, Value>) -> Result<(CommentWindow, usize), ToolsError> {
    let args = Args::new("get_issue", map, &ARGS)?;
    let before = args
        .str("comments_before")?
        .map(|id| {
            CommentId::parse(id).map_err(|_| {
                invalid(
                    "comments_before",
                    "must be the comments_cursor of an earlier get_issue answer, unchanged"
                        .to_owned(),
                )
            })
        })
        .transpose()?;
    let limit = args
        .count("comments_limit", 1, limits::COMMENTS_MAX)?
        .unwrap_or(COMMENTS_DEFAULT);
    let offset = args
        .count("body_offset", 0, limits::BODY_MAX_BYTES)?
        .unwrap_or(0);
    let window = CommentWindow::latest(limit);
    let window = match before {
        Some(before) => window.before(before),
        None => window,
    };
    Ok((window, offset))
}

pub(crate) async fn run(
    tools: &BoardTools,
    principal: &ResolvedGrant,
    arguments: &Map<String, Value>,
) -> Result<Success, ToolsError> {
    let grant = principal.grant();
    let tenant = &grant.tenant;
    let id = parse(arguments)?;
    let (window, body_offset) = parse_view(arguments)?;
    // The answer is cut to the result budget anyway (oldest
    // comments first, the newest kept), so the store reads no
    // comments beyond that many bytes of body: what it leaves
    // out could not be shown. An issue may hold 500 comments
    // of 64 KiB; without the bound, comments_limit=500 reads
    // all ~32 MiB to show one of them.
    let window = window.max_bytes(tools.result_budget());
    let history = parse_history(arguments)?;
    // An answer without history is kept, and given again while the tenant's
    // epoch has not moved (kept_answers.rs); the store checks the epoch in
    // the same call that would read the view.
    let key = history.is_none().then(|| AnswerKey::Issue {
        id: id.clone(),
        window: window.clone(),
        body_offset,
        min_integrity: grant.min_integrity,
    });
    let kept = key
        .as_ref()
        .and_then(|key| tools.kept().get(tenant, key, Timestamp::now()));
    let read = tools
        .bounded(
            Some(&id),
            tools.store().get_issue_view_since(
                tenant,
                &id,
                &window,
                kept.as_ref().map(|kept| kept.epoch),
            ),
        )
        .await?;
    let (issue, epoch) = match (read, kept) {
        (ViewSince::Unchanged, Some(kept)) => {
            return Ok(Success {
                answer: kept.answer,
                issue: Some(id),
            });
        }
        (ViewSince::Read { view, epoch }, _) => (view, epoch),
        (ViewSince::Unchanged, None) => {
            return Err(ToolsError::Internal {
                detail: "the store found an unchanged board for a read that named no epoch"
                    .to_owned(),
            });
        }
    };
    let until = until_a_claim_ends([&issue.issue]);
    let facts = issue.comment_facts;
    let shown = provenance::shown_json(&issue, &issue.issue, grant.min_integrity, true)?;
    let mut value = view::windowed_issue(shown, &facts, window.before_id())?;
    view::skip_body(&mut value, body_offset)?;
    if facts.over_bytes > 0 {
        result_budget::comments_cut(&mut value, facts.over_bytes, tools.result_budget());
    }
    let headline = format!("get_issue: issue {id}");
    let Some((count, before)) = history else {
        let answer = result_budget::issue(value, &headline, tools.result_budget());
        if let (Some(key), Some(epoch)) = (key, epoch) {
            let kept = Kept {
                epoch,
                answer: answer.clone(),
                until,
            };
            tools.kept().keep(tenant, key, kept);
        }
        return Ok(Success {
            answer,
            issue: Some(id),
        });
    };
    let mut page = tools
        .bounded(
            Some(&id),
            tools.store().issue_history(tenant, &id, before, count),
        )
        .await?;
    // The changes share the result budget: the oldest go first, and
    // `history_before` then continues right after the last one shown.
    loop {
        let mut with = value.clone();
        if let Value::Object(map) = &mut with {
            let (changes, withheld) = provenance::changes_json(&page.changes, grant.min_integrity)?;
            map.insert("history".to_owned(), changes);
            if withheld > 0 {
                map.insert("history_withheld".to_owned(), json!(withheld));
            }
            map.insert("history_before".to_owned(), json!(page.next_before));
        }
        let answer = result_budget::issue(with, &headline, tools.result_budget());
        if answer.size() <= tools.result_budget() || page.changes.is_empty() {
            return Ok(Success {
                answer,
                issue: Some(id),
            });
        }
        page.changes.pop();
        page.next_before = page
            .changes
            .last()
            .map(|c| i64::try_from(c.version).unwrap_or(i64::MAX));
    }
}

pub(crate) fn input_schema() -> Value {
    object(
        json!({
            "id": issue_id_schema("The issue to read."),
            "comments_before": {
                "type": "string",
                "pattern": COMMENT_ID_PATTERN,
                "minLength": 30,
                "maxLength": 30,
                "description": "The comments_cursor of an earlier get_issue answer for this \
                                issue, unchanged: the answer then holds the comments before \
                                that one. Omit for the latest comments.",
            },
            "comments_limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": limits::COMMENTS_MAX,
                "default": COMMENTS_DEFAULT,
                "description": format!(
                    "Most comments in the answer, 1-{}; defaults to {COMMENTS_DEFAULT}. The \
                     result budget may hold fewer (then `truncated` says so).",
                    limits::COMMENTS_MAX
                ),
            },
            "body_offset": {
                "type": "integer",
                "minimum": 0,
                "maximum": limits::BODY_MAX_BYTES,
                "default": 0,
                "description": "Start the body at this byte: the next_offset of an earlier \
                                answer's body_truncated, unchanged, to read the rest of a body \
                                too long for one answer.",
            },
            "history": {
                "type": "integer",
                "minimum": 0,
                "maximum": history_limits::HISTORY_PAGE_MAX,
                "description": "Add the latest N changes (who changed what, when).",
            },
            "history_before": {
                "type": "integer",
                "minimum": 1,
                "description": "An earlier answer's history_before: the changes before it.",
            },
        }),
        &["id"],
    )
}

/// get_issue: the issue and the relations other issues hold to it.
pub(crate) fn output_schema() -> Value {
    let ids = |description: &str| json!({ "type": "array", "items": { "type": "string" }, "description": description });
    let mut schema = with_properties(
        issue_answer_schema(),
        [
            (
                "children",
                ids("Sub-issues (issues whose parent this is), newest first."),
            ),
            ("more_children", json!({ "type": "boolean" })),
            ("blocks", ids("Issues blocked by this one, newest first.")),
            ("more_blocks", json!({ "type": "boolean" })),
        ],
    );
    // Present only when asked for (`history`): not required.
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        properties.insert(
            "history".to_owned(),
            json!({
                "type": "array",
                "items": { "type": "object" },
                "description": "The latest changes, newest first: {version, at, by, kind, \
                                fields: [{field, before, after} or {field, added, removed}]}.",
            }),
        );
        properties.insert(
            "history_withheld".to_owned(),
            json!({
                "type": "integer",
                "minimum": 1,
                "description": "Changes left out: made below this run's integrity floor.",
            }),
        );
        properties.insert(
            "history_before".to_owned(),
            json!({
                "type": ["integer", "null"],
                "description": "Pass as history_before for older changes; null: none left.",
            }),
        );
    }
    schema
}
