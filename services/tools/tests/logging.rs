//! What `BoardTools` logs per call. Its test needs a process to itself
//! (nextest gives every test one): the subscriber is process-global, so no
//! other test's thread may race tracing's callsite registration.

use anyhow::{Context, Result, ensure};
use corkboard_board::NoopAuditSink;
use corkboard_board::{Capabilities, Grant, GrantId, RunId, TenantId, Timestamp};
use corkboard_grants::ResolvedGrant;
use corkboard_grants::{MemoryRegistry, RunToken, TokenRegistry};
use corkboard_mcp::{Authenticate, ToolBackend, ToolCall, ToolOutput};
use corkboard_store_sqlite::SqliteStore;
use corkboard_testkit::LogCapture;
use corkboard_tools::BoardTools;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

async fn call(
    tools: &BoardTools,
    principal: &ResolvedGrant,
    name: &str,
    args: Value,
) -> ToolOutput {
    let raw = serde_json::to_vec(&args).unwrap_or_default();
    let map = args.as_object().cloned().unwrap_or_default();
    tools
        .call_tool(
            principal,
            ToolCall {
                name,
                arguments: &map,
                raw_arguments: &raw,
                peer: None,
                input_responses: None,
                request_state: None,
                progress_token: None,
            },
        )
        .await
}

#[actix_rt::test]
async fn logs_name_the_call_but_never_its_arguments_or_token() -> Result<()> {
    let capture = LogCapture::default();
    tracing::subscriber::set_global_default(
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_writer(capture.clone())
            .finish(),
    )?;
    tokio::time::timeout(Duration::from_secs(60), async {
        let dir = tempfile::tempdir()?;
        let store = SqliteStore::open(&dir.path().join("board.sqlite3"))?;
        let registry = Arc::new(MemoryRegistry::new());
        let tools = BoardTools::new(Arc::new(store), registry.clone(), Arc::new(NoopAuditSink));
        let now = Timestamp::now();
        let grant = Grant {
            id: GrantId::generate(),
            tenant: TenantId::parse("acme")?,
            run: RunId::parse("run-log")?,
            capabilities: Capabilities::all(),
            created_at: now,
            expires_at: now.plus_millis(3_600_000),
            created_by: "test".to_owned(),
            budgets: Default::default(),
            min_integrity: None,
        };
        let token = RunToken::generate();
        registry.register(&grant, &token.hash()).await?;
        let p = tools
            .authenticate(Some(token.expose()))
            .await
            .map_err(|r| anyhow::anyhow!("{r:?}"))?;

        let ok = call(
            &tools,
            &p,
            "create_issue",
            json!({"title": "secret-title-1234", "idempotency_key": "secret-key"}),
        )
        .await;
        ensure!(!ok.is_error, "{}", ok.text);
        let refused = call(
            &tools,
            &p,
            "create_issue",
            json!({"title": "", "body": "secret-body-1234"}),
        )
        .await;
        ensure!(refused.is_error);

        let logs = capture.text();
        let line = logs
            .lines()
            .find(|l| l.contains("tool call") && l.contains("outcome=\"ok\""))
            .with_context(|| format!("no tool call event in {logs}"))?;
        for field in [
            "tool=\"create_issue\"",
            "tenant=acme",
            "run=run-log",
            "latency_us=",
            grant.id.as_str(),
        ] {
            ensure!(line.contains(field), "{field} missing from {line}");
        }
        ensure!(logs.contains("outcome=\"tool_error\""), "{logs}");
        ensure!(
            !logs.contains("secret"),
            "arguments leaked into the logs: {logs}"
        );
        ensure!(
            !logs.contains(&token.expose()[4..]),
            "the token leaked into the logs"
        );
        Ok(())
    })
    .await
    .context("test did not finish in time")?
}
