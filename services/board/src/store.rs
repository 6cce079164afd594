//! The traits every board store implements (SQLite, MongoDB). The contract
//! they must meet is written down as a test suite that runs against each.

use crate::audit::{AuditQuery, AuditRecord};
use crate::error::StoreError;
use crate::grant::{Grant, GrantEvent};
use crate::ids::{GrantId, IdempotencyKey, IssueId, RunId, TenantId};
use crate::issue::{
    Author, CommentAdded, Created, Issue, IssuePatch, ListQuery, NewComment, NewIssue, Page,
};
use crate::timestamp::Timestamp;
use crate::upstream::{Upstream, UpstreamName};
use async_trait::async_trait;

/// Issues and comments of every tenant. Every method takes the tenant
/// explicitly; callers take it from the resolved grant, never from input.
#[async_trait]
pub trait IssueStore: Send + Sync + 'static {
    /// Creates an issue. With a key, a replay of the same request by the same
    /// run returns the original issue (`replayed: true`) and a different
    /// request under the same key is [`StoreError::IdempotencyConflict`].
    async fn create_issue(
        &self,
        tenant: &TenantId,
        author: &Author,
        new: NewIssue,
        key: Option<&IdempotencyKey>,
    ) -> Result<Created, StoreError>;

    async fn get_issue(&self, tenant: &TenantId, id: &IssueId) -> Result<Issue, StoreError>;

    async fn list_issues(&self, tenant: &TenantId, query: &ListQuery) -> Result<Page, StoreError>;

    /// Applies `patch`. With `expected_version`, a stale version is a
    /// [`StoreError::VersionConflict`] and nothing is written.
    async fn update_issue(
        &self,
        tenant: &TenantId,
        id: &IssueId,
        patch: IssuePatch,
        expected_version: Option<u64>,
    ) -> Result<Issue, StoreError>;

    /// Adds a comment, idempotently under `key` like [`Self::create_issue`].
    async fn add_comment(
        &self,
        tenant: &TenantId,
        author: &Author,
        comment: NewComment,
        key: Option<&IdempotencyKey>,
    ) -> Result<CommentAdded, StoreError>;
}

/// The durable record of grants: who created and revoked what, and when.
#[async_trait]
pub trait GrantLedger: Send + Sync + 'static {
    async fn record_grant(&self, grant: &Grant, token_hash: &str) -> Result<(), StoreError>;

    /// Marks a grant revoked (first revocation wins) and returns its record.
    async fn record_revocation(
        &self,
        id: &GrantId,
        by: &str,
        at: Timestamp,
    ) -> Result<GrantEvent, StoreError>;

    async fn grant(&self, id: &GrantId) -> Result<GrantEvent, StoreError>;

    /// The grant whose token hashes to `token_hash` (hex SHA-256), if any,
    /// revoked or not: the ledger doubles as the registry of local runs.
    async fn grant_by_token_hash(&self, token_hash: &str)
    -> Result<Option<GrantEvent>, StoreError>;

    /// Grants of a tenant, newest first, after `cursor` (a grant id).
    async fn list_grants(
        &self,
        tenant: &TenantId,
        run: Option<&RunId>,
        cursor: Option<&GrantId>,
        limit: u32,
    ) -> Result<Vec<GrantEvent>, StoreError>;

    /// Every grant neither revoked nor expired at `now`, to rebuild a registry.
    async fn active_grants(&self, now: Timestamp) -> Result<Vec<GrantEvent>, StoreError>;

    /// Every revoked grant that has not expired at `now`: the revocations a
    /// shared registry must hold to be trusted (replayed into a Redis that
    /// may have lost writes; the token hash is what it is keyed by).
    async fn revoked_grants(&self, now: Timestamp) -> Result<Vec<GrantEvent>, StoreError>;
}

/// Append-only audit trail.
#[async_trait]
pub trait AuditLog: Send + Sync + 'static {
    async fn append_audit(&self, records: &[AuditRecord]) -> Result<(), StoreError>;

    async fn list_audit(
        &self,
        tenant: &TenantId,
        query: &AuditQuery,
    ) -> Result<Vec<AuditRecord>, StoreError>;
}

/// A tenant's upstream MCP servers (their credentials sealed).
#[async_trait]
pub trait UpstreamStore: Send + Sync + 'static {
    /// Records `upstream`, replacing one of the same tenant and name (a
    /// new URL or credential is a whole new record, never half of one).
    /// A tenant that already has
    /// [`UPSTREAMS_PER_TENANT_MAX`](crate::UPSTREAMS_PER_TENANT_MAX) other
    /// upstreams is refused with [`StoreError::Invalid`] naming the limit.
    async fn put_upstream(&self, upstream: &Upstream) -> Result<(), StoreError>;

    /// The tenant's upstreams, by name.
    async fn list_upstreams(&self, tenant: &TenantId) -> Result<Vec<Upstream>, StoreError>;

    /// Removes one; [`StoreError::NotFound`] when there is none.
    async fn delete_upstream(
        &self,
        tenant: &TenantId,
        name: &UpstreamName,
    ) -> Result<(), StoreError>;
}

/// Whether the store answers right now (for `/readyz`).
#[async_trait]
pub trait StoreHealth: Send + Sync + 'static {
    async fn check(&self) -> Result<(), StoreError>;
}

/// A complete board store.
pub trait BoardStore: IssueStore + GrantLedger + AuditLog + UpstreamStore + StoreHealth {}

impl<T: IssueStore + GrantLedger + AuditLog + UpstreamStore + StoreHealth> BoardStore for T {}
