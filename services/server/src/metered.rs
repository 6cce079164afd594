//! A store decorator that times every operation into the Prometheus
//! metrics, so every store backend is measured the same way without
//! knowing about metrics. Its forwarding is generated from the store
//! traits' one method list (`corkboard_board::decorate_store!`).

use corkboard_board::{BoardStore, StoreDecorator, StoreError};
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
}

/// The `op` label of a store method. Three methods keep the label they had
/// before they got their own names, so dashboards keep their series.
fn op_label(method: &'static str) -> &'static str {
    match method {
        "get_issue_view" | "get_issue_view_since" => "get_issue",
        "append_audit_entries" => "append_audit",
        other => other,
    }
}

impl StoreDecorator for MeteredStore {
    type Inner = dyn BoardStore;

    fn inner(&self) -> Result<&Self::Inner, StoreError> {
        Ok(&*self.inner)
    }

    async fn around<'a, T: Send + 'a>(
        &'a self,
        op: &'static str,
        call: impl Future<Output = Result<T, StoreError>> + Send + 'a,
    ) -> Result<T, StoreError> {
        let started = Instant::now();
        let result = call.await;
        // Not-found and conflicts are answers, not store failures.
        let ok = !matches!(
            result,
            Err(StoreError::Unavailable { .. } | StoreError::Internal(_))
        );
        self.metrics
            .store_operation(op_label(op), ok, started.elapsed());
        result
    }
}

corkboard_board::decorate_store!(
    MeteredStore: IssueStore,
    GrantLedger,
    AuditLog,
    WebhookStore,
    UpstreamStore,
    StoreHealth
);
