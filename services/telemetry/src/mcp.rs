//! The span of one MCP request (`mcp.request`) and its field names.
//!
//! The transport opens the span with [`mcp_span`] when it knows the method
//! (and, for `tools/call`, the tool name); whoever learns the rest fills it
//! in with `Span::current().record(field::TENANT, ...)` or the helpers
//! below. Fields are declared empty up front because `tracing` only
//! records fields a span was created with.
//!
//! Client-supplied names are mapped onto a fixed vocabulary before they are
//! recorded: an unknown method or tool becomes `other`, so a client cannot
//! put arbitrary text (say, a token) into traces through a name. The tool
//! vocabulary is the product's, handed in once with [`set_known_tools`].

use std::sync::OnceLock;
use std::time::Duration;
use tracing::Span;

/// Name of the span.
pub const SPAN_NAME: &str = "mcp.request";

/// Field names of the `mcp.request` span, usable with `Span::record`.
pub mod field {
    /// JSON-RPC method, from [`super::MCP_METHODS`] or `other`.
    pub const METHOD: &str = "mcp.method";
    /// Tool of a `tools/call`, from [`super::known_tools`] or `other`.
    pub const TOOL: &str = "mcp.tool";
    /// Tenant of the resolved grant.
    pub const TENANT: &str = "tenant";
    /// Run id of the resolved grant.
    pub const RUN: &str = "run";
    /// Grant id (never the token).
    pub const GRANT: &str = "grant";
    /// `ok`, `error`, `tool_error`, ... (see [`crate::metrics::OUTCOMES`]).
    pub const OUTCOME: &str = "outcome";
    /// JSON-RPC error code of an error answer.
    pub const RPC_CODE: &str = "rpc.code";
    /// Handling time in milliseconds (float).
    pub const LATENCY_MS: &str = "latency_ms";
}

/// JSON-RPC methods recorded by name; anything else is `other`
/// (`notifications/other` for unknown notifications).
pub const MCP_METHODS: &[&str] = &[
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

/// The tool vocabulary of spans and metrics, set once by the binary from
/// the product's tool table (telemetry sits below the crate that owns the
/// tools, so it cannot name them itself).
static KNOWN_TOOLS: OnceLock<&'static [&'static str]> = OnceLock::new();

/// Sets the tool names that spans and metrics record by name (anything
/// else is `other`). The first call wins: call it once, at start-up, before
/// serving. Until it is called every tool is `other`.
pub fn set_known_tools(tools: &'static [&'static str]) {
    if KNOWN_TOOLS.set(tools).is_err() && known_tools() != tools {
        tracing::warn!("telemetry: the tool vocabulary was already set; keeping the first one");
    }
}

/// The tool names set with [`set_known_tools`] (empty before).
pub fn known_tools() -> &'static [&'static str] {
    KNOWN_TOOLS.get().copied().unwrap_or_default()
}

/// `method` if it is a known MCP method, else `other` / `notifications/other`.
pub fn method_label(method: &str) -> &'static str {
    if let Some(known) = MCP_METHODS.iter().find(|m| **m == method) {
        return known;
    }
    if method.starts_with("notifications/") {
        "notifications/other"
    } else {
        "other"
    }
}

/// `tool` if it is one of the [`known_tools`], else `other`.
pub fn tool_label(tool: &str) -> &'static str {
    known_tools()
        .iter()
        .find(|t| **t == tool)
        .copied()
        .unwrap_or("other")
}

/// Opens an `mcp.request` span (level `info`) for `method` and `tool`, with
/// empty `tenant`, `run`, `grant`, `outcome`, `rpc.code`, `latency_ms`.
/// Enter it (or `.instrument()` the handling future) so that events and
/// child spans belong to it.
pub fn mcp_span(method: &str, tool: Option<&str>) -> Span {
    let span = mcp_span_open();
    record_request(&span, method, tool);
    span
}

/// Records who the request acts for, once the token is resolved.
pub fn record_principal(span: &Span, tenant: &str, run: &str, grant: &str) {
    if !crate::init::span_fields_read() {
        return;
    }
    span.record(field::TENANT, tenant);
    span.record(field::RUN, run);
    span.record(field::GRANT, grant);
}

/// Opens an `mcp.request` span before the method is known (transports open
/// it around parsing); fill it with [`record_request`].
pub fn mcp_span_open() -> Span {
    tracing::info_span!(
        "mcp.request",
        "otel.kind" = "server",
        "mcp.method" = tracing::field::Empty,
        "mcp.tool" = tracing::field::Empty,
        tenant = tracing::field::Empty,
        run = tracing::field::Empty,
        grant = tracing::field::Empty,
        outcome = tracing::field::Empty,
        "rpc.code" = tracing::field::Empty,
        latency_ms = tracing::field::Empty,
        "otel.status_code" = tracing::field::Empty,
    )
}

/// Records the method and tool of a span opened with [`mcp_span_open`],
/// as bounded labels.
pub fn record_request(span: &Span, method: &str, tool: Option<&str>) {
    if !crate::init::span_fields_read() {
        return;
    }
    span.record(field::METHOD, method_label(method));
    if let Some(tool) = tool {
        span.record(field::TOOL, tool_label(tool));
    }
}

/// Records how the request ended. `rpc_code` is the JSON-RPC error code of
/// an error answer; an outcome of `error` or `unavailable` also marks the
/// exported span as failed.
pub fn record_outcome(span: &Span, outcome: &str, rpc_code: Option<i64>, latency: Duration) {
    if !crate::init::span_fields_read() {
        return;
    }
    span.record(field::OUTCOME, crate::metrics::outcome_label(outcome));
    if let Some(code) = rpc_code {
        span.record(field::RPC_CODE, code);
    }
    span.record(field::LATENCY_MS, latency.as_secs_f64() * 1000.0);
    if matches!(outcome, "error" | "unavailable") {
        span.record("otel.status_code", "error");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_outside_the_vocabulary_are_other() {
        set_known_tools(&["create_issue", "get_issue"]);
        assert_eq!(method_label("tools/call"), "tools/call");
        assert_eq!(method_label("cbr_secret"), "other");
        assert_eq!(
            method_label("notifications/progress"),
            "notifications/other"
        );
        assert_eq!(tool_label("create_issue"), "create_issue");
        assert_eq!(tool_label("cbr_AAAA"), "other");
    }
}
