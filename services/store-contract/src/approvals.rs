//! People in the loop: who wrote an issue or a comment (a run, a person, an
//! admin caller) reads back as written, and approval items are stored,
//! listed, found by their call, decided once and used once.

use crate::fixtures::*;
use corkboard_board::{
    ApprovalItem, ApprovalPolicy, ApprovalStatus, Author, AuthorKind, BoardStore, Decision,
    GrantId, Timestamp, arguments_digest,
};
use serde_json::json;
use std::sync::Arc;

pub async fn case_authors_keep_their_kind<S: BoardStore>(store: Arc<S>) {
    let t = tenant("authors");
    let person = Author::principal(AuthorKind::Person, "alice@example.com");
    assert_eq!(person.run.as_str(), "alice_example.com");
    let created = store
        .create_issue(&t, &person, new_issue("Filed by a person"), None)
        .await
        .expect("create as a person")
        .issue;
    let admin = Author::principal(AuthorKind::Admin, "ci-bot");
    store
        .add_comment(&t, &admin, comment(&created.id, "from a script"), None)
        .await
        .expect("comment as an admin caller");
    let agent = author("run-1");
    store
        .add_comment(&t, &agent, comment(&created.id, "from a run"), None)
        .await
        .expect("comment as a run");
    let read = store.get_issue(&t, &created.id).await.expect("get");
    assert_eq!(read.author, person);
    assert_eq!(read.author.kind, AuthorKind::Person);
    let kinds: Vec<AuthorKind> = read.comments.iter().map(|c| c.author.kind).collect();
    assert_eq!(kinds, [AuthorKind::Admin, AuthorKind::Run]);
    assert_eq!(read.comments[0].author, admin);
}

fn policy() -> ApprovalPolicy {
    ApprovalPolicy {
        name: "closing".into(),
        tool: "update_issue".into(),
        grants: vec![],
        arguments: vec![],
        ttl_secs: Some(60),
        version: 3,
    }
}

pub async fn case_approvals_are_decided_once_and_used_once<S: BoardStore>(store: Arc<S>) {
    let t = tenant("approvals");
    let other = tenant("approvals-other");
    let now = Timestamp::now();
    let arguments = json!({"id": "x", "state": "closed"});
    let arguments = arguments.as_object().expect("an object");
    let grant = GrantId::generate();
    let item = ApprovalItem::new(
        t.clone(),
        run("run-1"),
        grant.clone(),
        "update_issue",
        arguments,
        &policy(),
        now,
    );
    store.put_approval(&item).await.expect("put");
    assert_eq!(
        store.approval(&t, &item.id).await.expect("read"),
        Some(item.clone())
    );
    assert_eq!(
        store.approval(&other, &item.id).await.expect("read"),
        None,
        "another tenant's item reads as missing"
    );
    let digest = arguments_digest(arguments);
    let found = store
        .approval_for_call(&t, &run("run-1"), "update_issue", &digest)
        .await
        .expect("by call");
    assert_eq!(found.as_ref().map(|i| &i.id), Some(&item.id));
    assert_eq!(
        store
            .approval_for_call(&t, &run("run-2"), "update_issue", &digest)
            .await
            .expect("by call"),
        None
    );
    let pending = store
        .list_approvals(&t, Some(ApprovalStatus::Pending), 10)
        .await
        .expect("list");
    assert_eq!(pending.len(), 1);
    assert!(
        !store.use_approval(&t, &item.id, now).await.expect("use"),
        "a pending item cannot be used"
    );

    let approve = Decision {
        approve: true,
        by: "alice".into(),
        reason: Some("fine".into()),
        at: now,
    };
    let deny = Decision {
        approve: false,
        by: "bob".into(),
        reason: None,
        at: now,
    };
    // Racing deciders: exactly one decision sticks.
    let (a, b) = tokio::join!(
        store.decide_approval(&t, &item.id, &approve),
        store.decide_approval(&t, &item.id, &deny)
    );
    let (a, b) = (a.expect("decide"), b.expect("decide"));
    assert_eq!(a.status, b.status, "both see the one decision that won");
    let decided = a.status;
    assert_ne!(decided, ApprovalStatus::Pending);
    assert!(
        store
            .decide_approval(&other, &item.id, &approve)
            .await
            .is_err(),
        "another tenant cannot decide it"
    );
    if decided == ApprovalStatus::Denied {
        assert!(!store.use_approval(&t, &item.id, now).await.expect("use"));
        return;
    }
    // Racing uses: exactly one runs the call.
    let racers: Vec<_> = (0..8)
        .map(|_| {
            let (store, t, id) = (store.clone(), t.clone(), item.id.clone());
            tokio::spawn(async move { store.use_approval(&t, &id, now.plus_millis(1)).await })
        })
        .collect();
    let mut ran = 0;
    for racer in racers {
        if racer.await.expect("join").expect("use") {
            ran += 1;
        }
    }
    assert_eq!(ran, 1, "an approval runs its call once");
    let spent = store
        .approval(&t, &item.id)
        .await
        .expect("read")
        .expect("kept");
    assert_eq!(spent.status, ApprovalStatus::Used);
    assert_eq!(
        store
            .approval_for_call(&t, &run("run-1"), "update_issue", &digest)
            .await
            .expect("by call"),
        None,
        "a used item is not collected again"
    );

    // An approved item past its expiry is not used.
    let late = ApprovalItem::new(
        t.clone(),
        run("run-1"),
        grant,
        "update_issue",
        arguments,
        &policy(),
        now,
    );
    store.put_approval(&late).await.expect("put");
    store
        .decide_approval(&t, &late.id, &approve)
        .await
        .expect("decide");
    assert!(
        !store
            .use_approval(&t, &late.id, late.expires_at)
            .await
            .expect("use"),
        "an expired approval is refused"
    );
}
