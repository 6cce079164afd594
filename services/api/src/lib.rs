//! What every Corkboard HTTP API (the control plane's `/v1/`, the runner's
//! `/v1/runs`) shares: the one error envelope ([`ApiError`], with its
//! stable codes and status mapping) and admin authentication
//! ([`AdminAuth`]).
//!
//! It sits below both `server` and `gateway`, so that the runner answers
//! and authenticates exactly as the control plane does without compiling
//! it.

#![forbid(unsafe_code)]

pub mod auth;
pub mod error;

pub use auth::{
    AdminAuth, AdminAuthenticator, AdminCaller, Manage, Read, TenantAccess, TenantScope, bearer,
    check_tenant, tenant_for_read, tenant_for_write,
};
pub use error::ApiError;
