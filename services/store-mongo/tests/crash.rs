//! The server killed (SIGKILL) in the middle of a load and restarted:
//! every acknowledged write is there afterwards, every other call got an
//! error in bounded time, and the writers carry on once it is back.

use crate::common;

use common::{TestBoard, test_options};
use corkboard_board::{IssueId, IssueStore, ListQuery, StoreError, StoreHealth, TenantId};
use corkboard_store_contract::fixtures::{author, new_issue, title_patch};
use corkboard_store_mongo::MongoOptions;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

const WRITERS: usize = 4;
/// Acknowledged creates before the kill, and per writer after the restart.
const ACKS_BEFORE_KILL: usize = 200;
const ACKS_AFTER_RESTART: usize = 25;
/// Only so that a hang fails the test; the store's bounds are seconds.
const NO_HANG: Duration = Duration::from_secs(60);

#[derive(Default)]
struct Outcomes {
    /// Creates acknowledged: id and title.
    acked: Vec<(IssueId, String)>,
    /// Titles of creates that returned an error.
    failed: Vec<String>,
    /// Versions acknowledged by updates of the writer's own issue.
    acked_versions: Vec<u64>,
    acked_after_restart: usize,
}

#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn acknowledged_writes_survive_a_crash_and_the_rest_fail_visibly() {
    let options = MongoOptions {
        operation_timeout: Duration::from_secs(5),
        ..test_options()
    };
    let mut board = TestBoard::start_with("crash", options.clone()).await;
    let t = TenantId::parse("crash").unwrap();
    let acked_total = Arc::new(AtomicUsize::new(0));
    let errors_total = Arc::new(AtomicUsize::new(0));
    let restarted = Arc::new(AtomicBool::new(false));

    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let store = board.another_store(options.clone()).await;
        let own = store
            .create_issue(
                &t,
                &author("owner"),
                new_issue(&format!("owned by {w}")),
                None,
            )
            .await
            .expect("create the writer's own issue")
            .issue;
        let (t, acked_total, errors_total, restarted) = (
            t.clone(),
            Arc::clone(&acked_total),
            Arc::clone(&errors_total),
            Arc::clone(&restarted),
        );
        writers.push(tokio::spawn(async move {
            let mut out = Outcomes::default();
            let mut version = own.version;
            let who = author("crash");
            for i in 0.. {
                let title = format!("w{w} n{i}");
                let call = store.create_issue(&t, &who, new_issue(&title), None);
                match tokio::time::timeout(NO_HANG, call).await {
                    Err(_) => panic!("a create hung across the crash"),
                    Ok(Ok(created)) => {
                        assert_eq!(created.issue.title.as_str(), title);
                        out.acked.push((created.issue.id, title));
                        acked_total.fetch_add(1, Ordering::SeqCst);
                        if restarted.load(Ordering::SeqCst) {
                            out.acked_after_restart += 1;
                        }
                    }
                    Ok(Err(err)) => {
                        assert!(
                            matches!(err, StoreError::Unavailable { .. }),
                            "a failure across a crash is Unavailable: {err:?}"
                        );
                        out.failed.push(title);
                        errors_total.fetch_add(1, Ordering::SeqCst);
                    }
                }
                // A compare-and-swap update of the writer's own issue: no
                // one else writes it, so a conflict means an earlier update
                // that reported an error was applied after all.
                let call = store.update_issue(
                    &t,
                    &own.id,
                    title_patch(&format!("w{w} v{}", version + 1)),
                    Some(version),
                );
                match tokio::time::timeout(NO_HANG, call).await {
                    Err(_) => panic!("an update hung across the crash"),
                    Ok(Ok(updated)) => {
                        version = updated.version;
                        out.acked_versions.push(version);
                    }
                    Ok(Err(StoreError::VersionConflict { actual, .. })) => version = actual,
                    Ok(Err(err)) => assert!(err.is_retryable(), "{err:?}"),
                }
                if out.acked_after_restart >= ACKS_AFTER_RESTART {
                    return (own.id, out);
                }
            }
            unreachable!()
        }));
    }

    let deadline = tokio::time::Instant::now() + Duration::from_secs(300);
    while acked_total.load(Ordering::SeqCst) < ACKS_BEFORE_KILL {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the load never got going"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    board.server.kill();
    // Let every writer run into the dead server for a while.
    let errors_at_kill = errors_total.load(Ordering::SeqCst);
    while errors_total.load(Ordering::SeqCst) < errors_at_kill + WRITERS * 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no writer saw the crash"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let port = board.server.port();
    board.server.restart();
    assert_eq!(
        board.server.port(),
        port,
        "the server came back on its port"
    );
    restarted.store(true, Ordering::SeqCst);

    let mut acked = BTreeMap::new();
    let mut failed = BTreeSet::new();
    let mut owned = Vec::new();
    for writer in writers {
        let (own, out) = tokio::time::timeout(Duration::from_secs(300), writer)
            .await
            .expect("writers finish after the restart")
            .expect("a writer panicked");
        acked.extend(out.acked);
        failed.extend(out.failed);
        owned.push((own, out.acked_versions));
    }
    assert!(
        !failed.is_empty(),
        "the crash was seen by callers as errors"
    );

    // A fresh client, as after a deploy, reads what survived.
    let reader = board.another_store(test_options()).await;
    reader.check().await.expect("healthy after the restart");
    let mut stored = BTreeMap::new();
    let mut query = ListQuery {
        limit: 200,
        ..ListQuery::default()
    };
    loop {
        let page = reader.list_issues(&t, &query).await.expect("list");
        for issue in page.issues {
            stored.insert(issue.id.clone(), issue.title.as_str().to_owned());
        }
        match page.next_cursor {
            Some(cursor) => query.cursor = Some(cursor),
            None => break,
        }
    }
    for (id, title) in &acked {
        assert_eq!(
            stored.get(id),
            Some(title),
            "acknowledged create {id} ({title}) is missing after the crash"
        );
    }
    let owned_ids: BTreeSet<&IssueId> = owned.iter().map(|(id, _)| id).collect();
    for (id, title) in &stored {
        assert!(
            acked.contains_key(id) || failed.contains(title) || owned_ids.contains(id),
            "issue {id} ({title}) was never requested"
        );
    }
    for (id, versions) in &owned {
        let issue = reader.get_issue(&t, id).await.expect("get owned issue");
        let highest = versions.iter().max().copied().unwrap_or(1);
        assert!(
            issue.version >= highest,
            "acknowledged version {highest} of {id} lost: stored {}",
            issue.version
        );
    }
    let unacked_present = failed
        .iter()
        .filter(|title| stored.values().any(|t| t == *title))
        .count();
    eprintln!(
        "crash test: {} acknowledged, {} failed ({} of those were applied anyway)",
        acked.len(),
        failed.len(),
        unacked_present
    );
}
