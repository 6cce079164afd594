//! The `used_once` table stays bounded by live records: each first use
//! sweeps a few expired rows in its own transaction, never a live one.

use corkboard_board::{GrantLedger, Timestamp};
use corkboard_store_sqlite::SqliteStore;
use rusqlite::Connection;
use std::path::Path;

fn rows(path: &Path) -> i64 {
    Connection::open(path)
        .unwrap()
        .query_row("SELECT count(*) FROM used_once", [], |r| r.get(0))
        .unwrap()
}

#[actix_rt::test]
async fn each_first_use_sweeps_a_few_expired_records_and_no_live_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("board.sqlite3");
    let store = SqliteStore::open(&path).unwrap();
    let t0 = Timestamp::from_millis(1_000_000);
    let (soon, late) = (t0.plus_millis(1_000), t0.plus_millis(3_600_000));
    for i in 0..20 {
        assert!(
            store
                .record_first_use("k", &format!("old-{i}"), soon, t0)
                .await
                .unwrap()
        );
    }
    for i in 0..5 {
        assert!(
            store
                .record_first_use("k", &format!("live-{i}"), late, t0)
                .await
                .unwrap()
        );
    }
    assert_eq!(rows(&path), 25);
    // Past the old records' expiry: each use removes a bounded few of them.
    let after = soon.plus_millis(1);
    assert!(
        store
            .record_first_use("k", "new-1", late, after)
            .await
            .unwrap()
    );
    let left = rows(&path);
    // 5 live + 1 new when all 20 expired rows went; 26 when none did.
    assert!(
        (5 + 1 + 1..26).contains(&left),
        "some but not all expired rows went in one call: {left}"
    );
    for i in 2..10 {
        store
            .record_first_use("k", &format!("new-{i}"), late, after)
            .await
            .unwrap();
    }
    assert_eq!(
        rows(&path),
        5 + 9,
        "every expired row went, every live one stayed"
    );
    for i in 0..5 {
        assert!(
            !store
                .record_first_use("k", &format!("live-{i}"), late, after)
                .await
                .unwrap(),
            "live records still refuse"
        );
    }
}
