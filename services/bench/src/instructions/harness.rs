//! What runs under callgrind: a board in a temporary directory behind the
//! studio endpoint's in-process request path, seeded with fixed content,
//! then each [`Operation`] warmed up and measured between client requests.
//!
//! Composed as `corkboard serve` composes the studio endpoint
//! (`services/server/src/state.rs`): `BoardTools` with the store timeout,
//! the result budget and metrics, behind `McpEndpoint`, on an actix-web
//! service. Two parts differ, for determinism, and cost about the same per
//! call: the registry is the in-memory one (the embedded one trusts a
//! grant read for 250 ms, so how often it asks the store would depend on
//! valgrind's speed), and audit records go to memory (the server's batching
//! writer wakes on a timer). Requests are built before the measured window
//! and pass through the service as a client's would, minus the socket.
//! One thread runs the requests (actix's current-thread runtime); the
//! store's writer thread runs each create, and is counted (callgrind's
//! counts cover every thread).

use super::{Operation, WARM_UP};
use crate::error::{BenchError, Result};
use crate::mcp::{PreparedCall, stateless_named_call};
use actix_web::App;
use actix_web::test::{self, TestRequest};
use corkboard_board::{Capabilities, Grant, GrantId, MemoryAuditSink, RunId, TenantId, Timestamp};
use corkboard_grants::{MemoryRegistry, RunToken, TokenRegistry};
use corkboard_mcp::{McpEndpoint, McpSettings, SessionKey};
use corkboard_store_sqlite::{SqliteOptions, SqliteStore};
use corkboard_tools::{BoardTools, DEFAULT_RESULT_BUDGET};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// Issues on the seeded board before anything is measured.
pub const SEEDED_ISSUES: usize = 200;

const WORDS_A: [&str; 7] = [
    "flaky",
    "slow",
    "broken",
    "missing",
    "stale",
    "duplicate",
    "wrong",
];
const WORDS_B: [&str; 11] = [
    "login", "export", "search", "upload", "checkout", "invoice", "profile", "sync", "report",
    "billing", "webhook",
];
const WORDS_C: [&str; 5] = ["api", "web", "mobile", "worker", "cli"];
const PRIORITIES: [&str; 4] = ["low", "medium", "high", "urgent"];

/// The `i`th seeded issue's arguments: fixed text, labels and priority.
fn seeded_issue(i: usize) -> Value {
    let (a, b, c) = (
        WORDS_A[i % WORDS_A.len()],
        WORDS_B[i % WORDS_B.len()],
        WORDS_C[i % WORDS_C.len()],
    );
    json!({
        "title": format!("{a} {b} on {c} #{i}"),
        "body": format!(
            "Seen on the {c} client: the {b} step is {a}. Steps: open {b}, wait, retry. \
             Expected the {b} to finish; it did not (case {i})."
        ),
        "labels": [c, if i.is_multiple_of(3) { "bug" } else { "task" }],
        "priority": PRIORITIES[i % PRIORITIES.len()],
    })
}

/// The arguments of the `n`th call of `op` on the seeded board: `issue`
/// is the one read again, `unread` the issues each read once, and
/// `cursors` the newest issues, each the cursor of one page of 50.
fn arguments(op: Operation, n: u32, issue: &str, unread: &[String], cursors: &[String]) -> Value {
    match op {
        Operation::GetIssue => json!({ "id": issue }),
        Operation::GetIssueUnread => json!({ "id": unread[n as usize % unread.len()] }),
        // The default list: no filter, the first page.
        Operation::ListIssues => json!({}),
        // The default list after the nth newest issue: 50 issues each time.
        Operation::ListIssuesUnread => json!({ "cursor": cursors[n as usize % cursors.len()] }),
        Operation::SearchIssues => json!({ "query": "flaky login" }),
        Operation::CreateIssue => json!({
            "title": format!("measured create number {n}"),
            "body": "Created by the instruction-count guard.",
            "labels": ["guard"],
            "priority": "low",
        }),
    }
}

/// A request of the endpoint as a client sends it.
fn request(call: &PreparedCall) -> Result<TestRequest> {
    let mut req = TestRequest::post()
        .uri("/mcp")
        .insert_header(("host", "127.0.0.1"))
        .set_payload(call.body.clone());
    for (name, value) in &call.headers {
        let value = value
            .to_str()
            .map_err(|e| BenchError::protocol("request header", e.to_string()))?;
        req = req.insert_header((name.as_str(), value));
    }
    Ok(req)
}

/// Whether an answer is a successful tool result.
fn succeeded(status: u16, body: &[u8]) -> bool {
    status == 200
        && serde_json::from_slice::<Value>(body)
            .ok()
            .is_some_and(|v| v["result"]["isError"] != json!(true) && v["error"].is_null())
}

/// Seeds the board, then measures each operation; `calls` per operation
/// (after [`WARM_UP`] unmeasured ones). Under callgrind started with
/// `--instr-atstart=no`, each operation's window becomes one dump named
/// after it; run natively, the client requests do nothing.
pub fn run(calls: u32) -> Result<()> {
    actix_rt::System::new().block_on(measure(calls))
}

async fn measure(calls: u32) -> Result<()> {
    let dir = tempfile::tempdir().map_err(BenchError::io("temporary directory"))?;
    // The full-text index's pending rows move only when a search asks:
    // under load they move about every 25 ms, a share of a create too
    // small to count, but when a move falls inside a measured window
    // depends on how fast callgrind runs.
    let options = SqliteOptions {
        search_index_every: Duration::from_secs(24 * 3600),
        ..SqliteOptions::default()
    };
    let store = SqliteStore::open_with(&dir.path().join("board.sqlite3"), options)
        .map_err(|e| BenchError::process("SQLite store", e.to_string()))?;
    let registry = Arc::new(MemoryRegistry::new());
    let audit = Arc::new(MemoryAuditSink::new());
    let metrics = corkboard_telemetry::Metrics::default();
    let tools = BoardTools::new(Arc::new(store), registry.clone(), audit)
        .with_store_timeout(Duration::from_secs(30))
        .with_result_budget(DEFAULT_RESULT_BUDGET)
        .with_metrics(metrics.clone());
    let key = SessionKey::new(vec![7u8; 32])
        .map_err(|e| BenchError::process("session key", e.to_string()))?;
    let mut settings = McpSettings::new(key);
    settings.metrics = Some(metrics);
    let endpoint = McpEndpoint::new(Arc::new(tools), settings);
    let app = test::init_service(App::new().configure(|cfg| endpoint.configure(cfg))).await;

    let now = Timestamp::now();
    let grant = Grant {
        id: GrantId::generate(),
        tenant: TenantId::parse("guard").map_err(usage)?,
        run: RunId::parse("guard-run").map_err(usage)?,
        capabilities: Capabilities::all(),
        created_at: now,
        expires_at: now.plus_millis(24 * 3_600_000),
        created_by: "instruction guard".to_owned(),
        budgets: Default::default(),
        min_integrity: None,
    };
    let token = RunToken::generate();
    registry
        .register(&grant, &token.hash())
        .await
        .map_err(|e| BenchError::process("registry", e.to_string()))?;
    let token = token.expose().to_owned();

    // The seeded board, through the same path (uninstrumented).
    let mut ids = Vec::with_capacity(SEEDED_ISSUES);
    for i in 0..SEEDED_ISSUES {
        let call = stateless_named_call(&token, "create_issue", &seeded_issue(i))?;
        let res = test::call_service(&app, request(&call)?.to_request()).await;
        let status = res.status().as_u16();
        let body = test::read_body(res).await;
        if !succeeded(status, &body) {
            return Err(BenchError::protocol(
                "seeding",
                String::from_utf8_lossy(&body).into_owned(),
            ));
        }
        let answer: Value = serde_json::from_slice(&body)?;
        let id = answer["result"]["structuredContent"]["id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        ids.push(id);
    }
    // An issue in the middle of the board, with neighbours either side.
    let issue = ids[SEEDED_ISSUES / 2].clone();
    // Issues read once each, from the board's first half (not that one).
    let reads = (WARM_UP + calls) as usize;
    if reads > SEEDED_ISSUES / 2 {
        return Err(usage(format!(
            "at most {} calls: the seeded board's first half is read once each",
            SEEDED_ISSUES / 2 - WARM_UP as usize
        )));
    }
    let unread = &ids[..reads];
    // The newest issues, newest first: after each, a full page of 50.
    let cursors: Vec<String> = ids.iter().rev().take(reads).cloned().collect();

    for op in Operation::ALL {
        let requests = (0..WARM_UP + calls)
            .map(|n| {
                let call = stateless_named_call(
                    &token,
                    op.tool(),
                    &arguments(op, n, &issue, unread, &cursors),
                )?;
                Ok(request(&call)?.to_request())
            })
            .collect::<Result<Vec<_>>>()?;
        let mut answers = Vec::with_capacity(requests.len());
        let mut requests = requests.into_iter();
        for req in requests.by_ref().take(WARM_UP as usize) {
            let res = test::call_service(&app, req).await;
            answers.push((res.status().as_u16(), test::read_body(res).await));
        }
        crabgrind::callgrind::start_instrumentation();
        crabgrind::callgrind::zero_stats();
        for req in requests {
            let res = test::call_service(&app, req).await;
            answers.push((res.status().as_u16(), test::read_body(res).await));
        }
        crabgrind::callgrind::dump_stats(op.name());
        crabgrind::callgrind::stop_instrumentation();
        if let Some((status, body)) = answers.iter().find(|(s, b)| !succeeded(*s, b)) {
            return Err(BenchError::protocol(
                op.name(),
                format!("HTTP {status}: {}", String::from_utf8_lossy(body)),
            ));
        }
    }
    Ok(())
}

fn usage(err: impl std::fmt::Display) -> BenchError {
    BenchError::Usage(err.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seeded_board_is_the_same_every_time() {
        assert_eq!(seeded_issue(7), seeded_issue(7));
        assert_ne!(seeded_issue(7), seeded_issue(8));
        // The search finds some seeded issues, not all.
        let matching = (0..SEEDED_ISSUES)
            .filter(|i| {
                let title = seeded_issue(*i)["title"].as_str().unwrap().to_owned();
                title.contains("flaky") && title.contains("login")
            })
            .count();
        assert!(matching > 0 && matching < SEEDED_ISSUES / 10, "{matching}");
    }
}
