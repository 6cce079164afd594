//! The bounded local cache in front of the Redis registry.
//!
//! It exists so that a live grant costs no Redis round trip per request. Its
//! invariants carry the registry's revocation guarantee:
//! - an entry is never served after its invalidation arrived: invalidation
//!   removes it under the write lock, and an insert that raced with any
//!   invalidation (its Redis read started before the invalidation and ends
//!   after it) is dropped, detected by the `epoch` counter;
//! - while the cache is not `live` (the invalidation subscription is down, so
//!   invalidations may be missed) it is empty, serves nothing and accepts
//!   nothing;
//! - entries live at most `ttl`, and at most `capacity` of them are kept.
//!
//! [`UnknownCache`] is its negative counterpart: hashes recently found
//! unknown everywhere.

use crate::token::TokenHash;
use corkboard_board::{Grant, Timestamp};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

/// What the cache knows about a token.
#[derive(Debug)]
pub(crate) enum Lookup {
    Hit(Arc<Grant>),
    /// Cached, and the grant has expired since: no need to ask Redis.
    Expired,
    Miss,
}

#[derive(Debug)]
pub(crate) struct GrantCache {
    capacity: usize,
    ttl: Duration,
    inner: RwLock<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    entries: HashMap<TokenHash, Entry>,
    /// Insertion order for eviction; may hold stale pairs for entries since
    /// removed or replaced (recognised by `seq`), compacted when it grows.
    order: VecDeque<(TokenHash, u64)>,
    next_seq: u64,
    /// Bumped by every invalidation and every clear.
    epoch: u64,
    live: bool,
}

#[derive(Debug)]
struct Entry {
    grant: Arc<Grant>,
    inserted: Instant,
    seq: u64,
}

impl GrantCache {
    /// A cache that starts not live: nothing is cached until
    /// [`Self::set_live`] says invalidations are being received.
    pub(crate) fn new(capacity: usize, ttl: Duration) -> Self {
        Self {
            capacity,
            ttl,
            inner: RwLock::new(Inner::default()),
        }
    }

    pub(crate) fn get(&self, hash: &TokenHash, now: Instant, now_ts: Timestamp) -> Lookup {
        let inner = self.read();
        if !inner.live {
            return Lookup::Miss;
        }
        match inner.entries.get(hash) {
            Some(entry) if now.saturating_duration_since(entry.inserted) < self.ttl => {
                if entry.grant.is_expired_at(now_ts) {
                    Lookup::Expired
                } else {
                    Lookup::Hit(Arc::clone(&entry.grant))
                }
            }
            _ => Lookup::Miss,
        }
    }

    /// The epoch to hand back to [`Self::insert`], or `None` when the cache
    /// is not live (then nothing read now may be cached).
    pub(crate) fn epoch(&self) -> Option<u64> {
        let inner = self.read();
        inner.live.then_some(inner.epoch)
    }

    /// Caches `grant` if nothing was invalidated or cleared since `epoch`
    /// was taken. Returns whether it was cached.
    pub(crate) fn insert(
        &self,
        epoch: u64,
        hash: TokenHash,
        grant: Arc<Grant>,
        now: Instant,
    ) -> bool {
        if self.capacity == 0 {
            return false;
        }
        let mut inner = self.write();
        if !inner.live || inner.epoch != epoch {
            return false;
        }
        if !inner.entries.contains_key(&hash) {
            while inner.entries.len() >= self.capacity {
                if !inner.evict_one() {
                    break;
                }
            }
        }
        let seq = inner.next_seq;
        inner.next_seq += 1;
        inner.entries.insert(
            hash,
            Entry {
                grant,
                inserted: now,
                seq,
            },
        );
        inner.order.push_back((hash, seq));
        if inner.order.len() > 2 * self.capacity + 16 {
            inner.compact();
        }
        true
    }

    pub(crate) fn invalidate(&self, hash: &TokenHash) {
        let mut inner = self.write();
        inner.epoch += 1;
        inner.entries.remove(hash);
    }

    /// Empties the cache and says whether it may serve and accept entries.
    pub(crate) fn set_live(&self, live: bool) {
        let mut inner = self.write();
        inner.epoch += 1;
        inner.live = live;
        inner.entries.clear();
        inner.order.clear();
    }

    pub(crate) fn len(&self) -> usize {
        self.read().entries.len()
    }

    fn read(&self) -> RwLockReadGuard<'_, Inner> {
        // The data stays consistent even if a holder panicked: every
        // mutation is a single map/deque operation.
        self.inner.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|p| p.into_inner())
    }
}

impl Inner {
    /// Removes the oldest entry: entries only age, so the oldest is also the
    /// first to go stale. `false` if none is left.
    fn evict_one(&mut self) -> bool {
        while let Some((hash, seq)) = self.order.pop_front() {
            if self.entries.get(&hash).is_some_and(|e| e.seq == seq) {
                self.entries.remove(&hash);
                return true;
            }
        }
        false
    }

    fn compact(&mut self) {
        let mut live: Vec<(TokenHash, u64)> =
            self.entries.iter().map(|(h, e)| (*h, e.seq)).collect();
        live.sort_unstable_by_key(|(_, seq)| *seq);
        self.order = live.into();
    }
}

/// Token hashes recently found unknown everywhere (the shared registry and
/// the ledger), so that a stream of random tokens costs one lookup each per
/// `ttl` rather than a Redis and a ledger read per request. Bounded: at
/// most `capacity` hashes, the oldest dropped first. A hash leaves it when
/// a grant for it is registered (here or, through the revocation channel,
/// on another replica) and after `ttl`.
#[derive(Debug)]
pub(crate) struct UnknownCache {
    capacity: usize,
    ttl: Duration,
    inner: std::sync::Mutex<UnknownInner>,
}

#[derive(Debug, Default)]
struct UnknownInner {
    entries: HashMap<TokenHash, Instant>,
    /// Insertion order; pairs whose entry was removed or replaced since are
    /// skipped (recognised by their instant).
    order: VecDeque<(TokenHash, Instant)>,
}

impl UnknownCache {
    pub(crate) fn new(capacity: usize, ttl: Duration) -> Self {
        Self {
            capacity,
            ttl,
            inner: std::sync::Mutex::new(UnknownInner::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, UnknownInner> {
        // Each critical section is a few map/deque operations.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn contains(&self, hash: &TokenHash, now: Instant) -> bool {
        self.lock()
            .entries
            .get(hash)
            .is_some_and(|at| now.saturating_duration_since(*at) < self.ttl)
    }

    pub(crate) fn insert(&self, hash: TokenHash, now: Instant) {
        if self.capacity == 0 {
            return;
        }
        let mut inner = self.lock();
        while inner.entries.len() >= self.capacity && !inner.entries.contains_key(&hash) {
            let Some((old, at)) = inner.order.pop_front() else {
                break;
            };
            if inner.entries.get(&old) == Some(&at) {
                inner.entries.remove(&old);
            }
        }
        inner.entries.insert(hash, now);
        inner.order.push_back((hash, now));
        if inner.order.len() > 2 * self.capacity + 16 {
            let mut live: Vec<(TokenHash, Instant)> =
                inner.entries.iter().map(|(h, at)| (*h, *at)).collect();
            live.sort_unstable_by_key(|(_, at)| *at);
            inner.order = live.into();
        }
    }

    pub(crate) fn remove(&self, hash: &TokenHash) {
        self.lock().entries.remove(hash);
    }

    pub(crate) fn clear(&self) {
        let mut inner = self.lock();
        inner.entries.clear();
        inner.order.clear();
    }

    pub(crate) fn len(&self) -> usize {
        self.lock().entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::token::RunToken;
    use corkboard_board::{Capabilities, GrantId, RunId, TenantId};

    fn grant(expires_in_ms: i64) -> Arc<Grant> {
        let now = Timestamp::now();
        Arc::new(Grant {
            id: GrantId::generate(),
            tenant: TenantId::parse("t").unwrap(),
            run: RunId::parse("r").unwrap(),
            capabilities: Capabilities::all(),
            created_at: now,
            expires_at: now.plus_millis(expires_in_ms),
            created_by: "test".into(),
            budgets: Default::default(),
            min_integrity: None,
        })
    }

    fn hash() -> TokenHash {
        RunToken::generate().hash()
    }

    #[test]
    fn serves_nothing_until_live_and_after_going_down() {
        let cache = GrantCache::new(10, Duration::from_secs(30));
        let h = hash();
        assert_eq!(cache.epoch(), None);
        cache.set_live(true);
        let epoch = cache.epoch().unwrap();
        assert!(cache.insert(epoch, h, grant(60_000), Instant::now()));
        assert!(matches!(
            cache.get(&h, Instant::now(), Timestamp::now()),
            Lookup::Hit(_)
        ));
        cache.set_live(false);
        assert!(matches!(
            cache.get(&h, Instant::now(), Timestamp::now()),
            Lookup::Miss
        ));
        assert_eq!(cache.len(), 0);
        assert!(!cache.insert(epoch, h, grant(60_000), Instant::now()));
    }

    #[test]
    fn an_insert_racing_an_invalidation_is_dropped() {
        let cache = GrantCache::new(10, Duration::from_secs(30));
        cache.set_live(true);
        let (a, b) = (hash(), hash());
        let epoch = cache.epoch().unwrap();
        // The invalidation of `a` arrives while `a` was being read from Redis.
        cache.invalidate(&a);
        assert!(!cache.insert(epoch, a, grant(60_000), Instant::now()));
        assert!(matches!(
            cache.get(&a, Instant::now(), Timestamp::now()),
            Lookup::Miss
        ));
        let epoch = cache.epoch().unwrap();
        assert!(cache.insert(epoch, b, grant(60_000), Instant::now()));
        cache.invalidate(&b);
        assert!(matches!(
            cache.get(&b, Instant::now(), Timestamp::now()),
            Lookup::Miss
        ));
    }

    #[test]
    fn entries_age_out_and_expired_grants_are_reported() {
        let cache = GrantCache::new(10, Duration::from_secs(30));
        cache.set_live(true);
        let (a, b) = (hash(), hash());
        let t0 = Instant::now();
        cache.insert(cache.epoch().unwrap(), a, grant(60_000), t0);
        assert!(matches!(
            cache.get(&a, t0 + Duration::from_secs(31), Timestamp::now()),
            Lookup::Miss
        ));
        let g = grant(1_000);
        let after_expiry = g.expires_at.plus_millis(1);
        cache.insert(cache.epoch().unwrap(), b, g, t0);
        assert!(matches!(cache.get(&b, t0, after_expiry), Lookup::Expired));
    }

    #[test]
    fn unknown_hashes_are_bounded_age_out_and_can_be_removed() {
        let cache = UnknownCache::new(2, Duration::from_secs(5));
        let (a, b, c) = (hash(), hash(), hash());
        let t0 = Instant::now();
        cache.insert(a, t0);
        assert!(cache.contains(&a, t0));
        assert!(!cache.contains(&a, t0 + Duration::from_secs(5)), "aged out");
        cache.insert(b, t0);
        cache.insert(c, t0);
        assert_eq!(cache.len(), 2);
        assert!(!cache.contains(&a, t0), "the oldest went first");
        cache.remove(&b);
        assert!(!cache.contains(&b, t0) && cache.contains(&c, t0));
        for _ in 0..100 {
            cache.insert(c, t0);
        }
        assert!(cache.lock().order.len() <= 2 * 2 + 16);
    }

    #[test]
    fn capacity_is_bounded_oldest_first() {
        let cache = GrantCache::new(3, Duration::from_secs(30));
        cache.set_live(true);
        let hashes: Vec<TokenHash> = (0..5).map(|_| hash()).collect();
        let now = Instant::now();
        for h in &hashes {
            assert!(cache.insert(cache.epoch().unwrap(), *h, grant(60_000), now));
        }
        assert_eq!(cache.len(), 3);
        let present = |h: &TokenHash| matches!(cache.get(h, now, Timestamp::now()), Lookup::Hit(_));
        assert!(!present(&hashes[0]) && !present(&hashes[1]));
        assert!(hashes[2..].iter().all(present));
        // Re-inserting and invalidating keep the order bounded.
        for _ in 0..100 {
            cache.insert(cache.epoch().unwrap(), hashes[4], grant(60_000), now);
        }
        assert_eq!(cache.len(), 3);
        assert!(cache.read().order.len() <= 2 * 3 + 16);
        let disabled = GrantCache::new(0, Duration::from_secs(30));
        disabled.set_live(true);
        assert!(!disabled.insert(disabled.epoch().unwrap(), hashes[0], grant(60_000), now));
    }
}
