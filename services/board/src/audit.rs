//! Audit records: one per tool call, never carrying the arguments themselves.

use crate::ids::{GrantId, IssueId, RunId, TenantId};
use crate::pin::DefinitionHash;
use crate::timestamp::Timestamp;
use serde::{Deserialize, Serialize};
use std::sync::{Mutex, PoisonError};

/// How a tool call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditOutcome {
    Ok,
    /// The tool ran and reported an error (bad arguments, conflict, not found).
    ToolError,
    /// The grant did not allow the tool.
    Denied,
    /// The board could not be reached.
    Unavailable,
    RateLimited,
    /// An upstream tool whose definition awaits a tenant admin's approval
    /// (new, or changed since it was approved): refused, nothing sent.
    Pending,
    /// A board write or upstream call carrying a credential, refused by
    /// the tenant's settings; nothing written or sent.
    SecretRefused,
    /// A board write or upstream call whose credentials were redacted
    /// before it went on (it went on).
    SecretRedacted,
}

impl AuditOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::ToolError => "tool_error",
            Self::Denied => "denied",
            Self::Unavailable => "unavailable",
            Self::RateLimited => "rate_limited",
            Self::Pending => "pending",
            Self::SecretRefused => "secret_refused",
            Self::SecretRedacted => "secret_redacted",
        }
    }

    /// Every outcome, for the stores' decoding.
    pub const ALL: [Self; 8] = [
        Self::Ok,
        Self::ToolError,
        Self::Denied,
        Self::Unavailable,
        Self::RateLimited,
        Self::Pending,
        Self::SecretRefused,
        Self::SecretRedacted,
    ];

    /// The outcome [`Self::as_str`] names.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|o| o.as_str() == text)
    }
}

/// Hex SHA-256 of a tool call's raw argument bytes: proves which call was
/// made without keeping what it said.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ArgumentsHash(String);

impl ArgumentsHash {
    pub fn of(bytes: &[u8]) -> Self {
        Self(crate::digest::sha256_hex(bytes))
    }

    pub fn from_hex(hex: String) -> Self {
        Self(hex)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The identity of one audit record, given once when the record is
/// handed to the audit writer, so that writing the same batch again after
/// an unknown outcome (a timeout, a connection cut mid-write) stores each
/// record at most once: a store keeps one record per id.
///
/// A ULID from a monotonic generator: ids made by one process sort in the
/// order they were made, which stores use to order records of the same
/// millisecond.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AuditId(String);

impl AuditId {
    pub fn generate() -> Self {
        static GENERATOR: Mutex<Option<ulid::Generator>> = Mutex::new(None);
        let mut generator = GENERATOR.lock().unwrap_or_else(PoisonError::into_inner);
        // Overflow of the random part within one millisecond (2^80 ids)
        // cannot happen in practice; a fresh ULID is still unique then.
        let id = generator
            .get_or_insert_with(ulid::Generator::new)
            .generate()
            .unwrap_or_else(|_| ulid::Ulid::new());
        Self(id.to_string())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// An audit record with the id it is stored under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    pub id: AuditId,
    pub record: AuditRecord,
}

impl AuditEntry {
    /// `record` under a fresh id.
    pub fn new(record: AuditRecord) -> Self {
        Self {
            id: AuditId::generate(),
            record,
        }
    }
}

/// One tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRecord {
    pub at: Timestamp,
    pub tenant: TenantId,
    pub run: RunId,
    pub grant: GrantId,
    pub tool: String,
    pub outcome: AuditOutcome,
    pub latency_micros: u64,
    pub arguments_hash: ArgumentsHash,
    /// The issue the call touched, when there is one.
    pub issue: Option<IssueId>,
    /// An upstream call's: the hash of the tool definition in force (the
    /// approved one it was served under).
    pub definition_hash: Option<DefinitionHash>,
}

/// Which audit records to read, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditQuery {
    pub run: Option<RunId>,
    pub issue: Option<IssueId>,
    pub limit: u32,
}

impl Default for AuditQuery {
    fn default() -> Self {
        Self {
            run: None,
            issue: None,
            limit: 100,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audit_ids_are_unique_and_sort_in_the_order_they_were_made() {
        let ids: Vec<AuditId> = (0..10_000).map(|_| AuditId::generate()).collect();
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "not strictly increasing"
        );
    }
}
