//! The crate's one error type: a configuration that could not be loaded or
//! a secret file that could not be read or created, naming the key or file
//! the operator has to fix.

use std::path::PathBuf;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("config file {path}: {reason}")]
    File { path: PathBuf, reason: String },
    #[error("configuration key `{key}`: {reason}")]
    Key { key: String, reason: String },
    #[error("configuration: {0}")]
    Other(String),
    #[error("{key}: cannot read secret file {path}: {reason}")]
    SecretRead {
        key: &'static str,
        path: String,
        reason: String,
    },
    #[error("{key}: secret file {path} is empty")]
    SecretEmpty { key: &'static str, path: String },
    #[error("cannot create secret file {path}: {reason}")]
    SecretCreate { path: String, reason: String },
    #[error(
        "{key}: secret file {path} has mode {mode:04o}, which lets other users read or change it; run `chmod 600 {path}` (owner and group read, 0440, is accepted for fsGroup mounts)"
    )]
    SecretExposed {
        key: &'static str,
        path: String,
        mode: u32,
    },
}
