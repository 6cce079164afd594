//! The register API, on the runner's `listen` port (and inside `serve`):
//!
//! - `POST /v1/runs` `{tenant, run?, capabilities, ttl?}` → `201` with the
//!   endpoint, the token, the MCP client configuration and the sandbox env;
//! - `GET /v1/runs[?tenant=T]` → the runs active on this runner; the
//!   runner-wide `stats` (runs, actors, listeners, connections of every
//!   tenant) only to a platform admin of all tenants, since they tell one
//!   tenant how busy the others are;
//! - `PATCH /v1/runs/{tenant}/{run}` `{ttl?}` → renew: the run's grants
//!   expire `ttl` from now (default: the run's lifetime), same token,
//!   capped at their maximum lifetime;
//! - `DELETE /v1/runs/{tenant}/{run}` → revoke, drain, stop.
//!
//! Callers authenticate with an admin JWT (`AdminAuth`, through the
//! `AdminAuthenticator` the app registers) that may manage the tenant
//! (platform admins, or the tenant's own admin): orchestrators use a
//! service token minted with `corkboard admin token`.

use crate::gateway::Gateway;
use actix_web::{HttpResponse, web};
use corkboard_api::{AdminAuth, ApiError, Manage, TenantScope};
use corkboard_board::{Capabilities, RunId};
use corkboard_grants::GrantRequest;
use serde::Deserialize;
use serde_json::json;
use std::time::Duration;

/// Default run lifetime when the request names none.
const DEFAULT_TTL: Duration = Duration::from_secs(3600);

/// Mounts the register API. Register it before the control plane's routes:
/// the server's `/v1` scope answers 404 for every path it does not know.
pub fn configure(cfg: &mut web::ServiceConfig, gateway: Gateway) {
    cfg.service(
        web::scope("/v1/runs")
            .app_data(web::Data::new(gateway))
            .configure(corkboard_api::extract::configure)
            .route("", web::post().to(register))
            .route("", web::get().to(list))
            .route("/{tenant}/{run}", web::delete().to(revoke))
            .route("/{tenant}/{run}", web::patch().to(renew))
            .default_service(web::to(|| async {
                Err::<HttpResponse, _>(ApiError::not_found("no such API endpoint".into()))
            })),
    );
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RegisterBody {
    tenant: String,
    /// Generated (`run-<ulid>`) when absent.
    run: Option<String>,
    capabilities: Vec<String>,
    /// `30m`, `1h`, ... (default 1h).
    ttl: Option<String>,
    /// What the run may write in total, e.g. `{"create_issue": 3}`,
    /// within its tenant's `run_budgets` (see `GrantService::run_budgets`).
    #[serde(default)]
    budgets: corkboard_board::Budgets,
    /// The lowest integrity of what the run is shown: `external`, `agent`
    /// or `person` (default: everything).
    #[serde(default)]
    min_integrity: Option<corkboard_board::Integrity>,
}

async fn register(
    gateway: web::Data<Gateway>,
    auth: AdminAuth,
    body: web::Json<RegisterBody>,
) -> Result<HttpResponse, ApiError> {
    let body = body.into_inner();
    let tenant = corkboard_api::tenant_for_write(&auth.0, &body.tenant)?;
    let run = match body.run {
        Some(run) => RunId::parse(run)?,
        None => generated_run_id()?,
    };
    let asked = body
        .ttl
        .as_deref()
        .map(corkboard_board::parse_ttl)
        .transpose()?;
    let ttl = gateway.run_ttl(&tenant, asked, DEFAULT_TTL).await?;
    let budgets = gateway.run_budgets(&tenant, &body.budgets).await?;
    let request = GrantRequest {
        tenant,
        run,
        capabilities: Capabilities::parse_list(&body.capabilities)?,
        ttl,
        created_by: auth.0.subject.clone(),
        budgets,
        min_integrity: body.min_integrity,
    };
    let registration = gateway.register(request).await?;
    Ok(HttpResponse::Created().json(registration.to_json()))
}

/// A fresh run id: `run-` and a lowercase ULID.
pub fn generated_run_id() -> Result<RunId, corkboard_board::ValidationError> {
    RunId::parse(format!(
        "run-{}",
        ulid::Ulid::new().to_string().to_ascii_lowercase()
    ))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListParams {
    tenant: Option<String>,
}

async fn list(
    gateway: web::Data<Gateway>,
    auth: AdminAuth,
    params: web::Query<ListParams>,
) -> Result<HttpResponse, ApiError> {
    let principal = &auth.0;
    let tenant = match params.into_inner().tenant {
        Some(raw) => Some(corkboard_api::tenant_for_read(principal, &raw)?),
        None if principal.is_all_tenants() => None,
        None => principal.tenant.clone(),
    };
    if tenant.is_none() && !principal.is_all_tenants() {
        return Err(ApiError::bad_request(
            "name the tenant: GET /v1/runs?tenant=T".into(),
        ));
    }
    let mut answer = json!({ "runs": gateway.runs(tenant.as_ref()) });
    if principal.is_all_tenants() {
        answer["stats"] = json!(gateway.stats());
    }
    Ok(HttpResponse::Ok().json(answer))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RenewBody {
    /// `30m`, `1h`, ...: the new expiry is this far from now (default 1h,
    /// capped by the tenant's `run_ttl`).
    ttl: Option<String>,
}

async fn renew(
    gateway: web::Data<Gateway>,
    scope: TenantScope<Manage>,
    path: web::Path<(String, String)>,
    body: web::Json<RenewBody>,
) -> Result<HttpResponse, ApiError> {
    let (_, run) = path.into_inner();
    let tenant = scope.tenant;
    let run = RunId::parse(run)?;
    let asked = body
        .ttl
        .as_deref()
        .map(corkboard_board::parse_ttl)
        .transpose()?;
    let ttl = gateway.run_ttl(&tenant, asked, DEFAULT_TTL).await?;
    let renewed = gateway.renew(&tenant, &run, ttl).await?;
    Ok(HttpResponse::Ok().json(json!({
        "tenant": tenant,
        "run": run,
        "expires_at": renewed.iter().map(|e| e.grant.expires_at).max(),
        "grants": renewed.iter().map(|e| json!({
            "id": e.grant.id,
            "created_at": e.grant.created_at,
            "expires_at": e.grant.expires_at,
        })).collect::<Vec<_>>(),
    })))
}

async fn revoke(
    gateway: web::Data<Gateway>,
    scope: TenantScope<Manage>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (_, run) = path.into_inner();
    let tenant = scope.tenant;
    let run = RunId::parse(run)?;
    let report = gateway.revoke(&tenant, &run, &scope.admin.subject).await?;
    if report.revoked.is_empty() && report.drained.is_none() {
        return Err(ApiError::not_found(format!(
            "run {run} of tenant {tenant} has no active grant and is not active on this runner"
        )));
    }
    Ok(HttpResponse::Ok().json(json!({
        "tenant": tenant,
        "run": run,
        "revoked": report.revoked,
        "drained": report.drained.map(|d| json!({
            "reason": d.reason.as_str(),
            "in_flight": d.in_flight_at_start,
            "cancelled": d.cancelled,
            "abandoned": d.abandoned,
        })),
    })))
}
