//! Black-box: what the relay keeps for tenants and runs is theirs. The
//! calls held for 2026-07-28 agents are shared by every tenant of a
//! runner, with shares: one tenant's unanswered calls fill its share (a
//! run's first), and its next call is refused `-32056` naming the share,
//! while another tenant's call is held and completes. And the sessions
//! the gateway opens with a 2025 upstream are per run: two runs of one
//! tenant reach the upstream in two sessions, each keeping its own.

use crate::relay::{modern_call, result_text};
use crate::support;

use serde_json::{Value, json};
use support::upstreams::*;
use support::*;

/// `serve` with `env` (and loopback upstreams allowed), the Python
/// upstream speaking only 2025 sessions registered as `pyold` for each of
/// `tenants`.
fn fixture(env: &[(&str, &str)], tenants: &[&str]) -> (Serve, Upstream, String) {
    let py = start_python_upstream_with(&[("UPSTREAM_LEGACY_ONLY", "1")]);
    let mut env = env.to_vec();
    env.push(("CORKBOARD_EGRESS_ALLOW", "127.0.0.1"));
    let serve = Serve::start_with_env(&env);
    let admin = serve.admin_token("platform-admin", None);
    for tenant in tenants {
        register_python_upstream(serve.url(), &admin, tenant, "pyold", py.port);
    }
    (serve, py, admin)
}

/// Registers `run` of `tenant` with every tool of `pyold`: its endpoint
/// and token.
fn start_run(serve: &Serve, admin: &str, tenant: &str, run: &str) -> (String, String) {
    let response = http()
        .post(format!("{}/v1/runs", serve.url()))
        .bearer_auth(admin)
        .json(&json!({
            "tenant": tenant,
            "run": run,
            "capabilities": ["upstream:pyold:*"],
        }))
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 201, "{tenant}/{run}");
    let run: Value = response.json().unwrap();
    (
        run["mcp_url"].as_str().unwrap().to_owned(),
        run["token"].as_str().unwrap().to_owned(),
    )
}

#[test]
fn one_tenants_unanswered_calls_fill_only_its_own_share_of_held_calls() {
    // 8 held calls in all: a tenant 2 (25 %), a run 1 (12 %).
    let (serve, _py, admin) = fixture(
        &[
            ("CORKBOARD_UPSTREAM_HELD_CALLS_MAX", "8"),
            ("CORKBOARD_UPSTREAM_TENANT_SHARE_PCT", "25"),
            ("CORKBOARD_UPSTREAM_RUN_SHARE_PCT", "12"),
        ],
        &["acme", "globex"],
    );
    let caps = json!({ "sampling": {} });
    // The upstream asks mid-call and the agent never answers: the call is
    // held until its deadline.
    let ask = |run: &(String, String)| {
        modern_call(
            run,
            "pyold__muse",
            json!({ "topic": "never answered" }),
            caps.clone(),
            None,
        )
    };
    let held = |run: &(String, String)| {
        let (status, first) = ask(run);
        assert_eq!(status, 200, "{first}");
        assert_eq!(first["result"]["resultType"], "input_required", "{first}");
        first
    };
    let refused = |run: &(String, String), share: &str, limit: u64, whose: &str| {
        let (_, refused) = ask(run);
        let error = &refused["error"];
        assert_eq!(error["code"], -32056, "{refused}");
        assert_eq!(error["data"]["table"], "held calls", "{refused}");
        assert_eq!(error["data"]["share"], share, "{refused}");
        assert_eq!(error["data"]["limit"], limit, "{refused}");
        let message = error["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("{whose} already holds {limit} held calls"))
                && message.contains(&format!("{share} share")),
            "{message}"
        );
    };

    let fill_1 = start_run(&serve, &admin, "acme", "fill-1");
    held(&fill_1);
    refused(&fill_1, "run", 1, "run fill-1 of tenant acme");
    let fill_2 = start_run(&serve, &admin, "acme", "fill-2");
    held(&fill_2);
    let fill_3 = start_run(&serve, &admin, "acme", "fill-3");
    refused(&fill_3, "tenant", 2, "tenant acme");

    // Another tenant's relayed call is held, and completes when answered.
    let other = start_run(&serve, &admin, "globex", "other-1");
    let first = held(&other);
    let state = first["result"]["requestState"].as_str().unwrap();
    let key = first_input_request(&first);
    let sampled = json!({ key.as_str(): {
        "role": "assistant", "model": "m",
        "content": { "type": "text", "text": "globex is served" } } });
    let (status, done) = modern_call(
        &other,
        "pyold__muse",
        json!({ "topic": "never answered" }),
        caps.clone(),
        Some((sampled, state)),
    );
    assert_eq!(status, 200, "{done}");
    assert_eq!(
        result_text(&done),
        "model m says: globex is served",
        "{done}"
    );
}

#[test]
fn two_runs_of_one_tenant_reach_a_2025_upstream_in_sessions_of_their_own() {
    let (serve, _py, admin) = fixture(&[], &["acme"]);
    let first = start_run(&serve, &admin, "acme", "session-1");
    let second = start_run(&serve, &admin, "acme", "session-2");
    // The sessions the upstream saw tool calls in, this call's included.
    let seen = |(url, token): &(String, String)| -> Vec<String> {
        let (status, called) = mcp_call(url, token, "pyold__sessions", json!({}));
        assert_eq!(status, 200, "{called}");
        assert_ne!(called["result"]["isError"], true, "{called}");
        serde_json::from_str(&result_text(&called)).unwrap()
    };
    let after_first = seen(&first);
    assert_eq!(after_first.len(), 1, "{after_first:?}");
    let after_second = seen(&second);
    assert_eq!(
        after_second.len(),
        2,
        "the second run called in a session of its own: {after_second:?}"
    );
    assert_eq!(
        seen(&first),
        after_second,
        "the first run keeps its session"
    );
    assert_eq!(
        seen(&second),
        after_second,
        "the second run keeps its session"
    );
}
