//! `board_stats`: the shape of the board in one small answer: issues per
//! state, open ones per priority and label, and how many are ready,
//! claimed, blocked or stale (a bounded count per figure in the store;
//! the ones that stopped at their cap are named in `at_least`).

use super::args::Args;
use super::schema::object;
use super::{Success, to_json};
use crate::error::ToolsError;
use crate::render;
use crate::result_budget::Answer;
use crate::service::BoardTools;
use corkboard_board::{StatsPart, Timestamp, stale_window};
use corkboard_grants::ResolvedGrant;
use serde_json::{Map, Value, json};

pub(crate) const DESCRIPTION: &str = "Counts of this run's board: issues per state; open ones \
per priority and per label (50 most used); and how many are ready (claim_next can take them), \
claimed, blocked by an open issue, or stale (claim lapsing or lapsed). Counts stop at 10000; \
those named in at_least are that many or more.";

pub(crate) const ARGS: [&str; 0] = [];

pub(crate) async fn run(
    tools: &BoardTools,
    principal: &ResolvedGrant,
    arguments: &Map<String, Value>,
) -> Result<Success, ToolsError> {
    Args::new("board_stats", arguments, &ARGS)?;
    let grant = principal.grant();
    let window = i64::try_from(stale_window(tools.claim_lease()).as_millis()).unwrap_or(0);
    let stats = tools
        .bounded(
            None,
            tools
                .store()
                .board_stats(&grant.tenant, Timestamp::now().plus_millis(window)),
        )
        .await?;
    let structured = to_json(&stats)?;
    let n = |part: StatsPart, n: u64| render::count(n, part, &stats.at_least);
    let text = format!(
        "board_stats: {} issues, {} open: {} ready, {} claimed, {} blocked, {} stale\n{structured}",
        n(StatsPart::States, stats.total),
        n(StatsPart::States, stats.open),
        n(StatsPart::Ready, stats.ready),
        n(StatsPart::Claimed, stats.claimed),
        n(StatsPart::Blocked, stats.blocked),
        n(StatsPart::Stale, stats.stale)
    );
    // At most 50 labels of 50 characters: far inside any result budget.
    Ok(Success {
        answer: Answer::new(structured, text),
        issue: None,
    })
}

pub(crate) fn input_schema() -> Value {
    object(json!({}), &[])
}

pub(crate) fn output_schema() -> Value {
    let count = json!({ "type": "integer", "minimum": 0 });
    let counts = json!({ "type": "object", "additionalProperties": count });
    json!({
        "type": "object",
        "properties": {
            "total": count, "open": count, "ready": count, "claimed": count,
            "blocked": count, "stale": count,
            "by_state": counts, "by_priority": counts,
            "by_label": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": { "label": { "type": "string" }, "issues": count },
                    "required": ["label", "issues"],
                },
            },
            "more_labels": { "type": "boolean" },
            "at_least": {
                "type": "array",
                "items": { "enum": ["states", "priorities", "labels", "ready", "claimed", "blocked", "stale"] },
            },
        },
        "required": [
            "total", "open", "ready", "claimed", "blocked", "stale", "by_state",
            "by_priority", "by_label", "more_labels", "at_least",
        ],
    })
}
