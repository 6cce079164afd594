//! One Redis pub/sub subscription kept up forever: the token registry's
//! revocation channel and the web board's event pattern both run on it.
//!
//! [`Subscription::run`] subscribes (trying the configured nodes in turn,
//! each attempt bounded by the timeout), proves the subscription alive with
//! a PING on it every heartbeat, and when it breaks or cannot be opened
//! waits with exponential backoff and subscribes again. What the owner does
//! with messages, and with the subscription coming and going (clearing a
//! cache, telling pages to resync), is its [`SubscriptionHandler`]: while a
//! subscription is down its messages are lost, so every owner must treat
//! [`SubscriptionHandler::up`] as "anything may have been missed".

use futures_util::StreamExt;
use redis::RedisResult;
use std::time::Duration;

/// First wait after a failed attempt; doubles up to the configured maximum.
const FIRST_BACKOFF: Duration = Duration::from_millis(50);

/// What to subscribe to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Topic {
    /// One channel (`SUBSCRIBE`).
    Channel(String),
    /// Every channel matching a glob pattern (`PSUBSCRIBE`).
    Pattern(String),
}

/// What the owner of a subscription does as it comes and goes. Called from
/// the subscription's task, one call at a time.
pub trait SubscriptionHandler: Send + 'static {
    /// The subscription is established (again): messages published while it
    /// was down are gone.
    fn up(&mut self);
    /// A message arrived.
    fn message(&mut self, message: redis::Msg);
    /// A heartbeat PING was answered: Redis is reachable.
    fn alive(&mut self) {}
    /// The subscription broke after being up (closed, or a PING unanswered).
    fn lost(&mut self) {}
    /// An attempt to subscribe failed or timed out.
    fn failed(&mut self) {}
}

/// A subscription to keep up, with how patient to be with Redis.
pub struct Subscription {
    clients: Vec<redis::Client>,
    topic: Topic,
    /// Bound on subscribing.
    timeout: Duration,
    /// Bound on each PING: with the heartbeat, how long a silently dead
    /// subscription can go unnoticed.
    ping_timeout: Duration,
    /// How often a PING proves the subscription alive.
    heartbeat: Duration,
    /// Longest wait between two attempts.
    max_backoff: Duration,
    /// Who is subscribing and what for, as log lines say it, e.g.
    /// `token registry: revocation subscription`.
    name: &'static str,
    /// What a lost subscription means, for the warning that says so.
    while_down: &'static str,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Clients hold URLs, which may carry passwords.
        f.debug_struct("Subscription")
            .field("name", &self.name)
            .field("topic", &self.topic)
            .field("nodes", &self.clients.len())
            .finish_non_exhaustive()
    }
}

impl Subscription {
    /// A subscription to `topic` on any of `urls` (tried in turn). Refuses
    /// malformed URLs and an empty list; does not connect.
    pub fn new(urls: &[String], topic: Topic, timeout: Duration) -> RedisResult<Self> {
        if urls.is_empty() {
            return Err(redis::RedisError::from((
                redis::ErrorKind::InvalidClientConfig,
                "at least one Redis URL is required",
            )));
        }
        let clients = urls
            .iter()
            .map(|url| crate::redis_conn::redis_client(url))
            .collect::<RedisResult<Vec<_>>>()?;
        Ok(Self {
            clients,
            topic,
            timeout,
            ping_timeout: timeout,
            heartbeat: Duration::from_secs(5),
            max_backoff: Duration::from_secs(5),
            name: "redis subscription",
            while_down: "messages are missed until it is back",
        })
    }

    pub fn with_heartbeat(mut self, heartbeat: Duration) -> Self {
        self.heartbeat = heartbeat;
        self
    }

    /// Bounds each heartbeat PING more tightly than subscribing: a dead
    /// subscription is noticed at most `heartbeat + ping_timeout` after its
    /// last sign of life.
    pub fn with_ping_timeout(mut self, ping_timeout: Duration) -> Self {
        self.ping_timeout = ping_timeout;
        self
    }

    pub fn with_max_backoff(mut self, max_backoff: Duration) -> Self {
        self.max_backoff = max_backoff;
        self
    }

    /// How log lines name the subscription (`name`) and what its loss
    /// means (`while_down`).
    pub fn with_log_names(mut self, name: &'static str, while_down: &'static str) -> Self {
        self.name = name;
        self.while_down = while_down;
        self
    }

    /// Keeps the subscription up, forever (abort the task to stop it).
    pub async fn run(self, mut handler: impl SubscriptionHandler) {
        let mut backoff = FIRST_BACKOFF;
        let mut next = 0usize;
        let mut was_up = false;
        loop {
            let client = &self.clients[next % self.clients.len()];
            next = next.wrapping_add(1);
            match tokio::time::timeout(self.timeout, self.open(client)).await {
                Ok(Ok(pubsub)) => {
                    let (mut sink, mut messages) = pubsub.split();
                    handler.up();
                    if was_up {
                        tracing::info!("{} restored", self.name);
                    }
                    was_up = true;
                    backoff = FIRST_BACKOFF;
                    let mut ticks = tokio::time::interval(self.heartbeat);
                    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                    ticks.tick().await;
                    loop {
                        tokio::select! {
                            message = messages.next() => {
                                let Some(message) = message else { break };
                                handler.message(message);
                            }
                            _ = ticks.tick() => {
                                let pong = tokio::time::timeout(
                                    self.ping_timeout,
                                    sink.ping::<redis::Value>(),
                                )
                                .await;
                                match pong {
                                    Ok(Ok(_)) => handler.alive(),
                                    _ => break,
                                }
                            }
                        }
                    }
                    handler.lost();
                    tracing::warn!("{} lost; {}", self.name, self.while_down);
                }
                Ok(Err(e)) => {
                    handler.failed();
                    tracing::debug!(error = %e, "{}: cannot subscribe", self.name);
                }
                Err(_) => {
                    handler.failed();
                    tracing::debug!("{}: subscribing timed out", self.name);
                }
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(self.max_backoff);
        }
    }

    async fn open(&self, client: &redis::Client) -> RedisResult<redis::aio::PubSub> {
        let mut pubsub = client.get_async_pubsub().await?;
        match &self.topic {
            Topic::Channel(channel) => pubsub.subscribe(channel).await?,
            Topic::Pattern(pattern) => pubsub.psubscribe(pattern).await?,
        }
        Ok(pubsub)
    }
}
