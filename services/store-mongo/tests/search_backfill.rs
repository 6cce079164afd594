//! Issues written before search existed (no word arrays) become searchable
//! once a store process first touches their tenant, and the arrays then
//! follow every write.

use crate::common;

use common::{TestBoard, test_options};
use corkboard_board::{IssueStore, SearchQuery, SearchText, TenantId};
use corkboard_store_contract::fixtures::{author, comment, new_issue};
use mongodb::bson::{Document, doc};

#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn issues_without_word_arrays_are_backfilled_on_first_use() {
    let board = TestBoard::start("backfill").await;
    let t = TenantId::parse("older").unwrap();
    let created = board
        .store
        .create_issue(
            &t,
            &author("run-1"),
            new_issue("Ancient sprocket failure"),
            None,
        )
        .await
        .unwrap()
        .issue;
    board
        .store
        .add_comment(
            &t,
            &author("run-1"),
            comment(&created.id, "legacy flange note"),
            None,
        )
        .await
        .unwrap();
    // Make it look like a document from before search: no word arrays.
    let issues = board
        .raw_database()
        .await
        .collection::<Document>("issues.older");
    issues
        .update_one(
            doc! { "_id": created.id.as_str() },
            doc! { "$unset": { "terms_title": "", "terms_body": "", "terms_comments": "" } },
        )
        .await
        .unwrap();
    // A board from before search also predates the records of each
    // tenant's set-up (`_schema`): without one, the next start sets the
    // tenant up again, backfill included.
    board
        .raw_database()
        .await
        .collection::<Document>("_schema")
        .delete_one(doc! { "_id": "issues.older" })
        .await
        .unwrap();
    // A fresh process (its own per-tenant set-up) finds them after backfill.
    let store = board.another_store(test_options()).await;
    for word in ["sprocket", "flange"] {
        let page = store
            .search_issues(&t, &SearchQuery::new(SearchText::parse(word).unwrap()))
            .await
            .unwrap();
        let ids: Vec<_> = page.hits.iter().map(|h| h.issue.id.clone()).collect();
        assert_eq!(ids, vec![created.id.clone()], "{word}");
    }
    let stored = issues
        .find_one(doc! { "_id": created.id.as_str() })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        stored.get_array("terms_comments").unwrap().len(),
        3,
        "legacy, flange, note: {stored:?}"
    );
}
