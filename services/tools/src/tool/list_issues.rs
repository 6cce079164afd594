//! `list_issues`: a page of issue summaries by filters; the list filters
//! ([`FILTER_ARGS`], [`filters`]) are shared with `search_issues`.

use super::Success;
use super::args::{Args, as_field, invalid, optional_id};
use super::schema::{issue_schema, labels_schema, object, related_id_schema, truncated_schema};
use crate::error::ToolsError;
use crate::kept_answers::{AnswerKey, Kept, until_a_claim_ends};
use crate::result_budget;
use crate::service::BoardTools;
use crate::view::{self, EXCERPT_CHARS, ListView, SELECTABLE_FIELDS};
use corkboard_board::{
    ClaimFilter, CommentCounts, IssueId, IssueState, Label, LabelFilter, ListQuery, PageComments,
    Priority, RunId, Timestamp, limits, stale_window,
};
use corkboard_grants::ResolvedGrant;
use serde_json::{Map, Value, json};

pub(crate) const DESCRIPTION: &str = "List issues on this run's board, newest first. Returns \
{issues, next_cursor, truncated}; each issue is a summary: id, title, state, labels, priority, \
author_run, claim (when claimed), updated_at, version, comment_count and an excerpt of the body \
(at most 160 characters; excerpt_cut=true when the body goes on). To see more, name it: \
`fields` adds fields by name (body, comments, created_at, author, ...), `include_body`=true \
gives the whole body, `include_comments`=N the latest N comments of each issue; or read one \
issue with get_issue. Filters (each argument says what it keeps) combine with AND; to find \
work to take, `ready: true` lists it best first (see claim_next). Paging: a page holds at most `limit` issues (default 50, max 200). \
When next_cursor is a string, call list_issues again with the same filters and \
cursor=next_cursor for the next page; null means this was the last page. Budget: one result \
is at most about 8,000 tokens (32,000 bytes by default, set by the board's operator); a page \
that would be larger holds fewer issues, and then `truncated` says how many were left out and \
next_cursor continues right after the last issue shown, so nothing is skipped. To find issues \
by words in their body or comments, use search_issues.";

/// The list filters, shared by list_issues and search_issues (parsed by
/// [`filters`], their schemas taken from this tool's by `search_issues.rs`).
pub(crate) const FILTER_ARGS: [&str; 10] = [
    "states",
    "labels",
    "label_match",
    "text",
    "author_run",
    "priorities",
    "updated_since",
    "parent",
    "unclaimed",
    "claimed_by",
];

pub(crate) const ARGS: [&str; 17] = [
    "ready",
    "stale",
    "states",
    "labels",
    "label_match",
    "text",
    "author_run",
    "priorities",
    "updated_since",
    "limit",
    "cursor",
    "fields",
    "include_body",
    "include_comments",
    "parent",
    "unclaimed",
    "claimed_by",
];

/// The list filters ([`FILTER_ARGS`]) of a list or search call.
pub(crate) fn filters(args: &Args<'_>) -> Result<ListQuery, ToolsError> {
    let mut query = ListQuery::default();
    if let Some(states) = args.str_list("states")? {
        query.states = states
            .into_iter()
            .map(IssueState::parse)
            .collect::<Result<_, _>>()
            .map_err(as_field("states"))?;
    }
    let wanted = args
        .str_list("labels")?
        .unwrap_or_default()
        .into_iter()
        .map(Label::parse)
        .collect::<Result<Vec<_>, _>>()?;
    if wanted.len() > limits::LABELS_MAX {
        return Err(invalid(
            "labels",
            format!("at most {} labels may be given", limits::LABELS_MAX),
        ));
    }
    let match_all = match args.str("label_match")? {
        None | Some("all") => true,
        Some("any") => false,
        Some(other) => {
            return Err(invalid(
                "label_match",
                format!("unknown value {other:?}; expected \"all\" or \"any\""),
            ));
        }
    };
    query.labels = match (wanted.is_empty(), match_all) {
        (true, _) => LabelFilter::None,
        (false, true) => LabelFilter::All(wanted),
        (false, false) => LabelFilter::Any(wanted),
    };
    query.text = args.str("text")?.map(str::to_owned);
    query.author_run = args
        .str("author_run")?
        .map(RunId::parse)
        .transpose()
        .map_err(as_field("author_run"))?;
    if let Some(priorities) = args.str_list("priorities")? {
        query.priorities = priorities
            .into_iter()
            .map(Priority::parse)
            .collect::<Result<_, _>>()
            .map_err(as_field("priorities"))?;
    }
    query.updated_since = args
        .str("updated_since")?
        .map(|text| {
            Timestamp::parse_rfc3339(text).ok_or_else(|| {
                invalid(
                    "updated_since",
                    format!(
                        "{text:?} is not an RFC 3339 time; write e.g. 2026-01-31T12:00:00Z \
                         (an updated_at value from an issue works)"
                    ),
                )
            })
        })
        .transpose()?;
    query.parent = optional_id(args, "parent")?;
    let claimed_by = args
        .str("claimed_by")?
        .map(RunId::parse)
        .transpose()
        .map_err(as_field("claimed_by"))?;
    query.claim = match (args.bool("unclaimed")?, claimed_by) {
        (Some(true), Some(_)) => {
            return Err(invalid(
                "unclaimed",
                "cannot be combined with claimed_by; give one of them".to_owned(),
            ));
        }
        (Some(true), None) => ClaimFilter::Unclaimed,
        (_, Some(run)) => ClaimFilter::ClaimedBy(run),
        (_, None) => ClaimFilter::Any,
    };
    Ok(query)
}

pub(crate) fn parse(map: &Map<String, Value>) -> Result<ListQuery, ToolsError> {
    let args = Args::new("list_issues", map, &ARGS)?;
    let mut query = filters(&args)?;
    query.ready = args.bool("ready")?.unwrap_or(false);
    if args.bool("stale")? == Some(true) {
        if query.claim != ClaimFilter::Any {
            return Err(invalid(
                "stale",
                "cannot be combined with unclaimed or claimed_by; give one of them".to_owned(),
            ));
        }
        // Until when is the board's (its lease): `run` sets it.
        query.claim = ClaimFilter::Stale {
            until: Timestamp::now(),
        };
    }
    if let Some(limit) = args.u64("limit")? {
        query.limit = u32::try_from(limit)
            .ok()
            .filter(|l| (1..=limits::PAGE_MAX).contains(l))
            .ok_or_else(|| {
                invalid(
                    "limit",
                    format!("must be between 1 and {}", limits::PAGE_MAX),
                )
            })?;
    }
    query.cursor = args
        .str("cursor")?
        .map(IssueId::parse)
        .transpose()
        .map_err(|_| {
            invalid(
                "cursor",
                "must be the next_cursor value of the previous list_issues page, unchanged"
                    .to_owned(),
            )
        })?;
    query.validate()?;
    Ok(query)
}

/// What a list shows of each issue: `fields`, `include_body` and
/// `include_comments`.
pub(crate) fn parse_view(map: &Map<String, Value>) -> Result<ListView, ToolsError> {
    let args = Args::new("list_issues", map, &ARGS)?;
    let fields = args
        .str_list("fields")?
        .unwrap_or_default()
        .into_iter()
        .map(|name| {
            if SELECTABLE_FIELDS.contains(&name) {
                Ok(name.to_owned())
            } else {
                Err(invalid(
                    "fields",
                    format!(
                        "unknown field {name:?}; a summary always has id, title, state, labels, \
                         priority, author_run, claim, updated_at, version, comment_count and \
                         excerpt, and fields may add: {}",
                        SELECTABLE_FIELDS.join(", ")
                    ),
                ))
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ListView {
        fields,
        body: args.bool("include_body")?.unwrap_or(false),
        comments: args.count("include_comments", 0, limits::COMMENTS_MAX)?,
    })
}

pub(crate) async fn run(
    tools: &BoardTools,
    principal: &ResolvedGrant,
    arguments: &Map<String, Value>,
) -> Result<Success, ToolsError> {
    let grant = principal.grant();
    let tenant = &grant.tenant;
    let mut query = parse(arguments)?;
    if let ClaimFilter::Stale { until } = &mut query.claim {
        // Lapsed, or lapsing within the last part of a lease.
        let window = i64::try_from(stale_window(tools.claim_lease()).as_millis()).unwrap_or(0);
        *until = Timestamp::now().plus_millis(window);
    }
    // Only issues at or above the grant's floor, in the store's query.
    query.min_integrity = grant.min_integrity;
    let shown = parse_view(arguments)?;
    // A summary shows how many comments an issue has, not what they say:
    // unless the view shows them, the store counts them without reading
    // them.
    if !shown.needs_comments() {
        query.comments = PageComments::Counted;
    }
    // A page that does not depend on the time is kept, and given again
    // while the tenant's epoch, read before the page, has not moved
    // (kept_answers.rs). Which issues a claim or ready filter keeps
    // changes when a claim ends, with no write.
    let key = (query.claim == ClaimFilter::Any && !query.ready).then(|| AnswerKey::List {
        query: Box::new(query.clone()),
        view: shown.clone(),
    });
    let epoch = match &key {
        Some(_) => {
            tools
                .bounded(None, tools.store().tenant_epoch(tenant))
                .await?
        }
        None => None,
    };
    if let (Some(key), Some(epoch)) = (&key, epoch)
        && let Some(answer) = tools.kept().given(tenant, key, epoch, Timestamp::now())
    {
        return Ok(Success {
            answer,
            issue: None,
        });
    }
    let page = tools
        .bounded(None, tools.store().list_issues(tenant, &query))
        .await?;
    let counted = page.counted.as_deref().unwrap_or_default();
    let items = page
        .issues
        .iter()
        .enumerate()
        .map(|(i, issue)| {
            // A store may have read the comments anyway: then they count.
            let counts = counted
                .get(i)
                .copied()
                .unwrap_or_else(|| CommentCounts::of(&issue.comments, grant.min_integrity));
            view::summary(issue, counts, grant.min_integrity, &shown)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let cursor = page.next_cursor.map(|c| c.as_str().to_owned());
    let answer = result_budget::page(items, cursor, tools.result_budget());
    if let (Some(key), Some(epoch)) = (key, epoch) {
        let kept = Kept {
            epoch,
            answer: answer.clone(),
            until: until_a_claim_ends(&page.issues),
        };
        tools.kept().keep(tenant, key, kept);
    }
    Ok(Success {
        answer,
        issue: None,
    })
}

pub(crate) fn input_schema() -> Value {
    object(
        json!({
            "ready": {
                "type": "boolean",
                "description": "true: only ready work (open, unclaimed, every blocker done or \
                                closed), most urgent then oldest first.",
            },
            "stale": {
                "type": "boolean",
                "description": "true: only claims that lapsed or are about to (holder quiet).",
            },
            "states": {
                "type": "array",
                "items": { "type": "string", "enum": IssueState::names() },
                "description": "Keep issues in any of these states. Omit for every state.",
            },
            "labels": labels_schema("Keep issues carrying these labels (see label_match)."),
            "label_match": {
                "type": "string",
                "enum": ["all", "any"],
                "default": "all",
                "description": "\"all\": an issue must carry every label in `labels`; \
                                \"any\": at least one of them.",
            },
            "text": {
                "type": "string",
                "maxLength": limits::TEXT_FILTER_MAX_CHARS,
                "description": "Case-insensitive substring the title must contain.",
            },
            "author_run": {
                "type": "string",
                "minLength": 1,
                "maxLength": 128,
                "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]*$",
                "description": "Keep issues created by this run id.",
            },
            "priorities": {
                "type": "array",
                "items": {
                    "type": "string",
                    "enum": Priority::ALL.iter().map(|p| p.as_str()).collect::<Vec<_>>(),
                },
                "description": "Keep issues of any of these priorities. Omit for every priority.",
            },
            "updated_since": {
                "type": "string",
                "minLength": 1,
                "maxLength": 64,
                "description": "RFC 3339 time, e.g. 2026-01-31T12:00:00Z: keep issues changed \
                                (or created) at or after it.",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": limits::PAGE_MAX,
                "default": limits::PAGE_DEFAULT,
                "description": format!(
                    "Page size, 1-{}; defaults to {}.",
                    limits::PAGE_MAX,
                    limits::PAGE_DEFAULT
                ),
            },
            "cursor": related_id_schema(
                "The next_cursor of the previous page, unchanged, to read the next page. \
                 Omit for the first page."
            ),
            "fields": {
                "type": "array",
                "items": { "type": "string", "enum": SELECTABLE_FIELDS },
                "uniqueItems": true,
                "description": "Fields to add to each summary, by name; a field an issue \
                                does not have is left out. \"body\" replaces the excerpt with \
                                the whole body, \"comments\" adds every comment.",
            },
            "include_body": {
                "type": "boolean",
                "default": false,
                "description": "true: each issue's whole body instead of the excerpt.",
            },
            "include_comments": {
                "type": "integer",
                "minimum": 0,
                "maximum": limits::COMMENTS_MAX,
                "description": "Add each issue's latest N comments (with older_comments and \
                                comments_cursor for get_issue). Omit for none.",
            },
            "parent": related_id_schema("Keep the sub-issues of this issue."),
            "unclaimed": {
                "type": "boolean",
                "description": "true: keep issues no run has claimed (work free to take).",
            },
            "claimed_by": {
                "type": "string",
                "minLength": 1,
                "maxLength": 128,
                "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]*$",
                "description": "Keep issues claimed by this run id.",
            },
        }),
        &[],
    )
}

/// One issue of a list page: the summary, plus the fields asked for.
/// Open to new properties, like the issue.
fn summary_schema() -> Value {
    let full = issue_schema();
    let mut properties = full["properties"].as_object().cloned().unwrap_or_default();
    properties.remove("tenant");
    for (name, property) in [
        (
            "author_run",
            json!({ "type": "string", "description": "The run that created the issue." }),
        ),
        (
            "excerpt",
            json!({
                "type": "string",
                "description": format!(
                    "The start of the body on one line, at most {EXCERPT_CHARS} characters; \
                     ends with … when cut."
                ),
            }),
        ),
        (
            "excerpt_cut",
            json!({
                "type": "boolean",
                "description": "true when the body goes on past the excerpt: pass \
                                include_body=true or call get_issue for all of it.",
            }),
        ),
    ] {
        properties.insert(name.to_owned(), property);
    }
    json!({
        "type": "object",
        "properties": properties,
        "required": [
            "id", "title", "state", "labels", "priority", "author_run", "updated_at",
            "version", "comment_count",
        ],
    })
}

pub(crate) fn output_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "issues": { "type": "array", "items": summary_schema() },
            "next_cursor": {
                "type": ["string", "null"],
                "description": "Pass as cursor for the next page; null on the last page.",
            },
            "truncated": truncated_schema("issues"),
        },
        "required": ["issues", "next_cursor", "truncated"],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::args::testing::{field_of, map};

    #[test]
    fn list_parses_filters_and_bounds() {
        let q = parse(&map(json!({}))).unwrap();
        assert_eq!(q, ListQuery::default());
        let q = parse(&map(json!({
            "states": ["todo", "in_progress"], "labels": ["a", "b"], "label_match": "any",
            "text": "flaky", "author_run": "run-1", "limit": 10.0
        })))
        .unwrap();
        assert_eq!(q.states, [IssueState::Todo, IssueState::InProgress]);
        assert!(matches!(q.labels, LabelFilter::Any(ref l) if l.len() == 2));
        assert_eq!(q.limit, 10);
        assert_eq!(q.author_run.unwrap().as_str(), "run-1");
        for (args, field) in [
            (json!({"limit": 0}), "limit"),
            (json!({"limit": 201}), "limit"),
            (json!({"limit": -1}), "limit"),
            (json!({"limit": 1.5}), "limit"),
            (json!({"cursor": "page-2"}), "cursor"),
            (json!({"author_run": "a/b"}), "author_run"),
            (json!({"states": ["open"]}), "states"),
            (json!({"label_match": "some"}), "label_match"),
            (json!({"text": "x".repeat(201)}), "text"),
        ] {
            assert_eq!(
                field_of(parse(&map(args.clone())).unwrap_err()),
                field,
                "{args}"
            );
        }
    }
}
