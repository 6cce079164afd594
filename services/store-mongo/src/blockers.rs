//! The denormalised count of open blockers (`open_blockers`) on each issue
//! document, so that "every blocker done or closed" is an index key of the
//! ready list and of `claim_next` instead of a look-up of every
//! candidate's blockers.
//!
//! Whether an issue is blocked depends on other documents (its blockers'
//! states), and a single-document update cannot change a blocker and the
//! issues it blocks together. So the count converges instead:
//!
//! 1. A write that changes `blocked_by`, or moves an issue in or out of
//!    the terminal states, sets a fresh `recount` mark on that issue in its
//!    own update (and a new `blocked_by` is counted as all open: the count
//!    is never below the truth before it is recounted).
//! 2. After the write, the writer settles the mark ([`MongoStore::settle_blockers`]):
//!    it recounts the issue and every issue it blocks, then clears the mark
//!    it read. A recount reads the issue's `blockers_seq`, counts its open
//!    blockers, and writes the count only if `blockers_seq` is unchanged
//!    (bumping it), else reads again. So of racing recounts, the one whose
//!    write lands last read after every earlier one wrote: after a write's
//!    settle returns, every count it touches reflects that write.
//! 3. A mark left behind is settled by the claim sweeper (`expire_claims`,
//!    every second on the server; [`MongoStore::settle_pending`]): when the
//!    settle failed, the writer announces the tenant to it, which settles
//!    it after a grace of seconds; when the writer died between the two
//!    steps, when the sweeper's round reaches the tenant (within tenants ÷
//!    50 seconds, `sweep.rs`). At the tenant's set-up, documents written
//!    before the count existed get it ([`MongoStore::backfill_blockers`]).
//!
//! Until a mark is settled, counts may lag the write that set it, and only
//! while that write has not returned (or, when its settle failed, for the
//! grace; when its writer died, until the sweeper's round reaches the
//! tenant): new blockers count as open at once, so an issue
//! that gains one is never offered as ready; but the issues a reopened
//! blocker holds again, and those a finished one frees, follow at the
//! recount. A racing claim in that moment sees the blocker as it was.

use crate::codec::{field, ids};
use crate::error::store_error;
use crate::query::TERMINAL;
use crate::store::MongoStore;
use corkboard_board::{IssueId, StoreError, TenantId, Timestamp};
use mongodb::bson::{Bson, Document, doc};

/// How often one recount reads again when racing recounts of the same
/// issue keep winning; then the mark stays for the sweeper.
const RECOUNT_ATTEMPTS: u32 = 16;

/// Marked issues the sweeper settles per tenant per pass.
const PENDING_PER_PASS: i64 = 100;

/// The ids in a document's `blocked_by`.
fn blockers_of(doc: &Document) -> Vec<String> {
    doc.get_array(field::BLOCKED_BY)
        .map(|ids| {
            ids.iter()
                .filter_map(|b| b.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

impl MongoStore {
    /// Issue `id`'s fields a recount reads (and its mark).
    async fn blockers_doc(
        &self,
        tenant: &TenantId,
        id: &str,
    ) -> Result<Option<Document>, StoreError> {
        self.issues(tenant)
            .find_one(doc! { field::ID: id })
            .projection(doc! {
                field::BLOCKED_BY: 1,
                field::BLOCKERS_SEQ: 1,
                field::OPEN_BLOCKERS: 1,
                field::RECOUNT: 1,
            })
            .max_time(self.max_time())
            .await
            .map_err(|e| store_error(&e))
    }

    /// Recounts the open blockers of issue `id` (`read`: the issue as just
    /// read by [`Self::blockers_doc`], for the first attempt): see the
    /// module docs. `Ok(false)`: racing recounts kept winning (the mark
    /// stays).
    async fn recount_open_blockers(
        &self,
        tenant: &TenantId,
        id: &str,
        mut read: Option<Document>,
    ) -> Result<bool, StoreError> {
        let fail = |e: mongodb::error::Error| store_error(&e);
        for _ in 0..RECOUNT_ATTEMPTS {
            let doc = match read.take() {
                Some(doc) => doc,
                None => match self.blockers_doc(tenant, id).await? {
                    Some(doc) => doc,
                    None => return Ok(true),
                },
            };
            let seq = doc.get_i64(field::BLOCKERS_SEQ).ok();
            let blockers = blockers_of(&doc);
            let open = if blockers.is_empty() {
                // Nothing to read elsewhere: at that `blockers_seq` every
                // recount counts none, so one already written stands.
                if doc.get_i64(field::OPEN_BLOCKERS).ok() == Some(0) {
                    return Ok(true);
                }
                0
            } else {
                self.issues(tenant)
                    .count_documents(doc! {
                        field::ID: { "$in": blockers },
                        field::STATE: { "$nin": TERMINAL },
                    })
                    .max_time(self.max_time())
                    .await
                    .map_err(fail)?
            };
            let written = self
                .issues(tenant)
                .update_one(
                    doc! {
                        field::ID: id,
                        field::BLOCKERS_SEQ: seq.map_or(Bson::Null, Bson::Int64),
                    },
                    doc! { "$set": {
                        field::OPEN_BLOCKERS: i64::try_from(open).unwrap_or(i64::MAX),
                        field::BLOCKERS_SEQ: seq.unwrap_or(0) + 1,
                    } },
                )
                .await
                .map_err(fail)?;
            if written.matched_count == 1 {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Settles issue `id`'s `recount` mark, if it has one: recounts it and
    /// every issue it blocks, then clears the mark as read (a mark set
    /// since is another write's, settled by that write).
    pub(crate) async fn settle_blockers(
        &self,
        tenant: &TenantId,
        id: &str,
    ) -> Result<(), StoreError> {
        let fail = |e: mongodb::error::Error| store_error(&e);
        let Some(marked) = self.blockers_doc(tenant, id).await? else {
            return Ok(());
        };
        let Ok(mark) = marked.get_str(field::RECOUNT).map(str::to_owned) else {
            // Settled already, by a settle that read after this write.
            return Ok(());
        };
        let mut settled = self.recount_open_blockers(tenant, id, Some(marked)).await?;
        let blocked = self
            .issues(tenant)
            .find(doc! { field::BLOCKED_BY: id })
            .projection(doc! { field::ID: 1 })
            .max_time(self.max_time())
            .await
            .map_err(fail)?;
        let dependents = ids(blocked).await.map_err(fail)?;
        for dependent in dependents {
            settled &= self.recount_open_blockers(tenant, &dependent, None).await?;
        }
        if settled {
            self.issues(tenant)
                .update_one(
                    doc! { field::ID: id, field::RECOUNT: mark.as_str() },
                    doc! { "$unset": { field::RECOUNT: "" } },
                )
                .await
                .map_err(fail)?;
        }
        Ok(())
    }

    /// [`Self::settle_blockers`] after a write that succeeded: the write
    /// stands whatever happens here, so a failure is logged and left to the
    /// sweeper ([`Self::settle_pending`]), not answered as the write's; the
    /// tenant is announced to it ([`Self::announce_leftover`]), so the
    /// recount follows after the grace rather than at the round's turn.
    pub(crate) async fn settle_after_write(&self, tenant: &TenantId, id: &IssueId) {
        if let Err(err) = self.settle_blockers(tenant, id.as_str()).await {
            tracing::warn!(
                tenant = %tenant,
                issue = %id,
                error = %err,
                "open blockers not recounted after a write; the claim sweeper will"
            );
            self.announce_leftover(tenant, Timestamp::now());
        }
    }

    /// Settles up to [`PENDING_PER_PASS`] of `tenant`'s marks left by
    /// writers that did not settle them (the `recount` index, strings
    /// only); how many it found.
    pub(crate) async fn settle_pending(&self, tenant: &TenantId) -> Result<usize, StoreError> {
        let fail = |e: mongodb::error::Error| store_error(&e);
        let marked = self
            .issues(tenant)
            .find(doc! { field::RECOUNT: { "$gt": "" } })
            .projection(doc! { field::ID: 1 })
            .limit(PENDING_PER_PASS)
            .max_time(self.max_time())
            .await
            .map_err(fail)?;
        let marked = ids(marked).await.map_err(fail)?;
        for id in &marked {
            self.settle_blockers(tenant, id).await?;
        }
        Ok(marked.len())
    }

    /// Gives issues written before `open_blockers` existed their count
    /// (once per tenant per schema version, with the indexes): none for
    /// those without blockers; the others marked as blocked and settled
    /// here. Idempotent and resumable: an interrupted run leaves marks.
    pub(crate) async fn backfill_blockers(&self, tenant: &TenantId) -> Result<(), StoreError> {
        let fail = |e: mongodb::error::Error| store_error(&e);
        let missing = doc! { field::OPEN_BLOCKERS: { "$exists": false } };
        let mut none = missing.clone();
        none.insert(
            format!("{}.0", field::BLOCKED_BY),
            doc! { "$exists": false },
        );
        self.issues(tenant)
            .update_many(none, doc! { "$set": { field::OPEN_BLOCKERS: 0_i64 } })
            .await
            .map_err(fail)?;
        self.issues(tenant)
            .update_many(
                missing,
                doc! { "$set": {
                    field::OPEN_BLOCKERS: 1_i64,
                    field::RECOUNT: crate::codec::recount_token(),
                } },
            )
            .await
            .map_err(fail)?;
        // Bounded by the marks there are, so marks that racing recounts keep
        // from settling are left to the sweeper instead of looping here.
        let marked = self
            .issues(tenant)
            .count_documents(doc! { field::RECOUNT: { "$gt": "" } })
            .await
            .map_err(fail)?;
        let passes = marked.div_ceil(PENDING_PER_PASS as u64);
        for _ in 0..passes {
            if self.settle_pending(tenant).await? == 0 {
                break;
            }
        }
        Ok(())
    }
}
