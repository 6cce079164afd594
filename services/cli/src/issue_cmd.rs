//! `corkboard issue list|view|create|comment|close|reopen|claim|release`:
//! a tenant's board for people and scripts, locally on the data dir `serve`
//! uses or against a server's admin API (`--server URL`, admin JWT in
//! `CORKBOARD_ADMIN_TOKEN`).
//!
//! Both ways run the same writes: remotely the admin API's
//! (`corkboard_server::issue_api`, under the JWT's tenant check), locally the
//! same functions on the local board (as the operator, like `grant create`
//! does locally). Both print the same JSON with `--json`: the API's answer.

use crate::exit::{Kind, fail};
use crate::grant_cmd::{Remote, Target, local_state};
use anyhow::{Context, Result};
use clap::Subcommand;
use corkboard_api::ApiError;
use corkboard_board::{CommentWindow, ErrorCode, IssueId, RunId, TenantId};
use corkboard_server::AppState;
use corkboard_server::issue_api::{self, CreateIssueBody};
use reqwest::Method;
use serde_json::{Value, json};
use std::io::Write;
use std::process::ExitCode;

/// Who the local mode writes as (the author's run of its issues and
/// comments), as local `grant` commands record "local".
const LOCAL_SUBJECT: &str = "local";

#[derive(Debug, Subcommand)]
pub enum IssueCommand {
    /// List a tenant's issues, newest first (one page; --cursor for the next).
    #[command(after_help = "\
Examples:
  corkboard issue list --tenant acme
  corkboard issue list --tenant acme --state todo,in_progress --label bug
  corkboard issue list --tenant acme --unclaimed --json
  corkboard issue list --server http://127.0.0.1:4891 --tenant acme")]
    List {
        #[command(flatten)]
        target: Target,
        /// The tenant whose board to read.
        #[arg(long)]
        tenant: String,
        /// Only these states (comma-separated: inbox, triage, todo, in_progress, blocked, done, closed).
        #[arg(long)]
        state: Option<String>,
        /// Only issues with all of these labels (comma-separated).
        #[arg(long)]
        label: Option<String>,
        /// Only issues no run has claimed.
        #[arg(long, conflicts_with = "claimed_by")]
        unclaimed: bool,
        /// Only issues this run has claimed.
        #[arg(long, value_name = "RUN")]
        claimed_by: Option<String>,
        /// At most this many (1-200).
        #[arg(long, default_value_t = 50)]
        limit: u32,
        /// Continue after this issue (the `next_cursor` of the previous page).
        #[arg(long)]
        cursor: Option<String>,
        /// Print the page as JSON (`issues`, `next_cursor`).
        #[arg(long)]
        json: bool,
    },
    /// Show one issue with its comments, relations and claim.
    #[command(after_help = "\
Examples:
  corkboard issue view --tenant acme iss_01J9Z8Q4X2V6K3M5N7P9R1T3W5
  corkboard issue view --tenant acme iss_01J9Z8Q4X2V6K3M5N7P9R1T3W5 --json")]
    View {
        #[command(flatten)]
        target: Target,
        /// The issue's tenant.
        #[arg(long)]
        tenant: String,
        /// The issue to show.
        issue: String,
        /// Print the issue as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Create an issue; prints its id.
    #[command(after_help = "\
Examples:
  corkboard issue create --tenant acme --title \"Flaky test in CI\"
  corkboard issue create --tenant acme --title \"Upgrade TLS\" --body \"See the audit.\" --label security --priority high
  corkboard issue create --tenant acme --title \"Sub-task\" --parent iss_01J9Z8Q4X2V6K3M5N7P9R1T3W5 --json")]
    Create {
        #[command(flatten)]
        target: Target,
        /// The tenant whose board gets the issue.
        #[arg(long)]
        tenant: String,
        /// 1-200 characters.
        #[arg(long)]
        title: String,
        /// Markdown, up to 64 KiB.
        #[arg(long)]
        body: Option<String>,
        /// A label; repeat for several.
        #[arg(long = "label", value_name = "LABEL")]
        labels: Vec<String>,
        /// none, low, medium, high or urgent [default: none].
        #[arg(long)]
        priority: Option<String>,
        /// The state it starts in [default: inbox].
        #[arg(long)]
        state: Option<String>,
        /// The issue this one is a sub-issue of.
        #[arg(long)]
        parent: Option<String>,
        /// Print the created issue as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Comment on an issue.
    #[command(after_help = "\
Examples:
  corkboard issue comment --tenant acme iss_01J9Z8Q4X2V6K3M5N7P9R1T3W5 --body \"Reproduced on main.\"")]
    Comment {
        #[command(flatten)]
        target: Target,
        /// The issue's tenant.
        #[arg(long)]
        tenant: String,
        /// The issue to comment on.
        issue: String,
        /// Markdown, up to 64 KiB.
        #[arg(long)]
        body: String,
        /// Print the comment as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Close an issue (state closed), with a reason.
    #[command(after_help = "\
Examples:
  corkboard issue close --tenant acme iss_01J9Z8Q4X2V6K3M5N7P9R1T3W5
  corkboard issue close --tenant acme iss_01J9Z8Q4X2V6K3M5N7P9R1T3W5 --reason not_planned")]
    Close {
        #[command(flatten)]
        target: Target,
        /// The issue's tenant.
        #[arg(long)]
        tenant: String,
        /// The issue to close.
        issue: String,
        /// completed, not_planned or duplicate [default: completed].
        #[arg(long)]
        reason: Option<String>,
        /// Print the closed issue as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Reopen a done or closed issue.
    #[command(after_help = "\
Examples:
  corkboard issue reopen --tenant acme iss_01J9Z8Q4X2V6K3M5N7P9R1T3W5
  corkboard issue reopen --tenant acme iss_01J9Z8Q4X2V6K3M5N7P9R1T3W5 --state inbox")]
    Reopen {
        #[command(flatten)]
        target: Target,
        /// The issue's tenant.
        #[arg(long)]
        tenant: String,
        /// The issue to reopen.
        issue: String,
        /// The open state it moves to [default: todo].
        #[arg(long)]
        state: Option<String>,
        /// Print the reopened issue as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Give an open issue to a run (the claim lasts as long as the run's grant).
    #[command(after_help = "\
Examples:
  corkboard issue claim --tenant acme iss_01J9Z8Q4X2V6K3M5N7P9R1T3W5 --run run-1")]
    Claim {
        #[command(flatten)]
        target: Target,
        /// The issue's tenant.
        #[arg(long)]
        tenant: String,
        /// The issue to claim.
        issue: String,
        /// The run that gets it; it needs a live grant.
        #[arg(long)]
        run: String,
        /// Print the claimed issue as JSON.
        #[arg(long)]
        json: bool,
    },
    /// End the claim on an issue.
    #[command(after_help = "\
Examples:
  corkboard issue release --tenant acme iss_01J9Z8Q4X2V6K3M5N7P9R1T3W5
  corkboard issue release --tenant acme iss_01J9Z8Q4X2V6K3M5N7P9R1T3W5 --run run-1")]
    Release {
        #[command(flatten)]
        target: Target,
        /// The issue's tenant.
        #[arg(long)]
        tenant: String,
        /// The issue to release.
        issue: String,
        /// Only if this run holds it [default: whoever holds it].
        #[arg(long)]
        run: Option<String>,
        /// Print the released issue as JSON.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(cmd: IssueCommand) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run_async(cmd))
}

/// Where a command goes: the admin API, or the local board.
enum Board {
    Remote(Remote),
    Local(Box<AppState>),
}

impl Board {
    async fn of(target: &Target) -> Result<Self> {
        Ok(match Remote::from_target(target)? {
            Some(remote) => Self::Remote(remote),
            None => Self::Local(Box::new(local_state(&target.config).await?)),
        })
    }
}

/// A local write's refusal, classified by its stable code like the same
/// refusal through the API (exit codes 2, 3, 4 or 1).
fn refused<E: std::fmt::Display>(code: corkboard_board::Code, err: E) -> anyhow::Error {
    fail(Kind::of_code(code), err.to_string())
}

macro_rules! local {
    ($call:expr) => {
        $call.await.map_err(|e| refused(e.error_code(), &e))
    };
}

fn issue_id(text: String) -> Result<IssueId> {
    IssueId::parse(text).context("ISSUE")
}

async fn run_async(cmd: IssueCommand) -> Result<ExitCode> {
    let (out, json, text): (Value, bool, fn(&Value) -> String) = match cmd {
        IssueCommand::List {
            target,
            tenant,
            state,
            label,
            unclaimed,
            claimed_by,
            limit,
            cursor,
            json,
        } => {
            let tenant = TenantId::parse(tenant).context("--tenant")?;
            // The API's query, built once: the local mode reads the same
            // parameters through the same parser.
            let mut query: Vec<(&str, String)> = vec![("limit", limit.to_string())];
            query.extend(state.map(|s| ("state", s)));
            query.extend(label.map(|l| ("label", l)));
            if unclaimed {
                query.push(("unclaimed", "true".into()));
            }
            query.extend(claimed_by.map(|r| ("claimed_by", r)));
            query.extend(cursor.map(|c| ("cursor", c)));
            let encoded = query_string(&query);
            let out = match Board::of(&target).await? {
                Board::Remote(remote) => {
                    remote
                        .call(
                            Method::GET,
                            &format!("/v1/tenants/{tenant}/issues?{encoded}"),
                            None,
                        )
                        .await?
                }
                Board::Local(state) => {
                    let page = local!(corkboard_server::admin::list_issues_page(
                        &state, &tenant, &encoded
                    ))?;
                    serde_json::to_value(&page)?
                }
            };
            (out, json, list_text)
        }
        IssueCommand::View {
            target,
            tenant,
            issue,
            json,
        } => {
            let tenant = TenantId::parse(tenant).context("--tenant")?;
            let id = issue_id(issue)?;
            let out = match Board::of(&target).await? {
                Board::Remote(remote) => {
                    remote
                        .call(
                            Method::GET,
                            &format!("/v1/tenants/{tenant}/issues/{id}"),
                            None,
                        )
                        .await?
                }
                Board::Local(state) => {
                    let view = local!(state.store.get_issue_view(
                        &tenant,
                        &id,
                        &CommentWindow::all()
                    ))?;
                    serde_json::to_value(&view)?
                }
            };
            (out, json, view_text)
        }
        IssueCommand::Create {
            target,
            tenant,
            title,
            body,
            labels,
            priority,
            state,
            parent,
            json,
        } => {
            let tenant = TenantId::parse(tenant).context("--tenant")?;
            let request = json!({
                "title": title, "body": body, "labels": labels,
                "priority": priority, "state": state, "parent": parent,
            });
            let out = match Board::of(&target).await? {
                Board::Remote(remote) => {
                    remote
                        .call(
                            Method::POST,
                            &format!("/v1/tenants/{tenant}/issues"),
                            Some(without_nulls(request)),
                        )
                        .await?
                }
                Board::Local(state) => {
                    let body: CreateIssueBody = serde_json::from_value(request)?;
                    let created = local!(issue_api::create_issue(
                        &state,
                        &tenant,
                        LOCAL_SUBJECT,
                        body
                    ))?;
                    serde_json::to_value(&created.issue)?
                }
            };
            (out, json, |issue| {
                format!(
                    "created issue {}: {}",
                    text(&issue["id"]),
                    text(&issue["title"])
                )
            })
        }
        IssueCommand::Comment {
            target,
            tenant,
            issue,
            body,
            json,
        } => {
            let tenant = TenantId::parse(tenant).context("--tenant")?;
            let id = issue_id(issue)?;
            let out = match Board::of(&target).await? {
                Board::Remote(remote) => {
                    // The answer is the comment and the issue's new version.
                    let mut answer = remote
                        .call(
                            Method::POST,
                            &format!("/v1/tenants/{tenant}/issues/{id}/comments"),
                            Some(json!({ "body": body })),
                        )
                        .await?;
                    answer["comment"].take()
                }
                Board::Local(state) => {
                    let added = local!(issue_api::add_comment(
                        &state,
                        &tenant,
                        LOCAL_SUBJECT,
                        &id,
                        body
                    ))?;
                    serde_json::to_value(&added.comment)?
                }
            };
            (out, json, |comment| {
                format!("commented ({})", text(&comment["id"]))
            })
        }
        IssueCommand::Close {
            target,
            tenant,
            issue,
            reason,
            json,
        } => {
            let tenant = TenantId::parse(tenant).context("--tenant")?;
            let id = issue_id(issue)?;
            let body = json!({ "reason": reason });
            let out = action(
                &target,
                &tenant,
                &id,
                "close",
                body,
                move |state, tenant, id| {
                    Box::pin(async move {
                        issue_api::close_issue(state, tenant, LOCAL_SUBJECT, id, reason.as_deref())
                            .await
                    })
                },
            )
            .await?;
            (out, json, |issue| {
                format!(
                    "closed issue {} ({})",
                    text(&issue["id"]),
                    text(&issue["close_reason"])
                )
            })
        }
        IssueCommand::Reopen {
            target,
            tenant,
            issue,
            state,
            json,
        } => {
            let tenant = TenantId::parse(tenant).context("--tenant")?;
            let id = issue_id(issue)?;
            let body = json!({ "state": state });
            let out = action(
                &target,
                &tenant,
                &id,
                "reopen",
                body,
                move |board, tenant, id| {
                    Box::pin(async move {
                        issue_api::reopen_issue(board, tenant, LOCAL_SUBJECT, id, state.as_deref())
                            .await
                    })
                },
            )
            .await?;
            (out, json, |issue| {
                format!(
                    "reopened issue {} ({})",
                    text(&issue["id"]),
                    text(&issue["state"])
                )
            })
        }
        IssueCommand::Claim {
            target,
            tenant,
            issue,
            run,
            json,
        } => {
            let tenant = TenantId::parse(tenant).context("--tenant")?;
            let id = issue_id(issue)?;
            let run = RunId::parse(run).context("--run")?;
            let body = json!({ "run": run });
            let out = action(
                &target,
                &tenant,
                &id,
                "claim",
                body,
                move |state, tenant, id| {
                    Box::pin(async move { issue_api::claim_issue(state, tenant, id, &run).await })
                },
            )
            .await?;
            (out, json, |issue| {
                format!(
                    "issue {} claimed by run {} until {}",
                    text(&issue["id"]),
                    text(&issue["claim"]["run"]),
                    text(&issue["claim"]["expires_at"])
                )
            })
        }
        IssueCommand::Release {
            target,
            tenant,
            issue,
            run,
            json,
        } => {
            let tenant = TenantId::parse(tenant).context("--tenant")?;
            let id = issue_id(issue)?;
            let run = run.map(RunId::parse).transpose().context("--run")?;
            let body = json!({ "run": run });
            let out = action(
                &target,
                &tenant,
                &id,
                "release",
                body,
                move |state, tenant, id| {
                    Box::pin(async move {
                        issue_api::release_issue(state, tenant, id, run.as_ref()).await
                    })
                },
            )
            .await?;
            (out, json, |issue| {
                format!("released issue {}", text(&issue["id"]))
            })
        }
    };
    let mut stdout = std::io::stdout().lock();
    if json {
        writeln!(stdout, "{}", serde_json::to_string_pretty(&out)?)?;
    } else {
        writeln!(stdout, "{}", text(&out))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// One of the issue actions (`POST .../issues/{id}/<verb>` with `body`):
/// through the API, or the same function on the local board.
async fn action<F>(
    target: &Target,
    tenant: &TenantId,
    id: &IssueId,
    verb: &str,
    body: Value,
    local: F,
) -> Result<Value>
where
    F: for<'a> FnOnce(
        &'a AppState,
        &'a TenantId,
        &'a IssueId,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<corkboard_board::Issue, ApiError>> + 'a>,
    >,
{
    match Board::of(target).await? {
        Board::Remote(remote) => {
            remote
                .call(
                    Method::POST,
                    &format!("/v1/tenants/{tenant}/issues/{id}/{verb}"),
                    Some(without_nulls(body)),
                )
                .await
        }
        Board::Local(state) => {
            let issue = local(&state, tenant, id)
                .await
                .map_err(|e| refused(e.error_code(), &e))?;
            Ok(serde_json::to_value(&issue)?)
        }
    }
}

/// A request body without its unset fields (the API refuses nothing for
/// them, but an explicit null is not "unset" to every reader).
fn without_nulls(mut body: Value) -> Value {
    if let Some(map) = body.as_object_mut() {
        map.retain(|_, v| !v.is_null());
    }
    body
}

fn query_string(pairs: &[(&str, String)]) -> String {
    let mut url = reqwest::Url::parse("http://x/").expect("static URL");
    url.query_pairs_mut().extend_pairs(pairs);
    url.query().unwrap_or_default().to_owned()
}

fn text(value: &Value) -> String {
    value
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| value.to_string())
}

fn claim_text(issue: &Value) -> String {
    match issue["claim"]["run"].as_str() {
        Some(run) => format!("  claimed by {run}"),
        None => String::new(),
    }
}

fn list_text(page: &Value) -> String {
    let issues = page["issues"].as_array().cloned().unwrap_or_default();
    if issues.is_empty() {
        return "no issues".to_owned();
    }
    let mut lines: Vec<String> = issues
        .iter()
        .map(|i| {
            format!(
                "{}  {:<11}  {:<6}  {}{}",
                text(&i["id"]),
                text(&i["state"]),
                text(&i["priority"]),
                text(&i["title"]),
                claim_text(i)
            )
        })
        .collect();
    if let Some(cursor) = page["next_cursor"].as_str() {
        lines.push(format!("more: --cursor {cursor}"));
    }
    lines.join("\n")
}

fn view_text(issue: &Value) -> String {
    let mut out = format!(
        "{}  {}\nstate: {}{}  priority: {}  version: {}\n",
        text(&issue["id"]),
        text(&issue["title"]),
        text(&issue["state"]),
        issue["close_reason"]
            .as_str()
            .map(|r| format!(" ({r})"))
            .unwrap_or_default(),
        text(&issue["priority"]),
        text(&issue["version"]),
    );
    let labels: Vec<String> = issue["labels"]
        .as_array()
        .into_iter()
        .flatten()
        .map(text)
        .collect();
    if !labels.is_empty() {
        out.push_str(&format!("labels: {}\n", labels.join(", ")));
    }
    out.push_str(&format!(
        "by {} at {}{}\n",
        text(&issue["author"]["run"]),
        text(&issue["created_at"]),
        claim_text(issue)
    ));
    if let Some(parent) = issue["parent"].as_str() {
        out.push_str(&format!("parent: {parent}\n"));
    }
    let body = text(&issue["body"]);
    if !body.is_empty() {
        out.push_str(&format!("\n{body}\n"));
    }
    for c in issue["comments"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "\n--- {} at {}\n{}\n",
            text(&c["author"]["run"]),
            text(&c["created_at"]),
            text(&c["body"])
        ));
    }
    out.trim_end().to_owned()
}
