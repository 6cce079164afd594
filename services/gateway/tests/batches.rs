//! Issue 16 item 4: JSON-RPC batches (2025-03-26 sessions) are bounded per
//! request: their length is capped, each request after the first is
//! charged to the run's rate limit, and the response stops growing at a
//! byte budget, every refused element answered with its own id.

use crate::common;

use anyhow::{Context, Result};
use common::*;
use corkboard_board::{Author, CommentBody, IssueStore, NewComment, NewIssue, Title};
use corkboard_gateway::{RateLimit, Registration};
use corkboard_mcp::code;
use corkboard_testkit::mcp;
use serde_json::{Value, json};
use std::sync::Arc;

const LEGACY: &str = "2025-03-26";

/// Opens a 2025-03-26 session on the run's gateway; returns its id.
async fn open_session(client: &reqwest::Client, reg: &Registration) -> Result<String> {
    let response = client
        .post(&reg.mcp_url)
        .header("content-type", "application/json")
        .header("accept", mcp::ACCEPT)
        .bearer_auth(reg.token.expose())
        .body(mcp::initialize(0, LEGACY, json!({}), ("batch-test", "0.1")).to_string())
        .send()
        .await?;
    let session = response
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .context("initialize returned no Mcp-Session-Id")?;
    Ok(session)
}

/// Posts `batch` in the session; returns the status and the raw body.
async fn post_batch(
    client: &reqwest::Client,
    reg: &Registration,
    session: &str,
    batch: &[Value],
) -> Result<(u16, String)> {
    let response = client
        .post(&reg.mcp_url)
        .header("content-type", "application/json")
        .header("accept", mcp::ACCEPT)
        .header("mcp-session-id", session)
        .bearer_auth(reg.token.expose())
        .body(Value::Array(batch.to_vec()).to_string())
        .send()
        .await?;
    let status = response.status().as_u16();
    Ok((status, response.text().await?))
}

fn call(id: usize, tool: &str, arguments: Value) -> Value {
    mcp::tools_call(id, tool, arguments)
}

fn creates(count: usize) -> Vec<Value> {
    (0..count)
        .map(|i| call(i, "create_issue", json!({"title": format!("batch {i}")})))
        .collect()
}

#[actix_rt::test]
async fn a_batch_over_the_length_cap_is_refused_whole() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let store = sqlite_store(dir.path())?;
    let harness = Setup::new(Mode::Dedicated, store.clone())
        .configure(|c| c.max_batch_len = 4)
        .start()?;
    let reg = harness.register("acme", "batcher").await?;
    let client = http();
    let session = open_session(&client, &reg).await?;
    let (status, body) = post_batch(&client, &reg, &session, &creates(5)).await?;
    let reply: Value = serde_json::from_str(&body)?;
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        reply["error"]["code"],
        code::INVALID_REQUEST.get(),
        "{body}"
    );
    let message = reply["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("at most 4"), "{message}");
    assert!(issues(store.as_ref(), "acme").await?.is_empty());
    // At the cap it runs.
    let (status, body) = post_batch(&client, &reg, &session, &creates(4)).await?;
    assert_eq!(status, 200, "{body}");
    assert_eq!(issues(store.as_ref(), "acme").await?.len(), 4);
    harness.stop().await;
    Ok(())
}

#[actix_rt::test]
async fn each_request_of_a_batch_is_charged_to_the_rate_limit() -> Result<()> {
    for mode in MODES {
        let dir = tempfile::tempdir()?;
        let store = sqlite_store(dir.path())?;
        let harness = Setup::new(mode, store.clone())
            .configure(|c| {
                c.rate_limit = RateLimit {
                    per_second: 1,
                    burst: 6,
                }
            })
            .start()?;
        let reg = harness.register("acme", "batcher").await?;
        let client = http();
        // initialize took one token: five are left (and one a second).
        let session = open_session(&client, &reg).await?;
        let (status, body) = post_batch(&client, &reg, &session, &creates(20)).await?;
        assert_eq!(status, 200, "{mode:?}: {body}");
        let replies: Vec<Value> = serde_json::from_str(&body)?;
        assert_eq!(replies.len(), 20, "{mode:?}: {body}");
        let mut created = 0;
        for (i, reply) in replies.iter().enumerate() {
            assert_eq!(reply["id"], i, "{mode:?}: replies keep their order and ids");
            if reply.get("result").is_some() {
                created += 1;
            } else {
                assert_eq!(
                    reply["error"]["code"],
                    code::RATE_LIMITED.get(),
                    "{mode:?}: {reply}"
                );
                assert_eq!(reply["error"]["data"]["retryable"], true, "{reply}");
            }
        }
        // The budget's worth (plus what refilled while the batch ran), not 20.
        assert!(
            (5..20).contains(&created),
            "{mode:?}: {created} of 20 creates ran on a budget of 5"
        );
        assert_eq!(issues(store.as_ref(), "acme").await?.len(), created);
        harness.stop().await;
    }
    Ok(())
}

#[actix_rt::test]
async fn a_batch_stops_at_its_response_budget_with_correlated_errors() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let store = sqlite_store(dir.path())?;
    let budget = 64 * 1024;
    let harness = Setup::new(Mode::Dedicated, store.clone())
        .configure(move |c| c.max_batch_response_bytes = budget)
        .start()?;
    let reg = harness.register("acme", "reader").await?;
    // An issue with many comments: about 200 KiB per read.
    let tenant = tenant("acme");
    let author = Author {
        kind: corkboard_board::AuthorKind::Run,
        run: run_id("writer"),
        grant: None,
        integrity: corkboard_board::Integrity::Agent,
    };
    let issue = store
        .create_issue(&tenant, &author, NewIssue::new(Title::parse("Busy")?), None)
        .await?
        .issue;
    let body = "x".repeat(4000);
    for _ in 0..50 {
        store
            .add_comment(
                &tenant,
                &author,
                NewComment {
                    issue: issue.id.clone(),
                    body: CommentBody::parse(body.as_str())?,
                },
                None,
            )
            .await?;
    }
    let store: Arc<dyn IssueStore> = store;
    let one_read = serde_json::to_string(&store.get_issue(&tenant, &issue.id).await?)?.len();
    let client = http();
    let session = open_session(&client, &reg).await?;
    let batch: Vec<Value> = (0..20)
        .map(|i| call(i, "get_issue", json!({"id": issue.id.as_str()})))
        .collect();
    let (status, text) = post_batch(&client, &reg, &session, &batch).await?;
    assert_eq!(status, 200);
    // Bounded by the budget plus one element's answer (a read is served
    // whole; the next one is not started), not by 20 reads.
    assert!(
        text.len() < budget + 3 * one_read,
        "a {}-byte response for a budget of {budget} (one read: {one_read})",
        text.len()
    );
    let replies: Vec<Value> = serde_json::from_str(&text)?;
    assert_eq!(replies.len(), 20);
    let mut served = 0;
    for (i, reply) in replies.iter().enumerate() {
        assert_eq!(reply["id"], i);
        if reply.get("result").is_some() {
            served += 1;
        } else {
            assert_eq!(
                reply["error"]["code"],
                code::RESPONSE_BUDGET.get(),
                "{reply}"
            );
            let message = reply["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains("retry it singly"), "{message}");
        }
    }
    assert!((1..20).contains(&served), "{served} reads served");
    harness.stop().await;
    Ok(())
}

#[actix_rt::test]
async fn a_run_revoked_mid_batch_runs_none_of_the_rest() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let inner = sqlite_store(dir.path())?;
    let (store, gate) = gated(inner.clone());
    let harness = Setup::new(Mode::Dedicated, store)
        .configure(|c| c.drain_timeout = std::time::Duration::from_secs(20))
        .start()?;
    let reg = harness.register("acme", "revoked").await?;
    let client = http();
    let session = open_session(&client, &reg).await?;
    let batch = {
        let (client, reg) = (client.clone(), reg.clone());
        actix_rt::spawn(async move { post_batch(&client, &reg, &session, &creates(5)).await })
    };
    let in_flight = |h: &Harness| {
        h.gateway
            .runs(None)
            .iter()
            .map(|r| r.in_flight)
            .sum::<u32>()
    };
    eventually("the batch is in flight", || in_flight(&harness) == 1).await?;
    // Revoke while the first create waits on the board; the drain waits
    // for the batch, which must not start its other creates.
    let gateway = harness.gateway.clone();
    let revoke = actix_rt::spawn(async move {
        gateway
            .revoke(&tenant("acme"), &run_id("revoked"), "test")
            .await
    });
    eventually("the run is draining", || {
        harness.gateway.runs(None).iter().any(|r| r.draining)
    })
    .await?;
    gate.add_permits(5);
    let (status, body) = bounded("the batch", batch).await???;
    bounded("the revocation", revoke).await???;
    assert_eq!(status, 200, "{body}");
    let replies: Vec<Value> = serde_json::from_str(&body)?;
    assert!(replies[0].get("result").is_some(), "{body}");
    for reply in &replies[1..] {
        assert_eq!(reply["error"]["code"], code::RUN_ENDED.get(), "{reply}");
    }
    assert_eq!(issues(inner.as_ref(), "acme").await?.len(), 1);
    harness.stop().await;
    Ok(())
}
