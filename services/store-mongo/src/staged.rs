//! Webhook events staged on the issue document they are about, so that a
//! board write and its deliveries cannot part.
//!
//! A MongoDB board write is one single-document update and its deliveries
//! are documents of another collection, so the two cannot be written
//! together. Instead, for a tenant with webhook endpoints, a write that
//! causes an event (`issue.created`, `issue.updated`, `issue.closed`,
//! `issue.commented`, `issue.claimed`, `issue.claim_expired`) also pushes a
//! marker of it onto the issue's `staged_events` in the same update. Then:
//!
//! 1. Right after the write, before it is acknowledged, the writer queues
//!    the marked events' deliveries and pulls the markers
//!    ([`MongoStore::queue_staged`]).
//! 2. Markers left behind (the process died between the write and the
//!    queueing, an outbox insert failed, the store did not answer in time)
//!    are queued by the claim sweeper (`expire_claims`, every second on
//!    the server) once they are [`STAGED_GRACE_MILLIS`] old
//!    ([`MongoStore::queue_left_staged`]), from any replica.
//!
//! Each delivery's id is derived from its marker and its endpoint
//! (`DeliveryId::of_event`), so queueing a marker twice (the writer and the
//! sweeper, or two sweepers) inserts each delivery once (the outbox's
//! unique `_id`). A marker is pulled only after all its deliveries are in
//! the outbox, so a delivery is never lost between the two; one delivered
//! and removed in the moment between the queueing and the pull may be sent
//! again by a sweeper, under the same id its receiver dedupes by (the grace
//! keeps that to writers stalled for seconds).
//!
//! A marker holds the event, its occurrence (what made it once, and when)
//! and what the event adds to the issue's summary (a comment's id and
//! author, a claim); the summary itself is made when the marker is queued,
//! from the issue as the write left it, or, for the sweeper, as it is then.
//!
//! Run, approval and upstream events are not issue writes: they are still
//! queued after their write (`MongoStore::queue_after`), and lost if the
//! process dies in between.
//!
//! What it costs: a write of a tenant with endpoints asks whether it has
//! any before the write (one indexed find, which the queueing made after
//! the write before), and one more update after the queueing (the pull);
//! a tenant without endpoints pays the find only.

use crate::codec::{created_doc, field};
use crate::error::store_error;
use crate::store::MongoStore;
use crate::webhooks::Occurrence;
use corkboard_board::webhook::{self, WebhookEvent};
use corkboard_board::{Claim, Comment, Issue, IssueId, StoreError, TenantId, Timestamp};
use mongodb::bson::{Bson, Document, doc};

/// How old a marker is before the sweeper queues it: the writer that
/// staged it queues it within milliseconds, so only one stalled for this
/// long races the sweeper (and then nothing is queued twice, see the
/// module docs).
pub const STAGED_GRACE_MILLIS: i64 = 10_000;

/// Issues whose markers one sweep queues per tenant.
const STAGED_PER_PASS: i64 = 100;

/// Markers one issue holds at most: a writer pushing more keeps the newest
/// (a marker past it is an event whose deliveries failed to queue this many
/// times in a row while the sweeper could not catch up).
const STAGED_KEPT: i64 = 64;

/// One event staged on its issue.
#[derive(Debug, Clone)]
pub(crate) struct StagedEvent {
    pub event: WebhookEvent,
    /// What made the event once (the issue of a create, the comment of a
    /// comment, the version of an update, the claim of a claim): with
    /// `event`, the marker's name and its deliveries' ids.
    pub key: String,
    pub at: Timestamp,
    /// Fields the event adds to the issue's summary, or `Null`.
    pub extra: serde_json::Value,
}

impl StagedEvent {
    pub(crate) fn new(event: WebhookEvent, key: impl Into<String>, at: Timestamp) -> Self {
        Self {
            event,
            key: key.into(),
            at,
            extra: serde_json::Value::Null,
        }
    }

    /// With `extra` merged into the event's data.
    pub(crate) fn with(mut self, extra: serde_json::Value) -> Self {
        self.extra = extra;
        self
    }

    /// The marker's name, unique on its issue.
    fn name(&self) -> String {
        format!("{} {}", self.event.as_str(), self.key)
    }

    fn to_doc(&self) -> Document {
        doc! {
            "name": self.name(),
            "event": self.event.as_str(),
            "key": &self.key,
            "at": self.at.as_millis(),
            "extra": self.extra.to_string(),
        }
    }

    fn from_doc(doc: &Document) -> Result<Self, StoreError> {
        let bad = |why: String| StoreError::Internal(format!("unreadable staged event: {why}"));
        let event = WebhookEvent::parse(doc.get_str("event").map_err(|e| bad(e.to_string()))?)
            .map_err(|e| bad(e.to_string()))?;
        let at = match doc.get("at") {
            Some(Bson::Int64(n)) => *n,
            Some(Bson::Int32(n)) => i64::from(*n),
            _ => return Err(bad("no time".to_owned())),
        };
        let extra = match doc.get_str("extra") {
            Ok(text) => serde_json::from_str(text).map_err(|e| bad(e.to_string()))?,
            Err(_) => serde_json::Value::Null,
        };
        Ok(Self {
            event,
            key: doc
                .get_str("key")
                .map_err(|e| bad(e.to_string()))?
                .to_owned(),
            at: Timestamp::from_millis(at),
            extra,
        })
    }

    /// The event's data: the issue's summary with `extra` merged in.
    fn data(&self, issue: &Issue) -> serde_json::Value {
        let mut data = webhook::issue_summary(issue);
        if let (Some(data), Some(extra)) = (data.as_object_mut(), self.extra.as_object()) {
            for (name, value) in extra {
                data.insert(name.clone(), value.clone());
            }
        }
        data
    }
}

/// An issue's `issue.created` (named by the issue, as a replay by key
/// names it).
pub(crate) fn created(issue: &Issue) -> StagedEvent {
    StagedEvent::new(
        WebhookEvent::IssueCreated,
        issue.id.as_str(),
        issue.created_at,
    )
}

/// A comment's `issue.commented` (named by the comment).
pub(crate) fn commented(comment: &Comment) -> StagedEvent {
    StagedEvent::new(
        WebhookEvent::IssueCommented,
        comment.id.as_str(),
        comment.created_at,
    )
    .with(serde_json::json!({ "comment": { "id": comment.id, "author": comment.author } }))
}

/// The events of an update that made `version` (named by it).
pub(crate) fn updated(
    id: &IssueId,
    version: u64,
    events: Vec<WebhookEvent>,
    at: Timestamp,
) -> Vec<StagedEvent> {
    let key = format!("{id}@{version}");
    events
        .into_iter()
        .map(|event| StagedEvent::new(event, key.clone(), at))
        .collect()
}

/// An issue's `issue.claimed` by `claim` (named by the claim: its run and
/// when it was taken).
pub(crate) fn claimed(id: &IssueId, claim: &Claim) -> StagedEvent {
    StagedEvent::new(
        WebhookEvent::IssueClaimed,
        format!("{id} {} {}", claim.run, claim.claimed_at.as_millis()),
        claim.claimed_at,
    )
    .with(serde_json::json!({ "claim": claim }))
}

/// The `issue.claim_expired` of `claim`, cleared at `at` (named by the
/// claim).
pub(crate) fn claim_expired(id: &IssueId, claim: &Claim, at: Timestamp) -> StagedEvent {
    StagedEvent::new(
        WebhookEvent::IssueClaimExpired,
        format!("{id} {} {}", claim.run, claim.claimed_at.as_millis()),
        at,
    )
    .with(serde_json::json!({ "claim": claim }))
}

/// `events` as the value of an inserted document's [`field::STAGED`].
pub(crate) fn markers(events: &[StagedEvent]) -> Bson {
    Bson::Array(events.iter().map(|e| Bson::Document(e.to_doc())).collect())
}

/// A new issue's document, with its `issue.created` staged when `stage`.
pub(crate) fn created_doc_staged(issue: &Issue, stage: bool) -> Document {
    let mut doc = created_doc(issue);
    if stage {
        doc.insert(field::STAGED, markers(&[created(issue)]));
    }
    doc
}

/// `update` (an update document) staging `events` too, in its `$push`.
pub(crate) fn with_staged(mut update: Document, events: &[StagedEvent]) -> Document {
    if events.is_empty() {
        return update;
    }
    let staged = doc! { "$each": markers(events), "$slice": -STAGED_KEPT };
    match update.get_document_mut("$push") {
        Ok(push) => {
            push.insert(field::STAGED, staged);
        }
        Err(_) => {
            update.insert("$push", doc! { field::STAGED: staged });
        }
    }
    update
}

/// The markers of an issue document.
fn staged_of(doc: &Document) -> Result<Vec<StagedEvent>, StoreError> {
    match doc.get(field::STAGED) {
        Some(Bson::Array(items)) => items
            .iter()
            .filter_map(Bson::as_document)
            .map(StagedEvent::from_doc)
            .collect(),
        _ => Ok(Vec::new()),
    }
}

impl MongoStore {
    /// Step 1 of the module docs: queues `events`, staged on `issue` by the
    /// write that returned it, then pulls their markers. `replayed`: the
    /// caller is not the write that staged them (a replay by key, the
    /// sweeper), so only endpoints registered by then are told, and
    /// `record` (a keyed write's idempotency record) says whether an
    /// earlier attempt queued them all. A failure is logged, never the
    /// write's: the markers stay for the sweeper.
    pub(crate) async fn queue_staged(
        &self,
        tenant: &TenantId,
        issue: &Issue,
        events: &[StagedEvent],
        replayed: bool,
        record: Option<&Document>,
    ) {
        if events.is_empty() {
            return;
        }
        let queued = tokio::time::timeout(self.max_time(), async {
            for event in events {
                let occurrence = Occurrence {
                    key: &event.key,
                    at: event.at,
                    replayed,
                    record: record.cloned(),
                };
                self.queue(tenant, event.event, event.data(issue), Some(occurrence))
                    .await?;
            }
            let names: Vec<String> = events.iter().map(StagedEvent::name).collect();
            // Usually they are all the issue holds: then the field goes
            // whole, so a document carries it only while something is
            // staged; else just these are pulled.
            let whole = self
                .issues(tenant)
                .update_one(
                    doc! {
                        field::ID: issue.id.as_str(),
                        field::STAGED: { "$size": names.len() as i64 },
                        field::STAGED_NAME: { "$all": &names },
                    },
                    doc! { "$unset": { field::STAGED: "" } },
                )
                .await
                .map_err(|e| store_error(&e))?;
            if whole.matched_count == 0 {
                self.issues(tenant)
                    .update_one(
                        doc! { field::ID: issue.id.as_str() },
                        doc! { "$pull": { field::STAGED: { "name": { "$in": names } } } },
                    )
                    .await
                    .map_err(|e| store_error(&e))?;
            }
            Ok::<(), StoreError>(())
        })
        .await;
        let failure = match queued {
            Ok(Ok(())) => return,
            Ok(Err(err)) => err.to_string(),
            Err(_) => "the store did not answer in time".to_owned(),
        };
        tracing::warn!(
            tenant = %tenant,
            issue = %issue.id,
            error = %failure,
            "webhook deliveries of a board write are not queued yet; they stay staged on the \
             issue and the claim sweeper queues them"
        );
    }

    /// Step 2 of the module docs: queues the markers of up to
    /// [`STAGED_PER_PASS`] of `tenant`'s issues that are at least
    /// [`STAGED_GRACE_MILLIS`] old at `now` (the `staged_events.at` index);
    /// how many issues it found.
    pub(crate) async fn queue_left_staged(
        &self,
        tenant: &TenantId,
        now: Timestamp,
    ) -> Result<usize, StoreError> {
        let fail = |e: mongodb::error::Error| store_error(&e);
        let before = now.plus_millis(-STAGED_GRACE_MILLIS).as_millis();
        let mut left = self
            .issues(tenant)
            .find(doc! { field::STAGED_AT: { "$lte": before } })
            .projection(doc! { field::HISTORY: 0 })
            .limit(STAGED_PER_PASS)
            .max_time(self.max_time())
            .await
            .map_err(fail)?;
        let mut found = Vec::new();
        while left.advance().await.map_err(fail)? {
            let doc = left.deserialize_current().map_err(fail)?;
            let events: Vec<StagedEvent> = staged_of(&doc)?
                .into_iter()
                .filter(|e| e.at.as_millis() <= before)
                .collect();
            found.push((crate::codec::issue_from_doc(tenant, &doc)?, events));
        }
        for (issue, events) in &found {
            self.queue_staged(tenant, issue, events, true, None).await;
        }
        Ok(found.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_reads_back_as_written() {
        let at = Timestamp::from_millis(1_700_000_000_123);
        let staged = StagedEvent::new(WebhookEvent::IssueCommented, "cmt_1", at)
            .with(serde_json::json!({ "comment": { "id": "cmt_1" } }));
        let back = StagedEvent::from_doc(&staged.to_doc()).unwrap();
        assert_eq!(back.event, WebhookEvent::IssueCommented);
        assert_eq!(back.key, "cmt_1");
        assert_eq!(back.at, at);
        assert_eq!(back.extra, staged.extra);
        assert_eq!(back.name(), "issue.commented cmt_1");
        let none = StagedEvent::from_doc(
            &StagedEvent::new(WebhookEvent::IssueCreated, "iss", at).to_doc(),
        )
        .unwrap();
        assert!(none.extra.is_null());
    }
}
