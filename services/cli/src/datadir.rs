//! The data dir as every command finds it, and the one `serve` that holds it.
//!
//! Every command resolves the data dir the same way (`Settings`: flag < env <
//! file < a per-user default, made absolute). `serve` holds an exclusive
//! lock on `serve.lock` for its whole life and records its pid and URL in
//! `serve.json`: a second `serve` on the same dir is refused with both, and
//! client commands trust the record only while the lock is held, so a
//! stopped server's URL is never printed as if it answered. The kernel drops
//! the lock when the process ends, however it ends, so a crash leaves no
//! stale claim. Client commands never create a board: they need the one
//! `serve` made ([`require_board`]).

use crate::exit::{Kind, fail};
use anyhow::{Context, Result};
use corkboard_config::{Settings, StoreKind};
use serde_json::{Value, json};
use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

const LOCK_FILE: &str = "serve.lock";
const RECORD_FILE: &str = "serve.json";

/// Where `serve` records its pid and URL.
pub fn record_path(data_dir: &Path) -> PathBuf {
    data_dir.join(RECORD_FILE)
}

fn open_lock(data_dir: &Path) -> std::io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(data_dir.join(LOCK_FILE))
}

/// The running `serve` of a data dir, as it recorded itself.
#[derive(Debug, Clone)]
pub struct Holder {
    pub pid: Option<u64>,
    pub url: Option<String>,
}

impl Holder {
    fn read(data_dir: &Path) -> Self {
        let record: Value = std::fs::read(record_path(data_dir))
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or(Value::Null);
        Self {
            pid: record["pid"].as_u64(),
            url: record["url"].as_str().map(str::to_owned),
        }
    }

    fn describe(&self) -> String {
        let pid = self
            .pid
            .map_or_else(|| "unknown pid".to_owned(), |p| format!("pid {p}"));
        let url = self.url.as_deref().unwrap_or("URL not recorded yet");
        format!("{pid}, {url}")
    }
}

/// `serve`'s hold on its data dir, released when the process ends.
pub struct ServeLock {
    // Held open: closing it (or the process ending) releases the lock.
    _file: File,
    data_dir: PathBuf,
}

impl ServeLock {
    /// Takes the data dir (creating it, private) or refuses, naming the
    /// `serve` that holds it.
    pub fn acquire(data_dir: &Path) -> Result<Self> {
        corkboard_config::private_dir(data_dir)
            .with_context(|| format!("data dir: cannot create {}", data_dir.display()))?;
        let file = open_lock(data_dir).with_context(|| {
            format!(
                "data dir: cannot open {}",
                data_dir.join(LOCK_FILE).display()
            )
        })?;
        // A client command's probe ([`running_serve`]) holds a shared lock
        // for an instant: a few tries tell it from a `serve` that holds it.
        let mut tries = 0;
        let taken = loop {
            match file.try_lock() {
                Err(TryLockError::WouldBlock) if tries < 5 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                other => break other,
            }
        };
        match taken {
            Ok(()) => Ok(Self {
                _file: file,
                data_dir: data_dir.to_owned(),
            }),
            Err(TryLockError::WouldBlock) => Err(fail(
                Kind::Failure,
                format!(
                    "the data dir {} is in use by another corkboard serve ({}): stop it, \
                     or give this one another --data-dir",
                    data_dir.display(),
                    Holder::read(data_dir).describe()
                ),
            )),
            Err(TryLockError::Error(err)) => {
                Err(err).with_context(|| format!("data dir: cannot lock {}", data_dir.display()))
            }
        }
    }

    /// Records this process and the URL it serves on, for client commands
    /// and for a second `serve`'s refusal. Private like everything in the
    /// data dir (0600).
    pub fn publish(&self, url: &str) -> Result<()> {
        let record = json!({ "pid": std::process::id(), "url": url });
        corkboard_config::write_private(
            &record_path(&self.data_dir),
            serde_json::to_string(&record)?.as_bytes(),
        )
        .with_context(|| format!("cannot write {}", record_path(&self.data_dir).display()))
    }
}

/// The `serve` running on `data_dir`, if one holds it now. A record left by
/// a server that has stopped is ignored.
pub fn running_serve(data_dir: &Path) -> Option<Holder> {
    let file = OpenOptions::new()
        .read(true)
        .open(data_dir.join(LOCK_FILE))
        .ok()?;
    match file.try_lock_shared() {
        // Nobody holds it: whatever the record says has stopped.
        Ok(()) => None,
        Err(TryLockError::WouldBlock) => Some(Holder::read(data_dir)),
        Err(TryLockError::Error(_)) => None,
    }
}

/// Refuses a client command on a data dir without a board: such a command
/// would otherwise make a second, empty board (and secrets no server
/// knows), then hand out a token nobody accepts.
pub fn require_board(settings: &Settings) -> Result<()> {
    let dir = &settings.data_dir;
    let missing = match settings.store {
        StoreKind::Sqlite => {
            let board = dir.join(corkboard_store_sqlite::FILE_NAME);
            (!board.is_file()).then(|| format!("no board at {}", board.display()))
        }
        // The board is in MongoDB; the data dir holds the secrets `serve`
        // or the operator put there.
        StoreKind::Mongodb => (!dir.is_dir()).then(|| format!("no data dir at {}", dir.display())),
    };
    match missing {
        None => Ok(()),
        Some(what) => Err(fail(
            Kind::Failure,
            format!(
                "{what}: start `corkboard serve` first (it makes the board), pass the \
                 --data-dir (and --config) that serve uses, or use --server URL"
            ),
        )),
    }
}
