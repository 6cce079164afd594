//! Black-box: provenance and integrity floors, through a run gateway of
//! `corkboard serve`, with the official Python SDK client (2026-07-28) as
//! every agent and a Python SDK server as the tenant's upstream.
//!
//! A person files an issue through the admin API (level `person`); a run
//! whose grant may call an upstream tool comments on it (level `agent`),
//! calls the upstream tool, then comments again and files an issue of its
//! own (both `external` now: the mark set before the upstream call is what
//! the board reads). A run whose grant sets `min_integrity: agent` then
//! sees the person's issue with the first comment only (the other
//! counted as withheld), does not see the external issue in lists or
//! searches and is refused it by id; a run without a floor sees every
//! entry, each labelled in `_meta`.

use crate::support;

use serde_json::{Value, json};
use support::upstreams::*;
use support::*;

const META: &str = "dev.corkboard/integrity";

/// The `index`th call's answer, which must not be an error.
fn ok(out: &Value, index: usize) -> &Value {
    let call = &out["calls"][index];
    assert_eq!(call["isError"], false, "call {index}: {call}");
    &call["structured"]
}

/// A run of tenant acme with `capabilities` and, when given, a floor.
fn register(
    served: &Served,
    admin: &str,
    run: &str,
    capabilities: &[&str],
    floor: Option<&str>,
) -> (String, String) {
    let response = http()
        .post(format!("{}/v1/runs", served.url))
        .bearer_auth(admin)
        .json(&json!({
            "tenant": "acme",
            "run": run,
            "capabilities": capabilities,
            "min_integrity": floor,
        }))
        .send()
        .unwrap();
    let status = response.status().as_u16();
    let body: Value = response.json().unwrap();
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["min_integrity"], json!(floor), "{body}");
    (
        body["mcp_url"].as_str().unwrap().to_owned(),
        body["token"].as_str().unwrap().to_owned(),
    )
}

/// The ids of a list's issues or a search's hits.
fn ids(entries: &Value) -> Vec<&str> {
    entries
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {entries}"))
        .iter()
        .map(|entry| entry["id"].as_str().unwrap())
        .collect()
}

fn comment_bodies(issue: &Value) -> Vec<String> {
    issue["comments"]
        .as_array()
        .unwrap_or_else(|| panic!("no comments in {issue}"))
        .iter()
        .map(|c| c["body"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_floored_run_sees_only_what_people_and_board_only_runs_wrote() {
    let served = serve();
    let admin = served.admin_token();
    let py = start_python_upstream();
    register_python_upstream(&served.url, &admin, "acme", "py", py.port);

    // A person's issue, through the admin API.
    let response = http()
        .post(format!("{}/v1/tenants/acme/issues", served.url))
        .bearer_auth(&admin)
        .json(&json!({ "title": "Rotate the deploy keys", "body": "before Friday" }))
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 201);
    let filed: Value = response.json().unwrap();
    let person_issue = filed["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{filed}"))
        .to_owned();

    // A run that may call the upstream: a comment before its first
    // upstream call, then the call, then a comment and an issue after.
    let (worker_url, worker) = register(
        &served,
        &admin,
        "worker",
        &[
            "issues:read",
            "issues:create",
            "comments:write",
            "upstream:py:add",
        ],
        None,
    );
    let out = sdk_agent(
        "py",
        &worker_url,
        &worker,
        &[
            (
                "add_comment",
                json!({ "id": person_issue, "body": "looked at it, board only" }),
            ),
            ("py__add", json!({ "a": 2, "b": 3 })),
            (
                "add_comment",
                json!({ "id": person_issue, "body": "after reading the upstream" }),
            ),
            (
                "create_issue",
                json!({ "title": "Rotate the cache keys as the upstream says" }),
            ),
        ],
    );
    assert_eq!(ok(&out, 0)["comment"]["_meta"][META], "agent", "{out}");
    assert_eq!(out["calls"][1]["isError"], false, "{out}");
    assert_eq!(ok(&out, 2)["comment"]["_meta"][META], "external", "{out}");
    assert_eq!(
        ok(&out, 2)["_meta"][META],
        "person",
        "a comment does not change the issue's own level: {out}"
    );
    let external_issue = ok(&out, 3)["id"].as_str().unwrap().to_owned();
    assert_eq!(ok(&out, 3)["_meta"][META], "external", "{out}");
    assert_eq!(ok(&out, 3)["author"]["integrity"], "external", "{out}");

    // A run kept to what people and board-only runs wrote.
    let (floored_url, floored) = register(
        &served,
        &admin,
        "floored",
        &["issues:read", "comments:write"],
        Some("agent"),
    );
    let seen = sdk_agent(
        "py",
        &floored_url,
        &floored,
        &[
            ("get_issue", json!({ "id": person_issue })),
            ("list_issues", json!({})),
            ("search_issues", json!({ "query": "rotate" })),
            ("get_issue", json!({ "id": external_issue })),
            (
                "add_comment",
                json!({ "id": external_issue, "body": "can I see this?" }),
            ),
        ],
    );
    let issue = ok(&seen, 0);
    assert_eq!(
        comment_bodies(issue),
        ["looked at it, board only"],
        "{seen}"
    );
    assert_eq!(issue["comments_withheld"], 1, "{seen}");
    assert_eq!(issue["_meta"][META], "person", "{seen}");
    assert_eq!(issue["comments"][0]["_meta"][META], "agent", "{seen}");
    assert_eq!(ids(&ok(&seen, 1)["issues"]), [&person_issue], "{seen}");
    assert_eq!(ids(&ok(&seen, 2)["hits"]), [&person_issue], "{seen}");
    // Every answer counts the issue's comments alike, shown or not, and a
    // summary says how many were withheld, as the issue does.
    let summary = &ok(&seen, 1)["issues"][0];
    for count in [
        &issue["comment_count"],
        &summary["comment_count"],
        &ok(&seen, 2)["hits"][0]["comment_count"],
    ] {
        assert_eq!(count, 2, "{seen}");
    }
    assert_eq!(summary["comments_withheld"], 1, "{seen}");
    for refused in [3, 4] {
        let call = &seen["calls"][refused];
        assert_eq!(call["isError"], true, "{seen}");
        let text = call["text"].as_str().unwrap();
        assert!(
            text.contains("withheld from this run") && text.contains("below this run's floor"),
            "{text}"
        );
    }

    // Nothing was written by the refused comment; a run without a floor
    // sees every entry, each labelled.
    let (reader_url, reader) = register(&served, &admin, "reader", &["issues:read"], None);
    let all = sdk_agent(
        "py",
        &reader_url,
        &reader,
        &[
            ("get_issue", json!({ "id": person_issue })),
            ("get_issue", json!({ "id": external_issue })),
        ],
    );
    let issue = ok(&all, 0);
    assert_eq!(
        comment_bodies(issue),
        ["looked at it, board only", "after reading the upstream"],
        "{all}"
    );
    assert!(issue.get("comments_withheld").is_none(), "{all}");
    let levels: Vec<&str> = issue["comments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["_meta"][META].as_str().unwrap())
        .collect();
    assert_eq!(levels, ["agent", "external"], "{all}");
    let external = ok(&all, 1);
    assert_eq!(external["_meta"][META], "external", "{all}");
    assert!(comment_bodies(external).is_empty(), "{all}");

    // The CLI sets a floor and shows it; a level it does not know is
    // refused naming the flag.
    let data = served.data_dir.path().join("data");
    let data = data.to_str().unwrap();
    let out = served.cli(
        &[
            "grant",
            "create",
            "--tenant",
            "acme",
            "--run",
            "cli-floored",
            "--caps",
            "issues:read",
            "--min-integrity",
            "person",
            "--json",
            "--data-dir",
            data,
        ],
        &[],
    );
    assert!(out.status.success(), "{}", stderr_of(&out));
    let granted = parse_granted(&stdout_of(&out));
    assert_eq!(granted.json["grant"]["min_integrity"], "person");
    let out = served.cli(
        &[
            "grant",
            "get",
            "--tenant",
            "acme",
            &granted.grant_id,
            "--data-dir",
            data,
        ],
        &[],
    );
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert!(
        stdout_of(&out).contains("min_integrity: person"),
        "{}",
        stdout_of(&out)
    );
    let (status, listed) = mcp_call(&granted.mcp_url, &granted.token, "list_issues", json!({}));
    assert_eq!(status, 200, "{listed}");
    assert_eq!(
        ids(&listed["result"]["structuredContent"]["issues"]),
        [&person_issue],
        "{listed}"
    );
    let out = served.cli(
        &[
            "grant",
            "create",
            "--tenant",
            "acme",
            "--run",
            "cli-bad",
            "--caps",
            "issues:read",
            "--min-integrity",
            "trusted",
            "--data-dir",
            data,
        ],
        &[],
    );
    assert!(!out.status.success());
    let err = stderr_of(&out);
    assert!(
        err.contains("--min-integrity") && err.contains("expected external, agent or person"),
        "{err}"
    );
}
