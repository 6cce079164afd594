//! One `secantusd-rs` process: a MongoDB-wire-protocol server on the
//! WiredTiger engine (see `shared/mongo.md`), on a reserved loopback port
//! (see [`crate::ports`]) with a throwaway storage directory.

use crate::ports::ReservedPort;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::sleep;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tempfile::TempDir;

/// The server program and the version the tests are written against.
const PROGRAM: &str = "secantusd-rs";
pub const SECANTUSD_VERSION: &str = "0.5.3-beta.196";
const INSTALL_HINT: &str = "install it with `scripts/setup-test-deps` (it runs `cargo install secantus-mdb --version 0.5.3-beta.196 --locked --ignore-rust-version`)";

/// How long a starting server may take to print its address, and a
/// stopping one to checkpoint and exit. Generous: they only keep a broken
/// server from hanging the test, and the machine may be busy.
const READY_DEADLINE: Duration = Duration::from_secs(60);
const STOP_DEADLINE: Duration = Duration::from_secs(60);
/// How long [`MongoServer::restart`] keeps trying its port (the killed
/// process's sockets may hold it for a moment).
const SAME_PORT_DEADLINE: Duration = Duration::from_secs(20);
/// Reservations tried at start: a program outside the tests may bind a
/// reserved port between the check and the server's own bind.
const START_ATTEMPTS: usize = 5;

/// A `secantusd-rs` child process, killed when dropped (also when the test
/// panics); its storage directory is deleted then too.
#[derive(Debug)]
pub struct MongoServer {
    dir: TempDir,
    /// The server's port, its own across restarts.
    port: ReservedPort,
    child: Option<Child>,
    /// Starts so far: each start logs to its own file.
    starts: u32,
    /// The server's cache (`--cache-size`), kept across restarts.
    cache_size: String,
}

impl MongoServer {
    /// Starts a server on a port of its own and waits until it listens.
    ///
    /// # Panics
    /// If `secantusd-rs` is not installed, is another version, or does not
    /// start.
    pub fn start() -> Self {
        Self::start_with_cache(Self::DEFAULT_CACHE_SIZE)
    }

    /// The cache tests run with: small, so many servers fit side by side.
    pub const DEFAULT_CACHE_SIZE: &'static str = "256M";

    /// [`Self::start`] with another `--cache-size` (e.g. `"4G"`): the
    /// benchmarks' large boards outgrow the tests' cache, and then measure
    /// the stand-in's cache misses instead of the store.
    ///
    /// # Panics
    /// As [`Self::start`].
    pub fn start_with_cache(cache_size: &str) -> Self {
        require_secantusd();
        let dir = tempfile::Builder::new()
            .prefix("corkboard-mongo-")
            .tempdir()
            .unwrap_or_else(|e| panic!("cannot create a temporary directory for {PROGRAM}: {e}"));
        let mut server = Self {
            dir,
            port: ReservedPort::take(),
            child: None,
            starts: 0,
            cache_size: cache_size.to_owned(),
        };
        let mut failures = Vec::new();
        for _ in 0..START_ATTEMPTS {
            match server.spawn_ready() {
                Ok(()) => return server,
                Err(why) => failures.push(format!("port {}: {why}", server.port())),
            }
            server.port = ReservedPort::take();
        }
        panic!(
            "{PROGRAM} did not start after {START_ATTEMPTS} attempts:\n{}",
            failures.join("\n")
        );
    }

    /// `mongodb://127.0.0.1:<port>/?directConnection=true`.
    pub fn uri(&self) -> String {
        format!("mongodb://127.0.0.1:{}/?directConnection=true", self.port())
    }

    pub fn port(&self) -> u16 {
        self.port.port()
    }

    /// The WiredTiger home directory, kept across restarts.
    pub fn storage_path(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The server's process id while it runs (to pause it with SIGSTOP,
    /// say, and see what clients do with a server that does not answer).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Whether the process is alive (it may have died on its own).
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Stops the server cleanly: SIGTERM, then waits for it to checkpoint
    /// and exit (SIGKILL only if it has not after a minute).
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let signalled = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if signalled {
            let deadline = Instant::now() + STOP_DEADLINE;
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                sleep(Duration::from_millis(20));
            }
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Kills the server with SIGKILL, as a crash would: no checkpoint,
    /// clients see their connections drop mid-request.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same storage directory and port
    /// (stopping it with SIGTERM first if it still runs) and waits until it
    /// listens, so clients holding [`Self::uri`] reconnect by themselves.
    /// It never moves to another port: those clients would not follow, and
    /// whatever listened on the old one would answer them instead.
    ///
    /// # Panics
    /// If it does not come back on its port.
    pub fn restart(&mut self) {
        self.stop();
        let mut failures = Vec::new();
        let deadline = Instant::now() + SAME_PORT_DEADLINE;
        while Instant::now() < deadline {
            match self.spawn_ready() {
                Ok(()) => return,
                Err(why) => failures.push(why),
            }
            sleep(Duration::from_millis(250));
        }
        panic!(
            "{PROGRAM} did not restart on port {}:\n{}",
            self.port(),
            failures.join("\n")
        );
    }

    /// The last lines the server printed, for failure messages.
    pub fn log_tail(&self) -> String {
        tail(&self.log_path(self.starts))
    }

    fn log_path(&self, start: u32) -> PathBuf {
        self.dir.path().join(format!("secantusd.{start}.log"))
    }

    /// Spawns the server on its port and waits for its
    /// `listening on 127.0.0.1:<port>` line.
    fn spawn_ready(&mut self) -> Result<(), String> {
        let port = self.port();
        self.starts += 1;
        let log_path = self.log_path(self.starts);
        let log = File::create(&log_path)
            .map_err(|e| format!("cannot create {}: {e}", log_path.display()))?;
        let log_err = log
            .try_clone()
            .map_err(|e| format!("cannot share {}: {e}", log_path.display()))?;
        let mut child = Command::new(PROGRAM)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .arg("--storage-path")
            .arg(self.storage_path())
            .args(["--log-level", "WARNING", "--cache-size", &self.cache_size])
            // --sync-on-commit: without it the server acknowledges `j: true`
            // writes that a SIGKILL right after then loses (the store's
            // outage test shows it every time). mongod honours `j: true`;
            // with this flag the test server does too, so crash tests test
            // the store, not the server's durability gap.
            .args(["--log-file-max", "16MB", "--sync-on-commit"])
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(|e| format!("cannot spawn {PROGRAM}: {e} ({INSTALL_HINT})"))?;
        let deadline = Instant::now() + READY_DEADLINE;
        loop {
            if let Some(bound) = listening_port(&fs::read_to_string(&log_path).unwrap_or_default())
            {
                if bound != port {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(format!("{PROGRAM} listened on {bound}, not on {port}"));
                }
                self.child = Some(child);
                return Ok(());
            }
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!(
                    "{PROGRAM} exited with {status}; its output:\n{}",
                    tail(&log_path)
                ));
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{PROGRAM} did not listen within {READY_DEADLINE:?}; its output:\n{}",
                    tail(&log_path)
                ));
            }
            sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for MongoServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A database name no other test (in this process or a parallel one)
/// uses: `cbt_<name>_<pid>_<n>_<time>`, at most 63 characters of
/// `[A-Za-z0-9_]`, valid on MongoDB and on the store's own check.
pub fn unique_database(test_name: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let suffix = format!(
        "_{}_{}_{:x}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed),
        nanos & 0xffff_ffff_ffff
    );
    let room = 63 - "cbt_".len() - suffix.len();
    let name: String = test_name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .take(room)
        .collect();
    format!("cbt_{name}{suffix}")
}

/// The port of the first `listening on 127.0.0.1:<port>` line in `output`.
fn listening_port(output: &str) -> Option<u16> {
    output.lines().find_map(|line| {
        let (_, rest) = line.split_once("listening on 127.0.0.1:")?;
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    })
}

fn tail(path: &Path) -> String {
    let text = fs::read_to_string(path).unwrap_or_else(|e| format!("(no output: {e})"));
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// Panics with the install command when `secantusd-rs` is missing or is
/// not the pinned version.
fn require_secantusd() {
    let output = match Command::new(PROGRAM)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
    {
        Ok(output) => output,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            panic!("`{PROGRAM}` is not installed (not found on PATH): {INSTALL_HINT}")
        }
        Err(e) => panic!("cannot run `{PROGRAM}`: {e} ({INSTALL_HINT})"),
    };
    let version = String::from_utf8_lossy(&output.stdout);
    if !version.split_whitespace().any(|w| w == SECANTUSD_VERSION) {
        panic!(
            "`{PROGRAM} --version` says {:?}; the tests need {SECANTUSD_VERSION}: {INSTALL_HINT}",
            version.trim()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listening_line_gives_the_port() {
        assert_eq!(
            listening_port("boot\nsecantusd-rs listening on 127.0.0.1:37559\n"),
            Some(37559)
        );
        assert_eq!(listening_port("secantusd-rs listening on 127.0.0.1:"), None);
        assert_eq!(listening_port("nothing yet"), None);
    }

    #[test]
    fn database_names_are_unique_short_and_plain() {
        let long = "a test name: with {odd} characters and a great many words in it";
        let a = unique_database(long);
        let b = unique_database(long);
        assert_ne!(a, b);
        for name in [&a, &b] {
            assert!(name.len() <= 63, "{name}");
            assert!(
                name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_'),
                "{name}"
            );
            assert!(name.starts_with("cbt_a_test_name"), "{name}");
        }
    }

    #[test]
    fn a_server_starts_restarts_on_its_port_and_stops() {
        let mut server = MongoServer::start();
        assert!(server.is_running());
        let port = server.port();
        assert_ne!(port, 0);
        assert!(server.uri().ends_with("/?directConnection=true"));
        assert!(server.storage_path().join("WiredTiger").exists());
        server.restart();
        assert!(server.is_running(), "{}", server.log_tail());
        assert_eq!(
            server.port(),
            port,
            "a restart keeps the port when it is free"
        );
        server.kill();
        assert!(!server.is_running());
        server.restart();
        assert!(server.is_running(), "restarts after a crash too");
        server.stop();
        assert!(!server.is_running());
    }
}
