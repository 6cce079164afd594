//! Redis-backed token registry, shared by every replica.
//!
//! Key layout (only token hashes, never tokens; `{p}` is the key prefix):
//! - `{p}tok:{hash}` → the grant as JSON, signed for that hash
//!   (`record.rs`: a record that does not verify resolves as unknown, so
//!   write access to Redis cannot mint a grant),
//! - `{p}grant:{grant_id}` → the token hash,
//! - `{p}run:{tenant}:{run}` → set of the run's grant ids,
//!
//! each expiring (`PXAT`/`PEXPIREAT`) [`EXPIRY_SLACK`] after its grant. Every
//! command touches one key, so the layout works unchanged on Redis Cluster.
//!
//! Revocation deletes the keys, then publishes the token hash on
//! `{p}revocations`. Every instance keeps a dedicated subscription to that
//! channel and drops the hash from its local cache; in cluster mode a
//! `PUBLISH` reaches subscribers on every node, so one subscription to any
//! node is enough. While the subscription is down, or has not proved itself
//! alive within [`SUBSCRIPTION_TRUST`], the cache is bypassed (and cleared
//! once the loss is noticed), since invalidations may be missed then.
//!
//! Renewal rewrites `{p}tok:{hash}` only if it still exists (`SET ... XX`,
//! so a revocation that deleted it wins), pushes the other keys' expiry
//! out (`PEXPIREAT ... GT`), then publishes `~<hash>` on the same channel:
//! every replica drops its cached copy with the old expiry, as it does for
//! a revocation (the subscription's liveness rules apply unchanged).
//!
//! Unknown tokens: a hash found unknown in Redis and in the ledger is
//! remembered briefly ([`UNKNOWN_CACHE_TTL`]); a registration publishes
//! `+<hash>` on the same channel so every replica forgets it at once.
//! Outages: after a call timed out or lost its connection, calls are
//! refused at once for [`CIRCUIT_OPEN_FOR`] rather than each waiting for
//! the operation timeout.
//!
//! Redis may lose writes (a restart from an RDB/AOF point, a failover to
//! a lagging replica, a restore from backup) and with them revocations; a
//! Redis answer must never outlive a revocation in the durable ledger. So
//! each revocation also increments `{p}revocation_epoch` (its new value
//! travels with the invalidation message) and every registry remembers the
//! highest epoch it has seen. A Redis whose epoch is behind that has gone
//! back in time: its answers are not used until the ledger's revocations
//! (every revoked, unexpired grant, [`GrantLedger::revoked_grants`]) have
//! been replayed into it. The replay also runs at start-up, after every
//! resubscription (anything may have happened meanwhile) and after a
//! revocation whose Redis step failed, before Redis is trusted again.
//!
//! Fail closed: every Redis call is bounded by the operation timeout and an
//! unanswered one is [`RegistryError::Unavailable`]; a cached grant is only
//! served while Redis was heard from within the grace window.

use crate::cache::{GrantCache, Lookup, UnknownCache};
use crate::error::RegistryError;
use crate::record;
use crate::redis_conn::RedisConnector;
use crate::redis_sub::{Subscription, SubscriptionHandler, Topic};
use crate::registry::TokenRegistry;
use crate::token::TokenHash;
use async_trait::async_trait;
use corkboard_board::{
    Grant, GrantId, GrantLedger, RunId, StoreError, TenantId, Timestamp, ValidationError,
};
use corkboard_mcp::SessionKey;
use redis::{Cmd, FromRedisValue, Pipeline, RedisResult};
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tokio::runtime::Handle;
use tokio::task::AbortHandle;

pub const DEFAULT_KEY_PREFIX: &str = "corkboard:";
pub const DEFAULT_CACHE_CAPACITY: usize = 10_000;
pub const DEFAULT_CACHE_TTL: Duration = Duration::from_secs(30);
pub const DEFAULT_GRACE: Duration = Duration::from_secs(5);
pub const DEFAULT_OPERATION_TIMEOUT: Duration = Duration::from_secs(1);

/// How long keys outlive their grant. Within it an expired token is still
/// recognised and refused as "expired" rather than "unknown", which tells
/// the agent's operator what actually happened.
pub const EXPIRY_SLACK: Duration = Duration::from_secs(60);

/// Longest wait between two attempts at re-establishing the subscription.
const MAX_RESUBSCRIBE_BACKOFF: Duration = Duration::from_secs(2);

/// How often the revocation subscription proves itself alive (PING).
const REVOCATION_HEARTBEAT: Duration = Duration::from_millis(250);
/// Longest wait for that PING's answer (capped by the operation timeout).
const REVOCATION_PING_TIMEOUT: Duration = Duration::from_millis(500);
/// The local cache serves only while the revocation subscription has shown
/// a sign of life (subscribed, a message, a PING answered) this recently. A
/// subscription that dies silently (no FIN: a partition, a hung Redis) is
/// noticed by the heartbeat within `REVOCATION_HEARTBEAT +
/// REVOCATION_PING_TIMEOUT`; this bound stops the cache at the same time
/// even if the subscription task is slow to act, so a missed revocation is
/// served for less than the one-second revocation contract.
pub const SUBSCRIPTION_TRUST: Duration = Duration::from_millis(750);

/// Most token hashes remembered as unknown everywhere.
pub const UNKNOWN_CACHE_CAPACITY: usize = 10_000;
/// How long a token hash found unknown everywhere is refused without a
/// lookup. Short: it only has to absorb a stream of random tokens.
pub const UNKNOWN_CACHE_TTL: Duration = Duration::from_secs(5);
/// After a Redis call timed out or lost its connection, how long further
/// calls are refused at once (Unavailable) instead of each waiting for the
/// operation timeout; then one call probes Redis again. An answered PING
/// on the revocation subscription closes it early.
pub const CIRCUIT_OPEN_FOR: Duration = Duration::from_millis(500);

/// How to reach Redis and how much to trust the local cache.
#[derive(Clone)]
pub struct RedisRegistryConfig {
    /// `redis://` URLs. One URL is a single node unless `cluster` is set;
    /// several are the seed nodes of a Redis Cluster.
    pub urls: Vec<String>,
    /// Forces cluster mode with a single seed URL.
    pub cluster: bool,
    /// Prepended to every key and to the channel; registries that share a
    /// prefix share grants. Should not contain `{`/`}` (hash tags).
    pub key_prefix: String,
    /// Most grants kept in the local cache; 0 disables the cache.
    pub cache_capacity: usize,
    /// Longest a grant is served from the local cache without asking Redis.
    pub cache_ttl: Duration,
    /// How long cached grants are still served after the last successful
    /// contact with Redis (a hung Redis that keeps connections open).
    pub grace: Duration,
    /// Bound on every Redis call: a hung Redis never hangs a request.
    pub operation_timeout: Duration,
    /// Signs the grant records this registry writes and verifies those it
    /// reads (`record.rs`). Every registry sharing the prefix must hold
    /// the same key (the replicas' session key); [`Self::new`] draws a
    /// random one, good for one registry alone.
    pub record_key: SessionKey,
}

impl RedisRegistryConfig {
    /// Defaults for the given URLs (several URLs mean a cluster).
    pub fn new<I, S>(urls: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let urls: Vec<String> = urls.into_iter().map(Into::into).collect();
        Self {
            cluster: urls.len() > 1,
            urls,
            key_prefix: DEFAULT_KEY_PREFIX.to_owned(),
            cache_capacity: DEFAULT_CACHE_CAPACITY,
            cache_ttl: DEFAULT_CACHE_TTL,
            grace: DEFAULT_GRACE,
            operation_timeout: DEFAULT_OPERATION_TIMEOUT,
            record_key: SessionKey::generate(),
        }
    }

    /// Signs and verifies grant records with `key` (the replicas' shared
    /// session key, with its previous keys).
    pub fn with_record_key(mut self, key: SessionKey) -> Self {
        self.record_key = key;
        self
    }

    pub fn with_key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.key_prefix = prefix.into();
        self
    }

    pub fn with_cluster(mut self, cluster: bool) -> Self {
        self.cluster = cluster;
        self
    }

    fn is_cluster(&self) -> bool {
        self.cluster || self.urls.len() > 1
    }
}

impl fmt::Debug for RedisRegistryConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // URLs may carry a password.
        let urls: Vec<String> = self.urls.iter().map(|u| redact_url(u)).collect();
        f.debug_struct("RedisRegistryConfig")
            .field("urls", &urls)
            .field("cluster", &self.cluster)
            .field("key_prefix", &self.key_prefix)
            .field("cache_capacity", &self.cache_capacity)
            .field("cache_ttl", &self.cache_ttl)
            .field("grace", &self.grace)
            .field("operation_timeout", &self.operation_timeout)
            .field("record_key", &self.record_key)
            .finish()
    }
}

/// `redis://user:secret@host/` → `redis://***@host/`.
fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}***{}", &url[..scheme + 3], &url[at..])
        }
        _ => url.to_owned(),
    }
}

/// Counters for telemetry, read with [`RedisRegistry::stats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RegistryStats {
    /// Resolutions answered from the local cache.
    pub cache_hits: u64,
    /// Resolutions that went to Redis.
    pub cache_misses: u64,
    /// Redis calls that failed or timed out (subscription attempts included).
    pub redis_errors: u64,
    /// Revocation messages received on the subscription.
    pub invalidations_received: u64,
    /// Grants in the local cache now.
    pub cache_entries: u64,
    /// Whether the invalidation subscription is up (the cache is in use).
    pub subscribed: bool,
    /// Resolutions refused as unknown from the negative cache, with no
    /// lookup.
    pub unknown_hits: u64,
    /// Token hashes remembered as unknown now.
    pub unknown_entries: u64,
    /// Redis calls refused at once because a recent one failed.
    pub fast_failures: u64,
    /// Whether Redis calls are being refused at once now.
    pub circuit_open: bool,
    /// Revocations recorded in the ledger whose Redis step is still being
    /// retried.
    pub pending_revocations: u64,
    /// Grant records read from Redis that did not verify (forged, copied
    /// under another token, or unsigned) and were refused.
    pub unverified_records: u64,
}

/// A [`TokenRegistry`] in Redis (single node or cluster) with a local cache
/// invalidated through pub/sub. Cheap to share behind an `Arc`; dropping it
/// stops its subscription task.
pub struct RedisRegistry {
    shared: Arc<Shared>,
    subscriber: AbortHandle,
    retrier: AbortHandle,
}

impl fmt::Debug for RedisRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisRegistry")
            .field("key_prefix", &self.shared.keys.prefix)
            .field("cluster", &self.shared.connector.is_cluster())
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

fn stats_of(shared: &Shared) -> RegistryStats {
    let c = &shared.counters;
    RegistryStats {
        cache_hits: c.cache_hits.load(Ordering::Relaxed),
        cache_misses: c.cache_misses.load(Ordering::Relaxed),
        redis_errors: c.redis_errors.load(Ordering::Relaxed),
        invalidations_received: c.invalidations.load(Ordering::Relaxed),
        cache_entries: shared.cache.len() as u64,
        subscribed: shared.cache.epoch().is_some(),
        unknown_hits: c.unknown_hits.load(Ordering::Relaxed),
        unknown_entries: shared.unknown.len() as u64,
        fast_failures: c.fast_failures.load(Ordering::Relaxed),
        circuit_open: shared.circuit_refuses(Instant::now()),
        pending_revocations: shared.pending_len() as u64,
        unverified_records: c.unverified_records.load(Ordering::Relaxed),
    }
}

impl Drop for RedisRegistry {
    fn drop(&mut self) {
        self.subscriber.abort();
        self.retrier.abort();
    }
}

impl RedisRegistry {
    /// Validates `config` and starts the invalidation subscription. Does not
    /// wait for Redis: until it answers, resolutions fail closed and the
    /// connection is retried on use. Must run inside a Tokio runtime, which
    /// then hosts the registry's connections and its subscription task.
    pub fn new(config: RedisRegistryConfig) -> Result<Self, RegistryError> {
        let handle = Handle::try_current().map_err(|_| {
            RegistryError::Unavailable("the Redis registry needs a Tokio runtime".into())
        })?;
        validate(&config)?;
        let connector = RedisConnector::new(
            &config.urls,
            config.is_cluster(),
            config.operation_timeout,
            handle.clone(),
        )
        .map_err(|e| invalid_url(&e))?;
        let shared = Arc::new(Shared {
            keys: Keys {
                prefix: config.key_prefix.clone(),
            },
            cache: GrantCache::new(config.cache_capacity, config.cache_ttl),
            unknown: UnknownCache::new(
                UNKNOWN_CACHE_CAPACITY.min(config.cache_capacity),
                UNKNOWN_CACHE_TTL,
            ),
            circuit_open_until_ms: AtomicU64::new(0),
            connector,
            grace: config.grace,
            operation_timeout: config.operation_timeout,
            origin: Instant::now(),
            last_contact_ms: AtomicU64::new(0),
            subscription_proof_ms: AtomicU64::new(0),
            contacted: AtomicBool::new(false),
            counters: Counters::default(),
            ledger: OnceLock::new(),
            record_key: config.record_key.clone(),
            pending: std::sync::Mutex::new(std::collections::HashMap::new()),
            trust: Trust::default(),
        });
        let subscription = revocations(&config, &shared)?;
        let task = handle.spawn(subscription.run(Invalidations(shared.clone())));
        let retries = handle.spawn(retry_pending(Arc::downgrade(&shared)));
        Ok(Self {
            shared,
            subscriber: task.abort_handle(),
            retrier: retries.abort_handle(),
        })
    }

    /// [`Self::new`], then waits (bounded) until Redis answers, so that a
    /// misconfigured or unreachable Redis is reported at start-up.
    pub async fn connect(config: RedisRegistryConfig) -> Result<Self, RegistryError> {
        let registry = Self::new(config)?;
        registry.check().await?;
        Ok(registry)
    }

    /// Replays the revocations of `ledger` into Redis whenever Redis may
    /// have lost some (see the module docs). Without a ledger only the
    /// epoch is checked: a Redis behind it is refused until it has caught
    /// up with what this registry saw.
    pub fn with_ledger(self, ledger: Arc<dyn GrantLedger>) -> Self {
        let _ = self.shared.ledger.set(ledger);
        self
    }

    /// How many replays of the ledger's revocations have completed.
    pub fn replays(&self) -> u64 {
        self.shared.trust.replays.load(Ordering::Relaxed)
    }

    pub fn stats(&self) -> RegistryStats {
        stats_of(&self.shared)
    }

    /// A reader of [`Self::stats`] that outlives borrows of the registry,
    /// for metrics collectors read at scrape time.
    pub fn stats_handle(&self) -> impl Fn() -> RegistryStats + Send + Sync + 'static {
        let shared = Arc::downgrade(&self.shared);
        move || shared.upgrade().map(|s| stats_of(&s)).unwrap_or_default()
    }

    pub fn key_prefix(&self) -> &str {
        &self.shared.keys.prefix
    }

    /// Revocations whose Redis step has not succeeded yet (retried in the
    /// background until it does).
    pub fn pending_revocations(&self) -> usize {
        self.shared.pending_len()
    }

    /// Removes one grant; returns whether it was registered. A failure
    /// leaves the revocation pending: retried in the background until
    /// Redis confirms it, and Redis is not trusted until the ledger's
    /// revocations have been replayed into it.
    async fn revoke_one(
        &self,
        id: &GrantId,
        hash: Option<TokenHash>,
    ) -> Result<bool, RegistryError> {
        let s = &self.shared;
        let result = s.revoke_attempt(id, hash).await;
        if result.is_err() {
            s.trust.distrust();
            s.pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(id.clone(), hash);
        }
        result
    }
}

/// Retries the pending revocations of `shared` until each is confirmed, for
/// as long as the registry exists.
async fn retry_pending(shared: std::sync::Weak<Shared>) {
    let mut wait = PENDING_RETRY_FIRST;
    loop {
        tokio::time::sleep(wait).await;
        let Some(s) = shared.upgrade() else { return };
        let pending: Vec<(GrantId, Option<TokenHash>)> = s
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(id, hash)| (id.clone(), *hash))
            .collect();
        wait = PENDING_RETRY_FIRST;
        for (id, hash) in pending {
            match s.revoke_attempt(&id, hash).await {
                Ok(_) => {
                    s.pending
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .remove(&id);
                    tracing::info!(grant = %id, "token registry: pending revocation confirmed");
                }
                Err(_) => {
                    wait = PENDING_RETRY_MAX;
                    break;
                }
            }
        }
    }
}

impl Shared {
    /// The record of `grant` under `hash`, signed (`record.rs`).
    fn signed_record(&self, grant: &Grant, hash: &TokenHash) -> Result<String, RegistryError> {
        let json = serde_json::to_string(grant)
            .map_err(|e| StoreError::Internal(format!("cannot encode grant: {e}")))?;
        record::seal(&self.record_key, hash, &json).ok_or_else(|| {
            RegistryError::Store(StoreError::Internal(
                "cannot sign a grant record: the HMAC refused the key".into(),
            ))
        })
    }

    fn pending_len(&self) -> usize {
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// One attempt at removing a grant, by its token hash when known (the
    /// ledger has it: the grant key may have been evicted) or else through
    /// its grant key. The grant key goes last, so a retry after a failure
    /// half-way finds the hash again and publishes the invalidation again.
    async fn revoke_attempt(
        &self,
        id: &GrantId,
        known: Option<TokenHash>,
    ) -> Result<bool, RegistryError> {
        let s = self;
        let hash_hex: Option<String> = s.query(redis::cmd("GET").arg(s.keys.grant(id))).await?;
        let hash = match (known, hash_hex.as_deref().and_then(TokenHash::from_hex)) {
            (Some(hash), _) | (None, Some(hash)) => hash,
            (None, None) => {
                if hash_hex.is_some() {
                    // Not written by us; drop it rather than fail every retry.
                    s.query::<()>(redis::cmd("DEL").arg(s.keys.grant(id)))
                        .await?;
                }
                return Ok(false);
            }
        };
        let tok_key = s.keys.token(&hash);
        let json: Option<String> = s.query(redis::cmd("GET").arg(&tok_key)).await?;
        s.query::<()>(redis::cmd("DEL").arg(&tok_key)).await?;
        // Our own cache first: a revocation is effective here at once,
        // before the message comes back through Redis.
        s.cache.invalidate(&hash);
        let epoch: u64 = s.query(redis::cmd("INCR").arg(s.keys.epoch())).await?;
        s.trust.saw(epoch);
        s.query::<()>(
            redis::cmd("PUBLISH")
                .arg(s.keys.channel())
                .arg(format!("{} {epoch}", hash.to_hex())),
        )
        .await?;
        let registered = json.is_some() || hash_hex.is_some();
        // Only a record that verifies names the run index to clean.
        let grant = json
            .as_deref()
            .and_then(|stored| record::open(&s.record_key, &hash, stored))
            .and_then(|j| serde_json::from_str::<Grant>(j).ok());
        if let Some(grant) = grant {
            s.query::<()>(
                redis::cmd("SREM")
                    .arg(s.keys.run(&grant.tenant, &grant.run))
                    .arg(id.as_str()),
            )
            .await?;
        }
        s.query::<()>(redis::cmd("DEL").arg(s.keys.grant(id)))
            .await?;
        Ok(registered)
    }
}

#[async_trait]
impl TokenRegistry for RedisRegistry {
    async fn register(&self, grant: &Grant, hash: &TokenHash) -> Result<(), RegistryError> {
        let s = &self.shared;
        let json = s.signed_record(grant, hash)?;
        let expire_at = grant
            .expires_at
            .plus_millis(EXPIRY_SLACK.as_millis() as i64)
            .as_millis();
        // The run index first and the token last: once the token resolves,
        // `revoke_run` can find it.
        let run_key = s.keys.run(&grant.tenant, &grant.run);
        let mut index = redis::pipe();
        index
            .cmd("SADD")
            .arg(&run_key)
            .arg(grant.id.as_str())
            .ignore()
            // NX then GT: the set lives as long as its longest grant,
            // whatever order concurrent registrations arrive in.
            .cmd("PEXPIREAT")
            .arg(&run_key)
            .arg(expire_at)
            .arg("NX")
            .ignore()
            .cmd("PEXPIREAT")
            .arg(&run_key)
            .arg(expire_at)
            .arg("GT")
            .ignore();
        s.query_pipe::<()>(&index).await?;
        s.query::<()>(
            redis::cmd("SET")
                .arg(s.keys.grant(&grant.id))
                .arg(hash.to_hex())
                .arg("PXAT")
                .arg(expire_at),
        )
        .await?;
        s.query::<()>(
            redis::cmd("SET")
                .arg(s.keys.token(hash))
                .arg(json)
                .arg("PXAT")
                .arg(expire_at),
        )
        .await?;
        s.cache.invalidate(hash);
        s.unknown.remove(hash);
        // Other replicas forget it as unknown too: a registration is
        // announced on the revocation channel as `+<hash>`, which touches
        // only their caches of unknown hashes (their grant caches cannot
        // hold a grant for a hash that was never registered).
        s.query::<()>(
            redis::cmd("PUBLISH")
                .arg(s.keys.channel())
                .arg(format!("+{}", hash.to_hex())),
        )
        .await?;
        Ok(())
    }

    async fn renew(&self, grant: &Grant, hash: &TokenHash) -> Result<bool, RegistryError> {
        let s = &self.shared;
        let json = s.signed_record(grant, hash)?;
        let expire_at = grant
            .expires_at
            .plus_millis(EXPIRY_SLACK.as_millis() as i64)
            .as_millis();
        // The index keys first (GT: never shortened; one key per command,
        // as Redis Cluster needs), the token last and only if it is still
        // there: a revocation's DEL wins.
        for key in [
            s.keys.run(&grant.tenant, &grant.run),
            s.keys.grant(&grant.id),
        ] {
            s.query::<()>(redis::cmd("PEXPIREAT").arg(key).arg(expire_at).arg("GT"))
                .await?;
        }
        let set: Option<String> = s
            .query(
                redis::cmd("SET")
                    .arg(s.keys.token(hash))
                    .arg(json)
                    .arg("PXAT")
                    .arg(expire_at)
                    .arg("XX"),
            )
            .await?;
        s.cache.invalidate(hash);
        s.query::<()>(
            redis::cmd("PUBLISH")
                .arg(s.keys.channel())
                .arg(format!("~{}", hash.to_hex())),
        )
        .await?;
        Ok(set.is_some())
    }

    async fn resolve(&self, hash: &TokenHash) -> Result<Arc<Grant>, RegistryError> {
        let s = &self.shared;
        let now = Instant::now();
        if s.contact_is_fresh(now) && s.subscription_is_proven(now) {
            match s.cache.get(hash, now, Timestamp::now()) {
                Lookup::Hit(grant) => {
                    s.counters.cache_hits.fetch_add(1, Ordering::Relaxed);
                    return Ok(grant);
                }
                Lookup::Expired => {
                    s.counters.cache_hits.fetch_add(1, Ordering::Relaxed);
                    return Err(RegistryError::Expired);
                }
                Lookup::Miss => {}
            }
        }
        s.counters.cache_misses.fetch_add(1, Ordering::Relaxed);
        // Taken before the read: if any invalidation lands while the read is
        // in flight, what we read is not cached.
        let epoch = s.cache.epoch();
        let json = s.trusted_get(hash).await?;
        let Some(stored) = json else {
            return Err(RegistryError::UnknownToken);
        };
        let Some(json) = record::open(&s.record_key, hash, &stored) else {
            // Not signed by a key of ours for this hash: written by
            // whoever can write to Redis, or by a version that did not
            // sign. Unknown: a read-through registry then asks the ledger
            // (which rewrites a real grant's record, signed).
            s.counters
                .unverified_records
                .fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                "token registry: a grant record in Redis did not verify (forged, copied \
                 under another token, signed with a key no longer listed, or unsigned); refused"
            );
            return Err(RegistryError::UnknownToken);
        };
        let grant: Grant = serde_json::from_str(json).map_err(|e| {
            StoreError::Internal(format!("unreadable grant in the token registry: {e}"))
        })?;
        if grant.is_expired_at(Timestamp::now()) {
            return Err(RegistryError::Expired);
        }
        let grant = Arc::new(grant);
        if let Some(epoch) = epoch {
            s.cache
                .insert(epoch, *hash, Arc::clone(&grant), Instant::now());
        }
        Ok(grant)
    }

    async fn revoke(&self, grant: &GrantId) -> Result<bool, RegistryError> {
        self.revoke_one(grant, None).await
    }

    async fn revoke_hash(&self, grant: &GrantId, hash: &TokenHash) -> Result<bool, RegistryError> {
        self.revoke_one(grant, Some(*hash)).await
    }

    async fn still_resolves(&self, hash: &TokenHash) -> Result<bool, RegistryError> {
        let s = &self.shared;
        let exists: bool = s
            .query(redis::cmd("EXISTS").arg(s.keys.token(hash)))
            .await?;
        Ok(exists)
    }

    async fn revoke_run(
        &self,
        tenant: &TenantId,
        run: &RunId,
    ) -> Result<Vec<GrantId>, RegistryError> {
        let s = &self.shared;
        let run_key = s.keys.run(tenant, run);
        let members: Vec<String> = match s.query(redis::cmd("SMEMBERS").arg(&run_key)).await {
            Ok(members) => members,
            Err(err) => {
                // The ledger has the revocations; Redis is not trusted
                // until they have been replayed into it.
                s.trust.distrust();
                return Err(err);
            }
        };
        let mut revoked = Vec::new();
        for member in members {
            let Ok(id) = GrantId::parse(member) else {
                continue;
            };
            if self.revoke_one(&id, None).await? {
                revoked.push(id);
            }
        }
        s.query::<()>(redis::cmd("DEL").arg(&run_key)).await?;
        Ok(revoked)
    }

    async fn check(&self) -> Result<(), RegistryError> {
        self.shared.query::<()>(&redis::cmd("PING")).await
    }

    fn known_unknown(&self, hash: &TokenHash) -> bool {
        let s = &self.shared;
        let known = s.unknown.contains(hash, Instant::now());
        if known {
            s.counters.unknown_hits.fetch_add(1, Ordering::Relaxed);
        }
        known
    }

    fn remember_unknown(&self, hash: &TokenHash) {
        self.shared.unknown.insert(*hash, Instant::now());
    }
}

/// State shared by the registry and its subscription task.
struct Shared {
    keys: Keys,
    cache: GrantCache,
    unknown: UnknownCache,
    /// Milliseconds after `origin` until which Redis calls are refused at
    /// once; 0 when closed (see [`CIRCUIT_OPEN_FOR`]).
    circuit_open_until_ms: AtomicU64,
    connector: RedisConnector,
    grace: Duration,
    operation_timeout: Duration,
    origin: Instant,
    /// Milliseconds after `origin` of the last successful Redis reply.
    last_contact_ms: AtomicU64,
    /// One plus the milliseconds after `origin` of the revocation
    /// subscription's last sign of life; 0 while it is down.
    subscription_proof_ms: AtomicU64,
    contacted: AtomicBool,
    counters: Counters,
    /// Revocations whose Redis step failed, by grant, with the token hash
    /// when known: retried by [`retry_pending`] until Redis confirms.
    pending: std::sync::Mutex<std::collections::HashMap<GrantId, Option<TokenHash>>>,
    /// Where revocations are replayed from (see the module docs).
    ledger: OnceLock<Arc<dyn GrantLedger>>,
    /// Signs and verifies grant records (`record.rs`).
    record_key: SessionKey,
    trust: Trust,
}

#[derive(Default)]
struct Counters {
    cache_hits: AtomicU64,
    cache_misses: AtomicU64,
    redis_errors: AtomicU64,
    invalidations: AtomicU64,
    unknown_hits: AtomicU64,
    fast_failures: AtomicU64,
    unverified_records: AtomicU64,
}

/// Whether Redis's answers may be used: not until the ledger's revocations
/// have been replayed into it since the last reason to doubt it.
#[derive(Default)]
struct Trust {
    /// Whether the last replay is still good.
    verified: AtomicBool,
    /// Bumped by every reason to doubt Redis: a replay that started before
    /// one does not count as verifying.
    doubts: AtomicU64,
    /// The highest revocation epoch seen from Redis.
    seen_epoch: AtomicU64,
    /// One replay at a time; the others wait for its outcome.
    replaying: tokio::sync::Mutex<()>,
    replays: AtomicU64,
}

impl Trust {
    fn distrust(&self) {
        self.doubts.fetch_add(1, Ordering::SeqCst);
        self.verified.store(false, Ordering::SeqCst);
    }

    fn saw(&self, epoch: u64) {
        self.seen_epoch.fetch_max(epoch, Ordering::SeqCst);
    }
}

/// Raises the revocation epoch to at least ARGV[1] and returns it: after a
/// replay, Redis holds every revocation this registry has seen.
const RAISE_EPOCH: &str = "local c = tonumber(redis.call('GET', KEYS[1]) or '0') \
local s = tonumber(ARGV[1]) \
if c < s then redis.call('SET', KEYS[1], ARGV[1]) return s end \
return c";

/// First and longest wait between two retries of pending revocations.
const PENDING_RETRY_FIRST: Duration = Duration::from_millis(100);
const PENDING_RETRY_MAX: Duration = Duration::from_millis(500);

/// Revoked grants whose keys one replay deletes concurrently.
const REPLAY_BATCH: usize = 64;

impl Shared {
    /// The grant JSON behind `hash`, read from a Redis known to hold every
    /// revocation this registry has seen (replaying the ledger's first if
    /// it may not).
    async fn trusted_get(&self, hash: &TokenHash) -> Result<Option<String>, RegistryError> {
        for _ in 0..2 {
            self.verify().await?;
            let token = redis::cmd("GET").arg(self.keys.token(hash)).clone();
            let epoch = redis::cmd("GET").arg(self.keys.epoch()).clone();
            let (json, applied): (Option<String>, Option<u64>) =
                tokio::try_join!(self.query(&token), self.query(&epoch))?;
            let applied = applied.unwrap_or(0);
            if applied >= self.trust.seen_epoch.load(Ordering::SeqCst) {
                self.trust.saw(applied);
                return Ok(json);
            }
            tracing::warn!(
                applied,
                seen = self.trust.seen_epoch.load(Ordering::SeqCst),
                "token registry: Redis is behind the revocations already seen \
                 (restarted from a snapshot or failed over?); replaying the ledger's"
            );
            self.trust.distrust();
        }
        Err(RegistryError::Unavailable(
            "redis went back in time again during the revocation replay".into(),
        ))
    }

    /// Makes Redis trustworthy if it may not be: deletes the keys of every
    /// revoked, unexpired grant of the ledger, then raises Redis's epoch to
    /// what this registry has seen.
    async fn verify(&self) -> Result<(), RegistryError> {
        if self.trust.verified.load(Ordering::SeqCst) {
            return Ok(());
        }
        let _one = self.trust.replaying.lock().await;
        if self.trust.verified.load(Ordering::SeqCst) {
            return Ok(());
        }
        let doubts = self.trust.doubts.load(Ordering::SeqCst);
        if let Some(ledger) = self.ledger.get() {
            let revoked = ledger
                .revoked_grants(Timestamp::now())
                .await
                .map_err(|e| match e {
                    StoreError::Unavailable { reason, .. } => RegistryError::Unavailable(reason),
                    other => RegistryError::Store(other),
                })?;
            for batch in revoked.chunks(REPLAY_BATCH) {
                let deletions = batch.iter().map(|event| async move {
                    if let Some(hash) = TokenHash::from_hex(&event.token_hash) {
                        self.query::<()>(redis::cmd("DEL").arg(self.keys.token(&hash)))
                            .await?;
                        self.cache.invalidate(&hash);
                    }
                    self.query::<()>(redis::cmd("DEL").arg(self.keys.grant(&event.grant.id)))
                        .await
                });
                futures_util::future::try_join_all(deletions).await?;
            }
        }
        let seen = self.trust.seen_epoch.load(Ordering::SeqCst);
        let epoch: u64 = self
            .query(
                redis::cmd("EVAL")
                    .arg(RAISE_EPOCH)
                    .arg(1)
                    .arg(self.keys.epoch())
                    .arg(seen),
            )
            .await?;
        self.trust.saw(epoch);
        self.trust.replays.fetch_add(1, Ordering::Relaxed);
        // Only if nothing new cast doubt meanwhile; else the next call replays.
        if self.trust.doubts.load(Ordering::SeqCst) == doubts {
            self.trust.verified.store(true, Ordering::SeqCst);
        }
        Ok(())
    }

    fn touch(&self) {
        let ms = self.origin.elapsed().as_millis() as u64;
        self.last_contact_ms.fetch_max(ms, Ordering::Relaxed);
        self.contacted.store(true, Ordering::Relaxed);
    }

    /// The revocation subscription shows a sign of life.
    fn subscription_proved(&self) {
        let ms = self.origin.elapsed().as_millis() as u64 + 1;
        self.subscription_proof_ms.fetch_max(ms, Ordering::SeqCst);
    }

    fn subscription_lost(&self) {
        self.subscription_proof_ms.store(0, Ordering::SeqCst);
    }

    /// Whether the subscription showed a sign of life within
    /// [`SUBSCRIPTION_TRUST`] of `now` (so no invalidation can have been
    /// missed for longer than that).
    fn subscription_is_proven(&self, now: Instant) -> bool {
        let proof = self.subscription_proof_ms.load(Ordering::SeqCst);
        if proof == 0 {
            return false;
        }
        let since_origin = now.saturating_duration_since(self.origin).as_millis() as u64 + 1;
        Duration::from_millis(since_origin.saturating_sub(proof)) <= SUBSCRIPTION_TRUST
    }

    fn contact_is_fresh(&self, now: Instant) -> bool {
        if !self.contacted.load(Ordering::Relaxed) {
            return false;
        }
        let since_origin = now.saturating_duration_since(self.origin).as_millis() as u64;
        let last = self.last_contact_ms.load(Ordering::Relaxed);
        Duration::from_millis(since_origin.saturating_sub(last)) <= self.grace
    }

    fn failed(&self, what: &str, reason: impl fmt::Display) -> RegistryError {
        self.counters.redis_errors.fetch_add(1, Ordering::Relaxed);
        // Debug, not warn: during an outage every request fails here; the
        // subscription's lost/restored messages mark the outage at warn.
        tracing::debug!(error = %reason, "token registry: redis {what} failed");
        RegistryError::Unavailable(format!("redis {what} failed: {reason}"))
    }

    fn ms_since_origin(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.origin).as_millis() as u64
    }

    /// Whether calls are refused at once now (a recent call failed).
    fn circuit_refuses(&self, now: Instant) -> bool {
        self.ms_since_origin(now) < self.circuit_open_until_ms.load(Ordering::SeqCst)
    }

    /// Whether this call may go to Redis. Once the open period is over, the
    /// first call through is the probe: the others are refused while it is
    /// in flight, so an outage costs one operation timeout per period, not
    /// one per request.
    fn circuit_admits(&self) -> bool {
        let now = self.ms_since_origin(Instant::now());
        let until = self.circuit_open_until_ms.load(Ordering::SeqCst);
        if until == 0 {
            return true;
        }
        if now < until {
            return false;
        }
        let probe_until = now + self.operation_timeout.as_millis() as u64;
        self.circuit_open_until_ms
            .compare_exchange(until, probe_until, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }

    fn open_circuit(&self) {
        let until = self.ms_since_origin(Instant::now()) + CIRCUIT_OPEN_FOR.as_millis() as u64;
        self.circuit_open_until_ms
            .store(until.max(1), Ordering::SeqCst);
    }

    fn close_circuit(&self) {
        self.circuit_open_until_ms.store(0, Ordering::SeqCst);
    }

    async fn bounded<T>(
        &self,
        what: &str,
        call: impl Future<Output = RedisResult<T>>,
    ) -> Result<T, RegistryError> {
        if !self.circuit_admits() {
            self.counters.fast_failures.fetch_add(1, Ordering::Relaxed);
            return Err(RegistryError::Unavailable(format!(
                "redis {what} not attempted: Redis failed within the last {CIRCUIT_OPEN_FOR:?}"
            )));
        }
        match tokio::time::timeout(self.operation_timeout, call).await {
            Ok(Ok(value)) => {
                self.touch();
                self.close_circuit();
                Ok(value)
            }
            Ok(Err(e)) => {
                if is_connection_error(&e) || e.is_timeout() {
                    self.open_circuit();
                } else {
                    // Redis answered (with an error): it is reachable.
                    self.close_circuit();
                }
                Err(self.failed(what, e))
            }
            Err(_) => {
                self.open_circuit();
                Err(self.failed(
                    what,
                    format!("no answer within {:?}", self.operation_timeout),
                ))
            }
        }
    }

    async fn query<T: FromRedisValue + Send>(&self, cmd: &Cmd) -> Result<T, RegistryError> {
        let what = command_name(cmd);
        self.bounded(&what, async {
            let mut conn = self.connector.get().await?;
            match conn.query(cmd).await {
                // A connection that broke while idle is only noticed by the
                // next call, which has already started the reconnection:
                // one retry (our commands are idempotent) saves that call.
                Err(e) if is_connection_error(&e) => {
                    let mut conn = self.connector.get().await?;
                    conn.query(cmd).await
                }
                other => other,
            }
        })
        .await
    }

    async fn query_pipe<T: FromRedisValue + Send>(
        &self,
        pipe: &Pipeline,
    ) -> Result<T, RegistryError> {
        self.bounded("pipeline", async {
            let mut conn = self.connector.get().await?;
            match conn.query_pipe(pipe).await {
                Err(e) if is_connection_error(&e) => {
                    let mut conn = self.connector.get().await?;
                    conn.query_pipe(pipe).await
                }
                other => other,
            }
        })
        .await
    }
}

fn is_connection_error(e: &redis::RedisError) -> bool {
    e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal()
}

fn command_name(cmd: &Cmd) -> String {
    // Only the command's name: arguments carry key material.
    cmd.args_iter()
        .next()
        .and_then(|arg| match arg {
            redis::Arg::Simple(bytes) => std::str::from_utf8(bytes).ok().map(str::to_owned),
            redis::Arg::Cursor => None,
        })
        .unwrap_or_else(|| "command".into())
}

struct Keys {
    prefix: String,
}

impl Keys {
    fn token(&self, hash: &TokenHash) -> String {
        format!("{}tok:{}", self.prefix, hash.to_hex())
    }

    fn grant(&self, id: &GrantId) -> String {
        format!("{}grant:{}", self.prefix, id)
    }

    fn run(&self, tenant: &TenantId, run: &RunId) -> String {
        // Neither id can contain ':', so the key is unambiguous.
        format!("{}run:{}:{}", self.prefix, tenant, run)
    }

    fn channel(&self) -> String {
        format!("{}revocations", self.prefix)
    }

    fn epoch(&self) -> String {
        format!("{}revocation_epoch", self.prefix)
    }
}

/// What the revocation subscription does for the registry: drops revoked
/// hashes from the cache, and keeps the cache in use only while it is up.
/// Every message and answered PING proves Redis is reachable (refreshing
/// the grace window when every request is a cache hit).
struct Invalidations(Arc<Shared>);

impl SubscriptionHandler for Invalidations {
    fn up(&mut self) {
        self.0.touch();
        self.0.subscription_proved();
        self.0.close_circuit();
        // Revocations may have been missed, or Redis may have lost them;
        // registrations too (which a remembered unknown hash must hear of).
        self.0.trust.distrust();
        self.0.unknown.clear();
        self.0.cache.set_live(true);
    }

    fn message(&mut self, message: redis::Msg) {
        let shared = &self.0;
        shared.touch();
        shared.subscription_proved();
        let payload: String = message.get_payload().unwrap_or_default();
        if let Some(registered) = payload.strip_prefix('+') {
            if let Some(hash) = TokenHash::from_hex(registered) {
                shared.unknown.remove(&hash);
            }
            return;
        }
        if let Some(renewed) = payload.strip_prefix('~') {
            // A renewal: the cached copy has the old expiry.
            if let Some(hash) = TokenHash::from_hex(renewed) {
                shared.cache.invalidate(&hash);
                shared
                    .counters
                    .invalidations
                    .fetch_add(1, Ordering::Relaxed);
            }
            return;
        }
        // A revocation: `<hash>` or `<hash> <revocation epoch>`.
        let mut parts = payload.split(' ');
        let hash = parts.next().and_then(TokenHash::from_hex);
        if let Some(epoch) = parts.next().and_then(|e| e.parse::<u64>().ok()) {
            shared.trust.saw(epoch);
        }
        if let Some(hash) = hash {
            shared.cache.invalidate(&hash);
            shared.unknown.remove(&hash);
            shared
                .counters
                .invalidations
                .fetch_add(1, Ordering::Relaxed);
        }
    }

    fn alive(&mut self) {
        self.0.touch();
        self.0.subscription_proved();
        self.0.close_circuit();
    }

    fn lost(&mut self) {
        self.0.subscription_lost();
        self.0.cache.set_live(false);
        self.0.counters.redis_errors.fetch_add(1, Ordering::Relaxed);
    }

    fn failed(&mut self) {
        self.0.counters.redis_errors.fetch_add(1, Ordering::Relaxed);
    }
}

/// The revocation subscription of a registry sharing `shared`.
fn revocations(
    config: &RedisRegistryConfig,
    shared: &Shared,
) -> Result<Subscription, RegistryError> {
    let (heartbeat, ping_timeout) = revocation_heartbeat(config);
    let subscription = Subscription::new(
        &config.urls,
        Topic::Channel(shared.keys.channel()),
        config.operation_timeout,
    )
    .map_err(|e| invalid_url(&e))?
    .with_heartbeat(heartbeat)
    .with_ping_timeout(ping_timeout)
    .with_max_backoff(MAX_RESUBSCRIBE_BACKOFF)
    .with_log_names(
        "token registry: revocation subscription",
        "local cache bypassed until it is back",
    );
    Ok(subscription)
}

/// The revocation subscription's heartbeat and PING bound: together within
/// [`SUBSCRIPTION_TRUST`], so a silently dead subscription is noticed
/// before the cache would stop serving anyway.
fn revocation_heartbeat(config: &RedisRegistryConfig) -> (Duration, Duration) {
    let ping_timeout = REVOCATION_PING_TIMEOUT.min(config.operation_timeout);
    (REVOCATION_HEARTBEAT, ping_timeout)
}

fn validate(config: &RedisRegistryConfig) -> Result<(), RegistryError> {
    let invalid = |reason: &str| RegistryError::Invalid(ValidationError::new("redis", reason));
    if config.urls.is_empty() {
        return Err(invalid("at least one Redis URL is required"));
    }
    if config.operation_timeout.is_zero() {
        return Err(invalid("the operation timeout must be positive"));
    }
    if config.key_prefix.contains(['{', '}']) {
        return Err(invalid(
            "the key prefix must not contain '{' or '}' (it would become a cluster hash tag)",
        ));
    }
    Ok(())
}

fn invalid_url(e: &redis::RedisError) -> RegistryError {
    RegistryError::Invalid(ValidationError::new(
        "redis_url",
        format!("invalid Redis URL: {e}"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_redacted_in_debug() {
        let config = RedisRegistryConfig::new(["redis://:hunter2@cache:6379/0"]);
        let text = format!("{config:?}");
        assert!(!text.contains("hunter2"), "{text}");
        assert!(text.contains("redis://***@cache:6379/0"), "{text}");
        assert_eq!(redact_url("redis://host/"), "redis://host/");
    }

    #[test]
    fn several_urls_mean_a_cluster() {
        assert!(!RedisRegistryConfig::new(["redis://a/"]).is_cluster());
        assert!(
            RedisRegistryConfig::new(["redis://a/"])
                .with_cluster(true)
                .is_cluster()
        );
        assert!(RedisRegistryConfig::new(["redis://a/", "redis://b/"]).is_cluster());
    }

    #[actix_rt::test]
    async fn bad_configurations_are_refused_up_front() {
        let err = RedisRegistry::new(RedisRegistryConfig::new(Vec::<String>::new())).unwrap_err();
        assert!(matches!(err, RegistryError::Invalid(_)), "{err}");
        let err = RedisRegistry::new(RedisRegistryConfig::new(["nope://x"])).unwrap_err();
        assert!(err.to_string().contains("invalid Redis URL"), "{err}");
        let err = RedisRegistry::new(
            RedisRegistryConfig::new(["redis://127.0.0.1/"]).with_key_prefix("{t}:"),
        )
        .unwrap_err();
        assert!(err.to_string().contains("hash tag"), "{err}");
    }

    #[actix_rt::test]
    async fn the_cache_needs_recent_contact_with_redis() {
        let registry = RedisRegistry::new(RedisRegistryConfig::new([format!(
            "redis://127.0.0.1:{}/",
            unused_port()
        )]))
        .unwrap();
        let s = &registry.shared;
        assert!(!s.contact_is_fresh(Instant::now()), "never contacted");
        s.touch();
        let now = Instant::now();
        assert!(s.contact_is_fresh(now));
        assert!(s.contact_is_fresh(now + s.grace - Duration::from_millis(100)));
        assert!(!s.contact_is_fresh(now + s.grace + Duration::from_millis(100)));
    }

    #[actix_rt::test]
    async fn the_cache_needs_a_recently_proven_subscription() {
        let registry = RedisRegistry::new(RedisRegistryConfig::new([format!(
            "redis://127.0.0.1:{}/",
            unused_port()
        )]))
        .unwrap();
        let s = &registry.shared;
        assert!(
            !s.subscription_is_proven(Instant::now()),
            "never subscribed"
        );
        s.subscription_proved();
        let now = Instant::now();
        assert!(s.subscription_is_proven(now));
        assert!(!s.subscription_is_proven(now + SUBSCRIPTION_TRUST + Duration::from_millis(10)));
        s.subscription_lost();
        assert!(!s.subscription_is_proven(now), "lost: nothing is trusted");
    }

    #[test]
    fn a_silently_dead_subscription_is_noticed_within_the_revocation_contract() {
        // The 2.7 s: a 1 s heartbeat plus a 1 s PING timeout.
        let config = RedisRegistryConfig::new(["redis://127.0.0.1/"]);
        let (heartbeat, ping_timeout) = revocation_heartbeat(&config);
        assert!(heartbeat + ping_timeout <= SUBSCRIPTION_TRUST);
        assert!(SUBSCRIPTION_TRUST < Duration::from_secs(1));
    }

    fn unused_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap()
    }

    #[actix_rt::test]
    async fn an_unreachable_redis_fails_closed_within_the_timeout() {
        // A port nothing listens on: connection refused, retried, then
        // refused again; the call must come back Unavailable, not hang.
        let port = unused_port();
        let mut config = RedisRegistryConfig::new([format!("redis://127.0.0.1:{port}/")]);
        config.operation_timeout = Duration::from_millis(300);
        let registry = RedisRegistry::new(config).unwrap();
        let hash = crate::token::RunToken::generate().hash();
        let err = tokio::time::timeout(Duration::from_secs(30), registry.resolve(&hash))
            .await
            .expect("resolve must be bounded by the operation timeout")
            .unwrap_err();
        assert!(matches!(err, RegistryError::Unavailable(_)), "{err}");
        assert!(registry.check().await.is_err());
        assert!(registry.stats().redis_errors >= 2);
        assert!(
            RedisRegistry::connect(RedisRegistryConfig::new([format!(
                "redis://127.0.0.1:{port}/"
            )]))
            .await
            .is_err()
        );
    }
}
