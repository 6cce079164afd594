//! Test fixtures: an [`AppState`] composed from parts the way the binary
//! composes the embedded defaults (SQLite in the data dir, the in-process
//! registry over its ledger, HS256 admin JWTs, in-memory session ends),
//! without depending on the binary.

use crate::metered::MeteredStore;
use crate::state::{AppParts, AppState};
use crate::web::WebState;
use corkboard_board::{BoardStore, GrantLedger};
use corkboard_config::{Settings, ensure_secret, read_secret};
use corkboard_grants::{
    AdminMinter, AdminVerifier, AdminVerifierConfig, LedgerRegistry, LedgerUsedOnce, SigningKey,
    UpstreamCalls, VerifyingKey,
};
use corkboard_mcp::{McpSettings, MemorySessionEnds, SessionKey};
use corkboard_telemetry::Metrics;
use std::sync::Arc;

impl AppState {
    /// The embedded-default state over `settings.data_dir`, creating its
    /// secrets.
    pub(crate) fn for_tests(settings: Settings) -> AppState {
        let metrics = Metrics::default();
        let sqlite = corkboard_store_sqlite::SqliteStore::open_in_dir(&settings.data_dir).unwrap();
        let store: Arc<dyn BoardStore> =
            Arc::new(MeteredStore::new(Arc::new(sqlite), metrics.clone()));
        let ledger: Arc<dyn GrantLedger> = store.clone();
        let upstream_calls = Arc::new(UpstreamCalls::new(
            Arc::new(LedgerUsedOnce::new(ledger.clone())),
            std::time::Duration::from_secs(settings.grant_max_lifetime_secs),
        ));
        let registry = Arc::new(LedgerRegistry::cached(
            ledger,
            corkboard_grants::LEDGER_CACHE_TTL,
        ));
        let jwt_secret = settings.jwt_secret_path();
        ensure_secret(&jwt_secret).unwrap();
        let mut config =
            AdminVerifierConfig::new(VerifyingKey::hs256_secret_file(&jwt_secret).unwrap());
        config.issuer = settings.jwt_issuer.clone();
        config.audience = settings.jwt_audience.clone();
        let admin = AdminVerifier::new(config).unwrap();
        let key_path = settings.session_key_path();
        ensure_secret(&key_path).unwrap();
        let session_key = read_secret("session_key_file", &key_path).unwrap();
        let session_key = SessionKey::new(session_key).unwrap();
        let mut mcp = McpSettings::new(session_key.clone());
        mcp.allowed_origins = settings.allowed_origins.clone();
        mcp.allowed_hosts = settings.allowed_hosts.clone();
        mcp.max_body_bytes = settings.max_body_bytes;
        let web = WebState::from_settings(&settings).unwrap();
        AppState::new(AppParts {
            settings,
            metrics,
            store,
            registry,
            admin,
            session_key,
            web,
            session_ends: Arc::new(MemorySessionEnds::default()),
            mcp,
            budgets: None,
            run_budgets: Default::default(),
            rate_limiter: None,
            upstream_calls,
        })
    }

    /// A minter for admin JWTs this state's verifier accepts.
    pub(crate) fn test_minter(&self) -> AdminMinter {
        let key = SigningKey::hs256_secret_file(&self.settings.jwt_secret_path()).unwrap();
        AdminMinter::with_issuer_audience(
            key,
            self.settings.jwt_issuer.clone(),
            self.settings.jwt_audience.clone(),
        )
        .unwrap()
    }
}
