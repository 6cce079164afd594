//! What a request asks for, read without serving it: for embedders that
//! refuse a request before the engine sees it (a run that ended, a rate
//! limit) and still owe the client a correlated answer and the log a
//! method name.

use serde_json::value::RawValue;

use crate::method::method_label;
use crate::validate::{self, Incoming, Message};

/// The id, method and tool of a single JSON-RPC request.
#[derive(Debug, Default)]
pub struct RequestHead {
    /// The request's id when the body is one request with a valid id.
    pub id: Option<Box<RawValue>>,
    /// A method label from [`crate::method`] (`batch` for a batch,
    /// `invalid` for a body that is no JSON-RPC message, `none` for none).
    pub method: &'static str,
    /// The tool of a `tools/call`, as `known_tool` labelled it.
    pub tool: Option<&'static str>,
}

/// Reads `body` as one JSON-RPC message. `known_tool` maps a `tools/call`
/// name onto the caller's vocabulary, so no client text is kept.
pub fn peek(body: &[u8], known_tool: impl Fn(&str) -> &'static str) -> RequestHead {
    if body.iter().all(u8::is_ascii_whitespace) {
        return RequestHead {
            method: "none",
            ..RequestHead::default()
        };
    }
    let env = match validate::parse(body) {
        Ok(Incoming::Single(env)) => env,
        Ok(Incoming::Batch(_)) => {
            return RequestHead {
                method: "batch",
                ..RequestHead::default()
            };
        }
        Err(_) => {
            return RequestHead {
                method: "invalid",
                ..RequestHead::default()
            };
        }
    };
    match validate::envelope(&env) {
        Ok(Message::Request { id, method, params }) => {
            let tool = (method == "tools/call")
                .then(|| validate::params_head(params).ok())
                .flatten()
                .and_then(|head| head.name)
                .and_then(|name| serde_json::from_str::<std::borrow::Cow<'_, str>>(name.get()).ok())
                .map(|name| known_tool(&name));
            RequestHead {
                id: RawValue::from_string(id.get().to_owned()).ok(),
                method: method_label(&method),
                tool,
            }
        }
        Ok(Message::Notification { method, .. }) => RequestHead {
            method: method_label(&method),
            ..RequestHead::default()
        },
        Ok(Message::Response { .. }) => RequestHead {
            method: "response",
            ..RequestHead::default()
        },
        Err(refusal) => RequestHead {
            id: refusal
                .id
                .and_then(|id| RawValue::from_string(id.get().to_owned()).ok()),
            method: "invalid",
            tool: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn board(name: &str) -> &'static str {
        if name == "create_issue" {
            "create_issue"
        } else {
            "other"
        }
    }

    #[test]
    fn peeks_id_method_and_known_tool_only() {
        let head = peek(
            br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"create_issue","arguments":{"title":"secret"}}}"#,
            board,
        );
        assert_eq!(head.id.as_deref().map(RawValue::get), Some("7"));
        assert_eq!(head.method, "tools/call");
        assert_eq!(head.tool, Some("create_issue"));

        let head = peek(
            br#"{"jsonrpc":"2.0","id":"a\"b","method":"tools/call","params":{"name":"rm -rf"}}"#,
            board,
        );
        assert_eq!(head.id.as_deref().map(RawValue::get), Some(r#""a\"b""#));
        assert_eq!(
            head.tool,
            Some("other"),
            "client text never reaches the log"
        );

        let head = peek(
            br#"{"jsonrpc":"2.0","id":{"x":1},"method":"weird/thing"}"#,
            board,
        );
        assert!(head.id.is_none(), "an object is not a JSON-RPC id");

        assert_eq!(peek(b"[{}]", board).method, "batch");
        assert_eq!(peek(b"nonsense", board).method, "invalid");
        assert_eq!(peek(b"", board).method, "none");
    }
}
