//! Changes to the full-text index (`issue_search`), held back until the
//! end of a write group.
//!
//! FTS5 writes the terms it holds in memory to a new segment of its index
//! whenever a savepoint or a statement transaction opens while it is part
//! of the transaction (SQLite asks every virtual table in it to remember
//! its state). Ops open statement transactions (any statement firing
//! triggers does) and, when a group runs again after a failure, a
//! savepoint each, so writing the index at once made a segment per
//! create, comment or retitle, and FTS5 then spent its time merging them. The ops record
//! their index changes in a temporary table of the writer's connection
//! instead, one row per index row (a create, the last title and body, the
//! comments' words appended in order), and the writer applies them with
//! two statements after the group's last op and before its `COMMIT`
//! ([`apply`]): a group makes one or two segments, whatever its size.
//!
//! Nothing is lost or seen late: the staged rows are in the group's
//! transaction (a failed op, rolled back with its group or to its
//! savepoint, takes its rows with it), [`apply`] runs before the commit (search sees every write once its
//! transaction commits, as before), and a failure to apply fails the
//! whole group. No op reads the index's contents while writing, so none
//! sees it behind (the one read, of its largest rowid, counts the staged
//! new rows too: [`stage_new`]).

use crate::error::OpError;
use rusqlite::{Connection, params};

/// The staging table, created on the writer's connection when it opens
/// (temporary tables live and die with their connection; `temp_store` is
/// memory). `rowid` is the index row; `new` marks a row to insert; a
/// `NULL` title/body leaves the indexed one as it is; `comments` holds the
/// words to append.
pub(crate) const CREATE_STAGING: &str = "CREATE TEMP TABLE IF NOT EXISTS search_staged (
    rowid    INTEGER PRIMARY KEY,
    new      INTEGER NOT NULL,
    tenant   TEXT,
    issue_id TEXT,
    title    TEXT,
    body     TEXT,
    comments TEXT
)";

/// Stages the index row of a new issue and returns its rowid: past every
/// row the index holds and every new row staged in this group (the
/// group's write lock keeps other connections from adding any meanwhile).
pub(crate) fn stage_new(
    conn: &Connection,
    tenant: &str,
    issue_id: &str,
    title: &str,
    body: &str,
) -> Result<i64, OpError> {
    let rowid: i64 = conn
        .prepare_cached(
            "SELECT coalesce(
                 (SELECT max(rowid) FROM temp.search_staged WHERE new = 1),
                 (SELECT rowid FROM main.issue_search ORDER BY rowid DESC LIMIT 1),
                 0) + 1",
        )?
        .query_row([], |row| row.get(0))?;
    conn.prepare_cached(
        "INSERT INTO temp.search_staged (rowid, new, tenant, issue_id, title, body, comments) \
         VALUES (?1, 1, ?2, ?3, ?4, ?5, NULL)",
    )?
    .execute(params![rowid, tenant, issue_id, title, body])?;
    Ok(rowid)
}

/// Stages a new title and body for index row `rowid`.
pub(crate) fn stage_text(
    conn: &Connection,
    rowid: i64,
    title: &str,
    body: &str,
) -> Result<(), OpError> {
    conn.prepare_cached(
        "INSERT INTO temp.search_staged (rowid, new, title, body) VALUES (?1, 0, ?2, ?3) \
         ON CONFLICT (rowid) DO UPDATE SET title = excluded.title, body = excluded.body",
    )?
    .execute(params![rowid, title, body])?;
    Ok(())
}

/// Stages a comment's words, appended after those already indexed (and
/// staged) for index row `rowid`.
pub(crate) fn stage_comment(conn: &Connection, rowid: i64, words: &str) -> Result<(), OpError> {
    conn.prepare_cached(
        "INSERT INTO temp.search_staged (rowid, new, comments) VALUES (?1, 0, ?2) \
         ON CONFLICT (rowid) DO UPDATE SET comments = CASE \
             WHEN search_staged.comments IS NULL OR search_staged.comments = '' \
                 THEN excluded.comments \
             ELSE search_staged.comments || ' ' || excluded.comments END",
    )?
    .execute(params![rowid, words])?;
    Ok(())
}

/// The changed rows, picked by rowid, their values from correlated
/// look-ups: `UPDATE ... FROM` would scan the whole index (SQLite puts the
/// virtual table outside the join), linear in the board at every group.
const UPDATE_CHANGED: &str = "UPDATE main.issue_search SET \
     title = coalesce((SELECT s.title FROM temp.search_staged s \
                       WHERE s.rowid = issue_search.rowid), title), \
     body = coalesce((SELECT s.body FROM temp.search_staged s \
                      WHERE s.rowid = issue_search.rowid), body), \
     comments = (SELECT CASE \
             WHEN s.comments IS NULL OR s.comments = '' THEN issue_search.comments \
             WHEN issue_search.comments = '' THEN s.comments \
             ELSE issue_search.comments || ' ' || s.comments END \
         FROM temp.search_staged s WHERE s.rowid = issue_search.rowid) \
 WHERE rowid IN (SELECT rowid FROM temp.search_staged WHERE new = 0)";

/// Writes everything staged into `issue_search` and empties the staging
/// table: the new rows with one statement, the changed ones with another.
/// Runs inside the group's transaction, after its last op.
pub(crate) fn apply(conn: &Connection) -> Result<(), rusqlite::Error> {
    let staged: bool = conn
        .prepare_cached("SELECT EXISTS (SELECT 1 FROM temp.search_staged)")?
        .query_row([], |row| row.get(0))?;
    if !staged {
        return Ok(());
    }
    conn.prepare_cached(
        "INSERT INTO main.issue_search (rowid, tenant, issue_id, title, body, comments) \
         SELECT rowid, tenant, issue_id, title, body, coalesce(comments, '') \
         FROM temp.search_staged WHERE new = 1 ORDER BY rowid",
    )?
    .execute([])?;
    conn.prepare_cached(UPDATE_CHANGED)?.execute([])?;
    conn.prepare_cached("DELETE FROM temp.search_staged")?
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
             FROM temp.search_staged AS s WHERE issue_search.rowid = s.rowid",
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
