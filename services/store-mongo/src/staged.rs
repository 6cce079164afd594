//! Webhook events staged on the document they are about, so that a board
//! write and its deliveries cannot part.
//!
//! A MongoDB board write is one single-document update and its deliveries
//! are documents of another collection, so the two cannot be written
//! together. Instead, for a tenant with webhook endpoints, every write
//! that causes an event also writes a marker of it into the written
//! document's `staged_events`, in the same update or insert: an issue
//! (`issue.created`, `issue.updated`, `issue.closed`, `issue.commented`,
//! `issue.claimed`, `issue.claim_expired`), a grant (`run.started`,
//! `run.ended`), an approval item (`approval.requested`,
//! `approval.decided`), a tool pin (`upstream.tool_changed`). Then:
//!
//! 1. Right after the write, before it is acknowledged, the writer queues
//!    the marked events' deliveries and clears the markers
//!    ([`MongoStore::queue_staged_on`]).
//! 2. Markers left behind (the process died between the write and the
//!    queueing, an outbox insert failed, the store did not answer in time)
//!    are queued by the claim sweeper (`expire_claims`, every second on
//!    the server, from any replica) once they are [`STAGED_GRACE_MILLIS`]
//!    old: [`MongoStore::queue_left_staged_shared`] for grants, approvals
//!    and tool pins at every pass; [`MongoStore::queue_left_staged`] for
//!    the issues of a tenant that has an endpoint, after the grace when
//!    the writer lived to announce the tenant to the sweeper, else when
//!    the sweeper's round reaches the tenant (`sweep.rs`: 50 tenants a
//!    pass, so within tenants ÷ 50 seconds).
//! 3. Markers left on the issues of a tenant whose last endpoint is then
//!    deleted go with it ([`MongoStore::drop_staged_of_unhooked`]), as its
//!    pending deliveries do: the sweeper would never look at them.
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
//! and its data: for an issue's event what it adds to the issue's summary
//! (a comment's id and author, a claim), the summary itself made when the
//! marker is queued, from the issue as the write left it, or, for the
//! sweeper, as it is then; for the others the whole data, as written.
//!
//! What it costs: a write asks whether its tenant has endpoints before the
//! write (one indexed find, which the queueing made after the write
//! before; a revocation reads its grant first, for the tenant), and with
//! endpoints one more update after the queueing (the markers cleared); a
//! tenant without endpoints pays the find only.

use crate::codec::{created_doc, field};
use crate::error::store_error;
use crate::schema;
use crate::store::MongoStore;
use crate::webhooks::{Occurrence, occurrence_name};
use corkboard_board::webhook::{self, WebhookEvent};
use corkboard_board::{Claim, Comment, Issue, IssueId, StoreError, TenantId, Timestamp};
use mongodb::Collection;
use mongodb::bson::{Bson, Document, doc};

/// How old a marker is before the sweeper queues it: the writer that
/// staged it queues it within milliseconds, so only one stalled for this
/// long races the sweeper (and then nothing is queued twice, see the
/// module docs).
pub const STAGED_GRACE_MILLIS: i64 = 10_000;

/// Documents whose markers one sweep queues per tenant's issues, and per
/// shared collection.
const STAGED_PER_PASS: i64 = 100;

/// Markers one document holds at most, so a document cannot grow without
/// bound while the outbox refuses inserts: a writer pushing more keeps the
/// newest, and the sweeper that finds a document full logs an error (the
/// events let go are not counted anywhere). Reaching it takes this many
/// writes of one document whose deliveries all failed to queue while the
/// sweeper, every second, could not queue one either; a marker is a few
/// hundred bytes.
const STAGED_KEPT: i64 = 1_000;

/// One event staged on the document it is about.
#[derive(Debug, Clone)]
pub(crate) struct StagedEvent {
    pub event: WebhookEvent,
    /// What made the event once (the issue of a create, the comment of a
    /// comment, the version of an update, the claim of a claim, the grant
    /// of a run, the approval item): with `event`, the marker's name and
    /// its deliveries' ids.
    pub key: String,
    pub at: Timestamp,
    pub data: EventData,
}

/// A staged event's data.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum EventData {
    /// An issue's event: the fields it adds to the issue's summary (or
    /// `Null`), the summary made when it is queued.
    Summary(serde_json::Value),
    /// Any other event's data, whole, as its write made it.
    Whole(serde_json::Value),
}

impl StagedEvent {
    /// An issue's event (its data the issue's summary).
    pub(crate) fn new(event: WebhookEvent, key: impl Into<String>, at: Timestamp) -> Self {
        Self {
            event,
            key: key.into(),
            at,
            data: EventData::Summary(serde_json::Value::Null),
        }
    }

    /// An event with its whole data (not about an issue).
    pub(crate) fn whole(
        event: WebhookEvent,
        key: impl Into<String>,
        at: Timestamp,
        data: serde_json::Value,
    ) -> Self {
        Self {
            event,
            key: key.into(),
            at,
            data: EventData::Whole(data),
        }
    }

    /// With `extra` merged into the issue's summary.
    pub(crate) fn with(mut self, extra: serde_json::Value) -> Self {
        self.data = EventData::Summary(extra);
        self
    }

    /// The marker's name, unique on its document: its occurrence's.
    fn name(&self) -> String {
        occurrence_name(self.event, &self.key)
    }

    fn to_doc(&self) -> Document {
        let mut doc = doc! {
            "name": self.name(),
            "event": self.event.as_str(),
            "key": &self.key,
            "at": self.at.as_millis(),
        };
        match &self.data {
            EventData::Summary(extra) => doc.insert("extra", extra.to_string()),
            EventData::Whole(data) => doc.insert("data", data.to_string()),
        };
        doc
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
        let json = |name: &str| match doc.get_str(name) {
            Ok(text) => serde_json::from_str(text)
                .map(Some)
                .map_err(|e| bad(e.to_string())),
            Err(_) => Ok(None),
        };
        let data = match json("data")? {
            Some(data) => EventData::Whole(data),
            None => EventData::Summary(json("extra")?.unwrap_or_default()),
        };
        Ok(Self {
            event,
            key: doc
                .get_str("key")
                .map_err(|e| bad(e.to_string()))?
                .to_owned(),
            at: Timestamp::from_millis(at),
            data,
        })
    }

    /// The event's data: whole, or the issue's summary with the event's
    /// fields merged in (an issue's event queued without its issue, which
    /// no caller does, gets its fields alone).
    fn data(&self, issue: Option<&Issue>) -> serde_json::Value {
        match (&self.data, issue) {
            (EventData::Whole(data), _) => data.clone(),
            (EventData::Summary(extra), Some(issue)) => {
                let mut data = webhook::issue_summary(issue);
                if let (Some(data), Some(extra)) = (data.as_object_mut(), extra.as_object()) {
                    for (name, value) in extra {
                        data.insert(name.clone(), value.clone());
                    }
                }
                data
            }
            (EventData::Summary(extra), None) => extra.clone(),
        }
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

/// An issue's `issue.claimed` by `claim` (named by the claim).
pub(crate) fn claimed(id: &IssueId, claim: &Claim) -> StagedEvent {
    of_claim(WebhookEvent::IssueClaimed, id, claim, claim.claimed_at)
}

/// The `issue.claim_expired` of `claim`, cleared at `at` (named by the
/// claim).
pub(crate) fn claim_expired(id: &IssueId, claim: &Claim, at: Timestamp) -> StagedEvent {
    of_claim(WebhookEvent::IssueClaimExpired, id, claim, at)
}

/// A claim's `event` at `at`, named by the claim (its issue, its run and
/// when it was taken), the claim in its data.
fn of_claim(event: WebhookEvent, id: &IssueId, claim: &Claim, at: Timestamp) -> StagedEvent {
    let key = format!("{id} {} {}", claim.run, claim.claimed_at.as_millis());
    StagedEvent::new(event, key, at).with(serde_json::json!({ "claim": claim }))
}

/// The event `event` makes when `stage` (its tenant has endpoints: what a
/// write asks before it), else none.
pub(crate) fn when(stage: bool, event: impl FnOnce() -> StagedEvent) -> Vec<StagedEvent> {
    if stage { vec![event()] } else { Vec::new() }
}

/// `events` as the value of a document's [`field::STAGED`].
fn markers(events: &[StagedEvent]) -> Bson {
    Bson::Array(events.iter().map(|e| Bson::Document(e.to_doc())).collect())
}

/// Stages `events` on `doc`, a document about to be inserted (or to
/// replace one): nothing for no events.
pub(crate) fn insert_markers(doc: &mut Document, events: &[StagedEvent]) {
    if !events.is_empty() {
        doc.insert(field::STAGED, markers(events));
    }
}

/// A new issue's document, with its `issue.created` staged when `stage`.
pub(crate) fn created_doc_staged(issue: &Issue, stage: bool) -> Document {
    let mut doc = created_doc(issue);
    insert_markers(&mut doc, &when(stage, || created(issue)));
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

/// The markers a document holds.
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

/// The shared collections whose documents hold staged events (besides
/// each tenant's issues), with the name of what they hold.
const STAGED_SHARED: [(&str, &str); 3] = [
    (schema::GRANTS, "grant"),
    (crate::approvals::APPROVALS, "approval"),
    (schema::TOOL_PINS, "tool pin"),
];

impl MongoStore {
    /// Step 1 of the module docs for an issue: queues `events`, staged on
    /// `issue` by the write that returned it, then clears their markers
    /// ([`Self::queue_staged_on`]). When they stay staged, the tenant is
    /// announced to the sweeper ([`Self::announce_leftover`]), which then
    /// queues them after the grace instead of at its round's turn.
    pub(crate) async fn queue_staged(
        &self,
        tenant: &TenantId,
        issue: &Issue,
        events: &[StagedEvent],
        replayed: bool,
        record: Option<&Document>,
    ) {
        let on = StagedOn {
            collection: self.issues(tenant),
            what: "issue",
            id: issue.id.as_str(),
        };
        let queued = self
            .queue_staged_on(tenant, &on, Some(issue), events, replayed, record)
            .await;
        if !queued {
            self.announce_leftover(tenant, Timestamp::now());
        }
    }

    /// Step 1 of the module docs: queues `events`, staged on the document
    /// `on` names (`issue`: the issue as the write left it, for the
    /// summaries of an issue's events), then clears their markers.
    /// `replayed`: the caller is not the write that staged them (a replay
    /// by key, the sweeper), so only endpoints registered by then are told,
    /// and `record` (a keyed write's idempotency record) says whether an
    /// earlier attempt queued them all. A failure is logged, never the
    /// write's: the markers stay for the sweeper. Whether nothing is left
    /// staged.
    async fn queue_staged_on(
        &self,
        tenant: &TenantId,
        on: &StagedOn<'_>,
        issue: Option<&Issue>,
        events: &[StagedEvent],
        replayed: bool,
        record: Option<&Document>,
    ) -> bool {
        if events.is_empty() {
            return true;
        }
        let queued = tokio::time::timeout(self.max_time(), async {
            for event in events {
                let occurrence = Occurrence {
                    key: &event.key,
                    at: event.at,
                    replayed,
                    record: record.cloned(),
                };
                self.queue(tenant, event.event, event.data(issue), occurrence)
                    .await?;
            }
            on.clear(events).await
        })
        .await;
        let failure = match queued {
            Ok(Ok(())) => return true,
            Ok(Err(err)) => err.to_string(),
            Err(_) => "the store did not answer in time".to_owned(),
        };
        tracing::warn!(
            tenant = %tenant,
            document = on.what,
            id = on.id,
            error = %failure,
            "webhook deliveries of a board write are not queued yet; they stay staged on its \
             document and the claim sweeper queues them"
        );
        false
    }

    /// Step 1 of the module docs for a document of a shared collection (one
    /// of [`STAGED_SHARED`]): queues `events`, staged on document `id` of
    /// `collection` by its write, then clears their markers.
    pub(crate) async fn queue_staged_shared(
        &self,
        tenant: &TenantId,
        collection: &'static str,
        id: &str,
        events: &[StagedEvent],
    ) {
        let what = STAGED_SHARED
            .iter()
            .find(|(name, _)| *name == collection)
            .map_or(collection, |(_, what)| what);
        let on = StagedOn {
            collection: self.database().collection(collection),
            what,
            id,
        };
        // Left staged, they are found at the sweeper's next pass, which
        // looks at the shared collections every time.
        self.queue_staged_on(tenant, &on, None, events, false, None)
            .await;
    }

    /// Step 2 of the module docs for `tenant`'s issues: queues the markers
    /// of up to [`STAGED_PER_PASS`] of them that are at least
    /// [`STAGED_GRACE_MILLIS`] old at `now` (the `staged_events.at` index);
    /// how many issues it found.
    pub(crate) async fn queue_left_staged(
        &self,
        tenant: &TenantId,
        now: Timestamp,
    ) -> Result<usize, StoreError> {
        let projection = crate::codec::issue_projection();
        let found = left_staged(&self.issues(tenant), now, projection, self.max_time()).await?;
        for (doc, events) in &found {
            let issue = crate::codec::issue_from_doc(tenant, doc)?;
            self.queue_staged(tenant, &issue, events, true, None).await;
        }
        Ok(found.len())
    }

    /// Step 2 of the module docs for the shared collections (grants,
    /// approvals, tool pins): the same, up to [`STAGED_PER_PASS`] documents
    /// of each, whatever their tenant; how many documents it found.
    pub(crate) async fn queue_left_staged_shared(
        &self,
        now: Timestamp,
    ) -> Result<usize, StoreError> {
        let mut count = 0;
        for (name, what) in STAGED_SHARED {
            let collection = self.database().collection::<Document>(name);
            let projection = doc! { field::TENANT: 1, field::STAGED: 1 };
            let found = left_staged(&collection, now, projection, self.max_time()).await?;
            count += found.len();
            for (doc, events) in &found {
                let (Ok(id), Ok(tenant)) = (doc.get_str(field::ID), doc.get_str(field::TENANT))
                else {
                    continue;
                };
                let tenant = TenantId::parse(tenant)
                    .map_err(|e| StoreError::Internal(format!("unreadable {what} tenant: {e}")))?;
                let on = StagedOn {
                    collection: collection.clone(),
                    what,
                    id,
                };
                // Left staged, they are found again at the next pass.
                self.queue_staged_on(&tenant, &on, None, events, true, None)
                    .await;
            }
        }
        Ok(count)
    }

    /// After `tenant`'s last endpoint was deleted: the events its writes
    /// left staged on its issues (queueing failed, and the sweeper had not
    /// come) have nobody left to go to, and the sweeper looks only at the
    /// issues of tenants with endpoints, so they would stay on the issues
    /// for good; they go with the endpoint, as its pending deliveries do.
    /// Best effort: the endpoint is deleted whatever happens here.
    pub(crate) async fn drop_staged_of_unhooked(&self, tenant: &TenantId) {
        let dropped = async {
            if self.has_webhooks(tenant).await? {
                return Ok(());
            }
            self.issues(tenant)
                .update_many(
                    doc! { field::STAGED_AT: { "$gte": 0_i64 } },
                    doc! { "$unset": { field::STAGED: "" } },
                )
                .await
                .map(drop)
                .map_err(|e| store_error(&e))
        };
        if let Err(err) = dropped.await {
            tracing::warn!(
                tenant = %tenant, error = %err,
                "the events left staged on the issues of a tenant without endpoints were \
                 not removed; they stay on the issues, never delivered"
            );
        }
    }
}

/// The document events are staged on: its collection, what it is (for
/// logs) and its `_id`.
struct StagedOn<'a> {
    collection: Collection<Document>,
    what: &'static str,
    id: &'a str,
}

impl StagedOn<'_> {
    /// Clears the markers of `events`, queued.
    async fn clear(&self, events: &[StagedEvent]) -> Result<(), StoreError> {
        let names: Vec<String> = events.iter().map(StagedEvent::name).collect();
        // Usually they are all the document holds: then the field goes
        // whole, so a document carries it only while something is staged;
        // else just these are pulled.
        let whole = self
            .collection
            .update_one(
                doc! {
                    field::ID: self.id,
                    field::STAGED: { "$size": names.len() as i64 },
                    field::STAGED_NAME: { "$all": &names },
                },
                doc! { "$unset": { field::STAGED: "" } },
            )
            .await
            .map_err(|e| store_error(&e))?;
        if whole.matched_count == 0 {
            self.collection
                .update_one(
                    doc! { field::ID: self.id },
                    doc! { "$pull": { field::STAGED: { "name": { "$in": names } } } },
                )
                .await
                .map_err(|e| store_error(&e))?;
        }
        Ok(())
    }
}

/// Up to [`STAGED_PER_PASS`] documents of `collection` with markers at
/// least [`STAGED_GRACE_MILLIS`] old at `now` (read with `projection`,
/// within `max_time`), each with those markers.
async fn left_staged(
    collection: &Collection<Document>,
    now: Timestamp,
    projection: Document,
    max_time: std::time::Duration,
) -> Result<Vec<(Document, Vec<StagedEvent>)>, StoreError> {
    let fail = |e: mongodb::error::Error| store_error(&e);
    let before = now.plus_millis(-STAGED_GRACE_MILLIS).as_millis();
    let mut left = collection
        .find(doc! { field::STAGED_AT: { "$lte": before } })
        .projection(projection)
        .limit(STAGED_PER_PASS)
        .max_time(max_time)
        .await
        .map_err(fail)?;
    let mut found = Vec::new();
    while left.advance().await.map_err(fail)? {
        let doc = left.deserialize_current().map_err(fail)?;
        let staged = staged_of(&doc)?;
        if staged.len() >= STAGED_KEPT as usize {
            // Full: writes pushing more have let the oldest go, unqueued
            // and uncounted (how many, nothing recorded).
            tracing::error!(
                collection = collection.name(),
                id = doc.get_str(field::ID).unwrap_or("?"),
                kept = STAGED_KEPT,
                "a document holds the most staged webhook events it keeps; older events of it \
                 may have been dropped undelivered (their queueing has failed for a long time: \
                 see the warnings before this)"
            );
        }
        let events: Vec<StagedEvent> = staged
            .into_iter()
            .filter(|e| e.at.as_millis() <= before)
            .collect();
        found.push((doc, events));
    }
    Ok(found)
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
        assert_eq!(back.data, staged.data);
        assert_eq!(back.name(), "issue.commented cmt_1");
        let none = StagedEvent::from_doc(
            &StagedEvent::new(WebhookEvent::IssueCreated, "iss", at).to_doc(),
        )
        .unwrap();
        assert_eq!(none.data, EventData::Summary(serde_json::Value::Null));
        let data = serde_json::json!({ "run": { "id": "run-1" } });
        let whole = StagedEvent::whole(WebhookEvent::RunStarted, "grt_1", at, data.clone());
        let back = StagedEvent::from_doc(&whole.to_doc()).unwrap();
        assert_eq!(back.data, EventData::Whole(data.clone()));
        assert_eq!(back.data(None), data);
    }
}
