//! Expensive reads: which board reads are expensive (decided here, once,
//! for every store), and the two bounds every store puts on them, so one
//! tenant's costly queries cannot slow the others down:
//!
//! - a **deadline**: a query that runs past [`ExpensiveReads::timeout`] is
//!   interrupted where it runs (SQLite's progress handler, MongoDB's
//!   `maxTimeMS`) and answered [`StoreError::QueryTooSlow`];
//! - a **per-tenant share**: at most [`ExpensiveReads::per_tenant`] of one
//!   tenant's expensive reads run at once. The next one waits, behind its
//!   own tenant's reads only, for at most the same timeout, then is refused
//!   with [`StoreError::TenantBusy`] (retryable). Waiting rather than an
//!   instant refusal, because agents send parallel tool calls: a third
//!   search of a tenant usually finds a share free within milliseconds.
//!
//! - a **per-tenant time share**: one tenant's expensive reads together
//!   may take at most [`ExpensiveReads::ms_per_second`] of read time a
//!   second (beyond a burst of one second's worth). A read past it waits
//!   until the tenant's time is back ([`Share::paced_until`]), or is
//!   refused with the same `TenantBusy` when that is past its wait. The
//!   number of reads at once does not bound what they cost: on a two-core
//!   machine, one tenant's 40 searches a second of 23 ms each, two at a
//!   time, kept a core busy and put another tenant's reads behind it.
//!
//! Point reads (an issue by id, an unfiltered page) are none of this: their
//! cost is bounded by their shape, and stores keep them off the readers
//! expensive reads wait for.
//!
//! The share is a semaphore per tenant, kept only while the tenant has
//! reads running or waiting. [`ExpensiveReads::admit_by`] waits for a
//! share and then for the tenant's time share, both within the read's
//! wait, on tokio's timer (no IO). The time share is a generic cell
//! rate (GCRA) per tenant: each read, when its share is given back, moves
//! the tenant's "busy until" on by the time it held the share divided by
//! the share's rate; a tenant whose "busy until" is more than the burst
//! ahead waits for the difference.

use crate::error::StoreError;
use crate::ids::TenantId;
use crate::issue::{LabelFilter, ListQuery};
use crate::relations::ClaimFilter;
use crate::search::SearchQuery;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// What a read costs a store: the one place that says which reads are
/// expensive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadCost {
    /// Bounded by its shape: a primary-key lookup, or a page read along the
    /// `(tenant, id)` key that stops after `limit + 1` rows.
    Point,
    /// May read far more than it returns: ranked full-text search, and a
    /// list page with any filter (a filter that matches few issues makes
    /// the page read the tenant's whole board to fill it). Runs under the
    /// deadline and the tenant's share.
    Expensive,
}

impl ListQuery {
    /// A page with no filter is a point read at any depth (its cursor is a
    /// key, not an offset); any filter makes it expensive.
    pub fn cost(&self) -> ReadCost {
        let unfiltered = self.states.is_empty()
            && self.labels == LabelFilter::None
            && self.text.is_none()
            && self.author_run.is_none()
            && self.priorities.is_empty()
            && self.updated_since.is_none()
            && self.parent.is_none()
            && self.claim == ClaimFilter::Any
            && !self.ready;
        if unfiltered {
            ReadCost::Point
        } else {
            ReadCost::Expensive
        }
    }
}

impl SearchQuery {
    /// Always expensive: every match is ranked, however short the page.
    pub fn cost(&self) -> ReadCost {
        ReadCost::Expensive
    }
}

/// The bounds on expensive reads a store applies, and the tenants' shares
/// (cheap to clone: clones share the shares).
#[derive(Clone)]
pub struct ExpensiveReads {
    timeout: Duration,
    per_tenant: usize,
    ms_per_second: u64,
    tenants: Arc<Mutex<HashMap<TenantId, Tenant>>>,
    /// Each tenant's "busy until" (the time share's state); entries in
    /// the past are dropped as others are written, so it holds only
    /// tenants that used their time of late.
    busy: Arc<Mutex<HashMap<TenantId, Instant>>>,
}

/// One tenant's share: its semaphore, and how many reads hold or wait for
/// it (the entry goes when that drops to zero).
struct Tenant {
    share: Arc<Semaphore>,
    users: usize,
}

impl fmt::Debug for ExpensiveReads {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExpensiveReads")
            .field("timeout", &self.timeout)
            .field("per_tenant", &self.per_tenant)
            .field("ms_per_second", &self.ms_per_second)
            .finish_non_exhaustive()
    }
}

impl Default for ExpensiveReads {
    fn default() -> Self {
        Self::new(Self::DEFAULT_TIMEOUT, Self::DEFAULT_PER_TENANT)
    }
}

impl ExpensiveReads {
    /// Long enough for a search of a large board (about 120 ms for a
    /// common word over 100,000 issues on SQLite, docs/numbers.md), short
    /// enough that a tool call waiting for a share and then running still
    /// answers within the default 5 s store timeout.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);
    /// Half of the SQLite store's default four search readers: one tenant
    /// never holds them all.
    pub const DEFAULT_PER_TENANT: usize = 2;
    /// A quarter of one core's time a second for one tenant's searches and
    /// filtered lists together: about ten searches a second of a common
    /// word on a 10,000-issue board (23 ms each), over a hundred of the
    /// usual few milliseconds; a burst of a second's worth passes at once.
    pub const DEFAULT_MS_PER_SECOND: u64 = 250;
    /// Bounds of the entries kept in the time share's map before the ones
    /// in the past are swept.
    const BUSY_SWEEP_AT: usize = 256;

    /// `per_tenant` is at least 1 (0 would refuse every search); the time
    /// share is [`Self::DEFAULT_MS_PER_SECOND`] ([`Self::with_time_share`]).
    pub fn new(timeout: Duration, per_tenant: usize) -> Self {
        Self {
            timeout,
            per_tenant: per_tenant.max(1),
            ms_per_second: Self::DEFAULT_MS_PER_SECOND,
            tenants: Arc::default(),
            busy: Arc::default(),
        }
    }

    /// The same bounds with a time share of `ms_per_second` of read time a
    /// second per tenant (at least 1; 1,000 or more is a core or more).
    pub fn with_time_share(mut self, ms_per_second: u64) -> Self {
        self.ms_per_second = ms_per_second.max(1);
        self
    }

    /// Read time one tenant's expensive reads may take a second, together.
    pub fn ms_per_second(&self) -> u64 {
        self.ms_per_second
    }

    /// How long one expensive read may run before it is interrupted, and
    /// how long one waits for its tenant's share (and a reader).
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Most expensive reads of one tenant running at once.
    pub fn per_tenant(&self) -> usize {
        self.per_tenant
    }

    /// One of `tenant`'s shares, waiting (first come, first served) behind
    /// that tenant's own expensive reads only. Unbounded: the caller bounds
    /// the wait with its timer and answers [`Self::tenant_busy`] past it;
    /// a wait given up leaves no trace.
    pub async fn admit(&self, tenant: &TenantId) -> Result<Share, StoreError> {
        let share = {
            let mut tenants = self.lock();
            let entry = tenants.entry(tenant.clone()).or_insert_with(|| Tenant {
                share: Arc::new(Semaphore::new(self.per_tenant)),
                users: 0,
            });
            entry.users += 1;
            Arc::clone(&entry.share)
        };
        // Leaves the entry when dropped: after the read, or when the wait
        // is given up.
        let user = User {
            reads: self.clone(),
            tenant: tenant.clone(),
        };
        let permit = share
            .acquire_owned()
            .await
            .map_err(|_| StoreError::Internal("a tenant's read share was closed".to_owned()))?;
        let now = Instant::now();
        let paced_until = self
            .lock_busy()
            .get(tenant)
            .and_then(|until| until.checked_sub(self.burst()))
            .filter(|start| *start > now);
        Ok(Share {
            paced_until,
            admitted: now,
            _permit: permit,
            _user: user,
        })
    }

    /// One of `tenant`'s shares, once its time share lets the read start:
    /// both waits end by `wait_until` (past it: [`Self::tenant_busy`]), and
    /// a read whose time share is not back by then is refused at once
    /// rather than kept waiting for nothing.
    pub async fn admit_by(
        &self,
        tenant: &TenantId,
        wait_until: tokio::time::Instant,
    ) -> Result<Share, StoreError> {
        let share = tokio::time::timeout_at(wait_until, self.admit(tenant))
            .await
            .map_err(|_| self.tenant_busy())??;
        if let Some(at) = share.paced_until() {
            let at = tokio::time::Instant::from_std(at);
            if at > wait_until {
                return Err(self.tenant_busy());
            }
            tokio::time::sleep_until(at).await;
        }
        Ok(share)
    }

    /// The answer to a read that found no share within [`Self::timeout`]
    /// (or whose tenant's time share is not back by then).
    pub fn tenant_busy(&self) -> StoreError {
        StoreError::TenantBusy {
            max: self.per_tenant,
            ms_per_second: self.ms_per_second,
        }
    }

    /// What a tenant may run ahead of its share: one second's worth.
    fn burst(&self) -> Duration {
        Duration::from_secs(1)
    }

    /// Charges `tenant` for `held`, the time one read held its share (on
    /// SQLite its wait for a free search reader included: with four readers
    /// and two per tenant, a short one).
    fn charge(&self, tenant: &TenantId, held: Duration) {
        let now = Instant::now();
        // `held` at the share's rate: 1 s of reads at 250 ms a second
        // puts the tenant 4 s on.
        let cost = held.mul_f64(1000.0 / self.ms_per_second as f64);
        let mut busy = self.lock_busy();
        if busy.len() >= Self::BUSY_SWEEP_AT {
            busy.retain(|_, until| *until > now);
        }
        let until = busy.entry(tenant.clone()).or_insert(now);
        *until = (*until).max(now) + cost;
    }

    fn lock_busy(&self) -> std::sync::MutexGuard<'_, HashMap<TenantId, Instant>> {
        self.busy.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The answer to a read interrupted at its deadline.
    pub fn too_slow(&self) -> StoreError {
        StoreError::QueryTooSlow {
            limit_ms: u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX),
        }
    }

    /// Tenants with expensive reads running or waiting (tests).
    #[doc(hidden)]
    pub fn tenants_in_flight(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<TenantId, Tenant>> {
        self.tenants.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A read holding or waiting for its tenant's share.
struct User {
    reads: ExpensiveReads,
    tenant: TenantId,
}

impl Drop for User {
    fn drop(&mut self) {
        let mut tenants = self.reads.lock();
        if let Some(entry) = tenants.get_mut(&self.tenant) {
            entry.users = entry.users.saturating_sub(1);
            if entry.users == 0 {
                tenants.remove(&self.tenant);
            }
        }
    }
}

/// One running expensive read's part of its tenant's share; given back
/// when dropped, charging the tenant's time share for the time it was held
/// (from [`Self::paced_until`] on when the read was paced).
pub struct Share {
    paced_until: Option<Instant>,
    admitted: Instant,
    // Fields drop in order: the permit goes back before the entry is left.
    _permit: OwnedSemaphorePermit,
    _user: User,
}

impl Share {
    /// When the tenant's time share lets this read start, if later than
    /// now: the store waits until then with its own timer, or answers
    /// [`ExpensiveReads::tenant_busy`] when that is past the read's wait.
    pub fn paced_until(&self) -> Option<Instant> {
        self.paced_until
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        let started = self
            .paced_until
            .map_or(self.admitted, |at| at.max(self.admitted));
        let held = Instant::now().saturating_duration_since(started);
        self._user.reads.charge(&self._user.tenant, held);
    }
}

impl fmt::Debug for Share {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Share")
            .field("tenant", &self._user.tenant)
            .field("paced_until", &self.paced_until)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{IssueState, Label, RunId};

    fn tenant(name: &str) -> TenantId {
        TenantId::parse(name).unwrap()
    }

    #[test]
    fn only_unfiltered_pages_are_point_reads() {
        let plain = ListQuery::default();
        assert_eq!(plain.cost(), ReadCost::Point);
        let deep = ListQuery {
            cursor: Some(crate::IssueId::generate()),
            ..ListQuery::default()
        };
        assert_eq!(
            deep.cost(),
            ReadCost::Point,
            "a cursor is a key, not an offset"
        );
        let filtered = [
            ListQuery {
                states: vec![IssueState::Todo],
                ..ListQuery::default()
            },
            ListQuery {
                labels: LabelFilter::Any(vec![Label::parse("bug").unwrap()]),
                ..ListQuery::default()
            },
            ListQuery {
                text: Some("login".into()),
                ..ListQuery::default()
            },
            ListQuery {
                author_run: Some(RunId::parse("r").unwrap()),
                ..ListQuery::default()
            },
            ListQuery {
                claim: ClaimFilter::Unclaimed,
                ..ListQuery::default()
            },
        ];
        for query in filtered {
            assert_eq!(query.cost(), ReadCost::Expensive, "{query:?}");
        }
        let search = SearchQuery::new(crate::SearchText::parse("login").unwrap());
        assert_eq!(search.cost(), ReadCost::Expensive);
    }

    #[actix_rt::test]
    async fn a_tenant_over_its_share_waits_behind_its_own_reads_only() {
        let reads = ExpensiveReads::new(Duration::from_secs(1), 2);
        let (a, b) = (tenant("noisy"), tenant("quiet"));
        let first = reads.admit(&a).await.unwrap();
        let _second = reads.admit(&a).await.unwrap();
        let third = tokio::time::timeout(Duration::from_millis(50), reads.admit(&a)).await;
        assert!(third.is_err(), "a third read of the tenant waits");
        // Another tenant is not behind it.
        let other = tokio::time::timeout(Duration::from_secs(5), reads.admit(&b)).await;
        assert!(
            matches!(other, Ok(Ok(_))),
            "another tenant has its own share"
        );
        drop(other);
        // A share given back admits the tenant's next read.
        let waiter = {
            let reads = reads.clone();
            let a = a.clone();
            tokio::spawn(async move { reads.admit(&a).await.map(|_| ()) })
        };
        tokio::task::yield_now().await;
        drop(first);
        let admitted = tokio::time::timeout(Duration::from_secs(5), waiter).await;
        assert!(matches!(admitted, Ok(Ok(Ok(())))), "{admitted:?}");
    }

    #[actix_rt::test]
    async fn a_tenant_past_its_time_share_waits_for_its_time_and_others_do_not() {
        // 10 ms a second: holding a share for 30 ms puts the tenant 3 s
        // on, 2 s past its one-second burst.
        let reads = ExpensiveReads::new(Duration::from_secs(1), 2).with_time_share(10);
        let (a, b) = (tenant("noisy"), tenant("quiet"));
        let first = reads.admit(&a).await.unwrap();
        assert_eq!(first.paced_until(), None, "a burst's worth passes at once");
        std::thread::sleep(Duration::from_millis(30));
        drop(first);
        let next = reads.admit(&a).await.unwrap();
        let wait = next
            .paced_until()
            .map(|at| at.saturating_duration_since(Instant::now()))
            .expect("paced");
        assert!(wait > Duration::from_millis(1_800), "{wait:?}");
        drop(next);
        assert_eq!(
            reads.admit(&b).await.unwrap().paced_until(),
            None,
            "another tenant's time is its own"
        );
        // Not back within the read's wait: refused at once, not kept waiting.
        let started = Instant::now();
        let refused = reads
            .admit_by(&a, tokio::time::Instant::now() + Duration::from_millis(500))
            .await;
        assert!(
            matches!(
                refused,
                Err(StoreError::TenantBusy {
                    max: 2,
                    ms_per_second: 10
                })
            ),
            "{refused:?}"
        );
        assert!(started.elapsed() < Duration::from_millis(400));
        assert!(
            reads
                .tenant_busy()
                .to_string()
                .contains("10 ms of search time a second")
        );
    }

    #[actix_rt::test]
    async fn a_tenant_within_its_time_share_is_not_paced() {
        let reads = ExpensiveReads::new(Duration::from_secs(1), 2).with_time_share(1_000);
        let a = tenant("steady");
        for _ in 0..5 {
            let share = reads
                .admit_by(&a, tokio::time::Instant::now() + Duration::from_secs(1))
                .await
                .unwrap();
            assert_eq!(share.paced_until(), None);
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[actix_rt::test]
    async fn idle_tenants_are_forgotten_even_after_a_wait_given_up() {
        let reads = ExpensiveReads::new(Duration::from_secs(1), 1);
        let a = tenant("acme");
        let held = reads.admit(&a).await.unwrap();
        let gave_up = tokio::time::timeout(Duration::from_millis(20), reads.admit(&a)).await;
        assert!(gave_up.is_err());
        assert_eq!(reads.tenants_in_flight(), 1, "held by the running read");
        drop(held);
        assert_eq!(reads.tenants_in_flight(), 0);
        assert!(matches!(
            reads.tenant_busy(),
            StoreError::TenantBusy {
                max: 1,
                ms_per_second: ExpensiveReads::DEFAULT_MS_PER_SECOND
            }
        ));
        assert!(reads.tenant_busy().is_retryable());
        assert!(matches!(
            reads.too_slow(),
            StoreError::QueryTooSlow { limit_ms: 1000 }
        ));
    }
}
