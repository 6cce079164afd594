//! The tenants curve (issue #18 item 3): what many tenants on one MongoDB
//! database cost, with the store's layout of one collection per tenant
//! (`issues.<t>`, `idem.<t>`, `audit.<t>`, each with its indexes, created
//! by the tenant's first write).
//!
//! The tenant count grows through the sizes on one database. At each size:
//! the time to create the tenants added (each one's first write, a
//! `create_issue`, timed; a few in flight), `create_issue` and the default
//! `list_issues` on one existing tenant and on random tenants, the first
//! write of brand-new tenants, `MongoStore::connect`'s start-up against the
//! database as it is (it creates, idempotently, every tenant's indexes),
//! `corkboard server`'s time to ready against it when the binary is there,
//! both processes' RSS and the server's storage size.
//!
//! Creating tenants is bounded in time (`max_create`): when the bound
//! passes, the size is measured with the tenants reached, recorded as
//! stopped, and no larger size is tried.

use crate::error::{BenchError, Result};
use crate::procs::{self, Binaries, Process};
use crate::record::{Record, Sink};
use crate::scenario::curves::{disk_bytes, load_average};
use crate::scenario::search::{
    BENCH_OPERATION_TIMEOUT, Rng, corpus_item, seed_author, store_error,
};
use corkboard_board::{IssueStore, ListQuery, TenantId};
use corkboard_store_mongo::{MongoOptions, MongoStore};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The database every tenant lives in.
const DATABASE: &str = "bench_tenants";

/// First writes in flight while creating tenants: a handful, as a busy
/// deployment's new tenants would arrive, without flooding the server.
const CREATE_PARALLEL: usize = 4;

/// Calls every operation gets at every size, whatever the time bound.
const MIN_CALLS: usize = 5;

/// What the figures are of, printed under the table.
const NOTE: &str = "one MongoDB database, one collection per tenant (issues, idem, audit, 15 \
indexes and 3 _id indexes per tenant, created by its first write), tenant count growing through \
the sizes; first writes: each new tenant's first create_issue while the size's tenants are created \
(4 in flight; tenants_per_s the rate, create_s the time); create_issue/list_issues existing: one \
tenant that has been there from the start (its board grows by the creates); random: a random \
tenant each call; first write new tenant: brand-new tenants one at a time (they stay, so the next \
size has them too); store start-up: MongoStore::connect against the database as it is (it \
re-creates every tenant's indexes, idempotently); serve ready: `corkboard server` spawned to \
/readyz 200 against it (serve_rss_kib its RSS then; it connects lazily, so /readyz answers once the \
server pings and the per-tenant index set-up, the store start-up figure, runs on in the background); footprint: server_rss_kib is the \
MongoDB-protocol server's RSS, bench_rss_kib this process's (the store with every tenant's index \
cache), store_bytes the server's storage directory; the growth figures are over the empty \
database's, per 1,000 tenants (tenants_total, the new ones included). The server is secantusd-rs, a stand-in for \
mongod sharing the machine's two cores with the bench: absolute figures are the stand-in's, the \
growth with the tenant count is the finding; load is /proc/loadavg (1 minute)";

/// What to measure.
#[derive(Debug, Clone)]
pub struct TenantsSpec {
    /// Tenant counts, measured in increasing order on one database.
    pub counts: Vec<usize>,
    /// Calls per operation and size.
    pub calls: usize,
    /// Time bound per operation and size (never fewer than [`MIN_CALLS`]).
    pub max_per_op: Duration,
    /// Brand-new tenants whose first write is timed at each size.
    pub new_tenants: usize,
    /// Time bound on creating the tenants of all sizes together.
    pub max_create: Duration,
}

/// The store's options: the bench's bound per call (starting up against
/// 10,000 tenants takes longer than the default bound of one call).
fn options() -> MongoOptions {
    MongoOptions {
        operation_timeout: BENCH_OPERATION_TIMEOUT,
        ..MongoOptions::default()
    }
}

fn tenant(name: String) -> Result<TenantId> {
    TenantId::parse(name).map_err(|e| BenchError::Usage(e.to_string()))
}

/// One `create_issue` of corpus item `i` in `tenant`; its latency in ms.
async fn create(store: &MongoStore, tenant: &TenantId, i: usize) -> Result<f64> {
    let author = seed_author()?;
    let (new, _) = corpus_item(i)?;
    let started = Instant::now();
    store
        .create_issue(tenant, &author, new, None)
        .await
        .map_err(store_error("create_issue"))?;
    Ok(started.elapsed().as_secs_f64() * 1000.0)
}

/// The default `list_issues` of `tenant`; its latency in ms.
async fn list(store: &MongoStore, tenant: &TenantId) -> Result<f64> {
    let started = Instant::now();
    store
        .list_issues(tenant, &ListQuery::default())
        .await
        .map_err(store_error("list_issues"))?;
    Ok(started.elapsed().as_secs_f64() * 1000.0)
}

/// Creates tenants `from..to` (each by its first write), `CREATE_PARALLEL`
/// at a time, until `deadline`; the first-write latencies, and how many
/// tenants exist afterwards (tenants are taken in order, so they are
/// exactly `0..reached`).
async fn create_tenants(
    store: &MongoStore,
    from: usize,
    to: usize,
    deadline: Instant,
) -> Result<(Vec<f64>, usize)> {
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(from));
    let mut lanes = Vec::new();
    for _ in 0..CREATE_PARALLEL {
        let (store, next) = (store.clone(), Arc::clone(&next));
        lanes.push(tokio::spawn(async move {
            let mut samples = Vec::new();
            loop {
                if Instant::now() >= deadline {
                    break;
                }
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if i >= to {
                    break;
                }
                samples.push(create(&store, &tenant(format!("t{i}"))?, i).await?);
            }
            Ok::<_, BenchError>(samples)
        }));
    }
    let mut samples = Vec::new();
    for lane in lanes {
        samples.extend(
            lane.await
                .map_err(|e| BenchError::process("tenant creation", e.to_string()))??,
        );
    }
    let reached = next.load(std::sync::atomic::Ordering::SeqCst).min(to);
    Ok((samples, reached))
}

/// `corkboard server` against the database: its time to ready (`None`
/// when the binary is not built or it did not get ready; the reason goes
/// into the record's note) and its RSS then.
async fn serve_ready(
    bins: Option<&Binaries>,
    server: &corkboard_testkit::MongoServer,
    logs: &Path,
    tenants: usize,
) -> std::result::Result<(f64, u64), String> {
    let bins = bins.ok_or("the corkboard binary is not built next to corkboard-bench")?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut env = procs::cluster_secrets(dir.path()).map_err(|e| e.to_string())?;
    env.extend([
        (
            "CORKBOARD_DATA_DIR".to_owned(),
            dir.path().join("data").display().to_string(),
        ),
        ("CORKBOARD_STORE".to_owned(), "mongodb".to_owned()),
        ("CORKBOARD_MONGODB_URI".to_owned(), server.uri()),
        ("CORKBOARD_MONGODB_DATABASE".to_owned(), DATABASE.to_owned()),
    ]);
    let mut cmd = bins.corkboard();
    cmd.args(["server", "--listen", "127.0.0.1:0"]).envs(env);
    let started = Instant::now();
    let log = logs.join(format!("corkboard-server-{tenants}-tenants.log"));
    let mut process = Process::spawn("corkboard server", cmd, &log).map_err(|e| e.to_string())?;
    process.ready().await.map_err(|e| e.to_string())?;
    let ready_ms = started.elapsed().as_secs_f64() * 1000.0;
    let rss = process.rss_kib().map_err(|e| e.to_string())?;
    process.terminate();
    Ok((ready_ms, rss))
}

/// Calls `op` up to `spec.calls` times or until `spec.max_per_op` has
/// passed (never fewer than [`MIN_CALLS`]); the latencies.
async fn timed<F, Fut>(spec: &TenantsSpec, mut op: F) -> Result<Vec<f64>>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<f64>>,
{
    let started = Instant::now();
    let mut samples = Vec::with_capacity(spec.calls);
    while samples.len() < spec.calls
        && (samples.len() < MIN_CALLS || started.elapsed() < spec.max_per_op)
    {
        samples.push(op().await?);
    }
    Ok(samples)
}

pub async fn run(
    bins: Option<&Binaries>,
    spec: &TenantsSpec,
    logs: &Path,
    sink: &mut Sink,
) -> Result<()> {
    let server = procs::mongo()?;
    let store = MongoStore::connect(&server.uri(), DATABASE, options())
        .await
        .map_err(|e| BenchError::process("MongoDB board", e.to_string()))?;
    // What an empty database already holds (the server's own files):
    // the tenants' cost is measured above it.
    let (rss_empty, bytes_empty) = (
        server.pid().map_or(Ok(0), procs::rss_kib)?,
        disk_bytes(&server.storage_path()),
    );
    let mut counts = spec.counts.clone();
    counts.sort_unstable();
    counts.dedup();
    let create_deadline = Instant::now() + spec.max_create;
    let mut rng = Rng(0x007e_4a47);
    // Tenants `t0..existing` exist, plus the brand-new ones made so far.
    let (mut existing, mut fresh, mut issue) = (0usize, 0usize, 0usize);
    for target in counts {
        let started = Instant::now();
        let (samples, reached) = create_tenants(&store, existing, target, create_deadline).await?;
        let create_s = started.elapsed().as_secs_f64();
        let added = reached - existing;
        existing = reached;
        issue += added;
        let stopped = reached < target;
        let mode = if stopped {
            format!("{reached} tenants (stopped at the time bound; {target} asked)")
        } else {
            format!("{target} tenants")
        };
        let base = |tool: &str| {
            Record::new("tenants")
                .label("store", "mongodb")
                .label("mode", &mode)
                .label("tool", tool)
                .value("tenants", reached as f64)
                .value("tenants_asked", target as f64)
                .value("load", load_average())
        };
        let mut records = Vec::new();
        if !samples.is_empty() {
            records.push(
                base("first writes")
                    .with_samples(&samples)
                    .value("create_s", create_s)
                    .value("tenants_per_s", added as f64 / create_s.max(1e-9))
                    .value("stopped", f64::from(u8::from(stopped))),
            );
        }
        let first = tenant("t0".to_owned())?;
        let samples = timed(spec, || {
            issue += 1;
            create(&store, &first, issue)
        })
        .await?;
        records.push(base("create_issue existing").with_samples(&samples));
        let samples = timed(spec, || list(&store, &first)).await?;
        records.push(base("list_issues existing").with_samples(&samples));
        let mut picks: Vec<TenantId> = Vec::new();
        for _ in 0..spec.calls {
            picks.push(tenant(format!("t{}", rng.below(existing)))?);
        }
        let mut pick = picks.iter().cycle();
        let samples = timed(spec, || {
            issue += 1;
            create(&store, pick.next().unwrap_or(&first), issue)
        })
        .await?;
        records.push(base("create_issue random").with_samples(&samples));
        let mut pick = picks.iter().cycle();
        let samples = timed(spec, || list(&store, pick.next().unwrap_or(&first))).await?;
        records.push(base("list_issues random").with_samples(&samples));
        let mut samples = Vec::with_capacity(spec.new_tenants);
        for _ in 0..spec.new_tenants {
            let t = tenant(format!("new{fresh}"))?;
            fresh += 1;
            issue += 1;
            samples.push(create(&store, &t, issue).await?);
        }
        if !samples.is_empty() {
            records.push(base("first write new tenant").with_samples(&samples));
        }
        // Start-up of another store (its own client) against the database
        // as it is now.
        let started = Instant::now();
        let other = MongoStore::connect(&server.uri(), DATABASE, options())
            .await
            .map_err(|e| BenchError::process("MongoDB start-up", e.to_string()))?;
        let startup_ms = started.elapsed().as_secs_f64() * 1000.0;
        drop(other);
        records.push(base("store start-up").with_samples(&[startup_ms]));
        let mut ready = base("serve ready");
        match serve_ready(bins, &server, logs, existing + fresh).await {
            Ok((ms, rss)) => {
                ready = ready.with_samples(&[ms]).value("serve_rss_kib", rss as f64);
            }
            Err(reason) => {
                ready.note = Some(format!("serve ready not measured: {reason}"));
            }
        }
        records.push(ready);
        let (rss, bytes) = (
            server.pid().map_or(Ok(0), procs::rss_kib)?,
            disk_bytes(&server.storage_path()),
        );
        let per_1k = 1000.0 / (existing + fresh).max(1) as f64;
        records.push(
            base("footprint")
                .value("tenants_total", (existing + fresh) as f64)
                .value("server_rss_kib", rss as f64)
                .value(
                    "server_rss_growth_mib_per_1k_tenants",
                    rss.saturating_sub(rss_empty) as f64 / 1024.0 * per_1k,
                )
                .value("bench_rss_kib", procs::rss_kib(std::process::id())? as f64)
                .value("store_bytes", bytes as f64)
                .value(
                    "store_growth_mib_per_1k_tenants",
                    bytes.saturating_sub(bytes_empty) as f64 / 1_048_576.0 * per_1k,
                ),
        );
        for mut record in records {
            record.note.get_or_insert_with(|| NOTE.to_owned());
            sink.emit(record)?;
        }
        if stopped {
            break;
        }
    }
    Ok(())
}
