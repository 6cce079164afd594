//! The work queue on MongoDB beyond the contract: `claim_next` raced from
//! several store handles (replicas) on one board, and the count of open
//! blockers each issue keeps (`src/blockers.rs`) converging when a writer
//! died between its write and the recount, and for issues written before
//! the count existed.

use crate::common;

use common::{TestBoard, test_options};
use corkboard_board::{
    BlockedBy, ClaimNext, IssueId, IssuePatch, IssueState, IssueStore, ListQuery, NewIssue,
    Priority, StatsPart, TenantId, Timestamp, WebhookStore, queue_limits,
};
use corkboard_store_contract::fixtures::{claimant, new_issue, tenant};
use corkboard_store_mongo::{MongoStore, schema};
use mongodb::bson::{Bson, DateTime, Document, doc};
use std::sync::Arc;

/// Replicas the race is spread over.
const REPLICAS: usize = 4;

#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn claim_next_across_replicas_gives_each_ready_issue_to_one_claimant() {
    let board = TestBoard::start("claim-replicas").await;
    let mut stores = vec![Arc::clone(&board.store)];
    for _ in 1..REPLICAS {
        stores.push(Arc::new(board.another_store(test_options()).await));
    }
    corkboard_store_contract::claim_next_race(&stores, "claim-replicas").await;
}

async fn create(store: &MongoStore, t: &TenantId, title: &str, blockers: &[&IssueId]) -> IssueId {
    let new = NewIssue {
        blocked_by: BlockedBy::parse(blockers.iter().map(|id| (*id).clone())).unwrap(),
        ..new_issue(title)
    };
    corkboard_store_contract::fixtures::create_as_run_a(store, t, new).await
}

async fn ready(store: &MongoStore, t: &TenantId) -> Vec<IssueId> {
    let query = ListQuery {
        ready: true,
        ..ListQuery::default()
    };
    let page = store.list_issues(t, &query).await.expect("ready list");
    page.issues.into_iter().map(|i| i.id).collect()
}

#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn a_blocker_finished_by_a_writer_that_died_before_the_recount_frees_its_work_at_the_next_sweep()
 {
    let board = TestBoard::start("dead-recount").await;
    let store = &*board.store;
    let t = tenant("dead-recount");
    let blocker = create(store, &t, "blocker", &[]).await;
    let work = create(store, &t, "work", &[&blocker]).await;
    assert_eq!(ready(store, &t).await, vec![blocker.clone()]);
    // The blocker's close as its write leaves it (state and mark in one
    // update), without the recount the writer would have made next.
    let issues = board
        .raw_database()
        .await
        .collection::<Document>(&schema::issues(&t));
    issues
        .update_one(
            doc! { "_id": blocker.as_str() },
            doc! { "$set": { "state": "done", "recount": "a-dead-writer" } },
        )
        .await
        .unwrap();
    assert!(
        ready(store, &t).await.is_empty(),
        "until recounted, the work counts its blocker open"
    );
    store.expire_claims(Timestamp::now(), 100).await.unwrap();
    assert_eq!(ready(store, &t).await, vec![work], "the sweep recounted it");
    let marked = issues
        .count_documents(doc! { "recount": { "$exists": true } })
        .await
        .unwrap();
    assert_eq!(marked, 0, "the mark is cleared");
}

#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn issues_written_before_the_count_existed_get_it_at_the_tenant_set_up() {
    let board = TestBoard::start("blockers-backfill").await;
    let store = &*board.store;
    let t = tenant("blockers-backfill");
    let open = create(store, &t, "open blocker", &[]).await;
    let done = create(store, &t, "done blocker", &[]).await;
    let held = create(store, &t, "held", &[&open, &done]).await;
    let free = create(store, &t, "free", &[&done]).await;
    let patch = IssuePatch {
        state: Some(IssueState::Done),
        ..IssuePatch::default()
    };
    store.update_issue(&t, &done, patch, None).await.unwrap();
    // As an older version wrote them: no count, and set up at that version.
    let db = board.raw_database().await;
    db.collection::<Document>(&schema::issues(&t))
        .update_many(
            doc! {},
            doc! { "$unset": { "open_blockers": "", "blockers_seq": "", "recount": "" } },
        )
        .await
        .unwrap();
    db.collection::<Document>(schema::SCHEMA)
        .delete_one(doc! { "_id": schema::issues(&t) })
        .await
        .unwrap();
    // A process started after the upgrade sets the tenant up again.
    let upgraded = board.another_store(test_options()).await;
    let mut listed = ready(&upgraded, &t).await;
    listed.sort();
    let mut expected = vec![open, free];
    expected.sort();
    assert_eq!(listed, expected, "the held issue waits on its open blocker");
    assert!(!listed.contains(&held));
    let uncounted = db
        .collection::<Document>(&schema::issues(&t))
        .count_documents(doc! { "open_blockers": { "$exists": false } })
        .await
        .unwrap();
    assert_eq!(uncounted, 0);
}

#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn board_stats_stop_at_the_cap_and_say_which_counts_did() {
    let board = TestBoard::start("stats-cap").await;
    let store = &*board.store;
    let t = tenant("stats-cap");
    // One issue through the store (the tenant set up), then the cap's worth
    // and 7 more as documents straight into the collection: the cap's
    // worth and 2 claimed, 5 unclaimed.
    create(store, &t, "first", &[]).await;
    let cap = queue_limits::STATS_COUNT_CAP;
    let now = Timestamp::now();
    insert_todo(&board, &t, cap + 2, 5, now).await;
    let stats = store.board_stats(&t, now).await.unwrap();
    let capped: Vec<StatsPart> = stats.at_least.iter().copied().collect();
    assert_eq!(
        capped,
        [
            StatsPart::States,
            StatsPart::Priorities,
            StatsPart::Labels,
            StatsPart::Claimed
        ],
        "{stats:?}"
    );
    assert_eq!(stats.by_state.get(&IssueState::Todo), Some(&cap));
    assert_eq!(stats.claimed, cap);
    assert_eq!(stats.by_priority.get(&Priority::Low), Some(&(cap - 1)));
    // The first issue ("inbox", no priority) and the 5 unclaimed ones.
    assert_eq!(stats.ready, 6, "counted along the ready index");
}

/// `claimed` issues of `t` claimed by run `run-c` for an hour from `now`,
/// then `unclaimed` ones, all `todo` and `low` with label `x`, as documents
/// straight into the tenant's collection (the store's writes would take
/// minutes for the cap's worth).
async fn insert_todo(
    board: &TestBoard,
    t: &TenantId,
    claimed: u64,
    unclaimed: u64,
    now: Timestamp,
) {
    let at = |ms: i64| DateTime::from_millis(ms);
    let docs: Vec<Document> = (0..claimed + unclaimed)
        .map(|i| {
            let claim = if i < claimed {
                Bson::Document(doc! {
                    "run": "run-c", "grant": "gr_1", "claimed_at": at(now.as_millis()),
                    "expires_at": at(now.as_millis() + 3_600_000),
                })
            } else {
                Bson::Null
            };
            doc! {
                "_id": format!("iss_{i:06}"), "tenant": t.as_str(), "state": "todo",
                "priority": "low", "urgency": 3_i64, "labels": ["x"], "blocked_by": [],
                "open_blockers": 0_i64, "created_at": at(1), "updated_at": at(1),
                "version": 1_i64, "claim": claim,
            }
        })
        .collect();
    board
        .raw_database()
        .await
        .collection::<Document>(&schema::issues(t))
        .insert_many(docs)
        .await
        .unwrap();
}

#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn claim_next_with_no_ready_work_stops_its_counts_at_the_cap_and_says_so() {
    let board = TestBoard::start("claim-cap").await;
    let store = &*board.store;
    let t = tenant("claim-cap");
    // One issue through the store (the tenant set up), claimed; then more
    // than the cap's worth claimed by another run, as documents.
    create(store, &t, "first", &[]).await;
    let me = claimant("run-a", None);
    assert!(matches!(
        store
            .claim_next(&t, &ListQuery::default(), &me)
            .await
            .unwrap(),
        ClaimNext::Claimed { .. }
    ));
    let cap = queue_limits::STATS_COUNT_CAP;
    insert_todo(&board, &t, cap + 2, 0, Timestamp::now()).await;
    let next = store
        .claim_next(&t, &ListQuery::default(), &me)
        .await
        .unwrap();
    assert_eq!(
        next,
        ClaimNext::NoReadyWork {
            claimed: cap,
            blocked: 0,
            at_least: [StatsPart::Claimed].into_iter().collect(),
        }
    );
}

/// A tenant's due record is set from its claims only once its last
/// announced claim has had time to land (`sweep.rs`): a claim announced
/// just before a pass reads the record, whose write lands after the pass
/// looked for the tenant's claims, would otherwise be left to the round.
/// Here the announcement is there and its claim is not (still in flight):
/// the pass keeps the record until the write could have landed, and a pass
/// after that, finding no claim, deletes it.
#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn a_due_record_outlives_a_claim_write_in_flight() {
    let board = TestBoard::start("sweep-in-flight").await;
    let store = &board.store;
    let t = tenant("in-flight");
    create(store, &t, "unclaimed", &[]).await;
    let db = board.raw_database().await;
    let due = db.collection::<Document>("sweep_due");
    let now = Timestamp::now();
    let millis = |at: Timestamp| DateTime::from_millis(at.as_millis());
    due.insert_one(doc! {
        "_id": t.as_str(),
        "at": millis(now),
        "last": millis(now),
        "v": 1_i64,
    })
    .await
    .unwrap();

    store.expire_claims(now, 100).await.unwrap();
    let record = due.find_one(doc! { "_id": t.as_str() }).await.unwrap();
    let at = record
        .as_ref()
        .and_then(|r| r.get_datetime("at").ok())
        .map(|at| at.timestamp_millis());
    assert_eq!(
        at,
        Some(now.as_millis() + 60_000),
        "kept until the announced write could have landed: {record:?}"
    );

    store
        .expire_claims(now.plus_millis(61_000), 100)
        .await
        .unwrap();
    assert_eq!(
        due.count_documents(doc! {}).await.unwrap(),
        0,
        "no claim and no write in flight: nothing due"
    );
}
