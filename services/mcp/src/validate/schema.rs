//! The JSON Schema subset engine tool arguments and structured results
//! are checked with. Violations name the path and what to fix, in words
//! an agent can act on.

use std::collections::HashSet;
use std::fmt;

use serde_json::{Map, Value};

/// Why a value does not match a schema: where, and what to fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Violation {
    pub path: String,
    pub problem: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.problem)
        } else {
            write!(f, "`{}` {}", self.path, self.problem)
        }
    }
}

/// Deeper schemas are not used by any tool; the limit only guards against
/// a pathological self-made schema.
const MAX_SCHEMA_DEPTH: usize = 32;

/// Validates `value` against the JSON Schema subset the tools use: `type`,
/// `enum`, `const`, `properties`, `required`, `additionalProperties`,
/// `minLength`/`maxLength`, `minimum`/`maximum` (and the exclusive forms),
/// `items`, `minItems`/`maxItems`, `uniqueItems`. Other keywords are
/// annotations here and do not constrain.
pub(crate) fn schema(schema: &Value, value: &Value) -> Result<(), Violation> {
    let mut path = String::new();
    check(schema, value, &mut path, 0)
}

/// The JSON types a schema's `type` may name.
const TYPES: [&str; 7] = [
    "null", "boolean", "integer", "number", "string", "array", "object",
];

/// Checks that `schema` is a well-formed schema for the keywords this
/// subset enforces (a schema we cannot read correctly would validate
/// arguments wrongly): `type` a known type or a list of them, `properties`
/// an object of schemas, `required` a list of strings, `enum` a list,
/// `items` and `additionalProperties` schemas, lengths and counts
/// non-negative integers, bounds numbers, nesting within the depth limit.
/// Other keywords are annotations and are not checked. For schemas from
/// elsewhere (an upstream server's tools) before they are served.
pub(crate) fn well_formed(schema: &Value) -> Result<(), Violation> {
    let mut path = String::new();
    well_formed_at(schema, &mut path, 0)
}

fn well_formed_at(schema: &Value, path: &mut String, depth: usize) -> Result<(), Violation> {
    let rules = match schema {
        Value::Bool(_) => return Ok(()),
        Value::Object(rules) => rules,
        _ => return Err(violation(path, "is not a schema (an object or a boolean)")),
    };
    if depth > MAX_SCHEMA_DEPTH {
        return Err(violation(
            path,
            "is nested deeper than this server validates",
        ));
    }
    let known = |v: &Value| v.as_str().is_some_and(|t| TYPES.contains(&t));
    match rules.get("type") {
        None => {}
        Some(Value::Array(types)) if !types.is_empty() && types.iter().all(known) => {}
        Some(ty) if known(ty) => {}
        Some(_) => {
            return Err(violation(
                path,
                "has a `type` that is not a JSON type or a list of them",
            ));
        }
    }
    if rules.get("enum").is_some_and(|e| !e.is_array()) {
        return Err(violation(path, "has an `enum` that is not a list"));
    }
    if let Some(required) = rules.get("required")
        && !required
            .as_array()
            .is_some_and(|r| r.iter().all(Value::is_string))
    {
        return Err(violation(
            path,
            "has a `required` that is not a list of strings",
        ));
    }
    for key in ["minLength", "maxLength", "minItems", "maxItems"] {
        if rules.get(key).is_some_and(|v| v.as_u64().is_none()) {
            return Err(violation(
                path,
                format!("has a `{key}` that is not a non-negative integer"),
            ));
        }
    }
    for key in ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"] {
        if rules.get(key).is_some_and(|v| !v.is_number()) {
            return Err(violation(
                path,
                format!("has a `{key}` that is not a number"),
            ));
        }
    }
    if rules.get("uniqueItems").is_some_and(|v| !v.is_boolean()) {
        return Err(violation(path, "has a `uniqueItems` that is not a boolean"));
    }
    let nested = |key: &str, sub: &Value, path: &mut String| {
        let len = path.len();
        path.push_str(if path.is_empty() { "" } else { "." });
        path.push_str(key);
        let result = well_formed_at(sub, path, depth + 1);
        path.truncate(len);
        result
    };
    if let Some(properties) = rules.get("properties") {
        let Some(properties) = properties.as_object() else {
            return Err(violation(path, "has `properties` that is not an object"));
        };
        for (name, sub) in properties {
            nested(name, sub, path)?;
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(sub) = rules.get(key) {
            nested(&format!("<{key}>"), sub, path)?;
        }
    }
    Ok(())
}

fn violation(path: &str, problem: impl Into<String>) -> Violation {
    Violation {
        path: path.to_owned(),
        problem: problem.into(),
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn has_type(value: &Value, ty: &str) -> bool {
    match ty {
        "integer" => matches!(value, Value::Number(n) if n.is_i64() || n.is_u64()),
        "number" => value.is_number(),
        other => type_name(value) == other,
    }
}

fn check(schema: &Value, value: &Value, path: &mut String, depth: usize) -> Result<(), Violation> {
    let rules = match schema {
        Value::Bool(true) => return Ok(()),
        Value::Bool(false) => return Err(violation(path, "is not allowed")),
        Value::Object(rules) => rules,
        _ => return Ok(()),
    };
    if depth > MAX_SCHEMA_DEPTH {
        return Err(violation(
            path,
            "is nested deeper than this server validates",
        ));
    }
    match rules.get("type") {
        Some(Value::String(ty)) if !has_type(value, ty) => {
            return Err(violation(
                path,
                format!("must be {} {ty}, got {}", article(ty), type_name(value)),
            ));
        }
        Some(Value::Array(types)) => {
            let names: Vec<&str> = types.iter().filter_map(Value::as_str).collect();
            if !names.iter().any(|ty| has_type(value, ty)) {
                return Err(violation(
                    path,
                    format!(
                        "must be one of the types {}, got {}",
                        names.join(", "),
                        type_name(value)
                    ),
                ));
            }
        }
        _ => {}
    }
    if let Some(Value::Array(allowed)) = rules.get("enum")
        && !allowed.contains(value)
    {
        let listed: Vec<String> = allowed.iter().map(Value::to_string).collect();
        return Err(violation(
            path,
            format!("must be one of: {}", listed.join(", ")),
        ));
    }
    if let Some(expected) = rules.get("const")
        && expected != value
    {
        return Err(violation(path, format!("must be exactly {expected}")));
    }
    match value {
        Value::String(text) => check_string(rules, text, path)?,
        Value::Number(number) => check_number(rules, number, path)?,
        Value::Array(items) => check_array(rules, items, path, depth)?,
        Value::Object(members) => check_object(rules, members, path, depth)?,
        _ => {}
    }
    Ok(())
}

fn article(ty: &str) -> &'static str {
    match ty.as_bytes().first() {
        Some(b'a' | b'e' | b'i' | b'o' | b'u') => "an",
        _ => "a",
    }
}

fn limit(rules: &Map<String, Value>, key: &str) -> Option<u64> {
    rules.get(key).and_then(Value::as_u64)
}

fn check_string(rules: &Map<String, Value>, text: &str, path: &str) -> Result<(), Violation> {
    let min = limit(rules, "minLength");
    let max = limit(rules, "maxLength");
    if min.is_none() && max.is_none() {
        return Ok(());
    }
    let len = text.chars().count() as u64;
    if let Some(min) = min.filter(|min| len < *min) {
        return Err(violation(
            path,
            format!("must be at least {min} characters long, got {len}"),
        ));
    }
    if let Some(max) = max.filter(|max| len > *max) {
        return Err(violation(
            path,
            format!("must be at most {max} characters long, got {len}"),
        ));
    }
    Ok(())
}

fn check_number(
    rules: &Map<String, Value>,
    number: &serde_json::Number,
    path: &str,
) -> Result<(), Violation> {
    let Some(n) = number.as_f64() else {
        return Ok(());
    };
    let bound = |key: &str| rules.get(key).and_then(Value::as_f64);
    if let Some(min) = bound("minimum").filter(|min| n < *min) {
        return Err(violation(
            path,
            format!("must be at least {min}, got {number}"),
        ));
    }
    if let Some(max) = bound("maximum").filter(|max| n > *max) {
        return Err(violation(
            path,
            format!("must be at most {max}, got {number}"),
        ));
    }
    if let Some(min) = bound("exclusiveMinimum").filter(|min| n <= *min) {
        return Err(violation(
            path,
            format!("must be greater than {min}, got {number}"),
        ));
    }
    if let Some(max) = bound("exclusiveMaximum").filter(|max| n >= *max) {
        return Err(violation(
            path,
            format!("must be less than {max}, got {number}"),
        ));
    }
    Ok(())
}

fn check_array(
    rules: &Map<String, Value>,
    items: &[Value],
    path: &mut String,
    depth: usize,
) -> Result<(), Violation> {
    let len = items.len() as u64;
    if let Some(min) = limit(rules, "minItems").filter(|min| len < *min) {
        return Err(violation(
            path,
            format!("must have at least {min} items, got {len}"),
        ));
    }
    if let Some(max) = limit(rules, "maxItems").filter(|max| len > *max) {
        return Err(violation(
            path,
            format!("must have at most {max} items, got {len}"),
        ));
    }
    if rules.get("uniqueItems") == Some(&Value::Bool(true)) {
        // Canonical text (maps serialize with sorted keys) makes this linear
        // instead of quadratic on large arrays.
        let mut seen = HashSet::with_capacity(items.len());
        for item in items {
            if !seen.insert(item.to_string()) {
                return Err(violation(
                    path,
                    format!("must not repeat items ({item} appears twice)"),
                ));
            }
        }
    }
    if let Some(item_schema) = rules.get("items") {
        let base = path.len();
        for (index, item) in items.iter().enumerate() {
            path.push_str(&format!("[{index}]"));
            check(item_schema, item, path, depth + 1)?;
            path.truncate(base);
        }
    }
    Ok(())
}

fn check_object(
    rules: &Map<String, Value>,
    members: &Map<String, Value>,
    path: &mut String,
    depth: usize,
) -> Result<(), Violation> {
    let properties = rules.get("properties").and_then(Value::as_object);
    let base = path.len();
    let push = |path: &mut String, key: &str| {
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(key);
    };
    if let Some(Value::Array(required)) = rules.get("required") {
        for key in required.iter().filter_map(Value::as_str) {
            if !members.contains_key(key) {
                push(path, key);
                return Err(violation(path, "is required but missing"));
            }
        }
    }
    for (key, member) in members {
        match properties.and_then(|props| props.get(key)) {
            Some(member_schema) => {
                push(path, key);
                check(member_schema, member, path, depth + 1)?;
                path.truncate(base);
            }
            None => match rules.get("additionalProperties") {
                Some(Value::Bool(false)) => {
                    let allowed: Vec<&str> = properties
                        .map(|props| props.keys().map(String::as_str).collect())
                        .unwrap_or_default();
                    push(path, key);
                    let problem = if allowed.is_empty() {
                        "is not accepted (this takes no arguments)".to_owned()
                    } else {
                        format!("is not accepted (allowed: {})", allowed.join(", "))
                    };
                    return Err(violation(path, problem));
                }
                Some(extra @ Value::Object(_)) => {
                    push(path, key);
                    check(extra, member, path, depth + 1)?;
                    path.truncate(base);
                }
                _ => {}
            },
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schema_subset() {
        let s = json!({
            "type": "object",
            "properties": {
                "title": {"type": "string", "minLength": 1, "maxLength": 5},
                "n": {"type": "integer", "minimum": 1, "maximum": 3},
                "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "maxItems": 2, "uniqueItems": true},
                "inner": {"type": "object", "properties": {"x": {"type": "boolean"}}, "additionalProperties": false}
            },
            "required": ["title"],
            "additionalProperties": false
        });
        assert!(
            schema(
                &s,
                &json!({"title": "ok", "n": 2, "tags": ["a"], "inner": {"x": true}})
            )
            .is_ok()
        );
        let err = |v: Value| {
            schema(&s, &v)
                .err()
                .map(|v| v.to_string())
                .unwrap_or_default()
        };
        assert_eq!(err(json!({})), "`title` is required but missing");
        assert!(err(json!({"title": ""})).contains("at least 1"));
        assert!(err(json!({"title": "toolong"})).contains("at most 5"));
        assert!(err(json!({"title": "a", "n": 1.0})).starts_with("`n` must be an integer"));
        assert!(err(json!({"title": "a", "n": 4})).contains("at most 3"));
        assert!(err(json!({"title": "a", "tags": ["c"]})).starts_with("`tags[0]` must be one of"));
        assert!(err(json!({"title": "a", "tags": ["a", "a"]})).contains("repeat"));
        assert!(err(json!({"title": "a", "tags": ["a", "b", "a"]})).contains("at most 2"));
        assert!(
            err(json!({"title": "a", "inner": {"y": 1}})).starts_with("`inner.y` is not accepted")
        );
        assert!(err(json!({"title": "a", "zzz": 1})).contains("allowed: inner, n, tags, title"));
    }
}
