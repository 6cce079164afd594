//! The open titles of each tenant, in this process's memory: what the
//! similar look-up after every create reads instead of the database.
//!
//! `similar_open_issues` on SQL costs four to eight statements and a read
//! transaction (the word counts, the candidates holding the rarest word,
//! those holding any word, each chosen issue's level): about a fifth of
//! `create_issue`'s CPU under load (services/bench/FINDINGS.md). Here a
//! tenant's open issues that have a title word are held as their title,
//! state, `updated_at` and level, with a set of issue ids per word, and
//! the look-up picks and ranks the same candidates as the SQL does
//! ([`crate::ops::search::similar_open_issues`]; a test compares the two
//! on boards written at random).
//!
//! Only the writer thread changes the index, so it never races a write:
//! - Its connection has temporary triggers ([`CREATE_TOUCHED`]) that note
//!   every issue a write inserts, deletes or changes the title, state,
//!   `updated_at` or level of, in the group's transaction: a failed op,
//!   rolled back, takes its notes with it.
//! - Before `COMMIT`, [`collect`] reads the noted issues as the group
//!   leaves them, and notes the tenants that had an issue created and are
//!   neither held nor being built.
//! - Only once `COMMIT` succeeded does [`OpenTitles::apply`] change the
//!   index, before any caller of the group is answered, so the look-up
//!   after a create sees it and every earlier write of this process.
//!
//! A tenant not held is built off the writer, so that holding a large one
//! never stalls every tenant's writes (reading 50,000 open issues took
//! about 140 ms on the writer thread, services/bench/FINDINGS.md): `apply`
//! asks the builder thread ([`start_builder`]) for it and from then on
//! logs the tenant's committed changes instead of applying them; the
//! builder reads the tenant's open issues in a read transaction that
//! starts after that request (so it sees every commit not in the log),
//! and [`OpenTitles::install`] replays the log on what it read, in commit
//! order, and holds the tenant. Each log entry sets an issue to what its
//! commit left, so an entry the read already saw changes nothing. Until
//! then the tenant's look-ups read SQL, with the same answer. A build
//! under way when another writer changed issues, or whose log outgrew
//! `per_tenant`, is given up but stays under way until it ends, so a
//! tenant never has two.
//!
//! Other processes' writes: each writer adds one to `issue_epoch` in every
//! group that changed an issue. At the start of each group (under the
//! file's write lock) the writer checks `PRAGMA data_version`, and when
//! another connection has committed since, whether the epoch moved past
//! its own last value: if it did, the whole index is dropped and rebuilt
//! tenant by tenant at their next create. So the look-up after a create
//! answers as of that create's commit, like the SQL read right after it
//! (another process's write committed between the two is seen at this
//! process's next write).
//!
//! Bounded: a tenant with more open issues than
//! [`OpenTitleBounds::per_tenant`] is not held (its look-ups read SQL as
//! before), past [`OpenTitleBounds::total_bytes`] the least recently
//! looked-up tenants are dropped, one tenant is built at a time, and a
//! build whose log outgrows `per_tenant` is given up.

use crate::SqliteOptions;
use crate::query::RAREST_WORD_SCAN;
use crate::readers::snapshot;
use crate::schema;
use corkboard_board::{
    Integrity, IssueId, IssueState, SimilarIssue, SimilarRanking, StoreError, TenantId, Timestamp,
    Title, is_open, limits, term_set,
};
use rusqlite::{Connection, Row, params};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};

/// How much of the open titles one process holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenTitleBounds {
    /// A tenant with more open issues than this is not held.
    pub per_tenant: usize,
    /// Estimated bytes of every tenant held; past it, the least recently
    /// looked-up tenants are dropped.
    pub total_bytes: usize,
}

impl Default for OpenTitleBounds {
    fn default() -> Self {
        Self {
            per_tenant: 50_000,
            total_bytes: 64 * 1024 * 1024,
        }
    }
}

/// The writer connection's notes of the issues its group touched
/// (temporary: they live and die with the connection, in memory).
/// `created`: the group inserted it.
pub(crate) const CREATE_TOUCHED: &str = "
    CREATE TEMP TABLE IF NOT EXISTS issues_touched (
        tenant  TEXT    NOT NULL,
        id      TEXT    NOT NULL,
        created INTEGER NOT NULL,
        PRIMARY KEY (tenant, id)
    ) WITHOUT ROWID;
    CREATE TEMP TRIGGER IF NOT EXISTS issues_touched_insert AFTER INSERT ON issues BEGIN
        INSERT INTO issues_touched (tenant, id, created) VALUES (NEW.tenant, NEW.id, 1)
            ON CONFLICT (tenant, id) DO UPDATE SET created = 1;
    END;
    CREATE TEMP TRIGGER IF NOT EXISTS issues_touched_update
    AFTER UPDATE OF title, state, updated_at, integrity ON issues BEGIN
        INSERT OR IGNORE INTO issues_touched (tenant, id, created) VALUES (NEW.tenant, NEW.id, 0);
    END;
    CREATE TEMP TRIGGER IF NOT EXISTS issues_touched_delete AFTER DELETE ON issues BEGIN
        INSERT OR IGNORE INTO issues_touched (tenant, id, created) VALUES (OLD.tenant, OLD.id, 0);
    END;
";

/// The touched issues as the group leaves them (no issue row: deleted).
const TOUCHED: &str = "SELECT t.tenant, t.id, t.created, i.title, i.state, i.updated_at, \
     i.integrity FROM temp.issues_touched t \
     LEFT JOIN main.issues i ON i.tenant = t.tenant AND i.id = t.id";

/// A tenant's open issues, from the state index (`issues_by_state`), one
/// range per open state: a tenant's closed issues are not read. Named, as
/// the planner otherwise walks the tenant's whole primary-key range.
const OPEN_ISSUES: &str = "SELECT id, title, state, updated_at, integrity FROM issues \
     INDEXED BY issues_by_state WHERE tenant = ?1 AND state IN ('inbox', 'triage', 'todo', 'in_progress', 'blocked')";

/// How many open issues a tenant has (the board's counts).
const OPEN_COUNT: &str = "SELECT coalesce(sum(n), 0) FROM board_counts \
     WHERE tenant = ?1 AND kind = 'state' AND key NOT IN ('done', 'closed')";

/// Pairs of word numbers [`shared`] compares all at most (8 words by 8);
/// longer lists are merged.
const SHARED_PAIRS_MAX: usize = 64;

/// Candidates whose entries a look-up reads together ([`TenantTitles::warm`]):
/// about as many cache misses as a core keeps in flight.
const WARM_BATCH: usize = 16;

/// What the held titles are counted at (measured: services/bench/FINDINGS.md,
/// "2026-12-05 (day)"): the allocations' lengths, plus for each
/// allocation the allocator's header and rounding ...
const ALLOCATION_OVERHEAD: usize = 16;
/// ... for each word of each issue its entry's share of the word's set
/// (a 26-byte key and its 4-byte slot in a node of eleven, the nodes half
/// to two thirds full: the 56 bytes measured for the key alone, scaled by
/// the node's size with the slots) ...
const WORD_KEY_BYTES: usize = 64;
/// ... for each word held its set's first node, its entry and its text's
/// allocation ...
const WORD_SET_BYTES: usize = 320;
/// ... and the tables' slots, spare ones included (a table has one slot
/// and one control byte per 7/8 of an entry of its capacity).
fn table_bytes<K, V>(table: &HashMap<K, V>) -> usize {
    table.capacity() * 8 / 7 * (size_of::<(K, V)>() + 1)
}

/// An issue id as the word sets hold it: the 26 characters of its ULID,
/// in place. Every issue id is its prefix and a ULID of 26 uppercase
/// characters (`IssueId::parse` refuses anything else), so keys order as
/// their ids do (newest last), and a word's set holds no string of its
/// own per issue (a copy of the id took about 70 bytes per word: its
/// `String` and its allocation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct IdKey([u8; 26]);

impl IdKey {
    fn of(id: &IssueId) -> Self {
        let id = id.as_str().as_bytes();
        let ulid = &id[id.len().saturating_sub(26)..];
        let mut key = [0; 26];
        key[..ulid.len()].copy_from_slice(ulid);
        Self(key)
    }
}

/// One open issue with a title word.
#[derive(Debug, Clone)]
struct OpenTitle {
    title: Title,
    state: IssueState,
    updated_at: Timestamp,
    integrity: Integrity,
}

/// A held issue: its row and its title's words ([`term_set`]'s, in its
/// order, joined by single spaces: words have none, and one allocation
/// per issue holds them all), cut once when the row is set instead of at
/// every look-up that offers it, and their numbers ([`HeldWord`]).
#[derive(Debug)]
struct HeldTitle {
    id: IssueId,
    row: OpenTitle,
    words: Box<str>,
    /// Its words' numbers, ascending: what a look-up compares.
    numbers: Box<[u64]>,
}

impl HeldTitle {
    fn new(id: IssueId, row: OpenTitle, words: &BTreeSet<String>, mut numbers: Vec<u64>) -> Self {
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        numbers.sort_unstable();
        Self {
            id,
            row,
            words: words.join(" ").into_boxed_str(),
            numbers: numbers.into_boxed_slice(),
        }
    }

    /// The title's words, in [`term_set`]'s order.
    fn words(&self) -> impl Iterator<Item = &str> {
        self.words.split(' ')
    }

    /// Its allocations (id, title, words, numbers) and its keys in the
    /// words' sets.
    fn bytes(&self) -> usize {
        let text = self.id.as_str().len() + self.row.title.as_str().len() + self.words.len();
        let numbers = self.numbers.len() * size_of::<u64>();
        text + numbers + 4 * ALLOCATION_OVERHEAD + self.numbers.len() * WORD_KEY_BYTES
    }
}

/// A word of the held titles: its number, which no other word of the
/// tenant has while it is held (a look-up compares numbers, not strings),
/// and the issues holding it, ordered by id (newest last), each with its
/// slot in [`TenantTitles::titles`], so that a look-up reaches a
/// candidate without hashing its id.
#[derive(Debug)]
struct HeldWord {
    number: u64,
    issues: BTreeMap<IdKey, u32>,
}

/// How many of `ours` are in `theirs`, both ascending (and each without
/// repeats).
fn shared(ours: &[u64], theirs: &[u64]) -> usize {
    // Short lists (most titles' words): every pair compared, with no branch
    // on the data. The merge below takes a branch per step that the CPU
    // cannot predict, for each of a look-up's hundreds of candidates
    // (services/bench/FINDINGS.md, "2026-12-07").
    if ours.len() * theirs.len() <= SHARED_PAIRS_MAX {
        return ours
            .iter()
            .map(|a| theirs.iter().filter(|&b| a == b).count())
            .sum();
    }
    let (mut i, mut j, mut both) = (0, 0, 0);
    while let (Some(a), Some(b)) = (ours.get(i), theirs.get(j)) {
        match a.cmp(b) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                both += 1;
                i += 1;
                j += 1;
            }
        }
    }
    both
}

/// One tenant's open titles.
#[derive(Debug, Default)]
struct TenantTitles {
    /// Each held issue's slot in `titles`.
    slots: HashMap<IdKey, u32>,
    /// The held issues by slot; a slot let go (`None`) is in `free` and
    /// taken again before the table grows (it does not shrink while the
    /// tenant is held: its capacity is counted in `bytes`). A look-up
    /// reaches its candidates here by the slots the words' sets hold:
    /// about 330 of them per create on a board of distinct titles, each
    /// of which cost a hash of its 26-byte id and a probe of a table of
    /// tens of thousands of titles (services/bench/FINDINGS.md).
    titles: Vec<Option<HeldTitle>>,
    free: Vec<u32>,
    /// Each word held, its number and the issues holding it.
    words: HashMap<String, HeldWord>,
    /// The number of the next word held (never one used before: a `u64`
    /// does not run out).
    next_word: u64,
    /// What the issues and the words' sets allocate.
    held_bytes: usize,
    /// `held_bytes` and the tables' slots.
    bytes: usize,
    last_used: AtomicU64,
}

impl TenantTitles {
    /// Makes the index say what the database says of `id` now: `row` is
    /// its title, state, `updated_at` and level, `None` when it is gone.
    fn set(&mut self, id: IssueId, row: Option<OpenTitle>) {
        let row = row.filter(|row| is_open(row.state));
        let key = IdKey::of(&id);
        let old_slot = self.slots.remove(&key);
        let old = old_slot.and_then(|slot| self.titles[slot as usize].take());
        let old_words: BTreeSet<String> = old
            .as_ref()
            .map(|old| old.words().map(str::to_owned).collect())
            .unwrap_or_default();
        if let Some(old) = &old {
            self.held_bytes -= old.bytes();
        }
        let new_words = row
            .as_ref()
            .map(|row| term_set(row.title.as_str()))
            .unwrap_or_default();
        for word in old_words.difference(&new_words) {
            if let Some(held) = self.words.get_mut(word) {
                held.issues.remove(&key);
                if held.issues.is_empty() {
                    self.words.remove(word);
                    self.held_bytes -= WORD_SET_BYTES + word.len();
                }
            }
        }
        // An open title without a word is no candidate (as in SQL, where
        // `open_title_words` has no row of it).
        let Some(row) = row.filter(|_| !new_words.is_empty()) else {
            self.free.extend(old_slot);
            self.count_bytes();
            return;
        };
        // An issue keeps its slot while it is held, so the words it keeps
        // need no change.
        let slot = match old_slot.or_else(|| self.free.pop()) {
            Some(slot) => slot,
            None => {
                // A tenant holds at most `per_tenant` issues, far below
                // u32::MAX; past it the build is given up anyway.
                let slot = u32::try_from(self.titles.len()).unwrap_or(u32::MAX);
                self.titles.push(None);
                slot
            }
        };
        for word in new_words.difference(&old_words) {
            let held = self.words.entry(word.clone()).or_insert_with(|| {
                self.held_bytes += WORD_SET_BYTES + word.len();
                self.next_word += 1;
                HeldWord {
                    number: self.next_word,
                    issues: BTreeMap::new(),
                }
            });
            held.issues.insert(key, slot);
        }
        let numbers = new_words
            .iter()
            .filter_map(|word| self.words.get(word).map(|held| held.number))
            .collect();
        let held = HeldTitle::new(id, row, &new_words, numbers);
        self.held_bytes += held.bytes();
        self.titles[slot as usize] = Some(held);
        self.slots.insert(key, slot);
        self.count_bytes();
    }

    /// How many issues are held.
    fn len(&self) -> usize {
        self.slots.len()
    }

    /// `bytes`, from what is held and the tables' capacities.
    fn count_bytes(&mut self) {
        self.bytes = self.held_bytes
            + table_bytes(&self.slots)
            + table_bytes(&self.words)
            + self.titles.capacity() * size_of::<Option<HeldTitle>>()
            + self.free.capacity() * size_of::<u32>();
    }

    /// Reads each candidate's entry and the first of its word numbers
    /// before any is scored. The candidates' slots are scattered over a
    /// table of tens of thousands of titles, so each entry, and the
    /// numbers behind its pointer, is a cache miss; scored one by one,
    /// the misses came one after another (two thirds of the look-up's
    /// time, services/bench/FINDINGS.md). Here the loads of one
    /// candidate do not wait on another's, so the CPU has a batch's
    /// misses in flight at once, and scoring then finds them in cache.
    fn warm(&self, slots: impl IntoIterator<Item = u32>) {
        let mut touched = 0_u64;
        for slot in slots {
            if let Some(Some(held)) = self.titles.get(slot as usize) {
                touched = touched.wrapping_add(held.numbers.first().copied().unwrap_or(0));
            }
        }
        std::hint::black_box(touched);
    }

    /// The SQL look-up's candidates and choice, on the held titles.
    fn similar(&self, title: &Title, limit: u32) -> Vec<SimilarIssue> {
        let mut ranking = SimilarRanking::new(title.as_str());
        let words: Vec<String> = ranking.words().iter().cloned().collect();
        let held: Vec<(&String, &HeldWord)> = words
            .iter()
            .filter_map(|word| self.words.get(word).map(|held| (word, held)))
            .collect();
        // The title's words by number: a candidate's share of them is a
        // merge of two short lists of integers.
        let mut ours: Vec<u64> = held.iter().map(|(_, held)| held.number).collect();
        ours.sort_unstable();
        let offer = |ranking: &mut SimilarRanking, slot: u32| {
            self.titles[slot as usize].as_ref().is_some_and(|held| {
                ranking.offer_counted(
                    &held.id,
                    &held.row.title,
                    shared(&ours, &held.numbers),
                    held.numbers.len(),
                    held.row.state,
                    held.row.updated_at,
                    held.row.integrity,
                )
            })
        };
        // Every word held: the newest holding the rarest one, until
        // `SIMILAR_ALL_CANDIDATES` of them held every word.
        let mut offered: Vec<IdKey> = Vec::new();
        let mut batch: Vec<(IdKey, u32)> = Vec::with_capacity(WARM_BATCH);
        if !words.is_empty()
            && held.len() == words.len()
            && let Some(&(_, rarest)) = held
                .iter()
                .min_by_key(|&&(word, held)| (held.issues.len(), word))
        {
            let mut every_word = 0;
            let mut newest = rarest
                .issues
                .iter()
                .rev()
                .take(RAREST_WORD_SCAN as usize)
                .map(|(id, &slot)| (*id, slot));
            'scan: loop {
                batch.clear();
                batch.extend(newest.by_ref().take(WARM_BATCH));
                if batch.is_empty() {
                    break;
                }
                self.warm(batch.iter().map(|&(_, slot)| slot));
                for &(id, slot) in &batch {
                    if every_word >= limits::SIMILAR_ALL_CANDIDATES {
                        break 'scan;
                    }
                    offered.push(id);
                    if offer(&mut ranking, slot) {
                        every_word += 1;
                    }
                }
            }
        }
        // Then the newest sharing any word, unless that settled it; each
        // candidate once (`offered` is newest first).
        if !held.is_empty() && !ranking.settled(limit) {
            // The words' sets merged newest first, each issue once: the
            // newest of them all are the newest of each word's newest,
            // without collecting and sorting a few hundred of those.
            let mut heads: Vec<_> = held
                .iter()
                .map(|&(_, held)| held.issues.iter().rev().peekable())
                .collect();
            let mut candidates = Vec::with_capacity(limits::SIMILAR_ANY_CANDIDATES as usize);
            for _ in 0..limits::SIMILAR_ANY_CANDIDATES {
                let Some((id, &slot)) = heads
                    .iter_mut()
                    .filter_map(|head| head.peek().copied())
                    .max_by_key(|&(id, _)| id)
                else {
                    break;
                };
                for head in &mut heads {
                    head.next_if(|&(key, _)| key == id);
                }
                if offered.binary_search_by(|key| id.cmp(key)).is_err() {
                    candidates.push(slot);
                }
            }
            for batch in candidates.chunks(WARM_BATCH) {
                self.warm(batch.iter().copied());
                for &slot in batch {
                    offer(&mut ranking, slot);
                }
            }
        }
        ranking.finish(limit)
    }
}

/// The changes of a tenant's issues committed while it is built: each
/// issue as its commit left it (`None`: gone).
type BuildLog = Vec<(IssueId, Option<OpenTitle>)>;

/// Every tenant held, and those being built.
#[derive(Debug, Default)]
struct Held {
    tenants: HashMap<String, TenantTitles>,
    /// Per tenant whose build is under way, its issues' changes committed
    /// since the build was asked for, oldest first; `None` once the build
    /// is given up (what it read will not be held). An entry lives exactly
    /// as long as its build, so a tenant has at most one build under way.
    building: HashMap<String, Option<BuildLog>>,
    bytes: usize,
}

/// The index (one per store, shared by its writer, its builder and its
/// look-ups).
#[derive(Debug)]
pub(crate) struct OpenTitles {
    held: RwLock<Held>,
    bounds: OpenTitleBounds,
    /// Look-ups so far: the clock of `TenantTitles::last_used`.
    ticks: AtomicU64,
    /// The builder thread's queue ([`start_builder`]); without one, no
    /// tenant is held.
    builder: Mutex<Option<Sender<String>>>,
    /// Tests: holds the builder between its read and installing what it
    /// read, so that writes land in the log meanwhile.
    #[cfg(test)]
    build_gate: (Mutex<BuildGate>, std::sync::Condvar),
}

/// Tests: whether builds wait before installing, and how many do.
#[cfg(test)]
#[derive(Debug, Default)]
struct BuildGate {
    closed: bool,
    waiting: usize,
}

/// What a group's commit changes in the index ([`collect`]).
#[derive(Debug, Default)]
pub(crate) struct Pending {
    /// Held (or being built) tenants' touched issues as committed.
    changes: Vec<(String, IssueId, Option<OpenTitle>)>,
    /// Tenants that had an issue created and are neither held nor being
    /// built: to build.
    requested: Vec<String>,
    /// Tenants with an invalid stored value: no longer held or built.
    dropped: Vec<String>,
    /// The epoch the group wrote, if it changed an issue.
    epoch: Option<i64>,
}

/// What the writer saw of the file last: another connection's commit moves
/// `data_version`, another writer's issue changes move the epoch.
#[derive(Debug, Default)]
pub(crate) struct Watch {
    data_version: Option<i64>,
    epoch: Option<i64>,
}

impl OpenTitles {
    pub(crate) fn new(bounds: OpenTitleBounds) -> Self {
        Self {
            held: RwLock::new(Held::default()),
            bounds,
            ticks: AtomicU64::new(0),
            builder: Mutex::new(None),
            #[cfg(test)]
            build_gate: Default::default(),
        }
    }

    /// The look-up, when `tenant` is held (`None`: read SQL).
    pub(crate) fn similar(
        &self,
        tenant: &TenantId,
        title: &Title,
        limit: u32,
    ) -> Option<Vec<SimilarIssue>> {
        let held = self.held.read().unwrap_or_else(PoisonError::into_inner);
        let titles = held.tenants.get(tenant.as_str())?;
        let tick = self.ticks.fetch_add(1, Ordering::Relaxed) + 1;
        titles.last_used.store(tick, Ordering::Relaxed);
        Some(titles.similar(title, limit))
    }

    /// Whether `tenant` is held (for tests and diagnostics).
    #[cfg(test)]
    pub(crate) fn holds(&self, tenant: &TenantId) -> bool {
        let held = self.held.read().unwrap_or_else(PoisonError::into_inner);
        held.tenants.contains_key(tenant.as_str())
    }

    /// Whether `tenant` is held or being built: its changes are collected.
    fn is_tracked(&self, tenant: &str) -> bool {
        let held = self.held.read().unwrap_or_else(PoisonError::into_inner);
        held.tenants.contains_key(tenant) || held.building.contains_key(tenant)
    }

    /// Drops every tenant and gives up every build under way (another
    /// process changed issues).
    fn clear(&self) {
        let mut held = self.held.write().unwrap_or_else(PoisonError::into_inner);
        held.tenants.clear();
        held.bytes = 0;
        for log in held.building.values_mut() {
            *log = None;
        }
    }

    /// Asks the builder for `tenant` (under `held`'s write lock, so that
    /// the request is registered before the builder can answer it).
    /// Without a builder, the tenant stays not held.
    fn request(&self, held: &mut Held, tenant: String) {
        let builder = self.builder.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(builder) = builder.as_ref() else {
            return;
        };
        if builder.send(tenant.clone()).is_ok() {
            held.building.insert(tenant, Some(Vec::new()));
        }
    }

    /// The builder read `titles` for `tenant`: replays the changes
    /// logged since it was asked for and holds the tenant, unless the
    /// build was given up meanwhile.
    fn install(&self, tenant: String, mut titles: TenantTitles) {
        let mut held = self.held.write().unwrap_or_else(PoisonError::into_inner);
        let held = &mut *held;
        let Some(Some(log)) = held.building.remove(&tenant) else {
            return;
        };
        for (id, row) in log {
            titles.set(id, row);
        }
        if titles.len() > self.bounds.per_tenant {
            return;
        }
        titles
            .last_used
            .store(self.ticks.load(Ordering::Relaxed), Ordering::Relaxed);
        held.bytes += titles.bytes;
        if let Some(old) = held.tenants.insert(tenant, titles) {
            held.bytes -= old.bytes;
        }
        self.evict(held);
    }

    /// The builder could not hold `tenant` (too many open issues, an
    /// invalid stored value, the file): its look-ups read SQL.
    fn abandon(&self, tenant: &str) {
        let mut held = self.held.write().unwrap_or_else(PoisonError::into_inner);
        held.building.remove(tenant);
    }

    /// Drops the least recently looked-up tenants while past the bytes.
    fn evict(&self, held: &mut Held) {
        while held.bytes > self.bounds.total_bytes {
            let Some(oldest) = held
                .tenants
                .iter()
                .min_by_key(|(_, t)| t.last_used.load(Ordering::Relaxed))
                .map(|(name, _)| name.clone())
            else {
                break;
            };
            if let Some(gone) = held.tenants.remove(&oldest) {
                held.bytes -= gone.bytes;
            }
        }
    }

    /// At the start of a group, under the file's write lock: drops the
    /// index when another writer changed issues since this one last looked.
    pub(crate) fn check(&self, conn: &Connection, watch: &mut Watch) -> rusqlite::Result<()> {
        let data_version: i64 = conn
            .prepare_cached("PRAGMA data_version")?
            .query_row([], |row| row.get(0))?;
        if watch.data_version == Some(data_version) {
            return Ok(());
        }
        watch.data_version = Some(data_version);
        let epoch = epoch(conn)?;
        if watch.epoch.is_some_and(|seen| seen != epoch) {
            self.clear();
        }
        watch.epoch = Some(epoch);
        Ok(())
    }

    /// After the group's `COMMIT` (and before its callers are answered).
    pub(crate) fn apply(&self, pending: Pending, watch: &mut Watch) {
        if let Some(epoch) = pending.epoch {
            watch.epoch = Some(epoch);
        }
        if pending.changes.is_empty() && pending.requested.is_empty() && pending.dropped.is_empty()
        {
            return;
        }
        let mut held = self.held.write().unwrap_or_else(PoisonError::into_inner);
        let held = &mut *held;
        let mut grown = HashSet::new();
        for (tenant, id, row) in pending.changes {
            if let Some(titles) = held.tenants.get_mut(&tenant) {
                held.bytes -= titles.bytes;
                titles.set(id, row);
                held.bytes += titles.bytes;
                grown.insert(tenant);
            } else if let Some(Some(log)) = held.building.get_mut(&tenant) {
                log.push((id, row));
                // More changes than the tenant may hold issues: give up
                // rather than let the log grow with a stalled build.
                if log.len() > self.bounds.per_tenant {
                    held.building.insert(tenant, None);
                }
            }
        }
        for tenant in pending.dropped {
            if let Some(log) = held.building.get_mut(&tenant) {
                *log = None;
            }
            if let Some(gone) = held.tenants.remove(&tenant) {
                held.bytes -= gone.bytes;
            }
        }
        for tenant in pending.requested {
            if !held.tenants.contains_key(&tenant) && !held.building.contains_key(&tenant) {
                self.request(held, tenant);
            }
        }
        for tenant in grown {
            if held
                .tenants
                .get(&tenant)
                .is_some_and(|t| t.len() > self.bounds.per_tenant)
                && let Some(gone) = held.tenants.remove(&tenant)
            {
                held.bytes -= gone.bytes;
            }
        }
        self.evict(held);
    }
}

/// What tests need to see and steer of the builder.
#[cfg(test)]
impl OpenTitles {
    /// Tests: waits until every build asked for has ended.
    pub(crate) fn wait_built(&self) {
        for _ in 0..2_000 {
            if self
                .held
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .building
                .is_empty()
            {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        panic!("a tenant's open titles were still being built after 10 s");
    }

    /// Tests: from now on, builds wait after their read until
    /// [`Self::release_builds`].
    pub(crate) fn hold_builds(&self) {
        self.build_gate.0.lock().unwrap().closed = true;
    }

    /// Tests: waits until a build has read and waits at the gate.
    pub(crate) fn wait_build_read(&self) {
        let (gate, changed) = &self.build_gate;
        let gate = gate.lock().unwrap();
        let (_gate, timeout) = changed
            .wait_timeout_while(gate, std::time::Duration::from_secs(10), |g| g.waiting == 0)
            .unwrap();
        assert!(!timeout.timed_out(), "no build read within 10 s");
    }

    /// Tests: lets held builds install.
    pub(crate) fn release_builds(&self) {
        self.build_gate.0.lock().unwrap().closed = false;
        self.build_gate.1.notify_all();
    }

    /// Tests: a build that read waits here while the gate is closed.
    fn pass_gate(&self) {
        let (gate, changed) = &self.build_gate;
        let mut gate = gate.lock().unwrap();
        gate.waiting += 1;
        changed.notify_all();
        while gate.closed {
            gate = changed.wait(gate).unwrap();
        }
        gate.waiting -= 1;
    }
}

/// Starts the thread that builds tenants for `index` from `path` (one at
/// a time, on a read connection of its own); it stops once `index` is
/// dropped.
pub(crate) fn start_builder(
    index: &Arc<OpenTitles>,
    path: PathBuf,
    options: SqliteOptions,
) -> std::io::Result<()> {
    let (requests, queue) = channel();
    let weak = Arc::downgrade(index);
    std::thread::Builder::new()
        .name("sqlite-titles".into())
        .spawn(move || run_builder(&weak, &queue, &path, &options))?;
    *index.builder.lock().unwrap_or_else(PoisonError::into_inner) = Some(requests);
    Ok(())
}

/// The builder thread: builds the tenants asked for, one at a time, and
/// installs each or gives it up; a failed read or connection only leaves
/// that tenant to SQL (logged, without the tenant).
fn run_builder(
    index: &Weak<OpenTitles>,
    queue: &Receiver<String>,
    path: &std::path::Path,
    options: &SqliteOptions,
) {
    let mut conn: Option<Connection> = None;
    // Ends when the index, and with it the queue's sender, is dropped.
    while let Ok(tenant) = queue.recv() {
        let Some(index) = index.upgrade() else {
            return;
        };
        if conn.is_none() {
            conn = schema::open_reader(path, options)
                .map_err(|e| tracing::warn!(error = %e, "the open titles' builder could not open the board; look-ups read SQL"))
                .ok();
        }
        let built = match &conn {
            Some(conn) => snapshot(conn, |conn| {
                Ok(build(conn, &tenant, index.bounds.per_tenant)?)
            }),
            None => Ok(None),
        };
        match built {
            Ok(Some(titles)) => {
                #[cfg(test)]
                index.pass_gate();
                index.install(tenant, titles);
            }
            Ok(None) => index.abandon(&tenant),
            Err(e) => {
                let error = StoreError::from(e);
                tracing::warn!(%error, "building a tenant's open titles failed; its look-ups read SQL");
                // A connection that failed may be in any state: a new one
                // for the next build.
                conn = None;
                index.abandon(&tenant);
            }
        }
    }
}

/// Before the group's `COMMIT`: what it changes in the index, read from
/// its own transaction, and the epoch moved when it changed an issue.
/// Empties the notes.
pub(crate) fn collect(conn: &Connection, index: &OpenTitles) -> rusqlite::Result<Pending> {
    let mut pending = Pending::default();
    let mut requested: BTreeSet<String> = BTreeSet::new();
    let mut touched = false;
    {
        let mut stmt = conn.prepare_cached(TOUCHED)?;
        let mut rows = stmt.query([])?;
        let mut tracked_tenants: HashMap<String, bool> = HashMap::new();
        while let Some(row) = rows.next()? {
            touched = true;
            let tenant: String = row.get(0)?;
            let tracked = *tracked_tenants
                .entry(tenant.clone())
                .or_insert_with(|| index.is_tracked(&tenant));
            if tracked {
                let id = IssueId::parse(row.get::<_, String>(1)?).ok();
                let open = match row.get::<_, Option<String>>(3)? {
                    Some(_) => open_title(row, 3)?.map(Some),
                    None => Some(None),
                };
                match (id, open) {
                    (Some(id), Some(open)) => pending.changes.push((tenant, id, open)),
                    // A stored value the domain rejects: the tenant's
                    // look-ups go back to SQL, which reports it.
                    _ => pending.dropped.push(tenant),
                }
            } else if row.get::<_, bool>(2)? {
                requested.insert(tenant);
            }
        }
    }
    if !touched {
        return Ok(pending);
    }
    conn.prepare_cached("DELETE FROM temp.issues_touched")?
        .execute([])?;
    // Two statements, not one with `RETURNING`: SQLite gathers returned
    // rows in a temporary table, built and dropped at every run.
    conn.prepare_cached("UPDATE issue_epoch SET n = n + 1 WHERE id = 1")?
        .execute([])?;
    pending.epoch = Some(epoch(conn)?);
    // The count is cheap (`board_counts`): a tenant past the bound is not
    // even asked for.
    for tenant in requested {
        if holdable(conn, &tenant, index.bounds.per_tenant)? {
            pending.requested.push(tenant);
        }
    }
    Ok(pending)
}

/// How many groups have changed issues in the file (`issue_epoch`).
fn epoch(conn: &Connection) -> rusqlite::Result<i64> {
    conn.prepare_cached("SELECT n FROM issue_epoch WHERE id = 1")?
        .query_row([], |row| row.get(0))
}

/// Whether `tenant` has at most `per_tenant` open issues.
fn holdable(conn: &Connection, tenant: &str, per_tenant: usize) -> rusqlite::Result<bool> {
    let open: i64 = conn
        .prepare_cached(OPEN_COUNT)?
        .query_row(params![tenant], |row| row.get(0))?;
    Ok(usize::try_from(open).unwrap_or(usize::MAX) <= per_tenant)
}

/// `tenant`'s open titles, read in the caller's transaction; `None` when
/// it has more open issues than `per_tenant` or a stored value is invalid.
fn build(
    conn: &Connection,
    tenant: &str,
    per_tenant: usize,
) -> rusqlite::Result<Option<TenantTitles>> {
    if !holdable(conn, tenant, per_tenant)? {
        return Ok(None);
    }
    let mut titles = TenantTitles::default();
    let mut stmt = conn.prepare_cached(OPEN_ISSUES)?;
    let mut rows = stmt.query(params![tenant])?;
    while let Some(row) = rows.next()? {
        let id = IssueId::parse(row.get::<_, String>(0)?).ok();
        match (id, open_title(row, 1)?) {
            (Some(id), Some(open)) => titles.set(id, Some(open)),
            _ => return Ok(None),
        }
    }
    Ok(Some(titles))
}

/// Title, state, `updated_at` and level from `row`, from column `first`;
/// `None` when a stored value is not valid in the domain.
fn open_title(row: &Row<'_>, first: usize) -> rusqlite::Result<Option<OpenTitle>> {
    let title = Title::parse(row.get::<_, String>(first)?);
    let state = IssueState::parse(&row.get::<_, String>(first + 1)?);
    let (Ok(title), Ok(state)) = (title, state) else {
        return Ok(None);
    };
    Ok(Some(OpenTitle {
        title,
        state,
        updated_at: Timestamp::from_millis(row.get(first + 2)?),
        integrity: Integrity::from_rank(row.get(first + 3)?),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::search;
    use crate::readers::snapshot;
    use crate::{FILE_NAME, SqliteOptions, SqliteStore, schema};
    use corkboard_board::{
        Author, AuthorKind, Claimant, CommentBody, GrantId, GrantLedger, GrantPolicy, IssuePatch,
        IssueStore, NewComment, NewIssue, RunId,
    };
    use std::path::Path;

    const WORDS: [&str; 8] = [
        "login", "fails", "Safari", "crash", "save", "slow", "export", "page",
    ];

    /// A small deterministic generator (xorshift), so a failure repeats.
    struct Dice(u64);

    impl Dice {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }

        fn title(&mut self) -> Title {
            // Now and then a title without a word, which no look-up finds.
            if self.below(20) == 0 {
                return Title::parse("?!").unwrap();
            }
            let words: Vec<&str> = (0..=self.below(4))
                .map(|_| WORDS[self.below(WORDS.len())])
                .collect();
            Title::parse(words.join(" ")).unwrap()
        }
    }

    fn tenant() -> TenantId {
        TenantId::parse("acme").unwrap()
    }

    fn author(integrity: Integrity) -> Author {
        Author {
            kind: AuthorKind::Run,
            run: RunId::parse("r").unwrap(),
            grant: None,
            integrity,
        }
    }

    /// A store in `dir` whose tenants are held up to `per_tenant` open
    /// issues.
    fn store_holding(dir: &Path, per_tenant: usize) -> SqliteStore {
        let options = SqliteOptions {
            open_titles: OpenTitleBounds {
                per_tenant,
                ..OpenTitleBounds::default()
            },
            ..SqliteOptions::default()
        };
        SqliteStore::open_with(&dir.join(FILE_NAME), options).unwrap()
    }

    /// Files `title` on the tenant's board as an agent; its id.
    async fn file(store: &SqliteStore, title: &str) -> IssueId {
        let new = NewIssue::new(Title::parse(title).unwrap());
        let by = author(Integrity::Agent);
        let created = store.create_issue(&tenant(), &by, new, None).await;
        created.unwrap().issue.id
    }

    /// The look-up as SQL answers it, on a reader of its own.
    fn sql_similar(path: &Path, title: &Title, limit: u32) -> Vec<SimilarIssue> {
        let conn = schema::open_reader(path, &SqliteOptions::default()).unwrap();
        snapshot(&conn, |conn| {
            search::similar_open_issues(conn, &tenant(), title, limit)
        })
        .unwrap()
    }

    /// Every title of `dice`'s next `n`, through the store (held titles)
    /// and through SQL: the same issues, scores and order.
    async fn agree(store: &SqliteStore, dice: &mut Dice, n: usize) {
        store.open_titles().wait_built();
        assert!(store.open_titles().holds(&tenant()));
        for _ in 0..n {
            let title = dice.title();
            let limit = 1 + dice.below(limits::SIMILAR_LIMIT_MAX as usize) as u32;
            let held = store
                .similar_open_issues(&tenant(), &title, limit)
                .await
                .unwrap();
            let sql = sql_similar(store.path(), &title, limit);
            assert_eq!(held, sql, "{title:?}, limit {limit}");
        }
    }

    #[actix_rt::test]
    async fn held_titles_answer_as_the_sql_look_up_on_a_board_written_at_random() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join(FILE_NAME)).unwrap();
        let mut dice = Dice(0x9e37_79b9_7f4a_7c15);
        let levels = [Integrity::External, Integrity::Agent, Integrity::Person];
        let mut ids: Vec<IssueId> = Vec::new();
        for step in 0..600 {
            let by = author(levels[dice.below(levels.len())]);
            let pick = |dice: &mut Dice, ids: &[IssueId]| ids[dice.below(ids.len())].clone();
            match dice.below(10) {
                _ if ids.is_empty() => {}
                0 => {
                    let patch = IssuePatch {
                        title: Some(dice.title()),
                        actor: Some(by.clone()),
                        ..IssuePatch::default()
                    };
                    let _ = store
                        .update_issue(&tenant(), &pick(&mut dice, &ids), patch, None)
                        .await;
                }
                1 => {
                    let state =
                        [IssueState::Done, IssueState::Closed, IssueState::Todo][dice.below(3)];
                    let patch = IssuePatch {
                        state: Some(state),
                        ..IssuePatch::default()
                    };
                    let _ = store
                        .update_issue(&tenant(), &pick(&mut dice, &ids), patch, None)
                        .await;
                }
                2 => {
                    let comment = NewComment {
                        issue: pick(&mut dice, &ids),
                        body: CommentBody::parse("seen again").unwrap(),
                    };
                    store
                        .add_comment(&tenant(), &by, comment, None)
                        .await
                        .unwrap();
                }
                3 => {
                    let claimant = Claimant {
                        run: RunId::parse(format!("run{}", dice.below(3))).unwrap(),
                        grant: GrantId::generate(),
                        expires_at: Timestamp::from_millis(i64::MAX / 2),
                        lease: None,
                        integrity: by.integrity,
                    };
                    let _ = store
                        .claim_issue(&tenant(), &pick(&mut dice, &ids), &claimant, None)
                        .await;
                }
                4 => {
                    // Fails (no such parent) and must leave nothing behind.
                    let orphan = NewIssue {
                        parent: Some(IssueId::generate()),
                        ..NewIssue::new(dice.title())
                    };
                    assert!(
                        store
                            .create_issue(&tenant(), &by, orphan, None)
                            .await
                            .is_err()
                    );
                }
                _ => {}
            }
            let new = NewIssue::new(dice.title());
            ids.push(
                store
                    .create_issue(&tenant(), &by, new, None)
                    .await
                    .unwrap()
                    .issue
                    .id,
            );
            if step % 100 == 99 {
                agree(&store, &mut dice, 60).await;
            }
        }
    }

    #[actix_rt::test]
    async fn another_writers_issue_changes_drop_the_held_titles_and_nothing_else_does() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        // Two stores on one file: two writers, as two processes have.
        let (a, b) = (
            SqliteStore::open(&path).unwrap(),
            SqliteStore::open(&path).unwrap(),
        );
        let by = author(Integrity::Agent);
        let login = Title::parse("login fails on Safari").unwrap();
        let first = file(&a, login.as_str()).await;
        a.open_titles().wait_built();
        assert!(a.open_titles().holds(&tenant()), "a create builds it");
        let comment = |text: &str| NewComment {
            issue: first.clone(),
            body: CommentBody::parse(text).unwrap(),
        };

        // B writes no issue: A's titles stay.
        b.set_grant_policy(&tenant(), &GrantPolicy::default())
            .await
            .unwrap();
        a.add_comment(&tenant(), &by, comment("one"), None)
            .await
            .unwrap();
        assert!(a.open_titles().holds(&tenant()));

        // B files a like title and closes A's issue: A's next write drops
        // its titles (a comment creates nothing, so nothing is rebuilt).
        file(&b, "login fails on Safari again").await;
        let closed = IssuePatch {
            state: Some(IssueState::Done),
            ..IssuePatch::default()
        };
        b.update_issue(&tenant(), &first, closed, None)
            .await
            .unwrap();
        a.add_comment(&tenant(), &by, comment("two"), None)
            .await
            .unwrap();
        assert!(!a.open_titles().holds(&tenant()), "B's writes drop it");
        // Not held, the look-up reads SQL: B's issue, not the closed one.
        let similar = a.similar_open_issues(&tenant(), &login, 5).await.unwrap();
        assert_eq!(similar, sql_similar(&path, &login, 5));
        assert_eq!(similar.len(), 1, "{similar:?}");

        // A's next create builds it again, B's writes and all.
        file(&a, "export is slow").await;
        a.open_titles().wait_built();
        assert!(a.open_titles().holds(&tenant()));
        let held = a.similar_open_issues(&tenant(), &login, 5).await.unwrap();
        assert_eq!(held, similar);
    }

    /// `title`'s look-up through the store (held) and through SQL agree,
    /// at every limit.
    async fn agrees_for(store: &SqliteStore, title: &str) {
        let title = Title::parse(title).unwrap();
        for limit in 1..=limits::SIMILAR_LIMIT_MAX {
            let held = store
                .similar_open_issues(&tenant(), &title, limit)
                .await
                .unwrap();
            assert_eq!(held, sql_similar(store.path(), &title, limit), "{title:?}");
        }
    }

    #[actix_rt::test]
    async fn writes_committed_while_a_tenant_is_built_are_replayed_on_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join(FILE_NAME)).unwrap();
        // The builder reads the board as the first create left it, then
        // waits: everything below commits between its read and its install.
        store.open_titles().hold_builds();
        let first = file(&store, "login fails on Safari").await;
        store.open_titles().wait_build_read();
        let second = file(&store, "export is slow").await;
        let third = file(&store, "login page crash").await;
        let retitle = IssuePatch {
            title: Some(Title::parse("login crash on save").unwrap()),
            ..IssuePatch::default()
        };
        store
            .update_issue(&tenant(), &first, retitle, None)
            .await
            .unwrap();
        let done = IssuePatch {
            state: Some(IssueState::Done),
            ..IssuePatch::default()
        };
        store
            .update_issue(&tenant(), &third, done, None)
            .await
            .unwrap();
        let comment = NewComment {
            issue: second.clone(),
            body: CommentBody::parse("seen again").unwrap(),
        };
        let by = author(Integrity::Agent);
        store
            .add_comment(&tenant(), &by, comment, None)
            .await
            .unwrap();
        assert!(!store.open_titles().holds(&tenant()), "still being built");
        store.open_titles().release_builds();
        store.open_titles().wait_built();
        assert!(store.open_titles().holds(&tenant()));
        for title in [
            "login fails",
            "login crash",
            "export slow",
            "page crash",
            "save",
        ] {
            agrees_for(&store, title).await;
        }
    }

    #[actix_rt::test]
    async fn a_build_under_way_when_another_writer_changes_issues_is_not_installed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        let (a, b) = (
            SqliteStore::open(&path).unwrap(),
            SqliteStore::open(&path).unwrap(),
        );
        a.open_titles().hold_builds();
        file(&a, "login fails on Safari").await;
        a.open_titles().wait_build_read();
        // B files a like title after A's builder read, and A's next write
        // sees that another writer changed issues: A's build is stale.
        file(&b, "login fails again").await;
        a.set_grant_policy(&tenant(), &GrantPolicy::default())
            .await
            .unwrap();
        a.open_titles().release_builds();
        a.open_titles().wait_built();
        assert!(
            !a.open_titles().holds(&tenant()),
            "the stale build is dropped"
        );
        // The next create builds it again, B's issue included.
        file(&a, "export is slow").await;
        a.open_titles().wait_built();
        assert!(a.open_titles().holds(&tenant()));
        agrees_for(&a, "login fails").await;
    }

    #[actix_rt::test]
    async fn a_build_given_up_stays_under_way_until_it_ends() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_holding(dir.path(), 3);
        store.open_titles().hold_builds();
        let first = file(&store, "login fails").await;
        store.open_titles().wait_build_read();
        // More logged changes than the tenant may hold issues: the build
        // is given up, and the create after them must not start a second
        // build whose log the first one would take.
        for title in ["login crash", "save crash", "page slow", "export slow"] {
            let retitle = IssuePatch {
                title: Some(Title::parse(title).unwrap()),
                ..IssuePatch::default()
            };
            store
                .update_issue(&tenant(), &first, retitle, None)
                .await
                .unwrap();
        }
        file(&store, "page crash").await;
        store.open_titles().release_builds();
        store.open_titles().wait_built();
        for title in ["login fails", "export slow", "page crash"] {
            agrees_for(&store, title).await;
        }
        // The next create builds it afresh.
        file(&store, "export crash").await;
        store.open_titles().wait_built();
        assert!(store.open_titles().holds(&tenant()));
        for title in ["login fails", "export slow", "page crash"] {
            agrees_for(&store, title).await;
        }
    }

    #[actix_rt::test]
    async fn a_tenant_past_its_bound_is_not_held_and_reads_sql() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_holding(dir.path(), 3);
        let title = Title::parse("login fails").unwrap();
        for n in 1..=5 {
            file(&store, title.as_str()).await;
            store.open_titles().wait_built();
            assert_eq!(store.open_titles().holds(&tenant()), n <= 3, "{n}");
        }
        let similar = store
            .similar_open_issues(&tenant(), &title, 10)
            .await
            .unwrap();
        assert_eq!(similar.len(), 5);
        assert_eq!(similar, sql_similar(store.path(), &title, 10));
    }

    #[test]
    fn past_the_total_bound_the_least_recently_used_tenant_goes() {
        let titles = |n: usize| {
            let mut t = TenantTitles::default();
            for _ in 0..n {
                let row = OpenTitle {
                    title: Title::parse("login fails").unwrap(),
                    state: IssueState::Todo,
                    updated_at: Timestamp::from_millis(1),
                    integrity: Integrity::Agent,
                };
                t.set(IssueId::generate(), Some(row));
            }
            t
        };
        let one = titles(10).bytes;
        let index = OpenTitles::new(OpenTitleBounds {
            per_tenant: 100,
            total_bytes: one * 2 + one / 2,
        });
        // As the builder would: asked for, then installed.
        let built = |name: &str| {
            let log = Some(Vec::new());
            index
                .held
                .write()
                .unwrap()
                .building
                .insert(name.to_owned(), log);
            index.install(name.to_owned(), titles(10));
        };
        built("old");
        built("used");
        let used = TenantId::parse("used").unwrap();
        let title = Title::parse("login").unwrap();
        assert!(index.similar(&used, &title, 3).is_some());
        built("new");
        let holds = |name: &str| index.holds(&TenantId::parse(name).unwrap());
        assert!(!holds("old") && holds("used") && holds("new"));
    }

    #[test]
    fn an_issue_closed_retitled_or_gone_leaves_no_word_behind() {
        let mut t = TenantTitles::default();
        let id = IssueId::generate();
        let row = |title: &str, state| OpenTitle {
            title: Title::parse(title).unwrap(),
            state,
            updated_at: Timestamp::from_millis(1),
            integrity: Integrity::Agent,
        };
        t.set(id.clone(), Some(row("login fails", IssueState::Todo)));
        t.set(id.clone(), Some(row("export fails", IssueState::Todo)));
        let words: BTreeSet<&str> = t.words.keys().map(String::as_str).collect();
        assert_eq!(words, BTreeSet::from(["export", "fails"]));
        t.set(id.clone(), Some(row("export fails", IssueState::Done)));
        assert!(t.words.is_empty() && t.len() == 0 && t.held_bytes == 0);
        t.set(id.clone(), Some(row("export", IssueState::Todo)));
        t.set(id, None);
        assert!(t.words.is_empty() && t.len() == 0 && t.held_bytes == 0);
        // One slot throughout: kept while held, taken again once let go.
        assert_eq!((t.titles.len(), t.free.len()), (1, 1));
        let (a, b) = (IssueId::generate(), IssueId::generate());
        t.set(a.clone(), Some(row("login fails", IssueState::Todo)));
        t.set(b.clone(), Some(row("login slow", IssueState::Todo)));
        t.set(a.clone(), Some(row("login fails again", IssueState::Todo)));
        let slot = |id: &IssueId| t.slots[&IdKey::of(id)];
        assert_eq!((slot(&a), slot(&b), t.titles.len()), (0, 1, 2));
        let login = &t.words["login"].issues;
        assert_eq!(
            login.values().copied().collect::<BTreeSet<u32>>(),
            BTreeSet::from([0, 1])
        );
    }

    #[test]
    fn shared_counts_common_numbers_on_short_and_long_lists() {
        let mut dice = Dice(0x2545_f491_4f6c_dd1d);
        for _ in 0..500 {
            let list = |dice: &mut Dice| {
                let len = dice.below(24);
                let set: BTreeSet<u64> = (0..len).map(|_| dice.below(40) as u64).collect();
                set.into_iter().collect::<Vec<u64>>()
            };
            let (ours, theirs) = (list(&mut dice), list(&mut dice));
            let want = ours.iter().filter(|n| theirs.contains(n)).count();
            assert_eq!(shared(&ours, &theirs), want, "{ours:?} {theirs:?}");
        }
    }

    #[test]
    fn id_keys_order_as_their_ids() {
        let mut ids: Vec<IssueId> = (0..1_000).map(|_| IssueId::generate()).collect();
        ids.push(IssueId::parse(format!("iss_{}", "0".repeat(26))).unwrap());
        ids.push(IssueId::parse(format!("iss_{}", "7ZZZZZZZZZZZZZZZZZZZZZZZZZ")).unwrap());
        let mut by_key = ids.clone();
        by_key.sort_by_key(IdKey::of);
        ids.sort();
        assert_eq!(by_key, ids);
        let keys: HashSet<IdKey> = ids.iter().map(IdKey::of).collect();
        assert_eq!(keys.len(), ids.len(), "a key per id");
    }

    #[test]
    fn the_open_issues_statement_names_every_open_state_and_reads_the_state_index() {
        let open: Vec<&str> = IssueState::ALL
            .into_iter()
            .filter(|state| is_open(*state))
            .map(IssueState::as_str)
            .collect();
        let listed = OPEN_ISSUES
            .split("IN (")
            .nth(1)
            .unwrap()
            .trim_end_matches(')');
        let listed: Vec<&str> = listed.split(", ").map(|s| s.trim_matches('\'')).collect();
        assert_eq!(listed, open);
        let dir = tempfile::tempdir().unwrap();
        let conn =
            schema::open_writer(&dir.path().join(FILE_NAME), &SqliteOptions::default()).unwrap();
        let plan = crate::query::query_plan(&conn, OPEN_ISSUES, ["acme"]);
        assert!(
            plan.iter().all(|line| line.contains("issues_by_state")),
            "{plan:?}"
        );
    }
}
