//! A running Corkboard deployment for a scenario: the `corkboard` process
//! in the role the scenario needs, plus Redis and the MongoDB-protocol
//! server when asked for, all on loopback, all stopped on drop.

use crate::error::{BenchError, Result};
use crate::procs::{self, Binaries, Process};
use crate::setup::{self, Granted};
use std::path::{Path, PathBuf};

/// Which MCP endpoint a run's requests reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `/mcp` on the server (any valid grant).
    Studio,
    /// A per-run gateway on its own port (`/mcp`).
    Gateway,
    /// A per-run route on the runner's shared gateway port
    /// (`/runs/{run}/mcp`).
    Shared,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Store {
    Sqlite,
    Mongodb,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Registry {
    Memory,
    Redis,
}

named!(Endpoint { Studio => "studio", Gateway => "gateway", Shared => "shared" });
named!(Store { Sqlite => "sqlite", Mongodb => "mongodb" });
named!(Registry { Memory => "memory", Redis => "redis" });

/// What to start.
#[derive(Debug, Clone)]
pub struct DeploySpec {
    pub endpoint: Endpoint,
    pub store: Store,
    pub registry: Registry,
    /// `CORKBOARD_LOG` for the corkboard process (`None`: its default).
    pub log: Option<String>,
    /// Further configuration (`CORKBOARD_*`), applied last.
    pub env: Vec<(String, String)>,
}

/// A started deployment.
#[derive(Debug)]
pub struct Deployment {
    pub spec: DeploySpec,
    /// The process serving the MCP endpoint (and the admin API).
    pub process: Process,
    /// Base URL of the admin API.
    pub base: String,
    admin: String,
    _redis: Option<corkboard_testkit::RedisServer>,
    _mongo: Option<corkboard_testkit::MongoServer>,
    /// Data dir, secrets, logs; removed on drop.
    pub dir: tempfile::TempDir,
}

/// Rate limits, and the connections one client address may hold, high
/// enough never to trip under load (the load generator is one address):
/// the suite measures the hot path, not the limits' refusals.
const UNLIMITED: &str = "1000000000";

impl Deployment {
    pub async fn start(bins: &Binaries, spec: DeploySpec, logs: &Path) -> Result<Self> {
        Self::start_limited(bins, spec, logs, false).await
    }

    /// [`Self::start`] with the binary's own default rate limits instead of
    /// unlimited ones: for scenarios about what a tenant can do within its
    /// limits.
    pub async fn start_with_default_limits(
        bins: &Binaries,
        spec: DeploySpec,
        logs: &Path,
    ) -> Result<Self> {
        Self::start_limited(bins, spec, logs, true).await
    }

    async fn start_limited(
        bins: &Binaries,
        spec: DeploySpec,
        logs: &Path,
        default_limits: bool,
    ) -> Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("corkboard-bench-")
            .tempdir()
            .map_err(BenchError::io("create a temporary directory"))?;
        let data_dir = dir.path().join("data");
        let mut env: Vec<(String, String)> =
            vec![("CORKBOARD_DATA_DIR".into(), data_dir.display().to_string())];
        if !default_limits {
            // Load, not limits, is measured: the load generator is one
            // client address with many connections.
            env.push(("CORKBOARD_RATE_LIMIT_PER_SECOND".into(), UNLIMITED.into()));
            env.push(("CORKBOARD_RATE_LIMIT_BURST".into(), UNLIMITED.into()));
            env.push((
                "CORKBOARD_MAX_CONNECTIONS_PER_SOURCE".into(),
                UNLIMITED.into(),
            ));
        }
        if let Some(log) = &spec.log {
            env.push(("CORKBOARD_LOG".into(), log.clone()));
        }
        let embedded = spec.store == Store::Sqlite && spec.registry == Registry::Memory;
        if !embedded {
            env.extend(procs::cluster_secrets(dir.path())?);
        }
        let redis = match spec.registry {
            Registry::Redis => {
                let redis = procs::redis()?;
                env.push(("CORKBOARD_REGISTRY".into(), "redis".into()));
                env.push(("CORKBOARD_REDIS_URL".into(), redis.url()));
                Some(redis)
            }
            Registry::Memory => None,
        };
        let mongo = match spec.store {
            Store::Mongodb => {
                let mongo = procs::mongo()?;
                env.push(("CORKBOARD_STORE".into(), "mongodb".into()));
                env.push(("CORKBOARD_MONGODB_URI".into(), mongo.uri()));
                env.push(("CORKBOARD_MONGODB_DATABASE".into(), "bench".into()));
                Some(mongo)
            }
            Store::Sqlite => None,
        };
        let role = match (spec.endpoint, embedded) {
            (Endpoint::Studio, true) => "serve",
            (Endpoint::Studio, false) => "server",
            (Endpoint::Gateway | Endpoint::Shared, true) => "serve",
            (Endpoint::Gateway | Endpoint::Shared, false) => "runner",
        };
        match spec.endpoint {
            Endpoint::Studio => {}
            Endpoint::Gateway => {
                env.push(("CORKBOARD_GATEWAY_MODE".into(), "dedicated".into()));
                env.push(("CORKBOARD_GATEWAY_BIND".into(), "127.0.0.1".into()));
            }
            Endpoint::Shared => {
                env.push(("CORKBOARD_GATEWAY_MODE".into(), "shared".into()));
                env.push(("CORKBOARD_GATEWAY_LISTEN".into(), "127.0.0.1:0".into()));
            }
        }
        env.extend(spec.env.iter().cloned());
        let mut cmd = bins.corkboard();
        cmd.args([role, "--listen", "127.0.0.1:0"])
            .envs(env.iter().cloned());
        let log = logs.join(format!(
            "corkboard-{}-{}-{}.log",
            spec.endpoint, spec.store, spec.registry
        ));
        let mut process = Process::spawn(&format!("corkboard {role}"), cmd, &log)?;
        process.ready().await?;
        let admin = setup::admin_token(bins, &env, None)?;
        Ok(Self {
            base: process.url.clone(),
            process,
            admin,
            spec,
            _redis: redis,
            _mongo: mongo,
            dir,
        })
    }

    /// A run with the given capabilities, reachable through this
    /// deployment's endpoint kind.
    pub async fn grant(&self, tenant: &str, run: &str, caps: &[&str]) -> Result<Granted> {
        self.grant_with(tenant, run, caps, &serde_json::json!({}))
            .await
    }

    /// [`Self::grant`] with write budgets (`{"create_issue": N}`).
    pub async fn grant_with(
        &self,
        tenant: &str,
        run: &str,
        caps: &[&str],
        budgets: &serde_json::Value,
    ) -> Result<Granted> {
        match self.spec.endpoint {
            Endpoint::Studio => {
                setup::create_grant_with(&self.base, &self.admin, tenant, run, caps, budgets).await
            }
            Endpoint::Gateway | Endpoint::Shared => {
                setup::register_run_with(&self.base, &self.admin, tenant, run, caps, budgets).await
            }
        }
    }

    pub fn admin(&self) -> &str {
        &self.admin
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }
}
