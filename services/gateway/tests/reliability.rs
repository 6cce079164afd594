//! Bridge reliability, in both listener modes: every request handed to a
//! run gets a correlated answer (result or typed error) whatever happens to
//! the run, its actor or the client; nothing hangs; rebinding is atomic.

use crate::common;

use actix::Arbiter;
use anyhow::{Context, Result, bail};
use common::*;
use corkboard_board::GrantId;
use corkboard_board::NoopAuditSink;
use corkboard_gateway::{Binding, RateLimit, StopReason};
use corkboard_grants::{MemoryRegistry, TokenRegistry};
use corkboard_mcp::code;
use serde_json::json;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;

fn in_flight(harness: &Harness) -> u32 {
    harness.gateway.runs(None).iter().map(|r| r.in_flight).sum()
}

#[actix_rt::test]
async fn a_run_revoked_with_50_requests_in_flight_answers_all_50() -> Result<()> {
    for mode in MODES {
        let dir = tempfile::tempdir()?;
        let (store, gate) = gated(sqlite_store(dir.path())?);
        let harness = Setup::new(mode, store)
            .configure(|c| {
                c.drain_timeout = Duration::from_millis(300);
                c.rate_limit = RateLimit {
                    per_second: 1000,
                    burst: 1000,
                };
            })
            .start()?;
        let reg = harness.register("acme", "busy-run").await?;
        let client = http();
        let requests: Vec<_> = (0..50)
            .map(|i| {
                let client = client.clone();
                let reg = reg.clone();
                actix_rt::spawn(async move {
                    call_tool(
                        &client,
                        &reg,
                        json!(format!("req-{i}")),
                        "create_issue",
                        json!({"title": format!("issue {i}")}),
                    )
                    .await
                })
            })
            .collect();
        eventually("50 requests in flight", || in_flight(&harness) == 50).await?;
        // Let 20 finish normally; the other 30 are still waiting on the board
        // when the run is revoked.
        gate.add_permits(20);
        eventually("20 requests done", || in_flight(&harness) == 30).await?;
        let report = bounded(
            "revoke",
            harness
                .gateway
                .revoke(&tenant("acme"), &run_id("busy-run"), "test"),
        )
        .await??;
        assert_eq!(report.revoked.len(), 1);
        let drained = report.drained.context("the run was active here")?;
        assert_eq!(drained.reason, StopReason::Revoked);
        assert_eq!(drained.in_flight_at_start, 30);
        assert_eq!(drained.cancelled, 30);
        assert_eq!(drained.abandoned, 0);

        let mut ok = 0;
        let mut ended = 0;
        let mut ids = BTreeSet::new();
        for (i, request) in requests.into_iter().enumerate() {
            let answer = bounded("answer", request).await???;
            assert_eq!(
                answer.json["id"],
                format!("req-{i}"),
                "{mode:?}: uncorrelated {:?}",
                answer.json
            );
            ids.insert(i);
            if answer.status == 200 && answer.json["result"]["isError"] == false {
                ok += 1;
            } else {
                assert_eq!(answer.status, 403, "{mode:?}: {:?}", answer.json);
                assert_eq!(
                    answer.error_code(),
                    Some(code::RUN_ENDED),
                    "{:?}",
                    answer.json
                );
                assert!(
                    answer
                        .error_message()
                        .contains("while this request was in flight"),
                    "{}",
                    answer.error_message()
                );
                ended += 1;
            }
        }
        assert_eq!((ok, ended, ids.len()), (20, 30, 50), "{mode:?}");
        eventually("the run's actor, listener and connections are gone", || {
            let stats = harness.gateway.stats();
            stats.runs == 0 && stats.actors == 0 && stats.listeners == 0 && stats.connections == 0
        })
        .await?;

        // The revoked token is refused from then on.
        let after = call_tool(&client, &reg, json!("late"), "list_issues", json!({})).await;
        match mode {
            // The port is closed.
            Mode::Dedicated => assert!(after.is_err(), "{after:?}"),
            Mode::Shared => {
                let after = after?;
                assert_eq!(after.status, 403, "{:?}", after.json);
                // Refused from the headers, before the body: no id.
                assert_eq!(after.json["id"], serde_json::Value::Null);
            }
        }
        harness.stop().await;
    }
    Ok(())
}

#[actix_rt::test]
async fn a_stalled_actor_thread_holds_up_no_request_and_a_drain_still_counts_them() -> Result<()> {
    for mode in MODES {
        let dir = tempfile::tempdir()?;
        let actors = Arbiter::new();
        let mut setup = Setup::new(mode, sqlite_store(dir.path())?);
        setup.actor_arbiter = Some(actors.handle());
        let harness = setup.start()?;
        let reg = harness.register("acme", "stalled").await?;
        let client = http();
        // Wedge the actors' thread: admission must not need it.
        let (stalled, stall_started) = tokio::sync::oneshot::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let (unstalled, stall_over) = tokio::sync::oneshot::channel();
        actors.spawn(async move {
            let _ = stalled.send(());
            let _ = released.recv_timeout(GENEROUS);
            let _ = unstalled.send(());
        });
        bounded("the stall to begin", stall_started).await??;
        let requests: Vec<_> = (0..4)
            .map(|i| {
                let (client, reg) = (client.clone(), reg.clone());
                actix_rt::spawn(async move {
                    call_tool(&client, &reg, json!(i), "list_issues", json!({})).await
                })
            })
            .collect();
        for (i, request) in requests.into_iter().enumerate() {
            let answer = bounded("answer", request).await???;
            assert_eq!(answer.status, 200, "{mode:?}: {:?}", answer.json);
            assert_eq!(answer.json["id"], i, "{mode:?}");
        }
        assert_eq!(in_flight(&harness), 0, "{mode:?}: every slot released");
        let admitted = harness.gateway.runs(None)[0].admitted;
        assert!(admitted >= 4, "{mode:?}: {admitted} admitted");
        // Once the actor runs again, the lifecycle works as before: a
        // revocation drains the run and its token is refused.
        release.send(())?;
        bounded("the stall to end", stall_over).await??;
        harness
            .gateway
            .revoke(&tenant("acme"), &run_id("stalled"), "test")
            .await?;
        assert!(
            harness.gateway.runs(None).is_empty(),
            "{mode:?}: the drained run is gone"
        );
        if let Ok(answer) = call_tool(&client, &reg, json!("after"), "list_issues", json!({})).await
        {
            // Shared mode answers; a dedicated port is closed by now.
            assert_eq!(answer.status, 403, "{mode:?}: {:?}", answer.json);
        }
        harness.stop().await;
        actors.stop();
    }
    Ok(())
}

/// `http://host:port/path` → (`host:port`, `/path`).
fn split_url(url: &str) -> (String, String) {
    let rest = url.trim_start_matches("http://");
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    (authority.to_owned(), path.to_owned())
}

#[actix_rt::test]
async fn a_client_that_disconnects_releases_its_request() -> Result<()> {
    for mode in MODES {
        let dir = tempfile::tempdir()?;
        let (store, _gate) = gated(sqlite_store(dir.path())?);
        let harness = Setup::new(mode, store).start()?;
        let reg = harness.register("acme", "flaky-client").await?;
        let (authority, path) = split_url(&reg.mcp_url);
        let body = modern(
            json!(1),
            "tools/call",
            json!({"name": "create_issue", "arguments": {"title": "never"}}),
        )
        .to_string();
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: {MODERN}\r\nMcp-Method: tools/call\r\nMcp-Name: create_issue\r\nAuthorization: Bearer {}\r\nContent-Length: {}\r\n\r\n{body}",
            reg.token.expose(),
            body.len()
        );
        let mut socket = tokio::net::TcpStream::connect(&authority).await?;
        socket.write_all(request.as_bytes()).await?;
        eventually("the request is in flight", || in_flight(&harness) == 1).await?;
        drop(socket);
        eventually("the slot is released on disconnect", || {
            in_flight(&harness) == 0
        })
        .await?;
        if mode == Mode::Dedicated {
            eventually("the connection is gone", || {
                harness.gateway.stats().connections == 0
            })
            .await?;
        }
        harness.stop().await;
    }
    Ok(())
}

#[actix_rt::test]
async fn the_rate_limit_answers_a_clear_retryable_error() -> Result<()> {
    for mode in MODES {
        let dir = tempfile::tempdir()?;
        let harness = Setup::new(mode, sqlite_store(dir.path())?)
            .configure(|c| {
                c.rate_limit = RateLimit {
                    per_second: 1,
                    burst: 2,
                }
            })
            .start()?;
        let reg = harness.register("acme", "chatty").await?;
        let other = harness.register("acme", "quiet").await?;
        let client = http();
        // A burst of 2 at 1/s: the third quick call is limited, unless the
        // machine is so slow that a token refilled meanwhile.
        let mut allowed = 0;
        let mut limited = None;
        for i in 0..6 {
            let id = json!(format!("call-{i}"));
            let answer = call_tool(&client, &reg, id, "list_issues", json!({})).await?;
            match answer.status {
                200 => allowed += 1,
                429 => {
                    limited = Some((i, answer));
                    break;
                }
                other => bail!("{mode:?}: unexpected {other}: {:?}", answer.json),
            }
        }
        let (i, limited) = limited.context("the rate limit never answered")?;
        assert!(
            (2..=4).contains(&allowed),
            "{mode:?}: {allowed} calls passed a burst of 2"
        );
        assert_eq!(limited.json["id"], format!("call-{i}"));
        assert_eq!(limited.error_code(), Some(code::RATE_LIMITED));
        assert_eq!(limited.json["error"]["data"]["retryable"], true);
        assert!(
            limited.json["error"]["data"]["retry_after_ms"]
                .as_u64()
                .is_some_and(|ms| ms > 0 && ms <= 1000)
        );
        assert_eq!(limited.retry_after.as_deref(), Some("1"));
        assert!(
            limited.error_message().contains("rate limit"),
            "{}",
            limited.error_message()
        );
        // Budgets are per run.
        let answer = call_tool(&client, &other, json!(1), "list_issues", json!({})).await?;
        assert_eq!(answer.status, 200);
        let chatty = harness
            .gateway
            .runs(None)
            .into_iter()
            .find(|r| r.run.as_str() == "chatty")
            .context("listed")?;
        assert_eq!((chatty.admitted, chatty.rate_limited), (allowed, 1));
        harness.stop().await;
    }
    Ok(())
}

#[actix_rt::test]
async fn rebinding_is_atomic_per_request() -> Result<()> {
    for mode in MODES {
        let (dir_a, dir_b) = (tempfile::tempdir()?, tempfile::tempdir()?);
        let store_a = sqlite_store(dir_a.path())?;
        let store_b = sqlite_store(dir_b.path())?;
        let harness = Setup::new(mode, store_a.clone())
            .configure(|c| {
                c.rate_limit = RateLimit {
                    per_second: 10_000,
                    burst: 10_000,
                };
                // 120 requests at once from this one client address.
                c.sources = corkboard_telemetry::conn::SourceLimits::new(1_000);
            })
            .start()?;
        let reg = harness.register("acme", "rebound").await?;
        let grant_a = reg.grant.id.clone();
        // Registry B knows the same token under another grant id, so every
        // write records which registry authenticated it.
        let registry_b: Arc<dyn TokenRegistry> = Arc::new(MemoryRegistry::new());
        let mut grant_b = reg.grant.clone();
        grant_b.id = GrantId::generate();
        registry_b.register(&grant_b, &reg.token.hash()).await?;
        let binding = |which: bool| {
            let timeout = Duration::from_secs(5);
            if which {
                Binding::new(
                    store_a.clone(),
                    harness.registry.clone(),
                    Arc::new(NoopAuditSink),
                    timeout,
                )
            } else {
                Binding::new(
                    store_b.clone(),
                    registry_b.clone(),
                    Arc::new(NoopAuditSink),
                    timeout,
                )
            }
        };
        let client = http();
        let requests: Vec<_> = (0..120)
            .map(|i| {
                let (client, reg) = (client.clone(), reg.clone());
                actix_rt::spawn(async move {
                    call_tool(
                        &client,
                        &reg,
                        json!(i),
                        "create_issue",
                        json!({"title": format!("write {i}")}),
                    )
                    .await
                })
            })
            .collect();
        let mut which = false;
        for _ in 0..60 {
            harness.gateway.rebind(binding(which));
            which = !which;
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let mut created = 0;
        for request in requests {
            let answer = bounded("answer", request).await???;
            assert_eq!(answer.status, 200, "{mode:?}: {:?}", answer.json);
            if answer.json["result"]["isError"] == false {
                created += 1;
            } else {
                bail!("{mode:?}: a write failed: {:?}", answer.json);
            }
        }
        let in_a = issues(store_a.as_ref(), "acme").await?;
        let in_b = issues(store_b.as_ref(), "acme").await?;
        assert_eq!(in_a.len() + in_b.len(), created);
        for issue in &in_a {
            assert_eq!(
                issue.author.grant.as_ref(),
                Some(&grant_a),
                "{mode:?}: store A got a write authenticated by registry B"
            );
        }
        for issue in &in_b {
            assert_eq!(
                issue.author.grant.as_ref(),
                Some(&grant_b.id),
                "{mode:?}: store B got a write authenticated by registry A"
            );
        }
        harness.stop().await;
    }
    Ok(())
}

#[actix_rt::test]
async fn expiry_and_revocation_elsewhere_stop_the_run_by_themselves() -> Result<()> {
    for mode in MODES {
        let dir = tempfile::tempdir()?;
        let harness = Setup::new(mode, sqlite_store(dir.path())?)
            .configure(|c| c.revalidate_interval = Duration::from_millis(100))
            .start()?;
        let client = http();
        let short = harness
            .register_with("acme", "short-lived", Duration::from_secs(1))
            .await?;
        let other = harness.register("acme", "revoked-elsewhere").await?;
        // Revoked directly through the grant service (another replica, the
        // admin API): the runner learns it from the registry.
        harness
            .grants
            .revoke_run(&tenant("acme"), &run_id("revoked-elsewhere"), "admin")
            .await?;
        eventually("both runs stopped", || {
            let stats = harness.gateway.stats();
            stats.runs == 0 && stats.actors == 0 && stats.listeners == 0
        })
        .await?;
        for reg in [&short, &other] {
            let after = call_tool(&client, reg, json!("x"), "list_issues", json!({})).await;
            match mode {
                Mode::Dedicated => assert!(after.is_err(), "the port must be closed: {after:?}"),
                Mode::Shared => assert_eq!(after?.status, 403),
            }
        }
        harness.stop().await;
    }
    Ok(())
}

#[actix_rt::test]
async fn registering_an_active_run_twice_is_refused() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let harness = Setup::new(Mode::Dedicated, sqlite_store(dir.path())?).start()?;
    harness.register("acme", "once").await?;
    let again = harness.register("acme", "once").await;
    let err = again.err().context("a second registration must fail")?;
    assert!(err.to_string().contains("already active"), "{err}");
    // The same run id of another tenant is another run.
    harness.register("globex", "once").await?;
    harness.stop().await;
    Ok(())
}
