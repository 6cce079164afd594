//! Black-box: what a production (Kubernetes) install leans on, against the
//! real binary: a grant record written straight into Redis grants nothing
//! (records are signed with a key Redis never sees), Redis over TLS with a
//! private CA and a client certificate, keys that rotate (a token and a
//! session signed with the previous key still accepted, new ones signed
//! with the newest), and metrics on their own port.

use crate::support;

use corkboard_testkit::{RedisServer, TLS_CA_FILE, TLS_CLIENT_CERT_FILE, TLS_CLIENT_KEY_FILE};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::path::Path;
use std::time::{Duration, Instant};
use support::*;

/// The environment of a `corkboard server` on `redis_url` with a SQLite
/// board in `dir` (kept across restarts) and the secrets of
/// [`cluster_secrets`].
fn server_env(dir: &Path, redis_url: &str, prefix: &str) -> Vec<(String, String)> {
    let mut env = cluster_secrets(dir);
    env.extend([
        ("CORKBOARD_REGISTRY".to_owned(), "redis".to_owned()),
        ("CORKBOARD_REDIS_URL".to_owned(), redis_url.to_owned()),
        ("CORKBOARD_REDIS_KEY_PREFIX".to_owned(), prefix.to_owned()),
        (
            "CORKBOARD_DATA_DIR".to_owned(),
            dir.join("data").display().to_string(),
        ),
    ]);
    env
}

fn start_server(env: &[(String, String)]) -> Running {
    let mut cmd = corkboard();
    cmd.args(["server", "--listen", "127.0.0.1:0"])
        .envs(env.iter().cloned());
    Running::spawn(cmd)
}

fn create_grant(server: &str, admin: &str, tenant: &str, run: &str) -> reqwest::blocking::Response {
    http()
        .post(format!("{server}/v1/tenants/{tenant}/grants"))
        .bearer_auth(admin)
        .json(&json!({
            "run": run,
            "capabilities": ["issues:read", "issues:create"],
            "ttl": "1h",
        }))
        .send()
        .unwrap()
}

fn token_of(issued: reqwest::blocking::Response) -> String {
    assert_eq!(issued.status(), 201);
    let issued: Value = issued.json().unwrap();
    issued["token"].as_str().unwrap().to_owned()
}

fn set_env(env: &mut Vec<(String, String)>, key: &str, value: String) {
    env.retain(|(k, _)| k != key);
    env.push((key.to_owned(), value));
}

/// A secret file (0600) holding `contents`.
fn secret_file(path: &Path, contents: &str) -> String {
    std::fs::write(path, contents).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path.display().to_string()
}

#[test]
fn a_grant_record_written_straight_into_redis_grants_nothing() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let prefix = corkboard_testkit::unique_prefix("forged");
    let env = server_env(dir.path(), &redis.url(), &prefix);
    let server = start_server(&env);
    let admin = admin_token_with(&env, "platform-admin", None);
    let token = token_of(create_grant(&server.url, &admin, "acme", "run-1"));
    let mcp = format!("{}/mcp", server.url);

    // The real record, as whoever can write to Redis sees it.
    let real_key = format!(
        "{prefix}tok:{}",
        hex::encode(Sha256::digest(token.as_bytes()))
    );
    let real = redis
        .command(&["GET", &real_key])
        .unwrap()
        .as_text()
        .expect("the grant's record in Redis");
    let forged = real.replace("\"acme\"", "\"evil\"");
    assert_ne!(forged, real, "the record names its tenant: {real}");

    // Copied under a made-up token's hash, as it is and with the tenant
    // changed: neither token is served, and nothing lands on either board.
    for (case, record) in [("copied", &real), ("copied, tenant changed", &forged)] {
        let made_up = corkboard_grants::RunToken::generate();
        let key = format!("{prefix}tok:{}", made_up.hash().to_hex());
        redis.command(&["SET", &key, record]).unwrap();
        let (status, body) = mcp_call(
            &mcp,
            made_up.expose(),
            "create_issue",
            json!({ "title": "forged" }),
        );
        assert_eq!(status, 403, "{case}: {body}");
    }
    for tenant in ["acme", "evil"] {
        let issues: Value = http()
            .get(format!("{}/v1/tenants/{tenant}/issues", server.url))
            .bearer_auth(&admin)
            .send()
            .unwrap()
            .json()
            .unwrap();
        assert!(
            !issues.to_string().contains("forged"),
            "{tenant}'s board got a forged write: {issues}"
        );
    }

    // The real record changed in place: not served as it is; the ledger's
    // grant (tenant acme) is, and the record is written again, signed.
    redis.command(&["SET", &real_key, &forged]).unwrap();
    let (status, body) = mcp_call(&mcp, &token, "create_issue", json!({ "title": "real" }));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["isError"], false, "{body}");
    let acme: Value = http()
        .get(format!("{}/v1/tenants/acme/issues", server.url))
        .bearer_auth(&admin)
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert!(acme.to_string().contains("real"), "{acme}");
    let rewritten = redis.command(&["GET", &real_key]).unwrap().as_text();
    assert_ne!(rewritten.as_deref(), Some(forged.as_str()));
}

#[test]
fn redis_over_tls_with_a_private_ca_and_a_client_certificate() {
    let redis = RedisServer::start_tls();
    let dir = tempfile::tempdir().unwrap();
    let prefix = corkboard_testkit::unique_prefix("tls");
    let mut env = server_env(dir.path(), &redis.tls_url(), &prefix);
    let file = |name: &str| redis.tls_file(name).display().to_string();
    set_env(&mut env, "CORKBOARD_REDIS_TLS_CA_FILE", file(TLS_CA_FILE));
    set_env(
        &mut env,
        "CORKBOARD_REDIS_TLS_CERT_FILE",
        file(TLS_CLIENT_CERT_FILE),
    );
    set_env(
        &mut env,
        "CORKBOARD_REDIS_TLS_KEY_FILE",
        file(TLS_CLIENT_KEY_FILE),
    );
    let server = start_server(&env);
    let admin = admin_token_with(&env, "platform-admin", None);
    let token = token_of(create_grant(&server.url, &admin, "acme", "run-1"));
    let (status, body) = mcp_call(
        &format!("{}/mcp", server.url),
        &token,
        "create_issue",
        json!({ "title": "over TLS" }),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["isError"], false, "{body}");
    let ready = http().get(format!("{}/readyz", server.url)).send().unwrap();
    assert_eq!(ready.status(), 200);
    // It went over TLS: the grant's record is in this Redis.
    let Ok(corkboard_testkit::Reply::Array(Some(keys))) =
        redis.command(&["KEYS", &format!("{prefix}tok:*")])
    else {
        panic!("KEYS failed");
    };
    assert_eq!(keys.len(), 1, "{keys:?}");

    // Without the private CA, the server's certificate is not trusted:
    // nothing is registered, loudly.
    let mut untrusting = env.clone();
    untrusting.retain(|(k, _)| k != "CORKBOARD_REDIS_TLS_CA_FILE");
    let other = start_server(&untrusting);
    let refused = create_grant(&other.url, &admin, "acme", "run-2");
    assert_eq!(refused.status(), 503);
}

#[test]
fn rotated_keys_accept_what_the_previous_keys_signed_and_sign_with_the_newest() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let prefix = corkboard_testkit::unique_prefix("rotation");
    let old_env = server_env(dir.path(), &redis.url(), &prefix);
    let old_jwt = old_env
        .iter()
        .find(|(k, _)| k == "CORKBOARD_JWT_SECRET_FILE")
        .map(|(_, v)| v.clone())
        .unwrap();
    let old_session = old_env
        .iter()
        .find(|(k, _)| k == "CORKBOARD_SESSION_KEY_FILE")
        .map(|(_, v)| v.clone())
        .unwrap();

    // Before the rotation: an admin token, a run token and a session.
    let old_admin = admin_token_with(&old_env, "platform-admin", None);
    let (token, old_session_id) = {
        let server = start_server(&old_env);
        let token = token_of(create_grant(&server.url, &old_admin, "acme", "run-1"));
        let id = open_session(&server.url, &token);
        (token, id)
    };

    // The rotation: new keys, the old ones listed as previous.
    let new_jwt = secret_file(
        &dir.path().join("jwt-2.secret"),
        "a second jwt secret for tests only, 0123456789abcdef",
    );
    let new_session = secret_file(
        &dir.path().join("session-2.key"),
        "a second session key for tests only, 0123456789abcdef",
    );
    let mut rotated = old_env.clone();
    set_env(&mut rotated, "CORKBOARD_JWT_SECRET_FILE", new_jwt.clone());
    set_env(
        &mut rotated,
        "CORKBOARD_SESSION_KEY_FILE",
        new_session.clone(),
    );
    set_env(&mut rotated, "CORKBOARD_JWT_PREVIOUS_KEY_FILES", old_jwt);
    set_env(
        &mut rotated,
        "CORKBOARD_SESSION_PREVIOUS_KEY_FILES",
        old_session,
    );
    let new_admin = admin_token_with(&rotated, "platform-admin", None);
    let new_session_id = {
        let server = start_server(&rotated);
        assert_eq!(me(&server.url, &old_admin), 200, "previous JWT key");
        assert_eq!(me(&server.url, &new_admin), 200, "current JWT key");
        assert_eq!(
            list_in_session(&server.url, &token, &old_session_id),
            200,
            "a session signed with the previous key"
        );
        let (status, body) = mcp_call(
            &format!("{}/mcp", server.url),
            &token,
            "list_issues",
            json!({}),
        );
        assert_eq!(
            status, 200,
            "a grant registered before the rotation: {body}"
        );
        open_session(&server.url, &token)
    };

    // The old keys retired: what was signed after the rotation still
    // works (it was signed with the newest), what was signed before no
    // longer does.
    let mut retired = rotated.clone();
    retired.retain(|(k, _)| !k.ends_with("_PREVIOUS_KEY_FILES"));
    let server = start_server(&retired);
    assert_eq!(me(&server.url, &new_admin), 200);
    assert_eq!(me(&server.url, &old_admin), 401);
    assert_eq!(list_in_session(&server.url, &token, &new_session_id), 200);
    assert_eq!(list_in_session(&server.url, &token, &old_session_id), 404);
}

fn me(server: &str, admin: &str) -> u16 {
    http()
        .get(format!("{server}/v1/me"))
        .bearer_auth(admin)
        .send()
        .unwrap()
        .status()
        .as_u16()
}

fn open_session(server: &str, token: &str) -> String {
    let init = http()
        .post(format!("{server}/mcp"))
        .header("Content-Type", "application/json")
        .header("Accept", mcp::ACCEPT)
        .bearer_auth(token)
        .body(mcp::initialize(1, "2025-11-25", json!({}), ("t", "1")).to_string())
        .send()
        .unwrap();
    assert_eq!(init.status(), 200);
    init.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned()
}

fn list_in_session(server: &str, token: &str, session: &str) -> u16 {
    http()
        .post(format!("{server}/mcp"))
        .header("Content-Type", "application/json")
        .header("Accept", mcp::ACCEPT)
        .header("Mcp-Session-Id", session)
        .header("MCP-Protocol-Version", "2025-11-25")
        .bearer_auth(token)
        .body(mcp::bare_request(2, "tools/list").to_string())
        .send()
        .unwrap()
        .status()
        .as_u16()
}

#[test]
fn metrics_listen_moves_metrics_off_the_api_port() {
    let serve = Serve::start_with_env(&[("CORKBOARD_METRICS_LISTEN", "127.0.0.1:0")]);
    let deadline = Instant::now() + Duration::from_secs(30);
    let metrics = loop {
        let line = serve
            .process
            .lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("a `metrics on` line");
        if let Some(url) = line.strip_prefix("metrics on ") {
            break url.to_owned();
        }
    };
    let on_api = http()
        .get(format!("{}/metrics", serve.url()))
        .send()
        .unwrap();
    assert_eq!(on_api.status(), 404, "metrics still on the API port");
    let own = http().get(&metrics).send().unwrap();
    assert_eq!(own.status(), 200);
    assert!(own.text().unwrap().contains("corkboard_"));
}
