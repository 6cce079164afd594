//! Black-box: the runner role and the per-run gateways, driven by real MCP
//! clients, in both listener modes (a dedicated port per run; one shared
//! port with `/runs/{run}/mcp`), including an agent in its own network
//! namespace that reaches its gateway only through the advertised address.

use crate::support;

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;
use support::*;

const ALL_CAPS: &str = "issues:read,issues:create,issues:update,comments:write,issues:claim";

/// A `corkboard runner` process sharing a data dir (board, secrets) with a
/// `corkboard serve` that shows the board.
struct Runner {
    process: Running,
    /// `gateway on <url>` (shared mode).
    shared: Option<String>,
}

impl Runner {
    fn start(data_dir: &Path, secrets: &[(String, String)], env: &[(&str, &str)]) -> Runner {
        let mut cmd = corkboard();
        cmd.args(["runner", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(data_dir);
        cmd.envs(secrets.iter().cloned());
        cmd.envs(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let process = Running::spawn(cmd);
        let shared = if env.contains(&("CORKBOARD_GATEWAY_MODE", "shared")) {
            let line = process
                .lines
                .recv_timeout(Duration::from_secs(30))
                .expect("the runner announces its shared gateway");
            Some(
                line.strip_prefix("gateway on ")
                    .unwrap_or_else(|| panic!("unexpected line: {line}"))
                    .to_owned(),
            )
        } else {
            None
        };
        Runner { process, shared }
    }

    fn url(&self) -> &str {
        &self.process.url
    }
}

/// A `serve` whose secrets are files a runner can share.
fn serve_with_secrets() -> (Serve, Vec<(String, String)>, tempfile::TempDir) {
    let secrets_dir = tempfile::tempdir().unwrap();
    let secrets = cluster_secrets(secrets_dir.path());
    let env = secrets.clone();
    let serve = Serve::start_with(move |cmd| {
        cmd.envs(env);
    });
    (serve, secrets, secrets_dir)
}

fn register(api: &str, admin: &str, body: Value) -> (u16, Value) {
    let response = http()
        .post(format!("{api}/v1/runs"))
        .bearer_auth(admin)
        .json(&body)
        .send()
        .expect("POST /v1/runs");
    let status = response.status().as_u16();
    (status, response.json().unwrap_or(Value::Null))
}

fn revoke(api: &str, admin: &str, tenant: &str, run: &str) -> (u16, Value) {
    let response = http()
        .delete(format!("{api}/v1/runs/{tenant}/{run}"))
        .bearer_auth(admin)
        .send()
        .expect("DELETE /v1/runs");
    let status = response.status().as_u16();
    (status, response.json().unwrap_or(Value::Null))
}

fn runs_of(api: &str, admin: &str, tenant: &str) -> Value {
    http()
        .get(format!("{api}/v1/runs?tenant={tenant}"))
        .bearer_auth(admin)
        .send()
        .expect("GET /v1/runs")
        .json()
        .expect("runs JSON")
}

fn venv_python() -> PathBuf {
    let py = repo_root().join("target/venv/bin/python");
    assert!(
        py.exists(),
        "target/venv is missing: run scripts/setup-test-deps"
    );
    py
}

/// Runs a Python client script with the run's endpoint and token in its
/// environment (as `corkboard run` hands them over).
fn python_agent(url: &str, token: &str, args: &[&str]) -> Output {
    run(Command::new(venv_python())
        .current_dir(repo_root().join("tests/clients"))
        .arg("py_client.py")
        .args(args)
        .env("CORKBOARD_MCP_URL", url)
        .env("CORKBOARD_TOKEN", token)
        .env("NO_PROXY", "*"))
}

fn json_line(out: &Output) -> Value {
    let stdout = stdout_of(out);
    stdout
        .lines()
        .rev()
        .find_map(|l| {
            serde_json::from_str::<Value>(l)
                .ok()
                .filter(Value::is_object)
        })
        .unwrap_or_else(|| panic!("no JSON line in: {stdout}\n{}", stderr_of(out)))
}

fn assert_ok(out: &Output, what: &str) -> Value {
    let result = json_line(out);
    assert!(
        out.status.success() && result["ok"] == true,
        "{what}: {result}\n{}",
        stderr_of(out)
    );
    result
}

fn board(serve: &Serve, admin: &str, tenant: &str) -> Vec<Value> {
    let page: Value = http()
        .get(format!(
            "{}/v1/tenants/{tenant}/issues?limit=100",
            serve.url()
        ))
        .bearer_auth(admin)
        .send()
        .unwrap()
        .json()
        .unwrap();
    page["issues"].as_array().cloned().unwrap_or_default()
}

/// Whether a TCP connection to `url`'s authority succeeds.
fn reachable(url: &str) -> bool {
    let authority = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap_or_default();
    std::net::TcpStream::connect_timeout(
        &authority.parse().expect("an IP:port authority"),
        Duration::from_secs(3),
    )
    .is_ok()
}

/// A supervisor may stop the runner the moment it announces its address:
/// the signal is caught from before the announcement, so the stop drains
/// and exits 0 instead of dying by the default action.
#[test]
fn a_sigterm_the_moment_the_runner_announces_itself_is_a_graceful_stop() {
    let (serve, secrets, _secrets_dir) = serve_with_secrets();
    for _ in 0..3 {
        let runner = Runner::start(serve.data_dir.path(), &secrets, &[]);
        let status = runner.process.terminate();
        assert!(status.success(), "runner exit {status:?}");
    }
}

#[test]
fn the_runner_serves_real_clients_in_both_listener_modes() {
    let (serve, secrets, _secrets_dir) = serve_with_secrets();
    let admin = admin_token_with(&secrets, "platform-admin", None);
    for mode in ["dedicated", "shared"] {
        let runner = Runner::start(
            serve.data_dir.path(),
            &secrets,
            &[
                ("CORKBOARD_GATEWAY_MODE", mode),
                ("CORKBOARD_GATEWAY_LISTEN", "127.0.0.1:0"),
            ],
        );
        let run_a = format!("agent-a-{mode}");
        let run_b = format!("agent-b-{mode}");
        let (status, a) = register(
            runner.url(),
            &admin,
            json!({"tenant": "acme", "run": run_a, "capabilities": ALL_CAPS.split(',').collect::<Vec<_>>(), "ttl": "10m"}),
        );
        assert_eq!(status, 201, "{mode}: {a}");
        let (status, b) = register(
            runner.url(),
            &admin,
            json!({"tenant": "acme", "run": run_b, "capabilities": ["issues:read"]}),
        );
        assert_eq!(status, 201, "{mode}: {b}");
        let url_a = a["mcp_url"].as_str().unwrap();
        let token_a = a["token"].as_str().unwrap();
        let (url_b, token_b) = (b["mcp_url"].as_str().unwrap(), b["token"].as_str().unwrap());
        match &runner.shared {
            Some(base) => assert_eq!(url_a, format!("{base}/runs/{run_a}/mcp")),
            None => assert!(url_a.ends_with("/mcp") && url_a != url_b, "{url_a}"),
        }
        // The handout is complete and self-consistent.
        assert_eq!(a["env"]["CORKBOARD_MCP_URL"], url_a);
        assert_eq!(a["env"]["CORKBOARD_TOKEN"], token_a);
        assert_eq!(a["env"]["NO_PROXY"], "127.0.0.1");
        let inline: Value =
            serde_json::from_str(a["env"]["CORKBOARD_MCP_CONFIG_JSON"].as_str().unwrap()).unwrap();
        assert_eq!(inline, a["mcp_config"]);
        assert_eq!(inline["mcpServers"]["corkboard"]["url"], url_a);
        assert_eq!(
            inline["mcpServers"]["corkboard"]["headers"]["Authorization"],
            format!("Bearer {token_a}")
        );
        assert_eq!(inline["mcpServers"]["corkboard"]["alwaysLoad"], true);

        // Real clients, both eras.
        let py = assert_ok(
            &python_agent(url_a, token_a, &["--mode", "auto"]),
            "python (auto)",
        );
        assert_eq!(py["era"], "modern");
        assert_ok(
            &python_agent(url_a, token_a, &["--mode", "legacy"]),
            "python (legacy)",
        );
        let ts = node("ts-client-v2.mjs", &["--url", url_a, "--token", token_a]);
        assert_ok(&ts, "ts-client-v2");
        let ts1 = node(
            "ts-sdk-v1.mjs",
            &["--url", url_a, "--token", token_a, "--mode", "legacy"],
        );
        assert_ok(&ts1, "ts-sdk-v1");
        // Capabilities follow the run's grant.
        assert_ok(
            &python_agent(
                url_b,
                token_b,
                &[
                    "--caps-check",
                    "list_issues,get_issue,search_issues,board_stats,collect_approval",
                ],
            ),
            "caps check",
        );
        // A valid token of another run is refused at this run's endpoint.
        let intruder = python_agent(
            url_a,
            token_b,
            &["--expect-auth-failure", "--expect-message", "another run"],
        );
        assert_ok(&intruder, "another run's token");

        let created = py["created"].as_str().unwrap();
        let issues = board(&serve, &admin, "acme");
        let issue = issues
            .iter()
            .find(|i| i["id"] == created)
            .expect("the agent's issue on acme's board");
        assert_eq!(issue["author"]["run"], run_a.as_str());

        let listed = runs_of(runner.url(), &admin, "acme");
        assert_eq!(listed["runs"].as_array().map(Vec::len), Some(2), "{listed}");
        let (status, revoked) = revoke(runner.url(), &admin, "acme", &run_a);
        assert_eq!(status, 200, "{revoked}");
        assert_eq!(revoked["revoked"].as_array().map(Vec::len), Some(1));
        assert_eq!(revoked["drained"]["reason"], "revoked");
        // Revoked: refused (shared port), or the port itself is gone.
        match runner.shared {
            Some(_) => {
                assert_ok(
                    &python_agent(url_a, token_a, &["--expect-auth-failure"]),
                    "revoked token",
                );
            }
            None => assert!(
                !reachable(url_a),
                "{mode}: the revoked run's port still accepts"
            ),
        }
        let (status, _) = revoke(runner.url(), &admin, "acme", &run_a);
        assert_eq!(status, 404, "{mode}: a second revoke finds nothing");
        revoke(runner.url(), &admin, "acme", &run_b);
        let stats = runs_of(runner.url(), &admin, "acme")["stats"].clone();
        assert_eq!(stats["actors"], 0, "{stats}");
        assert_eq!(stats["listeners"], 0, "{stats}");
        let status = runner.process.terminate();
        assert!(status.success(), "{mode}: runner exit {status:?}");
    }
}

#[test]
fn registering_needs_an_admin_jwt_that_may_manage_the_tenant() {
    let serve = Serve::start();
    let body = json!({"tenant": "acme", "run": "r1", "capabilities": ["issues:read"]});
    let response = http()
        .post(format!("{}/v1/runs", serve.url()))
        .json(&body)
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 401);
    let viewer = serve.admin_token("viewer", Some("acme"));
    assert_eq!(register(serve.url(), &viewer, body.clone()).0, 403);
    let other = serve.admin_token("tenant-admin", Some("globex"));
    assert_eq!(register(serve.url(), &other, body.clone()).0, 403);
    let acme = serve.admin_token("tenant-admin", Some("acme"));
    let (status, created) = register(serve.url(), &acme, body.clone());
    assert_eq!(status, 201, "{created}");
    let (status, again) = register(serve.url(), &acme, body.clone());
    assert_eq!(
        (status, again["error"]["code"].as_str()),
        (409, Some("run_active")),
        "{again}"
    );
    let (status, bad) = register(
        serve.url(),
        &acme,
        json!({"tenant": "acme", "capabilities": ["issues:delete"]}),
    );
    assert_eq!(status, 422, "{bad}");
    // A generated run id when none is given.
    let (status, generated) = register(
        serve.url(),
        &acme,
        json!({"tenant": "acme", "capabilities": ["issues:read"]}),
    );
    assert_eq!(status, 201, "{generated}");
    assert!(generated["run"].as_str().unwrap().starts_with("run-"));
    // Listing is tenant-scoped.
    let listed = runs_of(serve.url(), &acme, "acme");
    assert_eq!(listed["runs"].as_array().map(Vec::len), Some(2), "{listed}");
    let response = http()
        .get(format!("{}/v1/runs?tenant=acme", serve.url()))
        .bearer_auth(&other)
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 403);
    assert_eq!(revoke(serve.url(), &other, "acme", "r1").0, 403);
    assert_eq!(revoke(serve.url(), &acme, "acme", "r1").0, 200);
    // Revoked: the run's gateway port is closed.
    assert!(!reachable(created["mcp_url"].as_str().unwrap()));
}

/// Issue 16 item 7: a tenant-admin could register runs without bound,
/// each holding a listening socket for up to 30 days.
#[test]
fn a_tenant_over_its_live_run_or_grant_limit_is_refused_by_name() {
    let serve = Serve::start_with_env(&[
        ("CORKBOARD_LIVE_RUNS_PER_TENANT_MAX", "2"),
        ("CORKBOARD_LIVE_GRANTS_PER_TENANT_MAX", "3"),
    ]);
    let acme = serve.admin_token("tenant-admin", Some("acme"));
    let run = |name: &str| json!({"tenant": "acme", "run": name, "capabilities": ["issues:read"]});
    assert_eq!(register(serve.url(), &acme, run("r1")).0, 201);
    assert_eq!(register(serve.url(), &acme, run("r2")).0, 201);
    let (status, refused) = register(serve.url(), &acme, run("r3"));
    assert_eq!(
        (status, refused["error"]["code"].as_str()),
        (409, Some("run_limit")),
        "{refused}"
    );
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("2 live runs") && message.contains("live_runs_per_tenant_max"),
        "{message}"
    );
    // The limit is per tenant.
    let globex = serve.admin_token("tenant-admin", Some("globex"));
    let (status, other) = register(
        serve.url(),
        &globex,
        json!({"tenant": "globex", "run": "g1", "capabilities": ["issues:read"]}),
    );
    assert_eq!(status, 201, "{other}");
    // A tenant admin sees its own runs, never the runner's figures that
    // cover every tenant.
    let listed = runs_of(serve.url(), &acme, "acme");
    assert_eq!(listed["runs"].as_array().map(Vec::len), Some(2), "{listed}");
    assert!(listed.get("stats").is_none(), "runner-wide stats: {listed}");
    let platform = serve.admin_token("platform-admin", None);
    assert_eq!(runs_of(serve.url(), &platform, "acme")["stats"]["runs"], 3);
    // A revoked run frees its place.
    assert_eq!(revoke(serve.url(), &acme, "acme", "r1").0, 200);
    assert_eq!(register(serve.url(), &acme, run("r3")).0, 201);

    // Live grants of acme: r2 and r3 (r1's is revoked); the admin API may
    // issue one more, then refuses.
    let grant = || {
        let response = http()
            .post(format!("{}/v1/tenants/acme/grants", serve.url()))
            .bearer_auth(&acme)
            .json(&json!({"run": "x", "capabilities": ["issues:read"]}))
            .send()
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json::<Value>().unwrap_or(Value::Null))
    };
    assert_eq!(grant().0, 201);
    let (status, refused) = grant();
    assert_eq!(
        (status, refused["error"]["code"].as_str()),
        (409, Some("grant_limit")),
        "{refused}"
    );
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("3 live grants") && message.contains("live_grants_per_tenant_max"),
        "{message}"
    );
}

#[test]
fn a_thousand_runs_through_the_api_leave_nothing_behind() {
    // A thousand live runs of one tenant: above the default quotas.
    let serve = Serve::start_with_env(&[
        ("CORKBOARD_LIVE_RUNS_PER_TENANT_MAX", "1000"),
        ("CORKBOARD_LIVE_GRANTS_PER_TENANT_MAX", "1000"),
    ]);
    let admin = serve.admin_token("platform-admin", None);
    let pid = serve.process.child.id();
    let fds = || {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .unwrap()
            .count()
    };
    let rss_kib = || -> u64 {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    };
    let cycle = |prefix: &str, count: usize, revoke_too: bool| {
        std::thread::scope(|scope| {
            for worker in 0..4 {
                let (url, admin) = (serve.url().to_owned(), admin.clone());
                scope.spawn(move || {
                    for i in (worker..count).step_by(4) {
                        let run = format!("{prefix}-{i}");
                        let (status, body) = register(
                            &url,
                            &admin,
                            json!({"tenant": "acme", "run": run, "capabilities": ["issues:read"]}),
                        );
                        assert_eq!(status, 201, "{body}");
                        if revoke_too {
                            let (status, body) = revoke(&url, &admin, "acme", &run);
                            assert_eq!(status, 200, "{body}");
                        }
                    }
                });
            }
        });
    };
    cycle("warm", 50, true);
    let fds_before = fds();
    cycle("loop", 1000, true);
    let stats = runs_of(serve.url(), &admin, "acme")["stats"].clone();
    assert_eq!(
        stats,
        json!({"runs": 0, "actors": 0, "listeners": 0, "connections": 0})
    );
    // The API client's keep-alive connections may differ by a few.
    let fds_after = fds();
    assert!(
        fds_after <= fds_before + 8,
        "descriptors: {fds_before} before, {fds_after} after 1000 runs"
    );

    let rss_before = rss_kib();
    cycle("idle", 1000, false);
    let stats = runs_of(serve.url(), &admin, "acme")["stats"].clone();
    assert_eq!(stats["listeners"], 1000, "{stats}");
    let per_run = rss_kib().saturating_sub(rss_before) as f64 / 1000.0;
    eprintln!(
        "corkboard serve: memory per idle run: {per_run:.1} KiB (RSS; includes the grant's ledger row cache)"
    );
    assert!(per_run <= 64.0, "an idle run costs {per_run:.1} KiB");
    std::thread::scope(|scope| {
        for worker in 0..4 {
            let (url, admin) = (serve.url().to_owned(), admin.clone());
            scope.spawn(move || {
                for i in (worker..1000).step_by(4) {
                    assert_eq!(revoke(&url, &admin, "acme", &format!("idle-{i}")).0, 200);
                }
            });
        }
    });
    let stats = runs_of(serve.url(), &admin, "acme")["stats"].clone();
    assert_eq!(
        stats,
        json!({"runs": 0, "actors": 0, "listeners": 0, "connections": 0})
    );
}

// ---- network namespaces -------------------------------------------------

/// A network namespace joined to the host by a veth pair; removed on drop.
struct Netns {
    name: String,
    host_veth: String,
    host_ip: String,
}

fn ip(args: &[&str]) -> Output {
    Command::new("ip")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("`ip` is needed for the network-namespace tests (scripts/setup-test-deps installs iproute2): {e}"))
}

fn ip_ok(args: &[&str]) {
    let out = ip(args);
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        stderr_of(&out)
    );
}

impl Netns {
    fn create() -> Netns {
        let seed = std::process::id() as u64
            ^ std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .subsec_nanos() as u64;
        for attempt in 0..32u64 {
            let tag = format!(
                "{:06x}",
                (seed.wrapping_mul(2654435761).wrapping_add(attempt * 7919)) & 0xff_ffff
            );
            let octet = (seed.wrapping_add(attempt * 37) % 250) as u8 + 1;
            let in_use = String::from_utf8_lossy(&ip(&["-o", "-4", "addr"]).stdout)
                .contains(&format!("10.231.{octet}."));
            if in_use {
                continue;
            }
            let name = format!("cb-{tag}");
            if !ip(&["netns", "add", &name]).status.success() {
                continue;
            }
            let ns = Netns {
                name: name.clone(),
                host_veth: format!("cbh{tag}"),
                host_ip: format!("10.231.{octet}.1"),
            };
            let ns_veth = format!("cbn{tag}");
            ip_ok(&[
                "link",
                "add",
                &ns.host_veth,
                "type",
                "veth",
                "peer",
                "name",
                &ns_veth,
            ]);
            ip_ok(&["link", "set", &ns_veth, "netns", &name]);
            if !ip(&[
                "addr",
                "add",
                &format!("{}/30", ns.host_ip),
                "dev",
                &ns.host_veth,
            ])
            .status
            .success()
            {
                continue; // another test took the subnet meanwhile; the guard cleans up
            }
            ip_ok(&["link", "set", &ns.host_veth, "up"]);
            ip_ok(&[
                "netns",
                "exec",
                &name,
                "ip",
                "addr",
                "add",
                &format!("10.231.{octet}.2/30"),
                "dev",
                &ns_veth,
            ]);
            ip_ok(&["netns", "exec", &name, "ip", "link", "set", &ns_veth, "up"]);
            ip_ok(&["netns", "exec", &name, "ip", "link", "set", "lo", "up"]);
            return ns;
        }
        panic!("could not set up a network namespace");
    }

    /// Whether a TCP connection from inside the namespace to `url` succeeds.
    fn can_connect(&self, url: &str) -> bool {
        let authority = url
            .trim_start_matches("http://")
            .split('/')
            .next()
            .unwrap_or_default();
        let (host, port) = authority.rsplit_once(':').unwrap();
        let probe = "import socket, sys\ntry:\n    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3).close()\nexcept OSError:\n    sys.exit(1)\n";
        run(Command::new("ip")
            .args(["netns", "exec", &self.name])
            .arg(venv_python())
            .args(["-c", probe, host, port]))
        .status
        .success()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
        let _ = Command::new("ip")
            .args(["link", "del", &self.host_veth])
            .output();
    }
}

fn require_root_and_ip() {
    let uid = run(Command::new("id").arg("-u"));
    assert_eq!(
        stdout_of(&uid).trim(),
        "0",
        "the network-namespace tests need root (CI runs as root)"
    );
    let version = Command::new("ip").arg("-V").output();
    assert!(
        version.is_ok_and(|o| o.status.success()),
        "`ip` (iproute2) is needed for the network-namespace tests: run scripts/setup-test-deps"
    );
}

#[test]
fn an_agent_in_its_own_network_namespace_reaches_its_gateway_only_through_the_advertised_address() {
    require_root_and_ip();
    let ns = Netns::create();
    let (serve, secrets, _secrets_dir) = serve_with_secrets();
    let admin = admin_token_with(&secrets, "platform-admin", None);
    let shared_listen = format!("{}:0", ns.host_ip);
    for mode in ["dedicated", "shared"] {
        // Bound on the host side of the veth pair (not on every interface),
        // advertised as that address.
        let env: Vec<(&str, &str)> = match mode {
            "dedicated" => vec![
                ("CORKBOARD_GATEWAY_BIND", ns.host_ip.as_str()),
                ("CORKBOARD_GATEWAY_ADVERTISE", ns.host_ip.as_str()),
            ],
            _ => vec![
                ("CORKBOARD_GATEWAY_MODE", "shared"),
                ("CORKBOARD_GATEWAY_LISTEN", shared_listen.as_str()),
                ("CORKBOARD_GATEWAY_ADVERTISE", ns.host_ip.as_str()),
            ],
        };
        let runner = Runner::start(serve.data_dir.path(), &secrets, &env);
        let run_id = format!("netns-{mode}");
        let record = tempfile::NamedTempFile::new().unwrap();
        // The agent, inside the namespace, started by `corkboard run`.
        let agent = format!(
            "printf '%s' \"$CORKBOARD_MCP_URL\" > '{}' && exec ip netns exec '{}' '{}' '{}' --mode auto",
            record.path().display(),
            ns.name,
            venv_python().display(),
            repo_root().join("tests/clients/py_client.py").display(),
        );
        let out = run(corkboard()
            .args([
                "run",
                "--server",
                runner.url(),
                "--tenant",
                "acme",
                "--run",
                &run_id,
                "--caps",
                ALL_CAPS,
                "--",
                "sh",
                "-c",
                &agent,
            ])
            .env("CORKBOARD_ADMIN_TOKEN", &admin));
        let result = json_line(&out);
        assert!(
            out.status.success() && result["ok"] == true,
            "{mode}: {result}\n{}",
            stderr_of(&out)
        );
        let url = std::fs::read_to_string(record.path()).unwrap();
        assert!(
            url.starts_with(&format!("http://{}:", ns.host_ip)),
            "{mode}: advertised {url}"
        );
        let issues = board(&serve, &admin, "acme");
        assert!(
            issues.iter().any(|i| i["id"] == result["created"]),
            "{mode}: the issue is not on acme's board"
        );
        let _ = runner.process.terminate();
    }

    // The trap this design exists for: a gateway bound to the host's
    // loopback is unreachable from the namespace, by either address.
    let loopback = Runner::start(serve.data_dir.path(), &secrets, &[]);
    let (status, reg) = register(
        loopback.url(),
        &admin,
        json!({"tenant": "acme", "run": "loopback", "capabilities": ["issues:read"]}),
    );
    assert_eq!(status, 201, "{reg}");
    let url = reg["mcp_url"].as_str().unwrap();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    assert!(reachable(url), "the loopback gateway answers on the host");
    assert!(
        !ns.can_connect(url),
        "the namespace reached the host's loopback gateway at {url}"
    );
    let via_veth = url.replace("127.0.0.1", &ns.host_ip);
    assert!(
        !ns.can_connect(&via_veth),
        "the namespace reached a loopback-bound port through {via_veth}"
    );
    // And the same probe does reach a gateway bound to the veth address.
    let reachable_runner = Runner::start(
        serve.data_dir.path(),
        &secrets,
        &[
            ("CORKBOARD_GATEWAY_BIND", ns.host_ip.as_str()),
            ("CORKBOARD_GATEWAY_ADVERTISE", ns.host_ip.as_str()),
        ],
    );
    let (status, reg) = register(
        reachable_runner.url(),
        &admin,
        json!({"tenant": "acme", "run": "veth", "capabilities": ["issues:read"]}),
    );
    assert_eq!(status, 201, "{reg}");
    assert!(
        ns.can_connect(reg["mcp_url"].as_str().unwrap()),
        "the probe itself must work"
    );
}
