//! The tool table: one [`ToolSpec`] per board tool (name, title,
//! description written for a model, capability, annotations, input and
//! output schemas, whether it changes an issue and which argument names the
//! issue), and everything derived from it: `tools/list` per capability set,
//! [`BoardTool::names`] (the tool vocabulary of spans and metrics, handed to
//! telemetry by the binary), [`BoardTool::writes`] (live board events) and
//! [`vocabulary`] (what the web page and test clients read).
//!
//! Adding a tool: a [`BoardTool`] variant with its row in
//! [`BoardTool::spec`] and its place in [`BoardTool::ALL`], its file
//! `tool/<name>.rs` (description, arguments and parser, `run`, schemas),
//! its `mod` line in `tool/mod.rs` and its dispatch line in
//! `BoardTools::execute` (`service.rs`); nothing outside this crate lists
//! tool names.
//!
//! Definitions are built once per process, and so is each tool set a
//! capability set selects (on first use): `tools/list` and every call only
//! clone an `Arc`, and the transport's cached wire rendering inside each
//! [`ToolSet`] is reused across requests and runs.

use crate::tool::{
    add_comment, board_stats, claim_issue, claim_next, collect_approval, create_issue,
    create_issues, get_issue, list_issues, release_issue, search_issues, update_issue,
};
use corkboard_board::{
    BudgetKind, Budgets, Capabilities, Capability, CloseReason, Grant, IssueState, Priority,
};
use corkboard_mcp::{ResultOrigin, ToolDef, ToolSet};
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
    ClaimNext,
    CreateIssues,
    BoardStats,
    CollectApproval,
}

/// Everything the product says about one tool: its row of the tool table.
#[derive(Debug, Clone, Copy)]
pub struct ToolSpec {
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    /// The capability a grant needs to see and call the tool; none: every
    /// grant sees it (collecting an approval, whatever tool it was for).
    pub capability: Option<Capability>,
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
        Self::ClaimNext,
        Self::CreateIssues,
        Self::BoardStats,
        Self::CollectApproval,
    ];

    /// The tool table.
    pub const fn spec(self) -> ToolSpec {
        match self {
            Self::ListIssues => ToolSpec {
                name: "list_issues",
                title: "List issues",
                description: list_issues::DESCRIPTION,
                capability: Some(Capability::IssuesRead),
                read_only: true,
                idempotent: true,
                destructive: false,
                writes: false,
                issue_argument: None,
                budget: None,
                input_schema: list_issues::input_schema,
                output_schema: list_issues::output_schema,
                write_only_output_schema: None,
            },
            Self::GetIssue => ToolSpec {
                name: "get_issue",
                title: "Get issue",
                description: get_issue::DESCRIPTION,
                capability: Some(Capability::IssuesRead),
                read_only: true,
                idempotent: true,
                destructive: false,
                writes: false,
                issue_argument: Some("id"),
                budget: None,
                input_schema: get_issue::input_schema,
                output_schema: get_issue::output_schema,
                write_only_output_schema: None,
            },
            Self::CreateIssue => ToolSpec {
                name: "create_issue",
                title: "Create issue",
                description: create_issue::DESCRIPTION,
                capability: Some(Capability::IssuesCreate),
                read_only: false,
                // Creating twice creates twice unless the caller passes a
                // key, so the hint must be false: the hint describes the
                // tool, not one call.
                idempotent: false,
                destructive: false,
                writes: true,
                issue_argument: None,
                budget: Some(BudgetKind::CreateIssue),
                input_schema: create_issue::input_schema,
                output_schema: create_issue::output_schema,
                write_only_output_schema: Some(create_issue::write_only_output_schema),
            },
            Self::UpdateIssue => ToolSpec {
                name: "update_issue",
                title: "Update issue",
                description: update_issue::DESCRIPTION,
                capability: Some(Capability::IssuesUpdate),
                read_only: false,
                idempotent: true,
                destructive: false,
                writes: true,
                issue_argument: Some("id"),
                budget: Some(BudgetKind::UpdateIssue),
                input_schema: update_issue::input_schema,
                output_schema: update_issue::output_schema,
                write_only_output_schema: Some(update_issue::write_only_output_schema),
            },
            Self::AddComment => ToolSpec {
                name: "add_comment",
                title: "Add comment",
                description: add_comment::DESCRIPTION,
                capability: Some(Capability::CommentsWrite),
                read_only: false,
                idempotent: false,
                destructive: false,
                writes: true,
                issue_argument: Some("id"),
                budget: Some(BudgetKind::AddComment),
                input_schema: add_comment::input_schema,
                output_schema: add_comment::output_schema,
                write_only_output_schema: Some(add_comment::write_only_output_schema),
            },
            Self::ClaimIssue => ToolSpec {
                name: "claim_issue",
                title: "Claim issue",
                description: claim_issue::DESCRIPTION,
                capability: Some(Capability::IssuesClaim),
                read_only: false,
                // Claiming one's own claim again changes nothing.
                idempotent: true,
                destructive: false,
                writes: true,
                issue_argument: Some("id"),
                budget: Some(BudgetKind::ClaimIssue),
                input_schema: claim_issue::input_schema,
                output_schema: claim_issue::output_schema,
                write_only_output_schema: Some(claim_issue::write_only_output_schema),
            },
            Self::ReleaseIssue => ToolSpec {
                name: "release_issue",
                title: "Release issue",
                description: release_issue::DESCRIPTION,
                capability: Some(Capability::IssuesClaim),
                read_only: false,
                // A second release is refused ("not claimed") and changes
                // nothing, so repeating the call has the effect of one.
                idempotent: true,
                destructive: false,
                writes: true,
                issue_argument: Some("id"),
                budget: Some(BudgetKind::ReleaseIssue),
                input_schema: release_issue::input_schema,
                output_schema: release_issue::output_schema,
                write_only_output_schema: Some(release_issue::write_only_output_schema),
            },
            Self::SearchIssues => ToolSpec {
                name: "search_issues",
                title: "Search issues",
                description: search_issues::DESCRIPTION,
                capability: Some(Capability::IssuesRead),
                read_only: true,
                idempotent: true,
                destructive: false,
                writes: false,
                issue_argument: None,
                budget: None,
                input_schema: search_issues::input_schema,
                output_schema: search_issues::output_schema,
                write_only_output_schema: None,
            },
            Self::ClaimNext => ToolSpec {
                name: "claim_next",
                title: "Claim next issue",
                description: claim_next::DESCRIPTION,
                capability: Some(Capability::IssuesClaim),
                read_only: false,
                // Each call takes another issue.
                idempotent: false,
                destructive: false,
                writes: true,
                issue_argument: None,
                // A claim like claim_issue's, from the same budget.
                budget: Some(BudgetKind::ClaimIssue),
                input_schema: claim_next::input_schema,
                output_schema: claim_next::output_schema,
                write_only_output_schema: Some(claim_next::write_only_output_schema),
            },
            Self::CreateIssues => ToolSpec {
                name: "create_issues",
                title: "Create issues",
                description: create_issues::DESCRIPTION,
                capability: Some(Capability::IssuesCreate),
                read_only: false,
                // Like create_issue: idempotent only item by item, with keys.
                idempotent: false,
                destructive: false,
                writes: true,
                issue_argument: None,
                // Each item takes one create from the budget.
                budget: Some(BudgetKind::CreateIssue),
                input_schema: create_issues::input_schema,
                output_schema: create_issues::output_schema,
                // Answers only what each item wrote (its id and title).
                write_only_output_schema: None,
            },
            Self::BoardStats => ToolSpec {
                name: "board_stats",
                title: "Board stats",
                description: board_stats::DESCRIPTION,
                capability: Some(Capability::IssuesRead),
                read_only: true,
                idempotent: true,
                destructive: false,
                writes: false,
                issue_argument: None,
                budget: None,
                input_schema: board_stats::input_schema,
                output_schema: board_stats::output_schema,
                write_only_output_schema: None,
            },
            Self::CollectApproval => ToolSpec {
                name: "collect_approval",
                title: "Collect approval",
                description: collect_approval::DESCRIPTION,
                capability: None,
                read_only: false,
                // Runs the approved call once: a second collect is refused.
                idempotent: false,
                destructive: false,
                // The approved call it runs may change an issue.
                writes: true,
                issue_argument: None,
                budget: None,
                input_schema: collect_approval::input_schema,
                output_schema: collect_approval::output_schema,
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

    /// The capability a grant needs to see and call this tool (none: every
    /// grant may).
    pub fn capability(self) -> Option<Capability> {
        self.spec().capability
    }

    /// Whether a successful call changes an issue (see [`ToolSpec::writes`]).
    pub fn writes(self) -> bool {
        self.spec().writes
    }

    /// The free-text arguments this tool writes to the board, which are
    /// cleaned and screened for credentials first (`text.rs`).
    pub fn text_fields(self) -> &'static [&'static str] {
        match self {
            Self::CreateIssue | Self::UpdateIssue => &["title", "body"],
            Self::AddComment => &["body"],
            _ => &[],
        }
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
            results: ResultOrigin::Typed,
        }
    }
}

/// Every tool's definition, built once, in [`BoardTool::ALL`] order: as a
/// grant with `issues:read` sees it, and as one without does.
static DEFINITIONS: LazyLock<Vec<(Option<Capability>, ToolDef, ToolDef)>> = LazyLock::new(|| {
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
                .filter(|(cap, _, _)| cap.is_none_or(|cap| capabilities.allows(cap)))
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
                "capability": spec.capability.map(Capability::as_str),
                "read_only": spec.read_only,
                "writes": spec.writes,
            })
        }).collect::<Vec<_>>(),
    })
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
            min_integrity: None,
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
            [
                "list_issues",
                "get_issue",
                "search_issues",
                "board_stats",
                "collect_approval"
            ]
        );
        let write = Capabilities::parse_csv("issues:create,comments:write").unwrap();
        assert_eq!(
            names(&tool_set(&write)),
            [
                "create_issue",
                "add_comment",
                "create_issues",
                "collect_approval"
            ]
        );
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
                "search_issues",
                "claim_next",
                "create_issues",
                "board_stats",
                "collect_approval"
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
                "search_issues",
                "claim_next",
                "board_stats",
                "collect_approval"
            ]
        );
        // Collecting an approval is for every grant, whatever its
        // capabilities (an upstream-only grant's calls may await one).
        assert_eq!(
            names(&tool_set(
                &Capabilities::parse_csv("upstream:github:*").unwrap()
            )),
            ["collect_approval"]
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
                "release_issue",
                "claim_next",
                "create_issues",
                "collect_approval"
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
        assert_eq!(
            names(&tool_set(&update)),
            ["update_issue", "collect_approval"]
        );
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
        let all = tool_set(&Capabilities::all());
        for (name, accepted) in [
            ("create_issue", &create_issue::ARGS[..]),
            ("get_issue", &get_issue::ARGS[..]),
            ("list_issues", &list_issues::ARGS[..]),
            ("update_issue", &update_issue::ARGS[..]),
            ("add_comment", &add_comment::ARGS[..]),
            ("claim_issue", &claim_issue::ARGS[..]),
            ("release_issue", &release_issue::ARGS[..]),
            ("search_issues", &search_issues::ARGS[..]),
            ("claim_next", &claim_next::ARGS[..]),
            ("create_issues", &create_issues::ARGS[..]),
            ("board_stats", &board_stats::ARGS[..]),
            ("collect_approval", &collect_approval::ARGS[..]),
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

    /// The board's schemas are valid JSON Schema 2020-12 (checked against
    /// the meta-schema by the validator that also checks their values),
    /// for readers and for write-only grants alike.
    #[test]
    fn every_schema_is_valid_json_schema_2020_12() {
        let all = tool_set(&Capabilities::all());
        let write_only = Capabilities::parse_csv("issues:create,issues:update,comments:write")
            .expect("capabilities");
        for set in [all, tool_set(&write_only)] {
            for tool in set.tools() {
                assert_eq!(
                    corkboard_mcp::check_tool_definition(tool),
                    Ok(()),
                    "{}",
                    tool.name
                );
            }
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
