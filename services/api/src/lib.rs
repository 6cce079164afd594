//! What every Corkboard HTTP API (the control plane's `/v1/`, the runner's
//! `/v1/runs`) shares: the one error envelope ([`ApiError`], with its
//! stable codes and status mapping) and admin authentication
//! ([`AdminAuth`]), and the envelope for requests the extractors cannot
//! read ([`extract::configure`]).
//!
//! It sits below both `server` and `gateway`, so that the runner answers
//! and authenticates exactly as the control plane does without compiling
//! it.
//!
//! In detail: What every HTTP API shares (the control plane's `/v1/`, the
//! runner's `/v1/runs`): the error envelope `ApiError` (built from any crate's
//! error through `corkboard_board::ErrorCode`, its status from `Code`), admin
//! authentication (`AdminAuth`, asking the `AdminAuthenticator` the app
//! registers as `web::Data<dyn AdminAuthenticator>`: an `AdminVerifier` for
//! bearer JWTs, or the server's, which also takes the web session cookie), and
//! the one tenant check of every admin surface (`TenantScope<Read|Manage>`: the
//! `{tenant}` path segment checked against the admin's claims, as an extractor;
//! `check_tenant` where the tenant comes in a body or query).

#![forbid(unsafe_code)]

pub mod auth;
pub mod error;
pub mod extract;

pub use auth::{
    AdminAuth, AdminAuthenticator, AdminCaller, Decide, Manage, Read, TenantAccess, TenantScope,
    bearer, check_tenant, tenant_for_read, tenant_for_write,
};
pub use error::ApiError;
