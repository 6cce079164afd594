//! The audit trail, one append-only collection per tenant.
//!
//! A record's `_id` is the [`AuditId`](corkboard_board::AuditId) the audit
//! writer gave it, so writing a batch again after an unknown outcome (the
//! connection cut mid-insert, a timeout) inserts only what is missing: the
//! insert is unordered, and duplicate-key refusals of `_id` mean "already
//! written". The ids come from a monotonic generator, so within one process
//! `(at, _id)` descending lists the records of one millisecond newest first
//! as well.

use crate::codec::{audit_doc, audit_field, audit_from_doc};
use crate::error::{DUPLICATE_KEY, store_error};
use crate::ledger::check_limit;
use crate::store::MongoStore;
use async_trait::async_trait;
use corkboard_board::{AuditEntry, AuditLog, AuditQuery, AuditRecord, StoreError, TenantId};
use mongodb::bson::{Document, doc};
use mongodb::error::{Error, ErrorKind};

/// Most audit records one list may ask for.
pub const AUDIT_PAGE_MAX: u32 = 1000;

#[async_trait]
impl AuditLog for MongoStore {
    async fn append_audit_entries(&self, entries: &[AuditEntry]) -> Result<(), StoreError> {
        if entries.is_empty() {
            return Ok(());
        }
        // One batch per tenant, in the callers' order, each one insert.
        let mut batches: Vec<(&TenantId, Vec<Document>)> = Vec::new();
        for AuditEntry { id, record } in entries {
            let mut doc = doc! { "_id": id.as_str() };
            doc.extend(audit_doc(record));
            match batches.iter_mut().find(|(t, _)| *t == &record.tenant) {
                Some((_, docs)) => docs.push(doc),
                None => batches.push((&record.tenant, vec![doc])),
            }
        }
        self.bounded_write("append_audit", async {
            for (tenant, docs) in batches {
                self.ensure_tenant(tenant).await?;
                match self.audit(tenant).insert_many(docs).ordered(false).await {
                    Ok(_) => {}
                    Err(err) if only_already_written(&err) => {}
                    Err(err) => return Err(store_error(&err)),
                }
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

/// Whether an unordered insert failed only because some records' `_id`s
/// are already stored (an earlier attempt wrote them): everything else was
/// inserted, and the server confirmed it.
fn only_already_written(err: &Error) -> bool {
    match err.kind.as_ref() {
        ErrorKind::InsertMany(e) => {
            e.write_concern_error.is_none()
                && e.write_errors.as_ref().is_some_and(|errors| {
                    !errors.is_empty() && errors.iter().all(|e| e.code == DUPLICATE_KEY)
                })
        }
        _ => false,
    }
}
