//! The embedded registry's cache of live grants, over a real SQLite ledger
//! shared by two "processes" (two store handles on one file): revocations
//! through the caching registry take effect at once, revocations by the
//! other handle within the cache's lifetime, and a read racing a
//! revocation is never cached.

use corkboard_board::{Capabilities, GrantLedger, RunId, TenantId};
use corkboard_grants::{
    GrantRequest, GrantService, LEDGER_CACHE_TTL, LedgerRegistry, RegistryError,
};
use corkboard_store_sqlite::SqliteStore;
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Setup {
    _dir: tempfile::TempDir,
    /// The server process: a caching registry.
    server: GrantService,
    /// Another process on the same data dir (`corkboard grant revoke --data-dir`).
    other: GrantService,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("board.sqlite3");
    let server_ledger: Arc<dyn GrantLedger> = Arc::new(SqliteStore::open(&path).unwrap());
    let other_ledger: Arc<dyn GrantLedger> = Arc::new(SqliteStore::open(&path).unwrap());
    let cached = LedgerRegistry::cached(server_ledger.clone(), LEDGER_CACHE_TTL);
    let plain = LedgerRegistry::new(other_ledger.clone());
    Setup {
        _dir: dir,
        server: GrantService::new(server_ledger, Arc::new(cached)),
        other: GrantService::new(other_ledger, Arc::new(plain)),
    }
}

fn request(run: &str, ttl: Duration) -> GrantRequest {
    GrantRequest {
        tenant: TenantId::parse("acme").unwrap(),
        run: RunId::parse(run).unwrap(),
        capabilities: Capabilities::all(),
        ttl,
        created_by: "test".to_owned(),
        budgets: Default::default(),
        min_integrity: None,
    }
}

#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn a_revocation_through_this_process_is_refused_at_once() {
    let s = setup();
    let issued = s
        .server
        .issue(request("r1", Duration::from_secs(600)))
        .await
        .unwrap();
    let hash = issued.token.hash();
    let registry = s.server.registry();
    assert_eq!(registry.resolve(&hash).await.unwrap().id, issued.grant.id);
    s.server.revoke(&issued.grant.id, "test").await.unwrap();
    assert!(matches!(
        registry.resolve(&hash).await,
        Err(RegistryError::Revoked)
    ));

    let issued = s
        .server
        .issue(request("r2", Duration::from_secs(600)))
        .await
        .unwrap();
    let hash = issued.token.hash();
    registry.resolve(&hash).await.unwrap();
    s.server
        .revoke_run(&issued.grant.tenant, &issued.grant.run, "test")
        .await
        .unwrap();
    assert!(matches!(
        registry.resolve(&hash).await,
        Err(RegistryError::Revoked)
    ));
}

#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn a_revocation_by_another_process_lands_within_the_cache_lifetime() {
    let s = setup();
    let issued = s
        .server
        .issue(request("r3", Duration::from_secs(600)))
        .await
        .unwrap();
    let hash = issued.token.hash();
    let registry = s.server.registry();
    registry.resolve(&hash).await.unwrap();
    s.other
        .revoke(&issued.grant.id, "other process")
        .await
        .unwrap();
    let revoked_at = Instant::now();
    loop {
        match registry.resolve(&hash).await {
            Err(RegistryError::Revoked) => break,
            Ok(_) => {
                assert!(
                    revoked_at.elapsed() < LEDGER_CACHE_TTL + Duration::from_millis(100),
                    "still served {:?} after another process revoked it",
                    revoked_at.elapsed()
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(other) => panic!("unexpected {other:?}"),
        }
    }
    assert!(LEDGER_CACHE_TTL <= Duration::from_secs(1), "contract 6");
}

#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn an_expired_grant_is_refused_even_while_cached() {
    let s = setup();
    let registry = s.server.registry();
    let lifetime = Duration::from_millis(150);
    // The grant must expire between the read that caches it and a read
    // within the cache's lifetime. On a loaded machine an attempt may miss
    // that window (the first read after the expiry, or the second after
    // the cache's end); such an attempt proves nothing and another is made.
    let mut conclusive = 0;
    for attempt in 0..20 {
        let issued = s
            .server
            .issue(request(&format!("r4-{attempt}"), lifetime))
            .await
            .unwrap();
        let expired_by = Instant::now() + lifetime + Duration::from_millis(10);
        let hash = issued.token.hash();
        let caching = Instant::now();
        if registry.resolve(&hash).await.is_err() {
            continue;
        }
        tokio::time::sleep_until(expired_by.into()).await;
        if caching.elapsed() >= LEDGER_CACHE_TTL {
            continue;
        }
        let answer = registry.resolve(&hash).await;
        assert!(
            matches!(answer, Err(RegistryError::Expired)),
            "attempt {attempt}: {answer:?}"
        );
        conclusive += 1;
        if conclusive == 3 {
            break;
        }
    }
    assert!(
        conclusive > 0,
        "no attempt read within the cache's lifetime"
    );
}

#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn reads_racing_revocations_never_leave_a_revoked_grant_cached() {
    let s = setup();
    let registry = s.server.registry().clone();
    for round in 0..50 {
        let issued = s
            .server
            .issue(request(&format!("race-{round}"), Duration::from_secs(600)))
            .await
            .unwrap();
        let hash = issued.token.hash();
        let readers: Vec<_> = (0..4)
            .map(|_| {
                let registry = registry.clone();
                tokio::spawn(async move {
                    for _ in 0..20 {
                        let _ = registry.resolve(&hash).await;
                    }
                })
            })
            .collect();
        s.server.revoke(&issued.grant.id, "test").await.unwrap();
        for reader in readers {
            reader.await.unwrap();
        }
        // Whatever the interleaving, the revocation holds now.
        assert!(
            matches!(registry.resolve(&hash).await, Err(RegistryError::Revoked)),
            "round {round}"
        );
    }
}
