//! The one registry of JSON-RPC error codes the product answers with.
//!
//! Every code any Corkboard transport puts on the wire is a row of
//! [`REGISTRY`]: JSON-RPC's own, the MCP 2026-07-28 transport's, and the
//! gateway's server-error range. Code elsewhere names them as
//! `code::RUN_ENDED`, never as a literal, so a code cannot drift between the
//! studio endpoint, the run gateways, stdio and the stdio bridge.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A JSON-RPC error code (`error.code`), as in rmcp's `ErrorCode`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ErrorCode(pub i64);

impl ErrorCode {
    /// The number on the wire.
    pub const fn get(self) -> i64 {
        self.0
    }

    /// The code's row in [`REGISTRY`], if it is one of ours.
    pub fn row(self) -> Option<&'static CodeRow> {
        REGISTRY.iter().find(|row| row.code == self)
    }

    /// Stable snake_case name (`invalid_params`, `run_ended`, ...), or
    /// `unknown` for a code that is not in the registry (e.g. relayed).
    pub fn name(self) -> &'static str {
        self.row().map_or("unknown", |row| row.name)
    }
}

impl fmt::Debug for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({})", self.name(), self.0)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl From<ErrorCode> for i64 {
    fn from(code: ErrorCode) -> Self {
        code.0
    }
}

impl PartialEq<ErrorCode> for serde_json::Value {
    fn eq(&self, other: &ErrorCode) -> bool {
        self.as_i64() == Some(other.0)
    }
}

impl PartialEq<ErrorCode> for i64 {
    fn eq(&self, other: &ErrorCode) -> bool {
        *self == other.0
    }
}

/// One registered code.
#[derive(Debug, Clone, Copy)]
pub struct CodeRow {
    pub code: ErrorCode,
    /// Stable name, for logs, metrics and docs.
    pub name: &'static str,
    /// What it means to the client, and whether retrying helps.
    pub meaning: &'static str,
}

pub const PARSE_ERROR: ErrorCode = ErrorCode(-32700);
pub const INVALID_REQUEST: ErrorCode = ErrorCode(-32600);
pub const METHOD_NOT_FOUND: ErrorCode = ErrorCode(-32601);
pub const INVALID_PARAMS: ErrorCode = ErrorCode(-32602);
pub const INTERNAL_ERROR: ErrorCode = ErrorCode(-32603);
/// 2026-07-28: HTTP headers missing or not matching the body.
pub const HEADER_MISMATCH: ErrorCode = ErrorCode(-32020);
/// 2026-07-28: the request's protocol version is not served here.
pub const UNSUPPORTED_PROTOCOL_VERSION: ErrorCode = ErrorCode(-32022);
/// The run was revoked, expired or stopped: this gateway no longer serves
/// it. Not retryable with the same token.
pub const RUN_ENDED: ErrorCode = ErrorCode(-32051);
/// The run's request budget is spent for now; retry after
/// `error.data.retry_after_ms`.
pub const RATE_LIMITED: ErrorCode = ErrorCode(-32052);
// -32053 ("gateway busy", a full actor mailbox) is retired: admission no
// longer goes through the actor. Not to be reused.
/// Nothing is served at this path.
pub const NOT_FOUND: ErrorCode = ErrorCode(-32054);
/// A batch's response reached its byte budget before this element ran;
/// nothing was executed for it. Retry it on its own.
pub const RESPONSE_BUDGET: ErrorCode = ErrorCode(-32055);
/// A table the relay shares between tenants and runs (calls held for
/// their agents' input, relayed requests awaiting answers, upstream
/// sessions) has no room left in the caller's share: its run's, its
/// tenant's or the process's (`error.data.share`). Nothing reached the
/// upstream; retry once some of the caller's calls end.
pub const SHARE_EXHAUSTED: ErrorCode = ErrorCode(-32056);

/// Every code the product emits.
pub const REGISTRY: &[CodeRow] = &[
    CodeRow {
        code: PARSE_ERROR,
        name: "parse_error",
        meaning: "the message is not JSON; fix the client",
    },
    CodeRow {
        code: INVALID_REQUEST,
        name: "invalid_request",
        meaning: "the message or its transport framing (headers, session, credential) is refused; the message says why",
    },
    CodeRow {
        code: METHOD_NOT_FOUND,
        name: "method_not_found",
        meaning: "the method is not served here",
    },
    CodeRow {
        code: INVALID_PARAMS,
        name: "invalid_params",
        meaning: "the params are malformed for the negotiated revision; nothing was executed",
    },
    CodeRow {
        code: INTERNAL_ERROR,
        name: "internal_error",
        meaning: "the server failed or could not check the request; the message says whether a retry is safe",
    },
    CodeRow {
        code: HEADER_MISMATCH,
        name: "header_mismatch",
        meaning: "2026-07-28: MCP-Protocol-Version, Mcp-Method or Mcp-Name missing or not matching the body",
    },
    CodeRow {
        code: UNSUPPORTED_PROTOCOL_VERSION,
        name: "unsupported_protocol_version",
        meaning: "2026-07-28: the protocol version is not served; error.data.supported lists what is",
    },
    CodeRow {
        code: RUN_ENDED,
        name: "run_ended",
        meaning: "the run was revoked, expired or stopped; not retryable with this token",
    },
    CodeRow {
        code: RATE_LIMITED,
        name: "rate_limited",
        meaning: "the run is over its rate limit; retry after error.data.retry_after_ms",
    },
    CodeRow {
        code: NOT_FOUND,
        name: "not_found",
        meaning: "no MCP endpoint is served at this path",
    },
    CodeRow {
        code: RESPONSE_BUDGET,
        name: "response_budget",
        meaning: "the batch's response reached its byte budget before this element ran; nothing was executed for it, retry it singly",
    },
    CodeRow {
        code: SHARE_EXHAUSTED,
        name: "share_exhausted",
        meaning: "the caller's share (run, tenant or process: error.data.share) of a relay table (error.data.table) is full; retry once some of its calls end",
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_names_are_unique() {
        for (i, a) in REGISTRY.iter().enumerate() {
            for b in &REGISTRY[i + 1..] {
                assert_ne!(a.code, b.code, "{} and {}", a.name, b.name);
                assert_ne!(a.name, b.name);
            }
        }
        assert_eq!(RUN_ENDED.name(), "run_ended");
        assert_eq!(ErrorCode(-1).name(), "unknown");
        assert_eq!(serde_json::json!(INVALID_PARAMS), serde_json::json!(-32602));
        assert!(serde_json::json!(-32602) == INVALID_PARAMS);
    }
}
