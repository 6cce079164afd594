//! Issues and comments: every write is one single-document atomic operation.
//!
//! # Idempotent creation
//!
//! Racing requests with one key are decided by the unique index of the
//! idempotency collection, never by what an upsert returns (a server may
//! answer a racing `findOneAndUpdate` + upsert with no document):
//!
//! 1. The issue is built in memory with a fresh id, and a record holding the
//!    request's fingerprint and the *whole issue document* is inserted.
//! 2. The caller whose record went in inserts the issue and answers it.
//! 3. Every other caller gets a duplicate-key error (11000), reads the
//!    winner's record and compares fingerprints (a different request under
//!    the key is a conflict). If the issue is not there yet (the winner is
//!    between steps 1 and 2, or died there) it inserts it from the record
//!    itself, ignoring a duplicate-key error from a racing insert of the
//!    same id. All of them answer the one issue.
//!
//! Crash windows: before step 1 nothing happened; between 1 and 2 the
//! caller got an error (the write may or may not have happened), and the
//! next replay of the key completes the insert from the record, with the
//! id fixed at step 1, so no duplicate is ever made and nothing
//! acknowledged is lost. Comments follow the same steps, with a `$push`
//! guarded by "this comment id is not there yet" instead of the insert.

use crate::codec::{
    blockers_set, claim_write, comment_doc, comment_from_doc, date, field, history_push,
    issue_from_doc, issue_integrity, issue_projection, issue_set, issue_terms, new_claim_write,
    patch_set, raw_claim, recount_token, terms_bson, timestamp, to_i64,
};
use crate::error::{corrupt, is_duplicate_key, store_error};
use crate::query::{list_filter, search_filter, similar_filter};
use crate::schema::idem_field;
use crate::staged::{self, StagedEvent, created_doc_staged, with_staged};
use crate::store::{MongoStore, ReadBudget};
use async_trait::async_trait;
use corkboard_board::webhook;
use corkboard_board::{
    Author, Change, ChangeKind, ClaimCheck, ClaimNext, Claimant, Comment, CommentAdded,
    CommentFacts, CommentId, CommentWindow, CreateOutcome, Created, FieldChange, GrantLedger,
    HistoryPage, IdempotencyKey, Issue, IssueId, IssuePatch, IssueState, IssueStore, IssueView,
    ListQuery, MONGO_CANDIDATES_MAX, NewComment, NewIssue, Page, PageCommentBytes, ParentChain,
    ReadCost, RunId, SearchPage, SearchQuery, SimilarIssue, SimilarRanking, StoreError, TenantId,
    Timestamp, Title, ValidationError, ViewSince, check_hand_over, check_release, limits,
    rank_order, relation_limits, run_author,
};
use mongodb::bson::{Bson, Document, doc};
use mongodb::options::ReturnDocument;
use std::collections::HashMap;
use std::time::Duration;

/// Fields the comment window read computes on the issue document (see
/// `find_issue_window`); no stored field has these names.
const WINDOW_TOTAL: &str = "cb_window_total";
const WINDOW_END: &str = "cb_window_end";
const WINDOW_TAKEN: &str = "cb_window_taken";

/// What kind of request an idempotency record belongs to: one key may be
/// used once for an issue and once for a comment.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Issue,
    Comment,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Self::Issue => "issue",
            Self::Comment => "comment",
        }
    }
}

/// The filter of the idempotency record of (run, key, kind): the fields
/// of its unique index.
fn key_record(run: &RunId, key: &IdempotencyKey, kind: Kind) -> Document {
    doc! {
        idem_field::RUN: run.as_str(),
        idem_field::KEY: key.as_str(),
        idem_field::KIND: kind.as_str(),
    }
}

/// How often a read that must see a document another writer has just
/// written is tried again, and how long apart. With majority reads, a
/// record whose insert already made our insert fail can take a moment to
/// become visible on a replica set; on one node it is visible at once.
const VISIBILITY_ATTEMPTS: u32 = 40;
const VISIBILITY_PAUSE: Duration = Duration::from_millis(25);

/// How often a conditional update that matched nothing, although a read
/// says it should have, is tried again before the store gives up.
const UPDATE_ATTEMPTS: u32 = 5;

/// How often an update that must read the issue first (a lifecycle or
/// relation change, a claim) retries its compare-and-swap when another
/// writer changed the issue in between. Each lost round means another
/// writer won one, so this bounds the wait under a burst of that many.
const CAS_ATTEMPTS: u32 = 64;

/// Who a change nobody asked for is recorded as (a claim that ended by
/// itself or with its grant): the board itself, run `corkboard`.
pub(crate) fn system_author() -> Author {
    corkboard_board::run_author(&RunId::parse("corkboard").expect("a valid run id"))
}

/// Issues an issue's view reads its relations of both kinds in one query
/// for ([`MongoStore::children_and_blocks`]): the two lists' bound, so
/// that an answer under it holds every related issue.
const RELATED_AT_ONCE: i64 = 2 * (relation_limits::INVERSE_MAX as i64 + 1);

/// The id of a stored issue document (of a projection holding it).
fn stored_issue_id(doc: &Document) -> Result<IssueId, StoreError> {
    IssueId::parse(doc.get_str(field::ID).unwrap_or_default())
        .map_err(|e| StoreError::Internal(format!("a stored issue id is invalid: {e}")))
}

/// The projected field that holds an issue's comment bytes
/// ([`comment_bytes_expr`]).
const COMMENT_BYTES: &str = "comment_bytes";

/// The bytes of an issue's comment bodies, added up by the server: what
/// [`PageCommentBytes::hold_issue`] counts, without reading the comments.
fn comment_bytes_expr() -> Document {
    doc! {
        "$reduce": {
            "input": { "$ifNull": [format!("${}", field::COMMENTS), []] },
            "initialValue": 0,
            "in": { "$add": ["$$value", { "$strLenBytes": "$$this.body" }] },
        }
    }
}

fn issue_not_found(id: &IssueId) -> StoreError {
    StoreError::not_found(format!("issue {id}"))
}

impl MongoStore {
    /// Whether `id` exists in `tenant`'s collection, and its parent.
    async fn parent_of(
        &self,
        tenant: &TenantId,
        id: &IssueId,
    ) -> Result<Option<Option<IssueId>>, StoreError> {
        let found = self
            .issues(tenant)
            .find_one(doc! { field::ID: id.as_str() })
            .projection(doc! { field::PARENT: 1 })
            .max_time(self.max_time())
            .await
            .map_err(|e| store_error(&e))?;
        Ok(found.map(|doc| {
            doc.get_str(field::PARENT)
                .ok()
                .and_then(|p| IssueId::parse(p).ok())
        }))
    }

    /// Refuses relations to issues missing from `tenant` (another tenant's
    /// collection is never read, so its ids are missing too) and a parent
    /// whose chain would hold `child` or be too deep. Read before the
    /// write; a racing re-parent could still close a cycle between the
    /// check and the write, which the bounded chain walk tolerates.
    pub(crate) async fn check_relations(
        &self,
        tenant: &TenantId,
        child: Option<&IssueId>,
        related: &[(&'static str, &IssueId)],
        parent: Option<&IssueId>,
    ) -> Result<(), StoreError> {
        for (field, id) in related {
            if self.parent_of(tenant, id).await?.is_none() {
                return Err(StoreError::UnknownRelated {
                    field,
                    id: (*id).clone(),
                });
            }
        }
        if let Some(parent) = parent {
            let mut chain = ParentChain::new(child, parent)?;
            while let Some(ancestor) = chain.pending().cloned() {
                chain.step(self.parent_of(tenant, &ancestor).await?)?;
            }
        }
        Ok(())
    }

    /// Ids of `tenant`'s issues matching `filter`, newest first, one more
    /// than [`relation_limits::INVERSE_MAX`].
    async fn related_ids(
        &self,
        tenant: &TenantId,
        filter: Document,
    ) -> Result<Vec<IssueId>, StoreError> {
        let fetch = i64::try_from(relation_limits::INVERSE_MAX + 1).unwrap_or(i64::MAX);
        let mut cursor = self
            .issues(tenant)
            .find(filter)
            .projection(doc! { field::ID: 1 })
            .sort(doc! { field::ID: -1 })
            .limit(fetch)
            .max_time(self.max_time())
            .await
            .map_err(|e| store_error(&e))?;
        let mut out = Vec::new();
        while cursor.advance().await.map_err(|e| store_error(&e))? {
            let doc = cursor.deserialize_current().map_err(|e| store_error(&e))?;
            out.push(stored_issue_id(&doc)?);
        }
        Ok(out)
    }

    /// The ids of `id`'s sub-issues and of the issues it blocks, newest
    /// first, up to one more than [`relation_limits::INVERSE_MAX`] of each
    /// (as [`Self::related_ids`] reads them). One query asks for both
    /// (`$or` of the two indexes' entries, unsorted, so the server merges
    /// them without a blocking sort): while fewer than [`RELATED_AT_ONCE`]
    /// issues are related in either way, that answer holds every one of
    /// them and is sorted here; past it, each kind is read sorted by its
    /// own index, as before.
    async fn children_and_blocks(
        &self,
        tenant: &TenantId,
        id: &IssueId,
    ) -> Result<(Vec<IssueId>, Vec<IssueId>), StoreError> {
        let mut cursor = self
            .issues(tenant)
            .find(doc! { "$or": [
                { field::PARENT: id.as_str() },
                { field::BLOCKED_BY: id.as_str() },
            ] })
            .projection(doc! { field::ID: 1, field::PARENT: 1, field::BLOCKED_BY: 1 })
            .limit(RELATED_AT_ONCE)
            .batch_size(RELATED_AT_ONCE as u32)
            .max_time(self.max_time())
            .await
            .map_err(|e| store_error(&e))?;
        let mut docs = Vec::new();
        while cursor.advance().await.map_err(|e| store_error(&e))? {
            docs.push(cursor.deserialize_current().map_err(|e| store_error(&e))?);
        }
        if docs.len() >= RELATED_AT_ONCE as usize {
            return tokio::try_join!(
                self.related_ids(tenant, doc! { field::PARENT: id.as_str() }),
                self.related_ids(tenant, doc! { field::BLOCKED_BY: id.as_str() }),
            );
        }
        let (mut children, mut blocks) = (Vec::new(), Vec::new());
        for doc in &docs {
            let related = stored_issue_id(doc)?;
            if doc.get_str(field::PARENT).ok() == Some(id.as_str()) {
                children.push(related.clone());
            }
            let blocked = doc.get_array(field::BLOCKED_BY).ok();
            if blocked.is_some_and(|ids| ids.iter().any(|b| b.as_str() == Some(id.as_str()))) {
                blocks.push(related);
            }
        }
        for ids in [&mut children, &mut blocks] {
            // Newest first, as the indexes give them (ids sort by time).
            ids.sort_unstable_by(|a, b| b.as_str().cmp(a.as_str()));
            ids.truncate(relation_limits::INVERSE_MAX + 1);
        }
        Ok((children, blocks))
    }

    /// An update that depends on the issue as it is (lifecycle, relations):
    /// read, apply in memory, then a compare-and-swap on the version read.
    /// `stage`: the tenant has webhook endpoints, so the update stages the
    /// events of the change it made (`issue.updated`, and `issue.closed`
    /// for a close), told apart on the very version it replaced; they are
    /// returned with the issue.
    async fn apply_patch_read_first(
        &self,
        tenant: &TenantId,
        id: &IssueId,
        patch: &IssuePatch,
        expected_version: Option<u64>,
        stage: bool,
    ) -> Result<(Issue, Vec<StagedEvent>), StoreError> {
        self.check_relations(tenant, Some(id), &patch.related(), patch.new_parent())
            .await?;
        for _ in 0..CAS_ATTEMPTS {
            let Some(mut issue) = self.find_issue_fields(tenant, id).await? else {
                return Err(issue_not_found(id));
            };
            if let Some(expected) = expected_version
                && expected != issue.version
            {
                return Err(StoreError::VersionConflict {
                    expected,
                    actual: issue.version,
                });
            }
            let read_version = issue.version;
            let now = Timestamp::now().max(issue.updated_at);
            let before = issue.clone();
            patch.clone().apply_to(&mut issue, now)?;
            let change = Change::of(ChangeKind::Updated, Some(&before), &issue, &patch.actor());
            // The whole issue as changed, and the search words of a new
            // title or body (the patch's own `$set`).
            let mut set = issue_set(&issue);
            set.extend(patch_set(patch));
            // New blockers are counted open until recounted (and a recount
            // that read the old ones no longer lands: `blockers_seq`); a
            // move in or out of the terminal states recounts the issues it
            // blocks.
            let new_blockers = before.blocked_by != issue.blocked_by;
            let recount = new_blockers || before.state.is_terminal() != issue.state.is_terminal();
            let mut inc = doc! { field::VERSION: 1_i64 };
            if new_blockers {
                set.extend(blockers_set(&issue));
                inc.insert(field::BLOCKERS_SEQ, 1_i64);
            }
            if recount {
                set.insert(field::RECOUNT, recount_token());
            }
            let staged = if stage {
                let events = webhook::issue_events(Some(&before), &issue);
                staged::updated(id, read_version + 1, events, now)
            } else {
                Vec::new()
            };
            let update = doc! {
                "$set": set,
                "$inc": inc,
                "$max": { field::UPDATED_AT: date(now) },
                "$push": history_push(&change),
            };
            if let Some(issue) = self
                .update_issue_doc(
                    tenant,
                    doc! { field::ID: id.as_str(), field::VERSION: to_i64(read_version) },
                    with_staged(update, &staged),
                )
                .await?
            {
                if recount {
                    self.settle_after_write(tenant, id).await;
                }
                return Ok((issue, staged));
            }
            // Someone else changed it in between: read again.
        }
        Err(StoreError::unavailable(format!(
            "issue {id} kept changing during {CAS_ATTEMPTS} attempts to update it; retry"
        )))
    }

    /// Takes over a claim whose grant the ledger says is revoked (its
    /// revocation's clean-up has not reached this issue yet), matching that
    /// exact claim so a fresh claim made meanwhile is never cleared.
    async fn clear_revoked_claim(
        &self,
        tenant: &TenantId,
        id: &IssueId,
    ) -> Result<bool, StoreError> {
        let Some(doc) = self
            .issues(tenant)
            .find_one(doc! { field::ID: id.as_str() })
            .max_time(self.max_time())
            .await
            .map_err(|e| store_error(&e))?
        else {
            return Ok(false);
        };
        let Some(claim) = raw_claim(&doc)? else {
            return Ok(false);
        };
        let revoked = match self.grant(&claim.grant).await {
            Ok(event) => event.revoked_at.is_some(),
            Err(StoreError::NotFound { .. }) => false,
            Err(err) => return Err(err),
        };
        if !revoked {
            return Ok(false);
        }
        self.issues(tenant)
            .update_one(
                doc! {
                    field::ID: id.as_str(),
                    field::CLAIM_GRANT: claim.grant.as_str(),
                    field::CLAIMED_AT: date(claim.claimed_at),
                },
                claim_write(
                    None,
                    &Change::claim(
                        ChangeKind::ClaimRevoked,
                        id,
                        0,
                        Timestamp::now(),
                        &system_author(),
                        Some(&claim),
                        None,
                    ),
                ),
            )
            .await
            .map_err(|e| store_error(&e))?;
        Ok(true)
    }

    /// `stage`: the tenant has webhook endpoints, so a new claim stages its
    /// `issue.claimed` (returned with the issue; none for a renewal or a
    /// repeat of one's own claim, as `webhook::is_new_claim` says).
    async fn claim(
        &self,
        tenant: &TenantId,
        id: &IssueId,
        claimant: &Claimant,
        expected_version: Option<u64>,
        stage: bool,
    ) -> Result<(Issue, Vec<StagedEvent>), StoreError> {
        for _ in 0..UPDATE_ATTEMPTS {
            let now = Timestamp::now();
            let claim = claimant.claim_at(now);
            let mut filter = doc! {
                field::ID: id.as_str(),
                field::STATE: { "$nin": ["done", "closed"] },
                "$or": [
                    { field::CLAIM: Bson::Null },
                    { field::CLAIM_EXPIRES_AT: { "$lte": date(now) } },
                    { field::CLAIM_RUN: claimant.run.as_str(), field::CLAIM_GRANT: { "$ne": claimant.grant.as_str() } },
                ],
            };
            if let Some(expected) = expected_version {
                filter.insert(field::VERSION, to_i64(expected));
            }
            if claimant.renews() && claimant.expires_at > now {
                // One's own live claim: the lease moves, `claimed_at` stays.
                let mut own = doc! {
                    field::ID: id.as_str(),
                    field::STATE: { "$nin": ["done", "closed"] },
                    field::CLAIM_RUN: claimant.run.as_str(),
                    field::CLAIM_GRANT: claimant.grant.as_str(),
                    field::CLAIM_EXPIRES_AT: { "$gt": date(now) },
                };
                if let Some(expected) = expected_version {
                    own.insert(field::VERSION, to_i64(expected));
                }
                if let Some(issue) = self
                    .update_issue_doc(
                        tenant,
                        own,
                        // Only the end moves: no new version, so an
                        // agent's expected_version stays good.
                        doc! { "$set": { field::CLAIM_EXPIRES_AT: date(claim.expires_at) } },
                    )
                    .await?
                {
                    return Ok((issue, Vec::new()));
                }
            }
            if claimant.expires_at > now {
                let write = new_claim_write(id, &claim, &claimant.author(), None);
                // One conditional update decides among racing claimants.
                // Staging splits it in two, so that only a new claim stages
                // its event: first any claim but over one's own lapsed one
                // (the same run and grant), then only over that one.
                let claimed = async {
                    let (filter, staged) = if stage {
                        let own = doc! {
                            field::CLAIM_RUN: claimant.run.as_str(),
                            field::CLAIM_GRANT: claimant.grant.as_str(),
                        };
                        let mut new = filter.clone();
                        new.insert("$nor", vec![own.clone()]);
                        let staged = vec![staged::claimed(id, &claim)];
                        if let Some(issue) = self
                            .update_issue_doc(tenant, new, with_staged(write.clone(), &staged))
                            .await?
                        {
                            return Ok(Some((issue, staged)));
                        }
                        let mut renewal = filter;
                        renewal.extend(own);
                        (renewal, Vec::new())
                    } else {
                        (filter, Vec::new())
                    };
                    let issue = self.update_issue_doc(tenant, filter, write).await?;
                    Ok(issue.map(|issue| (issue, staged)))
                };
                if let Some(done) = self
                    .announced(tenant, claim.expires_at, now, claimed)
                    .await?
                {
                    return Ok(done);
                }
            }
            let issue = self.existing_issue(tenant, id).await?;
            match ClaimCheck::of(&issue, claimant, expected_version) {
                ClaimCheck::Own => return Ok((issue, Vec::new())),
                ClaimCheck::Refused(err @ StoreError::Claimed { .. }) => {
                    if !self.clear_revoked_claim(tenant, id).await? {
                        return Err(err);
                    }
                    // The revoked claim is gone: try again.
                }
                ClaimCheck::Refused(err) => return Err(err),
                ClaimCheck::Free if claimant.expires_at <= Timestamp::now() => {
                    return Err(Claimant::expired().into());
                }
                // Freed between the update and the read: try again.
                ClaimCheck::Free => {}
            }
        }
        Err(StoreError::unavailable(format!(
            "issue {id} kept changing during {UPDATE_ATTEMPTS} attempts to claim it; retry"
        )))
    }

    async fn release(
        &self,
        tenant: &TenantId,
        id: &IssueId,
        run: &RunId,
        expected_version: Option<u64>,
    ) -> Result<Issue, StoreError> {
        let now = Timestamp::now();
        // Read first, so the history records the very claim released (the
        // filter then matches only that claim).
        let held = self
            .find_issue_fields(tenant, id)
            .await?
            .and_then(|issue| issue.claim)
            .filter(|claim| &claim.run == run);
        let mut filter = doc! {
            field::ID: id.as_str(),
            field::CLAIM_RUN: run.as_str(),
            field::CLAIM_EXPIRES_AT: { "$gt": date(now) },
        };
        if let Some(held) = &held {
            filter.insert(field::CLAIM_GRANT, held.grant.as_str());
            filter.insert(field::CLAIMED_AT, date(held.claimed_at));
        }
        if let Some(expected) = expected_version {
            filter.insert(field::VERSION, to_i64(expected));
        }
        let change = Change::claim(
            ChangeKind::Released,
            id,
            0,
            now,
            &run_author(run),
            held.as_ref(),
            None,
        );
        if let Some(issue) = self
            .update_issue_doc(tenant, filter, claim_write(None, &change))
            .await?
        {
            return Ok(issue);
        }
        let issue = self.existing_issue(tenant, id).await?;
        check_release(&issue, run, expected_version)?;
        Err(StoreError::unavailable(format!(
            "issue {id} changed while releasing it; retry"
        )))
    }

    /// A person's hand-over: one `findOneAndUpdate` on the open issue at
    /// the version the person saw, whoever holds it, so the old claim ends
    /// and the new one starts in the same write (staging its
    /// `issue.claimed` when `stage`).
    async fn hand_over(
        &self,
        tenant: &TenantId,
        id: &IssueId,
        claimant: &Claimant,
        by: &Author,
        expected_version: u64,
        stage: bool,
    ) -> Result<(Issue, Vec<StagedEvent>), StoreError> {
        let now = Timestamp::now();
        claimant.live_at(now)?;
        let claim = claimant.claim_at(now);
        // Read first, for the history's claim before: at a given version the
        // claim's holder is fixed (every change of holder makes a version),
        // so the update below, conditional on that version, replaces
        // exactly the claim read here.
        let current = self.existing_issue(tenant, id).await?;
        check_hand_over(&current, expected_version)?;
        let staged = staged::when(stage, || staged::claimed(id, &claim));
        let write = new_claim_write(id, &claim, by, current.claim.as_ref());
        let handed = self.update_issue_doc(
            tenant,
            doc! {
                field::ID: id.as_str(),
                field::STATE: { "$nin": ["done", "closed"] },
                field::VERSION: to_i64(expected_version),
            },
            with_staged(write, &staged),
        );
        if let Some(issue) = self
            .announced(tenant, claim.expires_at, now, handed)
            .await?
        {
            return Ok((issue, staged));
        }
        let issue = self.existing_issue(tenant, id).await?;
        check_hand_over(&issue, expected_version)?;
        Err(StoreError::unavailable(format!(
            "issue {id} changed while handing over its claim; retry"
        )))
    }

    /// Ends every claim made under `grant` on `tenant`'s board.
    pub(crate) async fn end_claims_of(
        &self,
        tenant: &TenantId,
        grant: &corkboard_board::GrantId,
        at: Timestamp,
    ) -> Result<(), StoreError> {
        self.issues(tenant)
            .update_many(
                doc! { field::CLAIM_GRANT: grant.as_str() },
                // One update for every issue: the claim each held is named
                // by its grant only.
                claim_write(
                    None,
                    &Change {
                        issue: IssueId::generate(),
                        version: 0,
                        at,
                        by: system_author(),
                        kind: ChangeKind::ClaimRevoked,
                        fields: vec![FieldChange {
                            field: "claim".to_owned(),
                            before: Some(serde_json::json!({ "grant": grant })),
                            after: Some(serde_json::Value::Null),
                            added: Vec::new(),
                            removed: Vec::new(),
                        }],
                    },
                ),
            )
            .await
            .map_err(|e| store_error(&e))?;
        Ok(())
    }

    /// One conditional update of an issue document: the issue as it is
    /// after it, or `None` when `filter` matched nothing (the callers then
    /// read the issue to say why).
    pub(crate) async fn update_issue_doc(
        &self,
        tenant: &TenantId,
        filter: Document,
        update: Document,
    ) -> Result<Option<Issue>, StoreError> {
        self.issues(tenant)
            .find_one_and_update(filter, update)
            .return_document(ReturnDocument::After)
            .projection(issue_projection())
            .max_time(self.max_time())
            .await
            .map_err(|e| store_error(&e))?
            .map(|doc| issue_from_doc(tenant, &doc))
            .transpose()
    }

    /// The issue `id`, or the not-found refusal.
    async fn existing_issue(&self, tenant: &TenantId, id: &IssueId) -> Result<Issue, StoreError> {
        self.find_issue(tenant, id)
            .await?
            .ok_or_else(|| issue_not_found(id))
    }

    /// The issue's fields without its comments, search words and history:
    /// what a change is computed on, without reading up to 32 MiB of
    /// comments.
    async fn find_issue_fields(
        &self,
        tenant: &TenantId,
        id: &IssueId,
    ) -> Result<Option<Issue>, StoreError> {
        let found = self
            .issues(tenant)
            .find_one(doc! { field::ID: id.as_str() })
            .projection({
                let mut fields = issue_projection();
                fields.insert(field::COMMENTS, 0);
                fields
            })
            .max_time(self.max_time())
            .await
            .map_err(|e| store_error(&e))?;
        found.map(|doc| issue_from_doc(tenant, &doc)).transpose()
    }

    async fn find_issue(
        &self,
        tenant: &TenantId,
        id: &IssueId,
    ) -> Result<Option<Issue>, StoreError> {
        let found = self
            .issues(tenant)
            .find_one(doc! { field::ID: id.as_str() })
            .projection(issue_projection())
            .max_time(self.max_time())
            .await
            .map_err(|e| store_error(&e))?;
        found.map(|doc| issue_from_doc(tenant, &doc)).transpose()
    }

    /// The issue with only the comments of `window`, and their facts.
    /// Comments are embedded in the issue document (an array, oldest
    /// first), so the server cuts the window itself in one aggregation on
    /// that one document: it counts the array, finds `before` in it,
    /// slices the window's comments and takes them newest first while the
    /// body bytes taken do not exceed the window's bound (`$reduce`). Only
    /// the window crosses the wire and is decoded here, never up to
    /// `COMMENTS_MAX` comments of 64 KiB; the search terms stay behind too.
    async fn find_issue_window(
        &self,
        tenant: &TenantId,
        id: &IssueId,
        window: &CommentWindow,
    ) -> Result<Option<(Issue, CommentFacts)>, StoreError> {
        let comments = doc! { "$ifNull": [format!("${}", field::COMMENTS), []] };
        let end = match window.before_id() {
            None => Bson::Document(doc! { "$size": comments.clone() }),
            // The ids by `$map`, not the `comments.id` path: secantusd-rs
            // does not traverse an array of documents in an expression.
            Some(before) => Bson::Document(doc! {
                "$indexOfArray": [
                    { "$map": { "input": comments.clone(), "as": "c", "in": "$$c.id" } },
                    before.as_str(),
                ]
            }),
        };
        let limit = to_i64(window.limit() as u64);
        let max_bytes = i64::try_from(window.byte_bound()).unwrap_or(i64::MAX);
        // What leaves the server is the issue as every read of one
        // (`issue_projection`), with only the window's comments.
        let unset: Vec<&str> = std::iter::once(field::COMMENTS)
            .chain(field::NOT_READ)
            .collect();
        let pipeline = vec![
            doc! { "$match": { field::ID: id.as_str() } },
            doc! { "$set": { WINDOW_TOTAL: { "$size": comments.clone() }, WINDOW_END: end } },
            doc! { "$set": { WINDOW_TAKEN: {
                "$reduce": {
                    // The window's candidates, newest first ($slice needs a
                    // positive count, hence the empty array for none).
                    "input": { "$cond": [
                        { "$gt": [format!("${WINDOW_END}"), 0] },
                        { "$reverseArray": { "$slice": [
                            comments,
                            { "$max": [0, { "$subtract": [format!("${WINDOW_END}"), limit] }] },
                            { "$min": [limit, format!("${WINDOW_END}")] },
                        ] } },
                        [],
                    ] },
                    "initialValue": { "bytes": 0_i64, "taken": [] },
                    // CommentWindow::takes_more: the first always, then
                    // while the bytes taken do not exceed the bound.
                    "in": { "$cond": [
                        { "$or": [
                            { "$eq": [{ "$size": "$$value.taken" }, 0] },
                            { "$lte": ["$$value.bytes", max_bytes] },
                        ] },
                        {
                            "bytes": { "$add": ["$$value.bytes", { "$strLenBytes": "$$this.body" }] },
                            "taken": { "$concatArrays": ["$$value.taken", ["$$this"]] },
                        },
                        "$$value",
                    ] },
                }
            } } },
            doc! { "$unset": unset },
        ];
        let mut cursor = self
            .issues(tenant)
            .aggregate(pipeline)
            .max_time(self.max_time())
            .await
            .map_err(|e| store_error(&e))?;
        if !cursor.advance().await.map_err(|e| store_error(&e))? {
            return Ok(None);
        }
        let mut doc = cursor.deserialize_current().map_err(|e| store_error(&e))?;
        let number = |doc: &Document, name: &str| -> Result<usize, StoreError> {
            match doc.get(name) {
                Some(Bson::Int32(n)) => Ok(usize::try_from(*n).unwrap_or(usize::MAX)),
                Some(Bson::Int64(n)) => Ok(usize::try_from(*n).unwrap_or(usize::MAX)),
                other => Err(StoreError::Internal(format!(
                    "the comment window of issue {id} has no count {name}: {other:?}"
                ))),
            }
        };
        let total = number(&doc, WINDOW_TOTAL)?;
        // -1: `before` is no comment of this issue.
        let end = match doc.get(WINDOW_END) {
            Some(Bson::Int32(n)) if *n < 0 => None,
            Some(Bson::Int64(n)) if *n < 0 => None,
            _ => Some(number(&doc, WINDOW_END)?),
        };
        let mut taken = match doc.remove(WINDOW_TAKEN) {
            Some(Bson::Document(mut acc)) => match acc.remove("taken") {
                Some(Bson::Array(items)) => items,
                _ => Vec::new(),
            },
            _ => Vec::new(),
        };
        // Newest first as taken; the issue holds them oldest first.
        taken.reverse();
        doc.insert(field::COMMENTS, Bson::Array(taken));
        let issue = issue_from_doc(tenant, &doc)?;
        let facts = match end {
            None => CommentFacts::unknown_before(total),
            Some(end) => CommentFacts::new(window, total, end, issue.comments.len()),
        };
        Ok(Some((issue, facts)))
    }

    /// Inserts an issue document; an issue already there under that id is
    /// the same issue (ids are fresh ULIDs, and only the idempotency path
    /// inserts one id twice), so a duplicate key is success.
    async fn insert_issue(&self, tenant: &TenantId, doc: Document) -> Result<(), StoreError> {
        match self.issues(tenant).insert_one(doc).await {
            Ok(_) => Ok(()),
            Err(e) if is_duplicate_key(&e) => Ok(()),
            Err(e) => Err(store_error(&e)),
        }
    }

    /// Inserts an idempotency record. `Ok(true)`: this caller holds the
    /// key; `Ok(false)`: someone already did.
    async fn claim_key(&self, tenant: &TenantId, record: Document) -> Result<bool, StoreError> {
        match self.idempotency(tenant).insert_one(record).await {
            Ok(_) => Ok(true),
            Err(e) if is_duplicate_key(&e) => Ok(false),
            Err(e) => Err(store_error(&e)),
        }
    }

    /// Deletes the comment claim this caller made under (run, key).
    async fn release_claim(
        &self,
        tenant: &TenantId,
        author: &Author,
        key: &IdempotencyKey,
        comment: &CommentId,
    ) -> Result<(), StoreError> {
        self.idempotency(tenant)
            .delete_one({
                let mut mine = key_record(&author.run, key, Kind::Comment);
                mine.insert("comment.id", comment.as_str());
                mine
            })
            .await
            .map_err(|e| store_error(&e))?;
        Ok(())
    }

    /// The record another caller inserted under (run, key, kind), waiting
    /// briefly for it to become visible; `IdempotencyConflict` when it was
    /// recorded for a request other than the one `fingerprint` names.
    async fn read_claim(
        &self,
        tenant: &TenantId,
        run: &RunId,
        key: &IdempotencyKey,
        kind: Kind,
        fingerprint: &str,
    ) -> Result<Document, StoreError> {
        let filter = key_record(run, key, kind);
        for _ in 0..VISIBILITY_ATTEMPTS {
            let found = self
                .idempotency(tenant)
                .find_one(filter.clone())
                .max_time(self.max_time())
                .await
                .map_err(|e| store_error(&e))?;
            if let Some(record) = found {
                if record.get_str("fingerprint").ok() != Some(fingerprint) {
                    return Err(StoreError::IdempotencyConflict);
                }
                return Ok(record);
            }
            tokio::time::sleep(VISIBILITY_PAUSE).await;
        }
        Err(StoreError::unavailable(
            "the idempotency record of this key is not readable yet; retry",
        ))
    }

    async fn create_with_key(
        &self,
        tenant: &TenantId,
        author: &Author,
        new: NewIssue,
        key: &IdempotencyKey,
        stage: bool,
    ) -> Result<Created, StoreError> {
        let fingerprint = new.fingerprint();
        let now = Timestamp::now();
        let issue = new.into_issue(tenant.clone(), author.clone(), now);
        let mut record = key_record(&author.run, key, Kind::Issue);
        record.extend(doc! {
            "fingerprint": fingerprint.as_str(),
            "issue_id": issue.id.as_str(),
            "issue": created_doc_staged(&issue, stage),
            field::CREATED_AT: date(now),
        });
        let claimed = self.claim_key(tenant, record).await?;
        // The commit point: from here the key's record is stored, so the
        // create is (or, retried with the key, will be) applied, whatever
        // this attempt meets next.
        let created = if claimed {
            self.insert_issue(tenant, created_doc_staged(&issue, stage))
                .await
                .map(|()| Created {
                    issue,
                    replayed: false,
                })
        } else {
            self.replay_create(tenant, author, key, &fingerprint).await
        };
        created.map_err(StoreError::after_commit_point)
    }

    /// The create a claimed key recorded, finished if its first caller
    /// stopped between its two steps.
    async fn replay_create(
        &self,
        tenant: &TenantId,
        author: &Author,
        key: &IdempotencyKey,
        fingerprint: &str,
    ) -> Result<Created, StoreError> {
        let record = self
            .read_claim(tenant, &author.run, key, Kind::Issue, fingerprint)
            .await?;
        let stored = record
            .get_document("issue")
            .map_err(|_| StoreError::Internal("an idempotency record lacks its issue".into()))?;
        let id = IssueId::parse(stored.get_str(field::ID).unwrap_or_default())
            .map_err(|e| StoreError::Internal(format!("an idempotency record is invalid: {e}")))?;
        let issue = match self.find_issue(tenant, &id).await? {
            Some(issue) => issue,
            None => {
                // The first caller has not inserted it yet, or never will
                // (it failed between its two steps): finish its work.
                self.insert_issue(tenant, stored.clone()).await?;
                self.find_issue(tenant, &id)
                    .await?
                    .ok_or_else(|| issue_not_found(&id))?
            }
        };
        Ok(Created {
            issue,
            replayed: true,
        })
    }

    /// Appends `comment` unless the issue already has it, as one atomic
    /// update that also bumps the version. Returns the issue with it.
    ///
    /// The filter also requires that the issue has fewer than
    /// [`limits::COMMENTS_MAX`] comments (no element at index
    /// `COMMENTS_MAX - 1`), so the limit holds however many writers race.
    ///
    /// `stage`: the tenant has webhook endpoints, so the update stages the
    /// comment's `issue.commented` on the issue (`crate::staged`).
    async fn push_comment(
        &self,
        tenant: &TenantId,
        id: &IssueId,
        comment: &Comment,
        stage: bool,
    ) -> Result<Issue, StoreError> {
        let last_allowed = format!("{}.{}", field::COMMENTS, limits::COMMENTS_MAX - 1);
        // The comment, and its record in the history, in one update.
        let mut push = doc! { field::COMMENTS: comment_doc(comment) };
        push.extend(history_push(&Change {
            issue: id.clone(),
            version: 0,
            at: comment.created_at,
            by: comment.author.clone(),
            kind: ChangeKind::Commented,
            fields: vec![FieldChange {
                field: "comments".to_owned(),
                before: None,
                after: None,
                added: vec![comment.id.as_str().to_owned()],
                removed: Vec::new(),
            }],
        }));
        let staged = staged::when(stage, || staged::commented(comment));
        for _ in 0..UPDATE_ATTEMPTS {
            let updated = self
                .issues(tenant)
                .find_one_and_update(
                    doc! {
                        field::ID: id.as_str(),
                        field::COMMENT_IDS: { "$ne": comment.id.as_str() },
                        last_allowed.as_str(): { "$exists": false },
                    },
                    with_staged(
                        doc! {
                            "$push": push.clone(),
                            "$addToSet": {
                                field::TERMS_COMMENTS: { "$each": terms_bson(comment.body.as_str()) },
                            },
                            "$inc": { field::VERSION: 1_i64 },
                            "$max": { field::UPDATED_AT: date(comment.created_at) },
                        },
                        &staged,
                    ),
                )
                .return_document(ReturnDocument::After)
                // Not the history nor the search words: the answer is the
                // issue, and both grow with the comments (as the
                // document every comment rewrites and returns does).
                .projection(issue_projection())
                .max_time(self.max_time())
                .await
                .map_err(|e| store_error(&e))?;
            if let Some(doc) = updated {
                return issue_from_doc(tenant, &doc);
            }
            match self.find_issue(tenant, id).await? {
                None => return Err(issue_not_found(id)),
                Some(issue) if issue.comments.iter().any(|c| c.id == comment.id) => {
                    return Ok(issue);
                }
                Some(issue) if issue.comments.len() >= limits::COMMENTS_MAX => {
                    return Err(StoreError::CommentLimit {
                        issue: id.clone(),
                        max: limits::COMMENTS_MAX,
                    });
                }
                // The issue exists without the comment, so the update
                // should have matched: try again.
                Some(_) => continue,
            }
        }
        Err(StoreError::Internal(format!(
            "adding a comment to issue {id} matched nothing {UPDATE_ATTEMPTS} times"
        )))
    }

    async fn comment_with_key(
        &self,
        tenant: &TenantId,
        author: &Author,
        new: NewComment,
        key: &IdempotencyKey,
        stage: bool,
    ) -> Result<CommentAdded, StoreError> {
        // A comment on a missing issue is refused before the key is
        // recorded, so the key stays free for a request that can succeed.
        if self.find_issue(tenant, &new.issue).await?.is_none() {
            return Err(issue_not_found(&new.issue));
        }
        let fingerprint = new.fingerprint();
        let comment = Comment {
            id: CommentId::generate(),
            body: new.body,
            author: author.clone(),
            created_at: Timestamp::now(),
        };
        let mut record = key_record(&author.run, key, Kind::Comment);
        record.extend(doc! {
            "fingerprint": fingerprint.as_str(),
            "issue_id": new.issue.as_str(),
            "comment": comment_doc(&comment),
            field::CREATED_AT: date(comment.created_at),
        });
        let claimed = self.claim_key(tenant, record).await?;
        // The commit point, as in `create_with_key`: the key's record is
        // stored, so a failure from here on is never "nothing applied".
        let added = if claimed {
            self.push_claimed_comment(tenant, author, key, &new.issue, comment, stage)
                .await
        } else {
            self.replay_comment(tenant, author, key, &new.issue, &fingerprint, stage)
                .await
        };
        added.map_err(StoreError::after_commit_point)
    }

    /// The comment of a key this call claimed, pushed onto its issue.
    async fn push_claimed_comment(
        &self,
        tenant: &TenantId,
        author: &Author,
        key: &IdempotencyKey,
        issue: &IssueId,
        comment: Comment,
        stage: bool,
    ) -> Result<CommentAdded, StoreError> {
        match self.push_comment(tenant, issue, &comment, stage).await {
            Ok(issue) => Ok(CommentAdded {
                issue,
                comment,
                replayed: false,
            }),
            Err(err @ StoreError::CommentLimit { .. }) => {
                // The issue is full, so the comment will never land: free
                // the key for a request that can succeed (a replay
                // meanwhile gets the same refusal from its push).
                self.release_claim(tenant, author, key, &comment.id).await?;
                Err(err)
            }
            Err(err) => Err(err),
        }
    }

    /// The comment a claimed key recorded, finished if its first caller
    /// stopped between its two steps.
    async fn replay_comment(
        &self,
        tenant: &TenantId,
        author: &Author,
        key: &IdempotencyKey,
        issue: &IssueId,
        fingerprint: &str,
        stage: bool,
    ) -> Result<CommentAdded, StoreError> {
        let record = self
            .read_claim(tenant, &author.run, key, Kind::Comment, fingerprint)
            .await?;
        let stored = record
            .get_document("comment")
            .map_err(|_| StoreError::Internal("an idempotency record lacks its comment".into()))
            .and_then(comment_from_doc)?;
        // Pushing again is a no-op when the first caller got there; when it
        // did not (it failed after recording the key), this completes it.
        let issue = self.push_comment(tenant, issue, &stored, stage).await?;
        Ok(CommentAdded {
            issue,
            comment: stored,
            replayed: true,
        })
    }

    /// Creates as [`IssueStore::create_issue`] does (inside its bound);
    /// with whether it staged its `issue.created` (`crate::staged`).
    async fn create(
        &self,
        tenant: &TenantId,
        author: &Author,
        new: NewIssue,
        key: Option<&IdempotencyKey>,
    ) -> Result<(Created, bool), StoreError> {
        new.validate()?;
        self.ensure_tenant(tenant).await?;
        self.check_relations(tenant, None, &new.related(), new.parent.as_ref())
            .await?;
        let stage = self.has_webhooks(tenant).await?;
        let created = match key {
            Some(key) => {
                self.create_with_key(tenant, author, new, key, stage)
                    .await?
            }
            None => {
                let issue = new.into_issue(tenant.clone(), author.clone(), Timestamp::now());
                self.issues(tenant)
                    .insert_one(created_doc_staged(&issue, stage))
                    .await
                    .map_err(|e| store_error(&e))?;
                Created {
                    issue,
                    replayed: false,
                }
            }
        };
        // Written counting every blocker open: count them (a replay too,
        // in case the first call died before it did).
        if !created.issue.blocked_by.is_empty() {
            self.settle_after_write(tenant, &created.issue.id).await;
        }
        Ok((created, stage))
    }

    /// Queues the `issue.commented` webhook deliveries a comment staged
    /// (`staged`), a replay's too (see [`Self::keyed_event`]).
    pub(crate) async fn commented_event(
        &self,
        tenant: &TenantId,
        added: &CommentAdded,
        staged: bool,
        key: Option<(&RunId, &IdempotencyKey)>,
    ) {
        let event = staged::commented(&added.comment);
        let record = key.map(|(run, key)| key_record(run, key, Kind::Comment));
        self.keyed_event(tenant, &added.issue, event, staged, added.replayed, record)
            .await;
    }

    /// Queues the `issue.created` webhook deliveries a create staged
    /// (`staged`), a replay's too (see [`Self::keyed_event`]).
    pub(crate) async fn created_event(
        &self,
        tenant: &TenantId,
        created: &Created,
        staged: bool,
        key: Option<(&RunId, &IdempotencyKey)>,
    ) {
        let event = staged::created(&created.issue);
        let record = key.map(|(run, key)| key_record(run, key, Kind::Issue));
        self.keyed_event(
            tenant,
            &created.issue,
            event,
            staged,
            created.replayed,
            record,
        )
        .await;
    }

    /// The event of a write a caller may replay by its key (a create, a
    /// comment): queued when the write staged it, and on every replay,
    /// whose first attempt may have queued some, all or none of it (the
    /// event names its deliveries, so nothing is queued twice; `record`,
    /// the key's, says when all were).
    async fn keyed_event(
        &self,
        tenant: &TenantId,
        issue: &Issue,
        event: StagedEvent,
        staged: bool,
        replayed: bool,
        record: Option<Document>,
    ) {
        if staged || replayed {
            self.queue_staged(tenant, issue, &[event], replayed, record.as_ref())
                .await;
        }
    }

    /// Whether (run, key) already holds an issue's idempotency record.
    async fn key_used(
        &self,
        tenant: &TenantId,
        run: &RunId,
        key: &IdempotencyKey,
    ) -> Result<bool, StoreError> {
        self.key_used_for(tenant, run, key, Kind::Issue).await
    }

    /// Whether (run, key) already holds an idempotency record of `kind`.
    async fn key_used_for(
        &self,
        tenant: &TenantId,
        run: &RunId,
        key: &IdempotencyKey,
        kind: Kind,
    ) -> Result<bool, StoreError> {
        let found = self
            .idempotency(tenant)
            .find_one(key_record(run, key, kind))
            .projection(doc! { field::ID: 1 })
            .max_time(self.max_time())
            .await
            .map_err(|e| store_error(&e))?;
        Ok(found.is_some())
    }

    /// The documents matching `filter`, newest first, at most `limit`,
    /// with only `projection`'s fields, the server giving up after
    /// `max_time`. Driver errors as they are: the caller says what they
    /// mean for its read (a `maxTimeMS` expiry differs for searches).
    async fn find_docs(
        &self,
        tenant: &TenantId,
        filter: Document,
        projection: Option<Document>,
        limit: i64,
        max_time: Duration,
    ) -> mongodb::error::Result<Vec<Document>> {
        let options = mongodb::options::FindOptions::builder()
            .sort(doc! { field::ID: -1 })
            .limit(limit)
            .batch_size(u32::try_from(limit).unwrap_or(u32::MAX).min(1000))
            .projection(projection)
            .max_time(max_time)
            .build();
        let mut cursor = self
            .issues(tenant)
            .find(filter)
            .with_options(options)
            .await?;
        let mut out = Vec::new();
        while cursor.advance().await? {
            out.push(cursor.deserialize_current()?);
        }
        Ok(out)
    }

    /// Search hits `ids`, whole, by id. `bounded`: the read stops, with
    /// `None`, once their comments pass the page's bound in all
    /// ([`PageCommentBytes`]), whichever hits they belong to.
    async fn hits_whole(
        &self,
        tenant: &TenantId,
        ids: &[&str],
        budget: &ReadBudget,
        bounded: bool,
    ) -> Result<Option<HashMap<IssueId, Issue>>, StoreError> {
        let mut whole = HashMap::with_capacity(ids.len());
        if ids.is_empty() {
            return Ok(Some(whole));
        }
        let mut cursor = self
            .issues(tenant)
            .find(doc! { field::ID: { "$in": ids } })
            .projection(issue_projection())
            .max_time(budget.max_time())
            .await
            .map_err(|e| budget.error(&e))?;
        let mut taken = PageCommentBytes::default();
        while cursor.advance().await.map_err(|e| budget.error(&e))? {
            let doc = cursor.deserialize_current().map_err(|e| budget.error(&e))?;
            let issue = issue_from_doc(tenant, &doc)?;
            if !taken.take_issue(&issue) && bounded {
                return Ok(None);
            }
            whole.insert(issue.id.clone(), issue);
        }
        Ok(Some(whole))
    }

    /// How many of `page`'s hits (in rank order) one page holds: every
    /// hit up to the one whose comments would pass the page's bound (its
    /// first whatever their size), from each hit's comment bytes as the
    /// server adds them up, without reading the comments.
    async fn hits_held(
        &self,
        tenant: &TenantId,
        page: &[(f64, Timestamp, IssueId)],
        budget: &ReadBudget,
    ) -> Result<usize, StoreError> {
        let ids: Vec<&str> = page.iter().map(|(_, _, id)| id.as_str()).collect();
        let mut comment_bytes = HashMap::with_capacity(ids.len());
        for doc in self
            .find_docs(
                tenant,
                doc! { field::ID: { "$in": ids } },
                Some(doc! { COMMENT_BYTES: comment_bytes_expr() }),
                page.len() as i64,
                budget.max_time(),
            )
            .await
            .map_err(|e| budget.error(&e))?
        {
            // Counted as past the bound when unreadable: that hit then
            // ends the page (or is its only one), never overfills it.
            let bytes = match doc.get(COMMENT_BYTES) {
                Some(Bson::Int32(n)) => usize::try_from(*n).unwrap_or(usize::MAX),
                Some(Bson::Int64(n)) => usize::try_from(*n).unwrap_or(usize::MAX),
                _ => usize::MAX,
            };
            comment_bytes.insert(stored_issue_id(&doc)?, bytes);
        }
        let mut taken = PageCommentBytes::default();
        for (n, (_, _, id)) in page.iter().enumerate() {
            // A hit gone since it was ranked is left out, not counted.
            let Some(&bytes) = comment_bytes.get(id) else {
                continue;
            };
            if !taken.hold(bytes) {
                return Ok(n);
            }
        }
        Ok(page.len())
    }

    /// The search, within `budget` (an expensive read: see
    /// `MongoStore::expensive_read`).
    async fn search(
        &self,
        tenant: &TenantId,
        query: &SearchQuery,
        budget: &ReadBudget,
    ) -> Result<SearchPage, StoreError> {
        let empty = SearchPage {
            hits: Vec::new(),
            next_offset: None,
            partial: false,
        };
        let Some(filter) = search_filter(query) else {
            return Ok(empty);
        };
        // Older documents get their word arrays here if no write has given
        // them yet (see `MongoStore::ensure_tenant`).
        self.ensure_tenant(tenant).await?;
        // Candidates: the newest MONGO_CANDIDATES_MAX matches, words only;
        // ranked here by the domain's reference score.
        let mut projection = doc! { field::UPDATED_AT: 1 };
        for name in field::TERMS {
            projection.insert(name, 1);
        }
        let bound = i64::from(MONGO_CANDIDATES_MAX);
        let docs = self
            .find_docs(
                tenant,
                filter,
                Some(projection),
                bound + 1,
                budget.max_time(),
            )
            .await
            .map_err(|e| budget.error(&e))?;
        let partial = docs.len() as i64 > bound;
        let mut ranked = Vec::with_capacity(docs.len());
        for doc in docs.iter().take(MONGO_CANDIDATES_MAX as usize) {
            let id = doc
                .get_str(field::ID)
                .ok()
                .and_then(|id| IssueId::parse(id).ok())
                .ok_or_else(|| bad_field(doc, field::ID))?;
            let updated = updated_at(doc)?;
            // The server matched it; a `None` here would mean the arrays
            // and the domain disagree, and the domain decides.
            if let Some(score) = query.text.score(&issue_terms(doc)) {
                ranked.push((score, updated, id));
            }
        }
        ranked.sort_by(|a, b| rank_order((a.0, a.1, &a.2), (b.0, b.1, &b.2)));
        let from = (query.offset as usize).min(ranked.len());
        let to = (from + query.limit as usize).min(ranked.len());
        let mut next_offset = (ranked.len() > to).then(|| query.offset + query.limit);
        let page = &ranked[from..to];
        // Most pages' comments fit the bound whole: their hits are read in
        // one find, which stops once what it read passes the bound (so a
        // search holds at most the bound and one reply). Only then is the
        // page cut, in rank order, from each hit's comment bytes (numbers
        // the server adds up), and just the hits it holds read whole; the
        // next page continues after its last hit. An issue gone between
        // the reads (no deletes exist today) is left out rather than
        // failing the search.
        let ids: Vec<&str> = page.iter().map(|(_, _, id)| id.as_str()).collect();
        let mut whole = match self.hits_whole(tenant, &ids, budget, true).await? {
            Some(whole) => whole,
            None => {
                let held = self.hits_held(tenant, page, budget).await?;
                if held < page.len() {
                    next_offset = Some(query.offset + held as u32);
                }
                self.hits_whole(tenant, &ids[..held], budget, false)
                    .await?
                    .unwrap_or_default()
            }
        };
        let hits = page
            .iter()
            .filter_map(|(score, _, id)| Some(query.text.hit(whole.remove(id)?, *score)))
            .collect();
        Ok(SearchPage {
            hits,
            next_offset,
            partial,
        })
    }

    /// One page of `list_issues` (`filter` is the query's): an expensive
    /// one within its `budget`, a point read within `operation_timeout`.
    async fn list_page(
        &self,
        tenant: &TenantId,
        query: &ListQuery,
        filter: Document,
        budget: Option<&ReadBudget>,
    ) -> Result<Page, StoreError> {
        let limit = usize::try_from(query.limit).unwrap_or(usize::MAX);
        let fail = |e: mongodb::error::Error| match budget {
            Some(budget) => budget.error(&e),
            None => store_error(&e),
        };
        if query.ready {
            return self.ready_page(tenant, query, filter, budget).await;
        }
        let fetch = i64::from(query.limit) + 1;
        let mut cursor = self
            .issues(tenant)
            .find(filter)
            .sort(doc! { field::ID: -1 })
            .projection(issue_projection())
            .limit(fetch)
            .batch_size(u32::try_from(fetch).unwrap_or(u32::MAX))
            .max_time(budget.map_or_else(|| self.max_time(), ReadBudget::max_time))
            .await
            .map_err(fail)?;
        page_within_comment_bytes(tenant, &mut cursor, limit, fail).await
    }

    async fn similar(
        &self,
        tenant: &TenantId,
        title: &Title,
        limit: u32,
    ) -> Result<Vec<SimilarIssue>, StoreError> {
        let mut ranking = SimilarRanking::new(title.as_str());
        let words: Vec<String> = ranking.words().iter().cloned().collect();
        if words.is_empty() {
            return Ok(Vec::new());
        }
        self.ensure_tenant(tenant).await?;
        let projection = doc! {
            field::TITLE: 1, field::STATE: 1, field::UPDATED_AT: 1,
            field::INTEGRITY: 1,
        };
        // Titles with every word first (where near duplicates are), then,
        // unless those settle the answer, the newest sharing any word;
        // both bounded.
        let every_word = self
            .find_docs(
                tenant,
                similar_filter(&words, true),
                Some(projection.clone()),
                i64::from(limits::SIMILAR_ALL_CANDIDATES),
                self.max_time(),
            )
            .await
            .map_err(|e| store_error(&e))?;
        offer_similar(&every_word, &mut ranking)?;
        if !ranking.settled(limit) {
            let any_word = self
                .find_docs(
                    tenant,
                    similar_filter(&words, false),
                    Some(projection),
                    i64::from(limits::SIMILAR_ANY_CANDIDATES),
                    self.max_time(),
                )
                .await
                .map_err(|e| store_error(&e))?;
            offer_similar(&any_word, &mut ranking)?;
        }
        Ok(ranking.finish(limit))
    }
}

/// A page of issues from `cursor` (up to `limit`, and one more to know
/// that more follow), ended early where its issues' comments would pass
/// [`limits::PAGE_COMMENT_BYTES_MAX`] (its first issue is kept whatever
/// their size; nothing more is read then). Its cursor is its last issue.
pub(crate) async fn page_within_comment_bytes(
    tenant: &TenantId,
    cursor: &mut mongodb::Cursor<Document>,
    limit: usize,
    fail: impl Fn(mongodb::error::Error) -> StoreError,
) -> Result<Page, StoreError> {
    let mut issues = Vec::new();
    let mut taken = PageCommentBytes::default();
    let mut cut = false;
    while cursor.advance().await.map_err(&fail)? {
        let doc = cursor.deserialize_current().map_err(&fail)?;
        let issue = issue_from_doc(tenant, &doc)?;
        if !taken.hold_issue(&issue) {
            cut = true;
            break;
        }
        issues.push(issue);
    }
    Ok(Page::read(issues, limit, cut))
}

/// Offers `similar`'s projected documents to the ranking.
fn offer_similar(docs: &[Document], ranking: &mut SimilarRanking) -> Result<(), StoreError> {
    for doc in docs {
        let text = |name: &'static str| doc.get_str(name).map_err(|_| bad_field(doc, name));
        ranking.offer(
            IssueId::parse(text(field::ID)?).map_err(|_| bad_field(doc, field::ID))?,
            Title::parse(text(field::TITLE)?).map_err(|_| bad_field(doc, field::TITLE))?,
            IssueState::parse(text(field::STATE)?).map_err(|_| bad_field(doc, field::STATE))?,
            updated_at(doc)?,
            issue_integrity(doc),
        );
    }
    Ok(())
}

fn bad_field(doc: &Document, name: &str) -> StoreError {
    corrupt(
        "issue",
        doc.get_str(field::ID).unwrap_or("?"),
        format_args!("field {name} is missing or invalid"),
    )
}

fn updated_at(doc: &Document) -> Result<Timestamp, StoreError> {
    doc.get_datetime(field::UPDATED_AT)
        .map(timestamp)
        .map_err(|_| bad_field(doc, field::UPDATED_AT))
}

#[async_trait]
impl IssueStore for MongoStore {
    async fn idempotency_key_used(
        &self,
        tenant: &TenantId,
        run: &RunId,
        key: &IdempotencyKey,
        comment: bool,
    ) -> Result<bool, StoreError> {
        let kind = if comment { Kind::Comment } else { Kind::Issue };
        self.bounded(
            "idempotency_key_used",
            self.key_used_for(tenant, run, key, kind),
        )
        .await
    }

    async fn create_issue(
        &self,
        tenant: &TenantId,
        author: &Author,
        new: NewIssue,
        key: Option<&IdempotencyKey>,
    ) -> Result<Created, StoreError> {
        let (created, staged) = self
            .bounded_write("create_issue", self.create(tenant, author, new, key))
            .await?;
        self.created_event(tenant, &created, staged, key.map(|key| (&author.run, key)))
            .await;
        Ok(created)
    }

    /// Not atomic on MongoDB: the check and the insert are two operations
    /// on different documents, so two near-duplicate creates racing each
    /// other may both be created (each checked before the other landed).
    /// A key's replay is still decided by the key's unique index.
    async fn create_issue_unless_similar(
        &self,
        tenant: &TenantId,
        author: &Author,
        new: NewIssue,
        key: Option<&IdempotencyKey>,
    ) -> Result<CreateOutcome, StoreError> {
        let outcome = self
            .bounded_write("create_issue", async {
                self.ensure_tenant(tenant).await?;
                let replay = match key {
                    Some(key) => self.key_used(tenant, &author.run, key).await?,
                    None => false,
                };
                if !replay {
                    let near: Vec<SimilarIssue> = self
                        .similar(tenant, &new.title, limits::SIMILAR_LIMIT_MAX)
                        .await?
                        .into_iter()
                        .filter(SimilarIssue::is_near)
                        .collect();
                    // A racing request under the same key may have created the
                    // issue just now: that is a replay, not a refusal.
                    let raced = match key {
                        Some(key) if !near.is_empty() => {
                            self.key_used(tenant, &author.run, key).await?
                        }
                        _ => false,
                    };
                    if !near.is_empty() && !raced {
                        return Ok((CreateOutcome::Refused(near), false));
                    }
                }
                self.create(tenant, author, new, key)
                    .await
                    .map(|(created, staged)| (CreateOutcome::Created(created), staged))
            })
            .await?;
        let (outcome, staged) = outcome;
        if let CreateOutcome::Created(created) = &outcome {
            self.created_event(tenant, created, staged, key.map(|key| (&author.run, key)))
                .await;
        }
        Ok(outcome)
    }

    async fn search_issues(
        &self,
        tenant: &TenantId,
        query: &SearchQuery,
    ) -> Result<SearchPage, StoreError> {
        query.validate()?;
        self.expensive_read("search_issues", tenant, |budget| async move {
            self.search(tenant, query, &budget).await
        })
        .await
    }

    async fn similar_open_issues(
        &self,
        tenant: &TenantId,
        title: &Title,
        limit: u32,
    ) -> Result<Vec<SimilarIssue>, StoreError> {
        if limit == 0 || limit > limits::SIMILAR_LIMIT_MAX {
            return Err(ValidationError::new(
                "limit",
                format!("must be between 1 and {}", limits::SIMILAR_LIMIT_MAX),
            )
            .into());
        }
        self.bounded("similar_open_issues", self.similar(tenant, title, limit))
            .await
    }

    async fn get_issue(&self, tenant: &TenantId, id: &IssueId) -> Result<Issue, StoreError> {
        self.bounded("get_issue", async {
            self.find_issue(tenant, id)
                .await?
                .ok_or_else(|| issue_not_found(id))
        })
        .await
    }

    async fn list_issues(&self, tenant: &TenantId, query: &ListQuery) -> Result<Page, StoreError> {
        query.validate()?;
        if query.ready {
            // The ready order needs every issue's `urgency` (backfilled once).
            self.ensure_tenant(tenant).await?;
        }
        let Some(filter) = list_filter(query) else {
            return Ok(Page::empty().comments_as(query));
        };
        // The documents are read with their comments either way (what a
        // count needs of each comment, its level, sits beside its body),
        // and counted here when the query asks for counts.
        let page = match query.cost() {
            ReadCost::Point => {
                self.bounded("list_issues", self.list_page(tenant, query, filter, None))
                    .await
            }
            ReadCost::Expensive => {
                self.expensive_read("list_issues", tenant, |budget| async move {
                    self.list_page(tenant, query, filter, Some(&budget)).await
                })
                .await
            }
        };
        page.map(|page| page.comments_as(query))
    }

    async fn update_issue(
        &self,
        tenant: &TenantId,
        id: &IssueId,
        patch: IssuePatch,
        expected_version: Option<u64>,
    ) -> Result<Issue, StoreError> {
        if patch.is_empty() {
            return Err(ValidationError::new("patch", "nothing to update").into());
        }
        // No index set-up here: an update never creates a document (or a
        // collection), so it has nothing to wait for.
        let (issue, staged) = self
            .bounded_write("update_issue", async {
                let stage = self.has_webhooks(tenant).await?;
                // Always read first: the change the history records is
                // the issue as read against the issue as written (and a
                // close is told from another update on that same read).
                self.apply_patch_read_first(tenant, id, &patch, expected_version, stage)
                    .await
            })
            .await?;
        self.queue_staged(tenant, &issue, &staged, false, None)
            .await;
        Ok(issue)
    }

    async fn get_issue_view(
        &self,
        tenant: &TenantId,
        id: &IssueId,
        window: &CommentWindow,
    ) -> Result<IssueView, StoreError> {
        self.bounded("get_issue", async {
            // Both at once: the view waits for one round trip, not three
            // in a row (the window, the children, the blocked issues).
            let (found, (children, blocks)) = tokio::try_join!(
                self.find_issue_window(tenant, id, window),
                self.children_and_blocks(tenant, id),
            )?;
            let (issue, facts) = found.ok_or_else(|| issue_not_found(id))?;
            Ok(IssueView::new(issue, facts, children, blocks))
        })
        .await
    }

    /// MongoDB keeps no board epoch (a counter every write would update
    /// is one hot document for every tenant): the view is read every time.
    async fn get_issue_view_since(
        &self,
        tenant: &TenantId,
        id: &IssueId,
        window: &CommentWindow,
        _seen: Option<u64>,
    ) -> Result<ViewSince, StoreError> {
        let view = self.get_issue_view(tenant, id, window).await?;
        Ok(ViewSince::Read {
            view: Box::new(view),
            epoch: None,
        })
    }

    /// No epoch here either (see `get_issue_view_since`).
    async fn tenant_epoch(&self, _tenant: &TenantId) -> Result<Option<u64>, StoreError> {
        Ok(None)
    }

    async fn claim_issue(
        &self,
        tenant: &TenantId,
        id: &IssueId,
        claimant: &Claimant,
        expected_version: Option<u64>,
    ) -> Result<Issue, StoreError> {
        let (issue, staged) = self
            .bounded_write("claim_issue", async {
                let stage = self.has_webhooks(tenant).await?;
                self.claim(tenant, id, claimant, expected_version, stage)
                    .await
            })
            .await?;
        self.queue_staged(tenant, &issue, &staged, false, None)
            .await;
        Ok(issue)
    }

    async fn issue_history(
        &self,
        tenant: &TenantId,
        id: &IssueId,
        before: Option<u64>,
        limit: u32,
    ) -> Result<HistoryPage, StoreError> {
        self.bounded(
            "issue_history",
            self.changes_of_issue(tenant, id, before, limit),
        )
        .await
    }

    async fn run_history(
        &self,
        tenant: &TenantId,
        run: &RunId,
        before: Option<Timestamp>,
        limit: u32,
    ) -> Result<HistoryPage, StoreError> {
        self.bounded(
            "run_history",
            self.changes_of_run(tenant, run, before, limit),
        )
        .await
    }

    async fn board_stats(
        &self,
        tenant: &TenantId,
        stale_until: Timestamp,
    ) -> Result<corkboard_board::BoardStats, StoreError> {
        // The blocked and ready counts need every issue's `open_blockers`
        // (backfilled once, with the indexes).
        self.ensure_tenant(tenant).await?;
        self.expensive_read("board_stats", tenant, |budget| async move {
            self.stats(tenant, stale_until, &budget).await
        })
        .await
    }

    async fn claim_next(
        &self,
        tenant: &TenantId,
        query: &ListQuery,
        claimant: &Claimant,
    ) -> Result<ClaimNext, StoreError> {
        query.validate()?;
        self.ensure_tenant(tenant).await?;
        let (next, staged) = self
            .bounded_write("claim_next", async {
                let stage = self.has_webhooks(tenant).await?;
                // The wait for the turn counts against the call's bound.
                let lane = self.claim_turn(tenant).await;
                self.next_claim(tenant, query, claimant, &lane, stage).await
            })
            .await?;
        if let ClaimNext::Claimed { issue } = &next {
            self.queue_staged(tenant, issue, &staged, false, None).await;
        }
        Ok(next)
    }

    async fn hand_over_claim(
        &self,
        tenant: &TenantId,
        id: &IssueId,
        claimant: &Claimant,
        by: &Author,
        expected_version: u64,
    ) -> Result<Issue, StoreError> {
        let (issue, staged) = self
            .bounded_write("hand_over_claim", async {
                let stage = self.has_webhooks(tenant).await?;
                self.hand_over(tenant, id, claimant, by, expected_version, stage)
                    .await
            })
            .await?;
        self.queue_staged(tenant, &issue, &staged, false, None)
            .await;
        Ok(issue)
    }

    async fn release_issue(
        &self,
        tenant: &TenantId,
        id: &IssueId,
        run: &RunId,
        expected_version: Option<u64>,
    ) -> Result<Issue, StoreError> {
        self.bounded_write("release_issue", async {
            self.release(tenant, id, run, expected_version).await
        })
        .await
    }

    async fn add_comment(
        &self,
        tenant: &TenantId,
        author: &Author,
        comment: NewComment,
        key: Option<&IdempotencyKey>,
    ) -> Result<CommentAdded, StoreError> {
        let (added, staged) = self
            .bounded_write("add_comment", async {
                // The wait for the turn counts against the call's bound.
                let _turn = self.issue_turn(tenant, &comment.issue).await;
                let stage = self.has_webhooks(tenant).await?;
                let added = match key {
                    Some(key) => {
                        // The key's record is an insert, guarded by the unique
                        // index; a plain comment only updates its issue.
                        self.ensure_tenant(tenant).await?;
                        self.comment_with_key(tenant, author, comment, key, stage)
                            .await
                    }
                    None => {
                        let new = Comment {
                            id: CommentId::generate(),
                            body: comment.body,
                            author: author.clone(),
                            created_at: Timestamp::now(),
                        };
                        let issue = self
                            .push_comment(tenant, &comment.issue, &new, stage)
                            .await?;
                        Ok(CommentAdded {
                            issue,
                            comment: new,
                            replayed: false,
                        })
                    }
                };
                added.map(|added| (added, stage))
            })
            .await?;
        self.commented_event(tenant, &added, staged, key.map(|key| (&author.run, key)))
            .await;
        Ok(added)
    }
}
