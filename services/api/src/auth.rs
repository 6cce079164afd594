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
use std::future::{Future, Ready, ready};
use std::marker::PhantomData;
use std::pin::Pin;

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
        ready(authenticator.authenticate(req).map(|admin| {
            // Its connection is not shed near the listener's cap.
            corkboard_telemetry::conn::mark_authenticated(req);
            AdminAuth(admin)
        }))
    }
}

/// What an admin may do to a tenant: read it ([`Read`]) or change it
/// ([`Manage`]).
pub trait TenantAccess: 'static {
    /// How a refusal words it ("not allowed to read tenant acme").
    const VERB: &'static str;
    fn allows(admin: &AdminPrincipal, tenant: &TenantId) -> bool;
}

/// Reading a tenant's board, grants, settings and audit trail.
#[derive(Debug)]
pub struct Read;

impl TenantAccess for Read {
    const VERB: &'static str = "read";
    fn allows(admin: &AdminPrincipal, tenant: &TenantId) -> bool {
        admin.can_read(tenant)
    }
}

/// Changing a tenant: grants, runs, settings, upstreams, webhooks, issues.
#[derive(Debug)]
pub struct Manage;

impl TenantAccess for Manage {
    const VERB: &'static str = "change";
    fn allows(admin: &AdminPrincipal, tenant: &TenantId) -> bool {
        admin.can_manage(tenant)
    }
}

/// Deciding a tenant's calls awaiting a person's approval (admins and
/// approvers).
#[derive(Debug)]
pub struct Decide;

impl TenantAccess for Decide {
    const VERB: &'static str = "decide approvals of";
    fn allows(admin: &AdminPrincipal, tenant: &TenantId) -> bool {
        admin.can_decide(tenant)
    }
}

/// The tenant `raw` names, if `admin` may do `A` to it: the one tenant
/// check of every admin surface ([`TenantScope`] for a `{tenant}` path
/// segment; called directly where the tenant comes in a body or query).
pub fn check_tenant<A: TenantAccess>(
    admin: &AdminPrincipal,
    raw: &str,
) -> Result<TenantId, ApiError> {
    let tenant = TenantId::parse(raw)?;
    if !A::allows(admin, &tenant) {
        return Err(ApiError::forbidden(format!(
            "not allowed to {} tenant {tenant}",
            A::VERB
        )));
    }
    Ok(tenant)
}

/// The tenant `raw` names, if `admin` may read it.
pub fn tenant_for_read(admin: &AdminPrincipal, raw: &str) -> Result<TenantId, ApiError> {
    check_tenant::<Read>(admin, raw)
}

/// The tenant `raw` names, if `admin` may change it.
pub fn tenant_for_write(admin: &AdminPrincipal, raw: &str) -> Result<TenantId, ApiError> {
    check_tenant::<Manage>(admin, raw)
}

/// An admin extractor a [`TenantScope`] builds on: [`AdminAuth`] (the
/// registered authenticator), or an app's own (the control plane's, which
/// also takes its web session).
pub trait AdminCaller: FromRequest<Error = ApiError> + 'static {
    fn into_principal(self) -> AdminPrincipal;
}

impl AdminCaller for AdminAuth {
    fn into_principal(self) -> AdminPrincipal {
        self.0
    }
}

/// The tenant of an admin request's `{tenant}` path segment, with the
/// admin, once the caller is authenticated (by `C`) and allowed to do `A`
/// to it: every admin route under `/tenants/{tenant}/...` (and the
/// runner's `/v1/runs/{tenant}/...`) takes its tenant from here, so the
/// check is written once.
#[derive(Debug)]
pub struct TenantScope<A: TenantAccess, C: AdminCaller = AdminAuth> {
    pub admin: AdminPrincipal,
    pub tenant: TenantId,
    access: PhantomData<fn() -> (A, C)>,
}

impl<A: TenantAccess, C: AdminCaller> FromRequest for TenantScope<A, C> {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, ApiError>>>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let caller = C::from_request(req, payload);
        let raw = req.match_info().get("tenant").map(str::to_owned);
        Box::pin(async move {
            let admin = caller.await?.into_principal();
            let raw = raw.ok_or_else(|| {
                ApiError::internal("a tenant-scoped route without a {tenant} segment".into())
            })?;
            let tenant = check_tenant::<A>(&admin, &raw)?;
            Ok(Self {
                admin,
                tenant,
                access: PhantomData,
            })
        })
    }
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

    /// The tenant scope checks the `{tenant}` segment against the admin's
    /// claims: a tenant admin reads and changes its own tenant only, a
    /// viewer reads and never changes.
    #[actix_rt::test]
    async fn the_tenant_scope_allows_only_what_the_claims_cover() {
        let secret = b"0123456789abcdef0123456789abcdef".to_vec();
        let verifier = AdminVerifier::new(AdminVerifierConfig::new(VerifyingKey::Hs256Secret(
            secret.clone(),
        )))
        .unwrap();
        let minter = AdminMinter::new(SigningKey::Hs256Secret(secret)).unwrap();
        let data: web::Data<dyn AdminAuthenticator> =
            web::Data::from(Arc::new(verifier) as Arc<dyn AdminAuthenticator>);
        let acme = TenantId::parse("acme").unwrap();
        let ttl = Duration::from_secs(60);
        let admin = minter
            .mint("a", AdminRole::TenantAdmin, Some(&acme), ttl)
            .unwrap();
        let viewer = minter
            .mint("v", AdminRole::Viewer, Some(&acme), ttl)
            .unwrap();
        let request = |token: &str, tenant: &str| {
            TestRequest::default()
                .app_data(data.clone())
                .insert_header(("Authorization", format!("Bearer {token}")))
                .param("tenant", tenant.to_owned())
                .to_http_request()
        };
        let own = TenantScope::<Manage>::extract(&request(&admin, "acme"))
            .await
            .unwrap();
        assert_eq!((own.tenant, own.admin.subject), (acme.clone(), "a".into()));
        let other = TenantScope::<Read>::extract(&request(&admin, "globex"))
            .await
            .unwrap_err();
        assert_eq!(
            (other.code(), other.to_string()),
            ("forbidden", "not allowed to read tenant globex".into())
        );
        let read = TenantScope::<Read>::extract(&request(&viewer, "acme")).await;
        assert!(read.is_ok());
        let change = TenantScope::<Manage>::extract(&request(&viewer, "acme"))
            .await
            .unwrap_err();
        assert_eq!(change.code(), "forbidden");
        let bad = TenantScope::<Read>::extract(&request(&admin, "Not A Tenant"))
            .await
            .unwrap_err();
        assert_eq!(bad.code(), "invalid_request");
    }
}
