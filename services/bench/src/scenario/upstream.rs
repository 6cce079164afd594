//! What a run's gateway adds to an upstream tool call: the same `add` of
//! the Python SDK upstream (`tests/clients/upstream/py_server.py`,
//! 2026-07-28 stateless), called directly and through a run's gateway
//! (`bench__add`, the credential injected by the gateway), at each
//! concurrency, back to back so the two figures compare. The added
//! latency is the gateway's p50 (and p99) minus the direct one.

use super::deploy::{DeploySpec, Deployment, Endpoint, Registry, Store};
use crate::client::{self, Headers, Target};
use crate::error::{BenchError, Result};
use crate::load::{self, LoadSpec};
use crate::mcp::{Era, Tool};
use crate::procs::Binaries;
use crate::record::{Record, Sink};
use hyper::Method;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct UpstreamScenario {
    pub concurrency: Vec<usize>,
    pub warmup: Duration,
    pub duration: Duration,
    /// The repository checkout holding `target/venv` and the upstream script.
    pub repo: PathBuf,
}

/// The upstream process, killed on drop.
struct Upstream(Child);

impl Drop for Upstream {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What the direct calls present: the same header the gateway injects.
const DIRECT_TOKEN: &str = "cbr_bench-upstream-direct";

fn start_upstream(repo: &Path, logs: &Path) -> Result<(Upstream, u16)> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(BenchError::io("pick a free port"))?
        .port();
    let log = std::fs::File::create(logs.join("upstream-py.log"))
        .map_err(BenchError::io("create the upstream log"))?;
    let child = Command::new(repo.join("target/venv/bin/python"))
        .arg(repo.join("tests/clients/upstream/py_server.py"))
        .arg(port.to_string())
        .env("UPSTREAM_HEADER", "Authorization")
        .env("UPSTREAM_CREDENTIAL", format!("Bearer {DIRECT_TOKEN}"))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .map_err(BenchError::io("start the Python upstream (target/venv)"))?;
    let upstream = Upstream(child);
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            return Err(BenchError::protocol(
                "start the upstream",
                "it did not listen within 30 s",
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok((upstream, port))
}

pub async fn run(
    bins: &Binaries,
    scenario: &UpstreamScenario,
    logs: &Path,
    sink: &mut Sink,
) -> Result<()> {
    let (_upstream, port) = start_upstream(&scenario.repo, logs)?;
    let deployment = Deployment::start(
        bins,
        DeploySpec {
            endpoint: Endpoint::Gateway,
            store: Store::Sqlite,
            registry: Registry::Memory,
            log: None,
            env: Vec::new(),
        },
        logs,
    )
    .await?;
    let direct_url = format!("http://127.0.0.1:{port}/mcp");
    let reply = client::once(
        Method::PUT,
        &format!("{}/v1/tenants/bench/upstreams/bench", deployment.base),
        Headers::json()?.bearer(deployment.admin())?,
        Some(&json!({
            "url": direct_url,
            "header": "Authorization",
            "credential": format!("Bearer {DIRECT_TOKEN}"),
        })),
    )
    .await?;
    if !reply.status.is_success() {
        return Err(BenchError::protocol(
            "register the upstream",
            format!("HTTP {}: {}", reply.status, reply.text()),
        ));
    }
    let granted = deployment
        .grant("bench", "bench-upstream", &["upstream:bench:add"])
        .await?;
    let direct = Target::parse(&direct_url)?;
    let gateway = Target::parse(&granted.mcp_url)?;
    for &concurrency in &scenario.concurrency {
        let spec = |target: &Target, token: &str, tool| LoadSpec {
            target: target.clone(),
            token: token.to_owned(),
            era: Era::Stateless,
            tool,
            issue: None,
            concurrency,
            warmup: scenario.warmup,
            duration: scenario.duration,
        };
        let direct_result = load::run(&spec(&direct, DIRECT_TOKEN, Tool::DirectAdd)).await?;
        let gateway_result = load::run(&spec(&gateway, &granted.token, Tool::UpstreamAdd)).await?;
        for (path, result) in [("direct", &direct_result), ("gateway", &gateway_result)] {
            sink.emit(
                Record::new("upstream")
                    .label("path", path)
                    .with_load(result, concurrency),
            )?;
        }
        let added = |q: f64| gateway_result.quantile_ms(q) - direct_result.quantile_ms(q);
        sink.emit(
            Record::new("upstream_added")
                .value("concurrency", concurrency as f64)
                .value("added_p50_ms", added(0.5))
                .value("added_p99_ms", added(0.99))
                .value("direct_rps", direct_result.rps())
                .value("gateway_rps", gateway_result.rps()),
        )?;
    }
    Ok(())
}
