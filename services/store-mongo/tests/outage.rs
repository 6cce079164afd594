//! Honest degradation: a down or stuck server makes every call
//! `Unavailable` within a bounded time, never a hang, and the same store
//! serves again once the server is back.

use crate::common;

use common::{TestBoard, test_options};
use corkboard_board::{
    AuditLog, GrantLedger, IssueStore, ListQuery, StoreError, StoreHealth, TenantId, Timestamp,
};
use corkboard_store_contract::fixtures::{
    audit_record, author, grant, key, new_issue, title_patch, token_hash,
};
use corkboard_store_mongo::{MongoOptions, MongoStore, MongoStoreError};
use std::future::Future;
use std::process::Command;
use std::time::Duration;

/// Only so that a hang fails the test instead of stalling the run; the
/// store's own timeouts are a few seconds.
const NO_HANG: Duration = Duration::from_secs(60);

/// A webhook endpoint subscribed to `events`.
fn endpoint(events: &[&str]) -> corkboard_board::NewWebhook {
    use corkboard_board::{WebhookEvents, WebhookSecret, WebhookUrl};
    corkboard_board::NewWebhook {
        url: WebhookUrl::parse("https://hooks.example.com/in").unwrap(),
        events: WebhookEvents::parse_list(events.iter().copied()).unwrap(),
        secret: WebhookSecret::parse("a-secret-of-16-bytes").unwrap(),
    }
}

/// Makes the outbox refuse every insert (a validator nothing passes), as a
/// process that died right after its board write would leave it; or accept
/// them again.
async fn outbox_refuses(db: &mongodb::Database, refuse: bool) {
    use corkboard_store_mongo::schema::OUTBOX;
    use mongodb::bson::doc;
    let validator = refuse.then(|| doc! { "never": { "$exists": true } });
    validate(db, OUTBOX, validator).await;
}

/// Makes `collection` refuse every write whose document fails `validator`,
/// or (`None`) accept every write again.
async fn validate(
    db: &mongodb::Database,
    collection: &str,
    validator: Option<mongodb::bson::Document>,
) {
    use mongodb::bson::doc;
    db.run_command(doc! {
        "collMod": collection,
        "validator": validator.unwrap_or_default(),
        "validationLevel": "strict",
        "validationAction": "error",
    })
    .await
    .expect("collMod");
}

/// When the leftovers a writer announced for `tenant` are due, once the
/// announcement (made in the background) is there.
async fn announced_leftovers_due(db: &mongodb::Database, tenant: &TenantId) -> Timestamp {
    use corkboard_store_mongo::schema::SWEEP_DUE;
    use mongodb::bson::{Document, doc};
    let due = db.collection::<Document>(SWEEP_DUE);
    for _ in 0..100 {
        let announced = due
            .find_one(doc! { "_id": tenant.as_str(), "leftover_at": { "$exists": true } })
            .await
            .unwrap();
        if let Some(announced) = announced {
            let at = announced.get_datetime("leftover_at").unwrap();
            return Timestamp::from_millis(at.timestamp_millis());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{tenant} announced to the sweeper");
}

/// Every document of `collection` matching `filter`.
async fn documents(
    collection: &mongodb::Collection<mongodb::bson::Document>,
    filter: mongodb::bson::Document,
) -> Vec<mongodb::bson::Document> {
    use futures_util::TryStreamExt;
    collection
        .find(filter)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap()
}

async fn answers<T>(what: &str, call: impl Future<Output = T>) -> T {
    tokio::time::timeout(NO_HANG, call)
        .await
        .unwrap_or_else(|_| panic!("{what} hung instead of failing"))
}

#[track_caller]
fn assert_unavailable<T: std::fmt::Debug>(what: &str, result: Result<T, StoreError>) {
    match result {
        Err(err @ StoreError::Unavailable { .. }) => {
            assert!(err.is_retryable());
            assert!(
                err.to_string().starts_with("board unavailable: "),
                "{what}: {err}"
            );
        }
        other => panic!("{what}: expected Unavailable, got {other:?}"),
    }
}

/// Every kind of call while the server cannot answer.
async fn every_call_is_unavailable(
    store: &MongoStore,
    t: &TenantId,
    id: &corkboard_board::IssueId,
) {
    assert_unavailable("check", answers("check", store.check()).await);
    assert_unavailable("get", answers("get", store.get_issue(t, id)).await);
    assert_unavailable(
        "list",
        answers("list", store.list_issues(t, &ListQuery::default())).await,
    );
    assert_unavailable(
        "create",
        answers(
            "create",
            store.create_issue(t, &author("run-1"), new_issue("during"), None),
        )
        .await,
    );
    assert_unavailable(
        "keyed create",
        answers(
            "keyed create",
            store.create_issue(t, &author("run-1"), new_issue("keyed"), Some(&key("k"))),
        )
        .await,
    );
    assert_unavailable(
        "update",
        answers(
            "update",
            store.update_issue(t, id, title_patch("x"), Some(1)),
        )
        .await,
    );
    assert_unavailable(
        "audit",
        answers(
            "audit",
            store.append_audit(&[audit_record(t, "run-1", 1, None)]),
        )
        .await,
    );
    assert_unavailable(
        "grant lookup",
        answers("grant lookup", store.grant_by_token_hash("00")).await,
    );
}

/// Polls until the store answers again.
async fn wait_until_healthy(store: &MongoStore) {
    let deadline = tokio::time::Instant::now() + NO_HANG;
    loop {
        match store.check().await {
            Ok(()) => return,
            Err(err) if tokio::time::Instant::now() >= deadline => {
                panic!("the store did not recover: {err}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn a_down_server_is_unavailable_and_the_same_store_recovers() {
    let mut board = TestBoard::start("down_server").await;
    let store = std::sync::Arc::clone(&board.store);
    let t = TenantId::parse("outage").unwrap();
    let before = store
        .create_issue(
            &t,
            &author("run-1"),
            new_issue("before the outage"),
            Some(&key("k")),
        )
        .await
        .expect("create")
        .issue;

    board.server.kill();
    every_call_is_unavailable(&store, &t, &before.id).await;

    let port = board.server.port();
    board.server.restart();
    assert_eq!(
        board.server.port(),
        port,
        "the server came back on its port"
    );
    wait_until_healthy(&store).await;

    assert_eq!(store.get_issue(&t, &before.id).await.expect("get"), before);
    let replay = store
        .create_issue(
            &t,
            &author("run-1"),
            new_issue("before the outage"),
            Some(&key("k")),
        )
        .await
        .expect("replay after the outage");
    assert!(replay.replayed);
    assert_eq!(replay.issue, before);
    let after = store
        .create_issue(&t, &author("run-1"), new_issue("after the outage"), None)
        .await
        .expect("create after the outage")
        .issue;
    let listed: Vec<_> = store
        .list_issues(&t, &ListQuery::default())
        .await
        .expect("list")
        .issues
        .into_iter()
        .map(|i| i.id)
        .collect();
    assert!(
        listed.contains(&before.id) && listed.contains(&after.id),
        "{listed:?}"
    );
}

fn signal(pid: u32, name: &str) {
    let status = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status()
        .unwrap_or_else(|e| panic!("kill -{name}: {e}"));
    assert!(status.success(), "kill -{name} {pid} failed");
}

/// Waits until every thread of `pid` is stopped: `kill -STOP` returns
/// before the threads running on other cores have stopped, and a request
/// sent in that moment would still be answered.
fn wait_until_stopped(pid: u32) {
    let deadline = std::time::Instant::now() + NO_HANG;
    loop {
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap_or_else(|e| panic!("threads of {pid}: {e}"));
        let all_stopped = tasks.flatten().all(|task| {
            let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
            // The state follows the parenthesised command name.
            stat.rsplit_once(") ")
                .is_some_and(|(_, rest)| rest.starts_with('T') || rest.starts_with('t'))
        });
        if all_stopped {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "{pid} did not stop");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn a_server_that_stops_answering_times_out_and_recovers() {
    let options = MongoOptions {
        operation_timeout: Duration::from_secs(2),
        ..test_options()
    };
    let board = TestBoard::start_with("stuck_server", options).await;
    let store = std::sync::Arc::clone(&board.store);
    let t = TenantId::parse("stuck").unwrap();
    let issue = store
        .create_issue(&t, &author("run-1"), new_issue("before"), None)
        .await
        .expect("create")
        .issue;
    let pid = board.server.pid().expect("a running server");

    // SIGSTOP: connections stay open and nothing answers, the case that
    // only the store's own time bound can end.
    signal(pid, "STOP");
    wait_until_stopped(pid);
    let result = answers("get on a stopped server", store.get_issue(&t, &issue.id)).await;
    let write = answers(
        "update on a stopped server",
        store.update_issue(&t, &issue.id, title_patch("during"), None),
    )
    .await;
    let health = answers("check on a stopped server", store.check()).await;
    signal(pid, "CONT");
    assert_unavailable("get", result);
    assert_unavailable("update", write.clone());
    assert_unavailable("check", health);
    if let Err(err) = write {
        assert!(
            err.to_string().contains("may or may not have been applied"),
            "a timed-out write says its outcome is unknown: {err}"
        );
    }

    wait_until_healthy(&store).await;
    let now = store.get_issue(&t, &issue.id).await.expect("get after");
    assert!(
        now.version == 1 || now.version == 2,
        "the timed-out update happened at most once: {now:?}"
    );
    store
        .update_issue(&t, &issue.id, title_patch("after"), None)
        .await
        .expect("update after");
}

#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn connecting_to_no_server_fails_in_bounded_time() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let uri = format!("mongodb://127.0.0.1:{port}/?directConnection=true");
    let result = answers(
        "connect to nothing",
        MongoStore::connect(&uri, "nothing", test_options()),
    )
    .await;
    match result {
        Err(MongoStoreError::Unavailable { reason }) => {
            assert!(reason.contains("board unavailable"), "{reason}");
        }
        other => panic!("expected Unavailable at start-up, got {other:?}"),
    }
}

#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn a_lazy_store_starts_without_its_server_and_serves_once_it_is_up() {
    let mut server = corkboard_testkit::MongoServer::start();
    let uri = server.uri();
    let port = server.port();
    server.kill();
    let database = corkboard_testkit::unique_database("lazy");
    let store = answers(
        "lazy connect",
        MongoStore::connect_lazy(&uri, &database, test_options()),
    )
    .await
    .expect("a lazy store starts with its server down");
    let t = TenantId::parse("lazy").unwrap();
    assert_unavailable("check", answers("check", store.check()).await);
    assert_unavailable(
        "create",
        answers(
            "create",
            store.create_issue(&t, &author("run-1"), new_issue("too early"), None),
        )
        .await,
    );

    server.restart();
    assert_eq!(server.port(), port, "the server came back on its port");
    wait_until_healthy(&store).await;
    let created = store
        .create_issue(&t, &author("run-1"), new_issue("on time"), None)
        .await
        .expect("create once the server is up")
        .issue;
    assert_eq!(
        store.get_issue(&t, &created.id).await.expect("get"),
        created
    );

    // The grants' unique index is in place before the first grant.
    let g = corkboard_store_contract::fixtures::grant(
        &t,
        "run-1",
        corkboard_board::Timestamp::now(),
        60_000,
    );
    let hash = corkboard_store_contract::fixtures::token_hash();
    store.record_grant(&g, &hash).await.expect("record");
    let mut twin = corkboard_store_contract::fixtures::grant(
        &t,
        "run-2",
        corkboard_board::Timestamp::now(),
        60_000,
    );
    twin.created_by = "other".into();
    assert!(
        store.record_grant(&twin, &hash).await.is_err(),
        "the token hash is unique from the first grant on"
    );

    let client = common::raw_client(&uri).await;
    client
        .database(&database)
        .drop()
        .await
        .expect("drop the test database");
}

/// Lets the writers' calls flow, kills the server while they are in
/// flight, collects what each writer returned, and brings the server back.
async fn cut_off_mid_flight<T: Send + 'static>(
    board: &mut TestBoard,
    writers: Vec<tokio::task::JoinHandle<T>>,
) -> Vec<T> {
    tokio::time::sleep(Duration::from_millis(300)).await;
    board.server.kill();
    let mut returned = Vec::new();
    for writer in writers {
        returned.push(answers("a writer", writer).await.expect("writer task"));
    }
    board.server.restart();
    wait_until_healthy(&board.store).await;
    returned
}

/// Issue 16, item 14: when the connection breaks mid-write, a create that
/// did commit must never be answered as if it had not ("unavailable, try
/// again"): writes cut off in flight say their outcome is unknown, and only
/// failures before anything was sent say "not applied". Both claims are
/// checked against what the restarted server holds.
#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn writes_cut_off_mid_flight_say_their_outcome_is_unknown() {
    let mut board = TestBoard::start("cut_mid_write").await;
    let t = TenantId::parse("cut").unwrap();
    let writers = 8;
    let mut tasks = Vec::new();
    for w in 0..writers {
        let store = std::sync::Arc::clone(&board.store);
        let t = t.clone();
        tasks.push(tokio::spawn(async move {
            // Creates until the first failure; returns the key that failed
            // and the error.
            for n in 0.. {
                let k = format!("w{w}-{n}");
                let result = store
                    .create_issue(&t, &author("run-1"), new_issue(&k), Some(&key(&k)))
                    .await;
                if let Err(err) = result {
                    return (k, err);
                }
            }
            unreachable!("the loop only ends on an error")
        }));
    }
    let failures = cut_off_mid_flight(&mut board, tasks).await;

    for (k, err) in failures {
        let StoreError::Unavailable { maybe_applied, .. } = &err else {
            panic!("{k}: expected Unavailable, got {err:?}");
        };
        let maybe_applied = *maybe_applied;
        // The same key again is always safe: it replays what committed.
        let retried = board
            .store
            .create_issue(&t, &author("run-1"), new_issue(&k), Some(&key(&k)))
            .await
            .unwrap_or_else(|e| panic!("{k}: retry with the same key: {e}"));
        if retried.replayed {
            assert!(
                maybe_applied,
                "{k} had committed but was answered as not applied: {err}"
            );
        }
        if maybe_applied {
            assert!(
                err.to_string().contains("may or may not have been applied"),
                "{k}: {err}"
            );
        }
    }
}

/// Issue 16 item 15: the audit writer retries a batch whose insert was cut
/// off, and the driver's ObjectIds made every retry of a batch that had
/// (partly) landed write its records again. Batches are cut off by killing
/// the server mid-flight, then retried with the same ids after it
/// restarts: every batch, acknowledged or cut off, is stored exactly once.
#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn audit_batches_cut_off_mid_flight_are_stored_once_when_retried() {
    use corkboard_board::{AuditEntry, AuditQuery};
    const PER_BATCH: i64 = 16;
    let mut board = TestBoard::start("cut_mid_audit").await;
    let t = TenantId::parse("audit-cut").unwrap();
    fn batch(t: &TenantId, w: i64, n: i64) -> Vec<AuditEntry> {
        let run = format!("w{w}-{n}");
        (0..PER_BATCH)
            .map(|i| AuditEntry::new(audit_record(t, &run, 1_000 * n + i, None)))
            .collect()
    }
    let mut tasks = Vec::new();
    for w in 0..4 {
        let store = std::sync::Arc::clone(&board.store);
        let t = t.clone();
        tasks.push(tokio::spawn(async move {
            // Batches until the first failure: the acknowledged ones and
            // the one cut off.
            let mut written = Vec::new();
            for n in 0.. {
                let entries = batch(&t, w, n);
                if store.append_audit_entries(&entries).await.is_err() {
                    return (written, entries);
                }
                written.push(entries);
            }
            unreachable!("the loop only ends on an error")
        }));
    }
    let outcomes = cut_off_mid_flight(&mut board, tasks).await;

    let mut batches = Vec::new();
    for (written, cut_off) in outcomes {
        // The retry of the batch whose outcome is unknown, as the audit
        // writer makes it: the same entries, so the same ids.
        answers("the retry", board.store.append_audit_entries(&cut_off))
            .await
            .expect("the retried batch is written");
        batches.extend(written);
        batches.push(cut_off);
    }
    assert!(
        batches.len() > 4,
        "no batch was acknowledged before the kill"
    );
    for entries in batches {
        let run = entries[0].record.run.clone();
        let mut stored = board
            .store
            .list_audit(
                &t,
                &AuditQuery {
                    run: Some(run.clone()),
                    limit: 100,
                    ..AuditQuery::default()
                },
            )
            .await
            .expect("list");
        stored.reverse();
        let expected: Vec<_> = entries.into_iter().map(|e| e.record).collect();
        assert_eq!(stored, expected, "batch {run}: each record exactly once");
    }
}

/// The same for revocations, whose claims' clean-up follows the grant's
/// write: a revocation cut off mid-flight is never answered as not applied
/// when the restarted server holds it.
#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn revocations_cut_off_mid_flight_say_their_outcome_is_unknown() {
    let mut board = TestBoard::start("cut_mid_revocation").await;
    let t = TenantId::parse("cut").unwrap();
    let mut tasks = Vec::new();
    for w in 0..8 {
        let store = std::sync::Arc::clone(&board.store);
        let t = t.clone();
        tasks.push(tokio::spawn(async move {
            // Grants revoked until the first failure; returns the grant
            // whose revocation failed and the error, if it was one.
            loop {
                let g = grant(&t, &format!("run-{w}"), Timestamp::now(), 3_600_000);
                if store.record_grant(&g, &token_hash()).await.is_err() {
                    return None;
                }
                if let Err(err) = store
                    .record_revocation(&g.id, "admin", Timestamp::now())
                    .await
                {
                    return Some((g.id, err));
                }
            }
        }));
    }
    let failures = cut_off_mid_flight(&mut board, tasks).await;

    for (id, err) in failures.into_iter().flatten() {
        let StoreError::Unavailable { maybe_applied, .. } = &err else {
            panic!("{id}: expected Unavailable, got {err:?}");
        };
        let revoked = board.store.grant(&id).await.expect("read back").revoked_at;
        if revoked.is_some() {
            assert!(
                *maybe_applied,
                "{id} was revoked but answered as not applied: {err}"
            );
        }
        // A retry is safe either way, and answers the revocation.
        let event = board
            .store
            .record_revocation(&id, "admin", Timestamp::now())
            .await
            .unwrap_or_else(|e| panic!("{id}: retry: {e}"));
        assert!(event.revoked_at.is_some());
    }
}

/// A deletion of a webhook or an upstream is two writes (MongoDB has no
/// transaction across the collections here): the endpoint, then its
/// pending deliveries; the upstream, then its tool pins. One cut off after
/// its first write left the second's documents behind, and its retry
/// answered "not found" without removing them: orphaned deliveries kept
/// counting against the tenant's pending limit, and a later upstream of the
/// same name would have inherited the old pins. The retry finishes the
/// job, within the caller's tenant only.
#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn a_retried_deletion_removes_what_a_cut_off_one_left_behind() {
    use corkboard_board::{
        HeaderName, NewWebhook, SealedCredential, Upstream, UpstreamName, UpstreamStore,
        UpstreamUrl, WebhookEvents, WebhookSecret, WebhookStore, WebhookUrl,
    };
    use corkboard_store_mongo::schema::{OUTBOX, TOOL_PINS, UPSTREAMS, WEBHOOKS};
    use mongodb::bson::{Document, doc};

    let board = TestBoard::start("retried_deletion").await;
    let db = board.raw_database().await;
    let (t, other) = (TenantId::parse("del").unwrap(), "del-other");

    let hook = board
        .store
        .create_webhook(
            &t,
            &NewWebhook {
                url: WebhookUrl::parse("https://hooks.example.com/in").unwrap(),
                events: WebhookEvents::parse_list(["issue.created"]).unwrap(),
                secret: WebhookSecret::parse("a-secret-of-16-bytes").unwrap(),
            },
            Timestamp::now(),
        )
        .await
        .expect("create webhook");
    let outbox = db.collection::<Document>(OUTBOX);
    for (id, tenant) in [("d-mine", t.as_str()), ("d-other", other)] {
        outbox
            .insert_one(doc! { "_id": id, "tenant": tenant, "webhook": hook.id.as_str() })
            .await
            .unwrap();
    }
    // The deletion's first write landed, its second did not.
    db.collection::<Document>(WEBHOOKS)
        .delete_one(doc! { "_id": hook.id.as_str() })
        .await
        .unwrap();
    let retried = board.store.delete_webhook(&t, &hook.id).await;
    assert!(
        matches!(retried, Err(StoreError::NotFound { .. })),
        "{retried:?}"
    );
    let left = |tenant: &str| {
        outbox.count_documents(doc! { "webhook": hook.id.as_str(), "tenant": tenant.to_owned() })
    };
    assert_eq!(left(t.as_str()).await.unwrap(), 0, "orphaned deliveries");
    assert_eq!(left(other).await.unwrap(), 1, "another tenant's document");

    let name = UpstreamName::parse("tools").unwrap();
    board
        .store
        .put_upstream(&Upstream {
            tenant: t.clone(),
            name: name.clone(),
            url: UpstreamUrl::parse("http://127.0.0.1:9/mcp").unwrap(),
            header: HeaderName::parse("X-Api-Key").unwrap(),
            credential: SealedCredential::from_bytes(b"sealed".to_vec()),
            created_at: Timestamp::now(),
            created_by: "admin".into(),
            trust_first_listing: false,
        })
        .await
        .expect("put upstream");
    let pins = db.collection::<Document>(TOOL_PINS);
    for tenant in [t.as_str(), other] {
        pins.insert_one(doc! {
            "_id": format!("{tenant}/tools/echo"),
            "tenant": tenant,
            "upstream": "tools",
            "tool": "echo",
        })
        .await
        .unwrap();
    }
    db.collection::<Document>(UPSTREAMS)
        .delete_one(doc! { "tenant": t.as_str(), "name": "tools" })
        .await
        .unwrap();
    let retried = board.store.delete_upstream(&t, &name).await;
    assert!(
        matches!(retried, Err(StoreError::NotFound { .. })),
        "{retried:?}"
    );
    let left = |tenant: &str| pins.count_documents(doc! { "tenant": tenant.to_owned() });
    assert_eq!(left(t.as_str()).await.unwrap(), 0, "orphaned pins");
    assert_eq!(left(other).await.unwrap(), 1, "another tenant's pin");
}

/// A keyed create or comment whose first attempt's deliveries were never
/// queued (its process died after the write, or its answer was lost and
/// the caller retried with its key) gets them from the replay, and only
/// once: a delivery's id comes from the write and the endpoint, so a
/// replay finds what an earlier attempt queued instead of queueing a copy
/// the receiver could not tell apart, and the key's record notes when all
/// were queued, so a replay after their delivery sends nothing again. An
/// endpoint registered well after the event is not told of it by a replay.
#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn a_replayed_keyed_write_queues_what_its_first_attempt_did_not() {
    use corkboard_board::{CommentBody, NewComment, WebhookStore};
    use corkboard_store_mongo::schema::{OUTBOX, idempotency};
    use mongodb::bson::{Document, doc};

    let board = TestBoard::start("replayed_deliveries").await;
    let db = board.raw_database().await;
    let outbox = db.collection::<Document>(OUTBOX);
    let t = TenantId::parse("hooked").unwrap();
    let records = db.collection::<Document>(&idempotency(&t));
    board
        .store
        .create_webhook(
            &t,
            &endpoint(&["issue.created", "issue.commented"]),
            Timestamp::now(),
        )
        .await
        .expect("create webhook");
    let queued = |event: &'static str| {
        let outbox = outbox.clone();
        async move {
            let docs = documents(&outbox, doc! { "event": event }).await;
            let mut ids: Vec<String> = docs
                .iter()
                .map(|d| d.get_str("_id").unwrap().to_owned())
                .collect();
            ids.sort();
            ids
        }
    };
    // What a first attempt that stopped before noting its deliveries
    // queued leaves on its key's record.
    let not_noted = || records.update_many(doc! {}, doc! { "$unset": { "events_queued": "" } });
    // What it leaves in the outbox when it stopped before queueing them,
    // or what their delivery leaves.
    let emptied = |event: &'static str| outbox.delete_many(doc! { "event": event });
    let (who, create_key, comment_key) = (author("run-1"), key("c1"), key("m1"));
    let create = || {
        board
            .store
            .create_issue(&t, &who, new_issue("hooked"), Some(&create_key))
    };

    let created = create().await.expect("create");
    assert!(!created.replayed);
    let first = queued("issue.created").await;
    assert_eq!(first.len(), 1, "{first:?}");
    // Stopped after queueing, before noting it: queued once all the same.
    not_noted().await.unwrap();
    assert!(create().await.expect("replay").replayed);
    assert_eq!(queued("issue.created").await, first, "queued once, same id");
    // Stopped before queueing: the replay queues it, under the same id.
    emptied("issue.created").await.unwrap();
    not_noted().await.unwrap();
    for _ in 0..2 {
        assert!(create().await.expect("replay").replayed);
        assert_eq!(queued("issue.created").await, first, "queued once, same id");
    }
    // Queued and delivered since: a replay sends nothing again.
    emptied("issue.created").await.unwrap();
    assert!(create().await.expect("replay").replayed);
    assert!(queued("issue.created").await.is_empty());

    let comment = || {
        board.store.add_comment(
            &t,
            &who,
            NewComment {
                issue: created.issue.id.clone(),
                body: CommentBody::parse("a note").unwrap(),
            },
            Some(&comment_key),
        )
    };
    assert!(!comment().await.expect("comment").replayed);
    let noted = queued("issue.commented").await;
    assert_eq!(noted.len(), 1, "{noted:?}");
    emptied("issue.commented").await.unwrap();
    not_noted().await.unwrap();
    for _ in 0..2 {
        assert!(comment().await.expect("replay").replayed);
        assert_eq!(queued("issue.commented").await, noted);
    }

    // Registered a minute after the issue's create.
    let later = created.issue.created_at.plus_millis(60_000);
    board
        .store
        .create_webhook(&t, &endpoint(&["issue.created"]), later)
        .await
        .expect("a later endpoint");
    not_noted().await.unwrap();
    assert!(create().await.expect("replay").replayed);
    assert_eq!(
        queued("issue.created").await,
        first,
        "not the later endpoint's"
    );
}

/// An issue write whose deliveries could not be queued (here the outbox
/// refuses every insert, as a process that died right after its write
/// would leave it) is still acknowledged, its events stay staged on the
/// issue, and the claim sweeper queues them once they are older than the
/// grace: every one, each once, however often it sweeps. A write whose
/// queueing succeeded leaves nothing staged.
#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn deliveries_a_write_could_not_queue_are_queued_by_the_sweeper() {
    use corkboard_board::{CommentBody, IssueState, NewComment, WebhookStore};
    use corkboard_store_contract::fixtures::state_patch;
    use corkboard_store_mongo::schema::{OUTBOX, issues};
    use mongodb::bson::{Document, doc};

    let board = TestBoard::start("staged_deliveries").await;
    let db = board.raw_database().await;
    let outbox = db.collection::<Document>(OUTBOX);
    let t = TenantId::parse("staged").unwrap();
    let hook = board
        .store
        .create_webhook(
            &t,
            &endpoint(&[
                "issue.created",
                "issue.commented",
                "issue.updated",
                "issue.closed",
            ]),
            Timestamp::now(),
        )
        .await
        .expect("create webhook");
    let queued = || {
        let outbox = outbox.clone();
        let hook = hook.id.as_str().to_owned();
        async move {
            let docs = documents(&outbox, doc! { "webhook": hook }).await;
            let mut found: Vec<(String, String)> = docs
                .iter()
                .map(|d| {
                    (
                        d.get_str("event").unwrap().to_owned(),
                        d.get_str("_id").unwrap().to_owned(),
                    )
                })
                .collect();
            found.sort();
            found
        }
    };
    let issue_docs = db.collection::<Document>(&issues(&t));
    let staged_on = |id: &corkboard_board::IssueId| {
        let issue_docs = issue_docs.clone();
        let id = id.as_str().to_owned();
        async move {
            let doc = issue_docs
                .find_one(doc! { "_id": id })
                .await
                .unwrap()
                .unwrap();
            doc.get_array("staged_events").cloned().unwrap_or_default()
        }
    };
    let who = author("run-1");

    // Queued by the write itself: nothing left staged.
    let first = board
        .store
        .create_issue(&t, &who, new_issue("queued at once"), None)
        .await
        .expect("create");
    assert_eq!(queued().await.len(), 1);
    assert!(staged_on(&first.issue.id).await.is_empty());
    outbox.delete_many(doc! {}).await.unwrap();

    // The outbox refuses every insert from here.
    outbox_refuses(&db, true).await;
    // The store still sees the endpoint, which a write asks about first.
    let endpoints = board.store.list_webhooks(&t).await.expect("list webhooks");
    assert_eq!(
        endpoints.len(),
        1,
        "the endpoint, after the outbox's change"
    );
    let created = board
        .store
        .create_issue(&t, &who, new_issue("written, not queued"), None)
        .await
        .expect("a create is acknowledged without its deliveries");
    let id = created.issue.id.clone();
    board
        .store
        .add_comment(
            &t,
            &who,
            NewComment {
                issue: id.clone(),
                body: CommentBody::parse("a note").unwrap(),
            },
            None,
        )
        .await
        .expect("comment");
    board
        .store
        .update_issue(&t, &id, state_patch(IssueState::Done), None)
        .await
        .expect("close");
    assert!(queued().await.is_empty());
    // created, commented, updated and closed
    let markers = staged_on(&id).await;
    assert_eq!(markers.len(), 4, "{markers:?}");

    outbox_refuses(&db, false).await;
    // Not before the grace: the writer may still be queueing them.
    board
        .store
        .expire_claims(Timestamp::now(), 100)
        .await
        .expect("sweep");
    assert!(queued().await.is_empty());
    let later = Timestamp::now().plus_millis(60_000);
    board.store.expire_claims(later, 100).await.expect("sweep");
    let swept = queued().await;
    let events: Vec<&str> = swept.iter().map(|(event, _)| event.as_str()).collect();
    assert_eq!(
        events,
        vec![
            "issue.closed",
            "issue.commented",
            "issue.created",
            "issue.updated"
        ]
    );
    assert!(staged_on(&id).await.is_empty());
    let bodies = documents(&outbox, doc! { "event": "issue.commented" }).await;
    let body: serde_json::Value = serde_json::from_str(bodies[0].get_str("body").unwrap()).unwrap();
    assert_eq!(body["data"]["issue"]["id"], id.as_str());
    assert_eq!(body["data"]["comment"]["author"]["run"], "run-1");

    // Swept again, and with the markers back (a writer or another
    // sweeper queueing them at the same time): the same deliveries, once
    // each, and the markers gone again.
    board.store.expire_claims(later, 100).await.expect("sweep");
    assert_eq!(queued().await, swept);
    issue_docs
        .update_one(
            doc! { "_id": id.as_str() },
            doc! { "$set": { "staged_events": markers } },
        )
        .await
        .unwrap();
    board.store.expire_claims(later, 100).await.expect("sweep");
    assert_eq!(queued().await, swept);
    assert!(staged_on(&id).await.is_empty());
}

/// The same for claims: a new claim (`claim_issue`, `claim_next`, a
/// hand-over) and a claim's expiry stage their event when the outbox
/// refuses it, a repeat of one's own claim stages none, and the sweeper
/// queues each once.
#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn claim_deliveries_a_write_could_not_queue_are_queued_by_the_sweeper() {
    use corkboard_board::{ClaimNext, Claimant, Integrity, WebhookStore};
    use corkboard_store_mongo::schema::{OUTBOX, issues};
    use mongodb::bson::{Document, doc};

    let board = TestBoard::start("staged_claims").await;
    let db = board.raw_database().await;
    let outbox = db.collection::<Document>(OUTBOX);
    let t = TenantId::parse("claims").unwrap();
    board
        .store
        .create_webhook(
            &t,
            &endpoint(&["issue.claimed", "issue.claim_expired"]),
            Timestamp::now(),
        )
        .await
        .expect("create webhook");
    let events = || {
        let outbox = outbox.clone();
        async move {
            let docs = documents(&outbox, doc! {}).await;
            let mut found: Vec<String> = docs
                .iter()
                .map(|d| d.get_str("event").unwrap().to_owned())
                .collect();
            found.sort();
            found
        }
    };
    let who = author("run-1");
    let mut ids = Vec::new();
    for title in ["claimed by id", "claimed next", "handed over"] {
        let created = board
            .store
            .create_issue(&t, &who, new_issue(title), None)
            .await
            .expect("create");
        ids.push(created.issue.id);
    }
    let g = grant(&t, "run-1", Timestamp::now(), 3_600_000);
    board.store.record_grant(&g, &token_hash()).await.unwrap();
    let claimant = Claimant {
        run: g.run.clone(),
        grant: g.id.clone(),
        expires_at: g.expires_at,
        lease: None,
        integrity: Integrity::Agent,
    };

    outbox_refuses(&db, true).await;
    // The store still sees the endpoint, which a write asks about first.
    let endpoints = board.store.list_webhooks(&t).await.expect("list webhooks");
    assert_eq!(
        endpoints.len(),
        1,
        "the endpoint, after the outbox's change"
    );
    board
        .store
        .claim_issue(&t, &ids[0], &claimant, None)
        .await
        .expect("claim");
    // One's own claim again: no new claim, nothing staged.
    board
        .store
        .claim_issue(&t, &ids[0], &claimant, None)
        .await
        .expect("claim again");
    let next = board
        .store
        .claim_next(&t, &ListQuery::default(), &claimant)
        .await
        .expect("claim_next");
    let ClaimNext::Claimed { issue } = next else {
        panic!("no ready work: {next:?}");
    };
    // The oldest ready one.
    assert_eq!(issue.id, ids[1]);
    let handed = board.store.get_issue(&t, &ids[2]).await.expect("get");
    board
        .store
        .hand_over_claim(&t, &ids[2], &claimant, &who, handed.version)
        .await
        .expect("hand over");
    // Every claim ended an hour later: each expiry staged too (the
    // outbox still refuses).
    let later = Timestamp::now().plus_millis(2 * 3_600_000);
    let expired = board.store.expire_claims(later, 100).await.expect("sweep");
    let claims = 3;
    assert_eq!(expired.len(), claims);
    assert!(events().await.is_empty());
    let issue_docs = db.collection::<Document>(&issues(&t));
    let staged: usize = documents(&issue_docs, doc! {})
        .await
        .iter()
        .map(|d| d.get_array("staged_events").map_or(0, Vec::len))
        .sum();
    assert_eq!(staged, 2 * claims, "a claim and an expiry per claim");

    outbox_refuses(&db, false).await;
    // Past the grace of the expiries staged at `later`.
    let after = later.plus_millis(60_000);
    board.store.expire_claims(after, 100).await.expect("sweep");
    board.store.expire_claims(after, 100).await.expect("sweep");
    let mut want = vec!["issue.claim_expired"; claims];
    want.extend(vec!["issue.claimed"; claims]);
    assert_eq!(events().await, want);
    assert_eq!(
        issue_docs
            .count_documents(doc! { "staged_events": { "$exists": true } })
            .await
            .unwrap(),
        0
    );
}

/// The same for the events of grants, approval items and tool pins: a
/// run's start and end, an approval's request and decision, an upstream
/// tool's change are acknowledged while the outbox refuses their
/// deliveries, stay staged on what they wrote, and the sweeper queues
/// each once.
#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn run_approval_and_tool_deliveries_a_write_could_not_queue_are_queued_by_the_sweeper() {
    use corkboard_board::{
        ApprovalItem, ApprovalPolicy, Decision, GrantId, SealedCredential, ToolSighting, Upstream,
        UpstreamName, UpstreamStore, UpstreamUrl, WebhookStore,
    };
    use corkboard_store_mongo::schema::{GRANTS, OUTBOX, TOOL_PINS};
    use mongodb::bson::doc;

    let board = TestBoard::start("staged_runs").await;
    let db = board.raw_database().await;
    let outbox = db.collection::<mongodb::bson::Document>(OUTBOX);
    let t = TenantId::parse("runs").unwrap();
    board
        .store
        .create_webhook(
            &t,
            &endpoint(&[
                "run.started",
                "run.ended",
                "approval.requested",
                "approval.decided",
                "upstream.tool_changed",
            ]),
            Timestamp::now(),
        )
        .await
        .expect("create webhook");
    let upstream = Upstream {
        tenant: t.clone(),
        name: UpstreamName::parse("py").unwrap(),
        url: UpstreamUrl::parse("http://127.0.0.1:9/py/mcp").unwrap(),
        header: corkboard_board::HeaderName::parse("X-Api-Key").unwrap(),
        credential: SealedCredential::from_bytes(b"x".to_vec()),
        created_at: Timestamp::now(),
        created_by: "admin".into(),
        trust_first_listing: false,
    };
    board.store.put_upstream(&upstream).await.expect("upstream");

    outbox_refuses(&db, true).await;
    // The store still sees the endpoint, which a write asks about first.
    let endpoints = board.store.list_webhooks(&t).await.expect("list webhooks");
    assert_eq!(
        endpoints.len(),
        1,
        "the endpoint, after the outbox's change"
    );
    let now = Timestamp::now();
    let g = grant(&t, "run-1", now, 3_600_000);
    board
        .store
        .record_grant(&g, &token_hash())
        .await
        .expect("grant");
    board
        .store
        .record_revocation(&g.id, "admin", now)
        .await
        .expect("revoke");
    // A repeat of the revocation: no second `run.ended`.
    board
        .store
        .record_revocation(&g.id, "admin", now)
        .await
        .expect("revoke again");
    let arguments = serde_json::json!({ "id": "x" });
    let item = ApprovalItem::new(
        t.clone(),
        g.run.clone(),
        GrantId::generate(),
        "update_issue",
        arguments.as_object().unwrap(),
        &ApprovalPolicy {
            name: "closing".into(),
            tool: "update_issue".into(),
            grants: vec![],
            arguments: vec![],
            ttl_secs: Some(60),
            version: 1,
        },
        now,
    );
    board.store.put_approval(&item).await.expect("put");
    let decision = Decision {
        approve: true,
        by: "alice".into(),
        reason: None,
        at: now,
    };
    board
        .store
        .decide_approval(&t, &item.id, &decision)
        .await
        .expect("decide");
    let sighting = ToolSighting::of(&serde_json::json!({
        "name": "echo", "description": "Echoes", "inputSchema": { "type": "object" },
    }))
    .unwrap();
    board
        .store
        .observe_tools(&t, &upstream.name, &[sighting], false, now)
        .await
        .expect("observe");
    assert!(documents(&outbox, doc! {}).await.is_empty());
    for collection in [GRANTS, "approvals", TOOL_PINS] {
        let held = documents(
            &db.collection(collection),
            doc! { "staged_events": { "$exists": true } },
        )
        .await;
        assert_eq!(held.len(), 1, "{collection}: {held:?}");
    }

    outbox_refuses(&db, false).await;
    let later = Timestamp::now().plus_millis(60_000);
    board.store.expire_claims(later, 100).await.expect("sweep");
    board.store.expire_claims(later, 100).await.expect("sweep");
    let mut events: Vec<String> = documents(&outbox, doc! {})
        .await
        .iter()
        .map(|d| d.get_str("event").unwrap().to_owned())
        .collect();
    events.sort();
    assert_eq!(
        events,
        [
            "approval.decided",
            "approval.requested",
            "run.ended",
            "run.started",
            "upstream.tool_changed"
        ]
    );
    let started = documents(&outbox, doc! { "event": "run.started" }).await;
    let body: serde_json::Value =
        serde_json::from_str(started[0].get_str("body").unwrap()).unwrap();
    assert_eq!(body["data"]["run"]["grant"], g.id.as_str());
    for collection in [GRANTS, "approvals", TOOL_PINS] {
        let held = documents(
            &db.collection(collection),
            doc! { "staged_events": { "$exists": true } },
        )
        .await;
        assert!(held.is_empty(), "{collection}: {held:?}");
    }
}

/// A writer that lives to see its follow-up fail (here the outbox refuses
/// an issue's deliveries in one tenant, and in another the recount of the
/// issue a finished blocker frees is refused) announces its tenant to the
/// sweeper, whose first pass after the grace queues and settles what was
/// left, although its round (50 tenants a pass, in name order) reaches
/// these tenants only at the third pass: a hundred tenants come first.
#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn what_a_failed_follow_up_left_is_swept_after_the_grace_not_at_the_round() {
    use corkboard_board::{BlockedBy, IssueState, NewIssue, WebhookStore};
    use corkboard_store_contract::fixtures::state_patch;
    use corkboard_store_mongo::schema::{OUTBOX, SCHEMA, SWEEP_DUE, issues};
    use mongodb::bson::{Document, doc};

    let board = TestBoard::start("announced_leftovers").await;
    let db = board.raw_database().await;
    let store = &board.store;
    let earlier: Vec<Document> = (0..100)
        .map(|i| doc! { "_id": format!("issues.a{i:03}") })
        .collect();
    db.collection::<Document>(SCHEMA)
        .insert_many(earlier)
        .await
        .unwrap();
    let who = author("run-1");

    // Tenant `zz-staged`: an endpoint, and an outbox that refuses.
    let staged = TenantId::parse("zz-staged").unwrap();
    let hook = store
        .create_webhook(&staged, &endpoint(&["issue.created"]), Timestamp::now())
        .await
        .expect("create webhook");
    let outbox = db.collection::<Document>(OUTBOX);
    outbox_refuses(&db, true).await;
    let created = store
        .create_issue(&staged, &who, new_issue("written, not queued"), None)
        .await
        .expect("a create is acknowledged without its deliveries");
    outbox_refuses(&db, false).await;

    // Tenant `zz-unsettled`: an issue blocked by another, whose close is
    // written but whose recount of the blocked one is refused.
    let unsettled = TenantId::parse("zz-unsettled").unwrap();
    let blocker = store
        .create_issue(&unsettled, &who, new_issue("the blocker"), None)
        .await
        .expect("create")
        .issue
        .id;
    let blocked = NewIssue {
        blocked_by: BlockedBy::parse([blocker.clone()]).unwrap(),
        ..new_issue("the blocked")
    };
    let blocked = store
        .create_issue(&unsettled, &who, blocked, None)
        .await
        .expect("create")
        .issue
        .id;
    let issue_docs = db.collection::<Document>(&issues(&unsettled));
    let open_blockers = || {
        let issue_docs = issue_docs.clone();
        let id = blocked.as_str().to_owned();
        async move {
            let doc = issue_docs.find_one(doc! { "_id": id }).await.unwrap();
            doc.and_then(|d| d.get_i64("open_blockers").ok())
        }
    };
    assert_eq!(open_blockers().await, Some(1));
    let refuse_recount = |refuse: bool| {
        let db = db.clone();
        let (collection, id) = (issues(&unsettled), blocked.as_str().to_owned());
        async move {
            let validator =
                refuse.then(|| doc! { "$nor": [{ "_id": id, "open_blockers": 0_i64 }] });
            validate(&db, &collection, validator).await;
        }
    };
    refuse_recount(true).await;
    store
        .update_issue(&unsettled, &blocker, state_patch(IssueState::Done), None)
        .await
        .expect("a close is acknowledged without its recount");
    refuse_recount(false).await;
    assert_eq!(open_blockers().await, Some(1), "not recounted yet");

    // Each writer announced its tenant (in the background).
    let mut leftovers_at = Vec::new();
    for t in [&staged, &unsettled] {
        leftovers_at.push(announced_leftovers_due(&db, t).await);
    }
    let first = leftovers_at.iter().min().copied().unwrap();
    let last = leftovers_at.iter().max().copied().unwrap();

    // Not before the grace (the round is elsewhere too: a000 to a049).
    store
        .expire_claims(first.plus_millis(-1), 100)
        .await
        .expect("sweep");
    assert_eq!(outbox.count_documents(doc! {}).await.unwrap(), 0);
    assert_eq!(open_blockers().await, Some(1));

    // The first pass after it (its round: a050 to a099).
    store
        .expire_claims(last.plus_millis(1), 100)
        .await
        .expect("sweep");
    let queued = documents(&outbox, doc! { "webhook": hook.id.as_str() }).await;
    assert_eq!(queued.len(), 1, "{queued:?}");
    let body: serde_json::Value = serde_json::from_str(queued[0].get_str("body").unwrap()).unwrap();
    assert_eq!(body["data"]["issue"]["id"], created.issue.id.as_str());
    assert_eq!(open_blockers().await, Some(0), "recounted");
    let left: Vec<Document> = documents(&db.collection(SWEEP_DUE), doc! {}).await;
    assert!(left.is_empty(), "nothing left due: {left:?}");
}

/// An event past the tenant's pending bound counts one `dropped` at its
/// endpoint, once: here its write counts the drop and then cannot clear
/// the marker (the issues' validator refuses a document without one), so
/// the sweeper queues the marker again at every pass, and each replay
/// finds the drop already counted. Once the marker can go, it goes, and
/// the count stays one.
#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn an_event_dropped_past_the_bound_is_counted_once_however_often_it_is_replayed() {
    use corkboard_board::WebhookStore;
    use corkboard_board::webhook::limits::PENDING_PER_TENANT_MAX;
    use corkboard_store_mongo::schema::{OUTBOX, issues};
    use mongodb::bson::{Document, doc};

    let board = TestBoard::start("dropped_once").await;
    let db = board.raw_database().await;
    let store = &board.store;
    let t = TenantId::parse("dropped-once").unwrap();
    let who = author("run-1");
    let hook = store
        .create_webhook(&t, &endpoint(&["issue.created"]), Timestamp::now())
        .await
        .expect("create webhook");
    // The tenant's issues exist (and queue one delivery); then its
    // outbox is full to the bound.
    store
        .create_issue(&t, &who, new_issue("queued"), None)
        .await
        .expect("create");
    let filler: Vec<Document> = (0..PENDING_PER_TENANT_MAX)
        .map(|i| doc! { "_id": format!("filler-{i}"), "tenant": t.as_str(), "webhook": "gone" })
        .collect();
    db.collection::<Document>(OUTBOX)
        .insert_many(filler)
        .await
        .unwrap();
    let refuse_clearing = |refuse: bool| {
        let (db, collection) = (db.clone(), issues(&t));
        async move {
            let validator = refuse.then(|| doc! { "staged_events.0": { "$exists": true } });
            validate(&db, &collection, validator).await;
        }
    };
    let dropped = || async {
        let listed = store.list_webhooks(&t).await.expect("list");
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].webhook.id, hook.id);
        listed[0].status.dropped
    };
    let issue_docs = db.collection::<Document>(&issues(&t));
    let markers_left = || async {
        documents(&issue_docs, doc! { "staged_events.0": { "$exists": true } })
            .await
            .len()
    };

    refuse_clearing(true).await;
    store
        .create_issue(&t, &who, new_issue("past the bound"), None)
        .await
        .expect("a write past the bound is acknowledged");
    assert_eq!(dropped().await, 1);
    assert_eq!(markers_left().await, 1, "the marker could not be cleared");

    // The writer announced its tenant; every pass after the grace
    // replays the marker, which stays.
    let after_grace = announced_leftovers_due(&db, &t).await.plus_millis(1);
    for pass in 0..3 {
        store
            .expire_claims(after_grace.plus_millis(pass), 100)
            .await
            .expect("sweep");
        assert_eq!(markers_left().await, 1, "pass {pass}: still staged");
        assert_eq!(dropped().await, 1, "pass {pass}: counted again");
    }

    refuse_clearing(false).await;
    store
        .expire_claims(after_grace.plus_millis(10), 100)
        .await
        .expect("sweep");
    assert_eq!(markers_left().await, 0, "cleared once it may be");
    assert_eq!(dropped().await, 1);
}

/// A document keeps at most 1,000 staged events, and a write pushing more
/// lets the oldest go without counting them anywhere; so the sweeper that
/// finds a document full says so in an error line (the queueing failures
/// that filled it were warnings, one each).
#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn a_document_full_of_staged_events_is_reported_as_an_error() {
    use corkboard_board::WebhookStore;
    use corkboard_store_mongo::schema::issues;
    use mongodb::bson::{Document, doc};

    let capture = corkboard_testkit::LogCapture::default();
    let _log = tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(capture.clone())
            .finish(),
    );
    let board = TestBoard::start("staged_full").await;
    let db = board.raw_database().await;
    let store = &board.store;
    let t = TenantId::parse("staged-full").unwrap();
    store
        .create_webhook(&t, &endpoint(&["issue.created"]), Timestamp::now())
        .await
        .expect("create webhook");
    outbox_refuses(&db, true).await;
    let created = store
        .create_issue(&t, &author("run-1"), new_issue("full of markers"), None)
        .await
        .expect("a create is acknowledged without its deliveries");
    // Its one marker and 999 more like it: the most a document keeps.
    let issue_docs = db.collection::<Document>(&issues(&t));
    let id = doc! { "_id": created.issue.id.as_str() };
    let found = issue_docs.find_one(id.clone()).await.unwrap().unwrap();
    let marker = found.get_array("staged_events").unwrap()[0]
        .as_document()
        .unwrap()
        .clone();
    let copies: Vec<Document> = (0..999)
        .map(|i| {
            let mut copy = marker.clone();
            copy.insert("key", format!("copy-{i}"));
            copy.insert("name", format!("issue.created:copy-{i}"));
            copy
        })
        .collect();
    issue_docs
        .update_one(
            id,
            doc! { "$push": { "staged_events": { "$each": copies } } },
        )
        .await
        .unwrap();
    let full = "a document holds the most staged webhook events it keeps";
    assert!(!capture.text().contains(full));

    let after_grace = announced_leftovers_due(&db, &t).await.plus_millis(1);
    store.expire_claims(after_grace, 100).await.expect("sweep");
    let text = capture.text();
    let line = text
        .lines()
        .find(|line| line.contains(full))
        .unwrap_or_else(|| panic!("no error line for the full document in:\n{text}"));
    assert!(line.contains("ERROR"), "{line}");
    assert!(line.contains(created.issue.id.as_str()), "{line}");
}

/// Events a write left staged on its tenant's issues (its queueing
/// failed) go when the tenant's last endpoint is deleted, as that
/// endpoint's pending deliveries do: the sweeper looks only at tenants
/// with endpoints, so they would stay on the issues for good. While an
/// endpoint is left they stay, and another tenant's are not touched.
#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn staged_events_go_with_the_tenants_last_endpoint() {
    use corkboard_board::WebhookStore;
    use corkboard_store_mongo::schema::issues;
    use mongodb::bson::{Document, doc};

    let board = TestBoard::start("unhooked_staged").await;
    let db = board.raw_database().await;
    let store = &board.store;
    let (t, other) = (
        TenantId::parse("unhooked").unwrap(),
        TenantId::parse("still-hooked").unwrap(),
    );
    let mut endpoints = Vec::new();
    for tenant in [&t, &t, &other] {
        let hook = store
            .create_webhook(tenant, &endpoint(&["issue.created"]), Timestamp::now())
            .await
            .expect("create webhook");
        endpoints.push(hook.id);
    }
    outbox_refuses(&db, true).await;
    for tenant in [&t, &other] {
        store
            .create_issue(tenant, &author("run-1"), new_issue("not queued"), None)
            .await
            .expect("acknowledged without its deliveries");
    }
    outbox_refuses(&db, false).await;
    let staged = |tenant: &TenantId| {
        let issue_docs = db.collection::<Document>(&issues(tenant));
        async move {
            issue_docs
                .count_documents(doc! { "staged_events.0": { "$exists": true } })
                .await
                .unwrap()
        }
    };
    assert_eq!((staged(&t).await, staged(&other).await), (1, 1));

    store
        .delete_webhook(&t, &endpoints[0])
        .await
        .expect("delete");
    assert_eq!(staged(&t).await, 1, "an endpoint is left");
    store
        .delete_webhook(&t, &endpoints[1])
        .await
        .expect("delete");
    assert_eq!(staged(&t).await, 0, "gone with the last endpoint");
    assert_eq!(staged(&other).await, 1, "another tenant's stay");
}
