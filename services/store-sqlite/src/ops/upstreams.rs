//! The `upstreams` table: a tenant's upstream MCP servers, credentials
//! sealed (the store keeps the ciphertext it is given and never sees the
//! clear value); and `tool_pins`, their tools' pinned definitions (what
//! a listing and an approval change is decided by the domain's
//! `observe_tool_pins` and `approve_tool_pin`; the `upstream.tool_changed`
//! deliveries are queued in the same transaction).

use super::{WriteOp, webhooks};
use crate::error::OpError;
use corkboard_board::{
    DefinitionHash, HeaderName, SealedCredential, StoreError, TenantId, Timestamp, ToolApproval,
    ToolPin, ToolSighting, UPSTREAMS_PER_TENANT_MAX, Upstream, UpstreamName, UpstreamUrl,
    ValidationError,
};
use rusqlite::{Connection, Row, params};

/// Adds or replaces one of a tenant's upstreams (bounded per tenant).
#[derive(Debug)]
pub(crate) struct PutUpstream {
    pub upstream: Upstream,
}

impl WriteOp for PutUpstream {
    type Output = ();
    const NAME: &'static str = "put_upstream";

    fn run(&self, conn: &Connection) -> Result<(), OpError> {
        put_upstream(conn, &self.upstream)
    }
}

/// Removes one of a tenant's upstreams.
#[derive(Debug)]
pub(crate) struct DeleteUpstream {
    pub tenant: TenantId,
    pub name: UpstreamName,
}

impl WriteOp for DeleteUpstream {
    type Output = ();
    const NAME: &'static str = "delete_upstream";

    fn run(&self, conn: &Connection) -> Result<(), OpError> {
        delete_upstream(conn, &self.tenant, &self.name)
    }
}

/// Inserts or replaces one upstream in one statement, so a reader sees the
/// old record or the new one, never a mix.
fn put_upstream(conn: &Connection, upstream: &Upstream) -> Result<(), OpError> {
    let others: i64 = conn
        .prepare_cached("SELECT count(*) FROM upstreams WHERE tenant = ?1 AND name <> ?2")?
        .query_row(
            params![upstream.tenant.as_str(), upstream.name.as_str()],
            |row| row.get(0),
        )?;
    if usize::try_from(others).unwrap_or(usize::MAX) >= UPSTREAMS_PER_TENANT_MAX {
        return Err(OpError::Store(StoreError::Invalid(ValidationError::new(
            "name",
            format!(
                "tenant {} already has {UPSTREAMS_PER_TENANT_MAX} upstreams, the limit",
                upstream.tenant
            ),
        ))));
    }
    conn.prepare_cached(
        "INSERT OR REPLACE INTO upstreams (tenant, name, url, header, credential, created_at, \
         created_by, trust_first_listing) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![
        upstream.tenant.as_str(),
        upstream.name.as_str(),
        upstream.url.as_str(),
        upstream.header.as_str(),
        upstream.credential.as_bytes(),
        upstream.created_at.as_millis(),
        upstream.created_by,
        upstream.trust_first_listing,
    ])?;
    Ok(())
}

fn delete_upstream(
    conn: &Connection,
    tenant: &TenantId,
    name: &UpstreamName,
) -> Result<(), OpError> {
    let gone = conn
        .prepare_cached("DELETE FROM upstreams WHERE tenant = ?1 AND name = ?2")?
        .execute(params![tenant.as_str(), name.as_str()])?;
    if gone == 0 {
        return Err(OpError::Store(StoreError::not_found(format!(
            "upstream {name}"
        ))));
    }
    conn.prepare_cached("DELETE FROM tool_pins WHERE tenant = ?1 AND upstream = ?2")?
        .execute(params![tenant.as_str(), name.as_str()])?;
    Ok(())
}

pub(crate) fn list_upstreams(
    conn: &Connection,
    tenant: &TenantId,
) -> Result<Vec<Upstream>, OpError> {
    let mut stmt = conn.prepare_cached(
        "SELECT tenant, name, url, header, credential, created_at, created_by, \
         trust_first_listing FROM upstreams WHERE tenant = ?1 ORDER BY name",
    )?;
    let mut rows = stmt.query(params![tenant.as_str()])?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.push(from_row(row)?);
    }
    Ok(out)
}

fn from_row(row: &Row<'_>) -> Result<Upstream, OpError> {
    let bad =
        |e: ValidationError| OpError::Store(StoreError::Internal(format!("stored upstream: {e}")));
    Ok(Upstream {
        tenant: TenantId::parse(row.get::<_, String>(0)?).map_err(bad)?,
        name: UpstreamName::parse(&row.get::<_, String>(1)?).map_err(bad)?,
        url: UpstreamUrl::parse(&row.get::<_, String>(2)?).map_err(bad)?,
        header: HeaderName::parse(&row.get::<_, String>(3)?).map_err(bad)?,
        credential: SealedCredential::from_bytes(row.get(4)?),
        created_at: Timestamp::from_millis(row.get(5)?),
        created_by: row.get(6)?,
        trust_first_listing: row.get(7)?,
    })
}

/// Records what one listing of an upstream showed (see the store method).
#[derive(Debug)]
pub(crate) struct ObserveTools {
    pub tenant: TenantId,
    pub upstream: UpstreamName,
    pub sightings: Vec<ToolSighting>,
    pub trust_first_listing: bool,
    pub at: Timestamp,
}

impl WriteOp for ObserveTools {
    type Output = Vec<ToolPin>;
    const NAME: &'static str = "observe_tools";

    fn run(&self, conn: &Connection) -> Result<Vec<ToolPin>, OpError> {
        // Read and written under the writer's one transaction, so two
        // processes' listings of the same change write it (and queue its
        // event) once.
        let current = list_tool_pins(conn, &self.tenant, &self.upstream)?;
        let changes = corkboard_board::observe_tool_pins(
            &self.tenant,
            &self.upstream,
            &current,
            &self.sightings,
            self.trust_first_listing,
            self.at,
        );
        if changes.is_empty() {
            return Ok(current);
        }
        for (pin, pending) in &changes {
            put_pin(conn, pin)?;
            if *pending {
                webhooks::upstream_tool_changed(conn, pin)?;
            }
        }
        list_tool_pins(conn, &self.tenant, &self.upstream)
    }
}

/// Approves one definition of one tool (see the store method).
#[derive(Debug)]
pub(crate) struct ApproveTool {
    pub tenant: TenantId,
    pub upstream: UpstreamName,
    pub tool: String,
    pub hash: DefinitionHash,
    pub by: String,
    pub at: Timestamp,
}

impl WriteOp for ApproveTool {
    type Output = ToolPin;
    const NAME: &'static str = "approve_tool";

    fn run(&self, conn: &Connection) -> Result<ToolPin, OpError> {
        let pin = list_tool_pins(conn, &self.tenant, &self.upstream)?
            .into_iter()
            .find(|p| p.tool == self.tool)
            .ok_or_else(|| {
                OpError::Store(StoreError::not_found(format!(
                    "tool {} of upstream {}",
                    self.tool, self.upstream
                )))
            })?;
        let approved = corkboard_board::approve_tool_pin(&pin, &self.hash, &self.by, self.at)
            .map_err(|e| OpError::Store(StoreError::Invalid(e)))?;
        put_pin(conn, &approved)?;
        Ok(approved)
    }
}

fn put_pin(conn: &Connection, pin: &ToolPin) -> Result<(), OpError> {
    let approved = pin.approved.as_ref();
    conn.prepare_cached(
        "INSERT OR REPLACE INTO tool_pins (tenant, upstream, tool, seen_hash, seen_definition, \
         seen_at, approved_hash, approved_definition, approved_by, approved_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    )?
    .execute(params![
        pin.tenant.as_str(),
        pin.upstream.as_str(),
        pin.tool,
        pin.seen.as_str(),
        pin.definition,
        pin.seen_at.as_millis(),
        approved.map(|a| a.hash.as_str()),
        approved.map(|a| a.definition.as_str()),
        approved.map(|a| a.by.as_str()),
        approved.map(|a| a.at.as_millis()),
    ])?;
    Ok(())
}

pub(crate) fn list_tool_pins(
    conn: &Connection,
    tenant: &TenantId,
    upstream: &UpstreamName,
) -> Result<Vec<ToolPin>, OpError> {
    let mut stmt = conn.prepare_cached(
        "SELECT tool, seen_hash, seen_definition, seen_at, approved_hash, approved_definition, \
         approved_by, approved_at FROM tool_pins WHERE tenant = ?1 AND upstream = ?2 \
         ORDER BY tool",
    )?;
    let mut rows = stmt.query(params![tenant.as_str(), upstream.as_str()])?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        let approved_hash: Option<String> = row.get(4)?;
        let approved = match approved_hash {
            Some(hash) => Some(ToolApproval {
                hash: DefinitionHash::from_stored(hash),
                definition: row.get::<_, Option<String>>(5)?.unwrap_or_default(),
                by: row.get::<_, Option<String>>(6)?.unwrap_or_default(),
                at: Timestamp::from_millis(row.get::<_, Option<i64>>(7)?.unwrap_or(0)),
            }),
            None => None,
        };
        out.push(ToolPin {
            tenant: tenant.clone(),
            upstream: upstream.clone(),
            tool: row.get(0)?,
            seen: DefinitionHash::from_stored(row.get(1)?),
            definition: row.get(2)?,
            seen_at: Timestamp::from_millis(row.get(3)?),
            approved,
        });
    }
    Ok(out)
}
