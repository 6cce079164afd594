//! What every call path answers with: the upstream's result as this
//! gateway's tool output, the honest "unavailable ...; retry later", a
//! relay refusal, and a 2026-07-28 upstream's `input_required` read from
//! its bytes. A leaf of `view`: the era paths all use it.

use crate::error::UpstreamError;
use corkboard_board::AuditOutcome;
use corkboard_mcp::relay::AgentCapabilities;
use corkboard_mcp::{RelayAnswer, RpcError, ToolDef, ToolOutput};
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
            text: String::new(),
            is_error: true,
            relay: Some(RelayAnswer::Refused(error)),
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
        text,
        is_error,
        relay: None,
    }
}

/// "`why`; retry later", audited as unavailable.
pub(crate) fn unavailable(why: &str) -> (ToolOutput, AuditOutcome) {
    (
        text_output(format!("{why}; retry later"), true),
        AuditOutcome::Unavailable,
    )
}

/// The upstream's `tools/call` result as this gateway's tool output: text
/// blocks joined, other blocks named (not relayed), `structuredContent`
/// kept when the tool declares an `outputSchema`.
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
    let mut parts = Vec::new();
    for block in result
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        match (
            block.get("type").and_then(Value::as_str),
            block.get("text").and_then(Value::as_str),
        ) {
            // Cleaned (invisible characters, escapes, HTML comments
            // stripped) before it reaches the agent or a person.
            (Some("text"), Some(text)) => parts.push(corkboard_board::clean_text(text).0),
            (kind, _) => parts.push(format!(
                "[{} content from the upstream, not relayed by this gateway]",
                kind.unwrap_or("unknown")
            )),
        }
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
    (
        ToolOutput {
            structured,
            text: parts.join("\n"),
            is_error,
            relay: None,
        },
        outcome,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(
            out.text,
            "one\n[image content from the upstream, not relayed by this gateway]\ntwo"
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
        assert_eq!(out.structured, Some(json!({ "r": 1 })));
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
}
