//! A run's gateway serves the board tools to its own token only, in both
//! listener modes, and a boardless run still lists every tool.

mod common;

use anyhow::Result;
use common::*;
use corkboard_gateway::{BOARDLESS_MESSAGE, Binding};
use corkboard_tools::NoopAuditSink;
use serde_json::json;
use std::sync::Arc;

#[actix_rt::test]
async fn runs_are_served_and_pinned_to_their_own_token() -> Result<()> {
    for mode in MODES {
        let dir = tempfile::tempdir()?;
        let store = sqlite_store(dir.path())?;
        let harness = Setup::new(mode, store.clone()).start()?;
        let client = http();
        let a = harness.register("acme", "run-a").await?;
        let b = harness.register("acme", "run-b").await?;
        // Same run id, other tenant: a different run.
        let other = harness.register("globex", "run-a").await?;
        match mode {
            Mode::Dedicated => assert!(a.mcp_url.ends_with("/mcp") && a.mcp_url != b.mcp_url),
            Mode::Shared => assert!(a.mcp_url.ends_with("/runs/run-a/mcp"), "{}", a.mcp_url),
        }

        let listed = send(
            &client,
            &a.mcp_url,
            a.token.expose(),
            &modern(json!(1), "tools/list", json!({})),
        )
        .await?;
        assert_eq!(listed.status, 200, "{mode:?}: {:?}", listed.json);
        assert_eq!(
            listed.json["result"]["tools"].as_array().map(Vec::len),
            Some(6),
            "{mode:?}"
        );

        let created = call_tool(
            &client,
            &a,
            json!("c-1"),
            "create_issue",
            json!({"title": "from run a"}),
        )
        .await?;
        assert_eq!(created.status, 200, "{mode:?}: {:?}", created.json);
        assert_eq!(created.json["id"], "c-1");
        assert_eq!(
            created.structured()["author"]["run"],
            "run-a",
            "{:?}",
            created.json
        );

        // A valid token of another run (same tenant, or another tenant's run
        // of the same name) is refused at this run's endpoint, with the id.
        let mut intrusions = vec![(&b, &a.mcp_url), (&a, &b.mcp_url)];
        if mode == Mode::Dedicated {
            intrusions.extend([(&other, &a.mcp_url), (&a, &other.mcp_url)]);
        }
        for (intruder, url) in intrusions {
            let body = modern(
                json!(99),
                "tools/call",
                json!({"name": "list_issues", "arguments": {}}),
            );
            let refused = send(&client, url, intruder.token.expose(), &body).await?;
            assert_eq!(refused.status, 403, "{mode:?}: {:?}", refused.json);
            assert_eq!(refused.json["id"], 99, "{mode:?}: {:?}", refused.json);
            assert!(
                refused.error_message().contains("belongs to another run"),
                "{}",
                refused.error_message()
            );
        }

        // In shared mode both tenants' `run-a` live at the same path; each
        // token still reaches only its own tenant's board.
        let theirs = call_tool(
            &client,
            &other,
            json!(7),
            "create_issue",
            json!({"title": "from globex"}),
        )
        .await?;
        assert_eq!(theirs.status, 200, "{mode:?}: {:?}", theirs.json);
        let acme = issues(store.as_ref(), "acme").await?;
        assert_eq!(acme.len(), 1);
        assert_eq!(acme[0].title.as_str(), "from run a");
        let globex = issues(store.as_ref(), "globex").await?;
        assert_eq!(globex.len(), 1);
        assert_eq!(globex[0].title.as_str(), "from globex");

        // Unknown paths answer a JSON-RPC error, never an empty 404.
        let base = a.mcp_url.trim_end_matches("/mcp");
        let wrong = send(
            &client,
            &format!("{base}/nope"),
            a.token.expose(),
            &modern(json!(5), "ping", json!({})),
        )
        .await?;
        assert_eq!(wrong.status, 404, "{mode:?}");
        harness.stop().await;
    }
    Ok(())
}

#[actix_rt::test]
async fn a_boardless_run_lists_every_tool_and_says_it_has_no_board() -> Result<()> {
    for mode in MODES {
        let dir = tempfile::tempdir()?;
        let harness = Setup::new(mode, sqlite_store(dir.path())?).start()?;
        harness.gateway.rebind(Binding::boardless(
            harness.registry.clone(),
            Arc::new(NoopAuditSink),
            std::time::Duration::from_secs(5),
        ));
        let reg = harness.register("acme", "lonely").await?;
        let client = http();
        let listed = send(
            &client,
            &reg.mcp_url,
            reg.token.expose(),
            &modern(json!(1), "tools/list", json!({})),
        )
        .await?;
        let names: Vec<&str> = listed.json["result"]["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str())
            .collect();
        assert_eq!(names.len(), 6, "{names:?}");
        for (tool, args) in [
            ("create_issue", json!({"title": "t"})),
            ("list_issues", json!({})),
            ("get_issue", json!({"id": "iss_00000000000000000000000000"})),
        ] {
            let answer = call_tool(&client, &reg, json!(tool), tool, args).await?;
            assert_eq!(answer.status, 200);
            assert_eq!(
                answer.tool_error().as_deref(),
                Some(BOARDLESS_MESSAGE),
                "{tool}: {:?}",
                answer.json
            );
        }
        harness.stop().await;
    }
    Ok(())
}
