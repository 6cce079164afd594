//! The throughput scenario: `get_issue` / the default `list_issues` /
//! `create_issue` through one endpoint kind, store and registry, at each concurrency, in each era,
//! with the ceiling measured at the same concurrency right before.

use super::deploy::{DeploySpec, Deployment, Store};
use crate::client::Target;
use crate::error::{BenchError, Result};
use crate::load::{self, LoadSpec};
use crate::mcp::{Era, Titles, Tool};
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
    /// Give the load's grant a `create_issue` budget this large (never
    /// reached), to measure what counting a budgeted write costs.
    pub create_budget: Option<u32>,
    /// Give the load's tenant this many approval policies, none covering
    /// the load's calls: what the approval gate adds to a call that needs
    /// no approval.
    pub approval_policies: Option<u32>,
    /// The titles `create_issue` files its issues under (the suite's: one).
    pub titles: Titles,
}

pub async fn run(
    bins: &Binaries,
    scenario: &McpScenario,
    logs: &Path,
    sink: &mut Sink,
) -> Result<()> {
    let mut ceiling = bins.ceiling(logs).await?;
    let deployment = Deployment::start(bins, scenario.deploy.clone(), logs).await?;
    let budgets = match scenario.create_budget {
        Some(limit) => serde_json::json!({ "create_issue": limit }),
        None => serde_json::json!({}),
    };
    let granted = deployment
        .grant_with(
            "bench",
            "bench-load",
            &["issues:read", "issues:create"],
            &budgets,
        )
        .await?;
    if let Some(count) = scenario.approval_policies {
        setup::idle_approval_policies(&deployment.base, deployment.admin(), "bench", count).await?;
    }
    let issue = setup::seed_board(&granted.mcp_url, &granted.token, &scenario.tools).await?;
    let target = Target::parse(&granted.mcp_url)?;
    let ceiling_target = Target::parse(&format!("{}/mcp", ceiling.url))?;
    // A page of issues is tens of kilobytes: a second ceiling answers as
    // many bytes, so the figure also says what sending and reading them
    // leaves to any server.
    let mut list_ceiling = if scenario.tools.contains(&Tool::ListIssues) {
        let bytes = setup::answer_bytes(&granted.mcp_url, &granted.token, Tool::ListIssues).await?;
        let process = bins.ceiling_answering(logs, Some(bytes)).await?;
        let target = Target::parse(&format!("{}/mcp", process.url))?;
        Some((bytes, process, target))
    } else {
        None
    };
    let spec = &scenario.deploy;
    if spec.store == Store::Sqlite {
        // Every acknowledged write waits for an fsync: the disk's own
        // latency bounds what create_issue can do, so it is on record.
        sink.emit(
            disk_probe(&deployment.data_dir())?
                .label("endpoint", spec.endpoint)
                .label("store", spec.store)
                .label("registry", spec.registry),
        )?;
    }
    // A ceiling's load: any well-formed call, its answer is fixed.
    let ceiling_load = |target: &Target, concurrency: usize| LoadSpec {
        target: target.clone(),
        token: "cbr_ceiling".into(),
        era: Era::Stateless,
        tool: Tool::GetIssue,
        issue: Some(issue.clone()),
        concurrency,
        warmup: scenario.warmup,
        duration: scenario.duration,
        titles: Titles::One,
    };
    for &concurrency in &scenario.concurrency {
        // The ceiling right before the target, at the same concurrency:
        // the machine is shared, and only figures taken close together
        // compare.
        let ceiling_result = load::run(&ceiling_load(&ceiling_target, concurrency)).await?;
        ceiling.check_alive()?;
        let ceiling_rps = ceiling_result.rps();
        sink.emit(Record::new("ceiling").with_load(&ceiling_result, concurrency))?;
        for &tool in &scenario.tools {
            let titles = scenario.titles.for_tool(tool);
            let sized = match (&mut list_ceiling, tool) {
                (Some((bytes, process, sized_target)), Tool::ListIssues) => {
                    let result = load::run(&ceiling_load(sized_target, concurrency)).await?;
                    process.check_alive()?;
                    sink.emit(
                        Record::new("ceiling_sized")
                            .label("tool", tool)
                            .value("answer_bytes", *bytes as f64)
                            .with_load(&result, concurrency),
                    )?;
                    Some(result.rps())
                }
                _ => None,
            };
            for &era in &scenario.eras {
                // Creates grow the board point by point, and what a create
                // costs depends on the board's size (FINDINGS.md): each
                // create point says what it started from.
                let board = if tool == Tool::CreateIssue {
                    Some(setup::open_issues(&granted.mcp_url, &granted.token).await?)
                } else {
                    None
                };
                let result = load::run(&LoadSpec {
                    target: target.clone(),
                    token: granted.token.clone(),
                    era,
                    tool,
                    issue: Some(issue.clone()),
                    concurrency,
                    warmup: scenario.warmup,
                    duration: scenario.duration,
                    titles,
                })
                .await?;
                let mut record = Record::new("mcp")
                    .label("endpoint", spec.endpoint)
                    .label("store", spec.store)
                    .label("registry", spec.registry)
                    .label("tool", tool)
                    .label("era", era)
                    .label(
                        "budget",
                        scenario
                            .create_budget
                            .map_or_else(|| "none".to_owned(), |n| format!("create_issue={n}")),
                    )
                    .label(
                        "approval_policies",
                        scenario.approval_policies.unwrap_or(0).to_string(),
                    )
                    .with_load(&result, concurrency)
                    .with_ceiling(ceiling_rps);
                record = titles.label(record);
                if let Ok(rss) = deployment.process.rss_kib() {
                    record = record.value("server_rss_kib", rss as f64);
                }
                if let Some((open, at_least)) = board {
                    let name = if at_least {
                        "board_open_issues_at_least"
                    } else {
                        "board_open_issues"
                    };
                    record = record.value(name, open as f64);
                }
                if let Some(sized_rps) = sized.filter(|rps| *rps > 0.0) {
                    // Against the ceiling answering as many bytes.
                    record = record.value("ratio_sized", result.rps() / sized_rps);
                }
                sink.emit(record)?;
            }
        }
    }
    Ok(())
}

/// Samples of one 4 KiB write + `fsync` in `dir` (what a SQLite commit
/// with `synchronous=FULL` waits for at least once).
const FSYNC_SAMPLES: usize = 200;

pub fn disk_probe(dir: &Path) -> Result<Record> {
    use std::io::Write;
    let path = dir.join("bench-fsync-probe");
    let mut file = std::fs::File::create(&path)
        .map_err(BenchError::io(format!("create {}", path.display())))?;
    let block = [0u8; 4096];
    let mut samples = Vec::with_capacity(FSYNC_SAMPLES);
    for _ in 0..FSYNC_SAMPLES {
        file.write_all(&block)
            .map_err(BenchError::io("write probe"))?;
        let started = std::time::Instant::now();
        file.sync_all().map_err(BenchError::io("fsync probe"))?;
        samples.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    drop(file);
    let _ = std::fs::remove_file(&path);
    let mut record = Record::new("disk").with_samples(&samples);
    record.note = Some(
        "each sample is one 4 KiB write + fsync in the scenario's data dir, the floor under every durable SQLite commit"
            .into(),
    );
    Ok(record)
}
