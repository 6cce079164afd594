//! The board's MCP tools (`list_issues`, `get_issue`, `create_issue`,
//! `update_issue`, `add_comment`, `claim_issue`, `release_issue`,
//! `search_issues`: the table in `defs`), served through
//! [`corkboard_mcp::ToolBackend`].
//!
//! [`BoardTools`] is the only place where an MCP request meets the board:
//! bearer tokens resolve to a grant
//! ([`ResolvedGrant`](corkboard_grants::ResolvedGrant)) through the one
//! credential path ([`resolve_bearer`](corkboard_grants::resolve_bearer));
//! it shows and
//! allows only the tools the grant's capabilities cover, parses arguments
//! into domain types, takes the tenant and author from the grant alone
//! (no tool has a tenant argument), bounds every store call with a timeout,
//! and leaves one [`AuditRecord`](corkboard_board::AuditRecord) per call.
//! Each tool is a row of the tool table (`defs`) and a file
//! (`tool/<name>.rs`: its arguments, its `run` and its schemas).
//! Every answer is projected (`view`: summaries, chosen fields, a window
//! of comments), rendered as text (`render`) and kept within one byte
//! budget (`result_budget`) in one place, whatever the store returned.
//!
//! In detail: The board as an MCP `ToolBackend`: the one tool table (`defs.rs`:
//! a `ToolSpec` row per tool with name, capability, hints, schemas, whether it
//! writes; tool sets built once per capability set; `vocabulary()` for
//! clients), a file per tool (`tool/<name>.rs`: its description, its argument
//! names and parser, its `run` and its input and output schemas;
//! `BoardTools::execute` in `service.rs` checks the capability and only
//! dispatches to the tool's `run`; argument parsers several tools share in
//! `tool/args.rs`, schema builders they share, the issue schema among them, in
//! `tool/schema.rs`), the server instructions sent in `initialize`
//! (`INSTRUCTIONS` in `service.rs`, checked against the table by a unit test),
//! capability checks, tenant pinning, error mapping ("board unavailable", "no
//! board in this run", conflicts), audit records, and the one shaping of every
//! answer: projection by field name (`view.rs`: list summaries, `fields`,
//! comment windows), the text block (`render.rs`) and the result byte budget
//! with its cutter (`result_budget.rs`: the size of one answer; "budget" alone
//! means a run's write budgets, which `BoardTools::budgeted` charges);
//! `get_issue` has the store read only its comment window (`CommentWindow` in
//! `services/board/src/window.rs`, bounded by the result budget in bytes),
//! writes and lists return whole issues.

#![forbid(unsafe_code)]

pub mod approvals;
mod defs;
mod error;
mod kept_answers;
mod provenance;
mod render;
mod result_budget;
mod service;
pub mod text;
mod tool;
mod view;

pub use approvals::{
    ApprovalEvents, ApprovalGate, COLLECT_TOOL, Collected, Gate, HoldPermit, HoldShares, LocalHolds,
};
pub use defs::{BoardTool, ToolSpec, grant_tool_set, tool_set, vocabulary};
pub use error::ToolsError;
pub use provenance::INTEGRITY_META;
pub use result_budget::{DEFAULT_RESULT_BUDGET, ENVELOPE_BYTES, MIN_RESULT_BUDGET};
pub use service::{BoardTools, DEFAULT_STORE_TIMEOUT, server_identity};
pub use text::{Screened, SecretPolicies, screen_arguments};
pub use view::{COMMENTS_DEFAULT, EXCERPT_CHARS, SELECTABLE_FIELDS};
