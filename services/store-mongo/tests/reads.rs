//! What crosses the wire when the store reads an issue: an issue document
//! also holds the issue's search words (every distinct word of its title,
//! body and comments) and its history (its newest changes, with
//! excerpts), which no answer built from it uses and which can outweigh
//! the issue many times. Every `find` and `findAndModify` on an issues
//! collection either names the fields it wants or leaves both out.

use crate::common;

use common::{TestBoard, observing, test_options};
use corkboard_board::{CommentWindow, IssueStore, ListQuery, SearchQuery, SearchText, Timestamp};
use corkboard_store_contract::fixtures::{author, claimant, comment, full_issue, title_patch};
use mongodb::bson::{Bson, Document};

/// The fields an issue document holds beside the issue.
const NOT_READ: [&str; 4] = ["terms_title", "terms_body", "terms_comments", "history"];

/// Why `command` (a `find` or `findAndModify` on an issues collection)
/// carries a field of [`NOT_READ`] back, if it does. A projection that
/// names the fields it wants (search's ranking reads the search words,
/// `issue_history` the history) brings only those; one that leaves fields
/// out, or none, brings the rest of the document.
fn reads_too_much(name: &str, command: &Document) -> Option<String> {
    let key = if name == "find" {
        "projection"
    } else {
        "fields"
    };
    let Ok(projection) = command.get_document(key) else {
        return Some("no projection: the whole document comes back".to_owned());
    };
    let left_out = |value: &Bson| {
        matches!(
            value,
            Bson::Int32(0) | Bson::Int64(0) | Bson::Boolean(false)
        )
    };
    if projection.values().any(|value| !left_out(value)) {
        return None;
    }
    let missing: Vec<&str> = NOT_READ
        .into_iter()
        .filter(|field| !projection.get(*field).is_some_and(left_out))
        .collect();
    (!missing.is_empty()).then(|| format!("{projection} does not leave out {missing:?}"))
}

#[tokio::test]
async fn reads_of_issues_leave_their_search_words_and_history_on_the_server() {
    let board = TestBoard::start("reads").await;
    let (options, sent) = observing(test_options());
    let store = board.another_store(options).await;
    let t = corkboard_store_contract::fixtures::tenant("reads");
    let a = author("run-a");
    // An issue with words, comments and a history; another beside it.
    let first = store
        .create_issue(&t, &a, full_issue("flaky login test"), None)
        .await
        .unwrap()
        .issue;
    store
        .create_issue(&t, &a, full_issue("slow search page"), None)
        .await
        .unwrap();
    for text in ["seen twice on main", "the retry hides it"] {
        store
            .add_comment(&t, &a, comment(&first.id, text), None)
            .await
            .unwrap();
    }
    store
        .update_issue(&t, &first.id, title_patch("flaky login test on CI"), None)
        .await
        .unwrap();
    sent.lock().unwrap().clear();

    // Every call that answers with issues.
    store.get_issue(&t, &first.id).await.unwrap();
    store
        .get_issue_view(&t, &first.id, &CommentWindow::latest(10))
        .await
        .unwrap();
    store.list_issues(&t, &ListQuery::default()).await.unwrap();
    let ready = ListQuery {
        ready: true,
        ..ListQuery::default()
    };
    store.list_issues(&t, &ready).await.unwrap();
    let search = SearchQuery::new(SearchText::parse("flaky").unwrap());
    let hits = store.search_issues(&t, &search).await.unwrap();
    assert_eq!(hits.hits.len(), 1, "the search finds the issue");
    store
        .update_issue(
            &t,
            &first.id,
            title_patch("flaky login test, CI only"),
            None,
        )
        .await
        .unwrap();
    store
        .add_comment(&t, &a, comment(&first.id, "fixed by pinning"), None)
        .await
        .unwrap();
    let holder = claimant("run-a", None);
    store
        .claim_issue(&t, &first.id, &holder, None)
        .await
        .unwrap();
    store
        .release_issue(&t, &first.id, &holder.run, None)
        .await
        .unwrap();
    store.claim_next(&t, &ready, &holder).await.unwrap();
    store.board_stats(&t, Timestamp::now()).await.unwrap();

    let issues_collection = format!("issues.{}", t.as_str());
    let mut checked = 0;
    let mut wrong = Vec::new();
    for (name, bytes) in std::mem::take(&mut *sent.lock().unwrap()) {
        if name != "find" && name != "findAndModify" {
            continue;
        }
        let command = Document::from_reader(&mut bytes.as_slice()).unwrap();
        if command.get_str(name.as_str()).ok() != Some(issues_collection.as_str()) {
            continue;
        }
        checked += 1;
        if let Some(why) = reads_too_much(&name, &command) {
            let filter = command
                .get_document(if name == "find" { "filter" } else { "query" })
                .map(ToString::to_string)
                .unwrap_or_default();
            wrong.push(format!("{name} {filter}: {why}"));
        }
    }
    // The calls above read issues by `find` and `findAndModify` many times:
    // a collection name the check does not recognise would check none.
    assert!(
        checked >= 10,
        "only {checked} reads of {issues_collection} seen"
    );
    assert!(
        wrong.is_empty(),
        "reads that carry back more than the issue:\n{}",
        wrong.join("\n")
    );
}
