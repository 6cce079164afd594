//! The shared rate limit against a real `redis-server`: runner pods share
//! one budget per run, and a Redis outage does not refuse agents.

use anyhow::Result;
use corkboard_board::{RunId, TenantId};
use corkboard_gateway::{RateLimit, RateLimiter, RedisRateLimiter, RunKey};
use corkboard_testkit::{RedisServer, unique_prefix};
use std::time::Duration;

fn key(run: &str) -> RunKey {
    RunKey::new(
        TenantId::parse("acme").expect("tenant"),
        RunId::parse(run).expect("run"),
    )
}

#[actix_rt::test]
async fn pods_share_one_budget_per_run() -> Result<()> {
    let redis = RedisServer::start();
    let prefix = unique_prefix("pods_share_one_budget_per_run");
    let limit = RateLimit {
        per_second: 1,
        burst: 4,
    };
    let urls = [redis.url()];
    // Two runner pods.
    let pod_a = RedisRateLimiter::new(limit, &urls, &prefix, Duration::from_secs(2))?;
    let pod_b = RedisRateLimiter::new(limit, &urls, &prefix, Duration::from_secs(2))?;
    let run = key("shared-run");
    for pod in [&pod_a, &pod_b, &pod_a, &pod_b] {
        pod.acquire(&run).await.expect("within the burst");
    }
    let limited = pod_a
        .acquire(&run)
        .await
        .expect_err("the burst is spent across pods");
    assert!(
        limited.retry_after > Duration::ZERO && limited.retry_after <= Duration::from_secs(1),
        "{limited:?}"
    );
    assert!(pod_b.acquire(&run).await.is_err());
    // Another run has its own budget.
    pod_b
        .acquire(&key("other-run"))
        .await
        .expect("separate budget");
    // The bucket refills at the configured rate (Redis's clock).
    tokio::time::sleep(limited.retry_after + Duration::from_millis(100)).await;
    pod_b.acquire(&run).await.expect("refilled");
    Ok(())
}

#[actix_rt::test]
async fn an_unreachable_redis_does_not_refuse_agents() -> Result<()> {
    let mut redis = RedisServer::start();
    let urls = [redis.url()];
    redis.stop();
    let limiter = RedisRateLimiter::new(
        RateLimit {
            per_second: 1,
            burst: 1,
        },
        &urls,
        &unique_prefix("an_unreachable_redis"),
        Duration::from_millis(300),
    )?;
    let started = std::time::Instant::now();
    for _ in 0..3 {
        limiter.acquire(&key("r")).await.expect("fails open");
    }
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "bounded even when Redis is down"
    );
    Ok(())
}

/// Script calls (`EVALSHA` and `EVAL`) the Redis server has answered so far.
async fn script_calls(redis: &RedisServer) -> Result<u64> {
    let mut conn = redis::Client::open(redis.url())?
        .get_multiplexed_async_connection()
        .await?;
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut conn)
        .await?;
    Ok(info
        .lines()
        .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
        .filter_map(|l| {
            l.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum())
}

#[actix_rt::test]
async fn pods_lease_tokens_instead_of_asking_redis_per_request_and_never_overspend() -> Result<()> {
    let redis = RedisServer::start();
    let prefix = unique_prefix("pods_lease_tokens");
    // A tenth of a second's budget per lease: 64 tokens.
    let limit = RateLimit {
        per_second: 640,
        burst: 640,
    };
    let urls = [redis.url()];
    let pod_a = RedisRateLimiter::new(limit, &urls, &prefix, Duration::from_secs(2))?;
    let pod_b = RedisRateLimiter::new(limit, &urls, &prefix, Duration::from_secs(2))?;
    let run = key("busy-run");
    let calls_before = script_calls(&redis).await?;
    let started = std::time::Instant::now();
    let mut allowed = 0u64;
    for _ in 0..320 {
        pod_a.acquire(&run).await.expect("within the burst");
        allowed += 1;
    }
    let calls = script_calls(&redis).await? - calls_before;
    assert!(
        calls <= 320 / 64 + 1,
        "{calls} script calls for 320 requests: leases are not used"
    );
    // Both pods spend the rest of the one shared budget until refused.
    let mut refused = [false, false];
    while refused != [true, true] {
        for (i, pod) in [&pod_a, &pod_b].into_iter().enumerate() {
            if !refused[i] {
                match pod.acquire(&run).await {
                    Ok(()) => allowed += 1,
                    Err(_) => refused[i] = true,
                }
            }
        }
        assert!(allowed < 10_000, "never refused");
    }
    // Never more than the bucket held plus what it refilled meanwhile.
    let refilled = (started.elapsed().as_secs_f64() * 640.0).ceil() as u64;
    assert!(
        allowed <= 640 + refilled,
        "{allowed} allowed; the bucket held 640 and refilled {refilled}"
    );
    Ok(())
}
