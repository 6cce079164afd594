//! The grant ledger: grants (`grants`), their revocations and renewals,
//! the budgets they reserve (`grant_budget_use`), and the values used once
//! (`used_once`). A grant's recording and its revocation queue their
//! webhook events in the same op (undone with it).

use super::{WriteOp, webhooks};
use crate::codec::GRANT_COLUMNS;
use crate::codec::grant_from_row;
use crate::error::OpError;
use corkboard_board::{
    BudgetKind, Grant, GrantEvent, GrantId, IssueId, RunId, StoreError, TenantId, Timestamp,
    ValidationError,
};
use rusqlite::{Connection, params};
use std::collections::BTreeMap;
use std::sync::LazyLock;

// The statements of the point reads, built once: they run on every
// request, and their text is the statement cache's key.
static GRANT_BY_ID: LazyLock<String> =
    LazyLock::new(|| format!("SELECT {GRANT_COLUMNS} FROM grants WHERE id = ?1"));
static GRANT_BY_TOKEN_HASH: LazyLock<String> =
    LazyLock::new(|| format!("SELECT {GRANT_COLUMNS} FROM grants WHERE token_hash = ?1"));

fn grant_not_found(id: &GrantId) -> OpError {
    OpError::Store(StoreError::not_found(format!("grant {id}")))
}

pub(crate) fn load_grant(conn: &Connection, id: &GrantId) -> Result<Option<GrantEvent>, OpError> {
    let mut stmt = conn.prepare_cached(&GRANT_BY_ID)?;
    let mut rows = stmt.query(params![id.as_str()])?;
    match rows.next()? {
        Some(row) => Ok(Some(grant_from_row(row)?)),
        None => Ok(None),
    }
}

pub(crate) fn get_grant(conn: &Connection, id: &GrantId) -> Result<GrantEvent, OpError> {
    load_grant(conn, id)?.ok_or_else(|| grant_not_found(id))
}

pub(crate) fn grant_by_token_hash(
    conn: &Connection,
    token_hash: &str,
) -> Result<Option<GrantEvent>, OpError> {
    let mut stmt = conn.prepare_cached(&GRANT_BY_TOKEN_HASH)?;
    let mut rows = stmt.query(params![token_hash])?;
    match rows.next()? {
        Some(row) => Ok(Some(grant_from_row(row)?)),
        None => Ok(None),
    }
}

pub(crate) fn list_grants(
    conn: &Connection,
    tenant: &TenantId,
    run: Option<&RunId>,
    cursor: Option<&GrantId>,
    limit: u32,
) -> Result<Vec<GrantEvent>, OpError> {
    // One statement text per filter combination, so the run index is usable.
    let mut text = format!("SELECT {GRANT_COLUMNS} FROM grants WHERE tenant = ?");
    let mut args: Vec<&str> = vec![tenant.as_str()];
    if let Some(run) = run {
        text.push_str(" AND run = ?");
        args.push(run.as_str());
    }
    if let Some(cursor) = cursor {
        text.push_str(" AND id < ?");
        args.push(cursor.as_str());
    }
    text.push_str(" ORDER BY id DESC LIMIT ?");
    let mut stmt = conn.prepare_cached(&text)?;
    let mut index = 0;
    for arg in &args {
        index += 1;
        stmt.raw_bind_parameter(index, arg)?;
    }
    stmt.raw_bind_parameter(index + 1, i64::from(limit))?;
    let mut rows = stmt.raw_query();
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.push(grant_from_row(row)?);
    }
    Ok(out)
}

pub(crate) fn active_grants(conn: &Connection, now: Timestamp) -> Result<Vec<GrantEvent>, OpError> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {GRANT_COLUMNS} FROM grants \
         WHERE revoked_at IS NULL AND expires_at > ?1 ORDER BY id"
    ))?;
    let mut rows = stmt.query(params![now.as_millis()])?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.push(grant_from_row(row)?);
    }
    Ok(out)
}

pub(crate) fn revoked_grants(
    conn: &Connection,
    now: Timestamp,
) -> Result<Vec<GrantEvent>, OpError> {
    // No index: it runs when a registry is (re)verified, not per request.
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {GRANT_COLUMNS} FROM grants \
         WHERE revoked_at IS NOT NULL AND expires_at > ?1 ORDER BY id"
    ))?;
    let mut rows = stmt.query(params![now.as_millis()])?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.push(grant_from_row(row)?);
    }
    Ok(out)
}

/// Records a new grant; a retry of the same record is no change.
#[derive(Debug)]
pub(crate) struct RecordGrant {
    pub grant: Grant,
    pub token_hash: String,
}

impl WriteOp for RecordGrant {
    type Output = ();
    const NAME: &'static str = "record_grant";

    fn run(&self, conn: &Connection) -> Result<(), OpError> {
        record_grant(conn, &self.grant, &self.token_hash)?;
        webhooks::run_started(conn, &self.grant)
    }
}

/// Revokes a grant (the first revocation wins) and ends its claims.
#[derive(Debug)]
pub(crate) struct RecordRevocation {
    pub id: GrantId,
    pub by: String,
    pub at: Timestamp,
}

impl WriteOp for RecordRevocation {
    type Output = GrantEvent;
    const NAME: &'static str = "record_revocation";

    fn run(&self, conn: &Connection) -> Result<GrantEvent, OpError> {
        let event = record_revocation(conn, &self.id, &self.by, self.at)?;
        webhooks::run_ended(conn, &self.by, self.at, &event)?;
        Ok(event)
    }
}

/// Moves a live grant's expiry.
#[derive(Debug)]
pub(crate) struct RecordExpiry {
    pub id: GrantId,
    pub expires_at: Timestamp,
    pub now: Timestamp,
}

impl WriteOp for RecordExpiry {
    type Output = GrantEvent;
    const NAME: &'static str = "record_expiry";

    fn run(&self, conn: &Connection) -> Result<GrantEvent, OpError> {
        record_expiry(conn, &self.id, self.expires_at, self.now)
    }
}

/// Takes one unit of a grant's budget; answers whether it took.
#[derive(Debug)]
pub(crate) struct ReserveBudget {
    pub id: GrantId,
    pub kind: BudgetKind,
    pub limit: u32,
}

impl WriteOp for ReserveBudget {
    type Output = bool;
    const NAME: &'static str = "reserve_budget";

    fn run(&self, conn: &Connection) -> Result<bool, OpError> {
        reserve_budget(conn, &self.id, self.kind, self.limit)
    }
}

/// Gives one reserved unit of a grant's budget back.
#[derive(Debug)]
pub(crate) struct ReleaseBudget {
    pub id: GrantId,
    pub kind: BudgetKind,
}

impl WriteOp for ReleaseBudget {
    type Output = ();
    const NAME: &'static str = "release_budget";

    fn run(&self, conn: &Connection) -> Result<(), OpError> {
        release_budget(conn, &self.id, self.kind)
    }
}

/// Records a value as used; answers whether this was its first use.
#[derive(Debug)]
pub(crate) struct RecordFirstUse {
    pub kind: String,
    pub id: String,
    pub expires_at: Timestamp,
    pub now: Timestamp,
}

impl WriteOp for RecordFirstUse {
    type Output = bool;
    const NAME: &'static str = "record_first_use";

    fn run(&self, conn: &Connection) -> Result<bool, OpError> {
        record_first_use(conn, &self.kind, &self.id, self.expires_at, self.now)
    }
}

/// How many expired used-once records each first use sweeps: bounded work
/// per call, and more than one so the table shrinks faster than it grows.
const USED_ONCE_SWEEP: i64 = 8;

/// One conditional upsert: a new value inserts its row, a live one matches
/// the conflict but not its `WHERE` (nothing changes), an expired one is
/// replaced. `changes()` says whether it was a first use. A few expired
/// rows go first, in the same op (undone with it).
fn record_first_use(
    conn: &Connection,
    kind: &str,
    id: &str,
    expires_at: Timestamp,
    now: Timestamp,
) -> Result<bool, OpError> {
    let mut sweep = conn.prepare_cached(
        "DELETE FROM used_once WHERE (kind, id) IN \
         (SELECT kind, id FROM used_once WHERE expires_at <= ?1 ORDER BY expires_at LIMIT ?2)",
    )?;
    sweep.execute(params![now.as_millis(), USED_ONCE_SWEEP])?;
    let mut stmt = conn.prepare_cached(
        "INSERT INTO used_once (kind, id, expires_at) VALUES (?1, ?2, ?3) \
         ON CONFLICT (kind, id) DO UPDATE SET expires_at = excluded.expires_at \
         WHERE used_once.expires_at <= ?4",
    )?;
    let changed = stmt.execute(params![kind, id, expires_at.as_millis(), now.as_millis()])?;
    Ok(changed == 1)
}

/// Whether a live record of (`kind`, `id`) exists at `now`: one point
/// read through the primary key.
pub(crate) fn first_use_recorded(
    conn: &Connection,
    kind: &str,
    id: &str,
    now: Timestamp,
) -> Result<bool, OpError> {
    let mut stmt = conn.prepare_cached(
        "SELECT 1 FROM used_once WHERE kind = ?1 AND id = ?2 AND expires_at > ?3",
    )?;
    Ok(stmt.exists(params![kind, id, now.as_millis()])?)
}

fn record_grant(conn: &Connection, grant: &Grant, token_hash: &str) -> Result<(), OpError> {
    if let Some(existing) = load_grant(conn, &grant.id)? {
        // A retry of the same record (after an ambiguous failure) is fine;
        // anything else under the same id is a caller bug.
        if existing.grant == *grant && existing.token_hash == token_hash {
            return Ok(());
        }
        return Err(OpError::Store(StoreError::Invalid(ValidationError::new(
            "grant_id",
            "a different grant is already recorded under this id",
        ))));
    }
    if grant_by_token_hash(conn, token_hash)?.is_some() {
        return Err(OpError::Store(StoreError::Invalid(ValidationError::new(
            "token_hash",
            "this token is already recorded for another grant",
        ))));
    }
    let mut stmt = conn.prepare_cached(
        "INSERT INTO grants (id, tenant, run, capabilities, created_at, expires_at, created_by, \
         token_hash, revoked_at, revoked_by, budgets, min_integrity) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, NULL, NULL, ?9, ?10)",
    )?;
    let budgets = serde_json::to_string(&grant.budgets)
        .map_err(|e| OpError::Store(StoreError::Internal(format!("cannot encode: {e}"))))?;
    stmt.execute(params![
        grant.id.as_str(),
        grant.tenant.as_str(),
        grant.run.as_str(),
        grant.capabilities.to_csv(),
        grant.created_at.as_millis(),
        grant.expires_at.as_millis(),
        grant.created_by,
        token_hash,
        budgets,
        grant.min_integrity.map(|level| level.as_str()),
    ])?;
    Ok(())
}

/// One conditional upsert: a first reservation inserts the row at 1 (when
/// the limit allows any), later ones add one only while below the limit.
/// `changes()` says whether it took.
fn reserve_budget(
    conn: &Connection,
    id: &GrantId,
    kind: BudgetKind,
    limit: u32,
) -> Result<bool, OpError> {
    if limit == 0 {
        return Ok(false);
    }
    let mut stmt = conn.prepare_cached(
        "INSERT INTO grant_budget_use (grant_id, kind, used) VALUES (?1, ?2, 1) \
         ON CONFLICT (grant_id, kind) DO UPDATE SET used = used + 1 WHERE used < ?3",
    )?;
    let changed = stmt.execute(params![id.as_str(), kind.as_str(), i64::from(limit)])?;
    Ok(changed == 1)
}

fn release_budget(conn: &Connection, id: &GrantId, kind: BudgetKind) -> Result<(), OpError> {
    let mut stmt = conn.prepare_cached(
        "UPDATE grant_budget_use SET used = used - 1 WHERE grant_id = ?1 AND kind = ?2 AND used > 0",
    )?;
    stmt.execute(params![id.as_str(), kind.as_str()])?;
    Ok(())
}

pub(crate) fn budget_used(
    conn: &Connection,
    id: &GrantId,
) -> Result<BTreeMap<BudgetKind, u32>, OpError> {
    let mut stmt =
        conn.prepare_cached("SELECT kind, used FROM grant_budget_use WHERE grant_id = ?1")?;
    let mut rows = stmt.query(params![id.as_str()])?;
    let mut out = BTreeMap::new();
    while let Some(row) = rows.next()? {
        let kind = BudgetKind::parse(&row.get::<_, String>(0)?).map_err(|e| {
            OpError::Store(StoreError::Internal(format!(
                "stored budget of grant {id} is invalid: {e}"
            )))
        })?;
        let used: i64 = row.get(1)?;
        out.insert(kind, u32::try_from(used).unwrap_or(u32::MAX));
    }
    Ok(out)
}

fn record_revocation(
    conn: &Connection,
    id: &GrantId,
    by: &str,
    at: Timestamp,
) -> Result<GrantEvent, OpError> {
    // First revocation wins: a later one matches no row and changes nothing.
    let mut stmt = conn.prepare_cached(
        "UPDATE grants SET revoked_at = ?1, revoked_by = ?2 WHERE id = ?3 AND revoked_at IS NULL",
    )?;
    stmt.execute(params![at.as_millis(), by, id.as_str()])?;
    // The grant's claims end with it, in the same transaction: the issues
    // go back to the pool (a change, so their versions grow, and each
    // issue's history records it).
    let ended: Vec<(String, String)> = conn
        .prepare_cached("SELECT tenant, id FROM issues WHERE claim_grant = ?1")?
        .query_map(params![id.as_str()], |row| Ok((row.get(0)?, row.get(1)?)))?
        .collect::<Result<_, _>>()?;
    let mut before = Vec::with_capacity(ended.len());
    for (tenant, issue) in &ended {
        let bad = |e: ValidationError| OpError::Store(e.into());
        let tenant = TenantId::parse(tenant.as_str()).map_err(bad)?;
        let issue = IssueId::parse(issue.as_str()).map_err(bad)?;
        let stored = super::claims::stored_claim(conn, &tenant, &issue)?;
        before.push((tenant, issue, stored));
    }
    let mut clear = conn.prepare_cached(
        "UPDATE issues SET claim_run = NULL, claim_grant = NULL, claimed_at = NULL, \
         claim_expires_at = NULL, version = version + 1, updated_at = max(updated_at, ?1) \
         WHERE claim_grant = ?2",
    )?;
    clear.execute(params![at.as_millis(), id.as_str()])?;
    let revoker = RunId::parse(by).map_or_else(
        |_| super::claims::system_author(),
        |run| corkboard_board::run_author(&run),
    );
    for (tenant, issue, claim) in before {
        let now = super::issues::issue_row(conn, &tenant, &issue)?;
        super::history::record(
            conn,
            &tenant,
            &corkboard_board::Change::claim(
                corkboard_board::ChangeKind::ClaimRevoked,
                &issue,
                now.version,
                now.updated_at,
                &revoker,
                claim.as_ref(),
                None,
            ),
        )?;
    }
    get_grant(conn, id)
}

fn record_expiry(
    conn: &Connection,
    id: &GrantId,
    expires_at: Timestamp,
    now: Timestamp,
) -> Result<GrantEvent, OpError> {
    // Live at `now` in the same statement: a revoked or expired grant
    // matches no row and stays as it is.
    let mut stmt = conn.prepare_cached(
        "UPDATE grants SET expires_at = ?1 WHERE id = ?2 AND revoked_at IS NULL AND expires_at > ?3",
    )?;
    stmt.execute(params![
        expires_at.as_millis(),
        id.as_str(),
        now.as_millis()
    ])?;
    get_grant(conn, id)
}
