//! The embedded board store: every board trait on one SQLite file, and
//! the audit records on a second.
//!
//! Design, in short:
//! - **One file, WAL, `synchronous=FULL`.** An acknowledged write has been
//!   fsynced; readers never block the writer.
//! - **Audit records in a file of their own** (`board.audit.sqlite3` next to
//!   `board.sqlite3`, with a writer thread of its own): every tool call,
//!   reads included, leaves one, and in the board file each batch moved
//!   the WAL index every kept answer is checked against and queued behind
//!   issue writes. Its commits sync about once a second
//!   (`writer::AUDIT_SYNC_EVERY`): a process that dies loses none of them,
//!   a power cut at most about a second's.
//! - **One writer thread per process** owns the only writing connection. It
//!   commits whatever is queued as one `BEGIN IMMEDIATE` transaction (group
//!   commit: one fsync per group, not per write). One failure fails only
//!   that write: a group whose write fails is rolled back and run again
//!   with each write in a savepoint of its own.
//! - **Several processes** may write the same file: `BEGIN IMMEDIATE` takes
//!   the file's write lock up front (no lock upgrades, no deadlocks), waits
//!   through `busy_timeout`, and a group still locked out after a bounded
//!   number of retries is answered `Unavailable`. Read-modify-write
//!   operations (updates, idempotent creates) read under that lock, so they
//!   are atomic across processes.
//! - **Reads** use two small pools of connections. Point reads (an issue, a
//!   grant, an unfiltered page) have their own: the lookups run right on the
//!   calling thread when a connection is free, pages on tokio's blocking
//!   pool. Expensive reads (searches, filtered pages: `ReadCost`) run on the
//!   search readers, at most `ExpensiveReads::per_tenant` per tenant, and
//!   are interrupted at their deadline by SQLite's progress handler. A read
//!   of several statements runs in one read transaction (a consistent
//!   snapshot). A tenant's epoch (what kept answers are checked against)
//!   needs no transaction while nothing has committed since it was read:
//!   the WAL index's header, read with one `pread`, tells (`wal_watch.rs`).
//! - Every filter of a list runs in SQL; statements are prepared once per
//!   connection and cached.
//!
//! In detail: The embedded store: one SQLite file (WAL, `synchronous=FULL`)
//! and the audit file (its commits synced about once a second), one writer
//! thread per file with group commit
//! (ops run together, and again each in its savepoint when one fails; the
//! full-text index's changes written as pending rows with their op and moved
//! into the index about every 25 ms and before a search of their tenant,
//! `search_writes.rs`, because FTS5 writes a new index segment at every
//! commit, savepoint and statement transaction), two reader pools (point reads,
//! inline on the calling thread when they can; expensive reads, under their
//! tenant's share and deadline; `readers.rs`); each tenant's open titles in
//! memory, kept by the writer, for the look-up after every create
//! (`open_titles.rs`); the SQL in `ops/`, one
//! module per aggregate as in `store-mongo` (issues, comments, claims, search,
//! ledger, policy, audit, keys, webhooks, upstreams), each write a typed op
//! (`WriteOp` and its `Output`) that the writer runs type-erased and answers on
//! its caller's typed channel after the commit; safe for several processes on
//! one file; the directory is created 0700 and the file 0600 before SQLite
//! opens it, so its WAL and SHM are 0600 too (`files.rs`).

#![forbid(unsafe_code)]

mod codec;
mod error;
mod files;
mod open_titles;
mod ops;
mod options;
mod query;
mod readers;
mod schema;
mod search_writes;
mod store;
mod wal_watch;
mod writer;

pub use error::SqliteError;
pub use open_titles::OpenTitleBounds;
pub use options::SqliteOptions;
pub use store::{AUDIT_FILE_NAME, AUDIT_PAGE_MAX, FILE_NAME, SqliteStore};
pub use writer::WriteStats;
