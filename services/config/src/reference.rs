//! The configuration reference, generated from [`Settings`]: every key,
//! its environment variable, its type, its default and the doc comment of
//! its field, as one Markdown table. The documentation site's
//! `docs/reference/configuration-keys.md` is this text, kept current by a
//! test (below), so a new setting is documented by the doc
//! comment it needs anyway.

use crate::settings::Settings;
use schemars::Schema;
use serde_json::{Map, Value};

/// The Markdown table of every setting, in key order.
pub fn markdown() -> String {
    let schema = schemars::schema_for!(Settings);
    let defaults = match serde_json::to_value(Settings::default()) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut out = String::from(
        "| key | environment variable | type | default | what it sets |\n\
         | --- | --- | --- | --- | --- |\n",
    );
    for (key, default) in &defaults {
        let property = properties.get(key).cloned().unwrap_or(Value::Null);
        out.push_str(&format!(
            "| `{key}` | `CORKBOARD_{}` | {} | {} | {} |\n",
            key.to_uppercase(),
            cell(&type_of(&property, &schema)),
            cell(&default_of(key, default)),
            cell(&description_of(&property, &schema)),
        ));
    }
    out
}

/// The property's type in words: an enum's values, `list of string`,
/// `string (secret)`; optional when `null` is allowed.
fn type_of(property: &Value, schema: &Schema) -> String {
    if let Some(reference) = referenced(property, schema) {
        return type_of(reference, schema);
    }
    if let Some(any) = property.get("anyOf").and_then(Value::as_array) {
        let types: Vec<String> = any
            .iter()
            .filter(|option| option.get("type").and_then(Value::as_str) != Some("null"))
            .map(|option| type_of(option, schema))
            .collect();
        return format!("{} (optional)", types.join(" or "));
    }
    if let Some(values) = enum_values(property) {
        return values.join(" | ");
    }
    let secret = property.get("writeOnly") == Some(&Value::Bool(true));
    let (name, optional) = match property.get("type") {
        Some(Value::String(name)) => (name.clone(), false),
        Some(Value::Array(names)) => {
            let names: Vec<&str> = names.iter().filter_map(Value::as_str).collect();
            let optional = names.contains(&"null");
            let name = names.into_iter().find(|n| *n != "null").unwrap_or("value");
            (name.to_owned(), optional)
        }
        _ => ("value".to_owned(), false),
    };
    let mut words = match name.as_str() {
        "array" => format!(
            "list of {}",
            property
                .get("items")
                .map(|items| type_of(items, schema))
                .unwrap_or_else(|| "value".to_owned())
        ),
        "integer" => match property.get("minimum").and_then(Value::as_f64) {
            Some(min) if min >= 0.0 => "integer ≥ 0".to_owned(),
            _ => "integer".to_owned(),
        },
        other => other.to_owned(),
    };
    if secret {
        words.push_str(" (secret)");
    }
    if optional {
        words.push_str(" (optional)");
    }
    words
}

/// The values of an enum, as `"a"` or from `oneOf` constants.
fn enum_values(property: &Value) -> Option<Vec<String>> {
    if let Some(values) = property.get("enum").and_then(Value::as_array) {
        return Some(values.iter().map(|v| format!("`{}`", plain(v))).collect());
    }
    let options = property.get("oneOf").and_then(Value::as_array)?;
    let values: Vec<String> = options
        .iter()
        .flat_map(|option| {
            let one = option.get("const").map(|v| vec![v.clone()]);
            one.or_else(|| option.get("enum").and_then(Value::as_array).cloned())
                .unwrap_or_default()
        })
        .map(|v| format!("`{}`", plain(&v)))
        .collect();
    (!values.is_empty()).then_some(values)
}

/// The field's doc comment, else the referenced type's, as one line.
fn description_of(property: &Value, schema: &Schema) -> String {
    let own = property.get("description").and_then(Value::as_str);
    let referenced = referenced(property, schema)
        .or_else(|| {
            property
                .get("anyOf")
                .and_then(Value::as_array)
                .and_then(|any| any.iter().find_map(|option| referenced(option, schema)))
        })
        .and_then(|r| r.get("description").and_then(Value::as_str));
    let text = own.or(referenced).unwrap_or("");
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// What a `$ref` of `property` points at in the schema's `$defs`.
fn referenced<'a>(property: &Value, schema: &'a Schema) -> Option<&'a Value> {
    let name = property
        .get("$ref")
        .and_then(Value::as_str)?
        .strip_prefix("#/$defs/")?;
    schema.get("$defs")?.get(name)
}

fn default_of(key: &str, default: &Value) -> String {
    match default {
        // Derived from the environment of whoever generates the page.
        _ if key == "data_dir" => {
            "`$XDG_DATA_HOME/corkboard`, else `~/.local/share/corkboard`".to_owned()
        }
        Value::Null => "none".to_owned(),
        Value::Array(items) if items.is_empty() => "empty".to_owned(),
        Value::String(s) if s.is_empty() => "empty".to_owned(),
        _ => format!("`{}`", plain(default)),
    }
}

/// A JSON value as its text, strings without quotes.
fn plain(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Text safe inside a Markdown table cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_has_a_row_with_its_variable_type_and_description() {
        let table = markdown();
        for key in Settings::keys() {
            let row = table
                .lines()
                .find(|line| line.starts_with(&format!("| `{key}` |")))
                .unwrap_or_else(|| panic!("no row for {key}"));
            assert!(
                row.contains(&format!("`CORKBOARD_{}`", key.to_uppercase())),
                "{row}"
            );
        }
        let store = table
            .lines()
            .find(|l| l.starts_with("| `store` |"))
            .unwrap();
        assert!(store.contains("`sqlite` \\| `mongodb`"), "{store}");
        let listen = table
            .lines()
            .find(|l| l.starts_with("| `listen` |"))
            .unwrap();
        assert!(listen.contains("`127.0.0.1:4891`"), "{listen}");
        assert!(listen.contains("HTTP listen address"), "{listen}");
        let uri = table
            .lines()
            .find(|l| l.starts_with("| `mongodb_uri` |"))
            .unwrap();
        assert!(uri.contains("(secret)"), "{uri}");
    }

    /// The documentation site's copy is this table; the test rewrites a
    /// stale copy, so the fix is to review and commit it.
    #[test]
    fn the_documentation_copy_is_current() {
        let page = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../docs/reference/configuration-keys.md");
        corkboard_testkit::ensure_file_contents(
            &page,
            &markdown(),
            "cargo test -p corkboard-config reference::",
        );
    }
}
