//! The event bus shared by every replica, over Redis pub/sub.
//!
//! Publishing queues events for one background task that sends them in
//! pipelines through the shared [`RedisConnector`]; receiving is one
//! pattern subscription per process (kept up by the grants crate's
//! [`Subscription`], the same helper the token registry's revocations use)
//! feeding a local [`MemoryEvents`].

use super::memory::MemoryEvents;
use super::{BoardEvent, BoardEvents, EventStream};
use crate::state::StartError;
use corkboard_board::TenantId;
use corkboard_grants::{RedisConnector, Subscription, SubscriptionHandler, Topic};
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::runtime::Handle;
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

/// Events waiting to be published to Redis before new ones are dropped.
const PUBLISH_QUEUE: usize = 4096;
/// Most events sent to Redis in one pipeline (one round trip).
const PUBLISH_BATCH: usize = 512;
/// How long the publisher lets events gather after the first one, so a
/// busy board costs a Redis round trip per batch, not per event.
const PUBLISH_GATHER: Duration = Duration::from_millis(5);
/// Longest one Redis operation (connect, publish, subscribe, ping) may take.
const REDIS_TIMEOUT: Duration = Duration::from_secs(2);
/// How often the subscription proves it is alive.
const SUBSCRIPTION_PING: Duration = Duration::from_secs(5);
const MAX_RESUBSCRIBE_BACKOFF: Duration = Duration::from_secs(5);

/// Where [`RedisEvents`] connects.
#[derive(Clone)]
pub struct RedisEventsConfig {
    /// One URL (single node) or several (cluster seed nodes).
    pub urls: Vec<String>,
    pub key_prefix: String,
}

impl fmt::Debug for RedisEventsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // URLs may carry passwords.
        f.debug_struct("RedisEventsConfig")
            .field("nodes", &self.urls.len())
            .field("key_prefix", &self.key_prefix)
            .finish()
    }
}

impl RedisEventsConfig {
    /// The channel of `tenant`'s events.
    pub fn channel(&self, tenant: &TenantId) -> String {
        format!("{}board-events:{tenant}", self.key_prefix)
    }

    /// The pattern matching every tenant's channel (glob characters of the
    /// prefix escaped).
    fn pattern(&self) -> String {
        let mut pattern = String::new();
        for c in self.key_prefix.chars() {
            if matches!(c, '*' | '?' | '[' | ']' | '\\') {
                pattern.push('\\');
            }
            pattern.push(c);
        }
        pattern.push_str("board-events:*");
        pattern
    }

    fn tenant_of(&self, channel: &str) -> Option<TenantId> {
        let rest = channel
            .strip_prefix(&self.key_prefix)?
            .strip_prefix("board-events:")?;
        TenantId::parse(rest).ok()
    }
}

/// Bus shared by every replica through Redis pub/sub.
///
/// `publish` queues the event for a background publisher; one background
/// subscription per process (a pattern over every tenant's channel) feeds
/// the local subscribers, including those of the publishing process, so
/// every replica sees each event exactly once. Whenever the subscription is
/// (re)established every local subscriber gets [`BoardEvent::Resync`],
/// since events published while it was down are gone.
pub struct RedisEvents {
    local: Arc<MemoryEvents>,
    queue: mpsc::Sender<(TenantId, BoardEvent)>,
    tasks: Vec<AbortHandle>,
    dropped: DropCounter,
}

/// Counts events dropped on a full queue and says so at most once a second
/// (a warning per event would add to the overload that caused it).
#[derive(Debug, Default)]
struct DropCounter(Mutex<Drops>);

#[derive(Debug, Default)]
struct Drops {
    total: u64,
    unreported: u64,
    last_report: Option<std::time::Instant>,
}

impl DropCounter {
    fn lock(&self) -> std::sync::MutexGuard<'_, Drops> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn dropped(&self, tenant: &TenantId) {
        let mut drops = self.lock();
        drops.total += 1;
        drops.unreported += 1;
        let due = drops
            .last_report
            .is_none_or(|last| last.elapsed() >= Duration::from_secs(1));
        if due {
            tracing::warn!(
                %tenant,
                dropped = drops.unreported,
                total = drops.total,
                "board events dropped: the Redis publish queue is full (pages resync when they reconnect)"
            );
            drops.unreported = 0;
            drops.last_report = Some(std::time::Instant::now());
        }
    }

    #[cfg(test)]
    fn total(&self) -> u64 {
        self.lock().total
    }
}

impl fmt::Debug for RedisEvents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisEvents")
            .field("local", &self.local)
            .finish_non_exhaustive()
    }
}

impl Drop for RedisEvents {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl RedisEvents {
    /// Starts the publisher and the subscription on the current tokio
    /// runtime. Redis need not be up: both retry in the background.
    pub fn start(config: RedisEventsConfig) -> Result<Self, StartError> {
        let bad = |reason: String| StartError::Setting {
            key: "redis_url",
            reason,
        };
        if config.urls.is_empty() {
            return Err(bad(
                "at least one Redis URL is required for the shared board events".into(),
            ));
        }
        let handle = Handle::try_current()
            .map_err(|_| bad("the shared board events need a Tokio runtime".into()))?;
        let subscription = Subscription::new(
            &config.urls,
            Topic::Pattern(config.pattern()),
            REDIS_TIMEOUT,
        )
        .map_err(|e| bad(format!("invalid Redis URL: {e}")))?
        .with_heartbeat(SUBSCRIPTION_PING)
        .with_max_backoff(MAX_RESUBSCRIBE_BACKOFF)
        .with_log_names(
            "board events: Redis subscription",
            "live updates pause until it is back",
        );
        let connector = RedisConnector::new(&config.urls, false, REDIS_TIMEOUT, handle.clone())
            .map_err(|e| bad(format!("invalid Redis URLs: {e}")))?;
        let local = Arc::new(MemoryEvents::new());
        let (queue, rx) = mpsc::channel(PUBLISH_QUEUE);
        let config = Arc::new(config);
        let publish = handle.spawn(publish_loop(connector, config.clone(), rx));
        let subscribe = handle.spawn(subscription.run(LocalFanOut {
            config,
            local: local.clone(),
        }));
        Ok(Self {
            local,
            queue,
            tasks: vec![publish.abort_handle(), subscribe.abort_handle()],
            dropped: DropCounter::default(),
        })
    }
}

impl BoardEvents for RedisEvents {
    fn publish(&self, tenant: &TenantId, event: BoardEvent) {
        if self.queue.try_send((tenant.clone(), event)).is_err() {
            self.dropped.dropped(tenant);
        }
    }

    fn subscribe(&self, tenant: &TenantId) -> EventStream {
        self.local.subscribe(tenant)
    }
}

async fn publish_loop(
    connector: RedisConnector,
    config: Arc<RedisEventsConfig>,
    mut rx: mpsc::Receiver<(TenantId, BoardEvent)>,
) {
    let mut batch = Vec::with_capacity(PUBLISH_BATCH);
    while let Some(first) = rx.recv().await {
        batch.push(first);
        tokio::time::sleep(PUBLISH_GATHER).await;
        while batch.len() < PUBLISH_BATCH {
            match rx.try_recv() {
                Ok(next) => batch.push(next),
                Err(_) => break,
            }
        }
        let mut pipe = redis::pipe();
        for (tenant, event) in batch.drain(..) {
            if let Ok(payload) = serde_json::to_string(&event) {
                pipe.publish(config.channel(&tenant), payload).ignore();
            }
        }
        let sent = tokio::time::timeout(REDIS_TIMEOUT, async {
            connector.get().await?.query_pipe::<()>(&pipe).await
        })
        .await;
        match sent {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                connector.reset();
                tracing::warn!(error = %e, "board events not published to Redis");
            }
            Err(_) => {
                connector.reset();
                tracing::warn!("board events not published to Redis: timed out");
            }
        }
    }
}

/// What the subscription does for the bus: every message goes to the
/// local subscribers of its tenant, and every (re)subscription tells all of
/// them to resync, since events published while it was down are gone.
struct LocalFanOut {
    config: Arc<RedisEventsConfig>,
    local: Arc<MemoryEvents>,
}

impl SubscriptionHandler for LocalFanOut {
    fn up(&mut self) {
        self.local.deliver_all(&BoardEvent::Resync);
    }

    fn message(&mut self, message: redis::Msg) {
        let Some(tenant) = self.config.tenant_of(message.get_channel_name()) else {
            return;
        };
        let payload: String = message.get_payload().unwrap_or_default();
        match serde_json::from_str::<BoardEvent>(&payload) {
            Ok(event) => self.local.deliver(&tenant, event),
            Err(_) => tracing::debug!(%tenant, "board events: ignoring a malformed message"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::web::events::testing::{issue_id, next, tenant};
    use corkboard_board::IssueId;
    use futures_util::StreamExt;

    #[test]
    fn channels_are_well_formed() {
        let config = RedisEventsConfig {
            urls: vec![],
            key_prefix: "cb*:".into(),
        };
        assert_eq!(config.channel(&tenant("acme")), "cb*:board-events:acme");
        assert_eq!(config.pattern(), "cb\\*:board-events:*");
        assert_eq!(
            config.tenant_of("cb*:board-events:acme"),
            Some(tenant("acme"))
        );
        assert_eq!(config.tenant_of("cb*:board-events:Not_A_Tenant"), None);
        assert_eq!(config.tenant_of("other:board-events:acme"), None);
    }

    /// Two buses on one real Redis stand for two replicas.
    #[actix_rt::test]
    async fn redis_bus_reaches_every_replica() {
        let redis = corkboard_testkit::RedisServer::start();
        let config = RedisEventsConfig {
            urls: vec![redis.url()],
            key_prefix: corkboard_testkit::unique_prefix("board-events"),
        };
        let a = RedisEvents::start(config.clone()).unwrap();
        let b = RedisEvents::start(config).unwrap();
        let mut on_a = a.subscribe(&tenant("acme"));
        let mut on_b = b.subscribe(&tenant("acme"));
        let mut other = b.subscribe(&tenant("globex"));
        // Each subscription says Resync once it is live; only then can
        // nothing published be missed.
        assert_eq!(next(&mut on_a).await, BoardEvent::Resync);
        assert_eq!(next(&mut on_b).await, BoardEvent::Resync);
        assert_eq!(next(&mut other).await, BoardEvent::Resync);

        let id = issue_id();
        a.publish(
            &tenant("acme"),
            BoardEvent::IssueChanged {
                id: id.clone(),
                version: Some(3),
            },
        );
        let expected = BoardEvent::IssueChanged {
            id,
            version: Some(3),
        };
        assert_eq!(next(&mut on_b).await, expected, "the other replica");
        assert_eq!(
            next(&mut on_a).await,
            expected,
            "the publishing replica, exactly once"
        );
        assert!(
            tokio::time::timeout(Duration::from_millis(200), on_a.next())
                .await
                .is_err()
        );
        assert!(
            tokio::time::timeout(Duration::from_millis(50), other.next())
                .await
                .is_err(),
            "tenant isolation"
        );
    }

    /// A burst is sent in pipelines: every event arrives, once, in order.
    #[actix_rt::test]
    async fn a_burst_of_events_reaches_the_other_replica_whole_and_in_order() {
        let redis = corkboard_testkit::RedisServer::start();
        let config = RedisEventsConfig {
            urls: vec![redis.url()],
            key_prefix: corkboard_testkit::unique_prefix("board-burst"),
        };
        let a = RedisEvents::start(config.clone()).unwrap();
        let b = RedisEvents::start(config).unwrap();
        let mut on_b = b.subscribe(&tenant("acme"));
        assert_eq!(next(&mut on_b).await, BoardEvent::Resync);
        let ids: Vec<IssueId> = (0..200).map(|_| issue_id()).collect();
        for (version, id) in ids.iter().enumerate() {
            a.publish(
                &tenant("acme"),
                BoardEvent::IssueChanged {
                    id: id.clone(),
                    version: Some(version as u64),
                },
            );
        }
        for (version, id) in ids.iter().enumerate() {
            assert_eq!(
                next(&mut on_b).await,
                BoardEvent::IssueChanged {
                    id: id.clone(),
                    version: Some(version as u64),
                },
                "event {version}"
            );
        }
        assert!(
            tokio::time::timeout(Duration::from_millis(200), on_b.next())
                .await
                .is_err(),
            "nothing twice"
        );
        assert_eq!(a.dropped.total(), 0);
    }
}
