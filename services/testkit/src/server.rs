//! One `redis-server` process on a reserved loopback port (see
//! [`crate::ports`]), optionally also speaking TLS (with a throwaway CA
//! made by the `openssl` CLI).

use crate::ports::ReservedPort;
use crate::resp::{self, Reply};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};
use tempfile::TempDir;

pub(crate) const INSTALL_HINT: &str =
    "install with apt-get install redis-server; scripts/test does this";

/// How long a starting server may take to answer. Generous: it only keeps a
/// broken start from hanging the test, and the machine may be busy.
const READY_DEADLINE: Duration = Duration::from_secs(30);
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// Attempts at starting on reserved ports: a program outside the tests can
/// take a port between our probe and `redis-server` binding it.
const START_ATTEMPTS: usize = 10;

/// A `redis-server` child process, killed on drop.
///
/// Started with persistence off (`--save "" --appendonly no`) in its own
/// temporary directory. A test that wants data to survive [`Self::restart`]
/// sends `SAVE` first through [`Self::command`]: the dump file stays in the
/// directory and the restarted server loads it.
#[derive(Debug)]
pub struct RedisServer {
    /// The ports are the server's own across restarts.
    port: ReservedPort,
    cluster_port: Option<ReservedPort>,
    dir: TempDir,
    child: Option<Child>,
    /// The TLS port, when started with [`Self::start_tls`].
    tls_port: Option<ReservedPort>,
}

/// Files of [`RedisServer::start_tls`]'s throwaway PKI, in its directory.
pub const TLS_CA_FILE: &str = "ca.crt";
pub const TLS_CLIENT_CERT_FILE: &str = "client.crt";
pub const TLS_CLIENT_KEY_FILE: &str = "client.key";

impl RedisServer {
    /// Starts a standalone server and waits until it answers.
    ///
    /// # Panics
    /// If `redis-server` is not installed or does not start.
    pub fn start() -> Self {
        Self::start_node(false, false)
    }

    /// Starts a standalone server that also listens with TLS
    /// ([`Self::tls_url`]) and requires a client certificate, both
    /// certificates issued by a CA made for it ([`Self::tls_file`]:
    /// [`TLS_CA_FILE`], [`TLS_CLIENT_CERT_FILE`], [`TLS_CLIENT_KEY_FILE`]).
    /// The plain port stays open on loopback for [`Self::command`].
    ///
    /// # Panics
    /// If `redis-server` or `openssl` is missing, or the server was built
    /// without TLS.
    pub fn start_tls() -> Self {
        Self::start_node(false, true)
    }

    /// `rediss://localhost:<tls port>/` (the server certificate names
    /// `localhost` and `127.0.0.1`).
    ///
    /// # Panics
    /// If the server was not started with [`Self::start_tls`].
    pub fn tls_url(&self) -> String {
        let port = self
            .tls_port
            .as_ref()
            .map(ReservedPort::port)
            .unwrap_or_else(|| panic!("this redis-server was not started with TLS"));
        format!("rediss://localhost:{port}/")
    }

    /// A file of the TLS server's PKI (one of the `TLS_*_FILE` names).
    pub fn tls_file(&self, name: &str) -> std::path::PathBuf {
        self.dir.path().join(name)
    }

    /// Starts a server with `--cluster-enabled yes` (not yet part of a
    /// cluster; [`crate::RedisCluster`] joins the nodes).
    pub(crate) fn start_cluster_node() -> Self {
        Self::start_node(true, false)
    }

    fn start_node(cluster: bool, tls: bool) -> Self {
        require_program("redis-server", INSTALL_HINT);
        let dir = tempfile::Builder::new()
            .prefix("corkboard-redis-")
            .tempdir()
            .unwrap_or_else(|e| {
                panic!("cannot create a temporary directory for redis-server: {e}")
            });
        if tls {
            make_pki(dir.path());
        }
        let mut failures = Vec::new();
        for _ in 0..START_ATTEMPTS {
            let port = ReservedPort::take();
            let cluster_port = cluster.then(ReservedPort::take);
            let tls_port = tls.then(ReservedPort::take);
            match spawn_ready(
                dir.path(),
                port.port(),
                cluster_port.as_ref().map(ReservedPort::port),
                tls_port.as_ref().map(ReservedPort::port),
            ) {
                Ok(child) => {
                    return Self {
                        port,
                        cluster_port,
                        dir,
                        child: Some(child),
                        tls_port,
                    };
                }
                Err(why) => failures.push(format!("port {}: {why}", port.port())),
            }
        }
        panic!(
            "redis-server did not start after {START_ATTEMPTS} attempts:\n{}",
            failures.join("\n")
        );
    }

    /// `redis://127.0.0.1:<port>/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port())
    }

    pub fn port(&self) -> u16 {
        self.port.port()
    }

    /// The server's working directory (dump file, `nodes.conf`, log).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Whether the process is alive (it may have died on its own).
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Kills the server (SIGKILL: no shutdown save, clients see the
    /// connection drop as in a crash) and waits for it to be gone.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SIGKILL works on a stopped process too; no need to resume.
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port and directory (stopping it
    /// first if it still runs), and waits until it answers.
    ///
    /// # Panics
    /// If it does not come back, e.g. because another process took the port.
    pub fn restart(&mut self) {
        self.stop();
        let mut failures = Vec::new();
        let deadline = Instant::now() + READY_DEADLINE;
        while Instant::now() < deadline {
            match spawn_ready(
                self.dir.path(),
                self.port(),
                self.cluster_port.as_ref().map(ReservedPort::port),
                self.tls_port.as_ref().map(ReservedPort::port),
            ) {
                Ok(child) => {
                    self.child = Some(child);
                    return;
                }
                Err(why) => failures.push(why),
            }
            sleep(Duration::from_millis(200));
        }
        panic!(
            "redis-server did not restart on port {}:\n{}",
            self.port(),
            failures.join("\n")
        );
    }

    /// Freezes the server (SIGSTOP): connections stay open and nothing is
    /// answered, as with a hung Redis or a network black hole.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Thaws a [`Self::pause`]d server (SIGCONT).
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let Some(child) = self.child.as_ref() else {
            panic!("redis-server on port {} is not running", self.port());
        };
        let status = Command::new("kill")
            .arg(signal)
            .arg(child.id().to_string())
            .status()
            .unwrap_or_else(|e| panic!("cannot run `kill {signal}`: {e}"));
        assert!(status.success(), "`kill {signal}` failed with {status}");
    }

    /// Sends one command on a fresh connection (e.g. `["SAVE"]`).
    pub fn command(&self, args: &[&str]) -> std::io::Result<Reply> {
        resp::command(self.port(), args, PROBE_TIMEOUT)
    }

    /// The log file's last lines, for failure messages.
    pub fn log_tail(&self) -> String {
        log_tail(self.dir.path())
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}

pub(crate) fn require_program(program: &str, hint: &str) {
    match Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            panic!("`{program}` is not installed (not found on PATH): {hint}")
        }
        Err(e) => panic!("cannot run `{program}`: {e} ({hint})"),
    }
}

/// Spawns `redis-server` and waits until *this* process answers on `port`
/// (checked by pid, so a server of a parallel test that happens to hold the
/// port is never mistaken for ours).
fn spawn_ready(
    dir: &Path,
    port: u16,
    cluster_port: Option<u16>,
    tls_port: Option<u16>,
) -> Result<Child, String> {
    let mut command = Command::new("redis-server");
    command
        .arg("--port")
        .arg(port.to_string())
        .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .args(["--daemonize", "no", "--loglevel", "notice"])
        .arg("--dir")
        .arg(dir)
        .arg("--logfile")
        .arg(dir.join("redis.log"));
    if let Some(cluster_port) = cluster_port {
        command
            .args([
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
            ])
            .args(["--cluster-node-timeout", "2000"])
            .arg("--cluster-port")
            .arg(cluster_port.to_string());
    }
    if let Some(tls_port) = tls_port {
        command
            .arg("--tls-port")
            .arg(tls_port.to_string())
            .arg("--tls-cert-file")
            .arg(dir.join("server.crt"))
            .arg("--tls-key-file")
            .arg(dir.join("server.key"))
            .arg("--tls-ca-cert-file")
            .arg(dir.join(TLS_CA_FILE))
            .args(["--tls-auth-clients", "yes"]);
    }
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot spawn redis-server: {e} ({INSTALL_HINT})"))?;
    let pid = child.id().to_string();
    let deadline = Instant::now() + READY_DEADLINE;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!(
                "redis-server exited with {status}; log:\n{}",
                log_tail(dir)
            ));
        }
        if let Ok(reply) = resp::command(port, &["INFO", "server"], PROBE_TIMEOUT)
            && let Some(info) = reply.as_text()
        {
            if info_field(&info, "process_id") == Some(pid.as_str()) {
                return Ok(child);
            }
            let _ = child.kill();
            let _ = child.wait();
            return Err("the port is held by another redis-server".into());
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "redis-server did not answer within {READY_DEADLINE:?}; log:\n{}",
                log_tail(dir)
            ));
        }
        sleep(Duration::from_millis(20));
    }
}

/// `field:value` lines of an `INFO` reply.
pub(crate) fn info_field<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines().find_map(|line| {
        line.strip_prefix(field)
            .and_then(|rest| rest.strip_prefix(':'))
            .map(str::trim)
    })
}

fn log_tail(dir: &Path) -> String {
    let log = std::fs::read_to_string(dir.join("redis.log")).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

/// A throwaway CA (EC P-256, one day) and, issued by it, a server
/// certificate for `localhost`/`127.0.0.1` and a client certificate, in
/// `dir` (private keys 0600, as the binary requires of secret files).
fn make_pki(dir: &Path) {
    require_program("openssl", "install with apt-get install openssl");
    let openssl = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run openssl: {e}"));
        assert!(
            out.status.success(),
            "openssl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let mut ca = vec![
        "req",
        "-x509",
        "-days",
        "1",
        "-subj",
        "/CN=corkboard test CA",
    ];
    ca.extend(ec);
    ca.extend([
        "-keyout",
        "ca.key",
        "-out",
        TLS_CA_FILE,
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
    ]);
    openssl(&ca);
    for (name, subject, ext) in [
        (
            "server",
            "/CN=localhost",
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n",
        ),
        (
            "client",
            "/CN=corkboard",
            "extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n",
        ),
    ] {
        let (key, csr, crt, extfile) = (
            format!("{name}.key"),
            format!("{name}.csr"),
            format!("{name}.crt"),
            format!("{name}.ext"),
        );
        std::fs::write(dir.join(&extfile), ext)
            .unwrap_or_else(|e| panic!("cannot write {extfile}: {e}"));
        let mut req = vec!["req", "-subj", subject];
        req.extend(ec);
        req.extend(["-keyout", key.as_str(), "-out", csr.as_str()]);
        openssl(&req);
        openssl(&[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            TLS_CA_FILE,
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "1",
            "-out",
            &crt,
            "-extfile",
            &extfile,
        ]);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir.join(&key), std::fs::Permissions::from_mode(0o600))
                .unwrap_or_else(|e| panic!("cannot chmod {key}: {e}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_fields_are_found_by_exact_name() {
        let info = "# Server\r\nprocess_id:42\r\nprocess_supervised:no\r\n";
        assert_eq!(info_field(info, "process_id"), Some("42"));
        assert_eq!(info_field(info, "process"), None);
        assert_eq!(info_field(info, "missing"), None);
    }

    #[test]
    #[should_panic(expected = "is not installed (not found on PATH): install with apt-get")]
    fn a_missing_program_fails_with_the_install_hint() {
        require_program("corkboard-no-such-redis-server", INSTALL_HINT);
    }
}
