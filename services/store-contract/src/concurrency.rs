//! Many callers at once: optimistic concurrency, lost updates, and
//! idempotency under a race. Tasks start together behind a barrier so the
//! calls really overlap on the multi-threaded runtime.

use crate::fixtures::*;
use corkboard_board::{BoardStore, IssueId, ListQuery, StoreError, limits};
use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use tokio::sync::Barrier;
use tokio::task::JoinSet;

const RACERS: usize = 32;

async fn join_all<T: 'static>(mut set: JoinSet<T>) -> Vec<T> {
    let mut out = Vec::with_capacity(set.len());
    while let Some(result) = set.join_next().await {
        out.push(result.expect("a racing task panicked"));
    }
    out
}

pub async fn case_concurrent_updates_same_expected_version<S: BoardStore>(store: Arc<S>) {
    let t = tenant("race-version");
    let issue = store
        .create_issue(&t, &author("run-1"), new_issue("Contended"), None)
        .await
        .expect("create")
        .issue;
    let barrier = Arc::new(Barrier::new(RACERS));
    let mut set = JoinSet::new();
    for i in 0..RACERS {
        let (store, t, id, barrier) = (
            Arc::clone(&store),
            t.clone(),
            issue.id.clone(),
            Arc::clone(&barrier),
        );
        set.spawn(async move {
            barrier.wait().await;
            let title = format!("winner {i}");
            (
                title.clone(),
                store
                    .update_issue(&t, &id, title_patch(&title), Some(1))
                    .await,
            )
        });
    }
    let results = join_all(set).await;
    let winners: Vec<_> = results
        .iter()
        .filter_map(|(title, r)| r.as_ref().ok().map(|issue| (title, issue)))
        .collect();
    assert_eq!(winners.len(), 1, "exactly one update at version 1 succeeds");
    for (_, result) in &results {
        if let Err(err) = result {
            assert_eq!(
                err,
                &StoreError::VersionConflict {
                    expected: 1,
                    actual: 2
                },
                "every other update is a version conflict"
            );
        }
    }
    let (title, returned) = winners[0];
    assert_eq!(returned.version, 2);
    let stored = store.get_issue(&t, &issue.id).await.expect("get");
    assert_eq!(&stored, returned);
    assert_eq!(stored.title.as_str(), title.as_str());
}

pub async fn case_concurrent_updates_without_version_lose_nothing<S: BoardStore>(store: Arc<S>) {
    let t = tenant("race-lww");
    let issue = store
        .create_issue(&t, &author("run-1"), new_issue("Busy"), None)
        .await
        .expect("create")
        .issue;
    let barrier = Arc::new(Barrier::new(RACERS));
    let mut set = JoinSet::new();
    for i in 0..RACERS {
        let (store, t, id, barrier) = (
            Arc::clone(&store),
            t.clone(),
            issue.id.clone(),
            Arc::clone(&barrier),
        );
        set.spawn(async move {
            barrier.wait().await;
            let title = format!("writer {i}");
            let updated = store
                .update_issue(&t, &id, title_patch(&title), None)
                .await
                .expect("update without a version never conflicts");
            (title, updated)
        });
    }
    let results = join_all(set).await;
    let versions: BTreeSet<u64> = results.iter().map(|(_, issue)| issue.version).collect();
    let expected: BTreeSet<u64> = (2..=RACERS as u64 + 1).collect();
    assert_eq!(
        versions, expected,
        "each update gets its own version: none was lost or merged"
    );
    for (title, issue) in &results {
        assert_eq!(
            issue.title.as_str(),
            title,
            "each update returns its own result"
        );
    }
    let stored = store.get_issue(&t, &issue.id).await.expect("get");
    assert_eq!(stored.version, RACERS as u64 + 1);
    let last = results
        .iter()
        .find(|(_, issue)| issue.version == stored.version)
        .expect("the last update");
    assert_eq!(stored.title.as_str(), last.0, "the last writer wins");
}

pub async fn case_concurrent_comments_and_updates<S: BoardStore>(store: Arc<S>) {
    let t = tenant("race-mixed");
    let issue = store
        .create_issue(&t, &author("run-1"), new_issue("Mixed"), None)
        .await
        .expect("create")
        .issue;
    let half = RACERS / 2;
    let barrier = Arc::new(Barrier::new(RACERS));
    let mut set = JoinSet::new();
    for i in 0..RACERS {
        let (store, t, id, barrier) = (
            Arc::clone(&store),
            t.clone(),
            issue.id.clone(),
            Arc::clone(&barrier),
        );
        set.spawn(async move {
            barrier.wait().await;
            if i < half {
                store
                    .add_comment(&t, &author("run-2"), comment(&id, &format!("c{i}")), None)
                    .await
                    .expect("comment")
                    .issue
                    .version
            } else {
                store
                    .update_issue(&t, &id, title_patch(&format!("t{i}")), None)
                    .await
                    .expect("update")
                    .version
            }
        });
    }
    let versions: BTreeSet<u64> = join_all(set).await.into_iter().collect();
    let expected: BTreeSet<u64> = (2..=RACERS as u64 + 1).collect();
    assert_eq!(
        versions, expected,
        "comments and updates each bump the version once"
    );
    let stored = store.get_issue(&t, &issue.id).await.expect("get");
    assert_eq!(stored.version, RACERS as u64 + 1);
    assert_eq!(stored.comments.len(), half, "no comment was lost");
}

pub async fn case_concurrent_creates_are_distinct<S: BoardStore>(store: Arc<S>) {
    let t = tenant("race-create");
    let barrier = Arc::new(Barrier::new(RACERS));
    let mut set = JoinSet::new();
    for i in 0..RACERS {
        let (store, t, barrier) = (Arc::clone(&store), t.clone(), Arc::clone(&barrier));
        set.spawn(async move {
            barrier.wait().await;
            store
                .create_issue(&t, &author("run-1"), new_issue(&format!("n{i}")), None)
                .await
                .expect("create")
                .issue
                .id
        });
    }
    let created: HashSet<IssueId> = join_all(set).await.into_iter().collect();
    assert_eq!(created.len(), RACERS, "every create made its own issue");
    let page = store
        .list_issues(&t, &ListQuery::default())
        .await
        .expect("list");
    let listed: HashSet<IssueId> = page.issues.into_iter().map(|i| i.id).collect();
    assert_eq!(listed, created, "every acknowledged create is stored");
}

pub async fn case_idempotent_create_race<S: BoardStore>(store: Arc<S>) {
    let t = tenant("race-key");
    let k = key("retry-storm");
    let barrier = Arc::new(Barrier::new(RACERS));
    let mut set = JoinSet::new();
    for _ in 0..RACERS {
        let (store, t, k, barrier) = (
            Arc::clone(&store),
            t.clone(),
            k.clone(),
            Arc::clone(&barrier),
        );
        set.spawn(async move {
            barrier.wait().await;
            store
                .create_issue(&t, &author("run-1"), full_issue("Only once"), Some(&k))
                .await
                .expect("every identical keyed create succeeds")
        });
    }
    let results = join_all(set).await;
    let ids: HashSet<&IssueId> = results.iter().map(|c| &c.issue.id).collect();
    assert_eq!(ids.len(), 1, "all callers get the same issue");
    assert_eq!(
        results.iter().filter(|c| !c.replayed).count(),
        1,
        "exactly one call created it"
    );
    let page = store
        .list_issues(&t, &ListQuery::default())
        .await
        .expect("list");
    assert_eq!(page.issues.len(), 1, "exactly one issue exists");
}

pub async fn case_idempotent_comment_race<S: BoardStore>(store: Arc<S>) {
    let t = tenant("race-comment");
    let issue = store
        .create_issue(&t, &author("run-1"), new_issue("Target"), None)
        .await
        .expect("create")
        .issue;
    let k = key("comment-storm");
    let barrier = Arc::new(Barrier::new(RACERS));
    let mut set = JoinSet::new();
    for _ in 0..RACERS {
        let (store, t, k, id, barrier) = (
            Arc::clone(&store),
            t.clone(),
            k.clone(),
            issue.id.clone(),
            Arc::clone(&barrier),
        );
        set.spawn(async move {
            barrier.wait().await;
            store
                .add_comment(&t, &author("run-1"), comment(&id, "just once"), Some(&k))
                .await
                .expect("every identical keyed comment succeeds")
        });
    }
    let results = join_all(set).await;
    let ids: HashSet<_> = results.iter().map(|c| &c.comment.id).collect();
    assert_eq!(ids.len(), 1, "all callers get the same comment");
    assert_eq!(results.iter().filter(|c| !c.replayed).count(), 1);
    let stored = store.get_issue(&t, &issue.id).await.expect("get");
    assert_eq!(stored.comments.len(), 1);
    assert_eq!(stored.version, 2);
}

/// An issue takes at most `COMMENTS_MAX` comments, even when more writers
/// than that race for the last places; the refusal names the issue and the
/// limit, and a key refused this way stays free for another request.
pub async fn case_comment_limit_holds_under_a_race<S: BoardStore>(store: Arc<S>) {
    let t = tenant("comment-limit");
    let issue = store
        .create_issue(&t, &author("run-1"), new_issue("Busy"), None)
        .await
        .expect("create")
        .issue;
    let extra = 8;
    let writers = limits::COMMENTS_MAX + extra;
    let barrier = Arc::new(Barrier::new(writers));
    let mut set = JoinSet::new();
    for i in 0..writers {
        let (store, t, id, barrier) = (
            Arc::clone(&store),
            t.clone(),
            issue.id.clone(),
            Arc::clone(&barrier),
        );
        set.spawn(async move {
            barrier.wait().await;
            store
                .add_comment(&t, &author("run-2"), comment(&id, &format!("c{i}")), None)
                .await
                .map(|_| ())
        });
    }
    let results = join_all(set).await;
    let accepted = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(
        accepted,
        limits::COMMENTS_MAX,
        "exactly the limit is accepted"
    );
    let full = StoreError::CommentLimit {
        issue: issue.id.clone(),
        max: limits::COMMENTS_MAX,
    };
    for refused in results.iter().filter_map(|r| r.as_ref().err()) {
        assert_eq!(refused, &full);
    }
    assert_eq!(
        full.to_string(),
        format!(
            "issue {} has reached its limit of {} comments",
            issue.id,
            limits::COMMENTS_MAX
        )
    );
    let stored = store.get_issue(&t, &issue.id).await.expect("get");
    assert_eq!(stored.comments.len(), limits::COMMENTS_MAX);
    assert_eq!(stored.version, 1 + limits::COMMENTS_MAX as u64);

    let k = key("full");
    let keyed = store
        .add_comment(&t, &author("run-2"), comment(&issue.id, "late"), Some(&k))
        .await;
    assert_eq!(keyed.map(|_| ()), Err(full));
    let other = store
        .create_issue(&t, &author("run-1"), new_issue("Quiet"), None)
        .await
        .expect("create")
        .issue;
    let landed = store
        .add_comment(&t, &author("run-2"), comment(&other.id, "late"), Some(&k))
        .await
        .expect("the refused key is still free");
    assert!(!landed.replayed);
}
