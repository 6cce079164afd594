//! The noisy neighbour (issue #28): tenant B's `get_issue` and
//! `list_issues` latency on one `corkboard serve` (SQLite store, the
//! binary's own default limits), alone and then while tenant A, within its
//! own limits, runs each attack the issue reproduced, one at a time:
//!
//! - search storm: one run of A sends costly `search_issues` calls (the
//!   prefix of its commonest words, `ba*`, on its 10,000-issue board, 50
//!   hits) eight at a time, paced below the default rate limit;
//! - held calls: 2026-07-28 agents of A call a 2025 upstream that asks
//!   them something mid-call (`sampling/createMessage`) and never answers
//!   the call: each call is held by the gateway, until its table is full;
//! - slow webhook endpoint: A's webhook receiver accepts and never
//!   answers, while A's writes queue a delivery each;
//! - slow connections from one address: slowloris heads from 127.0.0.1 to
//!   the main listener, each slot reconnecting when the server ends it
//!   (the `slow-attack` scenario's connections);
//! - oversized upstream answer: A's upstreams answer every request with
//!   300 MB (JSON bodies and event streams), while A's agent lists its
//!   tools; the server's peak RSS is recorded (every phase's, in fact).
//!
//! B's calls are real MCP calls (2026-07-28 stateless) to the studio
//! endpoint on the main listener: one at a time, alternating the two
//! tools, paced within the default rate limit, each on a fresh connection
//! from 127.0.0.2 (so "from one address" means A's, not B's). p50/p99 are
//! of the calls answered; a failed call is counted by kind and fails the
//! goal. Two probes show what B's reads cannot: B's own held upstream call
//! (admitted or refused) and B's own webhook delivery delay, each alone
//! and under the attack that targets it.
//!
//! The attacker and the servers it needs (upstreams, receivers) run on a
//! thread and runtime of their own ([`Side`]), so B's timings never wait
//! on the attacker's tasks; stopping an attack drops that runtime, which
//! closes every socket it held. Each attack is set up, given a moment to
//! bite, B measured, the attack stopped; one that cannot be set up is
//! recorded as not measured with its reason and the next one runs. Every
//! wait is bounded.

use super::deploy::{DeploySpec, Deployment, Endpoint, Registry, Store};
use super::hardening::{self, RssSampler};
use super::search::{self, BulkPath, Rng};
use crate::client::{self, Connection, Headers, Reply, Target};
use crate::error::{BenchError, Result};
use crate::mcp::{self, PreparedCall, Tool};
use crate::procs::{self, Binaries};
use crate::record::{Record, Sink, quantile};
use crate::setup::{self, Granted};
use hyper::Method;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::str::FromStr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const TENANT_A: &str = "noisy-a";
const TENANT_B: &str = "quiet-b";
/// Where B's calls come from (A's come from 127.0.0.1).
const B_SOURCE: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
/// One call of B every 25 ms: 40 calls/s, within the default rate limit
/// (50/s per run, burst 100).
const B_EVERY: Duration = Duration::from_millis(25);
/// Longest one of B's calls may take before it counts as failed.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest B is measured in one phase, whatever `--calls` asks.
const PHASE_MAX: Duration = Duration::from_secs(60);
/// Quiet time after an attack is stopped, before the next phase.
const SETTLE: Duration = Duration::from_secs(2);
/// Longest a probe (B's held call, B's webhook delivery) is waited for.
const PROBE_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest one of A's calls may take before the attacker gives up on it.
const ATTACK_CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// How long stopping a [`Side`] may take.
const SIDE_STOP: Duration = Duration::from_secs(5);

/// The search storm: eight at a time, 40 calls/s in all (below 50/s), of
/// the query kind on the search scenario's corpus that held B back the
/// most when tried (`ba*`, every word of the commonest syllable; a common
/// word, two common words or several prefixes ANDed held it back far
/// less).
const STORM_QUERY: &str = "common prefix";
const STORM_WORKERS: usize = 8;
const STORM_EVERY: Duration = Duration::from_millis(200);
/// Runs of A holding calls, each one call per 25 ms (40/s, below 50/s).
const HELD_RUNS: usize = 4;
const HELD_EVERY: Duration = Duration::from_millis(25);
/// Calls A makes before B is measured: more than the held-call table holds
/// (1,024 per process before issue #28).
const HELD_FILL: u64 = 1_100;
const HELD_FILL_MAX: Duration = Duration::from_secs(40);
/// A's writers during the webhook attack: 4 × 10/s.
const WRITERS: usize = 4;
const WRITE_EVERY: Duration = Duration::from_millis(100);
/// A's listers during the oversized-answer attack: 4 × 10/s.
const LISTERS: usize = 4;
const LIST_EVERY: Duration = Duration::from_millis(100);
/// Answers A's listers have had before B is measured (or
/// [`ATTACK_CALL_TIMEOUT`] passed): on a loaded machine one listing (four
/// upstreams read up to their bound) can take seconds, and B measured
/// before any answer would not be measured under the attack.
const LIST_ANSWERS: u64 = 2 * LISTERS as u64;
/// What each oversized answer would be: what took a runner from 20 MB to
/// 621 MB before answers were bounded.
const HUGE_BYTES: usize = 300 * 1024 * 1024;
/// A slow-connection slot whose connection the server ended sooner than
/// this waits this long before the next (no connect storm).
const SLOT_PAUSE: Duration = Duration::from_secs(1);
/// A's searches timed alone, before the storm (for scale).
const SEARCHES_ALONE: usize = 20;

/// Phase names of B alone (the reference), and alone again at the end
/// (how far the machine drifted meanwhile).
pub const ALONE: &str = "none (alone)";
pub const ALONE_AGAIN: &str = "none (alone again, after the attacks)";

/// The attacks, in the order they run (the webhook one last: its backlog
/// outlives it the longest).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attack {
    SearchStorm,
    SlowConnections,
    OversizedAnswer,
    HeldCalls,
    SlowWebhook,
}

impl Attack {
    pub const ALL: [Self; 5] = [
        Self::SearchStorm,
        Self::SlowConnections,
        Self::OversizedAnswer,
        Self::HeldCalls,
        Self::SlowWebhook,
    ];

    pub fn flag(self) -> &'static str {
        match self {
            Self::SearchStorm => "search-storm",
            Self::SlowConnections => "slow-connections",
            Self::OversizedAnswer => "oversized-answer",
            Self::HeldCalls => "held-calls",
            Self::SlowWebhook => "slow-webhook",
        }
    }

    /// The phase's name in records and the report.
    pub fn title(self) -> &'static str {
        match self {
            Self::SearchStorm => "search storm",
            Self::SlowConnections => "slow connections from one address",
            Self::OversizedAnswer => "oversized upstream answer",
            Self::HeldCalls => "held calls",
            Self::SlowWebhook => "slow webhook endpoint",
        }
    }
}

impl fmt::Display for Attack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.flag())
    }
}

impl FromStr for Attack {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|a| a.flag() == s)
            .ok_or_else(|| {
                let all: Vec<&str> = Self::ALL.iter().map(|a| a.flag()).collect();
                format!("unknown attack {s:?} (one of: {})", all.join(", "))
            })
    }
}

/// What to measure.
#[derive(Debug, Clone)]
pub struct NoisySpec {
    /// Issues on A's board (what its searches go through).
    pub a_issues: usize,
    /// Issues on B's board.
    pub b_issues: usize,
    /// B's calls per tool and phase.
    pub calls: usize,
    /// Slots of the slow-connection attack.
    pub slow_connections: usize,
    pub attacks: Vec<Attack>,
}

pub async fn run(bins: &Binaries, spec: &NoisySpec, logs: &Path, sink: &mut Sink) -> Result<()> {
    let deployment = Deployment::start_with_default_limits(
        bins,
        DeploySpec {
            // `serve` with dedicated run gateways (A's upstream attacks);
            // B reads through the studio endpoint on the main listener.
            endpoint: Endpoint::Gateway,
            store: Store::Sqlite,
            registry: Registry::Memory,
            log: Some(hardening::attack_log()),
            // A's upstreams and both tenants' webhook receivers listen on
            // loopback, which the egress policy refuses unless opened.
            env: vec![
                ("CORKBOARD_EGRESS_ALLOW".into(), "127.0.0.1".into()),
                ("CORKBOARD_WEBHOOK_ALLOWED_HOSTS".into(), "127.0.0.1".into()),
            ],
        },
        logs,
    )
    .await?;
    let pid = deployment
        .process
        .pid()
        .ok_or_else(|| BenchError::process("corkboard serve", "no pid"))?;
    let b_ids = seed(&deployment, spec).await?;
    let servers = Side::start("noisy-servers")?;
    let quiet = Quiet::set_up(&deployment, &servers, b_ids).await?;
    let ctx = Ctx {
        deployment: &deployment,
        spec,
        quiet: &quiet,
        pid,
    };

    ctx.phase(ALONE, None, sink).await?;
    for &attack in &spec.attacks {
        ctx.phase(attack.title(), Some(attack), sink).await?;
    }
    ctx.phase(ALONE_AGAIN, None, sink).await?;
    drop(servers);
    Ok(())
}

/// Seeds both boards through the store's bulk path into the server's own
/// SQLite file (safe beside the running server: one file, several
/// processes); B's issue ids.
async fn seed(deployment: &Deployment, spec: &NoisySpec) -> Result<Vec<String>> {
    let store = corkboard_store_sqlite::SqliteStore::open_in_dir(&deployment.data_dir())
        .map_err(|e| BenchError::process("the server's SQLite board", e.to_string()))?;
    let tenant = |name: &str| {
        corkboard_board::TenantId::parse(name).map_err(|e| BenchError::Usage(e.to_string()))
    };
    search::bulk_seed(
        BulkPath::Sqlite(&store),
        &tenant(TENANT_A)?,
        0,
        spec.a_issues,
    )
    .await?;
    let b = search::bulk_seed(
        BulkPath::Sqlite(&store),
        &tenant(TENANT_B)?,
        0,
        spec.b_issues,
    )
    .await?;
    Ok(b.iter().map(|id| id.as_str().to_owned()).collect())
}

/// Tenant B: its reads, and its two probes (each optional: a probe that
/// cannot be set up says why in the notes, the reads go on).
struct Quiet {
    target: Target,
    token: String,
    ids: Vec<String>,
    /// [`B_SOURCE`] when it can be bound here.
    source: Option<IpAddr>,
    webhook: std::result::Result<WebhookProbe, String>,
    held: std::result::Result<Granted, String>,
}

struct WebhookProbe {
    writer: Granted,
    received: Arc<Received>,
}

impl Quiet {
    async fn set_up(deployment: &Deployment, servers: &Side, ids: Vec<String>) -> Result<Self> {
        if ids.is_empty() {
            return Err(BenchError::Usage("--b-issues must be at least 1".into()));
        }
        let (base, admin) = (&deployment.base, deployment.admin());
        let reader =
            setup::create_grant(base, admin, TENANT_B, "quiet-reader", &["issues:read"]).await?;
        let target = Target::parse(&reader.mcp_url)?;
        let source = match Connection::open_from(&target, B_SOURCE).await {
            Ok(_) => Some(B_SOURCE),
            Err(e) => {
                eprintln!("noisy-neighbour: B calls from 127.0.0.1 ({e})");
                None
            }
        };
        let webhook = async {
            let received = Arc::new(Received::default());
            let listener = loopback_listener()?;
            let port = local_port(&listener)?;
            servers.spawn(serve_receiver(listener, received.clone()));
            create_webhook(deployment, TENANT_B, port).await?;
            let writer =
                setup::create_grant(base, admin, TENANT_B, "quiet-writer", &["issues:create"])
                    .await?;
            Ok::<_, BenchError>(WebhookProbe { writer, received })
        }
        .await
        .map_err(|e| e.to_string());
        let held = async {
            let listener = loopback_listener()?;
            let port = local_port(&listener)?;
            servers.spawn(serve_asker(listener));
            put_upstream(deployment, TENANT_B, "slow", port).await?;
            setup::register_run(base, admin, TENANT_B, "quiet-agent", &["upstream:slow:*"]).await
        }
        .await
        .map_err(|e| e.to_string());
        Ok(Self {
            target,
            token: reader.token,
            ids,
            source,
            webhook,
            held,
        })
    }

    /// B's reads for one phase: `calls` of each tool, alternating, one
    /// every [`B_EVERY`], within [`PHASE_MAX`].
    async fn measure(&self, calls: usize) -> Result<[Calls; 2]> {
        let mut get = Calls::default();
        let mut list = Calls::default();
        let list_call = mcp::stateless_named_call(&self.token, "list_issues", &json!({}))?;
        let mut rng = Rng(0x5eed_b0a7);
        let started = Instant::now();
        for i in 0..calls * 2 {
            if started.elapsed() > PHASE_MAX {
                break;
            }
            let next = Instant::now() + B_EVERY;
            if i % 2 == 0 {
                let id = &self.ids[rng.below(self.ids.len())];
                let call = mcp::stateless_call(
                    &self.token,
                    Tool::GetIssue,
                    &Tool::GetIssue.arguments(Some(id))?,
                )?;
                get.add(timed_call(&self.target, self.source, &call).await);
            } else {
                list.add(timed_call(&self.target, self.source, &list_call).await);
            }
            tokio::time::sleep_until(next.into()).await;
        }
        Ok([get, list])
    }

    /// One write of B and how long its delivery took to reach B's
    /// receiver.
    async fn webhook_probe(&self) -> std::result::Result<Duration, String> {
        let probe = self
            .webhook
            .as_ref()
            .map_err(|e| format!("not set up: {e}"))?;
        let call = mcp::stateless_call(
            &probe.writer.token,
            Tool::CreateIssue,
            &Tool::CreateIssue
                .arguments(None)
                .map_err(|e| e.to_string())?,
        )
        .map_err(|e| e.to_string())?;
        let target = Target::parse(&probe.writer.mcp_url).map_err(|e| e.to_string())?;
        let reply = tokio::time::timeout(CALL_TIMEOUT, async {
            let mut connection = Connection::open(&target).await?;
            connection
                .send(Method::POST, &target.path, &call.headers, call.body)
                .await
        })
        .await
        .map_err(|_| "B's write was not answered in time".to_owned())?
        .map_err(|e| e.to_string())?;
        let written = Instant::now();
        let id = mcp::structured(&reply).map_err(|e| e.to_string())?["id"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| "create_issue answered without an id".to_owned())?;
        while written.elapsed() < PROBE_TIMEOUT {
            if let Some(at) = probe.received.first_containing(id.as_bytes()) {
                return Ok(at.saturating_duration_since(written));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Err(format!(
            "not delivered within {} s",
            PROBE_TIMEOUT.as_secs()
        ))
    }

    /// One call of B's own asking upstream: whether the gateway held it
    /// (the answer `input_required`) or refused it.
    async fn held_probe(&self) -> std::result::Result<String, String> {
        let run = self.held.as_ref().map_err(|e| format!("not set up: {e}"))?;
        let call = asking_call(&run.token).map_err(|e| e.to_string())?;
        let target = Target::parse(&run.mcp_url).map_err(|e| e.to_string())?;
        let reply = tokio::time::timeout(PROBE_TIMEOUT, async {
            let mut connection = Connection::open(&target).await?;
            connection
                .send(Method::POST, &target.path, &call.headers, call.body)
                .await
        })
        .await
        .map_err(|_| format!("no answer within {} s", PROBE_TIMEOUT.as_secs()))?
        .map_err(|e| e.to_string())?;
        Ok(held_outcome(&reply))
    }
}

/// B's calls of one tool in one phase.
#[derive(Default)]
struct Calls {
    /// Milliseconds of the calls answered.
    samples: Vec<f64>,
    errors: BTreeMap<String, u64>,
    asked: u64,
}

impl Calls {
    fn add(&mut self, outcome: (f64, std::result::Result<(), String>)) {
        self.asked += 1;
        match outcome.1 {
            Ok(()) => self.samples.push(outcome.0),
            Err(kind) => *self.errors.entry(kind).or_insert(0) += 1,
        }
    }

    fn record(&self, phase: &str, tool: &str) -> Record {
        let mut record = Record::new("noisy_neighbour")
            .label("mode", phase)
            .label("tool", tool)
            .value("calls", self.asked as f64);
        if self.samples.is_empty() {
            record.count = Some(0);
        } else {
            record = record.with_samples(&self.samples);
        }
        record.errors = self.errors.values().sum();
        record.error_kinds = self.errors.clone();
        record
    }
}

/// One call on a fresh connection (from `source`), timed from the connect
/// to the answer's last byte: milliseconds, and ok or the failure's kind.
async fn timed_call(
    target: &Target,
    source: Option<IpAddr>,
    call: &PreparedCall,
) -> (f64, std::result::Result<(), String>) {
    let started = Instant::now();
    let answer = tokio::time::timeout(CALL_TIMEOUT, async {
        let mut connection = match source {
            Some(ip) => Connection::open_from(target, ip).await?,
            None => Connection::open(target).await?,
        };
        connection
            .send(Method::POST, &target.path, &call.headers, call.body.clone())
            .await
    })
    .await;
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    let outcome = match answer {
        Err(_) => Err("timeout".to_owned()),
        Ok(Err(BenchError::Io { .. })) => Err("connect_failed".to_owned()),
        Ok(Err(_)) => Err("connection_error".to_owned()),
        Ok(Ok(reply)) => match mcp::classify(&reply) {
            mcp::Verdict::Ok => Ok(()),
            other => Err(other.label()),
        },
    };
    (ms, outcome)
}

/// What every phase needs.
struct Ctx<'a> {
    deployment: &'a Deployment,
    spec: &'a NoisySpec,
    quiet: &'a Quiet,
    pid: u32,
}

impl Ctx<'_> {
    /// One phase: the attack (if any) started and given time to bite, B
    /// measured, the attack stopped; its records emitted.
    async fn phase(&self, name: &str, attack: Option<Attack>, sink: &mut Sink) -> Result<()> {
        let rss_before = procs::rss_kib(self.pid)?;
        let hwm_before = procs::hwm_kib(self.pid)?;
        let started = match attack {
            None => None,
            Some(attack) => match self.start(attack).await {
                Ok(started) => Some(started),
                Err(e) => {
                    eprintln!("noisy-neighbour: {name} not measured: {e}");
                    let mut record = Record::new("noisy_attack")
                        .label("mode", name)
                        .label("outcome", "not measured");
                    record.note = Some(format!("not measured: {e}"));
                    return sink.emit(record);
                }
            },
        };
        let sampler = {
            // On the attacker's runtime when there is one: B's runtime runs
            // B's calls and nothing else.
            let _entered = started.as_ref().map(|s| s.side.handle.enter());
            RssSampler::start(self.pid)
        };
        if let Some(started) = &started {
            started.bite().await;
        }
        let load_1m = super::curves::load_average();
        let [get, list] = self.quiet.measure(self.spec.calls).await?;
        let mut notes = Vec::new();
        let mut record = Record::new("noisy_attack")
            .label("mode", name)
            .label("outcome", "measured")
            .value("load_1m", load_1m);
        if matches!(attack, None | Some(Attack::HeldCalls)) {
            let outcome = self.quiet.held_probe().await;
            record = record.value(
                "b_held_call_admitted",
                f64::from(u8::from(outcome.as_deref().is_ok_and(|o| o == HELD))),
            );
            notes.push(format!(
                "B's own held upstream call: {}",
                outcome.unwrap_or_else(|e| e)
            ));
        }
        if matches!(attack, None | Some(Attack::SlowWebhook)) {
            match self.quiet.webhook_probe().await {
                Ok(took) => {
                    record = record.value("b_webhook_delivery_ms", took.as_secs_f64() * 1000.0);
                    notes.push(format!(
                        "B's own webhook delivery: {:.0} ms after its write",
                        took.as_secs_f64() * 1000.0
                    ));
                }
                Err(e) => notes.push(format!("B's own webhook delivery: {e}")),
            }
        }
        let peak = sampler.finish().await;
        let hwm_after = procs::hwm_kib(self.pid).unwrap_or(0);
        record = record
            .value("rss_before_kib", rss_before as f64)
            .value("rss_peak_kib", peak as f64)
            .value("hwm_before_kib", hwm_before as f64)
            .value("hwm_after_kib", hwm_after as f64);
        if let Some(mut started) = started {
            let tally = started.tally.snapshot();
            started.side.stop();
            if let Some(cleanup) = started.cleanup.take()
                && let Err(e) = cleanup.run(self.deployment).await
            {
                notes.push(format!("clean-up failed: {e}"));
            }
            for (key, value) in &started.values {
                record = record.value(key, *value);
            }
            record = record.value("attacker_calls", tally.values().sum::<u64>() as f64);
            let counts: Vec<String> = tally.iter().map(|(k, v)| format!("{k} {v}")).collect();
            notes.insert(
                0,
                format!("{}; what A got: {}", started.what, counts.join(", ")),
            );
        } else {
            notes.insert(0, "B alone".to_owned());
        }
        record.note = Some(notes.join("; "));
        let b_note = b_note(self.quiet, self.spec);
        for (calls, tool) in [(&get, "get_issue"), (&list, "list_issues")] {
            let mut r = calls.record(name, tool).value("load_1m", load_1m);
            r.note = Some(b_note.clone());
            sink.emit(r)?;
        }
        sink.emit(record)?;
        if procs::rss_kib(self.pid).is_err() {
            return Err(BenchError::process(
                "corkboard serve",
                format!(
                    "gone during {name}; log:\n{}",
                    self.deployment.process.log_tail()
                ),
            ));
        }
        tokio::time::sleep(SETTLE).await;
        Ok(())
    }

    async fn start(&self, attack: Attack) -> Result<Started> {
        let side = Side::start("noisy-attacker")?;
        let tally = Arc::new(Tally::default());
        let mut started = Started {
            side,
            tally,
            what: String::new(),
            bite: Bite::For(Duration::from_secs(2)),
            cleanup: None,
            values: Vec::new(),
        };
        let set_up = match attack {
            Attack::SearchStorm => self.search_storm(&mut started).await,
            Attack::SlowConnections => self.slow_connections(&mut started),
            Attack::OversizedAnswer => self.oversized_answer(&mut started).await,
            Attack::HeldCalls => self.held_calls(&mut started).await,
            Attack::SlowWebhook => self.slow_webhook(&mut started).await,
        };
        if let Err(e) = set_up {
            // Undo what the half-made attack left (its runtime stops on drop).
            if let Some(cleanup) = started.cleanup.take() {
                let _ = cleanup.run(self.deployment).await;
            }
            return Err(e);
        }
        Ok(started)
    }

    async fn search_storm(&self, s: &mut Started) -> Result<()> {
        let (base, admin) = (&self.deployment.base, self.deployment.admin());
        let granted =
            setup::create_grant(base, admin, TENANT_A, "noisy-searcher", &["issues:read"]).await?;
        let target = Target::parse(&granted.mcp_url)?;
        let query = |rng: &mut Rng, token: &str| {
            mcp::stateless_named_call(
                token,
                "search_issues",
                &json!({ "query": search::query_text(STORM_QUERY, rng), "limit": 50 }),
            )
        };
        // One of A's searches at a time first, for scale.
        let mut rng = Rng(7);
        let mut alone = Vec::new();
        for _ in 0..SEARCHES_ALONE {
            let call = query(&mut rng, &granted.token)?;
            if let (ms, Ok(())) = timed_call(&target, None, &call).await {
                alone.push(ms);
            }
            tokio::time::sleep(STORM_EVERY / STORM_WORKERS as u32).await;
        }
        if alone.is_empty() {
            return Err(BenchError::protocol(
                "search storm",
                "none of A's searches alone was answered",
            ));
        }
        alone.sort_by(f64::total_cmp);
        s.values
            .push(("a_search_alone_p50_ms".into(), quantile(&alone, 0.5)));
        s.values
            .push(("a_search_alone_p99_ms".into(), quantile(&alone, 0.99)));
        for worker in 0..STORM_WORKERS {
            let mut rng = Rng(worker as u64 + 11);
            let token = granted.token.clone();
            s.side.spawn(paced(
                target.clone(),
                STORM_EVERY,
                s.tally.clone(),
                move || query(&mut rng, &token),
                default_outcome,
            ));
        }
        s.what = format!(
            "one run of A sends search_issues of a common word's 2-letter prefix (`{}`, limit 50) on its {}-issue board, \
             {STORM_WORKERS} at a time, each worker at most one call per {} ms ({} calls/s in all, \
             below the default 50/s); A's searches one at a time before the storm: p50 {:.1} ms",
            search::query_text(STORM_QUERY, &mut Rng(1)),
            self.spec.a_issues,
            STORM_EVERY.as_millis(),
            STORM_WORKERS as u128 * 1000 / STORM_EVERY.as_millis(),
            quantile(&alone, 0.5)
        );
        Ok(())
    }

    fn slow_connections(&self, s: &mut Started) -> Result<()> {
        let target = &self.quiet.target;
        let head = hardening::slowloris_head(&target.authority);
        for _ in 0..self.spec.slow_connections {
            s.side
                .spawn(slow_slot(target.addr, head.clone(), s.tally.clone()));
        }
        // Past the header timeout (5 s by default): the server has ended
        // the first wave and the slots are cycling, as they would.
        s.bite = Bite::For(Duration::from_secs(6));
        s.what = format!(
            "{} slowloris connections from 127.0.0.1 to the main listener, one header byte a second \
             (the slow-attack scenario's), each slot reconnecting when the server ends its connection \
             (after {} s when it ended it sooner); A's outcomes are how the server ended them",
            self.spec.slow_connections,
            SLOT_PAUSE.as_secs()
        );
        Ok(())
    }

    async fn oversized_answer(&self, s: &mut Started) -> Result<()> {
        let mut caps = Vec::new();
        for (i, sse) in [(1, false), (2, false), (3, true), (4, true)] {
            let listener = loopback_listener()?;
            let port = local_port(&listener)?;
            s.side.spawn(serve_huge(listener, sse));
            let name = format!("huge{i}");
            put_upstream(self.deployment, TENANT_A, &name, port).await?;
            caps.push(format!("upstream:{name}:*"));
        }
        let caps: Vec<&str> = caps.iter().map(String::as_str).collect();
        let run = setup::register_run(
            &self.deployment.base,
            self.deployment.admin(),
            TENANT_A,
            "noisy-lister",
            &caps,
        )
        .await?;
        let target = Target::parse(&run.mcp_url)?;
        for _ in 0..LISTERS {
            let token = run.token.clone();
            s.side.spawn(paced(
                target.clone(),
                LIST_EVERY,
                s.tally.clone(),
                move || mcp::stateless_request(&token, "tools/list"),
                list_outcome,
            ));
        }
        s.bite = Bite::Attempts {
            at_least: LIST_ANSWERS,
            within: ATTACK_CALL_TIMEOUT,
        };
        s.what = format!(
            "A's four upstreams answer every request with {} MB (two as a JSON body, two as one \
             endless event-stream event) while A's agent lists its tools, {LISTERS} at a time, each \
             at most one call per {} ms; B measured once A had {LIST_ANSWERS} answers \
             (or after {} s)",
            HUGE_BYTES / (1024 * 1024),
            LIST_EVERY.as_millis(),
            ATTACK_CALL_TIMEOUT.as_secs()
        );
        Ok(())
    }

    async fn held_calls(&self, s: &mut Started) -> Result<()> {
        let listener = loopback_listener()?;
        let port = local_port(&listener)?;
        s.side.spawn(serve_asker(listener));
        put_upstream(self.deployment, TENANT_A, "slow", port).await?;
        for i in 0..HELD_RUNS {
            let run = setup::register_run(
                &self.deployment.base,
                self.deployment.admin(),
                TENANT_A,
                &format!("noisy-held-{i}"),
                &["upstream:slow:*"],
            )
            .await?;
            let target = Target::parse(&run.mcp_url)?;
            let token = run.token.clone();
            s.side.spawn(paced(
                target,
                HELD_EVERY,
                s.tally.clone(),
                move || asking_call(&token),
                held_outcome,
            ));
        }
        s.bite = Bite::Attempts {
            at_least: HELD_FILL,
            within: HELD_FILL_MAX,
        };
        s.what = format!(
            "{HELD_RUNS} runs of A (2026-07-28 agents declaring sampling) call a 2025 upstream whose \
             tool asks the agent (sampling/createMessage) and never answers, each run at most one \
             call per {} ms, never retrying: every call admitted is held by the gateway; B measured \
             once A had made {HELD_FILL} calls (or after {} s)",
            HELD_EVERY.as_millis(),
            HELD_FILL_MAX.as_secs()
        );
        Ok(())
    }

    async fn slow_webhook(&self, s: &mut Started) -> Result<()> {
        let listener = loopback_listener()?;
        let port = local_port(&listener)?;
        s.side.spawn(serve_black_hole(listener));
        let webhook = create_webhook(self.deployment, TENANT_A, port).await?;
        // From here on the webhook must go, whatever fails next.
        s.cleanup = Some(Cleanup::Webhook(webhook));
        let writer = setup::create_grant(
            &self.deployment.base,
            self.deployment.admin(),
            TENANT_A,
            "noisy-writer",
            &["issues:create"],
        )
        .await?;
        let target = Target::parse(&writer.mcp_url)?;
        for _ in 0..WRITERS {
            let token = writer.token.clone();
            s.side.spawn(paced(
                target.clone(),
                WRITE_EVERY,
                s.tally.clone(),
                move || {
                    mcp::stateless_call(
                        &token,
                        Tool::CreateIssue,
                        &Tool::CreateIssue.arguments(None)?,
                    )
                },
                default_outcome,
            ));
        }
        s.bite = Bite::For(Duration::from_secs(5));
        s.what = format!(
            "A's webhook receiver accepts connections and never answers; A's writers create issues \
             (each queueing a delivery), {WRITERS} at a time, each at most one per {} ms",
            WRITE_EVERY.as_millis()
        );
        Ok(())
    }
}

/// The note on B's records: how B's figures were taken.
fn b_note(quiet: &Quiet, spec: &NoisySpec) -> String {
    format!(
        "tenant B: up to {} get_issue of a random one of its {} issues and {} list_issues (default \
         query), alternating, one call at a time, one every {} ms (within the default rate limit), \
         2026-07-28 stateless MCP calls to the studio endpoint on the main listener, each on a fresh \
         connection from {}, {} s timeout; p50/p99 in ms of the calls answered (send to last byte, \
         connect included); tenant A has {} issues; corkboard serve, SQLite store, the binary's \
         default limits; at most {} s per phase",
        spec.calls,
        spec.b_issues,
        spec.calls,
        B_EVERY.as_millis(),
        quiet
            .source
            .map_or_else(|| "127.0.0.1".to_owned(), |ip| ip.to_string()),
        CALL_TIMEOUT.as_secs(),
        spec.a_issues,
        PHASE_MAX.as_secs()
    )
}

/// A started attack: its runtime, what it got, how long it bites before B
/// is measured, and what must be undone after it.
struct Started {
    side: Side,
    tally: Arc<Tally>,
    what: String,
    bite: Bite,
    cleanup: Option<Cleanup>,
    /// Figures of the attack itself, for its record.
    values: Vec<(String, f64)>,
}

enum Bite {
    For(Duration),
    /// Until the attacker made this many calls, or the bound passed.
    Attempts {
        at_least: u64,
        within: Duration,
    },
}

impl Started {
    async fn bite(&self) {
        match self.bite {
            Bite::For(wait) => tokio::time::sleep(wait).await,
            Bite::Attempts { at_least, within } => {
                let started = Instant::now();
                while self.tally.total() < at_least && started.elapsed() < within {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }
}

enum Cleanup {
    /// A's webhook endpoint (deleting it drops its undelivered deliveries).
    Webhook(String),
}

impl Cleanup {
    async fn run(self, deployment: &Deployment) -> Result<()> {
        match self {
            Self::Webhook(id) => {
                let reply = client::once(
                    Method::DELETE,
                    &format!("{}/v1/tenants/{TENANT_A}/webhooks/{id}", deployment.base),
                    Headers::new().bearer(deployment.admin())?,
                    None,
                )
                .await?;
                if !reply.status.is_success() {
                    return Err(BenchError::protocol(
                        "delete A's webhook",
                        format!("HTTP {}: {}", reply.status, reply.text()),
                    ));
                }
                Ok(())
            }
        }
    }
}

/// Outcomes of the attacker's calls, by kind.
#[derive(Default)]
struct Tally(Mutex<BTreeMap<String, u64>>);

impl Tally {
    fn count(&self, outcome: String) {
        *self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(outcome)
            .or_insert(0) += 1;
    }

    fn snapshot(&self) -> BTreeMap<String, u64> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn total(&self) -> u64 {
        self.snapshot().values().sum()
    }
}

/// A thread with a runtime of its own for an attacker and the servers it
/// needs: B's timings never wait behind its tasks, and stopping it drops
/// every task, closing every socket they held.
struct Side {
    handle: tokio::runtime::Handle,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    done: std::sync::mpsc::Receiver<()>,
}

impl Side {
    fn start(name: &str) -> Result<Self> {
        let (handle_tx, handle_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(e) => {
                        let _ = handle_tx.send(Err(e));
                        return;
                    }
                };
                let _ = handle_tx.send(Ok(runtime.handle().clone()));
                runtime.block_on(async {
                    let _ = stop_rx.await;
                });
                runtime.shutdown_timeout(SIDE_STOP);
                let _ = done_tx.send(());
            })
            .map_err(BenchError::io(format!("start thread {name}")))?;
        let handle = handle_rx
            .recv_timeout(SIDE_STOP)
            .map_err(|_| BenchError::process(name, "its runtime did not start"))?
            .map_err(BenchError::io(format!("start the runtime of {name}")))?;
        Ok(Self {
            handle,
            stop: Some(stop_tx),
            done: done_rx,
        })
    }

    fn spawn<F>(&self, future: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        drop(self.handle.spawn(future));
    }

    /// Stops every task (bounded).
    fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
            let _ = self.done.recv_timeout(SIDE_STOP * 2);
        }
    }
}

impl Drop for Side {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Calls `next()`'s request on `target` on one keep-alive connection,
/// one at a time and at most one per `every`, until its runtime stops;
/// counts each answer's `outcome`.
async fn paced(
    target: Target,
    every: Duration,
    tally: Arc<Tally>,
    mut next: impl FnMut() -> Result<PreparedCall> + Send + 'static,
    outcome: fn(&Reply) -> String,
) {
    let mut slot: Option<Connection> = None;
    loop {
        let due = Instant::now() + every;
        let call = match next() {
            Ok(call) => call,
            Err(e) => {
                tally.count(format!("not sent: {e}"));
                return;
            }
        };
        let answer =
            tokio::time::timeout(ATTACK_CALL_TIMEOUT, send_on(&mut slot, &target, call)).await;
        let counted = match answer {
            Ok(Ok(reply)) => outcome(&reply),
            Ok(Err(_)) => {
                slot = None;
                "connection error".to_owned()
            }
            Err(_) => {
                slot = None;
                "timeout".to_owned()
            }
        };
        tally.count(counted);
        tokio::time::sleep_until(due.into()).await;
    }
}

async fn send_on(
    slot: &mut Option<Connection>,
    target: &Target,
    call: PreparedCall,
) -> Result<Reply> {
    let connection = match slot {
        Some(connection) if connection.is_open() => connection,
        _ => slot.insert(Connection::open(target).await?),
    };
    connection
        .send(Method::POST, &target.path, &call.headers, call.body)
        .await
}

fn default_outcome(reply: &Reply) -> String {
    mcp::classify(reply).label()
}

/// What a call of the asking tool got.
const HELD: &str = "held (input_required)";

fn held_outcome(reply: &Reply) -> String {
    let text = reply.text();
    if reply.status.as_u16() == 200 && text.contains("\"input_required\"") {
        return HELD.to_owned();
    }
    if text.contains("already holds") {
        return "refused: the held-call table is full".to_owned();
    }
    let label = mcp::classify(reply).label();
    // A refusal's own words, shortened (tool errors say why in text).
    let why: String = text.chars().take(160).collect();
    format!("{label}: {why}")
}

fn list_outcome(reply: &Reply) -> String {
    let text = reply.text();
    match (reply.status.as_u16(), text.contains("answer too large")) {
        (200, true) => "listed, upstreams refused as too large".to_owned(),
        (200, false) if text.contains("\"tools\"") => "listed".to_owned(),
        _ => mcp::classify(reply).label(),
    }
}

/// A call of A's (or B's) asking upstream tool, from an agent that
/// declares sampling, so the upstream's request may be relayed to it.
fn asking_call(token: &str) -> Result<PreparedCall> {
    mcp::stateless_call_declaring(token, "slow__ask", &json!({}), &json!({ "sampling": {} }))
}

/// One slot of the slow-connection attack: a slowloris connection, again
/// each time the server ends it.
async fn slow_slot(addr: SocketAddr, head: Vec<u8>, tally: Arc<Tally>) {
    loop {
        match hardening::slow_connection(addr, head.clone()).await {
            Ok(ended) => {
                tally.count(ended.status.map_or_else(
                    || "ended without an answer".to_owned(),
                    |status| format!("ended {status}"),
                ));
                if ended.held < SLOT_PAUSE {
                    tokio::time::sleep(SLOT_PAUSE).await;
                }
            }
            Err(_) => {
                tally.count("connect failed".to_owned());
                tokio::time::sleep(SLOT_PAUSE).await;
            }
        }
    }
}

/// `PUT /v1/tenants/{tenant}/upstreams/{name}` for a loopback upstream.
async fn put_upstream(deployment: &Deployment, tenant: &str, name: &str, port: u16) -> Result<()> {
    let reply = client::once(
        Method::PUT,
        &format!("{}/v1/tenants/{tenant}/upstreams/{name}", deployment.base),
        Headers::json()?.bearer(deployment.admin())?,
        Some(&json!({
            "url": format!("http://127.0.0.1:{port}/mcp"),
            "header": "X-Key",
            "credential": "noisy-neighbour",
            "trust_first_listing": true,
        })),
    )
    .await?;
    if !reply.status.is_success() {
        return Err(BenchError::protocol(
            format!("register upstream {name} of {tenant}"),
            format!("HTTP {}: {}", reply.status, reply.text()),
        ));
    }
    Ok(())
}

/// `POST /v1/tenants/{tenant}/webhooks` for a loopback receiver
/// (`issue.created`); the endpoint's id.
async fn create_webhook(deployment: &Deployment, tenant: &str, port: u16) -> Result<String> {
    let reply = client::once(
        Method::POST,
        &format!("{}/v1/tenants/{tenant}/webhooks", deployment.base),
        Headers::json()?.bearer(deployment.admin())?,
        Some(&json!({
            "url": format!("http://127.0.0.1:{port}/{tenant}"),
            "events": ["issue.created"],
        })),
    )
    .await?;
    if reply.status.as_u16() != 201 {
        return Err(BenchError::protocol(
            format!("create the webhook of {tenant}"),
            format!("HTTP {}: {}", reply.status, reply.text()),
        ));
    }
    reply.json()?["id"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| BenchError::protocol("create webhook", "the answer has no id"))
}

fn loopback_listener() -> Result<std::net::TcpListener> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(BenchError::io("bind a loopback listener"))?;
    listener
        .set_nonblocking(true)
        .map_err(BenchError::io("make a listener non-blocking"))?;
    Ok(listener)
}

fn local_port(listener: &std::net::TcpListener) -> Result<u16> {
    Ok(listener
        .local_addr()
        .map_err(BenchError::io("a listener's address"))?
        .port())
}

/// Accepts on `listener` (a std one, bound by the caller so its port is
/// known at once) and runs `serve` on each connection.
async fn accept_each<F, Fut>(listener: std::net::TcpListener, serve: F)
where
    F: Fn(TcpStream) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let Ok(listener) = TcpListener::from_std(listener) else {
        return;
    };
    loop {
        match listener.accept().await {
            Ok((stream, _)) => drop(tokio::spawn(serve(stream))),
            // Out of descriptors, most likely: try again shortly.
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

/// Most bytes of a request head or body the stand-in servers read.
const REQUEST_MAX: usize = 1024 * 1024;

/// One HTTP/1.1 request: its head and its body.
async fn read_request(stream: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        if buffer.len() > REQUEST_MAX {
            return None;
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let length = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0)
        .min(REQUEST_MAX);
    let mut body = buffer[head_end..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(length);
    Some((head, body))
}

async fn respond(stream: &mut TcpStream, status: &str, extra: &str, body: &[u8]) {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(body).await;
}

/// A 2025 MCP upstream (a session, `tools/list`, `tools/call`) whose one
/// tool, `ask`, sends the agent a `sampling/createMessage` on the call's
/// event stream and then never answers the call: the stream stays open
/// until the gateway lets go of it.
async fn serve_asker(listener: std::net::TcpListener) {
    accept_each(listener, |mut stream| async move {
        let Some((head, body)) = read_request(&mut stream).await else {
            return;
        };
        if head.starts_with("DELETE ") {
            return respond(&mut stream, "200 OK", "", b"").await;
        }
        if !head.starts_with("POST ") {
            return respond(&mut stream, "405 Method Not Allowed", "", b"").await;
        }
        let message: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let (Some(method), Some(id)) = (message["method"].as_str(), message.get("id")) else {
            // Notifications and the answers to our requests.
            return respond(&mut stream, "202 Accepted", "", b"").await;
        };
        let result = match method {
            "initialize" => json!({
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": { "tools": {} },
                "serverInfo": { "name": "noisy-asker", "version": "1.0.0" },
            }),
            "tools/list" => json!({ "tools": [{
                "name": "ask",
                "description": "Asks the agent something, then never answers.",
                "inputSchema": { "type": "object" },
            }]}),
            "tools/call" => {
                let request = json!({
                    "jsonrpc": "2.0", "id": format!("ask-{id}"), "method": "sampling/createMessage",
                    "params": {
                        "messages": [{ "role": "user", "content": { "type": "text", "text": "noisy" } }],
                        "maxTokens": 16,
                    }
                });
                let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n";
                let event = format!("event: message\ndata: {request}\n\n");
                if stream.write_all(head.as_bytes()).await.is_err()
                    || stream.write_all(event.as_bytes()).await.is_err()
                {
                    return;
                }
                // Never answers: held until the gateway closes the stream
                // (or this runtime stops).
                let mut sink = [0u8; 1024];
                while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
                return;
            }
            // `server/discover` among them: not a 2026-07-28 server.
            _ => return respond(&mut stream, "400 Bad Request", "", b"").await,
        };
        let answer = json!({ "jsonrpc": "2.0", "id": id, "result": result }).to_string();
        respond(
            &mut stream,
            "200 OK",
            "Mcp-Session-Id: noisy-session\r\n",
            answer.as_bytes(),
        )
        .await;
    })
    .await;
}

/// An upstream that answers every POST with [`HUGE_BYTES`]: a JSON body
/// (`sse = false`) or one event-stream event with no end; it stops
/// writing when the reader stops reading.
async fn serve_huge(listener: std::net::TcpListener, sse: bool) {
    accept_each(listener, move |mut stream| async move {
        let Some((_, body)) = read_request(&mut stream).await else {
            return;
        };
        let id = serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|b| b.get("id").cloned())
            .unwrap_or(json!(1));
        let (kind, start) = if sse {
            (
                "text/event-stream",
                format!(r#"data: {{"jsonrpc":"2.0","id":{id},"result":{{"tools":["#),
            )
        } else {
            (
                "application/json",
                format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":["#),
            )
        };
        let head =
            format!("HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nConnection: close\r\n\r\n{start}");
        if stream.write_all(head.as_bytes()).await.is_err() {
            return;
        }
        let tool = br#"{"name":"t","inputSchema":{"type":"object"}},"#;
        let chunk: Vec<u8> = tool.iter().copied().cycle().take(64 * 1024).collect();
        let mut sent = 0;
        while sent < HUGE_BYTES {
            if stream.write_all(&chunk).await.is_err() {
                return;
            }
            sent += chunk.len();
        }
        let _ = stream.write_all(b"{}]}}\n\n").await;
    })
    .await;
}

/// A webhook receiver that accepts and reads, and never answers.
async fn serve_black_hole(listener: std::net::TcpListener) {
    accept_each(listener, |mut stream| async move {
        let mut sink = [0u8; 8192];
        while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
    })
    .await;
}

/// What B's webhook receiver got: each request's body and when.
#[derive(Default)]
struct Received(Mutex<Vec<(Instant, Vec<u8>)>>);

impl Received {
    /// Most bodies kept (B writes only its probes).
    const MAX: usize = 1_000;

    fn first_containing(&self, needle: &[u8]) -> Option<Instant> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find(|(_, body)| body.windows(needle.len()).any(|w| w == needle))
            .map(|(at, _)| *at)
    }
}

/// B's webhook receiver: answers 200 at once and keeps what it got.
async fn serve_receiver(listener: std::net::TcpListener, received: Arc<Received>) {
    accept_each(listener, move |mut stream| {
        let received = received.clone();
        async move {
            let Some((_, body)) = read_request(&mut stream).await else {
                return;
            };
            {
                let mut all = received.0.lock().unwrap_or_else(PoisonError::into_inner);
                if all.len() < Received::MAX {
                    all.push((Instant::now(), body));
                }
            }
            respond(&mut stream, "200 OK", "", b"").await;
        }
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attacks_parse_by_their_flags() {
        for attack in Attack::ALL {
            assert_eq!(attack.flag().parse::<Attack>(), Ok(attack));
        }
        assert!("storm".parse::<Attack>().is_err());
    }

    #[test]
    fn held_outcomes_tell_held_from_refused() {
        let reply = |body: &str| Reply {
            status: hyper::StatusCode::OK,
            headers: Default::default(),
            body: bytes::Bytes::from(body.to_owned()),
        };
        assert_eq!(
            held_outcome(&reply(r#"{"result":{"resultType":"input_required"}}"#)),
            HELD
        );
        assert!(
            held_outcome(&reply(
                r#"{"result":{"content":[{"type":"text","text":"already holds 1024 calls"}],"isError":true}}"#
            ))
            .starts_with("refused")
        );
        assert!(held_outcome(&reply(r#"{"result":{"isError":true}}"#)).starts_with("tool_error"));
    }

    #[test]
    fn b_counts_failures_apart_from_latencies() {
        let mut calls = Calls::default();
        calls.add((1.0, Ok(())));
        calls.add((3.0, Ok(())));
        calls.add((10_000.0, Err("timeout".into())));
        let record = calls.record("search storm", "get_issue");
        assert_eq!(record.count, Some(2));
        assert_eq!(record.errors, 1);
        assert_eq!(record.error_kinds["timeout"], 1);
        assert_eq!(record.max_ms, Some(3.0));
        assert_eq!(record.values["calls"], 3.0);
    }
}
