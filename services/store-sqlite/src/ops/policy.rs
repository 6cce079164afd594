//! Tenants' own grant settings ([`GrantPolicy`]), one JSON row per tenant
//! in `tenant_settings`: JSON so that settings added later (per-run
//! budgets) need no migration of their own.

use super::WriteOp;
use crate::error::OpError;
use corkboard_board::{GrantPolicy, StoreError, TenantId};
use rusqlite::{Connection, OptionalExtension, params};

pub(crate) fn load_policy(conn: &Connection, tenant: &TenantId) -> Result<GrantPolicy, OpError> {
    let mut stmt =
        conn.prepare_cached("SELECT grant_policy FROM tenant_settings WHERE tenant = ?1")?;
    let json: Option<String> = stmt
        .query_row(params![tenant.as_str()], |row| row.get(0))
        .optional()?;
    match json {
        None => Ok(GrantPolicy::default()),
        Some(json) => serde_json::from_str(&json).map_err(|e| {
            OpError::Store(StoreError::Internal(format!(
                "unreadable grant settings of tenant {tenant}: {e}"
            )))
        }),
    }
}

/// Replaces a tenant's grant settings.
#[derive(Debug)]
pub(crate) struct SetGrantPolicy {
    pub tenant: TenantId,
    pub policy: GrantPolicy,
}

impl WriteOp for SetGrantPolicy {
    type Output = ();
    const NAME: &'static str = "set_grant_policy";

    fn run(&self, conn: &Connection) -> Result<(), OpError> {
        store_policy(conn, &self.tenant, &self.policy)
    }
}

fn store_policy(conn: &Connection, tenant: &TenantId, policy: &GrantPolicy) -> Result<(), OpError> {
    let json = serde_json::to_string(policy)
        .map_err(|e| OpError::Store(StoreError::Internal(format!("cannot encode: {e}"))))?;
    let mut stmt = conn.prepare_cached(
        "INSERT INTO tenant_settings (tenant, grant_policy) VALUES (?1, ?2) \
         ON CONFLICT (tenant) DO UPDATE SET grant_policy = excluded.grant_policy",
    )?;
    stmt.execute(params![tenant.as_str(), json])?;
    Ok(())
}
