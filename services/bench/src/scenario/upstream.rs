//! What a run's gateway adds to an upstream tool call: the same `add` of
//! the Python SDK upstream (`tests/clients/upstream/py_server.py`,
//! 2026-07-28 stateless), called directly and through a run's gateway
//! (`bench__add`, the credential injected by the gateway), at each
//! concurrency, back to back so the two figures compare. The added
//! latency is the gateway's p50 (and p99) minus the direct one.
//!
//! CPU per call: each leg runs after a warm-up leg of its own, and the
//! CPU time (`utime + stime` from `/proc/<pid>/stat`) the upstream process
//! and the gateway's process spent during the measured leg is divided by
//! the calls it made. The load generator's own CPU is not counted. The
//! added CPU per call is the gateway leg's (gateway plus upstream) minus
//! the direct leg's (upstream).

use super::deploy::{DeploySpec, Deployment, Endpoint, Registry, Store};
use crate::client::{self, Headers, Target};
use crate::error::{BenchError, Result};
use crate::load::{self, LoadSpec};
use crate::mcp::{Era, Titles, Tool};
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
            // The bench upstream listens on loopback, which the egress
            // policy refuses unless the operator opens it.
            env: vec![("CORKBOARD_EGRESS_ALLOW".to_owned(), "127.0.0.1".to_owned())],
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
            "trust_first_listing": true,
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
    let pids = Pids {
        upstream: _upstream.0.id(),
        gateway: deployment
            .process
            .pid()
            .ok_or_else(|| BenchError::protocol("measure CPU", "the gateway process has no pid"))?,
    };
    let tick = clock_tick();
    for &concurrency in &scenario.concurrency {
        let spec = |target: &Target, token: &str, tool, warmup: bool| LoadSpec {
            target: target.clone(),
            token: token.to_owned(),
            era: Era::Stateless,
            tool,
            issue: None,
            concurrency,
            warmup: Duration::ZERO,
            duration: if warmup {
                scenario.warmup
            } else {
                scenario.duration
            },
            titles: Titles::One,
        };
        // A leg: its own warm-up, then the measured calls with the CPU
        // both processes spent on them.
        let leg = |target: &Target, token: &str, tool: Tool| {
            let (warm, measured) = (
                spec(target, token, tool, true),
                spec(target, token, tool, false),
            );
            async move {
                load::run(&warm).await?;
                let before = pids.cpu()?;
                let result = load::run(&measured).await?;
                let after = pids.cpu()?;
                Ok::<_, BenchError>((result, after.since(before)))
            }
        };
        let (direct_result, direct_cpu) = leg(&direct, DIRECT_TOKEN, Tool::DirectAdd).await?;
        let (gateway_result, gateway_cpu) =
            leg(&gateway, &granted.token, Tool::UpstreamAdd).await?;
        let per_call = |ticks: u64, result: &load::LoadResult| {
            // Microseconds of CPU per call.
            ticks as f64 * 1e6 / tick / result.requests.max(1) as f64
        };
        for (path, result, cpu) in [
            ("direct", &direct_result, direct_cpu),
            ("gateway", &gateway_result, gateway_cpu),
        ] {
            sink.emit(
                Record::new("upstream")
                    .label("path", path)
                    .with_load(result, concurrency)
                    .value("upstream_cpu_us_per_call", per_call(cpu.upstream, result))
                    .value("gateway_cpu_us_per_call", per_call(cpu.gateway, result)),
            )?;
        }
        let added = |q: f64| gateway_result.quantile_ms(q) - direct_result.quantile_ms(q);
        let total = |cpu: Cpu, result| per_call(cpu.upstream + cpu.gateway, result);
        sink.emit(
            Record::new("upstream_added")
                .value("concurrency", concurrency as f64)
                .value("added_p50_ms", added(0.5))
                .value("added_p99_ms", added(0.99))
                .value("direct_rps", direct_result.rps())
                .value("gateway_rps", gateway_result.rps())
                .value(
                    "added_cpu_us_per_call",
                    total(gateway_cpu, &gateway_result) - total(direct_cpu, &direct_result),
                ),
        )?;
    }
    Ok(())
}

/// The processes whose CPU a leg is charged with.
#[derive(Clone, Copy)]
struct Pids {
    upstream: u32,
    gateway: u32,
}

/// CPU time in clock ticks, per process.
#[derive(Clone, Copy)]
struct Cpu {
    upstream: u64,
    gateway: u64,
}

impl Pids {
    fn cpu(&self) -> Result<Cpu> {
        Ok(Cpu {
            upstream: cpu_ticks(self.upstream)?,
            gateway: cpu_ticks(self.gateway)?,
        })
    }
}

impl Cpu {
    fn since(self, before: Cpu) -> Cpu {
        Cpu {
            upstream: self.upstream.saturating_sub(before.upstream),
            gateway: self.gateway.saturating_sub(before.gateway),
        }
    }
}

/// `utime + stime` of `pid` (fields 14 and 15 of `/proc/<pid>/stat`,
/// counted after the parenthesised command name, which may hold spaces).
fn cpu_ticks(pid: u32) -> Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(BenchError::io(format!("read /proc/{pid}/stat")))?;
    let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // After the name: state is field 3, so utime (14) is index 11.
    let field = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
    match (field(11), field(12)) {
        (Some(utime), Some(stime)) => Ok(utime + stime),
        _ => Err(BenchError::protocol(
            "measure CPU",
            format!("/proc/{pid}/stat has no utime/stime"),
        )),
    }
}

/// Clock ticks per second (`getconf CLK_TCK`; 100 on Linux when that
/// cannot be asked).
fn clock_tick() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| text.trim().parse::<f64>().ok())
        .filter(|&t| t > 0.0)
        .unwrap_or(100.0)
}
