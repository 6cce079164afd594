//! The production board store on MongoDB (`CORKBOARD_STORE=mongodb`).
//!
//! One database (`CORKBOARD_MONGODB_DATABASE`, default [`DEFAULT_DATABASE`]);
//! per tenant an `issues.<tenant>` collection with comments embedded in
//! their issue, plus `idem.<tenant>` and `audit.<tenant>`; one `grants`
//! collection (see [`schema`] for why). Every write is one single-document
//! atomic operation; updates use the issue's `version` for optimistic
//! concurrency; idempotent creation is decided by a unique index (see the
//! `issues` module). Writes use write concern majority + journal, so an
//! acknowledged write is durable.
//!
//! # Bounded time, honest failure
//!
//! Every call ends within [`MongoOptions::operation_timeout`]: a down
//! server gives [`corkboard_board::StoreError::Unavailable`] after the
//! server selection timeout, a stuck one after the operation timeout,
//! never a hang. The driver reconnects by itself when the server returns;
//! the same store then serves again, nothing to restart.
//! [`MongoStore::connect`] needs the server at start-up;
//! [`MongoStore::connect_lazy`] starts without it and reports `Unavailable`
//! (also to `/readyz`, through `StoreHealth::check`) until it answers.
//! Expensive reads (searches, filtered pages: `ReadCost`) are bounded
//! tighter: at most `ExpensiveReads::per_tenant` of one tenant's at once,
//! each sent with its deadline as `maxTimeMS` and answered `QueryTooSlow`
//! when the server stops it there.
//!
//! # bson 3, not the driver's default bson 2
//!
//! The driver uses bson 2 by default only for backwards compatibility
//! (`compat-3-0-0`: code written against driver 3.0 keeps compiling). A new
//! crate has no such code; bson 3 is the current major line, where new work
//! lands, and staying on 2 would only schedule a migration. Nothing of bson
//! crosses this crate's public API (documents are built and read by hand
//! in `codec`, without serde), so the choice stays private and reversible.

#![forbid(unsafe_code)]

mod approvals;
mod audit;
mod blockers;
mod codec;
mod error;
mod issues;
mod ledger;
mod options;
mod policy;
mod query;
mod queue;
pub mod schema;
mod seed;
mod staged;
mod store;
mod sweep;
mod upstreams;
mod webhooks;

pub use audit::AUDIT_PAGE_MAX;
pub use error::MongoStoreError;
pub use options::{CommandObserver, DEFAULT_DATABASE, MongoOptions};
pub use store::MongoStore;
pub use sweep::LEFTOVER_TENANTS_PER_PASS;
