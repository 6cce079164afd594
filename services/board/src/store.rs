//! The traits every board store implements (SQLite, MongoDB). The contract
//! they must meet is written down as a test suite that runs against each.

use crate::audit::{AuditEntry, AuditQuery, AuditRecord};
use crate::error::StoreError;
use crate::grant::{BudgetKind, Grant, GrantEvent, GrantPolicy};
use crate::ids::{DeliveryId, GrantId, IdempotencyKey, IssueId, RunId, TenantId, WebhookId};
use crate::issue::Title;
use crate::issue::{
    Author, CommentAdded, Created, Issue, IssuePatch, ListQuery, NewComment, NewIssue, Page,
};
use crate::relations::{Claimant, IssueView};
use crate::search::{CreateOutcome, SearchPage, SearchQuery, SimilarIssue};
use crate::timestamp::Timestamp;
use crate::upstream::{Upstream, UpstreamName};
use crate::webhook::{AttemptOutcome, ClaimedDelivery, NewWebhook, Webhook, WebhookWithStatus};
use crate::window::CommentWindow;
use async_trait::async_trait;

/// Issues and comments of every tenant. Every method takes the tenant
/// explicitly; callers take it from the resolved grant, never from input.
#[async_trait]
pub trait IssueStore: Send + Sync + 'static {
    /// Creates an issue. With a key, a replay of the same request by the same
    /// run returns the original issue (`replayed: true`) and a different
    /// request under the same key is [`StoreError::IdempotencyConflict`].
    /// Relations must name issues of `tenant` ([`StoreError::UnknownRelated`]
    /// otherwise; another tenant's id reads exactly like a missing one).
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
    /// [`StoreError::VersionConflict`] and nothing is written. The lifecycle
    /// rules are [`IssuePatch::apply_to`]'s; relations are checked as on
    /// create, and a parent that would form a cycle is
    /// [`StoreError::RelationCycle`].
    async fn update_issue(
        &self,
        tenant: &TenantId,
        id: &IssueId,
        patch: IssuePatch,
        expected_version: Option<u64>,
    ) -> Result<Issue, StoreError>;

    /// The issue with the relations other issues hold to it (children,
    /// the issues it blocks), read in one snapshot, carrying only the
    /// comments `window` selects ([`CommentWindow::cut`] defines which);
    /// [`IssueView::comment_facts`] counts the rest. The store reads the
    /// window, not every comment: an issue may hold
    /// [`COMMENTS_MAX`](crate::limits::COMMENTS_MAX) comments of 64 KiB.
    /// An unknown `before` is no error here (`before_found: false`, no
    /// comments): the caller words it. Another tenant's issue reads as
    /// missing.
    async fn get_issue_view(
        &self,
        tenant: &TenantId,
        id: &IssueId,
        window: &CommentWindow,
    ) -> Result<IssueView, StoreError>;

    /// Gives an open issue to `claimant`'s run, atomically: of many racing
    /// claimants exactly one wins, the others get [`StoreError::Claimed`]
    /// naming the winner. Claiming one's own claim again is a success that
    /// changes nothing. A claim whose grant has expired or been revoked
    /// counts as none and is taken over. Bumps the version.
    async fn claim_issue(
        &self,
        tenant: &TenantId,
        id: &IssueId,
        claimant: &Claimant,
        expected_version: Option<u64>,
    ) -> Result<Issue, StoreError>;

    /// Ends `run`'s claim on the issue (bumping the version). Refused with
    /// [`StoreError::Claimed`] when another run holds it and
    /// [`StoreError::NotClaimed`] when nobody does.
    async fn release_issue(
        &self,
        tenant: &TenantId,
        id: &IssueId,
        run: &RunId,
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

    /// Ranked full-text search over titles, bodies and comments, with the
    /// list filters (see `corkboard_board::search` for what matches and how
    /// hits rank). Sees every write that has returned.
    async fn search_issues(
        &self,
        tenant: &TenantId,
        query: &SearchQuery,
    ) -> Result<SearchPage, StoreError>;

    /// The open issues (states other than done and closed) whose titles are
    /// most like `title`, most similar first, at most `limit`
    /// (`1..=SIMILAR_LIMIT_MAX`); only issues sharing a word with it.
    async fn similar_open_issues(
        &self,
        tenant: &TenantId,
        title: &Title,
        limit: u32,
    ) -> Result<Vec<SimilarIssue>, StoreError>;

    /// Whether `run` already used `key` for a create (`comment: false`) or
    /// a comment (`comment: true`) on `tenant`'s board: a repeat under it is
    /// answered from that record and writes nothing (a replay, or an
    /// idempotency conflict). Lets a run whose write budget is spent still
    /// get the original result of a write it retries. The default answers
    /// `false`: a store that cannot tell refuses such a repeat, never lets
    /// a write through.
    async fn idempotency_key_used(
        &self,
        _tenant: &TenantId,
        _run: &RunId,
        _key: &IdempotencyKey,
        _comment: bool,
    ) -> Result<bool, StoreError> {
        Ok(false)
    }

    /// [`Self::create_issue`], unless an open issue is a near match for the
    /// new title: then nothing is written and the near matches come back.
    /// A replay of an earlier create under `key` is answered as a replay
    /// whatever is similar now.
    async fn create_issue_unless_similar(
        &self,
        tenant: &TenantId,
        author: &Author,
        new: NewIssue,
        key: Option<&IdempotencyKey>,
    ) -> Result<CreateOutcome, StoreError>;
}

/// The durable record of grants: who created and revoked what, and when.
#[async_trait]
pub trait GrantLedger: Send + Sync + 'static {
    async fn record_grant(&self, grant: &Grant, token_hash: &str) -> Result<(), StoreError>;

    /// Marks a grant revoked (first revocation wins) and returns its record.
    /// Every claim made under the grant ends with it (in the same
    /// transaction where the store has one; else right after, and a claim
    /// attempt takes over a claim whose grant is revoked meanwhile).
    async fn record_revocation(
        &self,
        id: &GrantId,
        by: &str,
        at: Timestamp,
    ) -> Result<GrantEvent, StoreError>;

    /// Moves a live grant's expiry to `expires_at` (renewal), atomically
    /// with the check that it is live: a grant revoked, or expired at
    /// `now`, is left unchanged. Returns the record as it is afterwards, so
    /// the caller tells a renewal from a refusal by its status and expiry.
    async fn record_expiry(
        &self,
        id: &GrantId,
        expires_at: Timestamp,
        now: Timestamp,
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

    /// The tenant's own grant settings (all unset when it has none).
    async fn grant_policy(&self, tenant: &TenantId) -> Result<GrantPolicy, StoreError>;

    /// Replaces the tenant's grant settings (durable once acknowledged).
    async fn set_grant_policy(
        &self,
        tenant: &TenantId,
        policy: &GrantPolicy,
    ) -> Result<(), StoreError>;

    /// Every grant neither revoked nor expired at `now`, to rebuild a registry.
    async fn active_grants(&self, now: Timestamp) -> Result<Vec<GrantEvent>, StoreError>;

    /// Every revoked grant that has not expired at `now`: the revocations a
    /// shared registry must hold to be trusted (replayed into a Redis that
    /// may have lost writes; the token hash is what it is keyed by).
    async fn revoked_grants(&self, now: Timestamp) -> Result<Vec<GrantEvent>, StoreError>;

    /// Takes one write of `kind` from grant `id`'s budget of `limit` in one
    /// conditional write (never read-then-write, so racing callers on any
    /// replica take at most `limit` in all): `true` when fewer than `limit`
    /// had been taken (now one more has), `false` when the budget is spent
    /// (nothing changed). Durable once acknowledged.
    async fn reserve_budget(
        &self,
        id: &GrantId,
        kind: BudgetKind,
        limit: u32,
    ) -> Result<bool, StoreError>;

    /// Gives back one write taken by [`Self::reserve_budget`] that did not
    /// happen (never below zero).
    async fn release_budget(&self, id: &GrantId, kind: BudgetKind) -> Result<(), StoreError>;

    /// Writes taken per kind from grant `id`'s budgets (kinds never taken
    /// are left out).
    async fn budget_used(
        &self,
        id: &GrantId,
    ) -> Result<std::collections::BTreeMap<BudgetKind, u32>, StoreError>;
}

/// Append-only audit trail.
#[async_trait]
pub trait AuditLog: Send + Sync + 'static {
    /// Appends `entries`, each at most once: an entry whose id the store
    /// already holds counts as written. Writing the same entries again
    /// after a write whose outcome is unknown therefore duplicates nothing.
    async fn append_audit_entries(&self, entries: &[AuditEntry]) -> Result<(), StoreError>;

    /// Appends `records`, each under a fresh id (for callers that never
    /// write the same records twice).
    async fn append_audit(&self, records: &[AuditRecord]) -> Result<(), StoreError> {
        let entries: Vec<AuditEntry> = records.iter().cloned().map(AuditEntry::new).collect();
        self.append_audit_entries(&entries).await
    }

    async fn list_audit(
        &self,
        tenant: &TenantId,
        query: &AuditQuery,
    ) -> Result<Vec<AuditRecord>, StoreError>;
}

/// Webhook endpoints and the durable outbox of their deliveries.
///
/// Deliveries are queued by the store itself, inside the board writes that
/// cause them (issue created, updated, closed, commented; a grant recorded
/// is a run started, its first revocation a run ended), for every endpoint
/// of the write's tenant subscribed to the event, so only a tenant's own
/// events reach its endpoints. What "inside" means is each store's to say:
/// SQLite writes them in the same transaction as the board write; MongoDB
/// inserts them after the board write and before acknowledging it (a crash
/// between the two loses those deliveries, never a write).
#[async_trait]
pub trait WebhookStore: Send + Sync + 'static {
    /// Registers an endpoint; refused past
    /// [`ENDPOINTS_PER_TENANT_MAX`](crate::webhook::limits::ENDPOINTS_PER_TENANT_MAX).
    async fn create_webhook(
        &self,
        tenant: &TenantId,
        new: &NewWebhook,
        at: Timestamp,
    ) -> Result<Webhook, StoreError>;

    /// The tenant's endpoints with their delivery status, oldest first.
    async fn list_webhooks(&self, tenant: &TenantId) -> Result<Vec<WebhookWithStatus>, StoreError>;

    /// Removes an endpoint and its undelivered deliveries.
    async fn delete_webhook(&self, tenant: &TenantId, id: &WebhookId) -> Result<(), StoreError>;

    /// Up to `limit` deliveries due at `now` (not delivered, not given up,
    /// next attempt due, no live lease), oldest first, each leased until
    /// `now + lease` so no other worker takes it meanwhile.
    async fn claim_deliveries(
        &self,
        now: Timestamp,
        lease: std::time::Duration,
        limit: u32,
    ) -> Result<Vec<ClaimedDelivery>, StoreError>;

    /// Records an attempt: delivered, or failed and due again after
    /// [`retry_delay`](crate::webhook::retry_delay), or given up after the
    /// last attempt. Releases the lease.
    async fn record_attempt(
        &self,
        id: &DeliveryId,
        outcome: &AttemptOutcome,
    ) -> Result<(), StoreError>;
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
pub trait BoardStore:
    IssueStore + GrantLedger + AuditLog + WebhookStore + UpstreamStore + StoreHealth
{
}

impl<T: IssueStore + GrantLedger + AuditLog + WebhookStore + UpstreamStore + StoreHealth> BoardStore
    for T
{
}
