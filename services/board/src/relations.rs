//! Relations between issues (parent, duplicate of, blocked by), the close
//! reason that goes with the lifecycle, and claims: which run is working on
//! an issue until when.
//!
//! The rules that need no store live here: bounds, self-relations, which
//! states carry a close reason, when a claim counts. The rules that need
//! the other issues (the related ids exist in the caller's tenant, a parent
//! chain has no cycle) are checked by each store inside the write, through
//! [`ParentChain`], so both stores walk a chain the same way.

use crate::error::{StoreError, ValidationError};
use crate::ids::{GrantId, IssueId, RunId};
use crate::issue::{Issue, IssueState};
use crate::timestamp::Timestamp;
use crate::window::CommentFacts;
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeSet;
use std::fmt;
use std::time::Duration;

/// Limits of relations, in one place so schemas and errors agree.
pub mod relation_limits {
    /// Most issues one issue may be blocked by.
    pub const BLOCKED_BY_MAX: usize = 50;
    /// Most ancestors above an issue: a parent chain longer than this is
    /// refused when it is made (and never walked further), which bounds the
    /// cycle check of every write that sets a parent.
    pub const PARENT_DEPTH_MAX: usize = 32;
    /// Most inverse relations (`children`, `blocks`) `get_issue` lists of
    /// each kind; `more_children` / `more_blocks` say when there are more
    /// (list_issues with `parent` pages through every child).
    pub const INVERSE_MAX: usize = 100;
}

/// Why an issue was closed. Every issue in a terminal state (`done`,
/// `closed`) has one; an open issue never has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CloseReason {
    /// The work is done (the default when an issue is closed without a reason).
    Completed,
    /// Nobody will do it.
    NotPlanned,
    /// Another issue (`duplicate_of`) describes the same thing.
    Duplicate,
}

impl CloseReason {
    pub const ALL: [CloseReason; 3] = [Self::Completed, Self::NotPlanned, Self::Duplicate];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::NotPlanned => "not_planned",
            Self::Duplicate => "duplicate",
        }
    }

    pub fn parse(text: &str) -> Result<Self, ValidationError> {
        Self::ALL
            .into_iter()
            .find(|r| r.as_str() == text)
            .ok_or_else(|| {
                ValidationError::new(
                    "close_reason",
                    format!(
                        "unknown close reason {text:?}; expected completed, not_planned or duplicate"
                    ),
                )
            })
    }

    pub fn names() -> Vec<&'static str> {
        Self::ALL.iter().map(|r| r.as_str()).collect()
    }
}

impl fmt::Display for CloseReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl IssueState {
    /// Whether the issue is finished (`done` or `closed`): it then carries
    /// a close reason, cannot be claimed, and any claim on it has ended.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Done | Self::Closed)
    }
}

/// The issues an issue is blocked by: a set of at most
/// [`relation_limits::BLOCKED_BY_MAX`] ids, kept sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct BlockedBy(BTreeSet<IssueId>);

impl BlockedBy {
    pub fn parse(ids: impl IntoIterator<Item = IssueId>) -> Result<Self, ValidationError> {
        let set: BTreeSet<IssueId> = ids.into_iter().collect();
        if set.len() > relation_limits::BLOCKED_BY_MAX {
            return Err(ValidationError::new(
                "blocked_by",
                format!(
                    "an issue may be blocked by at most {} issues",
                    relation_limits::BLOCKED_BY_MAX
                ),
            ));
        }
        Ok(Self(set))
    }

    pub fn iter(&self) -> impl Iterator<Item = &IssueId> {
        self.0.iter()
    }

    pub fn contains(&self, id: &IssueId) -> bool {
        self.0.contains(id)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<'de> Deserialize<'de> for BlockedBy {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Self::parse(Vec::<IssueId>::deserialize(deserializer)?).map_err(serde::de::Error::custom)
    }
}

/// A run's hold on an issue: it works on it, nobody else may claim it.
///
/// A claim lasts until the run releases it, the issue is closed, the grant
/// it was made under is revoked or expires, or its lease lapses (the run
/// neither wrote to the issue nor renewed the claim for a lease's length).
/// Expiry needs no write: a claim whose `expires_at` (the earlier of the
/// lease's end and the grant's expiry) has passed reads as no claim
/// everywhere (see [`Claim::live_at`]); revocation clears the grant's
/// claims in the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    pub run: RunId,
    pub grant: GrantId,
    pub claimed_at: Timestamp,
    /// When the claim ends unless renewed: the end of its lease, or the
    /// expiry of the grant it was made under if that comes first.
    pub expires_at: Timestamp,
}

impl Claim {
    /// The claim if it still counts at `now`: stores apply this to every
    /// issue they read, so an expired claim is never shown or honoured.
    pub fn live_at(self, now: Timestamp) -> Option<Self> {
        (self.expires_at > now).then_some(self)
    }
}

/// Who asks for a claim: the calling run, the grant it acts under and when
/// that grant expires (all from the resolved grant, never from input), and
/// the lease its claims get (the operator's setting).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claimant {
    pub run: RunId,
    pub grant: GrantId,
    pub expires_at: Timestamp,
    /// How long a claim lasts without a write or a renewal; `None`: until
    /// the grant ends. With a lease, claiming one's own claim again renews
    /// it (a write); without, it changes nothing.
    pub lease: Option<Duration>,
    /// The run's level ([`crate::Integrity::of_writer`]), which the
    /// history records for its claims and releases.
    pub integrity: crate::Integrity,
}

impl Claimant {
    /// `grant`'s run, writing at `integrity`, as a claimant whose claims
    /// get `lease`.
    pub fn of(grant: &crate::Grant, lease: Duration, integrity: crate::Integrity) -> Self {
        Self {
            run: grant.run.clone(),
            grant: grant.id.clone(),
            expires_at: grant.expires_at,
            lease: Some(lease),
            integrity,
        }
    }

    /// The claimant as the author of its claim's history entries.
    pub fn author(&self) -> crate::Author {
        crate::Author::run(self.run.clone(), Some(self.grant.clone()), self.integrity)
    }

    /// Refuses a claimant whose grant has expired by `now`: the one
    /// refusal every store gives a claim made under a dead grant.
    pub fn live_at(&self, now: Timestamp) -> Result<(), ValidationError> {
        if self.expires_at <= now {
            return Err(Self::expired());
        }
        Ok(())
    }

    /// The refusal of a claim under an expired grant.
    pub fn expired() -> ValidationError {
        ValidationError::new(
            "grant",
            "the grant of this run has expired; a claim needs a live grant",
        )
    }

    /// The claim this claimant makes at `now`.
    pub fn claim_at(&self, now: Timestamp) -> Claim {
        Claim {
            run: self.run.clone(),
            grant: self.grant.clone(),
            claimed_at: now,
            expires_at: self.claim_expires_at(now),
        }
    }

    /// When a claim taken or renewed at `now` ends: the end of the lease,
    /// or the grant's expiry if that comes first.
    pub fn claim_expires_at(&self, now: Timestamp) -> Timestamp {
        match self.lease {
            Some(lease) => {
                let millis = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX);
                self.expires_at.min(now.plus_millis(millis))
            }
            None => self.expires_at,
        }
    }

    /// Whether claiming one's own claim again renews its lease (a write).
    pub fn renews(&self) -> bool {
        self.lease.is_some()
    }

    /// Whether `claim` is this claimant's own (same run and grant): claiming
    /// again is then an idempotent success that changes nothing.
    pub fn holds(&self, claim: &Claim) -> bool {
        claim.run == self.run && claim.grant == self.grant
    }
}

/// What a claim attempt finds on an issue, decided once for both stores:
/// whether the conditional update may take it, or why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimCheck {
    /// Open and unclaimed (or its claim has ended): the claimant may take it.
    Free,
    /// Already the claimant's own claim: success, nothing to write.
    Own,
    /// Refused with this error.
    Refused(StoreError),
}

impl ClaimCheck {
    /// The decision for `issue` (as read, claims already normalised by
    /// [`Claim::live_at`]) and `claimant`.
    pub fn of(issue: &Issue, claimant: &Claimant, expected_version: Option<u64>) -> Self {
        if let Some(expected) = expected_version
            && expected != issue.version
        {
            return Self::Refused(StoreError::VersionConflict {
                expected,
                actual: issue.version,
            });
        }
        if issue.state.is_terminal() {
            return Self::Refused(StoreError::NotClaimable {
                issue: issue.id.clone(),
                state: issue.state,
            });
        }
        match &issue.claim {
            None => Self::Free,
            Some(claim) if claimant.holds(claim) => Self::Own,
            // The same run under a new grant: it keeps the issue, and the
            // claim now ends with the new grant.
            Some(claim) if claim.run == claimant.run => Self::Free,
            Some(claim) => Self::Refused(StoreError::Claimed {
                issue: issue.id.clone(),
                run: claim.run.clone(),
                since: claim.claimed_at,
            }),
        }
    }
}

/// The decision for a release by `run` of `issue` (claims normalised):
/// `Ok(())` when the run holds the claim, else the refusal.
pub fn check_release(
    issue: &Issue,
    run: &RunId,
    expected_version: Option<u64>,
) -> Result<(), StoreError> {
    if let Some(expected) = expected_version
        && expected != issue.version
    {
        return Err(StoreError::VersionConflict {
            expected,
            actual: issue.version,
        });
    }
    match &issue.claim {
        Some(claim) if &claim.run == run => Ok(()),
        Some(claim) => Err(StoreError::Claimed {
            issue: issue.id.clone(),
            run: claim.run.clone(),
            since: claim.claimed_at,
        }),
        None => Err(StoreError::NotClaimed {
            issue: issue.id.clone(),
        }),
    }
}

/// Why a hand-over of `issue`'s claim (a person giving it to another run,
/// whoever held it, in one conditional write at the version the person
/// saw) matched nothing: the version moved, or the issue is done or
/// closed. `Ok(())` when neither (the write may be tried again).
pub fn check_hand_over(issue: &Issue, expected_version: u64) -> Result<(), StoreError> {
    if expected_version != issue.version {
        return Err(StoreError::VersionConflict {
            expected: expected_version,
            actual: issue.version,
        });
    }
    if issue.state.is_terminal() {
        return Err(StoreError::NotClaimable {
            issue: issue.id.clone(),
            state: issue.state,
        });
    }
    Ok(())
}

/// Which claims a listed issue must have.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum ClaimFilter {
    #[default]
    Any,
    /// No live claim: work nobody has taken.
    Unclaimed,
    /// Claimed by this run.
    ClaimedBy(RunId),
    /// Claimed, and the claim has ended by `until` without being released
    /// (its lease lapsed or its grant expired) or ends by then: claims
    /// whose holder has gone quiet. Open issues only.
    Stale { until: Timestamp },
}

impl ClaimFilter {
    pub fn matches(&self, claim: Option<&Claim>) -> bool {
        match self {
            Self::Any => true,
            Self::Unclaimed => claim.is_none(),
            Self::ClaimedBy(run) => claim.is_some_and(|c| &c.run == run),
            // A claim that has ended reads as none, so an issue as read
            // cannot tell an ended claim from no claim at all: stores
            // decide from the stored claim, this only checks the live part.
            // Stores keep only issues with a stored claim.
            Self::Stale { until } => claim.is_none_or(|c| c.expires_at <= *until),
        }
    }
}

/// The walk up a parent chain that refuses a cycle, in steps a store
/// drives (each step is one lookup of the current ancestor's parent, in
/// the caller's tenant, inside the write):
///
/// ```text
/// let mut chain = ParentChain::new(child, parent)?;
/// while let Some(ancestor) = chain.pending() {
///     let parent_of_ancestor = /* look up `ancestor` in the tenant */;
///     chain.step(parent_of_ancestor)?;
/// }
/// ```
///
/// The first lookup is of the new parent itself: `None` there means it
/// does not exist (in this tenant), an [`StoreError::UnknownRelated`].
#[derive(Debug, Clone)]
pub struct ParentChain {
    child: Option<IssueId>,
    parent: IssueId,
    next: Option<IssueId>,
    depth: usize,
}

impl ParentChain {
    /// `child` is the issue getting `parent` (`None` for an issue being
    /// created, which cannot be anyone's ancestor yet).
    pub fn new(child: Option<&IssueId>, parent: &IssueId) -> Result<Self, StoreError> {
        if child == Some(parent) {
            return Err(ValidationError::new("parent", "an issue cannot be its own parent").into());
        }
        Ok(Self {
            child: child.cloned(),
            parent: parent.clone(),
            next: Some(parent.clone()),
            depth: 0,
        })
    }

    /// The ancestor whose parent the store must look up next, or `None`
    /// when the walk reached the root: no cycle.
    pub fn pending(&self) -> Option<&IssueId> {
        self.next.as_ref()
    }

    /// Feeds the lookup of [`Self::pending`]: `found` is `None` when that
    /// issue does not exist, else `Some(its parent)`.
    pub fn step(&mut self, found: Option<Option<IssueId>>) -> Result<(), StoreError> {
        let Some(current) = self.next.take() else {
            return Ok(());
        };
        let Some(parent_of_current) = found else {
            if current == self.parent {
                return Err(StoreError::UnknownRelated {
                    field: "parent",
                    id: current,
                });
            }
            // An ancestor that vanished ends the chain there.
            return Ok(());
        };
        self.depth += 1;
        if let Some(next) = parent_of_current {
            if self.child.as_ref() == Some(&next) {
                return Err(StoreError::RelationCycle {
                    issue: self.child.clone().unwrap_or_else(|| next.clone()),
                    parent: self.parent.clone(),
                });
            }
            if self.depth >= relation_limits::PARENT_DEPTH_MAX {
                return Err(ValidationError::new(
                    "parent",
                    format!(
                        "the parent chain would be deeper than {} issues",
                        relation_limits::PARENT_DEPTH_MAX
                    ),
                )
                .into());
            }
            self.next = Some(next);
        }
        Ok(())
    }
}

/// Checks the relations of one issue that need no store: no self-relation
/// (`id` is `None` for an issue being created) and a `duplicate` close
/// reason only with `duplicate_of`.
pub fn check_relations(id: Option<&IssueId>, issue: &Issue) -> Result<(), ValidationError> {
    if let Some(id) = id {
        if issue.duplicate_of.as_ref() == Some(id) {
            return Err(ValidationError::new(
                "duplicate_of",
                "an issue cannot be a duplicate of itself",
            ));
        }
        if issue.blocked_by.contains(id) {
            return Err(ValidationError::new(
                "blocked_by",
                "an issue cannot be blocked by itself",
            ));
        }
        if issue.parent.as_ref() == Some(id) {
            return Err(ValidationError::new(
                "parent",
                "an issue cannot be its own parent",
            ));
        }
    }
    if issue.close_reason == Some(CloseReason::Duplicate) && issue.duplicate_of.is_none() {
        return Err(ValidationError::new(
            "close_reason",
            "duplicate needs duplicate_of: the id of the original issue",
        ));
    }
    Ok(())
}

/// `get_issue`'s answer: the issue and the relations other issues hold to
/// it, computed by the store on read (bounded by
/// [`relation_limits::INVERSE_MAX`] each).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IssueView {
    #[serde(flatten)]
    pub issue: Issue,
    /// Issues whose `parent` is this one (sub-issues), newest first.
    pub children: Vec<IssueId>,
    /// True when there are more children than listed.
    pub more_children: bool,
    /// Issues that list this one in their `blocked_by`, newest first.
    pub blocks: Vec<IssueId>,
    /// True when it blocks more issues than listed.
    pub more_blocks: bool,
    /// What the read left out of the issue's comments (`issue.comments`
    /// holds only the window read). Not part of the JSON: each answer
    /// says it in its own terms.
    #[serde(skip)]
    pub comment_facts: CommentFacts,
}

/// What [`IssueStore::get_issue_view_since`](crate::IssueStore::get_issue_view_since)
/// found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ViewSince {
    /// Nothing on the tenant's board changed since the epoch the caller gave.
    Unchanged,
    /// The view as read now, and the tenant's epoch it was read at (`None`:
    /// the store keeps no epoch).
    Read {
        view: Box<IssueView>,
        epoch: Option<u64>,
    },
}

impl IssueView {
    /// Builds the view from the issue with the comments of a window (and
    /// that read's facts) and up to `INVERSE_MAX + 1` ids of each kind, as
    /// the stores fetch them (one more than shown, to know if there are more).
    pub fn new(
        issue: Issue,
        comment_facts: CommentFacts,
        mut children: Vec<IssueId>,
        mut blocks: Vec<IssueId>,
    ) -> Self {
        let more_children = children.len() > relation_limits::INVERSE_MAX;
        children.truncate(relation_limits::INVERSE_MAX);
        let more_blocks = blocks.len() > relation_limits::INVERSE_MAX;
        blocks.truncate(relation_limits::INVERSE_MAX);
        Self {
            issue,
            children,
            more_children,
            blocks,
            more_blocks,
            comment_facts,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::TenantId;
    use crate::issue::{Author, NewIssue, Title};

    fn issue() -> Issue {
        NewIssue::new(Title::parse("a").unwrap()).into_issue(
            TenantId::parse("t").unwrap(),
            Author {
                kind: crate::AuthorKind::Run,
                run: RunId::parse("r").unwrap(),
                grant: None,
                integrity: crate::Integrity::Agent,
            },
            Timestamp::from_millis(1),
        )
    }

    fn claimant(run: &str) -> Claimant {
        Claimant {
            run: RunId::parse(run).unwrap(),
            grant: GrantId::generate(),
            expires_at: Timestamp::from_millis(1_000),
            lease: None,
            integrity: crate::Integrity::Agent,
        }
    }

    #[test]
    fn close_reasons_parse_by_wire_name() {
        for reason in CloseReason::ALL {
            assert_eq!(CloseReason::parse(reason.as_str()).unwrap(), reason);
            assert_eq!(
                serde_json::to_string(&reason).unwrap(),
                format!("\"{reason}\"")
            );
        }
        assert!(CloseReason::parse("wontfix").is_err());
    }

    #[test]
    fn blocked_by_is_a_bounded_set() {
        let id = IssueId::generate();
        assert_eq!(BlockedBy::parse([id.clone(), id]).unwrap().len(), 1);
        let many = (0..=relation_limits::BLOCKED_BY_MAX).map(|_| IssueId::generate());
        assert_eq!(BlockedBy::parse(many).unwrap_err().field, "blocked_by");
    }

    #[test]
    fn expired_claims_do_not_count() {
        let claim = claimant("a").claim_at(Timestamp::from_millis(10));
        assert!(claim.clone().live_at(Timestamp::from_millis(999)).is_some());
        assert!(claim.live_at(Timestamp::from_millis(1_000)).is_none());
    }

    #[test]
    fn a_claim_check_takes_free_open_issues_only() {
        let mut issue = issue();
        let a = claimant("a");
        assert_eq!(ClaimCheck::of(&issue, &a, None), ClaimCheck::Free);
        assert!(matches!(
            ClaimCheck::of(&issue, &a, Some(2)),
            ClaimCheck::Refused(StoreError::VersionConflict { .. })
        ));
        issue.claim = Some(a.claim_at(Timestamp::from_millis(5)));
        assert_eq!(ClaimCheck::of(&issue, &a, None), ClaimCheck::Own);
        let b = claimant("b");
        match ClaimCheck::of(&issue, &b, None) {
            ClaimCheck::Refused(err @ StoreError::Claimed { .. }) => {
                assert!(err.to_string().contains("claimed by run a"), "{err}")
            }
            other => panic!("{other:?}"),
        }
        assert!(check_release(&issue, &b.run, None).is_err());
        check_release(&issue, &a.run, None).unwrap();
        issue.claim = None;
        issue.state = IssueState::Done;
        assert!(matches!(
            ClaimCheck::of(&issue, &a, None),
            ClaimCheck::Refused(StoreError::NotClaimable { .. })
        ));
        assert!(matches!(
            check_release(&issue, &a.run, None),
            Err(StoreError::NotClaimed { .. })
        ));
    }

    #[test]
    fn parent_chains_refuse_cycles_missing_parents_and_depth() {
        let ids: Vec<IssueId> = (0..40).map(|_| IssueId::generate()).collect();
        // ids[i]'s parent is ids[i + 1]; making ids[0] the parent of ids[3]
        // closes a cycle.
        let parent_of = |id: &IssueId| {
            let i = ids.iter().position(|x| x == id)?;
            Some(ids.get(i + 1).cloned())
        };
        let walk = |child: Option<&IssueId>, parent: &IssueId| -> Result<(), StoreError> {
            let mut chain = ParentChain::new(child, parent)?;
            while let Some(ancestor) = chain.pending().cloned() {
                chain.step(parent_of(&ancestor))?;
            }
            Ok(())
        };
        assert!(matches!(
            walk(Some(&ids[3]), &ids[0]),
            Err(StoreError::RelationCycle { .. })
        ));
        assert!(matches!(
            walk(Some(&ids[0]), &ids[0]),
            Err(StoreError::Invalid(_))
        ));
        let unknown = IssueId::generate();
        assert!(matches!(
            walk(None, &unknown),
            Err(StoreError::UnknownRelated {
                field: "parent",
                ..
            })
        ));
        // ids[39] is a root: a chain of 1 is fine, a chain of 40 too deep.
        walk(None, &ids[39]).unwrap();
        assert!(matches!(walk(None, &ids[0]), Err(StoreError::Invalid(_))));
        walk(None, &ids[40 - relation_limits::PARENT_DEPTH_MAX]).unwrap();
    }

    #[test]
    fn self_relations_and_bare_duplicates_are_refused() {
        let mut issue = issue();
        let id = issue.id.clone();
        check_relations(Some(&id), &issue).unwrap();
        issue.blocked_by = BlockedBy::parse([id.clone()]).unwrap();
        assert_eq!(
            check_relations(Some(&id), &issue).unwrap_err().field,
            "blocked_by"
        );
        issue.blocked_by = BlockedBy::default();
        issue.close_reason = Some(CloseReason::Duplicate);
        assert_eq!(
            check_relations(None, &issue).unwrap_err().field,
            "close_reason"
        );
        issue.duplicate_of = Some(IssueId::generate());
        check_relations(None, &issue).unwrap();
    }
}
