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

#[derive(Debug, Subcommand)]
pub enum ApprovalCommand {
    /// Print the tenant's approval policies.
    Policies {
        /// Admin API base URL; the admin JWT comes from CORKBOARD_ADMIN_TOKEN.
        #[arg(long, env = "CORKBOARD_SERVER")]
        server: String,
        #[arg(long)]
        tenant: String,
    },
    /// Replace the tenant's approval policies with those of a JSON file
    /// (`[{"name","tool","grants"?,"arguments"?,"ttl_secs"?}]`).
    SetPolicies {
        #[arg(long, env = "CORKBOARD_SERVER")]
        server: String,
        #[arg(long)]
        tenant: String,
        #[arg(long)]
        file: PathBuf,
    },
    /// List approval items, newest first.
    List {
        #[arg(long, env = "CORKBOARD_SERVER")]
        server: String,
        #[arg(long)]
        tenant: String,
        /// pending, approved, denied or used.
        #[arg(long)]
        status: Option<String>,
    },
    /// One item with its arguments and what its run did recently.
    Show {
        #[arg(long, env = "CORKBOARD_SERVER")]
        server: String,
        #[arg(long)]
        tenant: String,
        approval: String,
    },
    /// Approve (or with --deny, deny) a waiting call.
    Decide {
        #[arg(long, env = "CORKBOARD_SERVER")]
        server: String,
        #[arg(long)]
        tenant: String,
        approval: String,
        #[arg(long)]
        deny: bool,
        /// Told to the agent when denied.
        #[arg(long)]
        reason: Option<String>,
    },
}

pub fn run(cmd: ApprovalCommand) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let out = runtime.block_on(call(cmd))?;
    writeln!(std::io::stdout(), "{}", serde_json::to_string_pretty(&out)?)?;
    Ok(ExitCode::SUCCESS)
}

async fn call(cmd: ApprovalCommand) -> Result<Value> {
    use reqwest::Method;
    let tenant_of = |t: String| TenantId::parse(t).context("--tenant");
    let id_of = |a: String| ApprovalId::parse(&a).context("APPROVAL_ID");
    match cmd {
        ApprovalCommand::Policies { server, tenant } => {
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
            server,
            tenant,
            file,
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
            server,
            tenant,
            status,
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
            server,
            tenant,
            approval,
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
            server,
            tenant,
            approval,
            deny,
            reason,
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
