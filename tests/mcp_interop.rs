//! Black-box: the official MCP client SDKs (TypeScript 1.x and 2.x, Python
//! 2.x), in every era they speak, against `corkboard serve`'s studio
//! endpoint: connect, list, call every tool, see tool errors, a bad token
//! and an out-of-capability call refused.

mod support;

use serde_json::Value;
use std::process::Output;
use support::*;

const ALL: &str = "issues:read,issues:create,issues:update,comments:write";

/// (script, runner, mode, expected era)
const CLIENTS: &[(&str, &str, &str, &str)] = &[
    ("ts-sdk-v1.mjs", "node", "legacy", "legacy"),
    ("ts-client-v2.mjs", "node", "auto", "modern"),
    ("ts-client-v2.mjs", "node", "2026-07-28", "modern"),
    ("ts-client-v2.mjs", "node", "legacy", "legacy"),
    ("py_client.py", "python", "legacy", "legacy"),
    ("py_client.py", "python", "auto", "modern"),
    ("py_client.py", "python", "2026-07-28", "modern"),
];

fn client(runner: &str, script: &str, args: &[&str]) -> (Output, Value) {
    let out = match runner {
        "node" => node(script, args),
        _ => python(script, args),
    };
    let line = stdout_of(&out)
        .lines()
        .last()
        .unwrap_or_default()
        .to_owned();
    let summary: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
    (out, summary)
}

#[test]
fn every_official_client_uses_every_tool_in_every_era() {
    every_client_against(&Serve::start());
}

/// The same clients against a board kept in the MongoDB-protocol server.
#[test]
fn every_official_client_works_with_the_mongodb_store() {
    let mongo = corkboard_testkit::MongoServer::start();
    let database = corkboard_testkit::unique_database("interop");
    let uri = mongo.uri();
    let serve = Serve::start_with_env(&[
        ("CORKBOARD_STORE", "mongodb"),
        ("CORKBOARD_MONGODB_URI", &uri),
        ("CORKBOARD_MONGODB_DATABASE", &database),
    ]);
    every_client_against(&serve);
}

fn every_client_against(serve: &Serve) {
    for (i, (script, runner, mode, era)) in CLIENTS.iter().enumerate() {
        let granted = serve.grant("acme", &format!("interop-{i}"), ALL);
        let (out, summary) = client(
            runner,
            script,
            &[
                "--url",
                &granted.mcp_url,
                "--token",
                &granted.token,
                "--mode",
                mode,
                "--expect-era",
                era,
            ],
        );
        assert!(
            out.status.success() && summary["ok"] == true,
            "{script} --mode {mode}: {summary}\nstderr: {}",
            stderr_of(&out)
        );
        // A client pinned to 2026-07-28 without discovery never asks for
        // serverInfo; every other one must have received name and version.
        if !(*script == "py_client.py" && *mode == "2026-07-28") {
            assert_eq!(summary["server"]["name"], "corkboard", "{summary}");
            assert_eq!(
                summary["server"]["version"],
                env!("CARGO_PKG_VERSION"),
                "{summary}"
            );
        }
        assert_eq!(
            summary["tools"].as_array().map(Vec::len),
            Some(6),
            "{summary}"
        );
        let created = summary["created"].as_str().unwrap();
        // The write really landed on the tenant's board.
        let (_, got) = mcp_call(
            &granted.mcp_url,
            &granted.token,
            "get_issue",
            serde_json::json!({"id": created}),
        );
        assert_eq!(
            got["result"]["structuredContent"]["tenant"], "acme",
            "{got}"
        );
        assert!(
            !stdout_of(&out).contains(&granted.token),
            "a client printed the token"
        );
    }
}

#[test]
fn every_official_client_sees_bad_tokens_and_capability_limits() {
    let serve = Serve::start();
    let revoked = serve.grant("acme", "revoked-run", ALL);
    assert!(
        serve
            .cli(&["grant", "revoke", &revoked.grant_id])
            .status
            .success()
    );
    let reader = serve.grant("acme", "reader", "issues:read");
    let url = format!("{}/mcp", serve.url());
    for (script, runner, mode, _) in CLIENTS {
        let (out, summary) = client(
            runner,
            script,
            &["--url", &url, "--mode", mode, "--expect-auth-failure"],
        );
        assert!(
            out.status.success(),
            "{script} {mode} unknown token: {summary} {}",
            stderr_of(&out)
        );
        let (out, summary) = client(
            runner,
            script,
            &[
                "--url",
                &url,
                "--token",
                &revoked.token,
                "--mode",
                mode,
                "--expect-auth-failure",
            ],
        );
        assert!(
            out.status.success(),
            "{script} {mode} revoked token: {summary} {}",
            stderr_of(&out)
        );
        let (out, summary) = client(
            runner,
            script,
            &[
                "--url",
                &url,
                "--token",
                &reader.token,
                "--mode",
                mode,
                "--caps-check",
                "list_issues,get_issue,search_issues",
            ],
        );
        assert!(
            out.status.success(),
            "{script} {mode} caps: {summary} {}",
            stderr_of(&out)
        );
    }
}
