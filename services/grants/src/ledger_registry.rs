//! The embedded registry: the durable grant ledger itself, read through.
//!
//! `corkboard serve`, `corkboard grant create --data-dir` and the stdio
//! server are separate processes sharing one data dir. A purely in-memory
//! registry would not see grants created by the others, so the local
//! registry resolves token hashes against the ledger (one indexed read).
//!
//! The long-running servers keep a short-lived cache of live grants in
//! front of it ([`LedgerRegistry::cached`]): a read per request was a
//! sizeable share of a request's cost. Revocations made through this
//! process (the admin API, the web board, a run's end) clear the cache at
//! once; one made by another process on the same data dir (`corkboard grant
//! revoke --data-dir`) lands when the cached entry ages out, within
//! [`LEDGER_CACHE_TTL`], well inside the one second contract 6 allows. The
//! stdio server, which resolves the token again for every tool call, reads
//! the ledger every time.

use crate::error::RegistryError;
use crate::registry::TokenRegistry;
use crate::token::TokenHash;
use async_trait::async_trait;
use corkboard_board::{Grant, GrantId, GrantLedger, RunId, StoreError, TenantId, Timestamp};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long a live grant read from the ledger is trusted before it is read
/// again.
pub const LEDGER_CACHE_TTL: Duration = Duration::from_millis(250);
/// Most grants cached at once; a full cache is emptied and refills.
const LEDGER_CACHE_MAX: usize = 10_000;

pub struct LedgerRegistry {
    ledger: Arc<dyn GrantLedger>,
    cache: Option<GrantCache>,
}

/// Live grants by token hash, each with when it was read.
struct GrantCache {
    ttl: Duration,
    entries: Mutex<HashMap<TokenHash, (Arc<Grant>, Instant)>>,
    /// Bumped by every revocation through this process: a ledger read that
    /// started before one is not cached (it may predate the revocation).
    revocations: AtomicU64,
}

impl GrantCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<TokenHash, (Arc<Grant>, Instant)>> {
        // Each critical section is a lookup, an insert or a sweep.
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn fresh(&self, hash: &TokenHash) -> Option<Arc<Grant>> {
        let entries = self.lock();
        let (grant, read_at) = entries.get(hash)?;
        (read_at.elapsed() < self.ttl).then(|| Arc::clone(grant))
    }

    fn keep(&self, hash: TokenHash, grant: &Arc<Grant>, read_since: u64) {
        let mut entries = self.lock();
        // Checked under the lock a revocation sweeps under: either the
        // sweep sees this entry, or this sees the sweep's count.
        if self.revocations.load(Ordering::SeqCst) != read_since {
            return;
        }
        if entries.len() >= LEDGER_CACHE_MAX {
            entries.clear();
        }
        entries.insert(hash, (Arc::clone(grant), Instant::now()));
    }

    fn forget(&self, hash: &TokenHash) {
        self.lock().remove(hash);
    }

    fn forget_where(&self, ended: impl Fn(&Grant) -> bool) {
        let mut entries = self.lock();
        self.revocations.fetch_add(1, Ordering::SeqCst);
        entries.retain(|_, (grant, _)| !ended(grant));
    }
}

impl std::fmt::Debug for LedgerRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LedgerRegistry")
            .field("cache_ttl", &self.cache.as_ref().map(|c| c.ttl))
            .finish_non_exhaustive()
    }
}

impl LedgerRegistry {
    /// Reads the ledger for every token.
    pub fn new(ledger: Arc<dyn GrantLedger>) -> Self {
        Self {
            ledger,
            cache: None,
        }
    }

    /// Trusts a live grant read from the ledger for `ttl` (see the module
    /// docs for what that means for revocations).
    pub fn cached(ledger: Arc<dyn GrantLedger>, ttl: Duration) -> Self {
        Self {
            ledger,
            cache: Some(GrantCache {
                ttl,
                entries: Mutex::new(HashMap::new()),
                revocations: AtomicU64::new(0),
            }),
        }
    }

    async fn read(&self, hash: &TokenHash) -> Result<Arc<Grant>, RegistryError> {
        let event = self
            .ledger
            .grant_by_token_hash(&hash.to_hex())
            .await
            .map_err(from_store)?
            .ok_or(RegistryError::UnknownToken)?;
        if event.revoked_at.is_some() {
            return Err(RegistryError::Revoked);
        }
        if event.grant.is_expired_at(Timestamp::now()) {
            return Err(RegistryError::Expired);
        }
        Ok(Arc::new(event.grant))
    }
}

fn from_store(err: StoreError) -> RegistryError {
    match err {
        StoreError::Unavailable { reason, .. } => RegistryError::Unavailable(reason),
        other => RegistryError::Store(other),
    }
}

#[async_trait]
impl TokenRegistry for LedgerRegistry {
    async fn register(&self, _grant: &Grant, _hash: &TokenHash) -> Result<(), RegistryError> {
        // The ledger write that precedes registration is the registration.
        Ok(())
    }

    async fn resolve(&self, hash: &TokenHash) -> Result<Arc<Grant>, RegistryError> {
        let Some(cache) = &self.cache else {
            return self.read(hash).await;
        };
        if let Some(grant) = cache.fresh(hash) {
            if !grant.is_expired_at(Timestamp::now()) {
                return Ok(grant);
            }
            // Expired as cached; another process may have renewed it since,
            // so the ledger decides.
            cache.forget(hash);
        }
        let read_since = cache.revocations.load(Ordering::SeqCst);
        match self.read(hash).await {
            Ok(grant) => {
                cache.keep(*hash, &grant, read_since);
                Ok(grant)
            }
            Err(err) => {
                cache.forget(hash);
                Err(err)
            }
        }
    }

    async fn renew(&self, grant: &Grant, _hash: &TokenHash) -> Result<bool, RegistryError> {
        // The ledger write that precedes this call is the renewal; a cached
        // copy with the old expiry is dropped so this process sees it at
        // once (other processes within `LEDGER_CACHE_TTL`).
        if let Some(cache) = &self.cache {
            cache.forget_where(|cached| cached.id == grant.id);
        }
        Ok(true)
    }

    async fn revoke(&self, grant: &GrantId) -> Result<bool, RegistryError> {
        // The ledger revocation that precedes this call is the revocation;
        // what is left is to stop trusting a cached copy.
        if let Some(cache) = &self.cache {
            cache.forget_where(|cached| cached.id == *grant);
        }
        Ok(true)
    }

    async fn revoke_run(
        &self,
        tenant: &TenantId,
        run: &RunId,
    ) -> Result<Vec<GrantId>, RegistryError> {
        if let Some(cache) = &self.cache {
            cache.forget_where(|cached| cached.tenant == *tenant && cached.run == *run);
        }
        Ok(Vec::new())
    }

    async fn check(&self) -> Result<(), RegistryError> {
        Ok(())
    }
}

/// A shared registry backed by the durable ledger: a token the shared
/// registry does not know (a Redis restarted empty, a flushed key) is
/// looked up in the ledger and, if its grant is still active, registered
/// again. Errors of the shared registry are passed through unchanged, so an
/// unreachable Redis still fails closed; only a definite "unknown" falls
/// back to the ledger, and the ledger's revocations and expiries win.
pub struct ReadThroughRegistry<R: TokenRegistry> {
    shared: R,
    ledger: LedgerRegistry,
}

impl<R: TokenRegistry> std::fmt::Debug for ReadThroughRegistry<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadThroughRegistry")
            .finish_non_exhaustive()
    }
}

impl<R: TokenRegistry> ReadThroughRegistry<R> {
    pub fn new(shared: R, ledger: Arc<dyn GrantLedger>) -> Self {
        Self {
            shared,
            ledger: LedgerRegistry::new(ledger),
        }
    }

    pub fn shared(&self) -> &R {
        &self.shared
    }
}

#[async_trait]
impl<R: TokenRegistry> TokenRegistry for ReadThroughRegistry<R> {
    async fn register(&self, grant: &Grant, hash: &TokenHash) -> Result<(), RegistryError> {
        self.shared.register(grant, hash).await
    }

    async fn resolve(&self, hash: &TokenHash) -> Result<Arc<Grant>, RegistryError> {
        // A random token costs one lookup per short while, not two per try.
        if self.shared.known_unknown(hash) {
            return Err(RegistryError::UnknownToken);
        }
        match self.shared.resolve(hash).await {
            Err(RegistryError::UnknownToken) => {
                let grant = match self.ledger.resolve(hash).await {
                    Err(RegistryError::UnknownToken) => {
                        // Safe to remember: a token only exists once its
                        // grant is recorded and registered (which forgets
                        // this again), so nobody can present it earlier.
                        self.shared.remember_unknown(hash);
                        return Err(RegistryError::UnknownToken);
                    }
                    other => other?,
                };
                self.shared.register(&grant, hash).await?;
                // A revocation may have landed between the ledger read and
                // the registration. Revocations write the ledger before the
                // shared registry, so reading the ledger again closes the
                // window: either we see it here, or its deletion comes
                // after our registration.
                if let Err(err) = self.ledger.resolve(hash).await {
                    self.shared.revoke(&grant.id).await?;
                    return Err(err);
                }
                Ok(grant)
            }
            other => other,
        }
    }

    async fn renew(&self, grant: &Grant, hash: &TokenHash) -> Result<bool, RegistryError> {
        self.shared.renew(grant, hash).await
    }

    async fn revoke(&self, grant: &GrantId) -> Result<bool, RegistryError> {
        self.shared.revoke(grant).await
    }

    async fn revoke_hash(&self, grant: &GrantId, hash: &TokenHash) -> Result<bool, RegistryError> {
        self.shared.revoke_hash(grant, hash).await
    }

    async fn still_resolves(&self, hash: &TokenHash) -> Result<bool, RegistryError> {
        self.shared.still_resolves(hash).await
    }

    async fn revoke_run(
        &self,
        tenant: &TenantId,
        run: &RunId,
    ) -> Result<Vec<GrantId>, RegistryError> {
        self.shared.revoke_run(tenant, run).await
    }

    async fn check(&self) -> Result<(), RegistryError> {
        self.shared.check().await
    }

    fn known_unknown(&self, hash: &TokenHash) -> bool {
        self.shared.known_unknown(hash)
    }

    fn remember_unknown(&self, hash: &TokenHash) {
        self.shared.remember_unknown(hash);
    }
}
