//! The writer thread: the only connection of this process that writes its
//! file (one for the board file, one for the audit file; [`Keeps`]).
//!
//! Callers queue [`WriteOp`]s on a bounded channel and wait on a oneshot
//! typed by the op's output (the channel carries them type-erased, as
//! [`Job`]s).
//! The thread takes everything queued (up to `max_group`) and commits it in
//! one `BEGIN IMMEDIATE` transaction, so one fsync serves the whole group;
//! while it syncs, the next group queues up. One op's failure (not found,
//! conflict, constraint) fails only that op: a group first runs its ops
//! one after another with nothing between them ([`Isolation::Together`]);
//! if one fails, the group is rolled back and run again with each op in a
//! savepoint of its own ([`Isolation::EachOp`]), which rolls back only the
//! failed one. A group of one op needs no second run: its failure is its
//! answer ([`Isolation::Alone`]). Failures are rare, and a savepoint per op
//! costs every op a copy of each page it touches (SQLite's statement
//! journal), about a tenth of the writer's time under a load of creates.
//! Answers are sent only after `COMMIT` succeeded: an acknowledged write
//! is durable.
//!
//! The audit file's groups commit with `synchronous=NORMAL`, except one
//! about every [`AUDIT_SYNC_EVERY`] while records keep coming: in WAL mode
//! NORMAL skips the commit's fsync, and the records become durable with the
//! next synced commit or checkpoint (which syncs the whole log, earlier
//! frames included). They survive the process dying at once; only a power
//! cut or kernel crash can take the newest of them, about a second's at
//! most. Every tool call, reads included, is audited: an fsync per audit
//! batch was the largest single cost of a read under load. The board
//! file's commits always sync.
//!
//! The open titles the similar look-up holds in memory follow the commits
//! (open_titles.rs): a group first checks whether another writer changed
//! issues since (and drops them if so), reads what its own ops changed
//! just before `COMMIT`, and changes them once `COMMIT` succeeded, before
//! any caller is answered.
//!
//! The full-text index's pending rows (search_writes.rs) go in at the end
//! of the first group at least `search_index_every` after the board writer
//! last moved them, before its `COMMIT`; a search has them moved at once.
//!
//! The epoch that tells readers a tenant's board changed (`tenant_epoch`,
//! for the answers `get_issue` and `list_issues` keep) is moved by
//! triggers in the same transaction, not by the writer (schema.rs,
//! migration 22).
//!
//! Other processes writing the same file take the same lock; waiting for it
//! is SQLite's busy handler (`busy_timeout`), and a group that still finds
//! the file busy is retried whole a bounded number of times before its
//! callers get `Unavailable`.

use crate::error::{OpError, is_busy, store_error};
use crate::open_titles::{self, OpenTitles, Pending, Watch};
use crate::ops::WriteOp;
use crate::search_writes;
use corkboard_board::StoreError;
use rusqlite::Connection;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

/// What the caller of op `O` gets back.
pub(crate) type Reply<O> = Result<<O as WriteOp>::Output, StoreError>;

/// One queued write, whatever its op: one channel carries every kind.
pub(crate) type WriteJob = Box<dyn Job>;

/// A queued write with its output type erased. A group runs each of its
/// jobs ([`Job::run`]), and only once the group has committed does it
/// send each job's answer ([`Job::answer`]); a group that fails as a
/// whole answers every job with its error instead ([`Job::fail`]).
pub(crate) trait Job: Send {
    /// The op's name, for diagnostics.
    fn name(&self) -> &'static str;
    /// Whether the caller stopped waiting for the answer.
    fn is_abandoned(&self) -> bool;
    /// Runs the op (see [`run_one`]) and keeps its answer for
    /// [`Job::answer`], replacing an earlier attempt's. `Ok(false)`: the op
    /// failed (its error is the answer kept). `Err`: the group's
    /// transaction cannot go on.
    fn run(&mut self, conn: &Connection, isolation: Isolation) -> Result<bool, rusqlite::Error>;
    /// Sends the answer the last run kept (the group has committed).
    fn answer(self: Box<Self>);
    /// Answers `error` (nothing of the group was committed).
    fn fail(self: Box<Self>, error: StoreError);
}

/// The only [`Job`]: an op, its caller's typed reply channel, and the
/// answer its last run kept.
struct Queued<O: WriteOp> {
    op: O,
    reply: oneshot::Sender<Reply<O>>,
    answer: Option<Reply<O>>,
}

/// Wraps `op` as a job for the writer's queue, with the receiver its
/// answer will come on.
pub(crate) fn job<O: WriteOp>(op: O) -> (WriteJob, oneshot::Receiver<Reply<O>>) {
    let (reply, answer) = oneshot::channel();
    let job = Queued {
        op,
        reply,
        answer: None,
    };
    (Box::new(job), answer)
}

impl<O: WriteOp> Job for Queued<O> {
    fn name(&self) -> &'static str {
        O::NAME
    }

    fn is_abandoned(&self) -> bool {
        self.reply.is_closed()
    }

    fn run(&mut self, conn: &Connection, isolation: Isolation) -> Result<bool, rusqlite::Error> {
        let answer = run_one(conn, &self.op, isolation)?;
        let succeeded = answer.is_ok();
        self.answer = Some(answer);
        Ok(succeeded)
    }

    fn answer(self: Box<Self>) {
        let Self { reply, answer, .. } = *self;
        // A committed group ran every one of its jobs; an answer missing
        // here would be a writer bug, told as such rather than dropped.
        let answer = answer.unwrap_or_else(|| {
            Err(StoreError::Internal(format!(
                "the SQLite writer committed a group without running its {}",
                O::NAME
            )))
        });
        let _ = reply.send(answer);
    }

    fn fail(self: Box<Self>, error: StoreError) {
        let _ = self.reply.send(Err(error));
    }
}

/// Counters the writer keeps, for metrics and benchmarks.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    groups: AtomicU64,
    writes: AtomicU64,
    reruns: AtomicU64,
}

/// What the writer thread has done since the store was opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WriteStats {
    /// Transactions committed or attempted (one fsync each when committed).
    pub groups: u64,
    /// Writes taken from the queue (answered, or skipped because the caller
    /// had stopped waiting).
    pub writes: u64,
    /// Groups run a second time, each op in its own savepoint, because one
    /// of their ops failed when they ran together.
    pub reruns: u64,
}

impl Counters {
    pub(crate) fn snapshot(&self) -> WriteStats {
        WriteStats {
            groups: self.groups.load(Ordering::Relaxed),
            writes: self.writes.load(Ordering::Relaxed),
            reruns: self.reruns.load(Ordering::Relaxed),
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct GroupPolicy {
    pub max_group: usize,
    pub busy_attempts: u32,
}

/// What a writer keeps in step with its file besides the file itself.
pub(crate) enum Keeps {
    /// The board file's writer: the open titles in memory, and when the
    /// full-text index's pending rows last went in (search_writes.rs).
    Board(Titles),
    /// The audit file's writer: when its commits last synced.
    Audit(AuditSync),
}

impl Keeps {
    /// Sets the connection up for the next group: the board's stays on
    /// `synchronous=FULL` (an acknowledged write has been fsynced); the
    /// audit file's syncs about once per [`AUDIT_SYNC_EVERY`].
    fn prepare(&mut self, conn: &Connection) -> Result<(), rusqlite::Error> {
        match self {
            Self::Board(_) => Ok(()),
            Self::Audit(sync) => sync.prepare(conn),
        }
    }

    /// Before a group's ops: whether another writer changed issues.
    fn check(&mut self, conn: &Connection) -> Result<(), rusqlite::Error> {
        match self {
            Self::Board(titles) => titles.index.check(conn, &mut titles.watch),
            Self::Audit(_) => Ok(()),
        }
    }

    /// After a group's ops, before its commit: the open titles' changes,
    /// for [`Keeps::committed`].
    fn collect(&self, conn: &Connection) -> Result<Pending, rusqlite::Error> {
        match self {
            Self::Board(titles) => open_titles::collect(conn, &titles.index),
            Self::Audit(_) => Ok(Pending::default()),
        }
    }

    /// Ends a group whose ops have all run: the full-text index's pending
    /// rows go in after the last op when they are due (search_writes.rs),
    /// then the commit.
    fn end_group(&mut self, conn: &Connection) -> Result<(), rusqlite::Error> {
        if let Self::Board(titles) = self
            && titles.index_rows.due()
        {
            search_writes::apply(conn)?;
            // Noted before the commit: if it fails, the rows stay pending
            // until the next move or search, as any rows do.
            titles.index_rows.moved_at = Instant::now();
        }
        run_statement(conn, "COMMIT")
    }

    /// Once the group has committed, before any caller is answered: the
    /// look-up after a create sees it.
    fn committed(&mut self, pending: Pending) {
        match self {
            Self::Board(titles) => titles.index.apply(pending, &mut titles.watch),
            Self::Audit(sync) => sync.committed(),
        }
    }
}

/// The in-memory open titles the writer keeps in step with its commits
/// (open_titles.rs), what it last saw of other writers, and when it last
/// moved the full-text index's pending rows.
pub(crate) struct Titles {
    index: Arc<OpenTitles>,
    watch: Watch,
    index_rows: IndexRows,
}

impl Titles {
    /// `index_every`: `SqliteOptions::search_index_every`.
    pub(crate) fn new(index: Arc<OpenTitles>, index_every: Duration) -> Self {
        Self {
            index,
            watch: Watch::default(),
            index_rows: IndexRows::every(index_every),
        }
    }
}

/// When the board's writer moves the full-text index's pending rows in:
/// at the end of the first group at least `every` after the last move.
struct IndexRows {
    every: Duration,
    moved_at: Instant,
}

impl IndexRows {
    fn every(every: Duration) -> Self {
        Self {
            every,
            moved_at: Instant::now(),
        }
    }

    fn due(&self) -> bool {
        self.moved_at.elapsed() >= self.every
    }
}

/// Starts the writer thread; it stops when every sender is dropped.
pub(crate) fn spawn(
    conn: Connection,
    capacity: usize,
    policy: GroupPolicy,
    counters: Arc<Counters>,
    keeps: Keeps,
) -> std::io::Result<mpsc::Sender<WriteJob>> {
    let (tx, rx) = mpsc::channel(capacity.max(1));
    // Named by the file's role, not its name: Linux keeps a thread's first
    // 15 bytes (`top -H`, `ps -L`), and `sqlite-writer:board.sqlite3` and
    // `sqlite-writer:board.audit.sqlite3` both showed as `sqlite-writer:b`.
    let name = match &keeps {
        Keeps::Board(_) => "sqlite-board",
        Keeps::Audit(_) => "sqlite-audit",
    };
    thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || run(conn, rx, policy, &counters, keeps))?;
    Ok(tx)
}

fn run(
    conn: Connection,
    mut rx: mpsc::Receiver<WriteJob>,
    policy: GroupPolicy,
    counters: &Counters,
    mut keeps: Keeps,
) {
    let max_group = policy.max_group.max(1);
    while let Some(first) = rx.blocking_recv() {
        let mut jobs = Vec::with_capacity(max_group.min(16));
        jobs.push(first);
        while jobs.len() < max_group {
            match rx.try_recv() {
                Ok(job) => jobs.push(job),
                Err(_) => break,
            }
        }
        counters
            .writes
            .fetch_add(jobs.len() as u64, Ordering::Relaxed);
        commit_group(&conn, jobs, policy, &mut keeps, counters);
    }
    // Every store handle is gone: fold the WAL back into the file so the
    // next opener starts from a short log. Failing here loses nothing.
    if let Err(err) = conn.execute_batch("PRAGMA wal_checkpoint(PASSIVE)") {
        tracing::debug!(error = %err, "final WAL checkpoint skipped");
    }
}

/// The writer connection's `synchronous` setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Durability {
    /// Every commit fsyncs the log: what an acknowledged write needs.
    Full,
    /// Commits do not fsync (WAL mode): audit groups between syncs.
    Normal,
}

/// At most this long between two synced commits of the audit file while
/// records keep coming: a power cut loses at most about this much of them.
pub(crate) const AUDIT_SYNC_EVERY: Duration = Duration::from_secs(1);

/// The audit writer's durability: which `synchronous` its connection is
/// on, and when a commit last synced.
pub(crate) struct AuditSync {
    current: Durability,
    synced_at: Instant,
}

impl AuditSync {
    /// For a connection just opened (`synchronous=FULL`, schema.rs).
    pub(crate) fn new() -> Self {
        Self {
            current: Durability::Full,
            synced_at: Instant::now(),
        }
    }

    /// Sets the connection up for the next group (outside a transaction):
    /// it syncs when the last synced commit is [`AUDIT_SYNC_EVERY`] old.
    fn prepare(&mut self, conn: &Connection) -> Result<(), rusqlite::Error> {
        let wanted = if self.synced_at.elapsed() >= AUDIT_SYNC_EVERY {
            Durability::Full
        } else {
            Durability::Normal
        };
        if self.current != wanted {
            run_statement(
                conn,
                match wanted {
                    Durability::Full => "PRAGMA synchronous = FULL",
                    Durability::Normal => "PRAGMA synchronous = NORMAL",
                },
            )?;
            self.current = wanted;
        }
        Ok(())
    }

    /// A group committed.
    fn committed(&mut self) {
        if self.current == Durability::Full {
            self.synced_at = Instant::now();
        }
    }
}

/// How a group's ops run in its transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Isolation {
    /// The group's only op, with nothing around it: its failure is its
    /// answer (the group is rolled back and commits nothing, as a
    /// savepoint's rollback would have left it).
    Alone,
    /// One after another, nothing between them: the first failure ends the
    /// attempt (the group is rolled back, and run again
    /// [`Isolation::EachOp`]).
    Together,
    /// Each op in a savepoint of its own, so a failed op is rolled back
    /// alone and the others commit.
    EachOp,
}

/// Commits `jobs` as one transaction and answers each caller (counted in
/// `counters` when a transaction was attempted at all).
fn commit_group(
    conn: &Connection,
    jobs: Vec<WriteJob>,
    policy: GroupPolicy,
    keeps: &mut Keeps,
    counters: &Counters,
) {
    // A caller that stopped waiting (timed out, cancelled) was told the
    // write may or may not happen; not doing it saves work under overload.
    let mut jobs: Vec<WriteJob> = jobs.into_iter().filter(|job| !job.is_abandoned()).collect();
    if jobs.is_empty() {
        return;
    }
    counters.groups.fetch_add(1, Ordering::Relaxed);
    let mut attempt = 0;
    let mut isolation = if jobs.len() == 1 {
        Isolation::Alone
    } else {
        Isolation::Together
    };
    loop {
        attempt += 1;
        let prepared = keeps.prepare(conn);
        match prepared.and_then(|()| try_group(conn, &mut jobs, keeps, isolation)) {
            Ok(Some(pending)) => {
                keeps.committed(pending);
                for job in jobs {
                    job.answer();
                }
                return;
            }
            Ok(None) => {
                // An op failed among others: run them again, each alone in
                // its savepoint. Not a busy retry: `attempt` is not spent.
                attempt -= 1;
                isolation = Isolation::EachOp;
                counters.reruns.fetch_add(1, Ordering::Relaxed);
            }
            Err(err) if is_busy(&err) && attempt < policy.busy_attempts => {
                tracing::debug!(
                    attempt,
                    size = jobs.len(),
                    "SQLite board busy; retrying the write group"
                );
                thread::sleep(Duration::from_millis(10 * u64::from(attempt)));
            }
            Err(err) => {
                let answer = store_error(&err);
                tracing::warn!(
                    error = %err,
                    size = jobs.len(),
                    ops = ?jobs.iter().map(|j| j.name()).collect::<Vec<_>>(),
                    "SQLite write group failed"
                );
                for job in jobs {
                    job.fail(answer.clone());
                }
                return;
            }
        }
    }
}

/// One attempt at the group; each job keeps its answer, and the open
/// titles' changes are returned for after the commit. `Ok(None)`: an op
/// failed while they ran [`Isolation::Together`] and the attempt was rolled
/// back, to be run [`Isolation::EachOp`]. `Err` means nothing of it was
/// committed.
fn try_group(
    conn: &Connection,
    jobs: &mut [WriteJob],
    keeps: &mut Keeps,
    isolation: Isolation,
) -> Result<Option<Pending>, rusqlite::Error> {
    run_statement(conn, "BEGIN IMMEDIATE")?;
    let attempt = keeps.check(conn).and_then(|()| {
        for job in jobs.iter_mut() {
            if !job.run(conn, isolation)? && isolation != Isolation::EachOp {
                return Ok(None);
            }
        }
        keeps.collect(conn).map(Some)
    });
    match attempt {
        Ok(Some(pending)) => match keeps.end_group(conn) {
            Ok(()) => Ok(Some(pending)),
            Err(err) => {
                rollback(conn);
                Err(err)
            }
        },
        Ok(None) => {
            // The failed op's partial writes go with the rollback; so do the
            // ops before it, which a rerun does again. An op alone has its
            // answer, and nothing to commit.
            rollback(conn);
            Ok((isolation == Isolation::Alone).then(Pending::default))
        }
        Err(err) => {
            rollback(conn);
            Err(err)
        }
    }
}

/// Runs one op, in a savepoint of its own when `isolation` is
/// [`Isolation::EachOp`]. `Ok(Err(_))`: the op failed (rolled back to its
/// savepoint, or else left for the group's rollback); `Err(_)`: the
/// group's transaction cannot go on.
fn run_one<O: WriteOp>(
    conn: &Connection,
    op: &O,
    isolation: Isolation,
) -> Result<Reply<O>, rusqlite::Error> {
    let savepoint = isolation == Isolation::EachOp;
    if savepoint {
        run_statement(conn, "SAVEPOINT op")?;
    }
    match op.run(conn) {
        Ok(output) => {
            if savepoint {
                run_statement(conn, "RELEASE op")?;
            }
            Ok(Ok(output))
        }
        Err(OpError::Store(err)) => {
            if savepoint {
                undo_savepoint(conn)?;
            }
            Ok(Err(err))
        }
        Err(OpError::Sqlite(err)) => {
            // SQLite may have rolled the whole transaction back itself (I/O
            // error, full disk); then the ops before this one are gone too.
            if conn.is_autocommit() || is_busy(&err) {
                return Err(err);
            }
            if savepoint {
                undo_savepoint(conn)?;
            }
            // Together, the op runs again in its savepoint and says so then.
            if isolation != Isolation::Together {
                tracing::warn!(op = O::NAME, error = %err, "SQLite write failed");
            }
            Ok(Err(store_error(&err)))
        }
    }
}

fn undo_savepoint(conn: &Connection) -> Result<(), rusqlite::Error> {
    run_statement(conn, "ROLLBACK TO op")?;
    run_statement(conn, "RELEASE op")
}

fn rollback(conn: &Connection) {
    if !conn.is_autocommit()
        && let Err(err) = run_statement(conn, "ROLLBACK")
    {
        tracing::warn!(error = %err, "rolling back a failed write group failed");
    }
}

fn run_statement(conn: &Connection, sql: &str) -> Result<(), rusqlite::Error> {
    conn.prepare_cached(sql)?.execute([])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::audit::AppendAudit;
    use crate::ops::comments::AddComment;
    use crate::ops::issues::{CreateIssue, SeedIssues, UpdateIssue};
    use crate::ops::search;
    use crate::schema;
    use corkboard_board::{
        Author, Body, CommentBody, Created, IssueId, IssuePatch, NewComment, NewIssue, RunId,
        TenantId, Title, normalized,
    };

    /// The group policy of the tests that run groups by hand.
    const POLICY: GroupPolicy = GroupPolicy {
        max_group: 8,
        busy_attempts: 1,
    };

    /// A board writer's keeps, with no open titles held, that moves the
    /// index's pending rows at the end of every group.
    fn detached() -> Keeps {
        Keeps::Board(Titles::new(
            Arc::new(OpenTitles::new(Default::default())),
            Duration::ZERO,
        ))
    }

    fn writer_conn() -> (tempfile::TempDir, Connection) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.sqlite3");
        let conn = schema::open_writer(&path, &crate::SqliteOptions::default()).unwrap();
        (dir, conn)
    }

    fn author() -> Author {
        Author {
            kind: corkboard_board::AuthorKind::Run,
            run: RunId::parse("r").unwrap(),
            grant: None,
            integrity: corkboard_board::Integrity::Agent,
        }
    }

    fn create(title: &str) -> CreateIssue {
        let new = NewIssue::new(Title::parse(title).unwrap());
        CreateIssue::new(&TenantId::parse("t").unwrap(), &author(), new, None)
    }

    fn count(conn: &Connection) -> i64 {
        conn.query_row("SELECT count(*) FROM issues", [], |r| r.get(0))
            .unwrap()
    }

    /// A seed whose first issue (and its comment) is written before its
    /// second names a parent that does not exist: it fails half-way.
    fn failing_seed() -> SeedIssues {
        let orphan = NewIssue {
            parent: Some(IssueId::generate()),
            ..NewIssue::new(Title::parse("Orphan").unwrap())
        };
        SeedIssues {
            tenant: TenantId::parse("t").unwrap(),
            author: author(),
            items: vec![
                (
                    NewIssue::new(Title::parse("Never written").unwrap()),
                    Some(CommentBody::parse("never said").unwrap()),
                ),
                (orphan, None),
            ],
        }
    }

    fn comments(conn: &Connection) -> i64 {
        conn.query_row("SELECT count(*) FROM comments", [], |r| r.get(0))
            .unwrap()
    }

    #[test]
    fn index_rows_stay_pending_until_their_interval_or_a_search_moves_them() {
        let (_dir, conn) = writer_conn();
        let policy = POLICY;
        let counters = Counters::default();
        let mut keeps = Keeps::Board(Titles::new(
            Arc::new(OpenTitles::new(Default::default())),
            Duration::from_secs(3600),
        ));
        let pending = |conn: &Connection| -> i64 {
            conn.query_row("SELECT count(*) FROM search_pending", [], |r| r.get(0))
                .unwrap()
        };
        let group = |op: CreateIssue, keeps: &mut Keeps| {
            let (j, rx) = job(op);
            commit_group(&conn, vec![j], policy, keeps, &counters);
            assert!(rx.blocking_recv().unwrap().is_ok());
        };
        // Not due: the create commits, its index row stays pending. (The
        // check can fail: a writer moving them at every group leaves none.)
        group(create("Pending zebra"), &mut keeps);
        assert_eq!(pending(&conn), 1);
        assert!(search_rows(&conn).1.is_empty());
        // A search's write moves them at once.
        let (moved, moved_rx) = job(search::ApplyPendingIndexRows);
        commit_group(&conn, vec![moved], policy, &mut keeps, &counters);
        moved_rx.blocking_recv().unwrap().unwrap();
        assert_eq!(pending(&conn), 0);
        let (expected, actual) = search_rows(&conn);
        assert_eq!((actual.len(), &actual), (1, &expected));
        // Due: the first group after the interval moves its own and every
        // pending row, and the interval starts again from its commit.
        group(create("Waiting yak"), &mut keeps);
        assert_eq!(pending(&conn), 1);
        if let Keeps::Board(titles) = &mut keeps {
            titles.index_rows.moved_at = Instant::now()
                .checked_sub(Duration::from_secs(3601))
                .unwrap();
        }
        group(create("Due zebra"), &mut keeps);
        assert_eq!(pending(&conn), 0);
        let (expected, actual) = search_rows(&conn);
        assert_eq!((actual.len(), &actual), (3, &expected));
        group(create("Pending again"), &mut keeps);
        assert_eq!(pending(&conn), 1);
    }

    #[test]
    fn one_failing_op_does_not_fail_its_group() {
        let (_dir, conn) = writer_conn();
        let (a, a_rx) = job(create("first"));
        let (b, b_rx) = job(comment(&IssueId::generate(), "hi"));
        let (c, c_rx) = job(failing_seed());
        let (d, d_rx) = job(create("fourth"));
        let policy = POLICY;
        let counters = Counters::default();
        commit_group(&conn, vec![a, b, c, d], policy, &mut detached(), &counters);
        assert!(matches!(a_rx.blocking_recv().unwrap(), Ok(Created { .. })));
        assert!(matches!(
            b_rx.blocking_recv().unwrap(),
            Err(StoreError::NotFound { .. })
        ));
        assert!(c_rx.blocking_recv().unwrap().is_err());
        assert!(matches!(d_rx.blocking_recv().unwrap(), Ok(Created { .. })));
        // The seed's first issue and comment went with its failure.
        assert_eq!(count(&conn), 2);
        assert_eq!(comments(&conn), 0);
        assert_eq!(search_rows(&conn).1.len(), 2);
        assert!(conn.is_autocommit(), "the group transaction is closed");
        assert_eq!(
            counters.snapshot().reruns,
            1,
            "run together first, then each op in its savepoint"
        );
    }

    #[test]
    fn a_group_whose_ops_all_succeed_runs_once_and_a_lone_failure_is_its_answer() {
        let (_dir, conn) = writer_conn();
        let policy = POLICY;
        let counters = Counters::default();
        let (a, a_rx) = job(create("first"));
        let (b, b_rx) = job(create("second"));
        commit_group(&conn, vec![a, b], policy, &mut detached(), &counters);
        assert!(a_rx.blocking_recv().unwrap().is_ok());
        assert!(b_rx.blocking_recv().unwrap().is_ok());
        let (c, c_rx) = job(failing_seed());
        commit_group(&conn, vec![c], policy, &mut detached(), &counters);
        assert!(c_rx.blocking_recv().unwrap().is_err());
        assert_eq!(count(&conn), 2);
        assert_eq!(comments(&conn), 0);
        let (expected, actual) = search_rows(&conn);
        assert_eq!((actual.len(), actual), (2, expected));
        assert!(conn.is_autocommit(), "the group transaction is closed");
        assert_eq!(
            counters.snapshot(),
            WriteStats {
                groups: 2,
                writes: 0,
                reruns: 0,
            },
            "neither group is run a second time"
        );
    }

    #[test]
    fn a_busy_file_fails_the_group_as_unavailable_and_writes_nothing() {
        let (dir, conn) = writer_conn();
        conn.busy_timeout(Duration::from_millis(20)).unwrap();
        let other = Connection::open(dir.path().join("w.sqlite3")).unwrap();
        other.execute_batch("BEGIN IMMEDIATE").unwrap();
        let (a, a_rx) = job(create("blocked"));
        let policy = GroupPolicy {
            max_group: 8,
            busy_attempts: 2,
        };
        commit_group(
            &conn,
            vec![a],
            policy,
            &mut detached(),
            &Counters::default(),
        );
        let answer = a_rx.blocking_recv().unwrap();
        assert!(
            matches!(&answer, Err(StoreError::Unavailable { .. })),
            "{answer:?}"
        );
        other.execute_batch("ROLLBACK").unwrap();
        assert_eq!(count(&conn), 0);
    }

    #[test]
    fn queued_writes_commit_as_one_group() {
        let (_dir, conn) = writer_conn();
        let (tx, rx) = mpsc::channel(64);
        let mut answers = Vec::new();
        for i in 0..10 {
            let (job, answer) = job(create(&format!("queued {i}")));
            tx.try_send(job).unwrap();
            answers.push(answer);
        }
        drop(tx);
        let counters = Counters::default();
        let policy = GroupPolicy {
            max_group: 4,
            busy_attempts: 1,
        };
        let probe = Connection::open(conn.path().unwrap()).unwrap();
        run(conn, rx, policy, &counters, detached());
        for answer in answers {
            assert!(matches!(
                answer.blocking_recv().unwrap(),
                Ok(Created { .. })
            ));
        }
        assert_eq!(
            counters.snapshot(),
            WriteStats {
                groups: 3,
                writes: 10,
                reruns: 0,
            },
            "ten queued writes in groups of at most four"
        );
        assert_eq!(count(&probe), 10);
    }

    #[test]
    fn abandoned_jobs_are_skipped() {
        let (_dir, conn) = writer_conn();
        let (a, a_rx) = job(create("nobody waits"));
        drop(a_rx);
        commit_group(
            &conn,
            vec![a],
            POLICY,
            &mut detached(),
            &Counters::default(),
        );
        assert_eq!(count(&conn), 0);
    }

    #[test]
    fn a_job_answers_only_when_told_and_with_its_last_attempt() {
        let (_dir, conn) = writer_conn();
        let (mut a, mut a_rx) = job(create("retried"));
        // A first attempt that the group loses (as when the file is busy
        // later in the group): the op ran, its answer is kept, not sent.
        run_statement(&conn, "BEGIN IMMEDIATE").unwrap();
        a.run(&conn, Isolation::Alone).unwrap();
        assert!(a_rx.try_recv().is_err(), "nothing is sent before COMMIT");
        rollback(&conn);
        // The retry runs the op again; its answer replaces the first.
        run_statement(&conn, "BEGIN IMMEDIATE").unwrap();
        a.run(&conn, Isolation::EachOp).unwrap();
        detached().end_group(&conn).unwrap();
        assert!(a_rx.try_recv().is_err(), "nothing is sent until answered");
        a.answer();
        let created = a_rx.blocking_recv().unwrap().unwrap();
        let stored: String = conn
            .query_row("SELECT id FROM issues", [], |r| r.get(0))
            .unwrap();
        assert_eq!(created.issue.id.as_str(), stored);
        assert_eq!(count(&conn), 1);
    }

    fn synchronous(conn: &Connection) -> i64 {
        conn.query_row("PRAGMA synchronous", [], |r| r.get(0))
            .unwrap()
    }

    fn audit(n: usize) -> AppendAudit {
        use corkboard_board::{
            ArgumentsHash, AuditEntry, AuditOutcome, AuditRecord, GrantId, Timestamp,
        };
        AppendAudit {
            entries: (0..n)
                .map(|i| AuditRecord {
                    at: Timestamp::now(),
                    tenant: TenantId::parse("t").unwrap(),
                    run: RunId::parse("r").unwrap(),
                    grant: GrantId::generate(),
                    tool: "get_issue".to_owned(),
                    outcome: AuditOutcome::Ok,
                    latency_micros: 1,
                    arguments_hash: ArgumentsHash::of(&i.to_le_bytes()),
                    definition_hash: None,
                    issue: None,
                })
                .map(AuditEntry::new)
                .collect(),
        }
    }

    #[test]
    fn the_audit_writer_syncs_about_once_a_second_and_the_board_every_commit() {
        let dir = tempfile::tempdir().unwrap();
        let conn = schema::open_audit_writer(
            &dir.path().join("a.sqlite3"),
            &crate::SqliteOptions::default(),
        )
        .unwrap();
        let policy = POLICY;
        assert_eq!(synchronous(&conn), 2, "the writer opens with FULL");
        let mut keeps = Keeps::Audit(AuditSync::new());
        let group = |n: usize, keeps: &mut Keeps| {
            let (a, a_rx) = job(audit(n));
            commit_group(&conn, vec![a], policy, keeps, &Counters::default());
            assert!(a_rx.blocking_recv().unwrap().is_ok());
            synchronous(&conn)
        };
        assert_eq!(group(3, &mut keeps), 1, "synced just now: NORMAL");
        assert_eq!(group(2, &mut keeps), 1);
        // A second after the last synced commit, the next group syncs.
        let Keeps::Audit(sync) = &mut keeps else {
            unreachable!()
        };
        sync.synced_at -= AUDIT_SYNC_EVERY;
        assert_eq!(group(1, &mut keeps), 2, "a second since: FULL");
        assert_eq!(group(1, &mut keeps), 1, "and NORMAL after it");
        let audited: i64 = conn
            .query_row("SELECT count(*) FROM audit", [], |r| r.get(0))
            .unwrap();
        assert_eq!(audited, 7);

        // The board's writer syncs every commit.
        let (_dir, board) = writer_conn();
        let (c, c_rx) = job(create("durable"));
        commit_group(
            &board,
            vec![c],
            policy,
            &mut detached(),
            &Counters::default(),
        );
        assert!(c_rx.blocking_recv().unwrap().is_ok());
        assert_eq!(synchronous(&board), 2, "an issue write: FULL");
    }

    /// What `issue_search` holds, and what it should hold recomputed from
    /// `issues` and `comments` (as migration 6 fills it), by rowid.
    fn search_rows(conn: &Connection) -> (Vec<[String; 5]>, Vec<[String; 5]>) {
        let rows = |sql: &str| -> Vec<[String; 5]> {
            conn.prepare(sql)
                .unwrap()
                .query_map([], |r| {
                    Ok([r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?])
                })
                .unwrap()
                .collect::<Result<Vec<_>, _>>()
                .unwrap()
        };
        let actual =
            rows("SELECT tenant, issue_id, title, body, comments FROM issue_search ORDER BY rowid");
        let mut expected = Vec::new();
        for [tenant, id, title, body, _] in
            rows("SELECT tenant, id, title, body, '' FROM issues ORDER BY search_rowid")
        {
            let comments: Vec<String> = conn
                .prepare(
                    "SELECT body FROM comments WHERE tenant = ?1 AND issue_id = ?2 ORDER BY rowid",
                )
                .unwrap()
                .query_map(rusqlite::params![tenant, id], |r| r.get::<_, String>(0))
                .unwrap()
                .map(|body| normalized(&body.unwrap()))
                .collect();
            expected.push([
                tenant,
                id,
                normalized(&title),
                normalized(&body),
                comments.join(" "),
            ]);
        }
        (expected, actual)
    }

    fn comment(issue: &IssueId, body: &str) -> AddComment {
        let comment = NewComment {
            issue: issue.clone(),
            body: CommentBody::parse(body).unwrap(),
        };
        AddComment::new(&TenantId::parse("t").unwrap(), &author(), comment, None)
    }

    fn retitle(issue: &IssueId, title: &str) -> UpdateIssue {
        UpdateIssue {
            tenant: TenantId::parse("t").unwrap(),
            id: issue.clone(),
            patch: IssuePatch {
                title: Some(Title::parse(title).unwrap()),
                body: Some(Body::parse(format!("body of {issue}")).unwrap()),
                ..Default::default()
            },
            expected_version: None,
        }
    }

    #[test]
    fn index_changes_staged_in_a_group_land_in_order_and_rolled_back_ops_leave_none() {
        let (_dir, conn) = writer_conn();
        // A group as `try_group` runs one, op by op, so that later ops can
        // name the issues earlier ones of the same group created.
        fn run<O: WriteOp>(conn: &Connection, op: O) -> Reply<O> {
            run_one(conn, &op, Isolation::EachOp).unwrap()
        }
        let created = |reply: Reply<CreateIssue>| match reply {
            Ok(created) => created.issue.id,
            other => panic!("{other:?}"),
        };
        run_statement(&conn, "BEGIN IMMEDIATE").unwrap();
        let old = created(run(&conn, create("Old login issue")));
        detached().end_group(&conn).unwrap();

        run_statement(&conn, "BEGIN IMMEDIATE").unwrap();
        let crash = created(run(&conn, create("Crash on save")));
        run(&conn, comment(&crash, "first stack trace")).unwrap();
        run(&conn, comment(&crash, "second trace, zebra")).unwrap();
        run(&conn, retitle(&crash, "Crash on save as")).unwrap();
        run(&conn, comment(&old, "still failing")).unwrap();
        run(&conn, retitle(&old, "Login issue, renamed")).unwrap();
        run(&conn, retitle(&old, "Login issue, renamed twice")).unwrap();
        // An op rolled back to its savepoint takes its staged rows along:
        // the seed's first issue and its comment are staged, then its
        // second issue names a parent that does not exist.
        let failed = run(&conn, failing_seed());
        assert!(failed.is_err(), "{failed:?}");
        created(run(&conn, create("Another one")));
        detached().end_group(&conn).unwrap();

        let (expected, actual) = search_rows(&conn);
        assert_eq!(actual, expected);
        assert_eq!(actual.len(), 3, "{actual:?}");
        // Nothing left staged, and the index answers as it reads.
        let staged: i64 = conn
            .query_row("SELECT count(*) FROM search_pending", [], |r| r.get(0))
            .unwrap();
        assert_eq!(staged, 0);
        let found = |query: &str| -> i64 {
            conn.query_row(
                "SELECT count(*) FROM issue_search WHERE issue_search MATCH ?1",
                [query],
                |r| r.get(0),
            )
            .unwrap()
        };
        assert_eq!(found("zebra"), 1);
        assert_eq!(found("twice"), 1);
        assert_eq!(found("never"), 0);
        // The check can fail: an index row out of step is seen.
        conn.execute(
            "UPDATE issue_search SET comments = 'x' \
             WHERE rowid = (SELECT min(rowid) FROM issue_search)",
            [],
        )
        .unwrap();
        let (expected, actual) = search_rows(&conn);
        assert_ne!(actual, expected);
    }
}
