//! `corkboard webhook create|list|delete`: a tenant's webhook endpoints,
//! through a server's admin API (`--server URL`, admin JWT in
//! `CORKBOARD_ADMIN_TOKEN`), where URLs are checked against the server's
//! `webhook_allowed_hosts` and secrets are generated.

use crate::grant_cmd::Remote;
use anyhow::{Context, Result};
use clap::Subcommand;
use corkboard_board::{TenantId, WebhookId};
use serde_json::{Value, json};
use std::io::Write;
use std::process::ExitCode;

#[derive(Debug, Subcommand)]
pub enum WebhookCommand {
    /// Register an endpoint; prints it (and its secret, if generated: shown once).
    Create {
        /// Admin API base URL; the admin JWT comes from CORKBOARD_ADMIN_TOKEN.
        #[arg(long, env = "CORKBOARD_SERVER")]
        server: String,
        #[arg(long)]
        tenant: String,
        /// http(s) URL without credentials.
        #[arg(long)]
        url: String,
        /// Comma-separated: issue.created, issue.updated, issue.closed,
        /// issue.commented, run.started, run.ended.
        #[arg(long)]
        events: String,
        /// Read the signing secret (16-256 bytes) from this environment
        /// variable instead of having one generated; never a flag, so it
        /// stays out of shell history and process lists.
        #[arg(long, value_name = "NAME")]
        secret_env: Option<String>,
    },
    /// List a tenant's endpoints with their delivery status.
    List {
        #[arg(long, env = "CORKBOARD_SERVER")]
        server: String,
        #[arg(long)]
        tenant: String,
    },
    /// Delete an endpoint and its undelivered deliveries.
    Delete {
        #[arg(long, env = "CORKBOARD_SERVER")]
        server: String,
        #[arg(long)]
        tenant: String,
        webhook: String,
    },
}

pub fn run(cmd: WebhookCommand) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let out = runtime.block_on(call(cmd))?;
    writeln!(std::io::stdout(), "{}", serde_json::to_string_pretty(&out)?)?;
    Ok(ExitCode::SUCCESS)
}

async fn call(cmd: WebhookCommand) -> Result<Value> {
    match cmd {
        WebhookCommand::Create {
            server,
            tenant,
            url,
            events,
            secret_env,
        } => {
            let tenant = TenantId::parse(tenant).context("--tenant")?;
            let events: Vec<&str> = events.split(',').map(str::trim).collect();
            let mut body = json!({ "url": url, "events": events });
            if let Some(name) = secret_env {
                let secret = std::env::var(&name)
                    .with_context(|| format!("--secret-env {name}: the variable is not set"))?;
                body["secret"] = json!(secret);
            }
            Remote::new(&server)?
                .call(
                    reqwest::Method::POST,
                    &format!("/v1/tenants/{tenant}/webhooks"),
                    Some(body),
                )
                .await
        }
        WebhookCommand::List { server, tenant } => {
            let tenant = TenantId::parse(tenant).context("--tenant")?;
            Remote::new(&server)?
                .call(
                    reqwest::Method::GET,
                    &format!("/v1/tenants/{tenant}/webhooks"),
                    None,
                )
                .await
        }
        WebhookCommand::Delete {
            server,
            tenant,
            webhook,
        } => {
            let tenant = TenantId::parse(tenant).context("--tenant")?;
            let id = WebhookId::parse(webhook).context("WEBHOOK_ID")?;
            Remote::new(&server)?
                .call(
                    reqwest::Method::DELETE,
                    &format!("/v1/tenants/{tenant}/webhooks/{id}"),
                    None,
                )
                .await
        }
    }
}
