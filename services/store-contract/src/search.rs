//! Search and similarity: what matches (against the domain's reference,
//! `SearchQuery::matches`), how hits rank and what their snippets show,
//! filters, tenants, writes visible at once, paging, near duplicates, and
//! the two list filters search brought (priority, updated_since).

use crate::fixtures::*;
use corkboard_board::{
    BoardStore, Body, CreateOutcome, Issue, IssueId, IssuePatch, IssueState, LabelFilter,
    ListQuery, MatchField, Priority, SearchPage, SearchQuery, SearchText, SimilarIssue, StoreError,
    TenantId, Timestamp, limits,
};
use std::collections::BTreeSet;
use std::sync::Arc;

fn query(text: &str) -> SearchQuery {
    SearchQuery::new(SearchText::parse(text).expect("a valid query"))
}

async fn search<S: BoardStore>(store: &S, t: &TenantId, q: &SearchQuery) -> SearchPage {
    store
        .search_issues(t, q)
        .await
        .unwrap_or_else(|e| panic!("search {q:?}: {e}"))
}

/// The one id a search must find.
fn only(id: &IssueId) -> Vec<IssueId> {
    vec![id.clone()]
}

fn hit_ids(page: &SearchPage) -> Vec<IssueId> {
    page.hits.iter().map(|h| h.issue.id.clone()).collect()
}

async fn create<S: BoardStore>(
    store: &S,
    t: &TenantId,
    title_text: &str,
    body: &str,
    state: IssueState,
) -> Issue {
    let new = corkboard_board::NewIssue {
        body: Body::parse(body).expect("a valid body"),
        state,
        ..new_issue(title_text)
    };
    store
        .create_issue(t, &author("run-1"), new, None)
        .await
        .expect("create")
        .issue
}

/// Issues about other things, so a match has something to stand out from.
async fn noise<S: BoardStore>(store: &S, t: &TenantId, n: usize) {
    for i in 0..n {
        create(
            store,
            t,
            &format!("Routine chore {i}"),
            "Update the dependencies and run the test suite.",
            IssueState::Todo,
        )
        .await;
    }
}

pub async fn case_search_finds_a_body_word_first_with_its_snippet<S: BoardStore>(store: Arc<S>) {
    let t = tenant("search-body");
    noise(&*store, &t, 5).await;
    let long_intro = "Some context about the deployment pipeline. ".repeat(8);
    let target = create(
        &*store,
        &t,
        "Deploys are slow",
        &format!("{long_intro}The cache layer xylophonic retries make it worse.\n\nMore text."),
        IssueState::Inbox,
    )
    .await;
    noise(&*store, &t, 3).await;
    let page = search(&*store, &t, &query("xylophonic")).await;
    assert_eq!(hit_ids(&page), only(&target.id), "only the body has it");
    let hit = &page.hits[0];
    assert_eq!(hit.field, MatchField::Body);
    assert!(
        hit.snippet.contains("**xylophonic**"),
        "the snippet marks the word: {}",
        hit.snippet
    );
    assert!(
        hit.snippet.chars().count() < 250,
        "the snippet is short: {}",
        hit.snippet
    );
    assert_eq!(hit.issue, target, "the hit carries the whole issue");
    assert!(!page.partial);
    assert_eq!(page.next_offset, None);

    // Case and punctuation do not matter; a prefix needs its `*`.
    let page = search(&*store, &t, &query("XYLOPHONIC!")).await;
    assert_eq!(hit_ids(&page), only(&target.id));
    assert!(
        search(&*store, &t, &query("xylophon"))
            .await
            .hits
            .is_empty()
    );
    let page = search(&*store, &t, &query("xylophon*")).await;
    assert_eq!(hit_ids(&page), only(&target.id));
    // Every term must match.
    let page = search(&*store, &t, &query("xylophonic cache")).await;
    assert_eq!(hit_ids(&page), only(&target.id));
    assert!(
        search(&*store, &t, &query("xylophonic kubernetes"))
            .await
            .hits
            .is_empty()
    );
}

pub async fn case_search_finds_a_comment_word_right_after_the_comment<S: BoardStore>(
    store: Arc<S>,
) {
    let t = tenant("search-comment");
    noise(&*store, &t, 4).await;
    let target = create(
        &*store,
        &t,
        "Login fails",
        "Users see a 500.",
        IssueState::Todo,
    )
    .await;
    noise(&*store, &t, 2).await;
    assert!(
        search(&*store, &t, &query("quarkonium"))
            .await
            .hits
            .is_empty()
    );
    store
        .add_comment(
            &t,
            &author("run-2"),
            comment(&target.id, "First look: nothing."),
            None,
        )
        .await
        .expect("comment");
    let added = store
        .add_comment(
            &t,
            &author("run-2"),
            comment(
                &target.id,
                "Root cause: the quarkonium session store expired.",
            ),
            None,
        )
        .await
        .expect("comment");
    let page = search(&*store, &t, &query("quarkonium")).await;
    assert_eq!(hit_ids(&page), only(&target.id));
    let hit = &page.hits[0];
    assert_eq!(hit.field, MatchField::Comment);
    assert_eq!(hit.comment.as_ref(), Some(&added.comment.id));
    assert!(hit.snippet.contains("**quarkonium**"), "{}", hit.snippet);
    assert_eq!(hit.issue.comments.len(), 2, "the hit carries its comments");
    // Terms may match in different fields.
    let page = search(&*store, &t, &query("login quarkonium")).await;
    assert_eq!(hit_ids(&page), only(&target.id));
}

pub async fn case_search_ranks_title_over_body_over_comments<S: BoardStore>(store: Arc<S>) {
    let t = tenant("search-rank");
    // Created oldest first, so "newest first" on a tie would put them the
    // other way round: the order below comes from the fields.
    let in_title = create(&*store, &t, "Wombat exporter crashes", "", IssueState::Todo).await;
    let in_body = create(
        &*store,
        &t,
        "Exporter crashes",
        "Seen with the wombat exporter enabled.",
        IssueState::Todo,
    )
    .await;
    let in_comment = create(
        &*store,
        &t,
        "Exporter is flaky",
        "No idea.",
        IssueState::Todo,
    )
    .await;
    store
        .add_comment(
            &t,
            &author("run-1"),
            comment(&in_comment.id, "wombat again"),
            None,
        )
        .await
        .expect("comment");
    noise(&*store, &t, 3).await;
    let page = search(&*store, &t, &query("wombat")).await;
    assert_eq!(
        hit_ids(&page),
        [
            in_title.id.clone(),
            in_body.id.clone(),
            in_comment.id.clone()
        ],
        "title, then body, then comment"
    );
    let fields: Vec<MatchField> = page.hits.iter().map(|h| h.field).collect();
    assert_eq!(
        fields,
        [MatchField::Title, MatchField::Body, MatchField::Comment]
    );
    assert_eq!(page.hits[0].snippet, "**Wombat** exporter crashes");
    assert!(
        page.hits.windows(2).all(|w| w[0].score >= w[1].score),
        "scores fall with rank"
    );
}

pub async fn case_search_matches_the_reference<S: BoardStore>(store: Arc<S>) {
    let t = tenant("search-ref");
    let rows: [(&str, &str, &[&str]); 8] = [
        (
            "Flaky test in CI",
            "The runner times out.",
            &["retry helped"],
        ),
        ("ÉCOLE build broken", "Straße naming breaks the build", &[]),
        (
            "Timeout on login",
            "",
            &["flaky again", "TIMEOUTS everywhere"],
        ),
        ("login-page: crash", "see logs/login.txt", &[]),
        ("Release 1.0", "time to ship v1.0", &["release notes"]),
        ("Docs: API", "école docs need love", &["flaky docs build"]),
        ("Plain", "nothing to see", &[]),
        ("under_score title", "snake_case_words", &["CamelCase"]),
    ];
    let mut board = Vec::new();
    for (title_text, body, comments) in rows {
        let issue = create(&*store, &t, title_text, body, IssueState::Todo).await;
        for c in comments {
            store
                .add_comment(&t, &author("run-1"), comment(&issue.id, c), None)
                .await
                .expect("comment");
        }
        board.push(store.get_issue(&t, &issue.id).await.expect("get"));
    }
    let texts = [
        "flaky",
        "FLAKY build",
        "time*",
        "timeout",
        "timeouts",
        "login",
        "login page",
        "école",
        "ecole",
        "straße",
        "1.0",
        "v1",
        "under score",
        "snake case words",
        "camelcase",
        "logs txt",
        "nothing",
        "zzz",
        "re*",
        "do* bu*",
    ];
    for text in texts {
        let q = SearchQuery {
            limit: limits::SEARCH_LIMIT_MAX,
            ..query(text)
        };
        let expected: BTreeSet<IssueId> = board
            .iter()
            .filter(|i| q.matches(i))
            .map(|i| i.id.clone())
            .collect();
        let page = search(&*store, &t, &q).await;
        let got: BTreeSet<IssueId> = hit_ids(&page).into_iter().collect();
        assert_eq!(
            got, expected,
            "matches disagree with the reference for {text:?}"
        );
        assert_eq!(got.len(), page.hits.len(), "no issue twice");
        for hit in &page.hits {
            assert!(
                hit.snippet.contains("**"),
                "{text:?}: every snippet marks a match: {}",
                hit.snippet
            );
        }
    }
}

pub async fn case_search_combines_with_every_list_filter<S: BoardStore>(store: Arc<S>) {
    let t = tenant("search-filter");
    let mut board = Vec::new();
    let states = [IssueState::Inbox, IssueState::Todo, IssueState::Done];
    let priorities = [Priority::None, Priority::High];
    let label_sets: [&[&str]; 3] = [&[], &["bug"], &["bug", "ui"]];
    let mut n = 0;
    for state in states {
        for priority in priorities {
            for label_values in label_sets {
                n += 1;
                let run_name = if n % 2 == 0 { "run-1" } else { "run-2" };
                let title_text = if n % 3 == 0 {
                    format!("Gizmo sprocket {n}")
                } else {
                    format!("Gizmo {n}")
                };
                let new = corkboard_board::NewIssue {
                    state,
                    priority,
                    labels: labels(label_values),
                    ..new_issue(&title_text)
                };
                let issue = store
                    .create_issue(&t, &author(run_name), new, None)
                    .await
                    .expect("create")
                    .issue;
                board.push(issue);
            }
        }
    }
    create(&*store, &t, "Unrelated", "no match here", IssueState::Todo).await;
    let midpoint = board[board.len() / 2].updated_at;
    let filters: Vec<ListQuery> = vec![
        ListQuery::default(),
        ListQuery {
            states: vec![IssueState::Todo, IssueState::Done],
            ..ListQuery::default()
        },
        ListQuery {
            labels: LabelFilter::All(vec![label("bug"), label("ui")]),
            ..ListQuery::default()
        },
        ListQuery {
            labels: LabelFilter::Any(vec![label("ui")]),
            states: vec![IssueState::Inbox],
            ..ListQuery::default()
        },
        ListQuery {
            author_run: Some(run("run-1")),
            priorities: vec![Priority::High],
            ..ListQuery::default()
        },
        ListQuery {
            text: Some("SPROCKET".to_owned()),
            ..ListQuery::default()
        },
        ListQuery {
            updated_since: Some(midpoint),
            ..ListQuery::default()
        },
        ListQuery {
            priorities: vec![Priority::Urgent],
            ..ListQuery::default()
        },
    ];
    for filter in filters {
        for text in ["gizmo", "gizmo sprocket"] {
            let q = SearchQuery {
                filter: filter.clone(),
                limit: limits::SEARCH_LIMIT_MAX,
                ..query(text)
            };
            let expected: BTreeSet<IssueId> = board
                .iter()
                .filter(|i| q.matches(i))
                .map(|i| i.id.clone())
                .collect();
            let got: BTreeSet<IssueId> = hit_ids(&search(&*store, &t, &q).await)
                .into_iter()
                .collect();
            assert_eq!(got, expected, "search with {filter:?} and {text:?}");
        }
    }
}

pub async fn case_search_and_similarity_stay_in_their_tenant<S: BoardStore>(store: Arc<S>) {
    let a = tenant("search-iso-a");
    let b = tenant("search-iso-b");
    let theirs = create(
        &*store,
        &b,
        "Zanzibar outage in billing",
        "zanzibar everywhere",
        IssueState::Todo,
    )
    .await;
    store
        .add_comment(&b, &author("run-1"), comment(&theirs.id, "zanzibar"), None)
        .await
        .expect("comment");
    create(&*store, &a, "Something else", "", IssueState::Todo).await;
    assert!(
        search(&*store, &a, &query("zanzibar"))
            .await
            .hits
            .is_empty()
    );
    assert!(
        store
            .similar_open_issues(&a, &title("Zanzibar outage in billing"), 5)
            .await
            .expect("similar")
            .is_empty()
    );
    // A tenant whose id is a prefix of the other's sees nothing either.
    let prefix = corkboard_board::TenantId::parse(
        b.as_str()
            .rsplit_once('-')
            .map(|(head, _)| head)
            .unwrap_or("x"),
    )
    .expect("a valid tenant");
    assert!(
        search(&*store, &prefix, &query("zanzibar"))
            .await
            .hits
            .is_empty()
    );
    assert_eq!(
        hit_ids(&search(&*store, &b, &query("zanzibar")).await),
        [theirs.id]
    );
}

pub async fn case_search_sees_every_write_when_it_returns<S: BoardStore>(store: Arc<S>) {
    let t = tenant("search-fresh");
    let issue = create(
        &*store,
        &t,
        "Alphaword title",
        "betaword body",
        IssueState::Todo,
    )
    .await;
    assert_eq!(
        hit_ids(&search(&*store, &t, &query("alphaword")).await),
        only(&issue.id)
    );
    store
        .update_issue(&t, &issue.id, title_patch("Omegaword title"), None)
        .await
        .expect("update title");
    assert!(
        search(&*store, &t, &query("alphaword"))
            .await
            .hits
            .is_empty()
    );
    assert_eq!(
        hit_ids(&search(&*store, &t, &query("omegaword")).await),
        only(&issue.id)
    );
    assert_eq!(
        hit_ids(&search(&*store, &t, &query("betaword")).await),
        only(&issue.id),
        "a title change keeps the body searchable"
    );
    store
        .add_comment(
            &t,
            &author("run-1"),
            comment(&issue.id, "gammaword noted"),
            None,
        )
        .await
        .expect("comment");
    store
        .update_issue(
            &t,
            &issue.id,
            IssuePatch {
                body: Some(Body::parse("deltaword body").expect("body")),
                ..IssuePatch::default()
            },
            None,
        )
        .await
        .expect("update body");
    assert!(
        search(&*store, &t, &query("betaword"))
            .await
            .hits
            .is_empty()
    );
    for word in ["deltaword", "gammaword", "omegaword"] {
        assert_eq!(
            hit_ids(&search(&*store, &t, &query(word)).await),
            only(&issue.id),
            "{word} after a body update"
        );
    }
    // A state change leaves the words alone and moves the issue in filters.
    store
        .update_issue(&t, &issue.id, state_patch(IssueState::Done), None)
        .await
        .expect("update state");
    let todo = SearchQuery {
        filter: ListQuery {
            states: vec![IssueState::Todo],
            ..ListQuery::default()
        },
        ..query("gammaword")
    };
    assert!(search(&*store, &t, &todo).await.hits.is_empty());
}

pub async fn case_search_pages_by_offset_and_checks_limits<S: BoardStore>(store: Arc<S>) {
    let t = tenant("search-page");
    let mut all = BTreeSet::new();
    for i in 0..12 {
        all.insert(
            create(
                &*store,
                &t,
                &format!("Pager item {i}"),
                "",
                IssueState::Todo,
            )
            .await
            .id,
        );
    }
    let mut seen = Vec::new();
    let mut q = SearchQuery {
        limit: 5,
        ..query("pager")
    };
    let mut offsets = Vec::new();
    loop {
        let page = search(&*store, &t, &q).await;
        assert!(page.hits.len() <= 5);
        seen.extend(hit_ids(&page));
        match page.next_offset {
            Some(next) => {
                assert_eq!(page.hits.len(), 5, "only full pages have a next page");
                offsets.push(next);
                q.offset = next;
            }
            None => break,
        }
    }
    assert_eq!(offsets, [5, 10]);
    assert_eq!(seen.len(), 12, "no hit twice");
    assert_eq!(seen.into_iter().collect::<BTreeSet<_>>(), all);

    for (limit, offset, field) in [
        (0, 0, "limit"),
        (limits::SEARCH_LIMIT_MAX + 1, 0, "limit"),
        (10, limits::SEARCH_DEPTH_MAX, "offset"),
    ] {
        let q = SearchQuery {
            limit,
            offset,
            ..query("pager")
        };
        assert_invalid(store.search_issues(&t, &q).await, field, "search bounds");
    }
    let with_cursor = SearchQuery {
        filter: ListQuery {
            cursor: Some(IssueId::generate()),
            ..ListQuery::default()
        },
        ..query("pager")
    };
    assert_invalid(
        store.search_issues(&t, &with_cursor).await,
        "cursor",
        "search pages by offset",
    );
}

pub async fn case_similar_open_issues_and_refusing_near_duplicates<S: BoardStore>(store: Arc<S>) {
    let t = tenant("similar");
    let open = create(
        &*store,
        &t,
        "Login page crashes on Safari",
        "",
        IssueState::Todo,
    )
    .await;
    let closed = create(
        &*store,
        &t,
        "Checkout button crashes on Safari",
        "",
        IssueState::Closed,
    )
    .await;
    create(&*store, &t, "Dark mode colours", "", IssueState::Inbox).await;

    let similar = store
        .similar_open_issues(&t, &title("login page CRASHES on safari 17"), 5)
        .await
        .expect("similar");
    assert_eq!(similar.first().map(|s| &s.id), Some(&open.id));
    assert!(similar[0].is_near(), "{similar:?}");
    assert!((similar[0].score - 5.0 / 6.0).abs() < 1e-9, "{similar:?}");
    assert!(
        similar.iter().all(|s| s.id != closed.id),
        "closed issues are never similar: {similar:?}"
    );
    assert!(
        similar.windows(2).all(|w| w[0].score >= w[1].score),
        "{similar:?}"
    );
    let closed_like = store
        .similar_open_issues(&t, &title("Checkout button crashes on Safari"), 5)
        .await
        .expect("similar");
    assert!(
        closed_like
            .iter()
            .all(|s| s.id != closed.id && !s.is_near())
    );
    assert_invalid(
        store.similar_open_issues(&t, &title("x"), 0).await,
        "limit",
        "similar limit",
    );

    // Refused: nothing is written, the near match comes back.
    let before = store
        .list_issues(&t, &ListQuery::default())
        .await
        .expect("list")
        .issues
        .len();
    let who = author("run-1");
    let outcome = store
        .create_issue_unless_similar(&t, &who, new_issue("Login page crashes on Safari!"), None)
        .await
        .expect("create unless similar");
    match outcome {
        CreateOutcome::Refused(near) => {
            assert_eq!(near.first().map(|s| &s.id), Some(&open.id));
            assert!(near.iter().all(|s| s.is_near()));
        }
        other => panic!("a near duplicate was created: {other:?}"),
    }
    let after = store
        .list_issues(&t, &ListQuery::default())
        .await
        .expect("list")
        .issues
        .len();
    assert_eq!(before, after, "a refused create writes nothing");

    // Not near: created. Like a closed issue only: created too.
    for text in [
        "Login page slow on Firefox",
        "Checkout button crashes on Safari",
    ] {
        match store
            .create_issue_unless_similar(&t, &who, new_issue(text), None)
            .await
            .expect("create unless similar")
        {
            CreateOutcome::Created(created) => {
                assert!(!created.replayed);
                assert_eq!(created.issue.title.as_str(), text);
            }
            other => panic!("{text:?} was refused: {other:?}"),
        }
    }

    // A replay under its key is a replay, although the original is now a
    // near match for its own title.
    let k = key("similar-key-1");
    let first = match store
        .create_issue_unless_similar(&t, &who, new_issue("Webhook retries pile up"), Some(&k))
        .await
        .expect("first")
    {
        CreateOutcome::Created(created) => created,
        other => panic!("refused: {other:?}"),
    };
    match store
        .create_issue_unless_similar(&t, &who, new_issue("Webhook retries pile up"), Some(&k))
        .await
        .expect("replay")
    {
        CreateOutcome::Created(replay) => {
            assert!(replay.replayed);
            assert_eq!(replay.issue.id, first.issue.id);
        }
        other => panic!("a replay was refused: {other:?}"),
    }
    // And the key still refuses a different request.
    assert!(matches!(
        store
            .create_issue_unless_similar(&t, &who, new_issue("Other"), Some(&k))
            .await,
        Err(StoreError::IdempotencyConflict)
    ));
}

pub async fn case_list_priority_and_updated_since_match_reference<S: BoardStore>(store: Arc<S>) {
    let t = tenant("prio-since");
    let mut board = Vec::new();
    for (i, priority) in [
        Priority::None,
        Priority::Low,
        Priority::High,
        Priority::Urgent,
        Priority::High,
        Priority::Medium,
    ]
    .into_iter()
    .enumerate()
    {
        let new = corkboard_board::NewIssue {
            priority,
            ..new_issue(&format!("prio {i}"))
        };
        board.push(
            store
                .create_issue(&t, &author("run-1"), new, None)
                .await
                .expect("create")
                .issue,
        );
    }
    // A later update moves the oldest issue past every creation time.
    wait_until_clock_passes_creates(&*store, &t).await;
    let touched = store
        .update_issue(&t, &board[0].id, title_patch("prio 0 touched"), None)
        .await
        .expect("update");
    board[0] = touched.clone();
    let cases = [
        ListQuery {
            priorities: vec![Priority::High],
            ..ListQuery::default()
        },
        ListQuery {
            priorities: vec![Priority::Urgent, Priority::None, Priority::Urgent],
            ..ListQuery::default()
        },
        ListQuery {
            updated_since: Some(touched.updated_at),
            ..ListQuery::default()
        },
        ListQuery {
            updated_since: Some(board[3].updated_at),
            priorities: vec![Priority::High, Priority::None],
            ..ListQuery::default()
        },
        ListQuery {
            updated_since: Some(Timestamp::from_millis(0)),
            ..ListQuery::default()
        },
    ];
    for q in cases {
        let expected = newest_first(
            board
                .iter()
                .filter(|i| q.matches(i))
                .map(|i| i.id.clone())
                .collect(),
        );
        let got: Vec<IssueId> = store
            .list_issues(&t, &q)
            .await
            .expect("list")
            .issues
            .iter()
            .map(|i| i.id.clone())
            .collect();
        assert_eq!(got, expected, "{q:?}");
    }
}

/// Waits until the clock has moved past every issue created so far (a
/// check in a loop, not a guessed sleep): the update after it then has an
/// `updated_at` later than every creation.
async fn wait_until_clock_passes_creates<S: BoardStore>(store: &S, t: &TenantId) {
    let latest = store
        .list_issues(t, &ListQuery::default())
        .await
        .expect("list")
        .issues
        .iter()
        .map(|i| i.updated_at)
        .max()
        .unwrap_or(Timestamp::from_millis(0));
    while Timestamp::now() <= latest {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// The similar-issue look-up reads bounded candidate sets (the newest
/// open issues holding every word of the title, then the newest sharing
/// any word; `limits::SIMILAR_ALL_CANDIDATES`/`SIMILAR_ANY_CANDIDATES`),
/// so it costs the same on a board of any size. An older issue whose title
/// holds every word of the new one is still found behind more newer issues
/// sharing one of its words than the any-word bound reads; one sharing
/// only a word is found only among the newest.
pub async fn case_similar_issues_are_found_behind_many_newer_word_sharing_ones<S: BoardStore>(
    store: Arc<S>,
) {
    let t = tenant("similar-bounded");
    let old = create(
        &*store,
        &t,
        "Deploy pipeline hangs on kubernetes rollout",
        "",
        IssueState::Todo,
    )
    .await;
    let newer = limits::SIMILAR_ANY_CANDIDATES as usize + 20;
    for i in 0..newer {
        create(
            &*store,
            &t,
            &format!("Deploy note {i}"),
            "",
            IssueState::Todo,
        )
        .await;
    }
    let similar = store
        .similar_open_issues(&t, &title("kubernetes rollout hangs deploy pipeline"), 3)
        .await
        .expect("similar");
    assert_eq!(similar.first().map(|s| &s.id), Some(&old.id), "{similar:?}");
    assert!(similar[0].is_near(), "{similar:?}");
    // Only the bounded candidates were ranked: the rest of the answer
    // comes from the newest issues sharing "deploy".
    assert!(similar.len() <= 3, "{similar:?}");
}

/// The similar-issue look-up follows every write that changes a title or
/// whether an issue is open: a retitled issue is found by its new words
/// only, a closed one not at all, a reopened one again, and an issue
/// created closed never.
pub async fn case_similar_issues_follow_retitles_closes_and_reopens<S: BoardStore>(store: Arc<S>) {
    let t = tenant("similar-follows");
    let issue = create(&*store, &t, "Zanzibar ferry delayed", "", IssueState::Todo).await;
    create(&*store, &t, "Quokka census done", "", IssueState::Done).await;
    let ids = |similar: Vec<SimilarIssue>| -> Vec<IssueId> {
        similar.into_iter().map(|s| s.id).collect()
    };
    let similar = |text: &'static str| {
        let store = store.clone();
        let t = t.clone();
        async move {
            store
                .similar_open_issues(&t, &title(text), 5)
                .await
                .expect("similar")
        }
    };
    assert_eq!(ids(similar("zanzibar ferry").await), only(&issue.id));
    assert!(similar("quokka census").await.is_empty(), "created closed");

    let issue = store
        .update_issue(&t, &issue.id, title_patch("Quokka habitat survey"), None)
        .await
        .expect("retitle");
    assert!(similar("zanzibar ferry").await.is_empty(), "old words gone");
    assert_eq!(ids(similar("quokka habitat").await), only(&issue.id));

    let state = |state: IssueState| IssuePatch {
        state: Some(state),
        ..IssuePatch::default()
    };
    let issue = store
        .update_issue(&t, &issue.id, state(IssueState::Closed), None)
        .await
        .expect("close");
    assert!(similar("quokka habitat").await.is_empty(), "closed");
    store
        .update_issue(&t, &issue.id, state(IssueState::InProgress), None)
        .await
        .expect("reopen");
    assert_eq!(ids(similar("quokka habitat").await), only(&issue.id));
}
