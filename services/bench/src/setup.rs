//! Setup calls a scenario makes before it measures anything: admin
//! credentials, grants, runs, a seeded issue. Tokens obtained here are
//! handed to the generator and never printed or logged.

use crate::client::{self, Headers, Target};
use crate::error::{BenchError, Result};
use crate::mcp::{self, Tool};
use crate::procs::Binaries;
use hyper::Method;
use serde_json::{Value, json};
use std::path::Path;

/// A grant (or a registered run) with its one-time token.
#[derive(Clone)]
pub struct Granted {
    pub grant_id: String,
    pub token: String,
    pub mcp_url: String,
    pub json: Value,
}

impl std::fmt::Debug for Granted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Granted")
            .field("grant_id", &self.grant_id)
            .field("mcp_url", &self.mcp_url)
            .finish_non_exhaustive()
    }
}

/// Mints a platform-admin JWT with `corkboard admin token`, configured by
/// `env` (and `--data-dir` for the embedded role).
pub fn admin_token(
    bins: &Binaries,
    env: &[(String, String)],
    data_dir: Option<&Path>,
) -> Result<String> {
    let mut cmd = bins.corkboard();
    cmd.args(["admin", "token", "--role", "platform-admin", "--ttl", "12h"]);
    if let Some(dir) = data_dir {
        cmd.arg("--data-dir").arg(dir);
    }
    cmd.envs(env.iter().cloned());
    let out = cmd
        .output()
        .map_err(BenchError::io("run `corkboard admin token`"))?;
    if !out.status.success() {
        return Err(BenchError::process(
            "corkboard admin token",
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn granted_from(json: Value, what: &str) -> Result<Granted> {
    let field = |pointer: &str| {
        json.pointer(pointer)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| BenchError::protocol(what, format!("answer has no {pointer}")))
    };
    let grant_id = field("/grant/id").or_else(|_| field("/grant_id"))?;
    let token = field("/token")?;
    let mcp_url = field("/mcp_url")?;
    Ok(Granted {
        grant_id,
        token,
        mcp_url,
        json,
    })
}

/// `POST /v1/tenants/{tenant}/grants` on the admin API.
pub async fn create_grant(
    base: &str,
    admin: &str,
    tenant: &str,
    run: &str,
    caps: &[&str],
) -> Result<Granted> {
    create_grant_with(base, admin, tenant, run, caps, &json!({})).await
}

/// [`create_grant`] with write budgets (`{"create_issue": N}`; `{}`: none).
pub async fn create_grant_with(
    base: &str,
    admin: &str,
    tenant: &str,
    run: &str,
    caps: &[&str],
    budgets: &Value,
) -> Result<Granted> {
    let reply = client::once(
        Method::POST,
        &format!("{base}/v1/tenants/{tenant}/grants"),
        Headers::json()?.bearer(admin)?,
        Some(&json!({ "run": run, "capabilities": caps, "ttl": "12h", "budgets": budgets })),
    )
    .await?;
    if reply.status.as_u16() != 201 {
        return Err(BenchError::protocol(
            "create grant",
            format!("HTTP {}: {}", reply.status, reply.text()),
        ));
    }
    granted_from(reply.json()?, "create grant")
}

/// `PUT /v1/tenants/{tenant}/approval-policies` with `count` policies that
/// cover no call of the load (an upstream nobody registered), so every
/// call pays the gate's check and none waits: what a call needing no
/// approval costs when policies exist.
pub async fn idle_approval_policies(
    base: &str,
    admin: &str,
    tenant: &str,
    count: u32,
) -> Result<()> {
    let policies: Vec<Value> = (0..count)
        .map(|i| json!({ "name": format!("idle-{i}"), "tool": format!("upstream:nobody{i}:*") }))
        .collect();
    let reply = client::once(
        Method::PUT,
        &format!("{base}/v1/tenants/{tenant}/approval-policies"),
        Headers::json()?.bearer(admin)?,
        Some(&json!({ "policies": policies })),
    )
    .await?;
    if reply.status.as_u16() != 200 {
        return Err(BenchError::protocol(
            "approval policies",
            format!("HTTP {}: {}", reply.status, reply.text()),
        ));
    }
    Ok(())
}

/// `DELETE /v1/tenants/{tenant}/grants/{grant}`.
pub async fn revoke_grant(base: &str, admin: &str, tenant: &str, grant: &str) -> Result<()> {
    let reply = client::once(
        Method::DELETE,
        &format!("{base}/v1/tenants/{tenant}/grants/{grant}"),
        Headers::new().bearer(admin)?,
        None,
    )
    .await?;
    if !reply.status.is_success() {
        return Err(BenchError::protocol(
            "revoke grant",
            format!("HTTP {}: {}", reply.status, reply.text()),
        ));
    }
    Ok(())
}

/// One stateless call of `tool` (its default arguments), answered.
async fn call_once(mcp_url: &str, token: &str, tool: Tool) -> Result<client::Reply> {
    let target = Target::parse(mcp_url)?;
    let call = mcp::stateless_call(token, tool, &tool.arguments(None)?)?;
    let mut connection = client::Connection::open(&target).await?;
    tokio::time::timeout(
        client::SETUP_TIMEOUT,
        connection.send(Method::POST, &target.path, &call.headers, call.body),
    )
    .await
    .map_err(|_| BenchError::Http(format!("{mcp_url}: no answer to one {tool}")))?
}

/// Creates one issue through MCP (stateless) and returns its id, for
/// `get_issue` to read.
pub async fn seed_issue(mcp_url: &str, token: &str) -> Result<String> {
    let reply = call_once(mcp_url, token, Tool::CreateIssue).await?;
    let structured = mcp::structured(&reply)?;
    structured["id"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| BenchError::protocol("seed issue", "create_issue answered without an id"))
}

/// Issues on the board before `list_issues` is loaded: one full default
/// page.
const LIST_BOARD: usize = 50;

/// Seeds the board the loaded `tools` read and returns the issue
/// `get_issue` reads: one issue, or a full default page of them
/// ([`LIST_BOARD`]) when `list_issues` is loaded, as agents list a board.
pub async fn seed_board(mcp_url: &str, token: &str, tools: &[Tool]) -> Result<String> {
    let issue = seed_issue(mcp_url, token).await?;
    if tools.contains(&Tool::ListIssues) {
        for _ in 1..LIST_BOARD {
            seed_issue(mcp_url, token).await?;
        }
    }
    Ok(issue)
}

/// How many open issues the board holds (`board_stats`), and whether
/// that is a lower bound (a store that stops counting at its cap).
pub async fn open_issues(mcp_url: &str, token: &str) -> Result<(u64, bool)> {
    let reply = call_once(mcp_url, token, Tool::BoardStats).await?;
    let structured = mcp::structured(&reply)?;
    let open = structured["open"].as_u64().ok_or_else(|| {
        BenchError::protocol("board stats", "board_stats answered without an open count")
    })?;
    let at_least = structured["at_least"]
        .as_array()
        .is_some_and(|parts| parts.iter().any(|part| part == "states"));
    Ok((open, at_least))
}

/// The bytes of `tool`'s answer (its JSON-RPC reply body) to one stateless
/// call: what a ceiling answering as much sends ([`crate::ceiling::body`]).
pub async fn answer_bytes(mcp_url: &str, token: &str, tool: Tool) -> Result<usize> {
    let reply = call_once(mcp_url, token, tool).await?;
    mcp::structured(&reply)?;
    Ok(reply.body.len())
}

/// Registers a run on a runner (`POST /v1/runs`): the runner starts the
/// run's gateway and answers with its MCP URL and token.
pub async fn register_run(
    base: &str,
    admin: &str,
    tenant: &str,
    run: &str,
    caps: &[&str],
) -> Result<Granted> {
    register_run_with(base, admin, tenant, run, caps, &json!({})).await
}

/// [`register_run`] with write budgets (`{}`: none).
pub async fn register_run_with(
    base: &str,
    admin: &str,
    tenant: &str,
    run: &str,
    caps: &[&str],
    budgets: &Value,
) -> Result<Granted> {
    let reply = client::once(
        Method::POST,
        &format!("{base}/v1/runs"),
        Headers::json()?.bearer(admin)?,
        Some(&json!({
            "tenant": tenant, "run": run, "capabilities": caps, "ttl": "12h", "budgets": budgets,
        })),
    )
    .await?;
    if !reply.status.is_success() {
        return Err(BenchError::protocol(
            "register run",
            format!("HTTP {}: {}", reply.status, reply.text()),
        ));
    }
    granted_from(reply.json()?, "register run")
}
