//! Issue writes of the admin API for people and scripts (`corkboard issue`):
//! create, comment, close, reopen, claim for a run, release.
//!
//! Each write is one function over [`AppState`] that the HTTP handler and
//! the CLI's local mode (`corkboard issue ... --data-dir`) both call, so a
//! write means the same wherever it is made. Tenancy is the admin API's:
//! the handler's [`ManageTenant`] scope checks the path's tenant against
//! the admin JWT before any of these runs. Agents' writes go through the
//! MCP tools instead, with their grant's capabilities and budgets.

use crate::admin::ManageTenant;
use crate::state::AppState;
use actix_web::{HttpResponse, web};
use corkboard_api::ApiError;
use corkboard_board::{
    Author, AuthorKind, Body, CloseReason, CommentAdded, CommentBody, Created, GrantStatus, Issue,
    IssueId, IssuePatch, IssueState, Labels, NewComment, NewIssue, Priority, RunId, TenantId,
    Timestamp, Title,
};
use serde::Deserialize;

/// Mounts close, reopen and claim (inside the `/v1` scope). Creating,
/// commenting, editing and releasing are people's actions with their own
/// author kind and audit record: `web::actions`, whose routes serve the
/// CLI too.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route(
        "/tenants/{tenant}/issues/{issue}/close",
        web::post().to(close_handler),
    )
    .route(
        "/tenants/{tenant}/issues/{issue}/reopen",
        web::post().to(reopen_handler),
    )
    .route(
        "/tenants/{tenant}/issues/{issue}/claim",
        web::post().to(claim_handler),
    );
}

/// Who wrote it, for a write made through the CLI's local board: the
/// admin principal's kind, named by `subject` (`Author::principal`, the
/// one rule for people's names).
pub fn admin_author(subject: &str) -> Author {
    Author::principal(AuthorKind::Admin, subject)
}

/// `POST .../issues`: what a person may set on a new issue.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateIssueBody {
    pub title: String,
    #[serde(default)]
    pub body: Option<String>,
    #[serde(default)]
    pub state: Option<String>,
    #[serde(default)]
    pub labels: Vec<String>,
    #[serde(default)]
    pub priority: Option<String>,
    /// The issue this one is a sub-issue of.
    #[serde(default)]
    pub parent: Option<String>,
}

/// Creates an issue written by `subject`.
pub async fn create_issue(
    state: &AppState,
    tenant: &TenantId,
    subject: &str,
    body: CreateIssueBody,
) -> Result<Created, ApiError> {
    let mut new = NewIssue::new(Title::parse(body.title)?);
    if let Some(text) = body.body {
        new.body = Body::parse(text)?;
    }
    if let Some(s) = body.state.as_deref() {
        new.state = IssueState::parse(s)?;
    }
    new.labels = Labels::parse(body.labels)?;
    if let Some(p) = body.priority.as_deref() {
        new.priority = Priority::parse(p)?;
    }
    new.parent = body.parent.map(IssueId::parse).transpose()?;
    new.validate()?;
    let created = state
        .store
        .create_issue(tenant, &admin_author(subject), new, None)
        .await?;
    state.web.issue_changed(&created.issue);
    Ok(created)
}

/// Adds `subject`'s comment to an issue.
pub async fn add_comment(
    state: &AppState,
    tenant: &TenantId,
    subject: &str,
    issue: &IssueId,
    body: String,
) -> Result<CommentAdded, ApiError> {
    let comment = NewComment {
        issue: issue.clone(),
        body: CommentBody::parse(body)?,
    };
    let added = state
        .store
        .add_comment(tenant, &admin_author(subject), comment, None)
        .await?;
    state.web.issue_changed(&added.issue);
    Ok(added)
}

/// Moves an issue to `to` (with `reason` when `to` is terminal), as of the
/// version read just before: a change made in between is a version
/// conflict, never overwritten.
async fn move_issue(
    state: &AppState,
    tenant: &TenantId,
    subject: &str,
    issue: &IssueId,
    to: IssueState,
    reason: Option<CloseReason>,
) -> Result<Issue, ApiError> {
    let current = state.store.get_issue(tenant, issue).await?;
    let patch = IssuePatch {
        state: Some(to),
        close_reason: reason,
        actor: Some(admin_author(subject)),
        ..IssuePatch::default()
    };
    let updated = state
        .store
        .update_issue(tenant, issue, patch, Some(current.version))
        .await?;
    state.web.issue_changed(&updated);
    Ok(updated)
}

/// Closes an issue (`closed`, reason `completed` unless another is given).
pub async fn close_issue(
    state: &AppState,
    tenant: &TenantId,
    subject: &str,
    issue: &IssueId,
    reason: Option<&str>,
) -> Result<Issue, ApiError> {
    let reason = reason.map(CloseReason::parse).transpose()?;
    move_issue(state, tenant, subject, issue, IssueState::Closed, reason).await
}

/// Reopens a finished issue into `to` (default `todo`), dropping its close
/// reason. An issue that is not finished is refused: nothing to reopen.
pub async fn reopen_issue(
    state: &AppState,
    tenant: &TenantId,
    subject: &str,
    issue: &IssueId,
    to: Option<&str>,
) -> Result<Issue, ApiError> {
    let to = to
        .map(IssueState::parse)
        .transpose()?
        .unwrap_or(IssueState::Todo);
    if to.is_terminal() {
        return Err(corkboard_board::ValidationError::new(
            "state",
            format!("reopen moves an issue to an open state; {to} is not one"),
        )
        .into());
    }
    let current = state.store.get_issue(tenant, issue).await?;
    if !current.state.is_terminal() {
        return Err(corkboard_board::ValidationError::new(
            "issue",
            format!(
                "issue {issue} is {}: only a done or closed issue can be reopened",
                current.state
            ),
        )
        .into());
    }
    move_issue(state, tenant, subject, issue, to, None).await
}

/// Gives an issue to `run`, under the run's live grant that lasts longest
/// (the claim ends with that grant, like a claim the run makes itself).
/// A run without a live grant is refused: its claim would end at once.
pub async fn claim_issue(
    state: &AppState,
    tenant: &TenantId,
    issue: &IssueId,
    run: &RunId,
) -> Result<Issue, ApiError> {
    let now = Timestamp::now();
    let grants = state
        .store
        .list_grants(tenant, Some(run), None, corkboard_board::limits::PAGE_MAX)
        .await?;
    let grant = grants
        .into_iter()
        .filter(|e| e.status_at(now) == GrantStatus::Active)
        .max_by_key(|e| e.grant.expires_at)
        .ok_or_else(|| {
            ApiError::not_found(format!(
                "run {run} of tenant {tenant} has no live grant: a claim lasts as long as the \
                 run's grant (grant it first)"
            ))
        })?
        .grant;
    let claimant = state.claimant(&grant).await;
    let claimed = state
        .store
        .claim_issue(tenant, issue, &claimant, None)
        .await?;
    state.web.issue_changed(&claimed);
    Ok(claimed)
}

/// Ends the claim on an issue: `run`'s, or whoever holds it (the web
/// board's release, `web::actions::release`, for the CLI's local board).
pub async fn release_issue(
    state: &AppState,
    tenant: &TenantId,
    issue: &IssueId,
    run: Option<&RunId>,
) -> Result<Issue, ApiError> {
    let released = crate::web::actions::release(state, tenant, issue, run, None).await?;
    state.web.issue_changed(&released);
    Ok(released)
}

fn issue_of(path: web::Path<(String, String)>) -> Result<IssueId, ApiError> {
    Ok(IssueId::parse(path.into_inner().1)?)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CloseBody {
    /// completed (default), not_planned or duplicate.
    reason: Option<String>,
}

async fn close_handler(
    state: web::Data<AppState>,
    scope: ManageTenant,
    path: web::Path<(String, String)>,
    body: web::Json<CloseBody>,
) -> Result<HttpResponse, ApiError> {
    let issue = issue_of(path)?;
    let body = body.into_inner();
    let closed = close_issue(
        &state,
        &scope.tenant,
        &scope.admin.subject,
        &issue,
        body.reason.as_deref(),
    )
    .await?;
    Ok(HttpResponse::Ok().json(closed))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReopenBody {
    /// The open state to move it to (default todo).
    state: Option<String>,
}

async fn reopen_handler(
    state: web::Data<AppState>,
    scope: ManageTenant,
    path: web::Path<(String, String)>,
    body: web::Json<ReopenBody>,
) -> Result<HttpResponse, ApiError> {
    let issue = issue_of(path)?;
    let body = body.into_inner();
    let reopened = reopen_issue(
        &state,
        &scope.tenant,
        &scope.admin.subject,
        &issue,
        body.state.as_deref(),
    )
    .await?;
    Ok(HttpResponse::Ok().json(reopened))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClaimBody {
    run: String,
}

async fn claim_handler(
    state: web::Data<AppState>,
    scope: ManageTenant,
    path: web::Path<(String, String)>,
    body: web::Json<ClaimBody>,
) -> Result<HttpResponse, ApiError> {
    let issue = issue_of(path)?;
    let run = RunId::parse(body.into_inner().run)?;
    let claimed = claim_issue(&state, &scope.tenant, &issue, &run).await?;
    Ok(HttpResponse::Ok().json(claimed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_local_write_is_the_admin_principals() {
        let author = admin_author("ann@example.com");
        assert_eq!(author.kind, AuthorKind::Admin);
        assert_eq!(
            author,
            Author::principal(AuthorKind::Admin, "ann@example.com")
        );
        assert!(author.grant.is_none());
    }
}
