//! Typed configuration, shared by every role and read by the binary's
//! composition root (`services/cli`): [`Settings`] (defaults, then a TOML
//! file, then `CORKBOARD_<KEY>` environment variables, then flags), the
//! [`Secret`] wrapper that never prints, and the signing-secret files
//! ([`read_secret`], [`ensure_secret`]).
//!
//! Nothing here opens a store, a registry or a socket: which backends a
//! configuration selects is decided where the binary composes the parts.

#![forbid(unsafe_code)]

mod error;
pub mod secrets;
pub mod settings;

pub use error::ConfigError;
pub use secrets::{ensure_secret, read_secret};
pub use settings::{
    GatewayMode, JwtAlgorithm, LogFormat, RegistryKind, Secret, Settings, StoreKind,
};
