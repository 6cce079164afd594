//! Typed configuration: defaults that work locally, then a TOML file, then
//! `CORKBOARD_<KEY>` environment variables, then command-line flags.
//!
//! Unknown keys in the file are refused (a typo must not silently fall back
//! to a default), every error names the key, and secrets never reach logs:
//! they are held as [`Secret`] whose `Debug`/`Serialize` print `<redacted>`.

use crate::error::ConfigError;
use figment::Figment;
use figment::providers::{Format, Serialized, Toml};
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

/// Where issues, grants and audit records live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum StoreKind {
    Sqlite,
    Mongodb,
}

/// Where run tokens are resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RegistryKind {
    /// In-process, reading through the board store's grant ledger.
    Memory,
    /// Shared by every replica.
    Redis,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum JwtAlgorithm {
    HS256,
    RS256,
    EdDSA,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Text on a terminal, JSON otherwise.
    Auto,
    Text,
    Json,
}

/// How per-run gateways listen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum GatewayMode {
    /// One port per run on `gateway_bind`, advertised as `gateway_advertise`.
    Dedicated,
    /// One shared port (`gateway_listen`) with routes `/runs/{run}/mcp`.
    Shared,
}

/// The header a trusted proxy names its client in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ForwardedHeader {
    #[serde(rename = "x-forwarded-for")]
    XForwardedFor,
    /// RFC 7239.
    #[serde(rename = "forwarded")]
    Forwarded,
}

/// A configuration value that must never be printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str("<redacted>")
    }
}

/// A secret is a string in the configuration; the reference says it is
/// one (`writeOnly`), and its default is never a value.
impl JsonSchema for Secret {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Secret".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string", "writeOnly": true })
    }
}

impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Secret)
    }
}

/// Every setting of every role. Field names are the config-file keys; the
/// environment variable is `CORKBOARD_` + the key in upper case.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// HTTP listen address (API, web board, studio MCP, health, metrics).
    pub listen: SocketAddr,
    /// Embedded data: SQLite board, signing secrets. Defaults to one
    /// directory per user ([`default_data_dir`]), whatever the working
    /// directory; made absolute on load, so every command and every printed
    /// path names the same board.
    pub data_dir: PathBuf,
    pub store: StoreKind,
    /// MongoDB connection string (`store = "mongodb"`), credentials included.
    pub mongodb_uri: Option<Secret>,
    /// The MongoDB database holding every tenant's collections.
    pub mongodb_database: String,
    pub registry: RegistryKind,
    /// One URL, or several comma-separated URLs for Redis Cluster nodes.
    pub redis_url: Option<Secret>,
    /// Prefix of every Redis key (several installations may share one Redis).
    pub redis_key_prefix: String,
    /// How admin JWTs are signed: `HS256` with a shared secret, or `RS256`/`EdDSA` with a key pair.
    pub jwt_algorithm: JwtAlgorithm,
    /// HS256 secret; defaults to `<data_dir>/jwt.secret`, created on first start by `serve`.
    pub jwt_secret_file: Option<PathBuf>,
    /// RS256/EdDSA public key (PEM), to verify tokens minted elsewhere.
    pub jwt_public_key_file: Option<PathBuf>,
    /// RS256/EdDSA private key (PEM), only for `corkboard admin token`.
    pub jwt_private_key_file: Option<PathBuf>,
    /// The `iss` admin JWTs must carry.
    pub jwt_issuer: String,
    /// The `aud` admin JWTs must carry.
    pub jwt_audience: String,
    /// HMAC key for MCP session ids; shared by every replica. Defaults to
    /// `<data_dir>/session.key`, created on first start by `serve`.
    pub session_key_file: Option<PathBuf>,
    /// Key upstream MCP servers' credentials are sealed with (at rest, in
    /// the board store); shared by the servers that register upstreams and
    /// the runners that call them. Defaults to `<data_dir>/upstream.key`,
    /// created on first start by `serve`; without it, upstreams are off.
    pub upstream_key_file: Option<PathBuf>,
    /// OTLP/HTTP endpoint traces are exported to (`http://collector:4318`); none: no export.
    pub otlp_endpoint: Option<String>,
    /// Log line format on stderr.
    pub log_format: LogFormat,
    /// Base URL clients use to reach this server (for MCP URLs in grant output).
    pub public_url: Option<String>,
    pub gateway_mode: GatewayMode,
    /// Address dedicated per-run gateway ports bind to.
    pub gateway_bind: IpAddr,
    /// Host name sandboxes use to reach dedicated gateway ports.
    pub gateway_advertise: Option<String>,
    /// Shared gateway port (runner role, `gateway_mode = "shared"`).
    pub gateway_listen: SocketAddr,
    /// Base URL sandboxes use to reach the shared gateway port.
    pub gateway_public_url: Option<String>,
    /// Origins allowed to call MCP endpoints (besides requests without `Origin`).
    pub allowed_origins: Vec<String>,
    /// Host names MCP endpoints accept besides loopback names.
    pub allowed_hosts: Vec<String>,
    /// MCP requests one run may make per second (on every replica together with the Redis registry).
    pub rate_limit_per_second: u32,
    /// The most requests a run may make in one burst (the size of its token bucket, refilled at `rate_limit_per_second`).
    pub rate_limit_burst: u32,
    /// Largest MCP request body, in bytes.
    pub max_body_bytes: usize,
    /// Longest time an MCP request's body may take to arrive, in ms; a
    /// slower body is answered 408.
    pub body_timeout_ms: u64,
    /// Most elements of one JSON-RPC batch (2025-03-26 sessions); a longer
    /// batch is refused whole.
    pub max_batch_len: usize,
    /// Once a batch's response holds this many bytes, its remaining
    /// requests are not run and are answered -32055 (retry them singly).
    pub max_batch_response_bytes: usize,
    /// Longest time a store call may take before the tool answers "board unavailable".
    pub store_timeout_ms: u64,
    /// Longest time one search (or filtered list page) may run before the
    /// store stops it and the tool answers "search took too long"; a search
    /// may first wait as long again for its tenant's share. A lower
    /// `store_timeout_ms` bounds it too (a configuration that lowered only
    /// that one keeps working).
    pub search_timeout_ms: u64,
    /// Most searches and filtered list pages one tenant (all its runs
    /// together) may run at once; the next waits up to `search_timeout_ms`
    /// behind them, then is refused "too many searches for this tenant".
    pub searches_per_tenant_max: usize,
    /// Milliseconds of search time (searches and filtered list pages) one
    /// tenant, all its runs together, may use a second, beyond a burst of
    /// one second's worth; past it the next waits for its time, up to
    /// `search_timeout_ms`, then is refused "too many searches". 1000 is
    /// one core's worth.
    pub search_ms_per_second_per_tenant: u64,
    /// SQLite store: a tenant with more open issues than this is not held
    /// in memory for the similar-title look-up every `create_issue` makes;
    /// its look-ups read the file instead (the same answer, about a fifth
    /// more CPU per create). A tenant is held from one read of its open
    /// issues, on a thread of its own, about 3 µs per open issue; its
    /// look-ups read the file until then. 0 holds none.
    pub open_titles_per_tenant_max: usize,
    /// SQLite store: about how many bytes of open titles all tenants
    /// together may hold in memory for the similar-title look-up (see
    /// `open_titles_per_tenant_max`); past it the tenants looked up least
    /// recently are dropped, and held again from the file at their next
    /// create. Keep it above what `open_titles_per_tenant_max` open issues
    /// take (about 450 to 750 bytes each, more with longer titles), or a
    /// tenant that large is built and dropped again at each of its creates.
    pub open_titles_memory_bytes: usize,
    /// Most bytes one tool result may take (structured JSON, text block and
    /// envelope); a longer answer is cut at an item boundary and says what
    /// it left out and how to get it. At least 16384.
    pub max_result_bytes: usize,
    /// How long a claim lasts without a write to its issue by its holder
    /// or a renewal (claim_issue again); a lapsed claim makes the issue
    /// ready work again. At least 1000.
    pub claim_lease_ms: u64,
    /// Most runs one tenant may have live on one runner at once; the next
    /// registration is refused with 409 `run_limit`.
    pub live_runs_per_tenant_max: usize,
    /// Most grants (neither revoked nor expired) one tenant may hold; the
    /// next one is refused with 409 `grant_limit`.
    pub live_grants_per_tenant_max: usize,
    /// Most open client connections per listener (`listen`, and a
    /// runner's shared gateway port). Connections over it are answered 503
    /// and closed (up to as many again), past that they wait in the listen
    /// backlog (sized to this) or are dropped by the kernel.
    pub max_connections: usize,
    /// The same, for each run's dedicated gateway port.
    pub max_connections_per_run: usize,
    /// Most open connections one client address (IPv6: one /64) may hold
    /// on any one listener; behind a trusted proxy, most requests one
    /// forwarded client may have in flight.
    pub max_connections_per_source: usize,
    /// Peers (addresses, CIDRs) whose `forwarded_header` names the client;
    /// empty (the default): every peer is the client.
    pub trusted_proxies: Vec<String>,
    /// The header trusted proxies write: `x-forwarded-for` or `forwarded`.
    pub forwarded_header: ForwardedHeader,
    /// Longest time a request's head (request line and headers) may take
    /// to arrive, in ms; a slower one gets 408 and its connection closes.
    pub header_timeout_ms: u64,
    /// Longest time an idle keep-alive connection stays open, in ms.
    pub keep_alive_ms: u64,
    /// Longest a grant may live in all, renewals included, in seconds from
    /// its creation (a tenant may set a shorter one of its own); at most 30
    /// days, the longest any grant may be given.
    pub grant_max_lifetime_secs: u64,
    /// Hosts webhook endpoints may point at. Empty (the default): any host
    /// `egress_allow` permits; otherwise only these (names, `*.example.com`
    /// for its subdomains, addresses, CIDRs), each also opened past the
    /// egress rules for webhooks (e.g. `127.0.0.1` for local use). Hosts
    /// are matched as the HTTP client parses the URL.
    pub webhook_allowed_hosts: Vec<String>,
    /// Longest time one webhook delivery attempt may take (connect, send,
    /// answer), in ms; a slower one is a failed attempt, retried with the
    /// backoff.
    pub webhook_timeout_ms: u64,
    /// Most webhook deliveries one server process sends at once.
    pub webhook_in_flight_max: u32,
    /// Most deliveries to one endpoint in flight at once (all servers
    /// sharing the board together), so a slow endpoint holds no more.
    pub webhook_in_flight_per_endpoint: u32,
    /// What connections made for tenants (upstream MCP servers, webhook
    /// deliveries) may reach besides public addresses: host names
    /// (`mcp.internal`), `*.` suffixes (`*.svc.cluster.local`), addresses
    /// (`127.0.0.1`, `::1`) and CIDRs (`10.20.0.0/16`). Empty (the
    /// default): no loopback, private, link-local, carrier-grade NAT,
    /// unique-local, unspecified, multicast, broadcast, reserved or cloud
    /// metadata address, however spelled or resolved. Parsed at start-up
    /// (`cli`'s compose, with `corkboard_egress`).
    pub egress_allow: Vec<String>,
    /// Most bytes of one answer a runner reads from an upstream MCP server
    /// (a JSON body, or one event of an event stream: tool lists, call
    /// results, relayed requests); a larger one is not read further and the
    /// agent gets "upstream answer too large". At least 65536.
    pub upstream_max_answer_bytes: usize,
    /// Longest time listing an upstream's tools may take (every page,
    /// negotiation included), in ms.
    pub upstream_list_timeout_ms: u64,
    /// How long a runner uses an upstream's tool list before listing it
    /// again, in ms: also how soon a changed tool definition is seen (and
    /// held back until approved).
    pub upstream_tools_ttl_ms: u64,
    /// Longest time one upstream tool call may take, from sending it to the
    /// last byte of its answer, in ms (calls that relay requests to the
    /// agent have 300 s: a person may be answering).
    pub upstream_call_timeout_ms: u64,
    /// Most calls of 2025 upstreams a runner holds for 2026-07-28 agents
    /// between an `input_required` and the agent's retry (calls held for a
    /// person's approval share this table and its shares).
    pub upstream_held_calls_max: usize,
    /// Longest a 2025 session's tool call that needs a person's approval
    /// is held on its event stream for the decision, in ms (0: never held;
    /// answered pending with the handle at once). Past it the call answers
    /// pending with the handle.
    pub approval_hold_ms: u64,
    /// Most requests relayed to 2025 agents whose answers a runner's
    /// calls wait for.
    pub upstream_pending_requests_max: usize,
    /// Most sessions a runner keeps with 2025 upstreams (one per run,
    /// upstream and declared capability set).
    pub upstream_sessions_max: usize,
    /// The most of each of the three tables above one tenant may hold, in
    /// percent (1-100, at least one entry).
    pub upstream_tenant_share_pct: u8,
    /// The most of each of those tables one run may hold, in percent
    /// (1-100, at least one entry).
    pub upstream_run_share_pct: u8,
    /// Default write budgets of runs' grants (the register API, `corkboard
    /// run`) for tenants without their own: `create_issue=3,update_issue=20,
    /// add_comment=10` (any of the five write tools; empty, the default: unlimited). A
    /// run asking for less gets less. Checked at start-up (`cli`'s compose,
    /// which knows the budget names).
    pub run_budgets: String,
    /// Session keys `session_key_file` replaced: still accepted (session
    /// ids, sealed relay values, the registry's grant records), never
    /// used to sign. A rotation lists the old key here until what it
    /// signed has expired.
    pub session_previous_key_files: Vec<PathBuf>,
    /// Admin JWT keys the current one replaced (HS256 secrets, or RS256 /
    /// EdDSA public keys, for the same `jwt_algorithm`): tokens they
    /// signed are still accepted.
    pub jwt_previous_key_files: Vec<PathBuf>,
    /// Upstream keys `upstream_key_file` replaced: credentials and webhook
    /// secrets sealed with them still open; new ones are sealed with the
    /// current key.
    pub upstream_previous_key_files: Vec<PathBuf>,
    /// PEM CA certificate(s) a `rediss://` server's certificate must chain
    /// to (a private CA); unset: the system's roots.
    pub redis_tls_ca_file: Option<PathBuf>,
    /// PEM client certificate for a `rediss://` server that asks for one
    /// (with `redis_tls_key_file`).
    pub redis_tls_cert_file: Option<PathBuf>,
    /// PEM private key of `redis_tls_cert_file`.
    pub redis_tls_key_file: Option<PathBuf>,
    /// PEM CA certificate(s) MongoDB's certificate must chain to (a
    /// private CA); turns TLS on for the connection.
    pub mongodb_tls_ca_file: Option<PathBuf>,
    /// Time this process has from SIGTERM until it is killed, in ms (in
    /// Kubernetes: the pod's grace period minus its preStop sleep). Unset:
    /// the fixed drains of before (HTTP 10 s, runs 5 s + 1 s, gateway
    /// port 5 s). Set: every drain deadline is derived from it so that the
    /// worst case, audit flush included, ends within it (`cli`'s
    /// `signals.rs`). At least 10000.
    pub shutdown_grace_ms: Option<u64>,
    /// Serve `/metrics` on this address alone (off the API listener, so
    /// an Ingress or a sandbox reaching the API never reaches metrics).
    /// Unset: `/metrics` stays on `listen`.
    pub metrics_listen: Option<SocketAddr>,
}

/// The data dir when none is configured: `$XDG_DATA_HOME/corkboard`, else
/// `$HOME/.local/share/corkboard`, else `.corkboard` of the working
/// directory (made absolute on load). One per user, so a client command run
/// from another directory finds the board `serve` made instead of making a
/// second one.
pub fn default_data_dir(
    xdg_data_home: Option<&std::ffi::OsStr>,
    home: Option<&std::ffi::OsStr>,
) -> PathBuf {
    // The XDG rule: a relative value is invalid and ignored.
    let absolute =
        |dir: Option<&std::ffi::OsStr>| dir.map(PathBuf::from).filter(|p| p.is_absolute());
    if let Some(base) = absolute(xdg_data_home) {
        return base.join("corkboard");
    }
    if let Some(home) = absolute(home) {
        return home.join(".local/share/corkboard");
    }
    PathBuf::from(".corkboard")
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            listen: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 4891),
            data_dir: default_data_dir(
                std::env::var_os("XDG_DATA_HOME").as_deref(),
                std::env::var_os("HOME").as_deref(),
            ),
            store: StoreKind::Sqlite,
            mongodb_uri: None,
            mongodb_database: "corkboard".into(),
            registry: RegistryKind::Memory,
            redis_url: None,
            redis_key_prefix: "corkboard:".into(),
            jwt_algorithm: JwtAlgorithm::HS256,
            jwt_secret_file: None,
            jwt_public_key_file: None,
            jwt_private_key_file: None,
            jwt_issuer: "corkboard".into(),
            jwt_audience: "corkboard-admin".into(),
            session_key_file: None,
            upstream_key_file: None,
            otlp_endpoint: None,
            log_format: LogFormat::Auto,
            public_url: None,
            gateway_mode: GatewayMode::Dedicated,
            gateway_bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
            gateway_advertise: None,
            gateway_listen: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 4892),
            gateway_public_url: None,
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            rate_limit_per_second: 50,
            rate_limit_burst: 100,
            // Copies of the protocol's and the tools' defaults
            // (`McpSettings::DEFAULT_MAX_BODY_BYTES`, `DEFAULT_STORE_TIMEOUT`),
            // which this crate sits below; cli's `compose` tests check them.
            max_body_bytes: 1024 * 1024,
            body_timeout_ms: 10_000,
            max_batch_len: 32,
            max_batch_response_bytes: 4 * 1024 * 1024,
            store_timeout_ms: 5_000,
            // Copies of `corkboard_board::ExpensiveReads`' defaults; cli's
            // `compose` tests check them.
            search_timeout_ms: 2_000,
            searches_per_tenant_max: 2,
            search_ms_per_second_per_tenant: 250,
            // `corkboard_store_sqlite::OpenTitleBounds`' defaults; cli's
            // `compose` tests check them.
            open_titles_per_tenant_max: 50_000,
            open_titles_memory_bytes: 64 * 1024 * 1024,
            // `corkboard_tools::DEFAULT_RESULT_BUDGET`: about 8,000 tokens.
            max_result_bytes: 32_000,
            // `corkboard_board::queue_limits::CLAIM_LEASE_DEFAULT`: 15 minutes.
            claim_lease_ms: 900_000,
            live_runs_per_tenant_max: 100,
            live_grants_per_tenant_max: 1_000,
            // Below the usual 1,024 open-files limit is not enough for
            // several listeners at their caps: raise `ulimit -n` with it.
            max_connections: 1_024,
            max_connections_per_run: 512,
            // `corkboard_telemetry::conn::DEFAULT_MAX_CONNECTIONS_PER_SOURCE`,
            // which this crate sits below; cli's `compose` tests check it.
            max_connections_per_source: 64,
            trusted_proxies: Vec::new(),
            forwarded_header: ForwardedHeader::XForwardedFor,
            header_timeout_ms: 5_000,
            keep_alive_ms: 5_000,
            // A copy of `corkboard_grants::DEFAULT_MAX_LIFETIME` (30 days),
            // which this crate sits below; cli's `compose` tests check it.
            grant_max_lifetime_secs: 30 * 24 * 3600,
            webhook_allowed_hosts: Vec::new(),
            webhook_timeout_ms: 10_000,
            webhook_in_flight_max: 64,
            webhook_in_flight_per_endpoint: 2,
            egress_allow: Vec::new(),
            // Copies of `corkboard_upstream::UpstreamOptions`' defaults,
            // which this crate sits below; cli's `compose` tests check them.
            upstream_max_answer_bytes: 4 * 1024 * 1024,
            upstream_list_timeout_ms: 5_000,
            upstream_tools_ttl_ms: 60_000,
            upstream_call_timeout_ms: 30_000,
            // Copies of `corkboard_upstream::RelayShares`' defaults: a
            // tenant a quarter of each table, a run about a sixteenth.
            upstream_held_calls_max: 1_024,
            // Below the 60 s request timeout many clients default to, so
            // that one asking for no progress still gets the pending
            // answer instead of its own timeout.
            approval_hold_ms: 50_000,
            upstream_pending_requests_max: 4_096,
            upstream_sessions_max: 4_096,
            upstream_tenant_share_pct: 25,
            upstream_run_share_pct: 6,
            run_budgets: String::new(),
            session_previous_key_files: Vec::new(),
            jwt_previous_key_files: Vec::new(),
            upstream_previous_key_files: Vec::new(),
            redis_tls_ca_file: None,
            redis_tls_cert_file: None,
            redis_tls_key_file: None,
            mongodb_tls_ca_file: None,
            shutdown_grace_ms: None,
            metrics_listen: None,
        }
    }
}

/// A `CORKBOARD_*` environment variable nothing reads (see
/// [`Settings::unknown_env_vars`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownEnvVar {
    pub name: String,
    /// The known variable closest to it, when one is close.
    pub nearest: Option<String>,
}

impl std::fmt::Display for UnknownEnvVar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} is not a corkboard variable and is ignored",
            self.name
        )?;
        match &self.nearest {
            Some(nearest) => write!(f, " (did you mean {nearest}?)"),
            None => Ok(()),
        }
    }
}

/// Levenshtein distance, in characters: how far a misspelt name is from
/// a known one.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

/// Keys whose environment value is a comma-separated list.
const LIST_KEYS: &[&str] = &[
    "allowed_origins",
    "allowed_hosts",
    "webhook_allowed_hosts",
    "egress_allow",
    "trusted_proxies",
    "session_previous_key_files",
    "jwt_previous_key_files",
    "upstream_previous_key_files",
];

impl Settings {
    /// The names of every key (for env lookup and documentation).
    pub fn keys() -> Vec<String> {
        match serde_json::to_value(Settings::default()) {
            Ok(serde_json::Value::Object(map)) => map.keys().cloned().collect(),
            _ => Vec::new(),
        }
    }

    /// Loads defaults < `file` < environment < `overrides` (flags, as a
    /// partial map of key → value), then checks cross-key rules.
    pub fn load(
        file: Option<&Path>,
        overrides: serde_json::Map<String, serde_json::Value>,
    ) -> Result<Self, ConfigError> {
        Self::load_with_env(file, overrides, std::env::vars())
    }

    /// The `CORKBOARD_*` variables of `env` that are neither a setting nor
    /// one of `also_known` (the variables the binary reads itself), each
    /// with the nearest known name when one is close: a misspelt setting
    /// would otherwise be ignored without a word. Reported, not refused:
    /// other tools may share the prefix.
    pub fn unknown_env_vars(
        env: impl IntoIterator<Item = (String, String)>,
        also_known: &[&str],
    ) -> Vec<UnknownEnvVar> {
        let known: Vec<String> = Self::keys()
            .iter()
            .map(|key| format!("CORKBOARD_{}", key.to_ascii_uppercase()))
            .chain(also_known.iter().map(|name| (*name).to_owned()))
            .collect();
        let mut unknown: Vec<UnknownEnvVar> = env
            .into_iter()
            .filter(|(name, _)| name.starts_with("CORKBOARD_") && !known.contains(name))
            .map(|(name, _)| {
                let nearest = known
                    .iter()
                    .map(|candidate| (edit_distance(&name, candidate), candidate))
                    .filter(|(distance, _)| *distance <= 3)
                    .min()
                    .map(|(_, candidate)| candidate.clone());
                UnknownEnvVar { name, nearest }
            })
            .collect();
        unknown.sort_by(|a, b| a.name.cmp(&b.name));
        unknown
    }

    /// [`Self::load`] with an explicit environment (tests).
    pub fn load_with_env(
        file: Option<&Path>,
        overrides: serde_json::Map<String, serde_json::Value>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigError> {
        let mut figment = Figment::from(Serialized::defaults(Settings::default()));
        let known = Self::keys();
        if let Some(path) = file {
            let text = std::fs::read_to_string(path).map_err(|e| ConfigError::File {
                path: path.to_owned(),
                reason: e.to_string(),
            })?;
            // Parse here first: figment reports file errors without the
            // path, and unknown keys are clearer when the file is named.
            let table = toml::from_str::<toml::Table>(&text).map_err(|e| ConfigError::File {
                path: path.to_owned(),
                reason: e.to_string(),
            })?;
            if let Some(bad) = table.keys().find(|k| !known.contains(k)) {
                return Err(ConfigError::File {
                    path: path.to_owned(),
                    reason: format!("unknown key `{bad}`"),
                });
            }
            figment = figment.merge(Toml::string(&text));
        }
        let mut from_env = serde_json::Map::new();
        for (name, value) in env {
            let Some(key) = name.strip_prefix("CORKBOARD_") else {
                continue;
            };
            let key = key.to_ascii_lowercase();
            // Other CORKBOARD_* variables (CORKBOARD_TOKEN, ...) belong to
            // clients, not to the configuration: only known keys are read.
            if !known.contains(&key) {
                continue;
            }
            let value = if LIST_KEYS.contains(&key.as_str()) {
                serde_json::Value::Array(
                    value
                        .split(',')
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                        .map(|s| serde_json::Value::String(s.to_owned()))
                        .collect(),
                )
            } else {
                serde_json::Value::String(value)
            };
            from_env.insert(key, value);
        }
        figment = figment
            .merge(Serialized::defaults(coerce(from_env)))
            .merge(Serialized::defaults(coerce(overrides)));
        let settings: Settings = figment.extract().map_err(|e| {
            let key = e.path.join(".");
            let reason = e.kind.to_string();
            if key.is_empty() {
                ConfigError::Other(reason)
            } else {
                ConfigError::Key { key, reason }
            }
        })?;
        let mut settings = settings;
        // Absolute once, here: a relative path would name another board in
        // another working directory, and printed paths would not say which.
        settings.data_dir =
            std::path::absolute(&settings.data_dir).map_err(|e| ConfigError::Key {
                key: "data_dir".into(),
                reason: format!("cannot make {} absolute: {e}", settings.data_dir.display()),
            })?;
        settings.check()?;
        Ok(settings)
    }

    /// Rules that span keys.
    pub fn check(&self) -> Result<(), ConfigError> {
        let key = |key: &str, reason: &str| ConfigError::Key {
            key: key.into(),
            reason: reason.into(),
        };
        if self.store == StoreKind::Mongodb && self.mongodb_uri.is_none() {
            return Err(key("mongodb_uri", "required when store = \"mongodb\""));
        }
        if self.registry == RegistryKind::Redis && self.redis_url.is_none() {
            return Err(key("redis_url", "required when registry = \"redis\""));
        }
        if self.jwt_algorithm != JwtAlgorithm::HS256
            && self.jwt_public_key_file.is_none()
            && self.jwt_private_key_file.is_none()
        {
            return Err(key(
                "jwt_public_key_file",
                "required when jwt_algorithm is RS256 or EdDSA",
            ));
        }
        if self.rate_limit_per_second == 0 || self.rate_limit_burst == 0 {
            return Err(key(
                "rate_limit_per_second",
                "must be at least 1 (and so must rate_limit_burst)",
            ));
        }
        if self.max_body_bytes < 1024 {
            return Err(key("max_body_bytes", "must be at least 1024"));
        }
        if self.store_timeout_ms == 0 {
            return Err(key("store_timeout_ms", "must be at least 1"));
        }
        if !(1..=600_000).contains(&self.search_timeout_ms) {
            return Err(key(
                "search_timeout_ms",
                "must be between 1 and 600000 (10 minutes)",
            ));
        }
        if self.searches_per_tenant_max == 0 {
            return Err(key("searches_per_tenant_max", "must be at least 1"));
        }
        if self.search_ms_per_second_per_tenant == 0 {
            return Err(key("search_ms_per_second_per_tenant", "must be at least 1"));
        }
        if self.max_result_bytes < 16_384 {
            return Err(key(
                "max_result_bytes",
                "must be at least 16384 (corkboard_tools::MIN_RESULT_BUDGET)",
            ));
        }
        if self.claim_lease_ms < 1_000 {
            return Err(key(
                "claim_lease_ms",
                "must be at least 1000 (corkboard_board::queue_limits::CLAIM_LEASE_MIN)",
            ));
        }
        if self.body_timeout_ms == 0 {
            return Err(key("body_timeout_ms", "must be at least 1"));
        }
        if self.max_batch_len == 0 {
            return Err(key("max_batch_len", "must be at least 1"));
        }
        if self.max_batch_response_bytes < 1024 {
            return Err(key("max_batch_response_bytes", "must be at least 1024"));
        }
        if self.live_runs_per_tenant_max == 0 {
            return Err(key("live_runs_per_tenant_max", "must be at least 1"));
        }
        if self.live_grants_per_tenant_max == 0 {
            return Err(key("live_grants_per_tenant_max", "must be at least 1"));
        }
        for (name, value) in [
            ("max_connections", self.max_connections),
            ("max_connections_per_run", self.max_connections_per_run),
            (
                "max_connections_per_source",
                self.max_connections_per_source,
            ),
        ] {
            if value == 0 || value > i32::MAX as usize {
                return Err(key(name, "must be at least 1 (and fit a listen backlog)"));
            }
        }
        if self.upstream_max_answer_bytes < 65_536 {
            return Err(key("upstream_max_answer_bytes", "must be at least 65536"));
        }
        if self.approval_hold_ms > 600_000 {
            return Err(key(
                "approval_hold_ms",
                "must be at most 600000 (10 minutes; 0 turns holding off)",
            ));
        }
        if self.upstream_tools_ttl_ms == 0 {
            return Err(key("upstream_tools_ttl_ms", "must be at least 1"));
        }
        if self.upstream_list_timeout_ms == 0 || self.upstream_call_timeout_ms == 0 {
            return Err(key(
                "upstream_call_timeout_ms",
                "must be at least 1 (and so must upstream_list_timeout_ms)",
            ));
        }
        for (name, value) in [
            ("upstream_held_calls_max", self.upstream_held_calls_max),
            (
                "upstream_pending_requests_max",
                self.upstream_pending_requests_max,
            ),
            ("upstream_sessions_max", self.upstream_sessions_max),
        ] {
            if value == 0 {
                return Err(key(name, "must be at least 1"));
            }
        }
        for (name, value) in [
            ("upstream_tenant_share_pct", self.upstream_tenant_share_pct),
            ("upstream_run_share_pct", self.upstream_run_share_pct),
        ] {
            if !(1..=100).contains(&value) {
                return Err(key(name, "must be between 1 and 100"));
            }
        }
        if !(1..=600_000).contains(&self.webhook_timeout_ms) {
            return Err(key(
                "webhook_timeout_ms",
                "must be between 1 and 600000 (10 minutes)",
            ));
        }
        for (name, value) in [
            ("webhook_in_flight_max", self.webhook_in_flight_max),
            (
                "webhook_in_flight_per_endpoint",
                self.webhook_in_flight_per_endpoint,
            ),
        ] {
            if !(1..=10_000).contains(&value) {
                return Err(key(name, "must be between 1 and 10000"));
            }
        }
        if self.header_timeout_ms == 0 {
            return Err(key("header_timeout_ms", "must be at least 1"));
        }
        if self.keep_alive_ms == 0 {
            return Err(key("keep_alive_ms", "must be at least 1"));
        }
        if !(1..=30 * 24 * 3600).contains(&self.grant_max_lifetime_secs) {
            return Err(key(
                "grant_max_lifetime_secs",
                "must be between 1 and 2592000 (30 days)",
            ));
        }
        if let Some(url) = &self.public_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return Err(key("public_url", "must start with http:// or https://"));
        }
        if self.redis_tls_cert_file.is_some() != self.redis_tls_key_file.is_some() {
            return Err(key(
                "redis_tls_cert_file",
                "needs redis_tls_key_file, and the other way round",
            ));
        }
        let tls_material = self.redis_tls_ca_file.is_some() || self.redis_tls_cert_file.is_some();
        if tls_material
            && !self
                .redis_urls()
                .iter()
                .all(|url| url.starts_with("rediss://"))
        {
            return Err(key(
                "redis_tls_ca_file",
                "is for rediss:// URLs only: redis_url must use rediss:// (a redis:// URL would send everything in clear)",
            ));
        }
        if let Some(grace) = self.shutdown_grace_ms
            && grace < 10_000
        {
            return Err(key(
                "shutdown_grace_ms",
                "must be at least 10000 (the drains and the audit flush need it)",
            ));
        }
        Ok(())
    }

    /// The Redis URLs of `redis_url` (several, comma-separated, are the
    /// seed nodes of a Redis Cluster).
    pub fn redis_urls(&self) -> Vec<String> {
        self.redis_url
            .as_ref()
            .map(|url| {
                url.expose()
                    .split(',')
                    .map(|s| s.trim().to_owned())
                    .filter(|s| !s.is_empty())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The base URL this process hands out (sign-in links, MCP URLs):
    /// `public_url`, else the listen address, with an unspecified address
    /// (`0.0.0.0`, `::`) replaced by loopback: a URL naming "every address"
    /// reaches nothing. Set `public_url` for clients on other machines.
    pub fn advertised_url(&self) -> String {
        match &self.public_url {
            Some(url) => url.trim_end_matches('/').to_owned(),
            None => {
                let mut addr = self.listen;
                if addr.ip().is_unspecified() {
                    addr.set_ip(match addr.ip() {
                        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
                        IpAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
                    });
                }
                format!("http://{addr}")
            }
        }
    }

    pub fn jwt_secret_path(&self) -> PathBuf {
        self.jwt_secret_file
            .clone()
            .unwrap_or_else(|| self.data_dir.join("jwt.secret"))
    }

    pub fn session_key_path(&self) -> PathBuf {
        self.session_key_file
            .clone()
            .unwrap_or_else(|| self.data_dir.join("session.key"))
    }

    pub fn upstream_key_path(&self) -> PathBuf {
        self.upstream_key_file
            .clone()
            .unwrap_or_else(|| self.data_dir.join("upstream.key"))
    }

    /// The effective configuration as TOML, secrets redacted.
    pub fn to_redacted_toml(&self) -> String {
        toml::to_string(self).unwrap_or_else(|e| format!("# cannot render: {e}\n"))
    }
}

/// Figment parses env strings itself only through its Env provider; values
/// arriving as JSON strings are turned into numbers/bools where they look
/// like one, so `CORKBOARD_RATE_LIMIT_BURST=10` reaches a `u32` field.
fn coerce(
    map: serde_json::Map<String, serde_json::Value>,
) -> serde_json::Map<String, serde_json::Value> {
    map.into_iter()
        .map(|(k, v)| {
            let v = match v {
                serde_json::Value::String(s) => {
                    if let Ok(n) = s.parse::<u64>() {
                        serde_json::Value::from(n)
                    } else if s == "true" || s == "false" {
                        serde_json::Value::Bool(s == "true")
                    } else {
                        serde_json::Value::String(s)
                    }
                }
                other => other,
            };
            (k, v)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_data_dir_is_per_user_and_absolute() {
        let os = |s: &'static str| Some(std::ffi::OsStr::new(s));
        assert_eq!(
            default_data_dir(os("/x/data"), os("/home/ann")),
            PathBuf::from("/x/data/corkboard")
        );
        assert_eq!(
            default_data_dir(None, os("/home/ann")),
            PathBuf::from("/home/ann/.local/share/corkboard")
        );
        // A relative XDG_DATA_HOME is ignored, as the XDG rules say.
        assert_eq!(
            default_data_dir(os("rel"), os("/home/ann")),
            PathBuf::from("/home/ann/.local/share/corkboard")
        );
        assert_eq!(default_data_dir(None, None), PathBuf::from(".corkboard"));
    }

    #[test]
    fn a_relative_data_dir_is_made_absolute_on_load() {
        let mut flags = serde_json::Map::new();
        flags.insert("data_dir".into(), "rel/board".into());
        let s = Settings::load_with_env(None, flags, Vec::new()).unwrap();
        assert!(s.data_dir.is_absolute(), "{}", s.data_dir.display());
        assert!(s.data_dir.ends_with("rel/board"));
        assert_eq!(
            s.data_dir,
            std::env::current_dir().unwrap().join("rel/board")
        );
    }

    #[test]
    fn an_unspecified_listen_address_is_advertised_as_loopback() {
        let mut s = Settings {
            listen: "0.0.0.0:4891".parse().unwrap(),
            ..Settings::default()
        };
        assert_eq!(s.advertised_url(), "http://127.0.0.1:4891");
        s.listen = "[::]:80".parse().unwrap();
        assert_eq!(s.advertised_url(), "http://[::1]:80");
        s.listen = "10.0.0.5:80".parse().unwrap();
        assert_eq!(s.advertised_url(), "http://10.0.0.5:80");
        s.public_url = Some("https://board.example/".into());
        assert_eq!(s.advertised_url(), "https://board.example");
    }

    #[test]
    fn unknown_corkboard_variables_are_named_with_the_nearest_known_one() {
        let env = [
            ("CORKBOARD_REDIS_URLL", "redis://x"),
            ("CORKBOARD_REDIS_URL", "redis://y"),
            ("CORKBOARD_TOKEN", "t"),
            ("CORKBOARD_SOMETHING_ELSE_ENTIRELY", "1"),
            ("HOME", "/root"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
        let unknown = Settings::unknown_env_vars(env, &["CORKBOARD_TOKEN"]);
        let shown: Vec<String> = unknown.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "CORKBOARD_REDIS_URLL is not a corkboard variable and is ignored (did you mean CORKBOARD_REDIS_URL?)",
                "CORKBOARD_SOMETHING_ELSE_ENTIRELY is not a corkboard variable and is ignored",
            ]
        );
    }
    use std::io::Write;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn defaults_are_local_and_loopback() {
        let s = Settings::load_with_env(None, Default::default(), env(&[])).unwrap();
        assert!(s.listen.ip().is_loopback());
        assert!(s.gateway_bind.is_loopback());
        assert_eq!(s.store, StoreKind::Sqlite);
        assert_eq!(s.registry, RegistryKind::Memory);
    }

    #[test]
    fn layers_file_then_env_then_flags() {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        writeln!(
            file,
            "listen = \"127.0.0.1:1000\"\nrate_limit_burst = 7\nallowed_hosts = [\"a\"]"
        )
        .unwrap();
        let s = Settings::load_with_env(
            Some(file.path()),
            Default::default(),
            env(&[
                ("CORKBOARD_RATE_LIMIT_BURST", "9"),
                ("CORKBOARD_TOKEN", "ignored"),
                ("CORKBOARD_ALLOWED_HOSTS", "x, y"),
            ]),
        )
        .unwrap();
        assert_eq!(s.listen.port(), 1000);
        assert_eq!(s.rate_limit_burst, 9);
        assert_eq!(s.allowed_hosts, ["x", "y"]);
        let mut flags = serde_json::Map::new();
        flags.insert("listen".into(), "127.0.0.1:2000".into());
        let s = Settings::load_with_env(Some(file.path()), flags, env(&[])).unwrap();
        assert_eq!(s.listen.port(), 2000);
    }

    #[test]
    fn unknown_file_keys_and_bad_values_name_the_key() {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        writeln!(file, "lisen = \"127.0.0.1:1\"").unwrap();
        let err =
            Settings::load_with_env(Some(file.path()), Default::default(), env(&[])).unwrap_err();
        assert!(err.to_string().contains("lisen"), "{err}");
        let err = Settings::load_with_env(
            None,
            Default::default(),
            env(&[("CORKBOARD_STORE", "postgres")]),
        )
        .unwrap_err();
        assert!(err.to_string().contains("store"), "{err}");
        let err = Settings::load_with_env(
            None,
            Default::default(),
            env(&[("CORKBOARD_STORE", "mongodb")]),
        )
        .unwrap_err();
        assert!(err.to_string().contains("mongodb_uri"), "{err}");
    }

    #[test]
    fn egress_allow_is_a_list_in_the_environment_and_empty_by_default() {
        let s = Settings::load_with_env(None, Default::default(), env(&[])).unwrap();
        assert!(s.egress_allow.is_empty(), "nothing opened by default");
        let s = Settings::load_with_env(
            None,
            Default::default(),
            env(&[(
                "CORKBOARD_EGRESS_ALLOW",
                "127.0.0.1, *.svc.local,10.0.0.0/8",
            )]),
        )
        .unwrap();
        assert_eq!(s.egress_allow, ["127.0.0.1", "*.svc.local", "10.0.0.0/8"]);
    }

    #[test]
    fn webhook_delivery_limits_are_bounded() {
        let s = Settings::load_with_env(
            None,
            Default::default(),
            env(&[("CORKBOARD_WEBHOOK_IN_FLIGHT_PER_ENDPOINT", "4")]),
        )
        .unwrap();
        assert_eq!(s.webhook_in_flight_per_endpoint, 4);
        for (var, value, key) in [
            (
                "CORKBOARD_WEBHOOK_IN_FLIGHT_MAX",
                "0",
                "webhook_in_flight_max",
            ),
            (
                "CORKBOARD_WEBHOOK_IN_FLIGHT_PER_ENDPOINT",
                "0",
                "webhook_in_flight_per_endpoint",
            ),
            ("CORKBOARD_WEBHOOK_TIMEOUT_MS", "0", "webhook_timeout_ms"),
        ] {
            let err = Settings::load_with_env(None, Default::default(), env(&[(var, value)]))
                .unwrap_err();
            assert!(err.to_string().contains(key), "{err}");
        }
    }

    #[test]
    fn the_open_titles_bounds_come_from_the_environment() {
        let settings = Settings::load_with_env(
            None,
            Default::default(),
            env(&[
                ("CORKBOARD_OPEN_TITLES_PER_TENANT_MAX", "0"),
                ("CORKBOARD_OPEN_TITLES_MEMORY_BYTES", "268435456"),
            ]),
        )
        .unwrap();
        assert_eq!(
            (
                settings.open_titles_per_tenant_max,
                settings.open_titles_memory_bytes
            ),
            (0, 268_435_456)
        );
        let refused = Settings::load_with_env(
            None,
            Default::default(),
            env(&[("CORKBOARD_OPEN_TITLES_PER_TENANT_MAX", "many")]),
        )
        .unwrap_err();
        assert!(
            refused.to_string().contains("open_titles_per_tenant_max"),
            "{refused}"
        );
    }

    #[test]
    fn search_bounds_are_checked_by_name() {
        let check = |pairs: &[(&str, &str)]| {
            Settings::load_with_env(None, Default::default(), env(pairs))
                .map(|s| (s.search_timeout_ms, s.searches_per_tenant_max))
                .map_err(|e| e.to_string())
        };
        assert_eq!(check(&[]), Ok((2_000, 2)));
        assert_eq!(
            check(&[
                ("CORKBOARD_SEARCH_TIMEOUT_MS", "250"),
                ("CORKBOARD_SEARCHES_PER_TENANT_MAX", "3"),
            ]),
            Ok((250, 3))
        );
        for bad in [
            ("CORKBOARD_SEARCH_TIMEOUT_MS", "0"),
            ("CORKBOARD_SEARCH_TIMEOUT_MS", "600001"),
            ("CORKBOARD_SEARCHES_PER_TENANT_MAX", "0"),
        ] {
            let err = check(&[bad]).unwrap_err();
            let key = bad.0.trim_start_matches("CORKBOARD_").to_ascii_lowercase();
            assert!(err.contains(&key), "{err}");
        }
    }

    #[test]
    fn connection_sources_are_set_from_the_environment() {
        let s = Settings::load_with_env(None, Default::default(), env(&[])).unwrap();
        assert!(s.trusted_proxies.is_empty(), "no proxy trusted by default");
        assert_eq!(s.forwarded_header, ForwardedHeader::XForwardedFor);
        let s = Settings::load_with_env(
            None,
            Default::default(),
            env(&[
                ("CORKBOARD_TRUSTED_PROXIES", "10.0.0.0/8, ::1"),
                ("CORKBOARD_FORWARDED_HEADER", "forwarded"),
                ("CORKBOARD_MAX_CONNECTIONS_PER_SOURCE", "8"),
            ]),
        )
        .unwrap();
        assert_eq!(s.trusted_proxies, ["10.0.0.0/8", "::1"]);
        assert_eq!(s.forwarded_header, ForwardedHeader::Forwarded);
        assert_eq!(s.max_connections_per_source, 8);
        let err = Settings::load_with_env(
            None,
            Default::default(),
            env(&[("CORKBOARD_MAX_CONNECTIONS_PER_SOURCE", "0")]),
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("max_connections_per_source"),
            "{err}"
        );
    }

    #[test]
    fn secrets_are_redacted() {
        let s = Settings::load_with_env(
            None,
            Default::default(),
            env(&[
                ("CORKBOARD_MONGODB_URI", "mongodb://user:hunter2@db"),
                ("CORKBOARD_STORE", "mongodb"),
            ]),
        )
        .unwrap();
        assert!(!format!("{s:?}").contains("hunter2"));
        assert!(!s.to_redacted_toml().contains("hunter2"));
        assert_eq!(s.mongodb_uri.unwrap().expose(), "mongodb://user:hunter2@db");
    }

    #[test]
    fn redis_tls_files_need_rediss_urls_and_a_client_certificate_needs_its_key() {
        let load = |pairs: &[(&str, &str)]| {
            Settings::load_with_env(None, Default::default(), env(pairs)).map_err(|e| e.to_string())
        };
        let err = load(&[
            ("CORKBOARD_REDIS_URL", "redis://cache:6379/"),
            ("CORKBOARD_REDIS_TLS_CA_FILE", "/ca.pem"),
        ])
        .unwrap_err();
        assert!(err.contains("rediss://"), "{err}");
        let err = load(&[
            ("CORKBOARD_REDIS_URL", "rediss://cache:6379/"),
            ("CORKBOARD_REDIS_TLS_CERT_FILE", "/client.pem"),
        ])
        .unwrap_err();
        assert!(err.contains("redis_tls_key_file"), "{err}");
        load(&[
            ("CORKBOARD_REDIS_URL", "rediss://a:6379/,rediss://b:6379/"),
            ("CORKBOARD_REDIS_TLS_CA_FILE", "/ca.pem"),
            ("CORKBOARD_REDIS_TLS_CERT_FILE", "/client.pem"),
            ("CORKBOARD_REDIS_TLS_KEY_FILE", "/client.key"),
        ])
        .unwrap();
    }

    #[test]
    fn previous_keys_are_lists_and_the_shutdown_grace_has_a_floor() {
        let s = Settings::load_with_env(
            None,
            Default::default(),
            env(&[
                ("CORKBOARD_SESSION_PREVIOUS_KEY_FILES", "/a, /b"),
                ("CORKBOARD_SHUTDOWN_GRACE_MS", "25000"),
            ]),
        )
        .unwrap();
        assert_eq!(
            s.session_previous_key_files,
            [PathBuf::from("/a"), PathBuf::from("/b")]
        );
        assert_eq!(s.shutdown_grace_ms, Some(25_000));
        let err = Settings::load_with_env(
            None,
            Default::default(),
            env(&[("CORKBOARD_SHUTDOWN_GRACE_MS", "9999")]),
        )
        .unwrap_err();
        assert!(err.to_string().contains("shutdown_grace_ms"), "{err}");
    }
}
