//! Renewal through `GrantService`, over a real SQLite ledger and the
//! embedded (caching) registry: the same token keeps working past its old
//! expiry; revoked and expired grants are refused with their own errors;
//! the maximum lifetime (configured, or a tenant's shorter one) bounds
//! every renewal, refusing explicit ones and capping keep-alives; a
//! renewal by another process on the same data dir is seen within the
//! cache's lifetime.

use corkboard_board::{Capabilities, GrantLedger, GrantPolicy, RunId, TenantId, Timestamp};
use corkboard_grants::{
    GrantRequest, GrantService, LEDGER_CACHE_TTL, LedgerRegistry, RegistryError, Renewal,
};
use corkboard_store_sqlite::SqliteStore;
use std::sync::Arc;
use std::time::Duration;

struct Setup {
    _dir: tempfile::TempDir,
    /// The server process: a caching registry.
    server: GrantService,
    /// Another process on the same data dir (`corkboard grant renew --data-dir`).
    other: GrantService,
    ledger: Arc<dyn GrantLedger>,
}

fn setup(max_lifetime: Duration) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("board.sqlite3");
    let server_ledger: Arc<dyn GrantLedger> = Arc::new(SqliteStore::open(&path).unwrap());
    let other_ledger: Arc<dyn GrantLedger> = Arc::new(SqliteStore::open(&path).unwrap());
    let cached = LedgerRegistry::cached(server_ledger.clone(), LEDGER_CACHE_TTL);
    let plain = LedgerRegistry::new(other_ledger.clone());
    Setup {
        _dir: dir,
        server: GrantService::new(server_ledger.clone(), Arc::new(cached))
            .with_max_lifetime(max_lifetime),
        other: GrantService::new(other_ledger, Arc::new(plain)).with_max_lifetime(max_lifetime),
        ledger: server_ledger,
    }
}

fn request(tenant: &str, run: &str, ttl: Duration) -> GrantRequest {
    GrantRequest {
        tenant: TenantId::parse(tenant).unwrap(),
        run: RunId::parse(run).unwrap(),
        capabilities: Capabilities::all(),
        ttl,
        created_by: "test".to_owned(),
        budgets: Default::default(),
        min_integrity: None,
    }
}

const HOUR: Duration = Duration::from_secs(3600);

#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn a_renewed_token_works_past_its_old_expiry() {
    let s = setup(10 * HOUR);
    let issued = s
        .server
        .issue(request("acme", "r1", Duration::from_secs(2)))
        .await
        .unwrap();
    let hash = issued.token.hash();
    let registry = s.server.registry();
    // Cached with the old expiry.
    assert!(registry.resolve(&hash).await.is_ok());
    let renewed = s
        .server
        .renew(&issued.grant.id, Renewal::ExtendBy(HOUR))
        .await
        .unwrap();
    assert_eq!(
        renewed.grant.expires_at,
        issued.grant.expires_at.plus_millis(3_600_000)
    );
    assert_eq!(renewed.token_hash, hash.to_hex(), "same token");
    let wait = issued.grant.expires_at.as_millis() - Timestamp::now().as_millis() + 50;
    tokio::time::sleep(Duration::from_millis(wait.max(0) as u64)).await;
    assert_eq!(
        registry.resolve(&hash).await.unwrap().expires_at,
        renewed.grant.expires_at,
        "past its old expiry"
    );
}

#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn a_renewal_by_another_process_is_seen_even_where_the_old_copy_expired() {
    let s = setup(10 * HOUR);
    let issued = s
        .server
        .issue(request("acme", "r1", Duration::from_millis(1_500)))
        .await
        .unwrap();
    let hash = issued.token.hash();
    assert!(s.server.registry().resolve(&hash).await.is_ok());
    s.other
        .renew(&issued.grant.id, Renewal::ExtendBy(HOUR))
        .await
        .unwrap();
    let wait = issued.grant.expires_at.as_millis() - Timestamp::now().as_millis() + 50;
    tokio::time::sleep(Duration::from_millis(wait.max(0) as u64)).await;
    // The server's cache may still hold the old copy (now expired): the
    // ledger decides, not the stale copy.
    assert!(s.server.registry().resolve(&hash).await.is_ok());
}

#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn revoked_and_expired_grants_are_refused_with_their_own_errors() {
    let s = setup(10 * HOUR);
    let revoked = s.server.issue(request("acme", "r1", HOUR)).await.unwrap();
    s.server.revoke(&revoked.grant.id, "test").await.unwrap();
    let err = s
        .server
        .renew(&revoked.grant.id, Renewal::ExtendBy(HOUR))
        .await
        .unwrap_err();
    assert_eq!(err, RegistryError::RenewRevoked(revoked.grant.id.clone()));
    assert!(err.to_string().contains("revoked"), "{err}");

    let short = s
        .server
        .issue(request("acme", "r2", Duration::from_secs(1)))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let err = s
        .server
        .renew(&short.grant.id, Renewal::KeepAlive(HOUR))
        .await
        .unwrap_err();
    assert_eq!(err, RegistryError::RenewExpired(short.grant.id.clone()));
    assert!(matches!(
        s.server.registry().resolve(&short.token.hash()).await,
        Err(RegistryError::Expired)
    ));
}

#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn the_maximum_lifetime_bounds_renewals_and_a_tenant_may_tighten_it() {
    let s = setup(3 * HOUR);
    let issued = s.server.issue(request("acme", "r1", HOUR)).await.unwrap();
    let id = &issued.grant.id;
    let err = s
        .server
        .renew(id, Renewal::ExtendBy(3 * HOUR))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            RegistryError::LifetimeLimit {
                max_secs: 10_800,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("10800s"), "{err}");
    // A keep-alive is capped instead: at creation + 3h.
    let capped = s
        .server
        .renew(id, Renewal::KeepAlive(10 * HOUR))
        .await
        .unwrap();
    assert_eq!(
        capped.grant.expires_at,
        issued.grant.created_at.plus_millis(3 * 3_600_000)
    );
    // Earlier than the current expiry is not a renewal.
    let err = s
        .server
        .renew(id, Renewal::Until(issued.grant.expires_at))
        .await
        .unwrap_err();
    assert!(matches!(err, RegistryError::Invalid(_)), "{err:?}");

    // The tenant tightens to 2h: a 3h grant cannot even be issued now.
    let tenant = TenantId::parse("acme").unwrap();
    s.ledger
        .set_grant_policy(
            &tenant,
            &GrantPolicy {
                run_ttl_secs: Some(600),
                max_lifetime_secs: Some(7_200),
                run_budgets: Default::default(),
                secrets: Default::default(),
                approvals: Default::default(),
            },
        )
        .await
        .unwrap();
    assert_eq!(s.server.max_lifetime_for(&tenant).await.unwrap(), 2 * HOUR);
    let err = s
        .server
        .issue(request("acme", "r2", 3 * HOUR))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("7200s"), "{err}");
    // ... and its run_ttl caps what runs ask for, but not what they ask less than.
    let run_ttl = |asked| s.server.run_ttl(&tenant, asked, HOUR);
    assert_eq!(run_ttl(None).await.unwrap(), Duration::from_secs(600));
    assert_eq!(run_ttl(Some(HOUR)).await.unwrap(), Duration::from_secs(600));
    assert_eq!(
        run_ttl(Some(Duration::from_secs(60))).await.unwrap(),
        Duration::from_secs(60)
    );
    // Loosening past the operator's limit does not loosen it.
    s.ledger
        .set_grant_policy(
            &tenant,
            &GrantPolicy {
                run_ttl_secs: None,
                max_lifetime_secs: Some(100 * 3_600),
                run_budgets: Default::default(),
                secrets: Default::default(),
                approvals: Default::default(),
            },
        )
        .await
        .unwrap();
    assert_eq!(s.server.max_lifetime_for(&tenant).await.unwrap(), 3 * HOUR);
    // Another tenant is untouched by acme's settings.
    let globex = TenantId::parse("globex").unwrap();
    assert_eq!(s.server.run_ttl(&globex, None, HOUR).await.unwrap(), HOUR);
}
