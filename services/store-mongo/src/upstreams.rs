//! A tenant's upstream MCP servers, in the one `upstreams` collection:
//! one document per (tenant, name), `_id` `<tenant>/<name>` (neither part
//! can hold a `/`), the sealed credential as hex.

use crate::error::store_error;
use crate::store::MongoStore;
use async_trait::async_trait;
use corkboard_board::{
    HeaderName, SealedCredential, StoreError, TenantId, Timestamp, UPSTREAMS_PER_TENANT_MAX,
    Upstream, UpstreamName, UpstreamStore, UpstreamUrl, ValidationError,
};
use mongodb::bson::{DateTime, Document, doc};

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
    }
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
            if deleted.deleted_count == 0 {
                return Err(StoreError::not_found(format!("upstream {name}")));
            }
            Ok(())
        })
        .await
    }
}
