//! The real MCP client SDKs (tests/clients: TypeScript SDK v1, TypeScript
//! client v2, Python SDK 2.x) against `BoardTools` served by the real
//! Streamable HTTP endpoint of `corkboard-mcp`, on the SQLite store.
//!
//! Needs `node` with `tests/clients/node_modules` (`npm ci` there) and the
//! Python venv at `target/venv` (see tests/clients/README.md); the tests fail
//! with the setup command when either is missing.

use anyhow::{Context, Result, bail, ensure};
use corkboard_board::MemoryAuditSink;
use corkboard_board::{AuditOutcome, Capabilities, Grant, GrantId, RunId, TenantId, Timestamp};
use corkboard_grants::{MemoryRegistry, RunToken, TokenRegistry};
use corkboard_mcp::{McpEndpoint, McpSettings, SessionKey};
use corkboard_store_sqlite::SqliteStore;
use corkboard_tools::BoardTools;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn clients_dir() -> PathBuf {
    repo_root().join("tests/clients")
}

/// A served board on a free loopback port, stopped on drop.
struct Served {
    url: String,
    registry: Arc<MemoryRegistry>,
    audit: Arc<MemoryAuditSink>,
    handle: actix_web::dev::ServerHandle,
    thread: Option<std::thread::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl Served {
    fn start() -> Result<Self> {
        let dir = tempfile::tempdir()?;
        let store = SqliteStore::open(&dir.path().join("board.sqlite3"))?;
        let registry = Arc::new(MemoryRegistry::new());
        let audit = Arc::new(MemoryAuditSink::new());
        let tools = Arc::new(BoardTools::new(
            Arc::new(store),
            registry.clone(),
            audit.clone(),
        ));
        let endpoint = McpEndpoint::new(tools, McpSettings::new(SessionKey::generate()));
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        let url = format!("http://{}/mcp", listener.local_addr()?);
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let system = actix_rt::System::new();
            let result = system.block_on(async move {
                let server = actix_web::HttpServer::new(move || {
                    let endpoint = endpoint.clone();
                    actix_web::App::new().configure(move |cfg| endpoint.configure(cfg))
                })
                .workers(1)
                .disable_signals()
                .listen(listener)?
                .run();
                let _ = tx.send(server.handle());
                server.await
            });
            if let Err(err) = result {
                eprintln!("test server failed: {err}");
            }
        });
        let handle = rx
            .recv_timeout(Duration::from_secs(30))
            .context("the test server did not start")?;
        Ok(Self {
            url,
            registry,
            audit,
            handle,
            thread: Some(thread),
            _dir: dir,
        })
    }

    fn token(&self, tenant: &str, run: &str, caps: &str) -> Result<RunToken> {
        let now = Timestamp::now();
        let grant = Grant {
            id: GrantId::generate(),
            tenant: TenantId::parse(tenant)?,
            run: RunId::parse(run)?,
            capabilities: Capabilities::parse_csv(caps)?,
            created_at: now,
            expires_at: now.plus_millis(3_600_000),
            created_by: "interop-test".to_owned(),
            budgets: Default::default(),
            min_integrity: None,
        };
        let token = RunToken::generate();
        tokio::runtime::Builder::new_current_thread()
            .build()?
            .block_on(self.registry.register(&grant, &token.hash()))?;
        Ok(token)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let stop = self.handle.stop(false);
        if let Ok(rt) = tokio::runtime::Builder::new_current_thread().build() {
            rt.block_on(stop);
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Which client program runs a script, checked up front so a missing
/// setup fails with the command that fixes it.
fn program_for(script: &str) -> Result<(PathBuf, Vec<String>)> {
    let path = clients_dir().join(script);
    if script.ends_with(".py") {
        let python = repo_root().join("target/venv/bin/python");
        ensure!(
            python.exists(),
            "the Python client venv is missing: run `python3 -m venv target/venv && \
             target/venv/bin/pip install -r tests/clients/requirements.txt` in the repository root"
        );
        return Ok((python, vec![path.display().to_string()]));
    }
    ensure!(
        clients_dir()
            .join("node_modules/@modelcontextprotocol")
            .exists(),
        "the Node clients are not installed: run `npm ci` in tests/clients"
    );
    let status = Command::new("node")
        .arg("--version")
        .stdout(Stdio::null())
        .status();
    ensure!(
        status.is_ok_and(|s| s.success()),
        "`node` (20 or newer) is required on PATH for the interop tests"
    );
    Ok((PathBuf::from("node"), vec![path.display().to_string()]))
}

/// Runs one client script; returns its JSON summary and whether it exited 0.
fn run_client(
    script: &str,
    url: &str,
    token: Option<&RunToken>,
    args: &[&str],
) -> Result<(Value, bool)> {
    let (program, mut argv) = program_for(script)?;
    argv.extend([
        "--url".to_owned(),
        url.to_owned(),
        "--timeout-ms".to_owned(),
        "90000".to_owned(),
    ]);
    argv.extend(args.iter().map(|a| (*a).to_owned()));
    let mut command = Command::new(&program);
    command
        .args(&argv)
        .current_dir(clients_dir())
        .env_remove("CORKBOARD_TOKEN")
        .env_remove("CORKBOARD_MCP_URL");
    if let Some(token) = token {
        // Through the environment, as `corkboard run` hands it over.
        command.env("CORKBOARD_TOKEN", token.expose());
    }
    let output = command
        .output()
        .with_context(|| format!("could not start {}", program.display()))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let line = stdout.lines().last().unwrap_or_default();
    let summary: Value = serde_json::from_str(line).with_context(|| {
        format!("{script} {args:?} printed no JSON summary.\nstdout: {stdout}\nstderr: {stderr}")
    })?;
    if let Some(token) = token {
        ensure!(
            !stdout.contains(token.expose()) && !stderr.contains(token.expose()),
            "{script} printed the token"
        );
    }
    Ok((summary, output.status.success()))
}

fn expect_ok(script: &str, url: &str, token: Option<&RunToken>, args: &[&str]) -> Result<Value> {
    let (summary, success) = run_client(script, url, token, args)?;
    if !success || summary["ok"] != Value::Bool(true) {
        bail!("{script} {args:?} failed: {summary}");
    }
    Ok(summary)
}

const ALL: &str = "issues:read,issues:create,issues:update,comments:write,issues:claim";

#[test]
fn every_client_runs_the_full_scenario_in_every_mode() -> Result<()> {
    let served = Served::start()?;
    for (script, mode, era) in [
        ("ts-sdk-v1.mjs", "legacy", "legacy"),
        ("ts-client-v2.mjs", "auto", "modern"),
        ("ts-client-v2.mjs", "2026-07-28", "modern"),
        ("ts-client-v2.mjs", "legacy", "legacy"),
        ("py_client.py", "legacy", "legacy"),
        ("py_client.py", "auto", "modern"),
        ("py_client.py", "2026-07-28", "modern"),
    ] {
        let token = served.token("acme", &format!("run-{}", mode.replace('-', "")), ALL)?;
        let summary = expect_ok(
            script,
            &served.url,
            Some(&token),
            &["--mode", mode, "--expect-era", era],
        )?;
        let created = summary["created"].as_str().unwrap_or_default();
        ensure!(created.starts_with("iss_"), "{script} {mode}: {summary}");
        ensure!(
            summary["errors"]["stale_version"]["kind"] == "tool_error",
            "{script} {mode}: {summary}"
        );
        if let Some(server) = summary["server"].as_object() {
            ensure!(
                server.get("name") == Some(&Value::from("corkboard")),
                "{summary}"
            );
        }
        eprintln!(
            "{script} {mode}: ok ({}); tenant argument: {}",
            summary["protocol_version"], summary["errors"]["tenant_argument"]
        );
    }
    // Each client's calls that reached the tools left one audit record each:
    // twenty successes (seven on one issue, seven on its sub-issue:
    // relations, claims, close; the refused near duplicate and the search;
    // the work queue's bulk create, two claim_next and board_stats)
    // and at least the stale update, the unknown id, the parent cycle and
    // the second release.
    let records = served.audit.records();
    for (run, clients) in [("run-legacy", 3), ("run-auto", 2), ("run-20260728", 2)] {
        let count = |outcome| {
            records
                .iter()
                .filter(|r| r.run.as_str() == run && r.outcome == outcome)
                .count()
        };
        let ok = count(AuditOutcome::Ok);
        let failed = count(AuditOutcome::ToolError);
        ensure!(ok == 20 * clients, "{run}: {ok} successful calls audited");
        ensure!(
            failed >= 4 * clients,
            "{run}: {failed} failed calls audited"
        );
    }
    Ok(())
}

#[test]
fn clients_see_only_what_the_grant_allows() -> Result<()> {
    let served = Served::start()?;
    let reader = served.token("acme", "reader", "issues:read")?;
    for (script, mode) in [
        ("ts-sdk-v1.mjs", "legacy"),
        ("ts-client-v2.mjs", "2026-07-28"),
        ("py_client.py", "auto"),
    ] {
        let summary = expect_ok(
            script,
            &served.url,
            Some(&reader),
            &[
                "--mode",
                mode,
                "--caps-check",
                "list_issues,get_issue,search_issues,board_stats,collect_approval",
            ],
        )?;
        ensure!(
            summary["hidden_call"]["tool"] == "create_issue",
            "{script} {mode}: {summary}"
        );
        eprintln!("{script} {mode}: {}", summary["hidden_call"]);
    }
    let commenter = served.token("acme", "commenter", "comments:write")?;
    expect_ok(
        "ts-client-v2.mjs",
        &served.url,
        Some(&commenter),
        &[
            "--mode",
            "auto",
            "--caps-check",
            "add_comment,collect_approval",
        ],
    )?;
    Ok(())
}

#[test]
fn clients_report_a_refused_token() -> Result<()> {
    let served = Served::start()?;
    for (script, mode) in [
        ("ts-sdk-v1.mjs", "legacy"),
        ("ts-client-v2.mjs", "auto"),
        ("ts-client-v2.mjs", "2026-07-28"),
        ("py_client.py", "legacy"),
        ("py_client.py", "2026-07-28"),
    ] {
        // No token given: the scripts present a well-formed, never-issued one.
        let summary = expect_ok(
            script,
            &served.url,
            None,
            &["--mode", mode, "--expect-auth-failure"],
        )?;
        eprintln!("{script} {mode}: {}", summary["auth_failure"]);
    }
    // And a server that is not there is not mistaken for a refusal.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        format!("http://{}/mcp", listener.local_addr()?)
    };
    let (summary, success) = run_client(
        "ts-client-v2.mjs",
        &closed,
        None,
        &["--expect-auth-failure"],
    )?;
    ensure!(!success && summary["ok"] == Value::Bool(false), "{summary}");
    Ok(())
}
