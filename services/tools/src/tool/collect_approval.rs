//! `collect_approval`: collects the outcome of a call that awaited a
//! person's approval, by the handle its pending answer gave. Pending
//! (with the expiry), a tool error for a denial (with the person's reason),
//! an expiry or a used approval, or, once approved, the call itself run
//! once and its result. The single-use rule is the gate's
//! ([`ApprovalGate::collect`](crate::ApprovalGate::collect)): the same one
//! conditional write as repeating the call, so collecting and repeating
//! race safely.
//!
//! The gateway collects approved upstream calls itself (it holds the
//! upstreams); this file runs board tools.

use super::Success;
use super::args::Args;
use super::schema::object;
use crate::approvals::Collected;
use crate::defs::BoardTool;
use crate::error::ToolsError;
use crate::result_budget::Answer;
use crate::service::BoardTools;
use corkboard_board::{ApprovalId, ApprovalItem, AuditOutcome, Timestamp};
use corkboard_grants::ResolvedGrant;
use serde_json::{Map, Value, json};
use std::time::Instant;

pub(crate) const DESCRIPTION: &str = "Collect the outcome of a call that awaited a person's \
approval, by the handle its answer gave: still pending, denied with the reason, or the \
approved call run once with its result.";

pub(crate) const ARGS: [&str; 1] = ["handle"];

pub(crate) fn parse(map: &Map<String, Value>) -> Result<ApprovalId, ToolsError> {
    let args = Args::new("collect_approval", map, &ARGS)?;
    ApprovalId::parse(args.required_str("handle")?).map_err(|err| ToolsError::InvalidArgument {
        field: "handle".to_owned(),
        reason: err.reason,
    })
}

/// The structured answer of a pending item (also the gateway's).
pub fn pending(item: &ApprovalItem) -> (Value, String) {
    (
        json!({
            "status": "pending",
            "handle": item.id,
            "tool": item.tool,
            "expires_at": item.expires_at,
        }),
        format!(
            "approval {} for {} still awaits a person (expires at {}); nothing was run. Collect \
             it again later; meanwhile carry on with other work.",
            item.id, item.tool, item.expires_at
        ),
    )
}

/// The structured answer of an approved call that ran, around its own
/// structured result (`None` when the tool has none).
pub fn ran(item: &ApprovalItem, result: Option<Value>) -> Value {
    let mut value = json!({ "status": "ran", "handle": item.id, "tool": item.tool });
    if let Some(result) = result {
        value["result"] = result;
    }
    value
}

pub(crate) async fn run(
    tools: &BoardTools,
    principal: &ResolvedGrant,
    arguments: &Map<String, Value>,
) -> Result<Success, ToolsError> {
    let id = parse(arguments)?;
    let Some(gate) = tools.approvals() else {
        return Err(ToolsError::Approval(format!(
            "there is no approval {id} here: no call of this board waits for a person"
        )));
    };
    let collected = tools
        .bounded(
            None,
            gate.collect(principal.grant(), &id, |tool| {
                BoardTool::from_name(tool).is_some()
            }),
        )
        .await?;
    match collected {
        Collected::Pending(item) => {
            let (structured, text) = pending(&item);
            Ok(Success {
                answer: Answer::new(structured, text),
                issue: None,
            })
        }
        Collected::Refused(text) => Err(ToolsError::Approval(text)),
        Collected::Elsewhere(item) => Err(ToolsError::Approval(format!(
            "approval {} is for {}, a tool of another server: collect it through this run's \
             gateway; nothing was spent",
            item.id, item.tool
        ))),
        Collected::Run { item, arguments } => {
            let Some(tool) = BoardTool::from_name(&item.tool) else {
                return Err(ToolsError::Internal {
                    detail: format!("approved item {} names no board tool", item.id),
                });
            };
            // The approved call is audited as itself, like a repeated call.
            let (started, at) = (Instant::now(), Timestamp::now());
            let result = Box::pin(tools.execute(principal, tool, &arguments)).await;
            let (outcome, issue) = match &result {
                Ok((success, false)) => (AuditOutcome::Ok, success.issue.clone()),
                Ok((success, true)) => (AuditOutcome::SecretRedacted, success.issue.clone()),
                Err(err) => (err.outcome(), None),
            };
            tools.account(
                principal,
                Some(tool),
                at,
                started.elapsed(),
                outcome,
                item.arguments.as_bytes(),
                issue,
            );
            let (success, _) = result.map_err(|err| {
                ToolsError::Approval(format!(
                    "approval {} was used: {} ran once and failed: {err}",
                    item.id, item.tool
                ))
            })?;
            let Success { answer, issue } = success;
            Ok(Success {
                answer: Answer {
                    structured: ran(&item, Some(answer.structured.into_value())).into(),
                    text: format!(
                        "approval {} was used: {} ran once.\n{}",
                        item.id, item.tool, answer.text
                    )
                    .into(),
                },
                issue,
            })
        }
    }
}

pub(crate) fn input_schema() -> Value {
    object(
        json!({
            "handle": {
                "type": "string",
                "pattern": "^apr_[0-9A-HJKMNP-TV-Z]{26}$",
                "description": "The approval handle (apr_...) from the answer that said the call awaits approval.",
            },
        }),
        &["handle"],
    )
}

pub(crate) fn output_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "status": {"type": "string", "enum": ["pending", "ran"]},
            "handle": {"type": "string"},
            "tool": {"type": "string"},
            "expires_at": {"type": "string", "format": "date-time"},
            "result": {"type": "object", "description": "The approved call's own structured result."},
        },
        "required": ["status", "handle", "tool"],
        "additionalProperties": false,
    })
}
