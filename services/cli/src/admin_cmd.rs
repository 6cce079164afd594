//! `corkboard admin token`: mint an admin JWT from the configured signing key.

use crate::cli::ConfigArgs;
use crate::exit::{Kind, fail, usage};
use anyhow::{Context, Result};
use clap::Subcommand;
use corkboard_board::TenantId;
use std::io::Write;
use std::process::ExitCode;

#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// Print an admin JWT (for CORKBOARD_ADMIN_TOKEN or the web board sign-in).
    #[command(after_help = "\
Examples:
  export CORKBOARD_ADMIN_TOKEN=$(corkboard admin token --role platform-admin)
  corkboard admin token --role tenant-admin --tenant acme --ttl 1h
  corkboard admin token --config /etc/corkboard/config.toml --role viewer --tenant acme --json")]
    Token {
        #[command(flatten)]
        config: ConfigArgs,
        /// platform-admin, tenant-admin, approver or viewer.
        #[arg(long)]
        role: String,
        /// Required for every role but platform-admin.
        #[arg(long)]
        tenant: Option<String>,
        /// Lifetime, e.g. 15m, 12h.
        #[arg(long, default_value = "12h")]
        ttl: String,
        /// Subject recorded as the creator of grants made with it.
        #[arg(long, default_value = "cli")]
        subject: String,
        /// Print JSON (`{"token", "role", "tenant", "expires_in_seconds"}`) instead of the bare token.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(cmd: AdminCommand) -> Result<ExitCode> {
    match cmd {
        AdminCommand::Token {
            config,
            role,
            tenant,
            ttl,
            subject,
            json,
        } => {
            let settings = config.load()?;
            // A missing secret is made only by `serve`: one made here would
            // sign tokens no running server accepts.
            if settings.jwt_algorithm == corkboard_config::JwtAlgorithm::HS256
                && !settings.jwt_secret_path().is_file()
            {
                return Err(fail(
                    Kind::Failure,
                    format!(
                        "no signing secret at {}: start `corkboard serve` with this data dir once \
                         (it makes one), pass the --data-dir (and --config) the server uses, or set jwt_secret_file",
                        settings.jwt_secret_path().display()
                    ),
                ));
            }
            let tenant = tenant
                .map(TenantId::parse)
                .transpose()
                .context("--tenant")?;
            let ttl = corkboard_board::parse_ttl(&ttl).context("--ttl")?;
            let role: corkboard_grants::AdminRole = role
                .parse()
                .map_err(|err| usage(format!("--role: {err}")))?;
            let minter = crate::compose::admin_minter(&settings)?;
            let token = minter.mint(&subject, role, tenant.as_ref(), ttl)?;
            if json {
                let out = serde_json::json!({
                    "token": token,
                    "role": role,
                    "tenant": tenant,
                    "expires_in_seconds": ttl.as_secs(),
                });
                writeln!(std::io::stdout(), "{out}")?;
            } else {
                writeln!(std::io::stdout(), "{token}")?;
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
