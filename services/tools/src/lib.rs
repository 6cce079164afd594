//! The board's MCP tools: `create_issue`, `get_issue`, `list_issues`,
//! `update_issue` and `add_comment`, served through
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
//! Every answer is projected (`view`: summaries, chosen fields, a window
//! of comments), rendered as text (`render`) and kept within one byte
//! budget (`budget`) in one place, whatever the store returned.

#![forbid(unsafe_code)]

mod args;
mod budget;
mod defs;
mod error;
mod render;
mod service;
mod view;

pub use budget::{DEFAULT_RESULT_BUDGET, ENVELOPE_BYTES, MIN_RESULT_BUDGET};
pub use defs::{BoardTool, ToolSpec, grant_tool_set, tool_set, vocabulary};
pub use error::ToolsError;
pub use service::{BoardTools, DEFAULT_STORE_TIMEOUT, server_identity};
pub use view::{COMMENTS_DEFAULT, EXCERPT_CHARS, SELECTABLE_FIELDS};
