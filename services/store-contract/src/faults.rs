//! The one fault-injecting store of the tests: it forwards every call to a
//! real store (or to none) and, per method or for all of them, fails it,
//! holds it, gates it or loses its answer, and counts the calls. Its
//! forwarding is generated from the store traits' one method list
//! (`corkboard_board::decorate_store!`), so it covers every method of
//! every trait without a hand-written double per test.
//!
//! ```text
//! let store = FaultStore::new(sqlite);            // forwards everything
//! store.inject("create_issue", Fault::gate(&gate)); // creates wait for permits
//! let down = FaultStore::failing(StoreError::unavailable("down"));
//! ```

use corkboard_board::{BoardStore, GrantLedger, StoreDecorator, StoreError};
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Semaphore;

/// What happens to a call the fault applies to.
#[derive(Debug, Clone)]
pub enum Fault {
    /// Answers this error without calling the store.
    Fail(StoreError),
    /// Never answers (the caller's own timeout must end the call).
    Hang,
    /// Waits for one permit of the semaphore (kept, not given back), then
    /// calls the store; a closed semaphore answers "unavailable".
    Gate(Arc<Semaphore>),
    /// Calls the store, then answers that the outcome is unknown, as a cut
    /// connection or a timeout after the write would: the next `times`
    /// calls, after which calls go through.
    LoseAnswer { times: u64 },
}

impl Fault {
    /// A gate on `semaphore`: each call takes one permit before it runs.
    pub fn gate(semaphore: &Arc<Semaphore>) -> Self {
        Self::Gate(semaphore.clone())
    }
}

/// Which calls a fault applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Target {
    /// One method, by name (`"create_issue"`).
    Method(&'static str),
    /// Every method without a fault of its own.
    Every,
}

#[derive(Debug, Default)]
struct Plan {
    faults: BTreeMap<Target, Fault>,
    calls: BTreeMap<&'static str, u64>,
}

/// A store that forwards to `inner` (when it has one) with faults injected.
/// A call no fault applies to and with no store to forward to answers
/// [`StoreError::Internal`], so a test that forgot a fault fails loudly.
pub struct FaultStore<S: ?Sized + Send + Sync + 'static = dyn BoardStore> {
    inner: Option<Arc<S>>,
    plan: Mutex<Plan>,
}

impl<S: ?Sized + Send + Sync + 'static> std::fmt::Debug for FaultStore<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultStore")
            .field("forwards", &self.inner.is_some())
            .field("plan", &*self.lock())
            .finish()
    }
}

impl FaultStore {
    /// Forwards every call to `inner` until a fault is injected.
    pub fn new(inner: Arc<dyn BoardStore>) -> Self {
        Self::forwarding(Some(inner))
    }

    /// A store with nothing behind it: every call needs a fault.
    pub fn without_store() -> Self {
        Self::forwarding(None)
    }

    /// A store whose every call answers `error`.
    pub fn failing(error: StoreError) -> Self {
        let store = Self::without_store();
        store.inject_all(Fault::Fail(error));
        store
    }

    /// A store whose calls never answer.
    pub fn hanging() -> Self {
        let store = Self::without_store();
        store.inject_all(Fault::Hang);
        store
    }
}

impl FaultStore<dyn GrantLedger> {
    /// Forwards every call to the grant ledger `inner` until a fault is
    /// injected.
    pub fn ledger(inner: Arc<dyn GrantLedger>) -> Self {
        Self::forwarding(Some(inner))
    }
}

impl<S: ?Sized + Send + Sync + 'static> FaultStore<S> {
    fn forwarding(inner: Option<Arc<S>>) -> Self {
        Self {
            inner,
            plan: Mutex::default(),
        }
    }

    /// Applies `fault` to every call of `method` (replacing its fault).
    pub fn inject(&self, method: &'static str, fault: Fault) {
        self.lock().faults.insert(Target::Method(method), fault);
    }

    /// Applies `fault` to every method that has no fault of its own.
    pub fn inject_all(&self, fault: Fault) {
        self.lock().faults.insert(Target::Every, fault);
    }

    /// Removes every fault: calls go through again.
    pub fn heal(&self) {
        self.lock().faults.clear();
    }

    /// How many calls of `method` were made so far, faulted or not.
    pub fn calls(&self, method: &str) -> u64 {
        self.lock().calls.get(method).copied().unwrap_or(0)
    }

    fn lock(&self) -> MutexGuard<'_, Plan> {
        // A panic while holding the lock cannot leave the plan half-written.
        self.plan.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts the call and decides its fault; a `LoseAnswer` is used up.
    fn fault_for(&self, method: &'static str) -> Option<Fault> {
        let mut plan = self.lock();
        *plan.calls.entry(method).or_default() += 1;
        let target = [Target::Method(method), Target::Every]
            .into_iter()
            .find(|target| plan.faults.contains_key(target))?;
        let fault = plan.faults.get_mut(&target)?;
        if let Fault::LoseAnswer { times } = fault {
            if *times == 0 {
                return None;
            }
            *times -= 1;
            return Some(Fault::LoseAnswer { times: 1 });
        }
        Some(fault.clone())
    }
}

impl<S: ?Sized + Send + Sync + 'static> StoreDecorator for FaultStore<S> {
    type Inner = S;

    fn inner(&self) -> Result<&S, StoreError> {
        self.inner.as_deref().ok_or_else(|| {
            StoreError::Internal(
                "fault store: no fault for this call and no store behind it".into(),
            )
        })
    }

    fn around<'a, T: Send + 'a>(
        &'a self,
        op: &'static str,
        call: impl Future<Output = Result<T, StoreError>> + Send + 'a,
    ) -> impl Future<Output = Result<T, StoreError>> + Send + 'a {
        let fault = self.fault_for(op);
        async move {
            match fault {
                None => call.await,
                Some(Fault::Fail(error)) => Err(error),
                Some(Fault::Hang) => std::future::pending().await,
                Some(Fault::Gate(gate)) => {
                    let permit = gate
                        .acquire()
                        .await
                        .map_err(|_| StoreError::unavailable("gate closed"))?;
                    permit.forget();
                    call.await
                }
                Some(Fault::LoseAnswer { .. }) => {
                    call.await?;
                    Err(StoreError::outcome_unknown(format!(
                        "fault store: the answer of {op} was lost"
                    )))
                }
            }
        }
    }
}

corkboard_board::decorate_store!(
    FaultStore<dyn BoardStore>: IssueStore,
    GrantLedger,
    AuditLog,
    WebhookStore,
    UpstreamStore,
    StoreHealth
);
corkboard_board::decorate_store!(FaultStore<dyn GrantLedger>: GrantLedger);
