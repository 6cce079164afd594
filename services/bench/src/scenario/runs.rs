//! Run lifecycle figures on a runner: register → first answered request
//! latency, and memory per idle run with many runs alive in one process.

use super::deploy::{DeploySpec, Deployment, Endpoint, Registry, Store};
use crate::client::{self, Connection, Headers, Target};
use crate::error::{BenchError, Result};
use crate::mcp;
use crate::procs::Binaries;
use crate::record::{Record, Sink, quantile};
use crate::setup::{self, Granted};
use hyper::Method;
use std::path::Path;
use std::time::{Duration, Instant};

const CAPS: &[&str] = &["issues:read", "issues:create"];
/// Idle runs registered per tenant: the gateway's default
/// `live_runs_per_tenant_max` (a tenant's 101st live run is refused), so
/// 10,000 runs are 100 tenants' worth, as on a shared runner.
const RUNS_PER_TENANT: usize = 100;
/// How long the runner sits idle before its RSS is read.
const SETTLE: Duration = Duration::from_secs(2);

/// Sends one stateless `tools/list` on a fresh connection; Ok when 200.
async fn first_request(granted: &Granted) -> Result<()> {
    let target = Target::parse(&granted.mcp_url)?;
    let call = mcp::stateless_request(&granted.token, "tools/list")?;
    let mut connection = Connection::open(&target).await?;
    let reply = tokio::time::timeout(
        client::SETUP_TIMEOUT,
        connection.send(Method::POST, &target.path, &call.headers, call.body),
    )
    .await
    .map_err(|_| BenchError::Http(format!("{}: no answer", granted.mcp_url)))??;
    if reply.status.as_u16() != 200 {
        return Err(BenchError::protocol(
            "first request",
            format!("HTTP {}: {}", reply.status, reply.text()),
        ));
    }
    Ok(())
}

/// Ends a run (`DELETE /v1/runs/{tenant}/{run}`); best effort.
async fn end_run(base: &str, admin: &str, tenant: &str, run: &str) {
    let _ = client::once(
        Method::DELETE,
        &format!("{base}/v1/runs/{tenant}/{run}"),
        Headers::new().bearer(admin).unwrap_or_default(),
        None,
    )
    .await;
}

fn deploy_spec(mode: Endpoint, registry: Registry) -> DeploySpec {
    DeploySpec {
        endpoint: mode,
        store: Store::Sqlite,
        registry,
        log: None,
        env: Vec::new(),
    }
}

pub async fn register_latency(
    bins: &Binaries,
    mode: Endpoint,
    registry: Registry,
    trials: usize,
    logs: &Path,
    sink: &mut Sink,
) -> Result<()> {
    let deployment = Deployment::start(bins, deploy_spec(mode, registry), logs).await?;
    let admin = deployment.admin().to_owned();
    // One run first, so one-time work (tool lists, pools) is not billed
    // to the first trial.
    let warm = setup::register_run(&deployment.base, &admin, "bench", "reg-warm", CAPS).await?;
    first_request(&warm).await?;
    let mut total = Vec::with_capacity(trials);
    let mut register = Vec::with_capacity(trials);
    for trial in 0..trials {
        let run = format!("reg-{trial}");
        let started = Instant::now();
        let granted = setup::register_run(&deployment.base, &admin, "bench", &run, CAPS).await?;
        register.push(started.elapsed().as_secs_f64() * 1000.0);
        first_request(&granted).await?;
        total.push(started.elapsed().as_secs_f64() * 1000.0);
        end_run(&deployment.base, &admin, "bench", &run).await;
    }
    register.sort_by(f64::total_cmp);
    let mut record = Record::new("register")
        .label("mode", mode)
        .label("registry", registry)
        .with_samples(&total)
        .value("register_call_p50_ms", quantile(&register, 0.5))
        .value("register_call_p99_ms", quantile(&register, 0.99));
    record.note = Some("POST /v1/runs sent → first tools/list answered on a new connection".into());
    sink.emit(record)?;
    Ok(())
}

pub async fn idle_runs(
    bins: &Binaries,
    mode: Endpoint,
    runs: usize,
    parallel: usize,
    logs: &Path,
    sink: &mut Sink,
) -> Result<()> {
    let deployment = Deployment::start(bins, deploy_spec(mode, Registry::Memory), logs).await?;
    let admin = deployment.admin().to_owned();
    let base = deployment.base.clone();
    let warm = setup::register_run(&base, &admin, "bench", "idle-warm", CAPS).await?;
    first_request(&warm).await?;
    tokio::time::sleep(SETTLE).await;
    let before = deployment.process.rss_kib()?;

    let started = Instant::now();
    let parallel = parallel.max(1);
    let mut granted: Vec<Granted> = Vec::with_capacity(runs);
    let mut failures = 0u64;
    let mut next = 0usize;
    while next < runs {
        let batch: Vec<_> = (next..runs.min(next + parallel))
            .map(|i| {
                let (base, admin) = (base.clone(), admin.clone());
                tokio::spawn(async move {
                    // Spread over tenants: one tenant may hold at most
                    // `live_runs_per_tenant_max` live runs (100 by default).
                    let tenant = format!("bench-{}", i / RUNS_PER_TENANT);
                    setup::register_run(&base, &admin, &tenant, &format!("idle-{i}"), CAPS).await
                })
            })
            .collect();
        next += batch.len();
        for task in batch {
            match task.await {
                Ok(Ok(g)) => granted.push(g),
                _ => failures += 1,
            }
        }
    }
    let register_secs = started.elapsed().as_secs_f64();
    tokio::time::sleep(SETTLE).await;
    let after = deployment.process.rss_kib()?;

    // Every registered run must still be alive and answering, or the
    // memory figure would flatter dead runs: probe a spread of them.
    let step = (granted.len() / 100).max(1);
    let mut probe_failures = 0u64;
    for g in granted.iter().step_by(step) {
        if first_request(g).await.is_err() {
            probe_failures += 1;
        }
    }
    let live = granted.len();
    let per_run_bytes = if live > 0 {
        (after.saturating_sub(before) as f64 * 1024.0) / live as f64
    } else {
        0.0
    };
    let mut record = Record::new("idle_runs")
        .label("mode", mode)
        .value("runs", live as f64)
        .value("rss_before_kib", before as f64)
        .value("rss_after_kib", after as f64)
        .value("per_run_kib", per_run_bytes / 1024.0)
        // Issue #18 asks per 1,000 idle runs: the same delta, scaled.
        .value("per_1000_runs_mib", per_run_bytes * 1000.0 / 1_048_576.0)
        .value(
            "registrations_per_s",
            live as f64 / register_secs.max(f64::EPSILON),
        );
    record.count = Some(live as u64);
    record.errors = failures + probe_failures;
    if failures + probe_failures > 0 {
        record
            .error_kinds
            .insert("register_failed".into(), failures);
        record
            .error_kinds
            .insert("probe_failed".into(), probe_failures);
    }
    record.note = Some(format!(
        "{live} runs alive in one process, {RUNS_PER_TENANT} per tenant; RSS delta / runs; {} probed",
        live.div_ceil(step)
    ));
    sink.emit(record)?;
    Ok(())
}
