//! Black-box: a tenant's upstream MCP servers behind a run's gateway, with
//! upstreams nobody here wrote (the reference `@modelcontextprotocol/
//! server-everything`, a 2025-session server, and a Python SDK server
//! speaking 2026-07-28) and the official TypeScript (2025 session) and
//! Python (2026-07-28) SDK clients as the agent.
//!
//! One scenario, in order: register upstreams (CLI and API), register a
//! run whose grant allows some of their tools; the agents see exactly
//! those, namespaced, and not the upstream tool with a broken schema;
//! calls go through (credential injected: the Python upstream refuses any
//! request without it), refusals name the missing capability, everything
//! is audited; a restarted upstream (its session gone) is re-initialised
//! transparently; a stopped upstream answers "unavailable ... retry later"
//! at once; revoking the run stops upstream calls; and neither credential
//! appears in the agents' view, the server's logs, the audit trail or the
//! board file.

use crate::support;

use serde_json::{Value, json};
use std::time::{Duration, Instant};
use support::upstreams::*;
use support::*;

const EVERYTHING_CREDENTIAL: &str = "Bearer everything-credential-51d2e8";

fn call<'a>(out: &'a Value, name: &str) -> &'a Value {
    out["calls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no call {name} in {out}"))
}

fn names(out: &Value) -> Vec<String> {
    let mut names: Vec<String> = out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn upstream_tools_reach_the_agent_through_its_run_gateway_and_no_further() {
    let served = serve();
    let admin = served.admin_token();
    let py = start_python_upstream();
    let everything = start_everything();
    let (py_port, everything_port) = (py.port, everything.port);

    // Register: one with the CLI (credential from a file), one through the API.
    let credential_file = served.data_dir.path().join("py.credential");
    std::fs::write(&credential_file, format!("{PY_CREDENTIAL}\n")).unwrap();
    let out = served.cli(
        &[
            "upstream",
            "put",
            "--server",
            &served.url,
            "--tenant",
            "acme",
            "pyup",
            "--url",
            &format!("http://127.0.0.1:{py_port}/mcp"),
            "--header",
            "X-Upstream-Key",
            "--credential-file",
            credential_file.to_str().unwrap(),
            "--trust-first-listing",
        ],
        &[("CORKBOARD_ADMIN_TOKEN", &admin)],
    );
    assert!(out.status.success(), "upstream put: {}", stderr_of(&out));
    assert!(!stdout_of(&out).contains(PY_CREDENTIAL));
    let api = |method: reqwest::Method, path: &str, body: Option<Value>| {
        let mut request = http()
            .request(method, format!("{}{path}", served.url))
            .bearer_auth(&admin);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().unwrap();
        let status = response.status().as_u16();
        (status, response.text().unwrap_or_default())
    };
    let (status, body) = api(
        reqwest::Method::PUT,
        "/v1/tenants/acme/upstreams/everything",
        Some(json!({
            "url": format!("http://127.0.0.1:{everything_port}/mcp"),
            "header": "Authorization",
            "credential": EVERYTHING_CREDENTIAL,
            "trust_first_listing": true,
        })),
    );
    assert_eq!(status, 200, "{body}");
    for (name, header, field) in [
        ("Bad_Name", "X-Key", "name"),
        ("fine", "Mcp-Session-Id", "header"),
    ] {
        let (status, body) = api(
            reqwest::Method::PUT,
            &format!("/v1/tenants/acme/upstreams/{name}"),
            Some(
                json!({ "url": "http://127.0.0.1:9/mcp", "header": header, "credential": "x", "trust_first_listing": true }),
            ),
        );
        assert_eq!(status, 422, "{body}");
        assert!(body.contains(field), "{body}");
    }
    let (status, listed) = api(reqwest::Method::GET, "/v1/tenants/acme/upstreams", None);
    assert_eq!(status, 200);
    let listed: Value = serde_json::from_str(&listed).unwrap();
    let registered: Vec<&str> = listed["upstreams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["name"].as_str().unwrap())
        .collect();
    assert_eq!(registered, ["everything", "pyup"]);

    // A run allowed all of pyup and two tools of everything.
    let (url, token) = served.register_run(
        &admin,
        "up-1",
        &[
            "issues:read",
            "upstream:pyup:*",
            "upstream:everything:echo",
            "upstream:everything:get-sum",
        ],
    );

    let expected = [
        "board_stats",
        "collect_approval",
        "everything__echo",
        "everything__get-sum",
        "get_issue",
        "list_issues",
        "pyup__add",
        "pyup__bad_sample",
        "pyup__echo_answers",
        "pyup__echo_exchange",
        "pyup__echo_len",
        "pyup__greet",
        "pyup__muse",
        "pyup__roots",
        "pyup__sessions",
        "pyup__slow",
        "search_issues",
    ];
    let ts = sdk_agent(
        "ts",
        &url,
        &token,
        &[
            ("pyup__add", json!({ "a": 2, "b": 40 })),
            ("everything__echo", json!({ "message": "hello upstream" })),
            ("everything__get-env", json!({})),
        ],
    );
    assert_eq!(
        names(&ts),
        expected,
        "the grant's upstream tools, namespaced; not the broken one, not the others"
    );
    let add = call(&ts, "pyup__add");
    assert_eq!(add["isError"], false, "{add}");
    assert_eq!(add["structured"], json!({ "result": 42 }));
    let echo = call(&ts, "everything__echo");
    assert_eq!(echo["text"], "Echo: hello upstream", "{echo}");
    let denied = call(&ts, "everything__get-env");
    let why = denied["error"].as_str().unwrap_or_default();
    assert!(
        why.contains("upstream:everything:get-env"),
        "a call outside the grant names the capability it needs: {denied}"
    );

    let py = {
        let out = sdk_agent(
            "py",
            &url,
            &token,
            &[("everything__get-sum", json!({ "a": 5, "b": 6 }))],
        );
        assert_eq!(names(&out), expected);
        let sum = call(&out, "everything__get-sum");
        assert!(
            sum["text"].as_str().unwrap().contains("11"),
            "the 2026-07-28 agent reaches the 2025-session upstream: {sum}"
        );
        (py, out)
    };

    // The upstream restarts: the gateway's session with it is gone, and a
    // new one is opened without the agent noticing.
    drop(everything);
    let _everything = start_everything_on(everything_port);
    let again = sdk_agent(
        "ts",
        &url,
        &token,
        &[("everything__echo", json!({ "message": "after restart" }))],
    );
    let echo = call(&again, "everything__echo");
    assert_eq!(echo["text"], "Echo: after restart", "{echo}");

    // The Python upstream stops: its calls say so at once, correlated as
    // tool errors, and its tools stay listed.
    drop(py.0);
    let started = Instant::now();
    let down = sdk_agent(
        "ts",
        &url,
        &token,
        &[("pyup__add", json!({ "a": 1, "b": 1 }))],
    );
    let add = call(&down, "pyup__add");
    assert_eq!(add["isError"], true, "{add}");
    let text = add["text"].as_str().unwrap();
    assert!(
        text.starts_with("upstream pyup unavailable:") && text.ends_with("retry later"),
        "{text}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "within the documented bound"
    );
    assert!(names(&down).contains(&"pyup__add".to_owned()));

    // Audit: every upstream call, under its namespaced name.
    let (status, audit) = api(
        reqwest::Method::GET,
        "/v1/tenants/acme/audit?run=up-1&limit=100",
        None,
    );
    assert_eq!(status, 200, "{audit}");
    let records: Value = serde_json::from_str(&audit).unwrap();
    let records = records["records"]
        .as_array()
        .or(records.as_array())
        .cloned()
        .unwrap_or_default();
    let outcome_of = |tool: &str| -> Vec<String> {
        records
            .iter()
            .filter(|r| r["tool"] == tool)
            .map(|r| r["outcome"].as_str().unwrap().to_owned())
            .collect()
    };
    // Audit records are written in batches (200 ms); the last call's may
    // still be on its way, the earlier ones are there.
    assert!(
        outcome_of("pyup__add").contains(&"ok".to_owned()),
        "{audit}"
    );
    assert!(
        outcome_of("everything__get-env").contains(&"denied".to_owned()),
        "{audit}"
    );
    assert!(
        outcome_of("everything__get-sum").contains(&"ok".to_owned()),
        "{audit}"
    );

    // Revoked: no further upstream call.
    let response = http()
        .delete(format!("{}/v1/runs/acme/up-1", served.url))
        .bearer_auth(&admin)
        .send()
        .unwrap();
    assert!(response.status().is_success(), "{:?}", response.status());
    let out = node(
        "upstream/agent.mjs",
        &[&url, &token, r#"everything__echo={"message":"revoked"}"#],
    );
    assert!(!out.status.success(), "a revoked run's agent gets nowhere");

    // The credentials appear nowhere the agent or an operator looks.
    let log = std::fs::read_to_string(&served.log).unwrap();
    assert!(log.contains("upstream call"), "the calls were logged");
    // The board file, the audit file, and their logs.
    let data = served.data_dir.path().join("data");
    let mut files = Vec::new();
    for file in ["board.sqlite3", "board.audit.sqlite3"] {
        files.push(std::fs::read(data.join(file)).unwrap());
        files.push(std::fs::read(data.join(format!("{file}-wal"))).unwrap_or_default());
    }
    for secret in [PY_CREDENTIAL, "everything-credential-51d2e8"] {
        for (what, text) in [
            ("the server log", log.as_str()),
            ("the audit trail", audit.as_str()),
            ("the upstream list", &listed.to_string()),
            ("the TS agent's view", &ts.to_string()),
            ("the Python agent's view", &py.1.to_string()),
            ("the down agent's view", &down.to_string()),
        ] {
            assert!(!text.contains(secret), "{what} holds a credential");
        }
        for bytes in &files {
            assert!(
                !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                "a board or audit file holds a credential in clear"
            );
        }
    }
}

/// Image, audio, embedded-resource and `resource_link` content from
/// upstreams of both eras (server-everything in a 2025 session, the
/// Python SDK server in 2026-07-28) reaches agents of both eras (the
/// TypeScript SDK in a 2025 session, the Python SDK in 2026-07-28) as the
/// blocks they are, in order, the text in them cleaned; before, each was
/// replaced by a note saying it was not relayed.
#[test]
fn non_text_content_from_upstreams_of_both_eras_reaches_agents_of_both_eras() {
    let served = serve();
    let admin = served.admin_token();
    let py = start_python_upstream_with(&[("UPSTREAM_MEDIA", "1")]);
    let everything = start_everything();
    let (py_port, everything_port) = (py.port, everything.port);
    register_python_upstream(&served.url, &admin, "acme", "pyup", py_port);
    let response = http()
        .put(format!(
            "{}/v1/tenants/acme/upstreams/everything",
            served.url
        ))
        .bearer_auth(&admin)
        .json(&json!({
            "url": format!("http://127.0.0.1:{everything_port}/mcp"),
            "header": "Authorization",
            "credential": EVERYTHING_CREDENTIAL,
            "trust_first_listing": true,
        }))
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let (url, token) = served.register_run(
        &admin,
        "media-1",
        &[
            "upstream:pyup:media",
            "upstream:everything:get-tiny-image",
            "upstream:everything:get-resource-links",
        ],
    );
    let kinds = |call: &Value| -> Vec<String> {
        call["content"]
            .as_array()
            .unwrap_or_else(|| panic!("no content: {call}"))
            .iter()
            .map(|c| c["type"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    for kind in ["ts", "py"] {
        let out = sdk_agent(
            kind,
            &url,
            &token,
            &[
                ("everything__get-tiny-image", json!({})),
                ("everything__get-resource-links", json!({ "count": 2 })),
                ("pyup__media", json!({})),
            ],
        );
        let image = call(&out, "everything__get-tiny-image");
        assert_eq!(image["isError"], false, "{kind}: {image}");
        assert_eq!(kinds(image), ["text", "image", "text"], "{kind}: {image}");
        let block = &image["content"][1];
        assert_eq!(block["mimeType"], "image/png", "{kind}");
        assert!(
            block["data"].as_str().unwrap().starts_with("iVBORw0KGgo"),
            "{kind}: the image's bytes"
        );
        let links = call(&out, "everything__get-resource-links");
        assert_eq!(links["isError"], false, "{kind}: {links}");
        let link_kinds = kinds(links);
        assert_eq!(
            link_kinds.iter().filter(|k| *k == "resource_link").count(),
            2,
            "{kind}: {links}"
        );
        let media = call(&out, "pyup__media");
        assert_eq!(media["isError"], false, "{kind}: {media}");
        assert_eq!(
            kinds(media),
            ["image", "resource_link", "resource", "text"],
            "{kind}: {media}"
        );
        assert_eq!(media["content"][1]["uri"], "file:///report.txt");
        assert_eq!(
            media["content"][2]["resource"]["text"], "visibletext",
            "{kind}: embedded text is cleaned like any relayed text"
        );
        assert_eq!(media["text"], "media done", "{kind}");
    }
}

/// A 2026-07-28 upstream refuses a request with HTTP 400 and a JSON-RPC
/// error (the Python SDK server's `-32021`: the client did not declare
/// sampling, which `muse` needs): the agent gets the upstream's code and
/// reason as a tool error, not "unavailable ... retry later", which no
/// retry could fix.
#[test]
fn a_2026_upstreams_json_rpc_refusal_reaches_the_agent_with_its_code() {
    let served = serve();
    let admin = served.admin_token();
    let py = start_python_upstream();
    register_python_upstream(&served.url, &admin, "acme", "pyup", py.port);
    let response = http()
        .post(format!("{}/v1/runs", served.url))
        .bearer_auth(&admin)
        .json(&json!({ "tenant": "acme", "run": "refusal-1", "capabilities": ["upstream:pyup:muse"] }))
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 201);
    let run: Value = response.json().unwrap();
    // The Python SDK agent pinned to 2026-07-28 declares no sampling.
    let out = sdk_agent(
        "py",
        run["mcp_url"].as_str().unwrap(),
        run["token"].as_str().unwrap(),
        &[("pyup__muse", json!({ "topic": "tea" }))],
    );
    let muse = call(&out, "pyup__muse");
    assert_eq!(muse["isError"], true, "{muse}");
    let text = muse["text"].as_str().unwrap_or_default();
    assert!(
        text.starts_with("upstream pyup refused the request (JSON-RPC -32021)"),
        "{muse}"
    );
    assert!(text.contains("sampling"), "the upstream's reason: {muse}");
    assert!(!text.contains("retry later"), "{muse}");
}
