//! The `upstreams` table: a tenant's upstream MCP servers, credentials
//! sealed (the store keeps the ciphertext it is given and never sees the
//! clear value).

use super::WriteOp;
use crate::error::OpError;
use corkboard_board::{
    HeaderName, SealedCredential, StoreError, TenantId, Timestamp, UPSTREAMS_PER_TENANT_MAX,
    Upstream, UpstreamName, UpstreamUrl, ValidationError,
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
         created_by) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?
    .execute(params![
        upstream.tenant.as_str(),
        upstream.name.as_str(),
        upstream.url.as_str(),
        upstream.header.as_str(),
        upstream.credential.as_bytes(),
        upstream.created_at.as_millis(),
        upstream.created_by,
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
    Ok(())
}

pub(crate) fn list_upstreams(
    conn: &Connection,
    tenant: &TenantId,
) -> Result<Vec<Upstream>, OpError> {
    let mut stmt = conn.prepare_cached(
        "SELECT tenant, name, url, header, credential, created_at, created_by FROM upstreams \
         WHERE tenant = ?1 ORDER BY name",
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
    })
}
