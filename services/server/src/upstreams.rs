//! The admin API of a tenant's upstream MCP servers:
//!
//! - `PUT /v1/tenants/{tenant}/upstreams/{name}` `{url, header, credential}`
//!   registers or replaces one (200 with the record);
//! - `GET /v1/tenants/{tenant}/upstreams` lists them;
//! - `DELETE /v1/tenants/{tenant}/upstreams/{name}` removes one (204);
//! - `GET /v1/tenants/{tenant}/upstreams/{name}/tools` lists its tools'
//!   pins: each tool's status (`approved` or `pending`), the definition
//!   last seen and the one approved, their hashes, and what changed;
//! - `POST /v1/tenants/{tenant}/upstreams/{name}/tools/{tool}/approve`
//!   `{hash}` approves the definition with that hash (the one the admin
//!   was shown; a definition that changed again since is refused).
//!
//! A tool runs may see is approved as last listed: new and changed tools
//! are pending until approved (`trust_first_listing: true` in the PUT
//! approves the tools of the upstream's first listing as they are).
//!
//! The credential is sealed with the upstream key before it is stored and
//! is never returned, logged or audited: every answer shows the URL, the
//! header name and who registered it, nothing more. Runs reach upstream
//! tools through grants with `upstream:<name>:<glob>` capabilities.

use crate::admin::{ManageTenant, ReadTenant};
use crate::state::AppState;
use crate::web::actions::actor;
use crate::web::{BoardEvent, BoardEvents};
use actix_web::{HttpRequest, HttpResponse, web};
use corkboard_api::ApiError;
use corkboard_board::{
    ArgumentsHash, AuditOutcome, AuditRecord, DefinitionHash, GrantId, HeaderName, StoreError,
    Timestamp, ToolPin, Upstream, UpstreamName, UpstreamUrl, ValidationError,
};
use corkboard_upstream::{Credential, CredentialKey, ToolChanged};
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/tenants/{tenant}/upstreams", web::get().to(list))
        .route("/tenants/{tenant}/upstreams/{name}", web::put().to(put))
        .route(
            "/tenants/{tenant}/upstreams/{name}",
            web::delete().to(delete),
        )
        .route(
            "/tenants/{tenant}/upstreams/{name}/tools",
            web::get().to(list_tools),
        )
        .route(
            "/tenants/{tenant}/upstreams/{name}/tools/{tool}/approve",
            web::post().to(approve),
        );
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PutBody {
    url: String,
    /// The request header the credential goes in (`Authorization`, ...).
    header: String,
    credential: String,
    /// Approve the tools of the upstream's first listing as listed (trust
    /// on first use); later new or changed tools still wait for approval.
    #[serde(default)]
    trust_first_listing: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ApproveBody {
    /// The definition hash the admin reviewed.
    hash: String,
}

// Never print the credential.
impl std::fmt::Debug for PutBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PutBody")
            .field("url", &self.url)
            .field("header", &self.header)
            .field("trust_first_listing", &self.trust_first_listing)
            .finish_non_exhaustive()
    }
}

fn key(state: &AppState) -> Result<&Arc<CredentialKey>, ApiError> {
    state.upstream_key.as_ref().ok_or_else(|| {
        ApiError::unavailable(
            "upstreams are off on this server: no upstream_key_file (create one with 32 random bytes, mode 0600, shared with the runners)".into(),
        )
    })
}

/// An upstream as the API shows it: never its credential, its URL without
/// the query string or fragment (they often carry tokens; webhook URLs are
/// shown the same way).
fn upstream_json(upstream: &Upstream) -> serde_json::Value {
    json!({
        "tenant": upstream.tenant,
        "name": upstream.name.as_str(),
        "url": upstream.url.redacted(),
        "header": upstream.header.as_str(),
        "created_at": upstream.created_at,
        "created_by": upstream.created_by,
        "capability": format!("upstream:{}:*", upstream.name),
        "trust_first_listing": upstream.trust_first_listing,
    })
}

/// A tool's pin as the API shows it: enough for a person to decide.
fn pin_json(pin: &ToolPin) -> serde_json::Value {
    let definition = |text: &str| serde_json::from_str::<serde_json::Value>(text).ok();
    json!({
        "tool": pin.tool,
        "status": if pin.is_approved() { "approved" } else { "pending" },
        "hash": pin.seen.as_str(),
        "definition": definition(&pin.definition),
        "seen_at": pin.seen_at,
        "changes": pin.changes(),
        "approved": pin.approved.as_ref().map(|a| json!({
            "hash": a.hash.as_str(),
            "definition": definition(&a.definition),
            "by": a.by,
            "at": a.at,
        })),
    })
}

async fn put(
    state: web::Data<AppState>,
    scope: ManageTenant,
    path: web::Path<(String, String)>,
    body: web::Json<PutBody>,
) -> Result<HttpResponse, ApiError> {
    let (_, name) = path.into_inner();
    let tenant = scope.tenant;
    let key = key(&state)?;
    let body = body.into_inner();
    let name = UpstreamName::parse(&name)?;
    let url = UpstreamUrl::parse(&body.url)?;
    // A literal address is judged now; a name when a runner resolves it.
    state
        .egress
        .check_url(url.as_str())
        .map_err(|e| ValidationError::new("url", e.to_string()))?;
    let header = HeaderName::parse(&body.header)?;
    let credential = Credential::parse(body.credential)?;
    let sealed = key.seal(&tenant, &name, &header, &url, &credential)?;
    let upstream = Upstream {
        tenant,
        name,
        url,
        header,
        credential: sealed,
        created_at: Timestamp::now(),
        created_by: scope.admin.subject.clone(),
        trust_first_listing: body.trust_first_listing,
    };
    state.store.put_upstream(&upstream).await?;
    tracing::info!(tenant = %upstream.tenant, upstream = %upstream.name, by = %upstream.created_by, "upstream registered");
    Ok(HttpResponse::Ok().json(upstream_json(&upstream)))
}

async fn list(state: web::Data<AppState>, scope: ReadTenant) -> Result<HttpResponse, ApiError> {
    let tenant = scope.tenant;
    let upstreams = state.store.list_upstreams(&tenant).await?;
    Ok(HttpResponse::Ok().json(json!({
        "upstreams": upstreams.iter().map(upstream_json).collect::<Vec<_>>(),
    })))
}

async fn delete(
    state: web::Data<AppState>,
    scope: ManageTenant,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (_, name) = path.into_inner();
    let tenant = scope.tenant;
    let name = UpstreamName::parse(&name)?;
    match state.store.delete_upstream(&tenant, &name).await {
        Ok(()) => {}
        Err(StoreError::NotFound { .. }) => {
            return Err(ApiError::not_found(format!(
                "no upstream {name} in tenant {tenant}: nothing was deleted"
            )));
        }
        Err(err) => return Err(err.into()),
    }
    tracing::info!(%tenant, upstream = %name, by = %scope.admin.subject, "upstream deleted");
    Ok(HttpResponse::NoContent().finish())
}

/// What a runner tells the live board when it finds an upstream tool
/// newly pending: [`BoardEvent::UpstreamToolChanged`] on `events`.
pub fn live_tool_changes(events: Arc<dyn BoardEvents>) -> ToolChanged {
    Arc::new(move |tenant, upstream, tool| {
        events.publish(
            tenant,
            BoardEvent::UpstreamToolChanged {
                upstream: upstream.to_string(),
                tool: tool.to_owned(),
            },
        );
    })
}

async fn list_tools(
    state: web::Data<AppState>,
    scope: ReadTenant,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (_, name) = path.into_inner();
    let tenant = scope.tenant;
    let name = UpstreamName::parse(&name)?;
    let pins = state.store.list_tool_pins(&tenant, &name).await?;
    Ok(HttpResponse::Ok().json(json!({
        "upstream": name.as_str(),
        "tools": pins.iter().map(pin_json).collect::<Vec<_>>(),
    })))
}

/// Approves a pending tool's definition (the admin API, the CLI and the
/// web board's tools page alike; tenant admins only, CSRF-checked for a
/// web session like every cookie-borne write), audited like the people's
/// other actions: `approve_upstream_tool` with the person (or admin) as
/// its run, no grant, the approved definition's hash.
async fn approve(
    req: HttpRequest,
    state: web::Data<AppState>,
    scope: ManageTenant,
    path: web::Path<(String, String, String)>,
    body: web::Json<ApproveBody>,
) -> Result<HttpResponse, ApiError> {
    let (_, name, tool) = path.into_inner();
    let tenant = scope.tenant;
    let name = UpstreamName::parse(&name)?;
    let hash = DefinitionHash::parse(&body.hash)?;
    let by = &scope.admin.subject;
    let started = std::time::Instant::now();
    let result = state
        .store
        .approve_tool(&tenant, &name, &tool, &hash, by, Timestamp::now())
        .await;
    let author = actor(&req, &scope.admin);
    state.tool_audit.record(AuditRecord {
        at: Timestamp::now(),
        tenant: tenant.clone(),
        run: author.run.clone(),
        grant: GrantId::none(),
        tool: APPROVE_TOOL_AUDIT.to_owned(),
        outcome: if result.is_ok() {
            AuditOutcome::Ok
        } else {
            AuditOutcome::ToolError
        },
        latency_micros: u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
        arguments_hash: ArgumentsHash::of(format!("{name}\n{tool}").as_bytes()),
        issue: None,
        definition_hash: Some(hash.clone()),
    });
    let pin = match result {
        Ok(pin) => pin,
        Err(StoreError::NotFound { .. }) => {
            return Err(ApiError::not_found(format!(
                "upstream {name} of tenant {tenant} has never listed a tool {tool:?}: nothing was approved"
            )));
        }
        Err(err) => return Err(err.into()),
    };
    tracing::info!(%tenant, upstream = %name, tool = %pin.tool, hash = %pin.seen, %by, "upstream tool approved");
    Ok(HttpResponse::Ok().json(pin_json(&pin)))
}

/// The audit record's tool name of an upstream tool approval.
pub const APPROVE_TOOL_AUDIT: &str = "approve_upstream_tool";

#[cfg(test)]
mod tests {
    use super::*;
    use corkboard_board::{SealedCredential, TenantId};

    #[test]
    fn the_api_shows_an_upstream_url_without_its_query() {
        let upstream = Upstream {
            tenant: TenantId::parse("acme").unwrap(),
            name: UpstreamName::parse("github").unwrap(),
            url: UpstreamUrl::parse("https://mcp.example.com/mcp?api_key=s3cret#frag").unwrap(),
            header: HeaderName::parse("Authorization").unwrap(),
            credential: SealedCredential::from_bytes(vec![2; 40]),
            created_at: Timestamp::now(),
            created_by: "admin".into(),
            trust_first_listing: false,
        };
        let shown = upstream_json(&upstream);
        assert_eq!(shown["url"], "https://mcp.example.com/mcp");
        assert!(!shown.to_string().contains("s3cret"), "{shown}");
    }
}
