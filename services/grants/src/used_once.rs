//! Values that may be used once: a record of the ones already used,
//! shared by every replica that accepts them.
//!
//! The relay hands agents sealed values that any replica accepts (a
//! 2026-07-28 `requestState`, the id of a request relayed to a 2025
//! agent; `corkboard_mcp::relay::seal`). A seal proves a value genuine and
//! current, not unused: replayed within its expiry, it would run the
//! upstream's confirmed action again, or deliver an answer again. So the
//! relay records each value's nonce here when it acts on one, until the
//! value's own expiry (a later presentation is refused by the seal
//! anyway), and refuses it when it is already recorded.
//!
//! Backends, chosen in the composition root like the budget counter:
//! [`RedisUsedOnce`] (one `SET NX PX` per use: atomic across replicas, the
//! key expiring with the value) when the registry is Redis, else
//! [`LedgerUsedOnce`] (one conditional write in the board store's ledger,
//! so every process sharing one data dir or database shares the record).
//! [`MemoryUsedOnce`] (this process only, bounded) is for callers with no
//! store. Fails closed: a record that cannot answer refuses the use
//! (retryable), never lets it through unrecorded.

use crate::redis_conn::RedisConnector;
use async_trait::async_trait;
use corkboard_board::{GrantLedger, StoreError, Timestamp};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use thiserror::Error;
use tokio::runtime::Handle;

/// The record could not answer, or (in memory) is full; the value was not
/// recorded, so using it again later is safe.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("used-once record unavailable: {0}")]
pub struct UsedOnceUnavailable(pub String);

impl From<StoreError> for UsedOnceUnavailable {
    fn from(err: StoreError) -> Self {
        Self(err.to_string())
    }
}

/// What recording a use found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirstUse {
    /// Not used before: recorded now, go ahead.
    First,
    /// Already recorded (on any replica sharing the record): a replay.
    Replayed,
}

/// How long past a value's expiry its record is kept: replicas' clocks
/// may differ by this much, and a value one of them still accepts must
/// still be recorded.
pub const CLOCK_SLACK: Duration = Duration::from_secs(60);

/// The default bound of [`MemoryUsedOnce`]: values used within one
/// expiry (10 minutes for relayed values) in one process.
pub const DEFAULT_MEMORY_CAPACITY: usize = 65_536;

/// Records values as used, once, across every replica sharing it.
#[async_trait]
pub trait UsedOnce: Send + Sync + 'static {
    /// Records `id` of `kind` (a namespace: `relay-state`, `relay-id`) as
    /// used until `expires_at` (Unix seconds, the value's own expiry) plus
    /// [`CLOCK_SLACK`]: [`FirstUse::First`] the first time, atomically, so
    /// of racing callers on any replica exactly one gets it.
    async fn first_use(
        &self,
        kind: &'static str,
        id: &[u8],
        expires_at: u64,
    ) -> Result<FirstUse, UsedOnceUnavailable>;

    /// Whether `id` of `kind` is recorded (and its record live), without
    /// recording anything.
    async fn recorded(&self, kind: &'static str, id: &[u8]) -> Result<bool, UsedOnceUnavailable>;
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The record in this process: right for one process (the embedded
/// default), not for replicas. At most `capacity` values; records past
/// their expiry go first, and when none has expired a use is refused as
/// unavailable rather than forgetting a live record (which would let its
/// value be replayed).
#[derive(Debug)]
pub struct MemoryUsedOnce {
    capacity: usize,
    used: Mutex<HashMap<(&'static str, Vec<u8>), u64>>,
}

impl Default for MemoryUsedOnce {
    fn default() -> Self {
        Self::new(DEFAULT_MEMORY_CAPACITY)
    }
}

impl MemoryUsedOnce {
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            used: Mutex::new(HashMap::new()),
        }
    }

    /// Records `id` at `now` (Unix seconds).
    fn record(
        &self,
        kind: &'static str,
        id: &[u8],
        expires_at: u64,
        now: u64,
    ) -> Result<FirstUse, UsedOnceUnavailable> {
        // A poisoned lock still holds whole entries: every critical section
        // is one map operation.
        let mut used = self.used.lock().unwrap_or_else(|p| p.into_inner());
        let key = (kind, id.to_vec());
        if used.get(&key).is_some_and(|&until| until > now) {
            return Ok(FirstUse::Replayed);
        }
        if used.len() >= self.capacity {
            used.retain(|_, until| *until > now);
        }
        if used.len() >= self.capacity {
            return Err(UsedOnceUnavailable(format!(
                "{} values are recorded as used in this process, its bound; retry once some expire",
                self.capacity
            )));
        }
        used.insert(key, expires_at.saturating_add(CLOCK_SLACK.as_secs()));
        Ok(FirstUse::First)
    }
}

#[async_trait]
impl UsedOnce for MemoryUsedOnce {
    async fn first_use(
        &self,
        kind: &'static str,
        id: &[u8],
        expires_at: u64,
    ) -> Result<FirstUse, UsedOnceUnavailable> {
        self.record(kind, id, expires_at, now_secs())
    }

    async fn recorded(&self, kind: &'static str, id: &[u8]) -> Result<bool, UsedOnceUnavailable> {
        let used = self.used.lock().unwrap_or_else(|p| p.into_inner());
        Ok(used
            .get(&(kind, id.to_vec()))
            .is_some_and(|&until| until > now_secs()))
    }
}

/// The record in the board store's ledger (`GrantLedger::record_first_use`):
/// one conditional write per use, shared by every process on the same
/// store (several runners on one SQLite data dir, `serve` beside them).
pub struct LedgerUsedOnce {
    ledger: Arc<dyn GrantLedger>,
}

impl std::fmt::Debug for LedgerUsedOnce {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LedgerUsedOnce").finish_non_exhaustive()
    }
}

impl LedgerUsedOnce {
    pub fn new(ledger: Arc<dyn GrantLedger>) -> Self {
        Self { ledger }
    }
}

#[async_trait]
impl UsedOnce for LedgerUsedOnce {
    async fn first_use(
        &self,
        kind: &'static str,
        id: &[u8],
        expires_at: u64,
    ) -> Result<FirstUse, UsedOnceUnavailable> {
        let until = expires_at.saturating_add(CLOCK_SLACK.as_secs());
        let until_ms = i64::try_from(until.saturating_mul(1000)).unwrap_or(i64::MAX);
        let first = self
            .ledger
            .record_first_use(
                kind,
                &hex::encode(id),
                Timestamp::from_millis(until_ms),
                Timestamp::now(),
            )
            .await?;
        Ok(if first {
            FirstUse::First
        } else {
            FirstUse::Replayed
        })
    }

    async fn recorded(&self, kind: &'static str, id: &[u8]) -> Result<bool, UsedOnceUnavailable> {
        Ok(self
            .ledger
            .first_use_recorded(kind, &hex::encode(id), Timestamp::now())
            .await?)
    }
}

/// The record in Redis, shared by every replica using the same Redis and
/// key prefix. Keys: `<prefix>used:<kind>:<hex id>`, set with `NX` and
/// expiring with the value (plus [`CLOCK_SLACK`]).
pub struct RedisUsedOnce {
    prefix: String,
    timeout: Duration,
    redis: RedisConnector,
}

impl std::fmt::Debug for RedisUsedOnce {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisUsedOnce")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl RedisUsedOnce {
    /// One URL is a single node; several are Redis Cluster seeds. Does not
    /// connect yet. Must be called inside the Tokio runtime that should own
    /// the connection; `timeout` bounds each use.
    pub fn new(
        urls: &[String],
        key_prefix: &str,
        timeout: Duration,
    ) -> Result<Self, UsedOnceUnavailable> {
        let handle = Handle::try_current().map_err(|_| {
            UsedOnceUnavailable("the Redis used-once record needs a Tokio runtime".to_owned())
        })?;
        if urls.is_empty() {
            return Err(UsedOnceUnavailable(
                "redis_url is required for the shared used-once record".to_owned(),
            ));
        }
        let redis = RedisConnector::new(urls, urls.len() > 1, timeout, handle).map_err(|e| {
            UsedOnceUnavailable(format!("not a usable Redis URL: {}", e.category()))
        })?;
        Ok(Self {
            prefix: key_prefix.to_owned(),
            timeout,
            redis,
        })
    }

    fn key(&self, kind: &str, id: &[u8]) -> String {
        format!("{}used:{kind}:{}", self.prefix, hex::encode(id))
    }
}

#[async_trait]
impl UsedOnce for RedisUsedOnce {
    async fn first_use(
        &self,
        kind: &'static str,
        id: &[u8],
        expires_at: u64,
    ) -> Result<FirstUse, UsedOnceUnavailable> {
        let left = expires_at.saturating_sub(now_secs());
        let ttl_ms = Duration::from_secs(left)
            .saturating_add(CLOCK_SLACK)
            .as_millis();
        let mut cmd = redis::cmd("SET");
        cmd.arg(self.key(kind, id))
            .arg(1)
            .arg("NX")
            .arg("PX")
            .arg(u64::try_from(ttl_ms).unwrap_or(u64::MAX));
        Ok(match self.query::<Option<String>>(&cmd).await? {
            Some(_) => FirstUse::First,
            None => FirstUse::Replayed,
        })
    }

    async fn recorded(&self, kind: &'static str, id: &[u8]) -> Result<bool, UsedOnceUnavailable> {
        let mut cmd = redis::cmd("EXISTS");
        cmd.arg(self.key(kind, id));
        Ok(self.query::<i64>(&cmd).await? > 0)
    }
}

impl RedisUsedOnce {
    /// One command within the timeout; a broken connection is dropped so
    /// the next call reconnects.
    async fn query<T: redis::FromRedisValue>(
        &self,
        cmd: &redis::Cmd,
    ) -> Result<T, UsedOnceUnavailable> {
        let call = async {
            let mut conn = self.redis.get().await?;
            conn.query::<T>(cmd).await
        };
        match tokio::time::timeout(self.timeout, call).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(err)) => {
                if err.is_io_error() || err.is_connection_dropped() {
                    self.redis.reset();
                }
                Err(UsedOnceUnavailable(format!("Redis: {}", err.category())))
            }
            Err(_elapsed) => Err(UsedOnceUnavailable(format!(
                "Redis did not answer within {} ms",
                self.timeout.as_millis()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_used_once_until_its_expiry_and_a_full_record_refuses() {
        let record = MemoryUsedOnce::new(2);
        assert_eq!(record.record("k", b"a", 100, 10), Ok(FirstUse::First));
        assert_eq!(record.record("k", b"a", 100, 11), Ok(FirstUse::Replayed));
        assert_eq!(
            record.record("other", b"a", 100, 11),
            Ok(FirstUse::First),
            "kinds are separate namespaces"
        );
        // Full, nothing expired: refused, never a forgotten live record.
        let full = record.record("k", b"b", 100, 12).unwrap_err();
        assert!(full.to_string().contains("2 values are recorded"), "{full}");
        assert_eq!(record.record("k", b"a", 100, 12), Ok(FirstUse::Replayed));
        // Past expiry plus the slack the records go, making room.
        let later = 100 + CLOCK_SLACK.as_secs() + 1;
        assert_eq!(record.record("k", b"b", 900, later), Ok(FirstUse::First));
    }
}
