//! Webhook endpoints and the outbox: board writes queue deliveries for the
//! writing tenant's subscribed endpoints only; claims lease, and share out
//! what is due fairly (a cap of live leases per endpoint, turns across
//! tenants, a failing endpoint paused); failures are retried with backoff
//! until given up; status is kept per endpoint.

use crate::fixtures::*;
use corkboard_board::webhook::limits;
use corkboard_board::{
    AttemptOutcome, BoardStore, ClaimedDelivery, IssueState, NewWebhook, StoreError, TenantId,
    Timestamp, WebhookEvent, WebhookEvents, WebhookId, WebhookSecret, WebhookUrl,
};
use std::sync::Arc;
use std::time::Duration;

const LEASE: Duration = Duration::from_secs(30);

fn hook(events: &[&str]) -> NewWebhook {
    NewWebhook {
        url: WebhookUrl::parse("https://hooks.example.com/in?key=k").unwrap(),
        events: WebhookEvents::parse_list(events).unwrap(),
        secret: WebhookSecret::parse("a-secret-of-16-bytes").unwrap(),
    }
}

/// Claims everything due within the next `ahead` and acknowledges it, so
/// each check sees only what the last write queued.
async fn drain<S: BoardStore>(store: &S, ahead: i64) -> Vec<ClaimedDelivery> {
    let now = Timestamp::now().plus_millis(ahead);
    let claimed = store
        .claim_deliveries(now, LEASE, 100, 100)
        .await
        .expect("claim");
    for delivery in &claimed {
        let ok = AttemptOutcome {
            at: now,
            status: Some(200),
            error: None,
        };
        store
            .record_attempt(&delivery.id, &ok)
            .await
            .expect("record");
    }
    claimed
}

fn events_of(claimed: &[ClaimedDelivery], webhook: &WebhookId) -> Vec<WebhookEvent> {
    let mut events: Vec<WebhookEvent> = claimed
        .iter()
        .filter(|d| &d.webhook == webhook)
        .map(|d| d.event)
        .collect();
    events.sort();
    events
}

pub async fn case_webhook_outbox_follows_the_tenants_board_writes<S: BoardStore>(store: Arc<S>) {
    let (a, b) = (tenant("hooks-a"), tenant("hooks-b"));
    let now = Timestamp::now();
    let e1 = store
        .create_webhook(
            &a,
            &hook(&[
                "issue.created",
                "issue.closed",
                "issue.commented",
                "run.started",
                "run.ended",
            ]),
            now,
        )
        .await
        .expect("create");
    let e2 = store
        .create_webhook(&a, &hook(&["issue.updated"]), now)
        .await
        .expect("create");
    let all: Vec<&str> = WebhookEvent::ALL.iter().map(|e| e.as_str()).collect();
    let eb = store
        .create_webhook(&b, &hook(&all), now)
        .await
        .expect("create");

    let created = store
        .create_issue(&a, &author("run-1"), new_issue("hooked"), Some(&key("k1")))
        .await
        .expect("create issue");
    let claimed = drain(&*store, 0).await;
    assert_eq!(
        events_of(&claimed, &e1.id),
        vec![WebhookEvent::IssueCreated]
    );
    assert!(events_of(&claimed, &e2.id).is_empty(), "not subscribed");
    assert!(
        events_of(&claimed, &eb.id).is_empty(),
        "another tenant's endpoint never gets this tenant's events"
    );
    let delivery = &claimed[0];
    assert_eq!(delivery.tenant, a);
    assert_eq!(delivery.secret.expose(), "a-secret-of-16-bytes");
    let body: serde_json::Value = serde_json::from_str(&delivery.body).expect("JSON body");
    assert_eq!(body["event"], "issue.created");
    assert_eq!(body["tenant"], a.as_str());
    assert_eq!(body["data"]["issue"]["id"], created.issue.id.as_str());

    // A replay queues nothing.
    store
        .create_issue(&a, &author("run-1"), new_issue("hooked"), Some(&key("k1")))
        .await
        .expect("replay");
    assert!(
        drain(&*store, 0).await.is_empty(),
        "a replay is not a new event"
    );

    let close = state_patch(IssueState::Done);
    store
        .update_issue(&a, &created.issue.id, close.clone(), None)
        .await
        .expect("close");
    let claimed = drain(&*store, 0).await;
    assert_eq!(events_of(&claimed, &e1.id), vec![WebhookEvent::IssueClosed]);
    assert_eq!(
        events_of(&claimed, &e2.id),
        vec![WebhookEvent::IssueUpdated]
    );
    // Already done: an update, not a second close.
    store
        .update_issue(&a, &created.issue.id, title_patch("renamed"), None)
        .await
        .expect("update");
    let claimed = drain(&*store, 0).await;
    assert!(events_of(&claimed, &e1.id).is_empty());
    assert_eq!(
        events_of(&claimed, &e2.id),
        vec![WebhookEvent::IssueUpdated]
    );

    store
        .add_comment(&a, &author("run-1"), comment(&created.issue.id, "hi"), None)
        .await
        .expect("comment");
    let claimed = drain(&*store, 0).await;
    assert_eq!(
        events_of(&claimed, &e1.id),
        vec![WebhookEvent::IssueCommented]
    );

    let g = grant(&a, "run-9", Timestamp::now(), 3_600_000);
    store.record_grant(&g, &token_hash()).await.expect("grant");
    let at = Timestamp::now();
    store
        .record_revocation(&g.id, "admin", at)
        .await
        .expect("revoke");
    store
        .record_revocation(&g.id, "admin", at.plus_millis(5))
        .await
        .expect("revoke again");
    let claimed = drain(&*store, 0).await;
    assert_eq!(
        events_of(&claimed, &e1.id),
        vec![WebhookEvent::RunStarted, WebhookEvent::RunEnded],
        "one start, one end"
    );
    assert!(events_of(&claimed, &eb.id).is_empty());

    let listed = store.list_webhooks(&a).await.expect("list");
    let status = &listed
        .iter()
        .find(|w| w.webhook.id == e1.id)
        .unwrap()
        .status;
    assert_eq!((status.delivered, status.pending), (5, 0), "{status:?}");
    assert_eq!(status.last_status, Some(200));
    let other = store.list_webhooks(&b).await.expect("list");
    assert_eq!(other.len(), 1);
    assert_eq!(other[0].status.delivered, 0);
}

pub async fn case_webhook_deliveries_are_leased_retried_and_given_up<S: BoardStore>(store: Arc<S>) {
    let t = tenant("hooks-retry");
    let now = Timestamp::now();
    let e = store
        .create_webhook(&t, &hook(&["issue.created"]), now)
        .await
        .expect("create");
    store
        .create_issue(&t, &author("run-1"), new_issue("one"), None)
        .await
        .expect("create issue");
    let at = Timestamp::now();
    let claimed = store
        .claim_deliveries(at, LEASE, 10, 100)
        .await
        .expect("claim");
    assert_eq!(claimed.len(), 1);
    let id = claimed[0].id.clone();
    assert_eq!(claimed[0].attempts, 0);
    assert!(
        store
            .claim_deliveries(at, LEASE, 10, 100)
            .await
            .expect("claim")
            .is_empty(),
        "a leased delivery is not claimed twice"
    );
    // A lease that ran out (its worker died) is claimed again.
    let later = at.plus_millis(31_000);
    let again = store
        .claim_deliveries(later, LEASE, 10, 100)
        .await
        .expect("claim");
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].id, id, "same delivery id on every attempt");

    let failed = |at: Timestamp| AttemptOutcome {
        at,
        status: Some(500),
        error: Some("the receiver answered 500".into()),
    };
    store
        .record_attempt(&id, &failed(later))
        .await
        .expect("record");
    let status = store.list_webhooks(&t).await.expect("list")[0]
        .status
        .clone();
    assert_eq!(status.pending, 1);
    assert_eq!(status.last_status, Some(500));
    assert_eq!(
        status.last_error.as_deref(),
        Some("the receiver answered 500")
    );
    assert!(
        store
            .claim_deliveries(later.plus_millis(500), LEASE, 10, 100)
            .await
            .expect("claim")
            .is_empty(),
        "not due before its backoff"
    );
    let mut when = later.plus_millis(1_000);
    let mut attempts = 1;
    loop {
        let due = store
            .claim_deliveries(when, LEASE, 10, 100)
            .await
            .expect("claim");
        assert_eq!(due.len(), 1, "due again after attempt {attempts}");
        assert_eq!(due[0].attempts, attempts);
        store
            .record_attempt(&id, &failed(when))
            .await
            .expect("record");
        attempts += 1;
        if attempts == limits::ATTEMPTS_MAX {
            break;
        }
        when = when.plus_millis(11 * 60 * 1000);
    }
    let status = store.list_webhooks(&t).await.expect("list")[0]
        .status
        .clone();
    assert_eq!(
        (status.pending, status.dead, status.delivered),
        (0, 1, 0),
        "{status:?}"
    );
    assert!(
        store
            .claim_deliveries(when.plus_millis(3_600_000), LEASE, 10, 100)
            .await
            .expect("claim")
            .is_empty(),
        "given up"
    );
    let _ = e;
}

pub async fn case_webhook_endpoints_are_bounded_and_deleted_with_their_deliveries<S: BoardStore>(
    store: Arc<S>,
) {
    let (t, other) = (tenant("hooks-limit"), tenant("hooks-other"));
    let now = Timestamp::now();
    let mut ids = Vec::new();
    for _ in 0..limits::ENDPOINTS_PER_TENANT_MAX {
        ids.push(
            store
                .create_webhook(&t, &hook(&["issue.created"]), now)
                .await
                .expect("create")
                .id,
        );
    }
    let over = store
        .create_webhook(&t, &hook(&["issue.created"]), now)
        .await;
    assert!(matches!(over, Err(StoreError::Invalid(_))), "{over:?}");
    let listed = store.list_webhooks(&t).await.expect("list");
    assert_eq!(listed.len(), limits::ENDPOINTS_PER_TENANT_MAX);
    assert!(
        !format!("{listed:?}").contains("a-secret"),
        "listing never shows a secret"
    );
    store
        .create_issue(&t, &author("run-1"), new_issue("x"), None)
        .await
        .expect("create issue");
    assert_not_found(
        store.delete_webhook(&other, &ids[0]).await,
        "another tenant's endpoint",
    );
    for id in &ids {
        store.delete_webhook(&t, id).await.expect("delete");
    }
    assert!(store.list_webhooks(&t).await.expect("list").is_empty());
    assert!(
        store
            .claim_deliveries(Timestamp::now(), LEASE, 100, 100)
            .await
            .expect("claim")
            .is_empty(),
        "a deleted endpoint's deliveries go with it"
    );
    assert_not_found(
        store.delete_webhook(&t, &ids[0]).await,
        "a deleted endpoint",
    );
    let _: &TenantId = &other;
}

/// The tenant's undelivered deliveries are bounded
/// ([`limits::PENDING_PER_TENANT_MAX`]): an event past the bound queues
/// nothing and each endpoint it would have gone to counts it as
/// `dropped`; one delivery done makes room for exactly one.
pub async fn case_webhook_events_past_the_pending_bound_are_dropped_and_counted<S: BoardStore>(
    store: Arc<S>,
) {
    let t = tenant("hooks-pending");
    let now = Timestamp::now();
    let endpoints = limits::ENDPOINTS_PER_TENANT_MAX;
    for _ in 0..endpoints {
        store
            .create_webhook(&t, &hook(&["issue.created"]), now)
            .await
            .expect("create webhook");
    }
    // Each create queues one delivery per endpoint: up to the bound, in
    // eight streams of creates.
    let creates = limits::PENDING_PER_TENANT_MAX as usize / endpoints;
    let mut streams = tokio::task::JoinSet::new();
    for stream in 0..8 {
        let (store, t) = (Arc::clone(&store), t.clone());
        streams.spawn(async move {
            for i in (stream..creates).step_by(8) {
                store
                    .create_issue(
                        &t,
                        &author("run-1"),
                        new_issue(&format!("queued {i}")),
                        None,
                    )
                    .await
                    .expect("create issue");
            }
        });
    }
    while let Some(done) = streams.join_next().await {
        done.expect("a stream of creates");
    }
    let totals = |listed: Vec<corkboard_board::WebhookWithStatus>| {
        listed.iter().fold((0, 0), |(pending, dropped), hook| {
            (pending + hook.status.pending, dropped + hook.status.dropped)
        })
    };
    let listed = store.list_webhooks(&t).await.expect("list");
    assert_eq!(totals(listed), (limits::PENDING_PER_TENANT_MAX, 0));

    // Past it: nothing queued, each endpoint counts one dropped.
    store
        .create_issue(&t, &author("run-1"), new_issue("past the bound"), None)
        .await
        .expect("a write past the bound is still acknowledged");
    let listed = store.list_webhooks(&t).await.expect("list");
    assert!(
        listed.iter().all(|hook| hook.status.dropped == 1),
        "{listed:?}"
    );
    assert_eq!(
        totals(listed),
        (limits::PENDING_PER_TENANT_MAX, endpoints as u64)
    );

    // One delivered: room for one more, the rest of that event dropped.
    let one = store
        .claim_deliveries(Timestamp::now(), LEASE, 1, 1)
        .await
        .expect("claim");
    assert_eq!(one.len(), 1);
    let delivered = AttemptOutcome {
        at: Timestamp::now(),
        status: Some(200),
        error: None,
    };
    store
        .record_attempt(&one[0].id, &delivered)
        .await
        .expect("record");
    store
        .create_issue(&t, &author("run-1"), new_issue("one more fits"), None)
        .await
        .expect("create issue");
    let listed = store.list_webhooks(&t).await.expect("list");
    assert_eq!(
        totals(listed),
        (
            limits::PENDING_PER_TENANT_MAX,
            endpoints as u64 + endpoints as u64 - 1
        )
    );
}

pub async fn case_webhook_outbox_has_issue_claimed_once_per_claim<S: BoardStore>(store: Arc<S>) {
    let t = tenant("hooks-claim");
    let now = Timestamp::now();
    let hooked = store
        .create_webhook(&t, &hook(&["issue.claimed"]), now)
        .await
        .expect("create");
    let created = store
        .create_issue(&t, &author("run-1"), new_issue("to be claimed"), None)
        .await
        .expect("create issue");
    assert!(
        drain(&*store, 0).await.is_empty(),
        "not subscribed to creates"
    );
    let g = grant(&t, "run-1", now, 3_600_000);
    store
        .record_grant(&g, &token_hash())
        .await
        .expect("record grant");
    let claimant = corkboard_board::Claimant {
        run: g.run.clone(),
        grant: g.id.clone(),
        expires_at: g.expires_at,
        lease: None,
        integrity: corkboard_board::Integrity::Agent,
    };
    store
        .claim_issue(&t, &created.issue.id, &claimant, None)
        .await
        .expect("claim");
    let claimed = drain(&*store, 0).await;
    assert_eq!(
        events_of(&claimed, &hooked.id),
        vec![WebhookEvent::IssueClaimed]
    );
    let body: serde_json::Value = serde_json::from_str(&claimed[0].body).expect("JSON body");
    assert_eq!(body["event"], "issue.claimed");
    assert_eq!(body["data"]["issue"]["id"], created.issue.id.as_str());
    assert_eq!(body["data"]["claim"]["run"], "run-1");
    // Claiming one's own claim again changes nothing and is no event.
    store
        .claim_issue(&t, &created.issue.id, &claimant, None)
        .await
        .expect("claim again");
    assert!(
        drain(&*store, 0).await.is_empty(),
        "a repeated claim is not a new event"
    );
}

pub async fn case_webhook_claims_share_slots_fairly_and_pause_a_failing_endpoint<S: BoardStore>(
    store: Arc<S>,
) {
    let (a, b) = (tenant("hooks-busy"), tenant("hooks-quiet"));
    let now = Timestamp::now();
    let busy = store
        .create_webhook(&a, &hook(&["issue.created"]), now)
        .await
        .expect("create");
    let quiet = store
        .create_webhook(&b, &hook(&["issue.created"]), now)
        .await
        .expect("create");
    for n in 0..12 {
        store
            .create_issue(
                &a,
                &author("run-1"),
                new_issue(&format!("backlog {n}")),
                None,
            )
            .await
            .expect("create issue");
    }
    store
        .create_issue(&b, &author("run-2"), new_issue("the quiet one"), None)
        .await
        .expect("create issue");
    let of = |claimed: &[ClaimedDelivery], webhook: &WebhookId| {
        claimed.iter().filter(|d| &d.webhook == webhook).count()
    };
    let claim = |at: Timestamp, limit: u32| {
        let store = store.clone();
        async move {
            store
                .claim_deliveries(at, LEASE, limit, 2)
                .await
                .expect("claim")
        }
    };
    let ok = |at: Timestamp| AttemptOutcome {
        at,
        status: Some(200),
        error: None,
    };
    let failed = |at: Timestamp| AttemptOutcome {
        at,
        status: None,
        error: Some("no answer within 10s".into()),
    };

    // The busy endpoint's backlog is older than the quiet tenant's one
    // delivery, yet takes only its two slots.
    let at = Timestamp::now().plus_millis(10);
    let first = claim(at, 3).await;
    assert_eq!(
        (of(&first, &busy.id), of(&first, &quiet.id)),
        (2, 1),
        "two of the backlog (its cap) and the other tenant's turn: {first:#?}"
    );
    assert!(
        claim(at, 10).await.is_empty(),
        "the busy endpoint has two in flight, its cap; nothing else is due"
    );
    let busy_first: Vec<&ClaimedDelivery> = first.iter().filter(|d| d.webhook == busy.id).collect();
    let quiet_first = first.iter().find(|d| d.webhook == quiet.id).unwrap();
    store
        .record_attempt(&busy_first[0].id, &ok(at))
        .await
        .expect("record");
    store
        .record_attempt(&quiet_first.id, &ok(at))
        .await
        .expect("record");
    let next = claim(at, 10).await;
    assert_eq!(
        (next.len(), of(&next, &busy.id)),
        (1, 1),
        "one slot freed, one more: {next:#?}"
    );

    // A lease that ran out frees its slot: its delivery is due again, the
    // oldest first.
    let later = at.plus_millis(31_000);
    let lapsed = claim(later, 10).await;
    assert_eq!(of(&lapsed, &busy.id), 2, "{lapsed:#?}");
    assert!(
        lapsed.iter().any(|d| d.id == busy_first[1].id),
        "the delivery whose lease ran out is sent again: {lapsed:#?}"
    );

    // Two failures in a row pause the endpoint for 2 s (the backoff of a
    // second attempt), not the other tenant's.
    for delivery in &lapsed {
        store
            .record_attempt(&delivery.id, &failed(later))
            .await
            .expect("record");
    }
    store
        .create_issue(&b, &author("run-2"), new_issue("quiet again"), None)
        .await
        .expect("create issue");
    let paused = claim(later.plus_millis(1_500), 10).await;
    assert_eq!(
        (of(&paused, &busy.id), of(&paused, &quiet.id)),
        (0, 1),
        "{paused:#?}"
    );
    let resumed_at = later.plus_millis(2_000);
    let resumed = claim(resumed_at, 10).await;
    assert_eq!(of(&resumed, &busy.id), 2, "the pause is over: {resumed:#?}");

    // A success ends the streak: the next failure pauses for 1 s, not 4.
    store
        .record_attempt(&resumed[0].id, &ok(resumed_at))
        .await
        .expect("record");
    store
        .record_attempt(&resumed[1].id, &failed(resumed_at))
        .await
        .expect("record");
    assert_eq!(
        of(&claim(resumed_at.plus_millis(900), 10).await, &busy.id),
        0
    );
    assert_eq!(
        of(&claim(resumed_at.plus_millis(1_000), 10).await, &busy.id),
        2,
        "one failure after a success pauses for 1 s"
    );
}

pub async fn case_an_ended_claim_is_expired_once_with_its_event<S: BoardStore>(store: Arc<S>) {
    let t = tenant("hooks-expiry");
    let now = Timestamp::now();
    let hooked = store
        .create_webhook(&t, &hook(&["issue.claim_expired", "issue.claimed"]), now)
        .await
        .expect("create");
    let created = store
        .create_issue(&t, &author("run-1"), new_issue("to lapse"), None)
        .await
        .expect("create issue");
    // Long enough that the claim, its renewal and the reads below finish
    // before it lapses on a loaded machine (reads drop a lapsed claim).
    let lease = std::time::Duration::from_millis(1_000);
    let holder = corkboard_board::Claimant {
        run: run("run-1"),
        grant: corkboard_board::GrantId::generate(),
        expires_at: now.plus_millis(3_600_000),
        lease: Some(lease),
        integrity: corkboard_board::Integrity::Agent,
    };
    let claimed = store
        .claim_issue(&t, &created.issue.id, &holder, None)
        .await
        .expect("claim");
    let end = claimed.claim.clone().expect("claimed").expires_at;
    // A renewal is no new claim: one `issue.claimed` for both calls.
    store
        .claim_issue(&t, &created.issue.id, &holder, None)
        .await
        .expect("renew");
    assert_eq!(
        events_of(&drain(&*store, 0).await, &hooked.id),
        vec![WebhookEvent::IssueClaimed]
    );
    let mine = |expired: Vec<corkboard_board::ExpiredClaim>| -> Vec<_> {
        expired.into_iter().filter(|e| e.tenant == t).collect()
    };
    assert!(
        mine(store.expire_claims(Timestamp::now(), 1_000).await.unwrap()).is_empty(),
        "a live claim is not expired"
    );
    let renewed_end = store
        .get_issue(&t, &created.issue.id)
        .await
        .unwrap()
        .claim
        .expect("still claimed")
        .expires_at;
    assert!(renewed_end >= end);
    let after = renewed_end.plus_millis(1);
    while Timestamp::now() < after {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let expired = mine(store.expire_claims(Timestamp::now(), 1_000).await.unwrap());
    assert_eq!(expired.len(), 1, "{expired:?}");
    assert_eq!(expired[0].issue, created.issue.id);
    assert_eq!(expired[0].claim.run, holder.run);
    let issue = store.get_issue(&t, &created.issue.id).await.unwrap();
    assert_eq!(issue.claim, None);
    assert_eq!(issue.version, expired[0].version);
    assert!(
        mine(store.expire_claims(Timestamp::now(), 1_000).await.unwrap()).is_empty(),
        "an ended claim is expired once"
    );
    let delivered = drain(&*store, 0).await;
    assert_eq!(
        events_of(&delivered, &hooked.id),
        vec![WebhookEvent::IssueClaimExpired]
    );
    let body: serde_json::Value = serde_json::from_str(&delivered[0].body).expect("JSON body");
    assert_eq!(body["data"]["claim"]["run"], "run-1");
    // A released claim is no expiry.
    let again = store
        .claim_issue(&t, &created.issue.id, &holder, None)
        .await
        .expect("claim again");
    store
        .release_issue(&t, &created.issue.id, &holder.run, Some(again.version))
        .await
        .expect("release");
    tokio::time::sleep(lease + std::time::Duration::from_millis(50)).await;
    assert!(mine(store.expire_claims(Timestamp::now(), 1_000).await.unwrap()).is_empty());
}
