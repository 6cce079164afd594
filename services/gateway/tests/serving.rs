//! A run's gateway serves the board tools to its own token only, in both
//! listener modes, and a boardless run still lists every tool.

use crate::common;

use anyhow::{Context, Result};
use common::*;
use corkboard_board::NoopAuditSink;
use corkboard_gateway::{BOARDLESS_MESSAGE, Binding};
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
            Some(corkboard_tools::BoardTool::ALL.len()),
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
        // of the same name) is refused at this run's endpoint, from the
        // headers before the body is read, so without the id.
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
            assert_eq!(
                refused.json["id"],
                json!(null),
                "{mode:?}: {:?}",
                refused.json
            );
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
        assert_eq!(
            names.len(),
            corkboard_tools::BoardTool::ALL.len(),
            "{names:?}"
        );
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

/// Issue 16 item 6: the gateway read the body (up to 1 MiB, for up to the
/// body deadline) before it resolved the token. Now a caller without a
/// valid token for this run is answered from its headers while its body
/// never comes, and only the run's own token waits for a body (408 once
/// the deadline passes).
#[actix_rt::test]
async fn a_request_without_this_runs_token_is_refused_before_its_body() -> Result<()> {
    for mode in MODES {
        let dir = tempfile::tempdir()?;
        let harness = Setup::new(mode, sqlite_store(dir.path())?)
            // Long enough that a refusal after the body deadline (408)
            // cannot pass for one from the headers.
            .configure(|c| c.body_timeout = std::time::Duration::from_secs(60))
            .start()?;
        let run = harness.register("acme", "guarded").await?;
        let other = harness.register("acme", "neighbour").await?;
        let url = &run.mcp_url;
        let line = stalled_post(url, None, "").await?;
        assert!(line.starts_with("HTTP/1.1 401"), "{mode:?}: {line}");
        let line = stalled_post(url, Some("cbr_not-a-real-token"), "{\"jsonrpc\"").await?;
        assert!(line.starts_with("HTTP/1.1 403"), "{mode:?}: {line}");
        let line = stalled_post(url, Some(other.token.expose()), "{").await?;
        assert!(line.starts_with("HTTP/1.1 403"), "{mode:?}: {line}");
        harness.stop().await;
    }
    // The run's own token: its stalled body is cut off at the deadline.
    for mode in MODES {
        let dir = tempfile::tempdir()?;
        let harness = Setup::new(mode, sqlite_store(dir.path())?)
            .configure(|c| c.body_timeout = std::time::Duration::from_millis(300))
            .start()?;
        let run = harness.register("acme", "slow").await?;
        let line = stalled_post(&run.mcp_url, Some(run.token.expose()), "{").await?;
        assert!(line.starts_with("HTTP/1.1 408"), "{mode:?}: {line}");
        harness.stop().await;
    }
    Ok(())
}

/// Issue 16 item 6: connections were not capped per listener. A run's
/// dedicated port serves `max_connections_per_run` open connections; the
/// next one is answered 503 (and closed) while the others keep working,
/// and once some close, new ones are served again.
#[actix_rt::test]
async fn a_runs_port_serves_up_to_its_connection_cap() -> Result<()> {
    const CAP: usize = 4;
    let dir = tempfile::tempdir()?;
    let harness = Setup::new(Mode::Dedicated, sqlite_store(dir.path())?)
        .configure(|c| {
            c.max_connections_per_run = CAP;
            // Idle connections must outlive the test's pauses.
            c.keep_alive = std::time::Duration::from_secs(120);
        })
        .start()?;
    let run = harness.register("acme", "capped").await?;
    let token = run.token.expose();
    let mut open = Vec::new();
    for _ in 0..CAP {
        let mut conn = RawConn::open(&run.mcp_url).await?;
        // Served, so accepted and counted.
        assert_eq!(conn.list_tools("/mcp", token).await?.status, 200);
        open.push(conn);
    }
    let mut over = RawConn::open(&run.mcp_url).await?;
    let refused = over.list_tools("/mcp", token).await?;
    assert_eq!(refused.status, 503, "{refused:?}");
    assert_eq!(refused.header("connection"), Some("close"), "{refused:?}");
    assert!(refused.header("retry-after").is_some(), "{refused:?}");
    assert!(
        refused.body.contains("cap of 4 open connections"),
        "{}",
        refused.body
    );
    assert!(over.closed_by_server().await?);
    // The connections within the cap keep working.
    for conn in &mut open {
        assert_eq!(conn.list_tools("/mcp", token).await?.status, 200);
    }
    // Capacity returns as connections close.
    open.truncate(CAP - 2);
    let mut served = None;
    for _ in 0..100 {
        let mut conn = RawConn::open(&run.mcp_url).await?;
        let answer = conn.list_tools("/mcp", token).await?;
        if answer.status == 200 {
            served = Some(conn);
            break;
        }
        assert_eq!(answer.status, 503);
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let mut served = served.context("no connection was served after two closed")?;
    assert_eq!(served.list_tools("/mcp", token).await?.status, 200);
    harness.stop().await;
    Ok(())
}

/// Issue 16 item 6: time before authentication is bounded. A request head
/// dribbled in a byte at a time is cut off at the header deadline (408 and
/// the connection closed) on a run's port; tests/serve.rs checks the
/// server's listener.
#[actix_rt::test]
async fn a_dribbled_request_head_is_cut_off_at_the_header_deadline() -> Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir()?;
    let harness = Setup::new(Mode::Dedicated, sqlite_store(dir.path())?)
        .configure(|c| c.header_timeout = std::time::Duration::from_millis(500))
        .start()?;
    let run = harness.register("acme", "dribbled").await?;
    let (host, _) = host_and_path(&run.mcp_url);
    let mut stream = tokio::net::TcpStream::connect(&host).await?;
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {host}\r\nX-Slow: {}",
        "a".repeat(600)
    );
    let started = std::time::Instant::now();
    let mut answer = Vec::new();
    // One byte every 20 ms: 12 s for the whole head, far past the deadline.
    for byte in head.bytes() {
        if stream.write_all(&[byte]).await.is_err() {
            break;
        }
        let mut buf = [0u8; 256];
        match tokio::time::timeout(std::time::Duration::from_millis(20), stream.read(&mut buf))
            .await
        {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => answer.extend_from_slice(&buf[..n]),
            Err(_) => {}
        }
    }
    let answer = String::from_utf8_lossy(&answer).into_owned();
    assert!(
        answer.starts_with("HTTP/1.1 408"),
        "after {:?}: {answer:?}",
        started.elapsed()
    );
    harness.stop().await;
    Ok(())
}
