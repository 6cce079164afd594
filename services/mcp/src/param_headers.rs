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
    declared(input_schema, arguments)
        .into_iter()
        .filter_map(|(header, argument)| Some((header, encode_value(&argument_text(argument?)?))))
        .collect()
}

/// Why the `Mcp-Param-*` headers of a call do not mirror its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamMismatch(pub String);

impl std::fmt::Display for ParamMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Checks, for a server (2026-07-28, SEP-2243), that the `Mcp-Param-*`
/// headers a call arrived with (`received`: header name and its value,
/// `None` when it was repeated or not visible ASCII) mirror the
/// arguments the body carries for every property `input_schema` marks:
/// an argument that is present and not `null` needs its header, equal to
/// it once the `=?base64?...?=` form is decoded (numbers compare as
/// numbers); a header for an absent or `null` argument did not come from
/// this body. Headers for names the schema does not declare are not the
/// server's business and pass.
pub fn check(
    input_schema: &Value,
    arguments: &Value,
    received: &[(String, Option<String>)],
) -> Result<(), ParamMismatch> {
    for (header, argument) in declared(input_schema, arguments) {
        let got = received
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(&header))
            .map(|(_, value)| value.as_deref());
        let expected = argument.and_then(argument_text);
        match (got, expected) {
            (None, None) => {}
            (None, Some(_)) => {
                return Err(ParamMismatch(format!(
                    "the {header} header is missing; the tool's inputSchema marks this argument with x-mcp-header, so it must mirror the argument"
                )));
            }
            (Some(_), None) => {
                return Err(ParamMismatch(format!(
                    "the {header} header is sent but the argument it mirrors is absent or null"
                )));
            }
            (Some(None), Some(_)) => {
                return Err(ParamMismatch(format!(
                    "the {header} header is malformed (repeated or not visible ASCII)"
                )));
            }
            (Some(Some(value)), Some(text)) => {
                let Some(decoded) = decode_value(value) else {
                    return Err(ParamMismatch(format!(
                        "the {header} header's =?base64?...?= value is not valid base64 of UTF-8"
                    )));
                };
                let equal = decoded == text
                    || matches!(argument, Some(Value::Number(n))
                        if decoded.parse::<f64>().ok() == n.as_f64());
                if !equal {
                    return Err(ParamMismatch(format!(
                        "the {header} header does not match the argument it mirrors"
                    )));
                }
            }
        }
    }
    Ok(())
}

/// A header value in its plain form: the `=?base64?...?=` sentinel
/// decoded (`None` when that is not base64 of UTF-8), anything else as
/// it is.
pub fn decode_value(value: &str) -> Option<String> {
    match value
        .strip_prefix("=?base64?")
        .and_then(|rest| rest.strip_suffix("?="))
    {
        Some(encoded) => base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok()),
        None => Some(value.to_owned()),
    }
}

/// The text a primitive argument travels as; `None` for anything else
/// (absent, `null`, objects and arrays send no header).
fn argument_text(argument: &Value) -> Option<String> {
    match argument {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Every valid declaration of `input_schema` (its header name, first
/// declaration of a name wins) with the argument it mirrors, if any.
/// Whether `input_schema` marks any argument with `x-mcp-header` (as
/// [`check`] and [`param_headers`] find them): a tool without one has no
/// header to mirror or check.
pub fn declares_any(input_schema: &Value) -> bool {
    !declared(input_schema, &Value::Null).is_empty()
}

fn declared<'a>(input_schema: &Value, arguments: &'a Value) -> Vec<(String, Option<&'a Value>)> {
    let mut out = Vec::new();
    walk(input_schema, Some(arguments), 0, &mut out);
    out
}

fn walk<'a>(
    schema: &Value,
    value: Option<&'a Value>,
    depth: usize,
    out: &mut Vec<(String, Option<&'a Value>)>,
) {
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
            if is_token(name) && !taken {
                out.push((header, argument));
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
    fn a_schema_declares_headers_when_any_argument_is_marked_at_any_depth() {
        let plain = json!({"type": "object", "properties": {"id": {"type": "string"}}});
        assert!(!declares_any(&plain));
        assert!(!declares_any(&json!({"type": "object"})));
        let nested = json!({"type": "object", "properties": {"outer": {"type": "object",
            "properties": {"tenant": {"type": "string", "x-mcp-header": "Tenant"}}}}});
        assert!(declares_any(&nested));
        // A name that is not a header token is not mirrored, so not declared.
        let bad = json!({"type": "object", "properties": {
            "x": {"type": "string", "x-mcp-header": "Bad Name"}}});
        assert!(!declares_any(&bad));
    }

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

    #[test]
    fn servers_check_that_marked_arguments_are_mirrored() {
        let schema = json!({
            "type": "object",
            "properties": {
                "region": { "type": "string", "x-mcp-header": "Region" },
                "count": { "type": "integer", "x-mcp-header": "Count" },
                "note": { "type": "string", "x-mcp-header": "Note" },
            },
        });
        let args = json!({ "region": "eu-west-1", "count": 3, "note": "café" });
        let got = |pairs: &[(&str, Option<&str>)]| -> Vec<(String, Option<String>)> {
            pairs
                .iter()
                .map(|(n, v)| ((*n).to_owned(), v.map(str::to_owned)))
                .collect()
        };
        let sent = param_headers(&schema, &args);
        let as_received: Vec<_> = sent
            .iter()
            .map(|(n, v)| (n.to_lowercase(), Some(v.clone())))
            .collect();
        assert_eq!(
            check(&schema, &args, &as_received),
            Ok(()),
            "what a client sends passes"
        );
        let ok = got(&[
            ("Mcp-Param-Region", Some("eu-west-1")),
            ("mcp-param-count", Some("3.0")),
            ("Mcp-Param-Note", Some("=?base64?Y2Fmw6k=?=")),
        ]);
        assert_eq!(
            check(&schema, &args, &ok),
            Ok(()),
            "numbers compare as numbers, base64 decoded"
        );
        // Each refusal says why: the headers received, and the reason.
        type Headers<'a> = &'a [(&'a str, Option<&'a str>)];
        let refused: [(Headers, &str); 4] = [
            (
                &[
                    ("Mcp-Param-Region", Some("eu-west-1")),
                    ("Mcp-Param-Count", Some("3")),
                ],
                "Mcp-Param-Note header is missing",
            ),
            (
                &[
                    ("Mcp-Param-Region", Some("us-east-1")),
                    ("Mcp-Param-Count", Some("3")),
                    ("Mcp-Param-Note", Some("café")),
                ],
                "Region header does not match",
            ),
            (
                &[
                    ("Mcp-Param-Region", Some("eu-west-1")),
                    ("Mcp-Param-Count", Some("3")),
                    ("Mcp-Param-Note", Some("=?base64?%%%?=")),
                ],
                "not valid base64",
            ),
            (
                &[
                    ("Mcp-Param-Region", None),
                    ("Mcp-Param-Count", Some("3")),
                    ("Mcp-Param-Note", Some("=?base64?Y2Fmw6k=?=")),
                ],
                "malformed",
            ),
        ];
        for (headers, why) in refused {
            let refusal = check(&schema, &args, &got(headers)).unwrap_err().0;
            assert!(refusal.contains(why), "{refusal} should say {why}");
        }
        let orphan = got(&[("Mcp-Param-Region", Some("eu-west-1"))]);
        assert!(
            check(&schema, &json!({ "region": null }), &orphan)
                .unwrap_err()
                .0
                .contains("absent or null")
        );
        assert_eq!(
            check(&schema, &json!({}), &got(&[("Mcp-Param-Other", Some("x"))])),
            Ok(())
        );
    }
}
