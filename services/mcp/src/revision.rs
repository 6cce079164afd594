//! The protocol revisions this crate speaks and what each one allows.
//!
//! Revisions before 2026-07-28 are "legacy" (an `initialize` handshake opens
//! a session); 2026-07-28 is "modern" (stateless, every request carries its
//! revision in `_meta`). Every revision-dependent decision in the crate asks
//! one of the predicates here, so adding a revision is one edit.

use std::fmt;

/// One MCP specification revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Revision {
    V2025_03_26,
    V2025_06_18,
    V2025_11_25,
    V2026_07_28,
}

impl Revision {
    /// Every revision served, oldest first.
    pub const ALL: [Revision; 4] = [
        Revision::V2025_03_26,
        Revision::V2025_06_18,
        Revision::V2025_11_25,
        Revision::V2026_07_28,
    ];

    /// The revision an `initialize` answers with when the client asks for
    /// one we do not speak (the lifecycle spec says: our latest).
    pub const LATEST_LEGACY: Revision = Revision::V2025_11_25;

    /// Modern revisions, advertised by `server/discover` and in
    /// `UnsupportedProtocolVersion` errors.
    pub const MODERN: [Revision; 1] = [Revision::V2026_07_28];

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "2025-03-26" => Some(Self::V2025_03_26),
            "2025-06-18" => Some(Self::V2025_06_18),
            "2025-11-25" => Some(Self::V2025_11_25),
            "2026-07-28" => Some(Self::V2026_07_28),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::V2025_03_26 => "2025-03-26",
            Self::V2025_06_18 => "2025-06-18",
            Self::V2025_11_25 => "2025-11-25",
            Self::V2026_07_28 => "2026-07-28",
        }
    }

    /// Stateless, `_meta`-per-request revision.
    pub fn is_modern(self) -> bool {
        self >= Self::V2026_07_28
    }

    /// `outputSchema` on tools and `structuredContent` on results.
    pub fn has_structured_output(self) -> bool {
        self >= Self::V2025_06_18
    }

    /// `resource_link` content blocks in tool results.
    pub fn has_resource_links(self) -> bool {
        self >= Self::V2025_06_18
    }

    /// `title` on tools and implementations.
    pub fn has_titles(self) -> bool {
        self >= Self::V2025_06_18
    }

    /// Argument-validation failures are tool execution errors
    /// (`isError: true`) rather than JSON-RPC `-32602`.
    pub fn argument_errors_are_tool_errors(self) -> bool {
        self >= Self::V2025_11_25
    }

    /// JSON-RPC batches (removed in 2025-06-18).
    pub fn allows_batches(self) -> bool {
        self == Self::V2025_03_26
    }

    /// `ping` and `logging/setLevel` (removed in 2026-07-28).
    pub fn has_ping_and_set_level(self) -> bool {
        !self.is_modern()
    }

    /// Results carry `resultType`, list results `ttlMs`/`cacheScope`, and
    /// results' `_meta` the server identity.
    pub fn has_result_type(self) -> bool {
        self.is_modern()
    }

    /// Legacy `outputSchema` must itself be an object schema (the
    /// 2025 schemas say `type: "object"`); 2026-07-28 allows any schema.
    pub fn output_schema_must_be_object(self) -> bool {
        !self.is_modern()
    }

    /// `elicitation/create` (introduced in 2025-06-18).
    pub fn has_elicitation(self) -> bool {
        self >= Self::V2025_06_18
    }

    /// Sampling with tools (SEP-1577, 2025-11-25): `tools` and
    /// `toolChoice` in `sampling/createMessage`, `tool_use` and
    /// `tool_result` blocks, and message content as one block or an array.
    pub fn has_sampling_tools(self) -> bool {
        self >= Self::V2025_11_25
    }

    /// Elicitation modes (2025-11-25): `mode: "url"`, titled and
    /// multi-select enum fields, and `string[]` answers.
    pub fn has_elicitation_modes(self) -> bool {
        self >= Self::V2025_11_25
    }

    /// Position in [`Self::ALL`]; indexes per-revision caches.
    pub(crate) fn index(self) -> usize {
        match self {
            Self::V2025_03_26 => 0,
            Self::V2025_06_18 => 1,
            Self::V2025_11_25 => 2,
            Self::V2026_07_28 => 3,
        }
    }

    /// Compact code embedded in session ids.
    pub(crate) fn code(self) -> u8 {
        // Offset so that a zeroed byte never decodes to a revision.
        self.index() as u8 + 1
    }

    pub(crate) fn from_code(code: u8) -> Option<Self> {
        Self::ALL.get(usize::from(code).checked_sub(1)?).copied()
    }

    /// The revision an `initialize` request asking for `requested` gets.
    pub fn negotiate_legacy(requested: &str) -> Self {
        match Self::parse(requested) {
            Some(rev) if !rev.is_modern() => rev,
            _ => Self::LATEST_LEGACY,
        }
    }
}

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_negotiates() {
        for rev in Revision::ALL {
            assert_eq!(Revision::parse(rev.as_str()), Some(rev));
            assert_eq!(Revision::from_code(rev.code()), Some(rev));
        }
        assert_eq!(Revision::from_code(0), None);
        assert_eq!(Revision::from_code(9), None);
        assert_eq!(
            Revision::negotiate_legacy("2025-06-18"),
            Revision::V2025_06_18
        );
        assert_eq!(
            Revision::negotiate_legacy("2024-11-05"),
            Revision::V2025_11_25
        );
        assert_eq!(
            Revision::negotiate_legacy("2026-07-28"),
            Revision::V2025_11_25
        );
    }
}
