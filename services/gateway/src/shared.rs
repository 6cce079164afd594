//! Shared mode: one port, a route per run (`/runs/{run}/mcp`).
//!
//! Behind a Kubernetes Service any runner pod may receive any run's
//! request, so a pod that has no actor for the run activates one from the
//! grant the request's token resolves to in the shared registry (a virtual
//! actor): no affinity, and losing a pod loses no run. The token must
//! resolve to a grant for exactly the run in the path, checked from the
//! headers before the body is read; the resolved grant travels with the
//! request so it is not looked up twice.

use crate::bridge;
use crate::gateway::Gateway;
use actix_web::{HttpRequest, HttpResponse, web};
use corkboard_board::RunId;
use corkboard_grants::RunKey;

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
    let incoming = bridge::incoming(req, raw_run.clone());
    let Ok(run) = RunId::parse(raw_run) else {
        return bridge::not_found(inner, incoming, "no run is served at this path");
    };
    // One binding snapshot for the lookup here and everything after it.
    let binding = inner.binding.load();
    let caller = match bridge::authenticate(inner, &incoming, &binding, None).await {
        Ok(caller) => caller,
        Err(refusal) => return bridge::refuse(inner, incoming, refusal),
    };
    let grant = caller.grant().grant();
    if grant.run != run {
        return bridge::refuse(inner, incoming, bridge::other_run());
    }
    let key = RunKey::new(grant.tenant.clone(), run);
    let run = match inner.activate(&key, grant, caller.grant().token_hash()) {
        Ok(run) => run,
        Err(_) => {
            return bridge::refuse(inner, incoming, bridge::run_ended(&key, None, false));
        }
    };
    bridge::serve(inner, &run, incoming, payload, binding, caller).await
}
