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

use crate::view::{COMMENTS_DEFAULT, EXCERPT_CHARS, SELECTABLE_FIELDS};
use corkboard_board::{
    BudgetKind, Budgets, Capabilities, Capability, CloseReason, Grant, IssueState, Priority,
    limits, relation_limits,
};
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
    ClaimIssue,
    ReleaseIssue,
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
    /// The per-run write budget a call takes from (a budgeted grant's
    /// `tools/list` says so in the tool's description).
    pub budget: Option<BudgetKind>,
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
        Self::ClaimIssue,
        Self::ReleaseIssue,
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
                budget: None,
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
                budget: None,
                input_schema: get_input,
                output_schema: view_schema,
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
                budget: Some(BudgetKind::CreateIssue),
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
                budget: Some(BudgetKind::UpdateIssue),
                input_schema: update_input,
                output_schema: issue_answer_schema,
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
                budget: Some(BudgetKind::AddComment),
                input_schema: comment_input,
                output_schema: comment_output,
                write_only_output_schema: Some(comment_write_only_output),
            },
            Self::ClaimIssue => ToolSpec {
                name: "claim_issue",
                title: "Claim issue",
                description: CLAIM_DESCRIPTION,
                capability: Capability::IssuesClaim,
                read_only: false,
                // Claiming one's own claim again changes nothing.
                idempotent: true,
                destructive: false,
                writes: true,
                issue_argument: Some("id"),
                budget: None,
                input_schema: claim_input,
                output_schema: issue_schema,
                write_only_output_schema: Some(claim_write_only_output),
            },
            Self::ReleaseIssue => ToolSpec {
                name: "release_issue",
                title: "Release issue",
                description: RELEASE_DESCRIPTION,
                capability: Capability::IssuesClaim,
                read_only: false,
                // A second release is refused ("not claimed") and changes
                // nothing, so repeating the call has the effect of one.
                idempotent: true,
                destructive: false,
                writes: true,
                issue_argument: Some("id"),
                budget: None,
                input_schema: release_input,
                output_schema: issue_schema,
                write_only_output_schema: Some(claim_write_only_output),
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
                budget: None,
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

/// Tool sets of budgeted grants, by capability mask and budgets: few
/// distinct combinations exist (orchestrators reuse theirs), so their
/// renderings are cached like the shared sets'; past the bound the cache
/// starts over rather than grow.
static BUDGETED_SETS: LazyLock<RwLock<BudgetedSets>> = LazyLock::new(Default::default);

/// Budgeted tool sets by capability mask and budgets.
type BudgetedSets = HashMap<(u64, Budgets), Arc<ToolSet>>;

/// Distinct budgeted tool sets kept at once.
const BUDGETED_SETS_MAX: usize = 1024;

/// The tool set `grant` sees: the shared set of its capabilities, or, when
/// it has budgets, a set whose budgeted tools add one sentence to their
/// description ("This run may create at most 3 issues.").
pub fn grant_tool_set(grant: &Grant) -> Arc<ToolSet> {
    let shared = tool_set(&grant.capabilities);
    if grant.budgets.is_empty() {
        return shared;
    }
    let key = (mask(&grant.capabilities), grant.budgets.clone());
    if let Some(set) = BUDGETED_SETS
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&key)
    {
        return Arc::clone(set);
    }
    let tools = shared
        .tools()
        .iter()
        .map(|def| {
            let mut def = def.clone();
            let limit = BoardTool::from_name(&def.name)
                .and_then(|tool| tool.spec().budget)
                .and_then(|kind| grant.budgets.limit(kind).map(|limit| (kind, limit)));
            if let Some((kind, limit)) = limit {
                def.description = format!(
                    "{} This run may {}.",
                    def.description,
                    kind.allowance(limit)
                );
            }
            def
        })
        .collect();
    let mut sets = BUDGETED_SETS
        .write()
        .unwrap_or_else(PoisonError::into_inner);
    if sets.len() >= BUDGETED_SETS_MAX {
        sets.clear();
    }
    Arc::clone(
        sets.entry(key)
            .or_insert_with(|| Arc::new(ToolSet::new(tools))),
    )
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
        "close_reasons": CloseReason::names(),
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
const COMMENT_ID_PATTERN: &str = "^cmt_[0-9A-HJKMNP-TV-Z]{26}$";

const LIST_DESCRIPTION: &str = "List issues on this run's board, newest first. Returns \
{issues, next_cursor, truncated}; each issue is a summary: id, title, state, labels, priority, \
author_run, claim (when claimed), updated_at, version, comment_count and an excerpt of the body \
(at most 160 characters; excerpt_cut=true when the body goes on). To see more, name it: \
`fields` adds fields by name (body, comments, created_at, author, ...), `include_body`=true \
gives the whole body, `include_comments`=N the latest N comments of each issue; or read one \
issue with get_issue. Filters combine with AND: `states` keeps issues in any of the given states; `labels` keeps \
issues carrying every given label (label_match \"all\", the default) or at least one of them \
(label_match \"any\"); `text` is a case-insensitive substring of the title; `author_run` keeps \
issues created by that run; `priorities` keeps issues of any of the given priorities; \
`updated_since` (RFC 3339) keeps issues changed at or after that time; `parent` keeps the sub-issues of one issue; `unclaimed: true` keeps \
work no run has claimed (use it, with states, to find work to take) and `claimed_by` the \
issues one run has claimed. Paging: a page holds at most `limit` issues (default 50, max 200). \
When next_cursor is a string, call list_issues again with the same filters and \
cursor=next_cursor for the next page; null means this was the last page. Budget: one result \
is at most about 8,000 tokens (32,000 bytes by default, set by the board's operator); a page \
that would be larger holds fewer issues, and then `truncated` says how many were left out and \
next_cursor continues right after the last issue shown, so nothing is skipped. To find issues \
by words in their body or comments, use search_issues.";

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
author_run, priorities, updated_since, parent, unclaimed, claimed_by) combine with the query as in list_issues. Paging: \
`limit` hits per answer (default 10, max 50); when next_offset is a number, call again with the \
same arguments and offset=next_offset; offset + limit may not exceed 1000 (narrow the query \
instead). partial=true means more issues matched than the board ranks (only the newest 1000 \
matches were ranked): add words or filters. The answer stays within the result budget (about \
8,000 tokens), like every answer. Search here before creating an issue.";

const GET_DESCRIPTION: &str = "Read one issue: every field, with its latest comments \
(10 unless `comments_limit` says otherwise, oldest first) and `comment_count`. When older \
comments exist, `older_comments` counts them and `comments_cursor` is a comment id: call \
get_issue again with comments_before=comments_cursor for the ones before it, until \
comments_cursor is null. `id` is an issue id exactly as create_issue or list_issues returned \
it: iss_ followed by 26 characters, e.g. iss_01JD3Z9Q4X8M2N6P7R5S1T0V9W; never shorten or \
retype it from memory. The result's `version` is the value update_issue's expected_version \
wants. Budget: one result is at most about 8,000 tokens (32,000 bytes by default); an answer \
that would be larger keeps the newest comments (then `truncated` says how many more are older \
and comments_cursor reaches them) and a body too long for one answer is cut with \
`body_truncated`, whose next_offset you pass as body_offset for the rest. It also shows the \
relations: `parent`, `duplicate_of`, `blocked_by`, and the inverse ones other issues hold to \
it, `children` (its sub-issues) and `blocks` (issues waiting on it), each listing at most 100 \
(more_children / more_blocks say when there are more); `claim` names the run working on it. \
An unknown id is an error that says so.";

const CREATE_DESCRIPTION: &str = "Create an issue on this run's board and return it, with its \
new id (iss_ followed by 26 characters) and version 1. Only `title` is required; state \
defaults to inbox, priority to none, labels to none. The issue is recorded as written by this \
run. Pass an `idempotency_key` (a fresh unique string per intended issue, e.g. a UUID) \
whenever you might retry: resending the same arguments with the same key returns the \
original issue with replayed=true instead of a duplicate, and reusing a key with different \
arguments is refused. Relations: `parent` makes it a sub-issue, `blocked_by` lists issues \
that must be finished first (at most 50), `duplicate_of` names the original; every id must \
be an issue of this board. The answer has `created` (true when this call filed the issue) and, for \
a run that may read issues, `similar`: up to 5 open issues (not done or closed) whose titles are \
most like this one, each {id, title, state, score} with score the share of title words they \
have in common (0-1; 0.75 or more is a near match). Pass if_similar=\"refuse\" to file only \
when no open issue is a near match: then, if one is, NOTHING is created and the answer is that \
existing issue with created=false, `reason` saying why and `similar` listing the near matches; \
work on it (add_comment, update_issue) instead of filing again. A retry with the same \
idempotency_key always returns the original issue, whatever is similar now. Search \
(search_issues) first so you do not file an issue that exists. The answer, like every answer, \
stays within the result budget (about 8,000 tokens).";

const UPDATE_DESCRIPTION: &str = "Change an issue's title, body, state, labels or priority and \
return the updated issue with its new version (a run that may not read issues gets only the \
id, version, updated_at and the fields it set). Omitted fields stay as they are; `labels` \
replaces the whole label set. Pass `expected_version`, the version you last read (from \
get_issue, list_issues or your previous update): if the issue changed since, nothing is \
written and the error gives its current version. Then re-read it with get_issue, check that \
your change still makes sense, and retry with expected_version set to the current version. \
Without expected_version the update applies unconditionally and may overwrite someone \
else's change. Closing: set state to done or closed, with `close_reason` completed (the \
default), not_planned, or duplicate (then also set duplicate_of to the original's id); \
closing ends any claim. Reopen by setting an open state: the close reason is cleared. \
Relations: `parent` and `duplicate_of` take an issue id, or \"\" to remove them; \
`blocked_by` replaces the whole list ([] removes all). A parent that would make an issue its \
own ancestor is refused. The answer carries the latest 10 comments (comment_count and \
comments_cursor as in get_issue) and stays within the result budget (about 8,000 tokens).";

const CLAIM_DESCRIPTION: &str = "Claim an issue for this run before you start working on it, so \
no other agent takes the same work. Exactly one of several runs claiming at once gets it; the \
others get an error naming the run that holds it (not retryable: pick other work, e.g. \
list_issues with unclaimed=true). Claiming an issue you already hold succeeds and changes \
nothing. Only open issues (not done or closed) can be claimed. The claim lasts until you call \
release_issue, the issue is closed, or this run ends (its grant is revoked or expires): then \
the issue goes back to the pool. Returns the issue with its `claim` and new version.";

const RELEASE_DESCRIPTION: &str = "Give back an issue this run claimed, when you stop working on \
it without finishing (closing it with update_issue ends the claim by itself). Refused when \
another run holds the claim or nobody does. Returns the issue with `claim` null and its new \
version.";

const COMMENT_DESCRIPTION: &str = "Add a comment to an issue. Returns the issue with its \
latest 10 comments (comment_count and comments_cursor as in get_issue; the answer stays within \
the result budget of about 8,000 tokens), the new `comment`, and `replayed` (a run that may not read issues gets only the \
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
            "parent": issue_id_schema("Make it a sub-issue of this issue."),
            "duplicate_of": issue_id_schema("The original issue this one duplicates."),
            "blocked_by": blocked_by_schema("Issues that must be finished before this one."),
            "close_reason": close_reason_schema(),
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
        json!({
            "id": issue_id_schema("The issue to read."),
            "comments_before": {
                "type": "string",
                "pattern": COMMENT_ID_PATTERN,
                "minLength": 30,
                "maxLength": 30,
                "description": "The comments_cursor of an earlier get_issue answer for this \
                                issue, unchanged: the answer then holds the comments before \
                                that one. Omit for the latest comments.",
            },
            "comments_limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": limits::COMMENTS_MAX,
                "default": COMMENTS_DEFAULT,
                "description": format!(
                    "Most comments in the answer, 1-{}; defaults to {COMMENTS_DEFAULT}. The \
                     result budget may hold fewer (then `truncated` says so).",
                    limits::COMMENTS_MAX
                ),
            },
            "body_offset": {
                "type": "integer",
                "minimum": 0,
                "maximum": limits::BODY_MAX_BYTES,
                "default": 0,
                "description": "Start the body at this byte: the next_offset of an earlier \
                                answer's body_truncated, unchanged, to read the rest of a body \
                                too long for one answer.",
            },
        }),
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
            "fields": {
                "type": "array",
                "items": { "type": "string", "enum": SELECTABLE_FIELDS },
                "uniqueItems": true,
                "description": "Fields to add to each summary, by name; a field an issue \
                                does not have is left out. \"body\" replaces the excerpt with \
                                the whole body, \"comments\" adds every comment.",
            },
            "include_body": {
                "type": "boolean",
                "default": false,
                "description": "true: each issue's whole body instead of the excerpt.",
            },
            "include_comments": {
                "type": "integer",
                "minimum": 0,
                "maximum": limits::COMMENTS_MAX,
                "description": "Add each issue's latest N comments (with older_comments and \
                                comments_cursor for get_issue). Omit for none.",
            },
            "parent": issue_id_schema("Keep the sub-issues of this issue."),
            "unclaimed": {
                "type": "boolean",
                "description": "true: keep issues no run has claimed (work free to take).",
            },
            "claimed_by": {
                "type": "string",
                "minLength": 1,
                "maxLength": 128,
                "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]*$",
                "description": "Keep issues claimed by this run id.",
            },
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
            "expected_version": version_schema(),
            "parent": relation_id_schema("New parent issue; \"\" removes the parent."),
            "duplicate_of": relation_id_schema("The original this duplicates; \"\" removes it."),
            "blocked_by": blocked_by_schema(
                "New list of blocking issues; replaces the old one entirely. [] removes all."
            ),
            "close_reason": close_reason_schema(),
        }),
        &["id"],
    )
}

fn relation_id_schema(description: &str) -> Value {
    json!({
        "type": "string",
        "pattern": "^(iss_[0-9A-HJKMNP-TV-Z]{26})?$",
        "maxLength": 30,
        "description": format!("{description} Example: {ID_EXAMPLE}."),
    })
}

fn blocked_by_schema(description: &str) -> Value {
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

fn close_reason_schema() -> Value {
    json!({
        "type": "string",
        "enum": CloseReason::names(),
        "description": "Why the issue is finished; only with state done or closed (default \
                        completed). duplicate needs duplicate_of.",
    })
}

fn version_schema() -> Value {
    json!({
        "type": "integer",
        "minimum": 1,
        "description": "The issue's version as you last read it. If the issue has \
                        changed since, nothing is written and the error gives the \
                        current version.",
    })
}

fn claim_input() -> Value {
    object(
        json!({
            "id": issue_id_schema("The issue to claim."),
            "expected_version": version_schema(),
        }),
        &["id"],
    )
}

fn release_input() -> Value {
    object(
        json!({
            "id": issue_id_schema("The issue to give back."),
            "expected_version": version_schema(),
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
            "comment_count": {
                "type": "integer",
                "minimum": 0,
                "description": "Comments the issue has, shown or not.",
            },
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
fn issue_answer_schema() -> Value {
    let mut schema = issue_schema();
    if let Some(Value::Array(required)) = schema.get_mut("required") {
        for name in ["comment_count", "older_comments", "comments_cursor"] {
            required.push(Value::from(name));
        }
    }
    schema
}

/// What a cut to fit the result budget left out (absent or null: nothing).
fn truncated_schema(what: &str) -> Value {
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

fn body_truncated_schema() -> Value {
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

/// One issue of a list page: the summary, plus the fields asked for.
/// Open to new properties, like the issue.
fn summary_schema() -> Value {
    let full = issue_schema();
    let mut properties = full["properties"].as_object().cloned().unwrap_or_default();
    properties.remove("tenant");
    for (name, property) in [
        (
            "author_run",
            json!({ "type": "string", "description": "The run that created the issue." }),
        ),
        (
            "excerpt",
            json!({
                "type": "string",
                "description": format!(
                    "The start of the body on one line, at most {EXCERPT_CHARS} characters; \
                     ends with … when cut."
                ),
            }),
        ),
        (
            "excerpt_cut",
            json!({
                "type": "boolean",
                "description": "true when the body goes on past the excerpt: pass \
                                include_body=true or call get_issue for all of it.",
            }),
        ),
    ] {
        properties.insert(name.to_owned(), property);
    }
    json!({
        "type": "object",
        "properties": properties,
        "required": [
            "id", "title", "state", "labels", "priority", "author_run", "updated_at",
            "version", "comment_count",
        ],
    })
}

fn claim_schema() -> Value {
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

/// get_issue: the issue and the relations other issues hold to it.
fn view_schema() -> Value {
    let ids = |description: &str| json!({ "type": "array", "items": { "type": "string" }, "description": description });
    with_properties(
        issue_answer_schema(),
        [
            (
                "children",
                ids("Sub-issues (issues whose parent this is), newest first."),
            ),
            ("more_children", json!({ "type": "boolean" })),
            ("blocks", ids("Issues blocked by this one, newest first.")),
            ("more_blocks", json!({ "type": "boolean" })),
        ],
    )
}

/// claim_issue / release_issue without `issues:read`: the id, new
/// version, updated_at and the claim.
fn claim_write_only_output() -> Value {
    issue_fields(
        &["id", "version", "updated_at", "claim"],
        &["id", "version", "updated_at", "claim"],
    )
}

fn list_output() -> Value {
    json!({
        "type": "object",
        "properties": {
            "issues": { "type": "array", "items": summary_schema() },
            "next_cursor": {
                "type": ["string", "null"],
                "description": "Pass as cursor for the next page; null on the last page.",
            },
            "truncated": truncated_schema("issues"),
        },
        "required": ["issues", "next_cursor", "truncated"],
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
        issue_answer_schema(),
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
            "truncated": truncated_schema("hits"),
        },
        "required": ["hits", "next_offset", "partial"],
    })
}

fn comment_output() -> Value {
    with_properties(
        issue_answer_schema(),
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
            "parent",
            "duplicate_of",
            "blocked_by",
            "close_reason",
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

    #[test]
    fn a_budgeted_grant_sees_its_budgets_in_the_descriptions_and_others_share_one_set() {
        let now = corkboard_board::Timestamp::now();
        let mut grant = Grant {
            id: corkboard_board::GrantId::generate(),
            tenant: corkboard_board::TenantId::parse("acme").unwrap(),
            run: corkboard_board::RunId::parse("r1").unwrap(),
            capabilities: Capabilities::all(),
            created_at: now,
            expires_at: now.plus_millis(60_000),
            created_by: "test".into(),
            budgets: Budgets::new(),
        };
        // Unbudgeted: the shared set itself (the fast path).
        assert!(Arc::ptr_eq(
            &grant_tool_set(&grant),
            &tool_set(&grant.capabilities)
        ));
        grant.budgets = Budgets::parse_csv("create_issue=3,add_comment=1").unwrap();
        let set = grant_tool_set(&grant);
        let description = |name: &str| set.get(name).unwrap().description.clone();
        assert!(
            description("create_issue").ends_with(" This run may create at most 3 issues."),
            "{}",
            description("create_issue")
        );
        assert!(description("add_comment").ends_with(" This run may add at most 1 comment."));
        assert_eq!(
            description("update_issue"),
            BoardTool::UpdateIssue.spec().description,
            "an unbudgeted tool is unchanged"
        );
        // The same budgets again: the cached set, rendered once.
        assert!(Arc::ptr_eq(&set, &grant_tool_set(&grant)));
    }

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
                "claim_issue",
                "release_issue",
                "search_issues"
            ]
        );
        let claim = Capabilities::parse_csv("issues:read,issues:claim").unwrap();
        assert_eq!(
            names(&tool_set(&claim)),
            [
                "list_issues",
                "get_issue",
                "claim_issue",
                "release_issue",
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
        assert_eq!(
            writing,
            [
                "create_issue",
                "update_issue",
                "add_comment",
                "claim_issue",
                "release_issue"
            ]
        );
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
                "comments:write",
                "issues:claim"
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
            CLAIM_ARGS, COMMENT_ARGS, CREATE_ARGS, GET_ARGS, LIST_ARGS, SEARCH_ARGS, UPDATE_ARGS,
        };
        let all = tool_set(&Capabilities::all());
        for (name, accepted) in [
            ("create_issue", &CREATE_ARGS[..]),
            ("get_issue", &GET_ARGS[..]),
            ("list_issues", &LIST_ARGS[..]),
            ("update_issue", &UPDATE_ARGS[..]),
            ("add_comment", &COMMENT_ARGS[..]),
            ("claim_issue", &CLAIM_ARGS[..]),
            ("release_issue", &CLAIM_ARGS[..]),
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
