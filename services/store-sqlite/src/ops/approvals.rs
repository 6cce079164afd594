//! Approval items: one row per item, the item itself as JSON beside the
//! columns its reads filter on. A decision and a use are each one write
//! op: the writer runs it inside its `BEGIN IMMEDIATE` transaction, so the
//! read and the update it makes cannot interleave with another writer's,
//! in this process or another one on the same file.

use super::{WriteOp, webhooks};
use crate::error::OpError;
use corkboard_board::webhook::WebhookEvent;
use corkboard_board::{
    ApprovalId, ApprovalItem, ApprovalStatus, Decision, RunId, StoreError, TenantId, Timestamp,
};
use rusqlite::{Connection, OptionalExtension, params};

fn decode(json: &str) -> Result<ApprovalItem, OpError> {
    serde_json::from_str(json)
        .map_err(|e| OpError::Store(StoreError::Internal(format!("unreadable approval: {e}"))))
}

fn encode(item: &ApprovalItem) -> Result<String, OpError> {
    serde_json::to_string(item)
        .map_err(|e| OpError::Store(StoreError::Internal(format!("cannot encode approval: {e}"))))
}

pub(crate) fn load(
    conn: &Connection,
    tenant: &TenantId,
    id: &ApprovalId,
) -> Result<Option<ApprovalItem>, OpError> {
    let mut stmt =
        conn.prepare_cached("SELECT item FROM approvals WHERE tenant = ?1 AND id = ?2")?;
    let json: Option<String> = stmt
        .query_row(params![tenant.as_str(), id.as_str()], |row| row.get(0))
        .optional()?;
    json.as_deref().map(decode).transpose()
}

pub(crate) fn list(
    conn: &Connection,
    tenant: &TenantId,
    status: Option<ApprovalStatus>,
    limit: u32,
) -> Result<Vec<ApprovalItem>, OpError> {
    let mut stmt = conn.prepare_cached(
        "SELECT item FROM approvals WHERE tenant = ?1 AND (?2 IS NULL OR status = ?2) \
         ORDER BY id DESC LIMIT ?3",
    )?;
    let rows = stmt.query_map(
        params![tenant.as_str(), status.map(ApprovalStatus::as_str), limit],
        |row| row.get::<_, String>(0),
    )?;
    rows.map(|json| decode(&json?)).collect()
}

pub(crate) fn for_call(
    conn: &Connection,
    tenant: &TenantId,
    run: &RunId,
    tool: &str,
    digest: &str,
) -> Result<Option<ApprovalItem>, OpError> {
    let mut stmt = conn.prepare_cached(
        "SELECT item FROM approvals WHERE tenant = ?1 AND run = ?2 AND digest = ?3 \
         AND tool = ?4 AND status <> 'used' ORDER BY id DESC LIMIT 1",
    )?;
    let json: Option<String> = stmt
        .query_row(
            params![tenant.as_str(), run.as_str(), digest, tool],
            |row| row.get(0),
        )
        .optional()?;
    json.as_deref().map(decode).transpose()
}

fn store(conn: &Connection, item: &ApprovalItem) -> Result<(), OpError> {
    let mut stmt = conn.prepare_cached(
        "INSERT INTO approvals (tenant, id, run, tool, digest, status, expires_at, item) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) \
         ON CONFLICT (tenant, id) DO UPDATE SET status = excluded.status, item = excluded.item",
    )?;
    stmt.execute(params![
        item.tenant.as_str(),
        item.id.as_str(),
        item.run.as_str(),
        item.tool,
        item.digest,
        item.status.as_str(),
        item.expires_at.as_millis(),
        encode(item)?,
    ])?;
    Ok(())
}

/// Stores a new item.
#[derive(Debug)]
pub(crate) struct PutApproval(pub ApprovalItem);

impl WriteOp for PutApproval {
    type Output = ();
    const NAME: &'static str = "put_approval";

    fn run(&self, conn: &Connection) -> Result<(), OpError> {
        let new = load(conn, &self.0.tenant, &self.0.id)?.is_none();
        store(conn, &self.0)?;
        if new {
            webhooks::approval_event(conn, WebhookEvent::ApprovalRequested, &self.0)?;
        }
        Ok(())
    }
}

/// A person's decision, taken only by a pending, unexpired item.
#[derive(Debug)]
pub(crate) struct DecideApproval {
    pub tenant: TenantId,
    pub id: ApprovalId,
    pub decision: Decision,
}

impl WriteOp for DecideApproval {
    type Output = ApprovalItem;
    const NAME: &'static str = "decide_approval";

    fn run(&self, conn: &Connection) -> Result<ApprovalItem, OpError> {
        let mut item = load(conn, &self.tenant, &self.id)?.ok_or_else(|| {
            OpError::Store(StoreError::not_found(format!("approval {}", self.id)))
        })?;
        if item.decide(self.decision.clone()).is_ok() {
            store(conn, &item)?;
            webhooks::approval_event(conn, WebhookEvent::ApprovalDecided, &item)?;
        }
        Ok(item)
    }
}

/// Spends an approved, unexpired item.
#[derive(Debug)]
pub(crate) struct UseApproval {
    pub tenant: TenantId,
    pub id: ApprovalId,
    pub now: Timestamp,
}

impl WriteOp for UseApproval {
    type Output = bool;
    const NAME: &'static str = "use_approval";

    fn run(&self, conn: &Connection) -> Result<bool, OpError> {
        let Some(mut item) = load(conn, &self.tenant, &self.id)? else {
            return Ok(false);
        };
        if item.status != ApprovalStatus::Approved || item.is_expired_at(self.now) {
            return Ok(false);
        }
        item.status = ApprovalStatus::Used;
        store(conn, &item)?;
        Ok(true)
    }
}
