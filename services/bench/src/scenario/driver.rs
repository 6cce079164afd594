//! Driver overhead (issue #18 item 4): what `corkboard_store_mongo` adds
//! on top of the bare `mongodb` driver doing the same operations against
//! the same `secantusd-rs` server, so the product's share of the MongoDB
//! figures is visible next to the stand-in server's.
//!
//! Both sides run in this process on one runtime, against one server, one
//! database and one collection (the board the store seeded, with the
//! store's indexes), with the client settings the store uses: write
//! concern majority + journal (`wtimeout` = the operation timeout), read
//! concern majority, the same pool size and timeouts. Per operation:
//!
//! | store call | what the bare driver sends |
//! | --- | --- |
//! | `create_issue` (no key) | `insert_one` of the document the store itself wrote for the same new issue (read back once), under a fresh issue id |
//! | `get_issue` | `find_one {_id}` with `maxTimeMS`, decoded to a BSON document |
//! | `list_issues` default (first page) | `find {}` sorted `{_id: -1}`, limit 51, batch size 51, `maxTimeMS`, decoded to documents |
//!
//! What the store does beyond that is its share: validating the new issue,
//! building it (id, timestamps, search word arrays) and encoding it,
//! decoding documents into `Issue`s, the time bound around each call, the
//! once-per-tenant index check, and, after a create, the webhook look-up
//! (one `find` on the webhooks collection: a second round trip the bare
//! driver does not make).

use crate::error::{BenchError, Result};
use crate::procs;
use crate::record::{Record, Sink, quantile};
use crate::scenario::search::{self, store_error};
use corkboard_board::{IssueId, IssueStore, ListQuery, TenantId, limits};
use corkboard_store_mongo::{MongoOptions, MongoStore, schema};
use mongodb::bson::{Document, doc};
use mongodb::options::{Acknowledgment, ClientOptions, ReadConcern, WriteConcern};
use std::sync::Arc;
use std::time::Instant;

/// The operations measured, in report order.
pub const OPERATIONS: [&str; 3] = ["get_issue", "list_issues", "create_issue"];

/// Rounds the calls of one point are split into, the sides alternating.
const ROUNDS: usize = 4;

/// What the figures are of, printed under the table.
const NOTE: &str = "corkboard_store_mongo vs the bare mongodb driver in one process against \
one secantusd-rs server (sharing the two cores with this process), the same database, \
collection and indexes, and the store's client settings (write concern majority + journal, \
read concern majority, pool 32); create_issue vs insert_one of the document the store writes \
(fresh id each), get_issue vs find_one by _id, the default list_issues first page vs find {} \
sorted by _id descending, limit 51; the calls of each point in 4 rounds, the two sides \
taking turns, after a warm-up of each; store_share_*_pct is (store - bare) / store at that \
quantile; the store's create also looks up the tenant's webhooks after the write (a second \
round trip), and decodes every answer into issues; a negative share is a difference within \
the noise of the shared machine";

/// What to measure.
#[derive(Debug, Clone)]
pub struct DriverSpec {
    /// Calls per operation, side and concurrency.
    pub calls: usize,
    pub concurrency: Vec<usize>,
    /// Issues on the board before the reads.
    pub issues: usize,
}

/// One side of the comparison.
#[derive(Clone)]
enum Side {
    Store(Arc<MongoStore>),
    Bare(mongodb::Collection<Document>),
}

impl Side {
    fn name(&self) -> &'static str {
        match self {
            Self::Store(_) => "store",
            Self::Bare(_) => "bare driver",
        }
    }
}

/// What each call needs.
struct Fixture {
    tenant: TenantId,
    ids: Vec<IssueId>,
    /// The document the store wrote for [`search::corpus_item`] 1.
    template: Document,
}

async fn one_call(side: &Side, fx: &Fixture, operation: &str, i: usize) -> Result<()> {
    let id = &fx.ids[i % fx.ids.len()];
    let max_time = MongoOptions::default().operation_timeout;
    let driver = |e: mongodb::error::Error| BenchError::process("mongodb driver", e.to_string());
    match (side, operation) {
        (Side::Store(store), "get_issue") => {
            store
                .get_issue(&fx.tenant, id)
                .await
                .map_err(store_error("get_issue"))?;
        }
        (Side::Store(store), "list_issues") => {
            store
                .list_issues(&fx.tenant, &ListQuery::default())
                .await
                .map_err(store_error("list_issues"))?;
        }
        (Side::Store(store), _) => {
            let (new, _) = search::corpus_item(1)?;
            store
                .create_issue(&fx.tenant, &search::seed_author()?, new, None)
                .await
                .map_err(store_error("create_issue"))?;
        }
        (Side::Bare(issues), "get_issue") => {
            issues
                .find_one(doc! { "_id": id.as_str() })
                .max_time(max_time)
                .await
                .map_err(driver)?
                .ok_or_else(|| BenchError::process("mongodb driver", "seeded issue not found"))?;
        }
        (Side::Bare(issues), "list_issues") => {
            let fetch = i64::from(limits::PAGE_DEFAULT) + 1;
            let mut cursor = issues
                .find(doc! {})
                .sort(doc! { "_id": -1 })
                .limit(fetch)
                .batch_size(u32::try_from(fetch).unwrap_or(u32::MAX))
                .max_time(max_time)
                .await
                .map_err(driver)?;
            let mut docs = Vec::new();
            while cursor.advance().await.map_err(driver)? {
                docs.push(cursor.deserialize_current().map_err(driver)?);
            }
            if docs.is_empty() {
                return Err(BenchError::process(
                    "mongodb driver",
                    "the list came back empty",
                ));
            }
        }
        (Side::Bare(issues), _) => {
            let mut document = fx.template.clone();
            document.insert("_id", IssueId::generate().as_str());
            issues.insert_one(document).await.map_err(driver)?;
        }
    }
    Ok(())
}

/// `calls` calls of `operation` by `concurrency` workers; per-call
/// latencies (ms) and calls per second.
async fn measure(
    side: &Side,
    fx: &Arc<Fixture>,
    operation: &'static str,
    calls: usize,
    concurrency: usize,
) -> Result<(Vec<f64>, f64)> {
    let concurrency = concurrency.max(1);
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(concurrency);
    for worker in 0..concurrency {
        let (side, fx) = (side.clone(), Arc::clone(fx));
        tasks.push(tokio::spawn(async move {
            let mut samples = Vec::new();
            let mut i = worker;
            while i < calls {
                let at = Instant::now();
                one_call(&side, &fx, operation, i).await?;
                samples.push(at.elapsed().as_secs_f64() * 1000.0);
                i += concurrency;
            }
            Ok::<_, BenchError>(samples)
        }));
    }
    let mut samples = Vec::with_capacity(calls);
    for task in tasks {
        samples.extend(
            task.await
                .map_err(|e| BenchError::process("driver-overhead worker", e.to_string()))??,
        );
    }
    let rate = samples.len() as f64 / started.elapsed().as_secs_f64().max(1e-9);
    Ok((samples, rate))
}

/// The bare driver's client, configured as `MongoStore::new` configures
/// its own (the URI's timeouts would win there too; the bench URI has none).
async fn bare_client(uri: &str) -> Result<mongodb::Client> {
    let defaults = MongoOptions::default();
    let mut options = ClientOptions::parse(uri)
        .await
        .map_err(|e| BenchError::process("mongodb driver", e.to_string()))?;
    options.server_selection_timeout = Some(defaults.server_selection_timeout);
    options.connect_timeout = Some(defaults.connect_timeout);
    options.max_pool_size = Some(defaults.max_pool_size);
    options.app_name = Some("corkboard-bench-bare".into());
    options.write_concern = Some(
        WriteConcern::builder()
            .w(Acknowledgment::Majority)
            .journal(true)
            .w_timeout(defaults.operation_timeout)
            .build(),
    );
    options.read_concern = Some(ReadConcern::majority());
    mongodb::Client::with_options(options)
        .map_err(|e| BenchError::process("mongodb driver", e.to_string()))
}

pub async fn run(spec: &DriverSpec, sink: &mut Sink) -> Result<()> {
    if spec.calls == 0 || spec.concurrency.is_empty() || spec.issues == 0 {
        return Err(BenchError::Usage(
            "--calls and --issues need at least 1, --concurrency at least one value".into(),
        ));
    }
    let server = procs::mongo()?;
    let database = "bench_driver";
    let store = Arc::new(
        MongoStore::connect(&server.uri(), database, MongoOptions::default())
            .await
            .map_err(|e| BenchError::process("MongoDB board", e.to_string()))?,
    );
    let tenant = TenantId::parse("bench").map_err(|e| BenchError::Usage(e.to_string()))?;
    let dyn_store: Arc<dyn IssueStore> = store.clone();
    let ids = search::seed(&dyn_store, &tenant, 0, spec.issues).await?;
    let client = bare_client(&server.uri()).await?;
    let issues = client
        .database(database)
        .collection::<Document>(&schema::issues(&tenant));
    // The exact document the store writes for a new issue without a
    // comment, as the bare side's insert.
    let (new, _) = search::corpus_item(1)?;
    let created = store
        .create_issue(&tenant, &search::seed_author()?, new, None)
        .await
        .map_err(store_error("create_issue"))?;
    let template = issues
        .find_one(doc! { "_id": created.issue.id.as_str() })
        .await
        .map_err(|e| BenchError::process("mongodb driver", e.to_string()))?
        .ok_or_else(|| BenchError::process("mongodb driver", "the created issue is missing"))?;
    let fx = Arc::new(Fixture {
        tenant,
        ids,
        template,
    });
    let sides = [Side::Store(Arc::clone(&store)), Side::Bare(issues)];
    let warm = (spec.calls / 10).clamp(1, 200);
    for operation in OPERATIONS {
        for &concurrency in &spec.concurrency {
            for side in &sides {
                // Warm pools and caches before anything is measured.
                measure(side, &fx, operation, warm, concurrency).await?;
            }
            // The calls in rounds, the sides taking turns (and turns at
            // going first): the machine is shared, and a load that comes
            // and goes must fall on both sides alike.
            let mut gathered: Vec<(Vec<f64>, f64)> = vec![(Vec::new(), 0.0); sides.len()];
            let per_round = spec.calls.div_ceil(ROUNDS);
            for round in 0..ROUNDS {
                let calls = per_round.min(spec.calls - (round * per_round).min(spec.calls));
                if calls == 0 {
                    break;
                }
                for turn in 0..sides.len() {
                    let which = (turn + round) % sides.len();
                    let started = Instant::now();
                    let (samples, _) =
                        measure(&sides[which], &fx, operation, calls, concurrency).await?;
                    gathered[which].1 += started.elapsed().as_secs_f64();
                    gathered[which].0.extend(samples);
                }
            }
            let results: Vec<(&str, Vec<f64>, f64)> = sides
                .iter()
                .zip(gathered)
                .map(|(side, (mut samples, secs))| {
                    samples.sort_by(f64::total_cmp);
                    let rate = samples.len() as f64 / secs.max(1e-9);
                    (side.name(), samples, rate)
                })
                .collect();
            let bare_p50 = quantile(&results[1].1, 0.5);
            let bare_p99 = quantile(&results[1].1, 0.99);
            for (name, samples, rate) in &results {
                let mut record = Record::new("driver_overhead")
                    .label("tool", operation)
                    .label("mode", name)
                    .label("shape", format!("c={concurrency}"))
                    .with_samples(samples)
                    .value("calls_per_s", *rate);
                record.concurrency = Some(concurrency as u64);
                if *name == "store" {
                    let (p50, p99) = (quantile(samples, 0.5), quantile(samples, 0.99));
                    let share = |store: f64, bare: f64| {
                        if store > 0.0 {
                            (store - bare) / store * 100.0
                        } else {
                            0.0
                        }
                    };
                    record = record
                        .value("added_p50_ms", p50 - bare_p50)
                        .value("added_p99_ms", p99 - bare_p99)
                        .value("store_share_p50_pct", share(p50, bare_p50))
                        .value("store_share_p99_pct", share(p99, bare_p99));
                }
                record.note = Some(NOTE.to_owned());
                sink.emit(record)?;
            }
        }
    }
    Ok(())
}
