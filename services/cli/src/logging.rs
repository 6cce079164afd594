//! Log set-up: human-readable text on a terminal, JSON otherwise (or as
//! configured), to stderr so stdout stays free for command output.

use corkboard_config::LogFormat;
use std::io::IsTerminal;
use tracing_subscriber::EnvFilter;

pub fn init(format: LogFormat) {
    let filter =
        EnvFilter::try_from_env("CORKBOARD_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let json = match format {
        LogFormat::Json => true,
        LogFormat::Text => false,
        LogFormat::Auto => !std::io::stderr().is_terminal(),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // A second init (tests, nested commands) keeps the first subscriber.
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}

/// Logs plus traces for the long-running roles: OpenTelemetry export when
/// `otlp_endpoint` is set. The guard flushes on `shutdown`.
pub fn init_telemetry(
    settings: &corkboard_config::Settings,
    service: &str,
) -> anyhow::Result<corkboard_telemetry::TelemetryGuard> {
    let mut config = corkboard_telemetry::TelemetryConfig::from_env(service);
    config.otlp_endpoint = settings.otlp_endpoint.clone();
    config.log_format = match settings.log_format {
        LogFormat::Json => corkboard_telemetry::LogFormat::Json,
        LogFormat::Text => corkboard_telemetry::LogFormat::Text,
        LogFormat::Auto => corkboard_telemetry::LogFormat::Auto,
    };
    Ok(corkboard_telemetry::init(config)?)
}
