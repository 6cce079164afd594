//! Black-box: every read from an upstream MCP server is bounded in bytes.
//! An upstream answering a 300 MB `tools/list` (as one JSON body, or as
//! one event of an event stream that never ends) cannot grow the shared
//! runner: the answer is read up to `upstream_max_answer_bytes`, the agent
//! is told "upstream answer too large" (correlated: the upstream's stand-in
//! tool, and the call's own tool error), the refusal is logged without
//! content, and the server's peak memory stays small.

use crate::support;

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::time::Duration;
use support::*;

/// Bytes an oversized answer would have: what took the runner from 20 MB
/// to 621 MB before answers were bounded.
const HUGE: usize = 300 * 1024 * 1024;

/// An upstream that answers every POST with a `HUGE`-byte answer: a JSON
/// body (`sse = false`) or one event-stream event with no end.
fn huge_upstream(sse: bool) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut len = 0usize;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0; len];
                let _ = reader.read_exact(&mut body);
                let id = serde_json::from_slice::<Value>(&body)
                    .ok()
                    .and_then(|b| b.get("id").cloned())
                    .unwrap_or(json!(1));
                let (kind, head) = if sse {
                    (
                        "text/event-stream",
                        format!(r#"data: {{"jsonrpc":"2.0","id":{id},"result":{{"tools":["#),
                    )
                } else {
                    (
                        "application/json",
                        format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":["#),
                    )
                };
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nConnection: close\r\n\r\n{head}"
                );
                let tool = br#"{"name":"t","inputSchema":{"type":"object"}},"#;
                let chunk: Vec<u8> = tool.iter().copied().cycle().take(64 * 1024).collect();
                let mut sent = 0;
                while sent < HUGE {
                    if stream.write_all(&chunk).is_err() {
                        // The gateway stopped reading: the bound worked.
                        return;
                    }
                    sent += chunk.len();
                }
                let _ = stream.write_all(b"{}]}}\n\n");
            });
        }
    });
    port
}

/// The peak resident memory of process `pid`, in KiB (`VmHWM`).
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/<pid>/status")
}

#[test]
fn a_huge_upstream_answer_is_refused_as_too_large_and_memory_stays_bounded() {
    let (json_port, sse_port) = (huge_upstream(false), huge_upstream(true));
    let serve = Serve::start_with_env(&[("CORKBOARD_EGRESS_ALLOW", "127.0.0.1")]);
    let admin = serve.admin_token("platform-admin", None);
    for (name, port) in [("bigjson", json_port), ("bigsse", sse_port)] {
        let response = http()
            .put(format!("{}/v1/tenants/acme/upstreams/{name}", serve.url()))
            .bearer_auth(&admin)
            .json(&json!({
                "url": format!("http://127.0.0.1:{port}/mcp"),
                "header": "X-Key",
                "credential": "k",
                "trust_first_listing": true,
            }))
            .send()
            .unwrap();
        assert_eq!(response.status().as_u16(), 200);
    }
    let response = http()
        .post(format!("{}/v1/runs", serve.url()))
        .bearer_auth(&admin)
        .json(&json!({
            "tenant": "acme",
            "run": "huge-answers",
            "capabilities": ["issues:read", "upstream:bigjson:*", "upstream:bigsse:*"],
        }))
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 201);
    let run: Value = response.json().unwrap();
    let (url, token) = (
        run["mcp_url"].as_str().unwrap(),
        run["token"].as_str().unwrap(),
    );
    let pid = serve.process.child.id();
    let before = peak_rss_kib(pid);
    let (status, listed) = mcp_list(url, token);
    assert_eq!(status, 200, "{listed}");
    let text = listed.to_string();
    for name in ["bigjson", "bigsse"] {
        assert!(text.contains(&format!("{name}__unavailable")), "{text}");
        assert!(
            text.contains(&format!(
                "upstream {name} answer too large: more than 4194304 bytes"
            )),
            "{text}"
        );
    }
    // Calling the stand-in answers the same, correlated to the call.
    let (status, called) = mcp_call(url, token, "bigjson__unavailable", json!({}));
    assert_eq!(status, 200, "{called}");
    assert_eq!(called["id"], 1, "{called}");
    assert_eq!(called["result"]["isError"], true, "{called}");
    assert!(called.to_string().contains("answer too large"), "{called}");
    std::thread::sleep(Duration::from_millis(200));
    let after = peak_rss_kib(pid);
    eprintln!(
        "server peak RSS: {} MiB before listing, {} MiB after two 300 MB answers",
        before / 1024,
        after / 1024
    );
    assert!(
        after < before + 64 * 1024,
        "peak RSS grew from {before} KiB to {after} KiB"
    );
}
