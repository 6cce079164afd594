//! Collection names and indexes.
//!
//! Each tenant has its own collections, named only from the validated
//! [`TenantId`] (`[a-z0-9-]`, so never a `.`, `$` or NUL):
//!
//! - `issues.<tenant>`: one document per issue, comments embedded, so every
//!   change to an issue is one atomic single-document update;
//! - `idem.<tenant>`: idempotency records, unique per (run, key, kind);
//! - `audit.<tenant>`: the audit trail.
//!
//! Grants live in one `grants` collection: a token is resolved by its hash
//! before anyone knows its tenant, so they cannot be split by tenant.
//!
//! Index names are left to the server's defaults (derived from the keys),
//! so creating them again, from this process or another, is a no-op.
//!
//! # Set up once per schema version
//!
//! Creating indexes that exist is a no-op for the data but not for the
//! server: one `createIndexes` per collection, a few milliseconds each, so
//! a start-up that re-created every tenant's indexes cost seconds per
//! thousand tenants on every restart. Instead the [`SCHEMA`] collection
//! keeps one document per *index set* (a tenant's collections, or one
//! shared collection: [`IndexSet`]) with the [`IndexSet::fingerprint`] of
//! the definitions it was set up with. A start-up reads that collection in
//! one query and sets up only the sets whose record is missing or differs
//! (new tenants, and every tenant once after a change to this file or to
//! [`SCHEMA_VERSION`]); a tenant first written after start-up is looked up
//! by its one record. The record is written only after the set-up
//! succeeded, so an interrupted one is redone. Indexes dropped by hand
//! behind a current record are not noticed: delete the record (or the whole
//! collection) to have them re-created.

use crate::codec::{audit_field, field, grant_field};
use corkboard_board::TenantId;
use mongodb::IndexModel;
use mongodb::bson::{Document, doc};
use mongodb::options::IndexOptions;
use sha2::{Digest, Sha256};

const ISSUES_PREFIX: &str = "issues.";

/// The one collection of every tenant's grants.
pub const GRANTS: &str = "grants";
/// Every tenant's upstream MCP servers (a few per tenant).
pub const UPSTREAMS: &str = "upstreams";
/// Every tenant's pinned upstream tool definitions, `_id`
/// `<tenant>/<upstream>/<tool>`.
pub const TOOL_PINS: &str = "tool_pins";
/// Every tenant's webhook endpoints.
pub const WEBHOOKS: &str = "webhooks";
/// Every tenant's pending webhook deliveries.
pub const OUTBOX: &str = "webhook_outbox";
/// The values used once (the relay's sealed values), of every tenant.
pub const USED_ONCE: &str = "used_once";
/// Per tenant, when the sweeper must next look at its claims
/// (`sweep.rs`), `_id` the tenant.
pub const SWEEP_DUE: &str = "sweep_due";
/// When a used-once record stops counting (a BSON date, for the TTL index).
pub(crate) const USED_ONCE_EXPIRES_AT: &str = "expires_at";

/// One record per index set: which definitions it was set up with.
pub const SCHEMA: &str = "_schema";
/// The field of a [`SCHEMA`] record holding the set's fingerprint.
pub(crate) const SCHEMA_FINGERPRINT: &str = "fingerprint";

/// Bumped when a tenant's set-up changes in a way the index definitions do
/// not show (today: the backfills of search words, urgency and open
/// blockers), so every tenant is set up
/// again once. A change to an index definition needs no bump: it changes
/// the fingerprint by itself.
pub const SCHEMA_VERSION: u32 = 3;

/// A group of collections whose indexes are set up, and recorded, as one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum IndexSet {
    /// A tenant's `issues.`, `idem.` and `audit.` collections (and the
    /// backfill of its search words).
    Tenant(TenantId),
    /// One collection every tenant shares, by name.
    Shared(&'static str),
}

impl IndexSet {
    /// The `_id` of the set's [`SCHEMA`] record: the tenant's issues
    /// collection, or the shared collection's name.
    pub(crate) fn key(&self) -> String {
        match self {
            Self::Tenant(tenant) => issues(tenant),
            Self::Shared(name) => (*name).to_owned(),
        }
    }

    /// The collections of the set with their indexes.
    pub(crate) fn collections(&self) -> Vec<(String, Vec<IndexModel>)> {
        match self {
            Self::Tenant(tenant) => vec![
                (issues(tenant), issue_indexes()),
                (idempotency(tenant), idempotency_indexes()),
                (audit(tenant), audit_indexes()),
            ],
            Self::Shared(name) => vec![((*name).to_owned(), shared_indexes(name))],
        }
    }

    /// A digest of [`SCHEMA_VERSION`] and every index definition of the
    /// set (keys in order, uniqueness, expiry), the same for every tenant:
    /// what its [`SCHEMA`] record must hold for the set to count as set up.
    pub(crate) fn fingerprint(&self) -> String {
        // The same for every tenant: computed once per process, not once
        // per tenant at each start-up.
        static TENANT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        match self {
            Self::Tenant(_) => TENANT.get_or_init(|| self.digest()).clone(),
            Self::Shared(_) => self.digest(),
        }
    }

    fn digest(&self) -> String {
        let mut hash = Sha256::new();
        hash.update(format!("v{SCHEMA_VERSION}\n"));
        for (collection, models) in self.collections() {
            // The kind of collection, not its tenant-specific name.
            let kind = collection.split('.').next().unwrap_or_default();
            for model in models {
                let options = model.options.as_ref();
                hash.update(format!(
                    "{kind} {} unique={:?} expire={:?}\n",
                    model.keys,
                    options.and_then(|o| o.unique),
                    options.and_then(|o| o.expire_after),
                ));
            }
        }
        hex::encode(&hash.finalize()[..12])
    }
}

/// The shared collections with indexes of their own, set up at start-up.
pub(crate) const SHARED: [&str; 7] = [
    GRANTS,
    USED_ONCE,
    WEBHOOKS,
    OUTBOX,
    crate::approvals::APPROVALS,
    TOOL_PINS,
    SWEEP_DUE,
];

/// The indexes of the shared collection `name` (one of [`SHARED`]).
fn shared_indexes(name: &str) -> Vec<IndexModel> {
    match name {
        GRANTS => grant_indexes(),
        USED_ONCE => used_once_indexes(),
        WEBHOOKS => webhook_indexes(),
        OUTBOX => outbox_indexes(),
        crate::approvals::APPROVALS => crate::approvals::approval_indexes(),
        // Webhook events left staged by their write (`staged.rs`).
        TOOL_PINS => vec![index(doc! { field::STAGED_AT: 1 })],
        // The tenants whose time has come, earliest first (`sweep.rs`).
        SWEEP_DUE => vec![index(doc! { "at": 1 })],
        _ => Vec::new(),
    }
}

/// The collection holding `tenant`'s issues.
pub fn issues(tenant: &TenantId) -> String {
    format!("{ISSUES_PREFIX}{tenant}")
}

/// The collection holding `tenant`'s idempotency records.
pub fn idempotency(tenant: &TenantId) -> String {
    format!("idem.{tenant}")
}

/// The collection holding `tenant`'s audit records.
pub fn audit(tenant: &TenantId) -> String {
    format!("audit.{tenant}")
}

/// The keys of the tenants' [`SCHEMA`] records lie between these two
/// (excluded): the issues collections' prefix, and the same with its `.`
/// moved to the next character (`/`), which no tenant's name reaches.
pub(crate) const TENANT_KEYS: (&str, &str) = (ISSUES_PREFIX, "issues/");

/// Tenants that have an issues collection among `names`. Names that do not
/// parse as a tenant are not ours and are skipped.
pub(crate) fn tenants_of(names: &[String]) -> Vec<TenantId> {
    names
        .iter()
        .filter_map(|name| name.strip_prefix(ISSUES_PREFIX))
        .filter_map(|tenant| TenantId::parse(tenant).ok())
        .collect()
}

fn index(keys: Document) -> IndexModel {
    IndexModel::builder().keys(keys).build()
}

fn unique(keys: Document) -> IndexModel {
    IndexModel::builder()
        .keys(keys)
        .options(IndexOptions::builder().unique(true).build())
        .build()
}

/// `_id` (the issue id) is unique by MongoDB's own index. The others serve
/// the list filters, each ending in `_id` so the newest-first order and the
/// cursor come from the index too.
pub(crate) fn issue_indexes() -> Vec<IndexModel> {
    vec![
        index(doc! { field::STATE: 1, field::ID: -1 }),
        index(doc! { field::LABELS: 1, field::ID: -1 }),
        index(doc! { field::AUTHOR_RUN: 1, field::ID: -1 }),
        index(doc! { field::PRIORITY: 1, field::ID: -1 }),
        index(doc! { field::UPDATED_AT: -1 }),
        // Sub-issues (list filter, get_issue's children) and the inverse
        // of blocked_by (get_issue's blocks).
        index(doc! { field::PARENT: 1, field::ID: -1 }),
        index(doc! { field::BLOCKED_BY: 1, field::ID: -1 }),
        // Ready work (list_issues ready, claim_next): open unclaimed
        // issues without an open blocker, most urgent, then oldest first;
        // the state, the claim and the open blockers lead as points
        // (`ready_filter_without_lapsed_claims`), so the terminal, the
        // claimed and the blocked ones are never walked; the blocked ones
        // are one range of it (`board_stats`, "no ready work").
        index(doc! {
            field::STATE: 1,
            field::CLAIM_RUN: 1,
            field::OPEN_BLOCKERS: 1,
            field::URGENCY: 1,
            field::CREATED_AT: 1,
            field::ID: 1,
        }),
        // Claimed-by lists, and revocation ending a grant's claims.
        index(doc! { field::CLAIM_RUN: 1, field::ID: -1 }),
        index(doc! { field::CLAIM_GRANT: 1 }),
        // A run's history: the issues whose changes name it (multikey).
        index(doc! { field::HISTORY_RUN: 1, field::UPDATED_AT: -1 }),
        // Issues whose open blockers wait to be recounted (`blockers.rs`).
        index(doc! { field::RECOUNT: 1 }),
        // Claims by their end: what `expire_claims` sweeps.
        index(doc! { field::CLAIM_EXPIRES_AT: 1 }),
        // Webhook events left staged by their write, by age: what
        // `expire_claims` queues (`staged.rs`).
        index(doc! { field::STAGED_AT: 1 }),
        // Multikey: one entry per word, ending in `_id` so the newest
        // candidates of a word come straight from the index.
        index(doc! { field::TERMS_TITLE: 1, field::ID: -1 }),
        index(doc! { field::TERMS_BODY: 1, field::ID: -1 }),
        index(doc! { field::TERMS_COMMENTS: 1, field::ID: -1 }),
    ]
}

/// Endpoints by tenant (listing, counting against the limit).
pub(crate) fn webhook_indexes() -> Vec<IndexModel> {
    vec![index(doc! { "tenant": 1 })]
}

/// What claims and per-tenant look-ups of the outbox use.
pub(crate) fn outbox_indexes() -> Vec<IndexModel> {
    vec![
        index(doc! { "next_attempt_at": 1, field::ID: 1 }),
        index(doc! { "webhook": 1 }),
        index(doc! { "tenant": 1 }),
        // A claim's reads: an endpoint's due deliveries oldest first, and
        // the live leases.
        index(doc! { "webhook": 1, "next_attempt_at": 1, field::ID: 1 }),
        index(doc! { "lease_until": 1 }),
    ]
}

pub(crate) mod idem_field {
    pub const RUN: &str = "run";
    pub const KEY: &str = "key";
    pub const KIND: &str = "kind";
}

/// One record per (run, key, kind): the unique index is what decides,
/// across every process, which of several racing requests creates.
pub(crate) fn idempotency_indexes() -> Vec<IndexModel> {
    vec![unique(
        doc! { idem_field::RUN: 1, idem_field::KEY: 1, idem_field::KIND: 1 },
    )]
}

pub(crate) fn audit_indexes() -> Vec<IndexModel> {
    vec![
        index(doc! { audit_field::AT: -1, field::ID: -1 }),
        index(doc! { audit_field::RUN: 1, audit_field::AT: -1, field::ID: -1 }),
        index(doc! { audit_field::ISSUE: 1, audit_field::AT: -1, field::ID: -1 }),
    ]
}

pub(crate) fn grant_indexes() -> Vec<IndexModel> {
    vec![
        unique(doc! { grant_field::TOKEN_HASH: 1 }),
        index(doc! { field::TENANT: 1, field::ID: -1 }),
        index(doc! { field::TENANT: 1, grant_field::RUN: 1, field::ID: -1 }),
        index(doc! { grant_field::REVOKED_AT: 1, grant_field::EXPIRES_AT: 1 }),
        // Webhook events left staged by their write (`staged.rs`).
        index(doc! { field::STAGED_AT: 1 }),
    ]
}

/// Expired used-once records go by themselves (the server's TTL monitor,
/// about once a minute); `record_first_use` does not wait for it.
pub(crate) fn used_once_indexes() -> Vec<IndexModel> {
    vec![
        IndexModel::builder()
            .keys(doc! { USED_ONCE_EXPIRES_AT: 1 })
            .options(
                IndexOptions::builder()
                    .expire_after(std::time::Duration::ZERO)
                    .build(),
            )
            .build(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collection_names_come_from_the_tenant_only() {
        let tenant = TenantId::parse("acme-2").unwrap();
        assert_eq!(issues(&tenant), "issues.acme-2");
        assert_eq!(idempotency(&tenant), "idem.acme-2");
        assert_eq!(audit(&tenant), "audit.acme-2");
    }

    #[test]
    fn fingerprints_follow_the_definitions_not_the_tenant() {
        let a = IndexSet::Tenant(TenantId::parse("a").unwrap());
        let b = IndexSet::Tenant(TenantId::parse("b-2").unwrap());
        assert_eq!(a.fingerprint(), b.fingerprint());
        assert_ne!(a.key(), b.key());
        let shared: std::collections::HashSet<String> = SHARED
            .iter()
            .map(|name| IndexSet::Shared(name).fingerprint())
            .collect();
        assert_eq!(shared.len(), SHARED.len(), "each shared set its own digest");
        assert!(!shared.contains(&a.fingerprint()));
        for name in SHARED {
            assert!(
                !IndexSet::Shared(name).collections()[0].1.is_empty(),
                "{name} has indexes"
            );
        }
    }

    #[test]
    fn known_tenants_are_read_back_from_collection_names() {
        let names: Vec<String> = [
            "issues.acme",
            "idem.acme",
            "grants",
            "issues.Bad",
            "issues.b-2",
        ]
        .into_iter()
        .map(String::from)
        .collect();
        let tenants: Vec<String> = tenants_of(&names)
            .into_iter()
            .map(TenantId::into_string)
            .collect();
        assert_eq!(tenants, ["acme", "b-2"]);
    }
}
