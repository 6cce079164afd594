//! The composition root: which store, registry, secrets and session store
//! a configuration selects, opened and handed as typed parts to the control
//! plane ([`AppState::new`]) and to the runner ([`Runner::start`]).
//!
//! This is the one place that reads [`Settings`] to choose backends; the
//! library crates take what they are given.

use corkboard_board::{BoardStore, Budgets, ExpensiveReads, GrantLedger};
use corkboard_config::{
    ForwardedHeader, GatewayMode, JwtAlgorithm, RegistryKind, Settings, StoreKind,
    check_secret_mode, ensure_secret, read_secret,
};
use corkboard_egress::{Cidr, EgressPolicy};
use corkboard_gateway::{
    GatewayConfig, GatewayError, LocalRateLimiter, RateLimit, RateLimiter, RedisRateLimiter,
    Runner, RunnerParts,
};
use corkboard_grants::{
    AdminMinter, AdminVerifier, AdminVerifierConfig, BudgetCounter, GrantService, JwtError,
    LedgerBudgets, LedgerRegistry, LedgerUsedOnce, ReadThroughRegistry, RedisBudgets,
    RedisRegistry, RedisRegistryConfig, RedisUsedOnce, SigningKey, TokenRegistry, UpstreamCalls,
    UsedOnce, VerifyingKey,
};
use corkboard_grants::{RedisConnector, RedisTls};
use corkboard_mcp::relay::seal::{self, RelaySealer};
use corkboard_mcp::{McpSettings, MemorySessionEnds, SessionEnds, SessionKey};
use corkboard_server::metered::MeteredStore;
use corkboard_server::session_ends::RedisSessionEnds;
use corkboard_server::webhooks::HostPolicy;
use corkboard_server::{AppParts, AppState, StartError};
use corkboard_telemetry::Metrics;
use corkboard_telemetry::conn::{self, SourceLimits};
use corkboard_telemetry::metrics::RegistryCounters;
use corkboard_upstream::{CredentialKey, RelayShares, UpstreamOptions, Upstreams};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Bound on one rate-limit call to Redis.
const LIMITER_TIMEOUT: Duration = Duration::from_secs(1);

/// Whether missing signing secrets may be created (embedded `serve`) or
/// must already exist (cluster roles, where every replica shares them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretPolicy {
    CreateIfMissing,
    MustExist,
}

/// The control plane's state as `settings` describe it: the metered store,
/// the registry over its ledger, the admin verifier and session key (created
/// for `serve`), the web board's event bus and the ended-session store.
pub async fn app_state(settings: Settings, policy: SecretPolicy) -> Result<AppState, StartError> {
    install_redis_tls(&settings)?;
    let metrics = Metrics::default();
    let store: Arc<dyn BoardStore> = Arc::new(MeteredStore::new(
        open_store(&settings).await?,
        metrics.clone(),
    ));
    // The session key first (`serve` may create it): it also signs the
    // registry's grant records and the web board's cookies.
    session_key(&settings, policy)?;
    let session_keys = session_keys(&settings, SecretPolicy::MustExist)?;
    let registry = open_registry_with(
        &settings,
        &store,
        Some(&metrics),
        Some(corkboard_grants::LEDGER_CACHE_TTL),
        Some(session_keys.clone()),
    )
    .await?;
    let admin = admin_verifier(&settings, policy)?;
    let web = corkboard_server::web::WebState::from_settings(&settings)?;
    let mcp = mcp_settings(&settings, session_keys.clone())?;
    let session_ends = open_session_ends(&settings)?;
    // The studio endpoint meters runs like their gateways do.
    let limit = RateLimit {
        per_second: settings.rate_limit_per_second,
        burst: settings.rate_limit_burst,
    };
    let rate_limiter = rate_limiter(&settings, limit).map_err(|e| StartError::Setting {
        key: "rate_limit_per_second",
        reason: e.to_string(),
    })?;
    let upstream_key = upstream_key(&settings, policy)?;
    let ledger: Arc<dyn GrantLedger> = store.clone();
    let upstream_calls = upstream_calls(&settings, store.clone())?;
    let budgets = budget_counter(&settings, ledger)?;
    let run_budgets = run_budgets(&settings)?;
    let egress = egress_policy(&settings)?;
    let webhook_hosts = HostPolicy::new(&egress, &settings.webhook_allowed_hosts).map_err(|e| {
        StartError::Setting {
            key: "webhook_allowed_hosts",
            reason: e.to_string(),
        }
    })?;
    let state = AppState::new(AppParts {
        settings,
        metrics,
        store,
        registry,
        admin,
        session_key: session_keys,
        web,
        session_ends,
        mcp,
        rate_limiter: Some(rate_limiter),
        budgets: Some(budgets),
        run_budgets,
        upstream_calls,
    })
    .with_egress(egress, webhook_hosts);
    Ok(match upstream_key {
        Some(key) => state.with_upstream_key(key),
        None => state,
    })
}

/// Where connections made for tenants may go: the default rules opened by
/// `egress_allow`.
pub fn egress_policy(settings: &Settings) -> Result<Arc<EgressPolicy>, StartError> {
    EgressPolicy::from_entries(&settings.egress_allow)
        .map(Arc::new)
        .map_err(|e| StartError::Setting {
            key: "egress_allow",
            reason: e.to_string(),
        })
}

/// Each client's share of a listener's connections
/// (`max_connections_per_source`), and the trusted proxies whose forwarded
/// header names the client (`trusted_proxies`, `forwarded_header`).
pub fn connection_sources(settings: &Settings) -> Result<SourceLimits, StartError> {
    let proxies = settings
        .trusted_proxies
        .iter()
        .map(|entry| {
            Cidr::parse(entry).map_err(|why| StartError::Setting {
                key: "trusted_proxies",
                reason: format!("`{entry}`: {why}"),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let limits = SourceLimits::new(settings.max_connections_per_source);
    if proxies.is_empty() {
        return Ok(limits);
    }
    let header = match settings.forwarded_header {
        ForwardedHeader::XForwardedFor => conn::ForwardedHeader::XForwardedFor,
        ForwardedHeader::Forwarded => conn::ForwardedHeader::Forwarded,
    };
    Ok(limits.trusting(move |ip| proxies.iter().any(|net| net.contains(ip)), header))
}

/// The upstream bounds `settings` set (answer size, listing and call
/// deadlines, the relay tables' totals and shares) and the egress policy;
/// the rest are the crate's defaults.
pub fn upstream_options(settings: &Settings, egress: Arc<EgressPolicy>) -> UpstreamOptions {
    UpstreamOptions {
        egress,
        max_answer_bytes: settings.upstream_max_answer_bytes,
        list_timeout: Duration::from_millis(settings.upstream_list_timeout_ms),
        tools_ttl: Duration::from_millis(settings.upstream_tools_ttl_ms),
        call_timeout: Duration::from_millis(settings.upstream_call_timeout_ms),
        shares: RelayShares::of(
            settings.upstream_held_calls_max,
            settings.upstream_pending_requests_max,
            settings.upstream_sessions_max,
            settings.upstream_tenant_share_pct,
            settings.upstream_run_share_pct,
        ),
        ..UpstreamOptions::default()
    }
}

/// The operator's default budgets of runs' grants (`run_budgets`).
pub fn run_budgets(settings: &Settings) -> Result<Budgets, StartError> {
    Budgets::parse_csv(&settings.run_budgets).map_err(|e| StartError::Setting {
        key: "run_budgets",
        reason: e.reason,
    })
}

/// Where per-run write budgets are counted: in Redis when the registry is
/// (one script per reservation, shared by every replica), else in the
/// store's ledger (one conditional write).
pub fn budget_counter(
    settings: &Settings,
    ledger: Arc<dyn GrantLedger>,
) -> Result<Arc<dyn BudgetCounter>, StartError> {
    match settings.registry {
        RegistryKind::Memory => Ok(Arc::new(LedgerBudgets::new(ledger))),
        RegistryKind::Redis => {
            let urls: Vec<String> = settings.redis_urls();
            let counter = RedisBudgets::new(
                &urls,
                &settings.redis_key_prefix,
                Duration::from_millis(settings.store_timeout_ms),
                Duration::from_secs(settings.grant_max_lifetime_secs),
            )
            .map_err(|e| StartError::Setting {
                key: "redis_url",
                reason: e.to_string(),
            })?;
            Ok(Arc::new(counter))
        }
    }
}

/// Where the relay records sealed states and relayed answers as used (so
/// each is acted on once), chosen like the budget counter: in Redis when
/// the registry is (one `SET NX PX`, shared by every replica), else in the
/// store's ledger (one conditional write, shared by every process on it).
pub fn used_once(
    settings: &Settings,
    ledger: Arc<dyn GrantLedger>,
) -> Result<Arc<dyn UsedOnce>, StartError> {
    match settings.registry {
        RegistryKind::Memory => Ok(Arc::new(LedgerUsedOnce::new(ledger))),
        RegistryKind::Redis => {
            let record = RedisUsedOnce::new(
                &settings.redis_urls(),
                &settings.redis_key_prefix,
                Duration::from_millis(settings.store_timeout_ms),
            )
            .map_err(|e| StartError::Setting {
                key: "redis_url",
                reason: e.to_string(),
            })?;
            Ok(Arc::new(record))
        }
    }
}

/// Where grants whose runs called upstream tools are marked (the run
/// gateways) and read (every board endpoint, for the level of a run's
/// writes): the used-once record `settings` choose, marks kept for the
/// grants' maximum lifetime.
pub fn upstream_calls(
    settings: &Settings,
    ledger: Arc<dyn GrantLedger>,
) -> Result<Arc<UpstreamCalls>, StartError> {
    Ok(Arc::new(UpstreamCalls::new(
        used_once(settings, ledger)?,
        Duration::from_secs(settings.grant_max_lifetime_secs),
    )))
}

/// A grant service as `settings` describe it (limits, default budgets, the
/// budget counter), for processes that issue grants without a control
/// plane (`corkboard run` in-process).
pub fn grant_service(
    settings: &Settings,
    ledger: Arc<dyn GrantLedger>,
    registry: Arc<dyn TokenRegistry>,
) -> Result<GrantService, StartError> {
    Ok(GrantService::new(ledger.clone(), registry)
        .with_live_grants_max(settings.live_grants_per_tenant_max)
        .with_max_lifetime(Duration::from_secs(settings.grant_max_lifetime_secs))
        .with_run_budgets(run_budgets(settings)?)
        .with_budgets(budget_counter(settings, ledger)?))
}

/// Loads (or, for `serve`, creates) the key upstream credentials are
/// sealed with. A server or runner without the file serves no upstreams
/// (their API answers 503 saying so); an unreadable or too-open file is
/// refused at start-up like the other secrets.
pub fn upstream_key(
    settings: &Settings,
    policy: SecretPolicy,
) -> Result<Option<Arc<CredentialKey>>, StartError> {
    let path = settings.upstream_key_path();
    if policy == SecretPolicy::CreateIfMissing {
        ensure_secret(&path)?;
    } else if !path.exists() {
        tracing::info!(path = %path.display(), "no upstream key file: upstream MCP servers are off");
        return Ok(None);
    }
    let secret = read_secret("upstream_key_file", &path)?;
    let previous = settings
        .upstream_previous_key_files
        .iter()
        .map(|path| read_secret("upstream_previous_key_files", path))
        .collect::<Result<Vec<_>, _>>()?;
    let key = CredentialKey::from_secret(&secret)
        .and_then(|key| key.with_previous(previous.iter().map(Vec::as_slice)))
        .map_err(|e| StartError::Setting {
            key: "upstream_key_file",
            reason: e.to_string(),
        })?;
    Ok(Some(Arc::new(key)))
}

/// Starts the runner over `state`'s store, grants, audit sink, metrics and
/// ended sessions, with the gateway configuration and rate limiter
/// `state.settings` call for. Binds the shared gateway port first (shared
/// mode), so that port 0 resolves before any URL is handed out. Must run
/// inside an actix `System`.
pub async fn start_runner(state: &AppState) -> Result<Runner, GatewayError> {
    let settings = &state.settings;
    // With the previous keys: sessions, relayed ids and sealed states made
    // before a rotation stay good.
    let session_key = state.mcp.settings().session_key.clone();
    let (shared_listener, bound) = match settings.gateway_mode {
        GatewayMode::Shared => {
            let addr = settings.gateway_listen;
            // With a backlog matching the connection cap.
            let listener = corkboard_telemetry::conn::bind(addr, settings.max_connections)
                .map_err(|source| GatewayError::Bind { addr, source })?;
            let bound = listener
                .local_addr()
                .map_err(|source| GatewayError::Bind { addr, source })?;
            (Some(listener), Some(bound))
        }
        GatewayMode::Dedicated => (None, None),
    };
    let mut config = gateway_config(settings, session_key.clone(), bound);
    config.sources = connection_sources(settings).map_err(|e| GatewayError::Config {
        key: "trusted_proxies",
        reason: e.to_string(),
    })?;
    let limiter = rate_limiter(settings, config.rate_limit)?;
    let store: Arc<dyn corkboard_board::IssueStore> = state.store.clone();
    let upstreams = match &state.upstream_key {
        Some(key) => {
            let upstream_store: Arc<dyn corkboard_board::UpstreamStore> = state.store.clone();
            let upstreams = Upstreams::new(
                upstream_store,
                key.clone(),
                state.tool_audit.clone(),
                upstream_options(settings, state.egress.clone()),
            )
            .map_err(|e| GatewayError::Config {
                key: "upstream_key_file",
                reason: e.to_string(),
            })?
            // Relayed ids are sealed under the session key, which every
            // replica shares: any replica takes an agent's answer, once.
            .with_relay(RelaySealer::new(session_key.clone(), seal::DEFAULT_TTL))
            // Newly pending upstream tools reach the live board (webhooks
            // get them from the store).
            .with_tool_changes(corkboard_server::upstreams::live_tool_changes(
                state.web.events(),
            ))
            // Credentials in upstream arguments: as the tenant's settings
            // say (refused, or redacted).
            .with_secret_policies(Arc::new(corkboard_tools::SecretPolicies::new(
                state.grants.ledger().clone(),
                Duration::from_millis(settings.store_timeout_ms),
            )))
            .with_used_once(used_once(settings, state.store.clone()).map_err(|e| {
                GatewayError::Config {
                    key: "redis_url",
                    reason: e.to_string(),
                }
            })?)
            // Marks a grant before its run's first upstream call: the
            // level of its board writes (the same record the tools read).
            .with_upstream_calls(state.upstream_calls.clone());
            let upstreams = Arc::new(upstreams);
            // Calls held for a person's approval take places in the
            // relay's held-call table, under its shares.
            state.approvals.hold_in(upstreams.clone());
            Some(upstreams)
        }
        None => None,
    };
    Runner::start(
        config,
        RunnerParts {
            store,
            grants: state.grants.clone(),
            tool_audit: state.tool_audit.clone(),
            metrics: state.metrics.clone(),
            session_ends: state.session_ends.clone(),
            limiter,
            shared_listener,
            upstreams,
            approvals: Some(state.approvals.clone()),
            upstream_calls: Some(state.upstream_calls.clone()),
        },
    )
    .await
}

/// The gateway configuration `settings` describe. `shared_addr` is the
/// bound shared port (port 0 resolved), for the default base URL.
pub fn gateway_config(
    settings: &Settings,
    session_key: SessionKey,
    shared_addr: Option<SocketAddr>,
) -> GatewayConfig {
    let mut config = match settings.gateway_mode {
        GatewayMode::Dedicated => GatewayConfig::dedicated(
            settings.gateway_bind,
            settings.gateway_advertise.clone(),
            session_key,
        ),
        GatewayMode::Shared => GatewayConfig::shared(
            shared_addr.unwrap_or(settings.gateway_listen),
            settings.gateway_advertise.clone(),
            settings.gateway_public_url.clone(),
            session_key,
        ),
    };
    config.rate_limit = RateLimit {
        per_second: settings.rate_limit_per_second,
        burst: settings.rate_limit_burst,
    };
    config.max_body_bytes = settings.max_body_bytes;
    config.body_timeout = Duration::from_millis(settings.body_timeout_ms);
    config.max_batch_len = settings.max_batch_len;
    config.max_batch_response_bytes = settings.max_batch_response_bytes;
    config.store_timeout = Duration::from_millis(settings.store_timeout_ms);
    config.max_result_bytes = settings.max_result_bytes;
    // Drains derived from the grace period, when the process was told it.
    let plan = crate::signals::ShutdownPlan::of(settings);
    config.drain_timeout = plan.drain;
    config.cancel_grace = plan.cancel_grace;
    config.port_shutdown = plan.port;
    config.claim_lease = Duration::from_millis(settings.claim_lease_ms);
    config.allowed_hosts = settings.allowed_hosts.clone();
    config.allowed_origins = settings.allowed_origins.clone();
    config.live_runs_per_tenant_max = settings.live_runs_per_tenant_max;
    config.max_connections = settings.max_connections;
    config.max_connections_per_run = settings.max_connections_per_run;
    config.header_timeout = Duration::from_millis(settings.header_timeout_ms);
    config.keep_alive = Duration::from_millis(settings.keep_alive_ms);
    config
}

/// The per-run rate limiter `settings` call for: in Redis when the registry
/// is (runner pods share the budget), in memory otherwise.
pub fn rate_limiter(
    settings: &Settings,
    limit: RateLimit,
) -> Result<Arc<dyn RateLimiter>, GatewayError> {
    match settings.registry {
        RegistryKind::Memory => Ok(Arc::new(LocalRateLimiter::new(limit))),
        RegistryKind::Redis => {
            let urls: Vec<String> = settings.redis_urls();
            Ok(Arc::new(RedisRateLimiter::new(
                limit,
                &urls,
                &settings.redis_key_prefix,
                LIMITER_TIMEOUT,
            )?))
        }
    }
}

/// The bounds on expensive reads (searches, filtered lists) the settings
/// give every store: a search's deadline is the smaller of its own and the
/// store calls' (past which the tool answers "board unavailable" anyway).
fn expensive_reads(settings: &Settings) -> ExpensiveReads {
    ExpensiveReads::new(
        Duration::from_millis(settings.search_timeout_ms.min(settings.store_timeout_ms)),
        settings.searches_per_tenant_max,
    )
    .with_time_share(settings.search_ms_per_second_per_tenant)
}

/// The SQLite store's options the settings give.
fn sqlite_options(settings: &Settings) -> corkboard_store_sqlite::SqliteOptions {
    corkboard_store_sqlite::SqliteOptions {
        expensive: expensive_reads(settings),
        open_titles: corkboard_store_sqlite::OpenTitleBounds {
            per_tenant: settings.open_titles_per_tenant_max,
            total_bytes: settings.open_titles_memory_bytes,
        },
        ..Default::default()
    }
}

/// Opens the configured board store.
pub async fn open_store(settings: &Settings) -> Result<Arc<dyn BoardStore>, StartError> {
    match settings.store {
        StoreKind::Sqlite => {
            let store = corkboard_store_sqlite::SqliteStore::open_with(
                &settings.data_dir.join(corkboard_store_sqlite::FILE_NAME),
                sqlite_options(settings),
            )
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
                corkboard_store_mongo::MongoOptions {
                    expensive: expensive_reads(settings),
                    tls_ca_file: settings.mongodb_tls_ca_file.clone(),
                    ..Default::default()
                },
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
    install_redis_tls(settings)?;
    open_registry_with(settings, store, None, None, None).await
}

/// The configured token registry: for a long-running server (`metrics`
/// and `ledger_cache` given) the embedded registry's short cache of live
/// grants ([`corkboard_grants::LEDGER_CACHE_TTL`]) and the Redis
/// registry's counters exported; the Redis registry's grant records signed
/// with `record_keys`, the session keys (read from the settings when not
/// given).
async fn open_registry_with(
    settings: &Settings,
    store: &Arc<dyn BoardStore>,
    metrics: Option<&Metrics>,
    ledger_cache: Option<std::time::Duration>,
    record_keys: Option<SessionKey>,
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
            // Grant records are signed with the replicas' session key (and
            // verified under its previous ones), which Redis never sees.
            let record_key = match record_keys {
                Some(keys) => keys,
                None => session_keys(settings, SecretPolicy::MustExist)?,
            };
            let mut config = RedisRegistryConfig::new(urls).with_record_key(record_key);
            config.key_prefix = settings.redis_key_prefix.clone();
            // Not `connect`: a Redis that is down at start-up must not stop
            // the process; requests fail closed until it answers (/readyz says so).
            let ledger: Arc<dyn corkboard_board::GrantLedger> = store.clone();
            // The ledger's revocations are replayed into a Redis that may
            // have lost some (restored, failed over) before it is trusted.
            let registry = RedisRegistry::new(config)
                .map_err(|e| StartError::Registry(e.to_string()))?
                .with_ledger(ledger.clone());
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
            check_secret_mode("jwt_secret_file", &path)?;
            VerifyingKey::hs256_secret_file(&path).map_err(jwt("jwt_secret_file"))?
        }
        JwtAlgorithm::RS256 => VerifyingKey::rs256_public_pem_file(public_key_path(settings)?)
            .map_err(jwt("jwt_public_key_file"))?,
        JwtAlgorithm::EdDSA => VerifyingKey::eddsa_public_pem_file(public_key_path(settings)?)
            .map_err(jwt("jwt_public_key_file"))?,
    };
    let mut config = AdminVerifierConfig::new(key);
    for path in &settings.jwt_previous_key_files {
        check_secret_mode("jwt_previous_key_files", path)?;
        let previous = match settings.jwt_algorithm {
            JwtAlgorithm::HS256 => VerifyingKey::hs256_secret_file(path),
            JwtAlgorithm::RS256 => VerifyingKey::rs256_public_pem_file(path),
            JwtAlgorithm::EdDSA => VerifyingKey::eddsa_public_pem_file(path),
        };
        config
            .previous
            .push(previous.map_err(jwt("jwt_previous_key_files"))?);
    }
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
    // A private key is a secret like the HS256 one: refused if others may read it.
    let private_key = || -> Result<&std::path::Path, StartError> {
        let path = private()?;
        check_secret_mode("jwt_private_key_file", path)?;
        Ok(path)
    };
    let key = match settings.jwt_algorithm {
        JwtAlgorithm::HS256 => {
            let path = settings.jwt_secret_path();
            ensure_secret(&path)?;
            check_secret_mode("jwt_secret_file", &path)?;
            SigningKey::hs256_secret_file(&path).map_err(jwt("jwt_secret_file"))?
        }
        JwtAlgorithm::RS256 => SigningKey::rs256_private_pem_file(private_key()?)
            .map_err(jwt("jwt_private_key_file"))?,
        JwtAlgorithm::EdDSA => SigningKey::eddsa_private_pem_file(private_key()?)
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

/// The session key with the keys it replaced
/// (`session_previous_key_files`): the newest signs, every one verifies.
pub fn session_keys(settings: &Settings, policy: SecretPolicy) -> Result<SessionKey, StartError> {
    let current = session_key(settings, policy)?;
    let previous = settings
        .session_previous_key_files
        .iter()
        .map(|path| read_secret("session_previous_key_files", path))
        .collect::<Result<Vec<_>, _>>()?;
    SessionKey::new(current)
        .and_then(|key| key.with_previous(previous))
        .map_err(|e| StartError::Setting {
            key: "session_key_file",
            reason: e.to_string(),
        })
}

/// Reads the Redis TLS files (`redis_tls_*`) and installs them for every
/// Redis client of the process (once; later calls find them installed).
pub fn install_redis_tls(settings: &Settings) -> Result<(), StartError> {
    if settings.redis_tls_ca_file.is_none() && settings.redis_tls_cert_file.is_none() {
        return Ok(());
    }
    let read = |key: &'static str, path: &std::path::Path| {
        std::fs::read(path).map_err(|e| StartError::Setting {
            key,
            reason: format!("cannot read {}: {e}", path.display()),
        })
    };
    let ca_pem = match &settings.redis_tls_ca_file {
        Some(path) => Some(read("redis_tls_ca_file", path)?),
        None => None,
    };
    let client_pem = match (&settings.redis_tls_cert_file, &settings.redis_tls_key_file) {
        (Some(cert), Some(key)) => {
            // The private key is a secret file like the others.
            check_secret_mode("redis_tls_key_file", key)?;
            Some((
                read("redis_tls_cert_file", cert)?,
                read("redis_tls_key_file", key)?,
            ))
        }
        _ => None,
    };
    // Already installed (a second opening in the same process): the same
    // settings installed it.
    let _ = corkboard_grants::install_redis_tls(RedisTls { ca_pem, client_pem });
    Ok(())
}

/// Where ended legacy sessions are kept: in Redis when the registry is (so
/// a DELETE on one replica ends the session on all), in memory otherwise.
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
pub fn mcp_settings(settings: &Settings, key: SessionKey) -> Result<McpSettings, StartError> {
    let mut mcp = McpSettings::new(key);
    mcp.allowed_origins = settings.allowed_origins.clone();
    mcp.allowed_hosts = settings.allowed_hosts.clone();
    if let Some(host) = settings.public_url.as_deref().and_then(url_host) {
        mcp.allowed_hosts.push(host);
    }
    mcp.max_body_bytes = settings.max_body_bytes;
    mcp.body_timeout = Duration::from_millis(settings.body_timeout_ms);
    mcp.max_batch_len = settings.max_batch_len;
    mcp.max_batch_response_bytes = settings.max_batch_response_bytes;
    Ok(mcp)
}

/// `host[:port]` of an http(s) URL.
fn url_host(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let host = rest.split(['/', '?', '#']).next()?;
    (!host.is_empty()).then(|| host.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `corkboard-config` sits below the crates whose defaults it repeats;
    /// the composition root sees both, so it checks the copies.
    #[test]
    fn run_budgets_are_read_from_the_settings_and_a_bad_one_names_its_key() {
        let mut settings = Settings::default();
        assert!(run_budgets(&settings).unwrap().is_empty());
        settings.run_budgets = "create_issue=3, add_comment=10".into();
        assert_eq!(
            run_budgets(&settings).unwrap().to_csv(),
            "create_issue=3,add_comment=10"
        );
        settings.run_budgets = "delete_issue=1".into();
        let err = run_budgets(&settings).unwrap_err().to_string();
        assert!(err.contains("run_budgets"), "{err}");
        assert!(err.contains("delete_issue"), "{err}");
    }

    #[test]
    fn trusted_proxies_are_addresses_or_cidrs_and_a_bad_one_names_its_key() {
        let ip = |text: &str| text.parse::<std::net::IpAddr>().unwrap();
        let mut settings = Settings::default();
        let limits = connection_sources(&settings).unwrap();
        assert!(!limits.is_trusted_proxy(ip("127.0.0.1")), "none by default");
        settings.trusted_proxies = vec!["10.0.0.0/8".into(), "[::1]".into()];
        settings.max_connections_per_source = 3;
        let limits = connection_sources(&settings).unwrap();
        assert_eq!(limits.per_source(), 3);
        assert!(limits.is_trusted_proxy(ip("10.2.3.4")));
        assert!(
            limits.is_trusted_proxy(ip("::ffff:10.2.3.4")),
            "dual-stack view"
        );
        assert!(limits.is_trusted_proxy(ip("::1")));
        assert!(!limits.is_trusted_proxy(ip("11.0.0.1")));
        assert!(
            !limits.is_trusted_proxy(ip("2002:a00:1::1")),
            "6to4 of 10.0.0.1"
        );
        settings.trusted_proxies = vec!["proxy.internal".into()];
        let err = connection_sources(&settings).unwrap_err().to_string();
        assert!(err.contains("trusted_proxies"), "{err}");
        assert!(err.contains("proxy.internal"), "{err}");
    }

    #[test]
    fn the_open_titles_settings_bound_the_sqlite_stores_index() {
        let settings = Settings {
            open_titles_per_tenant_max: 7,
            open_titles_memory_bytes: 1_234,
            searches_per_tenant_max: 3,
            ..Settings::default()
        };
        let options = sqlite_options(&settings);
        assert_eq!(
            options.open_titles,
            corkboard_store_sqlite::OpenTitleBounds {
                per_tenant: 7,
                total_bytes: 1_234,
            }
        );
        assert_eq!(options.expensive.per_tenant(), 3);
    }

    #[test]
    fn configuration_defaults_are_the_libraries_defaults() {
        let settings = Settings::default();
        assert_eq!(
            settings.max_body_bytes,
            McpSettings::DEFAULT_MAX_BODY_BYTES,
            "max_body_bytes"
        );
        assert_eq!(
            Duration::from_millis(settings.store_timeout_ms),
            corkboard_tools::DEFAULT_STORE_TIMEOUT,
            "store_timeout_ms"
        );
        assert_eq!(
            settings.max_result_bytes,
            corkboard_tools::DEFAULT_RESULT_BUDGET,
            "max_result_bytes"
        );
        let expensive = ExpensiveReads::default();
        assert_eq!(
            Duration::from_millis(settings.search_timeout_ms),
            expensive.timeout(),
            "search_timeout_ms"
        );
        assert_eq!(
            settings.searches_per_tenant_max,
            expensive.per_tenant(),
            "searches_per_tenant_max"
        );
        assert_eq!(
            settings.search_ms_per_second_per_tenant,
            expensive.ms_per_second(),
            "search_ms_per_second_per_tenant"
        );
        let open_titles = corkboard_store_sqlite::OpenTitleBounds::default();
        assert_eq!(
            settings.open_titles_per_tenant_max, open_titles.per_tenant,
            "open_titles_per_tenant_max"
        );
        assert_eq!(
            settings.open_titles_memory_bytes, open_titles.total_bytes,
            "open_titles_memory_bytes"
        );
        let at = |max_result_bytes| Settings {
            max_result_bytes,
            ..Settings::default()
        };
        let minimum = corkboard_tools::MIN_RESULT_BUDGET;
        assert!(at(minimum - 1).check().is_err(), "the tools' minimum");
        assert!(at(minimum).check().is_ok());
        assert_eq!(
            Duration::from_millis(settings.body_timeout_ms),
            McpSettings::DEFAULT_BODY_TIMEOUT,
            "body_timeout_ms"
        );
        assert_eq!(
            settings.max_batch_len,
            McpSettings::DEFAULT_MAX_BATCH_LEN,
            "max_batch_len"
        );
        assert_eq!(
            settings.max_batch_response_bytes,
            McpSettings::DEFAULT_MAX_BATCH_RESPONSE_BYTES,
            "max_batch_response_bytes"
        );
        assert_eq!(
            settings.live_runs_per_tenant_max,
            GatewayConfig::DEFAULT_LIVE_RUNS_PER_TENANT_MAX,
            "live_runs_per_tenant_max"
        );
        assert_eq!(
            settings.live_grants_per_tenant_max,
            corkboard_grants::GrantService::DEFAULT_LIVE_GRANTS_MAX,
            "live_grants_per_tenant_max"
        );
        assert_eq!(
            settings.max_connections,
            conn::DEFAULT_MAX_CONNECTIONS,
            "max_connections"
        );
        assert_eq!(
            settings.max_connections_per_run,
            conn::DEFAULT_MAX_CONNECTIONS_PER_RUN,
            "max_connections_per_run"
        );
        assert_eq!(
            settings.max_connections_per_source,
            conn::DEFAULT_MAX_CONNECTIONS_PER_SOURCE,
            "max_connections_per_source"
        );
        assert_eq!(
            Duration::from_millis(settings.header_timeout_ms),
            conn::DEFAULT_HEADER_TIMEOUT,
            "header_timeout_ms"
        );
        assert_eq!(
            Duration::from_millis(settings.keep_alive_ms),
            conn::DEFAULT_KEEP_ALIVE,
            "keep_alive_ms"
        );
        assert_eq!(
            Duration::from_secs(settings.grant_max_lifetime_secs),
            corkboard_grants::DEFAULT_MAX_LIFETIME,
            "grant_max_lifetime_secs"
        );
        let upstream = UpstreamOptions::default();
        let composed = upstream_options(&settings, Arc::default());
        assert_eq!(
            composed.max_answer_bytes, upstream.max_answer_bytes,
            "upstream_max_answer_bytes"
        );
        assert_eq!(
            composed.list_timeout, upstream.list_timeout,
            "upstream_list_timeout_ms"
        );
        assert_eq!(
            composed.call_timeout, upstream.call_timeout,
            "upstream_call_timeout_ms"
        );
        assert_eq!(
            composed.tools_ttl, upstream.tools_ttl,
            "upstream_tools_ttl_ms"
        );
        assert_eq!(
            composed.shares, upstream.shares,
            "upstream_*_max, upstream_*_share_pct"
        );
    }
}
