//! Tuning knobs, with defaults that suit a laptop and a small server alike.

use std::time::Duration;

/// How a [`crate::SqliteStore`] uses its file.
#[derive(Debug, Clone)]
pub struct SqliteOptions {
    /// How long one connection waits for another (maybe in another process)
    /// to release the write lock before SQLite reports it busy.
    pub busy_timeout: Duration,
    /// How many times a write group that found the file busy is retried
    /// (each attempt waiting up to `busy_timeout`) before its callers get
    /// `StoreError::Unavailable`.
    pub busy_attempts: u32,
    /// Read connections, each used by one read at a time.
    pub readers: usize,
    /// Writes that may wait for the writer thread; callers beyond it wait
    /// for room (backpressure) rather than growing memory.
    pub queue_capacity: usize,
    /// Most writes committed in one transaction (one fsync).
    pub max_group: usize,
    /// Longest a caller waits for any answer; past it the call is
    /// `Unavailable`, or `OutcomeUnknown` for a write the writer already
    /// had (it may or may not have been applied).
    pub operation_timeout: Duration,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        Self {
            busy_timeout: Duration::from_secs(5),
            busy_attempts: 3,
            readers: 4,
            queue_capacity: 1024,
            max_group: 128,
            operation_timeout: Duration::from_secs(30),
        }
    }
}
