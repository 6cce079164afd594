//! Black-box: per-run write budgets through the binary. Limits set when a
//! grant is issued (admin API, register API with the tenant's defaults),
//! enforced across `corkboard server` replicas sharing a real Redis and in
//! one `corkboard serve` on SQLite and on MongoDB, refused as a tool error
//! naming the budget, visible in the grant's `GET` and in `tools/list`;
//! idempotent replays take nothing.

use crate::support;

use serde_json::{Value, json};
use std::sync::Arc;
use support::*;

fn replica_env(
    redis: &corkboard_testkit::RedisServer,
    name: &str,
) -> (Vec<(String, String)>, tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let prefix = corkboard_testkit::unique_prefix(name);
    let mut env = cluster_secrets(dir.path());
    env.extend([
        ("CORKBOARD_REGISTRY".to_owned(), "redis".to_owned()),
        ("CORKBOARD_REDIS_URL".to_owned(), redis.url()),
        ("CORKBOARD_REDIS_KEY_PREFIX".to_owned(), prefix.clone()),
        (
            "CORKBOARD_DATA_DIR".to_owned(),
            dir.path().join("data").display().to_string(),
        ),
    ]);
    (env, dir, prefix)
}

fn start_server(env: &[(String, String)]) -> Running {
    let mut cmd = corkboard();
    cmd.args(["server", "--listen", "127.0.0.1:0"])
        .envs(env.iter().cloned());
    Running::spawn(cmd)
}

fn post(url: &str, admin: &str, body: Value) -> (u16, Value) {
    let response = http()
        .post(url)
        .bearer_auth(admin)
        .json(&body)
        .send()
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().unwrap_or(Value::Null))
}

fn get(url: &str, admin: &str) -> Value {
    let response = http().get(url).bearer_auth(admin).send().unwrap();
    assert_eq!(response.status(), 200, "GET {url}");
    response.json().unwrap()
}

/// A grant for `run` with `budgets`, made through the admin API at `server`.
fn budgeted_grant(server: &str, admin: &str, run: &str, budgets: Value) -> Value {
    let (status, issued) = post(
        &format!("{server}/v1/tenants/acme/grants"),
        admin,
        json!({
            "run": run,
            "capabilities": ["issues:read", "issues:create", "comments:write"],
            "ttl": "1h",
            "budgets": budgets,
        }),
    );
    assert_eq!(status, 201, "{issued}");
    issued
}

fn create(server: &str, token: &str, title: &str, key: Option<&str>) -> Value {
    let mut args = json!({ "title": title });
    if let Some(key) = key {
        args["idempotency_key"] = json!(key);
    }
    let (status, body) = mcp_call(&format!("{server}/mcp"), token, "create_issue", args);
    assert_eq!(
        status, 200,
        "a budget refusal is a tool result, not HTTP: {body}"
    );
    assert!(
        body.get("error").is_none(),
        "a budget refusal is a tool result, not a JSON-RPC error: {body}"
    );
    body["result"].clone()
}

fn text_of(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

fn issue_count(server: &str, token: &str) -> usize {
    let (status, body) = mcp_call(
        &format!("{server}/mcp"),
        token,
        "list_issues",
        json!({ "limit": 100 }),
    );
    assert_eq!(status, 200, "{body}");
    body["result"]["structuredContent"]["issues"]
        .as_array()
        .map_or(0, Vec::len)
}

#[test]
fn a_budget_of_three_creates_refuses_the_fourth_on_another_replica() {
    let redis = corkboard_testkit::RedisServer::start();
    let (env, _dir, prefix) = replica_env(&redis, "budget-replicas");
    let a = start_server(&env);
    let b = start_server(&env);
    let admin = admin_token_with(&env, "platform-admin", None);
    let issued = budgeted_grant(&a.url, &admin, "run-b3", json!({ "create_issue": 3 }));
    let token = issued["token"].as_str().unwrap();
    let grant_id = issued["grant"]["id"].as_str().unwrap();
    assert_eq!(issued["grant"]["budgets"], json!({ "create_issue": 3 }));

    // Three creates spread over both replicas, then the fourth on B.
    for (i, server) in [&a.url, &b.url, &a.url].into_iter().enumerate() {
        let result = create(server, token, &format!("budgeted {i}"), None);
        assert_eq!(result["isError"], false, "{result}");
    }
    let refused = create(&b.url, token, "one too many", None);
    assert_eq!(refused["isError"], true, "{refused}");
    let text = text_of(&refused);
    assert!(
        text.starts_with("this run may create at most 3 issues; 3 created (budget create_issue exhausted; not retryable"),
        "{text}"
    );
    assert_eq!(issue_count(&a.url, token), 3, "the fourth was not written");

    // The count lives in Redis, under this deployment's prefix.
    let key = format!("{prefix}budget:{grant_id}:create_issue");
    assert_eq!(
        redis
            .command(&["GET", &key])
            .expect("GET")
            .as_text()
            .as_deref(),
        Some("3"),
        "counted in Redis"
    );
    let corkboard_testkit::Reply::Integer(ttl) = redis.command(&["PTTL", &key]).expect("PTTL")
    else {
        panic!("PTTL answers an integer")
    };
    assert!(ttl > 0, "the counter expires with the grant: {ttl}");

    // Either replica's GET shows the budget spent; tools/list says it.
    let view = get(
        &format!("{}/v1/tenants/acme/grants/{grant_id}", b.url),
        &admin,
    );
    assert_eq!(
        view["budgets"]["create_issue"],
        json!({ "limit": 3, "used": 3, "remaining": 0 }),
        "{view}"
    );
    let (status, listed) = mcp_list(&format!("{}/mcp", b.url), token);
    assert_eq!(status, 200);
    let tools = listed["result"]["tools"].as_array().unwrap();
    let description = |name: &str| {
        tools.iter().find(|t| t["name"] == name).unwrap()["description"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert!(
        description("create_issue").ends_with("This run may create at most 3 issues."),
        "{}",
        description("create_issue")
    );
    assert!(
        !description("add_comment").contains("This run may"),
        "an unbudgeted tool says nothing"
    );
    // The refusal is audited as the grant refusing the call (the audit
    // writer batches: poll).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let audit = get(
            &format!("{}/v1/tenants/acme/audit?run=run-b3", a.url),
            &admin,
        );
        let denied = audit["records"]
            .as_array()
            .expect("audit records")
            .iter()
            .any(|r| r["tool"] == "create_issue" && r["outcome"] == "denied");
        if denied {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{audit}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Fires `n` creates at once, alternating over `servers`; returns how many
/// succeeded and how many were refused for the budget.
fn race_creates(servers: &[String], token: &str, n: usize) -> (usize, usize) {
    let token = Arc::new(token.to_owned());
    let barrier = Arc::new(std::sync::Barrier::new(n));
    let handles: Vec<_> = (0..n)
        .map(|i| {
            let (server, token, barrier) = (
                servers[i % servers.len()].clone(),
                token.clone(),
                barrier.clone(),
            );
            std::thread::spawn(move || {
                barrier.wait();
                create(&server, &token, &format!("racer {i}"), None)
            })
        })
        .collect();
    let (mut ok, mut refused) = (0, 0);
    for handle in handles {
        let result = handle.join().unwrap();
        if result["isError"] == false {
            ok += 1;
        } else {
            let text = text_of(&result);
            assert!(text.contains("budget create_issue exhausted"), "{text}");
            refused += 1;
        }
    }
    (ok, refused)
}

#[test]
fn twenty_concurrent_creates_under_a_budget_of_five_create_exactly_five_with_redis() {
    let redis = corkboard_testkit::RedisServer::start();
    let (env, _dir, _) = replica_env(&redis, "budget-race");
    let a = start_server(&env);
    let b = start_server(&env);
    let admin = admin_token_with(&env, "platform-admin", None);
    let issued = budgeted_grant(&a.url, &admin, "run-race", json!({ "create_issue": 5 }));
    let token = issued["token"].as_str().unwrap();
    let (ok, refused) = race_creates(&[a.url.clone(), b.url.clone()], token, 20);
    assert_eq!((ok, refused), (5, 15));
    assert_eq!(issue_count(&b.url, token), 5);
}

#[test]
fn twenty_concurrent_creates_under_a_budget_of_five_create_exactly_five_embedded() {
    let serve = Serve::start();
    let admin = serve.admin_token("platform-admin", None);
    let issued = budgeted_grant(
        serve.url(),
        &admin,
        "run-race",
        json!({ "create_issue": 5 }),
    );
    let token = issued["token"].as_str().unwrap();
    let (ok, refused) = race_creates(&[serve.url().to_owned()], token, 20);
    assert_eq!((ok, refused), (5, 15));
    assert_eq!(issue_count(serve.url(), token), 5);
    // The CLI shows the same count from the store.
    let grant_id = issued["grant"]["id"].as_str().unwrap();
    let out = serve.cli(&["grant", "get", grant_id, "--json"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let view: Value = serde_json::from_str(&stdout_of(&out)).unwrap();
    assert_eq!(
        view["budgets"]["create_issue"],
        json!({ "limit": 5, "used": 5, "remaining": 0 }),
        "{view}"
    );
    let out = serve.cli(&["grant", "list", "--tenant", "acme"]);
    assert!(
        stdout_of(&out).contains("budgets: create_issue 5/5 used (0 left)"),
        "{}",
        stdout_of(&out)
    );
}

#[test]
fn an_idempotent_replay_does_not_consume_budget() {
    let serve = Serve::start();
    let admin = serve.admin_token("platform-admin", None);
    let issued = budgeted_grant(
        serve.url(),
        &admin,
        "run-replay",
        json!({ "create_issue": 2, "add_comment": 1 }),
    );
    let token = issued["token"].as_str().unwrap();
    let grant_id = issued["grant"]["id"].as_str().unwrap();
    let used = |kind: &str| {
        get(
            &format!("{}/v1/tenants/acme/grants/{grant_id}", serve.url()),
            &admin,
        )["budgets"][kind]["used"]
            .clone()
    };
    let first = create(serve.url(), token, "keyed", Some("k1"));
    assert_eq!(first["isError"], false, "{first}");
    for _ in 0..3 {
        let replay = create(serve.url(), token, "keyed", Some("k1"));
        assert_eq!(replay["structuredContent"]["replayed"], true, "{replay}");
    }
    assert_eq!(used("create_issue"), 1, "replays took nothing");
    // A conflicting reuse of the key wrote nothing and gives its
    // reservation back too.
    let conflict = create(serve.url(), token, "other title", Some("k1"));
    assert_eq!(conflict["isError"], true, "{conflict}");
    assert_eq!(used("create_issue"), 1);
    assert_eq!(
        create(serve.url(), token, "second", Some("k2"))["isError"],
        false
    );
    let third = create(serve.url(), token, "third", Some("k3"));
    assert!(
        text_of(&third).starts_with("this run may create at most 2 issues; 2 created"),
        "{third}"
    );
    // With the budget spent, a retry under a used key still gets its
    // original result (and takes nothing).
    let late = create(serve.url(), token, "keyed", Some("k1"));
    assert_eq!(late["structuredContent"]["replayed"], true, "{late}");
    assert_eq!(used("create_issue"), 2);
    // Comments: a replay of the one allowed comment still answers.
    let id = first["structuredContent"]["id"].as_str().unwrap();
    let comment = |key: &str| {
        let (_, body) = mcp_call(
            &format!("{}/mcp", serve.url()),
            token,
            "add_comment",
            json!({ "issue_id": id, "body": "progress", "idempotency_key": key }),
        );
        body["result"].clone()
    };
    assert_eq!(comment("c1")["isError"], false);
    let replay = comment("c1");
    assert_eq!(replay["structuredContent"]["replayed"], true, "{replay}");
    assert_eq!(used("add_comment"), 1);
    let refused = comment("c2");
    assert!(
        text_of(&refused).starts_with("this run may add at most 1 comment; 1 added"),
        "{refused}"
    );
}

#[test]
fn the_register_api_applies_the_tenant_default_budgets() {
    let serve = Serve::start();
    let admin = serve.admin_token("platform-admin", None);
    let response = http()
        .put(format!("{}/v1/tenants/acme/settings", serve.url()))
        .bearer_auth(&admin)
        .json(&json!({ "run_budgets": { "create_issue": 2, "add_comment": 5 } }))
        .send()
        .unwrap();
    assert_eq!(response.status(), 200);
    let settings: Value = response.json().unwrap();
    assert_eq!(
        settings["run_budgets"],
        json!({ "create_issue": 2, "add_comment": 5 })
    );
    let register = |budgets: Value| {
        let (status, body) = post(
            &format!("{}/v1/runs", serve.url()),
            &admin,
            json!({
                "tenant": "acme",
                "capabilities": ["issues:read", "issues:create"],
                "budgets": budgets,
            }),
        );
        assert_eq!(status, 201, "{body}");
        body
    };
    // Nothing asked: the tenant's defaults.
    let defaults = register(json!({}));
    assert_eq!(
        defaults["budgets"],
        json!({ "create_issue": 2, "add_comment": 5 }),
        "{defaults}"
    );
    // Less asked: less; more asked: the default; kinds not asked: default.
    let mixed = register(json!({ "create_issue": 1, "add_comment": 50, "update_issue": 3 }));
    assert_eq!(
        mixed["budgets"],
        json!({ "create_issue": 1, "update_issue": 3, "add_comment": 5 }),
        "{mixed}"
    );
    // The limit holds on the run's own endpoint.
    let token = defaults["token"].as_str().unwrap();
    let url = defaults["mcp_url"].as_str().unwrap();
    for i in 0..2 {
        let (_, body) = mcp_call(
            url,
            token,
            "create_issue",
            json!({ "title": format!("r{i}") }),
        );
        assert_eq!(body["result"]["isError"], false, "{body}");
    }
    let (_, body) = mcp_call(url, token, "create_issue", json!({ "title": "r2" }));
    assert_eq!(body["result"]["isError"], true, "{body}");
    assert!(
        text_of(&body["result"]).starts_with("this run may create at most 2 issues"),
        "{body}"
    );
    // An unknown budget is refused by name.
    let (status, body) = post(
        &format!("{}/v1/runs", serve.url()),
        &admin,
        json!({ "tenant": "acme", "capabilities": ["issues:read"], "budgets": { "delete_issue": 1 } }),
    );
    assert_eq!(status, 400, "{body}");
}

#[test]
fn twenty_concurrent_creates_under_a_budget_of_five_create_exactly_five_on_mongodb() {
    let mongo = corkboard_testkit::MongoServer::start();
    let database = corkboard_testkit::unique_database("budgets");
    let uri = mongo.uri();
    let serve = Serve::start_with_env(&[
        ("CORKBOARD_STORE", "mongodb"),
        ("CORKBOARD_MONGODB_URI", &uri),
        ("CORKBOARD_MONGODB_DATABASE", &database),
    ]);
    let admin = serve.admin_token("platform-admin", None);
    let issued = budgeted_grant(
        serve.url(),
        &admin,
        "run-race",
        json!({ "create_issue": 5 }),
    );
    let token = issued["token"].as_str().unwrap();
    let (ok, refused) = race_creates(&[serve.url().to_owned()], token, 20);
    assert_eq!((ok, refused), (5, 15));
    assert_eq!(issue_count(serve.url(), token), 5);
    let grant_id = issued["grant"]["id"].as_str().unwrap();
    let view = get(
        &format!("{}/v1/tenants/acme/grants/{grant_id}", serve.url()),
        &admin,
    );
    assert_eq!(
        view["budgets"]["create_issue"],
        json!({ "limit": 5, "used": 5, "remaining": 0 }),
        "{view}"
    );
}

#[test]
fn claims_and_releases_are_counted_in_their_budgets() {
    let serve = Serve::start();
    let admin = serve.admin_token("platform-admin", None);
    let every_budget_one = json!({
        "create_issue": 1, "update_issue": 1, "add_comment": 1,
        "claim_issue": 1, "release_issue": 1,
    });
    let (status, issued) = post(
        &format!("{}/v1/tenants/acme/grants", serve.url()),
        &admin,
        json!({
            "run": "run-claims",
            "capabilities": ["issues:read", "issues:create", "issues:claim"],
            "ttl": "1h",
            "budgets": every_budget_one,
        }),
    );
    assert_eq!(status, 201, "{issued}");
    let token = issued["token"].as_str().unwrap();
    let grant_id = issued["grant"]["id"].as_str().unwrap();
    let issue = create(serve.url(), token, "to be claimed", None);
    let id = issue["structuredContent"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let call = |tool: &str| {
        let (status, body) = mcp_call(
            &format!("{}/mcp", serve.url()),
            token,
            tool,
            json!({ "id": id }),
        );
        assert_eq!(status, 200, "{body}");
        body["result"].clone()
    };
    // One claim and one release are allowed ...
    assert_eq!(call("claim_issue")["isError"], false);
    assert_eq!(call("release_issue")["isError"], false);
    // ... the next of each is refused by its budget, and writes nothing.
    let claim = call("claim_issue");
    assert!(
        text_of(&claim).starts_with("this run may take at most 1 claim; 1 taken"),
        "{claim}"
    );
    let read = mcp_call(
        &format!("{}/mcp", serve.url()),
        token,
        "get_issue",
        json!({ "id": id }),
    )
    .1;
    assert!(
        read["result"]["structuredContent"]["claim"].is_null(),
        "the refused claim wrote nothing: {read}"
    );
    let release = call("release_issue");
    assert!(
        text_of(&release).starts_with("this run may release at most 1 claim; 1 released"),
        "{release}"
    );
    let view = get(
        &format!("{}/v1/tenants/acme/grants/{grant_id}", serve.url()),
        &admin,
    );
    assert_eq!(
        view["budgets"]["claim_issue"],
        json!({ "limit": 1, "used": 1, "remaining": 0 }),
        "{view}"
    );
    assert_eq!(view["budgets"]["release_issue"]["used"], 1, "{view}");
}
