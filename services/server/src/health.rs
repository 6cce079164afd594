//! `/healthz` (the process answers) and `/readyz` (its dependencies do).
//!
//! Readiness checks the store and the registry at once, each bounded by
//! [`CHECK_TIMEOUT`], so the answer comes within that bound, well inside
//! a probe's usual 3 s timeout. A dependency that answered within the last
//! [`BLIP_TOLERANCE`] and fails now is a blip: reported (`"degraded: ..."`)
//! but still ready, so a second of Redis or MongoDB trouble does not take
//! every pod out of every Service at once (and leave a
//! PodDisruptionBudget blocking drains). Requests meanwhile fail closed
//! on their own (503, "board unavailable"): readiness only decides where
//! traffic goes, and every replica shares the same datastores.

use crate::state::AppState;
use actix_web::{HttpResponse, web};
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Longest a readiness probe waits for one dependency (both are checked
/// at once).
pub const CHECK_TIMEOUT: Duration = Duration::from_millis(1500);
/// How long after its last good answer a failing dependency still counts
/// as a blip, not an outage.
pub const BLIP_TOLERANCE: Duration = Duration::from_secs(10);

/// When each dependency last answered a readiness check.
#[derive(Debug)]
pub struct Readiness {
    origin: Instant,
    /// One plus milliseconds after `origin` of the last good store check;
    /// 0: never.
    store_ok: AtomicU64,
    registry_ok: AtomicU64,
}

impl Default for Readiness {
    fn default() -> Self {
        Self {
            origin: Instant::now(),
            store_ok: AtomicU64::new(0),
            registry_ok: AtomicU64::new(0),
        }
    }
}

/// What one dependency's check says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Ok,
    /// Failing now, but good within [`BLIP_TOLERANCE`]: still ready.
    Blip(String),
    Down(String),
}

impl Verdict {
    fn ready(&self) -> bool {
        !matches!(self, Self::Down(_))
    }

    fn describe(&self) -> serde_json::Value {
        match self {
            Self::Ok => json!("ok"),
            Self::Blip(e) => json!(format!("degraded: {e}")),
            Self::Down(e) => json!(e),
        }
    }
}

impl Readiness {
    /// The verdict on one check's `result` at `now`, remembering a success.
    fn judge(&self, last_ok: &AtomicU64, result: Result<(), String>, now: Instant) -> Verdict {
        let ms = now.saturating_duration_since(self.origin).as_millis() as u64 + 1;
        match result {
            Ok(()) => {
                last_ok.fetch_max(ms, Ordering::Relaxed);
                Verdict::Ok
            }
            Err(e) => {
                let last = last_ok.load(Ordering::Relaxed);
                if last != 0 && ms - last.min(ms) <= BLIP_TOLERANCE.as_millis() as u64 {
                    Verdict::Blip(e)
                } else {
                    Verdict::Down(e)
                }
            }
        }
    }
}

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/healthz", web::get().to(healthz))
        .route("/readyz", web::get().to(readyz));
}

async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(json!({ "status": "ok", "version": env!("CARGO_PKG_VERSION") }))
}

async fn bounded<E: std::fmt::Display>(
    what: &str,
    check: impl std::future::Future<Output = Result<(), E>>,
) -> Result<(), String> {
    match tokio::time::timeout(CHECK_TIMEOUT, check).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("{what} check timed out")),
    }
}

async fn readyz(state: web::Data<AppState>) -> HttpResponse {
    let (store, registry) = tokio::join!(
        bounded("store", state.store.check()),
        bounded("registry", state.grants.registry().check()),
    );
    let now = Instant::now();
    let r = &state.readiness;
    let store = r.judge(&r.store_ok, store, now);
    let registry = r.judge(&r.registry_ok, registry, now);
    let ready = store.ready() && registry.ready();
    let body = json!({
        "status": if ready { "ready" } else { "unavailable" },
        "store": store.describe(),
        "registry": registry.describe(),
    });
    if ready {
        HttpResponse::Ok().json(body)
    } else {
        HttpResponse::ServiceUnavailable().json(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_soon_after_a_success_is_a_blip_and_a_long_one_is_down() {
        let r = Readiness::default();
        let t0 = r.origin;
        let err = || Err("redis down".to_owned());
        // Never answered: down from the start (a pod that cannot reach
        // its datastores must not get traffic).
        assert!(matches!(
            r.judge(&r.registry_ok, err(), t0),
            Verdict::Down(_)
        ));
        assert_eq!(r.judge(&r.registry_ok, Ok(()), t0), Verdict::Ok);
        let soon = t0 + BLIP_TOLERANCE - Duration::from_millis(1);
        assert!(matches!(
            r.judge(&r.registry_ok, err(), soon),
            Verdict::Blip(_)
        ));
        let later = t0 + BLIP_TOLERANCE + Duration::from_millis(2);
        assert!(matches!(
            r.judge(&r.registry_ok, err(), later),
            Verdict::Down(_)
        ));
        // The store's memory is its own.
        assert!(matches!(
            r.judge(&r.store_ok, err(), soon),
            Verdict::Down(_)
        ));
    }
}
