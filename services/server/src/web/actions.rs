//! What people do on the board through the web page (and admin-API callers
//! through the same endpoints): create an issue, comment, edit it (title,
//! body, state with a close reason, labels, priority, relations), release
//! a claim a stuck run holds or hand it to another run.
//!
//! Each action is the board's own write (the same store call and domain
//! validation as the agents' tools; run budgets do not apply to people),
//! runs under the caller's identity ([`actor`]: a person when the web
//! session authenticated the request, an admin when a bearer JWT did), is
//! CSRF-protected by [`WebAuth`](super::WebAuth) like every cookie-borne
//! write, and leaves an audit record with that person as its author (the
//! board operation's tool name, the person's name as `run`,
//! [`GrantId::none`]). Webhooks follow from the store's outbox like any
//! write; the live feed from the audit sink and [`WebState::issue_changed`].

use super::WebState;
use crate::admin::ManageTenant;
use crate::state::AppState;
use actix_web::{HttpRequest, HttpResponse, web};
use corkboard_api::{ApiError, bearer};
use corkboard_board::{
    ArgumentsHash, AuditOutcome, AuditRecord, Author, AuthorKind, BlockedBy, Body, CloseReason,
    Code, CommentBody, GrantId, GrantStatus, IssueId, IssuePatch, IssueState, Labels, NewComment,
    NewIssue, Priority, RunId, TenantId, Timestamp, Title,
};
use corkboard_grants::AdminPrincipal;
use corkboard_tools::BoardTool;
use serde::{Deserialize, Deserializer, Serialize};
use std::time::Instant;

/// Mounts the action routes (inside the `/v1` scope).
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/tenants/{tenant}/issues", web::post().to(create_issue))
        .route(
            "/tenants/{tenant}/issues/{issue}",
            web::patch().to(update_issue),
        )
        .route(
            "/tenants/{tenant}/issues/{issue}/comments",
            web::post().to(add_comment),
        )
        .route(
            "/tenants/{tenant}/issues/{issue}/release",
            web::post().to(release_claim),
        )
        .route(
            "/tenants/{tenant}/issues/{issue}/handover",
            web::post().to(hand_over_claim),
        );
}

/// Who an action is recorded as: the signed-in person (web session), or
/// the admin-API caller (bearer JWT), never a run.
pub fn actor(req: &HttpRequest, admin: &AdminPrincipal) -> Author {
    let kind = if bearer(req).is_some() {
        AuthorKind::Admin
    } else {
        AuthorKind::Person
    };
    Author::principal(kind, &admin.subject)
}

/// One action of a person: who, on which tenant, as which board
/// operation; [`Action::audited`] runs it and leaves its audit record.
struct Action<'a> {
    state: &'a AppState,
    tenant: &'a TenantId,
    author: &'a Author,
    tool: BoardTool,
}

impl Action<'_> {
    /// Runs `write` and audits it like a tool call, with the person as its
    /// run and no grant: `ok` with the issue `touched` names, else the
    /// outcome the error implies. Successful writes reach the live feed
    /// through the audit sink, like the agents' writes.
    async fn audited<T: Serialize, R>(
        &self,
        request: &T,
        issue: Option<&IssueId>,
        write: impl std::future::Future<Output = Result<R, ApiError>>,
        touched: impl Fn(&R) -> IssueId,
    ) -> Result<R, ApiError> {
        let started = Instant::now();
        let result = write.await;
        let (outcome, issue) = match &result {
            Ok(value) => (AuditOutcome::Ok, Some(touched(value))),
            Err(err) if matches!(err.error_code(), Code::Unavailable | Code::Internal) => {
                (AuditOutcome::Unavailable, issue.cloned())
            }
            Err(_) => (AuditOutcome::ToolError, issue.cloned()),
        };
        let arguments = serde_json::to_vec(request).unwrap_or_default();
        self.state.tool_audit.record(AuditRecord {
            at: Timestamp::now(),
            tenant: self.tenant.clone(),
            run: self.author.run.clone(),
            grant: GrantId::none(),
            tool: self.tool.name().to_owned(),
            outcome,
            latency_micros: u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
            arguments_hash: ArgumentsHash::of(&arguments),
            issue,
            definition_hash: None,
        });
        result
    }
}

/// A JSON member that may be absent (leave it), `null` (clear it) or a value.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(deserializer).map(Some)
}

fn issue_ids(ids: Vec<String>) -> Result<BlockedBy, ApiError> {
    let ids = ids
        .into_iter()
        .map(IssueId::parse)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(BlockedBy::parse(ids)?)
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct CreateIssueBody {
    title: String,
    #[serde(default)]
    body: Option<String>,
    state: Option<String>,
    #[serde(default)]
    labels: Option<Vec<String>>,
    priority: Option<String>,
    parent: Option<String>,
    duplicate_of: Option<String>,
    #[serde(default)]
    blocked_by: Option<Vec<String>>,
    close_reason: Option<String>,
}

impl CreateIssueBody {
    fn parse(&self) -> Result<NewIssue, ApiError> {
        let mut new = NewIssue::new(Title::parse(self.title.clone())?);
        if let Some(body) = &self.body {
            new.body = Body::parse(body.clone())?;
        }
        if let Some(state) = &self.state {
            new.state = IssueState::parse(state)?;
        }
        if let Some(labels) = &self.labels {
            new.labels = Labels::parse(labels.clone())?;
        }
        if let Some(priority) = &self.priority {
            new.priority = Priority::parse(priority)?;
        }
        new.parent = self.parent.clone().map(IssueId::parse).transpose()?;
        new.duplicate_of = self.duplicate_of.clone().map(IssueId::parse).transpose()?;
        if let Some(blocked_by) = &self.blocked_by {
            new.blocked_by = issue_ids(blocked_by.clone())?;
        }
        new.close_reason = self
            .close_reason
            .as_deref()
            .map(CloseReason::parse)
            .transpose()?;
        new.validate()?;
        Ok(new)
    }
}

/// `POST /v1/tenants/{tenant}/issues`: files an issue as the caller.
async fn create_issue(
    req: HttpRequest,
    state: web::Data<AppState>,
    web_state: WebState,
    scope: ManageTenant,
    body: web::Json<CreateIssueBody>,
) -> Result<HttpResponse, ApiError> {
    let tenant = scope.tenant;
    let author = actor(&req, &scope.admin);
    let request = body.into_inner();
    let new = request.parse()?;
    let created = Action {
        state: &state,
        tenant: &tenant,
        author: &author,
        tool: BoardTool::CreateIssue,
    }
    .audited(
        &request,
        None,
        async {
            Ok(state
                .store
                .create_issue(&tenant, &author, new, None)
                .await?)
        },
        |created| created.issue.id.clone(),
    )
    .await?;
    web_state.issue_changed(&created.issue);
    Ok(HttpResponse::Created().json(created.issue))
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct UpdateIssueBody {
    /// Required: a person never overwrites a change they have not seen.
    expected_version: u64,
    title: Option<String>,
    body: Option<String>,
    state: Option<String>,
    labels: Option<Vec<String>>,
    priority: Option<String>,
    /// With state done or closed; see `IssuePatch::apply_to`.
    close_reason: Option<String>,
    /// `null` clears it.
    #[serde(default, deserialize_with = "present")]
    parent: Option<Option<String>>,
    /// `null` clears it.
    #[serde(default, deserialize_with = "present")]
    duplicate_of: Option<Option<String>>,
    /// The whole list (empty clears it).
    blocked_by: Option<Vec<String>>,
}

impl UpdateIssueBody {
    fn parse(&self) -> Result<IssuePatch, ApiError> {
        let relation = |value: &Option<Option<String>>| -> Result<_, ApiError> {
            Ok(match value {
                None => None,
                Some(None) => Some(None),
                Some(Some(id)) => Some(Some(IssueId::parse(id.clone())?)),
            })
        };
        let patch = IssuePatch {
            title: self.title.clone().map(Title::parse).transpose()?,
            body: self.body.clone().map(Body::parse).transpose()?,
            state: self.state.as_deref().map(IssueState::parse).transpose()?,
            labels: self.labels.clone().map(Labels::parse).transpose()?,
            priority: self.priority.as_deref().map(Priority::parse).transpose()?,
            parent: relation(&self.parent)?,
            duplicate_of: relation(&self.duplicate_of)?,
            blocked_by: self.blocked_by.clone().map(issue_ids).transpose()?,
            close_reason: self
                .close_reason
                .as_deref()
                .map(CloseReason::parse)
                .transpose()?,
            actor: None,
        };
        if patch.is_empty() {
            return Err(ApiError::bad_request(
                "nothing to change: send at least one of title, body, state, labels, priority, \
                 close_reason, parent, duplicate_of, blocked_by"
                    .into(),
            ));
        }
        Ok(patch)
    }
}

/// `PATCH /v1/tenants/{tenant}/issues/{issue}`: edits an issue (a state
/// back to an open one reopens it) as the caller, at the version they saw.
async fn update_issue(
    req: HttpRequest,
    state: web::Data<AppState>,
    web_state: WebState,
    scope: ManageTenant,
    path: web::Path<(String, String)>,
    body: web::Json<UpdateIssueBody>,
) -> Result<HttpResponse, ApiError> {
    let (_, issue) = path.into_inner();
    let tenant = scope.tenant;
    let author = actor(&req, &scope.admin);
    let id = IssueId::parse(issue)?;
    let request = body.into_inner();
    let mut patch = request.parse()?;
    patch.actor = Some(author.clone());
    let updated = Action {
        state: &state,
        tenant: &tenant,
        author: &author,
        tool: BoardTool::UpdateIssue,
    }
    .audited(
        &request,
        Some(&id),
        async {
            Ok(state
                .store
                .update_issue(&tenant, &id, patch, Some(request.expected_version))
                .await?)
        },
        |issue| issue.id.clone(),
    )
    .await?;
    web_state.issue_changed(&updated);
    Ok(HttpResponse::Ok().json(updated))
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct CommentBodyRequest {
    body: String,
}

/// `POST /v1/tenants/{tenant}/issues/{issue}/comments`: comments as the
/// caller. Answers the issue as it is after the comment.
async fn add_comment(
    req: HttpRequest,
    state: web::Data<AppState>,
    web_state: WebState,
    scope: ManageTenant,
    path: web::Path<(String, String)>,
    body: web::Json<CommentBodyRequest>,
) -> Result<HttpResponse, ApiError> {
    let (_, issue) = path.into_inner();
    let tenant = scope.tenant;
    let author = actor(&req, &scope.admin);
    let id = IssueId::parse(issue)?;
    let request = body.into_inner();
    let comment = NewComment {
        issue: id.clone(),
        body: CommentBody::parse(request.body.clone())?,
    };
    let added = Action {
        state: &state,
        tenant: &tenant,
        author: &author,
        tool: BoardTool::AddComment,
    }
    .audited(
        &request,
        Some(&id),
        async {
            Ok(state
                .store
                .add_comment(&tenant, &author, comment, None)
                .await?)
        },
        |_| id.clone(),
    )
    .await?;
    web_state.issue_changed(&added.issue);
    Ok(HttpResponse::Created().json(serde_json::json!({
        "comment": added.comment,
        "issue": { "id": added.issue.id, "version": added.issue.version },
    })))
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct ReleaseRequest {
    /// The version the person saw: the claim released is the one they saw
    /// (the web board always sends it). Absent (scripts, `corkboard issue
    /// release`): whoever holds the claim now.
    #[serde(default)]
    expected_version: Option<u64>,
    /// Only this run's claim (refused when another run holds it).
    #[serde(default)]
    run: Option<String>,
}

/// `POST /v1/tenants/{tenant}/issues/{issue}/release`: ends the claim a
/// run holds (a stuck run's), at the version the person saw.
async fn release_claim(
    req: HttpRequest,
    state: web::Data<AppState>,
    web_state: WebState,
    scope: ManageTenant,
    path: web::Path<(String, String)>,
    body: web::Json<ReleaseRequest>,
) -> Result<HttpResponse, ApiError> {
    let (_, issue) = path.into_inner();
    let tenant = scope.tenant;
    let author = actor(&req, &scope.admin);
    let id = IssueId::parse(issue)?;
    let request = body.into_inner();
    let only = request.run.clone().map(RunId::parse).transpose()?;
    let released = Action {
        state: &state,
        tenant: &tenant,
        author: &author,
        tool: BoardTool::ReleaseIssue,
    }
    .audited(
        &request,
        Some(&id),
        release(
            &state,
            &tenant,
            &id,
            only.as_ref(),
            request.expected_version,
        ),
        |issue| issue.id.clone(),
    )
    .await?;
    web_state.issue_changed(&released);
    Ok(HttpResponse::Ok().json(released))
}

/// Ends whichever run's claim the issue has (at `expected_version` when
/// given: the store's conditional release, in the name of the holder the
/// person saw, so a claim taken since fails on the version), or only
/// `only`'s claim (the store refuses it, naming the holder, when another
/// run holds the issue). The one release of people's surfaces: the web
/// page, the admin API and `corkboard issue release`.
pub(crate) async fn release(
    state: &AppState,
    tenant: &TenantId,
    id: &IssueId,
    only: Option<&RunId>,
    expected_version: Option<u64>,
) -> Result<corkboard_board::Issue, ApiError> {
    let holder = match only {
        Some(run) => run.clone(),
        None => match state.store.get_issue(tenant, id).await?.claim {
            Some(claim) => claim.run,
            None => {
                return Err(corkboard_board::StoreError::NotClaimed { issue: id.clone() }.into());
            }
        },
    };
    Ok(state
        .store
        .release_issue(tenant, id, &holder, expected_version)
        .await?)
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct HandOverRequest {
    /// The run that takes the claim over: it must hold a live grant of
    /// this tenant, whose expiry the claim carries.
    run: String,
    expected_version: u64,
}

/// `POST /v1/tenants/{tenant}/issues/{issue}/handover`: gives the issue's
/// claim to another run, whoever holds it, in one store write.
async fn hand_over_claim(
    req: HttpRequest,
    state: web::Data<AppState>,
    web_state: WebState,
    scope: ManageTenant,
    path: web::Path<(String, String)>,
    body: web::Json<HandOverRequest>,
) -> Result<HttpResponse, ApiError> {
    let (_, issue) = path.into_inner();
    let tenant = scope.tenant;
    let author = actor(&req, &scope.admin);
    let id = IssueId::parse(issue)?;
    let request = body.into_inner();
    let run = RunId::parse(request.run.clone())?;
    let claimed = Action {
        state: &state,
        tenant: &tenant,
        author: &author,
        tool: BoardTool::ClaimIssue,
    }
    .audited(
        &request,
        Some(&id),
        async {
            let now = Timestamp::now();
            let grant = state
                .store
                .list_grants(&tenant, Some(&run), None, 50)
                .await?
                .into_iter()
                .find(|event| event.status_at(now) == GrantStatus::Active)
                .ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "run {run} has no live grant on tenant {tenant}: a claim needs one"
                    ))
                })?;
            let claimant = state.claimant(&grant.grant).await;
            // One conditional write at the version the person saw: no run
            // can take the issue between the old claim and the new one.
            Ok(state
                .store
                .hand_over_claim(&tenant, &id, &claimant, &author, request.expected_version)
                .await?)
        },
        |issue| issue.id.clone(),
    )
    .await?;
    web_state.issue_changed(&claimed);
    Ok(HttpResponse::Ok().json(claimed))
}
