//! A store decorator that times every operation into the Prometheus
//! metrics, so every store backend is measured the same way without
//! knowing about metrics.

use async_trait::async_trait;
use corkboard_board::{
    AuditEntry, AuditLog, AuditQuery, AuditRecord, Author, BoardStore, Claimant, CommentAdded,
    CommentWindow, Created, Grant, GrantEvent, GrantId, GrantLedger, GrantPolicy, IdempotencyKey,
    Issue, IssueId, IssuePatch, IssueStore, IssueView, ListQuery, NewComment, NewIssue, Page,
    RunId, StoreError, StoreHealth, TenantId, Timestamp, Upstream, UpstreamName, UpstreamStore,
};
use corkboard_board::{CreateOutcome, SearchPage, SearchQuery, SimilarIssue, Title};
use corkboard_telemetry::Metrics;
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

pub struct MeteredStore {
    inner: Arc<dyn BoardStore>,
    metrics: Metrics,
}

impl std::fmt::Debug for MeteredStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MeteredStore").finish_non_exhaustive()
    }
}

impl MeteredStore {
    pub fn new(inner: Arc<dyn BoardStore>, metrics: Metrics) -> Self {
        Self { inner, metrics }
    }

    async fn timed<T>(
        &self,
        op: &'static str,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let started = Instant::now();
        let result = call.await;
        // Not-found and conflicts are answers, not store failures.
        let ok = !matches!(
            result,
            Err(StoreError::Unavailable { .. } | StoreError::Internal(_))
        );
        self.metrics.store_operation(op, ok, started.elapsed());
        result
    }
}

#[async_trait]
impl IssueStore for MeteredStore {
    async fn idempotency_key_used(
        &self,
        tenant: &TenantId,
        run: &corkboard_board::RunId,
        key: &corkboard_board::IdempotencyKey,
        comment: bool,
    ) -> Result<bool, StoreError> {
        self.timed(
            "idempotency_key_used",
            self.inner.idempotency_key_used(tenant, run, key, comment),
        )
        .await
    }

    async fn create_issue(
        &self,
        tenant: &TenantId,
        author: &Author,
        new: NewIssue,
        key: Option<&IdempotencyKey>,
    ) -> Result<Created, StoreError> {
        self.timed(
            "create_issue",
            self.inner.create_issue(tenant, author, new, key),
        )
        .await
    }

    async fn get_issue(&self, tenant: &TenantId, id: &IssueId) -> Result<Issue, StoreError> {
        self.timed("get_issue", self.inner.get_issue(tenant, id))
            .await
    }

    async fn list_issues(&self, tenant: &TenantId, query: &ListQuery) -> Result<Page, StoreError> {
        self.timed("list_issues", self.inner.list_issues(tenant, query))
            .await
    }

    async fn update_issue(
        &self,
        tenant: &TenantId,
        id: &IssueId,
        patch: IssuePatch,
        expected_version: Option<u64>,
    ) -> Result<Issue, StoreError> {
        self.timed(
            "update_issue",
            self.inner.update_issue(tenant, id, patch, expected_version),
        )
        .await
    }

    async fn get_issue_view(
        &self,
        tenant: &TenantId,
        id: &IssueId,
        window: &CommentWindow,
    ) -> Result<IssueView, StoreError> {
        self.timed("get_issue", self.inner.get_issue_view(tenant, id, window))
            .await
    }

    async fn claim_issue(
        &self,
        tenant: &TenantId,
        id: &IssueId,
        claimant: &Claimant,
        expected_version: Option<u64>,
    ) -> Result<Issue, StoreError> {
        self.timed(
            "claim_issue",
            self.inner
                .claim_issue(tenant, id, claimant, expected_version),
        )
        .await
    }

    async fn release_issue(
        &self,
        tenant: &TenantId,
        id: &IssueId,
        run: &RunId,
        expected_version: Option<u64>,
    ) -> Result<Issue, StoreError> {
        self.timed(
            "release_issue",
            self.inner.release_issue(tenant, id, run, expected_version),
        )
        .await
    }

    async fn add_comment(
        &self,
        tenant: &TenantId,
        author: &Author,
        comment: NewComment,
        key: Option<&IdempotencyKey>,
    ) -> Result<CommentAdded, StoreError> {
        self.timed(
            "add_comment",
            self.inner.add_comment(tenant, author, comment, key),
        )
        .await
    }

    async fn search_issues(
        &self,
        tenant: &TenantId,
        query: &SearchQuery,
    ) -> Result<SearchPage, StoreError> {
        self.timed("search_issues", self.inner.search_issues(tenant, query))
            .await
    }

    async fn similar_open_issues(
        &self,
        tenant: &TenantId,
        title: &Title,
        limit: u32,
    ) -> Result<Vec<SimilarIssue>, StoreError> {
        self.timed(
            "similar_open_issues",
            self.inner.similar_open_issues(tenant, title, limit),
        )
        .await
    }

    async fn create_issue_unless_similar(
        &self,
        tenant: &TenantId,
        author: &Author,
        new: NewIssue,
        key: Option<&IdempotencyKey>,
    ) -> Result<CreateOutcome, StoreError> {
        self.timed(
            "create_issue_unless_similar",
            self.inner
                .create_issue_unless_similar(tenant, author, new, key),
        )
        .await
    }
}

#[async_trait]
impl GrantLedger for MeteredStore {
    async fn record_grant(&self, grant: &Grant, token_hash: &str) -> Result<(), StoreError> {
        self.timed("record_grant", self.inner.record_grant(grant, token_hash))
            .await
    }

    async fn record_revocation(
        &self,
        id: &GrantId,
        by: &str,
        at: Timestamp,
    ) -> Result<GrantEvent, StoreError> {
        self.timed(
            "record_revocation",
            self.inner.record_revocation(id, by, at),
        )
        .await
    }

    async fn record_expiry(
        &self,
        id: &GrantId,
        expires_at: Timestamp,
        now: Timestamp,
    ) -> Result<GrantEvent, StoreError> {
        self.timed(
            "record_expiry",
            self.inner.record_expiry(id, expires_at, now),
        )
        .await
    }

    async fn grant_policy(&self, tenant: &TenantId) -> Result<GrantPolicy, StoreError> {
        self.timed("grant_policy", self.inner.grant_policy(tenant))
            .await
    }

    async fn set_grant_policy(
        &self,
        tenant: &TenantId,
        policy: &GrantPolicy,
    ) -> Result<(), StoreError> {
        self.timed(
            "set_grant_policy",
            self.inner.set_grant_policy(tenant, policy),
        )
        .await
    }

    async fn reserve_budget(
        &self,
        id: &GrantId,
        kind: corkboard_board::BudgetKind,
        limit: u32,
    ) -> Result<bool, StoreError> {
        self.timed("reserve_budget", self.inner.reserve_budget(id, kind, limit))
            .await
    }

    async fn release_budget(
        &self,
        id: &GrantId,
        kind: corkboard_board::BudgetKind,
    ) -> Result<(), StoreError> {
        self.timed("release_budget", self.inner.release_budget(id, kind))
            .await
    }

    async fn budget_used(
        &self,
        id: &GrantId,
    ) -> Result<std::collections::BTreeMap<corkboard_board::BudgetKind, u32>, StoreError> {
        self.timed("budget_used", self.inner.budget_used(id)).await
    }

    async fn grant(&self, id: &GrantId) -> Result<GrantEvent, StoreError> {
        self.timed("grant", self.inner.grant(id)).await
    }

    async fn grant_by_token_hash(
        &self,
        token_hash: &str,
    ) -> Result<Option<GrantEvent>, StoreError> {
        self.timed(
            "grant_by_token_hash",
            self.inner.grant_by_token_hash(token_hash),
        )
        .await
    }

    async fn list_grants(
        &self,
        tenant: &TenantId,
        run: Option<&RunId>,
        cursor: Option<&GrantId>,
        limit: u32,
    ) -> Result<Vec<GrantEvent>, StoreError> {
        self.timed(
            "list_grants",
            self.inner.list_grants(tenant, run, cursor, limit),
        )
        .await
    }

    async fn active_grants(&self, now: Timestamp) -> Result<Vec<GrantEvent>, StoreError> {
        self.timed("active_grants", self.inner.active_grants(now))
            .await
    }

    async fn revoked_grants(&self, now: Timestamp) -> Result<Vec<GrantEvent>, StoreError> {
        self.timed("revoked_grants", self.inner.revoked_grants(now))
            .await
    }
}

#[async_trait]
impl AuditLog for MeteredStore {
    async fn append_audit_entries(&self, entries: &[AuditEntry]) -> Result<(), StoreError> {
        self.timed("append_audit", self.inner.append_audit_entries(entries))
            .await
    }

    async fn list_audit(
        &self,
        tenant: &TenantId,
        query: &AuditQuery,
    ) -> Result<Vec<AuditRecord>, StoreError> {
        self.timed("list_audit", self.inner.list_audit(tenant, query))
            .await
    }
}

#[async_trait]
impl UpstreamStore for MeteredStore {
    async fn put_upstream(&self, upstream: &Upstream) -> Result<(), StoreError> {
        self.timed("put_upstream", self.inner.put_upstream(upstream))
            .await
    }

    async fn list_upstreams(&self, tenant: &TenantId) -> Result<Vec<Upstream>, StoreError> {
        self.timed("list_upstreams", self.inner.list_upstreams(tenant))
            .await
    }

    async fn delete_upstream(
        &self,
        tenant: &TenantId,
        name: &UpstreamName,
    ) -> Result<(), StoreError> {
        self.timed("delete_upstream", self.inner.delete_upstream(tenant, name))
            .await
    }
}

#[async_trait]
impl StoreHealth for MeteredStore {
    async fn check(&self) -> Result<(), StoreError> {
        self.timed("check", self.inner.check()).await
    }
}

#[async_trait]
impl corkboard_board::WebhookStore for MeteredStore {
    async fn create_webhook(
        &self,
        tenant: &TenantId,
        new: &corkboard_board::NewWebhook,
        at: Timestamp,
    ) -> Result<corkboard_board::Webhook, StoreError> {
        self.timed("create_webhook", self.inner.create_webhook(tenant, new, at))
            .await
    }

    async fn list_webhooks(
        &self,
        tenant: &TenantId,
    ) -> Result<Vec<corkboard_board::WebhookWithStatus>, StoreError> {
        self.timed("list_webhooks", self.inner.list_webhooks(tenant))
            .await
    }

    async fn delete_webhook(
        &self,
        tenant: &TenantId,
        id: &corkboard_board::WebhookId,
    ) -> Result<(), StoreError> {
        self.timed("delete_webhook", self.inner.delete_webhook(tenant, id))
            .await
    }

    async fn claim_deliveries(
        &self,
        now: Timestamp,
        lease: std::time::Duration,
        limit: u32,
    ) -> Result<Vec<corkboard_board::ClaimedDelivery>, StoreError> {
        self.timed(
            "claim_deliveries",
            self.inner.claim_deliveries(now, lease, limit),
        )
        .await
    }

    async fn record_attempt(
        &self,
        id: &corkboard_board::DeliveryId,
        outcome: &corkboard_board::AttemptOutcome,
    ) -> Result<(), StoreError> {
        self.timed("record_attempt", self.inner.record_attempt(id, outcome))
            .await
    }
}
