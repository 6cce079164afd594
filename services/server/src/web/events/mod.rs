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
//! Backends: [`MemoryEvents`] (one process, `tokio::sync::broadcast`) and
//! [`RedisEvents`] (every replica: Redis pub/sub on
//! `{prefix}board-events:{tenant}`, one pattern subscription per process
//! feeding a local [`MemoryEvents`]).

use crate::state::StartError;
use actix_web::web::Bytes;
use corkboard_board::{AuditOutcome, AuditRecord, Issue, IssueId, RunId, TenantId};
use corkboard_tools::AuditSink;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{broadcast, mpsc};
use tokio::task::AbortHandle;

/// Events a slow subscriber may fall behind by before it is told to resync.
const SUBSCRIBER_BUFFER: usize = 256;
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

/// Something changed on a tenant's board.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum BoardEvent {
    /// An issue was created or changed (comments included). `version` is
    /// the new version when the publisher knows it.
    IssueChanged { id: IssueId, version: Option<u64> },
    /// Grants were issued or revoked (for one run, when known).
    GrantsChanged { run: Option<RunId> },
    /// Events may have been missed: re-fetch everything.
    Resync,
}

impl BoardEvent {
    /// The SSE `event:` name pages listen for.
    pub fn sse_name(&self) -> &'static str {
        match self {
            Self::IssueChanged { .. } => "issue",
            Self::GrantsChanged { .. } => "grants",
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
        let writes = matches!(
            record.tool.as_str(),
            "create_issue" | "update_issue" | "add_comment"
        );
        match (&record.issue, record.outcome) {
            (Some(id), AuditOutcome::Ok) if writes => Some(Self::IssueChanged {
                id: id.clone(),
                version: None,
            }),
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
    fn deliver(&self, tenant: &TenantId, event: BoardEvent) {
        let mut channels = self.channels();
        if let Some(tx) = channels.get(tenant)
            && tx.send(event).is_err()
        {
            channels.remove(tenant);
        }
    }

    /// Delivers `event` to every subscriber of every tenant.
    fn deliver_all(&self, event: &BoardEvent) {
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

enum Publisher {
    Single(redis::Client, ConnectionManagerConfig),
    Cluster(ClusterClient),
}

#[derive(Clone)]
enum PublishConn {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
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
        let clients = config
            .urls
            .iter()
            .map(|url| {
                redis::Client::open(url.as_str())
                    .map_err(|e| bad(format!("invalid Redis URL: {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let publisher = if config.urls.len() > 1 {
            let client = ClusterClient::builder(config.urls.iter().map(String::as_str))
                .connection_timeout(REDIS_TIMEOUT)
                .response_timeout(REDIS_TIMEOUT)
                .build()
                .map_err(|e| bad(format!("invalid Redis cluster URLs: {e}")))?;
            Publisher::Cluster(client)
        } else {
            let manager = ConnectionManagerConfig::new()
                .set_connection_timeout(REDIS_TIMEOUT)
                .set_response_timeout(REDIS_TIMEOUT)
                .set_number_of_retries(2);
            Publisher::Single(clients[0].clone(), manager)
        };
        let local = Arc::new(MemoryEvents::new());
        let (queue, rx) = mpsc::channel(PUBLISH_QUEUE);
        let config = Arc::new(config);
        let publish = tokio::spawn(publish_loop(publisher, config.clone(), rx));
        let subscribe = tokio::spawn(subscribe_loop(clients, config, local.clone()));
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
    publisher: Publisher,
    config: Arc<RedisEventsConfig>,
    mut rx: mpsc::Receiver<(TenantId, BoardEvent)>,
) {
    let mut conn: Option<PublishConn> = None;
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
            let mut c = match conn.clone() {
                Some(c) => c,
                None => {
                    let c = match &publisher {
                        Publisher::Single(client, cfg) => PublishConn::Single(
                            ConnectionManager::new_with_config(client.clone(), cfg.clone()).await?,
                        ),
                        Publisher::Cluster(client) => {
                            PublishConn::Cluster(client.get_async_connection().await?)
                        }
                    };
                    conn = Some(c.clone());
                    c
                }
            };
            match &mut c {
                PublishConn::Single(c) => pipe.query_async::<()>(c).await,
                PublishConn::Cluster(c) => pipe.query_async::<()>(c).await,
            }
        })
        .await;
        match sent {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                conn = None;
                tracing::warn!(error = %e, "board events not published to Redis");
            }
            Err(_) => {
                conn = None;
                tracing::warn!("board events not published to Redis: timed out");
            }
        }
    }
}

async fn subscribe_loop(
    clients: Vec<redis::Client>,
    config: Arc<RedisEventsConfig>,
    local: Arc<MemoryEvents>,
) {
    let pattern = config.pattern();
    let mut backoff = Duration::from_millis(50);
    let mut next = 0usize;
    let mut was_up = false;
    loop {
        let client = &clients[next % clients.len()];
        next = next.wrapping_add(1);
        let opened = tokio::time::timeout(REDIS_TIMEOUT, async {
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub.psubscribe(&pattern).await?;
            redis::RedisResult::Ok(pubsub)
        })
        .await;
        match opened {
            Ok(Ok(pubsub)) => {
                backoff = Duration::from_millis(50);
                if was_up {
                    tracing::info!("board events: Redis subscription restored");
                }
                was_up = true;
                local.deliver_all(&BoardEvent::Resync);
                let (mut sink, mut messages) = pubsub.split();
                let mut ticks = tokio::time::interval(SUBSCRIPTION_PING);
                ticks.tick().await;
                loop {
                    tokio::select! {
                        message = messages.next() => {
                            let Some(message) = message else { break };
                            let Some(tenant) = config.tenant_of(message.get_channel_name()) else { continue };
                            let payload: String = message.get_payload().unwrap_or_default();
                            match serde_json::from_str::<BoardEvent>(&payload) {
                                Ok(event) => local.deliver(&tenant, event),
                                Err(_) => tracing::debug!(%tenant, "board events: ignoring a malformed message"),
                            }
                        }
                        _ = ticks.tick() => {
                            match tokio::time::timeout(REDIS_TIMEOUT, sink.ping::<redis::Value>()).await {
                                Ok(Ok(_)) => {}
                                _ => break,
                            }
                        }
                    }
                }
                tracing::warn!(
                    "board events: Redis subscription lost; live updates pause until it is back"
                );
            }
            Ok(Err(e)) => tracing::debug!(error = %e, "board events: cannot subscribe to Redis"),
            Err(_) => tracing::debug!("board events: subscribing to Redis timed out"),
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_RESUBSCRIBE_BACKOFF);
    }
}

/// An [`AuditSink`] that forwards every record to `inner`, then publishes
/// [`BoardEvent::IssueChanged`] for each successful `create_issue`,
/// `update_issue` and `add_comment`: the one place where agent writes turn
/// into live updates.
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
        let event = BoardEvent::from_audit(&record);
        let tenant = record.tenant.clone();
        self.inner.record(record);
        if let Some(event) = event {
            self.events.publish(&tenant, event);
        }
    }
}

/// The event for an issue changed through the API (e.g. the web board's PATCH).
pub fn issue_changed(issue: &Issue) -> BoardEvent {
    BoardEvent::IssueChanged {
        id: issue.id.clone(),
        version: Some(issue.version),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corkboard_board::{ArgumentsHash, GrantId, Timestamp};
    use corkboard_tools::MemoryAuditSink;

    fn tenant(t: &str) -> TenantId {
        TenantId::parse(t).unwrap()
    }

    fn issue_id() -> IssueId {
        IssueId::generate()
    }

    async fn next(stream: &mut EventStream) -> BoardEvent {
        tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .expect("an event within the deadline")
            .expect("the stream is open")
    }

    #[actix_web::test]
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

    #[actix_web::test]
    async fn a_lagging_subscriber_is_told_to_resync() {
        let bus = MemoryEvents::new();
        let mut slow = bus.subscribe(&tenant("acme"));
        for _ in 0..SUBSCRIBER_BUFFER + 10 {
            bus.publish(&tenant("acme"), BoardEvent::GrantsChanged { run: None });
        }
        assert_eq!(next(&mut slow).await, BoardEvent::Resync);
    }

    #[actix_web::test]
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

    #[test]
    fn frames_and_channels_are_well_formed() {
        let frame = BoardEvent::GrantsChanged {
            run: Some(RunId::parse("r-1").unwrap()),
        }
        .sse_frame();
        assert_eq!(
            &frame[..],
            b"event: grants\ndata: {\"kind\":\"grants_changed\",\"run\":\"r-1\"}\n\n"
        );
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
    #[actix_web::test]
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
    #[actix_web::test]
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
