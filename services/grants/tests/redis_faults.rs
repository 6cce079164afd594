//! The Redis registry under Redis faults, against a real `redis-server`
//! and a real SQLite ledger: a revocation outlives Redis losing writes, a
//! dropped subscription stops the local cache from serving, unknown tokens
//! cost one lookup each, an unreachable Redis refuses at once, and a
//! revocation made while Redis hung converges by itself.

use corkboard_board::{Capabilities, GrantLedger, RunId, TenantId};
use corkboard_grants::{
    GrantRequest, GrantService, ReadThroughRegistry, RedisRegistry, RedisRegistryConfig,
    RegistryError, TokenRegistry,
};
use corkboard_store_sqlite::SqliteStore;
use corkboard_testkit::{RedisServer, Reply, unique_prefix};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Only keeps a broken build from hanging the run.
const DEADLINE: Duration = Duration::from_secs(60);

/// One replica: its registry, composed as `corkboard server` does (Redis
/// with the ledger's revocations, read through the ledger), and its grant
/// service.
struct Replica {
    registry: Arc<ReadThroughRegistry<RedisRegistry>>,
    service: GrantService,
}

impl Replica {
    fn redis(&self) -> &RedisRegistry {
        self.registry.shared()
    }
}

struct Setup {
    _dir: tempfile::TempDir,
    server: RedisServer,
    ledger: Arc<dyn GrantLedger>,
    a: Replica,
    b: Replica,
}

async fn replica(config: RedisRegistryConfig, ledger: &Arc<dyn GrantLedger>) -> Replica {
    let redis = RedisRegistry::connect(config)
        .await
        .expect("connect")
        .with_ledger(ledger.clone());
    let registry = Arc::new(ReadThroughRegistry::new(redis, ledger.clone()));
    let deadline = Instant::now() + DEADLINE;
    while !registry.shared().stats().subscribed {
        assert!(Instant::now() < deadline, "never subscribed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Replica {
        service: GrantService::new(ledger.clone(), registry.clone()),
        registry,
    }
}

async fn setup(case: &str) -> Setup {
    setup_with(case, |c| c).await
}

async fn setup_with(
    case: &str,
    tune: impl Fn(RedisRegistryConfig) -> RedisRegistryConfig,
) -> Setup {
    let server = tokio::task::spawn_blocking(RedisServer::start)
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ledger: Arc<dyn GrantLedger> =
        Arc::new(SqliteStore::open(&dir.path().join("board.sqlite3")).unwrap());
    let prefix = unique_prefix(case);
    let config = || tune(RedisRegistryConfig::new([server.url()]).with_key_prefix(&prefix));
    let a = replica(config(), &ledger).await;
    let b = replica(config(), &ledger).await;
    Setup {
        _dir: dir,
        server,
        ledger,
        a,
        b,
    }
}

fn request(run: &str) -> GrantRequest {
    GrantRequest {
        tenant: TenantId::parse("acme").unwrap(),
        run: RunId::parse(run).unwrap(),
        capabilities: Capabilities::all(),
        ttl: Duration::from_secs(3600),
        created_by: "test".to_owned(),
    }
}

fn refused(result: &Result<corkboard_board::Grant, RegistryError>) -> bool {
    matches!(
        result,
        Err(RegistryError::UnknownToken | RegistryError::Revoked)
    )
}

/// Resolves until Redis answers (not Unavailable) and returns that answer.
async fn once_available(
    registry: &dyn TokenRegistry,
    hash: &corkboard_grants::TokenHash,
) -> Result<corkboard_board::Grant, RegistryError> {
    let deadline = Instant::now() + DEADLINE;
    loop {
        match registry.resolve(hash).await {
            Err(RegistryError::Unavailable(_)) => {
                assert!(Instant::now() < deadline, "Redis never answered again");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            other => return other,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_revocation_outlives_redis_restarting_from_an_older_snapshot() {
    let mut s = setup("snapshot").await;
    let issued = s.a.service.issue(request("r1")).await.unwrap();
    let hash = issued.token.hash();
    for r in [&s.a, &s.b] {
        assert!(r.service.registry().resolve(&hash).await.is_ok());
    }
    assert_eq!(
        s.server.command(&["SAVE"]).unwrap(),
        Reply::Simple("OK".into())
    );
    s.a.service.revoke(&issued.grant.id, "test").await.unwrap();
    assert!(refused(&s.a.service.registry().resolve(&hash).await));
    let server = std::mem::replace(&mut s.server, RedisServer::start());
    let server = tokio::task::spawn_blocking(move || {
        let mut server = server;
        server.stop();
        server.restart();
        server
    })
    .await
    .unwrap();
    s.server = server;
    for (name, r) in [("A", &s.a), ("B", &s.b)] {
        let result = once_available(r.service.registry().as_ref(), &hash).await;
        assert!(refused(&result), "replica {name} served it: {result:?}");
        assert!(r.redis().replays() >= 1, "replica {name} never replayed");
    }
    assert!(
        s.ledger
            .grant(&issued.grant.id)
            .await
            .unwrap()
            .revoked_at
            .is_some()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_subscription_stops_the_cache_from_serving() {
    let s = setup("pubsub-kill").await;
    let issued = s.a.service.issue(request("r1")).await.unwrap();
    let hash = issued.token.hash();
    let registry = s.a.service.registry();
    assert!(registry.resolve(&hash).await.is_ok());
    assert!(registry.resolve(&hash).await.is_ok());
    assert!(s.a.redis().stats().cache_hits >= 1, "the grant is cached");
    // Both replicas' subscriptions go; B revokes meanwhile, so A never
    // hears of it through pub/sub.
    let killed = s
        .server
        .command(&["CLIENT", "KILL", "TYPE", "pubsub"])
        .unwrap();
    assert!(matches!(killed, Reply::Integer(n) if n >= 2), "{killed:?}");
    s.b.service.revoke(&issued.grant.id, "test").await.unwrap();
    let result = registry.resolve(&hash).await;
    assert!(refused(&result), "served from the cache: {result:?}");
}
