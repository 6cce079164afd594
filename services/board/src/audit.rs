//! Audit records: one per tool call, never carrying the arguments themselves.

use crate::ids::{GrantId, IssueId, RunId, TenantId};
use crate::timestamp::Timestamp;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

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
}

impl AuditOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::ToolError => "tool_error",
            Self::Denied => "denied",
            Self::Unavailable => "unavailable",
            Self::RateLimited => "rate_limited",
        }
    }
}

/// Hex SHA-256 of a tool call's raw argument bytes: proves which call was
/// made without keeping what it said.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ArgumentsHash(String);

impl ArgumentsHash {
    pub fn of(bytes: &[u8]) -> Self {
        Self(hex::encode(Sha256::digest(bytes)))
    }

    pub fn from_hex(hex: String) -> Self {
        Self(hex)
    }

    pub fn as_str(&self) -> &str {
        &self.0
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
