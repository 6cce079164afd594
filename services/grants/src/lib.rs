//! Grants and the token registry.
//!
//! A run token is a high-entropy opaque secret shown once; everything that is
//! stored or sent between replicas carries only its SHA-256 hash. The
//! [`TokenRegistry`] resolves a hash to its tenant-pinned [`Grant`]; its
//! backends are in-process ([`MemoryRegistry`], the embedded default) and
//! Redis (shared by every replica). [`GrantService`] is the one place that
//! issues and revokes grants: it writes the durable ledger and the registry.

#![forbid(unsafe_code)]

mod error;
mod memory;
mod registry;
mod service;
mod token;

pub use error::RegistryError;
pub use memory::MemoryRegistry;
pub use registry::TokenRegistry;
pub use service::{GrantRequest, GrantService, IssuedGrant};
pub use token::{RunToken, TokenHash};
