//! The comment window of `get_issue_view`: the store reads only the
//! comments a [`CommentWindow`] selects, and its answer agrees with
//! [`CommentWindow::cut`] on the whole comment list.

use crate::fixtures::*;
use corkboard_board::{
    BoardStore, Claimant, Comment, CommentFacts, CommentId, CommentWindow, Integrity, IssueId,
    Timestamp, ViewSince,
};
use std::sync::Arc;
use std::time::Duration;

/// Adds comments of the given body sizes (each body names its place) and
/// returns them all, oldest first.
async fn commented<S: BoardStore>(
    store: &S,
    t: &corkboard_board::TenantId,
    sizes: &[usize],
) -> (IssueId, Vec<Comment>) {
    let who = author("run-1");
    let issue = store
        .create_issue(t, &who, new_issue("Windowed"), None)
        .await
        .expect("create")
        .issue;
    for (i, &size) in sizes.iter().enumerate() {
        let mut body = format!("comment {i} ");
        body.push_str(&"x".repeat(size.saturating_sub(body.len())));
        store
            .add_comment(t, &who, comment(&issue.id, &body), None)
            .await
            .expect("add comment");
    }
    let whole = store.get_issue(t, &issue.id).await.expect("get");
    assert_eq!(whole.comments.len(), sizes.len());
    (issue.id, whole.comments)
}

/// What the store reads for `window`, checked against the reference cut of
/// the whole list.
async fn read<S: BoardStore>(
    store: &S,
    t: &corkboard_board::TenantId,
    id: &IssueId,
    all: &[Comment],
    window: &CommentWindow,
) -> (Vec<Comment>, CommentFacts) {
    let view = store
        .get_issue_view(t, id, window)
        .await
        .expect("windowed read");
    let expected = window.cut(all.to_vec());
    assert_eq!(
        (&view.issue.comments, &view.comment_facts),
        (&expected.0, &expected.1),
        "{window:?} reads what CommentWindow::cut selects"
    );
    (view.issue.comments, view.comment_facts)
}

pub async fn case_comment_window_is_the_newest_comments_with_counts<S: BoardStore>(store: Arc<S>) {
    let t = tenant("window-newest");
    let (id, all) = commented(&*store, &t, &[20; 25]).await;
    let (shown, facts) = read(&*store, &t, &id, &all, &CommentWindow::latest(10)).await;
    assert_eq!(shown, all[15..], "the newest ten, oldest first");
    assert_eq!(
        facts,
        CommentFacts {
            total: 25,
            older: 15,
            over_bytes: 0,
            before_found: true
        }
    );
    // More than there are: all of them, none left out.
    let (shown, facts) = read(&*store, &t, &id, &all, &CommentWindow::all()).await;
    assert_eq!(shown, all);
    assert_eq!((facts.total, facts.older), (25, 0));
    // The rest of the issue is as a whole read has it.
    let view = store
        .get_issue_view(&t, &id, &CommentWindow::latest(1))
        .await
        .expect("view");
    let mut whole = store.get_issue(&t, &id).await.expect("get");
    whole.comments.drain(..24);
    assert_eq!(view.issue, whole);
    // An issue without comments.
    let bare = store
        .create_issue(&t, &author("run-1"), new_issue("Bare"), None)
        .await
        .expect("create")
        .issue;
    let (shown, facts) = read(&*store, &t, &bare.id, &[], &CommentWindow::latest(10)).await;
    assert!(shown.is_empty());
    assert_eq!((facts.total, facts.older, facts.before_found), (0, 0, true));
}

pub async fn case_comment_window_pages_back_without_gaps_or_repeats<S: BoardStore>(store: Arc<S>) {
    let t = tenant("window-paging");
    let (id, all) = commented(&*store, &t, &[12; 23]).await;
    let mut seen: Vec<Comment> = Vec::new();
    let mut window = CommentWindow::latest(7);
    loop {
        let (shown, facts) = read(&*store, &t, &id, &all, &window).await;
        assert_eq!(facts.total, 23);
        assert!(!shown.is_empty(), "a page of a known cursor is never empty");
        let first = shown[0].id.clone();
        seen.splice(0..0, shown);
        if facts.older == 0 {
            break;
        }
        assert_eq!(facts.older, 23 - seen.len());
        window = CommentWindow::latest(7).before(first);
    }
    assert_eq!(seen, all, "every comment once, in order");

    // A cursor that is no comment of this issue: not found, nothing shown,
    // whether it is made up or another issue's comment.
    let (other, other_comments) = commented(&*store, &t, &[5; 2]).await;
    for before in [CommentId::generate(), other_comments[0].id.clone()] {
        let (shown, facts) = read(
            &*store,
            &t,
            &id,
            &all,
            &CommentWindow::latest(5).before(before),
        )
        .await;
        assert!(shown.is_empty());
        assert!(!facts.before_found);
        assert_eq!(facts.total, 23);
    }
    // The oldest comment as cursor: nothing older.
    let (shown, facts) = read(
        &*store,
        &t,
        &other,
        &other_comments,
        &CommentWindow::latest(5).before(other_comments[0].id.clone()),
    )
    .await;
    assert!(shown.is_empty());
    assert!(facts.before_found);
    assert_eq!((facts.older, facts.total), (0, 2));
}

pub async fn case_comment_window_stops_at_its_byte_bound<S: BoardStore>(store: Arc<S>) {
    let t = tenant("window-bytes");
    let sizes = [1000, 3000, 1000, 1000, 2000, 1000];
    let (id, all) = commented(&*store, &t, &sizes).await;
    // Newest first: 1000, 3000 (4000 > 2500, stop).
    let window = CommentWindow::all().max_bytes(2500);
    let (shown, facts) = read(&*store, &t, &id, &all, &window).await;
    assert_eq!(shown, all[4..]);
    assert_eq!(
        facts,
        CommentFacts {
            total: 6,
            older: 4,
            over_bytes: 4,
            before_found: true
        }
    );
    // Exactly at the bound is not over it: the next one is read too.
    let (shown, _) = read(
        &*store,
        &t,
        &id,
        &all,
        &CommentWindow::all().max_bytes(3000),
    )
    .await;
    assert_eq!(shown, all[3..]);
    // At least one, however small the bound.
    let (shown, facts) = read(&*store, &t, &id, &all, &CommentWindow::all().max_bytes(0)).await;
    assert_eq!(shown, all[5..]);
    assert_eq!(facts.over_bytes, 5);
    // With a cursor, the bound counts from the cursor on.
    let window = CommentWindow::latest(3)
        .before(all[4].id.clone())
        .max_bytes(1500);
    let (shown, facts) = read(&*store, &t, &id, &all, &window).await;
    assert_eq!(shown, all[2..4]);
    assert_eq!((facts.older, facts.over_bytes), (2, 1));
    // Every comment at 64 KiB-ish bodies: the bound keeps the read small.
    let (big, big_all) = commented(&*store, &t, &[60_000; 8]).await;
    let (shown, facts) = read(
        &*store,
        &t,
        &big,
        &big_all,
        &CommentWindow::all().max_bytes(32_000),
    )
    .await;
    assert_eq!(shown.len(), 1);
    assert_eq!((facts.older, facts.over_bytes, facts.total), (7, 7, 8));
}

pub async fn case_comment_window_of_another_tenants_issue_is_missing<S: BoardStore>(store: Arc<S>) {
    let owner = tenant("window-owner");
    let other = tenant("window-other");
    let (id, all) = commented(&*store, &owner, &[10; 3]).await;
    for window in [
        CommentWindow::latest(10),
        CommentWindow::latest(10).before(all[2].id.clone()),
    ] {
        assert_not_found(
            store.get_issue_view(&other, &id, &window).await,
            "a windowed read of another tenant's issue",
        );
    }
    assert_not_found(
        store
            .get_issue_view(&owner, &IssueId::generate(), &CommentWindow::latest(10))
            .await,
        "a windowed read of an id never created",
    );
}

/// `get_issue_view_since`: the view as `get_issue_view` reads it, with the
/// tenant's epoch when the store keeps one; `Unchanged` for that epoch only
/// while nothing of the tenant's was written, never after a write to the
/// issue (its title, a comment, a claim and its release) or to another of
/// the tenant's issues; another tenant's writes leave it standing.
/// `tenant_epoch` answers the same epoch throughout.
pub async fn case_issue_view_since_an_epoch_sees_every_later_write<S: BoardStore>(store: Arc<S>) {
    let t = tenant("view-since");
    let who = author("run-1");
    let window = CommentWindow::latest(10);
    let (id, _) = commented(&*store, &t, &[10; 2]).await;
    let read = |seen: Option<u64>| {
        let (store, t, id, window) = (store.clone(), t.clone(), id.clone(), window.clone());
        async move {
            store
                .get_issue_view_since(&t, &id, &window, seen)
                .await
                .expect("view since")
        }
    };
    let tenant_epoch = || {
        let (store, t) = (store.clone(), t.clone());
        async move { store.tenant_epoch(&t).await.expect("tenant epoch") }
    };
    let ViewSince::Read { view, epoch } = read(None).await else {
        panic!("no epoch given: the view is read");
    };
    let plain = store.get_issue_view(&t, &id, &window).await.expect("view");
    assert_eq!(*view, plain, "the same view as get_issue_view");
    let Some(epoch) = epoch else {
        // A store without an epoch: every read is a read.
        assert!(matches!(
            read(Some(0)).await,
            ViewSince::Read { epoch: None, .. }
        ));
        assert_eq!(tenant_epoch().await, None, "no epoch at all");
        return;
    };
    assert_eq!(read(Some(epoch)).await, ViewSince::Unchanged);
    assert_eq!(tenant_epoch().await, Some(epoch), "the same epoch");
    assert!(
        matches!(read(Some(epoch + 1)).await, ViewSince::Read { .. }),
        "another epoch than the board's: read"
    );

    // After each write: the old epoch reads the view as it is now, and the
    // new one is unchanged until the next write.
    let moved = |epoch: u64, write: &'static str| {
        let (store, t, id, window) = (store.clone(), t.clone(), id.clone(), window.clone());
        async move {
            let ViewSince::Read { view, epoch: now } = read(Some(epoch)).await else {
                panic!("after a write ({write}) the epoch {epoch} is no longer the board's");
            };
            let plain = store.get_issue_view(&t, &id, &window).await.expect("view");
            assert_eq!(
                *view, plain,
                "after a write ({write}): the view as it is now"
            );
            let now = now.expect("a store with an epoch keeps giving one");
            assert_eq!(read(Some(now)).await, ViewSince::Unchanged);
            assert_eq!(tenant_epoch().await, Some(now), "after a write ({write})");
            now
        }
    };
    store
        .update_issue(&t, &id, title_patch("Windowed, retitled"), None)
        .await
        .expect("retitle");
    let epoch = moved(epoch, "retitle").await;
    store
        .add_comment(&t, &who, comment(&id, "one more"), None)
        .await
        .expect("comment");
    let epoch = moved(epoch, "comment").await;
    store
        .create_issue(&t, &who, new_issue("Another"), None)
        .await
        .expect("create");
    let epoch = moved(epoch, "another issue").await;
    let claimant = Claimant::of(
        &grant(&t, "run-1", Timestamp::now(), 3_600_000),
        Duration::from_secs(600),
        Integrity::Agent,
    );
    store
        .claim_issue(&t, &id, &claimant, None)
        .await
        .expect("claim");
    let epoch = moved(epoch, "claim").await;
    store
        .release_issue(&t, &id, &claimant.run, None)
        .await
        .expect("release");
    let epoch = moved(epoch, "release").await;

    // Another tenant's writes: the epoch stands.
    let other = tenant("view-since-other");
    let (other_id, _) = commented(&*store, &other, &[10]).await;
    store
        .update_issue(&other, &other_id, title_patch("Elsewhere"), None)
        .await
        .expect("another tenant's retitle");
    assert_eq!(
        read(Some(epoch)).await,
        ViewSince::Unchanged,
        "another tenant's writes move this tenant's epoch"
    );
    assert_eq!(tenant_epoch().await, Some(epoch), "after another tenant's");
    assert_eq!(
        store
            .get_issue_view(&t, &id, &window)
            .await
            .expect("view")
            .issue
            .title
            .as_str(),
        "Windowed, retitled"
    );
}
