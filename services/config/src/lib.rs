//! Typed configuration, shared by every role and read by the binary's
//! composition root (`services/cli`): [`Settings`] (defaults, then a TOML
//! file, then `CORKBOARD_<KEY>` environment variables, then flags), the
//! [`Secret`] wrapper that never prints, and the signing-secret files
//! ([`read_secret`], [`ensure_secret`], [`check_secret_mode`]) and the
//! private files of the data dir ([`private_dir`], [`write_private`]).
//!
//! Nothing here opens a store, a registry or a socket: which backends a
//! configuration selects is decided where the binary composes the parts.
//!
//! In detail: Typed configuration of every role: `Settings` (defaults < TOML
//! file < `CORKBOARD_<KEY>` env < flags; unknown keys refused, every error
//! names its key), its enums (`StoreKind`, `RegistryKind`, `GatewayMode`, ...),
//! `Secret` (never printed), the signing-secret files (`read_secret`,
//! `ensure_secret`: created 0600 in a 0700 dir for `serve`;
//! `check_secret_mode`: refused when others may read them) and `write_private`.
//! Chooses nothing: which backends a configuration selects is decided in `cli`.

#![forbid(unsafe_code)]

mod error;
pub mod reference;
pub mod secrets;
pub mod settings;

pub use error::ConfigError;
pub use secrets::{check_secret_mode, ensure_secret, private_dir, read_secret, write_private};
pub use settings::{
    ForwardedHeader, GatewayMode, JwtAlgorithm, LogFormat, RegistryKind, Secret, Settings,
    StoreKind, UnknownEnvVar, default_data_dir,
};
