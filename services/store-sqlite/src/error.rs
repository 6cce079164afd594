//! Errors of opening a store, and how SQLite failures become [`StoreError`]s.

use corkboard_board::StoreError;
use rusqlite::ErrorCode;
use std::path::PathBuf;
use thiserror::Error;

/// Why a store could not be opened. Every variant names the file, because
/// the operator's fix (permissions, a stale lock, a wrong `--data-dir`) is
/// about that file.
#[derive(Debug, Error)]
pub enum SqliteError {
    #[error("cannot create the directory {} for the SQLite board: {source}", .path.display())]
    CreateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot create the SQLite board file {}: {source}", .path.display())]
    CreateFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot open the SQLite board {}: {source}", .path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("the SQLite board {} is read-only; the store needs to write it (check the file's permissions and the mount)", .path.display())]
    ReadOnly { path: PathBuf },
    #[error("the SQLite board {} does not support WAL mode (journal mode stayed {mode:?}); put the data dir on a local filesystem", .path.display())]
    NoWal { path: PathBuf, mode: String },
    #[error("the SQLite board {} has schema version {found}, newer than this build understands ({supported}); upgrade corkboard", .path.display())]
    SchemaTooNew {
        path: PathBuf,
        found: i64,
        supported: i64,
    },
    #[error("cannot start the SQLite writer thread for {}: {source}", .path.display())]
    Thread {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Failures inside one operation: a domain answer (not found, conflict) that
/// ends only this operation, or a SQLite failure that may end the whole
/// transaction it ran in.
#[derive(Debug)]
pub(crate) enum OpError {
    Store(StoreError),
    Sqlite(rusqlite::Error),
}

impl From<StoreError> for OpError {
    fn from(err: StoreError) -> Self {
        Self::Store(err)
    }
}

impl From<corkboard_board::ValidationError> for OpError {
    fn from(err: corkboard_board::ValidationError) -> Self {
        Self::Store(StoreError::Invalid(err))
    }
}

impl From<rusqlite::Error> for OpError {
    fn from(err: rusqlite::Error) -> Self {
        Self::Sqlite(err)
    }
}

impl From<OpError> for StoreError {
    fn from(err: OpError) -> Self {
        match err {
            OpError::Store(err) => err,
            OpError::Sqlite(err) => store_error(&err),
        }
    }
}

/// Whether retrying the same transaction later may succeed: another
/// connection (maybe another process) held the lock past `busy_timeout`.
pub(crate) fn is_busy(err: &rusqlite::Error) -> bool {
    matches!(
        err.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

/// Maps a SQLite failure to what a caller can act on: trouble with the file
/// or its lock is `Unavailable` (retryable); anything else is a bug or a
/// damaged file and is `Internal`. SQLite's messages name tables and
/// constraints, never bound values, so they are safe to pass on.
pub(crate) fn store_error(err: &rusqlite::Error) -> StoreError {
    match err.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => StoreError::unavailable(
            "the SQLite board stayed locked by another writer past the busy timeout",
        ),
        Some(
            ErrorCode::SystemIoFailure
            | ErrorCode::DiskFull
            | ErrorCode::CannotOpen
            | ErrorCode::ReadOnly
            | ErrorCode::OutOfMemory
            | ErrorCode::PermissionDenied
            | ErrorCode::FileLockingProtocolFailed,
        ) => StoreError::unavailable(format!("SQLite: {err}")),
        _ => StoreError::Internal(format!("SQLite: {err}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::ffi;

    fn failure(code: std::ffi::c_int) -> rusqlite::Error {
        rusqlite::Error::SqliteFailure(ffi::Error::new(code), None)
    }

    #[test]
    fn lock_and_file_trouble_is_retryable_the_rest_is_internal() {
        assert!(is_busy(&failure(ffi::SQLITE_BUSY)));
        assert!(is_busy(&failure(ffi::SQLITE_LOCKED)));
        assert!(!is_busy(&failure(ffi::SQLITE_CONSTRAINT)));
        assert!(store_error(&failure(ffi::SQLITE_BUSY)).is_retryable());
        assert!(store_error(&failure(ffi::SQLITE_IOERR)).is_retryable());
        assert!(store_error(&failure(ffi::SQLITE_FULL)).is_retryable());
        assert!(matches!(
            store_error(&failure(ffi::SQLITE_CORRUPT)),
            StoreError::Internal(_)
        ));
        assert!(matches!(
            store_error(&rusqlite::Error::QueryReturnedNoRows),
            StoreError::Internal(_)
        ));
    }

    #[test]
    fn open_errors_name_the_file() {
        let err = SqliteError::ReadOnly {
            path: PathBuf::from("data/board.sqlite3"),
        };
        assert!(err.to_string().contains("data/board.sqlite3"), "{err}");
    }
}
