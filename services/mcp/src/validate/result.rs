//! Checks on what leaves: the tool list, the server identity and each
//! tool's output, before they are rendered. A defect here is the server's
//! own, so the engine answers `-32603` instead of sending it.

use std::collections::HashSet;
use std::sync::LazyLock;

use serde_json::Value;

use super::{Compiled, schema};
use crate::backend::{ServerIdentity, ToolDef, ToolOutput, ToolSet};
use crate::revision::Revision;

/// Tool names: 1-128 characters of `[A-Za-z0-9_.-]` (2025-11-25 tools spec;
/// applied to every revision, since clients drop lists with bad names).
pub(crate) fn tool_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// Checks a tool list before it is rendered for `revision`. One bad tool
/// makes clients drop the whole list, so any defect fails the list.
pub(crate) fn tool_definitions(revision: Revision, tools: &[ToolDef]) -> Result<(), String> {
    let mut names = HashSet::with_capacity(tools.len());
    for tool in tools {
        if !tool_name(&tool.name) {
            return Err(format!(
                "tool name {:?} is not 1-128 characters of [A-Za-z0-9_.-]",
                tool.name
            ));
        }
        if !names.insert(tool.name.as_str()) {
            return Err(format!("tool name {:?} appears twice", tool.name));
        }
        let is_object_schema = |schema: &Value| {
            schema.is_object() && schema.get("type") == Some(&Value::String("object".into()))
        };
        if !is_object_schema(&tool.input_schema) {
            return Err(format!(
                "tool {:?}: inputSchema must be an object schema (\"type\": \"object\")",
                tool.name
            ));
        }
        if let Some(output) = &tool.output_schema
            && revision.has_structured_output()
        {
            let ok = if revision.output_schema_must_be_object() {
                is_object_schema(output)
            } else {
                output.is_object()
            };
            if !ok {
                return Err(format!(
                    "tool {:?}: outputSchema is not valid for revision {revision}",
                    tool.name
                ));
            }
        }
        if tool.annotations.as_ref().is_some_and(|a| !a.is_object()) {
            return Err(format!(
                "tool {:?}: annotations must be an object",
                tool.name
            ));
        }
    }
    Ok(())
}

/// Checks one tool defined elsewhere (an upstream server's) before it may
/// be served: its name, and its schemas usable by the validator (they
/// compile within its bounds, with no external reference) and legal in
/// every revision it may be rendered for.
pub fn check_tool_definition(tool: &ToolDef) -> Result<(), String> {
    for revision in Revision::ALL {
        tool_definitions(revision, std::slice::from_ref(tool))?;
    }
    schema::well_formed(&tool.input_schema)
        .map_err(|v| format!("tool {:?}: inputSchema {v}", tool.name))?;
    if let Some(output) = &tool.output_schema {
        schema::well_formed(output)
            .map_err(|v| format!("tool {:?}: outputSchema {v}", tool.name))?;
    }
    Ok(())
}

/// What a result's content blocks may be (the 2025-06-18 and later
/// `ContentBlock`: text, image, audio, embedded resource, resource link),
/// as a JSON Schema compiled once.
static CONTENT_BLOCK: LazyLock<Result<Compiled, super::Violation>> = LazyLock::new(|| {
    super::compile(&serde_json::json!({
        "$defs": {
            "annotated": {
                "properties": {
                    "annotations": { "type": "object" },
                    "_meta": { "type": "object" }
                }
            },
            "base64": {
                "type": "string",
                "contentEncoding": "base64",
                "pattern": "^[A-Za-z0-9+/]*={0,2}$"
            }
        },
        "type": "object",
        "required": ["type"],
        "$ref": "#/$defs/annotated",
        "oneOf": [
            {
                "properties": { "type": { "const": "text" }, "text": { "type": "string" } },
                "required": ["text"]
            },
            {
                "properties": {
                    "type": { "enum": ["image", "audio"] },
                    "data": { "$ref": "#/$defs/base64" },
                    "mimeType": { "type": "string" }
                },
                "required": ["data", "mimeType"]
            },
            {
                "properties": {
                    "type": { "const": "resource" },
                    "resource": {
                        "type": "object",
                        "properties": {
                            "uri": { "type": "string" },
                            "mimeType": { "type": "string" },
                            "text": { "type": "string" },
                            "blob": { "$ref": "#/$defs/base64" }
                        },
                        "required": ["uri"],
                        "oneOf": [{ "required": ["text"] }, { "required": ["blob"] }]
                    }
                },
                "required": ["resource"]
            },
            {
                "properties": {
                    "type": { "const": "resource_link" },
                    "uri": { "type": "string" },
                    "name": { "type": "string" },
                    "title": { "type": "string" },
                    "description": { "type": "string" },
                    "mimeType": { "type": "string" },
                    "size": { "type": "integer", "minimum": 0 }
                },
                "required": ["uri", "name"]
            }
        ]
    }))
});

/// Checks each of a result's relayed content blocks ([`ToolOutput::content`]).
fn content_blocks(blocks: &[Value]) -> Result<(), String> {
    if blocks.is_empty() {
        return Ok(());
    }
    let compiled = CONTENT_BLOCK
        .as_ref()
        .map_err(|v| format!("content block schema: {v}"))?;
    for (index, block) in blocks.iter().enumerate() {
        compiled.check(&Value::Null, block).map_err(|v| {
            // Only the path: the block is tool output and this is logged.
            format!(
                "returned a content block [{index}] that is not a valid content block (at `{}`)",
                v.path
            )
        })?;
    }
    Ok(())
}

/// Checks the server identity: clients reject `serverInfo` without a
/// string `name` and `version`.
pub(crate) fn identity(identity: &ServerIdentity) -> Result<(), String> {
    if identity.name.trim().is_empty() {
        return Err("serverInfo.name is empty".into());
    }
    if identity.version.trim().is_empty() {
        return Err("serverInfo.version is empty".into());
    }
    Ok(())
}

/// Checks a tool's output against its definition: from 2025-06-18 on,
/// `structuredContent` is present exactly when the tool declares an
/// `outputSchema` and the call succeeded, and then it must conform (for a
/// [`ResultOrigin::Typed`](crate::ResultOrigin) tool, checked in debug
/// builds only: see there).
pub(crate) fn tool_output(
    revision: Revision,
    set: &ToolSet,
    index: usize,
    output: &ToolOutput,
) -> Result<(), String> {
    let tool = &set.tools()[index];
    content_blocks(&output.content).map_err(|problem| format!("tool {:?} {problem}", tool.name))?;
    if !revision.has_structured_output() {
        return Ok(());
    }
    match (&tool.output_schema, &output.structured, output.is_error) {
        (_, Some(_), true) => Err(format!(
            "tool {:?} returned structured content with an error result",
            tool.name
        )),
        (_, None, true) => Ok(()),
        (Some(_), Some(_), false) if !tool.results.checked_at_run_time() => Ok(()),
        (Some(_), Some(structured), false) => set.check_output(index, structured).map_err(|v| {
            // Only the path: the value is tool output (board data) and
            // this message is logged.
            format!(
                "tool {:?} returned structured content not matching its outputSchema at `{}`",
                tool.name, v.path
            )
        }),
        (Some(_), None, false) => Err(format!(
            "tool {:?} declares an outputSchema but returned no structured content",
            tool.name
        )),
        (None, Some(_), false) => Err(format!(
            "tool {:?} returned structured content but declares no outputSchema",
            tool.name
        )),
        (None, None, false) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::ResultOrigin;

    /// A typed tool's result is checked against its schema in the builds
    /// the tests run (debug): a shape the code gets wrong fails here, and
    /// release builds may then skip the check. Relayed results are checked
    /// in every build.
    #[test]
    fn typed_results_are_checked_in_test_builds_and_relayed_ones_always() {
        let tool = |results| ToolDef {
            name: "get_thing".into(),
            title: None,
            description: "Gets a thing".into(),
            input_schema: serde_json::json!({ "type": "object" }),
            output_schema: Some(serde_json::json!({
                "type": "object",
                "properties": { "id": { "type": "string" } },
                "required": ["id"]
            })),
            annotations: None,
            results,
        };
        let output = |structured: Value| ToolOutput {
            structured: Some(structured.into()),
            text: "thing".into(),
            is_error: false,
            relay: None,
            content: Vec::new(),
        };
        let revision = Revision::ALL[Revision::ALL.len() - 1];
        for origin in [ResultOrigin::Typed, ResultOrigin::Relayed] {
            let set = ToolSet::new(vec![tool(origin)]);
            assert_eq!(
                tool_output(revision, &set, 0, &output(serde_json::json!({ "id": "a" }))),
                Ok(())
            );
            let bad = tool_output(revision, &set, 0, &output(serde_json::json!({ "id": 7 })));
            assert_eq!(
                bad.is_err(),
                origin == ResultOrigin::Relayed || cfg!(debug_assertions),
                "{origin:?}: {bad:?}"
            );
        }
    }

    #[test]
    fn foreign_tool_definitions_are_checked() {
        let tool = |input: Value| ToolDef {
            name: "github__issue_read".into(),
            title: None,
            description: "Reads an issue".into(),
            input_schema: input,
            output_schema: None,
            annotations: None,
            results: ResultOrigin::Relayed,
        };
        let good = serde_json::json!({
            "type": "object",
            "properties": { "n": { "type": "integer", "minimum": 1 }, "tags": { "type": "array", "items": { "type": "string" } } },
            "required": ["n"],
            "$schema": "https://json-schema.org/draft/2020-12/schema"
        });
        assert_eq!(check_tool_definition(&tool(good)), Ok(()));
        for bad in [
            serde_json::json!({ "type": "array" }),
            serde_json::json!({ "type": "object", "properties": { "n": { "type": "int" } } }),
            serde_json::json!({ "type": "object", "required": "n" }),
            serde_json::json!({ "type": "object", "properties": { "s": { "type": "string", "maxLength": -1 } } }),
            serde_json::json!({ "type": "object", "properties": [] }),
        ] {
            assert!(check_tool_definition(&tool(bad.clone())).is_err(), "{bad}");
        }
        let mut named = tool(serde_json::json!({ "type": "object" }));
        named.name = "bad name".into();
        assert!(check_tool_definition(&named).is_err());
    }

    #[test]
    fn relayed_content_blocks_are_checked() {
        use serde_json::json;
        let good = [
            json!({ "type": "text", "text": "hi", "annotations": { "audience": ["user"] } }),
            json!({ "type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png" }),
            json!({ "type": "audio", "data": "UklGRg==", "mimeType": "audio/wav" }),
            json!({ "type": "resource", "resource": { "uri": "mem://a", "text": "t" } }),
            json!({ "type": "resource", "resource": { "uri": "mem://b", "blob": "AAAA", "mimeType": "application/octet-stream" } }),
            json!({ "type": "resource_link", "uri": "file:///r.txt", "name": "r.txt", "size": 3 }),
        ];
        assert_eq!(content_blocks(&good), Ok(()));
        for bad in [
            json!({ "type": "image", "data": "not base64!", "mimeType": "image/png" }),
            json!({ "type": "image", "data": "AAAA" }),
            json!({ "type": "resource", "resource": { "uri": "mem://a" } }),
            json!({ "type": "resource", "resource": { "uri": "mem://a", "text": "t", "blob": "AAAA" } }),
            json!({ "type": "resource_link", "uri": "file:///r.txt" }),
            json!({ "type": "text", "text": 5 }),
            json!({ "type": "hologram" }),
            json!("text"),
        ] {
            let problem = content_blocks(std::slice::from_ref(&bad)).unwrap_err();
            assert!(
                problem.contains("not a valid content block"),
                "{bad}: {problem}"
            );
            assert!(!problem.contains("not base64!"), "values are never echoed");
        }
    }

    #[test]
    fn names() {
        assert!(tool_name("create_issue"));
        assert!(tool_name("a.b-c_9"));
        assert!(!tool_name(""));
        assert!(!tool_name("has space"));
        assert!(!tool_name(&"x".repeat(129)));
    }
}
