//! Whether anything has committed to the board file since a moment, told
//! without a transaction: the tenants' epochs (`tenant_epoch`, which the
//! answers `get_issue` and `list_issues` keep are checked against) stand
//! as long as nothing committed.
//!
//! In WAL mode SQLite keeps the WAL index in shared memory, the `-shm`
//! file every connection of every process maps. Its header holds a counter
//! every committed transaction increments (`iChange`), the last valid
//! frame, the salts and a checksum, written twice; a committing writer
//! updates both copies before its `COMMIT` returns, so before any caller is
//! answered (the layout is the documented WAL-index format, which every
//! SQLite version sharing a file reads the same way). Reading those bytes
//! is one `pread`, no lock: a header equal to one read before an epoch was
//! read means no transaction of any process committed since, so the epoch
//! still holds. A header that differs, or a torn read (the two copies
//! differ, or the checksum is wrong), sends the caller to the transaction,
//! as before. Reading the epoch in a transaction was about a tenth of a
//! kept read's server CPU (`services/bench/FINDINGS.md`).
//!
//! Why the epochs are noted under the header read *before* their
//! transaction: if a transaction committed between the two, the header has
//! moved since and never comes back (the counter only grows), so the note
//! is never used; if none did, the epoch is the one under that header.

use corkboard_board::TenantId;
use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{Mutex, PoisonError};

/// Bytes of one copy of the WAL-index header (`WalIndexHdr`).
const HEADER: usize = 48;
/// Where the header's checksum (two native-order `u32`s) starts: it covers
/// the bytes before it.
const CHECKSUM_AT: usize = 40;
/// The `isInit` byte: the header has been written at least once.
const IS_INIT_AT: usize = 12;
/// Tenants whose epochs are noted under one header; past it the notes
/// start over (a bound on memory, not a correctness limit).
const TENANTS_MAX: usize = 4096;

/// A consistent copy of the WAL-index header.
pub(crate) type Header = [u8; HEADER];

/// What [`WalWatch::check`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Check {
    /// The tenant's epoch: nothing has committed since it was read.
    Known(u64),
    /// Read it in a transaction, and note it under this header.
    Unknown(Option<Header>),
}

/// The board file's WAL index, read for its header, and the tenants'
/// epochs known under the last header seen.
#[derive(Debug)]
pub(crate) struct WalWatch {
    /// `None`: no `-shm` file could be opened; every caller reads in a
    /// transaction.
    shm: Option<File>,
    known: Mutex<Known>,
}

#[derive(Debug, Default)]
struct Known {
    header: Option<Header>,
    epochs: HashMap<TenantId, u64>,
}

impl WalWatch {
    /// Watches the WAL index of the board at `path` (its `-shm` file,
    /// which the writer's first transaction has created).
    pub(crate) fn open(path: &Path) -> Self {
        let mut shm = path.as_os_str().to_owned();
        shm.push("-shm");
        let shm = File::open(&shm)
            .inspect_err(|err| {
                tracing::debug!(error = %err, "no WAL index to watch; epochs are read in a transaction");
            })
            .ok();
        Self {
            shm,
            known: Mutex::default(),
        }
    }

    /// The header now, if a consistent copy could be read.
    pub(crate) fn header(&self) -> Option<Header> {
        let mut both = [0u8; 2 * HEADER];
        self.shm.as_ref()?.read_exact_at(&mut both, 0).ok()?;
        let (first, second) = both.split_at(HEADER);
        consistent(first, second)
    }

    /// `tenant`'s epoch if it was noted under the header there is now
    /// (nothing has committed since it was read); else the header read, to
    /// note the epoch the caller reads in a transaction under.
    pub(crate) fn check(&self, tenant: &TenantId) -> Check {
        let Some(now) = self.header() else {
            return Check::Unknown(None);
        };
        let known = self.known.lock().unwrap_or_else(PoisonError::into_inner);
        match known.epochs.get(tenant) {
            Some(&epoch) if known.header == Some(now) => Check::Known(epoch),
            _ => Check::Unknown(Some(now)),
        }
    }

    /// Notes `tenant`'s `epoch`, read in a transaction begun after
    /// `header` was read (see the module's note on why before).
    pub(crate) fn note(&self, header: Option<Header>, tenant: &TenantId, epoch: u64) {
        let Some(header) = header else { return };
        let mut known = self.known.lock().unwrap_or_else(PoisonError::into_inner);
        if known.header != Some(header) || known.epochs.len() >= TENANTS_MAX {
            known.header = Some(header);
            known.epochs.clear();
        }
        known.epochs.insert(tenant.clone(), epoch);
    }
}

/// The header, when both copies agree, it has been written and its
/// checksum holds (SQLite's own test before it trusts a header).
fn consistent(first: &[u8], second: &[u8]) -> Option<Header> {
    if first != second || first[IS_INIT_AT] == 0 {
        return None;
    }
    let (covered, stored) = first.split_at(CHECKSUM_AT);
    if checksum(covered) != *stored {
        return None;
    }
    first.try_into().ok()
}

/// SQLite's WAL checksum over `bytes` (a multiple of 8) in native byte
/// order, as the WAL index's header uses it.
fn checksum(bytes: &[u8]) -> [u8; 8] {
    let (mut s1, mut s2) = (0u32, 0u32);
    for pair in bytes.chunks_exact(8) {
        let word =
            |at: usize| u32::from_ne_bytes([pair[at], pair[at + 1], pair[at + 2], pair[at + 3]]);
        s1 = s1.wrapping_add(word(0)).wrapping_add(s2);
        s2 = s2.wrapping_add(word(4)).wrapping_add(s1);
    }
    let mut out = [0u8; 8];
    out[..4].copy_from_slice(&s1.to_ne_bytes());
    out[4..].copy_from_slice(&s2.to_ne_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::Connection;

    fn tenant(name: &str) -> TenantId {
        TenantId::parse(name).unwrap()
    }

    /// A WAL file with a table, written once by `conn`.
    fn board(dir: &Path) -> (Connection, std::path::PathBuf) {
        let path = dir.join("w.sqlite3");
        let conn = Connection::open(&path).unwrap();
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        conn.execute_batch("CREATE TABLE t (n INTEGER); INSERT INTO t VALUES (1);")
            .unwrap();
        (conn, path)
    }

    #[test]
    fn the_header_moves_with_every_commit_of_any_connection_and_only_then() {
        let dir = tempfile::tempdir().unwrap();
        let (conn, path) = board(dir.path());
        let watch = WalWatch::open(&path);
        let before = watch.header().expect("a written WAL index has a header");
        assert_eq!(watch.header(), Some(before), "nothing committed");
        let other = Connection::open(&path).unwrap();
        let _: i64 = other
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(watch.header(), Some(before), "a read commits nothing");
        other.execute("INSERT INTO t VALUES (2)", []).unwrap();
        let after = watch.header().unwrap();
        assert_ne!(after, before, "another connection's commit");
        conn.execute("UPDATE t SET n = n + 1", []).unwrap();
        assert_ne!(watch.header().unwrap(), after, "this connection's commit");
    }

    #[test]
    fn an_epoch_stands_until_anything_commits() {
        let dir = tempfile::tempdir().unwrap();
        let (conn, path) = board(dir.path());
        let watch = WalWatch::open(&path);
        let (a, b) = (tenant("acme"), tenant("beta"));
        let unknown = |check: Check| match check {
            Check::Unknown(header) => header,
            Check::Known(epoch) => panic!("known: {epoch}"),
        };
        let header = unknown(watch.check(&a)).expect("nothing noted yet");
        watch.note(Some(header), &a, 7);
        assert_eq!(watch.check(&a), Check::Known(7));
        assert_eq!(
            watch.check(&b),
            Check::Unknown(Some(header)),
            "only the tenant noted"
        );
        conn.execute("INSERT INTO t VALUES (3)", []).unwrap();
        let moved = unknown(watch.check(&a)).expect("a commit, whatever it wrote");
        assert_ne!(moved, header);
        // A note under a header that has moved since is never used.
        conn.execute("INSERT INTO t VALUES (4)", []).unwrap();
        watch.note(Some(moved), &a, 8);
        assert!(unknown(watch.check(&a)).is_some());
        watch.note(None, &a, 9);
        assert!(unknown(watch.check(&a)).is_some(), "no header, no note");
    }

    #[test]
    fn a_torn_unwritten_or_corrupt_header_is_not_trusted_and_no_index_means_no_watch() {
        let dir = tempfile::tempdir().unwrap();
        let (_conn, path) = board(dir.path());
        let mut shm = path.as_os_str().to_owned();
        shm.push("-shm");
        let mut both = std::fs::read(&shm).unwrap();
        both.truncate(2 * HEADER);
        let (first, second) = both.split_at(HEADER);
        assert!(consistent(first, second).is_some(), "the real header");
        let mut torn = second.to_vec();
        torn[16] ^= 1;
        assert!(consistent(first, &torn).is_none(), "copies differ");
        let mut corrupt = first.to_vec();
        corrupt[16] ^= 1;
        assert!(consistent(&corrupt, &corrupt).is_none(), "checksum");
        let zeros = [0u8; HEADER];
        assert!(consistent(&zeros, &zeros).is_none(), "never written");

        let missing = WalWatch::open(&dir.path().join("none.sqlite3"));
        assert_eq!(missing.header(), None);
        missing.note(None, &tenant("acme"), 1);
        assert_eq!(missing.check(&tenant("acme")), Check::Unknown(None));
    }
}
