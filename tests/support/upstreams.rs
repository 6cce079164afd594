//! Upstream MCP servers nobody here wrote, started for black-box tests
//! (`@modelcontextprotocol/server-everything`, a Python SDK server), and a
//! `corkboard serve` whose logs are kept for credential checks.

use super::*;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The Python upstream's credential (its header is `X-Upstream-Key`).
pub const PY_CREDENTIAL: &str = "py-upstream-credential-7f3a9c";

/// A child process killed on drop.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// An upstream server process, killed on drop, and the loopback port it
/// listens on.
pub struct Upstream {
    pub process: Proc,
    pub port: u16,
}

/// Starts `command(port)` on a port that was free a moment ago, and
/// returns once *that process* listens on it. Between [`free_port`] and the
/// child's bind a parallel test (or an outgoing connection) may take the
/// port: the child then exits, and another port is tried. Checking the
/// listener's owner by pid means another process holding the port is never
/// mistaken for ours.
fn start_on_a_free_port(what: &str, command: impl Fn(u16) -> Command) -> Upstream {
    let mut last = String::new();
    for _ in 0..5 {
        let port = free_port();
        match start_listening(what, command(port), port) {
            Ok(upstream) => return upstream,
            Err(reason) => last = reason,
        }
    }
    panic!("{what} could not listen on a free port: {last}")
}

/// Spawns `command` and waits until the child itself listens on `port`;
/// an error when it exits first (the port was taken).
fn start_listening(what: &str, mut command: Command, port: u16) -> Result<Upstream, String> {
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("start {what}: {e}"));
    let mut process = Proc(child);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(Some(status)) = process.0.try_wait() {
            return Err(format!(
                "{what} exited with {status} before listening on {port}"
            ));
        }
        if listens_on(process.0.id(), port) {
            return Ok(Upstream { process, port });
        }
        assert!(
            Instant::now() < deadline,
            "{what} did not listen on {port} within 30 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether process `pid` holds a listening TCP socket (IPv4 or IPv6) on
/// `port`: the socket's inode in /proc/net/tcp{,6} is one of its fds.
fn listens_on(pid: u32, port: u16) -> bool {
    const LISTEN: &str = "0A";
    let wanted = format!(":{port:04X}");
    let inodes: Vec<String> = ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(table).ok())
        .flat_map(|table| {
            table
                .lines()
                .skip(1)
                .filter_map(|line| {
                    let fields: Vec<&str> = line.split_whitespace().collect();
                    let local = *fields.get(1)?;
                    let inode = *fields.get(9)?;
                    (local.ends_with(&wanted) && fields.get(3) == Some(&LISTEN))
                        .then(|| format!("socket:[{inode}]"))
                })
                .collect::<Vec<_>>()
        })
        .collect();
    if inodes.is_empty() {
        return false;
    }
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.filter_map(Result::ok)
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .any(|target| {
            inodes
                .iter()
                .any(|inode| target.as_os_str() == inode.as_str())
        })
}

/// `server-everything`'s entry point: in tests/clients/node_modules (added
/// to tests/clients/package.json), or where
/// `CORKBOARD_TEST_SERVER_EVERYTHING` says.
pub fn everything_script() -> PathBuf {
    let path = std::env::var_os("CORKBOARD_TEST_SERVER_EVERYTHING")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            repo_root().join(
                "tests/clients/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
            )
        });
    assert!(
        path.exists(),
        "{} is missing: run npm ci in tests/clients",
        path.display()
    );
    path
}

fn everything_command(port: u16) -> Command {
    let mut command = Command::new("node");
    command
        .arg(everything_script())
        .arg("streamableHttp")
        .env("PORT", port.to_string());
    command
}

/// `server-everything` (Streamable HTTP) on a free loopback port.
pub fn start_everything() -> Upstream {
    start_on_a_free_port("server-everything", everything_command)
}

/// `server-everything` on `port` again (a restart on the port its
/// registration names).
pub fn start_everything_on(port: u16) -> Upstream {
    start_listening("server-everything", everything_command(port), port)
        .unwrap_or_else(|reason| panic!("{reason}"))
}

/// The Python SDK upstream on a free loopback port.
pub fn start_python_upstream() -> Upstream {
    start_python_upstream_with(&[])
}

/// The Python upstream with extra environment (`UPSTREAM_LEGACY_ONLY=1`:
/// 2025 sessions only).
pub fn start_python_upstream_with(env: &[(&str, &str)]) -> Upstream {
    let root = repo_root();
    start_on_a_free_port("the Python upstream", |port| {
        let mut command = Command::new(root.join("target/venv/bin/python"));
        command
            .arg(root.join("tests/clients/upstream/py_server.py"))
            .arg(port.to_string())
            .envs(env.iter().copied())
            .env("UPSTREAM_HEADER", "X-Upstream-Key")
            .env("UPSTREAM_CREDENTIAL", PY_CREDENTIAL);
        command
    })
}

/// `corkboard serve` with its logs (stderr) captured in a file.
pub struct Served {
    pub _process: Proc,
    pub url: String,
    pub data_dir: tempfile::TempDir,
    pub log: PathBuf,
}

pub fn serve() -> Served {
    serve_with(&[])
}

/// [`serve`] with extra environment (`CORKBOARD_*` settings).
pub fn serve_with(env: &[(&str, &str)]) -> Served {
    let data_dir = tempfile::tempdir().unwrap();
    let log = data_dir.path().join("serve.log");
    let mut child = corkboard()
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data_dir.path().join("data"))
        .env("RUST_LOG", "debug")
        // The test upstreams listen on loopback, which the egress policy
        // refuses unless the operator opens it.
        .env("CORKBOARD_EGRESS_ALLOW", "127.0.0.1")
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn corkboard serve");
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let url = first
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line: {first}"))
        .to_owned();
    Served {
        _process: Proc(child),
        url,
        data_dir,
        log,
    }
}

impl Served {
    pub fn cli(&self, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
        let mut cmd = corkboard();
        cmd.args(args);
        cmd.envs(env.iter().copied());
        run(&mut cmd)
    }

    pub fn admin_token(&self) -> String {
        self.admin_token_as("platform-admin", None)
    }

    /// Registers run `run` of tenant acme with `capabilities` through the
    /// admin API (panics unless 201): its MCP URL and token.
    pub fn register_run(&self, admin: &str, run: &str, capabilities: &[&str]) -> (String, String) {
        let response = http()
            .post(format!("{}/v1/runs", self.url))
            .bearer_auth(admin)
            .json(&serde_json::json!({
                "tenant": "acme",
                "run": run,
                "capabilities": capabilities,
            }))
            .send()
            .expect("POST /v1/runs");
        let status = response.status().as_u16();
        let body: serde_json::Value = response.json().expect("the run's JSON");
        assert_eq!(status, 201, "{body}");
        (
            body["mcp_url"].as_str().unwrap().to_owned(),
            body["token"].as_str().unwrap().to_owned(),
        )
    }

    /// An admin JWT of `role`, scoped to `tenant` when given.
    pub fn admin_token_as(&self, role: &str, tenant: Option<&str>) -> String {
        let data = self.data_dir.path().join("data");
        let mut args = vec!["admin", "token", "--role", role];
        if let Some(tenant) = tenant {
            args.extend(["--tenant", tenant]);
        }
        args.extend(["--data-dir", data.to_str().unwrap()]);
        let out = self.cli(&args, &[]);
        assert!(out.status.success(), "{}", stderr_of(&out));
        stdout_of(&out).trim().to_owned()
    }
}

/// Registers the Python upstream listening on `port` as upstream `name` of
/// `tenant` at the server `server` (with its credential), through the
/// admin API; panics unless the server answers 200.
pub fn register_python_upstream(server: &str, admin: &str, tenant: &str, name: &str, port: u16) {
    let response = http()
        .put(format!("{server}/v1/tenants/{tenant}/upstreams/{name}"))
        .bearer_auth(admin)
        .json(&serde_json::json!({
            "url": format!("http://127.0.0.1:{port}/mcp"),
            "header": "X-Upstream-Key",
            "credential": PY_CREDENTIAL,
            "trust_first_listing": true,
        }))
        .send()
        .expect("PUT the upstream");
    assert_eq!(response.status().as_u16(), 200, "{tenant}/{name}");
}

/// An official SDK client as an agent of a run's gateway
/// (`clients/upstream/agent.mjs` for `kind` "ts", the TypeScript SDK;
/// `agent.py` otherwise, the Python SDK, 2026-07-28): lists the run's
/// tools, then makes `calls` in order; its JSON report (`tools`, and per
/// call `isError`, `text`, `structured`, `content`, or `error`).
pub fn sdk_agent(
    kind: &str,
    url: &str,
    token: &str,
    calls: &[(&str, serde_json::Value)],
) -> serde_json::Value {
    let specs: Vec<String> = calls.iter().map(|(n, a)| format!("{n}={a}")).collect();
    let mut args = vec![url, token];
    args.extend(specs.iter().map(String::as_str));
    let out = match kind {
        "ts" => node("upstream/agent.mjs", &args),
        _ => python("upstream/agent.py", &args),
    };
    let stdout = stdout_of(&out);
    assert!(
        out.status.success(),
        "{kind} agent failed: {}\n{stdout}",
        stderr_of(&out)
    );
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{kind} agent output: {e}: {stdout}"))
}

/// A port another process holds is never taken for the upstream's: the
/// upstream exits (address in use) and the start reports it.
#[test]
fn an_upstream_whose_port_another_process_holds_is_not_taken_for_listening() {
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = held.local_addr().unwrap().port();
    let outcome = start_listening("server-everything", everything_command(port), port);
    let reason = outcome.err().expect("the start fails");
    assert!(reason.contains("exited"), "{reason}");
    assert!(!listens_on(std::process::id(), free_port()));
    assert!(listens_on(std::process::id(), port));
}
