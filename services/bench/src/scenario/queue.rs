//! The board as a work queue (issue 29): a board of `issues` issues filed
//! through `create_issues` 50 at a time, the first of each batch blocked
//! by the last of the batch before (which is ready and stays open). First
//! the cost of the two whole-board reads on that board: `list_issues` with
//! `ready: true` (one page) and `board_stats`, `reads` times each. Then
//! (unless `claimants` is 0) `claimants` runs, each on its own keep-alive
//! connection, call `claim_next` until it answers "no ready work". Every
//! call's latency is a sample and the drain's throughput a value; a call
//! answered "board unavailable" is counted and called again, as an agent
//! would, and the board's own claimed count settles what such calls did.
//! A drain in which an issue went to two runs, a blocked issue was
//! claimed, or some ready issue was never claimed counts as an error,
//! never as a figure.

use super::deploy::{DeploySpec, Deployment, Endpoint, Registry, Store};
use crate::client::{Connection, Target};
use crate::error::{BenchError, Result};
use crate::mcp;
use crate::procs::Binaries;
use crate::record::{Record, Sink};
use hyper::Method;
use serde_json::{Value, json};
use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::Barrier;

/// Issues one `create_issues` call files (its limit).
const BATCH: usize = 50;

/// One call of `tool` on `connection`, with its latency in ms and its
/// structured answer.
async fn call(
    connection: &mut Connection,
    target: &Target,
    token: &str,
    tool: &str,
    arguments: &Value,
) -> Result<(f64, Value)> {
    match attempt(connection, target, token, tool, arguments).await? {
        (elapsed, Ok(answer)) => Ok((elapsed, answer)),
        (_, Err(text)) => Err(BenchError::protocol(tool, text)),
    }
}

/// One call of `tool`: its latency in ms, and its structured answer or,
/// for a tool error saying the board is unavailable (retryable: the
/// store's bound ran out), that answer's text. Any other failure is an
/// error of the run.
async fn attempt(
    connection: &mut Connection,
    target: &Target,
    token: &str,
    tool: &str,
    arguments: &Value,
) -> Result<(f64, std::result::Result<Value, String>)> {
    let prepared = mcp::stateless_named_call(token, tool, arguments)?;
    let started = Instant::now();
    let reply = connection
        .send(Method::POST, &target.path, &prepared.headers, prepared.body)
        .await?;
    let elapsed = started.elapsed().as_secs_f64() * 1000.0;
    match mcp::classify(&reply) {
        mcp::Verdict::Ok => Ok((elapsed, Ok(mcp::structured(&reply)?))),
        mcp::Verdict::ToolError if reply.text().contains("board unavailable") => {
            Ok((elapsed, Err(reply.text())))
        }
        _ => Err(BenchError::protocol(tool, reply.text())),
    }
}

pub async fn run(
    bins: &Binaries,
    store: Store,
    issues: usize,
    claimants: usize,
    reads: usize,
    logs: &Path,
    sink: &mut Sink,
) -> Result<()> {
    let mut deployment = Deployment::start(
        bins,
        DeploySpec {
            endpoint: Endpoint::Studio,
            store,
            registry: Registry::Memory,
            log: Some("warn".into()),
            // The cost of each read, one at a time, not the tenant's time
            // share of expensive reads (`search_ms_per_second_per_tenant`),
            // which back-to-back reads of a 100,000-issue board reach.
            env: vec![(
                "CORKBOARD_SEARCH_MS_PER_SECOND_PER_TENANT".into(),
                "1000000".into(),
            )],
        },
        logs,
    )
    .await?;
    let seeder = deployment
        .grant(
            "bench",
            "bench-queue-seed",
            &["issues:read", "issues:create"],
        )
        .await?;
    let seed_target = Target::parse(&seeder.mcp_url)?;
    let mut seed = Connection::open(&seed_target).await?;
    // Filed in batches; the issue before each blocked one is its blocker.
    let mut blocked = 0usize;
    let mut filed = 0usize;
    let mut last: Option<String> = None;
    while filed < issues {
        let n = BATCH.min(issues - filed);
        let mut items = Vec::with_capacity(n);
        for i in filed..filed + n {
            let priority = ["none", "low", "medium", "high", "urgent"][i % 5];
            items.push(json!({ "title": format!("queue work {i}"), "priority": priority }));
        }
        // The first of each batch is blocked by the last of the one
        // before (ids are only known once filed).
        if let Some(previous) = &last {
            items[0]["blocked_by"] = json!([previous]);
            blocked += 1;
        }
        let (_, answer) = call(
            &mut seed,
            &seed_target,
            &seeder.token,
            "create_issues",
            &json!({ "issues": items }),
        )
        .await?;
        let results = answer["results"].as_array().cloned().unwrap_or_default();
        if results.iter().any(|r| r.get("error").is_some()) {
            return Err(BenchError::protocol("create_issues", answer.to_string()));
        }
        last = results
            .last()
            .and_then(|r| r["id"].as_str())
            .map(str::to_owned);
        filed += n;
    }
    let ready = issues - blocked;
    // On the seeded board (every issue but the blocked ones ready), before
    // any claim; then the drain, unless there are no claimants.
    whole_board_reads(
        &mut seed,
        &seed_target,
        &seeder.token,
        Seeded {
            store,
            issues,
            ready,
        },
        reads,
        sink,
    )
    .await?;
    if claimants == 0 {
        deployment.process.check_alive()?;
        return Ok(());
    }

    let mut runs = Vec::with_capacity(claimants);
    for i in 0..claimants {
        let granted = deployment
            .grant("bench", &format!("queue-claimant-{i}"), &["issues:claim"])
            .await?;
        let target = Target::parse(&granted.mcp_url)?;
        let connection = Connection::open(&target).await?;
        runs.push((granted.token, target, connection));
    }
    let barrier = Arc::new(Barrier::new(claimants));
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(claimants);
    for (token, target, mut connection) in runs {
        let barrier = Arc::clone(&barrier);
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            let mut samples = Vec::new();
            let mut mine = Vec::new();
            let mut unavailable = 0u64;
            loop {
                let (ms, answer) =
                    attempt(&mut connection, &target, &token, "claim_next", &json!({})).await?;
                samples.push(ms);
                let answer = match answer {
                    Ok(answer) => answer,
                    // As an agent would: again, shortly (whether that call
                    // claimed an issue is settled by the board's count).
                    Err(_) => {
                        unavailable += 1;
                        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                        continue;
                    }
                };
                match answer["outcome"].as_str() {
                    Some("claimed") => {
                        mine.push(answer["id"].as_str().unwrap_or_default().to_owned())
                    }
                    _ => return Ok::<_, BenchError>((samples, mine, unavailable)),
                }
            }
        }));
    }
    let mut samples = Vec::new();
    let mut claimed = Vec::new();
    let mut unavailable = 0u64;
    for task in tasks {
        let (s, mine, refused) = task
            .await
            .map_err(|e| BenchError::protocol("claimant", e.to_string()))??;
        samples.extend(s);
        claimed.extend(mine);
        unavailable += refused;
    }
    let drain = started.elapsed().as_secs_f64();
    // The board's own count of claimed issues: the claims answered, and
    // those of calls whose answer said the board was unavailable but
    // which claimed an issue all the same.
    // (On a connection of its own: the seeder's may have idled out.)
    let mut counter = Connection::open(&seed_target).await?;
    let (_, stats) = call(
        &mut counter,
        &seed_target,
        &seeder.token,
        "board_stats",
        &json!({}),
    )
    .await?;
    let on_board = stats["claimed"].as_u64().unwrap_or(0) as usize;
    let distinct: HashSet<&String> = claimed.iter().collect();
    let broken = distinct.len() != claimed.len() || on_board != ready || claimed.len() > ready;
    let mut record = Record::new("queue_claim_next")
        .label("store", store)
        .label("claimants", claimants)
        .label("issues", issues)
        .with_samples(&samples)
        .value("claims_per_second", on_board as f64 / drain.max(1e-9))
        .value("ready", ready as f64)
        .value("unavailable", unavailable as f64)
        .value(
            "claimed_unanswered",
            on_board.saturating_sub(claimed.len()) as f64,
        );
    record.errors = u64::from(broken);
    record.note = Some(
        "one sample per claim_next call (the last of each claimant answers no ready work); \
         a call answered \"board unavailable\" (its store bound ran out) is a sample too, \
         counted in `unavailable`, and its claimant calls again 100 ms later; \
         `claimed_unanswered` counts such calls that claimed an issue all the same (the \
         board's claimed count less the claims answered). An error is a drain where an \
         issue went twice, a blocked one was taken or a ready one was left"
            .into(),
    );
    sink.emit(record)?;

    deployment.process.check_alive()?;
    Ok(())
}

/// The board as seeded: its store, issues, and how many are ready.
struct Seeded {
    store: Store,
    issues: usize,
    ready: usize,
}

/// `reads` samples each of the two whole-board reads (the ready list's
/// first page and `board_stats`) on the board as it is now (`ready` of
/// it ready work). An answer that disagrees with the board (a short page,
/// a ready count neither right nor marked as a lower bound) is an error;
/// the counts `board_stats` marked as lower bounds are the record's
/// `at_least` label.
async fn whole_board_reads(
    seed: &mut Connection,
    target: &Target,
    token: &str,
    board: Seeded,
    reads: usize,
    sink: &mut Sink,
) -> Result<()> {
    let Seeded {
        store,
        issues,
        ready,
    } = board;
    for (tool, arguments, kind) in [
        (
            "list_issues",
            json!({ "ready": true, "limit": 50 }),
            "queue_ready_list",
        ),
        ("board_stats", json!({}), "queue_board_stats"),
    ] {
        let mut samples = Vec::with_capacity(reads);
        let mut errors = 0u64;
        let mut at_least = String::new();
        for _ in 0..reads {
            let (ms, answer) = call(seed, target, token, tool, &arguments).await?;
            samples.push(ms);
            let right = if tool == "board_stats" {
                let capped: Vec<&str> = answer["at_least"]
                    .as_array()
                    .map(|parts| parts.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                at_least = capped.join(",");
                capped.contains(&"ready") || answer["ready"].as_u64() == Some(ready as u64)
            } else {
                answer["issues"].as_array().map(Vec::len) == Some(ready.min(50))
            };
            errors += u64::from(!right);
        }
        let mut record = Record::new(kind)
            .label("store", store)
            .label("issues", issues)
            .with_samples(&samples);
        if tool == "board_stats" {
            record = record.label("at_least", at_least);
        }
        record.errors = errors;
        sink.emit(record)?;
    }
    Ok(())
}
