//! `search_issues`: full-text search of titles, bodies and comments, with
//! `list_issues`'s filters.

use super::args::{Args, invalid};
use super::list_issues;
use super::schema::{meta_schema, object, truncated_schema};
use super::{Success, round};
use crate::error::ToolsError;
use crate::provenance;
use crate::result_budget;
use crate::service::BoardTools;
use corkboard_board::{
    Integrity, IssueState, Priority, SearchHit, SearchQuery, SearchText, limits,
};
use corkboard_grants::ResolvedGrant;
use serde_json::{Map, Value, json};

pub(crate) const DESCRIPTION: &str = "Full-text search of this run's board: titles, bodies and \
comments. Returns {hits, next_offset, partial}; each hit is a short summary of the issue (id, \
title, state, labels, priority, updated_at, version, comment_count) with its score, the field \
that matched best (title, body or comment, plus the comment's id) and a snippet of that field \
with the matching words in **bold**; read the whole issue with get_issue. `query`: 1-200 \
characters, 1-16 words; words are case-insensitive runs of letters and digits (punctuation \
separates them); an issue matches only when EVERY word occurs in its title, body or one of its \
comments; end a word with * to match it as a prefix (timeo* finds timeout, timeouts; at least 2 \
characters before the *). Ranking: title matches first, then body, then comment-only matches, \
then the most recently updated. The filters combine with the query as in list_issues. Paging: \
`limit` hits per answer (default 10, max 50); when next_offset is a number, call again with the \
same arguments and offset=next_offset; offset + limit may not exceed 1000 (narrow the query \
instead). partial=true means more issues matched than the board ranks (only the newest 1000 \
matches were ranked): add words or filters. Search here before creating an issue.";

pub(crate) const ARGS: [&str; 13] = [
    "query",
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
    "limit",
    "offset",
];

/// `search_issues`: the query, the list filters, the page.
pub(crate) fn parse(map: &Map<String, Value>) -> Result<SearchQuery, ToolsError> {
    let args = Args::new("search_issues", map, &ARGS)?;
    let text = SearchText::parse(args.required_str("query")?)?;
    let mut query = SearchQuery::new(text);
    query.filter = list_issues::filters(&args)?;
    if let Some(limit) = args.u64("limit")? {
        query.limit = u32::try_from(limit)
            .ok()
            .filter(|l| (1..=limits::SEARCH_LIMIT_MAX).contains(l))
            .ok_or_else(|| {
                invalid(
                    "limit",
                    format!("must be between 1 and {}", limits::SEARCH_LIMIT_MAX),
                )
            })?;
    }
    if let Some(offset) = args.u64("offset")? {
        query.offset = u32::try_from(offset).unwrap_or(u32::MAX);
    }
    query.validate()?;
    Ok(query)
}

pub(crate) async fn run(
    tools: &BoardTools,
    principal: &ResolvedGrant,
    arguments: &Map<String, Value>,
) -> Result<Success, ToolsError> {
    let grant = principal.grant();
    let tenant = &grant.tenant;
    let mut query = parse(arguments)?;
    // Only issues at or above the grant's floor, in the store's query.
    query.filter.min_integrity = grant.min_integrity;
    let page = tools
        .bounded(None, tools.store().search_issues(tenant, &query))
        .await?;
    let hits: Vec<Value> = page
        .hits
        .iter()
        .map(|hit| hit_json(hit, grant.min_integrity))
        .collect();
    Ok(Success {
        answer: result_budget::hits(
            hits,
            query.offset,
            page.next_offset,
            page.partial,
            tools.result_budget(),
        ),
        issue: None,
    })
}

/// A search hit as the tool answers it: a summary of the issue (read the
/// rest with get_issue), the score and the snippet (withheld when it comes
/// from a comment below the run's floor), labelled with the issue's level.
fn hit_json(hit: &SearchHit, floor: Option<Integrity>) -> Value {
    let issue = &hit.issue;
    let shown = provenance::snippet_shown(hit, floor);
    serde_json::json!({
        "id": issue.id,
        "title": issue.title,
        "state": issue.state,
        "labels": issue.labels,
        "priority": issue.priority,
        "updated_at": issue.updated_at,
        "version": issue.version,
        "comment_count": issue.comments.len(),
        "score": round(hit.score),
        "field": hit.field,
        "comment": hit.comment,
        "snippet": if shown { hit.snippet.as_str() } else { "" },
        "snippet_withheld": !shown,
        "_meta": { provenance::INTEGRITY_META: issue.integrity.as_str() },
    })
}

/// search_issues's input: the query, list_issues's filter schemas (so a
/// filter is described once), and offset paging.
pub(crate) fn input_schema() -> Value {
    let list = list_issues::input_schema();
    let mut properties = serde_json::Map::new();
    properties.insert(
        "query".to_owned(),
        json!({
            "type": "string",
            "minLength": 1,
            "maxLength": limits::SEARCH_QUERY_MAX_CHARS,
            "description": format!(
                "Words to find, e.g. \"login timeout\" or \"timeo*\": every word must occur in \
                 the title, body or a comment; word* matches as a prefix. 1-{} characters, at \
                 most {} words.",
                limits::SEARCH_QUERY_MAX_CHARS,
                limits::SEARCH_TERMS_MAX
            ),
        }),
    );
    for name in list_issues::FILTER_ARGS {
        if let Some(schema) = list["properties"].get(name) {
            properties.insert(name.to_owned(), schema.clone());
        }
    }
    properties.insert(
        "limit".to_owned(),
        json!({
            "type": "integer",
            "minimum": 1,
            "maximum": limits::SEARCH_LIMIT_MAX,
            "default": limits::SEARCH_LIMIT_DEFAULT,
            "description": format!(
                "Hits per answer, 1-{}; defaults to {}.",
                limits::SEARCH_LIMIT_MAX,
                limits::SEARCH_LIMIT_DEFAULT
            ),
        }),
    );
    properties.insert(
        "offset".to_owned(),
        json!({
            "type": "integer",
            "minimum": 0,
            "maximum": limits::SEARCH_DEPTH_MAX - 1,
            "default": 0,
            "description": format!(
                "The next_offset of the previous answer, to read the next hits; offset + limit \
                 at most {}.",
                limits::SEARCH_DEPTH_MAX
            ),
        }),
    );
    object(Value::Object(properties), &["query"])
}

pub(crate) fn output_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "hits": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "id": { "type": "string", "description": "iss_ followed by 26 characters." },
                        "title": { "type": "string" },
                        "state": { "type": "string", "enum": IssueState::names() },
                        "labels": { "type": "array", "items": { "type": "string" } },
                        "priority": {
                            "type": "string",
                            "enum": Priority::ALL.iter().map(|p| p.as_str()).collect::<Vec<_>>(),
                        },
                        "updated_at": { "type": "string", "description": "RFC 3339, UTC." },
                        "version": { "type": "integer", "minimum": 1 },
                        "comment_count": { "type": "integer", "minimum": 0 },
                        "score": {
                            "type": "number",
                            "description": "Higher is better; compare only within one answer.",
                        },
                        "field": { "type": "string", "enum": ["title", "body", "comment"] },
                        "comment": {
                            "type": ["string", "null"],
                            "description": "The comment the snippet is from (field comment).",
                        },
                        "snippet": {
                            "type": "string",
                            "description": "Excerpt of the best-matching field, matches in **.",
                        },
                        "snippet_withheld": {
                            "type": "boolean",
                            "description": "true: the snippet is from a comment below this \
                                            run's integrity floor, so it is left empty.",
                        },
                        "_meta": meta_schema(),
                    },
                    "required": [
                        "id", "title", "state", "labels", "priority", "updated_at", "version",
                        "comment_count", "score", "field", "comment", "snippet",
                    ],
                },
            },
            "next_offset": {
                "type": ["integer", "null"],
                "description": "Pass as offset for the next hits; null on the last page.",
            },
            "partial": {
                "type": "boolean",
                "description": "True when more issues matched than were ranked (the newest 1000): \
                                narrow the query.",
            },
            "truncated": truncated_schema("hits"),
        },
        "required": ["hits", "next_offset", "partial"],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::args::testing::{field_of, map};
    use corkboard_board::Timestamp;
    use serde_json::json;

    #[test]
    fn list_and_search_share_the_filters() {
        let filters = json!({
            "states": ["todo"], "priorities": ["high", "urgent"],
            "updated_since": "2026-01-31T12:00:00Z", "author_run": "run-1"
        });
        let listed = list_issues::parse(&map(filters.clone())).unwrap();
        assert_eq!(listed.priorities, [Priority::High, Priority::Urgent]);
        assert_eq!(
            listed.updated_since,
            Timestamp::parse_rfc3339("2026-01-31T12:00:00Z")
        );
        let mut with_query = filters.clone();
        with_query["query"] = json!("login timeo*");
        with_query["limit"] = json!(5);
        with_query["offset"] = json!(10);
        let searched = parse(&map(with_query)).unwrap();
        assert_eq!(searched.filter, listed, "the same filters, parsed once");
        assert_eq!((searched.limit, searched.offset), (5, 10));
        assert_eq!(searched.text.terms().len(), 2);
        for name in list_issues::FILTER_ARGS {
            assert!(
                list_issues::ARGS.contains(&name) && ARGS.contains(&name),
                "{name}"
            );
        }
        for (args, field) in [
            (json!({}), "query"),
            (json!({"query": "  "}), "query"),
            (json!({"query": "x", "limit": 51}), "limit"),
            (json!({"query": "x", "offset": 995}), "offset"),
            (json!({"query": "x", "cursor": "c"}), "cursor"),
            (json!({"query": "x", "priorities": ["p1"]}), "priorities"),
            (
                json!({"query": "x", "updated_since": "yesterday"}),
                "updated_since",
            ),
        ] {
            assert_eq!(
                field_of(parse(&map(args.clone())).unwrap_err()),
                field,
                "{args}"
            );
        }
    }
}
