//! `create_issues`: files up to [`CREATE_ISSUES_MAX`] issues in one call
//! (decomposing work), optionally all under one parent. Each item is a
//! `create_issue` of its own: parsed, budgeted, written and answered on its
//! own (not all-or-nothing), with its own idempotency key, so a retry of
//! the whole call replays the items that were written and writes only the
//! ones that were not.

use super::Success;
use super::args::{Args, invalid, optional_id};
use super::create_issue;
use super::schema::{
    blocked_by_schema, body_schema, key_schema_described, labels_schema, object, priority_schema,
    related_id_schema, state_schema, title_schema,
};
use crate::error::ToolsError;
use crate::result_budget::Answer;
use crate::service::BoardTools;
use corkboard_board::{IssueId, NewIssue};
use corkboard_grants::ResolvedGrant;
use serde_json::{Map, Value, json};

/// Most issues one call creates (documented in the README's limits).
pub(crate) const CREATE_ISSUES_MAX: usize = 50;

pub(crate) const DESCRIPTION: &str = "Create up to 50 issues in one call, e.g. the sub-issues \
of a plan. `issues` holds create_issue arguments (title required; give each its own \
idempotency_key to retry safely); `parent` is the parent of every item that names none. Each \
item is created on its own (not all-or-nothing): `results` answers item by item, in order, \
{index, id, title, replayed} or {index, error}.";

pub(crate) const ARGS: [&str; 2] = ["issues", "parent"];

/// The arguments of one item: create_issue's that a plan needs (the rest,
/// near-duplicate refusal among them, stay with create_issue).
pub(crate) const ITEM_ARGS: [&str; 8] = [
    "title",
    "body",
    "state",
    "labels",
    "priority",
    "idempotency_key",
    "parent",
    "blocked_by",
];

/// The items, each parsed on its own (a bad item is its own error).
/// One item as parsed: the issue and its key, or why it is refused.
pub(crate) type Item = Result<(NewIssue, Option<corkboard_board::IdempotencyKey>), ToolsError>;

pub(crate) fn parse(map: &Map<String, Value>) -> Result<Vec<Item>, ToolsError> {
    let args = Args::new("create_issues", map, &ARGS)?;
    let parent: Option<IssueId> = optional_id(&args, "parent")?;
    let items = match map.get("issues") {
        Some(Value::Array(items)) if !items.is_empty() => items,
        _ => {
            return Err(invalid(
                "issues",
                format!("must be a list of 1 to {CREATE_ISSUES_MAX} create_issue arguments"),
            ));
        }
    };
    if items.len() > CREATE_ISSUES_MAX {
        return Err(invalid(
            "issues",
            format!(
                "{} issues; one call creates at most {CREATE_ISSUES_MAX}: split them",
                items.len()
            ),
        ));
    }
    Ok(items
        .iter()
        .map(|item| {
            let Value::Object(item) = item else {
                return Err(invalid("issues", "each item must be an object".to_owned()));
            };
            Args::new("create_issues", item, &ITEM_ARGS)?;
            let parsed = create_issue::parse(item)?;
            let mut new = parsed.new;
            if new.parent.is_none() {
                new.parent = parent.clone();
            }
            Ok((new, parsed.key))
        })
        .collect())
}

pub(crate) async fn run(
    tools: &BoardTools,
    principal: &ResolvedGrant,
    arguments: &Map<String, Value>,
) -> Result<Success, ToolsError> {
    let author = tools.author(principal).await;
    let items = parse(arguments)?;
    let mut results = Vec::with_capacity(items.len());
    let (mut created, mut replayed, mut failed) = (0, 0, 0);
    for (index, item) in items.into_iter().enumerate() {
        let outcome = match item {
            Err(err) => Err(err),
            Ok((new, key)) => {
                create_issue::budgeted_create(tools, principal, &author, new, key.as_ref()).await
            }
        };
        results.push(match outcome {
            Ok(done) => {
                if done.replayed {
                    replayed += 1;
                } else {
                    created += 1;
                }
                json!({
                    "index": index,
                    "id": done.issue.id,
                    "title": done.issue.title,
                    "replayed": done.replayed,
                })
            }
            Err(err) => {
                failed += 1;
                json!({ "index": index, "error": err.to_string() })
            }
        });
    }
    let mut text =
        format!("create_issues: {created} created, {replayed} replayed, {failed} failed\n");
    for result in &results {
        match (&result["id"], &result["error"]) {
            (Value::String(id), _) => {
                text.push_str(&format!("#{} {id} {}\n", result["index"], result["title"]));
            }
            (_, error) => text.push_str(&format!("#{} error: {error}\n", result["index"])),
        }
    }
    // 50 items of an id, a 200-character title and a short error each stay
    // far inside any result budget.
    Ok(Success {
        answer: Answer::new(
            json!({
                "results": results,
                "created": created,
                "replayed": replayed,
                "failed": failed,
            }),
            text,
        ),
        issue: None,
    })
}

pub(crate) fn input_schema() -> Value {
    // Short: the long descriptions are create_issue's, which a model
    // reads next to this one.
    let item = object(
        json!({
            "title": title_schema("Required."),
            "body": body_schema("Details.", 0),
            "state": state_schema("Default inbox."),
            "labels": labels_schema("Labels."),
            "priority": priority_schema("Default none."),
            "idempotency_key": key_schema_described("As in create_issue: makes retrying this item safe."),
            "parent": related_id_schema("Overrides the call's parent."),
            "blocked_by": blocked_by_schema("Existing issues."),
        }),
        &["title"],
    );
    object(
        json!({
            "issues": {
                "type": "array",
                "minItems": 1,
                "maxItems": CREATE_ISSUES_MAX,
                "items": item,
            },
            "parent": related_id_schema("Parent of every item that names none."),
        }),
        &["issues"],
    )
}

pub(crate) fn output_schema() -> Value {
    let count = json!({ "type": "integer", "minimum": 0 });
    json!({
        "type": "object",
        "properties": {
            "results": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "index": { "type": "integer", "minimum": 0 },
                        "id": { "type": "string" },
                        "title": { "type": "string" },
                        "replayed": { "type": "boolean" },
                        "error": { "type": "string" },
                    },
                    "required": ["index"],
                },
            },
            "created": count,
            "replayed": count,
            "failed": count,
        },
        "required": ["results", "created", "replayed", "failed"],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::args::testing::{field_of, map};

    #[test]
    fn items_parse_on_their_own_under_a_shared_parent() {
        let parent = "iss_01JD3Z9Q4X8M2N6P7R5S1T0V9W";
        let items = parse(&map(json!({
            "parent": parent,
            "issues": [{"title": "a", "idempotency_key": "k-a"}, {"title": ""}, {"nope": 1}],
        })))
        .unwrap();
        let (first, key) = items[0].as_ref().unwrap();
        assert_eq!(first.parent.as_ref().unwrap().as_str(), parent);
        assert_eq!(key.as_ref().unwrap().as_str(), "k-a");
        assert!(items[1].is_err() && items[2].is_err());
        let many: Vec<Value> = (0..51).map(|i| json!({"title": format!("t{i}")})).collect();
        assert_eq!(
            field_of(parse(&map(json!({"issues": many}))).unwrap_err()),
            "issues"
        );
        assert_eq!(
            field_of(parse(&map(json!({"issues": []}))).unwrap_err()),
            "issues"
        );
    }
}
