//! Where audit records go. Every surface that serves calls (the board's
//! tools, upstream calls) only hands records over; batching and
//! persistence belong to whoever implements [`AuditSink`].

use crate::audit::AuditRecord;
use std::sync::Mutex;

/// Receives one record per tool call.
///
/// `record` is called on the request path, so it must not block or wait on
/// IO: queue the record (e.g. into a bounded channel drained by a batching
/// writer) and return.
pub trait AuditSink: Send + Sync + 'static {
    fn record(&self, record: AuditRecord);
}

/// Drops every record (for setups that audit elsewhere, and for benchmarks).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopAuditSink;

impl AuditSink for NoopAuditSink {
    fn record(&self, _record: AuditRecord) {}
}

/// Keeps every record in memory, in call order. For tests and diagnostics;
/// it grows without bound.
#[derive(Debug, Default)]
pub struct MemoryAuditSink {
    records: Mutex<Vec<AuditRecord>>,
}

impl MemoryAuditSink {
    pub fn new() -> Self {
        Self::default()
    }

    /// A copy of every record so far.
    pub fn records(&self) -> Vec<AuditRecord> {
        self.lock().clone()
    }

    /// Removes and returns every record so far.
    pub fn take(&self) -> Vec<AuditRecord> {
        std::mem::take(&mut *self.lock())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<AuditRecord>> {
        // A panic while pushing cannot leave the Vec half-written.
        self.records
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl AuditSink for MemoryAuditSink {
    fn record(&self, record: AuditRecord) {
        self.lock().push(record);
    }
}
