//! The one vocabulary of MCP method names the product records.
//!
//! Logs, spans and metrics name a request's method by one of these labels,
//! never by client text: an unknown method is `other` (`notifications/other`
//! for unknown notifications), so a client cannot put arbitrary strings (a
//! token, say) into telemetry through a method name.

/// JSON-RPC methods recorded by name, besides the labels of
/// [`method_label`]'s fallbacks and the transport's own (`batch`,
/// `session/delete`).
pub const METHODS: &[&str] = &[
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "server/discover",
    "logging/setLevel",
    "resources/list",
    "resources/templates/list",
    "prompts/list",
    "completion/complete",
    "notifications/initialized",
    "notifications/cancelled",
];

/// `method` if it is a known MCP method, else `other` /
/// `notifications/other`.
pub fn method_label(method: &str) -> &'static str {
    if let Some(known) = METHODS.iter().find(|m| **m == method) {
        return known;
    }
    if method.starts_with("notifications/") {
        "notifications/other"
    } else {
        "other"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_text_never_becomes_a_label() {
        assert_eq!(method_label("tools/call"), "tools/call");
        assert_eq!(method_label("cbr_secret"), "other");
        assert_eq!(
            method_label("notifications/progress"),
            "notifications/other"
        );
    }
}
