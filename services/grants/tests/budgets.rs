//! The budget counters against their real backends: two `RedisBudgets`
//! (two replicas) on one real Redis, and `LedgerBudgets` over a real
//! SQLite ledger shared by two processes' stores. Of racing reservations
//! exactly the limit take; releases give one back; `status` says limit,
//! used and remaining; the tenant's defaults cap a run's ask.

use corkboard_board::{
    BudgetKind, BudgetStatus, Budgets, Capabilities, Grant, GrantId, GrantLedger, GrantPolicy,
    RunId, TenantId, Timestamp,
};
use corkboard_grants::{
    BudgetCounter, GrantService, LedgerBudgets, MemoryRegistry, RedisBudgets, Reservation,
};
use corkboard_store_sqlite::SqliteStore;
use std::sync::Arc;
use std::time::Duration;

fn grant(budgets: &str) -> Grant {
    let now = Timestamp::now();
    Grant {
        id: GrantId::generate(),
        tenant: TenantId::parse("acme").unwrap(),
        run: RunId::parse("run-1").unwrap(),
        capabilities: Capabilities::all(),
        created_at: now,
        expires_at: now.plus_millis(3_600_000),
        created_by: "test".into(),
        budgets: Budgets::parse_csv(budgets).unwrap(),
        min_integrity: None,
    }
}

/// Twenty reservations at once, alternating over `counters`: how many took.
async fn race(counters: &[Arc<dyn BudgetCounter>], grant: &Grant) -> usize {
    let tasks: Vec<_> = (0..20)
        .map(|i| {
            let (counter, grant) = (counters[i % counters.len()].clone(), grant.clone());
            tokio::spawn(async move {
                counter
                    .reserve(&grant, BudgetKind::CreateIssue)
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut taken = 0;
    for task in tasks {
        match task.await.unwrap() {
            Reservation::Taken => taken += 1,
            Reservation::Exhausted { limit } => assert_eq!(limit, 5),
        }
    }
    taken
}

async fn check(counters: &[Arc<dyn BudgetCounter>]) {
    let g = grant("create_issue=5,add_comment=1");
    assert_eq!(race(counters, &g).await, 5, "exactly the limit takes");
    let status = counters[0].status(&g).await.unwrap();
    assert_eq!(status[&BudgetKind::CreateIssue], BudgetStatus::new(5, 5));
    assert_eq!(status[&BudgetKind::AddComment], BudgetStatus::new(1, 0));
    // A release on one replica makes room for exactly one on the other.
    counters[0]
        .release(&g, BudgetKind::CreateIssue)
        .await
        .unwrap();
    let other = counters.last().unwrap();
    assert_eq!(
        other.reserve(&g, BudgetKind::CreateIssue).await.unwrap(),
        Reservation::Taken
    );
    assert_eq!(
        other.reserve(&g, BudgetKind::CreateIssue).await.unwrap(),
        Reservation::Exhausted { limit: 5 }
    );
    // A kind without a budget is not counted at all.
    for _ in 0..10 {
        assert_eq!(
            other.reserve(&g, BudgetKind::UpdateIssue).await.unwrap(),
            Reservation::Taken
        );
    }
    assert!(
        !other
            .status(&g)
            .await
            .unwrap()
            .contains_key(&BudgetKind::UpdateIssue)
    );
    // Never below zero.
    let fresh = grant("update_issue=1");
    other
        .release(&fresh, BudgetKind::UpdateIssue)
        .await
        .unwrap();
    assert_eq!(
        other.status(&fresh).await.unwrap()[&BudgetKind::UpdateIssue],
        BudgetStatus::new(1, 0)
    );
}

#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn redis_budgets_are_shared_by_replicas_and_expire_with_the_grant() {
    let redis = corkboard_testkit::RedisServer::start();
    let prefix = corkboard_testkit::unique_prefix("budgets");
    let replica = || -> Arc<dyn BudgetCounter> {
        Arc::new(
            RedisBudgets::new(
                &[redis.url()],
                &prefix,
                Duration::from_secs(1),
                Duration::from_secs(86_400),
            )
            .unwrap(),
        )
    };
    check(&[replica(), replica()]).await;
    // The counter's key expires after the grant's longest possible life.
    let g = grant("create_issue=1");
    replica()
        .reserve(&g, BudgetKind::CreateIssue)
        .await
        .unwrap();
    let key = format!("{prefix}budget:{}:create_issue", g.id);
    let corkboard_testkit::Reply::Integer(ttl) = redis.command(&["PTTL", &key]).unwrap() else {
        panic!("PTTL answers an integer");
    };
    assert!(
        ttl > 86_000_000 && ttl <= 86_400_000 + 3_600_000,
        "created_at + max lifetime + slack: {ttl}"
    );
}

#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn a_redis_counter_that_cannot_answer_refuses_instead_of_letting_writes_through() {
    let mut redis = corkboard_testkit::RedisServer::start();
    let counter = RedisBudgets::new(
        &[redis.url()],
        "budgets-down:",
        Duration::from_millis(300),
        Duration::from_secs(3600),
    )
    .unwrap();
    redis.stop();
    let err = counter
        .reserve(&grant("create_issue=3"), BudgetKind::CreateIssue)
        .await
        .unwrap_err();
    assert!(
        err.to_string().starts_with("budget counter unavailable"),
        "{err}"
    );
}

#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn ledger_budgets_are_shared_by_processes_on_one_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("board.sqlite3");
    let a: Arc<dyn GrantLedger> = Arc::new(SqliteStore::open(&path).unwrap());
    let b: Arc<dyn GrantLedger> = Arc::new(SqliteStore::open(&path).unwrap());
    let counters: Vec<Arc<dyn BudgetCounter>> = vec![
        Arc::new(LedgerBudgets::new(a.clone())),
        Arc::new(LedgerBudgets::new(b)),
    ];
    check(&counters).await;
}

#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn a_runs_budgets_are_its_ask_within_the_tenants_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let ledger: Arc<dyn GrantLedger> =
        Arc::new(SqliteStore::open(&dir.path().join("board.sqlite3")).unwrap());
    let service = GrantService::new(ledger.clone(), Arc::new(MemoryRegistry::new()))
        .with_run_budgets(Budgets::parse_csv("create_issue=10").unwrap());
    let acme = TenantId::parse("acme").unwrap();
    let ask = |text: &str| Budgets::parse_csv(text).unwrap();
    // The operator's default while the tenant has none.
    assert_eq!(
        service.run_budgets(&acme, &ask("")).await.unwrap().to_csv(),
        "create_issue=10"
    );
    assert_eq!(
        service
            .run_budgets(&acme, &ask("create_issue=50"))
            .await
            .unwrap()
            .to_csv(),
        "create_issue=10",
        "more than the default gets the default"
    );
    ledger
        .set_grant_policy(
            &acme,
            &GrantPolicy {
                run_budgets: ask("create_issue=3,add_comment=4"),
                ..GrantPolicy::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        service
            .run_budgets(&acme, &ask("create_issue=1,update_issue=7"))
            .await
            .unwrap()
            .to_csv(),
        "create_issue=1,update_issue=7,add_comment=4",
        "less gets less, the tenant's kinds are filled in"
    );
}
