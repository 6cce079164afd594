//! In-process registry: the embedded default for one process.

use crate::error::RegistryError;
use crate::registry::TokenRegistry;
use crate::token::TokenHash;
use async_trait::async_trait;
use corkboard_board::{Grant, GrantId, RunId, TenantId, Timestamp};
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

/// Grants by token hash, in this process's memory. Expired entries are
/// refused on lookup and pruned on every registration.
#[derive(Debug, Default)]
pub struct MemoryRegistry {
    inner: RwLock<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    by_hash: HashMap<TokenHash, Arc<Grant>>,
    hash_by_grant: HashMap<GrantId, TokenHash>,
}

impl MemoryRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.read().by_hash.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        self.inner
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Inner> {
        self.inner
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[async_trait]
impl TokenRegistry for MemoryRegistry {
    async fn register(&self, grant: &Grant, hash: &TokenHash) -> Result<(), RegistryError> {
        let now = Timestamp::now();
        let mut inner = self.write();
        let expired: Vec<GrantId> = inner
            .by_hash
            .values()
            .filter(|g| g.is_expired_at(now))
            .map(|g| g.id.clone())
            .collect();
        for id in expired {
            if let Some(h) = inner.hash_by_grant.remove(&id) {
                inner.by_hash.remove(&h);
            }
        }
        inner.by_hash.insert(*hash, Arc::new(grant.clone()));
        inner.hash_by_grant.insert(grant.id.clone(), *hash);
        Ok(())
    }

    async fn resolve(&self, hash: &TokenHash) -> Result<Arc<Grant>, RegistryError> {
        let grant = self
            .read()
            .by_hash
            .get(hash)
            .cloned()
            .ok_or(RegistryError::UnknownToken)?;
        if grant.is_expired_at(Timestamp::now()) {
            return Err(RegistryError::Expired);
        }
        Ok(grant)
    }

    async fn renew(&self, grant: &Grant, hash: &TokenHash) -> Result<bool, RegistryError> {
        let mut inner = self.write();
        Ok(match inner.by_hash.get_mut(hash) {
            Some(held) if held.id == grant.id => {
                *held = Arc::new(grant.clone());
                true
            }
            _ => false,
        })
    }

    async fn revoke(&self, grant: &GrantId) -> Result<bool, RegistryError> {
        let mut inner = self.write();
        Ok(match inner.hash_by_grant.remove(grant) {
            Some(hash) => inner.by_hash.remove(&hash).is_some(),
            None => false,
        })
    }

    async fn revoke_run(
        &self,
        tenant: &TenantId,
        run: &RunId,
    ) -> Result<Vec<GrantId>, RegistryError> {
        let mut inner = self.write();
        let ids: Vec<GrantId> = inner
            .by_hash
            .values()
            .filter(|g| &g.tenant == tenant && &g.run == run)
            .map(|g| g.id.clone())
            .collect();
        for id in &ids {
            if let Some(hash) = inner.hash_by_grant.remove(id) {
                inner.by_hash.remove(&hash);
            }
        }
        Ok(ids)
    }

    async fn check(&self) -> Result<(), RegistryError> {
        Ok(())
    }
}
