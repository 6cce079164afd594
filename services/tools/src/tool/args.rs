//! Tool arguments, parsed straight into domain types: the reader every
//! tool's parser goes through ([`Args`]: unknown keys refused up front) and
//! the parsers of arguments several tools take (issue ids, idempotency
//! keys, labels, relations, `expected_version`). Each tool's own arguments
//! are parsed in its file (`tool/<name>.rs`).
//!
//! Parsing is by hand rather than through serde so that every failure names
//! the argument at fault and the fix, which is what a model needs to correct
//! its next call. `null` counts as absent: models often send explicit nulls
//! for optional arguments, and treating them as "not given" never changes
//! what a call means.

use crate::error::ToolsError;
use corkboard_board::{BlockedBy, CloseReason, IdempotencyKey, IssueId, Labels, ValidationError};
use serde_json::{Map, Value};

/// Argument names that look like a way to pick the board. They get a
/// dedicated explanation because a model retrying with another spelling
/// would only waste turns.
const TENANT_LIKE: [&str; 3] = ["tenant", "tenant_id", "tenantId"];

/// A view over one call's `arguments` that refuses unknown keys up front.
pub(crate) struct Args<'a> {
    map: &'a Map<String, Value>,
}

impl<'a> Args<'a> {
    pub(crate) fn new(
        tool: &str,
        map: &'a Map<String, Value>,
        allowed: &[&str],
    ) -> Result<Self, ToolsError> {
        if let Some(key) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
            let reason = if TENANT_LIKE.contains(&key.as_str()) {
                "no tool takes a tenant: the board is fixed by this run's grant. Remove it"
                    .to_owned()
            } else {
                format!(
                    "not an argument of {tool}; its arguments are: {}",
                    allowed.join(", ")
                )
            };
            return Err(ToolsError::InvalidArgument {
                field: key.clone(),
                reason,
            });
        }
        Ok(Self { map })
    }

    fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    pub(crate) fn str(&self, key: &str) -> Result<Option<&'a str>, ToolsError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(invalid(
                key,
                format!("must be a string, not {}", kind(other)),
            )),
        }
    }

    pub(crate) fn required_str(&self, key: &str) -> Result<&'a str, ToolsError> {
        self.str(key)?
            .ok_or_else(|| invalid(key, "is required".to_owned()))
    }

    pub(crate) fn str_list(&self, key: &str) -> Result<Option<Vec<&'a str>>, ToolsError> {
        let Some(value) = self.get(key) else {
            return Ok(None);
        };
        let Value::Array(items) = value else {
            return Err(invalid(
                key,
                format!("must be an array of strings, not {}", kind(value)),
            ));
        };
        items
            .iter()
            .map(|item| match item {
                Value::String(s) => Ok(s.as_str()),
                other => Err(invalid(
                    key,
                    format!("must be an array of strings; found {}", kind(other)),
                )),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    pub(crate) fn bool(&self, key: &str) -> Result<Option<bool>, ToolsError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(invalid(
                key,
                format!("must be true or false, not {}", kind(other)),
            )),
        }
    }

    /// An optional count between `min` and `max`.
    pub(crate) fn count(
        &self,
        key: &str,
        min: usize,
        max: usize,
    ) -> Result<Option<usize>, ToolsError> {
        self.u64(key)?
            .map(|n| {
                usize::try_from(n)
                    .ok()
                    .filter(|n| (min..=max).contains(n))
                    .ok_or_else(|| invalid(key, format!("must be between {min} and {max}")))
            })
            .transpose()
    }

    pub(crate) fn u64(&self, key: &str) -> Result<Option<u64>, ToolsError> {
        let Some(value) = self.get(key) else {
            return Ok(None);
        };
        let number = value.as_u64().or_else(|| {
            // Some clients send integral numbers as floats (`3.0`).
            value
                .as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < 9_007_199_254_740_992.0)
                .map(|f| f as u64)
        });
        number
            .map(Some)
            .ok_or_else(|| invalid(key, format!("must be a non-negative integer, not {value}")))
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

pub(crate) fn invalid(field: &str, reason: String) -> ToolsError {
    ToolsError::InvalidArgument {
        field: field.to_owned(),
        reason,
    }
}

/// Re-labels a domain error with the argument's name (the domain names the
/// concept, e.g. `id`, while the tool may call it `issue_id` or `cursor`).
pub(crate) fn as_field(field: &str) -> impl FnOnce(ValidationError) -> ToolsError + '_ {
    move |err| invalid(field, err.reason)
}

pub(crate) fn issue_id(args: &Args<'_>, key: &str) -> Result<IssueId, ToolsError> {
    IssueId::parse(args.required_str(key)?).map_err(as_field(key))
}

pub(crate) fn idempotency_key(args: &Args<'_>) -> Result<Option<IdempotencyKey>, ToolsError> {
    args.str("idempotency_key")?
        .map(IdempotencyKey::parse)
        .transpose()
        .map_err(as_field("idempotency_key"))
}

pub(crate) fn labels(args: &Args<'_>) -> Result<Option<Labels>, ToolsError> {
    args.str_list("labels")?
        .map(Labels::parse)
        .transpose()
        .map_err(as_field("labels"))
}

pub(crate) fn optional_id(args: &Args<'_>, key: &str) -> Result<Option<IssueId>, ToolsError> {
    args.str(key)?
        .map(IssueId::parse)
        .transpose()
        .map_err(as_field(key))
}

/// A relation update: absent leaves it, `""` clears it, an id sets it
/// (`null` counts as absent, like everywhere else).
pub(crate) fn relation_change(
    args: &Args<'_>,
    key: &str,
) -> Result<Option<Option<IssueId>>, ToolsError> {
    match args.str(key)? {
        None => Ok(None),
        Some("") => Ok(Some(None)),
        Some(id) => IssueId::parse(id)
            .map(|id| Some(Some(id)))
            .map_err(as_field(key)),
    }
}

pub(crate) fn blocked_by(args: &Args<'_>) -> Result<Option<BlockedBy>, ToolsError> {
    let Some(ids) = args.str_list("blocked_by")? else {
        return Ok(None);
    };
    let ids = ids
        .into_iter()
        .map(IssueId::parse)
        .collect::<Result<Vec<_>, _>>()
        .map_err(as_field("blocked_by"))?;
    BlockedBy::parse(ids).map(Some).map_err(Into::into)
}

pub(crate) fn close_reason(args: &Args<'_>) -> Result<Option<CloseReason>, ToolsError> {
    args.str("close_reason")?
        .map(CloseReason::parse)
        .transpose()
        .map_err(Into::into)
}

pub(crate) fn expected_version(args: &Args<'_>) -> Result<Option<u64>, ToolsError> {
    let expected_version = args.u64("expected_version")?;
    if expected_version == Some(0) {
        return Err(invalid(
            "expected_version",
            "versions start at 1; pass the version field of the issue as you last read it"
                .to_owned(),
        ));
    }
    Ok(expected_version)
}

/// The issue id a call names, if it names a well-formed one, so that even a
/// call refused for other reasons is audited against its issue.
pub(crate) fn issue_hint(map: &Map<String, Value>, key: &str) -> Option<IssueId> {
    // `issue_id` is add_comment's older name of `id`.
    map.get(key)
        .or_else(|| map.get("issue_id"))
        .and_then(Value::as_str)
        .and_then(|s| IssueId::parse(s).ok())
}

/// What the parser tests of every tool share.
#[cfg(test)]
pub(crate) mod testing {
    use crate::error::ToolsError;
    use serde_json::{Map, Value};

    pub(crate) fn map(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    pub(crate) fn field_of(err: ToolsError) -> String {
        match err {
            ToolsError::InvalidArgument { field, .. } => field,
            other => panic!("expected an invalid argument, got {other:?}"),
        }
    }
}

/// The shared parsers of relations and claims, through the tools that
/// take them.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::args::testing::{field_of, map};
    use crate::tool::{claim_issue, create_issue, list_issues, update_issue};
    use corkboard_board::{ClaimFilter, CloseReason};
    use serde_json::json;

    #[test]
    fn relations_and_claim_filters_parse() {
        let parent = IssueId::generate();
        let created = create_issue::parse(&map(json!({
            "title": "t", "parent": parent.as_str(), "blocked_by": [parent.as_str()],
            "state": "closed", "close_reason": "not_planned"
        })))
        .unwrap();
        assert_eq!(created.new.parent.as_ref(), Some(&parent));
        assert_eq!(created.new.blocked_by.len(), 1);
        assert_eq!(created.new.close_reason, Some(CloseReason::NotPlanned));
        let err = create_issue::parse(&map(json!({"title": "t", "close_reason": "completed"})))
            .unwrap_err();
        assert_eq!(field_of(err), "close_reason");
        let cleared =
            update_issue::parse(&map(json!({"id": parent.as_str(), "parent": ""}))).unwrap();
        assert_eq!(cleared.patch.parent, Some(None));
        let err = update_issue::parse(&map(json!({"id": parent.as_str(), "duplicate_of": "x"})))
            .unwrap_err();
        assert_eq!(field_of(err), "duplicate_of");
        let q = list_issues::parse(&map(json!({"unclaimed": true, "parent": parent.as_str()})))
            .unwrap();
        assert_eq!(q.claim, ClaimFilter::Unclaimed);
        assert_eq!(q.parent, Some(parent.clone()));
        let q = list_issues::parse(&map(json!({"claimed_by": "run-2"}))).unwrap();
        assert!(matches!(q.claim, ClaimFilter::ClaimedBy(ref r) if r.as_str() == "run-2"));
        let err = list_issues::parse(&map(json!({"claimed_by": "run-2", "unclaimed": true})))
            .unwrap_err();
        assert_eq!(field_of(err), "unclaimed");
        let err = claim_issue::parse(&map(json!({"id": parent.as_str(), "run": "x"}))).unwrap_err();
        assert_eq!(field_of(err), "run");
    }
}
