//! Black-box: `corkboard mcp stdio`, the board's MCP tools on stdin/stdout
//! for local agents, in both modes: **local** (the process opens the data
//! dir itself, beside a running `corkboard serve`) and **bridge**
//! (`--server URL`, relaying to the server's Streamable HTTP endpoint).
//!
//! Real clients (the TypeScript SDK v1, the TypeScript client v2 and the
//! Python SDK, each through its own stdio transport) start the binary as a
//! child process; raw tests write JSON-RPC lines themselves to check what
//! the SDKs would hide: error codes, ids, framing, exit behaviour.
//!
//! Needs `node` with `tests/clients/node_modules` and the Python venv at
//! `target/venv` (see tests/clients/README.md); tests that need them fail
//! with the setup command when they are missing.

use crate::support;

use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;
use support::*;

const ALL: &str = "issues:read,issues:create,issues:update,comments:write,issues:claim";
const MODERN: &str = "2026-07-28";
/// Long enough for a loaded 2-core machine; only there to turn a hang into
/// a failure.
const DEADLINE: Duration = Duration::from_secs(90);

/// Where a stdio process gets its board.
#[derive(Debug, Clone)]
enum Target {
    /// Opens the data dir itself.
    Local(PathBuf),
    /// Relays to a running server (`--server URL`).
    Bridge(String),
}

impl Target {
    fn both(serve: &Serve) -> [Target; 2] {
        [
            Target::Local(serve.data_dir.path().to_path_buf()),
            Target::Bridge(serve.url().to_owned()),
        ]
    }

    fn name(&self) -> &'static str {
        match self {
            Target::Local(_) => "local",
            Target::Bridge(_) => "bridge",
        }
    }

    /// The `corkboard mcp stdio ...` argument list.
    fn args(&self) -> Vec<String> {
        let mut args = vec!["mcp".to_owned(), "stdio".to_owned()];
        match self {
            Target::Local(dir) => {
                args.push("--data-dir".to_owned());
                args.push(dir.display().to_string());
            }
            Target::Bridge(url) => {
                args.push("--server".to_owned());
                args.push(url.clone());
            }
        }
        args
    }
}

/// A `corkboard mcp stdio` process driven line by line. Every line it
/// writes to stdout must be a JSON-RPC message; anything else fails the
/// test that reads it.
struct StdioProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    stderr: Arc<Mutex<String>>,
    label: String,
}

impl StdioProcess {
    fn spawn(target: &Target, token: Option<&str>) -> Self {
        Self::spawn_with(target, token, |_| {})
    }

    fn spawn_with(
        target: &Target,
        token: Option<&str>,
        configure: impl FnOnce(&mut Command),
    ) -> Self {
        let mut cmd = corkboard();
        cmd.args(target.args());
        if let Some(token) = token {
            cmd.env("CORKBOARD_TOKEN", token);
        }
        configure(&mut cmd);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn corkboard mcp stdio");
        let stdout = child.stdout.take().expect("stdout");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let collected = Arc::new(Mutex::new(String::new()));
        let sink = collected.clone();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stderr);
            let mut chunk = String::new();
            while reader.read_line(&mut chunk).unwrap_or(0) > 0 {
                sink.lock().unwrap().push_str(&chunk);
                chunk.clear();
            }
        });
        StdioProcess {
            stdin: child.stdin.take(),
            child,
            lines,
            stderr: collected,
            label: target.name().to_owned(),
        }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Whether `needle` appears on stderr within [`DEADLINE`]. Logs are
    /// written by the process's own buffered writer thread (info lines
    /// within ~20 ms), so a line logged before a response was written may
    /// reach stderr just after the response reached stdout.
    fn stderr_shows(&self, needle: &str) -> bool {
        let until = std::time::Instant::now() + DEADLINE;
        loop {
            if self.stderr().contains(needle) {
                return true;
            }
            if std::time::Instant::now() >= until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn send_raw(&mut self, text: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin
            .write_all(text.as_bytes())
            .expect("write to stdio server");
        stdin.flush().expect("flush");
    }

    fn send(&mut self, message: &Value) {
        self.send_raw(&format!("{message}\n"));
    }

    /// The next line the process wrote, as written.
    fn recv_raw(&self) -> String {
        self.lines.recv_timeout(DEADLINE).unwrap_or_else(|_| {
            panic!(
                "[{}] no message within {DEADLINE:?}; stderr:\n{}",
                self.label,
                self.stderr()
            )
        })
    }

    /// The next message the process wrote.
    fn recv(&self) -> Value {
        let line = self.recv_raw();
        protocol_message(&line).unwrap_or_else(|why| {
            panic!(
                "[{}] stdout carried a non-protocol line ({why}): {line:?}",
                self.label
            )
        })
    }

    fn request(&mut self, message: &Value) -> Value {
        self.send(message);
        let reply = self.recv();
        assert_eq!(
            reply["id"], message["id"],
            "[{}] reply to another id: {reply}",
            self.label
        );
        reply
    }

    /// Closes stdin (EOF), waits for the exit and returns it with any
    /// message still unread.
    fn finish(mut self) -> (ExitStatus, Vec<Value>, String) {
        drop(self.stdin.take());
        let status = wait_timeout(&mut self.child, DEADLINE).unwrap_or_else(|| {
            panic!(
                "[{}] did not exit after EOF; stderr:\n{}",
                self.label,
                self.stderr()
            )
        });
        let rest = self
            .lines
            .iter()
            .map(|line| {
                protocol_message(&line)
                    .unwrap_or_else(|why| panic!("non-protocol line ({why}): {line:?}"))
            })
            .collect();
        // The stderr reader ends with the process; give it the last bytes.
        let stderr = self.stderr();
        (status, rest, stderr)
    }
}

impl Drop for StdioProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A stdout line must be exactly one JSON-RPC 2.0 message (or a batch).
fn protocol_message(line: &str) -> Result<Value, String> {
    let value: Value = serde_json::from_str(line).map_err(|e| e.to_string())?;
    let one = |m: &Value| {
        m["jsonrpc"] == "2.0"
            && m.get("id").is_some()
            && (m.get("result").is_some() ^ m.get("error").is_some())
    };
    let ok = match &value {
        Value::Array(items) => !items.is_empty() && items.iter().all(one),
        other => one(other),
    };
    if ok {
        Ok(value)
    } else {
        Err("not a JSON-RPC response".into())
    }
}

fn initialize(id: i64, version: &str) -> Value {
    mcp::initialize(id, version, json!({}), ("stdio-test", "1.0.0"))
}

fn initialized() -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
}

fn request(id: Value, method: &str, params: Value) -> Value {
    mcp::request(id, method, params)
}

/// A 2026-07-28 request: the revision travels in `_meta`, nothing else.
fn modern(id: Value, method: &str, mut params: Value) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    request(id, method, params)
}

fn call(id: i64, tool: &str, arguments: Value) -> Value {
    request(
        json!(id),
        "tools/call",
        json!({"name": tool, "arguments": arguments}),
    )
}

/// Opens a 2025 session on the process (initialize + initialized).
fn handshake(p: &mut StdioProcess, version: &str) -> Value {
    let reply = p.request(&initialize(0, version));
    p.send(&initialized());
    reply
}

fn error_code(reply: &Value) -> Option<i64> {
    reply["error"]["code"].as_i64()
}

fn error_message(reply: &Value) -> String {
    reply["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn tool_text(reply: &Value) -> String {
    reply["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

// ---------------------------------------------------------------------------
// Real SDK clients

fn clients_dir() -> PathBuf {
    repo_root().join("tests/clients")
}

/// The interpreter and script for a stdio client, checked up front so that
/// a missing setup fails with the command that fixes it.
fn client_program(script: &str) -> (PathBuf, PathBuf) {
    let path = clients_dir().join("stdio").join(script);
    assert!(path.exists(), "missing client script {}", path.display());
    if script.ends_with(".py") {
        let python = repo_root().join("target/venv/bin/python");
        assert!(
            python.exists(),
            "the Python client venv is missing: run `python3 -m venv target/venv && \
             target/venv/bin/pip install -r tests/clients/requirements.txt` in the repository root"
        );
        return (python, path);
    }
    assert!(
        clients_dir()
            .join("node_modules/@modelcontextprotocol")
            .is_dir(),
        "the Node clients are not installed: run `npm ci` in tests/clients"
    );
    let node = Command::new("node").arg("--version").output();
    assert!(
        node.is_ok_and(|o| o.status.success()),
        "`node` (20 or newer) is required on PATH for the stdio client tests"
    );
    (PathBuf::from("node"), path)
}

/// Runs one SDK client against `corkboard mcp stdio`; returns its JSON
/// summary and whether it exited 0.
fn run_client(script: &str, target: &Target, token: Option<&str>, args: &[&str]) -> (Value, bool) {
    let (program, path) = client_program(script);
    let mut cmd = Command::new(program);
    cmd.arg(&path)
        .args(args)
        .args(["--timeout-ms", "90000", "--"])
        .arg(corkboard_bin())
        .args(target.args())
        .current_dir(clients_dir());
    for (key, _) in std::env::vars() {
        if key.starts_with("CORKBOARD_") {
            cmd.env_remove(key);
        }
    }
    cmd.env("CORKBOARD_LOG", "info");
    if let Some(token) = token {
        cmd.env("CORKBOARD_TOKEN", token);
    }
    let out = run(&mut cmd);
    let stdout = stdout_of(&out);
    let stderr = stderr_of(&out);
    let line = stdout.lines().last().unwrap_or_default();
    let summary: Value = serde_json::from_str(line).unwrap_or_else(|e| {
        panic!("{script} {args:?} ({}) printed no JSON summary ({e}).\nstdout: {stdout}\nstderr: {stderr}", target.name())
    });
    if let Some(token) = token {
        assert!(
            !stdout.contains(token) && !stderr.contains(token),
            "{script}: the token was printed (by the client or by corkboard's logs)"
        );
    }
    let ok = out.status.success() && summary["ok"] == true;
    if !ok {
        eprintln!("{script} {args:?} ({}) stderr:\n{stderr}", target.name());
    }
    (summary, ok)
}

/// (script, mode, expected era)
const CLIENTS: &[(&str, &str, &str)] = &[
    ("ts-sdk-v1-stdio.mjs", "legacy", "legacy"),
    ("ts-client-v2-stdio.mjs", "legacy", "legacy"),
    ("ts-client-v2-stdio.mjs", "auto", "modern"),
    ("ts-client-v2-stdio.mjs", MODERN, "modern"),
    ("py_stdio.py", "legacy", "legacy"),
    ("py_stdio.py", "auto", "modern"),
    ("py_stdio.py", MODERN, "modern"),
];

#[test]
fn sdk_stdio_clients_list_and_call_every_tool_in_both_eras() {
    let serve = Serve::start();
    let admin = serve.admin_token("platform-admin", None);
    let mut failures = Vec::new();
    let mut created = Vec::new();
    for target in Target::both(&serve) {
        for (i, (script, mode, era)) in CLIENTS.iter().enumerate() {
            let run_id = format!("sdk-{}-{i}", target.name());
            let granted = serve.grant("acme", &run_id, ALL);
            let (summary, ok) = run_client(
                script,
                &target,
                Some(&granted.token),
                &["--mode", mode, "--expect-era", era],
            );
            if !ok {
                failures.push(format!(
                    "{script} --mode {mode} ({}): {summary}",
                    target.name()
                ));
                continue;
            }
            // serverInfo is required in `initialize` and a SHOULD in
            // 2026-07-28 results (a client that adopts the revision without
            // `server/discover` has none to report).
            if *era == "legacy" || !summary["server"].is_null() {
                assert_eq!(summary["server"]["name"], "corkboard", "{summary}");
                assert!(summary["server"]["version"].is_string(), "{summary}");
            }
            let tools: BTreeSet<&str> = summary["tools"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            assert_eq!(
                tools,
                BTreeSet::from([
                    "add_comment",
                    "board_stats",
                    "claim_issue",
                    "claim_next",
                    "collect_approval",
                    "create_issue",
                    "create_issues",
                    "get_issue",
                    "list_issues",
                    "release_issue",
                    "search_issues",
                    "update_issue"
                ]),
                "{summary}"
            );
            // Errors the model can read and act on, never protocol failures.
            for kind in ["stale_version", "not_found"] {
                assert_eq!(
                    summary["errors"][kind]["kind"], "tool_error",
                    "{kind}: {summary}"
                );
            }
            created.push((
                run_id,
                summary["created"].as_str().unwrap_or_default().to_owned(),
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "stdio clients failed:\n{}",
        failures.join("\n")
    );

    // What the clients wrote is on the board, authored by their own run.
    for (run_id, id) in &created {
        let issue: Value = http()
            .get(format!("{}/v1/tenants/acme/issues/{id}", serve.url()))
            .bearer_auth(&admin)
            .send()
            .unwrap()
            .json()
            .unwrap();
        assert_eq!(issue["author"]["run"], run_id.as_str(), "{issue}");
        assert_eq!(
            issue["comments"].as_array().map(Vec::len),
            Some(1),
            "{issue}"
        );
    }
}

#[test]
fn sdk_stdio_clients_see_only_the_granted_tools() {
    let serve = Serve::start();
    let granted = serve.grant("acme", "reader", "issues:read");
    for target in Target::both(&serve) {
        for (script, mode) in [
            ("ts-client-v2-stdio.mjs", "auto"),
            ("py_stdio.py", "legacy"),
            ("ts-sdk-v1-stdio.mjs", "legacy"),
        ] {
            let (summary, ok) = run_client(
                script,
                &target,
                Some(&granted.token),
                &[
                    "--mode",
                    mode,
                    "--caps-check",
                    "list_issues,get_issue,search_issues,board_stats,collect_approval",
                ],
            );
            assert!(ok, "{script} {mode} ({}): {summary}", target.name());
            // A hidden tool is unknown to this caller: refused, and said so.
            let hidden = &summary["hidden_call"];
            assert_eq!(hidden["tool"], "create_issue", "{summary}");
            assert!(
                hidden["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("create_issue")),
                "{summary}"
            );
        }
    }
}

#[test]
fn sdk_stdio_clients_report_a_missing_or_revoked_token() {
    let serve = Serve::start();
    let granted = serve.grant("acme", "gone", ALL);
    let revoke = serve.cli(&["grant", "revoke", &granted.grant_id]);
    assert!(revoke.status.success(), "{}", stderr_of(&revoke));
    for target in Target::both(&serve) {
        for (script, mode) in [
            ("ts-client-v2-stdio.mjs", "auto"),
            ("ts-sdk-v1-stdio.mjs", "legacy"),
            ("py_stdio.py", "auto"),
            ("py_stdio.py", MODERN),
        ] {
            let (summary, ok) = run_client(
                script,
                &target,
                None,
                &[
                    "--mode",
                    mode,
                    "--expect-auth-failure",
                    "--expect-message",
                    "CORKBOARD_TOKEN",
                ],
            );
            assert!(
                ok,
                "no token: {script} {mode} ({}): {summary}",
                target.name()
            );
            let (summary, ok) = run_client(
                script,
                &target,
                Some(&granted.token),
                &[
                    "--mode",
                    mode,
                    "--expect-auth-failure",
                    "--expect-message",
                    "revoked",
                ],
            );
            assert!(
                ok,
                "revoked: {script} {mode} ({}): {summary}",
                target.name()
            );
        }
    }
}

// ---------------------------------------------------------------------------
// Raw protocol over the real binary

#[test]
fn both_eras_are_served_over_stdio() {
    let serve = Serve::start();
    let granted = serve.grant("acme", "eras", ALL);
    for target in Target::both(&serve) {
        let name = target.name();
        // 2026-07-28: no handshake; the revision travels in _meta.
        let mut p = StdioProcess::spawn(&target, Some(&granted.token));
        let discover = p.request(&modern(json!("d"), "server/discover", json!({})));
        assert_eq!(
            discover["result"]["supportedVersions"],
            json!([MODERN]),
            "[{name}] {discover}"
        );
        assert_eq!(
            discover["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
            "corkboard"
        );
        let list = p.request(&modern(json!(1), "tools/list", json!({})));
        assert_eq!(list["result"]["resultType"], "complete", "[{name}] {list}");
        assert!(
            list["result"]["ttlMs"].is_u64() && list["result"]["cacheScope"].is_string(),
            "[{name}] {list}"
        );
        assert_eq!(
            list["result"]["tools"].as_array().map(Vec::len),
            Some(corkboard_tools::BoardTool::ALL.len())
        );
        let created = p.request(&modern(
            json!(2),
            "tools/call",
            json!({"name": "create_issue", "arguments": {"title": format!("modern over {name}")}}),
        ));
        assert_eq!(created["result"]["isError"], false, "[{name}] {created}");
        assert!(created["result"]["structuredContent"]["id"].is_string());
        // Argument errors are tool errors from 2025-11-25 on.
        let bad = p.request(&modern(
            json!(3),
            "tools/call",
            json!({"name": "create_issue", "arguments": {"title": 5}}),
        ));
        assert_eq!(bad["result"]["isError"], true, "[{name}] {bad}");
        // Removed in 2026-07-28.
        let ping = p.request(&modern(json!(4), "ping", json!({})));
        assert_eq!(error_code(&ping), Some(-32601), "[{name}] {ping}");
        let level = p.request(&modern(
            json!(5),
            "logging/setLevel",
            json!({"level": "info"}),
        ));
        assert_eq!(error_code(&level), Some(-32601), "[{name}] {level}");
        // Without the revision in _meta a 2026-07-28 request is refused as bad params.
        let bare = p.request(&request(json!(6), "server/discover", json!({})));
        assert_eq!(error_code(&bare), Some(-32602), "[{name}] {bare}");
        let mut future = modern(json!(7), "tools/list", json!({}));
        future["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
        let future = p.request(&future);
        assert_eq!(error_code(&future), Some(-32022), "[{name}] {future}");
        assert_eq!(
            future["error"]["data"]["supported"],
            json!([MODERN]),
            "[{name}] {future}"
        );
        // No batches in the stateless era.
        p.send(&json!([modern(json!(8), "tools/list", json!({}))]));
        let batch = p.recv();
        assert_eq!(error_code(&batch), Some(-32600), "[{name}] {batch}");
        let (status, rest, stderr) = p.finish();
        assert!(
            status.success() && rest.is_empty(),
            "[{name}] {status:?} {rest:?}\n{stderr}"
        );

        // An unsupported requested revision gets the latest 2025 one; a
        // malformed initialize is refused and opens nothing.
        let mut p = StdioProcess::spawn(&target, Some(&granted.token));
        let mut no_client_info = initialize(1, "2025-06-18");
        no_client_info["params"]
            .as_object_mut()
            .map(|m| m.remove("clientInfo"));
        let refused = p.request(&no_client_info);
        assert_eq!(error_code(&refused), Some(-32602), "[{name}] {refused}");
        let still_none = p.request(&request(json!(2), "tools/list", json!({})));
        assert_eq!(
            error_code(&still_none),
            Some(-32600),
            "[{name}] {still_none}"
        );
        let old = p.request(&initialize(3, "2024-11-05"));
        assert_eq!(
            old["result"]["protocolVersion"], "2025-11-25",
            "[{name}] {old}"
        );
        // Ids are echoed exactly, even beyond 64-bit integers.
        let big = "123456789012345678901234567890";
        p.send_raw(&format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{big},\"method\":\"ping\"}}\n"
        ));
        let raw = p.recv_raw();
        assert!(raw.contains(&format!("\"id\":{big}")), "[{name}] {raw}");
        let (status, rest, stderr) = p.finish();
        assert!(
            status.success() && rest.is_empty(),
            "[{name}] {status:?} {rest:?}\n{stderr}"
        );

        // 2025: initialize opens the process-long session.
        for version in ["2025-03-26", "2025-06-18", "2025-11-25"] {
            let mut p = StdioProcess::spawn(&target, Some(&granted.token));
            let before = p.request(&request(json!(1), "tools/list", json!({})));
            assert_eq!(
                error_code(&before),
                Some(-32600),
                "[{name}] request before initialize: {before}"
            );
            let init = handshake(&mut p, version);
            let result = &init["result"];
            assert_eq!(result["protocolVersion"], version, "[{name}] {init}");
            assert_eq!(result["serverInfo"]["name"], "corkboard");
            assert!(
                result["serverInfo"]["version"]
                    .as_str()
                    .is_some_and(|v| !v.is_empty()),
                "{init}"
            );
            let list = p.request(&request(json!(2), "tools/list", json!({})));
            let tools = list["result"]["tools"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            assert_eq!(
                tools.len(),
                corkboard_tools::BoardTool::ALL.len(),
                "[{name}] {list}"
            );
            assert!(
                result.get("resultType").is_none(),
                "[{name}] no resultType before 2026-07-28: {init}"
            );
            assert_eq!(
                result["serverInfo"].get("title").is_some(),
                version != "2025-03-26",
                "[{name}] {init}"
            );
            for tool in &tools {
                assert_eq!(tool["inputSchema"]["type"], "object", "{tool}");
                assert!(tool["annotations"].is_object(), "[{name}] {tool}");
                // Fields a revision lacks are absent, never filled in.
                assert_eq!(
                    tool.get("outputSchema").is_some(),
                    version != "2025-03-26",
                    "[{name}] {version}: {tool}"
                );
                assert_eq!(
                    tool.get("title").is_some(),
                    version != "2025-03-26",
                    "[{name}] {version}: {tool}"
                );
            }
            let created = p.request(&call(
                3,
                "create_issue",
                json!({"title": format!("{version} over {name}")}),
            ));
            assert_eq!(created["result"]["isError"], false, "[{name}] {created}");
            assert_eq!(
                created["result"].get("structuredContent").is_some(),
                version != "2025-03-26",
                "[{name}] {version}: {created}"
            );
            // The text block renders the answer for clients that read only
            // `content` (no longer the JSON a second time): it names the
            // new issue exactly, as the structured result does.
            let text = tool_text(&created);
            let at = text.find("iss_").expect("the text block names the issue");
            let id = text.get(at..at + 30).unwrap_or_default();
            assert!(
                id[4..].chars().all(|c| c.is_ascii_alphanumeric()),
                "[{name}] {text}"
            );
            if let Some(structured) = created["result"].get("structuredContent") {
                assert_eq!(structured["id"], id, "[{name}] {created}");
            }
            let bad = p.request(&call(4, "create_issue", json!({"title": 5})));
            if version == "2025-11-25" {
                assert_eq!(bad["result"]["isError"], true, "[{name}] {bad}");
            } else {
                assert_eq!(error_code(&bad), Some(-32602), "[{name}] {version}: {bad}");
            }
            let ping = p.request(&request(json!(5), "ping", json!({})));
            assert_eq!(ping["result"], json!({}), "[{name}] {ping}");
            // JSON-RPC batches: only in a 2025-03-26 session.
            p.send(&json!([
                request(json!(6), "ping", json!({})),
                request(json!(7), "tools/list", json!({}))
            ]));
            let batch = p.recv();
            if version == "2025-03-26" {
                let replies = batch.as_array().cloned().unwrap_or_default();
                assert_eq!(replies.len(), 2, "[{name}] {batch}");
                assert_eq!(
                    (replies[0]["id"].clone(), replies[1]["id"].clone()),
                    (json!(6), json!(7))
                );
                assert_eq!(
                    replies[1]["result"]["tools"].as_array().map(Vec::len),
                    Some(corkboard_tools::BoardTool::ALL.len())
                );
            } else {
                assert_eq!(
                    error_code(&batch),
                    Some(-32600),
                    "[{name}] {version}: {batch}"
                );
            }
            let (status, rest, stderr) = p.finish();
            assert!(
                status.success() && rest.is_empty(),
                "[{name}] {status:?} {rest:?}\n{stderr}"
            );
        }
    }
}

#[test]
fn malformed_lines_get_json_rpc_errors_and_serving_continues() {
    let serve = Serve::start();
    let granted = serve.grant("acme", "garbage", ALL);
    let mut answers: BTreeMap<&str, Vec<(Value, Option<i64>)>> = BTreeMap::new();
    for target in Target::both(&serve) {
        let name = target.name();
        let mut p = StdioProcess::spawn_with(&target, Some(&granted.token), |cmd| {
            cmd.env("CORKBOARD_MAX_BODY_BYTES", "4096");
        });
        handshake(&mut p, "2025-11-25");
        // Each line is followed by a ping, so that a line that must get no
        // answer is proven silent by the ping's answer coming next.
        let lines: Vec<(String, bool)> = vec![
            ("{not json".into(), true),
            ("42".into(), true),
            ("\"text\"".into(), true),
            ("[]".into(), true),
            (r#"{"jsonrpc":"1.0","id":7,"method":"ping"}"#.into(), true),
            (r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#.into(), true),
            (r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#.into(), true),
            (r#"{"jsonrpc":"2.0","id":8}"#.into(), true),
            (r#"{"jsonrpc":"2.0","id":9,"method":"no/such/method"}"#.into(), true),
            (r#"{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"no_such_tool"}}"#.into(), true),
            (r#"{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"list_issues","arguments":[1]}}"#.into(), true),
            (r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"list_issues"}}"#.into(), true),
            (format!(r#"{{"jsonrpc":"2.0","id":12,"method":"ping","params":{{"pad":"{}"}}}}"#, "x".repeat(5000)), true),
            (r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#.into(), false),
            (r#"{"jsonrpc":"2.0","id":99,"result":{}}"#.into(), false),
            ("".into(), false),
            ("   \r".into(), false),
        ];
        let mut got = Vec::new();
        for (i, (line, answered)) in lines.iter().enumerate() {
            let ping_id = 1000 + i as i64;
            p.send_raw(&format!("{line}\n"));
            p.send(&request(json!(ping_id), "ping", json!({})));
            if *answered {
                let reply = p.recv();
                assert!(
                    reply.get("error").is_some(),
                    "[{name}] line {line:.60}: {reply}"
                );
                got.push((reply["id"].clone(), error_code(&reply)));
            }
            let pong = p.recv();
            assert_eq!(
                pong["id"], ping_id,
                "[{name}] after line {line:.60}: {pong}"
            );
            assert_eq!(
                pong["result"],
                json!({}),
                "[{name}] serving continues: {pong}"
            );
        }
        // A final line without a newline is still a message.
        p.send_raw(&call(13, "list_issues", json!({})).to_string());
        let (status, rest, stderr) = p.finish();
        assert!(status.success(), "[{name}] {status:?}\n{stderr}");
        assert_eq!(rest.len(), 1, "[{name}] {rest:?}");
        assert_eq!(rest[0]["id"], 13);
        assert_eq!(rest[0]["result"]["isError"], false, "{:?}", rest[0]);
        assert!(!stderr.contains("panicked"), "{stderr}");
        answers.insert(name, got);
    }
    let local = &answers["local"];
    let expected: Vec<(Value, Option<i64>)> = vec![
        (Value::Null, Some(-32700)),
        (Value::Null, Some(-32600)),
        (Value::Null, Some(-32600)),
        (Value::Null, Some(-32600)),
        (json!(7), Some(-32600)),
        (Value::Null, Some(-32600)),
        (Value::Null, Some(-32600)),
        (json!(8), Some(-32600)),
        (json!(9), Some(-32601)),
        (json!(10), Some(-32602)),
        (json!(11), Some(-32602)),
        (Value::Null, Some(-32600)),
        (Value::Null, Some(-32600)),
    ];
    assert_eq!(local, &expected, "local mode");
    // The bridge relays the server's validator: the same answers, except
    // that an oversized line is refused by the bridge itself (id unknown)
    // and HTTP refusals carry the request's id when it is readable.
    assert_eq!(
        &answers["bridge"], &expected,
        "bridge mode answers like local mode"
    );
}

#[test]
fn a_missing_unknown_or_revoked_token_is_a_clear_error_on_the_first_request() {
    let serve = Serve::start();
    let revoked = serve.grant("acme", "revoked", ALL);
    let out = serve.cli(&["grant", "revoke", &revoked.grant_id]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let unknown = format!("cbr_{}", "A".repeat(43));
    let cases: [(Option<&str>, &str); 4] = [
        (None, "CORKBOARD_TOKEN"),
        (Some(unknown.as_str()), "unknown"),
        (Some("not-a-token"), "malformed"),
        (Some(revoked.token.as_str()), "revoked"),
    ];
    for target in Target::both(&serve) {
        let name = target.name();
        for (token, reason) in cases {
            for first in [
                initialize(1, "2025-11-25"),
                modern(json!(1), "tools/list", json!({})),
            ] {
                let mut p = StdioProcess::spawn(&target, token);
                let reply = p.request(&first);
                assert_eq!(
                    error_code(&reply),
                    Some(-32600),
                    "[{name}] {reason}: {reply}"
                );
                let message = error_message(&reply);
                assert!(
                    message.contains(reason),
                    "[{name}] the error must say {reason:?}: {message}"
                );
                // Notifications stay unanswered; the next request is refused too.
                p.send(&initialized());
                let again = p.request(&modern(
                    json!(2),
                    "tools/call",
                    json!({"name": "list_issues", "arguments": {}}),
                ));
                assert!(error_message(&again).contains(reason), "[{name}] {again}");
                let (status, rest, stderr) = p.finish();
                assert!(
                    status.success() && rest.is_empty(),
                    "[{name}] {status:?} {rest:?}\n{stderr}"
                );
                if let Some(token) = token {
                    assert!(
                        !stderr.contains(token),
                        "[{name}] the token reached the logs"
                    );
                }
            }
        }
    }
}

#[test]
fn a_grant_revoked_while_running_stops_the_next_tool_call() {
    let serve = Serve::start();
    for target in Target::both(&serve) {
        let name = target.name();
        let granted = serve.grant("acme", &format!("revoke-{name}"), ALL);
        let mut p = StdioProcess::spawn(&target, Some(&granted.token));
        handshake(&mut p, "2025-11-25");
        let before = p.request(&call(1, "list_issues", json!({})));
        assert_eq!(before["result"]["isError"], false, "[{name}] {before}");
        let out = serve.cli(&["grant", "revoke", &granted.grant_id]);
        assert!(out.status.success(), "{}", stderr_of(&out));
        // Another process revoked it: the server may trust its cached copy
        // for up to LEDGER_CACHE_TTL (contract 6: within a second). Wait
        // for a read to be refused, then check the write is too.
        let revoked_at = std::time::Instant::now();
        for id in 100.. {
            let probe = p.request(&call(id, "list_issues", json!({})));
            if probe.get("error").is_some() || probe["result"]["isError"] == true {
                break;
            }
            assert!(
                revoked_at.elapsed() < std::time::Duration::from_secs(1),
                "[{name}] still served a second after the revocation: {probe}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let after = p.request(&call(
            2,
            "create_issue",
            json!({"title": "after revocation"}),
        ));
        let refused = match &target {
            // Local: the token is resolved again for every tool call.
            Target::Local(_) => {
                after["result"]["isError"] == true && tool_text(&after).contains("revoked")
            }
            // Bridge: the server refuses the request (403) and the bridge
            // relays the JSON-RPC error with the request's id.
            Target::Bridge(_) => {
                error_code(&after) == Some(-32600) && error_message(&after).contains("revoked")
            }
        };
        assert!(
            refused,
            "[{name}] a revoked grant must be refused clearly: {after}"
        );
        drop(p);
    }
    // Nothing was written after the revocation.
    let admin = serve.admin_token("platform-admin", None);
    let page: Value = http()
        .get(format!(
            "{}/v1/tenants/acme/issues?text=after%20revocation",
            serve.url()
        ))
        .bearer_auth(&admin)
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(page["issues"], json!([]), "{page}");
}

#[test]
fn eof_ends_cleanly_and_every_call_is_audited() {
    let serve = Serve::start();
    let admin = serve.admin_token("platform-admin", None);
    for target in Target::both(&serve) {
        let name = target.name();
        let run_id = format!("audit-{name}");
        let granted = serve.grant("acme", &run_id, ALL);
        let mut p = StdioProcess::spawn(&target, Some(&granted.token));
        let created = p.request(&modern(
            json!(1),
            "tools/call",
            json!({"name": "create_issue", "arguments": {"title": "audited", "body": "secret argument text"}}),
        ));
        assert_eq!(created["result"]["isError"], false, "[{name}] {created}");
        let listed = p.request(&modern(
            json!(2),
            "tools/call",
            json!({"name": "list_issues", "arguments": {}}),
        ));
        assert_eq!(listed["result"]["isError"], false);
        // EOF with nothing pending: exit 0 promptly, audit flushed first.
        let (status, rest, stderr) = p.finish();
        assert!(status.success(), "[{name}] {status:?}\n{stderr}");
        assert!(rest.is_empty());
        assert!(
            !stderr.contains("secret argument text"),
            "[{name}] tool arguments reached the logs"
        );
        assert!(
            !stderr.contains(&granted.token),
            "[{name}] the token reached the logs"
        );
        // Local mode writes its own audit records before exiting; over the
        // bridge the server writes them (in batches, shortly after).
        let deadline = std::time::Instant::now() + DEADLINE;
        let records = loop {
            let page: Value = http()
                .get(format!(
                    "{}/v1/tenants/acme/audit?run={run_id}",
                    serve.url()
                ))
                .bearer_auth(&admin)
                .send()
                .unwrap()
                .json()
                .unwrap();
            let records = page["records"].as_array().cloned().unwrap_or_default();
            if records.len() >= 2
                || matches!(target, Target::Local(_))
                || std::time::Instant::now() > deadline
            {
                break records;
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        let tools: BTreeSet<&str> = records.iter().filter_map(|r| r["tool"].as_str()).collect();
        assert_eq!(
            tools,
            BTreeSet::from(["create_issue", "list_issues"]),
            "[{name}] {records:?}"
        );
        for record in &records {
            assert_eq!(record["grant"], granted.grant_id.as_str());
            assert!(!record.to_string().contains("secret argument text"));
        }
    }
}

#[test]
fn a_closed_stdout_ends_the_process_without_a_panic() {
    let serve = Serve::start();
    let granted = serve.grant("acme", "pipe", ALL);
    for target in Target::both(&serve) {
        let name = target.name();
        let mut cmd = corkboard();
        cmd.args(target.args())
            .env("CORKBOARD_TOKEN", &granted.token)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn");
        // The reader goes away before the server writes anything.
        drop(child.stdout.take());
        let mut stdin = child.stdin.take().expect("stdin");
        let mut stderr = child.stderr.take().expect("stderr");
        let collect = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        });
        // Keep writing requests until the process notices and exits (a
        // write to its stdin then fails too) or the batch is done.
        for id in 0..50 {
            let line = format!("{}\n", modern(json!(id), "tools/list", json!({})));
            if stdin
                .write_all(line.as_bytes())
                .and_then(|()| stdin.flush())
                .is_err()
            {
                break;
            }
        }
        drop(stdin);
        let status = wait_timeout(&mut child, DEADLINE).expect("exit after stdout closed");
        let stderr = collect.join().unwrap_or_default();
        assert!(status.success(), "[{name}] {status:?}\n{stderr}");
        assert!(!stderr.contains("panicked"), "[{name}] {stderr}");
    }
}

#[test]
fn stdout_carries_only_protocol_messages_and_logs_go_to_stderr() {
    let serve = Serve::start();
    let granted = serve.grant("acme", "quiet", ALL);
    for target in Target::both(&serve) {
        let name = target.name();
        let mut p = StdioProcess::spawn_with(&target, Some(&granted.token), |cmd| {
            cmd.env("CORKBOARD_LOG", "debug")
                .env("CORKBOARD_LOG_FORMAT", "text");
        });
        handshake(&mut p, "2025-06-18");
        for id in 1..=3 {
            let reply = p.request(&call(id, "list_issues", json!({})));
            assert_eq!(reply["result"]["isError"], false, "[{name}] {reply}");
        }
        let (status, rest, stderr) = p.finish();
        assert!(
            status.success() && rest.is_empty(),
            "[{name}] {status:?} {rest:?}"
        );
        // Every stdout line went through `protocol_message`; the logs are on stderr.
        // local: "serving MCP on stdio", bridge: "relaying MCP from stdio".
        assert!(
            stderr.contains("MCP on stdio") || stderr.contains("MCP from stdio"),
            "[{name}] no logs on stderr:\n{stderr}"
        );
    }
}

#[test]
fn the_grant_alone_decides_the_tenant() {
    let serve = Serve::start();
    let admin = serve.admin_token("platform-admin", None);
    let acme = serve.grant("acme", "pinned", ALL);
    let other = serve.grant("globex", "other", ALL);
    let (_, secret) = mcp_call(
        &other.mcp_url,
        &other.token,
        "create_issue",
        json!({"title": "globex secret"}),
    );
    let secret_id = secret["result"]["structuredContent"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    // No flag names a tenant: the CLI refuses one outright.
    let out = run(corkboard()
        .args(["mcp", "stdio", "--tenant", "globex"])
        .env("CORKBOARD_TOKEN", &acme.token));
    assert!(!out.status.success(), "a --tenant flag must be refused");
    for target in Target::both(&serve) {
        let name = target.name();
        let mut p = StdioProcess::spawn(&target, Some(&acme.token));
        handshake(&mut p, "2025-11-25");
        let with_tenant = p.request(&call(
            1,
            "create_issue",
            json!({"title": "x", "tenant": "globex"}),
        ));
        assert_eq!(
            with_tenant["result"]["isError"], true,
            "[{name}] {with_tenant}"
        );
        let foreign = p.request(&call(2, "get_issue", json!({"id": secret_id})));
        assert_eq!(foreign["result"]["isError"], true, "[{name}] {foreign}");
        assert!(
            !foreign.to_string().contains("globex secret"),
            "[{name}] {foreign}"
        );
        let listed = p.request(&call(3, "list_issues", json!({})));
        assert!(
            !listed.to_string().contains("globex secret"),
            "[{name}] {listed}"
        );
        let created = p.request(&call(
            4,
            "create_issue",
            json!({"title": format!("acme via {name}")}),
        ));
        let id = created["result"]["structuredContent"]["id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let issue: Value = http()
            .get(format!("{}/v1/tenants/acme/issues/{id}", serve.url()))
            .bearer_auth(&admin)
            .send()
            .unwrap()
            .json()
            .unwrap();
        assert_eq!(issue["tenant"], "acme", "[{name}] {issue}");
        assert_eq!(issue["author"]["run"], "pinned");
    }
}

#[test]
fn sigterm_ends_the_process_and_flushes_the_audit() {
    let serve = Serve::start();
    let admin = serve.admin_token("platform-admin", None);
    for target in Target::both(&serve) {
        let name = target.name();
        let run_id = format!("signalled-{name}");
        let granted = serve.grant("acme", &run_id, ALL);
        let mut p = StdioProcess::spawn(&target, Some(&granted.token));
        let created = p.request(&modern(
            json!(1),
            "tools/call",
            json!({"name": "create_issue", "arguments": {"title": "before SIGTERM"}}),
        ));
        assert_eq!(created["result"]["isError"], false, "[{name}] {created}");
        // stdin stays open: only the signal ends the process.
        let pid = p.child.id().to_string();
        let kill = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill");
        assert!(kill.success());
        let status = wait_timeout(&mut p.child, DEADLINE)
            .unwrap_or_else(|| panic!("[{name}] no exit after SIGTERM; stderr:\n{}", p.stderr()));
        assert!(status.success(), "[{name}] {status:?}\n{}", p.stderr());
        if let Target::Local(_) = target {
            // Written by the process itself before it exited.
            let page: Value = http()
                .get(format!(
                    "{}/v1/tenants/acme/audit?run={run_id}",
                    serve.url()
                ))
                .bearer_auth(&admin)
                .send()
                .unwrap()
                .json()
                .unwrap();
            assert_eq!(page["records"].as_array().map(Vec::len), Some(1), "{page}");
        }
    }
}

#[test]
fn the_bridge_reports_an_unreachable_server_and_renews_its_session_after_a_restart() {
    let data_dir = tempfile::tempdir().expect("temp dir");
    let start = |listen: &str| {
        let mut cmd = corkboard();
        cmd.args(["serve", "--listen", listen, "--data-dir"])
            .arg(data_dir.path());
        Running::spawn(cmd)
    };
    let first = start("127.0.0.1:0");
    let url = first.url.clone();
    let listen = url.trim_start_matches("http://").to_owned();
    let out = run(corkboard()
        .args([
            "grant",
            "create",
            "--tenant",
            "acme",
            "--run",
            "restart",
            "--caps",
            ALL,
            "--json",
            "--data-dir",
        ])
        .arg(data_dir.path()));
    assert!(out.status.success(), "{}", stderr_of(&out));
    let granted = parse_granted(&stdout_of(&out));
    let mut p = StdioProcess::spawn(&Target::Bridge(url.clone()), Some(&granted.token));
    handshake(&mut p, "2025-11-25");
    let before = p.request(&call(1, "list_issues", json!({})));
    assert_eq!(before["result"]["isError"], false, "{before}");

    // Server gone: every request still gets an answer with its id.
    assert!(first.terminate().success());
    for id in [2, 3] {
        let down = p.request(&call(id, "list_issues", json!({})));
        assert_eq!(error_code(&down), Some(-32603), "{down}");
        let message = error_message(&down);
        assert!(
            message.starts_with("board unavailable") && message.contains("cannot reach"),
            "{message}"
        );
    }

    // Back, with a new session key: the old session id is refused (404),
    // and the bridge opens a new session on its own and retries.
    std::fs::remove_file(data_dir.path().join("session.key")).expect("remove the session key");
    let second = start(&listen);
    assert_eq!(second.url, url);
    let after = p.request(&call(
        4,
        "create_issue",
        json!({"title": "after the restart"}),
    ));
    assert_eq!(after["result"]["isError"], false, "{after}\n{}", p.stderr());
    assert!(p.stderr_shows("opened a new one"), "{}", p.stderr());
    let (status, rest, _) = p.finish();
    assert!(status.success() && rest.is_empty(), "{status:?} {rest:?}");
    drop(second);
}

// ---------------------------------------------------------------------------
// Concurrent writers on one data dir

/// Creates sent by each writer.
const WRITES: usize = 200;

/// Runs `WRITES` pipelined `create_issue` calls through a stdio process;
/// returns the acknowledged issue ids.
fn stdio_writer(target: Target, token: String, writer: String) -> Vec<String> {
    let mut p = StdioProcess::spawn(&target, Some(&token));
    let legacy = matches!(target, Target::Local(_)) && writer.ends_with('a');
    if legacy {
        handshake(&mut p, "2025-11-25");
    }
    let mut stdin = p.stdin.take().expect("stdin");
    let requests: Vec<String> = (0..WRITES)
        .map(|i| {
            let arguments = json!({"title": format!("{writer} #{i}"), "idempotency_key": format!("{writer}-{i}")});
            let message = if legacy {
                call(i as i64, "create_issue", arguments)
            } else {
                modern(json!(i), "tools/call", json!({"name": "create_issue", "arguments": arguments}))
            };
            format!("{message}\n")
        })
        .collect();
    // Writing while the answers are read: neither pipe may fill up.
    let feeder = std::thread::spawn(move || {
        for line in requests {
            stdin.write_all(line.as_bytes()).expect("write request");
        }
        stdin.flush().expect("flush");
        stdin
    });
    let mut acknowledged = Vec::with_capacity(WRITES);
    for _ in 0..WRITES {
        let reply = p.recv();
        assert_eq!(reply["result"]["isError"], false, "[{writer}] {reply}");
        let id = reply["result"]["structuredContent"]["id"]
            .as_str()
            .expect("issue id");
        acknowledged.push(id.to_owned());
    }
    p.stdin = Some(feeder.join().expect("feeder"));
    let (status, rest, stderr) = p.finish();
    assert!(
        status.success() && rest.is_empty(),
        "[{writer}] {status:?} {rest:?}\n{stderr}"
    );
    acknowledged
}

fn http_writer(url: String, token: String, writer: String) -> Vec<String> {
    (0..WRITES)
        .map(|i| {
            let (status, reply) = mcp_call(
                &url,
                &token,
                "create_issue",
                json!({"title": format!("{writer} #{i}"), "idempotency_key": format!("{writer}-{i}")}),
            );
            assert_eq!(status, 200, "[{writer}] {reply}");
            assert_eq!(reply["result"]["isError"], false, "[{writer}] {reply}");
            reply["result"]["structuredContent"]["id"].as_str().expect("issue id").to_owned()
        })
        .collect()
}

/// Every issue of a tenant, through the admin API's pages.
fn all_issues(serve: &Serve, admin: &str, tenant: &str) -> Vec<Value> {
    let mut issues = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut url = format!("{}/v1/tenants/{tenant}/issues?limit=200", serve.url());
        if let Some(c) = &cursor {
            url.push_str(&format!("&cursor={c}"));
        }
        let page: Value = http()
            .get(url)
            .bearer_auth(admin)
            .send()
            .unwrap()
            .json()
            .unwrap();
        issues.extend(page["issues"].as_array().cloned().unwrap_or_default());
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return issues,
        }
    }
}

/// One writer's work: returns the ids of the acknowledged creates.
type Job = Box<dyn FnOnce() -> Vec<String> + Send>;

#[test]
fn stdio_processes_and_serve_share_a_data_dir_without_losing_writes() {
    // Writers hammer one run each as fast as they can: no rate limit here.
    let serve = Serve::start_with_env(&[
        ("CORKBOARD_RATE_LIMIT_PER_SECOND", "100000"),
        ("CORKBOARD_RATE_LIMIT_BURST", "100000"),
    ]);
    let admin = serve.admin_token("platform-admin", None);
    let data_dir = serve.data_dir.path().to_path_buf();
    let writers: Vec<(String, Job)> = ["stdio-a", "stdio-b", "bridge-c", "http-d", "http-e"]
        .into_iter()
        .map(|writer| {
            let granted = serve.grant("acme", writer, "issues:read,issues:create");
            let name = writer.to_owned();
            let job: Job = if writer.starts_with("stdio") {
                let target = Target::Local(data_dir.clone());
                Box::new(move || stdio_writer(target, granted.token, name))
            } else if writer.starts_with("bridge") {
                let target = Target::Bridge(serve.url().to_owned());
                Box::new(move || stdio_writer(target, granted.token, name))
            } else {
                let url = granted.mcp_url.clone();
                Box::new(move || http_writer(url, granted.token, name))
            };
            (writer.to_owned(), job)
        })
        .collect();
    let acknowledged: BTreeMap<String, Vec<String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = writers
            .into_iter()
            .map(|(writer, job)| (writer, scope.spawn(job)))
            .collect();
        handles
            .into_iter()
            .map(|(writer, handle)| {
                let ids = handle
                    .join()
                    .unwrap_or_else(|_| panic!("writer {writer} failed"));
                (writer, ids)
            })
            .collect()
    });

    let issues = all_issues(&serve, &admin, "acme");
    let stored: BTreeMap<String, Value> = issues
        .iter()
        .map(|i| (i["id"].as_str().unwrap_or_default().to_owned(), i.clone()))
        .collect();
    assert_eq!(stored.len(), issues.len(), "an issue was listed twice");
    assert_eq!(
        issues.len(),
        5 * WRITES,
        "exactly every acknowledged write, nothing more"
    );
    for (writer, ids) in &acknowledged {
        assert_eq!(ids.len(), WRITES);
        assert_eq!(
            ids.iter().collect::<BTreeSet<_>>().len(),
            WRITES,
            "[{writer}] duplicate ids"
        );
        for (i, id) in ids.iter().enumerate() {
            let issue = stored
                .get(id)
                .unwrap_or_else(|| panic!("[{writer}] acknowledged {id} is missing"));
            assert_eq!(issue["title"], format!("{writer} #{i}"), "{issue}");
            assert_eq!(issue["author"]["run"], writer.as_str(), "{issue}");
            assert_eq!(issue["version"], 1, "{issue}");
        }
    }
}

/// `corkboard mcp stdio` asks the same approval gate as HTTP, in local mode
/// too (it used to run every call): a covered call answers pending at once
/// with its handle, the collect tool answers pending until a person
/// decides through the admin API, then runs the call once.
#[test]
fn stdio_calls_ask_the_approval_gate_and_collect_the_outcome() {
    let serve = Serve::start();
    let admin = serve.admin_token("platform-admin", None);
    let approver = serve.admin_token("approver", Some("acme"));
    let policies = http()
        .put(format!("{}/v1/tenants/acme/approval-policies", serve.url()))
        .bearer_auth(&admin)
        .json(&json!({ "policies": [{ "name": "talk", "tool": "add_comment" }] }))
        .send()
        .unwrap();
    assert_eq!(policies.status().as_u16(), 200);
    for target in Target::both(&serve) {
        let name = target.name();
        let granted = serve.grant("acme", &format!("gated-{name}"), ALL);
        let mut p = StdioProcess::spawn(&target, Some(&granted.token));
        let created = p.request(&modern(
            json!(1),
            "tools/call",
            json!({"name": "create_issue", "arguments": {"title": "gated"}}),
        ));
        assert_eq!(created["result"]["isError"], false, "[{name}] {created}");
        let id = created["result"]["structuredContent"]["id"].clone();
        let comment =
            json!({"name": "add_comment", "arguments": {"issue_id": id, "body": "by stdio"}});
        let pending = p.request(&modern(json!(2), "tools/call", comment.clone()));
        let text = tool_text(&pending);
        assert_eq!(pending["result"]["isError"], true, "[{name}] {pending}");
        assert!(
            text.contains("awaits a person's approval") && text.contains("collect_approval"),
            "[{name}] {text}"
        );
        let at = text.find("apr_").expect("a handle");
        let handle = text[at..at + 30].to_owned();
        let collect = json!({"name": "collect_approval", "arguments": {"handle": handle}});
        let waiting = p.request(&modern(json!(3), "tools/call", collect.clone()));
        assert_eq!(
            waiting["result"]["structuredContent"]["status"], "pending",
            "[{name}] {waiting}"
        );
        let decided = http()
            .post(format!(
                "{}/v1/tenants/acme/approvals/{handle}/decision",
                serve.url()
            ))
            .bearer_auth(&approver)
            .json(&json!({ "approve": true }))
            .send()
            .unwrap();
        assert_eq!(decided.status().as_u16(), 200, "[{name}]");
        let ran = p.request(&modern(json!(4), "tools/call", collect.clone()));
        assert_eq!(ran["result"]["isError"], false, "[{name}] {ran}");
        assert_eq!(ran["result"]["structuredContent"]["status"], "ran");
        let again = p.request(&modern(json!(5), "tools/call", collect));
        assert_eq!(again["result"]["isError"], true, "[{name}] {again}");
        let read = p.request(&modern(
            json!(6),
            "tools/call",
            json!({"name": "get_issue", "arguments": {"id": id}}),
        ));
        let comments = read["result"]["structuredContent"]["comments"].clone();
        assert_eq!(
            comments.as_array().map(Vec::len),
            Some(1),
            "[{name}] ran once: {comments}"
        );
        let _ = p.finish();
    }
}
