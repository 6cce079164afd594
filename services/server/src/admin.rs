//! The admin and board API under `/v1/`, authenticated with admin JWTs.
//!
//! Tenant scoping is decided here and only here: every handler resolves the
//! caller's [`AdminPrincipal`] and checks it against the tenant in the path
//! before touching the store. Grants or issues of another tenant answer 404,
//! so their existence is not revealed.

use crate::state::AppState;
use crate::web::WebAuth;
use actix_web::{HttpResponse, web};
use corkboard_api::ApiError;
use corkboard_board::{
    AuditQuery, Budgets, Capabilities, ClaimFilter, CommentWindow, GrantEvent, GrantId,
    GrantPolicy, IssueId, IssueState, Label, LabelFilter, ListQuery, Priority, RunId, SearchQuery,
    SearchText, TenantId, Timestamp, ValidationError, limits, parse_ttl,
};
use corkboard_grants::{GrantRequest, Renewal};
use serde::Deserialize;
use serde_json::json;
use std::time::Duration;

/// Default grant lifetime when the request names none.
const DEFAULT_TTL: Duration = Duration::from_secs(3600);

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::scope("/v1")
            .configure(corkboard_api::extract::configure)
            .route("/openapi.json", web::get().to(openapi))
            .route("/me", web::get().to(me))
            .route("/vocabulary", web::get().to(vocabulary))
            .route("/tenants/{tenant}/grants", web::post().to(create_grant))
            .route("/tenants/{tenant}/grants", web::get().to(list_grants))
            .route("/tenants/{tenant}/grants/{grant}", web::get().to(get_grant))
            .route(
                "/tenants/{tenant}/grants/{grant}",
                web::delete().to(revoke_grant),
            )
            .route(
                "/tenants/{tenant}/grants/{grant}",
                web::patch().to(renew_grant),
            )
            .route("/tenants/{tenant}/settings", web::get().to(get_settings))
            .route("/tenants/{tenant}/settings", web::put().to(put_settings))
            .route(
                "/tenants/{tenant}/runs/{run}/revoke",
                web::post().to(revoke_run),
            )
            .route("/tenants/{tenant}/issues", web::get().to(list_issues))
            // Before `{issue}`, which would otherwise take "search" as an id.
            .route(
                "/tenants/{tenant}/issues/search",
                web::get().to(search_issues),
            )
            .route("/tenants/{tenant}/issues/{issue}", web::get().to(get_issue))
            .route(
                "/tenants/{tenant}/issues/{issue}/history",
                web::get().to(issue_history),
            )
            .route(
                "/tenants/{tenant}/runs/{run}/history",
                web::get().to(run_history),
            )
            // People's writes: create, edit, comment, release, hand over.
            .configure(crate::web::actions::configure)
            .route("/tenants/{tenant}/audit", web::get().to(list_audit))
            .route(
                "/tenants/{tenant}/webhooks",
                web::post().to(crate::webhook_api::create),
            )
            .route(
                "/tenants/{tenant}/webhooks",
                web::get().to(crate::webhook_api::list),
            )
            .route(
                "/tenants/{tenant}/webhooks/{webhook}",
                web::delete().to(crate::webhook_api::delete),
            )
            .configure(crate::upstreams::configure)
            .configure(crate::issue_api::configure)
            .configure(crate::approvals::configure)
            .default_service(web::to(|| async {
                Err::<HttpResponse, _>(ApiError::not_found("no such API endpoint".into()))
            })),
    );
}

/// The OpenAPI document, kept in the repo beside this crate.
pub const OPENAPI: &str = include_str!("../openapi.json");

async fn openapi() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json")
        .body(OPENAPI)
}

/// The board's vocabulary (issue states, priorities, capabilities, tools),
/// derived from the domain and the tool table: what the web page and other
/// clients use instead of copies. Public, like the OpenAPI document: it
/// says nothing about any tenant.
async fn vocabulary() -> HttpResponse {
    HttpResponse::Ok().json(corkboard_tools::vocabulary())
}

async fn me(auth: WebAuth) -> HttpResponse {
    let p = &auth.0;
    HttpResponse::Ok().json(json!({
        "subject": p.subject,
        "role": p.role,
        "tenant": p.tenant,
    }))
}

/// A request's `{tenant}` that its admin (bearer JWT or web session) may
/// read: the one read check, as an extractor.
pub(crate) type ReadTenant = corkboard_api::TenantScope<corkboard_api::Read, WebAuth>;

/// A request's `{tenant}` that its admin may change.
pub(crate) type ManageTenant = corkboard_api::TenantScope<corkboard_api::Manage, WebAuth>;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateGrantBody {
    run: String,
    capabilities: Vec<String>,
    /// `1h`, `30m`, ... (default 1h).
    ttl: Option<String>,
    /// What the run may write in total, e.g. `{"create_issue": 3}`
    /// (default: unlimited).
    #[serde(default)]
    budgets: Budgets,
    /// The lowest integrity of what the run is shown: `external`, `agent`
    /// or `person` (default: everything).
    #[serde(default)]
    min_integrity: Option<corkboard_board::Integrity>,
}

async fn create_grant(
    state: web::Data<AppState>,
    scope: ManageTenant,
    body: web::Json<CreateGrantBody>,
) -> Result<HttpResponse, ApiError> {
    let tenant = scope.tenant;
    let body = body.into_inner();
    let request = GrantRequest {
        tenant,
        run: RunId::parse(body.run)?,
        capabilities: Capabilities::parse_list(&body.capabilities)?,
        ttl: body
            .ttl
            .as_deref()
            .map(parse_ttl)
            .transpose()?
            .unwrap_or(DEFAULT_TTL),
        created_by: scope.admin.subject.clone(),
        budgets: body.budgets,
        min_integrity: body.min_integrity,
    };
    let issued = state.grants.issue(request).await?;
    state
        .web
        .grants_changed(&issued.grant.tenant, Some(&issued.grant.run));
    Ok(HttpResponse::Created().json(state.issued_grant_json(&issued)))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GrantListParams {
    run: Option<String>,
    cursor: Option<String>,
    limit: Option<u32>,
}

fn page_limit(limit: Option<u32>) -> Result<u32, ValidationError> {
    match limit {
        None => Ok(limits::PAGE_DEFAULT),
        Some(n) if (1..=limits::PAGE_MAX).contains(&n) => Ok(n),
        Some(_) => Err(ValidationError::new(
            "limit",
            format!("must be between 1 and {}", limits::PAGE_MAX),
        )),
    }
}

fn grant_json(event: &GrantEvent) -> serde_json::Value {
    grant_json_with(event, None, None)
}

/// A grant as the API shows it, with `revocation`: for a revoked grant
/// still in its lifetime, `"pending"` while its token still resolves in the
/// registry (the revocation is recorded and being retried), `"confirmed"`
/// once it does not.
pub async fn grant_json_checked(state: &AppState, event: &GrantEvent) -> serde_json::Value {
    let revocation = if event.revoked_at.is_some() {
        let pending = state.grants.revocation_pending(event).await;
        Some(if pending { "pending" } else { "confirmed" })
    } else {
        None
    };
    let budgets = if event.grant.budgets.is_empty() {
        None
    } else {
        Some(match state.grants.budgets().status(&event.grant).await {
            Ok(status) => json!(status),
            // The limits still show; what was used is unknown right now.
            Err(err) => {
                tracing::warn!(grant = %event.grant.id, error = %err, "budget use unavailable");
                json!(
                    event
                        .grant
                        .budgets
                        .iter()
                        .map(|(kind, limit)| (
                            kind.as_str().to_owned(),
                            json!({ "limit": limit, "used": null, "remaining": null })
                        ))
                        .collect::<serde_json::Map<_, _>>()
                )
            }
        })
    };
    grant_json_with(event, revocation, budgets)
}

/// `budgets`: per budget its limit, used and remaining (left out for a
/// grant without budgets).
fn grant_json_with(
    event: &GrantEvent,
    revocation: Option<&str>,
    budgets: Option<serde_json::Value>,
) -> serde_json::Value {
    let mut out = json!({
        "revocation": revocation,
        "id": event.grant.id,
        "tenant": event.grant.tenant,
        "run": event.grant.run,
        "capabilities": event.grant.capabilities,
        "created_at": event.grant.created_at,
        "expires_at": event.grant.expires_at,
        "created_by": event.grant.created_by,
        "revoked_at": event.revoked_at,
        "revoked_by": event.revoked_by,
        "status": event.status_at(Timestamp::now()),
        "min_integrity": event.grant.min_integrity,
    });
    if let Some(budgets) = budgets {
        out["budgets"] = budgets;
    }
    out
}

async fn list_grants(
    state: web::Data<AppState>,
    scope: ReadTenant,
    params: web::Query<GrantListParams>,
) -> Result<HttpResponse, ApiError> {
    let tenant = scope.tenant;
    let run = params.run.as_deref().map(RunId::parse).transpose()?;
    let cursor = params.cursor.as_deref().map(GrantId::parse).transpose()?;
    let limit = page_limit(params.limit)?;
    let page = state
        .store
        .list_grants(&tenant, run.as_ref(), cursor.as_ref(), limit)
        .await?;
    // A full page may be followed by more (or by an empty last page).
    let next_cursor = if page.len() == limit as usize {
        page.last().map(|e| e.grant.id.clone())
    } else {
        None
    };
    let mut grants = Vec::with_capacity(page.len());
    for event in &page {
        grants.push(grant_json_checked(&state, event).await);
    }
    Ok(HttpResponse::Ok().json(json!({
        "grants": grants,
        "next_cursor": next_cursor,
    })))
}

/// The grant, if it exists and belongs to `tenant`; 404 naming both
/// otherwise (the same answer for another tenant's grant, so its existence
/// is not revealed).
async fn grant_of_tenant(
    state: &AppState,
    tenant: &TenantId,
    raw_id: &str,
) -> Result<GrantEvent, ApiError> {
    let id = GrantId::parse(raw_id)?;
    let not_found = || ApiError::not_found(format!("no grant {id} in tenant {tenant}"));
    let event = match state.store.grant(&id).await {
        Ok(event) => event,
        Err(corkboard_board::StoreError::NotFound { .. }) => return Err(not_found()),
        Err(err) => return Err(err.into()),
    };
    if &event.grant.tenant != tenant {
        return Err(not_found());
    }
    Ok(event)
}

async fn get_grant(
    state: web::Data<AppState>,
    scope: ReadTenant,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (_, grant) = path.into_inner();
    let tenant = scope.tenant;
    let event = grant_of_tenant(&state, &tenant, &grant).await?;
    Ok(HttpResponse::Ok().json(grant_json_checked(&state, &event).await))
}

async fn revoke_grant(
    state: web::Data<AppState>,
    scope: ManageTenant,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (_, grant) = path.into_inner();
    let tenant = scope.tenant;
    let event = grant_of_tenant(&state, &tenant, &grant).await?;
    let revoked = state
        .grants
        .revoke(&event.grant.id, &scope.admin.subject)
        .await?;
    state.metrics.revocation();
    state.web.grants_changed(&tenant, Some(&revoked.grant.run));
    Ok(HttpResponse::Ok().json(grant_json_checked(&state, &revoked).await))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RenewGrantBody {
    /// RFC 3339, later than the current expiry.
    expires_at: Option<String>,
    /// `30m`, `1h`, ...: added to the current expiry.
    extend_by: Option<String>,
}

/// Renewal: the same token, a later expiry (on every replica within a
/// second), bounded by the grant's maximum lifetime from its creation.
async fn renew_grant(
    state: web::Data<AppState>,
    scope: ManageTenant,
    path: web::Path<(String, String)>,
    body: web::Json<RenewGrantBody>,
) -> Result<HttpResponse, ApiError> {
    let (_, grant) = path.into_inner();
    let tenant = scope.tenant;
    let how =
        match body.into_inner() {
            RenewGrantBody {
                expires_at: Some(at),
                extend_by: None,
            } => Renewal::Until(Timestamp::parse_rfc3339(&at).ok_or_else(|| {
                ValidationError::new("expires_at", "expected an RFC 3339 instant")
            })?),
            RenewGrantBody {
                expires_at: None,
                extend_by: Some(by),
            } => Renewal::ExtendBy(parse_ttl(&by)?),
            _ => {
                return Err(ApiError::bad_request(
                    "give exactly one of expires_at (RFC 3339) or extend_by (e.g. 1h)".into(),
                ));
            }
        };
    let event = grant_of_tenant(&state, &tenant, &grant).await?;
    let renewed = state.grants.renew(&event.grant.id, how).await?;
    state.web.grants_changed(&tenant, Some(&renewed.grant.run));
    Ok(HttpResponse::Ok().json(grant_json_checked(&state, &renewed).await))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SettingsBody {
    /// Lifetime of a run's grant (`1h`, ...); `null` or absent: none.
    run_ttl: Option<String>,
    /// Longest a grant may live in all, renewals included; at most the
    /// operator's `grant_max_lifetime_secs`.
    max_lifetime: Option<String>,
    /// Budgets of runs' grants (the register API, `corkboard run`), e.g.
    /// `{"create_issue": 5}`; absent: the operator's `run_budgets`.
    #[serde(default)]
    run_budgets: Budgets,
    /// What board writes and upstream calls carrying a credential get:
    /// `"refuse"` (the default) or `"redact"`.
    #[serde(default)]
    secrets: corkboard_board::SecretPolicy,
}

async fn settings_json(state: &AppState, tenant: &TenantId) -> Result<serde_json::Value, ApiError> {
    let policy = state.store.grant_policy(tenant).await?;
    let effective = state.grants.max_lifetime_for(tenant).await?;
    Ok(json!({
        "tenant": tenant,
        "run_ttl_secs": policy.run_ttl_secs,
        "max_lifetime_secs": policy.max_lifetime_secs,
        "run_budgets": policy.run_budgets,
        "secrets": policy.secrets,
        "configured_run_budgets": state.grants.configured_run_budgets(),
        "configured_max_lifetime_secs": state.grants.max_lifetime().as_secs(),
        "effective_max_lifetime_secs": effective.as_secs(),
    }))
}

async fn get_settings(
    state: web::Data<AppState>,
    scope: ReadTenant,
) -> Result<HttpResponse, ApiError> {
    let tenant = scope.tenant;
    Ok(HttpResponse::Ok().json(settings_json(&state, &tenant).await?))
}

/// Replaces the tenant's own grant settings (renewal limits).
async fn put_settings(
    state: web::Data<AppState>,
    scope: ManageTenant,
    body: web::Json<SettingsBody>,
) -> Result<HttpResponse, ApiError> {
    let tenant = scope.tenant;
    let body = body.into_inner();
    let secs = |field: &'static str, raw: Option<String>| -> Result<Option<u64>, ValidationError> {
        raw.map(|raw| {
            parse_ttl(&raw)
                .map(|d| d.as_secs())
                .map_err(|e| ValidationError::new(field, e.reason))
        })
        .transpose()
    };
    // Approval policies are changed through their own endpoint and kept here.
    let approvals = state.store.grant_policy(&tenant).await?.approvals;
    let policy = GrantPolicy {
        run_ttl_secs: secs("run_ttl", body.run_ttl)?,
        max_lifetime_secs: secs("max_lifetime", body.max_lifetime)?,
        run_budgets: body.run_budgets,
        secrets: body.secrets,
        approvals,
    };
    policy.validate()?;
    state.store.set_grant_policy(&tenant, &policy).await?;
    Ok(HttpResponse::Ok().json(settings_json(&state, &tenant).await?))
}

async fn revoke_run(
    state: web::Data<AppState>,
    scope: ManageTenant,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (_, run) = path.into_inner();
    let tenant = scope.tenant;
    let run = RunId::parse(run)?;
    let revoked = state
        .grants
        .revoke_run(&tenant, &run, &scope.admin.subject)
        .await?;
    for _ in &revoked {
        state.metrics.revocation();
    }
    state.web.grants_changed(&tenant, Some(&run));
    Ok(HttpResponse::Ok().json(json!({
        "run": run,
        "revoked": revoked.iter().map(grant_json).collect::<Vec<_>>(),
    })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct IssueListParams {
    /// Comma-separated states.
    pub(crate) state: Option<String>,
    /// Comma-separated labels.
    pub(crate) label: Option<String>,
    /// `all` (default) or `any`.
    pub(crate) label_match: Option<String>,
    pub(crate) text: Option<String>,
    pub(crate) run: Option<String>,
    /// Comma-separated priorities.
    pub(crate) priority: Option<String>,
    /// RFC 3339: issues updated at or after it.
    pub(crate) updated_since: Option<String>,
    pub(crate) cursor: Option<String>,
    pub(crate) limit: Option<u32>,
    /// Sub-issues of this issue.
    pub(crate) parent: Option<String>,
    /// `true`: issues no run has claimed.
    pub(crate) unclaimed: Option<bool>,
    /// Issues claimed by this run.
    pub(crate) claimed_by: Option<String>,
}

/// `GET .../issues/search`: the list filters, the query `q`, and paging by
/// `offset` (no cursor: hits are ranked, not ordered by id).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct IssueSearchParams {
    q: Option<String>,
    state: Option<String>,
    label: Option<String>,
    label_match: Option<String>,
    text: Option<String>,
    run: Option<String>,
    priority: Option<String>,
    updated_since: Option<String>,
    parent: Option<String>,
    unclaimed: Option<bool>,
    claimed_by: Option<String>,
    offset: Option<u32>,
    limit: Option<u32>,
}

impl IssueSearchParams {
    fn into_query(self) -> Result<SearchQuery, ValidationError> {
        let text = SearchText::parse(self.q.unwrap_or_default())?;
        // The filters exactly as the list route reads them.
        let filter = IssueListParams {
            state: self.state,
            label: self.label,
            label_match: self.label_match,
            text: self.text,
            run: self.run,
            priority: self.priority,
            updated_since: self.updated_since,
            parent: self.parent,
            unclaimed: self.unclaimed,
            claimed_by: self.claimed_by,
            cursor: None,
            limit: None,
        }
        .into_query()?;
        let query = SearchQuery {
            text,
            filter,
            limit: self.limit.unwrap_or(limits::SEARCH_LIMIT_DEFAULT),
            offset: self.offset.unwrap_or(0),
        };
        query.validate()?;
        Ok(query)
    }
}

fn csv(text: &Option<String>) -> Vec<&str> {
    text.as_deref()
        .map(|t| {
            t.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

impl IssueListParams {
    pub(crate) fn into_query(self) -> Result<ListQuery, ValidationError> {
        let states = csv(&self.state)
            .into_iter()
            .map(IssueState::parse)
            .collect::<Result<Vec<_>, _>>()?;
        let labels = csv(&self.label)
            .into_iter()
            .map(Label::parse)
            .collect::<Result<Vec<_>, _>>()?;
        let labels = match (labels.is_empty(), self.label_match.as_deref()) {
            (true, _) => LabelFilter::None,
            (false, None | Some("all")) => LabelFilter::All(labels),
            (false, Some("any")) => LabelFilter::Any(labels),
            (false, Some(_)) => {
                return Err(ValidationError::new("label_match", "expected all or any"));
            }
        };
        let claim = match (self.unclaimed, self.claimed_by) {
            (Some(true), Some(_)) => {
                return Err(ValidationError::new(
                    "unclaimed",
                    "cannot be combined with claimed_by",
                ));
            }
            (Some(true), None) => ClaimFilter::Unclaimed,
            (_, Some(run)) => ClaimFilter::ClaimedBy(RunId::parse(run)?),
            (_, None) => ClaimFilter::Any,
        };
        let priorities = csv(&self.priority)
            .into_iter()
            .map(Priority::parse)
            .collect::<Result<Vec<_>, _>>()?;
        let updated_since = self
            .updated_since
            .map(|text| {
                Timestamp::parse_rfc3339(&text).ok_or_else(|| {
                    ValidationError::new(
                        "updated_since",
                        "must be an RFC 3339 time, e.g. 2026-01-31T12:00:00Z",
                    )
                })
            })
            .transpose()?;
        let query = ListQuery {
            states,
            labels,
            text: self.text.filter(|t| !t.is_empty()),
            author_run: self.run.map(RunId::parse).transpose()?,
            priorities,
            updated_since,
            limit: page_limit(self.limit)?,
            cursor: self.cursor.map(IssueId::parse).transpose()?,
            parent: self.parent.map(IssueId::parse).transpose()?,
            claim,
            ready: false,
            // People and admins see every level.
            min_integrity: None,
            // The API's page is of whole issues, comments included.
            comments: corkboard_board::PageComments::All,
        };
        query.validate()?;
        Ok(query)
    }
}

async fn list_issues(
    state: web::Data<AppState>,
    scope: ReadTenant,
    params: web::Query<IssueListParams>,
) -> Result<HttpResponse, ApiError> {
    let tenant = scope.tenant;
    let query = params.into_inner().into_query()?;
    let page = state.store.list_issues(&tenant, &query).await?;
    Ok(HttpResponse::Ok().json(page))
}

/// The list route's answer to a query string, for a caller that is not an
/// HTTP request (`corkboard issue list` on the local board): the filters
/// read by the route's own parser. The caller checked the tenant.
pub async fn list_issues_page(
    state: &AppState,
    tenant: &TenantId,
    query: &str,
) -> Result<corkboard_board::Page, ApiError> {
    let params = web::Query::<IssueListParams>::from_query(query)
        .map_err(|err| ApiError::new(corkboard_board::Code::InvalidQuery, err.to_string()))?;
    let query = params.into_inner().into_query()?;
    Ok(state.store.list_issues(tenant, &query).await?)
}

/// Ranked search with the list filters: the same store call as the
/// `search_issues` tool.
async fn search_issues(
    state: web::Data<AppState>,
    scope: ReadTenant,
    params: web::Query<IssueSearchParams>,
) -> Result<HttpResponse, ApiError> {
    let tenant = scope.tenant;
    let query = params.into_inner().into_query()?;
    let page = state.store.search_issues(&tenant, &query).await?;
    Ok(HttpResponse::Ok().json(page))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct IssueGetParams {
    /// `html`: add `rendered`, the body and each comment as sanitised HTML
    /// (what the web board shows; see `crate::markdown`).
    render: Option<String>,
    /// `true`: add `related`, the title and state of each issue the
    /// relations name, by id (the web board's links; `crate::web::board`).
    related: Option<bool>,
}

async fn get_issue(
    state: web::Data<AppState>,
    scope: ReadTenant,
    path: web::Path<(String, String)>,
    params: web::Query<IssueGetParams>,
) -> Result<HttpResponse, ApiError> {
    let (_, issue) = path.into_inner();
    let tenant = scope.tenant;
    let render = match params.render.as_deref() {
        None => false,
        Some("html") => true,
        Some(other) => {
            return Err(ValidationError::new(
                "render",
                format!("unknown rendering {other:?}; the only one is \"html\""),
            )
            .into());
        }
    };
    // With the inverse relations (children, blocks), like MCP's get_issue.
    let issue = state
        .store
        .get_issue_view(&tenant, &IssueId::parse(issue)?, &CommentWindow::all())
        .await?;
    let related = if params.related.unwrap_or(false) {
        Some(crate::web::board::related(state.store.as_ref(), &tenant, &issue).await?)
    } else {
        None
    };
    if !render && related.is_none() {
        return Ok(HttpResponse::Ok().json(issue));
    }
    let mut value = serde_json::to_value(&issue)
        .map_err(|err| ApiError::internal(format!("issue not serialisable: {err}")))?;
    if let Some(related) = related {
        value["related"] = related.into();
    }
    if !render {
        return Ok(HttpResponse::Ok().json(value));
    }
    let rendered = json!({
        "body": crate::markdown::render(issue.issue.body.as_str()),
        "comments": issue
            .issue
            .comments
            .iter()
            .map(|c| (c.id.to_string(), crate::markdown::render(c.body.as_str()).into()))
            .collect::<serde_json::Map<String, serde_json::Value>>(),
    });
    value["rendered"] = rendered;
    Ok(HttpResponse::Ok().json(value))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HistoryParams {
    /// An issue's: a version; a run's: an instant in Unix milliseconds
    /// (the `next_before` of the previous page).
    before: Option<i64>,
    limit: Option<u32>,
}

fn history_limit(limit: Option<u32>) -> Result<u32, ValidationError> {
    let max = corkboard_board::history_limits::HISTORY_PAGE_MAX;
    match limit {
        None => Ok(max),
        Some(n) if (1..=max).contains(&n) => Ok(n),
        Some(_) => Err(ValidationError::new(
            "limit",
            format!("must be between 1 and {max}"),
        )),
    }
}

/// What changed on one issue, newest first (`HistoryPage`).
async fn issue_history(
    state: web::Data<AppState>,
    scope: ReadTenant,
    path: web::Path<(String, String)>,
    params: web::Query<HistoryParams>,
) -> Result<HttpResponse, ApiError> {
    let (_, issue) = path.into_inner();
    let id = IssueId::parse(issue)?;
    let params = params.into_inner();
    let before = params
        .before
        .map(|v| {
            u64::try_from(v)
                .map_err(|_| ValidationError::new("before", "must be a version (at least 1)"))
        })
        .transpose()?;
    let page = state
        .store
        .issue_history(&scope.tenant, &id, before, history_limit(params.limit)?)
        .await?;
    Ok(HttpResponse::Ok().json(page))
}

/// What one run changed across the tenant's board, newest first.
async fn run_history(
    state: web::Data<AppState>,
    scope: ReadTenant,
    path: web::Path<(String, String)>,
    params: web::Query<HistoryParams>,
) -> Result<HttpResponse, ApiError> {
    let (_, run) = path.into_inner();
    let run = RunId::parse(run)?;
    let params = params.into_inner();
    let page = state
        .store
        .run_history(
            &scope.tenant,
            &run,
            params.before.map(Timestamp::from_millis),
            history_limit(params.limit)?,
        )
        .await?;
    Ok(HttpResponse::Ok().json(page))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AuditParams {
    run: Option<String>,
    issue: Option<String>,
    limit: Option<u32>,
}

async fn list_audit(
    state: web::Data<AppState>,
    scope: ReadTenant,
    params: web::Query<AuditParams>,
) -> Result<HttpResponse, ApiError> {
    let tenant = scope.tenant;
    let params = params.into_inner();
    let query = AuditQuery {
        run: params.run.map(RunId::parse).transpose()?,
        issue: params.issue.map(IssueId::parse).transpose()?,
        limit: page_limit(params.limit)?,
    };
    let records = state.store.list_audit(&tenant, &query).await?;
    Ok(HttpResponse::Ok().json(json!({ "records": records })))
}
