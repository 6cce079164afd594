//! `Mcp-Param-*` headers (2026-07-28, SEP-2243): a tool's `inputSchema`
//! may mark a top-level-reachable primitive property with
//! `"x-mcp-header": "<Name>"`, and a client calling the tool over
//! Streamable HTTP mirrors that argument into an `Mcp-Param-<Name>`
//! header, so intermediaries can route on it without reading the body.
//!
//! [`param_headers`] derives them from a schema and the call's arguments
//! (the gateway calling a 2026-07-28 upstream does so); values that are
//! not plain visible ASCII, or could be mistaken for the sentinel, travel
//! as `=?base64?<base64 of the UTF-8>?=`; absent and `null` arguments
//! send no header.

use base64::Engine as _;
use serde_json::Value;

/// The prefix of every mirrored parameter header.
pub const PARAM_HEADER_PREFIX: &str = "Mcp-Param-";
/// The schema extension naming a property's header.
pub const X_MCP_HEADER: &str = "x-mcp-header";

/// Whether `name` is an RFC 9110 token (what a header name may be).
fn is_token(name: &str) -> bool {
    !name.is_empty()
        && name.bytes().all(|b| {
            b.is_ascii_alphanumeric()
                || matches!(
                    b,
                    b'!' | b'#'
                        | b'$'
                        | b'%'
                        | b'&'
                        | b'\''
                        | b'*'
                        | b'+'
                        | b'-'
                        | b'.'
                        | b'^'
                        | b'_'
                        | b'`'
                        | b'|'
                        | b'~'
                )
        })
}

/// A header value for `text`: as it is when it is visible ASCII (tab and
/// space inside), untrimmed-safe and not sentinel-shaped; otherwise the
/// base64 sentinel.
pub fn encode_value(text: &str) -> String {
    let plain = text
        .bytes()
        .all(|b| b == b'\t' || (0x20..=0x7e).contains(&b))
        && text.trim() == text
        && !(text.starts_with("=?base64?") && text.ends_with("?="));
    if plain {
        text.to_owned()
    } else {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(text.as_bytes())
        )
    }
}

/// The `Mcp-Param-*` headers of a call of a tool with `input_schema`
/// given `arguments`, in schema order: each property reached through
/// `properties` chains from the root that carries a valid `x-mcp-header`
/// name, whose argument is a string, number or boolean. Declarations that
/// are not valid tokens, or repeat a name (case-insensitively), are
/// skipped.
pub fn param_headers(input_schema: &Value, arguments: &Value) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    walk(input_schema, Some(arguments), 0, &mut out);
    out
}

fn walk(schema: &Value, value: Option<&Value>, depth: usize, out: &mut Vec<(String, String)>) {
    // Schemas nest only so deep in practice; the bound keeps a hostile
    // one cheap.
    if depth > 16 {
        return;
    }
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (key, property) in properties {
        let argument = value.and_then(|v| v.get(key));
        if let Some(name) = property.get(X_MCP_HEADER).and_then(Value::as_str) {
            let header = format!("{PARAM_HEADER_PREFIX}{name}");
            let taken = out.iter().any(|(h, _)| h.eq_ignore_ascii_case(&header));
            let text = match argument {
                Some(Value::String(s)) => Some(s.clone()),
                Some(Value::Number(n)) => Some(n.to_string()),
                Some(Value::Bool(b)) => Some(b.to_string()),
                _ => None,
            };
            if is_token(name)
                && !taken
                && let Some(text) = text
            {
                out.push((header, encode_value(&text)));
            }
            continue;
        }
        walk(property, argument, depth + 1, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn marked_arguments_are_mirrored_and_encoded() {
        let schema = json!({
            "type": "object",
            "properties": {
                "region": { "type": "string", "x-mcp-header": "Region" },
                "count": { "type": "integer", "x-mcp-header": "Count" },
                "note": { "type": "string", "x-mcp-header": "Note" },
                "absent": { "type": "string", "x-mcp-header": "Absent" },
                "bad": { "type": "string", "x-mcp-header": "Bad Name" },
                "nested": { "type": "object", "properties": {
                    "tenant": { "type": "string", "x-mcp-header": "Tenant" },
                } },
                "plain": { "type": "string" },
            },
        });
        let headers = param_headers(
            &schema,
            &json!({
                "region": "eu-west-1", "count": 3, "note": "café ", "bad": "x",
                "nested": { "tenant": "acme" }, "plain": "p",
            }),
        );
        let mut headers = headers;
        headers.sort();
        assert_eq!(
            headers,
            vec![
                ("Mcp-Param-Count".to_owned(), "3".to_owned()),
                (
                    "Mcp-Param-Note".to_owned(),
                    "=?base64?Y2Fmw6kg?=".to_owned()
                ),
                ("Mcp-Param-Region".to_owned(), "eu-west-1".to_owned()),
                ("Mcp-Param-Tenant".to_owned(), "acme".to_owned()),
            ]
        );
        assert_eq!(encode_value("=?base64?x?="), "=?base64?PT9iYXNlNjQ/eD89?=");
    }
}
