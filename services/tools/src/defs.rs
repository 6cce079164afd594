//! The tool table: one [`ToolSpec`] per board tool (name, title,
//! description written for a model, capability, annotations, input and
//! output schemas, whether it changes an issue and which argument names the
//! issue), and everything derived from it: `tools/list` per capability set,
//! [`BoardTool::names`] (the tool vocabulary of spans and metrics, handed to
//! telemetry by the binary), [`BoardTool::writes`] (live board events) and
//! [`vocabulary`] (what the web page and test clients read).
//!
//! Adding a tool: a [`BoardTool`] variant with its row in
//! [`BoardTool::spec`] and its place in [`BoardTool::ALL`], its argument
//! parser (`args.rs`) and its arm in `BoardTools::execute`
//! (`service.rs`); nothing outside this crate lists tool names.
//!
//! Definitions are built once per process, and so is each tool set a
//! capability set selects (on first use): `tools/list` and every call only
//! clone an `Arc`, and the transport's cached wire rendering inside each
//! [`ToolSet`] is reused across requests and runs.

use corkboard_board::{Capabilities, Capability, IssueState, Priority, limits};
use corkboard_mcp::{ToolDef, ToolSet};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, PoisonError, RwLock};

/// One of the board's tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BoardTool {
    ListIssues,
    GetIssue,
    CreateIssue,
    UpdateIssue,
    AddComment,
    SearchIssues,
}

/// Everything the product says about one tool: its row of the tool table.
#[derive(Debug, Clone, Copy)]
pub struct ToolSpec {
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    /// The capability a grant needs to see and call the tool.
    pub capability: Capability,
    /// MCP `readOnlyHint`.
    pub read_only: bool,
    /// MCP `idempotentHint`: calling twice with the same arguments has the
    /// effect of calling once.
    pub idempotent: bool,
    /// MCP `destructiveHint`.
    pub destructive: bool,
    /// Whether a successful call changes an issue: its audit record then
    /// names the issue it changed, and live board events follow from it.
    pub writes: bool,
    /// The argument naming the issue a call is about, so that even a
    /// refused call is audited against it.
    pub issue_argument: Option<&'static str>,
    pub input_schema: fn() -> Value,
    pub output_schema: fn() -> Value,
    /// The output schema for a grant without `issues:read`, for a write
    /// that would otherwise answer with the whole issue: such a grant is
    /// answered with what its call wrote, never the rest of the issue.
    pub write_only_output_schema: Option<fn() -> Value>,
}

impl BoardTool {
    /// Every tool, in the order `tools/list` shows them.
    pub const ALL: &'static [BoardTool] = &[
        Self::ListIssues,
        Self::GetIssue,
        Self::CreateIssue,
        Self::UpdateIssue,
        Self::AddComment,
        Self::SearchIssues,
    ];

    /// The tool table.
    pub const fn spec(self) -> ToolSpec {
        match self {
            Self::ListIssues => ToolSpec {
                name: "list_issues",
                title: "List issues",
                description: LIST_DESCRIPTION,
                capability: Capability::IssuesRead,
                read_only: true,
                idempotent: true,
                destructive: false,
                writes: false,
                issue_argument: None,
                input_schema: list_input,
                output_schema: list_output,
                write_only_output_schema: None,
            },
            Self::GetIssue => ToolSpec {
                name: "get_issue",
                title: "Get issue",
                description: GET_DESCRIPTION,
                capability: Capability::IssuesRead,
                read_only: true,
                idempotent: true,
                destructive: false,
                writes: false,
                issue_argument: Some("id"),
                input_schema: get_input,
                output_schema: issue_schema,
                write_only_output_schema: None,
            },
            Self::CreateIssue => ToolSpec {
                name: "create_issue",
                title: "Create issue",
                description: CREATE_DESCRIPTION,
                capability: Capability::IssuesCreate,
                read_only: false,
                // Creating twice creates twice unless the caller passes a
                // key, so the hint must be false: the hint describes the
                // tool, not one call.
                idempotent: false,
                destructive: false,
                writes: true,
                issue_argument: None,
                input_schema: create_input,
                output_schema: create_output,
                write_only_output_schema: None,
            },
            Self::UpdateIssue => ToolSpec {
                name: "update_issue",
                title: "Update issue",
                description: UPDATE_DESCRIPTION,
                capability: Capability::IssuesUpdate,
                read_only: false,
                idempotent: true,
                destructive: false,
                writes: true,
                issue_argument: Some("id"),
                input_schema: update_input,
                output_schema: issue_schema,
                write_only_output_schema: Some(update_write_only_output),
            },
            Self::AddComment => ToolSpec {
                name: "add_comment",
                title: "Add comment",
                description: COMMENT_DESCRIPTION,
                capability: Capability::CommentsWrite,
                read_only: false,
                idempotent: false,
                destructive: false,
                writes: true,
                issue_argument: Some("issue_id"),
                input_schema: comment_input,
                output_schema: comment_output,
                write_only_output_schema: Some(comment_write_only_output),
            },
            Self::SearchIssues => ToolSpec {
                name: "search_issues",
                title: "Search issues",
                description: SEARCH_DESCRIPTION,
                capability: Capability::IssuesRead,
                read_only: true,
                idempotent: true,
                destructive: false,
                writes: false,
                issue_argument: None,
                input_schema: search_input,
                output_schema: search_output,
                write_only_output_schema: None,
            },
        }
    }

    pub fn name(self) -> &'static str {
        self.spec().name
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|t| t.name() == name)
    }

    /// Every tool's name, in [`Self::ALL`] order: the tool vocabulary the
    /// binary hands to telemetry (`corkboard_telemetry::mcp::set_known_tools`).
    pub fn names() -> &'static [&'static str] {
        static NAMES: LazyLock<Vec<&'static str>> =
            LazyLock::new(|| BoardTool::ALL.iter().map(|t| t.name()).collect());
        &NAMES
    }

    /// The capability a grant needs to see and call this tool.
    pub fn capability(self) -> Capability {
        self.spec().capability
    }

    /// Whether a successful call changes an issue (see [`ToolSpec::writes`]).
    pub fn writes(self) -> bool {
        self.spec().writes
    }

    /// Whether a grant with `capabilities` is answered with the whole
    /// issue by this tool, or (without `issues:read`) only with what its
    /// call wrote.
    pub fn answers_whole_issue(self, capabilities: &Capabilities) -> bool {
        self.spec().write_only_output_schema.is_none()
            || capabilities.allows(Capability::IssuesRead)
    }

    /// The definition a grant that may (`reads`) or may not read issues sees.
    fn definition(self, reads: bool) -> ToolDef {
        let spec = self.spec();
        let output = match spec.write_only_output_schema {
            Some(write_only) if !reads => write_only,
            _ => spec.output_schema,
        };
        ToolDef {
            name: spec.name.to_owned(),
            title: Some(spec.title.to_owned()),
            description: spec.description.to_owned(),
            input_schema: (spec.input_schema)(),
            output_schema: Some(output()),
            annotations: Some(json!({
                "title": spec.title,
                "readOnlyHint": spec.read_only,
                "destructiveHint": spec.destructive,
                "idempotentHint": spec.idempotent,
                "openWorldHint": false,
            })),
        }
    }
}

/// Every tool's definition, built once, in [`BoardTool::ALL`] order: as a
/// grant with `issues:read` sees it, and as one without does.
static DEFINITIONS: LazyLock<Vec<(Capability, ToolDef, ToolDef)>> = LazyLock::new(|| {
    BoardTool::ALL
        .iter()
        .map(|t| (t.capability(), t.definition(true), t.definition(false)))
        .collect()
});

/// The tool sets handed out so far, by capability mask (bit `i` is
/// `Capability::ALL[i]`); filled on first use of each set.
static TOOL_SETS: LazyLock<RwLock<HashMap<u64, Arc<ToolSet>>>> = LazyLock::new(Default::default);

fn mask(capabilities: &Capabilities) -> u64 {
    Capability::ALL
        .iter()
        .enumerate()
        .filter(|(_, cap)| capabilities.allows(**cap))
        .fold(0, |acc, (i, _)| acc | 1 << i)
}

/// The shared tool set a grant with `capabilities` sees.
pub fn tool_set(capabilities: &Capabilities) -> Arc<ToolSet> {
    let key = mask(capabilities);
    if let Some(set) = TOOL_SETS
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&key)
    {
        return Arc::clone(set);
    }
    let mut sets = TOOL_SETS.write().unwrap_or_else(PoisonError::into_inner);
    let reads = capabilities.allows(Capability::IssuesRead);
    let set = sets.entry(key).or_insert_with(|| {
        Arc::new(ToolSet::new(
            DEFINITIONS
                .iter()
                .filter(|(cap, _, _)| capabilities.allows(*cap))
                .map(|(_, reader, writer)| if reads { reader } else { writer }.clone())
                .collect(),
        ))
    });
    Arc::clone(set)
}

/// The board's vocabulary as clients see it: issue states, priorities,
/// capabilities and tools, all from the domain types and the tool table.
/// Served at `GET /v1/vocabulary` (the web page reads it at start) and
/// checked into `tests/clients/vocabulary.json` for the test clients.
pub fn vocabulary() -> Value {
    json!({
        "states": IssueState::names(),
        "priorities": Priority::ALL.iter().map(|p| p.as_str()).collect::<Vec<_>>(),
        "capabilities": Capability::ALL.iter().map(|c| c.as_str()).collect::<Vec<_>>(),
        "tools": BoardTool::ALL.iter().map(|t| {
            let spec = t.spec();
            json!({
                "name": spec.name,
                "title": spec.title,
                "capability": spec.capability.as_str(),
                "read_only": spec.read_only,
                "writes": spec.writes,
            })
        }).collect::<Vec<_>>(),
    })
}

const ID_EXAMPLE: &str = "iss_01JD3Z9Q4X8M2N6P7R5S1T0V9W";
const ISSUE_ID_PATTERN: &str = "^iss_[0-9A-HJKMNP-TV-Z]{26}$";

const LIST_DESCRIPTION: &str = "List issues on this run's board, newest first. Returns \
{issues, next_cursor}; every issue comes complete, with its comments and its current version. \
Filters combine with AND: `states` keeps issues in any of the given states; `labels` keeps \
issues carrying every given label (label_match \"all\", the default) or at least one of them \
(label_match \"any\"); `text` is a case-insensitive substring of the title; `author_run` keeps \
issues created by that run; `priorities` keeps issues of any of the given priorities; \
`updated_since` (RFC 3339) keeps issues changed at or after that time. Paging: a page holds at \
most `limit` issues (default 50, max 200). When next_cursor is a string, call list_issues again \
with the same filters and cursor=next_cursor for the next page; null means this was the last \
page. To find issues by words in their body or comments, use search_issues.";

const SEARCH_DESCRIPTION: &str = "Full-text search of this run's board: titles, bodies and \
comments. Returns {hits, next_offset, partial}; each hit is a short summary of the issue (id, \
title, state, labels, priority, updated_at, version, comment_count) with its score, the field \
that matched best (title, body or comment, plus the comment's id) and a snippet of that field \
with the matching words in **bold**; read the whole issue with get_issue. `query`: 1-200 \
characters, 1-16 words; words are case-insensitive runs of letters and digits (punctuation \
separates them); an issue matches only when EVERY word occurs in its title, body or one of its \
comments; end a word with * to match it as a prefix (timeo* finds timeout, timeouts; at least 2 \
characters before the *). Ranking: title matches first, then body, then comment-only matches, \
then the most recently updated. The list filters (states, labels with label_match, text, \
author_run, priorities, updated_since) combine with the query as in list_issues. Paging: \
`limit` hits per answer (default 10, max 50); when next_offset is a number, call again with the \
same arguments and offset=next_offset; offset + limit may not exceed 1000 (narrow the query \
instead). partial=true means more issues matched than the board ranks (only the newest 1000 \
matches were ranked): add words or filters. Search here before creating an issue.";

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
arguments is refused. The answer has `created` (true when this call filed the issue) and, for \
a run that may read issues, `similar`: up to 5 open issues (not done or closed) whose titles are \
most like this one, each {id, title, state, score} with score the share of title words they \
have in common (0-1; 0.75 or more is a near match). Pass if_similar=\"refuse\" to file only \
when no open issue is a near match: then, if one is, NOTHING is created and the answer is that \
existing issue with created=false, `reason` saying why and `similar` listing the near matches; \
work on it (add_comment, update_issue) instead of filing again. A retry with the same \
idempotency_key always returns the original issue, whatever is similar now. Search \
(search_issues) first so you do not file an issue that exists.";

const UPDATE_DESCRIPTION: &str = "Change an issue's title, body, state, labels or priority and \
return the updated issue with its new version (a run that may not read issues gets only the \
id, version, updated_at and the fields it set). Omitted fields stay as they are; `labels` \
replaces the whole label set. Pass `expected_version`, the version you last read (from \
get_issue, list_issues or your previous update): if the issue changed since, nothing is \
written and the error gives its current version. Then re-read it with get_issue, check that \
your change still makes sense, and retry with expected_version set to the current version. \
Without expected_version the update applies unconditionally and may overwrite someone \
else's change.";

const COMMENT_DESCRIPTION: &str = "Add a comment to an issue. Returns the issue with all its \
comments, the new `comment`, and `replayed` (a run that may not read issues gets only the \
issue's id, version and updated_at with the new `comment` and `replayed`). `issue_id` is an issue id exactly as \
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
            "if_similar": {
                "type": "string",
                "enum": ["report", "refuse"],
                "default": "report",
                "description": "\"report\" (default): create, and list similar open issues in \
                                `similar`. \"refuse\": create nothing when an open issue's title \
                                is a near match (score 0.75 or more); the answer is then that \
                                issue with created=false. Needs issues:read.",
            },
        }),
        &["title"],
    )
}

/// search_issues's input: the query, list_issues's filter schemas (so a
/// filter is described once), and offset paging.
fn search_input() -> Value {
    let list = list_input();
    let mut properties = serde_json::Map::new();
    properties.insert(
        "query".to_owned(),
        json!({
            "type": "string",
            "minLength": 1,
            "maxLength": limits::SEARCH_QUERY_MAX_CHARS,
            "description": format!(
                "Words to find, e.g. \"login timeout\" or \"timeo*\": every word must occur in \
                 the title, body or a comment; word* matches as a prefix. 1-{} characters, at \
                 most {} words.",
                limits::SEARCH_QUERY_MAX_CHARS,
                limits::SEARCH_TERMS_MAX
            ),
        }),
    );
    for name in crate::args::FILTER_ARGS {
        if let Some(schema) = list["properties"].get(name) {
            properties.insert(name.to_owned(), schema.clone());
        }
    }
    properties.insert(
        "limit".to_owned(),
        json!({
            "type": "integer",
            "minimum": 1,
            "maximum": limits::SEARCH_LIMIT_MAX,
            "default": limits::SEARCH_LIMIT_DEFAULT,
            "description": format!(
                "Hits per answer, 1-{}; defaults to {}.",
                limits::SEARCH_LIMIT_MAX,
                limits::SEARCH_LIMIT_DEFAULT
            ),
        }),
    );
    properties.insert(
        "offset".to_owned(),
        json!({
            "type": "integer",
            "minimum": 0,
            "maximum": limits::SEARCH_DEPTH_MAX - 1,
            "default": 0,
            "description": format!(
                "The next_offset of the previous answer, to read the next hits; offset + limit \
                 at most {}.",
                limits::SEARCH_DEPTH_MAX
            ),
        }),
    );
    object(Value::Object(properties), &["query"])
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
            "priorities": {
                "type": "array",
                "items": {
                    "type": "string",
                    "enum": Priority::ALL.iter().map(|p| p.as_str()).collect::<Vec<_>>(),
                },
                "description": "Keep issues of any of these priorities. Omit for every priority.",
            },
            "updated_since": {
                "type": "string",
                "minLength": 1,
                "maxLength": 64,
                "description": "RFC 3339 time, e.g. 2026-01-31T12:00:00Z: keep issues changed \
                                (or created) at or after it.",
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

fn similar_schema() -> Value {
    json!({
        "type": "array",
        "description": "Open issues with titles like this one, most similar first; present for \
                        a run that may read issues (absent if the lookup failed).",
        "items": {
            "type": "object",
            "properties": {
                "id": { "type": "string" },
                "title": { "type": "string" },
                "state": { "type": "string", "enum": IssueState::names() },
                "score": {
                    "type": "number",
                    "minimum": 0,
                    "maximum": 1,
                    "description": "Share of title words in common; 0.75 or more is a near match.",
                },
            },
            "required": ["id", "title", "state", "score"],
        },
    })
}

/// create_issue's answer: the issue it filed (or, refused, the existing
/// near match), `replayed`, `created`, and optionally `similar`/`reason`.
fn create_output() -> Value {
    let mut schema = with_properties(
        issue_schema(),
        [
            ("replayed", replayed_schema("issue")),
            (
                "created",
                json!({
                    "type": "boolean",
                    "description": "True when this call (or the original call of a replay) \
                                    filed this issue; false when if_similar=\"refuse\" found a \
                                    near match: nothing was created and this is the existing issue.",
                }),
            ),
        ],
    );
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        properties.insert("similar".to_owned(), similar_schema());
        properties.insert(
            "reason".to_owned(),
            json!({
                "type": "string",
                "description": "Why nothing was created (only when created is false).",
            }),
        );
    }
    schema
}

fn search_output() -> Value {
    json!({
        "type": "object",
        "properties": {
            "hits": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "id": { "type": "string", "description": "iss_ followed by 26 characters." },
                        "title": { "type": "string" },
                        "state": { "type": "string", "enum": IssueState::names() },
                        "labels": { "type": "array", "items": { "type": "string" } },
                        "priority": {
                            "type": "string",
                            "enum": Priority::ALL.iter().map(|p| p.as_str()).collect::<Vec<_>>(),
                        },
                        "updated_at": { "type": "string", "description": "RFC 3339, UTC." },
                        "version": { "type": "integer", "minimum": 1 },
                        "comment_count": { "type": "integer", "minimum": 0 },
                        "score": {
                            "type": "number",
                            "description": "Higher is better; compare only within one answer.",
                        },
                        "field": { "type": "string", "enum": ["title", "body", "comment"] },
                        "comment": {
                            "type": ["string", "null"],
                            "description": "The comment the snippet is from (field comment).",
                        },
                        "snippet": {
                            "type": "string",
                            "description": "Excerpt of the best-matching field, matches in **.",
                        },
                    },
                    "required": [
                        "id", "title", "state", "labels", "priority", "updated_at", "version",
                        "comment_count", "score", "field", "comment", "snippet",
                    ],
                },
            },
            "next_offset": {
                "type": ["integer", "null"],
                "description": "Pass as offset for the next hits; null on the last page.",
            },
            "partial": {
                "type": "boolean",
                "description": "True when more issues matched than were ranked (the newest 1000): \
                                narrow the query.",
            },
        },
        "required": ["hits", "next_offset", "partial"],
    })
}

fn comment_output() -> Value {
    with_properties(
        issue_schema(),
        [
            ("comment", comment_schema("The comment this call added.")),
            ("replayed", replayed_schema("comment")),
        ],
    )
}

/// `issue_schema` cut down to `keep` (of which `required` are required):
/// the answer to a grant that may write but not read.
fn issue_fields(keep: &[&str], required: &[&str]) -> Value {
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

/// update_issue without `issues:read`: the issue's id, new version and
/// updated_at, and the fields this call set (as set), nothing else.
fn update_write_only_output() -> Value {
    issue_fields(
        &[
            "id",
            "version",
            "updated_at",
            "title",
            "body",
            "state",
            "labels",
            "priority",
        ],
        &["id", "version", "updated_at"],
    )
}

/// add_comment without `issues:read`: the issue's id, new version and
/// updated_at, the comment this call added and `replayed`; no body, no
/// other comments.
fn comment_write_only_output() -> Value {
    with_properties(
        issue_fields(
            &["id", "version", "updated_at"],
            &["id", "version", "updated_at"],
        ),
        [
            ("comment", comment_schema("The comment this call added.")),
            ("replayed", replayed_schema("comment")),
        ],
    )
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
        assert_eq!(
            names(&tool_set(&read)),
            ["list_issues", "get_issue", "search_issues"]
        );
        let write = Capabilities::parse_csv("issues:create,comments:write").unwrap();
        assert_eq!(names(&tool_set(&write)), ["create_issue", "add_comment"]);
        assert_eq!(
            names(&tool_set(&Capabilities::all())),
            [
                "list_issues",
                "get_issue",
                "create_issue",
                "update_issue",
                "add_comment",
                "search_issues"
            ]
        );
        assert!(Arc::ptr_eq(&tool_set(&read), &tool_set(&read)));
    }

    #[test]
    fn the_table_names_each_tool_once_and_says_which_write() {
        let names = BoardTool::names();
        assert_eq!(names.len(), BoardTool::ALL.len());
        for tool in BoardTool::ALL {
            assert_eq!(BoardTool::from_name(tool.name()), Some(*tool));
            assert_eq!(names.iter().filter(|n| **n == tool.name()).count(), 1);
        }
        let writing: Vec<&str> = BoardTool::ALL
            .iter()
            .filter(|t| t.writes())
            .map(|t| t.name())
            .collect();
        assert_eq!(writing, ["create_issue", "update_issue", "add_comment"]);
        // A tool that writes is never advertised as read-only.
        assert!(
            BoardTool::ALL
                .iter()
                .all(|t| !(t.writes() && t.spec().read_only))
        );
        assert_eq!(BoardTool::from_name("delete_board"), None);
    }

    #[test]
    fn every_capability_set_gets_one_shared_set() {
        let update = Capabilities::parse_csv("issues:update").unwrap();
        assert_eq!(names(&tool_set(&update)), ["update_issue"]);
        assert!(Arc::ptr_eq(&tool_set(&update), &tool_set(&update)));
        let all = Capabilities::all();
        assert!(Arc::ptr_eq(&tool_set(&all), &tool_set(&all)));
        assert_eq!(tool_set(&all).tools().len(), BoardTool::ALL.len());
    }

    #[test]
    fn the_vocabulary_comes_from_the_domain_and_the_table() {
        let v = vocabulary();
        assert_eq!(v["states"], json!(IssueState::names()));
        assert_eq!(
            v["capabilities"],
            json!([
                "issues:read",
                "issues:create",
                "issues:update",
                "comments:write"
            ])
        );
        assert_eq!(
            v["priorities"],
            json!(["none", "low", "medium", "high", "urgent"])
        );
        let tools: Vec<&str> = v["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(tools, BoardTool::names());
    }

    #[test]
    fn schemas_accept_exactly_what_the_parser_accepts() {
        use crate::args::{
            COMMENT_ARGS, CREATE_ARGS, GET_ARGS, LIST_ARGS, SEARCH_ARGS, UPDATE_ARGS,
        };
        let all = tool_set(&Capabilities::all());
        for (name, accepted) in [
            ("create_issue", &CREATE_ARGS[..]),
            ("get_issue", &GET_ARGS[..]),
            ("list_issues", &LIST_ARGS[..]),
            ("update_issue", &UPDATE_ARGS[..]),
            ("add_comment", &COMMENT_ARGS[..]),
            ("search_issues", &SEARCH_ARGS[..]),
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
        let search = all.get("search_issues").unwrap();
        assert_eq!(search.annotations.as_ref().unwrap()["readOnlyHint"], true);
        assert_eq!(
            search.input_schema["properties"]["states"], list.input_schema["properties"]["states"],
            "search takes its filter schemas from list_issues"
        );
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
