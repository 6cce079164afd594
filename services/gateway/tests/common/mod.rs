//! Gateway test harness: gateways on real sockets (dedicated ports, or a
//! real actix-web server for the shared port), a real SQLite board, and a
//! raw MCP client speaking 2026-07-28 over HTTP.

#![allow(dead_code)]

use actix_web::{App, HttpServer};
use anyhow::{Context, Result, anyhow, bail};
use corkboard_board::{
    Capabilities, GrantLedger, Issue, IssueStore, ListQuery, NoopAuditSink, RunId, TenantId,
};
use corkboard_gateway::{
    Binding, Gateway, GatewayConfig, GatewayParts, ListenerMode, LocalRateLimiter, MemoryLedger,
    RateLimiter, Registration,
};
use corkboard_grants::{GrantRequest, GrantService, MemoryRegistry, TokenRegistry};
use corkboard_mcp::SessionKey;
use corkboard_store_contract::{Fault, FaultStore};
use corkboard_store_sqlite::SqliteStore;
use serde_json::{Value, json};
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

pub const MODERN: &str = "2026-07-28";
/// Deadline for anything that should happen promptly (only to avoid hangs).
pub const GENEROUS: Duration = Duration::from_secs(30);

/// Both listener modes, for tests that must pass in each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Dedicated,
    Shared,
}

pub const MODES: [Mode; 2] = [Mode::Dedicated, Mode::Shared];

/// Fails the test instead of hanging it.
pub async fn bounded<T>(what: &str, future: impl Future<Output = T>) -> Result<T> {
    tokio::time::timeout(GENEROUS, future)
        .await
        .map_err(|_| anyhow!("{what} did not finish within {GENEROUS:?}"))
}

/// Polls `condition` until it holds (bounded).
pub async fn eventually(what: &str, mut condition: impl FnMut() -> bool) -> Result<()> {
    let deadline = tokio::time::Instant::now() + GENEROUS;
    while !condition() {
        if tokio::time::Instant::now() > deadline {
            bail!("{what}: still not true after {GENEROUS:?}");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(())
}

pub fn tenant(name: &str) -> TenantId {
    TenantId::parse(name).expect("tenant id")
}

pub fn run_id(name: &str) -> RunId {
    RunId::parse(name).expect("run id")
}

pub fn all_caps() -> Capabilities {
    Capabilities::all()
}

/// A gateway plus what tests inspect behind it.
pub struct Harness {
    pub gateway: Gateway,
    pub grants: GrantService,
    pub registry: Arc<dyn TokenRegistry>,
    pub mode: Mode,
    /// Shared mode: the server's handle.
    pub server: Option<actix_web::dev::ServerHandle>,
}

impl Harness {
    pub async fn register(&self, tenant_name: &str, run: &str) -> Result<Registration> {
        self.register_with(tenant_name, run, Duration::from_secs(3600))
            .await
    }

    pub async fn register_with(
        &self,
        tenant_name: &str,
        run: &str,
        ttl: Duration,
    ) -> Result<Registration> {
        Ok(self
            .gateway
            .register(GrantRequest {
                tenant: tenant(tenant_name),
                run: run_id(run),
                capabilities: all_caps(),
                ttl,
                created_by: "test".into(),
                budgets: Default::default(),
                min_integrity: None,
            })
            .await?)
    }

    pub async fn stop(self) {
        self.gateway.shutdown().await;
        if let Some(server) = self.server {
            server.stop(true).await;
        }
    }
}

/// What a harness is built from.
pub struct Setup {
    pub mode: Mode,
    pub store: Arc<dyn IssueStore>,
    pub configure: Box<dyn FnOnce(&mut GatewayConfig)>,
    pub limiter: Option<Arc<dyn RateLimiter>>,
    pub actor_arbiter: Option<actix::ArbiterHandle>,
    /// Grants and registry shared with other gateways ("pods"); private
    /// in-memory ones by default.
    pub shared_grants: Option<(GrantService, Arc<dyn TokenRegistry>)>,
}

impl Setup {
    pub fn new(mode: Mode, store: Arc<dyn IssueStore>) -> Self {
        Self {
            mode,
            store,
            configure: Box::new(|_| {}),
            limiter: None,
            actor_arbiter: None,
            shared_grants: None,
        }
    }

    pub fn configure(mut self, f: impl FnOnce(&mut GatewayConfig) + 'static) -> Self {
        self.configure = Box::new(f);
        self
    }

    /// Starts the gateway (and, in shared mode, a real HTTP server for it).
    pub fn start(self) -> Result<Harness> {
        let (grants, registry) = self.shared_grants.unwrap_or_else(|| {
            let ledger: Arc<dyn GrantLedger> = Arc::new(MemoryLedger::new());
            let registry: Arc<dyn TokenRegistry> = Arc::new(MemoryRegistry::new());
            (GrantService::new(ledger, registry.clone()), registry)
        });
        let shared_listener = match self.mode {
            Mode::Shared => Some(std::net::TcpListener::bind("127.0.0.1:0")?),
            Mode::Dedicated => None,
        };
        let mode = match &shared_listener {
            Some(listener) => ListenerMode::Shared {
                base_url: format!("http://{}", listener.local_addr()?),
            },
            None => ListenerMode::Dedicated {
                bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
                advertise: "127.0.0.1".into(),
            },
        };
        let mut config = GatewayConfig::new(mode, SessionKey::generate());
        config.workers = 2;
        (self.configure)(&mut config);
        let limiter = self
            .limiter
            .unwrap_or_else(|| Arc::new(LocalRateLimiter::new(config.rate_limit)));
        let binding = Binding::new(
            self.store,
            registry.clone(),
            Arc::new(NoopAuditSink),
            config.store_timeout,
        );
        let gateway = Gateway::start(
            config,
            GatewayParts {
                grants: grants.clone(),
                binding,
                limiter,
                actor_arbiter: self.actor_arbiter,
                session_ends: None,
                metrics: None,
            },
        )?;
        let server = match shared_listener {
            Some(listener) => {
                let routes = gateway.clone();
                let server = HttpServer::new(move || {
                    let routes = routes.clone();
                    App::new().configure(move |cfg| routes.configure_shared(cfg))
                })
                .workers(2)
                .h1_allow_half_closed(false)
                .disable_signals()
                .listen(listener)?
                .run();
                let handle = server.handle();
                actix_rt::spawn(server);
                Some(handle)
            }
            None => None,
        };
        Ok(Harness {
            gateway,
            grants,
            registry,
            mode: self.mode,
            server,
        })
    }
}

pub fn sqlite_store(dir: &std::path::Path) -> Result<Arc<SqliteStore>> {
    Ok(Arc::new(SqliteStore::open_in_dir(dir)?))
}

/// A 2026-07-28 JSON-RPC request body.
pub fn modern(id: Value, method: &str, params: Value) -> Value {
    let mut params = if params.is_object() {
        params
    } else {
        json!({})
    };
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "gateway-test", "version": "0.1"}
    });
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// An HTTP answer: status, `Retry-After`, and the JSON-RPC body.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub retry_after: Option<String>,
    pub json: Value,
}

impl Answer {
    pub fn error_code(&self) -> Option<corkboard_mcp::ErrorCode> {
        self.json["error"]["code"]
            .as_i64()
            .map(corkboard_mcp::ErrorCode)
    }

    pub fn error_message(&self) -> String {
        self.json["error"]["message"]
            .as_str()
            .unwrap_or("")
            .to_owned()
    }

    pub fn tool_error(&self) -> Option<String> {
        (self.json["result"]["isError"] == true).then(|| {
            self.json["result"]["content"][0]["text"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
    }

    pub fn structured(&self) -> &Value {
        &self.json["result"]["structuredContent"]
    }
}

pub fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(GENEROUS)
        .no_proxy()
        .build()
        .expect("http client")
}

/// Sends one 2026-07-28 request.
pub async fn send(
    client: &reqwest::Client,
    url: &str,
    token: &str,
    body: &Value,
) -> Result<Answer> {
    let mut request = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", MODERN)
        .bearer_auth(token)
        .body(body.to_string());
    if let Some(method) = body["method"].as_str() {
        request = request.header("mcp-method", method);
    }
    if let Some(name) = body["params"]["name"].as_str() {
        request = request.header("mcp-name", name);
    }
    let response = request
        .send()
        .await
        .with_context(|| format!("POST {url}"))?;
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let text = response.text().await?;
    let json = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).with_context(|| format!("{status}: {text}"))?
    };
    Ok(Answer {
        status,
        retry_after,
        json,
    })
}

/// `tools/call` of `tool` with `arguments`.
pub async fn call_tool(
    client: &reqwest::Client,
    reg: &Registration,
    id: Value,
    tool: &str,
    arguments: Value,
) -> Result<Answer> {
    let body = modern(
        id,
        "tools/call",
        json!({"name": tool, "arguments": arguments}),
    );
    send(client, &reg.mcp_url, reg.token.expose(), &body).await
}

/// `inner` behind the fault store, its `create_issue` waiting for a
/// permit of the returned semaphore (none yet) before it runs, so tests can
/// hold requests in flight.
pub fn gated(inner: Arc<SqliteStore>) -> (Arc<FaultStore>, Arc<Semaphore>) {
    let gate = Arc::new(Semaphore::new(0));
    let store = FaultStore::new(inner);
    store.inject("create_issue", Fault::gate(&gate));
    (Arc::new(store), gate)
}

/// Every issue of `tenant` in `store`.
pub async fn issues(store: &dyn IssueStore, tenant_name: &str) -> Result<Vec<Issue>> {
    let mut query = ListQuery {
        limit: 100,
        ..ListQuery::default()
    };
    let mut all = Vec::new();
    loop {
        let page = store.list_issues(&tenant(tenant_name), &query).await?;
        all.extend(page.issues);
        match page.next_cursor {
            Some(cursor) => query.cursor = Some(cursor),
            None => return Ok(all),
        }
    }
}

/// `host:port` and path of an `http://` URL.
pub fn host_and_path(url: &str) -> (String, String) {
    let rest = url.trim_start_matches("http://");
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    (host.to_owned(), format!("/{path}"))
}

/// Sends an MCP POST's head (and `body_start` of a body announced as 1,000
/// bytes) over a raw connection, never the rest, and returns the status
/// line of the answer.
pub async fn stalled_post(url: &str, token: Option<&str>, body_start: &str) -> Result<String> {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let (addr, path) = host_and_path(url);
    let mut stream = tokio::net::TcpStream::connect(&addr).await?;
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {MODERN}\r\n\
         {auth}Content-Length: 1000\r\n\r\n{body_start}"
    );
    stream.write_all(head.as_bytes()).await?;
    stream.flush().await?;
    let mut line = String::new();
    bounded(
        "the status line",
        BufReader::new(stream).read_line(&mut line),
    )
    .await??;
    Ok(line)
}

/// A raw keep-alive HTTP/1.1 connection, for tests that count
/// connections.
pub struct RawConn {
    stream: tokio::io::BufReader<tokio::net::TcpStream>,
    host: String,
}

/// One response read off a [`RawConn`].
#[derive(Debug)]
pub struct RawResponse {
    pub status: u16,
    /// Lower-cased header names.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl RawResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

impl RawConn {
    pub async fn open(url: &str) -> Result<Self> {
        let (host, _) = host_and_path(url);
        let stream = tokio::net::TcpStream::connect(&host).await?;
        Ok(Self {
            stream: tokio::io::BufReader::new(stream),
            host,
        })
    }

    /// POSTs an MCP `tools/list` to `path` with `token` and reads the
    /// answer (an error when the server closed the connection instead).
    pub async fn list_tools(&mut self, path: &str, token: &str) -> Result<RawResponse> {
        use tokio::io::AsyncWriteExt;
        let body = modern(json!(1), "tools/list", json!({})).to_string();
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {MODERN}\r\n\
             Mcp-Method: tools/list\r\nAuthorization: Bearer {token}\r\nContent-Length: {}\r\n\r\n{body}",
            self.host,
            body.len()
        );
        self.stream.get_mut().write_all(request.as_bytes()).await?;
        bounded("a response", self.read_response()).await?
    }

    async fn read_response(&mut self) -> Result<RawResponse> {
        use tokio::io::{AsyncBufReadExt, AsyncReadExt};
        let mut line = String::new();
        if self.stream.read_line(&mut line).await? == 0 {
            bail!("the server closed the connection without an answer");
        }
        let status = line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .with_context(|| format!("bad status line {line:?}"))?;
        let mut headers = Vec::new();
        loop {
            let mut line = String::new();
            self.stream.read_line(&mut line).await?;
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
            }
        }
        let length: usize = headers
            .iter()
            .find(|(n, _)| n == "content-length")
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; length];
        self.stream.read_exact(&mut body).await?;
        Ok(RawResponse {
            status,
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        })
    }

    /// Whether the server has closed the connection (reads end-of-stream).
    pub async fn closed_by_server(&mut self) -> Result<bool> {
        use tokio::io::AsyncReadExt;
        let mut byte = [0u8; 1];
        Ok(bounded("end of stream", self.stream.read(&mut byte)).await?? == 0)
    }
}
