//! `claim_issue`: takes an issue for this run until it releases it, the
//! issue closes or the run's grant ends. Its arguments and its answer's
//! shape are shared with `release_issue`.

use super::args::{Args, expected_version, issue_id};
use super::schema::{issue_fields, issue_id_schema, issue_schema, object, version_schema};
use super::{Success, retain};
use crate::defs::BoardTool;
use crate::error::ToolsError;
use crate::provenance;
use crate::result_budget;
use crate::service::BoardTools;
use crate::view;
use corkboard_board::{BudgetKind, Grant, Issue, IssueId};
use corkboard_grants::ResolvedGrant;
use serde_json::{Map, Value, json};

pub(crate) const DESCRIPTION: &str = "Claim an issue for this run before you start working on it, so \
no other agent takes the same work. Exactly one of several runs claiming at once gets it; the \
others get an error naming the run that holds it (not retryable: pick other work, e.g. with \
claim_next). Claiming an issue you hold succeeds (renewing its lease). Only open issues can be \
claimed. The claim ends when you release_issue it, the issue is closed or this run ends; with a \
lease (claim.expires_at) it lapses unless you write to the issue or claim it again in time. \
Returns the issue with its `claim` and new version.";

pub(crate) const ARGS: [&str; 2] = ["id", "expected_version"];

/// The arguments of `claim_issue`, and of `release_issue`: the issue and
/// an optional version.
#[derive(Debug)]
pub(crate) struct ClaimArgs {
    pub id: IssueId,
    pub expected_version: Option<u64>,
}

pub(crate) fn parse(map: &Map<String, Value>) -> Result<ClaimArgs, ToolsError> {
    parse_as("claim_issue", &ARGS, map)
}

/// The arguments of `tool`, which takes the same ones as this tool
/// (`release_issue` does): errors name `tool`.
pub(crate) fn parse_as(
    tool: &'static str,
    names: &[&str],
    map: &Map<String, Value>,
) -> Result<ClaimArgs, ToolsError> {
    let args = Args::new(tool, map, names)?;
    Ok(ClaimArgs {
        id: issue_id(&args, "id")?,
        expected_version: expected_version(&args)?,
    })
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
    // The claim ends with its lease or the grant, whichever comes first:
    // both from the grant and the operator's setting, never from input.
    let claimant = tools.claimant(principal).await;
    tools.check_floor(principal, &id).await?;
    let issue = tools
        .budgeted(
            principal,
            BudgetKind::ClaimIssue,
            None,
            tools.bounded(
                Some(&id),
                tools
                    .store()
                    .claim_issue(tenant, &id, &claimant, expected_version),
            ),
            |_| false,
        )
        .await?;
    let headline = format!("claim_issue: issue {id} is claimed by run {}", grant.run);
    answer(tools, grant, BoardTool::ClaimIssue, &issue, id, &headline)
}

/// The answer of `claim_issue` and `release_issue`: the issue, or for a
/// grant that may not read issues, what the call changed.
pub(crate) fn answer(
    tools: &BoardTools,
    grant: &Grant,
    tool: BoardTool,
    issue: &Issue,
    id: IssueId,
    headline: &str,
) -> Result<Success, ToolsError> {
    let mut value = provenance::issue_json(issue, grant.min_integrity, false)?;
    if tool.answers_whole_issue(&grant.capabilities) {
        value = view::whole_issue(value);
    } else {
        retain(&mut value, &["id", "version", "updated_at", "claim"]);
    }
    Ok(Success {
        answer: result_budget::issue(value, headline, tools.result_budget()),
        issue: Some(id),
    })
}

pub(crate) fn input_schema() -> Value {
    object(
        json!({
            "id": issue_id_schema("The issue to claim."),
            "expected_version": version_schema(),
        }),
        &["id"],
    )
}

/// The issue with its claim.
pub(crate) fn output_schema() -> Value {
    issue_schema()
}

/// claim_issue / release_issue without `issues:read`: the id, new
/// version, updated_at and the claim.
pub(crate) fn write_only_output_schema() -> Value {
    issue_fields(
        &["id", "version", "updated_at", "claim"],
        &["id", "version", "updated_at", "claim"],
    )
}
