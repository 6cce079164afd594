//! The store contract suite against a fresh SQLite file per case.

use corkboard_store_sqlite::SqliteStore;
use std::sync::Arc;
use tempfile::TempDir;

async fn fresh_store() -> (Arc<SqliteStore>, TempDir) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let store = SqliteStore::open_in_dir(dir.path()).expect("open a fresh SQLite board");
    (Arc::new(store), dir)
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
