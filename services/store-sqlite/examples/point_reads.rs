//! Point-read latency and throughput of the SQLite store under concurrency:
//! `get_issue` (an issue and its comments) and `grant_by_token_hash`, each
//! from many tasks at once on a multi-thread tokio runtime (one worker per
//! core, like `corkboard serve`).
//!
//! ```text
//! cargo run --release -p corkboard-store-sqlite --example point_reads -- [tasks] [seconds]
//! ```
//!
//! Defaults: 64 tasks, 5 seconds per phase. Prints ops/s, percentiles of
//! one client's cycle (the read, then a yield to the other clients, as a
//! request handler would) and process CPU time per op (from `/proc/self/stat`, Linux
//! only; the figure includes every thread: workers, blocking pool, writer).

#![allow(clippy::print_stdout)]

use corkboard_board::{GrantLedger, IssueStore, NewComment, NewIssue, TenantId, Timestamp};
use corkboard_store_contract::fixtures;
use corkboard_store_sqlite::SqliteStore;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

const ISSUES: usize = 1000;
const COMMENTS_PER_ISSUE: usize = 2;
const GRANTS: usize = 1000;

fn main() {
    let mut args = std::env::args().skip(1);
    let tasks: usize = args.next().map_or(64, |a| a.parse().expect("tasks"));
    let seconds: u64 = args.next().map_or(5, |a| a.parse().expect("seconds"));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(run(tasks, Duration::from_secs(seconds)));
}

async fn run(tasks: usize, phase: Duration) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let store = Arc::new(SqliteStore::open_in_dir(dir.path()).expect("open"));
    let tenant = TenantId::parse("bench").expect("tenant");
    let author = fixtures::author("bench-run");

    let mut issues = Vec::with_capacity(ISSUES);
    for i in 0..ISSUES {
        let title = fixtures::title(&format!("issue {i}"));
        let created = store
            .create_issue(&tenant, &author, NewIssue::new(title), None)
            .await
            .expect("create");
        for c in 0..COMMENTS_PER_ISSUE {
            let comment = NewComment {
                issue: created.issue.id.clone(),
                body: corkboard_board::CommentBody::parse(format!("comment {c}")).expect("body"),
            };
            store
                .add_comment(&tenant, &author, comment, None)
                .await
                .expect("comment");
        }
        issues.push(created.issue.id);
    }
    let mut hashes = Vec::with_capacity(GRANTS);
    for _ in 0..GRANTS {
        let grant = fixtures::grant(&tenant, "bench-run", Timestamp::now(), 3_600_000);
        let hash = fixtures::token_hash();
        store.record_grant(&grant, &hash).await.expect("grant");
        hashes.push(hash);
    }
    let (issues, hashes) = (Arc::new(issues), Arc::new(hashes));
    println!("{tasks} tasks, {} s per phase", phase.as_secs());

    // A short warm-up, so every reader connection is open and cached.
    phase_run("warm-up", tasks, Duration::from_millis(500), {
        let (store, tenant, issues) = (Arc::clone(&store), tenant.clone(), Arc::clone(&issues));
        move |i| {
            let (store, tenant, issues) = (Arc::clone(&store), tenant.clone(), Arc::clone(&issues));
            async move {
                store
                    .get_issue(&tenant, &issues[i % issues.len()])
                    .await
                    .expect("get_issue");
            }
        }
    })
    .await;
    phase_run("get_issue", tasks, phase, {
        let (store, tenant, issues) = (Arc::clone(&store), tenant.clone(), Arc::clone(&issues));
        move |i| {
            let (store, tenant, issues) = (Arc::clone(&store), tenant.clone(), Arc::clone(&issues));
            async move {
                let issue = store
                    .get_issue(&tenant, &issues[i % issues.len()])
                    .await
                    .expect("get_issue");
                assert_eq!(issue.comments.len(), COMMENTS_PER_ISSUE);
            }
        }
    })
    .await;
    phase_run("grant_by_token_hash", tasks, phase, {
        let (store, hashes) = (Arc::clone(&store), Arc::clone(&hashes));
        move |i| {
            let (store, hashes) = (Arc::clone(&store), Arc::clone(&hashes));
            async move {
                let found = store
                    .grant_by_token_hash(&hashes[i % hashes.len()])
                    .await
                    .expect("grant_by_token_hash");
                assert!(found.is_some());
            }
        }
    })
    .await;
}

/// Runs `op(i)` in a loop from `tasks` tasks for `length`; prints the figures.
async fn phase_run<F, Fut>(name: &str, tasks: usize, length: Duration, op: F)
where
    F: Fn(usize) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    let cpu_before = cpu_time();
    let started = Instant::now();
    let deadline = started + length;
    let mut set = tokio::task::JoinSet::new();
    for task in 0..tasks {
        let op = op.clone();
        set.spawn(async move {
            let mut latencies = Vec::with_capacity(64 * 1024);
            let mut i = task * 7919;
            while Instant::now() < deadline {
                let t = Instant::now();
                op(i).await;
                // Like a request handler going back to its socket: let the
                // other clients on this worker run. Timed too, so the
                // figure is one client's cycle (its wait for its turn
                // included), comparable whether the read yields or not.
                tokio::task::yield_now().await;
                latencies.push(t.elapsed());
                i += 1;
            }
            latencies
        });
    }
    let mut all = Vec::new();
    while let Some(latencies) = set.join_next().await {
        all.extend(latencies.expect("a task"));
    }
    let elapsed = started.elapsed();
    let cpu = cpu_time()
        .zip(cpu_before)
        .map(|(after, before)| after - before);
    if name == "warm-up" {
        return;
    }
    all.sort_unstable();
    let pct = |p: f64| {
        let index = ((all.len() as f64 * p) as usize).min(all.len().saturating_sub(1));
        all.get(index).copied().unwrap_or_default()
    };
    let ops = all.len() as f64;
    println!(
        "{name:>20}: {:>9.0} ops/s  p50 {:>7.1} us  p99 {:>7.1} us  p99.9 {:>8.1} us  max {:>8.1} us  cpu/op {}",
        ops / elapsed.as_secs_f64(),
        micros(pct(0.50)),
        micros(pct(0.99)),
        micros(pct(0.999)),
        micros(all.last().copied().unwrap_or_default()),
        cpu.map_or_else(
            || "n/a".to_owned(),
            |cpu| format!("{:.1} us", micros(cpu) / ops)
        ),
    );
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// User + system CPU time of this process so far (Linux), in clock ticks
/// converted assuming the usual 100 Hz.
fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command name; utime and stime are the
    // 14th and 15th fields of the whole line.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(Duration::from_millis((utime + stime) * 10))
}
