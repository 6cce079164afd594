//! The board as a work queue: which issues are ready work, in which order
//! a fleet takes them, what `claim_next` answers, and how long a claim's
//! lease lasts. Both stores order and judge ready work by these rules;
//! the contract tests use them as the reference.

use crate::ids::{IssueId, TenantId};
use crate::issue::{Issue, IssueState, Priority};
use crate::relations::Claim;
use serde::Serialize;
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// Limits of the work queue, in one place so schemas, settings and errors
/// agree.
pub mod queue_limits {
    use std::time::Duration;

    /// How long a claim lasts without a write to its issue or a renewal,
    /// unless the operator sets another (`claim_lease_ms`).
    pub const CLAIM_LEASE_DEFAULT: Duration = Duration::from_secs(15 * 60);
    /// The shortest lease an operator may set: shorter ones would lapse
    /// between two tool calls of a busy agent.
    pub const CLAIM_LEASE_MIN: Duration = Duration::from_secs(1);
    /// A live claim counts as stale (`stale: true`) once less than this
    /// share of its lease is left: about to lapse.
    pub const STALE_SHARE: u32 = 5;
    /// Labels `board_stats` counts, the most used first: a board may use
    /// thousands, and a model needs the main ones.
    pub const STATS_LABELS_MAX: usize = 50;
    /// Where a `board_stats` count may stop: the ready, claimed, blocked
    /// and stale counts (and on MongoDB the per-state counts, and the open
    /// issues read for the per-priority and per-label counts) are counted
    /// up to this many and no further, so one call's work does not grow
    /// with the board. A count that stopped is named in
    /// `BoardStats::at_least`. The claimed and blocked counts of a
    /// `claim_next` that found no ready work stop here too
    /// (`ClaimNext::NoReadyWork`).
    pub const STATS_COUNT_CAP: u64 = 10_000;
}

impl Priority {
    /// The sort key of ready work: 0 for `urgent` up to 4 for `none`, so
    /// ascending order is most urgent first. Stores keep it beside the
    /// priority so one index serves the ready order.
    pub fn urgency(self) -> i64 {
        match self {
            Self::Urgent => 0,
            Self::High => 1,
            Self::Medium => 2,
            Self::Low => 3,
            Self::None => 4,
        }
    }

    /// This priority and every more urgent one: what "at least this
    /// priority" selects.
    pub fn at_least(self) -> Vec<Priority> {
        Priority::ALL.into_iter().filter(|p| *p >= self).collect()
    }
}

/// The order of ready work: most urgent first, then oldest, then by id
/// (ids are unique, so the order is total and a cursor is exact).
pub fn ready_order(a: &Issue, b: &Issue) -> Ordering {
    a.priority
        .urgency()
        .cmp(&b.priority.urgency())
        .then(a.created_at.cmp(&b.created_at))
        .then(a.id.cmp(&b.id))
}

/// Whether `issue` is ready work: open, without a live claim (claims
/// normalised as read), and none of its blockers open (`open` says whether
/// a blocker is; a blocker that does not exist blocks nothing).
pub fn is_ready(issue: &Issue, open: impl Fn(&IssueId) -> bool) -> bool {
    !issue.state.is_terminal() && issue.claim.is_none() && !issue.blocked_by.iter().any(open)
}

/// The stale window of a lease: a live claim ending within it is stale.
pub fn stale_window(lease: Duration) -> Duration {
    lease / queue_limits::STALE_SHARE
}

/// A claim that ended without a release (its lease lapsed or its grant
/// expired), cleared by [`WebhookStore::expire_claims`](crate::WebhookStore::expire_claims).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExpiredClaim {
    pub tenant: TenantId,
    pub issue: IssueId,
    /// The issue's version once the claim was cleared.
    pub version: u64,
    /// The claim that ended.
    pub claim: Claim,
}

/// The shape of a board (`board_stats`): how many issues per state; of
/// the open ones (not done or closed), how many per priority and per label
/// (the [`queue_limits::STATS_LABELS_MAX`] most used), and how many are
/// ready, claimed, blocked or stale. Each call's cost is bounded: counts a
/// store cannot keep exact at a bounded cost stop at
/// [`queue_limits::STATS_COUNT_CAP`] and are named in `at_least`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct BoardStats {
    pub total: u64,
    pub open: u64,
    pub by_state: BTreeMap<IssueState, u64>,
    /// Open issues per priority.
    pub by_priority: BTreeMap<Priority, u64>,
    /// Open issues per label, most used first (ties by name).
    pub by_label: Vec<LabelCount>,
    /// Whether more labels are in use than `by_label` lists.
    pub more_labels: bool,
    /// Open, unclaimed and not blocked: what `claim_next` can take.
    pub ready: u64,
    /// Open with a live claim.
    pub claimed: u64,
    /// Open, unclaimed, waiting on an open blocker.
    pub blocked: u64,
    /// Open with a claim that ended unreleased or ends by the stale
    /// instant asked for (`list_issues` with `stale: true`).
    pub stale: u64,
    /// The counts that are lower bounds: each stopped at
    /// [`queue_limits::STATS_COUNT_CAP`] (or, for priorities and labels,
    /// counted that many open issues of more); all others are exact.
    pub at_least: BTreeSet<StatsPart>,
}

/// A part of [`BoardStats`] that may be a lower bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StatsPart {
    /// `by_state`, and so `total` and `open`.
    States,
    Priorities,
    Labels,
    Ready,
    Claimed,
    Blocked,
    Stale,
}

impl StatsPart {
    pub const ALL: [StatsPart; 7] = [
        Self::States,
        Self::Priorities,
        Self::Labels,
        Self::Ready,
        Self::Claimed,
        Self::Blocked,
        Self::Stale,
    ];
}

/// How many open issues carry one label.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LabelCount {
    pub label: String,
    pub issues: u64,
}

impl BoardStats {
    /// Orders and bounds `labels` (label, count) as `by_label` shows them.
    pub fn set_labels(&mut self, mut labels: Vec<LabelCount>) {
        labels.sort_by(|a, b| b.issues.cmp(&a.issues).then(a.label.cmp(&b.label)));
        self.more_labels = labels.len() > queue_limits::STATS_LABELS_MAX;
        labels.truncate(queue_limits::STATS_LABELS_MAX);
        self.by_label = labels;
    }

    /// `counted`, which a store counted up to one more than
    /// [`queue_limits::STATS_COUNT_CAP`]: itself, or the cap with `part`
    /// marked as a lower bound.
    pub fn capped(&mut self, part: StatsPart, counted: u64) -> u64 {
        capped(&mut self.at_least, part, counted)
    }

    /// Fills `total` and `open` from the per-state counts.
    pub fn finish(&mut self) {
        self.total = self.by_state.values().sum();
        self.open = self
            .by_state
            .iter()
            .filter(|(s, _)| !s.is_terminal())
            .map(|(_, n)| n)
            .sum();
    }

    /// `ready` as the open issues neither claimed nor blocked, when those
    /// three counts are exact; `false` (nothing set) when one is a lower
    /// bound, and the store counts `ready` itself.
    pub fn derive_ready(&mut self) -> bool {
        let exact = [StatsPart::States, StatsPart::Claimed, StatsPart::Blocked]
            .iter()
            .all(|part| !self.at_least.contains(part));
        if exact {
            self.ready = self.open.saturating_sub(self.claimed + self.blocked);
        }
        exact
    }
}

/// `counted`, which a store counted up to one more than
/// [`queue_limits::STATS_COUNT_CAP`]: itself, or the cap with `part` named
/// in `at_least` as a lower bound.
fn capped(at_least: &mut BTreeSet<StatsPart>, part: StatsPart, counted: u64) -> u64 {
    if counted > queue_limits::STATS_COUNT_CAP {
        at_least.insert(part);
        queue_limits::STATS_COUNT_CAP
    } else {
        counted
    }
}

/// What `claim_next` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum ClaimNext {
    /// The best ready issue matching the filters, now claimed by the caller.
    Claimed { issue: Box<Issue> },
    /// No ready issue matches the filters; of the open ones that do, how
    /// many are claimed (by a live claim) and how many unclaimed but
    /// blocked by an open issue. Each count stops at
    /// [`queue_limits::STATS_COUNT_CAP`], as `board_stats`' do, so a run
    /// polling an empty queue costs the store a bounded read however large
    /// the board; a count that stopped is named in `at_least`.
    NoReadyWork {
        claimed: u64,
        blocked: u64,
        at_least: BTreeSet<StatsPart>,
    },
}

impl ClaimNext {
    /// No ready work, from counts a store made up to one more than
    /// [`queue_limits::STATS_COUNT_CAP`] (a count past it is shown as the
    /// cap and named in `at_least`).
    pub fn no_ready_work(claimed: u64, blocked: u64) -> Self {
        let mut at_least = BTreeSet::new();
        let claimed = capped(&mut at_least, StatsPart::Claimed, claimed);
        let blocked = capped(&mut at_least, StatsPart::Blocked, blocked);
        Self::NoReadyWork {
            claimed,
            blocked,
            at_least,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::RunId;
    use crate::issue::{Author, NewIssue, Title};
    use crate::relations::BlockedBy;
    use crate::timestamp::Timestamp;

    fn issue(priority: Priority, at: i64) -> Issue {
        let mut new = NewIssue::new(Title::parse("a").unwrap());
        new.priority = priority;
        new.into_issue(
            TenantId::parse("t").unwrap(),
            Author::run(RunId::parse("r").unwrap(), None, crate::Integrity::Agent),
            Timestamp::from_millis(at),
        )
    }

    #[test]
    fn ready_work_is_most_urgent_then_oldest_first() {
        let mut issues = [
            issue(Priority::Low, 1),
            issue(Priority::Urgent, 3),
            issue(Priority::None, 0),
            issue(Priority::Urgent, 2),
        ];
        issues.sort_by(ready_order);
        let order: Vec<(Priority, i64)> = issues
            .iter()
            .map(|i| (i.priority, i.created_at.as_millis()))
            .collect();
        assert_eq!(
            order,
            [
                (Priority::Urgent, 2),
                (Priority::Urgent, 3),
                (Priority::Low, 1),
                (Priority::None, 0)
            ]
        );
        assert_eq!(
            Priority::Medium.at_least(),
            [Priority::Medium, Priority::High, Priority::Urgent]
        );
    }

    #[test]
    fn no_ready_work_stops_its_counts_at_the_cap_and_names_them() {
        let cap = queue_limits::STATS_COUNT_CAP;
        assert_eq!(
            ClaimNext::no_ready_work(cap, 3),
            ClaimNext::NoReadyWork {
                claimed: cap,
                blocked: 3,
                at_least: BTreeSet::new(),
            },
            "the cap itself is exact"
        );
        let past = ClaimNext::no_ready_work(cap + 1, cap + 1);
        assert_eq!(
            serde_json::to_value(&past).unwrap(),
            serde_json::json!({
                "outcome": "no_ready_work",
                "claimed": cap,
                "blocked": cap,
                "at_least": ["claimed", "blocked"],
            })
        );
    }

    #[test]
    fn a_count_past_the_cap_is_the_cap_and_named_a_lower_bound() {
        let cap = queue_limits::STATS_COUNT_CAP;
        let mut stats = BoardStats::default();
        stats.by_state.insert(IssueState::Todo, 30);
        stats.finish();
        stats.claimed = stats.capped(StatsPart::Claimed, 10);
        stats.blocked = stats.capped(StatsPart::Blocked, 5);
        assert!(stats.derive_ready(), "exact parts: ready derived");
        assert_eq!(stats.ready, 15);
        assert!(stats.at_least.is_empty());
        stats.blocked = stats.capped(StatsPart::Blocked, cap + 1);
        assert_eq!(stats.blocked, cap);
        assert_eq!(stats.at_least, BTreeSet::from([StatsPart::Blocked]));
        assert!(!stats.derive_ready(), "a lower bound: ready is counted");
        assert_eq!(
            stats.capped(StatsPart::Ready, cap),
            cap,
            "the cap itself is exact"
        );
        assert_eq!(
            serde_json::to_value(&stats.at_least).unwrap(),
            serde_json::json!(["blocked"])
        );
    }

    #[test]
    fn an_open_blocker_keeps_an_issue_from_being_ready() {
        let blocker = issue(Priority::None, 0);
        let mut blocked = issue(Priority::High, 1);
        blocked.blocked_by = BlockedBy::parse([blocker.id.clone()]).unwrap();
        assert!(!is_ready(&blocked, |id| id == &blocker.id));
        assert!(is_ready(&blocked, |_| false));
        blocked.state = crate::issue::IssueState::Done;
        assert!(!is_ready(&blocked, |_| false));
    }
}
