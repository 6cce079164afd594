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

#[tokio::test]
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

#[tokio::test]
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
