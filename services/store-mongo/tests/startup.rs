//! At scale: a tenant's indexes are set up once per schema version and
//! recorded, so a process start with thousands of tenants sends no
//! `createIndexes` (the driver's command monitoring counts what each store
//! sends), and a changed schema sets every tenant up again; and the
//! sweeper's pass, every second in every process, sends a bounded number
//! of commands however many tenants there are (`sweep.rs`).

use crate::common;

use common::{TestBoard, test_options};
use corkboard_board::{
    ClaimNext, Claimant, GrantId, IssueStore, ListQuery, TenantId, Timestamp, WebhookStore,
};
use corkboard_store_contract::fixtures::{author, new_issue, run};
use corkboard_store_mongo::{CommandObserver, LEFTOVER_TENANTS_PER_PASS, MongoOptions, MongoStore};
use futures_util::StreamExt;
use mongodb::bson::{Document, doc};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Tenants on the database: enough that per-tenant work at start-up shows
/// (the issue measured 2.3 s per 1,000), few enough to create quickly.
const TENANTS: usize = 2_000;

/// Commands a store sent, by name.
#[derive(Clone, Default)]
struct Commands(Arc<Mutex<BTreeMap<String, usize>>>);

impl Commands {
    fn options(&self) -> MongoOptions {
        let seen = Arc::clone(&self.0);
        MongoOptions {
            command_observer: Some(CommandObserver::new(move |name, _| {
                *seen.lock().unwrap().entry(name.to_owned()).or_default() += 1;
            })),
            ..test_options()
        }
    }

    fn count(&self, name: &str) -> usize {
        self.0.lock().unwrap().get(name).copied().unwrap_or(0)
    }

    fn total(&self) -> usize {
        self.0.lock().unwrap().values().sum()
    }

    fn seen(&self) -> BTreeMap<String, usize> {
        self.0.lock().unwrap().clone()
    }

    /// What was sent since the last call, cleared.
    fn take(&self) -> BTreeMap<String, usize> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// A store started on `board`'s database, and what it sent to start.
async fn start(board: &TestBoard) -> (MongoStore, Commands) {
    let commands = Commands::default();
    let store = board.another_store(commands.options()).await;
    (store, commands)
}

#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn a_restart_and_a_sweep_cost_no_work_per_tenant_and_a_schema_change_redoes_it() {
    let board = TestBoard::start("startup-scale").await;
    let db = board.raw_database().await;
    // Tenants as a board from before the records has them: collections,
    // no record of their set-up. Created 32 at a time.
    let names: Vec<String> = (0..TENANTS).map(|i| format!("issues.t{i:05}")).collect();
    futures_util::stream::iter(names.iter())
        .for_each_concurrent(32, |name| {
            let db = db.clone();
            async move { db.create_collection(name).await.unwrap() }
        })
        .await;

    // The first start after the upgrade sets every tenant up, once.
    let (_first, sent) = start(&board).await;
    assert!(
        sent.count("createIndexes") >= 3 * TENANTS,
        "each tenant's three collections: {:?}",
        sent.seen()
    );
    let records = db.collection::<Document>("_schema");
    let recorded = records
        .count_documents(doc! { "_id": { "$regex": "^issues\\." } })
        .await
        .unwrap();
    assert_eq!(recorded, TENANTS as u64, "one record per tenant");

    // A restart: no index set up, and a handful of commands in all (the
    // records and the collection names, however many tenants there are).
    let (second, sent) = start(&board).await;
    assert_eq!(sent.count("createIndexes"), 0, "{:?}", sent.seen());
    assert!(sent.total() <= 12, "no work per tenant: {:?}", sent.seen());

    // A tenant first written after start-up is set up by its first write
    // and recorded, so the next start does nothing for it either.
    let fresh = TenantId::parse("fresh").unwrap();
    second
        .create_issue(&fresh, &author("run-1"), new_issue("first"), None)
        .await
        .unwrap();
    let (_third, sent) = start(&board).await;
    assert_eq!(sent.count("createIndexes"), 0, "{:?}", sent.seen());

    // Its indexes are there: the set-up was not skipped, only recorded.
    let indexes = db
        .collection::<Document>("issues.fresh")
        .list_index_names()
        .await
        .unwrap();
    assert!(indexes.len() > 5, "{indexes:?}");

    sweep_passes_cost_no_work_per_tenant(&board).await;

    // A schema change (what an older version recorded differs from this
    // one's definitions) sets every tenant up again at the next start.
    records
        .update_many(
            doc! {},
            doc! { "$set": { "fingerprint": "an-older-schema" } },
        )
        .await
        .unwrap();
    let (_fourth, sent) = start(&board).await;
    assert!(
        sent.count("createIndexes") >= 3 * (TENANTS + 1),
        "{:?}",
        sent.seen()
    );
    let (_fifth, sent) = start(&board).await;
    assert_eq!(sent.count("createIndexes"), 0, "{:?}", sent.seen());

    // Thousands of collections take longer to drop than the shared
    // clean-up waits on a busy machine: dropped here, without its bound.
    db.drop().await.unwrap();
}

/// On the board of the test above (2,000 tenants and `fresh`): a pass of
/// the sweeper sends a handful of commands plus a few for each of the
/// [`LEFTOVER_TENANTS_PER_PASS`] tenants it visits, never one per tenant on
/// the database; an announced claim in a tenant the round has not reached
/// is cleared by the first pass after its end, and a claim nothing
/// announced (as a version before announcements wrote it) by the pass
/// whose round reaches its tenant.
async fn sweep_passes_cost_no_work_per_tenant(board: &TestBoard) {
    let (sweeper, sent) = start(board).await;
    let db = board.raw_database().await;
    // Sorted after every other tenant: the last the round reaches. One
    // tenant per way to claim, so that no announcement stands in for
    // another (a tenant is due at its earliest announced end).
    let tenant = |name: &str| TenantId::parse(name).unwrap();
    let claimant = |lease_secs: u64| Claimant {
        run: run("run-1"),
        grant: GrantId::generate(),
        expires_at: Timestamp::now().plus_millis(3_600_000),
        lease: Some(std::time::Duration::from_secs(lease_secs)),
        integrity: corkboard_board::Integrity::Agent,
    };
    let create = |tenant: TenantId| {
        let sweeper = sweeper.clone();
        async move {
            sweeper
                .create_issue(&tenant, &author("run-1"), new_issue("work"), None)
                .await
                .unwrap()
                .issue
        }
    };
    // Three claims ending in a minute, one by each way to claim (the only
    // ready issue by claim_next, one by claim_issue, one handed over), and
    // one ending in ten.
    let next = create(tenant("zz-next")).await;
    let ClaimNext::Claimed { issue } = sweeper
        .claim_next(&tenant("zz-next"), &ListQuery::default(), &claimant(60))
        .await
        .unwrap()
    else {
        panic!("the one ready issue is claimed");
    };
    assert_eq!(issue.id, next.id);
    let short = create(tenant("zz-short")).await;
    sweeper
        .claim_issue(&tenant("zz-short"), &short.id, &claimant(60), None)
        .await
        .unwrap();
    let handed = create(tenant("zz-handed")).await;
    sweeper
        .hand_over_claim(
            &tenant("zz-handed"),
            &handed.id,
            &claimant(60),
            &author("person"),
            handed.version,
        )
        .await
        .unwrap();
    let long = create(tenant("zz-long")).await;
    sweeper
        .claim_issue(&tenant("zz-long"), &long.id, &claimant(600), None)
        .await
        .unwrap();
    let due = db.collection::<Document>("sweep_due");
    let records = due.count_documents(doc! {}).await.unwrap();
    assert_eq!(records, 4, "each claim announces its end in its tenant");
    sent.take();

    // Two minutes later the short claims have ended. The first pass clears
    // them although the round (from the first tenants by name) has not
    // reached their tenants, and sends a bounded number of commands.
    let later = Timestamp::now().plus_millis(120_000);
    let first = sweeper.expire_claims(later, 100).await.unwrap();
    let most = LEFTOVER_TENANTS_PER_PASS as usize * 3 + 10;
    let cost = sent.take();
    assert!(
        cost.values().sum::<usize>() <= most,
        "a pass sends a few commands per visited tenant, not per tenant: {cost:?}"
    );
    assert_eq!(cost.get("listCollections"), None, "{cost:?}");
    let mut first: Vec<_> = first.into_iter().map(|c| c.issue).collect();
    first.sort();
    let mut short_ones = vec![next.id, short.id, handed.id];
    short_ones.sort();
    assert_eq!(first, short_ones, "the announced claims, at once");

    // The long claim's announcement undone, as if a version before
    // announcements had written it: once it has ended, the round clears it
    // when it reaches the tenant, within tenants / LEFTOVER_TENANTS_PER_PASS
    // passes.
    due.delete_many(doc! {}).await.unwrap();
    let later = Timestamp::now().plus_millis(700_000);
    let rounds = (TENANTS + 5).div_ceil(LEFTOVER_TENANTS_PER_PASS as usize) + 1;
    let mut passes = 0;
    let found = loop {
        let swept = sweeper.expire_claims(later, 100).await.unwrap();
        passes += 1;
        let cost = sent.take();
        assert!(
            cost.values().sum::<usize>() <= most,
            "pass {passes}: {cost:?}"
        );
        if !swept.is_empty() {
            break swept;
        }
        assert!(passes <= rounds, "not cleared in {passes} passes");
    };
    assert_eq!(
        found.into_iter().map(|c| c.issue).collect::<Vec<_>>(),
        vec![long.id]
    );
    assert!(
        passes > 1,
        "cleared by the round at its turn, not at once: pass {passes}"
    );
}
