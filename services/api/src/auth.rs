//! Admin authentication: the [`AdminAuth`] extractor, which asks the
//! [`AdminAuthenticator`] the app registered (as
//! `web::Data<dyn AdminAuthenticator>`) who the caller is.
//!
//! The extractor knows no application state, so any app can mount
//! admin-authenticated routes: an [`AdminVerifier`] accepts a bearer admin
//! JWT; the control plane registers its own authenticator, which also
//! accepts the web board's session cookie (with its CSRF check), so the
//! register API mounted beside it accepts exactly what the admin API does.

use crate::error::ApiError;
use actix_web::dev::Payload;
use actix_web::{FromRequest, HttpRequest, web};
use corkboard_board::TenantId;
use corkboard_grants::{AdminPrincipal, AdminVerifier};
use std::future::{Ready, ready};

/// Decides who the admin behind a request is.
pub trait AdminAuthenticator: Send + Sync + 'static {
    fn authenticate(&self, req: &HttpRequest) -> Result<AdminPrincipal, ApiError>;
}

/// A bearer admin JWT and nothing else.
impl AdminAuthenticator for AdminVerifier {
    fn authenticate(&self, req: &HttpRequest) -> Result<AdminPrincipal, ApiError> {
        let token = bearer(req).ok_or_else(|| {
            ApiError::unauthenticated(
                "missing admin credential: send Authorization: Bearer <admin JWT> (mint one with `corkboard admin token`)".into(),
            )
        })?;
        self.verify(token).map_err(ApiError::from)
    }
}

/// The authenticated admin caller of a request.
#[derive(Debug, Clone)]
pub struct AdminAuth(pub AdminPrincipal);

/// The bearer credential of a request, if it has one.
pub fn bearer(req: &HttpRequest) -> Option<&str> {
    corkboard_grants::bearer_token(req.headers())
}

impl FromRequest for AdminAuth {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let Some(authenticator) = req.app_data::<web::Data<dyn AdminAuthenticator>>() else {
            return ready(Err(ApiError::internal(
                "admin authenticator missing from the app data".into(),
            )));
        };
        ready(authenticator.authenticate(req).map(AdminAuth))
    }
}

/// The tenant `raw` names, if `admin` may read it: the one read check of
/// every admin surface (the admin API, the web board, its live feed).
pub fn tenant_for_read(admin: &AdminPrincipal, raw: &str) -> Result<TenantId, ApiError> {
    let tenant = TenantId::parse(raw)?;
    if !admin.can_read(&tenant) {
        return Err(ApiError::forbidden(format!(
            "not allowed to read tenant {tenant}"
        )));
    }
    Ok(tenant)
}

/// The tenant `raw` names, if `admin` may change it: the one write check
/// of every admin surface (grants, upstreams, webhooks, the runner's runs).
pub fn tenant_for_write(admin: &AdminPrincipal, raw: &str) -> Result<TenantId, ApiError> {
    let tenant = TenantId::parse(raw)?;
    if !admin.can_manage(&tenant) {
        return Err(ApiError::forbidden(format!(
            "not allowed to change tenant {tenant}"
        )));
    }
    Ok(tenant)
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::test::TestRequest;
    use corkboard_grants::{AdminMinter, AdminRole, AdminVerifierConfig, SigningKey, VerifyingKey};
    use std::sync::Arc;
    use std::time::Duration;

    #[actix_rt::test]
    async fn bearer_jwt_is_verified_by_the_registered_authenticator() {
        let secret = b"0123456789abcdef0123456789abcdef".to_vec();
        let verifier = AdminVerifier::new(AdminVerifierConfig::new(VerifyingKey::Hs256Secret(
            secret.clone(),
        )))
        .unwrap();
        let minter = AdminMinter::new(SigningKey::Hs256Secret(secret)).unwrap();
        let token = minter
            .mint(
                "ops",
                AdminRole::PlatformAdmin,
                None,
                Duration::from_secs(60),
            )
            .unwrap();
        let data: web::Data<dyn AdminAuthenticator> =
            web::Data::from(Arc::new(verifier) as Arc<dyn AdminAuthenticator>);
        let req = TestRequest::default()
            .app_data(data.clone())
            .insert_header(("Authorization", format!("Bearer {token}")))
            .to_http_request();
        let auth = AdminAuth::extract(&req).await.unwrap();
        assert_eq!(auth.0.subject, "ops");
        let anonymous = TestRequest::default().app_data(data).to_http_request();
        let err = AdminAuth::extract(&anonymous).await.unwrap_err();
        assert_eq!(err.code(), "unauthenticated");
        let unconfigured = TestRequest::default().to_http_request();
        let err = AdminAuth::extract(&unconfigured).await.unwrap_err();
        assert_eq!(err.code(), "internal");
    }
}
