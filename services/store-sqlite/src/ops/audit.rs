//! The audit log (`audit`): appended in batches by the writer, listed
//! newest first by readers.

use super::WriteOp;
use crate::codec::{AUDIT_COLUMNS, audit_from_row, to_sql_u64};
use crate::error::OpError;
use corkboard_board::{AuditEntry, AuditQuery, AuditRecord, DefinitionHash, IssueId, TenantId};
use rusqlite::{Connection, ToSql};
use std::sync::LazyLock;

pub(crate) fn list_audit(
    conn: &Connection,
    tenant: &TenantId,
    query: &AuditQuery,
) -> Result<Vec<AuditRecord>, OpError> {
    let mut text = format!("SELECT {AUDIT_COLUMNS} FROM audit WHERE tenant = ?");
    let mut args: Vec<&str> = vec![tenant.as_str()];
    if let Some(run) = &query.run {
        text.push_str(" AND run = ?");
        args.push(run.as_str());
    }
    if let Some(issue) = &query.issue {
        text.push_str(" AND issue_id = ?");
        args.push(issue.as_str());
    }
    text.push_str(" ORDER BY at DESC, seq DESC LIMIT ?");
    let mut stmt = conn.prepare_cached(&text)?;
    let mut index = 0;
    for arg in &args {
        index += 1;
        stmt.raw_bind_parameter(index, arg)?;
    }
    stmt.raw_bind_parameter(index + 1, i64::from(query.limit))?;
    let mut rows = stmt.raw_query();
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.push(audit_from_row(row)?);
    }
    Ok(out)
}

/// Appends a batch of audit records.
#[derive(Debug)]
pub(crate) struct AppendAudit {
    pub entries: Vec<AuditEntry>,
}

impl WriteOp for AppendAudit {
    type Output = ();
    const NAME: &'static str = "append_audit";
    const AUDIT: bool = true;

    fn run(&self, conn: &Connection) -> Result<(), OpError> {
        append_audit(conn, &self.entries)
    }
}

/// Records per `INSERT` of [`append_audit`]: a statement opens cursors on
/// the table and its four indexes once, so a chunk of rows pays that
/// once instead of per record (a batch at read load holds about a hundred
/// records, services/bench/FINDINGS.md). A batch's remainder goes row by
/// row, so the writer's statement cache holds two shapes, not one per
/// length.
const ROWS_PER_INSERT: usize = 32;

/// Columns of a record, in the order [`bind_record`] binds them.
const INSERT_COLUMNS: &str = "INSERT INTO audit (at, tenant, run, grant_id, tool, outcome, \
     latency_micros, arguments_hash, issue_id, record_id, definition_hash) VALUES ";
const COLUMNS: usize = 11;

/// `INSERT` of `rows` records, skipping ids already stored.
fn insert_statement(rows: usize) -> String {
    let row = format!("({})", ["?"; COLUMNS].join(", "));
    let rows = vec![row; rows].join(", ");
    format!("{INSERT_COLUMNS}{rows} ON CONFLICT (record_id) DO NOTHING")
}

/// An entry whose id is already stored was written by an earlier attempt
/// whose answer was lost: it is skipped, not stored twice.
fn append_audit(conn: &Connection, entries: &[AuditEntry]) -> Result<(), OpError> {
    static CHUNK: LazyLock<String> = LazyLock::new(|| insert_statement(ROWS_PER_INSERT));
    static ONE: LazyLock<String> = LazyLock::new(|| insert_statement(1));
    let mut chunks = entries.chunks_exact(ROWS_PER_INSERT);
    for chunk in &mut chunks {
        insert(conn, &CHUNK, chunk)?;
    }
    for entry in chunks.remainder() {
        insert(conn, &ONE, std::slice::from_ref(entry))?;
    }
    Ok(())
}

/// Runs `sql` (an [`insert_statement`] of `entries.len()` rows).
fn insert(conn: &Connection, sql: &str, entries: &[AuditEntry]) -> Result<(), OpError> {
    let mut stmt = conn.prepare_cached(sql)?;
    for (row, entry) in entries.iter().enumerate() {
        bind_record(&mut stmt, row * COLUMNS, entry)?;
    }
    stmt.raw_execute()?;
    Ok(())
}

/// Binds `entry` to the parameters after the first `before`.
fn bind_record(
    stmt: &mut rusqlite::CachedStatement<'_>,
    before: usize,
    AuditEntry { id, record }: &AuditEntry,
) -> Result<(), OpError> {
    let values: [&dyn ToSql; COLUMNS] = [
        &record.at.as_millis(),
        &record.tenant.as_str(),
        &record.run.as_str(),
        &record.grant.as_str(),
        &record.tool,
        &record.outcome.as_str(),
        &to_sql_u64(record.latency_micros),
        &record.arguments_hash.as_str(),
        &record.issue.as_ref().map(IssueId::as_str),
        &id.as_str(),
        &record.definition_hash.as_ref().map(DefinitionHash::as_str),
    ];
    for (column, value) in values.into_iter().enumerate() {
        stmt.raw_bind_parameter(before + column + 1, value)?;
    }
    Ok(())
}
