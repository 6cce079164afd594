//! The work queue on MongoDB: ready work in the ready order, and
//! `claim_next`. A find cannot join an issue to its blockers, so each
//! issue keeps the count of its open blockers (`open_blockers`,
//! `blockers.rs`), and ready work (open, no live claim, no open blocker,
//! matching the filters) is one range of the ready index, in order. A
//! claim is one `findOneAndUpdate` on a candidate with the "still ready"
//! filter; a claimant that loses it tries the next candidate it read.

use crate::codec::{changes_of, date, field, issue_projection, new_claim_write, timestamp};
use crate::error::{corrupt, store_error};
use crate::issues::page_within_comment_bytes;
use crate::query::{
    TERMINAL, list_filter_at, ready_after, ready_filter_without_lapsed_claims, ready_sort,
};
use crate::staged::{self, StagedEvent, with_staged};
use crate::store::{Lane, MongoStore, ReadBudget};
use corkboard_board::{
    BoardStats, ClaimFilter, ClaimNext, Claimant, HistoryPage, IssueId, IssueState, LabelCount,
    ListQuery, Page, Priority, RunId, StatsPart, StoreError, TenantId, Timestamp, queue_limits,
};
use mongodb::bson::{Bson, Document, doc};
use std::time::Duration;

/// Candidates one `claim_next` read names (ids only, from the ready
/// index): racing claimants spread over them. The tool description's "one
/// of the 64 best" is this number.
const CLAIM_NEXT_PAGE: i64 = 64;

/// Races a call loses in a row before it reads again: losing that many
/// says the read is stale (others drained that part of the page), and one
/// read costs less than trying the rest of a stale page one write each.
/// (With 64 claimants on four handles, a call that tried its whole page
/// first lost up to 194 races; in runs of 4, at most 13.)
const CLAIM_NEXT_RUN: usize = 4;

/// Reads one `claim_next` call makes at most; then it is unavailable
/// (retryable). So a call writes at most [`CLAIM_NEXT_READS`] ×
/// [`CLAIM_NEXT_RUN`] times (plus its win) and never starves for long:
/// every race it loses is an issue another claimant took.
const CLAIM_NEXT_READS: u32 = 16;

/// A page this short (the last ready issues of the board, or of the
/// filters) is tried in the ready order by every claimant.
const CLAIM_NEXT_STRICT: usize = 4;

/// The order in which a call tries `n` candidates (indexes into the
/// ready-ordered page): the ready order itself when `strict`, else
/// starting at `offset` (modulo the page) and wrapping around, so racing
/// claimants spread over the page instead of all aiming at its best.
fn claim_order(n: usize, offset: u64, strict: bool) -> Vec<usize> {
    if strict || n <= CLAIM_NEXT_STRICT {
        return (0..n).collect();
    }
    let start = usize::try_from(offset % n as u64).unwrap_or(0);
    (start..n).chain(0..start).collect()
}

/// A number that differs per call (not per process): each call's offset.
fn per_call_offset(run: &RunId) -> u64 {
    use std::hash::BuildHasher;
    std::hash::RandomState::new().hash_one((run.as_str(), Timestamp::now().as_millis()))
}

/// Adds `condition` to `filter`'s `$and` list.
fn and_push(filter: &mut Document, condition: Document) {
    let mut and = match filter.remove("$and") {
        Some(Bson::Array(and)) => and,
        _ => Vec::new(),
    };
    and.push(Bson::Document(condition));
    filter.insert("$and", and);
}

impl MongoStore {
    /// Gives issues written before the ready order existed their
    /// `urgency` (once per tenant per process, with the indexes): one
    /// update per priority, so it is idempotent and resumable.
    pub(crate) async fn backfill_urgency(&self, tenant: &TenantId) -> Result<(), StoreError> {
        for priority in Priority::ALL {
            self.issues(tenant)
                .update_many(
                    doc! { field::URGENCY: { "$exists": false }, field::PRIORITY: priority.as_str() },
                    doc! { "$set": { field::URGENCY: priority.urgency() } },
                )
                .await
                .map_err(|e| store_error(&e))?;
        }
        Ok(())
    }

    /// Whether the tenant has a claim stored whose end has passed (the
    /// server's sweeper clears them within about a second): one key of the
    /// `claim.expires_at` index.
    pub(crate) async fn any_lapsed_claim(
        &self,
        tenant: &TenantId,
        now: Timestamp,
        max_time: Duration,
    ) -> mongodb::error::Result<bool> {
        Ok(self
            .issues(tenant)
            .find_one(doc! { field::CLAIM_EXPIRES_AT: { "$lte": date(now) } })
            .projection(doc! { field::ID: 1 })
            .max_time(max_time)
            .await?
            .is_some())
    }

    /// [`Self::any_lapsed_claim`] for `claim_next`, read at most once a
    /// second per tenant: the earliest end of any stored claim is kept as
    /// the tenant's horizon (capped a second ahead), and before it no
    /// claim can have lapsed. A claim another replica makes meanwhile ends
    /// at least a lease (at least a second) later, after the cap; one
    /// ending sooner (its grant expires first) is seen at the next read,
    /// within a second, as the server's sweeper would clear it.
    pub(crate) async fn lapsed_claims(
        &self,
        tenant: &TenantId,
        now: Timestamp,
        max_time: Duration,
    ) -> mongodb::error::Result<bool> {
        if self.lapse_horizon(tenant).is_some_and(|until| now < until) {
            return Ok(false);
        }
        let earliest = self.earliest_claim_end(tenant, max_time).await?;
        let cap = now.plus_millis(1_000);
        match earliest {
            Some(end) if end <= now => {
                self.set_lapse_horizon(tenant, None, false);
                Ok(true)
            }
            other => {
                self.set_lapse_horizon(tenant, Some(other.map_or(cap, |end| end.min(cap))), false);
                Ok(false)
            }
        }
    }

    /// The earliest end of a claim stored in `tenant`'s issues, past or
    /// not: one key of the `claim.expires_at` index.
    pub(crate) async fn earliest_claim_end(
        &self,
        tenant: &TenantId,
        max_time: Duration,
    ) -> mongodb::error::Result<Option<Timestamp>> {
        Ok(self
            .issues(tenant)
            // A range of dates (not `$type`, which the server checks on
            // every entry, the unclaimed issues' nulls first).
            .find_one(doc! { field::CLAIM_EXPIRES_AT: { "$gte": date(Timestamp::from_millis(0)) } })
            .sort(doc! { field::CLAIM_EXPIRES_AT: 1 })
            .projection(doc! { field::CLAIM_EXPIRES_AT: 1 })
            .max_time(max_time)
            .await?
            .and_then(|doc| {
                doc.get_document(field::CLAIM)
                    .ok()
                    .and_then(|claim| claim.get_datetime("expires_at").ok())
                    .map(timestamp)
            }))
    }

    /// The filter of `ready` (a ready query) at `now`: without lapsed
    /// claims on the board, the one the ready index answers as points.
    fn ready_filter(ready: &ListQuery, now: Timestamp, lapsed: bool) -> Option<Document> {
        if lapsed {
            list_filter_at(ready, now)
        } else {
            ready_filter_without_lapsed_claims(ready, now)
        }
    }

    /// One page of ready work (`query.ready`; `filter` is the query's):
    /// one range of the ready index in its order (the blocked ones are
    /// left out by their `open_blockers`, `blockers.rs`).
    pub(crate) async fn ready_page(
        &self,
        tenant: &TenantId,
        query: &ListQuery,
        mut filter: Document,
        budget: Option<&ReadBudget>,
    ) -> Result<Page, StoreError> {
        let fail = |e: mongodb::error::Error| match budget {
            Some(budget) => budget.error(&e),
            None => store_error(&e),
        };
        let max_time = || budget.map_or_else(|| self.max_time(), ReadBudget::max_time);
        let now = Timestamp::now();
        if !self
            .any_lapsed_claim(tenant, now, max_time())
            .await
            .map_err(fail)?
        {
            let Some(fast) = ready_filter_without_lapsed_claims(query, now) else {
                return Ok(Page::empty());
            };
            filter = fast;
        }
        if let Some(cursor) = &query.cursor {
            let found = self
                .issues(tenant)
                .find_one(doc! { field::ID: cursor.as_str() })
                .projection(doc! { field::PRIORITY: 1, field::CREATED_AT: 1 })
                .max_time(max_time())
                .await
                .map_err(fail)?;
            let Some(doc) = found else {
                return Ok(Page::empty());
            };
            let bad = |name: &str| corrupt("issue", cursor.as_str(), format!("its {name}"));
            let urgency = doc
                .get_str(field::PRIORITY)
                .ok()
                .and_then(|p| Priority::parse(p).ok())
                .ok_or_else(|| bad(field::PRIORITY))?
                .urgency();
            let created_at = doc
                .get_datetime(field::CREATED_AT)
                .map(timestamp)
                .map_err(|_| bad(field::CREATED_AT))?;
            and_push(
                &mut filter,
                ready_after(urgency, created_at, cursor.as_str()),
            );
        }
        let limit = usize::try_from(query.limit).unwrap_or(usize::MAX);
        let mut cursor = self
            .issues(tenant)
            .find(filter)
            .sort(ready_sort())
            .projection(issue_projection())
            .limit(i64::from(query.limit) + 1)
            .max_time(max_time())
            .await
            .map_err(fail)?;
        page_within_comment_bytes(tenant, &mut cursor, limit, fail).await
    }

    /// The ids of the best [`CLAIM_NEXT_PAGE`] ready issues `filter`
    /// selects, in the ready order: the ready index alone.
    async fn ready_ids(
        &self,
        tenant: &TenantId,
        filter: Document,
        max_time: Duration,
    ) -> mongodb::error::Result<Vec<String>> {
        let best = self
            .issues(tenant)
            .find(filter)
            .sort(ready_sort())
            .limit(CLAIM_NEXT_PAGE)
            .projection(doc! { field::ID: 1 })
            .max_time(max_time)
            .await?;
        crate::codec::ids(best).await
    }

    /// `claim_next`: reads the ids of the best [`CLAIM_NEXT_PAGE`] ready
    /// issues (the ready index: open, unclaimed, no open blocker), then
    /// tries them one by one, each with one conditional `findOneAndUpdate`
    /// by `_id` with the ready conditions, until one is won: of racing
    /// claimants exactly one takes an issue, and a lost race costs one
    /// write, not a read. Alone (no other call of the tenant in this
    /// process, none lost yet), a call tries them in the ready order, so
    /// it takes the best; racing, it starts at an offset of its own in the
    /// page ([`claim_order`]) and passes over the issues this process's
    /// other calls are trying or just took, so racing claimants spread
    /// over the page instead of all aiming at its best. After
    /// [`CLAIM_NEXT_RUN`] lost races in a row (or the page's end) it reads
    /// again, at most [`CLAIM_NEXT_READS`] times. It answers "no ready
    /// work" only when a read finds no candidate.
    ///
    /// Not one sorted `findOneAndUpdate`: on a WiredTiger server, racing
    /// claimants of a sorted update all conflict on the best document, and
    /// each retry of the losers moves to the next best one together, so
    /// the conflicts (and the server's backoff) grew with every issue
    /// taken; 64 claimants on 1,000 issues ran past the 10 s bound.
    pub(crate) async fn next_claim(
        &self,
        tenant: &TenantId,
        query: &ListQuery,
        claimant: &Claimant,
        lane: &Lane,
        stage: bool,
    ) -> Result<(ClaimNext, Vec<StagedEvent>), StoreError> {
        let mut now = Timestamp::now();
        claimant.live_at(now)?;
        let mut ready = query.clone();
        ready.ready = true;
        ready.cursor = None;
        let max_time = self.max_time();
        let fail = |e: mongodb::error::Error| store_error(&e);
        let lapsed = self
            .lapsed_claims(tenant, now, max_time)
            .await
            .map_err(fail)?;
        let offset = per_call_offset(&claimant.run);
        let mut lost = 0u32;
        let mut announced = false;
        for _ in 0..CLAIM_NEXT_READS {
            now = Timestamp::now();
            let Some(filter) = Self::ready_filter(&ready, now, lapsed) else {
                let none = ClaimNext::no_ready_work(0, 0);
                return Ok((none, Vec::new()));
            };
            let ids = self
                .ready_ids(tenant, filter, max_time)
                .await
                .map_err(fail)?;
            if ids.is_empty() {
                let none = self.no_ready_work(tenant, query, now, max_time).await?;
                return Ok((none, Vec::new()));
            }
            // Alone and not yet beaten: the best first.
            let strict = lost == 0 && lane.alone();
            let order = lane.order(&ids, &claim_order(ids.len(), offset, strict));
            // Every try but a won one is a lost race: after a run of them,
            // read again.
            for pick in order.into_iter().take(CLAIM_NEXT_RUN) {
                lane.aim_at(pick);
                now = Timestamp::now();
                let id = IssueId::parse(pick).map_err(StoreError::from)?;
                let claim = claimant.claim_at(now);
                let staged = staged::when(stage, || staged::claimed(&id, &claim));
                let update = new_claim_write(&id, &claim, &claimant.author(), None);
                // The ready conditions on this one issue: of racing
                // claimants exactly one matches.
                let one = doc! {
                    field::ID: pick,
                    field::STATE: { "$nin": TERMINAL },
                    field::OPEN_BLOCKERS: 0_i64,
                    "$or": [
                        { field::CLAIM: Bson::Null },
                        { field::CLAIM_EXPIRES_AT: { "$lte": date(now) } },
                    ],
                };
                let take = self.update_issue_doc(tenant, one, with_staged(update, &staged));
                // Announced once, with the first write: every claim this call
                // may make ends no earlier than that one (`sweep.rs`).
                let taken = if announced {
                    take.await?
                } else {
                    announced = true;
                    self.announced(tenant, claim.expires_at, now, take).await?
                };
                // Taken either way: by this call, or by whoever won the race.
                lane.took(pick);
                if let Some(issue) = taken {
                    if lost > 0 {
                        tracing::debug!(tenant = %tenant, lost, "claim_next won after losing races");
                    }
                    // A claim ending before the horizon (its grant's expiry)
                    // moves the horizon.
                    self.set_lapse_horizon(tenant, Some(claim.expires_at), true);
                    let claimed = ClaimNext::Claimed {
                        issue: Box::new(issue),
                    };
                    return Ok((claimed, staged));
                }
                // Another claimant took it (or it changed): the next one.
                lost += 1;
            }
        }
        Err(StoreError::unavailable(format!(
            "claim_next lost the race for {lost} ready issues in {CLAIM_NEXT_READS} reads of \
             the best {CLAIM_NEXT_PAGE}; retry"
        )))
    }

    /// "No ready work" for `query`: how many of the open issues it
    /// matches are claimed (a live claim), and how many unclaimed but
    /// blocked (`open_blockers` above 0), each one count of an index range
    /// stopped past [`queue_limits::STATS_COUNT_CAP`].
    async fn no_ready_work(
        &self,
        tenant: &TenantId,
        query: &ListQuery,
        now: Timestamp,
        max_time: Duration,
    ) -> Result<ClaimNext, StoreError> {
        let fail = |e: mongodb::error::Error| store_error(&e);
        let mut open = query.clone();
        open.ready = false;
        open.cursor = None;
        open.claim = ClaimFilter::Any;
        open.states = IssueState::ALL
            .into_iter()
            .filter(|s| !s.is_terminal())
            .filter(|s| query.states.is_empty() || query.states.contains(s))
            .collect();
        let count = |filter: Option<Document>, extra: Document| async move {
            match filter {
                Some(mut filter) => {
                    and_push(&mut filter, extra);
                    // Up to one more than the cap: a poll of an empty
                    // queue reads a bounded range however large the board.
                    self.issues(tenant)
                        .count_documents(filter)
                        .limit(queue_limits::STATS_COUNT_CAP + 1)
                        .max_time(max_time)
                        .await
                        .map_err(fail)
                }
                None => Ok(0),
            }
        };
        let claimed = count(
            list_filter_at(&open, now),
            doc! { field::CLAIM_EXPIRES_AT: { "$gt": date(now) } },
        )
        .await?;
        open.claim = ClaimFilter::Unclaimed;
        let blocked = count(
            list_filter_at(&open, now),
            doc! { field::OPEN_BLOCKERS: { "$gt": 0_i64 } },
        )
        .await?;
        Ok(ClaimNext::no_ready_work(claimed, blocked))
    }

    /// `board_stats`, each count bounded by
    /// [`queue_limits::STATS_COUNT_CAP`] (a count stopped there is marked
    /// in `at_least`): per state, a count of the state index's range; per
    /// priority and per label, grouped over the first `STATS_COUNT_CAP`
    /// open issues of the state index (exact on a board with fewer open
    /// issues); claimed and stale along the claim-end index; blocked and
    /// (when not derived) ready as ranges of the ready index.
    ///
    /// Not counters kept by the writes: without multi-document
    /// transactions, a counter document and the issue a write changes
    /// cannot move together, and a writer dying between the two would
    /// leave a count wrong for good.
    pub(crate) async fn stats(
        &self,
        tenant: &TenantId,
        stale_until: Timestamp,
        budget: &ReadBudget,
    ) -> Result<BoardStats, StoreError> {
        let fail = |e: mongodb::error::Error| budget.error(&e);
        let now = Timestamp::now();
        let cap = queue_limits::STATS_COUNT_CAP;
        let open_states: Vec<&str> = IssueState::ALL
            .into_iter()
            .filter(|s| !s.is_terminal())
            .map(IssueState::as_str)
            .collect();
        let open = doc! { field::STATE: { "$in": open_states } };
        let mut stats = BoardStats::default();
        // Counts what `filter` selects, up to one more than the cap.
        let count = |filter: Document| async move {
            self.issues(tenant)
                .count_documents(filter)
                .limit(cap + 1)
                .max_time(budget.max_time())
                .await
        };
        for state in IssueState::ALL {
            let n = count(doc! { field::STATE: state.as_str() })
                .await
                .map_err(fail)?;
            if n > 0 {
                let n = stats.capped(StatsPart::States, n);
                stats.by_state.insert(state, n);
            }
        }
        stats.finish();
        let grouped = |key: &str, tail: Vec<Document>| {
            let mut pipeline = vec![
                doc! { "$match": open.clone() },
                doc! { "$limit": i64::try_from(cap).unwrap_or(i64::MAX) },
            ];
            pipeline.extend(tail);
            pipeline.push(doc! { "$group": { "_id": format!("${key}"), "n": { "$sum": 1 } } });
            pipeline
        };
        let counts = |docs: Vec<Document>| -> Vec<(String, u64)> {
            docs.into_iter()
                .filter_map(|d| {
                    let key = d.get_str("_id").ok()?.to_owned();
                    let n = match d.get("n") {
                        Some(Bson::Int32(n)) => u64::try_from(*n).ok()?,
                        Some(Bson::Int64(n)) => u64::try_from(*n).ok()?,
                        _ => return None,
                    };
                    Some((key, n))
                })
                .collect()
        };
        let run = |pipeline: Vec<Document>| async move {
            let mut cursor = self
                .issues(tenant)
                .aggregate(pipeline)
                .max_time(budget.max_time())
                .await?;
            let mut out = Vec::new();
            while cursor.advance().await? {
                out.push(cursor.deserialize_current()?);
            }
            mongodb::error::Result::Ok(out)
        };
        for (priority, n) in counts(
            run(grouped(field::PRIORITY, Vec::new()))
                .await
                .map_err(fail)?,
        ) {
            if let Ok(priority) = Priority::parse(&priority) {
                stats.by_priority.insert(priority, n);
            }
        }
        let by_label = grouped(
            field::LABELS,
            vec![
                doc! { "$project": { field::LABELS: 1 } },
                doc! { "$unwind": format!("${}", field::LABELS) },
            ],
        );
        stats.set_labels(
            counts(run(by_label).await.map_err(fail)?)
                .into_iter()
                .map(|(label, issues)| LabelCount { label, issues })
                .collect(),
        );
        if stats.open >= cap || stats.at_least.contains(&StatsPart::States) {
            // The first `cap` open issues were grouped, of more.
            stats.at_least.insert(StatsPart::Priorities);
            stats.at_least.insert(StatsPart::Labels);
        }
        let open_and = |extra: Document| {
            let mut filter = open.clone();
            filter.extend(extra);
            filter
        };
        let claimed = count(open_and(
            doc! { field::CLAIM_EXPIRES_AT: { "$gt": date(now) } },
        ))
        .await
        .map_err(fail)?;
        stats.claimed = stats.capped(StatsPart::Claimed, claimed);
        let stale = count(open_and(
            doc! { field::CLAIM_EXPIRES_AT: { "$lte": date(stale_until) } },
        ))
        .await
        .map_err(fail)?;
        stats.stale = stats.capped(StatsPart::Stale, stale);
        // Unclaimed: one range of the ready index when no stored claim has
        // lapsed.
        let lapsed = self
            .any_lapsed_claim(tenant, now, budget.max_time())
            .await
            .map_err(fail)?;
        let unclaimed = |blockers: Document| {
            let mut filter = open_and(blockers);
            if lapsed {
                filter.insert(
                    "$or",
                    vec![
                        doc! { field::CLAIM: Bson::Null },
                        doc! { field::CLAIM_EXPIRES_AT: { "$lte": date(now) } },
                    ],
                );
            } else {
                filter.insert(field::CLAIM_RUN, Bson::Null);
            }
            filter
        };
        let blocked = count(unclaimed(doc! { field::OPEN_BLOCKERS: { "$gt": 0_i64 } }))
            .await
            .map_err(fail)?;
        stats.blocked = stats.capped(StatsPart::Blocked, blocked);
        if !stats.derive_ready() {
            let ready = count(unclaimed(doc! { field::OPEN_BLOCKERS: 0_i64 }))
                .await
                .map_err(fail)?;
            stats.ready = stats.capped(StatsPart::Ready, ready);
        }
        Ok(stats)
    }

    /// An issue's changes before version `before`, newest first: its
    /// document's `history`, read with its version only.
    pub(crate) async fn changes_of_issue(
        &self,
        tenant: &TenantId,
        id: &IssueId,
        before: Option<u64>,
        limit: u32,
    ) -> Result<HistoryPage, StoreError> {
        let found = self
            .issues(tenant)
            .find_one(doc! { field::ID: id.as_str() })
            .projection(doc! { field::ID: 1, field::VERSION: 1, field::HISTORY: 1 })
            .max_time(self.max_time())
            .await
            .map_err(|e| store_error(&e))?;
        let mut changes = match found {
            Some(doc) => changes_of(&doc)?,
            None => Vec::new(),
        };
        changes.retain(|c| before.is_none_or(|b| c.version < b));
        changes.reverse();
        changes.truncate(usize::try_from(limit).unwrap_or(usize::MAX) + 1);
        Ok(HistoryPage::cut(changes, limit, |c| {
            i64::try_from(c.version).unwrap_or(i64::MAX)
        }))
    }

    /// What `run` changed before the instant `before`, newest first: the
    /// changes of the issues it changed most recently (the multikey index
    /// on each change's run finds them; at most [`RUN_HISTORY_ISSUES`]
    /// issues are read).
    pub(crate) async fn changes_of_run(
        &self,
        tenant: &TenantId,
        run: &RunId,
        before: Option<Timestamp>,
        limit: u32,
    ) -> Result<HistoryPage, StoreError> {
        let mut cursor = self
            .issues(tenant)
            .find(doc! { field::HISTORY_RUN: run.as_str() })
            .projection(doc! { field::ID: 1, field::VERSION: 1, field::HISTORY: 1 })
            .sort(doc! { field::UPDATED_AT: -1 })
            .limit(RUN_HISTORY_ISSUES)
            .max_time(self.max_time())
            .await
            .map_err(|e| store_error(&e))?;
        let mut changes = Vec::new();
        while cursor.advance().await.map_err(|e| store_error(&e))? {
            let doc = cursor.deserialize_current().map_err(|e| store_error(&e))?;
            changes.extend(
                changes_of(&doc)?
                    .into_iter()
                    .filter(|c| &c.by.run == run && before.is_none_or(|b| c.at < b)),
            );
        }
        changes.sort_by(|a, b| b.at.cmp(&a.at).then(b.version.cmp(&a.version)));
        changes.truncate(usize::try_from(limit).unwrap_or(usize::MAX) + 1);
        Ok(HistoryPage::cut(changes, limit, |c| c.at.as_millis()))
    }
}

/// Issues a run's history reads at most on MongoDB (its most recently
/// changed): the bound on one page's cost.
const RUN_HISTORY_ISSUES: i64 = 500;
