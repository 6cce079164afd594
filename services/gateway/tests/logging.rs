//! The request log: one default-level event per request with method, tool,
//! tenant, run, outcome and latency; never tool arguments or tokens.
//!
//! Alone in its process (nextest runs every test in its own): it installs
//! the global log subscriber.

use crate::common;

use anyhow::{Context, Result};
use common::*;
use corkboard_testkit::LogCapture;
use serde_json::{Value, json};

#[actix_rt::test]
async fn one_event_per_request_without_arguments_or_tokens() -> Result<()> {
    let captured = LogCapture::default();
    tracing_subscriber::fmt()
        .json()
        .with_max_level(tracing::Level::INFO)
        .with_writer(captured.clone())
        .init();

    for mode in MODES {
        let dir = tempfile::tempdir()?;
        let harness = Setup::new(mode, sqlite_store(dir.path())?).start()?;
        let reg = harness.register("acme", "logged").await?;
        let client = http();
        let secret = format!("secret-title-{mode:?}-7f3a");
        let created = call_tool(
            &client,
            &reg,
            json!(1),
            "create_issue",
            json!({"title": secret}),
        )
        .await?;
        assert_eq!(created.status, 200);
        let failed = call_tool(
            &client,
            &reg,
            json!(2),
            "get_issue",
            json!({"id": "iss_00000000000000000000000000"}),
        )
        .await?;
        assert!(failed.tool_error().is_some());
        let stranger = send(
            &client,
            &reg.mcp_url,
            "cbr_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
            &modern(json!(3), "tools/list", json!({})),
        )
        .await?;
        assert_eq!(stranger.status, 403);
        harness.stop().await;

        let text = captured.text();
        assert!(
            !text.contains(&secret),
            "{mode:?}: tool arguments reached the log"
        );
        assert!(
            !text.contains(reg.token.expose()),
            "{mode:?}: the run token reached the log"
        );
        assert!(
            !text.contains(&reg.token.expose()[4..20]),
            "{mode:?}: part of the run token reached the log"
        );
        let events: Vec<Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|e| {
                e["fields"]["message"] == "gateway request" && e["fields"]["run"] == "logged"
            })
            .collect();
        let find = |id_tool: &str, outcome: &str| {
            events
                .iter()
                .find(|e| e["fields"]["tool"] == id_tool && e["fields"]["outcome"] == outcome)
                .cloned()
        };
        let ok = find("create_issue", "ok").context("no event for the create_issue call")?;
        assert_eq!(ok["level"], "INFO");
        assert_eq!(ok["fields"]["method"], "tools/call");
        assert_eq!(ok["fields"]["tenant"], "acme");
        assert!(ok["fields"]["latency_us"].as_u64().is_some());
        assert!(find("get_issue", "tool_error").is_some(), "{events:?}");
        assert!(
            events
                .iter()
                // Refused from its headers, before its body (and so its
                // method) was read.
                .any(|e| e["fields"]["method"] == "none"
                    && e["fields"]["outcome"] == "refused"
                    && e["fields"]["status"] == 403),
            "{events:?}"
        );
        // One event per request: three requests, three gateway events.
        let this_mode: Vec<_> = events
            .iter()
            .filter(|e| e["fields"]["tool"] == "create_issue" && e["fields"]["outcome"] == "ok")
            .collect();
        assert_eq!(this_mode.len(), 1, "{mode:?}: {this_mode:?}");
        // And no second info line for the same request from the MCP
        // endpoint or the board tools.
        let per_request: Vec<Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|e| {
                ["mcp exchange", "tool call", "gateway request"]
                    .contains(&e["fields"]["message"].as_str().unwrap_or_default())
            })
            .collect();
        assert_eq!(per_request.len(), 3, "{mode:?}: {per_request:#?}");
        captured.clear();
    }
    Ok(())
}
