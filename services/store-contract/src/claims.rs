//! Relations, the lifecycle (close reasons, reopen) and atomic claims: one
//! winner among racing claimants, and a claim that ends on release, close,
//! revocation (through the ledger) and expiry.

use crate::fixtures::create_as_run_a as create;
use crate::fixtures::*;
use corkboard_board::{
    Author, AuthorKind, BlockedBy, BoardStore, ChangeKind, ClaimFilter, Claimant, CloseReason,
    CommentWindow, Grant, IssueId, IssuePatch, IssueState, ListQuery, StoreError, TenantId,
    Timestamp,
};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Barrier;
use tokio::task::JoinSet;

const HOUR: i64 = 3_600_000;
const CLAIMANTS: usize = 20;

/// Records a grant for `run_name` in the ledger and returns it with the
/// claimant it makes.
async fn claimant<S: BoardStore>(
    store: &S,
    t: &TenantId,
    run_name: &str,
    ttl_ms: i64,
) -> (Grant, Claimant) {
    let g = grant(t, run_name, Timestamp::now(), ttl_ms);
    store
        .record_grant(&g, &token_hash())
        .await
        .expect("record grant");
    let c = Claimant {
        run: g.run.clone(),
        grant: g.id.clone(),
        expires_at: g.expires_at,
        lease: None,
        integrity: corkboard_board::Integrity::Agent,
    };
    (g, c)
}

async fn unclaimed<S: BoardStore>(store: &S, t: &TenantId) -> Vec<IssueId> {
    let query = ListQuery {
        claim: ClaimFilter::Unclaimed,
        ..ListQuery::default()
    };
    let page = store.list_issues(t, &query).await.expect("list unclaimed");
    page.issues.iter().for_each(|i| {
        assert!(
            query.matches(i),
            "a listed issue fails the reference filter"
        )
    });
    page.issues.into_iter().map(|i| i.id).collect()
}

#[track_caller]
fn assert_claimed_by<T: std::fmt::Debug>(result: Result<T, StoreError>, run_name: &str) {
    match result {
        Err(StoreError::Claimed { run, .. }) if run.as_str() == run_name => {}
        other => panic!("expected Claimed by {run_name}, got {other:?}"),
    }
}

pub async fn case_claim_race_has_one_winner_until_revoked<S: BoardStore>(store: Arc<S>) {
    let t = tenant("claims");
    let id = create(&*store, &t, new_issue("Take me")).await;
    let mut claimants = Vec::new();
    for i in 0..CLAIMANTS {
        claimants.push(claimant(&*store, &t, &format!("run-{i}"), HOUR).await);
    }
    let barrier = Arc::new(Barrier::new(CLAIMANTS));
    let mut set = JoinSet::new();
    for (_, c) in claimants.iter().cloned() {
        let (store, t, id, barrier) = (store.clone(), t.clone(), id.clone(), barrier.clone());
        set.spawn(async move {
            barrier.wait().await;
            let result = store.claim_issue(&t, &id, &c, None).await;
            (c.run, result)
        });
    }
    let mut winners = Vec::new();
    let mut losers = Vec::new();
    while let Some(joined) = set.join_next().await {
        let (run, result) = joined.expect("claimant task");
        match result {
            Ok(issue) => winners.push((run, issue)),
            Err(err) => losers.push((run, err)),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one claimant wins: {winners:?}");
    let (winner, issue) = winners.pop().expect("a winner");
    assert_eq!(issue.claim.as_ref().map(|c| &c.run), Some(&winner));
    assert_eq!(issue.version, 2, "a claim is one change");
    for (run, err) in &losers {
        match err {
            StoreError::Claimed { run: holder, .. } => {
                assert_eq!(holder, &winner, "{run} is told who holds it")
            }
            other => panic!("{run}: expected Claimed, got {other:?}"),
        }
        assert!(!err.is_retryable());
    }
    assert!(!unclaimed(&*store, &t).await.contains(&id));
    let mine = ListQuery {
        claim: ClaimFilter::ClaimedBy(winner.clone()),
        ..ListQuery::default()
    };
    let page = store.list_issues(&t, &mine).await.expect("list claimed_by");
    assert_eq!(page.issues.len(), 1);

    // Revoking the winner's grant through the ledger ends its claim.
    let (winner_grant, _) = claimants
        .iter()
        .find(|(g, _)| g.run == winner)
        .expect("winner's grant");
    store
        .record_revocation(&winner_grant.id, "contract", Timestamp::now())
        .await
        .expect("revoke");
    assert!(
        unclaimed(&*store, &t).await.contains(&id),
        "after revocation the issue is back in the pool"
    );
    let (_, next) = claimants
        .iter()
        .find(|(g, _)| g.run != winner)
        .expect("another claimant");
    let taken = store
        .claim_issue(&t, &id, next, None)
        .await
        .expect("another run can claim it now");
    assert_eq!(taken.claim.map(|c| c.run), Some(next.run.clone()));
}

pub async fn case_claim_expires_with_its_grant<S: BoardStore>(store: Arc<S>) {
    let t = tenant("claim-expiry");
    let id = create(&*store, &t, new_issue("Short lived")).await;
    let (_, short) = claimant(&*store, &t, "run-short", 3_000).await;
    let (_, other) = claimant(&*store, &t, "run-other", HOUR).await;
    store
        .claim_issue(&t, &id, &short, None)
        .await
        .expect("claim");
    assert_claimed_by(store.claim_issue(&t, &id, &other, None).await, "run-short");
    // Wait until the grant has expired (no background job involved).
    let wait = short.expires_at.as_millis() - Timestamp::now().as_millis() + 50;
    tokio::time::sleep(Duration::from_millis(wait.max(0) as u64)).await;
    let read = store.get_issue(&t, &id).await.expect("get");
    assert_eq!(read.claim, None, "an expired claim reads as none");
    assert!(unclaimed(&*store, &t).await.contains(&id));
    let taken = store
        .claim_issue(&t, &id, &other, None)
        .await
        .expect("an expired claim is taken over");
    assert_eq!(taken.claim.map(|c| c.run), Some(other.run));
}

pub async fn case_claim_release_close_and_versions<S: BoardStore>(store: Arc<S>) {
    let t = tenant("claim-life");
    let id = create(&*store, &t, new_issue("Work item")).await;
    let (_, a) = claimant(&*store, &t, "run-a", HOUR).await;
    let (_, b) = claimant(&*store, &t, "run-b", HOUR).await;
    assert!(matches!(
        store.claim_issue(&t, &id, &a, Some(7)).await,
        Err(StoreError::VersionConflict {
            expected: 7,
            actual: 1
        })
    ));
    let claimed = store
        .claim_issue(&t, &id, &a, Some(1))
        .await
        .expect("claim");
    assert_eq!(claimed.version, 2);
    let again = store
        .claim_issue(&t, &id, &a, None)
        .await
        .expect("claiming one's own claim again succeeds");
    assert_eq!(again.version, 2, "and changes nothing");
    assert_claimed_by(store.release_issue(&t, &id, &b.run, None).await, "run-a");
    let released = store
        .release_issue(&t, &id, &a.run, Some(2))
        .await
        .expect("release");
    assert_eq!(released.claim, None);
    assert_eq!(released.version, 3);
    assert!(matches!(
        store.release_issue(&t, &id, &a.run, None).await,
        Err(StoreError::NotClaimed { .. })
    ));
    store
        .claim_issue(&t, &id, &b, None)
        .await
        .expect("b claims");
    let closed = store
        .update_issue(&t, &id, state_patch(IssueState::Done), None)
        .await
        .expect("close");
    assert_eq!(closed.claim, None, "closing ends the claim");
    assert_eq!(closed.close_reason, Some(CloseReason::Completed));
    assert_eq!(store.get_issue(&t, &id).await.expect("get").claim, None);
    assert!(matches!(
        store.claim_issue(&t, &id, &a, None).await,
        Err(StoreError::NotClaimable { .. })
    ));
    assert_not_found(
        store.claim_issue(&t, &IssueId::generate(), &a, None).await,
        "claiming an unknown issue",
    );
    let other_tenant = tenant("claim-other");
    assert_not_found(
        store.claim_issue(&other_tenant, &id, &a, None).await,
        "claiming another tenant's issue",
    );
}

/// A person's hand-over moves the claim in one write at the version they
/// saw: from a holder, or from nobody, to another run; a claimant racing
/// the hand-over either wins before it (and the hand-over fails on the
/// version) or loses to it, never takes the issue between release and
/// claim. Done issues and moved versions are refused.
pub async fn case_claim_hand_over_is_one_write<S: BoardStore>(store: Arc<S>) {
    let t = tenant("claim-handover");
    let person = Author::principal(AuthorKind::Person, "ada@example.com");
    let id = create(&*store, &t, new_issue("Stuck work")).await;
    let (_, a) = claimant(&*store, &t, "run-a", HOUR).await;
    let (_, b) = claimant(&*store, &t, "run-b", HOUR).await;
    let (_, c) = claimant(&*store, &t, "run-c", HOUR).await;
    let claimed = store.claim_issue(&t, &id, &a, None).await.expect("claim");
    assert_eq!(claimed.version, 2);
    assert!(matches!(
        store.hand_over_claim(&t, &id, &b, &person, 1).await,
        Err(StoreError::VersionConflict {
            expected: 1,
            actual: 2
        })
    ));
    let handed = store
        .hand_over_claim(&t, &id, &b, &person, 2)
        .await
        .expect("hand over from a to b");
    assert_eq!(handed.claim.as_ref().map(|c| &c.run), Some(&b.run));
    assert_eq!(handed.version, 3, "the hand-over is one change, not two");
    // The history names the person, and the claim before and after.
    let history = store
        .issue_history(&t, &id, None, 1)
        .await
        .expect("history");
    let change = &history.changes[0];
    assert_eq!(change.kind, ChangeKind::Claimed);
    assert_eq!(change.version, 3);
    assert_eq!(change.by, person, "the person who handed it over");
    let claim = &change.fields[0];
    assert_eq!(claim.field, "claim");
    assert_eq!(
        claim.before.as_ref().map(|c| &c["run"]),
        Some(&json!("run-a"))
    );
    assert_eq!(
        claim.after.as_ref().map(|c| &c["run"]),
        Some(&json!("run-b"))
    );
    assert_claimed_by(store.claim_issue(&t, &id, &c, None).await, "run-b");
    assert_claimed_by(store.release_issue(&t, &id, &a.run, None).await, "run-b");

    // A claimant racing a hand-over: whoever writes first wins; the issue
    // never reads unclaimed in between, and c never ends up holding it
    // after the hand-over succeeded.
    for round in 0..5 {
        let version = store.get_issue(&t, &id).await.expect("get").version;
        let barrier = Arc::new(Barrier::new(2));
        let racer = {
            let (store, t, id, c, barrier) = (
                store.clone(),
                t.clone(),
                id.clone(),
                c.clone(),
                barrier.clone(),
            );
            tokio::spawn(async move {
                barrier.wait().await;
                store.claim_issue(&t, &id, &c, None).await
            })
        };
        barrier.wait().await;
        let to = if round % 2 == 0 { &a } else { &b };
        let handed = store.hand_over_claim(&t, &id, to, &person, version).await;
        // Refused naming the old holder (before) or the new one (after).
        match racer.await.expect("racer") {
            Err(StoreError::Claimed { run, .. }) => assert_ne!(run, c.run),
            other => panic!("a racing claim must find the issue held, got {other:?}"),
        }
        let now = store.get_issue(&t, &id).await.expect("get");
        let handed = handed.expect("the hand-over at the version read wins");
        assert_eq!(handed.version, version + 1);
        assert_eq!(now.claim.map(|c| c.run), Some(to.run.clone()));
    }

    // From nobody: a hand-over of an unclaimed issue is a claim.
    let free = create(&*store, &t, new_issue("Free work")).await;
    let given = store
        .hand_over_claim(&t, &free, &c, &person, 1)
        .await
        .expect("hand over an unclaimed issue");
    assert_eq!(given.claim.map(|claim| claim.run), Some(c.run.clone()));
    let closed = store
        .update_issue(&t, &free, state_patch(IssueState::Done), None)
        .await
        .expect("close");
    assert!(matches!(
        store
            .hand_over_claim(&t, &free, &a, &person, closed.version)
            .await,
        Err(StoreError::NotClaimable { .. })
    ));
    assert_not_found(
        store
            .hand_over_claim(&t, &IssueId::generate(), &a, &person, 1)
            .await,
        "handing over an unknown issue",
    );
    assert_not_found(
        store
            .hand_over_claim(&tenant("claim-handover-other"), &id, &a, &person, 1)
            .await,
        "handing over another tenant's issue",
    );
}

pub async fn case_close_reasons_and_reopen<S: BoardStore>(store: Arc<S>) {
    let t = tenant("lifecycle");
    let original = create(&*store, &t, new_issue("Original")).await;
    let copy = create(&*store, &t, new_issue("Copy")).await;
    let close = |reason: Option<CloseReason>, dup: Option<IssueId>| IssuePatch {
        state: Some(IssueState::Closed),
        close_reason: reason,
        duplicate_of: dup.map(Some),
        ..IssuePatch::default()
    };
    assert_invalid(
        store
            .update_issue(&t, &copy, close(Some(CloseReason::Duplicate), None), None)
            .await,
        "close_reason",
        "duplicate without duplicate_of",
    );
    let closed = store
        .update_issue(
            &t,
            &copy,
            close(Some(CloseReason::Duplicate), Some(original.clone())),
            Some(1),
        )
        .await
        .expect("close as duplicate");
    assert_eq!(closed.close_reason, Some(CloseReason::Duplicate));
    assert_eq!(closed.duplicate_of.as_ref(), Some(&original));
    assert_eq!(closed.version, 2);
    assert_eq!(store.get_issue(&t, &copy).await.expect("get"), closed);
    assert!(matches!(
        store
            .update_issue(
                &t,
                &copy,
                close(Some(CloseReason::NotPlanned), None),
                Some(1)
            )
            .await,
        Err(StoreError::VersionConflict { .. })
    ));
    let reopened = store
        .update_issue(
            &t,
            &copy,
            IssuePatch {
                state: Some(IssueState::Todo),
                ..IssuePatch::default()
            },
            Some(2),
        )
        .await
        .expect("reopen");
    assert_eq!(reopened.close_reason, None, "reopening clears the reason");
    assert_eq!(reopened.version, 3);
    assert_invalid(
        store
            .update_issue(
                &t,
                &copy,
                IssuePatch {
                    close_reason: Some(CloseReason::Completed),
                    ..IssuePatch::default()
                },
                None,
            )
            .await,
        "close_reason",
        "a reason on an open issue",
    );
    let mut new = new_issue("Born closed");
    new.state = IssueState::Closed;
    new.close_reason = Some(CloseReason::NotPlanned);
    let born = store
        .create_issue(&t, &author("run-a"), new, None)
        .await
        .expect("create closed");
    assert_eq!(born.issue.close_reason, Some(CloseReason::NotPlanned));
    assert_eq!(
        store.get_issue(&t, &born.issue.id).await.expect("get"),
        born.issue
    );
}

/// An issue's view shows the newest `INVERSE_MAX` of its children and of
/// the issues it blocks, newest first, and says when there are more; the
/// same with comments on it (the view's count and window agree).
pub async fn case_issue_view_shows_the_newest_inverse_relations<S: BoardStore>(store: Arc<S>) {
    use corkboard_board::relation_limits::INVERSE_MAX;
    let t = tenant("inverse-relations");
    let root = create(&*store, &t, new_issue("Root")).await;
    let mut ids = Vec::new();
    for i in 0..=INVERSE_MAX {
        let mut new = new_issue(&format!("Dependent {i}"));
        new.parent = Some(root.clone());
        // Every other one blocked by the root as well.
        if i % 2 == 0 {
            new.blocked_by = BlockedBy::parse([root.clone()]).expect("blocked_by");
        }
        ids.push(create(&*store, &t, new).await);
    }
    let newest_first = |ids: &[IssueId]| {
        let mut ids = ids.to_vec();
        ids.sort();
        ids.reverse();
        ids
    };
    let children = newest_first(&ids);
    let blocked = newest_first(&ids.iter().step_by(2).cloned().collect::<Vec<_>>());
    for with_comment in [false, true] {
        if with_comment {
            store
                .add_comment(&t, &author("run-a"), comment(&root, "A note"), None)
                .await
                .expect("comment");
        }
        let view = store
            .get_issue_view(&t, &root, &CommentWindow::all())
            .await
            .expect("view");
        assert_eq!(view.children, children[..INVERSE_MAX].to_vec());
        assert!(view.more_children, "{} children", children.len());
        assert_eq!(view.blocks, blocked);
        assert!(!view.more_blocks);
        assert_eq!(view.issue.comments.len(), usize::from(with_comment));
    }
    let leaf = store
        .get_issue_view(&t, &ids[1], &CommentWindow::all())
        .await
        .expect("leaf view");
    assert!(leaf.children.is_empty() && leaf.blocks.is_empty());
    assert!(!leaf.more_children && !leaf.more_blocks);
    // More than twice the bound related in either way (a store may read
    // both kinds at once while fewer are): each list is still the newest
    // of its own kind, neither crowded out by the other.
    let mut only_blocked = Vec::new();
    for i in 0..=INVERSE_MAX + 1 {
        let mut new = new_issue(&format!("Blocked only {i}"));
        new.blocked_by = BlockedBy::parse([root.clone()]).expect("blocked_by");
        only_blocked.push(create(&*store, &t, new).await);
    }
    let view = store
        .get_issue_view(&t, &root, &CommentWindow::all())
        .await
        .expect("view of a crowded root");
    assert_eq!(view.children, children[..INVERSE_MAX].to_vec());
    assert!(view.more_children);
    let blocked = newest_first(&[blocked, only_blocked].concat());
    assert_eq!(view.blocks, blocked[..INVERSE_MAX].to_vec());
    assert!(view.more_blocks);
}

pub async fn case_relations_are_checked_and_shown<S: BoardStore>(store: Arc<S>) {
    let t = tenant("relations");
    let other = tenant("relations-other");
    let root = create(&*store, &t, new_issue("Root")).await;
    let foreign = create(&*store, &other, new_issue("Elsewhere")).await;
    let mut child = new_issue("Child");
    child.parent = Some(root.clone());
    child.blocked_by = BlockedBy::parse([root.clone()]).expect("blocked_by");
    let child = store
        .create_issue(&t, &author("run-a"), child, None)
        .await
        .expect("create child")
        .issue;
    assert_eq!(child.parent.as_ref(), Some(&root));
    let mut grandchild = new_issue("Grandchild");
    grandchild.parent = Some(child.id.clone());
    let grandchild = create(&*store, &t, grandchild).await;

    // Another tenant's id reads exactly like a missing one.
    for id in [foreign.clone(), IssueId::generate()] {
        let mut bad = new_issue("Bad parent");
        bad.parent = Some(id.clone());
        match store.create_issue(&t, &author("run-a"), bad, None).await {
            Err(StoreError::UnknownRelated {
                field: "parent",
                id: got,
            }) => assert_eq!(got, id),
            other => panic!("expected UnknownRelated, got {other:?}"),
        }
        let patch = IssuePatch {
            blocked_by: Some(BlockedBy::parse([id.clone()]).expect("blocked_by")),
            ..IssuePatch::default()
        };
        assert!(matches!(
            store.update_issue(&t, &root, patch, None).await,
            Err(StoreError::UnknownRelated {
                field: "blocked_by",
                ..
            })
        ));
    }
    // A cycle: the root under its own grandchild.
    let cycle = IssuePatch {
        parent: Some(Some(grandchild.clone())),
        ..IssuePatch::default()
    };
    assert!(matches!(
        store.update_issue(&t, &root, cycle, None).await,
        Err(StoreError::RelationCycle { .. })
    ));
    let own = IssuePatch {
        parent: Some(Some(root.clone())),
        ..IssuePatch::default()
    };
    assert_invalid(
        store.update_issue(&t, &root, own, None).await,
        "parent",
        "an issue as its own parent",
    );
    let own_block = IssuePatch {
        blocked_by: Some(BlockedBy::parse([root.clone()]).expect("blocked_by")),
        ..IssuePatch::default()
    };
    assert_invalid(
        store.update_issue(&t, &root, own_block, None).await,
        "blocked_by",
        "an issue blocked by itself",
    );
    assert_eq!(
        store.get_issue(&t, &root).await.expect("get").version,
        1,
        "refused changes write nothing"
    );

    let view = store
        .get_issue_view(&t, &root, &CommentWindow::all())
        .await
        .expect("view");
    assert_eq!(view.children, vec![child.id.clone()]);
    assert_eq!(view.blocks, vec![child.id.clone()]);
    assert!(!view.more_children && !view.more_blocks);
    let query = ListQuery {
        parent: Some(root.clone()),
        ..ListQuery::default()
    };
    let page = store.list_issues(&t, &query).await.expect("list children");
    assert_eq!(
        page.issues.iter().map(|i| i.id.clone()).collect::<Vec<_>>(),
        vec![child.id.clone()]
    );

    // Clearing relations: the inverse ones follow.
    let cleared = store
        .update_issue(
            &t,
            &child.id,
            IssuePatch {
                parent: Some(None),
                blocked_by: Some(BlockedBy::default()),
                ..IssuePatch::default()
            },
            Some(1),
        )
        .await
        .expect("clear relations");
    assert_eq!(cleared.parent, None);
    assert!(cleared.blocked_by.is_empty());
    assert_eq!(cleared.version, 2);
    let view = store
        .get_issue_view(&t, &root, &CommentWindow::all())
        .await
        .expect("view");
    assert!(
        view.children.is_empty() && view.blocks.is_empty(),
        "{view:?}"
    );
    // Re-parenting the former child under the grandchild is now a cycle.
    let moved = IssuePatch {
        parent: Some(Some(grandchild.clone())),
        ..IssuePatch::default()
    };
    assert!(matches!(
        store.update_issue(&t, &child.id, moved, None).await,
        Err(StoreError::RelationCycle { .. })
    ));
}
