//! Grant renewal in the ledger (a live grant's expiry moves, a revoked or
//! expired one stays as it is) and tenants' own grant settings.

use crate::fixtures::*;
use corkboard_board::{BoardStore, GrantId, GrantPolicy, Timestamp};
use std::sync::Arc;

const HOUR: i64 = 3_600_000;

pub async fn case_grant_renewal_moves_only_a_live_grants_expiry<S: BoardStore>(store: Arc<S>) {
    let t = tenant("renew");
    let now = Timestamp::now();

    let live = grant(&t, "run-live", now, HOUR);
    let live_hash = token_hash();
    store.record_grant(&live, &live_hash).await.expect("record");
    let later = now.plus_millis(3 * HOUR);
    let renewed = store
        .record_expiry(&live.id, later, now)
        .await
        .expect("renew");
    assert_eq!(
        renewed.grant.expires_at, later,
        "the new expiry is recorded"
    );
    assert_eq!(
        renewed.grant.created_at, live.created_at,
        "creation (what the maximum lifetime counts from) is unchanged"
    );
    assert_eq!(renewed.token_hash, live_hash, "same token");
    assert_eq!(store.grant(&live.id).await.expect("get"), renewed);
    let by_hash = store
        .grant_by_token_hash(&live_hash)
        .await
        .expect("by hash")
        .expect("known");
    assert_eq!(
        by_hash.grant.expires_at, later,
        "the registry's read sees it"
    );
    let past_old_expiry = now.plus_millis(2 * HOUR);
    let active = store.active_grants(past_old_expiry).await.expect("active");
    assert!(
        active.iter().any(|e| e.grant.id == live.id),
        "active past its old expiry"
    );

    let revoked = grant(&t, "run-revoked", now, HOUR);
    store
        .record_grant(&revoked, &token_hash())
        .await
        .expect("record");
    store
        .record_revocation(&revoked.id, "admin", now)
        .await
        .expect("revoke");
    let refused = store
        .record_expiry(&revoked.id, later, now)
        .await
        .expect("answers with the record");
    assert!(refused.revoked_at.is_some());
    assert_eq!(
        refused.grant.expires_at, revoked.expires_at,
        "a revoked grant is not renewed"
    );

    let expired = grant(&t, "run-expired", now.plus_millis(-2 * HOUR), HOUR);
    store
        .record_grant(&expired, &token_hash())
        .await
        .expect("record");
    let refused = store
        .record_expiry(&expired.id, later, now)
        .await
        .expect("answers with the record");
    assert_eq!(
        refused.grant.expires_at, expired.expires_at,
        "an expired grant is not renewed"
    );
    assert!(refused.grant.is_expired_at(now));

    assert_not_found(
        store.record_expiry(&GrantId::generate(), later, now).await,
        "renewing an unknown grant",
    );
}

pub async fn case_grant_policy_is_per_tenant<S: BoardStore>(store: Arc<S>) {
    let (a, b) = (tenant("policy-a"), tenant("policy-b"));
    assert_eq!(
        store.grant_policy(&a).await.expect("read"),
        GrantPolicy::default(),
        "a tenant without settings has none"
    );
    let policy = GrantPolicy {
        run_ttl_secs: Some(600),
        max_lifetime_secs: Some(86_400),
        run_budgets: Default::default(),
        secrets: Default::default(),
        approvals: Default::default(),
    };
    store.set_grant_policy(&a, &policy).await.expect("set");
    assert_eq!(store.grant_policy(&a).await.expect("read"), policy);
    assert_eq!(
        store.grant_policy(&b).await.expect("read"),
        GrantPolicy::default(),
        "another tenant's settings are its own"
    );
    let replaced = GrantPolicy {
        run_ttl_secs: None,
        max_lifetime_secs: Some(3_600),
        run_budgets: Default::default(),
        secrets: Default::default(),
        approvals: Default::default(),
    };
    store
        .set_grant_policy(&a, &replaced)
        .await
        .expect("replace");
    assert_eq!(
        store.grant_policy(&a).await.expect("read"),
        replaced,
        "a write replaces the settings whole"
    );
    let zero = GrantPolicy {
        run_ttl_secs: Some(0),
        max_lifetime_secs: None,
        run_budgets: Default::default(),
        secrets: Default::default(),
        approvals: Default::default(),
    };
    assert!(
        store.set_grant_policy(&a, &zero).await.is_err(),
        "a zero lifetime is refused"
    );
    assert_eq!(store.grant_policy(&a).await.expect("read"), replaced);
}
