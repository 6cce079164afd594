//! Black-box: `corkboard serve` on the MongoDB store reports the store's
//! state on /readyz, answers "board unavailable" within a bounded time
//! while MongoDB is down, and recovers by itself when it returns.

use crate::support;

use serde_json::json;
use std::time::{Duration, Instant};
use support::*;

#[test]
fn mongodb_outage_is_loud_bounded_and_recovers() {
    let mut mongo = corkboard_testkit::MongoServer::start();
    let database = corkboard_testkit::unique_database("outage");
    let uri = mongo.uri();
    let serve = Serve::start_with_env(&[
        ("CORKBOARD_STORE", "mongodb"),
        ("CORKBOARD_MONGODB_URI", &uri),
        ("CORKBOARD_MONGODB_DATABASE", &database),
        ("CORKBOARD_STORE_TIMEOUT_MS", "3000"),
    ]);
    let ready = http()
        .get(format!("{}/readyz", serve.url()))
        .send()
        .unwrap();
    assert_eq!(ready.status(), 200);
    let granted = serve.grant("acme", "run-m", "issues:read,issues:create");
    let (_, created) = mcp_call(
        &granted.mcp_url,
        &granted.token,
        "create_issue",
        json!({"title": "before"}),
    );
    assert_eq!(created["result"]["isError"], false, "{created}");

    mongo.stop();
    // Readiness tolerates a blip (a store that answered within the last
    // 10 s is "degraded", still ready), then says unavailable.
    let deadline = Instant::now() + Duration::from_secs(60);
    let ready = loop {
        let ready: serde_json::Value = http()
            .get(format!("{}/readyz", serve.url()))
            .send()
            .unwrap()
            .json()
            .unwrap();
        if ready["status"] == "unavailable" {
            break ready;
        }
        assert_eq!(ready["status"], "ready", "{ready}");
        assert!(Instant::now() < deadline, "still ready: {ready}");
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_ne!(ready["store"], "ok");
    let started = Instant::now();
    let (status, reply) = mcp_call(&granted.mcp_url, &granted.token, "list_issues", json!({}));
    let took = started.elapsed();
    // Either the token could not be checked (the grant ledger is in the
    // same MongoDB: 503) or the tool says the board is unavailable.
    let text = reply.to_string().to_lowercase();
    assert!(
        status == 503 || reply["result"]["isError"] == true,
        "{status} {reply}"
    );
    assert!(text.contains("unavailable"), "{reply}");
    assert!(took < Duration::from_secs(20), "answer took {took:?}");

    let port = mongo.port();
    mongo.restart();
    assert_eq!(
        mongo.port(),
        port,
        "the test server came back on another port"
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, reply) = mcp_call(&granted.mcp_url, &granted.token, "list_issues", json!({}));
        if status == 200 && reply["result"]["isError"] == false {
            let titles: Vec<&str> = reply["result"]["structuredContent"]["issues"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["title"].as_str().unwrap())
                .collect();
            assert_eq!(titles, ["before"]);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no recovery after MongoDB returned: {status} {reply}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}
