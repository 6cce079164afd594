//! Issue history: every kind of write leaves one change, with its author
//! and what it changed, paged newest first by version; a run's history
//! is what that run changed across the board.

use crate::fixtures::*;
use corkboard_board::{
    Author, BoardStore, Change, ChangeKind, Claimant, IssuePatch, IssueState, Labels, Priority,
    Timestamp,
};
use std::sync::Arc;
use std::time::Duration;

fn field<'a>(change: &'a Change, name: &str) -> &'a corkboard_board::FieldChange {
    change
        .fields
        .iter()
        .find(|f| f.field == name)
        .unwrap_or_else(|| panic!("no {name} in {change:?}"))
}

pub async fn case_history_records_every_kind_of_write<S: BoardStore>(store: Arc<S>) {
    let t = tenant("history");
    let writer = Author::run(
        run("run-w"),
        Some(corkboard_board::GrantId::generate()),
        corkboard_board::Integrity::Agent,
    );
    let mut new = new_issue("First title");
    new.labels = labels(&["a", "b"]);
    let created = store
        .create_issue(&t, &writer, new, None)
        .await
        .expect("create")
        .issue;
    let id = created.id.clone();
    let patch = IssuePatch {
        title: Some(title("Second title")),
        labels: Some(Labels::parse(["b", "c"]).unwrap()),
        priority: Some(Priority::High),
        actor: Some(writer.clone()),
        ..IssuePatch::default()
    };
    store
        .update_issue(&t, &id, patch, None)
        .await
        .expect("update");
    store
        .add_comment(&t, &writer, comment(&id, "a note"), None)
        .await
        .expect("comment");
    // Claims: taken and released by a run, taken by claim_next and left
    // to lapse, taken under a grant that is then revoked.
    let g = grant(&t, "run-c", Timestamp::now(), 3_600_000);
    store.record_grant(&g, &token_hash()).await.expect("grant");
    // Long enough that the claim, its renewal and its release come before
    // it lapses on a loaded machine.
    let lease = Duration::from_millis(1_000);
    let holder = Claimant {
        run: g.run.clone(),
        grant: g.id.clone(),
        expires_at: g.expires_at,
        lease: Some(lease),
        integrity: corkboard_board::Integrity::Agent,
    };
    store
        .claim_issue(&t, &id, &holder, None)
        .await
        .expect("claim");
    // A renewal is no change.
    store
        .claim_issue(&t, &id, &holder, None)
        .await
        .expect("renew");
    store
        .release_issue(&t, &id, &holder.run, None)
        .await
        .expect("release");
    let next = store
        .claim_next(&t, &corkboard_board::ListQuery::default(), &holder)
        .await
        .expect("claim_next");
    assert!(matches!(next, corkboard_board::ClaimNext::Claimed { .. }));
    tokio::time::sleep(lease + Duration::from_millis(50)).await;
    let expired = store
        .expire_claims(Timestamp::now(), 1_000)
        .await
        .expect("expire");
    assert!(expired.iter().any(|e| e.issue == id));
    store
        .claim_issue(&t, &id, &holder, None)
        .await
        .expect("claim again");
    store
        .record_revocation(&g.id, "admin-1", Timestamp::now())
        .await
        .expect("revoke");
    let close = IssuePatch {
        state: Some(IssueState::Done),
        actor: Some(writer.clone()),
        ..IssuePatch::default()
    };
    store
        .update_issue(&t, &id, close, None)
        .await
        .expect("close");
    let reopen = IssuePatch {
        state: Some(IssueState::Todo),
        actor: Some(writer.clone()),
        ..IssuePatch::default()
    };
    let last = store
        .update_issue(&t, &id, reopen, None)
        .await
        .expect("reopen");

    let all = store
        .issue_history(&t, &id, None, 100)
        .await
        .expect("history");
    assert_eq!(all.next_before, None);
    let kinds: Vec<ChangeKind> = all.changes.iter().map(|c| c.kind).collect();
    use ChangeKind::*;
    assert_eq!(
        kinds,
        [
            Updated,
            Updated,
            ClaimRevoked,
            Claimed,
            ClaimExpired,
            Claimed,
            Released,
            Claimed,
            Commented,
            Updated,
            Created
        ],
        "newest first: {:#?}",
        all.changes
    );
    // One change per version, the newest the issue's own.
    let versions: Vec<u64> = all.changes.iter().map(|c| c.version).collect();
    let expected: Vec<u64> = (1..=last.version).rev().collect();
    assert_eq!(versions, expected);
    let [
        reopened,
        closed,
        revoked,
        _,
        lapsed,
        _,
        released,
        claimed,
        commented,
        updated,
        made,
    ] = &all.changes[..]
    else {
        panic!("eleven changes");
    };
    assert_eq!(made.by, writer);
    assert_eq!(
        field(made, "title").after,
        Some(serde_json::json!("First title"))
    );
    assert_eq!(
        field(updated, "title").before,
        Some(serde_json::json!("First title"))
    );
    assert_eq!(
        field(updated, "title").after,
        Some(serde_json::json!("Second title"))
    );
    assert_eq!(field(updated, "labels").added, ["c"]);
    assert_eq!(field(updated, "labels").removed, ["a"]);
    assert_eq!(
        field(updated, "priority").after,
        Some(serde_json::json!("high"))
    );
    assert_eq!(field(commented, "comments").added.len(), 1);
    assert_eq!(claimed.by.run, holder.run);
    assert_eq!(
        field(claimed, "claim").after.as_ref().unwrap()["run"],
        "run-c"
    );
    assert_eq!(
        field(released, "claim").before.as_ref().unwrap()["run"],
        "run-c"
    );
    // A null side reads back as none.
    assert_eq!(field(released, "claim").after, None);
    assert_eq!(
        field(lapsed, "claim").before.as_ref().unwrap()["run"],
        "run-c"
    );
    assert!(field(revoked, "claim").before.is_some());
    assert_eq!(
        field(closed, "state").after,
        Some(serde_json::json!("done"))
    );
    assert_eq!(
        field(closed, "close_reason").after,
        Some(serde_json::json!("completed"))
    );
    assert_eq!(
        field(reopened, "state").before,
        Some(serde_json::json!("done"))
    );
    assert_eq!(field(reopened, "close_reason").after, None);

    // Paged newest first by version, without gaps or repeats.
    let mut seen = Vec::new();
    let mut before = None;
    loop {
        let page = store.issue_history(&t, &id, before, 4).await.expect("page");
        assert!(page.changes.len() <= 4);
        seen.extend(page.changes.iter().map(|c| c.version));
        match page.next_before {
            Some(next) => before = Some(u64::try_from(next).unwrap()),
            None => break,
        }
    }
    assert_eq!(seen, expected);

    // A run's history: what it changed, across issues, newest first (a
    // later millisecond, so the order does not rest on a tie).
    tokio::time::sleep(Duration::from_millis(5)).await;
    let other = store
        .create_issue(&t, &writer, new_issue("Other"), None)
        .await
        .expect("create other")
        .issue;
    let mine = store
        .run_history(&t, &run("run-c"), None, 100)
        .await
        .expect("run history");
    let kinds: Vec<ChangeKind> = mine.changes.iter().map(|c| c.kind).collect();
    assert_eq!(
        kinds,
        [Claimed, Claimed, Released, Claimed],
        "{:#?}",
        mine.changes
    );
    let writes = store
        .run_history(&t, &run("run-w"), None, 2)
        .await
        .expect("run history");
    assert_eq!(writes.changes[0].issue, other.id);
    assert_eq!(writes.changes.len(), 2);
    assert!(writes.next_before.is_some());
    // Another tenant's issue has no history here.
    let elsewhere = store
        .issue_history(&tenant("history-other"), &id, None, 10)
        .await
        .expect("history elsewhere");
    assert!(elsewhere.changes.is_empty());
}
