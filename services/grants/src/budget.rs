//! Per-run write budgets: what a grant's run has written of each budgeted
//! kind, counted behind [`BudgetCounter`] so that every replica serving
//! the run takes from the same count.
//!
//! Two backends, chosen in the composition root like the token registry:
//! [`LedgerBudgets`] counts in the board store's ledger (one conditional
//! write per reservation: SQLite's upsert `WHERE used < limit` in its
//! writer, MongoDB's `findOneAndUpdate` under a `$lt` filter), the default
//! and right for every process sharing one store; [`RedisBudgets`] counts
//! in Redis (one script per reservation, a key per grant and kind expiring
//! after the latest moment the grant could still live) when the registry
//! is Redis, so the check costs one round trip to Redis instead of a store
//! write.
//!
//! A reservation is taken *before* the write and given back when the write
//! definitely did not happen; the tools crate decides which (see
//! `corkboard_tools`). Counting fails closed: a counter that cannot answer
//! refuses the write as unavailable (retryable), never lets it through
//! uncounted.

use crate::redis_conn::RedisConnector;
use async_trait::async_trait;
use corkboard_board::{BudgetKind, BudgetStatus, Grant, GrantLedger, StoreError};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;
use tokio::runtime::Handle;

/// A budget counter could not answer; nothing was taken (or, for a
/// release, given back).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("budget counter unavailable: {0}")]
pub struct BudgetUnavailable(pub String);

impl From<StoreError> for BudgetUnavailable {
    fn from(err: StoreError) -> Self {
        Self(err.to_string())
    }
}

/// What a reservation found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reservation {
    /// One write of the kind is taken from the budget (or the kind has no
    /// budget on this grant and nothing was counted).
    Taken,
    /// The budget is spent: the grant's limit of this kind is used up.
    Exhausted { limit: u32 },
}

/// Counts the writes of budgeted grants, shared by every replica.
#[async_trait]
pub trait BudgetCounter: Send + Sync + 'static {
    /// Takes one write of `kind` from `grant`'s budget, atomically: of
    /// racing callers (any replica) at most the limit succeed in all. A
    /// kind the grant has no budget for is [`Reservation::Taken`] without
    /// any IO.
    async fn reserve(
        &self,
        grant: &Grant,
        kind: BudgetKind,
    ) -> Result<Reservation, BudgetUnavailable>;

    /// Gives back a reservation whose write did not happen.
    async fn release(&self, grant: &Grant, kind: BudgetKind) -> Result<(), BudgetUnavailable>;

    /// Writes taken so far, per budgeted kind of `grant`.
    async fn used(&self, grant: &Grant) -> Result<BTreeMap<BudgetKind, u32>, BudgetUnavailable>;

    /// Limit, used and remaining of each of `grant`'s budgets.
    async fn status(
        &self,
        grant: &Grant,
    ) -> Result<BTreeMap<BudgetKind, BudgetStatus>, BudgetUnavailable> {
        if grant.budgets.is_empty() {
            return Ok(BTreeMap::new());
        }
        let used = self.used(grant).await?;
        Ok(grant
            .budgets
            .iter()
            .map(|(kind, limit)| {
                let used = used.get(&kind).copied().unwrap_or(0).min(limit);
                (kind, BudgetStatus::new(limit, used))
            })
            .collect())
    }
}

/// Budgets counted in the board store's grant ledger.
#[derive(Clone)]
pub struct LedgerBudgets {
    ledger: Arc<dyn GrantLedger>,
}

impl std::fmt::Debug for LedgerBudgets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LedgerBudgets").finish_non_exhaustive()
    }
}

impl LedgerBudgets {
    pub fn new(ledger: Arc<dyn GrantLedger>) -> Self {
        Self { ledger }
    }
}

#[async_trait]
impl BudgetCounter for LedgerBudgets {
    async fn reserve(
        &self,
        grant: &Grant,
        kind: BudgetKind,
    ) -> Result<Reservation, BudgetUnavailable> {
        let Some(limit) = grant.budgets.limit(kind) else {
            return Ok(Reservation::Taken);
        };
        Ok(
            if self.ledger.reserve_budget(&grant.id, kind, limit).await? {
                Reservation::Taken
            } else {
                Reservation::Exhausted { limit }
            },
        )
    }

    async fn release(&self, grant: &Grant, kind: BudgetKind) -> Result<(), BudgetUnavailable> {
        if grant.budgets.limit(kind).is_none() {
            return Ok(());
        }
        Ok(self.ledger.release_budget(&grant.id, kind).await?)
    }

    async fn used(&self, grant: &Grant) -> Result<BTreeMap<BudgetKind, u32>, BudgetUnavailable> {
        if grant.budgets.is_empty() {
            return Ok(BTreeMap::new());
        }
        Ok(self.ledger.budget_used(&grant.id).await?)
    }
}

/// The reservation, atomic in Redis. KEYS[1]: the grant's counter of one
/// kind; ARGV: the limit, the key's expiry (unix ms). Adds one only while
/// below the limit; returns `{taken (0|1), used}`.
const RESERVE_SCRIPT: &str = r"
local limit = tonumber(ARGV[1])
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
if used >= limit then
  return {0, used}
end
used = redis.call('INCR', KEYS[1])
redis.call('PEXPIREAT', KEYS[1], ARGV[2])
return {1, used}
";

/// The release: one less, never below zero (a key that expired stays gone).
const RELEASE_SCRIPT: &str = r"
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
if used > 0 then
  redis.call('DECR', KEYS[1])
end
return 0
";

fn sha1_hex(text: &str) -> String {
    use sha1::Digest;
    hex::encode(sha1::Sha1::digest(text.as_bytes()))
}

/// Budgets counted in Redis, shared by every replica using the same Redis
/// and key prefix. Keys: `<prefix>budget:<grant>:<kind>`, expiring at the
/// grant's creation plus the maximum lifetime (the latest a grant can be
/// renewed to), so a renewed grant keeps its count and a dead one's goes.
pub struct RedisBudgets {
    prefix: String,
    timeout: Duration,
    max_lifetime: Duration,
    redis: RedisConnector,
    reserve_sha: String,
    release_sha: String,
}

impl std::fmt::Debug for RedisBudgets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisBudgets")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl RedisBudgets {
    /// One URL is a single node; several are Redis Cluster seeds. Does not
    /// connect yet. Must be called inside the Tokio runtime that should own
    /// the connection. `max_lifetime` is the grants' maximum lifetime (the
    /// counters must outlive every renewal).
    pub fn new(
        urls: &[String],
        key_prefix: &str,
        timeout: Duration,
        max_lifetime: Duration,
    ) -> Result<Self, BudgetUnavailable> {
        let handle = Handle::try_current().map_err(|_| {
            BudgetUnavailable("the Redis budget counter needs a Tokio runtime".to_owned())
        })?;
        if urls.is_empty() {
            return Err(BudgetUnavailable(
                "redis_url is required for the shared budget counter".to_owned(),
            ));
        }
        let redis = RedisConnector::new(urls, urls.len() > 1, timeout, handle)
            .map_err(|e| BudgetUnavailable(format!("not a usable Redis URL: {}", e.category())))?;
        Ok(Self {
            prefix: key_prefix.to_owned(),
            timeout,
            max_lifetime,
            redis,
            reserve_sha: sha1_hex(RESERVE_SCRIPT),
            release_sha: sha1_hex(RELEASE_SCRIPT),
        })
    }

    fn key(&self, grant: &Grant, kind: BudgetKind) -> String {
        format!("{}budget:{}:{}", self.prefix, grant.id, kind.as_str())
    }

    /// When the counters of `grant` may go: after the latest expiry any
    /// renewal could give it, an hour of slack for clocks.
    fn expires_at_ms(&self, grant: &Grant) -> i64 {
        let life = i64::try_from(self.max_lifetime.as_millis()).unwrap_or(i64::MAX / 2);
        let latest = grant
            .created_at
            .as_millis()
            .saturating_add(life)
            .max(grant.expires_at.as_millis());
        latest.saturating_add(3_600_000)
    }

    /// Runs a script by its hash, sending it whole only when this node
    /// does not have it cached (the rate limiter's pattern).
    async fn script<T: redis::FromRedisValue>(
        &self,
        script: &str,
        sha: &str,
        key: &str,
        args: &[String],
    ) -> Result<T, BudgetUnavailable> {
        let call = async {
            let build = |cmd: &mut redis::Cmd| {
                cmd.arg(1).arg(key);
                for arg in args {
                    cmd.arg(arg);
                }
            };
            let mut conn = self.redis.get().await?;
            let mut by_hash = redis::cmd("EVALSHA");
            by_hash.arg(sha);
            build(&mut by_hash);
            match conn.query(&by_hash).await {
                Err(err) if err.kind() == redis::ErrorKind::NoScriptError => {
                    let mut whole = redis::cmd("EVAL");
                    whole.arg(script);
                    build(&mut whole);
                    conn.query(&whole).await
                }
                other => other,
            }
        };
        match tokio::time::timeout(self.timeout, call).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(err)) => {
                if err.is_io_error() || err.is_connection_dropped() {
                    self.redis.reset();
                }
                Err(BudgetUnavailable(format!("Redis: {}", err.category())))
            }
            Err(_elapsed) => Err(BudgetUnavailable(format!(
                "Redis did not answer within {} ms",
                self.timeout.as_millis()
            ))),
        }
    }
}

#[async_trait]
impl BudgetCounter for RedisBudgets {
    async fn reserve(
        &self,
        grant: &Grant,
        kind: BudgetKind,
    ) -> Result<Reservation, BudgetUnavailable> {
        let Some(limit) = grant.budgets.limit(kind) else {
            return Ok(Reservation::Taken);
        };
        let (taken, _used): (i64, i64) = self
            .script(
                RESERVE_SCRIPT,
                &self.reserve_sha,
                &self.key(grant, kind),
                &[limit.to_string(), self.expires_at_ms(grant).to_string()],
            )
            .await?;
        Ok(if taken == 1 {
            Reservation::Taken
        } else {
            Reservation::Exhausted { limit }
        })
    }

    async fn release(&self, grant: &Grant, kind: BudgetKind) -> Result<(), BudgetUnavailable> {
        if grant.budgets.limit(kind).is_none() {
            return Ok(());
        }
        let _: i64 = self
            .script(
                RELEASE_SCRIPT,
                &self.release_sha,
                &self.key(grant, kind),
                &[],
            )
            .await?;
        Ok(())
    }

    async fn used(&self, grant: &Grant) -> Result<BTreeMap<BudgetKind, u32>, BudgetUnavailable> {
        let mut out = BTreeMap::new();
        // One GET per kind (at most three): keys of one grant may sit on
        // different cluster slots, so no MGET.
        for (kind, _) in grant.budgets.iter() {
            let key = self.key(grant, kind);
            let call = async {
                let mut conn = self.redis.get().await?;
                conn.query::<Option<i64>>(redis::cmd("GET").arg(&key)).await
            };
            let used = match tokio::time::timeout(self.timeout, call).await {
                Ok(Ok(used)) => used.unwrap_or(0),
                Ok(Err(err)) => {
                    return Err(BudgetUnavailable(format!("Redis: {}", err.category())));
                }
                Err(_) => return Err(BudgetUnavailable("Redis did not answer in time".into())),
            };
            out.insert(kind, u32::try_from(used.max(0)).unwrap_or(u32::MAX));
        }
        Ok(out)
    }
}
