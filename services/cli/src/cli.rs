//! Command-line surface (design.md section 7). Every configuration flag is
//! also `CORKBOARD_<FLAG>` and a config-file key; flags win.

use anyhow::Result;
use clap::{Args, Parser, Subcommand};
use corkboard_config::Settings;
use serde_json::{Map, Value};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(
    name = "corkboard",
    version,
    about = "Boards for AI agent runs, over MCP."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Everything in one process on embedded defaults (SQLite board, in-process registry).
    Serve(RoleArgs),
    /// The control plane: admin API, board API, web board, studio MCP endpoint.
    Server(RoleArgs),
    /// Manage grants (locally with --data-dir, or against --server).
    #[command(subcommand)]
    Grant(crate::grant_cmd::GrantCommand),
    /// Webhook endpoints of a tenant (through a server's admin API).
    #[command(subcommand)]
    Webhook(crate::webhook_cmd::WebhookCommand),
    /// Approval policies and calls waiting for a person (through a server's admin API).
    #[command(subcommand)]
    Approval(crate::approval_cmd::ApprovalCommand),
    /// Manage a tenant's upstream MCP servers (against --server).
    #[command(subcommand)]
    Upstream(crate::upstream_cmd::UpstreamCommand),
    /// Admin credentials.
    #[command(subcommand)]
    Admin(crate::admin_cmd::AdminCommand),
    /// MCP for local agents (`mcp stdio`: the board's tools on stdin/stdout).
    #[command(subcommand)]
    Mcp(crate::stdio_cmd::McpCommand),
    /// The runner role: per-run gateway actors and the register API (/v1/runs).
    Runner(RoleArgs),
    /// Run CMD as an agent run: register it, hand CMD its MCP endpoint, token and config, revoke when it ends.
    Run(crate::run_cmd::RunArgs),
}

/// Configuration flags shared by the roles.
#[derive(Debug, Clone, Args, Default)]
pub struct ConfigArgs {
    /// TOML configuration file.
    #[arg(long, env = "CORKBOARD_CONFIG")]
    pub config: Option<PathBuf>,
    /// HTTP listen address [default: 127.0.0.1:4891].
    #[arg(long)]
    pub listen: Option<String>,
    /// Data directory of the embedded store and secrets [default: ./.corkboard].
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Log format: auto, text or json.
    #[arg(long)]
    pub log_format: Option<String>,
    /// Base URL clients use to reach this server.
    #[arg(long)]
    pub public_url: Option<String>,
}

impl ConfigArgs {
    /// Loads settings: defaults < file < env < these flags.
    pub fn load(&self) -> Result<Settings> {
        let mut flags = Map::new();
        let mut put = |key: &str, value: Option<Value>| {
            if let Some(v) = value {
                flags.insert(key.to_owned(), v);
            }
        };
        put("listen", self.listen.clone().map(Value::from));
        put(
            "data_dir",
            self.data_dir
                .as_ref()
                .map(|p| Value::from(p.display().to_string())),
        );
        put("log_format", self.log_format.clone().map(Value::from));
        put("public_url", self.public_url.clone().map(Value::from));
        warn_unknown_env();
        Ok(Settings::load(self.config.as_deref(), flags)?)
    }
}

/// The `CORKBOARD_*` variables that are not settings: what this binary
/// reads itself, and what `corkboard run` hands an agent (which may run
/// `corkboard` in turn).
const OTHER_ENV_VARS: &[&str] = &[
    "CORKBOARD_CONFIG",
    "CORKBOARD_SERVER",
    crate::grant_cmd::SERVER_CA_FILE_ENV,
    crate::grant_cmd::ADMIN_TOKEN_ENV,
    crate::stdio_cmd::TOKEN_ENV,
    corkboard_telemetry::LOG_FILTER_ENV,
    corkboard_telemetry::LOG_FORMAT_ENV,
    corkboard_telemetry::OTLP_ENDPOINT_ENV,
    "CORKBOARD_MCP_URL",
    "CORKBOARD_MCP_CONFIG",
    "CORKBOARD_MCP_CONFIG_JSON",
];

/// One warning line on stderr per `CORKBOARD_*` variable nothing reads,
/// with the nearest known name: a misspelt setting otherwise leaves its
/// default in force without a word. A warning, not a refusal, since other
/// tools may share the prefix (unknown keys in a config file, which is
/// ours alone, are refused).
fn warn_unknown_env() {
    for unknown in Settings::unknown_env_vars(std::env::vars(), OTHER_ENV_VARS) {
        eprintln!("warning: {unknown}");
    }
}

#[derive(Debug, Args)]
pub struct RoleArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Validate the configuration, print it with secrets redacted, and exit.
    #[arg(long)]
    pub check_config: bool,
}

pub fn dispatch(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Serve(args) => crate::serve_cmd::run(args, crate::serve_cmd::Role::Serve),
        Command::Server(args) => crate::serve_cmd::run(args, crate::serve_cmd::Role::Server),
        Command::Grant(cmd) => crate::grant_cmd::run(cmd),
        Command::Webhook(cmd) => crate::webhook_cmd::run(cmd),
        Command::Approval(cmd) => crate::approval_cmd::run(cmd),
        Command::Admin(cmd) => crate::admin_cmd::run(cmd),
        Command::Upstream(cmd) => crate::upstream_cmd::run(cmd),
        Command::Mcp(cmd) => crate::stdio_cmd::run(cmd),
        Command::Runner(args) => crate::runner_cmd::run(args),
        Command::Run(args) => crate::run_cmd::run(args),
    }
}
