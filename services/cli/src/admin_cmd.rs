//! `corkboard admin token`: mint an admin JWT from the configured signing key.

use crate::cli::ConfigArgs;
use anyhow::{Context, Result};
use clap::Subcommand;
use corkboard_board::TenantId;
use std::io::Write;
use std::process::ExitCode;

#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// Print an admin JWT (for CORKBOARD_ADMIN_TOKEN or the web board sign-in).
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
        } => {
            let settings = config.load()?;
            let tenant = tenant
                .map(TenantId::parse)
                .transpose()
                .context("--tenant")?;
            let ttl = corkboard_board::parse_ttl(&ttl).context("--ttl")?;
            let role = role.parse().context("--role")?;
            let minter = crate::compose::admin_minter(&settings)?;
            let token = minter.mint(&subject, role, tenant.as_ref(), ttl)?;
            writeln!(std::io::stdout(), "{token}")?;
            Ok(ExitCode::SUCCESS)
        }
    }
}
