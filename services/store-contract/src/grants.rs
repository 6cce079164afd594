//! The grant ledger: record, revoke (first wins), look up, list, active set.

use crate::fixtures::*;
use corkboard_board::{BoardStore, GrantEvent, GrantId, StoreError, Timestamp};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

const HOUR: i64 = 3_600_000;

fn event(grant: &corkboard_board::Grant, token_hash: &str) -> GrantEvent {
    GrantEvent {
        grant: grant.clone(),
        token_hash: token_hash.to_owned(),
        revoked_at: None,
        revoked_by: None,
    }
}

pub async fn case_grant_record_and_get<S: BoardStore>(store: Arc<S>) {
    let t = tenant("grants");
    let g = grant(&t, "run-1", Timestamp::now(), HOUR);
    let hash = token_hash();
    store.record_grant(&g, &hash).await.expect("record");
    assert_eq!(
        store.grant(&g.id).await.expect("get"),
        event(&g, &hash),
        "a recorded grant reads back exactly, token hash included"
    );
    assert_not_found(store.grant(&GrantId::generate()).await, "an unknown grant");
}

pub async fn case_grant_record_is_retry_safe<S: BoardStore>(store: Arc<S>) {
    let t = tenant("grant-retry");
    let g = grant(&t, "run-1", Timestamp::now(), HOUR);
    let hash = token_hash();
    store.record_grant(&g, &hash).await.expect("record");
    store
        .record_grant(&g, &hash)
        .await
        .expect("recording the same grant again (a retry) succeeds");
    let listed = store.list_grants(&t, None, None, 10).await.expect("list");
    assert_eq!(
        listed,
        vec![event(&g, &hash)],
        "a retry records nothing new"
    );

    let mut changed = g.clone();
    changed.created_by = "someone-else".to_owned();
    let result = store.record_grant(&changed, &hash).await;
    assert!(
        result.is_err(),
        "a different grant under a recorded id is refused: {result:?}"
    );
    assert_eq!(store.grant(&g.id).await.expect("get"), event(&g, &hash));
}

pub async fn case_grant_revocation_first_wins<S: BoardStore>(store: Arc<S>) {
    let t = tenant("revoke");
    let now = Timestamp::now();
    let g = grant(&t, "run-1", now, HOUR);
    let hash = token_hash();
    store.record_grant(&g, &hash).await.expect("record");

    let first_at = now.plus_millis(10);
    let revoked = store
        .record_revocation(&g.id, "admin-1", first_at)
        .await
        .expect("revoke");
    assert_eq!(revoked.grant, g);
    assert_eq!(revoked.token_hash, hash);
    assert_eq!(revoked.revoked_at, Some(first_at));
    assert_eq!(revoked.revoked_by.as_deref(), Some("admin-1"));

    let second = store
        .record_revocation(&g.id, "admin-2", now.plus_millis(20))
        .await
        .expect("a second revocation is not an error");
    assert_eq!(second, revoked, "the first revocation wins");
    assert_eq!(store.grant(&g.id).await.expect("get"), revoked);

    assert_not_found(
        store
            .record_revocation(&GrantId::generate(), "admin-1", now)
            .await,
        "revoking an unknown grant",
    );
}

pub async fn case_grant_by_token_hash<S: BoardStore>(store: Arc<S>) {
    let t = tenant("by-hash");
    let now = Timestamp::now();
    let g1 = grant(&t, "run-1", now, HOUR);
    let g2 = grant(&t, "run-2", now, HOUR);
    let (h1, h2) = (token_hash(), token_hash());
    store.record_grant(&g1, &h1).await.expect("record 1");
    store.record_grant(&g2, &h2).await.expect("record 2");

    assert_eq!(
        store.grant_by_token_hash(&h1).await.expect("lookup"),
        Some(event(&g1, &h1))
    );
    assert_eq!(
        store.grant_by_token_hash(&h2).await.expect("lookup"),
        Some(event(&g2, &h2))
    );
    assert_eq!(
        store
            .grant_by_token_hash(&token_hash())
            .await
            .expect("lookup"),
        None,
        "an unknown hash is None, not an error"
    );
    let revoked = store
        .record_revocation(&g1.id, "admin", now)
        .await
        .expect("revoke");
    assert_eq!(
        store.grant_by_token_hash(&h1).await.expect("lookup"),
        Some(revoked),
        "revoked grants are still found, with their revocation"
    );
}

pub async fn case_list_grants<S: BoardStore>(store: Arc<S>) {
    let a = tenant("list-a");
    let b = tenant("list-b");
    let now = Timestamp::now();
    let mut in_a = Vec::new();
    for run_name in ["run-1", "run-2", "run-1", "run-2", "run-1"] {
        let g = grant(&a, run_name, now, HOUR);
        let hash = token_hash();
        store.record_grant(&g, &hash).await.expect("record");
        in_a.push(event(&g, &hash));
    }
    let g_b = grant(&b, "run-1", now, HOUR);
    store
        .record_grant(&g_b, &token_hash())
        .await
        .expect("record in b");
    let revoked = store
        .record_revocation(&in_a[0].grant.id, "admin", now)
        .await
        .expect("revoke");
    in_a[0] = revoked;

    let mut newest_first = in_a.clone();
    newest_first.sort_by(|x, y| y.grant.id.cmp(&x.grant.id));
    let run_1: Vec<GrantEvent> = newest_first
        .iter()
        .filter(|e| e.grant.run.as_str() == "run-1")
        .cloned()
        .collect();

    assert_eq!(
        store.list_grants(&a, None, None, 200).await.expect("list"),
        newest_first,
        "every grant of the tenant, newest first, revoked ones included"
    );
    assert_eq!(
        store
            .list_grants(&a, Some(&run("run-1")), None, 200)
            .await
            .expect("list by run"),
        run_1
    );
    assert_eq!(
        store
            .list_grants(&a, Some(&run("run-1")), Some(&run_1[0].grant.id), 200)
            .await
            .expect("list by run after a cursor"),
        run_1[1..].to_vec()
    );

    let mut pages = Vec::new();
    let mut cursor: Option<GrantId> = None;
    loop {
        let page = store
            .list_grants(&a, None, cursor.as_ref(), 2)
            .await
            .expect("page");
        assert!(page.len() <= 2);
        let Some(last) = page.last() else { break };
        cursor = Some(last.grant.id.clone());
        pages.push(page);
        assert!(pages.len() <= 10, "pagination never ended");
    }
    assert_eq!(pages.iter().map(Vec::len).collect::<Vec<_>>(), [2, 2, 1]);
    assert_eq!(
        pages.concat(),
        newest_first,
        "pages together are the whole list"
    );

    assert_eq!(
        store
            .list_grants(&b, None, None, 200)
            .await
            .expect("list b"),
        vec![store.grant(&g_b.id).await.expect("get")],
        "tenants see only their own grants"
    );
    assert_eq!(
        store
            .list_grants(&tenant("list-empty"), None, None, 200)
            .await
            .expect("list of an empty tenant"),
        Vec::new()
    );
    let zero = store.list_grants(&a, None, None, 0).await;
    assert!(
        matches!(zero, Err(StoreError::Invalid(_))),
        "a zero limit is refused: {zero:?}"
    );
}

pub async fn case_active_grants_exclude_revoked_and_expired<S: BoardStore>(store: Arc<S>) {
    let a = tenant("active-a");
    let b = tenant("active-b");
    // A fixed instant: the store must compare with `now`, not its own clock.
    let now = Timestamp::now();
    let active = grant(&a, "run-1", now.plus_millis(-HOUR), 2 * HOUR);
    let active_other_tenant = grant(&b, "run-1", now.plus_millis(-HOUR), 2 * HOUR);
    let barely = grant(&a, "run-2", now.plus_millis(-HOUR), HOUR + 1);
    let expired = grant(&a, "run-3", now.plus_millis(-2 * HOUR), HOUR);
    let at_expiry = grant(&a, "run-4", now.plus_millis(-HOUR), HOUR);
    let revoked = grant(&a, "run-5", now.plus_millis(-HOUR), 2 * HOUR);
    for g in [
        &active,
        &active_other_tenant,
        &barely,
        &expired,
        &at_expiry,
        &revoked,
    ] {
        store.record_grant(g, &token_hash()).await.expect("record");
    }
    store
        .record_revocation(&revoked.id, "admin", now.plus_millis(-1))
        .await
        .expect("revoke");

    let listed = store.active_grants(now).await.expect("active grants");
    let ids: HashSet<&GrantId> = listed.iter().map(|e| &e.grant.id).collect();
    assert_eq!(ids.len(), listed.len(), "no grant is listed twice");
    for g in [&active, &active_other_tenant, &barely] {
        assert!(ids.contains(&g.id), "active grant {} missing", g.id);
    }
    for (g, why) in [
        (&expired, "expired"),
        (&at_expiry, "expiring exactly now"),
        (&revoked, "revoked"),
    ] {
        assert!(!ids.contains(&g.id), "a grant {why} is listed as active");
    }
    for e in &listed {
        assert!(e.revoked_at.is_none() && !e.grant.is_expired_at(now));
    }
    let later = store
        .active_grants(now.plus_millis(HOUR))
        .await
        .expect("active grants later");
    let later_ids: HashSet<&GrantId> = later.iter().map(|e| &e.grant.id).collect();
    assert!(!later_ids.contains(&barely.id) && !later_ids.contains(&active.id));
}

pub async fn case_revoked_grants_are_the_unexpired_revocations<S: BoardStore>(store: Arc<S>) {
    let a = tenant("revoked-a");
    let b = tenant("revoked-b");
    let now = Timestamp::now();
    let active = grant(&a, "run-1", now.plus_millis(-HOUR), 2 * HOUR);
    let revoked = grant(&a, "run-2", now.plus_millis(-HOUR), 2 * HOUR);
    let revoked_other_tenant = grant(&b, "run-1", now.plus_millis(-HOUR), 2 * HOUR);
    let revoked_expired = grant(&a, "run-3", now.plus_millis(-2 * HOUR), HOUR);
    let mut hashes = HashMap::new();
    for g in [&active, &revoked, &revoked_other_tenant, &revoked_expired] {
        let hash = token_hash();
        store.record_grant(g, &hash).await.expect("record");
        hashes.insert(g.id.clone(), hash);
    }
    for g in [&revoked, &revoked_other_tenant, &revoked_expired] {
        store
            .record_revocation(&g.id, "admin", now.plus_millis(-1))
            .await
            .expect("revoke");
    }
    let listed = store.revoked_grants(now).await.expect("revoked grants");
    let ids: HashSet<&GrantId> = listed.iter().map(|e| &e.grant.id).collect();
    assert_eq!(ids.len(), listed.len(), "no grant is listed twice");
    for g in [&revoked, &revoked_other_tenant] {
        assert!(ids.contains(&g.id), "revoked grant {} missing", g.id);
    }
    assert!(
        !ids.contains(&active.id),
        "an active grant is listed as revoked"
    );
    assert!(
        !ids.contains(&revoked_expired.id),
        "an expired revocation needs no replay"
    );
    for e in &listed {
        assert!(e.revoked_at.is_some());
        assert_eq!(
            Some(&e.token_hash),
            hashes.get(&e.grant.id),
            "the token hash comes with it"
        );
    }
}
