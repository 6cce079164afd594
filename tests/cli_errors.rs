//! Black-box: operator mistakes get honest answers. A revoke or delete
//! that matches nothing fails naming what it looked for; the admin APIs
//! answer bodies they cannot read in their JSON envelope; `--server`
//! mistakes say what to fix; misspelt `CORKBOARD_*` variables are named.

use crate::support;

use serde_json::Value;
use std::io::{Read, Write};
use std::process::Output;
use support::*;

/// A `corkboard` command against `serve`'s admin API, as `admin`.
fn against(serve: &Serve, admin: &str, args: &[&str]) -> Output {
    let mut cmd = corkboard();
    cmd.args(args)
        .args(["--server", serve.url()])
        .env("CORKBOARD_ADMIN_TOKEN", admin);
    run(&mut cmd)
}

fn assert_failed_naming(out: &Output, names: &[&str]) {
    let stderr = stderr_of(out);
    assert!(!out.status.success(), "exit 0; stderr: {stderr}");
    for name in names {
        assert!(stderr.contains(name), "{name} not named: {stderr}");
    }
}

#[test]
fn a_revoke_or_delete_that_matches_nothing_fails_naming_what_it_looked_for() {
    let serve = Serve::start();
    serve.grant("acme", "run-real", "issues:read");
    let admin = serve.admin_token("platform-admin", None);

    // Locally on the data dir, and through the admin API.
    let local = serve.cli(&["grant", "revoke", "--tenant", "acme", "--run", "run-reel"]);
    assert_failed_naming(&local, &["run-reel", "acme"]);
    let remote = against(
        &serve,
        &admin,
        &["grant", "revoke", "--tenant", "acme", "--run", "run-reel"],
    );
    assert_failed_naming(&remote, &["run-reel", "acme", "not_found"]);

    let grant = "gr_01JZ0000000000000000000000";
    let by_id = against(
        &serve,
        &admin,
        &["grant", "revoke", grant, "--tenant", "acme"],
    );
    assert_failed_naming(&by_id, &[grant, "acme", "not_found"]);
    let renew = against(
        &serve,
        &admin,
        &[
            "grant",
            "renew",
            grant,
            "--tenant",
            "acme",
            "--extend-by",
            "1h",
        ],
    );
    assert_failed_naming(&renew, &[grant, "acme", "not_found"]);

    let webhook = "wh_01JZ0000000000000000000000";
    let hook = against(
        &serve,
        &admin,
        &["webhook", "delete", "--tenant", "acme", webhook],
    );
    assert_failed_naming(&hook, &[webhook, "acme", "not_found"]);
    let upstream = against(
        &serve,
        &admin,
        &["upstream", "delete", "--tenant", "acme", "ghost"],
    );
    assert_failed_naming(&upstream, &["ghost", "acme", "not_found"]);

    // The run's register API: renewing a run that has no grant.
    let response = http()
        .patch(format!("{}/v1/runs/acme/run-reel", serve.url()))
        .bearer_auth(&admin)
        .json(&serde_json::json!({}))
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 404);
    let body: Value = response.json().unwrap();
    assert_eq!(body["error"]["code"], "not_found");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("run-reel"),
        "{body}"
    );

    // The real run is still revocable, and says what it did.
    let real = serve.cli(&["grant", "revoke", "--tenant", "acme", "--run", "run-real"]);
    assert!(real.status.success(), "{}", stderr_of(&real));
    assert!(stdout_of(&real).contains("revoked 1 grant(s) of run run-real"));
}

/// `(status, content type, body)` of a POST with `content_type` and `body`.
fn post_raw(url: &str, admin: &str, content_type: &str, body: &str) -> (u16, String, Value) {
    let response = http()
        .post(url)
        .bearer_auth(admin)
        .header("content-type", content_type)
        .body(body.to_owned())
        .send()
        .unwrap();
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    (status, content_type, response.json().unwrap_or(Value::Null))
}

#[test]
fn bodies_the_admin_apis_cannot_read_are_refused_in_the_json_envelope() {
    let serve = Serve::start();
    let admin = serve.admin_token("platform-admin", None);
    let grants = format!("{}/v1/tenants/acme/grants", serve.url());
    let runs = format!("{}/v1/runs", serve.url());
    for url in [&grants, &runs] {
        let (status, content_type, body) =
            post_raw(url, &admin, "application/json", r#"{"capabilities": ["#);
        assert_eq!(status, 400, "{url}: {body}");
        assert_eq!(content_type, "application/json", "{url}");
        assert_eq!(body["error"]["code"], "invalid_body", "{url}: {body}");

        let (status, content_type, body) = post_raw(
            url,
            &admin,
            "application/json",
            r#"{"capabilities": ["issues:read"]}"#,
        );
        assert_eq!(status, 400, "{url}: {body}");
        assert_eq!(content_type, "application/json", "{url}");
        assert_eq!(body["error"]["code"], "invalid_body", "{url}: {body}");

        let (status, content_type, body) = post_raw(
            url,
            &admin,
            "text/plain",
            r#"{"tenant":"acme","run":"r1","capabilities":["issues:read"]}"#,
        );
        assert_eq!(status, 415, "{url}: {body}");
        assert_eq!(content_type, "application/json", "{url}");
        assert_eq!(body["error"]["code"], "unsupported_media_type", "{url}");
    }

    let response = http()
        .get(format!("{}/v1/tenants/acme/grants?limit=many", serve.url()))
        .bearer_auth(&admin)
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 400);
    let body: Value = response.json().unwrap();
    assert_eq!(body["error"]["code"], "invalid_query", "{body}");
}

fn grant_list_at(server: &str) -> Output {
    let mut cmd = corkboard();
    cmd.args(["grant", "list", "--tenant", "acme", "--server", server])
        .env("CORKBOARD_ADMIN_TOKEN", "any");
    run(&mut cmd)
}

#[test]
fn server_mistakes_say_what_to_fix() {
    let no_scheme = grant_list_at("127.0.0.1:8080");
    assert_failed_naming(
        &no_scheme,
        &["--server must be an absolute URL such as http://127.0.0.1:8080"],
    );
    assert!(!stderr_of(&no_scheme).contains("builder error"));

    let port = upstreams::free_port();
    let nobody = format!("http://127.0.0.1:{port}");
    let refused = grant_list_at(&nobody);
    assert_failed_naming(
        &refused,
        &[&format!(
            "no corkboard server answers at {nobody}: is it running?"
        )],
    );

    // Something that is not corkboard: 404 in plain text to everything.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let other = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(
                b"HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 9\r\nConnection: close\r\n\r\nnot found",
            );
        }
    });
    let not_ours = grant_list_at(&other);
    assert_failed_naming(
        &not_ours,
        &[&format!(
            "{other} does not look like a corkboard server (GET /healthz"
        )],
    );
    assert!(
        !stderr_of(&not_ours).contains("null"),
        "{}",
        stderr_of(&not_ours)
    );
}

#[test]
fn a_misspelt_corkboard_variable_is_named_with_the_right_one() {
    let data_dir = tempfile::tempdir().unwrap();
    let mut cmd = corkboard();
    cmd.args(["serve", "--check-config", "--data-dir"])
        .arg(data_dir.path())
        .env("CORKBOARD_REDIS_URLL", "redis://127.0.0.1:6379");
    let out = run(&mut cmd);
    let stderr = stderr_of(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("warning: CORKBOARD_REDIS_URLL is not a corkboard variable and is ignored (did you mean CORKBOARD_REDIS_URL?)"),
        "{stderr}"
    );
    // Known variables are not warned about.
    assert!(!stderr.contains("CORKBOARD_LOG "), "{stderr}");
}
