//! Start-up at scale: a tenant's indexes are set up once per schema
//! version and recorded, so a process start with thousands of tenants
//! sends no `createIndexes` (the driver's command monitoring counts what
//! each store sends), and a changed schema sets every tenant up again.

use crate::common;

use common::{TestBoard, test_options};
use corkboard_board::{IssueStore, TenantId};
use corkboard_store_contract::fixtures::{author, new_issue};
use corkboard_store_mongo::{CommandObserver, MongoOptions, MongoStore};
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
}

/// A store started on `board`'s database, and what it sent to start.
async fn start(board: &TestBoard) -> (MongoStore, Commands) {
    let commands = Commands::default();
    let store = board.another_store(commands.options()).await;
    (store, commands)
}

#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn a_restart_costs_no_work_per_tenant_and_a_schema_change_redoes_it() {
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
