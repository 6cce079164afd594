//! How a gateway listens and what it tolerates.

use corkboard_grants::limiter::RateLimit;
use corkboard_mcp::SessionKey;
use corkboard_telemetry::conn;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// Where a run's MCP endpoint lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenerMode {
    /// One port per run, bound on `bind` (e.g. `0.0.0.0`, or a bridge
    /// address a container can reach) and handed out as
    /// `http://{advertise}:{port}/mcp` (e.g. `host.docker.internal`).
    Dedicated { bind: IpAddr, advertise: String },
    /// One shared port with a route per run, `{base_url}/runs/{run}/mcp`:
    /// what a Kubernetes Service in front of several runner pods needs.
    Shared { base_url: String },
}

/// A gateway's configuration. [`GatewayConfig::new`] gives the defaults.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    pub mode: ListenerMode,
    pub rate_limit: RateLimit,
    pub max_body_bytes: usize,
    /// Longest time a request body may take to arrive (408 after).
    pub body_timeout: Duration,
    /// Batch bounds of the runs' MCP endpoints (see `McpSettings`).
    pub max_batch_len: usize,
    pub max_batch_response_bytes: usize,
    /// Bound on every store call and token lookup.
    pub store_timeout: Duration,
    /// Most bytes one tool result may take (see `corkboard_tools::BoardTools::with_result_budget`).
    pub max_result_bytes: usize,
    /// How long a claim lasts without a write or a renewal (see
    /// `corkboard_tools::BoardTools::with_claim_lease`).
    pub claim_lease: Duration,
    /// How long a stopping run lets in-flight requests finish.
    pub drain_timeout: Duration,
    /// After the drain deadline, how long cancelled requests get to answer
    /// before the run stops regardless.
    pub cancel_grace: Duration,
    /// Once the runs are drained, how long the shared gateway port's
    /// remaining connections get to finish (whole seconds) at shutdown.
    pub port_shutdown: Duration,
    /// Shared mode: a run's actor stops after this long without requests
    /// (the next request activates it again).
    pub idle_timeout: Duration,
    /// How often each run's grant is checked against the registry, so a
    /// run revoked on another replica stops here too.
    pub revalidate_interval: Duration,
    /// Dedicated mode: threads that accept and serve the per-run ports.
    pub workers: usize,
    /// `Host` names accepted besides loopback and the advertised host.
    pub allowed_hosts: Vec<String>,
    /// Browser origins allowed to call (requests without `Origin` pass).
    pub allowed_origins: Vec<String>,
    /// Signs legacy MCP session ids; share it between replicas.
    pub session_key: SessionKey,
    /// Most runs one tenant may have live (registered and not stopped) on
    /// this runner; each holds a listener or a route for up to 30 days.
    pub live_runs_per_tenant_max: usize,
    /// Most open connections of the shared gateway port (see
    /// `corkboard_telemetry::conn` for what happens past it).
    pub max_connections: usize,
    /// Most open connections of each run's dedicated port.
    pub max_connections_per_run: usize,
    /// Each client's share of those (on the shared port and on each run's
    /// port), and the trusted proxies whose forwarded header names it.
    pub sources: conn::SourceLimits,
    /// Longest time a request's head may take to arrive (408 after).
    pub header_timeout: Duration,
    /// Longest time an idle keep-alive connection stays open.
    pub keep_alive: Duration,
}

impl GatewayConfig {
    pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(5);
    pub const DEFAULT_CANCEL_GRACE: Duration = Duration::from_secs(1);
    pub const DEFAULT_PORT_SHUTDOWN: Duration = Duration::from_secs(5);
    /// The fixed waits a shutdown adds to the configured deadlines, in the
    /// worst case: 2 s for a run's drain report, 2 s for its port to close
    /// (`stop_run`), then 2 s for listeners and connections (`shutdown`).
    pub const SHUTDOWN_SLACK: Duration = Duration::from_secs(6);
    pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(600);
    pub const DEFAULT_REVALIDATE_INTERVAL: Duration = Duration::from_secs(10);
    pub const DEFAULT_LIVE_RUNS_PER_TENANT_MAX: usize = 100;

    pub fn new(mode: ListenerMode, session_key: SessionKey) -> Self {
        let workers = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            .clamp(1, 4);
        Self {
            mode,
            rate_limit: RateLimit {
                per_second: 50,
                burst: 100,
            },
            max_body_bytes: corkboard_mcp::McpSettings::DEFAULT_MAX_BODY_BYTES,
            body_timeout: corkboard_mcp::McpSettings::DEFAULT_BODY_TIMEOUT,
            max_batch_len: corkboard_mcp::McpSettings::DEFAULT_MAX_BATCH_LEN,
            max_batch_response_bytes: corkboard_mcp::McpSettings::DEFAULT_MAX_BATCH_RESPONSE_BYTES,
            store_timeout: corkboard_tools::DEFAULT_STORE_TIMEOUT,
            max_result_bytes: corkboard_tools::DEFAULT_RESULT_BUDGET,
            claim_lease: corkboard_board::queue_limits::CLAIM_LEASE_DEFAULT,
            drain_timeout: Self::DEFAULT_DRAIN_TIMEOUT,
            cancel_grace: Self::DEFAULT_CANCEL_GRACE,
            port_shutdown: Self::DEFAULT_PORT_SHUTDOWN,
            idle_timeout: Self::DEFAULT_IDLE_TIMEOUT,
            revalidate_interval: Self::DEFAULT_REVALIDATE_INTERVAL,
            workers,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            session_key,
            live_runs_per_tenant_max: Self::DEFAULT_LIVE_RUNS_PER_TENANT_MAX,
            max_connections: conn::DEFAULT_MAX_CONNECTIONS,
            max_connections_per_run: conn::DEFAULT_MAX_CONNECTIONS_PER_RUN,
            sources: conn::SourceLimits::default(),
            header_timeout: conn::DEFAULT_HEADER_TIMEOUT,
            keep_alive: conn::DEFAULT_KEEP_ALIVE,
        }
    }

    /// Dedicated ports on `bind`, advertised as `advertise` (or as the bind
    /// address itself; `127.0.0.1` when binding every interface).
    pub fn dedicated(bind: IpAddr, advertise: Option<String>, session_key: SessionKey) -> Self {
        let advertise = advertise.unwrap_or_else(|| {
            if bind.is_unspecified() {
                "127.0.0.1".to_owned()
            } else {
                host_of_ip(bind)
            }
        });
        Self::new(ListenerMode::Dedicated { bind, advertise }, session_key)
    }

    /// Routes on the shared port bound at `listen`, handed out under
    /// `public_url`, or without one under the advertised host (a sandbox
    /// cannot use `0.0.0.0`; `127.0.0.1` when binding every interface) on
    /// the bound port.
    pub fn shared(
        listen: SocketAddr,
        advertise: Option<String>,
        public_url: Option<String>,
        session_key: SessionKey,
    ) -> Self {
        let base_url = public_url.unwrap_or_else(|| {
            let host = match advertise {
                Some(host) => host,
                None if listen.ip().is_unspecified() => "127.0.0.1".to_owned(),
                None => host_of_ip(listen.ip()),
            };
            format!("http://{host}:{}", listen.port())
        });
        Self::new(ListenerMode::Shared { base_url }, session_key)
    }

    /// Host names the MCP endpoint must accept in `Host`: the configured
    /// ones plus whatever the handed-out URLs name.
    pub(crate) fn endpoint_hosts(&self) -> Vec<String> {
        let mut hosts = self.allowed_hosts.clone();
        match &self.mode {
            ListenerMode::Dedicated { bind, advertise } => {
                hosts.push(advertise.clone());
                if !bind.is_unspecified() {
                    hosts.push(host_of_ip(*bind));
                }
            }
            ListenerMode::Shared { base_url } => {
                if let Some(host) = crate::registration::url_host(base_url) {
                    hosts.push(host.to_owned());
                }
            }
        }
        hosts
    }
}

/// An IP as it appears in a URL host (`[::1]` for IPv6).
pub(crate) fn host_of_ip(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("[{v6}]"),
    }
}
