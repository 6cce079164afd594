//! The examples in `examples/` run against the real binary: the orchestrator
//! example grants two runs, lets each file an issue through the official
//! MCP Python SDK, revokes them and checks their tokens are refused; the
//! curl example files an issue by hand.

use crate::support::{Serve, corkboard_bin, repo_root, run, stderr_of, stdout_of};
use serde_json::Value;
use std::process::Command;

#[test]
fn the_orchestrator_example_grants_works_and_revokes() {
    let serve = Serve::start();
    let root = repo_root();
    let python = root.join("target/venv/bin/python");
    assert!(
        python.exists(),
        "target/venv is missing: run scripts/setup-test-deps"
    );
    let out = run(Command::new(python)
        .arg(root.join("examples/orchestrator.py"))
        .arg("--corkboard")
        .arg(corkboard_bin())
        .arg("--data-dir")
        .arg(serve.data_dir.path())
        .args(["--runs", "2"]));
    let (stdout, stderr) = (stdout_of(&out), stderr_of(&out));
    assert!(
        out.status.success(),
        "the example failed:\n{stdout}\n{stderr}"
    );
    for run in ["example-run-1", "example-run-2"] {
        assert!(stdout.contains(&format!("{run}: filed iss_")), "{stdout}");
        assert!(
            stdout.contains(&format!("{run}: revoked; its token is refused")),
            "{stdout}"
        );
    }
}

#[test]
fn the_curl_example_files_an_issue() {
    let serve = Serve::start();
    let granted = serve.grant("acme", "curl-run", "issues:read,issues:create");
    let out = run(Command::new("bash")
        .arg(repo_root().join("examples/first-call.sh"))
        .arg(r#"Quotes " and \ backslashes survive"#)
        .env("CORKBOARD_MCP_URL", &granted.mcp_url)
        .env("CORKBOARD_TOKEN", &granted.token));
    let stdout = stdout_of(&out);
    assert!(out.status.success(), "{stdout}\n{}", stderr_of(&out));
    let answer: Value = serde_json::from_str(stdout.trim()).unwrap();
    let issue = &answer["result"]["structuredContent"];
    assert_eq!(
        issue["title"], r#"Quotes " and \ backslashes survive"#,
        "{answer}"
    );
    assert!(
        issue["id"].as_str().unwrap().starts_with("iss_"),
        "{answer}"
    );
}
