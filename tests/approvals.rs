//! Black-box: calls that need a person's approval, through `corkboard serve`.
//!
//! The official SDK clients in both eras (the TypeScript SDK 1.x and 2.x,
//! the Python SDK) see the pending answer with its handle, and the result
//! after a person approved; an approval runs its call once, only with the
//! approved arguments, not past its expiry; a denial answers the person's
//! reason; viewers and run tokens cannot decide; `approval.requested` and
//! `approval.decided` reach a webhook. In a real browser
//! (`tests/clients/web/approvals.spec.mjs`) an approver approves one call
//! and denies another. Headless Claude Code (the real CLI) gets the
//! pending answer and collects the result with a scripted model.

use crate::support;

use reqwest::Method;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::*;

const CAPS: &str = "issues:read,issues:create,issues:update,comments:write";

fn api(
    serve: &Serve,
    method: Method,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = http()
        .request(method, format!("{}{path}", serve.url()))
        .bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().expect("admin API answers");
    let status = response.status().as_u16();
    (status, response.json().unwrap_or(Value::Null))
}

/// A run `run` of tenant acme with an issue titled `title`, whose
/// `add_comment` calls a policy puts behind a person's approval: the
/// agent and the issue's id.
fn gated_comments(serve: &Serve, admin: &str, run: &str, title: &str) -> (Granted, String) {
    let agent = serve.grant("acme", run, CAPS);
    let (_, _, issue) = call(
        &agent.mcp_url,
        &agent.token,
        "create_issue",
        json!({ "title": title }),
    );
    set_policies(
        serve,
        admin,
        json!([{ "name": "comments", "tool": "add_comment" }]),
    );
    (agent, issue["id"].as_str().unwrap().to_owned())
}

fn set_policies(serve: &Serve, admin: &str, policies: Value) {
    let (status, reply) = api(
        serve,
        Method::PUT,
        "/v1/tenants/acme/approval-policies",
        admin,
        Some(json!({ "policies": policies })),
    );
    assert_eq!(status, 200, "{reply}");
}

fn decide(serve: &Serve, token: &str, id: &str, approve: bool, reason: &str) -> (u16, Value) {
    api(
        serve,
        Method::POST,
        &format!("/v1/tenants/acme/approvals/{id}/decision"),
        token,
        Some(json!({ "approve": approve, "reason": reason })),
    )
}

/// The approval handle a pending answer names.
fn handle_of(text: &str) -> String {
    let at = text
        .find("apr_")
        .unwrap_or_else(|| panic!("no approval handle in {text:?}"));
    text[at..at + 30].to_owned()
}

/// A raw stateless call: (is_error, text, structured).
fn call(url: &str, token: &str, tool: &str, args: Value) -> (bool, String, Value) {
    let (status, body) = mcp_call(url, token, tool, args);
    assert_eq!(status, 200, "{body}");
    let result = &body["result"];
    let text = result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    (
        result["isError"] == true,
        text,
        result["structuredContent"].clone(),
    )
}

fn awaits(text: &str) -> bool {
    text.contains("awaits a person's approval")
}

/// What a receiver got: each delivery's `Corkboard-Event` and body.
type Received = Arc<Mutex<Vec<(String, String)>>>;

/// A webhook receiver on a free port.
fn receiver() -> (u16, Received) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let received = Arc::new(Mutex::new(Vec::new()));
    let sink = received.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let (mut event, mut len) = (String::new(), 0usize);
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            loop {
                line.clear();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some((k, v)) = line.trim_end().split_once(':') {
                    match k.trim().to_ascii_lowercase().as_str() {
                        "corkboard-event" => event = v.trim().to_owned(),
                        "content-length" => len = v.trim().parse().unwrap_or(0),
                        _ => {}
                    }
                }
            }
            let mut body = vec![0; len];
            let _ = reader.read_exact(&mut body);
            sink.lock()
                .unwrap()
                .push((event, String::from_utf8_lossy(&body).into_owned()));
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
        }
    });
    (port, received)
}

#[test]
fn an_approval_runs_exactly_its_call_once_before_it_expires_and_only_people_decide() {
    let serve = Serve::start_with_env(&[("CORKBOARD_WEBHOOK_ALLOWED_HOSTS", "127.0.0.1")]);
    let admin = serve.admin_token("platform-admin", None);
    let approver = serve.admin_token("approver", Some("acme"));
    let viewer = serve.admin_token("viewer", Some("acme"));
    let agent = serve.grant("acme", "careful-agent", CAPS);
    let (port, hooks) = receiver();
    let (status, reply) = api(
        &serve,
        Method::POST,
        "/v1/tenants/acme/webhooks",
        &admin,
        Some(json!({
            "url": format!("http://127.0.0.1:{port}/hook"),
            "events": ["approval.requested", "approval.decided"],
        })),
    );
    assert_eq!(status, 201, "{reply}");

    let (_, _, issue) = call(
        &agent.mcp_url,
        &agent.token,
        "create_issue",
        json!({"title": "Keep open"}),
    );
    let id = issue["id"].as_str().unwrap().to_owned();
    set_policies(
        &serve,
        &admin,
        json!([{
            "name": "closing",
            "tool": "update_issue",
            "arguments": [{ "pointer": "/state", "glob": "clos*" }],
        }, {
            "name": "quick",
            "tool": "add_comment",
            "arguments": [{ "pointer": "/body", "glob": "late" }],
            "ttl_secs": 1,
        }, {
            "name": "talk",
            "tool": "add_comment",
        }]),
    );
    // Not covered (another state): runs at once.
    let (is_error, text, moved) = call(
        &agent.mcp_url,
        &agent.token,
        "update_issue",
        json!({"id": id, "state": "todo"}),
    );
    assert!(!is_error, "{text}");
    let version = moved["version"].as_u64().unwrap();

    let closing = json!({"id": id, "state": "closed", "expected_version": version});
    let (is_error, text, _) = call(
        &agent.mcp_url,
        &agent.token,
        "update_issue",
        closing.clone(),
    );
    assert!(is_error && awaits(&text), "{text}");
    let first = handle_of(&text);

    // Nobody but a person with the right role decides.
    assert_eq!(decide(&serve, &viewer, &first, true, "").0, 403, "a viewer");
    let (status, _) = decide(&serve, &agent.token, &first, true, "");
    assert!(
        status == 401 || status == 403,
        "a run token decided: {status}"
    );
    let (status, item) = api(
        &serve,
        Method::GET,
        &format!("/v1/tenants/acme/approvals/{first}"),
        &viewer,
        None,
    );
    assert_eq!(status, 200);
    assert_eq!(item["status"], "pending");
    assert_eq!(item["policy"], "closing");
    assert_eq!(item["policy_version"], 1);
    assert_eq!(item["run"], "careful-agent");
    assert!(item["arguments"].as_str().unwrap().contains("closed"));
    // What the run did recently (its audit records, written in batches).
    assert!(item["recent"].is_array(), "{item}");

    let (status, decided) = decide(&serve, &approver, &first, true, "fine");
    assert_eq!(status, 200, "{decided}");
    assert_eq!(decided["status"], "approved");
    let (status, again) = decide(&serve, &approver, &first, false, "changed my mind");
    assert_eq!(status, 409, "{again}");
    assert_eq!(again["error"]["code"], "approval_decided");

    // Other arguments: not the approved call, so it waits for its own.
    let other = json!({"id": id, "state": "closed", "close_reason": "not_planned", "expected_version": version});
    let (is_error, text, _) = call(&agent.mcp_url, &agent.token, "update_issue", other);
    assert!(is_error && awaits(&text), "{text}");
    assert_ne!(handle_of(&text), first);
    let (_, _, unchanged) = call(&agent.mcp_url, &agent.token, "get_issue", json!({"id": id}));
    assert_eq!(unchanged["state"], "todo");

    // The approved call runs, once.
    let (is_error, text, closed) = call(
        &agent.mcp_url,
        &agent.token,
        "update_issue",
        closing.clone(),
    );
    assert!(!is_error, "{text}");
    assert_eq!(closed["state"], "closed");
    let (is_error, text, _) = call(&agent.mcp_url, &agent.token, "update_issue", closing);
    assert!(is_error && awaits(&text), "a replay must not run: {text}");
    assert_ne!(handle_of(&text), first);

    // Denied: the reason reaches the agent.
    let comment = json!({"issue_id": id, "body": "may I?"});
    let (_, text, _) = call(&agent.mcp_url, &agent.token, "add_comment", comment.clone());
    let denied = handle_of(&text);
    assert_eq!(
        decide(&serve, &approver, &denied, false, "not in this thread").0,
        200
    );
    let (is_error, text, _) = call(&agent.mcp_url, &agent.token, "add_comment", comment.clone());
    assert!(
        is_error && text.contains("not in this thread") && text.contains("denied"),
        "{text}"
    );

    // Past its expiry (this policy's wait is one second): refused. The
    // approval may itself come too late on a slow machine (410); either
    // way the call does not run.
    let late = json!({"issue_id": id, "body": "late"});
    let (_, text, _) = call(&agent.mcp_url, &agent.token, "add_comment", late.clone());
    let expiring = handle_of(&text);
    let (status, reply) = decide(&serve, &approver, &expiring, true, "");
    assert!(status == 200 || status == 410, "{reply}");
    std::thread::sleep(Duration::from_millis(1100));
    let (is_error, text, _) = call(&agent.mcp_url, &agent.token, "add_comment", late);
    assert!(is_error && text.contains("expired"), "{text}");
    let (status, reply) = decide(&serve, &approver, &expiring, true, "");
    assert!(status == 409 || status == 410, "{reply}");
    let (_, _, read) = call(&agent.mcp_url, &agent.token, "get_issue", json!({"id": id}));
    let bodies: Vec<&str> = read["comments"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["body"].as_str())
        .collect();
    assert!(
        !bodies.contains(&"late") && !bodies.contains(&"may I?"),
        "{bodies:?}"
    );

    // Webhooks heard of the items and the decisions, without arguments.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let got = hooks.lock().unwrap().clone();
        let requested = got
            .iter()
            .filter(|(e, _)| e == "approval.requested")
            .count();
        let decided = got.iter().filter(|(e, _)| e == "approval.decided").count();
        if requested >= 6 && decided >= 2 {
            assert!(
                got.iter().all(|(_, body)| !body.contains("may I?")),
                "a webhook carried arguments"
            );
            break;
        }
        assert!(Instant::now() < deadline, "webhooks so far: {got:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One call through an official SDK client (`approval_agent.*`).
fn sdk_call(agent: &Granted, client: &str, tool: &str, args: &Value) -> Value {
    sdk_call_with(agent, client, tool, args, &[])
}

/// [`sdk_call`] with extra flags for the client script.
fn sdk_call_with(agent: &Granted, client: &str, tool: &str, args: &Value, extra: &[&str]) -> Value {
    let mut cmd = if client.starts_with("py") {
        let mut cmd = Command::new(repo_root().join("target/venv/bin/python"));
        cmd.arg("approval_agent.py");
        cmd
    } else {
        let mut cmd = Command::new("node");
        cmd.arg("approval_agent.mjs");
        cmd
    };
    let (sdk, mode) = match client {
        "ts-v1" => ("v1", "legacy"),
        "ts-v2-legacy" => ("v2", "legacy"),
        "ts-v2-2026" => ("v2", "2026-07-28"),
        "py-legacy" => ("", "legacy"),
        _ => ("", "2026-07-28"),
    };
    cmd.current_dir(repo_root().join("tests/clients"))
        .args(["--url", &agent.mcp_url, "--tool", tool, "--mode", mode])
        .env("CORKBOARD_TOKEN", &agent.token)
        .env("APPROVAL_ARGS", args.to_string());
    if !sdk.is_empty() {
        cmd.args(["--sdk", sdk]);
    }
    cmd.args(extra);
    let out = run(&mut cmd);
    let stdout = stdout_of(&out);
    let reply: Value = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("{client} printed nothing\nstderr:\n{}", stderr_of(&out)));
    assert_eq!(
        reply["ok"],
        true,
        "{client}: {reply}\nstderr:\n{}",
        stderr_of(&out)
    );
    reply
}

#[test]
fn sdk_clients_in_both_eras_see_the_pending_answer_then_the_result() {
    // Not held (0): every client, 2025 sessions too, gets the pending
    // answer at once; holding is tested below.
    let serve = Serve::start_with_env(&[("CORKBOARD_APPROVAL_HOLD_MS", "0")]);
    let admin = serve.admin_token("platform-admin", None);
    let approver = serve.admin_token("approver", Some("acme"));
    let (agent, id) = gated_comments(&serve, &admin, "sdk-agent", "Talk");
    let clients = [
        "ts-v1",
        "ts-v2-legacy",
        "ts-v2-2026",
        "py-legacy",
        "py-2026",
    ];
    for client in clients {
        let args = json!({"issue_id": id, "body": format!("from {client}")});
        let pending = sdk_call(&agent, client, "add_comment", &args);
        let text = pending["text"].as_str().unwrap_or_default();
        assert!(
            pending["is_error"] == true && awaits(text),
            "{client}: {pending}"
        );
        let (status, decided) = decide(&serve, &approver, &handle_of(text), true, "");
        assert_eq!(status, 200, "{decided}");
        let done = sdk_call(&agent, client, "add_comment", &args);
        assert_eq!(done["is_error"], false, "{client}: {done}");
        assert!(
            done["text"]
                .as_str()
                .unwrap_or_default()
                .contains(&format!("from {client}"))
                || !done["structured"].is_null(),
            "{client}: {done}"
        );
    }
    let (_, _, read) = call(&agent.mcp_url, &agent.token, "get_issue", json!({"id": id}));
    let bodies: Vec<String> = read["comments"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["body"].as_str().map(str::to_owned))
        .collect();
    for client in clients {
        assert_eq!(
            bodies
                .iter()
                .filter(|b| **b == format!("from {client}"))
                .count(),
            1,
            "{client}'s approved comment ran once: {bodies:?}"
        );
    }
}

#[test]
fn an_approver_approves_one_call_and_denies_another_in_a_real_browser() {
    assert!(
        std::path::Path::new("/usr/bin/chromium").exists(),
        "/usr/bin/chromium is missing: install Debian chromium (scripts/setup-test-deps does)"
    );
    // The page's agent (a 2025 session) gets pending answers at once.
    let serve = Serve::start_with_env(&[("CORKBOARD_APPROVAL_HOLD_MS", "0")]);
    let admin = serve.admin_token("platform-admin", None);
    set_policies(
        &serve,
        &admin,
        json!([
            { "name": "comments", "tool": "add_comment" },
            { "name": "closing", "tool": "update_issue", "arguments": [{ "pointer": "/state", "glob": "closed" }] },
        ]),
    );
    let agent = serve.grant("acme", "browser-agent", CAPS);
    let out = run(Command::new("node")
        .current_dir(repo_root().join("tests/clients"))
        .arg("web/approvals.spec.mjs")
        .args([
            "--url",
            serve.url(),
            "--mcp-url",
            &agent.mcp_url,
            "--tenant",
            "acme",
        ])
        .env("WEB_TEST_RUN_TOKEN", &agent.token)
        .env(
            "WEB_TEST_APPROVER_JWT",
            serve.admin_token("approver", Some("acme")),
        )
        .env(
            "WEB_TEST_VIEWER_JWT",
            serve.admin_token("viewer", Some("acme")),
        ));
    let stdout = stdout_of(&out);
    let summary: Value = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| {
            panic!(
                "no summary\nstdout:\n{stdout}\nstderr:\n{}",
                stderr_of(&out)
            )
        });
    assert_eq!(
        summary["ok"],
        true,
        "{}\nstderr:\n{}",
        summary["error"],
        stderr_of(&out)
    );
    for name in ["pending", "decided", "results"] {
        assert!(
            !summary["checks"][name].is_null(),
            "check {name} did not run: {summary}"
        );
    }
}

/// The collect tool: a handle answers pending (with the expiry) until a
/// person decides, then runs the approved call once and answers its
/// result; collecting again, or repeating the call, runs nothing more; a
/// denial answers the person's reason; another run cannot collect the
/// handle; both calls are audited.
#[test]
fn the_collect_tool_answers_pending_then_runs_the_approved_call_once() {
    let serve = Serve::start();
    let admin = serve.admin_token("platform-admin", None);
    let approver = serve.admin_token("approver", Some("acme"));
    let agent = serve.grant("acme", "collector", CAPS);
    let stranger = serve.grant("acme", "stranger", CAPS);
    let (_, _, issue) = call(
        &agent.mcp_url,
        &agent.token,
        "create_issue",
        json!({"title": "Collect here"}),
    );
    let id = issue["id"].as_str().unwrap().to_owned();
    set_policies(
        &serve,
        &admin,
        json!([{ "name": "talk", "tool": "add_comment" }]),
    );
    let hello = json!({"issue_id": id, "body": "hello"});
    let (is_error, text, _) = call(&agent.mcp_url, &agent.token, "add_comment", hello.clone());
    assert!(is_error && awaits(&text), "{text}");
    assert!(
        text.contains("collect_approval"),
        "names the way to collect: {text}"
    );
    let handle = handle_of(&text);
    let collect = json!({ "handle": handle });

    let (is_error, text, pending) = call(
        &agent.mcp_url,
        &agent.token,
        "collect_approval",
        collect.clone(),
    );
    assert!(!is_error, "{text}");
    assert_eq!(pending["status"], "pending", "{pending}");
    assert_eq!(pending["tool"], "add_comment");
    assert!(pending["expires_at"].is_string(), "{pending}");
    let (is_error, text, _) = call(
        &stranger.mcp_url,
        &stranger.token,
        "collect_approval",
        collect.clone(),
    );
    assert!(is_error && text.contains("no approval"), "{text}");

    assert_eq!(decide(&serve, &approver, &handle, true, "ok").0, 200);
    let (is_error, text, ran) = call(
        &agent.mcp_url,
        &agent.token,
        "collect_approval",
        collect.clone(),
    );
    assert!(!is_error, "{text}");
    assert_eq!(ran["status"], "ran", "{ran}");
    assert_eq!(ran["tool"], "add_comment");
    assert_eq!(ran["result"]["comment"]["body"], "hello", "{ran}");
    let (is_error, text, _) = call(&agent.mcp_url, &agent.token, "collect_approval", collect);
    assert!(is_error && text.contains("already used"), "{text}");
    let (is_error, text, _) = call(&agent.mcp_url, &agent.token, "add_comment", hello);
    assert!(
        is_error && awaits(&text),
        "a repeat after collecting must not run: {text}"
    );

    let nope = json!({"issue_id": id, "body": "nope"});
    let (_, text, _) = call(&agent.mcp_url, &agent.token, "add_comment", nope);
    let denied = handle_of(&text);
    assert_eq!(
        decide(&serve, &approver, &denied, false, "not in here").0,
        200
    );
    let (is_error, text, _) = call(
        &agent.mcp_url,
        &agent.token,
        "collect_approval",
        json!({ "handle": denied }),
    );
    assert!(
        is_error && text.contains("denied") && text.contains("not in here"),
        "{text}"
    );
    let (_, _, read) = call(&agent.mcp_url, &agent.token, "get_issue", json!({"id": id}));
    let bodies: Vec<&str> = read["comments"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["body"].as_str())
        .collect();
    assert_eq!(bodies, ["hello"], "ran once, the denied one never");

    // Audit records are written in batches: poll briefly. The approved
    // call is recorded as itself, and each collect call as the tool.
    let audit = until_audited(
        || {
            api(
                &serve,
                Method::GET,
                "/v1/tenants/acme/audit?run=collector",
                &admin,
                None,
            )
            .1
        },
        |count| {
            count("collect_approval", "ok") >= 2
                && count("add_comment", "ok") == 1
                && count("collect_approval", "denied") >= 1
        },
    );
    assert!(
        !audit.to_string().contains("hello"),
        "no arguments in audit"
    );
}

/// Polls a run's audit records (written in batches) until `done` holds
/// for their counts by tool and outcome; fails after 30 s with the last
/// page read. Returns that page.
fn until_audited(
    fetch: impl Fn() -> Value,
    done: impl Fn(&dyn Fn(&str, &str) -> usize) -> bool,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let audit = fetch();
        let records = audit["records"].as_array().cloned().unwrap_or_default();
        let count = |tool: &str, outcome: &str| {
            records
                .iter()
                .filter(|r| r["tool"] == tool && r["outcome"] == outcome)
                .count()
        };
        if done(&count) {
            return audit;
        }
        assert!(Instant::now() < deadline, "audit incomplete: {audit}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The gate's upstream branch on a real upstream
/// (`@modelcontextprotocol/server-everything`, as `tests/upstream.rs`
/// starts it): a policy `upstream:everything:echo` holds the call; once
/// approved, the collect tool runs it on the upstream once; the repeated
/// call path runs another approved one once; a denied one answers the
/// person's reason and never reaches the upstream.
#[test]
fn an_upstream_call_a_policy_names_waits_then_runs_once_or_answers_the_denial() {
    use support::upstreams::{serve, start_everything};
    let served = serve();
    let admin = served.admin_token();
    let everything = start_everything();
    let port = everything.port;
    let put = |path: &str, body: Value| {
        let response = http()
            .put(format!("{}{path}", served.url))
            .bearer_auth(&admin)
            .json(&body)
            .send()
            .unwrap();
        assert_eq!(response.status().as_u16(), 200, "{path}");
    };
    put(
        "/v1/tenants/acme/upstreams/everything",
        json!({
            "url": format!("http://127.0.0.1:{port}/mcp"),
            "header": "Authorization",
            "credential": "Bearer everything-approvals",
            "trust_first_listing": true,
        }),
    );
    put(
        "/v1/tenants/acme/approval-policies",
        json!({ "policies": [{ "name": "echoes", "tool": "upstream:everything:echo" }] }),
    );
    let run: Value = http()
        .post(format!("{}/v1/runs", served.url))
        .bearer_auth(&admin)
        .json(&json!({
            "tenant": "acme",
            "run": "up-gated",
            "capabilities": ["issues:read", "upstream:everything:echo"],
        }))
        .send()
        .unwrap()
        .json()
        .unwrap();
    let (url, token) = (
        run["mcp_url"].as_str().unwrap().to_owned(),
        run["token"].as_str().unwrap().to_owned(),
    );
    let decide_as_admin = |handle: &str, approve: bool, reason: &str| {
        let response = http()
            .post(format!(
                "{}/v1/tenants/acme/approvals/{handle}/decision",
                served.url
            ))
            .bearer_auth(&admin)
            .json(&json!({ "approve": approve, "reason": reason }))
            .send()
            .unwrap();
        assert_eq!(response.status().as_u16(), 200, "{handle}");
    };
    let hi = json!({"message": "hi upstream"});
    let (is_error, text, _) = call(&url, &token, "everything__echo", hi.clone());
    assert!(is_error && awaits(&text), "{text}");
    assert!(!text.contains("Echo:"), "ran before approval: {text}");
    let handle = handle_of(&text);
    let collect = json!({ "handle": handle });
    let (is_error, text, pending) = call(&url, &token, "collect_approval", collect.clone());
    assert!(!is_error, "{text}");
    assert_eq!(pending["status"], "pending");
    decide_as_admin(&handle, true, "fine");
    let (is_error, text, ran) = call(&url, &token, "collect_approval", collect.clone());
    assert!(!is_error, "{text}");
    assert_eq!(ran["status"], "ran", "{ran}");
    assert_eq!(ran["tool"], "everything__echo");
    assert!(text.contains("Echo: hi upstream"), "{text}");
    let (is_error, text, _) = call(&url, &token, "collect_approval", collect);
    assert!(is_error && text.contains("already used"), "{text}");

    // The repeated call path: approved, the same call runs once.
    let again = json!({"message": "second"});
    let (_, text, _) = call(&url, &token, "everything__echo", again.clone());
    decide_as_admin(&handle_of(&text), true, "");
    let (is_error, text, _) = call(&url, &token, "everything__echo", again.clone());
    assert!(!is_error && text.contains("Echo: second"), "{text}");
    let (is_error, text, _) = call(&url, &token, "everything__echo", again);
    assert!(is_error && awaits(&text), "a replay must not run: {text}");

    // Denied: the reason, and the upstream never sees the call.
    let no = json!({"message": "never"});
    let (_, text, _) = call(&url, &token, "everything__echo", no.clone());
    let denied = handle_of(&text);
    decide_as_admin(&denied, false, "not this upstream today");
    let (is_error, text, _) = call(&url, &token, "everything__echo", no);
    assert!(
        is_error && text.contains("not this upstream today") && !text.contains("Echo:"),
        "{text}"
    );
    let (is_error, text, _) = call(
        &url,
        &token,
        "collect_approval",
        json!({ "handle": denied }),
    );
    assert!(
        is_error && text.contains("not this upstream today"),
        "{text}"
    );

    // Every collect call is audited, the one that ran the approved
    // upstream call (answered by the gateway) too, and the approved call
    // as itself. Audit records are written in batches: poll briefly.
    let audit = until_audited(
        || {
            http()
                .get(format!("{}/v1/tenants/acme/audit?run=up-gated", served.url))
                .bearer_auth(&admin)
                .send()
                .unwrap()
                .json()
                .unwrap()
        },
        // ok: the pending answer and the run; denied: already used, and
        // the denial.
        |count| {
            count("collect_approval", "ok") == 2
                && count("collect_approval", "denied") == 2
                && count("everything__echo", "ok") == 2
        },
    );
    assert!(
        !audit.to_string().contains("hi upstream"),
        "no arguments in audit"
    );
}

/// The pending items of the tenant, newest first (admin API).
fn pending_items(serve: &Serve, token: &str) -> Vec<Value> {
    let (status, listed) = api(
        serve,
        Method::GET,
        "/v1/tenants/acme/approvals?status=pending",
        token,
        None,
    );
    assert_eq!(status, 200, "{listed}");
    listed["approvals"]
        .as_array()
        .or_else(|| listed["items"].as_array())
        .cloned()
        .unwrap_or_default()
}

/// Waits until an item for `tool` is pending and returns its id.
fn await_pending(serve: &Serve, token: &str, tool: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(item) = pending_items(serve, token)
            .into_iter()
            .find(|item| item["tool"] == tool)
        {
            return item["id"].as_str().unwrap().to_owned();
        }
        assert!(Instant::now() < deadline, "no pending {tool} item");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A 2025 session's call (the TypeScript SDK 1.x, asking for progress) is
/// held on its event stream while a person decides: progress
/// notifications arrive, and the answer is the real result (approved: ran
/// once) or the denial's reason; past the bound it answers pending with
/// the handle.
#[test]
fn a_2025_session_call_is_held_until_a_person_decides_with_progress() {
    let serve = Serve::start();
    let admin = serve.admin_token("platform-admin", None);
    let approver = serve.admin_token("approver", Some("acme"));
    let (agent, id) = gated_comments(&serve, &admin, "held-agent", "Held");
    for (approve, body) in [(true, "held then approved"), (false, "held then denied")] {
        let args = json!({"issue_id": id, "body": body});
        let reply = std::thread::scope(|scope| {
            let held = scope
                .spawn(|| sdk_call_with(&agent, "ts-v1", "add_comment", &args, &["--progress"]));
            let handle = await_pending(&serve, &admin, "add_comment");
            // Let at least the first progress notification go out.
            std::thread::sleep(Duration::from_millis(300));
            let (status, decided) = decide(&serve, &approver, &handle, approve, "held too long");
            assert_eq!(status, 200, "{decided}");
            held.join().unwrap()
        });
        assert!(reply["progress"].as_u64().unwrap_or(0) >= 1, "{reply}");
        let text = reply["text"].as_str().unwrap_or_default();
        if approve {
            assert_eq!(reply["is_error"], false, "{reply}");
            assert!(!awaits(text), "{reply}");
        } else {
            assert_eq!(reply["is_error"], true, "{reply}");
            assert!(
                text.contains("held too long") && text.contains("denied"),
                "{reply}"
            );
        }
    }
    let (_, _, read) = call(&agent.mcp_url, &agent.token, "get_issue", json!({"id": id}));
    let bodies: Vec<&str> = read["comments"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["body"].as_str())
        .collect();
    assert_eq!(
        bodies,
        ["held then approved"],
        "ran once, the denied one never"
    );

    // Past the bound: the pending answer with the handle (and no progress
    // asked for, none sent).
    let short = Serve::start_with_env(&[("CORKBOARD_APPROVAL_HOLD_MS", "1500")]);
    let admin = short.admin_token("platform-admin", None);
    let (agent, id) = gated_comments(&short, &admin, "held-agent", "Held briefly");
    let args = json!({"issue_id": id, "body": "nobody decides"});
    let reply = sdk_call(&agent, "ts-v1", "add_comment", &args);
    let text = reply["text"].as_str().unwrap_or_default();
    assert!(reply["is_error"] == true && awaits(text), "{reply}");
    assert!(text.contains("collect_approval"), "{reply}");
    assert_eq!(reply["progress"], 0, "{reply}");
}

/// A decision made on another replica reaches the held call: two servers
/// share the board, Redis (registry and live feed) and keys; the agent's
/// 2025 session is held on A, a person approves through B, and A answers
/// the real result.
#[test]
fn a_decision_on_another_replica_reaches_the_held_call() {
    let redis = corkboard_testkit::RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let mut env = cluster_secrets(dir.path());
    env.extend([
        ("CORKBOARD_REGISTRY".to_owned(), "redis".to_owned()),
        ("CORKBOARD_REDIS_URL".to_owned(), redis.url()),
        (
            "CORKBOARD_REDIS_KEY_PREFIX".to_owned(),
            corkboard_testkit::unique_prefix("approval-replicas"),
        ),
        (
            "CORKBOARD_DATA_DIR".to_owned(),
            dir.path().join("data").display().to_string(),
        ),
    ]);
    let start = || {
        let mut cmd = corkboard();
        cmd.args(["server", "--listen", "127.0.0.1:0"])
            .envs(env.iter().cloned());
        Running::spawn(cmd)
    };
    let (a, b) = (start(), start());
    let admin = admin_token_with(&env, "platform-admin", None);
    let issued = http()
        .post(format!("{}/v1/tenants/acme/grants", a.url))
        .bearer_auth(&admin)
        .json(&json!({ "run": "replica-agent", "capabilities": CAPS.split(',').collect::<Vec<_>>(), "ttl": "1h" }))
        .send()
        .unwrap();
    assert_eq!(issued.status().as_u16(), 201);
    let issued: Value = issued.json().unwrap();
    let agent = Granted {
        grant_id: issued["grant"]["id"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        token: issued["token"].as_str().unwrap().to_owned(),
        mcp_url: format!("{}/mcp", a.url),
        json: issued.clone(),
    };
    let (_, _, issue) = call(
        &agent.mcp_url,
        &agent.token,
        "create_issue",
        json!({"title": "Across replicas"}),
    );
    let put = http()
        .put(format!("{}/v1/tenants/acme/approval-policies", b.url))
        .bearer_auth(&admin)
        .json(&json!({ "policies": [{ "name": "comments", "tool": "add_comment" }] }))
        .send()
        .unwrap();
    assert_eq!(put.status().as_u16(), 200);
    // A caches the tenant's policies for a second.
    std::thread::sleep(Duration::from_millis(1100));
    let args = json!({"issue_id": issue["id"], "body": "decided elsewhere"});
    let reply = std::thread::scope(|scope| {
        let held = scope.spawn(|| sdk_call(&agent, "ts-v1", "add_comment", &args));
        let deadline = Instant::now() + Duration::from_secs(60);
        let handle = loop {
            let listed: Value = http()
                .get(format!(
                    "{}/v1/tenants/acme/approvals?status=pending",
                    b.url
                ))
                .bearer_auth(&admin)
                .send()
                .unwrap()
                .json()
                .unwrap();
            if let Some(id) = listed["approvals"][0]["id"].as_str() {
                break id.to_owned();
            }
            assert!(Instant::now() < deadline, "no pending item: {listed}");
            std::thread::sleep(Duration::from_millis(100));
        };
        let decided = http()
            .post(format!(
                "{}/v1/tenants/acme/approvals/{handle}/decision",
                b.url
            ))
            .bearer_auth(&admin)
            .json(&json!({ "approve": true }))
            .send()
            .unwrap();
        assert_eq!(decided.status().as_u16(), 200);
        held.join().unwrap()
    });
    assert_eq!(reply["is_error"], false, "{reply}");
    assert!(
        !awaits(reply["text"].as_str().unwrap_or_default()),
        "{reply}"
    );
}

/// Headless Claude Code (the real CLI, `claude -p`, from
/// tests/clients/node_modules) against a run's MCP endpoint, with its model
/// a script on loopback (`tests/clients/claude_code/scripted_model.py`,
/// the Anthropic Messages API with streaming): it calls a gated tool, gets
/// the pending answer with the handle, and after the test approved through
/// the admin API calls `collect_approval`, whose result says the call ran.
/// The CLI's printed result, the board and the audit trail agree.
#[test]
fn headless_claude_code_sees_the_pending_answer_then_collects_the_result() {
    use support::upstreams::Proc;
    let claude = repo_root().join("tests/clients/node_modules/.bin/claude");
    assert!(
        claude.exists(),
        "{} is missing: run npm ci in tests/clients (scripts/setup-test-deps does)",
        claude.display()
    );
    let serve = Serve::start();
    let admin = serve.admin_token("platform-admin", None);
    let approver = serve.admin_token("approver", Some("acme"));
    let (agent, id) = gated_comments(&serve, &admin, "claude-code", "For Claude Code");

    let dir = tempfile::tempdir().unwrap();
    let (state, home) = (dir.path().join("state"), dir.path().join("home"));
    std::fs::create_dir_all(&state).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let port_file = dir.path().join("port");
    let _model = Proc(
        Command::new("python3")
            .arg(repo_root().join("tests/clients/claude_code/scripted_model.py"))
            .arg(&port_file)
            .env("STATE_DIR", &state)
            .env("SCRIPT_ISSUE", &id)
            .spawn()
            .expect("start the scripted model"),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let port = loop {
        if let Ok(port) = std::fs::read_to_string(&port_file)
            && !port.is_empty()
        {
            break port;
        }
        assert!(
            Instant::now() < deadline,
            "the scripted model did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let config = dir.path().join("mcp.json");
    std::fs::write(
        &config,
        // alwaysLoad: the tools go to the model in the first request
        // (otherwise Claude Code defers MCP tools behind its tool search).
        json!({ "mcpServers": { "corkboard": {
            "type": "http",
            "alwaysLoad": true,
            "url": agent.mcp_url,
            "headers": { "Authorization": format!("Bearer {}", agent.token) },
        } } })
        .to_string(),
    )
    .unwrap();
    let mut cli = Command::new(&claude);
    cli.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env("ANTHROPIC_BASE_URL", format!("http://127.0.0.1:{port}"))
        .env("ANTHROPIC_API_KEY", "sk-ant-scripted-model-not-a-key")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .args([
            "-p",
            "Comment on the issue.",
            "--mcp-config",
            config.to_str().unwrap(),
            "--strict-mcp-config",
            "--allowedTools",
            "mcp__corkboard__add_comment,mcp__corkboard__collect_approval",
            "--model",
            "claude-sonnet-4-5",
            "--output-format",
            "json",
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = Proc(cli.spawn().expect("start claude"));
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    };
    let stdout = drain(Box::new(child.0.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.0.stderr.take().unwrap()));

    // The model wrote the handle the CLI got: a person approves it.
    let handle_file = state.join("handle");
    let deadline = Instant::now() + Duration::from_secs(120);
    let handle = loop {
        if let Ok(handle) = std::fs::read_to_string(&handle_file)
            && handle.len() == 30
        {
            break handle;
        }
        assert!(
            Instant::now() < deadline,
            "Claude Code never got the pending answer; the model saw: {}",
            std::fs::read_to_string(state.join("requests.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let (_, _, before) = call(&agent.mcp_url, &agent.token, "get_issue", json!({"id": id}));
    assert_eq!(before["comments"], json!([]), "ran before approval");
    assert_eq!(decide(&serve, &approver, &handle, true, "go").0, 200);
    std::fs::write(state.join("approved"), "").unwrap();

    let deadline = Instant::now() + Duration::from_secs(120);
    while child.0.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "claude did not finish");
        std::thread::sleep(Duration::from_millis(100));
    }
    let (stdout, stderr) = (stdout.join().unwrap(), stderr.join().unwrap());
    let printed: Value = serde_json::from_slice(&stdout).unwrap_or_else(|_| {
        panic!(
            "claude printed no JSON: {}\n{}",
            String::from_utf8_lossy(&stdout),
            String::from_utf8_lossy(&stderr)
        )
    });
    assert_eq!(printed["is_error"], false, "{printed}");
    assert_eq!(
        printed["result"],
        "DONE: the approved call ran once",
        "{printed}\nthe model saw: {}",
        std::fs::read_to_string(state.join("requests.log")).unwrap_or_default()
    );
    let (_, _, after) = call(&agent.mcp_url, &agent.token, "get_issue", json!({"id": id}));
    let bodies: Vec<&str> = after["comments"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["body"].as_str())
        .collect();
    assert_eq!(bodies, ["from claude code"]);
    until_audited(
        || {
            api(
                &serve,
                Method::GET,
                "/v1/tenants/acme/audit?run=claude-code",
                &admin,
                None,
            )
            .1
        },
        |count| {
            count("add_comment", "denied") > 0
                && count("add_comment", "ok") > 0
                && count("collect_approval", "ok") > 0
        },
    );
}

/// Held calls count against the held-call shares: with room for one, a
/// second call of the run that needs approval is answered pending at once
/// (not held, not refused) while the first is held; the first still gets
/// its real result when a person approves.
#[test]
fn a_full_share_of_held_calls_answers_pending_at_once() {
    let serve = Serve::start_with_env(&[("CORKBOARD_UPSTREAM_HELD_CALLS_MAX", "1")]);
    let admin = serve.admin_token("platform-admin", None);
    let (agent, id) = gated_comments(&serve, &admin, "share-agent", "Shares");
    let first = json!({"issue_id": id, "body": "held"});
    let second = json!({"issue_id": id, "body": "not held"});
    let (held, other) = std::thread::scope(|scope| {
        let held = scope.spawn(|| sdk_call(&agent, "ts-v1", "add_comment", &first));
        let handle = await_pending(&serve, &admin, "add_comment");
        // The share is taken by the held call: the next one answers now.
        let other = sdk_call(&agent, "ts-v1", "add_comment", &second);
        let (status, decided) = decide(&serve, &admin, &handle, true, "");
        assert_eq!(status, 200, "{decided}");
        (held.join().unwrap(), other)
    });
    let text = other["text"].as_str().unwrap_or_default();
    assert!(other["is_error"] == true && awaits(text), "{other}");
    assert_eq!(held["is_error"], false, "{held}");
}
