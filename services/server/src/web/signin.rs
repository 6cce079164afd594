//! Signing in and out of the web board: the one-time link `corkboard serve`
//! prints, the exchange of an admin JWT for a session (clusters), the
//! session the page reads (who, which role, the CSRF nonce), and sign-out.

use super::WebState;
use super::pages::{no_store, signin_error_page};
use super::session::{
    MAX_SESSION, Session, WebAuth, authenticate, clear_cookie, now_secs, session_of, set_cookie,
};
use crate::state::AppState;
use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, web};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use corkboard_api::ApiError;
use corkboard_board::{TenantId, Timestamp};
use corkboard_grants::{AdminPrincipal, AdminRole};
use rand::RngCore;
use serde::Deserialize;
use serde_json::json;
use sha2::{Digest, Sha256};
use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::Duration;

/// How long a printed sign-in link stays usable.
pub const SIGNIN_LINK_TTL: Duration = Duration::from_secs(15 * 60);
/// The subject a one-time link signs in as.
pub const LOCAL_ADMIN: &str = "local-admin";

/// Why a sign-in code was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodeRefusal {
    Unknown,
    AlreadyUsed,
    Expired,
}

#[derive(Debug, Clone, Copy)]
struct CodeEntry {
    expires_at: i64,
    used: bool,
}

/// One-time sign-in codes of this process, kept only as SHA-256 hashes
/// (the link is printed by the same process that checks it).
#[derive(Debug, Default)]
pub struct SigninCodes {
    codes: Mutex<HashMap<[u8; 32], CodeEntry>>,
}

impl SigninCodes {
    fn codes(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], CodeEntry>> {
        self.codes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new code (256 random bits, base64url), usable once within `ttl`.
    pub fn create(&self, ttl: Duration) -> String {
        let mut bytes = [0u8; 32];
        rand::rng().fill_bytes(&mut bytes);
        let code = URL_SAFE_NO_PAD.encode(bytes);
        let expires_at =
            now_secs().saturating_add(i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX));
        let mut codes = self.codes();
        // Used and expired codes are kept only while they can still explain
        // a refusal; the map never outgrows the links actually printed.
        let now = now_secs();
        codes.retain(|_, e| e.expires_at > now);
        codes.insert(
            hash(&code),
            CodeEntry {
                expires_at,
                used: false,
            },
        );
        code
    }

    /// Consumes `code`: only its first use within its lifetime succeeds.
    pub fn consume(&self, code: &str) -> Result<(), CodeRefusal> {
        let mut codes = self.codes();
        let entry = codes.get_mut(&hash(code)).ok_or(CodeRefusal::Unknown)?;
        if entry.used {
            return Err(CodeRefusal::AlreadyUsed);
        }
        if entry.expires_at <= now_secs() {
            return Err(CodeRefusal::Expired);
        }
        entry.used = true;
        Ok(())
    }
}

fn hash(code: &str) -> [u8; 32] {
    Sha256::digest(code.as_bytes()).into()
}

#[derive(Debug, Deserialize)]
pub(super) struct SigninQuery {
    code: Option<String>,
}

/// `GET /signin?code=...`: consumes a one-time code, sets the session
/// cookie and sends the browser to the board.
pub(super) async fn signin_link(
    state: web::Data<AppState>,
    web_state: WebState,
    query: web::Query<SigninQuery>,
) -> HttpResponse {
    let Some(code) = query.into_inner().code.filter(|c| !c.is_empty()) else {
        return no_store(HttpResponse::SeeOther())
            .insert_header((header::LOCATION, "/"))
            .finish();
    };
    match web_state.signin_codes().consume(&code) {
        Ok(()) => {
            let admin = AdminPrincipal {
                subject: LOCAL_ADMIN.into(),
                role: AdminRole::PlatformAdmin,
                tenant: None,
            };
            let session = Session::new(&admin, MAX_SESSION);
            tracing::info!(subject = LOCAL_ADMIN, "web sign-in with a one-time link");
            no_store(HttpResponse::SeeOther())
                .insert_header((header::LOCATION, "/"))
                .insert_header((header::SET_COOKIE, set_cookie(&state, &session)))
                .finish()
        }
        Err(refusal) => {
            tracing::info!(?refusal, "web sign-in link refused");
            let (status, message) = match refusal {
                CodeRefusal::AlreadyUsed => (
                    actix_web::http::StatusCode::GONE,
                    "This sign-in link has already been used. Each link works once: restart `corkboard serve` for a new one, or sign in with an admin token.",
                ),
                CodeRefusal::Expired => (
                    actix_web::http::StatusCode::GONE,
                    "This sign-in link has expired. Restart `corkboard serve` for a new one, or sign in with an admin token.",
                ),
                CodeRefusal::Unknown => (
                    actix_web::http::StatusCode::BAD_REQUEST,
                    "This sign-in link is not valid for this server. Check that you copied it whole, or sign in with an admin token.",
                ),
            };
            signin_error_page(status, message)
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ExchangeBody {
    token: String,
}

/// `POST /web/session` `{"token": "<admin JWT>"}`: the cluster sign-in.
/// The session lives as long as the token, at most [`MAX_SESSION`].
pub(super) async fn exchange(
    state: web::Data<AppState>,
    body: web::Json<ExchangeBody>,
) -> Result<HttpResponse, ApiError> {
    let token = body.into_inner().token;
    // The expiry the verifier checked (a fractional `exp` included), not a
    // second reading of the payload: the session must not outlive it.
    let verified = state.admin.verify_with_expiry(token.trim())?;
    let admin = verified.principal;
    let expires_at = i64::try_from(verified.expires_at).unwrap_or(i64::MAX);
    // Within the verifier's leeway a token may verify a moment after its
    // `exp`; it still buys no session.
    if expires_at <= now_secs() {
        return Err(ApiError::unauthenticated("admin token has expired".into()));
    }
    let session = Session::until(&admin, expires_at);
    tracing::info!(subject = %admin.subject, role = %admin.role, "web sign-in with an admin token");
    Ok(no_store(HttpResponse::Ok())
        .insert_header((header::SET_COOKIE, set_cookie(&state, &session)))
        .json(session_json(&state, &session)))
}

/// `GET /web/session`: who is signed in, and the CSRF nonce the page must
/// send back on every state-changing request.
pub(super) async fn current(
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let session = session_of(&req, &state)?;
    Ok(no_store(HttpResponse::Ok()).json(session_json(&state, &session)))
}

fn session_json(state: &AppState, session: &Session) -> serde_json::Value {
    let admin = session.principal();
    let mcp_url = match &state.settings.gateway_public_url {
        Some(base) => format!("{}/runs/<run>/mcp", base.trim_end_matches('/')),
        None => format!("{}/mcp", state.public_url()),
    };
    json!({
        "subject": admin.subject,
        "role": admin.role,
        "tenant": admin.tenant,
        "all_tenants": admin.is_all_tenants(),
        "can_manage": matches!(admin.role, AdminRole::PlatformAdmin | AdminRole::TenantAdmin),
        "can_decide": admin.role != AdminRole::Viewer,
        "expires_at": session.expires_at(),
        "csrf_token": session.csrf,
        "mcp_url": mcp_url,
    })
}

/// `POST /web/logout`: deletes the cookie. A valid session must send its
/// CSRF nonce (nobody else can sign a user out); a session that is already
/// invalid is simply cleared.
pub(super) async fn logout(
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    if session_of(&req, &state).is_ok() {
        authenticate(&req, &state)?;
    }
    Ok(no_store(HttpResponse::NoContent())
        .insert_header((header::SET_COOKIE, clear_cookie(&state)))
        .finish())
}

/// `GET /web/tenants`: the tenants the switcher offers. A tenant-scoped
/// admin gets its tenant; an all-tenants platform admin gets the tenants
/// that have active grants (there is no tenant registry to list), and can
/// still type any other tenant.
pub(super) async fn tenants(
    state: web::Data<AppState>,
    auth: WebAuth,
) -> Result<HttpResponse, ApiError> {
    let admin = auth.0;
    let tenants: BTreeSet<TenantId> = match (&admin.tenant, admin.is_all_tenants()) {
        (Some(own), _) => BTreeSet::from([own.clone()]),
        (None, true) => {
            let active = state.store.active_grants(Timestamp::now()).await?;
            active.into_iter().map(|e| e.grant.tenant).collect()
        }
        (None, false) => BTreeSet::new(),
    };
    Ok(no_store(HttpResponse::Ok()).json(json!({
        "tenants": tenants,
        "complete": !admin.is_all_tenants(),
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_work_once_and_are_stored_hashed() {
        let codes = SigninCodes::default();
        let code = codes.create(SIGNIN_LINK_TTL);
        assert_eq!(code.len(), 43);
        assert!(codes.codes().keys().all(|k| k != code.as_bytes()));
        assert_eq!(codes.consume("nope"), Err(CodeRefusal::Unknown));
        assert_eq!(codes.consume(&code), Ok(()));
        assert_eq!(codes.consume(&code), Err(CodeRefusal::AlreadyUsed));
        let other = codes.create(SIGNIN_LINK_TTL);
        assert_ne!(other, code);
        let expired = codes.create(Duration::ZERO);
        assert_eq!(codes.consume(&expired), Err(CodeRefusal::Expired));
        assert_eq!(codes.consume(&other), Ok(()));
    }
}
