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

use crate::codec::{audit_field, field, grant_field};
use corkboard_board::TenantId;
use mongodb::IndexModel;
use mongodb::bson::{Document, doc};
use mongodb::options::IndexOptions;

const ISSUES_PREFIX: &str = "issues.";

/// The one collection of every tenant's grants.
pub const GRANTS: &str = "grants";
/// Every tenant's upstream MCP servers (a few per tenant).
pub const UPSTREAMS: &str = "upstreams";
/// Every tenant's pinned upstream tool definitions, `_id`
/// `<tenant>/<upstream>/<tool>`.
pub const TOOL_PINS: &str = "tool_pins";
/// The values used once (the relay's sealed values), of every tenant.
pub const USED_ONCE: &str = "used_once";
/// When a used-once record stops counting (a BSON date, for the TTL index).
pub(crate) const USED_ONCE_EXPIRES_AT: &str = "expires_at";

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
        index(doc! { field::UPDATED_AT: -1 }),
        // Sub-issues (list filter, get_issue's children) and the inverse
        // of blocked_by (get_issue's blocks).
        index(doc! { field::PARENT: 1, field::ID: -1 }),
        index(doc! { field::BLOCKED_BY: 1, field::ID: -1 }),
        // Claimed-by lists, and revocation ending a grant's claims.
        index(doc! { field::CLAIM_RUN: 1, field::ID: -1 }),
        index(doc! { field::CLAIM_GRANT: 1 }),
        // Multikey: one entry per word, ending in `_id` so the newest
        // candidates of a word come straight from the index.
        index(doc! { field::TERMS_TITLE: 1, field::ID: -1 }),
        index(doc! { field::TERMS_BODY: 1, field::ID: -1 }),
        index(doc! { field::TERMS_COMMENTS: 1, field::ID: -1 }),
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
