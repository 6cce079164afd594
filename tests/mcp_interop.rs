//! Black-box: the official MCP client SDKs (TypeScript 1.x and 2.x, Python
//! 2.x), in every era they speak, against `corkboard serve`'s studio
//! endpoint: connect, list, call every tool, see tool errors, a bad token
//! and an out-of-capability call refused; and each of them gets a large
//! board's default list within the result budget (an issue with 500
//! comments pages through get_issue within it too).

use crate::support;

use serde_json::Value;
use std::process::Output;
use support::*;

const ALL: &str = "issues:read,issues:create,issues:update,comments:write,issues:claim";

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
            Some(corkboard_tools::BoardTool::ALL.len()),
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
                "list_issues,get_issue,search_issues,board_stats,collect_approval",
            ],
        );
        assert!(
            out.status.success(),
            "{script} {mode} caps: {summary} {}",
            stderr_of(&out)
        );
    }
}

/// The default result budget (`max_result_bytes`).
const BUDGET: usize = 32_000;

/// A server whose rate limit does not slow the seeding down.
fn unmetered_serve() -> Serve {
    Serve::start_with_env(&[
        ("CORKBOARD_RATE_LIMIT_PER_SECOND", "100000"),
        ("CORKBOARD_RATE_LIMIT_BURST", "100000"),
    ])
}

/// Prose of about `bytes` bytes, as agents write it.
fn prose(seed: usize, bytes: usize) -> String {
    let words = [
        "the", "build", "fails", "when", "cache", "is", "cold", "and", "retry", "works",
    ];
    let mut out = String::new();
    let mut i = seed;
    while out.len() < bytes {
        out.push_str(words[i % words.len()]);
        out.push(if i % 13 == 12 { '\n' } else { ' ' });
        i += 7;
    }
    out
}

fn call_ok(url: &str, token: &str, tool: &str, arguments: Value) -> Value {
    let (status, reply) = mcp_call(url, token, tool, arguments);
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["result"]["isError"], false, "{reply}");
    reply
}

/// Bytes of a reply's whole `result` (both blocks and the envelope) as it
/// went on the wire: compact JSON, as the server writes it.
fn result_bytes(reply: &Value) -> usize {
    serde_json::to_vec(&reply["result"]).unwrap().len()
}

#[test]
fn the_default_list_of_a_sixty_issue_board_fits_the_budget_in_every_client_and_era() {
    let serve = unmetered_serve();
    let writer = serve.grant("acme", "seeder", ALL);
    for i in 0..60 {
        let created = call_ok(
            &writer.mcp_url,
            &writer.token,
            "create_issue",
            serde_json::json!({
                "title": format!("Flaky integration test number {i} on the CI runners"),
                "body": prose(i, 2_048),
                "labels": ["bug", "area:ci"],
                "priority": "high",
            }),
        );
        let id = created["result"]["structuredContent"]["id"].clone();
        for c in 0..3 {
            call_ok(
                &writer.mcp_url,
                &writer.token,
                "add_comment",
                serde_json::json!({"issue_id": id, "body": prose(c, 400)}),
            );
        }
    }
    // On the wire: the whole result, both blocks, within the budget, and it
    // says how to get the rest.
    let reply = call_ok(
        &writer.mcp_url,
        &writer.token,
        "list_issues",
        serde_json::json!({}),
    );
    let bytes = result_bytes(&reply);
    assert!(bytes <= BUDGET, "{bytes} bytes");
    let page = &reply["result"]["structuredContent"];
    let cursor = page["next_cursor"].as_str().expect("a next_cursor");
    assert_eq!(page["truncated"]["omitted"], "issues", "{page}");
    let text = reply["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains(cursor), "{text}");
    // Every official client, in both eras, gets it within the budget and
    // pages through all 60 issues exactly once.
    for (i, (script, runner, mode, _)) in CLIENTS.iter().enumerate() {
        let granted = serve.grant("acme", &format!("budget-{i}"), "issues:read");
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
                "--budget-check",
                &BUDGET.to_string(),
            ],
        );
        assert!(
            out.status.success() && summary["ok"] == true,
            "{script} --mode {mode}: {summary}\nstderr: {}",
            stderr_of(&out)
        );
        let check = &summary["budget_check"];
        assert!(
            check["bytes"].as_u64().unwrap() <= BUDGET as u64,
            "{summary}"
        );
        assert_eq!(check["seen"], 60, "{script} {mode}: {summary}");
        assert_eq!(check["unique"], 60, "{script} {mode}: {summary}");
    }
}

#[test]
fn an_issue_with_five_hundred_comments_pages_through_get_issue_within_the_budget() {
    let serve = unmetered_serve();
    let granted = serve.grant("acme", "thread", ALL);
    let (url, token) = (&granted.mcp_url, &granted.token);
    let created = call_ok(
        url,
        token,
        "create_issue",
        serde_json::json!({"title": "Long thread", "body": prose(1, 2_048)}),
    );
    let id = created["result"]["structuredContent"]["id"].clone();
    let mut comments = Vec::new();
    for c in 0..500 {
        let reply = call_ok(
            url,
            token,
            "add_comment",
            serde_json::json!({"issue_id": id, "body": prose(c, 300)}),
        );
        assert!(result_bytes(&reply) <= BUDGET);
        let comment = &reply["result"]["structuredContent"]["comment"]["id"];
        comments.push(comment.as_str().unwrap().to_owned());
    }
    let reply = call_ok(url, token, "get_issue", serde_json::json!({"id": id}));
    assert!(result_bytes(&reply) <= BUDGET);
    let got = &reply["result"]["structuredContent"];
    assert_eq!(got["comment_count"], 500, "{got}");
    assert_eq!(got["older_comments"], 490, "{got}");
    // Paging back with the cursor, as many per answer as the budget holds.
    let mut seen: Vec<String> = Vec::new();
    let mut arguments = serde_json::json!({"id": id, "comments_limit": 500});
    loop {
        let reply = call_ok(url, token, "get_issue", arguments.clone());
        let bytes = result_bytes(&reply);
        assert!(bytes <= BUDGET, "{bytes} bytes");
        let got = &reply["result"]["structuredContent"];
        let page: Vec<String> = got["comments"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["id"].as_str().unwrap().to_owned())
            .collect();
        assert!(!page.is_empty());
        seen.splice(0..0, page);
        match got["comments_cursor"].as_str() {
            Some(cursor) => arguments["comments_before"] = serde_json::json!(cursor),
            None => break,
        }
    }
    assert_eq!(seen, comments, "every comment exactly once, in order");
}
