//! The board's tools, one file each: a tool's file holds its description
//! for a model, its arguments (the names it accepts and the parser into
//! domain types), its `run` (the store calls and the shaping of the
//! answer) and its input and output schemas. Its row of the tool table
//! (`defs.rs`) points at them, and `BoardTools::execute` (`service.rs`)
//! dispatches a call to its `run`.
//!
//! What several tools share lives here and in two modules: `args` (the
//! argument reader and the parsers of arguments several tools take) and
//! `schema` (the schemas of arguments several tools take, and of the
//! issue their answers carry).

pub(crate) mod add_comment;
pub(crate) mod args;
pub(crate) mod board_stats;
pub(crate) mod claim_issue;
pub(crate) mod claim_next;
pub(crate) mod collect_approval;
pub(crate) mod create_issue;
pub(crate) mod create_issues;
pub(crate) mod get_issue;
pub(crate) mod list_issues;
pub(crate) mod release_issue;
pub(crate) mod schema;
pub(crate) mod search_issues;
pub(crate) mod update_issue;

use crate::error::ToolsError;
use crate::result_budget::Answer;
use corkboard_board::IssueId;
use serde_json::Value;

/// What a successful call produced: the answer (structured and text,
/// within the result budget) and the issue it touched, for the audit
/// record.
pub(crate) struct Success {
    pub answer: Answer,
    pub issue: Option<IssueId>,
}

/// Four decimals: enough to order by, short to read.
fn round(score: f64) -> f64 {
    (score * 10_000.0).round() / 10_000.0
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<Value, ToolsError> {
    serde_json::to_value(value).map_err(|err| ToolsError::Internal {
        detail: format!("result not serialisable: {err}"),
    })
}

/// Drops every member of `object` not named in `keep`.
fn retain(object: &mut Value, keep: &[&str]) {
    if let Value::Object(map) = object {
        map.retain(|key, _| keep.contains(&key.as_str()));
    }
}

fn insert(object: &mut Value, key: &str, value: Value) {
    if let Value::Object(map) = object {
        map.insert(key.to_owned(), value);
    }
}
