//! Cold start and idle memory of `corkboard serve`: time from spawning the
//! process to `/readyz` answering 200 (the port is chosen beforehand, so
//! polling starts at spawn), on a fresh data dir (secrets and schema are
//! created) and on an existing one; then the resident set size once ready
//! and idle, and again after some use.

use crate::client::{self, Headers, Target};
use crate::error::{BenchError, Result};
use crate::load::{self, LoadSpec};
use crate::mcp::{Era, Titles, Tool};
use crate::procs::{self, Binaries};
use crate::record::{Record, Sink};
use crate::setup;
use hyper::Method;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

const READY_DEADLINE: Duration = Duration::from_secs(60);
/// How long the process sits idle before its RSS is read.
const SETTLE: Duration = Duration::from_secs(1);

struct Spawned {
    child: Child,
}

impl Drop for Spawned {
    fn drop(&mut self) {
        if let Some(pid) = rustix::process::Pid::from_raw(self.child.id() as i32) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> Result<u16> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(BenchError::io("find a free port"))
}

/// Spawns `serve` and returns it with the time to `/readyz` 200.
async fn start(
    bins: &Binaries,
    data_dir: &Path,
    log: &Path,
) -> Result<(Spawned, String, Duration)> {
    let port = free_port()?;
    let url = format!("http://127.0.0.1:{port}");
    let stderr =
        std::fs::File::create(log).map_err(BenchError::io(format!("create {}", log.display())))?;
    let mut cmd = bins.corkboard();
    cmd.args([
        "serve",
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--data-dir",
    ])
    .arg(data_dir)
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::from(stderr));
    let started = Instant::now();
    let child = cmd.spawn().map_err(|e| BenchError::Program {
        program: bins.corkboard.display().to_string(),
        reason: e.to_string(),
    })?;
    let mut spawned = Spawned { child };
    let ready = format!("{url}/readyz");
    loop {
        if let Ok(reply) = client::once(Method::GET, &ready, Headers::new(), None).await
            && reply.status.as_u16() == 200
        {
            return Ok((spawned, url, started.elapsed()));
        }
        if let Ok(Some(status)) = spawned.child.try_wait() {
            return Err(BenchError::process(
                "corkboard serve",
                format!("exited with {status} before ready; log {}", log.display()),
            ));
        }
        if started.elapsed() > READY_DEADLINE {
            return Err(BenchError::process(
                "corkboard serve",
                format!("not ready within {READY_DEADLINE:?}; log {}", log.display()),
            ));
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

pub async fn run(bins: &Binaries, trials: usize, logs: &Path, sink: &mut Sink) -> Result<()> {
    let dir = tempfile::Builder::new()
        .prefix("corkboard-bench-cold-")
        .tempdir()
        .map_err(BenchError::io("create a temporary directory"))?;
    let mut fresh = Vec::with_capacity(trials);
    let mut existing = Vec::with_capacity(trials);
    let mut rss_ready = Vec::with_capacity(trials);
    for trial in 0..trials {
        let data_dir = dir.path().join(format!("data-{trial}"));
        let log = logs.join("cold-start.log");
        let (first, _, elapsed) = start(bins, &data_dir, &log).await?;
        fresh.push(elapsed.as_secs_f64() * 1000.0);
        drop(first);
        let (second, _, elapsed) = start(bins, &data_dir, &log).await?;
        existing.push(elapsed.as_secs_f64() * 1000.0);
        tokio::time::sleep(SETTLE).await;
        rss_ready.push(procs::rss_kib(second.child.id())? as f64);
        drop(second);
    }
    sink.emit(
        Record::new("cold_start")
            .label("start", "fresh data dir")
            .with_samples(&fresh),
    )?;
    sink.emit(
        Record::new("cold_start")
            .label("start", "existing data dir")
            .with_samples(&existing),
    )?;

    // Idle RSS: once ready, and after serving some traffic (caches filled,
    // connections come and gone), each read after a quiet second.
    let data_dir = dir.path().join("data-idle");
    let (serve, url, _) = start(bins, &data_dir, &logs.join("idle-rss.log")).await?;
    tokio::time::sleep(SETTLE).await;
    let pid = serve.child.id();
    let ready_kib = procs::rss_kib(pid)?;
    let admin = setup::admin_token(bins, &[], Some(&data_dir))?;
    let granted = setup::create_grant(
        &url,
        &admin,
        "bench",
        "idle",
        &["issues:read", "issues:create"],
    )
    .await?;
    let issue = setup::seed_issue(&granted.mcp_url, &granted.token).await?;
    for tool in [Tool::CreateIssue, Tool::GetIssue] {
        load::run(&LoadSpec {
            target: Target::parse(&granted.mcp_url)?,
            token: granted.token.clone(),
            era: Era::Stateless,
            tool,
            issue: Some(issue.clone()),
            concurrency: 16,
            warmup: Duration::ZERO,
            duration: Duration::from_secs(1),
            titles: Titles::One,
        })
        .await?;
    }
    tokio::time::sleep(SETTLE).await;
    let used_kib = procs::rss_kib(pid)?;
    let mut sorted = rss_ready.clone();
    sorted.sort_by(f64::total_cmp);
    sink.emit(
        Record::new("idle_rss")
            .label("mode", "corkboard serve")
            .value("ready_kib", ready_kib as f64)
            .value(
                "restarted_ready_p50_kib",
                crate::record::quantile(&sorted, 0.5),
            )
            .value("after_use_kib", used_kib as f64),
    )?;
    drop(serve);
    Ok(())
}
