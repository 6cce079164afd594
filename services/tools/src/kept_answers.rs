//! The latest `get_issue` and `list_issues` answers, kept with the
//! tenant's epoch they were read at, so a read of an issue or a page
//! nothing has changed since is answered without reading or shaping it
//! again.
//!
//! Agents read the same issues over and over (the epic they work under,
//! the issue they hold); each read was a store read plus shaping the view
//! into JSON and a text block, about half of an in-process `get_issue`
//! (services/bench/FINDINGS.md); a default list page reads and shapes 50
//! issues. A kept answer is given again only after the store confirmed
//! that its epoch has not moved ([`IssueStore::get_issue_view_since`] in
//! the same call as the read; `IssueStore::tenant_epoch` before a list):
//! the epoch counts every change of the tenant's issues and comments,
//! whichever process made it, so a kept answer is never older than what a
//! fresh read would show, and other tenants' writes leave it standing. A
//! claim an answer shows ends by time, not by a write, so such an answer
//! is kept only until then ([`Kept::until`]). A store without an epoch
//! (MongoDB) keeps nothing here.
//!
//! Tenants share the process, so each has its own share:
//! [`KeptBounds::per_tenant_bytes`] of estimated memory, least recently
//! used answers going first, and at most [`KeptBounds::tenants`] tenants,
//! the least recently reading going first. One tenant's reads cannot push
//! out another's answers.
//!
//! [`IssueStore::get_issue_view_since`]: corkboard_board::IssueStore::get_issue_view_since

use crate::result_budget::Answer;
use crate::view::ListView;
use corkboard_board::{CommentWindow, Integrity, Issue, IssueId, ListQuery, TenantId, Timestamp};
use hashlink::LruCache;
use std::sync::{Mutex, PoisonError};

/// How much the kept answers may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeptBounds {
    /// Estimated bytes of one tenant's kept answers.
    pub per_tenant_bytes: usize,
    /// Tenants with answers kept at once.
    pub tenants: usize,
}

impl KeptBounds {
    /// 512 KiB a tenant (a few dozen typical issue answers, or a few list
    /// pages of the result budget's size besides them), 64 tenants: at
    /// most about 32 MiB.
    pub const DEFAULT: Self = Self {
        per_tenant_bytes: 512 * 1024,
        tenants: 64,
    };
}

/// What an answer was asked with, besides its tenant: everything that
/// shapes it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum AnswerKey {
    /// A `get_issue` answer without history.
    Issue {
        id: IssueId,
        window: CommentWindow,
        body_offset: usize,
        min_integrity: Option<Integrity>,
    },
    /// A `list_issues` page whose issues do not depend on the time: no
    /// filter on claims or ready work (a claim ends by time, not by a
    /// write). The query holds the grant's integrity floor.
    List {
        query: Box<ListQuery>,
        view: ListView,
    },
}

impl AnswerKey {
    /// Estimated bytes of the key itself.
    fn weight(&self) -> usize {
        match self {
            Self::Issue { id, .. } => id.as_str().len(),
            Self::List { query, view } => {
                query.text.as_ref().map_or(0, String::len)
                    + 16 * (query.states.len() + query.priorities.len())
                    + view.fields.iter().map(String::len).sum::<usize>()
                    + 256
            }
        }
    }
}

/// An answer, the epoch it was read at and until when it may be given.
#[derive(Debug, Clone)]
pub(crate) struct Kept {
    pub epoch: u64,
    pub answer: Answer,
    /// When the answer goes stale without any write: the end of a claim it
    /// shows (a lapsed claim reads as none, `Claim::live_at`, and lapsing
    /// is no write, so the epoch does not see it). `None`: only a write
    /// can make it stale.
    pub until: Option<Timestamp>,
}

impl Kept {
    /// Whether the answer may still be given at `now` (its epoch aside).
    fn current_at(&self, now: Timestamp) -> bool {
        self.until.is_none_or(|until| now < until)
    }
}

/// Until when an answer showing `issues` may be kept: the end of the first
/// claim among them ([`Kept::until`]).
pub(crate) fn until_a_claim_ends<'a>(
    issues: impl IntoIterator<Item = &'a Issue>,
) -> Option<Timestamp> {
    issues
        .into_iter()
        .filter_map(|issue| issue.claim.as_ref().map(|claim| claim.expires_at))
        .min()
}

/// The kept answers of every tenant.
#[derive(Debug)]
pub(crate) struct KeptAnswers {
    bounds: KeptBounds,
    tenants: Mutex<LruCache<TenantId, TenantAnswers>>,
}

#[derive(Debug)]
struct TenantAnswers {
    answers: LruCache<AnswerKey, (Kept, usize)>,
    bytes: usize,
}

/// Estimated bytes an answer holds: its JSON and text, the value tree the
/// JSON came from (kept with it; about three times the JSON), the text's
/// escaped copy once it has been sent (`TextContent::json`, about the
/// text's size), the key.
fn weight(key: &AnswerKey, kept: &Kept) -> usize {
    const OVERHEAD: usize = 256;
    4 * kept.answer.structured.json().len() + 2 * kept.answer.text.len() + key.weight() + OVERHEAD
}

impl KeptAnswers {
    pub fn new(bounds: KeptBounds) -> Self {
        Self {
            bounds,
            // Bounded by `bounds.tenants` in `keep`, not by the map.
            tenants: Mutex::new(LruCache::new_unbounded()),
        }
    }

    /// The answer kept for `key`, with its epoch, unless it went stale by
    /// `now` ([`Kept::until`]); the caller still checks the epoch.
    pub fn get(&self, tenant: &TenantId, key: &AnswerKey, now: Timestamp) -> Option<Kept> {
        let mut tenants = self.tenants.lock().unwrap_or_else(PoisonError::into_inner);
        let answers = tenants.get_mut(tenant)?;
        answers
            .answers
            .get(key)
            .map(|(kept, _)| kept)
            .filter(|kept| kept.current_at(now))
            .cloned()
    }

    /// The answer kept for `key` if it was read at `epoch` and is still
    /// current at `now`: the one to give instead of reading again.
    pub fn given(
        &self,
        tenant: &TenantId,
        key: &AnswerKey,
        epoch: u64,
        now: Timestamp,
    ) -> Option<Answer> {
        self.get(tenant, key, now)
            .filter(|kept| kept.epoch == epoch)
            .map(|kept| kept.answer)
    }

    /// Keeps `kept` for `key`, replacing what was kept for it, within the
    /// tenant's share.
    pub fn keep(&self, tenant: &TenantId, key: AnswerKey, kept: Kept) {
        let weight = weight(&key, &kept);
        if self.bounds.tenants == 0 || weight > self.bounds.per_tenant_bytes {
            return;
        }
        let mut tenants = self.tenants.lock().unwrap_or_else(PoisonError::into_inner);
        if !tenants.contains_key(tenant) {
            while tenants.len() >= self.bounds.tenants {
                tenants.remove_lru();
            }
            tenants.insert(
                tenant.clone(),
                TenantAnswers {
                    answers: LruCache::new_unbounded(),
                    bytes: 0,
                },
            );
        }
        let Some(share) = tenants.get_mut(tenant) else {
            return;
        };
        if let Some((_, replaced)) = share.answers.remove(&key) {
            share.bytes -= replaced;
        }
        while share.bytes + weight > self.bounds.per_tenant_bytes {
            match share.answers.remove_lru() {
                Some((_, (_, dropped))) => share.bytes -= dropped,
                None => break,
            }
        }
        share.bytes += weight;
        share.answers.insert(key, (kept, weight));
    }

    /// Estimated bytes kept for `tenant` (tests).
    #[cfg(test)]
    fn bytes(&self, tenant: &TenantId) -> usize {
        let tenants = self.tenants.lock().unwrap_or_else(PoisonError::into_inner);
        tenants.peek(tenant).map_or(0, |share| share.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NOW: Timestamp = Timestamp::from_millis(1_000);

    fn tenant(name: &str) -> TenantId {
        TenantId::parse(name).unwrap()
    }

    fn key() -> AnswerKey {
        AnswerKey::Issue {
            id: IssueId::generate(),
            window: CommentWindow::latest(10),
            body_offset: 0,
            min_integrity: None,
        }
    }

    fn kept(epoch: u64, text_bytes: usize) -> Kept {
        Kept {
            epoch,
            answer: Answer::new(json!({ "id": "x" }), "t".repeat(text_bytes)),
            until: None,
        }
    }

    fn bounds(per_tenant_bytes: usize, tenants: usize) -> KeptBounds {
        KeptBounds {
            per_tenant_bytes,
            tenants,
        }
    }

    #[test]
    fn an_answer_is_kept_per_tenant_and_key_and_replaced_by_a_newer_one() {
        let kept_answers = KeptAnswers::new(KeptBounds::DEFAULT);
        let (a, b) = (tenant("a"), tenant("b"));
        let k = key();
        kept_answers.keep(&a, k.clone(), kept(3, 10));
        assert_eq!(kept_answers.get(&a, &k, NOW).unwrap().epoch, 3);
        assert!(
            kept_answers.get(&b, &k, NOW).is_none(),
            "another tenant's key"
        );
        let AnswerKey::Issue { id, window, .. } = &k else {
            unreachable!("an issue's key")
        };
        let other_window = AnswerKey::Issue {
            id: id.clone(),
            window: CommentWindow::latest(11),
            body_offset: 0,
            min_integrity: None,
        };
        assert!(kept_answers.get(&a, &other_window, NOW).is_none());
        let other_floor = AnswerKey::Issue {
            id: id.clone(),
            window: window.clone(),
            body_offset: 0,
            min_integrity: Some(Integrity::Person),
        };
        assert!(kept_answers.get(&a, &other_floor, NOW).is_none());
        let list = |query: ListQuery| AnswerKey::List {
            query: Box::new(query),
            view: ListView::default(),
        };
        kept_answers.keep(&a, list(ListQuery::default()), kept(5, 10));
        assert_eq!(
            kept_answers
                .get(&a, &list(ListQuery::default()), NOW)
                .unwrap()
                .epoch,
            5
        );
        let floored = ListQuery {
            min_integrity: Some(Integrity::Person),
            ..ListQuery::default()
        };
        assert!(kept_answers.get(&a, &list(floored), NOW).is_none());
        let before = kept_answers.bytes(&a);
        kept_answers.keep(&a, k.clone(), kept(4, 10));
        assert_eq!(kept_answers.get(&a, &k, NOW).unwrap().epoch, 4);
        assert_eq!(kept_answers.bytes(&a), before, "replaced, not added");
    }

    #[test]
    fn a_tenant_keeps_within_its_share_and_drops_its_least_recently_read() {
        let one = weight(&key(), &kept(1, 1_000));
        let kept_answers = KeptAnswers::new(bounds(3 * one, 8));
        let (a, b) = (tenant("a"), tenant("b"));
        let b_key = key();
        kept_answers.keep(&b, b_key.clone(), kept(1, 1_000));
        let keys: Vec<AnswerKey> = (0..3).map(|_| key()).collect();
        for k in &keys {
            kept_answers.keep(&a, k.clone(), kept(1, 1_000));
        }
        // Reading the first makes the second the least recently used.
        assert!(kept_answers.get(&a, &keys[0], NOW).is_some());
        kept_answers.keep(&a, key(), kept(1, 1_000));
        assert!(kept_answers.get(&a, &keys[1], NOW).is_none(), "dropped");
        assert!(kept_answers.get(&a, &keys[0], NOW).is_some());
        assert!(kept_answers.get(&a, &keys[2], NOW).is_some());
        assert!(kept_answers.bytes(&a) <= 3 * one);
        assert!(
            kept_answers.get(&b, &b_key, NOW).is_some(),
            "another tenant's answers stay"
        );
        // An answer larger than a share is not kept at all.
        kept_answers.keep(&a, key(), kept(1, 4 * one));
        assert!(kept_answers.bytes(&a) <= 3 * one);
    }

    #[test]
    fn past_the_tenant_bound_the_least_recently_reading_tenant_goes() {
        let kept_answers = KeptAnswers::new(bounds(64 * 1024, 2));
        let (a, b, c) = (tenant("a"), tenant("b"), tenant("c"));
        let k = key();
        kept_answers.keep(&a, k.clone(), kept(1, 10));
        kept_answers.keep(&b, k.clone(), kept(1, 10));
        assert!(kept_answers.get(&a, &k, NOW).is_some());
        kept_answers.keep(&c, k.clone(), kept(1, 10));
        assert!(
            kept_answers.get(&b, &k, NOW).is_none(),
            "b read least recently"
        );
        assert!(kept_answers.get(&a, &k, NOW).is_some());
        assert!(kept_answers.get(&c, &k, NOW).is_some());
    }

    #[test]
    fn an_answer_showing_a_claim_is_not_given_once_the_claim_ended() {
        let kept_answers = KeptAnswers::new(KeptBounds::DEFAULT);
        let (a, k) = (tenant("a"), key());
        let ends = Timestamp::from_millis(2_000);
        let mut claimed = kept(1, 10);
        claimed.until = Some(ends);
        kept_answers.keep(&a, k.clone(), claimed);
        assert!(kept_answers.get(&a, &k, NOW).is_some());
        assert!(
            kept_answers
                .get(&a, &k, Timestamp::from_millis(1_999))
                .is_some()
        );
        assert!(kept_answers.get(&a, &k, ends).is_none(), "the claim ended");
    }

    #[test]
    fn no_bounds_keep_nothing() {
        let kept_answers = KeptAnswers::new(bounds(0, 0));
        let k = key();
        kept_answers.keep(&tenant("a"), k.clone(), kept(1, 10));
        assert!(kept_answers.get(&tenant("a"), &k, NOW).is_none());
    }
}
