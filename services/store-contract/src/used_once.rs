//! Values used once, recorded in the store: the first use of a kind and id
//! is `true` exactly once (of racing callers, one), a live record refuses
//! the rest, and an expired record counts as none.

use crate::fixtures::token_hash;
use corkboard_board::{BoardStore, Timestamp};
use std::sync::Arc;

const MINUTE: i64 = 60_000;

pub async fn case_a_value_is_used_once_until_its_record_expires<S: BoardStore>(store: Arc<S>) {
    let now = Timestamp::now();
    let until = now.plus_millis(MINUTE);
    // Random ids, so a store shared by mistake cannot pass by luck.
    let id = token_hash();
    let first = |kind: &'static str, id: String, expires_at: Timestamp, at: Timestamp| {
        let store = store.clone();
        async move {
            store
                .record_first_use(kind, &id, expires_at, at)
                .await
                .expect("record first use")
        }
    };
    assert!(
        first("relay-state", id.clone(), until, now).await,
        "a first use"
    );
    assert!(
        !first("relay-state", id.clone(), until, now.plus_millis(1)).await,
        "a second use while the record is live is a replay"
    );
    assert!(
        first("relay-id", id.clone(), until, now).await,
        "kinds are separate namespaces"
    );
    assert!(
        first("relay-state", format!("{id}-other"), until, now).await,
        "ids are recorded apart"
    );
    // Asking records nothing; a live record is there, an expired or
    // unknown one is not.
    let recorded = |id: String, at: Timestamp| {
        let store = store.clone();
        async move {
            store
                .first_use_recorded("relay-state", &id, at)
                .await
                .expect("first use recorded")
        }
    };
    assert!(recorded(id.clone(), now.plus_millis(1)).await);
    assert!(!recorded(id.clone(), until).await, "expired at its end");
    let unknown = token_hash();
    assert!(!recorded(unknown.clone(), now).await);
    assert!(
        !recorded(unknown, now).await,
        "asking twice records nothing"
    );
    // At its expiry the record counts as none: replaced, live again.
    let later = until.plus_millis(MINUTE);
    assert!(
        first("relay-state", id.clone(), later, until).await,
        "an expired record is replaced"
    );
    assert!(
        !first("relay-state", id.clone(), later, until.plus_millis(1)).await,
        "and the replacement counts"
    );

    // Sixteen racing first uses of one new value: exactly one is first.
    let raced = token_hash();
    let racers: Vec<_> = (0..16)
        .map(|_| tokio::spawn(first("relay-state", raced.clone(), until, now)))
        .collect();
    let mut firsts = 0;
    for racer in racers {
        if racer.await.expect("join") {
            firsts += 1;
        }
    }
    assert_eq!(firsts, 1, "exactly one of racing callers is first");
}
