//! The sweeper's pass (`expire_claims`, every second in every `serve` and
//! `server` process), at a cost that does not grow with the tenants.
//!
//! A pass has two kinds of work, found two ways:
//!
//! 1. **Claims whose end has passed**, which time alone makes due. Beside
//!    its write (sent at the same time), every new claim announces its end
//!    in the shared [`schema::SWEEP_DUE`] collection
//!    ([`MongoStore::announced`]):
//!    one document per tenant holding the earliest end not yet looked at
//!    (`$min`), a count of announcements (`v`) and the last one's time. A
//!    pass reads the tenants whose time has come (one find along the `at`
//!    index), clears their ended claims, and sets each one's time to the
//!    end of its earliest claim left (one indexed find), or deletes the
//!    document when none is left; both conditional on the count it read, so
//!    a claim announced meanwhile keeps its earlier time. A renewal only
//!    moves an end later and announces nothing: the tenant's time then
//!    comes early, and the pass sets it to the renewed end.
//! 2. **What a writer left behind** when it died or failed between its
//!    write and the follow-up: blocker counts not settled (`blockers.rs`),
//!    webhook events staged but not queued (`staged.rs`), and claims no
//!    announcement names (written by a version before announcements). No
//!    write announces these, so a pass visits the next
//!    [`LEFTOVER_TENANTS_PER_PASS`] tenants in turn (their set-up records,
//!    by name, wrapping around), and looks at all three in each: every
//!    tenant once every `tenants / 50` passes (10,000 tenants: about three
//!    minutes), every pass on a database of 50 tenants or fewer.
//!
//!    A writer that is alive when its follow-up fails (an outbox insert or
//!    a recount refused, the store not answering in time) does not leave
//!    its tenant to the round: it announces it
//!    ([`MongoStore::announce_leftover`]) in the same `sweep_due` document,
//!    due [`STAGED_GRACE_MILLIS`] later (`leftover_at`, the grace a
//!    marker must be old before the sweeper queues it), and the pass that
//!    finds it due does step 2's work for it too. A failure of that work
//!    announces the tenant again, so it is tried every grace until it
//!    succeeds. Only a writer that dies, or one whose announcement fails
//!    too, leaves its tenant to the round.
//!
//! So a pass sends a fixed handful of commands plus a few per tenant it
//! visits (at most [`LEFTOVER_TENANTS_PER_PASS`] plus
//! [`DUE_TENANTS_PER_PASS`]), where it listed every collection and read
//! every tenant's issues two or three times before (10,000 tenants: about
//! 20,000 finds a second per process).
//!
//! A claim whose announcement is read by a pass before the claim's own
//! write lands would be missed by the look-up of the earliest end that
//! follows: so a tenant's time is never set later than its last
//! announcement plus [`ANNOUNCED_WRITE_LANDS`], by which the write has
//! landed or failed, and that later look-up sees it. An announcement that
//! lands after its claim is as one made by a claim after the pass. One
//! that fails (or a process that dies between the two) leaves the claim
//! to the round of step 2: later, never lost.

use crate::codec::{
    claim_write, date, field, ids, issue_from_doc, issue_projection, raw_claim, timestamp,
};
use crate::error::store_error;
use crate::issues::system_author;
use crate::schema;
use crate::staged::{self, STAGED_GRACE_MILLIS, with_staged};
use crate::store::MongoStore;
use corkboard_board::{Change, ChangeKind, ExpiredClaim, IssueId, StoreError, TenantId, Timestamp};
use mongodb::Collection;
use mongodb::bson::{Document, doc};
use mongodb::options::ReturnDocument;

/// Tenants a pass visits for what writers left behind (step 2 of the
/// module docs).
pub const LEFTOVER_TENANTS_PER_PASS: i64 = 50;

/// Tenants with claims due a pass looks at, earliest first; the rest stay
/// due for the next pass.
const DUE_TENANTS_PER_PASS: i64 = 100;

/// How long after its announcement a claim's write has landed or failed:
/// far beyond the store's write bound (`operation_timeout`, 5 s by
/// default), which ends the call, not the server's work on it.
pub(crate) const ANNOUNCED_WRITE_LANDS: i64 = 60_000;

/// The field of a `sweep_due` document saying when a tenant's announced
/// leftovers are due ([`MongoStore::announce_leftover`]).
const LEFTOVER_AT: &str = "leftover_at";

/// A tenant with claims or leftovers due, as a pass read it.
struct Due {
    tenant: TenantId,
    /// The count of announcements when read.
    announced: i64,
    /// The last claim announcement's time.
    last: Timestamp,
    /// When its announced leftovers are due, if any are.
    leftover_at: Option<Timestamp>,
}

impl Due {
    /// Whether this pass does step 2's work for the tenant.
    fn leftovers_due(&self, now: Timestamp) -> bool {
        self.leftover_at.is_some_and(|at| at <= now)
    }
}

impl MongoStore {
    fn sweep_due(&self) -> Collection<Document> {
        self.database().collection(schema::SWEEP_DUE)
    }

    /// A new claim's `write`, with its announcement sent beside it (not
    /// before it: the claim would wait a round trip more): `tenant` is due
    /// for the sweeper by `ends` (the claim's end or earlier) at the
    /// latest. An announcement that fails does not fail the claim, which
    /// stands: it is logged, and the claim is cleared when its tenant's
    /// turn of step 2 comes (the module docs).
    pub(crate) async fn announced<T>(
        &self,
        tenant: &TenantId,
        ends: Timestamp,
        now: Timestamp,
        write: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let (announced, written) =
            futures_util::join!(self.announce_claim(tenant, ends, now), write);
        if let Err(err) = announced {
            tracing::warn!(
                tenant = %tenant, error = %err,
                "a claim's end was not announced; the sweeper's round clears it after it ends"
            );
        }
        written
    }

    async fn announce_claim(
        &self,
        tenant: &TenantId,
        ends: Timestamp,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        self.announce(
            tenant,
            doc! {
                "$min": { "at": date(ends) },
                "$max": { "last": date(now) },
                "$inc": { "v": 1_i64 },
            },
        )
        .await
    }

    /// Writes an announcement (`update`, which counts it in `v`) into
    /// `tenant`'s `sweep_due` document, made by the first.
    async fn announce(&self, tenant: &TenantId, update: Document) -> Result<(), StoreError> {
        self.ensure_set(&schema::IndexSet::Shared(schema::SWEEP_DUE))
            .await?;
        self.sweep_due()
            .update_one(doc! { field::ID: tenant.as_str() }, update)
            .upsert(true)
            .await
            .map_err(|e| store_error(&e))?;
        Ok(())
    }

    /// A write's follow-up failed (its webhook events stay staged on an
    /// issue, or its blocker counts unsettled): `tenant` is due for step 2
    /// of the module docs once [`STAGED_GRACE_MILLIS`] has passed, rather
    /// than when the round reaches it. Sent in the background, so a write
    /// whose follow-up met a store that did not answer does not wait for
    /// it as long again; when it fails too, it is logged and the round
    /// still comes.
    pub(crate) fn announce_leftover(&self, tenant: &TenantId, now: Timestamp) {
        let (store, tenant) = (self.clone(), tenant.clone());
        let due = date(now.plus_millis(STAGED_GRACE_MILLIS));
        let update = doc! {
            "$min": { "at": due },
            "$max": { LEFTOVER_AT: due },
            "$inc": { "v": 1_i64 },
        };
        tokio::spawn(async move {
            let announced = tokio::time::timeout(store.max_time(), store.announce(&tenant, update))
                .await
                .unwrap_or_else(|_| {
                    Err(StoreError::unavailable("the store did not answer in time"))
                });
            if let Err(err) = announced {
                tracing::warn!(
                    tenant = %tenant, error = %err,
                    "a write's leftovers were not announced; the sweeper's round comes to them"
                );
            }
        });
    }

    /// `expire_claims`: queues the webhook events writers left staged on
    /// grants, approvals and tool pins
    /// ([`MongoStore::queue_left_staged_shared`]); for the tenants this
    /// pass visits (the module docs), settles the blocker counts left
    /// pending and queues the events left staged on their issues (step 2:
    /// the round's tenants, and those announced and due), then clears
    /// their claims whose end passed, oldest end first, each by one update
    /// matching that very claim (so a renewal or a new claim made
    /// meanwhile is never cleared, and of racing sweepers one clears it),
    /// and announces them; at most `limit` claims in all.
    pub(crate) async fn sweep_expired(
        &self,
        now: Timestamp,
        limit: u32,
    ) -> Result<Vec<ExpiredClaim>, StoreError> {
        if let Err(err) = self.queue_left_staged_shared(now).await {
            tracing::warn!(error = %err, "staged webhook events not queued");
        }
        let due = self.due_tenants(now).await?;
        let round = self.leftover_round().await?;
        let mut visiting: Vec<&TenantId> = due.iter().map(|due| &due.tenant).collect();
        for tenant in &round {
            if !visiting.contains(&tenant) {
                visiting.push(tenant);
            }
        }
        // Only a tenant with endpoints stages events on its issues, so only
        // those are looked at (its last endpoint takes its markers with it:
        // `staged.rs`).
        let hooked = self.tenants_with_webhooks(&visiting).await?;
        // Step 2's work: the round's tenants, and those announced and due.
        let cleaning = visiting.iter().filter(|&&tenant| {
            round.contains(tenant)
                || due
                    .iter()
                    .any(|due| &due.tenant == tenant && due.leftovers_due(now))
        });
        for &tenant in cleaning {
            // Blocker counts a writer left unsettled (it died or failed
            // between its write and the recount): `blockers.rs`.
            let settled = self.settle_pending(tenant).await.map(drop);
            let queued = if hooked.contains(tenant.as_str()) {
                self.queue_left_staged(tenant, now).await.map(drop)
            } else {
                Ok(())
            };
            if let Err(err) = settled.and(queued) {
                tracing::warn!(
                    tenant = %tenant, error = %err,
                    "blocker counts or staged webhook events left by a write not settled; \
                     tried again after the grace"
                );
                self.announce_leftover(tenant, now);
            }
        }
        let mut out = Vec::new();
        for tenant in visiting {
            let left = i64::from(limit) - out.len() as i64;
            if left <= 0 {
                break;
            }
            let stage = hooked.contains(tenant.as_str());
            out.extend(self.expire_ended(tenant, now, left, stage).await?);
            if let Some(due) = due.iter().find(|due| &due.tenant == tenant) {
                self.rearm(due, now).await?;
            }
        }
        Ok(out)
    }

    /// Step 1 of the module docs: the tenants whose time has come, earliest
    /// first.
    async fn due_tenants(&self, now: Timestamp) -> Result<Vec<Due>, StoreError> {
        let fail = |e: mongodb::error::Error| store_error(&e);
        let mut cursor = self
            .sweep_due()
            .find(doc! { "at": { "$lte": date(now) } })
            .sort(doc! { "at": 1 })
            .limit(DUE_TENANTS_PER_PASS)
            .max_time(self.max_time())
            .await
            .map_err(fail)?;
        let mut due = Vec::new();
        while cursor.advance().await.map_err(fail)? {
            let doc = cursor.deserialize_current().map_err(fail)?;
            let Ok(tenant) = doc.get_str(field::ID).map(TenantId::parse) else {
                continue;
            };
            let tenant = tenant.map_err(|e| {
                StoreError::Internal(format!("unreadable tenant of a due sweep: {e}"))
            })?;
            due.push(Due {
                tenant,
                announced: doc.get_i64("v").unwrap_or(0),
                last: doc
                    .get_datetime("last")
                    .map_or(Timestamp::from_millis(0), timestamp),
                leftover_at: doc.get_datetime(LEFTOVER_AT).ok().map(timestamp),
            });
        }
        Ok(due)
    }

    /// Step 2 of the module docs: the next [`LEFTOVER_TENANTS_PER_PASS`]
    /// tenants by name after the last one visited, from their set-up
    /// records (one find of their keys), starting over after the last.
    async fn leftover_round(&self) -> Result<Vec<TenantId>, StoreError> {
        let fail = |e: mongodb::error::Error| store_error(&e);
        let after = self.sweep_round_after();
        let cursor = self
            .schema()
            .find(doc! { field::ID: {
                "$gt": after.as_deref().unwrap_or(schema::TENANT_KEYS.0),
                "$lt": schema::TENANT_KEYS.1,
            } })
            .projection(doc! { field::ID: 1 })
            .sort(doc! { field::ID: 1 })
            .limit(LEFTOVER_TENANTS_PER_PASS)
            .max_time(self.max_time())
            .await
            .map_err(fail)?;
        let keys = ids(cursor).await.map_err(fail)?;
        // A short round reached the last tenant: the next starts over.
        let next = if (keys.len() as i64) < LEFTOVER_TENANTS_PER_PASS {
            None
        } else {
            keys.last().cloned()
        };
        self.set_sweep_round_after(next);
        Ok(schema::tenants_of(&keys))
    }

    /// Clears up to `limit` of `tenant`'s claims whose end passed by `now`
    /// (the module docs of [`Self::sweep_expired`]), staging their
    /// `issue.claim_expired` when `stage`.
    async fn expire_ended(
        &self,
        tenant: &TenantId,
        now: Timestamp,
        limit: i64,
        stage: bool,
    ) -> Result<Vec<ExpiredClaim>, StoreError> {
        let fail = |e: mongodb::error::Error| store_error(&e);
        let mut ended = self
            .issues(tenant)
            .find(doc! { field::CLAIM_EXPIRES_AT: { "$lte": date(now) } })
            .sort(doc! { field::CLAIM_EXPIRES_AT: 1 })
            .limit(limit)
            .max_time(self.max_time())
            .await
            .map_err(fail)?;
        let mut found = Vec::new();
        while ended.advance().await.map_err(fail)? {
            let doc = ended.deserialize_current().map_err(fail)?;
            if let (Ok(id), Some(claim)) = (doc.get_str(field::ID), raw_claim(&doc)?) {
                found.push((id.to_owned(), claim));
            }
        }
        let mut out = Vec::new();
        for (id, claim) in found {
            let issue_id = IssueId::parse(id.as_str()).map_err(StoreError::from)?;
            let staged = staged::when(stage, || staged::claim_expired(&issue_id, &claim, now));
            let change = Change::claim(
                ChangeKind::ClaimExpired,
                &issue_id,
                0,
                now,
                &system_author(),
                Some(&claim),
                None,
            );
            let cleared = self
                .issues(tenant)
                .find_one_and_update(
                    doc! {
                        field::ID: id.as_str(),
                        field::CLAIM_RUN: claim.run.as_str(),
                        field::CLAIM_GRANT: claim.grant.as_str(),
                        field::CLAIM_EXPIRES_AT: date(claim.expires_at),
                    },
                    with_staged(claim_write(None, &change), &staged),
                )
                .return_document(ReturnDocument::After)
                .projection(issue_projection())
                .max_time(self.max_time())
                .await
                .map_err(fail)?;
            let Some(doc) = cleared else { continue };
            let issue = issue_from_doc(tenant, &doc)?;
            self.queue_staged(tenant, &issue, &staged, false, None)
                .await;
            out.push(ExpiredClaim {
                tenant: tenant.clone(),
                issue: issue.id,
                version: issue.version,
                claim,
            });
        }
        Ok(out)
    }

    /// The last move for a tenant the pass found due: its time set to the
    /// earliest end of a claim it still holds (still past when this pass
    /// left ended claims), kept no later than the last announced claim's
    /// write can land (the module docs) and than leftovers announced and
    /// not yet due, or its document deleted when nothing is left; unless
    /// something was announced since the pass read it, whose earlier time
    /// then stands.
    async fn rearm(&self, due: &Due, now: Timestamp) -> Result<(), StoreError> {
        let fail = |e: mongodb::error::Error| store_error(&e);
        let earliest = self
            .earliest_claim_end(&due.tenant, self.max_time())
            .await
            .map_err(fail)?;
        let waiting = due.leftover_at.filter(|_| !due.leftovers_due(now));
        let next = due_again_at(earliest, due.last, waiting, now);
        let read = doc! { field::ID: due.tenant.as_str(), "v": due.announced };
        match next {
            Some(at) => {
                let mut update = doc! { "$set": { "at": date(at) } };
                if due.leftovers_due(now) {
                    update.insert("$unset", doc! { LEFTOVER_AT: "" });
                }
                self.sweep_due().update_one(read, update).await.map(drop)
            }
            None => self.sweep_due().delete_one(read).await.map(drop),
        }
        .map_err(fail)
    }
}

/// When a tenant is due again (`None`: not until something is announced):
/// at its earliest claim end `earliest`, but no later than its last claim
/// announcement `last` plus [`ANNOUNCED_WRITE_LANDS`] while that write may
/// still land (the module docs), nor than its announced leftovers still
/// `waiting` for their grace.
fn due_again_at(
    earliest: Option<Timestamp>,
    last: Timestamp,
    waiting: Option<Timestamp>,
    now: Timestamp,
) -> Option<Timestamp> {
    let landed = last.plus_millis(ANNOUNCED_WRITE_LANDS);
    let landing = Some(landed).filter(|landed| *landed > now);
    [earliest, landing, waiting].into_iter().flatten().min()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_is_due_at_its_earliest_claim_an_announced_write_landing_or_its_leftovers() {
        let now = Timestamp::from_millis(1_000_000);
        let ms = |millis: i64| Timestamp::from_millis(millis);
        let long_ago = ms(now.as_millis() - ANNOUNCED_WRITE_LANDS - 1);
        let just_now = ms(now.as_millis() - 1_000);
        let landed = just_now.plus_millis(ANNOUNCED_WRITE_LANDS);
        // Every announced write has landed: the claims alone say.
        assert_eq!(due_again_at(None, long_ago, None, now), None);
        assert_eq!(
            due_again_at(Some(ms(2_000_000)), long_ago, None, now),
            Some(ms(2_000_000))
        );
        // One may still land: no later than when it has.
        assert_eq!(due_again_at(None, just_now, None, now), Some(landed));
        assert_eq!(
            due_again_at(Some(ms(2_000_000)), just_now, None, now),
            Some(landed)
        );
        assert_eq!(
            due_again_at(Some(ms(1_010_000)), just_now, None, now),
            Some(ms(1_010_000))
        );
        // A claim the pass could not clear (past its limit) keeps it due.
        assert_eq!(
            due_again_at(Some(ms(999_000)), long_ago, None, now),
            Some(ms(999_000))
        );
        // Leftovers announced, not yet due: no later than their time.
        let leftovers = Some(ms(1_005_000));
        assert_eq!(due_again_at(None, long_ago, leftovers, now), leftovers);
        assert_eq!(
            due_again_at(Some(ms(2_000_000)), just_now, leftovers, now),
            leftovers
        );
        assert_eq!(
            due_again_at(Some(ms(1_002_000)), long_ago, leftovers, now),
            Some(ms(1_002_000))
        );
    }
}
