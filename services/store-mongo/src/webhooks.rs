//! Webhook endpoints (`webhooks`) and the outbox of undelivered deliveries
//! (`webhook_outbox`), one collection each for every tenant (claims look
//! across tenants).
//!
//! The guarantee differs from SQLite's: a MongoDB board write is one
//! single-document update, and its deliveries are separate documents, so
//! they are inserted after the write succeeds and before the write is
//! acknowledged ([`MongoStore::queue_after`]). A process that dies between
//! the two, or an insert that fails (logged as a warning), loses those
//! deliveries; a write is never lost or failed because of them. Claims
//! lease each delivery with its own conditional update, so two replicas
//! never claim the same one at once.

use crate::codec::field;
use crate::error::store_error;
use crate::store::MongoStore;
use corkboard_board::webhook::{
    self, AttemptOutcome, ClaimedDelivery, NewWebhook, Webhook, WebhookEvent, WebhookEvents,
    WebhookSecret, WebhookStatus, WebhookUrl, WebhookWithStatus, limits,
};
use corkboard_board::{
    DeliveryId, StoreError, TenantId, Timestamp, ValidationError, WebhookId, WebhookStore,
};
use mongodb::bson::{Bson, Document, doc};
use mongodb::options::ReturnDocument;
use mongodb::{Collection, IndexModel};
use std::time::Duration;

pub const WEBHOOKS: &str = "webhooks";
pub const OUTBOX: &str = "webhook_outbox";

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

impl MongoStore {
    fn webhooks(&self) -> Collection<Document> {
        self.database().collection(WEBHOOKS)
    }

    fn outbox(&self) -> Collection<Document> {
        self.database().collection(OUTBOX)
    }

    /// The indexes claims and per-tenant lookups use; creating them again
    /// is a no-op.
    async fn ensure_webhook_indexes(&self) -> Result<(), StoreError> {
        self.webhooks()
            .create_index(IndexModel::builder().keys(doc! { "tenant": 1 }).build())
            .await
            .map_err(|e| store_error(&e))?;
        self.outbox()
            .create_indexes([
                IndexModel::builder()
                    .keys(doc! { "next_attempt_at": 1, field::ID: 1 })
                    .build(),
                IndexModel::builder().keys(doc! { "webhook": 1 }).build(),
                IndexModel::builder().keys(doc! { "tenant": 1 }).build(),
            ])
            .await
            .map_err(|e| store_error(&e))?;
        Ok(())
    }

    /// Queues `event` for the tenant's subscribed endpoints after a board
    /// write succeeded; a failure is logged, never the write's failure.
    pub(crate) async fn queue_after(
        &self,
        tenant: &TenantId,
        event: WebhookEvent,
        data: serde_json::Value,
    ) {
        // Bounded like every call: a server that stops answering after the
        // write must not hold the write's answer.
        let queued = tokio::time::timeout(self.max_time(), self.queue(tenant, event, data)).await;
        let failure = match queued {
            Ok(Ok(())) => None,
            Ok(Err(err)) => Some(err.to_string()),
            Err(_) => Some("the store did not answer in time".to_owned()),
        };
        if let Some(err) = failure {
            tracing::warn!(
                tenant = %tenant,
                event = event.as_str(),
                error = %err,
                "webhook deliveries for a board write could not be queued; they are lost"
            );
        }
    }

    /// Whether the tenant has any endpoint (so a write need not read more).
    pub(crate) async fn has_webhooks(&self, tenant: &TenantId) -> bool {
        self.webhooks()
            .find_one(doc! { "tenant": tenant.as_str() })
            .max_time(self.max_time())
            .await
            .ok()
            .flatten()
            .is_some()
    }

    async fn queue(
        &self,
        tenant: &TenantId,
        event: WebhookEvent,
        data: serde_json::Value,
    ) -> Result<(), StoreError> {
        let mut cursor = self
            .webhooks()
            .find(doc! { "tenant": tenant.as_str(), "events": event.as_str() })
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
        let now = Timestamp::now();
        let body = webhook::event_body(event, tenant, now, data);
        let pending = self
            .outbox()
            .count_documents(doc! { "tenant": tenant.as_str() })
            .await
            .map_err(|e| store_error(&e))?;
        for (n, id) in subscribed.into_iter().enumerate() {
            if pending + n as u64 >= limits::PENDING_PER_TENANT_MAX
                || body.len() > limits::PAYLOAD_MAX
            {
                self.webhooks()
                    .update_one(
                        doc! { field::ID: &id },
                        doc! { "$inc": { "dropped": 1_i64 } },
                    )
                    .await
                    .map_err(|e| store_error(&e))?;
                continue;
            }
            self.outbox()
                .insert_one(doc! {
                    field::ID: DeliveryId::generate().as_str(),
                    "tenant": tenant.as_str(),
                    "webhook": &id,
                    "event": event.as_str(),
                    "body": &body,
                    "created_at": millis(now),
                    "attempts": 0_i64,
                    "next_attempt_at": millis(now),
                    "lease_until": 0_i64,
                })
                .await
                .map_err(|e| store_error(&e))?;
        }
        Ok(())
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
            if deleted.deleted_count == 0 {
                return Err(StoreError::not_found(format!("webhook {id}")));
            }
            self.outbox()
                .delete_many(doc! { "webhook": id.as_str() })
                .await
                .map_err(|e| store_error(&e))?;
            Ok(())
        })
        .await
    }

    async fn claim_deliveries(
        &self,
        now: Timestamp,
        lease: Duration,
        limit: u32,
    ) -> Result<Vec<ClaimedDelivery>, StoreError> {
        self.bounded_write("claim_deliveries", async {
            let due = doc! {
                "next_attempt_at": { "$lte": millis(now) },
                "lease_until": { "$lte": millis(now) },
            };
            let mut cursor = self
                .outbox()
                .find(due.clone())
                .sort(doc! { "next_attempt_at": 1, field::ID: 1 })
                .limit(i64::from(limit))
                .max_time(self.max_time())
                .await
                .map_err(|e| store_error(&e))?;
            let mut candidates = Vec::new();
            while cursor.advance().await.map_err(|e| store_error(&e))? {
                let doc = cursor.deserialize_current().map_err(|e| store_error(&e))?;
                candidates.push(text(&doc, field::ID)?.to_owned());
            }
            let until = now.plus_millis(i64::try_from(lease.as_millis()).unwrap_or(i64::MAX));
            let mut claimed = Vec::new();
            for id in candidates {
                // Taken only if still due and unleased: of two replicas
                // racing for it, one gets it.
                let mut filter = due.clone();
                filter.insert(field::ID, &id);
                let Some(doc) = self
                    .outbox()
                    .find_one_and_update(filter, doc! { "$set": { "lease_until": millis(until) } })
                    .return_document(ReturnDocument::After)
                    .await
                    .map_err(|e| store_error(&e))?
                else {
                    continue;
                };
                let webhook_id = text(&doc, "webhook")?.to_owned();
                let Some(endpoint) = self
                    .webhooks()
                    .find_one(doc! { field::ID: &webhook_id })
                    .await
                    .map_err(|e| store_error(&e))?
                else {
                    // Its endpoint was deleted meanwhile.
                    continue;
                };
                claimed.push(ClaimedDelivery {
                    id: DeliveryId::parse(id).map_err(|e| corrupt("delivery id", e))?,
                    tenant: TenantId::parse(text(&doc, "tenant")?)
                        .map_err(|e| corrupt("delivery tenant", e))?,
                    webhook: WebhookId::parse(webhook_id).map_err(|e| corrupt("webhook id", e))?,
                    event: WebhookEvent::parse(text(&doc, "event")?)
                        .map_err(|e| corrupt("delivery event", e))?,
                    url: WebhookUrl::parse(text(&endpoint, "url")?)
                        .map_err(|e| corrupt("webhook url", e))?,
                    secret: WebhookSecret::from_stored(text(&endpoint, "secret")?)
                        .map_err(|e| corrupt("webhook secret", e))?,
                    body: text(&doc, "body")?.to_owned(),
                    attempts: u32::try_from(int(&doc, "attempts")).unwrap_or(u32::MAX),
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
            let mut update = doc! { "$set": {
                "last_attempt_at": millis(outcome.at),
                "last_status": outcome.status.map_or(Bson::Null, |s| Bson::Int64(i64::from(s))),
                "last_error": outcome.error.clone().map_or(Bson::Null, Bson::String),
            } };
            if let Some(counter) = counter {
                self.outbox()
                    .delete_one(doc! { field::ID: id.as_str() })
                    .await
                    .map_err(|e| store_error(&e))?;
                update.insert("$inc", doc! { counter: 1_i64 });
            }
            self.webhooks()
                .update_one(doc! { field::ID: &webhook_id }, update)
                .await
                .map_err(|e| store_error(&e))?;
            Ok(())
        })
        .await
    }
}
