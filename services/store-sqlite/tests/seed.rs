//! The bench-only bulk seeding path (`SqliteStore::seed_issues`) writes
//! what `create_issue` + `add_comment` write: the same issue read back
//! (but for its id and clock), the same comment, the same search hits, and
//! the same number of rows in every table a tenant's write touches
//! (issues, search index, labels, comments, webhook outbox).

use corkboard_board::{
    Author, Body, CommentBody, CommentWindow, IssueState, IssueStore, LabelFilter, Labels,
    ListQuery, NewComment, NewIssue, Priority, RunId, SearchQuery, SearchText, TenantId, Title,
};
use corkboard_store_sqlite::SqliteStore;
use rusqlite::Connection;
use serde_json::Value;

fn author() -> Author {
    Author {
        kind: corkboard_board::AuthorKind::Run,
        run: RunId::parse("seed-run").unwrap(),
        grant: None,
        integrity: corkboard_board::Integrity::Agent,
    }
}

fn issue(n: usize) -> NewIssue {
    let mut new = NewIssue::new(Title::parse(format!("zebra crossing number {n}")).unwrap());
    new.body = Body::parse(format!("body of {n} with quokka words")).unwrap();
    new.state = IssueState::ALL[n % IssueState::ALL.len()];
    new.priority = Priority::High;
    new.labels = Labels::parse(["bench".to_owned(), format!("l{n}")]).unwrap();
    new
}

/// The JSON of `value` with what differs between two writes of the same
/// content blanked: ids, timestamps, the tenant.
fn normalized(mut value: Value) -> Value {
    fn walk(v: &mut Value) {
        match v {
            Value::Object(map) => {
                for (k, v) in map.iter_mut() {
                    if k == "id" || k == "issue" || k == "tenant" || k.ends_with("_at") {
                        *v = Value::Null;
                    } else {
                        walk(v);
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut value);
    value
}

/// Rows per table with a `tenant` column, for `tenant`.
fn rows_by_table(path: &std::path::Path, tenant: &str) -> Vec<(String, i64)> {
    let conn = Connection::open(path).unwrap();
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut out = Vec::new();
    for table in tables {
        let has_tenant = conn
            .prepare(&format!(
                "SELECT 1 FROM pragma_table_info('{table}') WHERE name = 'tenant'"
            ))
            .unwrap()
            .exists([])
            .unwrap();
        if !has_tenant {
            continue;
        }
        let n: i64 = conn
            .query_row(
                &format!("SELECT count(*) FROM \"{table}\" WHERE tenant = ?1"),
                [tenant],
                |r| r.get(0),
            )
            .unwrap();
        out.push((table, n));
    }
    out
}

#[actix_rt::test]
async fn a_bulk_seeded_issue_reads_back_as_a_created_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("board.sqlite3");
    let store = SqliteStore::open(&path).unwrap();
    let (created_t, seeded_t) = (
        TenantId::parse("created").unwrap(),
        TenantId::parse("seeded").unwrap(),
    );
    let comment = |n: usize| CommentBody::parse(format!("comment on {n} about walruses")).unwrap();

    let mut created = Vec::new();
    for n in 0..5 {
        let c = store
            .create_issue(&created_t, &author(), issue(n), None)
            .await
            .unwrap();
        if n % 2 == 0 {
            store
                .add_comment(
                    &created_t,
                    &author(),
                    NewComment {
                        issue: c.issue.id.clone(),
                        body: comment(n),
                    },
                    None,
                )
                .await
                .unwrap();
        }
        created.push(c.issue.id);
    }
    let items = (0..5)
        .map(|n| (issue(n), (n % 2 == 0).then(|| comment(n))))
        .collect();
    let seeded = store
        .seed_issues(&seeded_t, &author(), items)
        .await
        .unwrap();
    assert_eq!(seeded.len(), 5);

    for (a, b) in created.iter().zip(&seeded) {
        let a = store
            .get_issue_view(&created_t, a, &CommentWindow::all())
            .await
            .unwrap();
        let b = store
            .get_issue_view(&seeded_t, b, &CommentWindow::all())
            .await
            .unwrap();
        assert_eq!(
            normalized(serde_json::to_value(&a).unwrap()),
            normalized(serde_json::to_value(&b).unwrap())
        );
    }
    let filtered = ListQuery {
        states: vec![IssueState::ALL[0]],
        labels: LabelFilter::None,
        ..ListQuery::default()
    };
    for query in [ListQuery::default(), filtered] {
        let a = store.list_issues(&created_t, &query).await.unwrap();
        let b = store.list_issues(&seeded_t, &query).await.unwrap();
        assert!(!a.issues.is_empty());
        // The same issues; their order follows the clock (one transaction
        // stamps them all within a millisecond), so it is compared apart.
        let content = |page: &corkboard_board::Page| {
            let mut items: Vec<String> = page
                .issues
                .iter()
                .map(|i| normalized(serde_json::to_value(i).unwrap()).to_string())
                .collect();
            items.sort();
            items
        };
        assert_eq!(content(&a), content(&b));
    }
    for word in ["quokka", "walruses", "zebra"] {
        let query = SearchQuery::new(SearchText::parse(word).unwrap());
        let a = store.search_issues(&created_t, &query).await.unwrap();
        let b = store.search_issues(&seeded_t, &query).await.unwrap();
        assert!(!a.hits.is_empty(), "{word}");
        assert_eq!(a.hits.len(), b.hits.len(), "{word}");
    }
    let (a, b) = (
        rows_by_table(&path, "created"),
        rows_by_table(&path, "seeded"),
    );
    assert!(a.iter().any(|(t, n)| t == "issues" && *n == 5), "{a:?}");
    assert_eq!(a, b);
}
