//! Cost curves (issue #18 item 3): what the board's reads cost as one
//! tenant's board grows. One board grows through the sizes (seeded with the
//! search scenario's corpus through the store's own create path, or with
//! `bulk` through its bench-only bulk seeding path); at each size,
//! `get_issue` of random issues, the default `list_issues` (first page), a
//! filtered list (state `todo`, first page) and `search_issues` of a rare
//! word are timed one call at a time, through the store directly (up to
//! `calls` calls or `max_per_op`, whichever comes first), and the process
//! holding the data's RSS and the store's size on disk are recorded, with
//! both per 100,000 issues.
//!
//! The RSS is the bench process's own for SQLite (the store is embedded in
//! it, as in `corkboard serve`) and the MongoDB-protocol server's for
//! MongoDB; the store size is the SQLite files (database, WAL, shared
//! memory) or the server's storage directory.

use crate::error::{BenchError, Result};
use crate::procs;
use crate::record::{Record, Sink};
use crate::scenario::deploy::Store;
use crate::scenario::search::{self, Board, BulkPath, Rng, store_error};
use corkboard_board::{IssueState, ListQuery, TenantId};
use std::path::Path;
use std::time::{Duration, Instant};

/// What the figures are of, printed under the table.
const NOTE: &str = "one tenant, one board growing through the sizes (the search scenario's corpus, \
seeded through the store's create path, or with --bulk through its bench-only \
seed_issues path, which writes the same rows many per transaction on SQLite and the same \
documents many per insert_many on MongoDB; seed_path says which); each operation one call at a \
time through the store, up to --calls calls or --max-seconds-per-op seconds (at least 5; calls \
says how many were made; seeding is bounded by --max-seed-seconds, and a size it did not reach \
is measured at the issues seeded and says so): \
get_issue of a random seeded issue, list_issues with the default query (first page), list_issues \
filtered to state todo (first page), search_issues of a rare word (limit 10); rss_kib is the \
process holding the data (the bench itself for the embedded SQLite store, the server for \
MongoDB), rss_growth_kib_per_100k its growth over the empty board's per 100,000 issues, \
store_bytes the files on disk (store_mib_per_100k per 100,000 issues); load is /proc/loadavg \
(1 minute) when the size was measured: figures are provisional until re-measured on an idle \
machine";

/// The operations timed, in report order.
pub const OPERATIONS: [&str; 4] = [
    "get_issue",
    "list_issues",
    "list_issues todo",
    "search_issues",
];

/// What to measure.
#[derive(Debug, Clone)]
pub struct CurvesSpec {
    pub store: Store,
    /// Board sizes, measured in increasing order on one growing board.
    pub sizes: Vec<usize>,
    /// Calls per operation and size.
    pub calls: usize,
    /// Seed through the store's bench-only bulk path (the same rows or
    /// documents, many issues per write) instead of one create per issue.
    pub bulk: bool,
    /// Time bound per operation and size: the calls stop at `calls` or
    /// once this has passed, whichever comes first (never before
    /// [`MIN_CALLS`]).
    pub max_per_op: Duration,
    /// Time bound on seeding, all sizes together: once it has passed, the
    /// board is measured at the size reached, recorded as stopped, and no
    /// larger size is tried.
    pub max_seed: Duration,
}

/// Issues seeded between two looks at the seeding bound.
const SEED_CHUNK: usize = 10_000;

/// Calls every operation gets at every size, whatever the time bound, so
/// even the slowest has a median worth reading.
pub const MIN_CALLS: usize = 5;

/// Bytes under `path` (a file or a directory tree).
pub(crate) fn disk_bytes(path: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if !meta.is_dir() {
        return meta.len();
    }
    std::fs::read_dir(path)
        .map(|entries| {
            entries
                .filter_map(std::result::Result::ok)
                .map(|e| disk_bytes(&e.path()))
                .sum()
        })
        .unwrap_or(0)
}

/// The 1-minute load average.
pub(crate) fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split(' ').next().and_then(|l| l.parse().ok()))
        .unwrap_or(0.0)
}

pub async fn run(spec: &CurvesSpec, sink: &mut Sink) -> Result<()> {
    let board = Board::open(spec.store, "bench_curves").await?;
    let store = board.store.clone();
    let tenant = TenantId::parse("bench").map_err(|e| BenchError::Usage(e.to_string()))?;
    let mut sizes = spec.sizes.clone();
    sizes.sort_unstable();
    sizes.dedup();
    let rss_now = |board: &Board| -> Result<u64> {
        match &board.mongo {
            Some(server) => server.pid().map_or(Ok(0), procs::rss_kib),
            None => procs::rss_kib(std::process::id()),
        }
    };
    // The RSS of an empty board: what the data adds is measured above it.
    let rss_empty = rss_now(&board)?;
    let bulk = spec.bulk;
    let mut ids = Vec::new();
    let seed_deadline = Instant::now() + spec.max_seed;
    for asked in sizes {
        let started = Instant::now();
        let from = ids.len();
        while ids.len() < asked && Instant::now() < seed_deadline {
            let (start, end) = (ids.len(), (ids.len() + SEED_CHUNK).min(asked));
            let seeded = match (&board.sqlite, &board.mongodb) {
                (Some(sqlite), _) if bulk => {
                    search::bulk_seed(BulkPath::Sqlite(sqlite), &tenant, start, end).await?
                }
                (_, Some(mongodb)) if bulk => {
                    search::bulk_seed(BulkPath::Mongodb(mongodb), &tenant, start, end).await?
                }
                _ => search::seed(&store, &tenant, start, end).await?,
            };
            ids.extend(seeded);
        }
        let size = ids.len();
        let stopped = size < asked;
        let seed_rate = (size - from) as f64 / started.elapsed().as_secs_f64().max(1e-9);
        let load = load_average();
        let mut rng = Rng(size as u64 ^ 0x5eed);
        for operation in OPERATIONS {
            let mut samples = Vec::with_capacity(spec.calls);
            let op_started = Instant::now();
            while samples.len() < spec.calls
                && (samples.len() < MIN_CALLS || op_started.elapsed() < spec.max_per_op)
            {
                let started = Instant::now();
                match operation {
                    "get_issue" => {
                        let id = &ids[rng.below(ids.len())];
                        store
                            .get_issue(&tenant, id)
                            .await
                            .map_err(store_error("get_issue"))?;
                    }
                    "list_issues" => {
                        store
                            .list_issues(&tenant, &ListQuery::default())
                            .await
                            .map_err(store_error("list_issues"))?;
                    }
                    "list_issues todo" => {
                        let query = ListQuery {
                            states: vec![IssueState::Todo],
                            ..ListQuery::default()
                        };
                        store
                            .list_issues(&tenant, &query)
                            .await
                            .map_err(store_error("list_issues todo"))?;
                    }
                    _ => {
                        let query = search::query("rare word", &mut rng);
                        store
                            .search_issues(&tenant, &query)
                            .await
                            .map_err(store_error("search_issues"))?;
                    }
                }
                samples.push(started.elapsed().as_secs_f64() * 1000.0);
            }
            let rss = rss_now(&board)?;
            let bytes = match &board.mongo {
                Some(server) => disk_bytes(&server.storage_path()),
                None => disk_bytes(board.dir.path()),
            };
            let per_100k = 100_000.0 / size.max(1) as f64;
            let mut record = Record::new("curve")
                .label("store", spec.store)
                .label(
                    "mode",
                    match (bulk, stopped) {
                        (_, true) => format!(
                            "{size} issues ({}seeding stopped at the time bound; {asked} asked)",
                            if bulk { "bulk " } else { "" }
                        ),
                        (true, false) => format!("{size} issues (bulk-seeded)"),
                        (false, false) => format!("{size} issues"),
                    },
                )
                .label("tool", operation)
                .with_samples(&samples)
                .value("issues", size as f64)
                .value("calls", samples.len() as f64)
                .value("issues_asked", asked as f64)
                .value("max_seconds_per_op", spec.max_per_op.as_secs_f64())
                .value("rss_kib", rss as f64)
                .value(
                    "rss_growth_kib_per_100k",
                    rss.saturating_sub(rss_empty) as f64 * per_100k,
                )
                .value("store_bytes", bytes as f64)
                .value("store_mib_per_100k", bytes as f64 * per_100k / 1_048_576.0)
                .label("seed_path", if bulk { "bulk" } else { "create" })
                .value("seed_issues_per_s", seed_rate)
                .value("load", load);
            record.note = Some(NOTE.to_owned());
            sink.emit(record)?;
        }
        if stopped {
            break;
        }
    }
    Ok(())
}
