//! Black-box: server-to-client requests from a 2025-session upstream
//! nobody here wrote (the reference `@modelcontextprotocol/server-
//! everything`) relayed through a run's gateway to 2025-session agents:
//! the official TypeScript SDK (1.x) and Python SDK (`mcp`, legacy mode)
//! clients with sampling and elicitation handlers, and a raw HTTP agent
//! for what the SDK clients never send (answers their own schemas refuse)
//! and for exact bytes.
//!
//! What it shows: sampling and elicitation requests reach the agent on
//! the response stream of its `tools/call`, under a signed relayed id, with
//! the upstream's params byte for byte; the agent's answer (a POST on its
//! own, with that id) reaches the upstream, which completes the call, and
//! the result arrives on the still-open stream. An answer without `model`
//! or `role`, or with `tool_use` content for a request without tools, is
//! refused `-32602` to the agent and never relayed: the upstream's request
//! is completed with the correlated error instead. A differing model
//! passes. A forged relayed id is refused and relays nothing. The
//! upstream's credential appears in no agent's view and no log.
//! In 2026-07-28 both ways the input requests and answers relay byte for
//! byte too, and with two replicas of one run (one Redis) an answer or a
//! retry reaches the call through either, or is refused `-32602` saying
//! the other replica holds it; and each is used once: the same answer or
//! retry again, on either replica, is refused `-32602` "already used".

use crate::support;

use serde_json::value::RawValue;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use support::upstreams::*;
use support::*;

const CREDENTIAL: &str = "Bearer relay-upstream-credential-93be1f";

/// A run whose grant allows every tool of server-everything.
struct Fixture {
    served: Served,
    _everything: Upstream,
    url: String,
    token: String,
}

fn fixture() -> Fixture {
    let served = serve();
    let admin = served.admin_token();
    let everything = start_everything();
    let port = everything.port;
    let response = http()
        .put(format!(
            "{}/v1/tenants/acme/upstreams/everything",
            served.url
        ))
        .bearer_auth(&admin)
        .json(&json!({
            "url": format!("http://127.0.0.1:{port}/mcp"),
            "header": "Authorization",
            "credential": CREDENTIAL,
            "trust_first_listing": true,
        }))
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let response = http()
        .post(format!("{}/v1/runs", served.url))
        .bearer_auth(&admin)
        .json(&json!({
            "tenant": "acme",
            "run": "relay-1",
            "capabilities": ["upstream:everything:*"],
        }))
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 201);
    let run: Value = response.json().unwrap();
    Fixture {
        url: run["mcp_url"].as_str().unwrap().to_owned(),
        token: run["token"].as_str().unwrap().to_owned(),
        served,
        _everything: everything,
    }
}

fn agent(script: &str, f: &Fixture, env: &[(&str, &str)], calls: &[(&str, Value)]) -> Value {
    let specs: Vec<String> = calls.iter().map(|(n, a)| format!("{n}={a}")).collect();
    let mut args = vec![f.url.as_str(), f.token.as_str()];
    args.extend(specs.iter().map(String::as_str));
    let out = if script.ends_with(".py") {
        python(script, &args)
    } else {
        let mut cmd = std::process::Command::new("node");
        cmd.current_dir(repo_root().join("tests/clients"))
            .arg(script)
            .args(&args)
            .envs(env.iter().copied());
        run(&mut cmd)
    };
    let stdout = stdout_of(&out);
    assert!(
        out.status.success(),
        "{script} failed: {}\n{stdout}",
        stderr_of(&out)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{script}: {e}: {stdout}"))
}

fn only_call(out: &Value) -> &Value {
    let calls = out["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "{out}");
    &calls[0]
}

#[test]
fn sdk_agents_answer_an_upstreams_sampling_and_elicitation_through_the_gateway() {
    let f = fixture();
    let sampling = (
        "everything__trigger-sampling-request",
        json!({ "prompt": "relay me", "maxTokens": 21 }),
    );
    let elicit = ("everything__trigger-elicitation-request", json!({}));

    let ts = agent(
        "upstream/relay_agent.mjs",
        &f,
        &[],
        &[sampling.clone(), elicit.clone()],
    );
    let asked = ts["asked"].as_array().unwrap();
    assert_eq!(asked.len(), 2, "{ts}");
    assert_eq!(asked[0]["method"], "sampling/createMessage");
    assert_eq!(
        asked[0]["params"]["messages"][0]["content"]["text"],
        "Resource trigger-sampling-request context: relay me"
    );
    assert_eq!(asked[0]["params"]["maxTokens"], 21);
    assert_eq!(asked[1]["method"], "elicitation/create");
    assert_eq!(
        asked[1]["params"]["requestedSchema"]["required"],
        json!(["name"])
    );
    let calls = ts["calls"].as_array().unwrap();
    assert_eq!(calls[0]["isError"], false, "{ts}");
    let text = calls[0]["text"].as_str().unwrap();
    assert!(
        text.contains("\"model\": \"agent-model\"") && text.contains("the agent samples: 42"),
        "the upstream got the agent's sampling result: {text}"
    );
    assert_eq!(calls[1]["isError"], false, "{ts}");
    assert!(
        calls[1]["text"].as_str().unwrap().contains("Ada Lovelace"),
        "the upstream got the agent's elicitation answer: {ts}"
    );

    // The TypeScript SDK 2.x in its legacy mode, same upstream.
    let v2 = agent(
        "upstream/relay_agent.mjs",
        &f,
        &[("AGENT_SDK", "v2"), ("AGENT_MODE", "legacy")],
        &[sampling.clone(), elicit.clone()],
    );
    let calls = v2["calls"].as_array().unwrap();
    assert!(
        calls[0]["text"]
            .as_str()
            .unwrap()
            .contains("the agent samples: 42"),
        "{v2}"
    );
    assert!(
        calls[1]["text"].as_str().unwrap().contains("Ada Lovelace"),
        "{v2}"
    );

    // Mixed eras, agent 2026-07-28 × upstream 2025: the gateway holds the
    // upstream's call and relays its requests as input_required (the
    // Python SDK and the TypeScript SDK 2.x, both pinned to 2026-07-28).
    let py26 = agent(
        "upstream/relay_agent.py",
        &f,
        &[("AGENT_MODE", "2026-07-28")],
        &[sampling.clone(), elicit.clone()],
    );
    let calls = py26["calls"].as_array().unwrap();
    assert!(
        calls[0]["text"]
            .as_str()
            .unwrap()
            .contains("the python agent samples: 7"),
        "{py26}"
    );
    assert!(
        calls[1]["text"].as_str().unwrap().contains("Grace Hopper"),
        "{py26}"
    );
    let v2_26 = agent(
        "upstream/relay_agent.mjs",
        &f,
        &[("AGENT_SDK", "v2"), ("AGENT_MODE", "2026-07-28")],
        std::slice::from_ref(&sampling),
    );
    assert!(
        only_call(&v2_26)["text"]
            .as_str()
            .unwrap()
            .contains("the agent samples: 42"),
        "{v2_26}"
    );
    // By hand: the held call's state works once; presented again (the
    // call it belonged to ended), it is refused saying what to do.
    let run = (f.url.clone(), f.token.clone());
    let caps = json!({ "sampling": {} });
    let args = json!({ "prompt": "held by hand", "maxTokens": 9 });
    let (_, first) = modern_call(&run, sampling.0, args.clone(), caps.clone(), None);
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    let state = first["result"]["requestState"].as_str().unwrap().to_owned();
    let key = first_input_request(&first);
    let answer = json!({ key.as_str(): {
        "role": "assistant", "model": "hand", "content": { "type": "text", "text": "by hand" } } });
    let (status, done) = modern_call(
        &run,
        sampling.0,
        args.clone(),
        caps.clone(),
        Some((answer.clone(), &state)),
    );
    assert_eq!(status, 200, "{done}");
    assert!(
        done["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("by hand"),
        "{done}"
    );
    let (status, again) = modern_call(&run, sampling.0, args, caps, Some((answer, &state)));
    assert_eq!(status, 400, "{again}");
    assert!(
        again["error"]["message"]
            .as_str()
            .unwrap()
            .contains("make the original call again"),
        "{again}"
    );

    // A model nobody hinted passes (hints are advisory).
    let other = agent(
        "upstream/relay_agent.mjs",
        &f,
        &[("SAMPLING_ANSWER", "other-model")],
        std::slice::from_ref(&sampling),
    );
    let call = only_call(&other);
    assert_eq!(call["isError"], false, "{other}");
    assert!(
        call["text"]
            .as_str()
            .unwrap()
            .contains("a-model-nobody-hinted")
    );

    let py = agent(
        "upstream/relay_agent.py",
        &f,
        &[],
        &[sampling.clone(), elicit],
    );
    let calls = py["calls"].as_array().unwrap();
    assert_eq!(calls[0]["isError"], false, "{py}");
    assert!(
        calls[0]["text"]
            .as_str()
            .unwrap()
            .contains("the python agent samples: 7"),
        "{py}"
    );
    assert!(
        calls[1]["text"].as_str().unwrap().contains("Grace Hopper"),
        "{py}"
    );

    // An agent that declared nothing is never asked: the tool that asks
    // is not in the upstream session that declares nothing, and the call
    // says so at once rather than hanging.
    let started = std::time::Instant::now();
    let bare = agent(
        "upstream/agent.mjs",
        &f,
        &[],
        std::slice::from_ref(&sampling),
    );
    let call = only_call(&bare);
    assert!(
        call["isError"] == true || call.get("error").is_some(),
        "{bare}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(20));

    let log = std::fs::read_to_string(&f.served.log).unwrap();
    assert!(log.contains("relay request") && log.contains("relay answer"));
    let secret = "relay-upstream-credential-93be1f";
    for (what, text) in [
        ("the log", log.clone()),
        ("the TS agent's view", ts.to_string()),
        ("the Python agent's view", py.to_string()),
    ] {
        assert!(!text.contains(secret), "{what} holds the credential");
    }
    assert!(
        !log.contains("relay me") && !log.contains("Ada Lovelace"),
        "the log holds relayed messages"
    );
}

/// A 2025 session spoken by hand, for answers no SDK client sends.
struct RawAgent {
    url: String,
    token: String,
    session: String,
}

const REVISION: &str = "2025-11-25";

impl RawAgent {
    fn open(url: &str, token: &str, capabilities: Value) -> Self {
        let response = http()
            .post(url)
            .bearer_auth(token)
            .header("accept", mcp::ACCEPT)
            .json(&mcp::initialize(
                0,
                REVISION,
                capabilities,
                ("raw-relay-agent", "1.0.0"),
            ))
            .send()
            .unwrap();
        assert_eq!(response.status().as_u16(), 200);
        let session = response.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_owned();
        let agent = Self {
            url: url.to_owned(),
            token: token.to_owned(),
            session,
        };
        let (status, _) = agent.post(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        assert_eq!(status, 202);
        agent
    }

    fn post(&self, body: &str) -> (u16, String) {
        let response = http()
            .post(&self.url)
            .bearer_auth(&self.token)
            .header("accept", mcp::ACCEPT)
            .header("content-type", "application/json")
            .header("mcp-session-id", &self.session)
            .header("mcp-protocol-version", REVISION)
            .body(body.to_owned())
            .send()
            .unwrap();
        let status = response.status().as_u16();
        (status, response.text().unwrap_or_default())
    }

    /// Calls `tool`; for the first relayed request on the stream, `answer`
    /// gets its raw members and returns the raw answer body to POST (with
    /// the relayed id) and what the POST got back is recorded. Returns the
    /// relayed request's members, the answer POST's status and body, and
    /// the call's final response.
    fn call(
        &self,
        tool: &str,
        arguments: Value,
        answer: impl Fn(&HashMap<String, Box<RawValue>>) -> String,
    ) -> (HashMap<String, Box<RawValue>>, (u16, String), Value) {
        self.call_posting(tool, arguments, |m| self.post(&answer(m)))
    }

    /// [`Self::call`] where `answer` posts the answer itself (anywhere)
    /// and returns what its POST got back.
    fn call_posting(
        &self,
        tool: &str,
        arguments: Value,
        answer: impl Fn(&HashMap<String, Box<RawValue>>) -> (u16, String),
    ) -> (HashMap<String, Box<RawValue>>, (u16, String), Value) {
        let body = mcp::tools_call(7, tool, arguments);
        let response = http()
            .post(&self.url)
            .bearer_auth(&self.token)
            .header("accept", mcp::ACCEPT)
            .header("mcp-session-id", &self.session)
            .header("mcp-protocol-version", REVISION)
            .json(&body)
            .send()
            .unwrap();
        assert_eq!(response.status().as_u16(), 200);
        assert!(
            response.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/event-stream"),
            "a call that relays answers as an event stream"
        );
        let mut relayed = None;
        let mut posted = None;
        for line in BufReader::new(response).lines() {
            let line = line.unwrap();
            let Some(data) = line.strip_prefix("data: ") else {
                continue;
            };
            let message: HashMap<String, Box<RawValue>> = serde_json::from_str(data).unwrap();
            if message.contains_key("method") && message.contains_key("id") && relayed.is_none() {
                posted = Some(answer(&message));
                relayed = Some(message);
                continue;
            }
            if message.get("id").map(|id| id.get()) == Some("7") {
                let value: Value = serde_json::from_str(data).unwrap();
                return (
                    relayed.expect("a relayed request came first"),
                    posted.unwrap(),
                    value,
                );
            }
        }
        panic!("the stream ended without the call's response");
    }
}

pub(crate) fn result_text(response: &Value) -> String {
    response["result"]["content"]
        .as_array()
        .unwrap_or_else(|| panic!("{response}"))
        .iter()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

fn answer_with(message: &HashMap<String, Box<RawValue>>, result: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{result}}}"#,
        message["id"].get()
    )
}

#[test]
fn the_gateway_relays_exact_bytes_and_refuses_broken_answers_before_relaying() {
    let f = fixture();
    let raw = RawAgent::open(
        &f.url,
        &f.token,
        json!({ "sampling": {}, "elicitation": {} }),
    );
    let sample = "everything__trigger-sampling-request";

    // Well-formed: the upstream's params arrive byte for byte under a
    // relayed id; the answer (keys in an unusual order, a model nobody
    // hinted) reaches the upstream, whose result comes on the stream.
    let (relayed, posted, done) = raw.call(
        sample,
        json!({ "prompt": "bytes", "maxTokens": 33 }),
        |m| {
            answer_with(
                m,
                r#"{"model":"raw-model","content":{"text":"raw answer","type":"text"},"role":"assistant"}"#,
            )
        },
    );
    assert_eq!(relayed["method"].get(), r#""sampling/createMessage""#);
    assert!(
        relayed["id"].get().starts_with("\"relay."),
        "{}",
        relayed["id"].get()
    );
    assert_eq!(
        relayed["params"].get(),
        r#"{"messages":[{"role":"user","content":{"type":"text","text":"Resource trigger-sampling-request context: bytes"}}],"systemPrompt":"You are a helpful test server.","maxTokens":33,"temperature":0.7}"#,
        "the upstream's params, byte for byte"
    );
    assert_eq!(posted.0, 202, "{}", posted.1);
    let text = result_text(&done);
    assert!(
        text.contains("raw-model") && text.contains("raw answer"),
        "{text}"
    );

    // Broken answers: -32602 to the agent, nothing relayed; the upstream's
    // request is completed with the correlated error (its tool says so).
    for (result, rule) in [
        (
            r#"{"role":"assistant","content":{"type":"text","text":"leak"}}"#,
            "result_model",
        ),
        (
            r#"{"model":"m","content":{"type":"text","text":"leak"}}"#,
            "result_role",
        ),
        (
            r#"{"role":"assistant","model":"m","stopReason":"toolUse","content":{"type":"tool_use","id":"t1","name":"lookup","input":{}}}"#,
            "tool_use_unrequested",
        ),
    ] {
        let (_, posted, done) = raw.call(sample, json!({ "prompt": "p", "maxTokens": 5 }), |m| {
            answer_with(m, result)
        });
        assert_eq!(posted.0, 400, "{rule}: {}", posted.1);
        let error: Value = serde_json::from_str(&posted.1).unwrap();
        assert_eq!(error["error"]["code"], -32602, "{rule}: {error}");
        assert_eq!(error["id"], Value::Null);
        let text = result_text(&done);
        assert_eq!(done["result"]["isError"], true, "{rule}: {done}");
        assert!(text.contains(rule), "{rule}: the upstream was told: {text}");
        assert!(!text.contains("leak"), "{rule}: nothing relayed: {text}");
    }

    // A forged relayed id: refused, nothing reaches the upstream; the
    // genuine answer then still completes the call.
    let (_, posted, done) = raw.call(sample, json!({ "prompt": "p", "maxTokens": 5 }), |m| {
        let id = m["id"].get();
        let forged = format!("{}x\"", &id[..id.len() - 2]);
        let (status, body) = raw.post(&format!(
            r#"{{"jsonrpc":"2.0","id":{forged},"result":{{"role":"assistant","model":"forged","content":{{"type":"text","text":"forged"}}}}}}"#
        ));
        assert_eq!(status, 400, "{body}");
        assert!(body.contains("-32602") && body.contains("response id"), "{body}");
        answer_with(
            m,
            r#"{"role":"assistant","model":"genuine","content":{"type":"text","text":"genuine"}}"#,
        )
    });
    assert_eq!(posted.0, 202);
    let text = result_text(&done);
    assert!(
        text.contains("genuine") && !text.contains("forged"),
        "{text}"
    );

    // The request log records each streamed call once it ended, with its
    // own outcome and tool (five calls: one ok, three tool errors, one ok),
    // never the placeholder `stream`. Written as the stream ends, just
    // after the agent read its last event.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let (log, streamed) = loop {
        let log = std::fs::read_to_string(&f.served.log).unwrap();
        let streamed: Vec<Value> = log
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|line| line["message"] == "gateway request" && line["method"] == "tools/call")
            .collect();
        if streamed.len() >= 5 || std::time::Instant::now() > deadline {
            break (log, streamed);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let outcomes: Vec<&str> = streamed
        .iter()
        .map(|line| line["outcome"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        outcomes,
        ["ok", "tool_error", "tool_error", "tool_error", "ok"],
        "{}",
        log.lines()
            .filter(|l| l.contains("gateway request"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        streamed
            .iter()
            .all(|line| line["tool"] == sample && line["request_id"].is_string()),
        "{streamed:?}"
    );
}

/// A run whose grant allows every tool of the Python SDK upstream (which
/// speaks 2026-07-28 and asks through `input_required`), plus a second
/// run of the same tenant.
fn modern_fixture() -> (Served, Upstream, [(String, String); 2]) {
    let (served, py, runs, _) = modern_fixture_with_port();
    (served, py, runs)
}

/// [`modern_fixture`], and the Python upstream's port.
fn modern_fixture_with_port() -> (Served, Upstream, [(String, String); 2], u16) {
    let served = serve();
    let admin = served.admin_token();
    let py = start_python_upstream();
    let port = py.port;
    register_python_upstream(&served.url, &admin, "acme", "pyup", port);
    let runs = ["modern-1", "modern-2"].map(|run| {
        let response = http()
            .post(format!("{}/v1/runs", served.url))
            .bearer_auth(&admin)
            .json(&json!({
                "tenant": "acme",
                "run": run,
                "capabilities": ["upstream:pyup:*"],
            }))
            .send()
            .unwrap();
        assert_eq!(response.status().as_u16(), 201);
        let run: Value = response.json().unwrap();
        (
            run["mcp_url"].as_str().unwrap().to_owned(),
            run["token"].as_str().unwrap().to_owned(),
        )
    });
    (served, py, runs, port)
}

/// One 2026-07-28 `tools/call` declaring `capabilities`, optionally a
/// retry with `inputResponses` and `requestState`.
pub(crate) fn modern_call(
    (url, token): &(String, String),
    tool: &str,
    arguments: Value,
    capabilities: Value,
    retry: Option<(Value, &str)>,
) -> (u16, Value) {
    let mut params = json!({
        "name": tool, "arguments": arguments,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": capabilities,
            "io.modelcontextprotocol/clientInfo": { "name": "raw-2026-agent", "version": "1.0.0" },
        }
    });
    if let Some((responses, state)) = retry {
        params["inputResponses"] = responses;
        params["requestState"] = json!(state);
    }
    let body = mcp::request(3, "tools/call", params);
    mcp_post(url, token, "tools/call", Some(tool), &body)
}

#[test]
fn a_2026_upstreams_input_required_reaches_2026_agents_sealed_and_2025_agents_on_their_stream() {
    let (served, _py, [one, two]) = modern_fixture();

    // The Python SDK client (2026-07-28) answers the gateway's
    // input_required with its callbacks and retries on its own.
    let args = [
        one.0.as_str(),
        one.1.as_str(),
        "pyup__greet={}",
        r#"pyup__muse={"topic":"relays"}"#,
        "pyup__roots={}",
    ];
    let mut cmd = std::process::Command::new(repo_root().join("target/venv/bin/python"));
    cmd.current_dir(repo_root().join("tests/clients"))
        .arg("upstream/relay_agent.py")
        .args(args)
        .env("AGENT_MODE", "2026-07-28");
    let out = run(&mut cmd);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let py: Value = serde_json::from_str(stdout_of(&out).trim()).unwrap();
    let calls = py["calls"].as_array().unwrap();
    assert_eq!(calls[0]["text"], "Hello, Grace Hopper!", "{py}");
    assert_eq!(
        calls[1]["text"], "model py-agent-model says: the python agent samples: 7",
        "{py}"
    );
    assert_eq!(calls[2]["text"], "roots: file:///srv/agent/py", "{py}");
    let asked = py["asked"].as_array().unwrap();
    assert_eq!(asked[0]["method"], "elicitation/create");
    assert_eq!(asked[1]["method"], "sampling/createMessage");
    assert_eq!(
        asked[1]["params"]["messages"][0]["content"]["text"],
        "One line about relays"
    );

    // By hand: the gateway's own input_required, its state sealed.
    let caps = json!({ "elicitation": {}, "sampling": {} });
    let (status, first) = modern_call(&one, "pyup__greet", json!({}), caps.clone(), None);
    assert_eq!(status, 200, "{first}");
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    let requests = result["inputRequests"].as_object().unwrap();
    assert_eq!(requests.len(), 1);
    let (key, request) = requests.iter().next().unwrap();
    assert_eq!(request["method"], "elicitation/create");
    let state = result["requestState"].as_str().unwrap().to_owned();
    let accept = json!({ key.as_str(): { "action": "accept", "content": { "name": "Ada" } } });

    // Refused -32602, nothing relayed: forged, another run's, other
    // arguments, wrong keys, an answer off its schema.
    let mut forged = state.clone().into_bytes();
    let at = forged.len() / 2;
    forged[at] = if forged[at] == b'A' { b'B' } else { b'A' };
    let forged = String::from_utf8(forged).unwrap();
    let (_, muse) = modern_call(
        &one,
        "pyup__muse",
        json!({ "topic": "a" }),
        caps.clone(),
        None,
    );
    let muse_state = muse["result"]["requestState"].as_str().unwrap().to_owned();
    let muse_key = first_input_request(&muse);
    let sampled = json!({ muse_key.as_str(): {
        "role": "assistant", "model": "m", "content": { "type": "text", "text": "t" } } });
    for (what, run, tool, arguments, responses, presented, needle) in [
        (
            "forged",
            &one,
            "pyup__greet",
            json!({}),
            accept.clone(),
            forged.as_str(),
            "altered",
        ),
        (
            "another run's",
            &two,
            "pyup__greet",
            json!({}),
            accept.clone(),
            state.as_str(),
            "another run",
        ),
        (
            "other arguments",
            &one,
            "pyup__muse",
            json!({ "topic": "b" }),
            sampled.clone(),
            muse_state.as_str(),
            "another run or another call",
        ),
        (
            "another tool's",
            &one,
            "pyup__greet",
            json!({}),
            accept.clone(),
            muse_state.as_str(),
            "another run or another call",
        ),
        (
            "wrong keys",
            &one,
            "pyup__greet",
            json!({}),
            json!({ "nope": { "action": "cancel" } }),
            state.as_str(),
            "lacks the answer",
        ),
        (
            "off its schema",
            &one,
            "pyup__greet",
            json!({}),
            json!({ key.as_str(): { "action": "accept", "content": { "name": 5 } } }),
            state.as_str(),
            "elicit",
        ),
    ] {
        let (status, body) = modern_call(
            run,
            tool,
            arguments,
            caps.clone(),
            Some((responses, presented)),
        );
        assert_eq!(status, 400, "{what}: {body}");
        assert_eq!(body["error"]["code"], -32602, "{what}: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(needle), "{what}: {message}");
    }

    // The genuine retry completes, on the sealed state alone.
    let (status, done) = modern_call(
        &one,
        "pyup__greet",
        json!({}),
        caps.clone(),
        Some((accept, &state)),
    );
    assert_eq!(status, 200, "{done}");
    assert_eq!(
        done["result"]["content"][0]["text"], "Hello, Ada!",
        "{done}"
    );
    let (status, done) = modern_call(
        &one,
        "pyup__muse",
        json!({ "topic": "a" }),
        caps,
        Some((sampled, &muse_state)),
    );
    assert_eq!(status, 200, "{done}");
    assert_eq!(
        done["result"]["content"][0]["text"], "model m says: t",
        "{done}"
    );

    // An agent that declared nothing is not asked: the upstream's request
    // for an undeclared capability is not passed on.
    let (status, bare) = modern_call(&one, "pyup__greet", json!({}), json!({}), None);
    assert_eq!(status, 200, "{bare}");
    assert_ne!(bare["result"]["resultType"], "input_required", "{bare}");

    // Mixed eras, agent 2025 × upstream 2026-07-28: the gateway asks the
    // 2025 agents on their call's stream and retries the upstream with
    // their answers (the TypeScript SDK 1.x and the Python SDK in legacy
    // mode).
    let (url, token) = &one;
    let out = node(
        "upstream/relay_agent.mjs",
        &[
            url,
            token,
            "pyup__greet={}",
            r#"pyup__muse={"topic":"eras"}"#,
            "pyup__roots={}",
        ],
    );
    assert!(out.status.success(), "{}", stderr_of(&out));
    let ts: Value = serde_json::from_str(stdout_of(&out).trim()).unwrap();
    let calls = ts["calls"].as_array().unwrap();
    assert_eq!(calls[0]["text"], "Hello, Ada Lovelace!", "{ts}");
    assert_eq!(
        calls[1]["text"], "model agent-model says: the agent samples: 42",
        "{ts}"
    );
    assert_eq!(calls[2]["text"], "roots: file:///srv/agent/project", "{ts}");
    let asked: Vec<&Value> = ts["asked"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| &a["method"])
        .collect();
    assert_eq!(
        asked,
        [
            &json!("elicitation/create"),
            &json!("sampling/createMessage"),
            &json!("roots/list")
        ]
    );
    // The TypeScript SDK 2.x, pinned to 2026-07-28 (it answers the
    // gateway's input_required itself) and in its legacy mode (mixed eras).
    for mode in ["2026-07-28", "legacy"] {
        let mut cmd = std::process::Command::new("node");
        cmd.current_dir(repo_root().join("tests/clients"))
            .arg("upstream/relay_agent.mjs")
            .args([
                url.as_str(),
                token.as_str(),
                "pyup__greet={}",
                r#"pyup__muse={"topic":"v2"}"#,
            ])
            .env("AGENT_SDK", "v2")
            .env("AGENT_MODE", mode);
        let out = run(&mut cmd);
        assert!(out.status.success(), "{mode}: {}", stderr_of(&out));
        let v2: Value = serde_json::from_str(stdout_of(&out).trim()).unwrap();
        assert_eq!(
            v2["calls"][0]["text"], "Hello, Ada Lovelace!",
            "{mode}: {v2}"
        );
        assert_eq!(
            v2["calls"][1]["text"], "model agent-model says: the agent samples: 42",
            "{mode}: {v2}"
        );
    }
    let out = python("upstream/relay_agent.py", &[url, token, "pyup__greet={}"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let py: Value = serde_json::from_str(stdout_of(&out).trim()).unwrap();
    assert_eq!(py["calls"][0]["text"], "Hello, Grace Hopper!", "{py}");

    // Broken sampling requests from the upstream (the Python SDK refuses
    // to send them itself; its tool returns them as input_required): a
    // tool-result message with other content, a tool_result naming no
    // tool_use. Refused before relaying, for a 2026-07-28 agent and a 2025
    // one alike: no agent is asked, the call says why.
    for (case, why) in [
        (
            "mixed",
            "a tool-result message holds only tool_result blocks",
        ),
        (
            "unpaired",
            "names no tool_use of the preceding assistant message",
        ),
    ] {
        let spec = format!(r#"pyup__bad_sample={{"case":"{case}"}}"#);
        for (script, mode) in [
            ("upstream/relay_agent.py", "2026-07-28"),
            ("upstream/relay_agent.mjs", "legacy"),
        ] {
            let mut cmd = std::process::Command::new(if script.ends_with(".py") {
                repo_root().join("target/venv/bin/python")
            } else {
                "node".into()
            });
            cmd.current_dir(repo_root().join("tests/clients"))
                .arg(script)
                .args([url.as_str(), token.as_str(), spec.as_str()])
                .env("AGENT_MODE", mode);
            let out = run(&mut cmd);
            assert!(out.status.success(), "{case} {script}: {}", stderr_of(&out));
            let agent: Value = serde_json::from_str(stdout_of(&out).trim()).unwrap();
            let call = &agent["calls"][0];
            assert_eq!(call["isError"], true, "{case} {script}: {agent}");
            let text = call["text"].as_str().unwrap();
            assert!(text.contains(why), "{case} {script}: {text}");
            assert_eq!(
                agent["asked"],
                json!([]),
                "{case} {script}: nothing relayed"
            );
        }
    }

    let log = std::fs::read_to_string(&served.log).unwrap();
    assert!(!log.contains(PY_CREDENTIAL), "the log holds the credential");
    assert!(
        !log.contains("Grace Hopper") && !log.contains("Ada"),
        "the log holds answers"
    );
}

#[test]
fn revoking_the_run_mid_relay_ends_the_call_with_a_correlated_error() {
    let f = fixture();
    let raw = RawAgent::open(&f.url, &f.token, json!({ "sampling": {} }));
    let body = mcp::tools_call(
        7,
        "everything__trigger-sampling-request",
        json!({ "prompt": "never answered", "maxTokens": 5 }),
    );
    let response = http()
        .post(&raw.url)
        .bearer_auth(&raw.token)
        .header("accept", mcp::ACCEPT)
        .header("mcp-session-id", &raw.session)
        .header("mcp-protocol-version", REVISION)
        .json(&body)
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let mut lines = BufReader::new(response).lines();
    // The relayed request arrives; the agent does not answer it.
    let relayed = loop {
        let line = lines.next().expect("a relayed request").unwrap();
        if let Some(data) = line.strip_prefix("data: ") {
            break serde_json::from_str::<Value>(data).unwrap();
        }
    };
    assert_eq!(relayed["method"], "sampling/createMessage");
    let admin = f.served.admin_token();
    let started = std::time::Instant::now();
    let revoked = http()
        .delete(format!("{}/v1/runs/acme/relay-1", f.served.url))
        .bearer_auth(&admin)
        .send()
        .unwrap();
    assert!(revoked.status().is_success(), "{:?}", revoked.status());
    // The call's stream ends with the run's correlated error, within the
    // drain deadline (5 s by default).
    let ended = loop {
        let line = lines
            .next()
            .expect("the stream ends with an answer to the call")
            .unwrap();
        if let Some(data) = line.strip_prefix("data: ") {
            let message: Value = serde_json::from_str(data).unwrap();
            if message["id"] == 7 {
                break message;
            }
        }
    };
    assert_eq!(ended["error"]["code"], -32051, "{ended}");
    assert!(started.elapsed() < std::time::Duration::from_secs(15));
    // The agent's late answer gets nowhere: the run's gateway is gone or
    // its token refused.
    let late = answer_with(
        &serde_json::from_value(relayed).unwrap(),
        r#"{"role":"assistant","model":"m","content":{"type":"text","text":"late"}}"#,
    );
    let sent = http()
        .post(&raw.url)
        .bearer_auth(&raw.token)
        .header("accept", mcp::ACCEPT)
        .header("content-type", "application/json")
        .header("mcp-session-id", &raw.session)
        .header("mcp-protocol-version", REVISION)
        .body(late)
        .send();
    if let Ok(response) = sent {
        let status = response.status().as_u16();
        assert!(status == 401 || status == 403, "{status}");
    }
    // The upstream's pending request was completed with an error (its call
    // ended), not left waiting.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let log = std::fs::read_to_string(&f.served.log).unwrap();
        if log.contains("relay requests completed with errors") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the upstream's request was not completed"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// The members of a JSON-RPC response, unparsed, from a JSON or SSE body.
fn raw_response(text: &str) -> HashMap<String, Box<RawValue>> {
    let data = text
        .lines()
        .find_map(|line| line.strip_prefix("data: "))
        .unwrap_or(text);
    serde_json::from_str(data).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// A 2026-07-28 `tools/call` body, raw `extra` params members appended.
fn modern_body(tool: &str, extra: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{{"name":"{tool}","arguments":{{}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{"sampling":{{}}}},"io.modelcontextprotocol/clientInfo":{{"name":"raw-2026-agent","version":"1.0.0"}}}}{extra}}}}}"#
    )
}

fn post_raw(url: &str, headers: &[(&str, &str)], tool: &str, body: String) -> String {
    let mut request = http()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", mcp::ACCEPT)
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .body(body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().unwrap();
    let status = response.status().as_u16();
    let text = response.text().unwrap();
    assert_eq!(status, 200, "{text}");
    text
}

#[test]
fn a_2026_upstreams_input_requests_and_a_2026_agents_answers_relay_byte_for_byte() {
    let (_served, _py, [(url, token), _], port) = modern_fixture_with_port();
    let bearer = format!("Bearer {token}");
    let auth = [("authorization", bearer.as_str())];

    // What the upstream writes when asked directly (its serialisation:
    // keys in its own order, not sorted).
    let direct = raw_response(&post_raw(
        &format!("http://127.0.0.1:{port}/mcp"),
        &[("x-upstream-key", PY_CREDENTIAL)],
        "echo_answers",
        modern_body("echo_answers", ""),
    ));
    let direct: HashMap<String, Box<RawValue>> =
        serde_json::from_str(direct["result"].get()).unwrap();
    let upstream_bytes = direct["inputRequests"].get().to_owned();
    assert!(
        upstream_bytes.contains("sampling/createMessage"),
        "{upstream_bytes}"
    );

    // Through the gateway: the same bytes, under the gateway's sealed state.
    let first = raw_response(&post_raw(
        &url,
        &auth,
        "pyup__echo_answers",
        modern_body("pyup__echo_answers", ""),
    ));
    let result: HashMap<String, Box<RawValue>> =
        serde_json::from_str(first["result"].get()).unwrap();
    assert_eq!(result["resultType"].get(), r#""input_required""#);
    assert_eq!(
        result["inputRequests"].get(),
        upstream_bytes,
        "the upstream's input requests, byte for byte"
    );
    let state = result["requestState"].get();

    // The agent's answer, in a layout no serialiser writes (spaces,
    // escapes, unsorted keys): the upstream receives exactly these bytes.
    let answer = r#"{"echo": {"role":"assistant", "model":"m-\u00ab1\u00bb","content":{"type":"text","text":"bytes \u2014 exactly"} ,"stopReason":"endTurn"}}"#;
    let retried = raw_response(&post_raw(
        &url,
        &auth,
        "pyup__echo_answers",
        modern_body(
            "pyup__echo_answers",
            &format!(r#","inputResponses":{answer},"requestState":{state}"#),
        ),
    ));
    let done: Value = serde_json::from_str(retried["result"].get()).unwrap();
    let received = result_text(&json!({ "result": done }));
    let received = raw_response(&received);
    let params: HashMap<String, Box<RawValue>> =
        serde_json::from_str(received["params"].get()).unwrap();
    assert_eq!(
        params["inputResponses"].get(),
        answer,
        "the agent's input responses, byte for byte"
    );
}

#[test]
fn a_2025_upstreams_mid_call_request_and_a_2026_agents_answer_relay_byte_for_byte() {
    let served = serve();
    let admin = served.admin_token();
    let py = start_python_upstream_with(&[("UPSTREAM_LEGACY_ONLY", "1")]);
    register_python_upstream(&served.url, &admin, "acme", "pyold", py.port);
    let (url, token) = served.register_run(&admin, "held-bytes-1", &["upstream:pyold:*"]);
    let url = url.as_str();
    let bearer = format!("Bearer {token}");
    let auth = [("authorization", bearer.as_str())];
    let tool = "pyold__echo_exchange";

    // The 2025 upstream asks mid-call; the 2026-07-28 agent gets it as
    // `input_required`, the call held by the gateway.
    let first = raw_response(&post_raw(url, &auth, tool, modern_body(tool, "")));
    let result: HashMap<String, Box<RawValue>> =
        serde_json::from_str(first["result"].get()).unwrap();
    assert_eq!(result["resultType"].get(), r#""input_required""#);
    let requests: HashMap<String, HashMap<String, Box<RawValue>>> =
        serde_json::from_str(result["inputRequests"].get()).unwrap();
    assert_eq!(requests.len(), 1, "{}", result["inputRequests"].get());
    let (key, request) = requests.iter().next().unwrap();
    assert_eq!(request["method"].get(), r#""sampling/createMessage""#);
    let relayed_params = request["params"].get().to_owned();
    let state = result["requestState"].get();

    // The agent's answer, in a layout no serialiser writes (spaces,
    // escapes, unsorted keys).
    let answer = r#"{"role":"assistant", "model":"m-\u00ab1\u00bb","content":{"type":"text","text":"bytes \u2014 exactly"} ,"stopReason":"endTurn"}"#;
    let key = Value::String(key.clone()).to_string();
    let retried = raw_response(&post_raw(
        url,
        &auth,
        tool,
        modern_body(
            tool,
            &format!(r#","inputResponses":{{{key}: {answer}}},"requestState":{state}"#),
        ),
    ));
    let done: Value = serde_json::from_str(retried["result"].get()).unwrap();
    assert_ne!(done["isError"], true, "{done}");
    let exchange: Value = serde_json::from_str(&result_text(&json!({ "result": done }))).unwrap();

    // What the upstream wrote on its stream, and what it was posted back.
    let sent = raw_response(exchange["sent"].as_str().unwrap());
    assert_eq!(
        relayed_params,
        sent["params"].get(),
        "the upstream's params reach the agent byte for byte"
    );
    let received = raw_response(exchange["received"].as_str().unwrap());
    assert_eq!(
        received["result"].get(),
        answer,
        "the agent's answer reaches the upstream byte for byte"
    );
}

/// Agent 2026-07-28 × upstream 2025, a refused answer: the agent's retry
/// answers the held call's sampling request with a result the relay
/// refuses (role `user`). The agent gets -32602 at once, and the
/// upstream's pending request is answered with a correlated JSON-RPC
/// error (its own id) right away, not left open until the relay's bounds
/// run out (as the upstream guide says).
#[test]
fn a_refused_answer_ends_a_2025_upstreams_held_request_with_a_correlated_error() {
    let served = serve();
    let admin = served.admin_token();
    let py = start_python_upstream_with(&[("UPSTREAM_LEGACY_ONLY", "1")]);
    register_python_upstream(&served.url, &admin, "acme", "pyold", py.port);
    let (url, token) = served.register_run(&admin, "held-refused-1", &["upstream:pyold:*"]);
    let url = url.as_str();
    let bearer = format!("Bearer {token}");
    let auth = [("authorization", bearer.as_str())];
    let tool = "pyold__echo_exchange";

    let first = raw_response(&post_raw(url, &auth, tool, modern_body(tool, "")));
    let result: Value = serde_json::from_str(first["result"].get()).unwrap();
    assert_eq!(result["resultType"], "input_required", "{result}");
    let key = first_input_request(&json!({ "result": result }));
    let state = result["requestState"].to_string();
    // What the upstream wrote: its request, under its own id.
    let last = || -> Value {
        http()
            .get(format!("http://127.0.0.1:{}/last-response", py.port))
            .header("x-upstream-key", PY_CREDENTIAL)
            .send()
            .unwrap()
            .json()
            .unwrap()
    };
    let sent: Value = serde_json::from_str(last()["sent"].as_str().unwrap()).unwrap();
    assert_eq!(sent["method"], "sampling/createMessage", "{sent}");

    // A result from the wrong role: refused to the agent, never relayed.
    let answer = r#"{"role":"user","model":"m","content":{"type":"text","text":"not the model"}}"#;
    let key = Value::String(key).to_string();
    let mut request = http()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", mcp::ACCEPT)
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .body(modern_body(
            tool,
            &format!(r#","inputResponses":{{{key}: {answer}}},"requestState":{state}"#),
        ));
    for (name, value) in auth {
        request = request.header(name, value);
    }
    let refused = request.send().unwrap();
    assert_eq!(refused.status().as_u16(), 400);
    let refused: Value = refused.json().unwrap();
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert_eq!(refused["id"], 5, "correlated to the retry: {refused}");

    // The upstream's request is answered with an error under its own id,
    // at once (well within the relay's 300 s bound).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let received = loop {
        let body = last()["received"].as_str().unwrap_or_default().to_owned();
        if !body.is_empty() {
            break serde_json::from_str::<Value>(&body).unwrap();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the upstream's request is still open"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert_eq!(received["id"], sent["id"], "correlated: {received}");
    assert!(received.get("result").is_none(), "{received}");
    assert!(
        received["error"]["code"].as_i64().is_some(),
        "a JSON-RPC error: {received}"
    );
}

/// Two gateway replicas of one run: `corkboard serve` (A, which also
/// holds the board and the upstream registrations) and a `corkboard
/// runner` (B) sharing its data dir, a real Redis registry (isolated
/// prefix) and the session, JWT and upstream key files; the same run is
/// registered on both, and A's token is the agent's on either.
struct Replicas {
    /// The run's endpoint on A and on B, and its token (A's).
    a_url: String,
    b_url: String,
    token: String,
    // Dropped in this order: the replicas before Redis.
    _a: Running,
    _b: Running,
    _everything: Upstream,
    _py: Upstream,
    _redis: corkboard_testkit::RedisServer,
    _dir: tempfile::TempDir,
}

fn replicas() -> Replicas {
    let redis = corkboard_testkit::RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut env = cluster_secrets(dir.path());
    env.extend([
        ("CORKBOARD_REGISTRY".to_owned(), "redis".to_owned()),
        ("CORKBOARD_REDIS_URL".to_owned(), redis.url()),
        (
            "CORKBOARD_REDIS_KEY_PREFIX".to_owned(),
            corkboard_testkit::unique_prefix("relay-replicas"),
        ),
        // The test upstreams listen on loopback.
        ("CORKBOARD_EGRESS_ALLOW".to_owned(), "127.0.0.1".to_owned()),
    ]);
    let start = |role: &str| {
        let mut cmd = corkboard();
        cmd.args([role, "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(&data)
            .envs(env.iter().cloned());
        Running::spawn(cmd)
    };
    // `serve` creates the upstream key file the runner then reads.
    let a = start("serve");
    let b = start("runner");
    let admin = admin_token_with(&env, "platform-admin", None);
    let everything = start_everything();
    let py = start_python_upstream();
    let (everything_port, py_port) = (everything.port, py.port);
    for (name, port, header, credential) in [
        ("everything", everything_port, "Authorization", CREDENTIAL),
        ("pyup", py_port, "X-Upstream-Key", PY_CREDENTIAL),
    ] {
        let response = http()
            .put(format!("{}/v1/tenants/acme/upstreams/{name}", a.url))
            .bearer_auth(&admin)
            .json(&json!({
                "url": format!("http://127.0.0.1:{port}/mcp"),
                "header": header,
                "credential": credential,
                "trust_first_listing": true,
            }))
            .send()
            .unwrap();
        assert_eq!(response.status().as_u16(), 200, "{name}");
    }
    let register = |api: &str| -> Value {
        let response = http()
            .post(format!("{api}/v1/runs"))
            .bearer_auth(&admin)
            .json(&json!({
                "tenant": "acme",
                "run": "replicated",
                "capabilities": ["upstream:everything:*", "upstream:pyup:*"],
            }))
            .send()
            .unwrap();
        let status = response.status().as_u16();
        let body: Value = response.json().unwrap();
        assert_eq!(status, 201, "{body}");
        body
    };
    let on_a = register(&a.url);
    let on_b = register(&b.url);
    Replicas {
        a_url: on_a["mcp_url"].as_str().unwrap().to_owned(),
        b_url: on_b["mcp_url"].as_str().unwrap().to_owned(),
        token: on_a["token"].as_str().unwrap().to_owned(),
        _redis: redis,
        _dir: dir,
        _a: a,
        _b: b,
        _everything: everything,
        _py: py,
    }
}

#[test]
fn relayed_answers_and_retries_reach_the_call_through_either_replica_or_are_refused_saying_so() {
    let r = replicas();
    assert_ne!(r.a_url, r.b_url);
    let a_run = (r.a_url.clone(), r.token.clone());
    let b_run = (r.b_url.clone(), r.token.clone());

    // (a) Agent 2025 × upstream 2025: the call on A, the answer POSTed to
    // B, which delivers it in A's upstream session; the call completes on
    // A's stream.
    let on_a = RawAgent::open(
        &r.a_url,
        &r.token,
        json!({ "sampling": {}, "elicitation": {} }),
    );
    let on_b = RawAgent {
        url: r.b_url.clone(),
        token: r.token.clone(),
        session: on_a.session.clone(),
    };
    let (relayed, posted, done) = on_a.call_posting(
        "everything__trigger-sampling-request",
        json!({ "prompt": "across", "maxTokens": 9 }),
        |m| {
            on_b.post(&answer_with(
                m,
                r#"{"role":"assistant","model":"replica-b","content":{"type":"text","text":"answered on B"}}"#,
            ))
        },
    );
    assert_eq!(relayed["method"].get(), r#""sampling/createMessage""#);
    assert_eq!(posted.0, 202, "B took the answer: {}", posted.1);
    let text = result_text(&done);
    assert!(
        text.contains("replica-b") && text.contains("answered on B"),
        "{text}"
    );

    // (b) Agent 2025 × upstream 2026-07-28: the call waits on A; an answer
    // reaching B (which does not hold it) is refused -32602 saying so, and
    // the same answer on A completes the call.
    let (relayed, posted, done) = on_a.call_posting("pyup__greet", json!({}), |m| {
        let answer = answer_with(m, r#"{"action":"accept","content":{"name":"Ada"}}"#);
        let (status, body) = on_b.post(&answer);
        assert_eq!(status, 400, "{body}");
        let error: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(error["error"]["code"], -32602, "{error}");
        let message = error["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("a gateway replica that does not hold the call")
                && message.contains("make the tool call again"),
            "{message}"
        );
        on_a.post(&answer)
    });
    assert_eq!(relayed["method"].get(), r#""elicitation/create""#);
    assert_eq!(posted.0, 202, "{}", posted.1);
    assert_eq!(result_text(&done), "Hello, Ada!", "{done}");

    // (b) Agent 2026-07-28 × upstream 2025: the upstream's call is held on
    // A; a retry reaching B is refused -32602 saying so, the same retry on
    // A completes it.
    let caps = json!({ "sampling": {} });
    let (status, first) = modern_call(
        &a_run,
        "everything__trigger-sampling-request",
        json!({ "prompt": "held", "maxTokens": 9 }),
        caps.clone(),
        None,
    );
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    let state = first["result"]["requestState"].as_str().unwrap().to_owned();
    let key = first_input_request(&first);
    let sampled = json!({ key.as_str(): {
        "role": "assistant", "model": "held-model",
        "content": { "type": "text", "text": "held answer" } } });
    let (_, refused) = modern_call(
        &b_run,
        "everything__trigger-sampling-request",
        json!({ "prompt": "held", "maxTokens": 9 }),
        caps.clone(),
        Some((sampled.clone(), &state)),
    );
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("held by another gateway replica")
            && message.contains("make the original call again"),
        "{message}"
    );
    let (status, resumed) = modern_call(
        &a_run,
        "everything__trigger-sampling-request",
        json!({ "prompt": "held", "maxTokens": 9 }),
        caps.clone(),
        Some((sampled, &state)),
    );
    assert_eq!(status, 200, "{resumed}");
    let text = result_text(&resumed);
    assert!(text.contains("held answer"), "{text}");

    // (c) Agent 2026-07-28 × upstream 2026-07-28: asked on A, resumed on B.
    let caps = json!({ "elicitation": {} });
    let (_, first) = modern_call(&a_run, "pyup__greet", json!({}), caps.clone(), None);
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    let state = first["result"]["requestState"].as_str().unwrap().to_owned();
    let key = first_input_request(&first);
    let accept = json!({ key.as_str(): { "action": "accept", "content": { "name": "Grace" } } });
    let (status, resumed) = modern_call(
        &b_run,
        "pyup__greet",
        json!({}),
        caps,
        Some((accept, &state)),
    );
    assert_eq!(status, 200, "{resumed}");
    assert_eq!(result_text(&resumed), "Hello, Grace!", "{resumed}");
}

#[test]
fn an_upstream_killed_mid_relay_ends_its_call_and_cancels_its_request_but_no_other_streams() {
    let served = serve();
    let admin = served.admin_token();
    let legacy = [("UPSTREAM_LEGACY_ONLY", "1")];
    let mut gone = start_python_upstream_with(&legacy);
    let kept = start_python_upstream_with(&legacy);
    let (gone_port, kept_port) = (gone.port, kept.port);
    for (name, port) in [("pygone", gone_port), ("pykept", kept_port)] {
        register_python_upstream(&served.url, &admin, "acme", name, port);
    }
    let response = http()
        .post(format!("{}/v1/runs", served.url))
        .bearer_auth(&admin)
        .json(&json!({
            "tenant": "acme",
            "run": "killed-1",
            "capabilities": ["upstream:pygone:*", "upstream:pykept:*"],
        }))
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 201);
    let run: Value = response.json().unwrap();
    let agent = RawAgent::open(
        run["mcp_url"].as_str().unwrap(),
        run["token"].as_str().unwrap(),
        json!({ "sampling": {} }),
    );

    let (asked_tx, asked_rx) = std::sync::mpsc::channel::<()>();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|scope| {
        // Another call of the run, on the other upstream's stream: its
        // relayed request is pending at the agent while the first
        // upstream dies, and is answered afterwards.
        let (asked_tx, go_rx, agent) = (asked_tx, std::sync::Mutex::new(go_rx), &agent);
        let kept = scope.spawn(move || {
            agent.call_posting("pykept__muse", json!({ "topic": "kept" }), |m| {
                asked_tx.send(()).unwrap();
                go_rx.lock().unwrap().recv().unwrap();
                agent.post(&answer_with(
                    m,
                    r#"{"role":"assistant","model":"m","content":{"type":"text","text":"still here"}}"#,
                ))
            })
        });
        asked_rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("the kept upstream's request reached the agent");

        // The call whose upstream is killed while its request is pending
        // at the agent.
        let body = mcp::tools_call(8, "pygone__muse", json!({ "topic": "gone" }));
        let response = http()
            .post(&agent.url)
            .bearer_auth(&agent.token)
            .header("accept", mcp::ACCEPT)
            .header("mcp-session-id", &agent.session)
            .header("mcp-protocol-version", REVISION)
            .json(&body)
            .send()
            .unwrap();
        assert_eq!(response.status().as_u16(), 200);
        let mut messages = BufReader::new(response)
            .lines()
            .map_while(Result::ok)
            .filter_map(|line| {
                line.strip_prefix("data: ")
                    .map(|data| serde_json::from_str::<Value>(data).unwrap())
            });
        let relayed = messages.next().expect("the relayed request");
        assert_eq!(relayed["method"], "sampling/createMessage", "{relayed}");
        let started = std::time::Instant::now();
        gone.process.0.kill().unwrap();
        gone.process.0.wait().unwrap();
        let rest: Vec<Value> = messages.collect();
        assert!(
            started.elapsed() < std::time::Duration::from_secs(15),
            "the call ended in bounded time"
        );
        let cancelled: Vec<&Value> = rest
            .iter()
            .filter(|m| m["method"] == "notifications/cancelled")
            .collect();
        assert_eq!(cancelled.len(), 1, "{rest:?}");
        assert_eq!(cancelled[0]["params"]["requestId"], relayed["id"]);
        let ended = rest.last().expect("the call's response");
        assert_eq!(ended["id"], 8, "{ended}");
        assert_eq!(ended["result"]["isError"], true, "{ended}");
        let text = result_text(ended);
        assert!(text.contains("pygone"), "a correlated error: {text}");

        // The other stream's request was not cancelled: answered now, its
        // call completes.
        go_tx.send(()).unwrap();
        let (_, posted, done) = kept.join().unwrap();
        assert_eq!(posted.0, 202, "{}", posted.1);
        assert_eq!(result_text(&done), "model m says: still here", "{done}");
    });
}

#[test]
fn a_relayed_answer_or_request_state_used_once_is_refused_on_either_replica() {
    let r = replicas();
    let a_run = (r.a_url.clone(), r.token.clone());
    let b_run = (r.b_url.clone(), r.token.clone());

    // Agent 2026-07-28 × upstream 2026-07-28: the retry completes on A;
    // the same retry again, on B or on A, reaches no upstream.
    let caps = json!({ "elicitation": {} });
    let (_, first) = modern_call(&a_run, "pyup__greet", json!({}), caps.clone(), None);
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    let state = first["result"]["requestState"].as_str().unwrap().to_owned();
    let key = first_input_request(&first);
    let accept = json!({ key.as_str(): { "action": "accept", "content": { "name": "Once" } } });
    let (status, resumed) = modern_call(
        &a_run,
        "pyup__greet",
        json!({}),
        caps.clone(),
        Some((accept.clone(), &state)),
    );
    assert_eq!(status, 200, "{resumed}");
    assert_eq!(result_text(&resumed), "Hello, Once!", "{resumed}");
    for replica in [&b_run, &a_run] {
        let (_, replayed) = modern_call(
            replica,
            "pyup__greet",
            json!({}),
            caps.clone(),
            Some((accept.clone(), &state)),
        );
        assert_eq!(replayed["error"]["code"], -32602, "{replayed}");
        let message = replayed["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("requestState was already used"),
            "{message}"
        );
    }

    // Agent 2025 × upstream 2025: the answer is delivered through B; the
    // same answer again, on A or on B, is refused and never delivered.
    let on_a = RawAgent::open(&r.a_url, &r.token, json!({ "sampling": {} }));
    let on_b = RawAgent {
        url: r.b_url.clone(),
        token: r.token.clone(),
        session: on_a.session.clone(),
    };
    let sent = std::sync::Mutex::new(String::new());
    let (_, posted, done) = on_a.call_posting(
        "everything__trigger-sampling-request",
        json!({ "prompt": "once", "maxTokens": 9 }),
        |m| {
            let answer = answer_with(
                m,
                r#"{"role":"assistant","model":"once","content":{"type":"text","text":"delivered once"}}"#,
            );
            *sent.lock().unwrap() = answer.clone();
            on_b.post(&answer)
        },
    );
    assert_eq!(posted.0, 202, "{}", posted.1);
    assert!(result_text(&done).contains("delivered once"), "{done}");
    let answer = sent.lock().unwrap().clone();
    for agent in [&on_a, &on_b] {
        let (status, body) = agent.post(&answer);
        assert_eq!(status, 400, "{body}");
        let error: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(error["error"]["code"], -32602, "{error}");
        let message = error["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("response id was already used"),
            "{message}"
        );
    }
}
