//! The board domain: what an issue, a comment, a grant, an audit record and
//! a tenant's upstream MCP server are,
//! how their fields are validated, and the traits every store implements.
//!
//! This crate does no IO. Everything that crosses a boundary (HTTP, MCP, a
//! database) is parsed into these types first ("parse, don't validate"), so a
//! value of type [`TenantId`] or [`Title`] is valid by construction and the
//! stores never need to check it again.

#![forbid(unsafe_code)]

mod audit;
mod error;
mod grant;
mod ids;
mod issue;
mod store;
mod timestamp;
mod upstream;

pub use audit::{ArgumentsHash, AuditOutcome, AuditQuery, AuditRecord};
pub use error::{StoreError, ValidationError};
pub use grant::{Capabilities, Capability, Grant, GrantEvent, GrantStatus, parse_ttl};
pub use ids::{CommentId, GrantId, IdempotencyKey, IssueId, RunId, TenantId};
pub use issue::{
    Author, Body, Comment, CommentAdded, CommentBody, Created, Issue, IssuePatch, IssueState,
    Label, LabelFilter, Labels, ListQuery, NewComment, NewIssue, Page, Priority, Title, limits,
};
pub use store::{AuditLog, BoardStore, GrantLedger, IssueStore, StoreHealth, UpstreamStore};
pub use timestamp::Timestamp;
pub use upstream::{
    HeaderName, SealedCredential, UPSTREAM_NAME_MAX, UPSTREAM_URL_MAX, UPSTREAMS_PER_TENANT_MAX,
    Upstream, UpstreamName, UpstreamPattern, UpstreamUrl,
};
