//! Where the store puts things: each tenant's issues physically in its own
//! collection, looked at with the driver, and the indexes it creates.

use crate::common;

use common::{TestBoard, connect, test_options};
use corkboard_board::{
    AuditLog, AuditQuery, GrantLedger, IssueStore, ListQuery, StoreError, TenantId,
};
use corkboard_store_contract::fixtures::{
    audit_record, author, comment, full_issue, grant, key, new_issue, token_hash,
};
use mongodb::bson::{Bson, Document, doc};
use std::collections::BTreeSet;

async fn documents(db: &mongodb::Database, collection: &str) -> Vec<Document> {
    let mut cursor = db
        .collection::<Document>(collection)
        .find(doc! {})
        .await
        .unwrap_or_else(|e| panic!("find in {collection}: {e}"));
    let mut out = Vec::new();
    while cursor.advance().await.expect("advance") {
        out.push(cursor.deserialize_current().expect("a document"));
    }
    out
}

fn ids(docs: &[Document]) -> BTreeSet<String> {
    docs.iter()
        .map(|d| d.get_str("_id").expect("a string _id").to_owned())
        .collect()
}

#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn each_tenant_has_its_own_collections_and_sees_only_them() {
    let board = TestBoard::start("physical_isolation").await;
    let store = &board.store;
    let a = TenantId::parse("tenant-a").unwrap();
    let b = TenantId::parse("tenant-b").unwrap();
    let who = author("run-1");

    let mut in_a = BTreeSet::new();
    for i in 0..3 {
        let k = key(&format!("a-{i}"));
        let created = store
            .create_issue(&a, &who, full_issue(&format!("A {i}")), Some(&k))
            .await
            .expect("create in a");
        in_a.insert(created.issue.id.to_string());
    }
    let first_a = in_a.iter().next().cloned().unwrap();
    let first_a = corkboard_board::IssueId::parse(first_a).unwrap();
    store
        .add_comment(&a, &who, comment(&first_a, "only in a"), Some(&key("c")))
        .await
        .expect("comment in a");
    let mut in_b = BTreeSet::new();
    for i in 0..2 {
        let created = store
            .create_issue(&b, &who, new_issue(&format!("B {i}")), None)
            .await
            .expect("create in b");
        in_b.insert(created.issue.id.to_string());
    }
    store
        .append_audit(&[
            audit_record(&a, "run-1", 1, None),
            audit_record(&b, "run-1", 2, None),
            audit_record(&a, "run-1", 3, None),
        ])
        .await
        .expect("audit");

    let db = board.raw_database().await;
    let names: BTreeSet<String> = db
        .list_collection_names()
        .await
        .expect("collections")
        .into_iter()
        .collect();
    for name in [
        "issues.tenant-a",
        "issues.tenant-b",
        "idem.tenant-a",
        "audit.tenant-a",
        "audit.tenant-b",
    ] {
        assert!(names.contains(name), "collection {name} missing: {names:?}");
    }

    let docs_a = documents(&db, "issues.tenant-a").await;
    let docs_b = documents(&db, "issues.tenant-b").await;
    assert_eq!(
        ids(&docs_a),
        in_a,
        "a's collection holds exactly a's issues"
    );
    assert_eq!(
        ids(&docs_b),
        in_b,
        "b's collection holds exactly b's issues"
    );
    for d in &docs_a {
        assert_eq!(d.get_str("tenant").unwrap(), "tenant-a");
    }
    let commented = docs_a
        .iter()
        .find(|d| d.get_str("_id").unwrap() == first_a.as_str())
        .unwrap();
    assert_eq!(
        commented.get_array("comments").unwrap().len(),
        1,
        "the comment is embedded in its issue"
    );
    assert_eq!(
        documents(&db, "idem.tenant-a").await.len(),
        4,
        "3 creates + 1 comment"
    );
    assert!(
        !names.contains("idem.tenant-b") || documents(&db, "idem.tenant-b").await.is_empty(),
        "b used no key"
    );
    let audit_b = documents(&db, "audit.tenant-b").await;
    assert_eq!(audit_b.len(), 1);
    assert_eq!(audit_b[0].get_str("tenant").unwrap(), "tenant-b");
    assert_eq!(documents(&db, "audit.tenant-a").await.len(), 2);

    // Through the store, b sees none of a's issues.
    for id in &in_a {
        let id = corkboard_board::IssueId::parse(id.as_str()).unwrap();
        assert!(matches!(
            store.get_issue(&b, &id).await,
            Err(StoreError::NotFound { .. })
        ));
    }
    let listed_b: BTreeSet<String> = store
        .list_issues(&b, &ListQuery::default())
        .await
        .expect("list b")
        .issues
        .into_iter()
        .map(|i| i.id.to_string())
        .collect();
    assert_eq!(listed_b, in_b);
    assert_eq!(
        store
            .list_audit(&b, &AuditQuery::default())
            .await
            .expect("audit b")
            .len(),
        1
    );
}

#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn a_document_copied_into_another_tenants_collection_is_refused() {
    let board = TestBoard::start("copied_document").await;
    let a = TenantId::parse("tenant-a").unwrap();
    let b = TenantId::parse("tenant-b").unwrap();
    let issue = board
        .store
        .create_issue(&a, &author("run-1"), new_issue("Secret of a"), None)
        .await
        .expect("create")
        .issue;
    let db = board.raw_database().await;
    let original = db
        .collection::<Document>("issues.tenant-a")
        .find_one(doc! { "_id": issue.id.as_str() })
        .await
        .expect("find")
        .expect("the issue document");
    db.collection::<Document>("issues.tenant-b")
        .insert_one(original)
        .await
        .expect("copy into b");
    let result = board.store.get_issue(&b, &issue.id).await;
    assert!(
        matches!(result, Err(StoreError::Internal(ref m)) if m.contains("another tenant")),
        "a copied document must not be served to another tenant: {result:?}"
    );
}

/// The keys of every index of `collection`, and which are unique.
async fn indexes(db: &mongodb::Database, collection: &str) -> Vec<(Document, bool)> {
    let mut cursor = db
        .collection::<Document>(collection)
        .list_indexes()
        .await
        .unwrap_or_else(|e| panic!("list indexes of {collection}: {e}"));
    let mut out = Vec::new();
    while cursor.advance().await.expect("advance") {
        let model = cursor.deserialize_current().expect("an index");
        let unique = model
            .options
            .as_ref()
            .and_then(|o| o.unique)
            .unwrap_or(false);
        out.push((model.keys, unique));
    }
    out
}

fn has_index(found: &[(Document, bool)], keys: Document, unique: bool) -> bool {
    found
        .iter()
        .any(|(k, u)| normalise(k) == normalise(&keys) && (*u || !unique))
}

/// Key documents with every direction as a 64-bit integer (servers answer
/// 1, 1i64 or 1.0).
fn normalise(keys: &Document) -> Vec<(String, i64)> {
    keys.iter()
        .map(|(k, v)| {
            let dir = match v {
                Bson::Int32(n) => i64::from(*n),
                Bson::Int64(n) => *n,
                Bson::Double(n) => *n as i64,
                other => panic!("unexpected index direction {other:?}"),
            };
            (k.clone(), dir)
        })
        .collect()
}

#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn indexes_are_created_at_first_write_and_at_start_up_idempotently() {
    let board = TestBoard::start("indexes").await;
    let db = board.raw_database().await;

    let grants = indexes(&db, "grants").await;
    assert!(
        has_index(&grants, doc! { "token_hash": 1 }, true),
        "grants: unique token_hash {grants:?}"
    );
    assert!(has_index(&grants, doc! { "tenant": 1, "_id": -1 }, false));

    // A tenant's first write creates its indexes.
    let t = TenantId::parse("fresh").unwrap();
    board
        .store
        .create_issue(&t, &author("run-1"), new_issue("first"), Some(&key("k")))
        .await
        .expect("create");
    let issues = indexes(&db, "issues.fresh").await;
    assert!(has_index(&issues, doc! { "_id": 1 }, false), "{issues:?}");
    assert!(
        has_index(&issues, doc! { "state": 1, "_id": -1 }, false),
        "{issues:?}"
    );
    assert!(
        has_index(&issues, doc! { "labels": 1, "_id": -1 }, false),
        "{issues:?}"
    );
    assert!(
        has_index(&issues, doc! { "updated_at": -1 }, false),
        "{issues:?}"
    );
    let idem = indexes(&db, "idem.fresh").await;
    assert!(
        has_index(&idem, doc! { "run": 1, "key": 1, "kind": 1 }, true),
        "idempotency records: unique (run, key, kind) {idem:?}"
    );

    // A tenant that exists before this process starts gets its indexes at
    // start-up, before any write of this process.
    db.collection::<Document>("issues.legacy")
        .insert_one(doc! { "_id": "placeholder" })
        .await
        .expect("raw insert");
    assert_eq!(
        indexes(&db, "issues.legacy").await.len(),
        1,
        "only _id so far"
    );
    let second = board.another_store(test_options()).await;
    let legacy = indexes(&db, "issues.legacy").await;
    assert!(
        has_index(&legacy, doc! { "state": 1, "_id": -1 }, false),
        "{legacy:?}"
    );
    assert!(has_index(
        &indexes(&db, "idem.legacy").await,
        doc! { "run": 1, "key": 1, "kind": 1 },
        true
    ));

    // Once more, from yet another process's point of view: nothing changes.
    let count = legacy.len();
    let _third = connect(&board.uri(), &board.database, test_options()).await;
    assert_eq!(indexes(&db, "issues.legacy").await.len(), count);
    drop(second);

    // The unique index decides between two stores too.
    let g = grant(&t, "run-1", corkboard_board::Timestamp::now(), 60_000);
    let hash = token_hash();
    board.store.record_grant(&g, &hash).await.expect("record");
    let mut other = grant(&t, "run-2", corkboard_board::Timestamp::now(), 60_000);
    other.created_by = "someone".into();
    assert!(
        board.store.record_grant(&other, &hash).await.is_err(),
        "a second grant with the same token hash is refused"
    );
}
