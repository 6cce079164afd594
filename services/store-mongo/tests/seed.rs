//! The bench-only bulk seeding path (`MongoStore::seed_issues`) writes what
//! `create_issue` + `add_comment` write: the same issue read back (but for
//! its id and clock), the same comment, the same list pages and search
//! hits, the same stored document (every field, word arrays included), the
//! same collections and indexes, and the same webhook deliveries.

use crate::common;

use common::TestBoard;
use corkboard_board::{
    Author, Body, CommentBody, IssueState, IssueStore, LabelFilter, Labels, ListQuery, NewComment,
    NewIssue, NewWebhook, Page, Priority, RunId, SearchQuery, SearchText, TenantId, Timestamp,
    Title, WebhookEvent, WebhookEvents, WebhookSecret, WebhookStore, WebhookUrl,
};
use mongodb::bson::{Bson, Document, doc};
use serde_json::Value;
use std::time::Duration;

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

fn comment(n: usize) -> CommentBody {
    CommentBody::parse(format!("comment on {n} about walruses")).unwrap()
}

/// Whether a field differs between two writes of the same content: ids,
/// timestamps, the tenant.
fn varies(key: &str) -> bool {
    // `comment` is a search hit's comment id.
    // `at` is a history entry's instant.
    matches!(key, "id" | "_id" | "issue" | "comment" | "tenant" | "at") || key.ends_with("_at")
}

/// `text` with every comment id blanked (a history entry names the
/// comments it added inside its JSON text).
fn without_comment_ids(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("cmt_") {
        out.push_str(&rest[..at + 4]);
        let after = &rest[at + 4..];
        let id_len = after
            .find(|c: char| !c.is_ascii_alphanumeric())
            .unwrap_or(after.len());
        rest = &after[id_len..];
    }
    out.push_str(rest);
    out
}

/// The JSON of `value` with what differs between two writes blanked.
fn normalized(mut value: Value) -> Value {
    fn walk(v: &mut Value) {
        match v {
            Value::Object(map) => {
                for (k, v) in map.iter_mut() {
                    if varies(k) {
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

/// A stored document with what differs between two writes blanked (and
/// nothing else: the field names, their order and the word arrays stay).
fn normalized_doc(mut doc: Document) -> Document {
    fn walk(b: &mut Bson) {
        match b {
            Bson::Document(d) => {
                for (k, v) in d.iter_mut() {
                    if varies(k) {
                        *v = Bson::Null;
                    } else {
                        walk(v);
                    }
                }
            }
            Bson::Array(items) => items.iter_mut().for_each(walk),
            Bson::String(text) => *text = without_comment_ids(text),
            _ => {}
        }
    }
    let mut b = Bson::Document(std::mem::take(&mut doc));
    walk(&mut b);
    match b {
        Bson::Document(d) => d,
        _ => unreachable!(),
    }
}

fn hook() -> NewWebhook {
    NewWebhook {
        url: WebhookUrl::parse("https://hooks.example.com/in?key=k").unwrap(),
        events: WebhookEvents::parse_list(["issue.created", "issue.commented"]).unwrap(),
        secret: WebhookSecret::parse("a-secret-of-16-bytes").unwrap(),
    }
}

/// Page contents in a fixed order: the pages' own order follows the ids,
/// which follow the clock, so two boards written at different times are
/// compared apart from it.
fn content(page: &Page) -> Vec<String> {
    let mut items: Vec<String> = page
        .issues
        .iter()
        .map(|i| normalized(serde_json::to_value(i).unwrap()).to_string())
        .collect();
    items.sort();
    items
}

#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn a_bulk_seeded_issue_reads_back_as_a_created_one() {
    let board = TestBoard::start("seed").await;
    let store = &board.store;
    let (created_t, seeded_t) = (
        TenantId::parse("created").unwrap(),
        TenantId::parse("seeded").unwrap(),
    );
    let mut hooks = Vec::new();
    for t in [&created_t, &seeded_t] {
        hooks.push(
            store
                .create_webhook(t, &hook(), Timestamp::now())
                .await
                .unwrap()
                .id,
        );
    }

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

    // Read through the store: the same issue, view, pages and hits.
    for (a, b) in created.iter().zip(&seeded) {
        let a = store
            .get_issue_view(&created_t, a, &corkboard_board::CommentWindow::all())
            .await
            .unwrap();
        let b = store
            .get_issue_view(&seeded_t, b, &corkboard_board::CommentWindow::all())
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
        assert_eq!(content(&a), content(&b));
    }
    for word in ["quokka", "walruses", "zebra", "number 2"] {
        let query = SearchQuery::new(SearchText::parse(word).unwrap());
        let a = store.search_issues(&created_t, &query).await.unwrap();
        let b = store.search_issues(&seeded_t, &query).await.unwrap();
        assert!(!a.hits.is_empty(), "{word}");
        let scores = |page: &corkboard_board::SearchPage| {
            let mut s: Vec<String> = page
                .hits
                .iter()
                .map(|h| normalized(serde_json::to_value(h).unwrap()).to_string())
                .collect();
            s.sort();
            s
        };
        assert_eq!(scores(&a), scores(&b), "{word}");
    }

    // The stored documents themselves, field by field.
    let db = board.raw_database().await;
    let docs = |t: &TenantId| {
        let coll = db.collection::<Document>(&format!("issues.{t}"));
        async move {
            let mut cursor = coll.find(doc! {}).sort(doc! { "title": 1 }).await.unwrap();
            let mut out = Vec::new();
            while cursor.advance().await.unwrap() {
                out.push(normalized_doc(cursor.deserialize_current().unwrap()));
            }
            out
        }
    };
    let (a, b) = (docs(&created_t).await, docs(&seeded_t).await);
    assert_eq!(a.len(), 5);
    assert!(a[0].contains_key("terms_comments"), "{:?}", a[0]);
    assert_eq!(a, b);

    // The same collections, with the same documents counts and indexes.
    let names = db.list_collection_names().await.unwrap();
    let of = |t: &TenantId| {
        let suffix = format!(".{t}");
        let mut kinds: Vec<String> = names
            .iter()
            .filter_map(|n| n.strip_suffix(&suffix).map(str::to_owned))
            .collect();
        kinds.sort();
        kinds
    };
    assert_eq!(of(&created_t), of(&seeded_t));
    assert!(of(&created_t).contains(&"issues".to_owned()));
    for kind in of(&created_t) {
        let coll = |t: &TenantId| db.collection::<Document>(&format!("{kind}.{t}"));
        assert_eq!(
            coll(&created_t).count_documents(doc! {}).await.unwrap(),
            coll(&seeded_t).count_documents(doc! {}).await.unwrap(),
            "{kind}"
        );
        let indexes = |t: &TenantId| {
            let coll = coll(t);
            async move {
                let mut keys: Vec<String> =
                    coll.list_index_names().await.unwrap().into_iter().collect();
                keys.sort();
                keys
            }
        };
        assert_eq!(
            indexes(&created_t).await,
            indexes(&seeded_t).await,
            "{kind}"
        );
    }

    // The same webhook deliveries: one per create and one per comment.
    let due = Timestamp::now().plus_millis(1_000);
    let claimed = store
        .claim_deliveries(due, Duration::from_secs(30), 100, 100)
        .await
        .unwrap();
    let events = |hook| {
        let mut e: Vec<WebhookEvent> = claimed
            .iter()
            .filter(|d| &d.webhook == hook)
            .map(|d| d.event)
            .collect();
        e.sort();
        e
    };
    let (a, b) = (events(&hooks[0]), events(&hooks[1]));
    assert_eq!(a.len(), 8, "{a:?}");
    assert_eq!(a, b);
}
