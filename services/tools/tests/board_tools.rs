//! `BoardTools` against the real SQLite store and the in-process registry:
//! authentication, capability filtering and denial, tenant pinning, every
//! error mapping, store timeouts, and the audit trail.

use anyhow::{Context, Result, bail, ensure};
use async_trait::async_trait;
use corkboard_board::{
    ArgumentsHash, AuditOutcome, AuditRecord, Capabilities, Grant, GrantId, Issue, IssueId,
    MemoryAuditSink, RunId, StoreError, TenantId, Timestamp,
};
use corkboard_grants::ResolvedGrant;
use corkboard_grants::{MemoryRegistry, RegistryError, RunToken, TokenHash, TokenRegistry};
use corkboard_mcp::{AuthRejection, Authenticate, Principal, ToolBackend, ToolCall, ToolOutput};
use corkboard_store_contract::FaultStore;
use corkboard_store_sqlite::SqliteStore;
use corkboard_tools::{BoardTools, DEFAULT_RESULT_BUDGET, ENVELOPE_BYTES};
use serde_json::{Map, Value, json};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// Generous bound on every test, only so a regression hangs no CI job.
const HANG_GUARD: Duration = Duration::from_secs(60);

async fn guarded<F: Future<Output = Result<()>>>(test: F) -> Result<()> {
    tokio::time::timeout(HANG_GUARD, test)
        .await
        .context("test did not finish in time")?
}

struct Fixture {
    tools: BoardTools,
    registry: Arc<MemoryRegistry>,
    audit: Arc<MemoryAuditSink>,
    _dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Result<Self> {
        let dir = tempfile::tempdir()?;
        let store = SqliteStore::open(&dir.path().join("board.sqlite3"))?;
        let registry = Arc::new(MemoryRegistry::new());
        let audit = Arc::new(MemoryAuditSink::new());
        let tools = BoardTools::new(Arc::new(store), registry.clone(), audit.clone());
        Ok(Self {
            tools,
            registry,
            audit,
            _dir: dir,
        })
    }

    /// Registers a grant and authenticates its token the way the transport
    /// does, so every test goes through `authenticate`.
    async fn principal(&self, tenant: &str, run: &str, caps: &str) -> Result<ResolvedGrant> {
        let token = self.register(tenant, run, caps, 3_600_000).await?;
        self.tools
            .authenticate(Some(token.expose()))
            .await
            .map_err(|r| anyhow::anyhow!("authentication refused: {r:?}"))
    }

    async fn register(
        &self,
        tenant: &str,
        run: &str,
        caps: &str,
        ttl_millis: i64,
    ) -> Result<RunToken> {
        let grant = grant(tenant, run, caps, ttl_millis)?;
        let token = RunToken::generate();
        self.registry.register(&grant, &token.hash()).await?;
        Ok(token)
    }

    async fn call(&self, principal: &ResolvedGrant, name: &str, args: Value) -> ToolOutput {
        call(&self.tools, principal, name, args).await
    }

    async fn ok(&self, principal: &ResolvedGrant, name: &str, args: Value) -> Result<Value> {
        let out = self.call(principal, name, args).await;
        ensure!(!out.is_error, "{name} failed: {}", out.text);
        let structured = out.structured.context("no structured result")?;
        // Its own text block, a rendering of the same answer for clients
        // that read only `content`: it quotes the issue ids exactly.
        ensure!(!out.text.is_empty(), "{name}: no text block");
        if let Some(id) = structured["id"].as_str() {
            ensure!(
                out.text.contains(id),
                "{name}: text lacks {id}: {}",
                out.text
            );
        }
        for issue in structured["issues"].as_array().into_iter().flatten() {
            let id = issue["id"].as_str().unwrap_or_default();
            ensure!(
                out.text.contains(id),
                "{name}: text lacks {id}: {}",
                out.text
            );
        }
        Ok(structured.into_value())
    }

    async fn error(&self, principal: &ResolvedGrant, name: &str, args: Value) -> Result<String> {
        let out = self.call(principal, name, args).await;
        ensure!(out.is_error, "{name} unexpectedly succeeded: {}", out.text);
        ensure!(
            out.structured.is_none(),
            "an error carries no structured result"
        );
        Ok(out.text.into_string())
    }

    fn last_audit(&self) -> Result<AuditRecord> {
        self.audit.records().pop().context("no audit record")
    }
}

/// Whether RFC 3339 time `a` is later than `b`. Compared as times, not as
/// text: the answers leave out a zero fraction, so `16:21:16Z` is later
/// than `16:21:15.98Z` but sorts before it as text.
fn later(a: &str, b: &str) -> Result<bool> {
    let time = |t: &str| Timestamp::parse_rfc3339(t).with_context(|| format!("time {t:?}"));
    Ok(time(a)? > time(b)?)
}

fn grant(tenant: &str, run: &str, caps: &str, ttl_millis: i64) -> Result<Grant> {
    let now = Timestamp::now();
    Ok(Grant {
        id: GrantId::generate(),
        tenant: TenantId::parse(tenant)?,
        run: RunId::parse(run)?,
        capabilities: Capabilities::parse_csv(caps)?,
        created_at: now,
        expires_at: now.plus_millis(ttl_millis),
        created_by: "test".to_owned(),
        budgets: Default::default(),
        min_integrity: None,
    })
}

async fn call(
    tools: &BoardTools,
    principal: &ResolvedGrant,
    name: &str,
    args: Value,
) -> ToolOutput {
    let raw = serde_json::to_vec(&args).unwrap_or_default();
    let map = match args {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    let output = tools
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
        .await;
    // Release builds send the board's results unchecked (they are typed):
    // every result these tests see is proven against the whole output
    // schema the grant was shown, as debug builds check it on every call.
    if let Some(structured) = output.structured.as_ref().filter(|_| !output.is_error) {
        let checked = tools.tools(principal).check_result(name, structured);
        assert_eq!(
            checked,
            Ok(()),
            "{name}: result not matching its outputSchema"
        );
    }
    output
}

fn names(tools: &BoardTools, principal: &ResolvedGrant) -> Vec<String> {
    tools
        .tools(principal)
        .tools()
        .iter()
        .map(|t| t.name.clone())
        .collect()
}

const ALL: &str = "issues:read,issues:create,issues:update,comments:write";

#[actix_rt::test]
async fn identity_names_the_board_and_its_version() -> Result<()> {
    let f = Fixture::new()?;
    let identity = f.tools.identity();
    assert_eq!(identity.name, "corkboard");
    assert_eq!(identity.version, env!("CARGO_PKG_VERSION"));
    assert_eq!(identity.title.as_deref(), Some("Corkboard"));
    let instructions = identity.instructions.as_deref().unwrap_or_default();
    assert!(instructions.contains("iss_"), "{instructions}");
    assert!(instructions.contains("exactly"), "{instructions}");
    Ok(())
}

#[actix_rt::test]
async fn authentication_resolves_tokens_and_refuses_clearly() -> Result<()> {
    guarded(async {
        let f = Fixture::new()?;
        let principal = f.principal("acme", "run-1", "issues:read").await?;
        assert_eq!(principal.grant().tenant.as_str(), "acme");
        assert_eq!(principal.session_binding(), principal.grant().id.as_str());

        assert_eq!(f.tools.authenticate(None).await.err(), Some(AuthRejection::Missing));
        let malformed = f.tools.authenticate(Some("hunter2")).await.err();
        assert!(
            matches!(&malformed, Some(AuthRejection::Refused(m)) if m.contains("malformed") && !m.contains("hunter2")),
            "{malformed:?}"
        );
        let unknown = RunToken::generate();
        assert_eq!(
            f.tools.authenticate(Some(unknown.expose())).await.err(),
            Some(AuthRejection::Refused("run token unknown".into()))
        );
        let expired = f.register("acme", "run-2", "issues:read", -1).await?;
        assert_eq!(
            f.tools.authenticate(Some(expired.expose())).await.err(),
            Some(AuthRejection::Refused("run token expired".into()))
        );
        // Revocation as a registry that remembers it reports it.
        let token = RunToken::generate();
        for (err, expected) in [
            (
                RegistryError::Revoked,
                AuthRejection::Refused("run token revoked".into()),
            ),
            (
                RegistryError::Unavailable("redis down".into()),
                AuthRejection::Unavailable("token registry unavailable: redis down".into()),
            ),
        ] {
            let tools = BoardTools::new(
                Arc::new(FaultStore::failing(StoreError::unavailable("unused"))),
                Arc::new(FixedRegistry(err)),
                Arc::new(MemoryAuditSink::new()),
            );
            assert_eq!(tools.authenticate(Some(token.expose())).await.err(), Some(expected));
        }
        Ok(())
    })
    .await
}

#[actix_rt::test]
async fn a_registry_that_never_answers_is_unavailable_not_a_hang() -> Result<()> {
    guarded(async {
        let tools = BoardTools::new(
            Arc::new(FaultStore::failing(StoreError::unavailable("unused"))),
            Arc::new(HangingRegistry),
            Arc::new(MemoryAuditSink::new()),
        )
        .with_store_timeout(Duration::from_millis(100));
        let rejection = tools.authenticate(Some(RunToken::generate().expose())).await;
        assert!(
            matches!(&rejection, Err(AuthRejection::Unavailable(m)) if m.contains("did not answer")),
            "{rejection:?}"
        );
        Ok(())
    })
    .await
}

#[actix_rt::test]
async fn tools_list_follows_capabilities_and_other_calls_are_denied() -> Result<()> {
    guarded(async {
        let f = Fixture::new()?;
        for (caps, expected) in [
            (
                "issues:read",
                vec![
                    "list_issues",
                    "get_issue",
                    "search_issues",
                    "board_stats",
                    "collect_approval",
                ],
            ),
            (
                "issues:create",
                vec!["create_issue", "create_issues", "collect_approval"],
            ),
            ("issues:update", vec!["update_issue", "collect_approval"]),
            ("comments:write", vec!["add_comment", "collect_approval"]),
            (
                "issues:read,comments:write",
                vec![
                    "list_issues",
                    "get_issue",
                    "add_comment",
                    "search_issues",
                    "board_stats",
                    "collect_approval",
                ],
            ),
            (
                ALL,
                vec![
                    "list_issues",
                    "get_issue",
                    "create_issue",
                    "update_issue",
                    "add_comment",
                    "search_issues",
                    "create_issues",
                    "board_stats",
                    "collect_approval",
                ],
            ),
        ] {
            let p = f.principal("acme", "run-1", caps).await?;
            assert_eq!(names(&f.tools, &p), expected, "{caps}");
        }
        // The same capability set shares one tool set.
        let a = f.principal("acme", "a", "issues:read").await?;
        let b = f.principal("other", "b", "issues:read").await?;
        assert!(Arc::ptr_eq(&f.tools.tools(&a), &f.tools.tools(&b)));

        let reader = f.principal("acme", "reader", "issues:read").await?;
        let text = f
            .error(&reader, "create_issue", json!({"title": "not allowed"}))
            .await?;
        assert!(text.contains("issues:create"), "{text}");
        assert!(
            text.contains("issues:read"),
            "the text names what the grant allows: {text}"
        );
        let record = f.last_audit()?;
        assert_eq!(record.outcome, AuditOutcome::Denied);
        assert_eq!(record.tool, "create_issue");
        let page = f.ok(&reader, "list_issues", json!({})).await?;
        assert_eq!(
            page["issues"],
            json!([]),
            "a denied create must write nothing"
        );

        let writer = f.principal("acme", "writer", "issues:create").await?;
        let text = f.error(&writer, "list_issues", json!({})).await?;
        assert!(text.contains("issues:read"), "{text}");
        Ok(())
    })
    .await
}

#[actix_rt::test]
async fn the_full_flow_pins_tenant_and_author_to_the_grant() -> Result<()> {
    guarded(async {
        let f = Fixture::new()?;
        let p = f.principal("acme", "run-7", ALL).await?;
        let created = f
            .ok(
                &p,
                "create_issue",
                json!({
                    "title": "Flaky test in CI", "body": "Fails one run in ten.",
                    "state": "todo", "labels": ["ci", "bug"], "priority": "high",
                    "idempotency_key": "create-1"
                }),
            )
            .await?;
        let id = created["id"].as_str().context("id")?.to_owned();
        assert!(IssueId::parse(&id).is_ok(), "{id}");
        assert_eq!(created["tenant"], "acme");
        assert_eq!(created["author"]["run"], "run-7");
        assert_eq!(created["author"]["grant"], p.grant().id.as_str());
        assert_eq!(created["version"], 1);
        assert_eq!(created["replayed"], false);
        assert_eq!(created["labels"], json!(["bug", "ci"]));
        assert_eq!(created["comments"], json!([]));
        // The shape is the domain's Issue, plus `replayed`.
        let mut as_issue = created.clone();
        as_issue
            .as_object_mut()
            .context("object")?
            .remove("replayed");
        let issue: Issue = serde_json::from_value(as_issue)?;
        assert_eq!(issue.id.as_str(), id);

        let replay = f
            .ok(
                &p,
                "create_issue",
                json!({
                    "title": "Flaky test in CI", "body": "Fails one run in ten.",
                    "state": "todo", "labels": ["ci", "bug"], "priority": "high",
                    "idempotency_key": "create-1"
                }),
            )
            .await?;
        assert_eq!(replay["id"], id.as_str());
        assert_eq!(replay["replayed"], true);
        let conflict = f
            .error(
                &p,
                "create_issue",
                json!({"title": "Another issue", "idempotency_key": "create-1"}),
            )
            .await?;
        assert!(conflict.contains("idempotency_key"), "{conflict}");
        assert!(conflict.contains("nothing was"), "{conflict}");

        let got = f.ok(&p, "get_issue", json!({"id": id})).await?;
        assert_eq!(got["title"], "Flaky test in CI");

        let page = f
            .ok(
                &p,
                "list_issues",
                json!({"states": ["todo"], "labels": ["ci", "bug"], "text": "FLAKY", "limit": 5}),
            )
            .await?;
        assert_eq!(page["issues"][0]["id"], id.as_str());
        assert_eq!(page["next_cursor"], Value::Null);

        let updated = f
            .ok(
                &p,
                "update_issue",
                json!({"id": id, "state": "in_progress", "expected_version": 1}),
            )
            .await?;
        assert_eq!(updated["state"], "in_progress");
        assert_eq!(updated["version"], 2);

        let commented = f
            .ok(
                &p,
                "add_comment",
                json!({"issue_id": id, "body": "Bisecting now.", "idempotency_key": "c-1"}),
            )
            .await?;
        assert_eq!(commented["replayed"], false);
        assert_eq!(commented["comments"][0]["body"], "Bisecting now.");
        assert_eq!(commented["comment"]["author"]["run"], "run-7");
        let again = f
            .ok(
                &p,
                "add_comment",
                json!({"issue_id": id, "body": "Bisecting now.", "idempotency_key": "c-1"}),
            )
            .await?;
        assert_eq!(again["replayed"], true);
        assert_eq!(again["comment"]["id"], commented["comment"]["id"]);
        assert_eq!(again["comments"].as_array().map(Vec::len), Some(1));
        Ok(())
    })
    .await
}

#[actix_rt::test]
async fn paging_walks_every_issue_once() -> Result<()> {
    guarded(async {
        let f = Fixture::new()?;
        let p = f.principal("acme", "run-1", ALL).await?;
        let mut created = Vec::new();
        for i in 0..5 {
            let issue = f
                .ok(&p, "create_issue", json!({"title": format!("issue {i}")}))
                .await?;
            created.push(issue["id"].clone());
        }
        let mut seen = Vec::new();
        let mut cursor = Value::Null;
        loop {
            let mut args = json!({"limit": 2});
            if !cursor.is_null() {
                args["cursor"] = cursor.clone();
            }
            let page = f.ok(&p, "list_issues", args).await?;
            seen.extend(
                page["issues"]
                    .as_array()
                    .context("issues")?
                    .iter()
                    .map(|i| i["id"].clone()),
            );
            cursor = page["next_cursor"].clone();
            if cursor.is_null() {
                break;
            }
            ensure!(seen.len() < 10, "paging does not end");
        }
        // Newest first means by id, descending (ids are ULIDs; two made in
        // the same millisecond have no creation order to respect).
        let mut expected: Vec<String> = created
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect();
        expected.sort_unstable_by(|a, b| b.cmp(a));
        let seen: Vec<String> = seen
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect();
        assert_eq!(seen, expected, "every issue once, newest first");
        Ok(())
    })
    .await
}

#[actix_rt::test]
async fn tenants_never_see_each_other() -> Result<()> {
    guarded(async {
        let f = Fixture::new()?;
        let a = f.principal("acme", "run-a", ALL).await?;
        let b = f.principal("globex", "run-b", ALL).await?;
        let issue = f
            .ok(&a, "create_issue", json!({"title": "acme only"}))
            .await?;
        let id = issue["id"].as_str().context("id")?;

        let page = f.ok(&b, "list_issues", json!({})).await?;
        assert_eq!(page["issues"], json!([]));
        for (tool, args) in [
            ("get_issue", json!({"id": id})),
            ("update_issue", json!({"id": id, "title": "hijacked"})),
            ("add_comment", json!({"issue_id": id, "body": "hijacked"})),
        ] {
            let text = f.error(&b, tool, args).await?;
            assert!(
                text.contains(&format!("issue {id} not found")),
                "{tool}: {text}"
            );
        }
        // No argument can choose the tenant: it is not in any schema, and
        // the parser refuses it by name.
        let text = f
            .error(&b, "list_issues", json!({"tenant": "acme"}))
            .await?;
        assert!(
            text.contains("`tenant`") && text.contains("grant"),
            "{text}"
        );
        let text = f
            .error(&b, "create_issue", json!({"title": "x", "tenant": "acme"}))
            .await?;
        assert!(text.contains("`tenant`"), "{text}");
        for tool in f.tools.tools(&b).tools() {
            assert!(tool.input_schema["properties"].get("tenant").is_none());
            assert_eq!(tool.input_schema["additionalProperties"], false);
        }

        let untouched = f.ok(&a, "get_issue", json!({"id": id})).await?;
        assert_eq!(untouched["title"], "acme only");
        assert_eq!(untouched["version"], 1);
        assert_eq!(untouched["comments"], json!([]));
        let page = f.ok(&a, "list_issues", json!({})).await?;
        assert_eq!(page["issues"].as_array().map(Vec::len), Some(1));
        Ok(())
    })
    .await
}

#[actix_rt::test]
async fn errors_tell_the_model_what_to_do() -> Result<()> {
    guarded(async {
        let f = Fixture::new()?;
        let p = f.principal("acme", "run-1", ALL).await?;
        let issue = f.ok(&p, "create_issue", json!({"title": "t"})).await?;
        let id = issue["id"].as_str().context("id")?;
        f.ok(&p, "update_issue", json!({"id": id, "state": "triage"}))
            .await?;

        let stale = f
            .error(
                &p,
                "update_issue",
                json!({"id": id, "title": "stale", "expected_version": 1}),
            )
            .await?;
        assert!(stale.contains("expected_version=1"), "{stale}");
        assert!(stale.contains("get_issue"), "{stale}");
        assert!(stale.contains("retry with expected_version=2"), "{stale}");
        assert_eq!(f.last_audit()?.outcome, AuditOutcome::ToolError);
        let unchanged = f.ok(&p, "get_issue", json!({"id": id})).await?;
        assert_eq!(unchanged["title"], "t");

        let missing = IssueId::generate();
        let text = f
            .error(&p, "get_issue", json!({"id": missing.as_str()}))
            .await?;
        assert!(
            text.contains(&format!("issue {missing} not found")),
            "{text}"
        );

        for (tool, args, field) in [
            ("create_issue", json!({"title": ""}), "title"),
            ("create_issue", json!({"title": "a\nb"}), "title"),
            (
                "create_issue",
                json!({"title": "t", "state": "open"}),
                "state",
            ),
            (
                "create_issue",
                json!({"title": "t", "priority": 3}),
                "priority",
            ),
            (
                "create_issue",
                json!({"title": "t", "labels": ["Has Space"]}),
                "labels",
            ),
            ("get_issue", json!({"id": "42"}), "id"),
            ("get_issue", json!({}), "id"),
            ("list_issues", json!({"limit": 1000}), "limit"),
            ("list_issues", json!({"cursor": "next"}), "cursor"),
            (
                "update_issue",
                json!({"id": id, "expected_version": 0, "title": "x"}),
                "expected_version",
            ),
            ("add_comment", json!({"issue_id": id, "body": ""}), "body"),
            (
                "add_comment",
                json!({"issue_id": id, "body": "x", "extra": 1}),
                "extra",
            ),
        ] {
            let text = f.error(&p, tool, args.clone()).await?;
            assert!(
                text.starts_with(&format!("invalid argument `{field}`")),
                "{tool} {args}: {text}"
            );
        }
        let text = f.error(&p, "update_issue", json!({"id": id})).await?;
        assert!(text.contains("at least one of"), "{text}");
        Ok(())
    })
    .await
}

#[actix_rt::test]
async fn a_store_that_never_answers_is_board_unavailable() -> Result<()> {
    guarded(async {
        let audit = Arc::new(MemoryAuditSink::new());
        let registry = Arc::new(MemoryRegistry::new());
        let tools = BoardTools::new(
            Arc::new(FaultStore::hanging()),
            registry.clone(),
            audit.clone(),
        )
        .with_store_timeout(Duration::from_millis(100));
        let p = ResolvedGrant::new(
            grant("acme", "run-1", ALL, 3_600_000)?,
            RunToken::generate().hash(),
        );
        for (tool, args) in [
            ("list_issues", json!({})),
            ("get_issue", json!({"id": IssueId::generate().as_str()})),
            ("create_issue", json!({"title": "t"})),
            (
                "update_issue",
                json!({"id": IssueId::generate().as_str(), "title": "t"}),
            ),
            (
                "add_comment",
                json!({"issue_id": IssueId::generate().as_str(), "body": "b"}),
            ),
        ] {
            let out = call(&tools, &p, tool, args).await;
            assert!(out.is_error, "{tool}");
            assert!(
                out.text.starts_with("board unavailable:"),
                "{tool}: {}",
                out.text
            );
            assert!(out.text.contains("retryable"), "{}", out.text);
        }
        let records = audit.records();
        assert_eq!(records.len(), 5);
        assert!(
            records
                .iter()
                .all(|r| r.outcome == AuditOutcome::Unavailable)
        );
        Ok(())
    })
    .await
}

#[actix_rt::test]
async fn store_errors_map_to_tool_errors() -> Result<()> {
    guarded(async {
        let p = ResolvedGrant::new(
            grant("acme", "run-1", ALL, 3_600_000)?,
            RunToken::generate().hash(),
        );
        let id = IssueId::generate();
        for (err, expected, outcome) in [
            (
                StoreError::unavailable("database is locked"),
                "board unavailable: database is locked (retryable; try again in a few seconds)",
                AuditOutcome::Unavailable,
            ),
            (
                StoreError::Internal("SQLITE_CORRUPT at page 7".into()),
                "internal board error",
                AuditOutcome::ToolError,
            ),
            (
                StoreError::IdempotencyConflict,
                "idempotency_key was already used",
                AuditOutcome::ToolError,
            ),
            (
                StoreError::VersionConflict {
                    expected: 3,
                    actual: 4,
                },
                "retry with expected_version=4",
                AuditOutcome::ToolError,
            ),
            (
                StoreError::not_found("issue"),
                "not found",
                AuditOutcome::ToolError,
            ),
        ] {
            let audit = Arc::new(MemoryAuditSink::new());
            let tools = BoardTools::new(
                Arc::new(FaultStore::failing(err.clone())),
                Arc::new(MemoryRegistry::new()),
                audit.clone(),
            );
            let out = call(
                &tools,
                &p,
                "update_issue",
                json!({"id": id.as_str(), "title": "t", "expected_version": 3}),
            )
            .await;
            assert!(out.is_error);
            assert!(
                out.text.starts_with(expected) || out.text.contains(expected),
                "{err:?}: {}",
                out.text
            );
            assert!(
                !out.text.contains("SQLITE"),
                "internal details stay in the logs"
            );
            let records = audit.records();
            assert_eq!(records.len(), 1);
            assert_eq!(records[0].outcome, outcome, "{err:?}");
            assert_eq!(records[0].issue.as_ref(), Some(&id));
        }
        Ok(())
    })
    .await
}

#[actix_rt::test]
async fn every_call_is_audited_with_a_hash_and_never_the_arguments() -> Result<()> {
    guarded(async {
        let f = Fixture::new()?;
        let p = f
            .principal("acme", "run-9", "issues:read,issues:create")
            .await?;
        let args = json!({"title": "secret-title-4711", "body": "secret-body-4711"});
        let raw = serde_json::to_vec(&args)?;
        let created = f.ok(&p, "create_issue", args).await?;
        let id = IssueId::parse(created["id"].as_str().context("id")?)?;
        f.ok(&p, "get_issue", json!({"id": id.as_str()})).await?;
        f.ok(&p, "list_issues", json!({"text": "secret"})).await?;
        f.error(
            &p,
            "update_issue",
            json!({"id": id.as_str(), "title": "secret-update"}),
        )
        .await?;
        f.error(&p, "create_issue", json!({"title": ""})).await?;

        let records = f.audit.records();
        let summary: Vec<(&str, AuditOutcome, Option<&IssueId>)> = records
            .iter()
            .map(|r| (r.tool.as_str(), r.outcome, r.issue.as_ref()))
            .collect();
        assert_eq!(
            summary,
            [
                ("create_issue", AuditOutcome::Ok, Some(&id)),
                ("get_issue", AuditOutcome::Ok, Some(&id)),
                ("list_issues", AuditOutcome::Ok, None),
                ("update_issue", AuditOutcome::Denied, Some(&id)),
                ("create_issue", AuditOutcome::ToolError, None),
            ]
        );
        assert_eq!(records[0].arguments_hash, ArgumentsHash::of(&raw));
        assert_ne!(records[0].arguments_hash, records[4].arguments_hash);
        for record in &records {
            assert_eq!(record.tenant.as_str(), "acme");
            assert_eq!(record.run.as_str(), "run-9");
            assert_eq!(&record.grant, &p.grant().id);
            let json = serde_json::to_string(record)?;
            if json.contains("secret") {
                bail!("an audit record carries argument text: {json}");
            }
        }
        Ok(())
    })
    .await
}

/// A registry that answers every lookup with one error.
struct FixedRegistry(RegistryError);

#[async_trait]
impl TokenRegistry for FixedRegistry {
    async fn register(&self, _: &Grant, _: &TokenHash) -> Result<(), RegistryError> {
        Ok(())
    }
    async fn resolve(&self, _: &TokenHash) -> Result<std::sync::Arc<Grant>, RegistryError> {
        Err(self.0.clone())
    }
    async fn renew(&self, _: &Grant, _: &TokenHash) -> Result<bool, RegistryError> {
        Ok(false)
    }
    async fn revoke(&self, _: &GrantId) -> Result<bool, RegistryError> {
        Ok(false)
    }
    async fn revoke_run(&self, _: &TenantId, _: &RunId) -> Result<Vec<GrantId>, RegistryError> {
        Ok(Vec::new())
    }
    async fn check(&self) -> Result<(), RegistryError> {
        Ok(())
    }
}

/// A registry whose lookups never finish (a backend that stopped answering).
struct HangingRegistry;

#[async_trait]
impl TokenRegistry for HangingRegistry {
    async fn register(&self, _: &Grant, _: &TokenHash) -> Result<(), RegistryError> {
        Ok(())
    }
    async fn resolve(&self, _: &TokenHash) -> Result<std::sync::Arc<Grant>, RegistryError> {
        std::future::pending().await
    }
    async fn renew(&self, _: &Grant, _: &TokenHash) -> Result<bool, RegistryError> {
        Ok(false)
    }
    async fn revoke(&self, _: &GrantId) -> Result<bool, RegistryError> {
        Ok(false)
    }
    async fn revoke_run(&self, _: &TenantId, _: &RunId) -> Result<Vec<GrantId>, RegistryError> {
        Ok(Vec::new())
    }
    async fn check(&self) -> Result<(), RegistryError> {
        Ok(())
    }
}

/// The structured result matches the output schema the grant was shown:
/// every required member present, every member declared.
fn matches_declared_schema(
    f: &Fixture,
    principal: &ResolvedGrant,
    tool: &str,
    value: &Value,
) -> Result<()> {
    let set = f.tools.tools(principal);
    let def = set.get(tool).context("tool not in the grant's set")?;
    let schema = def.output_schema.as_ref().context("no outputSchema")?;
    let object = value.as_object().context("result is not an object")?;
    for required in schema["required"].as_array().context("required")? {
        let name = required.as_str().context("required name")?;
        ensure!(
            object.contains_key(name),
            "{tool}: {name} missing from {value}"
        );
    }
    for name in object.keys() {
        ensure!(
            schema["properties"].get(name).is_some(),
            "{tool}: {name} returned but not in the outputSchema"
        );
    }
    Ok(())
}

#[actix_rt::test]
async fn a_grant_that_may_write_but_not_read_sees_only_what_it_wrote() -> Result<()> {
    guarded(async {
        let f = Fixture::new()?;
        let owner = f.principal("acme", "owner", ALL).await?;
        let created = f
            .ok(
                &owner,
                "create_issue",
                json!({"title": "Secret plan", "body": "The confidential body.", "labels": ["x"]}),
            )
            .await?;
        let id = created["id"].as_str().context("id")?.to_owned();
        f.ok(
            &owner,
            "add_comment",
            json!({"issue_id": id, "body": "An earlier, private comment."}),
        )
        .await?;

        // comments:write only: the answer has the new comment, never the
        // issue's body, title or other comments.
        let commenter = f.principal("acme", "commenter", "comments:write").await?;
        let added = f
            .ok(
                &commenter,
                "add_comment",
                json!({"issue_id": id, "body": "Mine.", "idempotency_key": "c-1"}),
            )
            .await?;
        let text = added.to_string();
        for hidden in ["Secret plan", "confidential body", "earlier, private"] {
            ensure!(
                !text.contains(hidden),
                "add_comment leaked {hidden:?}: {text}"
            );
        }
        assert_eq!(added["id"], id.as_str());
        assert_eq!(added["version"], 3);
        assert!(added["updated_at"].is_string(), "{added}");
        assert_eq!(added["comment"]["body"], "Mine.");
        assert_eq!(added["comment"]["author"]["run"], "commenter");
        assert_eq!(added["replayed"], false);
        for absent in ["body", "title", "comments", "labels", "tenant", "author"] {
            ensure!(added.get(absent).is_none(), "{absent} in {added}");
        }
        matches_declared_schema(&f, &commenter, "add_comment", &added)?;
        // A replay answers the same way.
        let replay = f
            .ok(
                &commenter,
                "add_comment",
                json!({"issue_id": id, "body": "Mine.", "idempotency_key": "c-1"}),
            )
            .await?;
        assert_eq!(replay["replayed"], true);
        ensure!(!replay.to_string().contains("confidential"), "{replay}");

        // issues:update only: the fields it set, id, version, updated_at.
        let updater = f.principal("acme", "updater", "issues:update").await?;
        let updated = f
            .ok(
                &updater,
                "update_issue",
                json!({"id": id, "state": "in_progress"}),
            )
            .await?;
        let text = updated.to_string();
        for hidden in [
            "Secret plan",
            "confidential body",
            "private comment",
            "Mine.",
        ] {
            ensure!(
                !text.contains(hidden),
                "update_issue leaked {hidden:?}: {text}"
            );
        }
        assert_eq!(updated["id"], id.as_str());
        assert_eq!(updated["state"], "in_progress");
        assert_eq!(updated["version"], 4);
        assert!(updated["updated_at"].is_string(), "{updated}");
        let mut keys: Vec<&String> = updated.as_object().context("object")?.keys().collect();
        keys.sort();
        assert_eq!(keys, ["id", "state", "updated_at", "version"], "{updated}");
        matches_declared_schema(&f, &updater, "update_issue", &updated)?;

        // With issues:read the answers stay whole (and match their schemas).
        let reader = f
            .principal("acme", "reader", "issues:read,issues:update,comments:write")
            .await?;
        let whole = f
            .ok(
                &reader,
                "add_comment",
                json!({"issue_id": id, "body": "Seen."}),
            )
            .await?;
        assert_eq!(whole["body"], "The confidential body.");
        assert_eq!(whole["comments"].as_array().map(Vec::len), Some(3));
        assert_eq!(whole["comment"]["body"], "Seen.");
        matches_declared_schema(&f, &reader, "add_comment", &whole)?;
        let whole = f
            .ok(
                &reader,
                "update_issue",
                json!({"id": id, "priority": "high"}),
            )
            .await?;
        assert_eq!(whole["title"], "Secret plan");
        assert_eq!(whole["comments"].as_array().map(Vec::len), Some(3));
        matches_declared_schema(&f, &reader, "update_issue", &whole)?;
        Ok(())
    })
    .await
}

// ---------------------------------------------------------------------------
// The result budget

/// Bytes an answer costs against the budget: the structured JSON, the text
/// block as a JSON string, and the renderer's envelope (the MCP endpoint
/// tests in tests/mcp_interop.rs measure the real wire bytes).
fn answer_bytes(out: &ToolOutput) -> usize {
    let structured = out.structured.as_ref().map_or(0, |s| s.to_string().len());
    structured + Value::from(out.text.as_str()).to_string().len() + ENVELOPE_BYTES
}

/// Prose of about `bytes` bytes, in words, as agents write it.
fn prose(seed: usize, bytes: usize) -> String {
    let words = [
        "the", "build", "fails", "when", "cache", "is", "cold", "and", "retry", "works",
    ];
    let mut out = String::new();
    let mut i = seed;
    while out.len() < bytes {
        out.push_str(words[i % words.len()]);
        out.push(if i % 13 == 12 { '\n' } else { ' ' });
        i += 7;
    }
    out
}

/// The board of the budget issue: 60 issues with 2 KB bodies and 3
/// comments each; returns their ids, oldest first.
async fn sixty_issue_board(f: &Fixture, p: &ResolvedGrant) -> Result<Vec<String>> {
    let mut ids = Vec::new();
    for i in 0..60 {
        let issue = f
            .ok(
                p,
                "create_issue",
                json!({
                    "title": format!("Flaky integration test number {i} on the CI runners"),
                    "body": prose(i, 2_048),
                    "labels": ["bug", "area:ci"],
                    "priority": "high",
                }),
            )
            .await?;
        let id = issue["id"].as_str().context("id")?.to_owned();
        for c in 0..3 {
            f.ok(
                p,
                "add_comment",
                json!({"issue_id": id, "body": prose(c, 400)}),
            )
            .await?;
        }
        ids.push(id);
    }
    Ok(ids)
}

#[actix_rt::test]
async fn the_default_list_of_a_sixty_issue_board_fits_the_budget_and_pages_to_the_end() -> Result<()>
{
    guarded(async {
        let f = Fixture::new()?;
        let p = f.principal("acme", "run-1", ALL).await?;
        let ids = sixty_issue_board(&f, &p).await?;
        let out = f.call(&p, "list_issues", json!({})).await;
        ensure!(!out.is_error, "{}", out.text);
        let bytes = answer_bytes(&out);
        ensure!(bytes <= DEFAULT_RESULT_BUDGET, "{bytes} bytes");
        let page = out.structured.clone().context("structured")?;
        matches_declared_schema(&f, &p, "list_issues", &page)?;
        let shown = page["issues"].as_array().context("issues")?;
        // Cut by the budget below the page size of 50, and it says so.
        ensure!(
            shown.len() < 50 && shown.len() >= 20,
            "{} shown",
            shown.len()
        );
        let last = shown.last().context("last")?["id"].clone();
        assert_eq!(page["next_cursor"], last);
        assert_eq!(page["truncated"]["omitted"], "issues");
        assert_eq!(page["truncated"]["omitted_count"], 50 - shown.len());
        let how = page["truncated"]["how"].as_str().context("how")?;
        ensure!(how.contains(last.as_str().unwrap_or_default()), "{how}");
        ensure!(out.text.contains("CUT:"), "{}", out.text);
        for summary in shown {
            matches_declared_schema(
                &f,
                &p,
                "list_issues",
                &json!({"issues": [summary], "next_cursor": null, "truncated": null}),
            )?;
            assert_eq!(summary["comment_count"], 3);
            assert_eq!(summary["excerpt_cut"], true);
            assert_eq!(summary["author_run"], "run-1");
            ensure!(summary.get("body").is_none() && summary.get("comments").is_none());
        }
        // Following the cursors reaches every issue exactly once, newest first.
        let mut seen: Vec<String> = Vec::new();
        let mut cursor = Value::Null;
        loop {
            let mut args = json!({});
            if !cursor.is_null() {
                args["cursor"] = cursor.clone();
            }
            let out = f.call(&p, "list_issues", args).await;
            ensure!(answer_bytes(&out) <= DEFAULT_RESULT_BUDGET);
            let page = out.structured.context("structured")?;
            seen.extend(
                page["issues"]
                    .as_array()
                    .context("issues")?
                    .iter()
                    .map(|i| i["id"].as_str().unwrap_or_default().to_owned()),
            );
            cursor = page["next_cursor"].clone();
            if cursor.is_null() {
                break;
            }
        }
        let newest_first: Vec<String> = ids.iter().rev().cloned().collect();
        assert_eq!(seen, newest_first);
        Ok(())
    })
    .await
}

#[actix_rt::test]
async fn list_fields_and_includes_add_what_they_name_and_nothing_else() -> Result<()> {
    guarded(async {
        let f = Fixture::new()?;
        let p = f.principal("acme", "run-1", ALL).await?;
        let issue = f
            .ok(&p, "create_issue", json!({"title": "T", "body": "short body"}))
            .await?;
        let id = issue["id"].as_str().context("id")?;
        for c in 0..4 {
            f.ok(&p, "add_comment", json!({"issue_id": id, "body": format!("c{c}")}))
                .await?;
        }
        let page = f
            .ok(
                &p,
                "list_issues",
                json!({"include_body": true, "include_comments": 2, "fields": ["created_at", "author"]}),
            )
            .await?;
        matches_declared_schema(&f, &p, "list_issues", &page)?;
        let item = &page["issues"][0];
        assert_eq!(item["body"], "short body");
        ensure!(item.get("excerpt").is_none());
        assert_eq!(item["author"]["run"], "run-1");
        ensure!(item["created_at"].is_string());
        let bodies: Vec<&str> = item["comments"]
            .as_array()
            .context("comments")?
            .iter()
            .filter_map(|c| c["body"].as_str())
            .collect();
        assert_eq!(bodies, ["c2", "c3"]);
        assert_eq!(item["older_comments"], 2);
        assert_eq!(item["comment_count"], 4);
        ensure!(item.get("tenant").is_none());
        // The default summary carries the whole short body as its excerpt.
        let plain = f.ok(&p, "list_issues", json!({})).await?;
        assert_eq!(plain["issues"][0]["excerpt"], "short body");
        ensure!(plain["issues"][0].get("excerpt_cut").is_none());
        let err = f
            .error(&p, "list_issues", json!({"fields": ["secrets"]}))
            .await?;
        ensure!(err.contains("fields") && err.contains("created_at"), "{err}");
        Ok(())
    })
    .await
}

#[actix_rt::test]
async fn get_issue_pages_five_hundred_comments_within_the_budget_each_seen_once() -> Result<()> {
    guarded(async {
        let f = Fixture::new()?;
        let p = f.principal("acme", "run-1", ALL).await?;
        let issue = f
            .ok(
                &p,
                "create_issue",
                json!({"title": "Long thread", "body": prose(0, 2_048)}),
            )
            .await?;
        let id = issue["id"].as_str().context("id")?.to_owned();
        let mut comments = Vec::new();
        for c in 0..500 {
            let out = f
                .call(
                    &p,
                    "add_comment",
                    json!({"issue_id": id, "body": prose(c, 300)}),
                )
                .await;
            ensure!(!out.is_error, "{}", out.text);
            ensure!(answer_bytes(&out) <= DEFAULT_RESULT_BUDGET);
            let added = out.structured.context("structured")?;
            comments.push(
                added["comment"]["id"]
                    .as_str()
                    .context("comment id")?
                    .to_owned(),
            );
        }
        // The default: the latest 10, and the way to the rest.
        let out = f.call(&p, "get_issue", json!({"id": id})).await;
        ensure!(answer_bytes(&out) <= DEFAULT_RESULT_BUDGET);
        let got = out.structured.clone().context("structured")?;
        matches_declared_schema(&f, &p, "get_issue", &got)?;
        assert_eq!(got["comment_count"], 500);
        assert_eq!(got["older_comments"], 490);
        assert_eq!(got["comments"].as_array().map(Vec::len), Some(10));
        assert_eq!(got["comments_cursor"], comments[490].as_str());
        ensure!(got.get("truncated").is_none());
        ensure!(out.text.contains(&comments[490]), "{}", out.text);
        // As many as the budget holds per answer, paging back to the first.
        let mut seen: Vec<String> = Vec::new();
        let mut args = json!({"id": id, "comments_limit": 500});
        let mut answers = 0;
        loop {
            let out = f.call(&p, "get_issue", args.clone()).await;
            ensure!(!out.is_error, "{}", out.text);
            let bytes = answer_bytes(&out);
            ensure!(bytes <= DEFAULT_RESULT_BUDGET, "{bytes} bytes");
            let got = out.structured.context("structured")?;
            let page: Vec<String> = got["comments"]
                .as_array()
                .context("comments")?
                .iter()
                .map(|c| c["id"].as_str().unwrap_or_default().to_owned())
                .collect();
            ensure!(!page.is_empty());
            seen.splice(0..0, page);
            answers += 1;
            match got["comments_cursor"].as_str() {
                Some(cursor) => {
                    let how = got["truncated"]["how"].as_str().context("how")?;
                    ensure!(how.contains(cursor), "{how}");
                    args["comments_before"] = json!(cursor);
                }
                None => break,
            }
        }
        assert_eq!(seen, comments, "every comment once, in order");
        ensure!(answers > 3, "{answers} answers: the budget cut them");
        Ok(())
    })
    .await
}

/// Comments larger than the result budget: the store stops reading at the
/// budget (one comment), and the answer says what was left out as a cut by
/// the budget would, with a cursor that pages back through all of them.
#[actix_rt::test]
async fn comments_larger_than_the_budget_are_read_one_per_answer() -> Result<()> {
    guarded(async {
        let f = Fixture::new()?;
        let p = f.principal("acme", "run-1", ALL).await?;
        let issue = f
            .ok(&p, "create_issue", json!({"title": "Huge thread"}))
            .await?;
        let id = issue["id"].as_str().context("id")?.to_owned();
        let mut comments = Vec::new();
        for c in 0..6 {
            let added = f
                .ok(
                    &p,
                    "add_comment",
                    json!({"issue_id": id, "body": prose(c, 60_000)}),
                )
                .await?;
            comments.push(added["comment"]["id"].as_str().context("id")?.to_owned());
        }
        let mut args = json!({"id": id, "comments_limit": 500});
        let mut seen: Vec<String> = Vec::new();
        loop {
            let out = f.call(&p, "get_issue", args.clone()).await;
            ensure!(!out.is_error, "{}", out.text);
            ensure!(answer_bytes(&out) <= DEFAULT_RESULT_BUDGET);
            let got = out.structured.context("structured")?;
            matches_declared_schema(&f, &p, "get_issue", &got)?;
            let shown = got["comments"].as_array().context("comments")?;
            assert_eq!(shown.len(), 1, "one comment of 60 KB per answer");
            let shown_id = shown[0]["id"].as_str().context("id")?.to_owned();
            assert_eq!(got["comment_count"], 6);
            let older = 5 - seen.len();
            assert_eq!(got["older_comments"], older);
            ensure!(shown[0].get("body_truncated").is_some(), "{got}");
            if older > 0 {
                assert_eq!(got["comments_cursor"], shown_id.as_str());
                assert_eq!(got["truncated"]["omitted_count"], older);
                assert_eq!(got["truncated"]["omitted"], "comments");
                let how = got["truncated"]["how"].as_str().context("how")?;
                ensure!(how.contains(&shown_id), "{how}");
            } else {
                assert_eq!(got["comments_cursor"], Value::Null);
                ensure!(got.get("truncated").is_none(), "{got}");
            }
            seen.insert(0, shown_id.clone());
            if older == 0 {
                break;
            }
            args["comments_before"] = json!(shown_id);
        }
        assert_eq!(seen, comments, "every comment once, in order");
        // An unknown cursor keeps its error.
        let out = f
            .call(
                &p,
                "get_issue",
                json!({"id": id, "comments_before": corkboard_board::CommentId::generate().as_str()}),
            )
            .await;
        ensure!(out.is_error, "{}", out.text);
        ensure!(
            out.text.contains("this issue has no comment cmt_"),
            "{}",
            out.text
        );
        Ok(())
    })
    .await
}

#[actix_rt::test]
async fn a_body_longer_than_the_budget_is_read_whole_through_body_offset() -> Result<()> {
    guarded(async {
        let f = Fixture::new()?;
        let p = f.principal("acme", "run-1", ALL).await?;
        let body = prose(3, corkboard_board::limits::BODY_MAX_BYTES - 20) + "é";
        let issue = f
            .call(&p, "create_issue", json!({"title": "Huge", "body": body}))
            .await;
        ensure!(answer_bytes(&issue) <= DEFAULT_RESULT_BUDGET);
        let id = issue.structured.context("structured")?["id"].clone();
        let mut read = String::new();
        let mut args = json!({"id": id});
        loop {
            let out = f.call(&p, "get_issue", args.clone()).await;
            ensure!(!out.is_error, "{}", out.text);
            ensure!(answer_bytes(&out) <= DEFAULT_RESULT_BUDGET);
            let got = out.structured.context("structured")?;
            read.push_str(got["body"].as_str().context("body")?);
            match got.get("body_truncated") {
                Some(cut) => {
                    assert_eq!(cut["total_bytes"], body.len());
                    args["body_offset"] = cut["next_offset"].clone();
                }
                None => break,
            }
        }
        assert_eq!(read, body);
        let err = f
            .error(
                &p,
                "get_issue",
                json!({"id": id, "body_offset": body.len() - 1}),
            )
            .await?;
        ensure!(err.contains("body_offset"), "{err}");
        Ok(())
    })
    .await
}

#[actix_rt::test]
async fn search_finds_body_words_and_create_reports_or_refuses_near_duplicates() -> Result<()> {
    guarded(async {
        let f = Fixture::new()?;
        let p = f.principal("acme", "run-1", ALL).await?;
        let first = f
            .ok(
                &p,
                "create_issue",
                json!({"title": "Login page crashes on Safari", "body": "The zyzzyva cache expires."}),
            )
            .await?;
        matches_declared_schema(&f, &p, "create_issue", &first)?;
        ensure!(first["created"] == true && first["similar"] == json!([]), "{first}");
        let first_id = first["id"].as_str().context("id")?.to_owned();

        // The default reports the near duplicate and creates anyway.
        let second = f
            .ok(&p, "create_issue", json!({"title": "Login page crashes on Safari 17"}))
            .await?;
        matches_declared_schema(&f, &p, "create_issue", &second)?;
        ensure!(second["created"] == true, "{second}");
        ensure!(second["similar"][0]["id"] == first_id.as_str(), "{second}");
        ensure!(second["similar"][0]["score"].as_f64() >= Some(0.75), "{second}");

        // Refused: not an error, nothing created, the existing issue back.
        let out = f
            .call(
                &p,
                "create_issue",
                json!({"title": "login page crashes on safari", "if_similar": "refuse"}),
            )
            .await;
        ensure!(!out.is_error, "{}", out.text);
        ensure!(out.text.starts_with("NOT CREATED"), "{}", out.text);
        let refused = out.structured.context("structured")?;
        matches_declared_schema(&f, &p, "create_issue", &refused)?;
        ensure!(refused["created"] == false, "{refused}");
        ensure!(refused["reason"].as_str().is_some_and(|r| r.contains("near match")));
        let existing = refused["id"].as_str().context("id")?;
        ensure!(
            existing == first_id || Some(existing) == second["id"].as_str(),
            "{refused}"
        );
        let audit = f.last_audit()?;
        ensure!(audit.tool == "create_issue" && audit.outcome == AuditOutcome::Ok);
        let listed = f.ok(&p, "list_issues", json!({})).await?;
        ensure!(listed["issues"].as_array().map(Vec::len) == Some(2), "{listed}");

        // A unique title is created under refuse too.
        let third = f
            .ok(
                &p,
                "create_issue",
                json!({"title": "Dark mode colours", "if_similar": "refuse"}),
            )
            .await?;
        ensure!(third["created"] == true, "{third}");

        // Search finds the body word, ranked first, with its snippet.
        let found = f.ok(&p, "search_issues", json!({"query": "ZYZZYVA"})).await?;
        matches_declared_schema(&f, &p, "search_issues", &found)?;
        ensure!(found["hits"][0]["id"] == first_id.as_str(), "{found}");
        ensure!(found["hits"][0]["field"] == "body", "{found}");
        ensure!(
            found["hits"][0]["snippet"]
                .as_str()
                .is_some_and(|s| s.contains("**zyzzyva**")),
            "{found}"
        );
        ensure!(found["next_offset"].is_null() && found["partial"] == false);
        let filtered = f
            .ok(
                &p,
                "search_issues",
                json!({"query": "login", "states": ["done"], "limit": 5}),
            )
            .await?;
        ensure!(filtered["hits"] == json!([]), "{filtered}");
        let text = f.error(&p, "search_issues", json!({"query": "a*"})).await?;
        ensure!(text.contains("query"), "{text}");

        // Another tenant finds nothing.
        let other = f.principal("globex", "run-9", ALL).await?;
        let none = f.ok(&other, "search_issues", json!({"query": "zyzzyva"})).await?;
        ensure!(none["hits"] == json!([]), "{none}");

        // A grant that may not read gets no `similar`, and may not refuse.
        let creator = f.principal("acme", "run-2", "issues:create").await?;
        let made = f
            .ok(&creator, "create_issue", json!({"title": "Login page crashes on Safari"}))
            .await?;
        ensure!(made.get("similar").is_none() && made["created"] == true, "{made}");
        let text = f
            .error(
                &creator,
                "create_issue",
                json!({"title": "x", "if_similar": "refuse"}),
            )
            .await?;
        ensure!(text.contains("issues:read"), "{text}");
        Ok(())
    })
    .await
}

const QUEUE: &str = "issues:read,issues:create,issues:update,issues:claim,comments:write";

/// Issue 29: ready work best first, claim_next giving each issue to one
/// run and saying what holds the rest back, and a claim's lease renewed by
/// its holder's writes.
#[actix_rt::test]
async fn claim_next_takes_ready_work_best_first_and_writes_renew_the_lease() -> Result<()> {
    guarded(async {
        let mut f = Fixture::new()?;
        f.tools = f.tools.with_claim_lease(Duration::from_secs(60));
        let p = f.principal("acme", "run-1", QUEUE).await?;
        let other = f.principal("acme", "run-2", QUEUE).await?;
        let third = f.principal("acme", "run-3", QUEUE).await?;
        let low = f
            .ok(&p, "create_issue", json!({"title": "Low one", "priority": "low"}))
            .await?;
        let blocker = f.ok(&p, "create_issue", json!({"title": "Blocker"})).await?;
        let blocked = f
            .ok(
                &p,
                "create_issue",
                json!({"title": "Urgent blocked", "priority": "urgent",
                       "blocked_by": [blocker["id"]]}),
            )
            .await?;
        let ready = f.ok(&p, "list_issues", json!({"ready": true})).await?;
        let ids: Vec<&Value> = ready["issues"]
            .as_array()
            .context("issues")?
            .iter()
            .map(|i| &i["id"])
            .collect();
        assert_eq!(ids, [&low["id"], &blocker["id"]], "{ready}");

        let first = f.ok(&p, "claim_next", json!({})).await?;
        assert_eq!(first["outcome"], "claimed");
        assert_eq!(first["id"], low["id"]);
        assert_eq!(first["claim"]["run"], "run-1");
        assert!(first["comment_count"].is_number(), "answered like get_issue: {first}");
        let second = f.ok(&other, "claim_next", json!({})).await?;
        assert_eq!(second["id"], blocker["id"]);
        let none = f.ok(&third, "claim_next", json!({})).await?;
        assert_eq!(none["outcome"], "no_ready_work");
        assert_eq!((none["claimed"].as_u64(), none["blocked"].as_u64()), (Some(2), Some(1)));
        assert!(blocked["id"].is_string());
        let filtered = f
            .ok(&third, "claim_next", json!({"min_priority": "high"}))
            .await?;
        assert_eq!((filtered["claimed"].as_u64(), filtered["blocked"].as_u64()), (Some(0), Some(1)));

        // A write by the holder renews its lease (the version it answers
        // is the write's: the renewal is no new version).
        let end = first["claim"]["expires_at"].as_str().context("end")?.to_owned();
        tokio::time::sleep(Duration::from_millis(5)).await;
        let updated = f
            .ok(
                &p,
                "update_issue",
                json!({"id": low["id"], "state": "in_progress", "expected_version": first["version"]}),
            )
            .await?;
        let renewed = updated["claim"]["expires_at"].as_str().context("renewed end")?;
        assert!(later(renewed, &end)?, "{renewed} after {end}");
        let again = f
            .ok(
                &p,
                "update_issue",
                json!({"id": low["id"], "priority": "high", "expected_version": updated["version"]}),
            )
            .await?;
        assert_eq!(again["priority"], "high");
        // A comment by the holder renews it too.
        let end = again["claim"]["expires_at"].as_str().context("end")?.to_owned();
        tokio::time::sleep(Duration::from_millis(5)).await;
        let commented = f
            .ok(&p, "add_comment", json!({"id": low["id"], "body": "Still on it."}))
            .await?;
        let renewed = commented["claim"]["expires_at"].as_str().context("renewed end")?;
        assert!(later(renewed, &end)?, "{renewed} after {end}");
        // Nothing is stale with a minute's lease just renewed.
        let stale = f.ok(&p, "list_issues", json!({"stale": true})).await?;
        assert_eq!(stale["issues"], json!([]));
        let text = f
            .error(&p, "list_issues", json!({"ready": true, "claimed_by": "run-1"}))
            .await?;
        assert!(text.contains("ready"), "{text}");
        // Closing the blocker makes the blocked issue ready: it is next.
        f.ok(&other, "update_issue", json!({"id": blocker["id"], "state": "done"}))
            .await?;
        let next = f.ok(&third, "claim_next", json!({})).await?;
        assert_eq!(next["id"], blocked["id"]);
        let record = f.last_audit()?;
        assert_eq!(record.tool, "claim_next");
        assert_eq!(record.issue.map(|i| i.to_string()), blocked["id"].as_str().map(str::to_owned));
        Ok(())
    })
    .await
}

/// Issue 29 item 7: what a model reads of a full grant's tools (names,
/// descriptions, input schemas) stays near 6,000 tokens (24,000 bytes at
/// 4 bytes a token).
#[actix_rt::test]
async fn a_full_grants_tool_definitions_stay_near_six_thousand_tokens() -> Result<()> {
    guarded(async {
        let f = Fixture::new()?;
        let p = f.principal("acme", "run-1", QUEUE).await?;
        let set = f.tools.tools(&p);
        let bytes: usize = set
            .tools()
            .iter()
            .map(|t| {
                t.name.len()
                    + t.description.len()
                    + serde_json::to_string(&t.input_schema).map_or(0, |s| s.len())
            })
            .sum();
        assert!(set.tools().iter().any(|t| t.name == "claim_next"));
        // 25,766 bytes (about 6,400 tokens) before descriptions stopped
        // repeating what each argument's schema says; about 23,600 after.
        assert!(bytes <= 24_000, "{bytes} bytes of tool definitions");
        Ok(())
    })
    .await
}

/// Issue 29 item 6: a bulk create answers item by item, each under its own
/// key, so replaying the call creates nothing new.
#[actix_rt::test]
async fn create_issues_answers_per_item_and_a_replay_creates_nothing() -> Result<()> {
    guarded(async {
        let f = Fixture::new()?;
        let p = f.principal("acme", "run-1", ALL).await?;
        let epic = f.ok(&p, "create_issue", json!({"title": "Epic"})).await?;
        let args = json!({
            "parent": epic["id"],
            "issues": [
                {"title": "Step one", "idempotency_key": "plan-1"},
                {"title": "", "idempotency_key": "plan-bad"},
                {"title": "Step two", "priority": "high", "idempotency_key": "plan-2"},
            ],
        });
        let first = f.ok(&p, "create_issues", args.clone()).await?;
        assert_eq!(
            (
                first["created"].as_u64(),
                first["replayed"].as_u64(),
                first["failed"].as_u64()
            ),
            (Some(2), Some(0), Some(1)),
            "{first}"
        );
        assert_eq!(first["results"][1]["index"], 1);
        assert!(
            first["results"][1]["error"]
                .as_str()
                .context("error")?
                .contains("title")
        );
        let again = f.ok(&p, "create_issues", args).await?;
        assert_eq!(
            (again["created"].as_u64(), again["replayed"].as_u64()),
            (Some(0), Some(2)),
            "{again}"
        );
        assert_eq!(again["results"][0]["id"], first["results"][0]["id"]);
        assert_eq!(again["results"][2]["id"], first["results"][2]["id"]);
        let children = f
            .ok(&p, "list_issues", json!({"parent": epic["id"]}))
            .await?;
        assert_eq!(children["issues"].as_array().map(Vec::len), Some(2));
        let too_many: Vec<Value> = (0..51).map(|i| json!({"title": format!("t{i}")})).collect();
        let text = f
            .error(&p, "create_issues", json!({"issues": too_many}))
            .await?;
        assert!(text.contains("50"), "{text}");
        Ok(())
    })
    .await
}

/// Issue 29 item 4: get_issue shows what changed, by whom, paged back by
/// version; the web board and the admin API read the same history.
#[actix_rt::test]
async fn get_issue_shows_the_latest_changes_and_pages_back() -> Result<()> {
    guarded(async {
        let f = Fixture::new()?;
        let p = f.principal("acme", "run-1", QUEUE).await?;
        let created = f
            .ok(
                &p,
                "create_issue",
                json!({"title": "Track me", "labels": ["a"]}),
            )
            .await?;
        let id = created["id"].clone();
        f.ok(
            &p,
            "update_issue",
            json!({"id": id, "state": "todo", "labels": ["b"]}),
        )
        .await?;
        f.ok(&p, "add_comment", json!({"id": id, "body": "progress"}))
            .await?;
        f.ok(&p, "claim_issue", json!({"id": id})).await?;
        let plain = f.ok(&p, "get_issue", json!({"id": id})).await?;
        assert!(plain.get("history").is_none(), "only when asked");
        let read = f
            .ok(&p, "get_issue", json!({"id": id, "history": 2}))
            .await?;
        let history = read["history"].as_array().context("history")?;
        let kinds: Vec<&str> = history.iter().filter_map(|c| c["kind"].as_str()).collect();
        assert_eq!(kinds, ["claimed", "commented"]);
        assert_eq!(history[0]["by"]["run"], "run-1");
        assert_eq!(read["history_before"], json!(3));
        let older = f
            .ok(
                &p,
                "get_issue",
                json!({"id": id, "history": 10, "history_before": 3}),
            )
            .await?;
        let older = older["history"].as_array().context("older")?;
        assert_eq!(older.len(), 2);
        assert_eq!(older[0]["kind"], "updated");
        let labels = older[0]["fields"]
            .as_array()
            .context("fields")?
            .iter()
            .find(|f| f["field"] == "labels")
            .context("labels change")?;
        assert_eq!(
            (labels["added"].clone(), labels["removed"].clone()),
            (json!(["b"]), json!(["a"]))
        );
        assert_eq!(older[1]["kind"], "created");
        Ok(())
    })
    .await
}

/// `get_issue` keeps its answers and gives one again only while the
/// tenant's epoch has not moved: a write by another process on the same
/// file (its own store and writer, as `corkboard server` and `corkboard
/// runner` share the embedded board) shows at this process's next read, as
/// does a write of its own, and each comment window is kept apart.
#[actix_rt::test]
async fn a_kept_answer_never_hides_a_write_of_another_process() -> Result<()> {
    guarded(async {
        let f = Fixture::new()?;
        let path = f._dir.path().join("board.sqlite3");
        let other = BoardTools::new(
            Arc::new(SqliteStore::open(&path)?),
            f.registry.clone(),
            f.audit.clone(),
        );
        let p = f
            .principal(
                "acme",
                "run-1",
                "issues:read,issues:create,issues:update,comments:write",
            )
            .await?;
        let created = f
            .ok(&p, "create_issue", json!({"title": "Kept answer"}))
            .await?;
        let id = created["id"].clone();
        let first = f.ok(&p, "get_issue", json!({"id": id})).await?;
        let again = f.ok(&p, "get_issue", json!({"id": id})).await?;
        assert_eq!(first, again, "nothing changed: the same answer");

        // Another process retitles it and comments on it.
        for (name, args) in [
            (
                "update_issue",
                json!({"id": id, "title": "Retitled elsewhere"}),
            ),
            (
                "add_comment",
                json!({"id": id, "body": "from the other process"}),
            ),
        ] {
            let out = call(&other, &p, name, args).await;
            ensure!(!out.is_error, "{name} failed: {}", out.text);
        }
        let seen = f.ok(&p, "get_issue", json!({"id": id})).await?;
        assert_eq!(seen["title"], "Retitled elsewhere");
        assert_eq!(seen["comment_count"], 1);
        assert_eq!(seen["comments"][0]["body"], "from the other process");

        // A window of its own, kept apart from the default one.
        f.ok(&p, "add_comment", json!({"id": id, "body": "second"}))
            .await?;
        let one = f
            .ok(&p, "get_issue", json!({"id": id, "comments_limit": 1}))
            .await?;
        let all = f.ok(&p, "get_issue", json!({"id": id})).await?;
        assert_eq!(one["comments"].as_array().map(Vec::len), Some(1));
        assert_eq!(all["comments"].as_array().map(Vec::len), Some(2));
        let one_again = f
            .ok(&p, "get_issue", json!({"id": id, "comments_limit": 1}))
            .await?;
        assert_eq!(one, one_again);

        // A write of this process to another issue moves the epoch too;
        // the answer read again is the same issue, unchanged.
        f.ok(&p, "create_issue", json!({"title": "Another one"}))
            .await?;
        assert_eq!(f.ok(&p, "get_issue", json!({"id": id})).await?, all);

        // Another tenant's same id reads as missing, kept answer or not.
        let q = f.principal("globex", "run-2", "issues:read").await?;
        let missing = f.error(&q, "get_issue", json!({"id": id})).await?;
        assert!(missing.contains("not found"), "{missing}");

        // List pages likewise: kept while nothing changed, read again after
        // another process's write; each filter kept apart.
        let page = f.ok(&p, "list_issues", json!({})).await?;
        assert_eq!(f.ok(&p, "list_issues", json!({})).await?, page);
        let by_text = f.ok(&p, "list_issues", json!({"text": "another"})).await?;
        assert_eq!(by_text["issues"].as_array().map(Vec::len), Some(1));
        let out = call(
            &other,
            &p,
            "create_issue",
            json!({"title": "Third, elsewhere"}),
        )
        .await;
        ensure!(!out.is_error, "create failed: {}", out.text);
        let after = f.ok(&p, "list_issues", json!({})).await?;
        assert_eq!(after["issues"][0]["title"], "Third, elsewhere", "{after}");
        assert_eq!(
            after["issues"].as_array().map(Vec::len),
            page["issues"].as_array().map(|i| i.len() + 1)
        );
        let out = call(
            &other,
            &p,
            "add_comment",
            json!({"id": id, "body": "third"}),
        )
        .await;
        ensure!(!out.is_error, "comment failed: {}", out.text);
        let commented = f.ok(&p, "list_issues", json!({})).await?;
        let listed = commented["issues"]
            .as_array()
            .and_then(|issues| issues.iter().find(|i| i["id"] == id))
            .context("the issue listed")?;
        assert_eq!(listed["comment_count"], 3, "{commented}");
        let other_tenant = f.ok(&q, "list_issues", json!({})).await?;
        assert_eq!(other_tenant["issues"], json!([]), "another tenant's page");
        Ok(())
    })
    .await
}

/// A claim lapses at the end of its lease without any write, so the
/// tenant's epoch does not move; a kept `get_issue` answer or list page
/// showing the claim is given only until then, and the next read shows no
/// claim.
#[actix_rt::test]
async fn a_kept_answer_stops_showing_a_claim_that_lapsed() -> Result<()> {
    guarded(async {
        let mut f = Fixture::new()?;
        f.tools = f.tools.with_claim_lease(Duration::from_secs(1));
        let p = f.principal("acme", "run-1", QUEUE).await?;
        let created = f.ok(&p, "create_issue", json!({"title": "Leased"})).await?;
        let id = created["id"].clone();
        f.ok(&p, "claim_issue", json!({"id": id})).await?;
        let held = f.ok(&p, "get_issue", json!({"id": id})).await?;
        assert_eq!(held["claim"]["run"], "run-1", "{held}");
        assert_eq!(f.ok(&p, "get_issue", json!({"id": id})).await?, held);
        let page = f.ok(&p, "list_issues", json!({})).await?;
        assert_eq!(page["issues"][0]["claim"]["run"], "run-1", "{page}");
        assert_eq!(f.ok(&p, "list_issues", json!({})).await?, page);
        let ends = held["claim"]["expires_at"]
            .as_str()
            .and_then(Timestamp::parse_rfc3339)
            .context("claim expires_at")?;
        // Past the lease's end (no write in between).
        let left = ends.as_millis() - Timestamp::now().as_millis() + 50;
        tokio::time::sleep(Duration::from_millis(u64::try_from(left).unwrap_or(0))).await;
        let lapsed = f.ok(&p, "get_issue", json!({"id": id})).await?;
        assert!(lapsed["claim"].is_null(), "a lapsed claim shown: {lapsed}");
        let page = f.ok(&p, "list_issues", json!({})).await?;
        let listed = &page["issues"][0];
        assert_eq!(listed["id"], id);
        assert!(listed["claim"].is_null(), "a lapsed claim listed: {page}");
        Ok(())
    })
    .await
}
