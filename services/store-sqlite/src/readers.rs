//! A small pool of read connections. A semaphore bounds concurrent reads to
//! the pool size; each read runs on tokio's blocking pool (SQLite calls
//! block) inside one read transaction, so an issue and its comments come
//! from the same snapshot.

use crate::error::{OpError, store_error};
use crate::options::SqliteOptions;
use crate::schema::open_reader;
use corkboard_board::StoreError;
use rusqlite::Connection;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::Semaphore;

#[derive(Debug)]
pub(crate) struct ReadPool {
    path: PathBuf,
    options: SqliteOptions,
    idle: Mutex<Vec<Connection>>,
    permits: Arc<Semaphore>,
}

impl ReadPool {
    pub(crate) fn new(path: PathBuf, options: SqliteOptions, first: Connection) -> Arc<Self> {
        let size = options.readers.max(1);
        Arc::new(Self {
            path,
            options,
            idle: Mutex::new(vec![first]),
            permits: Arc::new(Semaphore::new(size)),
        })
    }

    /// Runs `read` on a pooled connection, in a read transaction.
    pub(crate) async fn run<T, F>(self: &Arc<Self>, read: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, OpError> + Send + 'static,
    {
        let permit = Arc::clone(&self.permits)
            .acquire_owned()
            .await
            .map_err(|_| StoreError::unavailable("the SQLite read pool is closed"))?;
        let pool = Arc::clone(self);
        let task = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let mut conn = pool.take()?;
            let result = read_in_transaction(&mut conn, read);
            pool.give_back(conn);
            result
        });
        task.await
            .map_err(|e| StoreError::Internal(format!("a SQLite read did not finish: {e}")))?
    }

    /// An idle connection, or a new one: connections are opened lazily up to
    /// the permit count, and one lost to a panicking read is replaced.
    fn take(&self) -> Result<Connection, StoreError> {
        let idle = self
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        match idle {
            Some(conn) => Ok(conn),
            None => open_reader(&self.path, &self.options).map_err(|e| store_error(&e)),
        }
    }

    fn give_back(&self, conn: Connection) {
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(conn);
    }
}

fn read_in_transaction<T>(
    conn: &mut Connection,
    read: impl FnOnce(&Connection) -> Result<T, OpError>,
) -> Result<T, StoreError> {
    let tx = conn.transaction().map_err(|e| store_error(&e))?;
    let value = read(&tx)?;
    // Nothing was written; ending the transaction releases the snapshot.
    tx.finish().map_err(|e| store_error(&e))?;
    Ok(value)
}
