//! Changes to the full-text index (`issue_search`), written first to a
//! table of pending rows and moved into the index together, about every
//! `SqliteOptions::search_index_every` and before a search of their tenant.
//!
//! FTS5 writes the terms it holds in memory to a new segment of its index
//! at every commit, and whenever a savepoint or a statement transaction
//! opens while it is part of the transaction (SQLite asks every virtual
//! table in it to remember its state), and then merges those segments.
//! Writing the index at once made a segment per create (ops open statement
//! transactions: any statement firing triggers does); writing it at the end
//! of each group still made one per group, about a quarter of the pages a
//! create writes at c=64 (FINDINGS). The ops record their index changes in
//! `search_pending` instead, one row per index row (a create, the last
//! title and body, the comments' words appended in order), and the board's
//! writer moves them into the index with two statements ([`apply`]) at the
//! end of the first group at least `search_index_every` (25 ms) after its
//! last move: one segment for several groups, and a move short enough that
//! the writes waiting behind it hardly notice (every 250 ms, a move of
//! about 1,500 creates' rows under a load of creates set their p99:
//! services/bench/FINDINGS.md).
//!
//! Nothing is lost or seen late:
//! - the pending rows are written in their op's transaction (a failed op,
//!   rolled back with its group or to its savepoint, takes its rows with
//!   it; a committed one's rows are as durable as its write), and [`apply`]
//!   moves them in one transaction of the writer's;
//! - a search first asks whether a row of its tenant is pending and, if
//!   one is, has the writer move them all before it reads
//!   (`SqliteStore::search_issues`, `ops::search::ApplyPendingIndexRows`):
//!   a search sees every write committed before it began, as when the
//!   index was written in the write's own transaction, and waits for its
//!   own tenant's writes only;
//! - no op reads the index's contents while writing (the one read, of its
//!   largest rowid, counts the pending new rows too: [`stage_new`]), and
//!   pending rows of any process are moved by whichever writer comes first.

use crate::error::OpError;
use rusqlite::{Connection, params};

/// Stages the index row of a new issue and returns its rowid: past every
/// row the index holds and every pending one (the group's write lock keeps
/// other connections from adding any meanwhile).
pub(crate) fn stage_new(
    conn: &Connection,
    tenant: &str,
    issue_id: &str,
    title: &str,
    body: &str,
) -> Result<i64, OpError> {
    let rowid: i64 = conn
        .prepare_cached(
            "SELECT max(
                 coalesce((SELECT max(rowid) FROM main.search_pending), 0),
                 coalesce((SELECT rowid FROM main.issue_search ORDER BY rowid DESC LIMIT 1), 0)
             ) + 1",
        )?
        .query_row([], |row| row.get(0))?;
    conn.prepare_cached(
        "INSERT INTO main.search_pending (rowid, new, tenant, issue_id, title, body, comments) \
         VALUES (?1, 1, ?2, ?3, ?4, ?5, NULL)",
    )?
    .execute(params![rowid, tenant, issue_id, title, body])?;
    Ok(rowid)
}

/// Stages a new title and body for index row `rowid` of `tenant`.
pub(crate) fn stage_text(
    conn: &Connection,
    tenant: &str,
    rowid: i64,
    title: &str,
    body: &str,
) -> Result<(), OpError> {
    conn.prepare_cached(
        "INSERT INTO main.search_pending (rowid, new, tenant, title, body) \
         VALUES (?1, 0, ?2, ?3, ?4) \
         ON CONFLICT (rowid) DO UPDATE SET title = excluded.title, body = excluded.body",
    )?
    .execute(params![rowid, tenant, title, body])?;
    Ok(())
}

/// Stages a comment's words, appended after those already indexed (and
/// pending) for index row `rowid` of `tenant`.
pub(crate) fn stage_comment(
    conn: &Connection,
    tenant: &str,
    rowid: i64,
    words: &str,
) -> Result<(), OpError> {
    conn.prepare_cached(
        "INSERT INTO main.search_pending (rowid, new, tenant, comments) VALUES (?1, 0, ?2, ?3) \
         ON CONFLICT (rowid) DO UPDATE SET comments = CASE \
             WHEN search_pending.comments IS NULL OR search_pending.comments = '' \
                 THEN excluded.comments \
             ELSE search_pending.comments || ' ' || excluded.comments END",
    )?
    .execute(params![rowid, tenant, words])?;
    Ok(())
}

/// The changed rows, picked by rowid, their values from correlated
/// look-ups: `UPDATE ... FROM` would scan the whole index (SQLite puts the
/// virtual table outside the join), linear in the board at every group.
const UPDATE_CHANGED: &str = "UPDATE main.issue_search SET \
     title = coalesce((SELECT s.title FROM main.search_pending s \
                       WHERE s.rowid = issue_search.rowid), title), \
     body = coalesce((SELECT s.body FROM main.search_pending s \
                      WHERE s.rowid = issue_search.rowid), body), \
     comments = (SELECT CASE \
             WHEN s.comments IS NULL OR s.comments = '' THEN issue_search.comments \
             WHEN issue_search.comments = '' THEN s.comments \
             ELSE issue_search.comments || ' ' || s.comments END \
         FROM main.search_pending s WHERE s.rowid = issue_search.rowid) \
 WHERE rowid IN (SELECT rowid FROM main.search_pending WHERE new = 0)";

/// Whether any index row is pending.
fn any_pending(conn: &Connection) -> Result<bool, rusqlite::Error> {
    conn.prepare_cached("SELECT EXISTS (SELECT 1 FROM main.search_pending)")?
        .query_row([], |row| row.get(0))
}

/// Whether an index row of `tenant` is pending: a tenant's search waits
/// for its own writes only, never for another tenant's.
pub(crate) fn tenant_pending(conn: &Connection, tenant: &str) -> Result<bool, rusqlite::Error> {
    conn.prepare_cached("SELECT EXISTS (SELECT 1 FROM main.search_pending WHERE tenant = ?1)")?
        .query_row([tenant], |row| row.get(0))
}

/// Moves every pending row into `issue_search` and empties the pending
/// table: the new rows with one statement, the changed ones with another.
/// Runs inside a write transaction, after the ops that staged them.
pub(crate) fn apply(conn: &Connection) -> Result<(), rusqlite::Error> {
    if !any_pending(conn)? {
        return Ok(());
    }
    conn.prepare_cached(
        "INSERT INTO main.issue_search (rowid, tenant, issue_id, title, body, comments) \
         SELECT rowid, tenant, issue_id, title, body, coalesce(comments, '') \
         FROM main.search_pending WHERE new = 1 ORDER BY rowid",
    )?
    .execute([])?;
    conn.prepare_cached(UPDATE_CHANGED)?.execute([])?;
    conn.prepare_cached("DELETE FROM main.search_pending")?
        .execute([])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn applying_changed_rows_looks_them_up_by_rowid_instead_of_scanning_the_index() {
        let dir = tempfile::tempdir().unwrap();
        let conn =
            crate::schema::open_writer(&dir.path().join("p.sqlite3"), &Default::default()).unwrap();
        let plan = crate::query::query_plan(&conn, UPDATE_CHANGED, []);
        let on_index: Vec<&String> = plan
            .iter()
            .filter(|line| line.contains("issue_search"))
            .collect();
        assert!(!on_index.is_empty(), "{plan:?}");
        // FTS5 names a rowid look-up `=` in its index string; a full scan
        // has none.
        assert!(
            on_index.iter().all(|line| line.ends_with('=')),
            "the update scans the index: {plan:?}"
        );
        // The check can fail: the `UPDATE ... FROM` form scans.
        let scanning = crate::query::query_plan(
            &conn,
            "UPDATE main.issue_search SET title = s.title \
             FROM main.search_pending AS s WHERE issue_search.rowid = s.rowid",
            [],
        );
        assert!(
            scanning
                .iter()
                .any(|line| line.contains("issue_search") && !line.ends_with('=')),
            "{scanning:?}"
        );
    }
}
