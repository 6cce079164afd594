//! A tenant's upstream MCP servers, in the one `upstreams` collection:
//! one document per (tenant, name), `_id` `<tenant>/<name>` (neither part
//! can hold a `/`), the sealed credential as hex; and their tools' pins in
//! `tool_pins`, `_id` `<tenant>/<upstream>/<tool>` (tool names hold no
//! `/` either), each written by one conditional write on the definition it
//! replaces, so replicas listing the same change write it (and queue its
//! `upstream.tool_changed` event) once.

use crate::error::{is_duplicate_key, store_error, two_write_deletion};
use crate::schema::TOOL_PINS;
use crate::staged::{self, StagedEvent, with_staged};
use crate::store::MongoStore;
use async_trait::async_trait;
use corkboard_board::webhook::{self, WebhookEvent};
use corkboard_board::{
    DefinitionHash, HeaderName, SealedCredential, StoreError, TenantId, Timestamp, ToolApproval,
    ToolPin, ToolSighting, UPSTREAMS_PER_TENANT_MAX, Upstream, UpstreamName, UpstreamStore,
    UpstreamUrl, ValidationError,
};
use mongodb::bson::{Bson, DateTime, Document, doc};

fn id_of(tenant: &TenantId, name: &UpstreamName) -> String {
    format!("{tenant}/{name}")
}

fn upstream_doc(upstream: &Upstream) -> Document {
    doc! {
        "_id": id_of(&upstream.tenant, &upstream.name),
        "tenant": upstream.tenant.as_str(),
        "name": upstream.name.as_str(),
        "url": upstream.url.as_str(),
        "header": upstream.header.as_str(),
        "credential": hex::encode(upstream.credential.as_bytes()),
        "created_at": DateTime::from_millis(upstream.created_at.as_millis()),
        "created_by": upstream.created_by.as_str(),
        "trust_first_listing": upstream.trust_first_listing,
    }
}

fn pin_id(tenant: &TenantId, upstream: &UpstreamName, tool: &str) -> String {
    format!("{tenant}/{upstream}/{tool}")
}

fn pin_doc(pin: &ToolPin) -> Document {
    let approved = pin.approved.as_ref();
    doc! {
        "_id": pin_id(&pin.tenant, &pin.upstream, &pin.tool),
        "tenant": pin.tenant.as_str(),
        "upstream": pin.upstream.as_str(),
        "tool": pin.tool.as_str(),
        "seen_hash": pin.seen.as_str(),
        "seen_definition": pin.definition.as_str(),
        "seen_at": DateTime::from_millis(pin.seen_at.as_millis()),
        "approved_hash": approved.map(|a| a.hash.as_str()),
        "approved_definition": approved.map(|a| a.definition.as_str()),
        "approved_by": approved.map(|a| a.by.as_str()),
        "approved_at": approved.map(|a| DateTime::from_millis(a.at.as_millis())),
    }
}

/// The update setting every field of `pin`'s document (not its `_id`), so
/// that other fields (staged webhook events) stay.
fn pin_set(pin: &ToolPin) -> Document {
    let mut fields = pin_doc(pin);
    fields.remove("_id");
    doc! { "$set": fields }
}

fn pin_from_doc(
    tenant: &TenantId,
    upstream: &UpstreamName,
    doc: &Document,
) -> Result<ToolPin, StoreError> {
    let id = doc.get_str("_id").unwrap_or("?").to_owned();
    let bad = |why: String| crate::error::corrupt("tool pin", &id, why);
    let text = |key: &str| {
        doc.get_str(key)
            .map(str::to_owned)
            .map_err(|_| bad(format!("field {key} is missing or not a string")))
    };
    let date = |key: &str| {
        doc.get_datetime(key)
            .map(crate::codec::timestamp)
            .map_err(|_| bad(format!("field {key} is missing or not a date")))
    };
    let approved = match doc.get("approved_hash") {
        None | Some(Bson::Null) => None,
        Some(_) => Some(ToolApproval {
            hash: DefinitionHash::from_stored(text("approved_hash")?),
            definition: text("approved_definition")?,
            by: text("approved_by")?,
            at: date("approved_at")?,
        }),
    };
    Ok(ToolPin {
        tenant: tenant.clone(),
        upstream: upstream.clone(),
        tool: text("tool")?,
        seen: DefinitionHash::from_stored(text("seen_hash")?),
        definition: text("seen_definition")?,
        seen_at: date("seen_at")?,
        approved,
    })
}

fn upstream_from_doc(doc: &Document) -> Result<Upstream, StoreError> {
    let id = doc.get_str("_id").unwrap_or("?").to_owned();
    let bad = |why: String| crate::error::corrupt("upstream", &id, why);
    let text = |key: &str| {
        doc.get_str(key)
            .map_err(|_| bad(format!("field {key} is missing or not a string")))
    };
    let valid = |e: ValidationError| bad(e.to_string());
    Ok(Upstream {
        tenant: TenantId::parse(text("tenant")?).map_err(valid)?,
        name: UpstreamName::parse(text("name")?).map_err(valid)?,
        url: UpstreamUrl::parse(text("url")?).map_err(valid)?,
        header: HeaderName::parse(text("header")?).map_err(valid)?,
        credential: SealedCredential::from_bytes(
            hex::decode(text("credential")?).map_err(|e| bad(e.to_string()))?,
        ),
        created_at: Timestamp::from_millis(
            doc.get_datetime("created_at")
                .map_err(|_| bad("field created_at is missing or not a date".into()))?
                .timestamp_millis(),
        ),
        created_by: text("created_by")?.to_owned(),
        // Registered before pins existed: trusted as it was.
        trust_first_listing: doc.get_bool("trust_first_listing").unwrap_or(true),
    })
}

#[async_trait]
impl UpstreamStore for MongoStore {
    async fn put_upstream(&self, upstream: &Upstream) -> Result<(), StoreError> {
        self.bounded_write("put_upstream", async {
            // Counted before the write: two registrations at the same
            // instant may overshoot the limit by one each, as grants do.
            let others = self
                .upstreams()
                .count_documents(doc! {
                    "tenant": upstream.tenant.as_str(),
                    "name": { "$ne": upstream.name.as_str() },
                })
                .await
                .map_err(|e| store_error(&e))?;
            if usize::try_from(others).unwrap_or(usize::MAX) >= UPSTREAMS_PER_TENANT_MAX {
                return Err(ValidationError::new(
                    "name",
                    format!(
                        "tenant {} already has {UPSTREAMS_PER_TENANT_MAX} upstreams, the limit",
                        upstream.tenant
                    ),
                )
                .into());
            }
            // One document replaced whole: a reader sees the old record or
            // the new one.
            self.upstreams()
                .replace_one(
                    doc! { "_id": id_of(&upstream.tenant, &upstream.name) },
                    upstream_doc(upstream),
                )
                .upsert(true)
                .await
                .map(|_| ())
                .map_err(|e| store_error(&e))
        })
        .await
    }

    async fn list_upstreams(&self, tenant: &TenantId) -> Result<Vec<Upstream>, StoreError> {
        self.bounded("list_upstreams", async {
            let mut cursor = self
                .upstreams()
                .find(doc! { "tenant": tenant.as_str() })
                .sort(doc! { "name": 1 })
                .max_time(self.max_time())
                .await
                .map_err(|e| store_error(&e))?;
            let mut out = Vec::new();
            while cursor.advance().await.map_err(|e| store_error(&e))? {
                let doc = cursor.deserialize_current().map_err(|e| store_error(&e))?;
                out.push(upstream_from_doc(&doc)?);
            }
            Ok(out)
        })
        .await
    }

    async fn delete_upstream(
        &self,
        tenant: &TenantId,
        name: &UpstreamName,
    ) -> Result<(), StoreError> {
        self.bounded_write("delete_upstream", async {
            let deleted = self
                .upstreams()
                .delete_one(doc! { "_id": id_of(tenant, name) })
                .await
                .map_err(|e| store_error(&e))?;
            // Its tool pins go after it, so a later upstream of the same
            // name never inherits the old approvals.
            let pins = self
                .tool_pins()
                .delete_many(doc! { "tenant": tenant.as_str(), "upstream": name.as_str() })
                .await
                .map(|_| ())
                .map_err(|e| store_error(&e));
            two_write_deletion(deleted.deleted_count == 1, pins, || {
                StoreError::not_found(format!("upstream {name}"))
            })
        })
        .await
    }

    async fn list_tool_pins(
        &self,
        tenant: &TenantId,
        upstream: &UpstreamName,
    ) -> Result<Vec<ToolPin>, StoreError> {
        self.bounded("list_tool_pins", self.read_pins(tenant, upstream))
            .await
    }

    async fn observe_tools(
        &self,
        tenant: &TenantId,
        upstream: &UpstreamName,
        sightings: &[ToolSighting],
        trust_first_listing: bool,
        at: Timestamp,
    ) -> Result<Vec<ToolPin>, StoreError> {
        let current = self.list_tool_pins(tenant, upstream).await?;
        let changes = corkboard_board::observe_tool_pins(
            tenant,
            upstream,
            &current,
            sightings,
            trust_first_listing,
            at,
        );
        if changes.is_empty() {
            return Ok(current);
        }
        let mut queued = Vec::new();
        self.bounded_write("observe_tools", async {
            // A pending change is an `upstream.tool_changed`, staged on its
            // pin for a tenant with endpoints (`crate::staged`).
            let stage =
                changes.iter().any(|(_, pending)| *pending) && self.has_webhooks(tenant).await?;
            for (pin, pending) in &changes {
                let before = current.iter().find(|p| p.tool == pin.tool);
                let id = pin_id(tenant, upstream, &pin.tool);
                let staged = staged::when(stage && *pending, || {
                    StagedEvent::whole(
                        WebhookEvent::UpstreamToolChanged,
                        format!("{id} {}", pin.seen),
                        at,
                        webhook::tool_changed_data(pin),
                    )
                });
                // Conditional on what was read: of replicas listing the
                // same change, one writes it.
                let wrote = match before {
                    Some(before) => {
                        // Its fields set, not the document replaced: a
                        // marker of an earlier change still staged stays.
                        self.tool_pins()
                            .update_one(
                                doc! {
                                    "_id": &id,
                                    "seen_hash": before.seen.as_str(),
                                },
                                with_staged(pin_set(pin), &staged),
                            )
                            .await
                            .map_err(|e| store_error(&e))?
                            .matched_count
                            == 1
                    }
                    None => {
                        let mut doc = pin_doc(pin);
                        staged::insert_markers(&mut doc, &staged);
                        match self.tool_pins().insert_one(doc).await {
                            Ok(_) => true,
                            Err(e) if is_duplicate_key(&e) => false,
                            Err(e) => return Err(store_error(&e)),
                        }
                    }
                };
                if wrote && !staged.is_empty() {
                    queued.push((id, staged));
                }
            }
            Ok(())
        })
        .await?;
        for (id, staged) in &queued {
            self.queue_staged_shared(tenant, TOOL_PINS, id, staged)
                .await;
        }
        self.list_tool_pins(tenant, upstream).await
    }

    async fn approve_tool(
        &self,
        tenant: &TenantId,
        upstream: &UpstreamName,
        tool: &str,
        hash: &DefinitionHash,
        by: &str,
        at: Timestamp,
    ) -> Result<ToolPin, StoreError> {
        let pin = self
            .list_tool_pins(tenant, upstream)
            .await?
            .into_iter()
            .find(|p| p.tool == tool)
            .ok_or_else(|| StoreError::not_found(format!("tool {tool} of upstream {upstream}")))?;
        let approved = corkboard_board::approve_tool_pin(&pin, hash, by, at)?;
        self.bounded_write("approve_tool", async {
            // Its fields set, not the document replaced: a marker still
            // staged on it stays.
            let replaced = self
                .tool_pins()
                .update_one(
                    doc! { "_id": pin_id(tenant, upstream, tool), "seen_hash": pin.seen.as_str() },
                    pin_set(&approved),
                )
                .await
                .map_err(|e| store_error(&e))?;
            if replaced.matched_count == 0 {
                return Err(ValidationError::new(
                    "hash",
                    format!("tool {tool} of upstream {upstream} changed while it was approved: list its tools again"),
                )
                .into());
            }
            Ok(approved)
        })
        .await
    }
}

impl MongoStore {
    async fn read_pins(
        &self,
        tenant: &TenantId,
        upstream: &UpstreamName,
    ) -> Result<Vec<ToolPin>, StoreError> {
        let mut cursor = self
            .tool_pins()
            .find(doc! { "tenant": tenant.as_str(), "upstream": upstream.as_str() })
            .sort(doc! { "tool": 1 })
            .max_time(self.max_time())
            .await
            .map_err(|e| store_error(&e))?;
        let mut out = Vec::new();
        while cursor.advance().await.map_err(|e| store_error(&e))? {
            let doc = cursor.deserialize_current().map_err(|e| store_error(&e))?;
            out.push(pin_from_doc(tenant, upstream, &doc)?);
        }
        Ok(out)
    }
}
