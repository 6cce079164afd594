//! The work queue: ready work (open, unclaimed, every blocker finished,
//! most urgent then oldest first), `claim_next` under a race of many
//! claimants, and claim leases (renewal, lapse, stale claims).

use crate::fixtures::create_as_run_a as create;
use crate::fixtures::*;
use corkboard_board::{
    BlockedBy, BoardStore, ClaimFilter, ClaimNext, IssueId, IssuePatch, IssueState, LabelFilter,
    ListQuery, NewIssue, Priority, TenantId, Timestamp, ready_order,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;

fn with(title: &str, priority: Priority, blocked_by: &[&IssueId]) -> NewIssue {
    NewIssue {
        priority,
        blocked_by: BlockedBy::parse(blocked_by.iter().map(|id| (*id).clone())).unwrap(),
        ..new_issue(title)
    }
}

async fn close<S: BoardStore>(store: &S, t: &TenantId, id: &IssueId) {
    let patch = state_patch(IssueState::Done);
    store.update_issue(t, id, patch, None).await.expect("close");
}

/// Every page of `query` (following the cursor), in order.
async fn all_pages<S: BoardStore>(store: &S, t: &TenantId, query: &ListQuery) -> Vec<IssueId> {
    let mut query = query.clone();
    let mut out = Vec::new();
    loop {
        let page = store.list_issues(t, &query).await.expect("list");
        for issue in &page.issues {
            assert!(query.matches(issue), "a listed issue fails the filter");
        }
        out.extend(page.issues.into_iter().map(|i| i.id));
        match page.next_cursor {
            Some(cursor) => query.cursor = Some(cursor),
            None => return out,
        }
    }
}

fn ready(limit: u32) -> ListQuery {
    ListQuery {
        ready: true,
        limit,
        ..ListQuery::default()
    }
}

pub async fn case_ready_work_is_unblocked_unclaimed_and_best_first<S: BoardStore>(store: Arc<S>) {
    let t = tenant("ready");
    let s = &*store;
    let low_old = create(s, &t, with("low old", Priority::Low, &[])).await;
    let open_blocker = create(s, &t, with("open blocker", Priority::None, &[])).await;
    let done_blocker = create(s, &t, with("done blocker", Priority::Urgent, &[])).await;
    close(s, &t, &done_blocker).await;
    let blocked = create(s, &t, with("blocked", Priority::Urgent, &[&open_blocker])).await;
    let half_blocked = create(
        s,
        &t,
        with("half", Priority::Urgent, &[&open_blocker, &done_blocker]),
    )
    .await;
    let unblocked = create(s, &t, with("unblocked", Priority::High, &[&done_blocker])).await;
    let urgent_new = create(s, &t, with("urgent new", Priority::Urgent, &[])).await;
    let claimed = create(s, &t, with("claimed", Priority::Urgent, &[])).await;
    let mut labelled = with("labelled", Priority::Low, &[]);
    labelled.labels = labels(&["ui"]);
    let labelled = create(s, &t, labelled).await;
    let closed = create(s, &t, with("closed", Priority::Urgent, &[])).await;
    close(s, &t, &closed).await;
    store
        .claim_issue(&t, &claimed, &claimant("run-x", None), None)
        .await
        .expect("claim");

    let expected = vec![
        urgent_new.clone(),
        unblocked.clone(),
        low_old.clone(),
        labelled.clone(),
        open_blocker.clone(),
    ];
    for limit in [1, 2, 50] {
        assert_eq!(
            all_pages(s, &t, &ready(limit)).await,
            expected,
            "ready work, most urgent then oldest first, pages of {limit}"
        );
    }
    // The ready order is the domain's.
    let page = store.list_issues(&t, &ready(50)).await.unwrap();
    let mut sorted = page.issues.clone();
    sorted.sort_by(ready_order);
    assert_eq!(sorted, page.issues);
    // Combined with the other filters.
    let mut ui = ready(50);
    ui.labels = LabelFilter::All(vec![label("ui")]);
    assert_eq!(all_pages(s, &t, &ui).await, vec![labelled.clone()]);
    let mut low = ready(50);
    low.priorities = Priority::Low.at_least();
    assert_eq!(
        all_pages(s, &t, &low).await,
        vec![urgent_new.clone(), unblocked.clone(), low_old, labelled]
    );
    // A blocker finishing makes its dependents ready; a claim ending too.
    close(s, &t, &open_blocker).await;
    let now_ready = all_pages(s, &t, &ready(50)).await;
    assert!(now_ready.contains(&blocked) && now_ready.contains(&half_blocked));
    assert!(!now_ready.contains(&claimed));
    // Ready work is unclaimed: another claim filter is refused.
    let mut mine = ready(50);
    mine.claim = ClaimFilter::ClaimedBy(run("run-x"));
    assert_invalid(
        store.list_issues(&t, &mine).await,
        "ready",
        "ready + claimed_by",
    );
}

/// The issue's numbers: 1,000 issues, 64 claimants.
const QUEUE_ISSUES: usize = 1_000;
const CLAIMANTS: usize = 64;
const OPEN_BLOCKERS: usize = 50;

pub async fn case_claim_next_gives_each_ready_issue_to_one_claimant<S: BoardStore>(store: Arc<S>) {
    claim_next_race(&[store], "claim-next").await;
}

/// The race of [`case_claim_next_gives_each_ready_issue_to_one_claimant`]
/// with its claimants spread over `stores` (handles on one board, as
/// replicas are), on tenant `name`.
pub async fn claim_next_race<S: BoardStore>(stores: &[Arc<S>], name: &str) {
    let store = Arc::clone(&stores[0]);
    let t = tenant(name);
    // 50 open blockers (ready themselves), 50 issues they block, 50 issues
    // blocked by a finished one, the rest plain: 950 ready, 50 blocked.
    let mut blockers = Vec::new();
    for i in 0..OPEN_BLOCKERS {
        blockers.push(
            create(
                &*store,
                &t,
                with(&format!("blocker {i}"), Priority::Low, &[]),
            )
            .await,
        );
    }
    let finished = create(&*store, &t, with("finished", Priority::None, &[])).await;
    close(&*store, &t, &finished).await;
    let mut creates = JoinSet::new();
    for i in 0..QUEUE_ISSUES - OPEN_BLOCKERS - 1 {
        let (store, t) = (Arc::clone(&store), t.clone());
        let blocked_by: Vec<IssueId> = if let Some(blocker) = blockers.get(i) {
            vec![blocker.clone()]
        } else if i < 2 * OPEN_BLOCKERS {
            vec![finished.clone()]
        } else {
            Vec::new()
        };
        let priority = Priority::ALL[i % Priority::ALL.len()];
        creates.spawn(async move {
            let refs: Vec<&IssueId> = blocked_by.iter().collect();
            let id = create(&*store, &t, with(&format!("work {i}"), priority, &refs)).await;
            (id, !blocked_by.is_empty() && i < OPEN_BLOCKERS)
        });
    }
    let mut expected_ready: BTreeSet<IssueId> = blockers.iter().cloned().collect();
    let mut blocked = BTreeSet::new();
    while let Some(done) = creates.join_next().await {
        let (id, is_blocked) = done.expect("create task");
        if is_blocked {
            blocked.insert(id);
        } else {
            expected_ready.insert(id);
        }
    }
    assert_eq!(expected_ready.len(), QUEUE_ISSUES - OPEN_BLOCKERS - 1);

    let mut claimants = JoinSet::new();
    for c in 0..CLAIMANTS {
        let (store, t) = (Arc::clone(&stores[c % stores.len()]), t.clone());
        claimants.spawn(async move {
            let me = claimant(&format!("run-{c}"), Some(Duration::from_secs(3_600)));
            let mut mine = Vec::new();
            loop {
                // A call that kept losing says how many races it lost.
                let next = store.claim_next(&t, &ListQuery::default(), &me).await;
                let next = next.unwrap_or_else(|e| {
                    panic!(
                        "claimant {c}, call {} (after {} claims) failed: {e}",
                        mine.len() + 1,
                        mine.len()
                    )
                });
                match next {
                    ClaimNext::Claimed { issue } => {
                        let claim = issue.claim.as_ref().expect("a claimed issue has its claim");
                        assert_eq!(claim.run, me.run);
                        mine.push(issue.id);
                    }
                    ClaimNext::NoReadyWork { blocked, .. } => {
                        // Nothing un-claims here, so "no ready work" must
                        // hold from then on: nothing ready is left.
                        let left = store.list_issues(&t, &ready(10)).await.expect("ready");
                        assert!(
                            left.issues.is_empty(),
                            "no ready work was answered while {:?} was ready",
                            left.issues.iter().map(|i| &i.id).collect::<Vec<_>>()
                        );
                        assert_eq!(blocked, OPEN_BLOCKERS as u64);
                        return mine;
                    }
                }
            }
        });
    }
    let mut owners: BTreeMap<IssueId, usize> = BTreeMap::new();
    let mut c = 0;
    while let Some(done) = claimants.join_next().await {
        for id in done.expect("claimant task") {
            *owners.entry(id).or_default() += 1;
        }
        c += 1;
    }
    assert_eq!(c, CLAIMANTS);
    let twice: Vec<_> = owners.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "issues claimed more than once: {twice:?}");
    let claimed: BTreeSet<IssueId> = owners.into_keys().collect();
    assert_eq!(
        claimed, expected_ready,
        "every ready issue claimed, nothing else"
    );
    assert!(claimed.is_disjoint(&blocked));
    match store
        .claim_next(&t, &ListQuery::default(), &claimant("late", None))
        .await
        .unwrap()
    {
        ClaimNext::NoReadyWork {
            claimed,
            blocked,
            at_least,
        } => {
            assert_eq!(claimed, expected_ready.len() as u64);
            assert_eq!(blocked, OPEN_BLOCKERS as u64);
            assert!(at_least.is_empty(), "exact under the cap: {at_least:?}");
        }
        other => panic!("expected no ready work, got {other:?}"),
    }
}

/// Blockers finishing and reopening at once, from several writers, while
/// another re-points their dependents at other blockers: the ready list,
/// `claim_next`'s "no ready work" and `board_stats` follow the final
/// states and relations (on MongoDB each issue's count of open blockers
/// is recounted after every such write and must converge).
pub async fn case_ready_follows_racing_blocker_changes<S: BoardStore>(store: Arc<S>) {
    const BLOCKERS: usize = 8;
    const WRITERS: usize = 4;
    const WRITES: usize = 12;
    // Two blockers per writer.
    const _: () = assert!(BLOCKERS == 2 * WRITERS);
    let t = tenant("racing-blockers");
    let s = &*store;
    let mut blockers = Vec::new();
    for i in 0..BLOCKERS {
        let id = create(s, &t, with(&format!("blocker {i}"), Priority::Low, &[])).await;
        blockers.push(id);
    }
    // Each dependent waits on two neighbouring blockers.
    let mut dependents = Vec::new();
    for i in 0..2 * BLOCKERS {
        let pair = [
            blockers[i % BLOCKERS].clone(),
            blockers[(i + 1) % BLOCKERS].clone(),
        ];
        let new = with(
            &format!("dependent {i}"),
            Priority::High,
            &[&pair[0], &pair[1]],
        );
        dependents.push((create(s, &t, new).await, pair));
    }
    let mut writers = JoinSet::new();
    // Writer `w` toggles blockers `w` and `w + 4` (each blocker has one
    // writer, so where it ends is known: the first half done, the rest
    // open), while the dependents of each, sharing blockers across writers,
    // are recounted by racing writers.
    for w in 0..WRITERS {
        let (store, t, blockers) = (Arc::clone(&store), t.clone(), blockers.clone());
        writers.spawn(async move {
            for k in 0..WRITES {
                let (id, last) = if k % 2 == 0 {
                    (&blockers[w], IssueState::Done)
                } else {
                    (&blockers[w + WRITERS], IssueState::Todo)
                };
                let state = if k + 2 >= WRITES {
                    last
                } else if (k / 2) % 2 == 0 {
                    IssueState::Done
                } else {
                    IssueState::Todo
                };
                let patch = IssuePatch {
                    state: Some(state),
                    ..IssuePatch::default()
                };
                store
                    .update_issue(&t, id, patch, None)
                    .await
                    .expect("toggle");
            }
        });
    }
    // Meanwhile another writer points dependents at other blockers.
    {
        let (store, t, blockers) = (Arc::clone(&store), t.clone(), blockers.clone());
        let ids: Vec<IssueId> = dependents.iter().map(|(id, _)| id.clone()).collect();
        writers.spawn(async move {
            for k in 0..WRITES {
                let pair = [
                    blockers[(k * 5) % BLOCKERS].clone(),
                    blockers[(k * 5 + 3) % BLOCKERS].clone(),
                ];
                let patch = IssuePatch {
                    blocked_by: Some(BlockedBy::parse(pair).unwrap()),
                    ..IssuePatch::default()
                };
                let id = &ids[(k * 3) % ids.len()];
                store
                    .update_issue(&t, id, patch, None)
                    .await
                    .expect("re-point");
            }
        });
    }
    while let Some(done) = writers.join_next().await {
        done.expect("writer task");
    }
    let mut open = BTreeSet::new();
    for id in &blockers {
        if !store.get_issue(&t, id).await.unwrap().state.is_terminal() {
            open.insert(id.clone());
        }
    }
    assert_eq!(open, blockers[WRITERS..].iter().cloned().collect());
    let mut free = BTreeSet::new();
    for (id, _) in &dependents {
        let now_blocked_by = store.get_issue(&t, id).await.unwrap().blocked_by;
        if now_blocked_by.iter().all(|b| !open.contains(b)) {
            free.insert(id.clone());
        }
    }
    let listed: BTreeSet<IssueId> = all_pages(s, &t, &ready(50))
        .await
        .into_iter()
        .filter(|id| dependents.iter().any(|(d, _)| d == id))
        .collect();
    assert_eq!(
        listed, free,
        "ready dependents once blockers {open:?} of {blockers:?} are the open ones"
    );
    assert!(!free.is_empty(), "some dependents end free");
    let held = (dependents.len() - free.len()) as u64;
    let stats = store.board_stats(&t, Timestamp::now()).await.unwrap();
    assert_eq!(stats.blocked, held, "blocked in board_stats");
    // Only the dependents: every ready one is taken, then none is left.
    let high = ListQuery {
        priorities: vec![Priority::High],
        ..ListQuery::default()
    };
    let me = claimant("run-d", None);
    for _ in 0..free.len() {
        match store.claim_next(&t, &high, &me).await.unwrap() {
            ClaimNext::Claimed { issue } => assert!(free.contains(&issue.id)),
            other => panic!("expected a free dependent, got {other:?}"),
        }
    }
    match store.claim_next(&t, &high, &me).await.unwrap() {
        ClaimNext::NoReadyWork { blocked, .. } => assert_eq!(blocked, held),
        other => panic!("expected no ready work, got {other:?}"),
    }
}

pub async fn case_claim_next_takes_the_best_match_of_its_filters<S: BoardStore>(store: Arc<S>) {
    let t = tenant("claim-next-filters");
    let s = &*store;
    let parent = create(s, &t, with("epic", Priority::None, &[])).await;
    let mut child = with("child", Priority::Medium, &[]);
    child.parent = Some(parent.clone());
    child.labels = labels(&["backend"]);
    let child = create(s, &t, child).await;
    let mut low_child = with("low child", Priority::Low, &[]);
    low_child.parent = Some(parent.clone());
    low_child.labels = labels(&["backend"]);
    let low_child = create(s, &t, low_child).await;
    let _urgent = create(s, &t, with("urgent elsewhere", Priority::Urgent, &[])).await;
    let query = ListQuery {
        parent: Some(parent.clone()),
        labels: LabelFilter::All(vec![label("backend")]),
        priorities: Priority::Medium.at_least(),
        ..ListQuery::default()
    };
    let me = claimant("run-f", None);
    match store.claim_next(&t, &query, &me).await.unwrap() {
        ClaimNext::Claimed { issue } => assert_eq!(issue.id, child),
        other => panic!("expected the medium child, got {other:?}"),
    }
    // The low child is below the minimum priority; the claimed one counts.
    match store.claim_next(&t, &query, &me).await.unwrap() {
        ClaimNext::NoReadyWork {
            claimed,
            blocked,
            at_least,
        } => {
            assert_eq!((claimed, blocked), (1, 0));
            assert!(at_least.is_empty(), "exact under the cap: {at_least:?}");
        }
        other => panic!("expected no ready work, got {other:?}"),
    }
    let any_child = ListQuery {
        parent: Some(parent),
        ..ListQuery::default()
    };
    match store.claim_next(&t, &any_child, &me).await.unwrap() {
        ClaimNext::Claimed { issue } => assert_eq!(issue.id, low_child),
        other => panic!("expected the low child, got {other:?}"),
    }
}

pub async fn case_a_lapsed_lease_makes_the_issue_ready_again<S: BoardStore>(store: Arc<S>) {
    let t = tenant("lease");
    let id = create(&*store, &t, with("leased", Priority::High, &[])).await;
    let lease = Duration::from_millis(400);
    let holder = claimant("run-holder", Some(lease));
    let taken = match store
        .claim_next(&t, &ListQuery::default(), &holder)
        .await
        .unwrap()
    {
        ClaimNext::Claimed { issue } => issue,
        other => panic!("expected a claim, got {other:?}"),
    };
    let claim = taken.claim.clone().expect("claimed");
    assert!(
        claim.expires_at <= claim.claimed_at.plus_millis(400),
        "the claim lasts its lease, not the grant's hour: {claim:?}"
    );
    assert!(all_pages(&*store, &t, &ready(10)).await.is_empty());
    // Claiming one's own claim again renews the lease: only its end moves
    // (same version, same `claimed_at`).
    tokio::time::sleep(Duration::from_millis(20)).await;
    let renewed = store
        .claim_issue(&t, &id, &holder, None)
        .await
        .expect("renew");
    let again = renewed.claim.clone().expect("still claimed");
    assert_eq!(again.claimed_at, claim.claimed_at);
    assert!(
        again.expires_at > claim.expires_at,
        "{again:?} vs {claim:?}"
    );
    assert_eq!(renewed.version, taken.version);
    // About to lapse: stale within the window, not before it.
    let stale = |until: Timestamp| ListQuery {
        claim: ClaimFilter::Stale { until },
        ..ListQuery::default()
    };
    assert_eq!(
        all_pages(&*store, &t, &stale(again.expires_at)).await,
        vec![id.clone()]
    );
    assert!(
        all_pages(&*store, &t, &stale(Timestamp::from_millis(1)))
            .await
            .is_empty()
    );
    // Lapsed: ready again, still listed as stale, taken by the next one.
    let wait = again.expires_at.as_millis() - Timestamp::now().as_millis() + 50;
    tokio::time::sleep(Duration::from_millis(u64::try_from(wait).unwrap_or(0))).await;
    assert_eq!(all_pages(&*store, &t, &ready(10)).await, vec![id.clone()]);
    let lapsed = store.get_issue(&t, &id).await.unwrap();
    assert_eq!(lapsed.claim, None, "a lapsed claim reads as none");
    assert_eq!(
        all_pages(&*store, &t, &stale(Timestamp::now())).await,
        vec![id.clone()]
    );
    let next = claimant("run-next", Some(lease));
    match store
        .claim_next(&t, &ListQuery::default(), &next)
        .await
        .unwrap()
    {
        ClaimNext::Claimed { issue } => {
            assert_eq!(issue.id, id);
            assert_eq!(issue.claim.unwrap().run, next.run);
        }
        other => panic!("expected the lapsed issue, got {other:?}"),
    }
    // A lease never outlives its grant.
    let mut short = claimant("run-short", Some(Duration::from_secs(3_600)));
    short.expires_at = Timestamp::now().plus_millis(60_000);
    let other = create(&*store, &t, new_issue("short grant")).await;
    let claimed = store.claim_issue(&t, &other, &short, None).await.unwrap();
    assert_eq!(claimed.claim.unwrap().expires_at, short.expires_at);
}

pub async fn case_board_stats_count_states_priorities_labels_and_the_queue<S: BoardStore>(
    store: Arc<S>,
) {
    let t = tenant("stats");
    let s = &*store;
    let blocker = create(s, &t, with("blocker", Priority::High, &[])).await;
    let mut blocked = with("blocked", Priority::Low, &[&blocker]);
    blocked.labels = labels(&["api", "ui"]);
    create(s, &t, blocked).await;
    let mut plain = with("plain", Priority::Low, &[]);
    plain.labels = labels(&["api"]);
    let plain = create(s, &t, plain).await;
    // A finished issue's labels do not count, and what it blocked is
    // ready.
    let mut done = with("done", Priority::Urgent, &[]);
    done.labels = labels(&["ui"]);
    let done = create(s, &t, done).await;
    close(s, &t, &done).await;
    create(s, &t, with("freed", Priority::Low, &[&done])).await;
    let lease = Duration::from_secs(3_600);
    store
        .claim_issue(&t, &plain, &claimant("run-s", Some(lease)), None)
        .await
        .expect("claim");
    // Another tenant's issues never count.
    create(s, &tenant("stats-other"), new_issue("elsewhere")).await;

    let stats = store
        .board_stats(&t, Timestamp::now())
        .await
        .expect("stats");
    assert_eq!((stats.total, stats.open), (5, 4));
    assert_eq!(stats.by_state.get(&IssueState::Inbox), Some(&4));
    assert_eq!(stats.by_state.get(&IssueState::Done), Some(&1));
    assert_eq!(stats.by_priority.get(&Priority::Low), Some(&3));
    assert_eq!(stats.by_priority.get(&Priority::High), Some(&1));
    assert_eq!(
        stats.by_priority.get(&Priority::Urgent),
        None,
        "open issues only"
    );
    let by_label: Vec<(&str, u64)> = stats
        .by_label
        .iter()
        .map(|l| (l.label.as_str(), l.issues))
        .collect();
    assert_eq!(by_label, [("api", 2), ("ui", 1)]);
    assert!(!stats.more_labels);
    assert_eq!(
        (stats.ready, stats.claimed, stats.blocked, stats.stale),
        (2, 1, 1, 0)
    );
    // Stale up to the end of the claim: the claim counts as stale.
    let later = Timestamp::now().plus_millis(2 * 3_600_000);
    assert_eq!(store.board_stats(&t, later).await.unwrap().stale, 1);
}

/// `board_stats` as recounted from every issue listed: what the store
/// answers must be the same after every kind of write that moves a count.
async fn assert_stats_agree_with_the_issues<S: BoardStore>(store: &S, t: &TenantId, after: &str) {
    let mut query = ListQuery {
        limit: 100,
        ..ListQuery::default()
    };
    let mut issues = Vec::new();
    loop {
        let page = store.list_issues(t, &query).await.expect("list");
        issues.extend(page.issues);
        match page.next_cursor {
            Some(cursor) => query.cursor = Some(cursor),
            None => break,
        }
    }
    let mut by_state = BTreeMap::new();
    let mut by_priority = BTreeMap::new();
    let mut by_label: BTreeMap<String, u64> = BTreeMap::new();
    for issue in &issues {
        *by_state.entry(issue.state).or_insert(0u64) += 1;
        if !issue.state.is_terminal() {
            *by_priority.entry(issue.priority).or_insert(0u64) += 1;
            for label in issue.labels.iter() {
                *by_label.entry(label.as_str().to_owned()).or_default() += 1;
            }
        }
    }
    let stats = store.board_stats(t, Timestamp::now()).await.expect("stats");
    assert_eq!(stats.by_state, by_state, "per state, after {after}");
    assert_eq!(
        stats.by_priority, by_priority,
        "per priority, after {after}"
    );
    let listed: BTreeMap<String, u64> = stats
        .by_label
        .iter()
        .map(|l| (l.label.clone(), l.issues))
        .collect();
    assert_eq!(listed, by_label, "per label, after {after}");
    assert_eq!(stats.total, issues.len() as u64, "total, after {after}");
    assert!(
        stats.at_least.is_empty(),
        "a small board's counts are exact"
    );
}

pub async fn case_board_stats_follow_every_write_that_moves_a_count<S: BoardStore>(store: Arc<S>) {
    let t = tenant("stats-writes");
    let s = &*store;
    let mut ids = Vec::new();
    for (i, priority) in Priority::ALL.into_iter().enumerate() {
        let mut new = with(&format!("issue {i}"), priority, &[]);
        new.labels = labels(&[["api", "ui", "docs"][i % 3], "all"]);
        ids.push(create(s, &t, new).await);
    }
    // A replayed create counts once.
    let mut keyed = with("keyed", Priority::Medium, &[]);
    keyed.labels = labels(&["api"]);
    for _ in 0..2 {
        store
            .create_issue(&t, &author("run-a"), keyed.clone(), Some(&key("stats-1")))
            .await
            .expect("keyed create");
    }
    assert_stats_agree_with_the_issues(s, &t, "creates").await;
    let patch = |f: fn(&mut IssuePatch)| {
        let mut patch = IssuePatch::default();
        f(&mut patch);
        patch
    };
    let writes: [(&str, usize, IssuePatch); 6] = [
        (
            "a new priority",
            0,
            patch(|p| p.priority = Some(Priority::Urgent)),
        ),
        (
            "new labels",
            1,
            patch(|p| p.labels = Some(labels(&["ui", "perf"]))),
        ),
        ("a close", 2, patch(|p| p.state = Some(IssueState::Done))),
        (
            "labels of a finished issue",
            2,
            patch(|p| p.labels = Some(labels(&["docs", "old"]))),
        ),
        ("a reopen", 2, patch(|p| p.state = Some(IssueState::Todo))),
        (
            "a state within the open ones",
            3,
            patch(|p| p.state = Some(IssueState::InProgress)),
        ),
    ];
    for (what, i, patch) in writes {
        store
            .update_issue(&t, &ids[i], patch, None)
            .await
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_stats_agree_with_the_issues(s, &t, what).await;
    }
    // Claims and comments move no count.
    store
        .claim_issue(&t, &ids[4], &claimant("run-s", None), None)
        .await
        .expect("claim");
    store
        .add_comment(&t, &author("run-a"), comment(&ids[4], "noted"), None)
        .await
        .expect("comment");
    assert_stats_agree_with_the_issues(s, &t, "a claim and a comment").await;
}
