//! Provenance: every issue, comment and change keeps its author's
//! integrity level; an issue's own level is the lowest of its author's and
//! every editor's; a floor (`ListQuery::min_integrity`) leaves lower issues
//! out of lists, ready work, `claim_next` and searches, in the store's own
//! query; similar-issue hints carry each issue's level; a grant keeps its
//! floor.

use crate::fixtures::*;
use corkboard_board::{
    Author, BoardStore, ClaimNext, Claimant, GrantId, Integrity, IssuePatch, ListQuery,
    SearchQuery, SearchText, Timestamp,
};
use std::sync::Arc;

fn writer(name: &str, level: Integrity) -> Author {
    Author::run(run(name), Some(GrantId::generate()), level)
}

pub async fn case_integrity_is_kept_lowered_by_edits_and_filtered_by_a_floor<S: BoardStore>(
    store: Arc<S>,
) {
    let t = tenant("integrity");
    let person = Author::principal(corkboard_board::AuthorKind::Person, "ada@example.com");
    let agent = writer("run-agent", Integrity::Agent);
    let external = writer("run-external", Integrity::External);

    let by_person = store
        .create_issue(&t, &person, new_issue("Rotate the deploy keys"), None)
        .await
        .expect("create by a person")
        .issue;
    assert_eq!(by_person.integrity, Integrity::Person);
    assert_eq!(by_person.author.integrity, Integrity::Person);
    let by_agent = store
        .create_issue(&t, &agent, new_issue("Rotate the cache keys"), None)
        .await
        .expect("create by an agent")
        .issue;
    let by_external = store
        .create_issue(&t, &external, new_issue("Rotate the signing keys"), None)
        .await
        .expect("create by an external run")
        .issue;
    assert_eq!(by_external.integrity, Integrity::External);

    // A comment keeps its author's level, read back through every read.
    store
        .add_comment(&t, &external, comment(&by_person.id, "keys rotated"), None)
        .await
        .expect("comment");
    let read = store.get_issue(&t, &by_person.id).await.expect("get");
    assert_eq!(
        read.integrity,
        Integrity::Person,
        "a comment is not an edit"
    );
    assert_eq!(read.author.integrity, Integrity::Person);
    assert_eq!(read.comments[0].author.integrity, Integrity::External);

    // An edit lowers the issue's level, never raises it.
    let edited = store
        .update_issue(
            &t,
            &by_agent.id,
            IssuePatch {
                actor: Some(external.clone()),
                ..title_patch("Rotate the cache keys now")
            },
            None,
        )
        .await
        .expect("edit by an external run");
    assert_eq!(edited.integrity, Integrity::External);
    assert_eq!(
        edited.author.integrity,
        Integrity::Agent,
        "the author stays"
    );
    let raised = store
        .update_issue(
            &t,
            &by_agent.id,
            IssuePatch {
                actor: Some(person.clone()),
                ..title_patch("Rotate the cache keys today")
            },
            None,
        )
        .await
        .expect("edit by a person");
    assert_eq!(raised.integrity, Integrity::External);
    let history = store
        .issue_history(&t, &by_agent.id, None, 10)
        .await
        .expect("history");
    let levels: Vec<Integrity> = history.changes.iter().map(|c| c.by.integrity).collect();
    assert_eq!(
        levels,
        [Integrity::Person, Integrity::External, Integrity::Agent],
        "each change keeps its author's level, newest first"
    );

    // A floor leaves lower issues out of lists, in the store's query.
    let ids = |page: corkboard_board::Page| -> Vec<_> {
        page.issues.into_iter().map(|issue| issue.id).collect()
    };
    let floored = |floor| ListQuery {
        min_integrity: Some(floor),
        ..ListQuery::default()
    };
    let all = ids(store.list_issues(&t, &ListQuery::default()).await.unwrap());
    assert_eq!(all.len(), 3);
    assert_eq!(
        ids(store
            .list_issues(&t, &floored(Integrity::Agent))
            .await
            .unwrap()),
        vec![by_person.id.clone()],
        "the edited issue is external now, the other was written so"
    );
    assert_eq!(
        ids(store
            .list_issues(&t, &floored(Integrity::External))
            .await
            .unwrap()),
        all
    );
    let ready = ListQuery {
        ready: true,
        ..floored(Integrity::Person)
    };
    assert_eq!(
        ids(store.list_issues(&t, &ready).await.unwrap()),
        vec![by_person.id.clone()]
    );

    // Searches: the same floor.
    let mut search = SearchQuery::new(SearchText::parse("rotate").unwrap());
    assert_eq!(
        store.search_issues(&t, &search).await.unwrap().hits.len(),
        3
    );
    search.filter.min_integrity = Some(Integrity::Agent);
    let hits = store.search_issues(&t, &search).await.unwrap().hits;
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].issue.id, by_person.id);

    // Similar-issue hints carry each issue's level.
    let similar = store
        .similar_open_issues(&t, &title("Rotate the keys"), 5)
        .await
        .unwrap();
    assert_eq!(similar.len(), 3);
    for hint in &similar {
        let expected = if hint.id == by_person.id {
            Integrity::Person
        } else {
            Integrity::External
        };
        assert_eq!(hint.integrity, expected, "{}", hint.title.as_str());
    }

    // claim_next hands out only work at or above the floor.
    let claimant = Claimant::of(
        &grant(&t, "run-picky", Timestamp::now(), 3_600_000),
        std::time::Duration::from_secs(600),
        Integrity::Agent,
    );
    match store
        .claim_next(&t, &floored(Integrity::Person), &claimant)
        .await
        .unwrap()
    {
        ClaimNext::Claimed { issue } => assert_eq!(issue.id, by_person.id),
        other => panic!("expected the person's issue, got {other:?}"),
    }
    match store
        .claim_next(&t, &floored(Integrity::Person), &claimant)
        .await
        .unwrap()
    {
        ClaimNext::NoReadyWork { .. } => {}
        other => panic!("nothing else is at person level: {other:?}"),
    }
    // The claim's history entry is the claimant's, at its level.
    let claimed = store
        .issue_history(&t, &by_person.id, None, 1)
        .await
        .unwrap();
    assert_eq!(claimed.changes[0].by.integrity, Integrity::Agent);

    // A grant keeps its floor.
    let mut g = grant(&t, "run-floored", Timestamp::now(), 3_600_000);
    g.min_integrity = Some(Integrity::Agent);
    store.record_grant(&g, &token_hash()).await.expect("record");
    let stored = store.grant(&g.id).await.expect("grant");
    assert_eq!(stored.grant.min_integrity, Some(Integrity::Agent));
}
