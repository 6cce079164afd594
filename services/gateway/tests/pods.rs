//! Shared mode as Kubernetes runs it: several runner pods behind one
//! Service, sharing the registry (Redis, real `redis-server`), the board
//! and the rate-limit budget. Any pod serves any run by activating its
//! actor on demand; a revocation through one pod reaches the others; idle
//! actors stop and come back.

use crate::common;

use anyhow::{Result, bail};
use common::*;
use corkboard_board::GrantLedger;
use corkboard_gateway::{ListenerMode, MemoryLedger, RateLimit, RateLimiter, RedisRateLimiter};
use corkboard_grants::{GrantService, RedisRegistry, RedisRegistryConfig, TokenRegistry};
use corkboard_testkit::{RedisServer, unique_prefix};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

fn base_url(harness: &Harness) -> String {
    match &harness.gateway.config().mode {
        ListenerMode::Shared { base_url } => base_url.clone(),
        ListenerMode::Dedicated { .. } => String::new(),
    }
}

#[actix_rt::test]
async fn any_pod_serves_any_run_and_revocation_and_budget_are_shared() -> Result<()> {
    let redis = RedisServer::start();
    let prefix = unique_prefix("pods");
    let dir = tempfile::tempdir()?;
    let store = sqlite_store(dir.path())?;
    // Stands in for the shared store's grant ledger.
    let ledger: Arc<dyn GrantLedger> = Arc::new(MemoryLedger::new());
    let limit = RateLimit {
        per_second: 1,
        burst: 10,
    };
    // Every pod signs and verifies grant records with the shared key.
    let record_key = corkboard_mcp::SessionKey::generate();
    let pod = || -> Result<Harness> {
        // Each pod has its own Redis clients (own cache, own subscription).
        let registry: Arc<dyn TokenRegistry> = Arc::new(RedisRegistry::new(
            RedisRegistryConfig::new([redis.url()])
                .with_key_prefix(prefix.clone())
                .with_record_key(record_key.clone()),
        )?);
        let limiter: Arc<dyn RateLimiter> = Arc::new(RedisRateLimiter::new(
            limit,
            &[redis.url()],
            &prefix,
            Duration::from_secs(1),
        )?);
        let mut setup = Setup::new(Mode::Shared, store.clone())
            .configure(|c| c.revalidate_interval = Duration::from_millis(100));
        setup.limiter = Some(limiter);
        setup.shared_grants = Some((
            GrantService::new(ledger.clone(), registry.clone()),
            registry,
        ));
        setup.start()
    };
    let (pod_a, pod_b) = (pod()?, pod()?);
    let client = http();

    // Registered through pod A; the Service sends the requests anywhere.
    let reg = pod_a.register("acme", "k8s-run").await?;
    let path = "/runs/k8s-run/mcp";
    let urls = [
        format!("{}{path}", base_url(&pod_a)),
        format!("{}{path}", base_url(&pod_b)),
    ];
    let token = reg.token.expose();
    let list = |id: u32| {
        modern(
            json!(id),
            "tools/call",
            json!({"name": "list_issues", "arguments": {}}),
        )
    };

    let via_b = send(&client, &urls[1], token, &list(1)).await?;
    assert_eq!(via_b.status, 200, "{:?}", via_b.json);
    let runs_b = pod_b.gateway.runs(None);
    assert_eq!(runs_b.len(), 1);
    assert!(
        runs_b[0].activated,
        "pod B activated the run from the registry"
    );
    let created = send(
        &client,
        &urls[1],
        token,
        &modern(
            json!(2),
            "tools/call",
            json!({"name": "create_issue", "arguments": {"title": "via pod b"}}),
        ),
    )
    .await?;
    assert_eq!(created.status, 200, "{:?}", created.json);
    assert_eq!(issues(store.as_ref(), "acme").await?.len(), 1);

    // One budget for the run across pods: per-pod budgets would let 20
    // quick calls through.
    let mut allowed = 2; // the two calls above
    let mut limited = None;
    for i in 0..24u32 {
        let answer = send(&client, &urls[(i % 2) as usize], token, &list(10 + i)).await?;
        match answer.status {
            200 => allowed += 1,
            429 => {
                limited = Some(answer);
                break;
            }
            other => bail!("unexpected {other}: {:?}", answer.json),
        }
    }
    let limited = limited.expect("the shared budget ran out");
    // A few refilled tokens if the machine is slow, never 20.
    assert!(
        (10..16).contains(&allowed),
        "{allowed} requests passed a shared burst of 10"
    );
    assert_eq!(limited.json["error"]["data"]["retryable"], true);

    // Revoked through pod A: pod B refuses the token and stops its actor.
    let report = pod_a
        .gateway
        .revoke(&tenant("acme"), &run_id("k8s-run"), "test")
        .await?;
    assert_eq!(report.revoked.len(), 1);
    let deadline = tokio::time::Instant::now() + GENEROUS;
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let answer = send(&client, &urls[1], token, &list(99)).await?;
        if answer.status == 403 {
            // Refused from the headers, before the body: no id.
            assert_eq!(answer.json["id"], serde_json::Value::Null);
            assert!(
                answer.error_message().contains("revoked")
                    || answer.error_message().contains("unknown"),
                "{}",
                answer.error_message()
            );
            break;
        }
        if tokio::time::Instant::now() > deadline {
            bail!("pod B still serves a revoked run: {:?}", answer.json);
        }
    }
    eventually("pod B's actor stopped", || {
        pod_b.gateway.stats().actors == 0
    })
    .await?;
    pod_a.stop().await;
    pod_b.stop().await;
    Ok(())
}

#[actix_rt::test]
async fn idle_actors_stop_and_the_next_request_activates_them_again() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let harness = Setup::new(Mode::Shared, sqlite_store(dir.path())?)
        .configure(|c| c.idle_timeout = Duration::from_millis(200))
        .start()?;
    let reg = harness.register("acme", "sleepy").await?;
    let client = http();
    let answer = call_tool(&client, &reg, json!(1), "list_issues", json!({})).await?;
    assert_eq!(answer.status, 200);
    eventually("the idle actor stopped", || {
        harness.gateway.stats().actors == 0
    })
    .await?;
    assert!(harness.gateway.runs(None).is_empty());
    let answer = call_tool(&client, &reg, json!(2), "list_issues", json!({})).await?;
    assert_eq!(answer.status, 200, "{:?}", answer.json);
    let runs = harness.gateway.runs(None);
    assert_eq!(runs.len(), 1);
    assert!(runs[0].activated);
    harness.stop().await;
    Ok(())
}
