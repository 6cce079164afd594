//! A tenant's upstream MCP servers behind a run's gateway.
//!
//! - [`seal`]: credentials sealed at rest ([`CredentialKey`], ChaCha20-
//!   Poly1305 under a key from a secret file) and held in clear only on
//!   their way into a request header ([`Credential`], redacted `Debug`).
//! - [`client`]: the gateway's client of one upstream, in the upstream's
//!   era (2026-07-28 stateless, or a 2025 session the gateway owns and
//!   renews), every exchange bounded.
//! - [`hub`]: every tenant's upstreams, their cached tool lists, and each
//!   grant's [`UpstreamView`] (`<upstream>__<tool>`, definitions checked by
//!   the one validator, capabilities `upstream:<name>:<glob>`).
//! - [`view`]: the call: audited, logged without arguments, answered with
//!   an honest "upstream ... unavailable ...; retry later" when it fails.
//! - [`seam`]: where requests an upstream sends to the client are decided
//!   (refused at once today; the relay plugs in there).
//!
//! The gateway hooks this in per request (its binding holds an
//! [`Upstreams`]); the control plane uses [`seal`] to register upstreams.

#![forbid(unsafe_code)]

pub mod client;
mod error;
pub mod hub;
pub mod seal;
pub mod seam;
pub mod view;

pub use client::{Era, UpstreamClient};
pub use error::UpstreamError;
pub use hub::{DEFAULT_MAX_ANSWER_BYTES, SEPARATOR, UNAVAILABLE_TOOL, UpstreamOptions, Upstreams};
pub use seal::{CREDENTIAL_MAX, Credential, CredentialKey};
pub use view::UpstreamView;
