//! Live board events: what changed on a tenant's board, fanned out to every
//! open page through Server-Sent Events.
//!
//! Events only say *what* changed (an issue id, "grants changed"); pages
//! re-fetch through the API, so an event carries nothing a subscriber could
//! not read anyway and a lost event costs at most a stale view until the
//! next one. Losses are made explicit with [`BoardEvent::Resync`] (a lagging
//! subscriber, a Redis subscription that was down) and pages re-fetch
//! everything when they see it or when their stream reconnects.
//!
//! This module holds the event type and the [`BoardEvents`] bus trait;
//! backends: [`MemoryEvents`] (`memory.rs`: one process,
//! `tokio::sync::broadcast`) and [`RedisEvents`] (`redis.rs`: every
//! replica, Redis pub/sub on `{prefix}board-events:{tenant}`, one pattern
//! subscription per process feeding a local [`MemoryEvents`]). Agent writes
//! become events in [`EventPublishingSink`] (`audit.rs`).

mod audit;
mod memory;
mod redis;

pub use audit::EventPublishingSink;
pub use memory::MemoryEvents;
pub use redis::{RedisEvents, RedisEventsConfig};

use actix_web::web::Bytes;
use corkboard_board::{
    ApprovalId, ApprovalStatus, AuditOutcome, AuditRecord, Issue, IssueId, RunId, TenantId,
};
use corkboard_tools::BoardTool;
use futures_util::stream::BoxStream;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Something changed on a tenant's board.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum BoardEvent {
    /// An issue was created or changed (comments included). `version` is
    /// the new version when the publisher knows it.
    IssueChanged { id: IssueId, version: Option<u64> },
    /// Grants were issued or revoked (for one run, when known).
    GrantsChanged { run: Option<RunId> },
    /// An upstream tool is new or changed and waits for a tenant admin's
    /// approval (`GET /v1/tenants/{tenant}/upstreams/{upstream}/tools`).
    UpstreamToolChanged { upstream: String, tool: String },
    /// A call came to wait for a person's approval, or was decided
    /// (`approval.requested`, `approval.decided`).
    ApprovalChanged {
        id: ApprovalId,
        status: ApprovalStatus,
    },
    /// Events may have been missed: re-fetch everything.
    Resync,
}

impl BoardEvent {
    /// The SSE `event:` name pages listen for.
    pub fn sse_name(&self) -> &'static str {
        match self {
            Self::IssueChanged { .. } => "issue",
            Self::GrantsChanged { .. } => "grants",
            Self::UpstreamToolChanged { .. } => "upstream_tool",
            Self::ApprovalChanged { .. } => "approval",
            Self::Resync => "resync",
        }
    }

    /// One SSE frame (`event:` + `data:` JSON on one line).
    pub fn sse_frame(&self) -> Bytes {
        let data = serde_json::to_string(self).unwrap_or_else(|_| "{}".into());
        Bytes::from(format!("event: {}\ndata: {data}\n\n", self.sse_name()))
    }

    /// The event a successful tool call implies, if it changed an issue.
    pub fn from_audit(record: &AuditRecord) -> Option<Self> {
        // The tool table says which tools change an issue.
        let tool = BoardTool::from_name(&record.tool);
        let writes = tool.is_some_and(BoardTool::writes);
        match (&record.issue, record.outcome) {
            (Some(id), AuditOutcome::Ok) if writes => Some(Self::IssueChanged {
                id: id.clone(),
                version: None,
            }),
            // A bulk create changes many issues at once: pages re-read.
            (None, AuditOutcome::Ok) if tool == Some(BoardTool::CreateIssues) => Some(Self::Resync),
            _ => None,
        }
    }
}

/// A stream of one tenant's events; it ends only when the bus goes away.
pub type EventStream = BoxStream<'static, BoardEvent>;

/// The board event bus.
pub trait BoardEvents: Send + Sync + fmt::Debug + 'static {
    /// Hands an event over without blocking or waiting on IO. An event that
    /// cannot be delivered is dropped and logged; subscribers recover
    /// through [`BoardEvent::Resync`] or their next reconnect.
    fn publish(&self, tenant: &TenantId, event: BoardEvent);

    /// Every event published for `tenant` from now on (on any replica, for
    /// a shared bus).
    fn subscribe(&self, tenant: &TenantId) -> EventStream;
}

/// The event for an issue changed through the API (e.g. the web board's PATCH).
pub fn issue_changed(issue: &Issue) -> BoardEvent {
    BoardEvent::IssueChanged {
        id: issue.id.clone(),
        version: Some(issue.version),
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! Helpers shared by the event modules' tests.

    use super::{BoardEvent, EventStream};
    use corkboard_board::{IssueId, TenantId};
    use futures_util::StreamExt;
    use std::time::Duration;

    pub fn tenant(t: &str) -> TenantId {
        TenantId::parse(t).unwrap()
    }

    pub fn issue_id() -> IssueId {
        IssueId::generate()
    }

    pub async fn next(stream: &mut EventStream) -> BoardEvent {
        tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .expect("an event within the deadline")
            .expect("the stream is open")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_well_formed() {
        let frame = BoardEvent::GrantsChanged {
            run: Some(RunId::parse("r-1").unwrap()),
        }
        .sse_frame();
        assert_eq!(
            &frame[..],
            b"event: grants\ndata: {\"kind\":\"grants_changed\",\"run\":\"r-1\"}\n\n"
        );
    }
}
