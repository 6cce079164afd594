//! The audit writer: tool calls hand records over without waiting, and a
//! background task writes them to the store in batches, so auditing stays
//! on under load.
//!
//! Nothing is dropped silently: if the queue is full (the store is far
//! behind) or a batch cannot be written after retries, the loss is counted
//! and logged at error level.

use corkboard_board::{AuditLog, AuditRecord};
use corkboard_tools::AuditSink;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::{Notify, mpsc};

/// Records queued before `record` starts refusing.
const QUEUE_CAPACITY: usize = 65_536;
/// Largest batch written in one store call: one store write holds up the
/// issue writes queued behind it for about a millisecond at most.
const BATCH_MAX: usize = 128;
/// How long records gather before they are written (in `BATCH_MAX`
/// pieces). Every tool call, reads included, is audited: waking up less
/// often means fewer, fuller writes under load.
const BATCH_WAIT: Duration = Duration::from_millis(200);
/// Attempts per batch before its records are reported lost.
const ATTEMPTS: u32 = 5;

#[derive(Debug)]
pub struct AuditWriter {
    tx: mpsc::Sender<AuditRecord>,
    shutdown: Arc<Notify>,
    written: Arc<AtomicU64>,
    lost: Arc<AtomicU64>,
    done: tokio::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl AuditWriter {
    /// Starts the background writer on the current tokio runtime.
    pub fn spawn(log: Arc<dyn AuditLog>) -> Arc<Self> {
        let (tx, rx) = mpsc::channel(QUEUE_CAPACITY);
        let shutdown = Arc::new(Notify::new());
        let written = Arc::new(AtomicU64::new(0));
        let lost = Arc::new(AtomicU64::new(0));
        let task = tokio::spawn(write_loop(
            log,
            rx,
            shutdown.clone(),
            written.clone(),
            lost.clone(),
        ));
        Arc::new(Self {
            tx,
            shutdown,
            written,
            lost,
            done: tokio::sync::Mutex::new(Some(task)),
        })
    }

    /// Records written so far.
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }

    /// Records that could not be written (queue full or store failing).
    pub fn lost(&self) -> u64 {
        self.lost.load(Ordering::Relaxed)
    }

    /// Writes everything queued, then stops the background task.
    pub async fn close(&self) {
        self.shutdown.notify_one();
        if let Some(task) = self.done.lock().await.take() {
            let _ = task.await;
        }
    }
}

impl AuditSink for AuditWriter {
    fn record(&self, record: AuditRecord) {
        if let Err(err) = self.tx.try_send(record) {
            self.lost.fetch_add(1, Ordering::Relaxed);
            let why = match err {
                mpsc::error::TrySendError::Full(_) => "audit queue full",
                mpsc::error::TrySendError::Closed(_) => "audit writer stopped",
            };
            tracing::error!(reason = why, "audit record lost");
        }
    }
}

async fn write_loop(
    log: Arc<dyn AuditLog>,
    mut rx: mpsc::Receiver<AuditRecord>,
    shutdown: Arc<Notify>,
    written: Arc<AtomicU64>,
    lost: Arc<AtomicU64>,
) {
    let mut batch = Vec::with_capacity(BATCH_MAX);
    let mut stopping = false;
    loop {
        if !stopping {
            // Wait for the first record of a batch...
            tokio::select! {
                received = rx.recv() => match received {
                    Some(record) => batch.push(record),
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
                    Ok(record) => batch.push(record),
                    Err(_) => break,
                }
            }
            if batch.is_empty() {
                break;
            }
            write_batch(&*log, &mut batch, &written, &lost).await;
        }
        if stopping {
            return;
        }
    }
}

async fn write_batch(
    log: &dyn AuditLog,
    batch: &mut Vec<AuditRecord>,
    written: &AtomicU64,
    lost: &AtomicU64,
) {
    let mut delay = Duration::from_millis(100);
    for attempt in 1..=ATTEMPTS {
        match log.append_audit(batch).await {
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
            Err(err) => {
                tracing::error!(error = %err, records = batch.len(), "audit batch lost after retries");
            }
        }
    }
    lost.fetch_add(batch.len() as u64, Ordering::Relaxed);
    batch.clear();
}

#[cfg(test)]
mod tests {
    use super::*;
    use corkboard_board::{
        ArgumentsHash, AuditOutcome, AuditQuery, GrantId, RunId, TenantId, Timestamp,
    };
    use corkboard_store_sqlite::SqliteStore;

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
            issue: None,
        }
    }

    #[tokio::test]
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
