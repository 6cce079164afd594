//! A small pool of read connections. The store keeps two (see
//! `SqliteStore`): one for point reads, one for expensive reads and
//! listings, so a search never holds a connection a point read waits for.
//! Each pool is used three ways:
//!
//! - **Point reads** (a primary-key lookup or two, microseconds from the
//!   page cache: `get_issue`, a grant by id or by token hash) run on the
//!   calling thread, on an idle pooled connection, when one is free right
//!   now. Handing such a read to tokio's blocking pool costs more than the
//!   read itself (a thread hand-off, a wake-up back to the async worker).
//! - **Everything else** (lists, anything that can scan) and any point read
//!   that found no free connection runs on tokio's blocking pool, waiting
//!   its turn for a connection.
//! - **Expensive reads** ([`ReadPool::run_interruptible`]: searches,
//!   filtered lists) run there too, and are interrupted where they run once
//!   past their deadline or once their caller stopped waiting: SQLite's
//!   progress handler, checked every [`PROGRESS_OPS`] virtual machine
//!   instructions, ends the statement with `SQLITE_INTERRUPT`, and the
//!   connection goes back to the pool at once.
//!
//! One semaphore bounds the connections in use by all paths to the pool's
//! size. A point read only ever *tries* it (an atomic
//! operation, never a wait), and a permit released while reads queue goes to
//! the queue first, so the fast path cannot starve the blocking one.
//!
//! Transactions: a read of one statement is its own read transaction (WAL
//! gives it one snapshot); a read of several statements that must agree (an
//! issue and its comments, a page and its comments) runs in [`snapshot`],
//! with cached `BEGIN`/`COMMIT` statements (not parsed again on every read).
//! A connection never goes back to the pool inside a transaction: that would
//! pin an old WAL snapshot (the reader would stop seeing new writes, and
//! checkpoints could not get past it).

use crate::error::{OpError, is_busy, store_error};
use crate::options::SqliteOptions;
use crate::schema::open_reader;
use corkboard_board::{ExpensiveReads, StoreError};
use rusqlite::Connection;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, TryAcquireError};

/// How many SQLite virtual machine instructions run between two looks at
/// an expensive read's deadline: a clock read every thousand instructions
/// costs nothing measurable, and SQLite runs millions per second, so the
/// read stops about a millisecond past its deadline. Work done inside one
/// instruction runs to its end first: an FTS5 prefix term expanded to
/// thousands of words overran a 20 ms deadline by up to 30 ms on a
/// 60,000-issue board (debug build).
pub(crate) const PROGRESS_OPS: std::ffi::c_int = 1000;

/// The longest a point read on an async worker waits for a lock held by
/// another connection (in WAL mode readers are blocked only in rare moments:
/// WAL recovery, another process closing the file, `locking_mode=EXCLUSIVE`).
/// Past it the read is retried on the blocking pool with the full
/// `busy_timeout`, so a worker thread is never held for long.
const INLINE_BUSY_TIMEOUT: Duration = Duration::from_millis(10);

#[derive(Debug)]
pub(crate) struct ReadPool {
    path: PathBuf,
    options: SqliteOptions,
    /// What the pool's readers are for, in its errors ("search", "point").
    purpose: &'static str,
    idle: Mutex<Vec<Reader>>,
    permits: Arc<Semaphore>,
}

/// A pooled connection and the busy timeout it currently has, so switching
/// between the inline and the blocking path costs a call only on a change.
#[derive(Debug)]
struct Reader {
    conn: Connection,
    wait: Wait,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wait {
    /// [`INLINE_BUSY_TIMEOUT`]: on an async worker.
    Inline,
    /// `SqliteOptions::busy_timeout`: on the blocking pool.
    Full,
}

impl Reader {
    fn wait(&mut self, wait: Wait, options: &SqliteOptions) -> Result<(), rusqlite::Error> {
        if self.wait != wait {
            let timeout = match wait {
                Wait::Inline => INLINE_BUSY_TIMEOUT.min(options.busy_timeout),
                Wait::Full => options.busy_timeout,
            };
            self.conn.busy_timeout(timeout)?;
            self.wait = wait;
        }
        Ok(())
    }
}

impl ReadPool {
    /// A pool of `size` connections (at least one), `first` among them.
    pub(crate) fn new(
        path: PathBuf,
        options: SqliteOptions,
        purpose: &'static str,
        size: usize,
        first: Connection,
    ) -> Arc<Self> {
        let size = size.max(1);
        Arc::new(Self {
            path,
            options,
            purpose,
            idle: Mutex::new(vec![Reader {
                conn: first,
                wait: Wait::Full,
            }]),
            permits: Arc::new(Semaphore::new(size)),
        })
    }

    /// Runs `read` on the blocking pool, waiting for a connection if all are
    /// in use. `read` sets up its own transaction if it needs one.
    pub(crate) async fn run<T, F>(self: &Arc<Self>, read: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, OpError> + Send + 'static,
    {
        let permit = Arc::clone(&self.permits)
            .acquire_owned()
            .await
            .map_err(|_| closed())?;
        self.run_blocking(permit, read).await
    }

    /// Runs the expensive read `read` in one [`snapshot`] on the blocking
    /// pool, once a connection is free, waiting until `wait_until` at most
    /// (then `Unavailable`: every reader stayed busy). Interrupted where it
    /// runs once it has run for `reads.timeout()` (then
    /// [`ExpensiveReads::too_slow`]) or once this future is dropped (its
    /// caller stopped waiting: the work is of use to no one).
    pub(crate) async fn run_interruptible<T, F>(
        self: &Arc<Self>,
        wait_until: tokio::time::Instant,
        reads: &ExpensiveReads,
        read: F,
    ) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, OpError> + Send + 'static,
    {
        let permit = tokio::time::timeout_at(wait_until, Arc::clone(&self.permits).acquire_owned())
            .await
            .map_err(|_| {
                StoreError::unavailable(format!(
                    "every {} reader of the SQLite board stayed busy for {} ms; retry shortly",
                    self.purpose,
                    reads.timeout().as_millis()
                ))
            })?
            .map_err(|_| closed())?;
        let abandoned = Arc::new(AtomicBool::new(false));
        // Dropped with this future, whether it completed or not: only a
        // read still running can see it, and it then stops.
        let _abandon_on_drop = SetOnDrop(Arc::clone(&abandoned));
        let (limit, too_slow) = (reads.timeout(), reads.too_slow());
        self.run_blocking(permit, move |conn| {
            snapshot(conn, |conn| {
                interruptible(conn, limit, &abandoned, read).map_err(|err| match err {
                    Interrupted::Deadline => OpError::Store(too_slow),
                    Interrupted::Abandoned => OpError::Store(StoreError::unavailable(
                        "the read was stopped: its caller stopped waiting",
                    )),
                    Interrupted::Failed(err) => err,
                })
            })
        })
        .await
    }

    /// Runs the point read `read` on the calling thread if a connection is
    /// free right now, else as [`ReadPool::run`] does. Also falls back to the
    /// blocking pool when the file was locked past [`INLINE_BUSY_TIMEOUT`]
    /// (so `read` may run twice; reads are free to repeat).
    ///
    /// The inline part cannot be cancelled by the caller's
    /// `tokio::time::timeout`: it never yields. That is acceptable for a
    /// point read: it is a B-tree lookup or two, bounded by a few page reads
    /// and [`INLINE_BUSY_TIMEOUT`]; the operation timeout is for what can
    /// wait without bound (a queue, a lock), and all of that happens on the
    /// blocking path, where the timeout applies as before.
    pub(crate) async fn point<T, F>(self: &Arc<Self>, read: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: Fn(&Connection) -> Result<T, OpError> + Send + 'static,
    {
        // A read that completes inline never returns `Pending`, so a task
        // running many in a row would never yield to the others on its
        // worker; spending tokio's cooperative budget makes it yield now and
        // then, as any tokio resource does.
        tokio::task::coop::consume_budget().await;
        let permit = match Arc::clone(&self.permits).try_acquire_owned() {
            Ok(permit) => permit,
            Err(TryAcquireError::NoPermits) => return self.run(read).await,
            Err(TryAcquireError::Closed) => return Err(closed()),
        };
        // Opening a connection is file IO: leave that to the blocking path.
        let Some(mut reader) = self.pop_idle() else {
            return self.run_blocking(permit, read).await;
        };
        let result = match reader.wait(Wait::Inline, &self.options) {
            Ok(()) => catch_unwind(AssertUnwindSafe(|| read(&reader.conn))),
            Err(err) => Ok(Err(OpError::Sqlite(err))),
        };
        let Ok(result) = result else {
            // The connection's state after a panic is unknown: close it (that
            // ends any transaction); the pool opens a new one when needed.
            drop(reader);
            return Err(panicked());
        };
        // Back in the pool before the permit is released, so the next permit
        // holder finds it instead of opening another connection.
        self.give_back(reader);
        match result {
            Err(OpError::Sqlite(err)) if is_busy(&err) => {
                tracing::debug!("SQLite board locked; retrying a point read on the blocking pool");
                self.run_blocking(permit, read).await
            }
            other => {
                drop(permit);
                other.map_err(StoreError::from)
            }
        }
    }

    /// Runs `read` on tokio's blocking pool under `permit`.
    async fn run_blocking<T, F>(
        self: &Arc<Self>,
        permit: OwnedSemaphorePermit,
        read: F,
    ) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, OpError> + Send + 'static,
    {
        let pool = Arc::clone(self);
        let task = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let mut reader = pool.take()?;
            let result = reader
                .wait(Wait::Full, &pool.options)
                .map_err(OpError::Sqlite)
                .and_then(|()| read(&reader.conn));
            pool.give_back(reader);
            result.map_err(StoreError::from)
        });
        task.await.map_err(|_| panicked())?
    }

    fn pop_idle(&self) -> Option<Reader> {
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()
    }

    /// An idle connection, or a new one: connections are opened lazily up to
    /// the permit count, and one lost to a panicking read is replaced.
    fn take(&self) -> Result<Reader, StoreError> {
        match self.pop_idle() {
            Some(reader) => Ok(reader),
            None => open_reader(&self.path, &self.options)
                .map(|conn| Reader {
                    conn,
                    wait: Wait::Full,
                })
                .map_err(|e| store_error(&e)),
        }
    }

    /// Returns a connection to the pool, never one inside a transaction:
    /// [`snapshot`] always ends its own, so this is a safety net for a read
    /// that began one some other way. A connection that cannot be rolled back
    /// is closed instead (closing ends the transaction).
    fn give_back(&self, reader: Reader) {
        debug_assert!(
            !reader.conn.is_busy(),
            "a read left a statement un-reset (it would hold its snapshot)"
        );
        if !reader.conn.is_autocommit() {
            tracing::warn!("a SQLite read left its transaction open; rolling it back");
            if let Err(err) = end_transaction(&reader.conn) {
                tracing::warn!(error = %err, "closing a read connection stuck in a transaction");
                return;
            }
        }
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(reader);
    }
}

/// Sets its flag when dropped.
struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Why an interruptible read did not answer.
enum Interrupted {
    /// It ran past its limit.
    Deadline,
    /// Its caller stopped waiting.
    Abandoned,
    /// It failed by itself.
    Failed(OpError),
}

/// Runs `read` with SQLite's progress handler interrupting it once it has
/// run for `limit` or once `abandoned` is set, and removes the handler
/// afterwards (before the caller ends its transaction: a `COMMIT` past the
/// deadline must not be interrupted too).
fn interruptible<T>(
    conn: &Connection,
    limit: Duration,
    abandoned: &Arc<AtomicBool>,
    read: impl FnOnce(&Connection) -> Result<T, OpError>,
) -> Result<T, Interrupted> {
    let deadline = Instant::now() + limit;
    let stop = Arc::clone(abandoned);
    conn.progress_handler(
        PROGRESS_OPS,
        Some(move || {
            std::thread::yield_now();
            stop.load(Ordering::Relaxed) || Instant::now() >= deadline
        }),
    );
    let result = read(conn);
    conn.progress_handler(0, None::<fn() -> bool>);
    match result {
        Ok(value) => Ok(value),
        Err(OpError::Sqlite(err))
            if err.sqlite_error_code() == Some(rusqlite::ErrorCode::OperationInterrupted) =>
        {
            if abandoned.load(Ordering::Relaxed) {
                Err(Interrupted::Abandoned)
            } else {
                Err(Interrupted::Deadline)
            }
        }
        Err(err) => Err(Interrupted::Failed(err)),
    }
}

/// Runs `read` in one read transaction, so all its statements see the same
/// snapshot, and always ends that transaction, whatever `read` returns.
/// `BEGIN` (deferred: the snapshot is taken at the first `SELECT`) and
/// `COMMIT` are cached statements, not parsed again on every read.
pub(crate) fn snapshot<T>(
    conn: &Connection,
    read: impl FnOnce(&Connection) -> Result<T, OpError>,
) -> Result<T, OpError> {
    conn.prepare_cached("BEGIN")?.execute([])?;
    let result = read(conn);
    match (result, end_transaction(conn)) {
        (Ok(value), Ok(())) => Ok(value),
        (Ok(_), Err(err)) => Err(OpError::Sqlite(err)),
        // The read's own failure says more than a failure to end it; the
        // pool closes a connection it cannot bring back to autocommit.
        (Err(err), _) => Err(err),
    }
}

/// Ends the read transaction on `conn`, if one is open (SQLite may have
/// rolled it back itself after an error). Nothing was written, so `COMMIT`
/// just releases the snapshot; if that fails, `ROLLBACK` always ends it.
fn end_transaction(conn: &Connection) -> Result<(), rusqlite::Error> {
    if conn.is_autocommit() {
        return Ok(());
    }
    let commit = conn
        .prepare_cached("COMMIT")
        .and_then(|mut stmt| stmt.execute([]));
    if commit.is_ok() && conn.is_autocommit() {
        return Ok(());
    }
    conn.prepare_cached("ROLLBACK")?.execute([])?;
    Ok(())
}

fn closed() -> StoreError {
    StoreError::unavailable("the SQLite read pool is closed")
}

fn panicked() -> StoreError {
    StoreError::Internal("a SQLite read did not finish: it panicked".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::open_writer;
    use std::time::Instant;

    const ROWS: i64 = 3;

    struct Fixture {
        _dir: tempfile::TempDir,
        path: PathBuf,
        writer: Connection,
        pool: Arc<ReadPool>,
    }

    impl Fixture {
        fn new(readers: usize) -> Self {
            Self::with(SqliteOptions::default(), readers)
        }

        fn with(options: SqliteOptions, readers: usize) -> Self {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("r.sqlite3");
            let writer = open_writer(&path, &options).unwrap();
            writer
                .execute_batch(
                    "CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL);
                     INSERT INTO t (k, v) VALUES (1, 'one'), (2, 'two'), (3, 'three');",
                )
                .unwrap();
            let first = open_reader(&path, &options).unwrap();
            let pool = ReadPool::new(path.clone(), options, "test", readers, first);
            Self {
                _dir: dir,
                path,
                writer,
                pool,
            }
        }

        fn insert(&self) {
            self.writer
                .execute("INSERT INTO t (v) VALUES ('more')", [])
                .unwrap();
        }

        fn idle(&self) -> Vec<bool> {
            self.pool
                .idle
                .lock()
                .unwrap()
                .iter()
                .map(|r| r.conn.is_autocommit())
                .collect()
        }
    }

    fn count(conn: &Connection) -> Result<i64, OpError> {
        Ok(conn
            .prepare_cached("SELECT count(*) FROM t")?
            .query_row([], |row| row.get(0))?)
    }

    fn value(conn: &Connection, k: i64) -> Result<String, OpError> {
        Ok(conn
            .prepare_cached("SELECT v FROM t WHERE k = ?1")?
            .query_row([k], |row| row.get(0))?)
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn point_reads_answer_and_see_committed_writes() {
        let f = Fixture::new(2);
        runtime().block_on(async {
            assert_eq!(f.pool.point(|c| value(c, 2)).await.unwrap(), "two");
            assert_eq!(f.pool.point(count).await.unwrap(), ROWS);
            let both = f
                .pool
                .point(|c| snapshot(c, |c| Ok((value(c, 1)?, count(c)?))))
                .await
                .unwrap();
            assert_eq!(both, ("one".to_owned(), ROWS));
            f.insert();
            assert_eq!(f.pool.point(count).await.unwrap(), ROWS + 1);
            assert_eq!(f.pool.run(count).await.unwrap(), ROWS + 1);
            let missing = f.pool.point(|c| value(c, 99)).await.unwrap_err();
            assert!(matches!(missing, StoreError::Internal(_)), "{missing:?}");
        });
        assert_eq!(
            f.idle(),
            vec![true],
            "one connection, out of any transaction"
        );
    }

    /// A read that fails after its first statement, in a snapshot: with a
    /// domain error, with a SQLite error, on either path.
    async fn fail_midway(pool: &Arc<ReadPool>, inline: bool, sqlite: bool) {
        let read = move |c: &Connection| {
            snapshot(c, |c| {
                count(c)?;
                if sqlite {
                    c.prepare_cached("SELECT nope FROM t")?;
                }
                Err::<(), _>(OpError::Store(StoreError::Internal("midway".into())))
            })
        };
        let err = if inline {
            pool.point(read).await
        } else {
            pool.run(read).await
        }
        .unwrap_err();
        assert!(matches!(err, StoreError::Internal(_)), "{err:?}");
    }

    #[test]
    fn a_read_failing_midway_does_not_pin_its_snapshot() {
        let f = Fixture::new(1);
        runtime().block_on(async {
            let mut expected = ROWS;
            for inline in [true, false] {
                for sqlite in [false, true] {
                    fail_midway(&f.pool, inline, sqlite).await;
                    assert_eq!(
                        f.idle(),
                        vec![true],
                        "the one connection is back, autocommit"
                    );
                    f.insert();
                    expected += 1;
                    // The same (only) connection: a pinned snapshot would miss the row.
                    assert_eq!(f.pool.point(count).await.unwrap(), expected);
                    assert_eq!(f.pool.run(count).await.unwrap(), expected);
                }
            }
        });
    }

    #[test]
    fn a_transaction_left_open_is_ended_before_the_connection_is_reused() {
        let f = Fixture::new(1);
        runtime().block_on(async {
            let leaky = |c: &Connection| {
                c.execute_batch("BEGIN")?;
                count(c)
            };
            assert_eq!(f.pool.point(leaky).await.unwrap(), ROWS);
            assert_eq!(f.idle(), vec![true]);
            f.insert();
            assert_eq!(f.pool.point(count).await.unwrap(), ROWS + 1);
            assert_eq!(f.pool.run(leaky).await.unwrap(), ROWS + 1);
            assert_eq!(f.idle(), vec![true]);
            f.insert();
            assert_eq!(f.pool.point(count).await.unwrap(), ROWS + 2);
        });
    }

    #[test]
    fn concurrent_point_reads_from_many_tasks_all_succeed() {
        let f = Fixture::new(2);
        runtime().block_on(async {
            let mut tasks = tokio::task::JoinSet::new();
            for task in 0..64_i64 {
                let pool = Arc::clone(&f.pool);
                tasks.spawn(async move {
                    for i in 0..200_i64 {
                        let k = (task + i) % ROWS + 1;
                        let v = pool.point(move |c| value(c, k)).await.unwrap();
                        assert_eq!(v, ["one", "two", "three"][(k - 1) as usize]);
                        let n = pool
                            .point(|c| snapshot(c, |c| Ok(count(c)? + count(c)?)))
                            .await
                            .unwrap();
                        assert_eq!(n, 2 * ROWS);
                        if i % 10 == 0 {
                            // Lists share the connections and the permits.
                            assert_eq!(pool.run(count).await.unwrap(), ROWS);
                        }
                    }
                });
            }
            while let Some(done) = tasks.join_next().await {
                done.unwrap();
            }
        });
        let idle = f.idle();
        assert!(
            !idle.is_empty() && idle.len() <= 2,
            "never more connections than readers: {idle:?}"
        );
        assert!(idle.iter().all(|&autocommit| autocommit));
    }

    #[test]
    fn point_reads_wait_on_the_blocking_path_when_every_reader_is_busy() {
        let f = Fixture::new(1);
        runtime().block_on(async {
            let held = Arc::clone(&f.pool.permits).acquire_owned().await.unwrap();
            let pool = Arc::clone(&f.pool);
            let read = tokio::spawn(async move { pool.point(count).await });
            tokio::time::sleep(Duration::from_millis(100)).await;
            assert!(!read.is_finished(), "queued for a reader, not run inline");
            drop(held);
            assert_eq!(read.await.unwrap().unwrap(), ROWS);
        });
    }

    #[test]
    fn a_point_read_with_no_idle_connection_opens_one_on_the_blocking_path() {
        let f = Fixture::new(2);
        runtime().block_on(async {
            let taken = f.pool.pop_idle().unwrap();
            assert!(f.idle().is_empty());
            assert_eq!(f.pool.point(count).await.unwrap(), ROWS);
            f.pool.give_back(taken);
            assert_eq!(f.idle().len(), 2);
        });
    }

    #[test]
    fn a_panicking_point_read_is_an_internal_error_and_its_connection_is_replaced() {
        let f = Fixture::new(1);
        runtime().block_on(async {
            let err = f
                .pool
                .point(|c| -> Result<i64, OpError> {
                    c.execute_batch("BEGIN")?;
                    panic!("a bug in a read")
                })
                .await
                .unwrap_err();
            assert!(matches!(err, StoreError::Internal(_)), "{err:?}");
            assert!(f.idle().is_empty(), "the connection was closed");
            f.insert();
            assert_eq!(f.pool.point(count).await.unwrap(), ROWS + 1);
            assert_eq!(f.idle(), vec![true]);
        });
    }

    /// Another connection holding the file in `locking_mode=EXCLUSIVE` locks
    /// WAL readers out. A point read must not hold its async worker for the
    /// whole `busy_timeout`: it gives up inline after INLINE_BUSY_TIMEOUT and
    /// waits on the blocking pool instead, and then succeeds.
    #[test]
    fn a_locked_file_moves_point_reads_off_the_async_worker() {
        let options = SqliteOptions {
            busy_timeout: Duration::from_secs(10),
            ..SqliteOptions::default()
        };
        let f = Fixture::with(options.clone(), 2);
        let Fixture {
            _dir, path, writer, ..
        } = f;
        drop(writer);
        // Exclusive before anything else has the WAL open, so it gets it.
        let locker = Connection::open(&path).unwrap();
        locker
            .pragma_update(None, "locking_mode", "EXCLUSIVE")
            .unwrap();
        locker
            .execute("INSERT INTO t (v) VALUES ('locked')", [])
            .unwrap();
        let pool = ReadPool::new(
            path.clone(),
            options.clone(),
            "test",
            2,
            open_reader(&path, &options).unwrap(),
        );
        let (release, released) = std::sync::mpsc::channel::<()>();
        let unlocker = std::thread::spawn(move || {
            released.recv().unwrap();
            drop(locker);
        });
        // One worker thread: if the read blocked it, the ticker would stall.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let started = Instant::now();
            let read = tokio::spawn(async move { pool.point(count).await });
            let ticker = tokio::spawn(async move {
                for _ in 0..20 {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                started.elapsed()
            });
            let ticked = ticker.await.unwrap();
            assert!(
                // 20 ticks of 5 ms; generous for a loaded machine, far
                // below the 10 s busy_timeout a blocked worker would show.
                ticked < Duration::from_secs(2),
                "the async worker stayed free while the file was locked: {ticked:?}"
            );
            assert!(!read.is_finished(), "still waiting for the lock");
            release.send(()).unwrap();
            assert_eq!(read.await.unwrap().unwrap(), ROWS + 1);
        });
        unlocker.join().unwrap();
    }
}
