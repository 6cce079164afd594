//! Black-box observability: a real OTLP receiver gets `corkboard serve`'s
//! spans (joined to the caller's trace, without secrets), `/metrics` moves
//! with traffic, and the audit trail of a run lists exactly its calls.

use crate::support;

use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::*;

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const SECRET_ARGUMENT: &str = "confidential-argument-7f3a";

#[test]
fn spans_reach_a_real_otlp_receiver_joined_to_the_callers_trace() {
    let root = repo_root();
    let python = root.join("target/venv/bin/python");
    assert!(
        python.exists(),
        "target/venv is missing: run scripts/setup-test-deps"
    );
    let mut receiver = Command::new(python)
        .arg(root.join("services/telemetry/tests/otlp_receiver.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the OTLP receiver");
    let mut lines = BufReader::new(receiver.stdout.take().unwrap()).lines();
    let first = lines.next().expect("receiver output").unwrap();
    let port = first
        .strip_prefix("LISTENING ")
        .expect("LISTENING line")
        .trim()
        .to_owned();

    let serve = Serve::start_with(|cmd| {
        cmd.env(
            "CORKBOARD_OTLP_ENDPOINT",
            format!("http://127.0.0.1:{port}"),
        );
    });
    let granted = serve.grant("acme", "traced-run", "issues:read,issues:create");
    let body = mcp::modern_tools_call(1, "create_issue", json!({"title": SECRET_ARGUMENT}));
    let mut request = http()
        .post(&granted.mcp_url)
        .header("Content-Type", "application/json")
        .header("traceparent", format!("00-{TRACE_ID}-00f067aa0ba902b7-01"))
        .bearer_auth(&granted.token)
        .body(body.to_string());
    for (header, value) in mcp::modern_headers("tools/call", Some("create_issue")) {
        request = request.header(header, value);
    }
    let response = request.send().unwrap();
    assert_eq!(response.status(), 200);
    // Shutting down flushes the batch.
    assert!(serve.process.terminate().success());

    let deadline = Instant::now() + Duration::from_secs(20);
    let mut spans = Vec::new();
    let mut everything = String::new();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    while Instant::now() < deadline {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(line) => {
                everything.push_str(&line);
                everything.push('\n');
                if let Some(span) = line.strip_prefix("SPAN ") {
                    spans.push(serde_json::from_str::<Value>(span).unwrap());
                }
                let seen = |name: &str| {
                    spans
                        .iter()
                        .any(|s| s["name"] == name && s["trace_id"] == TRACE_ID)
                };
                if seen("mcp.request") && seen("http.request") {
                    break;
                }
            }
            Err(_) => continue,
        }
    }
    let _ = receiver.kill();
    let _ = receiver.wait();
    let mcp = spans
        .iter()
        .find(|s| s["name"] == "mcp.request" && s["trace_id"] == TRACE_ID)
        .unwrap_or_else(|| panic!("no mcp.request span in the caller's trace; got {spans:#?}"));
    assert_eq!(mcp["attributes"]["mcp.method"], "tools/call");
    assert_eq!(mcp["attributes"]["mcp.tool"], "create_issue");
    assert_eq!(mcp["attributes"]["tenant"], "acme");
    assert_eq!(mcp["attributes"]["run"], "traced-run");
    assert_eq!(mcp["attributes"]["grant"], granted.grant_id.as_str());
    assert_eq!(mcp["attributes"]["outcome"], "ok");
    assert_eq!(mcp["service"], "corkboard-serve");
    assert!(
        spans
            .iter()
            .any(|s| s["name"] == "http.request" && s["trace_id"] == TRACE_ID)
    );
    assert!(
        !everything.contains(SECRET_ARGUMENT),
        "a tool argument was exported"
    );
    assert!(
        !everything.contains(&granted.token[4..]),
        "the run token was exported"
    );
}

fn metric(text: &str, name: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name) && labels.iter().all(|label| l.contains(label)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[test]
fn metrics_parse_as_prometheus_text_and_move_with_traffic() {
    let serve = Serve::start();
    let granted = serve.grant("acme", "metered", "issues:read,issues:create");
    let scrape = || {
        http()
            .get(format!("{}/metrics", serve.url()))
            .send()
            .unwrap()
            .text()
            .unwrap()
    };
    let before = scrape();
    for line in before.lines().filter(|l| !l.is_empty()) {
        let ok = line.starts_with("# HELP ")
            || line.starts_with("# TYPE ")
            || line
                .rsplit_once(' ')
                .is_some_and(|(_, v)| v.parse::<f64>().is_ok());
        assert!(ok, "not Prometheus text: {line}");
    }
    for _ in 0..3 {
        let (status, _) = mcp_call(
            &granted.mcp_url,
            &granted.token,
            "create_issue",
            json!({"title": "m"}),
        );
        assert_eq!(status, 200);
    }
    let init = http()
        .post(&granted.mcp_url)
        .header("Content-Type", "application/json")
        .header("Accept", mcp::ACCEPT)
        .bearer_auth(&granted.token)
        .body(mcp::initialize(1, "2025-11-25", json!({}), ("t", "1")).to_string())
        .send()
        .unwrap();
    assert_eq!(init.status(), 200);
    let after = scrape();
    let sessions = |t: &str| metric(t, "corkboard_legacy_sessions_total", &["event=\"started\""]);
    assert_eq!(sessions(&after) - sessions(&before), 1.0);
    let calls = |t: &str| {
        metric(
            t,
            "corkboard_tool_calls_total",
            &["tool=\"create_issue\"", "outcome=\"ok\""],
        )
    };
    assert_eq!(calls(&after) - calls(&before), 3.0, "{after}");
    let requests = |t: &str| {
        metric(
            t,
            "corkboard_mcp_requests_total",
            &["method=\"tools/call\""],
        )
    };
    assert_eq!(requests(&after) - requests(&before), 3.0);
    let writes = |t: &str| {
        metric(
            t,
            "corkboard_store_operations_total",
            &["op=\"create_issue\"", "result=\"ok\""],
        )
    };
    assert_eq!(writes(&after) - writes(&before), 3.0);
    assert!(metric(&after, "corkboard_http_requests_total", &["route=\"/mcp\""]) >= 3.0);
    // Bounded cardinality: no run or tenant ids in label values.
    assert!(
        !after.contains("metered") && !after.contains("acme"),
        "ids leaked into labels"
    );
}

#[test]
fn the_audit_trail_of_a_run_lists_exactly_its_calls() {
    let serve = Serve::start();
    let granted = serve.grant("acme", "audited", "issues:read,issues:create,issues:update");
    let other = serve.grant("acme", "someone-else", "issues:read");
    let (_, created) = mcp_call(
        &granted.mcp_url,
        &granted.token,
        "create_issue",
        json!({"title": SECRET_ARGUMENT}),
    );
    let id = created["result"]["structuredContent"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    mcp_call(
        &granted.mcp_url,
        &granted.token,
        "get_issue",
        json!({"id": id}),
    );
    mcp_call(
        &granted.mcp_url,
        &granted.token,
        "update_issue",
        json!({"id": id, "expected_version": 7, "state": "done"}),
    );
    mcp_call(&granted.mcp_url, &granted.token, "list_issues", json!({}));
    mcp_call(&other.mcp_url, &other.token, "list_issues", json!({}));

    let admin = serve.admin_token("platform-admin", None);
    let deadline = Instant::now() + Duration::from_secs(10);
    let records = loop {
        let audit: Value = http()
            .get(format!("{}/v1/tenants/acme/audit?run=audited", serve.url()))
            .bearer_auth(&admin)
            .send()
            .unwrap()
            .json()
            .unwrap();
        let records = audit["records"].as_array().cloned().unwrap_or_default();
        if records.len() >= 4 || Instant::now() > deadline {
            break records;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let calls: Vec<(String, String)> = records
        .iter()
        .rev()
        .map(|r| {
            (
                r["tool"].as_str().unwrap().to_owned(),
                r["outcome"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let expected: Vec<(String, String)> = [
        ("create_issue", "ok"),
        ("get_issue", "ok"),
        ("update_issue", "tool_error"),
        ("list_issues", "ok"),
    ]
    .iter()
    .map(|(t, o)| (t.to_string(), o.to_string()))
    .collect();
    assert_eq!(calls, expected, "{records:#?}");
    for record in &records {
        assert_eq!(record["grant"], granted.grant_id.as_str());
        assert_eq!(record["arguments_hash"].as_str().map(str::len), Some(64));
    }
    assert_eq!(records[3]["issue"], id.as_str());
    assert!(
        !serde_json::to_string(&records)
            .unwrap()
            .contains(SECRET_ARGUMENT)
    );
}

#[test]
fn run_gateway_traffic_is_counted_by_the_process_metrics() {
    let serve = Serve::start();
    let admin = serve.admin_token("platform-admin", None);
    let registered: Value = http()
        .post(format!("{}/v1/runs", serve.url()))
        .bearer_auth(&admin)
        .json(&json!({"tenant": "acme", "run": "gw-metered", "capabilities": ["issues:create"]}))
        .send()
        .unwrap()
        .json()
        .unwrap();
    let url = registered["mcp_url"].as_str().expect("mcp_url").to_owned();
    let token = registered["token"].as_str().expect("token").to_owned();
    assert_ne!(
        url,
        format!("{}/mcp", serve.url()),
        "a dedicated gateway port"
    );
    let scrape = || {
        http()
            .get(format!("{}/metrics", serve.url()))
            .send()
            .unwrap()
            .text()
            .unwrap()
    };
    let before = scrape();
    let (status, reply) = mcp_call(
        &url,
        &token,
        "create_issue",
        json!({"title": "through the gateway"}),
    );
    assert_eq!(status, 200, "{reply}");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let after = scrape();
        let calls = |t: &str| {
            metric(
                t,
                "corkboard_tool_calls_total",
                &["tool=\"create_issue\"", "outcome=\"ok\""],
            )
        };
        let runs = metric(&after, "corkboard_active_runs", &[]);
        if calls(&after) - calls(&before) == 1.0 && runs >= 1.0 {
            assert!(
                metric(
                    &after,
                    "corkboard_mcp_requests_total",
                    &["method=\"tools/call\""]
                ) >= 1.0
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "gateway traffic not counted:\n{after}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
