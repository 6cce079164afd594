//! A table every tenant and run of this process shares, with shares: the
//! relay's calls held for their agents' input, its relayed requests
//! awaiting answers, and its sessions with upstreams ([`Table`]) are each
//! one [`SharedTable`], which refuses an entry when the holder's run, its
//! tenant or the process already holds its share ([`ShareLimits`]), so
//! one tenant's (or one run's) unanswered calls cannot fill the table
//! for everyone else. Entries their table says are spent (a finished
//! task, a receiver gone, an idle session) are dropped before anyone is
//! refused. A leaf: the tables' users (`waiting`, `client`) import it.

use corkboard_mcp::{Refusal, RpcError};
use std::borrow::Borrow;
use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::sync::Mutex;

/// The process's total of one table and how much of it one tenant and
/// one run may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShareLimits {
    pub total: usize,
    pub per_tenant: usize,
    pub per_run: usize,
}

impl ShareLimits {
    /// `total` entries, a tenant at most `tenant_pct` % of them and a run
    /// at most `run_pct` %, each at least one (and at most the total).
    pub fn of(total: usize, tenant_pct: u8, run_pct: u8) -> Self {
        let total = total.max(1);
        let share =
            |pct: u8| (total.saturating_mul(usize::from(pct.min(100))) / 100).clamp(1, total);
        Self {
            total,
            per_tenant: share(tenant_pct),
            per_run: share(run_pct),
        }
    }
}

/// The defaults' fractions: a tenant may hold a quarter of each table, a
/// run about a sixteenth.
pub const DEFAULT_TENANT_SHARE_PCT: u8 = 25;
/// See [`DEFAULT_TENANT_SHARE_PCT`].
pub const DEFAULT_RUN_SHARE_PCT: u8 = 6;

/// Which of the relay's shared tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    /// 2025 upstreams' calls held for 2026-07-28 agents between rounds.
    HeldCalls,
    /// Requests relayed to 2025 agents whose answers a call waits for in
    /// this process.
    PendingRequests,
    /// The gateway's 2025 sessions with upstreams (one per run, upstream
    /// and declared capability set).
    Sessions,
}

impl Table {
    /// How refusals name it.
    pub fn label(self) -> &'static str {
        match self {
            Self::HeldCalls => "held calls",
            Self::PendingRequests => "pending relayed requests",
            Self::Sessions => "upstream sessions",
        }
    }

    /// The setting of its process total.
    pub fn total_setting(self) -> &'static str {
        match self {
            Self::HeldCalls => "upstream_held_calls_max",
            Self::PendingRequests => "upstream_pending_requests_max",
            Self::Sessions => "upstream_sessions_max",
        }
    }
}

/// Whose share is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Share {
    Run,
    Tenant,
    Process,
}

impl Share {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Run => "run",
            Self::Tenant => "tenant",
            Self::Process => "process",
        }
    }
}

/// Who holds an entry: a tenant, and the run when there is one (a tool
/// list is fetched for the tenant's runs alike).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Holder {
    pub tenant: String,
    pub run: Option<String>,
}

impl Holder {
    pub fn run(tenant: &str, run: &str) -> Self {
        Self {
            tenant: tenant.to_owned(),
            run: Some(run.to_owned()),
        }
    }

    pub fn tenant(tenant: &str) -> Self {
        Self {
            tenant: tenant.to_owned(),
            run: None,
        }
    }
}

/// An entry refused: `holder`'s `share` of `table` already holds `limit`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareExhausted {
    pub table: Table,
    pub share: Share,
    pub holder: Holder,
    pub limit: usize,
}

impl ShareExhausted {
    /// The one refusal of a full share (`-32056`, see
    /// [`Refusal::share_exhausted`]).
    pub fn refusal(&self) -> Refusal {
        let whose = match (self.share, &self.holder.run) {
            (Share::Run, Some(run)) => format!("run {run} of tenant {}", self.holder.tenant),
            (Share::Process, _) => "this gateway replica".to_owned(),
            _ => format!("tenant {}", self.holder.tenant),
        };
        let setting = match self.share {
            Share::Run => format!("upstream_run_share_pct of {}", self.table.total_setting()),
            Share::Tenant => format!(
                "upstream_tenant_share_pct of {}",
                self.table.total_setting()
            ),
            Share::Process => self.table.total_setting().to_owned(),
        };
        Refusal::share_exhausted(
            self.table.label(),
            self.share.as_str(),
            whose,
            self.limit,
            &setting,
        )
    }

    /// The JSON-RPC error the agent gets.
    pub fn rpc_error(&self) -> RpcError {
        self.refusal().error
    }
}

impl fmt::Display for ShareExhausted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.refusal().error.message)
    }
}

/// The entries and how many each tenant and run holds.
struct Entries<K, V> {
    map: HashMap<K, (Holder, V)>,
    tenants: HashMap<String, usize>,
    runs: HashMap<(String, String), usize>,
}

impl<K: Hash + Eq, V> Entries<K, V> {
    fn count(&mut self, holder: &Holder, up: bool) {
        fn step<Q: Hash + Eq>(counts: &mut HashMap<Q, usize>, key: Q, up: bool) {
            if up {
                *counts.entry(key).or_default() += 1;
            } else if let Some(n) = counts.get_mut(&key) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    counts.remove(&key);
                }
            }
        }
        step(&mut self.tenants, holder.tenant.clone(), up);
        if let Some(run) = &holder.run {
            step(&mut self.runs, (holder.tenant.clone(), run.clone()), up);
        }
    }

    fn remove<Q: Hash + Eq + ?Sized>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
    {
        let (holder, value) = self.map.remove(key)?;
        self.count(&holder, false);
        Some(value)
    }

    /// Drops the entries `drop` selects (asked once each) and their counts.
    fn drop_matching(&mut self, drop: impl Fn(&K, &V) -> bool) {
        let mut gone = Vec::new();
        self.map.retain(|key, (holder, value)| {
            let keep = !drop(key, value);
            if !keep {
                gone.push(holder.clone());
            }
            keep
        });
        for holder in &gone {
            self.count(holder, false);
        }
    }

    /// The first full share of `holder` (the narrowest first), if any.
    fn full(&self, holder: &Holder, limits: &ShareLimits) -> Option<(Share, usize)> {
        if let Some(run) = &holder.run {
            let held = self
                .runs
                .get(&(holder.tenant.clone(), run.clone()))
                .copied()
                .unwrap_or(0);
            if held >= limits.per_run {
                return Some((Share::Run, limits.per_run));
            }
        }
        if self.tenants.get(&holder.tenant).copied().unwrap_or(0) >= limits.per_tenant {
            return Some((Share::Tenant, limits.per_tenant));
        }
        (self.map.len() >= limits.total).then_some((Share::Process, limits.total))
    }
}

/// See the module docs. Every method is one short critical section
/// (no IO, no await under the lock).
pub struct SharedTable<K, V> {
    table: Table,
    limits: ShareLimits,
    entries: Mutex<Entries<K, V>>,
}

impl<K, V> fmt::Debug for SharedTable<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedTable")
            .field("table", &self.table)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl<K: Hash + Eq, V> SharedTable<K, V> {
    pub fn new(table: Table, limits: ShareLimits) -> Self {
        Self {
            table,
            limits,
            entries: Mutex::new(Entries {
                map: HashMap::new(),
                tenants: HashMap::new(),
                runs: HashMap::new(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries<K, V>> {
        // Every critical section leaves the counts whole before anything
        // that could panic, so a poisoned lock still holds a usable table.
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Whether `holder` may add an entry now, dropping spent entries
    /// first if one of its shares is full.
    pub fn room(&self, holder: &Holder, spent: impl Fn(&V) -> bool) -> Result<(), ShareExhausted> {
        let mut entries = self.lock();
        self.make_room(&mut entries, holder, &spent)
    }

    fn make_room(
        &self,
        entries: &mut Entries<K, V>,
        holder: &Holder,
        spent: &dyn Fn(&V) -> bool,
    ) -> Result<(), ShareExhausted> {
        if entries.full(holder, &self.limits).is_none() {
            return Ok(());
        }
        entries.drop_matching(|_, value| spent(value));
        match entries.full(holder, &self.limits) {
            None => Ok(()),
            Some((share, limit)) => Err(ShareExhausted {
                table: self.table,
                share,
                holder: holder.clone(),
                limit,
            }),
        }
    }

    /// Puts `value` under `key` for `holder` when its shares have room
    /// (see [`Self::room`]); refused, `value` is dropped. An entry already
    /// under `key` is replaced.
    pub fn insert(
        &self,
        holder: &Holder,
        key: K,
        value: V,
        spent: impl Fn(&V) -> bool,
    ) -> Result<(), ShareExhausted> {
        let mut entries = self.lock();
        entries.remove(&key);
        self.make_room(&mut entries, holder, &spent)?;
        entries.count(holder, true);
        entries.map.insert(key, (holder.clone(), value));
        Ok(())
    }

    /// The entry under `key`, taken out.
    pub fn take<Q: Hash + Eq + ?Sized>(&self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
    {
        self.lock().remove(key)
    }

    /// Runs `f` on the entry under `key`, if there is one.
    pub fn with<Q: Hash + Eq + ?Sized, R>(&self, key: &Q, f: impl FnOnce(&mut V) -> R) -> Option<R>
    where
        K: Borrow<Q>,
    {
        self.lock().map.get_mut(key).map(|(_, value)| f(value))
    }

    /// Drops every entry whose key `drop` selects.
    pub fn drop_where(&self, drop: impl Fn(&K) -> bool) {
        self.lock().drop_matching(|key, _| drop(key));
    }

    /// How many entries there are in all.
    pub fn len(&self) -> usize {
        self.lock().map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(total: usize, per_tenant: usize, per_run: usize) -> SharedTable<u32, bool> {
        SharedTable::new(
            Table::HeldCalls,
            ShareLimits {
                total,
                per_tenant,
                per_run,
            },
        )
    }

    fn never(_: &bool) -> bool {
        false
    }

    #[test]
    fn a_run_a_tenant_and_the_process_each_stop_at_their_share() {
        let t = table(5, 3, 2);
        let (a1, a2, b1) = (
            Holder::run("a", "1"),
            Holder::run("a", "2"),
            Holder::run("b", "1"),
        );
        t.insert(&a1, 1, false, never).unwrap();
        t.insert(&a1, 2, false, never).unwrap();
        let run = t.insert(&a1, 3, false, never).unwrap_err();
        assert_eq!((run.share, run.limit), (Share::Run, 2));
        t.insert(&a2, 3, false, never).unwrap();
        let tenant = t.insert(&a2, 4, false, never).unwrap_err();
        assert_eq!((tenant.share, tenant.limit), (Share::Tenant, 3));
        // Another tenant's entries still go in, up to the process total.
        t.insert(&b1, 4, false, never).unwrap();
        t.insert(&Holder::tenant("b"), 5, false, never).unwrap();
        let process = t
            .insert(&Holder::run("c", "1"), 6, false, never)
            .unwrap_err();
        assert_eq!((process.share, process.limit), (Share::Process, 5));
        // Same-named runs of different tenants are different runs.
        assert_eq!(t.len(), 5);
        // Taking an entry gives its holder's room back.
        assert_eq!(t.take(&1), Some(false));
        t.insert(&a1, 7, false, never).unwrap();
        assert!(t.room(&a1, never).is_err());
    }

    #[test]
    fn spent_entries_go_before_anyone_is_refused_and_replacing_is_no_growth() {
        let t = table(2, 2, 2);
        let a = Holder::run("a", "1");
        t.insert(&a, 1, true, never).unwrap();
        t.insert(&a, 2, false, never).unwrap();
        // Replacing key 2 needs no room.
        t.insert(&a, 2, false, never).unwrap();
        assert!(t.insert(&a, 3, false, never).is_err());
        // Spent (true) entries are dropped to make room.
        t.insert(&a, 3, false, |spent| *spent).unwrap();
        assert_eq!(t.take(&1), None);
        assert_eq!(t.len(), 2);
        t.drop_where(|key| *key == 2);
        assert_eq!(t.len(), 1);
        t.insert(&a, 4, false, never).unwrap();
    }

    #[test]
    fn a_refusal_names_the_table_the_share_and_the_setting() {
        let t = table(8, 2, 1);
        let a = Holder::run("acme", "build-7");
        t.insert(&a, 1, false, never).unwrap();
        let error = t.insert(&a, 2, false, never).unwrap_err().rpc_error();
        assert!(error.code == corkboard_mcp::code::SHARE_EXHAUSTED);
        assert_eq!(
            error.message,
            "Too Many Requests: run build-7 of tenant acme already holds 1 held calls, its share (run share; upstream_run_share_pct of upstream_held_calls_max); retry once some of its calls end (retryable)"
        );
    }

    #[test]
    fn default_shares_are_a_quarter_and_a_sixteenth() {
        let limits = ShareLimits::of(1024, DEFAULT_TENANT_SHARE_PCT, DEFAULT_RUN_SHARE_PCT);
        assert_eq!((limits.per_tenant, limits.per_run), (256, 61));
        assert_eq!(
            ShareLimits::of(3, 25, 6),
            ShareLimits {
                total: 3,
                per_tenant: 1,
                per_run: 1
            }
        );
        assert_eq!(ShareLimits::of(10, 100, 100).per_run, 10);
    }
}
