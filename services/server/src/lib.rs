//! The Corkboard control plane as an actix-web application: the admin and
//! board API under `/v1/`, the studio MCP endpoint at `/mcp`, `/healthz`
//! and `/readyz`, built from typed settings (`corkboard-config`) and the
//! parts the binary opened ([`AppParts`]).
//!
//! The binary (`services/cli`) owns processes, signals and listeners, and
//! decides which store, registry and secrets a configuration selects; this
//! crate owns what the HTTP surface means.

#![forbid(unsafe_code)]

pub mod admin;
pub mod audit;
pub mod health;
pub mod markdown;
pub mod metered;
pub mod session_ends;
pub mod state;
#[cfg(test)]
mod testing;
pub mod upstreams;
pub mod web;
mod webhook_api;
pub mod webhooks;

pub use state::{AppParts, AppState, StartError};

/// Mounts every route of the control plane.
pub fn routes(cfg: &mut actix_web::web::ServiceConfig) {
    health::configure(cfg);
    web::configure(cfg);
    admin::configure(cfg);
    cfg.route("/mcp", actix_web::web::route().to(studio_mcp));
    metrics_route(cfg);
}

/// `/metrics`, for every role's HTTP port.
pub fn metrics_route(cfg: &mut actix_web::web::ServiceConfig) {
    cfg.route("/metrics", actix_web::web::get().to(metrics));
}

/// Prometheus text exposition of this process's metrics.
async fn metrics(state: actix_web::web::Data<AppState>) -> actix_web::HttpResponse {
    actix_web::HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4; charset=utf-8")
        .body(state.metrics.render())
}

/// The studio MCP endpoint: every method goes to the endpoint, which
/// answers GET/DELETE/others as the protocol says.
async fn studio_mcp(
    state: actix_web::web::Data<AppState>,
    req: actix_web::HttpRequest,
    body: actix_web::web::Payload,
) -> actix_web::HttpResponse {
    state.mcp.handle(req, body).await
}
