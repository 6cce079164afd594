//! Where agent writes become live events: an [`AuditSink`] decorator that
//! publishes [`BoardEvent::IssueChanged`] for every successful tool call
//! the tool table marks as writing.

use super::{BoardEvent, BoardEvents};
use corkboard_board::AuditRecord;
use corkboard_board::AuditSink;
use std::fmt;
use std::sync::Arc;

/// An [`AuditSink`] that forwards every record to `inner`, then publishes
/// [`BoardEvent::IssueChanged`] for each successful call of a tool that
/// writes (`create_issue`, `update_issue`, `add_comment`; see
/// [`BoardEvent::from_audit`]): the one place where agent writes turn into
/// live updates.
pub struct EventPublishingSink<S: AuditSink + ?Sized> {
    inner: Arc<S>,
    events: Arc<dyn BoardEvents>,
}

impl<S: AuditSink + ?Sized> EventPublishingSink<S> {
    pub fn new(inner: Arc<S>, events: Arc<dyn BoardEvents>) -> Self {
        Self { inner, events }
    }
}

impl<S: AuditSink + ?Sized> fmt::Debug for EventPublishingSink<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventPublishingSink")
            .field("events", &self.events)
            .finish_non_exhaustive()
    }
}

impl<S: AuditSink + ?Sized> AuditSink for EventPublishingSink<S> {
    fn record(&self, record: AuditRecord) {
        // Most calls are reads and publish nothing: the tenant is copied
        // only for an event.
        match BoardEvent::from_audit(&record) {
            Some(event) => {
                let tenant = record.tenant.clone();
                self.inner.record(record);
                self.events.publish(&tenant, event);
            }
            None => self.inner.record(record),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::web::MemoryEvents;
    use crate::web::events::testing::{issue_id, next, tenant};
    use corkboard_board::MemoryAuditSink;
    use corkboard_board::{ArgumentsHash, AuditOutcome, GrantId, IssueId, RunId, Timestamp};
    use futures_util::StreamExt;
    use std::time::Duration;

    #[actix_rt::test]
    async fn the_sink_forwards_every_record_and_publishes_successful_writes() {
        let bus = Arc::new(MemoryEvents::new());
        let inner = Arc::new(MemoryAuditSink::new());
        let sink = EventPublishingSink::new(inner.clone(), bus.clone());
        let mut events = bus.subscribe(&tenant("acme"));
        let record = |tool: &str, outcome, issue: Option<IssueId>| AuditRecord {
            at: Timestamp::now(),
            tenant: tenant("acme"),
            run: RunId::parse("r1").unwrap(),
            grant: GrantId::generate(),
            tool: tool.into(),
            outcome,
            latency_micros: 1,
            arguments_hash: ArgumentsHash::of(b"{}"),
            definition_hash: None,
            issue,
        };
        let read = issue_id();
        let denied = issue_id();
        let written = issue_id();
        sink.record(record("get_issue", AuditOutcome::Ok, Some(read)));
        sink.record(record("update_issue", AuditOutcome::Denied, Some(denied)));
        sink.record(record("list_issues", AuditOutcome::Ok, None));
        sink.record(record(
            "add_comment",
            AuditOutcome::Ok,
            Some(written.clone()),
        ));
        assert_eq!(
            inner.records().len(),
            4,
            "every record reaches the inner sink"
        );
        assert_eq!(
            next(&mut events).await,
            BoardEvent::IssueChanged {
                id: written,
                version: None
            }
        );
        assert!(
            tokio::time::timeout(Duration::from_millis(50), events.next())
                .await
                .is_err()
        );
    }
}
