//! The throughput scenario: `get_issue` / `create_issue` through one
//! endpoint kind, store and registry, at each concurrency, in each era,
//! with the ceiling measured at the same concurrency right before.

use super::deploy::{DeploySpec, Deployment};
use crate::client::Target;
use crate::error::Result;
use crate::load::{self, LoadSpec};
use crate::mcp::{Era, Tool};
use crate::procs::Binaries;
use crate::record::{Record, Sink};
use crate::setup;
use std::path::Path;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct McpScenario {
    pub deploy: DeploySpec,
    pub tools: Vec<Tool>,
    pub eras: Vec<Era>,
    pub concurrency: Vec<usize>,
    pub warmup: Duration,
    pub duration: Duration,
}

pub async fn run(
    bins: &Binaries,
    scenario: &McpScenario,
    logs: &Path,
    sink: &mut Sink,
) -> Result<()> {
    let mut ceiling = bins.ceiling(logs).await?;
    let deployment = Deployment::start(bins, scenario.deploy.clone(), logs).await?;
    let granted = deployment
        .grant("bench", "bench-load", &["issues:read", "issues:create"])
        .await?;
    let issue = setup::seed_issue(&granted.mcp_url, &granted.token).await?;
    let target = Target::parse(&granted.mcp_url)?;
    let ceiling_target = Target::parse(&format!("{}/mcp", ceiling.url))?;
    let spec = &scenario.deploy;
    for &concurrency in &scenario.concurrency {
        // The ceiling right before the target, at the same concurrency:
        // the machine is shared, and only figures taken close together
        // compare.
        let ceiling_result = load::run(&LoadSpec {
            target: ceiling_target.clone(),
            token: "cbr_ceiling".into(),
            era: Era::Stateless,
            tool: Tool::GetIssue,
            issue: Some(issue.clone()),
            concurrency,
            warmup: scenario.warmup,
            duration: scenario.duration,
        })
        .await?;
        ceiling.check_alive()?;
        let ceiling_rps = ceiling_result.rps();
        sink.emit(Record::new("ceiling").with_load(&ceiling_result, concurrency))?;
        for &tool in &scenario.tools {
            for &era in &scenario.eras {
                let result = load::run(&LoadSpec {
                    target: target.clone(),
                    token: granted.token.clone(),
                    era,
                    tool,
                    issue: Some(issue.clone()),
                    concurrency,
                    warmup: scenario.warmup,
                    duration: scenario.duration,
                })
                .await?;
                let mut record = Record::new("mcp")
                    .label("endpoint", spec.endpoint)
                    .label("store", spec.store)
                    .label("registry", spec.registry)
                    .label("tool", tool)
                    .label("era", era)
                    .with_load(&result, concurrency)
                    .with_ceiling(ceiling_rps);
                if let Ok(rss) = deployment.process.rss_kib() {
                    record = record.value("server_rss_kib", rss as f64);
                }
                sink.emit(record)?;
            }
        }
    }
    Ok(())
}
