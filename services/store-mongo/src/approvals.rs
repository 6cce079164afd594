//! Approval items, in the one `approvals` collection: one document per
//! item, `_id` its id, the item itself as a sub-document beside the fields
//! its reads filter on. A decision and a use are each one conditional
//! single-document update (status pending, or approved and unexpired), so
//! of racing callers on any replica exactly one changes an item.

use crate::codec::field;
use crate::error::store_error;
use crate::ledger::check_limit;
use crate::staged::{self, StagedEvent, with_staged};
use crate::store::MongoStore;
use corkboard_board::webhook::WebhookEvent;
use corkboard_board::{
    ApprovalId, ApprovalItem, ApprovalStatus, Decision, RunId, StoreError, TenantId, Timestamp,
};
use futures_util::TryStreamExt;
use mongodb::bson::{self, Document, doc};
use mongodb::{Collection, IndexModel};

/// The collection of every tenant's approval items.
pub const APPROVALS: &str = "approvals";
const ITEM: &str = "item";
const STATUS: &str = "status";
const RUN: &str = "run";
const TOOL: &str = "tool";
const DIGEST: &str = "digest";
const EXPIRES_AT: &str = "expires_at";
/// The most items one listing returns.
const LIST_MAX: u32 = 500;

pub(crate) fn approval_indexes() -> Vec<IndexModel> {
    vec![
        IndexModel::builder()
            .keys(doc! { field::TENANT: 1, STATUS: 1, field::ID: -1 })
            .build(),
        IndexModel::builder()
            .keys(doc! { field::TENANT: 1, RUN: 1, DIGEST: 1, field::ID: -1 })
            .build(),
        // Webhook events left staged by their write (`staged.rs`).
        IndexModel::builder()
            .keys(doc! { field::STAGED_AT: 1 })
            .build(),
    ]
}

fn decode(doc: &Document) -> Result<ApprovalItem, StoreError> {
    let item = doc
        .get_document(ITEM)
        .map_err(|e| StoreError::Internal(format!("approval document: {e}")))?;
    bson::deserialize_from_document(item.clone())
        .map_err(|e| StoreError::Internal(format!("unreadable approval: {e}")))
}

fn encode(item: &ApprovalItem) -> Result<Document, StoreError> {
    let encoded = bson::serialize_to_document(item)
        .map_err(|e| StoreError::Internal(format!("cannot encode approval: {e}")))?;
    Ok(doc! {
        field::ID: item.id.as_str(),
        field::TENANT: item.tenant.as_str(),
        RUN: item.run.as_str(),
        TOOL: &item.tool,
        DIGEST: &item.digest,
        STATUS: item.status.as_str(),
        EXPIRES_AT: item.expires_at.as_millis(),
        ITEM: encoded,
    })
}

impl MongoStore {
    fn approvals(&self) -> Collection<Document> {
        self.database().collection(APPROVALS)
    }

    /// Stores a new item, staging its `approval.requested` for a tenant
    /// with webhook endpoints (`crate::staged`).
    pub(crate) async fn put_approval_doc(&self, item: &ApprovalItem) -> Result<(), StoreError> {
        let mut document = encode(item)?;
        let staged = self
            .bounded_write("put_approval", async {
                let staged = staged::when(self.has_webhooks(&item.tenant).await?, || {
                    StagedEvent::whole(
                        WebhookEvent::ApprovalRequested,
                        item.id.as_str(),
                        Timestamp::now(),
                        item.event_data(),
                    )
                });
                staged::insert_markers(&mut document, &staged);
                self.approvals()
                    .replace_one(doc! { field::ID: item.id.as_str() }, document)
                    .upsert(true)
                    .await
                    .map_err(|e| store_error(&e))?;
                Ok(staged)
            })
            .await?;
        self.queue_staged_shared(&item.tenant, APPROVALS, item.id.as_str(), &staged)
            .await;
        Ok(())
    }

    pub(crate) async fn load_approval(
        &self,
        tenant: &TenantId,
        id: &ApprovalId,
    ) -> Result<Option<ApprovalItem>, StoreError> {
        self.bounded("approval", async {
            let found = self
                .approvals()
                .find_one(doc! { field::ID: id.as_str(), field::TENANT: tenant.as_str() })
                .max_time(self.max_time())
                .await
                .map_err(|e| store_error(&e))?;
            found.as_ref().map(decode).transpose()
        })
        .await
    }

    pub(crate) async fn list_approval_docs(
        &self,
        tenant: &TenantId,
        status: Option<ApprovalStatus>,
        limit: u32,
    ) -> Result<Vec<ApprovalItem>, StoreError> {
        check_limit(limit, LIST_MAX)?;
        let mut filter = doc! { field::TENANT: tenant.as_str() };
        if let Some(status) = status {
            filter.insert(STATUS, status.as_str());
        }
        self.bounded("list_approvals", async {
            let docs: Vec<Document> = self
                .approvals()
                .find(filter)
                .sort(doc! { field::ID: -1 })
                .limit(i64::from(limit))
                .max_time(self.max_time())
                .await
                .map_err(|e| store_error(&e))?
                .try_collect()
                .await
                .map_err(|e| store_error(&e))?;
            docs.iter().map(decode).collect()
        })
        .await
    }

    pub(crate) async fn approval_doc_for_call(
        &self,
        tenant: &TenantId,
        run: &RunId,
        tool: &str,
        digest: &str,
    ) -> Result<Option<ApprovalItem>, StoreError> {
        self.bounded("approval_for_call", async {
            let found = self
                .approvals()
                .find_one(doc! {
                    field::TENANT: tenant.as_str(),
                    RUN: run.as_str(),
                    DIGEST: digest,
                    TOOL: tool,
                    STATUS: { "$ne": ApprovalStatus::Used.as_str() },
                })
                .sort(doc! { field::ID: -1 })
                .max_time(self.max_time())
                .await
                .map_err(|e| store_error(&e))?;
            found.as_ref().map(decode).transpose()
        })
        .await
    }

    pub(crate) async fn decide_approval_doc(
        &self,
        tenant: &TenantId,
        id: &ApprovalId,
        decision: &Decision,
    ) -> Result<ApprovalItem, StoreError> {
        let missing = || StoreError::not_found(format!("approval {id}"));
        let mut item = self.load_approval(tenant, id).await?.ok_or_else(missing)?;
        if item.decide(decision.clone()).is_err() {
            return Ok(item);
        }
        let document = encode(&item)?;
        let mut fields = Document::new();
        fields.insert(STATUS, item.status.as_str());
        fields.insert(
            ITEM,
            document.get_document(ITEM).cloned().unwrap_or_default(),
        );
        let set = doc! { "$set": fields };
        let changed = self
            .bounded_write("decide_approval", async {
                let staged = staged::when(self.has_webhooks(tenant).await?, || {
                    StagedEvent::whole(
                        WebhookEvent::ApprovalDecided,
                        id.as_str(),
                        Timestamp::now(),
                        item.event_data(),
                    )
                });
                self.approvals()
                    .update_one(
                        doc! {
                            field::ID: id.as_str(),
                            field::TENANT: tenant.as_str(),
                            STATUS: ApprovalStatus::Pending.as_str(),
                        },
                        with_staged(set.clone(), &staged),
                    )
                    .await
                    .map(|r| (r.modified_count == 1).then_some(staged))
                    .map_err(|e| store_error(&e))
            })
            .await?;
        if let Some(staged) = changed {
            self.queue_staged_shared(tenant, APPROVALS, id.as_str(), &staged)
                .await;
            return Ok(item);
        }
        // Another decision won: answer the item as that one left it.
        self.load_approval(tenant, id).await?.ok_or_else(missing)
    }

    pub(crate) async fn use_approval_doc(
        &self,
        tenant: &TenantId,
        id: &ApprovalId,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let used = ApprovalStatus::Used.as_str();
        let mut fields = Document::new();
        fields.insert(STATUS, used);
        fields.insert(format!("{ITEM}.{STATUS}"), used);
        let set = doc! { "$set": fields };
        self.bounded_write("use_approval", async {
            self.approvals()
                .update_one(
                    doc! {
                        field::ID: id.as_str(),
                        field::TENANT: tenant.as_str(),
                        STATUS: ApprovalStatus::Approved.as_str(),
                        EXPIRES_AT: { "$gt": now.as_millis() },
                    },
                    set,
                )
                .await
                .map(|r| r.modified_count == 1)
                .map_err(|e| store_error(&e))
        })
        .await
    }
}
