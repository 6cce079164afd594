//! Issue history: one row per change, written by each write op inside its
//! own transaction (`record`), and the two reads of it (an issue's changes
//! by version, a run's across the board by time).

use crate::codec::{from_sql_u64, to_sql_u64};
use crate::error::OpError;
use corkboard_board::{
    Author, Change, ChangeKind, FieldChange, HistoryPage, IssueId, RunId, StoreError, TenantId,
    Timestamp,
};
use rusqlite::{Connection, Row, params};

/// Records `change` of `tenant`'s issue.
pub(crate) fn record(conn: &Connection, tenant: &TenantId, change: &Change) -> Result<(), OpError> {
    let by = serde_json::to_string(&change.by).map_err(internal)?;
    let fields = serde_json::to_string(&change.fields).map_err(internal)?;
    conn.prepare_cached(
        "INSERT INTO issue_history (tenant, issue_id, version, at, by_run, by_author, kind, fields) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![
        tenant.as_str(),
        change.issue.as_str(),
        to_sql_u64(change.version),
        change.at.as_millis(),
        change.by.run.as_str(),
        by,
        change.kind.as_str(),
        fields,
    ])?;
    Ok(())
}

fn internal(err: serde_json::Error) -> OpError {
    OpError::Store(StoreError::Internal(format!(
        "history not serialisable: {err}"
    )))
}

const COLUMNS: &str = "issue_id, version, at, by_author, kind, fields";

fn change_from_row(row: &Row<'_>) -> Result<Change, OpError> {
    let bad = |what: &str, err: String| {
        OpError::Store(StoreError::Internal(format!(
            "stored history {what} is invalid: {err}"
        )))
    };
    let kind: String = row.get(4)?;
    let kind = [
        ChangeKind::Created,
        ChangeKind::Updated,
        ChangeKind::Commented,
        ChangeKind::Claimed,
        ChangeKind::Released,
        ChangeKind::ClaimExpired,
        ChangeKind::ClaimRevoked,
    ]
    .into_iter()
    .find(|k| k.as_str() == kind)
    .ok_or_else(|| bad("kind", kind.clone()))?;
    let by: Author = serde_json::from_str(&row.get::<_, String>(3)?)
        .map_err(|e| bad("author", e.to_string()))?;
    let fields: Vec<FieldChange> = serde_json::from_str(&row.get::<_, String>(5)?)
        .map_err(|e| bad("fields", e.to_string()))?;
    Ok(Change {
        issue: IssueId::parse(row.get::<_, String>(0)?).map_err(|e| bad("issue", e.reason))?,
        version: from_sql_u64(row.get(1)?),
        at: Timestamp::from_millis(row.get(2)?),
        by,
        kind,
        fields,
    })
}

fn collect(
    stmt: &mut rusqlite::CachedStatement<'_>,
    params: impl rusqlite::Params,
) -> Result<Vec<Change>, OpError> {
    let mut rows = stmt.query(params)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.push(change_from_row(row)?);
    }
    Ok(out)
}

/// An issue's changes before version `before`, newest first.
pub(crate) fn issue_history(
    conn: &Connection,
    tenant: &TenantId,
    id: &IssueId,
    before: Option<u64>,
    limit: u32,
) -> Result<HistoryPage, OpError> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM issue_history WHERE tenant = ?1 AND issue_id = ?2 \
         AND version < ?3 ORDER BY version DESC LIMIT ?4"
    ))?;
    let changes = collect(
        &mut stmt,
        params![
            tenant.as_str(),
            id.as_str(),
            before.map_or(i64::MAX, to_sql_u64),
            i64::from(limit) + 1,
        ],
    )?;
    Ok(HistoryPage::cut(changes, limit, |c| {
        i64::try_from(c.version).unwrap_or(i64::MAX)
    }))
}

/// What `run` changed on `tenant`'s board before the instant `before`,
/// newest first.
pub(crate) fn run_history(
    conn: &Connection,
    tenant: &TenantId,
    run: &RunId,
    before: Option<Timestamp>,
    limit: u32,
) -> Result<HistoryPage, OpError> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM issue_history WHERE tenant = ?1 AND by_run = ?2 \
         AND at < ?3 ORDER BY at DESC, seq DESC LIMIT ?4"
    ))?;
    let changes = collect(
        &mut stmt,
        params![
            tenant.as_str(),
            run.as_str(),
            before.map_or(i64::MAX, Timestamp::as_millis),
            i64::from(limit) + 1,
        ],
    )?;
    Ok(HistoryPage::cut(changes, limit, |c| c.at.as_millis()))
}
