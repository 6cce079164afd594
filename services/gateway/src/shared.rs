//! Shared mode: one port, a route per run (`/runs/{run}/mcp`).
//!
//! Behind a Kubernetes Service any runner pod may receive any run's
//! request, so a pod that has no actor for the run activates one from the
//! grant the request's token resolves to in the shared registry (a virtual
//! actor): no affinity, and losing a pod loses no run. The token must
//! resolve to a grant for exactly the run in the path; the resolved grant
//! travels with the request so it is not looked up twice.

use crate::bridge::{self, Refusal};
use crate::gateway::Gateway;
use crate::key::RunKey;
use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use corkboard_board::{Grant, RunId, Timestamp};
use corkboard_grants::{RegistryError, RunToken, TokenHash, TokenRegistry};
use corkboard_mcp::AuthRejection;
use std::time::Duration;

pub(crate) fn configure(cfg: &mut web::ServiceConfig, gateway: Gateway) {
    cfg.app_data(web::Data::new(gateway))
        .route("/runs/{run}/mcp", web::route().to(shared_request));
}

async fn shared_request(
    req: HttpRequest,
    payload: web::Payload,
    gateway: web::Data<Gateway>,
) -> HttpResponse {
    let inner = &gateway.inner;
    let raw_run = req.match_info().get("run").unwrap_or_default().to_owned();
    let incoming =
        match bridge::read(req, payload, inner.config.max_body_bytes, raw_run.clone()).await {
            Ok(incoming) => incoming,
            Err(response) => return response,
        };
    let Ok(run) = RunId::parse(raw_run) else {
        return bridge::not_found(incoming, "no run is served at this path");
    };
    // One binding snapshot for the lookup here and everything after it.
    let binding = inner.binding.load();
    let bearer = corkboard_mcp::bearer_token(incoming.req.headers());
    let (hash, grant) = match resolve(
        binding.registry().as_ref(),
        bearer,
        inner.config.store_timeout,
    )
    .await
    {
        Ok(resolved) => resolved,
        Err(rejection) => return bridge::refuse(incoming, bridge::auth_refusal(rejection)),
    };
    if grant.run != run {
        return bridge::refuse(
            incoming,
            Refusal::new(
                StatusCode::FORBIDDEN,
                corkboard_mcp::code::INVALID_REQUEST,
                format!("Forbidden: {}", crate::backend::OTHER_RUN),
            ),
        );
    }
    let key = RunKey::new(grant.tenant.clone(), run);
    let run = match inner.activate(&key, &grant, hash) {
        Ok(run) => run,
        Err(_) => {
            return bridge::refuse(incoming, bridge::run_ended(&key, None, false));
        }
    };
    bridge::serve(inner, &run, incoming, Some(binding), Some((hash, grant))).await
}

/// Resolves a bearer token the way the board tools do (same messages).
async fn resolve(
    registry: &dyn TokenRegistry,
    bearer: Option<&str>,
    limit: Duration,
) -> Result<(TokenHash, Grant), AuthRejection> {
    let bearer = bearer.ok_or(AuthRejection::Missing)?;
    let token = RunToken::from_presented(bearer).ok_or_else(|| {
        AuthRejection::Refused(
            "run token malformed: expected the cbr_… token printed when the run was registered"
                .to_owned(),
        )
    })?;
    let hash = token.hash();
    let grant = tokio::time::timeout(limit, registry.resolve(&hash))
        .await
        .map_err(|_| {
            AuthRejection::Unavailable(format!(
                "token registry did not answer within {}s",
                limit.as_secs_f64()
            ))
        })?
        .map_err(|err| match err {
            RegistryError::UnknownToken | RegistryError::GrantNotFound => {
                AuthRejection::Refused("run token unknown".to_owned())
            }
            RegistryError::Expired => AuthRejection::Refused("run token expired".to_owned()),
            RegistryError::Revoked => AuthRejection::Refused("run token revoked".to_owned()),
            other => AuthRejection::Unavailable(format!("token registry unavailable: {other}")),
        })?;
    if grant.is_expired_at(Timestamp::now()) {
        return Err(AuthRejection::Refused("run token expired".to_owned()));
    }
    Ok((hash, grant))
}
