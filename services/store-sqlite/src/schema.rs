//! Connection set-up and the schema, versioned with `PRAGMA user_version`.
//!
//! Migrations run inside `BEGIN IMMEDIATE` and re-read the version under that
//! lock, so several processes opening a fresh file at once migrate it exactly
//! once.

use crate::error::{SqliteError, is_busy};
use crate::options::SqliteOptions;
use rusqlite::{Connection, OpenFlags};
use std::path::Path;
use std::thread;
use std::time::Duration;

/// Schema steps; step `i` takes the file from version `i` to `i + 1`.
/// Append only: a released step never changes.
const MIGRATIONS: &[&str] = &[
    // 1: issues, labels, comments, idempotency keys, grants, audit.
    r#"
    CREATE TABLE issues (
        tenant       TEXT    NOT NULL,
        id           TEXT    NOT NULL,
        title        TEXT    NOT NULL,
        -- Rust's Unicode lower-casing of the title, so the text filter is
        -- a plain instr() that agrees with ListQuery::matches.
        title_lower  TEXT    NOT NULL,
        body         TEXT    NOT NULL,
        state        TEXT    NOT NULL,
        priority     TEXT    NOT NULL,
        -- Sorted labels joined by ','; issue_labels is what filters use.
        labels       TEXT    NOT NULL,
        author_run   TEXT    NOT NULL,
        author_grant TEXT,
        created_at   INTEGER NOT NULL,
        updated_at   INTEGER NOT NULL,
        version      INTEGER NOT NULL CHECK (version >= 1),
        PRIMARY KEY (tenant, id)
    ) WITHOUT ROWID;
    CREATE INDEX issues_by_state ON issues (tenant, state, id);
    CREATE INDEX issues_by_author ON issues (tenant, author_run, id);

    CREATE TABLE issue_labels (
        tenant   TEXT NOT NULL,
        issue_id TEXT NOT NULL,
        label    TEXT NOT NULL,
        PRIMARY KEY (tenant, issue_id, label),
        FOREIGN KEY (tenant, issue_id) REFERENCES issues (tenant, id) ON DELETE CASCADE
    ) WITHOUT ROWID;
    CREATE INDEX issue_labels_by_label ON issue_labels (tenant, label, issue_id);

    CREATE TABLE comments (
        seq          INTEGER PRIMARY KEY,
        tenant       TEXT    NOT NULL,
        issue_id     TEXT    NOT NULL,
        id           TEXT    NOT NULL,
        body         TEXT    NOT NULL,
        author_run   TEXT    NOT NULL,
        author_grant TEXT,
        created_at   INTEGER NOT NULL,
        UNIQUE (tenant, id),
        FOREIGN KEY (tenant, issue_id) REFERENCES issues (tenant, id) ON DELETE CASCADE
    );
    CREATE INDEX comments_by_issue ON comments (tenant, issue_id, seq);

    CREATE TABLE idempotency_keys (
        tenant      TEXT    NOT NULL,
        run         TEXT    NOT NULL,
        key         TEXT    NOT NULL,
        kind        TEXT    NOT NULL CHECK (kind IN ('issue', 'comment')),
        fingerprint TEXT    NOT NULL,
        issue_id    TEXT    NOT NULL,
        comment_id  TEXT,
        created_at  INTEGER NOT NULL,
        UNIQUE (tenant, run, key, kind),
        FOREIGN KEY (tenant, issue_id) REFERENCES issues (tenant, id) ON DELETE CASCADE
    );

    CREATE TABLE grants (
        id           TEXT    NOT NULL PRIMARY KEY,
        tenant       TEXT    NOT NULL,
        run          TEXT    NOT NULL,
        capabilities TEXT    NOT NULL,
        created_at   INTEGER NOT NULL,
        expires_at   INTEGER NOT NULL,
        created_by   TEXT    NOT NULL,
        token_hash   TEXT    NOT NULL UNIQUE,
        revoked_at   INTEGER,
        revoked_by   TEXT
    ) WITHOUT ROWID;
    CREATE INDEX grants_by_tenant ON grants (tenant, id);
    CREATE INDEX grants_by_run ON grants (tenant, run, id);
    CREATE INDEX grants_active ON grants (expires_at) WHERE revoked_at IS NULL;

    CREATE TABLE audit (
        seq            INTEGER PRIMARY KEY,
        at             INTEGER NOT NULL,
        tenant         TEXT    NOT NULL,
        run            TEXT    NOT NULL,
        grant_id       TEXT    NOT NULL,
        tool           TEXT    NOT NULL,
        outcome        TEXT    NOT NULL,
        latency_micros INTEGER NOT NULL,
        arguments_hash TEXT    NOT NULL,
        issue_id       TEXT
    );
    CREATE INDEX audit_by_tenant ON audit (tenant, at);
    CREATE INDEX audit_by_run ON audit (tenant, run, at);
    CREATE INDEX audit_by_issue ON audit (tenant, issue_id, at) WHERE issue_id IS NOT NULL;
    "#,
    // 2: a tenant's upstream MCP servers; `credential` is sealed bytes.
    r#"
    CREATE TABLE upstreams (
        tenant     TEXT    NOT NULL,
        name       TEXT    NOT NULL,
        url        TEXT    NOT NULL,
        header     TEXT    NOT NULL,
        credential BLOB    NOT NULL,
        created_at INTEGER NOT NULL,
        created_by TEXT    NOT NULL,
        PRIMARY KEY (tenant, name)
    ) WITHOUT ROWID;
    "#,
];

/// The schema version this build writes.
pub(crate) const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// How many prepared statements each connection keeps (least recently used
/// go first). A reader needs 48 list-query shapes (one per combination of
/// filters), 8 of grants and audit lists, the point reads, and `BEGIN`,
/// `COMMIT`, `ROLLBACK`: under 70, so nothing hot is ever evicted and
/// re-parsed. The writer needs about two dozen.
pub(crate) const STATEMENT_CACHE: usize = 96;

/// How often `PRAGMA journal_mode=WAL` is retried when another process is
/// switching the same fresh file at the same moment.
const WAL_ATTEMPTS: u32 = 5;

/// Opens the writing connection: creates the file, switches it to WAL,
/// migrates it. Any failure names the file.
pub(crate) fn open_writer(path: &Path, options: &SqliteOptions) -> Result<Connection, SqliteError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(|e| open_error(path, e))?;
    configure(&conn, options).map_err(|e| open_error(path, e))?;
    // SQLite quietly falls back to read-only when it may not write the
    // file; find out now rather than on the first write.
    if conn
        .is_readonly(rusqlite::MAIN_DB)
        .map_err(|e| open_error(path, e))?
    {
        return Err(SqliteError::ReadOnly {
            path: path.to_path_buf(),
        });
    }
    enable_wal(&conn, path)?;
    // FULL: in WAL mode, NORMAL may lose the last commits on power loss,
    // and an acknowledged write must survive that.
    conn.pragma_update(None, "synchronous", "FULL")
        .map_err(|e| open_error(path, e))?;
    // Each op of a group runs in a savepoint, whose undo copies of the
    // pages it touches go to a statement journal: in memory, not a temp
    // file written (a system call per page) on every insert.
    conn.pragma_update(None, "temp_store", "MEMORY")
        .map_err(|e| open_error(path, e))?;
    // Room for a whole group's pages (and the indexes' hot pages between
    // groups), so a large group never spills to the log before COMMIT.
    // Pages are allocated as used; this is a ceiling, not a reservation.
    conn.pragma_update(None, "cache_size", WRITER_CACHE_KIB)
        .map_err(|e| open_error(path, e))?;
    migrate(&conn, path)?;
    Ok(conn)
}

/// The writer's page cache ceiling (a negative `cache_size` is in KiB).
const WRITER_CACHE_KIB: i64 = -16 * 1024;

/// Opens a reading connection on a file the writer has already set up.
pub(crate) fn open_reader(
    path: &Path,
    options: &SqliteOptions,
) -> Result<Connection, rusqlite::Error> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags)?;
    configure(&conn, options)?;
    // Readers share the file's WAL; query_only guards against a write
    // slipping onto a connection that is not the group-committing writer.
    conn.pragma_update(None, "query_only", true)?;
    Ok(conn)
}

fn configure(conn: &Connection, options: &SqliteOptions) -> Result<(), rusqlite::Error> {
    conn.busy_timeout(options.busy_timeout)?;
    conn.pragma_update(None, "foreign_keys", true)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    Ok(())
}

fn enable_wal(conn: &Connection, path: &Path) -> Result<(), SqliteError> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        match conn
            .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get::<_, String>(0))
        {
            Ok(mode) if mode.eq_ignore_ascii_case("wal") => return Ok(()),
            Ok(mode) => {
                return Err(SqliteError::NoWal {
                    path: path.to_path_buf(),
                    mode,
                });
            }
            Err(err) if is_busy(&err) && attempt < WAL_ATTEMPTS => {
                thread::sleep(Duration::from_millis(20 * u64::from(attempt)));
            }
            Err(err) => return Err(open_error(path, err)),
        }
    }
}

fn migrate(conn: &Connection, path: &Path) -> Result<(), SqliteError> {
    let fail = |e| open_error(path, e);
    let current: i64 = conn
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(fail)?;
    if current == SCHEMA_VERSION {
        return Ok(());
    }
    conn.execute_batch("BEGIN IMMEDIATE").map_err(fail)?;
    let result = migrate_locked(conn, path);
    match result {
        Ok(()) => conn.execute_batch("COMMIT").map_err(fail),
        Err(err) => {
            if !conn.is_autocommit() {
                let _ = conn.execute_batch("ROLLBACK");
            }
            Err(err)
        }
    }
}

fn migrate_locked(conn: &Connection, path: &Path) -> Result<(), SqliteError> {
    let fail = |e| open_error(path, e);
    // Read again under the lock: another process may have migrated meanwhile.
    let current: i64 = conn
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(fail)?;
    if current > SCHEMA_VERSION {
        return Err(SqliteError::SchemaTooNew {
            path: path.to_path_buf(),
            found: current,
            supported: SCHEMA_VERSION,
        });
    }
    let start = usize::try_from(current).unwrap_or(0);
    for (index, step) in MIGRATIONS.iter().enumerate().skip(start) {
        conn.execute_batch(step).map_err(fail)?;
        conn.pragma_update(None, "user_version", index as i64 + 1)
            .map_err(fail)?;
        tracing::info!(path = %path.display(), version = index + 1, "migrated the SQLite board");
    }
    Ok(())
}

fn open_error(path: &Path, source: rusqlite::Error) -> SqliteError {
    SqliteError::Open {
        path: path.to_path_buf(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_apply_on_a_fresh_database_and_are_idempotent() {
        let conn = Connection::open_in_memory().unwrap();
        let path = Path::new(":memory:");
        migrate(&conn, path).unwrap();
        migrate(&conn, path).unwrap();
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |row| row.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
    }

    #[test]
    fn the_writer_is_durable_wal_with_foreign_keys() {
        let dir = tempfile::tempdir().unwrap();
        let conn = open_writer(&dir.path().join("p.sqlite3"), &SqliteOptions::default()).unwrap();
        let pragma = |name: &str| -> String {
            conn.pragma_query_value(None, name, |row| row.get::<_, rusqlite::types::Value>(0))
                .map(|v| match v {
                    rusqlite::types::Value::Integer(i) => i.to_string(),
                    rusqlite::types::Value::Text(t) => t,
                    other => format!("{other:?}"),
                })
                .unwrap()
        };
        assert_eq!(pragma("journal_mode"), "wal");
        assert_eq!(pragma("synchronous"), "2", "FULL");
        assert_eq!(pragma("temp_store"), "2", "MEMORY");
        assert_eq!(pragma("foreign_keys"), "1");
        assert_eq!(pragma("busy_timeout"), "5000");
        let reader = open_reader(&dir.path().join("p.sqlite3"), &SqliteOptions::default()).unwrap();
        let refused = reader.execute("DELETE FROM issues", []);
        assert!(refused.is_err(), "readers are query-only");
    }

    #[test]
    fn a_newer_schema_is_refused() {
        let conn = Connection::open_in_memory().unwrap();
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
        let err = migrate(&conn, Path::new("x.sqlite3")).unwrap_err();
        assert!(
            matches!(err, SqliteError::SchemaTooNew { found, .. } if found == SCHEMA_VERSION + 1),
            "{err}"
        );
    }
}
