//! Listing: order, limits, every filter against the domain's reference
//! (`ListQuery::matches`), and cursor pagination.

use crate::fixtures::*;
use corkboard_board::{
    BoardStore, Issue, IssueId, IssuePatch, IssueState, LabelFilter, ListQuery, NewIssue, Page,
    TenantId, limits,
};
use std::collections::HashSet;
use std::sync::Arc;

async fn list<S: BoardStore>(store: &S, t: &TenantId, query: &ListQuery) -> Page {
    store
        .list_issues(t, query)
        .await
        .unwrap_or_else(|e| panic!("list {query:?}: {e}"))
}

/// Every page of `query`, checking each `next_cursor` on the way.
async fn list_all<S: BoardStore>(store: &S, t: &TenantId, query: &ListQuery) -> Vec<Issue> {
    let mut all: Vec<Issue> = Vec::new();
    let mut query = query.clone();
    for _ in 0..10_000 {
        let page = list(store, t, &query).await;
        assert!(
            page.issues.len() <= query.limit as usize,
            "a page exceeds its limit"
        );
        all.extend(page.issues.iter().cloned());
        match page.next_cursor {
            Some(cursor) => {
                assert_eq!(
                    page.issues.last().map(|i| &i.id),
                    Some(&cursor),
                    "next_cursor is the last id of the page"
                );
                assert_eq!(
                    page.issues.len(),
                    query.limit as usize,
                    "only full pages have a next page"
                );
                query.cursor = Some(cursor);
            }
            None => return all,
        }
    }
    panic!("pagination never ended");
}

fn ids(issues: &[Issue]) -> Vec<IssueId> {
    issues.iter().map(|i| i.id.clone()).collect()
}

async fn create_n<S: BoardStore>(store: &S, t: &TenantId, n: usize, prefix: &str) -> Vec<Issue> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        out.push(
            store
                .create_issue(
                    t,
                    &author("run-1"),
                    new_issue(&format!("{prefix} {i}")),
                    None,
                )
                .await
                .expect("create")
                .issue,
        );
    }
    out
}

pub async fn case_list_newest_first<S: BoardStore>(store: Arc<S>) {
    let t = tenant("order");
    let created = create_n(&*store, &t, 7, "issue").await;
    let page = list(&*store, &t, &ListQuery::default()).await;
    assert_eq!(
        ids(&page.issues),
        newest_first(ids(&created)),
        "newest first, by id"
    );
    assert_eq!(page.next_cursor, None);
}

pub async fn case_list_limit_and_last_page<S: BoardStore>(store: Arc<S>) {
    let t = tenant("limits");
    let empty = list(&*store, &t, &ListQuery::default()).await;
    assert!(empty.issues.is_empty());
    assert_eq!(empty.next_cursor, None, "an empty list has no next page");

    let created = create_n(&*store, &t, 4, "issue").await;
    let expected = newest_first(ids(&created));
    let query = |limit: u32, cursor: Option<IssueId>| ListQuery {
        limit,
        cursor,
        ..ListQuery::default()
    };

    let first = list(&*store, &t, &query(2, None)).await;
    assert_eq!(ids(&first.issues), expected[..2]);
    assert_eq!(first.next_cursor.as_ref(), Some(&expected[1]));
    let second = list(&*store, &t, &query(2, first.next_cursor.clone())).await;
    assert_eq!(ids(&second.issues), expected[2..]);
    assert_eq!(
        second.next_cursor, None,
        "a last page that is exactly full has no next page"
    );
    let whole = list(&*store, &t, &query(4, None)).await;
    assert_eq!(ids(&whole.issues), expected);
    assert_eq!(whole.next_cursor, None);
    let three = list(&*store, &t, &query(3, None)).await;
    assert_eq!(three.next_cursor.as_ref(), Some(&expected[2]));
    let max = list(&*store, &t, &query(limits::PAGE_MAX, None)).await;
    assert_eq!(ids(&max.issues), expected);
}

pub async fn case_list_validation<S: BoardStore>(store: Arc<S>) {
    let t = tenant("list-invalid");
    for limit in [0, limits::PAGE_MAX + 1] {
        assert_invalid(
            store
                .list_issues(
                    &t,
                    &ListQuery {
                        limit,
                        ..ListQuery::default()
                    },
                )
                .await,
            "limit",
            "an out-of-range limit",
        );
    }
    assert_invalid(
        store
            .list_issues(
                &t,
                &ListQuery {
                    text: Some("x".repeat(limits::TEXT_FILTER_MAX_CHARS + 1)),
                    ..ListQuery::default()
                },
            )
            .await,
        "text",
        "a text filter that is too long",
    );
}

/// A varied board: states, labels, authors, and titles with case, accents
/// and SQL wildcard characters.
async fn filter_board<S: BoardStore>(store: &S, t: &TenantId) -> Vec<Issue> {
    let rows: [(&str, IssueState, &[&str], &str); 14] = [
        (
            "Flaky test in CI",
            IssueState::Inbox,
            &["bug", "ci"],
            "run-1",
        ),
        ("ÉCOLE build broken", IssueState::Todo, &["bug"], "run-2"),
        ("école docs", IssueState::Done, &["docs"], "run-1"),
        (
            "100%_done report",
            IssueState::Todo,
            &["ui", "bug"],
            "run-2",
        ),
        ("100 percent done", IssueState::Closed, &[], "run-1"),
        ("Plain issue", IssueState::Inbox, &[], "run-2"),
        (
            "UI glitch on hover",
            IssueState::InProgress,
            &["ui"],
            "run-1",
        ),
        (
            "Another FLAKY one",
            IssueState::Blocked,
            &["ci", "bug", "ui"],
            "run-2",
        ),
        ("Release 1.0", IssueState::Triage, &["release"], "run-1"),
        ("under_score title", IssueState::Done, &["ci"], "run-2"),
        ("Straße naming", IssueState::Todo, &["docs", "ui"], "run-1"),
        ("flakiness report", IssueState::Closed, &["bug"], "run-1"),
        (
            "Docs: API",
            IssueState::Inbox,
            &["docs", "area:api"],
            "run-2",
        ),
        ("Closed ui bug", IssueState::Closed, &["ui", "bug"], "run-2"),
    ];
    let mut out = Vec::new();
    for (title_text, state, label_values, run_name) in rows {
        let new = NewIssue {
            state,
            labels: labels(label_values),
            ..new_issue(title_text)
        };
        out.push(
            store
                .create_issue(t, &author(run_name), new, None)
                .await
                .expect("create")
                .issue,
        );
    }
    out
}

fn expected_ids(board: &[Issue], query: &ListQuery) -> Vec<IssueId> {
    newest_first(
        board
            .iter()
            .filter(|issue| query.matches(issue))
            .map(|issue| issue.id.clone())
            .collect(),
    )
}

pub async fn case_list_filters_match_reference<S: BoardStore>(store: Arc<S>) {
    let t = tenant("filters");
    let board = filter_board(&*store, &t).await;
    let state_sets: Vec<Vec<IssueState>> = vec![
        vec![],
        vec![IssueState::Inbox],
        vec![IssueState::Todo, IssueState::Done],
        vec![IssueState::Closed, IssueState::Blocked, IssueState::Closed],
    ];
    let label_filters = vec![
        LabelFilter::None,
        LabelFilter::All(vec![label("bug")]),
        LabelFilter::All(vec![label("bug"), label("ui")]),
        LabelFilter::All(vec![label("bug"), label("ui"), label("bug")]),
        LabelFilter::All(vec![label("nope")]),
        LabelFilter::All(vec![]),
        LabelFilter::Any(vec![label("ui"), label("ci")]),
        LabelFilter::Any(vec![label("docs")]),
        LabelFilter::Any(vec![label("nope"), label("release")]),
        LabelFilter::Any(vec![]),
    ];
    let texts = [
        None,
        Some("flaky"),
        Some("FLAKY"),
        Some("école"),
        Some("%"),
        Some(""),
    ];
    let authors = [None, Some(run("run-1")), Some(run("run-9"))];

    let mut checked = 0;
    let mut non_trivial = 0;
    for states in &state_sets {
        for labels_filter in &label_filters {
            for text in texts {
                for author_run in &authors {
                    let query = ListQuery {
                        states: states.clone(),
                        labels: labels_filter.clone(),
                        text: text.map(str::to_owned),
                        author_run: author_run.clone(),
                        limit: limits::PAGE_MAX,
                        cursor: None,
                        ..ListQuery::default()
                    };
                    let expected = expected_ids(&board, &query);
                    let page = list(&*store, &t, &query).await;
                    assert_eq!(
                        ids(&page.issues),
                        expected,
                        "filters disagree with the reference for {query:?}"
                    );
                    assert_eq!(page.next_cursor, None);
                    checked += 1;
                    if !expected.is_empty() && expected.len() < board.len() {
                        non_trivial += 1;
                    }
                }
            }
        }
    }
    assert_eq!(checked, 4 * 10 * 6 * 3);
    assert!(
        non_trivial > 100,
        "the fixture exercises the filters ({non_trivial})"
    );
}

pub async fn case_list_text_filter_is_literal_and_case_insensitive<S: BoardStore>(store: Arc<S>) {
    let t = tenant("text");
    let board = filter_board(&*store, &t).await;
    let by_title = |text: &str| -> Vec<IssueId> {
        newest_first(
            board
                .iter()
                .filter(|i| i.title.as_str() == text)
                .map(|i| i.id.clone())
                .collect(),
        )
    };
    let search = |text: &str| ListQuery {
        text: Some(text.to_owned()),
        ..ListQuery::default()
    };
    // Wildcards of LIKE must be plain characters here.
    assert_eq!(
        ids(&list(&*store, &t, &search("%")).await.issues),
        by_title("100%_done report")
    );
    assert_eq!(
        ids(&list(&*store, &t, &search("0%_d")).await.issues),
        by_title("100%_done report")
    );
    let mut underscores = by_title("100%_done report");
    underscores.extend(by_title("under_score title"));
    assert_eq!(
        ids(&list(&*store, &t, &search("_")).await.issues),
        newest_first(underscores)
    );
    // Case-insensitive beyond ASCII.
    let mut ecole = by_title("ÉCOLE build broken");
    ecole.extend(by_title("école docs"));
    let ecole = newest_first(ecole);
    assert_eq!(
        ids(&list(&*store, &t, &search("école")).await.issues),
        ecole
    );
    assert_eq!(
        ids(&list(&*store, &t, &search("ÉCOLE")).await.issues),
        ecole
    );
    assert_eq!(
        ids(&list(&*store, &t, &search("STRASSE")).await.issues),
        Vec::<IssueId>::new(),
        "lower-casing, not case folding: ß is not ss"
    );
    assert_eq!(
        ids(&list(&*store, &t, &search("STRAßE")).await.issues),
        by_title("Straße naming")
    );
}

pub async fn case_list_filters_follow_updates<S: BoardStore>(store: Arc<S>) {
    let t = tenant("follow");
    let issue = store
        .create_issue(
            &t,
            &author("run-1"),
            NewIssue {
                labels: labels(&["bug"]),
                ..new_issue("Original name")
            },
            None,
        )
        .await
        .expect("create")
        .issue;
    let found = |page: Page| page.issues.iter().any(|i| i.id == issue.id);
    let with_labels = |filter: LabelFilter| ListQuery {
        labels: filter,
        ..ListQuery::default()
    };
    assert!(found(
        list(
            &*store,
            &t,
            &with_labels(LabelFilter::All(vec![label("bug")]))
        )
        .await
    ));

    store
        .update_issue(
            &t,
            &issue.id,
            IssuePatch {
                labels: Some(labels(&["ui", "docs"])),
                state: Some(IssueState::Blocked),
                title: Some(title("Renamed entirely")),
                ..IssuePatch::default()
            },
            None,
        )
        .await
        .expect("update");

    assert!(!found(
        list(
            &*store,
            &t,
            &with_labels(LabelFilter::All(vec![label("bug")]))
        )
        .await
    ));
    assert!(!found(
        list(
            &*store,
            &t,
            &with_labels(LabelFilter::Any(vec![label("bug")]))
        )
        .await
    ));
    assert!(found(
        list(
            &*store,
            &t,
            &with_labels(LabelFilter::All(vec![label("ui"), label("docs")]))
        )
        .await
    ));
    let by_state = |states: Vec<IssueState>| ListQuery {
        states,
        ..ListQuery::default()
    };
    assert!(!found(
        list(&*store, &t, &by_state(vec![IssueState::Inbox])).await
    ));
    assert!(found(
        list(&*store, &t, &by_state(vec![IssueState::Blocked])).await
    ));
    let by_text = |text: &str| ListQuery {
        text: Some(text.to_owned()),
        ..ListQuery::default()
    };
    assert!(!found(list(&*store, &t, &by_text("original")).await));
    assert!(found(list(&*store, &t, &by_text("RENAMED")).await));

    // A comment changes no filterable field.
    store
        .add_comment(&t, &author("run-2"), comment(&issue.id, "still here"), None)
        .await
        .expect("comment");
    assert!(found(
        list(&*store, &t, &by_state(vec![IssueState::Blocked])).await
    ));
}

pub async fn case_list_returns_full_issues<S: BoardStore>(store: Arc<S>) {
    let t = tenant("full");
    let plain = store
        .create_issue(&t, &author("run-1"), full_issue("No comments"), None)
        .await
        .expect("create")
        .issue;
    let discussed = store
        .create_issue(&t, &author("run-1"), full_issue("Discussed"), None)
        .await
        .expect("create")
        .issue;
    for body in ["one", "two"] {
        store
            .add_comment(&t, &author("run-2"), comment(&discussed.id, body), None)
            .await
            .expect("comment");
    }
    let page = list(&*store, &t, &ListQuery::default()).await;
    assert_eq!(page.issues.len(), 2);
    for listed in &page.issues {
        let got = store.get_issue(&t, &listed.id).await.expect("get");
        assert_eq!(
            listed, &got,
            "a listed issue is the same as its get, comments included"
        );
    }
    assert!(
        page.issues
            .iter()
            .any(|i| i.id == plain.id && i.comments.is_empty())
    );
    assert!(
        page.issues
            .iter()
            .any(|i| i.id == discussed.id && i.comments.len() == 2)
    );
}

/// A page read with its comments counted (`PageComments::Counted`) holds
/// the same issues as one read with them, each with no comment, and
/// counts each issue's comments, every one and those at the query's
/// floor, as the comments read say: for lists and ready work, with and
/// without a floor, comments by people, agents and external runs.
pub async fn case_a_counted_page_counts_what_a_read_page_holds<S: BoardStore>(store: Arc<S>) {
    use corkboard_board::{Author, AuthorKind, CommentCounts, GrantId, Integrity, PageComments};
    let t = tenant("counted-comments");
    let person = Author::principal(AuthorKind::Person, "ada@example.com");
    let agent = Author::run(
        run("run-agent"),
        Some(GrantId::generate()),
        Integrity::Agent,
    );
    let external = Author::run(
        run("run-ext"),
        Some(GrantId::generate()),
        Integrity::External,
    );
    let writers = [&person, &agent, &external];
    for n in 0..7usize {
        let issue = store
            .create_issue(&t, &person, new_issue(&format!("Counted thread {n}")), None)
            .await
            .expect("create")
            .issue;
        // Issue n has n comments, by the three writers in turn.
        for k in 0..n {
            store
                .add_comment(
                    &t,
                    writers[(n + k) % 3],
                    comment(&issue.id, &format!("say {k}")),
                    None,
                )
                .await
                .expect("comment");
        }
    }
    for floor in [None, Some(Integrity::Agent), Some(Integrity::Person)] {
        for ready in [false, true] {
            let query = ListQuery {
                limit: 4,
                ready,
                min_integrity: floor,
                ..ListQuery::default()
            };
            let counted_query = ListQuery {
                comments: PageComments::Counted,
                ..query.clone()
            };
            let mut read = list(&*store, &t, &query).await;
            let mut counted = list(&*store, &t, &counted_query).await;
            let mut pages = 0;
            loop {
                pages += 1;
                assert_eq!(
                    ids(&counted.issues),
                    ids(&read.issues),
                    "{floor:?} ready {ready}"
                );
                assert_eq!(counted.next_cursor, read.next_cursor);
                assert_eq!(read.counted, None, "a read page counts nothing");
                let counts = counted.counted.clone().expect("a counted page counts");
                assert_eq!(counts.len(), counted.issues.len());
                for ((with, without), counts) in read.issues.iter().zip(&counted.issues).zip(counts)
                {
                    assert!(without.comments.is_empty(), "no comment on a counted page");
                    assert_eq!(
                        counts,
                        CommentCounts::of(&with.comments, floor),
                        "{}",
                        with.title.as_str()
                    );
                    let mut whole = without.clone();
                    whole.comments.clone_from(&with.comments);
                    assert_eq!(&whole, with, "the rest of the issue is the same");
                }
                let Some(cursor) = read.next_cursor.clone() else {
                    break;
                };
                read = list(
                    &*store,
                    &t,
                    &ListQuery {
                        cursor: Some(cursor.clone()),
                        ..query.clone()
                    },
                )
                .await;
                counted = list(
                    &*store,
                    &t,
                    &ListQuery {
                        cursor: Some(cursor),
                        ..counted_query.clone()
                    },
                )
                .await;
            }
            assert!(pages >= 2, "the pages go on: {pages}");
        }
    }
    // Some counts differ from their totals under a floor: the floor is
    // applied, not ignored.
    let floored = list(
        &*store,
        &t,
        &ListQuery {
            min_integrity: Some(Integrity::Person),
            comments: PageComments::Counted,
            limit: 10,
            ..ListQuery::default()
        },
    )
    .await;
    let counts = floored.counted.expect("counted");
    assert!(counts.iter().any(|c| c.at_floor < c.total));
    assert_eq!(counts.iter().map(|c| c.total).sum::<usize>(), 21);
}

/// A page's comments are bounded (`limits::PAGE_COMMENT_BYTES_MAX`): a
/// list or search page whose issues' comments would pass the bound ends
/// after its last issue that fits (its first whatever their size), and the
/// next page goes on from there; every issue is on exactly one page, whole.
pub async fn case_pages_end_before_their_comments_pass_the_bound<S: BoardStore>(store: Arc<S>) {
    let t = tenant("heavy-threads");
    let body = "thread ".repeat(60 * 1024 / 7);
    // More than half the bound each: no page holds two of them.
    let per_issue = limits::PAGE_COMMENT_BYTES_MAX / body.len() / 2 + 1;
    let mut ids = Vec::new();
    for (n, comments) in [(0, 0), (1, per_issue), (2, per_issue)] {
        let issue = create_as_run_a(&*store, &t, new_issue(&format!("Heavy thread {n}"))).await;
        for _ in 0..comments {
            store
                .add_comment(&t, &author("run-2"), comment(&issue, &body), None)
                .await
                .expect("comment");
        }
        ids.push(issue);
    }
    // Newest first: the two heavy ones, then the light one.
    let first = list(&*store, &t, &ListQuery::default()).await;
    assert_eq!(
        first.issues.iter().map(|i| &i.id).collect::<Vec<_>>(),
        [&ids[2]]
    );
    assert_eq!(first.issues[0].comments.len(), per_issue);
    assert_eq!(first.next_cursor.as_ref(), Some(&ids[2]));
    let rest = list(
        &*store,
        &t,
        &ListQuery {
            cursor: first.next_cursor.clone(),
            ..ListQuery::default()
        },
    )
    .await;
    assert_eq!(
        rest.issues.iter().map(|i| &i.id).collect::<Vec<_>>(),
        [&ids[1], &ids[0]]
    );
    assert_eq!(rest.next_cursor, None);
    for listed in first.issues.iter().chain(&rest.issues) {
        let got = store.get_issue(&t, &listed.id).await.expect("get");
        assert_eq!(listed, &got, "a listed issue is whole, comments included");
    }
    // Search pages by offset the same way.
    let mut query = corkboard_board::SearchQuery::new(
        corkboard_board::SearchText::parse("heavy").expect("a valid query"),
    );
    let mut seen = Vec::new();
    loop {
        let page = store.search_issues(&t, &query).await.expect("search");
        assert!(!page.hits.is_empty(), "a page holds its first hit");
        // A page of more than its first hit holds no more than the bound
        // in all (two heavy threads never share one).
        let carried: usize = page
            .hits
            .iter()
            .flat_map(|h| &h.issue.comments)
            .map(|c| c.body.as_str().len())
            .sum();
        assert!(
            page.hits.len() == 1 || carried <= limits::PAGE_COMMENT_BYTES_MAX,
            "{} hits carry {carried} bytes of comments",
            page.hits.len()
        );
        seen.extend(page.hits.iter().map(|h| h.issue.id.clone()));
        match page.next_offset {
            Some(next) => {
                assert_eq!(
                    next as usize,
                    seen.len(),
                    "the next page starts after this one"
                );
                query.offset = next;
            }
            None => break,
        }
    }
    seen.sort();
    let mut all = ids.clone();
    all.sort();
    assert_eq!(seen, all, "every hit on exactly one page");
}

pub async fn case_list_pagination_across_pages<S: BoardStore>(store: Arc<S>) {
    let t = tenant("pages");
    let created = create_n(&*store, &t, 23, "paged").await;
    let expected = newest_first(ids(&created));
    let mut sizes = Vec::new();
    let mut cursor = None;
    let mut seen = Vec::new();
    loop {
        let page = list(
            &*store,
            &t,
            &ListQuery {
                limit: 5,
                cursor: cursor.clone(),
                ..ListQuery::default()
            },
        )
        .await;
        sizes.push(page.issues.len());
        seen.extend(ids(&page.issues));
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(sizes, [5, 5, 5, 5, 3]);
    assert_eq!(
        seen, expected,
        "pages together are the whole list, in order"
    );
    for limit in [1, 2, 7, 22, 23, 24] {
        let all = list_all(
            &*store,
            &t,
            &ListQuery {
                limit,
                ..ListQuery::default()
            },
        )
        .await;
        assert_eq!(ids(&all), expected, "paging by {limit}");
    }
}

pub async fn case_list_pagination_with_filters<S: BoardStore>(store: Arc<S>) {
    let t = tenant("filtered-pages");
    let mut board = Vec::new();
    for i in 0..30 {
        let new = NewIssue {
            state: if i % 3 == 0 {
                IssueState::Done
            } else {
                IssueState::Todo
            },
            labels: if i % 2 == 0 {
                labels(&["even"])
            } else {
                labels(&["odd"])
            },
            ..new_issue(&format!("Item {i}"))
        };
        let run_name = if i % 5 == 0 { "run-5" } else { "run-1" };
        board.push(
            store
                .create_issue(&t, &author(run_name), new, None)
                .await
                .expect("create")
                .issue,
        );
    }
    let queries = [
        ListQuery {
            labels: LabelFilter::All(vec![label("even")]),
            limit: 4,
            ..ListQuery::default()
        },
        ListQuery {
            states: vec![IssueState::Todo],
            labels: LabelFilter::Any(vec![label("odd")]),
            limit: 3,
            ..ListQuery::default()
        },
        ListQuery {
            author_run: Some(run("run-1")),
            text: Some("item 1".to_owned()),
            limit: 2,
            ..ListQuery::default()
        },
    ];
    for query in queries {
        let all = list_all(&*store, &t, &query).await;
        let expected = expected_ids(&board, &query);
        assert!(
            expected.len() > query.limit as usize,
            "the query spans several pages"
        );
        assert_eq!(ids(&all), expected, "filtered pages for {query:?}");
    }
}

pub async fn case_list_pagination_stable_under_concurrent_inserts<S: BoardStore>(store: Arc<S>) {
    let t = tenant("moving");
    let before = create_n(&*store, &t, 40, "before").await;
    let writer = {
        let store = Arc::clone(&store);
        let t = t.clone();
        tokio::spawn(async move {
            let mut created = Vec::new();
            for i in 0..40 {
                created.push(
                    store
                        .create_issue(
                            &t,
                            &author("run-2"),
                            new_issue(&format!("during {i}")),
                            None,
                        )
                        .await
                        .expect("concurrent create")
                        .issue
                        .id,
                );
                tokio::task::yield_now().await;
            }
            created
        })
    };
    let mut seen: Vec<IssueId> = Vec::new();
    let mut cursor = None;
    loop {
        let page = list(
            &*store,
            &t,
            &ListQuery {
                limit: 3,
                cursor: cursor.clone(),
                ..ListQuery::default()
            },
        )
        .await;
        seen.extend(ids(&page.issues));
        tokio::task::yield_now().await;
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    let during = writer.await.expect("writer task");
    assert_eq!(during.len(), 40);

    let unique: HashSet<&IssueId> = seen.iter().collect();
    assert_eq!(unique.len(), seen.len(), "no issue appears twice");
    assert!(
        seen.windows(2).all(|w| w[0] > w[1]),
        "pages continue strictly newest first"
    );
    for issue in &before {
        assert!(
            unique.contains(&issue.id),
            "an issue that existed before the first page was skipped"
        );
    }
}
