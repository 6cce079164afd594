//! Tuning knobs, with defaults that suit a laptop and a small server alike.

use crate::open_titles::OpenTitleBounds;
use corkboard_board::ExpensiveReads;
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
    /// Read connections for point reads (an issue, a grant, an unfiltered
    /// page), each used by one read at a time. Expensive reads never take
    /// them, so a point read waits only behind other point reads.
    pub point_readers: usize,
    /// Read connections for expensive reads (searches, filtered lists,
    /// see `corkboard_board::ReadCost`) and the admin listings that may
    /// scan. One tenant holds at most `expensive.per_tenant()` of them.
    pub search_readers: usize,
    /// The deadline of each expensive read and each tenant's share of them.
    pub expensive: ExpensiveReads,
    /// Writes that may wait for the writer thread; callers beyond it wait
    /// for room (backpressure) rather than growing memory.
    pub queue_capacity: usize,
    /// Most writes committed in one transaction (one fsync).
    pub max_group: usize,
    /// Longest a caller waits for any answer; past it the call is
    /// `Unavailable`, or `OutcomeUnknown` for a write the writer already
    /// had (it may or may not have been applied).
    pub operation_timeout: Duration,
    /// How much of the tenants' open titles the similar look-up holds in
    /// memory (open_titles.rs).
    pub open_titles: OpenTitleBounds,
    /// At most this long between two moves of the full-text index's
    /// pending rows into the index while writes keep coming
    /// (search_writes.rs); a search moves them at once, so it bounds the
    /// work a search after a burst of writes waits for, not what it sees.
    /// It also bounds the move itself, which the writes of its group (and
    /// every write queued behind it) wait for: at about 6,000 creates a
    /// second, moves every 250 ms put the p99 of creates at about 30 ms,
    /// moves every 25 ms at about 24 ms (none during the run: about 20),
    /// for about 1% more of the writer's instructions
    /// (services/bench/FINDINGS.md).
    pub search_index_every: Duration,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        Self {
            busy_timeout: Duration::from_secs(5),
            busy_attempts: 3,
            point_readers: 4,
            search_readers: 4,
            expensive: ExpensiveReads::default(),
            queue_capacity: 1024,
            max_group: 128,
            operation_timeout: Duration::from_secs(30),
            open_titles: OpenTitleBounds::default(),
            search_index_every: Duration::from_millis(25),
        }
    }
}
