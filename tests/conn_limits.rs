//! Black-box: no single client takes a listener's connection cap (issue 28
//! item 4). One unauthenticated client held all 1,024 connections of the
//! main listener with slow connections, and every tenant's admin API, web
//! board and studio `/mcp` answered 503. Now each client address has its
//! share (`max_connections_per_source`) on every listener (the server's,
//! each run's dedicated port, the shared gateway port), unauthenticated
//! connections are shed for new ones near the cap, and behind a trusted
//! proxy the client its forwarded header names is counted per request.
//!
//! On loopback every client is 127.0.0.1; Linux routes all of 127/8 to
//! `lo`, so a client socket bound to 127.0.0.2, 127.0.0.3, ... before it
//! connects is another source.

use crate::support::*;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

const CAP: usize = 32;
const SHARE: usize = 8;

/// Settings every test starts from: a small cap and share, and deadlines
/// long enough that slow connections outlive the test.
const LIMITS: &[(&str, &str)] = &[
    ("CORKBOARD_MAX_CONNECTIONS", "32"),
    ("CORKBOARD_MAX_CONNECTIONS_PER_RUN", "32"),
    ("CORKBOARD_MAX_CONNECTIONS_PER_SOURCE", "8"),
    ("CORKBOARD_HEADER_TIMEOUT_MS", "60000"),
    ("CORKBOARD_KEEP_ALIVE_MS", "60000"),
    ("CORKBOARD_BODY_TIMEOUT_MS", "60000"),
];

/// 127.0.0.`n`: the `n`th loopback source.
fn source(n: u8) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, 0, n)
}

/// `host:port` of a URL.
fn authority(url: &str) -> String {
    url.trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_owned()
}

fn path_of(url: &str) -> String {
    let rest = url.trim_start_matches("http://");
    rest[rest.find('/').unwrap_or(rest.len())..].to_owned()
}

/// An answer read off a raw connection.
#[derive(Debug)]
struct Answer {
    status: u16,
    /// Lower-cased.
    head: String,
    body: String,
}

/// A raw HTTP/1.1 keep-alive connection from a chosen source address.
struct Client {
    reader: BufReader<TcpStream>,
    host: String,
}

impl Client {
    fn open(from: Ipv4Addr, authority: &str) -> Client {
        use socket2::{Domain, Socket, Type};
        let to: SocketAddr = authority.parse().expect("an IP:port authority");
        let socket = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        socket
            .bind(&SocketAddr::from((from, 0)).into())
            .unwrap_or_else(|e| panic!("bind {from}: {e}"));
        socket.connect(&to.into()).unwrap();
        let stream: TcpStream = socket.into();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        Client {
            reader: BufReader::new(stream),
            host: authority.to_owned(),
        }
    }

    fn write(&mut self, bytes: &str) -> bool {
        self.reader.get_mut().write_all(bytes.as_bytes()).is_ok()
    }

    /// `GET path` with `headers`; `None` when the server closed without an
    /// answer.
    fn get(&mut self, path: &str, headers: &[(&str, &str)]) -> Option<Answer> {
        let mut request = format!("GET {path} HTTP/1.1\r\nHost: {}\r\n", self.host);
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str("\r\n");
        if !self.write(&request) {
            return None;
        }
        self.answer()
    }

    /// A stateless MCP `tools/list` at `path` with the run token `token`.
    fn tools_list(&mut self, path: &str, token: &str) -> Option<Answer> {
        let body = mcp::modern_tools_list(1).to_string();
        let mut request = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
            self.host,
            body.len()
        );
        for (name, value) in mcp::modern_headers("tools/list", None) {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str("\r\n");
        request.push_str(&body);
        if !self.write(&request) {
            return None;
        }
        self.answer()
    }

    /// Starts a request head and never finishes it: a slow client.
    fn dribble(&mut self, path: &str) {
        let head = format!("GET {path} HTTP/1.1\r\nHost: {}\r\nX-Slow: a", self.host);
        assert!(self.write(&head), "the slow head could not be sent");
    }

    fn answer(&mut self) -> Option<Answer> {
        let mut head = String::new();
        loop {
            let mut line = String::new();
            if self.reader.read_line(&mut line).ok()? == 0 {
                return None;
            }
            if line == "\r\n" {
                if head.starts_with("http/1.1 100") {
                    head.clear();
                    continue;
                }
                break;
            }
            head.push_str(&line.to_ascii_lowercase());
        }
        let status = head.split(' ').nth(1)?.parse().ok()?;
        let length = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse::<usize>().ok());
        let body = match length {
            Some(length) => {
                let mut body = vec![0; length];
                self.reader.read_exact(&mut body).ok()?;
                body
            }
            None if head.contains("transfer-encoding: chunked") => self.chunked()?,
            None => Vec::new(),
        };
        Some(Answer {
            status,
            head,
            body: String::from_utf8_lossy(&body).into_owned(),
        })
    }

    fn chunked(&mut self) -> Option<Vec<u8>> {
        let mut body = Vec::new();
        loop {
            let mut size = String::new();
            self.reader.read_line(&mut size).ok()?;
            let size = usize::from_str_radix(size.trim(), 16).ok()?;
            let mut chunk = vec![0; size + 2];
            self.reader.read_exact(&mut chunk).ok()?;
            if size == 0 {
                return Some(body);
            }
            body.extend_from_slice(&chunk[..size]);
        }
    }

    /// Whether the server closed this connection (waiting up to `within`).
    fn closed_within(&mut self, within: Duration) -> bool {
        let stream = self.reader.get_mut();
        stream
            .set_read_timeout(Some(Duration::from_millis(10)))
            .unwrap();
        let deadline = Instant::now() + within;
        let closed = loop {
            let mut buf = [0u8; 512];
            match stream.read(&mut buf) {
                Ok(0) => break true,
                Ok(_) => {}
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock
                        || e.kind() == std::io::ErrorKind::TimedOut =>
                {
                    if Instant::now() >= deadline {
                        break false;
                    }
                }
                Err(_) => break true,
            }
        };
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        closed
    }
}

/// How many of `clients` the server closed, waiting up to `within` for at
/// least `expected`.
fn closed_of(clients: &mut [Client], expected: usize, within: Duration) -> usize {
    let deadline = Instant::now() + within;
    let mut closed = vec![false; clients.len()];
    loop {
        for (client, closed) in clients.iter_mut().zip(closed.iter_mut()) {
            if !*closed {
                *closed = client.closed_within(Duration::from_millis(1));
            }
        }
        let count = closed.iter().filter(|c| **c).count();
        if count >= expected || Instant::now() >= deadline {
            return count;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A counter or gauge of `serve`'s `/metrics` (0 when absent).
fn metric(serve: &Serve, series: &str) -> u64 {
    let text = http()
        .get(format!("{}/metrics", serve.url()))
        .header("Connection", "close")
        .send()
        .expect("GET /metrics")
        .text()
        .unwrap_or_default();
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse::<f64>().ok())
        .map_or(0, |value| value as u64)
}

fn refused_for_source(serve: &Serve, listener: &str) -> u64 {
    metric(
        serve,
        &format!(
            "corkboard_http_connections_refused_total{{listener=\"{listener}\",reason=\"source\"}}"
        ),
    )
}

/// A run registered on `serve`'s register API: its MCP URL and token.
fn register_run(serve: &Serve, admin: &str, run: &str) -> (String, String) {
    let response = http()
        .post(format!("{}/v1/runs", serve.url()))
        .bearer_auth(admin)
        .json(&json!({"tenant": "acme", "run": run, "capabilities": ["issues:read"]}))
        .send()
        .expect("POST /v1/runs");
    assert_eq!(response.status().as_u16(), 201);
    let body: Value = response.json().unwrap();
    (
        body["mcp_url"].as_str().unwrap().to_owned(),
        body["token"].as_str().unwrap().to_owned(),
    )
}

/// One source takes its share of the listener at `authority` with slow
/// connections; its next connection is answered 503 and closed, while
/// another source is still served and the share's connections stay open.
/// `path` is a request the listener answers (any status but 503).
fn one_source_gets_its_share_and_no_more(
    serve: &Serve,
    authority: &str,
    path: &str,
    listener: &str,
) {
    let greedy = source(2);
    let mut held: Vec<Client> = (0..SHARE)
        .map(|_| {
            let mut client = Client::open(greedy, authority);
            // Served, so accepted and counted; then slow for ever.
            let answer = client.get(path, &[]).expect("served");
            assert_ne!(answer.status, 503, "within the share: {answer:?}");
            client.dribble(path);
            client
        })
        .collect();
    let mut over = Client::open(greedy, authority);
    let answer = over.get(path, &[]).expect("an answer, not a silent close");
    assert_eq!(answer.status, 503, "{listener}: over the share: {answer:?}");
    assert!(answer.head.contains("connection: close"), "{answer:?}");
    assert!(answer.head.contains("retry-after:"), "{answer:?}");
    assert!(
        answer.body.contains("max_connections_per_source"),
        "{}",
        answer.body
    );
    assert!(
        over.closed_within(Duration::from_secs(5)),
        "closed after its 503"
    );
    // Another source is served meanwhile, far below the cap.
    let mut other = Client::open(source(3), authority);
    let answer = other.get(path, &[]).expect("served");
    assert_ne!(answer.status, 503, "{listener}: another source: {answer:?}");
    assert!(
        !held[0].closed_within(Duration::from_millis(100)),
        "the share's connections stay open"
    );
    assert!(
        refused_for_source(serve, listener) >= 1,
        "{listener}: refusal not counted"
    );
}

#[test]
fn one_source_gets_its_share_of_the_server_listener_and_no_more() {
    let serve = Serve::start_with_env(LIMITS);
    let url = serve.url().to_owned();
    one_source_gets_its_share_and_no_more(&serve, &authority(&url), "/healthz", "server");
}

#[test]
fn one_source_gets_its_share_of_a_runs_dedicated_port_and_no_more() {
    let serve = Serve::start_with_env(LIMITS);
    let admin = serve.admin_token("platform-admin", None);
    let (mcp_url, _) = register_run(&serve, &admin, "dedicated");
    one_source_gets_its_share_and_no_more(
        &serve,
        &authority(&mcp_url),
        &path_of(&mcp_url),
        "gateway_run",
    );
}

fn with_shared_gateway() -> Vec<(&'static str, &'static str)> {
    let mut env = LIMITS.to_vec();
    env.extend([
        ("CORKBOARD_GATEWAY_MODE", "shared"),
        ("CORKBOARD_GATEWAY_LISTEN", "127.0.0.1:0"),
    ]);
    env
}

#[test]
fn one_source_gets_its_share_of_the_shared_gateway_port_and_no_more() {
    let serve = Serve::start_with_env(&with_shared_gateway());
    let admin = serve.admin_token("platform-admin", None);
    let (mcp_url, _) = register_run(&serve, &admin, "shared");
    assert!(mcp_url.ends_with("/runs/shared/mcp"), "{mcp_url}");
    assert_ne!(authority(&mcp_url), authority(serve.url()));
    one_source_gets_its_share_and_no_more(
        &serve,
        &authority(&mcp_url),
        &path_of(&mcp_url),
        "gateway_shared",
    );
}

/// Slow unauthenticated connections from eight sources, each within its
/// share but twice the cap together, against clients that authenticated
/// (`authenticate` makes one request that does and returns its status):
/// the authenticated connections keep working, a new one is served, and
/// the unauthenticated ones were shed to make room.
fn unauthenticated_connections_are_shed_for_authenticated_ones(
    serve: &Serve,
    authority: &str,
    path: &str,
    listener: &str,
    authenticate: &dyn Fn(&mut Client) -> u16,
) {
    let mut first = Client::open(source(1), authority);
    assert_eq!(authenticate(&mut first), 200);
    let mut slow = Vec::new();
    for n in 2..10 {
        for _ in 0..SHARE {
            let mut client = Client::open(source(n), authority);
            client.dribble(path);
            slow.push(client);
        }
    }
    assert_eq!(slow.len(), 2 * CAP);
    assert_eq!(authenticate(&mut first), 200, "{listener}: never shed");
    // At most the cap is held: the rest were closed. Waited for before a
    // new client comes: a shed connection is closed by its own task, and
    // until it is, a run's accept loop still counts its socket toward
    // twice the cap (past which it closes new connections at once).
    let closed = closed_of(&mut slow, CAP, Duration::from_secs(10));
    assert!(
        closed >= 2 * CAP - CAP,
        "{listener}: only {closed} of {} slow connections were closed",
        slow.len()
    );
    // Before the shedding, the cap was full: a new connection got 503.
    let mut second = Client::open(source(1), authority);
    assert_eq!(authenticate(&mut second), 200, "{listener}: a new client");
    assert_eq!(authenticate(&mut second), 200);
    let shed = metric(
        serve,
        &format!("corkboard_http_connections_shed_total{{listener=\"{listener}\"}}"),
    );
    assert!(shed >= 1, "{listener}: shedding not counted");
    assert_eq!(authenticate(&mut first), 200);
}

#[test]
fn unauthenticated_connections_are_shed_first_on_the_server_listener() {
    let serve = Serve::start_with_env(LIMITS);
    let admin = serve.admin_token("platform-admin", None);
    let granted = serve.grant("acme", "studio", "issues:read");
    let url = serve.url().to_owned();
    // The admin API (admin JWT), and the studio endpoint (run token).
    let bearer = format!("Bearer {admin}");
    unauthenticated_connections_are_shed_for_authenticated_ones(
        &serve,
        &authority(&url),
        "/healthz",
        "server",
        &|client| {
            client
                .get("/v1/me", &[("Authorization", &bearer)])
                .map_or(0, |a| a.status)
        },
    );
    let studio = path_of(&granted.mcp_url);
    let mut agent = Client::open(source(1), &authority(&url));
    assert_eq!(
        agent.tools_list(&studio, &granted.token).map(|a| a.status),
        Some(200)
    );
    // Fill again: the agent's connection is not shed either.
    let mut slow = Vec::new();
    for n in 10..18 {
        for _ in 0..SHARE {
            let mut client = Client::open(source(n), &authority(&url));
            client.dribble("/healthz");
            slow.push(client);
        }
    }
    let mut late = Client::open(source(1), &authority(&url));
    assert_eq!(
        late.tools_list(&studio, &granted.token).map(|a| a.status),
        Some(200)
    );
    assert_eq!(
        agent.tools_list(&studio, &granted.token).map(|a| a.status),
        Some(200),
        "an agent's authenticated connection is never shed"
    );
}

#[test]
fn unauthenticated_connections_are_shed_first_on_a_runs_dedicated_port() {
    let serve = Serve::start_with_env(LIMITS);
    let admin = serve.admin_token("platform-admin", None);
    let (mcp_url, token) = register_run(&serve, &admin, "dedicated");
    let path = path_of(&mcp_url);
    unauthenticated_connections_are_shed_for_authenticated_ones(
        &serve,
        &authority(&mcp_url),
        &path,
        "gateway_run",
        &|client| client.tools_list(&path, &token).map_or(0, |a| a.status),
    );
}

#[test]
fn unauthenticated_connections_are_shed_first_on_the_shared_gateway_port() {
    let serve = Serve::start_with_env(&with_shared_gateway());
    let admin = serve.admin_token("platform-admin", None);
    let (mcp_url, token) = register_run(&serve, &admin, "shared");
    let path = path_of(&mcp_url);
    unauthenticated_connections_are_shed_for_authenticated_ones(
        &serve,
        &authority(&mcp_url),
        &path,
        "gateway_shared",
        &|client| client.tools_list(&path, &token).map_or(0, |a| a.status),
    );
}

/// Starts a POST of `path` through the proxy for the client `forwarded`
/// (an `X-Forwarded-For` value) whose body never comes, and returns once
/// the server has it in flight (its `100 Continue`: sent as the request
/// reaches the app).
fn stalled_through_proxy(authority: &str, path: &str, token: &str, forwarded: &str) -> Client {
    let mut client = Client::open(source(2), authority);
    let body = mcp::modern_tools_list(1).to_string();
    let mut request = format!(
        "POST {path} HTTP/1.1\r\nHost: {authority}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nExpect: 100-continue\r\nX-Forwarded-For: {forwarded}\r\n",
        body.len()
    );
    for (name, value) in mcp::modern_headers("tools/list", None) {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    assert!(client.write(&request));
    let mut line = String::new();
    client.reader.read_line(&mut line).unwrap();
    assert!(line.starts_with("HTTP/1.1 100"), "not in flight: {line:?}");
    client.reader.read_line(&mut line).unwrap();
    assert!(client.write("{\"jsonrpc\""));
    client
}

/// Behind a trusted proxy every connection comes from the proxy: its
/// clients are told apart by the forwarded header (the right-most hop not
/// a trusted proxy, whatever the client wrote to its left) and each gets
/// its share of requests in flight, without the proxy's connections being
/// closed. Another peer's forwarded header is ignored: it is counted by
/// its own address.
#[test]
fn a_trusted_proxys_clients_are_counted_by_their_forwarded_address() {
    let mut env = LIMITS.to_vec();
    env.extend([
        ("CORKBOARD_MAX_CONNECTIONS_PER_SOURCE", "2"),
        ("CORKBOARD_TRUSTED_PROXIES", "127.0.0.2, 10.0.0.0/8"),
    ]);
    let serve = Serve::start_with_env(&env);
    let granted = serve.grant("acme", "proxied", "issues:read");
    let url = serve.url().to_owned();
    let authority = authority(&url);
    let studio = path_of(&granted.mcp_url);
    // The client 203.0.113.7 has two requests in flight through the
    // proxy, under left-most hops it wrote itself.
    let _first = stalled_through_proxy(
        &authority,
        &studio,
        &granted.token,
        "198.51.100.1, 203.0.113.7",
    );
    let _second = stalled_through_proxy(
        &authority,
        &studio,
        &granted.token,
        "198.51.100.2, 203.0.113.7, 10.1.1.1",
    );
    // The proxy holds more connections than the share: it has none.
    let mut proxy = Client::open(source(2), &authority);
    let answer = proxy
        .get(
            "/healthz",
            &[("X-Forwarded-For", "198.51.100.3, 203.0.113.7")],
        )
        .expect("an answer");
    assert_eq!(answer.status, 503, "a third in flight: {answer:?}");
    assert!(
        answer.body.contains("requests in flight"),
        "{}",
        answer.body
    );
    assert!(
        !answer.head.contains("connection: close"),
        "the proxy's connection carries other clients: {answer:?}"
    );
    // The same connection serves another client at once.
    let answer = proxy
        .get(
            "/healthz",
            &[("X-Forwarded-For", "203.0.113.7, 203.0.113.8")],
        )
        .expect("served on the same connection");
    assert_eq!(answer.status, 200, "{answer:?}");
    // An untrusted peer's header is ignored: its own address has a share
    // of connections, whatever it claims to forward.
    let untrusted = source(3);
    let held: Vec<Client> = ["192.0.2.1", "192.0.2.2"]
        .iter()
        .map(|forwarded| {
            let mut client = Client::open(untrusted, &authority);
            let answer = client
                .get("/healthz", &[("X-Forwarded-For", forwarded)])
                .expect("served");
            assert_eq!(answer.status, 200);
            client
        })
        .collect();
    let mut third = Client::open(untrusted, &authority);
    let answer = third
        .get("/healthz", &[("X-Forwarded-For", "192.0.2.3")])
        .expect("an answer");
    assert_eq!(
        answer.status, 503,
        "an untrusted peer's header counted: {answer:?}"
    );
    assert!(
        answer.body.contains("max_connections_per_source"),
        "{}",
        answer.body
    );
    assert!(refused_for_source(&serve, "server") >= 2);
    drop(held);
}
