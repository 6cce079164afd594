//! What a process tells this crate about how it wants to be observed.

use std::fmt;
use std::time::Duration;

/// Environment variable naming the OTLP/HTTP collector; tracing export is
/// off when it is unset or empty.
pub const OTLP_ENDPOINT_ENV: &str = "CORKBOARD_OTLP_ENDPOINT";
/// Environment variable holding the log filter (`tracing_subscriber`
/// `EnvFilter` syntax, e.g. `info,corkboard_mcp=debug`).
pub const LOG_FILTER_ENV: &str = "CORKBOARD_LOG";
/// Environment variable choosing the log format: `auto`, `text` or `json`.
pub const LOG_FORMAT_ENV: &str = "CORKBOARD_LOG_FORMAT";

/// How log lines are written (always to stderr unless a test supplies a
/// writer, so that stdout stays free for command output and MCP stdio).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// Text on a terminal, JSON otherwise (containers, CI, files).
    #[default]
    Auto,
    Text,
    Json,
}

impl LogFormat {
    /// Parses `auto`, `text` or `json` (case-insensitive).
    pub fn parse(text: &str) -> Option<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "auto" => Some(Self::Auto),
            "text" => Some(Self::Text),
            "json" => Some(Self::Json),
            _ => None,
        }
    }
}

/// Telemetry settings of one process.
#[derive(Clone)]
pub struct TelemetryConfig {
    /// `service.name` of exported spans, e.g. `corkboard-server`.
    pub service_name: String,
    /// Base URL of an OTLP/HTTP collector (`http://collector:4318`); spans
    /// go to `<endpoint>/v1/traces` unless the URL already names a path.
    /// `None`: no OpenTelemetry pipeline at all.
    pub otlp_endpoint: Option<String>,
    pub log_format: LogFormat,
    /// `EnvFilter` directives for logs (not for exported spans, which are
    /// always taken at `info` and above so that a quiet log level does not
    /// silence traces).
    pub log_filter: String,
    /// Upper bound on flushing buffered spans at shutdown.
    pub shutdown_timeout: Duration,
    /// Upper bound on one OTLP export request.
    pub export_timeout: Duration,
}

impl TelemetryConfig {
    /// Defaults: no export, automatic log format, `info` logs.
    pub fn new(service_name: impl Into<String>) -> Self {
        Self {
            service_name: service_name.into(),
            otlp_endpoint: None,
            log_format: LogFormat::Auto,
            log_filter: "info".to_owned(),
            shutdown_timeout: Duration::from_secs(3),
            export_timeout: Duration::from_secs(3),
        }
    }

    /// [`Self::new`], then `CORKBOARD_OTLP_ENDPOINT`, `CORKBOARD_LOG` and
    /// `CORKBOARD_LOG_FORMAT` when set. An unknown format keeps `auto`
    /// rather than failing start-up over a cosmetic setting.
    pub fn from_env(service_name: impl Into<String>) -> Self {
        let mut config = Self::new(service_name);
        config.otlp_endpoint = std::env::var(OTLP_ENDPOINT_ENV)
            .ok()
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty());
        if let Ok(filter) = std::env::var(LOG_FILTER_ENV)
            && !filter.trim().is_empty()
        {
            config.log_filter = filter;
        }
        if let Some(format) = std::env::var(LOG_FORMAT_ENV)
            .ok()
            .and_then(|v| LogFormat::parse(&v))
        {
            config.log_format = format;
        }
        config
    }
}

impl fmt::Debug for TelemetryConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TelemetryConfig")
            .field("service_name", &self.service_name)
            .field(
                "otlp_endpoint",
                &self.otlp_endpoint.as_deref().map(redact_url),
            )
            .field("log_format", &self.log_format)
            .field("log_filter", &self.log_filter)
            .field("shutdown_timeout", &self.shutdown_timeout)
            .field("export_timeout", &self.export_timeout)
            .finish()
    }
}

/// `http://user:secret@host/` → `http://***@host/`: endpoints are logged
/// and shown in errors, credentials in them must not be.
pub(crate) fn redact_url(url: &str) -> String {
    let Some(scheme) = url.find("://") else {
        return url.to_owned();
    };
    let authority_end = url[scheme + 3..]
        .find('/')
        .map_or(url.len(), |i| scheme + 3 + i);
    match url[..authority_end].rfind('@') {
        Some(at) if at > scheme => format!("{}***{}", &url[..scheme + 3], &url[at..]),
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn credentials_in_endpoints_are_redacted() {
        assert_eq!(redact_url("http://u:p@c:4318/x"), "http://***@c:4318/x");
        assert_eq!(redact_url("http://c:4318/a@b"), "http://c:4318/a@b");
        assert_eq!(redact_url("http://c:4318"), "http://c:4318");
    }
}
