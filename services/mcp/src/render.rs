//! Result rendering per revision. Fields a revision does not define are
//! never written (no `outputSchema` or `title` before 2025-06-18, no
//! `resultType` before 2026-07-28), and tool lists are serialised once per
//! revision and cached in their [`ToolSet`].

use std::sync::Arc;

use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use crate::backend::{ServerIdentity, StructuredContent, ToolDef, ToolOutput, ToolSet};
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
    let mut out = ResultJson::buffer(256);
    match serde_json::to_writer(&mut out, &Value::Object(result)) {
        Ok(()) => ResultJson::written(out),
        // A map of strings and values always serialises; this keeps the
        // result well-formed even if that ever changed.
        Err(_) => ResultJson::from(b"{}".to_vec()),
    }
}

/// `,"_meta":{...serverInfo...},"resultType":"complete"`: [`finish`]'s
/// decorations of an otherwise empty map, as members to append.
fn write_decorations(out: &mut Vec<u8>, revision: Revision, identity: &ServerIdentity) {
    out.extend_from_slice(b",\"_meta\":{");
    write_string(out, meta_key::SERVER_INFO);
    out.extend_from_slice(b":{\"name\":");
    write_string(out, &identity.name);
    if revision.has_titles()
        && let Some(title) = &identity.title
    {
        out.extend_from_slice(b",\"title\":");
        write_string(out, title);
    }
    out.extend_from_slice(b",\"version\":");
    write_string(out, &identity.version);
    out.extend_from_slice(b"}},\"resultType\":\"complete\"");
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
    let mut out = ResultJson::buffer(tools.get().len() + 160);
    out.extend_from_slice(b"{\"tools\":");
    out.extend_from_slice(tools.get().as_bytes());
    let mut rest = Map::new();
    if revision.has_result_type() {
        rest.insert("ttlMs".into(), Value::from(ttl_ms));
        rest.insert("cacheScope".into(), Value::String("private".into()));
    }
    close(out, revision, identity, rest)
}

/// Ends an object whose members `out` (a [`ResultJson::buffer`]) holds (at
/// least one) with `rest` and the revision's decorations.
fn close(
    mut out: Vec<u8>,
    revision: Revision,
    identity: &ServerIdentity,
    rest: Map<String, Value>,
) -> ResultJson {
    if rest.is_empty() {
        // The common case (every tool result): the decorations alone,
        // written straight into the answer instead of a `Map` built and
        // serialised per call. The bytes are `finish`'s (same keys, same
        // sorted order; a unit test compares the two).
        if revision.has_result_type() {
            write_decorations(&mut out, revision, identity);
        }
        out.push(b'}');
        return ResultJson::written(out);
    }
    let decorated = finish(revision, identity, rest);
    let decorated = decorated.as_bytes();
    // `decorated` is an object `{...}`: splice its members, if any.
    if decorated.len() > 2 {
        out.push(b',');
        out.extend_from_slice(&decorated[1..decorated.len() - 1]);
    }
    out.push(b'}');
    ResultJson::written(out)
}

/// A `tools/call` result: the text block (the structured JSON when the
/// tool gave no text), `structuredContent` where the revision has it.
///
/// Written directly rather than through a `Value` tree: the structured
/// result is serialised once (the string the backend may already have
/// counted) and that one string is both the text block (escaped) and
/// `structuredContent` (as is).
pub(crate) fn call_result(
    revision: Revision,
    identity: &ServerIdentity,
    output: &ToolOutput,
) -> ResultJson {
    let structured = output.structured.as_ref().map(StructuredContent::json);
    // With no text of its own, the text block is the structured JSON.
    let structured_as_text = structured.filter(|_| output.text.is_empty());
    // Room for the text block (the tool's text escaped once and kept with
    // it, or the structured JSON escaped here: at most about twice its
    // length for ordinary text), `structuredContent` as is, and the
    // decorations, so the answer is written without growing, and a kept
    // page's buffer, which is sent as it is, holds little more than it.
    let text_len = structured_as_text.map_or_else(|| output.text.json().len(), |s| 2 * s.len());
    let structured_len = structured.map_or(0, str::len);
    let mut out = ResultJson::buffer(
        text_len + structured_len + identity.name.len() + identity.version.len() + 256,
    );
    if output.content.is_empty() {
        out.extend_from_slice(b"{\"content\":[{\"type\":\"text\",\"text\":");
        match structured_as_text {
            Some(structured) => write_string(&mut out, structured),
            // Escaped once and kept with the text (`TextContent::json`).
            None => out.extend_from_slice(output.text.json().as_bytes()),
        }
        out.extend_from_slice(b"}]");
    } else {
        out.extend_from_slice(b"{\"content\":");
        let blocks: Vec<std::borrow::Cow<'_, Value>> = output
            .content
            .iter()
            .map(|block| content_block(revision, block))
            .collect();
        let _ = serde_json::to_writer(&mut out, &blocks);
    }
    if revision.has_structured_output()
        && let Some(structured) = structured
    {
        out.extend_from_slice(b",\"structuredContent\":");
        out.extend_from_slice(structured.as_bytes());
    }
    out.extend_from_slice(if output.is_error {
        b",\"isError\":true"
    } else {
        b",\"isError\":false"
    });
    close(out, revision, identity, Map::new())
}

/// A relayed content block as `revision` can carry it: a `resource_link`
/// (2025-06-18 on) becomes, for 2025-03-26, a text block naming the link,
/// so the agent still learns of it.
fn content_block(revision: Revision, block: &Value) -> std::borrow::Cow<'_, Value> {
    if revision.has_resource_links()
        || block.get("type").and_then(Value::as_str) != Some("resource_link")
    {
        return std::borrow::Cow::Borrowed(block);
    }
    let field = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or_default();
    std::borrow::Cow::Owned(serde_json::json!({
        "type": "text",
        "text": format!("[resource link] {}: {}", field("name"), field("uri")),
    }))
}

/// A 2026-07-28 `input_required` result: the input requests exactly as
/// the backend checked them, its sealed state, and the usual `_meta`.
pub(crate) fn input_required(
    revision: Revision,
    identity: &ServerIdentity,
    input_requests: &serde_json::value::RawValue,
    request_state: &str,
) -> ResultJson {
    let mut out = ResultJson::buffer(input_requests.get().len() + request_state.len() + 160);
    out.extend_from_slice(b"{\"inputRequests\":");
    out.extend_from_slice(input_requests.get().as_bytes());
    out.extend_from_slice(b",\"requestState\":");
    write_string(&mut out, request_state);
    let mut meta = Map::new();
    meta.insert(
        meta_key::SERVER_INFO.into(),
        server_info(revision, identity),
    );
    out.extend_from_slice(b",\"resultType\":\"input_required\",\"_meta\":");
    out.extend_from_slice(Value::Object(meta).to_string().as_bytes());
    out.push(b'}');
    ResultJson::written(out)
}

/// `text` as a JSON string.
fn write_string(out: &mut Vec<u8>, text: &str) {
    // Serialising a `&str` into a `Vec` cannot fail.
    let _ = serde_json::to_writer(&mut *out, text);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::TextContent;

    /// A tool's answer of `structured` and `text`, and the value of its
    /// result as each revision renders it.
    fn rendered(structured: Option<Value>, text: TextContent) -> Vec<(Revision, Value)> {
        let output = ToolOutput {
            structured: structured.map(Into::into),
            text,
            is_error: false,
            relay: None,
            content: Vec::new(),
        };
        Revision::ALL
            .into_iter()
            .map(|revision| {
                let bytes = call_result(revision, &identity(), &output);
                let value = serde_json::from_slice(bytes.as_bytes()).expect("valid JSON");
                (revision, value)
            })
            .collect()
    }

    fn identity() -> ServerIdentity {
        ServerIdentity {
            name: "corkboard".into(),
            version: "1.2.3".into(),
            title: None,
            instructions: None,
        }
    }

    #[test]
    fn decorations_written_directly_are_the_bytes_of_the_serialised_map() {
        let titled = ServerIdentity {
            title: Some("Cork \"board\" \u{e9}".into()),
            ..identity()
        };
        for identity in [identity(), titled] {
            for revision in Revision::ALL {
                let mut members = ResultJson::buffer(8);
                members.extend_from_slice(b"{\"a\":1");
                let direct = close(members, revision, &identity, Map::new());
                let decorated = finish(revision, &identity, Map::new());
                let decorated = decorated.as_bytes();
                let mut spliced = b"{\"a\":1".to_vec();
                if decorated.len() > 2 {
                    spliced.push(b',');
                    spliced.extend_from_slice(&decorated[1..decorated.len() - 1]);
                }
                spliced.push(b'}');
                assert_eq!(
                    String::from_utf8(direct.as_bytes().to_vec()).unwrap(),
                    String::from_utf8(spliced).unwrap(),
                    "{revision:?}"
                );
            }
        }
    }

    #[test]
    fn a_call_result_carries_the_structured_json_as_its_text_block_in_every_revision() {
        let structured = json!({
            "title": "quotes \" back\\slash \n newline é 🧷 </script>",
            "n": [1, 2.5, null, true],
        });
        for (revision, value) in rendered(Some(structured.clone()), TextContent::default()) {
            let text = value["content"][0]["text"].as_str().expect("text block");
            assert_eq!(serde_json::from_str::<Value>(text).unwrap(), structured);
            assert_eq!(value["content"][0]["type"], "text");
            assert_eq!(value["isError"], false);
            assert_eq!(
                value.get("structuredContent"),
                revision.has_structured_output().then_some(&structured),
                "{revision:?}"
            );
            assert_eq!(
                value.get("resultType").is_some(),
                revision.has_result_type(),
                "{revision:?}"
            );
            if revision.has_result_type() {
                assert_eq!(value["_meta"][meta_key::SERVER_INFO]["version"], "1.2.3");
            }
        }
    }

    #[test]
    fn relayed_blocks_are_sent_in_order_and_resource_links_reach_2025_03_26_as_text() {
        let link = json!({ "type": "resource_link", "uri": "file:///r.txt", "name": "r.txt" });
        let image = json!({ "type": "image", "data": "AAAA", "mimeType": "image/png" });
        let output = ToolOutput {
            structured: None,
            text: "ignored".into(),
            is_error: false,
            relay: None,
            content: vec![link.clone(), image.clone()],
        };
        for revision in Revision::ALL {
            let bytes = call_result(revision, &identity(), &output);
            let value: Value = serde_json::from_slice(bytes.as_bytes()).unwrap();
            let content = value["content"].as_array().unwrap();
            assert_eq!(content.len(), 2, "{value}");
            assert_eq!(content[1], image);
            if revision == Revision::V2025_03_26 {
                assert_eq!(
                    content[0],
                    json!({ "type": "text", "text": "[resource link] r.txt: file:///r.txt" })
                );
            } else {
                assert_eq!(content[0], link);
            }
        }
    }

    #[test]
    fn a_text_block_is_escaped_once_and_its_clones_share_it() {
        let text = "quotes \" back\\slash \n newline \u{1} é 🧷 </script>";
        let kept = TextContent::from(text);
        for (revision, value) in rendered(Some(json!({ "id": "iss_1" })), kept.clone()) {
            assert_eq!(value["content"][0]["text"], text, "{revision:?}");
        }
        // The string the renderer wrote is the one every clone reads.
        let again = kept.clone();
        assert!(std::ptr::eq(kept.json(), again.json()));
        assert_eq!(kept.json(), serde_json::to_string(text).unwrap());
        assert_eq!(again.into_string(), text);
        let empty = TextContent::default();
        assert_eq!(empty.json(), "\"\"");
        assert!(empty.is_empty());
        assert_eq!(TextContent::from(String::new()).json(), "\"\"");
    }

    #[test]
    fn an_error_result_keeps_its_own_text_and_no_structured_content() {
        let output = ToolOutput {
            structured: None,
            text: "board unavailable: \"x\"".into(),
            is_error: true,
            relay: None,
            content: Vec::new(),
        };
        let bytes = call_result(Revision::LATEST_LEGACY, &identity(), &output);
        let value: Value = serde_json::from_slice(bytes.as_bytes()).unwrap();
        assert_eq!(value["content"][0]["text"], "board unavailable: \"x\"");
        assert_eq!(value["isError"], true);
        assert!(value.get("structuredContent").is_none());
    }
}
