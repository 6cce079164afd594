//! Webhook endpoints (`webhooks`) and the outbox of undelivered deliveries
//! (`webhook_outbox`), one collection each for every tenant (claims look
//! across tenants).
//!
//! The guarantee: a MongoDB board write is one single-document update,
//! and its deliveries are separate documents, so they are inserted after
//! the write succeeds and before the write is acknowledged. Every write
//! that causes an event first stages it on the document it writes, in the
//! same update (`crate::staged`): a process that dies between the write
//! and the queueing, or an insert that fails (logged as a warning), leaves
//! it staged, and the claim sweeper queues it; a write is never lost or
//! failed because of its deliveries.
//! A staged event's deliveries' ids come from the write and the endpoint
//! ([`Occurrence`]), so queueing it again inserts nothing twice; creates
//! and comments retried with their idempotency key queue theirs again
//! too, and the key's record notes when they are all queued, so a replay
//! after their delivery sends nothing again (only an attempt stopped
//! between queueing and noting leaves one that was delivered since to be
//! sent again, under the same id the receiver dedupes by). An event past
//! the tenant's pending bound is counted as `dropped` at each endpoint
//! once, replays included: the endpoint keeps its newest dropped ids with
//! the count ([`DROPPED_IDS`]). (A look-up a
//! write makes before it is applied, whether the tenant has endpoints at
//! all, fails that write instead: it is not yet applied, and the retry is
//! safe.) Claims
//! lease each delivery with its own conditional update, so two replicas
//! never claim the same one at once, and share them out as the domain says
//! (`webhook::fair_share`; per endpoint at most `per_endpoint` live leases,
//! none while it is paused: `failures`, `paused_until` on the endpoint).

use crate::codec::field;
use crate::error::{is_duplicate_key, store_error, two_write_deletion};
use crate::schema::{IndexSet, OUTBOX, WEBHOOKS};
use crate::store::MongoStore;
use corkboard_board::webhook::{
    self, AttemptOutcome, ClaimedDelivery, DueDelivery, NewWebhook, Webhook, WebhookEvent,
    WebhookEvents, WebhookSecret, WebhookStatus, WebhookUrl, WebhookWithStatus, limits,
};
use corkboard_board::{
    DeliveryId, StoreError, TenantId, Timestamp, ValidationError, WebhookId, WebhookStore,
};
use futures_util::StreamExt;
use mongodb::Collection;
use mongodb::bson::{Bson, Document, doc};
use mongodb::options::ReturnDocument;
use std::collections::HashMap;
use std::time::Duration;

/// Endpoints a claim reads the due deliveries of at once.
const PROBES_AT_ONCE: usize = 8;

/// The field of an endpoint holding the ids of its newest deliveries
/// counted as `dropped`, so that a replay of the event (the sweeper
/// queueing a marker whose write counted its drop and then failed to clear
/// it, or a keyed write retried before its record said so) does not count
/// it again: the count and the id are one update.
const DROPPED_IDS: &str = "dropped_ids";

/// Ids [`DROPPED_IDS`] keeps, the newest: a replay comes within seconds of
/// its first attempt (the sweeper's grace), so it finds its id unless more
/// than this many other events were dropped at the endpoint meanwhile. A
/// few tens of bytes each, read by no query (every read of an endpoint
/// leaves the field out).
const DROPPED_IDS_KEPT: i32 = 256;

/// The projection every read of an endpoint's whole document uses.
fn endpoint_fields() -> Document {
    doc! { DROPPED_IDS: 0 }
}

fn millis(t: Timestamp) -> i64 {
    t.as_millis()
}

fn corrupt(what: &str, detail: impl std::fmt::Display) -> StoreError {
    StoreError::Internal(format!("unreadable {what}: {detail}"))
}

fn int(doc: &Document, key: &str) -> i64 {
    match doc.get(key) {
        Some(Bson::Int64(n)) => *n,
        Some(Bson::Int32(n)) => i64::from(*n),
        _ => 0,
    }
}

fn text<'a>(doc: &'a Document, key: &str) -> Result<&'a str, StoreError> {
    doc.get_str(key).map_err(|e| corrupt(key, e))
}

/// One event as its write names it, so that queueing it again finds the
/// deliveries already queued ([`DeliveryId::of_event`]): `key` is what the
/// write made once (the issue of an `issue.created`, the comment of an
/// `issue.commented`), `at` when it made it.
pub(crate) struct Occurrence<'a> {
    pub key: &'a str,
    pub at: Timestamp,
    /// Whether this is a replay of the write (its first attempt queued
    /// some, all or none of the deliveries).
    pub replayed: bool,
    /// The filter of the write's idempotency record, where the write was
    /// keyed: once its deliveries are queued the record says so
    /// ([`EVENTS_QUEUED`]), and a replay that finds it saying so queues
    /// nothing (what was queued may have been delivered and removed since).
    pub record: Option<Document>,
}

/// The field of an idempotency record set once its write's deliveries
/// are all in the outbox.
const EVENTS_QUEUED: &str = "events_queued";

/// How much later than an event a replay still counts an endpoint as
/// registered before it: the registering process's clock and the writing
/// one's may disagree by this much.
const REGISTERED_SLACK_MILLIS: i64 = 5_000;

impl Occurrence<'_> {
    /// The occurrence's name for `event`'s deliveries.
    fn name(&self, event: WebhookEvent) -> String {
        occurrence_name(event, self.key)
    }
}

/// The name of `event` made once by `key`: its deliveries' ids derive from
/// it ([`DeliveryId::of_event`]), and a staged event's marker is named by
/// it (`crate::staged`).
pub(crate) fn occurrence_name(event: WebhookEvent, key: &str) -> String {
    format!("{} {key}", event.as_str())
}

impl MongoStore {
    fn webhooks(&self) -> Collection<Document> {
        self.database().collection(WEBHOOKS)
    }

    fn outbox(&self) -> Collection<Document> {
        self.database().collection(OUTBOX)
    }

    /// The indexes claims and per-tenant look-ups use
    /// (`schema::webhook_indexes`, `schema::outbox_indexes`), set up once
    /// per schema version.
    pub(crate) async fn ensure_webhook_indexes(&self) -> Result<(), StoreError> {
        self.ensure_set(&IndexSet::Shared(WEBHOOKS)).await?;
        self.ensure_set(&IndexSet::Shared(OUTBOX)).await
    }

    /// Which of `among` have an endpoint (one read of their endpoints'
    /// tenants, along the tenant index: at most `ENDPOINTS_PER_TENANT_MAX`
    /// entries each).
    pub(crate) async fn tenants_with_webhooks(
        &self,
        among: &[&TenantId],
    ) -> Result<std::collections::HashSet<String>, StoreError> {
        if among.is_empty() {
            return Ok(std::collections::HashSet::new());
        }
        let among: Vec<&str> = among.iter().map(|tenant| tenant.as_str()).collect();
        let mut cursor = self
            .webhooks()
            .find(doc! { "tenant": { "$in": among } })
            .projection(doc! { "tenant": 1 })
            .max_time(self.max_time())
            .await
            .map_err(|e| store_error(&e))?;
        let mut tenants = std::collections::HashSet::new();
        while cursor.advance().await.map_err(|e| store_error(&e))? {
            let doc = cursor.deserialize_current().map_err(|e| store_error(&e))?;
            tenants.insert(text(&doc, "tenant")?.to_owned());
        }
        Ok(tenants)
    }

    /// Whether the tenant has any endpoint (so a write need not read more).
    /// Asked before a write, whose caller fails with the error: an answer
    /// of "none" on a failed look-up would drop the write's deliveries
    /// without a word.
    pub(crate) async fn has_webhooks(&self, tenant: &TenantId) -> Result<bool, StoreError> {
        let found = self
            .webhooks()
            .find_one(doc! { "tenant": tenant.as_str() })
            .projection(doc! { field::ID: 1 })
            .max_time(self.max_time())
            .await
            .map_err(|e| store_error(&e))?;
        Ok(found.is_some())
    }

    /// What a claim chooses from: of each endpoint that is not paused,
    /// its oldest due unleased deliveries, as many as it has free slots
    /// (`per_endpoint` less its live leases). One read of the live leases
    /// (the lease index), one of the endpoints, then one bounded index read
    /// per endpoint with a free slot, a few at a time: the cost follows
    /// the endpoints, never an endpoint's backlog. Replicas claiming at the
    /// same instant may together lease a few more than `per_endpoint`.
    async fn due_deliveries(
        &self,
        now: Timestamp,
        per_endpoint: u32,
    ) -> Result<Vec<DueDelivery>, StoreError> {
        let now_ms = millis(now);
        let mut leased: HashMap<String, u32> = HashMap::new();
        let mut cursor = self
            .outbox()
            .find(doc! { "lease_until": { "$gt": now_ms } })
            .projection(doc! { "webhook": 1 })
            .max_time(self.max_time())
            .await
            .map_err(|e| store_error(&e))?;
        while cursor.advance().await.map_err(|e| store_error(&e))? {
            let doc = cursor.deserialize_current().map_err(|e| store_error(&e))?;
            *leased.entry(text(&doc, "webhook")?.to_owned()).or_default() += 1;
        }
        let mut cursor = self
            .webhooks()
            .find(doc! {})
            .projection(doc! { "tenant": 1, "paused_until": 1 })
            .max_time(self.max_time())
            .await
            .map_err(|e| store_error(&e))?;
        let mut open = Vec::new();
        while cursor.advance().await.map_err(|e| store_error(&e))? {
            let doc = cursor.deserialize_current().map_err(|e| store_error(&e))?;
            let id = text(&doc, field::ID)?;
            let free = per_endpoint.saturating_sub(leased.get(id).copied().unwrap_or(0));
            if free == 0 || int(&doc, "paused_until") > now_ms {
                continue;
            }
            let webhook = WebhookId::parse(id).map_err(|e| corrupt("webhook id", e))?;
            let tenant =
                TenantId::parse(text(&doc, "tenant")?).map_err(|e| corrupt("webhook tenant", e))?;
            open.push((webhook, tenant, free));
        }
        let probes = open.into_iter().map(|(webhook, tenant, free)| async move {
            let mut cursor = self
                .outbox()
                .find(doc! {
                    "webhook": webhook.as_str(),
                    "next_attempt_at": { "$lte": now_ms },
                    "lease_until": { "$lte": now_ms },
                })
                .sort(doc! { "next_attempt_at": 1, field::ID: 1 })
                .limit(i64::from(free))
                .projection(doc! { "next_attempt_at": 1 })
                .max_time(self.max_time())
                .await
                .map_err(|e| store_error(&e))?;
            let mut due = Vec::new();
            while cursor.advance().await.map_err(|e| store_error(&e))? {
                let doc = cursor.deserialize_current().map_err(|e| store_error(&e))?;
                due.push(DueDelivery {
                    id: DeliveryId::parse(text(&doc, field::ID)?)
                        .map_err(|e| corrupt("delivery id", e))?,
                    tenant: tenant.clone(),
                    webhook: webhook.clone(),
                    due_at: Timestamp::from_millis(int(&doc, "next_attempt_at")),
                });
            }
            Ok::<_, StoreError>(due)
        });
        let mut due = Vec::new();
        let mut probes = futures_util::stream::iter(probes).buffer_unordered(PROBES_AT_ONCE);
        while let Some(found) = probes.next().await {
            due.extend(found?);
        }
        Ok(due)
    }

    /// Inserts one delivery of `event` per endpoint of the tenant
    /// subscribed to it, under ids derived from its `occurrence`, so that
    /// queueing it again inserts nothing twice.
    pub(crate) async fn queue(
        &self,
        tenant: &TenantId,
        event: WebhookEvent,
        data: serde_json::Value,
        occurrence: Occurrence<'_>,
    ) -> Result<(), StoreError> {
        let replay = Some(&occurrence).filter(|o| o.replayed);
        let mut subscribers = doc! { "tenant": tenant.as_str(), "events": event.as_str() };
        if let Some(occurrence) = replay {
            // An endpoint registered well after the event is not told of
            // it by a late replay. Only replays ask: a first attempt takes
            // every endpoint there is, whatever the clocks of the process
            // that registered it and of this one say.
            let registered_by = occurrence.at.plus_millis(REGISTERED_SLACK_MILLIS);
            subscribers.insert("created_at", doc! { "$lte": millis(registered_by) });
        }
        let mut cursor = self
            .webhooks()
            .find(subscribers)
            .max_time(self.max_time())
            .await
            .map_err(|e| store_error(&e))?;
        let mut subscribed = Vec::new();
        while cursor.advance().await.map_err(|e| store_error(&e))? {
            let doc = cursor.deserialize_current().map_err(|e| store_error(&e))?;
            subscribed.push(text(&doc, field::ID)?.to_owned());
        }
        if subscribed.is_empty() {
            return Ok(());
        }
        if let Some(record) = replay.and_then(|o| o.record.as_ref())
            && self.events_queued(tenant, record).await?
        {
            return Ok(());
        }
        let now = Timestamp::now();
        let body = webhook::event_body(event, tenant, occurrence.at, data);
        let pending = self
            .outbox()
            .count_documents(doc! { "tenant": tenant.as_str() })
            .await
            .map_err(|e| store_error(&e))?;
        for (n, webhook) in subscribed.into_iter().enumerate() {
            let id = DeliveryId::of_event(occurrence.at, &occurrence.name(event), &webhook);
            if pending + n as u64 >= limits::PENDING_PER_TENANT_MAX
                || body.len() > limits::PAYLOAD_MAX
            {
                // Counted once: not for a delivery an earlier attempt
                // queued, nor for one an earlier attempt counted.
                if self.is_queued(&id).await? {
                    continue;
                }
                self.webhooks()
                    .update_one(
                        doc! { field::ID: &webhook, DROPPED_IDS: { "$ne": id.as_str() } },
                        doc! {
                            "$inc": { "dropped": 1_i64 },
                            "$push": { DROPPED_IDS: {
                                "$each": [id.as_str()],
                                "$slice": -DROPPED_IDS_KEPT,
                            } },
                        },
                    )
                    .await
                    .map_err(|e| store_error(&e))?;
                continue;
            }
            let inserted = self
                .outbox()
                .insert_one(doc! {
                    field::ID: id.as_str(),
                    "tenant": tenant.as_str(),
                    "webhook": &webhook,
                    "event": event.as_str(),
                    "body": &body,
                    "created_at": millis(now),
                    "attempts": 0_i64,
                    "next_attempt_at": millis(now),
                    "lease_until": 0_i64,
                })
                .await;
            match inserted {
                Ok(_) => {}
                // Queued by an earlier attempt (and perhaps delivered
                // since): nothing to add.
                Err(err) if is_duplicate_key(&err) => {}
                Err(err) => return Err(store_error(&err)),
            }
        }
        if let Some(record) = &occurrence.record {
            self.note_events_queued(tenant, record).await;
        }
        Ok(())
    }

    /// Whether the idempotency record `record` filters says its write's
    /// deliveries are queued.
    async fn events_queued(
        &self,
        tenant: &TenantId,
        record: &Document,
    ) -> Result<bool, StoreError> {
        let mut filter = record.clone();
        filter.insert(EVENTS_QUEUED, true);
        let found = self
            .idempotency(tenant)
            .find_one(filter)
            .projection(doc! { field::ID: 1 })
            .max_time(self.max_time())
            .await
            .map_err(|e| store_error(&e))?;
        Ok(found.is_some())
    }

    /// Records on the idempotency record that its write's deliveries are
    /// queued. Best effort: without it, a replay queues them again under
    /// the same ids (nothing twice while they wait; one delivered since may
    /// be sent again, under the id its receiver dedupes by).
    async fn note_events_queued(&self, tenant: &TenantId, record: &Document) {
        let noted = self
            .idempotency(tenant)
            .update_one(record.clone(), doc! { "$set": { EVENTS_QUEUED: true } })
            .await;
        if let Err(err) = noted {
            tracing::warn!(
                tenant = %tenant,
                error = %store_error(&err),
                "a keyed write's webhook deliveries are queued, but its idempotency record \
                 could not say so; a replay may send them again under the same ids"
            );
        }
    }

    /// Whether the outbox holds delivery `id`.
    async fn is_queued(&self, id: &DeliveryId) -> Result<bool, StoreError> {
        let found = self
            .outbox()
            .find_one(doc! { field::ID: id.as_str() })
            .projection(doc! { field::ID: 1 })
            .max_time(self.max_time())
            .await
            .map_err(|e| store_error(&e))?;
        Ok(found.is_some())
    }
}

#[async_trait::async_trait]
impl WebhookStore for MongoStore {
    async fn create_webhook(
        &self,
        tenant: &TenantId,
        new: &NewWebhook,
        at: Timestamp,
    ) -> Result<Webhook, StoreError> {
        self.bounded_write("create_webhook", async {
            self.ensure_webhook_indexes().await?;
            // Counted before inserting: two registrations racing may
            // overshoot the limit by one each, never more.
            let count = self
                .webhooks()
                .count_documents(doc! { "tenant": tenant.as_str() })
                .await
                .map_err(|e| store_error(&e))?;
            if count >= limits::ENDPOINTS_PER_TENANT_MAX as u64 {
                return Err(ValidationError::new(
                    "webhooks",
                    format!(
                        "tenant {tenant} already has {} webhook endpoints, the limit; delete one first",
                        limits::ENDPOINTS_PER_TENANT_MAX
                    ),
                )
                .into());
            }
            let webhook = Webhook {
                id: WebhookId::generate(),
                tenant: tenant.clone(),
                url: new.url.clone(),
                events: new.events.clone(),
                created_at: at,
            };
            let events: Vec<&str> = webhook.events.iter().map(|e| e.as_str()).collect();
            self.webhooks()
                .insert_one(doc! {
                    field::ID: webhook.id.as_str(),
                    "tenant": tenant.as_str(),
                    "url": webhook.url.as_str(),
                    "events": events,
                    "secret": new.secret.expose(),
                    "created_at": millis(at),
                    "delivered": 0_i64,
                    "dead": 0_i64,
                    "dropped": 0_i64,
                })
                .await
                .map_err(|e| store_error(&e))?;
            Ok(webhook)
        })
        .await
    }

    async fn list_webhooks(&self, tenant: &TenantId) -> Result<Vec<WebhookWithStatus>, StoreError> {
        self.bounded("list_webhooks", async {
            let mut cursor = self
                .webhooks()
                .find(doc! { "tenant": tenant.as_str() })
                .projection(endpoint_fields())
                .sort(doc! { field::ID: 1 })
                .max_time(self.max_time())
                .await
                .map_err(|e| store_error(&e))?;
            let mut listed = Vec::new();
            while cursor.advance().await.map_err(|e| store_error(&e))? {
                let doc = cursor.deserialize_current().map_err(|e| store_error(&e))?;
                let id = text(&doc, field::ID)?.to_owned();
                let pending = self
                    .outbox()
                    .count_documents(doc! { "webhook": &id })
                    .await
                    .map_err(|e| store_error(&e))?;
                let events: Vec<&str> = doc
                    .get_array("events")
                    .map_err(|e| corrupt("webhook events", e))?
                    .iter()
                    .filter_map(Bson::as_str)
                    .collect();
                let count = |key| u64::try_from(int(&doc, key)).unwrap_or(0);
                listed.push(WebhookWithStatus {
                    webhook: Webhook {
                        id: WebhookId::parse(id).map_err(|e| corrupt("webhook id", e))?,
                        tenant: tenant.clone(),
                        url: WebhookUrl::parse(text(&doc, "url")?)
                            .map_err(|e| corrupt("webhook url", e))?,
                        events: WebhookEvents::parse_list(events)
                            .map_err(|e| corrupt("webhook events", e))?,
                        created_at: Timestamp::from_millis(int(&doc, "created_at")),
                    },
                    status: WebhookStatus {
                        pending,
                        delivered: count("delivered"),
                        dead: count("dead"),
                        dropped: count("dropped"),
                        last_attempt_at: doc
                            .get_i64("last_attempt_at")
                            .ok()
                            .map(Timestamp::from_millis),
                        last_status: doc
                            .get_i64("last_status")
                            .ok()
                            .and_then(|s| u16::try_from(s).ok()),
                        last_error: doc.get_str("last_error").ok().map(str::to_owned),
                    },
                });
            }
            Ok(listed)
        })
        .await
    }

    async fn delete_webhook(&self, tenant: &TenantId, id: &WebhookId) -> Result<(), StoreError> {
        self.bounded_write("delete_webhook", async {
            let deleted = self
                .webhooks()
                .delete_one(doc! { field::ID: id.as_str(), "tenant": tenant.as_str() })
                .await
                .map_err(|e| store_error(&e))?;
            // Its pending deliveries go after it; an orphan would count
            // against the tenant's pending deliveries forever.
            let pending = self
                .outbox()
                .delete_many(doc! { "webhook": id.as_str(), "tenant": tenant.as_str() })
                .await
                .map(|_| ())
                .map_err(|e| store_error(&e));
            two_write_deletion(deleted.deleted_count == 1, pending, || {
                StoreError::not_found(format!("webhook {id}"))
            })?;
            self.drop_staged_of_unhooked(tenant).await;
            Ok(())
        })
        .await
    }

    async fn expire_claims(
        &self,
        now: Timestamp,
        limit: u32,
    ) -> Result<Vec<corkboard_board::ExpiredClaim>, StoreError> {
        self.bounded_write("expire_claims", self.sweep_expired(now, limit))
            .await
    }

    async fn claim_deliveries(
        &self,
        now: Timestamp,
        lease: Duration,
        limit: u32,
        per_endpoint: u32,
    ) -> Result<Vec<ClaimedDelivery>, StoreError> {
        self.bounded_write("claim_deliveries", async {
            if limit == 0 || per_endpoint == 0 {
                return Ok(Vec::new());
            }
            let due = self.due_deliveries(now, per_endpoint).await?;
            let taken = webhook::fair_share(due, usize::try_from(limit).unwrap_or(usize::MAX));
            let until = now.plus_millis(i64::try_from(lease.as_millis()).unwrap_or(i64::MAX));
            let mut endpoints: HashMap<WebhookId, Option<Document>> = HashMap::new();
            let mut claimed = Vec::new();
            for due in taken {
                // Taken only if still due and unleased: of two replicas
                // racing for it, one gets it.
                let filter = doc! {
                    field::ID: due.id.as_str(),
                    "next_attempt_at": { "$lte": millis(now) },
                    "lease_until": { "$lte": millis(now) },
                };
                let Some(doc) = self
                    .outbox()
                    .find_one_and_update(filter, doc! { "$set": { "lease_until": millis(until) } })
                    .return_document(ReturnDocument::After)
                    .await
                    .map_err(|e| store_error(&e))?
                else {
                    continue;
                };
                let endpoint = match endpoints.get(&due.webhook) {
                    Some(endpoint) => endpoint.clone(),
                    None => {
                        let endpoint = self
                            .webhooks()
                            .find_one(doc! { field::ID: due.webhook.as_str() })
                            .projection(endpoint_fields())
                            .await
                            .map_err(|e| store_error(&e))?;
                        endpoints.insert(due.webhook.clone(), endpoint.clone());
                        endpoint
                    }
                };
                // Its endpoint was deleted meanwhile.
                let Some(endpoint) = endpoint else {
                    continue;
                };
                claimed.push(ClaimedDelivery {
                    event: WebhookEvent::parse(text(&doc, "event")?)
                        .map_err(|e| corrupt("delivery event", e))?,
                    url: WebhookUrl::parse(text(&endpoint, "url")?)
                        .map_err(|e| corrupt("webhook url", e))?,
                    secret: WebhookSecret::from_stored(text(&endpoint, "secret")?)
                        .map_err(|e| corrupt("webhook secret", e))?,
                    body: text(&doc, "body")?.to_owned(),
                    attempts: u32::try_from(int(&doc, "attempts")).unwrap_or(u32::MAX),
                    id: due.id,
                    tenant: due.tenant,
                    webhook: due.webhook,
                });
            }
            Ok(claimed)
        })
        .await
    }

    async fn record_attempt(
        &self,
        id: &DeliveryId,
        outcome: &AttemptOutcome,
    ) -> Result<(), StoreError> {
        self.bounded_write("record_attempt", async {
            let Some(doc) = self
                .outbox()
                .find_one(doc! { field::ID: id.as_str() })
                .await
                .map_err(|e| store_error(&e))?
            else {
                return Ok(());
            };
            let webhook_id = text(&doc, "webhook")?.to_owned();
            let attempts = u32::try_from(int(&doc, "attempts"))
                .unwrap_or(u32::MAX)
                .saturating_add(1);
            let counter = if outcome.succeeded() {
                Some("delivered")
            } else {
                match webhook::retry_delay(attempts) {
                    Some(delay) => {
                        let next = outcome
                            .at
                            .plus_millis(i64::try_from(delay.as_millis()).unwrap_or(i64::MAX));
                        self.outbox()
                            .update_one(
                                doc! { field::ID: id.as_str() },
                                doc! { "$set": {
                                    "attempts": i64::from(attempts),
                                    "next_attempt_at": millis(next),
                                    "lease_until": 0_i64,
                                } },
                            )
                            .await
                            .map_err(|e| store_error(&e))?;
                        None
                    }
                    None => Some("dead"),
                }
            };
            let mut set = doc! {
                "last_attempt_at": millis(outcome.at),
                "last_status": outcome.status.map_or(Bson::Null, |s| Bson::Int64(i64::from(s))),
                "last_error": outcome.error.clone().map_or(Bson::Null, Bson::String),
            };
            let mut inc = Document::new();
            if let Some(counter) = counter {
                self.outbox()
                    .delete_one(doc! { field::ID: id.as_str() })
                    .await
                    .map_err(|e| store_error(&e))?;
                inc.insert(counter, 1_i64);
            }
            if outcome.succeeded() {
                set.insert("failures", 0_i64);
                set.insert("paused_until", 0_i64);
            } else {
                inc.insert("failures", 1_i64);
            }
            let mut update = doc! { "$set": set };
            if !inc.is_empty() {
                update.insert("$inc", inc);
            }
            let endpoint = self
                .webhooks()
                .find_one_and_update(doc! { field::ID: &webhook_id }, update)
                .projection(doc! { "failures": 1 })
                .return_document(ReturnDocument::After)
                .await
                .map_err(|e| store_error(&e))?;
            // The pause follows the failures in a row the update counted.
            if let (Some(endpoint), false) = (endpoint, outcome.succeeded()) {
                let failures = u32::try_from(int(&endpoint, "failures")).unwrap_or(u32::MAX);
                let pause = webhook::endpoint_pause(failures);
                let until = outcome
                    .at
                    .plus_millis(i64::try_from(pause.as_millis()).unwrap_or(i64::MAX));
                self.webhooks()
                    .update_one(
                        doc! { field::ID: &webhook_id },
                        doc! { "$set": { "paused_until": millis(until) } },
                    )
                    .await
                    .map_err(|e| store_error(&e))?;
            }
            Ok(())
        })
        .await
    }
}
