//! `claim_issue` under contention: per trial, a fresh issue and
//! `claimants` runs (each with its own grant and keep-alive connection)
//! that claim it at the same moment. Every call's latency is a sample;
//! every trial checks that exactly one run won and that every other run
//! was told the issue is claimed (a trial that breaks this counts as an
//! error, never as a figure).

use super::deploy::{DeploySpec, Deployment, Endpoint, Registry, Store};
use crate::client::{Connection, Target};
use crate::error::{BenchError, Result};
use crate::mcp::{self, Tool, Verdict};
use crate::procs::Binaries;
use crate::record::{Record, Sink};
use crate::setup;
use hyper::Method;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::Barrier;

pub async fn run(
    bins: &Binaries,
    store: Store,
    claimants: usize,
    trials: usize,
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
            env: Vec::new(),
        },
        logs,
    )
    .await?;
    let seeder = deployment
        .grant(
            "bench",
            "bench-claims-seed",
            &["issues:read", "issues:create"],
        )
        .await?;
    let mut runs = Vec::with_capacity(claimants);
    for i in 0..claimants {
        let granted = deployment
            .grant("bench", &format!("claimant-{i}"), &["issues:claim"])
            .await?;
        let target = Target::parse(&granted.mcp_url)?;
        let connection = Connection::open(&target).await?;
        runs.push((granted.token, target, connection));
    }
    let mut samples = Vec::with_capacity(claimants * trials);
    let mut broken_trials = 0u64;
    for _ in 0..trials {
        let issue = setup::seed_issue(&seeder.mcp_url, &seeder.token).await?;
        let arguments = Tool::ClaimIssue.arguments(Some(&issue))?;
        let barrier = Arc::new(Barrier::new(claimants));
        let mut tasks = Vec::with_capacity(claimants);
        for (token, target, mut connection) in runs.drain(..) {
            let call = mcp::stateless_call(&token, Tool::ClaimIssue, &arguments)?;
            let barrier = Arc::clone(&barrier);
            tasks.push(tokio::spawn(async move {
                barrier.wait().await;
                let started = Instant::now();
                let reply = connection
                    .send(Method::POST, &target.path, &call.headers, call.body)
                    .await;
                let elapsed = started.elapsed().as_secs_f64() * 1000.0;
                (token, target, connection, elapsed, reply)
            }));
        }
        let (mut winners, mut told_claimed) = (0usize, 0usize);
        for task in tasks {
            let (token, target, connection, elapsed, reply) = task
                .await
                .map_err(|e| BenchError::protocol("claimant", e.to_string()))?;
            let reply = reply?;
            samples.push(elapsed);
            match mcp::classify(&reply) {
                Verdict::Ok => winners += 1,
                Verdict::ToolError if reply.text().contains("is claimed by run claimant-") => {
                    told_claimed += 1
                }
                _ => {}
            }
            let connection = if connection.is_open() {
                connection
            } else {
                Connection::open(&target).await?
            };
            runs.push((token, target, connection));
        }
        if winners != 1 || told_claimed != claimants - 1 {
            broken_trials += 1;
        }
    }
    deployment.process.check_alive()?;
    let mut record = Record::new("claims")
        .label("store", store)
        .label("claimants", claimants)
        .with_samples(&samples)
        .value("trials", trials as f64);
    record.errors = broken_trials;
    record.note = Some(
        "one sample per claim_issue call; an error is a trial without exactly one winner \
         and every other claimant told who holds the issue"
            .into(),
    );
    sink.emit(record)?;
    Ok(())
}
