//! JSON Schema for tool arguments and structured results, the board's own
//! tools and relayed upstream tools alike: full JSON Schema (2020-12
//! unless the schema's `$schema` names another draft; composition,
//! conditionals, local `$ref`, `$defs`, ...) by the `jsonschema` crate.
//! This file adds what a server fed schemas by others needs around it:
//!
//! - References stay inside the schema: the retriever refuses every
//!   external URI (no network, no files), so a `$ref` to one, or a
//!   `$schema` naming an unknown meta-schema, makes the schema unusable.
//! - Bounded cost: a schema larger than [`MAX_SCHEMA_BYTES`] or nested
//!   deeper than [`MAX_SCHEMA_DEPTH`] is refused before it is compiled;
//!   `pattern` regexes run under the crate's backtracking limit.
//! - Compiled once: [`Compiled`] is built per tool set and reused (see
//!   `ToolSet`), so a call pays only for the walk over its value.
//! - Violations name the path and what to fix, in words an agent can act
//!   on (the common keywords are phrased here; the rest say which keyword
//!   failed).

use std::fmt;
use std::sync::Arc;

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::paths::LocationSegment;
use jsonschema::{Retrieve, Uri, ValidationError, Validator};
use serde_json::Value;

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

/// The largest schema (serialized) this server compiles: tool schemas
/// are a few KiB; this keeps a hostile upstream's from costing much.
pub const MAX_SCHEMA_BYTES: usize = 64 * 1024;

/// The deepest nesting of objects and arrays in a schema this server
/// compiles.
pub const MAX_SCHEMA_DEPTH: usize = 32;

/// A schema compiled for validation, shared by every call of its tool.
#[derive(Clone)]
pub(crate) struct Compiled(Arc<Validator>);

impl fmt::Debug for Compiled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Compiled")
    }
}

/// Refuses every external reference: schemas here come from tools (ours
/// or an upstream's), and a `$ref` must never make this server fetch.
struct NoRetrieval;

impl Retrieve for NoRetrieval {
    fn retrieve(
        &self,
        uri: &Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        Err(format!(
            "external reference {uri} refused: only references inside the schema are resolved"
        )
        .into())
    }
}

/// Compiles `schema` (an object or a boolean) within the bounds above.
/// The crate checks it against its draft's meta-schema, so a schema it
/// cannot read is refused here, before any value meets it.
pub(crate) fn compile(schema: &Value) -> Result<Compiled, Violation> {
    if !schema.is_object() && !schema.is_boolean() {
        return Err(violation("", "is not a schema (an object or a boolean)"));
    }
    if depth(schema) > MAX_SCHEMA_DEPTH {
        return Err(violation(
            "",
            format!("is nested deeper than this server validates ({MAX_SCHEMA_DEPTH} levels)"),
        ));
    }
    let size = serde_json::to_vec(schema).map_or(usize::MAX, |bytes| bytes.len());
    if size > MAX_SCHEMA_BYTES {
        return Err(violation(
            "",
            format!(
                "is larger than this server validates ({size} bytes; at most {MAX_SCHEMA_BYTES})"
            ),
        ));
    }
    jsonschema::options()
        .with_retriever(NoRetrieval)
        .build(schema)
        .map(|validator| Compiled(Arc::new(validator)))
        .map_err(|error| {
            let at = error.schema_path().as_str().to_owned();
            violation(
                &at,
                format!("is not a usable schema: {}", describe_build(&error)),
            )
        })
}

/// What made a schema unusable, without echoing large parts of it.
fn describe_build(error: &ValidationError<'_>) -> String {
    match error.kind() {
        ValidationErrorKind::Referencing(err) => err.to_string(),
        _ => {
            let mut text = error.to_string();
            if text.len() > 200 {
                let mut cut = 200;
                while !text.is_char_boundary(cut) {
                    cut -= 1;
                }
                text.truncate(cut);
                text.push_str("...");
            }
            text
        }
    }
}

/// Nesting depth of objects and arrays (the root is 1).
fn depth(value: &Value) -> usize {
    // Iterative: a hostile schema must not exhaust the stack here either.
    let mut deepest = 0;
    let mut stack = vec![(value, 1usize)];
    while let Some((value, level)) = stack.pop() {
        deepest = deepest.max(level);
        if level > MAX_SCHEMA_DEPTH {
            return level;
        }
        match value {
            Value::Object(members) => stack.extend(members.values().map(|v| (v, level + 1))),
            Value::Array(items) => stack.extend(items.iter().map(|v| (v, level + 1))),
            _ => {}
        }
    }
    deepest
}

impl Compiled {
    /// Checks `value`; the first violation found, phrased for an agent.
    /// `schema` is the one this was compiled from (to name what an object
    /// accepts).
    pub(crate) fn check(&self, schema: &Value, value: &Value) -> Result<(), Violation> {
        match self.0.validate(value) {
            Ok(()) => Ok(()),
            Err(error) => Err(phrase(schema, &error)),
        }
    }
}

/// Validates `value` against `schema`, compiling it for this one use
/// (for schemas seen once, such as an elicitation's).
pub(crate) fn schema(schema: &Value, value: &Value) -> Result<(), Violation> {
    compile(schema)?.check(schema, value)
}

/// Checks that `schema` can be used (it compiles within the bounds): for
/// schemas from elsewhere (an upstream server's tools) before they are
/// served.
pub(crate) fn well_formed(schema: &Value) -> Result<(), Violation> {
    compile(schema).map(drop)
}

fn violation(path: &str, problem: impl Into<String>) -> Violation {
    Violation {
        path: path.to_owned(),
        problem: problem.into(),
    }
}

/// An instance location as `a.b[0].c`.
fn dotted<'a>(segments: impl Iterator<Item = LocationSegment<'a>>) -> String {
    let mut path = String::new();
    for segment in segments {
        match segment {
            LocationSegment::Index(index) => path.push_str(&format!("[{index}]")),
            LocationSegment::Property(name) => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(&name);
            }
        }
    }
    path
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
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

fn article(ty: &str) -> &'static str {
    match ty.as_bytes().first() {
        Some(b'a' | b'e' | b'i' | b'o' | b'u') => "an",
        _ => "a",
    }
}

/// The properties the object schema holding the failed keyword names,
/// found by its schema location (none when it was reached by `$ref`).
fn allowed_properties(schema: &Value, keyword_location: &str) -> Vec<String> {
    let parent = keyword_location
        .rsplit_once('/')
        .map_or("", |(parent, _)| parent);
    schema
        .pointer(parent)
        .and_then(|object| object.get("properties"))
        .and_then(Value::as_object)
        .map(|props| props.keys().cloned().collect())
        .unwrap_or_default()
}

/// A violation in the words the tools have always used.
fn phrase(schema: &Value, error: &ValidationError<'_>) -> Violation {
    let path = dotted(error.instance_path().iter());
    let value = error.instance();
    let problem = match error.kind() {
        ValidationErrorKind::Required { property } => {
            let name = property
                .as_str()
                .map_or_else(|| property.to_string(), str::to_owned);
            return violation(&join(&path, &name), "is required but missing");
        }
        ValidationErrorKind::AdditionalProperties { unexpected }
        | ValidationErrorKind::UnevaluatedProperties { unexpected } => {
            let first = unexpected.first().cloned().unwrap_or_default();
            let mut allowed = allowed_properties(schema, error.schema_path().as_str());
            allowed.sort();
            let problem = if allowed.is_empty() {
                "is not accepted (this takes no arguments)".to_owned()
            } else {
                format!("is not accepted (allowed: {})", allowed.join(", "))
            };
            return violation(&join(&path, &first), problem);
        }
        ValidationErrorKind::Type { kind } => match kind {
            TypeKind::Single(ty) => {
                let ty = ty.as_str();
                format!("must be {} {ty}, got {}", article(ty), type_name(value))
            }
            TypeKind::Multiple(types) => {
                let names: Vec<&str> = types.iter().map(|t| t.as_str()).collect();
                format!(
                    "must be one of the types {}, got {}",
                    names.join(", "),
                    type_name(value)
                )
            }
        },
        ValidationErrorKind::Enum { options } => {
            let listed: Vec<String> = options
                .as_array()
                .map(|all| all.iter().map(Value::to_string).collect())
                .unwrap_or_default();
            format!("must be one of: {}", listed.join(", "))
        }
        ValidationErrorKind::Constant { expected_value } => {
            format!("must be exactly {expected_value}")
        }
        ValidationErrorKind::MinLength { limit } => format!(
            "must be at least {limit} characters long, got {}",
            value.as_str().map_or(0, |s| s.chars().count())
        ),
        ValidationErrorKind::MaxLength { limit } => format!(
            "must be at most {limit} characters long, got {}",
            value.as_str().map_or(0, |s| s.chars().count())
        ),
        ValidationErrorKind::Minimum { limit } => format!("must be at least {limit}, got {value}"),
        ValidationErrorKind::Maximum { limit } => format!("must be at most {limit}, got {value}"),
        ValidationErrorKind::ExclusiveMinimum { limit } => {
            format!("must be greater than {limit}, got {value}")
        }
        ValidationErrorKind::ExclusiveMaximum { limit } => {
            format!("must be less than {limit}, got {value}")
        }
        ValidationErrorKind::MinItems { limit } => format!(
            "must have at least {limit} items, got {}",
            value.as_array().map_or(0, Vec::len)
        ),
        ValidationErrorKind::MaxItems { limit } => format!(
            "must have at most {limit} items, got {}",
            value.as_array().map_or(0, Vec::len)
        ),
        ValidationErrorKind::UniqueItems => "must not repeat items".to_owned(),
        ValidationErrorKind::FalseSchema => "is not allowed".to_owned(),
        ValidationErrorKind::Pattern { pattern } => {
            format!("must match the pattern {pattern:?}")
        }
        ValidationErrorKind::AnyOf { .. } => {
            "must match at least one of the schemas `anyOf` lists".to_owned()
        }
        ValidationErrorKind::OneOfNotValid { .. } => {
            "must match exactly one of the schemas `oneOf` lists (it matches none)".to_owned()
        }
        ValidationErrorKind::OneOfMultipleValid { .. } => {
            "must match exactly one of the schemas `oneOf` lists (it matches several)".to_owned()
        }
        ValidationErrorKind::Not { .. } => "must not match the schema `not` names".to_owned(),
        _ => format!("does not satisfy the schema's `{}`", error.kind().keyword()),
    };
    violation(&path, problem)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn full_json_schema_2020_12_with_local_references() {
        let s = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$defs": { "id": { "type": "string", "pattern": "^cb-[0-9]+$" } },
            "type": "object",
            "properties": {
                "id": { "$ref": "#/$defs/id" },
                "target": { "oneOf": [
                    { "type": "object", "properties": { "issue": { "$ref": "#/$defs/id" } }, "required": ["issue"] },
                    { "type": "object", "properties": { "url": { "type": "string" } }, "required": ["url"] }
                ] },
                "kind": { "enum": ["a", "b"] }
            },
            "if": { "properties": { "kind": { "const": "b" } }, "required": ["kind"] },
            "then": { "required": ["target"] },
            "unevaluatedProperties": false
        });
        let compiled = compile(&s).expect("compiles");
        let ok = json!({ "id": "cb-1", "target": { "issue": "cb-2" }, "kind": "a" });
        assert_eq!(compiled.check(&s, &ok), Ok(()));
        let err = |v: Value| compiled.check(&s, &v).unwrap_err().to_string();
        assert!(
            err(json!({ "id": "x" })).starts_with("`id` must match the pattern"),
            "$ref followed"
        );
        assert!(err(json!({ "target": { "issue": "cb-1", "url": "u" } })).contains("exactly one"));
        assert!(
            err(json!({ "kind": "b" })).contains("`target` is required"),
            "if/then"
        );
        assert!(err(json!({ "zzz": 1 })).starts_with("`zzz` is not accepted"));
    }

    #[test]
    fn external_references_and_oversized_schemas_are_refused() {
        for remote in [
            json!({ "$ref": "https://example.com/schema.json" }),
            json!({ "type": "object", "properties": { "a": { "$ref": "file:///etc/passwd" } } }),
            json!({ "$schema": "https://example.com/my-meta", "type": "object" }),
        ] {
            let refused = compile(&remote).unwrap_err();
            assert!(refused.problem.contains("not a usable schema"), "{refused}");
        }
        let mut deep = json!({ "type": "string" });
        for _ in 0..MAX_SCHEMA_DEPTH {
            deep = json!({ "type": "object", "properties": { "a": deep } });
        }
        assert!(
            compile(&deep)
                .unwrap_err()
                .problem
                .contains("nested deeper")
        );
        let wide: serde_json::Map<String, Value> = (0..4000)
            .map(|i| (format!("property_{i}"), json!({ "type": "string" })))
            .collect();
        let big = json!({ "type": "object", "properties": wide });
        assert!(compile(&big).unwrap_err().problem.contains("larger than"));
        assert!(compile(&json!(3)).is_err());
    }

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
        assert!(err(json!({"title": "a", "n": 1.5})).starts_with("`n` must be an integer"));
        assert!(err(json!({"title": "a", "n": 4})).contains("at most 3"));
        assert!(err(json!({"title": "a", "tags": ["c"]})).starts_with("`tags[0]` must be one of"));
        assert!(err(json!({"title": "a", "tags": ["a", "a"]})).contains("repeat"));
        assert!(err(json!({"title": "a", "tags": ["a", "b", "b"]})).starts_with("`tags` must"));
        assert!(
            err(json!({"title": "a", "inner": {"y": 1}})).starts_with("`inner.y` is not accepted")
        );
        assert!(err(json!({"title": "a", "zzz": 1})).contains("allowed: inner, n, tags, title"));
    }
}
