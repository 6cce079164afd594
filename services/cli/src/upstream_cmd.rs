//! `corkboard upstream put|list|delete|tools|approve`: a tenant's upstream
//! MCP servers and the approval of their tools' definitions,
//! through a server's admin API (`--server URL`, admin JWT in
//! `CORKBOARD_ADMIN_TOKEN`). The credential is read from a file or an
//! environment variable, never from a flag (flags show in process lists
//! and shell history), and is never printed.

use crate::grant_cmd::Remote;
use anyhow::{Context, Result, bail};
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
        /// Approve the tools of its first listing as listed (trust on
        /// first use); otherwise every tool waits for `upstream approve`.
        #[arg(long)]
        trust_first_listing: bool,
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
    /// List an upstream's tools as pinned: approved or pending, and what
    /// changed since the approved definition.
    #[command(after_help = "\
Examples:
  corkboard upstream tools --server http://127.0.0.1:4891 --tenant acme github")]
    Tools {
        /// Admin API base URL (e.g. http://127.0.0.1:4891).
        #[arg(long, env = "CORKBOARD_SERVER", value_name = "URL")]
        server: String,
        /// The upstream's tenant.
        #[arg(long)]
        tenant: String,
        /// The upstream whose tools to list.
        name: String,
        /// Print the API's JSON answer instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Approve a pending tool's definition, so runs see and call it.
    #[command(after_help = "\
Examples:
  corkboard upstream tools --server http://127.0.0.1:4891 --tenant acme github
  corkboard upstream approve --server http://127.0.0.1:4891 --tenant acme github issue_read --hash HASH")]
    Approve {
        /// Admin API base URL (e.g. http://127.0.0.1:4891).
        #[arg(long, env = "CORKBOARD_SERVER", value_name = "URL")]
        server: String,
        /// The upstream's tenant.
        #[arg(long)]
        tenant: String,
        /// The upstream.
        name: String,
        /// The upstream's own name of the tool.
        tool: String,
        /// The definition hash reviewed (from `upstream tools`); without
        /// it, the definition shown now is printed and approved.
        #[arg(long)]
        hash: Option<String>,
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
            trust_first_listing,
            json,
        } => {
            let credential = credential(credential_file.as_deref(), credential_env.as_deref())?;
            let remote = Remote::new(&server)?;
            let value = remote
                .call(
                    reqwest::Method::PUT,
                    &format!("/v1/tenants/{tenant}/upstreams/{name}"),
                    Some(json!({
                        "url": url, "header": header, "credential": credential,
                        "trust_first_listing": trust_first_listing,
                    })),
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
        UpstreamCommand::Tools {
            server,
            tenant,
            name,
            json,
        } => {
            let remote = Remote::new(&server)?;
            let value = remote
                .call(
                    reqwest::Method::GET,
                    &format!("/v1/tenants/{tenant}/upstreams/{name}/tools"),
                    None,
                )
                .await?;
            if json {
                writeln!(out, "{value}")?;
            } else {
                for tool in value["tools"].as_array().into_iter().flatten() {
                    writeln!(out, "{}", tool_line(tool))?;
                }
            }
        }
        UpstreamCommand::Approve {
            server,
            tenant,
            name,
            tool,
            hash,
            json,
        } => {
            let remote = Remote::new(&server)?;
            let hash = match hash {
                Some(hash) => hash,
                None => {
                    // Approving what is shown now: print it first, so the
                    // terminal keeps what was approved.
                    let value = remote
                        .call(
                            reqwest::Method::GET,
                            &format!("/v1/tenants/{tenant}/upstreams/{name}/tools"),
                            None,
                        )
                        .await?;
                    let Some(found) = value["tools"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .find(|t| t["tool"] == tool.as_str())
                    else {
                        bail!(
                            "upstream {name} of tenant {tenant} has never listed a tool {tool:?}"
                        );
                    };
                    if !json {
                        writeln!(out, "{}", tool_line(found))?;
                        writeln!(out, "definition: {}", found["definition"])?;
                    }
                    text(&found["hash"]).to_owned()
                }
            };
            let value = remote
                .call(
                    reqwest::Method::POST,
                    &format!("/v1/tenants/{tenant}/upstreams/{name}/tools/{tool}/approve"),
                    Some(json!({ "hash": hash })),
                )
                .await?;
            if json {
                writeln!(out, "{value}")?;
            } else {
                writeln!(
                    out,
                    "tool {tool} of upstream {name} approved at definition {}: runs see it from their next listing",
                    text(&value["hash"])
                )?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// One tool of `upstream tools`: name, status, hash, what changed.
fn tool_line(tool: &Value) -> String {
    let changes: Vec<&str> = tool["changes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let mut line = format!(
        "{}  {}  {}",
        text(&tool["tool"]),
        text(&tool["status"]),
        text(&tool["hash"])
    );
    if !changes.is_empty() {
        line.push_str(&format!("  changed: {}", changes.join(", ")));
    }
    line
}

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or("")
}
