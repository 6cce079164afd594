//! Black-box: the web board of `corkboard serve` in a real headless
//! Chromium, while a real MCP client writes to the board.
//!
//! The browser part is `tests/clients/web/board.spec.mjs` (playwright-core
//! driving `/usr/bin/chromium`, `@modelcontextprotocol/sdk` as the agent);
//! this test starts the server, hands the script its sign-in link, tokens
//! and admin JWTs (through the environment, never the command line), and
//! asserts on the JSON summary it prints. Screenshots of the main pages are
//! kept under `target/web-artifacts/`.

use crate::support;

use serde_json::Value;
use std::process::Command;
use std::time::{Duration, Instant};
use support::*;

const CHROMIUM: &str = "/usr/bin/chromium";
const AGENT_RUN: &str = "web-agent";
const OTHER_RUN: &str = "globex-agent";

/// Fails (never skips) with what to install when the browser stack is missing.
fn require_browser_stack() {
    let clients = repo_root().join("tests/clients/node_modules");
    assert!(
        std::path::Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: install Debian `chromium` (scripts/setup-test-deps does)"
    );
    for package in ["playwright-core", "@modelcontextprotocol/sdk"] {
        assert!(
            clients.join(package).join("package.json").exists(),
            "npm package {package} is missing in tests/clients: run `npm ci` there (scripts/setup-test-deps does)"
        );
    }
    let node = Command::new("node").arg("--version").output();
    assert!(
        node.map(|o| o.status.success()).unwrap_or(false),
        "`node` is missing: install Node.js 20 or later"
    );
}

/// The sign-in link `corkboard serve` prints at start-up.
fn signin_link(serve: &Serve) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        let Ok(line) = serve.process.lines.recv_timeout(left) else {
            break;
        };
        if let Some(at) = line.find("http").filter(|_| line.contains("/signin?code=")) {
            return line[at..]
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_owned();
        }
        seen.push(line);
    }
    panic!(
        "`corkboard serve` printed no sign-in link (a line with /signin?code=); it printed:\n{}",
        seen.join("\n")
    );
}

#[test]
fn the_web_board_works_in_a_real_browser() {
    require_browser_stack();
    let serve = Serve::start();
    let link = signin_link(&serve);
    assert!(
        link.starts_with(&format!("{}/signin?code=", serve.url())),
        "{link}"
    );

    let agent = serve.grant(
        "acme",
        AGENT_RUN,
        "issues:read,issues:create,issues:update,comments:write,issues:claim",
    );
    let other = serve.grant("globex", OTHER_RUN, "issues:read,issues:create");
    let viewer = serve.admin_token("viewer", Some("acme"));
    let tenant_admin = serve.admin_token("tenant-admin", Some("acme"));

    let artifacts = repo_root().join("target/web-artifacts");
    std::fs::create_dir_all(&artifacts).expect("create target/web-artifacts");
    let out = run(Command::new("node")
        .current_dir(repo_root().join("tests/clients"))
        .arg("web/board.spec.mjs")
        .args([
            "--url",
            serve.url(),
            "--signin",
            &link,
            "--mcp-url",
            &agent.mcp_url,
            "--run",
            AGENT_RUN,
        ])
        .args(["--tenant", "acme", "--other-tenant", "globex"])
        .arg("--artifacts")
        .arg(&artifacts)
        .env("WEB_TEST_RUN_TOKEN", &agent.token)
        .env("WEB_TEST_OTHER_TOKEN", &other.token)
        .env("WEB_TEST_VIEWER_JWT", &viewer)
        .env("WEB_TEST_TENANT_ADMIN_JWT", &tenant_admin));
    let stdout = stdout_of(&out);
    let stderr = stderr_of(&out);
    let summary: Value = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| {
            panic!(
                "the browser script printed no JSON summary\nstdout:\n{stdout}\nstderr:\n{stderr}"
            )
        });
    assert_eq!(
        summary["ok"], true,
        "browser scenario failed: {}\nstderr:\n{stderr}",
        summary["error"]
    );
    assert!(
        out.status.success(),
        "browser script exit status {:?}\nstderr:\n{stderr}",
        out.status
    );

    let checks = &summary["checks"];
    for name in [
        "signin",
        "signin_link_single_use",
        "empty_state",
        "live_create",
        "move_persists",
        "live_update",
        "conflict",
        "xss",
        "search",
        "work",
        "csrf",
        "viewer",
        "cross_tenant",
        "usable",
        "long_column",
        "relations",
        "layout_wide",
        "column_paging",
        "layout_phone",
        "revoke_run",
    ] {
        assert!(
            !checks[name].is_null(),
            "check {name} did not run: {summary}"
        );
    }
    assert_eq!(checks["signin"]["cookie"]["httpOnly"], true);
    assert_eq!(checks["signin"]["cookie"]["sameSite"], "Strict");
    assert_eq!(checks["viewer"]["forged_revoke_status"], 403);
    // The layout rules, measured in the page (board.spec.mjs): at 1400x900
    // no card title is taller than three lines; on a phone nothing but the
    // page scrolls and the filters are folded; a long column's total is the
    // column's, and loading more of it asks for that column alone.
    assert!(
        matches!(checks["layout_wide"]["max_lines"].as_u64(), Some(1..=3)),
        "{}",
        checks["layout_wide"]
    );
    assert_eq!(
        checks["layout_phone"]["scrollers"],
        serde_json::json!([]),
        "{}",
        checks["layout_phone"]
    );
    assert_eq!(checks["layout_phone"]["filters_open"], false);
    assert_eq!(checks["column_paging"]["first"]["total"], "80");
    assert_eq!(checks["column_paging"]["first"]["cards"], 25);
    assert_eq!(checks["column_paging"]["requests"], 1);
    // Latencies are reported for the record; a busy machine must not fail the test.
    eprintln!(
        "web: MCP-created issue shown after {} ms, update after {} ms",
        checks["live_create"]["appeared_after_ms"], checks["live_update"]["appeared_after_ms"]
    );
    for shot in [
        "signin",
        "empty-state",
        "board",
        "issue",
        "conflict",
        "grants",
        "grants-viewer",
        "cross-tenant",
        "board-1400",
        "board-phone",
        "relations-links",
    ] {
        let path = artifacts.join(format!("{shot}.png"));
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        assert!(
            size > 1000,
            "screenshot {} is missing or empty",
            path.display()
        );
    }

    // Outside the browser too: the run revoked from the page is refused on
    // the MCP endpoint, and the other tenant's run is untouched.
    let initialize = mcp::initialize(1, "2025-06-18", serde_json::json!({}), ("web-test", "1"));
    let post = |token: &str| {
        http()
            .post(&agent.mcp_url)
            .bearer_auth(token)
            .header("Accept", mcp::ACCEPT)
            .json(&initialize)
            .send()
            .expect("MCP endpoint answers")
            .status()
            .as_u16()
    };
    let refused = post(&agent.token);
    assert!(
        refused == 401 || refused == 403,
        "the revoked run's token must be refused, got {refused}"
    );
    assert_eq!(
        post(&other.token),
        200,
        "the other tenant's token must still work"
    );
}

/// People act on the board in a real browser: file, comment, edit, release,
/// close and reopen, hand over; the agent's `get_issue` and a webhook show
/// the person as author (`tests/clients/web/people.spec.mjs`).
#[test]
fn people_act_on_the_web_board_in_a_real_browser() {
    require_browser_stack();
    let serve = Serve::start_with_env(&[("CORKBOARD_WEBHOOK_ALLOWED_HOSTS", "127.0.0.1")]);
    let link = signin_link(&serve);
    let agent = serve.grant(
        "acme",
        "people-agent",
        "issues:read,issues:create,issues:update,comments:write,issues:claim",
    );
    serve.grant("acme", "people-second", "issues:read,issues:claim");
    let viewer = serve.admin_token("viewer", Some("acme"));
    let out = run(Command::new("node")
        .current_dir(repo_root().join("tests/clients"))
        .arg("web/people.spec.mjs")
        .args(["--url", serve.url(), "--signin", &link])
        .args(["--mcp-url", &agent.mcp_url, "--run", "people-agent"])
        .args(["--second-run", "people-second", "--tenant", "acme"])
        .env("WEB_TEST_RUN_TOKEN", &agent.token)
        .env("WEB_TEST_VIEWER_JWT", &viewer));
    let stdout = stdout_of(&out);
    let stderr = stderr_of(&out);
    let summary: Value = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| {
            panic!(
                "the browser script printed no JSON summary\nstdout:\n{stdout}\nstderr:\n{stderr}"
            )
        });
    assert_eq!(
        summary["ok"], true,
        "browser scenario failed: {}\nstderr:\n{stderr}",
        summary["error"]
    );
    let checks = &summary["checks"];
    for name in [
        "create", "comment", "edit", "release", "reopen", "handover", "audit", "refused",
    ] {
        assert!(
            !checks[name].is_null(),
            "check {name} did not run: {summary}"
        );
    }
    assert_eq!(checks["comment"]["agent_sees"]["kind"], "person");
    assert_eq!(checks["refused"]["no_csrf"], 403);
    assert_eq!(checks["refused"]["viewer"], 403);
}

/// A tenant admin approves a changed upstream tool on the web board
/// (`tests/clients/web/upstream_tools.spec.mjs` in Chromium): a Python SDK
/// upstream's `forecast`, approved at its first listing, changes its
/// description, so runs lose it; the page shows what changed and both
/// definitions, a viewer cannot approve, a write without the CSRF token is
/// refused, and the tenant admin's approval serves the tool to the run
/// again and is audited with the person as its author.
#[test]
fn a_tenant_admin_approves_a_changed_upstream_tool_in_a_real_browser() {
    use support::upstreams::{register_python_upstream, serve_with, start_python_upstream_with};
    require_browser_stack();
    let served = serve_with(&[("CORKBOARD_UPSTREAM_TOOLS_TTL_MS", "500")]);
    let admin = served.admin_token();
    let py = start_python_upstream_with(&[("UPSTREAM_RUG_PULL", "1")]);
    register_python_upstream(&served.url, &admin, "acme", "py", py.port);
    let (url, token) = served.register_run(&admin, "web-pin-1", &["upstream:py:forecast"]);
    let listed = || -> bool {
        let (status, body) = mcp_list(&url, &token);
        assert_eq!(status, 200, "{body}");
        body["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "py__forecast")
    };
    let wait = |what: &str, want: bool| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while listed() != want {
            assert!(Instant::now() < deadline, "{what} within 30 s");
            std::thread::sleep(Duration::from_millis(300));
        }
    };
    wait("the first listing is approved and served", true);
    let pulled = http()
        .post(format!("http://127.0.0.1:{}/rug-pull", py.port))
        .header("x-upstream-key", support::upstreams::PY_CREDENTIAL)
        .send()
        .unwrap();
    assert!(pulled.status().is_success());
    wait("the changed tool is held back", false);

    let tenant_admin = served.admin_token_as("tenant-admin", Some("acme"));
    let viewer = served.admin_token_as("viewer", Some("acme"));
    let artifacts = repo_root().join("target/web-artifacts");
    std::fs::create_dir_all(&artifacts).expect("create target/web-artifacts");
    let out = run(Command::new("node")
        .current_dir(repo_root().join("tests/clients"))
        .arg("web/upstream_tools.spec.mjs")
        .args(["--url", &served.url, "--tenant", "acme"])
        .args(["--upstream", "py", "--tool", "forecast"])
        .arg("--artifacts")
        .arg(&artifacts)
        .env("WEB_TEST_TENANT_ADMIN_JWT", &tenant_admin)
        .env("WEB_TEST_VIEWER_JWT", &viewer));
    let stdout = stdout_of(&out);
    let stderr = stderr_of(&out);
    let summary: Value = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no JSON summary\nstdout:\n{stdout}\nstderr:\n{stderr}"));
    assert_eq!(
        summary["ok"], true,
        "browser scenario failed: {}\nstderr:\n{stderr}",
        summary["error"]
    );
    let checks = &summary["checks"];
    assert_eq!(checks["viewer"]["forged_status"], 403, "{summary}");
    assert_eq!(checks["csrf"]["status"], 403, "{summary}");
    let hash = checks["approved"]["hash"].as_str().unwrap().to_owned();
    let subject = checks["approved"]["subject"].as_str().unwrap().to_owned();

    wait("the approved definition is served again", true);
    // Audited like the people's other actions: the person as its run, no
    // grant, the approved definition's hash.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let audit: Value = http()
            .get(format!("{}/v1/tenants/acme/audit?limit=100", served.url))
            .bearer_auth(&admin)
            .send()
            .unwrap()
            .json()
            .unwrap();
        let found = audit["records"].as_array().unwrap().iter().any(|r| {
            r["tool"] == "approve_upstream_tool"
                && r["outcome"] == "ok"
                && r["run"] == subject.as_str()
                && r["grant"] == "gr_00000000000000000000000000"
                && r["definition_hash"] == hash.as_str()
        });
        if found {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no approval audit record: {audit}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}
