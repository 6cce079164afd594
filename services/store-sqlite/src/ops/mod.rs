//! The SQL of every operation, one module per aggregate (as the MongoDB
//! store splits its own).
//!
//! Reads are plain functions on a pooled read connection (see
//! [`crate::readers`] for their transactions). Writes are values
//! implementing [`WriteOp`]: the writer thread runs each on its own
//! connection inside its group transaction (in a savepoint of its own when
//! the group runs again after a failure, see [`crate::writer`]): a failed
//! op leaves nothing behind, and the writer hands its caller exactly the op's
//! [`WriteOp::Output`].

pub(crate) mod approvals;
pub(crate) mod audit;
pub(crate) mod claims;
pub(crate) mod comments;
pub(crate) mod history;
pub(crate) mod issues;
pub(crate) mod keys;
pub(crate) mod ledger;
pub(crate) mod policy;
pub(crate) mod search;
pub(crate) mod upstreams;
pub(crate) mod webhooks;

use crate::error::OpError;
use rusqlite::Connection;

/// One write, as queued for the writer thread.
///
/// Owned and re-runnable: when a whole group has to be retried (the file
/// was busy), each op runs again from scratch, so ids and timestamps are
/// made in [`WriteOp::run`], not when the op is built. The webhook outbox
/// rows a write causes are queued by its `run` too (see [`webhooks`]), so
/// they commit with it or not at all.
pub(crate) trait WriteOp: Send + 'static {
    /// What the caller gets back once the write has committed.
    type Output: Send + 'static;

    /// The operation's name, for diagnostics (never its content).
    const NAME: &'static str;

    /// Audit records: written by the audit file's writer, which syncs its
    /// commits about once a second (see the writer's durability), not the
    /// board's.
    const AUDIT: bool = false;

    /// Runs the write on the writer's connection, inside the group's
    /// transaction; an `Err` undoes everything it wrote (the group's
    /// rollback or the op's savepoint).
    fn run(&self, conn: &Connection) -> Result<Self::Output, OpError>;
}
