//! The board domain: what an issue, a comment, a grant, an audit record and
//! a tenant's upstream MCP server are,
//! how their fields are validated, and the traits every store implements.
//!
//! This crate does no IO. Everything that crosses a boundary (HTTP, MCP, a
//! database) is parsed into these types first ("parse, don't validate"), so a
//! value of type [`TenantId`] or [`Title`] is valid by construction and the
//! stores never need to check it again.
//!
//! In detail: The domain: ids (`TenantId`, `RunId`, `IssueId`, ...), issues,
//! comments, relations, close reasons and claims (`relations.rs`: the rules
//! both stores share, e.g. the bounded parent-chain walk `ParentChain` and the
//! claim decision `ClaimCheck`), the comment window an issue read returns
//! (`window.rs`: `CommentWindow`, `CommentFacts`; each store reads only the
//! window), grants, audit records, validation limits (and `parse_ttl`, the one
//! duration syntax of grant lifetimes), per-run write budgets (`Budgets`,
//! `BudgetKind`: limits per write tool, set when a grant is issued, capped by a
//! tenant's `GrantPolicy::run_budgets`), the error vocabulary (`error_code.rs`:
//! `Code`, the stable code of every API refusal and its one HTTP status, and
//! the `ErrorCode` trait each crate's error implements), the audit sink
//! (`audit_sink.rs`: `AuditSink`, where every served call hands its record),
//! and the store traits (**API boundary**, generated with the forwarding
//! decorators from one method list in `store.rs`, `decorate_store!` +
//! `StoreDecorator`: `IssueStore`, `GrantLedger` (grants, tenant settings and
//! the budget counts of the embedded counter: one conditional write per
//! reservation), `AuditLog`, `WebhookStore` (endpoints and the durable outbox
//! that board writes fill), `StoreHealth`; `BoardStore` = all five;
//! `StoreError` with `Unavailable` (retryable) and `NotConfigured` (no board at
//! all), `QueryTooSlow` and `TenantBusy` (the bounds on expensive reads,
//! `reads.rs`: which reads are expensive, their deadline, each tenant's
//! share)); clean text (`clean.rs`: invisible characters, escapes
//! and HTML comments stripped, credentials found); pinned upstream tool definitions (`pin.rs`: `ToolPin`,
//! `DefinitionHash`, what a listing and an approval change); webhooks (`webhook.rs`: the event enum, endpoints, the
//! signature scheme, retry backoff); the work queue (`queue.rs`: ready work,
//! its order, `ClaimNext`, claim leases); the history of changes (`history.rs`:
//! `Change`, `FieldChange`, what each write records); provenance
//! (`integrity.rs`: `Integrity`, the level of every author and issue, and
//! the rules of a grant's floor)

#![forbid(unsafe_code)]

mod approval;
mod audit;
mod audit_sink;
mod clean;
mod digest;
mod error;
mod error_code;
mod grant;
mod history;
mod ids;
mod integrity;
mod issue;
mod pin;
mod queue;
mod reads;
mod relations;
mod search;
mod store;
mod timestamp;
mod upstream;
pub mod webhook;
mod window;

pub use approval::{
    APPROVAL_POLICIES_MAX, APPROVAL_REASON_MAX, APPROVAL_TTL_DEFAULT_SECS, ApprovalId,
    ApprovalItem, ApprovalPolicies, ApprovalPolicy, ApprovalRefusal, ApprovalStatus, ArgumentMatch,
    Decision, ToolMatch, arguments_digest,
};
pub use audit::{ArgumentsHash, AuditEntry, AuditId, AuditOutcome, AuditQuery, AuditRecord};
pub use audit_sink::{AuditSink, MemoryAuditSink, NoopAuditSink};
pub use clean::{
    FoundSecret, Removed, SecretPolicy, clean as clean_text, find_secrets, is_invisible,
    redact_secrets,
};
pub use error::{StoreError, ValidationError};
pub use error_code::{Code, ErrorCode};
pub use grant::{
    BudgetKind, BudgetStatus, Budgets, Capabilities, Capability, Grant, GrantEvent, GrantPolicy,
    GrantStatus, parse_ttl,
};
pub use history::{Change, ChangeKind, FieldChange, HistoryPage, diff, history_limits, run_author};
pub use ids::{
    CommentId, DeliveryId, GrantId, IdempotencyKey, IssueId, RunId, TenantId, WebhookId,
};
pub use integrity::Integrity;
pub use issue::{
    Author, AuthorKind, Body, Comment, CommentAdded, CommentBody, CommentCounts, Created, Issue,
    IssuePatch, IssueState, Label, LabelFilter, Labels, ListQuery, NewComment, NewIssue, Page,
    PageCommentBytes, PageComments, Priority, Title, limits,
};
pub use pin::{
    DefinitionHash, FIRST_LISTING, PINNED_FIELDS, TOOL_DEFINITION_MAX, ToolApproval, ToolPin,
    ToolSighting, approve as approve_tool_pin, canonical as canonical_json,
    observe as observe_tool_pins, pinned_definition,
};
pub use queue::{
    BoardStats, ClaimNext, ExpiredClaim, LabelCount, StatsPart, is_ready, queue_limits,
    ready_order, stale_window,
};
pub use reads::{ExpensiveReads, ReadCost, Share};
pub use relations::{
    BlockedBy, Claim, ClaimCheck, ClaimFilter, Claimant, CloseReason, IssueView, ParentChain,
    ViewSince, check_hand_over, check_release, relation_limits,
};
pub use search::{
    CreateOutcome, IssueTerms, MONGO_CANDIDATES_MAX, MatchField, NEAR_MATCH, SearchHit, SearchPage,
    SearchQuery, SearchText, SimilarIssue, SimilarRanking, Term, is_open, normalized, rank_order,
    rank_similar, term_set, title_similarity, tokens,
};
pub use store::{
    AuditLog, BoardStore, GrantLedger, IssueStore, StoreDecorator, StoreHealth, UpstreamStore,
    WebhookStore,
};

/// The store traits' macros ([`decorate_store!`]) expand to `async_trait`
/// impls; this path lets them name it without their users depending on it.
#[doc(hidden)]
pub use async_trait::async_trait as __async_trait;
pub use timestamp::Timestamp;
pub use upstream::{
    HeaderName, SealedCredential, UPSTREAM_NAME_MAX, UPSTREAM_URL_MAX, UPSTREAMS_PER_TENANT_MAX,
    Upstream, UpstreamName, UpstreamPattern, UpstreamUrl,
};
pub use webhook::{
    AttemptOutcome, ClaimedDelivery, DueDelivery, NewWebhook, Webhook, WebhookEvent, WebhookEvents,
    WebhookSecret, WebhookStatus, WebhookUrl, WebhookWithStatus,
};
pub use window::{CommentFacts, CommentWindow};
