//! Many writers with their own clients (as separate processes would have)
//! on one database: nothing lost, versions consistent.

use crate::common;

use common::{TestBoard, test_options};
use corkboard_board::{Issue, IssueId, IssueStore, ListQuery, StoreError, TenantId};
use corkboard_store_contract::fixtures::{author, comment, key, new_issue, title_patch};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use tokio::sync::Barrier;

const WRITERS: usize = 8;
const OPS_PER_WRITER: usize = 500;
const HOT_ISSUES: usize = 4;
/// A compare-and-swap update retries on conflict; with 8 writers on 4
/// issues it wins long before this.
const CAS_ATTEMPTS: usize = 10_000;

/// What one writer saw acknowledged.
#[derive(Default)]
struct Log {
    created: Vec<IssueId>,
    /// (hot issue index, version the change produced, comment id if any)
    changes: Vec<(usize, u64, Option<String>)>,
}

async fn cas_update(
    store: &corkboard_store_mongo::MongoStore,
    t: &TenantId,
    id: &IssueId,
    title: &str,
) -> Issue {
    for _ in 0..CAS_ATTEMPTS {
        let current = store.get_issue(t, id).await.expect("get before a CAS");
        match store
            .update_issue(t, id, title_patch(title), Some(current.version))
            .await
        {
            Ok(issue) => {
                assert_eq!(issue.version, current.version + 1);
                return issue;
            }
            Err(StoreError::VersionConflict { expected, actual }) => {
                assert_eq!(expected, current.version);
                assert!(actual > expected, "versions only grow");
            }
            Err(other) => panic!("CAS update: {other}"),
        }
    }
    panic!("a CAS update lost {CAS_ATTEMPTS} times in a row");
}

#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn eight_writers_lose_nothing_and_keep_versions_consistent() {
    let board = TestBoard::start("load").await;
    let t = TenantId::parse("load").unwrap();
    let mut hot = Vec::new();
    for i in 0..HOT_ISSUES {
        hot.push(
            board
                .store
                .create_issue(&t, &author("setup"), new_issue(&format!("hot {i}")), None)
                .await
                .expect("create hot issue")
                .issue
                .id,
        );
    }
    let hot = Arc::new(hot);
    let barrier = Arc::new(Barrier::new(WRITERS));
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let store = board.another_store(test_options()).await;
        let (t, hot, barrier) = (t.clone(), Arc::clone(&hot), Arc::clone(&barrier));
        writers.push(tokio::spawn(async move {
            let run = format!("writer-{w}");
            let who = author(&run);
            let mut log = Log::default();
            barrier.wait().await;
            for i in 0..OPS_PER_WRITER {
                let h = (w + i) % HOT_ISSUES;
                match i % 5 {
                    0 => {
                        let created = store
                            .create_issue(&t, &who, new_issue(&format!("{run} {i}")), None)
                            .await
                            .expect("create");
                        log.created.push(created.issue.id);
                    }
                    1 => {
                        // Keyed, and replayed at once as an agent retrying
                        // would: one issue, the same answer.
                        let k = key(&format!("{run}-{i}"));
                        let request = || new_issue(&format!("{run} keyed {i}"));
                        let first = store
                            .create_issue(&t, &who, request(), Some(&k))
                            .await
                            .expect("keyed create");
                        let replay = store
                            .create_issue(&t, &who, request(), Some(&k))
                            .await
                            .expect("keyed replay");
                        assert!(!first.replayed && replay.replayed);
                        assert_eq!(replay.issue.id, first.issue.id);
                        log.created.push(first.issue.id);
                    }
                    2 => {
                        let updated = store
                            .update_issue(&t, &hot[h], title_patch(&format!("{run} {i}")), None)
                            .await
                            .expect("update");
                        log.changes.push((h, updated.version, None));
                    }
                    3 => {
                        let updated =
                            cas_update(&store, &t, &hot[h], &format!("{run} cas {i}")).await;
                        log.changes.push((h, updated.version, None));
                    }
                    _ => {
                        let added = store
                            .add_comment(&t, &who, comment(&hot[h], &format!("{run} {i}")), None)
                            .await
                            .expect("comment");
                        log.changes.push((
                            h,
                            added.issue.version,
                            Some(added.comment.id.to_string()),
                        ));
                    }
                }
            }
            log
        }));
    }
    let mut created = BTreeSet::new();
    let mut changes: BTreeMap<usize, Vec<(u64, Option<String>)>> = BTreeMap::new();
    for writer in writers {
        let log = writer.await.expect("a writer panicked");
        for id in log.created {
            assert!(created.insert(id), "an id was handed out twice");
        }
        for (h, version, comment) in log.changes {
            changes.entry(h).or_default().push((version, comment));
        }
    }
    assert_eq!(created.len(), WRITERS * OPS_PER_WRITER * 2 / 5);

    // Every acknowledged create is stored, and nothing else.
    let mut listed = BTreeSet::new();
    let mut query = ListQuery {
        limit: 200,
        ..ListQuery::default()
    };
    loop {
        let page = board.store.list_issues(&t, &query).await.expect("list");
        listed.extend(page.issues.into_iter().map(|i| i.id));
        match page.next_cursor {
            Some(cursor) => query.cursor = Some(cursor),
            None => break,
        }
    }
    let mut expected = created.clone();
    expected.extend(hot.iter().cloned());
    assert_eq!(
        listed, expected,
        "the board holds exactly the acknowledged issues"
    );

    // Each hot issue: every acknowledged change has its own version, the
    // versions run 2..=final without a gap, and every comment is there.
    for (h, id) in hot.iter().enumerate() {
        let stored = board.store.get_issue(&t, id).await.expect("get hot issue");
        let seen = changes.remove(&h).unwrap_or_default();
        let versions: BTreeSet<u64> = seen.iter().map(|(v, _)| *v).collect();
        assert_eq!(
            versions.len(),
            seen.len(),
            "two changes got the same version"
        );
        assert_eq!(
            versions,
            (2..=stored.version).collect::<BTreeSet<u64>>(),
            "hot issue {h}: versions are exactly one per acknowledged change"
        );
        let comments: BTreeSet<String> = seen.iter().filter_map(|(_, c)| c.clone()).collect();
        let stored_comments: BTreeSet<String> =
            stored.comments.iter().map(|c| c.id.to_string()).collect();
        assert_eq!(
            stored_comments, comments,
            "hot issue {h}: no comment lost or invented"
        );
    }
}
