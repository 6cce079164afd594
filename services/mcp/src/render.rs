//! Result rendering per revision. Fields a revision does not define are
//! never written (no `outputSchema` or `title` before 2025-06-18, no
//! `resultType` before 2026-07-28), and tool lists are serialised once per
//! revision and cached in their [`ToolSet`].

use std::sync::Arc;

use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use crate::backend::{ServerIdentity, ToolDef, ToolOutput, ToolSet};
use crate::revision::Revision;
use crate::validate;
use crate::wire::{ResultJson, meta_key};

/// The `tools` array for `revision`, validated and cached on first use.
/// A list that fails validation is not cached, so the error repeats (and
/// is logged) instead of a bad list ever being sent.
pub(crate) fn tools_array(revision: Revision, set: &ToolSet) -> Result<Arc<RawValue>, String> {
    let slot = &set.rendered[revision.index()];
    if let Some(cached) = slot.get() {
        return Ok(Arc::clone(cached));
    }
    validate::tool_definitions(revision, set.tools())?;
    let tools: Vec<Value> = set.tools().iter().map(|t| tool(revision, t)).collect();
    let text =
        serde_json::to_string(&tools).map_err(|e| format!("tool list does not serialize: {e}"))?;
    let raw: Arc<RawValue> = RawValue::from_string(text)
        .map_err(|e| format!("tool list is not JSON: {e}"))?
        .into();
    // A concurrent renderer may have won; either copy is identical.
    let _ = slot.set(Arc::clone(&raw));
    Ok(raw)
}

fn tool(revision: Revision, def: &ToolDef) -> Value {
    let mut out = Map::new();
    out.insert("name".into(), Value::String(def.name.clone()));
    if revision.has_titles()
        && let Some(title) = &def.title
    {
        out.insert("title".into(), Value::String(title.clone()));
    }
    out.insert("description".into(), Value::String(def.description.clone()));
    out.insert("inputSchema".into(), def.input_schema.clone());
    if revision.has_structured_output()
        && let Some(schema) = &def.output_schema
    {
        out.insert("outputSchema".into(), schema.clone());
    }
    if let Some(annotations) = &def.annotations {
        out.insert("annotations".into(), annotations.clone());
    }
    Value::Object(out)
}

/// `serverInfo` (an `Implementation`) as `revision` defines it.
fn server_info(revision: Revision, identity: &ServerIdentity) -> Value {
    let mut info = Map::new();
    info.insert("name".into(), Value::String(identity.name.clone()));
    info.insert("version".into(), Value::String(identity.version.clone()));
    if revision.has_titles()
        && let Some(title) = &identity.title
    {
        info.insert("title".into(), Value::String(title.clone()));
    }
    Value::Object(info)
}

/// Adds the 2026-07-28 result decorations and serializes.
fn finish(
    revision: Revision,
    identity: &ServerIdentity,
    mut result: Map<String, Value>,
) -> ResultJson {
    if revision.has_result_type() {
        result.insert("resultType".into(), Value::String("complete".into()));
        let mut meta = Map::new();
        meta.insert(
            meta_key::SERVER_INFO.into(),
            server_info(revision, identity),
        );
        result.insert("_meta".into(), Value::Object(meta));
    }
    serde_json::to_vec(&Value::Object(result)).unwrap_or_else(|_| b"{}".to_vec())
}

/// Capabilities advertised: tools (the list never changes mid-session)
/// and, where the revision has it, logging (so `logging/setLevel` is
/// legitimate; this server emits no log notifications).
fn capabilities(revision: Revision) -> Value {
    if revision.is_modern() {
        json!({ "tools": { "listChanged": false } })
    } else {
        json!({ "tools": { "listChanged": false }, "logging": {} })
    }
}

pub(crate) fn initialize(revision: Revision, identity: &ServerIdentity) -> ResultJson {
    let mut result = Map::new();
    result.insert(
        "protocolVersion".into(),
        Value::String(revision.as_str().into()),
    );
    result.insert("capabilities".into(), capabilities(revision));
    result.insert("serverInfo".into(), server_info(revision, identity));
    if let Some(instructions) = &identity.instructions {
        result.insert("instructions".into(), Value::String(instructions.clone()));
    }
    finish(revision, identity, result)
}

pub(crate) fn discover(revision: Revision, identity: &ServerIdentity, ttl_ms: u64) -> ResultJson {
    let mut result = Map::new();
    let supported: Vec<Value> = Revision::MODERN
        .iter()
        .map(|r| Value::String(r.as_str().into()))
        .collect();
    result.insert("supportedVersions".into(), Value::Array(supported));
    result.insert("capabilities".into(), capabilities(revision));
    if let Some(instructions) = &identity.instructions {
        result.insert("instructions".into(), Value::String(instructions.clone()));
    }
    result.insert("ttlMs".into(), Value::from(ttl_ms));
    // The same for every caller: no per-principal data in it.
    result.insert("cacheScope".into(), Value::String("public".into()));
    finish(revision, identity, result)
}

pub(crate) fn empty(revision: Revision, identity: &ServerIdentity) -> ResultJson {
    finish(revision, identity, Map::new())
}

/// `{"tools":[...]}` plus, from 2026-07-28, the cache hints. The list
/// depends on the caller's grant, so shared caches must not reuse it.
pub(crate) fn tools_list(
    revision: Revision,
    identity: &ServerIdentity,
    tools: &RawValue,
    ttl_ms: u64,
) -> ResultJson {
    let mut out = Vec::with_capacity(tools.get().len() + 160);
    out.extend_from_slice(b"{\"tools\":");
    out.extend_from_slice(tools.get().as_bytes());
    if revision.has_result_type() {
        let mut rest = Map::new();
        rest.insert("ttlMs".into(), Value::from(ttl_ms));
        rest.insert("cacheScope".into(), Value::String("private".into()));
        let decorated = finish(revision, identity, rest);
        // `decorated` is a non-empty object `{...}`: splice its members.
        if decorated.len() > 2 {
            out.push(b',');
            out.extend_from_slice(&decorated[1..decorated.len() - 1]);
        }
    }
    out.push(b'}');
    out
}

/// A `tools/call` result: the text block (the structured JSON when the
/// tool gave no text), `structuredContent` where the revision has it.
pub(crate) fn call_result(
    revision: Revision,
    identity: &ServerIdentity,
    output: &ToolOutput,
) -> ResultJson {
    let text = match (&output.structured, output.text.is_empty()) {
        (Some(structured), true) => structured.to_string(),
        _ => output.text.clone(),
    };
    let mut result = Map::new();
    result.insert("content".into(), json!([{ "type": "text", "text": text }]));
    if revision.has_structured_output()
        && let Some(structured) = &output.structured
    {
        result.insert("structuredContent".into(), structured.clone());
    }
    result.insert("isError".into(), Value::Bool(output.is_error));
    finish(revision, identity, result)
}
