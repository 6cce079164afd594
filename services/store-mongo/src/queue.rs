//! The work queue on MongoDB: ready work in the ready order, and
//! `claim_next`. A find cannot join an issue to its blockers, so ready
//! candidates (open, no live claim, matching the filters) come from the
//! ready index in order, a chunk at a time, and each chunk's blockers are
//! read in one `$in` query on `_id`; the blocked ones are dropped. A
//! claim is one `findOneAndUpdate` on a candidate with the "still open and
//! unclaimed" filter; a claimant that loses it takes the next candidate.

use crate::codec::{changes_of, claim_write, date, field, issue_from_doc, raw_claim};
use crate::error::store_error;
use crate::issues::system_author;
use crate::query::{
    TERMINAL, list_filter_at, ready_after, ready_filter_without_lapsed_claims, ready_sort,
};
use crate::schema;
use crate::store::{Lane, MongoStore, ReadBudget};
use corkboard_board::webhook::{self, WebhookEvent};
use corkboard_board::{
    BoardStats, Change, ChangeKind, ClaimFilter, ClaimNext, Claimant, ExpiredClaim, HistoryPage,
    Issue, IssueId, IssueState, LabelCount, ListQuery, Page, Priority, RunId, StoreError, TenantId,
    Timestamp, is_ready,
};
use mongodb::Cursor;
use mongodb::bson::{Bson, Document, doc};
use mongodb::options::ReturnDocument;
use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

/// Candidates read per chunk, and per blockers' `$in` query.
const READY_CHUNK: usize = 100;

/// How often `claim_next` reads again after losing a candidate to a racing
/// claimant; then it is unavailable (retryable). Every lost race is an
/// issue another claimant took, so the board drains however often one call
/// loses; what bounds a call is its time (the store's write bound). 64
/// was reached by one of 64 claimants on a 1,000-issue board on a loaded
/// machine (the contract race), one call losing 43 to 51 times in a run.
const CLAIM_NEXT_ATTEMPTS: u32 = 256;

/// How many of the best candidates a claimant that lost one spreads over.
const CLAIM_NEXT_SPREAD: i64 = 32;

/// Which of `n` candidates `run`'s `attempt` tries: the best at first,
/// then one spread by the run and the attempt.
fn spread_pick(run: &RunId, attempt: u32, n: usize) -> usize {
    if attempt == 0 || n <= 1 {
        return 0;
    }
    crate::store::slot_of((run.as_str(), attempt), n)
}

/// A walk over ready candidates in the ready order.
struct ReadyScan {
    cursor: Cursor<Document>,
    /// Candidates seen that an open blocker held back.
    blocked: u64,
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
        let earliest = self
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
                    .map(|at| Timestamp::from_millis(at.timestamp_millis()))
            });
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

    /// The filter of `ready` (a ready query) at `now`: without lapsed
    /// claims on the board, the one the ready index answers as points.
    fn ready_filter(ready: &ListQuery, now: Timestamp, lapsed: bool) -> Option<Document> {
        if lapsed {
            list_filter_at(ready, now)
        } else {
            ready_filter_without_lapsed_claims(ready, now)
        }
    }

    async fn ready_scan(
        &self,
        tenant: &TenantId,
        filter: Document,
        max_time: Duration,
    ) -> mongodb::error::Result<ReadyScan> {
        let cursor = self
            .issues(tenant)
            .find(filter)
            .sort(ready_sort())
            .batch_size(READY_CHUNK as u32)
            .max_time(max_time)
            .await?;
        Ok(ReadyScan { cursor, blocked: 0 })
    }

    /// The next chunk of ready issues (blocked ones dropped and counted),
    /// or `None` when the candidates are exhausted.
    async fn ready_chunk(
        &self,
        tenant: &TenantId,
        scan: &mut ReadyScan,
        max_time: Duration,
    ) -> mongodb::error::Result<Option<Result<Vec<Issue>, StoreError>>> {
        let mut candidates = Vec::new();
        while candidates.len() < READY_CHUNK && scan.cursor.advance().await? {
            let doc = scan.cursor.deserialize_current()?;
            match issue_from_doc(tenant, &doc) {
                Ok(issue) => candidates.push(issue),
                Err(err) => return Ok(Some(Err(err))),
            }
        }
        if candidates.is_empty() {
            return Ok(None);
        }
        let blockers: BTreeSet<&str> = candidates
            .iter()
            .flat_map(|i| i.blocked_by.iter().map(|b| b.as_str()))
            .collect();
        let open: HashSet<String> = self
            .open_among(tenant, blockers, max_time)
            .await?
            .into_iter()
            .collect();
        let before = candidates.len();
        candidates.retain(|issue| is_ready(issue, |id| open.contains(id.as_str())));
        scan.blocked += (before - candidates.len()) as u64;
        Ok(Some(Ok(candidates)))
    }

    /// One page of ready work (`query.ready`; `filter` is the query's).
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
                return Ok(Page {
                    issues: Vec::new(),
                    next_cursor: None,
                });
            };
            filter = fast;
        }
        if let Some(cursor) = &query.cursor {
            let found = self
                .issues(tenant)
                .find_one(doc! { field::ID: cursor.as_str() })
                .max_time(max_time())
                .await
                .map_err(fail)?;
            let Some(doc) = found else {
                return Ok(Page {
                    issues: Vec::new(),
                    next_cursor: None,
                });
            };
            let after = issue_from_doc(tenant, &doc)?;
            and_push(
                &mut filter,
                ready_after(after.priority.urgency(), after.created_at, cursor.as_str()),
            );
        }
        let limit = usize::try_from(query.limit).unwrap_or(usize::MAX);
        let mut scan = self
            .ready_scan(tenant, filter, max_time())
            .await
            .map_err(fail)?;
        let mut issues = Vec::new();
        while issues.len() <= limit {
            match self
                .ready_chunk(tenant, &mut scan, max_time())
                .await
                .map_err(fail)?
            {
                Some(chunk) => issues.extend(chunk?),
                None => break,
            }
        }
        let next_cursor = if issues.len() > limit {
            issues.truncate(limit);
            issues.last().map(|i| i.id.clone())
        } else {
            None
        };
        Ok(Page {
            issues,
            next_cursor,
        })
    }

    /// The open issues that the candidates `filter` selects name as
    /// blockers: what keeps a candidate from being ready. Reads the
    /// candidates that name any blocker (their `blocked_by` only), then
    /// which of those blockers are open, in one `$in` on `_id`.
    async fn open_blockers(
        &self,
        tenant: &TenantId,
        filter: &Document,
        max_time: Duration,
    ) -> mongodb::error::Result<Vec<String>> {
        let mut named = filter.clone();
        named.insert(format!("{}.0", field::BLOCKED_BY), doc! { "$exists": true });
        let mut cursor = self
            .issues(tenant)
            .find(named)
            .projection(doc! { field::BLOCKED_BY: 1 })
            .max_time(max_time)
            .await?;
        let mut named_ids = BTreeSet::new();
        while cursor.advance().await? {
            let doc = cursor.deserialize_current()?;
            if let Ok(ids) = doc.get_array(field::BLOCKED_BY) {
                named_ids.extend(ids.iter().filter_map(|b| b.as_str().map(str::to_owned)));
            }
        }
        self.open_among(
            tenant,
            named_ids.iter().map(String::as_str).collect(),
            max_time,
        )
        .await
    }

    /// The best [`CLAIM_NEXT_SPREAD`] candidates `filter` selects in the
    /// ready order: their ids and the blockers they name.
    async fn best_candidates(
        &self,
        tenant: &TenantId,
        filter: Document,
        max_time: Duration,
    ) -> mongodb::error::Result<Vec<(String, Vec<String>)>> {
        let mut best = self
            .issues(tenant)
            .find(filter)
            .sort(ready_sort())
            .limit(CLAIM_NEXT_SPREAD)
            .projection(doc! { field::ID: 1, field::BLOCKED_BY: 1 })
            .max_time(max_time)
            .await?;
        let mut out = Vec::new();
        while best.advance().await? {
            let doc = best.current();
            let Ok(id) = doc.get_str(field::ID) else {
                continue;
            };
            let blockers = doc
                .get_array(field::BLOCKED_BY)
                .map(|ids| {
                    ids.into_iter()
                        .filter_map(|b| b.ok().and_then(|b| b.as_str()).map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            out.push((id.to_owned(), blockers));
        }
        Ok(out)
    }

    /// Which of `ids` are open issues, in one `$in` on `_id`.
    async fn open_among(
        &self,
        tenant: &TenantId,
        ids: BTreeSet<&str>,
        max_time: Duration,
    ) -> mongodb::error::Result<Vec<String>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut found = self
            .issues(tenant)
            .find(doc! {
                field::ID: { "$in": ids.into_iter().collect::<Vec<_>>() },
                field::STATE: { "$nin": TERMINAL },
            })
            .projection(doc! { field::ID: 1 })
            .max_time(max_time)
            .await?;
        let mut open = Vec::new();
        while found.advance().await? {
            if let Ok(id) = found.current().get_str(field::ID) {
                open.push(id.to_owned());
            }
        }
        Ok(open)
    }

    /// `claim_next`: the best ready candidates (the best
    /// [`CLAIM_NEXT_SPREAD`] with their blockers checked in one `$in`; only
    /// when those are all blocked, every open blocker read and the blocked
    /// left out in the query), then one conditional `findOneAndUpdate` on
    /// one of them by `_id` with the ready conditions: of racing claimants
    /// exactly one takes it. The first try takes the best; a claimant that
    /// lost reads again and tries one of the best [`CLAIM_NEXT_SPREAD`]
    /// picked by its run and attempt, so racing claimants spread over the
    /// top of the queue instead of all losing the same issue again. It
    /// answers "no ready work" only when a read finds no candidate.
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
    ) -> Result<ClaimNext, StoreError> {
        let mut now = Timestamp::now();
        claimant.live_at(now)?;
        let mut ready = query.clone();
        ready.ready = true;
        ready.cursor = None;
        let max_time = self.max_time();
        let fail = |e: mongodb::error::Error| store_error(&e);
        // The open blockers of every candidate: read only when the best
        // candidates are all blocked (reading them costs a pass over every
        // candidate that names a blocker), then once per call.
        let mut open: Option<Vec<String>> = None;
        let lapsed = self
            .lapsed_claims(tenant, now, max_time)
            .await
            .map_err(fail)?;
        let (mut blocked, mut settled) = (0, false);
        for attempt in 0..CLAIM_NEXT_ATTEMPTS {
            now = Timestamp::now();
            let Some(base) = Self::ready_filter(&ready, now, lapsed) else {
                return Ok(ClaimNext::NoReadyWork {
                    claimed: 0,
                    blocked: 0,
                });
            };
            let candidates = match &open {
                None => self.best_candidates(tenant, base.clone(), max_time).await,
                Some(open) => {
                    let mut filter = base.clone();
                    if !open.is_empty() {
                        and_push(
                            &mut filter,
                            doc! { field::BLOCKED_BY: { "$nin": open.clone() } },
                        );
                    }
                    self.best_candidates(tenant, filter, max_time).await
                }
            }
            .map_err(fail)?;
            if candidates.is_empty() {
                settled = true;
                blocked = match &open {
                    // No candidate at all: none is blocked either.
                    None => 0,
                    Some(open) if open.is_empty() => 0,
                    Some(open) => {
                        let mut blocked_filter = base;
                        and_push(
                            &mut blocked_filter,
                            doc! { field::BLOCKED_BY: { "$in": open.clone() } },
                        );
                        self.issues(tenant)
                            .count_documents(blocked_filter)
                            .max_time(max_time)
                            .await
                            .map_err(fail)?
                    }
                };
                break;
            }
            // Which blockers of these candidates are open: all of them
            // once read, else those of the candidates, in one `$in`.
            let open_here: Vec<String> = match &open {
                Some(open) => open.clone(),
                None => {
                    let named: BTreeSet<&str> = candidates
                        .iter()
                        .flat_map(|(_, blockers)| blockers.iter().map(String::as_str))
                        .collect();
                    self.open_among(tenant, named, max_time)
                        .await
                        .map_err(fail)?
                }
            };
            let ready_ids: Vec<&str> = candidates
                .iter()
                .filter(|(_, blockers)| blockers.iter().all(|b| !open_here.contains(b)))
                .map(|(id, _)| id.as_str())
                .collect();
            if ready_ids.is_empty() {
                // The best are all blocked: read every open blocker once,
                // and leave the blocked candidates out in the query.
                open = Some(match list_filter_at(&ready, now) {
                    Some(filter) => self
                        .open_blockers(tenant, &filter, max_time)
                        .await
                        .map_err(fail)?,
                    None => Vec::new(),
                });
                continue;
            }
            // The best one no other lane of this process is trying (so
            // they do not collide); when they try them all, one spread by
            // run and attempt.
            let pick = lane
                .aim(&ready_ids)
                .unwrap_or_else(|| ready_ids[spread_pick(&claimant.run, attempt, ready_ids.len())]);
            let id = IssueId::parse(pick).map_err(StoreError::from)?;
            let claim = claimant.claim_at(now);
            let update = claim_write(
                Some(&claim),
                &Change::claim(
                    ChangeKind::Claimed,
                    &id,
                    0,
                    now,
                    &claimant.author(),
                    None,
                    Some(&claim),
                ),
            );
            // The ready conditions on this one issue (its blockers as
            // read): of racing claimants exactly one matches.
            let mut one = doc! {
                field::ID: pick,
                field::STATE: { "$nin": TERMINAL },
                "$or": [
                    { field::CLAIM: Bson::Null },
                    { field::CLAIM_EXPIRES_AT: { "$lte": date(now) } },
                ],
            };
            if !open_here.is_empty() {
                one.insert(field::BLOCKED_BY, doc! { "$nin": open_here });
            }
            let taken = self.update_issue_doc(tenant, one, update).await?;
            // Taken either way: by this call, or by whoever won the race.
            lane.took(pick);
            if let Some(issue) = taken {
                // A claim ending before the horizon (its grant's expiry)
                // moves the horizon.
                self.set_lapse_horizon(tenant, Some(claim.expires_at), true);
                return Ok(ClaimNext::Claimed {
                    issue: Box::new(issue),
                });
            }
            // Another claimant took it: read again.
        }
        if !settled {
            return Err(StoreError::unavailable(format!(
                "claim_next kept losing races for ready work {CLAIM_NEXT_ATTEMPTS} times; retry"
            )));
        }
        let mut open = query.clone();
        open.ready = false;
        open.cursor = None;
        open.claim = ClaimFilter::Any;
        open.states = IssueState::ALL
            .into_iter()
            .filter(|s| !s.is_terminal())
            .filter(|s| query.states.is_empty() || query.states.contains(s))
            .collect();
        let claimed = match list_filter_at(&open, now) {
            Some(mut filter) => {
                and_push(
                    &mut filter,
                    doc! { field::CLAIM_EXPIRES_AT: { "$gt": date(now) } },
                );
                self.issues(tenant)
                    .count_documents(filter)
                    .max_time(max_time)
                    .await
                    .map_err(fail)?
            }
            None => 0,
        };
        Ok(ClaimNext::NoReadyWork { claimed, blocked })
    }

    /// `expire_claims`: each tenant's claims whose end passed, oldest end
    /// first, each cleared by one update matching that very claim (so a
    /// renewal or a new claim made meanwhile is never cleared, and of
    /// racing sweepers one clears it), then announced.
    pub(crate) async fn sweep_expired(
        &self,
        now: Timestamp,
        limit: u32,
    ) -> Result<Vec<ExpiredClaim>, StoreError> {
        let names = self
            .database()
            .list_collection_names()
            .await
            .map_err(|e| store_error(&e))?;
        let mut out = Vec::new();
        for tenant in schema::tenants_of(&names) {
            let left = i64::from(limit) - out.len() as i64;
            if left <= 0 {
                break;
            }
            let mut ended = self
                .issues(&tenant)
                .find(doc! { field::CLAIM_EXPIRES_AT: { "$lte": date(now) } })
                .sort(doc! { field::CLAIM_EXPIRES_AT: 1 })
                .limit(left)
                .max_time(self.max_time())
                .await
                .map_err(|e| store_error(&e))?;
            let mut found = Vec::new();
            while ended.advance().await.map_err(|e| store_error(&e))? {
                let doc = ended.deserialize_current().map_err(|e| store_error(&e))?;
                if let (Ok(id), Some(claim)) = (doc.get_str(field::ID), raw_claim(&doc)?) {
                    found.push((id.to_owned(), claim));
                }
            }
            for (id, claim) in found {
                let cleared = self
                    .issues(&tenant)
                    .find_one_and_update(
                        doc! {
                            field::ID: id.as_str(),
                            field::CLAIM_RUN: claim.run.as_str(),
                            field::CLAIM_GRANT: claim.grant.as_str(),
                            field::CLAIM_EXPIRES_AT: date(claim.expires_at),
                        },
                        claim_write(
                            None,
                            &Change::claim(
                                ChangeKind::ClaimExpired,
                                &IssueId::parse(id.as_str()).map_err(StoreError::from)?,
                                0,
                                now,
                                &system_author(),
                                Some(&claim),
                                None,
                            ),
                        ),
                    )
                    .return_document(ReturnDocument::After)
                    .max_time(self.max_time())
                    .await
                    .map_err(|e| store_error(&e))?;
                let Some(doc) = cleared else { continue };
                let issue = issue_from_doc(&tenant, &doc)?;
                let mut data = webhook::issue_summary(&issue);
                data["claim"] = serde_json::json!(claim);
                self.queue_after(&tenant, WebhookEvent::IssueClaimExpired, data)
                    .await;
                out.push(ExpiredClaim {
                    tenant: tenant.clone(),
                    issue: issue.id,
                    version: issue.version,
                    claim,
                });
            }
        }
        Ok(out)
    }

    /// `board_stats`: grouped counts on the server (aggregations by state,
    /// priority and label; index-bound counts of claims), and the blocked
    /// count from the open unclaimed issues that name blockers, whose
    /// blockers are looked up a chunk at a time.
    pub(crate) async fn stats(
        &self,
        tenant: &TenantId,
        stale_until: Timestamp,
        budget: &ReadBudget,
    ) -> Result<BoardStats, StoreError> {
        let fail = |e: mongodb::error::Error| budget.error(&e);
        let now = Timestamp::now();
        let open_states: Vec<&str> = IssueState::ALL
            .into_iter()
            .filter(|s| !s.is_terminal())
            .map(IssueState::as_str)
            .collect();
        let open = doc! { field::STATE: { "$in": open_states } };
        let mut stats = BoardStats::default();
        let grouped = |key: &str, pre: Vec<Document>| {
            let mut pipeline = pre;
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
        for (state, n) in counts(run(grouped(field::STATE, Vec::new())).await.map_err(fail)?) {
            if let Ok(state) = IssueState::parse(&state) {
                stats.by_state.insert(state, n);
            }
        }
        let by_priority = grouped(field::PRIORITY, vec![doc! { "$match": open.clone() }]);
        for (priority, n) in counts(run(by_priority).await.map_err(fail)?) {
            if let Ok(priority) = Priority::parse(&priority) {
                stats.by_priority.insert(priority, n);
            }
        }
        let by_label = grouped(
            field::LABELS,
            vec![
                doc! { "$match": open.clone() },
                doc! { "$unwind": format!("${}", field::LABELS) },
            ],
        );
        stats.set_labels(
            counts(run(by_label).await.map_err(fail)?)
                .into_iter()
                .map(|(label, issues)| LabelCount { label, issues })
                .collect(),
        );
        let count = |extra: Document| {
            let mut filter = open.clone();
            filter.extend(extra);
            async move {
                self.issues(tenant)
                    .count_documents(filter)
                    .max_time(budget.max_time())
                    .await
            }
        };
        stats.claimed = count(doc! { field::CLAIM_EXPIRES_AT: { "$gt": date(now) } })
            .await
            .map_err(fail)?;
        stats.stale = count(doc! { field::CLAIM_EXPIRES_AT: { "$lte": date(stale_until) } })
            .await
            .map_err(fail)?;
        // Open, unclaimed, naming a blocker: is one of them open?
        let mut named = open.clone();
        named.insert(format!("{}.0", field::BLOCKED_BY), doc! { "$exists": true });
        named.insert(
            "$or",
            vec![
                doc! { field::CLAIM: Bson::Null },
                doc! { field::CLAIM_EXPIRES_AT: { "$lte": date(now) } },
            ],
        );
        let mut cursor = self
            .issues(tenant)
            .find(named)
            .projection(doc! { field::BLOCKED_BY: 1 })
            .batch_size(READY_CHUNK as u32)
            .max_time(budget.max_time())
            .await
            .map_err(fail)?;
        loop {
            let mut chunk: Vec<Vec<String>> = Vec::new();
            while chunk.len() < READY_CHUNK && cursor.advance().await.map_err(fail)? {
                let doc = cursor.deserialize_current().map_err(fail)?;
                let blockers = doc
                    .get_array(field::BLOCKED_BY)
                    .map(|ids| {
                        ids.iter()
                            .filter_map(|b| b.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default();
                chunk.push(blockers);
            }
            if chunk.is_empty() {
                break;
            }
            let ids: BTreeSet<&str> = chunk.iter().flatten().map(String::as_str).collect();
            let mut found = self
                .issues(tenant)
                .find(doc! {
                    field::ID: { "$in": ids.into_iter().collect::<Vec<_>>() },
                    field::STATE: { "$nin": TERMINAL },
                })
                .projection(doc! { field::ID: 1 })
                .max_time(budget.max_time())
                .await
                .map_err(fail)?;
            let mut open_ids = HashSet::new();
            while found.advance().await.map_err(fail)? {
                if let Ok(id) = found.current().get_str(field::ID) {
                    open_ids.insert(id.to_owned());
                }
            }
            stats.blocked += chunk
                .iter()
                .filter(|blockers| blockers.iter().any(|b| open_ids.contains(b)))
                .count() as u64;
        }
        stats.finish();
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
