//! Black-box: the one egress policy of `corkboard serve` in front of
//! upstream MCP servers and webhook deliveries. Every spelling of an
//! internal address is refused with its rule named (at registration for a
//! literal address, at connect time for a name), nothing reaches a
//! loopback listener the operator did not open, and a loopback upstream
//! and receiver the operator allow-listed still work. A sealed upstream
//! credential is bound to its URL: rewriting the stored URL never sends it
//! to the new address.

use crate::support;

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::upstreams::start_everything;
use support::*;

/// A loopback HTTP listener counting the requests that reach it and
/// keeping their heads (each answered 200 with an empty JSON body).
struct Listener {
    port: u16,
    hits: Arc<AtomicUsize>,
    heads: Arc<Mutex<Vec<String>>>,
}

impl Listener {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let hits = Arc::new(AtomicUsize::new(0));
        let heads = Arc::new(Mutex::new(Vec::new()));
        let (counted, kept) = (hits.clone(), heads.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                counted.fetch_add(1, Ordering::SeqCst);
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut len = 0usize;
                let mut head = String::new();
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    head.push_str(&line);
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0; len];
                let _ = reader.read_exact(&mut body);
                kept.lock().unwrap().push(head);
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}"
                );
            }
        });
        Listener { port, hits, heads }
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }

    /// Whether any request that arrived carried `text` in its head.
    fn saw(&self, text: &str) -> bool {
        self.heads.lock().unwrap().iter().any(|h| h.contains(text))
    }
}

fn api(serve: &Serve, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
    let admin = serve.admin_token("platform-admin", None);
    let mut request = http()
        .request(method, format!("{}{path}", serve.url()))
        .bearer_auth(admin);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().unwrap();
    let status = response.status().as_u16();
    (status, response.json().unwrap_or(Value::Null))
}

/// Names this machine resolves to a loopback address that are not
/// loopback by definition (`localhost`): `/etc/hosts` entries such as the
/// host name. They pass registration and are refused when resolved.
fn loopback_names() -> Vec<String> {
    let hosts = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
    hosts
        .lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .filter_map(|l| {
            let mut fields = l.split_whitespace();
            let ip: std::net::IpAddr = fields.next()?.parse().ok()?;
            ip.is_loopback()
                .then(|| fields.map(str::to_owned).collect::<Vec<_>>())
        })
        .flatten()
        .filter(|n| n != "localhost" && !n.ends_with(".localhost") && !n.contains(':'))
        .collect()
}

/// Starts a run of `acme` with every tool of upstream `name`.
fn run_with_upstream(serve: &Serve, run: &str, name: &str) -> (String, String) {
    let (status, run) = api(
        serve,
        reqwest::Method::POST,
        "/v1/runs",
        Some(json!({
            "tenant": "acme",
            "run": run,
            "capabilities": ["issues:read", format!("upstream:{name}:*")],
        })),
    );
    assert_eq!(status, 201, "{run}");
    (
        run["mcp_url"].as_str().unwrap().to_owned(),
        run["token"].as_str().unwrap().to_owned(),
    )
}

#[test]
fn upstreams_at_internal_addresses_are_refused_naming_the_rule() {
    let target = Listener::start();
    let port = target.port;
    let serve = Serve::start();
    for (url, rule) in [
        (
            format!("http://127.0.0.1:{port}/mcp"),
            "127.0.0.1 is loopback",
        ),
        (
            format!("http://2130706433:{port}/mcp"),
            "127.0.0.1 is loopback",
        ),
        (
            format!("http://0x7f000001:{port}/mcp"),
            "127.0.0.1 is loopback",
        ),
        (format!("http://127.1:{port}/mcp"), "127.0.0.1 is loopback"),
        (format!("http://[::1]:{port}/mcp"), "::1 is loopback"),
        (
            format!("http://localhost:{port}/mcp"),
            "localhost is loopback",
        ),
        (
            "http://169.254.169.254/latest".to_owned(),
            "169.254.169.254 is a cloud metadata address",
        ),
        (
            "http://10.1.2.3/mcp".to_owned(),
            "10.1.2.3 is a private address",
        ),
        ("http://100.64.0.7/mcp".to_owned(), "carrier-grade NAT"),
    ] {
        let (status, body) = api(
            &serve,
            reqwest::Method::PUT,
            "/v1/tenants/acme/upstreams/inside",
            Some(
                json!({ "url": url, "header": "X-Key", "credential": "secret-value", "trust_first_listing": true }),
            ),
        );
        assert_eq!(status, 422, "{url}: {body}");
        let text = body.to_string();
        assert!(text.contains("egress refused"), "{url}: {text}");
        assert!(text.contains(rule), "{url}: {text}");
        assert!(text.contains("egress_allow"), "{url}: {text}");
    }
    // A name is judged where it is resolved: registered, then refused at
    // connect time, with the rule in the agent's view of the upstream.
    let names = loopback_names();
    if let Some(name) = names.first() {
        let (status, body) = api(
            &serve,
            reqwest::Method::PUT,
            "/v1/tenants/acme/upstreams/named",
            Some(json!({
                "url": format!("http://{name}:{port}/mcp"),
                "header": "X-Key",
                "credential": "secret-value",
                "trust_first_listing": true,
            })),
        );
        assert_eq!(status, 200, "{body}");
        let (url, token) = run_with_upstream(&serve, "egress-named", "named");
        let (status, listed) = mcp_list(&url, &token);
        assert_eq!(status, 200, "{listed}");
        let text = listed.to_string();
        assert!(text.contains("named__unavailable"), "{text}");
        assert!(
            text.contains(&format!("egress refused: {name} resolves to 127.")),
            "{text}"
        );
        assert!(text.contains("which is loopback"), "{text}");
    } else {
        eprintln!(
            "no /etc/hosts name resolves to loopback here: the connect-time case is covered by the egress crate's resolver tests"
        );
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(target.hits(), 0, "nothing reached the loopback listener");
}

#[test]
fn an_allow_listed_loopback_upstream_still_works() {
    let everything = start_everything();
    let port = everything.port;
    let serve = Serve::start_with_env(&[("CORKBOARD_EGRESS_ALLOW", "127.0.0.0/8")]);
    let (status, body) = api(
        &serve,
        reqwest::Method::PUT,
        "/v1/tenants/acme/upstreams/everything",
        Some(json!({
            "url": format!("http://127.0.0.1:{port}/mcp"),
            "header": "Authorization",
            "credential": "Bearer anything",
            "trust_first_listing": true,
        })),
    );
    assert_eq!(status, 200, "{body}");
    let (url, token) = run_with_upstream(&serve, "egress-open", "everything");
    let (status, answer) = mcp_call(
        &url,
        &token,
        "everything__echo",
        json!({ "message": "through the allow-list" }),
    );
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    assert!(
        answer.to_string().contains("through the allow-list"),
        "{answer}"
    );
}

/// Creates an issue of `acme` (an `issue.created` event for every
/// endpoint subscribed to it).
fn create_issue(serve: &Serve, run: &str) {
    let grant = serve.grant("acme", run, "issues:create");
    let (_, created) = mcp_call(
        &grant.mcp_url,
        &grant.token,
        "create_issue",
        json!({ "title": "an event" }),
    );
    assert_eq!(created["result"]["isError"], false, "{created}");
}

fn webhooks(serve: &Serve) -> Vec<Value> {
    let (status, listed) = api(
        serve,
        reqwest::Method::GET,
        "/v1/tenants/acme/webhooks",
        None,
    );
    assert_eq!(status, 200, "{listed}");
    listed["webhooks"].as_array().cloned().unwrap_or_default()
}

#[test]
fn webhooks_to_any_spelling_of_loopback_are_refused_and_nothing_is_delivered() {
    let receiver = Listener::start();
    let port = receiver.port;
    let serve = Serve::start();
    for (url, host) in [
        (format!("http://127.0.0.1:{port}/"), "127.0.0.1"),
        (format!("http://2130706433:{port}/"), "127.0.0.1"),
        (format!("http://0x7f000001:{port}/"), "127.0.0.1"),
        (format!("http://0177.0.0.1:{port}/"), "127.0.0.1"),
        (format!("http://127.1:{port}/"), "127.0.0.1"),
        (format!("http://0:{port}/"), "0.0.0.0"),
        (format!("http://[::127.0.0.1]:{port}/"), "::7f00:1"),
        (
            format!("http://[::ffff:127.0.0.1]:{port}/"),
            "::ffff:127.0.0.1",
        ),
        (
            format!("http://127.0.0.1:{port}\\.example.com/"),
            "127.0.0.1",
        ),
        (format!("http://localhost:{port}/"), "localhost"),
    ] {
        let (status, body) = api(
            &serve,
            reqwest::Method::POST,
            "/v1/tenants/acme/webhooks",
            Some(json!({ "url": url, "events": ["issue.created"] })),
        );
        assert_eq!(status, 422, "{url}: {body}");
        let text = body.to_string();
        assert!(
            text.contains(&format!("egress refused: {host} is ")),
            "{url}: {text}"
        );
    }
    // Names from /etc/hosts pass registration and are refused when the
    // delivery resolves them.
    let names = loopback_names();
    for name in names.iter().take(2) {
        let (status, body) = api(
            &serve,
            reqwest::Method::POST,
            "/v1/tenants/acme/webhooks",
            Some(json!({ "url": format!("http://{name}:{port}/"), "events": ["issue.created"] })),
        );
        assert_eq!(status, 201, "{name}: {body}");
    }
    create_issue(&serve, "egress-events");
    if !names.is_empty() {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let hooks = webhooks(&serve);
            let errors: Vec<String> = hooks
                .iter()
                .filter_map(|h| h["status"]["last_error"].as_str().map(str::to_owned))
                .collect();
            if errors.len() == hooks.len() && !errors.is_empty() {
                for error in &errors {
                    assert!(error.contains("egress refused"), "{error}");
                    assert!(error.contains("which is loopback"), "{error}");
                }
                break;
            }
            assert!(Instant::now() < deadline, "no attempt recorded: {hooks:#?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    } else {
        std::thread::sleep(Duration::from_secs(2));
    }
    assert_eq!(receiver.hits(), 0, "nothing was delivered to loopback");
}

#[test]
fn a_subdomain_allow_list_does_not_match_a_backslash_spelling_of_loopback() {
    let receiver = Listener::start();
    let port = receiver.port;
    let serve = Serve::start_with_env(&[("CORKBOARD_WEBHOOK_ALLOWED_HOSTS", "*.example.com")]);
    for url in [
        format!("http://127.0.0.1:{port}\\.example.com/"),
        format!("http://127.0.0.1\\.example.com:{port}/"),
        format!("http://127.1:{port}\\.example.com/"),
    ] {
        let (status, body) = api(
            &serve,
            reqwest::Method::POST,
            "/v1/tenants/acme/webhooks",
            Some(json!({ "url": url, "events": ["issue.created"] })),
        );
        assert_eq!(status, 422, "{url}: {body}");
        assert!(
            body.to_string()
                .contains("host 127.0.0.1 is not in webhook_allowed_hosts"),
            "{url}: {body}"
        );
    }
    create_issue(&serve, "egress-suffix");
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(receiver.hits(), 0);
}

#[test]
fn an_allow_listed_loopback_receiver_still_gets_its_deliveries() {
    let receiver = Listener::start();
    let serve = Serve::start_with_env(&[("CORKBOARD_EGRESS_ALLOW", "127.0.0.1")]);
    // By address, and by a name resolving to it (the policy keeps
    // 127.0.0.1 among the name's addresses and drops the refused ones).
    for url in [
        format!("http://127.0.0.1:{}/by-address", receiver.port),
        format!("http://2130706433:{}/by-decimal", receiver.port),
        format!("http://localhost:{}/by-name", receiver.port),
    ] {
        let (status, body) = api(
            &serve,
            reqwest::Method::POST,
            "/v1/tenants/acme/webhooks",
            Some(json!({ "url": url, "events": ["issue.created"] })),
        );
        assert_eq!(status, 201, "{url}: {body}");
    }
    create_issue(&serve, "egress-open-hooks");
    let deadline = Instant::now() + Duration::from_secs(30);
    while receiver.hits() < 3 {
        assert!(
            Instant::now() < deadline,
            "deliveries did not arrive: {:#?}",
            webhooks(&serve)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_rewritten_upstream_url_never_gets_the_credential() {
    const CREDENTIAL: &str = "credential-bound-to-its-url-5e1f";
    let (first, second) = (Listener::start(), Listener::start());
    let serve = Serve::start_with_env(&[("CORKBOARD_EGRESS_ALLOW", "127.0.0.1")]);
    let (status, body) = api(
        &serve,
        reqwest::Method::PUT,
        "/v1/tenants/acme/upstreams/bound",
        Some(json!({
            "url": format!("http://127.0.0.1:{}/mcp", first.port),
            "header": "X-Key",
            "credential": CREDENTIAL,
            "trust_first_listing": true,
        })),
    );
    assert_eq!(status, 200, "{body}");
    let (url, token) = run_with_upstream(&serve, "egress-bound", "bound");
    let (status, listed) = mcp_list(&url, &token);
    assert_eq!(status, 200, "{listed}");
    assert!(
        first.saw(&format!("x-key: {CREDENTIAL}")),
        "the precondition: the registered URL gets the credential"
    );
    // Only the stored URL is rewritten, as someone with write access to
    // the store (not the API) could.
    let board = rusqlite::Connection::open(serve.data_dir.path().join("board.sqlite3")).unwrap();
    board.busy_timeout(Duration::from_secs(10)).unwrap();
    let changed = board
        .execute(
            "UPDATE upstreams SET url = ?1 WHERE name = 'bound'",
            [format!("http://127.0.0.1:{}/mcp", second.port)],
        )
        .unwrap();
    assert_eq!(changed, 1);
    drop(board);
    // Registrations are re-read within 5 s; the credential does not open
    // for the new URL, so the upstream is unavailable and says why.
    let deadline = Instant::now() + Duration::from_secs(30);
    for attempt in 0.. {
        let (url, token) = run_with_upstream(&serve, &format!("egress-moved-{attempt}"), "bound");
        let (status, listed) = mcp_list(&url, &token);
        assert_eq!(status, 200, "{listed}");
        let text = listed.to_string();
        if text.contains("must be given again") {
            assert!(text.contains("bound__unavailable"), "{text}");
            break;
        }
        assert!(Instant::now() < deadline, "still usable: {text}");
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(second.hits(), 0, "nothing reached the rewritten URL");
}
