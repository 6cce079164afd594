//! Issues one at a time: create, get, update, comment, idempotency, tenants.

use crate::fixtures::*;
use corkboard_board::{BoardStore, Body, IssuePatch, IssueState, ListQuery, Priority, StoreError};
use std::sync::Arc;

pub async fn case_create_and_get<S: BoardStore>(store: Arc<S>) {
    let t = tenant("create");
    let who = author("run-1");

    let created = store
        .create_issue(&t, &who, new_issue("Defaults only"), None)
        .await
        .expect("create with defaults");
    assert!(!created.replayed);
    let issue = &created.issue;
    assert_eq!(issue.tenant, t);
    assert_eq!(issue.title.as_str(), "Defaults only");
    assert_eq!(issue.body.as_str(), "");
    assert_eq!(issue.state, IssueState::Inbox);
    assert!(issue.labels.is_empty());
    assert_eq!(issue.priority, Priority::None);
    assert_eq!(issue.author, who);
    assert_eq!(issue.version, 1);
    assert_eq!(issue.created_at, issue.updated_at);
    assert!(issue.comments.is_empty());
    assert_eq!(
        &store.get_issue(&t, &issue.id).await.expect("get"),
        issue,
        "get returns exactly what create returned"
    );

    let mut with_grant = author("run-1");
    with_grant.grant = Some(corkboard_board::GrantId::generate());
    let full = store
        .create_issue(&t, &with_grant, full_issue("Every field set"), None)
        .await
        .expect("create with every field")
        .issue;
    let expected = full_issue("Every field set");
    assert_eq!(full.title, expected.title);
    assert_eq!(full.body, expected.body);
    assert_eq!(full.state, expected.state);
    assert_eq!(full.labels, expected.labels);
    assert_eq!(full.priority, expected.priority);
    assert_eq!(full.author, with_grant, "the grant of the author is kept");
    assert_ne!(full.id, issue.id);
    assert_eq!(store.get_issue(&t, &full.id).await.expect("get"), full);

    // Without a key, the same request twice is two issues.
    let again = store
        .create_issue(&t, &who, new_issue("Defaults only"), None)
        .await
        .expect("second create without a key");
    assert!(!again.replayed);
    assert_ne!(again.issue.id, issue.id);
}

pub async fn case_get_unknown_is_not_found<S: BoardStore>(store: Arc<S>) {
    let t = tenant("unknown");
    assert_not_found(
        store
            .get_issue(&t, &corkboard_board::IssueId::generate())
            .await,
        "get of an id never created",
    );
}

pub async fn case_idempotent_create_replays_current_issue<S: BoardStore>(store: Arc<S>) {
    let t = tenant("replay");
    let who = author("run-1");
    let k = key("create-1");

    let first = store
        .create_issue(&t, &who, full_issue("Once only"), Some(&k))
        .await
        .expect("first create");
    assert!(!first.replayed);

    let replay = store
        .create_issue(&t, &who, full_issue("Once only"), Some(&k))
        .await
        .expect("replay");
    assert!(replay.replayed, "a replay says so");
    assert_eq!(replay.issue, first.issue);

    // A replay after a change returns the issue as it is now.
    let updated = store
        .update_issue(&t, &first.issue.id, title_patch("Renamed"), None)
        .await
        .expect("update");
    let late = store
        .create_issue(&t, &who, full_issue("Once only"), Some(&k))
        .await
        .expect("late replay");
    assert!(late.replayed);
    assert_eq!(late.issue, updated, "a replay returns the current issue");
    assert_eq!(late.issue.version, 2);

    let page = store
        .list_issues(&t, &ListQuery::default())
        .await
        .expect("list");
    assert_eq!(page.issues.len(), 1, "replays create nothing");
}

pub async fn case_idempotent_create_conflict<S: BoardStore>(store: Arc<S>) {
    let t = tenant("conflict");
    let who = author("run-1");
    let k = key("create-1");
    let first = store
        .create_issue(&t, &who, new_issue("Original"), Some(&k))
        .await
        .expect("first create");

    let other_title = store
        .create_issue(&t, &who, new_issue("Something else"), Some(&k))
        .await;
    assert!(
        matches!(other_title, Err(StoreError::IdempotencyConflict)),
        "another request under a used key: {other_title:?}"
    );
    let mut other_priority = new_issue("Original");
    other_priority.priority = Priority::Urgent;
    let result = store.create_issue(&t, &who, other_priority, Some(&k)).await;
    assert!(
        matches!(result, Err(StoreError::IdempotencyConflict)),
        "a request differing in one field: {result:?}"
    );

    let page = store
        .list_issues(&t, &ListQuery::default())
        .await
        .expect("list");
    assert_eq!(page.issues.len(), 1, "a conflicting replay creates nothing");
    assert_eq!(page.issues[0], first.issue);
}

pub async fn case_idempotency_scoped_by_tenant_and_run<S: BoardStore>(store: Arc<S>) {
    let a = tenant("scope-a");
    let b = tenant("scope-b");
    let k = key("same-key");
    let request = || new_issue("Same request");

    let a1 = store
        .create_issue(&a, &author("run-1"), request(), Some(&k))
        .await
        .expect("tenant a, run 1");
    let a2 = store
        .create_issue(&a, &author("run-2"), request(), Some(&k))
        .await
        .expect("tenant a, run 2");
    let b1 = store
        .create_issue(&b, &author("run-1"), request(), Some(&k))
        .await
        .expect("tenant b, run 1");
    assert!(!a1.replayed && !a2.replayed && !b1.replayed);
    assert_ne!(a1.issue.id, a2.issue.id, "runs have their own keys");
    assert_ne!(a1.issue.id, b1.issue.id, "tenants have their own keys");
    assert_eq!(b1.issue.tenant, b);

    // Another run may even use the key for a different request.
    let a3 = store
        .create_issue(&a, &author("run-3"), new_issue("Different"), Some(&k))
        .await
        .expect("tenant a, run 3, different request");
    assert!(!a3.replayed);

    let replay = store
        .create_issue(&a, &author("run-2"), request(), Some(&k))
        .await
        .expect("replay in tenant a, run 2");
    assert!(replay.replayed);
    assert_eq!(replay.issue.id, a2.issue.id);
}

pub async fn case_update_each_field<S: BoardStore>(store: Arc<S>) {
    let t = tenant("update");
    let mut current = store
        .create_issue(&t, &author("run-1"), new_issue("Before"), None)
        .await
        .expect("create")
        .issue;
    let patches = [
        title_patch("After"),
        IssuePatch {
            body: Some(Body::parse("New body").expect("body")),
            ..IssuePatch::default()
        },
        IssuePatch {
            state: Some(IssueState::InProgress),
            ..IssuePatch::default()
        },
        IssuePatch {
            labels: Some(labels(&["ui", "bug"])),
            ..IssuePatch::default()
        },
        IssuePatch {
            priority: Some(Priority::Low),
            ..IssuePatch::default()
        },
        IssuePatch {
            labels: Some(labels(&[])),
            state: Some(IssueState::Done),
            ..IssuePatch::default()
        },
    ];
    for patch in patches {
        let mut expected = current.clone();
        patch
            .clone()
            .apply_to(&mut expected, current.updated_at)
            .expect("a valid patch");
        let updated = store
            .update_issue(&t, &current.id, patch.clone(), None)
            .await
            .expect("update");
        assert!(updated.updated_at >= current.updated_at);
        assert_eq!(updated.created_at, current.created_at);
        expected.updated_at = updated.updated_at;
        assert_eq!(
            updated, expected,
            "exactly the patched fields change: {patch:?}"
        );
        assert_eq!(
            store.get_issue(&t, &current.id).await.expect("get"),
            updated,
            "get sees the update"
        );
        current = updated;
    }
    assert_eq!(current.version, 7);
}

pub async fn case_update_validation_and_not_found<S: BoardStore>(store: Arc<S>) {
    let t = tenant("update-invalid");
    let issue = store
        .create_issue(&t, &author("run-1"), new_issue("Target"), None)
        .await
        .expect("create")
        .issue;
    assert_invalid(
        store
            .update_issue(&t, &issue.id, IssuePatch::default(), None)
            .await,
        "patch",
        "an empty patch",
    );
    assert_invalid(
        store
            .update_issue(&t, &issue.id, IssuePatch::default(), Some(1))
            .await,
        "patch",
        "an empty patch with a version",
    );
    let unknown = corkboard_board::IssueId::generate();
    assert_not_found(
        store
            .update_issue(&t, &unknown, title_patch("x"), None)
            .await,
        "update of an unknown issue",
    );
    assert_not_found(
        store
            .update_issue(&t, &unknown, title_patch("x"), Some(1))
            .await,
        "update of an unknown issue with a version",
    );
    assert_eq!(
        store.get_issue(&t, &issue.id).await.expect("get").version,
        1,
        "refused updates change nothing"
    );
}

pub async fn case_update_version_conflict_writes_nothing<S: BoardStore>(store: Arc<S>) {
    let t = tenant("versions");
    let issue = store
        .create_issue(&t, &author("run-1"), new_issue("Versioned"), None)
        .await
        .expect("create")
        .issue;
    let stale = store
        .update_issue(&t, &issue.id, title_patch("Nope"), Some(5))
        .await;
    assert_eq!(
        stale,
        Err(StoreError::VersionConflict {
            expected: 5,
            actual: 1
        })
    );
    assert_eq!(
        store.get_issue(&t, &issue.id).await.expect("get"),
        issue,
        "a conflict writes nothing"
    );

    let v2 = store
        .update_issue(&t, &issue.id, title_patch("Yes"), Some(1))
        .await
        .expect("update at the current version");
    assert_eq!(v2.version, 2);
    let again = store
        .update_issue(&t, &issue.id, title_patch("Stale"), Some(1))
        .await;
    assert_eq!(
        again,
        Err(StoreError::VersionConflict {
            expected: 1,
            actual: 2
        })
    );
    assert_eq!(store.get_issue(&t, &issue.id).await.expect("get"), v2);
}

pub async fn case_comments<S: BoardStore>(store: Arc<S>) {
    let t = tenant("comments");
    let issue = store
        .create_issue(&t, &author("run-1"), new_issue("Discuss"), None)
        .await
        .expect("create")
        .issue;
    let mut previous = issue.clone();
    let mut ids = Vec::new();
    for (i, run_name) in ["run-1", "run-2", "run-1"].iter().enumerate() {
        let body = format!("comment {i}");
        let added = store
            .add_comment(&t, &author(run_name), comment(&issue.id, &body), None)
            .await
            .expect("add comment");
        assert!(!added.replayed);
        assert_eq!(added.comment.body.as_str(), body);
        assert_eq!(added.comment.author, author(run_name));
        assert_eq!(
            added.issue.version,
            previous.version + 1,
            "a comment bumps the version"
        );
        assert!(added.issue.updated_at >= previous.updated_at);
        assert_eq!(added.issue.title, issue.title, "a comment changes no field");
        assert_eq!(
            added.issue.comments.last(),
            Some(&added.comment),
            "the returned issue carries the new comment last"
        );
        assert_eq!(
            store.get_issue(&t, &issue.id).await.expect("get"),
            added.issue
        );
        ids.push(added.comment.id.clone());
        previous = added.issue;
    }
    let stored: Vec<_> = previous.comments.iter().map(|c| c.id.clone()).collect();
    assert_eq!(
        stored, ids,
        "comments are kept in the order they were added"
    );

    assert_not_found(
        store
            .add_comment(
                &t,
                &author("run-1"),
                comment(&corkboard_board::IssueId::generate(), "lost"),
                None,
            )
            .await,
        "a comment on an unknown issue",
    );
}

pub async fn case_comment_idempotency<S: BoardStore>(store: Arc<S>) {
    let t = tenant("comment-keys");
    let issue = store
        .create_issue(&t, &author("run-1"), new_issue("Target"), None)
        .await
        .expect("create")
        .issue;
    let k = key("comment-1");

    // A key used on a failed call stays unused.
    assert_not_found(
        store
            .add_comment(
                &t,
                &author("run-1"),
                comment(&corkboard_board::IssueId::generate(), "first"),
                Some(&k),
            )
            .await,
        "a keyed comment on an unknown issue",
    );

    let first = store
        .add_comment(&t, &author("run-1"), comment(&issue.id, "first"), Some(&k))
        .await
        .expect("keyed comment");
    assert!(!first.replayed);
    assert_eq!(first.issue.version, 2);

    let replay = store
        .add_comment(&t, &author("run-1"), comment(&issue.id, "first"), Some(&k))
        .await
        .expect("replay");
    assert!(replay.replayed);
    assert_eq!(
        replay.comment, first.comment,
        "a replay returns the same comment"
    );
    assert_eq!(replay.issue.version, 2, "a replay writes nothing");
    assert_eq!(replay.issue.comments.len(), 1);

    let conflict = store
        .add_comment(&t, &author("run-1"), comment(&issue.id, "other"), Some(&k))
        .await;
    assert!(
        matches!(conflict, Err(StoreError::IdempotencyConflict)),
        "another comment under a used key: {conflict:?}"
    );

    let other_run = store
        .add_comment(&t, &author("run-2"), comment(&issue.id, "first"), Some(&k))
        .await
        .expect("same key, other run");
    assert!(!other_run.replayed);
    assert_ne!(other_run.comment.id, first.comment.id);

    // Comment keys and issue keys are separate namespaces.
    let created = store
        .create_issue(&t, &author("run-1"), new_issue("Keyed"), Some(&k))
        .await
        .expect("the same key string for a create");
    assert!(!created.replayed);

    let final_issue = store.get_issue(&t, &issue.id).await.expect("get");
    assert_eq!(final_issue.version, 3);
    assert_eq!(final_issue.comments.len(), 2);
}

pub async fn case_tenant_isolation<S: BoardStore>(store: Arc<S>) {
    let a = tenant("iso-a");
    let b = tenant("iso-b");
    let who = author("run-1");
    let issue = store
        .create_issue(&a, &who, full_issue("Tenant A only"), None)
        .await
        .expect("create in a")
        .issue;

    assert_not_found(store.get_issue(&b, &issue.id).await, "b reads a's issue");
    assert_not_found(
        store
            .update_issue(&b, &issue.id, title_patch("hijacked"), None)
            .await,
        "b updates a's issue",
    );
    assert_not_found(
        store
            .update_issue(&b, &issue.id, title_patch("hijacked"), Some(1))
            .await,
        "b updates a's issue at its version (no version may leak)",
    );
    assert_not_found(
        store
            .add_comment(&b, &who, comment(&issue.id, "hi from b"), None)
            .await,
        "b comments on a's issue",
    );
    assert_not_found(
        store
            .add_comment(&b, &who, comment(&issue.id, "hi from b"), Some(&key("k")))
            .await,
        "b comments on a's issue with a key",
    );
    let listed = store
        .list_issues(&b, &ListQuery::default())
        .await
        .expect("list b");
    assert!(listed.issues.is_empty(), "b lists none of a's issues");
    let with_cursor = store
        .list_issues(
            &b,
            &ListQuery {
                cursor: Some(corkboard_board::IssueId::generate()),
                ..ListQuery::default()
            },
        )
        .await
        .expect("list b with a cursor");
    assert!(with_cursor.issues.is_empty());

    assert_eq!(
        store.get_issue(&a, &issue.id).await.expect("get in a"),
        issue,
        "nothing b tried changed a's issue"
    );
}

pub async fn case_health<S: BoardStore>(store: Arc<S>) {
    store.check().await.expect("a fresh store is healthy");
}
