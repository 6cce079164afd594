//! The in-process event bus: one `tokio::sync::broadcast` channel per
//! tenant that has subscribers. Also the local fan-out behind
//! [`RedisEvents`](super::RedisEvents).

use super::{BoardEvent, BoardEvents, EventStream};
use corkboard_board::TenantId;
use futures_util::StreamExt;
use std::collections::HashMap;
use std::sync::Mutex;
use tokio::sync::broadcast;

/// Events a slow subscriber may fall behind by before it is told to resync.
pub(super) const SUBSCRIBER_BUFFER: usize = 256;

/// In-process bus: one broadcast channel per tenant with subscribers.
#[derive(Debug, Default)]
pub struct MemoryEvents {
    channels: Mutex<HashMap<TenantId, broadcast::Sender<BoardEvent>>>,
}

impl MemoryEvents {
    pub fn new() -> Self {
        Self::default()
    }

    fn channels(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<TenantId, broadcast::Sender<BoardEvent>>> {
        // Nothing can be left half-done inside the lock by a panic.
        self.channels.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Delivers `event` to `tenant`'s current subscribers, forgetting the
    /// channel once nobody listens any more.
    pub(super) fn deliver(&self, tenant: &TenantId, event: BoardEvent) {
        let mut channels = self.channels();
        if let Some(tx) = channels.get(tenant)
            && tx.send(event).is_err()
        {
            channels.remove(tenant);
        }
    }

    /// Delivers `event` to every subscriber of every tenant.
    pub(super) fn deliver_all(&self, event: &BoardEvent) {
        self.channels()
            .retain(|_, tx| tx.send(event.clone()).is_ok());
    }

    /// Tenants with at least one channel (for tests and diagnostics).
    pub fn channel_count(&self) -> usize {
        self.channels().len()
    }
}

impl BoardEvents for MemoryEvents {
    fn publish(&self, tenant: &TenantId, event: BoardEvent) {
        self.deliver(tenant, event);
    }

    fn subscribe(&self, tenant: &TenantId) -> EventStream {
        let rx = self
            .channels()
            .entry(tenant.clone())
            .or_insert_with(|| broadcast::channel(SUBSCRIBER_BUFFER).0)
            .subscribe();
        receiver_stream(rx)
    }
}

fn receiver_stream(rx: broadcast::Receiver<BoardEvent>) -> EventStream {
    futures_util::stream::unfold(rx, |mut rx| async move {
        match rx.recv().await {
            Ok(event) => Some((event, rx)),
            // It missed some: it must re-read, not guess.
            Err(broadcast::error::RecvError::Lagged(_)) => Some((BoardEvent::Resync, rx)),
            Err(broadcast::error::RecvError::Closed) => None,
        }
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::web::events::testing::{issue_id, next, tenant};
    use std::time::Duration;

    #[actix_rt::test]
    async fn memory_bus_delivers_per_tenant_and_forgets_idle_channels() {
        let bus = MemoryEvents::new();
        let mut acme = bus.subscribe(&tenant("acme"));
        let mut globex = bus.subscribe(&tenant("globex"));
        let id = issue_id();
        bus.publish(
            &tenant("acme"),
            BoardEvent::IssueChanged {
                id: id.clone(),
                version: Some(2),
            },
        );
        bus.publish(&tenant("globex"), BoardEvent::GrantsChanged { run: None });
        assert_eq!(
            next(&mut acme).await,
            BoardEvent::IssueChanged {
                id,
                version: Some(2)
            }
        );
        assert_eq!(
            next(&mut globex).await,
            BoardEvent::GrantsChanged { run: None }
        );
        // Nothing of globex reached acme.
        assert!(
            tokio::time::timeout(Duration::from_millis(50), acme.next())
                .await
                .is_err()
        );

        drop(acme);
        bus.publish(&tenant("acme"), BoardEvent::Resync);
        assert_eq!(
            bus.channel_count(),
            1,
            "acme's channel is gone with its last subscriber"
        );
    }

    #[actix_rt::test]
    async fn a_lagging_subscriber_is_told_to_resync() {
        let bus = MemoryEvents::new();
        let mut slow = bus.subscribe(&tenant("acme"));
        for _ in 0..SUBSCRIBER_BUFFER + 10 {
            bus.publish(&tenant("acme"), BoardEvent::GrantsChanged { run: None });
        }
        assert_eq!(next(&mut slow).await, BoardEvent::Resync);
    }
}
