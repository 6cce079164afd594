//! The store handle: connecting, the collections of a tenant, their
//! indexes, and the time bound around every call.

use crate::error::{
    MongoStoreError, expensive_read_error, is_duplicate_key, store_error, timed_out,
};
use crate::options::MongoOptions;
use crate::schema::{self, IndexSet};
use corkboard_board::{ExpensiveReads, StoreError, StoreHealth, TenantId};
use futures_util::StreamExt;
use mongodb::bson::{Document, doc};
use mongodb::options::{Acknowledgment, ClientOptions, ReadConcern, Tls, TlsOptions, WriteConcern};
use mongodb::{Client, Collection, Database};
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;
use tokio::sync::OnceCell;

/// How long [`MongoStore::connect_lazy`]'s background start-up waits
/// between attempts while the server does not answer.
const START_UP_RETRY: Duration = Duration::from_secs(2);

/// Index sets a start-up sets up at once (the first start after an upgrade
/// sets up every tenant's).
const SET_UPS_AT_ONCE: usize = 8;

/// A board store on one MongoDB database. Cheap to clone: clones share
/// the driver's connection pool and the index caches.
#[derive(Clone)]
pub struct MongoStore {
    inner: Arc<Inner>,
}

struct Inner {
    db: Database,
    options: MongoOptions,
    /// Index sets (a tenant's collections, a shared collection) known to
    /// be set up at the current schema, in this process. A cell per set,
    /// so concurrent first writes set it up once and a failed attempt
    /// (server down) is retried by the next write.
    sets: Mutex<HashMap<IndexSet, Arc<OnceCell<()>>>>,
    /// `claim_next` takes a lane of its tenant's, so this process's
    /// claimants of a tenant do not collide.
    claim_turns: ClaimTurns,
    /// Per tenant, the earliest end of a stored claim, as last read.
    lapse_horizons: Mutex<LapseHorizons>,
    /// Comments on one issue take turns in this process ([`IssueTurns`]).
    issue_turns: IssueTurns,
    /// The key of the last tenant the sweeper's round visited for what
    /// writers left behind (`sweep.rs`); `None`: start from the first.
    sweep_round_after: Mutex<Option<String>>,
}

/// Turn-taking state per key (a tenant, an issue), kept only while some
/// call holds it: two keys never share state, so one tenant's burst
/// never waits on another's, and the map holds only keys in use.
struct Turns<K: Eq + std::hash::Hash + Clone, V> {
    held: Arc<Mutex<HashMap<K, Arc<V>>>>,
}

/// A key's state, held by one call; dropped by the last holder, it leaves
/// the map.
struct Held<K: Eq + std::hash::Hash + Clone, V> {
    held: Arc<Mutex<HashMap<K, Arc<V>>>>,
    key: K,
    state: Arc<V>,
}

impl<K: Eq + std::hash::Hash + Clone, V> Turns<K, V> {
    fn new() -> Self {
        Self {
            held: Arc::default(),
        }
    }

    /// `key`'s state, made by `make` when nobody holds it.
    fn hold(&self, key: &K, make: impl FnOnce() -> V) -> Held<K, V> {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let state = Arc::clone(held.entry(key.clone()).or_insert_with(|| Arc::new(make())));
        Held {
            held: Arc::clone(&self.held),
            key: key.clone(),
            state,
        }
    }
}

impl<K: Eq + std::hash::Hash + Clone, V> Drop for Held<K, V> {
    fn drop(&mut self) {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        // The map's and this one: nobody else holds it.
        if Arc::strong_count(&self.state) == 2 {
            held.remove(&self.key);
        }
    }
}

/// How many `claim_next` calls of one tenant run at once in one process,
/// each on a lane of its own.
pub(crate) const CLAIM_LANES: usize = 8;

/// How many issues a tenant's lanes remember as just taken ([`Lane::took`]).
/// A lane's candidates are its read's best few dozen; the others take a
/// handful while it reads, so this covers every one its read can still
/// name.
const RECENTLY_TAKEN: usize = 128;

/// Lanes for `claim_next`, per tenant in this process. Racing claimants of
/// one tenant that all updated the best ready issue at once were write
/// conflicts on a WiredTiger server, each retried by the server with a
/// backoff; with 64 claimants those cost more than the claims (calls ran
/// past their 10 s bound). Here at most [`CLAIM_LANES`] of a tenant claim
/// at once, each trying the best ready issue no other lane is trying
/// ([`Lane::aim`]), so they do not collide; a single claimant takes the
/// best. Claimants on other replicas still race, and the conditional
/// update decides.
pub(crate) struct ClaimTurns(Turns<TenantId, TenantLanes>);

struct TenantLanes {
    permits: Arc<tokio::sync::Semaphore>,
    /// Which lanes are taken, a bit each.
    lanes: Mutex<u8>,
    /// The issue each lane is trying to claim, so that the others try
    /// other ones.
    targets: Mutex<[Option<String>; CLAIM_LANES]>,
    /// Issues the lanes just took or found taken, newest last: a candidate
    /// list read a moment before still names them, and trying one would
    /// only lose the race again.
    taken: Mutex<VecDeque<String>>,
}

/// One call's lane: given back when dropped.
pub(crate) struct Lane {
    index: usize,
    _permit: tokio::sync::OwnedSemaphorePermit,
    tenant: Held<TenantId, TenantLanes>,
}

impl Lane {
    fn lanes(&self) -> &TenantLanes {
        &self.tenant.state
    }

    /// Whether this is the only lane of its tenant in use in this process.
    pub(crate) fn alone(&self) -> bool {
        self.lanes()
            .lanes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .count_ones()
            <= 1
    }

    /// `candidates` in the order `order` gives (indexes into it), except
    /// that those another lane of this tenant is trying, or that a lane
    /// just took or found taken, go last (a read made a moment before
    /// still names them; trying one first would only lose again).
    pub(crate) fn order<'c>(&self, candidates: &'c [String], order: &[usize]) -> Vec<&'c str> {
        let targets = self
            .lanes()
            .targets
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let recent = self
            .lanes()
            .taken
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let busy = |id: &str| {
            recent.iter().any(|t| t == id)
                || targets
                    .iter()
                    .enumerate()
                    .any(|(i, t)| i != self.index && t.as_deref() == Some(id))
        };
        let (free, busy): (Vec<&str>, Vec<&str>) = order
            .iter()
            .filter_map(|i| candidates.get(*i).map(String::as_str))
            .partition(|id| !busy(id));
        free.into_iter().chain(busy).collect()
    }

    /// Makes `id` this lane's target, so the other lanes try others first.
    pub(crate) fn aim_at(&self, id: &str) {
        self.lanes()
            .targets
            .lock()
            .unwrap_or_else(PoisonError::into_inner)[self.index] = Some(id.to_owned());
    }

    /// Remembers that `id` is taken (this lane claimed it, or lost it to
    /// another claimant), so no lane aims at it again from a stale read.
    pub(crate) fn took(&self, id: &str) {
        let mut recent = self
            .lanes()
            .taken
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if recent.len() == RECENTLY_TAKEN {
            recent.pop_front();
        }
        recent.push_back(id.to_owned());
    }
}

impl Drop for Lane {
    fn drop(&mut self) {
        let lanes = self.lanes();
        lanes.targets.lock().unwrap_or_else(PoisonError::into_inner)[self.index] = None;
        *lanes.lanes.lock().unwrap_or_else(PoisonError::into_inner) &= !(1u8 << self.index);
    }
}

impl ClaimTurns {
    fn new() -> Self {
        Self(Turns::new())
    }

    /// Waits for a lane of `tenant`.
    pub(crate) async fn take(&self, tenant: &TenantId) -> Lane {
        let held = self.0.hold(tenant, || TenantLanes {
            permits: Arc::new(tokio::sync::Semaphore::new(CLAIM_LANES)),
            lanes: Mutex::new(0),
            targets: Mutex::new(std::array::from_fn(|_| None)),
            taken: Mutex::new(VecDeque::with_capacity(RECENTLY_TAKEN)),
        });
        let permit = Arc::clone(&held.state.permits)
            .acquire_owned()
            .await
            .expect("the semaphore is never closed");
        let index = {
            let mut lanes = held
                .state
                .lanes
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            // A permit guarantees a free lane.
            let index = (0..CLAIM_LANES)
                .find(|i| *lanes & (1u8 << i) == 0)
                .unwrap_or(0);
            *lanes |= 1u8 << index;
            index
        };
        Lane {
            index,
            _permit: permit,
            tenant: held,
        }
    }
}

/// Comments on one issue, one after another in this process. Hundreds of
/// comments racing for one issue document were as many write conflicts
/// on a WiredTiger server, each retried with a backoff; past the call's
/// bound they failed as unavailable (the comment-limit race accepted 282
/// of 500). In turns each is one uncontended update; other replicas'
/// writers still race, and the conditional update decides. Per issue, so
/// no other issue (or tenant) waits on a busy one.
pub(crate) struct IssueTurns(Turns<(TenantId, corkboard_board::IssueId), tokio::sync::Mutex<()>>);

/// The turn of one issue, held until dropped (the guard before the entry).
pub(crate) struct IssueTurn {
    _guard: tokio::sync::OwnedMutexGuard<()>,
    _issue: Held<(TenantId, corkboard_board::IssueId), tokio::sync::Mutex<()>>,
}

impl IssueTurns {
    fn new() -> Self {
        Self(Turns::new())
    }

    /// Waits for the turn of `tenant`'s issue `id`.
    pub(crate) async fn take(&self, tenant: &TenantId, id: &corkboard_board::IssueId) -> IssueTurn {
        let held = self.0.hold(
            &(tenant.clone(), id.clone()),
            || tokio::sync::Mutex::new(()),
        );
        let guard = Arc::clone(&held.state).lock_owned().await;
        IssueTurn {
            _guard: guard,
            _issue: held,
        }
    }
}

/// Per tenant: no claim stored on its board ends before this instant, as
/// last read (at most a second ago, see `MongoStore::lapsed_claims`).
pub(crate) type LapseHorizons = HashMap<TenantId, corkboard_board::Timestamp>;

impl fmt::Debug for MongoStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Not the client: its options hold the URI's credentials.
        f.debug_struct("MongoStore")
            .field("database", &self.inner.db.name())
            .field("options", &self.inner.options)
            .finish_non_exhaustive()
    }
}

impl MongoStore {
    /// `claim_next`'s turn for `tenant` in this process ([`ClaimTurns`]).
    pub(crate) async fn claim_turn(&self, tenant: &TenantId) -> Lane {
        self.inner.claim_turns.take(tenant).await
    }

    /// The turn of `tenant`'s issue `id` for a comment ([`IssueTurns`]).
    pub(crate) async fn issue_turn(
        &self,
        tenant: &TenantId,
        id: &corkboard_board::IssueId,
    ) -> IssueTurn {
        self.inner.issue_turns.take(tenant, id).await
    }

    /// The tenant's lapse horizon, as last read.
    pub(crate) fn lapse_horizon(&self, tenant: &TenantId) -> Option<corkboard_board::Timestamp> {
        self.inner
            .lapse_horizons
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(tenant)
            .copied()
    }

    /// Where the sweeper's next round starts (`sweep.rs`).
    pub(crate) fn sweep_round_after(&self) -> Option<String> {
        self.inner
            .sweep_round_after
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn set_sweep_round_after(&self, after: Option<String>) {
        *self
            .inner
            .sweep_round_after
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = after;
    }

    /// Sets (or with `None` forgets) the tenant's lapse horizon; `lower`:
    /// only ever moves an existing one earlier.
    pub(crate) fn set_lapse_horizon(
        &self,
        tenant: &TenantId,
        horizon: Option<corkboard_board::Timestamp>,
        lower: bool,
    ) {
        let mut horizons = self
            .inner
            .lapse_horizons
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match horizon {
            None => {
                horizons.remove(tenant);
            }
            Some(at) if lower => {
                if let Some(existing) = horizons.get_mut(tenant) {
                    *existing = (*existing).min(at);
                }
            }
            Some(at) => {
                horizons.insert(tenant.clone(), at);
            }
        }
    }

    /// Connects to `uri`, checks that the server answers, and sets up the
    /// indexes of the shared collections and of every tenant already in
    /// `database` that are not recorded as set up at the current schema
    /// (see [`schema`]: a restart costs the server two queries, whatever
    /// the number of tenants).
    ///
    /// Fails within about `server_selection_timeout + operation_timeout`
    /// when the server cannot be reached. Once connected, the store never
    /// fails this way again: a server that goes away makes calls
    /// `Unavailable` until it returns, and the driver reconnects by itself.
    pub async fn connect(
        uri: &str,
        database: &str,
        options: MongoOptions,
    ) -> Result<Self, MongoStoreError> {
        let store = Self::new(uri, database, options).await?;
        store.start_up().await?;
        Ok(store)
    }

    /// Like [`Self::connect`], but a server that does not answer yet is not
    /// an error: the store is returned at once, its calls (and
    /// [`StoreHealth::check`], hence `/readyz`) are `Unavailable` until the
    /// server answers, and the start-up work runs in the background,
    /// retried every few seconds until it has succeeded once. Writes never
    /// run ahead of the indexes they rely on: each write creates the
    /// indexes of its collections first if they are not known to exist.
    ///
    /// Only a malformed URI or database name fails. Must be called within
    /// a Tokio runtime.
    pub async fn connect_lazy(
        uri: &str,
        database: &str,
        options: MongoOptions,
    ) -> Result<Self, MongoStoreError> {
        let store = Self::new(uri, database, options).await?;
        let weak = Arc::downgrade(&store.inner);
        tokio::spawn(start_up_in_background(weak));
        Ok(store)
    }

    async fn new(
        uri: &str,
        database: &str,
        options: MongoOptions,
    ) -> Result<Self, MongoStoreError> {
        if !valid_database_name(database) {
            return Err(MongoStoreError::InvalidDatabase {
                name: database.to_owned(),
            });
        }
        let mut client_options =
            ClientOptions::parse(uri)
                .await
                .map_err(|e| MongoStoreError::InvalidUri {
                    reason: redact(&e.to_string(), uri),
                })?;
        // The URI's own timeouts win: operators tune them there.
        client_options
            .server_selection_timeout
            .get_or_insert(options.server_selection_timeout);
        client_options
            .connect_timeout
            .get_or_insert(options.connect_timeout);
        client_options
            .max_pool_size
            .get_or_insert(options.max_pool_size);
        client_options
            .app_name
            .get_or_insert_with(|| options.app_name.clone());
        if let Some(ca) = &options.tls_ca_file {
            client_options.tls = Some(with_ca_file(client_options.tls.take(), ca)?);
        }
        if let Some(observer) = options.command_observer.clone() {
            client_options.command_event_handler = Some(observer.handler());
        }
        // Majority + journal, always, whatever the URI says: an
        // acknowledged write must survive the primary crashing or failing
        // over (design contract 4, "no lost writes"). w:1 acknowledges
        // before the write reaches a second node or the journal, and a
        // failover or crash then rolls it back after the agent was told it
        // happened. `wtimeout` bounds the wait for replication.
        client_options.write_concern = Some(
            WriteConcern::builder()
                .w(Acknowledgment::Majority)
                .journal(true)
                .w_timeout(options.operation_timeout)
                .build(),
        );
        // Majority reads never show a write that a failover could still
        // roll back, so a replay never returns an issue that then vanishes.
        client_options.read_concern = Some(ReadConcern::majority());
        let client =
            Client::with_options(client_options).map_err(|e| MongoStoreError::InvalidUri {
                reason: redact(&e.to_string(), uri),
            })?;
        Ok(Self {
            inner: Arc::new(Inner {
                db: client.database(database),
                options,
                sets: Mutex::new(HashMap::new()),
                claim_turns: ClaimTurns::new(),
                lapse_horizons: Mutex::new(LapseHorizons::new()),
                issue_turns: IssueTurns::new(),
                sweep_round_after: Mutex::new(None),
            }),
        })
    }

    /// The database this store uses.
    pub fn database_name(&self) -> &str {
        self.inner.db.name()
    }

    /// Checks the server and sets up every index set this store knows of
    /// that its record does not show as current: one query for the
    /// records, one for the tenants' collections, then work only for what
    /// is new or changed.
    async fn start_up(&self) -> Result<(), MongoStoreError> {
        let unavailable = |e: StoreError| MongoStoreError::Unavailable {
            reason: e.to_string(),
        };
        self.check().await.map_err(unavailable)?;
        let recorded = self
            .bounded("reading the schema records", self.schema_records())
            .await
            .map_err(unavailable)?;
        let names = self
            .bounded("listing collections", async {
                self.inner
                    .db
                    .list_collection_names()
                    .await
                    .map_err(|e| store_error(&e))
            })
            .await
            .map_err(unavailable)?;
        let sets = schema::SHARED
            .into_iter()
            .map(IndexSet::Shared)
            .chain(schema::tenants_of(&names).into_iter().map(IndexSet::Tenant));
        let mut pending = Vec::new();
        for set in sets {
            if recorded.get(&set.key()) == Some(&set.fingerprint()) {
                // Known current: nothing to ask the server.
                let _ = self.cell(&set).set(());
            } else {
                pending.push(set);
            }
        }
        // New or changed sets (every tenant, the first start after an
        // upgrade): a few at a time, each recorded once it is done.
        let count = pending.len();
        let mut results = futures_util::stream::iter(pending)
            .map(|set| async move {
                let done = self
                    .bounded_write("creating indexes", self.ensure_set_unchecked(&set))
                    .await;
                (set, done)
            })
            .buffer_unordered(SET_UPS_AT_ONCE);
        while let Some((set, done)) = results.next().await {
            done.map_err(|e| MongoStoreError::Indexes {
                collection: set.key(),
                reason: e.to_string(),
            })?;
        }
        if count > 0 {
            tracing::info!(index_sets = count, "MongoDB indexes set up");
        }
        Ok(())
    }

    /// Every [`schema::SCHEMA`] record: index set key → fingerprint.
    async fn schema_records(&self) -> Result<HashMap<String, String>, StoreError> {
        let mut cursor = self
            .schema()
            .find(doc! {})
            .projection(doc! { schema::SCHEMA_FINGERPRINT: 1 })
            .await
            .map_err(|e| store_error(&e))?;
        let mut records = HashMap::new();
        while cursor.advance().await.map_err(|e| store_error(&e))? {
            let doc = cursor.deserialize_current().map_err(|e| store_error(&e))?;
            if let (Ok(key), Ok(fingerprint)) =
                (doc.get_str("_id"), doc.get_str(schema::SCHEMA_FINGERPRINT))
            {
                records.insert(key.to_owned(), fingerprint.to_owned());
            }
        }
        Ok(records)
    }

    fn cell(&self, set: &IndexSet) -> Arc<OnceCell<()>> {
        let mut sets = self
            .inner
            .sets
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        Arc::clone(sets.entry(set.clone()).or_default())
    }

    /// Makes sure `set`'s collections have their indexes, once per set per
    /// process: nothing when this process knows it, one look-up of its
    /// record when the record is current, else the set-up and then the
    /// record. Writes call it before writing; reads do not need it (a
    /// missing collection reads as empty).
    pub(crate) async fn ensure_set(&self, set: &IndexSet) -> Result<(), StoreError> {
        self.ensure_set_with(set, true).await
    }

    /// [`Self::ensure_set`] for a set whose record is known not to be
    /// current (start-up read them all): no look-up first.
    async fn ensure_set_unchecked(&self, set: &IndexSet) -> Result<(), StoreError> {
        self.ensure_set_with(set, false).await
    }

    async fn ensure_set_with(&self, set: &IndexSet, look_up: bool) -> Result<(), StoreError> {
        self.cell(set)
            .get_or_try_init(|| async {
                let fingerprint = set.fingerprint();
                if look_up {
                    let current = self
                        .schema()
                        .find_one(
                            doc! { "_id": set.key(), schema::SCHEMA_FINGERPRINT: &fingerprint },
                        )
                        .await
                        .map_err(|e| store_error(&e))?;
                    if current.is_some() {
                        return Ok(());
                    }
                }
                for (collection, indexes) in set.collections() {
                    self.inner
                        .db
                        .collection::<Document>(&collection)
                        .create_indexes(indexes)
                        .await
                        .map_err(|e| store_error(&e))?;
                }
                if let IndexSet::Tenant(tenant) = set {
                    self.backfill_terms(tenant).await?;
                    self.backfill_urgency(tenant).await?;
                    self.backfill_blockers(tenant).await?;
                }
                // Last: a set-up cut short is not recorded, so redone.
                let recorded = self
                    .schema()
                    .update_one(
                        doc! { "_id": set.key() },
                        doc! { "$set": { schema::SCHEMA_FINGERPRINT: &fingerprint } },
                    )
                    .upsert(true)
                    .await;
                match recorded {
                    Ok(_) => {}
                    // Another process's upsert of the same record won the
                    // race: it is recorded.
                    Err(e) if is_duplicate_key(&e) => {}
                    Err(e) => return Err(store_error(&e)),
                }
                tracing::debug!(set = %set.key(), "MongoDB indexes ready");
                Ok(())
            })
            .await
            .map(|_| ())
    }

    /// Makes sure `tenant`'s collections have their indexes (see
    /// [`Self::ensure_set`]).
    pub(crate) async fn ensure_tenant(&self, tenant: &TenantId) -> Result<(), StoreError> {
        self.ensure_set(&IndexSet::Tenant(tenant.clone())).await
    }

    /// Gives the word arrays search needs to issues written before search
    /// existed (once per tenant per process, after the indexes). Each
    /// update is guarded by the version it read: an issue changed meanwhile
    /// was written with its arrays by that change. Interrupted (by the
    /// operation bound or a failure), it carries on at the next call.
    async fn backfill_terms(&self, tenant: &TenantId) -> Result<(), StoreError> {
        use crate::codec::{field, terms_bson};
        let filter = doc! { field::TERMS_TITLE: { "$exists": false } };
        let mut cursor = self
            .issues(tenant)
            .find(filter)
            .projection(doc! {
                field::TITLE: 1, field::BODY: 1, "comments.body": 1, field::VERSION: 1,
            })
            .await
            .map_err(|e| store_error(&e))?;
        let mut filled = 0u64;
        while cursor.advance().await.map_err(|e| store_error(&e))? {
            let doc = cursor.deserialize_current().map_err(|e| store_error(&e))?;
            let text = |name: &str| doc.get_str(name).unwrap_or_default().to_owned();
            let comments: String = doc
                .get_array(field::COMMENTS)
                .map(|items| {
                    items
                        .iter()
                        .filter_map(|c| c.as_document()?.get_str("body").ok())
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_default();
            let (Some(id), Some(version)) = (doc.get(field::ID), doc.get(field::VERSION)) else {
                continue;
            };
            self.issues(tenant)
                .update_one(
                    doc! { field::ID: id.clone(), field::VERSION: version.clone() },
                    doc! { "$set": {
                        field::TERMS_TITLE: terms_bson(&text(field::TITLE)),
                        field::TERMS_BODY: terms_bson(&text(field::BODY)),
                        field::TERMS_COMMENTS: terms_bson(&comments),
                    } },
                )
                .await
                .map_err(|e| store_error(&e))?;
            filled += 1;
        }
        if filled > 0 {
            tracing::info!(tenant = %tenant, issues = filled, "gave older issues their search words");
        }
        Ok(())
    }

    /// Makes sure the grants collection has its indexes (above all the
    /// unique token hash), once per process.
    pub(crate) async fn ensure_grants(&self) -> Result<(), StoreError> {
        self.ensure_set(&IndexSet::Shared(schema::GRANTS)).await
    }

    pub(crate) fn schema(&self) -> Collection<Document> {
        self.inner.db.collection(schema::SCHEMA)
    }

    pub(crate) fn issues(&self, tenant: &TenantId) -> Collection<Document> {
        self.inner.db.collection(&schema::issues(tenant))
    }

    pub(crate) fn idempotency(&self, tenant: &TenantId) -> Collection<Document> {
        self.inner.db.collection(&schema::idempotency(tenant))
    }

    pub(crate) fn audit(&self, tenant: &TenantId) -> Collection<Document> {
        self.inner.db.collection(&schema::audit(tenant))
    }

    pub(crate) fn database(&self) -> &Database {
        &self.inner.db
    }

    pub(crate) fn grants(&self) -> Collection<Document> {
        self.inner.db.collection(schema::GRANTS)
    }

    pub(crate) fn used_once(&self) -> Collection<Document> {
        self.inner.db.collection(schema::USED_ONCE)
    }

    pub(crate) fn upstreams(&self) -> Collection<Document> {
        self.inner.db.collection(schema::UPSTREAMS)
    }

    pub(crate) fn tool_pins(&self) -> Collection<Document> {
        self.inner.db.collection(schema::TOOL_PINS)
    }

    /// `maxTimeMS` for reads: the server stops working for a caller that
    /// has stopped waiting.
    pub(crate) fn max_time(&self) -> Duration {
        self.inner.options.operation_timeout
    }

    /// Runs `read`, an expensive read of `tenant`'s (`ReadCost::Expensive`),
    /// under one of the tenant's shares: it waits for one (and for its time
    /// share) at most `expensive.timeout()` (then `TenantBusy`), then runs with a
    /// [`ReadBudget`] of that long again, which its queries send as
    /// `maxTimeMS` (the server stops them there: `QueryTooSlow`). The whole
    /// call stays within `operation_timeout` like every read.
    pub(crate) async fn expensive_read<T, F, Fut>(
        &self,
        what: &str,
        tenant: &TenantId,
        read: F,
    ) -> Result<T, StoreError>
    where
        F: FnOnce(ReadBudget) -> Fut,
        Fut: Future<Output = Result<T, StoreError>>,
    {
        let reads = &self.inner.options.expensive;
        self.bounded(what, async {
            let wait_until = tokio::time::Instant::now() + reads.timeout();
            let _share = reads.admit_by(tenant, wait_until).await?;
            read(ReadBudget {
                until: tokio::time::Instant::now() + reads.timeout(),
                reads: reads.clone(),
            })
            .await
        })
        .await
    }

    /// Runs one reading store call within `operation_timeout`, so no call
    /// ever waits longer than that, whatever the server or network does.
    pub(crate) async fn bounded<T>(
        &self,
        what: &str,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        self.bounded_by(self.inner.options.operation_timeout, what, false, call)
            .await
    }

    /// [`Self::bounded`] for a call that writes: its timeout error says
    /// the write may or may not have happened.
    pub(crate) async fn bounded_write<T>(
        &self,
        what: &str,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        self.bounded_by(self.inner.options.operation_timeout, what, true, call)
            .await
    }

    async fn bounded_by<T>(
        &self,
        budget: Duration,
        what: &str,
        writes: bool,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        match tokio::time::timeout(budget, call).await {
            Ok(result) if writes => result,
            Ok(result) => result.map_err(StoreError::for_read),
            Err(_) => {
                tracing::warn!(
                    call = what,
                    budget_ms = budget.as_millis() as u64,
                    "MongoDB call timed out"
                );
                Err(timed_out(what, budget, writes))
            }
        }
    }
}

/// What is left of one expensive read's time, for its queries' `maxTimeMS`.
pub(crate) struct ReadBudget {
    until: tokio::time::Instant,
    reads: ExpensiveReads,
}

impl ReadBudget {
    /// The `maxTimeMS` of the read's next query: what is left (at least
    /// 1 ms; 0 would mean no limit to the server).
    pub(crate) fn max_time(&self) -> Duration {
        self.until
            .saturating_duration_since(tokio::time::Instant::now())
            .max(Duration::from_millis(1))
    }

    /// A driver error of one of the read's queries as a store error.
    pub(crate) fn error(&self, err: &mongodb::error::Error) -> StoreError {
        expensive_read_error(err, &self.reads)
    }
}

/// [`MongoStore::connect_lazy`]'s start-up, retried until it succeeds or
/// the store is dropped.
async fn start_up_in_background(store: Weak<Inner>) {
    loop {
        let Some(inner) = store.upgrade() else { return };
        let store = MongoStore { inner };
        match store.start_up().await {
            Ok(()) => {
                tracing::info!(
                    database = store.database_name(),
                    "MongoDB board store ready"
                );
                return;
            }
            Err(err) => {
                tracing::warn!(error = %err, "MongoDB start-up failed; retrying");
            }
        }
        drop(store);
        tokio::time::sleep(START_UP_RETRY).await;
    }
}

#[async_trait::async_trait]
impl StoreHealth for MongoStore {
    /// A `ping`, bounded by `check_timeout` so a readiness probe gets its
    /// answer before its own deadline.
    async fn check(&self) -> Result<(), StoreError> {
        self.bounded_by(self.inner.options.check_timeout, "ping", false, async {
            self.inner
                .db
                .run_command(doc! { "ping": 1 })
                .await
                .map(|_| ())
                .map_err(|e| store_error(&e))
        })
        .await
    }
}

/// MongoDB forbids `/\. "$*<>:|?` and NUL in database names and caps them
/// at 64 bytes; this is the conservative subset operators actually use.
fn valid_database_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// `message` with the URI's user-info (`user:password@`) blanked out, in
/// case the driver quoted the URI.
fn redact(message: &str, uri: &str) -> String {
    let user_info = uri
        .split_once("://")
        .and_then(|(_, rest)| rest.split_once('@'))
        .map(|(info, _)| info)
        .filter(|info| !info.is_empty() && !info.contains('/'));
    match user_info {
        Some(info) => message.replace(info, "***"),
        None => message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_names_are_a_safe_subset() {
        for ok in ["corkboard", "cb_test-1", &"d".repeat(63)] {
            assert!(valid_database_name(ok), "{ok}");
        }
        for bad in ["", "a.b", "a/b", "a b", "a$b", &"d".repeat(64)] {
            assert!(!valid_database_name(bad), "{bad}");
        }
    }

    #[test]
    fn credentials_never_reach_error_messages() {
        let uri = "mongodb://admin:s3cret@db:27017/?tls=maybe";
        let text = redact(
            "bad option in mongodb://admin:s3cret@db:27017/?tls=maybe",
            uri,
        );
        assert!(!text.contains("s3cret"), "{text}");
        assert_eq!(redact("no uri here", "mongodb://db:27017/"), "no uri here");
    }

    #[actix_rt::test]
    async fn bad_uris_and_names_fail_before_any_network_use() {
        for lazy in [false, true] {
            let connect = |uri: &'static str, db: &'static str| async move {
                if lazy {
                    MongoStore::connect_lazy(uri, db, MongoOptions::default()).await
                } else {
                    MongoStore::connect(uri, db, MongoOptions::default()).await
                }
            };
            let err = connect("mongodb://127.0.0.1:1/", "a.b").await.unwrap_err();
            assert!(
                matches!(err, MongoStoreError::InvalidDatabase { .. }),
                "{err}"
            );
            let err = connect("postgres://u:pw@x/", "db").await.unwrap_err();
            assert!(matches!(err, MongoStoreError::InvalidUri { .. }), "{err}");
            assert!(!err.to_string().contains("pw@"), "{err}");
        }
    }
}

/// The URI's TLS settings with `ca` as the CA file: TLS on (the URI's
/// other TLS options kept), refused when the URI turns TLS off.
fn with_ca_file(tls: Option<Tls>, ca: &std::path::Path) -> Result<Tls, MongoStoreError> {
    match tls {
        Some(Tls::Enabled(mut options)) => {
            options.ca_file_path = Some(ca.to_owned());
            Ok(Tls::Enabled(options))
        }
        Some(Tls::Disabled) => Err(MongoStoreError::InvalidUri {
            reason: "the URI sets tls=false, but a CA file (mongodb_tls_ca_file) is configured"
                .into(),
        }),
        None => Ok(Tls::Enabled(
            TlsOptions::builder().ca_file_path(ca.to_owned()).build(),
        )),
    }
}

#[cfg(test)]
mod tls_tests {
    use super::*;

    #[test]
    fn a_ca_file_turns_tls_on_keeps_the_uris_options_and_refuses_tls_false() {
        let ca = std::path::Path::new("/etc/ca.pem");
        let Ok(Tls::Enabled(on)) = with_ca_file(None, ca) else {
            panic!("TLS on");
        };
        assert_eq!(on.ca_file_path.as_deref(), Some(ca));
        let uri = TlsOptions::builder()
            .allow_invalid_certificates(true)
            .build();
        let Ok(Tls::Enabled(kept)) = with_ca_file(Some(Tls::Enabled(uri)), ca) else {
            panic!("TLS on");
        };
        assert_eq!(kept.allow_invalid_certificates, Some(true));
        assert_eq!(kept.ca_file_path.as_deref(), Some(ca));
        assert!(with_ca_file(Some(Tls::Disabled), ca).is_err());
    }
}
