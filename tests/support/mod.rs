//! Black-box test support: spawn the real `corkboard` binary on port 0 with
//! its own data dir, and drive it with the CLI, HTTP and real MCP clients.
#![allow(dead_code)]

pub mod upstreams;

pub use corkboard_testkit::mcp;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The binary under test (built by cargo for this test target).
pub fn corkboard_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_corkboard"))
}

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repo root")
}

/// A `corkboard` command with a clean environment: no CORKBOARD_* from the
/// developer's shell leaks into a test.
pub fn corkboard() -> Command {
    let mut cmd = Command::new(corkboard_bin());
    for (key, _) in std::env::vars() {
        if key.starts_with("CORKBOARD_") {
            cmd.env_remove(key);
        }
    }
    cmd.env("CORKBOARD_LOG", "info");
    // The default data dir is per user: a test that names none gets one
    // of its own (each test runs in its own process), never the
    // developer's board.
    cmd.env("XDG_DATA_HOME", test_data_home());
    cmd
}

/// This test process's `XDG_DATA_HOME`, so the per-user default data dir.
pub fn test_data_home() -> &'static Path {
    static HOME: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    HOME.get_or_init(|| tempfile::tempdir().expect("temp dir"))
        .path()
}

/// Runs a command to completion, returning its output (never panics on exit status).
pub fn run(cmd: &mut Command) -> Output {
    cmd.output().expect("spawn command")
}

pub fn stdout_of(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr_of(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A running process killed on drop, with the first stdout line that
/// announced its address.
pub struct Running {
    pub child: Child,
    pub url: String,
    /// Every stdout line after the first, as the process prints them.
    pub lines: mpsc::Receiver<String>,
}

impl Running {
    /// Spawns `cmd` and waits (up to 30 s) for `listening on <url>` on stdout.
    pub fn spawn(mut cmd: Command) -> Running {
        cmd.stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .stdin(Stdio::null());
        let mut child = cmd.spawn().expect("spawn corkboard");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let first = rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("corkboard did not announce its address within 30 s"));
        let url = first
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line: {first}"))
            .to_owned();
        Running {
            child,
            url,
            lines: rx,
        }
    }

    /// Sends SIGTERM and waits for the exit status.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let status =
            wait_timeout(&mut self.child, Duration::from_secs(20)).expect("exit after SIGTERM");
        std::mem::forget(self);
        status
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn wait_timeout(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if std::time::Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `corkboard serve` on port 0 with a private data dir.
pub struct Serve {
    pub process: Running,
    pub data_dir: tempfile::TempDir,
    /// Configuration given to the server, also given to CLI commands run
    /// against it (so they open the same store).
    pub env: Vec<(String, String)>,
}

/// What `grant create --json` printed.
#[derive(Debug, Clone)]
pub struct Granted {
    pub grant_id: String,
    pub token: String,
    pub mcp_url: String,
    pub json: Value,
}

impl Serve {
    pub fn start() -> Serve {
        Self::start_with(|_| {})
    }

    pub fn start_with(configure: impl FnOnce(&mut Command)) -> Serve {
        Self::start_full(&[], configure)
    }

    /// Starts with configuration environment shared with later CLI calls.
    pub fn start_with_env(env: &[(&str, &str)]) -> Serve {
        Self::start_full(env, |_| {})
    }

    fn start_full(env: &[(&str, &str)], configure: impl FnOnce(&mut Command)) -> Serve {
        let data_dir = tempfile::tempdir().expect("temp dir");
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut cmd = corkboard();
        cmd.args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(data_dir.path());
        cmd.envs(env.iter().cloned());
        configure(&mut cmd);
        let process = Running::spawn(cmd);
        Serve {
            process,
            data_dir,
            env,
        }
    }

    pub fn url(&self) -> &str {
        &self.process.url
    }

    /// Runs a CLI command against this instance's data dir.
    pub fn cli(&self, args: &[&str]) -> Output {
        let mut cmd = corkboard();
        cmd.args(args).arg("--data-dir").arg(self.data_dir.path());
        cmd.envs(self.env.iter().cloned());
        run(&mut cmd)
    }

    pub fn grant(&self, tenant: &str, run_id: &str, caps: &str) -> Granted {
        let out = self.cli(&[
            "grant", "create", "--tenant", tenant, "--run", run_id, "--caps", caps, "--json",
        ]);
        assert!(
            out.status.success(),
            "grant create failed: {}",
            stderr_of(&out)
        );
        parse_granted(&stdout_of(&out))
    }

    pub fn admin_token(&self, role: &str, tenant: Option<&str>) -> String {
        let mut args = vec!["admin", "token", "--role", role];
        if let Some(t) = tenant {
            args.extend(["--tenant", t]);
        }
        let out = self.cli(&args);
        assert!(
            out.status.success(),
            "admin token failed: {}",
            stderr_of(&out)
        );
        stdout_of(&out).trim().to_owned()
    }
}

pub fn parse_granted(stdout: &str) -> Granted {
    let json: Value =
        serde_json::from_str(stdout).unwrap_or_else(|e| panic!("grant JSON: {e}: {stdout}"));
    Granted {
        grant_id: json["grant"]["id"].as_str().expect("grant id").to_owned(),
        token: json["token"].as_str().expect("token").to_owned(),
        mcp_url: json["mcp_url"].as_str().expect("mcp_url").to_owned(),
        json,
    }
}

/// A blocking HTTP client for tests.
pub fn http() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("http client")
}

/// Runs a Node script from `tests/clients/` (installed by scripts/test).
pub fn node(script: &str, args: &[&str]) -> Output {
    let dir = repo_root().join("tests/clients");
    assert!(
        dir.join("node_modules").is_dir(),
        "tests/clients/node_modules is missing: run scripts/setup-test-deps (npm ci)"
    );
    run(Command::new("node")
        .current_dir(&dir)
        .arg(script)
        .args(args))
}

/// Runs a Python script from `tests/clients/` in the test venv.
pub fn python(script: &str, args: &[&str]) -> Output {
    let root = repo_root();
    let py = root.join("target/venv/bin/python");
    assert!(
        py.exists(),
        "target/venv is missing: run scripts/setup-test-deps"
    );
    run(Command::new(py)
        .current_dir(root.join("tests/clients"))
        .arg(script)
        .args(args))
}

/// One stateless (2026-07-28) MCP `tools/call`: returns the HTTP status and
/// the JSON body (Null when there is none).
pub fn mcp_call(url: &str, token: &str, tool: &str, arguments: Value) -> (u16, Value) {
    let body = mcp::modern_tools_call(1, tool, arguments);
    mcp_post(url, token, "tools/call", Some(tool), &body)
}

/// One stateless `tools/list`.
pub fn mcp_list(url: &str, token: &str) -> (u16, Value) {
    mcp_post(url, token, "tools/list", None, &mcp::modern_tools_list(1))
}

/// One stateless (2026-07-28) POST of `body`, whose method (and tool) the
/// headers mirror.
pub fn mcp_post(
    url: &str,
    token: &str,
    method: &str,
    name: Option<&str>,
    body: &Value,
) -> (u16, Value) {
    let mut request = http()
        .post(url)
        .header("Content-Type", "application/json")
        .bearer_auth(token)
        .body(body.to_string());
    for (header, value) in mcp::modern_headers(method, name) {
        request = request.header(header, value);
    }
    let response = request.send().expect("MCP request");
    let status = response.status().as_u16();
    let text = response.text().unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// Writes the shared secrets a cluster role needs; returns the env to pass.
pub fn cluster_secrets(dir: &Path) -> Vec<(String, String)> {
    let jwt = dir.join("jwt.secret");
    let session = dir.join("session.key");
    std::fs::write(
        &jwt,
        "6a77742073656372657420666f72207465737473206f6e6c79203132333435363738",
    )
    .unwrap();
    std::fs::write(
        &session,
        "73657373696f6e206b657920666f72207465737473206f6e6c792031323334353637",
    )
    .unwrap();
    // Secret files others may read are refused: private like real ones.
    use std::os::unix::fs::PermissionsExt;
    for path in [&jwt, &session] {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    vec![
        (
            "CORKBOARD_JWT_SECRET_FILE".into(),
            jwt.display().to_string(),
        ),
        (
            "CORKBOARD_SESSION_KEY_FILE".into(),
            session.display().to_string(),
        ),
    ]
}

/// Mints an admin JWT with the given env (signing secret).
pub fn admin_token_with(env: &[(String, String)], role: &str, tenant: Option<&str>) -> String {
    let mut cmd = corkboard();
    cmd.args(["admin", "token", "--role", role]);
    if let Some(t) = tenant {
        cmd.args(["--tenant", t]);
    }
    cmd.envs(env.iter().cloned());
    let out = run(&mut cmd);
    assert!(out.status.success(), "admin token: {}", stderr_of(&out));
    stdout_of(&out).trim().to_owned()
}

/// The key of the first of a held call's `inputRequests` (a 2026-07-28
/// `input_required` answer), which the agent's answer must name.
pub fn first_input_request(answer: &Value) -> String {
    answer["result"]["inputRequests"]
        .as_object()
        .and_then(|requests| requests.keys().next())
        .unwrap_or_else(|| panic!("no inputRequests in {answer}"))
        .clone()
}
