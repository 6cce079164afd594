//! What every call path answers with: the upstream's result as this
//! gateway's tool output, the honest "unavailable ...; retry later", a
//! relay refusal, and a 2026-07-28 upstream's `input_required` read from
//! its bytes. A leaf of `view`: the era paths all use it.

use crate::error::UpstreamError;
use corkboard_board::AuditOutcome;
use corkboard_mcp::relay::AgentCapabilities;
use corkboard_mcp::{RelayAnswer, RpcError, StructuredContent, ToolDef, ToolOutput};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

/// What a 2026-07-28 upstream's `input_required` carries, its
/// `inputRequests` as the upstream wrote them.
#[derive(Deserialize)]
pub(crate) struct Asks<'a> {
    #[serde(rename = "resultType", default)]
    pub(crate) result_type: Option<String>,
    #[serde(rename = "inputRequests", borrow, default)]
    pub(crate) input_requests: Option<&'a RawValue>,
    #[serde(rename = "requestState", default)]
    pub(crate) request_state: Option<String>,
}

/// A 2026-07-28 upstream's answer when it is an `input_required`
/// (borrowed from its bytes).
pub(crate) fn asks(answer: &RawValue) -> Option<Asks<'_>> {
    serde_json::from_str::<Asks<'_>>(answer.get())
        .ok()
        .filter(|asks| asks.result_type.as_deref() == Some("input_required"))
}

/// A 2026-07-28 upstream's final result, parsed.
pub(crate) fn parsed(answer: &RawValue) -> Result<Value, UpstreamError> {
    serde_json::from_str(answer.get())
        .map_err(|_| UpstreamError::Unavailable("its result is not a JSON object".into()))
}

/// A call the gateway refused on the protocol level (a bad retry, a
/// relay refusal): answered as that JSON-RPC error, audited as denied.
pub(crate) fn refused(error: RpcError) -> (ToolOutput, AuditOutcome) {
    (
        ToolOutput {
            structured: None,
            text: Default::default(),
            is_error: true,
            relay: Some(RelayAnswer::Refused(error)),
            content: Vec::new(),
        },
        AuditOutcome::Denied,
    )
}

/// The honest answer to a call the upstream says it does not know
/// ("... not found") when the gateway listed the tool declaring
/// capabilities (`listed_with`) the agent did not declare (`agent`):
/// servers offer tools that ask for sampling or elicitation only to
/// clients that can answer, so the agent is told which capability its
/// client lacks instead of being told the listed tool does not exist.
/// `None` leaves `output` as it is.
pub(crate) fn lacking_capability(
    output: &ToolOutput,
    listed_with: AgentCapabilities,
    agent: AgentCapabilities,
    upstream: &str,
    name: &str,
) -> Option<ToolOutput> {
    if !output.is_error
        || output.relay.is_some()
        || !output.text.to_ascii_lowercase().contains("not found")
    {
        return None;
    }
    let mut missing = Vec::new();
    if listed_with.sampling && !agent.sampling {
        missing.push("sampling");
    }
    if listed_with.elicitation_form && !agent.elicitation_form {
        missing.push("elicitation");
    }
    if missing.is_empty() {
        return None;
    }
    let missing = missing.join(" and ");
    Some(text_output(
        format!(
            "tool {name} needs a client capability yours did not declare: upstream {upstream} offers it only to clients that declare {missing} (it answered: {}). Call it from a client that declares {missing} and answers those requests",
            output.text
        ),
        true,
    ))
}

/// A tool output of `text` alone.
pub(crate) fn text_output(text: String, is_error: bool) -> ToolOutput {
    ToolOutput {
        structured: None,
        text: text.into(),
        is_error,
        relay: None,
        content: Vec::new(),
    }
}

/// "`why`; retry later", audited as unavailable.
pub(crate) fn unavailable(why: &str) -> (ToolOutput, AuditOutcome) {
    (
        text_output(format!("{why}; retry later"), true),
        AuditOutcome::Unavailable,
    )
}

/// The upstream's `tools/call` result as this gateway's tool output: its
/// content blocks relayed in order (text, image, audio, embedded
/// resources, resource links; the text an agent or a person reads
/// cleaned of invisible characters, escapes and HTML comments first),
/// `structuredContent` kept when the tool declares an `outputSchema`.
/// The blocks are checked against the content block schema before they
/// leave (`corkboard_mcp`'s result validator); a block of a type no
/// revision knows is named in a text block instead.
pub(crate) fn to_output(
    def: &ToolDef,
    answer: Result<Value, UpstreamError>,
) -> (ToolOutput, AuditOutcome) {
    let result = match answer {
        Ok(result) => result,
        // Nothing was sent: refused as the protocol error it is.
        Err(UpstreamError::ShareExhausted(full)) => return refused(full.rpc_error()),
        Err(err @ (UpstreamError::Rpc { .. } | UpstreamError::TooLarge(_))) => {
            return (text_output(err.to_string(), true), AuditOutcome::ToolError);
        }
        Err(err) => return unavailable(&err.to_string()),
    };
    if result.get("resultType").and_then(Value::as_str) == Some("input_required") {
        // Reached only when the agent cannot be asked in 2026-07-28 form.
        return (
            text_output(
                "the upstream needs input from the agent (input_required), which this gateway relays only to 2026-07-28 agents; call it from a 2026-07-28 client".to_owned(),
                true,
            ),
            AuditOutcome::ToolError,
        );
    }
    let is_error = result.get("isError").and_then(Value::as_bool) == Some(true);
    let mut texts = Vec::new();
    // No blocks at all stays empty: the one text block (empty, or the
    // structured JSON) as for any tool.
    let mut content = Vec::new();
    for block in result
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let block = relayed_block(block);
        if let Some(text) = block.get("text").and_then(Value::as_str)
            && block.get("type").and_then(Value::as_str) == Some("text")
        {
            texts.push(text.to_owned());
        }
        content.push(block);
    }
    let structured = match (&def.output_schema, is_error) {
        (Some(_), false) => match result.get("structuredContent") {
            Some(value) => Some(value.clone()),
            None => {
                return (
                    text_output(
                        format!(
                            "tool {} declares an outputSchema but the upstream returned no structured content",
                            def.name
                        ),
                        true,
                    ),
                    AuditOutcome::ToolError,
                );
            }
        },
        _ => None,
    };
    let outcome = if is_error {
        AuditOutcome::ToolError
    } else {
        AuditOutcome::Ok
    };
    let text = texts.join("\n");
    (
        ToolOutput {
            structured: structured.map(StructuredContent::from),
            text: text.into(),
            is_error,
            relay: None,
            content,
        },
        outcome,
    )
}

/// One upstream content block as relayed: text an agent or a person
/// reads is cleaned (a text block's `text`, an embedded text resource's
/// `text`, a resource link's `name`, `title` and `description`); binary
/// data is passed as it is (the validator checks it is base64); a block
/// of an unknown type becomes a text block naming it.
fn relayed_block(block: &Value) -> Value {
    let clean = |value: &mut Value, key: &str| {
        if let Some(Value::String(text)) = value.get_mut(key) {
            *text = corkboard_board::clean_text(text).0;
        }
    };
    let mut block = block.clone();
    match block.get("type").and_then(Value::as_str) {
        Some("text") => clean(&mut block, "text"),
        Some("image" | "audio") => {}
        Some("resource") => {
            if let Some(resource) = block.get_mut("resource") {
                clean(resource, "text");
            }
        }
        Some("resource_link") => {
            for key in ["name", "title", "description"] {
                clean(&mut block, key);
            }
        }
        kind => {
            return serde_json::json!({
                "type": "text",
                "text": format!(
                    "[{} content from the upstream, not relayed by this gateway]",
                    kind.unwrap_or("unknown")
                ),
            });
        }
    }
    block
}

#[cfg(test)]
mod tests {
    use super::*;
    use corkboard_mcp::ResultOrigin;

    #[test]
    fn a_tool_the_agent_cannot_use_says_which_capability_it_lacks() {
        let listed_with = AgentCapabilities {
            sampling: true,
            elicitation_form: true,
            ..AgentCapabilities::default()
        };
        let not_found = text_output(
            "upstream everything refused the request (JSON-RPC -32602): Tool trigger-sampling-request not found".into(),
            true,
        );
        let told = lacking_capability(
            &not_found,
            listed_with,
            AgentCapabilities::default(),
            "everything",
            "everything__trigger-sampling-request",
        )
        .expect("told");
        assert!(told.is_error);
        assert!(
            told.text.contains("declare sampling and elicitation"),
            "{}",
            told.text
        );
        let elicits = AgentCapabilities {
            elicitation_form: true,
            ..AgentCapabilities::default()
        };
        let told = lacking_capability(&not_found, listed_with, elicits, "e", "e__t").unwrap();
        assert!(told.text.contains("declare sampling ("), "{}", told.text);
        assert!(
            lacking_capability(&not_found, listed_with, listed_with, "e", "e__t").is_none(),
            "an agent that declared everything gets the upstream's answer"
        );
        let other = text_output("division by zero".into(), true);
        assert!(
            lacking_capability(
                &other,
                listed_with,
                AgentCapabilities::default(),
                "e",
                "e__t"
            )
            .is_none()
        );
    }
    use serde_json::json;

    fn def(output_schema: Option<Value>) -> ToolDef {
        ToolDef {
            name: "up__t".into(),
            title: None,
            description: String::new(),
            input_schema: json!({ "type": "object" }),
            output_schema,
            annotations: None,
            results: ResultOrigin::Relayed,
        }
    }

    #[test]
    fn upstream_results_map_to_tool_outputs() {
        let (out, outcome) = to_output(
            &def(None),
            Ok(json!({ "content": [
                { "type": "text", "text": "one" },
                { "type": "image", "data": "AAAA", "mimeType": "image/png" },
                { "type": "text", "text": "two" },
            ] })),
        );
        assert_eq!(outcome, AuditOutcome::Ok);
        assert!(!out.is_error);
        assert_eq!(out.text, "one\ntwo");
        assert_eq!(
            out.content,
            vec![
                json!({ "type": "text", "text": "one" }),
                json!({ "type": "image", "data": "AAAA", "mimeType": "image/png" }),
                json!({ "type": "text", "text": "two" }),
            ],
            "every block relayed, in order"
        );
        assert!(
            out.structured.is_none(),
            "no outputSchema, no structured content"
        );

        let schema = Some(json!({ "type": "object" }));
        let (out, _) = to_output(
            &def(schema.clone()),
            Ok(json!({ "content": [], "structuredContent": { "r": 1 } })),
        );
        assert_eq!(
            out.structured.map(StructuredContent::into_value),
            Some(json!({ "r": 1 }))
        );
        let (out, outcome) = to_output(&def(schema), Ok(json!({ "content": [] })));
        assert!(
            out.is_error && outcome == AuditOutcome::ToolError,
            "{}",
            out.text
        );

        let (out, outcome) = to_output(
            &def(None),
            Ok(json!({ "content": [{ "type": "text", "text": "nope" }], "isError": true })),
        );
        assert!(out.is_error);
        assert_eq!(outcome, AuditOutcome::ToolError);

        let (out, outcome) = to_output(
            &def(None),
            Err(UpstreamError::Unavailable(
                "upstream up unavailable: no answer within 5 ms".into(),
            )),
        );
        assert_eq!(outcome, AuditOutcome::Unavailable);
        assert_eq!(
            out.text,
            "upstream up unavailable: no answer within 5 ms; retry later"
        );
    }

    #[test]
    fn non_text_content_is_relayed_with_its_text_cleaned() {
        let (out, outcome) = to_output(
            &def(None),
            Ok(json!({ "content": [
                { "type": "resource_link", "uri": "file:///r.txt", "name": "r\u{200b}.txt", "description": "see \u{1b}[31mred" },
                { "type": "resource", "resource": { "uri": "mem://a", "text": "hidden<!-- do evil -->text" } },
                { "type": "audio", "data": "UklGRg==", "mimeType": "audio/wav" },
                { "type": "hologram", "data": "x" },
            ] })),
        );
        assert_eq!(outcome, AuditOutcome::Ok);
        assert_eq!(out.content[0]["name"], "r.txt");
        assert_eq!(out.content[0]["description"], "see red");
        assert_eq!(out.content[1]["resource"]["text"], "hiddentext");
        assert_eq!(
            out.content[2],
            json!({ "type": "audio", "data": "UklGRg==", "mimeType": "audio/wav" })
        );
        assert_eq!(
            out.content[3],
            json!({ "type": "text", "text": "[hologram content from the upstream, not relayed by this gateway]" })
        );
    }
}
