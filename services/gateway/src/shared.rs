//! Shared mode: one port, a route per run (`/runs/{run}/mcp`).
//!
//! Behind a Kubernetes Service any runner pod may receive any run's
//! request, so a pod that has no actor for the run activates one from the
//! grant the request's token resolves to in the shared registry (a virtual
//! actor): no affinity, and losing a pod loses no run. The token must
//! resolve to a grant for exactly the run in the path, checked from the
//! headers before the body is read; the resolved grant travels with the
//! request so it is not looked up twice.

use crate::actor::RunHandle;
use crate::bridge::{self, Bridge};
use crate::error::GatewayError;
use crate::refusals::{other_run, run_ended};
use actix_web::{HttpRequest, HttpResponse, web};
use corkboard_board::{Grant, RunId};
use corkboard_grants::{RunKey, TokenHash};
use std::sync::Arc;

/// What the shared route needs of its gateway besides the request path:
/// the run's actor, started here if none serves it yet (see
/// `Gateway::configure_shared`).
pub(crate) trait Activate: Send + Sync + 'static {
    /// The live actor of `key`, whose grant the request's token resolved
    /// to, started from `grant` when this runner has none (or only one
    /// winding down).
    fn activate(
        &self,
        key: &RunKey,
        grant: &Grant,
        token_hash: TokenHash,
    ) -> Result<RunHandle, GatewayError>;
}

/// The route's state: the request path and the runs it activates.
struct SharedRoute {
    bridge: Arc<Bridge>,
    runs: Arc<dyn Activate>,
}

pub(crate) fn configure(
    cfg: &mut web::ServiceConfig,
    bridge: Arc<Bridge>,
    runs: Arc<dyn Activate>,
) {
    cfg.app_data(web::Data::new(SharedRoute { bridge, runs }))
        .route("/runs/{run}/mcp", web::route().to(shared_request));
}

async fn shared_request(
    req: HttpRequest,
    payload: web::Payload,
    route: web::Data<SharedRoute>,
) -> HttpResponse {
    let bridge = &route.bridge;
    let raw_run = req.match_info().get("run").unwrap_or_default().to_owned();
    let incoming = bridge::incoming(req, raw_run.clone());
    let Ok(run) = RunId::parse(raw_run) else {
        return bridge::not_found(bridge, incoming, "no run is served at this path");
    };
    // One binding snapshot for the lookup here and everything after it.
    let binding = bridge.binding.load();
    let caller = match bridge::authenticate(bridge, &incoming, &binding, None).await {
        Ok(caller) => caller,
        Err(refusal) => return bridge::refuse(bridge, incoming, refusal),
    };
    let grant = caller.grant().grant();
    if grant.run != run {
        return bridge::refuse(bridge, incoming, other_run());
    }
    let key = RunKey::new(grant.tenant.clone(), run);
    let run = match route
        .runs
        .activate(&key, grant, caller.grant().token_hash())
    {
        Ok(run) => run,
        Err(_) => {
            return bridge::refuse(bridge, incoming, run_ended(&key, None, false));
        }
    };
    bridge::serve(bridge, &run, incoming, payload, binding, caller).await
}
