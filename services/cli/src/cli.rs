//! Command-line surface (design.md section 7). Every configuration flag is
//! also `CORKBOARD_<FLAG>` and a config-file key; flags win.
//!
//! Roles (`serve`, `server`, `runner`) take the server flags ([`ServerFlags`]);
//! client commands take only [`ConfigArgs`] (which board: `--config`,
//! `--data-dir`), so their help lists only what they use. Every command has
//! examples in its help (`a_help_test` below keeps it so); completions and
//! the man pages are generated from this definition (`completions`, `man`).

use anyhow::{Context, Result};
use clap::{Args, CommandFactory, Parser, Subcommand};
use corkboard_config::Settings;
use serde_json::{Map, Value};
use std::path::PathBuf;
use std::process::ExitCode;

/// Printed under `corkboard --help`: the exit codes scripts rely on.
const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  failure (server unreachable, bad configuration, operation refused or failed)
  2  usage (a flag or argument missing, malformed or refused as invalid)
  3  not found (the grant, run, issue, webhook or upstream named does not exist)
  4  authentication (no admin token, or one the server rejects or that may not do this)
`corkboard run` exits with its agent's status once the agent has started.

Examples:
  corkboard serve
  corkboard grant create --tenant acme --run run-1 --caps issues:read,issues:create
  corkboard issue list --tenant acme
  corkboard completions bash > ~/.local/share/bash-completion/completions/corkboard";

#[derive(Debug, Parser)]
#[command(
    name = "corkboard",
    version,
    about = "Boards for AI agent runs, over MCP.",
    after_help = EXIT_CODES
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Everything in one process on embedded defaults (SQLite board, in-process registry).
    #[command(after_help = "\
Examples:
  corkboard serve
  corkboard serve --data-dir /srv/corkboard --listen 0.0.0.0:4891 --public-url http://board.lan:4891
  corkboard serve --config corkboard.toml --check-config")]
    Serve(RoleArgs),
    /// The control plane: admin API, board API, web board, studio MCP endpoint.
    #[command(after_help = "\
Examples:
  corkboard server --config /etc/corkboard/config.toml
  corkboard server --config /etc/corkboard/config.toml --check-config")]
    Server(RoleArgs),
    /// Manage grants (locally in the data dir, or against --server).
    #[command(
        subcommand,
        after_help = "\
Examples:
  corkboard grant create --tenant acme --run run-1 --caps issues:read,issues:create
  corkboard grant list --tenant acme --json"
    )]
    Grant(crate::grant_cmd::GrantCommand),
    /// Read and change a tenant's issues (locally in the data dir, or against --server).
    #[command(
        subcommand,
        after_help = "\
Examples:
  corkboard issue list --tenant acme
  corkboard issue create --tenant acme --title \"Flaky test in CI\"
  corkboard issue close --tenant acme iss_01J9Z8Q4X2V6K3M5N7P9R1T3W5"
    )]
    Issue(crate::issue_cmd::IssueCommand),
    /// Webhook endpoints of a tenant (through a server's admin API).
    #[command(
        subcommand,
        after_help = "\
Examples:
  corkboard webhook list --server http://127.0.0.1:4891 --tenant acme"
    )]
    Webhook(crate::webhook_cmd::WebhookCommand),
    /// Approval policies and calls waiting for a person (through a server's admin API).
    #[command(
        subcommand,
        after_help = "\
Examples:
  corkboard approval list --server http://127.0.0.1:4891 --tenant acme --status pending
  corkboard approval decide --server http://127.0.0.1:4891 --tenant acme apr_01J9Z8Q4X2V6K3M5N7P9R1T3W5"
    )]
    Approval(crate::approval_cmd::ApprovalCommand),
    /// Manage a tenant's upstream MCP servers (against --server).
    #[command(
        subcommand,
        after_help = "\
Examples:
  corkboard upstream list --server http://127.0.0.1:4891 --tenant acme"
    )]
    Upstream(crate::upstream_cmd::UpstreamCommand),
    /// Admin credentials.
    #[command(
        subcommand,
        after_help = "\
Examples:
  export CORKBOARD_ADMIN_TOKEN=$(corkboard admin token --role platform-admin)"
    )]
    Admin(crate::admin_cmd::AdminCommand),
    /// MCP for local agents (`mcp stdio`: the board's tools on stdin/stdout).
    #[command(
        subcommand,
        after_help = "\
Examples:
  CORKBOARD_TOKEN=cbr_... corkboard mcp stdio"
    )]
    Mcp(crate::stdio_cmd::McpCommand),
    /// The runner role: per-run gateway actors and the register API (/v1/runs).
    #[command(after_help = "\
Examples:
  corkboard runner --config /etc/corkboard/runner.toml")]
    Runner(RoleArgs),
    /// Run CMD as an agent run: register it, hand CMD its MCP endpoint, token and config, revoke when it ends.
    #[command(after_help = "\
Examples:
  corkboard run --tenant acme --caps issues:read,issues:create -- claude -p \"triage the board\"
  corkboard run --tenant acme --caps issues:read --server http://127.0.0.1:4891 -- ./agent.sh
  corkboard run --tenant acme --caps issues:read,comments:write --min-integrity agent -- ./agent.sh")]
    Run(crate::run_cmd::RunArgs),
    /// Print a shell completion script for bash, zsh, fish, elvish or powershell.
    #[command(after_help = "\
Examples:
  corkboard completions bash > ~/.local/share/bash-completion/completions/corkboard
  corkboard completions zsh > \"${fpath[1]}/_corkboard\"
  corkboard completions fish > ~/.config/fish/completions/corkboard.fish")]
    Completions {
        /// The shell to complete for.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), or write one page per command into a directory.
    #[command(after_help = "\
Examples:
  corkboard man | man -l -
  corkboard man --dir ~/.local/share/man/man1")]
    Man {
        /// Write corkboard.1 and a page per subcommand (corkboard-grant-create.1, ...) here.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

/// Which board a command works on: the configuration file and the data dir.
#[derive(Debug, Clone, Args, Default)]
pub struct ConfigArgs {
    /// TOML configuration file.
    #[arg(long, env = "CORKBOARD_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Data directory of the embedded store and secrets [default:
    /// $XDG_DATA_HOME/corkboard, else ~/.local/share/corkboard].
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
}

/// Flags only a serving role reads.
#[derive(Debug, Clone, Args, Default)]
pub struct ServerFlags {
    /// HTTP listen address [default: 127.0.0.1:4891].
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// Log format: auto, text or json.
    #[arg(long, value_name = "FORMAT")]
    pub log_format: Option<String>,
    /// Base URL clients use to reach this server [default: http://<listen>,
    /// with 0.0.0.0 shown as 127.0.0.1].
    #[arg(long, value_name = "URL")]
    pub public_url: Option<String>,
}

impl ConfigArgs {
    /// Loads settings: defaults < file < env < these flags.
    pub fn load(&self) -> Result<Settings> {
        self.load_with(&ServerFlags::default())
    }

    /// [`Self::load`] with a role's flags as well.
    pub fn load_with(&self, server: &ServerFlags) -> Result<Settings> {
        let mut flags = Map::new();
        let mut put = |key: &str, value: Option<Value>| {
            if let Some(v) = value {
                flags.insert(key.to_owned(), v);
            }
        };
        put("listen", server.listen.clone().map(Value::from));
        put(
            "data_dir",
            self.data_dir
                .as_ref()
                .map(|p| Value::from(p.display().to_string())),
        );
        put("log_format", server.log_format.clone().map(Value::from));
        put("public_url", server.public_url.clone().map(Value::from));
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
    #[command(flatten)]
    pub server: ServerFlags,
    /// Validate the configuration, print it with secrets redacted, and exit.
    #[arg(long)]
    pub check_config: bool,
}

impl RoleArgs {
    pub fn load(&self) -> Result<Settings> {
        self.config.load_with(&self.server)
    }
}

pub fn dispatch(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Serve(args) => crate::serve_cmd::run(args, crate::serve_cmd::Role::Serve),
        Command::Server(args) => crate::serve_cmd::run(args, crate::serve_cmd::Role::Server),
        Command::Grant(cmd) => crate::grant_cmd::run(cmd),
        Command::Issue(cmd) => crate::issue_cmd::run(cmd),
        Command::Webhook(cmd) => crate::webhook_cmd::run(cmd),
        Command::Approval(cmd) => crate::approval_cmd::run(cmd),
        Command::Admin(cmd) => crate::admin_cmd::run(cmd),
        Command::Upstream(cmd) => crate::upstream_cmd::run(cmd),
        Command::Mcp(cmd) => crate::stdio_cmd::run(cmd),
        Command::Runner(args) => crate::runner_cmd::run(args),
        Command::Run(args) => crate::run_cmd::run(args),
        Command::Completions { shell } => {
            let mut command = Cli::command();
            clap_complete::generate(shell, &mut command, "corkboard", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
        Command::Man { dir } => {
            let command = Cli::command();
            match dir {
                Some(dir) => {
                    std::fs::create_dir_all(&dir)
                        .with_context(|| format!("cannot create {}", dir.display()))?;
                    clap_mangen::generate_to(command, &dir).with_context(|| {
                        format!("cannot write the man pages to {}", dir.display())
                    })?;
                }
                None => clap_mangen::Man::new(command).render(&mut std::io::stdout())?,
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

#[cfg(test)]
mod a_help_test {
    use super::*;

    /// Every command, with its path (`corkboard grant create`).
    fn every_command(
        command: &clap::Command,
        path: String,
        out: &mut Vec<(String, clap::Command)>,
    ) {
        out.push((path.clone(), command.clone()));
        for sub in command.get_subcommands() {
            if sub.get_name() == "help" {
                continue;
            }
            every_command(sub, format!("{path} {}", sub.get_name()), out);
        }
    }

    #[test]
    fn the_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_command_has_examples_and_every_flag_says_what_it_is() {
        let mut all = Vec::new();
        every_command(&Cli::command(), "corkboard".into(), &mut all);
        let mut missing = Vec::new();
        for (path, command) in &all {
            let examples = command
                .get_after_help()
                .map(|h| h.to_string())
                .is_some_and(|h| h.contains("Examples:\n") && h.contains("corkboard "));
            if !examples {
                missing.push(format!("{path}: no examples"));
            }
            for arg in command.get_arguments() {
                let id = arg.get_id().as_str();
                if matches!(id, "help" | "version") {
                    continue;
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{path}: --{id} has no help"));
                }
            }
        }
        assert!(missing.is_empty(), "{}", missing.join("\n"));
    }

    #[test]
    fn client_commands_list_only_their_flags() {
        let mut all = Vec::new();
        every_command(&Cli::command(), "corkboard".into(), &mut all);
        let roles = ["corkboard serve", "corkboard server", "corkboard runner"];
        for (path, command) in &all {
            if roles.contains(&path.as_str()) {
                continue;
            }
            for server_only in ["listen", "log_format", "public_url", "check_config"] {
                assert!(
                    command.get_arguments().all(|a| a.get_id() != server_only),
                    "{path} lists --{server_only}"
                );
            }
        }
    }

    #[test]
    fn every_command_that_prints_data_takes_json() {
        // What prints no data: the roles, `run` (its agent's output), the
        // stdio server, and the generators (their output is the format).
        let exempt = [
            "corkboard serve",
            "corkboard server",
            "corkboard runner",
            "corkboard run",
            "corkboard mcp stdio",
            "corkboard completions",
            "corkboard man",
        ];
        let mut all = Vec::new();
        every_command(&Cli::command(), "corkboard".into(), &mut all);
        for (path, command) in &all {
            let leaf = command.get_subcommands().next().is_none();
            if !leaf || exempt.contains(&path.as_str()) {
                continue;
            }
            assert!(
                command.get_arguments().any(|a| a.get_id() == "json"),
                "{path} has no --json"
            );
        }
    }
}
