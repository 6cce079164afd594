//! Black-box: webhooks of `corkboard serve` reaching a real HTTP receiver
//! (a std `TcpListener` in the test): signed deliveries with their ids, a
//! retry after the receiver answers 500, only a tenant's own events at its
//! endpoints, URL validation, the status in the admin API, no delivery
//! lost when the server is SIGKILLed and restarted on the same data dir,
//! and a receiver that never answers delaying no other tenant's deliveries.

use crate::support;

use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicU16, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::*;

#[derive(Debug, Clone)]
struct Received {
    path: String,
    headers: HashMap<String, String>,
    body: String,
    answered: u16,
}

/// Answers `fail_first` requests with 500, then `status`.
struct Receiver {
    port: u16,
    received: Arc<Mutex<Vec<Received>>>,
    status: Arc<AtomicU16>,
    fail_first: Arc<AtomicU32>,
}

impl Receiver {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let received = Arc::new(Mutex::new(Vec::new()));
        let status = Arc::new(AtomicU16::new(200));
        let fail_first = Arc::new(AtomicU32::new(0));
        let (r, s, f) = (received.clone(), status.clone(), fail_first.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut request_line = String::new();
                if reader.read_line(&mut request_line).is_err() {
                    continue;
                }
                // Without the query string (the endpoint's own secret).
                let target = request_line.split(' ').nth(1).unwrap_or("");
                let path = target.split('?').next().unwrap_or("").to_owned();
                let mut headers = HashMap::new();
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    if let Some((k, v)) = line.trim_end().split_once(':') {
                        headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
                    }
                }
                let len: usize = headers
                    .get("content-length")
                    .and_then(|l| l.parse().ok())
                    .unwrap_or(0);
                let mut body = vec![0; len];
                if reader.read_exact(&mut body).is_err() {
                    continue;
                }
                let answered = if f
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok()
                {
                    500
                } else {
                    s.load(Ordering::SeqCst)
                };
                r.lock().unwrap().push(Received {
                    path,
                    headers,
                    body: String::from_utf8_lossy(&body).into_owned(),
                    answered,
                });
                let _ = write!(
                    stream,
                    "HTTP/1.1 {answered} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                );
            }
        });
        Receiver {
            port,
            received,
            status,
            fail_first,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn all(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    /// Waits until `done` holds for what was received.
    fn wait_for(&self, what: &str, done: impl Fn(&[Received]) -> bool) -> Vec<Received> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let all = self.all();
            if done(&all) {
                return all;
            }
            assert!(Instant::now() < deadline, "never received {what}: {all:#?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn event(r: &Received) -> &str {
    r.headers.get("corkboard-event").map_or("", String::as_str)
}

fn delivered(all: &[Received], path: &str, name: &str) -> usize {
    all.iter()
        .filter(|r| r.path == path && event(r) == name && r.answered == 200)
        .count()
}

/// What a receiver does: recompute the HMAC over `t + "." + body`.
fn verify(secret: &str, r: &Received) {
    let header = &r.headers["corkboard-signature"];
    let (t, v1) = header
        .split_once(',')
        .and_then(|(t, v)| Some((t.strip_prefix("t=")?, v.strip_prefix("v1=")?)))
        .unwrap_or_else(|| panic!("bad signature header {header}"));
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("{t}.{}", r.body).as_bytes());
    assert_eq!(
        hex::encode(mac.finalize().into_bytes()),
        v1,
        "signature of {r:?}"
    );
    let age = corkboard_board::Timestamp::now().as_millis() / 1000 - t.parse::<i64>().unwrap();
    assert!((0..600).contains(&age), "timestamp {t} is not recent");
}

fn call(
    serve: &Serve,
    method: reqwest::Method,
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
    let response = request.send().unwrap();
    let status = response.status().as_u16();
    (status, response.json().unwrap_or(Value::Null))
}

const ACME_SECRET: &str = "acme-secret-0123456789";

#[test]
fn signed_deliveries_retry_stay_with_their_tenant_and_survive_a_sigkill() {
    let receiver = Receiver::start();
    let mut serve = Serve::start_with_env(&[("CORKBOARD_WEBHOOK_ALLOWED_HOSTS", "127.0.0.1")]);
    let admin = serve.admin_token("platform-admin", None);
    let post = reqwest::Method::POST;

    // URLs are validated: scheme, credentials, allowed hosts.
    for bad in [
        "ftp://127.0.0.1/x".to_owned(),
        format!("http://user:pw@127.0.0.1:{}/x", receiver.port),
        "http://10.0.0.1/x".to_owned(),
    ] {
        let (status, reply) = call(
            &serve,
            post.clone(),
            "/v1/tenants/acme/webhooks",
            &admin,
            Some(json!({"url": bad, "events": ["issue.created"]})),
        );
        assert_eq!(status, 422, "{bad}: {reply}");
        assert!(!reply.to_string().contains("pw@"), "{reply}");
    }
    let (status, acme_hook) = call(
        &serve,
        post.clone(),
        "/v1/tenants/acme/webhooks",
        &admin,
        Some(json!({
            "url": receiver.url("/acme?key=sekrit"),
            "events": ["issue.created", "issue.commented", "run.started"],
            "secret": ACME_SECRET,
        })),
    );
    assert_eq!(status, 201, "{acme_hook}");
    assert!(
        acme_hook.get("secret").is_none(),
        "a given secret is not echoed"
    );
    assert!(
        !acme_hook.to_string().contains("sekrit"),
        "query strings are not shown"
    );
    let (status, globex_hook) = call(
        &serve,
        post.clone(),
        "/v1/tenants/globex/webhooks",
        &admin,
        Some(json!({"url": receiver.url("/globex"), "events": ["issue.created"]})),
    );
    assert_eq!(status, 201, "{globex_hook}");
    let globex_secret = globex_hook["secret"]
        .as_str()
        .expect("a generated secret, shown once");

    // The first delivery is answered 500 and retried.
    receiver.fail_first.store(1, Ordering::SeqCst);
    let all = "issues:read,issues:create,comments:write";
    let acme = serve.grant("acme", "run-a", all);
    let globex = serve.grant("globex", "run-g", all);
    let (_, created) = mcp_call(
        &acme.mcp_url,
        &acme.token,
        "create_issue",
        json!({"title": "acme's"}),
    );
    let acme_issue = created["result"]["structuredContent"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (_, created) = mcp_call(
        &globex.mcp_url,
        &globex.token,
        "create_issue",
        json!({"title": "globex's"}),
    );
    let globex_issue = created["result"]["structuredContent"]["id"]
        .as_str()
        .unwrap()
        .to_owned();

    let got = receiver.wait_for("the first deliveries", |all| {
        delivered(all, "/acme", "run.started") == 1
            && delivered(all, "/acme", "issue.created") == 1
            && delivered(all, "/globex", "issue.created") == 1
    });
    for r in &got {
        let body: Value = serde_json::from_str(&r.body).unwrap();
        assert!(r.headers["corkboard-delivery"].starts_with("dlv_"), "{r:?}");
        assert_eq!(body["event"], event(r));
        match r.path.as_str() {
            "/acme" => {
                verify(ACME_SECRET, r);
                assert_eq!(body["tenant"], "acme", "{r:?}");
                if event(r) == "issue.created" {
                    assert_eq!(body["data"]["issue"]["id"], acme_issue.as_str());
                }
            }
            "/globex" => {
                verify(globex_secret, r);
                assert_eq!(body["tenant"], "globex", "{r:?}");
                assert_eq!(body["data"]["issue"]["id"], globex_issue.as_str());
            }
            other => panic!("unexpected path {other}"),
        }
    }
    // The 500 was followed by the same delivery again.
    let failed: Vec<&Received> = got.iter().filter(|r| r.answered == 500).collect();
    assert_eq!(failed.len(), 1, "{got:#?}");
    let retried = &failed[0].headers["corkboard-delivery"];
    assert!(
        got.iter()
            .any(|r| r.answered == 200 && &r.headers["corkboard-delivery"] == retried),
        "the delivery answered 500 was not retried: {got:#?}"
    );
    // The receiver has the body before the worker records the attempt:
    // wait (bounded) for the record before reading the status.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let listed = loop {
        let (_, listed) = call(
            &serve,
            reqwest::Method::GET,
            "/v1/tenants/acme/webhooks",
            &admin,
            None,
        );
        if listed["webhooks"][0]["status"]["pending"] == 0 || std::time::Instant::now() > deadline {
            break listed;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let status = &listed["webhooks"][0]["status"];
    assert_eq!(status["pending"], 0, "{listed}");
    assert_eq!(status["last_status"], 200, "{listed}");
    assert!(!listed.to_string().contains(ACME_SECRET), "{listed}");
    // The same through the CLI.
    let out = run(corkboard()
        .args([
            "webhook",
            "list",
            "--tenant",
            "acme",
            "--json",
            "--server",
            serve.url(),
        ])
        .env("CORKBOARD_ADMIN_TOKEN", &admin));
    assert!(out.status.success(), "{}", stderr_of(&out));
    let cli: Value = serde_json::from_str(&stdout_of(&out)).unwrap();
    assert_eq!(cli["webhooks"][0]["id"], listed["webhooks"][0]["id"]);

    // Writes whose deliveries have not gone through when the server is
    // SIGKILLed arrive after it restarts on the same data dir.
    receiver.status.store(503, Ordering::SeqCst);
    let comment = |body: &str| {
        let (status, reply) = mcp_call(
            &acme.mcp_url,
            &acme.token,
            "add_comment",
            json!({"issue_id": acme_issue, "body": body}),
        );
        assert_eq!(status, 200, "{reply}");
        assert_eq!(reply["result"]["isError"], false, "{reply}");
    };
    comment("first");
    receiver.wait_for("an attempt answered 503", |all| {
        all.iter()
            .any(|r| event(r) == "issue.commented" && r.answered == 503)
    });
    comment("second");
    serve.process.child.kill().unwrap();
    serve.process.child.wait().unwrap();
    receiver.status.store(200, Ordering::SeqCst);
    let mut cmd = corkboard();
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(serve.data_dir.path())
        .envs(serve.env.iter().cloned());
    serve.process = Running::spawn(cmd);
    let got = receiver.wait_for("both comments after the restart", |all| {
        delivered(all, "/acme", "issue.commented") == 2
    });
    let mut ids: Vec<&String> = got
        .iter()
        .filter(|r| event(r) == "issue.commented" && r.answered == 200)
        .map(|r| &r.headers["corkboard-delivery"])
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 2, "two distinct deliveries: {got:#?}");
    assert!(
        got.iter()
            .all(|r| r.path != "/globex" || event(r) == "issue.created"),
        "globex's endpoint got only its own subscription"
    );
}

#[test]
fn a_claim_is_delivered_signed_and_the_secret_is_sealed_at_rest() {
    let receiver = Receiver::start();
    let serve = Serve::start_with_env(&[("CORKBOARD_WEBHOOK_ALLOWED_HOSTS", "127.0.0.1")]);
    let admin = serve.admin_token("platform-admin", None);
    let (status, hook) = call(
        &serve,
        reqwest::Method::POST,
        "/v1/tenants/acme/webhooks",
        &admin,
        Some(json!({
            "url": receiver.url("/claims"),
            "events": ["issue.claimed"],
            "secret": ACME_SECRET,
        })),
    );
    assert_eq!(status, 201, "{hook}");
    let run = serve.grant(
        "acme",
        "run-claimer",
        "issues:read,issues:create,issues:claim",
    );
    let (_, created) = mcp_call(
        &run.mcp_url,
        &run.token,
        "create_issue",
        json!({"title": "to be claimed"}),
    );
    let id = created["result"]["structuredContent"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    for _ in 0..2 {
        // The second claim is a repeat of the run's own: no second event.
        let (_, claimed) = mcp_call(&run.mcp_url, &run.token, "claim_issue", json!({"id": id}));
        assert_eq!(claimed["result"]["isError"], false, "{claimed}");
    }
    let got = receiver.wait_for("issue.claimed", |all| {
        delivered(all, "/claims", "issue.claimed") == 1
    });
    let r = got.iter().find(|r| event(r) == "issue.claimed").unwrap();
    verify(ACME_SECRET, r);
    let body: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(body["data"]["issue"]["id"], id.as_str(), "{body}");
    assert_eq!(body["data"]["claim"]["run"], "run-claimer", "{body}");
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        delivered(&receiver.all(), "/claims", "issue.claimed"),
        1,
        "a repeated claim is no event; the create was not subscribed"
    );
    // The signing secret is nowhere in the store's files in clear.
    for entry in std::fs::read_dir(serve.data_dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            let bytes = std::fs::read(&path).unwrap();
            assert!(
                !bytes
                    .windows(ACME_SECRET.len())
                    .any(|w| w == ACME_SECRET.as_bytes()),
                "{} holds the webhook secret in clear",
                path.display()
            );
        }
    }
}

#[test]
fn a_secret_stored_in_clear_before_sealing_still_signs_its_deliveries() {
    let receiver = Receiver::start();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut env = cluster_secrets(dir.path());
    env.extend([
        ("CORKBOARD_DATA_DIR".to_owned(), data.display().to_string()),
        (
            "CORKBOARD_WEBHOOK_ALLOWED_HOSTS".to_owned(),
            "127.0.0.1".to_owned(),
        ),
    ]);
    let admin = admin_token_with(&env, "platform-admin", None);
    // A control plane without an upstream key file stores the secret as
    // given, as every server did before sealing.
    let mut cmd = corkboard();
    cmd.args(["server", "--listen", "127.0.0.1:0"])
        .envs(env.iter().cloned());
    let server = Running::spawn(cmd);
    let response = http()
        .post(format!("{}/v1/tenants/acme/webhooks", server.url))
        .bearer_auth(&admin)
        .json(&json!({
            "url": receiver.url("/old"),
            "events": ["issue.created"],
            "secret": ACME_SECRET,
        }))
        .send()
        .unwrap();
    assert_eq!(response.status(), 201);
    server.terminate();
    let in_clear = std::fs::read_dir(&data).unwrap().any(|entry| {
        let path = entry.unwrap().path();
        path.is_file()
            && std::fs::read(&path)
                .unwrap()
                .windows(ACME_SECRET.len())
                .any(|w| w == ACME_SECRET.as_bytes())
    });
    assert!(
        in_clear,
        "the precondition: an endpoint whose secret is in clear"
    );
    // `serve` on the same board has (creates) the key and seals new
    // secrets; the old endpoint's deliveries are still signed with its own.
    let mut cmd = corkboard();
    cmd.args(["serve", "--listen", "127.0.0.1:0"])
        .envs(env.iter().cloned());
    let serve = Running::spawn(cmd);
    let response = http()
        .post(format!("{}/v1/tenants/acme/grants", serve.url))
        .bearer_auth(&admin)
        .json(&json!({ "run": "run-old", "capabilities": ["issues:create"] }))
        .send()
        .unwrap();
    assert_eq!(response.status(), 201);
    let issued: Value = response.json().unwrap();
    let (_, created) = mcp_call(
        &format!("{}/mcp", serve.url),
        issued["token"].as_str().unwrap(),
        "create_issue",
        json!({"title": "signed the old way"}),
    );
    assert_eq!(created["result"]["isError"], false, "{created}");
    let got = receiver.wait_for("a delivery to the old endpoint", |all| {
        delivered(all, "/old", "issue.created") == 1
    });
    verify(ACME_SECRET, got.iter().find(|r| r.path == "/old").unwrap());
}

/// A receiver that reads each request and never answers: counts the
/// connections open at once and those the sender gave up on (closed).
struct Stuck {
    port: u16,
    open: Arc<AtomicU32>,
    most_open: Arc<AtomicU32>,
    closed: Arc<AtomicU32>,
}

impl Stuck {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (open, most_open, closed) = (
            Arc::new(AtomicU32::new(0)),
            Arc::new(AtomicU32::new(0)),
            Arc::new(AtomicU32::new(0)),
        );
        let (o, m, c) = (open.clone(), most_open.clone(), closed.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let now_open = o.fetch_add(1, Ordering::SeqCst) + 1;
                m.fetch_max(now_open, Ordering::SeqCst);
                let (o, c) = (o.clone(), c.clone());
                std::thread::spawn(move || {
                    // Read until the sender closes the connection.
                    let mut sink = [0u8; 4096];
                    let mut stream = stream;
                    while matches!(stream.read(&mut sink), Ok(n) if n > 0) {}
                    o.fetch_sub(1, Ordering::SeqCst);
                    c.fetch_add(1, Ordering::SeqCst);
                });
            }
        });
        Stuck {
            port,
            open,
            most_open,
            closed,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/stuck", self.port)
    }
}

/// Issue 28 item 7: acme's endpoint never answers and has a backlog of 40
/// deliveries; globex's one delivery, queued after all of them, arrives
/// while acme's attempts are still stuck (none has reached its deadline),
/// and acme's endpoint never has more than its two in flight.
#[test]
fn a_receiver_that_never_answers_delays_only_its_own_deliveries() {
    let stuck = Stuck::start();
    let receiver = Receiver::start();
    let serve = Serve::start_with_env(&[
        ("CORKBOARD_WEBHOOK_ALLOWED_HOSTS", "127.0.0.1"),
        // Long enough that no stuck attempt ends while the test runs.
        ("CORKBOARD_WEBHOOK_TIMEOUT_MS", "60000"),
    ]);
    let admin = serve.admin_token("platform-admin", None);
    for (tenant, url) in [("acme", stuck.url()), ("globex", receiver.url("/globex"))] {
        let (status, hook) = call(
            &serve,
            reqwest::Method::POST,
            &format!("/v1/tenants/{tenant}/webhooks"),
            &admin,
            Some(json!({"url": url, "events": ["issue.created"]})),
        );
        assert_eq!(status, 201, "{hook}");
    }
    let acme = serve.grant("acme", "run-a", "issues:create");
    for n in 0..40 {
        let (_, created) = mcp_call(
            &acme.mcp_url,
            &acme.token,
            "create_issue",
            json!({"title": format!("backlog {n}")}),
        );
        assert_eq!(created["result"]["isError"], false, "{created}");
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while stuck.open.load(Ordering::SeqCst) < 2 {
        assert!(Instant::now() < deadline, "acme's deliveries never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let globex = serve.grant("globex", "run-g", "issues:create");
    let (_, created) = mcp_call(
        &globex.mcp_url,
        &globex.token,
        "create_issue",
        json!({"title": "globex's"}),
    );
    assert_eq!(created["result"]["isError"], false, "{created}");
    let queued = Instant::now();
    receiver.wait_for("globex's delivery", |all| {
        delivered(all, "/globex", "issue.created") == 1
    });
    let waited = queued.elapsed();
    assert_eq!(
        stuck.closed.load(Ordering::SeqCst),
        0,
        "globex's delivery waited {waited:?}, until acme's stuck attempts gave up"
    );
    assert!(waited < Duration::from_secs(20), "{waited:?}");
    assert!(
        stuck.most_open.load(Ordering::SeqCst) <= 2,
        "acme's endpoint had {} deliveries in flight at once",
        stuck.most_open.load(Ordering::SeqCst)
    );
}
