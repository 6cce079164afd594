//! The store contract suite against a fresh SQLite file per case.

use corkboard_store_sqlite::SqliteStore;
use std::sync::Arc;
use tempfile::TempDir;

/// The default options but a time share no case reaches: the contract
/// checks outcomes (its 64 claimants read the ready list between claims,
/// which a debug build on a loaded machine pays for with seconds of search
/// time); the time share has tests of its own (`corkboard_board::reads`).
async fn fresh_store() -> (Arc<SqliteStore>, TempDir) {
    let reads = corkboard_board::ExpensiveReads::default().with_time_share(1_000_000);
    fresh_store_with(reads).await
}

corkboard_store_contract::store_contract_tests!(fresh_store());

/// A fresh SQLite file per case, its expensive reads bounded by `reads`.
async fn fresh_store_with(reads: corkboard_board::ExpensiveReads) -> (Arc<SqliteStore>, TempDir) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let options = corkboard_store_sqlite::SqliteOptions {
        expensive: reads,
        ..Default::default()
    };
    let store =
        SqliteStore::open_with(&dir.path().join(corkboard_store_sqlite::FILE_NAME), options)
            .expect("open a fresh SQLite board");
    (Arc::new(store), dir)
}

corkboard_store_contract::store_expensive_read_tests!(fresh_store_with);
