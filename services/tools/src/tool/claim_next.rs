//! `claim_next`: takes the best ready issue (most urgent, then oldest;
//! unclaimed, every blocker finished) matching the caller's filters for
//! this run, atomically, and answers it with its latest comments; or says
//! there is no ready work and how much is claimed or blocked.

use super::args::{Args, as_field, labels, optional_id};
use super::schema::{
    issue_answer_schema, issue_fields, labels_schema, object, priority_schema, related_id_schema,
};
use super::{Success, retain};
use crate::defs::BoardTool;
use crate::error::ToolsError;
use crate::provenance;
use crate::render;
use crate::result_budget::{self, Answer};
use crate::service::BoardTools;
use crate::view::{self, COMMENTS_DEFAULT};
use corkboard_board::{
    BudgetKind, ClaimNext, CommentWindow, LabelFilter, ListQuery, Priority, StatsPart,
};
use corkboard_grants::ResolvedGrant;
use serde_json::{Map, Value, json};

pub(crate) const DESCRIPTION: &str = "Claim the next issue to work on: the most urgent, then \
oldest (when runs claim at once: one of the 64 best), open issue that no run holds and whose \
blocked_by issues are all done or closed, among those matching the filters. Exactly one run gets \
each issue. Returns it like get_issue, with outcome=\"claimed\"; or outcome=\"no_ready_work\" \
with how many matching issues are claimed or blocked (counts stop at 10000; those named in \
at_least are that many or more). The claim lapses unless you write to the \
issue or claim_issue it again within the lease (claim.expires_at); release_issue when you give up.";

pub(crate) const ARGS: [&str; 3] = ["labels", "min_priority", "parent"];

pub(crate) fn parse(map: &Map<String, Value>) -> Result<ListQuery, ToolsError> {
    let args = Args::new("claim_next", map, &ARGS)?;
    let mut query = ListQuery {
        ready: true,
        ..ListQuery::default()
    };
    if let Some(wanted) = labels(&args)?
        && !wanted.is_empty()
    {
        query.labels = LabelFilter::All(wanted.iter().cloned().collect());
    }
    if let Some(min) = args.str("min_priority")? {
        query.priorities = Priority::parse(min)
            .map_err(as_field("min_priority"))?
            .at_least();
    }
    query.parent = optional_id(&args, "parent")?;
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
    // Only work at or above the grant's floor is handed out.
    query.min_integrity = grant.min_integrity;
    let claimant = tools.claimant(principal).await;
    let next = tools
        .budgeted(
            principal,
            BudgetKind::ClaimIssue,
            None,
            tools.bounded(None, tools.store().claim_next(tenant, &query, &claimant)),
            // Nothing claimed, nothing written: the budget is given back.
            |next| matches!(next, ClaimNext::NoReadyWork { .. }),
        )
        .await?;
    let issue = match next {
        ClaimNext::Claimed { issue } => *issue,
        ClaimNext::NoReadyWork {
            claimed,
            blocked,
            at_least,
        } => {
            let (shown_claimed, shown_blocked) = (
                render::count(claimed, StatsPart::Claimed, &at_least),
                render::count(blocked, StatsPart::Blocked, &at_least),
            );
            let structured = json!({
                "outcome": "no_ready_work",
                "claimed": claimed,
                "blocked": blocked,
                "at_least": at_least,
            });
            let text = format!(
                "claim_next: no ready work matches; of the matching open issues {shown_claimed} \
                 are claimed and {shown_blocked} blocked by open issues.\n{structured}"
            );
            return Ok(Success {
                answer: Answer::new(structured, text),
                issue: None,
            });
        }
    };
    let id = issue.id.clone();
    let headline = format!("claim_next: issue {id} is claimed by run {}", grant.run);
    let mut value = if BoardTool::ClaimNext.answers_whole_issue(&grant.capabilities) {
        // The claimed issue as get_issue shows it: its latest comments.
        let window = CommentWindow::latest(COMMENTS_DEFAULT).max_bytes(tools.result_budget());
        match tools
            .bounded(
                Some(&id),
                tools.store().get_issue_view(tenant, &id, &window),
            )
            .await
        {
            Ok(found) => {
                let facts = found.comment_facts;
                let shown =
                    provenance::shown_json(&found, &found.issue, grant.min_integrity, false)?;
                view::windowed_issue(shown, &facts, None)?
            }
            // The claim is made; a failed read of its comments only
            // leaves them out.
            Err(_) => {
                view::whole_issue(provenance::issue_json(&issue, grant.min_integrity, false)?)
            }
        }
    } else {
        let mut value = provenance::issue_json(&issue, grant.min_integrity, false)?;
        retain(&mut value, &["id", "version", "updated_at", "claim"]);
        value
    };
    if let Value::Object(map) = &mut value {
        map.insert("outcome".to_owned(), json!("claimed"));
    }
    Ok(Success {
        answer: result_budget::issue(value, &headline, tools.result_budget()),
        issue: Some(id),
    })
}

pub(crate) fn input_schema() -> Value {
    object(
        json!({
            "labels": labels_schema("Only issues carrying every one of these labels."),
            "min_priority": priority_schema("Only issues of this priority or more urgent."),
            "parent": related_id_schema("Only sub-issues of this issue."),
        }),
        &[],
    )
}

/// The claimed issue (as get_issue answers it) with `outcome`, or only
/// `outcome` and the counts.
pub(crate) fn output_schema() -> Value {
    let issue = issue_answer_schema();
    let mut properties = issue["properties"].as_object().cloned().unwrap_or_default();
    properties.insert(
        "outcome".to_owned(),
        json!({ "type": "string", "enum": ["claimed", "no_ready_work"] }),
    );
    for (name, what) in [
        ("claimed", "Matching open issues other runs hold."),
        (
            "blocked",
            "Matching unclaimed issues waiting on an open blocker.",
        ),
    ] {
        properties.insert(
            name.to_owned(),
            json!({ "type": "integer", "minimum": 0, "description": what }),
        );
    }
    properties.insert(
        "at_least".to_owned(),
        json!({
            "type": "array",
            "items": { "enum": ["claimed", "blocked"] },
            "description": "The counts that stopped at 10000: that many or more.",
        }),
    );
    json!({ "type": "object", "properties": properties, "required": ["outcome"] })
}

/// claim_next without `issues:read`: the claimed issue's id, version,
/// updated_at and claim, or the counts.
pub(crate) fn write_only_output_schema() -> Value {
    let mut schema = issue_fields(
        &["id", "version", "updated_at", "claim"],
        &["id", "version", "updated_at", "claim"],
    );
    let full = output_schema();
    if let (Some(Value::Object(properties)), Value::Object(all)) =
        (schema.get_mut("properties"), &full["properties"])
    {
        for name in ["outcome", "claimed", "blocked", "at_least"] {
            properties.insert(name.to_owned(), all[name].clone());
        }
    }
    schema["required"] = json!(["outcome"]);
    schema
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::args::testing::{field_of, map};

    #[test]
    fn filters_are_labels_a_minimum_priority_and_a_parent() {
        let q = parse(&map(json!({"labels": ["api"], "min_priority": "high"}))).unwrap();
        assert!(q.ready);
        assert_eq!(q.priorities, [Priority::High, Priority::Urgent]);
        assert!(matches!(q.labels, LabelFilter::All(ref l) if l.len() == 1));
        for (args, field) in [
            (json!({"min_priority": "soon"}), "min_priority"),
            (json!({"parent": "x"}), "parent"),
            (json!({"state": "todo"}), "state"),
        ] {
            assert_eq!(
                field_of(parse(&map(args.clone())).unwrap_err()),
                field,
                "{args}"
            );
        }
    }
}
