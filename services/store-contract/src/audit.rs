//! The audit log: batches append atomically, each record at most once
//! under its id, and read back newest first.

use crate::fixtures::*;
use corkboard_board::{AuditEntry, AuditQuery, AuditRecord, BoardStore, IssueId, StoreError};
use std::sync::Arc;

const BASE: i64 = 1_764_000_000_000;

fn newest_first(mut records: Vec<AuditRecord>) -> Vec<AuditRecord> {
    records.sort_by_key(|r| std::cmp::Reverse(r.at));
    records
}

pub async fn case_audit_append_and_list<S: BoardStore>(store: Arc<S>) {
    let t = tenant("audit");
    store
        .append_audit(&[])
        .await
        .expect("an empty batch is fine");
    assert!(
        store
            .list_audit(&t, &AuditQuery::default())
            .await
            .expect("list")
            .is_empty()
    );

    let issue = IssueId::generate();
    // Appended out of time order: the log sorts by time, not arrival.
    let batch: Vec<AuditRecord> = [3, 1, 4, 0, 2]
        .into_iter()
        .map(|i| audit_record(&t, "run-1", BASE + i, (i % 2 == 0).then_some(&issue)))
        .collect();
    store.append_audit(&batch).await.expect("append");
    let later = vec![audit_record(&t, "run-2", BASE + 10, None)];
    store.append_audit(&later).await.expect("append later");

    let mut all = batch.clone();
    all.extend(later);
    assert_eq!(
        store
            .list_audit(&t, &AuditQuery::default())
            .await
            .expect("list"),
        newest_first(all),
        "every record, exactly as appended, newest first"
    );
}

pub async fn case_audit_filters_and_limit<S: BoardStore>(store: Arc<S>) {
    let t = tenant("audit-filters");
    let (x, y) = (IssueId::generate(), IssueId::generate());
    let records: Vec<AuditRecord> = (0..12)
        .map(|i| {
            let run_name = if i % 3 == 0 { "run-a" } else { "run-b" };
            let issue = match i % 4 {
                0 => Some(&x),
                1 => Some(&y),
                _ => None,
            };
            audit_record(&t, run_name, BASE + i, issue)
        })
        .collect();
    store.append_audit(&records).await.expect("append");

    let expect = |f: &dyn Fn(&AuditRecord) -> bool| -> Vec<AuditRecord> {
        newest_first(records.iter().filter(|r| f(r)).cloned().collect())
    };
    let query = |run_name: Option<&str>, issue: Option<&IssueId>, limit: u32| AuditQuery {
        run: run_name.map(run),
        issue: issue.cloned(),
        limit,
    };
    let list = |q: AuditQuery| {
        let store = Arc::clone(&store);
        let t = t.clone();
        async move { store.list_audit(&t, &q).await.expect("list audit") }
    };

    assert_eq!(
        list(query(Some("run-a"), None, 100)).await,
        expect(&|r| r.run.as_str() == "run-a")
    );
    assert_eq!(
        list(query(None, Some(&x), 100)).await,
        expect(&|r| r.issue.as_ref() == Some(&x))
    );
    assert_eq!(
        list(query(Some("run-b"), Some(&y), 100)).await,
        expect(&|r| r.run.as_str() == "run-b" && r.issue.as_ref() == Some(&y))
    );
    assert_eq!(list(query(Some("run-none"), None, 100)).await, Vec::new());
    let newest_three = list(query(None, None, 3)).await;
    assert_eq!(
        newest_three,
        expect(&|_| true)[..3].to_vec(),
        "a limit keeps the newest"
    );
    assert_eq!(
        list(query(Some("run-b"), None, 2)).await,
        expect(&|r| r.run.as_str() == "run-b")[..2].to_vec()
    );
    let zero = store.list_audit(&t, &query(None, None, 0)).await;
    assert!(
        matches!(zero, Err(StoreError::Invalid(_))),
        "a zero limit is refused: {zero:?}"
    );
}

pub async fn case_audit_tenant_isolation<S: BoardStore>(store: Arc<S>) {
    let a = tenant("audit-a");
    let b = tenant("audit-b");
    let issue = IssueId::generate();
    // One batch may mix tenants; each record lands with its own.
    let batch = vec![
        audit_record(&a, "run-1", BASE, Some(&issue)),
        audit_record(&b, "run-1", BASE + 1, Some(&issue)),
        audit_record(&a, "run-1", BASE + 2, None),
    ];
    store.append_audit(&batch).await.expect("append");
    assert_eq!(
        store
            .list_audit(&a, &AuditQuery::default())
            .await
            .expect("list a"),
        vec![batch[2].clone(), batch[0].clone()]
    );
    let for_b = AuditQuery {
        issue: Some(issue.clone()),
        ..AuditQuery::default()
    };
    assert_eq!(
        store.list_audit(&b, &for_b).await.expect("list b"),
        vec![batch[1].clone()],
        "an issue filter never crosses tenants"
    );
}

/// Issue 16 item 15: the audit writer retries a batch whose write may or
/// may not have landed (a timeout, a connection cut mid-insert). Retried
/// with the same ids, each record is stored exactly once: whether the
/// first attempt wrote all of the batch, part of it (cut off midway), or
/// nothing.
pub async fn case_audit_retries_store_each_record_once<S: BoardStore>(store: Arc<S>) {
    let a = tenant("audit-retry-a");
    let b = tenant("audit-retry-b");
    // Two tenants in one batch: stores write a batch tenant by tenant, so
    // a cut-off attempt may have written one tenant's part only. More
    // records than one statement of a store may insert (SQLite: 32), some
    // about an issue, so that chunks and the rows after them both meet
    // records already stored.
    let issue = IssueId::generate();
    let entries: Vec<AuditEntry> = (0..75)
        .map(|i| {
            let t = if i % 4 == 0 { &b } else { &a };
            let about = (i % 3 == 0).then_some(&issue);
            AuditEntry::new(audit_record(t, "run-1", BASE + i, about))
        })
        .collect();
    // The first attempt got as far as some records (tenant b's, part of a's)...
    let partial: Vec<AuditEntry> = entries
        .iter()
        .filter(|e| e.record.tenant == b || e.record.at.as_millis() < BASE + 7)
        .cloned()
        .collect();
    store
        .append_audit_entries(&partial)
        .await
        .expect("first attempt");
    // ...then its answer was lost, and the whole batch is written again,
    // twice (the retry's answer was lost too).
    for _ in 0..2 {
        store
            .append_audit_entries(&entries)
            .await
            .expect("a retry of records already stored succeeds");
    }
    for t in [&a, &b] {
        let stored = store
            .list_audit(
                t,
                &AuditQuery {
                    limit: 100,
                    ..AuditQuery::default()
                },
            )
            .await
            .expect("list");
        let expected: Vec<AuditRecord> = entries
            .iter()
            .filter(|e| &e.record.tenant == t)
            .map(|e| e.record.clone())
            .collect();
        assert_eq!(
            stored,
            newest_first(expected),
            "{t}: each record exactly once"
        );
    }
    // The same record under a new id is a new record (a second call).
    let again = AuditEntry::new(entries[1].record.clone());
    store.append_audit_entries(&[again]).await.expect("append");
    let stored = store
        .list_audit(
            &a,
            &AuditQuery {
                limit: 100,
                ..AuditQuery::default()
            },
        )
        .await
        .expect("list");
    let before = entries.iter().filter(|e| e.record.tenant == a).count();
    assert_eq!(stored.len(), before + 1, "a new id is a new record");
}
