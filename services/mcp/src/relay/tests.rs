//! The relay validator's rules, each with a passing and a refused case in
//! every era where it differs, plus property tests: arbitrary JSON never
//! panics it, generated well-formed conversations pass, and one broken
//! pairing in them is refused.

use std::collections::BTreeMap;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::seal::*;
use super::*;
use crate::code;

const OLDEST: Revision = Revision::V2025_03_26;
const OLD: Revision = Revision::V2025_06_18;
const NEW: Revision = Revision::V2025_11_25;
const MODERN: Revision = Revision::V2026_07_28;

fn raw(value: &Value) -> Box<RawValue> {
    RawValue::from_string(value.to_string()).unwrap()
}

fn eras(agent: Revision, upstream: Revision) -> Eras {
    Eras::new(agent, upstream)
}

fn caps() -> AgentCapabilities {
    AgentCapabilities {
        sampling: true,
        sampling_tools: true,
        sampling_context: true,
        elicitation_form: true,
        elicitation_url: true,
        roots: true,
    }
}

fn request(
    eras: Eras,
    caps: &AgentCapabilities,
    method: &str,
    params: Value,
) -> Result<Expectation, RelayRefusal> {
    check_request(eras, caps, method, Some(&raw(&params)))
}

fn sampling(eras: Eras, params: Value) -> Result<Expectation, RelayRefusal> {
    request(eras, &caps(), "sampling/createMessage", params)
}

fn answer(eras: Eras, expected: &Expectation, result: Value) -> Result<(), RelayRefusal> {
    check_answer(eras, expected, &raw(&result))
}

/// The rule and the party a refusal names; panics on success.
fn refused<T: std::fmt::Debug>(result: Result<T, RelayRefusal>) -> (RelayRule, Party) {
    match result {
        Ok(ok) => panic!("expected a refusal, got {ok:?}"),
        Err(refusal) => {
            assert_eq!(refusal.rpc_error().code, code::INVALID_PARAMS);
            (refusal.rule, refusal.sender)
        }
    }
}

fn text(t: &str) -> Value {
    json!({"type": "text", "text": t})
}

fn tool_use(id: &str) -> Value {
    json!({"type": "tool_use", "id": id, "name": "get_weather", "input": {"city": "Paris"}})
}

fn tool_result(id: &str) -> Value {
    json!({"type": "tool_result", "toolUseId": id, "content": [text("18C")]})
}

fn params(messages: Value) -> Value {
    json!({"messages": messages, "maxTokens": 100})
}

fn with_tools(messages: Value) -> Value {
    json!({
        "messages": messages,
        "maxTokens": 100,
        "tools": [{"name": "get_weather", "inputSchema": {"type": "object"}}]
    })
}

fn user(content: Value) -> Value {
    json!({"role": "user", "content": content})
}

fn assistant(content: Value) -> Value {
    json!({"role": "assistant", "content": content})
}

fn plain() -> Value {
    params(json!([user(text("hello"))]))
}

const NO_TOOLS: Expectation = Expectation::CreateMessage { tools: false };
const TOOLS: Expectation = Expectation::CreateMessage { tools: true };

fn result_text() -> Value {
    json!({"role": "assistant", "content": text("hi"), "model": "m-1", "stopReason": "endTurn"})
}

/// Every pair of revisions, agent first.
fn all_pairs() -> Vec<Eras> {
    Revision::ALL
        .into_iter()
        .flat_map(|a| Revision::ALL.into_iter().map(move |u| eras(a, u)))
        .collect()
}

#[derive(Deserialize)]
struct Wire<'a> {
    #[serde(borrow)]
    method: Option<&'a RawValue>,
    #[serde(borrow)]
    params: Option<&'a RawValue>,
    #[serde(borrow)]
    result: Option<&'a RawValue>,
}

#[test]
fn well_formed_exchanges_relay_byte_identical_in_every_era_pair() {
    // Odd spacing, key order and escapes: anything that re-serialised
    // would differ. The validator only reads; what is relayed is the body.
    let request_body = "{\"params\":{ \"maxTokens\" : 64, \"messages\":[{\"content\":{\"text\":\"caf\\u00e9 \\ud83d\\ude00\",\"type\":\"text\"},\"role\":\"user\"}],\"modelPreferences\":{\"hints\":[{\"name\":\"claude\"}]}},\"id\":7,\"method\":\"sampling/createMessage\",\"jsonrpc\":\"2.0\"}";
    let result_body = "{\"jsonrpc\":\"2.0\",\"id\":\"relay.x\",\"result\":{\"stopReason\":\"endTurn\",\"model\" :\"gpt-x\",\"role\":\"assistant\",\"content\":{\"type\":\"text\",\"text\":\"1.0e2\"}}}";
    let elicit_body = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"elicitation/create\",\"params\":{\"message\":\"Name?\",\"requestedSchema\":{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"string\"}},\"required\":[\"n\"]}}}";
    let elicit_answer = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"action\":\"accept\",\"content\":{\"n\":\"Ada\"}}}";
    let roots_answer = "{\"result\":{\"roots\":[{\"uri\":\"file:///work\",\"name\":\"w\"}]},\"id\":2,\"jsonrpc\":\"2.0\"}";
    for pair in all_pairs() {
        let wire: Wire<'_> = serde_json::from_str(request_body).unwrap();
        let method: String = serde_json::from_str(wire.method.unwrap().get()).unwrap();
        let expected = check_request(pair, &caps(), &method, wire.params).unwrap();
        // What was checked is a verbatim slice of the body: the relay
        // forwards the body, so nothing it says can differ from it.
        assert!(request_body.contains(wire.params.unwrap().get()));
        let back: Wire<'_> = serde_json::from_str(result_body).unwrap();
        check_answer(pair, &expected, back.result.unwrap())
            .unwrap_or_else(|r| panic!("{pair:?}: {r}"));
        let start = result_body.find("\"result\":").unwrap() + "\"result\":".len();
        assert_eq!(
            back.result.unwrap().get(),
            &result_body[start..result_body.len() - 1]
        );

        let roots = check_request(pair, &caps(), "roots/list", None).unwrap();
        let wire: Wire<'_> = serde_json::from_str(roots_answer).unwrap();
        check_answer(pair, &roots, wire.result.unwrap()).unwrap();

        let both_elicit = pair.agent.has_elicitation() && pair.upstream.has_elicitation();
        let wire: Wire<'_> = serde_json::from_str(elicit_body).unwrap();
        match check_request(pair, &caps(), "elicitation/create", wire.params) {
            Ok(expected) => {
                assert!(both_elicit);
                let wire: Wire<'_> = serde_json::from_str(elicit_answer).unwrap();
                check_answer(pair, &expected, wire.result.unwrap()).unwrap();
            }
            Err(refusal) => {
                assert!(!both_elicit, "{pair:?}: {refusal}");
                assert_eq!(refusal.rule, RelayRule::Revision);
            }
        }
    }
}

#[test]
fn content_is_one_block_before_2025_11_25_and_a_block_or_an_array_from_it() {
    let array = params(json!([user(json!([text("a"), text("b")]))]));
    for pair in all_pairs() {
        sampling(pair, plain()).unwrap_or_else(|r| panic!("{pair:?}: {r}"));
        let both = pair.agent >= NEW && pair.upstream >= NEW;
        match sampling(pair, array.clone()) {
            Ok(_) => assert!(both, "{pair:?}"),
            Err(r) => {
                assert!(!both, "{pair:?}: {r}");
                assert_eq!((r.rule, r.sender), (RelayRule::Revision, Party::Upstream));
            }
        }
    }
    // An agent on 2025-06-18 cannot decode an array: refused, naming it.
    let refusal = sampling(eras(OLD, NEW), array).unwrap_err();
    assert!(
        refusal.message().contains("2025-06-18 (the agent's)"),
        "{refusal}"
    );
    assert!(refusal.message().contains("not reshaped"));
    // The same in results, from the agent.
    let array_result = json!({"role": "assistant", "model": "m", "content": [text("a")]});
    answer(eras(NEW, MODERN), &NO_TOOLS, array_result.clone()).unwrap();
    assert_eq!(
        refused(answer(eras(NEW, OLD), &NO_TOOLS, array_result.clone())),
        (RelayRule::Revision, Party::Agent)
    );
    assert_eq!(
        refused(answer(eras(OLD, NEW), &NO_TOOLS, array_result)),
        (RelayRule::Revision, Party::Agent)
    );
}

#[test]
fn content_blocks_are_checked() {
    for pair in [eras(OLDEST, OLDEST), eras(NEW, MODERN)] {
        for good in [
            text("x"),
            json!({"type": "image", "data": "aGk=", "mimeType": "image/png"}),
            json!({"type": "audio", "data": "aGk=", "mimeType": "audio/wav", "annotations": {"priority": 1}}),
        ] {
            sampling(pair, params(json!([user(good)]))).unwrap();
        }
        for bad in [
            json!({"type": "text"}),
            json!({"type": "text", "text": 5}),
            json!({"type": "image", "data": "aGk="}),
            json!({"type": "video", "data": "x"}),
            json!("just text"),
        ] {
            assert_eq!(
                refused(sampling(pair, params(json!([user(bad)])))).0,
                RelayRule::Content
            );
        }
        assert_eq!(
            refused(sampling(pair, params(json!([{"role": "user"}])))).0,
            RelayRule::Content
        );
    }
}

#[test]
fn tool_blocks_need_2025_11_25_on_both_sides() {
    let conversation = with_tools(json!([
        user(text("weather?")),
        assistant(tool_use("c1")),
        user(tool_result("c1")),
    ]));
    sampling(eras(NEW, NEW), conversation.clone()).unwrap();
    sampling(eras(MODERN, NEW), conversation.clone()).unwrap();
    let without_tools_param = params(json!([
        user(text("q")),
        assistant(tool_use("c1")),
        user(tool_result("c1"))
    ]));
    for pair in [eras(OLD, NEW), eras(NEW, OLD), eras(OLDEST, MODERN)] {
        assert_eq!(
            refused(sampling(pair, conversation.clone())).0,
            RelayRule::Revision
        );
        assert_eq!(
            refused(sampling(pair, without_tools_param.clone())).0,
            RelayRule::Revision
        );
    }
}

#[test]
fn a_tool_result_message_holds_only_tool_result_blocks() {
    for pair in [eras(NEW, NEW), eras(MODERN, MODERN)] {
        let pure = params(json!([
            user(text("q")),
            assistant(json!([tool_use("a"), tool_use("b")])),
            user(json!([tool_result("a"), tool_result("b")])),
        ]));
        sampling(pair, pure).unwrap();
        let mixed = params(json!([
            user(text("q")),
            assistant(tool_use("a")),
            user(json!([tool_result("a"), text("and also")])),
        ]));
        assert_eq!(
            refused(sampling(pair, mixed)),
            (RelayRule::MixedToolResults, Party::Upstream)
        );
    }
}

#[test]
fn every_tool_result_pairs_with_a_tool_use_of_the_preceding_assistant_message() {
    let pair = eras(NEW, MODERN);
    let unpaired = params(json!([
        user(text("q")),
        assistant(tool_use("a")),
        user(tool_result("zzz"))
    ]));
    assert_eq!(
        refused(sampling(pair, unpaired)).0,
        RelayRule::UnpairedToolResult
    );
    let twice = params(json!([
        user(text("q")),
        assistant(tool_use("a")),
        user(json!([tool_result("a"), tool_result("a")])),
    ]));
    assert_eq!(
        refused(sampling(pair, twice)).0,
        RelayRule::UnpairedToolResult
    );
    // The pairing is with the *preceding* message, not any earlier one.
    let stale = params(json!([
        user(text("q")),
        assistant(tool_use("a")),
        user(tool_result("a")),
        assistant(text("ok")),
        user(tool_result("a")),
    ]));
    assert_eq!(
        refused(sampling(pair, stale)).0,
        RelayRule::UnpairedToolResult
    );
    let first = params(json!([user(tool_result("a"))]));
    assert_eq!(
        refused(sampling(pair, first)).0,
        RelayRule::UnpairedToolResult
    );
    let good = params(json!([
        user(text("q")),
        assistant(tool_use("a")),
        user(tool_result("a")),
        assistant(text("18C"))
    ]));
    sampling(pair, good).unwrap();
}

#[test]
fn every_tool_use_is_answered_by_the_next_message() {
    let pair = eras(MODERN, NEW);
    let half = params(json!([
        user(text("q")),
        assistant(json!([tool_use("a"), tool_use("b")])),
        user(tool_result("a")),
    ]));
    assert_eq!(
        refused(sampling(pair, half)).0,
        RelayRule::UnansweredToolUse
    );
    let last = params(json!([user(text("q")), assistant(tool_use("a"))]));
    assert_eq!(
        refused(sampling(pair, last)).0,
        RelayRule::UnansweredToolUse
    );
    let repeated = params(json!([
        user(text("q")),
        assistant(json!([tool_use("a"), tool_use("a")])),
        user(tool_result("a")),
    ]));
    assert_eq!(refused(sampling(pair, repeated)).0, RelayRule::Content);
}

#[test]
fn roles_are_user_or_assistant_and_tool_blocks_sit_with_theirs() {
    for pair in [eras(OLD, OLD), eras(MODERN, MODERN)] {
        assert_eq!(
            refused(sampling(
                pair,
                params(json!([{"role": "system", "content": text("x")}]))
            ))
            .0,
            RelayRule::Role
        );
        assert_eq!(
            refused(sampling(pair, params(json!([{"content": text("x")}])))).0,
            RelayRule::Role
        );
        sampling(
            pair,
            params(json!([assistant(text("prefill")), user(text("go"))])),
        )
        .unwrap();
    }
    let pair = eras(NEW, NEW);
    assert_eq!(
        refused(sampling(pair, params(json!([user(tool_use("a"))])))).0,
        RelayRule::Role
    );
    assert_eq!(
        refused(sampling(
            pair,
            params(json!([
                user(text("q")),
                assistant(tool_use("a")),
                assistant(tool_result("a"))
            ]))
        ))
        .0,
        RelayRule::Role
    );
}

#[test]
fn tools_and_tool_choice_need_the_agents_sampling_tools_capability() {
    let conversation = json!([user(text("weather?"))]);
    let no_tools_cap = AgentCapabilities {
        sampling_tools: false,
        ..caps()
    };
    for pair in [
        eras(NEW, NEW),
        eras(MODERN, NEW),
        eras(NEW, MODERN),
        eras(MODERN, MODERN),
    ] {
        assert_eq!(
            sampling(pair, with_tools(conversation.clone())).unwrap(),
            TOOLS
        );
        let result = request(
            pair,
            &no_tools_cap,
            "sampling/createMessage",
            with_tools(conversation.clone()),
        );
        assert_eq!(refused(result), (RelayRule::Undeclared, Party::Upstream));
        let choice =
            json!({"messages": conversation, "maxTokens": 5, "toolChoice": {"mode": "auto"}});
        assert_eq!(
            refused(request(
                pair,
                &no_tools_cap,
                "sampling/createMessage",
                choice.clone()
            ))
            .0,
            RelayRule::Undeclared
        );
        assert_eq!(sampling(pair, choice).unwrap(), NO_TOOLS);
        let bad_choice =
            json!({"messages": conversation, "maxTokens": 5, "toolChoice": {"mode": "always"}});
        assert_eq!(refused(sampling(pair, bad_choice)).0, RelayRule::Malformed);
        let bad_tool = json!({"messages": conversation, "maxTokens": 5, "tools": [{"name": "x"}]});
        assert_eq!(refused(sampling(pair, bad_tool)).0, RelayRule::Malformed);
    }
    // Before 2025-11-25 there are no tools to declare.
    for pair in [eras(OLD, NEW), eras(NEW, OLD)] {
        assert_eq!(
            refused(sampling(pair, with_tools(conversation.clone()))).0,
            RelayRule::Revision
        );
    }
}

#[test]
fn max_tokens_is_required() {
    for pair in [eras(OLDEST, OLD), eras(MODERN, NEW)] {
        let missing = json!({"messages": [user(text("q"))]});
        assert_eq!(
            refused(sampling(pair, missing)),
            (RelayRule::MaxTokens, Party::Upstream)
        );
        let string = json!({"messages": [user(text("q"))], "maxTokens": "100"});
        assert_eq!(refused(sampling(pair, string)).0, RelayRule::MaxTokens);
        sampling(pair, plain()).unwrap();
    }
}

#[test]
fn messages_are_a_non_empty_array() {
    for pair in [eras(OLD, OLDEST), eras(MODERN, MODERN)] {
        assert_eq!(
            refused(sampling(pair, params(json!([])))).0,
            RelayRule::EmptyMessages
        );
        assert_eq!(
            refused(sampling(pair, json!({"maxTokens": 1}))).0,
            RelayRule::Malformed
        );
        assert_eq!(
            refused(sampling(pair, json!({"messages": {}, "maxTokens": 1}))).0,
            RelayRule::Malformed
        );
        assert_eq!(
            refused(check_request(pair, &caps(), "sampling/createMessage", None)).0,
            RelayRule::Malformed
        );
    }
}

#[test]
fn optional_sampling_params_have_their_types() {
    let pair = eras(NEW, OLD);
    let mut good = plain();
    good["systemPrompt"] = json!("be brief");
    good["temperature"] = json!(0.2);
    good["stopSequences"] = json!(["\n"]);
    good["includeContext"] = json!("none");
    good["metadata"] = json!({"k": 1});
    sampling(pair, good).unwrap();
    for (key, bad) in [
        ("systemPrompt", json!(1)),
        ("temperature", json!("hot")),
        ("stopSequences", json!([1])),
        ("includeContext", json!("everything")),
        ("metadata", json!([])),
        ("modelPreferences", json!("fast")),
    ] {
        let mut p = plain();
        p[key] = bad;
        assert_eq!(refused(sampling(pair, p)).0, RelayRule::Malformed, "{key}");
    }
}

#[test]
fn requests_the_agent_did_not_declare_are_refused_to_the_upstream_at_once() {
    let none = AgentCapabilities::default();
    for pair in [eras(OLD, OLD), eras(MODERN, MODERN)] {
        assert_eq!(
            refused(request(pair, &none, "sampling/createMessage", plain())),
            (RelayRule::Undeclared, Party::Upstream)
        );
        assert_eq!(
            refused(check_request(pair, &none, "roots/list", None)),
            (RelayRule::Undeclared, Party::Upstream)
        );
        let form = json!({"message": "m", "requestedSchema": {"type": "object", "properties": {}}});
        assert_eq!(
            refused(request(pair, &none, "elicitation/create", form)),
            (RelayRule::Undeclared, Party::Upstream)
        );
    }
    // Declared capabilities read from the wire decide the same way.
    let declared = AgentCapabilities::from_raw(OLD, &raw(&json!({"roots": {}})));
    assert!(check_request(eras(OLD, OLD), &declared, "roots/list", None).is_ok());
    assert_eq!(
        refused(request(
            eras(OLD, OLD),
            &declared,
            "sampling/createMessage",
            plain()
        ))
        .0,
        RelayRule::Undeclared
    );
}

#[test]
fn unknown_methods_are_refused() {
    let (rule, party) = refused(check_request(eras(NEW, NEW), &caps(), "tools/call", None));
    assert_eq!((rule, party), (RelayRule::Method, Party::Upstream));
}

#[test]
fn a_sampling_result_carries_role_model_and_era_legal_content() {
    for pair in [eras(OLDEST, NEW), eras(NEW, NEW), eras(MODERN, OLD)] {
        answer(pair, &NO_TOOLS, result_text()).unwrap();
        let mut no_role = result_text();
        no_role.as_object_mut().unwrap().remove("role");
        assert_eq!(
            refused(answer(pair, &NO_TOOLS, no_role)),
            (RelayRule::ResultRole, Party::Agent)
        );
        let mut no_model = result_text();
        no_model.as_object_mut().unwrap().remove("model");
        assert_eq!(
            refused(answer(pair, &NO_TOOLS, no_model)),
            (RelayRule::ResultModel, Party::Agent)
        );
        let mut bad_model = result_text();
        bad_model["model"] = json!(null);
        assert_eq!(
            refused(answer(pair, &NO_TOOLS, bad_model)).0,
            RelayRule::ResultModel
        );
        let mut no_content = result_text();
        no_content.as_object_mut().unwrap().remove("content");
        assert_eq!(
            refused(answer(pair, &NO_TOOLS, no_content)).0,
            RelayRule::Content
        );
        let mut bad_stop = result_text();
        bad_stop["stopReason"] = json!(3);
        assert_eq!(
            refused(answer(pair, &NO_TOOLS, bad_stop)).0,
            RelayRule::Malformed
        );
        let mut custom_stop = result_text();
        custom_stop["stopReason"] = json!("provider_specific");
        answer(pair, &NO_TOOLS, custom_stop).unwrap();
    }
}

#[test]
fn a_model_other_than_the_requests_hint_passes() {
    let mut p = plain();
    p["modelPreferences"] =
        json!({"hints": [{"name": "claude-3-5-sonnet"}], "intelligencePriority": 0.9});
    for pair in [eras(OLD, OLD), eras(MODERN, NEW)] {
        let expected = sampling(pair, p.clone()).unwrap();
        let mut result = result_text();
        result["model"] = json!("gpt-4o-mini");
        answer(pair, &expected, result).unwrap();
    }
}

#[test]
fn tool_use_in_a_result_needs_a_request_that_carried_tools() {
    for pair in [eras(NEW, NEW), eras(MODERN, MODERN), eras(NEW, MODERN)] {
        let uses = json!({"role": "assistant", "model": "m", "content": [tool_use("c")], "stopReason": "toolUse"});
        answer(pair, &TOOLS, uses.clone()).unwrap();
        assert_eq!(
            refused(answer(pair, &NO_TOOLS, uses)),
            (RelayRule::ToolUseUnrequested, Party::Agent)
        );
        let stop_only = json!({"role": "assistant", "model": "m", "content": text("x"), "stopReason": "toolUse"});
        assert_eq!(
            refused(answer(pair, &NO_TOOLS, stop_only.clone())).0,
            RelayRule::ToolUseUnrequested
        );
        answer(pair, &TOOLS, stop_only).unwrap();
        let single = json!({"role": "assistant", "model": "m", "content": tool_use("c")});
        assert_eq!(
            refused(answer(pair, &NO_TOOLS, single)).0,
            RelayRule::ToolUseUnrequested
        );
        let result = json!({"role": "user", "model": "m", "content": tool_result("c")});
        assert_eq!(
            refused(answer(pair, &TOOLS, result)).0,
            RelayRule::UnpairedToolResult
        );
        let user_use = json!({"role": "user", "model": "m", "content": tool_use("c")});
        assert_eq!(refused(answer(pair, &TOOLS, user_use)).0, RelayRule::Role);
    }
    // Before 2025-11-25 a tool_use block is no content at all.
    let uses = json!({"role": "assistant", "model": "m", "content": tool_use("c")});
    assert_eq!(
        refused(answer(eras(OLD, NEW), &TOOLS, uses)).0,
        RelayRule::Revision
    );
}

fn form(properties: Value) -> Value {
    json!({"message": "Tell me", "requestedSchema": {"type": "object", "properties": properties}})
}

fn elicit(pair: Eras, params: Value) -> Result<Expectation, RelayRefusal> {
    request(pair, &caps(), "elicitation/create", params)
}

#[test]
fn elicitation_needs_2025_06_18_on_both_sides_and_the_form_capability() {
    let p = form(json!({"name": {"type": "string"}}));
    for pair in [
        eras(OLD, OLD),
        eras(NEW, OLD),
        eras(MODERN, NEW),
        eras(MODERN, MODERN),
    ] {
        elicit(pair, p.clone()).unwrap();
    }
    for pair in [eras(OLDEST, NEW), eras(NEW, OLDEST)] {
        assert_eq!(
            refused(elicit(pair, p.clone())),
            (RelayRule::Revision, Party::Upstream)
        );
    }
    let url_only = AgentCapabilities {
        elicitation_form: false,
        ..caps()
    };
    assert_eq!(
        refused(request(eras(NEW, NEW), &url_only, "elicitation/create", p)).0,
        RelayRule::Undeclared
    );
    assert_eq!(
        refused(elicit(
            eras(NEW, NEW),
            json!({"requestedSchema": {"type": "object", "properties": {}}})
        ))
        .0,
        RelayRule::Malformed
    );
    assert_eq!(
        refused(elicit(eras(NEW, NEW), json!({"message": "m"}))).0,
        RelayRule::ElicitSchema
    );
}

#[test]
fn the_requested_schema_is_the_restricted_flat_form() {
    let flat = form(json!({
        "name": {"type": "string", "title": "Name", "minLength": 1, "maxLength": 40},
        "email": {"type": "string", "format": "email", "description": "work address"},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "score": {"type": "number"},
        "ok": {"type": "boolean", "default": true},
        "color": {"type": "string", "enum": ["red", "green"], "enumNames": ["Red", "Green"]}
    }));
    for pair in [eras(OLD, OLD), eras(MODERN, MODERN)] {
        elicit(pair, flat.clone()).unwrap();
        for bad in [
            json!({"address": {"type": "object", "properties": {"city": {"type": "string"}}}}),
            json!({"tags": {"type": "string", "properties": {}}}),
            json!({"ref": {"$ref": "#/$defs/x"}}),
            json!({"either": {"type": "string", "anyOf": [{"const": "a"}]}}),
            json!({"n": {"type": "null"}}),
            json!({"n": {"title": "no type"}}),
            json!({"n": "string"}),
            json!({"e": {"type": "string", "enum": [1, 2]}}),
        ] {
            assert_eq!(
                refused(elicit(pair, form(bad.clone()))).0,
                RelayRule::ElicitSchema,
                "{bad}"
            );
        }
        let not_object =
            json!({"message": "m", "requestedSchema": {"type": "array", "properties": {}}});
        assert_eq!(refused(elicit(pair, not_object)).0, RelayRule::ElicitSchema);
        let no_props = json!({"message": "m", "requestedSchema": {"type": "object"}});
        assert_eq!(refused(elicit(pair, no_props)).0, RelayRule::ElicitSchema);
        let unknown_required = json!({"message": "m", "requestedSchema": {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]}});
        assert_eq!(
            refused(elicit(pair, unknown_required)).0,
            RelayRule::ElicitSchema
        );
        let top_nesting = json!({"message": "m", "requestedSchema": {"type": "object", "properties": {}, "additionalProperties": {"type": "string"}}});
        assert_eq!(
            refused(elicit(pair, top_nesting)).0,
            RelayRule::ElicitSchema
        );
    }
}

fn titled() -> Value {
    json!({"type": "string", "oneOf": [{"const": "r", "title": "Red"}, {"const": "g", "title": "Green"}]})
}

fn multi() -> Value {
    json!({"type": "array", "minItems": 1, "items": {"type": "string", "enum": ["a", "b", "c"]}, "default": ["a"]})
}

fn multi_titled() -> Value {
    json!({"type": "array", "items": {"anyOf": [{"const": "x", "title": "X"}, {"const": "y", "title": "Y"}]}})
}

#[test]
fn titled_and_multi_select_fields_need_2025_11_25_on_both_sides() {
    for field in [titled(), multi(), multi_titled()] {
        let p = form(json!({"f": field}));
        for pair in [eras(NEW, NEW), eras(MODERN, NEW), eras(NEW, MODERN)] {
            elicit(pair, p.clone()).unwrap();
        }
        for pair in [eras(OLD, NEW), eras(MODERN, OLD)] {
            assert_eq!(
                refused(elicit(pair, p.clone())).0,
                RelayRule::ElicitSchema,
                "{pair:?} {p}"
            );
        }
    }
    let bad_items = form(json!({"f": {"type": "array", "items": {"type": "object"}}}));
    assert_eq!(
        refused(elicit(eras(NEW, NEW), bad_items)).0,
        RelayRule::ElicitSchema
    );
    let bad_titles = form(json!({"f": {"type": "string", "oneOf": [{"const": "r"}]}}));
    assert_eq!(
        refused(elicit(eras(NEW, NEW), bad_titles)).0,
        RelayRule::ElicitSchema
    );
}

#[test]
fn url_mode_is_2025_11_25_on_both_sides_and_its_own_capability() {
    let with_id = json!({"mode": "url", "message": "Sign in", "url": "https://example.com/x", "elicitationId": "e1"});
    let without_id = json!({"mode": "url", "message": "Sign in", "url": "https://example.com/x"});
    assert_eq!(
        elicit(eras(NEW, NEW), with_id.clone()).unwrap(),
        Expectation::Elicit { schema: None }
    );
    elicit(eras(MODERN, NEW), with_id.clone()).unwrap();
    elicit(eras(MODERN, MODERN), without_id.clone()).unwrap();
    // 2025-11-25 requires `elicitationId`, 2026-07-28 dropped it: a
    // modern upstream's URL request cannot reach a 2025-11-25 agent.
    assert_eq!(
        refused(elicit(eras(NEW, MODERN), without_id.clone())).0,
        RelayRule::Revision
    );
    assert_eq!(
        refused(elicit(eras(NEW, NEW), without_id)).0,
        RelayRule::Revision
    );
    for pair in [eras(OLD, NEW), eras(NEW, OLD)] {
        assert_eq!(
            refused(elicit(pair, with_id.clone())).0,
            RelayRule::Revision
        );
    }
    let form_only = AgentCapabilities {
        elicitation_url: false,
        ..caps()
    };
    assert_eq!(
        refused(request(
            eras(NEW, NEW),
            &form_only,
            "elicitation/create",
            with_id
        ))
        .0,
        RelayRule::Undeclared
    );
    let no_url = json!({"mode": "url", "message": "m", "elicitationId": "e"});
    assert_eq!(
        refused(elicit(eras(NEW, NEW), no_url)).0,
        RelayRule::Malformed
    );
    let odd = json!({"mode": "voice", "message": "m"});
    assert_eq!(refused(elicit(eras(NEW, NEW), odd)).0, RelayRule::Malformed);
}

fn schema_of(pair: Eras, properties: Value, required: Value) -> Expectation {
    let p = json!({"message": "m", "requestedSchema": {"type": "object", "properties": properties, "required": required}});
    elicit(pair, p).unwrap()
}

#[test]
fn an_accept_answers_content_that_matches_the_requested_schema() {
    for pair in [eras(OLD, OLD), eras(NEW, MODERN)] {
        let expected = schema_of(
            pair,
            json!({"name": {"type": "string", "maxLength": 5}, "age": {"type": "integer", "minimum": 0}, "color": {"type": "string", "enum": ["red", "green"]}}),
            json!(["name"]),
        );
        answer(
            pair,
            &expected,
            json!({"action": "accept", "content": {"name": "Ada", "age": 36, "color": "red"}}),
        )
        .unwrap();
        // A field the schema does not name was accepted here before issue
        // 28 (item 9); it is refused now, see
        // `an_accept_naming_a_field_the_schema_does_not_is_refused`.
        for bad in [
            json!({"age": 3}),
            json!({"name": "much too long"}),
            json!({"name": "Ada", "age": -1}),
            json!({"name": "Ada", "age": 1.5}),
            json!({"name": "Ada", "color": "blue"}),
            json!({"name": {"first": "Ada"}}),
            json!({"name": "Ada", "extra": null}),
            json!("Ada"),
        ] {
            let result = answer(
                pair,
                &expected,
                json!({"action": "accept", "content": bad.clone()}),
            );
            assert_eq!(
                refused(result),
                (RelayRule::ElicitAnswer, Party::Agent),
                "{bad}"
            );
        }
        let missing = answer(pair, &expected, json!({"action": "accept"}));
        assert_eq!(refused(missing).0, RelayRule::ElicitAnswer);
        let optional = schema_of(pair, json!({"note": {"type": "string"}}), json!([]));
        answer(pair, &optional, json!({"action": "accept"})).unwrap();
    }
    // Titled options and multi-select answers (2025-11-25 on both sides).
    let pair = eras(MODERN, NEW);
    let expected = schema_of(
        pair,
        json!({"c": titled(), "m": multi(), "t": multi_titled()}),
        json!([]),
    );
    answer(
        pair,
        &expected,
        json!({"action": "accept", "content": {"c": "r", "m": ["a", "c"], "t": ["y"]}}),
    )
    .unwrap();
    for bad in [
        json!({"c": "Red"}),
        json!({"m": ["z"]}),
        json!({"m": []}),
        json!({"t": ["x", "q"]}),
        json!({"m": [1]}),
    ] {
        let result = answer(
            pair,
            &expected,
            json!({"action": "accept", "content": bad.clone()}),
        );
        assert_eq!(refused(result).0, RelayRule::ElicitAnswer, "{bad}");
    }
    // A string array is no answer before 2025-11-25.
    let old = schema_of(eras(OLD, OLD), json!({"a": {"type": "string"}}), json!([]));
    let result = answer(
        eras(OLD, OLD),
        &old,
        json!({"action": "accept", "content": {"a": ["x"]}}),
    );
    assert_eq!(refused(result).0, RelayRule::ElicitAnswer);
}

#[test]
fn decline_and_cancel_carry_no_content() {
    for pair in [eras(OLD, NEW), eras(MODERN, MODERN)] {
        let expected = schema_of(pair, json!({"a": {"type": "string"}}), json!(["a"]));
        for action in ["decline", "cancel"] {
            answer(pair, &expected, json!({"action": action})).unwrap();
            let with = answer(
                pair,
                &expected,
                json!({"action": action, "content": {"a": "x"}}),
            );
            assert_eq!(refused(with), (RelayRule::ElicitAnswer, Party::Agent));
        }
        assert_eq!(
            refused(answer(pair, &expected, json!({"action": "maybe"}))).0,
            RelayRule::ElicitAnswer
        );
        assert_eq!(
            refused(answer(pair, &expected, json!({}))).0,
            RelayRule::ElicitAnswer
        );
    }
    let url = Expectation::Elicit { schema: None };
    answer(eras(NEW, NEW), &url, json!({"action": "accept"})).unwrap();
    let with = answer(
        eras(NEW, NEW),
        &url,
        json!({"action": "accept", "content": {"a": "x"}}),
    );
    assert_eq!(refused(with).0, RelayRule::ElicitAnswer);
}

#[test]
fn roots_list_results_are_well_formed() {
    for pair in [eras(OLDEST, OLDEST), eras(NEW, MODERN), eras(MODERN, OLD)] {
        let expected = check_request(
            pair,
            &caps(),
            "roots/list",
            Some(&raw(&json!({"_meta": {}}))),
        )
        .unwrap();
        answer(pair, &expected, json!({"roots": []})).unwrap();
        answer(
            pair,
            &expected,
            json!({"roots": [{"uri": "file:///a", "name": "a", "_meta": {}}]}),
        )
        .unwrap();
        for bad in [
            json!({}),
            json!({"roots": {}}),
            json!({"roots": [{"uri": "https://example.com"}]}),
            json!({"roots": [{"name": "no uri"}]}),
        ] {
            assert_eq!(
                refused(answer(pair, &expected, bad.clone())),
                (RelayRule::Roots, Party::Agent),
                "{bad}"
            );
        }
        let bad_name = answer(
            pair,
            &expected,
            json!({"roots": [{"uri": "file:///a", "name": 1}]}),
        );
        assert_eq!(refused(bad_name).0, RelayRule::Malformed);
        let bad_params = check_request(pair, &caps(), "roots/list", Some(&raw(&json!([]))));
        assert_eq!(refused(bad_params).0, RelayRule::Malformed);
    }
}

#[test]
fn refusals_are_invalid_params_naming_paths_never_values() {
    let secret = "sk-live-do-not-log";
    let mixed = params(json!([
        user(text("q")),
        assistant(tool_use("a")),
        user(json!([tool_result("a"), text(secret)]))
    ]));
    let refusal = sampling(eras(NEW, NEW), mixed).unwrap_err();
    let error = refusal.rpc_error();
    assert_eq!(error.code, code::INVALID_PARAMS);
    assert!(
        error
            .message
            .starts_with("Invalid params: relayed sampling/createMessage from the upstream:"),
        "{}",
        error.message
    );
    assert!(error.message.contains("params.messages[2]"));
    assert!(!error.message.contains(secret));
    let expected = schema_of(
        eras(NEW, NEW),
        json!({"pin": {"type": "string", "maxLength": 4}}),
        json!([]),
    );
    let refusal = answer(
        eras(NEW, NEW),
        &expected,
        json!({"action": "accept", "content": {"pin": secret}}),
    )
    .unwrap_err();
    assert!(
        refusal.message().contains("`result.content`") && refusal.message().contains("pin"),
        "{refusal}"
    );
    assert!(!refusal.to_string().contains(secret));
    let peer = refusal.peer_error().unwrap();
    assert_eq!(peer.code, code::INTERNAL_ERROR);
    assert!(peer.message.contains("elicitation/create") && peer.message.contains("elicit_answer"));
    assert!(!peer.message.contains(secret));
    let upstream_refused = sampling(eras(NEW, NEW), params(json!([]))).unwrap_err();
    assert!(
        upstream_refused.peer_error().is_none(),
        "the agent never saw it"
    );
    assert_eq!(RelayRule::UnpairedToolResult.name(), "unpaired_tool_result");
}

#[test]
fn agent_errors_are_json_rpc_errors() {
    check_answer_error(&raw(
        &json!({"code": -1, "message": "User rejected sampling request"}),
    ))
    .unwrap();
    for bad in [
        json!({"message": "x"}),
        json!({"code": "x", "message": "m"}),
        json!({"code": 1}),
        json!([]),
    ] {
        assert_eq!(
            refused(check_answer_error(&raw(&bad))),
            (RelayRule::Malformed, Party::Agent)
        );
    }
}

#[test]
fn input_requests_and_responses_pair_by_key() {
    let pair = eras(MODERN, MODERN);
    let requests = json!({
        "weather": {"method": "sampling/createMessage", "params": plain()},
        "name": {"method": "elicitation/create", "params": form(json!({"n": {"type": "string"}}))},
        "where": {"method": "roots/list"}
    });
    let expected = check_input_requests(pair, &caps(), &raw(&requests)).unwrap();
    assert_eq!(expected.len(), 3);
    assert_eq!(expected["weather"], NO_TOOLS);
    let good = json!({
        "weather": result_text(),
        "name": {"action": "accept", "content": {"n": "Ada"}},
        "where": {"roots": []}
    });
    check_input_responses(pair, &expected, &raw(&good)).unwrap();
    let mut missing = good.clone();
    missing.as_object_mut().unwrap().remove("where");
    assert_eq!(
        refused(check_input_responses(pair, &expected, &raw(&missing))),
        (RelayRule::InputKeys, Party::Agent)
    );
    let mut extra = good.clone();
    extra["other"] = json!({});
    assert_eq!(
        refused(check_input_responses(pair, &expected, &raw(&extra))).0,
        RelayRule::InputKeys
    );
    let mut bad = good;
    bad["weather"] = json!({"role": "assistant", "content": text("x")});
    let refusal = check_input_responses(pair, &expected, &raw(&bad)).unwrap_err();
    assert_eq!(refusal.rule, RelayRule::ResultModel);
    assert!(
        refusal
            .message()
            .contains("inputResponses[\"weather\"].model"),
        "{refusal}"
    );
    // Each input request is checked like a relayed request, with its key.
    let bad_requests = json!({"k": {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 1}}});
    let refusal = check_input_requests(pair, &caps(), &raw(&bad_requests)).unwrap_err();
    assert_eq!(
        (refusal.rule, refusal.sender),
        (RelayRule::EmptyMessages, Party::Upstream)
    );
    assert!(
        refusal.message().starts_with("inputRequests[\"k\"]"),
        "{refusal}"
    );
    for bad in [
        json!({}),
        json!([]),
        json!({"k": {"params": {}}}),
        json!({"k": {"method": "tools/list"}}),
    ] {
        assert!(
            check_input_requests(pair, &caps(), &raw(&bad)).is_err(),
            "{bad}"
        );
    }
    // A 2026 upstream's request to a 2025 agent (the legacy shim) meets
    // the agent's era: no content arrays for 2025-06-18.
    let arrays = json!({"k": {"method": "sampling/createMessage", "params": params(json!([user(json!([text("a")]))]))}});
    assert_eq!(
        refused(check_input_requests(
            eras(OLD, MODERN),
            &caps(),
            &raw(&arrays)
        ))
        .0,
        RelayRule::Revision
    );
}

// ---- seal ----

fn sealer(byte: u8) -> RelaySealer {
    RelaySealer::new(
        crate::session::SessionKey::new(vec![byte; 32]).unwrap(),
        DEFAULT_TTL,
    )
}

fn digest(args: Value) -> ArgumentDigest {
    ArgumentDigest::of(Some(&raw(&args))).unwrap()
}

fn call<'a>(run: &'a str, tool: &'a str, args: ArgumentDigest) -> CallBinding<'a> {
    CallBinding {
        run,
        grant: "g1",
        upstream: "github",
        method: "tools/call",
        name: tool,
        arguments: args,
    }
}

fn state() -> RequestState {
    let mut expected = BTreeMap::new();
    expected.insert("weather".to_owned(), TOOLS);
    expected.insert(
        "name".to_owned(),
        Expectation::Elicit {
            schema: Some(json!({"type": "object", "properties": {"n": {"type": "string"}}})),
        },
    );
    let mut upstream_ids = BTreeMap::new();
    upstream_ids.insert("name".to_owned(), raw(&json!(12345678901234567890u64)));
    RequestState {
        upstream_state: Some("upstream-opaque-\u{e9}-state".into()),
        expected,
        round: 1,
        upstream_ids,
    }
}

#[test]
fn a_sealed_request_state_round_trips_bound_to_its_call() {
    let s = sealer(1);
    let args = digest(json!({"repo": "a/b", "n": 1}));
    let binding = call("run-1", "issue_read", args);
    let sealed = s.seal_state(&binding, &state(), 1_000).unwrap();
    assert!(
        sealed
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    );
    let opened = s.open_state(&sealed, &binding, 1_001).unwrap();
    assert_eq!(opened.state, state());
    assert_eq!(
        opened.state.upstream_ids["name"].get(),
        "12345678901234567890"
    );
    assert_eq!(opened.expires_at, 1_000 + DEFAULT_TTL.as_secs());
    // Key order of the arguments does not matter; their values do.
    let reordered = call(
        "run-1",
        "issue_read",
        digest(json!({"n": 1, "repo": "a/b"})),
    );
    assert!(s.open_state(&sealed, &reordered, 1_001).is_ok());
    for foreign in [
        call("run-2", "issue_read", args),
        call("run-1", "issue_write", args),
        call(
            "run-1",
            "issue_read",
            digest(json!({"repo": "a/c", "n": 1})),
        ),
        CallBinding {
            grant: "g2",
            ..binding
        },
        CallBinding {
            upstream: "jira",
            ..binding
        },
        CallBinding {
            method: "prompts/get",
            ..binding
        },
    ] {
        assert_eq!(
            s.open_state(&sealed, &foreign, 1_001),
            Err(SealRejection::Foreign)
        );
    }
    assert_eq!(
        s.open_state(&sealed, &binding, 1_000 + 600),
        Err(SealRejection::Expired)
    );
    assert_eq!(
        sealer(2).open_state(&sealed, &binding, 1_001),
        Err(SealRejection::Forged)
    );
    assert_eq!(
        s.open_state("nope!", &binding, 1_001),
        Err(SealRejection::Malformed)
    );
    assert_eq!(
        s.open_state("", &binding, 1_001),
        Err(SealRejection::Malformed)
    );
    let error = SealRejection::Foreign.rpc_error("requestState");
    assert_eq!(error.code, code::INVALID_PARAMS);
    assert!(error.message.contains("another run"));
}

#[test]
fn any_altered_byte_of_a_sealed_state_is_refused() {
    let s = sealer(1);
    let binding = call("run-1", "t", digest(json!({})));
    let sealed = s.seal_state(&binding, &state(), 1_000).unwrap();
    let mut bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(&sealed)
        .unwrap();
    use base64::Engine as _;
    for i in 0..bytes.len() {
        bytes[i] ^= 0x01;
        let tampered = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&bytes);
        let result = s.open_state(&tampered, &binding, 1_001);
        assert!(
            matches!(
                result,
                Err(SealRejection::Forged | SealRejection::Malformed)
            ),
            "byte {i}: {result:?}"
        );
        bytes[i] ^= 0x01;
    }
}

#[test]
fn relayed_ids_restore_the_upstream_id_exactly_and_are_bound_to_the_run() {
    let s = sealer(3);
    let run = RunBinding {
        run: "run-1",
        grant: "g1",
    };
    for upstream_id in ["7", "\"req-\\u00e9\"", "12345678901234567890123", "-0.5e3"] {
        let request = RelayedRequest {
            upstream: "everything".into(),
            upstream_id: RawValue::from_string(upstream_id.into()).unwrap(),
            expected: TOOLS,
            upstream_revision: Some("2025-11-25".into()),
            upstream_session: Some("upstream-session-1".into()),
        };
        let id = s.mint_id(&run, &request, 50).unwrap();
        assert!(id.starts_with(RELAYED_ID_PREFIX));
        let opened = s.open_id(&id, &run, 51).unwrap();
        assert_eq!(
            opened.request.upstream_id.get(),
            upstream_id,
            "restored byte for byte"
        );
        assert_eq!(opened.request, request);
        assert_eq!(opened.expires_at, 50 + 600);
        let other = RunBinding {
            run: "run-2",
            ..run
        };
        assert_eq!(
            s.open_id(&id, &other, 51).unwrap_err(),
            SealRejection::Foreign
        );
        assert_eq!(
            s.open_id(&id, &run, 50 + 600).unwrap_err(),
            SealRejection::Expired
        );
        assert_eq!(
            sealer(4).open_id(&id, &run, 51).unwrap_err(),
            SealRejection::Forged
        );
        let mut forged = id.clone();
        forged.push('A');
        assert!(s.open_id(&forged, &run, 51).is_err());
        // An id is no state, and a state no id.
        let as_state = id.trim_start_matches(RELAYED_ID_PREFIX);
        let binding = call("run-1", "t", digest(json!({})));
        assert_eq!(
            s.open_state(as_state, &binding, 51),
            Err(SealRejection::Malformed)
        );
        assert_eq!(
            s.open_id(&id[RELAYED_ID_PREFIX.len()..], &run, 51)
                .unwrap_err(),
            SealRejection::Malformed
        );
    }
}

#[test]
fn sealing_is_bounded_in_size_and_rounds() {
    let s = sealer(1);
    let binding = call("run-1", "t", digest(json!({})));
    let mut big = state();
    big.upstream_state = Some("x".repeat(MAX_STATE_CHARS));
    assert_eq!(
        s.seal_state(&binding, &big, 1),
        Err(SealRejection::TooLarge)
    );
    let mut last = state();
    last.round = MAX_ROUNDS;
    assert!(s.seal_state(&binding, &last, 1).is_ok());
    last.round = MAX_ROUNDS + 1;
    assert_eq!(
        s.seal_state(&binding, &last, 1),
        Err(SealRejection::TooManyRounds)
    );
    assert!(
        SealRejection::TooManyRounds
            .rpc_error("requestState")
            .message
            .contains("limit is 10")
    );
    assert_eq!(
        s.open_state(&"A".repeat(MAX_STATE_CHARS + 1), &binding, 1),
        Err(SealRejection::Malformed)
    );
    let huge = RelayedRequest {
        upstream: "u".into(),
        upstream_id: raw(&json!("i")),
        expected: Expectation::Elicit {
            schema: Some(json!({"description": "d".repeat(MAX_ID_CHARS)})),
        },
        upstream_revision: None,
        upstream_session: None,
    };
    let run = RunBinding {
        run: "r",
        grant: "g",
    };
    assert_eq!(
        s.mint_id(&run, &huge, 1).unwrap_err(),
        SealRejection::TooLarge
    );
}

#[test]
fn argument_digests_are_canonical() {
    assert_eq!(ArgumentDigest::of(None), Some(digest(json!({}))));
    assert_eq!(digest(json!({"a": {"x": 1, "y": [1, 2]}, "b": 2})), {
        let text = "{ \"b\":2, \"a\":{\"y\":[1,2],\"x\":1} }";
        ArgumentDigest::of(Some(&RawValue::from_string(text.into()).unwrap())).unwrap()
    });
    assert_ne!(digest(json!({"a": 1})), digest(json!({"a": "1"})));
    assert_ne!(digest(json!({"a": [1, 2]})), digest(json!({"a": [2, 1]})));
    assert!(ArgumentDigest::of(Some(&RawValue::from_string("[1]".into()).unwrap())).is_some());
}

// ---- properties ----

fn config(cases: u32) -> Config {
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i32>().prop_map(Value::from),
        prop_oneof![
            Just("text"),
            Just("tool_use"),
            Just("tool_result"),
            Just("user"),
            Just("assistant"),
            Just("object"),
            Just("string"),
            Just("accept"),
            Just("file:///x"),
        ]
        .prop_map(|s| Value::String(s.into())),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        let keys = prop_oneof![
            Just("messages"),
            Just("role"),
            Just("content"),
            Just("type"),
            Just("text"),
            Just("id"),
            Just("toolUseId"),
            Just("input"),
            Just("maxTokens"),
            Just("tools"),
            Just("model"),
            Just("stopReason"),
            Just("action"),
            Just("requestedSchema"),
            Just("properties"),
            Just("roots"),
            Just("uri"),
            Just("mode"),
        ];
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((keys.prop_map(String::from), inner), 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

#[test]
fn arbitrary_json_never_panics_the_validator() {
    let mut runner = TestRunner::new(config(256));
    let pairs = all_pairs();
    runner
        .run(
            &(json_value(), 0..pairs.len(), 0..3usize),
            |(value, pair, m)| {
                let pair = pairs[pair];
                let method = RelayMethod::ALL[m].as_str();
                let r = raw(&value);
                let expected = check_request(pair, &caps(), method, Some(&r));
                for expectation in [
                    NO_TOOLS,
                    TOOLS,
                    Expectation::ListRoots,
                    Expectation::Elicit {
                        schema: Some(value.clone()),
                    },
                ] {
                    let _ = check_answer(pair, &expectation, &r);
                }
                if let Ok(expectation) = expected {
                    let _ = check_answer(pair, &expectation, &r);
                }
                let _ = check_input_requests(pair, &caps(), &r);
                let _ = check_answer_error(&r);
                Ok(())
            },
        )
        .unwrap();
}

/// One turn of a generated conversation: plain text, or tool uses with
/// their results.
#[derive(Debug, Clone)]
enum Turn {
    Text,
    Tools(usize),
}

fn conversation(turns: &[Turn]) -> Vec<Value> {
    let mut messages = vec![user(text("start"))];
    let mut next_id = 0;
    for turn in turns {
        match turn {
            Turn::Text => {
                messages.push(assistant(text("thinking")));
                messages.push(user(text("more")));
            }
            Turn::Tools(n) => {
                let ids: Vec<String> = (0..*n)
                    .map(|_| {
                        next_id += 1;
                        format!("call_{next_id}")
                    })
                    .collect();
                messages.push(assistant(Value::Array(
                    ids.iter().map(|id| tool_use(id)).collect(),
                )));
                // Results in reverse order: pairing is by id, not position.
                messages.push(user(Value::Array(
                    ids.iter().rev().map(|id| tool_result(id)).collect(),
                )));
            }
        }
    }
    messages
}

#[test]
fn generated_well_formed_conversations_pass_and_one_broken_pair_is_refused() {
    let turn = prop_oneof![Just(Turn::Text), (1..4usize).prop_map(Turn::Tools)];
    let mut runner = TestRunner::new(config(128));
    runner
        .run(
            &(
                prop::collection::vec(turn, 1..6),
                any::<prop::sample::Index>(),
            ),
            |(turns, pick)| {
                let messages = conversation(&turns);
                for pair in [eras(NEW, NEW), eras(MODERN, NEW), eras(MODERN, MODERN)] {
                    let expected = sampling(pair, with_tools(Value::Array(messages.clone())));
                    prop_assert_eq!(expected, Ok(TOOLS));
                }
                let results: Vec<(usize, usize)> = messages
                    .iter()
                    .enumerate()
                    .filter_map(|(i, m)| m["content"].as_array().map(|blocks| (i, blocks.len())))
                    .filter(|(i, _)| messages[*i]["role"] == "user")
                    .flat_map(|(i, n)| (0..n).map(move |j| (i, j)))
                    .collect();
                if !results.is_empty() {
                    let (i, j) = results[pick.index(results.len())];
                    let mut broken = messages.clone();
                    broken[i]["content"][j]["toolUseId"] = json!("call_nobody_made");
                    let rule = sampling(eras(NEW, MODERN), with_tools(Value::Array(broken)))
                        .map_err(|r| r.rule);
                    prop_assert_eq!(rule, Err(RelayRule::UnpairedToolResult));
                }
                Ok(())
            },
        )
        .unwrap();
}

#[test]
fn sealed_states_round_trip_whatever_the_upstream_state() {
    let s = sealer(9);
    let binding = call("run-1", "t", digest(json!({"a": 1})));
    let mut runner = TestRunner::new(config(64));
    runner
        .run(
            &(".{0,64}", 0..=MAX_ROUNDS, 0..1_000_000u64),
            |(upstream_state, round, now)| {
                let state = RequestState {
                    upstream_state: Some(upstream_state),
                    expected: BTreeMap::new(),
                    round,
                    upstream_ids: BTreeMap::new(),
                };
                let sealed = s.seal_state(&binding, &state, now).unwrap();
                prop_assert_eq!(
                    s.open_state(&sealed, &binding, now).map(|o| o.state),
                    Ok(state)
                );
                Ok(())
            },
        )
        .unwrap();
}

// Degenerate messages the relay refuses with -32602 before anything is
// relayed (issue 28, item 9), one test per case.

#[test]
fn an_empty_content_array_in_a_sampling_request_is_refused_to_the_upstream() {
    for pair in [eras(NEW, NEW), eras(MODERN, NEW), eras(NEW, MODERN)] {
        let empty = params(json!([user(json!([]))]));
        assert_eq!(
            refused(sampling(pair, empty)),
            (RelayRule::Content, Party::Upstream)
        );
        sampling(pair, params(json!([user(json!([text("hi")]))]))).unwrap();
    }
}

#[test]
fn an_empty_content_array_in_a_sampling_result_is_refused_to_the_agent() {
    for pair in [eras(NEW, NEW), eras(MODERN, NEW)] {
        let empty = json!({"role": "assistant", "model": "m-1", "content": []});
        assert_eq!(
            refused(answer(pair, &NO_TOOLS, empty)),
            (RelayRule::Content, Party::Agent)
        );
    }
}

#[test]
fn a_sampling_result_with_role_user_is_refused_to_the_agent() {
    for pair in all_pairs() {
        let mut user_result = result_text();
        user_result["role"] = json!("user");
        assert_eq!(
            refused(answer(pair, &NO_TOOLS, user_result)),
            (RelayRule::ResultRole, Party::Agent)
        );
        answer(pair, &NO_TOOLS, result_text()).unwrap();
    }
}

#[test]
fn a_sampling_result_with_an_empty_model_is_refused_to_the_agent() {
    for pair in [eras(OLD, OLD), eras(MODERN, MODERN)] {
        let mut nameless = result_text();
        nameless["model"] = json!("");
        assert_eq!(
            refused(answer(pair, &NO_TOOLS, nameless)),
            (RelayRule::ResultModel, Party::Agent)
        );
    }
}

#[test]
fn an_accept_naming_a_field_the_schema_does_not_is_refused() {
    for pair in [eras(OLD, OLD), eras(NEW, MODERN)] {
        let expected = schema_of(
            pair,
            json!({"name": {"type": "string"}, "age": {"type": "integer"}}),
            json!(["name"]),
        );
        answer(
            pair,
            &expected,
            json!({"action": "accept", "content": {"name": "Ada", "age": 36}}),
        )
        .unwrap();
        for extra in [
            json!({"name": "Ada", "other": true}),
            json!({"name": "Ada", "password": "hunter2"}),
        ] {
            let result = answer(
                pair,
                &expected,
                json!({"action": "accept", "content": extra.clone()}),
            );
            let refusal = result.as_ref().err().map(|r| r.rpc_error().message.clone());
            assert_eq!(
                refused(result),
                (RelayRule::ElicitAnswer, Party::Agent),
                "{extra}"
            );
            let message = refusal.unwrap_or_default();
            assert!(
                message.contains("not a field of the requested schema"),
                "{message}"
            );
            assert!(
                !message.contains("hunter2"),
                "the value is never echoed: {message}"
            );
        }
    }
}

#[test]
fn include_context_needs_the_agents_sampling_context_capability() {
    let without = AgentCapabilities {
        sampling_context: false,
        ..caps()
    };
    for pair in [eras(OLD, OLD), eras(NEW, NEW), eras(MODERN, MODERN)] {
        for context in ["thisServer", "allServers"] {
            let mut p = plain();
            p["includeContext"] = json!(context);
            assert_eq!(
                refused(request(pair, &without, "sampling/createMessage", p.clone())),
                (RelayRule::Undeclared, Party::Upstream),
                "{context}"
            );
            request(pair, &caps(), "sampling/createMessage", p).unwrap();
        }
        let mut none = plain();
        none["includeContext"] = json!("none");
        request(pair, &without, "sampling/createMessage", none).unwrap();
    }
    let declared = AgentCapabilities::from_declared(NEW, &json!({"sampling": {"context": {}}}));
    assert!(declared.sampling_context);
    assert_eq!(AgentCapabilities::from_bits(declared.to_bits()), declared);
}

#[test]
fn a_fractional_max_tokens_is_refused_to_the_upstream() {
    for pair in [eras(OLD, OLD), eras(MODERN, MODERN)] {
        for bad in [json!(1.5), json!(100.0), json!("100")] {
            let mut p = plain();
            p["maxTokens"] = bad.clone();
            assert_eq!(
                refused(sampling(pair, p)),
                (RelayRule::MaxTokens, Party::Upstream),
                "{bad}"
            );
        }
    }
}
