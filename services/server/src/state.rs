//! Everything a request handler needs, built once from [`Settings`].

use crate::audit::AuditWriter;
use crate::metered::MeteredStore;
use crate::secrets::{SecretFileError, ensure_secret, read_secret};
use crate::session_ends::RedisSessionEnds;
use crate::settings::{JwtAlgorithm, RegistryKind, Settings, StoreKind};
use corkboard_board::BoardStore;
use corkboard_grants::RedisConnector;
use corkboard_grants::{
    AdminMinter, AdminVerifier, AdminVerifierConfig, GrantService, IssuedGrant, JwtError,
    LedgerRegistry, ReadThroughRegistry, RedisRegistry, RedisRegistryConfig, SigningKey,
    TokenRegistry, VerifyingKey,
};
use corkboard_mcp::{McpEndpoint, McpSettings, MemorySessionEnds, SessionEnds, SessionKey};
use corkboard_telemetry::Metrics;
use corkboard_telemetry::metrics::RegistryCounters;
use corkboard_tools::{AuditSink, BoardTools};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;

/// Why the application could not start, naming the setting to fix.
#[derive(Debug, Error)]
pub enum StartError {
    #[error(transparent)]
    Secret(#[from] SecretFileError),
    #[error("store: {0}")]
    Store(String),
    #[error("registry: {0}")]
    Registry(String),
    #[error("{key}: {reason}")]
    Setting { key: &'static str, reason: String },
}

/// Whether missing signing secrets may be created (embedded `serve`) or
/// must already exist (cluster roles, where every replica shares them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretPolicy {
    CreateIfMissing,
    MustExist,
}

/// Shared application state (cheap to clone: everything is behind `Arc`).
#[derive(Clone)]
pub struct AppState {
    pub settings: Arc<Settings>,
    pub store: Arc<dyn BoardStore>,
    pub grants: GrantService,
    pub admin: Arc<AdminVerifier>,
    pub session_key: Arc<[u8]>,
    /// Batches audit records of tool calls into the store.
    pub audit: Arc<AuditWriter>,
    /// The studio MCP endpoint (`/mcp`): the board tools for any valid grant.
    pub mcp: McpEndpoint<BoardTools>,
    /// This process's Prometheus metrics (`/metrics`).
    pub metrics: Metrics,
    /// The web board: sign-in, sessions, live events.
    pub web: crate::web::WebState,
    /// Ended legacy MCP sessions: in Redis when the registry is (so a
    /// DELETE on one replica ends the session on all), in memory otherwise.
    pub session_ends: Arc<dyn SessionEnds>,
    /// Where tool calls are accounted: the audit writer, and the live
    /// board events derived from it. Every MCP endpoint (studio, run
    /// gateways) passes this to its tools.
    pub tool_audit: Arc<dyn AuditSink>,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState").finish_non_exhaustive()
    }
}

/// Opens the configured board store.
pub async fn open_store(settings: &Settings) -> Result<Arc<dyn BoardStore>, StartError> {
    match settings.store {
        StoreKind::Sqlite => {
            let store = corkboard_store_sqlite::SqliteStore::open_in_dir(&settings.data_dir)
                .map_err(|e| StartError::Store(e.to_string()))?;
            Ok(Arc::new(store))
        }
        StoreKind::Mongodb => {
            let uri = settings.mongodb_uri.as_ref().ok_or(StartError::Setting {
                key: "mongodb_uri",
                reason: "required when store = \"mongodb\"".into(),
            })?;
            // Lazy: a MongoDB that is down at start-up must not stop the
            // process; calls answer "board unavailable" until it returns
            // and /readyz says so.
            let store = corkboard_store_mongo::MongoStore::connect_lazy(
                uri.expose(),
                &settings.mongodb_database,
                corkboard_store_mongo::MongoOptions::default(),
            )
            .await
            .map_err(|e| StartError::Store(e.to_string()))?;
            Ok(Arc::new(store))
        }
    }
}

/// Builds the configured token registry over `store`'s ledger, for a
/// process that resolves a token once per tool call (the stdio server):
/// the embedded registry reads the ledger every time.
pub async fn open_registry(
    settings: &Settings,
    store: &Arc<dyn BoardStore>,
) -> Result<Arc<dyn TokenRegistry>, StartError> {
    open_registry_with(settings, store, None, None).await
}

/// The registry of a long-running server: as [`open_registry`], with the
/// embedded registry's short cache of live grants
/// ([`corkboard_grants::LEDGER_CACHE_TTL`]) and the Redis registry's cache
/// and error counters exported through `metrics`.
pub async fn open_registry_metered(
    settings: &Settings,
    store: &Arc<dyn BoardStore>,
    metrics: Option<&Metrics>,
) -> Result<Arc<dyn TokenRegistry>, StartError> {
    open_registry_with(
        settings,
        store,
        metrics,
        Some(corkboard_grants::LEDGER_CACHE_TTL),
    )
    .await
}

async fn open_registry_with(
    settings: &Settings,
    store: &Arc<dyn BoardStore>,
    metrics: Option<&Metrics>,
    ledger_cache: Option<std::time::Duration>,
) -> Result<Arc<dyn TokenRegistry>, StartError> {
    match settings.registry {
        RegistryKind::Memory => {
            let ledger: Arc<dyn corkboard_board::GrantLedger> = store.clone();
            Ok(Arc::new(match ledger_cache {
                Some(ttl) => LedgerRegistry::cached(ledger, ttl),
                None => LedgerRegistry::new(ledger),
            }))
        }
        RegistryKind::Redis => {
            let urls: Vec<String> = settings.redis_urls();
            let mut config = RedisRegistryConfig::new(urls);
            config.key_prefix = settings.redis_key_prefix.clone();
            // Not `connect`: a Redis that is down at start-up must not stop
            // the process; requests fail closed until it answers (/readyz says so).
            let registry =
                RedisRegistry::new(config).map_err(|e| StartError::Registry(e.to_string()))?;
            if let Some(metrics) = metrics {
                let stats = registry.stats_handle();
                metrics.observe_registry(move || {
                    let s = stats();
                    RegistryCounters {
                        cache_hits: s.cache_hits,
                        cache_misses: s.cache_misses,
                        redis_errors: s.redis_errors,
                    }
                });
            }
            // The ledger stays the source of truth: a Redis that restarted
            // empty is refilled on demand, never trusted to be complete.
            let ledger: Arc<dyn corkboard_board::GrantLedger> = store.clone();
            Ok(Arc::new(ReadThroughRegistry::new(registry, ledger)))
        }
    }
}

/// Loads the admin JWT verifier (creating the HS256 secret for `serve`).
pub fn admin_verifier(
    settings: &Settings,
    policy: SecretPolicy,
) -> Result<AdminVerifier, StartError> {
    let jwt = |key: &'static str| {
        move |e: JwtError| StartError::Setting {
            key,
            reason: e.to_string(),
        }
    };
    let key = match settings.jwt_algorithm {
        JwtAlgorithm::HS256 => {
            let path = settings.jwt_secret_path();
            if policy == SecretPolicy::CreateIfMissing {
                ensure_secret(&path)?;
            }
            VerifyingKey::hs256_secret_file(&path).map_err(jwt("jwt_secret_file"))?
        }
        JwtAlgorithm::RS256 => VerifyingKey::rs256_public_pem_file(public_key_path(settings)?)
            .map_err(jwt("jwt_public_key_file"))?,
        JwtAlgorithm::EdDSA => VerifyingKey::eddsa_public_pem_file(public_key_path(settings)?)
            .map_err(jwt("jwt_public_key_file"))?,
    };
    let mut config = AdminVerifierConfig::new(key);
    config.issuer = settings.jwt_issuer.clone();
    config.audience = settings.jwt_audience.clone();
    AdminVerifier::new(config).map_err(jwt("jwt_algorithm"))
}

fn public_key_path(settings: &Settings) -> Result<&std::path::Path, StartError> {
    settings
        .jwt_public_key_file
        .as_deref()
        .ok_or(StartError::Setting {
            key: "jwt_public_key_file",
            reason: "required when jwt_algorithm is RS256 or EdDSA".into(),
        })
}

/// Loads the key `corkboard admin token` signs with.
pub fn admin_minter(settings: &Settings) -> Result<AdminMinter, StartError> {
    let jwt = |key: &'static str| {
        move |e: JwtError| StartError::Setting {
            key,
            reason: e.to_string(),
        }
    };
    let private = || {
        settings
            .jwt_private_key_file
            .as_deref()
            .ok_or(StartError::Setting {
                key: "jwt_private_key_file",
                reason: "required to mint RS256/EdDSA tokens".into(),
            })
    };
    let key =
        match settings.jwt_algorithm {
            JwtAlgorithm::HS256 => {
                let path = settings.jwt_secret_path();
                ensure_secret(&path)?;
                SigningKey::hs256_secret_file(&path).map_err(jwt("jwt_secret_file"))?
            }
            JwtAlgorithm::RS256 => SigningKey::rs256_private_pem_file(private()?)
                .map_err(jwt("jwt_private_key_file"))?,
            JwtAlgorithm::EdDSA => SigningKey::eddsa_private_pem_file(private()?)
                .map_err(jwt("jwt_private_key_file"))?,
        };
    AdminMinter::with_issuer_audience(
        key,
        settings.jwt_issuer.clone(),
        settings.jwt_audience.clone(),
    )
    .map_err(jwt("jwt_algorithm"))
}

/// Loads (or, for `serve`, creates) the MCP session signing key.
pub fn session_key(settings: &Settings, policy: SecretPolicy) -> Result<Vec<u8>, StartError> {
    let path = settings.session_key_path();
    if policy == SecretPolicy::CreateIfMissing {
        ensure_secret(&path)?;
    }
    Ok(read_secret("session_key_file", &path)?)
}

/// Where ended legacy sessions are kept (see [`AppState::session_ends`]).
pub fn open_session_ends(settings: &Settings) -> Result<Arc<dyn SessionEnds>, StartError> {
    match settings.registry {
        RegistryKind::Memory => Ok(Arc::new(MemorySessionEnds::default())),
        RegistryKind::Redis => {
            let urls: Vec<String> = settings.redis_urls();
            let timeout = Duration::from_secs(1);
            let handle = tokio::runtime::Handle::try_current().map_err(|_| {
                StartError::Registry("the Redis session store needs a Tokio runtime".into())
            })?;
            let redis = RedisConnector::new(&urls, false, timeout, handle)
                .map_err(|e| StartError::Registry(e.to_string()))?;
            Ok(Arc::new(RedisSessionEnds::new(
                redis,
                &settings.redis_key_prefix,
                timeout,
            )))
        }
    }
}

/// MCP endpoint settings from the configuration. The host of `public_url`
/// is always accepted, so a configured public name never trips the
/// DNS-rebinding check.
pub fn mcp_settings(settings: &Settings, session_key: &[u8]) -> Result<McpSettings, StartError> {
    let key = SessionKey::new(session_key.to_vec()).map_err(|e| StartError::Setting {
        key: "session_key_file",
        reason: e.to_string(),
    })?;
    let mut mcp = McpSettings::new(key);
    mcp.allowed_origins = settings.allowed_origins.clone();
    mcp.allowed_hosts = settings.allowed_hosts.clone();
    if let Some(host) = settings.public_url.as_deref().and_then(url_host) {
        mcp.allowed_hosts.push(host);
    }
    mcp.max_body_bytes = settings.max_body_bytes;
    Ok(mcp)
}

/// `host[:port]` of an http(s) URL.
fn url_host(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let host = rest.split(['/', '?', '#']).next()?;
    (!host.is_empty()).then(|| host.to_owned())
}

impl AppState {
    pub async fn build(settings: Settings, policy: SecretPolicy) -> Result<Self, StartError> {
        let metrics = Metrics::default();
        let store: Arc<dyn BoardStore> = Arc::new(MeteredStore::new(
            open_store(&settings).await?,
            metrics.clone(),
        ));
        let registry = open_registry_metered(&settings, &store, Some(&metrics)).await?;
        let ledger: Arc<dyn corkboard_board::GrantLedger> = store.clone();
        let grants = GrantService::new(ledger, registry);
        let admin = Arc::new(admin_verifier(&settings, policy)?);
        let session_key: Arc<[u8]> = session_key(&settings, policy)?.into();
        let audit = AuditWriter::spawn(store.clone());
        let web = crate::web::WebState::from_settings(&settings)?;
        let tool_audit: Arc<dyn AuditSink> = Arc::new(crate::web::EventPublishingSink::new(
            audit.clone(),
            web.events(),
        ));
        let issues: Arc<dyn corkboard_board::IssueStore> = store.clone();
        let tools = BoardTools::new(issues, grants.registry().clone(), tool_audit.clone())
            .with_store_timeout(Duration::from_millis(settings.store_timeout_ms))
            .with_metrics(metrics.clone());
        let mut mcp_settings = mcp_settings(&settings, &session_key)?;
        mcp_settings.metrics = Some(metrics.clone());
        let session_ends = open_session_ends(&settings)?;
        let mcp =
            McpEndpoint::with_session_ends(Arc::new(tools), mcp_settings, session_ends.clone());
        Ok(Self {
            settings: Arc::new(settings),
            store,
            grants,
            admin,
            session_key,
            audit,
            mcp,
            metrics,
            web,
            tool_audit,
            session_ends,
        })
    }

    /// Base URL of this server as clients reach it.
    pub fn public_url(&self) -> String {
        match &self.settings.public_url {
            Some(url) => url.trim_end_matches('/').to_owned(),
            None => format!("http://{}", self.settings.listen),
        }
    }

    /// The MCP URL a grant's run uses: the shared runner gateway route when
    /// one is configured, the studio endpoint otherwise.
    pub fn mcp_url_for(&self, grant: &corkboard_board::Grant) -> String {
        match &self.settings.gateway_public_url {
            Some(base) => format!("{}/runs/{}/mcp", base.trim_end_matches('/'), grant.run),
            None => format!("{}/mcp", self.public_url()),
        }
    }

    /// The one response that carries a token.
    pub fn issued_grant_json(&self, issued: &IssuedGrant) -> serde_json::Value {
        let url = self.mcp_url_for(&issued.grant);
        json!({
            "grant": issued.grant,
            "token": issued.token.expose(),
            "mcp_url": url,
            "mcp_config": corkboard_grants::mcp_client_config(&url, &issued.token),
        })
    }
}
