//! Decision to result: how long after a person's decision the agent has
//! its call's outcome. Per trial, a grant's `create_issue` needs approval
//! (a policy covers it):
//!
//! - **held**: a 2025 session's call is held on its stream (the server's
//!   default hold bound); once its item is pending, the bench approves it
//!   through the admin API and times from sending the decision to the held
//!   call's answer (it ran);
//! - **collect**: a 2026-07-28 call answers pending at once; the bench
//!   approves it and times from sending the decision to `collect_approval`
//!   answering the call's result (one call after the decision: what a
//!   client that cannot wait pays at best).
//!
//! A trial whose answer is not the call's result counts as an error,
//! never as a figure.

use super::deploy::{DeploySpec, Deployment, Endpoint, Registry, Store};
use crate::client::{self, Connection, Headers, Target};
use crate::error::{BenchError, Result};
use crate::mcp::{self, Tool, Verdict};
use crate::procs::Binaries;
use crate::record::{Record, Sink};
use hyper::Method;
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

const TENANT: &str = "bench";
/// Longest the bench waits for a call's item to show up as pending.
const PENDING_DEADLINE: Duration = Duration::from_secs(30);

pub async fn run(bins: &Binaries, trials: usize, logs: &Path, sink: &mut Sink) -> Result<()> {
    let deployment = Deployment::start(
        bins,
        DeploySpec {
            endpoint: Endpoint::Studio,
            store: Store::Sqlite,
            registry: Registry::Memory,
            log: Some("warn".into()),
            env: Vec::new(),
        },
        logs,
    )
    .await?;
    let (base, admin) = (deployment.base.clone(), deployment.admin().to_owned());
    let granted = deployment
        .grant(TENANT, "bench-approvals", &["issues:read", "issues:create"])
        .await?;
    let policies = client::once(
        Method::PUT,
        &format!("{base}/v1/tenants/{TENANT}/approval-policies"),
        Headers::json()?.bearer(&admin)?,
        Some(&json!({ "policies": [{ "name": "creates", "tool": "create_issue" }] })),
    )
    .await?;
    if policies.status.as_u16() != 200 {
        return Err(BenchError::protocol(
            "approval policies",
            format!("HTTP {}: {}", policies.status, policies.text()),
        ));
    }
    let target = Target::parse(&granted.mcp_url)?;
    let arguments = Tool::CreateIssue.arguments(None)?;

    let (mut held, mut held_errors) = (Vec::with_capacity(trials), 0u64);
    for _ in 0..trials {
        let mut connection = Connection::open(&target).await?;
        let call = mcp::legacy_session(
            &mut connection,
            &target.path,
            &granted.token,
            Tool::CreateIssue,
            &arguments,
        )
        .await?;
        let (reply, sent) = tokio::join!(
            connection.send(Method::POST, &target.path, &call.headers, call.body.clone()),
            async {
                let id = pending_item(&base, &admin).await?;
                let sent = Instant::now();
                decide(&base, &admin, &id).await?;
                Ok::<Instant, BenchError>(sent)
            }
        );
        let (reply, sent) = (reply?, sent?);
        let elapsed = sent.elapsed();
        if mcp::classify(&reply) == Verdict::Ok {
            held.push(elapsed.as_secs_f64() * 1000.0);
        } else {
            held_errors += 1;
        }
    }

    let (mut collected, mut collect_errors) = (Vec::with_capacity(trials), 0u64);
    let mut connection = Connection::open(&target).await?;
    let create = mcp::stateless_named_call(&granted.token, "create_issue", &arguments)?;
    for _ in 0..trials {
        if !connection.is_open() {
            connection = Connection::open(&target).await?;
        }
        let pending = connection
            .send(
                Method::POST,
                &target.path,
                &create.headers,
                create.body.clone(),
            )
            .await?;
        let text = pending.text();
        let Some(at) = text.find("apr_") else {
            collect_errors += 1;
            continue;
        };
        let handle = text[at..(at + 30).min(text.len())].to_owned();
        let collect = mcp::stateless_named_call(
            &granted.token,
            "collect_approval",
            &json!({ "handle": handle }),
        )?;
        let sent = Instant::now();
        decide(&base, &admin, &handle).await?;
        let reply = connection
            .send(
                Method::POST,
                &target.path,
                &collect.headers,
                collect.body.clone(),
            )
            .await?;
        let elapsed = sent.elapsed();
        let ran = mcp::structured(&reply)
            .map(|value| value["status"] == "ran")
            .unwrap_or(false);
        if mcp::classify(&reply) == Verdict::Ok && ran {
            collected.push(elapsed.as_secs_f64() * 1000.0);
        } else {
            collect_errors += 1;
        }
    }

    for (mode, samples, errors, note) in [
        (
            "held",
            &held,
            held_errors,
            "from sending the approval to the held 2025 call's answer",
        ),
        (
            "collect",
            &collected,
            collect_errors,
            "from sending the approval to collect_approval's answer (one call after it)",
        ),
    ] {
        let mut record = Record::new("approval_decision")
            .label("mode", mode)
            .with_samples(samples);
        record.errors = errors;
        record.note = Some(note.into());
        sink.emit(record)?;
    }
    Ok(())
}

/// The id of the tenant's newest pending item, once there is one.
async fn pending_item(base: &str, admin: &str) -> Result<String> {
    let deadline = Instant::now() + PENDING_DEADLINE;
    loop {
        let reply = client::once(
            Method::GET,
            &format!("{base}/v1/tenants/{TENANT}/approvals?status=pending&limit=1"),
            Headers::new().bearer(admin)?,
            None,
        )
        .await?;
        let listed: Value = reply.json()?;
        if let Some(id) = listed["approvals"][0]["id"].as_str() {
            return Ok(id.to_owned());
        }
        if Instant::now() > deadline {
            return Err(BenchError::protocol(
                "approvals",
                format!("no pending item after {PENDING_DEADLINE:?}: {listed}"),
            ));
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Approves item `id` through the admin API.
async fn decide(base: &str, admin: &str, id: &str) -> Result<()> {
    let reply = client::once(
        Method::POST,
        &format!("{base}/v1/tenants/{TENANT}/approvals/{id}/decision"),
        Headers::json()?.bearer(admin)?,
        Some(&json!({ "approve": true })),
    )
    .await?;
    if reply.status.as_u16() != 200 {
        return Err(BenchError::protocol(
            "decide",
            format!("HTTP {}: {}", reply.status, reply.text()),
        ));
    }
    Ok(())
}
