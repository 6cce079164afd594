//! `corkboard webhook create|list|delete`: a tenant's webhook endpoints,
//! through a server's admin API (`--server URL`, admin JWT in
//! `CORKBOARD_ADMIN_TOKEN`), where URLs are checked against the server's
//! `webhook_allowed_hosts` and secrets are generated. Text for people,
//! `--json` (the API's answer) for scripts.

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
    #[command(after_help = "\
Examples:
  corkboard webhook create --server http://127.0.0.1:4891 --tenant acme --url https://hooks.example.com/board --events issue.created,issue.closed
  WEBHOOK_SECRET=... corkboard webhook create --server http://127.0.0.1:4891 --tenant acme --url https://hooks.example.com/board --events issue.created --secret-env WEBHOOK_SECRET --json")]
    Create {
        /// Admin API base URL; the admin JWT comes from CORKBOARD_ADMIN_TOKEN.
        #[arg(long, env = "CORKBOARD_SERVER", value_name = "URL")]
        server: String,
        /// The tenant whose board's events are sent.
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
        /// Print the API's JSON answer instead of text.
        #[arg(long)]
        json: bool,
    },
    /// List a tenant's endpoints with their delivery status.
    #[command(after_help = "\
Examples:
  corkboard webhook list --server http://127.0.0.1:4891 --tenant acme
  corkboard webhook list --server http://127.0.0.1:4891 --tenant acme --json")]
    List {
        /// Admin API base URL; the admin JWT comes from CORKBOARD_ADMIN_TOKEN.
        #[arg(long, env = "CORKBOARD_SERVER", value_name = "URL")]
        server: String,
        /// The tenant whose endpoints to list.
        #[arg(long)]
        tenant: String,
        /// Print the API's JSON answer instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Delete an endpoint and its undelivered deliveries.
    #[command(after_help = "\
Examples:
  corkboard webhook delete --server http://127.0.0.1:4891 --tenant acme wh_01J9Z8Q4X2V6K3M5N7P9R1T3W5")]
    Delete {
        /// Admin API base URL; the admin JWT comes from CORKBOARD_ADMIN_TOKEN.
        #[arg(long, env = "CORKBOARD_SERVER", value_name = "URL")]
        server: String,
        /// The endpoint's tenant.
        #[arg(long)]
        tenant: String,
        /// The endpoint to delete.
        webhook: String,
        /// Print the API's JSON answer instead of text.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(cmd: WebhookCommand) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let json = match &cmd {
        WebhookCommand::Create { json, .. }
        | WebhookCommand::List { json, .. }
        | WebhookCommand::Delete { json, .. } => *json,
    };
    let text_of: fn(&Value) -> String = match &cmd {
        WebhookCommand::Create { .. } => created_text,
        WebhookCommand::List { .. } => list_text,
        WebhookCommand::Delete { .. } => |out| format!("deleted webhook {}", text(&out["deleted"])),
    };
    let out = runtime.block_on(call(cmd))?;
    let mut stdout = std::io::stdout().lock();
    if json {
        writeln!(stdout, "{}", serde_json::to_string_pretty(&out)?)?;
    } else {
        writeln!(stdout, "{}", text_of(&out))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn text(value: &Value) -> String {
    value
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| value.to_string())
}

fn events_text(webhook: &Value) -> String {
    webhook["events"]
        .as_array()
        .map(|events| events.iter().map(text).collect::<Vec<_>>().join(","))
        .unwrap_or_default()
}

fn created_text(out: &Value) -> String {
    let mut lines = format!(
        "webhook {} of tenant {}: {} on {}",
        text(&out["id"]),
        text(&out["tenant"]),
        text(&out["url"]),
        events_text(out)
    );
    if out["secret"].is_string() {
        lines.push_str(&format!(
            "\nsigning secret: {}   (shown once; give it to the receiver)",
            text(&out["secret"])
        ));
    }
    lines
}

fn list_text(out: &Value) -> String {
    let webhooks = out["webhooks"].as_array().cloned().unwrap_or_default();
    if webhooks.is_empty() {
        return "no webhooks".to_owned();
    }
    webhooks
        .iter()
        .map(|w| {
            let status = &w["status"];
            format!(
                "{}  {}  {}  pending={} delivered={} dead={}{}",
                text(&w["id"]),
                text(&w["url"]),
                events_text(w),
                text(&status["pending"]),
                text(&status["delivered"]),
                text(&status["dead"]),
                status["last_error"]
                    .as_str()
                    .map(|e| format!("  last error: {e}"))
                    .unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

async fn call(cmd: WebhookCommand) -> Result<Value> {
    match cmd {
        WebhookCommand::Create {
            server,
            tenant,
            url,
            events,
            secret_env,
            json: _,
        } => {
            let tenant = TenantId::parse(tenant).context("--tenant")?;
            let events: Vec<&str> = events.split(',').map(str::trim).collect();
            let mut body = json!({ "url": url, "events": events });
            if let Some(name) = secret_env {
                let secret = std::env::var(&name).map_err(|_| {
                    crate::exit::usage(format!("--secret-env {name}: the variable is not set"))
                })?;
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
        WebhookCommand::List {
            server,
            tenant,
            json: _,
        } => {
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
            json: _,
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
