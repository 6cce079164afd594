//! Memory per 1,000 live legacy (2025-era) sessions on one run's gateway,
//! on either listener mode (the run's dedicated port or its route on the
//! runner's shared port).
//!
//! Each session is opened the way a 2025 client opens one: `initialize`,
//! then `notifications/initialized`, then one `tools/call` (`get_issue`)
//! under its `Mcp-Session-Id` to prove it live. What is kept live is the
//! *session*, not its connection: each session's three requests go over
//! its own keep-alive connection, which is closed after the call (a
//! session id outlives its connection; clients reconnect with it). This is
//! deliberate: the connections' own cost is what `slow-attack` measures,
//! and holding 10,000 sockets would measure the socket buffers and the
//! listener's connection cap instead of the sessions. After the largest
//! count, a spread of the sessions is called again on new connections to
//! show they are all still accepted.
//!
//! Session ids are signed and self-contained (`services/mcp/src/session.rs`):
//! the server keeps nothing per session, so the figure is expected near
//! zero. It is measured because that is a promise, and anything that
//! starts keeping per-session state (a cache, a map of session ends)
//! shows up here. Every call also grows the runner a little whether or not
//! it is in a session (audit rows and SQLite's page cache, log buffers,
//! the allocator), so a control follows: as many stateless calls on fresh
//! connections, no session; the sessions' own cost is the difference.

use super::deploy::{DeploySpec, Deployment, Endpoint, Registry, Store};
use crate::client::{self, Connection, Target};
use crate::error::{BenchError, Result};
use crate::mcp::{self, PreparedCall, Tool, Verdict};
use crate::procs::Binaries;
use crate::record::{Record, Sink};
use crate::setup;
use hyper::Method;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long the runner sits idle before its RSS is read.
const SETTLE: Duration = Duration::from_secs(2);
/// Sessions probed again after the largest count (a spread of them).
const PROBES: usize = 100;

/// What the figures are of, printed under the table.
const NOTE: &str = "legacy (2025-11-25) sessions on one run's gateway (SQLite store, memory \
registry), each opened with initialize + notifications/initialized and proved live by one \
get_issue under its Mcp-Session-Id; the sessions are kept live, not their connections (each \
session's connection is closed after its call: session ids are signed and self-contained, the \
server keeps nothing per session); per_1000_sessions_kib is the runner's RSS growth over one warm \
session per 1,000 sessions, read 2 s after the last one opened; after the largest count \
probed_sessions of them, spread over all, are called again on new connections (a failure is \
an error); the control row makes as many stateless get_issue calls, each on a fresh \
connection, with no session (per_1000_calls_kib): the same connection churn, audit records \
and log lines, so the sessions' own cost is the difference between the two; the runner is \
warmed with 1,000 such calls before the first reading; the runner's per-connection cost is the \
slow-attack figure";

/// What to measure.
#[derive(Debug, Clone)]
pub struct SessionsSpec {
    pub mode: Endpoint,
    /// Session counts, reached cumulatively on one run.
    pub counts: Vec<usize>,
    /// Sessions being opened at once.
    pub parallel: usize,
}

/// Opens one legacy session on a fresh connection and calls `get_issue`
/// in it; the call to repeat in the session (its headers carry the id).
async fn open_session(target: &Target, token: &str, issue: &str) -> Result<PreparedCall> {
    let arguments = Tool::GetIssue.arguments(Some(issue))?;
    let work = async {
        let mut connection = Connection::open(target).await?;
        let call = mcp::legacy_session(
            &mut connection,
            &target.path,
            token,
            Tool::GetIssue,
            &arguments,
        )
        .await?;
        call_in(&mut connection, target, &call).await?;
        Ok::<_, BenchError>(call)
    };
    tokio::time::timeout(client::SETUP_TIMEOUT, work)
        .await
        .map_err(|_| BenchError::Http(format!("{}: no answer opening a session", target.url())))?
}

/// Sends the session's `tools/call`; Ok when it answered a tool result.
async fn call_in(connection: &mut Connection, target: &Target, call: &PreparedCall) -> Result<()> {
    let reply = connection
        .send(Method::POST, &target.path, &call.headers, call.body.clone())
        .await?;
    match mcp::classify(&reply) {
        Verdict::Ok => Ok(()),
        other => Err(BenchError::protocol(
            "tools/call in a legacy session",
            format!("{}: HTTP {}: {}", other.label(), reply.status, reply.text()),
        )),
    }
}

pub async fn run(bins: &Binaries, spec: &SessionsSpec, logs: &Path, sink: &mut Sink) -> Result<()> {
    if spec.mode == Endpoint::Studio {
        return Err(BenchError::Usage(
            "--mode is gateway (a run's dedicated port) or shared (the runner's shared port)"
                .into(),
        ));
    }
    let deploy = DeploySpec {
        endpoint: spec.mode,
        store: Store::Sqlite,
        registry: Registry::Memory,
        // Default info level: one log line per request, as in production.
        log: None,
        env: Vec::new(),
    };
    let parallel = spec.parallel.max(1);
    let deployment = Deployment::start(bins, deploy, logs).await?;
    let granted = deployment
        .grant("bench", "sessions", &["issues:read", "issues:create"])
        .await?;
    let issue = setup::seed_issue(&granted.mcp_url, &granted.token).await?;
    let target = Target::parse(&granted.mcp_url)?;
    // One session first, so one-time work (tool tables, pools) is not
    // billed to the sessions; then stateless calls on fresh connections,
    // so the growth every call causes whether or not it is in a session
    // (the audit table and SQLite's page cache, the allocator's arenas)
    // has mostly happened before the first reading.
    open_session(&target, &granted.token, &issue).await?;
    stateless_calls(&target, &granted.token, &issue, WARM_CALLS, parallel).await?;
    tokio::time::sleep(SETTLE).await;
    let before = deployment.process.rss_kib()?;

    let mut counts = spec.counts.clone();
    counts.sort_unstable();
    counts.dedup();
    let mut sessions: Vec<PreparedCall> = Vec::new();
    let mut failures = 0u64;
    let started = Instant::now();
    for (index, &count) in counts.iter().enumerate() {
        while sessions.len() + (failures as usize) < count {
            let batch = parallel.min(count - sessions.len() - failures as usize);
            let tasks: Vec<_> = (0..batch)
                .map(|_| {
                    let (target, token, issue) =
                        (target.clone(), granted.token.clone(), issue.clone());
                    tokio::spawn(async move { open_session(&target, &token, &issue).await })
                })
                .collect();
            for task in tasks {
                match task.await {
                    Ok(Ok(call)) => sessions.push(call),
                    _ => failures += 1,
                }
            }
        }
        let open_secs = started.elapsed().as_secs_f64();
        tokio::time::sleep(SETTLE).await;
        let after = deployment.process.rss_kib()?;
        let live = sessions.len();

        // After the largest count: every probed session must still be
        // accepted on a new connection, or the figure would flatter dead
        // sessions.
        let last = index + 1 == counts.len();
        let mut probe_failures = 0u64;
        let mut probed = 0usize;
        if last {
            let step = (live / PROBES).max(1);
            for call in sessions.iter().step_by(step) {
                probed += 1;
                let ok = async {
                    let mut connection = Connection::open(&target).await?;
                    call_in(&mut connection, &target, call).await
                };
                if !matches!(
                    tokio::time::timeout(client::SETUP_TIMEOUT, ok).await,
                    Ok(Ok(()))
                ) {
                    probe_failures += 1;
                }
            }
        }
        let growth_kib = after.saturating_sub(before) as f64;
        let per_1000 = if live > 0 {
            growth_kib * 1000.0 / live as f64
        } else {
            0.0
        };
        let mut record = Record::new("legacy_sessions")
            .label("mode", spec.mode)
            .label("shape", format!("{count} sessions"))
            .value("sessions", live as f64)
            .value("rss_before_kib", before as f64)
            .value("rss_after_kib", after as f64)
            .value("per_1000_sessions_kib", per_1000)
            .value("sessions_per_s", live as f64 / open_secs.max(f64::EPSILON));
        record.count = Some(live as u64);
        record.errors = failures + probe_failures;
        if failures > 0 {
            record.error_kinds.insert("open_failed".into(), failures);
        }
        if probe_failures > 0 {
            record
                .error_kinds
                .insert("probe_failed".into(), probe_failures);
        }
        if last {
            record = record.value("probed_sessions", probed as f64);
        }
        record.note = Some(NOTE.to_owned());
        sink.emit(record)?;
    }

    // The control: as many stateless calls, each on its own fresh
    // connection, as the largest count had sessions. Same connection
    // churn, same audit records and log lines, no session: the sessions'
    // own cost is the difference. Measured after the sessions, so any
    // growth still left from warming up is billed to the sessions, never
    // hidden by the control.
    let calls = counts.last().copied().unwrap_or(0);
    tokio::time::sleep(SETTLE).await;
    let before = deployment.process.rss_kib()?;
    let started = Instant::now();
    let failed = stateless_calls(&target, &granted.token, &issue, calls, parallel).await?;
    let secs = started.elapsed().as_secs_f64();
    tokio::time::sleep(SETTLE).await;
    let after = deployment.process.rss_kib()?;
    let done = calls.saturating_sub(failed as usize);
    let mut record = Record::new("legacy_sessions")
        .label("mode", spec.mode)
        .label(
            "shape",
            format!("control: {calls} stateless calls, no session"),
        )
        .value("calls", done as f64)
        .value("rss_before_kib", before as f64)
        .value("rss_after_kib", after as f64)
        .value(
            "per_1000_calls_kib",
            after.saturating_sub(before) as f64 * 1000.0 / done.max(1) as f64,
        )
        .value("calls_per_s", done as f64 / secs.max(f64::EPSILON));
    record.count = Some(done as u64);
    record.errors = failed;
    if failed > 0 {
        record.error_kinds.insert("call_failed".into(), failed);
    }
    record.note = Some(NOTE.to_owned());
    sink.emit(record)?;
    Ok(())
}

/// Stateless calls warming the runner before its first reading.
const WARM_CALLS: usize = 1000;

/// `calls` stateless `get_issue` calls, each on a fresh connection,
/// `parallel` at a time; how many failed.
async fn stateless_calls(
    target: &Target,
    token: &str,
    issue: &str,
    calls: usize,
    parallel: usize,
) -> Result<u64> {
    let call = mcp::stateless_call(
        token,
        Tool::GetIssue,
        &Tool::GetIssue.arguments(Some(issue))?,
    )?;
    let mut failed = 0u64;
    let mut done = 0usize;
    while done < calls {
        let batch = parallel.min(calls - done);
        let tasks: Vec<_> = (0..batch)
            .map(|_| {
                let (target, call) = (target.clone(), call.clone());
                tokio::spawn(async move {
                    let once = async {
                        let mut connection = Connection::open(&target).await?;
                        call_in(&mut connection, &target, &call).await
                    };
                    matches!(
                        tokio::time::timeout(client::SETUP_TIMEOUT, once).await,
                        Ok(Ok(()))
                    )
                })
            })
            .collect();
        for task in tasks {
            if !matches!(task.await, Ok(true)) {
                failed += 1;
            }
        }
        done += batch;
    }
    Ok(failed)
}
