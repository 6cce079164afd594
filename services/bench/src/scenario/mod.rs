//! Scenarios: each starts what it needs (corkboard in the right role,
//! Redis, the MongoDB-protocol server, the ceiling), measures, and emits
//! records. One scenario is one command.

pub mod answer_size;
pub mod approvals;
pub mod claims;
pub mod cold_start;
pub mod curves;
pub mod deploy;
pub mod driver;
pub mod hardening;
pub mod list_plan;
pub mod mcp;
pub mod noisy;
pub mod profile;
pub mod queue;
pub mod revocation;
pub mod runs;
pub mod search;
pub mod sessions;
pub mod tenants;
pub mod upstream;
