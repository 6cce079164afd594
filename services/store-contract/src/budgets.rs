//! Per-run write budgets in the ledger: the limits travel with the grant,
//! a reservation is one conditional write (of racing reservations exactly
//! the limit succeed), a release gives one back, never below zero.

use crate::fixtures::*;
use corkboard_board::{BoardStore, BudgetKind, Budgets, IssueStore, Timestamp};
use std::sync::Arc;

const HOUR: i64 = 3_600_000;

pub async fn case_budgets_travel_with_the_grant_and_reserve_up_to_their_limit<S: BoardStore>(
    store: Arc<S>,
) {
    let t = tenant("budget");
    let mut g = grant(&t, "run-budget", Timestamp::now(), HOUR);
    g.budgets = Budgets::parse_csv("create_issue=5,add_comment=0").expect("budgets");
    store.record_grant(&g, &token_hash()).await.expect("record");
    let read = store.grant(&g.id).await.expect("get");
    assert_eq!(read.grant.budgets, g.budgets, "the limits are stored");
    let listed = store.list_grants(&t, None, None, 10).await.expect("list");
    assert_eq!(listed[0].grant.budgets, g.budgets);
    assert!(
        store
            .budget_used(&g.id)
            .await
            .expect("used")
            .values()
            .all(|n| *n == 0),
        "nothing taken yet"
    );

    // Twenty racing reservations under a limit of five: exactly five take.
    let racers: Vec<_> = (0..20)
        .map(|_| {
            let (store, id) = (store.clone(), g.id.clone());
            tokio::spawn(async move {
                store
                    .reserve_budget(&id, BudgetKind::CreateIssue, 5)
                    .await
                    .expect("reserve")
            })
        })
        .collect();
    let mut taken = 0;
    for racer in racers {
        if racer.await.expect("join") {
            taken += 1;
        }
    }
    assert_eq!(
        taken, 5,
        "exactly the limit is taken by racing reservations"
    );
    assert_eq!(
        store.budget_used(&g.id).await.expect("used")[&BudgetKind::CreateIssue],
        5
    );
    assert!(
        !store
            .reserve_budget(&g.id, BudgetKind::CreateIssue, 5)
            .await
            .expect("reserve"),
        "a spent budget refuses"
    );
    // A release makes room for exactly one more.
    store
        .release_budget(&g.id, BudgetKind::CreateIssue)
        .await
        .expect("release");
    assert_eq!(
        store.budget_used(&g.id).await.expect("used")[&BudgetKind::CreateIssue],
        4
    );
    assert!(
        store
            .reserve_budget(&g.id, BudgetKind::CreateIssue, 5)
            .await
            .expect("reserve")
    );
    // A limit of zero allows nothing.
    assert!(
        !store
            .reserve_budget(&g.id, BudgetKind::AddComment, 0)
            .await
            .expect("reserve")
    );
    // Kinds and grants are counted apart; a release never goes below zero.
    let mut other = grant(&t, "run-other", Timestamp::now(), HOUR);
    other.budgets = Budgets::parse_csv("update_issue=1").expect("budgets");
    store
        .record_grant(&other, &token_hash())
        .await
        .expect("record");
    store
        .release_budget(&other.id, BudgetKind::UpdateIssue)
        .await
        .expect("release of nothing");
    assert!(
        store
            .reserve_budget(&other.id, BudgetKind::UpdateIssue, 1)
            .await
            .expect("reserve")
    );
    assert!(
        !store
            .reserve_budget(&other.id, BudgetKind::UpdateIssue, 1)
            .await
            .expect("reserve")
    );
    assert_eq!(
        store.budget_used(&g.id).await.expect("used")[&BudgetKind::CreateIssue],
        5,
        "another grant's writes are its own"
    );
}

pub async fn case_idempotency_key_used_says_whether_a_repeat_would_replay<S: BoardStore>(
    store: Arc<S>,
) {
    let t = tenant("key-used");
    let (run_1, run_2) = (author("run-1"), author("run-2"));
    let k = key("k1");
    let used = |run: &corkboard_board::Author, comment: bool| {
        let (store, t, k, run) = (store.clone(), t.clone(), k.clone(), run.run.clone());
        async move {
            IssueStore::idempotency_key_used(&*store, &t, &run, &k, comment)
                .await
                .expect("key used")
        }
    };
    assert!(!used(&run_1, false).await);
    let created = store
        .create_issue(&t, &run_1, new_issue("keyed"), Some(&k))
        .await
        .expect("create");
    assert!(used(&run_1, false).await, "the create's key is recorded");
    assert!(!used(&run_1, true).await, "not as a comment's");
    assert!(!used(&run_2, false).await, "keys are per run");
    assert!(
        !IssueStore::idempotency_key_used(&*store, &tenant("key-other"), &run_1.run, &k, false)
            .await
            .expect("key used"),
        "and per tenant"
    );
    store
        .add_comment(&t, &run_1, comment(&created.issue.id, "hi"), Some(&k))
        .await
        .expect("comment");
    assert!(used(&run_1, true).await);
}
