//! Black-box: `corkboard run -- CMD` hands a real MCP client (the Python
//! SDK) its run's endpoint, token and client configuration, the agent's
//! issues land on the tenant's board, the run is revoked when CMD ends
//! however it ends, and `corkboard run` exits with CMD's status.

use crate::support;

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use support::*;

const ALL_CAPS: &str = "issues:read,issues:create,issues:update,comments:write,issues:claim";

fn venv_python() -> PathBuf {
    let py = repo_root().join("target/venv/bin/python");
    assert!(
        py.exists(),
        "target/venv is missing: run scripts/setup-test-deps"
    );
    py
}

fn client_script(name: &str) -> PathBuf {
    repo_root().join("tests/clients").join(name)
}

/// `corkboard run` with the given flags and command.
fn corkboard_run(flags: &[&str], command: &[&str]) -> Command {
    let mut cmd = corkboard();
    cmd.arg("run").args(flags).arg("--").args(command);
    cmd
}

/// The one JSON line a client script printed.
fn json_line(stdout: &str) -> Value {
    stdout
        .lines()
        .rev()
        .find_map(|l| {
            serde_json::from_str::<Value>(l)
                .ok()
                .filter(Value::is_object)
        })
        .unwrap_or_else(|| panic!("no JSON line in: {stdout}"))
}

fn issues_of(serve_url: &str, admin: &str, tenant: &str) -> Vec<Value> {
    let page: Value = http()
        .get(format!("{serve_url}/v1/tenants/{tenant}/issues?limit=100"))
        .bearer_auth(admin)
        .send()
        .expect("list issues")
        .json()
        .expect("issues JSON");
    page["issues"].as_array().cloned().unwrap_or_default()
}

fn grants_of(serve: &Serve, tenant: &str, run: &str) -> Vec<Value> {
    let out = serve.cli(&["grant", "list", "--tenant", tenant, "--run", run, "--json"]);
    assert!(out.status.success(), "grant list: {}", stderr_of(&out));
    let listed: Value = serde_json::from_str(&stdout_of(&out)).expect("grant list JSON");
    listed["grants"].as_array().cloned().unwrap_or_default()
}

/// A shell command that records the run's token and URL in `file`, then
/// runs the Python interop client (the agent).
fn recording_agent(file: &Path, script: &str, args: &str) -> Vec<String> {
    vec![
        "sh".into(),
        "-c".into(),
        format!(
            "printf '%s %s' \"$CORKBOARD_TOKEN\" \"$CORKBOARD_MCP_URL\" > '{}' && exec '{}' '{}' {args}",
            file.display(),
            venv_python().display(),
            client_script(script).display(),
        ),
    ]
}

#[test]
fn an_agent_run_against_serve_writes_the_tenants_board_and_is_revoked_when_it_ends() {
    let serve = Serve::start();
    let admin = serve.admin_token("platform-admin", None);
    let scratch = tempfile::tempdir().unwrap();
    let record = scratch.path().join("handout");
    let agent = recording_agent(&record, "py_client.py", "--mode auto");
    let agent: Vec<&str> = agent.iter().map(String::as_str).collect();
    let out = run(corkboard_run(
        &[
            "--server",
            serve.url(),
            "--tenant",
            "acme",
            "--run",
            "agent-1",
            "--caps",
            ALL_CAPS,
        ],
        &agent,
    )
    .env("CORKBOARD_ADMIN_TOKEN", &admin));
    assert!(
        out.status.success(),
        "corkboard run failed: {}\n{}",
        stdout_of(&out),
        stderr_of(&out)
    );
    let result = json_line(&stdout_of(&out));
    assert_eq!(result["ok"], true, "{result}");
    let created = result["created"].as_str().expect("created issue id");

    // The issue is on acme's board, authored by the run.
    let issues = issues_of(serve.url(), &admin, "acme");
    let issue = issues
        .iter()
        .find(|i| i["id"] == created)
        .expect("the agent's issue on acme's board");
    assert_eq!(issue["author"]["run"], "agent-1");
    assert!(issues_of(serve.url(), &admin, "globex").is_empty());

    // After CMD exited the run is revoked and its token refused everywhere.
    let handout = std::fs::read_to_string(&record).unwrap();
    let (token, url) = handout.split_once(' ').unwrap();
    assert!(token.starts_with("cbr_"));
    let grants = grants_of(&serve, "acme", "agent-1");
    assert_eq!(grants.len(), 1);
    assert_eq!(grants[0]["status"], "revoked", "{grants:?}");
    let (status, _) = mcp_list(&format!("{}/mcp", serve.url()), token);
    assert_eq!(
        status, 403,
        "the studio endpoint must refuse the revoked token"
    );
    // The run's own gateway port is closed.
    assert!(
        reqwest::blocking::Client::new().post(url).send().is_err(),
        "the run's gateway still answers at {url}"
    );
    let runs: Value = http()
        .get(format!("{}/v1/runs?tenant=acme", serve.url()))
        .bearer_auth(&admin)
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(runs["runs"], serde_json::json!([]), "{runs}");
    assert_eq!(runs["stats"]["listeners"], 0, "{runs}");
}

#[test]
fn an_in_process_run_on_a_data_dir_writes_that_board() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(&mut corkboard_run(
        &[
            "--tenant",
            "acme",
            "--run",
            "local-agent-2",
            "--caps",
            ALL_CAPS,
            "--data-dir",
            dir.path().to_str().unwrap(),
        ],
        &[
            venv_python().to_str().unwrap(),
            client_script("py_client.py").to_str().unwrap(),
            "--mode",
            "legacy",
        ],
    ));
    assert!(
        out.status.success(),
        "{}\n{}",
        stdout_of(&out),
        stderr_of(&out)
    );
    let result = json_line(&stdout_of(&out));
    assert_eq!(result["ok"], true, "{result}");
    assert_eq!(result["era"], "legacy", "{result}");

    // `serve` on the same data dir shows the issue on acme's board, and
    // the run's grant revoked.
    let mut cmd = corkboard();
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path());
    let serve = Running::spawn(cmd);
    let admin = {
        let out = run(corkboard()
            .args(["admin", "token", "--role", "platform-admin", "--data-dir"])
            .arg(dir.path()));
        stdout_of(&out).trim().to_owned()
    };
    let issues = issues_of(&serve.url, &admin, "acme");
    assert!(
        issues
            .iter()
            .any(|i| i["id"] == result["created"] && i["author"]["run"] == "local-agent-2"),
        "{issues:?}"
    );
    let grants: Value = http()
        .get(format!(
            "{}/v1/tenants/acme/grants?run=local-agent-2",
            serve.url
        ))
        .bearer_auth(&admin)
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(grants["grants"][0]["status"], "revoked", "{grants}");
}

#[test]
fn a_run_without_a_board_still_lists_every_tool_and_each_call_says_so() {
    let empty_cwd = tempfile::tempdir().unwrap();
    let out = run(corkboard_run(
        &["--tenant", "acme", "--caps", ALL_CAPS],
        &[
            venv_python().to_str().unwrap(),
            client_script("agent_probe.py").to_str().unwrap(),
        ],
    )
    .current_dir(empty_cwd.path()));
    assert!(
        out.status.success(),
        "{}\n{}",
        stdout_of(&out),
        stderr_of(&out)
    );
    let result = json_line(&stdout_of(&out));
    assert_eq!(result["ok"], true, "{result}");
    let tools: Vec<&str> = result["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for tool in [
        "list_issues",
        "get_issue",
        "create_issue",
        "update_issue",
        "add_comment",
    ] {
        assert!(tools.contains(&tool), "{tool} missing from {tools:?}");
    }
    assert_eq!(result["create"]["is_error"], true, "{result}");
    assert_eq!(
        result["create"]["text"],
        "board unavailable in this run: no board store is configured (start corkboard serve or pass --data-dir)"
    );
    assert!(
        stderr_of(&out).contains("no board for this run"),
        "{}",
        stderr_of(&out)
    );
    // Nothing was created in the working directory.
    assert_eq!(std::fs::read_dir(empty_cwd.path()).unwrap().count(), 0);
}

#[test]
fn cmd_gets_the_config_file_and_inline_json_but_never_the_admin_token() {
    let serve = Serve::start();
    let admin = serve.admin_token("platform-admin", None);
    let script = r#"
        printf 'mode=%s\n' "$(stat -c %a "$CORKBOARD_MCP_CONFIG")"
        printf 'path=%s\n' "$CORKBOARD_MCP_CONFIG"
        printf 'file=%s\n' "$(tr -d '\n' < "$CORKBOARD_MCP_CONFIG")"
        printf 'inline=%s\n' "$CORKBOARD_MCP_CONFIG_JSON"
        printf 'url=%s\n' "$CORKBOARD_MCP_URL"
        printf 'no_proxy=%s|%s\n' "$NO_PROXY" "$no_proxy"
        printf 'admin=%s\n' "${CORKBOARD_ADMIN_TOKEN:-absent}"
    "#;
    let out = run(corkboard_run(
        &[
            "--server",
            serve.url(),
            "--tenant",
            "acme",
            "--caps",
            "issues:read",
        ],
        &["sh", "-c", script],
    )
    .env("CORKBOARD_ADMIN_TOKEN", &admin)
    .env("NO_PROXY", "example.internal"));
    assert!(out.status.success(), "{}", stderr_of(&out));
    let stdout = stdout_of(&out);
    let field = |name: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}=")))
            .unwrap_or_else(|| panic!("{name} missing: {stdout}"))
            .to_owned()
    };
    assert_eq!(field("mode"), "600");
    let file: Value = serde_json::from_str(&field("file")).unwrap();
    let inline: Value = serde_json::from_str(&field("inline")).unwrap();
    assert_eq!(
        file, inline,
        "the inline JSON must be the file's configuration"
    );
    let server = &inline["mcpServers"]["corkboard"];
    assert_eq!(server["type"], "http");
    assert_eq!(server["url"], field("url").as_str());
    assert_eq!(server["alwaysLoad"], true);
    assert!(
        server["headers"]["Authorization"]
            .as_str()
            .unwrap()
            .starts_with("Bearer cbr_")
    );
    assert_eq!(field("no_proxy"), "example.internal,127.0.0.1|127.0.0.1");
    assert_eq!(
        field("admin"),
        "absent",
        "the agent must never see the admin JWT"
    );
    assert!(
        !Path::new(&field("path")).exists(),
        "the config file must be removed when the run ends"
    );
}

#[test]
fn the_exit_status_of_cmd_is_passed_on_even_when_it_crashes() {
    let serve = Serve::start();
    let admin = serve.admin_token("platform-admin", None);
    for (script, expected, run_id) in [
        ("exit 7", 7, "exits-7"),
        ("kill -SEGV $$", 128 + 11, "crashes"),
    ] {
        let out = run(corkboard_run(
            &[
                "--server",
                serve.url(),
                "--tenant",
                "acme",
                "--run",
                run_id,
                "--caps",
                "issues:read",
            ],
            &["sh", "-c", script],
        )
        .env("CORKBOARD_ADMIN_TOKEN", &admin));
        assert_eq!(
            out.status.code(),
            Some(expected),
            "{script}: {}",
            stderr_of(&out)
        );
        let grants = grants_of(&serve, "acme", run_id);
        assert_eq!(grants[0]["status"], "revoked", "{script}: {grants:?}");
    }
    let out = run(corkboard_run(
        &["--tenant", "acme", "--caps", "issues:read"],
        &["/nonexistent/agent"],
    )
    .current_dir(tempfile::tempdir().unwrap().path()));
    assert_eq!(out.status.code(), Some(127), "{}", stderr_of(&out));
}

#[test]
fn sigterm_and_sigint_are_forwarded_and_the_run_is_revoked() {
    let serve = Serve::start();
    let admin = serve.admin_token("platform-admin", None);
    for (signal, run_id, code) in [("TERM", "signalled-term", 42), ("INT", "signalled-int", 43)] {
        let script = format!(
            "trap 'echo got-{signal}; exit {code}' {signal}; echo ready; while true; do sleep 0.05; done"
        );
        let mut cmd = corkboard_run(
            &[
                "--server",
                serve.url(),
                "--tenant",
                "acme",
                "--run",
                run_id,
                "--caps",
                "issues:read",
            ],
            &["sh", "-c", &script],
        );
        cmd.env("CORKBOARD_ADMIN_TOKEN", &admin)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = cmd.spawn().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        assert_eq!(lines.next().unwrap().unwrap(), "ready");
        let runs: Value = http()
            .get(format!("{}/v1/runs?tenant=acme", serve.url()))
            .bearer_auth(&admin)
            .send()
            .unwrap()
            .json()
            .unwrap();
        assert!(
            runs["runs"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["run"] == run_id),
            "{runs}"
        );
        let pid = child.id().to_string();
        assert!(
            Command::new("kill")
                .args([&format!("-{signal}"), &pid])
                .status()
                .unwrap()
                .success()
        );
        let status = wait_timeout(&mut child, Duration::from_secs(30))
            .expect("corkboard run exits after the signal");
        assert_eq!(status.code(), Some(code), "{signal}");
        assert_eq!(lines.next().unwrap().unwrap(), format!("got-{signal}"));
        let grants = grants_of(&serve, "acme", run_id);
        assert_eq!(grants[0]["status"], "revoked", "{signal}: {grants:?}");
    }
}

/// The environment a child printed with `env`: name to value.
fn env_of(stdout: &str) -> std::collections::BTreeMap<String, String> {
    stdout
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

#[test]
fn cmd_gets_only_the_allow_list_its_run_and_what_is_passed_by_name() {
    let empty_cwd = tempfile::tempdir().unwrap();
    let secret = format!("s3cret-{}", std::process::id());
    let with_secrets = |cmd: &mut Command| {
        cmd.env(
            "CORKBOARD_MONGODB_URI",
            format!("mongodb://board:{secret}@db.internal/corkboard"),
        )
        .env(
            "CORKBOARD_REDIS_URL",
            format!("redis://:{secret}@redis.internal:6379"),
        )
        .env("CORKBOARD_ADMIN_TOKEN", format!("jwt-{secret}"))
        .env("SOME_SECRET", &secret)
        .env("ANTHROPIC_API_KEY", format!("sk-{secret}"))
        .env("OTHER_KEY", format!("other-{secret}"))
        .env("HOME", "/home/agent-test")
        .env("LANG", "C.UTF-8")
        .env("LC_TIME", "C")
        .env("TERM", "dumb")
        .env("TZ", "UTC")
        .current_dir(empty_cwd.path());
    };

    // Without --pass-env: none of the operator's secrets, every allowed name.
    let mut cmd = corkboard_run(&["--tenant", "acme", "--caps", "issues:read"], &["env"]);
    with_secrets(&mut cmd);
    let out = run(&mut cmd);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let stdout = stdout_of(&out);
    assert!(
        !stdout.contains(&secret),
        "the agent saw a secret of the operator's environment:\n{stdout}"
    );
    let env = env_of(&stdout);
    for name in [
        "CORKBOARD_MONGODB_URI",
        "CORKBOARD_REDIS_URL",
        "CORKBOARD_ADMIN_TOKEN",
        "CORKBOARD_LOG",
        "SOME_SECRET",
        "ANTHROPIC_API_KEY",
    ] {
        assert!(!env.contains_key(name), "{name} reached the agent: {env:?}");
    }
    assert_eq!(env["HOME"], "/home/agent-test");
    assert_eq!(env["LANG"], "C.UTF-8");
    assert_eq!(env["LC_TIME"], "C");
    assert_eq!(env["TERM"], "dumb");
    assert_eq!(env["TZ"], "UTC");
    assert_eq!(env["PATH"], std::env::var("PATH").unwrap());
    assert!(env["CORKBOARD_TOKEN"].starts_with("cbr_"), "{env:?}");
    for name in [
        "CORKBOARD_MCP_URL",
        "CORKBOARD_MCP_CONFIG",
        "CORKBOARD_MCP_CONFIG_JSON",
        "NO_PROXY",
        "no_proxy",
    ] {
        assert!(env.contains_key(name), "{name} missing: {env:?}");
    }

    // --pass-env passes exactly the names given (one not set is skipped).
    let mut cmd = corkboard_run(
        &[
            "--tenant",
            "acme",
            "--caps",
            "issues:read",
            "--pass-env",
            "ANTHROPIC_API_KEY",
            "--pass-env",
            "NOT_SET_ANYWHERE",
        ],
        &["env"],
    );
    with_secrets(&mut cmd);
    let out = run(&mut cmd);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let env = env_of(&stdout_of(&out));
    assert_eq!(env["ANTHROPIC_API_KEY"], format!("sk-{secret}"));
    for name in ["OTHER_KEY", "SOME_SECRET", "NOT_SET_ANYWHERE"] {
        assert!(!env.contains_key(name), "{name} reached the agent: {env:?}");
    }
    let passed: Vec<&String> = env.values().filter(|v| v.contains(&secret)).collect();
    assert_eq!(passed.len(), 1, "{env:?}");

    // Our own variables are never passable: refused before CMD starts.
    for name in ["CORKBOARD_MONGODB_URI", "corkboard_redis_url", "BAD-NAME"] {
        let mut cmd = corkboard_run(
            &[
                "--tenant",
                "acme",
                "--caps",
                "issues:read",
                "--pass-env",
                name,
            ],
            &["sh", "-c", "echo started"],
        );
        with_secrets(&mut cmd);
        let out = run(&mut cmd);
        assert!(!out.status.success(), "--pass-env {name} was accepted");
        assert!(!stdout_of(&out).contains("started"), "{name}");
        assert!(
            stderr_of(&out).contains("--pass-env"),
            "{}",
            stderr_of(&out)
        );
    }
}

/// A run whose grant lives 3 s and a command that lives about 8 s and
/// calls the board only at the end: `corkboard run` renews the grant (same
/// token) while the command lives, so the call works; afterwards the grant
/// is revoked as always, and it was renewed past its first expiry.
fn a_run_outliving_its_ttl_keeps_working(flags: &[&str], serve: Option<&Serve>) -> (String, Value) {
    let scratch = tempfile::tempdir().unwrap();
    let record = scratch.path().join("handout");
    let agent = recording_agent(&record, "py_client.py", "--mode auto");
    let mut late_agent = agent.clone();
    // Sleep first: the call comes well past the grant's first expiry.
    late_agent[2] = format!("sleep 8 && {}", agent[2]);
    let late_agent: Vec<&str> = late_agent.iter().map(String::as_str).collect();
    let mut all_flags = vec!["--tenant", "acme", "--caps", ALL_CAPS, "--ttl", "3s"];
    all_flags.extend_from_slice(flags);
    let mut cmd = corkboard_run(&all_flags, &late_agent);
    if let Some(serve) = serve {
        cmd.env(
            "CORKBOARD_ADMIN_TOKEN",
            serve.admin_token("platform-admin", None),
        );
    }
    let started = std::time::Instant::now();
    let out = run(&mut cmd);
    assert!(
        out.status.success(),
        "corkboard run failed: {}\n{}",
        stdout_of(&out),
        stderr_of(&out)
    );
    assert!(started.elapsed() >= Duration::from_secs(8));
    let result = json_line(&stdout_of(&out));
    assert_eq!(
        result["ok"],
        true,
        "the board refused the run after its first expiry: {result}\n{}",
        stderr_of(&out)
    );
    let handout = std::fs::read_to_string(&record).unwrap();
    let (token, _) = handout.split_once(' ').unwrap();
    (token.to_owned(), result)
}

fn millis_between(from: &Value, to: &Value) -> i64 {
    let at = |v: &Value| {
        corkboard_board::Timestamp::parse_rfc3339(v.as_str().expect("an instant"))
            .expect("RFC 3339")
            .as_millis()
    };
    at(to) - at(from)
}

#[test]
fn a_run_through_serve_is_renewed_while_its_command_lives_and_revoked_after() {
    let serve = Serve::start();
    let (token, _) = a_run_outliving_its_ttl_keeps_working(
        &["--server", serve.url(), "--run", "long-agent"],
        Some(&serve),
    );
    let grants = grants_of(&serve, "acme", "long-agent");
    assert_eq!(grants.len(), 1, "renewal issued no new grant: {grants:?}");
    assert_eq!(grants[0]["status"], "revoked", "{grants:?}");
    let lived = millis_between(&grants[0]["created_at"], &grants[0]["expires_at"]);
    assert!(
        lived > 8_000,
        "the grant was not renewed past its 3 s lifetime: {grants:?}"
    );
    let (status, _) = mcp_list(&format!("{}/mcp", serve.url()), &token);
    assert_eq!(
        status, 403,
        "the run's token must be refused after it ended"
    );
}

#[test]
fn an_in_process_run_is_renewed_while_its_command_lives() {
    let dir = tempfile::tempdir().unwrap();
    a_run_outliving_its_ttl_keeps_working(
        &[
            "--run",
            "long-local",
            "--data-dir",
            dir.path().to_str().unwrap(),
        ],
        None,
    );
    let out = run(corkboard()
        .args(["grant", "list", "--tenant", "acme", "--json", "--data-dir"])
        .arg(dir.path()));
    let listed: Value = serde_json::from_str(&stdout_of(&out)).expect("grant list JSON");
    let grants = listed["grants"].as_array().cloned().unwrap_or_default();
    assert_eq!(grants.len(), 1, "{grants:?}");
    assert_eq!(grants[0]["status"], "revoked", "{grants:?}");
    let lived = millis_between(&grants[0]["created_at"], &grants[0]["expires_at"]);
    assert!(lived > 8_000, "not renewed: {grants:?}");
}

/// An agent that calls `create_issue` twice on its run's endpoint (the
/// 2026-07-28 stateless way) and prints each answer's `isError` and text.
fn two_creates_agent() -> Vec<String> {
    let script = r#"
import json, os, urllib.request
def create(title):
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "create_issue", "arguments": {"title": title},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}}
    req = urllib.request.Request(os.environ["CORKBOARD_MCP_URL"], data=json.dumps(body).encode(), headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "create_issue",
        "Authorization": "Bearer " + os.environ["CORKBOARD_TOKEN"]})
    result = json.load(urllib.request.urlopen(req))["result"]
    return [result["isError"], result["content"][0]["text"]]
print(json.dumps({"answers": [create("first"), create("second")]}))
"#;
    vec![
        venv_python().display().to_string(),
        "-c".into(),
        script.into(),
    ]
}

fn assert_second_create_refused(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{}\n{}",
        stdout_of(out),
        stderr_of(out)
    );
    let answers = json_line(&stdout_of(out))["answers"].clone();
    assert_eq!(answers[0][0], false, "{answers}");
    assert_eq!(answers[1][0], true, "{answers}");
    assert!(
        answers[1][1]
            .as_str()
            .unwrap()
            .starts_with("this run may create at most 1 issue; 1 created"),
        "{answers}"
    );
}

#[test]
fn corkboard_run_budgets_bound_what_the_agent_writes_in_process_and_through_serve() {
    let agent = two_creates_agent();
    let agent: Vec<&str> = agent.iter().map(String::as_str).collect();
    let dir = tempfile::tempdir().unwrap();
    let out = run(&mut corkboard_run(
        &[
            "--tenant",
            "acme",
            "--caps",
            "issues:read,issues:create",
            "--budgets",
            "create_issue=1",
            "--data-dir",
            dir.path().to_str().unwrap(),
        ],
        &agent,
    ));
    assert_second_create_refused(&out);

    // Through a server's register API, where the tenant's run_budgets cap
    // the ask (5 asked, the tenant allows 1).
    let serve = Serve::start();
    let admin = serve.admin_token("platform-admin", None);
    let response = http()
        .put(format!("{}/v1/tenants/acme/settings", serve.url()))
        .bearer_auth(&admin)
        .json(&serde_json::json!({ "run_budgets": { "create_issue": 1 } }))
        .send()
        .unwrap();
    assert_eq!(response.status(), 200);
    let out = run(corkboard_run(
        &[
            "--server",
            serve.url(),
            "--tenant",
            "acme",
            "--caps",
            "issues:read,issues:create",
            "--budgets",
            "create_issue=5",
        ],
        &agent,
    )
    .env("CORKBOARD_ADMIN_TOKEN", &admin));
    assert_second_create_refused(&out);
    // A bad budget is refused before anything starts.
    let out = run(&mut corkboard_run(
        &[
            "--tenant",
            "acme",
            "--caps",
            "issues:read",
            "--budgets",
            "create_issue=x",
        ],
        &["true"],
    ));
    assert!(!out.status.success());
    assert!(stderr_of(&out).contains("--budgets"), "{}", stderr_of(&out));
}

#[test]
fn an_invalid_run_budgets_in_the_config_ends_an_in_process_run_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("cmd-ran");
    let cmd = format!("touch {}", marker.display());
    // With a board (the data dir) and without one (a data dir that does
    // not exist, which used to leave the run boardless and budgetless):
    // both refuse before CMD starts.
    let missing = dir.path().join("missing");
    for data_dir in [dir.path(), missing.as_path()] {
        let out = run(corkboard_run(
            &[
                "--tenant",
                "acme",
                "--caps",
                "issues:read,issues:create",
                "--data-dir",
                data_dir.to_str().unwrap(),
            ],
            &["sh", "-c", &cmd],
        )
        .env("CORKBOARD_RUN_BUDGETS", "delete_issue=1"));
        let stderr = stderr_of(&out);
        // A configuration error: a failure (1), not a usage error.
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("run_budgets"), "{stderr}");
        assert!(!stderr.contains("no board for this run"), "{stderr}");
        assert!(!marker.exists(), "CMD ran: {stderr}");
    }
    // The same config with a valid run_budgets runs CMD.
    let out = run(corkboard_run(
        &[
            "--tenant",
            "acme",
            "--caps",
            "issues:read",
            "--data-dir",
            dir.path().to_str().unwrap(),
        ],
        &["sh", "-c", &cmd],
    )
    .env("CORKBOARD_RUN_BUDGETS", "create_issue=1"));
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert!(marker.exists());
}
