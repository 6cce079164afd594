//! What the client reads of an outgoing message before sending it: its
//! id (to correlate errors it makes up itself), its method and tool, and
//! its era (a `_meta` protocol version makes it a stateless 2026-07-28
//! request, whose headers mirror the body). The message itself is sent as
//! the caller wrote it.

use base64::Engine as _;
use serde_json::Value;

use crate::wire::meta_key;

/// What the client needs to know about one outgoing message.
#[derive(Debug, Default)]
pub(super) struct Shape {
    /// The request id; `None` for notifications, responses and texts that
    /// are not a single JSON-RPC request.
    pub id: Option<Value>,
    pub method: Option<String>,
    /// `params._meta` protocol version: a 2026-07-28 (stateless) message.
    pub modern_version: Option<String>,
    /// `params.name` of a `tools/call`.
    pub tool_name: Option<String>,
    /// A well-formed notification or response: never answered.
    pub unanswered: bool,
}

impl Shape {
    pub fn of(text: &[u8]) -> Self {
        let Ok(Value::Object(message)) = serde_json::from_slice::<Value>(text) else {
            return Self::default();
        };
        let method = message
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let params = message.get("params");
        let modern_version = params
            .and_then(|p| p.get("_meta"))
            .and_then(|m| m.get(meta_key::PROTOCOL_VERSION))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let tool_name = (method.as_deref() == Some("tools/call"))
            .then(|| params.and_then(|p| p.get("name")).and_then(Value::as_str))
            .flatten()
            .map(str::to_owned);
        let id = message.get("id").cloned();
        let unanswered = match (&id, &method) {
            (None, Some(_)) => true,
            (Some(_), None) => message.contains_key("result") || message.contains_key("error"),
            _ => false,
        };
        Self {
            id: id.filter(|_| method.is_some()),
            method,
            modern_version,
            tool_name,
            unanswered,
        }
    }

    /// A legacy `initialize`: it opens the session the client then keeps.
    pub fn is_initialize(&self) -> bool {
        self.method.as_deref() == Some("initialize") && self.modern_version.is_none()
    }
}

/// A header value for text taken from the body: as is when it is plain
/// visible ASCII, else in the `=?base64?…?=` form the 2026-07-28
/// transport defines (the server decodes it for `Mcp-Name`, and refuses a
/// mismatch for the others, which is what a client sending such a value
/// deserves).
pub(super) fn header_text(value: &str) -> String {
    let plain = !value.is_empty()
        && value.bytes().all(|b| (0x20..0x7f).contains(&b))
        && !value.starts_with(' ')
        && !value.ends_with(' ');
    if plain {
        value.to_owned()
    } else {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(value)
        )
    }
}

/// A `YYYY-MM-DD` revision string, safe to log.
pub(super) fn is_revision(version: &str) -> bool {
    version.len() == 10
        && version.bytes().enumerate().all(|(i, b)| {
            if i == 4 || i == 7 {
                b == b'-'
            } else {
                b.is_ascii_digit()
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn shapes_tell_requests_from_notifications_and_eras_apart() {
        let s = Shape::of(
            br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"list_issues","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
        );
        assert_eq!(s.id, Some(json!(7)));
        assert_eq!(s.modern_version.as_deref(), Some("2026-07-28"));
        assert_eq!(s.tool_name.as_deref(), Some("list_issues"));
        assert!(!s.unanswered && !s.is_initialize());

        let s = Shape::of(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        assert!(s.unanswered && s.id.is_none());
        let s = Shape::of(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
        assert!(s.unanswered && s.id.is_none());
        let s = Shape::of(br#"{"jsonrpc":"2.0","id":"a","method":"initialize","params":{}}"#);
        assert!(s.is_initialize() && s.id == Some(json!("a")));
        for garbage in [&b"{nope"[..], b"42", b"[]", br#"{"id":1}"#] {
            let s = Shape::of(garbage);
            assert!(s.id.is_none() && !s.unanswered, "{garbage:?}");
        }
    }

    #[test]
    fn header_values_fall_back_to_base64() {
        assert_eq!(header_text("create_issue"), "create_issue");
        assert_eq!(header_text("é"), "=?base64?w6k=?=");
        assert_eq!(header_text(" x"), "=?base64?IHg=?=");
    }

    #[test]
    fn only_dates_count_as_revisions() {
        assert!(is_revision("2026-07-28"));
        assert!(!is_revision("2026-7-28"));
        assert!(!is_revision("latest\n"));
    }
}
