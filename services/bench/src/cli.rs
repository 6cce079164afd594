//! The `corkboard-bench` command line.

use crate::client::Target;
use crate::error::{BenchError, Result};
use crate::load::{self, LoadSpec};
use crate::mcp::{Era, Titles, Tool};
use crate::procs::Binaries;
use crate::record::{Record, Sink};
use crate::scenario::deploy::{DeploySpec, Endpoint, Registry, Store};
use crate::scenario::{self, mcp::McpScenario};
use clap::{Args, Parser, Subcommand};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Parser)]
#[command(
    name = "corkboard-bench",
    version,
    about = "Corkboard's benchmark suite: MCP load, the ceiling, and scenarios (loopback only)."
)]
pub struct Cli {
    #[command(flatten)]
    pub common: Common,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Args)]
pub struct Common {
    /// Append one JSON line per figure to this file.
    #[arg(long, global = true)]
    pub out: Option<PathBuf>,
    /// Print JSON lines on stdout instead of the human table.
    #[arg(long, global = true)]
    pub json: bool,
    /// The `corkboard` binary [default: next to this program].
    #[arg(long, global = true)]
    pub corkboard: Option<PathBuf>,
    /// Directory for the started processes' logs [default: a temporary one].
    #[arg(long, global = true)]
    pub logs: Option<PathBuf>,
    /// Runtime threads of the generator (1: one core, leaving the other to
    /// the server).
    #[arg(long, global = true, default_value_t = 1)]
    pub threads: usize,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the ceiling: a fixed small JSON-RPC result on POST /mcp.
    Ceiling {
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: SocketAddr,
        /// actix-web workers [default: actix-web's, as corkboard].
        #[arg(long)]
        workers: Option<usize>,
        /// Pad the answer to at least this many bytes (the size of a
        /// target's answer, e.g. a list page) [default: the small answer].
        #[arg(long)]
        answer_bytes: Option<usize>,
    },
    /// Load one MCP endpoint (loopback only) and report req/s and latency.
    Load {
        #[arg(long)]
        url: String,
        /// Run token (prefer the environment variable: command lines end
        /// up in reports and process lists).
        #[arg(long, env = "CORKBOARD_BENCH_TOKEN", hide_env_values = true)]
        token: String,
        #[arg(long, default_value = "stateless")]
        era: Era,
        #[arg(long, default_value = "get_issue")]
        tool: Tool,
        /// Issue `get_issue` reads [default: one created first].
        #[arg(long)]
        issue_id: Option<String>,
        #[arg(long, default_value_t = 16)]
        concurrency: usize,
        #[arg(long, default_value = "10s", value_parser = parse_duration)]
        duration: Duration,
        #[arg(long, default_value = "1s", value_parser = parse_duration)]
        warmup: Duration,
    },
    /// get_issue / the default list_issues (a board of 50) / create_issue
    /// through one endpoint, store and registry, at each concurrency, each
    /// against the ceiling (`--tools no_tool`: the endpoint's floor, a
    /// request it answers without a tool).
    Mcp {
        #[arg(long, default_value = "studio")]
        endpoint: Endpoint,
        #[arg(long, default_value = "sqlite")]
        store: Store,
        #[arg(long, default_value = "memory")]
        registry: Registry,
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "get_issue,list_issues,create_issue"
        )]
        tools: Vec<Tool>,
        #[arg(long, value_delimiter = ',', default_value = "stateless")]
        eras: Vec<Era>,
        #[arg(long, value_delimiter = ',', default_value = "1,16,64,256")]
        concurrency: Vec<usize>,
        #[arg(long, default_value = "5s", value_parser = parse_duration)]
        duration: Duration,
        #[arg(long, default_value = "1s", value_parser = parse_duration)]
        warmup: Duration,
        /// CORKBOARD_LOG for the server [default: its own, info].
        #[arg(long)]
        server_log: Option<String>,
        /// Give the load's grant a create_issue budget of N (large enough
        /// never to run out): the cost of counting a budgeted write.
        #[arg(long)]
        create_budget: Option<u32>,
        /// Give the load's tenant N approval policies covering none of its
        /// calls: what the approval gate adds to a call needing none.
        #[arg(long)]
        approval_policies: Option<u32>,
        /// The titles of the create_issue load: `one` throughout (the
        /// suite's main points: every open issue shares every word, so the
        /// similar look-up finds its candidates among the first it reads)
        /// or `distinct` (65,536 titles of four words from a vocabulary of
        /// 120, in turn: the look-up reads hundreds of candidates).
        #[arg(long, default_value = "one")]
        titles: Titles,
    },
    /// Decision to result: from a person's approval to the agent's
    /// outcome, for a held 2025 call and through collect_approval.
    Approvals {
        #[arg(long, default_value_t = 200)]
        trials: usize,
    },
    /// Revocation propagation between two servers sharing Redis.
    Revocation {
        #[arg(long, default_value_t = 1000)]
        trials: usize,
    },
    /// `claim_issue` with many runs claiming one issue at once.
    Claims {
        #[arg(long, default_value = "sqlite")]
        store: Store,
        #[arg(long, default_value_t = 64)]
        claimants: usize,
        #[arg(long, default_value_t = 50)]
        trials: usize,
    },
    /// The board as a work queue: the ready list and `board_stats` on a
    /// board with blockers, then `claim_next` by many runs draining it
    /// (none with `--claimants 0`).
    Queue {
        #[arg(long, default_value = "sqlite")]
        store: Store,
        #[arg(long, default_value_t = 10_000)]
        issues: usize,
        #[arg(long, default_value_t = 64)]
        claimants: usize,
        /// Samples of each whole-board read.
        #[arg(long, default_value_t = 50)]
        reads: usize,
    },
    /// Run register → first answered request, on a runner.
    RegisterLatency {
        #[arg(long, default_value = "gateway")]
        mode: Endpoint,
        #[arg(long, default_value = "memory")]
        registry: Registry,
        #[arg(long, default_value_t = 200)]
        trials: usize,
    },
    /// Memory per idle run with many runs alive in one runner process.
    IdleRuns {
        #[arg(long, default_value = "gateway")]
        mode: Endpoint,
        #[arg(long, default_value_t = 10_000)]
        runs: usize,
        /// Registrations in flight at once.
        #[arg(long, default_value_t = 16)]
        parallel: usize,
    },
    /// Bytes and estimated tokens of the default list_issues and get_issue
    /// answers on the 60-issue board of the budget issue, today and as the
    /// whole-issue answers were before the result budget.
    AnswerSize,
    /// Server RSS while sessions send max-length batches of get_issue on
    /// an issue with the most comments it may hold.
    BatchAttack {
        #[arg(long, default_value_t = 8)]
        attackers: usize,
        #[arg(long, default_value = "10s", value_parser = parse_duration)]
        duration: Duration,
    },
    /// Server RSS and connection hold times under slowloris and slow-body
    /// connections.
    SlowAttack {
        #[arg(long, default_value_t = 1000)]
        connections: usize,
    },
    /// The noisy neighbour: tenant B's get_issue and list_issues p50/p99
    /// alone, then while tenant A, within its limits, runs each attack of
    /// issue #28 (one `corkboard serve`, SQLite, default limits).
    NoisyNeighbour {
        /// Issues on tenant A's board (what its searches go through).
        #[arg(long, default_value_t = 10_000)]
        a_issues: usize,
        /// Issues on tenant B's board.
        #[arg(long, default_value_t = 300)]
        b_issues: usize,
        /// B's calls per tool and phase (40 calls/s in all; a phase stops
        /// after 60 s whatever the count).
        #[arg(long, default_value_t = 400)]
        calls: usize,
        /// Slots of the slow-connection attack (above the default
        /// max_connections, 1,024, so it is reached).
        #[arg(long, default_value_t = 1_100)]
        slow_connections: usize,
        /// The attacks to run, in this order [default: all].
        #[arg(long, value_delimiter = ',')]
        attacks: Vec<scenario::noisy::Attack>,
    },
    /// Time until every replica refuses a token revoked while Redis was
    /// frozen, from Redis's return.
    RevocationOutage {
        #[arg(long, default_value_t = 20)]
        trials: usize,
    },
    /// Added latency of an upstream tool call through a run's gateway vs
    /// calling the (Python SDK) upstream directly, at each concurrency.
    Upstream {
        #[arg(long, value_delimiter = ',', default_value = "1,64")]
        concurrency: Vec<usize>,
        #[arg(long, default_value = "5s", value_parser = parse_duration)]
        duration: Duration,
        #[arg(long, default_value = "1s", value_parser = parse_duration)]
        warmup: Duration,
        /// The checkout holding target/venv and tests/clients/upstream [default: this source tree].
        #[arg(long)]
        repo: Option<PathBuf>,
    },
    /// Cold start to ready and idle RSS of `corkboard serve`.
    ColdStart {
        #[arg(long, default_value_t = 10)]
        trials: usize,
    },
    /// Search latency by query kind at growing board sizes, one tenant,
    /// seeded and queried through the store directly (not over MCP).
    Search {
        #[arg(long, default_value = "sqlite")]
        store: Store,
        /// Board sizes, measured on one board growing through them.
        #[arg(long, value_delimiter = ',', default_value = "10000,100000")]
        issues: Vec<usize>,
        /// Queries per kind and size.
        #[arg(long, default_value_t = 100)]
        queries: usize,
    },
    /// Cost curves: get_issue, list_issues (default and filtered) and
    /// search_issues p50/p99, RSS and store size as one tenant's board grows.
    Curves {
        #[arg(long, default_value = "sqlite")]
        store: Store,
        /// Board sizes, measured on one board growing through them.
        #[arg(long, value_delimiter = ',', default_value = "1000,100000")]
        issues: Vec<usize>,
        /// Calls per operation and size.
        #[arg(long, default_value_t = 200)]
        calls: usize,
        /// Seed through the store's bench-only bulk path (the same rows or
        /// documents as its create path, many per transaction on SQLite,
        /// many per `insert_many` on MongoDB).
        #[arg(long)]
        bulk: bool,
        /// Time bound per operation and size: stop after `--calls` calls or
        /// once this many seconds have passed, whichever comes first (but
        /// never before 5 calls); each record says how many calls it made.
        #[arg(long, default_value_t = 20.0)]
        max_seconds_per_op: f64,
        /// Time bound on seeding, all sizes together: once it passes, the
        /// board is measured at the size reached (recorded as stopped) and
        /// no larger size is tried.
        #[arg(long, default_value_t = 1800.0)]
        max_seed_seconds: f64,
    },
    /// MongoDB's default list_issues as one board grows: the store's call,
    /// the same find through the bare driver (full documents, `_id` only)
    /// and its explain (keys and documents examined, the server's time).
    ListPlan {
        /// Board sizes, measured on one board growing through them.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "1000,10000,100000,200000"
        )]
        issues: Vec<usize>,
        /// Calls per side and size.
        #[arg(long, default_value_t = 20)]
        calls: usize,
    },
    /// The tenants curve: create and list latency, a new tenant's first
    /// write, start-up, memory and storage as the number of tenants on one
    /// MongoDB database grows (one collection per tenant).
    Tenants {
        /// Tenant counts, measured on one database growing through them.
        #[arg(long, value_delimiter = ',', default_value = "1,100,10000")]
        tenants: Vec<usize>,
        /// Calls per operation and size.
        #[arg(long, default_value_t = 100)]
        calls: usize,
        /// Time bound per operation and size (never fewer than 5 calls).
        #[arg(long, default_value_t = 20.0)]
        max_seconds_per_op: f64,
        /// Brand-new tenants whose first write is timed at each size.
        #[arg(long, default_value_t = 20)]
        new_tenants: usize,
        /// Time bound on creating the tenants of all sizes together; when
        /// it passes, the tenants reached are measured and recorded as
        /// stopped, and no larger count is tried.
        #[arg(long, default_value_t = 900.0)]
        max_create_seconds: f64,
    },
    /// PNG plots of the cost curves in a results file (p50 and p99 per
    /// operation against board size, one line per store).
    Plot {
        #[arg(long, default_value = "target/bench/results.jsonl")]
        input: PathBuf,
        /// Directory the PNGs are written to.
        #[arg(long, default_value = "docs/curves")]
        output: PathBuf,
        /// A TrueType font for the labels (read at run time: no system font
        /// library needed).
        #[arg(
            long,
            default_value = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
        )]
        font: PathBuf,
    },
    /// Memory per 1,000 live legacy (2025) sessions on one run's gateway.
    LegacySessions {
        /// gateway (the run's dedicated port) or shared (the runner's
        /// shared port).
        #[arg(long, default_value = "gateway")]
        mode: Endpoint,
        /// Session counts, reached one after the other on one run.
        #[arg(long, value_delimiter = ',', default_value = "1000,10000")]
        sessions: Vec<usize>,
        /// Sessions being opened at once.
        #[arg(long, default_value_t = 16)]
        parallel: usize,
    },
    /// The MongoDB store vs the bare mongodb driver doing the same
    /// operations against the same server: p50/p99 and the store's share.
    DriverOverhead {
        /// Calls per operation, side and concurrency.
        #[arg(long, default_value_t = 2000)]
        calls: usize,
        #[arg(long, value_delimiter = ',', default_value = "1,16")]
        concurrency: Vec<usize>,
        /// Issues seeded before the reads.
        #[arg(long, default_value_t = 1000)]
        issues: usize,
    },
    /// The server's CPU µs and context switches per request (gateway,
    /// Redis registry) and, with perf, where its CPU goes.
    Profile {
        #[arg(long, value_delimiter = ',', default_value = "get_issue,create_issue")]
        tools: Vec<Tool>,
        #[arg(long, default_value_t = 64)]
        concurrency: usize,
        #[arg(long, default_value = "3s", value_parser = parse_duration)]
        duration: Duration,
        #[arg(long, default_value = "0.5s", value_parser = parse_duration)]
        warmup: Duration,
        /// perf record's sampling frequency (Hz).
        #[arg(long, default_value_t = 999)]
        frequency: u32,
        /// The titles of the create_issue load, as `mcp --titles`: `one`
        /// throughout, or `distinct` (where the similar look-up reads
        /// hundreds of candidates per create).
        #[arg(long, default_value = "one")]
        titles: Titles,
    },
    /// Render collected JSON lines as markdown (docs/numbers.md).
    Report {
        #[arg(long)]
        input: PathBuf,
        #[arg(long)]
        output: PathBuf,
        /// Free text placed under the header (how the machine was loaded).
        #[arg(long)]
        note: Option<String>,
        /// The exact suite command, shown in the header.
        #[arg(long, default_value = "scripts/bench")]
        suite_command: String,
        /// Markdown appended as the findings section (analysis of the
        /// figures: what stands between the code and each target).
        #[arg(long)]
        findings: Option<PathBuf>,
    },
}

/// `10s`, `500ms`, `2m`, or plain seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        Some(i) => text.split_at(i),
        None => (text, "s"),
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("bad duration {text:?} (e.g. 10s, 500ms, 2m)"))?;
    let secs = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        _ => return Err(format!("bad duration unit in {text:?} (ms, s or m)")),
    };
    if !secs.is_finite() || secs < 0.0 {
        return Err(format!("bad duration {text:?}"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Runs the parsed command line.
pub fn run(cli: Cli) -> Result<()> {
    if let Command::Ceiling {
        listen,
        workers,
        answer_bytes,
    } = cli.command
    {
        // Its own actix system; no tokio runtime of ours around it.
        return crate::ceiling::serve(listen, workers, answer_bytes);
    }
    if let Command::Report {
        input,
        output,
        note,
        suite_command,
        findings,
    } = &cli.command
    {
        let findings = match findings {
            Some(path) => Some(
                std::fs::read_to_string(path)
                    .map_err(BenchError::io(format!("read {}", path.display())))?,
            ),
            None => None,
        };
        return crate::report::write(
            input,
            output,
            note.as_deref(),
            suite_command,
            findings.as_deref(),
        );
    }
    if let Command::Plot {
        input,
        output,
        font,
    } = &cli.command
    {
        for path in crate::plot::write(input, output, font)? {
            eprintln!("wrote {}", path.display());
        }
        return Ok(());
    }
    let runtime = if cli.common.threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(cli.common.threads)
            .enable_all()
            .build()
    }
    .map_err(BenchError::io("start the runtime"))?;
    let mut sink = Sink::new(cli.common.out.as_deref(), cli.common.json)?;
    let outcome = runtime.block_on(dispatch(&cli, &mut sink));
    if let Err(err) = &outcome {
        // The suite's report names what could not be measured, and why.
        let mut failed = Record::new("failed");
        failed.note = Some(err.to_string());
        let _ = sink.emit(failed);
    }
    outcome
}

async fn dispatch(cli: &Cli, sink: &mut Sink) -> Result<()> {
    let logs_tmp;
    let logs = match &cli.common.logs {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .map_err(BenchError::io(format!("create {}", dir.display())))?;
            dir.clone()
        }
        None => {
            logs_tmp = tempfile::Builder::new()
                .prefix("corkboard-bench-logs-")
                .tempdir()
                .map_err(BenchError::io("create a log directory"))?;
            logs_tmp.path().to_owned()
        }
    };
    let bins = || Binaries::locate(cli.common.corkboard.clone());
    match &cli.command {
        Command::Ceiling { .. } | Command::Report { .. } | Command::Plot { .. } => Ok(()),
        Command::Load {
            url,
            token,
            era,
            tool,
            issue_id,
            concurrency,
            duration,
            warmup,
        } => {
            let issue = match (tool, issue_id) {
                (Tool::GetIssue, None) => Some(crate::setup::seed_issue(url, token).await?),
                (_, id) => id.clone(),
            };
            let result = load::run(&LoadSpec {
                target: Target::parse(url)?,
                token: token.clone(),
                era: *era,
                tool: *tool,
                issue,
                concurrency: *concurrency,
                warmup: *warmup,
                duration: *duration,
                titles: Titles::One,
            })
            .await?;
            sink.emit(
                Record::new("load")
                    .label("endpoint", Target::parse(url)?.url())
                    .label("tool", tool)
                    .label("era", era)
                    .with_load(&result, *concurrency),
            )
        }
        Command::Mcp {
            endpoint,
            store,
            registry,
            tools,
            eras,
            concurrency,
            duration,
            warmup,
            server_log,
            create_budget,
            approval_policies,
            titles,
        } => {
            let scenario = McpScenario {
                deploy: DeploySpec {
                    endpoint: *endpoint,
                    store: *store,
                    registry: *registry,
                    log: server_log.clone(),
                    env: Vec::new(),
                },
                tools: tools.clone(),
                eras: eras.clone(),
                concurrency: concurrency.clone(),
                warmup: *warmup,
                duration: *duration,
                create_budget: *create_budget,
                approval_policies: *approval_policies,
                titles: *titles,
            };
            scenario::mcp::run(&bins()?, &scenario, &logs, sink).await
        }
        Command::Approvals { trials } => {
            scenario::approvals::run(&bins()?, *trials, &logs, sink).await
        }
        Command::Revocation { trials } => {
            scenario::revocation::run(&bins()?, *trials, &logs, sink).await
        }
        Command::Claims {
            store,
            claimants,
            trials,
        } => {
            if *claimants < 2 {
                return Err(BenchError::Usage(
                    "--claimants must be at least 2 (one winner, the others refused)".into(),
                ));
            }
            scenario::claims::run(&bins()?, *store, *claimants, *trials, &logs, sink).await
        }
        Command::Queue {
            store,
            issues,
            claimants,
            reads,
        } => {
            if *issues == 0 {
                return Err(BenchError::Usage("--issues must be at least 1".into()));
            }
            scenario::queue::run(&bins()?, *store, *issues, *claimants, *reads, &logs, sink).await
        }
        Command::RegisterLatency {
            mode,
            registry,
            trials,
        } => {
            scenario::runs::register_latency(&bins()?, *mode, *registry, *trials, &logs, sink).await
        }
        Command::IdleRuns {
            mode,
            runs,
            parallel,
        } => scenario::runs::idle_runs(&bins()?, *mode, *runs, *parallel, &logs, sink).await,
        Command::Curves {
            store,
            issues,
            calls,
            bulk,
            max_seconds_per_op,
            max_seed_seconds,
        } => {
            if issues.is_empty() || issues.contains(&0) || *calls == 0 {
                return Err(BenchError::Usage(
                    "--issues needs sizes above 0 and --calls at least 1".into(),
                ));
            }
            for (flag, seconds) in [
                ("--max-seconds-per-op", max_seconds_per_op),
                ("--max-seed-seconds", max_seed_seconds),
            ] {
                if !seconds.is_finite() || *seconds <= 0.0 {
                    return Err(BenchError::Usage(format!(
                        "{flag} must be a positive number of seconds"
                    )));
                }
            }
            scenario::curves::run(
                &scenario::curves::CurvesSpec {
                    store: *store,
                    sizes: issues.clone(),
                    calls: *calls,
                    bulk: *bulk,
                    max_per_op: Duration::from_secs_f64(*max_seconds_per_op),
                    max_seed: Duration::from_secs_f64(*max_seed_seconds),
                },
                sink,
            )
            .await
        }
        Command::ListPlan { issues, calls } => {
            if issues.is_empty() || issues.contains(&0) || *calls == 0 {
                return Err(BenchError::Usage(
                    "--issues needs sizes above 0 and --calls at least 1".into(),
                ));
            }
            scenario::list_plan::run(
                &scenario::list_plan::ListPlanSpec {
                    sizes: issues.clone(),
                    calls: *calls,
                },
                sink,
            )
            .await
        }
        Command::Tenants {
            tenants,
            calls,
            max_seconds_per_op,
            new_tenants,
            max_create_seconds,
        } => {
            if tenants.is_empty() || tenants.contains(&0) || *calls == 0 {
                return Err(BenchError::Usage(
                    "--tenants needs counts above 0 and --calls at least 1".into(),
                ));
            }
            for (flag, seconds) in [
                ("--max-seconds-per-op", max_seconds_per_op),
                ("--max-create-seconds", max_create_seconds),
            ] {
                if !seconds.is_finite() || *seconds <= 0.0 {
                    return Err(BenchError::Usage(format!(
                        "{flag} must be a positive number of seconds"
                    )));
                }
            }
            // `corkboard server`'s time to ready is measured when the
            // binary is built; without it the record says so.
            let bins = bins().ok();
            scenario::tenants::run(
                bins.as_ref(),
                &scenario::tenants::TenantsSpec {
                    counts: tenants.clone(),
                    calls: *calls,
                    max_per_op: Duration::from_secs_f64(*max_seconds_per_op),
                    new_tenants: *new_tenants,
                    max_create: Duration::from_secs_f64(*max_create_seconds),
                },
                &logs,
                sink,
            )
            .await
        }
        Command::Search {
            store,
            issues,
            queries,
        } => {
            scenario::search::run(
                &scenario::search::SearchSpec {
                    store: *store,
                    sizes: issues.clone(),
                    queries: *queries,
                },
                sink,
            )
            .await
        }
        Command::Upstream {
            concurrency,
            duration,
            warmup,
            repo,
        } => {
            let scenario = crate::scenario::upstream::UpstreamScenario {
                concurrency: concurrency.clone(),
                warmup: *warmup,
                duration: *duration,
                repo: repo.clone().unwrap_or_else(|| {
                    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
                }),
            };
            scenario::upstream::run(&bins()?, &scenario, &logs, sink).await
        }
        Command::ColdStart { trials } => {
            scenario::cold_start::run(&bins()?, *trials, &logs, sink).await
        }
        Command::AnswerSize => scenario::answer_size::run(&bins()?, &logs, sink).await,
        Command::BatchAttack {
            attackers,
            duration,
        } => scenario::hardening::batch_attack(&bins()?, *attackers, *duration, &logs, sink).await,
        Command::SlowAttack { connections } => {
            scenario::hardening::slow_attack(&bins()?, *connections, &logs, sink).await
        }
        Command::LegacySessions {
            mode,
            sessions,
            parallel,
        } => {
            if sessions.is_empty() || sessions.contains(&0) {
                return Err(BenchError::Usage("--sessions needs counts above 0".into()));
            }
            let spec = scenario::sessions::SessionsSpec {
                mode: *mode,
                counts: sessions.clone(),
                parallel: *parallel,
            };
            scenario::sessions::run(&bins()?, &spec, &logs, sink).await
        }
        Command::DriverOverhead {
            calls,
            concurrency,
            issues,
        } => {
            let spec = scenario::driver::DriverSpec {
                calls: *calls,
                concurrency: concurrency.clone(),
                issues: *issues,
            };
            scenario::driver::run(&spec, sink).await
        }
        Command::Profile {
            tools,
            concurrency,
            duration,
            warmup,
            frequency,
            titles,
        } => {
            let spec = scenario::profile::ProfileSpec {
                tools: tools.clone(),
                concurrency: *concurrency,
                warmup: *warmup,
                duration: *duration,
                frequency: *frequency,
                titles: *titles,
            };
            scenario::profile::run(&bins()?, &spec, &logs, sink).await
        }
        Command::NoisyNeighbour {
            a_issues,
            b_issues,
            calls,
            slow_connections,
            attacks,
        } => {
            if *a_issues == 0 || *b_issues == 0 || *calls == 0 {
                return Err(BenchError::Usage(
                    "--a-issues, --b-issues and --calls must be at least 1".into(),
                ));
            }
            let spec = scenario::noisy::NoisySpec {
                a_issues: *a_issues,
                b_issues: *b_issues,
                calls: *calls,
                slow_connections: *slow_connections,
                attacks: if attacks.is_empty() {
                    scenario::noisy::Attack::ALL.to_vec()
                } else {
                    attacks.clone()
                },
            };
            scenario::noisy::run(&bins()?, &spec, &logs, sink).await
        }
        Command::RevocationOutage { trials } => {
            scenario::hardening::revocation_after_outage(&bins()?, *trials, &logs, sink).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert!(parse_duration("ten").is_err());
        assert!(parse_duration("5h").is_err());
    }
}
