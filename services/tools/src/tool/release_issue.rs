//! `release_issue`: gives back an issue this run claimed. It takes
//! `claim_issue`'s arguments and answers in its shape.

use super::Success;
use super::claim_issue::{self, ClaimArgs};
use super::schema::{issue_id_schema, object, version_schema};
use crate::defs::BoardTool;
use crate::error::ToolsError;
use crate::service::BoardTools;
use corkboard_board::BudgetKind;
use corkboard_grants::ResolvedGrant;
use serde_json::{Map, Value, json};

pub(crate) const DESCRIPTION: &str = "Give back an issue this run claimed, when you stop working on \
it without finishing (closing it with update_issue ends the claim by itself). Refused when \
another run holds the claim or nobody does. Returns the issue with `claim` null and its new \
version.";

/// The same arguments as `claim_issue`'s.
pub(crate) const ARGS: [&str; 2] = claim_issue::ARGS;

pub(crate) fn parse(map: &Map<String, Value>) -> Result<ClaimArgs, ToolsError> {
    claim_issue::parse_as("release_issue", &ARGS, map)
}

pub(crate) async fn run(
    tools: &BoardTools,
    principal: &ResolvedGrant,
    arguments: &Map<String, Value>,
) -> Result<Success, ToolsError> {
    let grant = principal.grant();
    let tenant = &grant.tenant;
    let ClaimArgs {
        id,
        expected_version,
    } = parse(arguments)?;
    tools.check_floor(principal, &id).await?;
    let issue = tools
        .budgeted(
            principal,
            BudgetKind::ReleaseIssue,
            None,
            tools.bounded(
                Some(&id),
                tools
                    .store()
                    .release_issue(tenant, &id, &grant.run, expected_version),
            ),
            |_| false,
        )
        .await?;
    let headline = format!("release_issue: issue {id} is unclaimed");
    claim_issue::answer(tools, grant, BoardTool::ReleaseIssue, &issue, id, &headline)
}

pub(crate) fn input_schema() -> Value {
    object(
        json!({
            "id": issue_id_schema("The issue to give back."),
            "expected_version": version_schema(),
        }),
        &["id"],
    )
}

/// The issue with its claim, as `claim_issue` answers.
pub(crate) fn output_schema() -> Value {
    claim_issue::output_schema()
}

/// Without `issues:read`: as `claim_issue` answers such a grant.
pub(crate) fn write_only_output_schema() -> Value {
    claim_issue::write_only_output_schema()
}
