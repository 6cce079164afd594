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
