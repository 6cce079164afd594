//! The audit writer: tool calls hand records over without waiting, and a
//! background task writes them to the store in batches, so auditing stays
//! on under load.
//!
//! What "always on" guarantees (README "Operating"):
//! - every tool call hands its record over without waiting; the record
//!   gets its [`AuditId`] then, once;
//! - a batch is retried ([`ATTEMPTS`] times, backing off) with the same
//!   ids, so a write whose outcome was unknown (a timeout, a connection
//!   cut mid-insert) stores no record twice: the stores keep one record
//!   per id;
//! - nothing is dropped silently: a record refused because the queue is
//!   full or the writer stopped, or lost after every retry failed, is
//!   counted per tenant (`corkboard_audit_records_lost_total{tenant,
//!   reason}`, and [`AuditWriter::lost`]) and logged at error level with
//!   the tenant and how many (queue losses at most once a second, summed).
//!
//! Not guaranteed: records still queued (at most [`BATCH_WAIT`] of them,
//! or more while the store is slow) when the process is killed are lost
//! without a count, since nothing is left to count them; a graceful stop
//! ([`AuditWriter::close`]) writes them first.

use corkboard_board::AuditSink;
use corkboard_board::{AuditEntry, AuditLog, AuditRecord, StoreError, TenantId};
use corkboard_telemetry::Metrics;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, mpsc};

#[cfg(doc)]
use corkboard_board::AuditId;

/// Records queued before `record` starts refusing.
const QUEUE_CAPACITY: usize = 65_536;
/// Largest batch written in one store call, one transaction. Each commit
/// rewrites the last page of the audit table and of each of its indexes
/// (and the file's header page), so under a read load (tens of thousands
/// of records a second) fuller commits write far fewer pages per record:
/// 128 a call made about 275 commits a second at 35,000 reads a second
/// (services/bench/FINDINGS.md). Nothing waits behind a large batch: the
/// SQLite store writes audit records with a writer and file of their own,
/// MongoDB in a collection of their own.
const BATCH_MAX: usize = 2048;
/// How long records gather before they are written (in `BATCH_MAX`
/// pieces). Every tool call, reads included, is audited: waking up less
/// often means fewer, fuller writes under load.
const BATCH_WAIT: Duration = Duration::from_millis(200);
/// Attempts per batch before its records are reported lost.
const ATTEMPTS: u32 = 5;
/// Queue losses are summed and logged at most this often (a full queue
/// refuses thousands of records a second; one line each would flood the
/// log).
const LOSS_REPORT_EVERY: Duration = Duration::from_secs(1);
/// Tenants named in one summed loss report; the rest are summed as
/// `other` (the metric has its own bound).
const LOSS_REPORT_TENANTS_MAX: usize = 100;

/// Why records were lost: the label values of the loss metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum LossReason {
    QueueFull,
    WriterStopped,
    StoreFailed,
}

impl LossReason {
    fn label(self) -> &'static str {
        match self {
            Self::QueueFull => "queue_full",
            Self::WriterStopped => "writer_stopped",
            Self::StoreFailed => "store_failed",
        }
    }
}

/// Lost records: counted in total, per tenant in the metrics, and logged
/// per tenant.
#[derive(Debug)]
struct Losses {
    total: AtomicU64,
    metrics: Option<Metrics>,
    /// Queue losses not logged yet, per (tenant, reason).
    unreported: Mutex<Unreported>,
}

#[derive(Debug)]
struct Unreported {
    counts: BTreeMap<(String, LossReason), u64>,
    last_report: Option<Instant>,
}

impl Losses {
    fn new(metrics: Option<Metrics>) -> Self {
        Self {
            total: AtomicU64::new(0),
            metrics,
            unreported: Mutex::new(Unreported {
                counts: BTreeMap::new(),
                last_report: None,
            }),
        }
    }

    fn count(&self, tenant: &TenantId, reason: LossReason, records: u64) {
        self.total.fetch_add(records, Ordering::Relaxed);
        if let Some(metrics) = &self.metrics {
            metrics.audit_records_lost(tenant.as_str(), reason.label(), records);
        }
    }

    /// A record refused on the way in (on the caller's thread): counted at
    /// once, logged summed with others at most every `LOSS_REPORT_EVERY`.
    fn refused(&self, tenant: &TenantId, reason: LossReason) {
        self.count(tenant, reason, 1);
        let mut unreported = self
            .unreported
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let named = unreported.counts.len() < LOSS_REPORT_TENANTS_MAX
            || unreported
                .counts
                .contains_key(&(tenant.as_str().to_owned(), reason));
        let key = if named { tenant.as_str() } else { "other" };
        *unreported
            .counts
            .entry((key.to_owned(), reason))
            .or_default() += 1;
        let due = unreported
            .last_report
            .is_none_or(|at| at.elapsed() >= LOSS_REPORT_EVERY);
        if due {
            Self::report(&mut unreported);
        }
    }

    /// Logs the summed queue losses if any are due (`force`: all of them).
    fn report_due(&self, force: bool) {
        let mut unreported = self
            .unreported
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let due = force
            || unreported
                .last_report
                .is_none_or(|at| at.elapsed() >= LOSS_REPORT_EVERY);
        if due && !unreported.counts.is_empty() {
            Self::report(&mut unreported);
        }
    }

    fn report(unreported: &mut Unreported) {
        for ((tenant, reason), lost) in std::mem::take(&mut unreported.counts) {
            let why = match reason {
                LossReason::QueueFull => "the audit queue is full (the store is far behind)",
                LossReason::WriterStopped => "the audit writer has stopped",
                LossReason::StoreFailed => "the store failed",
            };
            tracing::error!(
                tenant,
                lost,
                reason = reason.label(),
                "audit records lost: {why}"
            );
        }
        unreported.last_report = Some(Instant::now());
    }

    /// A batch given up after every attempt failed: one line per tenant.
    fn batch_lost(&self, batch: &[AuditEntry], err: &StoreError) {
        let mut per_tenant: BTreeMap<&str, u64> = BTreeMap::new();
        for entry in batch {
            self.count(&entry.record.tenant, LossReason::StoreFailed, 1);
            *per_tenant.entry(entry.record.tenant.as_str()).or_default() += 1;
        }
        for (tenant, lost) in per_tenant {
            tracing::error!(
                tenant,
                lost,
                reason = LossReason::StoreFailed.label(),
                error = %err,
                attempts = ATTEMPTS,
                "audit records lost after retries"
            );
        }
    }
}

#[derive(Debug)]
pub struct AuditWriter {
    tx: mpsc::Sender<AuditEntry>,
    shutdown: Arc<Notify>,
    written: Arc<AtomicU64>,
    losses: Arc<Losses>,
    done: tokio::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl AuditWriter {
    /// Starts the background writer on the current tokio runtime; losses
    /// are counted and logged, not exported.
    pub fn spawn(log: Arc<dyn AuditLog>) -> Arc<Self> {
        Self::spawn_with_metrics(log, None)
    }

    /// [`Self::spawn`], counting lost records per tenant in `metrics`.
    pub fn spawn_with_metrics(log: Arc<dyn AuditLog>, metrics: Option<Metrics>) -> Arc<Self> {
        let (tx, rx) = mpsc::channel(QUEUE_CAPACITY);
        let shutdown = Arc::new(Notify::new());
        let written = Arc::new(AtomicU64::new(0));
        let losses = Arc::new(Losses::new(metrics));
        let task = tokio::spawn(write_loop(
            log,
            rx,
            shutdown.clone(),
            written.clone(),
            losses.clone(),
        ));
        Arc::new(Self {
            tx,
            shutdown,
            written,
            losses,
            done: tokio::sync::Mutex::new(Some(task)),
        })
    }

    /// Records written so far.
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }

    /// Records that could not be written (queue full or store failing).
    pub fn lost(&self) -> u64 {
        self.losses.total.load(Ordering::Relaxed)
    }

    /// Writes everything queued, then stops the background task.
    pub async fn close(&self) {
        self.shutdown.notify_one();
        if let Some(task) = self.done.lock().await.take() {
            let _ = task.await;
        }
        self.losses.report_due(true);
    }
}

impl AuditSink for AuditWriter {
    fn record(&self, record: AuditRecord) {
        if let Err(err) = self.tx.try_send(AuditEntry::new(record)) {
            let (reason, entry) = match err {
                mpsc::error::TrySendError::Full(entry) => (LossReason::QueueFull, entry),
                mpsc::error::TrySendError::Closed(entry) => (LossReason::WriterStopped, entry),
            };
            self.losses.refused(&entry.record.tenant, reason);
        }
    }
}

async fn write_loop(
    log: Arc<dyn AuditLog>,
    mut rx: mpsc::Receiver<AuditEntry>,
    shutdown: Arc<Notify>,
    written: Arc<AtomicU64>,
    losses: Arc<Losses>,
) {
    let mut batch = Vec::new();
    let mut stopping = false;
    loop {
        if !stopping {
            // Wait for the first record of a batch...
            tokio::select! {
                received = rx.recv() => match received {
                    Some(entry) => batch.push(entry),
                    None => stopping = true,
                },
                () = shutdown.notified() => stopping = true,
            }
        }
        if !stopping {
            // ...then let the batch fill without listening to the queue:
            // waking this task for every record (a cross-thread wake-up per
            // tool call) was a measurable share of a request's cost.
            tokio::select! {
                () = tokio::time::sleep(BATCH_WAIT) => {}
                () = shutdown.notified() => stopping = true,
            }
        }
        // Everything queued by now, in batches of at most `BATCH_MAX`.
        loop {
            while batch.len() < BATCH_MAX {
                match rx.try_recv() {
                    Ok(entry) => batch.push(entry),
                    Err(_) => break,
                }
            }
            if batch.is_empty() {
                break;
            }
            write_batch(&*log, &mut batch, &written, &losses).await;
        }
        losses.report_due(false);
        if stopping {
            return;
        }
    }
}

/// Writes `batch`, retrying the same entries (same ids: a retry after an
/// unknown outcome duplicates nothing), and empties it.
async fn write_batch(
    log: &dyn AuditLog,
    batch: &mut Vec<AuditEntry>,
    written: &AtomicU64,
    losses: &Losses,
) {
    let mut delay = Duration::from_millis(100);
    for attempt in 1..=ATTEMPTS {
        match log.append_audit_entries(batch).await {
            Ok(()) => {
                written.fetch_add(batch.len() as u64, Ordering::Relaxed);
                batch.clear();
                return;
            }
            Err(err) if attempt < ATTEMPTS => {
                tracing::warn!(error = %err, attempt, records = batch.len(), "audit batch write failed; retrying");
                tokio::time::sleep(delay).await;
                delay *= 2;
            }
            Err(err) => losses.batch_lost(batch, &err),
        }
    }
    batch.clear();
}

#[cfg(test)]
mod tests {
    use super::*;
    use corkboard_board::{ArgumentsHash, AuditOutcome, AuditQuery, GrantId, RunId, Timestamp};
    use corkboard_store_contract::{Fault, FaultStore};
    use corkboard_store_sqlite::SqliteStore;

    fn record_of(tenant: &str, i: usize) -> AuditRecord {
        AuditRecord {
            tenant: TenantId::parse(tenant).unwrap(),
            ..record(i)
        }
    }

    /// Issue 16 item 15: a retried batch whose first write landed (its
    /// answer lost) is stored once, not twice.
    #[actix_rt::test]
    async fn a_batch_retried_after_an_unknown_outcome_is_written_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open_in_dir(dir.path()).unwrap();
        // The first two appends write the batch and then lose the answer
        // (outcome unknown, as a timeout or a cut connection).
        let log = FaultStore::new(Arc::new(store.clone()));
        log.inject("append_audit_entries", Fault::LoseAnswer { times: 2 });
        let log = Arc::new(log);
        let writer = AuditWriter::spawn(log);
        for i in 0..40 {
            writer.record(record(i));
        }
        writer.close().await;
        assert_eq!((writer.written(), writer.lost()), (40, 0));
        let query = AuditQuery {
            limit: 100,
            ..AuditQuery::default()
        };
        let stored = store
            .list_audit(&TenantId::parse("acme").unwrap(), &query)
            .await
            .unwrap();
        assert_eq!(stored.len(), 40, "each record exactly once");
    }

    /// Issue 16 item 15: losses were one global number. Now each tenant's
    /// are counted in the metrics, by reason (the retries back off for
    /// 1.5 s in all).
    #[actix_rt::test]
    async fn lost_records_are_counted_per_tenant() {
        let log = Arc::new(FaultStore::failing(StoreError::unavailable(
            "the store is down",
        )));
        let metrics = Metrics::default();
        let writer = AuditWriter::spawn_with_metrics(log, Some(metrics.clone()));
        for i in 0..5 {
            writer.record(record_of("acme", i));
        }
        for i in 0..3 {
            writer.record(record_of("globex", i));
        }
        writer.close().await;
        // After close, refused on the way in.
        writer.record(record_of("initech", 0));
        assert_eq!((writer.written(), writer.lost()), (0, 9));
        let text = metrics.render();
        for (tenant, reason, count) in [
            ("acme", "store_failed", 5),
            ("globex", "store_failed", 3),
            ("initech", "writer_stopped", 1),
        ] {
            let line = format!(
                "corkboard_audit_records_lost_total{{reason=\"{reason}\",tenant=\"{tenant}\"}} {count}"
            );
            assert!(text.contains(&line), "{line} missing from:\n{text}");
        }
    }

    /// Records are spread over this many runs, so each run's list fits
    /// one page.
    const RUNS: usize = 16;

    fn record(i: usize) -> AuditRecord {
        AuditRecord {
            at: Timestamp::now(),
            tenant: TenantId::parse("acme").unwrap(),
            run: RunId::parse(format!("audited-{}", i % RUNS)).unwrap(),
            grant: GrantId::generate(),
            tool: "get_issue".to_owned(),
            outcome: AuditOutcome::Ok,
            latency_micros: i as u64,
            arguments_hash: ArgumentsHash::of(i.to_string().as_bytes()),
            definition_hash: None,
            issue: None,
        }
    }

    #[actix_rt::test]
    async fn every_record_is_written_in_batches_and_close_flushes_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open_in_dir(dir.path()).unwrap();
        let writer = AuditWriter::spawn(Arc::new(store.clone()));
        // More than one batch's worth, some while a batch is filling.
        let total = BATCH_MAX + 150;
        for i in 0..BATCH_MAX + 100 {
            writer.record(record(i));
        }
        tokio::time::sleep(BATCH_WAIT / 2).await;
        for i in BATCH_MAX + 100..total {
            writer.record(record(i));
        }
        writer.close().await;
        assert_eq!(writer.written(), total as u64);
        assert_eq!(writer.lost(), 0);
        let mut stored = 0;
        for run in 0..RUNS {
            stored += store
                .list_audit(
                    &TenantId::parse("acme").unwrap(),
                    &AuditQuery {
                        run: Some(RunId::parse(format!("audited-{run}")).unwrap()),
                        limit: corkboard_store_sqlite::AUDIT_PAGE_MAX,
                        ..AuditQuery::default()
                    },
                )
                .await
                .unwrap()
                .len();
        }
        assert_eq!(stored, total);
        // After close, a record is refused loudly (counted), not dropped silently.
        writer.record(record(0));
        assert_eq!(writer.lost(), 1);
    }
}
