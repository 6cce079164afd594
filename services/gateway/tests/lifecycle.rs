//! 1,000 runs registered and revoked in a loop leave no listener, actor,
//! connection, file descriptor, rate-limit bucket or memory behind; and an
//! idle run costs little memory (measured and printed).
//!
//! Alone in its process (nextest runs every test in its own): it measures
//! the whole process.

use crate::common;

use anyhow::{Context, Result, bail};
use common::*;
use corkboard_gateway::{LocalRateLimiter, RateLimit, RateLimiter};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

const RUNS: usize = 1000;

fn open_fds() -> Result<usize> {
    Ok(std::fs::read_dir("/proc/self/fd")?.count())
}

fn rss_kib() -> Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("VmRSS missing from /proc/self/status")
}

/// 1,000 listening sockets need more descriptors than some default limits.
fn ensure_fd_limit(needed: u64) -> Result<()> {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current.is_some_and(|c| c < needed) {
        limit.current = Some(
            limit
                .maximum
                .map_or(needed, |max| max.min(needed.max(4096))),
        );
        setrlimit(Resource::Nofile, limit)?;
    }
    let limit = getrlimit(Resource::Nofile);
    if limit.current.is_some_and(|c| c < needed) {
        bail!("this test needs {needed} file descriptors; raise `ulimit -n`");
    }
    Ok(())
}

async fn register_and_revoke(harness: &Harness, prefix: &str, count: usize) -> Result<()> {
    // In batches, so the loop is quick but still overlaps registrations.
    for batch in 0..count.div_ceil(50) {
        let runs: Vec<String> = (batch * 50..((batch + 1) * 50).min(count))
            .map(|i| format!("{prefix}-{i}"))
            .collect();
        let registered =
            futures_util::future::join_all(runs.iter().map(|run| harness.register("acme", run)))
                .await;
        for registration in registered {
            registration?;
        }
        let acme = tenant("acme");
        let ids: Vec<_> = runs.iter().map(|run| run_id(run)).collect();
        let revoked = futures_util::future::join_all(
            ids.iter()
                .map(|run| harness.gateway.revoke(&acme, run, "test")),
        )
        .await;
        for report in revoked {
            let report = report?;
            if report.revoked.len() != 1 || report.drained.is_none() {
                bail!("a revocation did not revoke and drain: {report:?}");
            }
        }
    }
    Ok(())
}

async fn all_gone(harness: &Harness, limiter: &LocalRateLimiter) -> Result<()> {
    eventually("no run, actor, listener or connection left", || {
        let stats = harness.gateway.stats();
        stats.runs == 0 && stats.actors == 0 && stats.listeners == 0 && stats.connections == 0
    })
    .await?;
    assert_eq!(limiter.tracked(), 0, "rate-limit buckets left behind");
    Ok(())
}

#[actix_rt::test]
async fn a_thousand_runs_leave_nothing_behind_and_idle_runs_are_cheap() -> Result<()> {
    ensure_fd_limit(RUNS as u64 + 512)?;
    for mode in MODES {
        let dir = tempfile::tempdir()?;
        let limiter = Arc::new(LocalRateLimiter::new(RateLimit {
            per_second: 100,
            burst: 100,
        }));
        // A thousand live runs of one tenant: above the default quota.
        let mut setup = Setup::new(mode, sqlite_store(dir.path())?)
            .configure(|c| c.live_runs_per_tenant_max = RUNS);
        setup.limiter = Some(limiter.clone() as Arc<dyn RateLimiter>);
        let harness = setup.start()?;
        let client = http();

        // Warm up (allocator arenas, worker threads, connection pools).
        register_and_revoke(&harness, "warm", 100).await?;
        let used = harness.register("acme", "used").await?;
        let answer = call_tool(&client, &used, json!(1), "list_issues", json!({})).await?;
        assert_eq!(answer.status, 200);
        harness
            .gateway
            .revoke(&tenant("acme"), &run_id("used"), "test")
            .await?;
        all_gone(&harness, &limiter).await?;
        let fds_before = open_fds()?;
        let rss_before = rss_kib()?;

        register_and_revoke(&harness, "loop", RUNS).await?;
        all_gone(&harness, &limiter).await?;
        eventually("file descriptors back to where they were", || {
            open_fds().is_ok_and(|n| n <= fds_before)
        })
        .await?;
        let rss_after = rss_kib()?;
        let growth = rss_after.saturating_sub(rss_before);
        eprintln!("{mode:?}: RSS growth over {RUNS} register/revoke cycles: {growth} KiB");
        // A leak of even 4 KiB per run would show as 4 MB here.
        assert!(
            growth < 4096,
            "{mode:?}: RSS grew by {growth} KiB over {RUNS} cycles"
        );

        // Idle runs: registered, listening, never called.
        let rss_idle_before = rss_kib()?;
        let mut registrations = Vec::with_capacity(RUNS);
        for i in 0..RUNS {
            registrations.push(harness.register("acme", &format!("idle-{i}")).await?);
        }
        let expected_listeners = if mode == Mode::Dedicated { RUNS } else { 0 };
        eventually("every idle run is listening", || {
            let stats = harness.gateway.stats();
            stats.actors == RUNS && stats.listeners == expected_listeners
        })
        .await?;
        tokio::time::sleep(Duration::from_millis(200)).await;
        let per_run = (rss_kib()?.saturating_sub(rss_idle_before)) as f64 / RUNS as f64;
        eprintln!("{mode:?}: memory per idle run: {per_run:.1} KiB (RSS, {RUNS} runs)");
        assert!(
            per_run <= 64.0,
            "{mode:?}: an idle run costs {per_run:.1} KiB (target: 64 KiB)"
        );
        let revoked = futures_util::future::join_all(registrations.iter().map(|r| {
            harness
                .gateway
                .revoke(&r.grant.tenant, &r.grant.run, "test")
        }))
        .await;
        for report in revoked {
            report?;
        }
        all_gone(&harness, &limiter).await?;
        harness.stop().await;
    }
    Ok(())
}
