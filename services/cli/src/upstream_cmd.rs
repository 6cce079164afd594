//! `corkboard upstream put|list|delete`: a tenant's upstream MCP servers,
//! through a server's admin API (`--server URL`, admin JWT in
//! `CORKBOARD_ADMIN_TOKEN`). The credential is read from a file or an
//! environment variable, never from a flag (flags show in process lists
//! and shell history), and is never printed.

use crate::grant_cmd::Remote;
use anyhow::{Context, Result};
use clap::Subcommand;
use serde_json::{Value, json};
use std::io::Write;
use std::process::ExitCode;

#[derive(Debug, Subcommand)]
pub enum UpstreamCommand {
    /// Register an upstream MCP server of a tenant, or replace it.
    #[command(after_help = "\
Examples:
  corkboard upstream put --server http://127.0.0.1:4891 --tenant acme github --url https://api.githubcopilot.com/mcp/ --credential-env GITHUB_MCP_AUTH
  corkboard upstream put --server http://127.0.0.1:4891 --tenant acme docs --url http://docs.internal:8080/mcp --header X-Api-Key --credential-file ./docs.key --json")]
    Put {
        /// Admin API base URL (e.g. http://127.0.0.1:4891).
        #[arg(long, env = "CORKBOARD_SERVER", value_name = "URL")]
        server: String,
        /// The tenant whose runs may use it.
        #[arg(long)]
        tenant: String,
        /// 1-32 of a-z, 0-9 and '-'; its tools are offered as <name>__<tool>.
        name: String,
        /// The upstream's Streamable HTTP endpoint.
        #[arg(long)]
        url: String,
        /// The request header the credential goes in.
        #[arg(long, default_value = "Authorization")]
        header: String,
        /// A file holding the credential (the header's whole value; one trailing newline is dropped).
        #[arg(long, conflicts_with = "credential_env")]
        credential_file: Option<std::path::PathBuf>,
        /// An environment variable holding the credential.
        #[arg(long, value_name = "NAME")]
        credential_env: Option<String>,
        /// Print the API's JSON answer instead of text.
        #[arg(long)]
        json: bool,
    },
    /// List a tenant's upstreams (credentials are never shown).
    #[command(after_help = "\
Examples:
  corkboard upstream list --server http://127.0.0.1:4891 --tenant acme
  corkboard upstream list --server http://127.0.0.1:4891 --tenant acme --json")]
    List {
        /// Admin API base URL (e.g. http://127.0.0.1:4891).
        #[arg(long, env = "CORKBOARD_SERVER", value_name = "URL")]
        server: String,
        /// The tenant whose upstreams to list.
        #[arg(long)]
        tenant: String,
        /// Print the API's JSON answer instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Remove an upstream.
    #[command(after_help = "\
Examples:
  corkboard upstream delete --server http://127.0.0.1:4891 --tenant acme github")]
    Delete {
        /// Admin API base URL (e.g. http://127.0.0.1:4891).
        #[arg(long, env = "CORKBOARD_SERVER", value_name = "URL")]
        server: String,
        /// The upstream's tenant.
        #[arg(long)]
        tenant: String,
        /// The upstream to remove.
        name: String,
        /// Print the API's JSON answer instead of text.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(cmd: UpstreamCommand) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run_async(cmd))
}

fn credential(file: Option<&std::path::Path>, env: Option<&str>) -> Result<String> {
    match (file, env) {
        (Some(path), _) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read the credential file {}", path.display()))?;
            let text = text.strip_suffix('\n').unwrap_or(&text);
            Ok(text.strip_suffix('\r').unwrap_or(text).to_owned())
        }
        (None, Some(var)) => {
            std::env::var(var).with_context(|| format!("the environment variable {var} is not set"))
        }
        (None, None) => Err(crate::exit::usage(
            "name the credential with --credential-file or --credential-env",
        )),
    }
}

async fn run_async(cmd: UpstreamCommand) -> Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    match cmd {
        UpstreamCommand::Put {
            server,
            tenant,
            name,
            url,
            header,
            credential_file,
            credential_env,
            json,
        } => {
            let credential = credential(credential_file.as_deref(), credential_env.as_deref())?;
            let remote = Remote::new(&server)?;
            let value = remote
                .call(
                    reqwest::Method::PUT,
                    &format!("/v1/tenants/{tenant}/upstreams/{name}"),
                    Some(json!({ "url": url, "header": header, "credential": credential })),
                )
                .await?;
            if json {
                writeln!(out, "{value}")?;
            } else {
                writeln!(
                    out,
                    "upstream {} of tenant {tenant} registered: {} (credential sealed, sent as {}); grant it with {}",
                    text(&value["name"]),
                    text(&value["url"]),
                    text(&value["header"]),
                    text(&value["capability"])
                )?;
            }
        }
        UpstreamCommand::List {
            server,
            tenant,
            json,
        } => {
            let remote = Remote::new(&server)?;
            let value = remote
                .call(
                    reqwest::Method::GET,
                    &format!("/v1/tenants/{tenant}/upstreams"),
                    None,
                )
                .await?;
            if json {
                writeln!(out, "{value}")?;
            } else {
                for upstream in value["upstreams"].as_array().into_iter().flatten() {
                    writeln!(
                        out,
                        "{}  {}  header {}  by {}",
                        text(&upstream["name"]),
                        text(&upstream["url"]),
                        text(&upstream["header"]),
                        text(&upstream["created_by"])
                    )?;
                }
            }
        }
        UpstreamCommand::Delete {
            server,
            tenant,
            name,
            json,
        } => {
            let remote = Remote::new(&server)?;
            let value = remote
                .call(
                    reqwest::Method::DELETE,
                    &format!("/v1/tenants/{tenant}/upstreams/{name}"),
                    None,
                )
                .await?;
            if json {
                let value = if value.is_null() {
                    json!({ "deleted": name, "tenant": tenant })
                } else {
                    value
                };
                writeln!(out, "{value}")?;
            } else {
                writeln!(out, "upstream {name} of tenant {tenant} deleted")?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or("")
}
