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
/// Largest batch written in one store call.
const BATCH_MAX: usize = 512;
/// How long a partial batch may wait for company.
const BATCH_WAIT: Duration = Duration::from_millis(50);
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
        if batch.is_empty() && !stopping {
            tokio::select! {
                received = rx.recv() => match received {
                    Some(record) => batch.push(record),
                    None => stopping = true,
                },
                () = shutdown.notified() => stopping = true,
            }
        }
        // Gather what is already queued, waiting briefly for a fuller batch.
        let deadline = tokio::time::Instant::now() + BATCH_WAIT;
        while batch.len() < BATCH_MAX {
            match rx.try_recv() {
                Ok(record) => batch.push(record),
                Err(_) if stopping => break,
                Err(_) => match tokio::time::timeout_at(deadline, rx.recv()).await {
                    Ok(Some(record)) => batch.push(record),
                    Ok(None) => {
                        stopping = true;
                        break;
                    }
                    Err(_) => break,
                },
            }
        }
        if !batch.is_empty() {
            write_batch(&*log, &mut batch, &written, &lost).await;
        }
        if stopping && rx.is_empty() {
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
