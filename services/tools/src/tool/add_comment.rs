//! `add_comment`: adds a comment to an issue.

use super::args::{Args, idempotency_key, invalid, issue_id};
use super::schema::{
    body_schema, comment_schema, issue_answer_schema, issue_fields, issue_id_schema, key_schema,
    object, related_id_schema, replayed_schema, with_properties,
};
use super::{Success, insert, retain};
use crate::defs::BoardTool;
use crate::error::ToolsError;
use crate::provenance;
use crate::result_budget;
use crate::service::BoardTools;
use crate::view;
use corkboard_board::{BudgetKind, CommentBody, IdempotencyKey, NewComment};
use corkboard_grants::ResolvedGrant;
use serde_json::{Map, Value, json};

pub(crate) const DESCRIPTION: &str = "Add a comment to an issue. Returns the issue with its \
latest 10 comments (comment_count and comments_cursor as in get_issue), the new `comment`, and `replayed` (a run that may not read issues gets only the \
issue's id, version and updated_at with the new `comment` and `replayed`). `id` (or its older name \
`issue_id`) is an issue id exactly as \
create_issue or list_issues returned it (iss_ followed by 26 characters). Pass an \
`idempotency_key` when you might retry: the same key with the same arguments returns the \
original comment (replayed=true) instead of adding it twice.";

pub(crate) const ARGS: [&str; 4] = ["id", "issue_id", "body", "idempotency_key"];

#[derive(Debug)]
pub(crate) struct CommentArgs {
    pub comment: NewComment,
    pub key: Option<IdempotencyKey>,
}

pub(crate) fn parse(map: &Map<String, Value>) -> Result<CommentArgs, ToolsError> {
    let args = Args::new("add_comment", map, &ARGS)?;
    // `id`, like every other tool; `issue_id`, its older name, still works.
    let issue = match (args.str("id")?, args.str("issue_id")?) {
        (Some(_), Some(_)) => {
            return Err(invalid(
                "issue_id",
                "give the issue once, as id (issue_id is its older name)".to_owned(),
            ));
        }
        (None, Some(_)) => issue_id(&args, "issue_id")?,
        _ => issue_id(&args, "id")?,
    };
    let body = CommentBody::parse(args.required_str("body")?)?;
    Ok(CommentArgs {
        comment: NewComment { issue, body },
        key: idempotency_key(&args)?,
    })
}

pub(crate) async fn run(
    tools: &BoardTools,
    principal: &ResolvedGrant,
    arguments: &Map<String, Value>,
) -> Result<Success, ToolsError> {
    let grant = principal.grant();
    let tenant = &grant.tenant;
    let author = tools.author(principal).await;
    let CommentArgs { comment, key } = parse(arguments)?;
    let id = comment.issue.clone();
    tools.check_floor(principal, &id).await?;
    let added = tools
        .budgeted(
            principal,
            BudgetKind::AddComment,
            key.as_ref(),
            tools.bounded(
                Some(&id),
                tools
                    .store()
                    .add_comment(tenant, &author, comment, key.as_ref()),
            ),
            |added| added.replayed,
        )
        .await?;
    // A comment by the claim's holder keeps its claim alive, like any of
    // its writes to the issue.
    let issue = tools
        .renew_claim(principal, author.integrity, added.issue)
        .await;
    let mut value = provenance::issue_json(&issue, grant.min_integrity, false)?;
    if BoardTool::AddComment.answers_whole_issue(&grant.capabilities) {
        value = view::whole_issue(value);
    } else {
        // Not the body nor the other comments: this grant may
        // write a comment, not read the issue.
        retain(&mut value, &["id", "version", "updated_at"]);
    }
    insert(
        &mut value,
        "comment",
        provenance::comment_json(&added.comment)?,
    );
    insert(&mut value, "replayed", Value::Bool(added.replayed));
    let headline = if added.replayed {
        format!(
            "add_comment: replayed; comment {} on issue {id} was added by the \
                         earlier call with this idempotency_key",
            added.comment.id
        )
    } else {
        format!(
            "add_comment: added comment {} to issue {id}",
            added.comment.id
        )
    };
    Ok(Success {
        answer: result_budget::issue(value, &headline, tools.result_budget()),
        issue: Some(id),
    })
}

pub(crate) fn input_schema() -> Value {
    object(
        json!({
            "id": issue_id_schema("The issue to comment on."),
            "issue_id": related_id_schema("Older name of id."),
            "body": body_schema("The comment, not blank.", 1),
            "idempotency_key": key_schema("comment"),
        }),
        &["body"],
    )
}

pub(crate) fn output_schema() -> Value {
    with_properties(
        issue_answer_schema(),
        [
            ("comment", comment_schema("The comment this call added.")),
            ("replayed", replayed_schema("comment")),
        ],
    )
}

/// add_comment without `issues:read`: the issue's id, new version and
/// updated_at, the comment this call added and `replayed`; no body, no
/// other comments.
pub(crate) fn write_only_output_schema() -> Value {
    with_properties(
        issue_fields(
            &["id", "version", "updated_at"],
            &["id", "version", "updated_at"],
        ),
        [
            ("comment", comment_schema("The comment this call added.")),
            ("replayed", replayed_schema("comment")),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::args::issue_hint;
    use crate::tool::args::testing::{field_of, map};
    use corkboard_board::IssueId;
    use serde_json::json;

    #[test]
    fn comment_names_issue_id() {
        let err = parse(&map(json!({"issue_id": "iss_x", "body": "hi"}))).unwrap_err();
        assert_eq!(field_of(err), "issue_id");
        let err = parse(&map(
            json!({"issue_id": IssueId::generate().as_str(), "body": " "}),
        ))
        .unwrap_err();
        assert_eq!(field_of(err), "body");
        assert_eq!(
            issue_hint(&map(json!({"issue_id": "nope"})), "issue_id"),
            None
        );
    }

    #[test]
    fn the_issue_is_id_like_everywhere_and_issue_id_still_works() {
        let id = IssueId::generate();
        let by_id = parse(&map(json!({"id": id.as_str(), "body": "hi"}))).unwrap();
        let by_old = parse(&map(json!({"issue_id": id.as_str(), "body": "hi"}))).unwrap();
        assert_eq!(by_id.comment.issue, id);
        assert_eq!(by_old.comment.issue, id);
        let both = json!({"id": id.as_str(), "issue_id": id.as_str(), "body": "hi"});
        assert_eq!(field_of(parse(&map(both)).unwrap_err()), "issue_id");
        assert_eq!(
            field_of(parse(&map(json!({"body": "hi"}))).unwrap_err()),
            "id"
        );
        assert_eq!(
            issue_hint(&map(json!({"issue_id": id.as_str()})), "id"),
            Some(id)
        );
    }
}
