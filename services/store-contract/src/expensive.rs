//! The bounds on expensive reads (`corkboard_board::ExpensiveReads`): a
//! search past its deadline is stopped with `QueryTooSlow`, and a tenant
//! past its share of expensive reads waits, then gets `TenantBusy`, while
//! other tenants and every point read go on.
//!
//! These cases build their own stores, with the bounds they test, through
//! the factory [`store_expensive_read_tests!`](crate::store_expensive_read_tests)
//! is given (`ExpensiveReads` in, a fresh store out).

use crate::Fixture;
use crate::fixtures::*;
use corkboard_board::{
    Body, ExpensiveReads, IssueState, IssueStore, LabelFilter, ListQuery, SearchQuery, SearchText,
    StoreError, TenantId,
};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Issues in the board the deadline case searches: each holds the query's
/// four words many times over, so ranking every one of them takes many
/// milliseconds on either store, far past a 1 ms deadline.
const COSTLY_BOARD: usize = 1_500;

/// Creates in flight while filling a board (SQLite groups them into few
/// commits).
const FILL_PARALLEL: usize = 32;

/// The words every issue of the costly board holds, and a search of all of
/// them as prefixes (each prefix term is expanded, matched and ranked).
const COSTLY_WORDS: &str = "alphaword betaword gammaword deltaword";
const COSTLY_QUERY: &str = "alphaw* betaw* gammaw* deltaw*";

/// Fills `tenant`'s board with [`COSTLY_BOARD`] issues holding every word
/// of [`COSTLY_WORDS`].
async fn fill_costly_board<S: corkboard_board::BoardStore>(store: &Arc<S>, tenant: &TenantId) {
    let mut lanes = tokio::task::JoinSet::new();
    for lane in 0..FILL_PARALLEL {
        let (store, tenant) = (Arc::clone(store), tenant.clone());
        lanes.spawn(async move {
            for i in (lane..COSTLY_BOARD).step_by(FILL_PARALLEL) {
                let body = format!("{COSTLY_WORDS} issue {i}. ").repeat(20);
                let new = corkboard_board::NewIssue {
                    body: Body::parse(body).expect("a valid body"),
                    ..new_issue(&format!("{COSTLY_WORDS} {i}"))
                };
                store
                    .create_issue(&tenant, &author("filler"), new, None)
                    .await
                    .expect("create an issue of the costly board");
            }
        });
    }
    while let Some(lane) = lanes.join_next().await {
        lane.expect("a filling lane");
    }
}

fn costly_search() -> SearchQuery {
    SearchQuery::new(SearchText::parse(COSTLY_QUERY).expect("a valid query"))
}

/// A search running past its deadline is stopped and answered
/// `QueryTooSlow`, naming the limit; point reads (an issue, an unfiltered
/// page) are not bounded that way and still answer; the store still
/// answers searches afterwards (the interrupted query left no reader
/// behind).
pub async fn case_a_search_past_its_deadline_is_stopped<F, Fut, X>(make: F)
where
    F: Fn(ExpensiveReads) -> Fut,
    Fut: Future<Output = X>,
    X: Fixture,
{
    let (store, _guard) = make(ExpensiveReads::new(Duration::from_millis(1), 2))
        .await
        .split();
    let t = tenant("deadline");
    fill_costly_board(&store, &t).await;
    for attempt in 0..3 {
        let started = Instant::now();
        let answer = store.search_issues(&t, &costly_search()).await;
        assert_eq!(
            answer.as_ref().map(|page| page.hits.len()),
            Err(&StoreError::QueryTooSlow { limit_ms: 1 }),
            "attempt {attempt}: a search of {COSTLY_BOARD} matching issues, 1 ms deadline"
        );
        // Stopped, not run to the end: far below what ranking the whole
        // board takes when unbounded (generous: a loaded machine).
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "stopped within its deadline, not after: {:?}",
            started.elapsed()
        );
    }
    let page = store
        .list_issues(&t, &ListQuery::default())
        .await
        .expect("an unfiltered page is a point read, not bounded by the search deadline");
    assert_eq!(page.issues.len(), ListQuery::default().limit as usize);
    let first = &page.issues[0];
    let issue = store
        .get_issue(&t, &first.id)
        .await
        .expect("get_issue is a point read");
    assert_eq!(issue.id, first.id);
    // Searches that are cheap enough still answer on the same readers.
    let other = tenant("deadline-small");
    store
        .create_issue(&other, &author("r"), new_issue("One lonely word"), None)
        .await
        .expect("create");
    let small = SearchQuery::new(SearchText::parse("lonely").expect("a valid query"));
    let mut found = None;
    // A busy machine may take a millisecond even for this: a few tries.
    for _ in 0..20 {
        match store.search_issues(&other, &small).await {
            Ok(page) => {
                found = Some(page.hits.len());
                break;
            }
            Err(StoreError::QueryTooSlow { .. }) => continue,
            Err(err) => panic!("a small search failed: {err}"),
        }
    }
    assert_eq!(found, Some(1), "a one-issue search answers within 1 ms");
}

/// A tenant whose whole share of expensive reads is taken waits for its
/// next search or filtered page, then gets `TenantBusy` (retryable, naming
/// the share); meanwhile its point reads answer, and another tenant's
/// searches run at once. Once a share is given back, the tenant searches
/// again.
pub async fn case_a_tenant_past_its_share_waits_then_is_refused<F, Fut, X>(make: F)
where
    F: Fn(ExpensiveReads) -> Fut,
    Fut: Future<Output = X>,
    X: Fixture,
{
    let wait = Duration::from_millis(300);
    // A time share no case reaches: this one holds a share by hand for as
    // long as a refusal takes, which a time share would charge.
    let reads = ExpensiveReads::new(wait, 1).with_time_share(1_000_000);
    let (store, _guard) = make(reads.clone()).await.split();
    let (noisy, quiet) = (tenant("share-noisy"), tenant("share-quiet"));
    for t in [&noisy, &quiet] {
        store
            .create_issue(t, &author("r"), new_issue("Searchable words here"), None)
            .await
            .expect("create");
    }
    let search = SearchQuery::new(SearchText::parse("searchable").expect("a valid query"));
    let filtered = ListQuery {
        states: vec![IssueState::Inbox, IssueState::Todo],
        labels: LabelFilter::None,
        ..ListQuery::default()
    };
    // The noisy tenant's share is taken (its one search in flight).
    let held = reads.admit(&noisy).await.expect("the noisy tenant's share");

    let started = Instant::now();
    let refused = store.search_issues(&noisy, &search).await;
    assert_eq!(
        refused.as_ref().map(|page| page.hits.len()),
        Err(&reads.tenant_busy()),
        "past its share"
    );
    assert!(
        started.elapsed() >= wait - Duration::from_millis(50),
        "it waited for a share before giving up: {:?}",
        started.elapsed()
    );
    assert!(refused.is_err_and(|e| e.is_retryable()));
    let list = store.list_issues(&noisy, &filtered).await;
    assert_eq!(
        list.as_ref().map(|page| page.issues.len()),
        Err(&reads.tenant_busy()),
        "a filtered page is an expensive read too"
    );

    // Point reads of the same tenant do not need a share.
    let page = store
        .list_issues(&noisy, &ListQuery::default())
        .await
        .expect("an unfiltered page needs no share");
    store
        .get_issue(&noisy, &page.issues[0].id)
        .await
        .expect("get_issue needs no share");
    // Another tenant has its own share.
    let other = store
        .search_issues(&quiet, &search)
        .await
        .expect("another tenant searches while the first is at its share");
    assert_eq!(other.hits.len(), 1);
    let other = store
        .list_issues(&quiet, &filtered)
        .await
        .expect("another tenant's filtered page");
    assert_eq!(other.issues.len(), 1);

    drop(held);
    let found = store
        .search_issues(&noisy, &search)
        .await
        .expect("its share given back, the tenant searches again");
    assert_eq!(found.hits.len(), 1);
    assert_eq!(reads.tenants_in_flight(), 0, "no share left held");
}
