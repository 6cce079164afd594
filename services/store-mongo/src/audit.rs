//! The audit trail, one append-only collection per tenant.
//!
//! Records carry a driver-generated ObjectId: within one process its
//! counter grows with every insert, so `(at, _id)` descending lists the
//! records of one millisecond newest first as well.

use crate::codec::{audit_doc, audit_field, audit_from_doc};
use crate::error::store_error;
use crate::ledger::check_limit;
use crate::store::MongoStore;
use async_trait::async_trait;
use corkboard_board::{AuditLog, AuditQuery, AuditRecord, StoreError, TenantId};
use mongodb::bson::{Document, doc};

/// Most audit records one list may ask for.
pub const AUDIT_PAGE_MAX: u32 = 1000;

#[async_trait]
impl AuditLog for MongoStore {
    async fn append_audit(&self, records: &[AuditRecord]) -> Result<(), StoreError> {
        if records.is_empty() {
            return Ok(());
        }
        // One batch per tenant, in the callers' order, each one insert.
        let mut batches: Vec<(&TenantId, Vec<Document>)> = Vec::new();
        for record in records {
            match batches.iter_mut().find(|(t, _)| *t == &record.tenant) {
                Some((_, docs)) => docs.push(audit_doc(record)),
                None => batches.push((&record.tenant, vec![audit_doc(record)])),
            }
        }
        self.bounded_write("append_audit", async {
            for (tenant, docs) in batches {
                self.ensure_tenant(tenant).await?;
                self.audit(tenant)
                    .insert_many(docs)
                    .await
                    .map_err(|e| store_error(&e))?;
            }
            Ok(())
        })
        .await
    }

    async fn list_audit(
        &self,
        tenant: &TenantId,
        query: &AuditQuery,
    ) -> Result<Vec<AuditRecord>, StoreError> {
        check_limit(query.limit, AUDIT_PAGE_MAX)?;
        self.bounded("list_audit", async {
            let mut filter = Document::new();
            if let Some(run) = &query.run {
                filter.insert(audit_field::RUN, run.as_str());
            }
            if let Some(issue) = &query.issue {
                filter.insert(audit_field::ISSUE, issue.as_str());
            }
            let mut cursor = self
                .audit(tenant)
                .find(filter)
                .sort(doc! { audit_field::AT: -1, "_id": -1 })
                .limit(i64::from(query.limit))
                .max_time(self.max_time())
                .await
                .map_err(|e| store_error(&e))?;
            let mut records = Vec::new();
            while cursor.advance().await.map_err(|e| store_error(&e))? {
                let doc = cursor.deserialize_current().map_err(|e| store_error(&e))?;
                records.push(audit_from_doc(&doc)?);
            }
            Ok(records)
        })
        .await
    }
}
