//! `elicitation/create`: the form (or, from 2025-11-25, URL) an upstream
//! asks the agent's user to fill in, and the answer.
//!
//! Guarantees, by `client/elicitation` and `schema.ts` of 2025-06-18,
//! 2025-11-25 and 2026-07-28 (there is no elicitation in 2025-03-26, so a
//! side speaking it refuses the method):
//!
//! - `message` is a string. Form mode (no `mode`, or `"form"`) needs the
//!   agent's form capability and a `requestedSchema` of the restricted
//!   flat form: `type: "object"`, `properties` whose every value is a
//!   primitive field (`string` with optional `enum`/`enumNames`/
//!   `minLength`/`maxLength`/`format`, `number`/`integer` with optional
//!   `minimum`/`maximum`, `boolean`), `required` naming properties. From
//!   2025-11-25 (both sides) a string field may also be a titled single
//!   select (`oneOf` of `{const, title}`) and a field may be a
//!   multi-select `array` whose `items` are a string `enum` or an `anyOf`
//!   of `{const, title}`. Nesting (`properties`, `$ref`, composition,
//!   other `items`) is refused; annotations (`title`, `description`,
//!   `default`, `$schema`, ...) pass.
//! - URL mode (2025-11-25 on both sides, the agent's URL capability): a
//!   string `url`; in 2025-11-25 also a string `elicitationId`, which
//!   2026-07-28 dropped, so a 2026-07-28 upstream's URL request cannot go
//!   to a 2025-11-25 agent without reshaping and is refused.
//! - The answer's `action` is `accept`, `decline` or `cancel`;
//!   `decline`/`cancel` carry no `content`; a form `accept` carries content
//!   that matches the requested schema and names no field it does not
//!   (the crate's one JSON Schema
//!   validator, plus the titled-option consts it does not know), each
//!   value a string, number or boolean (or, from 2025-11-25, an array of
//!   strings); a URL `accept` carries none.

use serde_json::{Map, Value};

use super::{AgentCapabilities, Ctx, Expectation, RelayRefusal, RelayRule, as_object, label};
use crate::revision::Revision;
use crate::validate;

/// Keywords that nest a schema or compose several: the flat form has none
/// of them (the titled and multi-select forms are checked apart).
const NESTING: [&str; 14] = [
    "properties",
    "patternProperties",
    "additionalProperties",
    "items",
    "prefixItems",
    "$ref",
    "$defs",
    "definitions",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
    "contains",
];

pub(super) fn request(
    ctx: Ctx,
    agent: &AgentCapabilities,
    params: Option<&Value>,
) -> Result<Expectation, RelayRefusal> {
    ctx.needs(Revision::has_elicitation, "elicitation/create")?;
    let Some(params) = params else {
        return Err(ctx.malformed("params", "is required"));
    };
    let params = as_object(ctx, params, "params")?;
    if !params.get("message").is_some_and(Value::is_string) {
        return Err(ctx.malformed("params.message", "is required and must be a string"));
    }
    ctx.opt_object(params, "_meta", "params")?;
    match ctx.opt_str(params, "mode", "params")? {
        None | Some("form") => {
            if !agent.elicitation_form {
                return Err(ctx.refuse(
                    RelayRule::Undeclared,
                    "the agent did not declare `elicitation` (form mode)",
                ));
            }
            let Some(schema) = params.get("requestedSchema") else {
                return Err(ctx.refuse(
                    RelayRule::ElicitSchema,
                    "`params.requestedSchema` is required in form mode",
                ));
            };
            requested_schema(ctx, schema)?;
            Ok(Expectation::Elicit {
                schema: Some(schema.clone()),
            })
        }
        Some("url") => {
            ctx.needs(Revision::has_elicitation_modes, "`params.mode` is url")?;
            if !agent.elicitation_url {
                return Err(ctx.refuse(
                    RelayRule::Undeclared,
                    "the agent did not declare `elicitation.url`",
                ));
            }
            if !params.get("url").is_some_and(Value::is_string) {
                return Err(ctx.malformed("params.url", "is required and must be a string"));
            }
            let needs_id = |rev: Revision| !rev.has_elicitation_modes() || rev.is_modern();
            if !params.get("elicitationId").is_some_and(Value::is_string) {
                // 2025-11-25 requires it; 2026-07-28 has no such member.
                ctx.needs(
                    needs_id,
                    "`params.elicitationId` is missing from a URL-mode request",
                )?;
            }
            Ok(Expectation::Elicit { schema: None })
        }
        Some(_) => Err(ctx.malformed("params.mode", "must be form or url")),
    }
}

fn requested_schema(ctx: Ctx, schema: &Value) -> Result<(), RelayRefusal> {
    let refuse = |problem: String| ctx.refuse(RelayRule::ElicitSchema, problem);
    let Some(schema) = schema.as_object() else {
        return Err(refuse("`params.requestedSchema` must be an object".into()));
    };
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Err(refuse(
            "`params.requestedSchema.type` must be \"object\"".into(),
        ));
    }
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Err(refuse(
            "`params.requestedSchema.properties` is required and must be an object".into(),
        ));
    };
    for key in NESTING.iter().filter(|k| **k != "properties") {
        if schema.contains_key(*key) {
            return Err(refuse(format!(
                "`params.requestedSchema.{key}` is not allowed: the requested schema is flat"
            )));
        }
    }
    match schema.get("required") {
        None => {}
        Some(Value::Array(names)) => {
            for name in names {
                match name.as_str() {
                    Some(name) if properties.contains_key(name) => {}
                    Some(_) => {
                        return Err(refuse("`params.requestedSchema.required` names a field that is not a property".into()));
                    }
                    None => {
                        return Err(refuse(
                            "`params.requestedSchema.required` must be an array of strings".into(),
                        ));
                    }
                }
            }
        }
        Some(_) => {
            return Err(refuse(
                "`params.requestedSchema.required` must be an array of strings".into(),
            ));
        }
    }
    for (name, field) in properties {
        primitive(ctx, field).map_err(|problem| {
            refuse(format!(
                "`params.requestedSchema.properties.{}` {problem}",
                label(name)
            ))
        })?;
    }
    Ok(())
}

/// One field of the flat form; the problem in words otherwise.
fn primitive(ctx: Ctx, field: &Value) -> Result<(), String> {
    let Some(field) = field.as_object() else {
        return Err("must be an object (a primitive field schema)".into());
    };
    let modes = ctx.eras.agent.has_elicitation_modes() && ctx.eras.upstream.has_elicitation_modes();
    let nested = |allowed: &[&str]| {
        NESTING
            .iter()
            .find(|k| field.contains_key(**k) && !allowed.contains(k))
            .map(|k| format!("uses `{k}`, which the flat form does not allow"))
    };
    let strings = |value: Option<&Value>| {
        value
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().all(Value::is_string))
    };
    let titled = |value: Option<&Value>| {
        value.and_then(Value::as_array).is_some_and(|options| {
            options.iter().all(|o| {
                o.get("const").is_some_and(Value::is_string)
                    && o.get("title").is_some_and(Value::is_string)
            })
        })
    };
    match field.get("type").and_then(Value::as_str) {
        Some("string") => {
            if field.contains_key("oneOf") {
                if !modes {
                    return Err(format!(
                        "is a titled single select (`oneOf`), which needs 2025-11-25 on both sides (agent {}, upstream {})",
                        ctx.eras.agent, ctx.eras.upstream
                    ));
                }
                if !titled(field.get("oneOf")) {
                    return Err("`oneOf` must be an array of {const, title} strings".into());
                }
            }
            if let Some(problem) = nested(&["oneOf"]) {
                return Err(problem);
            }
            if field.contains_key("enum") && !strings(field.get("enum")) {
                return Err("`enum` must be an array of strings".into());
            }
            if field.contains_key("enumNames") && !strings(field.get("enumNames")) {
                return Err("`enumNames` must be an array of strings".into());
            }
            Ok(())
        }
        Some("number" | "integer" | "boolean") => nested(&[]).map_or(Ok(()), Err),
        Some("array") => {
            if !modes {
                return Err(format!(
                    "is a multi-select (`array`), which needs 2025-11-25 on both sides (agent {}, upstream {})",
                    ctx.eras.agent, ctx.eras.upstream
                ));
            }
            if let Some(problem) = nested(&["items"]) {
                return Err(problem);
            }
            let Some(items) = field.get("items").and_then(Value::as_object) else {
                return Err(
                    "needs `items`: a string `enum` or an `anyOf` of {const, title}".into(),
                );
            };
            let untitled = items.get("type").and_then(Value::as_str) == Some("string")
                && strings(items.get("enum"))
                && items.keys().all(|k| matches!(k.as_str(), "type" | "enum"));
            let with_titles = titled(items.get("anyOf")) && items.keys().all(|k| k == "anyOf");
            if untitled || with_titles {
                Ok(())
            } else {
                Err("`items` must be a string `enum` or an `anyOf` of {const, title}".into())
            }
        }
        _ => {
            Err("needs `type` string, number, integer, boolean (or, from 2025-11-25, array)".into())
        }
    }
}

/// The agent's answer to an elicitation with `schema` (form mode) or none
/// (URL mode).
pub(super) fn result(
    ctx: Ctx,
    schema: Option<&Value>,
    value: &Value,
    path: &str,
) -> Result<(), RelayRefusal> {
    let refuse = |problem: String| ctx.refuse(RelayRule::ElicitAnswer, problem);
    let obj = as_object(ctx, value, path)?;
    ctx.opt_object(obj, "_meta", path)?;
    let action = match obj.get("action").and_then(Value::as_str) {
        Some(action @ ("accept" | "decline" | "cancel")) => action,
        _ => {
            return Err(refuse(format!(
                "`{path}.action` must be accept, decline or cancel"
            )));
        }
    };
    let content = obj.get("content");
    match (action, schema, content) {
        ("decline" | "cancel", _, Some(_)) => Err(refuse(format!(
            "`{path}.content` must be absent when the action is {action}"
        ))),
        ("decline" | "cancel", _, None) => Ok(()),
        (_, None, Some(_)) => Err(refuse(format!(
            "`{path}.content` must be absent: a URL-mode elicitation is answered out of band"
        ))),
        (_, None, None) => Ok(()),
        (_, Some(schema), None) => {
            // Absent content is only as good as `{}`: it must satisfy the
            // schema's `required` (nothing is filled in for it).
            match validate::schema(schema, &Value::Object(Map::new())) {
                Ok(()) => Ok(()),
                Err(_) => Err(refuse(format!(
                    "`{path}.content` is required: the requested schema has required fields"
                ))),
            }
        }
        (_, Some(schema), Some(content)) => accepted(ctx, schema, content, path),
    }
}

fn accepted(ctx: Ctx, schema: &Value, content: &Value, path: &str) -> Result<(), RelayRefusal> {
    let refuse = |problem: String| ctx.refuse(RelayRule::ElicitAnswer, problem);
    let Some(members) = content.as_object() else {
        return Err(refuse(format!("`{path}.content` must be an object")));
    };
    let arrays =
        ctx.eras.agent.has_elicitation_modes() && ctx.eras.upstream.has_elicitation_modes();
    // Only what was asked for: a field the schema does not name is not an
    // answer to this form (the name only, never the value).
    let properties = schema.get("properties").and_then(Value::as_object);
    if let Some(name) = members
        .keys()
        .find(|name| !properties.is_some_and(|p| p.contains_key(name.as_str())))
    {
        return Err(refuse(format!(
            "`{path}.content.{}` is not a field of the requested schema",
            label(name)
        )));
    }
    for (name, value) in members {
        let flat = match value {
            Value::String(_) | Value::Number(_) | Value::Bool(_) => true,
            Value::Array(items) => arrays && items.iter().all(Value::is_string),
            _ => false,
        };
        if !flat {
            return Err(refuse(format!(
                "`{path}.content.{}` must be a string, number or boolean{}",
                label(name),
                if arrays {
                    " (or an array of strings)"
                } else {
                    ""
                }
            )));
        }
    }
    validate::schema(schema, content).map_err(|violation| {
        // The path only: the value is the user's answer.
        refuse(format!(
            "`{path}.content` does not match the requested schema at `{}`",
            label(&violation.path)
        ))
    })?;
    // Titled options: the subset validator treats `oneOf`/`anyOf` as
    // annotations, so their consts are checked here.
    for (name, value) in members {
        let Some(field) = properties.and_then(|p| p.get(name)) else {
            continue;
        };
        let consts = |options: Option<&Value>| -> Option<Vec<Value>> {
            options
                .and_then(Value::as_array)
                .map(|o| o.iter().filter_map(|o| o.get("const").cloned()).collect())
        };
        let allowed = consts(field.get("oneOf"))
            .or_else(|| consts(field.get("items").and_then(|i| i.get("anyOf"))));
        let Some(allowed) = allowed else {
            continue;
        };
        let chosen: Vec<&Value> = match value {
            Value::Array(items) => items.iter().collect(),
            one => vec![one],
        };
        if chosen.iter().any(|c| !allowed.contains(c)) {
            return Err(refuse(format!(
                "`{path}.content.{}` is not one of the offered options",
                label(name)
            )));
        }
    }
    Ok(())
}
