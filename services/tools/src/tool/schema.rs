//! The schema builders several tools share: the schemas of arguments more
//! than one tool takes (issue ids, titles, bodies, labels, relations,
//! versions, idempotency keys), the closed input object, and the issue
//! every issue answer carries (with its comments, claim and the notes of a
//! cut to fit the result budget). Each tool's own schemas are in its file.

use corkboard_board::{
    AuthorKind, CloseReason, Integrity, IssueState, Priority, limits, relation_limits,
};
use serde_json::{Value, json};

pub(crate) const ID_EXAMPLE: &str = "iss_01JD3Z9Q4X8M2N6P7R5S1T0V9W";
pub(crate) const ISSUE_ID_PATTERN: &str = "^iss_[0-9A-HJKMNP-TV-Z]{26}$";
pub(crate) const COMMENT_ID_PATTERN: &str = "^cmt_[0-9A-HJKMNP-TV-Z]{26}$";

/// The issue a call acts on (`id`), with an example id: the one id a
/// model most needs to copy exactly.
pub(crate) fn issue_id_schema(description: &str) -> Value {
    let mut schema = related_id_schema(description);
    schema["description"] = format!("{description} Example: {ID_EXAMPLE}.").into();
    schema
}

/// Another issue a call names (a parent, an original, a cursor): the
/// pattern says its form, and the `id` argument's example shows it once.
pub(crate) fn related_id_schema(description: &str) -> Value {
    json!({
        "type": "string",
        "pattern": ISSUE_ID_PATTERN,
        "minLength": 30,
        "maxLength": 30,
        "description": description,
    })
}

pub(crate) fn state_schema(description: &str) -> Value {
    json!({
        "type": "string",
        "enum": IssueState::names(),
        "description": description,
    })
}

pub(crate) fn priority_schema(description: &str) -> Value {
    json!({
        "type": "string",
        "enum": Priority::ALL.iter().map(|p| p.as_str()).collect::<Vec<_>>(),
        "description": description,
    })
}

pub(crate) fn label_schema() -> Value {
    json!({
        "type": "string",
        "minLength": 1,
        "maxLength": limits::LABEL_MAX_CHARS,
        "pattern": "^[a-z0-9._:/-]+$",
    })
}

pub(crate) fn labels_schema(description: &str) -> Value {
    json!({
        "type": "array",
        "items": label_schema(),
        "maxItems": limits::LABELS_MAX,
        "description": description,
    })
}

pub(crate) fn title_schema(description: &str) -> Value {
    json!({
        "type": "string",
        "minLength": 1,
        "maxLength": limits::TITLE_MAX_CHARS,
        "description": format!(
            "{description} One line, not blank, at most {} characters.",
            limits::TITLE_MAX_CHARS
        ),
    })
}

pub(crate) fn body_schema(description: &str, min: usize) -> Value {
    json!({
        "type": "string",
        "minLength": min,
        "maxLength": limits::BODY_MAX_BYTES,
        "description": format!(
            "{description} Markdown, at most {} bytes of UTF-8.",
            limits::BODY_MAX_BYTES
        ),
    })
}

/// An idempotency key, explained for one `what` ("issue", "comment").
pub(crate) fn key_schema(what: &str) -> Value {
    key_schema_described(&format!(
        "Makes retries safe: the same key with the same arguments returns the original \
         {what}, not a duplicate. 1-200 visible ASCII characters, no spaces; a fresh one \
         (e.g. a UUID) per intended {what}."
    ))
}

/// An idempotency key with `description` (where the tool's description
/// already explains keys).
pub(crate) fn key_schema_described(description: &str) -> Value {
    json!({
        "type": "string",
        "minLength": 1,
        "maxLength": 200,
        "pattern": "^[!-~]+$",
        "description": description,
    })
}

pub(crate) fn object(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        // Also what refuses a `tenant` argument: the tenant comes from the grant.
        "additionalProperties": false,
    })
}

pub(crate) fn blocked_by_schema(description: &str) -> Value {
    json!({
        "type": "array",
        "items": {
            "type": "string",
            "pattern": ISSUE_ID_PATTERN,
            "minLength": 30,
            "maxLength": 30,
        },
        "maxItems": relation_limits::BLOCKED_BY_MAX,
        "description": description,
    })
}

pub(crate) fn close_reason_schema() -> Value {
    json!({
        "type": "string",
        "enum": CloseReason::names(),
        "description": "Why the issue is finished; only with state done or closed (default \
                        completed). duplicate needs duplicate_of.",
    })
}

pub(crate) fn version_schema() -> Value {
    json!({
        "type": "integer",
        "minimum": 1,
        "description": "The version you last read; if the issue changed since, \
                        nothing is written and the error gives the current one.",
    })
}

pub(crate) fn author_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "kind": {
                "type": "string",
                "enum": AuthorKind::names(),
                "description": "Who wrote it: run (an agent run), person (someone using the \
                                web board) or admin (a caller of the admin API).",
            },
            "run": {
                "type": "string",
                "description": "The run that wrote it, or for a person or admin their name.",
            },
            "grant": {
                "type": ["string", "null"],
                "description": "The grant it acted under; null for people and admins.",
            },
            "integrity": integrity_schema(),
        },
        "required": ["kind", "run", "grant"],
    })
}

/// An integrity level (`corkboard_board::Integrity`).
pub(crate) fn integrity_schema() -> Value {
    json!({
        "type": "string",
        "enum": Integrity::names(),
        "description": "How far it can be trusted: person (a person or the admin API), agent \
                        (a run that used only the board), external (a run that called \
                        upstream tools).",
    })
}

/// The `_meta` every entry of an answer carries: its integrity level.
pub(crate) fn meta_schema() -> Value {
    json!({
        "type": "object",
        "properties": { crate::provenance::INTEGRITY_META: integrity_schema() },
    })
}

pub(crate) fn comment_schema(description: &str) -> Value {
    json!({
        "type": "object",
        "description": description,
        "properties": {
            "id": { "type": "string", "description": "cmt_ followed by 26 characters." },
            "body": { "type": "string" },
            "author": author_schema(),
            "created_at": { "type": "string", "description": "RFC 3339, UTC." },
            "_meta": meta_schema(),
        },
        "required": ["id", "body", "author", "created_at"],
    })
}

/// The JSON shape `corkboard_board::Issue` serialises to. Open to new
/// properties, so adding a field to the domain never breaks a client that
/// validates results.
pub(crate) fn issue_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "id": { "type": "string", "description": "iss_ followed by 26 characters." },
            "tenant": { "type": "string", "description": "The board this issue is on." },
            "title": { "type": "string" },
            "body": { "type": "string" },
            "state": { "type": "string", "enum": IssueState::names() },
            "labels": { "type": "array", "items": { "type": "string" } },
            "priority": {
                "type": "string",
                "enum": Priority::ALL.iter().map(|p| p.as_str()).collect::<Vec<_>>(),
            },
            "author": author_schema(),
            "created_at": { "type": "string", "description": "RFC 3339, UTC." },
            "updated_at": { "type": "string", "description": "RFC 3339, UTC." },
            "version": {
                "type": "integer",
                "minimum": 1,
                "description": "Grows by one with every change, comments included; pass it \
                                as update_issue's expected_version.",
            },
            "comments": {
                "type": "array",
                "items": comment_schema("A comment, oldest first."),
            },
            "comment_count": {
                "type": "integer",
                "minimum": 0,
                "description": "Comments the issue has, shown or not.",
            },
            "comments_withheld": {
                "type": "integer",
                "minimum": 1,
                "description": "Comments of this answer left out: below the integrity floor \
                                of this run's grant.",
            },
            "_meta": meta_schema(),
            "older_comments": {
                "type": "integer",
                "minimum": 0,
                "description": "Comments older than those shown, left out of this answer.",
            },
            "comments_cursor": {
                "type": ["string", "null"],
                "description": "Pass as get_issue's comments_before for the older comments; \
                                null when none is left out.",
            },
            "truncated": truncated_schema("comments"),
            "body_truncated": body_truncated_schema(),
            "body_offset": {
                "type": "integer",
                "description": "The body shown starts at this byte (get_issue's body_offset).",
            },
            "parent": { "type": ["string", "null"], "description": "The parent issue's id." },
            "duplicate_of": {
                "type": ["string", "null"],
                "description": "The original this issue duplicates.",
            },
            "blocked_by": {
                "type": "array",
                "items": { "type": "string" },
                "description": "Issues that must be finished before this one.",
            },
            "close_reason": {
                "type": ["string", "null"],
                "enum": [Value::Null, "completed", "not_planned", "duplicate"],
                "description": "Why it is finished; null while open.",
            },
            "claim": claim_schema(),
        },
        "required": [
            "id", "tenant", "title", "body", "state", "labels", "priority", "author",
            "created_at", "updated_at", "version", "comments",
        ],
    })
}

/// An answer about one whole issue: the issue with its window of comments.
pub(crate) fn issue_answer_schema() -> Value {
    let mut schema = issue_schema();
    if let Some(Value::Array(required)) = schema.get_mut("required") {
        for name in ["comment_count", "older_comments", "comments_cursor"] {
            required.push(Value::from(name));
        }
    }
    schema
}

/// What a cut to fit the result budget left out (absent or null: nothing).
pub(crate) fn truncated_schema(what: &str) -> Value {
    json!({
        "type": ["object", "null"],
        "description": format!(
            "Present when this answer was cut to fit the result budget: how many {what} were \
             left out and how to get them."
        ),
        "properties": {
            "reason": { "type": "string" },
            "omitted_count": { "type": "integer", "minimum": 0 },
            "omitted": { "type": "string", "enum": ["issues", "comments"] },
            "how": { "type": "string", "description": "The call that gets what was left out." },
        },
        "required": ["reason", "omitted_count", "omitted", "how"],
    })
}

pub(crate) fn body_truncated_schema() -> Value {
    json!({
        "type": "object",
        "description": "Present when the body was too long for the result budget: the bytes \
                        shown and where the rest starts.",
        "properties": {
            "reason": { "type": "string" },
            "offset": { "type": "integer", "minimum": 0 },
            "kept_bytes": { "type": "integer", "minimum": 0 },
            "next_offset": { "type": "integer", "minimum": 0 },
            "total_bytes": { "type": "integer", "minimum": 0 },
            "how": { "type": "string" },
        },
        "required": ["reason", "kept_bytes", "total_bytes", "how"],
    })
}

pub(crate) fn claim_schema() -> Value {
    json!({
        "type": ["object", "null"],
        "description": "The run working on this issue, or null when nobody claimed it.",
        "properties": {
            "run": { "type": "string" },
            "grant": { "type": "string" },
            "claimed_at": { "type": "string", "description": "RFC 3339, UTC." },
            "expires_at": {
                "type": "string",
                "description": "When the claim ends at the latest (its grant expires).",
            },
        },
    })
}

/// `issue_schema` cut down to `keep` (of which `required` are required):
/// the answer to a grant that may write but not read.
/// The issue fields a write sets (create and update alike): what a grant
/// without `issues:read` is shown of its own writes, besides the id and
/// the write's instant or version.
pub(crate) const WRITABLE_FIELDS: [&str; 9] = [
    "title",
    "body",
    "state",
    "labels",
    "priority",
    "parent",
    "duplicate_of",
    "blocked_by",
    "close_reason",
];

/// `issue_fields` of `first` followed by [`WRITABLE_FIELDS`].
pub(crate) fn written_fields(first: &[&str], required: &[&str]) -> Value {
    let keep: Vec<&str> = first
        .iter()
        .chain(WRITABLE_FIELDS.iter())
        .copied()
        .collect();
    issue_fields(&keep, required)
}

pub(crate) fn issue_fields(keep: &[&str], required: &[&str]) -> Value {
    let full = issue_schema();
    let properties: serde_json::Map<String, Value> = keep
        .iter()
        .filter_map(|name| Some(((*name).to_owned(), full["properties"].get(*name)?.clone())))
        .collect();
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
    })
}

pub(crate) fn replayed_schema(what: &str) -> Value {
    json!({
        "type": "boolean",
        "description": format!(
            "True when this answers a retry with an idempotency_key already used: the {what} \
             was created by the earlier call, not this one."
        ),
    })
}

pub(crate) fn with_properties<const N: usize>(
    mut schema: Value,
    extra: [(&str, Value); N],
) -> Value {
    if let Some(object) = schema.as_object_mut() {
        for (name, property) in extra {
            if let Some(Value::Object(properties)) = object.get_mut("properties") {
                properties.insert(name.to_owned(), property);
            }
            if let Some(Value::Array(required)) = object.get_mut("required") {
                required.push(Value::from(name));
            }
        }
    }
    schema
}
