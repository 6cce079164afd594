//! Admin authentication: an `Authorization: Bearer <JWT>` header, verified
//! by the configured [`AdminVerifier`](corkboard_grants::AdminVerifier).

use crate::error::ApiError;
use crate::state::AppState;
use actix_web::dev::Payload;
use actix_web::{FromRequest, HttpRequest, web};
use corkboard_grants::AdminPrincipal;
use std::future::{Ready, ready};

/// The authenticated admin caller of a request.
#[derive(Debug, Clone)]
pub struct AdminAuth(pub AdminPrincipal);

/// The bearer credential of a request, if it has one.
pub fn bearer(req: &HttpRequest) -> Option<&str> {
    corkboard_mcp::bearer_token(req.headers())
}

impl FromRequest for AdminAuth {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let Some(state) = req.app_data::<web::Data<AppState>>() else {
            return ready(Err(ApiError::Internal("application state missing".into())));
        };
        // A bearer admin JWT, or the web board's session cookie (with its
        // CSRF token on state-changing requests).
        ready(crate::web::authenticate(req, state).map(AdminAuth))
    }
}
