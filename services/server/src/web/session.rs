//! Web sessions: a stateless cookie signed with the server's session key,
//! and the one function that authenticates a request by bearer JWT or by
//! that cookie (with its CSRF check).
//!
//! The cookie carries `{subject, role, tenant, expiry, csrf nonce}` and an
//! HMAC-SHA256 over them. Every replica shares the session key, so any
//! replica accepts a session another one issued, and nothing is stored.
//! The price of statelessness: a session cannot be revoked before it
//! expires, which is why sessions are short ([`MAX_SESSION`]).
//!
//! CSRF: the cookie is `SameSite=Strict`, and on top of that every
//! state-changing request authenticated by the cookie must repeat the
//! session's nonce in `X-CSRF-Token` (the page reads it from
//! `GET /web/session`; another site can neither read it nor set the header
//! without a CORS preflight this server never grants). Bearer requests need
//! no nonce: browsers never attach bearer credentials on their own.

use crate::state::AppState;
use actix_web::dev::Payload;
use actix_web::http::{Method, header};
use actix_web::{FromRequest, HttpRequest, web};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use corkboard_api::ApiError;
use corkboard_api::bearer;
use corkboard_board::{TenantId, Timestamp};
use corkboard_grants::{AdminPrincipal, AdminRole};
use corkboard_mcp::SessionKey;
use rand::RngCore;
use serde::{Deserialize, Serialize};
use std::future::{Ready, ready};
use std::time::Duration;
use subtle::ConstantTimeEq;

/// Name of the session cookie.
pub const COOKIE_NAME: &str = "corkboard_session";
/// Header that must repeat the session's CSRF nonce on state-changing requests.
pub const CSRF_HEADER: &str = "x-csrf-token";
/// Longest a session lives; also the lifetime of a one-time sign-in session.
pub const MAX_SESSION: Duration = Duration::from_secs(12 * 3600);

/// Separates the web-cookie MAC from every other use of the session key
/// (the MCP layer signs its session ids with the same key; the token
/// registry its grant records).
const DOMAIN: &[u8] = b"corkboard web session cookie v2";
/// Cookies longer than this are refused before any decoding.
const MAX_COOKIE_CHARS: usize = 2048;

/// What a session cookie says. Only [`Session::encode`] creates the signed
/// form; [`Session::decode`] accepts nothing that was not signed with the
/// same key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    /// Format version of the payload.
    pub v: u8,
    pub sub: String,
    pub role: AdminRole,
    /// `None`: every tenant (platform admins only).
    pub tenant: Option<TenantId>,
    /// Expiry, Unix seconds.
    pub exp: i64,
    /// CSRF nonce (base64url, 256 bits).
    pub csrf: String,
}

impl Session {
    /// A fresh session for `principal`, valid for `ttl` (at most [`MAX_SESSION`]).
    pub fn new(principal: &AdminPrincipal, ttl: Duration) -> Self {
        let ttl = ttl.min(MAX_SESSION);
        Self::expiring(
            principal,
            now_secs().saturating_add(i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX)),
        )
    }

    /// A fresh session for the admin of a credential that expires at
    /// `credential_exp` (Unix seconds): it ends then, or after
    /// [`MAX_SESSION`] if that is sooner, never later than the credential.
    pub fn until(principal: &AdminPrincipal, credential_exp: i64) -> Self {
        let longest = now_secs().saturating_add(MAX_SESSION.as_secs() as i64);
        Self::expiring(principal, credential_exp.min(longest))
    }

    fn expiring(principal: &AdminPrincipal, exp: i64) -> Self {
        let mut nonce = [0u8; 32];
        rand::rng().fill_bytes(&mut nonce);
        Self {
            v: 1,
            sub: principal.subject.clone(),
            role: principal.role,
            tenant: principal.tenant.clone(),
            exp,
            csrf: URL_SAFE_NO_PAD.encode(nonce),
        }
    }

    /// The admin this session stands for: exactly the roles and tenant
    /// scoping of the admin API.
    pub fn principal(&self) -> AdminPrincipal {
        AdminPrincipal {
            subject: self.sub.clone(),
            role: self.role,
            tenant: self.tenant.clone(),
        }
    }

    pub fn expires_at(&self) -> Timestamp {
        Timestamp::from_millis(self.exp.saturating_mul(1000))
    }

    /// `base64url(json) "." base64url(hmac)`: only cookie-safe characters,
    /// signed with the newest session key (`SessionKey::sign`).
    pub fn encode(&self, key: &SessionKey) -> String {
        let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(self).unwrap_or_default());
        let tag = key.sign(DOMAIN, &[payload.as_bytes()]).unwrap_or_default();
        format!("{payload}.{}", URL_SAFE_NO_PAD.encode(tag))
    }

    /// Verifies the signature (under any listed session key, so a rotated
    /// key signs no one out) and expiry. Errors never echo the cookie.
    pub fn decode(key: &SessionKey, cookie: &str, now_secs: i64) -> Result<Self, ApiError> {
        let invalid = || ApiError::unauthenticated("web session is invalid; sign in again".into());
        if cookie.len() > MAX_COOKIE_CHARS {
            return Err(invalid());
        }
        let (payload, tag) = cookie.split_once('.').ok_or_else(invalid)?;
        let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| invalid())?;
        if !key.verify(DOMAIN, &[payload.as_bytes()], &tag) {
            return Err(invalid());
        }
        let json = URL_SAFE_NO_PAD.decode(payload).map_err(|_| invalid())?;
        let session: Session = serde_json::from_slice(&json).map_err(|_| invalid())?;
        if session.v != 1 {
            return Err(invalid());
        }
        if session.exp <= now_secs {
            return Err(ApiError::unauthenticated(
                "web session has expired; sign in again".into(),
            ));
        }
        // A signed cookie can only hold what `Session::new` put there, but
        // the invariant of the admin API is cheap to re-check.
        if session.tenant.is_none() && session.role != AdminRole::PlatformAdmin {
            return Err(invalid());
        }
        Ok(session)
    }

    /// Whether `presented` is this session's CSRF nonce (constant time).
    pub fn csrf_matches(&self, presented: &str) -> bool {
        !presented.is_empty() && bool::from(self.csrf.as_bytes().ct_eq(presented.as_bytes()))
    }
}

pub(crate) fn now_secs() -> i64 {
    Timestamp::now().as_millis() / 1000
}

/// The session cookie of a request, if it sent one.
pub fn session_cookie(req: &HttpRequest) -> Option<String> {
    req.headers()
        .get_all(header::COOKIE)
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE_NAME)
        .map(|(_, value)| value.trim_matches('"').to_owned())
}

/// `Set-Cookie` value that stores `session` (`Secure` when served over TLS).
pub fn set_cookie(state: &AppState, session: &Session) -> String {
    let max_age = (session.exp - now_secs()).max(0);
    format!(
        "{COOKIE_NAME}={}; Path=/; Max-Age={max_age}; HttpOnly; SameSite=Strict{}",
        session.encode(&state.session_key),
        secure_attribute(state)
    )
}

/// `Set-Cookie` value that deletes the session cookie.
pub fn clear_cookie(state: &AppState) -> String {
    format!(
        "{COOKIE_NAME}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict{}",
        secure_attribute(state)
    )
}

/// Behind a TLS-terminating proxy the request itself is plain HTTP, so the
/// public URL, not the connection, says whether the browser uses TLS.
fn secure_attribute(state: &AppState) -> &'static str {
    if state.public_url().starts_with("https://") {
        "; Secure"
    } else {
        ""
    }
}

fn is_safe(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// The session a request's cookie carries (no CSRF check: for reads and
/// for the endpoints that hand out the nonce).
pub fn session_of(req: &HttpRequest, state: &AppState) -> Result<Session, ApiError> {
    let cookie = session_cookie(req).ok_or_else(|| {
        ApiError::unauthenticated(
            "not signed in: open the sign-in link, or sign in with an admin token".into(),
        )
    })?;
    Session::decode(&state.session_key, &cookie, now_secs())
}

/// Authenticates an admin-API or web request: a bearer JWT if the request
/// has an `Authorization` header (a bad one is refused, never replaced by
/// the cookie), otherwise the session cookie, which on a state-changing
/// method must come with the matching `X-CSRF-Token`.
pub fn authenticate(req: &HttpRequest, state: &AppState) -> Result<AdminPrincipal, ApiError> {
    if let Some(token) = bearer(req) {
        return state.admin.verify(token).map_err(ApiError::from);
    }
    if session_cookie(req).is_none() {
        return Err(ApiError::unauthenticated(
            "missing admin credential: send Authorization: Bearer <admin JWT> (mint one with `corkboard admin token`) or sign in to the web board".into(),
        ));
    }
    let session = session_of(req, state)?;
    if !is_safe(req.method()) {
        let presented = req
            .headers()
            .get(CSRF_HEADER)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if !session.csrf_matches(presented) {
            return Err(ApiError::forbidden(
                "missing or wrong X-CSRF-Token: a request authenticated by the web session must repeat the session's CSRF token".into(),
            ));
        }
    }
    Ok(session.principal())
}

/// Extractor: the admin behind a request, by bearer JWT or web session
/// (see [`authenticate`]).
#[derive(Debug, Clone)]
pub struct WebAuth(pub AdminPrincipal);

impl corkboard_api::AdminCaller for WebAuth {
    fn into_principal(self) -> AdminPrincipal {
        self.0
    }
}

impl FromRequest for WebAuth {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let Some(state) = req.app_data::<web::Data<AppState>>() else {
            return ready(Err(ApiError::internal("application state missing".into())));
        };
        ready(authenticate(req, state).map(|admin| {
            // Its connection is not shed near the listener's cap.
            corkboard_telemetry::conn::mark_authenticated(req);
            WebAuth(admin)
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn principal(role: AdminRole, tenant: Option<&str>) -> AdminPrincipal {
        AdminPrincipal {
            subject: "alice".into(),
            role,
            tenant: tenant.map(|t| TenantId::parse(t).unwrap()),
        }
    }

    #[test]
    fn round_trips_and_refuses_tampering_other_keys_and_expiry() {
        let key = SessionKey::new(vec![7u8; 32]).unwrap();
        let session = Session::new(
            &principal(AdminRole::Viewer, Some("acme")),
            Duration::from_secs(60),
        );
        let cookie = session.encode(&key);
        assert!(
            cookie
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)),
            "{cookie}"
        );
        let back = Session::decode(&key, &cookie, now_secs()).unwrap();
        assert_eq!(back, session);
        assert_eq!(back.principal(), principal(AdminRole::Viewer, Some("acme")));

        assert!(
            Session::decode(
                &SessionKey::new(vec![8u8; 32]).unwrap(),
                &cookie,
                now_secs()
            )
            .is_err(),
            "another key"
        );
        // A rotated key still accepts what the previous one signed, and
        // signs with the newest.
        let rotated = SessionKey::new(vec![9u8; 32])
            .unwrap()
            .with_previous([vec![7u8; 32]])
            .unwrap();
        assert_eq!(
            Session::decode(&rotated, &cookie, now_secs()).unwrap(),
            session
        );
        let fresh = session.encode(&rotated);
        assert!(
            Session::decode(&key, &fresh, now_secs()).is_err(),
            "signed with the newest"
        );
        assert!(
            Session::decode(&key, &cookie, session.exp).is_err(),
            "expired"
        );

        // Promote the viewer to platform admin by editing the payload.
        let (payload, tag) = cookie.split_once('.').unwrap();
        let mut json: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap();
        json["role"] = "platform-admin".into();
        let forged = format!(
            "{}.{tag}",
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(&json).unwrap())
        );
        assert!(
            Session::decode(&key, &forged, now_secs()).is_err(),
            "edited payload"
        );
        assert!(Session::decode(&key, "nonsense", now_secs()).is_err());
        assert!(Session::decode(&key, &"a.b".repeat(1000), now_secs()).is_err());
    }

    #[test]
    fn lifetime_is_capped_and_nonces_differ() {
        let p = principal(AdminRole::PlatformAdmin, None);
        let a = Session::new(&p, Duration::from_secs(10 * 24 * 3600));
        let b = Session::new(&p, Duration::from_secs(60));
        assert!(a.exp - now_secs() <= MAX_SESSION.as_secs() as i64);
        assert_ne!(a.csrf, b.csrf);
        assert!(a.csrf_matches(&a.csrf.clone()));
        assert!(!a.csrf_matches(&b.csrf));
        assert!(!a.csrf_matches(""));
    }
}
