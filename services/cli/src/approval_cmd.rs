//! `corkboard approval policies|set-policies|list|show|decide`: a tenant's
//! approval policies and the calls waiting for a person, through a
//! server's admin API (`--server URL`, admin JWT in
//! `CORKBOARD_ADMIN_TOKEN`; deciding needs a tenant or platform admin or
//! an approver).

use crate::grant_cmd::Remote;
use anyhow::{Context, Result};
use clap::Subcommand;
use corkboard_board::{ApprovalId, TenantId};
use serde_json::{Value, json};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// `--server` and `--tenant`, which every approval command takes.
#[derive(Debug, clap::Args)]
pub struct Target {
    /// Admin API base URL (e.g. http://127.0.0.1:4891); the admin JWT comes
    /// from CORKBOARD_ADMIN_TOKEN.
    #[arg(long, env = "CORKBOARD_SERVER", value_name = "URL")]
    server: String,
    /// The tenant whose approvals these are.
    #[arg(long)]
    tenant: String,
}

#[derive(Debug, Subcommand)]
pub enum ApprovalCommand {
    /// Print the tenant's approval policies.
    #[command(after_help = "\
Examples:
  corkboard approval policies --server http://127.0.0.1:4891 --tenant acme")]
    Policies {
        #[command(flatten)]
        target: Target,
        /// Print the API's JSON answer instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Replace the tenant's approval policies with those of a JSON file
    /// (`[{"name","tool","grants"?,"arguments"?,"ttl_secs"?}]`).
    #[command(after_help = "\
Examples:
  echo '[{\"name\":\"deletes\",\"tool\":\"upstream:github:delete_*\"}]' > policies.json
  corkboard approval set-policies --server http://127.0.0.1:4891 --tenant acme --file policies.json")]
    SetPolicies {
        #[command(flatten)]
        target: Target,
        /// The JSON file holding the array of policies.
        #[arg(long)]
        file: PathBuf,
        /// Print the API's JSON answer instead of text.
        #[arg(long)]
        json: bool,
    },
    /// List approval items, newest first.
    #[command(after_help = "\
Examples:
  corkboard approval list --server http://127.0.0.1:4891 --tenant acme --status pending")]
    List {
        #[command(flatten)]
        target: Target,
        /// pending, approved, denied or used.
        #[arg(long)]
        status: Option<String>,
        /// Print the API's JSON answer instead of text.
        #[arg(long)]
        json: bool,
    },
    /// One item with its arguments and what its run did recently.
    #[command(after_help = "\
Examples:
  corkboard approval show --server http://127.0.0.1:4891 --tenant acme apr_01J9Z8Q4X2V6K3M5N7P9R1T3W5")]
    Show {
        #[command(flatten)]
        target: Target,
        /// The approval item's id (`apr_...`).
        approval: String,
        /// Print the API's JSON answer instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Approve (or with --deny, deny) a waiting call.
    #[command(after_help = "\
Examples:
  corkboard approval decide --server http://127.0.0.1:4891 --tenant acme apr_01J9Z8Q4X2V6K3M5N7P9R1T3W5
  corkboard approval decide --server http://127.0.0.1:4891 --tenant acme apr_01J9Z8Q4X2V6K3M5N7P9R1T3W5 --deny --reason \"not on prod\"")]
    Decide {
        #[command(flatten)]
        target: Target,
        /// The approval item's id (`apr_...`).
        approval: String,
        /// Deny the call instead of approving it.
        #[arg(long)]
        deny: bool,
        /// Told to the agent when denied.
        #[arg(long)]
        reason: Option<String>,
        /// Print the API's JSON answer instead of text.
        #[arg(long)]
        json: bool,
    },
}

impl ApprovalCommand {
    fn json(&self) -> bool {
        match self {
            Self::Policies { json, .. }
            | Self::SetPolicies { json, .. }
            | Self::List { json, .. }
            | Self::Show { json, .. }
            | Self::Decide { json, .. } => *json,
        }
    }
}

pub fn run(cmd: ApprovalCommand) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let json = cmd.json();
    let text = text_of(&cmd);
    let out = runtime.block_on(call(cmd))?;
    let mut stdout = std::io::stdout().lock();
    if json {
        writeln!(stdout, "{}", serde_json::to_string_pretty(&out)?)?;
    } else {
        write!(stdout, "{}", text(&out))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// How a command's answer reads as text.
fn text_of(cmd: &ApprovalCommand) -> fn(&Value) -> String {
    fn s(v: &Value) -> &str {
        v.as_str().unwrap_or("-")
    }
    match cmd {
        ApprovalCommand::Policies { .. } | ApprovalCommand::SetPolicies { .. } => |out| {
            let policies = out["policies"].as_array().cloned().unwrap_or_default();
            if policies.is_empty() {
                return "no approval policies: no call waits for a person\n".to_owned();
            }
            policies
                .iter()
                .map(|p| {
                    format!(
                        "{}  {}  (version {})\n",
                        s(&p["name"]),
                        s(&p["tool"]),
                        p["version"]
                    )
                })
                .collect()
        },
        ApprovalCommand::List { .. } => |out| {
            let items = out["approvals"].as_array().cloned().unwrap_or_default();
            if items.is_empty() {
                return "no approval items\n".to_owned();
            }
            items
                .iter()
                .map(|i| {
                    format!(
                        "{}  {}  {}  run {}  expires {}\n",
                        s(&i["id"]),
                        s(&i["status"]),
                        s(&i["tool"]),
                        s(&i["run"]),
                        s(&i["expires_at"])
                    )
                })
                .collect()
        },
        ApprovalCommand::Show { .. } => |out| {
            let item = if out["item"].is_object() {
                &out["item"]
            } else {
                out
            };
            format!(
                "{}  {}\ntool {}  run {}  grant {}\npolicy {} (version {})  expires {}\narguments: {}\n",
                s(&item["id"]),
                s(&item["status"]),
                s(&item["tool"]),
                s(&item["run"]),
                s(&item["grant"]),
                s(&item["policy"]),
                item["policy_version"],
                s(&item["expires_at"]),
                s(&item["arguments"]),
            )
        },
        ApprovalCommand::Decide { .. } => {
            |out| format!("approval {} is {}\n", s(&out["id"]), s(&out["status"]))
        }
    }
}

async fn call(cmd: ApprovalCommand) -> Result<Value> {
    use reqwest::Method;
    let tenant_of = |t: String| TenantId::parse(t).context("--tenant");
    let id_of = |a: String| ApprovalId::parse(&a).context("APPROVAL_ID");
    match cmd {
        ApprovalCommand::Policies {
            target: Target { server, tenant },
            ..
        } => {
            let tenant = tenant_of(tenant)?;
            Remote::new(&server)?
                .call(
                    Method::GET,
                    &format!("/v1/tenants/{tenant}/approval-policies"),
                    None,
                )
                .await
        }
        ApprovalCommand::SetPolicies {
            target: Target { server, tenant },
            file,
            ..
        } => {
            let tenant = tenant_of(tenant)?;
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("--file {}", file.display()))?;
            let policies: Value = serde_json::from_str(&text)
                .with_context(|| format!("--file {}: not JSON", file.display()))?;
            Remote::new(&server)?
                .call(
                    Method::PUT,
                    &format!("/v1/tenants/{tenant}/approval-policies"),
                    Some(json!({ "policies": policies })),
                )
                .await
        }
        ApprovalCommand::List {
            target: Target { server, tenant },
            status,
            ..
        } => {
            let tenant = tenant_of(tenant)?;
            let query = status.map_or_else(String::new, |s| format!("?status={s}"));
            Remote::new(&server)?
                .call(
                    Method::GET,
                    &format!("/v1/tenants/{tenant}/approvals{query}"),
                    None,
                )
                .await
        }
        ApprovalCommand::Show {
            target: Target { server, tenant },
            approval,
            ..
        } => {
            let (tenant, id) = (tenant_of(tenant)?, id_of(approval)?);
            Remote::new(&server)?
                .call(
                    Method::GET,
                    &format!("/v1/tenants/{tenant}/approvals/{id}"),
                    None,
                )
                .await
        }
        ApprovalCommand::Decide {
            target: Target { server, tenant },
            approval,
            deny,
            reason,
            ..
        } => {
            let (tenant, id) = (tenant_of(tenant)?, id_of(approval)?);
            Remote::new(&server)?
                .call(
                    Method::POST,
                    &format!("/v1/tenants/{tenant}/approvals/{id}/decision"),
                    Some(json!({ "approve": !deny, "reason": reason })),
                )
                .await
        }
    }
}
