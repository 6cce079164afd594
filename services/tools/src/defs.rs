//! The five tools as MCP sees them: names, titles, descriptions written for
//! a model, input and output schemas, annotations.
//!
//! Definitions are built once per process, and so are the 15 tool sets a
//! non-empty capability set can select: `tools/list` and every call only
//! clone an `Arc`, and the transport's cached wire rendering inside each
//! [`ToolSet`] is reused across requests and runs.

use corkboard_board::{Capabilities, Capability, IssueState, Priority, limits};
use corkboard_mcp::{ToolDef, ToolSet};
use serde_json::{Value, json};
use std::sync::{Arc, LazyLock};

/// One of the board's tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BoardTool {
    ListIssues,
    GetIssue,
    CreateIssue,
    UpdateIssue,
    AddComment,
}

impl BoardTool {
    /// Every tool, in the order `tools/list` shows them.
    pub const ALL: [BoardTool; 5] = [
        Self::ListIssues,
        Self::GetIssue,
        Self::CreateIssue,
        Self::UpdateIssue,
        Self::AddComment,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::ListIssues => "list_issues",
            Self::GetIssue => "get_issue",
            Self::CreateIssue => "create_issue",
            Self::UpdateIssue => "update_issue",
            Self::AddComment => "add_comment",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The capability a grant needs to see and call this tool.
    pub fn capability(self) -> Capability {
        match self {
            Self::ListIssues | Self::GetIssue => Capability::IssuesRead,
            Self::CreateIssue => Capability::IssuesCreate,
            Self::UpdateIssue => Capability::IssuesUpdate,
            Self::AddComment => Capability::CommentsWrite,
        }
    }

    fn definition(self) -> ToolDef {
        let (title, description, input, output) = match self {
            Self::ListIssues => ("List issues", LIST_DESCRIPTION, list_input(), list_output()),
            Self::GetIssue => ("Get issue", GET_DESCRIPTION, get_input(), issue_schema()),
            Self::CreateIssue => (
                "Create issue",
                CREATE_DESCRIPTION,
                create_input(),
                with_properties(issue_schema(), [("replayed", replayed_schema("issue"))]),
            ),
            Self::UpdateIssue => (
                "Update issue",
                UPDATE_DESCRIPTION,
                update_input(),
                issue_schema(),
            ),
            Self::AddComment => (
                "Add comment",
                COMMENT_DESCRIPTION,
                comment_input(),
                with_properties(
                    issue_schema(),
                    [
                        ("comment", comment_schema("The comment this call added.")),
                        ("replayed", replayed_schema("comment")),
                    ],
                ),
            ),
        };
        let read_only = self.capability() == Capability::IssuesRead;
        // Creating twice creates twice unless the caller passes a key, so the
        // hint must be false: the hint describes the tool, not one call.
        let idempotent = !matches!(self, Self::CreateIssue | Self::AddComment);
        ToolDef {
            name: self.name().to_owned(),
            title: Some(title.to_owned()),
            description: description.to_owned(),
            input_schema: input,
            output_schema: Some(output),
            annotations: Some(json!({
                "title": title,
                "readOnlyHint": read_only,
                "destructiveHint": false,
                "idempotentHint": idempotent,
                "openWorldHint": false,
            })),
        }
    }
}

static TOOL_SETS: LazyLock<[Arc<ToolSet>; 16]> = LazyLock::new(|| {
    let defs: Vec<(Capability, ToolDef)> = BoardTool::ALL
        .into_iter()
        .map(|t| (t.capability(), t.definition()))
        .collect();
    std::array::from_fn(|mask| {
        Arc::new(ToolSet::new(
            defs.iter()
                .filter(|(cap, _)| mask & bit(*cap) != 0)
                .map(|(_, def)| def.clone())
                .collect(),
        ))
    })
});

fn bit(capability: Capability) -> usize {
    match capability {
        Capability::IssuesRead => 1,
        Capability::IssuesCreate => 2,
        Capability::IssuesUpdate => 4,
        Capability::CommentsWrite => 8,
    }
}

/// The shared tool set a grant with `capabilities` sees.
pub fn tool_set(capabilities: &Capabilities) -> Arc<ToolSet> {
    let mask = capabilities.iter().map(bit).fold(0, |acc, b| acc | b);
    Arc::clone(&TOOL_SETS[mask])
}

const ID_EXAMPLE: &str = "iss_01JD3Z9Q4X8M2N6P7R5S1T0V9W";
const ISSUE_ID_PATTERN: &str = "^iss_[0-9A-HJKMNP-TV-Z]{26}$";

const LIST_DESCRIPTION: &str = "List issues on this run's board, newest first. Returns \
{issues, next_cursor}; every issue comes complete, with its comments and its current version. \
Filters combine with AND: `states` keeps issues in any of the given states; `labels` keeps \
issues carrying every given label (label_match \"all\", the default) or at least one of them \
(label_match \"any\"); `text` is a case-insensitive substring of the title; `author_run` keeps \
issues created by that run. Paging: a page holds at most `limit` issues (default 50, max 200). \
When next_cursor is a string, call list_issues again with the same filters and \
cursor=next_cursor for the next page; null means this was the last page. Search here before \
creating an issue, to avoid duplicates.";

const GET_DESCRIPTION: &str = "Read one issue with all its comments. `id` is an issue id \
exactly as create_issue or list_issues returned it: iss_ followed by 26 characters, e.g. \
iss_01JD3Z9Q4X8M2N6P7R5S1T0V9W; never shorten or retype it from memory. The result's \
`version` is the value update_issue's expected_version wants. An unknown id is an error that \
says so.";

const CREATE_DESCRIPTION: &str = "Create an issue on this run's board and return it, with its \
new id (iss_ followed by 26 characters) and version 1. Only `title` is required; state \
defaults to inbox, priority to none, labels to none. The issue is recorded as written by this \
run. Pass an `idempotency_key` (a fresh unique string per intended issue, e.g. a UUID) \
whenever you might retry: resending the same arguments with the same key returns the \
original issue with replayed=true instead of a duplicate, and reusing a key with different \
arguments is refused. Check list_issues first so you do not file an issue that exists.";

const UPDATE_DESCRIPTION: &str = "Change an issue's title, body, state, labels or priority and \
return the updated issue with its new version. Omitted fields stay as they are; `labels` \
replaces the whole label set. Pass `expected_version`, the version you last read (from \
get_issue, list_issues or your previous update): if the issue changed since, nothing is \
written and the error gives its current version. Then re-read it with get_issue, check that \
your change still makes sense, and retry with expected_version set to the current version. \
Without expected_version the update applies unconditionally and may overwrite someone \
else's change.";

const COMMENT_DESCRIPTION: &str = "Add a comment to an issue. Returns the issue with all its \
comments, the new `comment`, and `replayed`. `issue_id` is an issue id exactly as \
create_issue or list_issues returned it (iss_ followed by 26 characters). Pass an \
`idempotency_key` when you might retry: the same key with the same arguments returns the \
original comment (replayed=true) instead of adding it twice.";

fn issue_id_schema(description: &str) -> Value {
    json!({
        "type": "string",
        "pattern": ISSUE_ID_PATTERN,
        "minLength": 30,
        "maxLength": 30,
        "description": format!("{description} Example: {ID_EXAMPLE}."),
    })
}

fn state_schema(description: &str) -> Value {
    json!({
        "type": "string",
        "enum": IssueState::names(),
        "description": description,
    })
}

fn priority_schema(description: &str) -> Value {
    json!({
        "type": "string",
        "enum": Priority::ALL.iter().map(|p| p.as_str()).collect::<Vec<_>>(),
        "description": description,
    })
}

fn label_schema() -> Value {
    json!({
        "type": "string",
        "minLength": 1,
        "maxLength": limits::LABEL_MAX_CHARS,
        "pattern": "^[a-z0-9._:/-]+$",
    })
}

fn labels_schema(description: &str) -> Value {
    json!({
        "type": "array",
        "items": label_schema(),
        "maxItems": limits::LABELS_MAX,
        "description": description,
    })
}

fn title_schema(description: &str) -> Value {
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

fn body_schema(description: &str, min: usize) -> Value {
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

fn key_schema(what: &str) -> Value {
    json!({
        "type": "string",
        "minLength": 1,
        "maxLength": 200,
        "pattern": "^[!-~]+$",
        "description": format!(
            "Optional key that makes retries safe: the same key with the same arguments \
             returns the original {what} instead of a duplicate. 1-200 visible ASCII \
             characters, no spaces; use a fresh one (e.g. a UUID) per intended {what}."
        ),
    })
}

fn object(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        // Also what refuses a `tenant` argument: the tenant comes from the grant.
        "additionalProperties": false,
    })
}

fn create_input() -> Value {
    object(
        json!({
            "title": title_schema("Short summary of the issue."),
            "body": body_schema("Details: context, steps to reproduce, what done means.", 0),
            "state": state_schema("Initial state; defaults to inbox."),
            "labels": labels_schema(&format!(
                "Labels to attach, e.g. [\"bug\", \"area:ci\"]. Each 1-{} of lowercase \
                 letters, digits and - _ . : /; at most {} labels.",
                limits::LABEL_MAX_CHARS,
                limits::LABELS_MAX
            )),
            "priority": priority_schema("Defaults to none (nobody has said)."),
            "idempotency_key": key_schema("issue"),
        }),
        &["title"],
    )
}

fn get_input() -> Value {
    object(
        json!({ "id": issue_id_schema("The issue to read.") }),
        &["id"],
    )
}

fn list_input() -> Value {
    object(
        json!({
            "states": {
                "type": "array",
                "items": { "type": "string", "enum": IssueState::names() },
                "description": "Keep issues in any of these states. Omit for every state.",
            },
            "labels": labels_schema("Keep issues carrying these labels (see label_match)."),
            "label_match": {
                "type": "string",
                "enum": ["all", "any"],
                "default": "all",
                "description": "\"all\": an issue must carry every label in `labels`; \
                                \"any\": at least one of them.",
            },
            "text": {
                "type": "string",
                "maxLength": limits::TEXT_FILTER_MAX_CHARS,
                "description": "Case-insensitive substring the title must contain.",
            },
            "author_run": {
                "type": "string",
                "minLength": 1,
                "maxLength": 128,
                "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]*$",
                "description": "Keep issues created by this run id.",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": limits::PAGE_MAX,
                "default": limits::PAGE_DEFAULT,
                "description": format!(
                    "Page size, 1-{}; defaults to {}.",
                    limits::PAGE_MAX,
                    limits::PAGE_DEFAULT
                ),
            },
            "cursor": issue_id_schema(
                "The next_cursor of the previous page, unchanged, to read the next page. \
                 Omit for the first page."
            ),
        }),
        &[],
    )
}

fn update_input() -> Value {
    object(
        json!({
            "id": issue_id_schema("The issue to change."),
            "title": title_schema("New title."),
            "body": body_schema("New body; replaces the old one entirely.", 0),
            "state": state_schema("New state."),
            "labels": labels_schema("New label set; replaces the old one entirely. [] removes all."),
            "priority": priority_schema("New priority."),
            "expected_version": {
                "type": "integer",
                "minimum": 1,
                "description": "The issue's version as you last read it. If the issue has \
                                changed since, nothing is written and the error gives the \
                                current version.",
            },
        }),
        &["id"],
    )
}

fn comment_input() -> Value {
    object(
        json!({
            "issue_id": issue_id_schema("The issue to comment on."),
            "body": body_schema("The comment, not blank.", 1),
            "idempotency_key": key_schema("comment"),
        }),
        &["issue_id", "body"],
    )
}

fn author_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "run": { "type": "string", "description": "The run (or person) that wrote it." },
            "grant": {
                "type": ["string", "null"],
                "description": "The grant it acted under; null for people using the web board.",
            },
        },
        "required": ["run", "grant"],
    })
}

fn comment_schema(description: &str) -> Value {
    json!({
        "type": "object",
        "description": description,
        "properties": {
            "id": { "type": "string", "description": "cmt_ followed by 26 characters." },
            "body": { "type": "string" },
            "author": author_schema(),
            "created_at": { "type": "string", "description": "RFC 3339, UTC." },
        },
        "required": ["id", "body", "author", "created_at"],
    })
}

/// The JSON shape `corkboard_board::Issue` serialises to. Open to new
/// properties, so adding a field to the domain never breaks a client that
/// validates results.
fn issue_schema() -> Value {
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
        },
        "required": [
            "id", "tenant", "title", "body", "state", "labels", "priority", "author",
            "created_at", "updated_at", "version", "comments",
        ],
    })
}

fn list_output() -> Value {
    json!({
        "type": "object",
        "properties": {
            "issues": { "type": "array", "items": issue_schema() },
            "next_cursor": {
                "type": ["string", "null"],
                "description": "Pass as cursor for the next page; null on the last page.",
            },
        },
        "required": ["issues", "next_cursor"],
    })
}

fn replayed_schema(what: &str) -> Value {
    json!({
        "type": "boolean",
        "description": format!(
            "True when this answers a retry with an idempotency_key already used: the {what} \
             was created by the earlier call, not this one."
        ),
    })
}

fn with_properties<const N: usize>(mut schema: Value, extra: [(&str, Value); N]) -> Value {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn names(set: &ToolSet) -> Vec<&str> {
        set.tools().iter().map(|t| t.name.as_str()).collect()
    }

    #[test]
    fn sets_follow_capabilities_and_are_shared() {
        let read = Capabilities::parse_csv("issues:read").unwrap();
        assert_eq!(names(&tool_set(&read)), ["list_issues", "get_issue"]);
        let write = Capabilities::parse_csv("issues:create,comments:write").unwrap();
        assert_eq!(names(&tool_set(&write)), ["create_issue", "add_comment"]);
        assert_eq!(
            names(&tool_set(&Capabilities::all())),
            [
                "list_issues",
                "get_issue",
                "create_issue",
                "update_issue",
                "add_comment"
            ]
        );
        assert!(Arc::ptr_eq(&tool_set(&read), &tool_set(&read)));
    }

    #[test]
    fn schemas_accept_exactly_what_the_parser_accepts() {
        use crate::args::{COMMENT_ARGS, CREATE_ARGS, GET_ARGS, LIST_ARGS, UPDATE_ARGS};
        let all = tool_set(&Capabilities::all());
        for (name, accepted) in [
            ("create_issue", &CREATE_ARGS[..]),
            ("get_issue", &GET_ARGS[..]),
            ("list_issues", &LIST_ARGS[..]),
            ("update_issue", &UPDATE_ARGS[..]),
            ("add_comment", &COMMENT_ARGS[..]),
        ] {
            let schema = &all.get(name).unwrap().input_schema;
            let mut properties: Vec<&str> = schema["properties"]
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            let mut accepted = accepted.to_vec();
            properties.sort_unstable();
            accepted.sort_unstable();
            assert_eq!(properties, accepted, "{name}");
        }
    }

    #[test]
    fn every_schema_is_a_closed_object_matching_the_parser() {
        let all = tool_set(&Capabilities::all());
        for tool in all.tools() {
            let input = &tool.input_schema;
            assert_eq!(input["type"], "object", "{}", tool.name);
            assert_eq!(input["additionalProperties"], false, "{}", tool.name);
            assert!(input["properties"].get("tenant").is_none());
            let output = tool.output_schema.as_ref().unwrap();
            assert_eq!(output["type"], "object", "{}", tool.name);
            assert!(tool.name.len() <= 128);
            assert!(!tool.description.is_empty());
            let annotations = tool.annotations.as_ref().unwrap();
            assert_eq!(annotations["destructiveHint"], false);
            assert_eq!(annotations["openWorldHint"], false);
        }
        let update = all.get("update_issue").unwrap();
        assert_eq!(update.annotations.as_ref().unwrap()["idempotentHint"], true);
        let create = all.get("create_issue").unwrap();
        assert_eq!(
            create.annotations.as_ref().unwrap()["idempotentHint"],
            false
        );
        assert_eq!(create.annotations.as_ref().unwrap()["readOnlyHint"], false);
        let list = all.get("list_issues").unwrap();
        assert_eq!(list.annotations.as_ref().unwrap()["readOnlyHint"], true);
        assert_eq!(
            create.input_schema["properties"]["state"]["enum"],
            json!([
                "inbox",
                "triage",
                "todo",
                "in_progress",
                "blocked",
                "done",
                "closed"
            ])
        );
    }
}
