//! Per-run rate limits: a token bucket per run, behind [`RateLimiter`].
//! Here, below both, so run gateways and the studio endpoint meter runs
//! with the same limiter.
//!
//! In one process the bucket lives in memory ([`LocalRateLimiter`]). When
//! several runner pods serve the same run (shared mode behind a Kubernetes
//! Service) the budget must be shared too, or each pod would grant the full
//! rate: [`RedisRateLimiter`] keeps the bucket in Redis and updates it in
//! one Lua script, timed by the Redis server's clock so pods with skewed
//! clocks agree; each pod leases a few tokens at a time so a request does
//! not wait for Redis.

use crate::redis_conn::RedisConnector;
use crate::run_key::RunKey;
use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use thiserror::Error;
use tokio::runtime::Handle;

/// Why a rate limiter could not be built.
#[derive(Debug, Error)]
pub enum LimiterError {
    #[error("rate limiter: {0}")]
    Runtime(String),
    #[error("{key}: {reason}")]
    Config { key: &'static str, reason: String },
}

/// A sustained rate and a burst.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    pub per_second: u32,
    pub burst: u32,
}

/// The run's budget is spent; `retry_after` says when one more request fits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("rate limit reached; retry in {} ms", .retry_after.as_millis())]
pub struct RateLimited {
    pub retry_after: Duration,
}

/// Takes one request's worth from a run's budget.
#[async_trait]
pub trait RateLimiter: Send + Sync + 'static {
    async fn acquire(&self, run: &RunKey) -> Result<(), RateLimited>;

    /// The run stopped on this runner: drop any state kept for it here.
    fn forget(&self, run: &RunKey);
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Token buckets in this process's memory.
#[derive(Debug)]
pub struct LocalRateLimiter {
    limit: RateLimit,
    buckets: Mutex<HashMap<RunKey, Bucket>>,
}

impl LocalRateLimiter {
    pub fn new(limit: RateLimit) -> Self {
        Self {
            limit,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Runs with a bucket right now (for leak checks).
    pub fn tracked(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<RunKey, Bucket>> {
        // Each critical section is a lookup and two float writes.
        self.buckets
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[async_trait]
impl RateLimiter for LocalRateLimiter {
    async fn acquire(&self, run: &RunKey) -> Result<(), RateLimited> {
        let now = Instant::now();
        let rate = f64::from(self.limit.per_second.max(1));
        let burst = f64::from(self.limit.burst.max(1));
        let mut buckets = self.lock();
        let bucket = buckets.entry(run.clone()).or_insert(Bucket {
            tokens: burst,
            at: now,
        });
        let refill = now.saturating_duration_since(bucket.at).as_secs_f64() * rate;
        bucket.tokens = (bucket.tokens + refill).min(burst);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            let wait = (1.0 - bucket.tokens) / rate;
            Err(RateLimited {
                retry_after: Duration::from_secs_f64(wait).max(Duration::from_millis(1)),
            })
        }
    }

    fn forget(&self, run: &RunKey) {
        self.lock().remove(run);
    }
}

/// The bucket update, atomic in Redis. KEYS[1]: the run's bucket;
/// ARGV: rate per second, burst, key lifetime in ms, tokens wanted.
/// Takes up to the tokens wanted (at least one, or none) and returns
/// `{granted, wait_ms}`; `wait_ms` says when one token will be there when
/// none was granted.
const BUCKET_SCRIPT: &str = r"
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local want = tonumber(ARGV[4])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1])
local at = tonumber(state[2])
if tokens == nil or at == nil then
  tokens = burst
  at = now
end
if now > at then
  tokens = math.min(burst, tokens + (now - at) * rate / 1000)
  at = now
end
local granted = math.min(want, math.floor(tokens))
local wait = 0
if granted >= 1 then
  tokens = tokens - granted
else
  granted = 0
  wait = math.ceil((1 - tokens) * 1000 / rate)
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(at))
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {granted, wait}
";

/// How long tokens taken from Redis may be spent locally. Unspent ones are
/// dropped (never given back): a lease can only make the limit stricter,
/// never looser.
const LEASE_LIFETIME: Duration = Duration::from_secs(1);

/// Tokens taken from Redis but not yet spent by this pod.
#[derive(Debug, Clone, Copy)]
struct Lease {
    tokens: u32,
    until: Instant,
}

/// Token buckets in Redis, shared by every runner pod.
///
/// A round trip per request would put Redis in every tool call's path (and
/// its CPU on the same cores in a small deployment). Each pod instead takes
/// a small *lease* of tokens in one script call (a tenth of a second's
/// budget, 1 to 64 tokens) and spends it locally. The pods together still
/// never spend more than the shared bucket holds: a leased token is taken
/// from the bucket when it is leased, and a lease that is not spent within
/// [`LEASE_LIFETIME`] is dropped.
///
/// Fails open: when Redis does not answer within the operation timeout the
/// request is allowed (and a warning logged). Rate limiting protects the
/// board from a runaway agent; refusing every agent because Redis hiccuped
/// would be the larger harm, and tokens themselves still fail closed.
pub struct RedisRateLimiter {
    limit: RateLimit,
    prefix: String,
    timeout: Duration,
    redis: RedisConnector,
    script_sha: String,
    leases: Mutex<HashMap<RunKey, Lease>>,
}

impl std::fmt::Debug for RedisRateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisRateLimiter")
            .field("limit", &self.limit)
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl RedisRateLimiter {
    /// One URL is a single node; several are Redis Cluster seeds. Does not
    /// connect yet. Must be called inside the Tokio runtime that should own
    /// the connection (a long-lived one: connections are driven there).
    pub fn new(
        limit: RateLimit,
        urls: &[String],
        key_prefix: &str,
        timeout: Duration,
    ) -> Result<Self, LimiterError> {
        let handle = Handle::try_current().map_err(|_| {
            LimiterError::Runtime("the Redis rate limiter needs a Tokio runtime".to_owned())
        })?;
        let bad_url = |e: redis::RedisError| LimiterError::Config {
            key: "redis_url",
            reason: format!("not a usable Redis URL: {}", e.category()),
        };
        if urls.is_empty() {
            return Err(LimiterError::Config {
                key: "redis_url",
                reason: "required for the shared rate limiter".to_owned(),
            });
        }
        let redis = RedisConnector::new(urls, urls.len() > 1, timeout, handle).map_err(bad_url)?;
        Ok(Self {
            limit,
            prefix: key_prefix.to_owned(),
            timeout,
            redis,
            script_sha: {
                use sha1::Digest;
                hex::encode(sha1::Sha1::digest(BUCKET_SCRIPT.as_bytes()))
            },
            leases: Mutex::new(HashMap::new()),
        })
    }

    fn key(&self, run: &RunKey) -> String {
        format!("{}ratelimit:{}:{}", self.prefix, run.tenant, run.run)
    }

    /// Tokens one script call asks for: a tenth of a second's budget,
    /// within 1..=64 and never more than the burst.
    fn lease_size(&self) -> u32 {
        (self.limit.per_second / 10)
            .clamp(1, 64)
            .min(self.limit.burst.max(1))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<RunKey, Lease>> {
        // Each critical section is a lookup and an integer update.
        self.leases
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Spends one leased token of `run`, if this pod holds a live one.
    fn spend_leased(&self, run: &RunKey) -> bool {
        let mut leases = self.lock();
        match leases.get_mut(run) {
            Some(lease) if lease.tokens > 0 && lease.until > Instant::now() => {
                lease.tokens -= 1;
                true
            }
            Some(_) => {
                leases.remove(run);
                false
            }
            None => false,
        }
    }

    /// Keeps `extra` tokens granted beyond the one being spent now.
    fn keep_leased(&self, run: &RunKey, extra: u32) {
        if extra == 0 {
            return;
        }
        let until = Instant::now() + LEASE_LIFETIME;
        let mut leases = self.lock();
        let lease = leases
            .entry(run.clone())
            .or_insert(Lease { tokens: 0, until });
        lease.tokens = lease.tokens.saturating_add(extra);
        lease.until = until;
    }

    /// Runs the bucket script by its hash (`EVALSHA`), sending the script
    /// itself only when this Redis node does not have it cached yet.
    async fn run_script(&self, key: String) -> redis::RedisResult<(i64, i64)> {
        let ttl_ms = self.key_lifetime().as_millis().to_string();
        let args = |cmd: &mut redis::Cmd| {
            cmd.arg(1)
                .arg(&key)
                .arg(self.limit.per_second.max(1))
                .arg(self.limit.burst.max(1))
                .arg(&ttl_ms)
                .arg(self.lease_size());
        };
        let mut conn = self.redis.get().await?;
        let mut by_hash = redis::cmd("EVALSHA");
        by_hash.arg(&self.script_sha);
        args(&mut by_hash);
        match conn.query(&by_hash).await {
            Err(err) if err.kind() == redis::ErrorKind::NoScriptError => {
                let mut whole = redis::cmd("EVAL");
                whole.arg(BUCKET_SCRIPT);
                args(&mut whole);
                conn.query(&whole).await
            }
            other => other,
        }
    }

    /// Long enough for an idle bucket to refill completely, so forgetting
    /// it changes nothing.
    fn key_lifetime(&self) -> Duration {
        let refill = f64::from(self.limit.burst.max(1)) / f64::from(self.limit.per_second.max(1));
        Duration::from_secs_f64(refill.ceil() + 60.0)
    }
}

#[async_trait]
impl RateLimiter for RedisRateLimiter {
    async fn acquire(&self, run: &RunKey) -> Result<(), RateLimited> {
        if self.spend_leased(run) {
            return Ok(());
        }
        match tokio::time::timeout(self.timeout, self.run_script(self.key(run))).await {
            Ok(Ok((granted, _))) if granted >= 1 => {
                self.keep_leased(run, u32::try_from(granted - 1).unwrap_or(0));
                Ok(())
            }
            Ok(Ok((_, wait_ms))) => Err(RateLimited {
                retry_after: Duration::from_millis(u64::try_from(wait_ms).unwrap_or(1).max(1)),
            }),
            Ok(Err(err)) => {
                if err.is_io_error() || err.is_connection_dropped() {
                    // Let the next call reconnect from scratch.
                    self.redis.reset();
                }
                tracing::warn!(run = %run, error = %err.category(), "rate limiter: Redis failed; allowing the request");
                Ok(())
            }
            Err(_elapsed) => {
                tracing::warn!(run = %run, "rate limiter: Redis did not answer in time; allowing the request");
                Ok(())
            }
        }
    }

    fn forget(&self, run: &RunKey) {
        // Other pods may still serve the run; its Redis key expires by
        // itself. This pod's unspent lease goes.
        self.lock().remove(run);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corkboard_board::{RunId, TenantId};

    #[actix_rt::test]
    async fn local_bucket_allows_the_burst_then_says_when_to_retry() {
        let limiter = LocalRateLimiter::new(RateLimit {
            per_second: 2,
            burst: 3,
        });
        let run = RunKey::new(
            TenantId::parse("acme").unwrap(),
            RunId::parse("r1").unwrap(),
        );
        let other = RunKey::new(
            TenantId::parse("acme").unwrap(),
            RunId::parse("r2").unwrap(),
        );
        for _ in 0..3 {
            limiter.acquire(&run).await.unwrap();
        }
        let limited = limiter.acquire(&run).await.unwrap_err();
        assert!(limited.retry_after > Duration::ZERO);
        assert!(
            limited.retry_after <= Duration::from_millis(500),
            "{limited:?}"
        );
        // Budgets are per run.
        limiter.acquire(&other).await.unwrap();
        limiter.forget(&run);
        limiter.forget(&other);
        assert_eq!(limiter.tracked(), 0);
    }
}
