//! `/healthz` (the process answers) and `/readyz` (its dependencies do).

use crate::state::AppState;
use actix_web::{HttpResponse, web};
use serde_json::json;
use std::time::Duration;

/// Longest a readiness probe waits for one dependency.
const CHECK_TIMEOUT: Duration = Duration::from_secs(2);

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/healthz", web::get().to(healthz))
        .route("/readyz", web::get().to(readyz));
}

async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(json!({ "status": "ok", "version": env!("CARGO_PKG_VERSION") }))
}

async fn readyz(state: web::Data<AppState>) -> HttpResponse {
    let store = match tokio::time::timeout(CHECK_TIMEOUT, state.store.check()).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("store check timed out".to_owned()),
    };
    let registry = match tokio::time::timeout(CHECK_TIMEOUT, state.grants.registry().check()).await
    {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("registry check timed out".to_owned()),
    };
    let describe = |r: &Result<(), String>| match r {
        Ok(()) => json!("ok"),
        Err(e) => json!(e),
    };
    let body = json!({
        "status": if store.is_ok() && registry.is_ok() { "ready" } else { "unavailable" },
        "store": describe(&store),
        "registry": describe(&registry),
    });
    if store.is_ok() && registry.is_ok() {
        HttpResponse::Ok().json(body)
    } else {
        HttpResponse::ServiceUnavailable().json(body)
    }
}
