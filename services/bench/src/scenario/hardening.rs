//! Hardening figures (issue 16): the server's memory under the two
//! attacks the issue reproduced, and how soon a revocation made while
//! Redis was unreachable takes effect everywhere once Redis returns.
//!
//! - `batch`: attackers in 2025-03-26 sessions send max-length batches
//!   (`max_batch_len`, 32) of `get_issue` on an issue holding the most
//!   comments it may (500 of 64 KiB: about 32 MiB), back to back; the
//!   server's RSS is sampled every 50 ms. The batch response budget
//!   (`max_batch_response_bytes`, 4 MiB plus one element) is what bounds
//!   each batch's answer.
//! - `slow`: many connections (up to the connection cap) that each
//!   dribble one byte a second: a request head (slowloris), a body with a
//!   valid token (held until the body deadline), a body without a token
//!   (refused from the headers). Figures: RSS, how long the server let a
//!   connection hold on, and how it ended.
//! - `revocation-outage`: two servers sharing Redis; Redis is frozen
//!   (SIGSTOP), a grant revoked on A (503, the revocation pending), Redis
//!   thawed; the figure is the time from the thaw until both replicas
//!   refuse the token.

use super::deploy::{DeploySpec, Deployment, Endpoint, Registry, Store};
use crate::client::{Connection, Headers, Target};
use crate::error::{BenchError, Result};
use crate::mcp::{self, Tool};
use crate::procs::{self, Binaries, Process};
use crate::record::{Record, Sink, quantile};
use crate::setup;
use bytes::Bytes;
use hyper::Method;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How long the server sits idle before its RSS is read.
const SETTLE: Duration = Duration::from_secs(2);
/// RSS sampling period during an attack.
const SAMPLE_EVERY: Duration = Duration::from_millis(50);
/// The most comments an issue may hold (`COMMENTS_MAX`) and the largest
/// comment body (64 KiB).
const COMMENTS: usize = 500;
const COMMENT_BYTES: usize = 64 * 1024;
/// The batch length cap (`max_batch_len`).
const BATCH_LEN: usize = 32;
/// A slow connection writes one byte this often...
const DRIBBLE_EVERY: Duration = Duration::from_secs(1);
/// ...and gives up after this long (the server should end it far sooner).
const GIVE_UP: Duration = Duration::from_secs(40);
/// Longest a replica may take to refuse once Redis is back before the
/// trial counts as failed (this only bounds the wait).
const CONVERGENCE_DEADLINE: Duration = Duration::from_secs(30);

/// Samples a process's RSS until stopped; the peak in KiB.
pub(crate) struct RssSampler {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl RssSampler {
    pub(crate) fn start(pid: u32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicU64::new(0));
        let task = tokio::spawn({
            let (stop, peak) = (stop.clone(), peak.clone());
            async move {
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(kib) = procs::rss_kib(pid) {
                        peak.fetch_max(kib, Ordering::Relaxed);
                    }
                    tokio::time::sleep(SAMPLE_EVERY).await;
                }
            }
        });
        Self { stop, peak, task }
    }

    pub(crate) async fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.task.await;
        self.peak.load(Ordering::Relaxed)
    }
}

fn pid_of(process: &Process) -> Result<u32> {
    process
        .pid()
        .ok_or_else(|| BenchError::protocol("server", "the process has no pid"))
}

fn studio(env: Vec<(String, String)>) -> DeploySpec {
    DeploySpec {
        endpoint: Endpoint::Studio,
        store: Store::Sqlite,
        registry: Registry::Memory,
        log: Some(attack_log()),
        env,
    }
}

/// The server's log level under attack: `warn` (one info line per request
/// would be most of what an attack costs), or `BENCH_SERVER_LOG`.
pub(crate) fn attack_log() -> String {
    std::env::var("BENCH_SERVER_LOG").unwrap_or_else(|_| "warn".into())
}

/// The start of a slowloris request: a head that never ends (the caller
/// dribbles one more byte of the header's value a second).
pub(crate) fn slowloris_head(host: &str) -> Vec<u8> {
    format!("POST /mcp HTTP/1.1\r\nHost: {host}\r\nX-Slow: ").into_bytes()
}

/// Sends one `tools/call` on `connection`; Ok when it is not an error.
async fn call(
    connection: &mut Connection,
    target: &Target,
    call: &mcp::PreparedCall,
) -> Result<()> {
    let reply = connection
        .send(Method::POST, &target.path, &call.headers, call.body.clone())
        .await?;
    match mcp::classify(&reply) {
        mcp::Verdict::Ok => Ok(()),
        other => Err(BenchError::protocol(
            "setup call",
            format!("{}: {}", other.label(), reply.text()),
        )),
    }
}

pub async fn batch_attack(
    bins: &Binaries,
    attackers: usize,
    duration: Duration,
    logs: &Path,
    sink: &mut Sink,
) -> Result<()> {
    let deployment = Deployment::start(bins, studio(Vec::new()), logs).await?;
    // The writer may not read: its add_comment answers carry the comment
    // only, not the (growing) issue.
    let writer = deployment
        .grant("bench", "writer", &["issues:create", "comments:write"])
        .await?;
    let granted = deployment
        .grant("bench", "attacker", &["issues:read"])
        .await?;
    let target = Target::parse(&granted.mcp_url)?;
    let issue = setup::seed_issue(&writer.mcp_url, &writer.token).await?;
    let mut connection = Connection::open(&target).await?;
    let body = "x".repeat(COMMENT_BYTES);
    for _ in 0..COMMENTS {
        let comment = mcp::stateless_named_call(
            &writer.token,
            "add_comment",
            &json!({ "issue_id": issue, "body": body }),
        )?;
        call(&mut connection, &target, &comment).await?;
    }
    drop(connection);
    tokio::time::sleep(SETTLE).await;
    let pid = pid_of(&deployment.process)?;
    let before = procs::rss_kib(pid)?;

    let batch: Vec<serde_json::Value> = (0..BATCH_LEN)
        .map(|i| {
            json!({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                   "params": {"name": "get_issue", "arguments": {"id": issue}}})
        })
        .collect();
    let batch = Bytes::from(serde_json::to_vec(&batch)?);
    let sampler = RssSampler::start(pid);
    let deadline = Instant::now() + duration;
    let mut tasks = Vec::new();
    for _ in 0..attackers.max(1) {
        let (target, token, issue, batch) = (
            target.clone(),
            granted.token.clone(),
            issue.clone(),
            batch.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut connection = Connection::open(&target).await?;
            let arguments = json!({ "id": issue });
            // Batches exist only in 2025-03-26 sessions.
            let session = mcp::legacy_session_at(
                &mut connection,
                &target.path,
                &token,
                Tool::GetIssue,
                &arguments,
                "2025-03-26",
            )
            .await?;
            let (mut batches, mut bytes, mut refused) = (0u64, 0u64, BTreeMap::new());
            while Instant::now() < deadline {
                let reply = connection
                    .send(Method::POST, &target.path, &session.headers, batch.clone())
                    .await?;
                bytes += reply.body.len() as u64;
                batches += 1;
                // Elements the budget cut off are answered -32055 each.
                let cut = reply.text().matches("-32055").count() as u64;
                if cut > 0 {
                    *refused.entry("-32055").or_insert(0) += cut;
                }
            }
            Ok::<_, BenchError>((batches, bytes, refused))
        }));
    }
    let (mut batches, mut bytes, mut errors) = (0u64, 0u64, 0u64);
    let mut cut_off = 0u64;
    let mut first_error = None;
    for task in tasks {
        match task.await {
            Ok(Ok((b, n, refused))) => {
                batches += b;
                bytes += n;
                cut_off += refused.values().sum::<u64>();
            }
            // A failed session is an error of the record, and the first
            // one's reason goes into its note (never silently counted).
            Ok(Err(e)) => {
                errors += 1;
                first_error.get_or_insert_with(|| e.to_string());
            }
            Err(e) => {
                errors += 1;
                first_error.get_or_insert_with(|| e.to_string());
            }
        }
    }
    let peak = sampler.finish().await;
    tokio::time::sleep(SETTLE).await;
    let after = procs::rss_kib(pid)?;
    let mut record = Record::new("hardening_memory")
        .label("mode", "batch attack")
        .value("attackers", attackers as f64)
        .value("rss_before_kib", before as f64)
        .value("rss_peak_kib", peak as f64)
        .value("rss_after_kib", after as f64)
        .value("batches", batches as f64)
        .value(
            "mib_per_batch",
            bytes as f64 / batches.max(1) as f64 / (1024.0 * 1024.0),
        )
        .value("elements_cut_off", cut_off as f64);
    record.count = Some(batches);
    record.errors = errors;
    let failed = first_error
        .map(|e| format!("; first failed session: {e}"))
        .unwrap_or_default();
    record.note = Some(format!(
        "{attackers} sessions sending batches of {BATCH_LEN} get_issue back to back for {duration:?} on an issue with {COMMENTS} comments of {} KiB; RSS sampled every {} ms{failed}",
        COMMENT_BYTES / 1024,
        SAMPLE_EVERY.as_millis()
    ));
    sink.emit(record)
}

/// How one slow connection ended.
pub(crate) struct Ended {
    pub(crate) held: Duration,
    /// The status of the answer, if one came before the close.
    pub(crate) status: Option<u16>,
}

/// Connects, writes `first`, then one byte of `dribble` per
/// `DRIBBLE_EVERY` until the server ends the connection (or `GIVE_UP`).
pub(crate) async fn slow_connection(addr: std::net::SocketAddr, first: Vec<u8>) -> Result<Ended> {
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(BenchError::io(format!("connect {addr}")))?;
    let started = Instant::now();
    let (mut read, mut write) = stream.into_split();
    let writer = tokio::spawn(async move {
        if write.write_all(&first).await.is_err() {
            return;
        }
        loop {
            tokio::time::sleep(DRIBBLE_EVERY).await;
            if write.write_all(b"a").await.is_err() {
                return;
            }
        }
    });
    let mut answer = Vec::new();
    let mut buf = [0u8; 1024];
    let ended = tokio::time::timeout(GIVE_UP, async {
        loop {
            match read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) if answer.len() < 64 => answer.extend_from_slice(&buf[..n]),
                Ok(_) => {}
            }
        }
    })
    .await;
    writer.abort();
    let held = started.elapsed();
    let status = String::from_utf8_lossy(&answer)
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok());
    if ended.is_err() && status.is_none() {
        // Still open after GIVE_UP: held as long as the client wanted.
        return Ok(Ended { held, status: None });
    }
    Ok(Ended { held, status })
}

pub async fn slow_attack(
    bins: &Binaries,
    connections: usize,
    logs: &Path,
    sink: &mut Sink,
) -> Result<()> {
    let deployment = Deployment::start(bins, studio(Vec::new()), logs).await?;
    let granted = deployment.grant("bench", "slow", &["issues:read"]).await?;
    let target = Target::parse(&granted.mcp_url)?;
    let pid = pid_of(&deployment.process)?;
    let host = &target.authority;
    let post = |auth: &str| {
        format!(
            "POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
             {auth}Content-Length: 1048576\r\n\r\n{{"
        )
        .into_bytes()
    };
    let attacks: [(&str, Vec<u8>); 3] = [
        (
            "slowloris: request heads one byte a second",
            slowloris_head(host),
        ),
        (
            "slow 1 MiB bodies with a valid token, one byte a second",
            post(&format!("Authorization: Bearer {}\r\n", granted.token)),
        ),
        ("slow 1 MiB bodies without a token", post("")),
    ];
    for (mode, first) in attacks {
        tokio::time::sleep(SETTLE).await;
        let before = procs::rss_kib(pid)?;
        let sampler = RssSampler::start(pid);
        let tasks: Vec<_> = (0..connections)
            .map(|_| tokio::spawn(slow_connection(target.addr, first.clone())))
            .collect();
        let mut held = Vec::with_capacity(connections);
        let (mut statuses, mut errors) = (BTreeMap::<String, u64>::new(), 0u64);
        for task in tasks {
            match task.await {
                Ok(Ok(ended)) => {
                    held.push(ended.held.as_secs_f64() * 1000.0);
                    let key = ended
                        .status
                        .map_or_else(|| "closed without an answer".to_owned(), |s| s.to_string());
                    *statuses.entry(key).or_insert(0) += 1;
                }
                _ => errors += 1,
            }
        }
        let peak = sampler.finish().await;
        let mut record = Record::new("hardening_memory")
            .label("mode", mode)
            .with_samples(&held)
            .value("connections", connections as f64)
            .value("rss_before_kib", before as f64)
            .value("rss_peak_kib", peak as f64);
        record.errors = errors;
        record.error_kinds = statuses
            .into_iter()
            .map(|(status, n)| (format!("ended {status}"), n))
            .collect();
        record.note = Some(
            "slow connections: p50..max are how long the server let each connection hold on (ms); `ended N` counts how the server ended them (HTTP status of its answer)"
                .into(),
        );
        sink.emit(record)?;
    }
    Ok(())
}

pub async fn revocation_after_outage(
    bins: &Binaries,
    trials: usize,
    logs: &Path,
    sink: &mut Sink,
) -> Result<()> {
    let redis = procs::redis()?;
    let dir = tempfile::Builder::new()
        .prefix("corkboard-bench-outage-")
        .tempdir()
        .map_err(BenchError::io("create a temporary directory"))?;
    let mut env = procs::cluster_secrets(dir.path())?;
    env.extend([
        ("CORKBOARD_REGISTRY".to_owned(), "redis".to_owned()),
        ("CORKBOARD_REDIS_URL".to_owned(), redis.url()),
        (
            "CORKBOARD_DATA_DIR".to_owned(),
            dir.path().join("data").display().to_string(),
        ),
        ("CORKBOARD_LOG".to_owned(), "warn".to_owned()),
    ]);
    let start = |name: &str| -> Result<Process> {
        let mut cmd = bins.corkboard();
        cmd.args(["server", "--listen", "127.0.0.1:0"])
            .envs(env.iter().cloned());
        Process::spawn(name, cmd, &logs.join(format!("{name}.log")))
    };
    let mut a = start("outage-replica-a")?;
    a.ready().await?;
    let mut b = start("outage-replica-b")?;
    b.ready().await?;
    let admin = setup::admin_token(bins, &env, None)?;
    let replicas = [
        Target::parse(&format!("{}/mcp", a.url))?,
        Target::parse(&format!("{}/mcp", b.url))?,
    ];
    let (mut slowest, mut failures) = (Vec::with_capacity(trials), 0u64);
    let mut per_replica: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    for trial in 0..trials {
        let run = format!("outage-{trial}");
        let granted = setup::create_grant(&a.url, &admin, "bench", &run, &["issues:read"]).await?;
        let poll = mcp::stateless_request(&granted.token, "tools/list")?;
        // Both replicas serve it (and cache it) first.
        for target in &replicas {
            let mut connection = Connection::open(target).await?;
            let reply = connection
                .send(Method::POST, &target.path, &poll.headers, poll.body.clone())
                .await?;
            if reply.status.as_u16() != 200 {
                return Err(BenchError::protocol(
                    "warm-up",
                    format!("HTTP {}: {}", reply.status, reply.text()),
                ));
            }
        }
        redis.pause();
        let revoke = crate::client::once(
            Method::DELETE,
            &format!("{}/v1/tenants/bench/grants/{}", a.url, granted.grant_id),
            Headers::new().bearer(&admin)?,
            None,
        )
        .await;
        redis.resume();
        let resumed = Instant::now();
        match revoke {
            // Refused, as it cannot be confirmed: the revocation is pending.
            Ok(reply) if reply.status.as_u16() == 503 => {}
            Ok(reply) => {
                return Err(BenchError::protocol(
                    "revoke while Redis is frozen",
                    format!("expected 503, got HTTP {}: {}", reply.status, reply.text()),
                ));
            }
            Err(err) => return Err(err),
        }
        let polls = replicas.iter().map(|target| {
            let (target, poll) = (target.clone(), poll.clone());
            tokio::spawn(async move {
                let mut connection = Connection::open(&target).await?;
                loop {
                    if !connection.is_open() {
                        connection = Connection::open(&target).await?;
                    }
                    let status = connection
                        .send(Method::POST, &target.path, &poll.headers, poll.body.clone())
                        .await
                        .map(|r| r.status.as_u16());
                    if status.as_ref().is_ok_and(|s| *s == 403) {
                        return Ok(resumed.elapsed());
                    }
                    if resumed.elapsed() > CONVERGENCE_DEADLINE {
                        return Err(BenchError::protocol(
                            "convergence",
                            format!("still not refused: {status:?}"),
                        ));
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            })
        });
        let mut trial_max: Option<f64> = Some(0.0);
        for (i, poll) in polls.collect::<Vec<_>>().into_iter().enumerate() {
            match poll.await {
                Ok(Ok(after)) => {
                    let ms = after.as_secs_f64() * 1000.0;
                    per_replica[i].push(ms);
                    trial_max = trial_max.map(|m| m.max(ms));
                }
                _ => trial_max = None,
            }
        }
        match trial_max {
            Some(ms) => slowest.push(ms),
            None => failures += 1,
        }
    }
    a.check_alive()?;
    b.check_alive()?;
    let median = |samples: &mut Vec<f64>| {
        samples.sort_by(f64::total_cmp);
        quantile(samples, 0.5)
    };
    let [mut on_a, mut on_b] = per_replica;
    let mut record = Record::new("hardening_revocation")
        .label("mode", "two servers, Redis frozen during the revoke")
        .with_samples(&slowest)
        .value("replica_a_p50_ms", median(&mut on_a))
        .value("replica_b_p50_ms", median(&mut on_b));
    record.errors = failures;
    record.note = Some(
        "from thawing Redis (SIGCONT) after a revoke answered 503 (pending) until both replicas refuse the token; polled every millisecond"
            .into(),
    );
    sink.emit(record)
}
