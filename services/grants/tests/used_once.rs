//! The used-once record in Redis and in the ledger: replicas sharing one
//! Redis, or processes sharing one SQLite store, record a value once
//! between them, atomically (of racing uses exactly one is the first), the
//! record expiring with the value; a Redis that cannot answer refuses the
//! use instead of letting it through unrecorded; asking whether a value
//! is recorded records nothing.

use corkboard_board::GrantLedger;
use corkboard_grants::{CLOCK_SLACK, FirstUse, LedgerUsedOnce, RedisUsedOnce, UsedOnce};
use corkboard_store_sqlite::SqliteStore;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn replicas_sharing_redis_use_a_value_once_until_it_expires() {
    let redis = corkboard_testkit::RedisServer::start();
    let prefix = corkboard_testkit::unique_prefix("used-once");
    let replica = || -> Arc<dyn UsedOnce> {
        Arc::new(RedisUsedOnce::new(&[redis.url()], &prefix, Duration::from_secs(1)).unwrap())
    };
    let replicas = [replica(), replica()];
    let expires_at = now() + 600;
    assert_eq!(race(&replicas, expires_at).await, 1);
    assert_eq!(
        replicas[1]
            .first_use("relay-id", b"nonce-1", expires_at)
            .await
            .unwrap(),
        FirstUse::First,
        "kinds are separate namespaces"
    );
    // Either replica sees a recorded value; asking records nothing.
    assert!(replicas[0].recorded("relay-id", b"nonce-1").await.unwrap());
    assert!(!replicas[1].recorded("relay-id", b"nonce-2").await.unwrap());
    assert!(!replicas[0].recorded("relay-id", b"nonce-2").await.unwrap());
    let key = format!("{prefix}used:relay-state:{}", hex_of(b"nonce-1"));
    let corkboard_testkit::Reply::Integer(ttl) = redis.command(&["PTTL", &key]).unwrap() else {
        panic!("PTTL answers an integer");
    };
    let longest = (600 + CLOCK_SLACK.as_secs()) as i64 * 1000;
    assert!(
        ttl > longest - 10_000 && ttl <= longest,
        "the value's expiry plus the clock slack: {ttl}"
    );
}

#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn a_redis_that_cannot_answer_refuses_the_use() {
    let mut redis = corkboard_testkit::RedisServer::start();
    let record = RedisUsedOnce::new(
        &[redis.url()],
        "used-once-down:",
        Duration::from_millis(300),
    )
    .unwrap();
    redis.stop();
    let err = record
        .first_use("relay-state", b"n", now() + 60)
        .await
        .unwrap_err();
    assert!(
        err.to_string().starts_with("used-once record unavailable"),
        "{err}"
    );
    let err = record.recorded("relay-state", b"n").await.unwrap_err();
    assert!(
        err.to_string().starts_with("used-once record unavailable"),
        "{err}"
    );
}

/// Sixteen racing first uses of one value, alternating between `records`;
/// answers how many were the first.
async fn race(records: &[Arc<dyn UsedOnce>; 2], expires_at: u64) -> usize {
    let mut racing = Vec::new();
    for i in 0..16 {
        let record = records[i % 2].clone();
        racing.push(tokio::spawn(async move {
            record
                .first_use("relay-state", b"nonce-1", expires_at)
                .await
        }));
    }
    let mut first = 0;
    for use_ in racing {
        if use_.await.unwrap().unwrap() == FirstUse::First {
            first += 1;
        }
    }
    first
}

#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn ledger_used_once_is_shared_by_processes_on_one_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("board.sqlite3");
    // Two stores on one file: what two runners on one data dir open.
    let a: Arc<dyn GrantLedger> = Arc::new(SqliteStore::open(&path).unwrap());
    let b: Arc<dyn GrantLedger> = Arc::new(SqliteStore::open(&path).unwrap());
    let processes: [Arc<dyn UsedOnce>; 2] = [
        Arc::new(LedgerUsedOnce::new(a)),
        Arc::new(LedgerUsedOnce::new(b)),
    ];
    let expires_at = now() + 600;
    assert_eq!(
        race(&processes, expires_at).await,
        1,
        "exactly one of 16 racing uses across two processes is the first"
    );
    for process in &processes {
        assert_eq!(
            process
                .first_use("relay-state", b"nonce-1", expires_at)
                .await
                .unwrap(),
            FirstUse::Replayed,
            "a replay to either process is refused"
        );
    }
    assert_eq!(
        processes[1]
            .first_use("relay-id", b"nonce-1", expires_at)
            .await
            .unwrap(),
        FirstUse::First,
        "kinds are separate namespaces"
    );
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
