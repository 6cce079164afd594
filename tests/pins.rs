//! Black-box: pinned upstream tool definitions, with a Python SDK upstream
//! that changes a tool's description while runs use it (a "rug pull") and
//! the official Python SDK client (2026-07-28) as the agent.
//!
//! One scenario, in order: an upstream registered without trusting its
//! first listing offers no tool until a tenant admin approves it (hidden
//! from `tools/list`, refused when called, audited `pending`); the CLI
//! lists it as a new tool and approves it; the run then sees and calls
//! it, audited with the approved definition's hash; the upstream changes
//! the description: the tool is hidden and refused again, the CLI shows
//! that the description changed, an approval of the old hash is refused,
//! and once the new definition is approved through the API the run calls
//! it again, audited with the new hash.

use crate::support;

use serde_json::{Value, json};
use std::time::{Duration, Instant};
use support::upstreams::*;
use support::*;

fn listed(out: &Value, name: &str) -> bool {
    out["tools"].as_array().unwrap().iter().any(|t| t == name)
}

fn call<'a>(out: &'a Value, name: &str) -> &'a Value {
    out["calls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no call {name} in {out}"))
}

/// Lists and calls `py__forecast` until `done` holds (views follow
/// approvals within the registry TTL, listings within the tools TTL).
fn until(url: &str, token: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = sdk_agent(
            "py",
            url,
            token,
            &[("py__forecast", json!({ "city": "Oslo" }))],
        );
        if done(&out) {
            return out;
        }
        assert!(Instant::now() < deadline, "{what} within 30 s: {out}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn a_changed_upstream_tool_is_held_back_until_a_tenant_admin_approves_it() {
    let served = serve_with(&[("CORKBOARD_UPSTREAM_TOOLS_TTL_MS", "500")]);
    let admin = served.admin_token();
    let py = start_python_upstream_with(&[("UPSTREAM_RUG_PULL", "1")]);
    let port = py.port;
    let api = |method: reqwest::Method, path: &str, body: Option<Value>| {
        let mut request = http()
            .request(method, format!("{}{path}", served.url))
            .bearer_auth(&admin);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().unwrap();
        let status = response.status().as_u16();
        (status, response.json::<Value>().unwrap_or(Value::Null))
    };
    // Registered without trusting its first listing.
    let (status, body) = api(
        reqwest::Method::PUT,
        "/v1/tenants/acme/upstreams/py",
        Some(json!({
            "url": format!("http://127.0.0.1:{port}/mcp"),
            "header": "X-Upstream-Key",
            "credential": PY_CREDENTIAL,
        })),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["trust_first_listing"], false);
    let (status, run) = api(
        reqwest::Method::POST,
        "/v1/runs",
        Some(
            json!({ "tenant": "acme", "run": "pin-1", "capabilities": ["issues:read", "upstream:py:*"] }),
        ),
    );
    assert_eq!(status, 201, "{run}");
    let (url, token) = (
        run["mcp_url"].as_str().unwrap().to_owned(),
        run["token"].as_str().unwrap().to_owned(),
    );

    // New: hidden and refused, saying why and how to approve it.
    let out = sdk_agent(
        "py",
        &url,
        &token,
        &[("py__forecast", json!({ "city": "Oslo" }))],
    );
    assert!(!listed(&out, "py__forecast"), "{out}");
    assert!(
        !listed(&out, "py__add"),
        "no tool of it is approved yet: {out}"
    );
    assert!(
        listed(&out, "get_issue"),
        "the board's tools are there: {out}"
    );
    let refused = call(&out, "py__forecast");
    let why = refused["error"]
        .as_str()
        .or(refused["text"].as_str())
        .unwrap_or_default();
    assert!(
        why.contains("pending") && why.contains("corkboard upstream approve py forecast"),
        "{refused}"
    );

    // The CLI shows it as a new tool, and approves what it shows.
    let env = [("CORKBOARD_ADMIN_TOKEN", admin.as_str())];
    let cli = |args: &[&str]| {
        let mut all = vec!["upstream"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--server", &served.url, "--tenant", "acme"]);
        let out = served.cli(&all, &env);
        assert!(out.status.success(), "{args:?}: {}", stderr_of(&out));
        stdout_of(&out)
    };
    let shown = cli(&["tools", "py"]);
    let line = shown
        .lines()
        .find(|l| l.starts_with("forecast "))
        .unwrap_or_else(|| panic!("{shown}"));
    assert!(
        line.contains("pending") && line.contains("new tool"),
        "{line}"
    );
    let approved = cli(&["approve", "py", "forecast"]);
    assert!(
        approved.contains("Says the weather in a city."),
        "{approved}"
    );
    let (_, tools) = api(
        reqwest::Method::GET,
        "/v1/tenants/acme/upstreams/py/tools",
        None,
    );
    let first_hash = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tool"] == "forecast")
        .map(|t| t["hash"].as_str().unwrap().to_owned())
        .unwrap();

    // Approved: listed and served.
    let out = until(&url, &token, "the approved tool is served", |out| {
        listed(out, "py__forecast")
    });
    assert_eq!(call(&out, "py__forecast")["text"], "sunny in Oslo", "{out}");

    // The rug pull: the description changes under the runs.
    let pulled = http()
        .post(format!("http://127.0.0.1:{port}/rug-pull"))
        .header("X-Upstream-Key", PY_CREDENTIAL)
        .send()
        .unwrap();
    assert_eq!(pulled.status().as_u16(), 200);
    let out = until(&url, &token, "the changed tool is held back", |out| {
        !listed(out, "py__forecast")
    });
    let refused = call(&out, "py__forecast");
    assert!(
        refused.to_string().contains("pending"),
        "a changed tool is refused: {refused}"
    );
    let shown = cli(&["tools", "py"]);
    let line = shown.lines().find(|l| l.starts_with("forecast ")).unwrap();
    assert!(
        line.contains("pending") && line.contains("changed: description"),
        "{line}"
    );
    let (_, tools) = api(
        reqwest::Method::GET,
        "/v1/tenants/acme/upstreams/py/tools",
        None,
    );
    let forecast = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tool"] == "forecast")
        .unwrap()
        .clone();
    let second_hash = forecast["hash"].as_str().unwrap().to_owned();
    assert_ne!(second_hash, first_hash);
    assert_eq!(forecast["approved"]["hash"], first_hash.as_str());
    assert!(
        forecast["definition"]["description"]
            .as_str()
            .unwrap()
            .contains("id_rsa"),
        "the admin is shown the new text: {forecast}"
    );
    let (status, stale) = api(
        reqwest::Method::POST,
        "/v1/tenants/acme/upstreams/py/tools/forecast/approve",
        Some(json!({ "hash": first_hash })),
    );
    assert_eq!(status, 422, "approving the old definition again: {stale}");
    let (status, body) = api(
        reqwest::Method::POST,
        "/v1/tenants/acme/upstreams/py/tools/forecast/approve",
        Some(json!({ "hash": second_hash })),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "approved");
    let out = until(&url, &token, "the re-approved tool is served", |out| {
        listed(out, "py__forecast")
    });
    assert_eq!(call(&out, "py__forecast")["text"], "sunny in Oslo", "{out}");

    // Each call's audit record carries the definition it was served
    // under; refused calls are audited `pending`. Records are written in
    // batches: wait for the last.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, audit) = api(
            reqwest::Method::GET,
            "/v1/tenants/acme/audit?run=pin-1&limit=100",
            None,
        );
        assert_eq!(status, 200);
        let records = audit["records"].as_array().unwrap();
        let forecast: Vec<&Value> = records
            .iter()
            .filter(|r| r["tool"] == "py__forecast")
            .collect();
        let hashes_of_ok: Vec<&str> = forecast
            .iter()
            .filter(|r| r["outcome"] == "ok")
            .filter_map(|r| r["definition_hash"].as_str())
            .collect();
        let pending = forecast.iter().any(|r| r["outcome"] == "pending");
        if pending
            && hashes_of_ok.contains(&first_hash.as_str())
            && hashes_of_ok.contains(&second_hash.as_str())
        {
            assert!(
                hashes_of_ok
                    .iter()
                    .all(|h| *h == first_hash || *h == second_hash),
                "{audit}"
            );
            break;
        }
        assert!(Instant::now() < deadline, "audit records: {audit}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// A tool whose schema marks a parameter with `x-mcp-header` is called
/// through the gateway with the argument mirrored as its `Mcp-Param-*`
/// header (2026-07-28), which the Python SDK upstream reports back.
#[test]
fn an_upstream_tool_with_an_x_mcp_header_parameter_is_called_through_the_gateway() {
    let served = serve();
    let admin = served.admin_token();
    let py = start_python_upstream_with(&[("UPSTREAM_PARAM_HEADER", "1")]);
    register_python_upstream(&served.url, &admin, "acme", "py", py.port);
    let (url, token) = served.register_run(&admin, "hdr-1", &["upstream:py:routed"]);
    let out = sdk_agent(
        "py",
        &url,
        &token,
        &[("py__routed", json!({ "region": "eu-west-1" }))],
    );
    assert!(listed(&out, "py__routed"), "{out}");
    let routed = call(&out, "py__routed");
    assert_eq!(
        routed["text"], "region eu-west-1 via header eu-west-1",
        "the SDK agent mirrors the argument and the gateway accepts it: {routed}"
    );

    // The gateway re-exposes the tool with its `x-mcp-header` mark, so it
    // checks the header as a 2026-07-28 server must: a call without it,
    // or with another value, is refused 400 / -32020 before it reaches
    // the upstream.
    let body = mcp::modern_tools_call(7, "py__routed", json!({ "region": "eu-west-1" }));
    let (status, answer) = mcp_post(&url, &token, "tools/call", Some("py__routed"), &body);
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["error"]["code"], -32020, "{answer}");
    assert_eq!(answer["id"], 7, "correlated: {answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("Mcp-Param-Region header is missing"),
        "{answer}"
    );
    let mut request = http()
        .post(url)
        .header("Content-Type", "application/json")
        .bearer_auth(token)
        .header("Mcp-Param-Region", "us-east-1")
        .body(body.to_string());
    for (header, value) in mcp::modern_headers("tools/call", Some("py__routed")) {
        request = request.header(header, value);
    }
    let response = request.send().unwrap();
    assert_eq!(response.status().as_u16(), 400);
    let answer: Value = response.json().unwrap();
    assert_eq!(answer["error"]["code"], -32020, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("does not match"),
        "{answer}"
    );
}
