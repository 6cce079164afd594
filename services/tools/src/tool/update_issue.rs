//! `update_issue`: changes an issue's fields, state and relations, under
//! an optional `expected_version`.

use super::args::{
    Args, blocked_by, close_reason, expected_version, issue_id, labels, relation_change,
};
use super::schema::{
    blocked_by_schema, body_schema, close_reason_schema, issue_answer_schema, issue_id_schema,
    labels_schema, object, priority_schema, state_schema, title_schema, version_schema,
    written_fields,
};
use super::{Success, retain};
use crate::defs::BoardTool;
use crate::error::ToolsError;
use crate::provenance;
use crate::result_budget;
use crate::service::BoardTools;
use crate::view;
use corkboard_board::{Body, BudgetKind, IssueId, IssuePatch, IssueState, Priority, Title};
use corkboard_grants::ResolvedGrant;
use serde_json::{Map, Value, json};

pub(crate) const DESCRIPTION: &str = "Change an issue's title, body, state, labels or priority and \
return the updated issue with its new version (a run that may not read issues gets only the \
id, version, updated_at and the fields it set). Omitted fields stay as they are; `labels` \
replaces the whole label set. Pass `expected_version`, the version you last read (from \
get_issue, list_issues or your previous update): if the issue changed since, nothing is \
written and the error gives its current version. Then re-read it with get_issue, check that \
your change still makes sense, and retry with expected_version set to the current version. \
Without expected_version the update applies unconditionally and may overwrite someone \
else's change. Closing: set state to done or closed, with `close_reason` completed (the \
default), not_planned, or duplicate (then also set duplicate_of to the original's id); \
closing ends any claim. Reopen by setting an open state: the close reason is cleared. \
Relations: `parent` and `duplicate_of` take an issue id, or \"\" to remove them; \
`blocked_by` replaces the whole list ([] removes all). A parent that would make an issue its \
own ancestor is refused. The answer carries the latest 10 comments (comment_count and \
comments_cursor as in get_issue).";

pub(crate) const ARGS: [&str; 11] = [
    "id",
    "title",
    "body",
    "state",
    "labels",
    "priority",
    "expected_version",
    "parent",
    "duplicate_of",
    "blocked_by",
    "close_reason",
];

#[derive(Debug)]
pub(crate) struct UpdateArgs {
    pub id: IssueId,
    pub patch: IssuePatch,
    pub expected_version: Option<u64>,
}

pub(crate) fn parse(map: &Map<String, Value>) -> Result<UpdateArgs, ToolsError> {
    let args = Args::new("update_issue", map, &ARGS)?;
    let id = issue_id(&args, "id")?;
    let patch = IssuePatch {
        title: args.str("title")?.map(Title::parse).transpose()?,
        body: args.str("body")?.map(Body::parse).transpose()?,
        state: args.str("state")?.map(IssueState::parse).transpose()?,
        labels: labels(&args)?,
        priority: args.str("priority")?.map(Priority::parse).transpose()?,
        parent: relation_change(&args, "parent")?,
        duplicate_of: relation_change(&args, "duplicate_of")?,
        blocked_by: blocked_by(&args)?,
        close_reason: close_reason(&args)?,
        // Set by `run`, from the grant.
        actor: None,
    };
    if patch.is_empty() {
        return Err(ToolsError::NothingToUpdate);
    }
    let expected_version = expected_version(&args)?;
    Ok(UpdateArgs {
        id,
        patch,
        expected_version,
    })
}

pub(crate) async fn run(
    tools: &BoardTools,
    principal: &ResolvedGrant,
    arguments: &Map<String, Value>,
) -> Result<Success, ToolsError> {
    let grant = principal.grant();
    let tenant = &grant.tenant;
    let UpdateArgs {
        id,
        mut patch,
        expected_version,
    } = parse(arguments)?;
    // The issue's history records the change as this run's.
    let author = tools.author(principal).await;
    let integrity = author.integrity;
    patch.actor = Some(author);
    tools.check_floor(principal, &id).await?;
    let set = patch_fields(&patch);
    let issue = tools
        .budgeted(
            principal,
            BudgetKind::UpdateIssue,
            None,
            tools.bounded(
                Some(&id),
                tools
                    .store()
                    .update_issue(tenant, &id, patch, expected_version),
            ),
            |_| false,
        )
        .await?;
    // A write by the claim's holder keeps its claim alive.
    let issue = tools.renew_claim(principal, integrity, issue).await;
    let headline = format!(
        "update_issue: issue {id} is now at version {}",
        issue.version
    );
    let mut value = provenance::issue_json(&issue, grant.min_integrity, false)?;
    if BoardTool::UpdateIssue.answers_whole_issue(&grant.capabilities) {
        value = view::whole_issue(value);
    } else {
        // Only what this call wrote: the grant may not read the rest.
        retain(
            &mut value,
            &[&["id", "version", "updated_at"], &set[..]].concat(),
        );
    }
    Ok(Success {
        answer: result_budget::issue(value, &headline, tools.result_budget()),
        issue: Some(id),
    })
}

/// The issue fields a patch sets, by their names in the issue's JSON.
fn patch_fields(patch: &corkboard_board::IssuePatch) -> Vec<&'static str> {
    [
        ("title", patch.title.is_some()),
        ("body", patch.body.is_some()),
        ("state", patch.state.is_some()),
        ("labels", patch.labels.is_some()),
        ("priority", patch.priority.is_some()),
        ("parent", patch.parent.is_some()),
        ("duplicate_of", patch.duplicate_of.is_some()),
        ("blocked_by", patch.blocked_by.is_some()),
        // Closing sets a reason even when none was given.
        (
            "close_reason",
            patch.close_reason.is_some() || patch.state.is_some_and(|s| s.is_terminal()),
        ),
    ]
    .into_iter()
    .filter_map(|(name, set)| set.then_some(name))
    .collect()
}

pub(crate) fn input_schema() -> Value {
    object(
        json!({
            "id": issue_id_schema("The issue to change."),
            "title": title_schema("New title."),
            "body": body_schema("New body; replaces the old one entirely.", 0),
            "state": state_schema("New state."),
            "labels": labels_schema("New label set; replaces the old one entirely. [] removes all."),
            "priority": priority_schema("New priority."),
            "expected_version": version_schema(),
            "parent": relation_id_schema("New parent issue; \"\" removes the parent."),
            "duplicate_of": relation_id_schema("The original this duplicates; \"\" removes it."),
            "blocked_by": blocked_by_schema(
                "New list of blocking issues; replaces the old one entirely. [] removes all."
            ),
            "close_reason": close_reason_schema(),
        }),
        &["id"],
    )
}

fn relation_id_schema(description: &str) -> Value {
    json!({
        "type": "string",
        "pattern": "^(iss_[0-9A-HJKMNP-TV-Z]{26})?$",
        "maxLength": 30,
        "description": description,
    })
}

/// The whole issue with its window of comments.
pub(crate) fn output_schema() -> Value {
    issue_answer_schema()
}

/// update_issue without `issues:read`: the issue's id, new version and
/// updated_at, and the fields this call set (as set), nothing else.
pub(crate) fn write_only_output_schema() -> Value {
    written_fields(
        &["id", "version", "updated_at"],
        &["id", "version", "updated_at"],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::args::testing::{field_of, map};
    use serde_json::json;

    #[test]
    fn update_needs_a_change_and_a_sane_version() {
        let id = IssueId::generate();
        let ok = parse(&map(
            json!({"id": id.as_str(), "state": "done", "expected_version": 3}),
        ))
        .unwrap();
        assert_eq!(ok.patch.state, Some(IssueState::Done));
        assert_eq!(ok.expected_version, Some(3));
        assert_eq!(
            parse(&map(json!({"id": id.as_str(), "body": null}))).unwrap_err(),
            ToolsError::NothingToUpdate
        );
        let err = parse(&map(
            json!({"id": id.as_str(), "title": "x", "expected_version": 0}),
        ))
        .unwrap_err();
        assert_eq!(field_of(err), "expected_version");
        let err = parse(&map(json!({"id": "42", "title": "x"}))).unwrap_err();
        assert_eq!(field_of(err), "id");
    }
}
