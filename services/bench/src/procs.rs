//! The processes a scenario starts: `corkboard` in its roles, the ceiling
//! (this binary, `ceiling` subcommand), `redis-server` and `secantusd-rs`.
//! Every process is stopped when its handle is dropped, also on errors, so
//! a failed scenario leaves nothing running.

use crate::client::{self, Headers};
use crate::error::{BenchError, Result};
use hyper::Method;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a process may take to announce its address and then to answer
/// `/readyz`. Generous: only to avoid hangs on a busy machine.
const START_DEADLINE: Duration = Duration::from_secs(60);
const STOP_DEADLINE: Duration = Duration::from_secs(20);

/// A child process that announced `listening on http://ADDR` on stdout.
#[derive(Debug)]
pub struct Process {
    name: String,
    child: Option<Child>,
    /// `http://ADDR` as announced.
    pub url: String,
    /// stdout lines after the first, as the process prints them.
    pub lines: mpsc::Receiver<String>,
    log: PathBuf,
}

impl Process {
    /// Spawns `cmd` (stderr to `log`) and waits for its announcement.
    pub fn spawn(name: &str, mut cmd: Command, log: &Path) -> Result<Self> {
        let stderr = std::fs::File::create(log)
            .map_err(BenchError::io(format!("create {}", log.display())))?;
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr));
        let mut child = cmd.spawn().map_err(|e| BenchError::Program {
            program: format!("{:?}", cmd.get_program()),
            reason: e.to_string(),
        })?;
        let (tx, rx) = mpsc::channel();
        if let Some(stdout) = child.stdout.take() {
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        let mut process = Self {
            name: name.to_owned(),
            child: Some(child),
            url: String::new(),
            lines: rx,
            log: log.to_owned(),
        };
        let first = process.lines.recv_timeout(START_DEADLINE).map_err(|_| {
            BenchError::process(
                name,
                format!(
                    "did not announce its address within {START_DEADLINE:?}; log {}:\n{}",
                    log.display(),
                    tail(log)
                ),
            )
        })?;
        process.url = first
            .strip_prefix("listening on ")
            .ok_or_else(|| BenchError::process(name, format!("unexpected first line: {first}")))?
            .trim()
            .to_owned();
        Ok(process)
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Waits until `GET /readyz` answers 200.
    pub async fn ready(&mut self) -> Result<Duration> {
        let started = Instant::now();
        let url = format!("{}/readyz", self.url);
        loop {
            if let Ok(reply) = client::once(Method::GET, &url, Headers::new(), None).await
                && reply.status.as_u16() == 200
            {
                return Ok(started.elapsed());
            }
            self.check_alive()?;
            if started.elapsed() > START_DEADLINE {
                return Err(BenchError::process(
                    &self.name,
                    format!(
                        "/readyz not 200 within {START_DEADLINE:?}; log:\n{}",
                        tail(&self.log)
                    ),
                ));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Fails if the process has exited.
    pub fn check_alive(&mut self) -> Result<()> {
        if let Some(child) = self.child.as_mut()
            && let Ok(Some(status)) = child.try_wait()
        {
            return Err(BenchError::process(
                &self.name,
                format!(
                    "exited with {status}; log {}:\n{}",
                    self.log.display(),
                    tail(&self.log)
                ),
            ));
        }
        Ok(())
    }

    /// Resident set size from `/proc/<pid>/status`, in KiB.
    pub fn rss_kib(&self) -> Result<u64> {
        let pid = self
            .pid()
            .ok_or_else(|| BenchError::process(&self.name, "not running"))?;
        rss_kib(pid)
    }

    /// The log's last lines, for error messages.
    pub fn log_tail(&self) -> String {
        tail(&self.log)
    }

    /// SIGTERM, then waits for the exit (SIGKILL after [`STOP_DEADLINE`]).
    pub fn terminate(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if let Some(pid) = rustix::process::Pid::from_raw(child.id() as i32) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
            let deadline = Instant::now() + STOP_DEADLINE;
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `VmRSS` of a process, in KiB.
pub fn rss_kib(pid: u32) -> Result<u64> {
    status_kib(pid, "VmRSS")
}

/// `VmHWM` of a process (the most it was ever resident), in KiB: catches
/// a peak shorter than any sampling period.
pub fn hwm_kib(pid: u32) -> Result<u64> {
    status_kib(pid, "VmHWM")
}

fn status_kib(pid: u32, field: &str) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(BenchError::io(format!("read /proc/{pid}/status")))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| {
            BenchError::process(format!("pid {pid}"), format!("no {field} in /proc status"))
        })
}

fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

/// Where the binaries are: `corkboard` and this program, side by side in
/// one cargo target directory.
#[derive(Debug, Clone)]
pub struct Binaries {
    pub corkboard: PathBuf,
    pub bench: PathBuf,
}

impl Binaries {
    /// `corkboard` from `explicit`, or next to this executable.
    pub fn locate(explicit: Option<PathBuf>) -> Result<Self> {
        let bench = std::env::current_exe().map_err(BenchError::io("current executable"))?;
        let corkboard = match explicit {
            Some(path) => path,
            None => bench.with_file_name("corkboard"),
        };
        if !corkboard.is_file() {
            return Err(BenchError::Program {
                program: corkboard.display().to_string(),
                reason: "not found: build it first (`cargo build --release -p corkboard-cli`, \
                         or pass --corkboard PATH)"
                    .into(),
            });
        }
        Ok(Self { corkboard, bench })
    }

    /// A `corkboard` command with no `CORKBOARD_*` from the caller's
    /// environment: a scenario configures exactly what it measures.
    pub fn corkboard(&self) -> Command {
        let mut cmd = Command::new(&self.corkboard);
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("CORKBOARD_") {
                cmd.env_remove(key);
            }
        }
        cmd
    }

    /// Starts the ceiling server on a free loopback port.
    pub async fn ceiling(&self, logs: &Path) -> Result<Process> {
        self.ceiling_answering(logs, None).await
    }

    /// [`Self::ceiling`] answering at least `answer_bytes` bytes
    /// (`crate::ceiling::body`).
    pub async fn ceiling_answering(
        &self,
        logs: &Path,
        answer_bytes: Option<usize>,
    ) -> Result<Process> {
        let mut cmd = Command::new(&self.bench);
        cmd.args(["ceiling", "--listen", "127.0.0.1:0"]);
        let name = match answer_bytes {
            Some(bytes) => {
                cmd.args(["--answer-bytes", &bytes.to_string()]);
                format!("ceiling-{bytes}")
            }
            None => "ceiling".to_owned(),
        };
        let mut process = Process::spawn(&name, cmd, &logs.join(format!("{name}.log")))?;
        process.ready().await?;
        Ok(process)
    }
}

/// Runs a test-kit starter that reports failure by panicking (a missing
/// program, a start that timed out) and turns the panic into an error.
fn start_service<T>(
    program: &str,
    start: impl FnOnce() -> T + std::panic::UnwindSafe,
) -> Result<T> {
    std::panic::catch_unwind(start).map_err(|payload| {
        let reason = payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "failed to start".to_owned());
        BenchError::Program {
            program: program.to_owned(),
            reason,
        }
    })
}

/// A `redis-server` on a free loopback port (stopped on drop).
pub fn redis() -> Result<corkboard_testkit::RedisServer> {
    start_service("redis-server", corkboard_testkit::RedisServer::start)
}

/// A `secantusd-rs` (MongoDB wire protocol) on a free loopback port, with
/// the cache mongod would take on this machine ([`mongo_cache_size`]), not
/// the tests' small one: the cost curves' large boards outgrew 256 MiB and
/// then measured the stand-in's cache misses (seeding fell from ~600 to
/// ~240 issues/s past 100,000 issues).
pub fn mongo() -> Result<corkboard_testkit::MongoServer> {
    let cache = mongo_cache_size();
    start_service("secantusd-rs", move || {
        corkboard_testkit::MongoServer::start_with_cache(&cache)
    })
}

/// mongod's default WiredTiger cache rule: half of (RAM − 1 GiB), at
/// least 256 MiB; as `--cache-size` (`<n>M`).
pub fn mongo_cache_size() -> String {
    let total_kib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find_map(|line| line.strip_prefix("MemTotal:"))
                .and_then(|rest| {
                    rest.trim()
                        .trim_end_matches("kB")
                        .trim()
                        .parse::<u64>()
                        .ok()
                })
        })
        .unwrap_or(0);
    let mib = (total_kib / 1024).saturating_sub(1024) / 2;
    format!("{}M", mib.max(256))
}

/// Writes the shared signing secrets the cluster roles require (they never
/// create them) and returns the environment that points at them.
pub fn cluster_secrets(dir: &Path) -> Result<Vec<(String, String)>> {
    let jwt = dir.join("jwt.secret");
    let session = dir.join("session.key");
    for (path, seed) in [(&jwt, 0x5au8), (&session, 0xa5u8)] {
        // Throwaway keys for a throwaway cluster; not secret.
        let hex: String = (0..32u8).map(|i| format!("{:02x}", i ^ seed)).collect();
        std::fs::write(path, hex).map_err(BenchError::io(format!("write {}", path.display())))?;
        // Secret files others may read are refused, throwaway or not.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(BenchError::io(format!("chmod {}", path.display())))?;
    }
    Ok(vec![
        (
            "CORKBOARD_JWT_SECRET_FILE".into(),
            jwt.display().to_string(),
        ),
        (
            "CORKBOARD_SESSION_KEY_FILE".into(),
            session.display().to_string(),
        ),
    ])
}
