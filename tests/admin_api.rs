//! Black-box: the admin API's authentication, roles and tenant scoping, and
//! tenant pinning through every MCP tool.

use crate::support;

use reqwest::Method;
use serde_json::{Value, json};
use support::*;

fn call(
    serve: &Serve,
    method: Method,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = http().request(method, format!("{}{}", serve.url(), path));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().unwrap();
    let status = response.status().as_u16();
    (status, response.json().unwrap_or(Value::Null))
}

/// Every endpoint of the admin API for a tenant, with a body where needed.
fn endpoints(tenant: &str, grant: &str, issue: &str) -> Vec<(Method, String, Option<Value>, bool)> {
    // (method, path, body, changes state)
    vec![
        (
            Method::POST,
            format!("/v1/tenants/{tenant}/grants"),
            Some(json!({"run":"x","capabilities":["issues:read"]})),
            true,
        ),
        (
            Method::GET,
            format!("/v1/tenants/{tenant}/grants"),
            None,
            false,
        ),
        (
            Method::GET,
            format!("/v1/tenants/{tenant}/grants/{grant}"),
            None,
            false,
        ),
        (
            Method::PATCH,
            format!("/v1/tenants/{tenant}/grants/{grant}"),
            Some(json!({"extend_by":"1h"})),
            true,
        ),
        (
            Method::GET,
            format!("/v1/tenants/{tenant}/settings"),
            None,
            false,
        ),
        (
            Method::PUT,
            format!("/v1/tenants/{tenant}/settings"),
            Some(json!({"max_lifetime":"1h"})),
            true,
        ),
        (
            Method::DELETE,
            format!("/v1/tenants/{tenant}/grants/{grant}"),
            None,
            true,
        ),
        (
            Method::POST,
            format!("/v1/tenants/{tenant}/runs/run-b/revoke"),
            None,
            true,
        ),
        (
            Method::GET,
            format!("/v1/tenants/{tenant}/issues"),
            None,
            false,
        ),
        (
            Method::GET,
            format!("/v1/tenants/{tenant}/issues/{issue}"),
            None,
            false,
        ),
        (
            Method::PATCH,
            format!("/v1/tenants/{tenant}/issues/{issue}"),
            Some(json!({"expected_version":1,"state":"done"})),
            true,
        ),
        (
            Method::GET,
            format!("/v1/tenants/{tenant}/audit"),
            None,
            false,
        ),
    ]
}

#[test]
fn tenant_admins_and_viewers_are_confined_to_their_tenant_and_role() {
    let serve = Serve::start();
    let globex = serve.grant("globex", "run-b", "issues:read,issues:create");
    let (_, created) = mcp_call(
        &globex.mcp_url,
        &globex.token,
        "create_issue",
        json!({"title":"globex secret"}),
    );
    let issue = created["result"]["structuredContent"]["id"]
        .as_str()
        .unwrap()
        .to_owned();

    let acme_admin = serve.admin_token("tenant-admin", Some("acme"));
    for (method, path, body, _) in endpoints("globex", &globex.grant_id, &issue) {
        let (status, reply) = call(&serve, method.clone(), &path, Some(&acme_admin), body);
        assert_eq!(status, 403, "{method} {path}: {reply}");
        assert_eq!(reply["error"]["code"], "forbidden");
        assert!(!reply.to_string().contains("globex secret"));
    }

    let viewer = serve.admin_token("viewer", Some("globex"));
    for (method, path, body, writes) in endpoints("globex", &globex.grant_id, &issue) {
        let (status, reply) = call(&serve, method.clone(), &path, Some(&viewer), body);
        if writes {
            assert_eq!(status, 403, "viewer {method} {path}: {reply}");
        } else {
            assert!(status == 200, "viewer {method} {path}: {status} {reply}");
        }
    }
    // The forged revoke above changed nothing: the grant still works.
    assert_eq!(
        mcp_call(&globex.mcp_url, &globex.token, "list_issues", json!({})).0,
        200
    );

    // The tenant's own admin may do everything.
    let globex_admin = serve.admin_token("tenant-admin", Some("globex"));
    let (status, _) = call(
        &serve,
        Method::GET,
        &format!("/v1/tenants/globex/issues/{issue}"),
        Some(&globex_admin),
        None,
    );
    assert_eq!(status, 200);
}

#[test]
fn bad_admin_credentials_are_refused_with_401_and_a_stable_code() {
    let serve = Serve::start();
    let path = "/v1/tenants/acme/grants";
    let (status, reply) = call(&serve, Method::GET, path, None, None);
    assert_eq!(
        (status, reply["error"]["code"].as_str()),
        (401, Some("unauthenticated")),
        "{reply}"
    );

    let good = serve.admin_token("platform-admin", None);
    let mut parts: Vec<String> = good.split('.').map(str::to_owned).collect();
    // Tampered payload: same signature, other claims.
    parts[1] = parts[1].chars().rev().collect();
    let tampered = parts.join(".");
    // Signed with another secret (another instance's data dir).
    let other = Serve::start();
    let foreign = other.admin_token("platform-admin", None);
    // A run token is not an admin credential.
    let run_token = serve.grant("acme", "r", "issues:read").token;
    for bad in [
        tampered.as_str(),
        foreign.as_str(),
        "not-a-jwt",
        run_token.as_str(),
    ] {
        let (status, reply) = call(&serve, Method::GET, path, Some(bad), None);
        assert_eq!(status, 401, "{bad}: {reply}");
        assert_eq!(reply["error"]["code"], "unauthenticated");
        assert!(
            !reply.to_string().contains(bad),
            "the credential must not be echoed"
        );
    }
    let (status, _) = call(&serve, Method::GET, path, Some(&good), None);
    assert_eq!(status, 200);
}

#[test]
fn validation_conflicts_and_not_found_use_the_error_envelope() {
    let serve = Serve::start();
    let admin = serve.admin_token("platform-admin", None);
    let (status, reply) = call(
        &serve,
        Method::POST,
        "/v1/tenants/acme/grants",
        Some(&admin),
        Some(json!({"run":"r","capabilities":["issues:delete"]})),
    );
    assert_eq!(
        (status, reply["error"]["code"].as_str()),
        (422, Some("invalid_request")),
        "{reply}"
    );
    assert_eq!(reply["error"]["details"]["field"], "capabilities");
    let (status, reply) = call(
        &serve,
        Method::GET,
        "/v1/tenants/Not_A_Tenant/grants",
        Some(&admin),
        None,
    );
    assert_eq!(status, 422, "{reply}");
    let (status, reply) = call(
        &serve,
        Method::GET,
        "/v1/tenants/acme/grants/gr_01M8MT0P2W3CWW7AR5Q13DPAP4",
        Some(&admin),
        None,
    );
    assert_eq!(
        (status, reply["error"]["code"].as_str()),
        (404, Some("not_found")),
        "{reply}"
    );

    let granted = serve.grant("acme", "r", "issues:read,issues:create");
    let (_, created) = mcp_call(
        &granted.mcp_url,
        &granted.token,
        "create_issue",
        json!({"title":"t"}),
    );
    let id = created["result"]["structuredContent"]["id"]
        .as_str()
        .unwrap();
    let patch = format!("/v1/tenants/acme/issues/{id}");
    let (status, _) = call(
        &serve,
        Method::PATCH,
        &patch,
        Some(&admin),
        Some(json!({"expected_version":1,"state":"todo"})),
    );
    assert_eq!(status, 200);
    // A stale edit is a conflict, not an overwrite.
    let (status, reply) = call(
        &serve,
        Method::PATCH,
        &patch,
        Some(&admin),
        Some(json!({"expected_version":1,"state":"done"})),
    );
    assert_eq!(
        (status, reply["error"]["code"].as_str()),
        (409, Some("version_conflict")),
        "{reply}"
    );
    let (_, issue) = call(&serve, Method::GET, &patch, Some(&admin), None);
    assert_eq!(issue["state"], "todo");

    let (status, doc) = call(&serve, Method::GET, "/v1/openapi.json", None, None);
    assert_eq!(status, 200);
    assert_eq!(doc["openapi"], "3.1.0");
    assert!(doc["paths"]["/v1/vocabulary"]["get"].is_object());

    // The board vocabulary the web page reads, public like the document.
    let (status, vocabulary) = call(&serve, Method::GET, "/v1/vocabulary", None, None);
    assert_eq!(status, 200, "{vocabulary}");
    assert_eq!(vocabulary["states"][0], "inbox");
    assert_eq!(vocabulary["priorities"][4], "urgent");
    assert_eq!(vocabulary["capabilities"][3], "comments:write");
    assert_eq!(vocabulary["tools"][4]["name"], "add_comment");
    assert_eq!(vocabulary["tools"][4]["writes"], true);
}

#[test]
fn a_run_token_never_reaches_another_tenant_through_any_tool() {
    let serve = Serve::start();
    let all = "issues:read,issues:create,issues:update,comments:write,issues:claim";
    let acme = serve.grant("acme", "run-a", all);
    let globex = serve.grant("globex", "run-b", all);
    let (_, created) = mcp_call(
        &globex.mcp_url,
        &globex.token,
        "create_issue",
        json!({"title":"globex only"}),
    );
    let foreign = created["result"]["structuredContent"]["id"]
        .as_str()
        .unwrap()
        .to_owned();

    for (tool, args) in [
        ("get_issue", json!({"id": foreign})),
        ("update_issue", json!({"id": foreign, "state": "done"})),
        ("add_comment", json!({"issue_id": foreign, "body": "hi"})),
        ("claim_issue", json!({"id": foreign})),
        ("release_issue", json!({"id": foreign})),
        // Another tenant's id as a relation reads like a missing one.
        ("create_issue", json!({"title": "x", "parent": foreign})),
        (
            "create_issue",
            json!({"title": "x", "blocked_by": [foreign]}),
        ),
    ] {
        let (status, reply) = mcp_call(&acme.mcp_url, &acme.token, tool, args);
        assert_eq!(status, 200, "{reply}");
        assert_eq!(reply["result"]["isError"], true, "{tool}: {reply}");
        assert!(reply.to_string().contains("not found"), "{tool}: {reply}");
    }
    // A tenant argument is refused, not obeyed.
    let (_, reply) = mcp_call(
        &acme.mcp_url,
        &acme.token,
        "create_issue",
        json!({"title":"x","tenant":"globex"}),
    );
    assert_eq!(reply["result"]["isError"], true, "{reply}");
    let (_, listed) = mcp_call(&acme.mcp_url, &acme.token, "list_issues", json!({}));
    assert!(!listed.to_string().contains("globex only"));
    // The globex issue is untouched.
    let (_, issue) = mcp_call(
        &globex.mcp_url,
        &globex.token,
        "get_issue",
        json!({"id": foreign}),
    );
    assert_eq!(issue["result"]["structuredContent"]["version"], 1);
    assert_eq!(issue["result"]["structuredContent"]["comments"], json!([]));
}

#[test]
fn expired_revoked_and_malformed_run_tokens_are_refused() {
    let serve = Serve::start();
    let url = format!("{}/mcp", serve.url());
    let out = serve.cli(&[
        "grant",
        "create",
        "--tenant",
        "acme",
        "--run",
        "r",
        "--caps",
        "issues:read",
        "--ttl",
        "1s",
        "--json",
    ]);
    let short = parse_granted(&stdout_of(&out));
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let (status, reply) = mcp_call(&url, &short.token, "list_issues", json!({}));
    assert_eq!(status, 403, "{reply}");
    assert!(reply.to_string().contains("expired"), "{reply}");

    let revoked = serve.grant("acme", "r2", "issues:read");
    assert!(
        serve
            .cli(&["grant", "revoke", &revoked.grant_id])
            .status
            .success()
    );
    let (status, reply) = mcp_call(&url, &revoked.token, "list_issues", json!({}));
    assert_eq!(status, 403, "{reply}");
    assert!(reply.to_string().contains("revoked"), "{reply}");

    for bad in [
        "cbr_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "garbage",
        "",
    ] {
        let (status, reply) = mcp_call(&url, bad, "list_issues", json!({}));
        assert!(status == 403 || status == 401, "{bad:?}: {status} {reply}");
    }
}

#[test]
fn a_call_outside_the_grant_is_refused_by_name_and_audited() {
    let serve = Serve::start();
    let reader = serve.grant("acme", "run-r", "issues:read");
    let (status, listed) = mcp_list(&reader.mcp_url, &reader.token);
    assert_eq!(status, 200);
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    // The reads (board_stats among them), and collecting an approval
    // (every grant's).
    assert_eq!(names.len(), 5, "{names:?}");
    assert!(
        names.contains(&"get_issue")
            && names.contains(&"list_issues")
            && names.contains(&"search_issues")
            && names.contains(&"board_stats")
            && names.contains(&"collect_approval"),
        "{names:?}"
    );

    let (_, reply) = mcp_call(
        &reader.mcp_url,
        &reader.token,
        "create_issue",
        json!({"title": "sneaky"}),
    );
    let message = reply["error"]["message"].as_str().unwrap_or_default();
    assert_eq!(reply["error"]["code"], -32602, "{reply}");
    assert!(message.contains("issues:create"), "{reply}");

    // Audit records are written in batches: poll briefly.
    let admin = serve.admin_token("platform-admin", None);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (_, audit) = call(
            &serve,
            Method::GET,
            "/v1/tenants/acme/audit?run=run-r",
            Some(&admin),
            None,
        );
        let records = audit["records"].as_array().cloned().unwrap_or_default();
        if let Some(denied) = records.iter().find(|r| r["outcome"] == "denied") {
            assert_eq!(denied["tool"], "create_issue");
            assert!(
                !audit.to_string().contains("sneaky"),
                "arguments must never be stored"
            );
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no denied audit record: {audit}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// A CA and a certificate for 127.0.0.1 it signed, made with `openssl`.
fn private_ca(
    dir: &std::path::Path,
) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    let sh = |script: &str| {
        let out = std::process::Command::new("sh")
            .args(["-ec", script])
            .current_dir(dir)
            .output()
            .expect("openssl (sh)");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    sh("openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 1 -subj /CN=test-ca 2>/dev/null
        openssl req -newkey rsa:2048 -nodes -keyout leaf.key -out leaf.csr -subj /CN=127.0.0.1 2>/dev/null
        printf 'subjectAltName=IP:127.0.0.1\\nbasicConstraints=CA:FALSE\\n' > leaf.ext
        openssl x509 -req -in leaf.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out leaf.pem -days 1 -extfile leaf.ext 2>/dev/null");
    (
        dir.join("ca.pem"),
        dir.join("leaf.pem"),
        dir.join("leaf.key"),
    )
}

/// A TLS terminator in front of `backend` (Python's ssl module): a real
/// https server for the CLI to talk to.
fn tls_proxy(
    cert: &std::path::Path,
    key: &std::path::Path,
    backend: &str,
) -> (std::process::Child, u16) {
    let script = r#"
import http.server, ssl, sys, urllib.request
backend = sys.argv[3]
class H(http.server.BaseHTTPRequestHandler):
    def relay(self):
        n = int(self.headers.get("content-length") or 0)
        req = urllib.request.Request(backend + self.path, data=self.rfile.read(n) if n else None, method=self.command)
        for h in ("authorization", "content-type"):
            if self.headers.get(h): req.add_header(h, self.headers[h])
        try:
            resp = urllib.request.urlopen(req)
        except urllib.error.HTTPError as e:
            resp = e
        body = resp.read()
        self.send_response(resp.status)
        self.send_header("content-type", resp.headers.get("content-type", "application/json"))
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    do_GET = do_POST = do_DELETE = relay
    def log_message(self, *a): pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
s.socket = ctx.wrap_socket(s.socket, server_side=True)
print(s.server_address[1], flush=True)
s.serve_forever()
"#;
    let mut child = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(cert)
        .arg(key)
        .arg(backend)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    (child, line.trim().parse().expect("port"))
}

#[test]
fn the_cli_talks_to_an_https_server_and_verifies_its_certificate() {
    let serve = Serve::start();
    let admin = serve.admin_token("platform-admin", None);
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = private_ca(dir.path());
    let (mut proxy, port) = tls_proxy(&cert, &key, serve.url());
    let server = format!("https://127.0.0.1:{port}");
    let grant_list = |ca: Option<&std::path::Path>| {
        let mut cmd = corkboard();
        cmd.args([
            "grant", "list", "--tenant", "acme", "--json", "--server", &server,
        ])
        .env("CORKBOARD_ADMIN_TOKEN", &admin);
        if let Some(ca) = ca {
            cmd.env("CORKBOARD_SERVER_CA_FILE", ca);
        }
        run(&mut cmd)
    };
    // Trusted through the private CA: the call goes through TLS.
    let out = grant_list(Some(&ca));
    assert!(out.status.success(), "{}", stderr_of(&out));
    let listed: serde_json::Value = serde_json::from_str(&stdout_of(&out)).unwrap();
    assert!(listed["grants"].is_array(), "{listed}");
    // Without it the certificate is refused, never used unverified.
    let out = grant_list(None);
    assert!(!out.status.success());
    assert!(
        stderr_of(&out).contains("certificate"),
        "{}",
        stderr_of(&out)
    );
    let _ = proxy.kill();
    let _ = proxy.wait();
}

/// A claim ends with its run's grant: after the admin API revokes run A's
/// grant (the ledger clears A's claims with the revocation), run B can take
/// A's issue, and the board API shows who holds what.
#[test]
fn revoking_a_runs_grant_puts_its_claimed_issue_back_in_the_pool() {
    let serve = Serve::start();
    let url = format!("{}/mcp", serve.url());
    let caps = "issues:read,issues:create,issues:claim";
    let a = serve.grant("acme", "run-a", caps);
    let b = serve.grant("acme", "run-b", caps);
    let admin = serve.admin_token("platform-admin", None);
    let tool = |token: &str, name: &str, args: Value| -> Value {
        let (status, reply) = mcp_call(&url, token, name, args);
        assert_eq!(status, 200, "{reply}");
        reply["result"].clone()
    };

    let created = tool(&a.token, "create_issue", json!({"title": "Shared work"}));
    let id = created["structuredContent"]["id"]
        .as_str()
        .expect("an issue id")
        .to_owned();
    let claimed = tool(&a.token, "claim_issue", json!({"id": id}));
    assert_eq!(claimed["isError"], false, "{claimed}");
    assert_eq!(claimed["structuredContent"]["claim"]["run"], "run-a");

    let refused = tool(&b.token, "claim_issue", json!({"id": id}));
    assert_eq!(refused["isError"], true, "{refused}");
    let text = refused["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("claimed by run run-a"), "{text}");

    let list = |query: &str| -> Vec<String> {
        let (status, page) = call(
            &serve,
            Method::GET,
            &format!("/v1/tenants/acme/issues?{query}"),
            Some(&admin),
            None,
        );
        assert_eq!(status, 200, "{page}");
        page["issues"]
            .as_array()
            .expect("issues")
            .iter()
            .map(|i| i["id"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    assert_eq!(list("claimed_by=run-a"), std::slice::from_ref(&id));
    assert!(list("unclaimed=true").is_empty());

    let (status, reply) = call(
        &serve,
        Method::DELETE,
        &format!("/v1/tenants/acme/grants/{}", a.grant_id),
        Some(&admin),
        None,
    );
    assert!(status < 300, "{status} {reply}");
    assert_eq!(list("unclaimed=true"), std::slice::from_ref(&id));

    let taken = tool(&b.token, "claim_issue", json!({"id": id}));
    assert_eq!(taken["isError"], false, "{taken}");
    assert_eq!(taken["structuredContent"]["claim"]["run"], "run-b");
    let (status, issue) = call(
        &serve,
        Method::GET,
        &format!("/v1/tenants/acme/issues/{id}"),
        Some(&admin),
        None,
    );
    assert_eq!(status, 200, "{issue}");
    assert_eq!(issue["claim"]["run"], "run-b");
    assert_eq!(issue["children"], json!([]));
}

fn instant_millis(v: &Value) -> i64 {
    corkboard_board::Timestamp::parse_rfc3339(v.as_str().unwrap_or_else(|| panic!("{v}")))
        .expect("RFC 3339")
        .as_millis()
}

#[test]
fn grants_are_renewed_with_the_same_token_within_their_maximum_lifetime() {
    // A 2 h maximum lifetime, from the configuration.
    let serve = Serve::start_with_env(&[("CORKBOARD_GRANT_MAX_LIFETIME_SECS", "7200")]);
    let admin = serve.admin_token("tenant-admin", Some("acme"));
    let create = |run: &str, ttl: &str| {
        let (status, reply) = call(
            &serve,
            Method::POST,
            "/v1/tenants/acme/grants",
            Some(&admin),
            Some(json!({"run": run, "capabilities": ["issues:read"], "ttl": ttl})),
        );
        assert_eq!(status, 201, "{reply}");
        reply
    };
    let patch = |id: &str, body: Value| {
        call(
            &serve,
            Method::PATCH,
            &format!("/v1/tenants/acme/grants/{id}"),
            Some(&admin),
            Some(body),
        )
    };
    let issued = create("r1", "1h");
    let id = issued["grant"]["id"].as_str().unwrap().to_owned();
    let token = issued["token"].as_str().unwrap().to_owned();
    let first_expiry = instant_millis(&issued["grant"]["expires_at"]);

    let (status, renewed) = patch(&id, json!({"extend_by": "30m"}));
    assert_eq!(status, 200, "{renewed}");
    assert_eq!(
        instant_millis(&renewed["expires_at"]) - first_expiry,
        30 * 60 * 1000,
        "{renewed}"
    );
    assert_eq!(renewed["status"], "active");
    let (status, _) = mcp_list(&format!("{}/mcp", serve.url()), &token);
    assert_eq!(status, 200, "the same token works after renewal");

    // Past the maximum lifetime (created + 2 h): refused, nothing changed.
    let (status, reply) = patch(&id, json!({"extend_by": "1h"}));
    assert_eq!(
        (status, reply["error"]["code"].as_str()),
        (409, Some("lifetime_limit")),
        "{reply}"
    );
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("7200s"),
        "{reply}"
    );
    // Exactly one of the two fields, and only later instants.
    for body in [
        json!({}),
        json!({"extend_by": "1m", "expires_at": "2030-01-01T00:00:00Z"}),
    ] {
        let (status, reply) = patch(&id, body);
        assert_eq!(status, 400, "{reply}");
    }
    let (status, reply) = patch(&id, json!({"expires_at": issued["grant"]["created_at"]}));
    assert_eq!(status, 422, "{reply}");

    // Revoked: 409; expired: 410.
    let revoked = create("r2", "1h");
    let revoked_id = revoked["grant"]["id"].as_str().unwrap();
    let (status, _) = call(
        &serve,
        Method::DELETE,
        &format!("/v1/tenants/acme/grants/{revoked_id}"),
        Some(&admin),
        None,
    );
    assert_eq!(status, 200);
    let (status, reply) = patch(revoked_id, json!({"extend_by": "1m"}));
    assert_eq!(
        (status, reply["error"]["code"].as_str()),
        (409, Some("grant_revoked")),
        "{reply}"
    );
    let short = create("r3", "1s");
    std::thread::sleep(std::time::Duration::from_millis(1_200));
    let (status, reply) = patch(
        short["grant"]["id"].as_str().unwrap(),
        json!({"extend_by": "1m"}),
    );
    assert_eq!(
        (status, reply["error"]["code"].as_str()),
        (410, Some("grant_expired")),
        "{reply}"
    );

    // `corkboard grant renew`, against the server.
    let other = create("r4", "10m");
    let other_id = other["grant"]["id"].as_str().unwrap();
    let out = run(corkboard()
        .args([
            "grant",
            "renew",
            other_id,
            "--tenant",
            "acme",
            "--extend-by",
            "5m",
            "--json",
        ])
        .args(["--server", serve.url()])
        .env("CORKBOARD_ADMIN_TOKEN", &admin));
    assert!(out.status.success(), "{}", stderr_of(&out));
    let renewed: Value = serde_json::from_str(&stdout_of(&out)).unwrap();
    assert_eq!(
        instant_millis(&renewed["expires_at"]) - instant_millis(&other["grant"]["expires_at"]),
        5 * 60 * 1000
    );

    // The tenant's own settings: a shorter maximum lifetime and a run TTL.
    let (status, settings) = call(
        &serve,
        Method::GET,
        "/v1/tenants/acme/settings",
        Some(&admin),
        None,
    );
    assert_eq!(status, 200, "{settings}");
    assert_eq!(settings["effective_max_lifetime_secs"], 7200, "{settings}");
    let (status, settings) = call(
        &serve,
        Method::PUT,
        "/v1/tenants/acme/settings",
        Some(&admin),
        Some(json!({"max_lifetime": "1h", "run_ttl": "10m"})),
    );
    assert_eq!(status, 200, "{settings}");
    assert_eq!(settings["max_lifetime_secs"], 3600, "{settings}");
    assert_eq!(settings["effective_max_lifetime_secs"], 3600, "{settings}");
    let (status, reply) = patch(&id, json!({"extend_by": "1m"}));
    assert_eq!(
        (status, reply["error"]["code"].as_str()),
        (409, Some("lifetime_limit")),
        "the tenant's 1 h now bounds the 1.5 h grant: {reply}"
    );
    // A tenant cannot loosen the operator's limit.
    let (_, settings) = call(
        &serve,
        Method::PUT,
        "/v1/tenants/acme/settings",
        Some(&admin),
        Some(json!({"max_lifetime": "30d", "run_ttl": "10m"})),
    );
    assert_eq!(settings["effective_max_lifetime_secs"], 7200, "{settings}");
    // Other tenants keep the configuration.
    let platform = serve.admin_token("platform-admin", None);
    let (_, globex) = call(
        &serve,
        Method::GET,
        "/v1/tenants/globex/settings",
        Some(&platform),
        None,
    );
    assert_eq!(globex["run_ttl_secs"], Value::Null, "{globex}");

    // The register API applies the tenant's run TTL (a run asking 1 h gets
    // 10 m) and renews a run by its id.
    let (status, registered) = call(
        &serve,
        Method::POST,
        "/v1/runs",
        Some(&admin),
        Some(
            json!({"tenant": "acme", "run": "reg-1", "capabilities": ["issues:read"], "ttl": "1h"}),
        ),
    );
    assert_eq!(status, 201, "{registered}");
    let lifetime =
        instant_millis(&registered["expires_at"]) - instant_millis(&registered["created_at"]);
    assert_eq!(lifetime, 600_000, "{registered}");
    std::thread::sleep(std::time::Duration::from_millis(20));
    let (status, renewed) = call(
        &serve,
        Method::PATCH,
        "/v1/runs/acme/reg-1",
        Some(&admin),
        Some(json!({"ttl": "5m"})),
    );
    assert_eq!(status, 200, "{renewed}");
    // Never shortened: 5 m from now is before the current expiry.
    assert_eq!(renewed["expires_at"], registered["expires_at"], "{renewed}");
    let (status, renewed) = call(
        &serve,
        Method::PATCH,
        "/v1/runs/acme/reg-1",
        Some(&admin),
        Some(json!({})),
    );
    assert_eq!(status, 200, "{renewed}");
    assert!(
        instant_millis(&renewed["expires_at"]) > instant_millis(&registered["expires_at"]),
        "{renewed}"
    );
    let (status, reply) = call(
        &serve,
        Method::DELETE,
        "/v1/runs/acme/reg-1",
        Some(&admin),
        None,
    );
    assert_eq!(status, 200, "{reply}");
    let (status, reply) = call(
        &serve,
        Method::PATCH,
        "/v1/runs/acme/reg-1",
        Some(&admin),
        Some(json!({})),
    );
    assert_eq!(
        (status, reply["error"]["code"].as_str()),
        (409, Some("grant_revoked")),
        "{reply}"
    );
}
