//! Black-box: `corkboard server` replicas sharing one Redis registry (and
//! one board), revocation across replicas, and Redis outages under traffic.

use crate::support;

use serde_json::{Value, json};
use std::time::{Duration, Instant};
use support::*;

struct Cluster {
    _redis: corkboard_testkit::RedisServer,
    env: Vec<(String, String)>,
    _dir: tempfile::TempDir,
}

fn cluster_env(
    redis: &corkboard_testkit::RedisServer,
    name: &str,
) -> (Vec<(String, String)>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut env = cluster_secrets(dir.path());
    env.extend([
        ("CORKBOARD_REGISTRY".to_owned(), "redis".to_owned()),
        ("CORKBOARD_REDIS_URL".to_owned(), redis.url()),
        (
            "CORKBOARD_REDIS_KEY_PREFIX".to_owned(),
            corkboard_testkit::unique_prefix(name),
        ),
        (
            "CORKBOARD_DATA_DIR".to_owned(),
            dir.path().join("data").display().to_string(),
        ),
    ]);
    (env, dir)
}

fn start_server(env: &[(String, String)]) -> Running {
    let mut cmd = corkboard();
    cmd.args(["server", "--listen", "127.0.0.1:0"])
        .envs(env.iter().cloned());
    Running::spawn(cmd)
}

fn create_grant(server: &str, admin: &str, tenant: &str, run: &str, caps: &[&str]) -> Value {
    let response = http()
        .post(format!("{server}/v1/tenants/{tenant}/grants"))
        .bearer_auth(admin)
        .json(&json!({ "run": run, "capabilities": caps, "ttl": "1h" }))
        .send()
        .unwrap();
    assert_eq!(response.status(), 201);
    response.json().unwrap()
}

impl Cluster {
    fn new(name: &str) -> Self {
        let redis = corkboard_testkit::RedisServer::start();
        let (env, dir) = cluster_env(&redis, name);
        Cluster {
            _redis: redis,
            env,
            _dir: dir,
        }
    }
}

#[test]
fn a_grant_made_on_one_replica_works_on_the_other_and_revocation_reaches_it() {
    let cluster = Cluster::new("two-replicas");
    let a = start_server(&cluster.env);
    let b = start_server(&cluster.env);
    let admin = admin_token_with(&cluster.env, "platform-admin", None);

    let issued = create_grant(
        &a.url,
        &admin,
        "acme",
        "run-1",
        &["issues:read", "issues:create"],
    );
    let token = issued["token"].as_str().unwrap();

    // Created on A, used on B.
    let (status, body) = mcp_call(
        &format!("{}/mcp", b.url),
        token,
        "create_issue",
        json!({ "title": "from B" }),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["isError"], false, "{body}");

    // A legacy session opened on A is accepted by B (self-contained ids).
    let init = http()
        .post(format!("{}/mcp", a.url))
        .header("Content-Type", "application/json")
        .header("Accept", mcp::ACCEPT)
        .bearer_auth(token)
        .body(mcp::initialize(1, "2025-11-25", json!({}), ("t", "1")).to_string())
        .send()
        .unwrap();
    assert_eq!(init.status(), 200);
    let session = init.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let listed = http()
        .post(format!("{}/mcp", b.url))
        .header("Content-Type", "application/json")
        .header("Accept", mcp::ACCEPT)
        .header("Mcp-Session-Id", &session)
        .header("MCP-Protocol-Version", "2025-11-25")
        .bearer_auth(token)
        .body(mcp::bare_request(2, "tools/list").to_string())
        .send()
        .unwrap();
    assert_eq!(listed.status(), 200);
    // Ended on B (DELETE), refused on A: ended sessions are shared too.
    let ended = http()
        .delete(format!("{}/mcp", b.url))
        .header("Mcp-Session-Id", &session)
        .header("MCP-Protocol-Version", "2025-11-25")
        .bearer_auth(token)
        .send()
        .unwrap();
    assert_eq!(ended.status(), 200);
    let reused = http()
        .post(format!("{}/mcp", a.url))
        .header("Content-Type", "application/json")
        .header("Accept", mcp::ACCEPT)
        .header("Mcp-Session-Id", &session)
        .header("MCP-Protocol-Version", "2025-11-25")
        .bearer_auth(token)
        .body(mcp::bare_request(3, "tools/list").to_string())
        .send()
        .unwrap();
    assert_eq!(
        reused.status(),
        404,
        "a session ended on B must be unknown on A"
    );

    // Revoked on A, refused on B.
    let grant_id = issued["grant"]["id"].as_str().unwrap();
    let started = Instant::now();
    let revoked = http()
        .delete(format!("{}/v1/tenants/acme/grants/{grant_id}", a.url))
        .bearer_auth(&admin)
        .send()
        .unwrap();
    assert_eq!(revoked.status(), 200);
    let deadline = started + Duration::from_secs(10);
    loop {
        let (status, _) = mcp_call(&format!("{}/mcp", b.url), token, "list_issues", json!({}));
        if status == 403 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "revocation did not reach replica B within 10 s (last status {status})"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    eprintln!("revocation propagation A -> B: {:?}", started.elapsed());
}

#[test]
fn redis_outage_fails_closed_and_service_resumes_without_restart() {
    let mut redis = corkboard_testkit::RedisServer::start();
    let (env, _dir) = cluster_env(&redis, "outage");
    let server = start_server(&env);
    let admin = admin_token_with(&env, "platform-admin", None);
    let issued = create_grant(&server.url, &admin, "acme", "run-1", &["issues:read"]);
    let token = issued["token"].as_str().unwrap();
    let mcp = format!("{}/mcp", server.url);
    assert_eq!(mcp_call(&mcp, token, "list_issues", json!({})).0, 200);

    redis.stop();
    // Fail closed: within the grace window plus a margin, requests are
    // refused as unavailable (503), never served from a stale cache forever.
    let deadline = Instant::now() + Duration::from_secs(30);
    let refusal = loop {
        let (status, body) = mcp_call(&mcp, token, "list_issues", json!({}));
        if status == 503 {
            break body;
        }
        assert!(
            Instant::now() < deadline,
            "still served {status} 30 s after Redis went away"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let message = refusal["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_lowercase();
    assert!(message.contains("unavailable"), "{refusal}");
    // Readiness tolerates a blip of up to 10 s, then says unavailable.
    let deadline = Instant::now() + Duration::from_secs(60);
    while http()
        .get(format!("{}/readyz", server.url))
        .send()
        .unwrap()
        .status()
        != 503
    {
        assert!(
            Instant::now() < deadline,
            "still ready 60 s into the outage"
        );
        std::thread::sleep(Duration::from_millis(500));
    }

    // A new grant cannot be created while the registry is down: loud error.
    let create = http()
        .post(format!("{}/v1/tenants/acme/grants", server.url))
        .bearer_auth(&admin)
        .json(&json!({ "run": "run-2", "capabilities": ["issues:read"] }))
        .send()
        .unwrap();
    assert_eq!(create.status(), 503);

    // Redis comes back (empty: it keeps no data); the same process serves
    // again, refilling the registry from the durable grant ledger.
    redis.restart();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, _) = mcp_call(&mcp, token, "list_issues", json!({}));
        if status == 200 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no recovery 30 s after Redis returned (status {status})"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // ... and a revoked grant is not resurrected by the refill.
    let grant_id = issued["grant"]["id"].as_str().unwrap();
    let revoked = http()
        .delete(format!("{}/v1/tenants/acme/grants/{grant_id}", server.url))
        .bearer_auth(&admin)
        .send()
        .unwrap();
    assert_eq!(revoked.status(), 200);
    assert_eq!(mcp_call(&mcp, token, "list_issues", json!({})).0, 403);
}

/// Polls `url` with `token` until the answer is not 503 (Redis coming
/// back), and returns that status.
fn status_once_redis_answers(mcp: &str, token: &str) -> u16 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, _) = mcp_call(mcp, token, "list_issues", json!({}));
        if status != 503 {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "still 503 30 s after Redis returned"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_revocation_survives_redis_restarting_from_an_older_snapshot() {
    let mut redis = corkboard_testkit::RedisServer::start();
    let (env, _dir) = cluster_env(&redis, "snapshot");
    let a = start_server(&env);
    let b = start_server(&env);
    let admin = admin_token_with(&env, "platform-admin", None);
    let issued = create_grant(&a.url, &admin, "acme", "run-1", &["issues:read"]);
    let token = issued["token"].as_str().unwrap();
    let (mcp_a, mcp_b) = (format!("{}/mcp", a.url), format!("{}/mcp", b.url));
    assert_eq!(mcp_call(&mcp_a, token, "list_issues", json!({})).0, 200);
    assert_eq!(mcp_call(&mcp_b, token, "list_issues", json!({})).0, 200);

    // A snapshot that still holds the live grant.
    let saved = redis.command(&["SAVE"]).expect("SAVE");
    assert_eq!(saved.as_text().as_deref(), Some("OK"), "{saved:?}");

    let grant_id = issued["grant"]["id"].as_str().unwrap();
    let revoked = http()
        .delete(format!("{}/v1/tenants/acme/grants/{grant_id}", a.url))
        .bearer_auth(&admin)
        .send()
        .unwrap();
    assert_eq!(revoked.status(), 200);
    let deadline = Instant::now() + Duration::from_secs(10);
    while mcp_call(&mcp_b, token, "list_issues", json!({})).0 != 403 {
        assert!(Instant::now() < deadline, "revocation did not reach B");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(mcp_call(&mcp_a, token, "list_issues", json!({})).0, 403);

    // Redis loses the revocation: SIGKILL, then back from the snapshot on
    // the same port, with the revoked grant's keys in it again.
    redis.stop();
    redis.restart();
    let keys = redis.command(&["DBSIZE"]).expect("DBSIZE");
    assert!(
        !matches!(keys, corkboard_testkit::Reply::Integer(0)),
        "the snapshot must hold the grant: {keys:?}"
    );

    for (name, mcp) in [("A", &mcp_a), ("B", &mcp_b)] {
        assert_eq!(
            status_once_redis_answers(mcp, token),
            403,
            "replica {name} served a revoked token from a restored Redis"
        );
        for _ in 0..20 {
            let (status, body) = mcp_call(mcp, token, "list_issues", json!({}));
            assert!(
                status == 403 || status == 503,
                "replica {name} served a revoked token: {status} {body}"
            );
        }
    }
}

fn grant_view(server: &str, admin: &str, grant_id: &str) -> Value {
    let response = http()
        .get(format!("{server}/v1/tenants/acme/grants/{grant_id}"))
        .bearer_auth(admin)
        .send()
        .unwrap();
    assert_eq!(response.status(), 200);
    response.json().unwrap()
}

#[test]
fn a_revocation_made_while_redis_hung_converges_without_further_action() {
    let redis = corkboard_testkit::RedisServer::start();
    let (env, _dir) = cluster_env(&redis, "hung-revoke");
    let a = start_server(&env);
    let b = start_server(&env);
    let admin = admin_token_with(&env, "platform-admin", None);
    let issued = create_grant(&a.url, &admin, "acme", "run-1", &["issues:read"]);
    let token = issued["token"].as_str().unwrap();
    let grant_id = issued["grant"]["id"].as_str().unwrap();
    let (mcp_a, mcp_b) = (format!("{}/mcp", a.url), format!("{}/mcp", b.url));
    assert_eq!(mcp_call(&mcp_a, token, "list_issues", json!({})).0, 200);
    assert_eq!(mcp_call(&mcp_b, token, "list_issues", json!({})).0, 200);

    redis.pause();
    let revoked = http()
        .delete(format!("{}/v1/tenants/acme/grants/{grant_id}", a.url))
        .bearer_auth(&admin)
        .send()
        .unwrap();
    assert_eq!(revoked.status(), 503, "the Redis step cannot be confirmed");
    let view = grant_view(&a.url, &admin, grant_id);
    assert_eq!(view["status"], "revoked", "{view}");
    assert_eq!(view["revocation"], "pending", "{view}");
    redis.resume();
    let resumed = Instant::now();

    // No further admin action: both replicas refuse it within a bounded
    // number of polls, and the page says it is confirmed.
    for (name, mcp) in [("A", &mcp_a), ("B", &mcp_b)] {
        let mut polls = 0;
        loop {
            let (status, _) = mcp_call(mcp, token, "list_issues", json!({}));
            if status == 403 {
                break;
            }
            polls += 1;
            assert!(polls < 600, "replica {name} still answers {status}");
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!(
            "replica {name} refuses the revoked token {:?} after Redis resumed",
            resumed.elapsed()
        );
    }
    let mut polls = 0;
    while grant_view(&b.url, &admin, grant_id)["revocation"] != "confirmed" {
        polls += 1;
        assert!(polls < 600, "the revocation was never confirmed");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_grant_renewed_on_one_replica_works_on_the_other_past_its_old_expiry() {
    let cluster = Cluster::new("renewal");
    let a = start_server(&cluster.env);
    let b = start_server(&cluster.env);
    let admin = admin_token_with(&cluster.env, "platform-admin", None);
    let response = http()
        .post(format!("{}/v1/tenants/acme/grants", a.url))
        .bearer_auth(&admin)
        .json(&json!({ "run": "run-r", "capabilities": ["issues:read"], "ttl": "4s" }))
        .send()
        .unwrap();
    assert_eq!(response.status(), 201);
    let issued: Value = response.json().unwrap();
    let token = issued["token"].as_str().unwrap();
    let grant_id = issued["grant"]["id"].as_str().unwrap();
    let old_expiry =
        corkboard_board::Timestamp::parse_rfc3339(issued["grant"]["expires_at"].as_str().unwrap())
            .unwrap();
    // B caches the grant with its old expiry.
    for _ in 0..2 {
        let (status, body) = mcp_list(&format!("{}/mcp", b.url), token);
        assert_eq!(status, 200, "{body}");
    }
    let renewed = http()
        .patch(format!("{}/v1/tenants/acme/grants/{grant_id}", a.url))
        .bearer_auth(&admin)
        .json(&json!({ "extend_by": "1h" }))
        .send()
        .unwrap();
    assert_eq!(renewed.status(), 200);
    let renewed_at = Instant::now();
    // Past the old expiry, the token works on B (its cached copy, which
    // said "expired" by then, was invalidated) and on A.
    let wait = old_expiry.as_millis() - corkboard_board::Timestamp::now().as_millis() + 200;
    std::thread::sleep(Duration::from_millis(u64::try_from(wait).unwrap_or(0)));
    for server in [&b.url, &a.url] {
        let (status, body) = mcp_call(&format!("{server}/mcp"), token, "list_issues", json!({}));
        assert_eq!(status, 200, "{server}: {body}");
        assert_eq!(body["result"]["isError"], false, "{server}: {body}");
    }
    eprintln!(
        "renewed token used on the other replica {:?} after the renewal",
        renewed_at.elapsed()
    );
    // Revocation still ends it everywhere.
    let revoked = http()
        .delete(format!("{}/v1/tenants/acme/grants/{grant_id}", a.url))
        .bearer_auth(&admin)
        .send()
        .unwrap();
    assert_eq!(revoked.status(), 200);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, _) = mcp_list(&format!("{}/mcp", b.url), token);
        if status == 403 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "B still accepts the revoked token"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
