//! Black-box: the CLI cannot mislead an operator (issue 34 items 1, 3, 4).
//! One data dir found the same way from any working directory, never a
//! second board made by a client command; one `serve` per data dir;
//! advertised URLs that reach something; exit codes by kind of failure;
//! completions, man pages and help generated from the definition; the
//! `issue` commands, locally and against `--server`.

use crate::support;

use serde_json::Value;
use std::process::Output;
use std::time::Duration;
use support::*;

/// The banner lines after the first (`listening on ...`), up to the last
/// one `serve` prints.
fn banner(running: &Running) -> Vec<String> {
    let mut lines = Vec::new();
    while let Ok(line) = running.lines.recv_timeout(Duration::from_secs(10)) {
        let done = line.starts_with("hand an agent its board");
        lines.push(line);
        if done {
            break;
        }
    }
    lines
}

fn line_with<'a>(lines: &'a [String], prefix: &str) -> &'a str {
    lines
        .iter()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no `{prefix}` line in {lines:#?}"))
}

fn code(out: &Output) -> i32 {
    out.status.code().expect("exited, not killed")
}

fn json_of(out: &Output) -> Value {
    serde_json::from_str(&stdout_of(out))
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", stdout_of(out), stderr_of(out)))
}

#[test]
fn a_client_command_in_another_working_directory_finds_the_running_board() {
    let serve_cwd = tempfile::tempdir().unwrap();
    let other_cwd = tempfile::tempdir().unwrap();
    // No --data-dir anywhere: the per-user default, whatever the cwd.
    let mut cmd = corkboard();
    cmd.current_dir(serve_cwd.path())
        .args(["serve", "--listen", "127.0.0.1:0"]);
    let serve = Running::spawn(cmd);
    let lines = banner(&serve);
    let data_dir = test_data_home().join("corkboard");
    assert_eq!(
        line_with(&lines, "data dir: "),
        format!("data dir: {}", data_dir.display())
    );
    assert!(
        !serve_cwd.path().join(".corkboard").exists(),
        "serve made a board in its working directory"
    );
    // The banner names the board and registry in use, and a grant command
    // that works as printed (absolute paths).
    assert_eq!(
        line_with(&lines, "board: "),
        format!(
            "board: SQLite, {}",
            data_dir.join("board.sqlite3").display()
        )
    );
    assert!(line_with(&lines, "token registry: ").contains("in-process"));
    let hint = line_with(&lines, "hand an agent its board: ");
    let printed = hint
        .split('`')
        .nth(1)
        .expect("a command in backquotes")
        .replace("<tenant>", "acme")
        .replace("<run>", "run-1");
    assert!(
        printed.contains(&format!("--data-dir {}", data_dir.display())),
        "{printed}"
    );
    let mut words = printed.split_whitespace();
    assert_eq!(words.next(), Some("corkboard"));
    let out = run(corkboard()
        .current_dir(other_cwd.path())
        .args(words)
        .arg("--json"));
    assert!(out.status.success(), "{}", stderr_of(&out));
    let granted = parse_granted(&stdout_of(&out));
    assert_eq!(granted.mcp_url, format!("{}/mcp", serve.url));

    // The same without any flag, from the other directory: the same board,
    // whose server accepts the token.
    let out = run(corkboard().current_dir(other_cwd.path()).args([
        "grant",
        "create",
        "--tenant",
        "acme",
        "--run",
        "run-2",
        "--caps",
        "issues:read",
        "--json",
    ]));
    assert!(out.status.success(), "{}", stderr_of(&out));
    let granted = parse_granted(&stdout_of(&out));
    let (status, listed) = mcp_list(&granted.mcp_url, &granted.token);
    assert_eq!(status, 200, "{listed}");
    assert!(!other_cwd.path().join(".corkboard").exists());

    // A data dir without a board: refused, and nothing is made there.
    let empty = other_cwd.path().join("no-board");
    let out = run(corkboard()
        .args([
            "grant", "create", "--tenant", "acme", "--run", "r", "--caps",
        ])
        .args(["issues:read", "--data-dir"])
        .arg(&empty));
    assert_eq!(code(&out), 1, "{}", stderr_of(&out));
    let err = stderr_of(&out);
    assert!(
        err.contains(&format!(
            "no board at {}",
            empty.join("board.sqlite3").display()
        )) && err.contains("corkboard serve"),
        "{err}"
    );
    assert!(!empty.exists(), "a client command made a data dir");
    let out = run(corkboard()
        .args(["admin", "token", "--role", "platform-admin", "--data-dir"])
        .arg(&empty));
    assert_eq!(code(&out), 1, "{}", stderr_of(&out));
    assert!(!empty.exists(), "admin token made a signing secret");
}

#[test]
fn a_second_serve_on_a_held_data_dir_is_refused_naming_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let serve = |listen: &str| {
        let mut cmd = corkboard();
        cmd.args(["serve", "--listen", listen, "--data-dir"])
            .arg(dir.path());
        cmd
    };
    let first = Running::spawn(serve("127.0.0.1:0"));
    let pid = first.child.id();
    let out = run(&mut serve("127.0.0.1:0"));
    assert_eq!(code(&out), 1, "{}", stderr_of(&out));
    let err = stderr_of(&out);
    assert!(
        err.contains(&format!("pid {pid}")) && err.contains(&first.url),
        "{err}"
    );
    assert!(err.contains(&dir.path().display().to_string()), "{err}");
    // The first is untouched and still serves.
    let health = http().get(format!("{}/healthz", first.url)).send().unwrap();
    assert_eq!(health.status().as_u16(), 200);
    let first_url = first.url.clone();
    assert!(first.terminate().success());

    // Stopped: its record names a URL nobody answers, and client
    // commands no longer print it.
    let out = run(corkboard()
        .args(["grant", "create", "--tenant", "acme", "--run", "r1"])
        .args(["--caps", "issues:read", "--json", "--data-dir"])
        .arg(dir.path()));
    assert!(out.status.success(), "{}", stderr_of(&out));
    let granted = parse_granted(&stdout_of(&out));
    assert!(
        !granted.mcp_url.starts_with(&first_url),
        "a stopped server's URL: {}",
        granted.mcp_url
    );
    // And the data dir is free again: a new serve takes it (it announces
    // its address only once it holds the lock).
    let again = Running::spawn(serve("127.0.0.1:0"));
    assert_ne!(again.url, first_url);
}

#[test]
fn listening_on_every_address_advertises_a_url_that_reaches_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = corkboard();
    cmd.args(["serve", "--listen", "0.0.0.0:0", "--data-dir"])
        .arg(dir.path());
    let serve = Running::spawn(cmd);
    let port = serve.url.rsplit(':').next().unwrap().to_owned();
    let lines = banner(&serve);
    let signin = line_with(&lines, "sign in: ");
    assert!(
        signin.starts_with(&format!("sign in: http://127.0.0.1:{port}/signin?code=")),
        "{signin}"
    );
    assert!(
        lines.iter().any(|l| l.contains("--public-url")),
        "no hint to set --public-url: {lines:#?}"
    );
    let out = run(corkboard()
        .args(["grant", "create", "--tenant", "acme", "--run", "r1"])
        .args(["--caps", "issues:read", "--json", "--data-dir"])
        .arg(dir.path()));
    assert!(out.status.success(), "{}", stderr_of(&out));
    let granted = parse_granted(&stdout_of(&out));
    assert_eq!(granted.mcp_url, format!("http://127.0.0.1:{port}/mcp"));
    assert!(!granted.json.to_string().contains("0.0.0.0"));
    let (status, listed) = mcp_list(&granted.mcp_url, &granted.token);
    assert_eq!(status, 200, "{listed}");
}

#[test]
fn exit_codes_say_what_kind_of_failure_it_was() {
    let serve = Serve::start();
    serve.grant("acme", "run-real", "issues:read");
    let admin = serve.admin_token("platform-admin", None);
    let viewer = serve.admin_token("viewer", Some("acme"));
    let against = |token: Option<&str>, args: &[&str]| {
        let mut cmd = corkboard();
        cmd.args(args).args(["--server", serve.url()]);
        if let Some(token) = token {
            cmd.env("CORKBOARD_ADMIN_TOKEN", token);
        }
        run(&mut cmd)
    };
    let list = ["grant", "list", "--tenant", "acme"];

    // 0: success.
    assert_eq!(code(&against(Some(&admin), &list)), 0);
    // 2: usage, from the parser and from our own checks.
    assert_eq!(code(&run(corkboard().args(["grant", "list"]))), 2);
    let bad_tenant = serve.cli(&["grant", "list", "--tenant", "Not A Tenant"]);
    assert_eq!(code(&bad_tenant), 2, "{}", stderr_of(&bad_tenant));
    let bad_ttl = serve.cli(&[
        "grant",
        "create",
        "--tenant",
        "acme",
        "--run",
        "r",
        "--caps",
        "issues:read",
        "--ttl",
        "soon",
    ]);
    assert_eq!(code(&bad_ttl), 2, "{}", stderr_of(&bad_ttl));
    let bad_url = run(corkboard()
        .args(list)
        .args(["--server", "127.0.0.1:1"])
        .env("CORKBOARD_ADMIN_TOKEN", &admin));
    assert_eq!(code(&bad_url), 2, "{}", stderr_of(&bad_url));
    // 3: not found, locally and through the API.
    let missing_run = ["grant", "revoke", "--tenant", "acme", "--run", "run-reel"];
    assert_eq!(code(&serve.cli(&missing_run)), 3);
    assert_eq!(code(&against(Some(&admin), &missing_run)), 3);
    let missing_issue = [
        "issue",
        "view",
        "--tenant",
        "acme",
        "iss_01JZ0000000000000000000000",
    ];
    let local = serve.cli(&missing_issue);
    assert_eq!(code(&local), 3, "{}", stderr_of(&local));
    assert_eq!(code(&against(Some(&admin), &missing_issue)), 3);
    // 4: authentication: no token, a rejected token, a role that may not.
    let none = against(None, &list);
    assert_eq!(code(&none), 4, "{}", stderr_of(&none));
    assert!(stderr_of(&none).contains("CORKBOARD_ADMIN_TOKEN"));
    assert_eq!(code(&against(Some("not-a-jwt"), &list)), 4);
    let create = [
        "grant",
        "create",
        "--tenant",
        "acme",
        "--run",
        "r2",
        "--caps",
        "issues:read",
    ];
    assert_eq!(code(&against(Some(&viewer), &create)), 4);
    // 1: everything else (nothing listening; a bad configuration file).
    let port = {
        let socket = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        socket.local_addr().unwrap().port()
    };
    let unreachable = run(corkboard()
        .args(list)
        .args(["--server", &format!("http://127.0.0.1:{port}")])
        .env("CORKBOARD_ADMIN_TOKEN", &admin));
    assert_eq!(code(&unreachable), 1, "{}", stderr_of(&unreachable));
    let config = serve.data_dir.path().join("bad.toml");
    std::fs::write(&config, "no_such_key = 1\n").unwrap();
    let bad_config = serve.cli(&[
        "grant",
        "list",
        "--tenant",
        "acme",
        "--config",
        config.to_str().unwrap(),
    ]);
    assert_eq!(code(&bad_config), 1, "{}", stderr_of(&bad_config));

    // The codes are documented where the operator looks.
    let help = stdout_of(&run(corkboard().arg("--help")));
    for line in [
        "0  success",
        "2  usage",
        "3  not found",
        "4  authentication",
    ] {
        assert!(help.contains(line), "{line}: {help}");
    }
}

#[test]
fn completions_man_pages_and_help_come_from_the_definition() {
    for (shell, marker) in [
        ("bash", "_corkboard()"),
        ("zsh", "#compdef corkboard"),
        ("fish", "complete -c corkboard"),
    ] {
        let out = run(corkboard().args(["completions", shell]));
        assert!(out.status.success(), "{shell}: {}", stderr_of(&out));
        let script = stdout_of(&out);
        assert!(script.contains(marker), "{shell}: {script}");
        assert!(script.contains("claimed-by"), "{shell}: no issue flags");
    }
    let page = run(corkboard().arg("man"));
    assert!(page.status.success(), "{}", stderr_of(&page));
    assert!(stdout_of(&page).starts_with(".ie") || stdout_of(&page).contains(".TH corkboard"));
    let dir = tempfile::tempdir().unwrap();
    let out = run(corkboard().args(["man", "--dir"]).arg(dir.path()));
    assert!(out.status.success(), "{}", stderr_of(&out));
    for page in [
        "corkboard.1",
        "corkboard-grant-create.1",
        "corkboard-issue-list.1",
    ] {
        let text = std::fs::read_to_string(dir.path().join(page))
            .unwrap_or_else(|e| panic!("{page}: {e}"));
        assert!(text.contains(".TH"), "{page}");
    }

    // Help: examples, and a client command lists only its flags.
    let help = stdout_of(&run(corkboard().args(["grant", "create", "--help"])));
    assert!(help.contains("Examples:"), "{help}");
    assert!(
        help.contains("The tenant whose board the run may use"),
        "{help}"
    );
    for server_only in ["--listen", "--log-format", "--public-url"] {
        assert!(!help.contains(server_only), "{server_only}: {help}");
    }
    let serve_help = stdout_of(&run(corkboard().args(["serve", "--help"])));
    assert!(serve_help.contains("--listen"), "{serve_help}");
}

#[test]
fn grant_create_prints_just_the_agent_configuration_when_asked() {
    let serve = Serve::start();
    let out = serve.cli(&[
        "grant",
        "create",
        "--tenant",
        "acme",
        "--run",
        "r1",
        "--caps",
        "issues:read",
        "--mcp-config",
    ]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    // The whole of stdout is the file an MCP client reads.
    let config = json_of(&out);
    let server = &config["mcpServers"]["corkboard"];
    assert_eq!(server["url"], format!("{}/mcp", serve.url()));
    let token = server["headers"]["Authorization"]
        .as_str()
        .unwrap()
        .strip_prefix("Bearer ")
        .unwrap();
    let (status, _) = mcp_list(server["url"].as_str().unwrap(), token);
    assert_eq!(status, 200);
}

/// `corkboard issue ...` against the local data dir (`None`) or the admin
/// API as `admin`.
fn issue_cmd(serve: &Serve, admin: Option<&str>, args: &[&str]) -> Output {
    let mut cmd = corkboard();
    cmd.arg("issue").args(args).args(["--tenant", "acme"]);
    match admin {
        Some(token) => {
            cmd.args(["--server", serve.url()])
                .env("CORKBOARD_ADMIN_TOKEN", token);
        }
        None => {
            cmd.arg("--data-dir").arg(serve.data_dir.path());
        }
    }
    run(&mut cmd)
}

fn ok_json(out: Output) -> Value {
    assert!(out.status.success(), "{}", stderr_of(&out));
    json_of(&out)
}

fn issue_commands_work(serve: &Serve, admin: Option<&str>, worker: &Granted) {
    let how = if admin.is_some() { "remote" } else { "local" };
    let cmd = |args: &[&str]| issue_cmd(serve, admin, args);

    // create, in text and in JSON.
    let text = cmd(&["create", "--title", &format!("{how}: text")]);
    assert!(text.status.success(), "{}", stderr_of(&text));
    assert!(
        stdout_of(&text).starts_with("created issue "),
        "{}",
        stdout_of(&text)
    );
    let created = ok_json(cmd(&[
        "create",
        "--title",
        &format!("{how}: flaky test"),
        "--body",
        "fails one run in ten",
        "--label",
        "bug",
        "--label",
        "ci",
        "--priority",
        "high",
        "--json",
    ]));
    let id = created["id"].as_str().expect("id").to_owned();
    assert_eq!(created["state"], "inbox");
    assert_eq!(created["labels"], serde_json::json!(["bug", "ci"]));

    // list and view.
    let page = ok_json(cmd(&["list", "--label", "bug", "--json"]));
    assert!(
        page["issues"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["id"] == id.as_str()),
        "{page}"
    );
    let listed = stdout_of(&cmd(&["list"]));
    assert!(
        listed.contains(&id) && listed.contains("flaky test"),
        "{listed}"
    );

    // comment; view shows it.
    let comment = ok_json(cmd(&["comment", &id, "--body", "reproduced", "--json"]));
    assert_eq!(comment["body"], "reproduced");
    let view = ok_json(cmd(&["view", &id, "--json"]));
    assert_eq!(view["comments"][0]["body"], "reproduced", "{view}");
    let shown = stdout_of(&cmd(&["view", &id]));
    assert!(
        shown.contains("fails one run in ten") && shown.contains("reproduced"),
        "{shown}"
    );

    // claim for a run with a live grant; the agent sees it as its own.
    let claimed = ok_json(cmd(&["claim", &id, "--run", "worker", "--json"]));
    assert_eq!(claimed["claim"]["run"], "worker", "{claimed}");
    assert_eq!(claimed["claim"]["grant"], worker.grant_id.as_str());
    let (_, mine) = mcp_call(
        &worker.mcp_url,
        &worker.token,
        "list_issues",
        serde_json::json!({"claimed_by": "worker"}),
    );
    assert!(mine.to_string().contains(&id), "{mine}");
    // A run without a grant cannot be given an issue (not found: 3).
    let nobody = cmd(&["claim", &id, "--run", "nobody"]);
    assert_eq!(code(&nobody), 3, "{}", stderr_of(&nobody));
    assert!(
        stderr_of(&nobody).contains("no live grant"),
        "{}",
        stderr_of(&nobody)
    );
    // release (whoever holds it), then nothing to release (1).
    let released = ok_json(cmd(&["release", &id, "--json"]));
    assert!(released["claim"].is_null(), "{released}");
    let again = cmd(&["release", &id]);
    assert_eq!(code(&again), 1, "{}", stderr_of(&again));
    assert!(
        stderr_of(&again).contains("not claimed"),
        "{}",
        stderr_of(&again)
    );

    // close with a reason, then reopen.
    let closed = ok_json(cmd(&["close", &id, "--reason", "not_planned", "--json"]));
    assert_eq!(closed["state"], "closed");
    assert_eq!(closed["close_reason"], "not_planned");
    let reopened = cmd(&["reopen", &id]);
    assert!(reopened.status.success(), "{}", stderr_of(&reopened));
    assert!(
        stdout_of(&reopened).contains("(todo)"),
        "{}",
        stdout_of(&reopened)
    );
    let view = ok_json(cmd(&["view", &id, "--json"]));
    assert_eq!(view["state"], "todo");
    assert!(view["close_reason"].is_null(), "{view}");
    // Reopening an open issue is refused as a bad request (2).
    assert_eq!(code(&cmd(&["reopen", &id])), 2);
}

#[test]
fn issue_commands_work_locally_and_against_a_server() {
    let serve = Serve::start();
    let worker = serve.grant(
        "acme",
        "worker",
        "issues:read,issues:create,issues:update,comments:write,issues:claim",
    );
    issue_commands_work(&serve, None, &worker);
    let admin = serve.admin_token("tenant-admin", Some("acme"));
    issue_commands_work(&serve, Some(&admin), &worker);

    // Both ways wrote to the same board.
    let page = ok_json(issue_cmd(&serve, None, &["list", "--json"]));
    let titles = page.to_string();
    assert!(titles.contains("local: flaky test") && titles.contains("remote: flaky test"));

    // A viewer reads but may not write; another tenant's admin sees nothing.
    let viewer = serve.admin_token("viewer", Some("acme"));
    assert!(issue_cmd(&serve, Some(&viewer), &["list"]).status.success());
    assert_eq!(
        code(&issue_cmd(
            &serve,
            Some(&viewer),
            &["create", "--title", "no"]
        )),
        4
    );
    let globex = serve.admin_token("tenant-admin", Some("globex"));
    assert_eq!(code(&issue_cmd(&serve, Some(&globex), &["list"])), 4);
}

#[test]
fn the_banner_of_a_mongodb_board_names_it_and_a_grant_command_that_reaches_it() {
    let mongo = corkboard_testkit::MongoServer::start();
    let database = corkboard_testkit::unique_database("banner");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("corkboard.toml");
    std::fs::write(
        &config,
        format!(
            "store = \"mongodb\"\nmongodb_uri = \"{}\"\nmongodb_database = \"{database}\"\n",
            mongo.uri()
        ),
    )
    .unwrap();
    let data = dir.path().join("data");
    let mut cmd = corkboard();
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&config)
        .arg("--data-dir")
        .arg(&data);
    let serve = Running::spawn(cmd);
    let lines = banner(&serve);
    assert_eq!(
        line_with(&lines, "board: "),
        format!("board: MongoDB, database {database}")
    );
    assert!(
        !lines.iter().any(|l| l.contains("board.sqlite3")),
        "{lines:#?}"
    );
    // The printed command, run as printed from elsewhere, makes a grant
    // the server accepts (a SQLite board's grant would be refused: 403).
    let printed = line_with(&lines, "hand an agent its board: ")
        .split('`')
        .nth(1)
        .unwrap()
        .replace("<tenant>", "acme")
        .replace("<run>", "run-m");
    assert!(
        printed.contains(&format!("--config {}", config.display())),
        "{printed}"
    );
    let elsewhere = tempfile::tempdir().unwrap();
    let out = run(corkboard()
        .current_dir(elsewhere.path())
        .args(printed.split_whitespace().skip(1))
        .arg("--json"));
    assert!(out.status.success(), "{}", stderr_of(&out));
    let granted = parse_granted(&stdout_of(&out));
    let (status, listed) = mcp_list(&granted.mcp_url, &granted.token);
    assert_eq!(status, 200, "{listed}");
    assert!(
        !data.join("board.sqlite3").exists(),
        "a SQLite board was made"
    );
}
