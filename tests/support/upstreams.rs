//! Upstream MCP servers nobody here wrote, started for black-box tests
//! (`@modelcontextprotocol/server-everything`, a Python SDK server), and a
//! `corkboard serve` whose logs are kept for credential checks.

use super::*;
use std::io::{BufRead, BufReader};
use std::net::TcpStream;
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

pub fn wait_for_port(port: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "{what} did not listen on {port} within 30 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
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

pub fn start_everything(port: u16) -> Proc {
    let child = Command::new("node")
        .arg(everything_script())
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start server-everything");
    wait_for_port(port, "server-everything");
    Proc(child)
}

pub fn start_python_upstream(port: u16) -> Proc {
    start_python_upstream_with(port, &[])
}

/// The Python upstream with extra environment (`UPSTREAM_LEGACY_ONLY=1`:
/// 2025 sessions only).
pub fn start_python_upstream_with(port: u16, env: &[(&str, &str)]) -> Proc {
    let root = repo_root();
    let child = Command::new(root.join("target/venv/bin/python"))
        .arg(root.join("tests/clients/upstream/py_server.py"))
        .arg(port.to_string())
        .envs(env.iter().copied())
        .env("UPSTREAM_HEADER", "X-Upstream-Key")
        .env("UPSTREAM_CREDENTIAL", PY_CREDENTIAL)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the Python upstream");
    wait_for_port(port, "the Python upstream");
    Proc(child)
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
