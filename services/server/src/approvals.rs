//! The admin API of approvals: a tenant's approval policies (which calls
//! need a person), its approval items (the calls waiting, with their
//! arguments and what their run did recently), and a person's decision.
//!
//! Routes (under `/v1`): `GET|PUT /tenants/{tenant}/approval-policies`,
//! `GET /tenants/{tenant}/approvals`, `GET /tenants/{tenant}/approvals/{id}`,
//! `POST /tenants/{tenant}/approvals/{id}/decision`. Reading needs the
//! tenant's read access, changing policies its admin, deciding its admin or
//! an approver ([`corkboard_api::Decide`]): a bearer admin JWT or the web
//! session with its CSRF token. Runs hold run tokens, never admin roles, so
//! no agent can decide a call, its own or another's. Every decision is
//! audited with the person as its author.

use crate::admin::{ManageTenant, ReadTenant};
use crate::state::AppState;
use crate::web::WebAuth;
use crate::web::actions::actor;
use actix_web::{HttpRequest, HttpResponse, web};
use corkboard_api::{ApiError, TenantScope};
use corkboard_board::APPROVAL_REASON_MAX;
use corkboard_board::{
    ApprovalId, ApprovalPolicies, ApprovalRefusal, ApprovalStatus, ArgumentsHash, AuditOutcome,
    AuditQuery, AuditRecord, Decision, GrantId, Timestamp, ValidationError,
};
use corkboard_tools::ApprovalEvents;
use serde::Deserialize;
use serde_json::json;

/// A request's `{tenant}` whose approvals its admin may decide.
type DecideTenant = TenantScope<corkboard_api::Decide, WebAuth>;

/// The most items one listing returns (and the default).
const LIST_MAX: u32 = 200;
/// How many of the run's latest audit records an item shows.
const RECENT: u32 = 20;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route(
        "/tenants/{tenant}/approval-policies",
        web::get().to(get_policies),
    )
    .route(
        "/tenants/{tenant}/approval-policies",
        web::put().to(put_policies),
    )
    .route("/tenants/{tenant}/approvals", web::get().to(list))
    .route("/tenants/{tenant}/approvals/{id}", web::get().to(get))
    .route(
        "/tenants/{tenant}/approvals/{id}/decision",
        web::post().to(decide),
    );
}

async fn get_policies(
    state: web::Data<AppState>,
    scope: ReadTenant,
) -> Result<HttpResponse, ApiError> {
    let policy = state.store.grant_policy(&scope.tenant).await?;
    Ok(HttpResponse::Ok().json(json!({ "policies": policy.approvals })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PoliciesBody {
    policies: ApprovalPolicies,
}

/// Replaces the tenant's approval policies; each keeps its version when
/// unchanged and gets the next one when changed.
async fn put_policies(
    state: web::Data<AppState>,
    scope: ManageTenant,
    body: web::Json<PoliciesBody>,
) -> Result<HttpResponse, ApiError> {
    let tenant = scope.tenant;
    let mut settings = state.store.grant_policy(&tenant).await?;
    let policies = body.into_inner().policies;
    policies.validate()?;
    settings.approvals = policies.versioned_after(&settings.approvals);
    settings.validate()?;
    state.store.set_grant_policy(&tenant, &settings).await?;
    state.approvals.policies_changed(&tenant);
    tracing::info!(%tenant, subject = %scope.admin.subject, policies = settings.approvals.0.len(), "approval policies replaced");
    Ok(HttpResponse::Ok().json(json!({ "policies": settings.approvals })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListParams {
    status: Option<String>,
    limit: Option<u32>,
}

async fn list(
    state: web::Data<AppState>,
    scope: ReadTenant,
    params: web::Query<ListParams>,
) -> Result<HttpResponse, ApiError> {
    let params = params.into_inner();
    let status = params
        .status
        .as_deref()
        .map(ApprovalStatus::parse)
        .transpose()?;
    let limit = params.limit.unwrap_or(LIST_MAX);
    if !(1..=LIST_MAX).contains(&limit) {
        return Err(
            ValidationError::new("limit", format!("must be between 1 and {LIST_MAX}")).into(),
        );
    }
    let items = state
        .store
        .list_approvals(&scope.tenant, status, limit)
        .await?;
    let now = Timestamp::now();
    let items: Vec<_> = items
        .iter()
        .map(|item| {
            let mut value = serde_json::to_value(item).unwrap_or_default();
            value["expired"] = json!(item.is_expired_at(now));
            value
        })
        .collect();
    Ok(HttpResponse::Ok().json(json!({ "approvals": items })))
}

/// One item, with what its run did recently (its latest audit records).
async fn get(
    state: web::Data<AppState>,
    scope: ReadTenant,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (_, id) = path.into_inner();
    let id = ApprovalId::parse(&id)?;
    let item = state
        .store
        .approval(&scope.tenant, &id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no approval {id} on this tenant")))?;
    let recent = state
        .store
        .list_audit(
            &scope.tenant,
            &AuditQuery {
                run: Some(item.run.clone()),
                issue: None,
                limit: RECENT,
            },
        )
        .await?;
    let mut value = serde_json::to_value(&item)
        .map_err(|e| ApiError::internal(format!("approval not serialisable: {e}")))?;
    value["expired"] = json!(item.is_expired_at(Timestamp::now()));
    value["recent"] = json!(recent);
    Ok(HttpResponse::Ok().json(value))
}

#[derive(Debug, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
struct DecisionBody {
    approve: bool,
    reason: Option<String>,
}

/// A person's decision: only a pending, unexpired item takes one, and of
/// racing deciders exactly one wins (the store's conditional write).
async fn decide(
    req: HttpRequest,
    state: web::Data<AppState>,
    scope: DecideTenant,
    path: web::Path<(String, String)>,
    body: web::Json<DecisionBody>,
) -> Result<HttpResponse, ApiError> {
    let (_, id) = path.into_inner();
    let tenant = scope.tenant;
    let id = ApprovalId::parse(&id)?;
    let body = body.into_inner();
    let reason = body
        .reason
        .as_deref()
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .map(str::to_owned);
    if reason
        .as_ref()
        .is_some_and(|r| r.chars().count() > APPROVAL_REASON_MAX)
    {
        return Err(ValidationError::new(
            "reason",
            format!("at most {APPROVAL_REASON_MAX} characters"),
        )
        .into());
    }
    let decision = Decision {
        approve: body.approve,
        by: scope.admin.subject.clone(),
        reason,
        at: Timestamp::now(),
    };
    let started = std::time::Instant::now();
    let result = state.store.decide_approval(&tenant, &id, &decision).await;
    let (outcome, answer) = match result {
        Ok(item) if item.decision.as_ref() == Some(&decision) => (AuditOutcome::Ok, Ok(item)),
        Ok(item) if item.status == ApprovalStatus::Pending => (
            AuditOutcome::ToolError,
            Err(ApiError::from(ApprovalRefusal::Expired)),
        ),
        Ok(_) => (
            AuditOutcome::ToolError,
            Err(ApiError::from(ApprovalRefusal::Decided)),
        ),
        Err(err) => (AuditOutcome::ToolError, Err(ApiError::from(err))),
    };
    let author = actor(&req, &scope.admin);
    state.tool_audit.record(AuditRecord {
        at: Timestamp::now(),
        tenant: tenant.clone(),
        run: author.run.clone(),
        grant: GrantId::none(),
        tool: if body.approve {
            "approve_call"
        } else {
            "deny_call"
        }
        .to_owned(),
        outcome,
        latency_micros: u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
        arguments_hash: ArgumentsHash::of(id.as_str().as_bytes()),
        issue: None,
        definition_hash: None,
    });
    let item = answer?;
    state.web.approval_changed(&item);
    tracing::info!(%tenant, approval = %id, approve = body.approve, subject = %scope.admin.subject, "approval decided");
    Ok(HttpResponse::Ok().json(item))
}
