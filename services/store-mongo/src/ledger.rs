//! The grant ledger, in the one `grants` collection, and the values used
//! once, in `used_once` (one document per value, `_id` its kind and id,
//! removed by a TTL index once expired).

use crate::codec::{
    budget_counts, budget_used_field, date, field, grant_doc, grant_field, grant_from_doc,
};
use crate::error::{is_duplicate_key, store_error};
use crate::schema;
use crate::staged::{self, StagedEvent, with_staged};
use crate::store::MongoStore;
use async_trait::async_trait;
use corkboard_board::WebhookEvent;
use corkboard_board::{
    ApprovalId, ApprovalItem, ApprovalStatus, Decision, Grant, GrantEvent, GrantId, GrantLedger,
    GrantPolicy, RunId, StoreError, TenantId, Timestamp, ValidationError, limits,
};
use mongodb::Cursor;
use mongodb::bson::{Bson, Document, doc};
use mongodb::options::ReturnDocument;

/// Refuses a page size of 0 (which MongoDB would read as "no limit") or
/// above `max`, as the SQLite store does.
pub(crate) fn check_limit(limit: u32, max: u32) -> Result<(), StoreError> {
    if limit == 0 || limit > max {
        return Err(ValidationError::new("limit", format!("must be between 1 and {max}")).into());
    }
    Ok(())
}

fn grant_not_found(id: &GrantId) -> StoreError {
    StoreError::not_found(format!("grant {id}"))
}

async fn collect_grants(mut cursor: Cursor<Document>) -> Result<Vec<GrantEvent>, StoreError> {
    let mut grants = Vec::new();
    while cursor.advance().await.map_err(|e| store_error(&e))? {
        let doc = cursor.deserialize_current().map_err(|e| store_error(&e))?;
        grants.push(grant_from_doc(&doc)?);
    }
    Ok(grants)
}

impl MongoStore {
    async fn find_grant(&self, filter: Document) -> Result<Option<GrantEvent>, StoreError> {
        let found = self
            .grants()
            .find_one(filter)
            .max_time(self.max_time())
            .await
            .map_err(|e| store_error(&e))?;
        found.map(|doc| grant_from_doc(&doc)).transpose()
    }
}

impl MongoStore {
    /// The grant write itself, staging `started` (its `run.started`) for a
    /// tenant with webhook endpoints (returned, to be queued:
    /// `crate::staged`).
    async fn record_grant_only(
        &self,
        grant: &Grant,
        token_hash: &str,
        started: StagedEvent,
    ) -> Result<Vec<StagedEvent>, StoreError> {
        self.bounded_write("record_grant", async {
            // The unique token-hash index must exist before the first
            // grant goes in (it does after `connect`; this covers
            // `connect_lazy` before its start-up has run).
            self.ensure_grants().await?;
            let staged = staged::when(self.has_webhooks(&grant.tenant).await?, || started);
            let mut doc = grant_doc(grant, token_hash);
            staged::insert_markers(&mut doc, &staged);
            match self.grants().insert_one(doc).await {
                Ok(_) => Ok(staged),
                Err(e) if is_duplicate_key(&e) => {
                    // A retry of a recording that went through (its answer
                    // was lost) is success; anything else reusing the id or
                    // the token hash is a bug upstream, never overwritten.
                    let existing = self
                        .find_grant(doc! { field::ID: grant.id.as_str() })
                        .await?;
                    match existing {
                        Some(event) if &event.grant == grant && event.token_hash == token_hash => {
                            Ok(staged)
                        }
                        _ => Err(StoreError::Internal(format!(
                            "grant {} or its token hash is already recorded differently",
                            grant.id
                        ))),
                    }
                }
                Err(e) => Err(store_error(&e)),
            }
        })
        .await
    }

    /// The revocation write itself (see [`Self::record_grant_only`]),
    /// staging the grant's `run.ended` when this revocation is the one
    /// that took effect and its tenant has webhook endpoints (returned).
    async fn record_revocation_only(
        &self,
        id: &GrantId,
        by: &str,
        at: Timestamp,
    ) -> Result<(GrantEvent, Vec<StagedEvent>), StoreError> {
        self.bounded_write("record_revocation", async {
            // Read first for the tenant (whether it has endpoints) and the
            // run (the event's data).
            let read = self
                .find_grant(doc! { field::ID: id.as_str() })
                .await?
                .ok_or_else(|| grant_not_found(id))?;
            let hooked = read.revoked_at.is_none() && self.has_webhooks(&read.grant.tenant).await?;
            let staged = staged::when(hooked, || {
                let run = &read.grant.run;
                let data = serde_json::json!({
                    "run": { "id": run, "grant": id, "revoked_by": by },
                });
                StagedEvent::whole(WebhookEvent::RunEnded, id.as_str(), at, data)
            });
            // The filter on "not revoked yet" makes the first revocation win
            // atomically; later ones read what it wrote.
            let update = doc! { "$set": {
                grant_field::REVOKED_AT: date(at),
                grant_field::REVOKED_BY: by,
            } };
            let updated = self
                .grants()
                .find_one_and_update(
                    doc! { field::ID: id.as_str(), grant_field::REVOKED_AT: Bson::Null },
                    with_staged(update, &staged),
                )
                .return_document(ReturnDocument::After)
                .max_time(self.max_time())
                .await
                .map_err(|e| store_error(&e))?;
            let (event, staged) = match updated {
                Some(doc) => (grant_from_doc(&doc)?, staged),
                // Another revocation won (its own event is staged).
                None => {
                    let event = self
                        .find_grant(doc! { field::ID: id.as_str() })
                        .await?
                        .ok_or_else(|| grant_not_found(id))?;
                    (event, Vec::new())
                }
            };
            // The grant's claims end with it. Right after the revocation
            // (MongoDB has no transaction across the two collections here):
            // should this fail, the revocation stands, so the error says the
            // write may have been applied (never "nothing applied"); a retry
            // clears the claims, and a claim attempt takes over a claim whose
            // grant is revoked meanwhile.
            self.end_claims_of(&event.grant.tenant, id, at)
                .await
                .map_err(StoreError::after_commit_point)?;
            Ok((event, staged))
        })
        .await
    }
}

#[async_trait]
impl GrantLedger for MongoStore {
    async fn record_grant(&self, grant: &Grant, token_hash: &str) -> Result<(), StoreError> {
        let data = serde_json::json!({ "run": {
            "id": grant.run, "grant": grant.id, "capabilities": grant.capabilities,
            "expires_at": grant.expires_at,
        } });
        let started = StagedEvent::whole(
            WebhookEvent::RunStarted,
            grant.id.as_str(),
            grant.created_at,
            data,
        );
        let staged = self.record_grant_only(grant, token_hash, started).await?;
        self.queue_staged_shared(&grant.tenant, schema::GRANTS, grant.id.as_str(), &staged)
            .await;
        Ok(())
    }

    async fn record_revocation(
        &self,
        id: &GrantId,
        by: &str,
        at: Timestamp,
    ) -> Result<GrantEvent, StoreError> {
        // Staged only by the revocation that took effect, not a repeat.
        let (event, staged) = self.record_revocation_only(id, by, at).await?;
        self.queue_staged_shared(&event.grant.tenant, schema::GRANTS, id.as_str(), &staged)
            .await;
        Ok(event)
    }

    async fn record_expiry(
        &self,
        id: &GrantId,
        expires_at: Timestamp,
        now: Timestamp,
    ) -> Result<GrantEvent, StoreError> {
        self.bounded_write("record_expiry", async {
            // Live at `now` in the filter: a revoked or expired grant is
            // not matched and stays as it is (one atomic document update).
            let updated = self
                .grants()
                .find_one_and_update(
                    doc! {
                        field::ID: id.as_str(),
                        grant_field::REVOKED_AT: Bson::Null,
                        grant_field::EXPIRES_AT: { "$gt": date(now) },
                    },
                    doc! { "$set": { grant_field::EXPIRES_AT: date(expires_at) } },
                )
                .return_document(ReturnDocument::After)
                .max_time(self.max_time())
                .await
                .map_err(|e| store_error(&e))?;
            match updated {
                Some(doc) => grant_from_doc(&doc),
                None => self
                    .find_grant(doc! { field::ID: id.as_str() })
                    .await?
                    .ok_or_else(|| grant_not_found(id)),
            }
        })
        .await
    }

    async fn grant_policy(&self, tenant: &TenantId) -> Result<GrantPolicy, StoreError> {
        self.load_policy(tenant).await
    }

    async fn set_grant_policy(
        &self,
        tenant: &TenantId,
        policy: &GrantPolicy,
    ) -> Result<(), StoreError> {
        self.store_policy(tenant, policy).await
    }

    async fn reserve_budget(
        &self,
        id: &GrantId,
        kind: corkboard_board::BudgetKind,
        limit: u32,
    ) -> Result<bool, StoreError> {
        let used = budget_used_field(kind);
        self.bounded_write("reserve_budget", async {
            // One document update under a `$lt` filter: of racing callers
            // on any replica at most `limit` in all match.
            let taken = self
                .grants()
                .find_one_and_update(
                    doc! { field::ID: id.as_str(), used.as_str(): { "$lt": i64::from(limit) } },
                    doc! { "$inc": { used.as_str(): 1_i64 } },
                )
                .projection(doc! { field::ID: 1 })
                .max_time(self.max_time())
                .await
                .map_err(|e| store_error(&e))?;
            Ok(taken.is_some())
        })
        .await
    }

    async fn release_budget(
        &self,
        id: &GrantId,
        kind: corkboard_board::BudgetKind,
    ) -> Result<(), StoreError> {
        let used = budget_used_field(kind);
        self.bounded_write("release_budget", async {
            self.grants()
                .update_one(
                    doc! { field::ID: id.as_str(), used.as_str(): { "$gt": 0_i64 } },
                    doc! { "$inc": { used.as_str(): -1_i64 } },
                )
                .await
                .map_err(|e| store_error(&e))?;
            Ok(())
        })
        .await
    }

    async fn budget_used(
        &self,
        id: &GrantId,
    ) -> Result<std::collections::BTreeMap<corkboard_board::BudgetKind, u32>, StoreError> {
        self.bounded("budget_used", async {
            let found = self
                .grants()
                .find_one(doc! { field::ID: id.as_str() })
                .projection(doc! { field::ID: 1, grant_field::BUDGET_USED: 1 })
                .max_time(self.max_time())
                .await
                .map_err(|e| store_error(&e))?
                .ok_or_else(|| grant_not_found(id))?;
            Ok(budget_counts(&found, grant_field::BUDGET_USED)?
                .into_iter()
                .collect())
        })
        .await
    }

    async fn put_approval(&self, item: &ApprovalItem) -> Result<(), StoreError> {
        self.put_approval_doc(item).await
    }

    async fn approval(
        &self,
        tenant: &TenantId,
        id: &ApprovalId,
    ) -> Result<Option<ApprovalItem>, StoreError> {
        self.load_approval(tenant, id).await
    }

    async fn list_approvals(
        &self,
        tenant: &TenantId,
        status: Option<ApprovalStatus>,
        limit: u32,
    ) -> Result<Vec<ApprovalItem>, StoreError> {
        self.list_approval_docs(tenant, status, limit).await
    }

    async fn approval_for_call(
        &self,
        tenant: &TenantId,
        run: &RunId,
        tool: &str,
        digest: &str,
    ) -> Result<Option<ApprovalItem>, StoreError> {
        self.approval_doc_for_call(tenant, run, tool, digest).await
    }

    async fn decide_approval(
        &self,
        tenant: &TenantId,
        id: &ApprovalId,
        decision: &Decision,
    ) -> Result<ApprovalItem, StoreError> {
        self.decide_approval_doc(tenant, id, decision).await
    }

    async fn use_approval(
        &self,
        tenant: &TenantId,
        id: &ApprovalId,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        self.use_approval_doc(tenant, id, now).await
    }

    async fn record_first_use(
        &self,
        kind: &str,
        id: &str,
        expires_at: Timestamp,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let key = used_once_key(kind, id);
        self.bounded_write("record_first_use", async {
            // One upsert matching only an expired record: a new value is
            // inserted, an expired one replaced, and a live one makes the
            // upsert's insert collide on `_id` (of racing callers in any
            // process, every one but the first). The TTL index sweeps the
            // rest; until it has, the filter decides.
            let written = self
                .used_once()
                .update_one(
                    doc! { field::ID: &key, schema::USED_ONCE_EXPIRES_AT: { "$lte": date(now) } },
                    doc! { "$set": { schema::USED_ONCE_EXPIRES_AT: date(expires_at) } },
                )
                .upsert(true)
                .await;
            match written {
                Ok(_) => Ok(true),
                Err(err) if is_duplicate_key(&err) => Ok(false),
                Err(err) => Err(store_error(&err)),
            }
        })
        .await
    }

    async fn first_use_recorded(
        &self,
        kind: &str,
        id: &str,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let key = used_once_key(kind, id);
        self.bounded("first_use_recorded", async {
            let found = self
                .used_once()
                .find_one(
                    doc! { field::ID: &key, schema::USED_ONCE_EXPIRES_AT: { "$gt": date(now) } },
                )
                .projection(doc! { field::ID: 1 })
                .await
                .map_err(|err| store_error(&err))?;
            Ok(found.is_some())
        })
        .await
    }

    async fn grant(&self, id: &GrantId) -> Result<GrantEvent, StoreError> {
        self.bounded("grant", async {
            self.find_grant(doc! { field::ID: id.as_str() })
                .await?
                .ok_or_else(|| grant_not_found(id))
        })
        .await
    }

    async fn grant_by_token_hash(
        &self,
        token_hash: &str,
    ) -> Result<Option<GrantEvent>, StoreError> {
        self.bounded("grant_by_token_hash", async {
            self.find_grant(doc! { grant_field::TOKEN_HASH: token_hash })
                .await
        })
        .await
    }

    async fn list_grants(
        &self,
        tenant: &TenantId,
        run: Option<&RunId>,
        cursor: Option<&GrantId>,
        limit: u32,
    ) -> Result<Vec<GrantEvent>, StoreError> {
        check_limit(limit, limits::PAGE_MAX)?;
        self.bounded("list_grants", async {
            let mut filter = doc! { field::TENANT: tenant.as_str() };
            if let Some(run) = run {
                filter.insert(grant_field::RUN, run.as_str());
            }
            if let Some(cursor) = cursor {
                filter.insert(field::ID, doc! { "$lt": cursor.as_str() });
            }
            let found = self
                .grants()
                .find(filter)
                .sort(doc! { field::ID: -1 })
                .limit(i64::from(limit))
                .max_time(self.max_time())
                .await
                .map_err(|e| store_error(&e))?;
            collect_grants(found).await
        })
        .await
    }

    async fn active_grants(&self, now: Timestamp) -> Result<Vec<GrantEvent>, StoreError> {
        self.bounded("active_grants", async {
            let found = self
                .grants()
                .find(doc! {
                    grant_field::REVOKED_AT: Bson::Null,
                    grant_field::EXPIRES_AT: { "$gt": date(now) },
                })
                .sort(doc! { field::ID: 1 })
                .max_time(self.max_time())
                .await
                .map_err(|e| store_error(&e))?;
            collect_grants(found).await
        })
        .await
    }

    async fn revoked_grants(&self, now: Timestamp) -> Result<Vec<GrantEvent>, StoreError> {
        self.bounded("revoked_grants", async {
            let found = self
                .grants()
                .find(doc! {
                    grant_field::REVOKED_AT: { "$ne": Bson::Null },
                    grant_field::EXPIRES_AT: { "$gt": date(now) },
                })
                .max_time(self.max_time())
                .await
                .map_err(|e| store_error(&e))?;
            // Ordered here, not by the server: the answer is every match
            // anyway, and a server-side sort of it is a blocking SORT
            // stage (memory-bound on the server) where the index's order
            // is (revoked_at, expires_at).
            let mut grants = collect_grants(found).await?;
            grants.sort_by(|a, b| a.grant.id.as_str().cmp(b.grant.id.as_str()));
            Ok(grants)
        })
        .await
    }
}

/// The `_id` of a used-once record: length-prefixed, so no kind and id
/// pair reads as another.
fn used_once_key(kind: &str, id: &str) -> String {
    format!("{}:{kind}:{id}", kind.len())
}
