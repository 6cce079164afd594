//! Tenants' own grant settings ([`GrantPolicy`]): one document per tenant
//! in the `tenant_settings` collection, `_id` the tenant, the settings as
//! a sub-document (settings added later, such as budgets, need no
//! migration).

use crate::codec::field;
use crate::error::store_error;
use crate::store::MongoStore;
use corkboard_board::{GrantPolicy, StoreError, TenantId};
use mongodb::bson::{self, Document, doc};

/// The collection of every tenant's settings.
pub const TENANT_SETTINGS: &str = "tenant_settings";
const POLICY: &str = "grant_policy";

impl MongoStore {
    fn tenant_settings(&self) -> mongodb::Collection<Document> {
        self.database().collection(TENANT_SETTINGS)
    }

    pub(crate) async fn load_policy(&self, tenant: &TenantId) -> Result<GrantPolicy, StoreError> {
        self.bounded("grant_policy", async {
            let found = self
                .tenant_settings()
                .find_one(doc! { field::ID: tenant.as_str() })
                .max_time(self.max_time())
                .await
                .map_err(|e| store_error(&e))?;
            let Some(doc) = found else {
                return Ok(GrantPolicy::default());
            };
            let policy = doc.get_document(POLICY).map_err(|e| {
                StoreError::Internal(format!("grant settings of tenant {tenant}: {e}"))
            })?;
            bson::deserialize_from_document(policy.clone()).map_err(|e| {
                StoreError::Internal(format!("unreadable grant settings of tenant {tenant}: {e}"))
            })
        })
        .await
    }

    pub(crate) async fn store_policy(
        &self,
        tenant: &TenantId,
        policy: &GrantPolicy,
    ) -> Result<(), StoreError> {
        policy.validate()?;
        let encoded = bson::serialize_to_document(policy)
            .map_err(|e| StoreError::Internal(format!("cannot encode grant settings: {e}")))?;
        self.bounded_write("set_grant_policy", async {
            self.tenant_settings()
                .update_one(
                    doc! { field::ID: tenant.as_str() },
                    doc! { "$set": { POLICY: encoded } },
                )
                .upsert(true)
                .await
                .map(|_| ())
                .map_err(|e| store_error(&e))
        })
        .await
    }
}
